/* ncc_cudart.h — the cudart backend: CUDA runtime + cuBLAS for models that nvcc
 * compiles whole (host code and kernels in one MODEL.cu).
 *
 * libnccrt must load on machines without CUDA, so it links no CUDA library;
 * this header is compiled into the nvcc-built model instead (it is included by
 * ncc_kernel.h on the host side of an nvcc build) and registers its table of
 * functions with libnccrt when the model is loaded.  Link such a model with
 * -lcudart -lcublas -lnccrt.  Every CUDA and cuBLAS call is checked and a
 * failure names file:line of the call.
 * Each device (each model instance) has a non-blocking stream of its own:
 * kernels, copies and cuBLAS go to it, and sync waits for it alone, so that
 * instances driven from different threads overlap on the GPU.  Copies stay
 * synchronous for the caller (async on the stream, then a wait for it).
 */
#ifndef NCC_CUDART_H
#define NCC_CUDART_H
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include "ncc_rt.h"

typedef struct ncc_cudart_state {
  int dev;
  cudaStream_t stream;
  cudaStream_t side;          /* stream 1 (ncc_stream), made on first use */
  cudaStream_t cur;           /* where launches, memsets and GEMMs go: stream or side */
  cudaEvent_t ev[NCC_DEV_EVENTS];   /* made on first use */
  cublasHandle_t blas;
  cudaStream_t blas_stream;   /* the stream the cuBLAS handle was last given */
  /* rounded GEMM operands (ncc_gemm_ex): grown, never moved while a captured
   * graph may use it (an outgrown buffer is kept until close) */
  float *scratch;
  size_t scratch_n;
  void **old;
  int nold;
} ncc_cudart_state;
/* ncc_kernel.h defines it, after the rounding functions it calls */
static __global__ void ncc_round_k(const float *src, long long ld, long long stride, int rows, int cols, int batch,
                                   int prec, float *dst);
#define NCC_CUDART_STREAM(d) (((ncc_cudart_state *)ncc_dev_state(d))->stream)
#define NCC_CUDART_CUR(d) (((ncc_cudart_state *)ncc_dev_state(d))->cur)   /* ncc_stream's choice */

#define NCC_CUDART_CHECK(d, call)                                                                         \
  do {                                                                                                    \
    cudaError_t e_ = (call);                                                                              \
    if (e_ != cudaSuccess)                                                                                \
      return ncc_dev_fail((d), NCC_EUSER, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
  } while (0)

static int ncc_cudart_open(ncc_dev *d, const char *src, const char *opts) {
  int n = 0;
  cudaDeviceProp p;
  char nm[400];
  ncc_cudart_state *s;
  cudaError_t e = cudaGetDeviceCount(&n);
  (void)src;
  (void)opts;
  if (e != cudaSuccess || n < 1)
    return ncc_dev_fail(d, NCC_EUSER, "no CUDA device answers: %s",
                        e != cudaSuccess ? cudaGetErrorString(e) : "the CUDA runtime finds no device");
  NCC_CUDART_CHECK(d, cudaSetDevice(0));
  NCC_CUDART_CHECK(d, cudaGetDeviceProperties(&p, 0));
  s = (ncc_cudart_state *)calloc(1, sizeof *s);
  if (!s) return ncc_dev_fail(d, NCC_EUSER, "out of memory");
  ncc_dev_set_state(d, s);
  NCC_CUDART_CHECK(d, cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  s->cur = s->stream;
  snprintf(nm, sizeof nm, "cuda: %s (sm_%d%d)", p.name, p.major, p.minor);
  ncc_dev_set_name(d, nm);
  return 0;
}
static void ncc_cudart_close(ncc_dev *d) {
  ncc_cudart_state *s = (ncc_cudart_state *)ncc_dev_state(d);
  if (!s) return;
  if (s->blas) cublasDestroy(s->blas);
  if (s->stream) cudaStreamDestroy(s->stream);
  if (s->side) cudaStreamDestroy(s->side);
  for (int i = 0; i < NCC_DEV_EVENTS; i++)
    if (s->ev[i]) cudaEventDestroy(s->ev[i]);
  if (s->scratch) cudaFree(s->scratch);
  for (int i = 0; i < s->nold; i++) cudaFree(s->old[i]);
  free(s->old);
  free(s);
}
static int ncc_cudart_malloc(ncc_dev *d, void **p, size_t n) {
  NCC_CUDART_CHECK(d, cudaMalloc(p, n ? n : 1));
  return 0;
}
static int ncc_cudart_free(ncc_dev *d, void *p) {
  NCC_CUDART_CHECK(d, cudaFree(p));
  return 0;
}
static int ncc_cudart_host_alloc(ncc_dev *d, void **p, size_t n) {
  NCC_CUDART_CHECK(d, cudaHostAlloc(p, n ? n : 1, cudaHostAllocDefault));
  return 0;
}
static int ncc_cudart_host_free(ncc_dev *d, void *p) {
  NCC_CUDART_CHECK(d, cudaFreeHost(p));
  return 0;
}
static int ncc_cudart_memcpy(ncc_dev *d, void *dst, const void *src, size_t n, int dir) {
  cudaStream_t st = NCC_CUDART_STREAM(d);
  if (!n) return 0;
  NCC_CUDART_CHECK(d, cudaMemcpyAsync(dst, src, n, dir == 0 ? cudaMemcpyHostToDevice
                                                   : dir == 1 ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice, st));
  NCC_CUDART_CHECK(d, cudaStreamSynchronize(st));
  return 0;
}
static int ncc_cudart_memset(ncc_dev *d, void *p, int byte, size_t n) {
  if (n) NCC_CUDART_CHECK(d, cudaMemsetAsync(p, byte, n, NCC_CUDART_CUR(d)));
  return 0;
}
/* this device's work only: other instances' streams run on */
static int ncc_cudart_sync(ncc_dev *d) {
  NCC_CUDART_CHECK(d, cudaStreamSynchronize(NCC_CUDART_STREAM(d)));
  return 0;
}
static int ncc_cudart_launch(ncc_dev *d, const ncc_kernel *k, ncc_dim3 g, ncc_dim3 b, size_t shmem, void **args) {
  if (!k->cuda_fn) return ncc_dev_fail(d, NCC_EINTERNAL, "kernel %s has no GPU code in this build", k->name);
  if (shmem > 48 * 1024)   /* above 48 KiB a kernel must opt in */
    NCC_CUDART_CHECK(d, cudaFuncSetAttribute(k->cuda_fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shmem));
  NCC_CUDART_CHECK(d, cudaLaunchKernel(k->cuda_fn, dim3(g.x, g.y, g.z), dim3(b.x, b.y, b.z), args, shmem,
                                       NCC_CUDART_CUR(d)));
  NCC_CUDART_CHECK(d, cudaGetLastError());
  return 0;
}
/* streams (ncc_stream) */
static int ncc_cudart_stream_set(ncc_dev *d, int i) {
  ncc_cudart_state *s = (ncc_cudart_state *)ncc_dev_state(d);
  if (i && !s->side) NCC_CUDART_CHECK(d, cudaStreamCreateWithFlags(&s->side, cudaStreamNonBlocking));
  s->cur = i ? s->side : s->stream;
  return 0;
}
static int ncc_cudart_event(ncc_dev *d, int e, cudaEvent_t *out) {
  ncc_cudart_state *s = (ncc_cudart_state *)ncc_dev_state(d);
  if (!s->ev[e]) NCC_CUDART_CHECK(d, cudaEventCreateWithFlags(&s->ev[e], cudaEventDisableTiming));
  *out = s->ev[e];
  return 0;
}
static int ncc_cudart_event_record(ncc_dev *d, int e) {
  cudaEvent_t ev;
  int rc = ncc_cudart_event(d, e, &ev);
  if (rc) return rc;
  NCC_CUDART_CHECK(d, cudaEventRecord(ev, NCC_CUDART_CUR(d)));
  return 0;
}
static int ncc_cudart_event_wait(ncc_dev *d, int e) {
  cudaEvent_t ev;
  int rc = ncc_cudart_event(d, e, &ev);
  if (rc) return rc;
  NCC_CUDART_CHECK(d, cudaStreamWaitEvent(NCC_CUDART_CUR(d), ev, 0));
  return 0;
}
static int ncc_cudart_sgemm(ncc_dev *d, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                            long long sa, const float *B, int ldb, long long sb, float beta, float *C, int ldc,
                            long long sc, int batch, int prec) {
  ncc_cudart_state *s = (ncc_cudart_state *)ncc_dev_state(d);
  cublasStatus_t st;
  if (!s->blas) {
    if ((st = cublasCreate(&s->blas)) != CUBLAS_STATUS_SUCCESS)
      return ncc_dev_fail(d, NCC_EUSER, "%s:%d: cublasCreate: status %d", __FILE__, __LINE__, (int)st);
  }
  if (s->blas_stream != s->cur) {   /* the stream ncc_stream chose */
    if ((st = cublasSetStream(s->blas, s->cur)) != CUBLAS_STATUS_SUCCESS)
      return ncc_dev_fail(d, NCC_EUSER, "%s:%d: cublasSetStream: status %d", __FILE__, __LINE__, (int)st);
    s->blas_stream = s->cur;
  }
  /* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T */
  if (prec != NCC_GEMM_FP32) {
    /* both operands rounded into dense copies (ncc_round_k; a matrix shared by
     * the batch, stride 0, once), then TF32 tensor cores, exact on them */
    int arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
    int na = sa ? batch : 1, nb = sb ? batch : 1;
    size_t ea = (size_t)na * arows * acols, eb = (size_t)nb * brows * bcols;
    if (m > 0 && n > 0 && k > 0 && ea + eb > s->scratch_n) {
      void *p = NULL;
      if (s->scratch) {
        void **o = (void **)realloc(s->old, sizeof *o * (size_t)(s->nold + 1));
        if (!o) return ncc_dev_fail(d, NCC_EUSER, "ncc_gemm_ex: out of memory");
        s->old = o;
        s->old[s->nold++] = s->scratch;
        s->scratch = NULL, s->scratch_n = 0;
      }
      NCC_CUDART_CHECK(d, cudaMalloc(&p, (ea + eb) * sizeof(float)));
      s->scratch = (float *)p, s->scratch_n = ea + eb;
    }
    if (m > 0 && n > 0 && k > 0) {
      float *ra = s->scratch, *rb = s->scratch + ea;
      ncc_round_k<<<(unsigned)((ea + 255) / 256 < 4096 ? (ea + 255) / 256 : 4096), 256, 0, s->cur>>>(
          A, lda, sa, arows, acols, na, prec, ra);
      ncc_round_k<<<(unsigned)((eb + 255) / 256 < 4096 ? (eb + 255) / 256 : 4096), 256, 0, s->cur>>>(
          B, ldb, sb, brows, bcols, nb, prec, rb);
      NCC_CUDART_CHECK(d, cudaGetLastError());
      A = ra, lda = acols, sa = sa ? (long long)arows * acols : 0;
      B = rb, ldb = bcols, sb = sb ? (long long)brows * bcols : 0;
    }
    st = cublasGemmStridedBatchedEx(s->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                    &alpha, B, CUDA_R_32F, ldb, sb, A, CUDA_R_32F, lda, sa, &beta, C, CUDA_R_32F, ldc,
                                    sc, batch, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
      return ncc_dev_fail(d, NCC_EUSER, "%s:%d: cublasGemmStridedBatchedEx: status %d", __FILE__, __LINE__, (int)st);
    return 0;
  }
  st = cublasSgemmStridedBatched(s->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                 &alpha, B, ldb, sb, A, lda, sa, &beta, C, ldc, sc, batch);
  if (st != CUBLAS_STATUS_SUCCESS)
    return ncc_dev_fail(d, NCC_EUSER, "%s:%d: cublasSgemmStridedBatched: status %d", __FILE__, __LINE__, (int)st);
  return 0;
}

/* CUDA graphs (libnccrt's graph.c drives them): stream capture of the device's
 * stream, relaxed so that nothing the step calls (a kernel attribute) is refused */
static int ncc_cudart_graph_begin(ncc_dev *d) {
  NCC_CUDART_CHECK(d, cudaStreamBeginCapture(NCC_CUDART_STREAM(d), cudaStreamCaptureModeRelaxed));
  return 0;
}
/* The captured graph lives as long as its instance: the nodes whose arguments
 * a replay replaces are nodes of that graph, invalid once it is destroyed. */
typedef struct { cudaGraph_t graph; cudaGraphExec_t exec; } ncc_cudart_graph;
static int ncc_cudart_graph_end(ncc_dev *d, void **exec) {
  cudaGraph_t graph = NULL;
  ncc_cudart_graph *g = NULL;
  cudaError_t e = cudaStreamEndCapture(NCC_CUDART_STREAM(d), &graph);
  if (e == cudaSuccess && exec && !(g = (ncc_cudart_graph *)calloc(1, sizeof *g))) e = cudaErrorMemoryAllocation;
#if CUDART_VERSION >= 12000
  if (e == cudaSuccess && exec) e = cudaGraphInstantiate(&g->exec, graph, 0);
#else
  if (e == cudaSuccess && exec) e = cudaGraphInstantiate(&g->exec, graph, NULL, NULL, 0);
#endif
  if (e != cudaSuccess || !exec) {
    if (graph) cudaGraphDestroy(graph);
    free(g);
    NCC_CUDART_CHECK(d, e);
    return 0;
  }
  g->graph = graph;
  *exec = g;
  return 0;
}
static int ncc_cudart_graph_node(ncc_dev *d, void **node) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t *deps = NULL;
  size_t n = 0;
#if CUDART_VERSION >= 13000   /* the signature with edge data */
  NCC_CUDART_CHECK(d, cudaStreamGetCaptureInfo(NCC_CUDART_CUR(d), &st, NULL, NULL, &deps, NULL, &n));
#else
  NCC_CUDART_CHECK(d, cudaStreamGetCaptureInfo_v2(NCC_CUDART_CUR(d), &st, NULL, NULL, &deps, &n));
#endif
  /* in the launch's stream, the node it added is the one the next depends on */
  if (st != cudaStreamCaptureStatusActive || n != 1)
    return ncc_dev_fail(d, NCC_EINTERNAL, "graph capture: %zu nodes after a launch", n);
  *node = (void *)deps[0];
  return 0;
}
static int ncc_cudart_graph_set_args(ncc_dev *d, void *exec, void *node, const ncc_kernel *k, ncc_dim3 g,
                                     ncc_dim3 b, size_t shmem, void **args) {
  cudaKernelNodeParams p = cudaKernelNodeParams();   /* all zero (extra: none) */
  p.func = (void *)k->cuda_fn;
  p.gridDim = dim3(g.x, g.y, g.z);
  p.blockDim = dim3(b.x, b.y, b.z);
  p.sharedMemBytes = (unsigned)shmem;
  p.kernelParams = args;
  NCC_CUDART_CHECK(d, cudaGraphExecKernelNodeSetParams(((ncc_cudart_graph *)exec)->exec, (cudaGraphNode_t)node, &p));
  return 0;
}
static int ncc_cudart_graph_launch(ncc_dev *d, void *exec) {
  NCC_CUDART_CHECK(d, cudaGraphLaunch(((ncc_cudart_graph *)exec)->exec, NCC_CUDART_STREAM(d)));
  return 0;
}
static void ncc_cudart_graph_free(ncc_dev *d, void *exec) {
  ncc_cudart_graph *g = (ncc_cudart_graph *)exec;
  (void)d;
  if (!g) return;
  cudaGraphExecDestroy(g->exec);
  cudaGraphDestroy(g->graph);
  free(g);
}

static const ncc_backend ncc_cudart_backend = {
    "cudart",          ncc_cudart_open,  ncc_cudart_close,  ncc_cudart_malloc, ncc_cudart_free,
    ncc_cudart_memcpy, ncc_cudart_memset, ncc_cudart_sync,  ncc_cudart_launch, ncc_cudart_sgemm,
    ncc_cudart_host_alloc, ncc_cudart_host_free,
    ncc_cudart_graph_begin, ncc_cudart_graph_end, ncc_cudart_graph_node, ncc_cudart_graph_set_args,
    ncc_cudart_graph_launch, ncc_cudart_graph_free,
    ncc_cudart_stream_set, ncc_cudart_event_record, ncc_cudart_event_wait};

__attribute__((constructor)) static void ncc_cudart_register(void) { ncc_register_cudart(&ncc_cudart_backend); }

#endif
