/* passes.h — every pass has one signature; pipeline.c lists the pipelines.
 * A pass returns 0, or -1 after reporting a user error through diag.
 * With PassCtx.verbose (-v) each pass prints one line of statistics to
 * stderr ("pass NAME: ..."), and fuse one line per edge it left unfused. */
#ifndef NCC_PASSES_H
#define NCC_PASSES_H
#include "../ir/ir.h"

typedef struct PassCtx {
  int train;          /* building a training step (autodiff etc.), else inference */
  int opt_level;      /* -O0..-O3 */
  int verify;         /* run ir_verify after each pass */
  const char *print_after;  /* pass name, "all", or NULL */
  int verbose;        /* -v: each pass prints its statistics to stderr */
  int cublas;         /* the GEMMs go to cuBLAS (--cublas): they read their operands from memory */
  int precision;      /* PREC_* (--precision): the precision pass's policy */
  double loss_scale;  /* fp16 training: the initial loss scale (--loss-scale; 0: GradScaler's 65536) */
  int gemm_tile;      /* --gemm-tile: 1 + the index in ir_mma_tiles every tensor-core GEMM takes; 0: the model's choice */
  int gemm_pipe;      /* --gemm-pipeline=on: fp16/bf16/int8 GEMMs stage their operands with cp.async and ldmatrix (Node.pipe) */
  int gemm_stages;    /* --gemm-stages: the stages of those copies (2..4; 0: 2) */
  int streams;        /* --streams=on (the driver's default): the streams pass puts groups off the longest
                         chain on the side stream; 0: it leaves every group on stream 0 */
  const TuneTable *tune;  /* --autotune: tiles by ir_gemm_key (before the model; after --gemm-tile); NULL: none */
  const QuantTable *quant;
  /* int8: the calibration (activation scales, per-layer choice); NULL: none */
} PassCtx;

typedef int (*PassFn)(Graph *g, PassCtx *c);
typedef struct Pass { const char *name; PassFn fn; const char *brief; } Pass;

/* Runs `list` (comma-separated pass names) or, when NULL, the pipeline of
 * c->opt_level.  An unknown pass name is a user error. */
int passes_run(Graph *g, PassCtx *c, const char *list);
const Pass *pass_lookup(const char *name);
/* The -O levels and the passes, for `ncc --help`. */
void passes_usage(FILE *f);

int pass_autodiff(Graph *g, PassCtx *c); /* training: the training forward, the backward graph and the updates (autodiff.c) */
int pass_prune(Graph *g, PassCtx *c);   /* inference: drop train-only identities (dropout), unneeded nodes */
int pass_fold(Graph *g, PassCtx *c);    /* constant folding; inference batchnorm folded, its parameter arithmetic at load time (fold.c) */
int pass_fuse(Graph *g, PassCtx *c);    /* kernel groups by named rules (fuse.c) */
int pass_plan(Graph *g, PassCtx *c);    /* memory plan: offsets of stored values (plan.c) */
int pass_batch(Graph *g, PassCtx *c);   /* inference: values whose rows follow the batch; Graph.max_batch (batch.c) */
int pass_precision(Graph *g, PassCtx *c);  /* the math precision of each op from --precision (precision.c) */
void passes_fp32_tiles(Graph *g, const PassCtx *c);   /* float32 tiled GEMMs' tiles, after any pipeline (precision.c) */
int pass_streams(Graph *g, PassCtx *c);    /* groups off the longest chain on the side stream (streams.c) */
/* Before fuse, with streams on, in inference: where an elementwise node reads
 * two branches that each have a GEMM, the lighter branch is computed first
 * (streams.c).  Returns how many branches moved. */
int passes_branches_first(Graph *g, int verbose);
int pass_storage(Graph *g, PassCtx *c);    /* fp16/bf16/int8: values only rounding (quantizing) GEMMs read stored narrow (storage.c) */

/* Graph edits the passes share (fold.c): every reader of `old` (nodes,
 * outputs, losses, the minimised value) reads `new_`, use counts kept; and
 * the nodes put back in a topological order after nodes were appended (an
 * appended node goes before its first reader). */
void passes_replace_uses(Graph *g, Value *old, Value *new_);
void passes_reorder(Graph *g);
/* sources, then load-time nodes, then the rest, each in its order (fold.c) */
void passes_load_time_first(Graph *g);
/* Nodes a pass builds beside `like` (its layer and source position), that
 * cannot fail (their shapes hold by construction; a refusal is ncc's bug):
 * op on a (and b), load_time as given; a scalar constant (an equal one is
 * shared); x viewed as `rank` dims with its elements along dimension `at`
 * and 1 elsewhere (a load-time reshape: a channel's scale beside [N, C, ...]). */
Value *passes_mk(Graph *g, OpKind op, Value *a, Value *b, const Attrs *at, const Node *like, int load_time);
Value *passes_const(Graph *g, double f, const Node *like);
Value *passes_channel_view(Graph *g, Value *x, int rank, int at, const Node *like);

/* The fusion rules (fuse.c), for documentation and tests: i in [0, count). */
int fuse_rule_count(void);
const char *fuse_rule_name(int i);
const char *fuse_rule_brief(int i);
int fuse_rule_level(int i);
#endif
