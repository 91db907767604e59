/* run_train_case.c — runs one model of tests/cg/build_train.c on the CPU
 * emulation and dumps what check_train.py needs.
 *
 * Built together with the model (run_train.sh): `run_train_case DIR` fills the
 * inputs with a fixed pseudo-random sequence (an input named "pos_*" gets
 * positive values, "q_*" small integers, so that windows hold ties; int32
 * inputs labels in [0, 10)), the parameters (running statistics) likewise,
 * runs M_infer_io and writes DIR/in_NAME.npy, DIR/p_NAME.npy, DIR/out_NAME.npy
 * and the parameters after the step (DIR/after.safetensors, through M_save).
 * It runs the model again and requires bit-identical outputs (the kernels
 * sum in a fixed order), then with another dropout seed (DIR/seed_NAME.npy)
 * and another step (DIR/step_NAME.npy).  The dropout kernels read
 * ncc_test_seed32 and ncc_test_step32 (run_train.sh points the generated
 * launches at them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ncc_rt.h"
#include MODEL_H

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define F(x) CAT(MODEL, x)
typedef MODEL Model;

int ncc_test_seed32 = 1, ncc_test_step32 = 1;

static unsigned long long rng = 0x9E3779B97F4A7C15ULL;
static float uniform(float lo, float hi) {
  rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return lo + (hi - lo) * (float)((rng >> 40) / 16777216.0);
}

static size_t numel(const ncc_tensor_info *t) {
  size_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= (size_t)t->shape[i];
  return n;
}

static int write_npy(const char *dir, const char *prefix, const ncc_tensor_info *t, const void *data) {
  char path[1024], err[512];
  snprintf(path, sizeof path, "%s/%s%s.npy", dir, prefix, t->name);
  if (ncc_npy_write(path, t->dtype, t->rank, t->shape, data, err, sizeof err)) {
    fprintf(stderr, "run_train_case: %s\n", err);
    return 1;
  }
  return 0;
}

static int run(Model *m, void **in, void **out, const ncc_model_info *info, const char *dir, const char *prefix) {
  if (F(_infer_io)(m, (const void *const *)in, out)) {
    fprintf(stderr, "run_train_case: infer: %s\n", F(_error)(m));
    return 1;
  }
  for (int i = 0; i < info->noutputs; i++)
    if (write_npy(dir, prefix, &info->outputs[i], out[i])) return 1;
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: run_train_case DIR\n");
    return 2;
  }
  const char *dir = argv[1];
  const ncc_model_info *info = F(_info)();
  Model *m = NULL;
  if (F(_create_on)(&m, NCC_DEV_EMU)) {
    fprintf(stderr, "run_train_case: create: %s\n", F(_error)(m));
    return 1;
  }
  char st[1024], err[512];
  if (info->nparams) {
    void **ph = calloc((size_t)info->nparams, sizeof(void *));
    for (int i = 0; i < info->nparams; i++) {
      const ncc_tensor_info *t = &info->params[i];
      float *p = malloc(numel(t) * 4 + 4);
      int var = strstr(t->name, "running_var") != NULL;
      for (size_t j = 0; j < numel(t); j++) p[j] = var ? uniform(0.5f, 1.5f) : uniform(-0.5f, 0.5f);
      ph[i] = p;
      if (write_npy(dir, "p_", t, p)) return 1;
    }
    snprintf(st, sizeof st, "%s/params.safetensors", dir);
    if (ncc_save_safetensors(st, info->params, info->nparams, (const void *const *)ph, err, sizeof err) ||
        F(_load)(m, st)) {
      fprintf(stderr, "run_train_case: load: %s %s\n", err, F(_error)(m));
      return 1;
    }
  }
  void **in = calloc((size_t)info->ninputs + 1, sizeof(void *));
  void **out = calloc((size_t)info->noutputs + 1, sizeof(void *));
  void **out2 = calloc((size_t)info->noutputs + 1, sizeof(void *));
  for (int i = 0; i < info->ninputs; i++) {
    const ncc_tensor_info *t = &info->inputs[i];
    size_t n = numel(t);
    if (t->dtype == NCC_I32) {
      int *p = malloc(n * 4 + 4);
      for (size_t j = 0; j < n; j++) p[j] = (int)uniform(0.0f, 9.999f);
      in[i] = p;
    } else {
      float *p = malloc(n * 4 + 4);
      int pos = !strncmp(t->name, "pos_", 4), q = !strncmp(t->name, "q_", 2);
      for (size_t j = 0; j < n; j++)
        p[j] = pos ? uniform(0.05f, 1.0f) : q ? floorf(uniform(0.0f, 3.0f)) : uniform(-2.0f, 2.0f);
      in[i] = p;
    }
    if (write_npy(dir, "in_", t, in[i])) return 1;
  }
  for (int i = 0; i < info->noutputs; i++) {
    out[i] = malloc(numel(&info->outputs[i]) * 4 + 4);
    out2[i] = malloc(numel(&info->outputs[i]) * 4 + 4);
  }
  if (run(m, in, out, info, dir, "out_")) return 1;
  if (info->nparams) {
    snprintf(st, sizeof st, "%s/after.safetensors", dir);
    if (F(_save)(m, st)) {
      fprintf(stderr, "run_train_case: save: %s\n", F(_error)(m));
      return 1;
    }
  }
  /* deterministic: the same inputs give the same bits (a running-statistics
   * update changes only parameters no output reads) */
  if (run(m, in, out2, info, dir, "again_")) return 1;
  for (int i = 0; i < info->noutputs; i++)
    if (memcmp(out[i], out2[i], numel(&info->outputs[i]) * 4) != 0 && strcmp(info->outputs[i].name, "bn_upd") != 0) {
      fprintf(stderr, "run_train_case: output %s differs on a second run\n", info->outputs[i].name);
      return 1;
    }
  ncc_test_seed32 = 2;
  if (run(m, in, out2, info, dir, "seed_")) return 1;
  ncc_test_seed32 = 1;
  ncc_test_step32 = 2;
  if (run(m, in, out2, info, dir, "step_")) return 1;
  printf("run_train_case: %s: %d inputs, %d outputs written to %s\n", info->model, info->ninputs, info->noutputs, dir);
  F(_destroy)(m);
  return 0;
}
