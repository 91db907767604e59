/* group.c — kernel groups: the unit codegen emits one kernel (or one GEMM call
 * sequence) for (ARCHITECTURE.md decision 2).
 *
 * For now every computing node is its own group with an empty epilogue; the
 * emitters are nevertheless written against groups (a main op plus an
 * elementwise epilogue chain), so the fusion pass only has to merge groups
 * (conv+bias+relu, add+relu, ...) without touching any emitter.  Nodes that
 * compute nothing form no group: sources (their buffers are filled by the
 * host), SHAPE_ONLY nodes (flatten/reshape view the input's bytes) and
 * TRAIN_ONLY identities (dropout at inference). */
#include <stdlib.h>

#include "cg.h"

int node_is_alias(const Node *n) {
  unsigned f = ncc_ops[n->op].flags;
  return (f & (OPF_SHAPE_ONLY | OPF_TRAIN_ONLY)) != 0;
}

Value *group_out(const KGroup *gr) {
  return gr->nepi ? gr->epi[gr->nepi - 1]->out : gr->main->out;
}

GroupList group_form(Graph *g, const unsigned char *live) {
  GroupList gl = {NULL, 0};
  gl.g = xmalloc(sizeof(KGroup) * (size_t)(g->nnodes ? g->nnodes : 1));
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || !live[n->id]) continue;
    if ((ncc_ops[n->op].flags & OPF_SOURCE) || node_is_alias(n)) continue;
    KGroup *gr = &gl.g[gl.n++];
    gr->main = n;
    gr->epi = NULL;
    gr->nepi = 0;
    gr->pro = NULL;
    gr->npro = 0;
  }
  return gl;
}

void group_free(GroupList *gl) {
  for (int i = 0; i < gl->n; i++) {
    free(gl->g[i].epi);
    free(gl->g[i].pro);
  }
  free(gl->g);
  gl->g = NULL;
  gl->n = 0;
}
