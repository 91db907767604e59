/* test_graph.c — the device's graph API on the emulator (runtime/graph.c),
 * one kernel written here: y[i] = a * x[i] + k (+ i for the second kernel).
 *   - nothing runs during a capture; each replay runs the recorded launches;
 *   - an argument's value is the one it had at the launch (copied at capture:
 *     a variable changed afterwards leaves the replays as they were, as on a
 *     GPU), unless its address was named live (then every replay reads it);
 *   - GEMMs and memsets are captured and replayed too;
 *   - host copies and ncc_sync inside a capture fail with a message, and the
 *     capture is then abandoned; a kernel without an argument table cannot be
 *     captured;
 *   - graphs are off by default under emulation, NCC_GRAPHS=1 turns them on
 *     (the test sets it before opening), ncc_dev_set_graphs switches one device;
 *   - the counters (ncc_dev_graph_stats) count captures, replays, nodes and
 *     live refreshes; ncc_dev_close frees the graphs left;
 *   - the per-kernel profile (ncc_profile_set) times each launch and GEMM by
 *     name, turns graphs off while it is on, and counts nothing outside it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ncc_kernel.h"
#include "ncc_rt.h"

#include "check.h"

NCC_KERNEL void k_axpb(const float *__restrict__ x, float a, int k, float *__restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 64) y[i] = a * x[i] + (float)k;
}
NCC_KERNEL void k_axpbi(const float *__restrict__ x, float a, int k, float *__restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 64) y[i] = a * x[i] + (float)k + (float)i;
}
NCC_KERNEL_DESC(k_axpb, 0, (NCC_ARG(const float *, 0), NCC_ARG(float, 1), NCC_ARG(int, 2), NCC_ARG(float *, 3)))
NCC_KERNEL_DESC(k_axpbi, 0, (NCC_ARG(const float *, 0), NCC_ARG(float, 1), NCC_ARG(int, 2), NCC_ARG(float *, 3)))
static const unsigned short argsz[] = {sizeof(const float *), sizeof(float), sizeof(int), sizeof(float *)};
static const ncc_kernel_args kargs[] = {{&k_axpb_desc, 4, argsz}, {&k_axpbi_desc, 4, argsz}};

static float *x, *y, *z;
static float a;
static int k;

static int launch(ncc_dev *d, const ncc_kernel *kd) {
  void *args[] = {&x, &a, &k, &y};
  ncc_dim3 g = {1, 1, 1}, b = {64, 1, 1};
  return ncc_launch(d, kd, g, b, 0, args);
}

/* y[i] == aa * x[i] + kk (+ i) for every i */
static int y_is(float aa, int kk, int plus_i) {
  for (int i = 0; i < 64; i++)
    if (y[i] != aa * x[i] + (float)kk + (plus_i ? (float)i : 0.0f)) return 0;
  return 1;
}

int main(void) {
  ncc_dev *d = NULL;
  ncc_graph *g = NULL, *g2 = NULL;
  ncc_graph_stats st;
  int rc;
  setenv("NCC_GRAPHS", "1", 1);
  if (ncc_dev_open(&d, NCC_DEV_EMU, NULL, NULL)) {
    fprintf(stderr, "open: %s\n", ncc_dev_error(d));
    return 1;
  }
  CHECK(ncc_dev_graphs(d) == 1, "NCC_GRAPHS=1 should turn graphs on under emulation");
  CHECK(ncc_malloc(d, (void **)&x, 64 * 4) == 0 && ncc_malloc(d, (void **)&y, 64 * 4) == 0 &&
            ncc_malloc(d, (void **)&z, 64 * 4) == 0, "malloc");
  for (int i = 0; i < 64; i++) x[i] = (float)i * 0.5f;
  CHECK(ncc_dev_kernel_args(d, kargs, 2) == 0, "kernel args");

  /* a launch that has no table: the capture fails, saying which kernel */
  {
    static const ncc_kernel_args none[] = {{&k_axpbi_desc, 4, argsz}};
    ncc_dev *d2 = NULL;
    CHECK(ncc_dev_open(&d2, NCC_DEV_EMU, NULL, NULL) == 0, "open d2");
    CHECK(ncc_dev_kernel_args(d2, none, 1) == 0, "kernel args d2");
    CHECK(ncc_graph_begin(d2) == 0, "begin d2");
    CHECK(launch(d2, &k_axpb_desc) != 0 && strstr(ncc_dev_error(d2), "k_axpb"),
          "a kernel without an argument table: %s", ncc_dev_error(d2));
    CHECK(ncc_graph_end(d2, &g) != 0 && g == NULL, "a failed capture must not give a graph");
    ncc_dev_close(d2);
  }

  /* capture: a = 2, k = 3 baked in; nothing runs */
  memset(y, 0, 64 * 4);
  a = 2.0f, k = 3;
  CHECK(ncc_graph_begin(d) == 0, "begin: %s", ncc_dev_error(d));
  CHECK(launch(d, &k_axpb_desc) == 0, "launch in capture: %s", ncc_dev_error(d));
  CHECK(ncc_graph_end(d, &g) == 0 && g, "end: %s", ncc_dev_error(d));
  CHECK(y[5] == 0.0f, "a captured launch must not run (y[5] = %g)", y[5]);
  a = 5.0f, k = 7;   /* changed after the capture: not seen by replays */
  CHECK(ncc_graph_launch(d, g) == 0, "replay: %s", ncc_dev_error(d));
  CHECK(y_is(2.0f, 3, 0), "the replay must use the values copied at capture (a=2, k=3): y[5] = %g", y[5]);

  /* live: k named live is read at every replay, a stays as captured */
  CHECK(ncc_graph_live(d, &k, sizeof k) == 0, "live");
  a = 2.0f, k = 1;
  CHECK(ncc_graph_begin(d) == 0, "begin 2");
  CHECK(launch(d, &k_axpbi_desc) == 0, "launch 2");
  /* a GEMM and a memset in the same capture: z = 0 then z[0..7] = ones(1x1) * x[0..7] */
  {
    static const float one = 1.0f;
    CHECK(ncc_memset(d, z, 0, 64 * 4) == 0, "memset in capture");
    CHECK(ncc_sgemm(d, 0, 0, 1, 8, 1, 1.0f, &one, 1, 0, x, 8, 0, 0.0f, z, 8, 0, 1) == 0, "sgemm in capture");
  }
  CHECK(ncc_graph_end(d, &g2) == 0 && g2, "end 2");
  for (int i = 0; i < 64; i++) z[i] = -1.0f;
  a = 9.0f, k = 4;
  CHECK(ncc_graph_launch(d, g2) == 0, "replay 2: %s", ncc_dev_error(d));
  CHECK(y_is(2.0f, 4, 1), "live k must be read at replay (k=4), a copied (a=2): y[5] = %g", y[5]);
  CHECK(z[3] == x[3] && z[8] == 0.0f, "replayed GEMM and memset: z[3] = %g (want %g), z[8] = %g", z[3], x[3], z[8]);
  k = 11;
  CHECK(ncc_graph_launch(d, g2) == 0 && y_is(2.0f, 11, 1), "second replay with k=11: y[5] = %g", y[5]);

  /* host copies and sync inside a capture: refused, capture abandoned */
  {
    float h[4] = {0};
    CHECK(ncc_graph_begin(d) == 0, "begin 3");
    rc = ncc_memcpy_d2h(d, h, y, sizeof h);
    CHECK(rc != 0 && strstr(ncc_dev_error(d), "graph capture"), "d2h in capture: rc %d, %s", rc, ncc_dev_error(d));
    CHECK(ncc_sync(d) != 0, "sync in capture must fail");
    CHECK(ncc_graph_end(d, NULL) == 0, "abandon");
    CHECK(ncc_memcpy_d2h(d, h, y, sizeof h) == 0, "d2h after the capture: %s", ncc_dev_error(d));
  }

  ncc_dev_graph_stats(d, &st);
  CHECK(st.enabled == 1 && st.native == 0, "stats: enabled %d native %d", st.enabled, st.native);
  CHECK(st.captures == 2 && st.replays == 3 && st.nodes == 4 && st.live_updates == 2,
        "stats: %lld captures, %lld replays, %lld nodes, %lld live updates (want 2, 3, 4, 2)", st.captures, st.replays,
        st.nodes, st.live_updates);
  ncc_graph_free(d, g);

  /* the profile (ncc_profile_set): each launch and GEMM timed by itself, by name in the order first
   * launched, graphs off meanwhile and on again after; launches outside it are not counted */
  {
    float *c = z;
    const ncc_profile_entry *e = NULL;
    ncc_profile_clear();
    CHECK(launch(d, &k_axpb_desc) == 0, "a launch before the profile");   /* not counted */
    ncc_profile_set(1);
    CHECK(ncc_profile_on() && ncc_dev_graphs(d) == 0, "graphs must be off while profiling");
    a = 3.0f, k = 1;
    CHECK(launch(d, &k_axpbi_desc) == 0 && y_is(3.0f, 1, 1), "profiled launch 1: %s", ncc_dev_error(d));
    CHECK(launch(d, &k_axpb_desc) == 0 && y_is(3.0f, 1, 0), "profiled launch 2: %s", ncc_dev_error(d));
    CHECK(launch(d, &k_axpbi_desc) == 0 && y_is(3.0f, 1, 1), "profiled launch 3: %s", ncc_dev_error(d));
    CHECK(ncc_sgemm(d, 0, 0, 8, 8, 8, 1.0f, x, 8, 0, x, 8, 0, 0.0f, c, 8, 0, 1) == 0, "profiled GEMM: %s",
          ncc_dev_error(d));
    ncc_profile_set(0);
    CHECK(launch(d, &k_axpb_desc) == 0, "a launch after the profile");   /* not counted */
    CHECK(!ncc_profile_on() && ncc_dev_graphs(d) == 1, "graphs must be on again after the profile");
    int n = ncc_profile_get(&e);
    CHECK(n == 3 && e, "profile: %d entries, want 3", n);
    if (n == 3 && e) {
      CHECK(!strcmp(e[0].name, "k_axpbi") && e[0].calls == 2, "entry 0: %s x%lld, want k_axpbi x2", e[0].name,
            e[0].calls);
      CHECK(!strcmp(e[1].name, "k_axpb") && e[1].calls == 1, "entry 1: %s x%lld, want k_axpb x1", e[1].name, e[1].calls);
      CHECK(!strcmp(e[2].name, "ncc_gemm_ex fp32") && e[2].calls == 1, "entry 2: %s x%lld, want the GEMM x1",
            e[2].name, e[2].calls);
      for (int i = 0; i < n; i++) CHECK(e[i].seconds > 0 && e[i].seconds < 10, "entry %d: %g s", i, e[i].seconds);
    }
    ncc_profile_clear();
    CHECK(ncc_profile_get(&e) == 0, "the profile must be empty after ncc_profile_clear");
  }

  ncc_dev_set_graphs(d, 0);
  CHECK(ncc_dev_graphs(d) == 0 && ncc_graph_begin(d) != 0, "graphs off: begin must fail");
  ncc_free(d, x);
  ncc_free(d, y);
  ncc_free(d, z);
  ncc_dev_close(d);   /* frees g2 */

  /* the default under emulation: off */
  unsetenv("NCC_GRAPHS");
  CHECK(ncc_dev_open(&d, NCC_DEV_EMU, NULL, NULL) == 0 && ncc_dev_graphs(d) == 0,
        "graphs must be off by default under emulation");
  ncc_dev_close(d);
  setenv("NCC_GRAPHS", "0", 1);
  CHECK(ncc_dev_open(&d, NCC_DEV_EMU, NULL, NULL) == 0 && ncc_dev_graphs(d) == 0, "NCC_GRAPHS=0");
  ncc_dev_close(d);
  if (!failures) printf("graph API on the emulator: ok\n");
  return failures != 0;
}
