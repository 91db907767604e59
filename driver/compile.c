/* compile.c — `ncc MODEL.net`: the straight-line pipeline
 *
 *   source -> frontend_load -> passes_run -> one of the emitters
 *
 * User errors (bad model, unwritable output) exit 1 with a message; ncc's own
 * bugs exit 2 (ncc_die).  Output files are written to a temporary name beside
 * the target and renamed only when everything succeeded, so a failed compile
 * never leaves a partial or stale-looking MODEL.cu behind. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../codegen/codegen.h"
#include "../frontend/frontend.h"
#include "../passes/passes.h"
#include "driver.h"

/* ---- atomic output files ---- */
typedef struct OutFile { char *path, *tmp; FILE *f; } OutFile;

static int out_open(OutFile *o, const char *path) {
  o->path = strdup(path);
  size_t n = strlen(path) + 32;
  o->tmp = malloc(n);
  snprintf(o->tmp, n, "%s.tmp.%ld", path, (long)getpid());
  o->f = fopen(o->tmp, "w");
  if (!o->f) {
    int e = errno;
    free(o->path);
    free(o->tmp);
    o->path = o->tmp = NULL;
    return drv_error("cannot write '%s': %s", path, strerror(e));
  }
  return 0;
}

static int out_close(OutFile *o, int commit) {
  int err = 0;
  if (o->f) {
    if (fflush(o->f) != 0 || ferror(o->f)) err = 1;
    if (fclose(o->f) != 0) err = 1;
    o->f = NULL;
  }
  if (commit && !err && rename(o->tmp, o->path) != 0) err = 1;
  if (commit && err) drv_error("cannot write '%s': %s", o->path, strerror(errno));
  if (!commit || err) unlink(o->tmp);
  free(o->path);
  free(o->tmp);
  return err ? -1 : 0;
}

/* MODEL.cu -> MODEL.h; the name as the .cu #includes it (no directory). */
static char *header_path(const char *out) {
  size_t n = strlen(out);
  const char *dot = strrchr(out, '.'), *slash = strrchr(out, '/');
  if (!dot || (slash && dot < slash)) dot = out + n;
  char *h = malloc((size_t)(dot - out) + 3);
  memcpy(h, out, (size_t)(dot - out));
  strcpy(h + (dot - out), ".h");
  return h;
}

static void emit_params(Graph *g, FILE *f) {
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->op != OP_PARAM) continue;
    char buf[160];
    fprintf(f, "%s %s\n", n->name, shape_str(buf, sizeof buf, n->out->dtype, &n->out->shape));
  }
}

static int emit_ptx(Graph *g, const Options *o) {
  CodegenOpts co = {0};
  co.use_cublas = o->cublas;
  char *src = NULL;
  size_t len = 0;
  FILE *mf = open_memstream(&src, &len);
  if (!mf || codegen_emit_kernels(g, &co, mf) != 0) { if (mf) fclose(mf); free(src); return 1; }
  fclose(mf);
  char *inc = runtime_include_dir();
  if (!inc) { free(src); return drv_internal("cannot find the runtime's headers (ncc_kernel.h); set NCC_RUNTIME_DIR"); }
  char incflag[4200];
  snprintf(incflag, sizeof incflag, "-I%s", inc);
  free(inc);
  const char *arch = o->arch && !strncmp(o->arch, "sm_80", 5) ? "--gpu-architecture=compute_80"
                                                              : "--gpu-architecture=compute_90";
  const char *opts[] = {arch, incflag, "-I/usr/local/cuda/include", "--std=c++17"};
  char *ptx = NULL, err[8192];
  int rc = ncc_nvrtc_ptx(src, g->model, opts, 4, &ptx, err, sizeof err);
  free(src);
  if (rc) return drv_error("--emit=ptx: %s", err);
  int fail = 0;
  if (o->out) {
    OutFile of;
    if (out_open(&of, o->out)) { free(ptx); return 1; }
    fputs(ptx, of.f);
    fail = out_close(&of, 1) != 0;
  } else {
    fputs(ptx, stdout);
  }
  free(ptx);
  return fail;
}

int frozen_weights(const Options *o, Graph *g, unsigned char **bytes, size_t *len) {
  *bytes = NULL;
  *len = 0;
  /* the check: every parameter loaded into host memory, as M_load would */
  int np = 0, rc = 0;
  for (int i = 0; i < g->nnodes; i++) np += g->nodes[i]->op == OP_PARAM && !g->nodes[i]->dead;
  ncc_st_want *w = calloc((size_t)np + 1, sizeof *w);
  if (!w) return drv_internal("out of memory");
  int k = 0;
  for (int i = 0; i < g->nnodes && !rc; i++) {
    Node *n = g->nodes[i];
    if (n->op != OP_PARAM || n->dead) continue;
    ncc_st_want *x = &w[k++];
    x->t.name = n->name;
    x->t.dtype = NCC_F32;
    x->t.rank = n->out->shape.rank;
    for (int d = 0; d < n->out->shape.rank; d++) x->t.shape[d] = n->out->shape.d[d];
    x->flags = NCC_ST_HOST;
    x->dst = malloc((size_t)shape_numel(&n->out->shape) * sizeof(float) + 1);
    if (!x->dst) rc = drv_internal("out of memory for the weights");
  }
  char err[4096];
  if (!rc && ncc_load_safetensors_opt(NULL, o->weights, w, np, 0, err, sizeof err) != 0)
    rc = drv_error("--freeze: %s", err);
  for (int i = 0; i < k; i++) free(w[i].dst);
  free(w);
  if (rc) return rc;
  FILE *f = fopen(o->weights, "rb");
  if (!f) return drv_error("cannot read weights '%s': %s", o->weights, strerror(errno));
  if (fseek(f, 0, SEEK_END) != 0 || ftell(f) <= 0) {
    fclose(f);
    return drv_error("cannot read weights '%s': not a regular file", o->weights);
  }
  long sz = ftell(f);
  rewind(f);
  *bytes = malloc((size_t)sz);
  if (!*bytes || fread(*bytes, 1, (size_t)sz, f) != (size_t)sz) {
    fclose(f);
    free(*bytes);
    *bytes = NULL;
    return drv_error("cannot read weights '%s': short read", o->weights);
  }
  fclose(f);
  *len = (size_t)sz;
  return 0;
}

PassCtx drv_pass_ctx(const Options *o, int train, int verify) {
  PassCtx pc;
  memset(&pc, 0, sizeof pc);
  pc.train = train;
  pc.opt_level = o->opt_level;
  pc.print_after = o->print_after;
  pc.verbose = o->verbose;
  pc.cublas = o->cublas;
  pc.gemm_tile = o->gemm_tile;
  pc.gemm_pipe = o->gemm_pipe;
  pc.gemm_stages = o->gemm_stages;
  pc.streams = o->streams;
  pc.precision = o->precision;
  pc.loss_scale = o->loss_scale;
  pc.quant = drv_quant();
  pc.tune = drv_tune();
  pc.verify = verify;
  return pc;
}

Graph *train_graph_load(const Options *o) {
  Graph *gt = frontend_load(o->model, o->sets, o->nsets);
  if (!gt || diag_errors()) { ir_graph_free(gt); return NULL; }
  if (!gt->train.present) {
    drv_error("%s: the model has no train block (`train { optimizer ...; minimize LOSS }`)", o->model);
    ir_graph_free(gt);
    return NULL;
  }
  PassCtx pc = drv_pass_ctx(o, 1, 1);
  /* the training step a model's MODEL.cu carries beside fp16 inference (no
   * --train, not ncc train) stays fp32: fp16 training scales the loss and
   * may skip steps, which a user asks for (--train or ncc train) */
  if (pc.precision == PREC_FP16 && !o->train && o->cmd != CMD_TRAIN) pc.precision = PREC_FP32;
  if (pc.precision == PREC_INT8) pc.precision = PREC_FP32;   /* int8 is inference's; its training step stays fp32 */
  if (passes_run(gt, &pc, o->passes) != 0 || diag_errors()) { ir_graph_free(gt); return NULL; }
  return gt;
}

static int emit_graph(const Options *o, Graph *g, Graph *gt, CodegenOpts *co, int printing, const char *note);

/* --emit=net: the model as .net source (frontend/emit_net.c).  With -o
 * FILE.net an ONNX model's weights go beside it as FILE.safetensors, under
 * the names the .net gives them; both files or neither. */
static int emit_net(const Options *o, Graph *g) {
  int onnx = drv_model_is_onnx(o->model);
  char *banner = NULL;
  size_t blen = 0;
  FILE *bf = open_memstream(&banner, &blen);
  if (!bf) return drv_internal("out of memory");
  fprintf(bf, "# %s.net: %s as .net source, written by `%s`\n", g->model, o->model, drv_command_line());
  const FrontendWeight *fw;
  if (onnx && frontend_weights(o->model, &fw) > 0)
    fprintf(bf, "# its weights: %s\n", o->out ? "the .safetensors file written beside this one"
                                               : "write them with -o FILE.net (FILE.safetensors, under these names)");
  fclose(bf);
  NetOpts no = {banner, !onnx};
  NetRename *ren = NULL;
  int nren = 0, rc;
  if (!o->out) {
    rc = frontend_emit_net(g, &no, stdout, &ren, &nren) != 0 || fflush(stdout) != 0;
  } else {
    OutFile of;
    rc = out_open(&of, o->out);
    if (!rc) {
      int ok = frontend_emit_net(g, &no, of.f, &ren, &nren) == 0;
      char *wpath = NULL;
      if (ok && onnx) ok = onnx_weights_beside(o, g, o->out, ren, nren, &wpath) == 0;
      rc = out_close(&of, ok) != 0 || !ok;
      if (rc && wpath) unlink(wpath);   /* all or nothing */
      else if (wpath) drv_log(o, "wrote %s and %s", o->out, wpath);
      free(wpath);
    }
  }
  free(ren);
  free(banner);
  return rc;
}

static int emit(const Options *o, Graph *g) {
  if (!strcmp(o->emit, "net")) return emit_net(o, g);
  /* ir and params show the graph as written unless passes are asked for; dot
   * shows the kernel groups of the -O level */
  int printing = !strcmp(o->emit, "ir") || !strcmp(o->emit, "params");
  /* the printers show the graph as written unless passes are asked for */
  /* --train: the printers and the report show the training step; MODEL.cu
   * always holds inference, and the training step beside it (below) */
  int inspect = printing || !strcmp(o->emit, "dot") || !strcmp(o->emit, "report");
  if (o->train && !g->train.present)
    return drv_error("%s: --train: the model has no train block (`train { optimizer ...; minimize LOSS }`)", o->model);
  if (!printing || o->passes || o->print_after) {
#ifndef NDEBUG
    PassCtx pc = drv_pass_ctx(o, o->train && inspect, 1);
#else
    PassCtx pc = drv_pass_ctx(o, o->train && inspect, 0);
#endif
    if (passes_run(g, &pc, o->passes) != 0 || diag_errors()) return 1;
  }
  /* --max-memory: the object's layout measured, and g replaced by a graph for
   * slices of the batch when that is what fits (budget.c) */
  CodegenOpts co = {0};
  co.jit = o->jit;
  co.use_cublas = o->cublas;
  Graph *gt = NULL, *sliced = NULL;
  char note[512] = "";
  int emits_cu = !printing && strcmp(o->emit, "dot") && strcmp(o->emit, "report") && strcmp(o->emit, "ptx");
  if (g->train.present && !o->freeze && emits_cu) {   /* MODEL.cu holds the training step too */
    gt = train_graph_load(o);
    if (!gt) return 1;
  }
  co.train = gt;
  if (o->max_memory && !(o->train && inspect)) {
    if (budget_fit(o, g, &co, &sliced, note, sizeof note)) { ir_graph_free(gt); return 1; }
    if (sliced) g = sliced;
  }
  int rc = emit_graph(o, g, gt, &co, printing, note);
  ir_graph_free(sliced);
  ir_graph_free(gt);
  return rc;
}

static int emit_graph(const Options *o, Graph *g, Graph *gt, CodegenOpts *co, int printing, const char *note) {
  if (printing || !strcmp(o->emit, "dot") || !strcmp(o->emit, "report")) {
    FILE *f = stdout;
    OutFile of = {0};
    if (o->out) { if (out_open(&of, o->out)) return 1; f = of.f; }
    if (!strcmp(o->emit, "ir")) ir_print(g, f);
    else if (!strcmp(o->emit, "dot")) ir_print_dot(g, f);
    else if (!strcmp(o->emit, "params")) emit_params(g, f);
    else report_print_note(g, f, o->train, o->arch ? o->arch : "sm_90", note, co);
    return o->out ? out_close(&of, 1) != 0 : (fflush(stdout) != 0);
  }
  if (!strcmp(o->emit, "ptx")) return emit_ptx(g, o);

  char *hpath = header_path(o->out);
  const char *hbase = strrchr(hpath, '/') ? strrchr(hpath, '/') + 1 : hpath;
  if (!strcmp(hpath, o->out)) {
    drv_error("-o %s: the output needs an extension (.cu, or .c with --jit) so that the header can be %s.h",
              o->out, o->out);
    free(hpath);
    return 1;
  }
  co->header = hbase;
  co->command = drv_command_line();   /* the banner says how MODEL.cu was made */
  unsigned char *frozen = NULL;
  if (o->freeze) {
    if (frozen_weights(o, g, &frozen, &co->frozen_len)) { free(hpath); return 1; }
    co->frozen = frozen;
    co->frozen_name = o->weights;
  }
  /* a model with a train block gets its training step in the same file (not a frozen one): gt */
  OutFile src, hdr;
  int rc = 1;
  if (out_open(&src, o->out) == 0) {
    if (out_open(&hdr, hpath) == 0) {
      int ok = codegen_emit(g, co, src.f, hdr.f) == 0 && diag_errors() == 0;
      /* commit both or neither */
      int e1 = out_close(&src, ok), e2 = out_close(&hdr, ok && e1 == 0);
      rc = !(ok && e1 == 0 && e2 == 0);
    } else {
      out_close(&src, 0);
    }
  }
  if (rc == 0) {   /* an ONNX model's weights beside: M.safetensors */
    char *wpath = NULL;
    rc = onnx_weights_beside(o, g, o->out, NULL, 0, &wpath);
    if (rc) { unlink(o->out); unlink(hpath); }   /* all or nothing */
    else if (wpath) drv_log(o, "wrote %s", wpath);
    free(wpath);
  }
  if (rc == 0) drv_log(o, "wrote %s and %s", o->out, hpath);
  free(hpath);
  free(frozen);
  return rc;
}

int compile_main(const Options *o) {
  if (drv_calibrate(o) || drv_autotune(o)) return 1;
  Graph *g = frontend_load(o->model, o->sets, o->nsets);
  if (!g || diag_errors()) { ir_graph_free(g); return 1; }
  int rc = emit(o, g);
  ir_graph_free(g);
  return rc;
}
