/* stress_threads.c — many threads, several instances of two generated models
 * (lenet and mlp, compiled as C under NCC_EMU into this program), thousands
 * of inferences with random inputs: every result must equal, bit for bit, the
 * one a single thread computed first for the same input (docs/generated-code.md,
 * "Threads").
 *
 *   stress_threads [--threads T] [--iters I] [--seed S]
 *       T threads (default 16), each creating its own instance (even threads
 *       lenet, odd ones mlp) concurrently with the others, loading the same
 *       random weights, running I inferences (default 200) on inputs drawn
 *       from a fixed set, comparing each with the reference, destroying it.
 *       When the generated headers declare the variable-batch API
 *       (NCC_HAVE_INFER_BATCH), every inference takes a random batch size
 *       1..N and the rows past it must stay untouched; otherwise the full batch.
 *   stress_threads --shared-instance [--threads T] [--iters I]
 *       The same, all threads of a model on ONE instance, which the contract
 *       forbids: the ThreadSanitizer build must report it (a test that the
 *       sanitizer is live, not a use to copy).
 *   stress_threads --create-cuda [--threads T]
 *       T threads at once ask for a CUDA device (M_create_on(NCC_DEV_CUDA))
 *       from this CPU-emulation build: each must get an error status and a
 *       message through M_error, never an abort.
 * Exit status 0 when everything agrees, 1 otherwise. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lenet.h"
#include "mlp.h"

#ifdef NCC_HAVE_INFER_BATCH
#define HAVE_BATCH 1
#else
#define HAVE_BATCH 0
#endif

enum { NINPUTS = 8, MAXIO = 4, NMODELS = 2 };

/* one generated model, by its functions */
typedef struct model_api {
  const char *name;
  const ncc_model_info *(*info)(void);
  int (*create_on)(void **m, int kind);
  int (*load)(void *m, const char *path);
  int (*infer_io)(void *m, const void *const *in, void *const *out);
  int (*infer_io_batch)(void *m, int batch, const void *const *in, void *const *out);
  const char *(*error)(const void *m);
  void (*destroy)(void *m);
} model_api;

/* thin wrappers from the generated API's typed handles to void * */
#if HAVE_BATCH
#define BATCH_FN(M) \
  static int M##_batch_(void *m, int b, const void *const *i, void *const *o) { return M##_infer_io_batch((M *)m, b, i, o); }
#define BATCH_PTR(M) M##_batch_
#else
#define BATCH_FN(M)
#define BATCH_PTR(M) NULL
#endif
#define WRAP(M)                                                                                              \
  static int M##_create_(void **m, int k) { return M##_create_on((M **)m, k); }                              \
  static int M##_load_(void *m, const char *p) { return M##_load((M *)m, p); }                               \
  static int M##_infer_(void *m, const void *const *i, void *const *o) { return M##_infer_io((M *)m, i, o); } \
  static const char *M##_error_(const void *m) { return M##_error((const M *)m); }                           \
  static void M##_destroy_(void *m) { M##_destroy((M *)m); }                                                 \
  BATCH_FN(M)                                                                                                \
  static const model_api M##_api = {#M, M##_info, M##_create_, M##_load_, M##_infer_, BATCH_PTR(M), M##_error_, M##_destroy_};
WRAP(lenet)
WRAP(mlp)
static const model_api *const g_api[NMODELS] = {&lenet_api, &mlp_api};

/* what one model's instances share, read-only once the threads start */
typedef struct model_data {
  const model_api *api;
  char weights[256];                       /* a safetensors file of random weights */
  int batch;                               /* N, the first dimension */
  void *in[NINPUTS][MAXIO];                /* the input sets */
  void *ref[NINPUTS][MAXIO + 1][MAXIO];    /* ref[i][b][o]: output o of input set i at batch b */
} model_data;
static model_data g_md[NMODELS];
static void *g_shared[NMODELS];   /* --shared-instance: one instance per model for every thread */

static size_t dtype_size(int dt) { return dt == NCC_F16 || dt == NCC_BF16 ? 2 : dt == NCC_I8 ? 1 : 4; }
static size_t tensor_bytes(const ncc_tensor_info *t) {
  size_t n = dtype_size(t->dtype);
  for (int i = 0; i < t->rank; i++) n *= (size_t)t->shape[i];
  return n;
}

/* a small generator of its own per thread (rand() is not thread-safe) */
static uint32_t rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*s >> 33);
}
/* rnd() has 31 bits */
static float rnd_unit(uint64_t *s) { return (float)rnd(s) / 1073741824.0f - 1.0f; }   /* [-1, 1) */

static void fill(void *p, const ncc_tensor_info *t, float scale, uint64_t *s) {
  size_t n = tensor_bytes(t) / dtype_size(t->dtype);
  for (size_t i = 0; i < n; i++) {
    if (t->dtype == NCC_F32) ((float *)p)[i] = scale * rnd_unit(s);
    else if (t->dtype == NCC_I32) ((int32_t *)p)[i] = (int32_t)(rnd(s) % 10);
    else memset(p, 0, tensor_bytes(t));   /* no such tensors in these models */
  }
}

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); return 1; } while (0)

/* the batch sizes a run uses: 1..N with the variable-batch API, else N alone */
static int batch_lo(const model_data *md) { return HAVE_BATCH ? 1 : md->batch; }

static int run_one(const model_data *md, void *m, int set, int b, void *const *out) {
  if (HAVE_BATCH && md->api->infer_io_batch) return md->api->infer_io_batch(m, b, (const void *const *)md->in[set], out);
  return md->api->infer_io(m, (const void *const *)md->in[set], out);
}

/* Random weights in a file, the input sets, and the references, computed by
 * one instance on this (the only) thread. */
static int prepare(model_data *md, const model_api *api, uint64_t seed) {
  const ncc_model_info *inf = api->info();
  void *h[64], *m = NULL;
  char err[512];
  int fd, rc;
  md->api = api;
  md->batch = (int)inf->inputs[0].shape[0];
  if (inf->ninputs > MAXIO || inf->noutputs > MAXIO || inf->nparams > 64) FAIL("%s: too many tensors", api->name);
  for (int p = 0; p < inf->nparams; p++) {
    h[p] = malloc(tensor_bytes(&inf->params[p]));
    if (!h[p]) FAIL("out of memory");
    fill(h[p], &inf->params[p], 0.2f, &seed);
  }
  snprintf(md->weights, sizeof md->weights, "%s/ncc_stress_%s_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
           api->name);
  if ((fd = mkstemp(md->weights)) < 0) FAIL("mkstemp %s failed", md->weights);
  close(fd);
  rc = ncc_save_safetensors(md->weights, inf->params, inf->nparams, (const void *const *)h, err, sizeof err);
  for (int p = 0; p < inf->nparams; p++) free(h[p]);
  if (rc) FAIL("saving weights: %s", err);
  for (int i = 0; i < NINPUTS; i++)
    for (int k = 0; k < inf->ninputs; k++) {
      md->in[i][k] = malloc(tensor_bytes(&inf->inputs[k]));
      if (!md->in[i][k]) FAIL("out of memory");
      fill(md->in[i][k], &inf->inputs[k], 1.0f, &seed);
    }
  if (api->create_on(&m, NCC_DEV_EMU) || api->load(m, md->weights))
    FAIL("%s reference instance: %s", api->name, api->error(m));
  for (int i = 0; i < NINPUTS; i++)
    for (int b = batch_lo(md); b <= md->batch; b++) {
      for (int o = 0; o < inf->noutputs; o++)
        if (!(md->ref[i][b][o] = calloc(1, tensor_bytes(&inf->outputs[o])))) FAIL("out of memory");
      if (run_one(md, m, i, b, md->ref[i][b])) FAIL("%s reference inference: %s", api->name, api->error(m));
    }
  api->destroy(m);
  /* the references must tell inputs apart: a model that computed nothing (zero
   * weights, no load) would agree with itself trivially */
  for (int i = 1; i < NINPUTS; i++)
    if (!memcmp(md->ref[0][md->batch][0], md->ref[i][md->batch][0], tensor_bytes(&inf->outputs[0])))
      FAIL("%s: input sets 0 and %d give the same output", api->name, i);
  return 0;
}

typedef struct worker_arg {
  int id, iters;
  uint64_t seed;
  long done;             /* inferences checked */
  char msg[1024];
} worker_arg;

#define TFAIL(...) do { snprintf(a->msg, sizeof a->msg, __VA_ARGS__); goto out; } while (0)

/* the rows of output t at batch b (its first dimension is the batch) */
static size_t rows_bytes(const ncc_tensor_info *t, int b) { return tensor_bytes(t) / (size_t)t->shape[0] * (size_t)b; }

static void *stress_thread(void *p) {
  worker_arg *a = (worker_arg *)p;
  const model_data *md = &g_md[a->id % NMODELS];
  const ncc_model_info *inf = md->api->info();
  void *m = NULL, *out[MAXIO] = {0};
  uint64_t s = a->seed;
  if (g_shared[a->id % NMODELS]) {
    m = g_shared[a->id % NMODELS];
  } else {
    if (md->api->create_on(&m, NCC_DEV_EMU)) TFAIL("thread %d: %s create: %s", a->id, md->api->name, md->api->error(m));
    if (md->api->load(m, md->weights)) TFAIL("thread %d: %s load: %s", a->id, md->api->name, md->api->error(m));
  }
  for (int o = 0; o < inf->noutputs; o++)
    if (!(out[o] = malloc(tensor_bytes(&inf->outputs[o])))) TFAIL("out of memory");
  for (int it = 0; it < a->iters; it++) {
    int set = (int)(rnd(&s) % NINPUTS), lo = batch_lo(md);
    int b = lo + (int)(rnd(&s) % (unsigned)(md->batch - lo + 1));
    for (int o = 0; o < inf->noutputs; o++) memset(out[o], 0xa5, tensor_bytes(&inf->outputs[o]));
    if (run_one(md, m, set, b, out)) TFAIL("thread %d: %s infer: %s", a->id, md->api->name, md->api->error(m));
    for (int o = 0; o < inf->noutputs; o++) {
      const ncc_tensor_info *t = &inf->outputs[o];
      size_t used = rows_bytes(t, b);
      if (memcmp(out[o], md->ref[set][b][o], used))
        TFAIL("thread %d: %s inference %d (input set %d, batch %d): output %s differs from the single-threaded one",
              a->id, md->api->name, it, set, b, t->name);
      for (size_t k = used; k < tensor_bytes(t); k++)
        if (((unsigned char *)out[o])[k] != 0xa5)
          TFAIL("thread %d: %s batch %d wrote output %s past its %d rows", a->id, md->api->name, b, t->name, b);
    }
    a->done++;
  }
out:
  for (int o = 0; o < MAXIO; o++) free(out[o]);
  if (m && !g_shared[a->id % NMODELS]) md->api->destroy(m);
  return NULL;
}

/* a CUDA device from a CPU-emulation build: an error with a message, at once from many threads */
static void *cuda_thread(void *p) {
  worker_arg *a = (worker_arg *)p;
  const model_api *api = g_api[a->id % NMODELS];
  void *m = NULL;
  int rc = api->create_on(&m, NCC_DEV_CUDA);
  const char *e = api->error(m);
  if (rc == 0) snprintf(a->msg, sizeof a->msg, "thread %d: %s_create_on(NCC_DEV_CUDA) succeeded in an emulation build",
                        a->id, api->name);
  else if (!m) snprintf(a->msg, sizeof a->msg, "thread %d: no handle to read the error from", a->id);
  else if (!strstr(e, "no CUDA device answers") && !strstr(e, "built for CPU emulation"))
    snprintf(a->msg, sizeof a->msg, "thread %d: unexpected message: %s", a->id, e);
  else if (a->id == 0) printf("%s_create_on(NCC_DEV_CUDA): status %d, %s\n", api->name, rc, e);
  if (m) api->destroy(m);
  return NULL;
}

/* the weight files go however the program ends (a failure returns early) */
static void remove_weights(void) {
  for (int k = 0; k < NMODELS; k++)
    if (g_md[k].weights[0] && !strstr(g_md[k].weights, "XXXXXX")) unlink(g_md[k].weights);
}

int main(int argc, char **argv) {
  int nthreads = 16, iters = 200, mode = 0, bad = 0, shared = 0;
  uint64_t seed = 12345;
  long total = 0;
  double t0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) nthreads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--create-cuda")) mode = 1;
    else if (!strcmp(argv[i], "--shared-instance")) shared = 1;
    else {
      fprintf(stderr, "usage: stress_threads [--threads T] [--iters I] [--seed S] [--shared-instance | --create-cuda]\n");
      return 2;
    }
  }
  if (nthreads < 1 || nthreads > 256 || iters < 1) { fprintf(stderr, "bad --threads or --iters\n"); return 2; }
  atexit(remove_weights);
  if (!mode)
    for (int k = 0; k < NMODELS; k++)
      if (prepare(&g_md[k], g_api[k], seed + (uint64_t)k)) return 1;
  for (int k = 0; shared && k < NMODELS; k++)
    if (g_api[k]->create_on(&g_shared[k], NCC_DEV_EMU) || g_api[k]->load(g_shared[k], g_md[k].weights)) {
      fprintf(stderr, "%s: %s\n", g_api[k]->name, g_api[k]->error(g_shared[k]));
      return 1;
    }
  t0 = ncc_now();
  {
    pthread_t th[256];
    worker_arg *args = calloc((size_t)nthreads, sizeof *args);
    if (!args) return 1;
    for (int i = 0; i < nthreads; i++) {
      args[i].id = i;
      args[i].iters = iters;
      args[i].seed = seed * 1000003u + (uint64_t)i;
      if (pthread_create(&th[i], NULL, mode ? cuda_thread : stress_thread, &args[i])) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
      }
    }
    for (int i = 0; i < nthreads; i++) {
      pthread_join(th[i], NULL);
      if (args[i].msg[0]) { fprintf(stderr, "%s\n", args[i].msg); bad = 1; }
      total += args[i].done;
    }
    free(args);
  }
  if (mode) {
    if (!bad) printf("%d threads: every CUDA create failed with a message\n", nthreads);
    return bad;
  }
  for (int k = 0; k < NMODELS; k++)
    if (g_shared[k]) g_api[k]->destroy(g_shared[k]);
  printf("%d threads, %ld inferences (%s), %.2f s: %s\n", nthreads, total,
         HAVE_BATCH ? "random batch sizes" : "full batches", ncc_now() - t0,
         bad ? "MISMATCH" : "all identical to the single-threaded results");
  if (!bad && total != (long)nthreads * iters) { fprintf(stderr, "only %ld inferences ran\n", total); bad = 1; }
  return bad;
}
