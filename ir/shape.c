/* shape.c — the shape and dtype rule of every op of ops.def.
 *
 * ir_node() calls ir_infer() before it appends a node, so these rules are the
 * gate that keeps ill-shaped graphs out of the IR; ir_verify() calls them again
 * after passes to check that a rewrite kept every value's type.
 *
 * Errors are the user's (docs/language.md "Errors"): each names the op, what it
 * expected and what it found, with the shapes printed as in the source
 * ("f32[16, 512, 7, 7]"), and points at n->loc.  A parameter whose shape does
 * not match its layer can only come from ncc itself (elaboration computes
 * parameter shapes from the input), but it is still reported as an error, not
 * an abort: a wrong message is better than a crash on a user's model.
 *
 * The rules are named by the SHAPE column of ops.def (shape_<rule>); the
 * table at the end is built from it, so a row naming a rule that is not
 * written here does not compile. */
#include "ir.h"

#include <string.h>

/* Rotating buffers so that one message can print several shapes. */
static const char *sv(const Value *v) {
  static char buf[8][256];
  static int k;
  char *b = buf[k++ & 7];
  return shape_str(b, sizeof buf[0], v->dtype, &v->shape);
}
static const char *ss(DType t, const Shape *s) {
  static char buf[4][256];
  static int k;
  char *b = buf[k++ & 3];
  return shape_str(b, sizeof buf[0], t, s);
}

static int is_float(DType t) { return t == DT_F32 || t == DT_F16 || t == DT_BF16; }

/* Outputs larger than this are certainly a mistake (and would overflow the
 * byte counts of the memory planner): 2^40 elements is 4 TiB of f32. */
#define NCC_MAX_NUMEL ((int64_t)1 << 40)

static int check_numel(Node *n, DType t, const Shape *s, const char *what) {
  int64_t m = 1;
  for (int i = 0; i < s->rank; i++) {
    if (s->d[i] < 0) {
      diag_error(n->loc, "%s: the %s would have a negative dimension: %s", ncc_ops[n->op].name, what, ss(t, s));
      return -1;
    }
    if (s->d[i] && m > NCC_MAX_NUMEL / s->d[i]) {
      diag_error(n->loc, "%s: the %s would be too large (%s has more than 2^40 elements)", ncc_ops[n->op].name,
                 what, ss(t, s));
      return -1;
    }
    m *= s->d[i];
  }
  return 0;
}

static int need_float(Node *n, const Value *v, const char *what) {
  if (is_float(v->dtype)) return 0;
  diag_error(n->loc, "%s expects a floating-point %s, got %s", ncc_ops[n->op].name, what, sv(v));
  return -1;
}

static int same_dtype(Node *n, const Value *a, const Value *b, const char *what) {
  if (a->dtype == b->dtype) return 0;
  diag_error(n->loc, "%s: %s has dtype %s but the input is %s; convert one of them", ncc_ops[n->op].name, what,
             dtype_name(b->dtype), sv(a));
  return -1;
}

/* A parameter (or second operand) must have exactly shape `want`. */
static int expect_shape(Node *n, const Value *v, const Shape *want, const char *what) {
  int ok = v->shape.rank == want->rank;
  for (int i = 0; ok && i < want->rank; i++) ok = v->shape.d[i] == want->d[i];
  if (ok) return 0;
  diag_error(n->loc, "%s: %s is %s but the layer expects %s", ncc_ops[n->op].name, what, sv(v),
             ss(v->dtype, want));
  return -1;
}

static Shape shape1(int64_t a) { Shape s = {1, {a}}; return s; }

/* NumPy broadcasting of a and b into *out; -1 when they do not broadcast. */
static int broadcast(const Shape *a, const Shape *b, Shape *out) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  out->rank = r;
  for (int i = 0; i < r; i++) {
    int ia = a->rank - r + i, ib = b->rank - r + i;
    int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
    if (da == db || db == 1) out->d[i] = da;
    else if (da == 1) out->d[i] = db;
    else return -1;
  }
  return 0;
}

static int shape_conv2d(Node *n, DType *t, Shape *s) {
  const Attrs *a = &n->a;
  Value *x = n->in[0], *w = n->in[1];
  if (x->shape.rank != 4) {
    diag_error(n->loc, "conv2d expects a 4-D input [N, C, H, W], got %s", sv(x));
    return -1;
  }
  if (need_float(n, x, "input") || same_dtype(n, x, w, "the weight")) return -1;
  int64_t C = x->shape.d[1];
  if (a->groups < 1) {
    diag_error(n->loc, "conv2d: groups must be at least 1, got %d", a->groups);
    return -1;
  }
  if (C % a->groups) {
    diag_error(n->loc, "conv2d: input has %lld channels but groups=%d does not divide it (input %s)",
               (long long)C, a->groups, sv(x));
    return -1;
  }
  int64_t out = a->out > 0 ? a->out : (w->shape.rank == 4 ? w->shape.d[0] : 0);
  if (out < 1) {
    diag_error(n->loc, "conv2d: the number of output channels must be at least 1, got %lld", (long long)a->out);
    return -1;
  }
  if (out % a->groups) {
    diag_error(n->loc, "conv2d: %lld output channels are not divisible by groups=%d", (long long)out, a->groups);
    return -1;
  }
  for (int i = 0; i < 2; i++) {
    if (a->kernel[i] < 1 || a->stride[i] < 1 || a->dilation[i] < 1 || a->pad[i] < 0) {
      diag_error(n->loc, "conv2d: kernel, stride and dilation must be at least 1 and pad at least 0, "
                 "got kernel=[%d, %d] stride=[%d, %d] dilation=[%d, %d] pad=[%d, %d]",
                 a->kernel[0], a->kernel[1], a->stride[0], a->stride[1], a->dilation[0], a->dilation[1],
                 a->pad[0], a->pad[1]);
      return -1;
    }
  }
  Shape ws = {4, {out, C / a->groups, a->kernel[0], a->kernel[1]}};
  if (a->wtap) ws = (Shape){4, {out, a->kernel[0], a->kernel[1], C / a->groups}};   /* reordered at load (fold) */
  if (check_numel(n, w->dtype, &ws, "weight") || expect_shape(n, w, &ws, "weight")) return -1;
  if ((n->nin == 3) != (n->a.has_bias != 0)) {   /* what ir_verify checks: the gate refuses it too */
    diag_error(n->loc, "%s: attrs.has_bias is %d but the node has %d inputs", ncc_ops[n->op].name, n->a.has_bias, n->nin);
    return -1;
  }
  if (n->nin == 3) {
    Shape bs = shape1(out);
    if (same_dtype(n, x, n->in[2], "the bias") || expect_shape(n, n->in[2], &bs, "bias")) return -1;
  }
  int64_t ho = ir_window_out(x->shape.d[2], a->kernel[0], a->stride[0], a->pad[0], a->dilation[0]);
  int64_t wo = ir_window_out(x->shape.d[3], a->kernel[1], a->stride[1], a->pad[1], a->dilation[1]);
  if (ho <= 0 || wo <= 0 || x->shape.d[2] + 2LL * a->pad[0] < (int64_t)a->dilation[0] * (a->kernel[0] - 1) + 1 ||
      x->shape.d[3] + 2LL * a->pad[1] < (int64_t)a->dilation[1] * (a->kernel[1] - 1) + 1) {
    diag_error(n->loc, "conv2d: the %dx%d kernel (dilation [%d, %d], pad [%d, %d]) does not fit the %lldx%lld "
               "input %s; the output would be empty",
               a->kernel[0], a->kernel[1], a->dilation[0], a->dilation[1], a->pad[0], a->pad[1],
               (long long)x->shape.d[2], (long long)x->shape.d[3], sv(x));
    return -1;
  }
  *t = x->dtype;
  *s = (Shape){4, {x->shape.d[0], out, ho, wo}};
  return 0;
}

static int shape_linear(Node *n, DType *t, Shape *s) {
  Value *x = n->in[0], *w = n->in[1];
  if (x->shape.rank != 2) {
    if (x->shape.rank > 2)
      diag_error(n->loc, "linear expects a 2-D input, got %s; did you mean flatten() first?", sv(x));
    else
      diag_error(n->loc, "linear expects a 2-D input [N, features], got %s; reshape it to [1, %lld]",
                 sv(x), (long long)(x->shape.rank ? x->shape.d[0] : 1));
    return -1;
  }
  if (need_float(n, x, "input") || same_dtype(n, x, w, "the weight")) return -1;
  int64_t out = n->a.out > 0 ? n->a.out : (w->shape.rank == 2 ? w->shape.d[0] : 0);
  if (out < 1) {
    diag_error(n->loc, "linear: the number of output features must be at least 1, got %lld", (long long)n->a.out);
    return -1;
  }
  Shape ws = {2, {out, x->shape.d[1]}};
  if (check_numel(n, w->dtype, &ws, "weight") || expect_shape(n, w, &ws, "weight")) return -1;
  if ((n->nin == 3) != (n->a.has_bias != 0)) {   /* what ir_verify checks: the gate refuses it too */
    diag_error(n->loc, "%s: attrs.has_bias is %d but the node has %d inputs", ncc_ops[n->op].name, n->a.has_bias, n->nin);
    return -1;
  }
  if (n->nin == 3) {
    Shape bs = shape1(out);
    if (same_dtype(n, x, n->in[2], "the bias") || expect_shape(n, n->in[2], &bs, "bias")) return -1;
  }
  *t = x->dtype;
  *s = (Shape){2, {x->shape.d[0], out}};
  return 0;
}

/* torch.matmul: 1-D operands are promoted (a: [1, K], b: [K, 1]) and the
 * added axis removed again; leading (batch) dims broadcast. */
static int shape_matmul(Node *n, DType *t, Shape *s) {
  Value *a = n->in[0], *b = n->in[1];
  if (a->shape.rank < 1 || b->shape.rank < 1) {
    diag_error(n->loc, "matmul expects operands of rank 1 or more, got %s and %s", sv(a), sv(b));
    return -1;
  }
  if (need_float(n, a, "operand") || need_float(n, b, "operand")) return -1;
  if (a->dtype != b->dtype) {
    diag_error(n->loc, "matmul: operands have different dtypes: %s and %s", sv(a), sv(b));
    return -1;
  }
  Shape A = a->shape, B = b->shape;
  int a1 = A.rank == 1, b1 = B.rank == 1;
  if (a1) A = (Shape){2, {1, A.d[0]}};
  if (b1) B = (Shape){2, {B.d[0], 1}};
  int64_t m = A.d[A.rank - 2], k = A.d[A.rank - 1], k2 = B.d[B.rank - 2], nn = B.d[B.rank - 1];
  if (k != k2) {
    diag_error(n->loc, "matmul: inner dimensions differ: %s has %lld columns but %s has %lld rows", sv(a),
               (long long)k, sv(b), (long long)k2);
    return -1;
  }
  Shape ba = {A.rank - 2, {0}}, bb = {B.rank - 2, {0}}, bo;
  memcpy(ba.d, A.d, sizeof(int64_t) * (size_t)ba.rank);
  memcpy(bb.d, B.d, sizeof(int64_t) * (size_t)bb.rank);
  if (broadcast(&ba, &bb, &bo)) {
    diag_error(n->loc, "matmul: batch dimensions of %s and %s do not broadcast", sv(a), sv(b));
    return -1;
  }
  if (bo.rank + 2 > NCC_MAX_RANK) {
    diag_error(n->loc, "matmul: the result would have more than %d dimensions", NCC_MAX_RANK);
    return -1;
  }
  *s = bo;
  if (!a1) s->d[s->rank++] = m;
  if (!b1) s->d[s->rank++] = nn;
  *t = a->dtype;
  return 0;
}

static int shape_batchnorm2d(Node *n, DType *t, Shape *s) {
  Value *x = n->in[0];
  if (x->shape.rank != 4) {
    diag_error(n->loc, "batchnorm2d expects a 4-D input [N, C, H, W], got %s", sv(x));
    return -1;
  }
  if (need_float(n, x, "input")) return -1;
  if (!(n->a.eps > 0)) {
    diag_error(n->loc, "batchnorm2d: eps must be positive, got %g", n->a.eps);
    return -1;
  }
  static const char *const what[] = {"", "weight", "bias", "running_mean", "running_var"};
  Shape ps = shape1(x->shape.d[1]);
  for (int i = 1; i < 5; i++)
    if (expect_shape(n, n->in[i], &ps, what[i])) return -1;
  *t = x->dtype;
  *s = x->shape;
  return 0;
}

static int shape_layernorm(Node *n, DType *t, Shape *s) {
  Value *x = n->in[0];
  if (x->shape.rank < 1) {
    diag_error(n->loc, "layernorm expects an input of rank 1 or more, got %s", sv(x));
    return -1;
  }
  if (need_float(n, x, "input")) return -1;
  if (!(n->a.eps > 0)) {
    diag_error(n->loc, "layernorm: eps must be positive, got %g", n->a.eps);
    return -1;
  }
  Shape ps = shape1(x->shape.d[x->shape.rank - 1]);
  if (expect_shape(n, n->in[1], &ps, "weight") || expect_shape(n, n->in[2], &ps, "bias")) return -1;
  *t = x->dtype;
  *s = x->shape;
  return 0;
}

static int shape_unary(Node *n, DType *t, Shape *s) {
  Value *x = n->in[0];
  if (need_float(n, x, "input")) return -1;
  if ((n->op == OP_DROPOUT || n->op == OP_DROPOUT2D) && !(n->a.p >= 0 && n->a.p < 1)) {
    diag_error(n->loc, "%s: the probability p must be in [0, 1), got %g", ncc_ops[n->op].name, n->a.p);
    return -1;
  }
  if (n->op == OP_DROPOUT2D && x->shape.rank != 4 && x->shape.rank != 3) {
    diag_error(n->loc, "dropout2d expects a 4-D input [N, C, H, W] (or 3-D [C, H, W]), got %s", sv(x));
    return -1;
  }
  *t = x->dtype;
  *s = x->shape;
  return 0;
}

static int shape_binary(Node *n, DType *t, Shape *s) {
  Value *a = n->in[0], *b = n->in[1];
  const char *op = ncc_ops[n->op].name;
  if (a->dtype != b->dtype) {
    diag_error(n->loc, "%s: operands have different dtypes: %s and %s", op, sv(a), sv(b));
    return -1;
  }
  if (!is_float(a->dtype)) {
    diag_error(n->loc, "%s expects floating-point operands, got %s and %s", op, sv(a), sv(b));
    return -1;
  }
  if (broadcast(&a->shape, &b->shape, s)) {
    diag_error(n->loc, "%s: shapes %s and %s do not broadcast", op, sv(a), sv(b));
    return -1;
  }
  *t = a->dtype;
  return 0;
}

static int shape_pool(Node *n, DType *t, Shape *s) {
  const Attrs *a = &n->a;
  Value *x = n->in[0];
  const char *op = ncc_ops[n->op].name;
  if (x->shape.rank != 4) {
    diag_error(n->loc, "%s expects a 4-D input [N, C, H, W], got %s", op, sv(x));
    return -1;
  }
  if (need_float(n, x, "input")) return -1;
  if (n->op == OP_GAVGPOOL2D) {
    *t = x->dtype;
    *s = (Shape){4, {x->shape.d[0], x->shape.d[1], 1, 1}};
    return 0;
  }
  /* avgpool has no dilation; maxpool's defaults to 1 */
  int dil[2] = {n->op == OP_MAXPOOL2D ? a->dilation[0] : 1, n->op == OP_MAXPOOL2D ? a->dilation[1] : 1};
  for (int i = 0; i < 2; i++) {
    if (a->kernel[i] < 1 || a->stride[i] < 1 || dil[i] < 1 || a->pad[i] < 0) {
      diag_error(n->loc, "%s: kernel, stride and dilation must be at least 1 and pad at least 0, "
                 "got kernel=[%d, %d] stride=[%d, %d] pad=[%d, %d]",
                 op, a->kernel[0], a->kernel[1], a->stride[0], a->stride[1], a->pad[0], a->pad[1]);
      return -1;
    }
    /* torch: "pad should be at most half of effective kernel size" */
    int64_t eff = (int64_t)dil[i] * (a->kernel[i] - 1) + 1;
    if (a->pad[i] > eff / 2) {
      diag_error(n->loc, "%s: pad=%d is more than half of the %skernel size %lld (PyTorch allows at most %lld)",
                 op, a->pad[i], dil[i] > 1 ? "effective " : "", (long long)eff, (long long)(eff / 2));
      return -1;
    }
  }
  int64_t ho = ir_window_out(x->shape.d[2], a->kernel[0], a->stride[0], a->pad[0], dil[0]);
  int64_t wo = ir_window_out(x->shape.d[3], a->kernel[1], a->stride[1], a->pad[1], dil[1]);
  if (ho <= 0 || wo <= 0 || x->shape.d[2] + 2LL * a->pad[0] < (int64_t)dil[0] * (a->kernel[0] - 1) + 1 ||
      x->shape.d[3] + 2LL * a->pad[1] < (int64_t)dil[1] * (a->kernel[1] - 1) + 1) {
    diag_error(n->loc, "%s: the %dx%d window (pad [%d, %d]) does not fit the %lldx%lld input %s; the output "
               "would be empty", op, a->kernel[0], a->kernel[1], a->pad[0], a->pad[1],
               (long long)x->shape.d[2], (long long)x->shape.d[3], sv(x));
    return -1;
  }
  *t = x->dtype;
  *s = (Shape){4, {x->shape.d[0], x->shape.d[1], ho, wo}};
  return 0;
}

static int check_axis(Node *n, const Value *x, int axis) {
  if (axis >= 0 && axis < x->shape.rank) return 0;
  diag_error(n->loc, "%s: axis is out of range for %s (valid axes are %d..%d)", ncc_ops[n->op].name, sv(x),
             -x->shape.rank, x->shape.rank - 1);
  return -1;
}

static int shape_softmax(Node *n, DType *t, Shape *s) {
  Value *x = n->in[0];
  if (x->shape.rank < 1) {
    diag_error(n->loc, "%s expects an input of rank 1 or more, got the scalar %s", ncc_ops[n->op].name, sv(x));
    return -1;
  }
  if (need_float(n, x, "input") || check_axis(n, x, n->a.axis)) return -1;
  *t = x->dtype;
  *s = x->shape;
  return 0;
}

static int shape_concat(Node *n, DType *t, Shape *s) {
  Value *x = n->in[0];
  int ax = n->a.axis;
  if (x->shape.rank < 1) {
    diag_error(n->loc, "concat expects tensors of rank 1 or more, got the scalar %s", sv(x));
    return -1;
  }
  if (check_axis(n, x, ax)) return -1;
  *s = x->shape;
  for (int i = 1; i < n->nin; i++) {
    Value *y = n->in[i];
    if (y->dtype != x->dtype) {
      diag_error(n->loc, "concat: input %d has dtype %s but input 1 is %s", i + 1, dtype_name(y->dtype), sv(x));
      return -1;
    }
    int ok = y->shape.rank == x->shape.rank;
    for (int j = 0; ok && j < x->shape.rank; j++) ok = j == ax || y->shape.d[j] == x->shape.d[j];
    if (!ok) {
      diag_error(n->loc, "concat along axis %d: input %d is %s but input 1 is %s; all dimensions but axis %d "
                 "must be equal", ax, i + 1, sv(y), sv(x), ax);
      return -1;
    }
    s->d[ax] += y->shape.d[ax];
  }
  *t = x->dtype;
  return check_numel(n, *t, s, "result");
}

static int shape_flatten(Node *n, DType *t, Shape *s) {
  Value *x = n->in[0];
  if (x->shape.rank < 2) {
    diag_error(n->loc, "flatten keeps the batch axis and expects a tensor of rank 2 or more, got %s", sv(x));
    return -1;
  }
  int64_t rest = 1;
  for (int i = 1; i < x->shape.rank; i++) rest *= x->shape.d[i];
  *t = x->dtype;
  *s = (Shape){2, {x->shape.d[0], rest}};
  return 0;
}

/* reshape: at most one -1, resolved here and written back into attrs.list so
 * that passes and emitters see only concrete dims. */
static int shape_reshape(Node *n, DType *t, Shape *s) {
  Value *x = n->in[0];
  Attrs *a = &n->a;
  if (a->nlist < 0 || a->nlist > NCC_MAX_RANK) {
    diag_error(n->loc, "reshape: the target shape must have 0 to %d dimensions, got %d", NCC_MAX_RANK, a->nlist);
    return -1;
  }
  int hole = -1;
  int64_t known = 1;
  for (int i = 0; i < a->nlist; i++) {
    int64_t d = a->list[i];
    if (d == -1) {
      if (hole >= 0) {
        diag_error(n->loc, "reshape: only one dimension may be -1, got -1 at positions %d and %d", hole, i);
        return -1;
      }
      hole = i;
    } else if (d < 0) {
      diag_error(n->loc, "reshape: target dimensions must be positive (or one -1), got %lld at position %d",
                 (long long)d, i);
      return -1;
    } else {
      if (d && known > NCC_MAX_NUMEL / d) {
        diag_error(n->loc, "reshape: the target shape is too large");
        return -1;
      }
      known *= d;
    }
  }
  int64_t numel = shape_numel(&x->shape);
  s->rank = a->nlist;
  memcpy(s->d, a->list, sizeof(int64_t) * (size_t)a->nlist);
  if (hole >= 0) {
    if (numel == 0) {   /* torch: "the unspecified dimension size -1 can be any value and is ambiguous" */
      diag_error(n->loc, "reshape: the -1 dimension is ambiguous: %s has no elements", sv(x));
      return -1;
    }
    if (known == 0) {
      diag_error(n->loc, "reshape: %s has %lld elements but a target with a 0 dimension holds none", sv(x),
                 (long long)numel);
      return -1;
    }
    if (numel % known) {
      diag_error(n->loc, "reshape: cannot infer the -1 dimension: %s has %lld elements, not a multiple of %lld",
                 sv(x), (long long)numel, (long long)known);
      return -1;
    }
    s->d[hole] = numel / known;
    a->list[hole] = s->d[hole];
  } else if (known != numel) {
    diag_error(n->loc, "reshape: %s has %lld elements but the target %s has %lld", sv(x), (long long)numel,
               ss(x->dtype, s), (long long)known);
    return -1;
  }
  *t = x->dtype;
  return 0;
}

static int shape_transpose(Node *n, DType *t, Shape *s) {
  Value *x = n->in[0];
  const Attrs *a = &n->a;
  int seen[NCC_MAX_RANK] = {0};
  int ok = a->nlist == x->shape.rank;
  for (int i = 0; ok && i < a->nlist; i++) {
    int64_t p = a->list[i];
    ok = p >= 0 && p < x->shape.rank && !seen[p];
    if (ok) seen[p] = 1;
  }
  if (!ok) {
    char buf[160];
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < a->nlist && i < NCC_MAX_RANK && k < sizeof buf; i++)
      k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%lld", i ? ", " : "", (long long)a->list[i]);
    diag_error(n->loc, "transpose: [%s] is not a permutation of the %d axes of %s", buf, x->shape.rank, sv(x));
    return -1;
  }
  if (a->flip >> x->shape.rank) {   /* an internal attribute (autodiff's reversed taps) */
    diag_error(n->loc, "internal: transpose: axes reversed (mask %#x) beyond the %d of %s", a->flip, x->shape.rank,
               sv(x));
    return -1;
  }
  s->rank = x->shape.rank;
  for (int i = 0; i < s->rank; i++) s->d[i] = x->shape.d[a->list[i]];
  *t = x->dtype;
  return 0;
}

static int shape_loss(Node *n, DType *t, Shape *s) {
  Value *x = n->in[0], *y = n->in[1];
  const char *op = ncc_ops[n->op].name;
  if (n->op == OP_MSE_LOSS) {
    if (need_float(n, x, "prediction") || need_float(n, y, "target")) return -1;
    int ok = x->dtype == y->dtype && x->shape.rank == y->shape.rank;
    for (int i = 0; ok && i < x->shape.rank; i++) ok = x->shape.d[i] == y->shape.d[i];
    if (!ok) {
      diag_error(n->loc, "mse_loss expects a prediction and a target of the same shape and dtype, got %s and %s",
                 sv(x), sv(y));
      return -1;
    }
  } else {
    const char *what = n->op == OP_CROSS_ENTROPY ? "logits" : "log-probabilities";
    if (x->shape.rank != 2 || !is_float(x->dtype)) {
      diag_error(n->loc, "%s expects %s as a 2-D floating-point tensor [N, classes], got %s%s", op, what, sv(x),
                 x->shape.rank > 2 ? "; did you mean flatten() first?" : "");
      return -1;
    }
    if (y->dtype != DT_I32 || y->shape.rank != 1 || y->shape.d[0] != x->shape.d[0]) {
      diag_error(n->loc, "%s expects class labels i32[%lld] (one per row of %s), got %s", op,
                 (long long)x->shape.d[0], sv(x), sv(y));
      return -1;
    }
  }
  *t = DT_F32;
  s->rank = 0;
  return 0;
}


/* ---- training ops (made by autodiff; a failed check is ncc's own bug, still
 * reported as an error at the layer's place rather than an abort) ---- */
static int internal_bad(Node *n, const char *why) {
  diag_error(n->loc, "internal: %s %s (an autodiff bug)", ncc_ops[n->op].name, why);
  return -1;
}
static int same_shape(const Value *a, const Value *b) {
  if (a->shape.rank != b->shape.rank) return 0;
  for (int i = 0; i < a->shape.rank; i++)
    if (a->shape.d[i] != b->shape.d[i]) return 0;
  return 1;
}
static Shape list_of(const Attrs *a) {
  Shape s;
  memset(&s, 0, sizeof s);
  s.rank = a->nlist;
  for (int i = 0; i < a->nlist; i++) s.d[i] = a->list[i];
  return s;
}
static int shape_bn_stats(Node *n, DType *t, Shape *s) {
  if (n->in[0]->shape.rank != 4) return internal_bad(n, "expects a 4-D input");
  *t = DT_F32;
  s->rank = 2;
  s->d[0] = 2;
  s->d[1] = n->in[0]->shape.d[1];
  return 0;
}
static int shape_bn_train(Node *n, DType *t, Shape *s) {
  Value *x = n->in[0];
  if (x->shape.rank != 4 || n->in[1]->shape.rank != 1 || n->in[1]->shape.d[0] != x->shape.d[1])
    return internal_bad(n, "has mismatched inputs");
  *t = x->dtype;
  *s = x->shape;
  return 0;
}
/* updates: a dummy scalar */
static int shape_bn_running(Node *n, DType *t, Shape *s) {
  (void)n;
  *t = DT_F32;
  s->rank = 0;
  return 0;
}
static int shape_update(Node *n, DType *t, Shape *s) { return shape_bn_running(n, t, s); }
static int shape_same(Node *n, DType *t, Shape *s) {
  *t = n->in[0]->dtype;
  *s = n->in[0]->shape;
  return 0;
}
static int shape_act_grad(Node *n, DType *t, Shape *s) {
  if (!same_shape(n->in[0], n->in[1])) return internal_bad(n, "has operands of different shapes");
  return shape_same(n, t, s);
}
static int shape_conv2d_bwd_data(Node *n, DType *t, Shape *s) {
  if (n->a.nlist != 4) return internal_bad(n, "needs the input's shape");
  *t = n->in[0]->dtype;
  *s = list_of(&n->a);
  return 0;
}
static int shape_conv2d_bwd_weight(Node *n, DType *t, Shape *s) {
  Value *x = n->in[1];
  if (x->shape.rank != 4 || n->a.groups < 1) return internal_bad(n, "expects a 4-D input");
  *t = x->dtype;
  s->rank = 4;
  s->d[0] = n->a.out;
  s->d[1] = x->shape.d[1] / n->a.groups;
  s->d[2] = n->a.kernel[0];
  s->d[3] = n->a.kernel[1];
  return 0;
}
static int shape_linear_bwd_weight(Node *n, DType *t, Shape *s) {
  Value *dy = n->in[0], *x = n->in[1];
  if (dy->shape.rank != 2 || x->shape.rank != 2 || dy->shape.d[0] != x->shape.d[0])
    return internal_bad(n, "expects dy[N, O] and x[N, I]");
  *t = x->dtype;
  s->rank = 2;
  s->d[0] = dy->shape.d[1];
  s->d[1] = x->shape.d[1];
  return 0;
}
static int shape_sum_to(Node *n, DType *t, Shape *s) {
  Value *x = n->in[0];
  if (n->a.nlist < 0 || n->a.nlist > x->shape.rank || n->a.axis < 0 || (int64_t)n->a.axis + n->a.nlist > x->shape.rank)
    return internal_bad(n, "has a target that does not align with its input");
  for (int i = 0; i < n->a.nlist; i++)
    if (n->a.list[i] != 1 && n->a.list[i] != x->shape.d[n->a.axis + i])
      return internal_bad(n, "has a target that does not align with its input");
  *t = x->dtype;
  *s = list_of(&n->a);
  return 0;
}
static int shape_like_in1(Node *n, DType *t, Shape *s) {
  *t = n->in[1]->dtype == DT_I32 ? n->in[0]->dtype : n->in[1]->dtype;
  *s = n->in[1]->shape;
  return 0;
}
static int shape_list_shape(Node *n, DType *t, Shape *s) {
  if (n->a.nlist < 1 || n->a.nlist > NCC_MAX_RANK) return internal_bad(n, "needs the input's shape");
  *t = n->in[0]->dtype;
  *s = list_of(&n->a);
  return 0;
}
static int shape_last_dim(Node *n, DType *t, Shape *s) {
  const Shape *xs = &n->in[1]->shape;
  if (xs->rank < 1) return internal_bad(n, "expects an input of rank 1 or more");
  *t = n->in[1]->dtype;
  *s = shape1(xs->d[xs->rank - 1]);
  return 0;
}
static int shape_channel_dim(Node *n, DType *t, Shape *s) {
  if (n->in[1]->shape.rank != 4) return internal_bad(n, "expects a 4-D input");
  *t = n->in[1]->dtype;
  *s = shape1(n->in[1]->shape.d[1]);
  return 0;
}
static int shape_slice(Node *n, DType *t, Shape *s) {
  const Shape *xs = &n->in[0]->shape;
  int ax = n->a.axis;
  if (ax < 0 || ax >= xs->rank || n->a.nlist != 2 || n->a.list[0] < 0 || n->a.list[1] < 0 ||
      n->a.list[0] + n->a.list[1] > xs->d[ax])
    return internal_bad(n, "has a range outside its input");
  *t = n->in[0]->dtype;
  *s = *xs;
  s->d[ax] = n->a.list[1];
  return 0;
}

/* Sources carry their type from ir_input()/ir_param(); only ir_verify asks again. */
static int shape_source(Node *n, DType *t, Shape *s) {
  NCC_ASSERT(n->out != NULL);
  *t = n->out->dtype;
  *s = n->out->shape;
  return 0;
}

static int shape_scalar(Node *n, DType *t, Shape *s) {
  (void)n;
  *t = DT_F32;
  s->rank = 0;
  return 0;
}

/* The SHAPE column of ops.def: an op whose rule is missing here does not compile. */
typedef int ShapeRule(Node *n, DType *t, Shape *s);
static ShapeRule *const shape_rules[OP__COUNT] = {
#define OP(name, str, flags, mn, mx, args, shape, emit, cost, expr, grad) shape_##shape,
#include "ops.def"
#undef OP
};

int ir_infer(Graph *g, Node *n, DType *out_t, Shape *out_s) {
  (void)g;
  NCC_ASSERT(n && (unsigned)n->op < OP__COUNT);
  NCC_ASSERT(n->nin >= ncc_ops[n->op].min_in && n->nin <= ncc_ops[n->op].max_in);
  for (int i = 0; i < n->nin; i++) NCC_ASSERT(n->in[i] != NULL);
  memset(out_s, 0, sizeof *out_s);
  int r = shape_rules[n->op](n, out_t, out_s);
  if (r == 0 && !(ncc_ops[n->op].flags & OPF_SOURCE)) r = check_numel(n, *out_t, out_s, "result");
  return r;
}
