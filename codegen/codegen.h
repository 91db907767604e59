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
  /* --max-memory's choices (driver/budget.c): */
  size_t ws_limit;      /* bytes of im2col columns per chunk of images on the cuBLAS path; 0: 64 MiB */
  int64_t api_batch;    /* > the graph's batch S (Graph.max_batch): the API takes up to api_batch rows
                           and runs them through the graph in slices of S; 0: the graph's batch */
} CodegenOpts;

/* What the generated object allocates (M_info()->arena_bytes and its parts). */
typedef struct CodegenMemory {
  size_t arena;         /* everything: the sum of the parts below, with alignment */
  size_t activations;   /* inputs and activations (the plan's region; the training step's too) */
  size_t workspace;     /* the cuBLAS path's im2col columns */
  size_t weights;       /* parameters, constants, load-time values, gradients, optimizer state */
} CodegenMemory;
/* Lays the model out as codegen_emit would, writing nothing. Returns 0, or
 * -1 after a diag error. */
int codegen_memory(Graph *g, const CodegenOpts *o, CodegenMemory *m);

/* Writes MODEL.cu (or .c with jit) to `src` and MODEL.h to `hdr`. Returns 0,
 * or -1 after a diag error (an op the emitter cannot handle yet). */
int codegen_emit(Graph *g, const CodegenOpts *o, FILE *src, FILE *hdr);
/* Writes only the kernels section (what NVRTC compiles), for --emit=ptx. */
int codegen_emit_kernels(Graph *g, const CodegenOpts *o, FILE *f);

/* --emit=report: one row per layer/kernel and the final `total:` line. */
void report_print(Graph *g, FILE *f, int train, const char *arch);
/* The same with one more summary line, `# NOTE`, before `total:` (--max-memory's choice), and
 * the options code is generated with (NULL: the defaults): the launch geometry the report models
 * is theirs (--cublas, the workspace chunks), and co->api_batch > g's batch when the API runs
 * that many rows in slices of g's batch. */
void report_print_note(Graph *g, FILE *f, int train, const char *arch, const char *note, const CodegenOpts *co);
/* The report's modeled time of each kernel a step launches (not the load-time ones), by name in
 * the order first launched, summed over its launches (a kernel several layers share): a group's
 * row split between its kernels (a split-K GEMM's sum and an fp16 update's unscale kernel get
 * their own rooflines and launch, the main kernel the rest); groups with no launch of their own
 * (cuBLAS's GEMMs) are left out.  g: the inference graph, gt: the training step's (NULL: the
 * inference is modeled), the kernels named as in the file codegen_emit writes for them.  For
 * `ncc bench --profile`.  Returns 0, or -1 when it cannot run (the list is empty). */
typedef struct ReportKernel { char *name; double us; } ReportKernel;
typedef struct ReportKernelList { ReportKernel *k; int n, cap; } ReportKernelList;
int report_kernel_times(Graph *g, Graph *gt, const char *arch, const CodegenOpts *co, ReportKernelList *out);
void report_kernel_times_free(ReportKernelList *l);
/* The report's occupancy model (docs/gpu.md, "The report's time model"): resident
 * blocks per SM of a kernel on arch with these threads a block, registers a thread
 * and shared bytes a block; *limit (may be NULL) gets the binding limit: 't'
 * threads, 'b' blocks, 'r' registers, 's' shared memory.  0: the block does not fit. */
int report_blocks_per_sm(const char *arch, int threads, int regs, size_t smem_static, size_t smem_dyn, char *limit);
#endif
