/* group.c — kernel groups: the unit codegen emits one kernel (or one GEMM call
 * sequence) for (ARCHITECTURE.md decision 2).
 *
 * For now every computing node is its own group with an empty epilogue; the
 * emitters are nevertheless written against groups (a main op plus an
 * elementwise epilogue chain), so the fusion pass only has to merge groups
 * (conv+bias+relu, add+relu, ...) without touching any emitter.  Nodes that
 * compute nothing form no group: sources (their buffers are filled by the
 * host), SHAPE_ONLY nodes (flatten/reshape view the input's bytes) and
 * TRAIN_ONLY identities (dropout at inference).
 *
 * group_fuse_epilogues() is the first such merge, opt-in (CodegenOpts.fuse)
 * until the fusion pass owns the decision: an elementwise node whose running
 * input is a group's stored value, read by nothing else, joins that group's
 * epilogue (conv+bias+relu, conv+bn+relu, add+relu, bn+relu...).  Its other operands must be
 * computed before the group runs. */
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

/* The node that really computes v's bytes (through flatten/reshape/dropout). */
static Node *producer(Value *v) {
  Node *n = v->def;
  while (node_is_alias(n)) n = n->in[0]->def;
  return n;
}

/* Every operand of n but group k's stored value must be stored by a group that
 * runs before k (or be a source).  A value stored by a group that later grows
 * an epilogue stays stored: it has a second reader (n), so it is never fused on. */
static int operands_ready(const GroupList *gl, const int *gof, const unsigned char *dead, const Node *n, int k) {
  const KGroup *h = &gl->g[k];
  for (int j = 0; j < n->nin; j++) {
    Value *v = n->in[j];
    if (v == group_out(h)) continue;
    Node *p = producer(v);
    if (ncc_ops[p->op].flags & OPF_SOURCE) continue;
    /* a load-time value (fold pass) is ready before any inference group runs */
    if (p->load_time && !h->main->load_time) continue;
    int q = gof[p->out->id];
    if (q < 0 || dead[q] || group_out(&gl->g[q]) != p->out || gl->g[q].main->id >= h->main->id) return 0;
  }
  return 1;
}

void group_fuse_epilogues(Graph *g, GroupList *gl, const unsigned char *live) {
  int nv = g->next_value_id;
  int *uses = calloc((size_t)nv + 1, sizeof(int));
  int *gof = malloc(sizeof(int) * ((size_t)nv + 1));   /* value id -> group storing it */
  unsigned char *dead = calloc((size_t)gl->n + 1, 1);
  if (!uses || !gof || !dead) ncc_die("out of memory");
  for (int i = 0; i <= nv; i++) gof[i] = -1;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || !live[n->id]) continue;
    for (int j = 0; j < n->nin; j++) uses[n->in[j]->id]++;
  }
  for (int i = 0; i < g->noutputs; i++) uses[g->outputs[i].v->id] += 2;   /* stored for the caller */
  for (int i = 0; i < gl->n; i++) {
    gof[gl->g[i].main->out->id] = i;
  }
  for (int i = 0; i < gl->n; i++) {
    KGroup *e = &gl->g[i];
    Node *n = e->main;
    /* batchnorm2d at inference is a per-channel affine map: elementwise too */
    int bn = n->op == OP_BATCHNORM2D;
    if (!((ncc_ops[n->op].flags & OPF_ELEMWISE) || bn) || node_is_alias(n) || e->nepi) continue;
    /* the running operand: an input stored by an earlier group, used only here */
    int from = -1;
    for (int j = 0; j < (bn ? 1 : n->nin) && from < 0; j++) {
      Value *v = n->in[j];
      int k = gof[v->id];
      if (k < 0 || dead[k] || uses[v->id] != 1 || group_out(&gl->g[k]) != v) continue;
      if (shape_numel(&v->shape) != shape_numel(&n->out->shape)) continue;
      if (n->nin == 2 && n->in[0] == n->in[1]) continue;   /* x op x: keep it simple */
      if (operands_ready(gl, gof, dead, n, k)) from = k;
    }
    if (from < 0) continue;
    KGroup *h = &gl->g[from];
    h->epi = xrealloc(h->epi, sizeof(Node *) * (size_t)(h->nepi + 1));
    h->epi[h->nepi++] = n;
    gof[n->out->id] = from;
    dead[i] = 1;
  }
  int k = 0;
  for (int i = 0; i < gl->n; i++) {
    if (dead[i]) continue;
    gl->g[k++] = gl->g[i];
  }
  gl->n = k;
  free(uses);
  free(gof);
  free(dead);
}
