/* test_ir.c — unit tests of the shape rules (ir/shape.c), the verifier
 * (ir/verify.c) and the report's figures (codegen/report.c), on graphs built
 * directly with ir_node(), so they run without the frontend.
 *
 * Expected shapes are PyTorch's (worked out from torch's documented formulas
 * and checked by hand against torch 1.13 where noted); the report's figures
 * for LeNet are computed by hand below, not copied from a run. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tests/ir_check.h"

static const Loc L = {"test.net", 1, 1};


static Graph *g;

static Value *in(const char *name, DType t, Shape s) { return ir_input(g, name, t, &s, L); }
static Value *param(const char *name, int kind, Shape s) { return ir_param(g, name, kind, &s, NULL, L); }
static int has_shape(const Value *v, Shape s) {
  if (!v || v->shape.rank != s.rank) return 0;
  for (int i = 0; i < s.rank; i++)
    if (v->shape.d[i] != s.d[i]) return 0;
  return 1;
}
static Value *node(OpKind op, Value **ins, int nin, const Attrs *a) { return ir_node(g, op, ins, nin, a, NULL, NULL, L); }
static Value *un(OpKind op, Value *x) { return node(op, &x, 1, NULL); }
static Value *bin(OpKind op, Value *a, Value *b) { Value *v[2] = {a, b}; return node(op, v, 2, NULL); }

static Attrs conv_attrs(int out, int k, int s, int p, int d, int groups) {
  Attrs a;
  ir_attrs_init(&a);
  a.out = out;
  a.kernel[0] = a.kernel[1] = k;
  a.stride[0] = a.stride[1] = s;
  a.pad[0] = a.pad[1] = p;
  a.dilation[0] = a.dilation[1] = d;
  a.groups = groups;
  return a;
}

static Value *conv(Value *x, Attrs a, int bias, const char *name) {
  char b[64];
  int64_t cin = x->shape.d[1];
  snprintf(b, sizeof b, "%s.weight", name);
  Value *v[3] = {x, param(b, PK_WEIGHT, S(4, (int)a.out, (int)(cin / a.groups), a.kernel[0], a.kernel[1])), NULL};
  if (bias) {
    snprintf(b, sizeof b, "%s.bias", name);
    v[2] = param(b, PK_BIAS, S(1, (int)a.out));
  }
  a.has_bias = bias;
  return ir_node(g, OP_CONV2D, v, bias ? 3 : 2, &a, name, name, L);
}

static Value *linear(Value *x, int out, const char *name) {
  char b[64];
  Attrs a;
  ir_attrs_init(&a);
  a.out = out;
  a.has_bias = 1;
  snprintf(b, sizeof b, "%s.weight", name);
  Value *v[3] = {x, param(b, PK_WEIGHT, S(2, out, (int)x->shape.d[1])), NULL};
  snprintf(b, sizeof b, "%s.bias", name);
  v[2] = param(b, PK_BIAS, S(1, out));
  return ir_node(g, OP_LINEAR, v, 3, &a, name, name, L);
}

static Value *pool(OpKind op, Value *x, int k, int s, int p) {
  Attrs a;
  ir_attrs_init(&a);
  a.kernel[0] = a.kernel[1] = k;
  a.stride[0] = a.stride[1] = s;
  a.pad[0] = a.pad[1] = p;
  return node(op, &x, 1, &a);
}

static void test_conv(void) {
  Value *x = in("x", DT_F32, S(4, 2, 3, 32, 32));
  CHECK(has_shape(conv(x, conv_attrs(8, 3, 1, 1, 1, 1), 1, "c1"), S(4, 2, 8, 32, 32)));
  /* torch: (32 + 2*3 - 7) / 2 + 1 = 16 */
  CHECK(has_shape(conv(x, conv_attrs(64, 7, 2, 3, 1, 1), 0, "c2"), S(4, 2, 64, 16, 16)));
  /* dilation 2: effective kernel 5 -> 28 */
  CHECK(has_shape(conv(x, conv_attrs(4, 3, 1, 0, 2, 1), 1, "c3"), S(4, 2, 4, 28, 28)));
  /* depthwise */
  Value *y = in("y", DT_F32, S(4, 1, 6, 9, 9));
  CHECK(has_shape(conv(y, conv_attrs(6, 3, 2, 1, 1, 6), 0, "dw"), S(4, 1, 6, 5, 5)));
  /* rectangular kernel: [3, 1] with pad [1, 0] keeps 9x9 */
  Attrs a = conv_attrs(2, 3, 1, 1, 1, 1);
  a.kernel[1] = 1;
  a.pad[1] = 0;
  CHECK(has_shape(conv(y, a, 1, "rect"), S(4, 1, 2, 9, 9)));
  /* errors */
  CHECK(conv(x, conv_attrs(4, 3, 1, 0, 1, 2), 0, "bad1") == NULL);        /* 3 channels, groups 2 */
  CHECK(conv(x, conv_attrs(4, 40, 1, 0, 1, 1), 0, "bad2") == NULL);       /* kernel larger than input */
  CHECK(conv(x, conv_attrs(4, 3, 0, 0, 1, 1), 0, "bad3") == NULL);        /* stride 0 */
  Value *x3 = in("x3", DT_F32, S(3, 3, 32, 32));
  CHECK(conv(x3, conv_attrs(4, 3, 1, 0, 1, 1), 0, "bad4") == NULL);       /* not 4-D */
  /* a weight of the wrong shape is refused, not trusted */
  Attrs b = conv_attrs(4, 3, 1, 0, 1, 1);
  Value *v[2] = {x, param("badw.weight", PK_WEIGHT, S(4, 4, 2, 3, 3))};
  CHECK(ir_node(g, OP_CONV2D, v, 2, &b, NULL, NULL, L) == NULL);
  Value *xi = in("xi", DT_I32, S(4, 1, 3, 8, 8));
  CHECK(conv(xi, conv_attrs(4, 3, 1, 0, 1, 1), 0, "bad5") == NULL);       /* integer input */
}

static void test_linear_matmul(void) {
  Value *x = in("x", DT_F32, S(2, 16, 512));
  CHECK(has_shape(linear(x, 10, "fc"), S(2, 16, 10)));
  Value *x4 = in("x4", DT_F32, S(4, 16, 512, 7, 7));
  Attrs a;
  ir_attrs_init(&a);
  a.out = 10;
  Value *v[2] = {x4, param("fc4.weight", PK_WEIGHT, S(2, 10, 512))};
  CHECK(ir_node(g, OP_LINEAR, v, 2, &a, NULL, NULL, L) == NULL);
  v[0] = x;
  v[1] = param("fc5.weight", PK_WEIGHT, S(2, 10, 511));
  CHECK(ir_node(g, OP_LINEAR, v, 2, &a, NULL, NULL, L) == NULL);

  /* torch.matmul semantics */
  Value *a1 = in("a1", DT_F32, S(1, 3)), *b1 = in("b1", DT_F32, S(1, 3));
  CHECK(has_shape(bin(OP_MATMUL, a1, b1), S(0)));                          /* dot product */
  Value *m23 = in("m23", DT_F32, S(2, 2, 3)), *m34 = in("m34", DT_F32, S(2, 3, 4));
  CHECK(has_shape(bin(OP_MATMUL, m23, m34), S(2, 2, 4)));
  CHECK(has_shape(bin(OP_MATMUL, m23, b1), S(1, 2)));                      /* matrix @ vector */
  CHECK(has_shape(bin(OP_MATMUL, in("v2", DT_F32, S(1, 2)), m23), S(1, 3))); /* vector @ matrix */
  Value *ba = in("ba", DT_F32, S(4, 5, 1, 2, 3)), *bb = in("bb", DT_F32, S(3, 7, 3, 4));
  CHECK(has_shape(bin(OP_MATMUL, ba, bb), S(4, 5, 7, 2, 4)));             /* batch dims broadcast */
  CHECK(has_shape(bin(OP_MATMUL, ba, b1), S(3, 5, 1, 2)));
  CHECK(bin(OP_MATMUL, m23, m23) == NULL);                                /* 3 != 2 */
  CHECK(bin(OP_MATMUL, in("bc", DT_F32, S(3, 2, 2, 3)), in("bd", DT_F32, S(3, 3, 3, 4))) == NULL);
  CHECK(bin(OP_MATMUL, in("sc", DT_F32, S(0)), m34) == NULL);             /* scalar operand */
}

static void test_norm_elementwise(void) {
  Value *x = in("x", DT_F32, S(4, 2, 6, 5, 5));
  Value *v[5] = {x, param("bn.weight", PK_WEIGHT, S(1, 6)), param("bn.bias", PK_BIAS, S(1, 6)),
                 param("bn.running_mean", PK_RUNNING_MEAN, S(1, 6)), param("bn.running_var", PK_RUNNING_VAR, S(1, 6))};
  CHECK(has_shape(node(OP_BATCHNORM2D, v, 5, NULL), S(4, 2, 6, 5, 5)));
  v[4] = param("bn2.running_var", PK_RUNNING_VAR, S(1, 5));
  CHECK(node(OP_BATCHNORM2D, v, 5, NULL) == NULL);
  Value *x2 = in("x2", DT_F32, S(2, 2, 6));
  v[0] = x2;
  v[4] = param("bn3.running_var", PK_RUNNING_VAR, S(1, 6));
  CHECK(node(OP_BATCHNORM2D, v, 5, NULL) == NULL);                          /* 2-D input */
  Value *ln[3] = {in("t", DT_F32, S(3, 2, 7, 16)), param("ln.weight", PK_WEIGHT, S(1, 16)), param("ln.bias", PK_BIAS, S(1, 16))};
  CHECK(has_shape(node(OP_LAYERNORM, ln, 3, NULL), S(3, 2, 7, 16)));
  ln[1] = param("ln2.weight", PK_WEIGHT, S(1, 7));
  CHECK(node(OP_LAYERNORM, ln, 3, NULL) == NULL);

  static const OpKind unary[] = {OP_RELU, OP_RELU6, OP_SIGMOID, OP_TANH, OP_GELU, OP_SILU, OP_HARDSWISH,
                                 OP_LEAKY_RELU, OP_DROPOUT, OP_DROPOUT2D};
  for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++) CHECK(has_shape(un(unary[i], x), S(4, 2, 6, 5, 5)));
  CHECK(un(OP_RELU, in("lab", DT_I32, S(1, 4))) == NULL);
  Attrs a;
  ir_attrs_init(&a);
  a.p = 1.0;
  CHECK(node(OP_DROPOUT, &x, 1, &a) == NULL);                                /* p must be < 1 */

  /* NumPy broadcasting */
  static const OpKind binary[] = {OP_ADD, OP_SUB, OP_MUL, OP_DIV};
  Value *b = in("b", DT_F32, S(3, 6, 1, 5));
  for (size_t i = 0; i < 4; i++) CHECK(has_shape(bin(binary[i], x, b), S(4, 2, 6, 5, 5)));
  CHECK(has_shape(bin(OP_ADD, in("c1", DT_F32, S(2, 4, 1)), in("c2", DT_F32, S(3, 3, 1, 5))), S(3, 3, 4, 5)));
  CHECK(has_shape(bin(OP_MUL, x, in("sc", DT_F32, S(0))), S(4, 2, 6, 5, 5)));
  CHECK(bin(OP_ADD, in("d1", DT_F32, S(2, 2, 3)), in("d2", DT_F32, S(1, 4))) == NULL);
  CHECK(bin(OP_ADD, in("e1", DT_F32, S(1, 4)), in("e2", DT_F16, S(1, 4))) == NULL);   /* dtypes differ */
  CHECK(bin(OP_ADD, in("f1", DT_I32, S(1, 4)), in("f2", DT_I32, S(1, 4))) == NULL);   /* integer math */
}

static void test_pool_reduce_move(void) {
  Value *x = in("x", DT_F32, S(4, 1, 64, 112, 112));
  /* ResNet's stem pool: (112 + 2 - 3) / 2 + 1 = 56 */
  CHECK(has_shape(pool(OP_MAXPOOL2D, x, 3, 2, 1), S(4, 1, 64, 56, 56)));
  CHECK(has_shape(pool(OP_AVGPOOL2D, x, 2, 2, 0), S(4, 1, 64, 56, 56)));
  /* floor, not ceil_mode: (7 - 2) / 2 + 1 = 3 */
  CHECK(has_shape(pool(OP_MAXPOOL2D, in("s7", DT_F32, S(4, 1, 1, 7, 7)), 2, 2, 0), S(4, 1, 1, 3, 3)));
  CHECK(pool(OP_MAXPOOL2D, x, 3, 2, 2) == NULL);                            /* pad > kernel/2 */
  CHECK(pool(OP_MAXPOOL2D, in("tiny", DT_F32, S(4, 1, 1, 2, 2)), 3, 1, 0) == NULL);
  CHECK(pool(OP_MAXPOOL2D, in("x3", DT_F32, S(3, 1, 4, 4)), 2, 2, 0) == NULL);
  CHECK(has_shape(un(OP_GAVGPOOL2D, x), S(4, 1, 64, 1, 1)));

  Attrs a;
  ir_attrs_init(&a);
  Value *l = in("logits", DT_F32, S(2, 8, 10));
  a.axis = 1;
  CHECK(has_shape(node(OP_SOFTMAX, &l, 1, &a), S(2, 8, 10)));
  CHECK(has_shape(node(OP_LOG_SOFTMAX, &l, 1, &a), S(2, 8, 10)));
  a.axis = 2;
  CHECK(node(OP_SOFTMAX, &l, 1, &a) == NULL);
  a.axis = -1;
  CHECK(node(OP_SOFTMAX, &l, 1, &a) == NULL);                               /* must be normalised */

  Value *c[3] = {in("ca", DT_F32, S(4, 2, 3, 4, 4)), in("cb", DT_F32, S(4, 2, 5, 4, 4)), in("cc", DT_F32, S(4, 2, 1, 4, 4))};
  a.axis = 1;
  CHECK(has_shape(node(OP_CONCAT, c, 3, &a), S(4, 2, 9, 4, 4)));
  a.axis = 0;
  CHECK(node(OP_CONCAT, c, 3, &a) == NULL);
  c[2] = in("cd", DT_F16, S(4, 2, 1, 4, 4));
  a.axis = 1;
  CHECK(node(OP_CONCAT, c, 3, &a) == NULL);

  CHECK(has_shape(un(OP_FLATTEN, x), S(2, 1, 64 * 112 * 112)));
  CHECK(un(OP_FLATTEN, in("v", DT_F32, S(1, 5))) == NULL);

  Value *r = in("r", DT_F32, S(3, 2, 3, 4));
  ir_attrs_init(&a);
  a.nlist = 2;
  a.list[0] = -1;
  a.list[1] = 6;
  Value *rv = node(OP_RESHAPE, &r, 1, &a);
  CHECK(has_shape(rv, S(2, 4, 6)));
  CHECK(rv && rv->def->a.list[0] == 4);                                      /* -1 resolved in attrs */
  a.list[1] = 5;
  CHECK(node(OP_RESHAPE, &r, 1, &a) == NULL);                               /* 24 not divisible by 5 */
  a.list[0] = 4;
  CHECK(node(OP_RESHAPE, &r, 1, &a) == NULL);                               /* 20 != 24 */
  a.list[0] = a.list[1] = -1;
  CHECK(node(OP_RESHAPE, &r, 1, &a) == NULL);                               /* two -1 */

  ir_attrs_init(&a);
  a.nlist = 3;
  a.list[0] = 2; a.list[1] = 0; a.list[2] = 1;
  CHECK(has_shape(node(OP_TRANSPOSE, &r, 1, &a), S(3, 4, 2, 3)));
  a.list[2] = 0;
  CHECK(node(OP_TRANSPOSE, &r, 1, &a) == NULL);
  a.nlist = 2;
  CHECK(node(OP_TRANSPOSE, &r, 1, &a) == NULL);
}

static void test_losses(void) {
  Value *lo = in("lo", DT_F32, S(2, 8, 10)), *y = in("y", DT_I32, S(1, 8));
  Value *ce = bin(OP_CROSS_ENTROPY, lo, y);
  CHECK(has_shape(ce, S(0)) && ce->dtype == DT_F32);
  CHECK(has_shape(bin(OP_NLL_LOSS, lo, y), S(0)));
  CHECK(bin(OP_CROSS_ENTROPY, lo, in("yf", DT_F32, S(1, 8))) == NULL);
  CHECK(bin(OP_CROSS_ENTROPY, lo, in("y7", DT_I32, S(1, 7))) == NULL);
  CHECK(bin(OP_CROSS_ENTROPY, in("l4", DT_F32, S(4, 8, 10, 1, 1)), y) == NULL);
  CHECK(has_shape(bin(OP_MSE_LOSS, lo, in("t", DT_F32, S(2, 8, 10))), S(0)));
  CHECK(bin(OP_MSE_LOSS, lo, in("t2", DT_F32, S(2, 8, 1))) == NULL);
  Attrs a;
  ir_attrs_init(&a);
  a.fval = 2.5;
  Value *c = ir_node(g, OP_CONST, NULL, 0, &a, NULL, NULL, L);
  CHECK(has_shape(c, S(0)) && c->dtype == DT_F32);
}

/* LeNet of docs/language.md (examples/lenet.net), batch 64, with figures worked out by hand. */
static void test_verify_and_report(void) {
  Graph *old = g;
  g = ir_graph_new("lenet");
  Value *x = in("x", DT_F32, S(4, 64, 1, 28, 28));
  in("y", DT_I32, S(1, 64));
  Value *h = un(OP_RELU, pool(OP_MAXPOOL2D, conv(x, conv_attrs(10, 5, 1, 0, 1, 1), 1, "conv1"), 2, 2, 0));
  h = un(OP_RELU, pool(OP_MAXPOOL2D, un(OP_DROPOUT2D, conv(h, conv_attrs(20, 5, 1, 0, 1, 1), 1, "conv2")), 2, 2, 0));
  h = un(OP_DROPOUT, un(OP_RELU, linear(un(OP_FLATTEN, h), 50, "fc1")));
  Value *logits = linear(h, 10, "fc2");
  g->noutputs = 1;
  g->outputs = ARENA_NEW(g->arena, NamedValue);
  g->outputs[0] = (NamedValue){"logits", logits};
  CHECK(has_shape(logits, S(2, 64, 10)));
  CHECK(ir_verify(g) == 0);

  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  report_print(g, f, 0, "sm_80");
  fclose(f);
  const char *tot = strstr(buf, "\ntotal: ");
  CHECK(tot != NULL);
  long long p = 0, fl = 0, la = 0, by = 0, pk = 0, nv = 0;
  CHECK(tot && sscanf(tot + 1, "total: params=%lld flops=%lld launches=%lld bytes=%lld peak_memory=%lld naive_memory=%lld",
                      &p, &fl, &la, &by, &pk, &nv) == 6);
  CHECK(tot && tot[strlen(tot) - 1] == '\n' && !strchr(tot + 1, '\n')[1]);   /* the last line */
  /* conv1 260 + conv2 5020 + fc1 16050 + fc2 510 */
  CHECK(p == 21840);
  /* The launch count and memory figures depend on how codegen groups nodes
   * into kernels.  With one node per kernel (no fusion) they are checked
   * exactly, by hand; once the fusion pass merges groups, fusion may only
   * lower them (it never changes params, MACs or FLOPs). */
  unsigned char ones[64];
  memset(ones, 1, sizeof ones);
  CHECK(g->nnodes <= 64);
  GroupList gl = group_form(g, ones);
  int fused = gl.n != 9;
  group_free(&gl);
  /* kernels: conv, pool, relu (x2), fc1, relu, fc2; flatten and (at inference) dropout are not;
   * two more for split-K (ir_gemm_split_k): conv2 (20 x 4096: 64 tiles of 64 x 64, fewer than 66;
   * K = 250, 16 K tiles: S = min(ceil(132 / 64), 16 / 4) = 3) and fc1 (64 x 50: one tile;
   * K = 320, 20 K tiles: S = min(16, 20 / 4) = 5) add their partial sums in a second kernel */
  CHECK(fused ? la < 11 : la == 11);
  /* MACs: conv1 64*10*24*24*25, conv2 64*20*8*8*250, fc1 64*50*320, fc2 64*10*50 */
  long long macs = 64LL * 10 * 24 * 24 * 25 + 64LL * 20 * 8 * 8 * 250 + 64LL * 50 * 320 + 64LL * 10 * 50;
  char want[128];
  snprintf(want, sizeof want, "multiply-adds: total=%lld per_sample=%lld", macs, macs / 64);
  CHECK(strstr(buf, want) != NULL);
  /* flops: 2 per MAC + bias adds + pools (4 per output) + relus (1 per element) */
  long long bias = 64LL * (10 * 24 * 24 + 20 * 8 * 8 + 50 + 10);
  long long pools = 4LL * 64 * (10 * 12 * 12 + 20 * 4 * 4);
  long long relus = 64LL * (10 * 12 * 12 + 20 * 4 * 4 + 50);
  CHECK(fl == 2 * macs + bias + pools + relus);
  /* activations (bytes, each a multiple of 256 already): x 200704; conv1 1474560, pool 368640, relu
   * 368640, conv2 327680, pool 81920, relu 81920, fc1 12800, relu 12800, fc2 2560; the labels y are
   * read by no kernel and have no buffer */
  long long naive = 200704 + 1474560 + 368640 + 368640 + 327680 + 81920 + 81920 + 12800 + 12800 + 2560;
  CHECK(fused ? nv < naive : nv == naive);
  /* no memory plan: peak_memory is the unshared region */
  CHECK(pk == nv);
  /* bytes: every kernel reads its inputs (weights included) and writes its output once */
  long long wbytes = 4LL * 21840;
  long long bytes = wbytes + (200704 + 1474560) + (1474560 + 368640) + 2 * 368640 + (368640 + 327680) + (327680 + 81920) +
                    2 * 81920 + (81920 + 12800) + 2 * 12800 + (12800 + 2560);
  bytes += 2 * 3 * 327680LL + 2 * 5 * 12800LL;   /* split-K: conv2's 3 and fc1's 5 partial sums, written and read */
  CHECK(fused ? by < bytes : by == bytes);
  CHECK(by > 0 && pk <= nv);
  free(buf);

  /* planned: peak_memory is the plan's region, which here reaches the most
   * bytes live at once: at the first pool, x + conv1 + pool */
  PassCtx pc = {0};
  pc.verify = 1;
  CHECK(passes_run(g, &pc, "plan") == 0 && g->planned);
  buf = NULL;
  f = open_memstream(&buf, &len);
  report_print(g, f, 0, "sm_80");
  fclose(f);
  tot = strstr(buf, "\ntotal: ");
  CHECK(tot && sscanf(tot + 1, "total: params=%lld flops=%lld launches=%lld bytes=%lld peak_memory=%lld naive_memory=%lld",
                      &p, &fl, &la, &by, &pk, &nv) == 6);
  CHECK(pk == g->act_bytes && pk == 200704 + 1474560 + 368640 && nv == naive);
  free(buf);
  ir_clear_schedule(g);

  /* train: the same kernels at least (dropout becomes one where codegen makes it a kernel) */
  buf = NULL;
  f = open_memstream(&buf, &len);
  report_print(g, f, 1, "sm_90");
  fclose(f);
  tot = strstr(buf, "\ntotal: ");
  CHECK(tot && sscanf(tot + 1, "total: params=%lld flops=%lld launches=%lld", &p, &fl, &la) == 3 && la >= 9 && p == 21840);
  CHECK(strstr(buf, "no train block") != NULL);
  free(buf);

  /* the report's occupancy model (docs/gpu.md): each limit binds in turn */
  {
    static const struct { const char *arch; int thr, regs; size_t st, dyn; int want; char lim; } oc[] = {
      {"sm_90", 256, 56, 8320, 0, 4, 'r'},         /* the tiled GEMM: registers */
      {"sm_90", 256, 32, 0, 0, 8, 't'},            /* elementwise: threads */
      {"sm_90", 32, 16, 0, 0, 32, 'b'},            /* one warp a block: blocks */
      {"sm_90", 256, 32, 40960, 0, 5, 's'},        /* 40 KiB static: 228 KiB / 41 KiB */
      {"sm_80", 256, 32, 40960, 0, 4, 's'},        /* 164 KiB / 41 KiB */
      {"sm_90", 128, 32, 0, 102400, 2, 's'},       /* 100 KiB dynamic */
      {"sm_80", 128, 32, 0, 102400, 1, 's'},
      {"sm_90", 256, 32, 49 * 1024, 0, 0, 's'},    /* over 48 KiB static: does not fit */
      {"sm_90", 1024, 72, 0, 0, 0, 'r'},           /* 72 x 1024 registers: over 64K */
    };
    for (size_t i = 0; i < sizeof oc / sizeof oc[0]; i++) {
      char lim = 0;
      int got = report_blocks_per_sm(oc[i].arch, oc[i].thr, oc[i].regs, oc[i].st, oc[i].dyn, &lim);
      CHECK(got == oc[i].want && lim == oc[i].lim);
      if (got != oc[i].want || lim != oc[i].lim)
        fprintf(stderr, "occupancy case %zu: %d%c, expected %d%c\n", i, got, lim, oc[i].want, oc[i].lim);
    }
  }

  /* verifier: each corruption is caught */
  fprintf(stderr, "(the verifier messages below are expected)\n");
  logits->nuses++;
  CHECK(ir_verify(g) != 0);
  logits->nuses--;
  Node *fc2 = logits->def;
  fc2->a.out = 11;
  CHECK(ir_verify(g) != 0);
  fc2->a.out = 10;
  logits->shape.d[1] = 9;
  CHECK(ir_verify(g) != 0);
  logits->shape.d[1] = 10;
  fc2->dead = 1;
  CHECK(ir_verify(g) != 0);
  fc2->dead = 0;
  Value *save = fc2->in[0];
  fc2->in[0] = logits;                      /* a cycle: input defined by itself */
  CHECK(ir_verify(g) != 0);
  fc2->in[0] = save;
  Node *n0 = g->nodes[0];
  g->nodes[0] = g->nodes[1];
  g->nodes[1] = n0;                         /* ids out of place */
  CHECK(ir_verify(g) != 0);
  g->nodes[1] = g->nodes[0];
  g->nodes[0] = n0;
  Node *w = ir_find_param(g, "fc1.weight");
  CHECK(w != NULL);
  const char *wn = w->name;
  w->name = "fc2.weight";                   /* two parameters with one name */
  CHECK(ir_verify(g) != 0);
  w->name = wn;
  fc2->a.has_bias = 0;                      /* attrs disagree with the bias input */
  CHECK(ir_verify(g) != 0);
  fc2->a.has_bias = 1;
  CHECK(ir_verify(g) == 0);

  /* a loss pruned at inference: g->losses keeps pointing at a compacted-away
   * node whose stale id is that of a live node now; verify allows it, the
   * report must not follow it */
  Value *ce = bin(OP_CROSS_ENTROPY, logits, g->nodes[1]->out);
  CHECK(ce != NULL);
  g->nlosses = 1;
  g->losses = ARENA_NEW(g->arena, NamedValue);
  g->losses[0] = (NamedValue){"loss", ce};
  CHECK(ir_verify(g) == 0 && ir_value_live(g, ce));
  ce->def->dead = 1;
  CHECK(ir_verify(g) != 0);                 /* dead but not compacted */
  ir_compact(g);
  Value *later = un(OP_SIGMOID, logits);    /* takes the loss's old id */
  CHECK(later && later->def->id == ce->def->id);
  CHECK(!ir_value_live(g, ce) && ir_value_live(g, later));
  CHECK(ir_verify(g) == 0);
  buf = NULL;
  f = open_memstream(&buf, &len);
  report_print(g, f, 0, "sm_90");
  fclose(f);
  /* the 9 kernel groups the output needs, as codegen generates them (11
   * launches with split-K's two sums, above): neither the stale loss nor the
   * sigmoid no output reads */
  CHECK(strstr(buf, "total: params=21840 ") != NULL && strstr(buf, " launches=11 ") != NULL);
  free(buf);
  ir_graph_free(g);
  g = old;
}


/* Random ops with random shapes and attributes, extreme values included:
 * every rule must either accept (and then the graph verifies) or refuse with
 * an error, never crash or overflow (the sanitizer build runs this too). */
static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static int64_t pick(void) {
  static const int64_t edge[] = {0, 1, 2, 3, -1, -2, 7, 1000, INT32_MAX, INT32_MIN, (int64_t)1 << 40};
  return next() % 4 ? (int64_t)(next() % 6) : edge[next() % (sizeof edge / sizeof edge[0])];
}
static void test_random_rules(void) {
  Graph *old = g;
  g = ir_graph_new("fuzz");
  diag_set_limit(0);
  int before = diag_errors(), accepted = 0;
  for (int it = 0; it < 20000; it++) {
    OpKind op = (OpKind)(3 + next() % (OP__COUNT - 3));   /* not the sources */
    int nin = ncc_ops[op].min_in + (int)(next() % (unsigned)(ncc_ops[op].max_in - ncc_ops[op].min_in + 1));
    if (nin > 4) nin = 4;
    Value *ins[4];
    for (int i = 0; i < nin; i++) {
      Shape s = {(int)(next() % 6), {0}};
      for (int j = 0; j < s.rank; j++) s.d[j] = 1 + (int64_t)(next() % 5);
      if (next() % 8 == 0 && s.rank) s.d[next() % (unsigned)s.rank] = next() % 2 ? 0 : 3000;
      DType t = next() % 6 ? DT_F32 : (DType)(next() % DT__COUNT);
      ins[i] = i && next() % 2 ? ir_param(g, arena_printf(g->arena, "p%d_%d", it, i), PK_WEIGHT, &s, NULL, L)
                               : ir_input(g, "x", t, &s, L);
    }
    Attrs a;
    ir_attrs_init(&a);
    for (int i = 0; i < 2; i++) {
      a.kernel[i] = (int)(pick() & 0x7fffffff) ? (int)pick() : 1;
      a.stride[i] = (int)pick();
      a.pad[i] = (int)pick();
      a.dilation[i] = (int)pick();
    }
    a.groups = (int)pick();
    a.out = pick();
    a.axis = (int)pick();
    a.p = (double)(next() % 3) / 2;
    a.nlist = (int)(next() % 10) - 1;
    for (int i = 0; i < NCC_MAX_RANK; i++) a.list[i] = next() % 3 ? (int64_t)(next() % 6) - 1 : pick();
    if (ir_node(g, op, ins, nin, &a, NULL, NULL, L)) accepted++;
  }
  diag_set_limit(1000);
  CHECK(diag_errors() > before);       /* most random configurations are refused... */
  CHECK(accepted > 100);               /* ...but some are not */
  CHECK(ir_verify(g) == 0);            /* and what was accepted is sound */
  for (int i = 0; i < g->nnodes && g->noutputs < 1; i++)
    if (!(ncc_ops[g->nodes[i]->op].flags & OPF_SOURCE)) {
      g->outputs = ARENA_NEW(g->arena, NamedValue);
      g->outputs[g->noutputs++] = (NamedValue){"y", g->nodes[i]->out};
    }
  FILE *f = fopen("/dev/null", "w");
  CHECK(f != NULL);
  if (f) {                             /* the report copes with all of it */
    report_print(g, f, 0, "sm_80");
    report_print(g, f, 1, "bogus");
    fclose(f);
  }
  printf("test_ir: random rules: %d of 20000 accepted\n", accepted);
  ir_graph_free(g);
  g = old;
}

int main(void) {
  g = ir_graph_new("t");
  diag_set_limit(1000);
  test_conv();
  test_linear_matmul();
  test_norm_elementwise();
  test_pool_reduce_move();
  test_losses();
  int errs = diag_errors();
  CHECK(ir_verify(g) == 0);                 /* rejected nodes left nothing behind */
  test_verify_and_report();
  test_random_rules();
  ir_graph_free(g);
  printf("test_ir: %d checks, %d failed (%d shape errors reported, all expected)\n", checks, fails, errs);
  return fails ? 1 : 0;
}
