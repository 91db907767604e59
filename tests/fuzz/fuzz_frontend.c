/* fuzz_frontend.c — libFuzzer target for the whole frontend: any bytes go
 * through lexer, parser and elaboration; a graph that comes out must pass the
 * IR verifier and print.  Crashes, sanitizer findings, leaks and a graph that
 * does not verify are findings.
 *
 * diag keeps a pointer to every registered source (for showing lines), so the
 * input is copied into one static buffer that outlives every diagnostic,
 * instead of pointing diag at libFuzzer's buffer, which is freed after the
 * call.  At most a few errors are printed per input to keep the run fast. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

#define MAX_INPUT (1 << 16)
/* abort, not exit: libFuzzer then shows the stack of the finding */
#define FINDING(msg) do { fprintf(stderr, "fuzz_frontend: %s\n", msg); abort(); } while (0)
static char text[MAX_INPUT];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull;
  if (!devnull) {
    devnull = fopen("/dev/null", "w");
    diag_set_limit(2);
  }
  if (size > MAX_INPUT) return 0;
  memcpy(text, data, size);
  diag_reset();
  Graph *g = frontend_load_text("fuzz.net", text, size, NULL, 0);
  if (g) {
    if (diag_errors() != 0) FINDING("a graph came back although errors were reported");
    if (ir_verify(g) != 0) FINDING("the frontend built a graph that does not verify");
    ir_print(g, devnull);
    ir_print_dot(g, devnull);
    ir_graph_free(g);
  } else if (diag_errors() == 0) {
    FINDING("no graph and no error reported");
  }
  return 0;
}
