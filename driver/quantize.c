/* quantize.c — `ncc quantize W.safetensors -o WQ.safetensors`: weights-only
 * int8 quantization of a weight file (runtime/safetensors.c does the work,
 * ncc_quantize_safetensors; the loaders dequantize what it writes). */
#include <stdio.h>

#include "driver.h"
#include "ncc_rt.h"

int quantize_main(const Options *o) {
  char err[2048];
  int nq = 0;
  int64_t bi = 0, bo = 0;
  if (ncc_quantize_safetensors(o->model, o->out, &nq, &bi, &bo, err, sizeof err) != 0) return drv_error("%s", err);
  printf("%s: %d tensor%s as int8 with per-channel scales: %.2f MB -> %.2f MB (%.3fx) in %s\n", o->model, nq,
         nq == 1 ? "" : "s", (double)bi / 1e6, (double)bo / 1e6, bi > 0 ? (double)bo / (double)bi : 0.0, o->out);
  return 0;
}
