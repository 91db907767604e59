/* test_jit.c KERNELS.cu — the jit backend's plumbing without a GPU, against
 * fake_cuda.c standing in for libcuda.so.1 (LD_LIBRARY_PATH): NVRTC really
 * compiles the kernels section to an sm_90 cubin, the cubin is cached under
 * $XDG_CACHE_HOME/ncc and reused, a damaged cache entry is dropped, kernels are
 * found by name, launch geometry and arguments reach cuLaunchKernel, a
 * captured launch's live argument reaches every replay, a second stream
 * takes part in a capture and is joined back before it ends, and
 * failures name the failing call with file:line.  Exits 77 (ctest: skipped)
 * when NVRTC cannot be loaded. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ncc_rt.h"

#include "check.h"

/* the one .cubin in dir, or "" */
static int find_cubin(const char *dir, char *out, size_t n) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int count = 0;
  out[0] = 0;
  if (!d) return 0;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".cubin")) {
      count++;
      snprintf(out, n, "%s/%s", dir, e->d_name);
    }
  closedir(d);
  return count;
}

static ncc_dim3 d3(unsigned x, unsigned y, unsigned z) {
  ncc_dim3 d;
  d.x = x; d.y = y; d.z = z;
  return d;
}

int main(int argc, char **argv) {
  char *src, *a, cache[512], dir[600], cubin[1200], cubin2[1200];
  ncc_dev *d = NULL;
  void *fake;
  int rc, *loads;
  struct stat st1, st2;
  if (argc < 2) { fprintf(stderr, "usage: test_jit KERNELS.cu\n"); return 2; }
  if (!(a = read_kernels_section(argv[1], &src))) return 2;
  snprintf(cache, sizeof cache, "/tmp/ncc-jit-test-XXXXXX");
  if (!mkdtemp(cache)) return 2;
  setenv("XDG_CACHE_HOME", cache, 1);
  snprintf(dir, sizeof dir, "%s/ncc", cache);

  rc = ncc_dev_open(&d, NCC_DEV_CUDA, a, "-lineinfo");
  if (rc && strstr(ncc_dev_error(d), "cannot load NVRTC")) {
    printf("skipped: %s\n", ncc_dev_error(d));
    return 77;   /* ctest's SKIP_RETURN_CODE: not run is not passed */
  }
  CHECK(rc == 0, "jit open: %s", ncc_dev_error(d));
  if (rc) return 1;
  fake = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!fake || !dlsym(fake, "fake_last_kernel")) {
    fprintf(stderr, "the fake libcuda.so.1 is not the one loaded (LD_LIBRARY_PATH?)\n");
    return 1;
  }
  loads = (int *)dlsym(fake, "fake_module_loads");
  printf("device: %s\n", ncc_dev_name(d));
  CHECK(strcmp(ncc_dev_name(d), "cuda: Fake GPU (sm_90, jit)") == 0, "name %s", ncc_dev_name(d));
  CHECK(!ncc_dev_is_emu(d), "jit device claims to be emu");
  CHECK(find_cubin(dir, cubin, sizeof cubin) == 1, "no single cubin cached in %s", dir);
  stat(cubin, &st1);

  {
    /* memory through the driver API */
    float h[8] = {1, 2, 3, 4, 5, 6, 7, 8}, g[8];
    void *p;
    CHECK(ncc_malloc(d, &p, sizeof h) == 0 && ncc_memcpy_h2d(d, p, h, sizeof h) == 0 &&
              ncc_memcpy_d2h(d, g, p, sizeof g) == 0 && memcmp(g, h, sizeof h) == 0 && ncc_free(d, p) == 0,
          "memory: %s", ncc_dev_error(d));
    /* page-locked staging memory through cuMemHostAlloc, copied from */
    void *hp = NULL;
    CHECK(ncc_host_alloc(d, &hp, sizeof h) == 0 && hp != NULL, "host_alloc: %s", ncc_dev_error(d));
    if (hp) {
      memcpy(hp, h, sizeof h);
      CHECK(ncc_malloc(d, &p, sizeof h) == 0 && ncc_memcpy_h2d(d, p, hp, sizeof h) == 0 &&
                ncc_memcpy_d2h(d, g, p, sizeof g) == 0 && memcmp(g, h, sizeof h) == 0 && ncc_free(d, p) == 0 &&
                ncc_host_free(d, hp) == 0,
            "copies from page-locked memory: %s", ncc_dev_error(d));
    }
  }
  {
    /* a launch reaches cuLaunchKernel with its geometry and arguments */
    const float *x = NULL, *bb = NULL;
    float *y = NULL;
    int nn = 12345, inner = 1, ch = 1;
    void *args[6];
    args[0] = &x; args[1] = &bb; args[2] = &y; args[3] = &nn; args[4] = &inner; args[5] = &ch;
    ncc_kernel k;
    memset(&k, 0, sizeof k);
    k.name = "k_bias_relu";
    rc = ncc_launch(d, &k, d3(49, 2, 1), d3(256, 1, 1), 64 * 1024, args);
    CHECK(rc == 0, "launch: %s", ncc_dev_error(d));
    CHECK(strcmp((char *)dlsym(fake, "fake_last_kernel"), "k_bias_relu") == 0, "kernel name not passed");
    CHECK(((unsigned *)dlsym(fake, "fake_last_grid"))[0] == 49 && ((unsigned *)dlsym(fake, "fake_last_grid"))[1] == 2 &&
              ((unsigned *)dlsym(fake, "fake_last_block"))[0] == 256 &&
              *(unsigned *)dlsym(fake, "fake_last_shmem") == 64 * 1024,
          "geometry not passed");
    CHECK(*(int *)dlsym(fake, "fake_last_arg_int") == 12345, "arguments not passed");
    CHECK(*(int *)dlsym(fake, "fake_func_attr_sets") == 1, "64 KiB of shared memory without the opt-in");
    {
      /* every device has a stream of its own, and launches go to it, not to the
       * legacy default stream that would serialise instances driven from
       * different threads */
      void *s1 = *(void **)dlsym(fake, "fake_last_stream");
      ncc_dev *d2 = NULL;
      CHECK(s1 != NULL, "launch on the legacy default stream");
      rc = ncc_dev_open(&d2, NCC_DEV_CUDA, a, "-lineinfo");
      CHECK(rc == 0 && *(int *)dlsym(fake, "fake_streams") == 2, "second device: %s", ncc_dev_error(d2));
      rc = ncc_launch(d2, &k, d3(1, 1, 1), d3(32, 1, 1), 0, args);
      CHECK(rc == 0 && *(void **)dlsym(fake, "fake_last_stream") != NULL &&
                *(void **)dlsym(fake, "fake_last_stream") != s1,
            "two devices launch on one stream: %s", ncc_dev_error(d2));
      ncc_dev_close(d2);
      CHECK(*(int *)dlsym(fake, "fake_streams") == 1, "closing a device leaves its stream");
    }
    {
      /* CUDA graphs: a launch with a live argument captured, then replayed
       * twice; each replay replaces the node's arguments with the value now
       * (cuGraphExecKernelNodeSetParams), which the driver allows only while
       * the graph the instance came from exists (the fake driver checks) */
      static const unsigned short sz[] = {sizeof(void *), sizeof(void *), sizeof(void *), sizeof(int), sizeof(int),
                                          sizeof(int)};
      ncc_kernel_args ka;
      ncc_graph *g = NULL;
      ka.k = &k, ka.nargs = 6, ka.size = sz;
      ncc_dev_set_graphs(d, 1);
      CHECK(ncc_dev_graphs(d) == 1, "graphs are off on the (fake) driver");
      CHECK(ncc_dev_kernel_args(d, &ka, 1) == 0 && ncc_graph_live(d, &nn, sizeof nn) == 0, "graph set-up: %s",
            ncc_dev_error(d));
      nn = 1;
      CHECK(ncc_graph_begin(d) == 0 && ncc_launch(d, &k, d3(49, 2, 1), d3(256, 1, 1), 0, args) == 0 &&
                ncc_graph_end(d, &g) == 0 && g,
            "capture: %s", ncc_dev_error(d));
      for (int r = 1; r <= 2 && g; r++) {
        nn = 100 * r;
        rc = ncc_graph_launch(d, g);
        CHECK(rc == 0, "replay %d: %s", r, ncc_dev_error(d));
        CHECK(*(int *)dlsym(fake, "fake_last_set_arg_int") == 100 * r && *(int *)dlsym(fake, "fake_graph_launches") == r,
              "replay %d did not pass the live argument's value now", r);
      }
      ncc_graph_free(d, g);
      /* two streams (ncc_stream): stream 1 is a second CUDA stream, an event
       * of the caller's orders it after stream 0's launch; under a capture
       * stream 1 joins the graph (its first launch waits for stream 0's work:
       * the fork), so nothing runs outside it, and the join at the end lets
       * the capture end; a replay refreshes the side launch's live argument */
      void *s0;
      CHECK(ncc_launch(d, &k, d3(1, 1, 1), d3(32, 1, 1), 0, args) == 0, "stream 0: %s", ncc_dev_error(d));
      s0 = *(void **)dlsym(fake, "fake_last_stream");
      CHECK(ncc_event_record(d, 3) == 0 && ncc_stream(d, 1) == 0 && ncc_event_wait(d, 3) == 0 &&
                ncc_launch(d, &k, d3(1, 1, 1), d3(32, 1, 1), 0, args) == 0,
            "stream 1: %s", ncc_dev_error(d));
      CHECK(*(void **)dlsym(fake, "fake_last_stream") != s0 && *(int *)dlsym(fake, "fake_streams") == 2,
            "stream 1 should be a second CUDA stream");
      CHECK(ncc_sync(d) == 0 && *(int *)dlsym(fake, "fake_event_waits") >= 3, "events: %s", ncc_dev_error(d));
      nn = 7;
      CHECK(ncc_graph_begin(d) == 0 && ncc_launch(d, &k, d3(2, 1, 1), d3(32, 1, 1), 0, args) == 0 &&
                ncc_stream(d, 1) == 0 && ncc_launch(d, &k, d3(3, 1, 1), d3(32, 1, 1), 0, args) == 0 &&
                ncc_graph_end(d, &g) == 0 && g,
            "capture on two streams: %s", ncc_dev_error(d));
      CHECK(*(int *)dlsym(fake, "fake_eager_launches") == 0, "a stream-1 launch ran outside the capture");
      nn = 9;
      CHECK(g && ncc_graph_launch(d, g) == 0 && *(int *)dlsym(fake, "fake_last_set_arg_int") == 9,
            "replay on two streams: %s", ncc_dev_error(d));
      ncc_graph_free(d, g);
      ncc_dev_set_graphs(d, 0);
    }
    k.name = "no_such_kernel";
    rc = ncc_launch(d, &k, d3(1, 1, 1), d3(1, 1, 1), 0, args);
    CHECK(rc == NCC_EUSER && strstr(ncc_dev_error(d), "cuModuleGetFunction") && strstr(ncc_dev_error(d), "dev_cuda.c:") &&
              strstr(ncc_dev_error(d), "named symbol not found"),
          "unknown kernel: %s", ncc_dev_error(d));
    printf("unknown kernel: %s\n", ncc_dev_error(d));
  }
  ncc_dev_close(d);

  /* the second open comes from the cache: same file, not rewritten */
  sleep(1);
  rc = ncc_dev_open(&d, NCC_DEV_CUDA, a, "-lineinfo");
  CHECK(rc == 0, "second open: %s", ncc_dev_error(d));
  CHECK(find_cubin(dir, cubin2, sizeof cubin2) == 1 && strcmp(cubin, cubin2) == 0, "cache entry changed");
  stat(cubin, &st2);
  CHECK(st1.st_mtime == st2.st_mtime, "cubin rewritten instead of reused");
  ncc_dev_close(d);

  /* other options: another cache entry */
  rc = ncc_dev_open(&d, NCC_DEV_CUDA, a, NULL);
  CHECK(rc == 0 && find_cubin(dir, cubin2, sizeof cubin2) == 2, "options are not part of the cache key");
  ncc_dev_close(d);

  /* a damaged entry is reported and dropped; the next open compiles afresh */
  FILE *f = fopen(cubin, "wb");
  if (f) fputs("garbage", f);
  if (f) fclose(f);
  rc = ncc_dev_open(&d, NCC_DEV_CUDA, a, "-lineinfo");
  CHECK(rc == NCC_EUSER && strstr(ncc_dev_error(d), "cuModuleLoadData") && strstr(ncc_dev_error(d), "invalid"),
        "damaged cache: %s", ncc_dev_error(d));
  CHECK(access(cubin, F_OK) != 0, "damaged cache entry kept");
  ncc_dev_close(d);
  rc = ncc_dev_open(&d, NCC_DEV_CUDA, a, "-lineinfo");
  CHECK(rc == 0, "after a damaged cache: %s", ncc_dev_error(d));
  ncc_dev_close(d);

  /* a compile error is the user's, with NVRTC's log */
  rc = ncc_dev_open(&d, NCC_DEV_CUDA, "NCC_KERNEL void k(float *y) { y[0] = nope; }\n", NULL);
  CHECK(rc == NCC_EUSER && strstr(ncc_dev_error(d), "nope") && strstr(ncc_dev_error(d), "kernels.cu(1)"),
        "compile error: %s", ncc_dev_error(d));
  ncc_dev_close(d);
  (void)loads;
  {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", cache);
  }
  free(src);
  printf("%s: %d failures\n", failures ? "FAILED" : "ok", failures);
  return failures ? 1 : 0;
}
