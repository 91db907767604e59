/* train_data.c — the order of the samples and the loader thread of
 * `ncc train` (train_data.h). */
#include <stdlib.h>
#include <string.h>

#include "train_data.h"

static uint64_t sm64(uint64_t *s) {            /* splitmix64, as init.c's rng_next */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* ---- the order of the samples ------------------------------------------- */

/* The permutation of epoch e (from 0): Fisher-Yates from splitmix64 keyed by
 * (seed, e).  Depends on nothing else, so a resumed run repeats it. */
void epoch_order(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch, int shuffle) {
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  if (!shuffle) return;
  uint64_t s = seed * 0x9E3779B97F4A7C15ULL ^ ((uint64_t)epoch + 1) * 0xD1B54A32D192ED03ULL;
  sm64(&s);
  for (int64_t i = n - 1; i > 0; i--) {
    uint64_t r = sm64(&s);
    /* unbiased in [0, i]: reject the r below 2^64 mod (i+1), then r mod (i+1) */
    uint64_t bound = (uint64_t)i + 1, lim = -bound % bound;
    while (r < lim) r = sm64(&s);
    int64_t j = (int64_t)(r % bound);
    int64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
  }
}

/* ---- the loader thread: the next batch while the step runs --------------- */

static void gather(Loader *L, int64_t step, int b) {
  int64_t e = step / L->spe, at = (step % L->spe) * L->N;
  if (e != L->perm_epoch) {
    epoch_order(L->perm, L->tr->n, L->seed, e, L->shuffle);
    L->perm_epoch = e;
  }
  const char *src = (const char *)L->tr->x.data;
  int64_t rows = L->tr->n - at < L->N ? L->tr->n - at : L->N;   /* the last batch of --keep-last: fewer */
  L->rows[b] = rows;
  for (int64_t i = 0; i < rows; i++) {
    int64_t k = L->perm[at + i];
    memcpy((char *)L->x[b] + (size_t)i * L->tr->row, src + (size_t)k * L->tr->row, L->tr->row);
    if (L->tr->yfloat)
      memcpy((char *)L->y[b] + (size_t)i * L->tr->yrow, (const char *)L->tr->y.data + (size_t)k * L->tr->yrow,
             L->tr->yrow);
    else ((int32_t *)L->y[b])[i] = L->tr->labels[k];
  }
}

static void *loader_main(void *arg) {
  Loader *L = (Loader *)arg;
  pthread_mutex_lock(&L->mu);
  for (;;) {
    int b = -1;
    while (!L->quit && b < 0) {
      for (int k = 0; k < 2 && b < 0; k++)
        if (L->want[k] >= 0 && L->want[k] != L->have[k]) b = k;
      if (b < 0) pthread_cond_wait(&L->cv, &L->mu);
    }
    if (L->quit) break;
    int64_t step = L->want[b];
    pthread_mutex_unlock(&L->mu);
    gather(L, step, b);
    pthread_mutex_lock(&L->mu);
    L->have[b] = step;
    pthread_cond_broadcast(&L->cv);
  }
  pthread_mutex_unlock(&L->mu);
  return NULL;
}

static void *host_get(Loader *L, size_t n) { return L->mem.alloc ? L->mem.alloc(L->mem.ctx, n) : malloc(n); }
static void host_put(Loader *L, void *p) {
  if (!p) return;
  if (L->mem.release) L->mem.release(L->mem.ctx, p);
  else free(p);
}

int loader_start(Loader *L, const Split *tr, int64_t N, int64_t spe, uint64_t seed, int shuffle,
                        size_t xbytes, const HostMem *mem) {
  memset(L, 0, sizeof *L);
  if (mem && mem->alloc && mem->release) L->mem = *mem;
  L->tr = tr; L->N = N; L->spe = spe; L->seed = seed; L->shuffle = shuffle;
  L->perm_epoch = -1;
  L->perm = malloc((size_t)tr->n * sizeof *L->perm);
  for (int b = 0; b < 2; b++) {
    L->x[b] = host_get(L, xbytes);
    L->y[b] = host_get(L, (size_t)N * (tr->yfloat ? tr->yrow : sizeof(int32_t)) + 1);
    L->want[b] = L->have[b] = -1;
  }
  if (!L->perm || !L->x[0] || !L->x[1] || !L->y[0] || !L->y[1]) return -1;
  pthread_mutex_init(&L->mu, NULL);
  pthread_cond_init(&L->cv, NULL);
  if (pthread_create(&L->th, NULL, loader_main, L) != 0) return -1;
  L->started = 1;
  return 0;
}

void loader_request(Loader *L, int64_t step) {
  pthread_mutex_lock(&L->mu);
  L->want[step & 1] = step;
  pthread_cond_broadcast(&L->cv);
  pthread_mutex_unlock(&L->mu);
}

void loader_wait(Loader *L, int64_t step) {
  pthread_mutex_lock(&L->mu);
  while (L->have[step & 1] != step) pthread_cond_wait(&L->cv, &L->mu);
  pthread_mutex_unlock(&L->mu);
}

void loader_stop(Loader *L) {
  if (L->started) {
    pthread_mutex_lock(&L->mu);
    L->quit = 1;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    pthread_join(L->th, NULL);
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->cv);
  }
  for (int b = 0; b < 2; b++) {
    host_put(L, L->x[b]);
    host_put(L, L->y[b]);
  }
  free(L->perm);
  memset(L, 0, sizeof *L);
}

