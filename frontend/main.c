/* main.c — the `ncc` command: argument parsing and the straight-line pipeline
 *
 *   source -> frontend_load -> passes_run -> one of the emitters
 *
 * `ncc run` and `ncc bench` live in run.c.  User errors (bad model, bad flag,
 * unwritable output) exit 1 with a message; ncc's own bugs exit 2 (ncc_die).
 * Output files are written to a temporary name beside the target and renamed
 * only when everything succeeded, so a failed compile never leaves a partial
 * or stale-looking MODEL.cu behind. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../codegen/codegen.h"
#include "../passes/passes.h"
#include "../runtime/ncc_rt.h"
#include "frontend.h"
#include "run.h"

#define NCC_VERSION "0.1.0"

static void usage(FILE *f) {
  fputs(
    "usage: ncc MODEL.net -o MODEL.cu            emit CUDA C (+ MODEL.h)\n"
    "       ncc MODEL.net --emit=ir|dot|report|params|cu|ptx [-o FILE]\n"
    "       ncc MODEL.net --jit -o MODEL.c       host C, kernels compiled at load time by NVRTC\n"
    "       ncc run   MODEL.net [--weights W.safetensors] --input x=X.npy --output y=Y.npy [--device auto|cuda|emu]\n"
    "       ncc bench MODEL.net [--device ...]\n"
    "common: -O0..-O3  --passes=LIST  --print-after=PASS  --precision=fp32  --set NAME=V\n"
    "        --arch=sm_80,sm_90  --cublas  --train  --seed S  -v  --version\n",
    f);
}

typedef struct Opts {
  const char *model, *out, *emit, *passes, *print_after, *arch;
  int jit, opt_level, train, cublas, verbose;
  SetOpt sets[64];
  int nsets;
} Opts;

static int bad_flag(const char *fmt, const char *arg) {
  fprintf(stderr, "ncc: error: ");
  fprintf(stderr, fmt, arg);
  fputs("\n(run `ncc --help` for usage)\n", stderr);
  return 1;
}

/* Accepts `--flag=V` and `--flag V`; returns the value or NULL. */
static const char *flag_value(int argc, char **argv, int *i, const char *flag) {
  size_t n = strlen(flag);
  if (strncmp(argv[*i], flag, n) != 0) return NULL;
  if (argv[*i][n] == '=') return argv[*i] + n + 1;
  if (argv[*i][n] == 0 && *i + 1 < argc) return argv[++*i];
  return NULL;
}

static int add_set(Opts *o, const char *kv) {
  const char *eq = strchr(kv, '=');
  if (!eq || eq == kv || !eq[1]) return bad_flag("--set expects NAME=VALUE, got '%s'", kv);
  if (o->nsets == 64) return bad_flag("too many --set options (at most 64): '%s'", kv);
  char *name = strndup(kv, (size_t)(eq - kv));
  o->sets[o->nsets++] = (SetOpt){name, eq + 1};
  return 0;
}

static int parse(int argc, char **argv, Opts *o) {
  o->opt_level = 2;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); exit(0); }
    else if (!strcmp(a, "--version")) { printf("ncc " NCC_VERSION "\n"); exit(0); }
    else if (!strcmp(a, "-o")) {
      if (i + 1 >= argc) return bad_flag("%s expects a file name", a);
      o->out = argv[++i];
    }
    else if ((v = flag_value(argc, argv, &i, "--emit"))) o->emit = v;
    else if ((v = flag_value(argc, argv, &i, "--passes"))) o->passes = v;
    else if ((v = flag_value(argc, argv, &i, "--print-after"))) o->print_after = v;
    else if ((v = flag_value(argc, argv, &i, "--arch"))) o->arch = v;
    else if ((v = flag_value(argc, argv, &i, "--set"))) { if (add_set(o, v)) return 1; }
    else if ((v = flag_value(argc, argv, &i, "--seed"))) {
      char *end;
      strtoull(v, &end, 10);
      if (!*v || *end) return bad_flag("--seed expects a non-negative integer, got '%s'", v);
    }
    else if ((v = flag_value(argc, argv, &i, "--precision"))) {
      if (strcmp(v, "fp32") != 0)
        return bad_flag("--precision=%s is not supported yet (only fp32; fp16/bf16/int8 lowering is planned)", v);
    }
    else if ((v = flag_value(argc, argv, &i, "--calibrate")))
      return bad_flag("--calibrate (%s) needs --precision=int8, which is not supported yet", v);
    else if (!strcmp(a, "--jit")) o->jit = 1;
    else if (!strcmp(a, "--train")) o->train = 1;
    else if (!strcmp(a, "--cublas")) o->cublas = 1;
    else if (!strcmp(a, "-v")) o->verbose = 1;
    else if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) o->opt_level = a[2] - '0';
    else if (a[0] == '-' && a[1]) return bad_flag("unknown option '%s'", a);
    else if (o->model) return bad_flag("more than one model file given ('%s')", a);
    else o->model = a;
  }
  if (!o->model) { usage(stderr); return 1; }
  if (!o->emit) o->emit = "cu";
  static const char *const emits[] = {"ir", "dot", "report", "params", "cu", "ptx"};
  int ok = 0;
  for (size_t k = 0; k < sizeof emits / sizeof emits[0]; k++) ok |= !strcmp(o->emit, emits[k]);
  if (!ok) return bad_flag("--emit=%s: expected one of ir, dot, report, params, cu, ptx", o->emit);
  if (o->arch && strcmp(o->arch, "sm_80") && strcmp(o->arch, "sm_90") && strcmp(o->arch, "sm_80,sm_90") &&
      strcmp(o->arch, "sm_90,sm_80"))
    return bad_flag("--arch=%s: expected sm_80, sm_90 or sm_80,sm_90", o->arch);
  if (o->jit && strcmp(o->emit, "cu")) return bad_flag("--jit goes with the default --emit=cu, not --emit=%s", o->emit);
  if (!strcmp(o->emit, "cu") && !o->out)
    return bad_flag("%s", "no output file: use -o MODEL.cu (or --emit=ir|dot|report to inspect)");
  return 0;
}

/* ---- atomic output files ---- */
typedef struct OutFile { char *path, *tmp; FILE *f; } OutFile;

static int out_open(OutFile *o, const char *path) {
  o->path = strdup(path);
  size_t n = strlen(path) + 32;
  o->tmp = malloc(n);
  snprintf(o->tmp, n, "%s.tmp.%ld", path, (long)getpid());
  o->f = fopen(o->tmp, "w");
  if (!o->f) {
    fprintf(stderr, "ncc: error: cannot write '%s': %s\n", path, strerror(errno));
    return -1;
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
  if (commit && err) fprintf(stderr, "ncc: error: cannot write '%s': %s\n", o->path, strerror(errno));
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

static int emit_params(Graph *g, FILE *f) {
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->op != OP_PARAM) continue;
    char buf[160];
    fprintf(f, "%s %s\n", n->name, shape_str(buf, sizeof buf, n->out->dtype, &n->out->shape));
  }
  return 0;
}

static int emit_ptx(Graph *g, const Opts *o) {
  CodegenOpts co = {0};
  co.use_cublas = o->cublas;
  char *src = NULL;
  size_t len = 0;
  FILE *mf = open_memstream(&src, &len);
  if (!mf || codegen_emit_kernels(g, &co, mf) != 0) { if (mf) fclose(mf); free(src); return 1; }
  fclose(mf);
  const char *arch = o->arch && !strncmp(o->arch, "sm_80", 5) ? "--gpu-architecture=compute_80"
                                                              : "--gpu-architecture=compute_90";
  const char *opts[] = {arch, "-I" NCC_RUNTIME_INCLUDE_DIR, "-I/usr/local/cuda/include", "--std=c++17"};
  char *ptx = NULL, err[8192];
  int rc = ncc_nvrtc_ptx(src, g->model, opts, 4, &ptx, err, sizeof err);
  free(src);
  if (rc) { fprintf(stderr, "ncc: error: --emit=ptx: %s\n", err); return 1; }
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

static int compile_graph(const Opts *o, Graph *g);

static int compile(const Opts *o) {
  Graph *g = frontend_load(o->model, o->sets, o->nsets);
  if (!g || diag_errors()) { ir_graph_free(g); return 1; }
  int rc = compile_graph(o, g);
  ir_graph_free(g);
  return rc;
}

static int compile_graph(const Opts *o, Graph *g) {
  int printing = !strcmp(o->emit, "ir") || !strcmp(o->emit, "dot") || !strcmp(o->emit, "params");
  if (!printing || o->passes || o->print_after) {
    PassCtx pc = {0};
    pc.train = o->train;
    pc.opt_level = o->opt_level;
    pc.print_after = o->print_after;
    pc.verbose = o->verbose;
#ifndef NDEBUG
    pc.verify = 1;
#endif
    if (passes_run(g, &pc, o->passes) != 0 || diag_errors()) return 1;
  }
  if (printing || !strcmp(o->emit, "report")) {
    FILE *f = stdout;
    OutFile of = {0};
    if (o->out) { if (out_open(&of, o->out)) return 1; f = of.f; }
    if (!strcmp(o->emit, "ir")) ir_print(g, f);
    else if (!strcmp(o->emit, "dot")) ir_print_dot(g, f);
    else if (!strcmp(o->emit, "params")) emit_params(g, f);
    else report_print(g, f, o->train, o->arch ? o->arch : "sm_90");
    return o->out ? out_close(&of, 1) != 0 : (fflush(stdout) != 0);
  }
  if (!strcmp(o->emit, "ptx")) return emit_ptx(g, o);

  char *hpath = header_path(o->out);
  const char *hbase = strrchr(hpath, '/') ? strrchr(hpath, '/') + 1 : hpath;
  if (!strcmp(hpath, o->out)) {
    fprintf(stderr, "ncc: error: -o %s: the output needs an extension (.cu, or .c with --jit) so that the header can be %s.h\n",
            o->out, o->out);
    free(hpath);
    return 1;
  }
  CodegenOpts co = {0};
  co.jit = o->jit;
  co.use_cublas = o->cublas;
  co.header = hbase;
  OutFile src, hdr;
  int rc = 1;
  if (out_open(&src, o->out) == 0) {
    if (out_open(&hdr, hpath) == 0) {
      int ok = codegen_emit(g, &co, src.f, hdr.f) == 0 && diag_errors() == 0;
      /* commit both or neither */
      int e1 = out_close(&src, ok), e2 = out_close(&hdr, ok && e1 == 0);
      rc = !(ok && e1 == 0 && e2 == 0);
    } else {
      out_close(&src, 0);
    }
  }
  if (o->verbose && rc == 0) fprintf(stderr, "ncc: wrote %s and %s\n", o->out, hpath);
  free(hpath);
  return rc;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "run")) return run_main(argc - 1, argv + 1);
  if (argc >= 2 && !strcmp(argv[1], "bench")) return bench_main(argc - 1, argv + 1);
  if (argc >= 2 && !strcmp(argv[1], "train")) {
    fprintf(stderr, "ncc: error: `ncc train` is not available yet: training (autodiff, optimizer) has not landed\n");
    return 1;
  }
  Opts o;
  memset(&o, 0, sizeof o);
  int rc = parse(argc, argv, &o) ? 1 : compile(&o);
  for (int i = 0; i < o.nsets; i++) free((char *)o.sets[i].name);
  return rc;
}
