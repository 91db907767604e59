/* build.c — for `ncc run` and `ncc bench`: from a .net file to a shared
 * object that load.c can dlopen.
 *
 *   device choice (a GPU answers? nvcc found?) -> frontend_load -> the
 *   initialisation plan (init.c, before the passes rewrite the graph) ->
 *   passes_run (inference) -> codegen_emit into a private temporary folder ->
 *   one compiler: `cc -DNCC_EMU` (CPU emulation), nvcc (a GPU answers), or cc
 *   for the host C of a --jit build (NVRTC compiles its kernels when the
 *   model is created) -> the object, cached.
 *
 * Why a shared object: ncc compiles the model when asked to run it, for the
 * shapes --set fixes.  The object links against libnccrt, the very library
 * this process runs with, so the emulator's thread-local state lives in one
 * library loaded at start-up and the model and ncc share one copy of it.
 *
 * Where the runtime, nvcc and the cache are: paths.c.
 *
 * The compile cache (its folder: paths.c): objects are named by a hash of
 * everything that decides their bytes: the generated source and header, the compiler command
 * line and every runtime header.  A second run of the same model skips the
 * compiler.  cc builds in two steps, MODEL-HASH-emu.o (or -jit.o) and then
 * the shared object linked against libnccrt; the .o's hash leaves out where
 * the runtime lies (its headers count by their contents), so another build
 * of ncc with the same headers only links.  Files unused for 30 days are
 * pruned whenever a new one is written; the folder can be deleted at any time.
 *
 * When the generated code does not compile, that is ncc's failure: status 2,
 * the compiler's log, and the generated source kept for the bug report. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../codegen/codegen.h"
#include "../frontend/frontend.h"
#include "../passes/passes.h"
#include "driver.h"

_Static_assert((int)DEVICE_AUTO == (int)NCC_DEV_AUTO && (int)DEVICE_CUDA == (int)NCC_DEV_CUDA &&
                   (int)DEVICE_EMU == (int)NCC_DEV_EMU,
               "options.h's devices are libnccrt's");

/* ---- GPU probe -------------------------------------------------------------- */

/* Asks the CUDA driver (dlopen'ed, so that ncc loads on machines without
 * one) whether a GPU answers.  Fills why with the reason when none does. */
static int gpu_probe(char *name, size_t namen, char *why, size_t whyn) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) { snprintf(why, whyn, "no CUDA driver (libcuda.so.1 not found)"); return 0; }
  int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
  int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
  int (*getname)(char *, int, int) = (int (*)(char *, int, int))dlsym(h, "cuDeviceGetName");
  int n = 0, rc;
  if (!init || !count) { snprintf(why, whyn, "libcuda.so.1 lacks cuInit"); dlclose(h); return 0; }
  if ((rc = init(0)) != 0) { snprintf(why, whyn, "cuInit failed (CUresult %d)", rc); dlclose(h); return 0; }
  if ((rc = count(&n)) != 0 || n <= 0) { snprintf(why, whyn, "the CUDA driver reports no device"); dlclose(h); return 0; }
  if (getname && getname(name, (int)namen, 0) != 0) snprintf(name, namen, "GPU 0");
  /* its architecture after the name, "NVIDIA H200, sm_90": --autotune's cache lines (the device, so the arch
   * too) and the report's machine (bench) read it */
  int (*attr)(int *, int, int) = (int (*)(int *, int, int))dlsym(h, "cuDeviceGetAttribute");
  int major = 0, minor = 0;
  if (attr && attr(&major, 75, 0) == 0 && attr(&minor, 76, 0) == 0 && major > 0) {   /* COMPUTE_CAPABILITY_MAJOR, MINOR */
    size_t l = strlen(name);
    snprintf(name + l, namen > l ? namen - l : 0, ", sm_%d%d", major, minor);
  }
  /* the driver stays loaded: the model will use it */
  return 1;
}

/* ---- hashing and the compile cache ----------------------------------------- */

typedef struct Hash { uint64_t h; } Hash;   /* FNV-1a */
static void hash_bytes(Hash *s, const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  for (size_t i = 0; i < n; i++) { s->h ^= b[i]; s->h *= 1099511628211ULL; }
}
static void hash_str(Hash *s, const char *str) { hash_bytes(s, str, strlen(str) + 1); }
static int hash_file(Hash *s, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) hash_bytes(s, buf, n);
  fclose(f);
  return 0;
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every header of the runtime include dir, in name order: a change to the
 * emulation header must invalidate cached objects. */
static void hash_headers(Hash *s, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  char *names[512];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < 512) {
    size_t l = strlen(e->d_name);
    if (l > 2 && !strcmp(e->d_name + l - 2, ".h")) names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  for (int i = 0; i < n; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, names[i]);
    hash_str(s, names[i]);
    hash_file(s, p);
    free(names[i]);
  }
}

static int mkdir_p(const char *path) {
  char p[4096];
  snprintf(p, sizeof p, "%s", path);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') { *s = '\0'; mkdir(p, 0755); *s = '/'; }
  return mkdir(p, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* The cache folder, created; -1 when there is none or it is not writable
 * (the object is then built in the temporary folder and not kept). */
int drv_cache_dir(char *out, size_t n) {
  if (cache_dir_path(out, n) != 0) return -1;
  if (mkdir_p(out) != 0 || access(out, W_OK) != 0) return -1;
  return 0;
}

/* Keeps the cache from growing without bound: after a compile, objects not
 * used (atime, or mtime where atime is not kept) for 30 days go, and
 * temporaries of a compile killed midway after a day. */
static void cache_prune(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  time_t now = time(NULL);
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    int obj = (l > 3 && !strcmp(e->d_name + l - 3, ".so")) || (l > 2 && !strcmp(e->d_name + l - 2, ".o"));
    int tmp = strstr(e->d_name, ".so.tmp") != NULL || strstr(e->d_name, ".o.tmp") != NULL;
    if (!obj && !tmp) continue;
    char p[8192];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (stat(p, &st) != 0) continue;
    time_t used = st.st_atime > st.st_mtime ? st.st_atime : st.st_mtime;
    if (now - used > (obj ? 30 : 1) * 86400L) unlink(p);
  }
  closedir(d);
}

/* ---- running the compiler --------------------------------------------------- */

/* Runs argv with stdout/stderr into logpath; returns the exit status, or -1. */
static int run_cmd(char *const *argv, const char *logpath) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
    execvp(argv[0], argv);
    fprintf(stderr, "cannot execute %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  return -1;
}

static void print_log(const char *logpath, int maxlines) {
  FILE *f = fopen(logpath, "r");
  if (!f) return;
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    if (n++ < maxlines) fputs(line, stderr);
  }
  if (n > maxlines) fprintf(stderr, "... (%d more lines)\n", n - maxlines);
  fclose(f);
}

static void rm_tmpdir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

void build_release(Model *M) {
  if (M->tmpdir[0]) {
    if (M->keep_tmp) drv_note("the generated source is kept in %s", M->tmpdir);
    else rm_tmpdir(M->tmpdir);
  }
  M->tmpdir[0] = '\0';
  free(M->live_inputs);
  M->live_inputs = NULL;
  free((void *)M->name);
  M->name = NULL;
  init_plan_free(M->init);
  M->init = NULL;
  if (M->g) ir_graph_free(M->g);
  if (M->gsliced) ir_graph_free(M->gsliced);
  M->gsliced = NULL;
  if (M->gt) ir_graph_free(M->gt);
  M->gt = NULL;
  M->g = NULL;
}

/* ---- the steps -------------------------------------------------------------- */

/* Decides where the model runs and so which compiler builds it.  `--device
 * cuda` on a machine without a GPU is the user's error and should not wait
 * for a compile, so this comes first. */
static int choose_device(const Options *o, Model *M, const char **nvcc) {
  char gpuname[256] = "", why[256] = "";
  int have_gpu = 0;
  *nvcc = NULL;
  if (o->device != DEVICE_EMU) {
    /* NCC_RUN_ASSUME_GPU=1 skips the probe: a test aid that exercises the
     * GPU build paths (nvcc, jit) on machines without a GPU, where creating
     * the model then fails with the runtime's message */
    const char *assume = getenv("NCC_RUN_ASSUME_GPU");
    if (assume && !strcmp(assume, "1")) {
      have_gpu = 1;
      snprintf(gpuname, sizeof gpuname, "assumed by NCC_RUN_ASSUME_GPU");
    } else {
      have_gpu = gpu_probe(gpuname, sizeof gpuname, why, sizeof why);
    }
    if (o->device == DEVICE_CUDA && !have_gpu)
      return drv_error("--device cuda: no usable CUDA GPU: %s (use --device emu or auto)", why);
    if (!have_gpu) drv_log(o, "no GPU: %s; using CPU emulation", why);
    /* a GPU without nvcc still runs: host code by cc, kernels by NVRTC */
    if (have_gpu && !o->jit && !(*nvcc = find_nvcc())) {
      M->jit = 1;
      drv_log(o, "nvcc not found (set NCC_NVCC or CUDA_HOME): kernels are compiled by NVRTC (--jit)");
    }
    if (have_gpu && o->jit) M->jit = 1;
  }
  M->gpu = have_gpu;
  if (M->gpu) {
    snprintf(M->devdesc, sizeof M->devdesc, "cuda (%s)%s", gpuname, M->jit ? ", jit" : "");
  } else {
    /* what the emulator will really do, asked from the runtime: its
     * thread count, checked mode (--check / NCC_CHECK), fiber order */
    if (o->check) ncc_emu_set_checked(1);
    const char *fo = getenv("NCC_FIBER_ORDER");
    int t = ncc_emu_threads(), so = ncc_emu_stream_order();
    snprintf(M->devdesc, sizeof M->devdesc, "emu (%d thread%s%s%s%s)", t, t == 1 ? "" : "s",
             ncc_emu_checked() ? ", checked" : "", fo && !strcmp(fo, "reverse") ? ", reverse fiber order" : "",
             so == NCC_STREAM_ORDER_SIDE_LAST ? ", side stream last" : so == NCC_STREAM_ORDER_MAIN_LAST ? ", stream 0 last" : "");
  }
  return 0;
}

/* The front end and the inference passes; the graph stays in M. */
static int build_graph(const Options *o, Model *M) {
  Graph *g = M->g = frontend_load(o->model, o->sets, o->nsets);
  if (!g || diag_errors()) return 1;
  drv_build_hook(g);   /* a calibration build's extra outputs (calibrate.c) */
  if (!o->weights) M->init = init_plan(g);
  PassCtx pc = drv_pass_ctx(o, 0, 1);   /* verify: cheap next to compiling C, and a broken pass fails loudly */
  if (passes_run(g, &pc, o->passes) != 0 || diag_errors()) return 1;
  M->name = strdup(g->model && *g->model ? g->model : "model");
  /* training: the step too, in the same generated file */
  if (!o->freeze && (!strcmp(drv_cmd(), "train") || o->train)) {
    if (!g->train.present && drv_model_is_onnx(o->model))   /* docs/onnx.md, "Training" */
      return drv_error("%s: an ONNX model has no loss and no optimizer to train with: translate it "
                       "(`ncc %s --emit=net -o MODEL.net` writes MODEL.safetensors beside), add a labels input, "
                       "a loss and a train block to MODEL.net, and train that with --weights MODEL.safetensors",
                       o->model, o->model);
    if (!g->train.present)
      return drv_error("%s: the model has no train block (`train { optimizer ...; minimize LOSS }`): "
                       "there is nothing to train", o->model);
    M->gt = train_graph_load(o);
    if (!M->gt) return 1;
  }
  /* --max-memory: smaller workspaces, or the batch in slices (budget.c) */
  if (o->max_memory) {
    CodegenOpts co;
    memset(&co, 0, sizeof co);
    co.use_cublas = o->cublas;
    co.jit = M->jit;
    co.train = M->gt;
    char note[512];
    if (budget_fit(o, g, &co, &M->gsliced, note, sizeof note)) return 1;
    M->ws_limit = co.ws_limit;
    M->api_batch = co.api_batch;
  }
  /* Inputs read only by the loss (labels) may still be listed by M_info;
   * `ncc run` must not insist on a file for them. */
  M->live_inputs = (const char **)calloc((size_t)g->nnodes + 1, sizeof *M->live_inputs);
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->op == OP_INPUT && !n->dead && n->out && n->out->nuses > 0 && n->name)
      M->live_inputs[M->nlive++] = n->name;
  }
  return 0;
}

/* MODEL.cu (or .c for jit) and MODEL.h into a new temporary folder. */
static int generate(const Options *o, Model *M, char *src, size_t srcn, char *hdr, size_t hdrn) {
  const char *tmproot = getenv("TMPDIR");
  snprintf(M->tmpdir, sizeof M->tmpdir, "%s/ncc-%s-XXXXXX", tmproot && *tmproot ? tmproot : "/tmp", drv_cmd());
  if (!mkdtemp(M->tmpdir)) {
    int e = errno;
    M->tmpdir[0] = '\0';
    return drv_error("cannot create a temporary directory: %s", strerror(e));
  }
  char hname[300];
  snprintf(hname, sizeof hname, "%s.h", M->name);
  snprintf(src, srcn, "%s/%s.%s", M->tmpdir, M->name, M->jit ? "c" : "cu");
  snprintf(hdr, hdrn, "%s/%s", M->tmpdir, hname);
  FILE *fs = fopen(src, "w"), *fh = fopen(hdr, "w");
  if (!fs || !fh) {
    int e = errno;
    if (fs) fclose(fs);
    if (fh) fclose(fh);
    return drv_error("cannot write into %s: %s", M->tmpdir, strerror(e));
  }
  CodegenOpts co;
  memset(&co, 0, sizeof co);
  co.use_cublas = o->cublas;
  co.jit = M->jit;
  co.header = hname;
  co.train = M->gt;
  co.ws_limit = M->ws_limit;
  co.api_batch = M->api_batch;
  unsigned char *frozen = NULL;
  if (o->freeze) {   /* the weights inside: create loads them */
    if (frozen_weights(o, M->g, &frozen, &co.frozen_len)) {
      fclose(fs);
      fclose(fh);
      return 1;
    }
    co.frozen = frozen;
    co.frozen_name = o->weights;
  }
  int rc = codegen_emit(M->gsliced ? M->gsliced : M->g, &co, fs, fh);
  free(frozen);
  int werr = ferror(fs) | ferror(fh);
  werr |= fclose(fs) != 0;
  werr |= fclose(fh) != 0;
  if (rc != 0 || diag_errors()) return 1;
  if (werr) return drv_error("cannot write the generated code into %s (disk full?)", M->tmpdir);
  drv_log(o, "generated %s", src);
  return 0;
}

/* The compiler's command line for the source, with "OUT" in the output's
 * place (so that the cache hash does not see temporary names).  Strings live
 * in `store`. */
typedef struct Cmd {
  const char *argv[64];
  int n, out_at, src_at, inc_at;   /* inc_at: the -I of the runtime headers */
  char inc[4200], lib[4200], rpath[4300], rp2[4300], rp3[4300], arch[128];
} Cmd;

static void compiler_cmd(Cmd *c, const Model *M, const char *nvcc, const char *src, const char *incdir,
                         const char *libdir) {
  memset(c, 0, sizeof *c);
  snprintf(c->inc, sizeof c->inc, "-I%s", incdir);
  snprintf(c->lib, sizeof c->lib, "-L%s", libdir);
  snprintf(c->rpath, sizeof c->rpath, "-Wl,-rpath,%s", libdir);
  const char **a = c->argv;
  int n = 0;
  if (M->gpu && !M->jit) {
    const char *arch = getenv("NCC_CUDA_ARCH");
    snprintf(c->arch, sizeof c->arch, "-arch=%s", arch && *arch ? arch : "native");
    a[n++] = nvcc;
    a[n++] = "-O2";
    a[n++] = c->arch;
    a[n++] = "-Xcompiler";
    a[n++] = "-fPIC";
    a[n++] = "-shared";
    c->inc_at = n; a[n++] = c->inc;
    a[n++] = "-x";
    a[n++] = "cu";
    c->src_at = n; a[n++] = src;
    a[n++] = "-o";
    c->out_at = n; a[n++] = "OUT";
    a[n++] = c->lib;
    /* libnccrt's dir and the toolkit's library dirs (cudart, cuBLAS), so
     * that dlopen finds them without LD_LIBRARY_PATH */
    char *bin = path_dir(nvcc), *root = path_dir(bin);
    snprintf(c->rp2, sizeof c->rp2, "-rpath,%s", libdir);
    snprintf(c->rp3, sizeof c->rp3, "-rpath,%s/lib64:%s/lib", root, root);
    free(bin);
    free(root);
    a[n++] = "-Xlinker";
    a[n++] = c->rp2;
    a[n++] = "-Xlinker";
    a[n++] = c->rp3;
    a[n++] = "-lnccrt";
    a[n++] = "-lcudart";
    a[n++] = "-lcublas";
  } else {
    /* cc: the object only (cc_link_cmd makes the shared object of it) */
    const char *cc = getenv("CC");
    a[n++] = cc && *cc && !strchr(cc, ' ') ? cc : "cc";
    a[n++] = "-std=gnu11";
    a[n++] = "-O2";
    a[n++] = "-fPIC";
    if (!M->jit) a[n++] = "-DNCC_EMU";   /* the jit host file defines NCC_JIT itself */
#if defined(__x86_64__)
    /* The kernels call fmaf() (as the GPU's fused multiply-add); without
     * -mfma that is a libm call per multiply-add: ~22% of ResNet-18's
     * emulated time.  The result is the same correctly rounded fma either way. */
    if (!M->jit && __builtin_cpu_supports("fma")) a[n++] = "-mfma";
#endif
    a[n++] = "-Werror=implicit-function-declaration";
    c->inc_at = n; a[n++] = c->inc;
    a[n++] = "-x";
    a[n++] = "c";
    c->src_at = n; a[n++] = src;
    a[n++] = "-c";
    a[n++] = "-o";
    c->out_at = n; a[n++] = "OUT";
  }
  a[n] = NULL;
  c->n = n;
}

/* cc's link of a compiled object (compiler_cmd's, "IN") into the shared
 * object ("OUT"), against libnccrt in libdir */
static void cc_link_cmd(Cmd *c, const Cmd *cc, const char *libdir) {
  memset(c, 0, sizeof *c);
  snprintf(c->lib, sizeof c->lib, "-L%s", libdir);
  snprintf(c->rpath, sizeof c->rpath, "-Wl,-rpath,%s", libdir);
  const char **a = c->argv;
  int n = 0;
  a[n++] = cc->argv[0];
  a[n++] = "-shared";
  c->src_at = n; a[n++] = "IN";
  a[n++] = "-o";
  c->out_at = n; a[n++] = "OUT";
  a[n++] = c->lib;
  a[n++] = c->rpath;
  a[n++] = "-lnccrt";
  a[n++] = "-lm";
  a[n] = NULL;
  c->n = n;
}

/* Runs c with its output written beside `dst` and then renamed to it: a
 * concurrent run of the same model never sees a half-written file.  1 when
 * the compiler failed (its log printed), 2 when the file cannot be moved. */
static int run_into(const Options *o, Model *M, Cmd *c, const char *dst, const char *logp, int link) {
  char tmp[4800];
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", dst, (long)getpid());
  c->argv[c->out_at] = tmp;
  if (o->verbose) {
    fprintf(stderr, "ncc %s: %s:", drv_cmd(), link ? "linking" : "compiling");
    for (int i = 0; i < c->n; i++) fprintf(stderr, " %s", c->argv[i]);
    fputc('\n', stderr);
  }
  int st = run_cmd((char *const *)c->argv, logp);
  if (st != 0) {
    unlink(tmp);
    M->keep_tmp = 1;
    drv_internal("the generated code did not %s (%s exited with %d):", link ? "link" : "compile",
                 c->argv[0], st);
    print_log(logp, 40);
    return 1;
  }
  if (rename(tmp, dst) != 0) {
    int e = errno;
    unlink(tmp);
    drv_internal("cannot move the compiled model to %s: %s", dst, strerror(e));
    return 2;
  }
  return 0;
}

/* Compiles src into M->so_path, or finds it in the cache. */
static int compile_object(const Options *o, Model *M, const char *nvcc, const char *src, const char *hdr) {
  char *libdir = runtime_lib_dir();
  char *incdir = runtime_include_dir();
  if (!incdir || !libdir) {
    const char *env = getenv("NCC_RUNTIME_DIR");
    int rc = !incdir && env && *env
               ? drv_error("NCC_RUNTIME_DIR=%s holds neither ncc_rt.h nor include/ncc/ncc_rt.h", env)
               : drv_internal("cannot find the runtime's %s beside ncc; set NCC_RUNTIME_DIR to the folder of ncc_rt.h",
                              !incdir ? "headers (include/ncc/ncc_rt.h)" : "library (libnccrt.so)");
    free(libdir);
    free(incdir);
    return rc;
  }
  Cmd c, l;
  compiler_cmd(&c, M, nvcc, src, incdir, libdir);
  int two_step = !M->gpu || M->jit;   /* cc: an object, then the shared object */
  if (two_step) cc_link_cmd(&l, &c, libdir);
  drv_log(o, "runtime: headers %s, library %s", incdir, libdir);

  /* The runtime headers count by their contents (hash_headers), not where
   * they lie; cc's object is not keyed by the library it will be linked with
   * either: another build of ncc with the same headers (another folder, an
   * installed copy) reuses it and only links.  The shared object is keyed by
   * the object and the link. */
  Hash h = {14695981039346656037ULL};
  for (int i = 0; i < c.n; i++)
    if (i != c.src_at && i != c.out_at && i != c.inc_at) hash_str(&h, c.argv[i]);
  hash_file(&h, src);
  hash_file(&h, hdr);
  hash_headers(&h, incdir);
  uint64_t objkey = h.h;
  if (two_step)
    for (int i = 0; i < l.n; i++)
      if (i != l.src_at && i != l.out_at) hash_str(&h, l.argv[i]);
  free(libdir);
  free(incdir);
  char cdir[4096], soname[512], objpath[4800], logp[1024];
  int cached = drv_cache_dir(cdir, sizeof cdir) == 0;
  const char *kind = M->jit ? "-jit" : M->gpu ? "-cuda" : "-emu";
  snprintf(soname, sizeof soname, "%s-%016llx%s.so", M->name, (unsigned long long)h.h, kind);
  snprintf(M->so_path, sizeof M->so_path, "%s/%s", cached ? cdir : M->tmpdir, soname);
  snprintf(objpath, sizeof objpath, "%s/%s-%016llx%s.o", cached ? cdir : M->tmpdir, M->name,
           (unsigned long long)objkey, kind);
  if (!cached) drv_log(o, "no writable compile cache (NCC_CACHE_DIR, XDG_CACHE_HOME, HOME): the object is not kept");

  if (cached && access(M->so_path, R_OK) == 0) {
    drv_log(o, "compiled object found in the cache: %s", M->so_path);
    return 0;
  }
  snprintf(logp, sizeof logp, "%s/compile.log", M->tmpdir);
  double tc = ncc_now();
  if (!two_step) {
    if (run_into(o, M, &c, M->so_path, logp, 0)) return 2;
  } else {
    if (cached && access(objpath, R_OK) == 0) {
      drv_log(o, "compiled object found in the cache: %s (linked now)", objpath);
    } else {
      if (run_into(o, M, &c, objpath, logp, 0)) return 2;
    }
    l.argv[l.src_at] = objpath;
    if (run_into(o, M, &l, M->so_path, logp, 1)) return 2;
    if (!cached) unlink(objpath);
  }
  drv_log(o, "compiled in %.2f s: %s", ncc_now() - tc, M->so_path);
  if (cached) cache_prune(cdir);
  return 0;
}

int drv_device_key(const Options *o, char *key, size_t n) {
  Model M;
  memset(&M, 0, sizeof M);
  const char *nvcc;
  int rc = choose_device(o, &M, &nvcc);
  if (!rc) snprintf(key, n, "%s", M.gpu ? M.devdesc : "emu");
  return rc;
}

int model_build(const Options *o, Model *M) {
  memset(M, 0, sizeof *M);
  double t0 = ncc_now();
  /* a typo in a path should cost no compile */
  if (o->weights && access(o->weights, R_OK) != 0)
    return drv_error("cannot read weights '%s': %s", o->weights, strerror(errno));
  const char *nvcc;
  int rc = drv_calibrate(o);   /* int8: the calibration first (its builds come through here) */
  if (!rc) rc = drv_autotune(o);   /* --autotune: the tiles first (its builds too) */
  if (rc) return rc;
  rc = choose_device(o, M, &nvcc);
  if (!rc) rc = build_graph(o, M);
  if (rc) return rc;
  drv_log(o, "front end and passes: %.1f ms", (ncc_now() - t0) * 1e3);
  char src[1024], hdr[1024];
  if ((rc = generate(o, M, src, sizeof src, hdr, sizeof hdr)) != 0) return rc;
  return compile_object(o, M, nvcc, src, hdr);
}
