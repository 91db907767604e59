/* build_graphs.c — codegen's test models, built directly with the IR builder
 * (no frontend), one small model per op family with the attribute
 * combinations that change the emitted index arithmetic.
 *
 *   build_graphs OUTDIR [--cublas] [--jit] [--fuse] [--fold] [CASE...]   writes OUTDIR/CASE.cu|.c and CASE.h
 *   (--fuse runs the fuse and plan passes at -O3 on the graph first, verified;
 *    --fold runs the fold pass first: batchnorms folded, their arithmetic at load time)
 *   build_graphs --list                                prints the case names
 *
 * Every case becomes one model with several outputs where that saves
 * compiles (nvcc is slow).  tests/cg/check_cases.py holds the same models in
 * PyTorch and compares what the emulated model computes against it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/passes.h"

static Loc L = {"build_graphs.c", 1, 1};

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

static Value *node(Graph *g, OpKind op, Value **x, int n, const Attrs *a, const char *name) {
  Value *v = ir_node(g, op, x, n, a, name, name, L);
  if (!v) {
    fprintf(stderr, "build_graphs: building %s failed\n", ncc_ops[op].name);
    exit(2);
  }
  return v;
}
static Value *un(Graph *g, OpKind op, Value *x) { return node(g, op, &x, 1, NULL, NULL); }
static Value *bin(Graph *g, OpKind op, Value *a, Value *b) {
  Value *x[2] = {a, b};
  return node(g, op, x, 2, NULL, NULL);
}
static void out(Graph *g, const char *name, Value *v) {
  g->outputs = realloc(g->outputs, sizeof(NamedValue) * (size_t)(g->noutputs + 1));
  g->outputs[g->noutputs].name = name;
  g->outputs[g->noutputs++].v = v;
}

static Value *param(Graph *g, const char *layer, const char *what, int kind, Shape s) {
  char name[128];
  snprintf(name, sizeof name, "%s.%s", layer, what);
  return ir_param(g, name, kind, &s, layer, L);
}

/* conv2d with PyTorch's parameter layout */
static Value *conv(Graph *g, const char *name, Value *x, int out, int kh, int kw, int sh, int sw, int ph, int pw,
                   int dil, int groups, int bias) {
  Attrs a;
  ir_attrs_init(&a);
  a.kernel[0] = kh, a.kernel[1] = kw, a.stride[0] = sh, a.stride[1] = sw, a.pad[0] = ph, a.pad[1] = pw;
  a.dilation[0] = a.dilation[1] = dil;
  a.groups = groups;
  a.out = out;
  a.has_bias = bias;
  Value *v[3] = {x, param(g, name, "weight", PK_WEIGHT, S(4, out, (int)x->shape.d[1] / groups, kh, kw)), NULL};
  if (bias) v[2] = param(g, name, "bias", PK_BIAS, S(1, out));
  return node(g, OP_CONV2D, v, bias ? 3 : 2, &a, name);
}

static Value *linear(Graph *g, const char *name, Value *x, int out, int bias) {
  Attrs a;
  ir_attrs_init(&a);
  a.out = out;
  a.has_bias = bias;
  Value *v[3] = {x, param(g, name, "weight", PK_WEIGHT, S(2, out, (int)x->shape.d[1])), NULL};
  if (bias) v[2] = param(g, name, "bias", PK_BIAS, S(1, out));
  return node(g, OP_LINEAR, v, bias ? 3 : 2, &a, name);
}

static Value *pool(Graph *g, OpKind op, Value *x, int k, int s, int p) {
  Attrs a;
  ir_attrs_init(&a);
  a.kernel[0] = a.kernel[1] = k;
  a.stride[0] = a.stride[1] = s;
  a.pad[0] = a.pad[1] = p;
  return node(g, op, &x, 1, &a, NULL);
}

/* pooling with per-axis attributes and dilation (maxpool only) */
static Value *pool2(Graph *g, OpKind op, Value *x, int kh, int kw, int sh, int sw, int ph, int pw, int dil) {
  Attrs a;
  ir_attrs_init(&a);
  a.kernel[0] = kh, a.kernel[1] = kw, a.stride[0] = sh, a.stride[1] = sw, a.pad[0] = ph, a.pad[1] = pw;
  a.dilation[0] = a.dilation[1] = dil;
  return node(g, op, &x, 1, &a, NULL);
}

static Value *axis_op(Graph *g, OpKind op, Value *x, int axis) {
  Attrs a;
  ir_attrs_init(&a);
  a.axis = axis;
  return node(g, op, &x, 1, &a, NULL);
}

static Value *bn(Graph *g, const char *name, Value *x) {
  int C = (int)x->shape.d[1];
  Value *v[5] = {x, param(g, name, "weight", PK_WEIGHT, S(1, C)), param(g, name, "bias", PK_BIAS, S(1, C)),
                 param(g, name, "running_mean", PK_RUNNING_MEAN, S(1, C)),
                 param(g, name, "running_var", PK_RUNNING_VAR, S(1, C))};
  return node(g, OP_BATCHNORM2D, v, 5, NULL, name);
}

/* ---- the cases ------------------------------------------------------------ */
static void c_unary(Graph *g) {
  Value *x = in(g, "x", S(4, 2, 3, 5, 7));
  static const char *names[] = {"relu", "relu6", "sigmoid", "tanh", "gelu", "silu", "hardswish", "leaky_relu"};
  static const OpKind ops[] = {OP_RELU, OP_RELU6, OP_SIGMOID, OP_TANH, OP_GELU, OP_SILU, OP_HARDSWISH, OP_LEAKY_RELU};
  for (int i = 0; i < 8; i++) {
    Attrs a;
    ir_attrs_init(&a);
    a.slope = 0.2;
    out(g, names[i], node(g, ops[i], &x, 1, &a, NULL));
  }
}

static void c_binary(Graph *g) {
  Value *a = in(g, "a", S(4, 2, 3, 4, 5)), *b = in(g, "b", S(3, 3, 1, 5)), *c = in(g, "c", S(2, 4, 1));
  out(g, "add", bin(g, OP_ADD, a, b));
  out(g, "sub", bin(g, OP_SUB, c, a));      /* the broadcast operand first */
  out(g, "mul", bin(g, OP_MUL, b, c));      /* both broadcast: [3, 4, 5] */
  Value *d = in(g, "d", S(4, 2, 3, 4, 5));
  out(g, "div", bin(g, OP_DIV, a, d));
  out(g, "square", bin(g, OP_MUL, a, a));   /* one buffer, two operands */
  Attrs k;
  ir_attrs_init(&k);
  k.fval = 2.5;
  Value *two = node(g, OP_CONST, NULL, 0, &k, NULL);
  out(g, "scale", bin(g, OP_MUL, a, two));
  out(g, "rsub", bin(g, OP_SUB, two, a));
}

static void c_conv(Graph *g) {
  Value *x = in(g, "x", S(4, 2, 8, 11, 9));
  out(g, "c3", conv(g, "c3", x, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1));
  out(g, "s2", conv(g, "s2", x, 12, 3, 3, 2, 2, 1, 1, 1, 1, 0));
  out(g, "dil", conv(g, "dil", x, 8, 3, 3, 1, 1, 2, 2, 2, 1, 1));
  out(g, "grp", conv(g, "grp", x, 16, 3, 3, 1, 1, 1, 1, 1, 2, 1));
  out(g, "dw", conv(g, "dw", x, 8, 3, 3, 2, 1, 1, 1, 1, 8, 1));
  out(g, "asym", conv(g, "asym", x, 10, 3, 1, 1, 2, 1, 0, 1, 1, 1));
  out(g, "pw", conv(g, "pw", x, 20, 1, 1, 1, 1, 0, 0, 1, 1, 1));
  out(g, "big", conv(g, "big", x, 70, 5, 5, 1, 1, 2, 2, 1, 1, 1));
  {
    /* every attribute different per axis, through the tiled kernel (8 out channels per group) */
    Attrs a;
    ir_attrs_init(&a);
    a.kernel[0] = 2, a.kernel[1] = 3, a.stride[0] = 2, a.stride[1] = 1, a.pad[0] = 0, a.pad[1] = 2;
    a.dilation[0] = 1, a.dilation[1] = 2;
    a.groups = 2;
    a.out = 16;
    a.has_bias = 1;
    Value *v[3] = {x, param(g, "mix", "weight", PK_WEIGHT, S(4, 16, 4, 2, 3)), param(g, "mix", "bias", PK_BIAS, S(1, 16))};
    out(g, "mix", node(g, OP_CONV2D, v, 3, &a, "mix"));
  }
}

static void c_pool(Graph *g) {
  Value *x = in(g, "x", S(4, 2, 3, 9, 10));
  out(g, "max2", pool(g, OP_MAXPOOL2D, x, 2, 2, 0));
  out(g, "max3", pool(g, OP_MAXPOOL2D, x, 3, 2, 1));
  out(g, "avg3", pool(g, OP_AVGPOOL2D, x, 3, 1, 1));
  out(g, "avg2", pool(g, OP_AVGPOOL2D, x, 2, 2, 0));
  out(g, "gavg", un(g, OP_GAVGPOOL2D, x));
  out(g, "maxdil", pool2(g, OP_MAXPOOL2D, x, 3, 2, 1, 2, 1, 1, 2));
  out(g, "avgasym", pool2(g, OP_AVGPOOL2D, x, 3, 2, 2, 1, 1, 0, 1));
}

static void c_norm(Graph *g) {
  Value *x = in(g, "x", S(4, 2, 6, 5, 4));
  out(g, "bn", bn(g, "bn", x));
  Value *t = in(g, "t", S(3, 3, 7, 300));
  Attrs a;
  ir_attrs_init(&a);
  a.eps = 1e-6;
  Value *v[3] = {t, param(g, "ln", "weight", PK_WEIGHT, S(1, 300)), param(g, "ln", "bias", PK_BIAS, S(1, 300))};
  out(g, "ln", node(g, OP_LAYERNORM, v, 3, &a, "ln"));
}

static void c_softmax(Graph *g) {
  Value *x = in(g, "x", S(4, 2, 5, 3, 4));
  out(g, "sm1", axis_op(g, OP_SOFTMAX, x, 1));
  out(g, "sm3", axis_op(g, OP_SOFTMAX, x, 3));
  out(g, "lsm1", axis_op(g, OP_LOG_SOFTMAX, x, 1));
  Value *w = in(g, "w", S(2, 4, 1000));
  out(g, "lsm", axis_op(g, OP_LOG_SOFTMAX, w, 1));
}

static void c_move(Graph *g) {
  Value *a = in(g, "a", S(4, 2, 3, 4, 5)), *b = in(g, "b", S(4, 2, 1, 4, 5)), *c = in(g, "c", S(4, 2, 2, 4, 5));
  Value *x[3] = {a, b, c};
  Attrs k;
  ir_attrs_init(&k);
  k.axis = 1;
  out(g, "cat1", node(g, OP_CONCAT, x, 3, &k, NULL));
  Value *y[2] = {a, a};
  k.axis = 3;
  out(g, "cat3", node(g, OP_CONCAT, y, 2, &k, NULL));
  ir_attrs_init(&k);
  k.nlist = 4;
  k.list[0] = 0, k.list[1] = 2, k.list[2] = 3, k.list[3] = 1;
  out(g, "perm", node(g, OP_TRANSPOSE, &a, 1, &k, NULL));
  k.list[0] = 3, k.list[1] = 1, k.list[2] = 0, k.list[3] = 2;
  out(g, "perm2", node(g, OP_TRANSPOSE, &a, 1, &k, NULL));
  Value *z[2] = {a, in(g, "e", S(4, 1, 3, 4, 5))};
  ir_attrs_init(&k);
  k.axis = 0;
  out(g, "cat0", node(g, OP_CONCAT, z, 2, &k, NULL));
  Value *t = in(g, "t", S(1, 9));
  out(g, "sm_vec", axis_op(g, OP_SOFTMAX, t, 0));
  Value *f = un(g, OP_FLATTEN, a);
  out(g, "flat", un(g, OP_RELU, f));
  ir_attrs_init(&k);
  k.nlist = 2;
  k.list[0] = 6, k.list[1] = -1;
  Value *r = node(g, OP_RESHAPE, &a, 1, &k, NULL);
  out(g, "resh", r);                                   /* an output that aliases an input */
  Attrs d;
  ir_attrs_init(&d);
  d.p = 0.5;
  out(g, "drop", un(g, OP_SIGMOID, node(g, OP_DROPOUT, &a, 1, &d, NULL)));
}

static void c_gemm(Graph *g) {
  Value *x = in(g, "x", S(2, 5, 37));
  out(g, "fc", linear(g, "fc", x, 70, 1));
  out(g, "fcnb", linear(g, "fcnb", x, 3, 0));
  Value *a = in(g, "a", S(4, 2, 1, 6, 33)), *b = in(g, "b", S(3, 4, 33, 9));
  out(g, "bmm", bin(g, OP_MATMUL, a, b));           /* batch broadcast [2,1] x [4] -> [2,4] */
  Value *p = in(g, "p", S(3, 2, 70, 40)), *q = in(g, "q", S(3, 2, 40, 66));
  out(g, "mm", bin(g, OP_MATMUL, p, q));
  Value *v = in(g, "v", S(1, 40));
  out(g, "mv", bin(g, OP_MATMUL, p, v));            /* 1-D right operand */
}

static void c_loss(Graph *g) {
  Value *x = in(g, "x", S(2, 300, 10));
  Shape ls = S(1, 300);
  Value *y = ir_input(g, "y", DT_I32, &ls, L);
  out(g, "ce", bin(g, OP_CROSS_ENTROPY, x, y));
  out(g, "nll", bin(g, OP_NLL_LOSS, axis_op(g, OP_LOG_SOFTMAX, x, 1), y));
  Value *t = in(g, "t", S(2, 300, 10));
  out(g, "mse", bin(g, OP_MSE_LOSS, x, t));
}

/* a LeNet-like net: conv, pool, bn, flatten, linear, softmax — and an unused
 * label input that inference must not ask for */
static void c_net(Graph *g) {
  Value *x = in(g, "x", S(4, 4, 1, 28, 28));
  Shape ls = S(1, 4);
  Value *y = ir_input(g, "y", DT_I32, &ls, L);
  Value *h = un(g, OP_RELU, pool(g, OP_MAXPOOL2D, conv(g, "conv1", x, 10, 5, 5, 1, 1, 0, 0, 1, 1, 1), 2, 2, 0));
  h = un(g, OP_RELU, bn(g, "bn1", conv(g, "conv2", h, 20, 5, 5, 1, 1, 0, 0, 1, 1, 0)));
  h = pool(g, OP_MAXPOOL2D, h, 2, 2, 0);
  h = un(g, OP_FLATTEN, h);
  h = un(g, OP_RELU, linear(g, "fc1", h, 50, 1));
  Value *logits = linear(g, "fc2", h, 10, 1);
  out(g, "logits", logits);
  out(g, "prob", axis_op(g, OP_SOFTMAX, logits, 1));
  (void)bin(g, OP_CROSS_ENTROPY, logits, y);   /* a loss not among the outputs: skipped */
}

/* chains for the epilogue fusion (--fuse); without it, the same graph unfused */
static void c_fused(Graph *g) {
  Value *x = in(g, "x", S(4, 2, 8, 10, 9));
  Value *c1 = conv(g, "c1", x, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  out(g, "cbr", un(g, OP_RELU, c1));                                   /* conv + bias + relu */
  Value *c2 = conv(g, "c2", x, 8, 3, 3, 1, 1, 1, 1, 1, 1, 0);
  Value *c3 = conv(g, "c3", x, 8, 1, 1, 1, 1, 0, 0, 1, 1, 0);
  out(g, "res", un(g, OP_RELU, bin(g, OP_ADD, c2, c3)));               /* residual: the later conv takes it */
  Value *b = bn(g, "bn", x);
  out(g, "bnr", un(g, OP_RELU6, b));
  out(g, "cbnr", un(g, OP_RELU, bn(g, "bn2", conv(g, "c4", x, 8, 3, 3, 2, 2, 1, 1, 1, 1, 0))));   /* conv+bn+relu */
  Value *d = conv(g, "dw", x, 8, 3, 3, 1, 1, 1, 1, 1, 8, 1);
  Value *s = in(g, "s", S(4, 1, 8, 1, 1));
  out(g, "dws", un(g, OP_HARDSWISH, bin(g, OP_MUL, d, s)));            /* broadcast operand in the chain */
  Value *p = pool(g, OP_MAXPOOL2D, x, 2, 2, 0);
  Value *q = un(g, OP_SIGMOID, p);
  out(g, "pool_sig", q);
  out(g, "pool_twice", bin(g, OP_ADD, p, p));                          /* p has two readers: not fused */
  Value *f = un(g, OP_FLATTEN, pool(g, OP_AVGPOOL2D, x, 2, 2, 0));
  Value *l = linear(g, "fc", f, 33, 1);
  Attrs k;
  ir_attrs_init(&k);
  k.fval = 0.5;
  Value *half = node(g, OP_CONST, NULL, 0, &k, NULL);
  out(g, "fc_gelu", bin(g, OP_MUL, half, un(g, OP_GELU, l)));          /* const operand first */
  Value *sm = axis_op(g, OP_SOFTMAX, l, 1);
  out(g, "sm_sub", bin(g, OP_SUB, in(g, "t", S(2, 1, 33)), sm));       /* running operand second */
  Value *m1 = in(g, "m1", S(3, 3, 7, 20)), *m2 = in(g, "m2", S(3, 3, 20, 5));
  out(g, "mm_tanh", un(g, OP_TANH, bin(g, OP_ADD, bin(g, OP_MATMUL, m1, m2), in(g, "mb", S(1, 5)))));
  Value *e = bin(g, OP_SUB, in(g, "u", S(2, 6, 7)), in(g, "w", S(1, 7)));
  out(g, "chain", un(g, OP_SILU, un(g, OP_LEAKY_RELU, e)));            /* elementwise main + chain */
}

typedef struct Case {
  const char *name;
  void (*build)(Graph *);
} Case;
static const Case cases[] = {
  {"unary", c_unary}, {"binary", c_binary}, {"conv", c_conv}, {"pool", c_pool}, {"norms", c_norm},
  {"softmax", c_softmax}, {"move", c_move}, {"gemm", c_gemm}, {"loss", c_loss}, {"net", c_net}, {"fused", c_fused},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static int emit(const Case *cs, const char *dir, int cublas, int jit, int fuse, int fold) {
  Graph *g = ir_graph_new(cs->name);
  cs->build(g);
  if (fold) {
    PassCtx pc;
    memset(&pc, 0, sizeof pc);
    pc.opt_level = 1;
    if (pass_fold(g, &pc) != 0) {
      fprintf(stderr, "build_graphs: the fold pass failed on %s\n", cs->name);
      return 1;
    }
  }
  if (ir_verify(g) != 0) {
    fprintf(stderr, "build_graphs: %s does not verify\n", cs->name);
    return 1;
  }
  char src[1024], hdr[1024], hname[256];
  snprintf(src, sizeof src, "%s/%s.%s", dir, cs->name, jit ? "c" : "cu");
  snprintf(hdr, sizeof hdr, "%s/%s.h", dir, cs->name);
  snprintf(hname, sizeof hname, "%s.h", cs->name);
  FILE *fs = fopen(src, "w"), *fh = fopen(hdr, "w");
  if (!fs || !fh) {
    fprintf(stderr, "build_graphs: cannot write %s\n", src);
    return 1;
  }
  if (fuse) {
    PassCtx pc = {0};
    pc.opt_level = 3;
    pc.cublas = cublas;
    pc.verify = 1;
    if (passes_run(g, &pc, "fuse,plan") != 0) return 1;
  }
  CodegenOpts o = {0};
  o.jit = jit;
  o.use_cublas = cublas;
  o.header = hname;
  o.command = "build_graphs (tests/cg)";
  int rc = codegen_emit(g, &o, fs, fh);
  fclose(fs);
  fclose(fh);
  free(g->outputs);
  ir_graph_free(g);
  if (rc) fprintf(stderr, "build_graphs: codegen failed for %s\n", cs->name);
  return rc != 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--list")) {
    for (int i = 0; i < NCASES; i++) printf("%s\n", cases[i].name);
    return 0;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: build_graphs OUTDIR [--cublas] [--jit] [--fuse] [--fold] [CASE...] | --list\n");
    return 2;
  }
  int cublas = 0, jit = 0, fuse = 0, fold = 0, nsel = 0, fail = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--cublas")) cublas = 1;
    else if (!strcmp(argv[i], "--jit")) jit = 1;
    else if (!strcmp(argv[i], "--fuse")) fuse = 1;
    else if (!strcmp(argv[i], "--fold")) fold = 1;
    else nsel++;
  }
  for (int i = 0; i < NCASES; i++) {
    int want = nsel == 0;
    for (int j = 2; j < argc; j++) want |= !strcmp(argv[j], cases[i].name);
    if (want) fail |= emit(&cases[i], argv[1], cublas, jit, fuse, fold);
  }
  for (int j = 2; j < argc; j++) {
    if (argv[j][0] == '-') continue;
    int known = 0;
    for (int i = 0; i < NCASES; i++) known |= !strcmp(argv[j], cases[i].name);
    if (!known) {
      fprintf(stderr, "build_graphs: unknown case %s\n", argv[j]);
      fail = 1;
    }
  }
  return fail;
}
