/* cg.h — codegen's internal interface: text buffers, the CUDA dialect strings,
 * kernel groups, buffer assignment and the emitter context shared by the
 * emitters (elemwise.c, kernels.c, gemm.c), the host-code writer (host.c) and
 * the driver (codegen.c).
 *
 * The flow: group.c reads the kernel groups the fuse pass wrote on the IR
 * (one node per group without it), in launch order; codegen.c gives every
 * stored value a buffer where the plan pass placed it (or an alias of one)
 * and asks the emitter of each group's main op for its kernels and the host
 * statements that launch them.  Emitters register
 * kernel text with cg_kernel(), which dedupes identical kernels, and append
 * host statements to the context's `run` buffer; they never write files. */
#ifndef NCC_CG_H
#define NCC_CG_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen.h"

/* ---- growable text ---------------------------------------------------- */
typedef struct Buf {
  char *s;
  size_t len, cap;
} Buf;
void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_puts(Buf *b, const char *s);
void buf_free(Buf *b);
/* A float literal that both C and CUDA read back as the same float ("2.0f", "1e-05f"). */
const char *cg_flit(char out[40], double v);
/* "ncc_tf32", "ncc_fp16" or "ncc_bf16": what rounds an operand of n (Node.prec); NULL at fp32 */
const char *cg_operand_round(const Node *n);
/* An operand element v as the GEMM multiplies it: rounded (tf32/fp16/bf16), or at int8
 * quantized with the parameter inv (1 / its scale; NULL: a weight's integers, as they are) */
const char *cg_operand_rv(char *buf, size_t n, const Node *nd, const char *v, const char *inv);

/* ---- the CUDA dialect, in one place (tinygrad's habit) -----------------
 * Everything the kernels spell that is not plain C comes from here, so a
 * different target (HIP, OpenCL) or the emulation is one table away. */
#define D_KERNEL "NCC_KERNEL void"
#define D_HELPER "static __device__ __forceinline__"
#define D_SHARED "__shared__"
#define D_BARRIER "__syncthreads();"
#define D_RESTRICT "__restrict__"
#define D_TID_X "(int)threadIdx.x"
#define D_TID_Y "(int)threadIdx.y"
#define D_BID_X "(int)blockIdx.x"
#define D_BID_Y "(int)blockIdx.y"
#define D_BID_Z "(int)blockIdx.z"
#define D_NEG_INF "-INFINITY"   /* ncc_kernel.h spells INFINITY for NVRTC; math.h for C and nvcc */
#define D_KERNELS_BEGIN "/* ---- kernels (this section alone is what NVRTC compiles for --jit) ---- */"
#define D_KERNELS_END "/* ---- end of kernels ---- */"
/* Between the inference kernels and the load-time ones (tests look for it:
 * no inference kernel may compute a batchnorm once the fold pass ran). */
#define D_LOAD_TIME_BEGIN "/* ---- load-time kernels: run once by the generated *_prepare() after create and after every load ---- */"

/* "o * s - p + k * dil" for a window's input index, without "* 1" and "- 0" (gemm.c) */
void cg_window_index(char *dst, size_t n, const char *o, int s, int p, const char *k, int dil);

/* ---- kernel groups (group.c) -------------------------------------------
 * A group is one main node plus an elementwise epilogue chain applied to the
 * main node's result before it is stored (and, later, a prologue chain on
 * its first input).  Every epilogue node takes the running value as one input
 * and has the main node's element count; its other inputs are extra tensors
 * read at the broadcast index.  The group stores only its last value.  The
 * groups are the fuse pass's decision, written on the IR (Node.grole/group,
 * checked by the verifier); group.c only reads them (ir_schedule: without
 * the pass every computing node is its own group). */
typedef struct KGroup {
  Node *main;
  Node **epi;
  int nepi;
  Node **pro;       /* prologue (GROLE_PROLOGUE, ir_prologue_ok): the pooling a tiled
                       GEMM computes as it loads its first operand; at most one */
  int npro;
  Node **side;      /* side nodes (GROLE_SIDE, ir_side_ok): further values the main
                       node's emitter writes from its own reductions */
  int nside;
  int load_time;    /* computed once after the weights load (main->load_time), not per inference */
} KGroup;
/* Value the group stores: the last epilogue node's output, else main's. */
Value *group_out(const KGroup *gr);

typedef struct GroupList {
  KGroup *g;
  int n;
} GroupList;
/* The kernel groups of the nodes `need` marks (ir_needed), in launch order. */
GroupList group_form(Graph *g, const unsigned char *need);
void group_free(GroupList *gl);
/* Nodes that produce no kernel: their output aliases the first input (ir_is_view). */
int node_is_alias(const Node *n);

/* ---- buffers ------------------------------------------------------------
 * Parameters, constants and load-time values each have their own bytes;
 * inputs and activations (BK_INPUT, BK_ACT) sit where the memory plan put
 * them (Value.offset in the MEM_ACT region), or each in its own range when
 * no plan ran; the im2col workspace follows. */
enum { BK_PARAM, BK_INPUT, BK_ACT, BK_CONST, BK_WORK, BK_LOAD, BK_GRAD, BK_SPAN };
typedef struct CgBuf {
  int kind;
  Value *v;          /* NULL for the workspace and the spans */
  size_t offset, bytes;
  const char *label; /* BK_SPAN: what the range holds ("trainable_params", "grads", "exp_avg") */
  int train;         /* a value of the training graph (Cg.gt) */
  int span;          /* the BK_SPAN range it lies in (its pointer is derived from the
                        range's, so that checked mode's separate mappings still alias), or -1 */
} CgBuf;

/* ---- kernels ------------------------------------------------------------ */
typedef struct CgKernel {
  char *name;
  char *text;        /* full definition, the name spelled "@K@" */
  char *args;        /* NCC_ARG list for NCC_KERNEL_DESC, without parentheses */
  int flags;         /* NCC_KF_BARRIER_, NCC_KF_WARP_: set from the text by cg_kernel */
  uint64_t hash;     /* of text and args: dedupe compares strings only on a match */
  int load_time;     /* launched by M_prepare(), printed in the load-time part of the section */
  size_t smem;       /* bytes of its static __shared__ arrays (cg_kernel reads them from the text) */
} CgKernel;

/* One launch as cg_launch_b renders it, recorded for the report's occupancy
 * model (cg_launch_geometry): the grid at the compiled batch (a grid that
 * follows the batch has its full extent there), the block, the kernel's
 * static shared memory and the dynamic bytes the launch passes. */
typedef struct CgLaunch {
  const Node *main;  /* the main node of the group being emitted (Cg.group), NULL outside one */
  int train, load_time;
  long long grid[3];
  int block[2];
  size_t smem_static, smem_dyn;
  const char *kernel;   /* the kernel's name (CgKernel.name); in cg_launch_geometry's list a copy it owns */
} CgLaunch;
typedef struct CgLaunchList {
  CgLaunch *l;
  int n, cap;
} CgLaunchList;
/* The launches codegen renders for g, in order, as codegen_emit would make
 * them with these options (NULL: the defaults); with `train`, g is a
 * training graph (autodiff ran) and the launches are its training step's.
 * Returns 0, or -1 when g cannot be emitted (no diagnostic is printed: the
 * caller goes without).  Free with cg_launches_free. */
int cg_launch_geometry(Graph *g, const CodegenOpts *o, int train, CgLaunchList *out);
/* The launches of the whole file codegen_emit writes for inference graph g and training graph gt
 * (NULL: none), with the kernels named as in that file (a training step's kernels are numbered
 * after the inference ones) */
int cg_launch_geometry_file(Graph *g, Graph *gt, const CodegenOpts *o, CgLaunchList *out);
void cg_launches_free(CgLaunchList *l);

#define NCC_KF_BARRIER_ 1   /* = NCC_KF_BARRIER of ncc_rt.h, which the compiler does not include */
#define NCC_KF_WARP_ 2      /* = NCC_KF_WARP: the kernel uses warp collectives */
/* The NCC_KERNEL_DESC spelling of a kernel's flags. */
const char *cg_flags_name(int flags);

/* Parameters of one kernel being built: declaration text and the host
 * expressions that point at the values (cudaLaunchKernel convention). */
#define CG_MAX_PARAMS 80
#define CG_HOST_LEN 256
typedef struct KParams {
  int n;
  char decl[CG_MAX_PARAMS][80];     /* "const float *__restrict__ weight" */
  char ctype[CG_MAX_PARAMS][32];    /* "const float *" */
  char host[CG_MAX_PARAMS][CG_HOST_LEN];   /* "&m->bufs[BUF_conv1_weight]" */
  int buf1[CG_MAX_PARAMS];          /* 1 + the buffer a pointer parameter passes (kp_value, kp_buf, ...); 0: none */
} KParams;

/* The buffers one kernel group's launches pass (cg_launch_b; streams.c of
 * codegen): which the group reads and which it writes, by buffer index; all:
 * it touches memory no list says (a cuBLAS call), so it meets every group. */
typedef struct CgAccess {
  int n, cap;
  int *buf;
  unsigned char *wr;
  int all;
} CgAccess;

typedef struct Cg {
  CgAccess *acc;             /* while a group is emitted: what its launches pass (NULL: not recorded) */
  Graph *g;                  /* the graph being emitted: the inference graph, or gt while
                                the training step's groups are emitted */
  Graph *gi, *gt;            /* the inference graph; the training graph (NULL: none) */
  int *vbuf_i, *vbuf_t;      /* value id -> buffer, per graph (vbuf is the current one) */
  Buf trun;                  /* host statements of <model>_train_run(): the training step */
  const CodegenOpts *o;
  const char *model;
  float *q8inv;              /* int8: the layers' 1 / activation scale, the host table <model>_q8_inv_
                                their kernels take as a parameter (cg_q8_param) */
  int nq8;
  int *vbuf;                 /* value id -> buffer index, -1 when none */
  CgBuf *bufs;
  int nbufs;
  const char **bufname;      /* cg_buf_name(): "BUF_conv1_weight", in the graph's arena */
  int nbufname;
  const KGroup *group;       /* the group being emitted (emit_group), for launch comments */
  int work;                  /* workspace buffer index, -1 while none is needed */
  int work_side;             /* the side stream's own workspace (the streams pass), -1: none */
  size_t work_bytes;
  size_t act_base, act_bytes;  /* the inputs-and-activations region of the arena (= the report's peak_memory) */
  CgKernel *k;
  int nk, capk;
  Buf run;                   /* host statements of <model>_run() */
  Buf prep;                  /* host statements of <model>_prepare(): the load-time groups */
  int load_time;             /* set while the load-time groups are emitted */
  int err;                   /* an emitter reported a diag error */
  /* training step (docs/generated-code.md "Training"): set while the training
   * graph's groups are emitted.  The optimizer update runs over flat ranges:
   * opt_buf[0] spans every trainable parameter (in the param region, padding
   * between parameters included), [1] their gradients, [2] and [3] the
   * optimizer state (sgd momentum_buffer; adam exp_avg, exp_avg_sq), each
   * laid out like [0]; -1 where a range does not exist.  opt_count floats each.
   * Host variables a kernel may take as scalar arguments (kp_int/kp_float):
   * m->lr, m->bc1, m->bc2 (float: learning rate now; adam's bias corrections
   * 1 - beta^step), m->step32 (int: the step being computed, 1-based),
   * m->seed32 (int: the dropout seed); with loss scaling (Graph.train.
   * loss_scaling) m->inv_scale (float: 1 / the loss scale).
   * scale_buf: the loss_scale value (the host writes the scale before each
   * step); found_buf: an int the unscale kernel sets when a gradient is not
   * finite (the host clears it before each step); -1 without loss scaling. */
  int train;
  int scale_buf, found_buf;
  int nbatched, nlaunch;     /* launches of <model>_run() whose grid follows the batch, and all */
  int64_t step_rows;         /* > 0: the training step takes 1..step_rows rows (cg_train_batch) */
  int opt_buf[4];
  int64_t opt_count;
  CgLaunchList launches;     /* every cg_launch_b, for the report (cg_launch_geometry) */
} Cg;

/* Registers a kernel; `text` spells its name "@K@".  Returns the name of an
 * identical kernel registered before, or a new name <model>_k<i>_<op>. */
const char *cg_kernel(Cg *c, const char *op, int flags, const KParams *p, const char *text);
/* Kernel name suffix of a group: its main op (or `base`) and its epilogue ops,
 * "conv2d_add_relu"; at most 80 characters. */
const char *cg_opname(const KGroup *gr, const char *base, char out[96]);
/* Wraps `body` into a kernel definition with the params' signature and registers it. */
const char *cg_finish(Cg *c, const char *op, int flags, const KParams *p, const Buf *body);
/* cg_finish with __launch_bounds__(threads, min_blocks) (none when min_blocks is
 * 0): ptxas keeps the registers to what min_blocks resident blocks an SM allow */
const char *cg_finish_bounds(Cg *c, const char *op, int flags, const KParams *p, const Buf *body, int threads,
                             int min_blocks);
/* A warp-per-row kernel's end: rows of a group's value, per_block of them in a
 * block of 256 threads (the body tests its own row and stores in an if). */
int cg_rows_finish(Cg *c, const KGroup *gr, KParams *p, Buf *b, int64_t total, int64_t per_block);
/* Appends the host statements launching `name` with the params' host args. */
/* Adds buffer buf to a group's access list (wr: written). */
#define CG_MAX_EVENTS 32   /* ncc_rt.h's NCC_MAX_EVENTS */
/* The groups of gl whose load_time is load_time, rendered by emit into c->run:
 * on the streams the streams pass chose, with the waits their buffers need
 * (codegen/streams.c).  -1: emit failed. */
int cg_emit_streams(Cg *c, const GroupList *gl, int load_time, int (*emit)(Cg *, const KGroup *));
void cg_access_add(CgAccess *a, int buf, int wr);
void cg_launch(Cg *c, const char *name, const KParams *p, long long gx, long long gy, long long gz,
               int bx, int by, size_t shmem);

/* Launch geometry that follows the batch (docs/generated-code.md, "Batches
 * 1..N"): along grid axis `axis` (0: x, 1: y, 2: z) the launch covers
 * nb * per elements in blocks of `tile`, ceil(nb * per / tile) blocks, where
 * nb (m->nb) is the batch of the call; at nb = N that is the full grid. */
typedef struct CgBatch {
  int axis;
  int64_t per, tile;
} CgBatch;
/* Fills *bg and returns it when the launch of group gr may follow the batch:
 * an inference group (not load-time, not the training step) of a graph the
 * batch pass found to serve batches 1..N, storing a VB_ROWS value.  `extent`
 * is the element count along the grid axis, whose index the emitter knows to
 * have the batch outermost; it must be a multiple of N.  Else NULL. */
const CgBatch *cg_batch_grid(const Cg *c, const KGroup *gr, int axis, int64_t extent, int64_t tile, CgBatch *bg);
/* The training step's batch N when it may run 1..N rows (M_train_step_io_batch):
 * the inference graph keeps rows apart (its batch pass) and every input of
 * the training graph has N rows; else 0. */
int64_t cg_train_batch(const Graph *gi, const Graph *gt);
/* The rows a training kernel that mixes rows covers (batchnorm statistics,
 * losses): "nb", an int parameter added to p with the step's batch (m->nb),
 * when the step may run fewer rows than compiled and d0, the op's first
 * dimension, is that batch; else d0 as a literal (the kernel as before). */
const char *cg_step_rows(Cg *c, KParams *p, int64_t d0, char *buf, size_t n);
/* cg_launch whose grid follows the batch along bg's axis (bg NULL: fixed). */
void cg_launch_b(Cg *c, const char *name, const KParams *p, long long gx, long long gy, long long gz, int bx, int by,
                 size_t shmem, const CgBatch *bg);
/* "m->nb * k", a C expression (cuBLAS batch counts and rows), when the group's
 * launch follows the batch and `full` is k * N; else the constant `full` */
const char *cg_batch_count(const Cg *c, const KGroup *gr, int64_t k, int64_t full, char *dst, size_t n);

/* Adds a pointer parameter for value v (its buffer), named after its role
 * in the kernel ("x", "weight", "bn_running_mean"; "weight2" when the role
 * is taken): never after the buffer, so that kernels doing the same work on
 * other buffers keep equal texts and are emitted once.  Returns its C name. */
const char *kp_value(Cg *c, KParams *p, Value *v, int is_out, const char *role);
/* The name of tensor argument j of n's op in its ops.def argument spec: the
 * role of input j ("x"; add: "a", "b"; cross_entropy: "logits", "labels");
 * "in<j>" beyond the spec (parameters, named by their emitters). */
const char *cg_arg_role(const Node *n, int j, char out[32]);
/* "(var / div) % mod" without the trivial parts (mod 1: "0"; mod <= 0: no
 * remainder), and "a * k + b" (k 1: "a + b"; a parenthesised unless a name) */
const char *cg_digit(char *dst, size_t n, const char *var, int64_t div, int64_t mod);
const char *cg_lin(char *dst, size_t n, const char *a, int64_t k, const char *b);
/* Adds a pointer parameter for buffer b (a float range, e.g. Cg.opt_buf[i]). */
const char *kp_buf(Cg *c, KParams *p, int b, int is_out, const char *role);
/* Adds a pointer parameter for buffer b holding ints (Cg.found_buf). */
const char *kp_flag(Cg *c, KParams *p, int b, int is_out, const char *role);
/* Adds a float parameter whose host value is the C variable `hostvar`. */
const char *kp_float(KParams *p, const char *role, const char *hostvar);
/* Adds a pointer parameter for the workspace, in the role given ("cols":
 * im2col columns; "partial": split-K's partial sums). */
const char *kp_work(Cg *c, KParams *p, const char *role);
/* Adds an int parameter whose host value is the C variable `hostvar`. */
const char *kp_int(KParams *p, const char *role, const char *hostvar);
/* "const float *__restrict__ x, ..." */
void kp_decl(const KParams *p, Buf *b);

/* Narrow storage (Value.narrow, the storage pass): the C type of one
 * element of v's buffer ("float", "int", "unsigned short", "signed char");
 * the float that the element expression `elem` (x[i]) holds, "x[i]",
 * "ncc_fp16_load(x[i])" or "(float)x[i]" (int8: the quantized integer);
 * what a store of the float expression f into v's buffer writes, "f",
 * "ncc_fp16_bits(f)" (rounded to nearest even, as the readers round it) or
 * "(signed char)ncc_q8(f * 1/scale)" (quantized, as the readers quantize it). */
const char *cg_elem_type(const Value *v);
const char *cg_ld(char *dst, size_t n, const Value *v, const char *elem);
const char *cg_st(char *dst, size_t n, const Value *v, const char *f);
/* The letter of ncc_kernel.h's pair helpers (ncc_st2X, ncc_ld2X: two elements
 * one store or load) for v's stored type: 'f' float32, 'h' 16 bits, 'b'
 * int8; 0 for one they do not take (int32) */
char cg_pair_letter(const Value *v);

int cg_buf_of(Cg *c, Value *v);
/* The enum constant host code names buffer b by: "BUF_conv1_weight". */
const char *cg_buf_name(Cg *c, int b);

/* ---- emitters ----------------------------------------------------------- */
/* e itself when it is an identifier or a number, else "(e)": for index
 * expressions that read as written by hand. */
const char *cg_paren(char *dst, size_t n, const char *e);
/* Appends the term "e * k" of an index sum to b, as a person would write it:
 * nothing for k == 0 or e "0", "e" for k == 1, " + " before all but the
 * first; *nterms counts the terms written (an empty sum is the caller's "0"). */
void cg_term(Buf *b, int *nterms, const char *e, int64_t k);
/* Index (C expression) of element `idx` (linear index into `out`) in a tensor of
 * shape `in` that broadcasts to `out` (NumPy rules, right-aligned). */
void cg_bcast_index(Buf *b, const Shape *out, const Shape *in, const char *idx);
/* Applies the group's epilogue to the float variable `var` holding element
 * `idx` (linear, C expression) of the main output; adds the extra inputs
 * as kernel params. Appends statements indented by `ind`. */
int cg_epilogue(Cg *c, const KGroup *gr, KParams *p, Buf *body, const char *var, const char *idx, int ind);
/* cg_epilogue for a GEMM epilogue that stores two columns at once (out_pair
 * in gemm.c): var is element e (0, 1) of a pair, idx (o) its index, op + e.
 * An operand of the output's own shape is read two elements a load, before
 * the loop over e: pre gets its array and the load, at op. */
int cg_epilogue_pair(Cg *c, const KGroup *gr, KParams *p, Buf *body, Buf *pre, const char *var, const char *idx, int ind);
/* The common kernel shapes.  One thread per output element: the head
 * ("int i = ...; if (i < total) {"), and the end after the body computed
 * `float v` for element i: the epilogue chain, the store of the group's
 * value, the kernel and a launch of 256-thread blocks.  One block of T
 * threads per row (layernorm, softmax, their gradients): the end of the
 * loop that computed `v` for element i, and a launch of `rows` blocks.
 * Both free b and return 0, or -1 after a diagnostic. */
void cg_flat_head(Buf *b, int64_t total);
int cg_flat_finish(Cg *c, const KGroup *gr, KParams *p, Buf *b, int64_t total);
int cg_row_finish(Cg *c, const KGroup *gr, KParams *p, Buf *b, int64_t rows, int T);
/* Emits a statement `var = f(x0[, x1])` for one elementwise node; x0/x1 are
 * the operands' C expressions in the node's input order. */
int cg_elem_stmt(Cg *c, Buf *body, const Node *n, const char *var, const char *x0, const char *x1, int ind);

/* One per EMIT name of ops.def.  emit_none is for the ops that never lead a
 * group (sources, views, identities at inference): reaching it is ncc's bug. */
int emit_none(Cg *c, const KGroup *gr);
int emit_elemwise(Cg *c, const KGroup *gr);
int emit_pool(Cg *c, const KGroup *gr);
int emit_gavgpool(Cg *c, const KGroup *gr);
int emit_batchnorm(Cg *c, const KGroup *gr);
int emit_layernorm(Cg *c, const KGroup *gr);
int emit_softmax(Cg *c, const KGroup *gr);
int emit_concat(Cg *c, const KGroup *gr);
int emit_transpose(Cg *c, const KGroup *gr);
int emit_loss(Cg *c, const KGroup *gr);
int emit_gemm(Cg *c, const KGroup *gr);   /* conv2d, linear, matmul: tiled or cuBLAS */
int emit_grad_gemm(Cg *c, const KGroup *gr);   /* the gradient ops of ir_grad_gemm: tiled */
/* training (backward.c): the forward ops in training mode, the gradient ops
 * autodiff writes and the updates (docs/generated-code.md, "Training") */
int emit_bn_stats(Cg *c, const KGroup *gr);
int emit_bn_train(Cg *c, const KGroup *gr);
int emit_bn_running(Cg *c, const KGroup *gr);
int emit_dropout(Cg *c, const KGroup *gr);
int emit_conv2d_bwd_data(Cg *c, const KGroup *gr);
int emit_conv2d_bwd_weight(Cg *c, const KGroup *gr);
int emit_linear_bwd_weight(Cg *c, const KGroup *gr);
int emit_sum_to(Cg *c, const KGroup *gr);
int emit_qscale(Cg *c, const KGroup *gr);
/* int8: the float parameter holding n's 1 / activation scale (an entry of the
 * host table <model>_q8_inv_), added to p once; NULL for another precision */
const char *cg_q8_param(Cg *c, KParams *p, const Node *n);
/* the same for an int8 matmul's second operand (Node.qscale_b); NULL for another op */
const char *cg_q8_param_b(Cg *c, KParams *p, const Node *n);
int emit_maxpool2d_bwd(Cg *c, const KGroup *gr);
int emit_avgpool2d_bwd(Cg *c, const KGroup *gr);
int emit_gavgpool2d_bwd(Cg *c, const KGroup *gr);
int emit_softmax_bwd(Cg *c, const KGroup *gr);
int emit_loss_bwd(Cg *c, const KGroup *gr);
int emit_layernorm_bwd(Cg *c, const KGroup *gr);
int emit_bn_bwd(Cg *c, const KGroup *gr);
int emit_slice(Cg *c, const KGroup *gr);
int emit_optimizer(Cg *c, const KGroup *gr);
/* Bytes of im2col workspace the group of main node n needs (cuBLAS path), 0 if none. */
size_t gemm_workspace_bytes(const Cg *c, const Node *n);

/* A number of threads for a block reduction over d elements: a power of two in [32, 256]. */
int cg_reduce_threads(int64_t d);
/* Block-wide reduction of the float `var` over `nthr` threads in shared array
 * `red` (declared by the caller); leaves the result in var for every thread. */
/* The shared array of cg_block_reduce with nthr threads (none for one warp). */
void cg_reduce_shared(Buf *b, const char *red, int nthr);
void cg_block_reduce(Buf *b, const char *red, const char *var, int nthr, int is_max, int ind);

void cg_ind(Buf *b, int ind);
#endif
