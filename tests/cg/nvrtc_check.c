/* nvrtc_check.c — compiles the kernels section of generated MODEL.cu files
 * with NVRTC, as `--jit` does at load time, so that a kernel NVRTC rejects
 * (or warns about) fails the build and not a user's first run.
 *
 *   nvrtc_check [--syntax-only] RUNTIME_INCLUDE_DIR ARCH FILE.cu...     (ARCH: compute_80, compute_90)
 *
 * --syntax-only stops NVRTC after its front end (--fdevice-syntax-only): the
 * source is parsed and checked for ARCH, its diagnostics are given, and no PTX
 * is made: 0.4 s, not 6, for ResNet-18.  compile_model.sh checks a model so
 * for both archs (nvcc builds both in full), and an op case to PTX too.
 *
 * The section is the text between the "kernels" and "end of kernels" markers;
 * ncc_kernel.h is put in front of it, as the jit backend's prelude does.  Warnings count as failures (-w is not passed, and
 * a non-empty log with "warning" fails), like nvcc --Werror all-warnings. */
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(s);
    return NULL;
  }
  s[n] = 0;
  fclose(f);
  return s;
}

int main(int argc, char **argv) {
  int syntax_only = argc > 1 && strcmp(argv[1], "--syntax-only") == 0;
  if (syntax_only) {
    argv++;
    argc--;
  }
  if (argc < 4) {
    fprintf(stderr, "usage: nvrtc_check [--syntax-only] RUNTIME_INCLUDE_DIR compute_XX FILE.cu...\n");
    return 2;
  }
  char inc[1024], arch[64];
  snprintf(inc, sizeof inc, "-I%s", argv[1]);
  snprintf(arch, sizeof arch, "--gpu-architecture=%s", argv[2]);
  const char *opts[] = {arch, inc, "-I/usr/local/cuda/include", "--std=c++17", "--fdevice-syntax-only"};
  int nopts = (int)(sizeof opts / sizeof opts[0]) - (syntax_only ? 0 : 1);
  int fail = 0;
  for (int i = 3; i < argc; i++) {
    char *src = slurp(argv[i]);
    if (!src) {
      fprintf(stderr, "%s: cannot read\n", argv[i]);
      fail = 1;
      continue;
    }
    char *end = strstr(src, "/* ---- end of kernels ---- */");
    if (!end) {
      fprintf(stderr, "%s: no kernels section\n", argv[i]);
      fail = 1;
      free(src);
      continue;
    }
    end[0] = 0;
    /* the section alone, with ncc_kernel.h in front, as the jit backend gives it to NVRTC */
    char *begin = strstr(src, "/* ---- kernels");
    if (!begin) {
      fprintf(stderr, "%s: no kernels section\n", argv[i]);
      fail = 1;
      free(src);
      continue;
    }
    size_t blen = strlen(begin) + 64;
    char *sec = malloc(blen);
    snprintf(sec, blen, "#include \"ncc_kernel.h\"\n%s", begin);
    free(src);
    src = sec;
    nvrtcProgram prog;
    nvrtcResult r = nvrtcCreateProgram(&prog, src, argv[i], 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
      fprintf(stderr, "%s: nvrtcCreateProgram: %s\n", argv[i], nvrtcGetErrorString(r));
      return 2;
    }
    r = nvrtcCompileProgram(prog, nopts, opts);
    size_t ln = 0;
    nvrtcGetProgramLogSize(prog, &ln);
    char *log = malloc(ln + 1);
    nvrtcGetProgramLog(prog, log);
    log[ln] = 0;
    size_t ptxn = 0;
    if (r == NVRTC_SUCCESS && !syntax_only) nvrtcGetPTXSize(prog, &ptxn);
    if (r != NVRTC_SUCCESS || strstr(log, "warning")) {
      fprintf(stderr, "%s: NVRTC %s: %s\n%s\n", argv[i], argv[2], r == NVRTC_SUCCESS ? "warnings" : "failed",
              log);
      fail = 1;
    } else {
      if (syntax_only)
        printf("%s: NVRTC %s ok (front end only)\n", argv[i], argv[2]);
      else
        printf("%s: NVRTC %s ok, %zu bytes of PTX\n", argv[i], argv[2], ptxn);
    }
    free(log);
    nvrtcDestroyProgram(&prog);
    free(src);
  }
  return fail;
}
