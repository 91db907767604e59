/* build_train.c — the training ops' kernels, one small model per family built
 * with the IR builder (the ops autodiff writes, fed by graph inputs), for
 * tests/cg/run_train.sh: each output is one training op's result, compared
 * by check_train.py with PyTorch's autograd in float64.
 *
 *   build_train OUTDIR [CASE...]   writes OUTDIR/CASE.cu, CASE.h and CASE.json
 *   build_train --list             prints the case names
 *
 * CASE.json describes every output (its op, inputs and attributes) for the
 * checker, so the two programs cannot drift apart. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "ir/ir.h"

static Loc L = {"build_train.c", 1, 1};
static FILE *js;        /* CASE.json being written */
static int js_first;

static Shape S(int rank, ...) {
  Shape s;
  va_list ap;
  va_start(ap, rank);
  s.rank = rank;
  for (int i = 0; i < rank; i++) s.d[i] = va_arg(ap, int);
  va_end(ap);
  return s;
}

static Value *in(Graph *g, const char *name, Shape s) { return ir_input(g, name, DT_F32, &s, L); }
static Value *in_i32(Graph *g, const char *name, Shape s) { return ir_input(g, name, DT_I32, &s, L); }

static Value *node(Graph *g, OpKind op, Value **x, int n, const Attrs *a) {
  Value *v = ir_node(g, op, x, n, a, NULL, NULL, L);
  if (!v) {
    fprintf(stderr, "build_train: building %s failed\n", ncc_ops[op].name);
    exit(2);
  }
  return v;
}

/* the output and its description: op, input names, attributes */
static void out(Graph *g, const char *name, Value *v) {
  g->outputs = realloc(g->outputs, sizeof(NamedValue) * (size_t)(g->noutputs + 1));
  g->outputs[g->noutputs].name = name;
  g->outputs[g->noutputs++].v = v;
  Node *n = v->def;
  const Attrs *a = &n->a;
  fprintf(js, "%s\n  {\"out\": \"%s\", \"op\": \"%s\", \"in\": [", js_first ? "" : ",", name, ncc_ops[n->op].name);
  js_first = 0;
  for (int j = 0; j < n->nin; j++) {
    Node *d = n->in[j]->def;
    /* an activation's gradient from its output y: the checker differentiates at y's input */
    if (n->op == OP_ACT_GRAD && a->act_at_out && j == 1) d = d->in[0]->def;
    fprintf(js, "%s\"%s\"", j ? ", " : "", d->op == OP_INPUT || d->op == OP_PARAM ? d->name : "?");
  }
  fprintf(js, "], \"kernel\": [%d, %d], \"stride\": [%d, %d], \"pad\": [%d, %d], \"dilation\": [%d, %d], ",
          a->kernel[0], a->kernel[1], a->stride[0], a->stride[1], a->pad[0], a->pad[1], a->dilation[0], a->dilation[1]);
  fprintf(js, "\"groups\": %d, \"axis\": %d, \"eps\": %.17g, \"momentum\": %.17g, \"p\": %.17g, \"slope\": %.17g, ",
          a->groups, a->axis, a->eps, a->momentum, a->p, a->slope);
  fprintf(js, "\"act\": \"%s\", \"slot\": %d, \"list\": [", a->act > 0 && a->act < OP__COUNT ? ncc_ops[a->act].name : "",
          a->slot);
  for (int i = 0; i < a->nlist; i++) fprintf(js, "%s%lld", i ? ", " : "", (long long)a->list[i]);
  fprintf(js, "]}");
}

static Attrs conv_attrs(int out, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw, int groups) {
  Attrs a;
  ir_attrs_init(&a);
  a.kernel[0] = kh, a.kernel[1] = kw, a.stride[0] = sh, a.stride[1] = sw, a.pad[0] = ph, a.pad[1] = pw;
  a.dilation[0] = dh, a.dilation[1] = dw;
  a.groups = groups;
  a.out = out;
  return a;
}

/* the conv's data and weight gradients for input x[N, C, H, W] */
static void conv_pair(Graph *g, const char *tag, Value *x, Attrs a) {
  int64_t OH = ir_window_out(x->shape.d[2], a.kernel[0], a.stride[0], a.pad[0], a.dilation[0]);
  int64_t OW = ir_window_out(x->shape.d[3], a.kernel[1], a.stride[1], a.pad[1], a.dilation[1]);
  char *dyn = arena_printf(g->arena, "dy_%s", tag), *wn = arena_printf(g->arena, "w_%s", tag);
  Value *dy = in(g, dyn, S(4, (int)x->shape.d[0], (int)a.out, (int)OH, (int)OW));
  Value *w = in(g, wn, S(4, (int)a.out, (int)(x->shape.d[1] / a.groups), a.kernel[0], a.kernel[1]));
  Attrs d = a;
  d.nlist = 4;
  for (int i = 0; i < 4; i++) d.list[i] = x->shape.d[i];
  Value *v[2] = {dy, w};
  out(g, arena_printf(g->arena, "dx_%s", tag), node(g, OP_CONV2D_BWD_DATA, v, 2, &d));
  v[1] = x;
  out(g, arena_printf(g->arena, "dw_%s", tag), node(g, OP_CONV2D_BWD_WEIGHT, v, 2, &a));
}

static void c_conv(Graph *g) {
  Value *x = in(g, "x", S(4, 2, 4, 7, 6));
  conv_pair(g, "s2p1", x, conv_attrs(6, 3, 3, 2, 2, 1, 1, 1, 1, 1));
  conv_pair(g, "dil2", x, conv_attrs(4, 3, 3, 1, 1, 2, 2, 2, 2, 1));
  conv_pair(g, "grp2", x, conv_attrs(6, 3, 3, 1, 1, 1, 1, 1, 1, 2));
  conv_pair(g, "dw", x, conv_attrs(4, 3, 3, 2, 2, 1, 1, 1, 1, 4));
  conv_pair(g, "mix", x, conv_attrs(4, 2, 3, 2, 1, 0, 2, 1, 2, 2));
  conv_pair(g, "pw", x, conv_attrs(5, 1, 1, 1, 1, 0, 0, 1, 1, 1));
}

static void c_linear(Graph *g) {
  Value *v[2] = {in(g, "dy", S(2, 5, 7)), in(g, "x", S(2, 5, 9))};
  out(g, "dw", node(g, OP_LINEAR_BWD_WEIGHT, v, 2, NULL));
  Value *u[2] = {in(g, "dy_big", S(2, 100, 3)), in(g, "x_big", S(2, 100, 4))};   /* a block per output */
  out(g, "dw_big", node(g, OP_LINEAR_BWD_WEIGHT, u, 2, NULL));
}

static void sum_to(Graph *g, const char *name, Value *x, int axis, int nl, ...) {
  Attrs a;
  ir_attrs_init(&a);
  a.axis = axis;
  a.nlist = nl;
  va_list ap;
  va_start(ap, nl);
  for (int i = 0; i < nl; i++) a.list[i] = va_arg(ap, int);
  va_end(ap);
  out(g, name, node(g, OP_SUM_TO, &x, 1, &a));
}

static void c_sum_to(Graph *g) {
  Value *x = in(g, "x", S(4, 2, 3, 4, 5));
  sum_to(g, "bias", x, 1, 1, 3);           /* conv bias: [C] at axis 1 */
  sum_to(g, "right", x, 2, 2, 4, 1);       /* right-aligned [4, 1] */
  sum_to(g, "right2", x, 1, 3, 3, 1, 5);   /* [3, 1, 5] */
  sum_to(g, "last", x, 3, 1, 5);           /* broadcast row [5] */
  sum_to(g, "all", x, 4, 0);               /* a scalar */
  sum_to(g, "keep", x, 0, 4, 2, 3, 4, 5);  /* nothing summed */
  Value *y = in(g, "y", S(4, 4, 3, 9, 9));
  sum_to(g, "big", y, 1, 1, 3);            /* a block per output */
  Value *f = in(g, "f", S(2, 70, 10));
  sum_to(g, "fc", f, 1, 1, 10);            /* linear bias */
}

static Attrs pool_attrs(int kh, int kw, int sh, int sw, int ph, int pw, int dil) {
  Attrs a;
  ir_attrs_init(&a);
  a.kernel[0] = kh, a.kernel[1] = kw, a.stride[0] = sh, a.stride[1] = sw, a.pad[0] = ph, a.pad[1] = pw;
  a.dilation[0] = a.dilation[1] = dil;
  return a;
}

static void maxpool(Graph *g, const char *tag, Value *x, Attrs a) {
  int64_t OH = ir_window_out(x->shape.d[2], a.kernel[0], a.stride[0], a.pad[0], a.dilation[0]);
  int64_t OW = ir_window_out(x->shape.d[3], a.kernel[1], a.stride[1], a.pad[1], a.dilation[1]);
  Value *v[2] = {in(g, arena_printf(g->arena, "dy_%s", tag), S(4, (int)x->shape.d[0], (int)x->shape.d[1], (int)OH, (int)OW)), x};
  out(g, arena_printf(g->arena, "dx_%s", tag), node(g, OP_MAXPOOL2D_BWD, v, 2, &a));
}

static void avgpool(Graph *g, const char *tag, const Shape *xs, Attrs a) {
  int64_t OH = ir_window_out(xs->d[2], a.kernel[0], a.stride[0], a.pad[0], 1);
  int64_t OW = ir_window_out(xs->d[3], a.kernel[1], a.stride[1], a.pad[1], 1);
  Value *dy = in(g, arena_printf(g->arena, "dy_%s", tag), S(4, (int)xs->d[0], (int)xs->d[1], (int)OH, (int)OW));
  a.nlist = 4;
  for (int i = 0; i < 4; i++) a.list[i] = xs->d[i];
  out(g, arena_printf(g->arena, "dx_%s", tag), node(g, OP_AVGPOOL2D_BWD, &dy, 1, &a));
}

static void c_pool(Graph *g) {
  Value *x = in(g, "x", S(4, 2, 3, 9, 10));
  maxpool(g, "m2", x, pool_attrs(2, 2, 2, 2, 0, 0, 1));
  maxpool(g, "m3s2p1", x, pool_attrs(3, 3, 2, 2, 1, 1, 1));
  maxpool(g, "m3s1p1", x, pool_attrs(3, 3, 1, 1, 1, 1, 1));   /* overlapping windows */
  maxpool(g, "mdil", x, pool_attrs(3, 2, 1, 2, 1, 1, 2));
  /* ties: the first maximum takes the gradient */
  Value *q = in(g, "q_ties", S(4, 2, 3, 9, 10));
  maxpool(g, "tie", q, pool_attrs(3, 3, 1, 1, 1, 1, 1));
  /* a block a band of rows (ir_pool_band_rows): two bands of 52 and 9 rows
   * (stride 2, padded), three of 256, 256 and 88 (stride 1), windows with
   * gaps between them (kernel 2, stride 3: rows and columns no window
   * covers); then the element kernel where a window's index passes a byte
   * (16 x 16) and where one row of windows passes the shared bytes */
  maxpool(g, "band2", in(g, "xb2", S(4, 2, 3, 61, 40)), pool_attrs(3, 3, 2, 2, 1, 1, 1));
  maxpool(g, "band3", in(g, "xb3", S(4, 1, 2, 600, 8)), pool_attrs(3, 3, 1, 1, 1, 1, 1));
  maxpool(g, "gaps", in(g, "xg", S(4, 1, 2, 100, 30)), pool_attrs(2, 2, 3, 3, 0, 0, 1));
  maxpool(g, "k16", in(g, "x16", S(4, 1, 2, 17, 18)), pool_attrs(16, 16, 1, 1, 0, 0, 1));
  maxpool(g, "wide", in(g, "xw", S(4, 1, 1, 2, 20000)), pool_attrs(1, 3, 1, 1, 0, 0, 1));
  avgpool(g, "a3s1p1", &x->shape, pool_attrs(3, 3, 1, 1, 1, 1, 1));
  avgpool(g, "a2", &x->shape, pool_attrs(2, 2, 2, 2, 0, 0, 1));
  avgpool(g, "aasym", &x->shape, pool_attrs(3, 2, 2, 1, 1, 0, 1));
  Value *dy = in(g, "dy_g", S(2, 2, 3));
  Attrs a;
  ir_attrs_init(&a);
  a.nlist = 4;
  for (int i = 0; i < 4; i++) a.list[i] = x->shape.d[i];
  out(g, "dx_g", node(g, OP_GAVGPOOL2D_BWD, &dy, 1, &a));
}

static void smax(Graph *g, const char *name, OpKind op, Value *dy, Value *y, int axis) {
  Attrs a;
  ir_attrs_init(&a);
  a.axis = axis;
  Value *v[2] = {dy, y};
  out(g, name, node(g, op, v, 2, &a));
}

static void c_softmax(Graph *g) {
  Value *dy = in(g, "dy", S(4, 2, 5, 3, 4)), *y = in(g, "pos_y", S(4, 2, 5, 3, 4));
  smax(g, "sm1", OP_SOFTMAX_BWD, dy, y, 1);
  smax(g, "sm3", OP_SOFTMAX_BWD, dy, y, 3);
  smax(g, "lsm1", OP_LOG_SOFTMAX_BWD, dy, y, 1);
  Value *dw = in(g, "dw", S(2, 4, 1000)), *w = in(g, "w", S(2, 4, 1000));
  smax(g, "lsm", OP_LOG_SOFTMAX_BWD, dw, w, 1);
  smax(g, "sm", OP_SOFTMAX_BWD, dw, w, 1);
}

static void c_loss(Graph *g) {
  Value *dl = in(g, "dloss", S(0)), *x = in(g, "x", S(2, 300, 10)), *y = in_i32(g, "labels", S(1, 300));
  Value *v[3] = {dl, x, y};
  out(g, "ce", node(g, OP_CROSS_ENTROPY_BWD, v, 3, NULL));
  out(g, "nll", node(g, OP_NLL_LOSS_BWD, v, 3, NULL));
  Value *w[3] = {dl, in(g, "a", S(3, 4, 5, 6)), in(g, "b", S(3, 4, 5, 6))};
  out(g, "mse", node(g, OP_MSE_LOSS_BWD, w, 3, NULL));
}

static void c_norm(Graph *g) {
  /* layernorm over the last dim, wide (300) and narrow (20) rows */
  Attrs a;
  ir_attrs_init(&a);
  a.eps = 1e-5;
  for (int k = 0; k < 2; k++) {
    int D = k ? 20 : 300;
    const char *t = k ? "n" : "w";
    Value *dy = in(g, arena_printf(g->arena, "dy_%s", t), S(3, 3, 7, D));
    Value *x = in(g, arena_printf(g->arena, "x_%s", t), S(3, 3, 7, D));
    Value *w = in(g, arena_printf(g->arena, "g_%s", t), S(1, D));
    Value *v[3] = {dy, x, w};
    out(g, arena_printf(g->arena, "ln_dx_%s", t), node(g, OP_LAYERNORM_BWD_DATA, v, 3, &a));
    out(g, arena_printf(g->arena, "ln_dw_%s", t), node(g, OP_LAYERNORM_BWD_WEIGHT, v, 2, &a));
  }
  /* batchnorm in training mode: the statistics, the forward and both gradients */
  Value *x = in(g, "x", S(4, 4, 6, 5, 4)), *dy = in(g, "dy", S(4, 4, 6, 5, 4));
  Value *w = in(g, "bn_w", S(1, 6)), *b = in(g, "bn_b", S(1, 6));
  Value *st = node(g, OP_BN_STATS, &x, 1, NULL);
  out(g, "bn_stats", st);
  Value *t[4] = {x, w, b, st};
  out(g, "bn_y", node(g, OP_BN_TRAIN, t, 4, &a));
  Value *d[4] = {dy, x, w, st};
  out(g, "bn_dx", node(g, OP_BN_BWD_DATA, d, 4, &a));
  Value *e[3] = {dy, x, st};
  out(g, "bn_dw", node(g, OP_BN_BWD_WEIGHT, e, 3, &a));
  /* the running statistics, updated in place (check_train.py reads the saved parameters) */
  Shape cs = S(1, 6);
  Value *r[3] = {st, ir_param(g, "bn.running_mean", PK_RUNNING_MEAN, &cs, "bn", L),
                 ir_param(g, "bn.running_var", PK_RUNNING_VAR, &cs, "bn", L)};
  Attrs m;
  ir_attrs_init(&m);
  m.momentum = 0.1;
  out(g, "bn_upd", node(g, OP_BN_RUNNING, r, 3, &m));
}

static void c_act(Graph *g) {
  Value *dy = in(g, "dy", S(4, 2, 3, 5, 7)), *x = in(g, "x", S(4, 2, 3, 5, 7));
  static const OpKind ops[] = {OP_RELU, OP_RELU6, OP_SIGMOID, OP_TANH, OP_GELU, OP_SILU, OP_HARDSWISH, OP_LEAKY_RELU};
  for (int i = 0; i < 8; i++) {
    Attrs a;
    ir_attrs_init(&a);
    a.act = ops[i];
    a.slope = 0.2;
    Value *v[2] = {dy, x};
    out(g, ncc_ops[ops[i]].name, node(g, OP_ACT_GRAD, v, 2, &a));
  }
  Attrs a;
  ir_attrs_init(&a);
  a.act = OP_SQRT;
  Value *v[2] = {dy, in(g, "pos_x", S(4, 2, 3, 5, 7))};
  out(g, "sqrt", node(g, OP_ACT_GRAD, v, 2, &a));
  /* the derivative from the output y = f(x) (what autodiff emits for these) */
  static const OpKind at_out[] = {OP_RELU, OP_RELU6, OP_SIGMOID, OP_TANH, OP_LEAKY_RELU};
  static const char *const at_out_name[] = {"relu_y", "relu6_y", "sigmoid_y", "tanh_y", "leaky_relu_y"};
  for (int i = 0; i < 5; i++) {
    Attrs f;
    ir_attrs_init(&f);
    f.slope = 0.2;
    Value *y = node(g, at_out[i], &x, 1, &f);
    ir_attrs_init(&a);
    a.act = at_out[i];
    a.slope = 0.2;
    a.act_at_out = 1;
    Value *w[2] = {dy, y};
    out(g, at_out_name[i], node(g, OP_ACT_GRAD, w, 2, &a));
  }
}

static void slice(Graph *g, const char *name, Value *x, int axis, int start, int len) {
  Attrs a;
  ir_attrs_init(&a);
  a.axis = axis;
  a.nlist = 2;
  a.list[0] = start, a.list[1] = len;
  out(g, name, node(g, OP_SLICE, &x, 1, &a));
}

static void c_slice(Graph *g) {
  Value *x = in(g, "x", S(4, 2, 7, 3, 4));
  slice(g, "s1", x, 1, 2, 3);
  slice(g, "s0", x, 0, 1, 1);
  slice(g, "s3", x, 3, 1, 2);
  slice(g, "sall", x, 1, 0, 7);
}

static void dropout(Graph *g, const char *name, Value *x, double p, int slot, int axis) {
  Attrs a;
  ir_attrs_init(&a);
  a.p = p;
  a.slot = slot;
  a.axis = axis;
  out(g, name, node(g, OP_DROPOUT_APPLY, &x, 1, &a));
}

static void c_dropout(Graph *g) {
  Value *x = in(g, "x", S(4, 4, 8, 16, 16)), *x2 = in(g, "x2", S(4, 4, 8, 16, 16));
  dropout(g, "d0", x, 0.3, 0, 0);
  dropout(g, "d0b", x2, 0.3, 0, 0);    /* the same key: the same mask (the backward) */
  dropout(g, "d1", x, 0.3, 1, 0);      /* another slot: another mask */
  dropout(g, "d2d", x, 0.5, 2, 1);     /* dropout2d: one value per (n, c) */
  dropout(g, "dp0", x, 0.0, 3, 0);     /* p = 0 keeps everything */
  dropout(g, "dp1", x, 1.0, 4, 0);     /* p = 1 drops everything */
}

typedef struct Case {
  const char *name;
  void (*build)(Graph *);
} Case;
static const Case cases[] = {
  {"conv", c_conv}, {"linear", c_linear}, {"sum_to", c_sum_to}, {"pool", c_pool}, {"softmax", c_softmax},
  {"loss", c_loss}, {"norm", c_norm}, {"act", c_act}, {"slice", c_slice}, {"dropout", c_dropout},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static int emit(const Case *cs, const char *dir) {
  char src[1024], hdr[1024], jsn[1024], hname[256], model[64];
  snprintf(model, sizeof model, "t_%s", cs->name);
  snprintf(src, sizeof src, "%s/%s.cu", dir, model);
  snprintf(hdr, sizeof hdr, "%s/%s.h", dir, model);
  snprintf(jsn, sizeof jsn, "%s/%s.json", dir, model);
  snprintf(hname, sizeof hname, "%s.h", model);
  js = fopen(jsn, "w");
  if (!js) {
    fprintf(stderr, "build_train: cannot write %s\n", jsn);
    return 1;
  }
  fprintf(js, "[");
  js_first = 1;
  Graph *g = ir_graph_new(model);
  cs->build(g);
  fprintf(js, "\n]\n");
  fclose(js);
  if (ir_verify(g) != 0) {
    fprintf(stderr, "build_train: %s does not verify\n", cs->name);
    return 1;
  }
  FILE *fs = fopen(src, "w"), *fh = fopen(hdr, "w");
  if (!fs || !fh) {
    fprintf(stderr, "build_train: cannot write %s\n", src);
    return 1;
  }
  CodegenOpts o = {0};
  o.header = hname;
  o.command = "build_train (tests/cg)";
  int rc = codegen_emit(g, &o, fs, fh);
  fclose(fs);
  fclose(fh);
  free(g->outputs);
  ir_graph_free(g);
  if (rc) fprintf(stderr, "build_train: codegen failed for %s\n", cs->name);
  return rc != 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--list")) {
    for (int i = 0; i < NCASES; i++) printf("%s\n", cases[i].name);
    return 0;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: build_train OUTDIR [CASE...] | --list\n");
    return 2;
  }
  int fail = 0;
  for (int j = 2; j < argc; j++) {
    int known = 0;
    for (int i = 0; i < NCASES; i++) known |= !strcmp(argv[j], cases[i].name);
    if (!known) {
      fprintf(stderr, "build_train: unknown case %s\n", argv[j]);
      return 2;
    }
  }
  for (int i = 0; i < NCASES; i++) {
    int want = argc == 2;
    for (int j = 2; j < argc; j++) want |= !strcmp(argv[j], cases[i].name);
    if (want) fail |= emit(&cases[i], argv[1]);
  }
  return fail;
}
