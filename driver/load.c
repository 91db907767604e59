/* load.c — the built model in this process: dlopen, the generated API of
 * docs/generated-code.md looked up by name (M_info, M_create_on, M_load,
 * M_infer_io, M_infer_io_batch, M_error, M_destroy), the device it is created on, its weights,
 * and the tensor descriptions M_info hands out.
 *
 * Failures the user can change (no GPU, out of device memory, weights that do
 * not fit the model) are status 1; anything else the generated code or the
 * runtime reports is ncc's own failure, status 2.  A message from the runtime
 * already names its file; it is printed as it is, not prefixed again. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"

/* ---- tensors ----------------------------------------------------------------- */

int dt_size(int dt) {
  switch (dt) {
  case NCC_F32: case NCC_I32: return 4;
  case NCC_F16: case NCC_BF16: return 2;
  case NCC_I8: return 1;
  }
  return 0;
}

const char *dt_name(int dt) {
  static const char *n[] = {"f32", "f16", "bf16", "i32", "i8"};
  return dt >= 0 && dt < 5 ? n[dt] : "?";
}

char *tensor_str(char *buf, size_t n, int dt, int rank, const int64_t *shape) {
  size_t k = (size_t)snprintf(buf, n, "%s[", dt_name(dt));
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

int64_t numel(int rank, const int64_t *shape) {
  int64_t e = 1;
  for (int i = 0; i < rank; i++) e *= shape[i];
  return e;
}

/* One zeroed host buffer per tensor (at least one byte, so that a tensor
 * with a zero dimension still has an address). */
void **alloc_tensors(const ncc_tensor_info *t, int n) {
  void **p = (void **)calloc((size_t)n + 1, sizeof *p);
  for (int i = 0; i < n; i++) {
    int64_t e = numel(t[i].rank, t[i].shape);
    int sz = dt_size(t[i].dtype);
    p[i] = calloc((size_t)(e > 0 ? e : 1), (size_t)(sz ? sz : 1));
  }
  return p;
}

void free_tensors(void **p, int n) {
  if (!p) return;
  for (int i = 0; i < n; i++) free(p[i]);
  free(p);
}

/* ---- the generated API ----------------------------------------------------- */

int model_load(const Options *o, Model *M) {
  M->so = dlopen(M->so_path, RTLD_NOW | RTLD_LOCAL);
  if (!M->so) return drv_internal("cannot load the compiled model: %s", dlerror());
  char sym[400];
#define LOOKUP(field, suffix)                                                       \
  do {                                                                              \
    snprintf(sym, sizeof sym, "%s_" suffix, M->name);                               \
    *(void **)&M->field = dlsym(M->so, sym);                                        \
    if (!M->field) return drv_internal("the compiled model lacks %s (docs/generated-code.md)", sym); \
  } while (0)
  LOOKUP(info, "info");
  LOOKUP(create_on, "create_on");
  LOOKUP(load, "load");
  LOOKUP(infer_io, "infer_io");
  /* optional: an object built by hand to the older API runs its compiled batch */
  snprintf(sym, sizeof sym, "%s_infer_io_batch", M->name);
  *(void **)&M->infer_io_batch = dlsym(M->so, sym);
  /* optional: the kernels' time of the last call (NCC_HAVE_KERNEL_SECONDS) */
  snprintf(sym, sizeof sym, "%s_kernel_seconds", M->name);
  *(void **)&M->kernel_seconds = dlsym(M->so, sym);
  LOOKUP(error, "error");
  LOOKUP(destroy, "destroy");
#undef LOOKUP
  M->inf = M->info();
  if (!M->inf) return drv_internal("%s_info() returned NULL", M->name);
  drv_log(o, "loaded %s", M->so_path);
  return 0;
}

int model_create(const Options *o, Model *M) {
  if (o->check) {
    setenv("NCC_CHECK", "1", 1);    /* read by the device at open */
    ncc_emu_set_checked(1);
  }
  int rc = M->create_on(&M->m, M->gpu ? NCC_DEV_CUDA : NCC_DEV_EMU);
  if (rc != 0) {
    char msg[1024] = "(no message)";          /* copied: destroy frees it */
    const char *e = M->m ? M->error(M->m) : NULL;
    if (e && *e) snprintf(msg, sizeof msg, "%s", e);
    if (M->m) { M->destroy(M->m); M->m = NULL; }
    if (rc == NCC_EUSER) return drv_error("cannot create the model on %s: %s", M->devdesc, msg);
    return drv_internal("cannot create the model on %s: %s", M->devdesc, msg);
  }
  return 0;
}

int model_infer(Model *M, int batch, void **in, void **out) {
  int rc = M->infer_io_batch ? M->infer_io_batch(M->m, batch, (const void *const *)in, (void *const *)out)
                             : M->infer_io(M->m, (const void *const *)in, (void *const *)out);
  if (rc != 0) {
    /* NCC_EUSER: something the user can change (e.g. out of device memory);
     * anything else is a failure of the generated code or the runtime */
    const char *msg = M->error(M->m);
    if (!msg || !*msg) msg = "(no message)";
    if (rc == NCC_EUSER) return drv_error("inference failed on %s: %s", M->devdesc, msg);
    return drv_internal("inference failed on %s: %s", M->devdesc, msg);
  }
  return 0;
}

int model_weights(const Options *o, Model *M) {
  if (o->freeze) {   /* create has loaded the weights MODEL.cu carries */
    drv_log(o, "weights: carried by the model (--freeze, %s)", o->weights);
    return 0;
  }
  if (!o->weights) {
    int rc = onnx_weights_load(o, M);   /* an ONNX model carries its weights */
    return rc >= 0 ? rc : init_weights(o, M);
  }
  if (access(o->weights, R_OK) != 0)
    return drv_error("cannot read weights '%s': %s", o->weights, strerror(errno));
  if (M->load(M->m, o->weights) != 0) {
    char msg[4096];
    return drv_error("bad weights: %s", with_path(msg, sizeof msg, o->weights, M->error(M->m)));
  }
  drv_log(o, "weights from %s", o->weights);
  return 0;
}

void model_close(Model *M) {
  if (M->m && M->destroy) M->destroy(M->m);
  M->m = NULL;
  /* the object stays mapped: the runtime may hold pointers into it (kernel
   * descriptors) until exit; dlclose would gain nothing for a one-shot tool */
  build_release(M);
}
