/* check.h — the one assertion macro of the runtime tests: counts failures
 * and prints file:line with a message, so that a test reports every broken
 * check in one run instead of stopping at the first. main() returns
 * `failures != 0`. */
#ifndef NCC_TEST_CHECK_H
#define NCC_TEST_CHECK_H
#include <stdio.h>

static int failures;
#define CHECK(c, ...)                                      \
  do {                                                     \
    if (!(c)) {                                            \
      failures++;                                          \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
    }                                                      \
  } while (0)

#include <stdlib.h>
#include <string.h>

/* The kernels section of a .cu file, as a --jit build embeds it: reads the
 * whole file into *buf (free it) and returns the section, NUL-terminated at
 * its end marker; NULL with a message when the file or a marker is missing. */
static inline char *read_kernels_section(const char *path, char **buf) {
  FILE *f = fopen(path, "rb");
  char *a = NULL, *b = NULL;
  long n;
  *buf = NULL;
  if (!f) { fprintf(stderr, "cannot open %s\n", path); return NULL; }
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (*buf = (char *)calloc(1, (size_t)n + 1)) && fread(*buf, 1, (size_t)n, f) == (size_t)n) {
    a = strstr(*buf, "/* ---- kernels ---- */");
    b = strstr(*buf, "/* ---- end of kernels ---- */");
  }
  fclose(f);
  if (!a || !b) { fprintf(stderr, "no kernels section in %s\n", path); return NULL; }
  *b = 0;
  return a;
}
#endif
