/* bench.c — `ncc bench`: how long one inference batch (or, with --train,
 * one training step) takes.
 *
 * Builds and loads the model as `ncc run` does, on random inputs drawn from
 * --seed (integer inputs, class labels, stay 0: a valid class), then, like
 * PuzzleLib's timeKernel, runs --warmup untimed batches (first-touch page
 * faults, fiber pools, caches) and times --iters batches: it prints the
 * median and the minimum, and samples/s from the median.  --compare builds
 * the same model at -O0 first, so the speed-up of the passes is measured on
 * one machine in one process.  --train times M_train_step_io (forward in
 * training mode, backward, update) on random training inputs at learning
 * rate 0, so that every timed step does the same work on the same weights.
 * Beside each call's time it prints its kernels' alone (M_kernel_seconds:
 * from their launch to the sync, the host copies of the inputs and outputs
 * left out), the figure that matters when the copies dominate (a 4096^3
 * GEMM's 192 MB). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

void drv_random_inputs(const Options *o, const ncc_tensor_info *ts, int nt, void **data) {
  uint64_t s = o->seed + 12345;
  for (int i = 0; i < nt; i++) {
    const ncc_tensor_info *t = &ts[i];
    if (t->dtype != NCC_F32) continue;
    int64_t n = numel(t->rank, t->shape);
    for (int64_t k = 0; k < n; k++) ((float *)data[i])[k] = rng_uniform(&s, -1.0f, 1.0f);
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef int (*StepFn)(void *m, const void *const *inputs, float *loss);
typedef int (*SetLrFn)(void *m, double lr);

/* One timed unit: an inference batch, or a training step. */
static int run_once(Model *M, StepFn step, void **in, void **out) {
  if (!step) return model_infer(M, M->inf->max_batch, in, out);
  float loss;
  if (step(M->m, (const void *const *)in, &loss) != 0)
    return drv_error("the training step failed on %s: %s", M->devdesc, M->error(M->m));
  return 0;
}

/* The architecture the report models for this device: the GPU's where the report knows it, else sm_90 */
static const char *model_arch(const Model *M) {
  static const char *const known[] = {"sm_80", "sm_86", "sm_89", "sm_90"};
  const char *p = M->gpu ? strstr(M->devdesc, "sm_") : NULL;
  for (size_t i = 0; p && i < sizeof known / sizeof known[0]; i++)
    if (!strncmp(p, known[i], 5) && !(p[5] >= '0' && p[5] <= '9')) return known[i];
  return "sm_90";
}

typedef struct ProfRow { const ncc_profile_entry *e; const ReportKernel *r; } ProfRow;
static int cmp_prof(const void *a, const void *b) {
  double x = ((const ProfRow *)a)->e->seconds, y = ((const ProfRow *)b)->e->seconds;
  return x > y ? -1 : x < y;
}

/* --profile: `iters` more runs with each launch timed alone (ncc_profile_set), then a row per
 * kernel, slowest first, beside the report's modeled time of its group (report_kernel_times) */
static int profile_runs(const Options *o, Model *M, StepFn step, void **in, void **out) {
  ncc_profile_clear();
  ncc_profile_set(1);
  int rc = 0;
  double t0 = ncc_now();
  for (int i = 0; i < o->iters && !rc; i++) rc = run_once(M, step, in, out);
  double wall = ncc_now() - t0;
  ncc_profile_set(0);
  if (rc) {
    ncc_profile_clear();
    return rc;
  }
  const ncc_profile_entry *e;
  int n = ncc_profile_get(&e);
  /* the report's rows, for the graph the object was built from, with its options */
  CodegenOpts co;
  memset(&co, 0, sizeof co);
  co.use_cublas = o->cublas;
  co.jit = M->jit;
  co.ws_limit = M->ws_limit;
  co.api_batch = M->api_batch;
  ReportKernelList rk;
  const char *arch = model_arch(M);
  Graph *g = M->gsliced ? M->gsliced : M->g;   /* what build.c emitted, with the training step after it */
  if (!g || report_kernel_times(g, step ? M->gt : NULL, arch, &co, &rk) != 0) memset(&rk, 0, sizeof rk);
  ProfRow *rows = (ProfRow *)calloc((size_t)(n ? n : 1), sizeof *rows);
  double total = 0, modeled = 0;
  long long calls = 0;
  int matched = 0;
  for (int i = 0; i < n; i++) {
    rows[i].e = &e[i];
    for (int k = 0; k < rk.n && !rows[i].r; k++)
      if (!strcmp(rk.k[k].name, e[i].name)) rows[i].r = &rk.k[k];
    total += e[i].seconds;
    calls += e[i].calls;
    matched += rows[i].r != NULL;
  }
  for (int k = 0; k < rk.n; k++) modeled += rk.k[k].us;
  qsort(rows, (size_t)n, sizeof *rows, cmp_prof);
  const char *unit = step ? "step" : "batch";
  printf("profile: %d run%s, each launch timed alone (the device synchronized before and after it, no CUDA graph): "
         "%.3f ms/%s in %lld launches a run (%.3f ms/%s with the synchronizations)\n",
         o->iters, o->iters == 1 ? "" : "s", total / o->iters * 1e3, unit, calls / o->iters, wall / o->iters * 1e3, unit);
  printf("modeled: the report's time on %s%s, %.3f ms/%s in all (--emit=report)\n", arch,
         M->gpu ? "" : " (a GPU's, not this device's)", modeled * 1e-3, unit);
  /* the ratio to the model on a GPU only: under emulation it says nothing */
  printf("  %10s %7s %7s %6s %11s%s  %s\n", "ms/run", "share", "cum.", "calls", "modeled_ms", M->gpu ? "  x model" : "",
         "kernel");
  double cum = 0;
  for (int i = 0; i < n; i++) {
    const ncc_profile_entry *x = rows[i].e;
    const ReportKernel *r = rows[i].r;
    double ms = x->seconds / o->iters * 1e3;
    cum += x->seconds;
    char mod[32] = "-", ratio[32] = "";
    if (r) snprintf(mod, sizeof mod, "%.3f", r->us * 1e-3);
    if (M->gpu && r && r->us > 0) snprintf(ratio, sizeof ratio, "  %7.1f", ms / (r->us * 1e-3));
    else if (M->gpu) snprintf(ratio, sizeof ratio, "  %7s", "-");
    printf("  %10.3f %6.1f%% %6.1f%% %6lld %11s%s  %s\n", ms, total > 0 ? 100 * x->seconds / total : 0.0,
           total > 0 ? 100 * cum / total : 0.0, x->calls / o->iters, mod, ratio, x->name);
  }
  if (matched < n) printf("modeled '-': a kernel the report does not model (a cuBLAS GEMM)\n");
  fflush(stdout);
  free(rows);
  report_kernel_times_free(&rk);
  ncc_profile_clear();
  return 0;
}

/* Builds, loads and times one configuration; *median gets seconds per batch. */
static int bench_one(const Options *o, double *median) {
  Model M;
  int rc = model_build(o, &M);
  void **in = NULL, **out = NULL;
  const ncc_tensor_info *ins = NULL;
  int nin = 0;
  StepFn step = NULL;
  if (!rc) rc = model_load(o, &M);
  if (!rc) rc = model_create(o, &M);
  if (!rc) rc = model_weights(o, &M);
  if (!rc) {
    ins = M.inf->inputs;
    nin = M.inf->ninputs;
  }
  if (!rc && o->train) {
    char sym[400];
    SetLrFn set_lr;
    snprintf(sym, sizeof sym, "%s_train_step_io", M.name);
    *(void **)&step = dlsym(M.so, sym);
    snprintf(sym, sizeof sym, "%s_set_lr", M.name);
    *(void **)&set_lr = dlsym(M.so, sym);
    if (!step || !set_lr) rc = drv_internal("the compiled model lacks %s_train_step_io or %s_set_lr", M.name, M.name);
    else if (set_lr(M.m, 0.0) != 0) rc = drv_error("setting the learning rate: %s", M.error(M.m));
    ins = M.inf->train_inputs;
    nin = M.inf->ntrain_inputs;
  }
  if (!rc) {
    in = alloc_tensors(ins, nin);
    drv_random_inputs(o, ins, nin, in);
    out = alloc_tensors(M.inf->outputs, M.inf->noutputs);
    int64_t batch = nin > 0 && ins[0].rank > 0 ? ins[0].shape[0] : 1;
    printf("model %s%s -O%d%s, batch %lld, device: %s\n", M.name, step ? " (training step)" : "", o->opt_level,
           o->cublas ? " --cublas" : "", (long long)batch, M.devdesc);
    fflush(stdout);
    /* the kernels' share of each call (M_kernel_seconds: the copies of inputs and outputs left out) */
    double (*kern)(const void *) = M.kernel_seconds;
    for (int i = 0; i < o->warmup && !rc; i++) rc = run_once(&M, step, in, out);
    double *t = (double *)calloc((size_t)o->iters, sizeof *t), *tk = (double *)calloc((size_t)o->iters, sizeof *tk);
    for (int i = 0; i < o->iters && !rc; i++) {
      double t0 = ncc_now();
      rc = run_once(&M, step, in, out);
      t[i] = ncc_now() - t0;
      tk[i] = kern ? kern(M.m) : 0;
    }
    if (!rc) {
      qsort(t, (size_t)o->iters, sizeof *t, cmp_double);
      qsort(tk, (size_t)o->iters, sizeof *tk, cmp_double);
      double med = o->iters % 2 ? t[o->iters / 2] : 0.5 * (t[o->iters / 2 - 1] + t[o->iters / 2]);
      double kmed = o->iters % 2 ? tk[o->iters / 2] : 0.5 * (tk[o->iters / 2 - 1] + tk[o->iters / 2]);
      printf("ms/%s: median %.3f  min %.3f  (%d timed runs, %d warm-up)\n", step ? "step" : "batch", med * 1e3,
             t[0] * 1e3, o->iters, o->warmup);
      if (kern)
        printf("ms/%s in the kernels (input and output copies left out): median %.3f  min %.3f\n",
               step ? "step" : "batch", kmed * 1e3, tk[0] * 1e3);
      printf("samples/s: %.1f\n", med > 0 ? (double)batch / med : 0.0);
      fflush(stdout);
      *median = med;
    }
    if (!rc && o->profile) rc = profile_runs(o, &M, step, in, out);
    free(t);
    free(tk);
  }
  free_tensors(in, nin);
  free_tensors(out, M.inf ? M.inf->noutputs : 0);
  model_close(&M);
  return rc;
}

int bench_main(const Options *o) {
  int rc;
  double before = 0, after = 0;
  if (o->compare && o->opt_level > 0) {
    Options o0 = *o;        /* before the passes: the same model at -O0 */
    o0.opt_level = 0;
    o0.passes = NULL;
    if ((rc = bench_one(&o0, &before)) != 0) return rc;
  }
  if ((rc = bench_one(o, &after)) != 0) return rc;
  if (o->compare && o->opt_level > 0 && after > 0)
    printf("passes: -O%d is %.2fx the speed of -O0\n", o->opt_level, before / after);
  return 0;
}
