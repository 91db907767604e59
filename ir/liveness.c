/* liveness.c — which nodes the outputs need, which kernel group computes
 * each node, and how long each value's bytes must live.
 *
 * One helper for everyone who asks: prune removes what ir_needed() leaves
 * out; the fuse pass counts readers; the plan pass places values by their
 * lifetimes; the code generator and the report read the same groups and the
 * same plan, so the report describes the code that is generated.
 *
 * Kernel groups come from the fuse pass's annotations (Node.grole/group).
 * Without them (-O0, or --passes without fuse) every needed computing node
 * is its own group, in graph order: "no annotation" is the one-node-per-kernel
 * schedule, so no renderer has to invent a grouping of its own. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

int ir_is_view(const Node *n) { return (ncc_ops[n->op].flags & (OPF_SHAPE_ONLY | OPF_TRAIN_ONLY)) != 0; }

Value *ir_view_root(Value *v) {
  while (v && v->def && ir_is_view(v->def) && v->def->nin >= 1) v = v->def->in[0];
  return v;
}

int64_t ir_slot_bytes(const Value *v) {
  int64_t b = ir_value_bytes(v);
  if (b < 1) b = 1;
  return (b + 255) / 256 * 256;
}

static void mark_root(const Graph *g, const Value *v, unsigned char *need) {
  if (v && ir_value_live(g, v)) need[v->def->id] = 1;
}

void ir_needed(const Graph *g, int train, unsigned char *need) {
  memset(need, 0, (size_t)g->nnodes);
  for (int i = 0; i < g->noutputs; i++) mark_root(g, g->outputs[i].v, need);
  if (train) {
    for (int i = 0; i < g->nlosses; i++) mark_root(g, g->losses[i].v, need);
    mark_root(g, g->train.minimize, need);
    /* the updates (optimizer, running statistics) are what a training step is for */
    for (int i = 0; i < g->nnodes; i++)
      if (!g->nodes[i]->dead && (ncc_ops[g->nodes[i]->op].flags & OPF_UPDATE)) need[i] = 1;
  }
  /* nodes are in topological order: one backward sweep */
  for (int i = g->nnodes - 1; i >= 0; i--) {
    const Node *n = g->nodes[i];
    if (!need[i] || n->dead) continue;
    for (int j = 0; j < n->nin; j++) need[n->in[j]->def->id] = 1;
  }
}

int ir_schedule(const Graph *g, const unsigned char *need, int *gid, unsigned char *role) {
  int k = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    gid[i] = -1;
    role[i] = GROLE_NONE;
    if (!ir_computes(n, need)) continue;
    if (g->ngroups > 0) {
      if (n->grole == GROLE_NONE || n->group < 0 || n->group >= g->ngroups)
        ncc_die("node %d (%s) computes but the fuse pass gave it no kernel group", n->id, ncc_ops[n->op].name);
      gid[i] = n->group;
      role[i] = (unsigned char)n->grole;
    } else {
      gid[i] = k++;
      role[i] = GROLE_MAIN;
    }
  }
  return g->ngroups > 0 ? g->ngroups : k;
}

int ir_side_ok(const Node *s, const Node *m) {
  if (!s || !m || s->load_time || m->load_time) return 0;
  switch (s->op) {
  case OP_BN_RUNNING: return m->op == OP_BN_STATS && s->nin == 3 && s->in[0] == m->out;
  case OP_BN_BWD_WEIGHT:   /* dy, x, stats: bn_bwd_data's dy, x, -, stats */
    return m->op == OP_BN_BWD_DATA && s->nin == 3 && m->nin == 4 && s->in[0] == m->in[0] && s->in[1] == m->in[1] &&
           s->in[2] == m->in[3] && s->a.eps == m->a.eps;
  case OP_SUM_TO: {        /* dy[N, C, H, W] -> [C] aligned at dim 1: the sum per channel */
    const Value *dy = s->in[0];
    return m->op == OP_BN_BWD_DATA && s->nin == 1 && dy == m->in[0] && dy->shape.rank == 4 && s->a.nlist == 1 &&
           s->a.axis == 1 && s->a.list[0] == dy->shape.d[1] && s->out->dtype == DT_F32;
  }
  default: return 0;
  }
}

int ir_prologue_ok(const Node *pool, const Node *m) {
  if (!pool || !m || pool->load_time || m->load_time || m->nin < 1) return 0;
  if (pool->op != OP_MAXPOOL2D && pool->op != OP_AVGPOOL2D) return 0;
  const Value *v = pool->out, *in = m->in[0];
  if (v->dtype != DT_F32 || v->shape.rank != 4 || v->nuses != 1) return 0;
  if (m->op == OP_CONV2D) return in == v && !ir_conv_direct(m);
  if (m->op != OP_LINEAR || !in->def || (in->def->op != OP_FLATTEN && in->def->op != OP_RESHAPE)) return 0;
  /* the flatten (or reshape) to [N, C*H*W], read by m alone */
  return in->def->in[0] == v && in->nuses == 1 && in->shape.rank == 2 && in->shape.d[0] == v->shape.d[0];
}

void ir_liveness(const Graph *g, int train, Liveness *lv) {
  int nn = g->nnodes, nv = g->next_value_id;
  memset(lv, 0, sizeof *lv);
  lv->nvalues = nv;
  lv->need = xmalloc((size_t)nn + 1);
  lv->gid = xmalloc(sizeof(int) * ((size_t)nn + 1));
  lv->role = xmalloc((size_t)nn + 1);
  ir_needed(g, train, lv->need);
  int ng = lv->ngroups = ir_schedule(g, lv->need, lv->gid, lv->role);
  lv->end = ng + 1;
  lv->main = calloc((size_t)ng + 1, sizeof(Node *));
  lv->stored = calloc((size_t)ng + 1, sizeof(Value *));
  lv->root = calloc((size_t)nv + 1, sizeof(Value *));
  lv->kind = calloc((size_t)nv + 1, 1);
  lv->first = xmalloc(sizeof(int) * ((size_t)nv + 1));
  lv->last = xmalloc(sizeof(int) * ((size_t)nv + 1));
  lv->readers = calloc((size_t)nv + 1, sizeof(int));
  if (!lv->main || !lv->stored || !lv->root || !lv->kind || !lv->readers) ncc_die("out of memory");
  for (int i = 0; i <= nv; i++) lv->first[i] = lv->last[i] = -1;

  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    int k = lv->gid[i];
    if (k < 0) continue;
    if (lv->role[i] == GROLE_MAIN) lv->main[k] = n;
    /* graph order: the chain's last node wins (a prologue comes before the main node) */
    if (lv->role[i] != GROLE_SIDE && lv->role[i] != GROLE_PROLOGUE) lv->stored[k] = n->out;
  }
  /* roots and readers: a node reads the bytes of its inputs' roots, each once */
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    if (!lv->need[i]) continue;
    lv->root[n->out->id] = ir_is_view(n) ? lv->root[n->in[0]->id] : n->out;
    if (ir_is_view(n)) continue;
    for (int j = 0; j < n->nin; j++) {
      Value *r = lv->root[n->in[j]->id];
      int dup = 0;
      for (int q = 0; q < j; q++) dup |= lv->root[n->in[q]->id] == r;
      if (!dup) lv->readers[r->id]++;
    }
  }
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    if (!lv->need[i]) continue;
    int id = n->out->id, k = lv->gid[i];
    if (n->op == OP_PARAM || n->op == OP_CONST || n->op == OP_LOSS_SCALE) lv->kind[id] = LV_PARAM;
    else if (n->op == OP_INPUT) lv->kind[id] = LV_INPUT;
    else if (ir_is_view(n)) lv->kind[id] = LV_VIEW;
    else if (k >= 0 && (lv->stored[k] == n->out || lv->role[i] == GROLE_SIDE))
      lv->kind[id] = n->out->grad_of ? LV_GRAD : n->load_time ? LV_LOAD : LV_ACT;
    if (lv->kind[id] == LV_ACT) lv->first[id] = lv->last[id] = k + 1;
    if (lv->kind[id] == LV_INPUT) lv->first[id] = 0, lv->last[id] = lv->end;
  }
  /* A load-time value that only load-time kernels read (a batchnorm scale's
   * intermediates, a weight a load-time kernel quantizes or copies) is dead
   * once M_prepare has run: scratch, an activation among the others, live
   * over the load-time groups that write and read it. */
  unsigned char *per_inf = calloc((size_t)nv + 1, 1);
  if (!per_inf) ncc_die("out of memory");
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    if (!lv->need[i] || n->load_time) continue;
    for (int j = 0; j < n->nin; j++) per_inf[lv->root[n->in[j]->id]->id] = 1;
  }
  for (int i = 0; i < g->noutputs; i++)
    if (ir_value_live(g, g->outputs[i].v) && lv->root[g->outputs[i].v->id]) per_inf[lv->root[g->outputs[i].v->id]->id] = 1;
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    int id = n->out->id;
    if (lv->need[i] && lv->kind[id] == LV_LOAD && !per_inf[id]) {
      lv->kind[id] = LV_ACT;
      lv->first[id] = lv->last[id] = lv->gid[i] + 1;
    }
  }
  free(per_inf);
  /* last readers: every input of every node of group k is read at k + 1 */
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    int k = lv->gid[i];
    if (k < 0) continue;
    for (int j = 0; j < n->nin; j++) {
      Value *r = lv->root[n->in[j]->id];
      if (lv->kind[r->id] == LV_ACT && lv->last[r->id] < k + 1) lv->last[r->id] = k + 1;
    }
  }
  /* what the caller reads back lives to the end */
  for (int i = 0; i < g->noutputs; i++)
    if (ir_value_live(g, g->outputs[i].v)) {
      Value *r = lv->root[g->outputs[i].v->id];
      if (r && lv->kind[r->id] == LV_ACT) lv->last[r->id] = lv->end;
    }
  if (train) {
    for (int i = 0; i < g->nlosses; i++)
      if (ir_value_live(g, g->losses[i].v)) {
        Value *r = lv->root[g->losses[i].v->id];
        if (r && lv->kind[r->id] == LV_ACT) lv->last[r->id] = lv->end;
      }
    if (g->train.minimize && ir_value_live(g, g->train.minimize)) {   /* the step reports its loss */
      Value *r = lv->root[g->train.minimize->id];
      if (r && lv->kind[r->id] == LV_ACT) lv->last[r->id] = lv->end;
    }
  }
  /* A group on the side stream (Node.stream, passes/streams.c) may run while
   * the stream-0 groups around it run: its operands stay live, and its values'
   * bytes are held, IR_STREAM_REACH positions either side of its own, so that
   * no group it may overlap there shares their bytes and has to wait for it
   * (codegen makes a kernel wait for the other stream wherever bytes are
   * shared all the same: this keeps the waits few, it does not make them
   * right). */
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    int k = lv->gid[i];
    if (k < 0 || !lv->main[k] || !lv->main[k]->stream) continue;
    int lo = k + 1 - IR_STREAM_REACH, hi = k + 1 + IR_STREAM_REACH;
    if (lo < 1) lo = 1;
    if (hi > lv->end - 1) hi = lv->end - 1;
    for (int j = 0; j < n->nin; j++) {
      Value *r = lv->root[n->in[j]->id];
      if (lv->kind[r->id] == LV_ACT && lv->last[r->id] < hi) lv->last[r->id] = hi;
    }
    if (lv->kind[n->out->id] == LV_ACT && lv->first[n->out->id] > lo) {
      lv->first[n->out->id] = lo;
      if (lv->last[n->out->id] < k + 1) lv->last[n->out->id] = k + 1;
    }
  }
  /* an input no needed node reads has no buffer (a label read only by the loss) */
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    if (n->op == OP_INPUT && lv->need[i] && lv->readers[n->out->id] == 0) {
      int out = 0;
      for (int o = 0; o < g->noutputs; o++) out |= lv->root[g->outputs[o].v->id] == n->out;
      if (!out) lv->kind[n->out->id] = LV_NONE, lv->first[n->out->id] = lv->last[n->out->id] = -1;
    }
  }
}

void ir_liveness_free(Liveness *lv) {
  free(lv->need);
  free(lv->gid);
  free(lv->role);
  free(lv->main);
  free(lv->stored);
  free(lv->root);
  free(lv->kind);
  free(lv->first);
  free(lv->last);
  free(lv->readers);
  memset(lv, 0, sizeof *lv);
}

int ir_inplace_ok(const Graph *g, const Liveness *lv, int k, const Value *a) {
  if (k < 0 || k >= lv->ngroups || !a || a->id >= lv->nvalues) return 0;
  const Node *m = lv->main[k];
  const Value *out = lv->stored[k];
  if (!m || !out || lv->kind[a->id] != LV_ACT || lv->kind[out->id] != LV_ACT) return 0;
  if (lv->last[a->id] != k + 1 || lv->first[out->id] != k + 1) return 0;
  if (ir_store_type(a) != ir_store_type(out) || shape_numel(&a->shape) != shape_numel(&out->shape)) return 0;
  if (!((ncc_ops[m->op].flags & OPF_ELEMWISE) || m->op == OP_BATCHNORM2D) || ir_is_view(m)) return 0;
  int64_t numel = shape_numel(&m->out->shape);
  int reads = 0;
  for (int i = m->id; i <= out->def->id && i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (lv->gid[i] != k) continue;
    for (int j = 0; j < n->nin; j++) {
      if (lv->root[n->in[j]->id] != a) continue;
      /* read at another index than the one written: a broadcast */
      if (shape_numel(&n->in[j]->shape) != numel) return 0;
      reads++;
    }
  }
  return reads > 0;
}
