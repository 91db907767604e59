/* passes.h — every pass has one signature; pipeline.c lists the pipelines.
 * A pass returns 0, or -1 after reporting a user error through diag. */
#ifndef NCC_PASSES_H
#define NCC_PASSES_H
#include "../ir/ir.h"

typedef struct PassCtx {
  int train;          /* building a training step (autodiff etc.), else inference */
  int opt_level;      /* -O0..-O3 */
  int verify;         /* run ir_verify after each pass */
  const char *print_after;  /* pass name, "all", or NULL */
  int verbose;        /* -v: each pass prints its statistics to stderr */
} PassCtx;

typedef int (*PassFn)(Graph *g, PassCtx *c);
typedef struct Pass { const char *name; PassFn fn; const char *brief; } Pass;

/* Runs `list` (comma-separated pass names) or, when NULL, the pipeline of
 * c->opt_level.  An unknown pass name is a user error. */
int passes_run(Graph *g, PassCtx *c, const char *list);
const Pass *pass_lookup(const char *name);

int pass_prune(Graph *g, PassCtx *c);
int pass_fold(Graph *g, PassCtx *c);         /* constant folding; batchnorm folded, its parameter arithmetic at load time */
int pass_fuse(Graph *g, PassCtx *c);         /* epilogue fusion: elementwise chains into their producer's kernel */        /* inference: drop train-only identities (dropout), dead nodes */
#endif
