/* fuzz_onnx.c — libFuzzer target for the ONNX importer (frontend/onnx.c):
 * any bytes go to frontend_load_onnx as an in-memory ModelProto.  A graph
 * that comes out must verify and print, and its weights must be readable;
 * crashes, sanitizer findings, leaks, hangs and a graph that does not verify
 * are findings.  Built only when ncc has ONNX support (tests/onnx.cmake).
 *
 * The bytes are copied into a static buffer, as fuzz_frontend does, so that
 * nothing can point into libFuzzer's buffer after the call.  A symbolic
 * dimension named
 * "batch" or "N" gets a size through --set, so models exported with
 * dynamic_axes get past their inputs; an unused --set is an error, so the
 * two are tried one at a time after the load with none. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

#define MAX_INPUT (1 << 20)
#define FINDING(msg) do { fprintf(stderr, "fuzz_onnx: %s\n", msg); abort(); } while (0)
static char bytes[MAX_INPUT];

static void load(size_t size, const SetOpt *sets, int nsets, FILE *devnull) {
  diag_reset();
  Graph *g = frontend_load_onnx("fuzz.onnx", bytes, size, sets, nsets);
  if (g) {
    if (diag_errors() != 0) FINDING("a graph came back although errors were reported");
    if (ir_verify(g) != 0) FINDING("the importer built a graph that does not verify");
    ir_print(g, devnull);
    const FrontendWeight *w;
    int n = frontend_weights("fuzz.onnx", &w);
    double sum = 0;
    for (int k = 0; k < n; k++) {
      int64_t e = 1;
      for (int j = 0; j < w[k].rank; j++) e *= w[k].shape[j];
      for (int64_t j = 0; j < e; j++) sum += w[k].data[j];   /* ASan: each weight holds its elements */
    }
    fprintf(devnull, "%g\n", sum);
    ir_graph_free(g);
  } else if (diag_errors() == 0) {
    FINDING("no graph and no error reported");
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull;
  if (!devnull) {
    devnull = fopen("/dev/null", "w");
    diag_set_limit(2);
  }
  if (size > MAX_INPUT) return 0;
  memcpy(bytes, data, size);
  load(size, NULL, 0, devnull);
  static const SetOpt sets[2] = {{"batch", "2"}, {"N", "3"}};
  for (int k = 0; k < 2; k++) load(size, &sets[k], 1, devnull);
  return 0;
}
