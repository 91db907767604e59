/* graph.c — a step captured once and replayed (CUDA graphs), on every device.
 *
 * While a capture is under way (ncc_graph_begin .. ncc_graph_end) the device
 * keeps a record of each launch, GEMM and memset: the kernel, its grid and
 * block, and its argument VALUES, copied from where args[i] points at the
 * moment of the launch (the sizes come from the model's ncc_kernel_args
 * table), as cudaLaunchKernel copies them into a captured kernel node.  An
 * argument whose address was named with ncc_graph_live is instead read again
 * at every replay.
 *
 *   emulator (a backend without graph_* functions): the record is the graph;
 *     nothing runs during the capture, and ncc_graph_launch runs the record in
 *     order through the backend's own launch, GEMM and memset;
 *   GPU backends: the calls also go to the backend, whose stream is capturing
 *     (cuStreamBeginCapture), and ncc_graph_end instantiates the CUDA graph;
 *     the record keeps only what a replay needs to refresh live arguments:
 *     the kernel node of each launch that has one (graph_node), whose
 *     arguments ncc_graph_launch replaces (graph_set_args,
 *     cuGraphExecKernelNodeSetParams) before it launches the graph.
 *
 * So the emulator replays exactly what a GPU would: a value baked into a
 * launch at capture is the value every replay uses, and tests under
 * emulation see the same results a GPU graph would give.  Host copies and
 * ncc_sync during a capture are refused (dev.c): a step that reads a value
 * back in its middle cannot be a graph.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "rt_internal.h"

enum { GR_LAUNCH, GR_SGEMM, GR_MEMSET, GR_STREAM, GR_RECORD, GR_WAIT, GR_JOIN };

typedef struct grec {
  int kind;
  /* launch */
  const ncc_kernel *k;
  ncc_dim3 grid, block;
  size_t shmem;
  int nargs, live;
  void **argp;            /* what the replay passes: into snap, or a live host address */
  unsigned char *snap;    /* the argument values at capture */
  void *node;             /* GPU: the kernel node (launches with live arguments) */
  /* sgemm */
  int ta, tb, m, n, kk, lda, ldb, ldc, batch, prec;
  float alpha, beta;
  const float *A, *B;
  float *C;
  long long sa, sb, sc;
  /* memset */
  void *p;
  int byte;
  size_t bytes;
  /* stream, record, wait: the stream or event (the emulator's own record; a GPU
   * capture keeps them in the CUDA graph) */
  int arg;
} grec;

struct ncc_graph {
  ncc_graph *next;        /* the device's list */
  grec *r;
  int n, cap;
  int failed;             /* a call of the capture could not be recorded */
  void *exec;             /* GPU: the instantiated graph */
};

static int native(const ncc_dev *d) { return d->be && d->be->graph_begin != NULL; }

void ncc_graph_dev_init(ncc_dev *d) {
  const char *e = getenv("NCC_GRAPHS");
  d->graphs = native(d);   /* on a GPU by default; the emulator gains nothing from them */
  if (e && *e) d->graphs = strcmp(e, "0") != 0;
  if (d->graphs_unavailable) d->graphs = 0;
}

int ncc_dev_graphs(const ncc_dev *d) { return d && d->be && d->graphs && !ncc_profile_on(); }   /* a profile times each launch */

void ncc_dev_set_graphs(ncc_dev *d, int on) {
  if (d) d->graphs = on && d->be && !d->graphs_unavailable;
}

void ncc_dev_graph_stats(const ncc_dev *d, ncc_graph_stats *s) {
  if (!s) return;
  memset(s, 0, sizeof *s);
  if (!d) return;
  *s = d->gst;
  s->enabled = ncc_dev_graphs(d);
  s->native = native(d);
}

int ncc_dev_kernel_args(ncc_dev *d, const ncc_kernel_args *t, int n) {
  if (!d) return NCC_EINTERNAL;
  for (int i = 0; i < d->nkargs; i++)
    if (d->kargs[i].t == t) return 0;
  if (d->nkargs == (int)(sizeof d->kargs / sizeof d->kargs[0]))
    return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_dev_kernel_args: more than %d tables", d->nkargs);
  d->kargs[d->nkargs].t = t;
  d->kargs[d->nkargs++].n = n;
  return 0;
}

int ncc_graph_live(ncc_dev *d, const void *p, size_t n) {
  if (!d) return NCC_EINTERNAL;
  for (int i = 0; i < d->nlive; i++)
    if (d->live[i].p == p) return 0;
  if (!p || !n || d->nlive == (int)(sizeof d->live / sizeof d->live[0]))
    return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_graph_live: no address, or more than %d live values", d->nlive);
  d->live[d->nlive].p = p;
  d->live[d->nlive++].n = n;
  return 0;
}

static void graph_release(ncc_dev *d, ncc_graph *g) {
  for (int i = 0; i < g->n; i++) {
    free(g->r[i].argp);
    free(g->r[i].snap);
  }
  free(g->r);
  if (g->exec && d->be && d->be->graph_free) d->be->graph_free(d, g->exec);
  free(g);
}

int ncc_graph_begin(ncc_dev *d) {
  ncc_graph *g;
  if (!d || !d->be) return NCC_EINTERNAL;
  if (d->cap) return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_graph_begin: a capture is already under way");
  if (!d->graphs) return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_graph_begin: graphs are off on this device");
  if (ncc_stream_join(d) != 0) return NCC_EINTERNAL;   /* a capture starts on stream 0, with nothing pending */
  g = (ncc_graph *)calloc(1, sizeof *g);
  if (!g) return ncc_dev_fail(d, NCC_EUSER, "ncc_graph_begin: out of memory");
  if (native(d)) {
    int rc = d->be->graph_begin(d);
    if (rc) {
      free(g);
      return rc;
    }
  }
  d->cap = g;
  return 0;
}

int ncc_graph_end(ncc_dev *d, ncc_graph **out) {
  ncc_graph *g;
  int rc = 0;
  if (out) *out = NULL;
  if (!d || !d->be) return NCC_EINTERNAL;
  if (!(g = d->cap)) return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_graph_end: no capture under way");
  if (ncc_stream_join(d) != 0) g->failed = 1;   /* CUDA ends a capture only with its forks joined */
  d->cap = NULL;
  if (native(d)) rc = d->be->graph_end(d, out && !g->failed ? &g->exec : NULL);
  if (!out) {   /* abandoned: the step failed, and said why */
    graph_release(d, g);
    return 0;
  }
  if (g->failed || rc) {   /* the failing call's message is in d->err */
    graph_release(d, g);
    return rc ? rc : NCC_EINTERNAL;
  }
  g->next = d->glist;
  d->glist = g;
  d->gst.captures++;
  d->gst.nodes += g->n;
  *out = g;
  return 0;
}

void ncc_graph_free(ncc_dev *d, ncc_graph *g) {
  ncc_graph **pp;
  if (!d || !g) return;
  for (pp = &d->glist; *pp; pp = &(*pp)->next)
    if (*pp == g) {
      *pp = g->next;
      graph_release(d, g);
      return;
    }
}

void ncc_graph_dev_close(ncc_dev *d) {
  if (d->cap) {
    ncc_graph *g = d->cap;
    d->cap = NULL;
    if (native(d)) d->be->graph_end(d, NULL);
    graph_release(d, g);
  }
  while (d->glist) ncc_graph_free(d, d->glist);
}

int ncc_graph_launch(ncc_dev *d, ncc_graph *g) {
  int rc;
  if (!d || !d->be) return NCC_EINTERNAL;
  if (!g) return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_graph_launch: no graph");
  if (d->cap) return ncc_dev_fail(d, NCC_EINTERNAL, "ncc_graph_launch: a capture is under way");
  d->gst.replays++;
  if ((rc = ncc_stream_join(d)) != 0) return rc;   /* the graph runs on stream 0, after what it was given */
  if (native(d)) {
    for (int i = 0; i < g->n; i++) {
      const grec *r = &g->r[i];
      if (r->kind != GR_LAUNCH || !r->live) continue;
      rc = d->be->graph_set_args(d, g->exec, r->node, r->k, r->grid, r->block, r->shmem, r->argp);
      if (rc) return rc;
      d->gst.live_updates++;
    }
    return d->be->graph_launch(d, g->exec);
  }
  /* the emulator: each record through the device's own calls, which hold a
   * stream's work back where NCC_STREAM_ORDER says; the step ends joined */
  rc = ncc_dev_run_recs(d, g, 0, g->n, 1);
  if (!rc) rc = ncc_stream_join(d);
  return rc;
}

int ncc_dev_run_recs(ncc_dev *d, ncc_graph *g, int from, int to, int issue) {
  int rc = 0;
  for (int i = from; i < to && !rc; i++) {
    const grec *r = &g->r[i];
    switch (r->kind) {
    case GR_LAUNCH:
      d->gst.live_updates += issue && r->live;
      rc = issue ? ncc_dev_issue_launch(d, r->k, r->grid, r->block, r->shmem, r->argp)
                 : d->be->launch(d, r->k, r->grid, r->block, r->shmem, r->argp);
      break;
    case GR_SGEMM:
      rc = issue ? ncc_dev_issue_sgemm(d, r->ta, r->tb, r->m, r->n, r->kk, r->alpha, r->A, r->lda, r->sa, r->B,
                                       r->ldb, r->sb, r->beta, r->C, r->ldc, r->sc, r->batch, r->prec)
                 : d->be->sgemm(d, r->ta, r->tb, r->m, r->n, r->kk, r->alpha, r->A, r->lda, r->sa, r->B, r->ldb,
                                r->sb, r->beta, r->C, r->ldc, r->sc, r->batch, r->prec);
      break;
    case GR_MEMSET: rc = issue ? ncc_dev_issue_memset(d, r->p, r->byte, r->bytes) : d->be->memset_(d, r->p, r->byte, r->bytes); break;
    case GR_STREAM: rc = ncc_stream(d, r->arg); break;
    case GR_RECORD: rc = ncc_dev_event_record(d, r->arg); break;
    case GR_WAIT: rc = ncc_dev_event_wait(d, r->arg); break;
    default: rc = ncc_stream_join(d); break;
    }
  }
  return rc;
}

int ncc_dev_recs(const ncc_graph *g) { return g ? g->n : 0; }

ncc_graph *ncc_dev_rec_new(void) { return (ncc_graph *)calloc(1, sizeof(ncc_graph)); }

void ncc_dev_rec_clear(ncc_graph *g) {
  for (int i = 0; i < g->n; i++) {
    free(g->r[i].argp);
    free(g->r[i].snap);
  }
  g->n = 0;
  g->failed = 0;
}

void ncc_dev_rec_free(ncc_graph *g) {
  if (!g) return;
  ncc_dev_rec_clear(g);
  free(g->r);
  free(g);
}

/* ---------------------------------------------------------------- capture */
static grec *rec_new(ncc_graph *g, int kind) {
  if (g->n == g->cap) {
    int cap = g->cap ? 2 * g->cap : 64;
    grec *r = (grec *)realloc(g->r, sizeof *r * (size_t)cap);
    if (!r) return NULL;
    g->r = r;
    g->cap = cap;
  }
  memset(&g->r[g->n], 0, sizeof g->r[0]);
  g->r[g->n].kind = kind;
  return &g->r[g->n++];
}

static int rec_fail(ncc_dev *d, ncc_graph *g, int code, const char *what, const char *name) {
  g->failed = 1;
  return ncc_dev_fail(d, code, "%s: %s%s%s", g == d->cap ? "capturing a graph" : "holding a stream's work back", what,
                      name ? " " : "", name ? name : "");
}

/* The launch kept in g: d->cap's (a capture: live arguments read at every
 * replay), or the emulator's held-back stream's (every argument as it is now) */
int ncc_dev_rec_launch(ncc_dev *d, ncc_graph *g, const ncc_kernel *k, ncc_dim3 grid, ncc_dim3 block, size_t shmem,
                       void **args) {
  const ncc_kernel_args *ka = NULL;
  int capture = g == d->cap;
  grec *r;
  size_t off = 0;
  int rc;
  for (int t = 0; t < d->nkargs && !ka; t++)
    for (int i = 0; i < d->kargs[t].n; i++)
      if (d->kargs[t].t[i].k == k) {
        ka = &d->kargs[t].t[i];
        break;
      }
  if (!ka) return rec_fail(d, g, NCC_EINTERNAL, "no argument table (ncc_dev_kernel_args) for kernel", k->name);
  if (!(r = rec_new(g, GR_LAUNCH))) return rec_fail(d, g, NCC_EUSER, "out of memory at kernel", k->name);
  r->k = k;
  r->grid = grid;
  r->block = block;
  r->shmem = shmem;
  r->nargs = ka->nargs;
  for (int i = 0; i < ka->nargs; i++) off += (ka->size[i] + 7u) / 8u * 8u;
  r->argp = (void **)calloc((size_t)(ka->nargs ? ka->nargs : 1), sizeof(void *));
  r->snap = (unsigned char *)malloc(off ? off : 1);
  if (!r->argp || !r->snap) return rec_fail(d, g, NCC_EUSER, "out of memory at kernel", k->name);
  off = 0;
  for (int i = 0; i < ka->nargs; i++) {
    int j;
    for (j = 0; capture && j < d->nlive && d->live[j].p != args[i]; j++) {}
    if (capture && j < d->nlive) {   /* read again at every replay */
      if (d->live[j].n != ka->size[i]) return rec_fail(d, g, NCC_EINTERNAL, "live value of another size passed to", k->name);
      r->argp[i] = args[i];
      r->live = 1;
    } else {              /* the value as the launch passed it */
      memcpy(r->snap + off, args[i], ka->size[i]);
      r->argp[i] = r->snap + off;
      off += (ka->size[i] + 7u) / 8u * 8u;
    }
  }
  if (!capture || !native(d)) return 0;
  rc = d->be->launch(d, k, grid, block, shmem, args);
  if (!rc && r->live) rc = d->be->graph_node(d, &r->node);
  if (rc) d->cap->failed = 1;
  return rc;
}

int ncc_graph_cap_launch(ncc_dev *d, const ncc_kernel *k, ncc_dim3 grid, ncc_dim3 block, size_t shmem, void **args) {
  return ncc_dev_rec_launch(d, d->cap, k, grid, block, shmem, args);
}

int ncc_dev_rec_sgemm(ncc_dev *d, ncc_graph *g, int ta, int tb, int m, int n, int k, float alpha, const float *A,
                      int lda, long long sa, const float *B, int ldb, long long sb, float beta, float *C, int ldc,
                      long long sc, int batch, int prec) {
  grec *r;
  int rc;
  if (g == d->cap && native(d)) {
    rc = d->be->sgemm(d, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch, prec);
    if (rc) d->cap->failed = 1;
    if (rc) return rc;
  }
  if (!(r = rec_new(g, GR_SGEMM))) return rec_fail(d, g, NCC_EUSER, "out of memory at a GEMM", NULL);
  r->ta = ta, r->tb = tb, r->m = m, r->n = n, r->kk = k, r->alpha = alpha, r->beta = beta;
  r->A = A, r->lda = lda, r->sa = sa, r->B = B, r->ldb = ldb, r->sb = sb, r->C = C, r->ldc = ldc, r->sc = sc;
  r->batch = batch, r->prec = prec;
  return 0;
}

int ncc_graph_cap_sgemm(ncc_dev *d, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                        long long sa, const float *B, int ldb, long long sb, float beta, float *C, int ldc,
                        long long sc, int batch, int prec) {
  return ncc_dev_rec_sgemm(d, d->cap, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch, prec);
}

int ncc_dev_rec_memset(ncc_dev *d, ncc_graph *g, void *p, int byte, size_t n) {
  grec *r;
  if (g == d->cap && native(d)) {
    int rc = d->be->memset_(d, p, byte, n);
    if (rc) d->cap->failed = 1;
    if (rc) return rc;
  }
  if (!(r = rec_new(g, GR_MEMSET))) return rec_fail(d, g, NCC_EUSER, "out of memory at a memset", NULL);
  r->p = p, r->byte = byte, r->bytes = n;
  return 0;
}

int ncc_graph_cap_memset(ncc_dev *d, void *p, int byte, size_t n) { return ncc_dev_rec_memset(d, d->cap, p, byte, n); }

/* The emulator's capture: a stream, an event recorded or waited for, a join */
int ncc_graph_cap_stream_op(ncc_dev *d, int kind, int arg) {
  ncc_graph *g = d->cap;
  grec *r = rec_new(g, kind == 0 ? GR_STREAM : kind == 1 ? GR_RECORD : kind == 2 ? GR_WAIT : GR_JOIN);
  if (!r) return rec_fail(d, g, NCC_EUSER, "out of memory at a stream's event", NULL);
  r->arg = arg;
  return 0;
}
