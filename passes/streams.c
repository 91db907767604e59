/* streams.c — which kernel groups run on the side stream.
 *
 * A step's kernels go to one stream in launch order, so a kernel waits for
 * the one before it even where it reads nothing that kernel wrote: ResNet's
 * downsampling 1x1 convolution waits for the block's first two, a training
 * step's weight gradients wait for the input gradients of the layers before.
 * On a GPU that leaves SMs idle whenever a kernel fills fewer than all of
 * them.  This pass puts the groups off the step's longest chain on a second
 * stream (Node.stream = 1 on the group's main node), where they run beside
 * the chain:
 *
 *   - the groups form a graph: group q comes before k when k reads a value q
 *     stores (through views);
 *   - each group's work is estimated: its multiply-adds for the GEMM-like ops
 *     (forward and gradients), else the elements it reads and writes;
 *   - the longest path through the graph by that work is the chain; a group
 *     on no longest path (its slack, the chain's length less the longest path
 *     through it, is above 0) goes to the side stream.
 *
 * What the pass does not decide: where a kernel waits.  Codegen records an
 * event after a kernel and makes the other stream wait for it wherever the
 * two kernels' buffers meet (one writes bytes the other reads or writes; the
 * kernels' own arguments, byte ranges of the arena), so that correctness
 * rests on the rendered launches, not on this estimate; ir_liveness keeps a
 * side group's bytes apart from its neighbours' (IR_STREAM_REACH) so that
 * such waits are few.  Load-time groups, and GEMMs on the cuBLAS path (its
 * calls share a handle and a scratch buffer), stay on stream 0.
 * --streams=off (PassCtx.streams 0) leaves every group on stream 0. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static double numel(const Value *v) { return (double)shape_numel(&v->shape); }

/* multiply-adds of a GEMM-like op, else the elements read and written */
static double node_work(const Node *n) {
  const Value *o = n->out;
  switch (n->op) {
  case OP_CONV2D:           /* w [Co, Ci/g, kh, kw] */
  case OP_CONV2D_BWD_DATA:  /* dy, w: as the forward */
    return (n->op == OP_CONV2D ? numel(o) : numel(n->in[0])) * (numel(n->in[1]) / (double)n->in[1]->shape.d[0]);
  case OP_CONV2D_BWD_WEIGHT:   /* dy, x -> dw */
    return numel(n->in[0]) * (numel(o) / (double)o->shape.d[0]);
  case OP_LINEAR:
  case OP_MATMUL: {
    const Shape *a = &n->in[0]->shape;
    return numel(o) * (double)(a->rank ? a->d[a->rank - 1] : 1);
  }
  case OP_LINEAR_BWD_WEIGHT: {   /* dy [.., O], x [.., I] -> dw [O, I] */
    const Shape *dy = &n->in[0]->shape;
    return numel(o) * (numel(n->in[0]) / (double)(dy->rank ? dy->d[dy->rank - 1] : 1));
  }
  default: {
    double w = numel(o);
    for (int j = 0; j < n->nin; j++) w += numel(n->in[j]);
    return w;
  }
  }
}

static int gemm_op(int op) {
  return (ncc_ops[op].flags & OPF_GEMM_LIKE) || op == OP_CONV2D_BWD_DATA || op == OP_CONV2D_BWD_WEIGHT ||
         op == OP_LINEAR_BWD_WEIGHT;
}

/* ---- lighter branches first (before fuse; inference) ----
 * Where an elementwise node (ResNet's residual add) reads two values that two
 * branches compute, each with a GEMM of its own, the fuse pass lets it join
 * the kernel of the branch computed last, and that branch's kernel then waits
 * for the other's.  The lighter branch (the downsampling convolution) is
 * moved before the heavier: the add joins the heavier branch's last kernel,
 * and the lighter branch's kernels depend on neither, so the streams pass
 * puts them on the side stream.  A stable partition of the nodes from the
 * heavier branch's first to the lighter branch's last: the lighter branch's
 * ancestors first, the rest after, each in its order (a topological order
 * still: an ancestor's inputs are ancestors). */
static void ancestors(const Graph *g, const Node *n, unsigned char *anc) {
  memset(anc, 0, (size_t)g->nnodes);
  anc[n->id] = 1;
  for (int i = n->id; i >= 0; i--)
    if (anc[i])
      for (int j = 0; j < g->nodes[i]->nin; j++) anc[g->nodes[i]->in[j]->def->id] = 1;
}

static int computes(const Node *n) {
  return !n->dead && !n->load_time && n->op != OP_PARAM && n->op != OP_INPUT && n->op != OP_CONST &&
         !(ncc_ops[n->op].flags & OPF_SHAPE_ONLY);
}

int passes_branches_first(Graph *g, int verbose) {
  int nn = g->nnodes, moved = 0;
  unsigned char *ae = malloc((size_t)nn + 1), *al = malloc((size_t)nn + 1);
  Node **tmp = malloc(sizeof(Node *) * ((size_t)nn + 1));
  if (!ae || !al || !tmp) ncc_die("out of memory");
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (!computes(n) || !(ncc_ops[n->op].flags & OPF_ELEMWISE) || n->nin != 2) continue;
    Node *a = n->in[0]->def, *b = n->in[1]->def;
    if (a == b || !computes(a) || !computes(b)) continue;
    Node *early = a->id < b->id ? a : b, *late = a->id < b->id ? b : a;
    ancestors(g, early, ae);
    ancestors(g, late, al);
    if (al[early->id] || ae[late->id]) continue;   /* one reads the other: a chain, not two branches */
    double we = 0, wl = 0;
    int ge = 0, gl = 0, lo = late->id;
    for (int j = 0; j <= late->id; j++) {
      const Node *m = g->nodes[j];
      if (!computes(m) || ae[j] == al[j]) continue;
      int gemm = (ncc_ops[m->op].flags & OPF_GEMM_LIKE) != 0;
      if (ae[j]) we += node_work(m), ge |= gemm, lo = j < lo ? j : lo;
      else wl += node_work(m), gl |= gemm;
    }
    if (!ge || !gl || !(wl < we)) continue;   /* the heavier branch is computed last already */
    int k = lo;
    for (int j = lo; j <= late->id; j++)
      if (al[j]) tmp[k++] = g->nodes[j];
    for (int j = lo; j <= late->id; j++)
      if (!al[j]) tmp[k++] = g->nodes[j];
    memcpy(&g->nodes[lo], &tmp[lo], sizeof(Node *) * (size_t)(late->id + 1 - lo));
    for (int j = lo; j < k; j++) g->nodes[j]->id = j;
    moved++;
  }
  for (int i = 0; i < g->nnodes; i++)   /* a topological order still (by construction) */
    for (int j = 0; j < g->nodes[i]->nin; j++) NCC_ASSERT(g->nodes[i]->in[j]->def->id < i);
  if (verbose && moved)
    fprintf(stderr, "pass fuse: %d lighter branch%s computed before the heavier one beside it (the streams pass "
            "runs %s on the side stream)\n", moved, moved == 1 ? "" : "es", moved == 1 ? "it" : "them");
  free(ae);
  free(al);
  free(tmp);
  return moved;
}

int pass_streams(Graph *g, PassCtx *c) {
  for (int i = 0; i < g->nnodes; i++) g->nodes[i]->stream = 0;
  if (!c->streams) {
    if (c->verbose) fprintf(stderr, "pass streams: off (--streams=off): every kernel on stream 0\n");
    return 0;
  }
  Liveness lv;
  ir_liveness(g, g->training, &lv);
  int ng = lv.ngroups, nn = g->nnodes;
  double *work = calloc((size_t)ng + 1, sizeof(double)), *head = calloc((size_t)ng + 1, sizeof(double)),
         *tail = calloc((size_t)ng + 1, sizeof(double));
  unsigned char *edge = calloc((size_t)ng * (size_t)ng + 1, 1);   /* edge[q * ng + k]: k reads what q stores */
  unsigned char *fixed = calloc((size_t)ng + 1, 1);                /* stays on stream 0 */
  if (!work || !head || !tail || !edge || !fixed) ncc_die("out of memory");
  for (int i = 0; i < nn; i++) {
    const Node *n = g->nodes[i];
    int k = lv.gid[i];
    if (k < 0) continue;
    work[k] += node_work(n);
    if (n->load_time || (c->cublas && gemm_op(n->op))) fixed[k] = 1;
    for (int j = 0; j < n->nin; j++) {
      const Value *r = lv.root[n->in[j]->id];
      int q = r && r->def ? lv.gid[r->def->id] : -1;
      if (q >= 0 && q != k) edge[(size_t)q * (size_t)ng + (size_t)k] = 1;
    }
  }
  /* groups are in a topological order (launch order): longest paths in one sweep each way */
  double chain = 0, total = 0;
  for (int k = 0; k < ng; k++) {
    double best = 0;
    for (int q = 0; q < k; q++)
      if (edge[(size_t)q * (size_t)ng + (size_t)k] && head[q] > best) best = head[q];
    head[k] = best + work[k];
    if (head[k] > chain) chain = head[k];
    total += work[k];
  }
  for (int k = ng - 1; k >= 0; k--) {
    double best = 0;
    for (int s = k + 1; s < ng; s++)
      if (edge[(size_t)k * (size_t)ng + (size_t)s] && tail[s] > best) best = tail[s];
    tail[k] = best + work[k];
  }
  int side = 0;
  double side_work = 0;
  for (int k = 0; k < ng; k++) {
    Node *m = lv.main[k];
    double through = head[k] + tail[k] - work[k];
    if (!m || fixed[k] || through >= chain * (1 - 1e-9)) continue;
    m->stream = 1;
    side++;
    side_work += work[k];
  }
  if (c->verbose) {
    if (side)
      fprintf(stderr, "pass streams: %d of %d kernel groups on the side stream, off the longest chain (%.0f%% of the "
              "step's estimated work; the chain %.0f%%)\n", side, ng, total > 0 ? 100.0 * side_work / total : 0.0,
              total > 0 ? 100.0 * chain / total : 0.0);
    else
      fprintf(stderr, "pass streams: every kernel group on the longest chain: one stream\n");
  }
  free(work);
  free(head);
  free(tail);
  free(edge);
  free(fixed);
  ir_liveness_free(&lv);
  return 0;
}
