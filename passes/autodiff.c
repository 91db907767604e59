/* autodiff.c — reverse-mode differentiation of the IR (the `autodiff` pass).
 *
 * For a training step it rewrites the forward graph into its training form
 * and appends the backward graph and the updates, all as ordinary IR nodes,
 * so that fusion, memory planning and codegen treat them like any other.
 *
 * \brief Three steps, on a graph with a `train` block (Graph.train):
 *
 *  1. The training forward.  Every batchnorm2d(x, w, b, rm, rv) becomes
 *        stats = bn_stats(x); y = bn_train(x, w, b, stats); bn_running(stats, rm, rv)
 *     (batch statistics; the running statistics updated in place, an
 *     OPF_UPDATE root), and every dropout/dropout2d becomes dropout_apply(x)
 *     with its p, slot = k for the k-th dropout in graph order (the mask's
 *     key) and axis = 1 for dropout2d (one mask value per (n, c)).  The graph
 *     is rebuilt in one walk: untouched nodes keep their Node and Value (their
 *     inputs remapped), the rewritten ones are made with ir_node(), so the
 *     order stays topological.
 *
 *  2. The backward sweep.  A value "needs a gradient" when it depends on a
 *     trainable parameter (a PARAM that is not a running statistic: PK_WEIGHT,
 *     PK_BIAS, PK_NONE); graph inputs, labels and constants never do.  The
 *     gradient of the minimised scalar is a CONST 1.0; walking the forward
 *     nodes backwards, each node whose output received a gradient calls its
 *     GRAD rule (ops.def), which appends the nodes computing the contributions
 *     to its inputs that need one.  Several contributions to one value are
 *     summed with add.  Broadcast operands (add/sub/mul/div, matmul's batch
 *     dimensions) get sum_to, right-aligned.
 *
 *  3. The updates.  The final gradient G of every trainable parameter P gets
 *     G->grad_of = P: codegen keeps it in the gradient region at P's place.
 *     G must be a value a kernel stores and only P's: when it is a constant,
 *     a parameter, a view (a reshape of another gradient) or already the
 *     gradient of another parameter (a + b with both parameters), the pass
 *     appends a copy, mul(G, const 1.0), and marks the copy instead (the fold
 *     pass, which would remove x * 1, never runs on a training graph).  One
 *     `optimizer` node reads every such gradient, in parameter graph order; it
 *     is an OPF_UPDATE root, so ir_needed() keeps the whole step.  A
 *     parameter the loss does not reach has no gradient value (its gradient
 *     bytes stay 0).
 */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct AdCtx AdCtx;
struct AdCtx {
  Graph *g;
  int nfwd;              /* forward nodes: g->nodes[0, nfwd) */
  unsigned char *req;    /* by forward node id: its value needs a gradient */
  Value **grad;          /* by forward value id: the gradient so far */
  int nvalues;           /* size of grad */
  Node *cur;             /* the node whose rule runs: loc and layer of what it appends */
  int cublas;            /* PassCtx.cublas: convolutions read their weight as it is (no tap-major) */
  int prec;              /* PassCtx.precision: the GEMMs' operands (PREC_*) */
  int dgrad_conv;        /* data gradients made forward convolutions (dgrad_as_conv) */
};

/* The precisions at which dgrad_as_conv applies: the tensor cores'. */
static int dgrad_prec(int prec) { return prec == PREC_TF32 || prec == PREC_FP16 || prec == PREC_BF16; }

static int trainable(const Node *n) {
  return n->op == OP_PARAM && n->param_kind != PK_RUNNING_MEAN && n->param_kind != PK_RUNNING_VAR;
}

/* ---- builders: the nodes a rule appends carry the forward node's place ---- */
static Value *mk(AdCtx *c, OpKind op, Value **in, int nin, const Attrs *a) {
  return ir_node(c->g, op, in, nin, a, NULL, c->cur ? c->cur->layer : NULL,
                 c->cur ? c->cur->loc : c->g->train.loc);
}
static Value *mk1(AdCtx *c, OpKind op, Value *x, const Attrs *a) { return mk(c, op, &x, 1, a); }
static Value *mk2(AdCtx *c, OpKind op, Value *x, Value *y, const Attrs *a) {
  Value *in[2] = {x, y};
  return mk(c, op, in, 2, a);
}
static Value *konst(AdCtx *c, double f) {
  Attrs a;
  ir_attrs_init(&a);
  a.fval = f;
  return mk(c, OP_CONST, NULL, 0, &a);
}
static Value *scale(AdCtx *c, Value *x, double f) {
  Value *k = x ? konst(c, f) : NULL;
  return k ? mk2(c, OP_MUL, x, k, NULL) : NULL;
}
static Attrs attrs_list(const Shape *s) {
  Attrs a;
  ir_attrs_init(&a);
  a.nlist = s->rank;
  for (int i = 0; i < s->rank; i++) a.list[i] = s->d[i];
  return a;
}
static int same_shape(const Shape *a, const Shape *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->d[i] != b->d[i]) return 0;
  return 1;
}
/* sum_to(x, target, axis) */
static Value *sum_to(AdCtx *c, Value *x, const Shape *target, int axis) {
  if (!x) return NULL;
  if (axis == 0 && same_shape(&x->shape, target)) return x;
  Attrs a = attrs_list(target);
  a.axis = axis;
  return mk1(c, OP_SUM_TO, x, &a);
}
/* The gradient of a broadcast operand of shape `target`: right-aligned sum. */
static Value *unbroadcast(AdCtx *c, Value *x, const Shape *target) {
  if (!x) return NULL;
  if (target->rank > x->shape.rank) {   /* cannot happen with NumPy broadcasting */
    diag_error(c->cur->loc, "internal: autodiff: a gradient of rank %d for an operand of rank %d", x->shape.rank,
               target->rank);
    return NULL;
  }
  return sum_to(c, x, target, x->shape.rank - target->rank);
}
/* The last two dimensions swapped. */
static Value *transpose_last2(AdCtx *c, Value *x) {
  Attrs a;
  ir_attrs_init(&a);
  int r = x->shape.rank;
  a.nlist = r;
  for (int i = 0; i < r; i++) a.list[i] = i;
  a.list[r - 2] = r - 1;
  a.list[r - 1] = r - 2;
  return mk1(c, OP_TRANSPOSE, x, &a);
}

static int needs(AdCtx *c, const Value *v) {
  return v->def->id < c->nfwd && c->g->nodes[v->def->id] == v->def && c->req[v->def->id];
}

/* Adds gv to the gradient of v (when v needs one).  -1 when gv is NULL (an error was reported). */
static int acc(AdCtx *c, Value *v, Value *gv) {
  if (!gv) return -1;
  if (!needs(c, v)) return 0;
  if (!same_shape(&gv->shape, &v->shape) || gv->dtype != v->dtype) {
    char b1[200], b2[200];
    diag_error(c->cur ? c->cur->loc : c->g->train.loc, "internal: autodiff: the gradient %s of a %s value %s",
               shape_str(b1, sizeof b1, gv->dtype, &gv->shape), ncc_ops[v->def->op].name,
               shape_str(b2, sizeof b2, v->dtype, &v->shape));
    return -1;
  }
  Value **slot = &c->grad[v->id];
  if (!*slot) {
    *slot = gv;
    return 0;
  }
  *slot = mk2(c, OP_ADD, *slot, gv, NULL);
  return *slot ? 0 : -1;
}

/* ---- the rules (the GRAD column of ops.def) ---- */
typedef int GradRule(AdCtx *c, Node *n, Value *dy);
static int grad_none(AdCtx *c, Node *n, Value *dy) {
  (void)c; (void)dy;
  diag_error(n->loc, "autodiff: %s has no gradient", ncc_ops[n->op].name);
  return -1;
}

/* The data gradient of a stride-1 convolution as a convolution, as cuDNN's
 * implicit-GEMM dgrad computes it.  With taps kh < KH, dilation d, padding p:
 *   dx[n][ci][h][w] = sum over co, kh, kw of wt[co][ci][kh][kw] dy[n][co][h + p - d kh][w + ..]
 * and with kh' = KH - 1 - kh, h + p - d kh = h - (d (KH - 1) - p) + d kh': a
 * conv2d of dy, padding d (KH - 1) - p (never negative: p <= d (KH - 1)), by
 * the weight with in and out swapped and its taps reversed, w'[ci][co][kh'][kw']
 * = wt[co][ci][KH - 1 - kh'][KW - 1 - kw'].  One transpose per step makes w'
 * (tap-major, [ci][kh'][kw'][co], when ir_conv_tap_major_ok takes the new
 * conv: its K tiles are then one tap's channels each, the window offset and
 * padding test worked out once a tile, the weight rows contiguous for
 * cp.async); the conv2d is then the forward's kernel, with its tiles,
 * pipeline, split-K and epilogues.  conv2d_bwd_data gathers dy and the
 * weight an element at a time instead.  Only groups = 1 (a group's K would
 * not be contiguous in the copy), a weight tap-major or 1x1 (the taps'
 * element gather would buy nothing), not a direct convolution (fewer than 8
 * input channels), and on tensor cores (tf32, fp16, bf16): there a K tile
 * of conv2d_bwd_data takes up to seven times the forward's instructions
 * (VGG-16 fp16: 218 to 656 against 85 to 98), its gathers waiting on their
 * divisions; the fp32 CUDA-core kernels spend a K tile in their FFMA loop
 * (the conv saves about an eighth of its instructions), not worth a copy of
 * the weight a step.  Returns 1 when it added the gradient to x's, 0 when it
 * does not apply (conv2d_bwd_data then), -1 on an error (reported). */
static int dgrad_as_conv(AdCtx *c, Node *n, Value *dy) {
  const Attrs *f = &n->a;
  Value *w = n->in[1];
  int64_t ci = w->shape.d[1], co = w->shape.d[0];
  int taps = f->kernel[0] * f->kernel[1];
  if (!dgrad_prec(c->prec)) return 0;
  if (f->wtap || f->stride[0] != 1 || f->stride[1] != 1 || f->groups != 1 || ci < 8) return 0;
  for (int i = 0; i < 2; i++)
    if (f->pad[i] > f->dilation[i] * (f->kernel[i] - 1)) return 0;
  int tap = taps > 1 && co % IR_CONV_TAP_K == 0 && !c->cublas;
  if (taps > 1 && !tap) return 0;
  Attrs t;   /* [co, ci, kh, kw] -> [ci, kh', kw', co] (tap-major) or [ci, co, kh', kw'] */
  ir_attrs_init(&t);
  t.nlist = 4;
  if (tap) t.list[0] = 1, t.list[1] = 2, t.list[2] = 3, t.list[3] = 0, t.flip = 1u << 1 | 1u << 2;
  else t.list[0] = 1, t.list[1] = 0, t.list[2] = 2, t.list[3] = 3;   /* 1x1: nothing to reverse */
  Value *wr = mk1(c, OP_TRANSPOSE, w, &t);
  if (!wr) return -1;
  Attrs a = *f;
  a.out = ci;
  a.has_bias = 0;
  a.wtap = tap;
  for (int i = 0; i < 2; i++) a.pad[i] = f->dilation[i] * (f->kernel[i] - 1) - f->pad[i];
  Value *dx = mk2(c, OP_CONV2D, dy, wr, &a);
  if (!dx) return -1;
  if (tap && !ir_conv_tap_major_ok(dx->def)) {   /* cannot happen: the same test, from the new conv */
    diag_error(n->loc, "internal: autodiff: the data gradient's conv2d refuses its tap-major weight");
    return -1;
  }
  c->dgrad_conv++;
  return acc(c, n->in[0], dx) ? -1 : 1;
}

/* Does the data gradient that stays conv2d_bwd_data (a strided one; one
 * dgrad_as_conv does not take) read the weight transposed once a step,
 * [ci, kh, kw, co] (Attrs.wtap)?  Its GEMM's K is tap-major (ir_dgrad_tap_k:
 * more than one tap, output channels a multiple of 16), so its A(m, k) =
 * w[co][m][tap] with k = tap O + co; transposed, a row m of A is
 * contiguous, and the tiled kernel loads it as a forward convolution loads
 * its weight: at fp16 and bf16 stored narrow by the copy and staged by
 * cp.async 16 bytes at a time, not gathered an element at a time as float32
 * and converted (ResNet-18's strided 3x3 data gradients at fp16: a K tile
 * of 87 to 92 instructions where it took 105 to 115, 8 global loads and a
 * cp.async where 16 loads).  Groups 1, 8 or more input channels (a GEMM,
 * ir_grad_gemm), at fp16 and bf16, not with --cublas.  Not at tf32, where the
 * copy stays float32: the K tile was 2 to 4 instructions shorter, and one of
 * ResNet-18's three kernels took 88 registers where it took 80 and lost a
 * block a SM. */
static int dgrad_wtap(const AdCtx *c, const Node *n) {
  const Attrs *f = &n->a;
  const Value *w = n->in[1];
  return (c->prec == PREC_FP16 || c->prec == PREC_BF16) && !c->cublas && f->groups == 1 && w->shape.d[1] >= 8 &&
         f->kernel[0] * f->kernel[1] > 1 && w->shape.d[0] % IR_CONV_TAP_K == 0;
}

static int grad_conv2d(AdCtx *c, Node *n, Value *dy) {
  Value *x = n->in[0], *w = n->in[1];
  Attrs a = n->a;
  a.out = w->shape.d[0];
  a.has_bias = 0;
  int done = needs(c, x) ? dgrad_as_conv(c, n, dy) : 0;
  if (done < 0) return -1;
  if (needs(c, x) && !done) {
    Attrs ad = a;
    ad.nlist = 4;
    for (int i = 0; i < 4; i++) ad.list[i] = x->shape.d[i];
    ad.wtap = dgrad_wtap(c, n);
    Value *wd = w;
    if (ad.wtap) {   /* [co, ci, kh, kw] -> [ci, kh, kw, co] */
      Attrs t;
      ir_attrs_init(&t);
      t.nlist = 4;
      t.list[0] = 1, t.list[1] = 2, t.list[2] = 3, t.list[3] = 0;
      if (!(wd = mk1(c, OP_TRANSPOSE, w, &t))) return -1;
    }
    if (acc(c, x, mk2(c, OP_CONV2D_BWD_DATA, dy, wd, &ad))) return -1;
  }
  if (needs(c, w) && acc(c, w, mk2(c, OP_CONV2D_BWD_WEIGHT, dy, x, &a))) return -1;
  if (n->nin == 3 && needs(c, n->in[2]) && acc(c, n->in[2], sum_to(c, dy, &n->in[2]->shape, 1))) return -1;
  return 0;
}

static int grad_linear(AdCtx *c, Node *n, Value *dy) {
  Value *x = n->in[0], *w = n->in[1];
  if (needs(c, x) && acc(c, x, mk2(c, OP_MATMUL, dy, w, NULL))) return -1;   /* [N, O] x [O, I] */
  if (needs(c, w) && acc(c, w, mk2(c, OP_LINEAR_BWD_WEIGHT, dy, x, NULL))) return -1;
  if (n->nin == 3 && needs(c, n->in[2]) && acc(c, n->in[2], sum_to(c, dy, &n->in[2]->shape, 1))) return -1;
  return 0;
}

static int grad_matmul(AdCtx *c, Node *n, Value *dy) {
  Value *a = n->in[0], *b = n->in[1];
  if (a->shape.rank < 2 || b->shape.rank < 2) {
    diag_error(n->loc, "autodiff: the gradient of matmul with a 1-D operand is not supported; reshape it to 2-D");
    return -1;
  }
  if (needs(c, a)) {
    Value *bt = transpose_last2(c, b);
    if (!bt || acc(c, a, unbroadcast(c, mk2(c, OP_MATMUL, dy, bt, NULL), &a->shape))) return -1;
  }
  if (needs(c, b)) {
    Value *at = transpose_last2(c, a);
    if (!at || acc(c, b, unbroadcast(c, mk2(c, OP_MATMUL, at, dy, NULL), &b->shape))) return -1;
  }
  return 0;
}

static int grad_layernorm(AdCtx *c, Node *n, Value *dy) {
  Value *x = n->in[0], *w = n->in[1], *b = n->in[2];
  Attrs a;
  ir_attrs_init(&a);
  a.eps = n->a.eps;
  if (needs(c, x)) {
    Value *in[3] = {dy, x, w};
    if (acc(c, x, mk(c, OP_LAYERNORM_BWD_DATA, in, 3, &a))) return -1;
  }
  if (needs(c, w) && acc(c, w, mk2(c, OP_LAYERNORM_BWD_WEIGHT, dy, x, &a))) return -1;
  if (needs(c, b) && acc(c, b, sum_to(c, dy, &b->shape, dy->shape.rank - 1))) return -1;
  return 0;
}

/* Activations whose derivative is a function of their output: relu and
 * relu6 (0 < y < 6 iff 0 < x < 6, a NaN stays a NaN), leaky_relu with a
 * positive slope (y > 0 iff x > 0), sigmoid y(1 - y), tanh 1 - y^2.  Their
 * gradient reads y, as torch's relu, sigmoid and tanh backward do: y is
 * usually kept anyway (the next layer's weight gradient reads it), so the
 * input need not be, and the op that produced it takes the activation as its
 * epilogue (conv+relu, bn+relu stay one kernel when training). */
static int act_from_output(const Node *n) {
  switch (n->op) {
  case OP_RELU: case OP_RELU6: case OP_SIGMOID: case OP_TANH: return 1;
  case OP_LEAKY_RELU: return n->a.slope > 0.0;
  default: return 0;
  }
}

static int grad_act(AdCtx *c, Node *n, Value *dy) {
  Attrs a;
  ir_attrs_init(&a);
  a.act = n->op;
  a.slope = n->a.slope;
  a.act_at_out = act_from_output(n);
  return acc(c, n->in[0], mk2(c, OP_ACT_GRAD, dy, a.act_at_out ? n->out : n->in[0], &a));
}

static int grad_add(AdCtx *c, Node *n, Value *dy) {
  for (int j = 0; j < 2; j++)
    if (needs(c, n->in[j]) && acc(c, n->in[j], unbroadcast(c, dy, &n->in[j]->shape))) return -1;
  return 0;
}

static int grad_sub(AdCtx *c, Node *n, Value *dy) {
  Value *a = n->in[0], *b = n->in[1];
  if (needs(c, a) && acc(c, a, unbroadcast(c, dy, &a->shape))) return -1;
  if (needs(c, b) && acc(c, b, scale(c, unbroadcast(c, dy, &b->shape), -1.0))) return -1;
  return 0;
}

static int grad_mul(AdCtx *c, Node *n, Value *dy) {
  Value *a = n->in[0], *b = n->in[1];
  if (needs(c, a) && acc(c, a, unbroadcast(c, mk2(c, OP_MUL, dy, b, NULL), &a->shape))) return -1;
  if (needs(c, b) && acc(c, b, unbroadcast(c, mk2(c, OP_MUL, dy, a, NULL), &b->shape))) return -1;
  return 0;
}

/* da = dy / b;  db = -dy * a / (b * b) */
static int grad_div(AdCtx *c, Node *n, Value *dy) {
  Value *a = n->in[0], *b = n->in[1];
  if (needs(c, a) && acc(c, a, unbroadcast(c, mk2(c, OP_DIV, dy, b, NULL), &a->shape))) return -1;
  if (needs(c, b)) {
    Value *num = mk2(c, OP_MUL, dy, a, NULL), *bb = mk2(c, OP_MUL, b, b, NULL);
    Value *q = num && bb ? mk2(c, OP_DIV, num, bb, NULL) : NULL;
    if (acc(c, b, scale(c, unbroadcast(c, q, &b->shape), -1.0))) return -1;
  }
  return 0;
}

static int grad_maxpool2d(AdCtx *c, Node *n, Value *dy) {
  Attrs a = n->a;
  return acc(c, n->in[0], mk2(c, OP_MAXPOOL2D_BWD, dy, n->in[0], &a));
}

static int grad_avgpool2d(AdCtx *c, Node *n, Value *dy) {
  Attrs a = n->a;
  Value *x = n->in[0];
  a.nlist = x->shape.rank;
  for (int i = 0; i < x->shape.rank; i++) a.list[i] = x->shape.d[i];
  return acc(c, x, mk1(c, OP_AVGPOOL2D_BWD, dy, &a));
}

static int grad_gavgpool2d(AdCtx *c, Node *n, Value *dy) {
  Attrs a = attrs_list(&n->in[0]->shape);
  return acc(c, n->in[0], mk1(c, OP_GAVGPOOL2D_BWD, dy, &a));
}

static int grad_softmax(AdCtx *c, Node *n, Value *dy) {
  Attrs a;
  ir_attrs_init(&a);
  a.axis = n->a.axis;
  return acc(c, n->in[0], mk2(c, OP_SOFTMAX_BWD, dy, n->out, &a));
}

static int grad_log_softmax(AdCtx *c, Node *n, Value *dy) {
  Attrs a;
  ir_attrs_init(&a);
  a.axis = n->a.axis;
  return acc(c, n->in[0], mk2(c, OP_LOG_SOFTMAX_BWD, dy, n->out, &a));
}

static int grad_concat(AdCtx *c, Node *n, Value *dy) {
  int64_t start = 0;
  for (int j = 0; j < n->nin; j++) {
    Value *x = n->in[j];
    int64_t len = x->shape.d[n->a.axis];
    if (needs(c, x)) {
      Attrs a;
      ir_attrs_init(&a);
      a.axis = n->a.axis;
      a.nlist = 2;
      a.list[0] = start;
      a.list[1] = len;
      if (acc(c, x, mk1(c, OP_SLICE, dy, &a))) return -1;
    }
    start += len;
  }
  return 0;
}

/* reshape and flatten: the gradient reshaped back (a view of dy) */
static int grad_reshape(AdCtx *c, Node *n, Value *dy) {
  Attrs a = attrs_list(&n->in[0]->shape);
  return acc(c, n->in[0], mk1(c, OP_RESHAPE, dy, &a));
}

static int grad_transpose(AdCtx *c, Node *n, Value *dy) {
  Attrs a;
  ir_attrs_init(&a);
  a.nlist = n->a.nlist;
  for (int i = 0; i < n->a.nlist; i++) a.list[n->a.list[i]] = i;
  return acc(c, n->in[0], mk1(c, OP_TRANSPOSE, dy, &a));
}

static int grad_loss(AdCtx *c, Node *n, Value *dy, OpKind bwd) {
  Value *in[3] = {dy, n->in[0], n->in[1]};
  return acc(c, n->in[0], mk(c, bwd, in, 3, NULL));
}
static int grad_cross_entropy(AdCtx *c, Node *n, Value *dy) { return grad_loss(c, n, dy, OP_CROSS_ENTROPY_BWD); }
static int grad_nll_loss(AdCtx *c, Node *n, Value *dy) { return grad_loss(c, n, dy, OP_NLL_LOSS_BWD); }

/* da = mse_loss_bwd(dloss, a, b); db = -da */
static int grad_mse_loss(AdCtx *c, Node *n, Value *dy) {
  Value *a = n->in[0], *b = n->in[1];
  if (!needs(c, a) && !needs(c, b)) return 0;
  Value *in[3] = {dy, a, b};
  Value *da = mk(c, OP_MSE_LOSS_BWD, in, 3, NULL);
  if (!da) return -1;
  if (needs(c, a) && acc(c, a, da)) return -1;
  if (needs(c, b) && acc(c, b, scale(c, da, -1.0))) return -1;
  return 0;
}

/* bn_train(x, w, b, stats): the batch statistics are part of the training-mode
 * backward of bn_bwd_data, so stats receive no gradient of their own. */
static int grad_bn_train(AdCtx *c, Node *n, Value *dy) {
  Value *x = n->in[0], *w = n->in[1], *b = n->in[2], *st = n->in[3];
  Attrs a;
  ir_attrs_init(&a);
  a.eps = n->a.eps;
  if (needs(c, x)) {
    Value *in[4] = {dy, x, w, st};
    if (acc(c, x, mk(c, OP_BN_BWD_DATA, in, 4, &a))) return -1;
  }
  if (needs(c, w)) {
    Value *in[3] = {dy, x, st};
    if (acc(c, w, mk(c, OP_BN_BWD_WEIGHT, in, 3, &a))) return -1;
  }
  if (needs(c, b) && acc(c, b, sum_to(c, dy, &b->shape, 1))) return -1;
  return 0;
}

/* the same mask (same slot, p and axis) applied to dy */
static int grad_dropout_apply(AdCtx *c, Node *n, Value *dy) {
  Attrs a = n->a;
  return acc(c, n->in[0], mk1(c, OP_DROPOUT_APPLY, dy, &a));
}

/* The GRAD column of ops.def. */
static GradRule *const grad_rules[OP__COUNT] = {
#define OP(name, str, flags, mn, mx, args, shape, emit, cost, expr, grad) grad_##grad,
#include "../ir/ops.def"
#undef OP
};

/* ---- step 1: the training forward ---- */
static void push_node(Graph *g, Node *n) {
  if (g->nnodes == g->cap) {
    g->cap = g->cap ? g->cap * 2 : 64;
    g->nodes = xrealloc(g->nodes, sizeof(Node *) * (size_t)g->cap);
  }
  n->id = g->nnodes;
  g->nodes[g->nnodes++] = n;
}

static int training_forward(Graph *g, int *nbn, int *ndrop) {
  int nold = g->nnodes, nv = g->next_value_id, rc = 0;
  Node **old = g->nodes;
  Value **map = calloc((size_t)nv + 1, sizeof(Value *));
  if (!map) ncc_die("out of memory");
  g->nodes = NULL;
  g->nnodes = g->cap = 0;
  for (int i = 0; i < nold; i++) {
    Node *n = old[i];
    if (n->dead) continue;
    for (int j = 0; j < n->nin; j++)
      if (map[n->in[j]->id]) n->in[j] = map[n->in[j]->id];
    Value *y = NULL;
    Attrs a;
    ir_attrs_init(&a);
    if (n->op == OP_BATCHNORM2D) {
      a.eps = n->a.eps;
      a.momentum = n->a.momentum;
      Value *st = ir_node(g, OP_BN_STATS, n->in, 1, &a, NULL, n->layer, n->loc);
      if (!st) { rc = -1; break; }
      Value *tin[4] = {n->in[0], n->in[1], n->in[2], st};
      y = ir_node(g, OP_BN_TRAIN, tin, 4, &a, n->name, n->layer, n->loc);
      Value *rin[3] = {st, n->in[3], n->in[4]};
      if (!y || !ir_node(g, OP_BN_RUNNING, rin, 3, &a, NULL, n->layer, n->loc)) { rc = -1; break; }
      (*nbn)++;
    } else if (n->op == OP_DROPOUT || n->op == OP_DROPOUT2D) {
      a.p = n->a.p;
      a.slot = (*ndrop)++;
      a.axis = n->op == OP_DROPOUT2D;
      y = ir_node(g, OP_DROPOUT_APPLY, n->in, 1, &a, n->name, n->layer, n->loc);
      if (!y) { rc = -1; break; }
    } else {
      push_node(g, n);
      continue;
    }
    map[n->out->id] = y;
  }
  if (rc == 0) {
    for (int i = 0; i < g->noutputs; i++)
      if (g->outputs[i].v && map[g->outputs[i].v->id]) g->outputs[i].v = map[g->outputs[i].v->id];
    for (int i = 0; i < g->nlosses; i++)
      if (g->losses[i].v && map[g->losses[i].v->id]) g->losses[i].v = map[g->losses[i].v->id];
    if (g->train.minimize && map[g->train.minimize->id]) g->train.minimize = map[g->train.minimize->id];
  }
  free(old);
  free(map);
  ir_compact(g);   /* ids in place already; recounts the uses */
  return rc;
}

int pass_autodiff(Graph *g, PassCtx *pc) {
  if (!g->train.present) {
    diag_error(g->train.loc, "autodiff: the model has no train block (train { optimizer ...; minimize LOSS })");
    return -1;
  }
  if (!pc->train) {
    diag_error(g->train.loc, "autodiff: the pass builds a training step; run it with --train");
    return -1;
  }
  for (int i = 0; i < g->nnodes; i++)
    if (ncc_ops[g->nodes[i]->op].flags & (OPF_INTERNAL | OPF_UPDATE)) {
      diag_error(g->train.loc, "autodiff: the graph is already differentiated (it has a %s node)",
                 ncc_ops[g->nodes[i]->op].name);
      return -1;
    }
  g->training = 1;
  ir_clear_schedule(g);
  int nbn = 0, ndrop = 0;   /* rewritten to their training forms */
  if (training_forward(g, &nbn, &ndrop)) return -1;

  Value *loss = g->train.minimize;
  if (!loss || !ir_value_live(g, loss) || loss->shape.rank != 0) {
    diag_error(g->train.loc, "autodiff: the train block minimises no scalar value of the graph");
    return -1;
  }
  AdCtx c = {0};
  c.g = g;
  c.nfwd = g->nnodes;
  c.nvalues = g->next_value_id;
  c.cublas = pc->cublas;
  c.prec = pc->precision;
  c.req = calloc((size_t)c.nfwd + 1, 1);
  c.grad = calloc((size_t)c.nvalues + 1, sizeof(Value *));
  if (!c.req || !c.grad) ncc_die("out of memory");
  for (int i = 0; i < c.nfwd; i++) {
    Node *n = g->nodes[i];
    if (n->op == OP_PARAM) c.req[i] = (unsigned char)trainable(n);
    else if (!(ncc_ops[n->op].flags & OPF_SOURCE))
      for (int j = 0; j < n->nin; j++) c.req[i] |= c.req[n->in[j]->def->id];
  }
  int rc = 0, nparams = 0;
  if (!c.req[loss->def->id]) {
    diag_error(g->train.loc, "autodiff: the minimised value depends on no trainable parameter");
    rc = -1;
  }
  if (rc == 0) {
    c.cur = NULL;
    c.grad[loss->id] = g->train.seed = konst(&c, 1.0);
    if (!c.grad[loss->id]) rc = -1;
  }
  for (int i = c.nfwd - 1; i >= 0 && rc == 0; i--) {
    Node *n = g->nodes[i];
    Value *dy = c.grad[n->out->id];
    if (!dy || (ncc_ops[n->op].flags & OPF_SOURCE)) continue;
    c.cur = n;
    if (grad_rules[n->op](&c, n, dy) != 0) rc = -1;
  }
  /* the parameters' final gradients, and the one update that reads them */
  Value **grads = NULL;
  if (rc == 0) {
    grads = calloc((size_t)c.nfwd + 1, sizeof(Value *));
    if (!grads) ncc_die("out of memory");
    for (int i = 0; i < c.nfwd && rc == 0; i++) {
      Node *p = g->nodes[i];
      Value *gv = p->op == OP_PARAM && trainable(p) ? c.grad[p->out->id] : NULL;
      if (!gv) continue;
      Node *d = gv->def;
      if ((ncc_ops[d->op].flags & OPF_SOURCE) || ir_is_view(d) || gv->grad_of) {
        c.cur = p;
        gv = scale(&c, gv, 1.0);   /* a copy a kernel stores: see the top */
        if (!gv) { rc = -1; break; }
      }
      gv->grad_of = p->out;
      grads[nparams++] = gv;
    }
    if (rc == 0 && nparams == 0) {
      diag_error(g->train.loc, "autodiff: no trainable parameter receives a gradient");
      rc = -1;
    }
    if (rc == 0 && !ir_node(g, OP_OPTIMIZER, grads, nparams, NULL, "optimizer", NULL, g->train.loc)) rc = -1;
  }
  if (rc == 0 && pc->verbose) {
    fprintf(stderr, "pass autodiff: %d forward nodes, %d gradient nodes, %d parameters", c.nfwd, g->nnodes - c.nfwd,
            nparams);
    if (dgrad_prec(c.prec))
      fprintf(stderr, "; %d data gradient%s of stride-1 convolutions as convolutions (the weight's taps reversed)",
              c.dgrad_conv, c.dgrad_conv == 1 ? "" : "s");
    fputc('\n', stderr);
  }
  free(grads);
  free(c.req);
  free(c.grad);
  return rc;
}
