/* kernels.cu — hand-written kernels in the shared CUDA subset, the runtime's
 * own test material: the same file is compiled as C11 against the emulator
 * (test_emu.c includes it), by nvcc for sm_90, and by NVRTC through the jit
 * prelude, exactly like a generated MODEL.cu. */
#include "ncc_kernel.h"

/* ---- kernels ---- */
/* y = max(x + b[channel], 0) on an NCHW-like layout */
NCC_KERNEL void k_bias_relu(const float *__restrict__ x, const float *__restrict__ b, float *__restrict__ y,
                            int n, int inner, int channels) {
  int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    float v = x[i] + b[(i / inner) % channels];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

/* f16 storage, f32 arithmetic: y = relu(x) * s */
NCC_KERNEL void k_relu_scale_f16(const __half *__restrict__ x, __half *__restrict__ y, float s, int n) {
  int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    float v = __half2float(x[i]);
    y[i] = __float2half(fmaxf(v, 0.0f) * s);
  }
}

/* 16x16 shared-memory tiled SGEMM, C[M,N] = A[M,K] B[K,N], row-major.
 * Adds in k order, so it equals an ordered CPU loop bit for bit (fmaf in both). */
NCC_KERNEL void k_sgemm16(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M,
                          int N, int K) {
  __shared__ float As[16][16];
  __shared__ float Bs[16][16];
  int tx = (int)threadIdx.x, ty = (int)threadIdx.y;
  int row = (int)blockIdx.y * 16 + ty, col = (int)blockIdx.x * 16 + tx;
  float acc = 0.0f;
  int t, k;
  for (t = 0; t < K; t += 16) {
    As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
    Bs[ty][tx] = (col < N && t + ty < K) ? B[(t + ty) * N + col] : 0.0f;
    __syncthreads();
    for (k = 0; k < 16 && t + k < K; k++) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

/* per-block tree sum with dynamic shared memory (blockDim.x a power of two) */
NCC_KERNEL void k_block_sum(const float *__restrict__ x, float *__restrict__ out, int n) {
  NCC_DYN_SHARED(float, s);
  unsigned t = threadIdx.x, st;
  int i = (int)(blockIdx.x * blockDim.x + t);
  s[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (st = blockDim.x / 2; st > 0; st >>= 1) {
    if (t < st) s[t] += s[t + st];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

/* the same with the barrier inside the loop forgotten: a race the emulator
 * must expose in one of the two fiber orders */
NCC_KERNEL void k_block_sum_racy(const float *__restrict__ x, float *__restrict__ out, int n) {
  NCC_DYN_SHARED(float, s);
  unsigned t = threadIdx.x, st;
  int i = (int)(blockIdx.x * blockDim.x + t);
  s[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (st = blockDim.x / 2; st > 0; st >>= 1) {
    if (t < st) s[t] += s[t + st];
  }
  __syncthreads();
  if (t == 0) out[blockIdx.x] = s[0];
}

/* a return before a barrier: undefined on a GPU, reported by the emulator */
NCC_KERNEL void k_early_return(const float *__restrict__ x, float *__restrict__ out) {
  __shared__ float s[64];
  unsigned t = threadIdx.x;
  if (t >= 48) return;
  s[t] = x[t];
  __syncthreads();
  out[t] = s[(t + 1) % 48];
}

/* histogram and sums through atomics, across blocks on several OS threads */
NCC_KERNEL void k_atomics(const int *__restrict__ v, int n, int *__restrict__ hist, float *__restrict__ fsum,
                          int *__restrict__ imax, unsigned *__restrict__ ucount) {
  int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    atomicAdd(&hist[v[i] & 15], 1);
    atomicAdd(fsum, (float)(v[i] & 7));
    atomicMax(imax, v[i]);
    atomicAdd(ucount, 1u);
  }
}

/* one past the end: the checked mode must name kernel, block and thread */
NCC_KERNEL void k_oob_write(const float *__restrict__ x, float *__restrict__ y, int n) {
  int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i <= n) y[i] = x[i < n ? i : 0] * 2.0f;
}

/* block 0 waits (bounded) for block 1's flag: only true concurrency lets it see it */
NCC_KERNEL void k_handshake(volatile int *flag, int *seen, long long spins) {
  long long s;
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 1) { *flag = 1; return; }
  if (blockIdx.x == 0) {
    for (s = 0; s < spins; s++)
      if (*flag) { *seen = 1; return; }
  }
}

/* uses a barrier but is (wrongly) launched without NCC_KF_BARRIER */
NCC_KERNEL void k_unflagged_barrier(float *__restrict__ y) {
  y[threadIdx.x] = 1.0f;
  __syncthreads();
}

/* 128-bit loads (ncc_ldg128): thread t copies the 16 bytes at src + off + 16 t
 * to dst[4 t..]; off not a multiple of 16 is the misalignment a GPU faults on */
NCC_KERNEL void k_ldg128(const unsigned char *__restrict__ src, unsigned *__restrict__ dst, int off) {
  unsigned q[4];
  int t = (int)threadIdx.x;
  ncc_ldg128(q, src + off + 16 * t);
  for (int i = 0; i < 4; i++) dst[4 * t + i] = q[i];
}

/* the pair loads and stores of a GEMM epilogue (ncc_ld2f/h/b, ncc_st2f/h/b):
 * thread t reads the pair at element 2 t + off of each source and writes it
 * to the same place of each destination; an odd off is the misalignment a
 * GPU faults on */
NCC_KERNEL void k_pairs(const float *__restrict__ f, const unsigned short *__restrict__ h,
                        const signed char *__restrict__ b, float *__restrict__ fo, unsigned short *__restrict__ ho,
                        signed char *__restrict__ bo, int off) {
  int i = 2 * (int)threadIdx.x + off;
  float fv[2];
  unsigned short hv[2];
  signed char bv[2];
  ncc_ld2f(fv, &f[i]);
  ncc_ld2h(hv, &h[i]);
  ncc_ld2b(bv, &b[i]);
  ncc_st2f(&fo[i], fv[0], fv[1]);
  ncc_st2h(&ho[i], hv[0], hv[1]);
  ncc_st2b(&bo[i], bv[0], bv[1]);
}

/* the float32 epilogue's stores of four (ncc_st4f): thread t stores f[4 t + off ..] at fo[4 t + off]; off not a
 * multiple of 4 is the misalignment a GPU faults on */
NCC_KERNEL void k_quads(const float *__restrict__ f, float *__restrict__ fo, int off) {
  int i = 4 * (int)threadIdx.x + off;
  float v[4] = {f[i], f[i + 1], f[i + 2], f[i + 3]};
  ncc_st4f(&fo[i], v);
}

/* shared-memory vector loads (ncc_lds_u32x4, ncc_lds_u32x2, ncc_lds4): src's
 * 64 16-bit values staged in shared memory, then thread t loads the 16 bytes
 * at value 8 t + off (x4; its first 8 by x2; ncc_lds4 the same bytes as
 * floats, of which the last 8) into dst[8 t..]; off not a multiple of 8 (of 4 for x2) is the
 * misalignment a GPU faults on */
NCC_KERNEL void k_lds_vec(const unsigned short *__restrict__ src, unsigned *__restrict__ dst, int off) {
  __shared__ __align__(16) unsigned short s[80];
  int t = (int)threadIdx.x;
  for (int i = 0; i < 20; i++) s[20 * t + i] = src[20 * t + i];
  __syncthreads();
  unsigned q[4], h[2];
  float f[4];
  ncc_lds_u32x4(q, &s[8 * t + off]);
  ncc_lds_u32x2(h, &s[8 * t + off]);
  ncc_lds4(f, (const float *)&s[8 * t + off]);
  for (int i = 0; i < 4; i++) dst[8 * t + i] = q[i];
  dst[8 * t + 4] = h[0], dst[8 * t + 5] = h[1];
  for (int i = 2; i < 4; i++) {   /* the floats' last two words, as bits */
    union { float f; unsigned u; } c;
    c.f = f[i];
    dst[8 * t + 4 + i] = c.u;
  }
}

/* ldmatrix, one warp: src is a 16x16 tile of 16-bit values, row-major, copied
 * to shared memory.  mode 0: x4 with lane l giving the address of row
 * l % 8 + 8 ((l / 8) % 2), columns 8 (l / 16) on (an mma.m16n8k16 A
 * fragment); mode 1: x2.trans over the first 16 rows of 8 (a k-major B tile,
 * row k at 16 k bytes), lanes 0..15 giving rows 0..15; mode 2: mode 0 from
 * an address 8 bytes off (a GPU faults).  dst[4 l + i] = lane l's register i */
NCC_KERNEL void k_ldmatrix(const unsigned short *__restrict__ src, unsigned *__restrict__ dst, int mode) {
  __shared__ __align__(16) unsigned short t[16 * 16 + 8];
  int l = (int)threadIdx.x;
  unsigned d[4] = {0, 0, 0, 0};
  for (int i = l; i < 256; i += 32) t[i] = src[i];
  __syncthreads();
  if (mode == 1) {
    ncc_ldmatrix_x2_trans(d, &t[(l % 16) * 8]);
  } else {
    int row = l % 8 + 8 * ((l / 8) % 2), col = 8 * (l / 16);
    ncc_ldmatrix_x4(d, &t[row * 16 + col + (mode == 2 ? 4 : 0)]);
  }
  for (int i = 0; i < 4; i++) dst[4 * l + i] = d[i];
}

/* cp.async, 64 threads: group 0 copies src[0..63] into s0 (4 bytes a
 * thread), group 1 src[64..127] into s1 (16 bytes a thread 0..7, 8 bytes a
 * thread 8..23).  mode 0:
 * wait_group 1 (group 0 landed), barrier, dst[t] = s0[(t + 1) % 64]; then
 * wait_group 0, barrier, dst[64 + t] = s1[(t + 5) % 64].  mode 1: reads s1
 * before waiting for group 1 (a bug the checked emulator shows as NaN where
 * the copy has not landed), then waits.
 * mode 2: a 16-byte copy from an address 16 does not divide (4: an 8-byte
 * one, 8).  mode 3: the
 * threads exit without waiting for group 1. */
NCC_KERNEL void k_cp_async(const float *__restrict__ src, float *__restrict__ dst, int mode) {
  __shared__ __align__(16) float s0[64];
  __shared__ __align__(16) float s1[64];
  int t = (int)threadIdx.x;
  ncc_cp_async4(&s0[t], &src[t]);
  ncc_cp_async_commit();
  if (t < 8) ncc_cp_async16(&s1[4 * t], &src[64 + 4 * t + (mode == 2 ? 1 : 0)]);
  else if (t < 24) ncc_cp_async8(&s1[2 * t + 16], &src[80 + 2 * t + (mode == 4 ? 1 : 0)]);
  ncc_cp_async_commit();
  ncc_cp_async_wait(1);
  __syncthreads();
  dst[t] = s0[(t + 1) % 64];
  if (mode == 3) return;
  if (mode != 1) ncc_cp_async_wait(0);
  __syncthreads();
  dst[64 + t] = s1[(t + 5) % 64];
  if (mode == 1) ncc_cp_async_wait(0);
}

/* 3-D geometry: every thread writes its coordinates */
NCC_KERNEL void k_coords(int *__restrict__ out) {
  int bx = (int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
  int tx = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  int i = bx * (int)(blockDim.x * blockDim.y * blockDim.z) + tx;
  out[4 * i + 0] = (int)threadIdx.x;
  out[4 * i + 1] = (int)threadIdx.y;
  out[4 * i + 2] = (int)threadIdx.z;
  out[4 * i + 3] = (int)(blockIdx.x + 100 * blockIdx.y + 10000 * blockIdx.z);
}

/* softmax over rows of length <= 256 with a max and a sum reduction in shared memory */
NCC_KERNEL void k_softmax(const float *__restrict__ x, float *__restrict__ y, int cols) {
  __shared__ float red[256];
  unsigned t = threadIdx.x, st;
  const float *r = x + blockIdx.x * cols;
  float v = (int)t < cols ? r[t] : -INFINITY, m, e;
  red[t] = v;
  __syncthreads();
  for (st = blockDim.x / 2; st > 0; st >>= 1) {
    if (t < st) red[t] = fmaxf(red[t], red[t + st]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  e = (int)t < cols ? __expf(v - m) : 0.0f;
  red[t] = e;
  __syncthreads();
  for (st = blockDim.x / 2; st > 0; st >>= 1) {
    if (t < st) red[t] += red[t + st];
    __syncthreads();
  }
  if ((int)t < cols) y[blockIdx.x * cols + t] = e / red[0];
}
/* reads dynamic shared memory before writing it: undefined on a GPU, NaN in checked mode */
NCC_KERNEL void k_uninit_shared(float *__restrict__ out) {
  NCC_DYN_SHARED(float, s);
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
  s[threadIdx.x] = 1.0f;
}
/* int8 quantisation: round to nearest even, saturate to [-128, 127] */
NCC_KERNEL void k_quant_i8(const float *__restrict__ x, signed char *__restrict__ q, float inv_scale, int n) {
  int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) q[i] = (signed char)max(-128, min(127, __float2int_rn(x[i] * inv_scale)));
}
/* warp collectives: every thread writes WARP_SLOTS results (test_emu.c has
 * the reference by CUDA's definitions).  Lanes are linear thread ids in
 * x-major order; a block size that is not a multiple of 32 leaves a partial
 * last warp, whose masks name only its nl lanes (nl a power of two here). */
#define WARP_SLOTS 18
NCC_KERNEL void k_warp_ops(int *__restrict__ out) {
  __shared__ int sh[1024];
  int nthr = (int)(blockDim.x * blockDim.y * blockDim.z);
  int tid = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  int lane = tid & 31, warp = tid >> 5, nl = min(32, nthr - warp * 32);
  unsigned full = nl == 32 ? 0xffffffffu : (1u << nl) - 1u;
  int v = tid * 3 + 1 + (int)blockIdx.x * 1000, s, o;
  int *r = out + ((int)blockIdx.x * nthr + tid) * WARP_SLOTS;
  double d;
  r[0] = __shfl_sync(full, v, 5);
  r[1] = __shfl_sync(full, v, lane + 3, 8);
  r[2] = __shfl_up_sync(full, v, 3);
  r[3] = __shfl_up_sync(full, v, 2, 8);
  r[4] = __shfl_down_sync(full, v, 5, 16);
  r[5] = __shfl_xor_sync(full, v, 1);
  r[6] = __shfl_xor_sync(full, v, 6, 4);
  s = v;
  for (o = nl / 2; o > 0; o >>= 1) s += __shfl_xor_sync(full, s, o, nl);
  r[7] = s;
  r[8] = (int)__ballot_sync(full, v % 3 == 0);
  r[9] = __all_sync(full, lane < 32) + 2 * __all_sync(full, lane != 9);
  r[10] = __any_sync(full, lane == 7) + 2 * __any_sync(full, lane > 40);
  /* two collectives at once, in divergent branches, told apart by their masks */
  if (lane % 2 == 0) r[11] = __shfl_sync(0x55555555u & full, v, (lane + 2) % nl);
  else r[11] = (int)__ballot_sync(0xaaaaaaaau & full, lane % 4 == 1);
  r[12] = 0;
  if (lane < 5) r[12] = (int)__activemask();
  else r[12] = (int)__activemask() + 1;   /* the branches' masks: no reconvergence before __syncwarp */
  __syncwarp(full);
  r[13] = (int)__activemask();
  /* __syncwarp orders shared memory between the lanes of a warp */
  sh[tid] = v;
  __syncwarp(full);
  r[14] = sh[warp * 32 + (lane + 1) % nl];
  __syncwarp();   /* the full mask: lanes past a partial warp never existed, nobody waits for them */
  d = __shfl_xor_sync(full, (double)v + 0.25, 2);
  r[15] = (int)(4.0 * d);
  r[16] = (int)(__shfl_down_sync(full, (long long)v << 33, 1, 2) >> 33);
  r[17] = (int)(__shfl_sync(full, (unsigned)v * 2u, 0, 1) / 2u) + 2 * __float_as_int(__shfl_sync(full, 0.5f, 0)) / 0x3f000000;
}

/* warp collectives misused, one way per `mode` (test_emu.c expects the report):
 * 0: lane 3 exits before a shuffle that names it; 1: lane 3 waits at
 * __syncthreads() instead; 2: odd and even lanes meet at different collectives;
 * 3: a mask that does not name the calling lane; 4: lanes 8..15 read lanes
 * outside the mask (an undefined value) */
NCC_KERNEL void k_warp_misuse(int *__restrict__ out, int mode) {
  int lane = (int)threadIdx.x & 31, v = (int)threadIdx.x + 1;
  if (mode == 0 && lane == 3) return;
  if (mode == 1 && lane == 3) {
    __syncthreads();
    out[threadIdx.x] = v;
    return;
  }
  if (mode == 2 && lane % 2) v = (int)__ballot_sync(0xffffffffu, v > 4);
  else if (mode == 3) v = __shfl_xor_sync(0xfffffff0u, v, 1);
  else if (mode == 4 && lane < 16) v = __shfl_down_sync(0x0000ffffu, v, 8);
  else if (mode != 4) v = __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}

/* a shuffle in a kernel launched without NCC_KF_WARP */
NCC_KERNEL void k_warp_unflagged(int *__restrict__ out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}
/* tensor cores: D = A B + C for 16x8x8 tiles through ncc_mma_tf32_16x8x8,
 * each lane gathering its fragments from row-major A [16][8], B [8][8] and
 * C = D [16][8] by the PTX ISA's layouts (docs/emulator.md); a warp per tile
 * (block b, warp w: tile b * warps + w).  mode 1: lane 5 of each warp exits first. */
NCC_KERNEL void k_mma_tf32(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ D, int mode) {
  int tid = (int)threadIdx.x, lane = tid & 31, gid = lane / 4, tig = lane % 4, r;
  int tile = (int)blockIdx.x * (int)(blockDim.x / 32) + tid / 32;
  const float *a_ = A + tile * 128, *b_ = B + tile * 64;
  float *d_ = D + tile * 128;
  float a[4], b[2], d[4];
  if (mode == 1 && lane == 5) return;
  a[0] = ncc_tf32(a_[gid * 8 + tig]);
  a[1] = ncc_tf32(a_[(gid + 8) * 8 + tig]);
  a[2] = ncc_tf32(a_[gid * 8 + tig + 4]);
  a[3] = ncc_tf32(a_[(gid + 8) * 8 + tig + 4]);
  b[0] = ncc_tf32(b_[tig * 8 + gid]);
  b[1] = ncc_tf32(b_[(tig + 4) * 8 + gid]);
  for (r = 0; r < 4; r++) d[r] = d_[(gid + 8 * (r / 2)) * 8 + 2 * tig + r % 2];
  ncc_mma_tf32_16x8x8(d, a, b);
  for (r = 0; r < 4; r++) d_[(gid + 8 * (r / 2)) * 8 + 2 * tig + r % 2] = d[r];
}
/* --precision=fp16|bf16: h[i] = x[i] rounded to FP16, b[i] to BF16 (ncc_fp16, ncc_bf16) */
NCC_KERNEL void k_round(const float *__restrict__ x, float *__restrict__ h, float *__restrict__ b, int n) {
  int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    h[i] = ncc_fp16(x[i]);
    b[i] = ncc_bf16(x[i]);
  }
}
/* mma.sync.m16n8k16 with FP16 (bf = 0) or BF16 (bf = 1) operands, one warp a
 * tile: A 16x16 and B 16x8 row-major, D 16x8 (C = D); the fragments gathered
 * by the PTX ISA's formulas ("Matrix fragments for mma.m16n8k16 with floating
 * point type"); lane 5 leaves first when mode is 1 */
NCC_KERNEL void k_mma_k16(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ D, int bf, int mode) {
  int tid = (int)threadIdx.x, lane = tid & 31, gid = lane >> 2, tig = lane % 4, i, r;
  int tile = (int)blockIdx.x * (int)(blockDim.x / 32) + tid / 32;
  const float *a_ = A + tile * 256, *b_ = B + tile * 128;
  float *d_ = D + tile * 128;
  float av[8], bv[4], d[4];
  unsigned a[4], b[2];
  if (mode == 1 && lane == 5) return;
  for (i = 0; i < 8; i++) {   /* row: groupID for 0 <= i < 2 || 4 <= i < 6, else groupID + 8 */
    int row = (i < 2 || (i >= 4 && i < 6)) ? gid : gid + 8;
    int col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
    av[i] = a_[row * 16 + col];
  }
  for (i = 0; i < 4; i++) {   /* row: threadID_in_group * 2 + (i & 1), + 8 for i >= 2; col: groupID */
    int row = tig * 2 + (i & 1) + (i >= 2 ? 8 : 0);
    bv[i] = b_[row * 8 + gid];
  }
  for (r = 0; r < 4; r++) a[r] = bf ? ncc_pack_bf16x2(av[2 * r], av[2 * r + 1]) : ncc_pack_f16x2(av[2 * r], av[2 * r + 1]);
  for (r = 0; r < 2; r++) b[r] = bf ? ncc_pack_bf16x2(bv[2 * r], bv[2 * r + 1]) : ncc_pack_f16x2(bv[2 * r], bv[2 * r + 1]);
  for (r = 0; r < 4; r++) d[r] = d_[(gid + 8 * (r / 2)) * 8 + 2 * tig + r % 2];
  if (bf) ncc_mma_bf16_16x8x16(d, a, b);
  else ncc_mma_f16_16x8x16(d, a, b);
  for (r = 0; r < 4; r++) d_[(gid + 8 * (r / 2)) * 8 + 2 * tig + r % 2] = d[r];
}
/* mma.sync.m16n8k16 s8 (int32 sums): one tile a warp, A 16x16 and B 16x8
 * row-major int8 values held as floats, D 16x8 ints (C = D); the fragments
 * gathered by the PTX ISA's formulas ("Matrix Fragments for mma.m16n8k16
 * with integer type"), independently of codegen's shared-memory order */
NCC_KERNEL void k_mma_s8(const float *__restrict__ A, const float *__restrict__ B, int *__restrict__ D) {
  int tid = (int)threadIdx.x, lane = tid & 31, gid = lane >> 2, tig = lane % 4, i, r;
  int tile = (int)blockIdx.x * (int)(blockDim.x / 32) + tid / 32;
  const float *a_ = A + tile * 256, *b_ = B + tile * 128;
  int *d_ = D + tile * 128;
  float av[8], bv[4];
  int d[4];
  unsigned a[2], b[1];
  for (i = 0; i < 8; i++) {   /* row: groupID for i < 4, else groupID + 8; col: threadID_in_group * 4 + (i & 3) */
    int row = i < 4 ? gid : gid + 8;
    av[i] = a_[row * 16 + tig * 4 + (i & 3)];
  }
  for (i = 0; i < 4; i++) bv[i] = b_[(tig * 4 + i) * 8 + gid];   /* row: threadID_in_group * 4 + i; col: groupID */
  for (r = 0; r < 2; r++) a[r] = ncc_pack_s8x4(av[4 * r], av[4 * r + 1], av[4 * r + 2], av[4 * r + 3]);
  b[0] = ncc_pack_s8x4(bv[0], bv[1], bv[2], bv[3]);
  for (r = 0; r < 4; r++) d[r] = d_[(gid + 8 * (r / 2)) * 8 + 2 * tig + r % 2];
  ncc_mma_s8_16x8x16(d, a, b);
  for (r = 0; r < 4; r++) d_[(gid + 8 * (r / 2)) * 8 + 2 * tig + r % 2] = d[r];
}
/* ---- end of kernels ---- */

#include "ncc_rt.h"
NCC_KERNEL_DESC(k_bias_relu, 0, (NCC_ARG(const float *, 0), NCC_ARG(const float *, 1), NCC_ARG(float *, 2),
                                 NCC_ARG(int, 3), NCC_ARG(int, 4), NCC_ARG(int, 5)))
NCC_KERNEL_DESC(k_relu_scale_f16, 0, (NCC_ARG(const __half *, 0), NCC_ARG(__half *, 1), NCC_ARG(float, 2),
                                      NCC_ARG(int, 3)))
NCC_KERNEL_DESC(k_sgemm16, NCC_KF_BARRIER, (NCC_ARG(const float *, 0), NCC_ARG(const float *, 1),
                                            NCC_ARG(float *, 2), NCC_ARG(int, 3), NCC_ARG(int, 4), NCC_ARG(int, 5)))
NCC_KERNEL_DESC(k_block_sum, NCC_KF_BARRIER, (NCC_ARG(const float *, 0), NCC_ARG(float *, 1), NCC_ARG(int, 2)))
NCC_KERNEL_DESC(k_block_sum_racy, NCC_KF_BARRIER, (NCC_ARG(const float *, 0), NCC_ARG(float *, 1), NCC_ARG(int, 2)))
NCC_KERNEL_DESC(k_early_return, NCC_KF_BARRIER, (NCC_ARG(const float *, 0), NCC_ARG(float *, 1)))
NCC_KERNEL_DESC(k_atomics, 0, (NCC_ARG(const int *, 0), NCC_ARG(int, 1), NCC_ARG(int *, 2), NCC_ARG(float *, 3),
                               NCC_ARG(int *, 4), NCC_ARG(unsigned *, 5)))
NCC_KERNEL_DESC(k_oob_write, 0, (NCC_ARG(const float *, 0), NCC_ARG(float *, 1), NCC_ARG(int, 2)))
NCC_KERNEL_DESC(k_handshake, 0, (NCC_ARG(volatile int *, 0), NCC_ARG(int *, 1), NCC_ARG(long long, 2)))
NCC_KERNEL_DESC(k_unflagged_barrier, 0, (NCC_ARG(float *, 0)))
NCC_KERNEL_DESC(k_coords, 0, (NCC_ARG(int *, 0)))
NCC_KERNEL_DESC(k_ldg128, 0, (NCC_ARG(const unsigned char *, 0), NCC_ARG(unsigned *, 1), NCC_ARG(int, 2)))
NCC_KERNEL_DESC(k_pairs, 0,
                (NCC_ARG(const float *, 0), NCC_ARG(const unsigned short *, 1), NCC_ARG(const signed char *, 2),
                 NCC_ARG(float *, 3), NCC_ARG(unsigned short *, 4), NCC_ARG(signed char *, 5), NCC_ARG(int, 6)))
NCC_KERNEL_DESC(k_quads, 0, (NCC_ARG(const float *, 0), NCC_ARG(float *, 1), NCC_ARG(int, 2)))
NCC_KERNEL_DESC(k_lds_vec, NCC_KF_BARRIER, (NCC_ARG(const unsigned short *, 0), NCC_ARG(unsigned *, 1), NCC_ARG(int, 2)))
NCC_KERNEL_DESC(k_ldmatrix, NCC_KF_BARRIER_WARP, (NCC_ARG(const unsigned short *, 0), NCC_ARG(unsigned *, 1), NCC_ARG(int, 2)))
NCC_KERNEL_DESC(k_cp_async, NCC_KF_BARRIER, (NCC_ARG(const float *, 0), NCC_ARG(float *, 1), NCC_ARG(int, 2)))
NCC_KERNEL_DESC(k_softmax, NCC_KF_BARRIER, (NCC_ARG(const float *, 0), NCC_ARG(float *, 1), NCC_ARG(int, 2)))
NCC_KERNEL_DESC(k_uninit_shared, 0, (NCC_ARG(float *, 0)))
NCC_KERNEL_DESC(k_quant_i8, 0, (NCC_ARG(const float *, 0), NCC_ARG(signed char *, 1), NCC_ARG(float, 2), NCC_ARG(int, 3)))
NCC_KERNEL_DESC(k_warp_ops, NCC_KF_WARP, (NCC_ARG(int *, 0)))
NCC_KERNEL_DESC(k_warp_misuse, NCC_KF_BARRIER_WARP, (NCC_ARG(int *, 0), NCC_ARG(int, 1)))
NCC_KERNEL_DESC(k_warp_unflagged, 0, (NCC_ARG(int *, 0)))
NCC_KERNEL_DESC(k_round, 0, (NCC_ARG(const float *, 0), NCC_ARG(float *, 1), NCC_ARG(float *, 2), NCC_ARG(int, 3)))
NCC_KERNEL_DESC(k_mma_s8, NCC_KF_WARP, (NCC_ARG(const float *, 0), NCC_ARG(const float *, 1), NCC_ARG(int *, 2)))
NCC_KERNEL_DESC(k_mma_k16, NCC_KF_WARP, (NCC_ARG(const float *, 0), NCC_ARG(const float *, 1), NCC_ARG(float *, 2),
                                         NCC_ARG(int, 3), NCC_ARG(int, 4)))
NCC_KERNEL_DESC(k_mma_tf32, NCC_KF_WARP, (NCC_ARG(const float *, 0), NCC_ARG(const float *, 1), NCC_ARG(float *, 2),
                                          NCC_ARG(int, 3)))
