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
NCC_KERNEL_DESC(k_softmax, NCC_KF_BARRIER, (NCC_ARG(const float *, 0), NCC_ARG(float *, 1), NCC_ARG(int, 2)))
NCC_KERNEL_DESC(k_uninit_shared, 0, (NCC_ARG(float *, 0)))
NCC_KERNEL_DESC(k_quant_i8, 0, (NCC_ARG(const float *, 0), NCC_ARG(signed char *, 1), NCC_ARG(float, 2), NCC_ARG(int, 3)))
