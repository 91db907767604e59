/* bench_emu.c [--quick] — the emulator's two costs, as docs/emulator.md lists
 * them ("Measured costs"): ns per element of a barrier-free kernel (the
 * loop-over-threads fast path, next to a plain C loop doing the same), and ns
 * per thread per barrier of a kernel run as fibers.  Set NCC_EMU_THREADS=1
 * for per-core figures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ncc_kernel.h"

NCC_KERNEL void b_bias_relu(const float *__restrict__ x, const float *__restrict__ b, float *__restrict__ y, int n,
                            int c) {
  int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    float v = x[i] + b[i % c];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

/* nbar barriers, almost no work between them: the switch cost alone */
NCC_KERNEL void b_barriers(float *__restrict__ y, int nbar) {
  __shared__ float s[1024];
  int k;
  s[threadIdx.x] = 0.0f;
  for (k = 0; k < nbar; k++) {
    s[threadIdx.x] += 1.0f;
    __syncthreads();
  }
  y[blockIdx.x * blockDim.x + threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}

#include "ncc_rt.h"
NCC_KERNEL_DESC(b_bias_relu, 0, (NCC_ARG(const float *, 0), NCC_ARG(const float *, 1), NCC_ARG(float *, 2),
                                 NCC_ARG(int, 3), NCC_ARG(int, 4)))
NCC_KERNEL_DESC(b_barriers, NCC_KF_BARRIER, (NCC_ARG(float *, 0), NCC_ARG(int, 1)))

static ncc_dim3 d3(unsigned x) {
  ncc_dim3 d;
  d.x = x; d.y = 1; d.z = 1;
  return d;
}

int main(int argc, char **argv) {
  int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  int n = quick ? 1 << 14 : 1 << 24, c = 64, i, reps = quick ? 1 : 5, r, nbar = quick ? 4 : 200, blocks = quick ? 2 : 16;
  float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *z = malloc(sizeof(float) * n), b[64];
  ncc_dev *d;
  double t, best = 1e30, bestc = 1e30, bestf = 1e30;
  void *args[5];
  const float *xa = x, *ba = b;
  float *ya = y;
  if (ncc_dev_open(&d, NCC_DEV_EMU, NULL, NULL)) { fprintf(stderr, "%s\n", ncc_dev_error(d)); return 1; }
  for (i = 0; i < n; i++) x[i] = (float)(i % 17) - 8.0f;
  for (i = 0; i < c; i++) b[i] = 0.5f;
  args[0] = &xa; args[1] = &ba; args[2] = &ya; args[3] = &n; args[4] = &c;
  for (r = 0; r < reps; r++) {
    t = ncc_now();
    if (ncc_launch(d, &b_bias_relu_desc, d3((unsigned)(n + 255) / 256), d3(256), 0, args)) {
      fprintf(stderr, "%s\n", ncc_dev_error(d));
      return 1;
    }
    t = ncc_now() - t;
    if (t < best) best = t;
    t = ncc_now();
    for (i = 0; i < n; i++) {
      float v = x[i] + b[i % c];
      z[i] = v > 0.0f ? v : 0.0f;
    }
    t = ncc_now() - t;
    if (t < bestc) bestc = t;
  }
  if (memcmp(y, z, sizeof(float) * n) != 0) { fprintf(stderr, "bias_relu result differs from the C loop\n"); return 1; }
  printf("%s\n", ncc_dev_name(d));
  printf("barrier-free bias+relu: %.2f ns/element (%d elements; plain C loop on one thread: %.2f ns/element)\n",
         1e9 * best / n, n, 1e9 * bestc / n);
  {
    int threads = 256;
    args[0] = &ya;
    args[1] = &nbar;
    for (r = 0; r < reps; r++) {
      t = ncc_now();
      if (ncc_launch(d, &b_barriers_desc, d3((unsigned)blocks), d3((unsigned)threads), 0, args)) {
        fprintf(stderr, "%s\n", ncc_dev_error(d));
        return 1;
      }
      t = ncc_now() - t;
      if (t < bestf) bestf = t;
    }
    for (i = 0; i < blocks * threads; i++)
      if (y[i] != (float)nbar) { fprintf(stderr, "barrier kernel wrong at %d: %f\n", i, y[i]); return 1; }
    printf("fibers: %.2f ns/thread/barrier (%d blocks x %d threads x %d barriers, wall time over %d OS threads)\n",
           1e9 * bestf / ((double)blocks * threads * (nbar + 1)), blocks, threads, nbar, ncc_emu_threads());
  }
  ncc_dev_close(d);
  free(x); free(y); free(z);
  return 0;
}
