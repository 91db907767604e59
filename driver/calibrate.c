/* calibrate.c — int8 calibration (--precision=int8; docs/precision.md, "INT8").
 *
 * Before an int8 model is built, the driver runs the model on the
 * calibration inputs (--calibrate=X.npy, a few hundred rows of the model's
 * input) in two builds of its own, each compiled and run like `ncc run`:
 *  1. float32, with the input of every int8 candidate (ir_int8_candidate: a
 *     conv2d or linear with weights; a matmul's both operands, its taps
 *     KEY and KEY#b, ir_int8_taps) an extra output.  Over all rows, the
 *     largest |x| of each gives minmax's scale; with percentile and entropy
 *     a second pass over the rows (the same build) makes a histogram of |x|
 *     in HBINS bins up to it:
 *       minmax      scale = max |x| / 127
 *       percentile  the bin edge below which P% of the |x| lie (--percentile,
 *                   default 99.99), / 127
 *       entropy     TensorRT's KL-divergence method: of the thresholds of
 *                   128..HBINS bins, the one whose 128-level quantized
 *                   distribution is nearest (Kullback-Leibler) to the
 *                   clipped original, / 127 (th_entropy: the smoothing,
 *                   and the first bin, where a ReLU's zeros fall)
 *  2. a build in which every candidate has an int8 twin reading the same
 *     float32 input (the precision pass quantizes the twins alone, with the
 *     scales of 1): the layer's error alone, ||y_int8 - y_fp32|| / ||y_fp32||
 *     over the calibration rows.  Above --int8-max-error (default 0.05) the
 *     layer falls back to fp32 (--int8-fallback: fp16, bf16) and the report
 *     says why.
 * The result (QuantTable, ir/ir.h) reaches the precision pass through
 * drv_pass_ctx, and, with --calibration-cache=FILE, a text file (written
 * atomically) that a later compile of the same model reads instead of
 * calibrating again. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "../passes/passes.h"

#define HBINS 2048
#define CACHE_MAGIC "ncc-int8-calibration 1"

static QuantTable g_table;          /* the calibration of this run */
static int g_have;
static const QuantTable *g_build;   /* the table of a calibration build (step 2) */
static void (*g_hook)(Graph *, void *);   /* the extra outputs of a calibration build */

const QuantTable *drv_quant(void) { return g_build ? g_build : g_have ? &g_table : NULL; }

const QuantTable *drv_quant_swap(const QuantTable *t) {
  const QuantTable *old = g_build;
  g_build = t;
  return old;
}

void drv_build_hook(Graph *g) {
  if (g_hook) g_hook(g, NULL);
}

/* ---- the candidates, and the extra outputs of the calibration builds ---- */
typedef struct Cand {
  int n;                /* taps: the calibrated operands (one a conv2d or linear, two a matmul) */
  char (*key)[160];     /* a tap's key in the table: the layer's, "#b" after it for a matmul's b */
  char (*shape)[128];   /* the operand's shape, for the cache's check */
  int *node;            /* the candidate (in graph order) a tap belongs to: its twin's error is the tap's */
  int *tap;             /* which operand: 0 (the input; a matmul's a), 1 (a matmul's b) */
} Cand;

static void add_output(Graph *g, const char *name, Value *v) {
  NamedValue *o = ARENA_ARRAY(g->arena, NamedValue, g->noutputs + 1);
  if (g->noutputs) memcpy(o, g->outputs, sizeof *o * (size_t)g->noutputs);
  o[g->noutputs].name = arena_strdup(g->arena, name);
  o[g->noutputs].v = v;
  g->outputs = o;
  g->noutputs++;
}

/* step 1: every candidate's calibrated operands (taps) outputs "calib_in_K" */
static void hook_taps(Graph *g, void *ctx) {
  Cand *c = (Cand *)ctx;
  int k = 0, n0 = g->nnodes, nc = 0;
  for (int i = 0; i < n0; i++) {
    Node *n = g->nodes[i];
    if (!ir_int8_candidate(n)) continue;
    for (int t = 0; t < ir_int8_taps(n); t++) {
      char name[32];
      snprintf(name, sizeof name, "calib_in_%d", k);
      if (c) {
        char key[150];
        ir_layer_key(n, key, sizeof key);
        snprintf(c->key[k], sizeof c->key[k], "%s%s", key, t ? IR_INT8_TAP_B : "");
        Shape row = n->in[t]->shape;   /* without the batch: a cache serves every batch size */
        if (row.rank > 0) row.d[0] = 1;
        shape_str(c->shape[k], sizeof c->shape[k], n->in[t]->dtype, &row);
        c->node[k] = nc;
        c->tap[k] = t;
      }
      add_output(g, name, n->in[t]);
      k++;
    }
    nc++;
  }
}

/* step 2: every candidate and its twin (named "KEY@int8") outputs "calib_f_K" and "calib_q_K" */
static void hook_twins(Graph *g, void *ctx) {
  (void)ctx;
  int k = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (!ir_int8_candidate(n) || (n->name && strstr(n->name, "@int8"))) continue;
    char key[160], tk[200], name[32];
    ir_layer_key(n, key, sizeof key);
    snprintf(tk, sizeof tk, "%s@int8", key);
    Value *t = ir_clone_at(g, n, n->in, i + 1, arena_strdup(g->arena, tk));
    snprintf(name, sizeof name, "calib_f_%d", k);
    add_output(g, name, n->out);
    snprintf(name, sizeof name, "calib_q_%d", k);
    add_output(g, name, t);
    k++;
    i++;   /* past the twin */
  }
}

static int count_candidates(const Options *o, Cand *c) {
  Graph *g = frontend_load(o->model, o->sets, o->nsets);
  if (!g || diag_errors()) {
    ir_graph_free(g);
    return -1;
  }
  int n = 0;
  for (int i = 0; i < g->nnodes; i++) n += ir_int8_candidate(g->nodes[i]) ? ir_int8_taps(g->nodes[i]) : 0;
  c->n = n;
  c->key = calloc((size_t)n + 1, sizeof *c->key);
  c->shape = calloc((size_t)n + 1, sizeof *c->shape);
  c->node = calloc((size_t)n + 1, sizeof *c->node);
  c->tap = calloc((size_t)n + 1, sizeof *c->tap);
  if (!c->key || !c->shape || !c->node || !c->tap) ncc_die("out of memory");
  hook_taps(g, c);
  ir_graph_free(g);
  return n;
}

/* ---- the data ---- */
typedef struct Data {
  float *x;
  int64_t rows, row;    /* rows, floats a row */
  const char *path;
} Data;

static int read_data(const char *path, Data *d) {
  int dt, rank;
  int64_t shape[8];
  void *p = NULL;
  char err[1024] = "", msg[2048];
  if (ncc_npy_read(path, &dt, &rank, shape, &p, err, sizeof err) != 0)
    return drv_error("--calibrate: %s", with_path(msg, sizeof msg, path, err[0] ? err : "cannot read"));
  if (dt != NCC_F32 || rank < 1) {
    free(p);
    char got[256];
    tensor_str(got, sizeof got, dt, rank, shape);
    return drv_error("--calibrate: %s holds %s: calibration data are float32 rows of the model's input, "
                     "[S, ...] (S samples)", path, got);
  }
  d->x = (float *)p;
  d->rows = shape[0];
  d->row = numel(rank - 1, shape + 1);
  d->path = path;
  if (d->rows < 1) {
    free(p);
    return drv_error("--calibrate: %s holds no rows", path);
  }
  for (int64_t i = 0; i < d->rows * d->row; i++)
    if (!isfinite(d->x[i])) {
      float v = d->x[i];
      free(p);
      d->x = NULL;
      return drv_error("--calibrate: %s: row %lld holds %s (element %lld): calibration data must be finite", path,
                       (long long)(i / d->row), v != v ? "NaN" : "an infinity", (long long)(i % d->row));
    }
  return 0;
}

/* ---- one calibration build, run over the data `passes` times ---- */
typedef int (*BatchFn)(void *ctx, const Model *M, void **out, int rows, int pass);

static int run_build(const Options *base, int prec, void (*hook)(Graph *, void *), const Data *d, int passes,
                     BatchFn fn, void *ctx, const char *what) {
  Options o = *base;
  o.precision = prec;
  o.cublas = 0, o.max_memory = 0, o.freeze = 0, o.train = 0, o.passes = NULL, o.print_after = NULL;
  o.autotune = 0;   /* (--autotune tries the calibrated model's tiles, after the calibration) */
  Model M;
  g_hook = hook;
  int rc = model_build(&o, &M);
  g_hook = NULL;
  if (!rc) rc = model_load(&o, &M);
  if (!rc) rc = model_create(&o, &M);
  if (!rc) rc = model_weights(&o, &M);
  void **in = NULL, **out = NULL;
  int xi = -1;
  const ncc_model_info *inf = M.inf;
  if (!rc) {
    /* the one float32 input inference reads */
    for (int i = 0; i < inf->ninputs; i++) {
      int live = 0;
      for (int j = 0; j < M.nlive; j++) live |= !strcmp(M.live_inputs[j], inf->inputs[i].name);
      if (!live) continue;
      if (xi >= 0 || inf->inputs[i].dtype != NCC_F32) {
        rc = drv_error("--calibrate: int8 calibration takes a model with one float32 input; %s has %s",
                       base->model, xi >= 0 ? "more" : "an input of another type");
        break;
      }
      xi = i;
    }
    if (!rc && xi < 0) rc = drv_error("--calibrate: %s reads no input", base->model);
  }
  if (!rc) {
    const ncc_tensor_info *t = &inf->inputs[xi];
    int64_t per = t->rank > 0 ? numel(t->rank - 1, t->shape + 1) : 1;
    if (per != d->row || t->rank < 1) {
      char want[256];
      tensor_str(want, sizeof want, t->dtype, t->rank, t->shape);
      rc = drv_error("--calibrate: %s has rows of %lld floats, but the model's input %s is %s (rows of %lld)",
                     d->path, (long long)d->row, t->name, want, (long long)per);
    }
  }
  if (!rc) {
    in = (void **)calloc((size_t)inf->ninputs + 1, sizeof *in);
    for (int i = 0; i < inf->ninputs; i++)
      if (i != xi) {
        int64_t n = numel(inf->inputs[i].rank, inf->inputs[i].shape);
        in[i] = calloc((size_t)(n > 0 ? n : 1), (size_t)(dt_size(inf->inputs[i].dtype) ? dt_size(inf->inputs[i].dtype) : 1));
      }
    out = alloc_tensors(inf->outputs, inf->noutputs);
    int B = inf->max_batch > 0 ? inf->max_batch : 1;
    int64_t done = 0;
    double t0 = ncc_now();
    for (int pass = 0; pass < passes && !rc; pass++)
      for (done = 0; !rc && done < d->rows;) {
        int64_t rows = d->rows - done < B ? d->rows - done : B;
        if (rows < B && !inf->batch_variable) {
          if (pass == 0)
            drv_note("calibration: the last %lld of %lld rows are left out: this build runs batch %d only",
                     (long long)rows, (long long)d->rows, B);
          break;
        }
        in[xi] = d->x + done * d->row;
        rc = model_infer(&M, (int)rows, in, out);
        if (!rc) rc = fn(ctx, &M, out, (int)rows, pass);
        done += rows;
      }
    in[xi] = NULL;
    drv_log(base, "calibration, %s: %lld rows%s in %.2f s on %s", what, (long long)done, passes > 1 ? ", twice" : "",
            ncc_now() - t0, M.devdesc);
    if (!rc && done == 0)
      rc = drv_error("--calibrate: %s has %lld rows, fewer than the model's batch (%d), which this build needs",
                     d->path, (long long)d->rows, B);
  }
  if (in) free_tensors(in, inf->ninputs);
  if (out) free_tensors(out, inf->noutputs);
  model_close(&M);
  return rc;
}

static int out_index(const Model *M, const char *name) {
  for (int i = 0; i < M->inf->noutputs; i++)
    if (!strcmp(M->inf->outputs[i].name, name)) return i;
  ncc_die("calibration: the build has no output %s", name);
}

/* The elements of output i that `rows` rows of the batch give: its rows, or where its first dimension is not
 * the batch (a matmul's transposed operand, [96, 256] of a [256, 96] input) at most the whole tensor */
static int64_t out_numel(const Model *M, int i, int rows) {
  const ncc_tensor_info *t = &M->inf->outputs[i];
  int64_t n = t->rank > 0 ? numel(t->rank - 1, t->shape + 1) * rows : 1, all = numel(t->rank, t->shape);
  return n < all ? n : all;
}

/* step 1's statistics */
typedef struct Stats {
  int n;
  double *amax;
  double (*hist)[HBINS];   /* NULL: minmax, the maxima alone */
} Stats;

/* pass 0: the maxima; pass 1: the histograms up to them */
static int on_taps(void *ctx, const Model *M, void **out, int rows, int pass) {
  Stats *s = (Stats *)ctx;
  for (int k = 0; k < s->n; k++) {
    char name[32];
    snprintf(name, sizeof name, "calib_in_%d", k);
    int i = out_index(M, name);
    const float *x = (const float *)out[i];
    int64_t n = out_numel(M, i, rows);
    if (pass == 0) {
      double m = s->amax[k];
      for (int64_t j = 0; j < n; j++) {
        double a = fabs((double)x[j]);
        if (a > m) m = a;   /* a NaN is left out */
      }
      s->amax[k] = m;
    } else if (s->amax[k] > 0 && isfinite(s->amax[k])) {
      double w = s->amax[k] / HBINS;
      for (int64_t j = 0; j < n; j++) {
        double a = fabs((double)x[j]);
        if (!(a == a)) continue;
        int b = (int)(a / w);
        s->hist[k][b >= HBINS ? HBINS - 1 : b] += 1;
      }
    }
  }
  return 0;
}

/* step 2's errors */
typedef struct Errs {
  int n;
  double *num, *den;
} Errs;

static int on_twins(void *ctx, const Model *M, void **out, int rows, int pass) {
  (void)pass;
  Errs *e = (Errs *)ctx;
  for (int k = 0; k < e->n; k++) {
    char fn[32], qn[32];
    snprintf(fn, sizeof fn, "calib_f_%d", k);
    snprintf(qn, sizeof qn, "calib_q_%d", k);
    int fi = out_index(M, fn), qi = out_index(M, qn);
    const float *f = (const float *)out[fi], *q = (const float *)out[qi];
    int64_t n = out_numel(M, fi, rows);
    for (int64_t j = 0; j < n; j++) {
      double dd = (double)q[j] - (double)f[j];
      e->num[k] += dd * dd;
      e->den[k] += (double)f[j] * (double)f[j];
    }
  }
  return 0;
}

/* ---- the methods ---- */
static double to_scale(double t) { return t > 0 && isfinite(t) ? t / 127.0 : 1.0; }

static double th_percentile(const double *h, double amax, double pct) {
  double tot = 0, c = 0;
  for (int i = 0; i < HBINS; i++) tot += h[i];
  int i = 0;
  for (; i < HBINS - 1; i++) {
    c += h[i];
    if (c >= tot * pct / 100.0) break;
  }
  return (double)(i + 1) * amax / HBINS;
}

/* p (counts) smoothed as MXNet's and TensorRT's KL calibration do: each
 * zero gets eps, the same mass taken evenly from the nonzero entries; then
 * normalised.  0 when p has no mass. */
static int smooth(double *p, int n) {
  const double eps = 1e-4;
  int nz = 0;
  for (int i = 0; i < n; i++) nz += p[i] == 0;
  if (nz == n) return 0;
  double take = eps * nz / (n - nz), s = 0;
  for (int i = 0; i < n; i++) {
    p[i] = p[i] == 0 ? eps : p[i] - take;
    s += p[i];
  }
  if (!(s > 0)) return 0;
  for (int i = 0; i < n; i++) p[i] /= s;
  return 1;
}

/* The first bin holds every zero of a ReLU's output, often half the
 * values: it is given the second bin's count (as NVIDIA's pytorch-quantization
 * does), else merging it into a quantization level dominates every KL and
 * the shortest threshold wins. */
static double th_entropy(const double *hist, double amax) {
  static double h[HBINS], p[HBINS], q[HBINS];
  memcpy(h, hist, sizeof h);
  h[0] = h[1];
  int best = HBINS;
  double bestkl = INFINITY;
  for (int i = 128; i <= HBINS; i++) {
    double outl = 0;
    for (int j = i; j < HBINS; j++) outl += h[j];
    for (int j = 0; j < i; j++) p[j] = h[j];
    p[i - 1] += outl;
    /* Q: h's first i bins merged into 128 levels, each spread back over its nonzero bins */
    for (int b = 0; b < 128; b++) {
      int lo = b * i / 128, hi = (b + 1) * i / 128, nz = 0;
      double sum = 0;
      for (int j = lo; j < hi; j++) sum += h[j], nz += h[j] != 0;
      for (int j = lo; j < hi; j++) q[j] = h[j] != 0 ? sum / nz : 0;
    }
    if (!smooth(p, i) || !smooth(q, i)) continue;
    double kl = 0;
    for (int j = 0; j < i; j++) kl += p[j] * log(p[j] / q[j]);
    if (kl < bestkl) bestkl = kl, best = i;
  }
  return (double)best * amax / HBINS;
}

/* ---- the cache ---- */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static int file_key(const char *path, uint64_t *h) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  unsigned char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) *h = fnv(*h, buf, n);
  fclose(f);
  return 0;
}

/* the model: its source, the candidates' names and input shapes (a row of
 * each: --set values that change shapes other than the batch change it) */
static uint64_t model_key(const Options *o, const Cand *c) {
  uint64_t h = 1469598103934665603ull;
  if (file_key(o->model, &h)) h = fnv(h, o->model, strlen(o->model));
  for (int i = 0; i < c->n; i++) {
    h = fnv(h, c->key[i], strlen(c->key[i]) + 1);
    h = fnv(h, c->shape[i], strlen(c->shape[i]) + 1);
  }
  return h;
}

static uint64_t weights_key(const Options *o) {
  uint64_t h = 1469598103934665603ull;
  if (!o->weights || file_key(o->weights, &h)) {
    char s[64];
    snprintf(s, sizeof s, "init seed %llu", o->seed);
    h = fnv(h, s, strlen(s));
  }
  return h;
}

/* A layer's key as one word in the cache: a space, a control character and
 * '%' written as %XX (an ONNX node name may hold spaces), and back */
static const char *key_encode(const char *key, char *out, size_t n) {
  size_t j = 0;
  for (const unsigned char *p = (const unsigned char *)key; *p && j + 4 < n; p++)
    if (*p <= ' ' || *p == '%' || *p == 127) j += (size_t)snprintf(out + j, n - j, "%%%02X", *p);
    else out[j++] = (char)*p;
  out[j] = 0;
  return out;
}

static int key_decode(const char *in, char *out, size_t n) {
  size_t j = 0;
  for (const char *p = in; *p; p++) {
    unsigned v;
    if (j + 1 >= n) return -1;
    if (*p == '%') {
      if (!isxdigit((unsigned char)p[1]) || !isxdigit((unsigned char)p[2]) || sscanf(p + 1, "%2x", &v) != 1) return -1;
      out[j++] = (char)v;
      p += 2;
    } else {
      out[j++] = *p;
    }
  }
  out[j] = 0;
  return 0;
}

static int write_cache(const char *path, const QuantTable *t, uint64_t mk, uint64_t wk, const char *model) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.ncc-tmp-%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return drv_error("--calibration-cache: cannot write %s: %s", path, strerror(errno));
  fprintf(f, "%s\n# written by ncc: the activation scales of %s's int8 layers (docs/precision.md, \"INT8\")\n",
          CACHE_MAGIC, model);
  fprintf(f, "model_key %016llx\nweights_key %016llx\nmethod %s\npercentile %.9g\nsamples %lld\n",
          (unsigned long long)mk, (unsigned long long)wk, t->method, t->percentile, (long long)t->samples);
  for (int i = 0; i < t->n; i++) {
    char ek[3 * sizeof t->l[i].key + 1];
    fprintf(f, "layer %s absmax %.9g scale %.9g error %.9g\n", key_encode(t->l[i].key, ek, sizeof ek), t->l[i].absmax,
            t->l[i].scale, t->l[i].error);
  }
  int bad = ferror(f);
  if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return drv_error("--calibration-cache: cannot write %s: %s", path, strerror(e));
  }
  return 0;
}

/* Reads path into t.  0: read and of this model; 1: error (after a message);
 * 2: of other weights or another method (calibrate again, if data are given) */
static int read_cache(const Options *o, const Cand *c, uint64_t mk, uint64_t wk, QuantTable *t, char *why,
                      size_t whyn) {
  FILE *f = fopen(o->cal_cache, "r");
  if (!f) return drv_error("--calibration-cache: cannot read %s: %s", o->cal_cache, strerror(errno));
  char line[1024];
  int ln = 0, rc = 0, nl = 0;
  unsigned long long fmk = 0, fwk = 0;
  int have_mk = 0, have_wk = 0;
  t->n = 0;
  t->l = calloc((size_t)c->n + 1, sizeof *t->l);
  if (!t->l) ncc_die("out of memory");
  while (!rc && fgets(line, sizeof line, f)) {
    ln++;
    size_t L = strlen(line);
    if (L && line[L - 1] == '\n') line[--L] = 0;
    else if (!feof(f)) rc = drv_error("%s:%d: line too long: not an ncc calibration cache", o->cal_cache, ln);
    if (rc) break;
    if (ln == 1) {
      if (strcmp(line, CACHE_MAGIC))
        rc = drv_error("%s:1: not an ncc calibration cache (it starts '%.40s', not '%s')", o->cal_cache, line,
                       CACHE_MAGIC);
      continue;
    }
    if (!L || line[0] == '#') continue;
    char key[480], word[16];
    double a, s, e, pct;
    long long smp;
    int end = -1;
    if (sscanf(line, "model_key %llx %n", &fmk, &end) == 1 && end == (int)L) have_mk = 1;
    else if (sscanf(line, "weights_key %llx %n", &fwk, &end) == 1 && end == (int)L) have_wk = 1;
    else if (sscanf(line, "method %15s %n", word, &end) == 1 && end == (int)L) snprintf(t->method, sizeof t->method, "%s", word);
    else if (sscanf(line, "percentile %lf %n", &pct, &end) == 1 && end == (int)L) t->percentile = pct;
    else if (sscanf(line, "samples %lld %n", &smp, &end) == 1 && end == (int)L) t->samples = smp;
    else if (sscanf(line, "layer %479s absmax %lf scale %lf error %lf %n", key, &a, &s, &e, &end) == 4 &&
             end == (int)L) {
      char dk[160];
      if (key_decode(key, dk, sizeof dk)) {
        rc = drv_error("%s:%d: layer %.60s: a bad %%XX escape or a name over %zu bytes", o->cal_cache, ln, key,
                       sizeof dk - 1);
        break;
      }
      memcpy(key, dk, strlen(dk) + 1);
      if (nl >= c->n) {
        rc = drv_error("%s:%d: layer %s: the model has %d int8 layers; this cache has more: it was made for "
                       "another model", o->cal_cache, ln, key, c->n);
        break;
      }
      if (!(s > 0) || !isfinite(s) || !(a >= 0) || !isfinite(a)) {
        rc = drv_error("%s:%d: layer %s: scale %g, absmax %g: a scale is positive and finite", o->cal_cache, ln,
                       key, s, a);
        break;
      }
      QuantLayer *q = &t->l[nl++];
      snprintf(q->key, sizeof q->key, "%.159s", key);   /* decoded: at most 159 bytes */
      q->absmax = a, q->scale = s, q->error = e;
    } else {
      rc = drv_error("%s:%d: cannot read '%.60s' (expected model_key, weights_key, method, percentile, samples "
                     "or layer KEY absmax A scale S error E)", o->cal_cache, ln, line);
    }
  }
  fclose(f);
  if (rc) return rc;
  if (ln == 0) return drv_error("%s: empty: not an ncc calibration cache", o->cal_cache);
  if (!have_mk || !have_wk || !t->method[0])
    return drv_error("%s: no %s line: not a complete ncc calibration cache", o->cal_cache,
                     !have_mk ? "model_key" : !have_wk ? "weights_key" : "method");
  if (fmk != mk || nl != c->n) {
    for (int i = 0; i < nl && i < c->n; i++)
      if (strcmp(t->l[i].key, c->key[i]))
        return drv_error("%s: made for another model (its layer %d is '%s', %s's is '%s'): calibrate this one "
                         "(--calibrate=X.npy) into another cache file", o->cal_cache, i + 1, t->l[i].key, o->model,
                         c->key[i]);
    return drv_error("%s: made for another model (or another version of %s: its source or its layers' input "
                     "shapes differ): calibrate again (--calibrate=X.npy)", o->cal_cache, o->model);
  }
  t->n = nl;
  /* compiling without --weights: the weights come at run time; the cache's are taken as they are */
  if (fwk != wk && !(o->cmd == CMD_COMPILE && !o->weights)) {
    snprintf(why, whyn, "it was made with other weights");
    return 2;
  }
  if (o->cal_method[0] && strcmp(o->cal_method, t->method)) {
    snprintf(why, whyn, "it holds the %s method's scales, --calibration-method is %s", t->method, o->cal_method);
    return 2;
  }
  if (!strcmp(t->method, "percentile") && o->percentile > 0 && o->percentile != t->percentile) {
    snprintf(why, whyn, "it holds the %g percentile, --percentile is %g", t->percentile, o->percentile);
    return 2;
  }
  return 0;
}

/* ---- the whole ---- */
static void decide(QuantTable *t, double max_error, int fallback) {
  t->max_error = max_error;
  t->fallback = fallback;
  for (int i = 0; i < t->n; i++) t->l[i].prec = t->l[i].error > max_error ? fallback : PREC_INT8;
}

static int calibrate_data(const Options *o, const Cand *c, QuantTable *t) {
  Data d = {0};
  int rc = read_data(o->calibrate, &d);
  if (rc) return rc;
  const char *method = o->cal_method[0] ? o->cal_method : "entropy";
  int minmax = !strcmp(method, "minmax");
  Stats st = {c->n, calloc((size_t)c->n + 1, sizeof(double)), minmax ? NULL : calloc((size_t)c->n + 1, sizeof *st.hist)};
  if (!st.amax || (!minmax && !st.hist)) ncc_die("out of memory");
  rc = run_build(o, PREC_FP32, hook_taps, &d, minmax ? 1 : 2, on_taps, &st, "the inputs' ranges");
  t->l = calloc((size_t)c->n + 1, sizeof *t->l);
  if (!t->l) ncc_die("out of memory");
  t->n = c->n;
  snprintf(t->method, sizeof t->method, "%s", method);
  t->percentile = o->percentile > 0 ? o->percentile : 99.99;
  t->samples = d.rows;
  for (int k = 0; !rc && k < c->n; k++) {
    QuantLayer *q = &t->l[k];
    snprintf(q->key, sizeof q->key, "%s", c->key[k]);
    q->absmax = st.amax[k];
    double th = !strcmp(method, "minmax") ? st.amax[k]
              : !strcmp(method, "percentile") ? th_percentile(st.hist[k], st.amax[k], t->percentile)
                                               : th_entropy(st.hist[k], st.amax[k]);
    q->scale = to_scale(th);
    q->prec = PREC_INT8;
  }
  free(st.amax);
  free(st.hist);
  /* step 2: each layer's error alone, its twin quantized with these scales */
  if (!rc) {
    QuantTable twin = *t;
    twin.fp32_missing = 1;
    twin.l = calloc((size_t)c->n + 1, sizeof *twin.l);
    if (!twin.l) ncc_die("out of memory");
    for (int k = 0; k < c->n; k++) {   /* the twin of layer KEY is KEY@int8, its b tap KEY@int8#b */
      twin.l[k] = t->l[k];
      int L = (int)strlen(t->l[k].key) - (c->tap[k] ? (int)strlen(IR_INT8_TAP_B) : 0);
      snprintf(twin.l[k].key, sizeof twin.l[k].key, "%.*s@int8%s", L < 150 ? L : 150, t->l[k].key,
               c->tap[k] ? IR_INT8_TAP_B : "");
    }
    int nn = c->n ? c->node[c->n - 1] + 1 : 0;   /* the candidates: one twin each */
    Errs e = {nn, calloc((size_t)nn + 1, sizeof(double)), calloc((size_t)nn + 1, sizeof(double))};
    if (!e.num || !e.den) ncc_die("out of memory");
    g_build = &twin;
    rc = run_build(o, PREC_INT8, hook_twins, &d, 1, on_twins, &e, "each layer's int8 error");
    g_build = NULL;
    for (int k = 0; k < c->n; k++) {
      int j = c->node[k];
      t->l[k].error = e.den[j] > 0 ? sqrt(e.num[j] / e.den[j]) : e.num[j] > 0 ? INFINITY : 0.0;
    }
    free(e.num);
    free(e.den);
    free(twin.l);
  }
  free(d.x);
  return rc;
}

int drv_calibrate(const Options *o) {
  static int busy;   /* the calibration's own builds come through model_build too */
  if (o->precision != PREC_INT8 || g_have || busy) return 0;
  busy = 1;
  Cand c = {0};
  if (count_candidates(o, &c) < 0) {
    busy = 0;
    return 1;
  }
  int rc = 0;
  if (c.n == 0)
    rc = drv_error("--precision=int8: %s has no conv2d or linear layer with weights, and no matmul, to quantize", o->model);
  uint64_t mk = rc ? 0 : model_key(o, &c), wk = weights_key(o);
  QuantTable *t = &g_table;
  memset(t, 0, sizeof *t);
  int fresh = 1;
  if (!rc && o->cal_cache && access(o->cal_cache, F_OK) == 0) {
    char why[256] = "";
    int r = read_cache(o, &c, mk, wk, t, why, sizeof why);
    if (r == 1) rc = 1;
    else if (r == 2 && !o->calibrate)
      rc = drv_error("--calibration-cache: %s is of this model, but %s: give --calibrate=X.npy to calibrate "
                     "again (the cache is rewritten)", o->cal_cache, why);
    else if (r == 2) {
      drv_note("calibrating again: the cache %s is of this model, but %s", o->cal_cache, why);
      free(t->l);
      memset(t, 0, sizeof *t);
    } else {
      fresh = 0;
      snprintf(t->source, sizeof t->source, "cache %s", o->cal_cache);
    }
  } else if (!rc && !o->calibrate) {
    rc = drv_error("--calibration-cache: cannot read %s: %s (give --calibrate=X.npy to make it)", o->cal_cache,
                   strerror(errno));
  }
  if (!rc && fresh) {
    double t0 = ncc_now();
    rc = calibrate_data(o, &c, t);
    if (!rc) {
      snprintf(t->source, sizeof t->source, "%s", o->calibrate);
      drv_log(o, "calibration: %d layers, %lld samples, %s, %.2f s", t->n, (long long)t->samples, t->method,
              ncc_now() - t0);
      if (o->cal_cache) rc = write_cache(o->cal_cache, t, mk, wk, o->model);
    }
  }
  if (!rc) {
    decide(t, o->max_error > 0 ? o->max_error : 0.05, o->int8_fallback);
    g_have = 1;
  }
  free(c.key);
  free(c.shape);
  free(c.node);
  free(c.tap);
  busy = 0;
  return rc;
}
