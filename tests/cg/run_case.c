/* run_case.c — runs one generated test model (tests/cg/build_graphs.c) on the
 * CPU emulation and dumps everything PyTorch needs to check it.
 *
 * Built together with the model: cc -DNCC_EMU -DMODEL=net -DMODEL_H='"net.h"'
 * run_case.c net.cu -lnccrt.  `run_case DIR` fills parameters and inputs with
 * a fixed pseudo-random sequence, goes through the model's own load path
 * (safetensors written with ncc_save_safetensors, read by M_load), runs
 * M_infer_io and writes DIR/p_NAME.npy, DIR/in_NAME.npy and DIR/out_NAME.npy
 * for tests/cg/check_cases.py.  It also checks M_save: a second instance
 * loaded from what the first saved must compute bit-identical outputs; and a
 * second load: the first instance loaded again with other parameters must
 * compute what a fresh instance loaded with those does (whatever the model
 * precomputes from its parameters at load time follows them). */
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
    fprintf(stderr, "run_case: %s\n", err);
    return 1;
  }
  return 0;
}

static int run(Model *m, void **in, void **out) {
  if (F(_infer_io)(m, (const void *const *)in, out)) {
    fprintf(stderr, "run_case: infer: %s\n", F(_error)(m));
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: run_case DIR\n");
    return 2;
  }
  const char *dir = argv[1];
  const ncc_model_info *info = F(_info)();
  Model *m = NULL, *m2 = NULL;
  if (F(_create_on)(&m, NCC_DEV_EMU)) {
    fprintf(stderr, "run_case: create: %s\n", F(_error)(m));
    return 1;
  }
  /* parameters: small values; running variances positive, as BatchNorm's */
  void **ph = calloc((size_t)info->nparams + 1, sizeof(void *));
  for (int i = 0; i < info->nparams; i++) {
    const ncc_tensor_info *t = &info->params[i];
    float *p = malloc(numel(t) * 4 + 4);
    int var = strstr(t->name, "running_var") != NULL;
    for (size_t j = 0; j < numel(t); j++) p[j] = var ? uniform(0.5f, 1.5f) : uniform(-0.5f, 0.5f);
    ph[i] = p;
    if (write_npy(dir, "p_", t, p)) return 1;
  }
  char st[1024], st2[1024], err[512];
  snprintf(st, sizeof st, "%s/params.safetensors", dir);
  snprintf(st2, sizeof st2, "%s/saved.safetensors", dir);
  if (info->nparams && ncc_save_safetensors(st, info->params, info->nparams, (const void *const *)ph, err, sizeof err)) {
    fprintf(stderr, "run_case: %s\n", err);
    return 1;
  }
  if (info->nparams && F(_load)(m, st)) {
    fprintf(stderr, "run_case: load: %s\n", F(_error)(m));
    return 1;
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
      for (size_t j = 0; j < n; j++) p[j] = uniform(-2.0f, 2.0f);
      in[i] = p;
    }
    if (write_npy(dir, "in_", t, in[i])) return 1;
  }
  for (int i = 0; i < info->noutputs; i++) {
    out[i] = malloc(numel(&info->outputs[i]) * 4 + 4);
    out2[i] = malloc(numel(&info->outputs[i]) * 4 + 4);
  }
  if (run(m, in, out)) return 1;
  for (int i = 0; i < info->noutputs; i++)
    if (write_npy(dir, "out_", &info->outputs[i], out[i])) return 1;

  /* save -> load into a fresh instance -> identical outputs */
  if (F(_save)(m, st2)) {
    fprintf(stderr, "run_case: save: %s\n", F(_error)(m));
    return 1;
  }
  if (F(_create_on)(&m2, NCC_DEV_EMU) || (info->nparams && F(_load)(m2, st2))) {
    fprintf(stderr, "run_case: reload: %s\n", F(_error)(m2));
    return 1;
  }
  if (run(m2, in, out2)) return 1;
  for (int i = 0; i < info->noutputs; i++)
    if (memcmp(out[i], out2[i], numel(&info->outputs[i]) * 4) != 0) {
      fprintf(stderr, "run_case: output %s differs after save and load\n", info->outputs[i].name);
      return 1;
    }
  /* load other parameters into the first instance: it must now compute what a
   * fresh instance loaded with them computes, and differ from before */
  if (info->nparams) {
    Model *m3 = NULL;
    void **out3 = calloc((size_t)info->noutputs + 1, sizeof(void *));
    void **out4 = calloc((size_t)info->noutputs + 1, sizeof(void *));
    char st3[1024];
    snprintf(st3, sizeof st3, "%s/params2.safetensors", dir);
    for (int i = 0; i < info->nparams; i++) {
      const ncc_tensor_info *t = &info->params[i];
      float *p = (float *)ph[i];
      int var = strstr(t->name, "running_var") != NULL;
      for (size_t j = 0; j < numel(t); j++) p[j] = var ? uniform(0.5f, 1.5f) : uniform(-0.5f, 0.5f);
    }
    if (ncc_save_safetensors(st3, info->params, info->nparams, (const void *const *)ph, err, sizeof err)) {
      fprintf(stderr, "run_case: %s\n", err);
      return 1;
    }
    for (int i = 0; i < info->noutputs; i++) {
      out3[i] = malloc(numel(&info->outputs[i]) * 4 + 4);
      out4[i] = malloc(numel(&info->outputs[i]) * 4 + 4);
    }
    if (F(_load)(m, st3) || F(_create_on)(&m3, NCC_DEV_EMU) || F(_load)(m3, st3)) {
      fprintf(stderr, "run_case: loading other parameters: %s / %s\n", F(_error)(m), F(_error)(m3));
      return 1;
    }
    if (run(m, in, out3) || run(m3, in, out4)) return 1;
    int changed = 0;
    for (int i = 0; i < info->noutputs; i++) {
      size_t bytes = numel(&info->outputs[i]) * 4;
      if (memcmp(out3[i], out4[i], bytes) != 0) {
        fprintf(stderr, "run_case: output %s after a second load differs from a fresh instance's\n",
                info->outputs[i].name);
        return 1;
      }
      changed |= memcmp(out3[i], out[i], bytes) != 0;
    }
    if (!changed) {
      fprintf(stderr, "run_case: other parameters changed no output\n");
      return 1;
    }
    for (int i = 0; i < info->noutputs; i++) {
      free(out3[i]);
      free(out4[i]);
    }
    free(out3);
    free(out4);
    F(_destroy)(m3);
  }
  /* the one-input convenience refuses models with several inputs or outputs */
  if (info->ninputs != 1 || info->noutputs != 1) {
    if (F(_infer)(m, (const float *)in[0], (float *)out[0]) != NCC_EUSER || !strstr(F(_error)(m), "infer_io")) {
      fprintf(stderr, "run_case: %s_infer accepted a model with %d inputs and %d outputs\n", info->model,
              info->ninputs, info->noutputs);
      return 1;
    }
  }
  printf("run_case: %s: %d inputs, %d params, %d outputs written to %s\n", info->model, info->ninputs,
         info->nparams, info->noutputs, dir);
  F(_destroy)(m);
  F(_destroy)(m2);
  return 0;
}
