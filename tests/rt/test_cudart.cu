/* test_cudart.cu — the cudart backend (ncc_cudart.h), built whole by nvcc with
 * kernels.cu: it registers itself with libnccrt at load time.  Without a GPU,
 * opening a device must fail with "no CUDA device answers: <reason>" and the
 * emulator must be refused (this build has no CPU kernels).  With a GPU, the
 * kernels run through ncc_launch/ncc_sgemm and are checked against CPU loops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.cu"

#include "check.h"

static ncc_dim3 d3(unsigned x, unsigned y, unsigned z) {
  ncc_dim3 d;
  d.x = x; d.y = y; d.z = z;
  return d;
}

static void on_gpu(ncc_dev *d) {
  int n = 100003, inner = 7, ch = 13, i, bad = 0, M = 37, N = 29, K = 51;
  float *x = (float *)malloc(sizeof(float) * n), *y = (float *)malloc(sizeof(float) * n), b[13];
  float *dx, *dy, *db, *A, *B, *C, *dA, *dB, *dC, *R;
  void *args[6];
  for (i = 0; i < n; i++) x[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
  for (i = 0; i < ch; i++) b[i] = (float)i / 13.0f - 0.5f;
  CHECK(ncc_malloc(d, (void **)&dx, sizeof(float) * n) == 0 && ncc_malloc(d, (void **)&dy, sizeof(float) * n) == 0 &&
            ncc_malloc(d, (void **)&db, sizeof b) == 0,
        "%s", ncc_dev_error(d));
  ncc_memcpy_h2d(d, dx, x, sizeof(float) * n);
  ncc_memcpy_h2d(d, db, b, sizeof b);
  args[0] = &dx; args[1] = &db; args[2] = &dy; args[3] = &n; args[4] = &inner; args[5] = &ch;
  CHECK(ncc_launch(d, &k_bias_relu_desc, d3((n + 255) / 256, 1, 1), d3(256, 1, 1), 0, args) == 0, "%s",
        ncc_dev_error(d));
  CHECK(ncc_sync(d) == 0 && ncc_memcpy_d2h(d, y, dy, sizeof(float) * n) == 0, "%s", ncc_dev_error(d));
  for (i = 0; i < n; i++) {
    float v = x[i] + b[(i / inner) % ch];
    bad += y[i] != (v > 0 ? v : 0);
  }
  CHECK(bad == 0, "bias_relu on the GPU: %d mismatches", bad);
  A = (float *)malloc(sizeof(float) * M * K);
  B = (float *)malloc(sizeof(float) * K * N);
  C = (float *)malloc(sizeof(float) * M * N);
  R = (float *)malloc(sizeof(float) * M * N);
  for (i = 0; i < M * K; i++) A[i] = (float)((i * 31) % 17) / 8.0f - 1.0f;
  for (i = 0; i < K * N; i++) B[i] = (float)((i * 13) % 11) / 5.0f - 1.0f;
  ncc_malloc(d, (void **)&dA, sizeof(float) * M * K);
  ncc_malloc(d, (void **)&dB, sizeof(float) * K * N);
  ncc_malloc(d, (void **)&dC, sizeof(float) * M * N);
  ncc_memcpy_h2d(d, dA, A, sizeof(float) * M * K);
  ncc_memcpy_h2d(d, dB, B, sizeof(float) * K * N);
  for (int r = 0; r < M; r++)
    for (int c = 0; c < N; c++) {
      double s = 0;
      for (int k = 0; k < K; k++) s += (double)A[r * K + k] * B[k * N + c];
      R[r * N + c] = (float)s;
    }
  args[0] = &dA; args[1] = &dB; args[2] = &dC; args[3] = &M; args[4] = &N; args[5] = &K;
  CHECK(ncc_launch(d, &k_sgemm16_desc, d3((N + 15) / 16, (M + 15) / 16, 1), d3(16, 16, 1), 0, args) == 0, "%s",
        ncc_dev_error(d));
  ncc_memcpy_d2h(d, C, dC, sizeof(float) * M * N);
  for (bad = 0, i = 0; i < M * N; i++) bad += fabsf(C[i] - R[i]) > 1e-4f + 1e-5f * fabsf(R[i]);
  CHECK(bad == 0, "tiled sgemm on the GPU: %d mismatches", bad);
  memset(C, 0, sizeof(float) * M * N);
  ncc_memset(d, dC, 0, sizeof(float) * M * N);
  CHECK(ncc_sgemm(d, 0, 0, M, N, K, 1.0f, dA, K, 0, dB, N, 0, 0.0f, dC, N, 0, 1) == 0, "%s", ncc_dev_error(d));
  ncc_memcpy_d2h(d, C, dC, sizeof(float) * M * N);
  for (bad = 0, i = 0; i < M * N; i++) bad += fabsf(C[i] - R[i]) > 1e-4f + 1e-5f * fabsf(R[i]);
  CHECK(bad == 0, "cuBLAS sgemm: %d mismatches", bad);
  ncc_free(d, dx); ncc_free(d, dy); ncc_free(d, db); ncc_free(d, dA); ncc_free(d, dB); ncc_free(d, dC);
  free(x); free(y); free(A); free(B); free(C); free(R);
}

int main(void) {
  ncc_dev *d = NULL;
  int rc = ncc_dev_open(&d, NCC_DEV_AUTO, NULL, NULL);
  if (rc) {
    printf("no GPU: %s\n", ncc_dev_error(d));
    CHECK(rc == NCC_EUSER && strncmp(ncc_dev_error(d), "no CUDA device answers: ", 24) == 0, "message: %s",
          ncc_dev_error(d));
  } else {
    printf("device: %s\n", ncc_dev_name(d));
    CHECK(strncmp(ncc_dev_name(d), "cuda: ", 6) == 0, "name %s", ncc_dev_name(d));
    on_gpu(d);
  }
  ncc_dev_close(d);
  d = NULL;
  rc = ncc_dev_open(&d, NCC_DEV_EMU, NULL, NULL);
  CHECK(rc == NCC_EUSER && strstr(ncc_dev_error(d), "built for a GPU (nvcc)"), "EMU in an nvcc build: %s",
        ncc_dev_error(d));
  ncc_dev_close(d);
  printf("%s: %d failures\n", failures ? "FAILED" : "ok", failures);
  return failures ? 1 : 0;
}
