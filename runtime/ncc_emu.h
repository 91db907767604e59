/* ncc_emu.h — the CUDA subset of generated kernels, spelled in C11, so that the
 * very MODEL.cu that nvcc compiles also compiles with `cc -x c -DNCC_EMU` and
 * runs on the CPU (docs/emulator.md has the facts and rules behind every choice;
 * the pitfalls cited below are numbered as there).
 *
 * - threadIdx/blockIdx/blockDim/gridDim are thread-local globals that live in
 *   libnccrt (pitfall 2: the builtins must be in the library loaded at start,
 *   not in a dlopen'ed model) and are set by the emulator.
 * - __shared__ is `static _Thread_local`: the threads (fibers) of one block run
 *   on one OS thread, blocks one after another, so that storage is exactly
 *   block-shared.  Dynamic shared memory comes through NCC_DYN_SHARED.
 * - CUDA fast-math intrinsics are macros (pitfall 1: glibc declares __expf...).
 * - __half and __nv_bfloat16 are storage-only structs (pitfall 5): arithmetic is
 *   in float with explicit round-to-nearest-even conversions; a kernel that
 *   does arithmetic on __half directly does not compile here, on purpose.
 * - atomics are real atomics: blocks run on several OS threads.
 * - warp collectives (__shfl_*_sync, __ballot_sync, __all_sync, __any_sync,
 *   __syncwarp, __activemask) and the tensor cores' mma.sync (ncc_mma_*) are
 *   calls into emu.c, where the lanes of a warp (fibers) meet; a kernel that
 *   uses them is flagged NCC_KF_WARP.
 */
#ifndef NCC_EMU_H
#define NCC_EMU_H
#include <math.h>
#include <string.h>
#include <stdint.h>
#include <stddef.h>
#include "ncc_rt.h"

#ifdef __cplusplus
#error "ncc_emu.h is the C11 emulation; compile the kernels as C (-x c -std=c11 -DNCC_EMU)"
#endif

/* ---- built-in variables ---- */
typedef struct dim3 { unsigned x, y, z; } dim3;
typedef dim3 uint3;
/* initial-exec: one %fs-relative access instead of a __tls_get_addr call, also
 * from a dlopen'ed model; the variables live in libnccrt (a few dozen bytes of
 * static TLS, which glibc's surplus covers even when libnccrt is dlopen'ed). */
#define NCC_EMU_TLS __attribute__((tls_model("initial-exec")))
extern _Thread_local uint3 threadIdx NCC_EMU_TLS;
extern _Thread_local uint3 blockIdx NCC_EMU_TLS;
extern _Thread_local dim3 blockDim NCC_EMU_TLS;
extern _Thread_local dim3 gridDim NCC_EMU_TLS;
extern _Thread_local void *ncc_emu_shared_dyn NCC_EMU_TLS;   /* this block's dynamic shared memory */
#define warpSize 32

/* ---- qualifiers ---- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static _Thread_local
#define __constant__
/* __restrict__ is a keyword of gcc and clang in C as well. */

/* ---- barriers and fences (runtime: emu.c) ---- */
void ncc_emu_syncthreads(void);
/* A kernel's vector load from an address its size does not divide: the launch
 * fails with an error naming the kernel (a GPU faults on it). */
void ncc_emu_misaligned(void);
#define __syncthreads() ncc_emu_syncthreads()
#define __threadfence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define __threadfence_block() __atomic_thread_fence(__ATOMIC_SEQ_CST)

/* ---- warp collectives (runtime: emu.c; docs/emulator.md, "Warp collectives") ----
 * ncc_emu_warp(op, mask, value bits, lane operand, width) waits until every
 * lane named in mask has reached the same collective, and returns this lane's
 * result.  Shuffles move 32- or 64-bit values by their bits; width defaults to
 * 32 as in CUDA (the trailing "32, 0" fills the optional argument). */
enum { NCC_EMU_SHFL_IDX, NCC_EMU_SHFL_UP, NCC_EMU_SHFL_DOWN, NCC_EMU_SHFL_XOR, NCC_EMU_BALLOT, NCC_EMU_ALL,
       NCC_EMU_ANY, NCC_EMU_SYNCWARP, NCC_EMU_ACTIVEMASK, NCC_EMU_MMA_TF32,
       NCC_EMU_MMA_F16, NCC_EMU_MMA_BF16, NCC_EMU_MMA_S8, NCC_EMU_LDMATRIX };
unsigned long long ncc_emu_warp(int op, unsigned mask, unsigned long long v, int b, int width);
static __inline__ int ncc_emu_shfl_i32(int op, unsigned m, int v, int b, int w) {
  return (int)(unsigned)ncc_emu_warp(op, m, (unsigned)v, b, w);
}
static __inline__ unsigned ncc_emu_shfl_u32(int op, unsigned m, unsigned v, int b, int w) {
  return (unsigned)ncc_emu_warp(op, m, v, b, w);
}
static __inline__ long long ncc_emu_shfl_i64(int op, unsigned m, long long v, int b, int w) {
  return (long long)ncc_emu_warp(op, m, (unsigned long long)v, b, w);
}
static __inline__ unsigned long long ncc_emu_shfl_u64(int op, unsigned m, unsigned long long v, int b, int w) {
  return ncc_emu_warp(op, m, v, b, w);
}
static __inline__ long ncc_emu_shfl_l(int op, unsigned m, long v, int b, int w) {
  return (long)ncc_emu_warp(op, m, (unsigned long long)v, b, w);
}
static __inline__ unsigned long ncc_emu_shfl_ul(int op, unsigned m, unsigned long v, int b, int w) {
  return (unsigned long)ncc_emu_warp(op, m, v, b, w);
}
static __inline__ float ncc_emu_shfl_f32(int op, unsigned m, float v, int b, int w) {
  uint32_t u;
  memcpy(&u, &v, 4);
  u = (uint32_t)ncc_emu_warp(op, m, u, b, w);
  memcpy(&v, &u, 4);
  return v;
}
static __inline__ double ncc_emu_shfl_f64(int op, unsigned m, double v, int b, int w) {
  unsigned long long u;
  memcpy(&u, &v, 8);
  u = ncc_emu_warp(op, m, u, b, w);
  memcpy(&v, &u, 8);
  return v;
}
#define NCC_EMU_SHFL_(op, m, v, b, w, ...)                                                                   \
  _Generic((v), int: ncc_emu_shfl_i32, unsigned: ncc_emu_shfl_u32, long: ncc_emu_shfl_l,                    \
      unsigned long: ncc_emu_shfl_ul, long long: ncc_emu_shfl_i64, unsigned long long: ncc_emu_shfl_u64,     \
      float: ncc_emu_shfl_f32, double: ncc_emu_shfl_f64)((op), (m), (v), (b), (w))
#define __shfl_sync(m, v, ...) NCC_EMU_SHFL_(NCC_EMU_SHFL_IDX, m, v, __VA_ARGS__, 32, 0)
#define __shfl_up_sync(m, v, ...) NCC_EMU_SHFL_(NCC_EMU_SHFL_UP, m, v, __VA_ARGS__, 32, 0)
#define __shfl_down_sync(m, v, ...) NCC_EMU_SHFL_(NCC_EMU_SHFL_DOWN, m, v, __VA_ARGS__, 32, 0)
#define __shfl_xor_sync(m, v, ...) NCC_EMU_SHFL_(NCC_EMU_SHFL_XOR, m, v, __VA_ARGS__, 32, 0)
#define __ballot_sync(m, p) ((unsigned)ncc_emu_warp(NCC_EMU_BALLOT, (m), (p) != 0, 0, 32))
#define __all_sync(m, p) ((int)ncc_emu_warp(NCC_EMU_ALL, (m), (p) != 0, 0, 32))
#define __any_sync(m, p) ((int)ncc_emu_warp(NCC_EMU_ANY, (m), (p) != 0, 0, 32))
/* __syncwarp() is __syncwarp(0xffffffff): an empty argument makes "0 + + 0" and the test false */
#define __syncwarp(...) ((void)ncc_emu_warp(NCC_EMU_SYNCWARP, #__VA_ARGS__[0] ? 0 + __VA_ARGS__ + 0 : 0xffffffffu, 0, 0, 32))
/* __activemask(): the lanes of the warp at this same __activemask (its line) in
 * the same round; CUDA promises no reconvergence after a branch, and neither
 * does the emulation: write __syncwarp() before it where all lanes must count */
#define __activemask() ((unsigned)ncc_emu_warp(NCC_EMU_ACTIVEMASK, 0u, 0, __LINE__, 32))

/* ---- warp matrix multiply-accumulate (ncc_kernel.h's ncc_mma_*; docs/emulator.md,
 * "Tensor cores") ----
 * A lane posts its fragments (ncc_emu_mma_frag) and waits until all 32 lanes of
 * its warp have; emu.c then gathers the whole A, B and C tiles by the PTX ISA's
 * fragment layouts, computes D and hands every lane its part of it. */
typedef struct ncc_emu_mma_frag { const void *a, *b; float *d; } ncc_emu_mma_frag;
/* a, b: floats (NCC_EMU_MMA_TF32) or 32-bit registers of two packed halves
 * (NCC_EMU_MMA_F16, NCC_EMU_MMA_BF16) or of four int8 (NCC_EMU_MMA_S8, whose d
 * points to 4 ints) */
static __inline__ void ncc_emu_mma(int op, float *d, const void *a, const void *b) {
  ncc_emu_mma_frag fr;
  fr.a = a, fr.b = b, fr.d = d;
  (void)ncc_emu_warp(op, 0xffffffffu, (unsigned long long)(uintptr_t)&fr, 0, 32);
}

/* ---- ldmatrix (ncc_kernel.h's ncc_ldmatrix_*; docs/emulator.md, "ldmatrix and
 * cp.async") ----
 * ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16: every lane posts its row
 * address; once all 32 have, emu.c reads the N 8x8 matrices of 16-bit values
 * (matrix i's row r at the address of lane 8 i + r) and gives each lane its
 * 32-bit register of each, by the PTX ISA's layout. */
typedef struct ncc_emu_ldm { const void *p; unsigned *d; int num, trans; } ncc_emu_ldm;
static __inline__ void ncc_emu_ldmatrix(unsigned *d, const void *p, int num, int trans) {
  ncc_emu_ldm q;
  q.p = p, q.d = d, q.num = num, q.trans = trans;
  (void)ncc_emu_warp(NCC_EMU_LDMATRIX, 0xffffffffu, (unsigned long long)(uintptr_t)&q, 0, 32);
}
/* cp.async: a thread's copies of 4, 8 or 16 bytes from global to shared memory
 * wait in its queue (the source read at issue) and land at
 * ncc_emu_cp_async_wait(n), which completes every committed group but the n
 * most recent, as cp.async.wait_group does; checked mode fills the
 * destination with 0xff bytes at issue, so a read before the wait shows */
void ncc_emu_cp_async(void *dst, const void *src, int bytes);
void ncc_emu_cp_async_commit(void);
void ncc_emu_cp_async_wait(int n);

/* ---- math: fast-math intrinsics as macros (pitfall 1) ---- */
#define __expf(x) expf(x)
#define __exp10f(x) powf(10.0f, (x))
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __powf(x, y) powf((x), (y))
#define __fdividef(x, y) ((x) / (y))
#define __fdiv_rn(x, y) ((x) / (y))
#define __fadd_rn(x, y) ((x) + (y))
#define __fsub_rn(x, y) ((x) - (y))
#define __fmul_rn(x, y) ((x) * (y))
#define __fmaf_rn(x, y, z) fmaf((x), (y), (z))
#define __frcp_rn(x) (1.0f / (x))
#define __fsqrt_rn(x) sqrtf(x)
#define __saturatef(x) fminf(fmaxf((x), 0.0f), 1.0f)
#define __ldg(p) (*(p))
static __inline__ float ncc_emu_rsqrtf(float x) { return 1.0f / sqrtf(x); }
#define rsqrtf(x) ncc_emu_rsqrtf(x)
#define __frsqrt_rn(x) ncc_emu_rsqrtf(x)
static __inline__ float ncc_emu_normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
#define normcdff(x) ncc_emu_normcdff(x)

/* min/max: CUDA overloads them; _Generic on the common type picks the same one.
 * For floats that is fminf/fmaxf, IEEE minNum/maxNum in C and CUDA alike: a
 * NaN operand loses (fmaxf(NaN, 0) is 0), so no emulation is needed, and
 * generated code that must propagate NaN as PyTorch does compares instead. */
static __inline__ int ncc_emu_mini(int a, int b) { return a < b ? a : b; }
static __inline__ int ncc_emu_maxi(int a, int b) { return a > b ? a : b; }
static __inline__ unsigned ncc_emu_minu(unsigned a, unsigned b) { return a < b ? a : b; }
static __inline__ unsigned ncc_emu_maxu(unsigned a, unsigned b) { return a > b ? a : b; }
static __inline__ long long ncc_emu_minll(long long a, long long b) { return a < b ? a : b; }
static __inline__ long long ncc_emu_maxll(long long a, long long b) { return a > b ? a : b; }
static __inline__ unsigned long long ncc_emu_minull(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static __inline__ unsigned long long ncc_emu_maxull(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
#define min(a, b) _Generic((a) + (b), int: ncc_emu_mini, unsigned: ncc_emu_minu, \
    long: ncc_emu_minll, long long: ncc_emu_minll, unsigned long: ncc_emu_minull, \
    unsigned long long: ncc_emu_minull, float: fminf, double: fmin)((a), (b))
#define max(a, b) _Generic((a) + (b), int: ncc_emu_maxi, unsigned: ncc_emu_maxu, \
    long: ncc_emu_maxll, long long: ncc_emu_maxll, unsigned long: ncc_emu_maxull, \
    unsigned long long: ncc_emu_maxull, float: fmaxf, double: fmax)((a), (b))

/* ---- bit casts ---- */
static __inline__ int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static __inline__ unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
static __inline__ float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static __inline__ float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }

/* ---- float <-> int conversions with CUDA's rounding and saturation (NaN -> 0) ---- */
static __inline__ int ncc_emu_f2i_sat(float r) {
  if (r != r) return 0;
  if (r >= 2147483648.0f) return 2147483647;
  if (r < -2147483648.0f) return -2147483647 - 1;
  return (int)r;
}
static __inline__ unsigned ncc_emu_f2u_sat(float r) {
  if (r != r || r <= 0.0f) return 0u;
  if (r >= 4294967296.0f) return 4294967295u;
  return (unsigned)r;
}
#define __float2int_rn(x) ncc_emu_f2i_sat(rintf(x))   /* rintf: to nearest, ties to even */
#define __float2int_rz(x) ncc_emu_f2i_sat(truncf(x))
#define __float2int_rd(x) ncc_emu_f2i_sat(floorf(x))
#define __float2int_ru(x) ncc_emu_f2i_sat(ceilf(x))
#define __float2uint_rn(x) ncc_emu_f2u_sat(rintf(x))
#define __float2uint_rz(x) ncc_emu_f2u_sat(truncf(x))
#define __int2float_rn(i) ((float)(int)(i))
#define __uint2float_rn(i) ((float)(unsigned)(i))

/* ---- __half and __nv_bfloat16: storage only, conversions round to nearest even ---- */
typedef struct __half { unsigned short x; } __half;
typedef struct __nv_bfloat16 { unsigned short x; } __nv_bfloat16;

static __inline__ unsigned short ncc_f32_to_f16_bits(float f) {
  /* F. Giesen's float_to_half_fast3_rtne: exact round-to-nearest-even incl. subnormals. */
  uint32_t u, sign, o;
  memcpy(&u, &f, 4);
  sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  if (u >= 0x47800000u) {                  /* >= 65536 (and inf/nan): rounding can't reach it */
    o = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (u < 0x38800000u) {            /* result is subnormal or zero */
    float a, magic = 0.5f;                 /* (127-15+23-10+1) << 23: FPU rounds the shift */
    uint32_t ai, mu;
    memcpy(&a, &u, 4);
    a += magic;
    memcpy(&ai, &a, 4);
    memcpy(&mu, &magic, 4);
    o = ai - mu;
  } else {
    uint32_t odd = (u >> 13) & 1u;
    u += ((uint32_t)(15 - 127) << 23) + 0xfffu;
    u += odd;
    o = u >> 13;
  }
  return (unsigned short)(o | sign);
}
static __inline__ float ncc_f16_bits_to_f32(unsigned short h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
  float f;
  if (e == 0) {
    if (m == 0) { u = sign; memcpy(&f, &u, 4); return f; }
    f = (float)m * 5.9604644775390625e-8f;   /* m * 2^-24, exact */
    return sign ? -f : f;
  }
  if (e == 31) u = sign | 0x7f800000u | (m << 13);
  else u = sign | ((e + 112u) << 23) | (m << 13);
  memcpy(&f, &u, 4);
  return f;
}
static __inline__ unsigned short ncc_f32_to_bf16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
static __inline__ float ncc_bf16_bits_to_f32(unsigned short b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static __inline__ __half __float2half(float f) { __half h; h.x = ncc_f32_to_f16_bits(f); return h; }
static __inline__ float __half2float(__half h) { return ncc_f16_bits_to_f32(h.x); }
static __inline__ __nv_bfloat16 __float2bfloat16(float f) { __nv_bfloat16 b; b.x = ncc_f32_to_bf16_bits(f); return b; }
static __inline__ float __bfloat162float(__nv_bfloat16 b) { return ncc_bf16_bits_to_f32(b.x); }
#define __float2half_rn(f) __float2half(f)
#define __float2bfloat16_rn(f) __float2bfloat16(f)
static __inline__ unsigned short __half_as_ushort(__half h) { return h.x; }
static __inline__ __half __ushort_as_half(unsigned short u) { __half h; h.x = u; return h; }
static __inline__ unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.x; }
static __inline__ __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { __nv_bfloat16 b; b.x = u; return b; }

/* ---- atomics: blocks run on several OS threads, so these are real atomics ---- */
static __inline__ float ncc_emu_atomic_add_f32(float *p, float v) {
  uint32_t *q = (uint32_t *)p, old = __atomic_load_n(q, __ATOMIC_RELAXED), nw;
  float of, nf;
  do {
    memcpy(&of, &old, 4);
    nf = of + v;
    memcpy(&nw, &nf, 4);
  } while (!__atomic_compare_exchange_n(q, &old, nw, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
  return of;
}
static __inline__ int ncc_emu_atomic_add_i32(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static __inline__ unsigned ncc_emu_atomic_add_u32(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static __inline__ unsigned long long ncc_emu_atomic_add_u64(unsigned long long *p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
#define atomicAdd(p, v) _Generic((p), float *: ncc_emu_atomic_add_f32, int *: ncc_emu_atomic_add_i32, \
    unsigned *: ncc_emu_atomic_add_u32, unsigned long long *: ncc_emu_atomic_add_u64)((p), (v))
#define atomicSub(p, v) _Generic((p), int *: ncc_emu_atomic_add_i32, unsigned *: ncc_emu_atomic_add_u32)((p), -(v))

static __inline__ int ncc_emu_atomic_max_i32(int *p, int v) {
  int old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {}
  return old;
}
static __inline__ unsigned ncc_emu_atomic_max_u32(unsigned *p, unsigned v) {
  unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {}
  return old;
}
static __inline__ int ncc_emu_atomic_min_i32(int *p, int v) {
  int old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old > v && !__atomic_compare_exchange_n(p, &old, v, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {}
  return old;
}
static __inline__ unsigned ncc_emu_atomic_min_u32(unsigned *p, unsigned v) {
  unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old > v && !__atomic_compare_exchange_n(p, &old, v, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {}
  return old;
}
#define atomicMax(p, v) _Generic((p), int *: ncc_emu_atomic_max_i32, unsigned *: ncc_emu_atomic_max_u32)((p), (v))
#define atomicMin(p, v) _Generic((p), int *: ncc_emu_atomic_min_i32, unsigned *: ncc_emu_atomic_min_u32)((p), (v))
static __inline__ int ncc_emu_atomic_exch_i32(int *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static __inline__ unsigned ncc_emu_atomic_exch_u32(unsigned *p, unsigned v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static __inline__ float ncc_emu_atomic_exch_f32(float *p, float v) {
  uint32_t nw, old;
  float of;
  memcpy(&nw, &v, 4);
  old = __atomic_exchange_n((uint32_t *)p, nw, __ATOMIC_SEQ_CST);
  memcpy(&of, &old, 4);
  return of;
}
#define atomicExch(p, v) _Generic((p), int *: ncc_emu_atomic_exch_i32, unsigned *: ncc_emu_atomic_exch_u32, \
    float *: ncc_emu_atomic_exch_f32)((p), (v))
static __inline__ int ncc_emu_atomic_cas_i32(int *p, int cmp, int v) {
  __atomic_compare_exchange_n(p, &cmp, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return cmp;
}
static __inline__ unsigned ncc_emu_atomic_cas_u32(unsigned *p, unsigned cmp, unsigned v) {
  __atomic_compare_exchange_n(p, &cmp, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return cmp;
}
#define atomicCAS(p, c, v) _Generic((p), int *: ncc_emu_atomic_cas_i32, unsigned *: ncc_emu_atomic_cas_u32)((p), (c), (v))

#endif
