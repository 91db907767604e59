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
