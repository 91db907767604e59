/* emu_round.c — the emulated ncc_gemm_ex's operand rounding (dev.c), with
 * the kernel header's own rounding functions, so that a GEMM through the
 * CPU BLAS at --precision=tf32|fp16|bf16 rounds exactly as ncc's kernels do. */
#define NCC_EMU 1
#include "ncc_kernel.h"
#include "rt_internal.h"

void ncc_round_matrix(int prec, const float *src, int ld, int rows, int cols, float *dst) {
  for (int r = 0; r < rows; r++) {
    const float *s = src + (size_t)r * (size_t)ld;
    float *o = dst + (size_t)r * (size_t)cols;
    for (int c = 0; c < cols; c++)
      o[c] = prec == NCC_GEMM_TF32 ? ncc_tf32(s[c]) : prec == NCC_GEMM_FP16 ? ncc_fp16(s[c]) : ncc_bf16(s[c]);
  }
}
