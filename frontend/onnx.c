/* onnx.c — ONNX import: a ModelProto (protobuf, parsed by protobuf-c from the
 * onnx.proto of the installed onnx package, generated at build time) -> the
 * same IR graph the .net frontend builds (docs/onnx.md).
 *
 * Each ONNX tensor name maps to an Ent: either an IR value, or a constant the
 * importer holds on the host (an initializer, a Constant node, or the result
 * of a shape computation such as Shape -> Gather -> Unsqueeze -> Concat that
 * torch.onnx emits for x.view(x.size(0), -1)).  Constants become graph
 * tensors only when an op reads them as data: a PARAM under the ONNX name
 * (an initializer keeps its state_dict name, "conv1.weight"), whose data is
 * kept for frontend_weights(), or a scalar CONST when it is one number.
 *
 * Locations: ONNX has no lines, so an error about node k (0-based in
 * graph.node) is reported at FILE:k+1:1 and its message names the node and
 * its op type.  Every unsupported op, attribute value or dtype is an error,
 * never a guess. */
#include "frontend.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The weights of the last ONNX model loaded (one per process is all the
 * driver needs: it loads one model). */
static char *w_path;
static FrontendWeight *w_list;
static int w_n;

/* A new load replaces them (the driver loads one file, sometimes twice: the
 * training step, --max-memory's trial graphs). */
__attribute__((unused)) static void forget_weights(void) {
  for (int k = 0; k < w_n; k++) {
    free((char *)w_list[k].name);
    free((float *)w_list[k].data);
  }
  w_n = 0;
  free(w_path);
  w_path = NULL;
}

int frontend_weights(const char *path, const FrontendWeight **w) {
  *w = NULL;
  if (!path || !w_path || strcmp(path, w_path)) return 0;
  *w = w_list;
  return w_n;
}

int frontend_is_onnx(const char *path, const char *text, size_t len) {
  size_t n = path ? strlen(path) : 0;
  if (n >= 5 && !strcmp(path + n - 5, ".onnx")) return 1;
  /* a ModelProto starts with field 1 (ir_version, a varint): tag byte 0x08,
   * a control character no .net text file starts with */
  return len > 0 && (unsigned char)text[0] == 0x08;
}

#ifndef NCC_HAVE_ONNX
Graph *frontend_load_onnx(const char *path, const char *bytes, size_t len, const SetOpt *sets, int nsets) {
  (void)bytes, (void)len, (void)sets, (void)nsets;
  diag_error((Loc){path, 1, 1}, "this ncc was built without ONNX support (the build found no protobuf-c "
             "or no onnx.proto: apt-get install libprotobuf-c-dev protobuf-c-compiler python3-onnx, "
             "then configure again)");
  return NULL;
}
#else
#include "onnx.pb-c.h"

enum { T_F32, T_I64 };
typedef struct Tens {        /* a constant known while importing */
  int type;                  /* T_F32 or T_I64 */
  int rank;
  int64_t d[NCC_MAX_RANK];
  int64_t n;
  float *f;                  /* T_F32 */
  int64_t *i;                /* T_I64 */
} Tens;

typedef struct Ent {
  const char *name;
  Value *v;                  /* an IR value, or NULL */
  Tens *c;                   /* a host constant, or NULL */
  int init;                  /* an initializer (its PARAM keeps the ONNX name) */
} Ent;

typedef struct Imp {
  Graph *g;
  const char *path;
  Arena *ar;                 /* the graph's arena: everything lives as long as it */
  Ent *e;
  int ne, cap;
  int opset;
  const Onnx__NodeProto *node;  /* the node being imported, for messages */
  Loc loc;
  const Onnx__GraphProto *G; /* the graph being imported (patterns look ahead in it) */
  unsigned char *skip;       /* by node index: imported as part of a pattern (gelu, layernorm) */
  const char *batch_sym;     /* the symbolic first dimension of the graph inputs so far */
  int ninputs;
} Imp;

static int fail(Imp *I, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An error about the current node: names it and its op type. */
static int fail(Imp *I, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (I->node)
    diag_error(I->loc, "node '%s' (%s): %s", I->node->name && *I->node->name ? I->node->name : "(unnamed)",
               I->node->op_type, msg);
  else
    diag_error(I->loc, "%s", msg);
  return -1;
}

static Ent *find(Imp *I, const char *name) {
  for (int k = I->ne - 1; k >= 0; k--)
    if (!strcmp(I->e[k].name, name)) return &I->e[k];
  return NULL;
}

static Ent *put(Imp *I, const char *name) {
  if (I->ne == I->cap) {
    I->cap = I->cap ? I->cap * 2 : 64;
    I->e = xrealloc(I->e, sizeof(Ent) * (size_t)I->cap);
  }
  Ent *e = &I->e[I->ne++];
  memset(e, 0, sizeof *e);
  e->name = arena_strdup(I->ar, name);
  return e;
}

/* ---- tensors ------------------------------------------------------------ */

static const char *dtype_str(int t) {
  static const char *n[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64",
                            "string", "bool", "float16", "double", "uint32", "uint64", "complex64",
                            "complex128", "bfloat16"};
  return t >= 0 && t < (int)(sizeof n / sizeof *n) ? n[t] : "unknown";
}

/* A TensorProto's data as a host constant (float, or int64/int32 for shapes). */
static Tens *tensor_of(Imp *I, const Onnx__TensorProto *t) {
  const char *nm = t->name && *t->name ? t->name : "(unnamed)";
  if (t->n_external_data || (t->has_data_location && t->data_location)) {
    fail(I, "tensor '%s' keeps its data in an external file, which ncc does not read", nm);
    return NULL;
  }
  if (t->n_dims > NCC_MAX_RANK) {
    fail(I, "tensor '%s' has rank %zu; ncc supports at most %d", nm, t->n_dims, NCC_MAX_RANK);
    return NULL;
  }
  Tens *c = ARENA_NEW(I->ar, Tens);
  c->rank = (int)t->n_dims;
  c->n = 1;
  for (int k = 0; k < c->rank; k++) {
    if (t->dims[k] < 0 || (t->dims[k] && c->n > ((int64_t)1 << 40) / t->dims[k])) {
      fail(I, "tensor '%s' has a bad dimension %lld", nm, (long long)t->dims[k]);
      return NULL;
    }
    c->d[k] = t->dims[k];
    c->n *= t->dims[k];
  }
  int dt = t->has_data_type ? t->data_type : 0;
  size_t raw = t->has_raw_data ? t->raw_data.len : 0;
  /* the data must be there before the elements are allocated: a few bytes
   * may claim dims of 2^40 elements */
  size_t have = t->has_raw_data ? raw : t->n_float_data + t->n_int64_data + t->n_int32_data;
  if ((dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ||
       dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 || dt == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL) &&
      (uint64_t)c->n > have)
    goto short_data;
  if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
    c->type = T_F32;
    c->f = ARENA_ARRAY(I->ar, float, c->n ? c->n : 1);
    if (t->has_raw_data && raw == (size_t)c->n * 4) memcpy(c->f, t->raw_data.data, raw);   /* little-endian, as x86/arm64 */
    else if (!t->has_raw_data && t->n_float_data == (size_t)c->n) { if (c->n) memcpy(c->f, t->float_data, (size_t)c->n * 4); }
    else goto short_data;
    return c;
  }
  if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT32) {
    c->type = T_I64;
    c->i = ARENA_ARRAY(I->ar, int64_t, c->n ? c->n : 1);
    int w = dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? 8 : 4;
    if (t->has_raw_data && raw == (size_t)c->n * (size_t)w) {
      for (int64_t k = 0; k < c->n; k++) {
        if (w == 8) memcpy(&c->i[k], t->raw_data.data + k * 8, 8);
        else { int32_t v; memcpy(&v, t->raw_data.data + k * 4, 4); c->i[k] = v; }
      }
    } else if (!t->has_raw_data && w == 8 && t->n_int64_data == (size_t)c->n) {
      if (c->n) memcpy(c->i, t->int64_data, (size_t)c->n * 8);   /* int64_data is NULL when empty */
    } else if (!t->has_raw_data && w == 4 && t->n_int32_data == (size_t)c->n) {
      for (int64_t k = 0; k < c->n; k++) c->i[k] = t->int32_data[k];
    } else {
      goto short_data;
    }
    return c;
  }
  if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL) {   /* flags such as Dropout's training_mode: 0 or 1 */
    c->type = T_I64;
    c->i = ARENA_ARRAY(I->ar, int64_t, c->n ? c->n : 1);
    if (t->has_raw_data && raw == (size_t)c->n) {
      for (int64_t k = 0; k < c->n; k++) c->i[k] = t->raw_data.data[k] != 0;
    } else if (!t->has_raw_data && t->n_int32_data == (size_t)c->n) {
      for (int64_t k = 0; k < c->n; k++) c->i[k] = t->int32_data[k] != 0;
    } else {
      goto short_data;
    }
    return c;
  }
  fail(I, "tensor '%s' has dtype %s; ncc imports float tensors (and int64/int32/bool constants)", nm, dtype_str(dt));
  return NULL;
short_data:
  fail(I, "tensor '%s' holds the wrong amount of data for its %lld elements", nm, (long long)c->n);
  return NULL;
}

static Shape shape_of_tens(const Tens *c) {
  Shape s = {c->rank, {0}};
  memcpy(s.d, c->d, sizeof(int64_t) * (size_t)c->rank);
  return s;
}

/* Names of parameters appear in the generated C as strings and in
 * safetensors headers: printable ASCII without quotes or backslashes. */
static int plain_name(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (*s < 32 || *s > 126 || *s == '"' || *s == '\\') return 0;
  return 1;
}

/* The IR value of an operand: a constant becomes a PARAM under its ONNX name
 * (kind: PK_* for the layer that reads it), its data kept as a weight. */
static Value *value_of(Imp *I, Ent *e, int kind) {
  if (e->v) return e->v;
  Tens *c = e->c;
  if (c->type != T_F32) {
    fail(I, "'%s' is an integer tensor used as data; ncc computes in float", e->name);
    return NULL;
  }
  if (!plain_name(e->name)) {
    fail(I, "the tensor name '%s' is not printable ASCII without quotes; ncc cannot name a parameter so", e->name);
    return NULL;
  }
  Shape s = shape_of_tens(c);
  const char *dot = strrchr(e->name, '.');
  const char *layer = dot ? arena_strndup(I->ar, e->name, (size_t)(dot - e->name)) : NULL;
  e->v = ir_param(I->g, e->name, kind, &s, layer, I->loc);
  if (!e->v) return NULL;
  w_list = xrealloc(w_list, sizeof(FrontendWeight) * (size_t)(w_n + 1));
  FrontendWeight *w = &w_list[w_n++];
  memset(w, 0, sizeof *w);
  w->name = strdup(e->v->def->name);
  w->rank = c->rank;
  memcpy(w->shape, c->d, sizeof(int64_t) * (size_t)c->rank);
  float *copy = xmalloc(sizeof(float) * (size_t)(c->n ? c->n : 1));
  memcpy(copy, c->f, sizeof(float) * (size_t)c->n);
  w->data = copy;
  return e->v;
}

/* ---- attributes --------------------------------------------------------- */

static const Onnx__AttributeProto *attr(Imp *I, const char *name) {
  for (size_t k = 0; k < I->node->n_attribute; k++)
    if (I->node->attribute[k]->name && !strcmp(I->node->attribute[k]->name, name)) return I->node->attribute[k];
  return NULL;
}
static int64_t attr_i(Imp *I, const char *name, int64_t def) {
  const Onnx__AttributeProto *a = attr(I, name);
  return a && a->has_i ? a->i : def;
}
/* A float32 number as the shortest decimal that reads back as the same
 * float (ONNX's 1e-5f is 1e-5, not 9.999999747378752e-06): the same float
 * in every kernel, and the number --emit=net writes is the one the model
 * was made with. */
static double f32_decimal(double x) {
  float f = (float)x;
  if (!isfinite(f)) return x;
  char buf[32];
  for (int p = 1; p <= 9; p++) {
    snprintf(buf, sizeof buf, "%.*g", p, (double)f);
    if (strtof(buf, NULL) == f) break;
  }
  return strtod(buf, NULL);
}
static double attr_f(Imp *I, const char *name, double def) {
  const Onnx__AttributeProto *a = attr(I, name);
  return a && a->has_f ? f32_decimal(a->f) : def;
}
/* ints attribute; returns its count, -1 when absent */
static int attr_ints(Imp *I, const char *name, int64_t *out, int max) {
  const Onnx__AttributeProto *a = attr(I, name);
  if (!a) return -1;
  int n = (int)a->n_ints;
  if (n > max) return fail(I, "attribute %s has %d values, more than ncc supports (%d)", name, n, max), -2;
  for (int k = 0; k < n; k++) out[k] = a->ints[k];
  return n;
}
static int attr_is_str(Imp *I, const char *name, const char *want) {
  const Onnx__AttributeProto *a = attr(I, name);
  if (!a || !a->has_s) return 1;   /* absent: the default */
  return a->s.len == strlen(want) && !memcmp(a->s.data, want, a->s.len);
}

/* ---- operands ----------------------------------------------------------- */

static int nin_given(Imp *I) {
  int n = (int)I->node->n_input;
  while (n > 0 && !*I->node->input[n - 1]) n--;   /* trailing optional inputs left out */
  return n;
}

static Ent *in_ent(Imp *I, int k) {
  if (k >= (int)I->node->n_input || !*I->node->input[k]) {
    fail(I, "input %d is missing", k);
    return NULL;
  }
  Ent *e = find(I, I->node->input[k]);
  if (!e) fail(I, "input '%s' is produced by no earlier node, initializer or graph input", I->node->input[k]);
  return e;
}
static Value *in_val(Imp *I, int k, int kind) {
  Ent *e = in_ent(I, k);
  return e ? value_of(I, e, kind) : NULL;
}
/* a constant input (initializer, Constant, folded shape arithmetic) */
static Tens *in_const(Imp *I, int k, const char *what) {
  Ent *e = in_ent(I, k);
  if (!e) return NULL;
  if (!e->c) fail(I, "%s ('%s') must be a constant (an initializer or computed from shapes)", what, e->name);
  return e->c;
}

static int set_out(Imp *I, Value *v) {
  if (!v) return -1;
  if (I->node->n_output < 1) return fail(I, "the node has no output");
  put(I, I->node->output[0])->v = v;
  return 0;
}
static int set_out_const(Imp *I, Tens *c) {
  put(I, I->node->output[0])->c = c;
  return 0;
}

static const char *node_name(Imp *I) {
  return I->node->name && *I->node->name ? I->node->name : NULL;
}
static Value *mk(Imp *I, OpKind op, Value **in, int nin, const Attrs *a) {
  for (int k = 0; k < nin; k++)
    if (!in[k]) return NULL;
  Attrs def;
  if (!a) { ir_attrs_init(&def); a = &def; }
  return ir_node(I->g, op, in, nin, a, node_name(I), node_name(I), I->loc);
}
static Value *mk_reshape(Imp *I, Value *x, const int64_t *d, int rank) {
  Attrs a;
  ir_attrs_init(&a);
  a.nlist = rank;
  memcpy(a.list, d, sizeof(int64_t) * (size_t)rank);
  return mk(I, OP_RESHAPE, &x, 1, &a);
}

/* ---- ops ------------------------------------------------------------------ */

static int op_unary(Imp *I, OpKind op) {
  Value *x = in_val(I, 0, PK_NONE);
  return set_out(I, mk(I, op, &x, 1, NULL));
}

static int op_identity(Imp *I) {
  Ent *e = in_ent(I, 0);
  if (!e) return -1;
  Ent src = *e;   /* put() may move the table e points into */
  Ent *o = put(I, I->node->output[0]);
  o->v = src.v, o->c = src.c;
  return 0;
}

static int op_leaky(Imp *I) {
  Attrs a;
  ir_attrs_init(&a);
  a.slope = attr_f(I, "alpha", 0.01);
  Value *x = in_val(I, 0, PK_NONE);
  return set_out(I, mk(I, OP_LEAKY_RELU, &x, 1, &a));
}

/* HardSigmoid(x) = clip(alpha x + beta, 0, 1) = relu6(6 alpha x + 6 beta) / 6:
 * torch exports hardswish as x * HardSigmoid(x) (alpha 1/6, beta 1/2) */
static int op_hardsigmoid(Imp *I) {
  double al = attr_f(I, "alpha", 0.2), be = attr_f(I, "beta", 0.5);
  Value *x = in_val(I, 0, PK_NONE);
  if (!x) return -1;
  Attrs c;
  ir_attrs_init(&c);
  if (fabs(6 * al - 1) > 1e-6) {
    c.fval = 6 * al;
    Value *in[2] = {x, ir_node(I->g, OP_CONST, NULL, 0, &c, NULL, NULL, I->loc)};
    x = mk(I, OP_MUL, in, 2, NULL);
  }
  c.fval = 6 * be;
  Value *in[2] = {x, ir_node(I->g, OP_CONST, NULL, 0, &c, NULL, NULL, I->loc)};
  x = mk(I, OP_ADD, in, 2, NULL);
  x = mk(I, OP_RELU6, &x, 1, NULL);
  c.fval = 1.0 / 6.0;
  Value *in2[2] = {x, ir_node(I->g, OP_CONST, NULL, 0, &c, NULL, NULL, I->loc)};
  return set_out(I, mk(I, OP_MUL, in2, 2, NULL));
}

/* Pad: torch exports avg_pool2d as a Pad (zeros for count_include_pad)
 * before AveragePool, often with all pads 0: an identity then. */
static int op_pad(Imp *I) {
  if (!attr_is_str(I, "mode", "constant")) return fail(I, "only constant padding is supported");
  Tens *p = in_const(I, 1, "pads");
  if (!p) return -1;
  if (p->type != T_I64) return fail(I, "pads must be int64");
  for (int64_t k = 0; k < p->n; k++)
    if (p->i[k]) return fail(I, "padding by a separate Pad node is not supported (pads are not all 0)");
  return op_identity(I);
}

/* Clip(0, 6) is relu6 and Clip(0, none) relu; other bounds have no IR op. */
static int op_clip(Imp *I) {
  double lo = -INFINITY, hi = INFINITY;
  if (I->opset < 11) {
    lo = attr_f(I, "min", lo), hi = attr_f(I, "max", hi);
  } else {
    int n = nin_given(I);
    for (int k = 1; k < n && k < 3; k++) {
      if (!*I->node->input[k]) continue;
      Tens *c = in_const(I, k, k == 1 ? "min" : "max");
      if (!c) return -1;
      if (c->n != 1 || c->type != T_F32) return fail(I, "%s must be one float", k == 1 ? "min" : "max");
      if (k == 1) lo = c->f[0];
      else hi = c->f[0];
    }
  }
  Value *x = in_val(I, 0, PK_NONE);
  if (!x) return -1;
  if (lo == 0 && hi == 6) return set_out(I, mk(I, OP_RELU6, &x, 1, NULL));
  if (lo == 0 && hi == INFINITY) return set_out(I, mk(I, OP_RELU, &x, 1, NULL));
  if (isnan(lo) || isnan(hi) || lo > hi) return fail(I, "Clip(%g, %g) is not supported (min above max)", lo, hi);
  /* min(max(x, lo), hi) = lo + relu(x - lo) - relu(x - hi), an infinite
   * bound's term left out */
  Value *y = x;
  Attrs c;
  ir_attrs_init(&c);
  if (lo != -INFINITY) {
    c.fval = lo;
    Value *in[2] = {x, ir_node(I->g, OP_CONST, NULL, 0, &c, NULL, NULL, I->loc)};
    Value *r = mk(I, OP_SUB, in, 2, NULL);
    r = mk(I, OP_RELU, &r, 1, NULL);
    Value *in2[2] = {r, ir_node(I->g, OP_CONST, NULL, 0, &c, NULL, NULL, I->loc)};
    y = mk(I, OP_ADD, in2, 2, NULL);
  }
  if (hi != INFINITY) {
    c.fval = hi;
    Value *in[2] = {x, ir_node(I->g, OP_CONST, NULL, 0, &c, NULL, NULL, I->loc)};
    Value *r = mk(I, OP_SUB, in, 2, NULL);
    r = mk(I, OP_RELU, &r, 1, NULL);
    Value *in2[2] = {y, r};
    y = mk(I, OP_SUB, in2, 2, NULL);
  }
  if (y == x) return op_identity(I);
  return set_out(I, y);
}

/* Add/Sub/Mul/Div: NumPy broadcasting as ONNX's; a one-element constant
 * becomes a scalar CONST when that cannot change the result's rank. */
static int op_binary(Imp *I, OpKind op) {
  Ent *ea = in_ent(I, 0), *eb = in_ent(I, 1);
  if (!ea || !eb) return -1;
  if (ea->c && eb->c && ea->c->type == T_I64 && eb->c->type == T_I64 && (ea->c->n == eb->c->n || eb->c->n == 1)) {
    /* shape arithmetic (torch's size computations): fold */
    Tens *r = ARENA_NEW(I->ar, Tens);
    *r = *ea->c;
    r->i = ARENA_ARRAY(I->ar, int64_t, r->n ? r->n : 1);
    for (int64_t k = 0; k < r->n; k++) {
      int64_t a = ea->c->i[k], b = eb->c->i[eb->c->n == 1 ? 0 : k];
      if (op == OP_DIV && b == 0) return fail(I, "division by zero in a shape computation");
      int64_t v;
      int over = op == OP_ADD ? __builtin_add_overflow(a, b, &v) : op == OP_SUB ? __builtin_sub_overflow(a, b, &v)
               : op == OP_MUL ? __builtin_mul_overflow(a, b, &v) : (a == INT64_MIN && b == -1) || (v = a / b, 0);
      if (over) return fail(I, "integer overflow in a shape computation");
      r->i[k] = v;
    }
    return set_out_const(I, r);
  }
  Value *in[2];
  Ent *es[2] = {ea, eb};
  for (int k = 0; k < 2; k++) {
    Ent *e = es[k], *other = es[1 - k];
    int other_rank = other->v ? other->v->shape.rank : other->c->rank;
    if (!e->v && e->c->type == T_F32 && e->c->n == 1 && e->c->rank <= other_rank && (other->v || !other->c)) {
      Attrs a;
      ir_attrs_init(&a);
      a.fval = f32_decimal(e->c->f[0]);
      in[k] = ir_node(I->g, OP_CONST, NULL, 0, &a, NULL, NULL, I->loc);
    } else {
      in[k] = value_of(I, e, PK_NONE);
    }
  }
  return set_out(I, mk(I, op, in, 2, NULL));
}

/* The window of a Conv or pool (x its input, a->kernel already set for a
 * Conv): strides, dilations, and symmetric pads [top, left, bottom, right]
 * -> pad[2].  auto_pad VALID pads nothing; SAME_UPPER/SAME_LOWER pad so that
 * the output has ceil(in / stride) rows and columns, and are taken when that
 * padding splits evenly (the two modes differ only in where an odd one's
 * extra row goes). */
static int window_attrs(Imp *I, Attrs *a, int kernel_from_attr, const Value *x) {
  int64_t v[8];
  static const char *modes[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
  int mode = 0;
  const Onnx__AttributeProto *ap = attr(I, "auto_pad");
  if (ap && ap->has_s) {
    for (mode = 0; mode < 4; mode++)
      if (ap->s.len == strlen(modes[mode]) && !memcmp(ap->s.data, modes[mode], ap->s.len)) break;
    if (mode == 4) return fail(I, "auto_pad '%.*s' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", (int)ap->s.len, ap->s.data);
  }
  if (kernel_from_attr) {
    int n = attr_ints(I, "kernel_shape", v, 8);
    if (n == -2) return -1;
    if (n != 2) return fail(I, "%d-D pooling is not supported (kernel_shape has %d values; ncc pools in 2-D)", n, n);
    if (v[0] < 1 || v[1] < 1 || v[0] > 65536 || v[1] > 65536)
      return fail(I, "kernel_shape [%lld, %lld] is out of range", (long long)v[0], (long long)v[1]);
    a->kernel[0] = (int)v[0], a->kernel[1] = (int)v[1];
  }
  int n = attr_ints(I, "strides", v, 8);
  if (n == -2) return -1;
  a->stride[0] = a->stride[1] = 1;   /* ONNX's default, not the kernel as in torch */
  if (n >= 0 && n != 2) return fail(I, "strides must have 2 values, got %d", n);
  if (n == 2 && (v[0] < 1 || v[1] < 1 || v[0] > 65536 || v[1] > 65536))
    return fail(I, "strides [%lld, %lld] are out of range", (long long)v[0], (long long)v[1]);
  if (n == 2) a->stride[0] = (int)v[0], a->stride[1] = (int)v[1];
  n = attr_ints(I, "pads", v, 8);
  if (n == -2) return -1;
  if (n >= 0 && n != 4) return fail(I, "pads must have 4 values, got %d", n);
  if (n == 4 && mode == 0) {
    if (v[0] != v[2] || v[1] != v[3])
      return fail(I, "asymmetric pads [%lld, %lld, %lld, %lld] are not supported", (long long)v[0], (long long)v[1],
                  (long long)v[2], (long long)v[3]);
    if (v[0] < 0 || v[1] < 0 || v[0] > 65536 || v[1] > 65536)
      return fail(I, "pads [%lld, %lld, %lld, %lld] are out of range", (long long)v[0], (long long)v[1],
                  (long long)v[2], (long long)v[3]);
    a->pad[0] = (int)v[0], a->pad[1] = (int)v[1];
  }
  n = attr_ints(I, "dilations", v, 8);
  if (n == -2) return -1;
  if (n >= 0 && n != 2) return fail(I, "dilations must have 2 values, got %d", n);
  if (n == 2 && (v[0] < 1 || v[1] < 1 || v[0] > 65536 || v[1] > 65536))
    return fail(I, "dilations [%lld, %lld] are out of range", (long long)v[0], (long long)v[1]);
  if (n == 2) a->dilation[0] = (int)v[0], a->dilation[1] = (int)v[1];
  if (mode >= 2) {   /* SAME_UPPER / SAME_LOWER: ONNX's padding, when even */
    if (!x || x->shape.rank != 4) return fail(I, "auto_pad %s needs a 4-D input", modes[mode]);
    for (int k = 0; k < 2; k++) {
      int64_t in = x->shape.d[2 + k], s = a->stride[k];
      int64_t eff = (int64_t)(a->kernel[k] - 1) * a->dilation[k] + 1;
      int64_t total = ((in + s - 1) / s - 1) * s + eff - in;
      if (total < 0) total = 0;
      if (total % 2)
        return fail(I, "auto_pad %s pads the %s by %lld, %lld before and %lld after: uneven padding is not "
                    "supported (ncc pads both sides alike)", modes[mode], k ? "width" : "height", (long long)total,
                    (long long)(mode == 2 ? total / 2 : total - total / 2), (long long)(mode == 2 ? total - total / 2 : total / 2));
      if (total / 2 > 65536) return fail(I, "auto_pad %s pads by %lld, out of range", modes[mode], (long long)total);
      a->pad[k] = (int)(total / 2);
    }
  }
  return 0;
}

static int op_conv(Imp *I) {
  Attrs a;
  ir_attrs_init(&a);
  Value *x = in_val(I, 0, PK_NONE);
  Tens *w = in_const(I, 1, "the weight");
  if (!x || !w) return -1;
  if (x->shape.rank != 4 || w->rank != 4) return fail(I, "only 2-D convolutions (4-D input and weight) are supported");
  int64_t ks[8];
  int nk = attr_ints(I, "kernel_shape", ks, 8);
  if (nk == -2) return -1;
  if (nk >= 0 && (nk != 2 || ks[0] != w->d[2] || ks[1] != w->d[3]))
    return fail(I, "kernel_shape does not match the weight's shape");
  if (w->d[2] < 1 || w->d[3] < 1 || w->d[2] > 65536 || w->d[3] > 65536)
    return fail(I, "the weight's kernel %lldx%lld is out of range", (long long)w->d[2], (long long)w->d[3]);
  a.kernel[0] = (int)w->d[2], a.kernel[1] = (int)w->d[3];
  if (window_attrs(I, &a, 0, x)) return -1;
  a.groups = (int)attr_i(I, "group", 1);
  a.out = w->d[0];
  a.has_bias = nin_given(I) >= 3;
  Value *in[3] = {x, in_val(I, 1, PK_WEIGHT), a.has_bias ? in_val(I, 2, PK_BIAS) : NULL};
  return set_out(I, mk(I, OP_CONV2D, in, a.has_bias ? 3 : 2, &a));
}

/* Gemm: Y = alpha * A' B' + beta * C.  transB=1 with a constant B is torch's
 * nn.Linear: linear with weight B [out, in]; otherwise matmul (+ add). */
static Value *scaled(Imp *I, Value *x, double f) {
  if (!x || f == 1.0) return x;
  Attrs c;
  ir_attrs_init(&c);
  c.fval = f;
  Value *in[2] = {x, ir_node(I->g, OP_CONST, NULL, 0, &c, NULL, NULL, I->loc)};
  return mk(I, OP_MUL, in, 2, NULL);
}

static int op_gemm(Imp *I) {
  double alpha = attr_f(I, "alpha", 1.0), beta = attr_f(I, "beta", 1.0);
  int ta = (int)attr_i(I, "transA", 0);
  int tb = (int)attr_i(I, "transB", 0);
  Ent *eb = in_ent(I, 1);
  if (!eb) return -1;
  int bias = nin_given(I) >= 3;
  if (!ta && alpha == 1.0 && beta == 1.0 && tb && eb->c && eb->c->rank == 2) {
    Ent *ec = bias ? in_ent(I, 2) : NULL;
    if (bias && !ec) return -1;
    if (bias && !(ec->c && ec->c->n == eb->c->d[0] && (ec->c->rank == 1 || (ec->c->rank == 2 && ec->c->d[0] == 1))))
      bias = -1;   /* not a per-feature bias: added apart below */
    Attrs a;
    ir_attrs_init(&a);
    a.out = eb->c->d[0];
    a.has_bias = bias == 1;
    if (bias == 1 && ec->c->rank == 2 && !ec->v) ec->c->rank = 1, ec->c->d[0] = ec->c->d[1];
    Value *in[3] = {in_val(I, 0, PK_NONE), value_of(I, eb, PK_WEIGHT), bias == 1 ? value_of(I, ec, PK_BIAS) : NULL};
    Value *y = mk(I, OP_LINEAR, in, bias == 1 ? 3 : 2, &a);
    if (bias == -1 && y) {
      Value *ab[2] = {y, in_val(I, 2, PK_NONE)};
      y = mk(I, OP_ADD, ab, 2, NULL);
    }
    return set_out(I, y);
  }
  /* the general form: matmul of the (transposed) operands, scaled, plus beta C */
  Value *a = in_val(I, 0, PK_NONE), *b = value_of(I, eb, PK_NONE);
  if (!a || !b) return -1;
  if (a->shape.rank != 2 || b->shape.rank != 2) return fail(I, "only 2-D operands are supported");
  Attrs t;
  ir_attrs_init(&t);
  t.nlist = 2, t.list[0] = 1, t.list[1] = 0;
  if (ta) a = mk(I, OP_TRANSPOSE, &a, 1, &t);
  if (tb) b = mk(I, OP_TRANSPOSE, &b, 1, &t);
  Value *ab[2] = {a, b};
  Value *y = scaled(I, mk(I, OP_MATMUL, ab, 2, NULL), alpha);
  if (bias && y && beta != 0.0) {
    Value *yc[2] = {y, scaled(I, in_val(I, 2, PK_NONE), beta)};
    y = mk(I, OP_ADD, yc, 2, NULL);
  }
  return set_out(I, y);
}

static int op_matmul(Imp *I) {
  Value *ab[2] = {in_val(I, 0, PK_NONE), in_val(I, 1, PK_NONE)};
  return set_out(I, mk(I, OP_MATMUL, ab, 2, NULL));
}

static int op_batchnorm(Imp *I) {
  if (attr_i(I, "training_mode", 0)) return fail(I, "training_mode=1 is not supported (export in eval mode)");
  for (size_t k = 1; k < I->node->n_output; k++)
    if (*I->node->output[k]) return fail(I, "the running statistics outputs (training mode) are not supported");
  Attrs a;
  ir_attrs_init(&a);
  a.eps = attr_f(I, "epsilon", 1e-5);
  a.momentum = f32_decimal(1.0 - attr_f(I, "momentum", 0.9));   /* ONNX: running = running*m + batch*(1-m); torch the other way */
  static const int kinds[5] = {PK_NONE, PK_WEIGHT, PK_BIAS, PK_RUNNING_MEAN, PK_RUNNING_VAR};
  Value *in[5];
  for (int k = 0; k < 5; k++) {
    if (k > 0 && !in_const(I, k, "a batch normalization parameter")) return -1;
    in[k] = in_val(I, k, kinds[k]);
    if (!in[k]) return -1;
  }
  return set_out(I, mk(I, OP_BATCHNORM2D, in, 5, &a));
}

static int op_pool(Imp *I, OpKind op) {
  Attrs a;
  ir_attrs_init(&a);
  Value *x = in_val(I, 0, PK_NONE);
  if (!x) return -1;
  if (window_attrs(I, &a, 1, x)) return -1;
  if (attr_i(I, "ceil_mode", 0) && x->shape.rank == 4) {
    /* ceil mode rounds the output size up; taken where that is floor mode's */
    for (int k = 0; k < 2; k++) {
      int64_t span = x->shape.d[2 + k] + 2 * a.pad[k] - (int64_t)(a.kernel[k] - 1) * a.dilation[k] - 1;
      if (span >= 0 && span % a.stride[k])
        return fail(I, "ceil_mode=1 where it rounds the output %s up (floor mode gives %lld) is not supported "
                    "(ncc pools in floor mode)", k ? "width" : "height", (long long)(span / a.stride[k] + 1));
    }
  } else if (attr_i(I, "ceil_mode", 0)) {
    return fail(I, "ceil_mode=1 is not supported with a %d-D input", x->shape.rank);
  }
  if (op == OP_MAXPOOL2D && I->node->n_output > 1 && *I->node->output[1])
    return fail(I, "the indices output is not supported");
  if (op == OP_AVGPOOL2D && (a.pad[0] || a.pad[1]) && !attr_i(I, "count_include_pad", 0))
    return fail(I, "count_include_pad=0 with padding is not supported (ncc divides by the kernel size, "
                "torch's default count_include_pad=True)");
  if (op == OP_AVGPOOL2D && (a.dilation[0] != 1 || a.dilation[1] != 1)) return fail(I, "dilations are not supported");
  if (attr_i(I, "storage_order", 0)) return fail(I, "storage_order=1 is not supported");
  for (int k = 0; k < 2; k++)
    if (2 * a.pad[k] > a.kernel[k])
      return fail(I, "pads of %d with a kernel of %d are not supported (ncc pools as PyTorch does: a pad at most half "
                  "the kernel)", a.pad[k], a.kernel[k]);
  return set_out(I, mk(I, op, &x, 1, &a));
}

static int op_flatten(Imp *I) {
  Value *x = in_val(I, 0, PK_NONE);
  if (!x) return -1;
  int r = x->shape.rank;
  int ax = (int)attr_i(I, "axis", 1);
  if (ax < 0) ax += r;
  if (ax < 0 || ax > r) return fail(I, "axis %d is out of range for rank %d", ax, r);
  if (ax == 1 && r >= 2) return set_out(I, mk(I, OP_FLATTEN, &x, 1, NULL));
  int64_t d[2] = {1, 1};
  for (int k = 0; k < r; k++) d[k >= ax] *= x->shape.d[k];
  return set_out(I, mk_reshape(I, x, d, 2));
}

static int op_reshape(Imp *I) {
  Ent *e = in_ent(I, 0);
  Tens *s = in_const(I, 1, "the target shape");
  if (!e || !s) return -1;
  if (s->type != T_I64 || s->rank != 1 || s->n > NCC_MAX_RANK) return fail(I, "the target shape must be 1-D int64 of at most %d values", NCC_MAX_RANK);
  if (attr_i(I, "allowzero", 0)) return fail(I, "allowzero=1 is not supported");
  int rank = e->v ? e->v->shape.rank : e->c->rank;
  const int64_t *src = e->v ? e->v->shape.d : e->c->d;
  int64_t d[NCC_MAX_RANK];
  for (int k = 0; k < s->n; k++) {
    d[k] = s->i[k];
    if (d[k] == 0) {   /* ONNX: 0 copies the input's dimension */
      if (k >= rank) return fail(I, "target dimension %d is 0 but the input has rank %d", k, rank);
      d[k] = src[k];
    }
  }
  if (!e->v) {   /* a constant: reshape on the host */
    Tens *c = ARENA_NEW(I->ar, Tens);
    *c = *e->c;
    int64_t known = 1;
    int hole = -1;
    for (int k = 0; k < s->n; k++) {
      if (d[k] < -1 || (d[k] == -1 && hole >= 0))
        return fail(I, "bad target shape: dimension %d is %lld", k, (long long)d[k]);
      if (d[k] == -1) hole = k;
      else if (__builtin_mul_overflow(known, d[k], &known) || known > c->n)
        return fail(I, "the target shape has more elements than the input's %lld", (long long)c->n);
    }
    if (hole >= 0 && known) d[hole] = c->n / known;
    if ((hole >= 0 ? known * d[hole] : known) != c->n)
      return fail(I, "cannot reshape %lld elements to the target shape", (long long)c->n);
    c->rank = (int)s->n;
    memcpy(c->d, d, sizeof(int64_t) * (size_t)s->n);
    return set_out_const(I, c);
  }
  return set_out(I, mk_reshape(I, e->v, d, (int)s->n));
}

static int op_transpose(Imp *I) {
  Value *x = in_val(I, 0, PK_NONE);
  if (!x) return -1;
  Attrs a;
  ir_attrs_init(&a);
  int n = attr_ints(I, "perm", a.list, NCC_MAX_RANK);
  if (n == -2) return -1;
  if (n < 0) {   /* default: reverse the axes */
    n = x->shape.rank;
    for (int k = 0; k < n; k++) a.list[k] = n - 1 - k;
  }
  a.nlist = n;
  return set_out(I, mk(I, OP_TRANSPOSE, &x, 1, &a));
}

static int op_concat(Imp *I) {
  int n = nin_given(I);
  if (n < 1 || n > 64) return fail(I, "concat of %d inputs is not supported (1 to 64)", n);
  int64_t ax = attr_i(I, "axis", 0);
  Ent *es[64];
  int allc = 1;
  for (int k = 0; k < n; k++) {
    if (!(es[k] = in_ent(I, k))) return -1;
    allc &= es[k]->c && es[k]->c->type == T_I64 && es[k]->c->rank <= 1;
  }
  if (allc) {   /* shape arithmetic: fold */
    Tens *r = ARENA_NEW(I->ar, Tens);
    r->type = T_I64, r->rank = 1;
    for (int k = 0; k < n; k++) r->n += es[k]->c->n;
    r->d[0] = r->n;
    r->i = ARENA_ARRAY(I->ar, int64_t, r->n ? r->n : 1);
    int64_t p = 0;
    for (int k = 0; k < n; k++)
      for (int64_t j = 0; j < es[k]->c->n; j++) r->i[p++] = es[k]->c->i[j];
    return set_out_const(I, r);
  }
  Value *in[64];
  for (int k = 0; k < n; k++)
    if (!(in[k] = value_of(I, es[k], PK_NONE))) return -1;
  int rank = in[0]->shape.rank;
  if (ax < 0) ax += rank;
  if (ax < 0 || ax >= rank) return fail(I, "axis %lld is out of range for rank %d", (long long)attr_i(I, "axis", 0), rank);
  Attrs a;
  ir_attrs_init(&a);
  a.axis = (int)ax;
  return set_out(I, mk(I, OP_CONCAT, in, n, &a));
}

static int op_softmax(Imp *I, OpKind op) {
  Value *x = in_val(I, 0, PK_NONE);
  if (!x) return -1;
  int r = x->shape.rank;
  int64_t ax = attr_i(I, "axis", I->opset >= 13 ? -1 : 1);
  if (ax < 0) ax += r;
  if (ax < 0 || ax >= r) return fail(I, "axis out of range for rank %d", r);
  /* before opset 13 the softmax is over the axes from `axis` on, flattened:
   * the same as ncc's one-axis softmax only for the last axis */
  if (I->opset < 13 && ax != r - 1) return fail(I, "softmax over the axes from %lld on (opset < 13) is not supported", (long long)ax);
  Attrs a;
  ir_attrs_init(&a);
  a.axis = (int)ax;
  return set_out(I, mk(I, op, &x, 1, &a));
}

/* ---- shape computations: constants folded on the host ---- */

static Tens *new_i64(Imp *I, int64_t n) {
  Tens *c = ARENA_NEW(I->ar, Tens);
  c->type = T_I64, c->rank = 1, c->d[0] = n, c->n = n;
  c->i = ARENA_ARRAY(I->ar, int64_t, n ? n : 1);
  return c;
}

static int op_shape(Imp *I) {
  Ent *e = in_ent(I, 0);
  if (!e) return -1;
  int r = e->v ? e->v->shape.rank : e->c->rank;
  const int64_t *d = e->v ? e->v->shape.d : e->c->d;
  int64_t st = attr_i(I, "start", 0), en = attr_i(I, "end", r);
  if (st < 0) st += r;
  if (en < 0) en += r;
  if (st < 0) st = 0;
  if (en > r) en = r;
  if (en < st) en = st;
  Tens *c = new_i64(I, en - st);
  for (int64_t k = st; k < en; k++) c->i[k - st] = d[k];
  return set_out_const(I, c);
}

static int op_gather(Imp *I) {
  Tens *d = in_const(I, 0, "the data"), *ix = in_const(I, 1, "the indices");
  if (!d || !ix) return -1;
  if (d->rank != 1 || ix->type != T_I64 || ix->rank > 1 || attr_i(I, "axis", 0) != 0)
    return fail(I, "only gathers from a 1-D constant along axis 0 (shape computations) are supported");
  Tens *c = ARENA_NEW(I->ar, Tens);
  *c = *d;
  c->rank = ix->rank, c->d[0] = ix->n, c->n = ix->n;
  if (d->type == T_I64) c->i = ARENA_ARRAY(I->ar, int64_t, ix->n ? ix->n : 1);
  else c->f = ARENA_ARRAY(I->ar, float, ix->n ? ix->n : 1);
  for (int64_t k = 0; k < ix->n; k++) {
    int64_t j = ix->i[k] < 0 ? ix->i[k] + d->n : ix->i[k];
    if (j < 0 || j >= d->n) return fail(I, "index %lld is out of range", (long long)ix->i[k]);
    if (d->type == T_I64) c->i[k] = d->i[j];
    else c->f[k] = d->f[j];
  }
  return set_out_const(I, c);
}

/* Unsqueeze / Squeeze: axes from the attribute (opset < 13) or input 1 */
static int op_squeeze(Imp *I, int unsq) {
  Ent *e = in_ent(I, 0);
  if (!e) return -1;
  int64_t axes[NCC_MAX_RANK];
  int na;
  if (I->opset < 13) {
    na = attr_ints(I, "axes", axes, NCC_MAX_RANK);
    if (na == -2) return -1;
  } else if (nin_given(I) >= 2) {
    Tens *t = in_const(I, 1, "axes");
    if (!t) return -1;
    if (t->type != T_I64 || t->n > NCC_MAX_RANK) return fail(I, "axes must be int64");
    na = (int)t->n;
    memcpy(axes, t->i, sizeof(int64_t) * (size_t)na);
  } else {
    na = -1;
  }
  int r = e->v ? e->v->shape.rank : e->c->rank;
  const int64_t *src = e->v ? e->v->shape.d : e->c->d;
  int64_t d[NCC_MAX_RANK];
  int nr = 0;
  if (unsq) {
    if (na < 1) return fail(I, "axes are required");
    nr = r + na;
    if (nr > NCC_MAX_RANK) return fail(I, "the result would have rank %d; ncc supports %d", nr, NCC_MAX_RANK);
    int mark[NCC_MAX_RANK] = {0};
    for (int k = 0; k < na; k++) {
      int64_t a = axes[k] < 0 ? axes[k] + nr : axes[k];
      if (a < 0 || a >= nr || mark[a]) return fail(I, "bad axis %lld", (long long)axes[k]);
      mark[a] = 1;
    }
    for (int k = 0, j = 0; k < nr; k++) d[k] = mark[k] ? 1 : src[j++];
  } else {
    int mark[NCC_MAX_RANK] = {0};
    for (int k = 0; k < na; k++) {
      int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
      if (a < 0 || a >= r || src[a] != 1) return fail(I, "axis %lld cannot be squeezed", (long long)axes[k]);
      mark[a] = 1;
    }
    for (int k = 0; k < r; k++)
      if (!(na < 0 ? src[k] == 1 : mark[k])) d[nr++] = src[k];
  }
  if (!e->v) {
    Tens *c = ARENA_NEW(I->ar, Tens);
    *c = *e->c;
    c->rank = nr;
    memcpy(c->d, d, sizeof(int64_t) * (size_t)nr);
    return set_out_const(I, c);
  }
  return set_out(I, mk_reshape(I, e->v, d, nr));
}

static int op_constant(Imp *I) {
  const Onnx__AttributeProto *a = attr(I, "value");
  if (a && a->t) {
    Tens *c = tensor_of(I, a->t);
    return c ? set_out_const(I, c) : -1;
  }
  if ((a = attr(I, "value_float")) && a->has_f) {
    Tens *c = ARENA_NEW(I->ar, Tens);
    c->type = T_F32, c->n = 1, c->f = ARENA_NEW(I->ar, float);
    c->f[0] = a->f;
    return set_out_const(I, c);
  }
  if ((a = attr(I, "value_int")) && a->has_i) {
    Tens *c = new_i64(I, 1);
    c->rank = 0, c->i[0] = a->i;
    return set_out_const(I, c);
  }
  if ((a = attr(I, "value_ints"))) {
    Tens *c = new_i64(I, (int64_t)a->n_ints);
    for (size_t k = 0; k < a->n_ints; k++) c->i[k] = a->ints[k];
    return set_out_const(I, c);
  }
  return fail(I, "only value, value_float, value_int and value_ints constants are supported");
}

/* Dropout in inference: the input itself.  Training mode (input 2, or
 * opset < 12's is_test=0) with a ratio above 0 drops at random, and the mask
 * output has no IR op: both refused. */
static int op_dropout(Imp *I) {
  if (I->node->n_output > 1 && *I->node->output[1]) return fail(I, "the mask output is not supported");
  int training = 0;
  if (nin_given(I) >= 3) {
    Tens *t = in_const(I, 2, "training_mode");
    if (!t) return -1;
    if (t->n != 1) return fail(I, "training_mode must be one value");
    training = t->type == T_I64 ? t->i[0] != 0 : t->f[0] != 0;
  }
  if (training) {
    float ratio = 0.5f;
    if (nin_given(I) >= 2) {
      Tens *r = in_const(I, 1, "ratio");
      if (!r) return -1;
      if (r->n != 1 || r->type != T_F32) return fail(I, "ratio must be one float");
      ratio = r->f[0];
    }
    if (ratio != 0) return fail(I, "training_mode=1 (random dropping) is not supported");
  }
  return op_identity(I);
}

static int op_cast(Imp *I) {
  Ent *e = in_ent(I, 0);
  if (!e) return -1;
  int64_t to = attr_i(I, "to", 0);
  if (e->c) {   /* between the two constant kinds, on the host */
    Tens *c = ARENA_NEW(I->ar, Tens);
    *c = *e->c;
    if (to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && c->type == T_I64) {
      c->type = T_F32, c->f = ARENA_ARRAY(I->ar, float, c->n ? c->n : 1);
      for (int64_t k = 0; k < c->n; k++) c->f[k] = (float)e->c->i[k];
    } else if (to == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && c->type == T_F32) {
      c->type = T_I64, c->i = ARENA_ARRAY(I->ar, int64_t, c->n ? c->n : 1);
      for (int64_t k = 0; k < c->n; k++) {
        float f = e->c->f[k];
        if (!(f > -9.2e18f && f < 9.2e18f)) return fail(I, "a cast of %g to int64 is out of range", f);
        c->i[k] = (int64_t)f;
      }
    } else if (!((to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && c->type == T_F32) ||
                 (to == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && c->type == T_I64))) {
      return fail(I, "a cast to %s is not supported", dtype_str((int)to));
    }
    return set_out_const(I, c);
  }
  if (to != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) return fail(I, "a cast of a tensor to %s is not supported", dtype_str((int)to));
  return op_identity(I);
}

/* ---- the op table --------------------------------------------------------- */

/* since: the oldest opset whose form of the operator ncc's mapping is right
 * for (its attributes and semantics unchanged from then to opset 17, but for
 * what the mapping reads by opset: Clip's bounds, Softmax's axis, Squeeze's
 * axes).  Checked against ONNX's operator changelog, e.g. Add before 7 took
 * a `broadcast` attribute, Dropout before 7 an is_test flag defaulting to
 * training, Concat before 4 a default axis of 1, Pad before 11 its pads as an
 * attribute.  A model below opset 11 imports when every node's operator has
 * had its form since that opset; opsets 11 to 17 take the whole table. */
typedef struct OpRow { const char *onnx; int (*fn)(Imp *, OpKind); OpKind op; int since; } OpRow;
static int w_unary(Imp *I, OpKind op) { return op_unary(I, op); }
static int w_identity(Imp *I, OpKind op) { (void)op; return op_identity(I); }
static int w_leaky(Imp *I, OpKind op) { (void)op; return op_leaky(I); }
static int w_clip(Imp *I, OpKind op) { (void)op; return op_clip(I); }
static int w_pad(Imp *I, OpKind op) { (void)op; return op_pad(I); }
static int w_hsig(Imp *I, OpKind op) { (void)op; return op_hardsigmoid(I); }
static int w_conv(Imp *I, OpKind op) { (void)op; return op_conv(I); }
static int w_gemm(Imp *I, OpKind op) { (void)op; return op_gemm(I); }
static int w_matmul(Imp *I, OpKind op) { (void)op; return op_matmul(I); }
static int w_bn(Imp *I, OpKind op) { (void)op; return op_batchnorm(I); }
static int w_flatten(Imp *I, OpKind op) { (void)op; return op_flatten(I); }
static int w_reshape(Imp *I, OpKind op) { (void)op; return op_reshape(I); }
static int w_transpose(Imp *I, OpKind op) { (void)op; return op_transpose(I); }
static int w_concat(Imp *I, OpKind op) { (void)op; return op_concat(I); }
static int w_shape(Imp *I, OpKind op) { (void)op; return op_shape(I); }
static int w_gather(Imp *I, OpKind op) { (void)op; return op_gather(I); }
static int w_unsq(Imp *I, OpKind op) { (void)op; return op_squeeze(I, 1); }
static int w_sq(Imp *I, OpKind op) { (void)op; return op_squeeze(I, 0); }
static int w_const(Imp *I, OpKind op) { (void)op; return op_constant(I); }
static int w_cast(Imp *I, OpKind op) { (void)op; return op_cast(I); }
static int w_dropout(Imp *I, OpKind op) { (void)op; return op_dropout(I); }

static int op_layernorm(Imp *I) {
  Ent *ex = in_ent(I, 0);
  if (!ex) return -1;
  Value *x = value_of(I, ex, PK_NONE);
  if (!x) return -1;
  int64_t axis = attr_i(I, "axis", -1);
  if (axis != -1 && axis != x->shape.rank - 1)
    return fail(I, "axis=%lld is not supported: ncc normalises over the last axis only (axis=-1)", (long long)axis);
  if (attr_i(I, "stash_type", 1) != 1) return fail(I, "stash_type other than float is not supported");
  for (size_t k = 1; k < I->node->n_output; k++)
    if (*I->node->output[k]) return fail(I, "the Mean and InvStdDev outputs are not supported");
  if (nin_given(I) < 3) return fail(I, "a LayerNormalization without a bias input (B) is not supported");
  if (!in_const(I, 1, "the scale") || !in_const(I, 2, "the bias")) return -1;
  Attrs a;
  ir_attrs_init(&a);
  a.eps = attr_f(I, "epsilon", 1e-5);
  Value *in[3] = {x, in_val(I, 1, PK_WEIGHT), in_val(I, 2, PK_BIAS)};
  return set_out(I, mk(I, OP_LAYERNORM, in, 3, &a));
}
static int w_layernorm(Imp *I, OpKind op) { (void)op; return op_layernorm(I); }

/* ---- patterns: one IR op that torch.onnx writes as several nodes -----------
 * Matched at their first node by looking ahead in the graph: every value
 * inside the pattern read by the next node of the pattern alone, the
 * constants the right numbers.  The nodes a match covers are skipped
 * (Imp.skip) and the last one's output is the IR op's value.  Any other form
 * imports node by node (and an operator ncc lacks, Erf or ReduceMean, is then
 * the usual error). */

/* The nodes reading tensor `name` (a node reading it twice counts twice), up
 * to 2 of them in r[]; a graph output reading it makes the count 3 (no match). */
static int readers(Imp *I, const char *name, const Onnx__NodeProto **r, size_t *at) {
  int n = 0;
  for (size_t k = 0; k < I->G->n_output; k++)
    if (I->G->output[k]->name && !strcmp(I->G->output[k]->name, name)) return 3;
  for (size_t k = 0; k < I->G->n_node && n < 3; k++)
    for (size_t j = 0; j < I->G->node[k]->n_input; j++)
      if (!strcmp(I->G->node[k]->input[j], name) && n++ < 2) r[n - 1] = I->G->node[k], at[n - 1] = k;
  return n;
}
static int is_op(const Onnx__NodeProto *n, const char *op, size_t nin) {
  return n && n->op_type && !strcmp(n->op_type, op) && (!n->domain || !*n->domain) && n->n_input == nin &&
         n->n_output >= 1;
}
/* The one node reading `name`, if it is an `op` with nin inputs. */
static const Onnx__NodeProto *sole_reader(Imp *I, const char *name, const char *op, size_t nin, size_t *at) {
  const Onnx__NodeProto *r[2];
  size_t k[2];
  if (readers(I, name, r, k) != 1 || !is_op(r[0], op, nin)) return NULL;
  *at = k[0];
  return r[0];
}
/* Input j of n other than `name` (n has two inputs, one of them `name`). */
static const char *other_input(const Onnx__NodeProto *n, const char *name) {
  return !strcmp(n->input[0], name) ? n->input[1] : !strcmp(n->input[1], name) ? n->input[0] : NULL;
}
/* A constant tensor by name: known already, or made by a Constant node the
 * import has not reached yet; NULL when it is not a float or int64 constant. */
static Tens *const_ahead(Imp *I, const char *name) {
  if (!name) return NULL;
  Ent *e = find(I, name);
  if (e) return e->c;
  for (size_t k = 0; k < I->G->n_node; k++) {
    const Onnx__NodeProto *n = I->G->node[k];
    if (!is_op(n, "Constant", 0) || strcmp(n->output[0], name)) continue;
    for (size_t j = 0; j < n->n_attribute; j++) {
      const Onnx__AttributeProto *a = n->attribute[j];
      if (a->name && !strcmp(a->name, "value") && a->t &&
          (a->t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || a->t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64))
        return tensor_of(I, a->t);
    }
  }
  return NULL;
}
static int scalar_ahead(Imp *I, const char *name, double *v) {
  Tens *c = const_ahead(I, name);
  if (!c || c->n != 1) return 0;
  *v = c->type == T_F32 ? (double)c->f[0] : (double)c->i[0];
  return 1;
}

/* gelu: Div(x, sqrt(2)) -> Erf -> Add(., 1) -> Mul(x, .) -> Mul(., 0.5), torch's
 * export of F.gelu (the exact form). */
static int try_gelu(Imp *I, size_t k) {
  const Onnx__NodeProto *d = I->G->node[k], *e, *a, *m1, *m2;
  size_t ke, ka, k1, k2;
  double c;
  Ent *x = is_op(d, "Div", 2) ? find(I, d->input[0]) : NULL;
  if (!x || !x->v || !scalar_ahead(I, d->input[1], &c) || fabs(c - 1.4142135623730951) > 1e-6) return 0;
  if (!(e = sole_reader(I, d->output[0], "Erf", 1, &ke)) || !(a = sole_reader(I, e->output[0], "Add", 2, &ka)) ||
      !scalar_ahead(I, other_input(a, e->output[0]), &c) || c != 1.0 ||
      !(m1 = sole_reader(I, a->output[0], "Mul", 2, &k1)) || !other_input(m1, a->output[0]) ||
      strcmp(other_input(m1, a->output[0]), d->input[0]) ||
      !(m2 = sole_reader(I, m1->output[0], "Mul", 2, &k2)) || !scalar_ahead(I, other_input(m2, m1->output[0]), &c) ||
      c != 0.5)
    return 0;
  I->node = m2;
  Value *v = mk(I, OP_GELU, &x->v, 1, NULL);
  if (!v) return -1;
  put(I, m2->output[0])->v = v;
  I->skip[ke] = I->skip[ka] = I->skip[k1] = I->skip[k2] = 1;
  return 1;
}

/* The ReduceMean over the last axis (keepdims) of a rank-r tensor? */
static int mean_last(const Onnx__NodeProto *n, int rank) {
  int axes = 0, ok = 1;
  for (size_t j = 0; j < n->n_attribute; j++) {
    const Onnx__AttributeProto *a = n->attribute[j];
    if (!a->name) continue;
    if (!strcmp(a->name, "keepdims") && a->has_i && a->i != 1) ok = 0;
    if (!strcmp(a->name, "axes")) axes = a->n_ints == 1 && (a->ints[0] == -1 || a->ints[0] == rank - 1);
  }
  return ok && axes;
}

/* layernorm, as torch exports nn.LayerNorm below opset 17:
 * m = ReduceMean(x), s = Sub(x, m), v = ReduceMean(Pow(s, 2)),
 * Div(s, Sqrt(Add(v, eps))), Mul by the weight, Add the bias. */
static int try_layernorm(Imp *I, size_t k) {
  const Onnx__NodeProto *r1 = I->G->node[k], *sub, *pw, *r2, *ad, *sq, *dv, *mu, *bi, *rd[2];
  size_t ks, kp, kr, ka, kq, kd, km, kb, at[2];
  double c;
  Ent *x = is_op(r1, "ReduceMean", 1) ? find(I, r1->input[0]) : NULL;
  if (!x || !x->v || !mean_last(r1, x->v->shape.rank) || !(sub = sole_reader(I, r1->output[0], "Sub", 2, &ks)) ||
      strcmp(sub->input[0], r1->input[0]) || strcmp(sub->input[1], r1->output[0]))
    return 0;
  if (readers(I, sub->output[0], rd, at) != 2) return 0;
  int p = is_op(rd[0], "Pow", 2) ? 0 : 1;
  pw = rd[p], kp = at[p], dv = rd[1 - p], kd = at[1 - p];
  if (!is_op(pw, "Pow", 2) || strcmp(pw->input[0], sub->output[0]) || !scalar_ahead(I, pw->input[1], &c) || c != 2 ||
      !is_op(dv, "Div", 2) || strcmp(dv->input[0], sub->output[0]) ||
      !(r2 = sole_reader(I, pw->output[0], "ReduceMean", 1, &kr)) || !mean_last(r2, x->v->shape.rank) ||
      !(ad = sole_reader(I, r2->output[0], "Add", 2, &ka)) || !scalar_ahead(I, other_input(ad, r2->output[0]), &c) ||
      !(sq = sole_reader(I, ad->output[0], "Sqrt", 1, &kq)) || sole_reader(I, sq->output[0], "Div", 2, &kd) != dv ||
      strcmp(dv->input[1], sq->output[0]) || !(mu = sole_reader(I, dv->output[0], "Mul", 2, &km)) ||
      !(bi = sole_reader(I, mu->output[0], "Add", 2, &kb)))
    return 0;
  Ent *w = find(I, other_input(mu, dv->output[0])), *b = find(I, other_input(bi, mu->output[0]));
  int64_t D = x->v->shape.d[x->v->shape.rank - 1];
  if (!w || !b || !w->c || !b->c || w->c->type != T_F32 || b->c->type != T_F32 || w->c->rank != 1 || b->c->rank != 1 ||
      w->c->d[0] != D || b->c->d[0] != D)
    return 0;
  Attrs a;
  ir_attrs_init(&a);
  a.eps = f32_decimal(c);
  I->node = bi;
  Value *in[3] = {x->v, value_of(I, w, PK_WEIGHT), value_of(I, b, PK_BIAS)};
  Value *v = mk(I, OP_LAYERNORM, in, 3, &a);
  if (!v) return -1;
  put(I, bi->output[0])->v = v;
  I->skip[ks] = I->skip[kp] = I->skip[kr] = I->skip[ka] = I->skip[kq] = I->skip[kd] = I->skip[km] = I->skip[kb] = 1;
  return 1;
}

/* docs/onnx.md lists these; keep the two in step */
static const OpRow op_table[] = {
  {"Conv", w_conv, 0, 1}, {"Gemm", w_gemm, 0, 7}, {"MatMul", w_matmul, 0, 1},
  {"BatchNormalization", w_bn, 0, 9},
  {"Relu", w_unary, OP_RELU, 6}, {"Sigmoid", w_unary, OP_SIGMOID, 6}, {"Tanh", w_unary, OP_TANH, 6},
  {"HardSwish", w_unary, OP_HARDSWISH, 14}, {"Sqrt", w_unary, OP_SQRT, 6}, {"LeakyRelu", w_leaky, 0, 6},
  {"Clip", w_clip, 0, 6}, {"HardSigmoid", w_hsig, 0, 6},
  {"Add", op_binary, OP_ADD, 7}, {"Sub", op_binary, OP_SUB, 7}, {"Mul", op_binary, OP_MUL, 7}, {"Div", op_binary, OP_DIV, 7},
  {"MaxPool", op_pool, OP_MAXPOOL2D, 1}, {"AveragePool", op_pool, OP_AVGPOOL2D, 7},
  {"GlobalAveragePool", w_unary, OP_GAVGPOOL2D, 1},
  {"Softmax", op_softmax, OP_SOFTMAX, 1}, {"LogSoftmax", op_softmax, OP_LOG_SOFTMAX, 1},
  {"Flatten", w_flatten, 0, 1}, {"Reshape", w_reshape, 0, 5}, {"Transpose", w_transpose, 0, 1}, {"Concat", w_concat, 0, 4},
  {"Identity", w_identity, 0, 1}, {"Pad", w_pad, 0, 11}, {"Dropout", w_dropout, 0, 7},
  {"Constant", w_const, 0, 1}, {"Shape", w_shape, 0, 1}, {"Gather", w_gather, 0, 1},
  {"Unsqueeze", w_unsq, 0, 1}, {"Squeeze", w_sq, 0, 1}, {"Cast", w_cast, 0, 6},
  {"LayerNormalization", w_layernorm, 0, 17},
};

/* ---- the graph ------------------------------------------------------------- */

static const char *ident(Imp *I, const char *s) {
  char *r = arena_strdup(I->ar, *s ? s : "x");
  for (char *p = r; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_')) *p = '_';
  if ((*r >= '0' && *r <= '9') || frontend_c_keyword(r)) r = arena_printf(I->ar, "t_%s", r);
  return r;
}

static int graph_input(Imp *I, const Onnx__ValueInfoProto *vi, const SetOpt *sets, int nsets, int *used) {
  const char *nm = vi->name ? vi->name : "";
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
    return fail(I, "graph input '%s' is not a tensor", nm);
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  if (tt->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
    return fail(I, "graph input '%s' has dtype %s; ncc imports float inputs", nm, dtype_str(tt->elem_type));
  if (!tt->shape) return fail(I, "graph input '%s' has no shape", nm);
  if (tt->shape->n_dim > NCC_MAX_RANK) return fail(I, "graph input '%s' has rank %zu; ncc supports %d", nm, tt->shape->n_dim, NCC_MAX_RANK);
  Shape s = {(int)tt->shape->n_dim, {0}};
  for (int k = 0; k < s.rank; k++) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value > 0) {
      s.d[k] = d->dim_value;
      continue;
    }
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value == 0)
      return fail(I, "graph input '%s': dimension %d is 0; empty tensors are not supported", nm, k);
    const char *sym = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? d->dim_param : NULL;
    int found = 0;
    for (int j = 0; sym && j < nsets; j++)
      if (sets[j].name && !strcmp(sets[j].name, sym)) {
        char *end;
        long long v = strtoll(sets[j].value ? sets[j].value : "", &end, 10);
        if (!sets[j].value || !*sets[j].value || *end || v < 1 || v > (1 << 30))
          return fail(I, "--set %s=%s: a dimension must be a positive integer", sym, sets[j].value ? sets[j].value : "");
        s.d[k] = v, used[j] = 1, found = 1;
      }
    /* every input's first dimension the same symbol given by --set: the
     * batch const (Graph.batch_const; --max-memory, --emit=net) */
    if (k == 0 && found && !I->ninputs) I->batch_sym = sym;
    else if (k == 0 && (!found || !I->batch_sym || strcmp(I->batch_sym, sym))) I->batch_sym = NULL;
    if (!found)
      return sym ? fail(I, "graph input '%s': dimension %d is '%s'; give it with --set %s=N", nm, k, sym, sym)
                 : fail(I, "graph input '%s': dimension %d has no size", nm, k);
  }
  if (s.rank == 0 || !(tt->shape->dim[0]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM))
    I->batch_sym = NULL;
  I->ninputs++;
  Value *v = ir_input(I->g, ident(I, nm), DT_F32, &s, I->loc);
  if (!v) return -1;
  put(I, nm)->v = v;
  return 0;
}

static int import_graph(Imp *I, const Onnx__GraphProto *G, const SetOpt *sets, int nsets) {
  I->G = G;
  I->skip = ARENA_ARRAY(I->ar, unsigned char, G->n_node + 1);
  memset(I->skip, 0, G->n_node + 1);
  int *used = xmalloc(sizeof(int) * (size_t)(nsets + 1));
  memset(used, 0, sizeof(int) * (size_t)(nsets + 1));
  int rc = 0;
  for (size_t k = 0; k < G->n_initializer && !rc; k++) {
    Tens *c = tensor_of(I, G->initializer[k]);
    if (!c) rc = -1;
    else {
      Ent *e = put(I, G->initializer[k]->name ? G->initializer[k]->name : "");
      e->c = c, e->init = 1;
    }
  }
  if (G->n_sparse_initializer && !rc) rc = fail(I, "sparse initializers are not supported");
  /* inputs that are not initializers (older exporters list both) */
  for (size_t k = 0; k < G->n_input && !rc; k++) {
    Ent *e = find(I, G->input[k]->name ? G->input[k]->name : "");
    if (!e) rc = graph_input(I, G->input[k], sets, nsets, used);
  }
  for (int j = 0; j < nsets && !rc; j++)
    if (!used[j])
      rc = fail(I, "--set %s=%s: no graph input has a dimension named '%s'", sets[j].name ? sets[j].name : "",
                sets[j].value ? sets[j].value : "", sets[j].name ? sets[j].name : "");
  free(used);
  if (I->batch_sym && !strcmp(ident(I, I->batch_sym), I->batch_sym) && !frontend_c_keyword(I->batch_sym))
    I->g->batch_const = arena_strdup(I->ar, I->batch_sym);
  for (size_t k = 0; k < G->n_node && !rc; k++) {
    I->node = G->node[k];
    I->loc = (Loc){I->path, (int)k + 1, 1};
    const char *ot = I->node->op_type ? I->node->op_type : "";
    if (I->skip[k]) continue;   /* imported by a pattern */
    if (I->node->domain && *I->node->domain && strcmp(I->node->domain, "ai.onnx")) {
      rc = fail(I, "operators of domain '%s' are not supported", I->node->domain);
      break;
    }
    if (!strcmp(ot, "Div") || !strcmp(ot, "ReduceMean")) {
      int errs = diag_errors();
      int m = !strcmp(ot, "Div") ? try_gelu(I, k) : try_layernorm(I, k);
      I->node = G->node[k];
      if (m < 0 || diag_errors() != errs) { rc = -1; break; }
      if (m > 0) continue;
    }
    const OpRow *row = NULL;
    for (size_t j = 0; j < sizeof op_table / sizeof *op_table; j++)
      if (!strcmp(op_table[j].onnx, ot)) row = &op_table[j];
    if (!row) {
      rc = fail(I, "unsupported operator %s (docs/onnx.md lists the supported ones)", ot);
      break;
    }
    if (I->opset < 11 && I->opset < row->since) {
      rc = fail(I, "%s at opset %d is not supported: ncc imports %s as defined since opset %d (re-export with "
                "opset_version=13)", ot, I->opset, ot, row->since);
      break;
    }
    if (I->node->n_output < 1) { rc = fail(I, "the node has no output"); break; }
    int errs = diag_errors();
    rc = row->fn(I, row->op);
    if (!rc && diag_errors() != errs) rc = -1;
    if (rc && diag_errors() == errs) rc = fail(I, "cannot import this node");
  }
  I->node = NULL;
  if (rc) return rc;
  if (G->n_output < 1) return fail(I, "the graph has no outputs");
  Graph *g = I->g;
  g->outputs = ARENA_ARRAY(I->ar, NamedValue, G->n_output);
  for (size_t k = 0; k < G->n_output; k++) {
    const char *nm = G->output[k]->name ? G->output[k]->name : "";
    Ent *e = find(I, nm);
    if (!e) return fail(I, "graph output '%s' is produced by no node", nm);
    Value *v = value_of(I, e, PK_NONE);
    if (!v) return -1;
    g->outputs[g->noutputs++] = (NamedValue){ident(I, nm), v};
  }
  return 0;
}

Graph *frontend_load_onnx(const char *path, const char *bytes, size_t len, const SetOpt *sets, int nsets) {
  Loc at = {path, 1, 1};
  Onnx__ModelProto *m = len ? onnx__model_proto__unpack(NULL, len, (const uint8_t *)bytes) : NULL;
  if (!m || !m->graph) {
    diag_error(at, "not a valid ONNX model: the %zu bytes do not parse as an ONNX ModelProto%s", len,
               len == 0 ? " (the file is empty)" : m ? " (it has no graph)" : " (truncated or not protobuf)");
    if (m) onnx__model_proto__free_unpacked(m, NULL);
    return NULL;
  }
  int opset = -1;
  for (size_t k = 0; k < m->n_opset_import; k++) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[k];
    if (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) opset = o->has_version ? (int)o->version : 0;
  }
  /* below 11, each node's operator is checked against op_table's since */
  if (opset < 1 || opset > 17) {
    if (opset < 0) diag_error(at, "the ONNX model imports no default-domain opset; ncc supports opsets 11 to 17");
    else diag_error(at, "the ONNX model uses opset %d; ncc supports opsets 11 to 17 (and older ones for the "
                    "operators unchanged since: docs/onnx.md; re-export with opset_version=13)", opset);
    onnx__model_proto__free_unpacked(m, NULL);
    return NULL;
  }
  Graph *g = ir_graph_new(NULL);
  g->model = frontend_stem_name(g->arena, path);
  Imp I = {.g = g, .path = arena_strdup(g->arena, path), .ar = g->arena, .opset = opset, .loc = at};
  forget_weights();
  int errs = diag_errors();
  int rc = import_graph(&I, m->graph, sets, nsets);
  free(I.e);
  onnx__model_proto__free_unpacked(m, NULL);
  if (rc || diag_errors() != errs) {
    ir_graph_free(g);
    forget_weights();
    return NULL;
  }
  free(w_path);
  w_path = strdup(path);
  return g;
}
#endif
