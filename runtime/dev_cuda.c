/* dev_cuda.c — the jit backend: NVRTC + the CUDA driver API + cuBLAS, all
 * dlopen'ed at run time, so that libnccrt links no CUDA library and loads on
 * a machine without one (ncc_dev_open then says why no GPU answers).
 *
 * The kernels section of a --jit build is compiled by NVRTC for the device's
 * own sm_XX, with this runtime's NVRTC prelude (the NVRTC branch of
 * ncc_kernel.h) as an in-memory header; the cubin is cached on disk under
 * $XDG_CACHE_HOME/ncc (or ~/.cache/ncc) by a hash of source, options, arch and
 * NVRTC version, written atomically so that two processes never see half a file.
 * Every CUDA/NVRTC/cuBLAS call is checked; messages name file:line of the call.
 * Each device (each model instance) has a stream of its own, non-blocking with
 * respect to the legacy default stream: instances driven from different threads
 * overlap on the GPU, and ncc_sync waits for its own device's work only.
 * Copies stay synchronous (async on the stream, then a wait for it).
 * Also ncc_nvrtc_ptx (ncc --emit=ptx), which needs NVRTC but no GPU.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "rt_internal.h"

/* The NVRTC part of ncc_kernel.h, given to NVRTC under the same name; keep the
 * two in step (tests/rt compiles the test kernels through this prelude). */
static const char NCC_NVRTC_PRELUDE[] =
    "#ifndef NCC_KERNEL_H\n"
    "#define NCC_KERNEL_H\n"
    "#include <cuda_fp16.h>\n"
    "#include <cuda_bf16.h>\n"
    "#define NCC_KERNEL extern \"C\" __global__\n"
    "#define NCC_DYN_SHARED(T, name) extern __shared__ T name[]\n"
    "#define NCC_UNROLL _Pragma(\"unroll\")\n"
    "#define NCC_ROLLED _Pragma(\"unroll 1\")\n"
    "#ifndef INFINITY\n"
    "#define INFINITY __int_as_float(0x7f800000)\n"
    "#endif\n"
    "#ifndef NAN\n"
    "#define NAN __int_as_float(0x7fffffff)\n"
    "#endif\n"
    "/* dropout's generator: ncc_kernel.h's ncc_philox_uniform, the same text */\n"
    "static __device__ __forceinline__ float ncc_philox_uniform(unsigned seed, unsigned step, unsigned slot, unsigned index) {\n"
    "  unsigned c0 = index, c1 = slot, c2 = 0u, c3 = 0u, k0 = seed, k1 = step;\n"
    "  for (int r = 0; r < 10; r++) {\n"
    "    unsigned long long p0 = (unsigned long long)0xD2511F53u * c0, p1 = (unsigned long long)0xCD9E8D57u * c2;\n"
    "    unsigned hi0 = (unsigned)(p0 >> 32), lo0 = (unsigned)p0, hi1 = (unsigned)(p1 >> 32), lo1 = (unsigned)p1;\n"
    "    c0 = hi1 ^ c1 ^ k0;\n"
    "    c1 = lo1;\n"
    "    c2 = hi0 ^ c3 ^ k1;\n"
    "    c3 = lo0;\n"
    "    k0 += 0x9E3779B9u;\n"
    "    k1 += 0xBB67AE85u;\n"
    "  }\n"
    "  return (float)(c0 >> 8) * (1.0f / 16777216.0f);\n"
    "}\n"
    "/* TF32 rounding: ncc_kernel.h's ncc_tf32, the same text */\n"
    "static __device__ __forceinline__ float ncc_tf32(float x) {\n"
    "  union { float f; unsigned u; } v;\n"
    "  v.f = x;\n"
    "  if ((v.u & 0x7f800000u) != 0x7f800000u) v.u = (v.u + 0x1000u) & 0xffffe000u;\n"
    "  return v.f;\n"
    "}\n"
    "static __device__ __forceinline__ float ncc_f32_bits(unsigned u) {\n"
    "  union { float f; unsigned u; } v;\n"
    "  v.u = u;\n"
    "  return v.f;\n"
    "}\n"
    "/* INT8: ncc_kernel.h's ncc_q8, the same text */\n"
    "static __device__ __forceinline__ float ncc_q8(float x) {\n"
    "  float r = rintf(x);\n"
    "  return r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r == r ? r : 0.0f;\n"
    "}\n"
    "/* FP16 and BF16 rounding: ncc_kernel.h's ncc_fp16 and ncc_bf16, the same text */\n"
    "#if defined(__CUDA_ARCH__)\n"
    "static __device__ __forceinline__ float ncc_fp16(float x) { return __half2float(__float2half_rn(x)); }\n"
    "#else\n"
    "static __device__ __forceinline__ float ncc_fp16(float x) {\n"
    "  union { float f; unsigned u; } v;\n"
    "  v.f = x;\n"
    "  unsigned s = v.u & 0x80000000u, a = v.u & 0x7fffffffu;\n"
    "  if (a >= 0x7f800000u) return x;                  /* Inf, NaN */\n"
    "  if (a >= 0x477ff000u) a = 0x7f800000u;           /* 65520 and more: Inf */\n"
    "  else if (a >= 0x38800000u) a = (a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u;   /* normal */\n"
    "  else if (a <= 0x33000000u) a = 0u;               /* 2^-25 and less: zero */\n"
    "  else {                                           /* subnormal: q 2^-24, q to nearest even */\n"
    "    unsigned sh = 126u - (a >> 23), m = (a & 0x7fffffu) | 0x800000u;\n"
    "    unsigned q = m >> sh, r = m & ((1u << sh) - 1u), h = 1u << (sh - 1u);\n"
    "    q += r > h || (r == h && (q & 1u));\n"
    "    v.f = (float)q * 5.9604644775390625e-8f;\n"
    "    a = v.u;\n"
    "  }\n"
    "  v.u = s | a;\n"
    "  return v.f;\n"
    "}\n"
    "#endif\n"
    "#if defined(__CUDA_ARCH__)\n"
    "static __device__ __forceinline__ float ncc_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }\n"
    "#else\n"
    "static __device__ __forceinline__ float ncc_bf16(float x) {\n"
    "  union { float f; unsigned u; } v;\n"
    "  v.f = x;\n"
    "  if ((v.u & 0x7f800000u) != 0x7f800000u) v.u = (v.u + 0x7fffu + ((v.u >> 16) & 1u)) & 0xffff0000u;\n"
    "  return v.f;\n"
    "}\n"
    "#endif\n"
    "/* tensor cores: ncc_kernel.h's ncc_lds4, ncc_lds2 and ncc_mma_tf32_16x8x8, the same text */\n"
    "static __device__ __forceinline__ void ncc_lds4(float *d, const float *s) {\n"
    "  float4 v = *(const float4 *)s;\n"
    "  d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_lds2(float *d, const float *s) {\n"
    "  float2 v = *(const float2 *)s;\n"
    "  d[0] = v.x, d[1] = v.y;\n"
    "}\n"
    "static __device__ __forceinline__ unsigned ncc_lds_s8x4(const signed char *s) { return *(const unsigned *)s; }\n"
    "static __device__ __forceinline__ void ncc_lds_u32x2(unsigned *d, const unsigned short *s) {\n"
    "  uint2 v = *(const uint2 *)s;\n"
    "  d[0] = v.x, d[1] = v.y;\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_lds_i32x2(int *d, const int *s) {\n"
    "  int2 v = *(const int2 *)s;\n"
    "  d[0] = v.x, d[1] = v.y;\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_lds_u32x4(unsigned *d, const unsigned short *s) {\n"
    "  uint4 v = *(const uint4 *)s;\n"
    "  d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;\n"
    "}\n"
    "static __device__ __forceinline__ unsigned short ncc_fp16_bits(float x) { return __half_as_ushort(__float2half_rn(x)); }\n"
    "static __device__ __forceinline__ unsigned short ncc_bf16_bits(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }\n"
    "static __device__ __forceinline__ float ncc_fp16_load(unsigned short h) { return __half2float(__ushort_as_half(h)); }\n"
    "static __device__ __forceinline__ float ncc_bf16_load(unsigned short h) { return __bfloat162float(__ushort_as_bfloat16(h)); }\n"
    "static __device__ __forceinline__ void ncc_ldg128(unsigned *d, const void *p) {\n"
    "  uint4 v = *(const uint4 *)p;\n"
    "  d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_ldg128f(float *f, const float *p) {\n"
    "  float4 v = *(const float4 *)p;\n"
    "  f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_sts32(void *s, unsigned v) { *(unsigned *)s = v; }\n"
    "/* a GEMM epilogue's pairs and fours: ncc_kernel.h's ncc_st2f/h/b, ncc_st4f and ncc_ld2f/h/b, the same text */\n"
    "static __device__ __forceinline__ void ncc_st2f(float *__restrict__ p, float a, float b) { *(float2 *)p = make_float2(a, b); }\n"
    "static __device__ __forceinline__ void ncc_st4f(float *__restrict__ p, const float *v) {\n"
    "  *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_st2h(unsigned short *__restrict__ p, unsigned short a, unsigned short b) {\n"
    "  *(unsigned *)p = (unsigned)a | (unsigned)b << 16;   /* little-endian: p[0] in the low half */\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_st2b(signed char *__restrict__ p, signed char a, signed char b) {\n"
    "  *(unsigned short *)p = (unsigned short)((unsigned char)a | (unsigned)(unsigned char)b << 8);\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_ld2f(float *d, const float *__restrict__ p) {\n"
    "  float2 v = __ldg((const float2 *)p);\n"
    "  d[0] = v.x, d[1] = v.y;\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_ld2h(unsigned short *d, const unsigned short *__restrict__ p) {\n"
    "  unsigned v = __ldg((const unsigned *)p);\n"
    "  d[0] = (unsigned short)v, d[1] = (unsigned short)(v >> 16);\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_ld2b(signed char *d, const signed char *__restrict__ p) {\n"
    "  unsigned short v = __ldg((const unsigned short *)p);\n"
    "  d[0] = (signed char)(v & 0xffu), d[1] = (signed char)(v >> 8);\n"
    "}\n"
    "static __device__ __forceinline__ unsigned ncc_smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }\n"
    "static __device__ __forceinline__ void ncc_ldmatrix_x4(unsigned *d, const void *p) {\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\\n\"\n"
    "               : \"=r\"(d[0]), \"=r\"(d[1]), \"=r\"(d[2]), \"=r\"(d[3]) : \"r\"(ncc_smem_addr(p)));\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_ldmatrix_x2(unsigned *d, const void *p) {\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\\n\" : \"=r\"(d[0]), \"=r\"(d[1]) : \"r\"(ncc_smem_addr(p)));\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_ldmatrix_x4_trans(unsigned *d, const void *p) {\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\\n\"\n"
    "               : \"=r\"(d[0]), \"=r\"(d[1]), \"=r\"(d[2]), \"=r\"(d[3]) : \"r\"(ncc_smem_addr(p)));\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_ldmatrix_x2_trans(unsigned *d, const void *p) {\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\\n\" : \"=r\"(d[0]), \"=r\"(d[1]) : \"r\"(ncc_smem_addr(p)));\n"
    "}\n"
    "#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800\n"
    "static __device__ __forceinline__ void ncc_cp_async4(void *s, const void *g) {\n"
    "  asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4;\\n\" :: \"r\"(ncc_smem_addr(s)), \"l\"(g) : \"memory\");\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_cp_async8(void *s, const void *g) {\n"
    "  asm volatile(\"cp.async.ca.shared.global [%0], [%1], 8;\\n\" :: \"r\"(ncc_smem_addr(s)), \"l\"(g) : \"memory\");\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_cp_async16(void *s, const void *g) {\n"
    "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\\n\" :: \"r\"(ncc_smem_addr(s)), \"l\"(g) : \"memory\");\n"
    "}\n"
    "#define ncc_cp_async_commit() asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\")\n"
    "#define ncc_cp_async_wait(n) asm volatile(\"cp.async.wait_group %0;\\n\" :: \"n\"(n) : \"memory\")\n"
    "#else   /* before sm_80: plain copies, done at once */\n"
    "static __device__ __forceinline__ void ncc_cp_async4(void *s, const void *g) { *(unsigned *)s = *(const unsigned *)g; }\n"
    "static __device__ __forceinline__ void ncc_cp_async8(void *s, const void *g) { *(uint2 *)s = *(const uint2 *)g; }\n"
    "static __device__ __forceinline__ void ncc_cp_async16(void *s, const void *g) { *(uint4 *)s = *(const uint4 *)g; }\n"
    "#define ncc_cp_async_commit() ((void)0)\n"
    "#define ncc_cp_async_wait(n) ((void)0)\n"
    "#endif\n"
    "static __device__ __forceinline__ void ncc_mma_tf32_16x8x8(float *d, const float *a, const float *b) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
    "               : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "               : \"r\"(__float_as_uint(a[0])), \"r\"(__float_as_uint(a[1])), \"r\"(__float_as_uint(a[2])),\n"
    "                 \"r\"(__float_as_uint(a[3])), \"r\"(__float_as_uint(b[0])), \"r\"(__float_as_uint(b[1])));\n"
    "}\n"
    "/* FP16/BF16 tensor cores: ncc_kernel.h's ncc_pack_f16x2, ncc_mma_f16_16x8x16, ncc_mma_bf16_16x8x16 and ncc_pack_bf16x2, the same text */\n"
    "static __device__ __forceinline__ unsigned ncc_pack_f16x2(float lo, float hi) {\n"
    "  unsigned r;\n"
    "  asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\\n\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));   /* the first source to the high half */\n"
    "  return r;\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_mma_f16_16x8x16(float *d, const unsigned *a, const unsigned *b) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
    "               : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_mma_bf16_16x8x16(float *d, const unsigned *a, const unsigned *b) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
    "               : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n"
    "}\n"
    "static __device__ __forceinline__ void ncc_mma_s8_16x8x16(int *d, const unsigned *a, const unsigned *b) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\\n\"\n"
    "               : \"+r\"(d[0]), \"+r\"(d[1]), \"+r\"(d[2]), \"+r\"(d[3])\n"
    "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(b[0]));\n"
    "}\n"
    "static __device__ __forceinline__ unsigned ncc_pack_s8x4(float a, float b, float c, float d) {\n"
    "  return ((unsigned)(int)a & 0xffu) | ((unsigned)(int)b & 0xffu) << 8 | ((unsigned)(int)c & 0xffu) << 16 |\n"
    "         ((unsigned)(int)d & 0xffu) << 24;\n"
    "}\n"
    "static __device__ __forceinline__ unsigned ncc_pack_bf16x2(float lo, float hi) {\n"
    "  union { float f; unsigned u; } l, h;\n"
    "  l.f = lo, h.f = hi;\n"
    "  return (l.u >> 16) | (h.u & 0xffff0000u);\n"
    "}\n"
    "/* ncc_kernel.h's ncc_round_k (nvcc: static there), the same text: rounded operand copies for cuBLAS */\n"
    "#define NCC_ROUND_K_DECL extern \"C\" __global__\n"
    "NCC_ROUND_K_DECL void ncc_round_k(const float *src, long long ld, long long stride, int rows, int cols, int batch,\n"
    "                                   int prec, float *dst) {\n"
    "  long long per = (long long)rows * cols, total = per * batch;\n"
    "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {\n"
    "    long long b = i / per, rc = i - b * per, r = rc / cols, c = rc - r * cols;\n"
    "    float v = src[b * stride + r * ld + c];\n"
    "    dst[i] = prec == 1 ? ncc_tf32(v) : prec == 2 ? ncc_fp16(v) : ncc_bf16(v);\n"
    "  }\n"
    "}\n"
    "#endif\n";

/* ---------------------------------------------------------------- driver API, by hand */
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream;
typedef unsigned long long CUdeviceptr;
typedef int nvrtcResult;
typedef void *nvrtcProgram;
typedef void *cublasHandle_t;
typedef void *CUgraph, *CUgraphExec, *CUgraphNode, *CUevent;
/* CUDA_KERNEL_NODE_PARAMS (v2) of cuda.h */
typedef struct {
  CUfunction func;
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  void **kernelParams, **extra;
  void *kern;
  CUcontext ctx;
} CUkernelNodeParams;

static struct {
  void *lib;
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGetCount)(int *);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetName)(char *, int, CUdevice);
  CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*PrimaryCtxRelease)(CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleUnload)(CUmodule);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*FuncSetAttribute)(CUfunction, int, int);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           CUstream, void **, void **);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemHostAlloc)(void **, size_t, unsigned);
  CUresult (*MemFreeHost)(void *);
  CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*StreamCreate)(CUstream *, unsigned);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*GetErrorString)(CUresult, const char **);
  /* a second stream and events (optional: without them all runs on one stream) */
  CUresult (*EventCreate)(CUevent *, unsigned);
  CUresult (*EventDestroy)(CUevent);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned);
  /* graphs (optional: a driver without them runs every launch directly) */
  CUresult (*StreamBeginCapture)(CUstream, int);
  CUresult (*StreamEndCapture)(CUstream, CUgraph *);
  CUresult (*StreamGetCaptureInfo)(CUstream, int *, unsigned long long *, CUgraph *, const CUgraphNode **,
                                   const void **, size_t *);   /* _v3 (drivers of CUDA 12.3 on) */
  CUresult (*StreamGetCaptureInfo2)(CUstream, int *, unsigned long long *, CUgraph *, const CUgraphNode **,
                                    size_t *);                 /* _v2, older drivers */
  CUresult (*GraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
  CUresult (*GraphLaunch)(CUgraphExec, CUstream);
  CUresult (*GraphExecKernelNodeSetParams)(CUgraphExec, CUgraphNode, const CUkernelNodeParams *);
  CUresult (*GraphExecDestroy)(CUgraphExec);
  CUresult (*GraphDestroy)(CUgraph);
} cu;

static struct {
  void *lib;
  nvrtcResult (*Create)(nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *);
  nvrtcResult (*Compile)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*LogSize)(nvrtcProgram, size_t *);
  nvrtcResult (*Log)(nvrtcProgram, char *);
  nvrtcResult (*PTXSize)(nvrtcProgram, size_t *);
  nvrtcResult (*PTX)(nvrtcProgram, char *);
  nvrtcResult (*CUBINSize)(nvrtcProgram, size_t *);
  nvrtcResult (*CUBIN)(nvrtcProgram, char *);
  nvrtcResult (*Destroy)(nvrtcProgram *);
  const char *(*ErrorString)(nvrtcResult);
  nvrtcResult (*Version)(int *, int *);
} nv;

static struct {
  void *lib;
  int (*Create)(cublasHandle_t *);
  int (*Destroy)(cublasHandle_t);
  int (*SetStream)(cublasHandle_t, CUstream);
  int (*SgemmStridedBatched)(cublasHandle_t, int, int, int, int, int, const float *, const float *, int, long long,
                             const float *, int, long long, const float *, float *, int, long long, int);
  /* (handle, opA, opB, m, n, k, alpha, A, Atype, lda, sA, B, Btype, ldb, sB, beta, C, Ctype, ldc, sC, batch,
   *  computeType, algo): ncc_gemm_ex's reduced precisions */
  int (*GemmStridedBatchedEx)(cublasHandle_t, int, int, int, int, int, const void *, const void *, int, int, long long,
                              const void *, int, int, long long, const void *, void *, int, int, long long, int, int,
                              int);
} cb;

static pthread_mutex_t g_load_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *cuda_home(void) {
  const char *h = getenv("CUDA_HOME");
  if (!h || !*h) h = getenv("CUDA_PATH");
  return h && *h ? h : "/usr/local/cuda";
}

/* dlopen the first of names, then any lib*.so* under $CUDA_HOME/lib64 matching pattern. */
static void *open_lib(const char *const *names, const char *pattern, char *why, size_t n) {
  void *h = NULL;
  char path[1024];
  int i;
  glob_t gl;
  why[0] = 0;
  for (i = 0; names[i] && !h; i++) {
    h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h && !why[0]) {   /* the first name's reason is the telling one */
      const char *e = dlerror();
      snprintf(why, n, "%s", e ? e : "not found");
    }
  }
  if (h) return h;
  snprintf(path, sizeof path, "%s/lib64/%s", cuda_home(), pattern);
  if (glob(path, 0, NULL, &gl) == 0) {
    size_t k;
    for (k = gl.gl_pathc; k-- > 0 && !h;) h = dlopen(gl.gl_pathv[k], RTLD_NOW | RTLD_LOCAL);
    globfree(&gl);
  }
  return h;
}

#define SYM(tab, field, name)                                                                     \
  do {                                                                                            \
    *(void **)&tab.field = dlsym(tab.lib, name);                                                  \
    if (!tab.field) { snprintf(why, n, "symbol %s missing from the library", name); return -1; } \
  } while (0)

static int load_cuda_syms(char *why, size_t n) {
  static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
  cu.lib = open_lib(names, "stubs/.none", why, n);
  if (!cu.lib) return -1;
  SYM(cu, Init, "cuInit");
  SYM(cu, DeviceGetCount, "cuDeviceGetCount");
  SYM(cu, DeviceGet, "cuDeviceGet");
  SYM(cu, DeviceGetName, "cuDeviceGetName");
  SYM(cu, DeviceGetAttribute, "cuDeviceGetAttribute");
  SYM(cu, PrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  SYM(cu, PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  SYM(cu, CtxSetCurrent, "cuCtxSetCurrent");
  SYM(cu, ModuleLoadData, "cuModuleLoadData");
  SYM(cu, ModuleUnload, "cuModuleUnload");
  SYM(cu, ModuleGetFunction, "cuModuleGetFunction");
  SYM(cu, FuncSetAttribute, "cuFuncSetAttribute");
  SYM(cu, LaunchKernel, "cuLaunchKernel");
  SYM(cu, MemAlloc, "cuMemAlloc_v2");
  SYM(cu, MemFree, "cuMemFree_v2");
  SYM(cu, MemHostAlloc, "cuMemHostAlloc");
  SYM(cu, MemFreeHost, "cuMemFreeHost");
  SYM(cu, MemsetD8Async, "cuMemsetD8Async");
  SYM(cu, MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  SYM(cu, MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  SYM(cu, MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  SYM(cu, StreamCreate, "cuStreamCreate");
  SYM(cu, StreamDestroy, "cuStreamDestroy_v2");
  SYM(cu, StreamSynchronize, "cuStreamSynchronize");
  SYM(cu, GetErrorString, "cuGetErrorString");
  *(void **)&cu.EventCreate = dlsym(cu.lib, "cuEventCreate");
  *(void **)&cu.EventDestroy = dlsym(cu.lib, "cuEventDestroy_v2");
  *(void **)&cu.EventRecord = dlsym(cu.lib, "cuEventRecord");
  *(void **)&cu.StreamWaitEvent = dlsym(cu.lib, "cuStreamWaitEvent");
  /* the versions cuda.h of CUDA 13 maps these names to */
  *(void **)&cu.StreamBeginCapture = dlsym(cu.lib, "cuStreamBeginCapture_v2");
  *(void **)&cu.StreamEndCapture = dlsym(cu.lib, "cuStreamEndCapture");
  *(void **)&cu.StreamGetCaptureInfo = dlsym(cu.lib, "cuStreamGetCaptureInfo_v3");
  *(void **)&cu.GraphInstantiate = dlsym(cu.lib, "cuGraphInstantiateWithFlags");
  *(void **)&cu.GraphLaunch = dlsym(cu.lib, "cuGraphLaunch");
  *(void **)&cu.StreamGetCaptureInfo2 = dlsym(cu.lib, "cuStreamGetCaptureInfo_v2");
  /* before _v2 the parameters lacked the last two fields, which stay NULL here */
  *(void **)&cu.GraphExecKernelNodeSetParams = dlsym(cu.lib, "cuGraphExecKernelNodeSetParams_v2");
  if (!cu.GraphExecKernelNodeSetParams)
    *(void **)&cu.GraphExecKernelNodeSetParams = dlsym(cu.lib, "cuGraphExecKernelNodeSetParams");
  *(void **)&cu.GraphExecDestroy = dlsym(cu.lib, "cuGraphExecDestroy");
  *(void **)&cu.GraphDestroy = dlsym(cu.lib, "cuGraphDestroy");
  return 0;
}

static int load_nvrtc_syms(char *why, size_t n) {
  static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so", NULL};
  nv.lib = open_lib(names, "libnvrtc.so*", why, n);
  if (!nv.lib) return -1;
  SYM(nv, Create, "nvrtcCreateProgram");
  SYM(nv, Compile, "nvrtcCompileProgram");
  SYM(nv, LogSize, "nvrtcGetProgramLogSize");
  SYM(nv, Log, "nvrtcGetProgramLog");
  SYM(nv, PTXSize, "nvrtcGetPTXSize");
  SYM(nv, PTX, "nvrtcGetPTX");
  SYM(nv, CUBINSize, "nvrtcGetCUBINSize");
  SYM(nv, CUBIN, "nvrtcGetCUBIN");
  SYM(nv, Destroy, "nvrtcDestroyProgram");
  SYM(nv, ErrorString, "nvrtcGetErrorString");
  SYM(nv, Version, "nvrtcVersion");
  return 0;
}

static int load_cublas_syms(char *why, size_t n) {
  static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so", NULL};
  cb.lib = open_lib(names, "libcublas.so*", why, n);
  if (!cb.lib) return -1;
  SYM(cb, Create, "cublasCreate_v2");
  SYM(cb, Destroy, "cublasDestroy_v2");
  SYM(cb, SetStream, "cublasSetStream_v2");
  SYM(cb, SgemmStridedBatched, "cublasSgemmStridedBatched");
  SYM(cb, GemmStridedBatchedEx, "cublasGemmStridedBatchedEx");
  return 0;
}

/* The loaders run under g_load_mu.  A library that lacks a symbol is closed
 * and its table cleared: a later call must try again and fail the same way,
 * never find lib set with a NULL function in the table. */
#define LOADER(fn, tab)                                        \
  static int fn(char *why, size_t n) {                         \
    if (tab.lib) return 0;                                     \
    if (fn##_syms(why, n) == 0) return 0;                      \
    if (tab.lib) dlclose(tab.lib);                             \
    memset(&tab, 0, sizeof tab);                               \
    return -1;                                                 \
  }
LOADER(load_cuda, cu)
LOADER(load_nvrtc, nv)
LOADER(load_cublas, cb)

static const char *cu_str(CUresult r) {
  const char *s = NULL;
  if (cu.GetErrorString) cu.GetErrorString(r, &s);
  return s ? s : "unknown CUDA error";
}

int ncc_cuda_probe(char *why, size_t n) {
  int count = 0, rc;
  CUresult r;
  pthread_mutex_lock(&g_load_mu);
  rc = load_cuda(why, n);
  pthread_mutex_unlock(&g_load_mu);
  if (rc) {
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s", why);
    snprintf(why, n, "cannot load the CUDA driver: %s", tmp);
    return NCC_EUSER;
  }
  if ((r = cu.Init(0)) != 0) { snprintf(why, n, "cuInit: %s (error %d)", cu_str(r), r); return NCC_EUSER; }
  if ((r = cu.DeviceGetCount(&count)) != 0) {
    snprintf(why, n, "cuDeviceGetCount: %s (error %d)", cu_str(r), r);
    return NCC_EUSER;
  }
  if (count < 1) { snprintf(why, n, "the CUDA driver finds no device"); return NCC_EUSER; }
  return 0;
}

/* ---------------------------------------------------------------- NVRTC */
static char *cuda_include_opt(void) {
  char *s = malloc(1100);
  if (s) snprintf(s, 1100, "-I%s/include", cuda_home());
  return s;
}

/* Compiles src (+ the prelude) with opts; *out is PTX (want_cubin 0) or a cubin. */
static int nvrtc_compile(const char *src, const char *name, const char *const *opts, int nopts, int want_cubin,
                         char **out, size_t *outn, char *err, size_t errn, const char *file, int line) {
  nvrtcProgram prog = NULL;
  nvrtcResult r;
  char *full, *inc, *log = NULL;
  const char **o;
  const char *hdr[1] = {NCC_NVRTC_PRELUDE}, *hname[1] = {"ncc_kernel.h"};
  size_t len, logn = 0;
  int i, rc = 0;
  char why[512];
  pthread_mutex_lock(&g_load_mu);
  rc = load_nvrtc(why, sizeof why);
  pthread_mutex_unlock(&g_load_mu);
  if (rc) { ncc_errf(err, errn, "cannot load NVRTC (libnvrtc.so): %s", why); return NCC_EUSER; }
  len = strlen(src) + strlen(name) + 64;
  full = malloc(len);
  inc = cuda_include_opt();
  o = malloc(sizeof *o * (size_t)(nopts + 2));
  if (!full || !inc || !o) { free(full); free(inc); free(o); ncc_errf(err, errn, "out of memory"); return NCC_EUSER; }
  /* #line keeps the log's line numbers those of the kernels section */
  snprintf(full, len, "#include \"ncc_kernel.h\"\n#line 1 \"%s\"\n%s", name, src);
  for (i = 0; i < nopts; i++) o[i] = opts[i];
  o[nopts] = inc;
  if ((r = nv.Create(&prog, full, name, 1, hdr, hname)) != 0) {
    ncc_errf(err, errn, "%s:%d: nvrtcCreateProgram: %s", file, line, nv.ErrorString(r));
    rc = NCC_EUSER;
    goto out;
  }
  r = nv.Compile(prog, nopts + 1, o);
  if (nv.LogSize(prog, &logn) == 0 && logn > 1 && (log = malloc(logn + 1)) != NULL) {
    if (nv.Log(prog, log) != 0) log[0] = 0;
    log[logn] = 0;
  }
  if (r != 0) {
    ncc_errf(err, errn, "%s:%d: NVRTC cannot compile %s: %s\n%s", file, line, name, nv.ErrorString(r),
             log ? log : "");
    rc = NCC_EUSER;
    goto out;
  }
  {
    size_t sz = 0;
    r = want_cubin ? nv.CUBINSize(prog, &sz) : nv.PTXSize(prog, &sz);
    if (r == 0 && (*out = malloc(sz + 1)) != NULL) {
      r = want_cubin ? nv.CUBIN(prog, *out) : nv.PTX(prog, *out);
      (*out)[sz] = 0;
      *outn = sz;
    }
    if (r != 0 || !*out) {
      ncc_errf(err, errn, "%s:%d: NVRTC: cannot get the %s: %s", file, line, want_cubin ? "cubin" : "PTX",
               r ? nv.ErrorString(r) : "out of memory");
      free(*out);
      *out = NULL;
      rc = NCC_EUSER;
    }
  }
out:
  if (prog) nv.Destroy(&prog);
  free(log);
  free(full);
  free(inc);
  free(o);
  return rc;
}

int ncc_nvrtc_ptx(const char *src, const char *name, const char *const *opts, int nopts, char **ptx, char *err,
                  size_t errn) {
  size_t n;
  if (!src || !ptx) { ncc_errf(err, errn, "ncc_nvrtc_ptx: no source"); return NCC_EUSER; }
  *ptx = NULL;
  return nvrtc_compile(src, name ? name : "kernels.cu", opts, nopts, 0, ptx, &n, err, errn, __FILE__, __LINE__);
}

/* ---------------------------------------------------------------- cubin cache */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = (const unsigned char *)p;
  size_t i;
  for (i = 0; i < n; i++) { h ^= s[i]; h *= 1099511628211ull; }
  return h;
}

static int cache_dir(char *dir, size_t n) {
  const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (x && *x) snprintf(dir, n, "%s/ncc", x);
  else if (home && *home) snprintf(dir, n, "%s/.cache/ncc", home);
  else return -1;
  {
    /* mkdir -p of the last two levels is enough for ~/.cache/ncc */
    char parent[1024], *slash;
    snprintf(parent, sizeof parent, "%s", dir);
    slash = strrchr(parent, '/');
    if (slash) { *slash = 0; mkdir(parent, 0755); }
  }
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) return -1;
  return 0;
}

static char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  char *b = NULL;
  long sz;
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)sz))) {
    if (fread(b, 1, (size_t)sz, f) != (size_t)sz) { free(b); b = NULL; }
    else *n = (size_t)sz;
  }
  fclose(f);
  return b;
}

static void write_atomic(const char *path, const void *p, size_t n) {
  char tmp[1200];
  int fd;
  int len = snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  if (len < 0 || (size_t)len >= sizeof tmp) return;   /* a name too long: no cache (never a truncated name) */
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;   /* the cache is an optimisation: no cache, no error */
  if (write(fd, p, n) == (ssize_t)n && fsync(fd) == 0) {
    close(fd);
    if (rename(tmp, path) != 0) unlink(tmp);
    return;
  }
  close(fd);
  unlink(tmp);
}

/* ---------------------------------------------------------------- the backend */
typedef struct jit_state {
  CUdevice dev;
  CUcontext ctx;
  CUstream stream;      /* this device's own: launches, copies, cuBLAS */
  CUstream side;        /* stream 1 (ncc_stream), made on first use */
  CUstream cur;         /* where launches, memsets and GEMMs go: stream or side */
  CUevent ev[NCC_DEV_EVENTS];   /* made on first use */
  CUmodule mod;
  cublasHandle_t blas;
  CUstream blas_stream; /* the stream the cuBLAS handle was last given */
  int blas_tried;
  int smem_optin;
  /* rounded GEMM operands (ncc_gemm_ex): grown, never moved while a captured
   * graph may use it (an outgrown buffer is kept until close) */
  CUdeviceptr scratch;
  size_t scratch_n;
  CUdeviceptr *old;
  int nold;
  /* kernel lookup cache: name -> function */
  int nfn;
  struct { const char *name; CUfunction fn; size_t shmem_set; } fn[256];
} jit_state;

#define CU_CHECK(d, call)                                                                           \
  do {                                                                                              \
    CUresult r_ = (call);                                                                           \
    /* #call is "cu.Name(...)": print the driver's own name, cuName(...) */                         \
    if (r_ != 0) return ncc_dev_fail((d), NCC_EUSER, "%s:%d: cu%s: %s (CUDA error %d)", __FILE__, __LINE__, \
                                     &(#call)[3], cu_str(r_), r_);                                    \
  } while (0)

static int jit_open(ncc_dev *d, const char *src, const char *opts) {
  jit_state *s = calloc(1, sizeof *s);
  int major = 0, minor = 0, rc, nopts = 0;
  char name[256], arch[64], nm[400], why[512], dir[1024], path[1200], err[16384];
  char *cubin = NULL, *optcopy = NULL, *tok, *save = NULL;
  const char *ov[64];
  size_t ncubin = 0;
  uint64_t h = 1469598103934665603ull;
  int nvmaj = 0, nvmin = 0;
  if (!s) return ncc_dev_fail(d, NCC_EUSER, "out of memory");
  ncc_dev_set_state(d, s);
  CU_CHECK(d, cu.DeviceGet(&s->dev, 0));
  CU_CHECK(d, cu.DeviceGetName(name, sizeof name, s->dev));
  CU_CHECK(d, cu.DeviceGetAttribute(&major, 75, s->dev));
  CU_CHECK(d, cu.DeviceGetAttribute(&minor, 76, s->dev));
  CU_CHECK(d, cu.DeviceGetAttribute(&s->smem_optin, 97, s->dev));
  CU_CHECK(d, cu.PrimaryCtxRetain(&s->ctx, s->dev));
  CU_CHECK(d, cu.CtxSetCurrent(s->ctx));
  CU_CHECK(d, cu.StreamCreate(&s->stream, 1));   /* CU_STREAM_NON_BLOCKING */
  s->cur = s->stream;
  snprintf(nm, sizeof nm, "cuda: %s (sm_%d%d, jit)", name, major, minor);
  d->graphs_unavailable = !(cu.StreamBeginCapture && cu.StreamEndCapture &&
                            (cu.StreamGetCaptureInfo || cu.StreamGetCaptureInfo2) &&
                            cu.GraphInstantiate && cu.GraphLaunch && cu.GraphExecKernelNodeSetParams &&
                            cu.GraphExecDestroy && cu.GraphDestroy);
  ncc_dev_set_name(d, nm);
  snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", major, minor);
  ov[nopts++] = arch;
  if (opts && *opts) {
    optcopy = strdup(opts);
    for (tok = optcopy ? strtok_r(optcopy, " \t\n", &save) : NULL; tok && nopts < 63;
         tok = strtok_r(NULL, " \t\n", &save))
      ov[nopts++] = tok;
  }
  pthread_mutex_lock(&g_load_mu);
  rc = load_nvrtc(why, sizeof why);
  pthread_mutex_unlock(&g_load_mu);
  if (rc) { free(optcopy); return ncc_dev_fail(d, NCC_EUSER, "cannot load NVRTC (libnvrtc.so): %s", why); }
  nv.Version(&nvmaj, &nvmin);
  h = fnv1a(h, src, strlen(src) + 1);
  h = fnv1a(h, NCC_NVRTC_PRELUDE, sizeof NCC_NVRTC_PRELUDE);
  {
    int i;
    for (i = 0; i < nopts; i++) h = fnv1a(h, ov[i], strlen(ov[i]) + 1);
  }
  h = fnv1a(h, &nvmaj, sizeof nvmaj);
  h = fnv1a(h, &nvmin, sizeof nvmin);
  path[0] = 0;
  if (cache_dir(dir, sizeof dir) == 0) {
    snprintf(path, sizeof path, "%s/%016llx.cubin", dir, (unsigned long long)h);
    cubin = read_all(path, &ncubin);
  }
  if (!cubin) {
    rc = nvrtc_compile(src, "kernels.cu", ov, nopts, 1, &cubin, &ncubin, err, sizeof err, __FILE__, __LINE__);
    if (rc) { free(optcopy); return ncc_dev_fail(d, rc, "%s", err); }
    if (path[0]) write_atomic(path, cubin, ncubin);
  }
  free(optcopy);
  {
    CUresult r = cu.ModuleLoadData(&s->mod, cubin);
    free(cubin);
    if (r != 0) {
      if (path[0]) unlink(path);   /* a damaged cache entry must not stick */
      return ncc_dev_fail(d, NCC_EUSER, "%s:%d: cuModuleLoadData: %s (CUDA error %d)", __FILE__, __LINE__, cu_str(r),
                          r);
    }
  }
  return 0;
}

static void jit_close(ncc_dev *d) {
  jit_state *s = (jit_state *)ncc_dev_state(d);
  if (!s) return;
  if (s->ctx) cu.CtxSetCurrent(s->ctx);   /* closed from any thread, like every other call */
  if (s->blas) cb.Destroy(s->blas);
  if (s->stream) cu.StreamDestroy(s->stream);
  if (s->side) cu.StreamDestroy(s->side);
  for (int i = 0; i < NCC_DEV_EVENTS; i++)
    if (s->ev[i]) cu.EventDestroy(s->ev[i]);
  if (s->scratch) cu.MemFree(s->scratch);
  for (int i = 0; i < s->nold; i++) cu.MemFree(s->old[i]);
  free(s->old);
  if (s->mod) cu.ModuleUnload(s->mod);
  if (s->ctx) cu.PrimaryCtxRelease(s->dev);
  free(s);
}

/* Every call makes the device's context current: the model may be driven from
 * a thread other than the one that opened it. */
#define JIT_CTX(d) CU_CHECK((d), cu.CtxSetCurrent(((jit_state *)ncc_dev_state(d))->ctx))

static int jit_malloc(ncc_dev *d, void **p, size_t n) {
  CUdeviceptr q = 0;
  JIT_CTX(d);
  CU_CHECK(d, cu.MemAlloc(&q, n ? n : 1));
  *p = (void *)(uintptr_t)q;
  return 0;
}
static int jit_free(ncc_dev *d, void *p) {
  JIT_CTX(d);
  CU_CHECK(d, cu.MemFree((CUdeviceptr)(uintptr_t)p));
  return 0;
}
/* page-locked host memory in the device's context (flags 0: portable
 * enough for one context, cached, not write-combined: the loader also reads it) */
static int jit_host_alloc(ncc_dev *d, void **p, size_t n) {
  JIT_CTX(d);
  CU_CHECK(d, cu.MemHostAlloc(p, n ? n : 1, 0));
  return 0;
}
static int jit_host_free(ncc_dev *d, void *p) {
  JIT_CTX(d);
  CU_CHECK(d, cu.MemFreeHost(p));
  return 0;
}
#define JIT_STREAM(d) (((jit_state *)ncc_dev_state(d))->stream)
#define JIT_CUR(d) (((jit_state *)ncc_dev_state(d))->cur)   /* ncc_stream's choice */

/* On the device's stream, after its kernels; synchronous for the caller, who
 * may reuse or read the host buffer at once (also page-locked ones). */
static int jit_memcpy(ncc_dev *d, void *dst, const void *src, size_t n, int dir) {
  CUstream st = JIT_STREAM(d);
  JIT_CTX(d);
  if (!n) return 0;
  if (dir == 0) CU_CHECK(d, cu.MemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, n, st));
  else if (dir == 1) CU_CHECK(d, cu.MemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, n, st));
  else CU_CHECK(d, cu.MemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n, st));
  CU_CHECK(d, cu.StreamSynchronize(st));
  return 0;
}
static int jit_memset(ncc_dev *d, void *p, int byte, size_t n) {
  JIT_CTX(d);
  if (n) CU_CHECK(d, cu.MemsetD8Async((CUdeviceptr)(uintptr_t)p, (unsigned char)byte, n, JIT_CUR(d)));
  return 0;
}
/* this device's work only: other instances' streams run on */
static int jit_sync(ncc_dev *d) {
  JIT_CTX(d);
  CU_CHECK(d, cu.StreamSynchronize(JIT_STREAM(d)));
  return 0;
}
/* k's function in the module (looked up once), opted in to shmem bytes of dynamic shared memory */
static int jit_fn(ncc_dev *d, const ncc_kernel *k, size_t shmem, CUfunction *out) {
  jit_state *s = (jit_state *)ncc_dev_state(d);
  int i;
  CUfunction fn = NULL;
  for (i = 0; i < s->nfn; i++)
    if (s->fn[i].name == k->name || strcmp(s->fn[i].name, k->name) == 0) { fn = s->fn[i].fn; break; }
  if (!fn) {
    CU_CHECK(d, cu.ModuleGetFunction(&fn, s->mod, k->name));
    if (s->nfn < 256) {
      i = s->nfn++;
      s->fn[i].name = k->name;
      s->fn[i].fn = fn;
      s->fn[i].shmem_set = 0;
    } else {
      i = -1;
    }
  }
  if (shmem > 48 * 1024 && (i < 0 || s->fn[i].shmem_set < shmem)) {
    /* above 48 KiB a kernel must opt in */
    CU_CHECK(d, cu.FuncSetAttribute(fn, 8, (int)shmem));
    if (i >= 0) s->fn[i].shmem_set = shmem;
  }
  *out = fn;
  return 0;
}
static int jit_launch(ncc_dev *d, const ncc_kernel *k, ncc_dim3 g, ncc_dim3 b, size_t shmem, void **args) {
  jit_state *s = (jit_state *)ncc_dev_state(d);
  CUfunction fn = NULL;
  int rc;
  JIT_CTX(d);
  if ((rc = jit_fn(d, k, shmem, &fn)) != 0) return rc;
  CU_CHECK(d, cu.LaunchKernel(fn, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)shmem, s->cur, args, NULL));
  return 0;
}

/* Streams (ncc_stream): a driver without events keeps everything on one */
static int jit_streams_ok(void) { return cu.EventCreate && cu.EventDestroy && cu.EventRecord && cu.StreamWaitEvent; }
static int jit_stream_set(ncc_dev *d, int i) {
  jit_state *s = (jit_state *)ncc_dev_state(d);
  JIT_CTX(d);
  if (i && !s->side && jit_streams_ok()) CU_CHECK(d, cu.StreamCreate(&s->side, 1));   /* CU_STREAM_NON_BLOCKING */
  s->cur = i && s->side ? s->side : s->stream;
  return 0;
}
static int jit_event(ncc_dev *d, int e, CUevent *out) {
  jit_state *s = (jit_state *)ncc_dev_state(d);
  *out = NULL;
  if (!jit_streams_ok()) return 0;
  if (!s->ev[e]) CU_CHECK(d, cu.EventCreate(&s->ev[e], 2));   /* CU_EVENT_DISABLE_TIMING */
  *out = s->ev[e];
  return 0;
}
static int jit_event_record(ncc_dev *d, int e) {
  CUevent ev;
  int rc;
  JIT_CTX(d);
  if ((rc = jit_event(d, e, &ev)) != 0 || !ev) return rc;
  CU_CHECK(d, cu.EventRecord(ev, JIT_CUR(d)));
  return 0;
}
static int jit_event_wait(ncc_dev *d, int e) {
  CUevent ev;
  int rc;
  JIT_CTX(d);
  if ((rc = jit_event(d, e, &ev)) != 0 || !ev) return rc;
  CU_CHECK(d, cu.StreamWaitEvent(JIT_CUR(d), ev, 0));
  return 0;
}

/* CUDA graphs (graph.c): stream capture of the device's stream, relaxed so
 * that nothing the step calls (a kernel attribute) is refused while it runs */
static int jit_graph_begin(ncc_dev *d) {
  JIT_CTX(d);
  CU_CHECK(d, cu.StreamBeginCapture(JIT_STREAM(d), 2));   /* CU_STREAM_CAPTURE_MODE_RELAXED */
  return 0;
}
/* The captured graph lives as long as its instance: the nodes whose arguments
 * a replay replaces (cuGraphExecKernelNodeSetParams) are nodes of that graph,
 * and a destroyed graph's node handles are invalid (CUDA_ERROR_INVALID_VALUE
 * on the first replay with a live argument: what the first GPU run of a
 * training step met). */
typedef struct { CUgraph graph; CUgraphExec exec; } jit_graph;
static int jit_graph_end(ncc_dev *d, void **exec) {
  CUgraph graph = NULL;
  jit_graph *g = NULL;
  CUresult r;
  JIT_CTX(d);
  r = cu.StreamEndCapture(JIT_STREAM(d), &graph);
  if (r == 0 && exec && !(g = (jit_graph *)calloc(1, sizeof *g))) r = 2;   /* CUDA_ERROR_OUT_OF_MEMORY */
  if (r == 0 && exec) r = cu.GraphInstantiate(&g->exec, graph, 0);
  if (r != 0 || !exec) {
    if (graph) cu.GraphDestroy(graph);
    free(g);
    if (r == 0) return 0;
    return ncc_dev_fail(d, NCC_EUSER, "%s:%d: cuStreamEndCapture/cuGraphInstantiate: %s (CUDA error %d)", __FILE__,
                        __LINE__, cu_str(r), r);
  }
  g->graph = graph;
  *exec = g;
  return 0;
}
static int jit_graph_node(ncc_dev *d, void **node) {
  int status = 0;
  const CUgraphNode *deps = NULL;
  size_t n = 0;
  if (cu.StreamGetCaptureInfo) CU_CHECK(d, cu.StreamGetCaptureInfo(JIT_CUR(d), &status, NULL, NULL, &deps, NULL, &n));
  else CU_CHECK(d, cu.StreamGetCaptureInfo2(JIT_CUR(d), &status, NULL, NULL, &deps, &n));
  /* in the launch's stream, the node it added is the one the next depends on */
  if (status != 1 || n != 1) return ncc_dev_fail(d, NCC_EINTERNAL, "graph capture: %zu nodes after a launch", n);
  *node = deps[0];
  return 0;
}
static int jit_graph_set_args(ncc_dev *d, void *exec, void *node, const ncc_kernel *k, ncc_dim3 g, ncc_dim3 b,
                              size_t shmem, void **args) {
  CUkernelNodeParams p;
  int rc;
  JIT_CTX(d);
  memset(&p, 0, sizeof p);
  if ((rc = jit_fn(d, k, shmem, &p.func)) != 0) return rc;
  p.gridDimX = g.x, p.gridDimY = g.y, p.gridDimZ = g.z;
  p.blockDimX = b.x, p.blockDimY = b.y, p.blockDimZ = b.z;
  p.sharedMemBytes = (unsigned)shmem;
  p.kernelParams = args;
  CU_CHECK(d, cu.GraphExecKernelNodeSetParams(((jit_graph *)exec)->exec, (CUgraphNode)node, &p));
  return 0;
}
static int jit_graph_launch(ncc_dev *d, void *exec) {
  JIT_CTX(d);
  CU_CHECK(d, cu.GraphLaunch(((jit_graph *)exec)->exec, JIT_STREAM(d)));
  return 0;
}
static void jit_graph_free(ncc_dev *d, void *exec) {
  jit_state *s = (jit_state *)ncc_dev_state(d);
  jit_graph *g = (jit_graph *)exec;
  if (s && s->ctx) cu.CtxSetCurrent(s->ctx);
  if (!g) return;
  cu.GraphExecDestroy(g->exec);
  cu.GraphDestroy(g->graph);
  free(g);
}
static int jit_sgemm(ncc_dev *d, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                     long long sa, const float *B, int ldb, long long sb, float beta, float *C, int ldc, long long sc,
                     int batch, int prec) {
  jit_state *s = (jit_state *)ncc_dev_state(d);
  int st;
  JIT_CTX(d);
  if (!s->blas) {
    char why[512];
    int rc;
    pthread_mutex_lock(&g_load_mu);
    rc = load_cublas(why, sizeof why);
    pthread_mutex_unlock(&g_load_mu);
    if (rc) return ncc_dev_fail(d, NCC_EUSER, "cannot load cuBLAS (libcublas.so): %s", why);
    if ((st = cb.Create(&s->blas)) != 0)
      return ncc_dev_fail(d, NCC_EUSER, "%s:%d: cublasCreate: status %d", __FILE__, __LINE__, st);
  }
  if (s->blas_stream != s->cur) {   /* the stream ncc_stream chose */
    if ((st = cb.SetStream(s->blas, s->cur)) != 0)
      return ncc_dev_fail(d, NCC_EUSER, "%s:%d: cublasSetStream: status %d", __FILE__, __LINE__, st);
    s->blas_stream = s->cur;
  }
  /* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands */
  if (prec != NCC_GEMM_FP32) {
    /* both operands rounded into dense copies by the prelude's ncc_round_k (a
     * matrix shared by the batch, stride 0, once), then float32 data
     * (CUDA_R_32F = 0) with CUBLAS_COMPUTE_32F_FAST_TF32 (77): TF32 tensor cores,
     * exact on the rounded values; CUBLAS_GEMM_DEFAULT (-1) */
    static const ncc_kernel round_k = {"ncc_round_k", 0, 0, 0, 0};
    int arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
    int na = sa ? batch : 1, nb = sb ? batch : 1;
    size_t ea = (size_t)na * arows * acols, eb = (size_t)nb * brows * bcols;
    if (m > 0 && n > 0 && k > 0) {
      CUdeviceptr ra, rb;
      if (ea + eb > s->scratch_n) {
        CUdeviceptr p = 0;
        if (s->scratch) {
          CUdeviceptr *o = (CUdeviceptr *)realloc(s->old, sizeof *o * (size_t)(s->nold + 1));
          if (!o) return ncc_dev_fail(d, NCC_EUSER, "ncc_gemm_ex: out of memory");
          s->old = o;
          s->old[s->nold++] = s->scratch;
          s->scratch = 0, s->scratch_n = 0;
        }
        CU_CHECK(d, cu.MemAlloc(&p, (ea + eb) * sizeof(float)));
        s->scratch = p, s->scratch_n = ea + eb;
      }
      ra = s->scratch, rb = s->scratch + ea * sizeof(float);
      {
        long long lda_ = lda, ldb_ = ldb;
        int p_ = prec;
        void *aa[] = {&A, &lda_, &sa, &arows, &acols, &na, &p_, &ra};
        void *ab[] = {&B, &ldb_, &sb, &brows, &bcols, &nb, &p_, &rb};
        ncc_dim3 blk = {256, 1, 1}, ga = {(unsigned)((ea + 255) / 256 < 4096 ? (ea + 255) / 256 : 4096), 1, 1},
                 gb = {(unsigned)((eb + 255) / 256 < 4096 ? (eb + 255) / 256 : 4096), 1, 1};
        int rc = jit_launch(d, &round_k, ga, blk, 0, aa);
        if (!rc) rc = jit_launch(d, &round_k, gb, blk, 0, ab);
        if (rc) return rc;
      }
      A = (const float *)(uintptr_t)ra, lda = acols, sa = sa ? (long long)arows * acols : 0;
      B = (const float *)(uintptr_t)rb, ldb = bcols, sb = sb ? (long long)brows * bcols : 0;
    }
    st = cb.GemmStridedBatchedEx(s->blas, tb ? 1 : 0, ta ? 1 : 0, n, m, k, &alpha, B, 0, ldb, sb, A, 0, lda, sa, &beta,
                                 C, 0, ldc, sc, batch, 77, -1);
    if (st != 0)
      return ncc_dev_fail(d, NCC_EUSER, "%s:%d: cublasGemmStridedBatchedEx: status %d", __FILE__, __LINE__, st);
    return 0;
  }
  st = cb.SgemmStridedBatched(s->blas, tb ? 1 : 0, ta ? 1 : 0, n, m, k, &alpha, B, ldb, sb, A, lda, sa, &beta, C, ldc,
                              sc, batch);
  if (st != 0)
    return ncc_dev_fail(d, NCC_EUSER, "%s:%d: cublasSgemmStridedBatched: status %d", __FILE__, __LINE__, st);
  return 0;
}

const ncc_backend ncc_backend_jit = {"jit",      jit_open,   jit_close, jit_malloc, jit_free, jit_memcpy,
                                     jit_memset, jit_sync,   jit_launch, jit_sgemm,
                                     jit_host_alloc, jit_host_free,
                                     jit_graph_begin, jit_graph_end, jit_graph_node, jit_graph_set_args,
                                     jit_graph_launch, jit_graph_free,
                                     jit_stream_set, jit_event_record, jit_event_wait};
