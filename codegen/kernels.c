/* kernels.c — emitters of the non-GEMM, non-elementwise ops: pooling,
 * normalisation, softmax, data movement and losses.
 *
 * Every index is specialised to the static shapes: the kernels hold only
 * constants, so nvcc turns the divisions into multiplications and NVRTC
 * sees the same text.  Thread-per-output kernels use 256-thread blocks and
 * no barrier; row reductions (layernorm, softmax, losses) use one block per
 * row, reduce each warp by shuffles and the warps through shared memory
 * (cg_block_reduce), and are flagged NCC_KF_WARP (and NCC_KF_BARRIER when a
 * block has several warps) so that the emulator runs them on fibers.  Each kernel applies its group's epilogue to
 * the value just before the store. */
#include <stdio.h>
#include <string.h>

#include "cg.h"

#define LL(x) ((long long)(x))

int emit_pool(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Attrs *a = &n->a;
  const Shape *xs = &n->in[0]->shape, *ys = &n->out->shape;
  int is_max = n->op == OP_MAXPOOL2D;
  int64_t H = xs->d[2], W = xs->d[3], OH = ys->d[2], OW = ys->d[3];
  int dil[2] = {is_max ? a->dilation[0] : 1, is_max ? a->dilation[1] : 1};
  if (ir_window_out(H, a->kernel[0], a->stride[0], a->pad[0], dil[0]) != OH ||
      ir_window_out(W, a->kernel[1], a->stride[1], a->pad[1], dil[1]) != OW)
    ncc_die("pool attributes disagree with the output shape");
  int64_t total = shape_numel(ys);
  KParams p = {0};
  Buf b = {0};
  const char *x = kp_value(c, &p, n->in[0], 0, "x");
  cg_flat_head(&b, total);
  buf_printf(&b, "    int ow = i %% %lld, oh = (i / %lld) %% %lld, nc = i / %lld;\n", LL(OW), LL(OW), LL(OH),
             LL(OH * OW));
  buf_printf(&b, "    const float *xp = %s + nc * %lld;\n", x, LL(H * W));
  /* max: padding takes no part (PyTorch pads with -inf), and a NaN in the
   * window wins, as in PyTorch's max_pool2d */
  buf_printf(&b, "    float v = %s;\n", is_max ? D_NEG_INF : "0.0f");
  buf_printf(&b, "    for (int kh = 0; kh < %d; kh++) {\n", a->kernel[0]);
  char ix[160];
  cg_window_index(ix, sizeof ix, "oh", a->stride[0], a->pad[0], "kh", dil[0]);
  buf_printf(&b, "      int ih = %s;\n", ix);
  /* with no padding every window lies inside the input (no ceil_mode) */
  if (a->pad[0]) buf_printf(&b, "      if (ih < 0 || ih >= %lld) continue;\n", LL(H));
  buf_printf(&b, "      for (int kw = 0; kw < %d; kw++) {\n", a->kernel[1]);
  cg_window_index(ix, sizeof ix, "ow", a->stride[1], a->pad[1], "kw", dil[1]);
  buf_printf(&b, "        int iw = %s;\n", ix);
  if (a->pad[1]) buf_printf(&b, "        if (iw < 0 || iw >= %lld) continue;\n", LL(W));
  buf_printf(&b, "        float e = xp[ih * %lld + iw];\n", LL(W));
  if (is_max) buf_puts(&b, "        v = (e > v || e != e) ? e : v;\n");
  else buf_puts(&b, "        v = v + e;\n");
  buf_puts(&b, "      }\n    }\n");
  if (!is_max) {
    /* count_include_pad=True (torch's default): the divisor is always the
     * window size, since without ceil_mode no window reaches past the padding */
    char lit[40];
    buf_printf(&b, "    v = v / %s;\n", cg_flit(lit, (double)a->kernel[0] * a->kernel[1]));
  }
  return cg_flat_finish(c, gr, &p, &b, total);
}

/* Global average pooling: L lanes per (n, c) row (the power of two that
 * covers H*W, at most a warp), reading consecutive elements, so that a warp
 * reads contiguous memory; the lanes' sums meet by shuffles within their
 * L-wide segment. */
int emit_gavgpool(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[0]->shape;
  int64_t HW = xs->d[2] * xs->d[3], total = xs->d[0] * xs->d[1];
  int L = 1, lg = 0;
  while (L < 32 && L < HW) L *= 2, lg++;
  KParams p = {0};
  Buf b = {0};
  const char *x = kp_value(c, &p, n->in[0], 0, "x");
  char lit[40];
  buf_printf(&b, "  int t = %s, i = %s * %d + (t >> %d);\n  float v = 0.0f;\n", D_TID_X, D_BID_X, 256 / L, lg);
  if (L == 1) {
    buf_printf(&b, "  if (i < %lld) v = %s[i];\n", LL(total), x);
  } else {
    buf_printf(&b, "  if (i < %lld) {\n    const float *xp = %s + i * %lld;\n", LL(total), x, LL(HW));
    buf_printf(&b, "    for (int j = t & %d; j < %lld; j += %d) v = v + xp[j];\n  }\n", L - 1, LL(HW), L);
    /* every lane of the block takes part (rows past the end add zeros) */
    buf_printf(&b, "  for (int ws = %d; ws > 0; ws >>= 1) v = v + __shfl_xor_sync(0xffffffffu, v, ws, %d);\n", L / 2, L);
  }
  if (L > 1) buf_printf(&b, "  if (i < %lld && (t & %d) == 0) {\n", LL(total), L - 1);
  else buf_printf(&b, "  if (i < %lld) {\n", LL(total));
  buf_printf(&b, "    v = v / %s;\n", cg_flit(lit, (double)HW));
  return cg_rows_finish(c, gr, &p, &b, total, 256 / L);
}

int emit_batchnorm(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[0]->shape;
  int64_t C = xs->d[1], HW = xs->d[2] * xs->d[3], total = shape_numel(xs);
  KParams p = {0};
  Buf b = {0};
  const char *nm[5];
  static const char *const role[5] = {"x", "weight", "bias", "running_mean", "running_var"};
  for (int j = 0; j < 5; j++) nm[j] = kp_value(c, &p, n->in[j], 0, role[j]);
  char lit[40];
  cg_flat_head(&b, total);
  buf_printf(&b, "    int ch = (i / %lld) %% %lld;\n", LL(HW), LL(C));
  /* inference: running statistics, as torch's eval mode */
  buf_printf(&b, "    float v = (%s[i] - %s[ch]) / sqrtf(%s[ch] + %s) * %s[ch] + %s[ch];\n", nm[0], nm[3], nm[4],
             cg_flit(lit, n->a.eps), nm[1], nm[2]);
  return cg_flat_finish(c, gr, &p, &b, total);
}

int emit_layernorm(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[0]->shape;
  int64_t D = xs->d[xs->rank - 1], rows = shape_numel(xs) / D;
  int T = cg_reduce_threads(D);
  KParams p = {0};
  Buf b = {0};
  const char *x = kp_value(c, &p, n->in[0], 0, "x"), *w = kp_value(c, &p, n->in[1], 0, "weight");
  const char *bb = kp_value(c, &p, n->in[2], 0, "bias");
  char lit[40], dl[40];
  cg_flit(dl, (double)D);
  cg_reduce_shared(&b, "red", T);
  buf_printf(&b, "  int row = %s, t = %s;\n", D_BID_X, D_TID_X);
  buf_printf(&b, "  const float *xr = %s + row * %lld;\n", x, LL(D));
  buf_printf(&b, "  float acc = 0.0f;\n  for (int j = t; j < %lld; j += %d) acc = acc + xr[j];\n", LL(D), T);
  cg_block_reduce(&b, "red", "acc", T, 0, 1);
  buf_printf(&b, "  float mean = acc / %s;\n  acc = 0.0f;\n", dl);
  /* two passes: the variance of centred values, as accurate as torch's Welford */
  buf_printf(&b, "  for (int j = t; j < %lld; j += %d) {\n    float d = xr[j] - mean;\n    acc = fmaf(d, d, acc);\n  }\n",
             LL(D), T);
  cg_block_reduce(&b, "red", "acc", T, 0, 1);
  buf_printf(&b, "  float rstd = 1.0f / sqrtf(acc / %s + %s);\n", dl, cg_flit(lit, n->a.eps));
  buf_printf(&b, "  for (int j = t; j < %lld; j += %d) {\n", LL(D), T);
  buf_printf(&b, "    int i = row * %lld + j;\n", LL(D));
  buf_printf(&b, "    float v = (xr[j] - mean) * rstd * %s[j] + %s[j];\n", w, bb);
  return cg_row_finish(c, gr, &p, &b, rows, T);
}

int emit_softmax(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[0]->shape;
  int ax = n->a.axis;
  int64_t D = xs->d[ax], inner = 1;
  for (int i = ax + 1; i < xs->rank; i++) inner *= xs->d[i];
  int64_t rows = shape_numel(xs) / D;
  int T = cg_reduce_threads(D);
  KParams p = {0};
  Buf b = {0};
  const char *x = kp_value(c, &p, n->in[0], 0, "x");
  cg_reduce_shared(&b, "red", T);
  buf_printf(&b, "  int row = %s, t = %s;\n", D_BID_X, D_TID_X);
  if (inner == 1) buf_printf(&b, "  int base = row * %lld;\n", LL(D));
  else buf_printf(&b, "  int base = (row / %lld) * %lld + row %% %lld;\n", LL(inner), LL(D * inner), LL(inner));
  /* stable: subtract the row maximum before exp.  The maximum propagates NaN
   * and may be infinite; a row holding NaN or +inf then gives NaN everywhere
   * and a row of -inf only NaN (exp(-inf - -inf)), as in PyTorch */
  char ej[48];   /* element j of the row */
  if (inner == 1) snprintf(ej, sizeof ej, "base + j");
  else snprintf(ej, sizeof ej, "base + j * %lld", LL(inner));
  buf_printf(&b, "  float mx = %s;\n  for (int j = t; j < %lld; j += %d) {\n    float e = %s[%s];\n"
             "    if (e > mx || e != e) mx = e;\n  }\n", D_NEG_INF, LL(D), T, x, ej);
  cg_block_reduce(&b, "red", "mx", T, 1, 1);
  buf_printf(&b, "  float acc = 0.0f;\n  for (int j = t; j < %lld; j += %d) acc = acc + expf(%s[%s] - mx);\n",
             LL(D), T, x, ej);
  cg_block_reduce(&b, "red", "acc", T, 0, 1);
  if (n->op == OP_LOG_SOFTMAX) buf_puts(&b, "  float lse = logf(acc);\n");
  buf_printf(&b, "  for (int j = t; j < %lld; j += %d) {\n    int i = %s;\n", LL(D), T, ej);
  if (n->op == OP_LOG_SOFTMAX) buf_printf(&b, "    float v = %s[i] - mx - lse;\n", x);
  else buf_printf(&b, "    float v = expf(%s[i] - mx) / acc;\n", x);
  return cg_row_finish(c, gr, &p, &b, rows, T);
}

int emit_concat(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *ys = &n->out->shape;
  int ax = n->a.axis;
  int64_t DO = ys->d[ax], inner = 1, total = shape_numel(ys);
  for (int i = ax + 1; i < ys->rank; i++) inner *= ys->d[i];
  KParams p = {0};
  Buf b = {0};
  cg_flat_head(&b, total);
  /* element i is (outer, a, r): a along the axis, outer and r around it;
   * a dimension of extent 1 drops out of the arithmetic */
  int has_outer = total > DO * inner, uses_a = n->nin > 1 || DO > 1;
  char decl[3][64];
  int nd = 0;
  if (has_outer) snprintf(decl[nd++], sizeof decl[0], "outer = i / %lld", LL(DO * inner));
  if (uses_a && inner == 1) snprintf(decl[nd++], sizeof decl[0], has_outer ? "a = i %% %lld" : "a = i", LL(DO));
  else if (uses_a && has_outer) snprintf(decl[nd++], sizeof decl[0], "a = (i / %lld) %% %lld", LL(inner), LL(DO));
  else if (uses_a) snprintf(decl[nd++], sizeof decl[0], "a = i / %lld", LL(inner));
  if (inner > 1) snprintf(decl[nd++], sizeof decl[0], "r = i %% %lld", LL(inner));
  for (int k = 0; k < nd; k++) buf_printf(&b, "%s%s", k ? ", " : "    int ", decl[k]);
  buf_puts(&b, nd ? ";\n    float v;\n" : "    float v;\n");
  int64_t off = 0;
  for (int j = 0; j < n->nin; j++) {
    int64_t dj = n->in[j]->shape.d[ax];
    char role[16], aj[48];
    snprintf(role, sizeof role, "x%d", j);
    const char *x = kp_value(c, &p, n->in[j], 0, role);
    if (j == n->nin - 1) buf_puts(&b, n->nin == 1 ? "    " : "    else ");
    else buf_printf(&b, "    %sif (a < %lld) ", j ? "else " : "", LL(off + dj));
    /* x_j[outer][a - off][r] */
    if (off) snprintf(aj, sizeof aj, "a - %lld", LL(off));
    else snprintf(aj, sizeof aj, "a");
    Buf ix = {0};
    int nt = 0;
    cg_term(&ix, &nt, has_outer ? "outer" : "0", dj * inner);
    cg_term(&ix, &nt, dj > 1 ? aj : "0", inner);
    cg_term(&ix, &nt, inner > 1 ? "r" : "0", 1);
    buf_printf(&b, "v = %s[%s];\n", x, nt ? ix.s : "0");
    buf_free(&ix);
    off += dj;
  }
  return cg_flat_finish(c, gr, &p, &b, total);
}

int emit_transpose(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[0]->shape, *ys = &n->out->shape;
  int64_t total = shape_numel(ys), istr[NCC_MAX_RANK], s = 1;
  for (int d = xs->rank - 1; d >= 0; d--) istr[d] = s, s *= xs->d[d];
  KParams p = {0};
  Buf b = {0};
  const char *x = kp_value(c, &p, n->in[0], 0, "x");
  cg_flat_head(&b, total);
  /* the output's coordinates, innermost first, each times its input stride;
   * the outermost needs neither the % nor the division after it */
  int outer = -1;
  for (int d = 0; d < ys->rank && outer < 0; d++)
    if (ys->d[d] != 1) outer = d;
  char ld[96], e[64];   /* an input stored narrow (Value.narrow) loads as a float */
  if (outer < 0) {
    snprintf(e, sizeof e, "%s[0]", x);
    buf_printf(&b, "    float v = %s;\n", cg_ld(ld, sizeof ld, n->in[0], e));
  } else {
    buf_puts(&b, "    int r = i, src = 0;\n");
    for (int d = ys->rank - 1; d >= outer; d--) {
      if (ys->d[d] == 1) continue;
      char st[32] = "", co[64] = "", *e = co;
      if (istr[n->a.list[d]] != 1) snprintf(st, sizeof st, " * %lld", LL(istr[n->a.list[d]]));
      /* the coordinate, or for a reversed axis (Attrs.flip) its mirror */
      if (n->a.flip >> d & 1) e += snprintf(co, sizeof co, "%lld - ", LL(ys->d[d] - 1));
      size_t left = sizeof co - (size_t)(e - co);
      if (d == outer) snprintf(e, left, "r");
      else snprintf(e, left, "r %% %lld", LL(ys->d[d]));
      int paren = *st && strchr(co, ' ');
      buf_printf(&b, "    src += %s%s%s%s;\n", paren ? "(" : "", co, paren ? ")" : "", st);
      if (d != outer) buf_printf(&b, "    r /= %lld;\n", LL(ys->d[d]));
    }
    snprintf(e, sizeof e, "%s[src]", x);
    buf_printf(&b, "    float v = %s;\n", cg_ld(ld, sizeof ld, n->in[0], e));
  }
  return cg_flat_finish(c, gr, &p, &b, total);
}

/* Losses: one block of 256 threads; rows are split over the threads and the
 * partial sums reduced in shared memory; the mean over the batch (or over all
 * elements for mse_loss) as torch's reduction='mean'. */
int emit_loss(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[0]->shape;
  KParams p = {0};
  Buf b = {0};
  char r0[32], r1[32];   /* logits, labels; logp, labels; a, b */
  const char *x = kp_value(c, &p, n->in[0], 0, cg_arg_role(n, 0, r0));
  const char *y = kp_value(c, &p, n->in[1], 0, cg_arg_role(n, 1, r1));
  /* the mean over the rows of the call's batch (nb: m->nb, 1..N; the
   * training step's, or inference's) */
  char nbuf[32];
  const char *nb = cg_step_rows(c, &p, xs->rank ? xs->d[0] : 1, nbuf, sizeof nbuf);
  cg_reduce_shared(&b, "red", 256);
  buf_printf(&b, "  int t = %s;\n  float acc = 0.0f;\n", D_TID_X);
  if (n->op == OP_MSE_LOSS) {
    int64_t per = xs->rank ? shape_numel(xs) / xs->d[0] : 1;
    buf_printf(&b, "  int total = %s * %lld;\n", xs->rank ? nb : "1", LL(per));
    buf_printf(&b, "  for (int j = t; j < total; j += 256) {\n    float d = %s[j] - %s[j];\n    acc = fmaf(d, d, acc);\n  }\n",
               x, y);
    cg_block_reduce(&b, "red", "acc", 256, 0, 1);
    buf_puts(&b, "  float v = acc / (float)total;\n");
  } else {
    int64_t C = xs->d[1];
    buf_printf(&b, "  for (int r = t; r < %s; r += 256) {\n", nb);
    buf_printf(&b, "    const float *xr = %s + r * %lld;\n    int label = %s[r];\n", x, LL(C), y);
    /* a label out of range gives NaN, where torch raises */
    buf_printf(&b, "    float picked = NAN;\n    if (label >= 0 && label < %lld) picked = xr[label];\n", LL(C));
    if (n->op == OP_CROSS_ENTROPY) {
      /* the row maximum as in emit_softmax: NaN propagates */
      buf_printf(&b, "    float mx = %s;\n    for (int j = 0; j < %lld; j++)\n      if (xr[j] > mx || xr[j] != xr[j]) mx = xr[j];\n",
                 D_NEG_INF, LL(C));
      buf_printf(&b, "    float se = 0.0f;\n    for (int j = 0; j < %lld; j++) se = se + expf(xr[j] - mx);\n", LL(C));
      buf_puts(&b, "    acc = acc + (mx + logf(se) - picked);\n  }\n");
    } else {
      buf_puts(&b, "    acc = acc - picked;\n  }\n");
    }
    cg_block_reduce(&b, "red", "acc", 256, 0, 1);
    buf_printf(&b, "  float v = acc / (float)%s;\n", nb);
  }
  buf_puts(&b, "  if (t == 0) {\n");
  if (cg_epilogue(c, gr, &p, &b, "v", "0", 2)) goto fail;
  buf_printf(&b, "    %s[0] = v;\n  }\n", kp_value(c, &p, group_out(gr), 1, "y"));
  char opn[96];
  const char *name = cg_finish(c, cg_opname(gr, NULL, opn), NCC_KF_BARRIER_, &p, &b);
  cg_launch(c, name, &p, 1, 1, 1, 256, 1, 0);
  buf_free(&b);
  return 0;
fail:
  buf_free(&b);
  return -1;
}

/* qscale(w) (int8, load time): per output channel c (w's first dimension)
 * max |w[c, ...]| / 127, 1 where every element is 0 (the channel quantizes to
 * zeros either way).  A thread per channel: it runs once, after the weights
 * load. */
int emit_qscale(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  int64_t C = n->in[0]->shape.d[0], K = shape_numel(&n->in[0]->shape) / C;
  KParams p = {0};
  Buf b = {0};
  const char *w = kp_value(c, &p, n->in[0], 0, "w");
  cg_flat_head(&b, C);
  buf_printf(&b, "    const float *wr = %s + (long long)i * %lld;\n    float m = 0.0f;\n", w, (long long)K);
  buf_printf(&b, "    for (long long k = 0; k < %lld; k++) m = fmaxf(m, fabsf(wr[k]));\n", (long long)K);
  buf_puts(&b, "    float v = m > 0.0f ? m / 127.0f : 1.0f;\n");
  return cg_flat_finish(c, gr, &p, &b, C);
}
