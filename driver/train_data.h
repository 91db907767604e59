/* train_data.h — the parts of `ncc train` that feed the steps (train_data.c):
 * the training set as train.c maps it, the order of each epoch, and the
 * loader thread that gathers the next batch while a step runs.  Apart from
 * the rest of the driver so that tests/driver/test_train_data.c can check
 * them without a model. */
#ifndef NCC_DRIVER_TRAIN_DATA_H
#define NCC_DRIVER_TRAIN_DATA_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ncc_rt.h"

typedef struct Split {
  ncc_npy_mapped x, y;
  int32_t *labels;        /* class labels: y as int32 (a copy: converted from int64 when needed) */
  int yfloat;             /* 1: y holds float32 targets (regression), rows of yrow bytes, read in place */
  int64_t n;              /* samples */
  size_t row, yrow;       /* bytes of one sample of x, of y */
  char xpath[4200], ypath[4200];
} Split;

/* The permutation of epoch e (from 0) of n samples: identity without
 * shuffle, else Fisher-Yates from splitmix64 keyed by (seed, e) alone, so a
 * resumed run repeats it. */
void epoch_order(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch, int shuffle);

/* Two host buffers; step k's batch (samples perm_e[(k mod spe)*N ...] of
 * epoch e = k / spe) is gathered into buffer k & 1 by a thread. */
/* Where the batches live: page-locked memory from the model (M_host_alloc)
 * on a GPU; NULL functions: malloc and free. */
typedef struct HostMem {
  void *(*alloc)(void *ctx, size_t n);
  void (*release)(void *ctx, void *p);
  void *ctx;
} HostMem;

typedef struct Loader {
  const Split *tr;
  HostMem mem;
  int64_t N, spe;          /* batch, steps per epoch (the last may hold fewer rows: --keep-last) */
  int64_t rows[2];         /* the rows gathered into each buffer: N, or fewer for the last batch */
  uint64_t seed;
  int shuffle;
  float *x[2];
  void *y[2];              /* int32 labels [N] or float32 targets [N, ...] (Split.yfloat) */
  int64_t *perm, perm_epoch;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int64_t want[2], have[2];
  int quit, started;
} Loader;

/* 0, or -1 when out of memory or no thread can be started */
int  loader_start(Loader *L, const Split *tr, int64_t N, int64_t spe, uint64_t seed, int shuffle, size_t xbytes,
                  const HostMem *mem);
void loader_request(Loader *L, int64_t step);   /* gather step into buffer step & 1 */
void loader_wait(Loader *L, int64_t step);      /* until it is there */
void loader_stop(Loader *L);                    /* joins the thread, frees the buffers */

#endif
