/* test_nvrtc.c KERNELS.cu — NVRTC through libnccrt (ncc_nvrtc_ptx, used by
 * --emit=ptx and by the jit backend): the kernels section of a .cu file,
 * compiled with the runtime's NVRTC prelude instead of ncc_kernel.h, must give
 * PTX with every kernel as an unmangled entry; a broken source must come back
 * as NCC_EUSER with NVRTC's log, its line numbers those of the section.
 * Exits 77 (ctest: skipped) when NVRTC cannot be loaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ncc_rt.h"

#include "check.h"

int main(int argc, char **argv) {
  char *src, *a, *ptx = NULL, err[8192];
  int rc, i;
  const char *opts[] = {"--gpu-architecture=compute_90", "-default-device"};
  static const char *kernels[] = {"k_bias_relu", "k_relu_scale_f16", "k_sgemm16", "k_block_sum", "k_atomics",
                                  "k_softmax", "k_coords"};
  if (argc < 2) { fprintf(stderr, "usage: test_nvrtc KERNELS.cu\n"); return 2; }
  if (!(a = read_kernels_section(argv[1], &src))) return 2;
  rc = ncc_nvrtc_ptx(a, "kernels.cu", opts, 1, &ptx, err, sizeof err);
  if (rc && strstr(err, "cannot load NVRTC")) {
    printf("skipped: %s\n", err);
    return 77;   /* ctest's SKIP_RETURN_CODE: not run is not passed */
  }
  CHECK(rc == 0, "NVRTC: %s", err);
  for (i = 0; rc == 0 && i < (int)(sizeof kernels / sizeof kernels[0]); i++) {
    char entry[128];
    snprintf(entry, sizeof entry, ".entry %s(", kernels[i]);
    CHECK(strstr(ptx, entry) != NULL, "PTX lacks %s", entry);
  }
  if (ptx) printf("PTX: %zu bytes, %s\n", strlen(ptx), strstr(ptx, ".target sm_90") ? "sm_90" : "?");
  free(ptx);
  ptx = NULL;
  rc = ncc_nvrtc_ptx("NCC_KERNEL void k(float *y) {\n  y[0] = undeclared_thing;\n}\n", "bad.cu", opts, 1, &ptx, err,
                     sizeof err);
  CHECK(rc == NCC_EUSER && strstr(err, "bad.cu(2)") && strstr(err, "undeclared_thing"), "bad source: %s", err);
  printf("bad source: %.200s\n", err);
  free(src);
  printf("%s: %d failures\n", failures ? "FAILED" : "ok", failures);
  return failures ? 1 : 0;
}
