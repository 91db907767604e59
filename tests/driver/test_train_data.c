/* test_train_data.c — the feeding of `ncc train` without a model
 * (driver/train_data.c): each epoch's order is a permutation that depends
 * on (seed, epoch) alone, --no-shuffle keeps file order, and the loader
 * thread hands step k exactly the samples epoch_order assigns it, across
 * epoch boundaries, also when it starts mid-run (what --resume does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../driver/train_data.h"
#include "../rt/check.h"

enum { NS = 50, ROW = 3, NB = 8, SPE = NS / NB };

static int is_perm(const int64_t *p, int64_t n) {
  char seen[NS] = {0};
  for (int64_t i = 0; i < n; i++) {
    if (p[i] < 0 || p[i] >= n || seen[p[i]]) return 0;
    seen[p[i]] = 1;
  }
  return 1;
}

static void test_order(void) {
  int64_t a[NS], b[NS], c[NS];
  epoch_order(a, NS, 7, 0, 0);
  for (int i = 0; i < NS; i++) CHECK(a[i] == i, "--no-shuffle: position %d holds %lld", i, (long long)a[i]);
  epoch_order(a, NS, 7, 3, 1);
  epoch_order(b, NS, 7, 3, 1);
  CHECK(is_perm(a, NS), "epoch 3 is not a permutation");
  CHECK(!memcmp(a, b, sizeof a), "the same (seed, epoch) gave two orders");
  epoch_order(c, NS, 7, 4, 1);
  CHECK(is_perm(c, NS) && memcmp(a, c, sizeof a), "epochs 3 and 4 have the same order");
  epoch_order(c, NS, 8, 3, 1);
  CHECK(memcmp(a, c, sizeof a), "seeds 7 and 8 have the same order");
  int fixed = 0;
  for (int i = 0; i < NS; i++) fixed += a[i] == i;
  CHECK(fixed < 10, "a shuffled order keeps %d of %d samples in place", fixed, NS);
  /* every sample lands first about equally often over many epochs */
  int first[NS] = {0};
  for (int e = 0; e < 5000; e++) {
    epoch_order(a, NS, 1, e, 1);
    first[a[0]]++;
  }
  for (int i = 0; i < NS; i++)
    CHECK(first[i] > 40 && first[i] < 170, "sample %d came first %d times in 5000 epochs (expected 100)", i, first[i]);
}

/* runs steps [from, to) through a loader the way train.c does and checks every batch */
/* the batches in memory the caller provides (the model's page-locked memory in ncc train) */
static int n_alloc, n_free;
static void *count_alloc(void *ctx, size_t n) {
  (void)ctx;
  n_alloc++;
  return malloc(n);
}
static void count_free(void *ctx, void *p) {
  (void)ctx;
  n_free++;
  free(p);
}
static const HostMem counted = {count_alloc, count_free, NULL};

static void run_loader(const Split *tr, uint64_t seed, int shuffle, int64_t from, int64_t to, float *seen_x) {
  Loader L;
  int64_t perm[NS];
  CHECK(loader_start(&L, tr, NB, SPE, seed, shuffle, NB * ROW * sizeof(float), NULL) == 0, "loader_start");
  loader_request(&L, from);
  for (int64_t k = from; k < to; k++) {
    int b = (int)(k & 1);
    loader_wait(&L, k);
    if (k + 1 < to) loader_request(&L, k + 1);
    epoch_order(perm, NS, seed, k / SPE, shuffle);
    for (int i = 0; i < NB; i++) {
      int64_t s = perm[(k % SPE) * NB + i];
      CHECK(((int32_t *)L.y[b])[i] == (int32_t)s, "step %lld, row %d: label %d, wanted %lld", (long long)k, i,
            ((int32_t *)L.y[b])[i],
            (long long)s);
      for (int j = 0; j < ROW; j++)
        CHECK(L.x[b][i * ROW + j] == (float)(s * 10 + j), "step %lld, row %d, element %d", (long long)k, i, j);
      if (seen_x) seen_x[k * NB + i] = L.x[b][i * ROW];
    }
  }
  loader_stop(&L);
}

int main(void) {
  static float x[NS * ROW];
  static int32_t y[NS];
  for (int i = 0; i < NS; i++) {
    y[i] = i;
    for (int j = 0; j < ROW; j++) x[i * ROW + j] = (float)(i * 10 + j);
  }
  Split tr;
  memset(&tr, 0, sizeof tr);
  tr.x.data = x;
  tr.labels = y;
  tr.n = NS;
  tr.row = ROW * sizeof(float);
  test_order();
  /* three epochs and a half, shuffled and not; then resumed mid-epoch */
  static float full[4 * SPE * NB], resumed[4 * SPE * NB];
  run_loader(&tr, 5, 1, 0, 3 * SPE + 3, full);
  run_loader(&tr, 5, 0, 0, 2 * SPE, NULL);
  run_loader(&tr, 5, 1, SPE + 2, 3 * SPE + 3, resumed);
  for (int k = (SPE + 2) * NB; k < (3 * SPE + 3) * NB; k++)
    CHECK(full[k] == resumed[k], "a run resumed at step %d drew another sample at row %d", SPE + 2, k);
  /* within an epoch no sample twice (drop_last: NS - SPE*NB left out) */
  for (int e = 0; e < 3; e++) {
    char seen[NS] = {0};
    for (int k = e * SPE * NB; k < (e + 1) * SPE * NB; k++) {
      int s = (int)full[k] / 10;
      CHECK(!seen[s], "epoch %d draws sample %d twice", e, s);
      seen[s] = 1;
    }
  }
  /* float targets (a regression): rows of y gathered beside the samples */
  static float yt[NS * 3];
  for (int i = 0; i < NS * 3; i++) yt[i] = (float)(i / 3) * 100.0f + (float)(i % 3);
  Split rg = tr;
  rg.labels = NULL;
  rg.yfloat = 1;
  rg.yrow = 3 * sizeof(float);
  rg.y.data = yt;
  Loader L;
  int64_t perm[NS];
  CHECK(loader_start(&L, &rg, NB, SPE, 9, 1, NB * ROW * sizeof(float), &counted) == 0, "loader_start (targets)");
  loader_request(&L, 0);
  for (int64_t k = 0; k < 2 * SPE + 1; k++) {
    int b = (int)(k & 1);
    loader_wait(&L, k);
    if (k + 1 < 2 * SPE + 1) loader_request(&L, k + 1);
    epoch_order(perm, NS, 9, k / SPE, 1);
    for (int i = 0; i < NB; i++) {
      int64_t smp = perm[(k % SPE) * NB + i];
      for (int j = 0; j < 3; j++)
        CHECK(((float *)L.y[b])[i * 3 + j] == (float)smp * 100.0f + (float)j, "step %lld, row %d: target %d",
              (long long)k, i, j);
      CHECK(L.x[b][i * ROW] == (float)(smp * 10), "step %lld, row %d: its sample", (long long)k, i);
    }
  }
  loader_stop(&L);
  CHECK(n_alloc == 4 && n_free == 4, "the loader took %d buffers from its allocator and gave back %d (4 each)", n_alloc,
        n_free);
  printf("%s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}
