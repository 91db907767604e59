/* precision.c — the math precision of every op, from --precision (PassCtx.precision).
 *
 * A per-op policy, printed in docs/precision.md:
 *   fp32  every op computes and stores in float32 (nothing to do).
 *   tf32  the GEMM-like ops (conv2d, linear, matmul) take TF32 operands: the
 *         kernel rounds each element of both operands to 10 mantissa bits as
 *         it loads it (ncc_tf32: to nearest, ties away, as cvt.rna.tf32.f32)
 *         and multiplies and accumulates in float32, as a tensor core does,
 *         and as PyTorch does for convolutions (torch.backends.cudnn.allow_tf32)
 *         and, when allowed, matmuls.
 *   fp16  the GEMM-like ops take FP16 operands (ncc_fp16: to nearest even, as
 *         cvt.rn.f16.f32, with fp16's range: subnormals, overflow to Inf) and
 *         accumulate in float32, as autocast's float16 GEMMs do;
 *   bf16  the same with BF16 operands (ncc_bf16: 7 mantissa bits, float32's
 *         exponent, to nearest even, as cvt.rn.bf16.f32).
 * In every mode softmax, norms, losses, reductions and elementwise ops stay
 * float32 (autocast keeps the first four in float32), and values are stored
 * in float32 between kernels: a rounded operand is rounded again where the
 * next GEMM loads it, so the numbers are those of low-precision storage of
 * the GEMMs' inputs; the bytes are float32's.
 * In a training step (after autodiff) the gradients' GEMMs round their
 * operands too: conv2d's input gradient (dy and the weight), its weight
 * gradient (dy and the input), linear's weight gradient (dy and the input)
 * and its input gradient (a matmul of dy and the weight), as autocast's
 * backward runs the GEMMs of the forward's type.  Bias gradients, the
 * optimizer and the parameters (float32 master weights) stay float32.
 * Training at fp16 scales the loss, as torch.cuda.amp.GradScaler does: small
 * gradients would underflow fp16 operands (and big ones overflow to Inf).
 * The pass turns autodiff's seed (the const 1.0 gradient of the minimised
 * loss) into a loss_scale source; codegen renders it as a value the host
 * sets before each step (GradScaler's scale S, initially 65536 or
 * --loss-scale), so every gradient of the step is S times the true one.
 * Before the update, one kernel multiplies the gradients by 1/S in float32
 * and flags any Inf or NaN; a flagged step updates nothing (parameters and
 * optimizer state, Adam's step count included, stay) and halves S; after
 * 2000 steps in a row without one, S doubles (GradScaler's defaults:
 * backoff 0.5, growth 2, interval 2000).  bf16 keeps float32's exponent
 * range and needs none of it.
 * The decision is written on the IR (Node.prec, Graph.precision); the
 * verifier checks it and codegen renders it.  With --cublas a rounded GEMM
 * is a cuBLAS call with a reduced-precision compute type (ncc_gemm_ex:
 * cuBLAS rounds the operands itself on a GPU; the emulation rounds copies
 * with the kernels' functions before the CPU BLAS). */
#include <stdio.h>

#include "passes.h"

int pass_precision(Graph *g, PassCtx *c) {
  int prec = c->precision, n = 0;
  if (prec < PREC_FP32 || prec > PREC_BF16) {
    diag_error((Loc){0}, "precision: unknown precision %d", prec);
    return -1;
  }
  if (c->train && prec == PREC_FP16) {
    Node *seed = g->train.seed ? g->train.seed->def : NULL;
    /* a loss_scale seed already: the pass ran before (--passes=...,precision,precision) */
    if (!seed || (seed->op != OP_LOSS_SCALE && (seed->op != OP_CONST || seed->a.fval != 1.0))) {
      diag_error((Loc){0}, "precision: fp16 training needs autodiff's seed (the const 1.0 gradient of the loss) "
                           "to scale; run autodiff first");
      return -1;
    }
    if (seed->op == OP_CONST) {
      seed->op = OP_LOSS_SCALE;
      seed->a.fval = g->train.init_scale = c->loss_scale > 0 ? c->loss_scale : 65536.0;
      g->train.loss_scaling = 1;
    }
  }
  g->precision = prec;
  for (int i = 0; i < g->nnodes; i++) {
    Node *nd = g->nodes[i];
    int gemm = ir_op_rounds(nd->op) && !nd->load_time;
    nd->prec = gemm ? g->precision : PREC_FP32;
    n += nd->prec != PREC_FP32;
  }
  static const char *const upper[] = {"FP32", "TF32", "FP16", "BF16"};
  if (c->verbose && g->precision != PREC_FP32)
    fprintf(stderr, "pass precision: %s: %d GEMM-like op%s with %s operands, the rest in float32%s\n",
            ir_prec_name(g->precision), n, n == 1 ? "" : "s", upper[g->precision],
            g->train.loss_scaling ? "; the loss scaled (dynamic, as GradScaler)" : "");
  else if (c->verbose)
    fprintf(stderr, "pass precision: fp32: every op in float32\n");
  return 0;
}
