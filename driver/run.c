/* run.c — `ncc run`: one inference of a model on .npy inputs.
 *
 *   check the files first -> build (build.c) -> load (load.c) -> match the
 *   --input/--output names to the model's -> read and check the inputs ->
 *   create the model on its device -> weights (--weights, or init.c) ->
 *   infer -> write the outputs, or print a summary of each
 * (--print-object: build, say where the object is, and stop)
 *
 * Files are checked before compiling, so that a typo in a path costs no
 * minutes of compiling.  Outputs are written to temporary names and renamed
 * only when every one of them is complete: a failure leaves no output file. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"

/* A single unnamed --input/--output belongs to the model's only input/output. */
static int resolve_names(IoArg *kv, int n, const ncc_tensor_info *t, int nt, const char *flag, const char *what) {
  for (int i = 0; i < n; i++) {
    if (!kv[i].name) {
      if (nt != 1 || n != 1)
        return drv_error("%s %s: name the %s (%s NAME=FILE); the model has %d %ss", flag, kv[i].path, what, flag, nt,
                         what);
      kv[i].name = t[0].name;
    }
    int found = 0;
    for (int j = 0; j < nt; j++) found |= !strcmp(kv[i].name, t[j].name);
    if (!found) {
      char list[1024] = "";
      size_t k = 0;
      for (int j = 0; j < nt && k < sizeof list; j++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", j ? ", " : "", t[j].name);
      return drv_error("%s %s=%s: the model has no %s '%s' (it has: %s)", flag, kv[i].name, kv[i].path, what,
                       kv[i].name, nt ? list : "none");
    }
    for (int j = 0; j < i; j++)
      if (!strcmp(kv[i].name, kv[j].name)) return drv_error("%s %s given twice", flag, kv[i].name);
  }
  return 0;
}

/* Reads every input; *batch gets the rows they hold: the compiled batch N,
 * or fewer for a build that serves batches 1..N (M_info()->batch_variable),
 * the same number for every input. */
static int read_inputs(const Options *o, Model *M, void **data, int *batch) {
  const ncc_model_info *inf = M->inf;
  const char *first = NULL;   /* the input that set *batch */
  *batch = inf->max_batch;
  for (int i = 0; i < inf->ninputs; i++) {
    const ncc_tensor_info *t = &inf->inputs[i];
    char want[256], got[256], err[1024] = "", msg[2048];
    tensor_str(want, sizeof want, t->dtype, t->rank, t->shape);
    const IoArg *kv = NULL;
    for (int j = 0; j < o->nin; j++)
      if (!strcmp(o->in[j].name, t->name)) kv = &o->in[j];
    if (!kv) {
      int live = 0;
      for (int j = 0; j < M->nlive; j++) live |= !strcmp(M->live_inputs[j], t->name);
      for (int j = 0; j < inf->noutputs; j++) live |= !strcmp(inf->outputs[j].name, t->name);
      if (!live) {          /* not read by inference: zeros will do */
        int64_t n = numel(t->rank, t->shape);
        data[i] = calloc((size_t)(n > 0 ? n : 1), (size_t)(dt_size(t->dtype) ? dt_size(t->dtype) : 1));
        drv_log(o, "input %s (%s) is not read by inference; passing zeros", t->name, want);
        continue;
      }
      return drv_error("missing --input %s=FILE.npy (the model's input %s is %s)", t->name, t->name, want);
    }
    int dt, rank;
    int64_t shape[8];
    if (ncc_npy_read(kv->path, &dt, &rank, shape, &data[i], err, sizeof err) != 0)
      return drv_error("input %s: %s", t->name, with_path(msg, sizeof msg, kv->path, err[0] ? err : "cannot read"));
    tensor_str(got, sizeof got, dt, rank, shape);
    int same = dt == t->dtype && rank == t->rank;   /* the first dimension: the batch, below */
    for (int k = 1; same && k < rank; k++) same = shape[k] == t->shape[k];
    if (!same)
      return drv_error("input %s: %s holds %s, but the model expects %s%s", t->name, kv->path, got, want,
                       dt != t->dtype ? " (wrong dtype)" : " (wrong shape; --set may change the model's shapes)");
    if (rank == 0 || (!inf->batch_variable && shape[0] == t->shape[0])) continue;
    if (!inf->batch_variable)
      return drv_error("input %s: %s holds %s, but the model expects %s: this build runs batch %lld only "
                       "(--emit=report says why)", t->name, kv->path, got, want, (long long)t->shape[0]);
    if (shape[0] < 1 || shape[0] > t->shape[0])
      return drv_error("input %s: %s holds %s: a batch of %lld rows, outside 1..%lld (the compiled batch; "
                       "--set may compile a larger one)", t->name, kv->path, got, (long long)shape[0],
                       (long long)t->shape[0]);
    if (first && shape[0] != *batch)
      return drv_error("input %s: %s holds %lld rows, but input %s holds %d: every input needs the same batch",
                       t->name, kv->path, (long long)shape[0], first, *batch);
    *batch = (int)shape[0], first = t->name;
  }
  return 0;
}

/* t's shape with `batch` rows (the first dimension): what a call of that batch
 * wrote (batch < 0: the compiled shape, for a build that runs its batch only) */
static void rows_shape(const ncc_tensor_info *t, int batch, int64_t shape[8]) {
  for (int k = 0; k < t->rank && k < 8; k++) shape[k] = t->shape[k];
  if (t->rank > 0 && batch >= 0) shape[0] = batch;
}

/* All outputs go to temporary names first and are renamed only when every
 * one of them is written, so a failure leaves no output file at all. */
static int write_outputs(const Options *o, Model *M, void **out, int batch) {
  const ncc_model_info *inf = M->inf;
  char tmp[MAX_IO][4200];
  int nt = 0, rc = 0;
  for (int i = 0; i < o->nout && !rc; i++) {
    int j = 0;
    while (strcmp(inf->outputs[j].name, o->outs[i].name)) j++;
    const ncc_tensor_info *t = &inf->outputs[j];
    char err[1024] = "";
    int64_t shape[8];
    rows_shape(t, batch, shape);
    snprintf(tmp[nt], sizeof tmp[nt], "%s.ncc-tmp-%ld", o->outs[i].path, (long)getpid());
    if (ncc_npy_write(tmp[nt], t->dtype, t->rank, shape, out[j], err, sizeof err) != 0) {
      unlink(tmp[nt]);
      /* the runtime's message names the temporary file: name the real one */
      size_t tl = strlen(tmp[nt]);
      const char *why = !strncmp(err, tmp[nt], tl) && err[tl] == ':' ? err + tl + 2 : err[0] ? err : strerror(errno);
      rc = drv_error("cannot write output %s to %s: %s", t->name, o->outs[i].path, why);
    } else {
      nt++;
    }
  }
  for (int i = 0; i < nt; i++) {
    if (!rc && rename(tmp[i], o->outs[i].path) != 0)
      rc = drv_error("cannot write output %s: %s", o->outs[i].path, strerror(errno));
    if (rc) unlink(tmp[i]);
  }
  return rc;
}

static void print_summary(const Model *M, void **out, int batch) {
  for (int i = 0; i < M->inf->noutputs; i++) {
    const ncc_tensor_info *t = &M->inf->outputs[i];
    char s[256];
    int64_t shape[8];
    rows_shape(t, batch, shape);
    tensor_str(s, sizeof s, t->dtype, t->rank, shape);
    printf("output %s: %s", t->name, s);
    if (t->dtype == NCC_F32) {
      int64_t n = numel(t->rank, shape);
      const float *p = (const float *)out[i];
      double sum = 0, mx = -INFINITY, mn = INFINITY;
      for (int64_t k = 0; k < n; k++) { sum += p[k]; if (p[k] > mx) mx = p[k]; if (p[k] < mn) mn = p[k]; }
      printf("  min %.6g  max %.6g  mean %.6g", mn, mx, n ? sum / (double)n : 0.0);
    }
    printf("\n");
  }
}

/* Unwritable output folders and unreadable inputs, before any compiling. */
static int check_files(const Options *o) {
  for (int i = 0; i < o->nout; i++) {
    char *d = path_dir(o->outs[i].path);
    int bad = access(d, W_OK) != 0, e = errno;
    int rc = bad ? drv_error("cannot write output %s: directory %s: %s", o->outs[i].path, d, strerror(e)) : 0;
    free(d);
    if (rc) return rc;
  }
  for (int i = 0; i < o->nin; i++)
    if (access(o->in[i].path, R_OK) != 0) return drv_error("cannot read input %s: %s", o->in[i].path, strerror(errno));
  return 0;
}

/* --print-object: the model built (or found in the compile cache) and
 * dlopen'ed once to check its API, then three lines on stdout for a binding
 * that loads the object itself (python/ncc, docs/python.md):
 *   device: emu (2 threads)      what the object is built for (emu, cuda ...)
 *   model: lenet                 the prefix of the generated API's symbols
 *   object: /abs/path/lenet-....so
 * and for an ONNX model, whose weights the file carries, a fourth:
 *   weights: /abs/path/lenet-....safetensors   (its initializers, beside the object)
 * The object must outlive this process, so it must be in the cache. */
static int print_object(const Options *o) {
  Model M;
  int rc = model_build(o, &M);
  if (!rc) rc = model_load(o, &M);
  if (!rc && M.tmpdir[0] && !strncmp(M.so_path, M.tmpdir, strlen(M.tmpdir)))
    rc = drv_error("--print-object: no writable compile cache to keep the object in "
                   "(set NCC_CACHE_DIR to a writable folder)");
  char *wpath = NULL;
  if (!rc) rc = onnx_weights_beside(o, M.g, M.so_path, NULL, 0, &wpath);
  if (!rc) {
    char *abs = realpath(M.so_path, NULL), *wabs = wpath ? realpath(wpath, NULL) : NULL;
    printf("device: %s\nmodel: %s\nobject: %s\n", M.devdesc, M.name, abs ? abs : M.so_path);
    if (wpath) printf("weights: %s\n", wabs ? wabs : wpath);
    free(abs);
    free(wabs);
    fflush(stdout);
  }
  free(wpath);
  model_close(&M);
  return rc;
}

int run_main(const Options *po) {
  if (po->print_object) return print_object(po);
  Options o = *po;      /* resolve_names fills in the names of unnamed --input/--output */
  int rc = check_files(&o);
  if (rc) return rc;
  Model M;
  rc = model_build(&o, &M);
  if (!rc) rc = model_load(&o, &M);
  void **in = NULL, **out = NULL;
  int nin = M.inf ? M.inf->ninputs : 0, batch = 0;
  if (!rc) rc = resolve_names(o.in, o.nin, M.inf->inputs, M.inf->ninputs, "--input", "input");
  if (!rc) rc = resolve_names(o.outs, o.nout, M.inf->outputs, M.inf->noutputs, "--output", "output");
  if (!rc) {
    in = (void **)calloc((size_t)nin + 1, sizeof *in);
    rc = read_inputs(&o, &M, in, &batch);
  }
  if (!rc) rc = model_create(&o, &M);
  if (!rc) rc = model_weights(&o, &M);
  if (!rc) {
    out = alloc_tensors(M.inf->outputs, M.inf->noutputs);
    printf("device: %s\n", M.devdesc);
    fflush(stdout);
    double t = ncc_now();
    rc = model_infer(&M, batch, in, out);
    if (!rc) drv_log(&o, "inference: %.2f ms", (ncc_now() - t) * 1e3);
  }
  if (!rc) rc = write_outputs(&o, &M, out, M.inf->batch_variable ? batch : -1);
  if (!rc && o.nout == 0) print_summary(&M, out, M.inf->batch_variable ? batch : -1);
  free_tensors(in, nin);
  free_tensors(out, M.inf ? M.inf->noutputs : 0);
  model_close(&M);
  return rc;
}
