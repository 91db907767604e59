/* test_streams.c — the device's two streams on the emulator (runtime/dev.c,
 * ncc_rt.h "streams"), with two kernels written here: a = x + k and
 * b = 2 * a + k.
 * The step: stream 0 computes a; stream 1 waits for it (event 0) and computes
 * b from a; stream 0 then overwrites a, after waiting for b's kernel (event 1).
 *   - "issue" order runs each launch when it is issued: b is right with or
 *     without the waits;
 *   - "side-last" holds stream 1's work until stream 0 waits for it: without
 *     the wait for event 1 b reads the overwritten a (wrong), with it b is right;
 *   - "main-last" holds stream 0's: without the wait for event 0 b reads a
 *     before it is written, with it b is right; stream 1's first work after a
 *     join waits for stream 0's before it (the fork) without an event of the
 *     caller's;
 *   - ncc_sync and the copies join: held work has run when they return;
 *   - a graph captured with both streams replays the same, in every order;
 *   - a stream other than 0 and 1, an event out of range: errors that say so;
 *   - the per-kernel profile keeps everything on stream 0, in issue order. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ncc_kernel.h"
#include "ncc_rt.h"

#include "check.h"

NCC_KERNEL void k_set(const float *__restrict__ x, int k, float *__restrict__ a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 64) a[i] = x[i] + (float)k;
}
NCC_KERNEL void k_twice(const float *__restrict__ a, int k, float *__restrict__ b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 64) b[i] = 2.0f * a[i] + (float)k;
}
NCC_KERNEL_DESC(k_set, 0, (NCC_ARG(const float *, 0), NCC_ARG(int, 1), NCC_ARG(float *, 2)))
NCC_KERNEL_DESC(k_twice, 0, (NCC_ARG(const float *, 0), NCC_ARG(int, 1), NCC_ARG(float *, 2)))
static const unsigned short argsz[] = {sizeof(const float *), sizeof(int), sizeof(float *)};
static const ncc_kernel_args kargs[] = {{&k_set_desc, 3, argsz}, {&k_twice_desc, 3, argsz}};

static float *x, *a, *b;

static int go(ncc_dev *d, const ncc_kernel *kd, const float *in, int k, float *out) {
  void *args[] = {&in, &k, &out};
  ncc_dim3 g = {1, 1, 1}, blk = {64, 1, 1};
  return ncc_launch(d, kd, g, blk, 0, args);
}

/* the step; wait0/wait1: issue the waits for events 0 and 1.  Stream 1 is
 * forked first (its first work waits for stream 0's before it), so that
 * only event 0 orders b's kernel after a's */
static int step(ncc_dev *d, int wait0, int wait1) {
  int rc = ncc_stream(d, 1);
  if (!rc) rc = ncc_stream(d, 0);
  if (!rc) rc = go(d, &k_set_desc, x, 1, a);             /* a = x + 1 */
  if (!rc) rc = ncc_event_record(d, 0);
  if (!rc) rc = ncc_stream(d, 1);
  if (!rc && wait0) rc = ncc_event_wait(d, 0);
  if (!rc) rc = go(d, &k_twice_desc, a, 3, b);           /* b = 2 a + 3 */
  if (!rc) rc = ncc_event_record(d, 1);
  if (!rc) rc = ncc_stream(d, 0);
  if (!rc && wait1) rc = ncc_event_wait(d, 1);
  if (!rc) rc = go(d, &k_set_desc, x, 100, a);           /* a = x + 100 */
  if (!rc) rc = ncc_stream_join(d);
  return rc;
}

static int b_right(void) {
  for (int i = 0; i < 64; i++)
    if (b[i] != 2.0f * (x[i] + 1.0f) + 3.0f) return 0;
  return 1;
}

static void reset(void) {
  memset(a, 0, 64 * 4);
  memset(b, 0, 64 * 4);
}

int main(void) {
  ncc_dev *d = NULL;
  setenv("NCC_GRAPHS", "1", 1);
  if (ncc_dev_open(&d, NCC_DEV_EMU, NULL, NULL)) {
    fprintf(stderr, "open: %s\n", ncc_dev_error(d));
    return 1;
  }
  CHECK(ncc_malloc(d, (void **)&x, 64 * 4) == 0 && ncc_malloc(d, (void **)&a, 64 * 4) == 0 &&
            ncc_malloc(d, (void **)&b, 64 * 4) == 0, "malloc");
  for (int i = 0; i < 64; i++) x[i] = (float)i * 0.25f;
  CHECK(ncc_dev_kernel_args(d, kargs, 2) == 0, "kernel args");

  /* issue order: right either way */
  ncc_emu_set_stream_order(NCC_STREAM_ORDER_ISSUE);
  CHECK(ncc_emu_stream_order() == NCC_STREAM_ORDER_ISSUE, "order issue");
  for (int w = 0; w < 4; w++) {
    reset();
    CHECK(step(d, w & 1, w >> 1) == 0 && b_right(), "issue order, waits %d: b wrong", w);
  }

  /* side-last: the wait for event 1 is what keeps a until b's kernel read it */
  ncc_emu_set_stream_order(NCC_STREAM_ORDER_SIDE_LAST);
  reset();
  CHECK(step(d, 1, 0) == 0, "side-last, no wait 1: %s", ncc_dev_error(d));
  CHECK(!b_right() && b[5] == 2.0f * (x[5] + 100.0f) + 3.0f, "side-last without the wait: b should read the second a");
  reset();
  CHECK(step(d, 1, 1) == 0 && b_right(), "side-last with both waits: b wrong");
  /* held work runs by ncc_sync: nothing waits for stream 1 here */
  reset();
  CHECK(go(d, &k_set_desc, x, 1, a) == 0 && ncc_stream(d, 1) == 0 && go(d, &k_twice_desc, a, 3, b) == 0,
        "side-last launches");
  CHECK(b[0] == 0.0f, "side-last: stream 1's launch should be held back until a join");
  CHECK(ncc_sync(d) == 0 && b_right(), "ncc_sync should run held work");
  /* and by a copy */
  reset();
  {
    float h[64];
    CHECK(ncc_stream(d, 1) == 0 && go(d, &k_set_desc, x, 7, a) == 0 && ncc_stream(d, 0) == 0, "side-last launch");
    CHECK(ncc_memcpy_d2h(d, h, a, sizeof h) == 0 && h[3] == x[3] + 7.0f, "a copy should run held work first");
  }

  /* main-last: the wait for event 0 is what makes b's kernel read the first a */
  ncc_emu_set_stream_order(NCC_STREAM_ORDER_MAIN_LAST);
  reset();
  CHECK(step(d, 0, 1) == 0, "main-last, no wait 0: %s", ncc_dev_error(d));
  CHECK(!b_right() && b[5] == 3.0f, "main-last without the wait: b should read a before it is written");
  reset();
  CHECK(step(d, 1, 1) == 0 && b_right(), "main-last with both waits: b wrong");

  /* the fork: stream 1's first work after a join waits for stream 0's before it */
  reset();
  CHECK(go(d, &k_set_desc, x, 1, a) == 0 && ncc_stream(d, 1) == 0 && go(d, &k_twice_desc, a, 3, b) == 0 &&
            ncc_stream_join(d) == 0 && b_right(),
        "main-last: stream 1's first launch should follow stream 0's launches before it (the fork)");

  /* a graph with both streams: replays right in every order; without the
   * waits it replays wrong in the order that shows them */
  for (int o = 0; o < 3; o++) {
    ncc_graph *g = NULL;
    ncc_emu_set_stream_order(o);
    reset();
    CHECK(ncc_graph_begin(d) == 0 && step(d, 1, 1) == 0 && ncc_graph_end(d, &g) == 0, "capture (order %d): %s", o,
          ncc_dev_error(d));
    CHECK(b[0] == 0.0f, "a capture runs nothing");
    CHECK(ncc_graph_launch(d, g) == 0 && b_right(), "replay (order %d): b wrong", o);
    ncc_graph_free(d, g);
    if (o == 0) continue;
    reset();
    CHECK(ncc_graph_begin(d) == 0 && step(d, o == 2 ? 0 : 1, o == 1 ? 0 : 1) == 0 && ncc_graph_end(d, &g) == 0,
          "capture without a wait (order %d)", o);
    CHECK(ncc_graph_launch(d, g) == 0 && !b_right(), "replay without a wait (order %d): b should be wrong", o);
    ncc_graph_free(d, g);
  }

  /* the profile: one stream, issue order, even without waits */
  ncc_emu_set_stream_order(NCC_STREAM_ORDER_SIDE_LAST);
  ncc_profile_set(1);
  reset();
  CHECK(step(d, 0, 0) == 0 && b_right(), "profile: b wrong");
  ncc_profile_set(0);
  ncc_profile_clear();

  /* bad arguments */
  CHECK(ncc_stream(d, 2) != 0 && strstr(ncc_dev_error(d), "stream 2"), "stream 2: %s", ncc_dev_error(d));
  CHECK(ncc_event_record(d, NCC_MAX_EVENTS) != 0 && strstr(ncc_dev_error(d), "event"), "event out of range: %s",
        ncc_dev_error(d));
  CHECK(ncc_event_wait(d, -1) != 0, "event -1");
  ncc_free(d, x);
  ncc_free(d, a);
  ncc_free(d, b);
  ncc_dev_close(d);
  printf("rt.streams: ok\n");
  return 0;
}
