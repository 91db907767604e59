/* train.c — `ncc train`: a model with a train block, trained on .npy data.
 *
 *   check the flags and map the data (before any compiling: a typo in a path
 *   costs no compile) -> build and load as `ncc run` does (build.c, load.c) ->
 *   the training API of the generated code (docs/generated-code.md: M_train_step_io,
 *   M_schedule_step, M_lr, M_step, M_set_seed, M_save, M_save_grads) ->
 *   weights (--weights, init.c's PyTorch defaults, or the --resume checkpoint) ->
 *   the loop: a loader thread gathers the next batch into the other of two host
 *   buffers while the step runs; at the end of each epoch the schedule steps,
 *   the test set is evaluated and the checkpoint written.
 *
 * Data: DIR/x.npy float32 [n, <the model input's shape without N>], DIR/y.npy
 * int32 or int64 labels [n] in [0, classes) or, when the training input only
 * the loss reads is float, float32 targets [n, ...] (a regression: the test
 * loss is then the mean squared error of the first output), optional
 * test_x.npy, test_y.npy;
 * memory-mapped, never read whole.  The batch is the model's N; an epoch is
 * floor(n / N) steps (the last partial batch is dropped, DataLoader's
 * drop_last=True), or with --keep-last ceil(n / N), the last step running
 * M_train_step_io_batch on the rows left (drop_last=False).  The order of epoch e (counted from 0 inside) is a
 * Fisher-Yates permutation drawn from splitmix64 seeded by (--seed, e), so
 * the batch of step k depends on k alone: a run resumed from a checkpoint
 * draws exactly the batches an unbroken run draws.
 *
 * Counting: steps and epochs are counted from 1 in every message and in
 * --log (row `step,epoch,loss,lr`: the step's number, its epoch, its loss, the
 * learning rate it used).  Test evaluation runs M_infer_io in batches of N;
 * the last partial batch is padded with zeros and the padding ignored, so
 * every test sample counts.  Loss and accuracy are computed here from the
 * logits (the model's first output, [N, classes]): mean cross-entropy in
 * double precision, accuracy by the first maximum (torch.argmax).
 *
 * A NaN or infinite loss stops the run with status 1 and leaves the last
 * checkpoint as it was. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "train_data.h"

/* Graph T's inputs in M_train_step_io's order: M_info()->train_inputs, which
 * the training codegen adds to ncc_model_info (it defines
 * NCC_HAVE_TRAIN_INPUTS beside the field).  Before it lands, the graph's
 * inputs in source order (the data, then the labels), which is the order
 * graph T keeps; inference's M_info leaves out the labels. */
#ifdef NCC_HAVE_TRAIN_INPUTS
static const ncc_tensor_info *train_inputs(const Model *M, int *n) {
  *n = M->inf->ntrain_inputs;
  return M->inf->train_inputs;
}
#else
static ncc_tensor_info g_tin[64];
static const ncc_tensor_info *train_inputs(const Model *M, int *n) {
  *n = 0;
  for (int i = 0; i < M->g->nnodes && *n < 64; i++) {
    const Node *nd = M->g->nodes[i];
    if (nd->op != OP_INPUT || !nd->out || !nd->name) continue;
    ncc_tensor_info *t = &g_tin[(*n)++];
    t->name = nd->name;
    t->dtype = (int)nd->out->dtype;      /* the IR's DType order is libnccrt's */
    t->rank = nd->out->shape.rank;
    for (int k = 0; k < t->rank && k < 8; k++) t->shape[k] = nd->out->shape.d[k];
  }
  return g_tin;
}
#endif

/* ---- the data ------------------------------------------------------------ */


static void split_free(Split *s) {
  ncc_npy_unmap(&s->x);
  ncc_npy_unmap(&s->y);
  free(s->labels);
  s->labels = NULL;
}

static int file_exists(const char *p) { return access(p, F_OK) == 0; }

/* Maps DIR/<prefix>x.npy and y.npy and checks them against the model's data
 * input (shape without N: want[1..rank-1]), its label or target input yin
 * (int32 labels [N], or float32 targets [N, ...]) and the classes (0: unknown). */
static int split_open(Split *s, const char *dir, const char *prefix, const ncc_tensor_info *xin,
                      const ncc_tensor_info *yin, int64_t classes) {
  char err[2048], msg[4400], got[256], want[256];
  memset(s, 0, sizeof *s);
  snprintf(s->xpath, sizeof s->xpath, "%s/%sx.npy", dir, prefix);
  snprintf(s->ypath, sizeof s->ypath, "%s/%sy.npy", dir, prefix);
  for (int k = 0; k < 2; k++) {
    const char *p = k ? s->ypath : s->xpath;
    if (!file_exists(p)) return drv_error("training data: %s: %s", p, strerror(errno));
  }
  if (ncc_npy_map(s->xpath, &s->x, err, sizeof err)) return drv_error("training data: %s", with_path(msg, sizeof msg, s->xpath, err));
  if (ncc_npy_map(s->ypath, &s->y, err, sizeof err)) return drv_error("training data: %s", with_path(msg, sizeof msg, s->ypath, err));
  /* x: float32 [n, shape of the input without N] */
  int64_t sample[8];
  for (int i = 1; i < xin->rank; i++) sample[i - 1] = xin->shape[i];
  tensor_str(want, sizeof want, NCC_F32, xin->rank - 1, sample);
  if (s->x.dtype != NCC_F32)
    return drv_error("%s: the samples must be float32 ('<f4'); this file holds %s", s->xpath,
                     s->x.dtype == NCC_F64 ? "float64 (x.astype(np.float32) converts it)" : "another dtype");
  int same = s->x.rank == xin->rank;
  for (int i = 1; same && i < xin->rank; i++) same = s->x.shape[i] == xin->shape[i];
  if (!same) {
    int64_t sh[8];
    for (int i = 1; i < s->x.rank; i++) sh[i - 1] = s->x.shape[i];
    tensor_str(got, sizeof got, NCC_F32, s->x.rank > 0 ? s->x.rank - 1 : 0, sh);
    return drv_error("%s: shape mismatch: each sample is %s%s, but the model's input %s wants %s (samples first, "
                     "then the input's shape without N)",
                     s->xpath, s->x.rank == 0 ? "a scalar" : got, s->x.rank == 0 ? "" : "", xin->name, want);
  }
  s->n = s->x.shape[0];
  s->row = (size_t)numel(xin->rank - 1, sample) * sizeof(float);
  if (yin->dtype == NCC_F32) {   /* y: float32 targets [n, shape of the target input without N] */
    for (int i = 1; i < yin->rank; i++) sample[i - 1] = yin->shape[i];
    tensor_str(want, sizeof want, NCC_F32, yin->rank - 1, sample);
    if (s->y.dtype != NCC_F32)
      return drv_error("%s: the targets must be float32 ('<f4'), as the model's input %s; this file holds %s",
                       s->ypath, yin->name,
                       s->y.dtype == NCC_F64 ? "float64 (y.astype(np.float32) converts it)" : "another dtype");
    same = s->y.rank == yin->rank;
    for (int i = 1; same && i < yin->rank; i++) same = s->y.shape[i] == yin->shape[i];
    if (!same) {
      int64_t sh[8];
      for (int i = 1; i < s->y.rank; i++) sh[i - 1] = s->y.shape[i];
      tensor_str(got, sizeof got, NCC_F32, s->y.rank > 0 ? s->y.rank - 1 : 0, sh);
      return drv_error("%s: shape mismatch: each target is %s, but the model's input %s wants %s (samples first, "
                       "then the input's shape without N)",
                       s->ypath, s->y.rank == 0 ? "a scalar" : got, yin->name, want);
    }
    if (s->y.shape[0] != s->n)
      return drv_error("%s has %lld samples but %s has %lld targets: they must have the same length", s->xpath,
                       (long long)s->n, s->ypath, (long long)s->y.shape[0]);
    s->yfloat = 1;
    s->yrow = (size_t)numel(yin->rank - 1, sample) * sizeof(float);
    return 0;
  }
  s->yrow = sizeof(int32_t);
  /* y: int32 or int64 [n] */
  if (s->y.dtype != NCC_I32 && s->y.dtype != NCC_I64)
    return drv_error("%s: the labels must be int32 or int64 ('<i4' or '<i8'), this file holds %s", s->ypath,
                     s->y.dtype == NCC_F32 || s->y.dtype == NCC_F64 ? "floating-point numbers" : "another dtype");
  if (s->y.rank != 1)
    return drv_error("%s: the labels must be one-dimensional [samples], this file has %d dimensions", s->ypath,
                     s->y.rank);
  if (s->y.shape[0] != s->n)
    return drv_error("%s has %lld samples but %s has %lld labels: they must have the same length", s->xpath,
                     (long long)s->n, s->ypath, (long long)s->y.shape[0]);
  s->labels = malloc((size_t)(s->n > 0 ? s->n : 1) * sizeof *s->labels);
  if (!s->labels) return drv_error("%s: out of memory for %lld labels", s->ypath, (long long)s->n);
  for (int64_t i = 0; i < s->n; i++) {
    int64_t v;
    if (s->y.dtype == NCC_I32) { int32_t t; memcpy(&t, (const char *)s->y.data + 4 * i, 4); v = t; }
    else memcpy(&v, (const char *)s->y.data + 8 * i, 8);
    if (v < 0 || (classes > 0 && v >= classes) || v > INT32_MAX) {
      char range[96];
      if (classes > 0) snprintf(range, sizeof range, "[0, %lld) (the model has %lld classes)", (long long)classes,
                                (long long)classes);
      else snprintf(range, sizeof range, "[0, 2^31)");
      return drv_error("%s: label %lld at index %lld is outside %s", s->ypath, (long long)v, (long long)i, range);
    }
    s->labels[i] = (int32_t)v;
  }
  return 0;
}

/* ---- the generated training API ----------------------------------------- */

typedef struct TrainApi {
  int (*step_io)(void *m, const void *const *inputs, float *loss);
  int (*schedule_step)(void *m);
  double (*lr)(const void *m);
  int64_t (*step)(const void *m);
  void (*set_seed)(void *m, uint64_t seed);
  int (*step_io_batch)(void *m, int batch, const void *const *in, float *loss);   /* optional */
  int (*save)(void *m, const char *path);
  int (*save_grads)(void *m, const char *path);
  int (*host_alloc)(void *m, void **p, size_t bytes);   /* optional: page-locked batches */
  void (*host_free)(void *m, void *p);
  double (*loss_scale)(const void *m);          /* optional: fp16 training's loss scaler */
  int64_t (*skipped_steps)(const void *m);
} TrainApi;

static int train_api(const Model *M, TrainApi *A) {
  char sym[400];
#define LOOKUP(field, suffix)                                                                          \
  do {                                                                                                 \
    snprintf(sym, sizeof sym, "%s_" suffix, M->name);                                                  \
    *(void **)&A->field = dlsym(M->so, sym);                                                           \
    if (!A->field) return drv_internal("the compiled model lacks %s (docs/generated-code.md)", sym);   \
  } while (0)
  LOOKUP(step_io, "train_step_io");
  snprintf(sym, sizeof sym, "%s_train_step_io_batch", M->name);   /* --keep-last's partial batches */
  *(void **)&A->step_io_batch = dlsym(M->so, sym);
  LOOKUP(schedule_step, "schedule_step");
  LOOKUP(lr, "lr");
  LOOKUP(step, "step");
  LOOKUP(set_seed, "set_seed");
  LOOKUP(save, "save");
  LOOKUP(save_grads, "save_grads");
#undef LOOKUP
  snprintf(sym, sizeof sym, "%s_host_alloc", M->name);
  *(void **)&A->host_alloc = dlsym(M->so, sym);
  snprintf(sym, sizeof sym, "%s_host_free", M->name);
  *(void **)&A->host_free = dlsym(M->so, sym);
  if (!A->host_alloc || !A->host_free) A->host_alloc = NULL, A->host_free = NULL;
  snprintf(sym, sizeof sym, "%s_loss_scale", M->name);
  *(void **)&A->loss_scale = dlsym(M->so, sym);
  snprintf(sym, sizeof sym, "%s_skipped_steps", M->name);
  *(void **)&A->skipped_steps = dlsym(M->so, sym);
  return 0;
}

static const char *merr(const Model *M) {
  const char *e = M->error(M->m);
  return e && *e ? e : "(no message)";
}

/* ---- evaluation ---------------------------------------------------------- */

/* Mean cross-entropy and accuracy of the logits of the test set; with float
 * targets (regression), the mean squared error of the first output (acc -1). */
static int evaluate(Model *M, const Split *te, int xi, int yi, int64_t N, int64_t classes, double *loss, double *acc) {
  const ncc_model_info *inf = M->inf;
  void **in = alloc_tensors(inf->inputs, inf->ninputs);
  void **out = alloc_tensors(inf->outputs, inf->noutputs);
  double sum = 0;
  int64_t right = 0;
  int rc = 0;
  for (int64_t at = 0; at < te->n && !rc; at += N) {
    int64_t r = te->n - at < N ? te->n - at : N;
    memcpy(in[xi], (const char *)te->x.data + (size_t)at * te->row, (size_t)r * te->row);
    if (r < N) memset((char *)in[xi] + (size_t)r * te->row, 0, (size_t)(N - r) * te->row);
    if (yi >= 0) {
      memset(in[yi], 0, (size_t)N * te->yrow);
      if (te->yfloat) memcpy(in[yi], (const char *)te->y.data + (size_t)at * te->yrow, (size_t)r * te->yrow);
      else memcpy(in[yi], te->labels + at, (size_t)r * sizeof(int32_t));
    }
    rc = model_infer(M, inf->batch_variable ? (int)r : inf->max_batch, in, out);   /* the last batch: its rows only */
    const float *lg = (const float *)out[0];
    if (te->yfloat) {   /* squared error per element, summed per sample; the mean over elements below */
      size_t per = te->yrow / sizeof(float);
      const float *tg = (const float *)te->y.data + (size_t)at * per;
      for (size_t j = 0; !rc && j < (size_t)r * per; j++) sum += ((double)lg[j] - tg[j]) * ((double)lg[j] - tg[j]);
      continue;
    }
    for (int64_t i = 0; !rc && i < r; i++) {
      const float *row = lg + i * classes;
      int64_t best = 0;
      double mx = row[0], se = 0;
      for (int64_t c = 1; c < classes; c++)
        if (row[c] > row[best] || (isnan(row[c]) && !isnan(row[best]))) best = c;
      for (int64_t c = 0; c < classes; c++) if (row[c] > mx) mx = row[c];
      for (int64_t c = 0; c < classes; c++) se += exp((double)row[c] - mx);
      sum += mx + log(se) - row[te->labels[at + i]];
      right += best == te->labels[at + i];
    }
  }
  free_tensors(in, inf->ninputs);
  free_tensors(out, inf->noutputs);
  if (te->yfloat) {
    *loss = te->n ? sum / ((double)te->n * (double)(te->yrow / sizeof(float))) : 0;
    *acc = -1;
  } else {
    *loss = te->n ? sum / (double)te->n : 0;
    *acc = te->n ? 100.0 * (double)right / (double)te->n : 0;
  }
  return rc;
}

/* ---- the command --------------------------------------------------------- */

static void fmt_time(char *buf, size_t n, double s) {
  if (!(s >= 0) || s > 1e7) snprintf(buf, n, "?");
  else if (s < 60) snprintf(buf, n, "%.0f s", s);
  else if (s < 3600) snprintf(buf, n, "%d min %02d s", (int)s / 60, (int)s % 60);
  else snprintf(buf, n, "%d h %02d min", (int)s / 3600, (int)s % 3600 / 60);
}

typedef struct Run {
  const Options *o;
  Model M;
  TrainApi A;
  Split tr, te;
  int have_test;
  int xi, yi;                   /* indices in the train inputs: data, labels */
  int exi, eyi;                 /* in the inference inputs (eyi -1: none) */
  int64_t N, classes, spe, total, start;
  FILE *log;
  const ncc_tensor_info *tin;   /* the training inputs */
  int ntin;
} Run;

/* Which train input is the data and which the labels or targets: two
 * inputs, a float32 one with the batch first (the data), and int32 labels
 * [N] or, for a regression, float32 targets [N, ...]: with two float inputs
 * the target is the one inference does not read (a loss's second operand). */
static int inf_reads(const ncc_model_info *inf, const char *name) {
  for (int i = 0; i < inf->ninputs; i++)
    if (!strcmp(inf->inputs[i].name, name)) return 1;
  return 0;
}

static int pick_inputs(Run *R) {
  const ncc_model_info *inf = R->M.inf;
  const ncc_tensor_info *ti = R->tin = train_inputs(&R->M, &R->ntin);
  int nti = R->ntin;
  char s0[256];
  R->xi = R->yi = -1;
  for (int i = 0; i < nti; i++)
    if ((ti[i].dtype != NCC_F32 && ti[i].dtype != NCC_I32) || ti[i].rank < 1 ||
        (ti[i].dtype == NCC_I32 && ti[i].rank != 1))
      return drv_error("%s: training input %s is %s; `ncc train` feeds a float32 data input [N, ...] and int32 "
                       "labels [N] or float32 targets [N, ...]",
                       R->o->model, ti[i].name, tensor_str(s0, sizeof s0, ti[i].dtype, ti[i].rank, ti[i].shape));
  if (nti != 2)
    return drv_error("%s: the training step reads %d input%s; `ncc train` feeds two: the data (x.npy) and the "
                     "labels or targets (y.npy)",
                     R->o->model, nti, nti == 1 ? "" : "s");
  if (ti[0].dtype == NCC_I32 && ti[1].dtype == NCC_I32)
    return drv_error("%s: both training inputs (%s, %s) are int32; `ncc train` feeds one float32 data input",
                     R->o->model, ti[0].name, ti[1].name);
  if (ti[0].dtype != ti[1].dtype) {   /* float data, int labels */
    R->xi = ti[0].dtype == NCC_F32 ? 0 : 1;
    R->yi = 1 - R->xi;
  } else {                            /* both float: the targets are what inference does not read */
    int r0 = inf_reads(inf, ti[0].name), r1 = inf_reads(inf, ti[1].name);
    if (r0 == r1)
      return drv_error("%s: cannot tell the data from the targets: inference reads %s of the float inputs %s "
                       "and %s (the targets are the one only the loss reads)",
                       R->o->model, r0 ? "both" : "neither", ti[0].name, ti[1].name);
    R->xi = r0 ? 0 : 1;
    R->yi = 1 - R->xi;
  }
  R->N = ti[R->xi].shape[0];
  if (ti[R->yi].shape[0] != R->N)
    return drv_error("%s: the data input %s has batch %lld but the %s %s have %lld", R->o->model, ti[R->xi].name,
                     (long long)R->N, ti[R->yi].dtype == NCC_F32 ? "targets" : "labels", ti[R->yi].name,
                     (long long)ti[R->yi].shape[0]);
  /* classes: the logits, the first output, [N, classes] */
  R->classes = 0;
  if (ti[R->yi].dtype == NCC_I32 && inf->noutputs > 0 && inf->outputs[0].dtype == NCC_F32 && inf->outputs[0].rank == 2 &&
      inf->outputs[0].shape[0] == R->N)
    R->classes = inf->outputs[0].shape[1];
  /* the same inputs for inference (evaluation) */
  R->exi = R->eyi = -1;
  for (int i = 0; i < inf->ninputs; i++) {
    if (!strcmp(inf->inputs[i].name, ti[R->xi].name)) R->exi = i;
    if (!strcmp(inf->inputs[i].name, ti[R->yi].name)) R->eyi = i;
  }
  return 0;
}

static int check_files(const Options *o) {
  if (o->weights && access(o->weights, R_OK) != 0)
    return drv_error("cannot read weights '%s': %s", o->weights, strerror(errno));
  if (o->resume && access(o->checkpoint, R_OK) != 0)
    return drv_error("--resume: cannot read the checkpoint %s: %s", o->checkpoint, strerror(errno));
  const char *outs[3] = {o->checkpoint, o->log, o->save_grads};
  for (int i = 0; i < 3; i++) {
    if (!outs[i]) continue;
    char *d = path_dir(outs[i]);
    int bad = access(d, W_OK) != 0, e = errno;
    int rc = bad ? drv_error("cannot write %s: directory %s: %s", outs[i], d, strerror(e)) : 0;
    free(d);
    if (rc) return rc;
  }
  const char *need[2] = {"x.npy", "y.npy"};
  for (int i = 0; i < 2; i++) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", o->data, need[i]);
    if (access(p, R_OK) != 0) return drv_error("training data: cannot read %s: %s", p, strerror(errno));
  }
  return 0;
}

static int save_checkpoint(Run *R) {
  if (!R->o->checkpoint) return 0;
  if (R->A.save(R->M.m, R->o->checkpoint) != 0) {
    char msg[4400];
    return drv_error("cannot write the checkpoint: %s", with_path(msg, sizeof msg, R->o->checkpoint, merr(&R->M)));
  }
  return 0;
}

static int open_log(Run *R) {
  const Options *o = R->o;
  if (!o->log) return 0;
  /* a resumed run continues its log: rows of steps after the checkpoint's are
   * appended (earlier rows of the interrupted run past it stay; they repeat) */
  int append = o->resume && R->start > 0 && file_exists(o->log);
  R->log = fopen(o->log, append ? "a" : "w");
  if (!R->log) return drv_error("cannot write the log %s: %s", o->log, strerror(errno));
  if (!append) fprintf(R->log, "step,epoch,loss,lr\n");
  return 0;
}

/* The loader's batches in the model's host memory (page-locked on a GPU). */
static void *batch_alloc(void *ctx, size_t n) {
  Run *R = ctx;
  void *p = NULL;
  return R->A.host_alloc(R->M.m, &p, n) == 0 ? p : NULL;
}
static void batch_free(void *ctx, void *p) {
  Run *R = ctx;
  R->A.host_free(R->M.m, p);
}

static int loop(Run *R) {
  const Options *o = R->o;
  int tty = isatty(2);
  size_t xbytes = (size_t)R->N * R->tr.row;
  Loader L;
  HostMem mem = {batch_alloc, batch_free, R};
  int rc = loader_start(&L, &R->tr, R->N, R->spe, o->seed, !o->no_shuffle, xbytes, R->A.host_alloc ? &mem : NULL)
               ? drv_error("out of memory for the batches, or no loader thread")
               : 0;
  const void *in[64];
  int nti = R->ntin;
  double t0 = ncc_now(), tlast = 0, ep_sum = 0, last_acc = -1, last_tl = -1;
  int64_t ep_steps = 0, k;
  int64_t skipped_before = 0;   /* fp16: steps the loss scaler skipped before this epoch (this run) */
  int saved_at_end = 0;
  if (rc) { loader_stop(&L); return rc; }
  if (nti > 64) { loader_stop(&L); return drv_internal("more than 64 training inputs"); }
  for (int i = 0; i < nti; i++) in[i] = NULL;
  if (R->start < R->total) loader_request(&L, R->start);
  for (k = R->start; k < R->total && !rc; k++) {
    int b = (int)(k & 1);
    loader_wait(&L, k);
    if (k + 1 < R->total) loader_request(&L, k + 1);
    in[R->xi] = L.x[b];
    in[R->yi] = L.y[b];
    double lr = R->A.lr(R->M.m);
    float loss = 0;
    int64_t rows = L.rows[b];
    int src = rows < R->N && R->A.step_io_batch ? R->A.step_io_batch(R->M.m, (int)rows, in, &loss)
                                                : R->A.step_io(R->M.m, in, &loss);
    if (src != 0) {
      rc = drv_error("step %lld failed on %s: %s", (long long)(k + 1), R->M.devdesc, merr(&R->M));
      break;
    }
    if (!isfinite(loss)) {
      rc = drv_error("step %lld: the loss is %s (the checkpoint%s%s is left as it was)", (long long)(k + 1),
                     isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf", o->checkpoint ? " " : "",
                     o->checkpoint ? o->checkpoint : "");
      break;
    }
    int64_t epoch = k / R->spe;
    if (R->log) fprintf(R->log, "%lld,%lld,%.9g,%.9g\n", (long long)(k + 1), (long long)(epoch + 1), loss, lr);
    ep_sum += loss;
    ep_steps++;
    double now = ncc_now() - t0;
    int64_t done = k + 1 - R->start;
    double sps = now > 0 ? (double)(done * R->N) / now : 0;
    if (tty && (now - tlast > 0.1 || k + 1 == R->total || (k + 1) % R->spe == 0)) {
      char left[64];
      fmt_time(left, sizeof left, done ? now / (double)done * (double)(R->total - k - 1) : -1);
      fprintf(stderr, "\rstep %lld/%lld  epoch %lld  loss %.4f  %.0f samples/s  %s left   ", (long long)(k + 1),
              (long long)R->total, (long long)(epoch + 1), loss, sps, left);
      fflush(stderr);
      tlast = now;
    }
    if ((k + 1) % R->spe == 0) {       /* the end of an epoch */
      if (tty) fputc('\n', stderr);
      else {
        char left[64];
        fmt_time(left, sizeof left, done ? now / (double)done * (double)(R->total - k - 1) : -1);
        fprintf(stderr, "epoch %lld: step %lld/%lld, %.0f samples/s, %s left\n", (long long)(epoch + 1),
                (long long)(k + 1), (long long)R->total, sps, left);
      }
      if (R->A.schedule_step(R->M.m) != 0) {
        rc = drv_error("epoch %lld: the schedule step failed: %s", (long long)(epoch + 1), merr(&R->M));
        break;
      }
      double tl, acc;
      if (R->have_test) {
        if ((rc = evaluate(&R->M, &R->te, R->exi, R->eyi, R->N, R->classes, &tl, &acc)) != 0) break;
        if (acc >= 0)
          printf("epoch %lld: train loss %.4f, test loss %.4f, test accuracy %.2f%%\n", (long long)(epoch + 1),
                 ep_sum / (double)ep_steps, tl, acc);
        else
          printf("epoch %lld: train loss %.4f, test loss (mean squared error) %.6g\n", (long long)(epoch + 1),
                 ep_sum / (double)ep_steps, tl);
        last_acc = acc;
        last_tl = tl;
      } else {
        printf("epoch %lld: train loss %.4f\n", (long long)(epoch + 1), ep_sum / (double)ep_steps);
      }
      if (R->A.skipped_steps && R->A.loss_scale) {   /* fp16: the loss scaler's say in this epoch */
        int64_t sk = R->A.skipped_steps(R->M.m);
        if (sk > skipped_before)
          printf("epoch %lld: %lld step%s skipped (fp16 gradients overflowed: no update); loss scale now %g\n",
                 (long long)(epoch + 1), (long long)(sk - skipped_before), sk - skipped_before == 1 ? "" : "s",
                 R->A.loss_scale(R->M.m));
        skipped_before = sk;
      }
      fflush(stdout);
      ep_sum = 0;
      ep_steps = 0;
      if (R->log) fflush(R->log);
      if ((rc = save_checkpoint(R)) != 0) break;
      saved_at_end = k + 1 == R->total;
    }
  }
  loader_stop(&L);
  if (tty && !rc && R->total % R->spe) fputc('\n', stderr);
  if (rc) return rc;
  if (!saved_at_end && (rc = save_checkpoint(R)) != 0) return rc;
  if (o->save_grads && R->total > R->start && R->A.save_grads(R->M.m, o->save_grads) != 0) {
    char msg[4400];
    return drv_error("cannot write the gradients: %s", with_path(msg, sizeof msg, o->save_grads, merr(&R->M)));
  }
  double secs = ncc_now() - t0;
  int64_t ran = R->total - R->start;
  if (R->have_test && ran > 0 && R->total % R->spe) {   /* ended mid-epoch: evaluate the final weights */
    if ((rc = evaluate(&R->M, &R->te, R->exi, R->eyi, R->N, R->classes, &last_tl, &last_acc)) != 0) return rc;
  }
  printf("trained %lld step%s (%lld to %lld of %lld, %.2f epochs) in %.1f s, %.0f samples/s", (long long)ran,
         ran == 1 ? "" : "s", (long long)(R->start + (ran > 0)), (long long)R->total, (long long)R->total,
         (double)R->total / (double)R->spe, secs, secs > 0 ? (double)(ran * R->N) / secs : 0.0);
  if (last_acc >= 0) printf("; final test accuracy %.2f%%", last_acc);
  else if (last_tl >= 0) printf("; final test loss (mean squared error) %.6g", last_tl);
  printf("\n");
  if (o->precision == PREC_FP16 && R->A.loss_scale && R->A.skipped_steps) {
    int64_t sk = R->A.skipped_steps(R->M.m);
    printf("fp16 loss scaling: scale %g now; %lld step%s skipped (a gradient overflowed: no update, the scale halved)\n",
           R->A.loss_scale(R->M.m), (long long)sk, sk == 1 ? "" : "s");
  }
  return 0;
}

int train_main(const Options *o) {
  Run R;
  memset(&R, 0, sizeof R);
  R.o = o;
  int rc = check_files(o);
  if (rc) return rc;
  rc = model_build(o, &R.M);
  if (!rc && !R.M.g->train.present)
    rc = drv_error("%s has no train { ... } block: nothing to train (docs/language.md, \"The train block\")",
                   o->model);
  if (!rc) rc = model_load(o, &R.M);
  if (!rc) rc = pick_inputs(&R);
  if (!rc) rc = split_open(&R.tr, o->data, "", &R.tin[R.xi], &R.tin[R.yi], R.classes);
  if (!rc) {
    char tx[4200], ty[4200];
    snprintf(tx, sizeof tx, "%s/test_x.npy", o->data);
    snprintf(ty, sizeof ty, "%s/test_y.npy", o->data);
    if (file_exists(tx) != file_exists(ty))
      rc = drv_error("test data: %s exists but %s does not; give both or neither", file_exists(tx) ? tx : ty,
                     file_exists(tx) ? ty : tx);
    else if (file_exists(tx)) {
      rc = split_open(&R.te, o->data, "test_", &R.tin[R.xi], &R.tin[R.yi], R.classes);
      R.have_test = 1;
      if (!rc && R.te.yfloat) {
        const ncc_tensor_info *o0 = R.M.inf->noutputs ? &R.M.inf->outputs[0] : NULL;
        int same = o0 && o0->dtype == NCC_F32 && o0->rank == R.tin[R.yi].rank;
        for (int i = 0; same && i < o0->rank; i++) same = o0->shape[i] == R.tin[R.yi].shape[i];
        if (!same)
          rc = drv_error("test data given, but the model's first output (%s) is not shaped like the targets %s; "
                         "the test loss (mean squared error) compares them",
                         o0 ? o0->name : "no output", R.tin[R.yi].name);
      } else if (!rc && R.classes <= 0)
        rc = drv_error("test data given, but the model's first output is not logits [N, classes] (%s); "
                       "the test accuracy needs them",
                       R.M.inf->noutputs ? R.M.inf->outputs[0].name : "no output");
      if (!rc && R.exi < 0)
        rc = drv_error("test data given, but inference does not read the data input %s",
                       R.tin[R.xi].name);
    }
  }
  if (!rc) {
    R.spe = o->keep_last ? (R.tr.n + R.N - 1) / R.N : R.tr.n / R.N;
    if (R.spe == 0)
      rc = drv_error("%s: %lld samples, fewer than one batch of %lld (--set N=... makes the batch smaller)",
                     R.tr.xpath, (long long)R.tr.n, (long long)R.N);
  }
  if (!rc) rc = train_api(&R.M, &R.A);
  if (!rc && o->keep_last && R.tr.n % R.N && (!R.A.step_io_batch || !R.M.inf->train_batch_variable))
    rc = drv_error("--keep-last: this model's training step runs whole batches of %lld only (its forward mixes the "
                   "rows of a batch; --emit=report's batch line says where); leave --keep-last out to drop the last "
                   "%lld samples", (long long)R.N, (long long)(R.tr.n % R.N));
  if (!rc) rc = model_create(o, &R.M);
  if (!rc) {
    if (o->resume) {
      if (R.M.load(R.M.m, o->checkpoint) != 0) {
        char msg[4400];
        rc = drv_error("cannot resume: %s", with_path(msg, sizeof msg, o->checkpoint, merr(&R.M)));
      }
    } else {
      rc = model_weights(o, &R.M);
    }
  }
  if (!rc) {
    R.A.set_seed(R.M.m, o->seed);
    R.start = R.A.step(R.M.m);
    R.total = o->steps ? o->steps : (o->epochs ? o->epochs : 1) * R.spe;
    printf("device: %s\n", R.M.devdesc);
    int64_t last = R.tr.n - (R.tr.n / R.N) * R.N;   /* the samples past the whole batches */
    printf("training %s: %lld samples, batch %lld, %lld steps per epoch (%lld samples %s), %lld steps",
           o->model, (long long)R.tr.n, (long long)R.N, (long long)R.spe, (long long)last,
           o->keep_last ? "in the last, partial batch" : "dropped", (long long)R.total);
    if (R.have_test) printf("; test set: %lld samples", (long long)R.te.n);
    printf("\n");
    if (o->resume)
      printf("resumed from %s at step %lld (epoch %lld, step %lld of it)\n", o->checkpoint, (long long)R.start,
             (long long)(R.start / R.spe + 1), (long long)(R.start % R.spe));
    fflush(stdout);
    if (R.start > R.total)   /* --resume's checkpoint, or a checkpoint given as --weights (it brings its step) */
      rc = drv_error("the checkpoint %s is at step %lld, past the %lld steps asked for (--steps and --epochs "
                     "count from the start of the run)", o->resume ? o->checkpoint : o->weights,
                     (long long)R.start, (long long)R.total);
  }
  if (!rc) rc = open_log(&R);
  if (!rc) rc = loop(&R);
  if (R.log && fclose(R.log) != 0 && !rc) rc = drv_error("cannot write the log %s: %s", o->log, strerror(errno));
  split_free(&R.tr);
  split_free(&R.te);
  model_close(&R.M);
  return rc;
}
