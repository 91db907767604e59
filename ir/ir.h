/* ir.h — the IR of ncc: a graph of typed values with static shapes.
 *
 * Design (docs/architecture.md, decision 1): every node produces exactly one value;
 * every value has a dtype and a fully known shape once the node is built
 * (shape inference runs inside ir_node(), so an ill-shaped graph can never be
 * built).  Parameters are values too, produced by PARAM nodes that carry the
 * PyTorch state_dict name, so passes (autodiff, folding) see them as ordinary
 * inputs of conv2d/linear/batchnorm2d.
 *
 * One wide Attrs struct instead of per-op unions (chibicc's habit): each op
 * reads the fields it needs, documented in ops.def.  Everything is allocated
 * from the graph's arena and freed at once with ir_graph_free().
 *
 * Nodes are kept in g->nodes in creation order, which is a topological order
 * (a node's inputs always exist before it).  Passes that delete nodes mark
 * them dead and compact with ir_compact().
 */
#ifndef NCC_IR_H
#define NCC_IR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "arena.h"
#include "diag.h"

typedef enum {
#define OP(name, str, flags, mn, mx, args, shape, emit, cost, expr, grad) OP_##name,
#include "ops.def"
#undef OP
  OP__COUNT
} OpKind;

enum {
  OPF_SOURCE     = 1 << 0,  /* no inputs: graph input, parameter, constant */
  OPF_ELEMWISE   = 1 << 1,
  OPF_BINARY     = 1 << 2,  /* two-input broadcasting elementwise */
  OPF_REDUCE     = 1 << 3,
  OPF_POOL       = 1 << 4,
  OPF_GEMM_LIKE  = 1 << 5,
  OPF_SHAPE_ONLY = 1 << 6,  /* output aliases the input's bytes */
  OPF_MOVE       = 1 << 7,  /* data movement (concat, transpose) */
  OPF_LOSS       = 1 << 8,
  OPF_TRAIN_ONLY = 1 << 9,  /* identity at inference (pruned) */
  OPF_NORM       = 1 << 10,
  OPF_INTERNAL   = 1 << 11, /* made by passes only (autodiff): no .net call spells it */
  OPF_GRAD       = 1 << 12, /* a gradient op of the backward graph */
  OPF_UPDATE     = 1 << 13, /* writes parameters or optimizer state in place: a root of a
                               training step; its output is a dummy scalar nobody reads */
};

/* The data columns of ops.def; the function columns (shape rule, emitter,
 * cost) and the expression become tables of the layers that use them. */
typedef struct OpInfo {
  const char *name;
  unsigned flags;
  int min_in, max_in;
  const char *args;        /* argument spec of a .net call; "" for sources */
} OpInfo;
extern const OpInfo ncc_ops[OP__COUNT];
/* Look an op up by its .net spelling; returns -1 when unknown. */
int ir_op_lookup(const char *name);

typedef enum { DT_F32, DT_F16, DT_BF16, DT_I32, DT_I8, DT__COUNT } DType;
const char *dtype_name(DType t);   /* "f32", ... */
int dtype_size(DType t);           /* bytes */
int dtype_lookup(const char *name);/* -1 when unknown */

#define NCC_MAX_RANK 8
typedef struct Shape {
  int rank;
  int64_t d[NCC_MAX_RANK];
} Shape;
int64_t shape_numel(const Shape *s);
/* Writes "f32[64, 1, 28, 28]" into buf; returns buf. */
char *shape_str(char *buf, size_t n, DType t, const Shape *s);

/* Attributes: one wide struct; see ops.def for which op reads which field. */
typedef struct Attrs {
  int kernel[2], stride[2], pad[2], dilation[2];
  int groups;
  int has_bias;            /* conv2d/linear: a bias input is present */
  int64_t out;             /* conv2d out channels, linear out features */
  int axis;                /* softmax/log_softmax/concat, normalised to >= 0 */
  double eps, momentum;    /* batchnorm2d, layernorm */
  double p;                /* dropout */
  double slope;            /* leaky_relu */
  double fval;             /* CONST */
  int nlist;
  int64_t list[NCC_MAX_RANK]; /* reshape target dims, transpose perm; training ops: see ops.def */
  int act;                 /* act_grad: the OP_* whose derivative it applies */
  int act_at_out;          /* act_grad: operand 1 is the activation's output y, not its input
                              (the derivative from y, as torch computes relu's, sigmoid's, tanh's) */
  int slot;                /* dropout_apply: which dropout of the model (part of the mask's key) */
  int wtap;                /* conv2d: the weight is stored tap-major, [out, kh, kw, in/groups] (the fold
                              pass reorders a load-time weight so; ir_conv_tap_major_ok), not [out, in/groups,
                              kh, kw]: the implicit GEMM's k = (kh KW + kw) in/groups + ci.
                              conv2d_bwd_data: its weight operand is the forward's weight transposed once a
                              step to [in, kh, kw, out] (autodiff: groups 1, fp16 and bf16), so that the GEMM's A(m, k) =
                              weight[m K + k], k = (kh KW + kw) out + co (ir_dgrad_tap_k), k-contiguous */
  unsigned flip;           /* transpose: bit d set, the output's axis d runs backwards, y[.., i_d, ..] =
                              x[.., d_d - 1 - i_d, ..] (with the permutation); autodiff reverses a
                              convolution's taps so, an op only a pass makes (no .net spelling) */
} Attrs;

typedef struct Node Node;
typedef struct Value {
  int id;
  DType dtype;
  Shape shape;
  Node *def;               /* the node that produces it */
  int nuses;               /* maintained by ir_node()/ir_compact() */
  /* Memory plan (written by the plan pass, passes/plan.c; see Graph.planned):
   * where the value's bytes live.  A view (flatten, reshape, dropout at
   * inference) carries the region and offset of the value it views. */
  int region;              /* MEM_NONE: no bytes of its own in a planned region
                              (a parameter, a constant, a value a kernel group
                              keeps in registers, or no plan); MEM_ACT, MEM_LOAD */
  int64_t offset;          /* byte offset in its region, 256-aligned */
  struct Value *grad_of;   /* set by autodiff: this value is the gradient of that PARAM's
                              value; it is stored in the gradient region at the parameter's
                              place (persistent, read by the optimizer update) */
  int batch;               /* set by the batch pass (passes/batch.c): VB_* below */
  int narrow;              /* set by the storage pass (passes/storage.c): 0, or DT_F16 / DT_BF16 /
                              DT_I8: a float32 value whose buffer holds it narrower.  f16, bf16: its
                              16 bits (every kernel reading it rounds it to that type as it loads
                              it, so storing it rounded loses nothing); i8: its int8 quantization
                              q = clamp(rint(v / qscale), -127, 127) (every reader is an int8 GEMM
                              quantizing it with that very scale as it loads it); its views alike */
  float qscale;            /* narrow DT_I8: the activation scale its readers share */
} Value;
/* The type a value's bytes hold: Value.narrow when set, else its dtype. */
static inline DType ir_store_type(const Value *v) { return v->narrow ? (DType)v->narrow : v->dtype; }
/* Bytes of a value's buffer: elements times the size of ir_store_type. */
int64_t ir_value_bytes(const Value *v);

/* How a value relates to the batch (Value.batch, the batch pass):
 * VB_NONE: computed from parameters and constants only; VB_ROWS: its first
 * dimension is the batch and row r depends on row r of the inputs alone, so
 * a smaller batch needs only its first rows; VB_MIXED: anything else (rows
 * mixed, or the batch moved off the first axis). */
enum { VB_NONE, VB_ROWS, VB_MIXED };

/* Regions of the memory plan.  MEM_ACT: graph inputs and the values kernel
 * groups store, per inference; values whose lifetimes do not meet share
 * bytes.  MEM_LOAD: values computed once after the weights load
 * (Node.load_time), kept like parameters and never shared. */
enum { MEM_NONE, MEM_ACT, MEM_LOAD };

struct Node {
  int id;
  OpKind op;
  int nin;
  Value **in;
  Value *out;
  Attrs a;
  const char *name;        /* PARAM: state_dict name ("layer1.0.conv1.weight");
                              INPUT: input name; others: the layer's name or NULL */
  const char *layer;       /* the layer instance that created it ("conv1"); NULL if none */
  Loc loc;                 /* where in the source it was made */
  int dead;                /* marked by passes; removed by ir_compact() */
  int param_kind;          /* PARAM: PK_* below */
  int prec;                /* set by the precision pass: the math of a GEMM-like op
                              or a gradient's GEMM (ir_op_rounds) (PREC_FP32; PREC_TF32, PREC_FP16, PREC_BF16: both
                              operands rounded to that type as they are loaded,
                              products accumulated in float32; PREC_INT8: a conv2d or
                              linear whose weight the precision pass quantized (in[1] a
                              quantize node: integers in [-127, 127]) and whose input x is
                              quantized as it is loaded, q = clamp(rint(x / qscale), -127,
                              127); products summed in int32; its value is that integer
                              sum, which the mul (and add) after it dequantize) */
  float qscale;            /* PREC_INT8: the activation scale of in[0] (calibration) */
  float qscale_b;          /* PREC_INT8 matmul: the activation scale of in[1] (its second operand) */
  int tile;                /* set by the precision pass on a tensor-core GEMM (ir_gemm_mma):
                              1 + its index in ir_mma_tiles (ir_tile_choose); 0: the
                              default tile of its shape */
  const char *tile_why;    /* with --autotune: why the tile (the autotuner's line); NULL: the
                              model's or --gemm-tile's reason (ir_tile_why) */
  int pipe;                /* set by the precision pass on a tensor-core GEMM (--gemm-pipeline=on), and by
                              passes_fp32_tiles on a float32 one (2: two stages, ir_fp32_pipe_ok):
                              0 off, else the stages (2..4, ir_pipe_stages) in which fp16/bf16/int8
                              operands stored narrow (tf32: float32 ones) and contiguous in 16-byte pieces are copied
                              with cp.async and their fragments loaded with ldmatrix (codegen checks
                              the storage); a convolution's B tile through registers, the next K
                              tile's loads in flight during the MMAs */
  int pipe_a;              /* with pipe: A may be copied so (0: int8 at a tile bounded to three blocks
                              an SM, 128x64, whose residual epilogues spill 8 bytes with A's copies
                              in flight) */
  int pipe_r;              /* with pipe: a float32 operand staged through registers 4 floats a load
                              (vec32_fetch) is fetched a K tile ahead, in flight during the MMAs: only
                              at tiles of 256 threads (128 x 128, where an H200 timed a gain; it timed
                              64 x 64 and 32 x 64 slower so), not a convolution's weight gradient
                              (bounded to two blocks an SM, ir_tile_minb: its 128 registers spill) */
  int load_time;           /* set by the fold pass: computed once, right after the
                              weights are loaded, from parameters and constants only
                              (a folded batchnorm's scale and shift); its value is
                              kept for every inference, like a parameter */
  /* Kernel group (written by the fuse pass, passes/fuse.c; see Graph.ngroups):
   * the kernel this node computes in.  A group is one main node followed by
   * an epilogue chain: each epilogue node takes the running value (the
   * previous node's output) and the chain stores only its last value.  A
   * group may also have side nodes (GROLE_SIDE): reductions over the main
   * node's own operands, or updates from its value, that its kernel computes
   * on the way (ir_side_ok); each stores its own value, a second output of
   * the kernel (an update writes in place and stores nothing).  A group may
   * start with a prologue node (GROLE_PROLOGUE, before the main node in graph
   * order): a pooling whose only reader is the main node's GEMM, computed
   * where the GEMM loads its operand (ir_prologue_ok); its value is never
   * stored. */
  int grole;               /* GROLE_NONE (not grouped: a source, a view, a node
                              the outputs do not need, or no fuse pass),
                              GROLE_MAIN, GROLE_EPILOGUE, GROLE_SIDE, GROLE_PROLOGUE */
  int group;               /* the group's index in launch order (valid when grole != GROLE_NONE) */
  const char *fuse_rule;   /* every role but GROLE_MAIN: the name of the fusion rule that put it there */
  int stream;              /* set by the streams pass on a group's main node: 1 = the group's kernels run on
                              the side stream, beside work it does not depend on (passes/streams.c); 0: stream 0 */
};

/* Precisions (--precision; passes/precision.c, docs/precision.md). */
enum { PREC_FP32, PREC_TF32, PREC_FP16, PREC_BF16, PREC_INT8 };
const char *ir_prec_name(int prec);   /* "fp32", "tf32", "fp16", "bf16", "int8" */
int ir_prec_lookup(const char *name); /* PREC_* of a name, -1 if none */
/* Does the precision pass round this op's operands?  The GEMM-like ops
 * (OPF_GEMM_LIKE: conv2d, linear, matmul; a linear's input gradient is a
 * matmul) and, in a training step, the GEMMs of the gradients: conv2d's
 * input and weight gradients and linear's weight gradient. */
static inline int ir_op_rounds(int op) {
  return (ncc_ops[op].flags & OPF_GEMM_LIKE) || op == OP_CONV2D_BWD_DATA || op == OP_CONV2D_BWD_WEIGHT ||
         op == OP_LINEAR_BWD_WEIGHT;
}

/* INT8 (--precision=int8): the calibration.  driver/calibrate.c fills it
 * (or reads it from a calibration cache), the precision pass reads it, the
 * report prints it.  One entry per int8 candidate (ir_int8_candidate), keyed
 * by ir_layer_key. */
typedef struct QuantLayer {
  char key[160];
  double absmax;     /* the largest |x| of the layer's input over the calibration data */
  double scale;      /* the input's activation scale: x / scale is rounded to [-127, 127] */
  double error;      /* the layer alone at int8 against fp32 on the calibration data (the same
                        fp32 input): ||y_int8 - y_fp32|| / ||y_fp32||; < 0: not measured */
  int prec;          /* PREC_INT8, or where error > max_error the precision it falls back to
                        (PREC_FP32; PREC_FP16, PREC_BF16 with --int8-fallback) */
} QuantLayer;
typedef struct QuantTable {
  QuantLayer *l;
  int n;
  int fp32_missing;  /* a candidate without an entry stays fp32 (the calibration's own builds); else an error */
  char method[16];   /* minmax, percentile, entropy */
  double percentile, max_error;
  int fallback;      /* the precision a layer falls back to: PREC_FP32, PREC_FP16, PREC_BF16 */
  int64_t samples;
  char source[512];  /* "X.npy" or "cache FILE" */
} QuantTable;
const QuantLayer *ir_quant_find(const QuantTable *t, const char *key);
/* The name of a layer that calibration and the report key on: the node's
 * name, else its layer, else "op@LINE:COL" of its source position. */
const char *ir_layer_key(const Node *n, char *buf, size_t len);
/* May the precision pass run this op at int8?  A conv2d or linear computed
 * per inference whose weight is known at load time (a parameter, or the fold
 * pass's folded weight), or a matmul computed per inference (both operands
 * quantized with calibrated per-tensor scales). */
static inline int ir_int8_candidate(const Node *n) {
  if (n->load_time || n->dead) return 0;
  if (n->op == OP_MATMUL) return 1;
  if (n->op != OP_CONV2D && n->op != OP_LINEAR) return 0;
  const Node *w = n->in[1]->def;
  return w->op == OP_PARAM || w->load_time;
}
/* The calibrated operands (taps) of an int8 candidate: conv2d and linear
 * their input x, matmul both a and b.  Calibration keys tap t of layer KEY
 * as KEY, and a matmul's second as KEY#b (IR_INT8_TAP_B). */
static inline int ir_int8_taps(const Node *n) { return n->op == OP_MATMUL ? 2 : 1; }
#define IR_INT8_TAP_B "#b"

enum { GROLE_NONE, GROLE_MAIN, GROLE_EPILOGUE, GROLE_SIDE, GROLE_PROLOGUE };

enum { PK_NONE, PK_WEIGHT, PK_BIAS, PK_RUNNING_MEAN, PK_RUNNING_VAR };

typedef enum { OPT_NONE, OPT_SGD, OPT_ADAM, OPT_ADAMW } OptKind;
typedef enum { SCHED_NONE, SCHED_STEP, SCHED_COSINE } SchedKind;
typedef struct TrainCfg {
  int present;
  OptKind opt;
  double lr, momentum, weight_decay, beta1, beta2, eps;
  int nesterov;
  SchedKind sched;
  int64_t every, total;
  double gamma;
  Value *minimize;
  Loc loc;
  /* set by passes: autodiff's seed (the gradient of `minimize`, a const 1.0);
   * the precision pass at fp16 makes it a loss_scale source and sets
   * loss_scaling with GradScaler's initial scale */
  Value *seed;
  int loss_scaling;
  double init_scale;
} TrainCfg;
/* The optimizer's state tensors a parameter: SGD's momentum buffer (none
 * without momentum), Adam's and AdamW's two moments */
static inline int ir_opt_states(const TrainCfg *t) { return t->opt == OPT_SGD ? (t->momentum != 0 ? 1 : 0) : 2; }

typedef struct NamedValue { const char *name; Value *v; } NamedValue;

typedef struct Graph {
  Arena *arena;
  const char *model;       /* `model NAME` */
  Node **nodes; int nnodes, cap;
  int next_value_id;
  NamedValue *outputs; int noutputs;  /* `output a, b` in order */
  NamedValue *losses; int nlosses;    /* named scalar loss values (e.g. `loss = ...`) */
  TrainCfg train;
  int64_t max_nodes;       /* elaboration limit; ir_node() fails beyond it */
  /* Schedule annotations (see Node.grole, Value.region).  Both are dropped
   * by ir_clear_schedule(), which ir_compact() calls when it removes nodes:
   * a pass that changes the graph after fuse or plan must run them again. */
  int ngroups;             /* > 0: the fuse pass grouped the nodes; 0: every
                              needed computing node is its own group (ir_schedule) */
  int planned;             /* the plan pass placed the values (Value.region/offset) */
  int64_t act_bytes;       /* planned: size of the MEM_ACT region (= the report's peak_memory) */
  int64_t load_bytes;      /* planned: size of the MEM_LOAD region */
  int precision;           /* set by the precision pass: PREC_* asked for (--precision) */
  const QuantTable *quant; /* set by the precision pass at int8: the calibration it applied (the
                              caller's; it outlives the graph's use), for the report */
  int64_t max_batch;       /* set by the batch pass: > 0, the inference graph runs any batch
                              1..max_batch from one build (every output in VB_ROWS); 0: the
                              compiled batch only, batch_fixed says why (NULL: pass not run) */
  const char *batch_fixed; Loc batch_loc;
  const char *batch_const; /* set by the frontend: the `const` that every input's first dimension
                              names (`input x: f32[N, ...]`), or NULL */
  int training;            /* set by passes_run from PassCtx.train: the losses and
                              the minimised value are roots too (ir_needed) */
} Graph;

Graph *ir_graph_new(const char *model);
void ir_graph_free(Graph *g);

/* Builds a node, runs its shape rule and returns its output value.  On a
 * shape/type error it reports through diag at `loc` (naming the shapes) and
 * returns NULL; nothing is added to the graph then. `name`/`layer` may be NULL. */
Value *ir_node(Graph *g, OpKind op, Value **in, int nin, const Attrs *a,
               const char *name, const char *layer, Loc loc);
Value *ir_input(Graph *g, const char *name, DType t, const Shape *s, Loc loc);
Value *ir_param(Graph *g, const char *name, int kind, const Shape *s, const char *layer, Loc loc);
/* Finds a PARAM node by state_dict name, or NULL. */
Node *ir_find_param(Graph *g, const char *name);
void ir_attrs_init(Attrs *a);   /* the defaults: stride 1, dilation 1, groups 1, ... */

/* Shape rule of one op: fills *out_t and *out_s, or reports an error at n->loc and
 * returns -1.  Implemented in shape.c. */
int ir_infer(Graph *g, Node *n, DType *out_t, Shape *out_s);

/* Removes dead nodes, recounts uses; drops the schedule when it removed any. */
void ir_compact(Graph *g);
/* Forgets the kernel groups and the memory plan (Node.grole, Value.region, ...). */
void ir_clear_schedule(Graph *g);
/* A copy of `src` (op, attributes, layer, loc) reading `in`, with name `name`,
 * inserted at position `pos` of g->nodes (ids from pos on shift by one).
 * Shape inference runs again; returns the copy's value. */
Value *ir_clone_at(Graph *g, const Node *src, Value **in, int pos, const char *name);
/* Checks the invariants (topological order, arity, shapes re-inferred equal,
 * use counts).  Returns 0 when sound; prints what is broken to stderr otherwise. */
int ir_verify(Graph *g);
/* Is v the output of a node still in g (not dead, not compacted away)?  A pruned
 * inference graph keeps g->losses and g->train.minimize pointing at removed
 * nodes; check with this before following them.  In verify.c. */
int ir_value_live(const Graph *g, const Value *v);

/* ---- liveness and kernel groups (liveness.c): one helper for every pass,
 * the code generator and the report ---- */
/* need[node id] = 1 for the nodes the roots need: the outputs and, in
 * training, the losses, the minimised value and the updates (OPF_UPDATE); graph inputs only where a
 * needed node reads them.  `need` has g->nnodes entries. */
void ir_needed(const Graph *g, int train, unsigned char *need);
/* A node that computes nothing: its value views its input's bytes
 * (flatten, reshape; dropout and dropout2d, identities at inference). */
int ir_is_view(const Node *n);
/* The value owning v's bytes: v itself, or what a chain of views views. */
Value *ir_view_root(Value *v);
/* Does n compute in a kernel (needed, not a source, not a view)? */
static inline int ir_computes(const Node *n, const unsigned char *need) {
  return need[n->id] && !(ncc_ops[n->op].flags & OPF_SOURCE) && !ir_is_view(n);
}
/* The kernel groups: gid[node id] = the node's group in launch order, -1 for
 * nodes that compute in no kernel; role[node id] = GROLE_*.  From the fuse
 * pass's annotations when g->ngroups > 0, else every needed computing node
 * is its own group (GROLE_MAIN), in graph order.  Returns the group count. */
int ir_schedule(const Graph *g, const unsigned char *need, int *gid, unsigned char *role);
/* May s compute as a side node (GROLE_SIDE) in the kernel whose main node is
 * m?  The pairs the emitters render, each a reduction the main node's kernel
 * already makes: bn_running from bn_stats's value (the running statistics
 * updated by the block that computed the channel's mean and variance), and
 * bn_bwd_weight and the bias gradient (a per-channel sum_to of dy) with
 * bn_bwd_data on the same operands (its per-channel sums of dy and
 * dy * (x - mean) are theirs). */
int ir_side_ok(const Node *s, const Node *m);
/* May pool compute as the prologue (GROLE_PROLOGUE) of the kernel whose main
 * node is m?  A maxpool2d or avgpool2d whose value m reads as its first
 * operand (a conv2d directly, a linear through a flatten to [N, C*H*W]) and
 * nothing else reads; m a tiled GEMM, not the direct convolution of
 * ir_conv_direct (the cuBLAS path, which the graph does not show, is ruled
 * out by the callers: PassCtx.cublas, CodegenOpts.use_cublas). */
int ir_prologue_ok(const Node *pool, const Node *m);
/* Do the windows of this maxpool2d_bwd (dy, x) tile x: stride equal to
 * the kernel, no padding or dilation, H and W multiples of the kernel
 * (VGG's and most CNNs' 2 x 2 pools)?  Every element of x is then in one
 * window, and the backward runs a thread a window: the window's argmax
 * found once, its KH x KW gradients written (codegen/backward.c), where
 * otherwise a thread an element of x searches every window covering it. */
static inline int ir_pool_tiles(const Node *n) {
  if (n->op != OP_MAXPOOL2D_BWD) return 0;
  const Attrs *a = &n->a;
  const Shape *xs = &n->in[1]->shape;
  return a->stride[0] == a->kernel[0] && a->stride[1] == a->kernel[1] && !a->pad[0] &&
         !a->pad[1] && a->dilation[0] <= 1 && a->dilation[1] <= 1 && xs->d[2] % a->kernel[0] == 0 &&
         xs->d[3] % a->kernel[1] == 0;
}
/* The rows of x a block of this maxpool2d_bwd takes where its windows do not
 * tile x (overlapping, padded or gapped: ResNet's 3 x 3 of stride 2), or 0
 * for the kernel a thread an element of x.  The block first finds the argmax
 * of every window covering its rows once (a byte in shared memory: its index
 * in the window, kh * KW + kw), then sums dy for each of its elements over
 * the windows that pick it, in the element kernel's order.  The rows are
 * the fewest, a multiple of the stride, that give the block's 256 threads
 * IR_POOL_BAND_ELEMS elements (all of x's rows where it has fewer); fewer
 * where the windows covering them would pass IR_POOL_BAND_BYTES; 0 where
 * even one stride's rows would, or where a window's KH x KW index passes a
 * byte. */
#define IR_POOL_BAND_ELEMS 2048
#define IR_POOL_BAND_BYTES 16384
/* the rows of windows that can cover `rows` consecutive rows of x */
static inline int64_t ir_pool_band_windows(const Attrs *a, int64_t rows) {
  return (rows - 1 + (int64_t)(a->kernel[0] - 1) * a->dilation[0]) / a->stride[0] + 1;
}
static inline int64_t ir_pool_band_rows(const Node *n) {
  if (n->op != OP_MAXPOOL2D_BWD || ir_pool_tiles(n)) return 0;
  const Attrs *a = &n->a;
  int64_t H = n->in[1]->shape.d[2], W = n->in[1]->shape.d[3], OW = n->in[0]->shape.d[3];
  int64_t s = a->stride[0];
  if (a->kernel[0] * a->kernel[1] > 255) return 0;
  int64_t rows = (IR_POOL_BAND_ELEMS + W - 1) / W;
  rows = (rows + s - 1) / s * s;
  if (rows > H) rows = H;
  while (rows > s && ir_pool_band_windows(a, rows) * OW > IR_POOL_BAND_BYTES) rows -= s;
  if (ir_pool_band_windows(a, rows) * OW > IR_POOL_BAND_BYTES) return 0;
  return rows;
}
/* Does codegen emit this conv2d as a direct kernel, one thread per output
 * (few output channels per group: depthwise), rather than a tiled GEMM? */
static inline int ir_conv_direct(const Node *n) { return n->out->shape.d[1] / n->a.groups < 8; }
/* Would a tap-major weight (Attrs.wtap) serve this conv2d's tiled GEMM?  A
 * kernel of more than one tap and in/groups a multiple of the K tile (16):
 * each K tile is then one tap's channels, so its window offset and padding
 * test are worked out once a tile, not once an element (codegen/gemm.c,
 * tap_tile).  The fold pass reorders such a conv's load-time weight. */
#define IR_CONV_TAP_K 16
static inline int ir_conv_tap_major_ok(const Node *n) {
  return n->op == OP_CONV2D && !ir_conv_direct(n) && n->a.kernel[0] * n->a.kernel[1] > 1 &&
         (n->in[0]->shape.d[1] / n->a.groups) % IR_CONV_TAP_K == 0;
}
/* The rows M of a linear (its input's first dimension) or matmul (the rows
 * of a, 1 for a vector), 0 for another op. */
static inline int64_t ir_gemm_rows(const Node *n) {
  if (n->op == OP_LINEAR) return n->in[0]->shape.d[0];
  if (n->op != OP_MATMUL) return 0;
  const Shape *a = &n->in[0]->shape;
  return a->rank == 1 ? 1 : a->d[a->rank - 2];
}
/* Does codegen emit this linear or matmul as a GEMV (docs/gpu.md, "GEMV")
 * rather than the tiled GEMM?  Few rows: the tiled kernel's tiles have at
 * least 16 rows, so at M <= 8 half or more of its multiply-adds (15 of 16 at
 * M = 1) work on padding.  The GEMV takes IR_GEMV_BLOCK_ROWS rows a block
 * (the grid follows the batch: a build for N <= 8 run at 1..4 rows launches
 * one row block) and reads each weight row contiguously. */
#define IR_GEMV_MAX_ROWS 8
#define IR_GEMV_BLOCK_ROWS 4
static inline int ir_gemm_gemv(const Node *n) {
  int64_t m = ir_gemm_rows(n);
  return m >= 1 && m <= IR_GEMV_MAX_ROWS;
}

/* Does codegen emit this GEMM-like op on tensor cores (mma.sync; docs/gpu.md,
 * "Tensor cores") rather than the CUDA-core tiled GEMM?  The precision pass
 * gives it TF32, FP16, BF16 or INT8 operands (n->prec), and it is not a GEMV
 * or a direct convolution: mma.sync.m16n8k8 at TF32, m16n8k16 at FP16 and
 * BF16, m16n8k16 with s8 operands and s32 sums at INT8.
 * (The cuBLAS path takes no rounded op: the pass refuses it.) */
/* Does codegen emit this gradient op as a tiled GEMM (ir_gemm_dims gives
 * its M, N, K, Z) rather than a sum per output element?  conv2d_bwd_data:
 * M input channels of a group, N images x input pixels, K output channels of
 * the group x taps (the transposed window gathered from dy); conv2d_bwd_weight:
 * M output channels of a group, N input channels of the group x taps, K
 * images x output pixels; linear_bwd_weight: M outputs, N inputs, K rows.
 * Tiled when M >= 8 (below, as for ir_conv_direct, a 16-row tile is mostly
 * padding; a sum per output element then).  A weight gradient of few tiles
 * and a long K (the first layers': K is the batch's pixels, 1.6 M for VGG-16's
 * first convolutions at batch 32) is split along K (ir_gemm_split_k). */
static inline void ir_gemm_dims(const Node *n, int64_t *M, int64_t *N, int64_t *K, int64_t *Z);
static inline int ir_grad_gemm(const Node *n) {
  int64_t M, N, K, Z;
  if (n->op != OP_CONV2D_BWD_DATA && n->op != OP_CONV2D_BWD_WEIGHT && n->op != OP_LINEAR_BWD_WEIGHT) return 0;
  ir_gemm_dims(n, &M, &N, &K, &Z);
  return M >= 8;
}

static inline int ir_gemm_mma(const Node *n) {
  if (n->prec == PREC_FP32) return 0;
  if (ir_grad_gemm(n)) return 1;
  if (n->op == OP_CONV2D) return !ir_conv_direct(n);
  return (n->op == OP_LINEAR || n->op == OP_MATMUL) && !ir_gemm_gemv(n);
}

/* A strided data gradient by phases (docs/gpu.md, "The strided data
 * gradient by phases"): dx's pixels fall into sh x sw phases by (h % sh,
 * w % sw), and the taps whose window reaches a phase's pixels are fixed:
 * kh = fh + sh i, fh = (h % sh + ph) % sh, kw alike, and under pixel
 * (sh a + rh, sw b + rw) of phase (rh, rw) tap (i, j) finds dy's output
 * (a + qh - i, b + qw - j), qh = (rh + ph) / sh.  So each phase is a GEMM
 * over its own taps only, its columns its pixels: K up to
 * ceil(KH / sh) ceil(KW / sw) taps of Og channels, not KH KW taps of which
 * each column's element of dy is zero under all but those.  A 3 x 3 at
 * stride 2 multiplies 9 taps where it multiplied 36 (4 phases of 9); a
 * 1 x 1 one phase's, the other three phases' blocks write zeros.  Grid axis
 * z runs the groups' phases (ir_gemm_dims' Z: group z / P, phase z % P),
 * each block its phase's K; each phase has the first's ceil(H / sh) x
 * ceil(W / sw) columns, those past a side the stride does not divide
 * storing nothing.  Where: stride above 1, dilation 1, 8 or more input
 * channels a group and Og a multiple of 16 (each K tile one tap's
 * channels: ir_dgrad_tap_k).  Returns the phases sh sw, or 0. */
static inline int ir_dgrad_phases(const Node *n) {
  const Attrs *a = &n->a;
  if (n->op != OP_CONV2D_BWD_DATA || (a->stride[0] == 1 && a->stride[1] == 1) || a->dilation[0] != 1 ||
      a->dilation[1] != 1)
    return 0;
  const Shape *o = &n->out->shape, *dy = &n->in[0]->shape;
  if (o->d[1] / a->groups < 8 || dy->d[1] / a->groups % 16) return 0;
  return a->stride[0] * a->stride[1];
}
/* The most taps a phase of ir_dgrad_phases takes: ceil(KH / sh) ceil(KW / sw) */
static inline int64_t ir_dgrad_phase_taps(const Node *n) {
  const Attrs *a = &n->a;
  return (int64_t)((a->kernel[0] + a->stride[0] - 1) / a->stride[0]) * ((a->kernel[1] + a->stride[1] - 1) / a->stride[1]);
}

/* The GEMM a GEMM-like op is on ncc's own path (codegen/gemm.c): C[z][m][n]
 * = sum over k of A(z, m, k) B(z, k, n), z < Z.  conv2d: M output channels of
 * a group, N images x output pixels, K input channels of a group x kernel
 * taps, Z groups; linear: M rows, N outputs, K inputs; matmul: the last two
 * axes, Z the broadcast batch matrices; the gradient ops of ir_grad_gemm as
 * it says (a data gradient by phases, ir_dgrad_phases: Z the groups'
 * phases, N a phase's pixels, K its longest phase's). */
static inline void ir_gemm_dims(const Node *n, int64_t *M, int64_t *N, int64_t *K, int64_t *Z) {
  const Shape *o = &n->out->shape;
  if (n->op == OP_CONV2D_BWD_DATA) {   /* dy, weight -> dx */
    const Shape *w = &n->in[1]->shape;   /* [out, in/groups, kh, kw], or with wtap [in, kh, kw, out] */
    *Z = n->a.groups, *M = o->d[1] / n->a.groups, *N = o->d[0] * o->d[2] * o->d[3];
    *K = n->a.wtap ? w->d[1] * w->d[2] * w->d[3] : w->d[0] / n->a.groups * w->d[2] * w->d[3];
    int P = ir_dgrad_phases(n);
    if (P) {   /* Z the groups' phases, N a phase's pixels, K its most taps' channels */
      int sh = n->a.stride[0], sw = n->a.stride[1];
      *Z = n->a.groups * P, *N = o->d[0] * ((o->d[2] + sh - 1) / sh) * ((o->d[3] + sw - 1) / sw);
      *K = n->in[0]->shape.d[1] / n->a.groups * ir_dgrad_phase_taps(n);
    }
  } else if (n->op == OP_CONV2D_BWD_WEIGHT) {   /* dy, x -> dweight */
    const Shape *dy = &n->in[0]->shape;
    *Z = n->a.groups, *M = o->d[0] / n->a.groups, *N = o->d[1] * o->d[2] * o->d[3], *K = dy->d[0] * dy->d[2] * dy->d[3];
  } else if (n->op == OP_LINEAR_BWD_WEIGHT) {   /* dy[rows, O], x[rows, I] -> dweight[O, I] */
    *Z = 1, *M = o->d[0], *N = o->d[1], *K = n->in[0]->shape.d[0];
  } else if (n->op == OP_CONV2D) {
    const Shape *w = &n->in[1]->shape;
    *Z = n->a.groups, *M = o->d[1] / n->a.groups, *N = o->d[0] * o->d[2] * o->d[3], *K = w->d[1] * w->d[2] * w->d[3];
  } else if (n->op == OP_LINEAR) {
    *Z = 1, *M = o->d[0], *N = o->d[1], *K = n->in[1]->shape.d[1];
  } else {
    const Shape *a = &n->in[0]->shape, *b = &n->in[1]->shape;
    *M = a->rank == 1 ? 1 : a->d[a->rank - 2], *K = a->d[a->rank - 1], *N = b->rank == 1 ? 1 : b->d[b->rank - 1];
    *Z = shape_numel(o) / (*M * *N);
  }
}

/* Split-K (docs/gpu.md, "Split-K"): into how many K ranges the tiled GEMM of
 * this op is cut, 1 for none.  A GEMM whose 64 x 64 tiles number fewer than
 * half of IR_SPLITK_SMS (an H100's SMs) would leave most of the GPU idle:
 * grid axis z then also runs S ranges of K, each block adds its range's
 * products into a workspace, and a second kernel adds the S partial sums in
 * order and runs the bias and the epilogue.  S fills about IR_SPLITK_SMS
 * blocks, at most IR_SPLITK_MAX, each range at least IR_SPLITK_MIN_KTILES
 * K tiles of 16, and S is trimmed so that no range is empty.  Not for the
 * GEMV, a direct convolution, or a matmul whose batch matrices follow the
 * batch on grid axis z.  The gradients' GEMMs (ir_grad_gemm) split when K
 * is long, IR_GRAD_SPLIT_MIN_K or more (a weight gradient's K is the batch's
 * output pixels: VGG-16's first layers' 1.6 M at batch 32), and split
 * further: into enough ranges for IR_GRAD_SPLIT_BLOCKS blocks of 64 x 64
 * (8 a SM), at most IR_GRAD_SPLITK_MAX; they keep the 64 x 64 tile
 * (ir_tile_candidates).  One block a SM running a K of 25 088 had VGG-16's
 * fp16 weight gradients at 20 TFLOP/s or less on an H200; split so, its
 * training step went from 71.6 to 40.8 ms.  A shorter K runs in one range,
 * its second launch not worth it. */
#define IR_GRAD_SPLIT_MIN_K 4096
#define IR_GRAD_SPLIT_BLOCKS 1056
#define IR_GRAD_SPLITK_MAX 128
#define IR_SPLITK_SMS 132
#define IR_SPLITK_MAX 16
#define IR_SPLITK_MIN_KTILES 4
static inline int ir_grad_split(const Node *n) {   /* a gradient GEMM long enough to split */
  int64_t M, N, K, Z;
  if (!ir_grad_gemm(n)) return 0;
  ir_gemm_dims(n, &M, &N, &K, &Z);
  return K >= IR_GRAD_SPLIT_MIN_K;
}
static inline int ir_gemm_split_k(const Node *n) {
  int64_t M, N, K, Z;
  if (n->prec == PREC_INT8) return 1;   /* partial sums would leave int32 for float32 */
  int grad = ir_grad_gemm(n);
  if (grad) {
    if (!ir_grad_split(n)) return 1;
  } else if (n->op == OP_CONV2D ? ir_conv_direct(n) : (n->op != OP_LINEAR && n->op != OP_MATMUL) || ir_gemm_gemv(n)) {
    return 1;
  } else if (n->op == OP_MATMUL && n->out->shape.rank >= 3) {
    return 1;
  }
  ir_gemm_dims(n, &M, &N, &K, &Z);
  int64_t tiles = (M + 63) / 64 * ((N + 63) / 64) * Z, nk = (K + 15) / 16;
  int64_t want = grad ? IR_GRAD_SPLIT_BLOCKS : IR_SPLITK_SMS, most = grad ? IR_GRAD_SPLITK_MAX : IR_SPLITK_MAX;
  if (grad ? tiles >= want : 2 * tiles > want) return 1;
  int64_t s = (want + tiles - 1) / tiles;
  if (s > most) s = most;
  if (s > nk / IR_SPLITK_MIN_KTILES) s = nk / IR_SPLITK_MIN_KTILES;
  if (s < 2 || Z * s > 65535) return 1;
  int64_t t = (nk + s - 1) / s;   /* K tiles a range */
  return (int)((nk + t - 1) / t);
}
/* The K extent of each range of a split GEMM (the last one may be shorter) */
static inline int64_t ir_gemm_split_span(const Node *n) {
  int64_t M, N, K, Z, s = ir_gemm_split_k(n), nk;
  ir_gemm_dims(n, &M, &N, &K, &Z);
  nk = (K + 15) / 16;
  return (nk + s - 1) / s * 16;
}

/* Split reductions (docs/gpu.md, "Split reductions"): the ops whose every
 * output is a sum over many elements, rendered one block of 256 threads an
 * output (codegen/backward.c, reduce_out): sum_to (the bias gradients),
 * bn_bwd_weight in a kernel of its own, layernorm_bwd_weight, and the
 * weight gradients that are no GEMM (!ir_grad_gemm: depthwise convolutions,
 * linears of fewer than 8 outputs).  ir_reduce_len: the elements an output
 * sums (its K), 0 for every other op. */
static inline int64_t ir_reduce_len(const Node *n) {
  switch (n->op) {
  case OP_SUM_TO:
  case OP_BN_BWD_WEIGHT:
  case OP_LAYERNORM_BWD_WEIGHT: return shape_numel(&n->in[0]->shape) / shape_numel(&n->out->shape);
  case OP_CONV2D_BWD_WEIGHT:
  case OP_LINEAR_BWD_WEIGHT: return ir_grad_gemm(n) ? 0 : shape_numel(&n->in[0]->shape) / n->in[0]->shape.d[1];
  default: return 0;
  }
}
/* Into how many ranges such a reduction is cut, 1 for none.  Few outputs
 * are few blocks: VGG-16's first bias gradients are 64 blocks, each summing
 * 1.6 M elements at batch 32, on a GPU of 132 SMs (the H200 timed them at
 * 3.1 times the report's model).  Split, grid axis y runs S ranges of the
 * sum, each block writes its range's sum to the workspace, and a second
 * kernel adds the S sums in order (the result does not depend on the GPU
 * or the launch: no atomics) and runs the epilogue.  S fills about
 * IR_REDUCE_SPLIT_BLOCKS blocks (8 of 256 threads an SM of 132), each range
 * at least IR_REDUCE_SPLIT_MIN elements (32 a thread), at most
 * IR_REDUCE_SPLIT_MAX ranges, trimmed so that no range is empty. */
#define IR_REDUCE_SPLIT_BLOCKS 1056
#define IR_REDUCE_SPLIT_MIN 8192
#define IR_REDUCE_SPLIT_MAX 64
/* The ranges for nout outputs each summing R elements (the rule above) */
static inline int ir_split_ranges(int64_t R, int64_t nout) {
  if (R <= 64 || nout >= IR_REDUCE_SPLIT_BLOCKS) return 1;   /* R <= 64: a thread an output, no blocks to fill */
  int64_t s = (IR_REDUCE_SPLIT_BLOCKS + nout - 1) / nout;
  if (s > R / IR_REDUCE_SPLIT_MIN) s = R / IR_REDUCE_SPLIT_MIN;
  if (s > IR_REDUCE_SPLIT_MAX) s = IR_REDUCE_SPLIT_MAX;
  if (s < 2) return 1;
  int64_t span = (R + s - 1) / s;
  return (int)((R + span - 1) / span);
}
static inline int ir_reduce_split(const Node *n) {
  int64_t R = ir_reduce_len(n);
  return R ? ir_split_ranges(R, shape_numel(&n->out->shape)) : 1;
}
/* The elements each range of a split reduction sums (the last may sum fewer) */
static inline int64_t ir_reduce_split_span(const Node *n) {
  int64_t R = ir_reduce_len(n), s = ir_reduce_split(n);
  return (R + s - 1) / s;
}
/* layernorm_bwd_weight's rows (of its input x, in[1]), and its workspace: a
 * split's range sums first (ir_reduce_split), then each row's (mean, rstd)
 * from ir_ln_stats_offset on (in floats), which a first kernel writes */
static inline int64_t ir_ln_rows(const Node *n) {
  const Shape *xs = &n->in[1]->shape;
  return shape_numel(xs) / xs->d[xs->rank - 1];
}
static inline int64_t ir_ln_stats_offset(const Node *n) {
  int S = ir_reduce_split(n);
  return S > 1 ? (int64_t)S * shape_numel(&n->out->shape) : 0;
}
/* Batchnorm's per-channel kernels in training, bn_stats (the mean and
 * variance) and bn_bwd_data (the sums of dy and dy * (x - mean), then dx),
 * one block a channel, split by the same rule over the channel's
 * images x pixels (docs/gpu.md, "Split reductions"): bn_stats's blocks
 * write each range's mean and sum of squared deviations, a second kernel
 * combines them in order; bn_bwd_data's first kernel writes each range's
 * two sums, its second adds them in order in every block and computes dx
 * for its range.  ir_bn_len: a channel's elements, 0 for other ops. */
static inline int64_t ir_bn_len(const Node *n) {
  if (n->op != OP_BN_STATS && n->op != OP_BN_BWD_DATA) return 0;
  const Shape *xs = &n->in[n->op == OP_BN_BWD_DATA]->shape;
  return shape_numel(xs) / xs->d[1];
}
static inline int ir_bn_split(const Node *n) {
  int64_t R = ir_bn_len(n);
  return R ? ir_split_ranges(R, n->in[n->op == OP_BN_BWD_DATA]->shape.d[1]) : 1;
}
static inline int64_t ir_bn_split_span(const Node *n) {
  int64_t R = ir_bn_len(n), s = ir_bn_split(n);
  return (R + s - 1) / s;
}

/* The tensor-core GEMM's tile (ir/tile.c; docs/gpu.md, "Tile choice"):
 * BM x BN outputs a block of `threads` threads, WM x WN warps; minb: the
 * resident blocks an SM its kernel asks ptxas for (__launch_bounds__(threads,
 * minb); 0: no bound); regs_conv, regs_gemm: the registers a thread the
 * model assumes for a convolution and for the other GEMMs (ptxas's figures
 * for the generated kernels; ir_tile_regs).  ir_mma_tiles[IR_TILE_64x64] and those before it are the
 * defaults by shape (ir_tile_default); those after it the larger tiles the
 * model may choose. */
typedef struct IrTile { int BM, BN, WM, WN, threads, minb, regs_conv, regs_gemm; } IrTile;
enum { IR_TILE_64x64 = 5, IR_TILE_64x128 = 7, IR_TILE_128x128 = 8, IR_NTILES = 9 };
extern const IrTile ir_mma_tiles[IR_NTILES];
/* The occupancy rules (cuda_occupancy.h's, as the report applies them):
 * resident blocks an SM, and which limit binds ('t' threads, 'b' blocks,
 * 'r' registers, 's' shared memory); per_sm 0: the block does not fit. */
typedef struct IrMachine { int sms, threads_sm, blocks_sm, smem_sm; } IrMachine;
typedef struct IrOcc { int per_sm; char limit; } IrOcc;
enum { IR_OCC_REGS_SM = 65536, IR_OCC_REG_UNIT = 256, IR_OCC_SMEM_UNIT = 128, IR_OCC_SMEM_RESERVED = 1024,
       IR_OCC_SMEM_STATIC_MAX = 48 * 1024 };
IrOcc ir_occupancy(const IrMachine *a, int threads, int regs, int64_t smem_static, int64_t smem_dyn);
extern const IrMachine ir_tile_machine;   /* the tile model's machine: an H100's 132 SMs */
/* The model's constants (warp instructions: a staged element /32, a MMA with its
 * fragment loads), and how much faster a larger tile must model to be chosen */
#define IR_TILE_STAGE 9.0
#define IR_TILE_MMA 2.0
#define IR_TILE_MARGIN 0.9
#define IR_TILE_HIDE_WARPS 8.0   /* warps an SM needs at once to issue every cycle (the model's assumption) */
typedef struct IrTileEst {
  int64_t blocks, per_sm;   /* blocks launched; blocks the busiest SM runs */
  int resident;             /* blocks an SM holds at once (ir_occupancy) */
  char limit;
  double waves, cycles;     /* blocks / (SMs x resident); the modeled time */
} IrTileEst;
int ir_tile_default(int64_t M, int64_t N);            /* index of the default tile of an M x N GEMM */
int ir_tile_lookup(const char *s);                    /* "128x64" -> its index; -1: none */
double ir_tile_model(const Node *n, int t, IrTileEst *e);   /* the modeled cycles of tile t for n */
/* The tile of tensor-core GEMM n: `forced` (an index) when >= 0, else the
 * model's least time (a larger tile only when it models IR_TILE_MARGIN of
 * the default or less; the default for a split-K GEMM); why: one line */
int ir_tile_choose(const Node *n, int forced, char *why, size_t nwhy);
IrTile ir_gemm_tile(const Node *n);                   /* the tile codegen renders (Node.tile, else the default) */
/* The tiles worth trying for n: the default first, then the larger ones the
 * model may choose (none for a split-K GEMM); returns their count */
int ir_tile_candidates(const Node *n, int out[IR_NTILES]);
/* The GEMM's shape as autotuning keys it: precision, op and every dimension
 * that shapes its kernel ("fp16 conv2d x=32x64x56x56 w=64x64x3x3 s=1x1 p=1x1
 * d=1x1 g=1"); 0, or -1 when it does not fit */
int ir_gemm_key(const Node *n, char *buf, size_t len);
/* --autotune's choices by ir_gemm_key (driver/autotune.c fills it) */
typedef struct TuneEntry {
  char key[256];
  int tile;       /* an index in ir_mma_tiles (a float32 GEMM's: IR_TILE_64x64, the default by shape, 64x128 or
                     128x128) */
  int stages;     /* a float32 GEMM's stages (1, or 2: Node.pipe); 0 for a tensor-core GEMM's entry */
  char why[256];
} TuneEntry;
typedef struct TuneTable { TuneEntry *e; int n; } TuneTable;
int ir_tile_regs(const Node *n, const IrTile *t);
/* The float32 (CUDA-core) tiled GEMM's wider tiles, read from shared memory
 * four floats a load (codegen/gemm.c, tiled; docs/gpu.md, "The float32
 * GEMM's wide tile"): 128 x 128 outputs a block of 256 threads, 8 x 8 a
 * thread, and 64 x 128, 4 x 8 a thread, in place of the 64 x 64 default (4
 * x 4 a thread).  For a forward conv2d, linear or matmul on the tiled path
 * (not a GEMV, a direct convolution, cuBLAS or split-K): 128 x 128 where M
 * and N are at least 128 and its tiles fill every SM of ir_tile_machine
 * twice (IR_FP32_WIDE_BLOCKS); else 64 x 128 where M is at least 64, N at
 * least 128 and its tiles fill them twice; else the default by shape.
 * forced: an index in ir_mma_tiles from --gemm-tile (IR_TILE_64x64 the
 * default, IR_TILE_64x128, IR_TILE_128x128), -1 the rule.
 * passes_fp32_tiles records it (Node.tile = 1 + the index; 0 the default);
 * why: one line.  Returns the tile's index. */
#define IR_FP32_WIDE_BLOCKS (2 * 132)
/* The float32 tiled GEMM's default tile along a dimension of d: 16, 32 or 64 rows (columns) */
static inline int ir_fp32_tile_dim(int64_t d) { return d >= 64 ? 64 : d >= 32 ? 32 : 16; }
int ir_fp32_tile_choose(const Node *n, int forced, char *why, size_t nwhy);
int ir_fp32_tiled(const Node *n);   /* a float32 GEMM the tiled kernel runs (the wide tile's candidates) */
static inline int ir_fp32_wide(const Node *n) { return n->prec == PREC_FP32 && n->tile == 1 + IR_TILE_128x128; }
/* A float32 tiled GEMM's tile: IR_TILE_128x128, IR_TILE_64x128, or IR_TILE_64x64 for the default by shape */
static inline int ir_fp32_tile(const Node *n) {
  return n->prec == PREC_FP32 && (n->tile == 1 + IR_TILE_128x128 || n->tile == 1 + IR_TILE_64x128) ? n->tile - 1
                                                                                                    : IR_TILE_64x64;
}
/* The float32 tiled GEMMs that can be double-buffered (Node.pipe = 2; codegen/gemm.c, tiled; docs/gpu.md,
 * "The float32 GEMM double-buffered"): a forward conv2d, linear or matmul on the tiled path whose tile
 * reads four floats a load (the wider ones, or the default where M and N are at least 64).  With
 * --gemm-pipeline=on passes_fp32_tiles gives the 128 x 128 ones two stages (ir_fp32_two_stages), every
 * one with --gemm-stages=2 at fp32, or --autotune's choice.  The smaller tiles (16 or 32 rows or columns) keep one stage. */
int ir_fp32_pipe_ok(const Node *n);
/* --autotune's configurations of a float32 tiled GEMM (ir_fp32_tiled): tile[i] (IR_TILE_64x64, the
 * default by shape, IR_TILE_64x128 or IR_TILE_128x128) with stages[i] (1 or 2); the first is the default
 * tile in one stage (the reference bits); two stages only where pipe (--gemm-pipeline=on) and the tile
 * reads four floats a load; 64 x 128 only where M is at least 64, N at least 128 and K is not split,
 * 128 x 128 where M is at least 128 too.  Returns the count (at most 6); *pick: the index
 * passes_fp32_tiles would choose without a trial (stages2: --gemm-stages=2 at fp32). */
int ir_fp32_candidates(const Node *n, int pipe, int stages2, int tile[6], int stages[6], int *pick);
/* Whether passes_fp32_tiles gives float32 tile t (an index in ir_mma_tiles) two stages by default
 * (--gemm-pipeline=on; stages2: --gemm-stages=2 at fp32, every tile that reads four floats a load) */
int ir_fp32_two_stages(int t, int stages2);
/* The blocks an SM the kernel's __launch_bounds__ asks for (0: none): the
 * tile's minb, and 2 for a convolution's weight gradient at 256 threads,
 * whose B columns' registers (codegen/gemm.c, wgrad_tile) would pass the
 * 128 that ir_tile_regs counts (ResNet-18 at tf32, sm_90: 130, one block an
 * SM; bounded: 128, no spill) */
int ir_tile_minb(const Node *n, const IrTile *t);
/* A convolution's weight gradient with its columns tap-major: the GEMM's
 * column n is (tap, ci) = (n / Cg, n % Cg), not (ci, tap), where the tile's
 * BN columns divide the group's Cg input channels, so that every tile's
 * columns are one tap's channels.  Its B tile (codegen/gemm.c,
 * wgrad_tile_taps) then makes a window's padding test once a K tile for all
 * of a thread's columns, which lie a constant stride apart in x (a
 * channel's plane): no per-column registers, the offsets immediates.  Returns BN
 * (the tensor-core tile's, else the CUDA-core tile's: 64, 32 or 16 by N),
 * or 0 where the columns stay (ci, tap) */
int ir_wgrad_tap_cols(const Node *n);
/* A convolution's data gradient (conv2d_bwd_data's GEMM) with its K
 * tap-major: k is (tap, co) = (k / Og, k % Og), not (co, tap), where the
 * kernel has more than one tap and the group's Og output channels are a
 * multiple of the K tile (16), so that every K tile is one tap's channels;
 * always where it runs by phases (ir_dgrad_phases: k a phase's tap and
 * channel, a 1x1's too).
 * Its B tile (codegen/gemm.c, dgrad_tile_taps) then finds a thread's
 * element of dy (the stride's divisibility, the bounds) once a K tile for
 * all of its k, which lie a constant stride apart (a channel's plane of
 * dy).  A 1x1 one's gather is as short already: so its main loop took 5
 * instructions more (ResNet-18's strided 1x1 at fp16, sm_90). */
int ir_dgrad_tap_k(const Node *n);
/* The pipelined tiles' shared memory (codegen/gemm.c, async_tile): a row of a
 * staged tile is 16 k of 16 bits or int8 padded to 48 bytes (tf32: 16
 * floats padded to 80), a stage both tiles' rows (an upper bound: a k-major
 * B tile takes less); the precision pass gives a GEMM at most the stages
 * (--gemm-stages) that fit IR_PIPE_SMEM, below the 48 KiB a block's static
 * shared memory may take */
enum { IR_PIPE_ROW_BYTES = 48, IR_PIPE_ROW_BYTES_TF32 = 80, IR_PIPE_SMEM = 40 * 1024, IR_PIPE_MAX_STAGES = 4 };
int64_t ir_pipe_smem(const IrTile *t, int stages, int prec);   /* the bytes of `stages` stages of both tiles at prec */
int ir_pipe_stages(const IrTile *t, int want, int prec);       /* want (2..4), fewer where they pass IR_PIPE_SMEM; at least 2 */
const char *ir_tile_why(const Node *n, char *why, size_t nwhy);   /* why n has its tile (Node.tile), one line */     /* the registers the model assumes for n's kernel at tile t */

/* Storage classes of values (Liveness.kind). */
enum {
  LV_NONE,    /* no bytes: not needed, or kept in registers inside a kernel group */
  LV_VIEW,    /* the bytes of another value (Liveness.root) */
  LV_PARAM,   /* a parameter or constant: persistent, filled by the host */
  LV_LOAD,    /* stored by a load-time group and read per inference: persistent (one
                 that only load-time groups read is LV_ACT: scratch, dead after them) */
  LV_INPUT,   /* a graph input a needed node reads: written before the kernels run */
  LV_ACT,     /* stored by a per-inference kernel group (or load-time scratch, above) */
  LV_GRAD,    /* a parameter's gradient (Value.grad_of): persistent, in the gradient
                 region at the parameter's place; never shares bytes */
};
/* Lifetimes over the launch order: position 0 is the upload of the inputs,
 * group k runs at position k + 1, position `end` (= ngroups + 1) is the read
 * back of the outputs.  A value is live from the position that writes it to
 * the last that reads it, both inclusive (a kernel's output never shares bytes
 * with its inputs, except in place: see plan.c).  Inputs and outputs are live
 * to the end. */
typedef struct Liveness {
  int ngroups, end;
  unsigned char *need;     /* by node id */
  int *gid;                /* by node id: group (ir_schedule) */
  unsigned char *role;     /* by node id */
  Node **main;             /* by group: its main node */
  Value **stored;          /* by group: the value its chain stores (its last main or
                              epilogue node's; side nodes store their own besides) */
  Value **root;            /* by value id: ir_view_root of needed values */
  unsigned char *kind;     /* by value id: LV_* */
  int *first, *last;       /* by value id, for LV_INPUT and LV_ACT: lifetime */
  int *readers;            /* by value id: needed nodes reading it (each once), through views */
  int nvalues;             /* g->next_value_id: size of the by-value arrays */
} Liveness;
/* How many launch positions either side of a side-stream group its operands
 * and values keep their bytes (ir_liveness, passes/streams.c) */
#define IR_STREAM_REACH 3
void ir_liveness(const Graph *g, int train, Liveness *lv);
void ir_liveness_free(Liveness *lv);
/* May group k store its value in the bytes of a, which dies in group k?  Only
 * where its kernel reads a at the index it writes and nowhere else (an
 * elementwise or batchnorm2d main; a read with the output's element count),
 * so that every element is read before the same thread overwrites it. */
int ir_inplace_ok(const Graph *g, const Liveness *lv, int k, const Value *a);
/* Bytes a stored value takes in a region: its size rounded up to 256. */
int64_t ir_slot_bytes(const Value *v);

void ir_print(Graph *g, FILE *f);      /* --emit=ir */
void ir_print_dot(Graph *g, FILE *f);  /* --emit=dot */

/* Output size of a convolution/pooling window along one axis. */
static inline int64_t ir_window_out(int64_t in, int k, int s, int p, int dil) {
  return (in + 2 * (int64_t)p - (int64_t)dil * (k - 1) - 1) / s + 1;
}

#endif
