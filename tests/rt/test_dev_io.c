/* test_dev_io.c — the device interface and the file formats of libnccrt:
 * device choice (CUDA without a GPU must fail clearly, AUTO falls back to the
 * emulator), memory calls, ncc_sgemm against a naive loop (all transposes,
 * batched), the arena; safetensors and .npy round trips and every malformed
 * case we know of, each must be NCC_EUSER with a message naming the file and
 * the fault.  With an argument DIR it also reads DIR/torch.safetensors and
 * DIR/expect.npy written by gen_torch_files.py (PyTorch and NumPy as the
 * independent writers) and compares them value for value.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ncc_rt.h"

#include "check.h"

static char tmpdir[256];
static int skipped;   /* a check could not run: exit 77 (ctest: skipped) unless something failed */
static unsigned rng = 777;
static float frand(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* This library is the emulation build: NCC_DEV_CUDA without kernel source
 * fails either way, saying why -- no GPU, or a GPU that this build cannot use.
 * With kernel source (the jit backend) it must then fail, or run, accordingly. */
static void test_devices(void) {
  ncc_dev *d = NULL;
  int gpu;
  int rc = ncc_dev_open(&d, NCC_DEV_CUDA, NULL, NULL);
  CHECK(rc == NCC_EUSER, "CUDA from an emulation build: rc %d", rc);
  gpu = strncmp(ncc_dev_error(d), "a CUDA device answers, but this model was built for CPU emulation", 66) == 0;
  CHECK(gpu || strncmp(ncc_dev_error(d), "no CUDA device answers: ", 24) == 0, "message: %s", ncc_dev_error(d));
  printf("NCC_DEV_CUDA: %s\n", ncc_dev_error(d));
  ncc_dev_close(d);
  d = NULL;
  rc = ncc_dev_open(&d, NCC_DEV_CUDA, "extern \"C\" __global__ void k(){}", NULL);
  if (gpu && rc && strstr(ncc_dev_error(d), "cannot load NVRTC")) {
    printf("skipped: jit with a GPU: %s\n", ncc_dev_error(d));
    skipped = 1;
  } else if (gpu) {
    CHECK(rc == 0 && strncmp(ncc_dev_name(d), "cuda: ", 6) == 0, "jit with a GPU: %s", ncc_dev_error(d));
    printf("jit with a GPU: %s\n", rc ? ncc_dev_error(d) : ncc_dev_name(d));
  } else {
    CHECK(rc == NCC_EUSER && strstr(ncc_dev_error(d), "no CUDA device answers: "), "jit: %s", ncc_dev_error(d));
    printf("jit without GPU: %s\n", ncc_dev_error(d));
  }
  ncc_dev_close(d);
  d = NULL;
  rc = ncc_dev_open(&d, NCC_DEV_EMU, "x", NULL);
  CHECK(rc == NCC_EUSER && strstr(ncc_dev_error(d), "built for a GPU"), "emu with jit source: %s", ncc_dev_error(d));
  ncc_dev_close(d);
  d = NULL;
  rc = ncc_dev_open(&d, 7, NULL, NULL);
  CHECK(rc != 0, "kind 7 accepted");
  ncc_dev_close(d);
  d = NULL;
  rc = ncc_dev_open(&d, NCC_DEV_AUTO, NULL, NULL);
  CHECK(rc == 0 && ncc_dev_is_emu(d), "AUTO of an emu build: %s", ncc_dev_error(d));
  printf("AUTO: %s\n", ncc_dev_name(d));
  ncc_dev_close(d);
  CHECK(strlen(ncc_dev_error(NULL)) > 0, "error of NULL device");
}

static void test_memory(ncc_dev *d) {
  void *p = NULL, *q = NULL, *arena = NULL, *ptrs[3];
  size_t offs[3] = {0, 256, 1024}, sizes[3] = {200, 700, 16};
  char h[1024], g[1024];
  int i;
  for (i = 0; i < 1024; i++) h[i] = (char)i;
  CHECK(ncc_malloc(d, &p, 1024) == 0 && ((uintptr_t)p & 255) == 0, "malloc alignment");
  CHECK(ncc_malloc(d, &q, 1024) == 0, "malloc");
  {   /* staging memory: malloc under emulation, usable and freed */
    void *hp = NULL;
    CHECK(ncc_host_alloc(d, &hp, 1024) == 0 && hp != NULL, "host_alloc");
    if (hp) memset(hp, 7, 1024);
    CHECK(ncc_host_free(d, hp) == 0 && ncc_host_free(d, NULL) == 0, "host_free");
    CHECK(ncc_host_alloc(d, NULL, 16) != 0, "host_alloc without a pointer is refused");
  }
  CHECK(ncc_memcpy_h2d(d, p, h, 1024) == 0 && ncc_memcpy_d2d(d, q, p, 1024) == 0 && ncc_memcpy_d2h(d, g, q, 1024) == 0,
        "memcpy");
  CHECK(memcmp(g, h, 1024) == 0, "memcpy round trip");
  CHECK(ncc_memset(d, q, 0x5a, 100) == 0 && ncc_memcpy_d2h(d, g, q, 1024) == 0 && g[99] == 0x5a && g[100] == h[100],
        "memset");
  CHECK(ncc_sync(d) == 0, "sync");
  ncc_free(d, p);
  ncc_free(d, q);
  CHECK(ncc_alloc_buffers(d, 3, offs, sizes, ptrs, &arena) == 0, "alloc_buffers: %s", ncc_dev_error(d));
  CHECK((char *)ptrs[1] - (char *)ptrs[0] == 256 && (char *)ptrs[2] - (char *)ptrs[0] == 1024, "arena offsets");
  memset(ptrs[2], 1, 16);
  CHECK(ncc_free_buffers(d, arena) == 0, "free_buffers");
}

static void naive(int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc) {
  int i, j, l;
  for (i = 0; i < m; i++)
    for (j = 0; j < n; j++) {
      double s = 0;
      for (l = 0; l < k; l++) s += (double)(ta ? A[l * lda + i] : A[i * lda + l]) * (tb ? B[j * ldb + l] : B[l * ldb + j]);
      C[i * ldc + j] = (float)(alpha * s + beta * C[i * ldc + j]);
    }
}

/* ncc_gemm_ex at NCC_GEMM_FP16 rounds both operands to FP16 (to nearest
 * even): the naive loop gets operands the compiler's _Float16 rounded */
static float round_prec(int prec, float x) {
#ifdef __FLT16_MAX__
  if (prec == NCC_GEMM_FP16) return (float)(_Float16)x;
#endif
  return x;
}

static void test_sgemm(ncc_dev *d) {
  int ta, tb, m = 23, n = 17, k = 31, batch = 3, b, i, bad = 0, prec;
#ifdef __FLT16_MAX__
  const int nprec = 2;
#else
  const int nprec = 1;
#endif
  for (prec = 0; prec < nprec; prec++)
  for (ta = 0; ta < 2; ta++)
    for (tb = 0; tb < 2; tb++) {
      int gp = prec ? NCC_GEMM_FP16 : NCC_GEMM_FP32;
      int lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n + 3;
      long long sa = (long long)lda * (ta ? k : m), sb = (long long)ldb * (tb ? n : k), sc = (long long)ldc * m;
      float *A = malloc(sizeof(float) * sa * batch), *B = malloc(sizeof(float) * sb * batch);
      float *C = malloc(sizeof(float) * sc * batch), *R = malloc(sizeof(float) * sc * batch);
      for (i = 0; i < sa * batch; i++) A[i] = frand();
      for (i = 0; i < sb * batch; i++) B[i] = frand();
      for (i = 0; i < sc * batch; i++) C[i] = R[i] = frand();
      if (gp == NCC_GEMM_FP32)
        CHECK(ncc_sgemm(d, ta, tb, m, n, k, 0.5f, A, lda, sa, B, ldb, sb, 0.25f, C, ldc, sc, batch) == 0, "%s",
              ncc_dev_error(d));
      else
        CHECK(ncc_gemm_ex(d, gp, ta, tb, m, n, k, 0.5f, A, lda, sa, B, ldb, sb, 0.25f, C, ldc, sc, batch) == 0, "%s",
              ncc_dev_error(d));
      for (i = 0; i < sa * batch; i++) A[i] = round_prec(gp, A[i]);   /* the reference's operands */
      for (i = 0; i < sb * batch; i++) B[i] = round_prec(gp, B[i]);
      for (b = 0; b < batch; b++) naive(ta, tb, m, n, k, 0.5f, A + b * sa, lda, B + b * sb, ldb, 0.25f, R + b * sc, ldc);
      for (i = 0; i < sc * batch; i++)
        if (fabsf(C[i] - R[i]) > 1e-5f + 1e-5f * fabsf(R[i])) bad++;
      free(A); free(B); free(C); free(R);
    }
  CHECK(bad == 0, "sgemm / gemm_ex at fp16: %d mismatches against the naive loop", bad);
  {
    float x = 0;
    CHECK(ncc_gemm_ex(d, 7, 0, 0, 1, 1, 1, 1, &x, 1, 0, &x, 1, 0, 0, &x, 1, 0, 1) == NCC_EINTERNAL &&
              strstr(ncc_dev_error(d), "unknown precision"),
          "gemm_ex: precision 7 accepted: %s", ncc_dev_error(d));
  }
  {
    float x = 0;
    CHECK(ncc_sgemm(d, 0, 0, 4, 4, 4, 1, &x, 2, 0, &x, 4, 0, 0, &x, 4, 0, 1) == NCC_EINTERNAL &&
              strstr(ncc_dev_error(d), "invalid arguments"),
          "bad lda accepted: %s", ncc_dev_error(d));
  }
}

/* ---------------------------------------------------------------- files */
static void path_of(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", tmpdir, name); }

static void write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) { perror(path); exit(1); }
  if (n) fwrite(p, 1, n, f);
  fclose(f);
}

/* a safetensors image from a JSON header and a data area */
static void write_st(const char *path, const char *json, size_t datalen, long long lie) {
  size_t hl = strlen(json), i;
  unsigned char *b = calloc(1, 8 + hl + datalen);
  unsigned long long L = lie >= 0 ? (unsigned long long)lie : hl;
  for (i = 0; i < 8; i++) b[i] = (unsigned char)(L >> (8 * i));
  memcpy(b + 8, json, hl);
  write_file(path, b, 8 + hl + datalen);
  free(b);
}

static ncc_tensor_info ti(const char *name, int rank, int64_t a, int64_t b) {
  ncc_tensor_info t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.dtype = NCC_F32;
  t.rank = rank;
  t.shape[0] = a;
  t.shape[1] = b;
  return t;
}

static void expect_load_error(ncc_dev *d, const char *path, const ncc_tensor_info *p, int n, const char *what1,
                              const char *what2) {
  char err[2048];
  float buf[4][64];
  void *ptrs[4] = {buf[0], buf[1], buf[2], buf[3]};
  int rc = ncc_load_safetensors(d, path, p, n, ptrs, err, sizeof err);
  CHECK(rc == NCC_EUSER, "%s: rc %d (want NCC_EUSER)", path, rc);
  CHECK(rc && strstr(err, path) && strstr(err, what1) && (!what2 || strstr(err, what2)), "%s: message '%s' lacks '%s'",
        path, err, what1);
}

static void test_safetensors(ncc_dev *d) {
  char path[512], err[2048];
  ncc_tensor_info t[3];
  float w[6] = {1, -2, 3.5f, 4, 5, 6}, bias[2] = {0.25f, -0.5f};
  int32_t steps[1] = {42};
  const void *hp[3];
  float gw[6], gb[2];
  int32_t gs[1];
  void *dp[3];
  int rc;
  t[0] = ti("fc.weight", 2, 2, 3);
  t[1] = ti("fc.bias", 1, 2, 0);
  t[2] = ti("__step__", 1, 1, 0);
  t[2].dtype = NCC_I32;
  hp[0] = w; hp[1] = bias; hp[2] = steps;
  path_of(path, sizeof path, "rt.safetensors");
  rc = ncc_save_safetensors(path, t, 3, hp, err, sizeof err);
  CHECK(rc == 0, "save: %s", err);
  dp[0] = gw; dp[1] = gb; dp[2] = gs;
  rc = ncc_load_safetensors(d, path, t, 3, dp, err, sizeof err);
  CHECK(rc == 0, "load: %s", err);
  CHECK(memcmp(gw, w, sizeof w) == 0 && memcmp(gb, bias, sizeof bias) == 0 && gs[0] == 42, "round trip differs");
  {
    /* no temp file is left beside it */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp >/dev/null", tmpdir);
    CHECK(system(cmd) != 0, "a temporary file was left in %s", tmpdir);
  }

  /* malformed files */
  path_of(path, sizeof path, "short.safetensors");
  write_file(path, "abc", 3);
  expect_load_error(d, path, t, 2, "shorter than the 8-byte header", NULL);
  path_of(path, sizeof path, "lying.safetensors");
  write_st(path, "{}", 0, 1000);
  expect_load_error(d, path, t, 2, "claims 1000 bytes", NULL);
  path_of(path, sizeof path, "badjson.safetensors");
  write_st(path, "{\"fc.weight\": {\"dtype\": \"F32\", ", 0, -1);
  expect_load_error(d, path, t, 2, "not valid JSON", NULL);
  path_of(path, sizeof path, "notobj.safetensors");
  write_st(path, "[1,2]", 0, -1);
  expect_load_error(d, path, t, 2, "not a JSON object", NULL);
  path_of(path, sizeof path, "range.safetensors");
  write_st(path, "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                 "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}", 24, -1);
  expect_load_error(d, path, t, 2, "outside the data area", "fc.bias");
  path_of(path, sizeof path, "dtype.safetensors");
  write_st(path, "{\"fc.weight\":{\"dtype\":\"F99\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, -1);
  expect_load_error(d, path, t, 2, "unknown dtype \"F99\"", NULL);
  path_of(path, sizeof path, "size.safetensors");
  write_st(path, "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24, -1);
  expect_load_error(d, path, t, 2, "20 bytes of data for 6 elements", NULL);
  path_of(path, sizeof path, "overlap.safetensors");
  write_st(path, "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                 "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}", 24, -1);
  expect_load_error(d, path, t, 2, "overlap", NULL);
  path_of(path, sizeof path, "nofield.safetensors");
  write_st(path, "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,3]}}", 24, -1);
  expect_load_error(d, path, t, 2, "data_offsets", NULL);
  path_of(path, sizeof path, "negshape.safetensors");
  write_st(path, "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,24]}}", 24, -1);
  expect_load_error(d, path, t, 2, "shape[1] is not a non-negative integer", NULL);
  path_of(path, sizeof path, "dup.safetensors");
  write_st(path, "{\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16, -1);
  expect_load_error(d, path, t, 2, "appears twice", NULL);
  /* all mismatches in one message: missing fc.bias, extra x.y, wrong shape of fc.weight;
   * bn.num_batches_tracked is ignored */
  path_of(path, sizeof path, "mismatch.safetensors");
  write_st(path, "{\"__metadata__\":{\"format\":\"pt\"},"
                 "\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,24]},"
                 "\"x.y\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[24,28]},"
                 "\"z.w\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[28,32]},"
                 "\"bn.num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[32,40]}}", 40, -1);
  {
    char e2[2048];
    float buf[2][64];
    void *ptrs[2] = {buf[0], buf[1]};
    rc = ncc_load_safetensors(d, path, t, 2, ptrs, e2, sizeof e2);
    CHECK(rc == NCC_EUSER && strstr(e2, "missing: 'fc.bias'") && strstr(e2, "unexpected: 'x.y', 'z.w'") &&
              strstr(e2, "'fc.weight' is [3, 2] in the file, the model wants [2, 3]") &&
              !strstr(e2, "num_batches_tracked") && strstr(e2, path),
          "mismatch message: %s", e2);
    printf("mismatch message: %s\n", e2);
  }
  {
    /* integer parameters: I64 in the file into an int8 parameter, range-checked */
    ncc_tensor_info q = ti("q", 1, 3, 0);
    int64_t v[3] = {1, -2, 100};
    int8_t got[3] = {0, 0, 0};
    void *gp[1] = {got};
    FILE *f;
    const char *js = "{\"q\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[0,24]}}";
    unsigned long long L = strlen(js);
    q.dtype = NCC_I8;
    path_of(path, sizeof path, "int8.safetensors");
    f = fopen(path, "wb");
    fwrite(&L, 8, 1, f);
    fwrite(js, 1, L, f);
    fwrite(v, 8, 3, f);
    fclose(f);
    rc = ncc_load_safetensors(d, path, &q, 1, gp, err, sizeof err);
    CHECK(rc == 0 && got[0] == 1 && got[1] == -2 && got[2] == 100, "I64 -> int8: %s", err);
    v[2] = 300;
    f = fopen(path, "wb");
    fwrite(&L, 8, 1, f);
    fwrite(js, 1, L, f);
    fwrite(v, 8, 3, f);
    fclose(f);
    rc = ncc_load_safetensors(d, path, &q, 1, gp, err, sizeof err);
    CHECK(rc == NCC_EUSER && strstr(err, "element 2 does not fit in int8"), "300 -> int8: %s", err);
  }
  path_of(path, sizeof path, "does-not-exist.safetensors");
  expect_load_error(d, path, t, 2, "cannot open", NULL);
  /* a failed save leaves the old file alone */
  {
    ncc_tensor_info bad = ti("", 1, 2, 0);
    path_of(path, sizeof path, "rt.safetensors");
    rc = ncc_save_safetensors(path, &bad, 1, hp, err, sizeof err);
    CHECK(rc == NCC_EUSER, "empty name accepted");
    rc = ncc_load_safetensors(d, path, t, 3, dp, err, sizeof err);
    CHECK(rc == 0, "old file damaged by a failed save: %s", err);
  }
}

static void expect_npy_error(const char *name, const void *bytes, size_t n, const char *what) {
  char path[512], err[1024];
  int dt, rank;
  int64_t shape[8];
  void *data = NULL;
  int rc;
  path_of(path, sizeof path, name);
  if (bytes) write_file(path, bytes, n);
  rc = ncc_npy_read(path, &dt, &rank, shape, &data, err, sizeof err);
  CHECK(rc == NCC_EUSER && strstr(err, path) && strstr(err, what), "%s: rc %d, message '%s' lacks '%s'", name, rc,
        rc ? err : "", what);
  free(data);
}

static void npy_image(char *out, size_t *n, int ver, const char *dict, size_t datalen) {
  size_t dl = strlen(dict), pre = ver == 1 ? 10 : 12;
  memcpy(out, "\x93NUMPY", 6);
  out[6] = (char)ver;
  out[7] = 0;
  out[8] = (char)(dl & 0xff);
  out[9] = (char)(dl >> 8);
  if (ver != 1) { out[10] = 0; out[11] = 0; }
  memcpy(out + pre, dict, dl);
  memset(out + pre + dl, 0, datalen);
  *n = pre + dl + datalen;
}

static void test_npy(void) {
  char path[512], err[1024], img[1024];
  int64_t shape[3] = {2, 3, 4}, gs[8];
  float x[24];
  int i, dt, rank, rc;
  void *data = NULL;
  size_t n;
  for (i = 0; i < 24; i++) x[i] = frand();
  path_of(path, sizeof path, "x.npy");
  rc = ncc_npy_write(path, NCC_F32, 3, shape, x, err, sizeof err);
  CHECK(rc == 0, "npy write: %s", err);
  rc = ncc_npy_read(path, &dt, &rank, gs, &data, err, sizeof err);
  CHECK(rc == 0 && dt == NCC_F32 && rank == 3 && gs[0] == 2 && gs[1] == 3 && gs[2] == 4 && data &&
            memcmp(data, x, sizeof x) == 0,
        "npy round trip: %s", rc ? err : "data differs");
  free(data);
  data = NULL;
  {
    int32_t v[5] = {1, -2, 3, 2147483647, -5};
    int64_t s1[1] = {5};
    path_of(path, sizeof path, "i.npy");
    CHECK(ncc_npy_write(path, NCC_I32, 1, s1, v, err, sizeof err) == 0, "%s", err);
    rc = ncc_npy_read(path, &dt, &rank, gs, &data, err, sizeof err);
    CHECK(rc == 0 && dt == NCC_I32 && rank == 1 && gs[0] == 5 && memcmp(data, v, sizeof v) == 0, "i32 round trip");
    free(data);
    data = NULL;
    path_of(path, sizeof path, "scalar.npy");
    CHECK(ncc_npy_write(path, NCC_F32, 0, s1, x, err, sizeof err) == 0, "%s", err);
    rc = ncc_npy_read(path, &dt, &rank, gs, &data, err, sizeof err);
    CHECK(rc == 0 && rank == 0 && memcmp(data, x, 4) == 0, "scalar round trip: %s", err);
    free(data);
    data = NULL;
  }
  expect_npy_error("empty.npy", "", 0, "not a .npy file");
  expect_npy_error("magic.npy", "\x93NUMPX\x01\x00\x02\x00{}", 12, "not a .npy file");
  npy_image(img, &n, 4, "{}", 0);
  expect_npy_error("ver.npy", img, n, "version 4.0");
  npy_image(img, &n, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20);
  expect_npy_error("short.npy", img, n, "data is 20 bytes, shape and dtype <f4 want 24");
  npy_image(img, &n, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 28);
  expect_npy_error("long.npy", img, n, "data is 28 bytes");
  npy_image(img, &n, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8);
  expect_npy_error("bigendian.npy", img, n, "dtype '>f4' is not supported");
  npy_image(img, &n, 1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16);
  expect_npy_error("complex.npy", img, n, "dtype '<c8' is not supported");
  npy_image(img, &n, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8);
  expect_npy_error("fortran.npy", img, n, "Fortran order");
  npy_image(img, &n, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8);
  expect_npy_error("extra.npy", img, n, "unexpected or repeated key 'x'");
  npy_image(img, &n, 1, "{'descr': '<f4', 'shape': (2,), }", 8);
  expect_npy_error("nofortran.npy", img, n, "lacks 'fortran_order'");
  npy_image(img, &n, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,", 8);
  expect_npy_error("unterminated.npy", img, n, "not a valid dict literal");
  npy_image(img, &n, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8);
  expect_npy_error("negative.npy", img, n, "not a valid dict literal");
  memcpy(img, "\x93NUMPY\x01\x00\xff\x00{", 11);
  expect_npy_error("hlen.npy", img, 11, "header claims 255 bytes");
  expect_npy_error("does-not-exist-dir/x.npy", NULL, 0, "cannot open");
  {
    /* i8 and f8 are converted, with a range check for i8 */
    long long big[2] = {1, 1LL << 40};
    double dv[2] = {0.1, -3};
    char buf2[256];
    npy_image(buf2, &n, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", 0);
    memcpy(buf2 + n, big, 16);
    expect_npy_error("i8.npy", buf2, n + 16, "does not fit in int32");
    npy_image(buf2, &n, 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 0);
    memcpy(buf2 + n, dv, 16);
    path_of(path, sizeof path, "f8.npy");
    write_file(path, buf2, n + 16);
    rc = ncc_npy_read(path, &dt, &rank, gs, &data, err, sizeof err);
    CHECK(rc == 0 && dt == NCC_F32 && ((float *)data)[0] == 0.1f && ((float *)data)[1] == -3.0f, "f8 v2: %s", err);
    free(data);
    data = NULL;
  }
  rc = ncc_npy_write("/nonexistent-dir/x.npy", NCC_F32, 3, shape, x, err, sizeof err);
  CHECK(rc == NCC_EUSER && strstr(err, "/nonexistent-dir/x.npy"), "write to a missing dir: %s", err);
}

/* half -> float for small exact integers (enough for the test data) */
static double ncc_test_h2f(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
  return h & 0x8000 ? -v : v;
}

/* files written by PyTorch and NumPy (gen_torch_files.py) */
static void test_torch_files(ncc_dev *d, const char *dir) {
  char st[512], np[512], err[4096];
  int dt, rank, rc, i, bad = 0;
  int64_t shape[8];
  void *expect = NULL;
  ncc_tensor_info t[4];
  float *got[4];
  void *ptrs[4];
  static const char *names[4] = {"a.f32", "b.f16", "c.bf16", "d.f64"};
  snprintf(st, sizeof st, "%s/torch.safetensors", dir);
  snprintf(np, sizeof np, "%s/expect.npy", dir);
  rc = ncc_npy_read(np, &dt, &rank, shape, &expect, err, sizeof err);
  CHECK(rc == 0 && dt == NCC_F32 && rank == 2 && shape[0] == 4 && shape[1] == 50, "expect.npy: %s", err);
  if (rc) return;
  for (i = 0; i < 4; i++) {
    t[i] = ti(names[i], 2, 5, 10);
    got[i] = malloc(sizeof(float) * 50);
    ptrs[i] = got[i];
  }
  rc = ncc_load_safetensors(d, st, t, 4, ptrs, err, sizeof err);
  CHECK(rc == 0, "torch.safetensors: %s", err);
  for (i = 0; !rc && i < 4; i++) bad += memcmp(got[i], (float *)expect + 50 * i, 200) != 0;
  CHECK(bad == 0, "%d tensors differ from PyTorch's float32 conversion", bad);
  printf("PyTorch-written safetensors (f32, f16, bf16, f64): %s\n", bad || rc ? "MISMATCH" : "all equal");
  for (i = 0; i < 4; i++) free(got[i]);
  free(expect);
  {
    /* NumPy's own .npy files: versions 2.0 and 3.0, int64, int8, float64 */
    static const struct { const char *f; int dt, rank; int64_t s0, s1; } c[5] = {
        {"v2.npy", NCC_I32, 2, 2, 3}, {"v3.npy", NCC_F16, 2, 3, 2}, {"i8.npy", NCC_I32, 1, 6, 0},
        {"i1.npy", NCC_I8, 1, 6, 0},  {"f8.npy", NCC_F32, 1, 6, 0}};
    for (i = 0; i < 5; i++) {
      char p[600];
      void *data = NULL;
      int k, ok = 1;
      snprintf(p, sizeof p, "%s/%s", dir, c[i].f);
      rc = ncc_npy_read(p, &dt, &rank, shape, &data, err, sizeof err);
      CHECK(rc == 0 && dt == c[i].dt && rank == c[i].rank && shape[0] == c[i].s0 && (rank < 2 || shape[1] == c[i].s1),
            "%s: rc %d dt %d rank %d: %s", c[i].f, rc, dt, rank, rc ? err : "");
      for (k = 0; rc == 0 && k < 6; k++) {
        double v = dt == NCC_I32 ? ((int32_t *)data)[k] : dt == NCC_I8 ? ((int8_t *)data)[k]
                 : dt == NCC_F16 ? ncc_test_h2f(((uint16_t *)data)[k]) : ((float *)data)[k];
        double want = i == 0 || i == 1 ? k : i == 2 || i == 3 ? k - 3 : (float)(-1.0 + 0.4 * k);
        if (v != want) ok = 0;
      }
      CHECK(rc || ok, "%s: values differ from NumPy's", c[i].f);
      free(data);
    }
  }
}

int main(int argc, char **argv) {
  ncc_dev *d;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/ncc-rt-test-XXXXXX");
  if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
  test_devices();
  if (ncc_dev_open(&d, NCC_DEV_EMU, NULL, NULL)) { fprintf(stderr, "%s\n", ncc_dev_error(d)); return 1; }
  test_memory(d);
  test_sgemm(d);
  test_safetensors(d);
  test_npy();
  if (argc > 1) test_torch_files(d, argv[1]);
  ncc_dev_close(d);
  {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  }
  printf("%s: %d failures\n", failures ? "FAILED" : "ok", failures);
  return failures ? 1 : skipped ? 77 : 0;
}
