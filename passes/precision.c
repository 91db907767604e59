/* precision.c — the math precision of every op, from --precision (PassCtx.precision).
 *
 * A per-op policy, printed in docs/precision.md:
 *   fp32  every op computes and stores in float32 (nothing to do).
 *   tf32  the GEMM-like ops (conv2d, linear, matmul) take TF32 operands: the
 *         kernel rounds each element of both operands to 10 mantissa bits as
 *         it loads it (ncc_tf32: to nearest, ties away, as cvt.rna.tf32.f32)
 *         and multiplies and accumulates in float32, as a tensor core does,
 *         and as PyTorch does for convolutions (torch.backends.cudnn.allow_tf32)
 *         and, when allowed, matmuls.  Storage stays float32; softmax, norms,
 *         losses, reductions and elementwise ops stay float32.
 * The decision is written on the IR (Node.prec, Graph.precision); the
 * verifier checks it and codegen renders it.  The training step keeps
 * float32 (tf32 training is not offered), and the cuBLAS path has no TF32
 * rendering here (the emulation's CPU BLAS could not round as the GPU does),
 * so --cublas with tf32 is refused. */
#include <stdio.h>

#include "passes.h"

int pass_precision(Graph *g, PassCtx *c) {
  int prec = c->precision, n = 0;
  if (prec != PREC_FP32 && prec != PREC_TF32) {
    diag_error((Loc){0}, "precision: unknown precision %d", prec);
    return -1;
  }
  if (prec == PREC_TF32 && c->cublas) {
    diag_error((Loc){0}, "--precision=tf32 with --cublas: the cuBLAS path has no TF32 rendering yet; "
                         "leave out --cublas (ncc's tiled kernels round to TF32)");
    return -1;
  }
  g->precision = c->train ? PREC_FP32 : prec;
  for (int i = 0; i < g->nnodes; i++) {
    Node *nd = g->nodes[i];
    int gemm = (ncc_ops[nd->op].flags & OPF_GEMM_LIKE) && !nd->load_time;
    nd->prec = gemm && g->precision == PREC_TF32 ? PREC_TF32 : PREC_FP32;
    n += nd->prec == PREC_TF32;
  }
  if (c->verbose)
    fprintf(stderr, "pass precision: %s%s: %d GEMM-like op%s with TF32 operands, the rest in float32\n",
            ir_prec_name(g->precision), c->train && prec != PREC_FP32 ? " (a training step stays fp32)" : "", n,
            n == 1 ? "" : "s");
  return 0;
}
