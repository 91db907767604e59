/* fuse.c — epilogue fusion.
 *
 * \brief Fusion is grouping (ARCHITECTURE.md, decision 2): codegen emits one
 * kernel per group, and this pass decides that groups may take elementwise
 * epilogues: a single-use elementwise node (bias add, ReLU, residual add) or
 * an inference batchnorm joins the kernel of the node that produces its
 * running operand, so conv+bn+relu is one kernel and its intermediates never
 * reach memory.  The rules themselves live beside the groups they merge
 * (codegen/group.c, group_fuse_epilogues) so that codegen and the report form
 * exactly the same kernels; this pass switches them on for the graph, which
 * keeps `--passes=` and `-O0` (no fusion) meaningful.  The IR itself is not
 * rewritten: `--emit=report` shows what was fused, one row per kernel. */
#include "passes.h"

int pass_fuse(Graph *g, PassCtx *c) {
  (void)c;
  g->fuse_epilogues = 1;
  return 0;
}
