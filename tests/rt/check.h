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
#endif
