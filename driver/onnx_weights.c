/* onnx_weights.c — the weights an ONNX model carries (its initializers, kept
 * by frontend/onnx.c) written as safetensors: beside MODEL.cu when compiling
 * (`ncc m.onnx -o m.cu` writes m.safetensors), and to a temporary file that
 * `ncc run` / `ncc bench` load when no --weights is given (docs/onnx.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "frontend.h"

/* Writes the tensors of `names` (n of them; NULL: every weight) to path,
 * named as[i] there when `as` is given.  Returns 0, 1 after a message, or -1
 * when the model is not an ONNX model. */
static int save(const Options *o, const char *const *names, const char *const *as, int n, const char *path) {
  const FrontendWeight *w;
  int nw = frontend_weights(o->model, &w);
  if (nw <= 0) return -1;
  if (!names) n = nw;
  ncc_tensor_info *t = calloc((size_t)n + 1, sizeof *t);
  const void **p = calloc((size_t)n + 1, sizeof *p);
  int nt = 0, rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    const FrontendWeight *x = NULL;
    for (int k = 0; k < nw && !x; k++)
      if (!names || !strcmp(w[k].name, names[i])) x = &w[names ? k : i];
    if (!x) { rc = drv_error("%s: the model's parameter %s has no initializer", o->model, names[i]); break; }
    t[nt] = (ncc_tensor_info){as ? as[i] : x->name, NCC_F32, x->rank, {0}};
    memcpy(t[nt].shape, x->shape, sizeof x->shape);
    p[nt++] = x->data;
  }
  char err[1024] = "";
  if (!rc && ncc_save_safetensors(path, t, nt, p, err, sizeof err) != 0)
    rc = drv_error("cannot write the model's weights: %s", err[0] ? err : strerror(errno));
  free(t);
  free(p);
  return rc;
}

int onnx_weights_beside(const Options *o, const Graph *g, const char *out, const NetRename *ren, int nren,
                        char **written) {
  *written = NULL;
  const FrontendWeight *w;
  if (frontend_weights(o->model, &w) <= 0) return 0;
  /* the parameters the emitted model loads: those still in the graph */
  const char **names = calloc((size_t)g->nnodes + 1, sizeof *names);
  const char **as = calloc((size_t)g->nnodes + 1, sizeof *as);
  int n = 0;
  for (int i = 0; i < g->nnodes; i++)
    if (!g->nodes[i]->dead && g->nodes[i]->op == OP_PARAM) {
      as[n] = names[n] = g->nodes[i]->name;
      for (int k = 0; k < nren; k++)
        if (!strcmp(ren[k].from, names[n])) as[n] = ren[k].to;
      n++;
    }
  size_t len = strlen(out);
  const char *dot = strrchr(out, '.'), *slash = strrchr(out, '/');
  if (!dot || (slash && dot < slash)) dot = out + len;
  char *path = malloc((size_t)(dot - out) + 16);
  memcpy(path, out, (size_t)(dot - out));
  strcpy(path + (dot - out), ".safetensors");
  int rc = save(o, names, as, n, path);
  free(names);
  free(as);
  if (rc > 0) { free(path); return rc; }
  *written = path;
  return 0;
}

int onnx_weights_load(const Options *o, Model *M) {
  const FrontendWeight *w;
  if (frontend_weights(o->model, &w) <= 0) return -1;
  const char *dir = getenv("TMPDIR");
  char path[4200];
  snprintf(path, sizeof path, "%s/ncc-onnx-%ld.safetensors", dir && *dir ? dir : "/tmp", (long)getpid());
  const char **names = calloc((size_t)M->inf->nparams + 1, sizeof *names);
  for (int i = 0; i < M->inf->nparams; i++) names[i] = M->inf->params[i].name;
  int rc = save(o, names, NULL, M->inf->nparams, path);
  free(names);
  if (rc) { unlink(path); return rc > 0 ? rc : 1; }
  if (M->load(M->m, path) != 0) {
    char msg[4096];
    rc = drv_error("the weights of %s do not load: %s", o->model, with_path(msg, sizeof msg, path, M->error(M->m)));
  } else {
    drv_log(o, "weights: the initializers of %s", o->model);
  }
  unlink(path);
  return rc;
}
