/* batch.c — which batches one build can serve (Value.batch, Graph.max_batch).
 *
 * A model is compiled for a batch of N (the first dimension of its inputs).
 * A product serving requests gets batches of 1, 3 or 17; recompiling for each
 * is what this pass makes unnecessary.  It finds out whether every output row
 * r depends on row r of the inputs alone.  When it does, a batch b <= N needs
 * only the first b rows of every value on the way, and codegen launches only
 * the blocks that cover them (docs/generated-code.md, "Batches 1..N"): the
 * kernels keep their static shapes, buffers keep their size for N, and the
 * rows past b, computed or not, are never read for rows before b.
 *
 * Per value (VB_NONE / VB_ROWS / VB_MIXED, ir.h), in graph order:
 *   inputs          VB_ROWS, when every input has the same first dimension N
 *   parameters,
 *   constants       VB_NONE (and everything computed from them alone)
 *   elementwise     VB_ROWS when every batch-dependent operand has the output's
 *                   rank and first dimension (it is not broadcast across rows)
 *   conv2d, pools,
 *   batchnorm2d,
 *   linear          VB_ROWS when x is and the weights are VB_NONE
 *   softmax         VB_ROWS unless it normalises over axis 0
 *   layernorm       VB_ROWS (it normalises the last axis) for rank >= 2
 *   matmul          VB_ROWS when each batch-dependent operand has the output's
 *                   rank and the batch as its first axis, and b only as a
 *                   batch-of-matrices axis (rank >= 3), never as the k axis
 *   flatten,
 *   reshape         VB_ROWS when the first dimension is kept
 *   transpose       VB_ROWS when axis 0 stays first
 *   concat          VB_ROWS when not along axis 0
 *   anything else   VB_MIXED (losses, reductions over the batch, training ops)
 * The graph serves batches 1..N (Graph.max_batch = N) when every output is
 * VB_ROWS; otherwise Graph.batch_fixed names the first node that mixed rows
 * (or what else stood in the way) and the build runs batch N only.
 * Only the inference graph is analysed: a training step keeps its batch. */
#include <stdio.h>

#include "passes.h"

static int rows_like(const Value *v, int rank, int64_t n) {
  return v->batch == VB_NONE || (v->batch == VB_ROWS && v->shape.rank == rank && v->shape.d[0] == n);
}

/* VB_ROWS or VB_MIXED for node nd whose inputs are not all VB_NONE. */
static int node_batch(const Node *nd, int64_t n) {
  const Value *y = nd->out;
  const Value *x = nd->nin ? nd->in[0] : NULL;
  if (y->shape.rank < 1 || y->shape.d[0] != n) return VB_MIXED;
  int rank = y->shape.rank;
  const OpInfo *oi = &ncc_ops[nd->op];
  if (oi->flags & OPF_ELEMWISE) {
    for (int j = 0; j < nd->nin; j++)
      if (!rows_like(nd->in[j], rank, n)) return VB_MIXED;
    return VB_ROWS;
  }
  /* ops that read rows of x, with parameters for their other operands */
  int by_x = 0;
  switch (nd->op) {
  case OP_CONV2D: case OP_MAXPOOL2D: case OP_AVGPOOL2D: case OP_GAVGPOOL2D: case OP_BATCHNORM2D:
  case OP_LINEAR: case OP_DROPOUT: case OP_DROPOUT2D: case OP_FLATTEN: case OP_RESHAPE:
    by_x = 1;
    break;
  case OP_LAYERNORM:
    by_x = rank >= 2;
    break;
  case OP_SOFTMAX: case OP_LOG_SOFTMAX:
    by_x = nd->a.axis != 0;
    break;
  case OP_TRANSPOSE:
    by_x = nd->a.nlist >= 1 && nd->a.list[0] == 0;
    break;
  case OP_CONCAT:
    if (nd->a.axis == 0) return VB_MIXED;
    for (int j = 0; j < nd->nin; j++)
      if (!rows_like(nd->in[j], rank, n)) return VB_MIXED;
    return VB_ROWS;
  case OP_MATMUL:   /* a vector operand (rank 1) is a k axis */
    for (int j = 0; j < 2; j++) {
      const Value *v = nd->in[j];
      if (v->batch == VB_NONE) continue;
      if (rank < 2 || v->shape.rank < 2 || !rows_like(v, rank, n) || (j == 1 && rank < 3)) return VB_MIXED;
    }
    return VB_ROWS;
  default:
    return VB_MIXED;
  }
  if (!by_x || x->batch != VB_ROWS || x->shape.d[0] != n) return VB_MIXED;
  for (int j = 1; j < nd->nin; j++)
    if (nd->in[j]->batch != VB_NONE) return VB_MIXED;
  return VB_ROWS;
}

/* The node where rows were first mixed on the way to v (a VB_MIXED value):
 * up through mixed operands to a node whose operands were all unmixed. */
static const Node *mixer_of(const Value *v) {
  const Node *nd = v->def;
  for (;;) {
    const Node *up = NULL;
    for (int j = 0; j < nd->nin && !up; j++)
      if (nd->in[j]->batch == VB_MIXED) up = nd->in[j]->def;
    if (!up) return nd;
    nd = up;
  }
}

int pass_batch(Graph *g, PassCtx *c) {
  g->max_batch = 0;
  g->batch_fixed = NULL;
  g->batch_loc = (Loc){0};
  int64_t n = -1;
  const Node *in0 = NULL;
  for (int i = 0; i < g->nnodes; i++) {
    Node *nd = g->nodes[i];
    if (nd->op != OP_INPUT) continue;
    const Shape *s = &nd->out->shape;
    if (s->rank < 1) {
      if (!g->batch_fixed) {
        g->batch_fixed = arena_printf(g->arena, "input %s has no batch axis (a scalar)", nd->name);
        g->batch_loc = nd->loc;
      }
    } else if (n < 0) {
      n = s->d[0], in0 = nd;
    } else if (s->d[0] != n && !g->batch_fixed) {
      g->batch_fixed = arena_printf(g->arena, "inputs %s and %s differ in their first dimension (%lld, %lld)",
                                    in0->name, nd->name, (long long)n, (long long)s->d[0]);
      g->batch_loc = nd->loc;
    }
  }
  if (c->train && !g->batch_fixed) g->batch_fixed = "a training step runs the batch it was compiled for";
  if (n < 0 && !g->batch_fixed) g->batch_fixed = "the model has no inputs";
  int nrows = 0, nvals = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *nd = g->nodes[i];
    Value *y = nd->out;
    if (!y) continue;
    if (nd->op == OP_INPUT) {
      y->batch = g->batch_fixed ? VB_MIXED : VB_ROWS;
    } else {
      int dep = 0;
      for (int j = 0; j < nd->nin; j++) dep |= nd->in[j]->batch != VB_NONE;
      y->batch = !dep ? VB_NONE : g->batch_fixed ? VB_MIXED : node_batch(nd, n);
    }
    nvals += y->batch != VB_NONE;
    nrows += y->batch == VB_ROWS;
  }
  /* nodes that mix rows but feed no output (a loss kept for training) do not matter */
  for (int i = 0; i < g->noutputs && !g->batch_fixed; i++) {
    const Value *v = g->outputs[i].v;
    if (v->batch == VB_NONE) {
      g->batch_fixed = arena_printf(g->arena, "output %s does not depend on the inputs", g->outputs[i].name);
    } else if (v->batch == VB_MIXED) {
      const Node *mx = mixer_of(v);
      g->batch_fixed = arena_printf(g->arena, "%s%s%s mixes the rows of the batch, or moves the batch off axis 0, "
                                    "on the way to output %s", ncc_ops[mx->op].name, mx->name ? " " : "",
                                    mx->name ? mx->name : "", g->outputs[i].name);
      g->batch_loc = mx->loc;
    }
  }
  if (!g->batch_fixed) g->max_batch = n;
  if (c->verbose) {
    if (g->max_batch)
      fprintf(stderr, "pass batch: batches 1..%lld from one build; %d of %d batch-dependent values in rows\n",
              (long long)g->max_batch, nrows, nvals);
    else
      fprintf(stderr, "pass batch: the compiled batch only: %s\n", g->batch_fixed);
  }
  return 0;
}
