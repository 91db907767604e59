/* run.c — `ncc run` and `ncc bench`: compile a model, load it, execute it.
 *
 * The path a model takes (ARCHITECTURE.md "Command line"):
 *   frontend_load -> passes_run (inference) -> codegen_emit into a private
 *   temporary directory -> a C compiler (`cc -DNCC_EMU`, CPU emulation) or
 *   nvcc (a GPU answers; without nvcc, or with --jit, host C by cc and the
 *   kernels by NVRTC at create time) builds a shared object -> dlopen -> the generated
 *   API of GENERATED.md (M_info, M_create_on, M_load, M_infer_io, M_error,
 *   M_destroy) -> .npy in, .npy out.
 *
 * Why a shared object and dlopen rather than linking: ncc compiles the model
 * at the moment it is asked to run it, for the shapes fixed by `--set`.  The
 * object links against libnccrt, which ncc itself is linked with, so the
 * emulator's thread-local state lives in a library loaded at start-up
 * (EMULATION.md pitfall 2) and the model and ncc share one copy of it.
 *
 * Compiled objects are cached under $XDG_CACHE_HOME/ncc (or ~/.cache/ncc) by
 * a hash of everything that decides their bytes: the generated source and
 * header, the compiler command line and the runtime headers the source
 * includes.  A second run of the same model therefore skips the compiler.
 * Objects unused for 30 days are pruned whenever a new one is written.
 *
 * Errors the user can fix (bad flag, missing file, wrong shape or dtype of an
 * input, bad weights) print one clear message and give exit status 1; no
 * output file is left behind, because outputs are written to temporary names
 * and renamed only once all of them are complete.  Failures that are ncc's
 * own (the generated code does not compile) give status 2 and keep the
 * generated source for the bug report.
 */
#define _GNU_SOURCE
#include "run.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../codegen/codegen.h"
#include "../passes/passes.h"
#include "frontend.h"
#include "ncc_rt.h"

enum { MAX_IO = 64, MAX_SETS = 64 };

typedef struct KV { const char *name, *path; int owned; } KV;

typedef struct Opts {
  const char *cmd;          /* "run" or "bench", for messages */
  const char *model, *weights, *passes;
  KV in[MAX_IO]; int nin;
  KV out[MAX_IO]; int nout;
  int device;               /* NCC_DEV_AUTO / CUDA / EMU */
  int check, cublas, opt, verbose, compare, jit;
  int iters, warmup;
  unsigned long long seed;
  SetOpt sets[MAX_SETS]; int nsets;
} Opts;

/* The loaded model: the generated API looked up by name in the object. */
typedef struct Model {
  void *so;
  const ncc_model_info *(*info)(void);
  int (*create_on)(void **m, int kind);
  int (*load)(void *m, const char *path);
  int (*infer_io)(void *m, const void *const *in, void *const *out);
  const char *(*error)(const void *m);
  void (*destroy)(void *m);
  void *m;
  const ncc_model_info *inf;
  const char *name;
  char tmpdir[256];
  int keep_tmp;             /* an internal failure: leave the source for the report */
  int gpu;                  /* runs on a GPU (nvcc or jit build), else emulation */
  int jit;                  /* host C by cc, kernels by NVRTC at create time */
  char devdesc[320];        /* "emu (2 threads)", "cuda (NVIDIA H100 ...)" */
  const char **live_inputs; /* graph inputs that inference reads (labels are not) */
  int nlive;
  Graph *g;                 /* owns the strings above */
} Model;

static const char *g_cmd = "run";

static int uerr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int uerr(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ncc %s: error: ", g_cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 1;
}

static int ierr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int ierr(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ncc %s: internal error: ", g_cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 2;
}

static void vlog(const Opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vlog(const Opts *o, const char *fmt, ...) {
  if (!o->verbose) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ncc %s: ", g_cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static int dt_size(int dt) {
  switch (dt) {
  case NCC_F32: case NCC_I32: return 4;
  case NCC_F16: case NCC_BF16: return 2;
  case NCC_I8: return 1;
  default: return 0;
  }
}

static const char *dt_name(int dt) {
  static const char *n[] = {"f32", "f16", "bf16", "i32", "i8"};
  return dt >= 0 && dt < 5 ? n[dt] : "?";
}

static char *tensor_str(char *buf, size_t n, int dt, int rank, const int64_t *shape) {
  size_t k = (size_t)snprintf(buf, n, "%s[", dt_name(dt));
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

static int64_t numel(int rank, const int64_t *shape) {
  int64_t e = 1;
  for (int i = 0; i < rank; i++) e *= shape[i];
  return e;
}

/* ---- command line --------------------------------------------------------- */

static void usage(FILE *f, int bench) {
  if (bench)
    fprintf(f,
            "usage: ncc bench MODEL.net [--device auto|cuda|emu] [--iters K] [--warmup W]\n"
            "                 [--weights W.safetensors] [--cublas] [--set NAME=V]... [-O0..3] [--passes=LIST]\n"
            "                 [--seed S] [--check] [--compare] [--jit] [-v]\n"
            "Times one inference batch (warm-up runs excluded): median and min of K runs.\n"
            "--compare also times the model at -O0 (before the passes) and prints the speed-up.\n");
  else
    fprintf(f,
            "usage: ncc run MODEL.net [--weights W.safetensors] --input NAME=X.npy ...\n"
            "               [--output NAME=OUT.npy ...] [--device auto|cuda|emu] [--check]\n"
            "               [--cublas] [--jit] [--set NAME=V]... [-O0..3] [--passes=LIST] [--seed S] [-v]\n"
            "Without --weights, parameters are initialised as PyTorch initialises the same\n"
            "layers (uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for conv/linear weights and\n"
            "biases, ones/zeros for norms) from ncc's own generator seeded by --seed.\n");
}

/* Matches `--flag VALUE` and `--flag=VALUE`; advances *i past the value. */
static int flag_value(int argc, char **argv, int *i, const char *flag, const char **val,
                      int *err) {
  const char *a = argv[*i];
  size_t n = strlen(flag);
  if (strncmp(a, flag, n) != 0) return 0;
  if (a[n] == '=') { *val = a + n + 1; return 1; }
  if (a[n] != '\0') return 0;
  if (*i + 1 >= argc) { *err = uerr("%s needs a value", flag); return 1; }
  *val = argv[++*i];
  return 1;
}

static int parse_kv(const char *flag, const char *v, KV *kv) {
  const char *eq = strchr(v, '=');
  if (!eq) { kv->name = NULL; kv->path = v; kv->owned = 0; return 0; }   /* name filled in later if unique */
  if (eq == v || !eq[1])
    return uerr("%s expects NAME=FILE.npy, got '%s'", flag, v);
  kv->name = strndup(v, (size_t)(eq - v));
  kv->owned = 1;
  kv->path = eq + 1;
  return 0;
}

static int parse_int(const char *flag, const char *v, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi)
    return uerr("%s expects an integer in [%lld, %lld], got '%s'", flag, lo, hi, v);
  *out = x;
  return 0;
}

static int parse_args(int argc, char **argv, Opts *o, int bench) {
  memset(o, 0, sizeof *o);
  o->cmd = bench ? "bench" : "run";
  o->opt = 2;
  o->iters = 10;
  o->warmup = 2;
  o->device = NCC_DEV_AUTO;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    int err = 0;
    long long x;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout, bench); exit(0); }
    if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) { o->verbose = 1; continue; }
    if (!strcmp(a, "--check")) { o->check = 1; continue; }
    if (!strcmp(a, "--cublas")) { o->cublas = 1; continue; }
    if (!strcmp(a, "--jit")) { o->jit = 1; continue; }
    if (bench && !strcmp(a, "--compare")) { o->compare = 1; continue; }
    if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) { o->opt = a[2] - '0'; continue; }
    if (flag_value(argc, argv, &i, "--weights", &v, &err)) {
      if (err) return err;
      o->weights = v;
    } else if (flag_value(argc, argv, &i, "--passes", &v, &err)) {
      if (err) return err;
      o->passes = v;
    } else if (!bench && flag_value(argc, argv, &i, "--input", &v, &err)) {
      if (err) return err;
      if (o->nin == MAX_IO) return uerr("too many --input flags (at most %d)", MAX_IO);
      if (parse_kv("--input", v, &o->in[o->nin++])) return 1;
    } else if (!bench && flag_value(argc, argv, &i, "--output", &v, &err)) {
      if (err) return err;
      if (o->nout == MAX_IO) return uerr("too many --output flags (at most %d)", MAX_IO);
      if (parse_kv("--output", v, &o->out[o->nout++])) return 1;
    } else if (flag_value(argc, argv, &i, "--device", &v, &err)) {
      if (err) return err;
      if (!strcmp(v, "auto")) o->device = NCC_DEV_AUTO;
      else if (!strcmp(v, "cuda")) o->device = NCC_DEV_CUDA;
      else if (!strcmp(v, "emu")) o->device = NCC_DEV_EMU;
      else return uerr("--device expects auto, cuda or emu, got '%s'", v);
    } else if (flag_value(argc, argv, &i, "--set", &v, &err)) {
      if (err) return err;
      const char *eq = strchr(v, '=');
      if (!eq || eq == v || !eq[1]) return uerr("--set expects NAME=VALUE, got '%s'", v);
      if (o->nsets == MAX_SETS) return uerr("too many --set flags (at most %d)", MAX_SETS);
      o->sets[o->nsets].name = strndup(v, (size_t)(eq - v));
      o->sets[o->nsets++].value = eq + 1;
    } else if (flag_value(argc, argv, &i, "--seed", &v, &err)) {
      if (err) return err;
      if (parse_int("--seed", v, 0, INT64_MAX, &x)) return 1;
      o->seed = (unsigned long long)x;
    } else if (bench && flag_value(argc, argv, &i, "--iters", &v, &err)) {
      if (err) return err;
      if (parse_int("--iters", v, 1, 1000000, &x)) return 1;
      o->iters = (int)x;
    } else if (bench && flag_value(argc, argv, &i, "--warmup", &v, &err)) {
      if (err) return err;
      if (parse_int("--warmup", v, 0, 1000000, &x)) return 1;
      o->warmup = (int)x;
    } else if (a[0] == '-' && a[1]) {
      usage(stderr, bench);
      return uerr("unknown flag '%s'", a);
    } else {
      if (o->model) return uerr("two models given: '%s' and '%s'", o->model, a);
      o->model = a;
    }
  }
  if (!o->model) { usage(stderr, bench); return uerr("no model file given"); }
  return 0;
}

static void opts_free(Opts *o) {
  /* names were strndup'ed by parse_kv / --set; an unnamed --input/--output
   * borrowed the model's name, which is not ours to free */
  for (int i = 0; i < o->nin; i++) if (o->in[i].owned) free((void *)o->in[i].name);
  for (int i = 0; i < o->nout; i++) if (o->out[i].owned) free((void *)o->out[i].name);
  for (int i = 0; i < o->nsets; i++) free((void *)o->sets[i].name);
}

/* ---- where the runtime lives ---------------------------------------------- */

static int file_exists(const char *dir, const char *name) {
  char p[8192];
  struct stat st;
  if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p) return 0;
  return stat(p, &st) == 0;
}

static char *dir_of(const char *path) {
  char *d = strdup(path);
  char *s = strrchr(d, '/');
  if (s) *s = '\0'; else strcpy(d, ".");
  return d;
}

/* The libnccrt this process actually loaded: the model must link that same
 * one (two copies would mean two sets of emulator state). */
static char *runtime_lib_dir(void) {
  const char *env = getenv("NCC_RUNTIME_DIR");
  if (env && *env && file_exists(env, "libnccrt.so")) return strdup(env);
  Dl_info di;
  if (dladdr((void *)ncc_now, &di) && di.dli_fname && strchr(di.dli_fname, '/'))
    return dir_of(di.dli_fname);
#ifdef NCC_BUILD_LIB_DIR
  if (file_exists(NCC_BUILD_LIB_DIR, "libnccrt.so")) return strdup(NCC_BUILD_LIB_DIR);
#endif
#ifdef NCC_INSTALL_LIB_DIR
  return strdup(NCC_INSTALL_LIB_DIR);
#else
  return NULL;
#endif
}

/* The headers generated code includes (ncc_kernel.h, ncc_rt.h, ...).  An
 * installed libnccrt finds them next to itself (PREFIX/include/ncc); a build
 * tree finds them in the source tree.  run.c is compiled into ncccore, which
 * may not carry the ncc target's path macros, so the source tree is also
 * derived from this file's own path as a last resort. */
static char *runtime_include_dir(const char *libdir) {
  const char *env = getenv("NCC_RUNTIME_DIR");
  if (env && *env) {
    if (file_exists(env, "ncc_rt.h")) return strdup(env);
    char p[4096];
    snprintf(p, sizeof p, "%s/include/ncc", env);
    if (file_exists(p, "ncc_rt.h")) return strdup(p);
  }
  if (libdir) {
    char p[4096];
    snprintf(p, sizeof p, "%s/../include/ncc", libdir);
    if (file_exists(p, "ncc_rt.h")) return strdup(p);
  }
#ifdef NCC_RUNTIME_INCLUDE_DIR
  if (file_exists(NCC_RUNTIME_INCLUDE_DIR, "ncc_rt.h")) return strdup(NCC_RUNTIME_INCLUDE_DIR);
#endif
  {
    char *src = dir_of(__FILE__);      /* .../frontend */
    char p[4096];
    snprintf(p, sizeof p, "%s/../runtime", src);
    free(src);
    char *rp = p[0] == '/' && file_exists(p, "ncc_rt.h") ? realpath(p, NULL) : NULL;
    if (rp) return rp;
  }
#ifdef NCC_INSTALL_INCLUDE_DIR
  if (file_exists(NCC_INSTALL_INCLUDE_DIR, "ncc_rt.h")) return strdup(NCC_INSTALL_INCLUDE_DIR);
#endif
  return NULL;
}

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
  /* the driver stays loaded: the model will use it */
  return 1;
}

static const char *find_nvcc(void) {
  static char buf[4096];
  const char *env = getenv("NCC_NVCC");
  if (env && *env) return env;
  const char *cuda = getenv("CUDA_HOME");
  snprintf(buf, sizeof buf, "%s/bin/nvcc", cuda && *cuda ? cuda : "/usr/local/cuda");
  if (access(buf, X_OK) == 0) return buf;
  const char *path = getenv("PATH");
  if (!path) return NULL;
  char *p = strdup(path), *save = NULL;
  for (char *d = strtok_r(p, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    snprintf(buf, sizeof buf, "%s/nvcc", d);
    if (access(buf, X_OK) == 0) { free(p); return buf; }
  }
  free(p);
  return NULL;
}

/* The runtime's own count (NCC_EMU_THREADS or the cores), so that what is
 * printed is what runs. */
static int emu_threads(void) { return ncc_emu_threads(); }

/* ---- hashing and the compile cache ----------------------------------------- */

typedef struct Hash { uint64_t h; } Hash;
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
static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}
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

static int cache_dir(char *out, size_t n) {
  const char *x = getenv("NCC_CACHE_DIR");
  if (x && *x) snprintf(out, n, "%s", x);
  else if ((x = getenv("XDG_CACHE_HOME")) && *x) snprintf(out, n, "%s/ncc", x);
  else if ((x = getenv("HOME")) && *x) snprintf(out, n, "%s/.cache/ncc", x);
  else return -1;
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
    int obj = l > 3 && !strcmp(e->d_name + l - 3, ".so");
    int tmp = strstr(e->d_name, ".so.tmp") != NULL;
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

/* ---- compile and load ------------------------------------------------------ */

static void model_close(Model *M) {
  if (M->m && M->destroy) M->destroy(M->m);
  M->m = NULL;
  /* the object stays mapped: the runtime may hold pointers into it (kernel
   * descriptors) until exit; dlclose would gain nothing for a one-shot tool */
  if (M->tmpdir[0]) {
    if (M->keep_tmp) fprintf(stderr, "ncc %s: the generated source is kept in %s\n", g_cmd, M->tmpdir);
    else rm_tmpdir(M->tmpdir);
  }
  M->tmpdir[0] = '\0';
  free(M->live_inputs);
  M->live_inputs = NULL;
  free((void *)M->name);
  M->name = NULL;
  if (M->g) ir_graph_free(M->g);
  M->g = NULL;
}

/* Builds and loads the model; returns 0, or an exit status (1/2). */
static int model_build(const Opts *o, Model *M) {
  memset(M, 0, sizeof *M);
  double t0 = ncc_now();

  /* Device first: `--device cuda` on a machine without a GPU is the user's
   * error and should not wait for a compile. */
  char gpuname[256] = "", why[256] = "";
  int have_gpu = 0;
  const char *nvcc = NULL;
  if (o->jit && o->device == NCC_DEV_EMU)
    return uerr("--jit compiles kernels for a GPU with NVRTC; it does not go with --device emu");
  if (o->device != NCC_DEV_EMU) {
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
    if (o->device == NCC_DEV_CUDA && !have_gpu)
      return uerr("--device cuda: no usable CUDA GPU: %s (use --device emu or auto)", why);
    if (!have_gpu) vlog(o, "no GPU: %s; using CPU emulation", why);
    /* a GPU without nvcc still runs: host code by cc, kernels by NVRTC */
    if (have_gpu && !o->jit && !(nvcc = find_nvcc())) {
      M->jit = 1;
      vlog(o, "nvcc not found (set NCC_NVCC or CUDA_HOME): kernels are compiled by NVRTC (--jit)");
    }
    if (have_gpu && o->jit) M->jit = 1;
  }
  M->gpu = have_gpu;
  if (M->gpu) snprintf(M->devdesc, sizeof M->devdesc, "cuda (%s)%s", gpuname, M->jit ? ", jit" : "");
  else {
    /* what the emulator will really do, asked from the runtime: its
     * thread count, checked mode (--check / NCC_CHECK), fiber order */
    if (o->check) ncc_emu_set_checked(1);
    const char *fo = getenv("NCC_FIBER_ORDER");
    snprintf(M->devdesc, sizeof M->devdesc, "emu (%d thread%s%s%s)", emu_threads(), emu_threads() == 1 ? "" : "s",
             ncc_emu_checked() ? ", checked" : "", fo && !strcmp(fo, "reverse") ? ", reverse fiber order" : "");
  }

  Graph *g = M->g = frontend_load(o->model, o->sets, o->nsets);
  if (!g || diag_errors()) return 1;
  PassCtx pc;
  memset(&pc, 0, sizeof pc);
  pc.train = 0;
  pc.opt_level = o->opt;
  pc.verify = 1;      /* cheap next to compiling C, and a broken pass fails loudly */
  pc.verbose = o->verbose;
  if (passes_run(g, &pc, o->passes) != 0 || diag_errors()) return 1;
  M->name = strdup(g->model && *g->model ? g->model : "model");
  /* Inputs read only by the loss (labels) may still be listed by M_info;
   * `ncc run` must not insist on a file for them. */
  M->live_inputs = (const char **)calloc((size_t)g->nnodes + 1, sizeof *M->live_inputs);
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->op == OP_INPUT && !n->dead && n->out && n->out->nuses > 0 && n->name)
      M->live_inputs[M->nlive++] = n->name;
  }
  vlog(o, "front end and passes: %.1f ms", (ncc_now() - t0) * 1e3);

  const char *tmproot = getenv("TMPDIR");
  snprintf(M->tmpdir, sizeof M->tmpdir, "%s/ncc-%s-XXXXXX", tmproot && *tmproot ? tmproot : "/tmp", o->cmd);
  if (!mkdtemp(M->tmpdir)) {
    int e = errno;
    M->tmpdir[0] = '\0';
    return uerr("cannot create a temporary directory: %s", strerror(e));
  }
  char cu[1024], hdr[1024], hname[300], logp[1024];
  snprintf(hname, sizeof hname, "%s.h", M->name);
  snprintf(cu, sizeof cu, "%s/%s.%s", M->tmpdir, M->name, M->jit ? "c" : "cu");
  snprintf(hdr, sizeof hdr, "%s/%s", M->tmpdir, hname);
  snprintf(logp, sizeof logp, "%s/compile.log", M->tmpdir);
  FILE *fs = fopen(cu, "w"), *fh = fopen(hdr, "w");
  if (!fs || !fh) {
    if (fs) fclose(fs);
    if (fh) fclose(fh);
    return uerr("cannot write into %s: %s", M->tmpdir, strerror(errno));
  }
  CodegenOpts co;
  memset(&co, 0, sizeof co);
  co.use_cublas = o->cublas;
  co.jit = M->jit;
  co.header = hname;
  int rc = codegen_emit(g, &co, fs, fh);
  int werr = ferror(fs) | ferror(fh);
  werr |= fclose(fs) != 0;
  werr |= fclose(fh) != 0;
  if (rc != 0 || diag_errors()) return 1;
  if (werr) return uerr("cannot write the generated code into %s (disk full?)", M->tmpdir);
  vlog(o, "generated %s", cu);

  char *libdir = runtime_lib_dir();
  char *incdir = runtime_include_dir(libdir);
  if (!incdir || !libdir) {
    free(libdir);
    free(incdir);
    return ierr("cannot find the runtime (%s); set NCC_RUNTIME_DIR", !incdir ? "ncc_rt.h" : "libnccrt.so");
  }

  /* The command line, with the output path as a placeholder so that the
   * hash does not depend on the temporary names. */
  char incflag[4200], libflag[4200], rpath[4300], soname[512], sofinal[4700], sotmp[4800];
  snprintf(incflag, sizeof incflag, "-I%s", incdir);
  snprintf(libflag, sizeof libflag, "-L%s", libdir);
  snprintf(rpath, sizeof rpath, "-Wl,-rpath,%s", libdir);
  const char *argv[64];
  int na = 0, out_at = -1, src_at = -1;
  if (M->gpu && !M->jit) {
    const char *arch = getenv("NCC_CUDA_ARCH");
    static char archflag[128];
    snprintf(archflag, sizeof archflag, "-arch=%s", arch && *arch ? arch : "native");
    argv[na++] = nvcc;
    argv[na++] = "-O2";
    argv[na++] = archflag;
    argv[na++] = "-Xcompiler";
    argv[na++] = "-fPIC";
    argv[na++] = "-shared";
    argv[na++] = incflag;
    argv[na++] = "-x";
    argv[na++] = "cu";
    src_at = na; argv[na++] = cu;
    argv[na++] = "-o";
    out_at = na; argv[na++] = "OUT";
    argv[na++] = libflag;
    argv[na++] = "-Xlinker";
    /* libnccrt's dir and the toolkit's library dirs (cudart, cuBLAS), so
     * that dlopen finds them without LD_LIBRARY_PATH */
    static char rp2[4300], rp3[4300];
    char *bin = dir_of(nvcc), *root = dir_of(bin);
    snprintf(rp2, sizeof rp2, "-rpath,%s", libdir);
    snprintf(rp3, sizeof rp3, "-rpath,%s/lib64:%s/lib", root, root);
    free(bin);
    free(root);
    argv[na++] = rp2;
    argv[na++] = "-Xlinker";
    argv[na++] = rp3;
    argv[na++] = "-lnccrt";
    argv[na++] = "-lcudart";
    argv[na++] = "-lcublas";
  } else {
    const char *cc = getenv("CC");
    argv[na++] = cc && *cc && !strchr(cc, ' ') ? cc : "cc";
    argv[na++] = "-std=gnu11";
    argv[na++] = "-O2";
    argv[na++] = "-fPIC";
    argv[na++] = "-shared";
    if (!M->jit) argv[na++] = "-DNCC_EMU";   /* the jit host file defines NCC_JIT itself */
#if defined(__x86_64__)
    /* The kernels call fmaf() (as the GPU's fused multiply-add); without
     * -mfma that is a libm call per multiply-add: ~22% of ResNet-18's
     * emulated time.  The result is the same correctly rounded fma either way. */
    if (!M->jit && __builtin_cpu_supports("fma")) argv[na++] = "-mfma";
#endif
    argv[na++] = "-Werror=implicit-function-declaration";
    argv[na++] = incflag;
    argv[na++] = "-x";
    argv[na++] = "c";
    src_at = na; argv[na++] = cu;
    argv[na++] = "-x";
    argv[na++] = "none";
    argv[na++] = "-o";
    out_at = na; argv[na++] = "OUT";
    argv[na++] = libflag;
    argv[na++] = rpath;
    argv[na++] = "-lnccrt";
    argv[na++] = "-lm";
  }
  argv[na] = NULL;

  Hash h = {14695981039346656037ULL};
  for (int i = 0; i < na; i++)
    if (i != src_at && i != out_at) hash_str(&h, argv[i]);
  hash_file(&h, cu);
  hash_file(&h, hdr);
  hash_headers(&h, incdir);
  char cdir[4096];
  int cached = cache_dir(cdir, sizeof cdir) == 0;
  snprintf(soname, sizeof soname, "%s-%016llx%s.so", M->name, (unsigned long long)h.h, M->jit ? "-jit" : M->gpu ? "-cuda" : "-emu");
  if (cached) snprintf(sofinal, sizeof sofinal, "%s/%s", cdir, soname);
  else snprintf(sofinal, sizeof sofinal, "%s/%s", M->tmpdir, soname);

  if (cached && access(sofinal, R_OK) == 0) {
    vlog(o, "compiled object found in the cache: %s", sofinal);
  } else {
    /* compile next to its final place, then rename: a concurrent run of the
     * same model never sees a half-written object */
    snprintf(sotmp, sizeof sotmp, "%s.tmp%ld", sofinal, (long)getpid());
    argv[out_at] = sotmp;
    if (o->verbose) {
      fprintf(stderr, "ncc %s: compiling:", g_cmd);
      for (int i = 0; i < na; i++) fprintf(stderr, " %s", argv[i]);
      fputc('\n', stderr);
    }
    double tc = ncc_now();
    int st = run_cmd((char *const *)argv, logp);
    if (st != 0) {
      unlink(sotmp);
      M->keep_tmp = 1;
      fprintf(stderr, "ncc %s: internal error: the generated code did not compile (%s exited with %d):\n",
              g_cmd, argv[0], st);
      print_log(logp, 40);
      return 2;
    }
    if (rename(sotmp, sofinal) != 0) {
      int e = errno;
      unlink(sotmp);
      return ierr("cannot move the compiled model to %s: %s", sofinal, strerror(e));
    }
    vlog(o, "compiled in %.2f s: %s", ncc_now() - tc, sofinal);
    if (cached) cache_prune(cdir);
  }
  free(libdir);
  free(incdir);

  M->so = dlopen(sofinal, RTLD_NOW | RTLD_LOCAL);
  if (!M->so) return ierr("cannot load the compiled model: %s", dlerror());
  char sym[400];
#define LOOKUP(field, suffix)                                                  \
  do {                                                                         \
    snprintf(sym, sizeof sym, "%s_" suffix, M->name);                          \
    *(void **)&M->field = dlsym(M->so, sym);                                   \
    if (!M->field) return ierr("the compiled model lacks %s (GENERATED.md)", sym); \
  } while (0)
  LOOKUP(info, "info");
  LOOKUP(create_on, "create_on");
  LOOKUP(load, "load");
  LOOKUP(infer_io, "infer_io");
  LOOKUP(error, "error");
  LOOKUP(destroy, "destroy");
#undef LOOKUP
  M->inf = M->info();
  if (!M->inf) return ierr("%s_info() returned NULL", M->name);
  vlog(o, "ready after %.2f s", ncc_now() - t0);
  return 0;
}

static int model_create(const Opts *o, Model *M) {
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
    fprintf(stderr, "ncc %s: error: cannot create the model on %s: %s\n", g_cmd, M->devdesc, msg);
    return rc == NCC_EUSER ? 1 : 2;
  }
  return 0;
}

/* ---- weights ---------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {            /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
static float rng_uniform(uint64_t *s, float lo, float hi) {
  double u = (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
  return (float)(lo + (hi - lo) * u);
}

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

/* fan_in of the weight that `name` (X.weight or X.bias) belongs to, or 0. */
static int64_t fan_in_of(const ncc_model_info *inf, const char *name) {
  char w[512];
  size_t l = strlen(name);
  const char *dot = strrchr(name, '.');
  size_t pl = dot ? (size_t)(dot - name) : l;
  snprintf(w, sizeof w, "%.*s.weight", (int)pl, name);
  for (int i = 0; i < inf->nparams; i++)
    if (!strcmp(inf->params[i].name, w) && inf->params[i].rank >= 2)
      return numel(inf->params[i].rank - 1, inf->params[i].shape + 1);
  return 0;
}

/* Initialises parameters as torch.nn does for the layers ncc knows:
 * conv/linear weight: kaiming_uniform_(a=sqrt(5)) = U(-1/sqrt(fan_in), +);
 * conv/linear bias: U(-1/sqrt(fan_in), +); batchnorm/layernorm weight 1,
 * bias 0, running_mean 0, running_var 1.  The distribution is PyTorch's; the
 * random stream is ncc's own (splitmix64 from --seed), so the values are not
 * torch.manual_seed's.  Writes them to a safetensors file and loads that
 * through the generated M_load, the same path as --weights. */
static int init_weights(const Opts *o, Model *M) {
  const ncc_model_info *inf = M->inf;
  if (inf->nparams == 0) return 0;
  uint64_t s = o->seed * 0x2545F4914F6CDD1DULL + 1;
  void **bufs = (void **)calloc((size_t)inf->nparams, sizeof *bufs);
  int rc = 0;
  for (int i = 0; i < inf->nparams && !rc; i++) {
    const ncc_tensor_info *t = &inf->params[i];
    int64_t n = numel(t->rank, t->shape);
    if (t->dtype != NCC_F32) { rc = ierr("parameter %s has dtype %s; only f32 parameters can be initialised", t->name, dt_name(t->dtype)); break; }
    float *p = (float *)malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    bufs[i] = p;
    float fill = 0.0f;
    int64_t fan = 0;
    if (ends_with(t->name, "running_var")) fill = 1.0f;
    else if (ends_with(t->name, "running_mean")) fill = 0.0f;
    else if (t->rank >= 2) fan = numel(t->rank - 1, t->shape + 1);   /* conv/linear weight */
    else if (ends_with(t->name, ".bias") || ends_with(t->name, "bias")) fan = fan_in_of(inf, t->name);
    else fill = 1.0f;                                                  /* norm weight */
    if (fan > 0) {
      float b = (float)(1.0 / sqrt((double)fan));
      for (int64_t k = 0; k < n; k++) p[k] = rng_uniform(&s, -b, b);
    } else {
      for (int64_t k = 0; k < n; k++) p[k] = fill;
    }
  }
  char path[600], err[1024] = "";
  snprintf(path, sizeof path, "%s/init.safetensors", M->tmpdir);
  if (!rc && ncc_save_safetensors(path, inf->params, inf->nparams, (const void *const *)bufs, err, sizeof err) != 0)
    rc = ierr("cannot write the initial weights: %s", err);
  for (int i = 0; i < inf->nparams; i++) free(bufs[i]);
  free(bufs);
  if (rc) return rc;
  if (M->load(M->m, path) != 0) {
    const char *msg = M->error(M->m);
    return ierr("loading the initial weights failed: %s", msg ? msg : "(no message)");
  }
  return 0;
}

static int load_weights(const Opts *o, Model *M) {
  if (!o->weights) return init_weights(o, M);
  if (access(o->weights, R_OK) != 0)
    return uerr("cannot read weights '%s': %s", o->weights, strerror(errno));
  if (M->load(M->m, o->weights) != 0) {
    const char *msg = M->error(M->m);
    return uerr("bad weights '%s': %s", o->weights, msg && *msg ? msg : "(no message)");
  }
  return 0;
}

/* ---- inputs and outputs --------------------------------------------------- */

/* A single unnamed --input/--output belongs to the model's only input/output. */
static int resolve_names(KV *kv, int n, const ncc_tensor_info *t, int nt, const char *flag, const char *what) {
  for (int i = 0; i < n; i++) {
    if (!kv[i].name) {
      if (nt != 1 || n != 1)
        return uerr("%s %s: name the %s (%s NAME=FILE); the model has %d %ss", flag, kv[i].path, what, flag, nt, what);
      kv[i].name = t[0].name;
    }
    int found = 0;
    for (int j = 0; j < nt; j++) found |= !strcmp(kv[i].name, t[j].name);
    if (!found) {
      char list[1024] = "";
      size_t k = 0;
      for (int j = 0; j < nt && k < sizeof list; j++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", j ? ", " : "", t[j].name);
      return uerr("%s %s=%s: the model has no %s '%s' (it has: %s)", flag, kv[i].name, kv[i].path,
                  what, kv[i].name, nt ? list : "none");
    }
    for (int j = 0; j < i; j++)
      if (!strcmp(kv[i].name, kv[j].name)) return uerr("%s %s given twice", flag, kv[i].name);
  }
  return 0;
}

static int read_inputs(const Opts *o, Model *M, void **data) {
  const ncc_model_info *inf = M->inf;
  for (int i = 0; i < inf->ninputs; i++) {
    const ncc_tensor_info *t = &inf->inputs[i];
    char want[256], got[256], err[1024] = "";
    tensor_str(want, sizeof want, t->dtype, t->rank, t->shape);
    const KV *kv = NULL;
    for (int j = 0; j < o->nin; j++)
      if (!strcmp(o->in[j].name, t->name)) kv = &o->in[j];
    if (!kv) {
      int live = 0;
      for (int j = 0; j < M->nlive; j++) live |= !strcmp(M->live_inputs[j], t->name);
      for (int j = 0; j < inf->noutputs; j++) live |= !strcmp(inf->outputs[j].name, t->name);
      if (!live) {          /* not read by inference: zeros will do */
        int64_t n = numel(t->rank, t->shape);
        data[i] = calloc((size_t)(n > 0 ? n : 1), (size_t)(dt_size(t->dtype) ? dt_size(t->dtype) : 1));
        vlog(o, "input %s (%s) is not read by inference; passing zeros", t->name, want);
        continue;
      }
      return uerr("missing --input %s=FILE.npy (the model's input %s is %s)", t->name, t->name, want);
    }
    int dt, rank;
    int64_t shape[8];
    if (ncc_npy_read(kv->path, &dt, &rank, shape, &data[i], err, sizeof err) != 0)
    {
      if (err[0] && strstr(err, kv->path)) return uerr("input %s: %s", t->name, err);
      return uerr("input %s: %s: %s", t->name, kv->path, err[0] ? err : "cannot read");
    }
    tensor_str(got, sizeof got, dt, rank, shape);
    int same = dt == t->dtype && rank == t->rank;
    for (int k = 0; same && k < rank; k++) same = shape[k] == t->shape[k];
    if (!same)
      return uerr("input %s: %s holds %s, but the model expects %s%s", t->name, kv->path, got, want,
                  dt != t->dtype ? " (wrong dtype)" : " (wrong shape; --set may change the model's shapes)");
  }
  return 0;
}

static void fill_random_inputs(const Opts *o, Model *M, void **data) {
  uint64_t s = o->seed + 12345;
  for (int i = 0; i < M->inf->ninputs; i++) {
    const ncc_tensor_info *t = &M->inf->inputs[i];
    int64_t n = numel(t->rank, t->shape);
    data[i] = calloc((size_t)(n > 0 ? n : 1), (size_t)dt_size(t->dtype));
    if (t->dtype == NCC_F32)
      for (int64_t k = 0; k < n; k++) ((float *)data[i])[k] = rng_uniform(&s, -1.0f, 1.0f);
    /* integer inputs (labels) stay 0, a valid class index */
  }
}

static void **alloc_outputs(const Model *M) {
  void **out = (void **)calloc((size_t)M->inf->noutputs + 1, sizeof *out);
  for (int i = 0; i < M->inf->noutputs; i++) {
    const ncc_tensor_info *t = &M->inf->outputs[i];
    int64_t n = numel(t->rank, t->shape);
    out[i] = calloc((size_t)(n > 0 ? n : 1), (size_t)dt_size(t->dtype));
  }
  return out;
}

static int infer(Model *M, void **in, void **out) {
  int rc = M->infer_io(M->m, (const void *const *)in, (void *const *)out);
  if (rc != 0) {
    /* NCC_EUSER: something the user can change (e.g. out of device memory);
     * anything else is a failure of the generated code or the runtime */
    const char *msg = M->error(M->m);
    fprintf(stderr, "ncc %s: %s: inference failed on %s: %s\n", g_cmd, rc == NCC_EUSER ? "error" : "internal error",
            M->devdesc, msg && *msg ? msg : "(no message)");
    return rc == NCC_EUSER ? 1 : 2;
  }
  return 0;
}

/* All outputs go to temporary names first and are renamed only when every
 * one of them is written, so a failure leaves no output file at all. */
static int write_outputs(const Opts *o, Model *M, void **out) {
  const ncc_model_info *inf = M->inf;
  char tmp[MAX_IO][4200];
  int nt = 0, rc = 0;
  for (int i = 0; i < o->nout && !rc; i++) {
    int j = 0;
    while (strcmp(inf->outputs[j].name, o->out[i].name)) j++;
    const ncc_tensor_info *t = &inf->outputs[j];
    char err[1024] = "";
    snprintf(tmp[nt], sizeof tmp[nt], "%s.ncc-tmp-%ld", o->out[i].path, (long)getpid());
    if (ncc_npy_write(tmp[nt], t->dtype, t->rank, t->shape, out[j], err, sizeof err) != 0) {
      unlink(tmp[nt]);
      rc = uerr("cannot write output %s to %s: %s", t->name, o->out[i].path, err[0] ? err : strerror(errno));
    } else {
      nt++;
    }
  }
  for (int i = 0; i < nt; i++) {
    if (!rc && rename(tmp[i], o->out[i].path) != 0)
      rc = uerr("cannot write output %s: %s", o->out[i].path, strerror(errno));
    if (rc) unlink(tmp[i]);
  }
  return rc;
}

static void print_summary(const Model *M, void **out) {
  for (int i = 0; i < M->inf->noutputs; i++) {
    const ncc_tensor_info *t = &M->inf->outputs[i];
    char s[256];
    tensor_str(s, sizeof s, t->dtype, t->rank, t->shape);
    printf("output %s: %s", t->name, s);
    if (t->dtype == NCC_F32) {
      int64_t n = numel(t->rank, t->shape);
      const float *p = (const float *)out[i];
      double sum = 0, mx = -INFINITY, mn = INFINITY;
      for (int64_t k = 0; k < n; k++) { sum += p[k]; if (p[k] > mx) mx = p[k]; if (p[k] < mn) mn = p[k]; }
      printf("  min %.6g  max %.6g  mean %.6g", mn, mx, n ? sum / (double)n : 0.0);
    }
    printf("\n");
  }
}

static void free_all(void **p, int n) {
  if (!p) return;
  for (int i = 0; i < n; i++) free(p[i]);
  free(p);
}

/* ---- entry points --------------------------------------------------------- */

static int run_opts(Opts *po) {
  Opts o = *po;
  int rc = 0;
  /* fail on an unwritable output directory before minutes of compiling */
  for (int i = 0; i < o.nout; i++) {
    char *d = dir_of(o.out[i].path);
    if (access(d, W_OK) != 0) {
      int e = errno;
      rc = uerr("cannot write output %s: directory %s: %s", o.out[i].path, d, strerror(e));
    }
    free(d);
    if (rc) return rc;
  }
  for (int i = 0; i < o.nin; i++)
    if (access(o.in[i].path, R_OK) != 0)
      return uerr("cannot read input %s: %s", o.in[i].path, strerror(errno));

  Model M;
  rc = model_build(&o, &M);
  void **in = NULL, **out = NULL;
  int nin = M.inf ? M.inf->ninputs : 0;
  if (!rc) rc = resolve_names(o.in, o.nin, M.inf->inputs, M.inf->ninputs, "--input", "input");
  if (!rc) rc = resolve_names(o.out, o.nout, M.inf->outputs, M.inf->noutputs, "--output", "output");
  if (!rc) {
    in = (void **)calloc((size_t)nin + 1, sizeof *in);
    rc = read_inputs(&o, &M, in);
  }
  if (!rc) rc = model_create(&o, &M);
  if (!rc) rc = load_weights(&o, &M);
  if (!rc) {
    out = alloc_outputs(&M);
    printf("device: %s\n", M.devdesc);
    fflush(stdout);
    double t = ncc_now();
    rc = infer(&M, in, out);
    if (!rc) vlog(&o, "inference: %.2f ms", (ncc_now() - t) * 1e3);
  }
  if (!rc) rc = write_outputs(&o, &M, out);
  if (!rc && o.nout == 0) print_summary(&M, out);
  free_all(in, nin);
  free_all(out, M.inf ? M.inf->noutputs : 0);
  model_close(&M);
  return rc;
}

int run_main(int argc, char **argv) {
  Opts o;
  g_cmd = "run";
  int rc = parse_args(argc, argv, &o, 0);
  if (!rc) rc = run_opts(&o);
  opts_free(&o);
  return rc;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Builds, loads and times one configuration; *median gets seconds per batch. */
static int bench_one(const Opts *o, double *median) {
  Model M;
  int rc = model_build(o, &M);
  void **in = NULL, **out = NULL;
  if (!rc) rc = model_create(o, &M);
  if (!rc) rc = load_weights(o, &M);
  if (!rc) {
    in = (void **)calloc((size_t)M.inf->ninputs + 1, sizeof *in);
    fill_random_inputs(o, &M, in);
    out = alloc_outputs(&M);
    int64_t batch = M.inf->ninputs > 0 && M.inf->inputs[0].rank > 0 ? M.inf->inputs[0].shape[0] : 1;
    printf("model %s -O%d%s, batch %lld, device: %s\n", M.name, o->opt, o->cublas ? " --cublas" : "",
           (long long)batch, M.devdesc);
    fflush(stdout);
    /* like PuzzleLib's timeKernel: warm-up runs (first-touch page faults,
     * fiber pools, caches) are not timed; then median and min of K runs */
    for (int i = 0; i < o->warmup && !rc; i++) rc = infer(&M, in, out);
    double *t = (double *)calloc((size_t)o->iters, sizeof *t);
    for (int i = 0; i < o->iters && !rc; i++) {
      double t0 = ncc_now();
      rc = infer(&M, in, out);
      t[i] = ncc_now() - t0;
    }
    if (!rc) {
      qsort(t, (size_t)o->iters, sizeof *t, cmp_double);
      double med = o->iters % 2 ? t[o->iters / 2] : 0.5 * (t[o->iters / 2 - 1] + t[o->iters / 2]);
      printf("ms/batch: median %.3f  min %.3f  (%d timed runs, %d warm-up)\n", med * 1e3, t[0] * 1e3,
             o->iters, o->warmup);
      printf("samples/s: %.1f\n", med > 0 ? (double)batch / med : 0.0);
      fflush(stdout);
      *median = med;
    }
    free(t);
  }
  free_all(in, M.inf ? M.inf->ninputs : 0);
  free_all(out, M.inf ? M.inf->noutputs : 0);
  model_close(&M);
  return rc;
}

static int bench_opts(const Opts *po) {
  Opts o = *po;
  int rc;
  double before = 0, after = 0;
  if (o.compare && o.opt > 0) {
    /* before passes: the same model at -O0 */
    Opts o0 = o;
    o0.opt = 0;
    o0.passes = NULL;
    if ((rc = bench_one(&o0, &before)) != 0) return rc;
  }
  if ((rc = bench_one(&o, &after)) != 0) return rc;
  if (o.compare && o.opt > 0 && after > 0)
    printf("passes: -O%d is %.2fx the speed of -O0\n", o.opt, before / after);
  return 0;
}

int bench_main(int argc, char **argv) {
  Opts o;
  g_cmd = "bench";
  int rc = parse_args(argc, argv, &o, 1);
  if (!rc) rc = bench_opts(&o);
  opts_free(&o);
  return rc;
}
