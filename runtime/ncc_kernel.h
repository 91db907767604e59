/* ncc_kernel.h — the first line of every generated MODEL.cu.
 *
 * One kernel source, three builds (docs/generated-code.md is the contract):
 *   NCC_EMU        C11 on the CPU: the CUDA subset comes from ncc_emu.h, and
 *                  NCC_KERNEL_DESC emits the per-thread and per-block trampolines
 *                  that the emulator (libnccrt, emu.c) runs;
 *   nvcc           CUDA C++: kernels are __global__, the host part talks to the GPU
 *                  through ncc_cudart.h (header-only, registers itself with libnccrt);
 *   NVRTC          only the kernels section is compiled; the jit backend hands this
 *                  file's NVRTC part to NVRTC as an in-memory header;
 *   NCC_JIT        the host C file of a --jit build: kernels are a string, so the
 *                  descriptors carry only names.
 */
#ifndef NCC_KERNEL_H
#define NCC_KERNEL_H

#if defined(NCC_EMU)
/* ------------------------------------------------------------ CPU emulation */
#include "ncc_emu.h"
/* always_inline: the barrier-free fast path is a loop over threads with the body inlined */
#define NCC_KERNEL static __inline__ __attribute__((always_inline, unused))
#define NCC_DYN_SHARED(T, name) T *name = (T *)ncc_emu_shared_dyn
#define NCC_UNROLL   /* the emulation's C compiler unrolls as it likes */
#define NCC_ROLLED
#define NCC_ARG(T, i) (*(T *)a[i])
/* fn##_thread runs one thread (fibers, checked mode); fn##_block runs the whole
 * current block for barrier-free kernels.  A kernel with barriers or warp
 * collectives always runs on fibers, so its descriptor has no fn##_block, and
 * the C compiler never compiles that second copy of the kernel (the constant
 * condition folds it away): a training model's emulation build compiles in
 * a third less time or better (docs/emulator.md).  The macro supplies its own ';'. */
#define NCC_KERNEL_DESC(fn, flags, args)                                              \
  static void fn##_thread(void **a) { (void)a; fn args; }                             \
  static __attribute__((unused)) void fn##_block(void **a) {                          \
    unsigned ncc_tx_, ncc_ty_, ncc_tz_;                                               \
    (void)a;                                                                          \
    for (ncc_tz_ = 0; ncc_tz_ < blockDim.z; ncc_tz_++) {                              \
      threadIdx.z = ncc_tz_;                                                          \
      for (ncc_ty_ = 0; ncc_ty_ < blockDim.y; ncc_ty_++) {                            \
        threadIdx.y = ncc_ty_;                                                        \
        for (ncc_tx_ = 0; ncc_tx_ < blockDim.x; ncc_tx_++) {                          \
          threadIdx.x = ncc_tx_;                                                      \
          fn args;                                                                    \
        }                                                                             \
      }                                                                               \
    }                                                                                 \
  }                                                                                   \
  static const ncc_kernel fn##_desc __attribute__((unused)) =                        \
      {#fn, (flags), ((flags) & NCC_KF_BARRIER_WARP) ? 0 : fn##_block, fn##_thread, 0};

#elif defined(__CUDACC_RTC__) || defined(__CUDACC__)
/* ------------------------------------------------------------ NVRTC and nvcc */
/* The jit backend (dev_cuda.c, NCC_NVRTC_PRELUDE) gives NVRTC these same lines. */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#define NCC_KERNEL extern "C" __global__
#define NCC_DYN_SHARED(T, name) extern __shared__ T name[]
/* NCC_UNROLL before a loop of constant trip count: unroll it whole, so that the
 * arrays it indexes (a tile's accumulators) stay in registers */
#define NCC_UNROLL _Pragma("unroll")
/* NCC_ROLLED before a loop of constant trip count that ptxas would unroll
 * whole, and then spill for the loads it hoists (a weight gradient's few K
 * tiles under __launch_bounds__(256, 2)): kept a loop */
#define NCC_ROLLED _Pragma("unroll 1")
/* NVRTC has no math.h: INFINITY and NAN are spelled for it */
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#if !defined(__CUDACC_RTC__)
#include "ncc_cudart.h"
#define NCC_ARG(T, i) 0
#define NCC_KERNEL_DESC(fn, flags, args)                                              \
  static const ncc_kernel fn##_desc __attribute__((unused)) =                        \
      {#fn, (flags), 0, 0, (const void *)fn};
#endif

#elif defined(NCC_JIT)
/* ------------------------------------------------------------ --jit host C */
#include "ncc_rt.h"
#define NCC_ARG(T, i) 0
#define NCC_UNROLL
#define NCC_ROLLED
#define NCC_KERNEL_DESC(fn, flags, args)                                              \
  static const ncc_kernel fn##_desc __attribute__((unused)) = {#fn, (flags), 0, 0, 0};

#else
#error "ncc_kernel.h: compile with nvcc, or as C with -DNCC_EMU (CPU emulation) or -DNCC_JIT (--jit host file)"
#endif

#if !defined(NCC_JIT)
/* ------------------------------------------------------------ dropout's generator
 * Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
 * SC'11), counter-based: the number for one element is a pure function of
 * (seed, step, slot, index), so the backward of a dropout regenerates the mask
 * of its forward, and every build (emulation, nvcc, NVRTC) draws the same
 * numbers.  Key (seed, step), counter (index, slot, 0, 0); only 32-bit
 * unsigned arithmetic and a 64-bit product.  Returns a float in [0, 1) with
 * 24 random bits.  dev_cuda.c's NVRTC prelude carries the same text. */
static __device__ __forceinline__ float ncc_philox_uniform(unsigned seed, unsigned step, unsigned slot, unsigned index) {
  unsigned c0 = index, c1 = slot, c2 = 0u, c3 = 0u, k0 = seed, k1 = step;
  for (int r = 0; r < 10; r++) {
    unsigned long long p0 = (unsigned long long)0xD2511F53u * c0, p1 = (unsigned long long)0xCD9E8D57u * c2;
    unsigned hi0 = (unsigned)(p0 >> 32), lo0 = (unsigned)p0, hi1 = (unsigned)(p1 >> 32), lo1 = (unsigned)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return (float)(c0 >> 8) * (1.0f / 16777216.0f);
}

/* ------------------------------------------------------------ TF32 (--precision=tf32)
 * x rounded to TF32's 10 mantissa bits, to nearest with ties away from zero
 * (PTX cvt.rna.tf32.f32), kept in a float; Inf and NaN pass unchanged.  The
 * GEMM kernels round each operand element as they load it and multiply and
 * add in float32: a product of two TF32 numbers is exact in float32, as in a
 * tensor core.  Bit operations only, so every build rounds alike.
 * dev_cuda.c's NVRTC prelude carries the same text. */
static __device__ __forceinline__ float ncc_tf32(float x) {
  union { float f; unsigned u; } v;
  v.f = x;
  if ((v.u & 0x7f800000u) != 0x7f800000u) v.u = (v.u + 0x1000u) & 0xffffe000u;
  return v.f;
}

/* The float whose bits are u (a tf32 fragment register read by ldmatrix
 * from a tile rounded already). */
static __device__ __forceinline__ float ncc_f32_bits(unsigned u) {
  union { float f; unsigned u; } v;
  v.u = u;
  return v.f;
}

/* ------------------------------------------------------------ INT8 (--precision=int8)
 * x on the int8 grid: rounded to the nearest integer, ties to even (rintf,
 * as torch.round), clamped to [-127, 127] (symmetric: -128 unused); NaN to
 * 0.  An int8 GEMM loads its activation as ncc_q8(x * (1 / scale)) and its
 * weight already quantized (the quantize node: ncc_q8(w / channel scale)),
 * and sums the products as int.  dev_cuda.c's NVRTC prelude carries the same
 * text. */
static __device__ __forceinline__ float ncc_q8(float x) {
  float r = rintf(x);
  return r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r == r ? r : 0.0f;
}

/* ------------------------------------------------------------ FP16, BF16 (--precision=fp16|bf16)
 * x rounded to the nearest FP16 (BF16) value, ties to even, kept in a float:
 * the value cvt.rn.f16.f32 (cvt.rn.bf16.f32) then a conversion back give.
 * FP16: 10 mantissa bits, magnitudes of 65520 and more overflow to Inf,
 * below 2^-14 the subnormals (multiples of 2^-24), 2^-25 and less to zero.
 * BF16: 7 mantissa bits, float32's exponent (subnormals and overflow to Inf
 * included).  Inf and NaN pass unchanged.  Under emulation integer
 * operations; on a GPU the hardware's conversions, the same IEEE rounding.
 * dev_cuda.c's NVRTC prelude carries the same text. */
#if defined(__CUDA_ARCH__)
/* on the GPU the hardware's conversion (cvt.rn.f16.f32 and back: round to
 * nearest even, subnormals, overflow to Inf; ncc builds no -ftz) gives these
 * very values in two instructions, where the integer routine below costs a
 * dozen and a branch in every staged operand of an fp16 GEMM (ResNet-50's
 * fp16 main loops: a median of 396 SASS instructions before, 109 after) */
static __device__ __forceinline__ float ncc_fp16(float x) { return __half2float(__float2half_rn(x)); }
#else
static __device__ __forceinline__ float ncc_fp16(float x) {
  union { float f; unsigned u; } v;
  v.f = x;
  unsigned s = v.u & 0x80000000u, a = v.u & 0x7fffffffu;
  if (a >= 0x7f800000u) return x;                  /* Inf, NaN */
  if (a >= 0x477ff000u) a = 0x7f800000u;           /* 65520 and more: Inf */
  else if (a >= 0x38800000u) a = (a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u;   /* normal */
  else if (a <= 0x33000000u) a = 0u;               /* 2^-25 and less: zero */
  else {                                           /* subnormal: q 2^-24, q to nearest even */
    unsigned sh = 126u - (a >> 23), m = (a & 0x7fffffu) | 0x800000u;
    unsigned q = m >> sh, r = m & ((1u << sh) - 1u), h = 1u << (sh - 1u);
    q += r > h || (r == h && (q & 1u));
    v.f = (float)q * 5.9604644775390625e-8f;
    a = v.u;
  }
  v.u = s | a;
  return v.f;
}
#endif
#if defined(__CUDA_ARCH__)
/* likewise cvt.rn.bf16.f32 and back */
static __device__ __forceinline__ float ncc_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
#else
static __device__ __forceinline__ float ncc_bf16(float x) {
  union { float f; unsigned u; } v;
  v.f = x;
  if ((v.u & 0x7f800000u) != 0x7f800000u) v.u = (v.u + 0x7fffu + ((v.u >> 16) & 1u)) & 0xffff0000u;
  return v.f;
}
#endif

/* ------------------------------------------------------------ tensor cores
 * ncc_mma_tf32_16x8x8(d, a, b): d += A B for one warp, PTX's
 * mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 with C = D.  Every lane
 * of the warp calls it with the same shape; a (4 floats) and b (2 floats)
 * hold its fragments of the 16x8 A and the 8x8 B, d (4 floats) its part of
 * the 16x8 accumulator, in the PTX ISA's layouts (docs/emulator.md, "Tensor
 * cores").  The operands are floats already rounded to TF32 (ncc_tf32).
 * Needs sm_80 or later.  Under NCC_EMU the lanes meet in emu.c, which
 * computes the tile from their fragments.  dev_cuda.c's NVRTC prelude
 * carries the same text.
 * ncc_mma_f16_16x8x16(d, a, b), ncc_mma_bf16_16x8x16(d, a, b): the same for
 * mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (.bf16.bf16): A 16x16,
 * B 16x8; a holds 4 and b 2 32-bit registers of two packed FP16 (BF16)
 * values each, the lower-indexed in the low half (ncc_pack_f16x2,
 * ncc_pack_bf16x2 of floats already rounded with ncc_fp16, ncc_bf16: the
 * packing is exact).
 * ncc_mma_s8_16x8x16(d, a, b): mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32,
 * d 4 ints (int32 sums); a holds 2 and b 1 32-bit registers of four int8
 * values each, the lowest-indexed in the lowest byte (ncc_pack_s8x4). */
/* ncc_lds4(d, s), ncc_lds2(d, s): d[0..3] (d[0..1]) = s[0..3] (s[0..1]), s in
 * shared memory aligned to 16 (8) bytes: one 128-bit (64-bit) load, LDS.128
 * (LDS.64).  ncc_lds_s8x4(s): the four int8 s[0..3] (aligned to 4) as one
 * register, s[0] in the lowest byte: one 32-bit load, an s8 MMA's operand.
 * ncc_lds_u32x2(d, s): the four 16-bit values s[0..3] (aligned to 8) as two
 * registers, s[0] in the low half of d[0]: one 64-bit load, two FP16 (BF16)
 * MMA operands; ncc_lds_u32x4(d, s): eight (s aligned to 16) as four, one
 * 128-bit load (LDS.128), a lane's whole A fragment or two B fragments.
 * ncc_lds_i32x2(d, s): the ints s[0..1] (aligned to 8), one 64-bit load (an
 * im2col table's row: its offset and its tap).
 * ncc_fp16_bits(x), ncc_bf16_bits(x): the 16 bits of
 * ncc_fp16(x) (ncc_bf16(x)), what the half-width tiles hold, and what a
 * value stored half-width between kernels holds (Value.narrow, the storage
 * pass); ncc_fp16_load(h), ncc_bf16_load(h): those 16 bits as a float
 * again (exact).  ncc_ldg128(d, p): the 16 bytes at p (global memory,
 * aligned to 16) into d[0..3], one 128-bit load (LDG.E.128): eight stored
 * 16-bit values, or sixteen int8, lowest address in the low bits of d[0];
 * ncc_ldg128f(f, p): the 4 floats at p (global, aligned to 16) into f[0..3],
 * one 128-bit load;
 * ncc_sts32(s, v): v into the 4 bytes at s (shared, aligned to 4), STS.32.
 * ncc_st2f(p, a, b), ncc_st2h(p, a, b), ncc_st2b(p, a, b): a into p[0] and b
 * into p[1] (global; two floats, two 16-bit values or two int8, p aligned to
 * their 8, 4 or 2 bytes), one store (STG.E.64, STG.E, STG.E.U16): a GEMM's
 * epilogue stores an accumulator fragment's two columns so (out_pair in
 * codegen/gemm.c); ncc_ld2f(d, p), ncc_ld2h(d, p), ncc_ld2b(d, p): p[0], p[1]
 * into d[0], d[1], one load (LDG.E.64, ...) through the read-only path, the
 * epilogue's operands of the output's shape.
 * ncc_st4f(p, v): the 4 floats v[0..3] into p[0..3] (global, aligned to 16), one
 * store (STG.E.128): the float32 tiles' four consecutive columns (out_quad).
 * ncc_ldmatrix_x4/_x2[_trans](d, p): ldmatrix.sync.aligned.m8n8.x4/.x2
 * [.trans].shared.b16, p this lane's row address (16-byte aligned); lanes
 * 8i..8i+7 name the rows of matrix i, and lane 4g+t gets in d[i] matrix i's
 * row g, columns 2t and 2t+1 (.trans: rows 2t, 2t+1 of column g).
 * ncc_cp_async4/8/16(s, g): cp.async of 4, 8 (.ca) or 16 (.cg) bytes from global g
 * to shared s, both aligned to the size; ncc_cp_async_commit(): commit_group;
 * ncc_cp_async_wait(n): wait_group n (n a constant): all committed groups but
 * the n most recent have landed.  docs/emulator.md, "ldmatrix and cp.async". */
#if defined(NCC_EMU)
#define ncc_mma_tf32_16x8x8(d, a, b) ncc_emu_mma(NCC_EMU_MMA_TF32, (d), (a), (b))
#define ncc_mma_f16_16x8x16(d, a, b) ncc_emu_mma(NCC_EMU_MMA_F16, (d), (a), (b))
#define ncc_mma_bf16_16x8x16(d, a, b) ncc_emu_mma(NCC_EMU_MMA_BF16, (d), (a), (b))
#define ncc_mma_s8_16x8x16(d, a, b) ncc_emu_mma(NCC_EMU_MMA_S8, (float *)(d), (a), (b))
/* a vector load's address, aligned to its size as the GPU's LDS.64, LDS.128 and LDG.E.128 need */
#define NCC_EMU_VEC_ALIGNED(s, n) \
  if ((uintptr_t)(s) & ((n) - 1u)) ncc_emu_misaligned()
static __inline__ void ncc_lds4(float *d, const float *s) {
  NCC_EMU_VEC_ALIGNED(s, 16);
  memcpy(d, s, 4 * sizeof(float));
}
static __inline__ void ncc_lds2(float *d, const float *s) {
  NCC_EMU_VEC_ALIGNED(s, 8);
  memcpy(d, s, 2 * sizeof(float));
}
static __inline__ void ncc_lds_u32x2(unsigned *d, const unsigned short *s) {
  NCC_EMU_VEC_ALIGNED(s, 8);
  memcpy(d, s, 8);   /* little-endian: s[0] in the low half of d[0], as on the GPU */
}
static __inline__ void ncc_lds_i32x2(int *d, const int *s) {
  NCC_EMU_VEC_ALIGNED(s, 8);
  memcpy(d, s, 8);
}
static __inline__ void ncc_lds_u32x4(unsigned *d, const unsigned short *s) {
  NCC_EMU_VEC_ALIGNED(s, 16);
  memcpy(d, s, 16);
}
#define ncc_fp16_bits(x) ncc_f32_to_f16_bits(x)
#define ncc_bf16_bits(x) ncc_f32_to_bf16_bits(x)
#define ncc_fp16_load(h) ncc_f16_bits_to_f32(h)
#define ncc_bf16_load(h) ncc_bf16_bits_to_f32(h)
static __inline__ void ncc_ldg128(unsigned *d, const void *p) {
  NCC_EMU_VEC_ALIGNED(p, 16);
  memcpy(d, p, 16);
}
static __inline__ void ncc_ldg128f(float *f, const float *p) {
  NCC_EMU_VEC_ALIGNED(p, 16);
  memcpy(f, p, 16);
}
#define ncc_sts32(s, v) memcpy((s), &(v), 4)
#define ncc_ldmatrix_x4(d, p) ncc_emu_ldmatrix((d), (p), 4, 0)
#define ncc_ldmatrix_x2(d, p) ncc_emu_ldmatrix((d), (p), 2, 0)
#define ncc_ldmatrix_x4_trans(d, p) ncc_emu_ldmatrix((d), (p), 4, 1)
#define ncc_ldmatrix_x2_trans(d, p) ncc_emu_ldmatrix((d), (p), 2, 1)
#define ncc_cp_async4(s, g) ncc_emu_cp_async((s), (g), 4)
#define ncc_cp_async8(s, g) ncc_emu_cp_async((s), (g), 8)
#define ncc_cp_async16(s, g) ncc_emu_cp_async((s), (g), 16)
#define ncc_cp_async_commit() ncc_emu_cp_async_commit()
#define ncc_cp_async_wait(n) ncc_emu_cp_async_wait(n)
static __inline__ unsigned ncc_lds_s8x4(const signed char *s) {
  unsigned r;
  memcpy(&r, s, 4);   /* little-endian: s[0] in the lowest byte, as on the GPU */
  return r;
}
static __inline__ unsigned ncc_pack_f16x2(float lo, float hi) {
  return (unsigned)ncc_f32_to_f16_bits(lo) | (unsigned)ncc_f32_to_f16_bits(hi) << 16;
}
static __inline__ void ncc_st2f(float *p, float a, float b) {
  NCC_EMU_VEC_ALIGNED(p, 8);
  p[0] = a, p[1] = b;
}
static __inline__ void ncc_st4f(float *p, const float *v) {
  NCC_EMU_VEC_ALIGNED(p, 16);
  memcpy(p, v, 4 * sizeof(float));
}
static __inline__ void ncc_st2h(unsigned short *p, unsigned short a, unsigned short b) {
  NCC_EMU_VEC_ALIGNED(p, 4);
  p[0] = a, p[1] = b;
}
static __inline__ void ncc_st2b(signed char *p, signed char a, signed char b) {
  NCC_EMU_VEC_ALIGNED(p, 2);
  p[0] = a, p[1] = b;
}
static __inline__ void ncc_ld2f(float *d, const float *p) {
  NCC_EMU_VEC_ALIGNED(p, 8);
  d[0] = p[0], d[1] = p[1];
}
static __inline__ void ncc_ld2h(unsigned short *d, const unsigned short *p) {
  NCC_EMU_VEC_ALIGNED(p, 4);
  d[0] = p[0], d[1] = p[1];
}
static __inline__ void ncc_ld2b(signed char *d, const signed char *p) {
  NCC_EMU_VEC_ALIGNED(p, 2);
  d[0] = p[0], d[1] = p[1];
}
#else
static __device__ __forceinline__ void ncc_lds4(float *d, const float *s) {
  float4 v = *(const float4 *)s;
  d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
}
static __device__ __forceinline__ void ncc_lds2(float *d, const float *s) {
  float2 v = *(const float2 *)s;
  d[0] = v.x, d[1] = v.y;
}
static __device__ __forceinline__ unsigned ncc_lds_s8x4(const signed char *s) { return *(const unsigned *)s; }
static __device__ __forceinline__ void ncc_lds_u32x2(unsigned *d, const unsigned short *s) {
  uint2 v = *(const uint2 *)s;
  d[0] = v.x, d[1] = v.y;
}
static __device__ __forceinline__ void ncc_lds_i32x2(int *d, const int *s) {
  int2 v = *(const int2 *)s;
  d[0] = v.x, d[1] = v.y;
}
static __device__ __forceinline__ void ncc_lds_u32x4(unsigned *d, const unsigned short *s) {
  uint4 v = *(const uint4 *)s;
  d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
}
static __device__ __forceinline__ unsigned short ncc_fp16_bits(float x) { return __half_as_ushort(__float2half_rn(x)); }
static __device__ __forceinline__ unsigned short ncc_bf16_bits(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
static __device__ __forceinline__ float ncc_fp16_load(unsigned short h) { return __half2float(__ushort_as_half(h)); }
static __device__ __forceinline__ float ncc_bf16_load(unsigned short h) { return __bfloat162float(__ushort_as_bfloat16(h)); }
static __device__ __forceinline__ void ncc_ldg128(unsigned *d, const void *p) {
  uint4 v = *(const uint4 *)p;
  d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
}
static __device__ __forceinline__ void ncc_ldg128f(float *f, const float *p) {
  float4 v = *(const float4 *)p;
  f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
}
static __device__ __forceinline__ void ncc_sts32(void *s, unsigned v) { *(unsigned *)s = v; }
static __device__ __forceinline__ void ncc_st2f(float *__restrict__ p, float a, float b) { *(float2 *)p = make_float2(a, b); }
static __device__ __forceinline__ void ncc_st4f(float *__restrict__ p, const float *v) {
  *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
}
static __device__ __forceinline__ void ncc_st2h(unsigned short *__restrict__ p, unsigned short a, unsigned short b) {
  *(unsigned *)p = (unsigned)a | (unsigned)b << 16;   /* little-endian: p[0] in the low half */
}
static __device__ __forceinline__ void ncc_st2b(signed char *__restrict__ p, signed char a, signed char b) {
  *(unsigned short *)p = (unsigned short)((unsigned char)a | (unsigned)(unsigned char)b << 8);
}
static __device__ __forceinline__ void ncc_ld2f(float *d, const float *__restrict__ p) {
  float2 v = __ldg((const float2 *)p);
  d[0] = v.x, d[1] = v.y;
}
static __device__ __forceinline__ void ncc_ld2h(unsigned short *d, const unsigned short *__restrict__ p) {
  unsigned v = __ldg((const unsigned *)p);
  d[0] = (unsigned short)v, d[1] = (unsigned short)(v >> 16);
}
static __device__ __forceinline__ void ncc_ld2b(signed char *d, const signed char *__restrict__ p) {
  unsigned short v = __ldg((const unsigned short *)p);
  d[0] = (signed char)(v & 0xffu), d[1] = (signed char)(v >> 8);
}
static __device__ __forceinline__ unsigned ncc_smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
static __device__ __forceinline__ void ncc_ldmatrix_x4(unsigned *d, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(ncc_smem_addr(p)));
}
static __device__ __forceinline__ void ncc_ldmatrix_x2(unsigned *d, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(d[0]), "=r"(d[1]) : "r"(ncc_smem_addr(p)));
}
static __device__ __forceinline__ void ncc_ldmatrix_x4_trans(unsigned *d, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(ncc_smem_addr(p)));
}
static __device__ __forceinline__ void ncc_ldmatrix_x2_trans(unsigned *d, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n" : "=r"(d[0]), "=r"(d[1]) : "r"(ncc_smem_addr(p)));
}
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
static __device__ __forceinline__ void ncc_cp_async4(void *s, const void *g) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(ncc_smem_addr(s)), "l"(g) : "memory");
}
static __device__ __forceinline__ void ncc_cp_async8(void *s, const void *g) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" :: "r"(ncc_smem_addr(s)), "l"(g) : "memory");
}
static __device__ __forceinline__ void ncc_cp_async16(void *s, const void *g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(ncc_smem_addr(s)), "l"(g) : "memory");
}
#define ncc_cp_async_commit() asm volatile("cp.async.commit_group;\n" ::: "memory")
#define ncc_cp_async_wait(n) asm volatile("cp.async.wait_group %0;\n" :: "n"(n) : "memory")
#else   /* before sm_80: plain copies, done at once */
static __device__ __forceinline__ void ncc_cp_async4(void *s, const void *g) { *(unsigned *)s = *(const unsigned *)g; }
static __device__ __forceinline__ void ncc_cp_async8(void *s, const void *g) { *(uint2 *)s = *(const uint2 *)g; }
static __device__ __forceinline__ void ncc_cp_async16(void *s, const void *g) { *(uint4 *)s = *(const uint4 *)g; }
#define ncc_cp_async_commit() ((void)0)
#define ncc_cp_async_wait(n) ((void)0)
#endif
static __device__ __forceinline__ void ncc_mma_tf32_16x8x8(float *d, const float *a, const float *b) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])),
                 "r"(__float_as_uint(a[3])), "r"(__float_as_uint(b[0])), "r"(__float_as_uint(b[1])));
}
static __device__ __forceinline__ unsigned ncc_pack_f16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));   /* the first source to the high half */
  return r;
}
static __device__ __forceinline__ void ncc_mma_f16_16x8x16(float *d, const unsigned *a, const unsigned *b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
static __device__ __forceinline__ void ncc_mma_bf16_16x8x16(float *d, const unsigned *a, const unsigned *b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
static __device__ __forceinline__ void ncc_mma_s8_16x8x16(int *d, const unsigned *a, const unsigned *b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(b[0]));
}
#endif
/* four int8 values (floats holding integers in [-127, 127]: ncc_q8's, or a
 * quantized weight's) packed, a in the lowest byte: an s8 MMA's register */
static __device__ __forceinline__ unsigned ncc_pack_s8x4(float a, float b, float c, float d) {
  return ((unsigned)(int)a & 0xffu) | ((unsigned)(int)b & 0xffu) << 8 | ((unsigned)(int)c & 0xffu) << 16 |
         ((unsigned)(int)d & 0xffu) << 24;
}
/* two BF16 values (floats rounded with ncc_bf16) packed, lo in the low half: their top 16 bits */
static __device__ __forceinline__ unsigned ncc_pack_bf16x2(float lo, float hi) {
  union { float f; unsigned u; } l, h;
  l.f = lo, h.f = hi;
  return (l.u >> 16) | (h.u & 0xffff0000u);
}
#if defined(__CUDACC__) && !defined(__CUDACC_RTC__)
/* ncc_round_k: the rounded operand copies of a reduced-precision cuBLAS GEMM on
 * a GPU (ncc_gemm_ex; ncc_cudart.h, dev_cuda.c).  dst, dense (batch x rows x
 * cols), is src (row r, column c of matrix b at b * stride + r * ld + c)
 * rounded by prec (NCC_GEMM_TF32 1, _FP16 2, _BF16 3) with the functions
 * above, as ncc's own kernels and the emulator round.  Every such value is a
 * TF32 number, so cuBLAS then runs TF32 tensor cores on exact products with
 * float32 sums, whatever the precision: cuBLAS's own _FAST_16F/_16BF compute
 * types round differently (and not as PyTorch does), which the first GPU run
 * showed. */
#define NCC_ROUND_K_DECL static __global__
NCC_ROUND_K_DECL void ncc_round_k(const float *src, long long ld, long long stride, int rows, int cols, int batch,
                                   int prec, float *dst) {
  long long per = (long long)rows * cols, total = per * batch;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long b = i / per, rc = i - b * per, r = rc / cols, c = rc - r * cols;
    float v = src[b * stride + r * ld + c];
    dst[i] = prec == 1 ? ncc_tf32(v) : prec == 2 ? ncc_fp16(v) : ncc_bf16(v);
  }
}
#endif
#endif

#endif
