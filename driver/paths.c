/* paths.c — where the driver's outside things are: the runtime's headers
 * and library, nvcc, the compile cache.  Nothing here is compiled in.
 *
 * The runtime: the headers generated code includes (ncc_rt.h, ncc_kernel.h,
 * ...) sit in include/ncc inside the build folder (the build copies them
 * there: build/ncc, build/include/ncc) and in PREFIX/include/ncc beside an
 * installed PREFIX/bin/ncc, so one rule, relative to the executable's real
 * path, finds both.  NCC_RUNTIME_DIR overrides it (a folder holding ncc_rt.h,
 * or a prefix holding include/ncc/ncc_rt.h).  The library is the libnccrt
 * this process loaded (dladdr), wherever the dynamic linker found it: a model
 * must link that very copy, or it would have emulator state of its own.
 *
 * nvcc: NCC_NVCC, else CUDA_HOME/bin/nvcc (CUDA_HOME defaults to
 * /usr/local/cuda), else the PATH.
 *
 * The compile cache: NCC_CACHE_DIR, else XDG_CACHE_HOME/ncc, else
 * HOME/.cache/ncc (the XDG base directory rule). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver.h"

static int file_in(const char *dir, const char *name) {
  char p[8192];
  struct stat st;
  if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p) return 0;
  return stat(p, &st) == 0;
}

char *path_dir(const char *path) {
  char *d = strdup(path);
  char *s = strrchr(d, '/');
  if (s == d) s[1] = '\0';
  else if (s) *s = '\0';
  else strcpy(d, ".");
  return d;
}

/* The folder of this executable, symlinks resolved. */
static char *exe_dir(void) {
  char p[PATH_MAX + 1];
  ssize_t n = readlink("/proc/self/exe", p, PATH_MAX);
  if (n <= 0) return NULL;
  p[n] = '\0';
  return path_dir(p);
}

/* First of `dir/sub` holding ncc_rt.h, as a canonical path. */
static char *headers_at(const char *dir, const char *sub) {
  char p[8192];
  if (!dir) return NULL;
  snprintf(p, sizeof p, "%s%s%s", dir, *sub ? "/" : "", sub);
  if (!file_in(p, "ncc_rt.h")) return NULL;
  return realpath(p, NULL);
}

char *runtime_include_dir(void) {
  const char *env = getenv("NCC_RUNTIME_DIR");
  if (env && *env) {
    char *r = headers_at(env, "");
    if (!r) r = headers_at(env, "include/ncc");
    return r;     /* an override that does not hold them is not second-guessed */
  }
  char *r = NULL, *e = exe_dir();
  if (!r) r = headers_at(e, "include/ncc");        /* build folder */
  if (!r) r = headers_at(e, "../include/ncc");     /* PREFIX/bin -> PREFIX/include/ncc */
  free(e);
  char *lib = r ? NULL : runtime_lib_dir();
  if (!r) r = headers_at(lib, "../include/ncc");   /* PREFIX/lib(64) -> PREFIX/include/ncc */
  free(lib);
  return r;
}

char *runtime_lib_dir(void) {
  Dl_info di;
  char *e = exe_dir();
  if (dladdr((void *)ncc_now, &di) && di.dli_fname && strchr(di.dli_fname, '/')) {
    char *rp = realpath(di.dli_fname, NULL), *d = rp ? path_dir(rp) : NULL;
    /* the executable itself answers when the address is a PLT stub in it */
    int self = rp && strstr(rp, "libnccrt") == NULL;
    free(rp);
    if (d && !self) { free(e); return d; }
    free(d);
  }
  /* not found through the loader: beside ncc (build folder), PREFIX/lib(64) */
  static const char *const subs[] = {"", "/../lib", "/../lib64"};
  for (size_t i = 0; e && i < sizeof subs / sizeof subs[0]; i++) {
    char p[8192];
    snprintf(p, sizeof p, "%s%s", e, subs[i]);
    if (file_in(p, "libnccrt.so")) { free(e); return realpath(p, NULL); }
  }
  free(e);
  return NULL;
}

const char *find_nvcc(void) {
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

int cache_dir_path(char *out, size_t n) {
  const char *x = getenv("NCC_CACHE_DIR");
  if (x && *x) snprintf(out, n, "%s", x);
  else if ((x = getenv("XDG_CACHE_HOME")) && *x) snprintf(out, n, "%s/ncc", x);
  else if ((x = getenv("HOME")) && *x) snprintf(out, n, "%s/.cache/ncc", x);
  else return -1;
  return 0;
}

int drv_model_is_onnx(const char *path) {
  char b[1] = {0};
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(b, 1, 1, f) : 0;
  if (f) fclose(f);
  return frontend_is_onnx(path, b, n);
}
