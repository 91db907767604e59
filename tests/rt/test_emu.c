/* test_emu.c — the emulator against plain C loops: the kernels of kernels.cu
 * run through ncc_launch on the emu device, over several worker threads, in
 * both fiber orders, and every result is checked against a reference written
 * as an ordinary loop (bit-exact where the order of additions is the same).
 * Also the emulator's error paths: a forgotten barrier, a return before a
 * barrier, a barrier in an unflagged kernel, checked mode catching a
 * one-past-end write (in a child process: it must exit 2 with a report).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <float.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kernels.cu"

#include "check.h"

/* the order NCC_FIBER_ORDER asked for, restored after tests that set both */
static int default_order(void) {
  const char *e = getenv("NCC_FIBER_ORDER");
  return e && strcmp(e, "reverse") == 0;
}

static ncc_dim3 d3(unsigned x, unsigned y, unsigned z) {
  ncc_dim3 d;
  d.x = x; d.y = y; d.z = z;
  return d;
}

static unsigned rng = 12345;
static float frand(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* f16 references independent of ncc_emu.h: the value of a bit pattern by
 * ldexp, and float -> f16 by a binary search over the (monotonic) positive
 * patterns, nearest with ties to even, >= 65520 to infinity.  gcc's _Float16
 * (where the compiler has it) is a second, independent oracle. */
static double ref_h2d(unsigned h) {
  int e = (int)(h >> 10) & 31, m = (int)(h & 1023);
  double v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
  return h & 0x8000 ? -v : v;
}
static unsigned short ref_f2h(float f) {
  double a = fabs((double)f);
  unsigned sign = signbit(f) ? 0x8000u : 0u, lo = 0, hi = 0x7bff;
  if (a >= 65520.0) return (unsigned short)(sign | 0x7c00u);
  while (lo < hi) {   /* largest pattern with value <= a */
    unsigned mid = (lo + hi + 1) / 2;
    if (ref_h2d(mid) <= a) lo = mid; else hi = mid - 1;
  }
  if (lo < 0x7bff || ref_h2d(lo) < a) {
    double up = lo == 0x7bff ? 65536.0 : ref_h2d(lo + 1), dl = a - ref_h2d(lo), du = up - a;
    if (du < dl || (du == dl && (lo & 1))) lo++;
  }
  return (unsigned short)(sign | lo);
}

static void test_bias_relu(ncc_dev *d) {
  int n = 100003, inner = 7, ch = 13, i, bad = 0;
  float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), b[13];
  void *args[6];
  for (i = 0; i < n; i++) x[i] = frand();
  for (i = 0; i < ch; i++) b[i] = frand() * 0.5f;
  {
    const float *xa = x, *ba = b;
    float *ya = y;
    args[0] = &xa; args[1] = &ba; args[2] = &ya; args[3] = &n; args[4] = &inner; args[5] = &ch;
    CHECK(ncc_launch(d, &k_bias_relu_desc, d3((n + 255) / 256, 1, 1), d3(256, 1, 1), 0, args) == 0, "%s",
          ncc_dev_error(d));
  }
  for (i = 0; i < n; i++) {
    float v = x[i] + b[(i / inner) % ch];
    if (y[i] != (v > 0 ? v : 0)) bad++;
  }
  CHECK(bad == 0, "bias_relu: %d mismatches of %d", bad, n);
  free(x);
  free(y);
}

static void test_f16(ncc_dev *d) {
  int n = 65536, i, bad = 0;
  float s = 0.75f;
  __half *x = malloc(sizeof(__half) * n), *y = malloc(sizeof(__half) * n);
  void *args[4];
  const __half *xa = x;
  __half *ya = y;
  for (i = 0; i < n; i++) x[i].x = (unsigned short)i;   /* every f16 bit pattern */
  args[0] = &xa; args[1] = &ya; args[2] = &s; args[3] = &n;
  CHECK(ncc_launch(d, &k_relu_scale_f16_desc, d3(n / 128, 1, 1), d3(128, 1, 1), 0, args) == 0, "%s", ncc_dev_error(d));
  for (i = 0; i < n; i++) {
    float v = (float)ref_h2d((unsigned)i), r;
    unsigned short rb;
    if (v != v) continue;   /* NaN payloads differ between implementations */
    r = fmaxf(v, 0.0f) * s;
    rb = ref_f2h(r);
    if (y[i].x != rb) {
      if (bad++ < 5) fprintf(stderr, "  f16 %04x: got %04x want %04x\n", i, y[i].x, rb);
    }
  }
  CHECK(bad == 0, "relu_scale_f16: %d mismatches of %d", bad, n);
  free(x);
  free(y);
}

/* float -> bf16 (finite f): the nearer of the two bf16 neighbours by a
 * double-precision distance, ties to the even pattern, past the largest to Inf */
static unsigned short ref_f2bf(float f) {
  unsigned u, lo, hi;
  float fl, fh;
  double dl, dh;
  memcpy(&u, &f, 4);
  lo = u & 0xffff0000u;
  hi = lo + 0x10000u;
  memcpy(&fl, &lo, 4);
  memcpy(&fh, &hi, 4);
  dl = fabs((double)f - (double)fl);
  dh = isinf(fh) ? fabs((double)f - ldexp(copysign(1.0, f), 128)) : fabs((double)f - (double)fh);
  return (unsigned short)((dl < dh || (dl == dh && !((lo >> 16) & 1))) ? lo >> 16 : hi >> 16);
}

/* conversions: every half round-trips; random floats round like gcc's _Float16;
 * bf16 rounds to nearest even (checked against a double-precision choice) */
static void test_conversions(void) {
  int i, bad = 0;
  for (i = 0; i < 65536; i++) {
    __half h;
    float f;
    h.x = (unsigned short)i;
    f = __half2float(h);
    if (f != f) continue;
    if (__float2half(f).x != h.x) bad++;
  }
  CHECK(bad == 0, "f16 round trip: %d failures", bad);
  for (bad = 0, i = 0; i < 1000000; i++) {
    unsigned u = (unsigned)rand() ^ ((unsigned)rand() << 16);
    float f;
    unsigned short hb;
    if (i & 1) u = (u & 0x807fffffu) | ((100u + u % 50u) << 23);   /* exponents of the f16 range and edges */
    memcpy(&f, &u, 4);
    if (f != f) continue;
    hb = ref_f2h(f);
#if defined(__FLT16_MAX__)
    {
      _Float16 h = (_Float16)f;
      unsigned short gb;
      memcpy(&gb, &h, 2);
      if (gb != hb) {
        if (bad++ < 5) fprintf(stderr, "  reference disagrees with _Float16 at %a\n", (double)f);
      }
    }
#endif
    if (__float2half(f).x != hb) {
      if (bad++ < 5) fprintf(stderr, "  f32 %a -> f16 got %04x want %04x\n", (double)f, __float2half(f).x, hb);
    }
  }
  CHECK(bad == 0, "f32->f16 against the references: %d failures", bad);
  for (bad = 0, i = 0; i < 2000000; i++) {
    unsigned u = (unsigned)rand() ^ ((unsigned)rand() << 16), lo;
    float f, fl;
    unsigned short want;
    memcpy(&f, &u, 4);
    if (f != f || isinf(f)) continue;
    lo = u & 0xffff0000u;
    memcpy(&fl, &lo, 4);
    want = ref_f2bf(f);
    if (__float2bfloat16(f).x != want) bad++;
    if (__bfloat162float(__float2bfloat16(fl)) != fl) bad++;
  }
  CHECK(bad == 0, "f32->bf16: %d failures", bad);
}

/* ---- ncc_fp16 and ncc_bf16 (--precision=fp16|bf16) through a kernel:
 * every FP16 and BF16 value, the midpoints between neighbours and one float32
 * ulp either side of them (where ties and carries are decided), the overflow
 * edges, zeros, Inf, NaN and a million random floats, against ref_f2h and
 * ref_f2bf: the same bits (NaN: a NaN). */
static float bits_f(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static unsigned f_bits(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}
static void test_round(ncc_dev *d) {
  int cap = 8 * 65536 * 2 + 1000000 + 16, n = 0, i, bad_h = 0, bad_b = 0;
  float *x = malloc(sizeof(float) * cap), *h = malloc(sizeof(float) * cap), *b = malloc(sizeof(float) * cap);
  for (i = 0; i < 65535; i++) {   /* pattern i and i + 1, of either sign */
    double lo = ref_h2d((unsigned)i), hi = ref_h2d((unsigned)i + 1);   /* FP16 neighbours */
    unsigned blo = (unsigned)i << 16, bhi = blo + 0x10000u;            /* BF16 neighbours */
    float fl = bits_f(blo), fh = bits_f(bhi);
    if ((i & 0x7fff) != 0x7fff && lo == lo && hi == hi && !isinf(lo) && !isinf(hi)) {
      float mid = (float)((lo + hi) / 2);   /* exact in float32 (FP16 values have 11 bits) */
      x[n++] = (float)lo;
      x[n++] = mid;
      x[n++] = nextafterf(mid, 0.0f);
      x[n++] = nextafterf(mid, mid > 0 ? INFINITY : -INFINITY);
    }
    if ((i & 0x7fff) != 0x7fff && fl == fl && fh == fh && !isinf(fl) && !isinf(fh)) {
      unsigned lo = blo;
      x[n++] = fl;
      x[n++] = bits_f(lo + 0x8000u);   /* the midpoint */
      x[n++] = bits_f(lo + 0x7fffu);
      x[n++] = bits_f(lo + 0x8001u);
    }
  }
  {
    const float edge[] = {65504.0f, 65519.996f, 65520.0f, 65536.0f, -65520.0f, 1e30f, FLT_MAX, -FLT_MAX,
                          0.0f, -0.0f, INFINITY, -INFINITY, NAN, 2.9802322e-8f, 1e-40f, -5.9604645e-8f};
    for (i = 0; i < (int)(sizeof edge / sizeof edge[0]); i++) x[n++] = edge[i];
  }
  for (i = 0; i < 1000000; i++) {
    unsigned u = (unsigned)rand() ^ ((unsigned)rand() << 16);
    if (i & 1) u = (u & 0x807fffffu) | ((100u + u % 50u) << 23);   /* the FP16 range and its edges */
    x[n++] = bits_f(u);
  }
  {
    const float *xa = x;
    float *ha = h, *ba = b;
    void *args[4];
    args[0] = &xa, args[1] = &ha, args[2] = &ba, args[3] = &n;
    CHECK(ncc_launch(d, &k_round_desc, d3((unsigned)((n + 255) / 256), 1, 1), d3(256, 1, 1), 0, args) == 0, "%s",
          ncc_dev_error(d));
  }
  for (i = 0; i < n; i++) {
    float f = x[i], wh, wb;
    if (f != f) {
      bad_h += h[i] == h[i];
      bad_b += b[i] == b[i];
      continue;
    }
    wh = (float)ref_h2d(ref_f2h(f));
    wb = isinf(f) ? f : bits_f((unsigned)ref_f2bf(f) << 16);
    if (f_bits(h[i]) != f_bits(wh) && bad_h++ < 5)
      fprintf(stderr, "  ncc_fp16(%a) = %a, want %a\n", (double)f, (double)h[i], (double)wh);
    if (f_bits(b[i]) != f_bits(wb) && bad_b++ < 5)
      fprintf(stderr, "  ncc_bf16(%a) = %a, want %a\n", (double)f, (double)b[i], (double)wb);
  }
  CHECK(bad_h == 0, "ncc_fp16: %d of %d values differ from the reference", bad_h, n);
  CHECK(bad_b == 0, "ncc_bf16: %d of %d values differ from the reference", bad_b, n);
  /* the bits the half-width tensor-core tiles hold: those of the same rounding */
  {
    int bad_hb = 0, bad_bb = 0;
    for (i = 0; i < n; i++) {
      float f = x[i];
      if (f != f) continue;
      bad_hb += ncc_f16_bits_to_f32(ncc_fp16_bits(f)) != h[i] || (ncc_fp16_bits(f) & 0x8000u) != (f_bits(h[i]) >> 16 & 0x8000u);
      bad_bb += (unsigned)ncc_bf16_bits(f) << 16 != f_bits(b[i]);
    }
    CHECK(bad_hb == 0, "ncc_fp16_bits: %d of %d values are not the bits of ncc_fp16", bad_hb, n);
    CHECK(bad_bb == 0, "ncc_bf16_bits: %d of %d values are not the bits of ncc_bf16", bad_bb, n);
  }
  printf("ncc_fp16, ncc_bf16: %d values, every bit as the references\n", n);
  free(x);
  free(h);
  free(b);
}

static void ref_sgemm(const float *A, const float *B, float *C, int M, int N, int K) {
  int i, j, k;
  for (i = 0; i < M; i++)
    for (j = 0; j < N; j++) {
      float acc = 0.0f;
      for (k = 0; k < K; k++) acc = fmaf(A[i * K + k], B[k * N + j], acc);
      C[i * N + j] = acc;
    }
}

static void test_sgemm16(ncc_dev *d) {
  static const int shapes[][3] = {{64, 48, 80}, {37, 29, 51}, {1, 1, 1}, {16, 16, 16}};
  int s;
  for (s = 0; s < 4; s++) {
    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], i, bad = 0;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *C = malloc(sizeof(float) * M * N), *R = malloc(sizeof(float) * M * N);
    const float *Aa = A, *Ba = B;
    float *Ca = C;
    void *args[6];
    for (i = 0; i < M * K; i++) A[i] = frand();
    for (i = 0; i < K * N; i++) B[i] = frand();
    args[0] = &Aa; args[1] = &Ba; args[2] = &Ca; args[3] = &M; args[4] = &N; args[5] = &K;
    CHECK(ncc_launch(d, &k_sgemm16_desc, d3((N + 15) / 16, (M + 15) / 16, 1), d3(16, 16, 1), 0, args) == 0, "%s",
          ncc_dev_error(d));
    ref_sgemm(A, B, R, M, N, K);
    for (i = 0; i < M * N; i++) bad += memcmp(&C[i], &R[i], 4) != 0;
    CHECK(bad == 0, "sgemm16 %dx%dx%d: %d of %d differ from the ordered loop", M, N, K, bad, M * N);
    free(A); free(B); free(C); free(R);
  }
}

static float tree_sum(const float *x, int n0, int len) {
  float s[256];
  int t, st;
  for (t = 0; t < 256; t++) s[t] = n0 + t < len ? x[n0 + t] : 0.0f;
  for (st = 128; st > 0; st >>= 1)
    for (t = 0; t < st; t++) s[t] += s[t + st];
  return s[0];
}

/* returns the number of blocks whose sum differs from the tree reference */
static int run_block_sum(ncc_dev *d, const ncc_kernel *k, const float *x, int n, int *rc) {
  int nb = (n + 255) / 256, i, bad = 0;
  float *out = calloc((size_t)nb, sizeof(float));
  float *outa = out;
  void *args[3];
  args[0] = &x; args[1] = &outa; args[2] = &n;
  *rc = ncc_launch(d, k, d3((unsigned)nb, 1, 1), d3(256, 1, 1), 256 * sizeof(float), args);
  for (i = 0; i < nb; i++) bad += out[i] != tree_sum(x, i * 256, n);
  free(out);
  return bad;
}

static void test_reduction_and_race(ncc_dev *d) {
  int n = 256 * 37 + 11, i, rc, order, racy_bad[2];
  float *x = malloc(sizeof(float) * n);
  for (i = 0; i < n; i++) x[i] = frand();
  for (order = 0; order < 2; order++) {
    ncc_emu_set_fiber_order(order);
    CHECK(run_block_sum(d, &k_block_sum_desc, x, n, &rc) == 0 && rc == 0, "block_sum wrong in %s order: %s",
          order ? "reverse" : "forward", ncc_dev_error(d));
    racy_bad[order] = run_block_sum(d, &k_block_sum_racy_desc, x, n, &rc);
    CHECK(rc == 0, "racy launch failed: %s", ncc_dev_error(d));
  }
  ncc_emu_set_fiber_order(default_order());
  printf("missing barrier: %d wrong blocks in forward order, %d in reverse order (of %d)\n", racy_bad[0],
         racy_bad[1], (n + 255) / 256);
  CHECK(racy_bad[0] + racy_bad[1] > 0, "a kernel with a barrier removed was right in both fiber orders");
  free(x);
}

static void test_softmax(ncc_dev *d) {
  int rows = 33, cols = 200, i, j, bad = 0, order;
  float *x = malloc(sizeof(float) * rows * cols), *y = malloc(sizeof(float) * rows * cols);
  for (i = 0; i < rows * cols; i++) x[i] = 4 * frand();
  for (order = 0; order < 2; order++) {
    const float *xa = x;
    float *ya = y;
    void *args[3];
    ncc_emu_set_fiber_order(order);
    args[0] = &xa; args[1] = &ya; args[2] = &cols;
    CHECK(ncc_launch(d, &k_softmax_desc, d3((unsigned)rows, 1, 1), d3(256, 1, 1), 0, args) == 0, "%s",
          ncc_dev_error(d));
    for (i = 0; i < rows; i++) {
      double m = -1e30, s = 0;
      for (j = 0; j < cols; j++) m = fmax(m, x[i * cols + j]);
      for (j = 0; j < cols; j++) s += exp(x[i * cols + j] - m);
      for (j = 0; j < cols; j++) {
        double r = exp(x[i * cols + j] - m) / s;
        if (fabs(y[i * cols + j] - r) > 1e-6 + 1e-5 * fabs(r)) bad++;
      }
    }
  }
  ncc_emu_set_fiber_order(default_order());
  CHECK(bad == 0, "softmax: %d mismatches", bad);
  free(x);
  free(y);
}

static void test_early_return(ncc_dev *d) {
  float x[64] = {0}, out[64];
  const float *xa = x;
  float *oa = out;
  void *args[2];
  int rc;
  args[0] = &xa; args[1] = &oa;
  rc = ncc_launch(d, &k_early_return_desc, d3(3, 1, 1), d3(64, 1, 1), 0, args);
  CHECK(rc == NCC_EINTERNAL, "early return before a barrier not reported (rc %d)", rc);
  CHECK(strstr(ncc_dev_error(d), "k_early_return") && strstr(ncc_dev_error(d), "different numbers of barriers") &&
            strstr(ncc_dev_error(d), "thread (48,0,0) returned after 0"),
        "message: %s", ncc_dev_error(d));
  printf("early return: %s\n", ncc_dev_error(d));
  /* the abandoned fibers must not poison the next launch */
  test_reduction_and_race(d);
}

static void test_unflagged(ncc_dev *d) {
  float y[32];
  float *ya = y;
  void *args[1];
  int rc;
  args[0] = &ya;
  rc = ncc_launch(d, &k_unflagged_barrier_desc, d3(2, 1, 1), d3(32, 1, 1), 0, args);
  CHECK(rc == NCC_EINTERNAL && strstr(ncc_dev_error(d), "not flagged NCC_KF_BARRIER"),
        "barrier in an unflagged kernel not reported: rc %d, %s", rc, ncc_dev_error(d));
}

/* ncc_ldg128: 16 bytes a thread, the lowest address in the low bits of q[0];
 * from an address 16 does not divide, the launch fails naming the kernel */
static void test_ldg128(ncc_dev *d) {
  static unsigned char src[16 * 4 + 16] __attribute__((aligned(16)));
  unsigned dst[16];
  const unsigned char *sa = src;
  unsigned *da = dst;
  int off = 0, rc, i;
  void *args[3] = {&sa, &da, &off};
  for (i = 0; i < (int)sizeof src; i++) src[i] = (unsigned char)(i * 7 + 1);
  rc = ncc_launch(d, &k_ldg128_desc, d3(1, 1, 1), d3(4, 1, 1), 0, args);
  CHECK(rc == 0, "ldg128: rc %d, %s", rc, ncc_dev_error(d));
  for (i = 0; i < 16; i++) {
    unsigned want = (unsigned)src[4 * i] | (unsigned)src[4 * i + 1] << 8 | (unsigned)src[4 * i + 2] << 16 |
                    (unsigned)src[4 * i + 3] << 24;
    CHECK(dst[i] == want, "ldg128: word %d is %08x, want %08x", i, dst[i], want);
  }
  off = 8;
  rc = ncc_launch(d, &k_ldg128_desc, d3(1, 1, 1), d3(4, 1, 1), 0, args);
  CHECK(rc == NCC_EINTERNAL && strstr(ncc_dev_error(d), "k_ldg128") && strstr(ncc_dev_error(d), "not aligned to 16 bytes"),
        "a misaligned 128-bit load not reported: rc %d, %s", rc, ncc_dev_error(d));
}

/* the epilogue's pairs: two floats, 16-bit values or int8 a load and a
 * store, each element where it was; from an odd element (an address the
 * pair's size does not divide) the launch fails naming the kernel */
static void test_pairs(ncc_dev *d) {
  static float f[18] __attribute__((aligned(16))), fo[18] __attribute__((aligned(16)));
  static unsigned short h[18] __attribute__((aligned(16))), ho[18] __attribute__((aligned(16)));
  static signed char b[18] __attribute__((aligned(16))), bo[18] __attribute__((aligned(16)));
  const float *fa = f;
  const unsigned short *ha = h;
  const signed char *ba = b;
  float *foa = fo;
  unsigned short *hoa = ho;
  signed char *boa = bo;
  int off = 0, rc, i;
  void *args[7] = {&fa, &ha, &ba, &foa, &hoa, &boa, &off};
  for (i = 0; i < 18; i++) f[i] = (float)i + 0.5f, h[i] = (unsigned short)(1000 + 7 * i), b[i] = (signed char)(i - 9);
  rc = ncc_launch(d, &k_pairs_desc, d3(1, 1, 1), d3(8, 1, 1), 0, args);
  CHECK(rc == 0, "pairs: rc %d, %s", rc, ncc_dev_error(d));
  for (i = 0; i < 16; i++)
    CHECK(fo[i] == f[i] && ho[i] == h[i] && bo[i] == b[i], "pairs: element %d is %g %u %d, want %g %u %d", i, fo[i],
          ho[i], bo[i], f[i], h[i], b[i]);
  off = 1;
  rc = ncc_launch(d, &k_pairs_desc, d3(1, 1, 1), d3(8, 1, 1), 0, args);
  CHECK(rc == NCC_EINTERNAL && strstr(ncc_dev_error(d), "k_pairs") && strstr(ncc_dev_error(d), "ncc_st2f: 8"),
        "a misaligned pair not reported: rc %d, %s", rc, ncc_dev_error(d));
}

/* the float32 epilogue's stores of four: each float where it was; from an
 * element 16 bytes do not divide the launch fails naming the kernel */
static void test_quads(ncc_dev *d) {
  static float f[20] __attribute__((aligned(16))), fo[20] __attribute__((aligned(16)));
  const float *fa = f;
  float *foa = fo;
  int off = 0, rc, i;
  void *args[3] = {&fa, &foa, &off};
  for (i = 0; i < 20; i++) f[i] = (float)i * 1.25f - 3.0f, fo[i] = 0.0f;
  rc = ncc_launch(d, &k_quads_desc, d3(1, 1, 1), d3(4, 1, 1), 0, args);
  CHECK(rc == 0, "quads: rc %d, %s", rc, ncc_dev_error(d));
  for (i = 0; i < 20; i++)
    CHECK(fo[i] == (i < 16 ? f[i] : 0.0f), "quads: element %d is %g, want %g", i, fo[i], i < 16 ? f[i] : 0.0f);
  off = 2;
  rc = ncc_launch(d, &k_quads_desc, d3(1, 1, 1), d3(4, 1, 1), 0, args);
  CHECK(rc == NCC_EINTERNAL && strstr(ncc_dev_error(d), "k_quads") && strstr(ncc_dev_error(d), "ncc_st4f: 16"),
        "a misaligned store of four not reported: rc %d, %s", rc, ncc_dev_error(d));
}

/* the shared-memory vector loads: 16 (8) bytes, the lowest address in the
 * low bits of the first word; from an address 16 (8) does not divide, the
 * launch fails naming the kernel */
static void test_lds_vec(ncc_dev *d) {
  unsigned short src[80];
  unsigned dst[32];
  const unsigned short *sa = src;
  unsigned *da = dst;
  int off = 0, rc, t, i;
  void *args[3] = {&sa, &da, &off};
  for (i = 0; i < 80; i++) src[i] = (unsigned short)(i * 977 + 5);
  rc = ncc_launch(d, &k_lds_vec_desc, d3(1, 1, 1), d3(4, 1, 1), 0, args);
  CHECK(rc == 0, "lds_vec: rc %d, %s", rc, ncc_dev_error(d));
  for (t = 0; t < 4; t++)
    for (i = 0; i < 8; i++) {
      int v = 8 * t + 2 * (i % 4);   /* x4's word i, x2's word i - 4, lds4's word i - 6 */
      unsigned want = (unsigned)src[v] | (unsigned)src[v + 1] << 16;
      CHECK(dst[8 * t + i] == want, "lds_vec: thread %d word %d is %08x, want %08x", t, i, dst[8 * t + i], want);
    }
  off = 4;   /* 8 bytes in: x2 would do, x4 and lds4 fault */
  rc = ncc_launch(d, &k_lds_vec_desc, d3(1, 1, 1), d3(4, 1, 1), 0, args);
  CHECK(rc == NCC_EINTERNAL && strstr(ncc_dev_error(d), "k_lds_vec") && strstr(ncc_dev_error(d), "does not divide"),
        "a misaligned 128-bit shared load not reported: rc %d, %s", rc, ncc_dev_error(d));
}

/* ldmatrix: each lane's registers by the PTX ISA's layout, computed here from
 * the tile: x4 gives lane l = 4 g + t the A fragment a[i] = A[g + 8 (i % 2)]
 * [2 t + 8 (i / 2)], [.. + 1]; x2.trans gives the B fragment b[i] =
 * B[2 t + 8 i][g], B[2 t + 8 i + 1][g] of a k-major 16x8 tile; a row address
 * 16 does not divide fails the launch */
static void test_ldmatrix(ncc_dev *d) {
  unsigned short src[256];
  unsigned dst[128];
  const unsigned short *sa = src;
  unsigned *da = dst;
  int mode = 0, rc, l, i;
  void *args[3] = {&sa, &da, &mode};
  for (i = 0; i < 256; i++) src[i] = (unsigned short)(i * 37 + 11);
  rc = ncc_launch(d, &k_ldmatrix_desc, d3(1, 1, 1), d3(32, 1, 1), 0, args);
  CHECK(rc == 0, "ldmatrix x4: rc %d, %s", rc, ncc_dev_error(d));
  for (l = 0; l < 32; l++)
    for (i = 0; i < 4; i++) {
      int g = l / 4, t = l % 4, at = (g + 8 * (i % 2)) * 16 + 2 * t + 8 * (i / 2);
      unsigned want = (unsigned)src[at] | (unsigned)src[at + 1] << 16;
      CHECK(dst[4 * l + i] == want, "ldmatrix x4: lane %d register %d is %08x, want %08x", l, i, dst[4 * l + i], want);
    }
  mode = 1;
  rc = ncc_launch(d, &k_ldmatrix_desc, d3(1, 1, 1), d3(32, 1, 1), 0, args);
  CHECK(rc == 0, "ldmatrix x2.trans: rc %d, %s", rc, ncc_dev_error(d));
  for (l = 0; l < 32; l++)
    for (i = 0; i < 2; i++) {
      int g = l / 4, t = l % 4, k = 2 * t + 8 * i;   /* B[k][n] at src[8 k + n] */
      unsigned want = (unsigned)src[8 * k + g] | (unsigned)src[8 * (k + 1) + g] << 16;
      CHECK(dst[4 * l + i] == want, "ldmatrix x2.trans: lane %d register %d is %08x, want %08x", l, i, dst[4 * l + i], want);
    }
  mode = 2;
  rc = ncc_launch(d, &k_ldmatrix_desc, d3(1, 1, 1), d3(32, 1, 1), 0, args);
  CHECK(rc == NCC_EINTERNAL && strstr(ncc_dev_error(d), "k_ldmatrix") && strstr(ncc_dev_error(d), "ldmatrix or cp.async"),
        "a misaligned ldmatrix not reported: rc %d, %s", rc, ncc_dev_error(d));
}

/* cp.async: copies land at wait_group, group by group; read before the wait,
 * checked mode shows NaN (the destination filled with 0xff at issue); a
 * misaligned copy and, in checked mode, copies never waited for fail the
 * launch naming the kernel */
static void test_cp_async(ncc_dev *d) {
  float src[129], dst[128];
  const float *sa = src;
  float *da = dst;
  int mode = 0, rc, i, saved = ncc_emu_checked();
  void *args[3] = {&sa, &da, &mode};
  for (i = 0; i < 129; i++) src[i] = (float)(i * 3 + 1);
  for (int checked = 0; checked < 2; checked++) {
    ncc_emu_set_checked(checked);
    rc = ncc_launch(d, &k_cp_async_desc, d3(2, 1, 1), d3(64, 1, 1), 0, args);
    CHECK(rc == 0, "cp.async (checked %d): rc %d, %s", checked, rc, ncc_dev_error(d));
    for (i = 0; i < 64; i++) {
      CHECK(dst[i] == src[(i + 1) % 64], "cp.async group 0: dst[%d] = %g, want %g", i, dst[i], src[(i + 1) % 64]);
      CHECK(dst[64 + i] == src[64 + (i + 5) % 64], "cp.async group 1: dst[%d] = %g, want %g", 64 + i, dst[64 + i],
            src[64 + (i + 5) % 64]);
    }
  }
  mode = 1;   /* checked: group 1 read before its wait */
  rc = ncc_launch(d, &k_cp_async_desc, d3(1, 1, 1), d3(64, 1, 1), 0, args);
  CHECK(rc == 0, "cp.async read early: rc %d, %s", rc, ncc_dev_error(d));
  {   /* the threads run one after another to their final wait, which lands their own copies: the first
         readers find their neighbours' copies not landed (which ones depends on the fiber order) */
    int nan = 0;
    for (i = 0; i < 64; i++) nan += dst[64 + i] != dst[64 + i];
    CHECK(nan > 0, "cp.async read before the wait: no NaN among the 64 early reads");
  }
  mode = 3;
  rc = ncc_launch(d, &k_cp_async_desc, d3(1, 1, 1), d3(64, 1, 1), 0, args);
  CHECK(rc == NCC_EINTERNAL && strstr(ncc_dev_error(d), "k_cp_async") && strstr(ncc_dev_error(d), "never waited for"),
        "cp.async copies not waited for not reported: rc %d, %s", rc, ncc_dev_error(d));
  mode = 2;
  rc = ncc_launch(d, &k_cp_async_desc, d3(1, 1, 1), d3(64, 1, 1), 0, args);
  CHECK(rc == NCC_EINTERNAL && strstr(ncc_dev_error(d), "ldmatrix or cp.async"),
        "a misaligned cp.async not reported: rc %d, %s", rc, ncc_dev_error(d));
  mode = 4;   /* the same for an 8-byte copy */
  rc = ncc_launch(d, &k_cp_async_desc, d3(1, 1, 1), d3(64, 1, 1), 0, args);
  CHECK(rc == NCC_EINTERNAL && strstr(ncc_dev_error(d), "ldmatrix or cp.async"),
        "a misaligned 8-byte cp.async not reported: rc %d, %s", rc, ncc_dev_error(d));
  ncc_emu_set_checked(saved);
}

static void test_atomics(ncc_dev *d) {
  int n = 50000, i, hist[16] = {0}, ref[16] = {0}, imax = -1, rmax = -1, *v = malloc(sizeof(int) * n);
  unsigned ucount = 0;
  float fsum = 0, rsum = 0;
  const int *va = v;
  int *ha = hist, *ma = &imax;
  float *fa = &fsum;
  unsigned *ua = &ucount;
  void *args[6];
  for (i = 0; i < n; i++) {
    v[i] = (int)((rng = rng * 1664525u + 1013904223u) >> 12);
    ref[v[i] & 15]++;
    rsum += (float)(v[i] & 7);   /* integers below 2^24: exact in any order */
    if (v[i] > rmax) rmax = v[i];
  }
  args[0] = &va; args[1] = &n; args[2] = &ha; args[3] = &fa; args[4] = &ma; args[5] = &ua;
  CHECK(ncc_launch(d, &k_atomics_desc, d3((unsigned)(n + 127) / 128, 1, 1), d3(128, 1, 1), 0, args) == 0, "%s",
        ncc_dev_error(d));
  CHECK(memcmp(hist, ref, sizeof hist) == 0, "atomicAdd(int) histogram differs");
  CHECK(fsum == rsum, "atomicAdd(float): %f want %f", fsum, rsum);
  CHECK(imax == rmax, "atomicMax: %d want %d", imax, rmax);
  CHECK(ucount == (unsigned)n, "atomicAdd(unsigned): %u want %d", ucount, n);
  printf("atomics: %d OS threads ran blocks\n", ncc_emu_last_launch_threads());
  free(v);
}

/* Blocks 0 and 1 must run at the same time on two OS threads.  With one
 * thread that cannot be checked: fine when one thread was asked for
 * (NCC_EMU_THREADS=1, the one-thread test), otherwise (a one-core machine and
 * no NCC_EMU_THREADS) the whole run reports itself skipped. */
static int concurrency_skipped;
static void test_concurrency(ncc_dev *d) {
  int flag = 0, seen = 0, *fa = &flag, *sa = &seen;
  long long spins = 2000000000LL;
  void *args[3];
  const char *asked = getenv("NCC_EMU_THREADS");
  if (ncc_emu_threads() < 2) {
    int one_asked = asked && strtol(asked, NULL, 10) == 1;
    printf("concurrency: not checked (%s)\n", one_asked ? "NCC_EMU_THREADS=1 asks for one thread" : "one core");
    concurrency_skipped = !one_asked;
    return;
  }
  args[0] = &fa; args[1] = &sa; args[2] = &spins;
  CHECK(ncc_launch(d, &k_handshake_desc, d3(2, 1, 1), d3(32, 1, 1), 0, args) == 0, "%s", ncc_dev_error(d));
  CHECK(seen == 1, "blocks 0 and 1 did not run concurrently on two OS threads");
  CHECK(ncc_emu_last_launch_threads() == 2, "last launch used %d threads", ncc_emu_last_launch_threads());
}

static void test_coords(ncc_dev *d) {
  unsigned gx = 3, gy = 2, gz = 2, bx = 4, by = 3, bz = 2;
  int n = (int)(gx * gy * gz * bx * by * bz), i, bad = 0, pass;
  int *out = malloc(sizeof(int) * 4 * n), *oa = out;
  void *args[1];
  args[0] = &oa;
  for (pass = 0; pass < 2; pass++) {
    ncc_kernel k = k_coords_desc;
    if (pass) k.flags = NCC_KF_BARRIER;   /* the fiber path must lay threads out the same way */
    memset(out, 0xff, sizeof(int) * 4 * n);
    CHECK(ncc_launch(d, &k, d3(gx, gy, gz), d3(bx, by, bz), 0, args) == 0, "%s", ncc_dev_error(d));
    for (i = 0; i < n; i++) {
      int t = i % (int)(bx * by * bz), b = i / (int)(bx * by * bz);
      int want[4];
      want[0] = t % (int)bx;
      want[1] = (t / (int)bx) % (int)by;
      want[2] = t / (int)(bx * by);
      want[3] = b % (int)gx + 100 * ((b / (int)gx) % (int)gy) + 10000 * (b / (int)(gx * gy));
      bad += memcmp(&out[4 * i], want, sizeof want) != 0;
    }
  }
  CHECK(bad == 0, "3-D geometry: %d threads wrong", bad);
  {
    int rc = ncc_launch(d, &k_coords_desc, d3(1, 1, 1), d3(1025, 1, 1), 0, args);
    CHECK(rc == NCC_EINTERNAL && strstr(ncc_dev_error(d), "invalid launch"), "1025 threads accepted: %s",
          ncc_dev_error(d));
  }
  free(out);
}

/* checked mode: a one-past-end write must end the process with status 2 and a
 * report naming buffer, kernel, block and thread */
static void test_checked(int barrier) {
  int pfd[2], status;
  pid_t pid;
  char msg[2048];
  ssize_t got = 0, r;
  if (pipe(pfd) != 0) { CHECK(0, "pipe"); return; }
  pid = fork();
  if (pid == 0) {
    ncc_dev *d;
    size_t sizes[2] = {sizeof(float) * 1000, sizeof(float) * 1000}, offs[2] = {0, 4096};
    void *ptrs[2], *arena;
    float *x, *y;
    int n = 1000;
    void *args[3];
    ncc_kernel k = k_oob_write_desc;
    dup2(pfd[1], 2);
    close(pfd[0]);
    ncc_emu_set_checked(1);
    if (barrier) k.flags = NCC_KF_BARRIER;
    if (ncc_dev_open(&d, NCC_DEV_EMU, NULL, NULL) || ncc_alloc_buffers(d, 2, offs, sizes, ptrs, &arena)) _exit(3);
    x = (float *)ptrs[0];
    y = (float *)ptrs[1];
    args[0] = &x; args[1] = &y; args[2] = &n;
    ncc_launch(d, &k, d3(4, 1, 1), d3(256, 1, 1), 0, args);
    _exit(0);   /* not reached when the checked mode works */
  }
  close(pfd[1]);
  while ((r = read(pfd[0], msg + got, sizeof msg - 1 - (size_t)got)) > 0) got += r;
  msg[got > 0 ? got : 0] = 0;
  close(pfd[0]);
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2, "checked mode: child status %d (want exit 2)", status);
  CHECK(strstr(msg, "out-of-bounds access") && strstr(msg, "0 bytes past buffer #1 of 4000 bytes") &&
            strstr(msg, "kernel k_oob_write") && strstr(msg, "block (3,0,0)") && strstr(msg, "thread (232,0,0)"),
        "checked mode report: %s", msg);
  printf("checked mode (%s): %s", barrier ? "fibers" : "threads", msg);
}

/* __float2int_rn, min, max: ties to even, saturation; reference by hand */
static void test_quant(ncc_dev *d) {
  static const float xs[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, 127.5f, -128.5f, 1e10f, -1e10f, 3.49f};
  static const signed char want[] = {0, 2, 2, 0, -2, -2, 126, 127, -128, 127, -128, 3};
  int n = 12, i, bad = 0;
  float inv = 1.0f;
  signed char q[12];
  const float *xa = xs;
  signed char *qa = q;
  void *args[4];
  args[0] = &xa; args[1] = &qa; args[2] = &inv; args[3] = &n;
  CHECK(ncc_launch(d, &k_quant_i8_desc, d3(1, 1, 1), d3(32, 1, 1), 0, args) == 0, "%s", ncc_dev_error(d));
  for (i = 0; i < n; i++) bad += q[i] != want[i];
  CHECK(bad == 0, "quant_i8: %d wrong", bad);
}

/* checked mode poisons dynamic shared memory before every block */
static void test_shared_poison(ncc_dev *d) {
  float out[4 * 64];
  float *oa = out;
  void *args[1];
  int i, nan = 0;
  args[0] = &oa;
  ncc_emu_set_checked(1);
  CHECK(ncc_launch(d, &k_uninit_shared_desc, d3(4, 1, 1), d3(64, 1, 1), 64 * sizeof(float), args) == 0, "%s",
        ncc_dev_error(d));
  ncc_emu_set_checked(0);
  for (i = 0; i < 4 * 64; i++) nan += out[i] != out[i];
  CHECK(nan == 4 * 64, "checked mode: %d of %d reads of unwritten shared memory were NaN", nan, 4 * 64);
}

/* two host threads launching at once (two models in one process): each
 * launch must still see its own blocks and its own barriers */
static void *host_thread(void *arg) {
  ncc_dev *d;
  int it, *bad = (int *)arg, rc;
  if (ncc_dev_open(&d, NCC_DEV_EMU, NULL, NULL)) { *bad = 1000; return NULL; }
  for (it = 0; it < 20; it++) {
    int n = 256 * 9 + 5, i;
    float *x = malloc(sizeof(float) * n);
    for (i = 0; i < n; i++) x[i] = (float)((i * 37 + it) % 101) / 50.0f - 1.0f;
    *bad += run_block_sum(d, &k_block_sum_desc, x, n, &rc);
    *bad += rc != 0;
    free(x);
  }
  ncc_dev_close(d);
  return NULL;
}
static void test_host_threads(void) {
  pthread_t t[3];
  int bad[3] = {0, 0, 0}, i;
  for (i = 0; i < 3; i++) pthread_create(&t[i], NULL, host_thread, &bad[i]);
  for (i = 0; i < 3; i++) pthread_join(t[i], NULL);
  CHECK(bad[0] + bad[1] + bad[2] == 0, "concurrent launches from 3 host threads: %d wrong blocks",
        bad[0] + bad[1] + bad[2]);
}

/* a child forked after the worker pool started must still launch (the pool
 * threads are not copied by fork); alarm() turns a hang into a failure */
static void test_fork_launch(void) {
  int status;
  pid_t pid = fork();
  if (pid == 0) {
    ncc_dev *d;
    alarm(30);
    if (ncc_dev_open(&d, NCC_DEV_EMU, NULL, NULL)) _exit(3);
    failures = 0;
    test_bias_relu(d);
    _exit(failures ? 1 : 0);
  }
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "launch in a forked child: status %d", status);
}

/* ---- warp collectives: k_warp_ops against CUDA's definitions, written here
 * from the programming guide (segments of `width` lanes; a source outside the
 * caller's segment, or past it for xor, gives the caller's own value) ---- */
enum { R_IDX, R_UP, R_DOWN, R_XOR };
static int ref_src(int op, int lane, int b, int width) {
  int seg = lane / width * width, j;
  switch (op) {
  case R_IDX: return seg + b % width;
  case R_UP: return lane - seg >= b ? lane - b : lane;
  case R_DOWN: return lane - seg + b < width ? lane + b : lane;
  default: j = lane ^ b; return j < seg + width ? j : lane;
  }
}

static int warp_ops_bad(const int *out, unsigned nblocks, unsigned nthr) {
  int bad = 0;
  unsigned bid, t;
  for (bid = 0; bid < nblocks; bid++)
    for (t = 0; t < nthr; t++) {
      int lane = (int)t & 31, wb = (int)t - lane, nl = (int)nthr - wb < 32 ? (int)nthr - wb : 32, l, k;
      unsigned full = nl == 32 ? 0xffffffffu : (1u << nl) - 1u, ballot = 0, odd = 0;
      int V[32], want[WARP_SLOTS], sum = 0;
      const int *r = out + (bid * nthr + t) * WARP_SLOTS;
      for (l = 0; l < nl; l++) {
        V[l] = (wb + l) * 3 + 1 + (int)bid * 1000;
        sum += V[l];
        if (V[l] % 3 == 0) ballot |= 1u << l;
        if (l % 4 == 1) odd |= 1u << l;
      }
      want[0] = V[5];
      want[1] = V[ref_src(R_IDX, lane, lane + 3, 8)];
      want[2] = V[ref_src(R_UP, lane, 3, 32)];
      want[3] = V[ref_src(R_UP, lane, 2, 8)];
      want[4] = V[ref_src(R_DOWN, lane, 5, 16)];
      want[5] = V[lane ^ 1];
      want[6] = V[ref_src(R_XOR, lane, 6, 4)];
      want[7] = sum;
      want[8] = (int)ballot;
      want[9] = 1 + 2 * (nl <= 9);
      want[10] = 1;
      want[11] = lane % 2 == 0 ? V[(lane + 2) % nl] : (int)odd;
      want[12] = lane < 5 ? 0x1f : (int)(full & ~0x1fu) + 1;
      want[13] = (int)full;
      want[14] = V[(lane + 1) % nl];
      want[15] = 4 * V[lane ^ 2] + 1;
      want[16] = V[ref_src(R_DOWN, lane, 1, 2)];
      want[17] = V[lane] + 2;
      for (k = 0; k < WARP_SLOTS; k++)
        if (r[k] != want[k]) {
          if (bad++ < 5) fprintf(stderr, "  block %u thread %u slot %d: %d (0x%x), want %d (0x%x)\n", bid, t, k, r[k],
                                 (unsigned)r[k], want[k], (unsigned)want[k]);
        }
    }
  return bad;
}

static void test_warp_ops(ncc_dev *d) {
  /* two full warps; 2-D 16x5 (warps of 32, 32, 16); 3-D 4x2x2 (one warp of 16) */
  static const unsigned geo[][3] = {{64, 1, 1}, {16, 5, 1}, {4, 2, 2}, {1024, 1, 1}};
  unsigned g, nblocks = 3, order;
  int ck, was = ncc_emu_checked();
  for (ck = 0; ck < 2; ck++)   /* checked mode: the same results (no source lane here is undefined) */
  for (g = 0; g < sizeof geo / sizeof geo[0]; g++) {
    unsigned nthr = geo[g][0] * geo[g][1] * geo[g][2];
    size_t sz = sizeof(int) * WARP_SLOTS * nthr * nblocks;
    int *out[2], *oa;
    void *args[1];
    for (order = 0; order < 2; order++) {
      out[order] = malloc(sz);
      memset(out[order], 0x5a, sz);
      oa = out[order];
      args[0] = &oa;
      ncc_emu_set_fiber_order((int)order);
      ncc_emu_set_checked(ck);
      CHECK(ncc_launch(d, &k_warp_ops_desc, d3(nblocks, 1, 1), d3(geo[g][0], geo[g][1], geo[g][2]), 0, args) == 0,
            "warp ops: %s", ncc_dev_error(d));
      CHECK(warp_ops_bad(out[order], nblocks, nthr) == 0, "warp ops, block (%u,%u,%u), %s order: wrong results",
            geo[g][0], geo[g][1], geo[g][2], order ? "reverse" : "forward");
    }
    CHECK(memcmp(out[0], out[1], sz) == 0, "warp ops: the fiber orders disagree");
    free(out[0]);
    free(out[1]);
  }
  ncc_emu_set_fiber_order(default_order());
  ncc_emu_set_checked(was);
  printf("warp collectives: 4 block shapes, both fiber orders, checked and not\n");
}

/* misuse: a lane that never arrives, lanes at different collectives, a mask
 * without the caller; errors in both modes, except an exited lane, which CUDA
 * does not wait for (undefined values): checked mode reports that too */
static int warp_misuse(ncc_dev *d, int mode, int *out) {
  int *oa = out;
  void *args[2];
  args[0] = &oa;
  args[1] = &mode;
  memset(out, 0, sizeof(int) * 64);
  return ncc_launch(d, &k_warp_misuse_desc, d3(2, 1, 1), d3(64, 1, 1), 0, args);
}

static void test_warp_misuse(ncc_dev *d) {
  int out[64], rc, checked, i, bad;
  const char *e;
  for (checked = 0; checked < 2; checked++) {
    int was = ncc_emu_checked();
    ncc_emu_set_checked(checked);
    /* 0: lane 3 exits */
    rc = warp_misuse(d, 0, out);
    e = ncc_dev_error(d);
    if (checked) {
      CHECK(rc == NCC_EINTERNAL && strstr(e, "kernel k_warp_misuse, block (0,0,0), warp 0, lane 0 (thread (0,0,0)) "
                                            "waits at __shfl_xor_sync (mask 0xffffffff), but lane 3 (thread (3,0,0)) "
                                            "named in the mask has exited"),
            "checked: exited lane not reported: rc %d, %s", rc, e);
      printf("checked, exited lane: %s\n", e);
    } else {
      /* lane 2 reads lane 3, which is gone: its own value */
      CHECK(rc == 0 && out[2] == 3 && out[1] == 1 && out[0] == 2 && out[35] == 0, "unchecked: exited lane: rc %d (%s), %d %d %d",
            rc, e, out[0], out[1], out[2]);
    }
    /* 1: lane 3 waits at __syncthreads() */
    rc = warp_misuse(d, 1, out);
    e = ncc_dev_error(d);
    CHECK(rc == NCC_EINTERNAL && strstr(e, "warp 0, lane 0 (thread (0,0,0)) waits at __shfl_xor_sync (mask 0xffffffff), "
                                          "but lane 3 (thread (3,0,0)) named in the mask waits at __syncthreads()"),
          "lane at a barrier not reported: rc %d, %s", rc, e);
    if (checked) printf("lane at a barrier: %s\n", e);
    /* 2: different collectives */
    rc = warp_misuse(d, 2, out);
    e = ncc_dev_error(d);
    CHECK(rc == NCC_EINTERNAL && strstr(e, "lane 0 (thread (0,0,0)) waits at __shfl_xor_sync (mask 0xffffffff), but "
                                          "lane 1 (thread (1,0,0)) named in the mask waits at __ballot_sync (mask 0xffffffff)"),
          "different collectives not reported: rc %d, %s", rc, e);
    if (checked) printf("different collectives: %s\n", e);
    /* 3: the mask does not name the caller */
    rc = warp_misuse(d, 3, out);
    e = ncc_dev_error(d);
    CHECK(rc == NCC_EINTERNAL && strstr(e, "lane 0 (thread (0,0,0)) calls __shfl_xor_sync with mask 0xfffffff0, which "
                                          "does not name the lane itself"),
          "mask without the caller not reported: rc %d, %s", rc, e);
    /* 4: lanes 8..15 read lanes outside the mask: their own value, all-ones bits when checked */
    rc = warp_misuse(d, 4, out);
    CHECK(rc == 0, "mode 4: %s", ncc_dev_error(d));
    for (bad = 0, i = 0; i < 64; i++) {
      int lane = i & 31, want = i + 1;
      if (lane < 8) want = i + 9;
      else if (lane < 16 && checked) want = -1;
      bad += out[i] != want;
    }
    CHECK(bad == 0, "%s: reads outside the mask: %d wrong", checked ? "checked" : "unchecked", bad);
    ncc_emu_set_checked(was);
  }
  /* an unflagged kernel's lanes cannot meet */
  {
    int *oa = out;
    void *args[1];
    args[0] = &oa;
    rc = ncc_launch(d, &k_warp_unflagged_desc, d3(1, 1, 1), d3(32, 1, 1), 0, args);
    CHECK(rc == NCC_EINTERNAL && strstr(ncc_dev_error(d), "not flagged NCC_KF_WARP"), "unflagged shuffle: rc %d, %s", rc,
          ncc_dev_error(d));
  }
  /* the abandoned fibers must not poison the next launch */
  test_warp_ops(d);
}

/* ---- tensor cores: k_mma_tf32 on small integers (every product and sum
 * exact, whatever the order), so D must be C + A B exactly: any lane's
 * fragment in the wrong place shows.  Then the misuses: a partial warp, a
 * lane that exits before the MMA. */
static int mma_launch(ncc_dev *d, float *A, float *B, float *D, int nblocks, int nthr, int mode) {
  void *args[4];
  args[0] = &A, args[1] = &B, args[2] = &D, args[3] = &mode;
  return ncc_launch(d, &k_mma_tf32_desc, d3((unsigned)nblocks, 1, 1), d3((unsigned)nthr, 1, 1), 0, args);
}

static void test_mma(ncc_dev *d) {
  enum { TILES = 6 };
  static float A[TILES * 128], B[TILES * 64], D[TILES * 128];
  static double want[TILES * 128];
  int t, i, j, k, bad = 0, rc, order;
  unsigned s = 12345;
  for (i = 0; i < TILES * 128; i++) s = s * 1103515245u + 12345u, A[i] = (float)((int)(s >> 16) % 17 - 8);
  for (i = 0; i < TILES * 64; i++) s = s * 1103515245u + 12345u, B[i] = (float)((int)(s >> 16) % 17 - 8);
  for (i = 0; i < TILES * 128; i++) s = s * 1103515245u + 12345u, D[i] = (float)((int)(s >> 16) % 101 - 50);
  for (t = 0; t < TILES; t++)
    for (i = 0; i < 16; i++)
      for (j = 0; j < 8; j++) {
        double v = D[t * 128 + i * 8 + j];
        for (k = 0; k < 8; k++) v += (double)A[t * 128 + i * 8 + k] * B[t * 64 + k * 8 + j];
        want[t * 128 + i * 8 + j] = v;
      }
  for (order = 0; order < 2; order++) {   /* 3 blocks of 2 warps, then 6 of 1 */
    static float Dw[TILES * 128];
    memcpy(Dw, D, sizeof D);
    rc = mma_launch(d, A, B, Dw, order ? 6 : 3, order ? 32 : 64, 0);
    CHECK(rc == 0, "mma: %s", ncc_dev_error(d));
    for (i = 0; i < TILES * 128; i++) bad += (double)Dw[i] != want[i];
  }
  CHECK(bad == 0, "mma.sync m16n8k8 tf32: %d elements differ from C + A B", bad);
  /* a block of 48 threads: its second warp has 16 lanes */
  rc = mma_launch(d, A, B, D, 1, 48, 0);
  CHECK(rc == NCC_EINTERNAL && strstr(ncc_dev_error(d), "warp 1, lane 0 (thread (32,0,0)) calls mma.sync.m16n8k8 (tf32) "
                                                      "in a warp of 16 threads"),
        "mma in a partial warp: rc %d, %s", rc, ncc_dev_error(d));
  /* lane 5 exits first: an error in both modes (the tile would be undefined) */
  rc = mma_launch(d, A, B, D, 1, 32, 1);
  CHECK(rc == NCC_EINTERNAL && strstr(ncc_dev_error(d), "calls mma.sync.m16n8k8 (tf32), but lanes 0x00000020 of its "
                                                      "warp have exited"),
        "mma with an exited lane: rc %d, %s", rc, ncc_dev_error(d));
  printf("mma.sync m16n8k8 tf32: %d tiles exact; partial warp and exited lane reported\n", TILES);
}

/* ---- mma.sync.m16n8k16 at FP16 and BF16: k_mma_k16 on small integers (exact
 * in both types, every product and sum exact), so D must be C + A B exactly;
 * a lane that exits first is reported */
static int mma16_launch(ncc_dev *d, float *A, float *B, float *D, int nblocks, int nthr, int bf, int mode) {
  void *args[5];
  args[0] = &A, args[1] = &B, args[2] = &D, args[3] = &bf, args[4] = &mode;
  return ncc_launch(d, &k_mma_k16_desc, d3((unsigned)nblocks, 1, 1), d3((unsigned)nthr, 1, 1), 0, args);
}

static void test_mma_k16(ncc_dev *d) {
  enum { TILES = 4 };
  static float A[TILES * 256], B[TILES * 128], D[TILES * 128], Dw[TILES * 128];
  static double want[TILES * 128];
  int t, i, j, k, bad = 0, rc, bf;
  unsigned s = 777;
  for (i = 0; i < TILES * 256; i++) s = s * 1103515245u + 12345u, A[i] = (float)((int)(s >> 16) % 17 - 8);
  for (i = 0; i < TILES * 128; i++) s = s * 1103515245u + 12345u, B[i] = (float)((int)(s >> 16) % 17 - 8);
  for (i = 0; i < TILES * 128; i++) s = s * 1103515245u + 12345u, D[i] = (float)((int)(s >> 16) % 101 - 50);
  for (t = 0; t < TILES; t++)
    for (i = 0; i < 16; i++)
      for (j = 0; j < 8; j++) {
        double v = D[t * 128 + i * 8 + j];
        for (k = 0; k < 16; k++) v += (double)A[t * 256 + i * 16 + k] * B[t * 128 + k * 8 + j];
        want[t * 128 + i * 8 + j] = v;
      }
  for (bf = 0; bf < 2; bf++) {   /* 2 blocks of 2 warps (f16), 4 of 1 (bf16) */
    memcpy(Dw, D, sizeof D);
    rc = mma16_launch(d, A, B, Dw, bf ? 4 : 2, bf ? 32 : 64, bf, 0);
    CHECK(rc == 0, "mma k16: %s", ncc_dev_error(d));
    for (i = 0; i < TILES * 128; i++) bad += (double)Dw[i] != want[i];
  }
  CHECK(bad == 0, "mma.sync m16n8k16 f16/bf16: %d elements differ from C + A B", bad);
  rc = mma16_launch(d, A, B, Dw, 1, 32, 0, 1);
  CHECK(rc == NCC_EINTERNAL && strstr(ncc_dev_error(d), "calls mma.sync.m16n8k16 (f16), but lanes 0x00000020 of its "
                                                      "warp have exited"),
        "mma k16 with an exited lane: rc %d, %s", rc, ncc_dev_error(d));
  printf("mma.sync m16n8k16 f16, bf16: %d tiles exact each; exited lane reported\n", TILES);
}

/* ---- mma.sync.m16n8k16 s8: k_mma_s8 on int8 values over the whole range
 * [-127, 127] (int32 sums are exact), D must be C + A B exactly */
static void test_mma_s8(ncc_dev *d) {
  enum { TILES = 4 };
  static float A[TILES * 256], B[TILES * 128];
  static int D[TILES * 128];
  static long long want[TILES * 128];
  int t, i, j, k, bad = 0, rc;
  unsigned s = 4242;
  void *args[3];
  float *pa = A, *pb = B;
  int *pd = D;
  for (i = 0; i < TILES * 256; i++) s = s * 1103515245u + 12345u, A[i] = (float)((int)(s >> 16) % 255 - 127);
  for (i = 0; i < TILES * 128; i++) s = s * 1103515245u + 12345u, B[i] = (float)((int)(s >> 16) % 255 - 127);
  A[0] = -127, B[0] = -127, A[1] = 127, B[8] = -127;   /* the extremes meet */
  for (i = 0; i < TILES * 128; i++) s = s * 1103515245u + 12345u, D[i] = (int)(s >> 8) % 200001 - 100000;
  for (t = 0; t < TILES; t++)
    for (i = 0; i < 16; i++)
      for (j = 0; j < 8; j++) {
        long long v = D[t * 128 + i * 8 + j];
        for (k = 0; k < 16; k++) v += (long long)A[t * 256 + i * 16 + k] * (long long)B[t * 128 + k * 8 + j];
        want[t * 128 + i * 8 + j] = v;
      }
  args[0] = &pa, args[1] = &pb, args[2] = &pd;
  rc = ncc_launch(d, &k_mma_s8_desc, d3(2, 1, 1), d3(64, 1, 1), 0, args);   /* 2 blocks of 2 warps */
  CHECK(rc == 0, "mma s8: %s", ncc_dev_error(d));
  for (i = 0; i < TILES * 128; i++) bad += (long long)D[i] != want[i];
  CHECK(bad == 0, "mma.sync m16n8k16 s8: %d elements differ from C + A B", bad);
  printf("mma.sync m16n8k16 s8: %d tiles exact\n", TILES);
}

/* a missing lane ends a program's run with an error, not a hang: a child
 * process under an alarm reports it and exits 2 */
static void test_warp_missing_exit(void) {
  int pfd[2], status;
  pid_t pid;
  char msg[2048];
  ssize_t got = 0, r;
  if (pipe(pfd) != 0) { CHECK(0, "pipe"); return; }
  pid = fork();
  if (pid == 0) {
    ncc_dev *d;
    int out[64];
    dup2(pfd[1], 2);
    close(pfd[0]);
    alarm(20);
    ncc_emu_set_checked(1);
    if (ncc_dev_open(&d, NCC_DEV_EMU, NULL, NULL)) _exit(3);
    if (warp_misuse(d, 0, out) != 0) {
      fprintf(stderr, "%s\n", ncc_dev_error(d));
      _exit(2);
    }
    _exit(0);
  }
  close(pfd[1]);
  while ((r = read(pfd[0], msg + got, sizeof msg - 1 - (size_t)got)) > 0) got += r;
  msg[got > 0 ? got : 0] = 0;
  close(pfd[0]);
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2, "missing lane: child status %d (want exit 2)", status);
  CHECK(strstr(msg, "lane 3 (thread (3,0,0)) named in the mask has exited"), "missing lane: %s", msg);
}

int main(void) {
  ncc_dev *d;
  double t0 = ncc_now();
  int rc = ncc_dev_open(&d, NCC_DEV_EMU, NULL, NULL);
  CHECK(rc == 0, "open: %s", ncc_dev_error(d));
  if (rc) return 1;
  printf("device: %s\n", ncc_dev_name(d));
  CHECK(ncc_dev_is_emu(d), "not emu");
  CHECK(strncmp(ncc_dev_name(d), "emu: ", 5) == 0, "name %s", ncc_dev_name(d));
  test_conversions();
  test_bias_relu(d);
  test_f16(d);
  test_sgemm16(d);
  test_reduction_and_race(d);
  test_softmax(d);
  test_early_return(d);
  test_unflagged(d);
  test_ldg128(d);
  test_pairs(d);
  test_quads(d);
  test_lds_vec(d);
  test_ldmatrix(d);
  test_cp_async(d);
  test_atomics(d);
  test_concurrency(d);
  test_coords(d);
  test_quant(d);
  test_host_threads();
  test_shared_poison(d);
  test_fork_launch();
  test_checked(0);
  test_checked(1);
  test_warp_ops(d);
  test_warp_misuse(d);
  test_warp_missing_exit();
  test_mma(d);
  test_mma_k16(d);
  test_mma_s8(d);
  test_round(d);
  ncc_dev_close(d);
  printf("%s: %d failures (%.2f s)\n", failures ? "FAILED" : "ok", failures, ncc_now() - t0);
  if (!failures && concurrency_skipped) {
    printf("skipped: the concurrency check needs two threads (set NCC_EMU_THREADS=2)\n");
    return 77;   /* ctest's SKIP_RETURN_CODE */
  }
  return failures ? 1 : 0;
}
