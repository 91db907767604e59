/* ncc_rt.h — libnccrt, the thin runtime under generated models.
 *
 * One device interface (a small table of functions, ggml's backend habit)
 * with three implementations:
 *   emu   — CPU emulation of the generated kernels (ncc_emu.h), GEMMs to a CPU BLAS;
 *   jit   — NVRTC + CUDA driver API, both dlopen'ed at run time, so that
 *           libnccrt itself links no CUDA library and loads on any machine;
 *   cudart— the CUDA runtime + cuBLAS, for models compiled whole by nvcc:
 *           header-only (ncc_cudart.h), compiled into the model by nvcc.
 * Every call returns 0 or an NCC_E* code; the message of the last failure is
 * kept in the device (ncc_dev_error) and names file and line of the failing
 * CUDA/NVRTC/cuBLAS call. All public symbols start with ncc_.
 */
#ifndef NCC_RT_H
#define NCC_RT_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

enum { NCC_OK = 0, NCC_EUSER = 1, NCC_EINTERNAL = 2 };

/* dtype codes, in the order of the IR's DType */
enum { NCC_F32 = 0, NCC_F16 = 1, NCC_BF16 = 2, NCC_I32 = 3, NCC_I8 = 4 };

typedef struct ncc_dim3 { unsigned x, y, z; } ncc_dim3;

/* One kernel of a generated model.  Generated code fills it per build:
 *   emu:    emu_block runs one whole block (barrier-free kernels: a loop over
 *           threads with the body inlined; NULL for the others); emu_thread runs
 *           one thread (used with fibers when flags has NCC_KF_BARRIER or
 *           NCC_KF_WARP, and by the checked mode);
 *   cudart: cuda_fn is the __global__ function;
 *   jit:    only name is set; the function is looked up in the NVRTC module. */
/* NCC_KF_BARRIER: the kernel calls __syncthreads(); NCC_KF_WARP: it calls warp
 * collectives (__shfl_*_sync, __ballot_sync, __syncwarp...).  Either runs it on
 * fibers under emulation.  NCC_KF_BARRIER_WARP is both, one word for the tools
 * that read NCC_KERNEL_DESC lines. */
enum { NCC_KF_BARRIER = 1, NCC_KF_WARP = 2, NCC_KF_BARRIER_WARP = 3 };
typedef struct ncc_kernel {
  const char *name;
  int flags;
  void (*emu_block)(void **args);
  void (*emu_thread)(void **args);
  const void *cuda_fn;
} ncc_kernel;

typedef struct ncc_dev ncc_dev;
enum { NCC_DEV_AUTO = 0, NCC_DEV_CUDA = 1, NCC_DEV_EMU = 2 };

/* Tensor and model descriptions that generated code exports (MODEL_info()). */
typedef struct ncc_tensor_info {
  const char *name;
  int dtype;
  int rank;
  int64_t shape[8];
} ncc_tensor_info;
typedef struct ncc_model_info {
  const char *model;
  int ninputs;  const ncc_tensor_info *inputs;
  int noutputs; const ncc_tensor_info *outputs;
  int nparams;  const ncc_tensor_info *params;   /* state_dict names */
  size_t arena_bytes;
  int ntrain_inputs; const ncc_tensor_info *train_inputs;   /* the training step's (0, NULL: inference only) */
#define NCC_HAVE_TRAIN_INPUTS 1
  int max_batch;          /* the compiled batch N (the inputs' first dimension; 1 without one) */
  int batch_variable;     /* 1: M_infer_io_batch takes any batch 1..N; 0: N only */
  const char *precision;  /* "fp32", "tf32": the --precision it was compiled with */
  int train_batch_variable;   /* 1: M_train_step_io_batch takes 1..N rows; 0: N only (or no training step) */
#define NCC_HAVE_BATCH_INFO 1
} ncc_model_info;


/* ---- devices ---------------------------------------------------------- */
/* Opens a device. kind: NCC_DEV_AUTO (a GPU when one answers, else emu),
 * NCC_DEV_CUDA (an error when no GPU answers), NCC_DEV_EMU.  For the jit
 * backend, kernel_src is the kernels section (compiled by NVRTC with
 * jit_opts, cubin cached on disk by a hash of source and options); for
 * emu and cudart builds it is NULL.  On failure *d may still be set so that
 * ncc_dev_error(*d) can be read; ncc_dev_close(*d) frees it. */
int  ncc_dev_open(ncc_dev **d, int kind, const char *kernel_src, const char *jit_opts);
void ncc_dev_close(ncc_dev *d);
const char *ncc_dev_error(const ncc_dev *d);
const char *ncc_dev_name(const ncc_dev *d);   /* "emu: 2 threads", "cuda: NVIDIA H100 (sm_90)" */
int  ncc_dev_is_emu(const ncc_dev *d);

int ncc_malloc(ncc_dev *d, void **p, size_t n);
int ncc_free(ncc_dev *d, void *p);
/* Host memory for staging copies to the device: page-locked on a GPU
 * (cuMemHostAlloc / cudaHostAlloc: host-to-device copies from it run at the
 * bus's full speed, with no bounce through a driver buffer), plain malloc
 * under emulation.  Free it with ncc_host_free on the same device. */
int ncc_host_alloc(ncc_dev *d, void **p, size_t n);
int ncc_host_free(ncc_dev *d, void *p);
int ncc_memcpy_h2d(ncc_dev *d, void *dst, const void *src, size_t n);
int ncc_memcpy_d2h(ncc_dev *d, void *dst, const void *src, size_t n);
int ncc_memcpy_d2d(ncc_dev *d, void *dst, const void *src, size_t n);
int ncc_memset(ncc_dev *d, void *p, int byte, size_t n);
int ncc_sync(ncc_dev *d);
/* Launches k over grid x block threads with `shmem` bytes of dynamic shared memory.
 * args[i] points at the i-th kernel argument (the cudaLaunchKernel convention). */
int ncc_launch(ncc_dev *d, const ncc_kernel *k, ncc_dim3 grid, ncc_dim3 block,
               size_t shmem, void **args);
/* Row-major single-precision GEMM, batched with strides (batch=1 for one):
 * C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b], op(X) = X or X^T.
 * cuBLAS on a GPU, CPU BLAS (OpenBLAS) under emulation. */
int ncc_sgemm(ncc_dev *d, int trans_a, int trans_b, int m, int n, int k, float alpha,
              const float *A, int lda, long long stride_a,
              const float *B, int ldb, long long stride_b, float beta,
              float *C, int ldc, long long stride_c, int batch);
/* The same GEMM with both operands' elements rounded to `prec` and products
 * summed in float32 (--precision with --cublas, docs/precision.md): on a GPU
 * cublasGemmStridedBatchedEx with float32 data and the compute type
 * CUBLAS_COMPUTE_32F_FAST_TF32, _FAST_16F or _FAST_16BF (cuBLAS converts the
 * operands and runs tensor cores); under emulation rounded copies of the
 * operands (ncc_kernel.h's ncc_tf32, ncc_fp16, ncc_bf16) go to the CPU BLAS.
 * NCC_GEMM_FP32 is ncc_sgemm. */
enum { NCC_GEMM_FP32 = 0, NCC_GEMM_TF32 = 1, NCC_GEMM_FP16 = 2, NCC_GEMM_BF16 = 3 };
int ncc_gemm_ex(ncc_dev *d, int prec, int trans_a, int trans_b, int m, int n, int k, float alpha,
                const float *A, int lda, long long stride_a,
                const float *B, int ldb, long long stride_b, float beta,
                float *C, int ldc, long long stride_c, int batch);

/* Allocates n buffers at once (create time only).  Normally one arena of
 * max(offsets[i] + sizes[i]) bytes with ptrs[i] = arena + offsets[i]; in checked
 * mode (NCC_CHECK=1) each buffer gets its own guarded mapping.  *arena is what
 * ncc_free_buffers releases. */
int ncc_alloc_buffers(ncc_dev *d, int n, const size_t *offsets, const size_t *sizes,
                      void **ptrs, void **arena);
int ncc_free_buffers(ncc_dev *d, void *arena);
/* Compiles CUDA C (the kernels section) to PTX with NVRTC (dlopen'ed).
 * *ptx is malloc'ed. Returns 0, or NCC_EUSER with the compiler log in err. */
int ncc_nvrtc_ptx(const char *src, const char *name, const char *const *opts, int nopts,
                  char **ptx, char *err, size_t errn);

/* ---- files -------------------------------------------------------------- */
/* Loads every tensor of `params` from a safetensors file into dev_ptrs[i]
 * (device memory, f32; f16/bf16/f64 in the file are converted).  Missing,
 * extra (except those named in `ignore`, e.g. "num_batches_tracked") and
 * mis-shaped tensors are all listed in the error.  Returns 0 or NCC_EUSER. */
int ncc_load_safetensors(ncc_dev *d, const char *path, const ncc_tensor_info *params, int n,
                         void *const *dev_ptrs, char *err, size_t errn);
/* The same from a safetensors file's bytes in memory (a frozen model's weights,
 * ncc --freeze); `what` names them in messages. */
int ncc_load_safetensors_mem(ncc_dev *d, const void *bytes, size_t n, const char *what, const ncc_tensor_info *params,
                             int np, void *const *dev_ptrs, char *err, size_t errn);
/* Writes tensors (host pointers) atomically and durably: PATH.tmp.<pid> in the
 * same folder, fsync, rename over PATH, fsync of the folder.  On any failure
 * (disk full, I/O error, short write) the temporary file is removed, a
 * previous PATH is left as it was, and err names PATH and the reason.
 * dtypes: NCC_F32, F16, BF16, I32, I8, and the host-only NCC_I64 / NCC_F64
 * (checkpoint scalars: __step__, __epoch__, num_batches_tracked, __lr__). */
int ncc_save_safetensors(const char *path, const ncc_tensor_info *t, int n,
                         const void *const *host_ptrs, char *err, size_t errn);
/* Weight quantization: writes OUT (atomically) with every floating tensor of
 * rank >= 2 of IN (conv and linear weights) as int8, symmetric per output
 * channel (dimension 0): scale = max|w| / 127, q = round-to-even(w / scale),
 * stored beside it as float32 "NAME.__scale__" [rows]; other tensors as they
 * are.  About a quarter of the bytes.  The loaders (ncc_load_safetensors*)
 * dequantize such a tensor, q * scale, wherever a float tensor is wanted.
 * *nquant: tensors quantized; *bytes_in/out: the two files' sizes (any may
 * be NULL).  A non-finite weight is an error naming the tensor and element. */
int ncc_quantize_safetensors(const char *in, const char *out, int *nquant, int64_t *bytes_in, int64_t *bytes_out,
                             char *err, size_t errn);
/* .npy: reads a whole array (malloc'ed *data); validates magic, header, dtype, size. */
int ncc_npy_read(const char *path, int *dtype, int *rank, int64_t shape[8], void **data,
                 char *err, size_t errn);
int ncc_npy_write(const char *path, int dtype, int rank, const int64_t *shape, const void *data,
                  char *err, size_t errn);

/* ---- additions (trainer): checkpoints ------------------------------------ */
/* Host-only dtypes, for safetensors files: 64-bit scalars of checkpoints.
 * No tensor of a model has them; they never reach a device. */
enum { NCC_I64 = 5, NCC_F64 = 6 };
/* One tensor wanted from a file, for ncc_load_safetensors_opt.
 *   t:       name, the dtype to deliver (NCC_F32, I32, I8 on the device or the
 *            host; NCC_I64, F64 on the host only) and the shape;
 *   dst:     where the data goes: device memory, or host memory with NCC_ST_HOST;
 *   flags:   NCC_ST_OPTIONAL: absent from the file is not an error;
 *   present: set by the call: 1 when the file had it and it was loaded. */
enum { NCC_ST_OPTIONAL = 1, NCC_ST_HOST = 2 };
typedef struct ncc_st_want {
  ncc_tensor_info t;
  void *dst;
  int flags;
  int present;
} ncc_st_want;
/* call flags: NCC_ST_ALLOW_EXTRA accepts tensors of the file that nobody
 * wants (without it they are an error, as in ncc_load_safetensors, except
 * names ending in num_batches_tracked). */
enum { NCC_ST_ALLOW_EXTRA = 1 };
/* Like ncc_load_safetensors, for a list of wanted tensors some of which may be
 * optional: every missing required, unexpected, mis-shaped or mis-typed tensor
 * is listed in one message; nothing is copied unless all match.  Floating
 * tensors in the file convert to F32/F64, integer ones to I32/I8/I64 (range
 * checked).  d may be NULL when every wanted tensor is NCC_ST_HOST. */
int ncc_load_safetensors_opt(ncc_dev *d, const char *path, ncc_st_want *w, int n, int flags,
                             char *err, size_t errn);

/* A .npy file memory-mapped, its data as the file holds it (no conversion,
 * no copy): for training sets larger than memory would like.  dtype is the
 * file's element type: NCC_F32, F16, I32, I8, or the host-only NCC_F64,
 * NCC_I64, NCC_U8; esize its bytes.  Validated like ncc_npy_read (magic,
 * header, data size exact).  ncc_npy_unmap releases it (safe on a zeroed one). */
enum { NCC_U8 = 7 };
typedef struct ncc_npy_mapped {
  void *base; size_t len;     /* the mapping */
  const void *data;           /* the first element */
  int dtype, esize, rank;
  int64_t shape[8];
} ncc_npy_mapped;
int  ncc_npy_map(const char *path, ncc_npy_mapped *a, char *err, size_t errn);
void ncc_npy_unmap(ncc_npy_mapped *a);

/* Wall-clock seconds, monotonic. */
double ncc_now(void);

/* ---- the per-kernel profile (`ncc bench --profile`) ----
 * While ncc_profile_set(1) holds, every kernel launch and GEMM call on any
 * device of the process is timed by itself: the device is synchronized
 * before and after it, and the host clock read around it, so a GPU entry
 * includes the launch's latency (a few microseconds) and nothing overlaps.
 * CUDA graphs are not used meanwhile (ncc_dev_graphs says 0, and a step runs
 * its launches one by one).  Entries are kept by kernel name, in the order
 * first launched: calls and seconds summed.  The GEMM calls are one entry
 * each by precision ("ncc_gemm_ex fp16"; cuBLAS on a GPU).  For one host
 * thread at a time; ncc_profile_get's entries stay valid until the next
 * launch or ncc_profile_clear. */
typedef struct ncc_profile_entry { const char *name; long long calls; double seconds; } ncc_profile_entry;
void ncc_profile_set(int on);
int  ncc_profile_on(void);
int  ncc_profile_get(const ncc_profile_entry **e);   /* the number of entries */
void ncc_profile_clear(void);


/* ---- additions (runtime engineer): emulator switches and the backend table ---- */
/* Checked mode of the emulator (also NCC_CHECK=1 in the environment): from now on
 * ncc_alloc_buffers gives every buffer its own guarded mapping and an
 * out-of-bounds access is reported with kernel, block and thread (exit status 2). */
void ncc_emu_set_checked(int on);
int  ncc_emu_checked(void);
/* Fiber order at every barrier phase (also NCC_FIBER_ORDER=reverse): 0 forward, 1 reverse. */
void ncc_emu_set_fiber_order(int reverse);
/* Number of OS threads that run blocks (NCC_EMU_THREADS, default: cores). */
int  ncc_emu_threads(void);
/* How many distinct OS threads ran at least one block of the last emulated launch
 * of the calling thread (for tests of the worker pool). */
int  ncc_emu_last_launch_threads(void);

/* A device backend: a table of functions.  emu and jit live in libnccrt; the
 * cudart backend is compiled into nvcc-built models (ncc_cudart.h) and
 * registers itself at load time, since libnccrt links no CUDA library.
 * memcpy_ dir: 0 host->device, 1 device->host, 2 device->device. */
typedef struct ncc_backend {
  const char *name;
  int  (*open)(ncc_dev *d, const char *kernel_src, const char *jit_opts);
  void (*close)(ncc_dev *d);
  int  (*malloc_)(ncc_dev *d, void **p, size_t n);
  int  (*free_)(ncc_dev *d, void *p);
  int  (*memcpy_)(ncc_dev *d, void *dst, const void *src, size_t n, int dir);
  int  (*memset_)(ncc_dev *d, void *p, int byte, size_t n);
  int  (*sync)(ncc_dev *d);
  int  (*launch)(ncc_dev *d, const ncc_kernel *k, ncc_dim3 grid, ncc_dim3 block,
                 size_t shmem, void **args);
  int  (*sgemm)(ncc_dev *d, int trans_a, int trans_b, int m, int n, int k, float alpha,
                const float *A, int lda, long long stride_a,
                const float *B, int ldb, long long stride_b, float beta,
                float *C, int ldc, long long stride_c, int batch, int prec);   /* NCC_GEMM_* */
  /* page-locked host memory (ncc_host_alloc); NULL: plain malloc */
  int  (*host_alloc)(ncc_dev *d, void **p, size_t n);
  int  (*host_free)(ncc_dev *d, void *p);
  /* CUDA graphs (graph.c; NULL: the backend has none, and the device records
   * and replays the launches itself, which is what the emulator does).
   * graph_begin starts stream capture on the device's stream; graph_end ends it
   * and instantiates the graph into *exec (exec NULL: abandon the capture);
   * graph_node gives the kernel node the last launch added to the capture;
   * graph_set_args replaces that node's arguments in an instantiated graph;
   * graph_launch runs the graph on the device's stream; graph_free frees it. */
  int  (*graph_begin)(ncc_dev *d);
  int  (*graph_end)(ncc_dev *d, void **exec);
  int  (*graph_node)(ncc_dev *d, void **node);
  int  (*graph_set_args)(ncc_dev *d, void *exec, void *node, const ncc_kernel *k, ncc_dim3 grid, ncc_dim3 block,
                         size_t shmem, void **args);
  int  (*graph_launch)(ncc_dev *d, void *exec);
  void (*graph_free)(ncc_dev *d, void *exec);
  /* streams (ncc_stream; NULL: the backend runs everything in issue order on
   * one stream): stream_set makes stream s (0 or 1) the one launches, GEMMs and
   * memsets go to; event_record records event e (0 <= e < NCC_DEV_EVENTS, the
   * last two libnccrt's own: join and fork) on it; event_wait makes it wait for e */
  int  (*stream_set)(ncc_dev *d, int s);
  int  (*event_record)(ncc_dev *d, int e);
  int  (*event_wait)(ncc_dev *d, int e);
} ncc_backend;
void ncc_register_cudart(const ncc_backend *b);
/* For backends: record a failure (printf-style message) and return code. */
int  ncc_dev_fail(ncc_dev *d, int code, const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 3, 4)))
#endif
  ;
void  ncc_dev_set_name(ncc_dev *d, const char *name);
void *ncc_dev_state(const ncc_dev *d);
void  ncc_dev_set_state(ncc_dev *d, void *state);

/* ---- additions (cuda-graphs): a step captured once and replayed ----------
 * docs/generated-code.md "CUDA graphs".  Between ncc_graph_begin and
 * ncc_graph_end the device's launches, GEMMs and memsets are captured, not run
 * (a GPU: stream capture; the emulator: a list of the launches, each with its
 * argument values copied as the launch passed them); ncc_graph_launch runs
 * them all again with those same values.  Host copies and ncc_sync are errors
 * during a capture.  An argument that must change between replays (the
 * learning rate of a training step) is a host variable named with
 * ncc_graph_live before the capture: a launch that passes its address takes
 * its value at every replay instead (the GPU: cuGraphExecKernelNodeSetParams).
 * Grids are captured as they were: a step whose grid changes (the batch) needs
 * a graph of its own.
 * Whether a device captures: on by default on a GPU, off under emulation, where
 * launches cost nothing to save; NCC_GRAPHS=0 or 1 in the environment (read at
 * ncc_dev_open) overrides both, and ncc_dev_set_graphs sets one device. */
typedef struct ncc_graph ncc_graph;
/* Each kernel's arguments, for capturing their values: nargs and the size of
 * each (sizeof its type).  Generated code registers its table at create. */
typedef struct ncc_kernel_args {
  const ncc_kernel *k;
  int nargs;
  const unsigned short *size;
} ncc_kernel_args;
int  ncc_dev_kernel_args(ncc_dev *d, const ncc_kernel_args *t, int n);
/* n bytes at p (a host variable that outlives the device's graphs) are read at every replay */
int  ncc_graph_live(ncc_dev *d, const void *p, size_t n);
int  ncc_dev_graphs(const ncc_dev *d);            /* 1: steps are captured and replayed */
void ncc_dev_set_graphs(ncc_dev *d, int on);
int  ncc_graph_begin(ncc_dev *d);
/* Ends the capture; *g is the graph (freed by ncc_graph_free or ncc_dev_close).
 * g NULL abandons the capture (after a failed step). */
int  ncc_graph_end(ncc_dev *d, ncc_graph **g);
int  ncc_graph_launch(ncc_dev *d, ncc_graph *g);
void ncc_graph_free(ncc_dev *d, ncc_graph *g);
/* What a device did with graphs: counters since it was opened. */
typedef struct ncc_graph_stats {
  int enabled;            /* ncc_dev_graphs */
  int native;             /* 1: the backend's own graphs (CUDA); 0: recorded by libnccrt */
  long long captures;     /* graphs captured */
  long long replays;      /* ncc_graph_launch calls */
  long long nodes;        /* launches, GEMMs and memsets captured, over all captures */
  long long live_updates; /* kernel nodes whose live arguments a replay refreshed */
} ncc_graph_stats;
void ncc_dev_graph_stats(const ncc_dev *d, ncc_graph_stats *s);

/* ---- additions (streams): the work of one step that may overlap ----------
 * docs/generated-code.md "Streams".  A device has two streams: 0, where the
 * copies, ncc_sync and graph launches go, and 1, the side stream.  ncc_stream
 * picks the one the following launches, GEMMs and memsets go to; an event
 * (0 <= e < NCC_MAX_EVENTS) marks the work issued so far to the stream current
 * when it was recorded, and ncc_event_wait makes the current stream wait for
 * it: the generated code records one after a kernel whose result the other
 * stream needs (or whose operands it will overwrite) and waits for it before
 * the kernel that does.  ncc_stream_join makes stream 0 wait for everything
 * issued to stream 1 and makes 0 current again; ncc_sync, the copies,
 * ncc_graph_begin and ncc_graph_end join first.  A capture follows both
 * streams (CUDA's fork and join of a captured stream), so a replayed graph
 * keeps the overlap.
 * On a GPU the two are CUDA streams and the events CUDA events; while the
 * per-kernel profile is on, everything goes to stream 0.  The emulator runs one
 * kernel at a time, in an order the waits allow: NCC_STREAM_ORDER (or
 * ncc_emu_set_stream_order) "issue" runs each as it is issued; "side-last"
 * holds stream 1's work back until stream 0 waits for it (or a join), and
 * "main-last" holds stream 0's until stream 1 waits for it; so a missing wait
 * gives a wrong result in one of the two. */
#define NCC_MAX_EVENTS 32
/* A backend's events: the generated code's 0..NCC_MAX_EVENTS - 1, then libnccrt's own: the
 * join (NCC_MAX_EVENTS) and the fork (NCC_MAX_EVENTS + 1: stream 1's first work after a
 * join waits for what stream 0 was given before it, which also takes stream 1 into a capture) */
#define NCC_DEV_EVENTS (NCC_MAX_EVENTS + 2)
int ncc_stream(ncc_dev *d, int s);
int ncc_event_record(ncc_dev *d, int e);
int ncc_event_wait(ncc_dev *d, int e);
int ncc_stream_join(ncc_dev *d);
enum { NCC_STREAM_ORDER_ISSUE = 0, NCC_STREAM_ORDER_SIDE_LAST = 1, NCC_STREAM_ORDER_MAIN_LAST = 2 };
void ncc_emu_set_stream_order(int order);
int  ncc_emu_stream_order(void);

#ifdef __cplusplus
}
#endif
#endif
