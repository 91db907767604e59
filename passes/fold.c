/* fold.c — constant folding, and the parameter-only subgraphs that run once
 * at load time instead of in every inference.
 *
 * \brief Five rewrites, in this order:
 *
 *  1. Constant folding: an elementwise node whose inputs are all CONST becomes
 *     a CONST, computed here in float as the kernel would (PyTorch's NaN
 *     semantics).  Exact identities go too: x * 1, 1 * x, x / 1, x - (+0) and
 *     x + (-0).  `x + 0.0` stays: -0 + +0 is +0 in IEEE arithmetic (and in
 *     PyTorch), so dropping it would turn a -0 into -0 and 1/(x + 0) into -Inf.
 *
 *  2. Inference batchnorm into the convolution before it, when the
 *     convolution's output has no other reader:
 *        bn(conv(x, w, b))  ->  conv(x, w * s[:, None, None, None], (b - mean) * s + beta)
 *        s = gamma / sqrt(running_var + eps)          (b - mean is -mean without a bias)
 *     The folded weight and bias are new values computed by new nodes whose
 *     inputs are parameters and constants only; those nodes are marked
 *     Node.load_time.  The original parameters stay in the graph under their
 *     state_dict names (M_load reads them, M_save writes them); the folded
 *     values are not parameters.
 *
 *  3. Any other inference batchnorm (after an add, on a graph input) becomes
 *     x * scale + shift with scale = s and shift = beta - mean * s, both
 *     [1, C, 1, 1] and computed at load time, so that what is left per
 *     inference is a broadcast multiply-add the fusion pass merges into the
 *     producer's epilogue.
 *
 *  4. Every other elementwise or view node whose inputs are all parameters,
 *     constants or load-time values is marked load-time as well.
 *
 *  5. A convolution whose implicit GEMM gains from it reads its weight
 *     reordered tap-major, [out, kh, kw, in/groups], by a load-time
 *     transpose (reorder_conv_weights, below).
 *
 * Codegen gives load-time nodes their own kernels, launched once by the
 * generated M_prepare() after create and after every M_load, and the values
 * that inference reads persistent buffers that memory planning never shares;
 * those only load-time kernels read are scratch (ir_liveness;
 * docs/generated-code.md).
 * Rewrites 2 to 5 are for inference only: in training the parameters change
 * every step, so nothing computed from them may be kept.
 *
 * New nodes are appended by ir_node(); the pass then restores a topological
 * order (each appended node goes right before its first reader), drops what
 * nothing reads, compacts, and moves the load-time nodes before the
 * per-inference ones (passes_load_time_first: they run first, once). */
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Stats {
  int bn_conv, bn_affine, consts, identities, load_time, tap_major;
} Stats;

/* ---- small graph helpers ------------------------------------------------ */
/* Use counts follow, so that a later rewrite in the same walk (bn(bn(conv)))
 * sees who reads the new value. */
void passes_replace_uses(Graph *g, Value *old, Value *new_) {
  for (int i = 0; i < g->nnodes; i++)
    for (int j = 0; j < g->nodes[i]->nin; j++)
      if (g->nodes[i]->in[j] == old) {
        g->nodes[i]->in[j] = new_;
        old->nuses--;
        new_->nuses++;
      }
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i].v == old) g->outputs[i].v = new_;
  for (int i = 0; i < g->nlosses; i++)
    if (g->losses[i].v == old) g->losses[i].v = new_;
  if (g->train.minimize == old) g->train.minimize = new_;
}

/* Is v something the caller sees (an output, a loss, the minimised value)? */
static int is_root(const Graph *g, const Value *v) {
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i].v == v) return 1;
  for (int i = 0; i < g->nlosses; i++)
    if (g->losses[i].v == v) return 1;
  return g->train.minimize == v;
}

/* Known before any input arrives: a parameter, a constant or a load-time value. */
static int is_static(const Value *v) {
  const Node *d = v->def;
  return d->op == OP_PARAM || d->op == OP_CONST || d->load_time;
}

/* Builds a node that cannot fail (its shapes were checked by construction);
 * a refusal would be ncc's bug. */
Value *passes_mk(Graph *g, OpKind op, Value *a, Value *b, const Attrs *at, const Node *like, int load_time) {
  Value *in[2] = {a, b};
  Value *v = ir_node(g, op, in, b ? 2 : (a ? 1 : 0), at, op == OP_CONST ? NULL : like->layer, like->layer, like->loc);
  if (!v) ncc_die("passes: building %s for %s failed", ncc_ops[op].name, like->layer ? like->layer : "?");
  v->def->load_time = load_time;
  return v;
}

/* A scalar constant; an existing one of the same value is shared (one eps for
 * every batchnorm of a network). */
Value *passes_const(Graph *g, double f, const Node *like) {
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (!n->dead && n->op == OP_CONST && n->a.fval == f) return n->out;
  }
  Attrs a;
  ir_attrs_init(&a);
  a.fval = f;
  return passes_mk(g, OP_CONST, NULL, NULL, &a, like, 0);
}

/* x viewed as `rank` dims with C at position `at` and 1 elsewhere. */
Value *passes_channel_view(Graph *g, Value *x, int rank, int at, const Node *like) {
  Attrs a;
  ir_attrs_init(&a);
  a.nlist = rank;
  for (int i = 0; i < rank; i++) a.list[i] = i == at ? shape_numel(&x->shape) : 1;
  return passes_mk(g, OP_RESHAPE, x, NULL, &a, like, 1);
}

/* ---- 1. constants and identities ------------------------------------------ */
/* The value of an elementwise op on constants, in float as the kernels compute
 * it, with PyTorch's NaN semantics.  Returns 0 for ops it does not evaluate. */
static int eval_const(const Node *n, float x, float y, float *r) {
  switch (n->op) {
  case OP_RELU: *r = x != x ? x : fmaxf(x, 0.0f); return 1;
  case OP_RELU6: *r = x != x ? x : fminf(fmaxf(x, 0.0f), 6.0f); return 1;
  case OP_SIGMOID: *r = 1.0f / (1.0f + expf(-x)); return 1;
  case OP_TANH: *r = tanhf(x); return 1;
  case OP_GELU: *r = 0.5f * x * (1.0f + erff(x * 0.707106781f)); return 1;
  case OP_SILU: *r = x / (1.0f + expf(-x)); return 1;
  case OP_HARDSWISH: *r = x * fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f; return 1;
  case OP_LEAKY_RELU: *r = x > 0.0f ? x : x * (float)n->a.slope; return 1;
  case OP_SQRT: *r = sqrtf(x); return 1;
  case OP_ADD: *r = x + y; return 1;
  case OP_SUB: *r = x - y; return 1;
  case OP_MUL: *r = x * y; return 1;
  case OP_DIV: *r = x / y; return 1;
  /* int8's weight quantization (the precision pass, after fold) */
  case OP_QSCALE:
  case OP_QUANTIZE:
  case OP_CAST:   /* fp16/bf16 weights converted at load (the precision pass, after fold) */
  /* random in training, gone at inference (prune) */
  case OP_DROPOUT:
  case OP_DROPOUT2D:
  /* not elementwise */
  case OP_INPUT:
  case OP_PARAM:
  case OP_CONST:
  case OP_LOSS_SCALE:
  case OP_CONV2D:
  case OP_LINEAR:
  case OP_MATMUL:
  case OP_BATCHNORM2D:
  case OP_LAYERNORM:
  case OP_MAXPOOL2D:
  case OP_AVGPOOL2D:
  case OP_GAVGPOOL2D:
  case OP_SOFTMAX:
  case OP_LOG_SOFTMAX:
  case OP_CONCAT:
  case OP_FLATTEN:
  case OP_RESHAPE:
  case OP_TRANSPOSE:
  case OP_CROSS_ENTROPY:
  case OP_NLL_LOSS:
  case OP_MSE_LOSS:
  /* training ops (autodiff): never in a graph fold sees */
  case OP_BN_STATS: case OP_BN_TRAIN: case OP_BN_RUNNING: case OP_DROPOUT_APPLY: case OP_ACT_GRAD:
  case OP_CONV2D_BWD_DATA: case OP_CONV2D_BWD_WEIGHT: case OP_LINEAR_BWD_WEIGHT: case OP_SUM_TO:
  case OP_MAXPOOL2D_BWD: case OP_AVGPOOL2D_BWD: case OP_GAVGPOOL2D_BWD: case OP_SOFTMAX_BWD: case OP_LOG_SOFTMAX_BWD:
  case OP_CROSS_ENTROPY_BWD: case OP_NLL_LOSS_BWD: case OP_MSE_LOSS_BWD: case OP_LAYERNORM_BWD_DATA:
  case OP_LAYERNORM_BWD_WEIGHT: case OP_BN_BWD_DATA: case OP_BN_BWD_WEIGHT: case OP_SLICE: case OP_OPTIMIZER:
  case OP__COUNT: return 0;
  }
  return 0;
}

static int is_const(const Value *v, double f) {
  return v->def->op == OP_CONST && (float)v->def->a.fval == (float)f &&
         !signbit((float)v->def->a.fval) == !signbit((float)f);   /* signbit's nonzero is not always 1 */
}

static int same_type(const Value *a, const Value *b) {
  if (a->dtype != b->dtype || a->shape.rank != b->shape.rank) return 0;
  for (int i = 0; i < a->shape.rank; i++)
    if (a->shape.d[i] != b->shape.d[i]) return 0;
  return 1;
}

/* The operand an exact identity leaves (x for x * 1), or NULL. */
static Value *identity_of(const Node *n) {
  if (n->nin != 2) return NULL;
  Value *a = n->in[0], *b = n->in[1], *keep = NULL;
  switch (n->op) {
  case OP_MUL: keep = is_const(b, 1.0) ? a : is_const(a, 1.0) ? b : NULL; break;
  case OP_DIV: keep = is_const(b, 1.0) ? a : NULL; break;
  case OP_SUB: keep = is_const(b, 0.0) ? a : NULL; break;                    /* x - (+0) */
  case OP_ADD: keep = is_const(b, -0.0) ? a : is_const(a, -0.0) ? b : NULL; break;   /* x + (-0) */
  default: break;
  }
  /* only when the result is the operand itself, not a broadcast of it */
  return keep && same_type(keep, n->out) ? keep : NULL;
}

static void fold_constants(Graph *g, Stats *st) {
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || !(ncc_ops[n->op].flags & OPF_ELEMWISE)) continue;
    int all = n->nin > 0;
    for (int j = 0; j < n->nin; j++) all &= n->in[j]->def->op == OP_CONST;
    float r;
    if (all && n->out->shape.rank == 0 &&
        eval_const(n, (float)n->in[0]->def->a.fval, n->nin > 1 ? (float)n->in[1]->def->a.fval : 0.0f, &r)) {
      /* the node becomes the constant in place: same value, same position */
      n->op = OP_CONST;
      n->nin = 0;
      n->a.fval = r;
      st->consts++;
      continue;
    }
    Value *keep = identity_of(n);
    if (keep) {
      passes_replace_uses(g, n->out, keep);
      n->dead = 1;
      st->identities++;
    }
  }
}

/* ---- 2./3. batchnorm ------------------------------------------------------- */
/* Names the folded values after what they are ("bn1.scale", "conv1.folded_weight"),
 * so reports and `-v` lines tell them apart from the layer they came from. */
static Value *named(Graph *g, Value *v, const Node *layer, const char *what) {
  v->def->name = arena_printf(g->arena, "%s.%s", layer->layer ? layer->layer : ncc_ops[layer->op].name, what);
  return v;
}

/* s = gamma / sqrt(running_var + eps), [C], at load time. */
static Value *bn_scale(Graph *g, Node *bn) {
  Value *ve = passes_mk(g, OP_ADD, bn->in[4], passes_const(g, bn->a.eps, bn), NULL, bn, 1);
  return named(g, passes_mk(g, OP_DIV, bn->in[1], passes_mk(g, OP_SQRT, ve, NULL, NULL, bn, 1), NULL, bn, 1), bn, "scale");
}

static int fold_bn_into_conv(Graph *g, Node *bn) {
  Value *x = bn->in[0];
  Node *cv = x->def;
  if (cv->op != OP_CONV2D || cv->dead || x->nuses != 1 || is_root(g, x)) return 0;
  for (int j = 1; j < cv->nin; j++)
    if (!is_static(cv->in[j])) return 0;
  Value *s = bn_scale(g, bn);
  Value *w = named(g, passes_mk(g, OP_MUL, cv->in[1], passes_channel_view(g, s, cv->in[1]->shape.rank, 0, bn), NULL, bn, 1),
                   cv, "folded_weight");
  Value *b;
  if (cv->a.has_bias)   /* (b - mean) * s + beta */
    b = passes_mk(g, OP_ADD, passes_mk(g, OP_MUL, passes_mk(g, OP_SUB, cv->in[2], bn->in[3], NULL, bn, 1), s, NULL, bn, 1), bn->in[2], NULL, bn, 1);
  else                  /* beta - mean * s */
    b = passes_mk(g, OP_SUB, bn->in[2], passes_mk(g, OP_MUL, bn->in[3], s, NULL, bn, 1), NULL, bn, 1);
  named(g, b, cv, "folded_bias");
  Attrs a = cv->a;
  a.has_bias = 1;
  Value *in[3] = {cv->in[0], w, b};
  Value *y = ir_node(g, OP_CONV2D, in, 3, &a, cv->name, cv->layer, cv->loc);
  if (!y) ncc_die("fold: rebuilding %s with the folded batchnorm failed", cv->layer ? cv->layer : "conv2d");
  passes_replace_uses(g, bn->out, y);
  bn->dead = cv->dead = 1;
  return 1;
}

static void fold_bn_affine(Graph *g, Node *bn) {
  Value *s = bn_scale(g, bn);
  Value *shift = named(g, passes_mk(g, OP_SUB, bn->in[2], passes_mk(g, OP_MUL, bn->in[3], s, NULL, bn, 1), NULL, bn, 1), bn, "shift");
  int rank = bn->in[0]->shape.rank;
  Value *y = passes_mk(g, OP_MUL, bn->in[0], passes_channel_view(g, s, rank, 1, bn), NULL, bn, 0);
  y = passes_mk(g, OP_ADD, y, passes_channel_view(g, shift, rank, 1, bn), NULL, bn, 0);
  passes_replace_uses(g, bn->out, y);
  bn->dead = 1;
}

static void fold_batchnorms(Graph *g, Stats *st) {
  int n0 = g->nnodes;   /* the nodes appended below are never batchnorms */
  for (int i = 0; i < n0; i++) {
    Node *n = g->nodes[i];
    if (n->dead || n->op != OP_BATCHNORM2D) continue;
    int ok = 1;
    for (int j = 1; j < 5; j++) ok &= is_static(n->in[j]);
    if (!ok) continue;   /* statistics fed at run time (a hand-built graph): nothing to precompute */
    if (fold_bn_into_conv(g, n)) st->bn_conv++;
    else fold_bn_affine(g, n), st->bn_affine++;
  }
}

/* ---- 4. the rest of the parameter-only subgraphs ---------------------------- */
static void mark_load_time(Graph *g) {
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    unsigned f = ncc_ops[n->op].flags;
    if (n->dead || n->load_time || !(f & (OPF_ELEMWISE | OPF_SHAPE_ONLY)) || (f & OPF_TRAIN_ONLY)) continue;
    int all = n->nin > 0;
    for (int j = 0; j < n->nin; j++) all &= is_static(n->in[j]);
    n->load_time = all;
  }
}

/* Is v a per-output-channel factor of a [out, ...] weight: [out, 1, 1, 1]
 * (a batchnorm's scale, as fold_bn_into_conv views it) or a scalar? */
static int per_out_channel(const Value *v) {
  if (v->shape.rank == 0) return 1;
  if (v->shape.rank != 4) return 0;
  return v->shape.d[1] == 1 && v->shape.d[2] == 1 && v->shape.d[3] == 1;
}

static int same_dims(const Shape *a, const Shape *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->d[i] != b->d[i]) return 0;
  return 1;
}

/* ---- 5. conv weights reordered tap-major at load ---------------------------
 * A conv2d that ir_conv_tap_major_ok accepts, with a weight known at load (a
 * parameter, or a folded weight), reads it through a load-time transpose to
 * [out, kh, kw, in/groups] (Attrs.wtap): the implicit GEMM's K then runs over
 * taps, each K tile one tap's channels, so its loads of the image need one
 * window offset and one padding test a tile instead of one an element.  A
 * parameter's copy is shared by the convolutions that read it; the parameter
 * stays as it is (M_load fills it, M_save writes it).  Not with --cublas (its
 * im2col buffer takes the weight as it is). */
static void reorder_conv_weights(Graph *g, const PassCtx *c, Stats *st) {
  if (c->cublas) return;
  Value **copy = arena_alloc(g->arena, sizeof(Value *) * ((size_t)g->next_value_id + 1));
  Attrs a;
  ir_attrs_init(&a);
  a.nlist = 4;
  a.list[0] = 0, a.list[1] = 2, a.list[2] = 3, a.list[3] = 1;   /* [out, in/g, kh, kw] -> [out, kh, kw, in/g] */
  int nn = g->nnodes;
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    if (n->dead || n->load_time || n->a.wtap || !ir_conv_tap_major_ok(n)) continue;
    Value *w = n->in[1];
    if (w->dtype != DT_F32 || (w->def->op != OP_PARAM && !w->def->load_time)) continue;
    Node *d = w->def;
    if (d->op == OP_MUL && d->load_time && w->nuses == 1 && same_dims(&d->in[0]->shape, &w->shape) &&
        d->in[0]->dtype == DT_F32 && per_out_channel(d->in[1])) {
      /* a folded weight w * s[out]: reorder w and scale the copy, mul(transpose(w), s), which
       * the fuse pass computes in the transpose's kernel (move-epilogue): no float32 product
       * kept beside its reorder */
      Value *wi = d->in[0];
      if (!copy[wi->id]) copy[wi->id] = passes_mk(g, OP_TRANSPOSE, wi, NULL, &a, n, 1);
      Value *m = passes_mk(g, OP_MUL, copy[wi->id], d->in[1], NULL, n, 1);
      m->def->name = d->name;
      n->in[1] = m;
      w->nuses--;
      m->nuses++;
      n->a.wtap = 1;
      st->tap_major++;
      continue;
    }
    if (!copy[w->id]) copy[w->id] = passes_mk(g, OP_TRANSPOSE, w, NULL, &a, n, 1);
    n->in[1] = copy[w->id];
    n->a.wtap = 1;
    w->nuses--;
    copy[w->id]->nuses++;
    st->tap_major++;
  }
  if (st->tap_major) passes_reorder(g);
}

/* ---- order, dead code ------------------------------------------------------ */
/* The sources, then the load-time nodes, then the rest, each in its order
 * (topological still: a load-time node reads sources and load-time nodes
 * only).  Load-time kernels run first (M_prepare), and so they are numbered
 * first: none sits between a pooling and the GEMM that may load it (fuse's
 * pool-prologue rule takes the pooling's kernel when it is the last one). */
void passes_load_time_first(Graph *g) {
  Node **order = malloc(sizeof(Node *) * ((size_t)g->nnodes + 1));
  if (!order) ncc_die("out of memory");
  int k = 0;
  for (int pass = 0; pass < 3; pass++)
    for (int i = 0; i < g->nnodes; i++) {
      Node *n = g->nodes[i];
      int cls = (ncc_ops[n->op].flags & OPF_SOURCE) ? 0 : n->load_time ? 1 : 2;
      if (cls == pass) order[k++] = n;
    }
  memcpy(g->nodes, order, sizeof(Node *) * (size_t)g->nnodes);
  for (int i = 0; i < g->nnodes; i++) g->nodes[i]->id = i;
  free(order);
}

/* Places n after its inputs (iteratively: a chain of appended nodes may be long). */
static void place(Node *n, char *done, Node **order, int *k, Node **stack) {
  int sp = 0;
  stack[sp++] = n;
  while (sp) {
    Node *t = stack[sp - 1];
    if (done[t->id]) { sp--; continue; }
    int pushed = 0;
    for (int j = t->nin - 1; j >= 0; j--) {   /* the first input is placed first */
      Node *d = t->in[j]->def;
      if (!done[d->id]) { stack[sp++] = d; pushed = 1; }
    }
    if (pushed) continue;
    done[t->id] = 1;
    order[(*k)++] = t;
    sp--;
  }
}

void passes_reorder(Graph *g) {
  int nn = g->nnodes;
  char *done = calloc((size_t)nn + 1, 1);
  Node **order = malloc(sizeof(Node *) * ((size_t)nn + 1));
  size_t slots = 1;   /* a node pushes its inputs once (when it is next on top they are all placed) */
  for (int i = 0; i < nn; i++) slots += (size_t)g->nodes[i]->nin + 1;
  Node **stack = malloc(sizeof(Node *) * slots);
  if (!done || !order || !stack) ncc_die("out of memory");
  int k = 0;
  for (int i = 0; i < nn; i++) {
    /* appended nodes wait for their first reader, unless nothing reads them */
    if (g->nodes[i]->dead) continue;
    place(g->nodes[i], done, order, &k, stack);
  }
  for (int i = 0; i < nn; i++)
    if (!done[i]) order[k++] = g->nodes[i];   /* dead ones: compacted away */
  memcpy(g->nodes, order, sizeof(Node *) * (size_t)nn);
  for (int i = 0; i < nn; i++) g->nodes[i]->id = i;
  free(done);
  free(order);
  free(stack);
}

/* Drops computing nodes and constants that nothing reads (parameters and
 * inputs stay: they are the model's interface). */
static void drop_unused(Graph *g) {
  int *uses = calloc((size_t)g->nnodes + 1, sizeof(int));
  if (!uses) ncc_die("out of memory");
  for (int i = 0; i < g->nnodes; i++)
    for (int j = 0; j < g->nodes[i]->nin; j++)
      if (!g->nodes[i]->dead) uses[g->nodes[i]->in[j]->def->id]++;
  for (int i = g->nnodes - 1; i >= 0; i--) {
    Node *n = g->nodes[i];
    if (n->dead || n->op == OP_INPUT || n->op == OP_PARAM || uses[i] || is_root(g, n->out)) continue;
    n->dead = 1;
    for (int j = 0; j < n->nin; j++) uses[n->in[j]->def->id]--;
  }
  free(uses);
  ir_compact(g);
}

/* A graph autodiff has differentiated is left alone: its gradient copies
 * (mul(g, const 1), autodiff.c) must stay, and its training ops have no
 * folding rules.  (Before autodiff, in training, only constants fold.) */
static int differentiated(const Graph *g) {
  for (int i = 0; i < g->nnodes; i++)
    if (ncc_ops[g->nodes[i]->op].flags & (OPF_INTERNAL | OPF_UPDATE)) return 1;
  return 0;
}

int pass_fold(Graph *g, PassCtx *c) {
  Stats st = {0};
  if (differentiated(g)) {
    if (c->verbose) fprintf(stderr, "pass fold: nothing (a differentiated training graph: fold runs before autodiff)\n");
    return 0;
  }
  fold_constants(g, &st);
  ir_compact(g);          /* use counts, for "the convolution has no other reader" */
  if (!c->train) {
    fold_batchnorms(g, &st);
    /* appended nodes sit at the end: a node whose first reader comes earlier goes before it */
    for (int i = 0; i < g->nnodes; i++) {
      Node *n = g->nodes[i];
      for (int j = 0; j < n->nin && !n->dead; j++)
        if (n->in[j]->def->id > i) { passes_reorder(g); i = g->nnodes; break; }
    }
    mark_load_time(g);
    reorder_conv_weights(g, c, &st);
  }
  drop_unused(g);
  for (int i = 0; i < g->nnodes; i++) st.load_time += g->nodes[i]->load_time;
  if (st.load_time) passes_load_time_first(g);
  if (c->verbose)
    fprintf(stderr, "pass fold: %d batchnorms folded (%d into convolutions, %d into scale/shift), %d constants folded, "
            "%d identities removed, %d load-time nodes\n", st.bn_conv + st.bn_affine, st.bn_conv, st.bn_affine,
            st.consts, st.identities, st.load_time);
  if (c->verbose && st.tap_major)
    fprintf(stderr, "pass fold: %d conv2d weight%s reordered tap-major at load ([out, kh, kw, in/groups]: a K tile "
            "is one tap's channels)\n", st.tap_major, st.tap_major == 1 ? "" : "s");
  return 0;
}
