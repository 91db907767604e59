/* rt_internal.h — what the files of libnccrt share and nobody else sees:
 * the device struct, the built-in backends and the emulator's entry points. */
#ifndef NCC_RT_INTERNAL_H
#define NCC_RT_INTERNAL_H
#include <stdarg.h>
#include "ncc_rt.h"

#define NCC_HIDDEN __attribute__((visibility("hidden")))

/* checked-mode buffers of one ncc_alloc_buffers: each its own mapping with guards */
typedef struct ncc_guarded ncc_guarded;
struct ncc_guarded {
  int n;
  struct gbuf { char *map; size_t maplen; char *start; size_t size; } *b;
  ncc_guarded *next;       /* in the device's list */
  ncc_guarded *gnext;      /* in the signal handler's list */
};

struct ncc_dev {
  const ncc_backend *be;
  void *state;                 /* the backend's own */
  char name[256];
  char err[2048];
  ncc_guarded *guarded;        /* list of checked-mode allocations */
  /* CUDA graphs (graph.c) */
  int graphs;                  /* steps are captured (ncc_dev_graphs) */
  int graphs_unavailable;      /* set by a backend's open: its driver has no graph API */
  ncc_graph *cap;              /* the capture under way, or NULL */
  ncc_graph *glist;            /* every graph of the device, freed at close */
  struct ncc_kargs_tab { const ncc_kernel_args *t; int n; } kargs[8];
  int nkargs;
  struct ncc_live { const void *p; size_t n; } live[16];
  int nlive;
  ncc_graph_stats gst;
  /* streams (dev.c) */
  int cur;                     /* the stream launches go to: 0 or 1 */
  int side_used;               /* stream 1 got work since stream 0 last joined it */
  ncc_graph *held;             /* emulator: the held-back stream's work (NCC_STREAM_ORDER) */
  int held_done;               /* ... how many of its records have run */
  int held_stream;             /* ... whose: 0 or 1 (-1: none held) */
  int ev_pos[NCC_DEV_EVENTS];  /* emulator: event e marks held's first ev_pos[e] records; -1: nothing held */
};

NCC_HIDDEN extern const ncc_backend ncc_backend_emu;
NCC_HIDDEN extern const ncc_backend ncc_backend_jit;
/* Probes libcuda: 0 when a GPU answers, else NCC_EUSER with the reason in why. */
NCC_HIDDEN int ncc_cuda_probe(char *why, size_t n);

/* graph.c: the device's default (after its backend opened), the calls that
 * capture instead of running while d->cap is set, and freeing at close */
NCC_HIDDEN void ncc_graph_dev_init(ncc_dev *d);
NCC_HIDDEN void ncc_graph_dev_close(ncc_dev *d);
NCC_HIDDEN int ncc_graph_cap_launch(ncc_dev *d, const ncc_kernel *k, ncc_dim3 grid, ncc_dim3 block, size_t shmem,
                                    void **args);
NCC_HIDDEN int ncc_graph_cap_sgemm(ncc_dev *d, int ta, int tb, int m, int n, int k, float alpha, const float *A,
                                   int lda, long long sa, const float *B, int ldb, long long sb, float beta, float *C,
                                   int ldc, long long sc, int batch, int prec);
/* dst (rows x cols, leading dimension cols) = src (leading dimension ld) with
 * every element rounded to NCC_GEMM_TF32/FP16/BF16 as ncc_kernel.h rounds
 * (emu_round.c: the kernel header's own functions) */
NCC_HIDDEN void ncc_round_matrix(int prec, const float *src, int ld, int rows, int cols, float *dst);
NCC_HIDDEN int ncc_graph_cap_memset(ncc_dev *d, void *p, int byte, size_t n);
/* kind 0 stream, 1 event recorded, 2 event waited for, 3 join */
NCC_HIDDEN int ncc_graph_cap_stream_op(ncc_dev *d, int kind, int arg);
/* A list of records (an ncc_graph) as the emulator's held-back stream keeps
 * them: every argument's value as the launch passed it */
NCC_HIDDEN ncc_graph *ncc_dev_rec_new(void);
NCC_HIDDEN void ncc_dev_rec_clear(ncc_graph *g);
NCC_HIDDEN void ncc_dev_rec_free(ncc_graph *g);
NCC_HIDDEN int ncc_dev_recs(const ncc_graph *g);
NCC_HIDDEN int ncc_dev_rec_launch(ncc_dev *d, ncc_graph *g, const ncc_kernel *k, ncc_dim3 grid, ncc_dim3 block,
                                  size_t shmem, void **args);
NCC_HIDDEN int ncc_dev_rec_sgemm(ncc_dev *d, ncc_graph *g, int ta, int tb, int m, int n, int k, float alpha,
                                 const float *A, int lda, long long sa, const float *B, int ldb, long long sb,
                                 float beta, float *C, int ldc, long long sc, int batch, int prec);
NCC_HIDDEN int ncc_dev_rec_memset(ncc_dev *d, ncc_graph *g, void *p, int byte, size_t n);
/* Runs records [from, to) of g: issue 1 through the device's calls below
 * (a replayed graph), 0 straight to the backend (held-back work let go) */
NCC_HIDDEN int ncc_dev_run_recs(ncc_dev *d, ncc_graph *g, int from, int to, int issue);
/* dev.c: a launch, GEMM or memset outside a capture, to the current stream
 * (the emulator may hold it back); an event recorded or waited for likewise */
NCC_HIDDEN int ncc_dev_issue_launch(ncc_dev *d, const ncc_kernel *k, ncc_dim3 grid, ncc_dim3 block, size_t shmem,
                                    void **args);
NCC_HIDDEN int ncc_dev_issue_sgemm(ncc_dev *d, int ta, int tb, int m, int n, int k, float alpha, const float *A,
                                   int lda, long long sa, const float *B, int ldb, long long sb, float beta, float *C,
                                   int ldc, long long sc, int batch, int prec);
NCC_HIDDEN int ncc_dev_issue_memset(ncc_dev *d, void *p, int byte, size_t n);
NCC_HIDDEN int ncc_dev_event_record(ncc_dev *d, int e);
NCC_HIDDEN int ncc_dev_event_wait(ncc_dev *d, int e);

/* emu.c */
NCC_HIDDEN int ncc_emu_launch(const ncc_kernel *k, ncc_dim3 grid, ncc_dim3 block, size_t shmem,
                              void **args, char *err, size_t errn);
/* Checked mode: one guarded mapping per buffer, registered for the SIGSEGV report. */
NCC_HIDDEN int ncc_emu_guarded_alloc(int n, const size_t *sizes, void **ptrs, ncc_guarded **g,
                                     char *err, size_t errn);
NCC_HIDDEN void ncc_emu_guarded_free(ncc_guarded *g);

/* safetensors.c: the header index (offsets relative to the data area) */
typedef struct ncc_st_entry {
  char *name;
  int dtype;            /* index into safetensors.c's dtype table */
  int rank;
  int64_t shape[8];
  int64_t numel;
  uint64_t begin, end;
} ncc_st_entry;
NCC_HIDDEN int ncc_st_index(const unsigned char *buf, size_t n, const char *path, ncc_st_entry **e, int *ne,
                            size_t *data_off, char *err, size_t errn);
NCC_HIDDEN int ncc_st_match(const ncc_st_entry *e, int ne, const char *path, const ncc_tensor_info *params, int n,
                            int *map, char *err, size_t errn);
NCC_HIDDEN void ncc_st_free(ncc_st_entry *e, int n);
/* Writes the parts to path atomically: temp file beside it, fsync, rename, fsync dir. */
NCC_HIDDEN int ncc_write_atomic(const char *path, const void *const *parts, const size_t *sizes, int nparts,
                                char *err, size_t errn);
/* npy.c: parses a whole .npy image; *src_kind is the file's element type
 * (0 f4, 1 f2, 2 i4, 3 i1, 4 f8, 5 i8, 6 u1), *dtype what ncc_npy_read returns. */
NCC_HIDDEN int ncc_npy_parse(const unsigned char *buf, size_t n, const char *path, int *dtype, int *src_kind,
                             int *rank, int64_t shape[8], size_t *data_off, char *err, size_t errn);

NCC_HIDDEN void ncc_errf(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#endif
