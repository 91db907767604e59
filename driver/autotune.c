/* autotune.c — --autotune=SECONDS: each GEMM shape's tile tried on the
 * device, within a time budget (docs/gpu.md, "Autotuning").
 *
 * Before the model is built (after an int8 calibration), the driver runs
 * the passes once to find its tensor-core GEMMs (ir_gemm_mma) and float32
 * tiled ones (ir_fp32_tiled), and keys each by its shape (ir_gemm_key).
 * For each shape with more than one candidate (ir_tile_candidates: the
 * default tile, then the larger tiles the model may choose; at fp32
 * ir_fp32_candidates: the default tile and the wider ones, each in one
 * stage and two), while the budget lasts, it builds a model of that one
 * layer (random weights and input from --seed; at int8 quantized at the
 * model's scales) once per candidate with --gemm-tile (and the stages),
 * runs it, and checks the output against the default tile's: every tile
 * adds each output's products in the same k order, so the bits must be
 * equal; a tile that differs is rejected (an ncc bug, said so).  On a GPU
 * each tile is also timed: the median of AUTOTUNE_RUNS runs of its kernels
 * alone (M_kernel_seconds), after one warm-up; the fastest wins.  Under
 * emulation a time says nothing about a GPU: the tile model's (rule's)
 * choice stands, now checked.
 *
 * The choices go into PassCtx.tune, which the precision pass (and
 * passes_fp32_tiles) read before the model, and the reason of each into
 * the generated code (the launch's comment).  They are kept in the compile
 * cache's folder, autotune.txt, a line per device and shape:
 *   DEVICE <tab> KEY <tab> TILE <tab> WHY
 * TILE is BMxBN, at fp32 BMxBN/S with S the stages (1 or 2); the file is
 * written atomically; a later build on the same device reads its shapes
 * from there and runs nothing.  Shapes the budget did not reach keep the
 * model's tile and are not written. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "../passes/passes.h"

#define AUTOTUNE_RUNS 10
#define AUTOTUNE_MAGIC "ncc-autotune 1"

static TuneTable g_tune;
static int g_have;

const TuneTable *drv_tune(void) { return g_have ? &g_tune : NULL; }

/* One GEMM shape: its key and the one-layer model that computes it */
typedef struct Job {
  char key[256];
  char net[1024];     /* the .net text of the one layer */
  int cand[IR_NTILES], nc;
  int stg[IR_NTILES];  /* a float32 GEMM's: each candidate's stages (1, 2); 0 for a tensor-core GEMM's */
  int model_pick;     /* the tile model's choice (an index in ir_mma_tiles; at fp32 an index in cand) */
  int prec;           /* the GEMM's precision (Node.prec), the one-layer model's */
  float qscale, qscale_b;   /* int8: its activation scales (a matmul's second operand's too) */
  DType store[2];     /* how the model stores its operands (x; a matmul's b): DT_F32, or narrow (the storage
                         pass: DT_F16, DT_BF16, DT_I8), which the one layer then stores so too */
} Job;

/* "128x128" or, at fp32, "128x128/2" (words: "128x128, two stages"): a candidate's or a cache line's tile and
 * stages */
static const char *tile_str(char *buf, size_t n, int tile, int stages, int words) {
  if (stages && words)
    snprintf(buf, n, "%dx%d, %s stage%s", ir_mma_tiles[tile].BM, ir_mma_tiles[tile].BN, stages == 2 ? "two" : "one",
             stages == 2 ? "s" : "");
  else if (stages) snprintf(buf, n, "%dx%d/%d", ir_mma_tiles[tile].BM, ir_mma_tiles[tile].BN, stages);
  else snprintf(buf, n, "%dx%d", ir_mma_tiles[tile].BM, ir_mma_tiles[tile].BN);
  return buf;
}

static void dims_str(char *buf, size_t n, const Shape *s) {
  size_t l = 0;
  buf[0] = 0;
  for (int i = 0; i < s->rank && l < n; i++) l += (size_t)snprintf(buf + l, n - l, "%s%lld", i ? ", " : "", (long long)s->d[i]);
}

/* The .net of node n alone, without bias or epilogue: the same GEMM.  An
 * operand the model stores narrow (the storage pass: 16 bits, or int8's one
 * byte) is computed by a relu of the input, which the one layer's storage
 * pass then stores narrow too: the GEMM reads it as in the model (cp.async of
 * 16-bit pieces where the model's does), not the float32 input. */
static int one_layer(const Node *n, const DType store[2], char *net, size_t len) {
  char a[160], b[160], xa[32], xb[32], pa[200] = "", pb[200] = "";
  int w;
  snprintf(xa, sizeof xa, "%s", n->op == OP_MATMUL ? "a" : "x");
  snprintf(xb, sizeof xb, "b");
  if (store[0] != DT_F32) snprintf(pa, sizeof pa, "%s_ = relu(%s)   # stored narrow, as the model stores it\n", xa, xa), strcat(xa, "_");
  if (store[1] != DT_F32) snprintf(pb, sizeof pb, "b_ = relu(b)   # stored narrow, as the model stores it\n"), strcat(xb, "_");
  if (n->op == OP_CONV2D) {
    const Attrs *t = &n->a;
    dims_str(a, sizeof a, &n->in[0]->shape);
    w = snprintf(net, len,
                 "model tune\ninput x: f32[%s]\n%s"
                 "y = conv2d(%s, %lld, kernel=[%d, %d], stride=[%d, %d], pad=[%d, %d], dilation=[%d, %d], groups=%d, "
                 "bias=false, name=\"gemm\")\noutput y\n",
                 a, pa, xa, (long long)n->in[1]->shape.d[0], t->kernel[0], t->kernel[1], t->stride[0], t->stride[1],
                 t->pad[0], t->pad[1], t->dilation[0], t->dilation[1], t->groups);
  } else if (n->op == OP_LINEAR) {
    dims_str(a, sizeof a, &n->in[0]->shape);
    w = snprintf(net, len, "model tune\ninput x: f32[%s]\n%sy = linear(%s, %lld, bias=false, name=\"gemm\")\noutput y\n",
                 a, pa, xa, (long long)n->out->shape.d[n->out->shape.rank - 1]);
  } else if (n->op == OP_MATMUL) {
    dims_str(a, sizeof a, &n->in[0]->shape);
    dims_str(b, sizeof b, &n->in[1]->shape);
    w = snprintf(net, len, "model tune\ninput a: f32[%s]\ninput b: f32[%s]\n%s%sy = matmul(%s, %s, name=\"gemm\")\noutput y\n",
                 a, b, pa, pb, xa, xb);
  } else {
    return -1;
  }
  return w < 0 || (size_t)w >= len ? -1 : 0;
}

/* The distinct tensor-core and float32 tiled GEMM shapes of the model's inference graph */
static int collect(const Options *o, Job **jobs, int *nj) {
  Graph *g = frontend_load(o->model, o->sets, o->nsets);
  if (!g || diag_errors()) {
    ir_graph_free(g);
    return 1;
  }
  PassCtx pc = drv_pass_ctx(o, 0, 0);
  pc.tune = NULL;
  pc.verbose = 0;
  if (passes_run(g, &pc, o->passes) != 0 || diag_errors()) {
    ir_graph_free(g);
    return 1;
  }
  *jobs = calloc((size_t)g->nnodes + 1, sizeof **jobs);
  if (!*jobs) ncc_die("out of memory");
  *nj = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    int fp32 = !o->cublas && ir_fp32_tiled(n);
    if (n->dead || !(ir_gemm_mma(n) || fp32)) continue;
    Job *j = &(*jobs)[*nj];
    j->store[0] = ir_store_type(n->in[0]);
    j->store[1] = n->op == OP_MATMUL ? ir_store_type(n->in[1]) : DT_F32;
    if (ir_gemm_key(n, j->key, sizeof j->key) != 0 || one_layer(n, j->store, j->net, sizeof j->net) != 0) continue;
    int seen = 0;
    for (int k = 0; k < *nj && !seen; k++) seen = !strcmp((*jobs)[k].key, j->key);
    if (seen) continue;
    j->prec = n->prec, j->qscale = n->qscale, j->qscale_b = n->qscale_b;
    if (fp32) {
      j->nc = ir_fp32_candidates(n, o->gemm_pipe, o->precision == PREC_FP32 && o->gemm_stages == 2, j->cand, j->stg,
                                 &j->model_pick);
    } else {
      j->nc = ir_tile_candidates(n, j->cand);
      j->model_pick = ir_tile_choose(n, -1, NULL, 0);
      memset(j->stg, 0, sizeof j->stg);
    }
    (*nj)++;
  }
  ir_graph_free(g);
  return 0;
}

/* ---- the cache ---- */
static int cache_path(char *out, size_t n) {
  char dir[4096];
  if (drv_cache_dir(dir, sizeof dir) != 0) return -1;
  int w = snprintf(out, n, "%s/autotune.txt", dir);
  return w < 0 || (size_t)w >= n ? -1 : 0;
}

typedef struct Line { char dev[320], key[256], why[256]; int tile, stages; } Line;

/* Every line of the cache (none when it does not exist); 1 on a corrupt file */
static int cache_read(const char *path, Line **lines, int *nl) {
  *lines = NULL;
  *nl = 0;
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char buf[1200];
  int ln = 0, cap = 0, rc = 0;
  while (!rc && fgets(buf, sizeof buf, f)) {
    ln++;
    size_t L = strlen(buf);
    if (L && buf[L - 1] == '\n') buf[--L] = 0;
    else if (!feof(f)) rc = drv_error("%s:%d: line too long: not an ncc autotune cache (delete it to start over)", path, ln);
    if (rc) break;
    if (ln == 1) {
      if (strcmp(buf, AUTOTUNE_MAGIC))
        rc = drv_error("%s:1: not an ncc autotune cache (it starts '%.40s'; delete it to start over)", path, buf);
      continue;
    }
    if (!L || buf[0] == '#') continue;
    char *f1 = buf, *f2 = strchr(f1, '\t'), *f3 = f2 ? strchr(f2 + 1, '\t') : NULL, *f4 = f3 ? strchr(f3 + 1, '\t') : NULL;
    if (!f4) {
      rc = drv_error("%s:%d: expected DEVICE, KEY, TILE and WHY separated by tabs (delete the file to start over)", path, ln);
      break;
    }
    *f2++ = 0, *f3++ = 0, *f4++ = 0;
    char *sl = strchr(f3, '/');   /* a float32 GEMM's stages: /1 or /2 */
    int stages = 0;
    if (sl) {
      stages = !strcmp(sl + 1, "1") ? 1 : !strcmp(sl + 1, "2") ? 2 : -1;
      *sl = 0;
    }
    int t = ir_tile_lookup(f3);
    if (stages && t != IR_TILE_64x64 && t != IR_TILE_64x128 && t != IR_TILE_128x128) t = -1;   /* fp32's tiles */
    if (sl) *sl = '/';
    if (t < 0 || stages < 0 || strlen(f1) >= sizeof(*lines)->dev || strlen(f2) >= sizeof(*lines)->key) {
      rc = drv_error("%s:%d: '%.40s' is no tile of ncc's (a float32 GEMM's: 64x64/S, 64x128/S or 128x128/S, S 1 or 2), or a "
                     "field is too long (delete the file to start over)", path, ln, f3);
      break;
    }
    if (*nl == cap) {
      cap = cap ? 2 * cap : 32;
      *lines = realloc(*lines, sizeof **lines * (size_t)cap);
      if (!*lines) ncc_die("out of memory");
    }
    Line *l = &(*lines)[(*nl)++];
    snprintf(l->dev, sizeof l->dev, "%s", f1);
    snprintf(l->key, sizeof l->key, "%s", f2);
    snprintf(l->why, sizeof l->why, "%s", f4);
    l->tile = t, l->stages = stages;
  }
  fclose(f);
  return rc;
}

static int cache_write(const char *path, const Line *lines, int nl) {
  char tmp[4300];
  snprintf(tmp, sizeof tmp, "%s.ncc-tmp-%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return drv_error("--autotune: cannot write %s: %s", path, strerror(errno));
  fprintf(f, "%s\n# written by ncc --autotune: the tile of each GEMM shape, by device; at fp32 /S its stages "
             "(docs/gpu.md, \"Autotuning\")\n# DEVICE\tKEY\tTILE\tWHY\n", AUTOTUNE_MAGIC);
  for (int i = 0; i < nl; i++) {
    char t[32];
    fprintf(f, "%s\t%s\t%s\t%s\n", lines[i].dev, lines[i].key, tile_str(t, sizeof t, lines[i].tile, lines[i].stages, 0),
            lines[i].why);
  }
  int bad = ferror(f);
  if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return drv_error("--autotune: cannot write %s: %s", path, strerror(e));
  }
  return 0;
}

/* ---- one tile of one shape ---- */
/* Builds the one-layer model at tile t, runs it: its output (malloc'd) and,
 * on a GPU, the median of its kernels' times; the device in dev */
static int run_tile(const Options *base, const Job *j, const char *net, int t, int stages, void **outp, size_t *nbytes,
                    double *ms, int *gpu, char *dev, size_t ndev) {
  Options o = *base;
  o.model = net;
  o.gemm_tile = t + 1;
  o.precision = j->prec;   /* the GEMM's own: an int8 model's layers left at fp32 (fp16, bf16) are built so */
  /* int8: the layer ("gemm") quantizes its input at the model's scale, from a table of its own, not a calibration */
  QuantLayer ql[2] = {{.scale = j->qscale, .error = -1, .prec = PREC_INT8},
                      {.scale = j->qscale_b, .error = -1, .prec = PREC_INT8}};
  snprintf(ql[0].key, sizeof ql[0].key, "gemm");
  snprintf(ql[1].key, sizeof ql[1].key, "gemm%s", IR_INT8_TAP_B);
  QuantTable qt = {.l = ql, .n = 2, .fallback = PREC_FP32};
  snprintf(qt.source, sizeof qt.source, "the model's scales (--autotune)");
  const QuantTable *saved = NULL;
  o.calibrate = NULL, o.cal_cache = NULL;
  if (j->prec == PREC_INT8) saved = drv_quant_swap(&qt);
  if (stages) {   /* fp32: one stage (no pipeline), or two (--gemm-stages=2 where the tile has one by default) */
    o.gemm_pipe = stages == 2;
    o.gemm_stages = stages == 2 && !ir_fp32_two_stages(t, 0) ? 2 : 0;
  }
  o.autotune = 0;
  o.nsets = 0;
  o.weights = NULL, o.freeze = 0, o.train = 0, o.passes = NULL, o.print_after = NULL, o.max_memory = 0, o.verbose = 0;
  o.out = NULL;
  o.quiet_init = 1;
  Model M;
  int rc = model_build(&o, &M);
  for (int i = 0; !rc && M.g && i < M.g->nnodes; i++) {   /* its operands stored as the model stores them */
    const Node *n = M.g->nodes[i];
    if (n->dead || !n->name || strcmp(n->name, "gemm") || !(ncc_ops[n->op].flags & OPF_GEMM_LIKE)) continue;
    for (int k = 0; k < (n->op == OP_MATMUL ? 2 : 1); k++) {
      if (ir_store_type(n->in[k]) != j->store[k])
        drv_note("autotune: %s: the trial's operand %d is stored as %s, the model's as %s: its times are another "
                 "kernel's", j->key, k, dtype_name(ir_store_type(n->in[k])), dtype_name(j->store[k]));
    }
  }
  if (!rc) rc = model_load(&o, &M);
  if (!rc) rc = model_create(&o, &M);
  if (!rc) rc = model_weights(&o, &M);
  void **in = NULL, **out = NULL;
  if (!rc) {
    in = alloc_tensors(M.inf->inputs, M.inf->ninputs);
    drv_random_inputs(&o, M.inf->inputs, M.inf->ninputs, in);
    out = alloc_tensors(M.inf->outputs, M.inf->noutputs);
    rc = model_infer(&M, M.inf->max_batch, in, out);
  }
  *ms = 0;
  *gpu = M.gpu;
  snprintf(dev, ndev, "%s", M.devdesc);
  if (!rc && M.gpu) {   /* timed: the kernels alone, AUTOTUNE_RUNS times */
    double (*kern)(const void *) = M.kernel_seconds;
    double ts[AUTOTUNE_RUNS];
    for (int i = 0; i < AUTOTUNE_RUNS && !rc; i++) {
      rc = model_infer(&M, M.inf->max_batch, in, out);
      ts[i] = kern ? kern(M.m) : 0;
      for (int j = i; j > 0 && ts[j] < ts[j - 1]; j--) {
        double x = ts[j];
        ts[j] = ts[j - 1], ts[j - 1] = x;
      }
    }
    if (!rc) *ms = 1e3 * ts[AUTOTUNE_RUNS / 2];
  }
  if (!rc) {
    const ncc_tensor_info *y = &M.inf->outputs[0];
    *nbytes = (size_t)numel(y->rank, y->shape) * (size_t)dt_size(y->dtype);
    *outp = malloc(*nbytes ? *nbytes : 1);
    if (!*outp) ncc_die("out of memory");
    memcpy(*outp, out[0], *nbytes);
  }
  if (in) free_tensors(in, M.inf->ninputs);
  if (out) free_tensors(out, M.inf->noutputs);
  model_close(&M);
  if (j->prec == PREC_INT8) drv_quant_swap(saved);
  return rc;
}

/* Tries the tiles of job j; fills *line (its device key, tile and why);
 * 0: done; 1: error; 2: the budget ran out first (nothing chosen) */
static int tune_job(const Options *o, const Job *j, const char *dir, double deadline, Line *line, int *builds) {
  char path[4200];
  snprintf(path, sizeof path, "%s/tune.net", dir);
  FILE *f = fopen(path, "w");
  if (!f || fputs(j->net, f) < 0 || fclose(f) != 0) return drv_error("--autotune: cannot write %s: %s", path, strerror(errno));
  void *ref = NULL;
  size_t nref = 0;
  double ms[IR_NTILES] = {0};
  int ok[IR_NTILES] = {0}, tried = 0, gpu = 0, rc = 0;
  char dev[320] = "";
  for (int c = 0; c < j->nc && !rc; c++) {
    if (ncc_now() > deadline) break;
    void *y = NULL;
    size_t ny = 0;
    rc = run_tile(o, j, path, j->cand[c], j->stg[c], &y, &ny, &ms[c], &gpu, dev, sizeof dev);
    (*builds)++;
    if (rc) break;
    tried++;
    if (c == 0) {
      ref = y, nref = ny, ok[0] = 1;
      continue;
    }
    ok[c] = ny == nref && memcmp(y, ref, ny) == 0;
    char tc[32], t0[32];
    if (!ok[c])
      drv_note("autotune: %s: tile %s gives other bits than the default %s: left out (an ncc bug; please "
               "report it)", j->key, tile_str(tc, sizeof tc, j->cand[c], j->stg[c], 0),
               tile_str(t0, sizeof t0, j->cand[0], j->stg[0], 0));
    free(y);
  }
  free(ref);
  if (rc) return rc;
  if (tried < j->nc) return 2;   /* not every tile: the model's choice stands, unrecorded */
  snprintf(line->key, sizeof line->key, "%s", j->key);
  int fp32 = j->stg[0] != 0, pick = 0;
  char tp[32];
  if (gpu) {   /* the fastest that gave the default's bits */
    for (int c = 1; c < j->nc; c++)
      if (ok[c] && ms[c] < ms[pick]) pick = c;
    size_t l = (size_t)snprintf(line->why, sizeof line->why, "%s, autotuned on %s:",
                                tile_str(tp, sizeof tp, j->cand[pick], j->stg[pick], 1), dev);
    for (int c = 0; c < j->nc && l < sizeof line->why; c++) {   /* each tile's median, or why it was left out */
      char t[48], tc[32];
      if (ok[c]) snprintf(t, sizeof t, "%.4g ms", ms[c]);
      else snprintf(t, sizeof t, "other bits");
      l += (size_t)snprintf(line->why + l, sizeof line->why - l, "%s %s %s", c ? "," : "",
                            tile_str(tc, sizeof tc, j->cand[c], j->stg[c], 0), t);
    }
  } else {     /* under emulation: the model's choice, if it gave the default's bits */
    for (int c = 0; c < j->nc; c++)
      if ((fp32 ? c == j->model_pick : j->cand[c] == j->model_pick) && ok[c]) pick = c;
    snprintf(line->why, sizeof line->why, "%s, the tile %s's choice: %d %s gave equal bits under emulation "
             "(no GPU to time them)", tile_str(tp, sizeof tp, j->cand[pick], j->stg[pick], 1), fp32 ? "rule" : "model",
             j->nc, fp32 ? "tiles and stages" : "tiles");
  }
  line->tile = j->cand[pick], line->stages = j->stg[pick];
  return 0;
}

int drv_autotune(const Options *o) {
  static int busy;   /* the autotuner's own builds come through model_build too */
  if (o->autotune <= 0 || g_have || busy) return 0;
  busy = 1;
  double t0 = ncc_now(), deadline = t0 + o->autotune;
  Job *jobs = NULL;
  int nj = 0, rc = collect(o, &jobs, &nj);
  char cpath[4200];
  Line *lines = NULL;
  int nl = 0;
  if (!rc && cache_path(cpath, sizeof cpath) != 0)
    rc = drv_error("--autotune: no writable cache folder for autotune.txt (NCC_CACHE_DIR, XDG_CACHE_HOME, HOME)");
  if (!rc) rc = cache_read(cpath, &lines, &nl);
  char dir[] = "/tmp/ncc-tune-XXXXXX";
  if (!rc && !mkdtemp(dir)) rc = drv_error("--autotune: cannot make a temporary folder: %s", strerror(errno));
  g_tune.e = calloc((size_t)nj + 1, sizeof *g_tune.e);
  if (!g_tune.e) ncc_die("out of memory");
  g_tune.n = 0;
  int cached = 0, tuned = 0, left = 0, single = 0, builds = 0, changed = 0;
  char devkey[320] = "";
  if (!rc) rc = drv_device_key(o, devkey, sizeof devkey);
  for (int i = 0; !rc && i < nj; i++) {
    const Job *j = &jobs[i];
    if (j->nc < 2) {   /* one candidate: nothing to try */
      single++;
      continue;
    }
    Line *hit = NULL;
    int at = -1;   /* the line of this device and shape */
    for (int k = 0; k < nl && at < 0; k++)
      if (!strcmp(lines[k].dev, devkey) && !strcmp(lines[k].key, j->key)) at = k;
    if (at >= 0 && (lines[at].stages != 0) != (j->stg[0] != 0)) {   /* a tensor-core shape's line without stages, a
                                                                      float32 one's with */
      rc = drv_error("%s: the line of '%s' %s stages (/1 or /2 after the tile): not ncc's (delete the file to start "
                     "over)", cpath, j->key, j->stg[0] ? "lacks its" : "has");
      break;
    }
    /* a choice that is none of this build's candidates (other flags: --gemm-pipeline=off leaves out two
     * stages; or an edited file) is tried again, and its line rewritten */
    for (int c = 0; at >= 0 && !hit && c < j->nc; c++)
      if (lines[at].tile == j->cand[c] && lines[at].stages == j->stg[c]) hit = &lines[at];
    if (hit) {
      cached++;
    } else {
      Line fresh;
      int r = tune_job(o, j, dir, deadline, &fresh, &builds);
      if (r == 1) rc = 1;
      if (r) {
        left += r == 2;
        continue;
      }
      snprintf(fresh.dev, sizeof fresh.dev, "%s", devkey);
      if (at < 0) {
        lines = realloc(lines, sizeof *lines * (size_t)(nl + 1));
        if (!lines) ncc_die("out of memory");
        at = nl++;
      }
      lines[at] = fresh;
      hit = &lines[at];
      tuned++, changed = 1;
    }
    TuneEntry *e = &g_tune.e[g_tune.n++];
    snprintf(e->key, sizeof e->key, "%s", hit->key);
    snprintf(e->why, sizeof e->why, "%s", hit->why);
    e->tile = hit->tile, e->stages = hit->stages;
  }
  char tnet[128];   /* the one-layer model tune_job wrote */
  snprintf(tnet, sizeof tnet, "%s/tune.net", dir);
  unlink(tnet);
  rmdir(dir);
  if (!rc && changed) rc = cache_write(cpath, lines, nl);
  if (!rc) {
    int narrow = 0;
    for (int k = 0; k < nj; k++) narrow += jobs[k].store[0] != DT_F32 || jobs[k].store[1] != DT_F32;
    char nw[96] = "";
    if (narrow) snprintf(nw, sizeof nw, "; %d read%s an operand stored narrow, as the model stores it", narrow,
                         narrow == 1 ? "s" : "");
    drv_note("autotune: %d GEMM shape%s: %d from %s, %d tried now (%d builds, %.1f s of %g)%s%s%s", nj,
             nj == 1 ? "" : "s", cached, cpath, tuned, builds, ncc_now() - t0, o->autotune,
             left ? ", the rest over the budget (the tile model's or rule's choice)" : "",
             single ? ", some with one tile to choose from" : "", nw);
    g_have = 1;
  }
  free(lines);
  free(jobs);
  busy = 0;
  return rc;
}
