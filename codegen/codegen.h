/* codegen.h — from a (passed) graph to CUDA C.
 *
 * One kernel per kernel group: the fuse pass's groups (Node.grole), or one
 * node per group without it; buffers where the plan pass put them
 * (Value.offset), or each in its own range without it.  The emitted .cu
 * holds, in order:
 *   1. the kernels, in the C-compatible CUDA subset (docs/emulator.md), after
 *      `#include "ncc_kernel.h"`;
 *   2. the host code: descriptors, the model struct, the generated API
 *      (MODEL.h), launching every kernel through ncc_launch(... void **args).
 * With `jit`, the kernels section is embedded as a string in host C instead,
 * compiled at load time by NVRTC. */
#ifndef NCC_CODEGEN_H
#define NCC_CODEGEN_H
#include <stdio.h>
#include "../ir/ir.h"

typedef struct CodegenOpts {
  int jit;              /* --jit: host C with embedded kernel source */
  int use_cublas;       /* conv/linear/matmul through ncc_gemm (cuBLAS / CPU BLAS) instead of the tiled kernel */
  const char *header;   /* name of MODEL.h as #included by MODEL.cu */
  const char *command;  /* the command line, for the banner of MODEL.cu; may be NULL */
  Graph *train;         /* the training step (the same model after the autodiff pipeline),
                           emitted beside inference into the same file; NULL: inference only */
  /* --freeze: a safetensors file's bytes that MODEL.cu carries; create loads
   * them (M_load may still replace them).  frozen_name names them in messages. */
  const unsigned char *frozen;
  size_t frozen_len;
  const char *frozen_name;
} CodegenOpts;

/* Writes MODEL.cu (or .c with jit) to `src` and MODEL.h to `hdr`. Returns 0,
 * or -1 after a diag error (an op the emitter cannot handle yet). */
int codegen_emit(Graph *g, const CodegenOpts *o, FILE *src, FILE *hdr);
/* Writes only the kernels section (what NVRTC compiles), for --emit=ptx. */
int codegen_emit_kernels(Graph *g, const CodegenOpts *o, FILE *f);

/* --emit=report: one row per layer/kernel and the final `total:` line. */
void report_print(Graph *g, FILE *f, int train, const char *arch);
#endif
