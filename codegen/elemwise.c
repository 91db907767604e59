/* elemwise.c — elementwise ops: the expressions of ops.def's EXPR column
 * turned into statements, the epilogue chain every group emitter applies
 * before its store, and the kernel of a group whose main op is itself
 * elementwise.
 *
 * Expressions are written once, in ops.def, with $0/$1 for the operands and
 * $s for the leaky_relu slope; operands are always plain variables, loads or
 * literals (negative ones in parentheses), so an operand used twice (silu,
 * hardswish) costs nothing and needs no parentheses of its own.  The formulas follow PyTorch's definitions (gelu:
 * exact erf form; hardswish: x * relu6(x + 3) / 6; silu: x * sigmoid(x)).
 *
 * NaN and infinities behave as in PyTorch: a NaN operand gives NaN (so relu
 * and relu6 compare and let a NaN fall through where fmaxf, IEEE maxNum in C
 * and CUDA alike, would return 0), relu6(inf) = 6, and gelu, silu and
 * hardswish of -inf are NaN, as PyTorch's formulas give (-inf * 0). */
#include <stdio.h>
#include <string.h>

#include "cg.h"

/* The EXPR column of ops.def. */
static const char *const elem_expr[OP__COUNT] = {
#define OP(name, str, flags, mn, mx, args, shape, emit, cost, expr, grad) expr,
#include "ops.def"
#undef OP
};

/* act_grad(dy, x) = dy * f'(x), f = attrs.act: $0 is dy, $1 is x, or, with
 * attrs.act_at_out, the output y = f(x) (relu, relu6, leaky_relu, sigmoid,
 * tanh; see passes/autodiff.c).  PyTorch's backward formulas: relu and relu6 select (a NaN x
 * passes dy, as torch's threshold_backward and hardtanh_backward do, and dy is
 * not multiplied where the derivative is 0); gelu in its exact erf form,
 * cdf + x * pdf; hardswish as torch's piecewise rule. */
static const char *act_grad_expr(int act, int at_out) {
  if (at_out) {   /* $1 is the output y (attrs.act_at_out): torch's formulas in y */
    switch (act) {
    case OP_RELU: return "$1 <= 0.0f ? 0.0f : $0";
    case OP_RELU6: return "($1 <= 0.0f || $1 >= 6.0f) ? 0.0f : $0";
    case OP_LEAKY_RELU: return "$1 > 0.0f ? $0 : $0 * $s";
    case OP_SIGMOID: return "$0 * (1.0f - $1) * $1";
    case OP_TANH: return "$0 * (1.0f - $1 * $1)";
    default: return NULL;
    }
  }
  switch (act) {
  case OP_RELU: return "$1 <= 0.0f ? 0.0f : $0";
  case OP_RELU6: return "($1 <= 0.0f || $1 >= 6.0f) ? 0.0f : $0";
  case OP_LEAKY_RELU: return "$1 > 0.0f ? $0 : $0 * $s";
  case OP_SIGMOID: return "$0 * (1.0f - 1.0f / (1.0f + expf(-$1))) * (1.0f / (1.0f + expf(-$1)))";
  case OP_TANH: return "$0 * (1.0f - tanhf($1) * tanhf($1))";
  case OP_GELU:
    return "$0 * (0.5f * (1.0f + erff($1 * 0.707106781f)) + $1 * 0.398942280f * expf(-0.5f * $1 * $1))";
  case OP_SILU:
    return "$0 * (1.0f / (1.0f + expf(-$1))) * (1.0f + $1 * (1.0f - 1.0f / (1.0f + expf(-$1))))";
  case OP_HARDSWISH: return "$1 < -3.0f ? 0.0f : $1 <= 3.0f ? $0 * ($1 / 3.0f + 0.5f) : $0";
  case OP_SQRT: return "$0 / (2.0f * sqrtf($1))";
  default: return NULL;
  }
}

int cg_elem_stmt(Cg *c, Buf *body, const Node *n, const char *var, const char *x0, const char *x1, int ind) {
  const char *e = n->op == OP_ACT_GRAD ? act_grad_expr(n->a.act, n->a.act_at_out) : elem_expr[n->op];
  if (!e) {
    diag_error(n->loc, "codegen: %s is not an elementwise op it can emit", ncc_ops[n->op].name);
    c->err = 1;
    return -1;
  }
  cg_ind(body, ind);
  buf_printf(body, "%s = ", var);
  char lit[40];
  for (const char *p = e; *p; p++) {
    if (*p == '$' && p[1] == '0') buf_puts(body, x0), p++;
    else if (*p == '$' && p[1] == '1') buf_puts(body, x1 ? x1 : "0.0f"), p++;
    else if (*p == '$' && p[1] == 's') buf_printf(body, n->a.slope < 0 ? "(%s)" : "%s", cg_flit(lit, n->a.slope)), p++;
    else buf_printf(body, "%c", *p);
  }
  buf_puts(body, ";\n");
  return 0;
}

/* Operand expression of value v at linear output index idx of shape `out`:
 * a literal for a constant, else a load at the broadcast index. */
static void operand(Cg *c, KParams *p, Value *v, const char *role, const Shape *out, const char *idx, char *dst,
                    size_t n) {
  if (v->def->op == OP_CONST) {
    char lit[40];
    cg_flit(lit, v->def->a.fval);
    /* "-2.0f" in parentheses: an expression may negate an operand ("-$0") */
    snprintf(dst, n, lit[0] == '-' ? "(%s)" : "%s", lit);
    return;
  }
  const char *name = kp_value(c, p, v, 0, role);
  Buf b = {0};
  cg_bcast_index(&b, out, &v->shape, idx);
  char e[480];
  snprintf(e, sizeof e, "%s[%s]", name, b.s);
  cg_ld(dst, n, v, e);
  buf_free(&b);
}

/* operand's paired form (cg_epilogue_pair): where v has the output's shape
 * (its index is idx itself), its elements op and op + 1 read by one load
 * into the array ep<k>, declared and loaded in pre (before the loop over
 * e), and dst its element e; 0 where not so (the caller reads it as
 * operand does) */
static int operand_pair(Cg *c, KParams *p, Value *v, const char *role, const Shape *out, const char *idx, Buf *pre,
                        int *k, char *dst, size_t n) {
  if (v->def->op == OP_CONST) return 0;
  Buf b = {0};
  cg_bcast_index(&b, out, &v->shape, idx);
  int same = !strcmp(b.s, idx);
  buf_free(&b);
  char l = cg_pair_letter(v);
  if (!same || !l) return 0;
  const char *name = kp_value(c, p, v, 0, role);
  char arr[16], e[48];
  snprintf(arr, sizeof arr, "ep%d", (*k)++);
  buf_printf(pre, "          %s %s[2];   /* %s[op], [op + 1]: one load of two */\n", cg_elem_type(v), arr, name);
  buf_printf(pre, "          ncc_ld2%c(%s, &%s[op]);\n", l, arr, name);
  snprintf(e, sizeof e, "%s[e]", arr);
  cg_ld(dst, n, v, e);
  return 1;
}

/* cg_epilogue, and with pre (not NULL) cg_epilogue_pair */
static int epilogue(Cg *c, const KGroup *gr, KParams *p, Buf *body, Buf *pre, const char *var, const char *idx,
                    int ind) {
  Value *cur = gr->main->out;
  int k = 0;
  for (int i = 0; i < gr->nepi; i++) {
    Node *n = gr->epi[i];
    /* same elements in the same order as the main output: broadcast against n's own shape */
    const Shape *os = &n->out->shape;
    NCC_ASSERT(shape_numel(os) == shape_numel(&gr->main->out->shape));
    if (n->op == OP_BATCHNORM2D) {
      /* inference batchnorm as an epilogue: the same formula as emit_batchnorm */
      NCC_ASSERT(n->in[0] == cur);
      static const char *const role[5] = {NULL, "bn_weight", "bn_bias", "bn_running_mean", "bn_running_var"};
      const char *nm[5];
      for (int j = 1; j < 5; j++) nm[j] = kp_value(c, p, n->in[j], 0, role[j]);
      char lit[40], ix[160];
      cg_ind(body, ind);
      buf_printf(body, "{\n");
      cg_ind(body, ind + 1);
      buf_printf(body, "int ch = (%s / %lld) %% %lld;\n", cg_paren(ix, sizeof ix, idx), (long long)(os->d[2] * os->d[3]),
                 (long long)os->d[1]);
      cg_ind(body, ind + 1);
      buf_printf(body, "%s = (%s - %s[ch]) / sqrtf(%s[ch] + %s) * %s[ch] + %s[ch];\n", var, var, nm[3], nm[4],
                 cg_flit(lit, n->a.eps), nm[1], nm[2]);
      cg_ind(body, ind);
      buf_printf(body, "}\n");
      cur = n->out;
      continue;
    }
    char x[2][512];
    for (int j = 0; j < n->nin; j++) {
      /* the operand that is not the running value: add_b, mul_a, ... */
      char arg[32], role[48];
      snprintf(role, sizeof role, "%s_%s", ncc_ops[n->op].name, cg_arg_role(n, j, arg));
      if (n->in[j] == cur) snprintf(x[j], sizeof x[j], "%s", var);
      else if (!pre || !operand_pair(c, p, n->in[j], role, os, idx, pre, &k, x[j], sizeof x[j]))
        operand(c, p, n->in[j], role, os, idx, x[j], sizeof x[j]);
    }
    if (cg_elem_stmt(c, body, n, var, x[0], n->nin > 1 ? x[1] : NULL, ind)) return -1;
    cur = n->out;
  }
  return 0;
}

int cg_epilogue(Cg *c, const KGroup *gr, KParams *p, Buf *body, const char *var, const char *idx, int ind) {
  return epilogue(c, gr, p, body, NULL, var, idx, ind);
}

int cg_epilogue_pair(Cg *c, const KGroup *gr, KParams *p, Buf *body, Buf *pre, const char *var, const char *idx, int ind) {
  return epilogue(c, gr, p, body, pre, var, idx, ind);
}

int emit_elemwise(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  Value *out = group_out(gr);
  int64_t total = shape_numel(&n->out->shape);
  KParams p = {0};
  Buf body = {0};
  char x[2][512];
  for (int j = 0; j < n->nin; j++) {
    char arg[32];
    operand(c, &p, n->in[j], cg_arg_role(n, j, arg), &n->out->shape, "i", x[j], sizeof x[j]);
  }
  buf_printf(&body, "  int i = %s * 256 + %s;\n  if (i < %lld) {\n    float v;\n", D_BID_X, D_TID_X,
             (long long)total);
  if (cg_elem_stmt(c, &body, n, "v", x[0], n->nin > 1 ? x[1] : NULL, 2)) goto fail;
  if (cg_epilogue(c, gr, &p, &body, "v", "i", 2)) goto fail;
  const char *y = kp_value(c, &p, out, 1, "y");
  char st[64];
  buf_printf(&body, "    %s[i] = %s;\n  }\n", y, cg_st(st, sizeof st, out, "v"));
  {
    Buf k = {0};
    char opn[96];
    buf_printf(&k, "%s @K@(", D_KERNEL);
    kp_decl(&p, &k);
    buf_printf(&k, ") {\n%s}\n", body.s);
    const char *name = cg_kernel(c, cg_opname(gr, NULL, opn), 0, &p, k.s);
    CgBatch bg;
    cg_launch_b(c, name, &p, (total + 255) / 256, 1, 1, 256, 1, 0, cg_batch_grid(c, gr, 0, total, 256, &bg));
    buf_free(&k);
  }
  buf_free(&body);
  return 0;
fail:
  buf_free(&body);
  return -1;
}
