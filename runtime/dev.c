/* dev.c — the device interface of ncc_rt.h: picks a backend (a table of
 * functions, ggml's habit) and forwards every call to it, keeping the last
 * error message in the device.  Also the emu backend itself (host memory,
 * launches through emu.c, GEMMs through the CPU BLAS) and the arena of
 * activations (ncc_alloc_buffers), which checked mode replaces with guarded
 * mappings.
 *
 * Which backend a device gets:
 *   kernel_src != NULL  (--jit build)     -> jit; AUTO and CUDA both need a GPU, since
 *                                            such a build has no CPU kernels;
 *   cudart registered   (nvcc build)      -> cudart, same;
 *   otherwise           (-DNCC_EMU build) -> EMU and AUTO run on the emulator; CUDA
 *                                            probes the GPU and says why it cannot be used.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "rt_internal.h"

/* the CPU BLAS; declared here so that no particular cblas.h is needed */
enum { NccCblasRowMajor = 101, NccCblasNoTrans = 111, NccCblasTrans = 112 };
void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc);

/* set by an nvcc-built model's constructor, which may run (dlopen) on one
 * thread while another opens a device: atomic */
static const ncc_backend *g_cudart_be;

void ncc_register_cudart(const ncc_backend *b) { __atomic_store_n(&g_cudart_be, b, __ATOMIC_RELEASE); }
static const ncc_backend *cudart_backend(void) { return __atomic_load_n(&g_cudart_be, __ATOMIC_ACQUIRE); }

int ncc_dev_fail(ncc_dev *d, int code, const char *fmt, ...) {
  va_list ap;
  if (!d) return code;
  va_start(ap, fmt);
  vsnprintf(d->err, sizeof d->err, fmt, ap);
  va_end(ap);
  return code;
}
void ncc_dev_set_name(ncc_dev *d, const char *name) { snprintf(d->name, sizeof d->name, "%s", name); }
void *ncc_dev_state(const ncc_dev *d) { return d->state; }
void ncc_dev_set_state(ncc_dev *d, void *state) { d->state = state; }

double ncc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------- emu backend */
static int emu_open(ncc_dev *d, const char *src, const char *opts) {
  char nm[64];
  (void)src;
  (void)opts;
  snprintf(nm, sizeof nm, "emu: %d thread%s%s", ncc_emu_threads(), ncc_emu_threads() == 1 ? "" : "s",
           ncc_emu_checked() ? ", checked" : "");
  ncc_dev_set_name(d, nm);
  return 0;
}
static void emu_close(ncc_dev *d) { (void)d; }
static int emu_malloc(ncc_dev *d, void **p, size_t n) {
  /* 256-byte alignment, like cudaMalloc */
  *p = aligned_alloc(256, (n ? n + 255 : 256) / 256 * 256);
  if (!*p) return ncc_dev_fail(d, NCC_EUSER, "emu: out of memory allocating %zu bytes", n);
  return 0;
}
static int emu_free(ncc_dev *d, void *p) {
  (void)d;
  free(p);
  return 0;
}
static int emu_memcpy(ncc_dev *d, void *dst, const void *src, size_t n, int dir) {
  (void)d;
  (void)dir;
  if (n) memmove(dst, src, n);
  return 0;
}
static int emu_memset(ncc_dev *d, void *p, int byte, size_t n) {
  (void)d;
  if (n) memset(p, byte, n);
  return 0;
}
static int emu_sync(ncc_dev *d) {
  (void)d;
  return 0;   /* launches are synchronous under emulation */
}
static int emu_launch(ncc_dev *d, const ncc_kernel *k, ncc_dim3 grid, ncc_dim3 block, size_t shmem, void **args) {
  char err[1024];
  int rc = ncc_emu_launch(k, grid, block, shmem, args, err, sizeof err);
  if (rc) return ncc_dev_fail(d, rc, "%s", err);
  return 0;
}
static int emu_sgemm(ncc_dev *d, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                     long long sa, const float *B, int ldb, long long sb, float beta, float *C, int ldc,
                     long long sc, int batch, int prec) {
  int b;
  float *ra = NULL, *rb = NULL;
  /* rounded operands: each batch's matrix copied densely (rows x cols as
   * stored, leading dimension cols), every element rounded as a kernel would */
  int arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
  if (prec != NCC_GEMM_FP32 && k > 0) {
    ra = malloc(sizeof(float) * (size_t)arows * (size_t)acols);
    rb = malloc(sizeof(float) * (size_t)brows * (size_t)bcols);
    if (!ra || !rb) {
      free(ra);
      free(rb);
      return ncc_dev_fail(d, NCC_EUSER, "ncc_gemm_ex: out of memory for the rounded operands");
    }
  }
  for (b = 0; b < batch; b++) {
    const float *a = A + b * sa, *bb = B + b * sb;
    int la = lda, lb = ldb;
    if (ra) {
      ncc_round_matrix(prec, a, lda, arows, acols, ra);
      ncc_round_matrix(prec, bb, ldb, brows, bcols, rb);
      a = ra, bb = rb, la = acols, lb = bcols;
    }
    cblas_sgemm(NccCblasRowMajor, ta ? NccCblasTrans : NccCblasNoTrans, tb ? NccCblasTrans : NccCblasNoTrans, m, n,
                k, alpha, a, la, bb, lb, beta, C + b * sc, ldc);
  }
  free(ra);
  free(rb);
  return 0;
}

const ncc_backend ncc_backend_emu = {"emu",      emu_open,   emu_close, emu_malloc, emu_free, emu_memcpy,
                                     emu_memset, emu_sync,   emu_launch, emu_sgemm,
                                     NULL,       NULL,    /* host memory: malloc */
                                     /* graphs: recorded and replayed by graph.c */
                                     NULL, NULL, NULL, NULL, NULL, NULL,
                                     /* streams: ordered by dev.c (NCC_STREAM_ORDER) */
                                     NULL, NULL, NULL};

/* ---------------------------------------------------------------- dispatch */
int ncc_dev_open(ncc_dev **out, int kind, const char *kernel_src, const char *jit_opts) {
  ncc_dev *d;
  const ncc_backend *be;
  int rc;
  if (!out) return NCC_EINTERNAL;
  *out = NULL;
  d = calloc(1, sizeof *d);
  if (!d) return NCC_EUSER;
  *out = d;
  if (kind != NCC_DEV_AUTO && kind != NCC_DEV_CUDA && kind != NCC_DEV_EMU)
    return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_dev_open: unknown device kind %d", kind);
  if (kernel_src || cudart_backend()) {
    /* a GPU build: nothing to run on the CPU */
    char why[512];
    const char *build = kernel_src ? "--jit" : "nvcc";
    if (kind == NCC_DEV_EMU)
      return ncc_dev_fail(d, NCC_EUSER,
                          "this model was built for a GPU (%s); CPU emulation needs a build with -DNCC_EMU", build);
    /* the driver probe first: its reasons ("cannot load libcuda.so.1") are
     * clearer than the CUDA runtime's ("driver version is insufficient") */
    if (ncc_cuda_probe(why, sizeof why)) return ncc_dev_fail(d, NCC_EUSER, "no CUDA device answers: %s", why);
    be = kernel_src ? &ncc_backend_jit : cudart_backend();
  } else {
    if (kind == NCC_DEV_CUDA) {
      char why[512];
      if (ncc_cuda_probe(why, sizeof why))
        return ncc_dev_fail(d, NCC_EUSER, "no CUDA device answers: %s", why);
      return ncc_dev_fail(d, NCC_EUSER,
                          "a CUDA device answers, but this model was built for CPU emulation (-DNCC_EMU); "
                          "build it with nvcc or --jit to run on the GPU");
    }
    be = &ncc_backend_emu;
  }
  d->be = be;
  d->held_stream = -1;
  for (int e = 0; e < NCC_DEV_EVENTS; e++) d->ev_pos[e] = -1;
  rc = be->open(d, kernel_src, jit_opts);
  if (rc) {
    be->close(d);   /* frees what open got before failing; the message stays readable */
    d->be = NULL;
    return rc;
  }
  ncc_graph_dev_init(d);
  return 0;
}

void ncc_dev_close(ncc_dev *d) {
  if (!d) return;
  if (d->be) ncc_graph_dev_close(d);
  while (d->be && d->guarded) {
    ncc_guarded *g = d->guarded;
    ncc_free_buffers(d, g);
  }
  if (d->be) d->be->close(d);
  ncc_dev_rec_free(d->held);
  free(d);
}

const char *ncc_dev_error(const ncc_dev *d) { return d ? d->err : "no device (ncc_dev_open was not called)"; }
const char *ncc_dev_name(const ncc_dev *d) { return d ? d->name : "none"; }
int ncc_dev_is_emu(const ncc_dev *d) { return d && d->be == &ncc_backend_emu; }

#define NEED_DEV(d)                                                          \
  do {                                                                       \
    if (!(d) || !(d)->be) {                                                  \
      if (d) ncc_dev_fail((d), NCC_EINTERNAL, "%s: device is not open", __func__); \
      return NCC_EINTERNAL;                                                  \
    }                                                                        \
  } while (0)

int ncc_malloc(ncc_dev *d, void **p, size_t n) { NEED_DEV(d); return d->be->malloc_(d, p, n); }
int ncc_free(ncc_dev *d, void *p) { NEED_DEV(d); return p ? d->be->free_(d, p) : 0; }
int ncc_host_alloc(ncc_dev *d, void **p, size_t n) {
  NEED_DEV(d);
  if (!p) return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_host_alloc: no pointer to set");
  *p = NULL;
  if (d->be->host_alloc) return d->be->host_alloc(d, p, n);
  *p = malloc(n ? n : 1);
  return *p ? 0 : ncc_dev_fail(d, NCC_EUSER, "out of host memory (%zu bytes)", n);
}
int ncc_host_free(ncc_dev *d, void *p) {
  NEED_DEV(d);
  if (!p) return 0;
  if (d->be->host_free) return d->be->host_free(d, p);
  free(p);
  return 0;
}
/* a graph captures launches, GEMMs and memsets; the copies here are synchronous
 * for the caller, and a step that waits for the device cannot be replayed */
#define NOT_CAPTURING(d)                                                                               \
  do {                                                                                                 \
    if ((d)->cap)                                                                                      \
      return ncc_dev_fail((d), NCC_EINTERNAL, "%s during a graph capture: a step captured as a graph " \
                          "must not copy to or from the host or wait for the device", __func__);      \
  } while (0)
/* copies and syncs are stream 0's, after everything issued to stream 1 (a join) */
static int copy(ncc_dev *d, void *dst, const void *src, size_t n, int dir) {
  int rc = ncc_stream_join(d);
  return rc ? rc : d->be->memcpy_(d, dst, src, n, dir);
}
int ncc_memcpy_h2d(ncc_dev *d, void *dst, const void *src, size_t n) { NEED_DEV(d); NOT_CAPTURING(d); return copy(d, dst, src, n, 0); }
int ncc_memcpy_d2h(ncc_dev *d, void *dst, const void *src, size_t n) { NEED_DEV(d); NOT_CAPTURING(d); return copy(d, dst, src, n, 1); }
int ncc_memcpy_d2d(ncc_dev *d, void *dst, const void *src, size_t n) { NEED_DEV(d); NOT_CAPTURING(d); return copy(d, dst, src, n, 2); }
int ncc_memset(ncc_dev *d, void *p, int byte, size_t n) {
  NEED_DEV(d);
  return d->cap ? ncc_graph_cap_memset(d, p, byte, n) : ncc_dev_issue_memset(d, p, byte, n);
}
int ncc_sync(ncc_dev *d) {
  int rc;
  NEED_DEV(d);
  NOT_CAPTURING(d);
  rc = ncc_stream_join(d);
  return rc ? rc : d->be->sync(d);
}

/* ---- the per-kernel profile (ncc_rt.h): entries by name, first launch first */
static struct {
  int on;
  ncc_profile_entry *e;
  int n, cap;
} prof;

void ncc_profile_set(int on) { prof.on = on != 0; }
int ncc_profile_on(void) { return prof.on; }
int ncc_profile_get(const ncc_profile_entry **e) {
  if (e) *e = prof.e;
  return prof.n;
}
void ncc_profile_clear(void) {
  for (int i = 0; i < prof.n; i++) free((char *)prof.e[i].name);
  free(prof.e);
  prof.e = NULL;
  prof.n = prof.cap = 0;
}
static void prof_add(const char *name, double s) {
  for (int i = prof.n - 1; i >= 0; i--)   /* a step launches its kernels in order: the last is likeliest */
    if (!strcmp(prof.e[i].name, name)) {
      prof.e[i].calls++;
      prof.e[i].seconds += s;
      return;
    }
  if (prof.n == prof.cap) {
    int cap = prof.cap ? 2 * prof.cap : 64;
    ncc_profile_entry *ne = realloc(prof.e, (size_t)cap * sizeof *ne);
    if (!ne) return;   /* out of memory: the entry is lost, the launch is not */
    prof.e = ne;
    prof.cap = cap;
  }
  char *copy = strdup(name);   /* the kernel's name lives in a model that may be unloaded */
  if (!copy) return;
  prof.e[prof.n].name = copy;
  prof.e[prof.n].calls = 1;
  prof.e[prof.n].seconds = s;
  prof.n++;
}
/* Synchronizes before, for a start with the device idle; the caller runs the call, then prof_end */
static int prof_begin(ncc_dev *d, double *t0) {
  int rc = d->be->sync(d);
  *t0 = ncc_now();
  return rc;
}
static int prof_end(ncc_dev *d, int rc, const char *name, double t0) {
  if (!rc) rc = d->be->sync(d);
  if (!rc) prof_add(name, ncc_now() - t0);
  return rc;
}

/* ---- streams (ncc_rt.h "streams") ----
 * On a GPU backend the calls go to its streams and events.  The emulator runs
 * one kernel at a time; NCC_STREAM_ORDER decides which stream's work it holds
 * back (d->held, a list of records as a capture keeps them) until the other
 * stream waits for an event recorded after it, or a join: so the order it runs
 * kernels in is one a GPU may choose, and a wait the code leaves out shows. */
static int g_stream_order = -1;   /* -1: read NCC_STREAM_ORDER */

void ncc_emu_set_stream_order(int order) {
  __atomic_store_n(&g_stream_order, order >= 0 && order <= NCC_STREAM_ORDER_MAIN_LAST ? order : 0, __ATOMIC_SEQ_CST);
}
int ncc_emu_stream_order(void) {
  int o = __atomic_load_n(&g_stream_order, __ATOMIC_SEQ_CST);
  if (o < 0) {
    const char *e = getenv("NCC_STREAM_ORDER");
    o = !e ? 0 : !strcmp(e, "side-last") ? NCC_STREAM_ORDER_SIDE_LAST : !strcmp(e, "main-last") ? NCC_STREAM_ORDER_MAIN_LAST : 0;
    __atomic_store_n(&g_stream_order, o, __ATOMIC_SEQ_CST);
  }
  return o;
}

static int is_native_graphs(const ncc_dev *d) { return d->be->graph_begin != NULL; }

/* Is the current stream's work held back?  Makes the list to hold it in. */
static int held_now(ncc_dev *d) {
  int h;
  if (d->be != &ncc_backend_emu || prof.on) return 0;
  if (d->held && ncc_dev_recs(d->held) > d->held_done) h = d->held_stream;   /* the order a step began with */
  else {
    int o = ncc_emu_stream_order();
    h = o == NCC_STREAM_ORDER_SIDE_LAST ? 1 : o == NCC_STREAM_ORDER_MAIN_LAST ? 0 : -1;
  }
  if (h != d->cur) return 0;
  if (!d->held && !(d->held = ncc_dev_rec_new())) return 0;   /* out of memory: run it now, in issue order */
  d->held_stream = h;
  return 1;
}

/* Runs the held-back records before position upto */
static int let_go(ncc_dev *d, int upto) {
  int rc = 0, n = ncc_dev_recs(d->held);
  if (!d->held || upto <= d->held_done) return 0;
  if (upto > n) upto = n;
  rc = ncc_dev_run_recs(d, d->held, d->held_done, upto, 0);
  d->held_done = upto;
  if (d->held_done == n) {   /* all run: every event marks done work */
    ncc_dev_rec_clear(d->held);
    d->held_done = 0;
    for (int e = 0; e < NCC_DEV_EVENTS; e++) d->ev_pos[e] = -1;
  }
  return rc;
}

/* libnccrt's own events: stream 0 waits for stream 1 at a join; stream 1's
 * first work after a join waits for stream 0's before it (the fork), as a
 * stream captured into a graph must be forked from the capturing one */
enum { EV_JOIN = NCC_MAX_EVENTS, EV_FORK = NCC_MAX_EVENTS + 1 };

int ncc_stream(ncc_dev *d, int s) {
  int rc = 0, fork;
  NEED_DEV(d);
  if (s != 0 && s != 1) return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_stream: stream %d (there are 0 and 1)", s);
  if (prof.on) return 0;   /* a profile times kernels one by one, on stream 0 */
  fork = s == 1 && !d->side_used && d->cur == 0;
  if (d->cap && !is_native_graphs(d)) {   /* the replay's ncc_stream forks as this one would */
    rc = ncc_graph_cap_stream_op(d, 0, s);
    d->cur = s;
    d->side_used |= s;
    return rc;
  }
  if (fork) rc = ncc_dev_event_record(d, EV_FORK);
  if (!rc && d->be->stream_set) rc = d->be->stream_set(d, s);
  if (rc) return rc;
  d->cur = s;
  d->side_used |= s;
  return fork ? ncc_dev_event_wait(d, EV_FORK) : 0;
}

int ncc_dev_event_record(ncc_dev *d, int e) {
  if (prof.on) return 0;
  if (d->be->event_record) return d->be->event_record(d, e);
  d->ev_pos[e] = held_now(d) ? ncc_dev_recs(d->held) : -1;
  return 0;
}

int ncc_dev_event_wait(ncc_dev *d, int e) {
  if (prof.on) return 0;
  if (d->be->event_wait) return d->be->event_wait(d, e);
  if (d->ev_pos[e] >= 0 && d->cur != d->held_stream) return let_go(d, d->ev_pos[e]);
  return 0;   /* its work has run, or it is this stream's own */
}

int ncc_event_record(ncc_dev *d, int e) {
  NEED_DEV(d);
  if (e < 0 || e >= NCC_MAX_EVENTS) return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_event_record: event %d (0..%d)", e, NCC_MAX_EVENTS - 1);
  if (d->cap && !is_native_graphs(d)) return ncc_graph_cap_stream_op(d, 1, e);
  return ncc_dev_event_record(d, e);
}

int ncc_event_wait(ncc_dev *d, int e) {
  NEED_DEV(d);
  if (e < 0 || e >= NCC_MAX_EVENTS) return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_event_wait: event %d (0..%d)", e, NCC_MAX_EVENTS - 1);
  if (d->cap && !is_native_graphs(d)) return ncc_graph_cap_stream_op(d, 2, e);
  return ncc_dev_event_wait(d, e);
}

int ncc_stream_join(ncc_dev *d) {
  int rc = 0;
  NEED_DEV(d);
  if (d->cap && !is_native_graphs(d)) {
    if (d->side_used) rc = ncc_graph_cap_stream_op(d, 3, 0);
  } else if (d->be->stream_set && d->side_used && !prof.on) {
    /* libnccrt's join event: recorded on 1, waited for on 0 */
    rc = d->be->stream_set(d, 1);
    if (!rc) rc = d->be->event_record(d, EV_JOIN);
    if (!rc) rc = d->be->stream_set(d, 0);
    if (!rc) rc = d->be->event_wait(d, EV_JOIN);
  } else if (d->be->stream_set && d->cur) {
    rc = d->be->stream_set(d, 0);
  }
  if (!rc && d->held) rc = let_go(d, ncc_dev_recs(d->held));
  d->cur = 0;
  d->side_used = 0;
  return rc;
}

int ncc_launch(ncc_dev *d, const ncc_kernel *k, ncc_dim3 grid, ncc_dim3 block, size_t shmem, void **args) {
  NEED_DEV(d);
  if (!k) return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_launch: no kernel");
  if (d->cap) return ncc_graph_cap_launch(d, k, grid, block, shmem, args);
  return ncc_dev_issue_launch(d, k, grid, block, shmem, args);
}

int ncc_dev_issue_launch(ncc_dev *d, const ncc_kernel *k, ncc_dim3 grid, ncc_dim3 block, size_t shmem, void **args) {
  if (held_now(d)) return ncc_dev_rec_launch(d, d->held, k, grid, block, shmem, args);
  if (prof.on) {
    double t0;
    int rc = prof_begin(d, &t0);
    if (!rc) rc = d->be->launch(d, k, grid, block, shmem, args);
    return prof_end(d, rc, k->name ? k->name : "(a kernel without a name)", t0);
  }
  return d->be->launch(d, k, grid, block, shmem, args);
}

int ncc_sgemm(ncc_dev *d, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *A, int lda,
              long long stride_a, const float *B, int ldb, long long stride_b, float beta, float *C, int ldc,
              long long stride_c, int batch) {
  return ncc_gemm_ex(d, NCC_GEMM_FP32, trans_a, trans_b, m, n, k, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C,
                     ldc, stride_c, batch);
}

int ncc_gemm_ex(ncc_dev *d, int prec, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *A,
                int lda, long long stride_a, const float *B, int ldb, long long stride_b, float beta, float *C,
                int ldc, long long stride_c, int batch) {
  NEED_DEV(d);
  if (prec < NCC_GEMM_FP32 || prec > NCC_GEMM_BF16)
    return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_gemm_ex: unknown precision %d", prec);
  /* the checks cuBLAS would make, so that every backend rejects the same calls */
  if (m < 0 || n < 0 || k < 0 || batch < 0 || ldc < (n > 1 ? n : 1) ||
      lda < ((trans_a ? m : k) > 1 ? (trans_a ? m : k) : 1) || ldb < ((trans_b ? k : n) > 1 ? (trans_b ? k : n) : 1))
    return ncc_dev_fail(d, NCC_EINTERNAL,
                        "ncc_sgemm: invalid arguments m=%d n=%d k=%d lda=%d ldb=%d ldc=%d trans_a=%d trans_b=%d batch=%d",
                        m, n, k, lda, ldb, ldc, trans_a, trans_b, batch);
  if (!m || !n || !batch) return 0;
  if (d->cap)
    return ncc_graph_cap_sgemm(d, trans_a, trans_b, m, n, k, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc,
                               stride_c, batch, prec);
  return ncc_dev_issue_sgemm(d, trans_a, trans_b, m, n, k, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc,
                             stride_c, batch, prec);
}

int ncc_dev_issue_sgemm(ncc_dev *d, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *A,
                        int lda, long long stride_a, const float *B, int ldb, long long stride_b, float beta, float *C,
                        int ldc, long long stride_c, int batch, int prec) {
  if (held_now(d))
    return ncc_dev_rec_sgemm(d, d->held, trans_a, trans_b, m, n, k, alpha, A, lda, stride_a, B, ldb, stride_b, beta,
                             C, ldc, stride_c, batch, prec);
  if (prof.on) {
    static const char *const names[] = {"ncc_gemm_ex fp32", "ncc_gemm_ex tf32", "ncc_gemm_ex fp16", "ncc_gemm_ex bf16"};
    double t0;
    int rc = prof_begin(d, &t0);
    if (!rc)
      rc = d->be->sgemm(d, trans_a, trans_b, m, n, k, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc,
                        stride_c, batch, prec);
    return prof_end(d, rc, names[prec], t0);
  }
  return d->be->sgemm(d, trans_a, trans_b, m, n, k, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc,
                      stride_c, batch, prec);
}

int ncc_dev_issue_memset(ncc_dev *d, void *p, int byte, size_t n) {
  if (held_now(d)) return ncc_dev_rec_memset(d, d->held, p, byte, n);
  return d->be->memset_(d, p, byte, n);
}

int ncc_alloc_buffers(ncc_dev *d, int n, const size_t *offsets, const size_t *sizes, void **ptrs, void **arena) {
  size_t total = 0;
  int i, rc;
  NEED_DEV(d);
  if (n < 0 || !arena || (n > 0 && (!offsets || !sizes || !ptrs)))
    return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_alloc_buffers: invalid arguments");
  *arena = NULL;
  for (i = 0; i < n; i++) {
    if (offsets[i] > (size_t)-1 - sizes[i])
      return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_alloc_buffers: buffer #%d overflows (offset %zu, size %zu)", i,
                          offsets[i], sizes[i]);
    if (offsets[i] + sizes[i] > total) total = offsets[i] + sizes[i];
  }
  if (d->be == &ncc_backend_emu && ncc_emu_checked()) {
    ncc_guarded *g;
    rc = ncc_emu_guarded_alloc(n, sizes, ptrs, &g, d->err, sizeof d->err);
    if (rc) return rc;
    g->next = d->guarded;
    d->guarded = g;
    *arena = g;
    return 0;
  }
  rc = d->be->malloc_(d, arena, total ? total : 1);
  if (rc) return rc;
  for (i = 0; i < n; i++) ptrs[i] = (char *)*arena + offsets[i];
  return 0;
}

int ncc_free_buffers(ncc_dev *d, void *arena) {
  ncc_guarded **pp;
  NEED_DEV(d);
  if (!arena) return 0;
  for (pp = &d->guarded; *pp; pp = &(*pp)->next)
    if ((void *)*pp == arena) {
      ncc_guarded *g = *pp;
      *pp = g->next;
      ncc_emu_guarded_free(g);
      return 0;
    }
  return d->be->free_(d, arena);
}
