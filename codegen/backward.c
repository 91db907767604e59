/* backward.c — emitters of the training ops autodiff writes (ops.def, the
 * "training" rows): batchnorm with batch statistics and its running-statistics
 * update, dropout masks, the gradient kernels and the optimizer update.
 *
 * Correct and simple first, in the style of kernels.c: static shapes as
 * constants, one thread per output element where the output is elementwise
 * over its input (the reduction, if any, a loop in a fixed order), and one
 * block per output (or per row) with a shared-memory tree where an output
 * sums many elements.  Every sum runs in float in an order fixed by the
 * shapes alone, so a training step is deterministic.  The formulas are
 * PyTorch's autograd ones (docs/generated-code.md, "Training"). */
#include <stdio.h>
#include <string.h>

#include "cg.h"

#define LL(x) ((long long)(x))

/* ---- shared shapes of kernel ---------------------------------------------- */

/* Appends text with two spaces less at the start of every line. */
static void puts_dedent(Buf *b, const char *s) {
  while (*s) {
    size_t l = strcspn(s, "\n");
    size_t k = l >= 2 && s[0] == ' ' && s[1] == ' ' ? 2 : 0;
    buf_printf(b, "%.*s\n", (int)(l - k), s + k);
    s += l + (s[l] == '\n');
  }
}

/* One output element `o` (of nout) that sums R terms: `setup` declares what
 * the term needs from o, `term` computes `float e` for reduction index j
 * (statements indented by 6), `final` is the expression of v from the sum
 * `acc`, linear in acc (a split applies it to each range's sum).  Few terms:
 * a thread per output with a loop; many: a block per output, the threads
 * taking every T-th term and a tree summing theirs.  A split reduction
 * (ir_reduce_split: few outputs, many terms) runs S blocks an output, block
 * (o, sk) summing range sk of j into the workspace, then a second kernel
 * adds each output's S sums in order and runs the epilogue. */
static int reduce_out(Cg *c, const KGroup *gr, KParams *p, const char *setup, const char *term, int64_t R,
                      int64_t nout, const char *final) {
  Buf b = {0};
  int block = R > 64;
  int T = block ? cg_reduce_threads(R) : 256;
  int S = ir_reduce_split(gr->main);
  const char *ws = NULL;
  if (S > 1) {
    NCC_ASSERT(block && R == ir_reduce_len(gr->main) && nout == shape_numel(&group_out(gr)->shape));
    ws = kp_work(c, p, "partial");
  }
  if (block) {
    /* the setup and the loop one level out: the reduction's barriers are reached by every thread */
    cg_reduce_shared(&b, "red", T);
    buf_printf(&b, "  int o = %s, t = %s;\n", D_BID_X, D_TID_X);
    puts_dedent(&b, setup);
    if (S > 1) {
      int64_t span = ir_reduce_split_span(gr->main);
      buf_printf(&b, "  int sk = %s, jb = sk * %lld, je = jb + %lld < %lld ? jb + %lld : %lld;   /* this block's range */\n",
                 D_BID_Y, LL(span), LL(span), LL(R), LL(span), LL(R));
      buf_printf(&b, "  float acc = 0.0f;\n  for (int j = jb + t; j < je; j += %d) {\n", T);
    } else {
      buf_printf(&b, "  float acc = 0.0f;\n  for (int j = t; j < %lld; j += %d) {\n", LL(R), T);
    }
    puts_dedent(&b, term);
    buf_puts(&b, "    acc = acc + e;\n  }\n");
    cg_block_reduce(&b, "red", "acc", T, 0, 1);
    buf_puts(&b, "  if (t == 0) {\n");
  } else {
    buf_printf(&b, "  int o = %s * 256 + %s;\n  if (o < %lld) {\n", D_BID_X, D_TID_X, LL(nout));
    buf_puts(&b, setup);
    buf_printf(&b, "    float acc = 0.0f;\n    for (int j = 0; j < %lld; j++) {\n", LL(R));
    buf_puts(&b, term);
    buf_puts(&b, "      acc = acc + e;\n    }\n");
  }
  buf_printf(&b, "    float v = %s;\n", final);
  int rc = -1;
  char opn[96];
  if (S > 1) {   /* the range's sum to the workspace; the second kernel adds them */
    buf_printf(&b, "    %s[sk * %lld + o] = v;\n  }\n", ws, LL(nout));
    const char *name = cg_finish(c, cg_opname(gr, NULL, opn), NCC_KF_BARRIER_, p, &b);
    cg_launch(c, name, p, nout, S, 1, T, 1, 0);
    KParams q = {0};
    Buf sb = {0};
    const char *w2 = kp_work(c, &q, "partial");
    buf_printf(&sb, "  int o = %s * 256 + %s;\n  if (o < %lld) {\n    float v = %s[o];\n", D_BID_X, D_TID_X, LL(nout), w2);
    buf_printf(&sb, "    for (int r = 1; r < %d; r++) v = v + %s[r * %lld + o];\n", S, w2, LL(nout));
    if (cg_epilogue(c, gr, &q, &sb, "v", "o", 2) == 0) {
      buf_printf(&sb, "    %s[o] = v;\n  }\n", kp_value(c, &q, group_out(gr), 1, "y"));
      name = cg_finish(c, cg_opname(gr, "splitk_sum", opn), 0, &q, &sb);
      cg_launch(c, name, &q, (nout + 255) / 256, 1, 1, 256, 1, 0);
      rc = 0;
    }
    buf_free(&sb);
  } else if (cg_epilogue(c, gr, p, &b, "v", "o", 2) == 0) {
    buf_printf(&b, "    %s[o] = v;\n  }\n", kp_value(c, p, group_out(gr), 1, "y"));
    const char *name = cg_finish(c, cg_opname(gr, NULL, opn), block ? NCC_KF_BARRIER_ : 0, p, &b);
    if (block) cg_launch(c, name, p, nout, 1, 1, T, 1, 0);
    else cg_launch(c, name, p, (nout + 255) / 256, 1, 1, 256, 1, 0);
    rc = 0;
  }
  buf_free(&b);
  return rc;
}

/* ---- batchnorm in training mode ---------------------------------------- */

static void bn_running_stmts(Cg *c, KParams *p, Buf *b, const Node *n, const char *mean, const char *var,
                             const char *idx);

/* The statements of a block of a split batchnorm kernel (ir_bn_split):
 * "int sk = ..., jb = ..., je = ...;", its range [jb, je) of the channel's
 * m elements (je <= jb: an empty range, past the step's rows) */
static void bn_range(Buf *b, const Node *n) {
  int64_t span = ir_bn_split_span(n);
  buf_printf(b, "  int sk = %s, jb = sk * %lld, je = jb + %lld < m ? jb + %lld : m;   /* this block's range */\n", D_BID_Y,
             LL(span), LL(span), LL(span));
}

/* bn_stats(x[N, C, H, W]) -> [2, C]: one block per channel, the mean, then
 * the biased variance of the centred values (two passes, as emit_layernorm).
 * Split (ir_bn_split): block (ch, sk) makes the two passes over its range
 * and writes the range's mean and sum of squared deviations to the
 * workspace; a second kernel, a thread a channel, combines the ranges in
 * order (Chan's formula: the mean of the range means weighted by their
 * counts, then the ranges' sums of squares plus count x (range mean - mean)^2). */
int emit_bn_stats(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[0]->shape;
  int64_t N = xs->d[0], C = xs->d[1], HW = xs->d[2] * xs->d[3], M = N * HW;
  int T = cg_reduce_threads(M), S = ir_bn_split(n);
  KParams p = {0};
  Buf b = {0};
  const char *x = kp_value(c, &p, n->in[0], 0, "x");
  /* the step's batch (m->nb, 1..N; cg_step_rows): the statistics of its rows alone */
  char nbuf[32];
  const char *nb = cg_step_rows(c, &p, N, nbuf, sizeof nbuf);
  cg_reduce_shared(&b, "red", T);
  buf_printf(&b, "  int ch = %s, t = %s, m = %s * %lld;\n", D_BID_X, D_TID_X, nb, LL(HW));
  buf_printf(&b, "  const float *xc = %s + ch * %lld;\n", x, LL(HW));
  /* element j of the channel: image j / HW, position j % HW */
  char ej[96], lo[8] = "t", hi[8] = "m", cnt[40] = "(float)m";
  snprintf(ej, sizeof ej, "xc[(j / %lld) * %lld + j %% %lld]", LL(HW), LL(C * HW), LL(HW));
  if (S > 1) {
    bn_range(&b, n);
    snprintf(lo, sizeof lo, "jb + t");
    snprintf(hi, sizeof hi, "je");
    snprintf(cnt, sizeof cnt, "(float)(je > jb ? je - jb : 1)");
  }
  buf_printf(&b, "  float acc = 0.0f;\n  for (int j = %s; j < %s; j += %d) acc = acc + %s;\n", lo, hi, T, ej);
  cg_block_reduce(&b, "red", "acc", T, 0, 1);
  buf_printf(&b, "  float mean = acc / %s;\n  acc = 0.0f;\n", cnt);
  buf_printf(&b, "  for (int j = %s; j < %s; j += %d) {\n    float d = %s - mean;\n    acc = fmaf(d, d, acc);\n  }\n", lo,
             hi, T, ej);
  cg_block_reduce(&b, "red", "acc", T, 0, 1);
  NCC_ASSERT(gr->nepi == 0);   /* two rows of different meaning: no elementwise epilogue */
  char opn[96];
  if (S > 1) {   /* the range's mean and sum of squares; the second kernel combines them */
    const char *ws = kp_work(c, &p, "partial");
    buf_printf(&b, "  if (t == 0) {\n    %s[(sk * %lld + ch) * 2] = mean;\n    %s[(sk * %lld + ch) * 2 + 1] = acc;\n  }\n", ws,
               LL(C), ws, LL(C));
    const char *name = cg_finish(c, cg_opname(gr, NULL, opn), NCC_KF_BARRIER_, &p, &b);
    cg_launch(c, name, &p, C, S, 1, T, 1, 0);
    buf_free(&b);
    KParams q = {0};
    const char *w2 = kp_work(c, &q, "partial");
    nb = cg_step_rows(c, &q, N, nbuf, sizeof nbuf);
    int64_t span = ir_bn_split_span(n);
    buf_printf(&b, "  int ch = %s * 256 + %s;\n  if (ch < %lld) {\n    int m = %s * %lld;\n", D_BID_X, D_TID_X, LL(C), nb,
               LL(HW));
    /* range r's count: its span, less past the step's m elements */
    char cr[96];
    snprintf(cr, sizeof cr, "(float)(m - r * %lld < %lld ? (m - r * %lld > 0 ? m - r * %lld : 0) : %lld)", LL(span),
             LL(span), LL(span), LL(span), LL(span));
    buf_printf(&b, "    float s = 0.0f, q = 0.0f;\n    for (int r = 0; r < %d; r++) s = fmaf(%s, %s[(r * %lld + ch) * 2], s);\n",
               S, cr, w2, LL(C));
    buf_puts(&b, "    float mean = s / (float)m;\n");
    buf_printf(&b, "    for (int r = 0; r < %d; r++) {\n      float d = %s[(r * %lld + ch) * 2] - mean;\n"
                   "      q = q + %s[(r * %lld + ch) * 2 + 1] + %s * d * d;\n    }\n",
               S, w2, LL(C), w2, LL(C), cr);
    const char *y = kp_value(c, &q, group_out(gr), 1, "y");
    buf_printf(&b, "    float var = q / (float)m;\n    %s[ch] = mean;\n    %s[%lld + ch] = var;\n", y, y, LL(C));
    for (int s = 0; s < gr->nside; s++) {   /* bn_running (bn-sums): this thread has the channel's statistics */
      NCC_ASSERT(gr->side[s]->op == OP_BN_RUNNING);
      bn_running_stmts(c, &q, &b, gr->side[s], "mean", "var", "ch");
    }
    buf_puts(&b, "  }\n");
    name = cg_finish(c, cg_opname(gr, "splitk_sum", opn), 0, &q, &b);
    cg_launch(c, name, &q, (C + 255) / 256, 1, 1, 256, 1, 0);
    buf_free(&b);
    return 0;
  }
  const char *y = kp_value(c, &p, group_out(gr), 1, "y");
  buf_printf(&b, "  if (t == 0) {\n    float var = acc / (float)m;\n    %s[ch] = mean;\n    %s[%lld + ch] = var;\n", y, y,
             LL(C));
  for (int s = 0; s < gr->nside; s++) {   /* bn_running (bn-sums): this block has the channel's statistics */
    NCC_ASSERT(gr->side[s]->op == OP_BN_RUNNING);
    bn_running_stmts(c, &p, &b, gr->side[s], "mean", "var", "ch");
  }
  buf_puts(&b, "  }\n");
  const char *name = cg_finish(c, cg_opname(gr, NULL, opn), NCC_KF_BARRIER_, &p, &b);
  cg_launch(c, name, &p, C, 1, 1, T, 1, 0);
  buf_free(&b);
  return 0;
}

/* bn_train(x, weight, bias, stats): the batch statistics in eval's formula. */
int emit_bn_train(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[0]->shape;
  int64_t C = xs->d[1], HW = xs->d[2] * xs->d[3], total = shape_numel(xs);
  KParams p = {0};
  Buf b = {0};
  static const char *const role[4] = {"x", "weight", "bias", "stats"};
  const char *nm[4];
  for (int j = 0; j < 4; j++) nm[j] = kp_value(c, &p, n->in[j], 0, role[j]);
  char lit[40];
  cg_flat_head(&b, total);
  buf_printf(&b, "    int ch = (i / %lld) %% %lld;\n", LL(HW), LL(C));
  buf_printf(&b, "    float v = (%s[i] - %s[ch]) / sqrtf(%s[%lld + ch] + %s) * %s[ch] + %s[ch];\n", nm[0], nm[3], nm[3],
             LL(C), cg_flit(lit, n->a.eps), nm[1], nm[2]);
  return cg_flat_finish(c, gr, &p, &b, total);
}

/* bn_running's statements: torch's update of running_mean and running_var
 * in place from the batch's mean and biased variance (expressions), channel
 * idx, the variance unbiased by n / (n - 1), n = N * H * W. */
static void bn_running_stmts(Cg *c, KParams *p, Buf *b, const Node *n, const char *mean, const char *var,
                             const char *idx) {
  Value *stats = n->in[0];
  NCC_ASSERT(stats->def && stats->def->nin >= 1);
  const Shape *xs = &stats->def->in[0]->shape;
  int64_t HW = xs->d[2] * xs->d[3];
  const char *rm = kp_value(c, p, n->in[1], 1, "running_mean");
  const char *rv = kp_value(c, p, n->in[2], 1, "running_var");
  /* n = nb * H * W, the step's count (a parameter: the enclosing kernel may have it) */
  char nbuf[32];
  const char *nb = cg_step_rows(c, p, xs->d[0], nbuf, sizeof nbuf);
  char m[40], m1[40];
  cg_flit(m, n->a.momentum);
  cg_flit(m1, 1.0 - n->a.momentum);
  buf_printf(b, "    %s[%s] = %s * %s + %s * %s[%s];\n", rm, idx, m, mean, m1, rm, idx);
  /* the unbiased variance: times n / (n - 1), rounded from double as a literal would be */
  buf_printf(b, "    {\n      long long cnt = (long long)%s * %lld;\n"
                "      float unb = cnt > 1 ? (float)((double)cnt / (double)(cnt - 1)) : 1.0f;\n"
                "      %s[%s] = %s * (%s * unb) + %s * %s[%s];\n    }\n", nb, LL(HW), rv, idx, m, var, m1, rv, idx);
}

/* bn_running(stats, running_mean, running_var): the update in its own
 * kernel (the bn-sums rule puts it in bn_stats's).  Its own output is a
 * dummy nobody reads: not written. */
int emit_bn_running(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  Value *stats = n->in[0];
  int64_t C = stats->shape.d[1];
  KParams p = {0};
  Buf b = {0};
  const char *st = kp_value(c, &p, stats, 0, "stats");
  char mean[64], var[96];
  snprintf(mean, sizeof mean, "%s[i]", st);
  snprintf(var, sizeof var, "%s[%lld + i]", st, LL(C));
  cg_flat_head(&b, C);
  bn_running_stmts(c, &p, &b, n, mean, var, "i");
  buf_puts(&b, "  }\n");
  char opn[96];
  const char *name = cg_finish(c, cg_opname(gr, NULL, opn), 0, &p, &b);
  cg_launch(c, name, &p, (C + 255) / 256, 1, 1, 256, 1, 0);
  buf_free(&b);
  return 0;
}

/* ---- dropout ----------------------------------------------------------- */

/* dropout_apply(x): x * mask / (1 - p), the mask element kept iff
 * ncc_philox_uniform(seed, step, slot, index) >= p: index is the element's
 * (dropout2d, axis 1: its (n, c) plane's), so the same op on the gradient
 * drops the same elements. */
int emit_dropout(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[0]->shape;
  int64_t total = shape_numel(xs), inner = 1;
  if (n->a.axis == 1)
    for (int d = 2; d < xs->rank; d++) inner *= xs->d[d];
  KParams p = {0};
  Buf b = {0};
  char pl[40], sc[40];
  if (n->a.p >= 1.0) {
    cg_flat_head(&b, total);
    buf_puts(&b, "    float v = 0.0f;\n");   /* torch: p = 1 zeroes everything */
  } else {
    const char *x = kp_value(c, &p, n->in[0], 0, "x");
    const char *seed = kp_int(&p, "seed", "m->seed32"), *step = kp_int(&p, "step", "m->step32");
    cg_flat_head(&b, total);
    char idx[64];
    if (inner > 1) snprintf(idx, sizeof idx, "i / %lld", LL(inner));
    else snprintf(idx, sizeof idx, "i");
    buf_printf(&b, "    float u = ncc_philox_uniform((unsigned)%s, (unsigned)%s, %du, (unsigned)(%s));\n", seed, step,
               n->a.slot, idx);
    buf_printf(&b, "    float v = u >= %s ? %s[i] * %s : 0.0f;\n", cg_flit(pl, n->a.p), x,
               cg_flit(sc, 1.0 / (1.0 - n->a.p)));
  }
  return cg_flat_finish(c, gr, &p, &b, total);
}

/* ---- convolution and linear -------------------------------------------- */

/* One axis of a transposed window: the output position o whose window puts
 * tap k on input position `ip`: o = (ip + pad - k * dil) / stride when that
 * divides and lands inside [0, O). */
static void window_back(Buf *b, int ind, const char *o, const char *ip, const char *k, int stride, int pad, int dil,
                        int64_t O) {
  char t[160];
  Buf e = {0};
  buf_puts(&e, ip);
  if (pad) buf_printf(&e, " + %d", pad);
  if (dil == 1) buf_printf(&e, " - %s", k);
  else buf_printf(&e, " - %s * %d", k, dil);
  snprintf(t, sizeof t, "%s", e.s);
  buf_free(&e);
  cg_ind(b, ind);
  if (stride == 1) {
    buf_printf(b, "int %s = %s;\n", o, t);
    cg_ind(b, ind);
    buf_printf(b, "if (%s < 0 || %s >= %lld) continue;\n", o, o, LL(O));
  } else {
    buf_printf(b, "int %s_t = %s;\n", o, t);
    cg_ind(b, ind);
    buf_printf(b, "if (%s_t < 0 || %s_t %% %d != 0) continue;\n", o, o, stride);
    cg_ind(b, ind);
    buf_printf(b, "int %s = %s_t / %d;\n", o, o, stride);
    cg_ind(b, ind);
    buf_printf(b, "if (%s >= %lld) continue;\n", o, LL(O));
  }
}

/* e, or e rounded by rnd (cg_operand_round: a gradient's GEMM at tf32 or
 * bf16 rounds both operands as it loads them, like the forward's GEMMs) */
static const char *rounded(char *buf, size_t n, const char *rnd, const char *e) {
  if (!rnd) snprintf(buf, n, "%s", e);
  else snprintf(buf, n, "%s(%s)", rnd, e);
  return buf;
}

/* conv2d_bwd_data(dy[N, O, OH, OW], weight[O, C/g, KH, KW]) -> dx[N, C, H, W]:
 * per dx element, the sum over its group's output channels and the taps
 * whose strided window reaches it. */
int emit_conv2d_bwd_data(Cg *c, const KGroup *gr) {
  if (ir_grad_gemm(gr->main)) return emit_grad_gemm(c, gr);   /* a tiled GEMM (codegen/gemm.c) */
  Node *n = gr->main;
  const Attrs *a = &n->a;
  const Shape *ds = &n->in[0]->shape, *ws = &n->in[1]->shape, *xs = &n->out->shape;
  int64_t C = xs->d[1], H = xs->d[2], W = xs->d[3], O = ds->d[1], OH = ds->d[2], OW = ds->d[3];
  int64_t G = a->groups, Cg = C / G, Og = O / G, KH = ws->d[2], KW = ws->d[3];
  NCC_ASSERT(ws->d[1] == Cg && ws->d[0] == O && !a->wtap);   /* (a transposed weight: a GEMM's, M >= 8) */
  int64_t total = shape_numel(xs);
  KParams p = {0};
  Buf b = {0};
  const char *dy = kp_value(c, &p, n->in[0], 0, "dy"), *w = kp_value(c, &p, n->in[1], 0, "weight");
  cg_flat_head(&b, total);
  buf_printf(&b, "    int iw = i %% %lld, ih = (i / %lld) %% %lld, ci = (i / %lld) %% %lld, nb = i / %lld;\n", LL(W),
             LL(W), LL(H), LL(H * W), LL(C), LL(C * H * W));
  if (G > 1) buf_printf(&b, "    int o0 = (ci / %lld) * %lld, cl = ci %% %lld;\n", LL(Cg), LL(Og), LL(Cg));
  else buf_puts(&b, "    int o0 = 0, cl = ci;\n");
  buf_puts(&b, "    float v = 0.0f;\n");
  buf_printf(&b, "    for (int oc = o0; oc < o0 + %lld; oc++) {\n", LL(Og));
  buf_printf(&b, "      const float *dyp = %s + (nb * %lld + oc) * %lld;\n", dy, LL(O), LL(OH * OW));
  {
    char i0[200];
    cg_lin(i0, sizeof i0, "oc", Cg, "cl");
    if (KH * KW == 1) buf_printf(&b, "      const float *wp = %s + %s;\n", w, i0);
    else buf_printf(&b, "      const float *wp = %s + (%s) * %lld;\n", w, i0, LL(KH * KW));
  }
  buf_printf(&b, "      for (int kh = 0; kh < %lld; kh++) {\n", LL(KH));
  window_back(&b, 4, "oh", "ih", "kh", a->stride[0], a->pad[0], a->dilation[0], OH);
  buf_printf(&b, "        for (int kw = 0; kw < %lld; kw++) {\n", LL(KW));
  window_back(&b, 5, "ow", "iw", "kw", a->stride[1], a->pad[1], a->dilation[1], OW);
  {
    char i0[200], i1[200], e0[300], e1[300], r0[320], r1[320];
    const char *rnd = cg_operand_round(n);
    snprintf(e0, sizeof e0, "dyp[%s]", cg_lin(i0, sizeof i0, "oh", OW, "ow"));
    snprintf(e1, sizeof e1, "wp[%s]", cg_lin(i1, sizeof i1, "kh", KW, "kw"));
    buf_printf(&b, "          v = fmaf(%s, %s, v);\n", rounded(r0, sizeof r0, rnd, e0), rounded(r1, sizeof r1, rnd, e1));
  }
  buf_puts(&b, "        }\n      }\n    }\n");
  return cg_flat_finish(c, gr, &p, &b, total);
}

/* conv2d_bwd_weight(dy, x) -> dweight[O, C/g, KH, KW]: per weight element
 * the sum over images and output positions of dy * the input under the tap. */
int emit_conv2d_bwd_weight(Cg *c, const KGroup *gr) {
  if (ir_grad_gemm(gr->main)) return emit_grad_gemm(c, gr);   /* a tiled GEMM (codegen/gemm.c) */
  Node *n = gr->main;
  const Attrs *a = &n->a;
  const Shape *ds = &n->in[0]->shape, *xs = &n->in[1]->shape, *ws = &n->out->shape;
  int64_t N = xs->d[0], C = xs->d[1], H = xs->d[2], W = xs->d[3], O = ds->d[1], OH = ds->d[2], OW = ds->d[3];
  int64_t G = a->groups, Cg = C / G, Og = O / G, KH = ws->d[2], KW = ws->d[3];
  KParams p = {0};
  const char *dy = kp_value(c, &p, n->in[0], 0, "dy"), *x = kp_value(c, &p, n->in[1], 0, "x");
  Buf s = {0}, t = {0};
  char d0[96], d1[96], d2[96], d3[96], ix[160], i0[200], i1[200], i2[200];
  buf_printf(&s, "    int kw = %s, kh = %s, cl = %s, oc = %s;\n", cg_digit(d0, sizeof d0, "o", 1, KW),
             cg_digit(d1, sizeof d1, "o", KW, KH), cg_digit(d2, sizeof d2, "o", KH * KW, Cg),
             cg_digit(d3, sizeof d3, "o", Cg * KH * KW, 0));
  if (G > 1) buf_printf(&s, "    int ci = (oc / %lld) * %lld + cl;\n", LL(Og), LL(Cg));
  else buf_puts(&s, "    int ci = cl;\n");
  buf_printf(&t, "      int ow = %s, oh = %s, nb = %s;\n", cg_digit(d0, sizeof d0, "j", 1, OW),
             cg_digit(d1, sizeof d1, "j", OW, OH), cg_digit(d2, sizeof d2, "j", OH * OW, 0));
  cg_window_index(ix, sizeof ix, "oh", a->stride[0], a->pad[0], "kh", a->dilation[0]);
  buf_printf(&t, "      int ih = %s;\n", ix);
  cg_window_index(ix, sizeof ix, "ow", a->stride[1], a->pad[1], "kw", a->dilation[1]);
  buf_printf(&t, "      int iw = %s;\n", ix);
  const char *rnd = cg_operand_round(n);
  char ex[400], rx[420];
  cg_lin(i0, sizeof i0, "nb", O, "oc");
  cg_lin(i1, sizeof i1, i0, OH, "oh");
  snprintf(ex, sizeof ex, "%s[%s]", dy, cg_lin(i2, sizeof i2, i1, OW, "ow"));
  buf_printf(&t, "      float e = %s;\n", rounded(rx, sizeof rx, rnd, ex));
  cg_lin(i0, sizeof i0, "nb", C, "ci");
  cg_lin(i1, sizeof i1, i0, H, "ih");
  cg_lin(i2, sizeof i2, i1, W, "iw");
  snprintf(ex, sizeof ex, "%s[%s]", x, i2);
  rounded(rx, sizeof rx, rnd, ex);
  if (a->pad[0] || a->pad[1])
    buf_printf(&t, "      e = (ih < 0 || ih >= %lld || iw < 0 || iw >= %lld) ? 0.0f : e * %s;\n", LL(H), LL(W), rx);
  else buf_printf(&t, "      e = e * %s;\n", rx);
  int rc = reduce_out(c, gr, &p, s.s, t.s, N * OH * OW, shape_numel(ws), "acc");
  buf_free(&s);
  buf_free(&t);
  return rc;
}

/* linear_bwd_weight(dy[N, O], x[N, I]) -> dweight[O, I] = dy^T x. */
int emit_linear_bwd_weight(Cg *c, const KGroup *gr) {
  if (ir_grad_gemm(gr->main)) return emit_grad_gemm(c, gr);   /* a tiled GEMM (codegen/gemm.c) */
  Node *n = gr->main;
  int64_t N = n->in[0]->shape.d[0], O = n->in[0]->shape.d[1], I = n->in[1]->shape.d[1];
  KParams p = {0};
  const char *dy = kp_value(c, &p, n->in[0], 0, "dy"), *x = kp_value(c, &p, n->in[1], 0, "x");
  Buf s = {0}, t = {0};
  buf_printf(&s, "    int oi = o / %lld, ii = o %% %lld;\n", LL(I), LL(I));
  {
    const char *rnd = cg_operand_round(n);
    char e0[200], e1[200], r0[220], r1[220];
    snprintf(e0, sizeof e0, "%s[j * %lld + oi]", dy, LL(O));
    snprintf(e1, sizeof e1, "%s[j * %lld + ii]", x, LL(I));
    buf_printf(&t, "      float e = %s * %s;\n", rounded(r0, sizeof r0, rnd, e0), rounded(r1, sizeof r1, rnd, e1));
  }
  int rc = reduce_out(c, gr, &p, s.s, t.s, N, O * I, "acc");
  buf_free(&s);
  buf_free(&t);
  return rc;
}

/* sum_to(x) -> attrs.list aligned at dim attrs.axis of x: every other dim of
 * x is summed, and the aligned dims where the target is 1.  Output element o
 * fixes the kept dims; reduction index j runs over the summed ones in
 * row-major order. */
int emit_sum_to(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[0]->shape;
  int ax = n->a.axis, nl = n->a.nlist;
  int64_t str[NCC_MAX_RANK], s1 = 1;
  for (int d = xs->rank - 1; d >= 0; d--) str[d] = s1, s1 *= xs->d[d];
  int kept[NCC_MAX_RANK];
  int64_t R = 1, nout = 1;
  for (int d = 0; d < xs->rank; d++) {
    kept[d] = d >= ax && d < ax + nl && n->a.list[d - ax] == xs->d[d];
    if (kept[d]) nout *= xs->d[d];
    else R *= xs->d[d];
  }
  KParams p = {0};
  const char *x = kp_value(c, &p, n->in[0], 0, "x");
  /* base: o's offset in x; off: j's */
  Buf s = {0}, t = {0}, bs = {0}, ts = {0};
  int nb = 0, nt = 0;
  int64_t ko = 1, kj = 1;   /* the inner extent of the kept / summed dims seen so far */
  for (int d = xs->rank - 1; d >= 0; d--) {
    if (xs->d[d] == 1) continue;
    const char *var = kept[d] ? "o" : "j";
    int64_t *inner = kept[d] ? &ko : &kj;
    int64_t rest = kept[d] ? nout : R;
    char e[96];
    if (*inner == 1 && rest == xs->d[d]) snprintf(e, sizeof e, "%s", var);
    else if (*inner == 1) snprintf(e, sizeof e, "%s %% %lld", var, LL(xs->d[d]));
    else if (*inner * xs->d[d] == rest) snprintf(e, sizeof e, "%s / %lld", var, LL(*inner));
    else snprintf(e, sizeof e, "(%s / %lld) %% %lld", var, LL(*inner), LL(xs->d[d]));
    if (kept[d]) cg_term(&bs, &nb, e, str[d]);
    else cg_term(&ts, &nt, e, str[d]);
    *inner *= xs->d[d];
  }
  buf_printf(&s, "    int base = %s;\n", nb ? bs.s : "0");
  if (nt) buf_printf(&t, "      float e = %s[base + %s];\n", x, ts.s);
  else buf_printf(&t, "      float e = %s[base];\n", x);
  int rc = reduce_out(c, gr, &p, s.s, t.s, R, nout, "acc");
  buf_free(&s);
  buf_free(&t);
  buf_free(&bs);
  buf_free(&ts);
  return rc;
}

/* ---- pooling ----------------------------------------------------------- */

/* "for (int k = 0; k < K; k++) {", then the window's index along one axis
 * into `var` (output index o), skipped where it falls in the padding */
static void window_axis(Buf *b, int ind, const char *k, int K, const char *var, const char *o, int stride, int pad,
                        int dil, int64_t extent) {
  char ix[160];
  cg_ind(b, ind);
  buf_printf(b, "for (int %s = 0; %s < %d; %s++) {\n", k, k, K, k);
  cg_window_index(ix, sizeof ix, o, stride, pad, k, dil);
  cg_ind(b, ind + 1);
  buf_printf(b, "int %s = %s;\n", var, ix);
  if (pad) {
    cg_ind(b, ind + 1);
    buf_printf(b, "if (%s < 0 || %s >= %lld) continue;\n", var, var, LL(extent));
  }
}
/* The argmax of window (oh, ow) of plane xp into `best` (declared by the
 * caller), as emit_pool finds it: the first maximum in row-major order, a
 * NaN replacing the running maximum, padding skipped; `best` is
 * hh * W + wc, or wh * KW + ww (the place in the window) where `in_window`.
 * -1 when the window holds no element of x. */
static void window_argmax(Buf *b, const Attrs *a, int64_t H, int64_t W, int ind, int in_window) {
  cg_ind(b, ind);
  buf_puts(b, "float mx = 0.0f;\n");
  window_axis(b, ind, "wh", a->kernel[0], "hh", "oh", a->stride[0], a->pad[0], a->dilation[0], H);
  window_axis(b, ind + 1, "ww", a->kernel[1], "wc", "ow", a->stride[1], a->pad[1], a->dilation[1], W);
  cg_ind(b, ind + 2);
  buf_printf(b, "float e = xp[hh * %lld + wc];\n", LL(W));
  cg_ind(b, ind + 2);
  buf_puts(b, "if (best < 0 || e > mx || e != e) {\n");
  cg_ind(b, ind + 3);
  buf_puts(b, "mx = e;\n");
  cg_ind(b, ind + 3);
  if (in_window) buf_printf(b, "best = wh * %d + ww;\n", a->kernel[1]);
  else buf_printf(b, "best = hh * %lld + wc;\n", LL(W));
  for (int k = 2; k >= 0; k--) {
    cg_ind(b, ind + k);
    buf_puts(b, "}\n");
  }
}

/* The kernel of ir_pool_band_rows: block `band + bands * plane` takes rows
 * [ih0, ih0 + R) of one plane of x.  The windows covering them, rows oh0 to
 * oh1 of dy, have their argmax found once, a byte each in shared memory (its
 * place in the window; 255 for none); after the barrier each element of the
 * rows sums dy over its windows, in the element kernel's order (kh, kw), where
 * the window's byte names it, so the sums are the element kernel's bits. */
static int pool_bwd_band(Cg *c, const KGroup *gr, KParams *p, Buf *b, const char *dy, const char *x) {
  Node *n = gr->main;
  const Attrs *a = &n->a;
  const Shape *ds = &n->in[0]->shape, *xs = &n->in[1]->shape;
  int64_t H = xs->d[2], W = xs->d[3], OH = ds->d[2], OW = ds->d[3], R = ir_pool_band_rows(n);
  int64_t bands = (H + R - 1) / R, planes = xs->d[0] * xs->d[1];
  int s = a->stride[0], KW = a->kernel[1];
  buf_printf(b, "  %s unsigned char am[%lld];\n", D_SHARED, LL(ir_pool_band_windows(a, R) * OW));
  buf_printf(b, "  int t = %s, band = %s %% %lld, nc = %s / %lld;\n", D_TID_X, D_BID_X, LL(bands), D_BID_X, LL(bands));
  buf_printf(b, "  int ih0 = band * %lld;\n", LL(R));
  /* the first window covering row ih0 and the last covering row ih0 + R - 1 */
  int64_t lo = a->pad[0] - (int64_t)(a->kernel[0] - 1) * a->dilation[0];
  buf_printf(b, "  int lo = ih0 %c %lld;\n", lo < 0 ? '-' : '+', LL(lo < 0 ? -lo : lo));
  buf_printf(b, "  int oh0 = lo <= 0 ? 0 : (lo + %d) / %d;\n", s - 1, s);
  buf_printf(b, "  int oh1 = (ih0 + %lld) / %d;\n  if (oh1 > %lld) oh1 = %lld;\n", LL(R - 1 + a->pad[0]), s,
             LL(OH - 1), LL(OH - 1));
  buf_printf(b, "  const float *xp = %s + nc * %lld;\n  const float *dyp = %s + nc * %lld;\n", x, LL(H * W), dy,
             LL(OH * OW));
  buf_printf(b, "  for (int w = t; w < (oh1 - oh0 + 1) * %lld; w += 256) {\n", LL(OW));
  buf_printf(b, "    int oh = oh0 + w / %lld, ow = w %% %lld;\n    int best = -1;\n", LL(OW), LL(OW));
  window_argmax(b, a, H, W, 2, 1);
  buf_puts(b, "    am[w] = best < 0 ? 255 : (unsigned char)best;\n  }\n  __syncthreads();\n");
  buf_printf(b, "  for (int e = t; e < %lld; e += 256) {\n", LL(R * W));
  buf_printf(b, "    int ih = ih0 + e / %lld, iw = e %% %lld;\n    if (ih >= %lld) break;\n", LL(W), LL(W), LL(H));
  buf_printf(b, "    int i = nc * %lld + ih * %lld + iw;\n    float v = 0.0f;\n", LL(H * W), LL(W));
  buf_printf(b, "    for (int kh = 0; kh < %d; kh++) {\n", a->kernel[0]);
  window_back(b, 3, "oh", "ih", "kh", a->stride[0], a->pad[0], a->dilation[0], OH);
  buf_printf(b, "      for (int kw = 0; kw < %d; kw++) {\n", KW);
  window_back(b, 4, "ow", "iw", "kw", a->stride[1], a->pad[1], a->dilation[1], OW);
  buf_printf(b, "        if (am[(oh - oh0) * %lld + ow] == kh * %d + kw) v = v + dyp[oh * %lld + ow];\n      }\n    }\n",
             LL(OW), KW, LL(OW));
  int rc = -1;
  if (cg_epilogue(c, gr, p, b, "v", "i", 2) == 0) {
    char st[64], opn[96];
    buf_printf(b, "    %s[i] = %s;\n  }\n", kp_value(c, p, group_out(gr), 1, "y"), cg_st(st, sizeof st, group_out(gr), "v"));
    const char *name = cg_finish(c, cg_opname(gr, NULL, opn), NCC_KF_BARRIER_, p, b);
    cg_launch(c, name, p, bands * planes, 1, 1, 256, 1, 0);
    rc = 0;
  }
  buf_free(b);
  return rc;
}

/* maxpool2d_bwd(dy, x) -> dx: each window's gradient goes to its argmax, as
 * emit_pool finds it (the first maximum in row-major order, a NaN replacing
 * the running maximum, the first element inside the padding when the window
 * holds only -inf), so dx element (ih, iw) sums dy over the windows that
 * cover it and pick it. */
int emit_maxpool2d_bwd(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Attrs *a = &n->a;
  const Shape *ds = &n->in[0]->shape, *xs = &n->in[1]->shape;
  int64_t H = xs->d[2], W = xs->d[3], OH = ds->d[2], OW = ds->d[3], total = shape_numel(xs);
  KParams p = {0};
  Buf b = {0};
  const char *dy = kp_value(c, &p, n->in[0], 0, "dy"), *x = kp_value(c, &p, n->in[1], 0, "x");
  if (ir_pool_tiles(n)) {
    /* windows that tile x: a thread a window, its argmax as above (the
     * first maximum in row-major order, a NaN replacing it), then each of
     * its elements' gradient, dy at the argmax and 0 elsewhere */
    int KH = a->kernel[0], KW = a->kernel[1];
    int64_t wins = shape_numel(ds);
    buf_printf(&b, "  int w = %s * 256 + %s;\n  if (w < %lld) {\n", D_BID_X, D_TID_X, LL(wins));
    buf_printf(&b, "    int ow = w %% %lld, oh = (w / %lld) %% %lld, nc = w / %lld;\n", LL(OW), LL(OW), LL(OH), LL(OH * OW));
    buf_printf(&b, "    int base = nc * %lld + oh * %lld + ow * %d;\n", LL(H * W), LL(KH * W), KW);
    buf_printf(&b, "    int best = -1;\n    float mx = 0.0f;\n    for (int wh = 0; wh < %d; wh++) {\n", KH);
    buf_printf(&b, "      for (int ww = 0; ww < %d; ww++) {\n        float e = %s[base + wh * %lld + ww];\n", KW, x, LL(W));
    buf_printf(&b, "        if (best < 0 || e > mx || e != e) {\n          mx = e;\n          best = wh * %d + ww;\n"
                   "        }\n      }\n    }\n", KW);
    buf_printf(&b, "    float g = %s[w];\n    for (int wh = 0; wh < %d; wh++) {\n", dy, KH);
    buf_printf(&b, "      for (int ww = 0; ww < %d; ww++) {\n        int i = base + wh * %lld + ww;\n", KW, LL(W));
    /* 0.0f + g: the bits of the element kernel's sum (a -0.0 gradient becomes 0.0) */
    buf_printf(&b, "        float v = best == wh * %d + ww ? 0.0f + g : 0.0f;\n", KW);
    int rc = -1;
    if (cg_epilogue(c, gr, &p, &b, "v", "i", 4) == 0) {
      char st[64], opn[96];
      buf_printf(&b, "        %s[i] = %s;\n      }\n    }\n  }\n", kp_value(c, &p, group_out(gr), 1, "y"),
                 cg_st(st, sizeof st, group_out(gr), "v"));
      const char *name = cg_finish(c, cg_opname(gr, NULL, opn), 0, &p, &b);
      cg_launch(c, name, &p, (wins + 255) / 256, 1, 1, 256, 1, 0);
      rc = 0;
    }
    buf_free(&b);
    return rc;
  }
  if (ir_pool_band_rows(n)) return pool_bwd_band(c, gr, &p, &b, dy, x);
  cg_flat_head(&b, total);
  buf_printf(&b, "    int iw = i %% %lld, ih = (i / %lld) %% %lld, nc = i / %lld;\n", LL(W), LL(W), LL(H), LL(H * W));
  buf_printf(&b, "    const float *xp = %s + nc * %lld;\n    const float *dyp = %s + nc * %lld;\n", x, LL(H * W), dy,
             LL(OH * OW));
  buf_puts(&b, "    float v = 0.0f;\n");
  buf_printf(&b, "    for (int kh = 0; kh < %d; kh++) {\n", a->kernel[0]);
  window_back(&b, 3, "oh", "ih", "kh", a->stride[0], a->pad[0], a->dilation[0], OH);
  buf_printf(&b, "      for (int kw = 0; kw < %d; kw++) {\n", a->kernel[1]);
  window_back(&b, 4, "ow", "iw", "kw", a->stride[1], a->pad[1], a->dilation[1], OW);
  /* the argmax of window (oh, ow) */
  buf_puts(&b, "        int best = -1;\n");
  window_argmax(&b, a, H, W, 4, 0);
  buf_printf(&b, "        if (best == ih * %lld + iw) v = v + dyp[oh * %lld + ow];\n      }\n    }\n", LL(W), LL(OW));
  return cg_flat_finish(c, gr, &p, &b, total);
}

/* avgpool2d_bwd(dy) -> dx: the sum of dy / (KH * KW) over the windows that
 * cover the element (count_include_pad, as emit_pool). */
int emit_avgpool2d_bwd(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Attrs *a = &n->a;
  const Shape *ds = &n->in[0]->shape, *xs = &n->out->shape;
  int64_t H = xs->d[2], W = xs->d[3], OH = ds->d[2], OW = ds->d[3], total = shape_numel(xs);
  KParams p = {0};
  Buf b = {0};
  const char *dy = kp_value(c, &p, n->in[0], 0, "dy");
  char lit[40];
  cg_flat_head(&b, total);
  buf_printf(&b, "    int iw = i %% %lld, ih = (i / %lld) %% %lld, nc = i / %lld;\n", LL(W), LL(W), LL(H), LL(H * W));
  buf_printf(&b, "    const float *dyp = %s + nc * %lld;\n    float v = 0.0f;\n", dy, LL(OH * OW));
  buf_printf(&b, "    for (int kh = 0; kh < %d; kh++) {\n", a->kernel[0]);
  window_back(&b, 3, "oh", "ih", "kh", a->stride[0], a->pad[0], 1, OH);
  buf_printf(&b, "      for (int kw = 0; kw < %d; kw++) {\n", a->kernel[1]);
  window_back(&b, 4, "ow", "iw", "kw", a->stride[1], a->pad[1], 1, OW);
  buf_printf(&b, "        v = v + dyp[oh * %lld + ow] / %s;\n      }\n    }\n", LL(OW),
             cg_flit(lit, (double)a->kernel[0] * a->kernel[1]));
  return cg_flat_finish(c, gr, &p, &b, total);
}

/* global_avgpool2d_bwd(dy[N, C]) -> dx = dy / (H * W) over each plane. */
int emit_gavgpool2d_bwd(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->out->shape;
  int64_t HW = xs->d[2] * xs->d[3], total = shape_numel(xs);
  KParams p = {0};
  Buf b = {0};
  const char *dy = kp_value(c, &p, n->in[0], 0, "dy");
  char lit[40];
  cg_flat_head(&b, total);
  buf_printf(&b, "    float v = %s[i / %lld] / %s;\n", dy, LL(HW), cg_flit(lit, (double)HW));
  return cg_flat_finish(c, gr, &p, &b, total);
}

/* ---- softmax and losses ------------------------------------------------ */

/* softmax_bwd(dy, y): dx = y * (dy - sum(dy * y)); log_softmax_bwd(dy, y):
 * dx = dy - exp(y) * sum(dy); one block per row along attrs.axis. */
int emit_softmax_bwd(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[1]->shape;
  int ax = n->a.axis;
  int64_t D = xs->d[ax], inner = 1;
  for (int i = ax + 1; i < xs->rank; i++) inner *= xs->d[i];
  int64_t rows = shape_numel(xs) / D;
  int T = cg_reduce_threads(D);
  int lsm = n->op == OP_LOG_SOFTMAX_BWD;
  KParams p = {0};
  Buf b = {0};
  const char *dy = kp_value(c, &p, n->in[0], 0, "dy"), *y = kp_value(c, &p, n->in[1], 0, "y");
  cg_reduce_shared(&b, "red", T);
  buf_printf(&b, "  int row = %s, t = %s;\n", D_BID_X, D_TID_X);
  if (inner == 1) buf_printf(&b, "  int base = row * %lld;\n", LL(D));
  else buf_printf(&b, "  int base = (row / %lld) * %lld + row %% %lld;\n", LL(inner), LL(D * inner), LL(inner));
  char ej[48];
  if (inner == 1) snprintf(ej, sizeof ej, "base + j");
  else snprintf(ej, sizeof ej, "base + j * %lld", LL(inner));
  buf_printf(&b, "  float acc = 0.0f;\n  for (int j = t; j < %lld; j += %d) {\n    int i = %s;\n", LL(D), T, ej);
  if (lsm) buf_printf(&b, "    acc = acc + %s[i];\n  }\n", dy);
  else buf_printf(&b, "    acc = fmaf(%s[i], %s[i], acc);\n  }\n", dy, y);
  cg_block_reduce(&b, "red", "acc", T, 0, 1);
  buf_printf(&b, "  for (int j = t; j < %lld; j += %d) {\n    int i = %s;\n", LL(D), T, ej);
  if (lsm) buf_printf(&b, "    float v = %s[i] - expf(%s[i]) * acc;\n", dy, y);
  else buf_printf(&b, "    float v = %s[i] * (%s[i] - acc);\n", y, dy);
  return cg_row_finish(c, gr, &p, &b, rows, T);
}

/* Losses' gradients, torch's reduction='mean'.  cross_entropy_bwd(dloss,
 * logits, labels): (softmax(row) - onehot) * (dloss / N), one block per row;
 * nll_loss_bwd: -onehot * (dloss / N); mse_loss_bwd: 2 / numel * (a - b) *
 * dloss.  A label out of range gives its row NaN (the forward's NaN loss). */
int emit_loss_bwd(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[1]->shape;
  int64_t total = shape_numel(xs);
  KParams p = {0};
  Buf b = {0};
  const char *dl = kp_value(c, &p, n->in[0], 0, "dloss");
  /* the loss is a mean over the step's nb rows (m->nb, 1..N): rows past
   * them get a zero gradient, so that every weight gradient (a sum over the
   * batch) and every batchnorm sum downstream counts the nb rows alone */
  char nbuf[32];
  const char *nb = cg_step_rows(c, &p, xs->rank ? xs->d[0] : 1, nbuf, sizeof nbuf);
  if (n->op == OP_MSE_LOSS_BWD) {
    const char *x = kp_value(c, &p, n->in[1], 0, "a"), *y = kp_value(c, &p, n->in[2], 0, "b");
    int64_t per = xs->rank ? total / xs->d[0] : 1;
    cg_flat_head(&b, total);
    buf_printf(&b, "    int live = %s * %lld;\n", xs->rank ? nb : "1", LL(per));
    buf_printf(&b, "    float v = i < live ? (float)(2.0 / (double)live) * (%s[i] - %s[i]) * %s[0] : 0.0f;\n", x, y, dl);
    return cg_flat_finish(c, gr, &p, &b, total);
  }
  int64_t N = xs->d[0], C = xs->d[1];
  if (n->op == OP_NLL_LOSS_BWD) {
    const char *lb = kp_value(c, &p, n->in[2], 0, "labels");
    cg_flat_head(&b, total);
    buf_printf(&b, "    int row = i / %lld, label = %s[row], j = i %% %lld;\n", LL(C), lb, LL(C));
    buf_printf(&b, "    float v = row >= %s ? 0.0f : (label < 0 || label >= %lld) ? NAN : label == j ? -(%s[0] / (float)%s) : 0.0f;\n",
               nb, LL(C), dl, nb);
    return cg_flat_finish(c, gr, &p, &b, total);
  }
  /* cross entropy: the row's softmax as emit_softmax computes it */
  const char *x = kp_value(c, &p, n->in[1], 0, "logits"), *lb = kp_value(c, &p, n->in[2], 0, "labels");
  int T = cg_reduce_threads(C);
  cg_reduce_shared(&b, "red", T);
  buf_printf(&b, "  int row = %s, t = %s;\n", D_BID_X, D_TID_X);
  buf_printf(&b, "  const float *xr = %s + row * %lld;\n  int label = %s[row];\n", x, LL(C), lb);
  buf_printf(&b, "  float mx = %s;\n  for (int j = t; j < %lld; j += %d) {\n    float e = xr[j];\n"
                 "    if (e > mx || e != e) mx = e;\n  }\n", D_NEG_INF, LL(C), T);
  cg_block_reduce(&b, "red", "mx", T, 1, 1);
  buf_printf(&b, "  float acc = 0.0f;\n  for (int j = t; j < %lld; j += %d) acc = acc + expf(xr[j] - mx);\n", LL(C), T);
  cg_block_reduce(&b, "red", "acc", T, 0, 1);
  buf_printf(&b, "  float scale = %s[0] / (float)%s;\n", dl, nb);
  buf_printf(&b, "  for (int j = t; j < %lld; j += %d) {\n    int i = row * %lld + j;\n", LL(C), T, LL(C));
  buf_printf(&b, "    float v = row >= %s ? 0.0f : (label < 0 || label >= %lld) ? NAN : (expf(xr[j] - mx) / acc - (j == label ? 1.0f : 0.0f)) * scale;\n",
             nb, LL(C));
  return cg_row_finish(c, gr, &p, &b, N, T);
}

/* ---- normalisation ----------------------------------------------------- */

/* The row statistics of layernorm, as emit_layernorm: mean, then rstd from
 * the variance of the centred values (block-wide, over j = t, t + T, ...). */
static void ln_row_stats(Buf *b, const char *xr, int64_t D, int T, double eps) {
  char dl[40], el[40];
  cg_flit(dl, (double)D);
  buf_printf(b, "  float acc = 0.0f;\n  for (int j = t; j < %lld; j += %d) acc = acc + %s[j];\n", LL(D), T, xr);
  cg_block_reduce(b, "red", "acc", T, 0, 1);
  buf_printf(b, "  float mean = acc / %s;\n  acc = 0.0f;\n", dl);
  buf_printf(b, "  for (int j = t; j < %lld; j += %d) {\n    float d = %s[j] - mean;\n    acc = fmaf(d, d, acc);\n  }\n",
             LL(D), T, xr);
  cg_block_reduce(b, "red", "acc", T, 0, 1);
  buf_printf(b, "  float rstd = 1.0f / sqrtf(acc / %s + %s);\n", dl, cg_flit(el, eps));
}

/* layernorm_bwd_data(dy, x, weight): with g = dy * w and xhat = (x - mean) * rstd,
 * dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), one block per row.
 * layernorm_bwd_weight(dy, x): dweight[d] = the sum over rows of dy * xhat,
 * one output per column: a first kernel, a block a row, writes each row's
 * mean and rstd (ln_row_stats, as the data gradient finds them) to the
 * workspace after a split's range sums (ir_ln_stats_offset), which the sums
 * read (each output recomputing every row's statistics cost D times their
 * work). */
int emit_layernorm_bwd(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[1]->shape;
  int64_t D = xs->d[xs->rank - 1], rows = shape_numel(xs) / D;
  char dl[40];
  cg_flit(dl, (double)D);
  KParams p = {0};
  const char *dy = kp_value(c, &p, n->in[0], 0, "dy"), *x = kp_value(c, &p, n->in[1], 0, "x");
  if (n->op == OP_LAYERNORM_BWD_WEIGHT) {
    int64_t off = ir_ln_stats_offset(n);
    {   /* the rows' statistics: (mean, rstd) of row r at off + 2 r */
      KParams q = {0};
      Buf a = {0};
      const char *x1 = kp_value(c, &q, n->in[1], 0, "x"), *st = kp_work(c, &q, "stats");
      int T = cg_reduce_threads(D);
      cg_reduce_shared(&a, "red", T);
      buf_printf(&a, "  int row = %s, t = %s;\n  const float *xr = %s + row * %lld;\n", D_BID_X, D_TID_X, x1, LL(D));
      ln_row_stats(&a, "xr", D, T, n->a.eps);
      buf_printf(&a, "  if (t == 0) {\n    %s[%lld + row * 2] = mean;\n    %s[%lld + row * 2 + 1] = rstd;\n  }\n", st, LL(off),
                 st, LL(off));
      const char *name = cg_finish(c, "layernorm_row_stats", NCC_KF_BARRIER_, &q, &a);
      cg_launch(c, name, &q, rows, 1, 1, T, 1, 0);
      buf_free(&a);
    }
    const char *st = kp_work(c, &p, "stats");
    Buf t = {0};
    buf_printf(&t, "      float e = %s[j * %lld + o] * ((%s[j * %lld + o] - %s[%lld + j * 2]) * %s[%lld + j * 2 + 1]);\n", dy,
               LL(D), x, LL(D), st, LL(off), st, LL(off));
    int rc = reduce_out(c, gr, &p, "", t.s, rows, D, "acc");
    buf_free(&t);
    return rc;
  }
  const char *w = kp_value(c, &p, n->in[2], 0, "weight");
  int T = cg_reduce_threads(D);
  Buf b = {0};
  cg_reduce_shared(&b, "red", T);
  buf_printf(&b, "  int row = %s, t = %s;\n", D_BID_X, D_TID_X);
  buf_printf(&b, "  const float *xr = %s + row * %lld;\n  const float *dyr = %s + row * %lld;\n", x, LL(D), dy, LL(D));
  ln_row_stats(&b, "xr", D, T, n->a.eps);
  buf_printf(&b, "  float sg = 0.0f, sgx = 0.0f;\n  for (int j = t; j < %lld; j += %d) {\n", LL(D), T);
  buf_printf(&b, "    float g = dyr[j] * %s[j];\n    sg = sg + g;\n    sgx = fmaf(g, (xr[j] - mean) * rstd, sgx);\n  }\n", w);
  cg_block_reduce(&b, "red", "sg", T, 0, 1);
  cg_block_reduce(&b, "red", "sgx", T, 0, 1);
  buf_printf(&b, "  sg = sg / %s;\n  sgx = sgx / %s;\n", dl, dl);
  buf_printf(&b, "  for (int j = t; j < %lld; j += %d) {\n    int i = row * %lld + j;\n", LL(D), T, LL(D));
  buf_printf(&b, "    float v = rstd * (dyr[j] * %s[j] - sg - (xr[j] - mean) * rstd * sgx);\n", w);
  return cg_row_finish(c, gr, &p, &b, rows, T);
}

/* bn_bwd_data(dy, x, weight, stats): training-mode batchnorm's backward with
 * the batch statistics (biased variance), torch's form:
 *   dx = (dy - mean(dy) - (x - mean) * rstd^2 * mean(dy * (x - mean))) * rstd * w,
 * one block per channel.  bn_bwd_weight(dy, x, stats): dgamma[c] = the sum
 * of dy * xhat over the channel, in a kernel of its own or, as a side node
 * (bn-sums), written by bn_bwd_data's block from its sums, as the bias
 * gradient sum(dy) is. */
int emit_bn_bwd(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[1]->shape;
  int64_t N = xs->d[0], C = xs->d[1], HW = xs->d[2] * xs->d[3], M = N * HW;
  char el[40];
  cg_flit(el, n->a.eps);
  KParams p = {0};
  const char *dy = kp_value(c, &p, n->in[0], 0, "dy"), *x = kp_value(c, &p, n->in[1], 0, "x");
  char ej[96];   /* offset of element j of channel ch */
  snprintf(ej, sizeof ej, "ch * %lld + (j / %lld) * %lld + j %% %lld", LL(HW), LL(HW), LL(C * HW), LL(HW));
  if (n->op == OP_BN_BWD_WEIGHT) {
    const char *st = kp_value(c, &p, n->in[2], 0, "stats");
    Buf s = {0}, t = {0};
    buf_printf(&s, "    int ch = o;\n    float mean = %s[ch], rstd = 1.0f / sqrtf(%s[%lld + ch] + %s);\n", st, st, LL(C), el);
    buf_printf(&t, "      int i = %s;\n      float e = %s[i] * (%s[i] - mean);\n", ej, dy, x);
    int rc = reduce_out(c, gr, &p, s.s, t.s, M, C, "acc * rstd");
    buf_free(&s);
    buf_free(&t);
    return rc;
  }
  const char *w = kp_value(c, &p, n->in[2], 0, "weight"), *st = kp_value(c, &p, n->in[3], 0, "stats");
  /* the step's nb rows (m->nb): the sums cover them (dy is zero past them,
   * the loss's gradient saw to it), the means divide by their count, and dx
   * is zero past them, which keeps that so upstream */
  char nbuf[32];
  const char *nb = cg_step_rows(c, &p, N, nbuf, sizeof nbuf);
  int T = cg_reduce_threads(M), S = ir_bn_split(n);
  int64_t span = S > 1 ? ir_bn_split_span(n) : M;
  Buf b = {0};
  char opn[96];
  const char *ws = S > 1 ? kp_work(c, &p, "partial") : NULL;
  if (S > 1) {
    /* split (ir_bn_split): the first kernel, block (ch, sk), writes its range's two sums */
    KParams q = {0};
    const char *dy1 = kp_value(c, &q, n->in[0], 0, "dy"), *x1 = kp_value(c, &q, n->in[1], 0, "x");
    const char *st1 = kp_value(c, &q, n->in[3], 0, "stats"), *w1 = kp_work(c, &q, "partial");
    const char *nb1 = cg_step_rows(c, &q, N, nbuf, sizeof nbuf);
    cg_reduce_shared(&b, "red", T);
    buf_printf(&b, "  int ch = %s, t = %s, m = %s * %lld;\n", D_BID_X, D_TID_X, nb1, LL(HW));
    bn_range(&b, n);
    buf_printf(&b, "  float mean = %s[ch];\n", st1);
    buf_printf(&b, "  float sd = 0.0f, sdx = 0.0f;\n  for (int j = jb + t; j < je; j += %d) {\n    int i = %s;\n", T, ej);
    buf_printf(&b, "    sd = sd + %s[i];\n    sdx = fmaf(%s[i], %s[i] - mean, sdx);\n  }\n", dy1, dy1, x1);
    cg_block_reduce(&b, "red", "sd", T, 0, 1);
    cg_block_reduce(&b, "red", "sdx", T, 0, 1);
    buf_printf(&b, "  if (t == 0) {\n    %s[(sk * %lld + ch) * 2] = sd;\n    %s[(sk * %lld + ch) * 2 + 1] = sdx;\n  }\n", w1,
               LL(C), w1, LL(C));
    const char *name = cg_finish(c, cg_opname(gr, "bn_bwd_sums", opn), NCC_KF_BARRIER_, &q, &b);
    cg_launch(c, name, &q, C, S, 1, T, 1, 0);
    buf_free(&b);
    /* the second kernel: every block adds the S ranges' sums in order */
    buf_printf(&b, "  int ch = %s, t = %s, m = %s * %lld, sk = %s;\n", D_BID_X, D_TID_X, nb, LL(HW), D_BID_Y);
    buf_printf(&b, "  float mean = %s[ch], rstd = 1.0f / sqrtf(%s[%lld + ch] + %s);\n", st, st, LL(C), el);
    buf_printf(&b, "  float sd = 0.0f, sdx = 0.0f;\n  for (int r = 0; r < %d; r++) {\n"
                   "    sd = sd + %s[(r * %lld + ch) * 2];\n    sdx = sdx + %s[(r * %lld + ch) * 2 + 1];\n  }\n",
               S, ws, LL(C), ws, LL(C));
  } else {
    cg_reduce_shared(&b, "red", T);
    buf_printf(&b, "  int ch = %s, t = %s, m = %s * %lld;\n", D_BID_X, D_TID_X, nb, LL(HW));
    buf_printf(&b, "  float mean = %s[ch], rstd = 1.0f / sqrtf(%s[%lld + ch] + %s);\n", st, st, LL(C), el);
    buf_printf(&b, "  float sd = 0.0f, sdx = 0.0f;\n  for (int j = t; j < m; j += %d) {\n    int i = %s;\n", T, ej);
    buf_printf(&b, "    sd = sd + %s[i];\n    sdx = fmaf(%s[i], %s[i] - mean, sdx);\n  }\n", dy, dy, x);
    cg_block_reduce(&b, "red", "sd", T, 0, 1);
    cg_block_reduce(&b, "red", "sdx", T, 0, 1);
  }
  /* side nodes (bn-sums): the weight gradient sum(dy * xhat) = sdx * rstd and
   * the bias gradient sum(dy) are these sums (written by one block) */
  if (gr->nside) {
    buf_puts(&b, S > 1 ? "  if (t == 0 && sk == 0) {\n" : "  if (t == 0) {\n");
    for (int s = 0; s < gr->nside; s++) {
      const Node *sn = gr->side[s];
      NCC_ASSERT(sn->op == OP_BN_BWD_WEIGHT || sn->op == OP_SUM_TO);
      int wgt = sn->op == OP_BN_BWD_WEIGHT;
      buf_printf(&b, "    %s[ch] = %s;\n", kp_value(c, &p, sn->out, 1, wgt ? "dweight" : "dbias"), wgt ? "sdx * rstd" : "sd");
    }
    buf_puts(&b, "  }\n");
  }
  buf_puts(&b, "  float mdy = sd / (float)m, proj = sdx / (float)m * rstd * rstd, scale = rstd * ");
  buf_printf(&b, "%s[ch];\n", w);
  if (S > 1)
    buf_printf(&b, "  for (int j = sk * %lld + t; j < sk * %lld + %lld && j < %lld; j += %d) {\n    int i = %s;\n", LL(span),
               LL(span), LL(span), LL(M), T, ej);
  else buf_printf(&b, "  for (int j = t; j < %lld; j += %d) {\n    int i = %s;\n", LL(M), T, ej);
  buf_printf(&b, "    float v = j < m ? (%s[i] - mdy - (%s[i] - mean) * proj) * scale : 0.0f;\n", dy, x);
  if (S == 1) return cg_row_finish(c, gr, &p, &b, C, T);
  int rc = -1;
  if (cg_epilogue(c, gr, &p, &b, "v", "i", 2) == 0) {
    char stv[64];
    buf_printf(&b, "    %s[i] = %s;\n  }\n", kp_value(c, &p, group_out(gr), 1, "y"), cg_st(stv, sizeof stv, group_out(gr), "v"));
    const char *name = cg_finish(c, cg_opname(gr, NULL, opn), 0, &p, &b);
    cg_launch(c, name, &p, C, S, 1, T, 1, 0);
    rc = 0;
  }
  buf_free(&b);
  return rc;
}

/* ---- data movement ----------------------------------------------------- */

/* slice(x) -> x[..., start:start+len, ...] along attrs.axis. */
int emit_slice(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Shape *xs = &n->in[0]->shape, *ys = &n->out->shape;
  int ax = n->a.axis;
  int64_t start = n->a.list[0], len = n->a.list[1], D = xs->d[ax], inner = 1, total = shape_numel(ys);
  for (int d = ax + 1; d < xs->rank; d++) inner *= xs->d[d];
  KParams p = {0};
  Buf b = {0};
  const char *x = kp_value(c, &p, n->in[0], 0, "x");
  cg_flat_head(&b, total);
  /* element i is (outer, a, r) in the output; the input's a is a + start */
  buf_printf(&b, "    int outer = i / %lld, rest = i %% %lld;\n", LL(len * inner), LL(len * inner));
  buf_printf(&b, "    float v = %s[outer * %lld + %lld + rest];\n", x, LL(D * inner), LL(start * inner));
  return cg_flat_finish(c, gr, &p, &b, total);
}

/* ---- the update -------------------------------------------------------- */

/* optimizer(grads...): every trainable parameter in one flat kernel over
 * Cg.opt_buf (parameters, gradients, state), as torch.optim's single-tensor
 * step computes it in float32, in the same order of operations:
 *   SGD:   d = g + wd * p; buf = momentum * buf + d; d = nesterov ? d + momentum * buf : buf; p -= lr * d
 *   Adam:  g += wd * p; m += (g - m) * (1 - b1); v = b2 * v + (1 - b2) * g * g;
 *          p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
 *   AdamW: p *= 1 - lr * wd, then Adam without the wd term.
 * lr, bc1 and bc2 are host variables (they change per step); the rest are
 * the model's constants.  The dummy output is not written.
 * With loss scaling (fp16 training, passes/precision.c) a kernel before it
 * does GradScaler's unscale_: every gradient times inv_scale (1 / the scale,
 * a host variable), and found_inf set where one is Inf or NaN; the update
 * then returns at once when found_inf is set: the step is skipped. */
static void emit_unscale(Cg *c) {
  KParams p = {0};
  Buf b = {0};
  const char *g = kp_buf(c, &p, c->opt_buf[1], 1, "grad");
  const char *fi = kp_flag(c, &p, c->found_buf, 1, "found_inf");
  const char *inv = kp_float(&p, "inv_scale", "m->inv_scale");
  cg_flat_head(&b, c->opt_count);
  buf_printf(&b, "    float v = %s[i];\n", g);
  /* v - v is 0 for a finite v, NaN for Inf and NaN (no fast-math anywhere) */
  buf_printf(&b, "    if (!(v - v == 0.0f)) *%s = 1;   /* Inf or NaN; every writer stores the same 1 */\n", fi);
  buf_printf(&b, "    %s[i] = v * %s;\n  }\n", g, inv);
  const char *name = cg_finish(c, "unscale_grads", 0, &p, &b);
  cg_launch(c, name, &p, (c->opt_count + 255) / 256, 1, 1, 256, 1, 0);
  buf_free(&b);
}

int emit_optimizer(Cg *c, const KGroup *gr) {
  const TrainCfg *tc = &c->g->train;
  NCC_ASSERT(c->train && c->opt_buf[0] >= 0 && c->opt_buf[1] >= 0 && c->opt_count > 0);
  int sgd = tc->opt == OPT_SGD, adamw = tc->opt == OPT_ADAMW;
  NCC_ASSERT(sgd || tc->opt == OPT_ADAM || adamw);
  int mom = sgd && tc->momentum != 0.0;
  if (mom || !sgd) NCC_ASSERT(c->opt_buf[2] >= 0);
  if (!sgd) NCC_ASSERT(c->opt_buf[3] >= 0);
  (void)gr;
  if (c->found_buf >= 0) emit_unscale(c);
  KParams p = {0};
  Buf b = {0};
  const char *pp = kp_buf(c, &p, c->opt_buf[0], 1, "param"), *g = kp_buf(c, &p, c->opt_buf[1], 0, "grad");
  const char *skip = c->found_buf >= 0 ? kp_flag(c, &p, c->found_buf, 0, "found_inf") : NULL;
  const char *s1 = NULL, *s2 = NULL;
  if (mom) s1 = kp_buf(c, &p, c->opt_buf[2], 1, "momentum_buffer");
  if (!sgd) {
    s1 = kp_buf(c, &p, c->opt_buf[2], 1, "exp_avg");
    s2 = kp_buf(c, &p, c->opt_buf[3], 1, "exp_avg_sq");
  }
  const char *lr = kp_float(&p, "lr", "m->lr");
  const char *bc1 = NULL, *bc2 = NULL;
  if (!sgd) {
    bc1 = kp_float(&p, "bc1", "m->bc1");
    bc2 = kp_float(&p, "bc2", "m->bc2");
  }
  char wd[40], mo[40], b1[40], b2[40], eps[40];
  cg_flit(wd, tc->weight_decay);
  cg_flit(mo, tc->momentum);
  cg_flit(b1, 1.0 - tc->beta1);
  cg_flit(b2, tc->beta2);
  cg_flit(eps, tc->eps);
  if (skip) buf_printf(&b, "  if (*%s) return;   /* a gradient overflowed: the step is skipped */\n", skip);
  cg_flat_head(&b, c->opt_count);
  buf_printf(&b, "    float g = %s[i], w = %s[i];\n", g, pp);
  if (sgd) {
    if (tc->weight_decay != 0.0) buf_printf(&b, "    g = g + %s * w;\n", wd);
    if (mom) {
      buf_printf(&b, "    float buf = %s * %s[i] + g;\n    %s[i] = buf;\n", mo, s1, s1);
      if (tc->nesterov) buf_printf(&b, "    g = g + %s * buf;\n", mo);
      else buf_puts(&b, "    g = buf;\n");
    }
    buf_printf(&b, "    %s[i] = w - %s * g;\n  }\n", pp, lr);
  } else {
    char b2c[40];
    cg_flit(b2c, 1.0 - tc->beta2);
    if (adamw) {
      if (tc->weight_decay != 0.0) buf_printf(&b, "    w = w * (1.0f - %s * %s);\n", lr, wd);
    } else if (tc->weight_decay != 0.0) {
      buf_printf(&b, "    g = g + %s * w;\n", wd);
    }
    buf_printf(&b, "    float ea = %s[i], es = %s[i];\n", s1, s2);
    buf_printf(&b, "    ea = ea + (g - ea) * %s;\n", b1);
    buf_printf(&b, "    es = es * %s + %s * (g * g);\n", b2, b2c);
    buf_printf(&b, "    %s[i] = ea;\n    %s[i] = es;\n", s1, s2);
    buf_printf(&b, "    float denom = sqrtf(es) / sqrtf(%s) + %s;\n", bc2, eps);
    buf_printf(&b, "    %s[i] = w - (%s / %s) * (ea / denom);\n  }\n", pp, lr, bc1);
  }
  char opn[96];
  const char *name = cg_finish(c, cg_opname(gr, NULL, opn), 0, &p, &b);
  cg_launch(c, name, &p, (c->opt_count + 255) / 256, 1, 1, 256, 1, 0);
  buf_free(&b);
  return 0;
}
