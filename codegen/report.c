/* report.c — `ncc --emit=report`: what the compiled model costs.
 *
 * One row per kernel, in launch order: the ops it fuses ("conv2d+relu";
 * "[gemv]", "[direct]" or "[mma BMxBN]" (its tile) after them where a GEMM-like op gets the
 * GEMV, the direct convolution or the tensor-core GEMM rather than the
 * CUDA-core tiled GEMM, "[per-window]" where a max pooling's gradient runs a
 * thread a window (ir_pool_tiles), "[per-band]" where it runs a block a band
 * of rows (ir_pool_band_rows), "taps" where a convolution's gradient takes
 * one tap a tile (ir_wgrad_tap_cols, ir_dgrad_tap_k), "phases P" where a
 * strided data gradient runs by phases (ir_dgrad_phases), and "split-K S" where
 * its K is cut into S ranges (ir_gemm_split_k: a second kernel adds them, a second launch in the
 * total; a split reduction's ranges too, ir_reduce_split; a comment line
 * before the table explains the marks present: marks_legend), the
 * layer, the shape it stores, the parameters it reads, FLOPs, bytes moved,
 * the activation it writes, a modeled time on --arch (the roofline over the
 * share of the SMs the kernel's waves keep busy) and its blocks, resident
 * blocks per SM and waves, from the launch geometry codegen renders
 * (cg_launch_geometry; docs/gpu.md, "The report's time model").  Kernels are the
 * fuse pass's groups as codegen reads them (group.c), and memory is the plan
 * pass's plan as codegen emits it, so the report describes exactly the code
 * that is generated.
 * Then human summary lines and, last, the one machine-readable line tools and
 * tests parse (docs/architecture.md):
 *   total: params=P flops=F launches=L bytes=B peak_memory=M naive_memory=U
 *
 * Conventions (chosen to match how the published model figures are counted):
 *   - params: numel of every PARAM except BatchNorm running statistics — the
 *     count of torch's `sum(p.numel() for p in m.parameters())`, which leaves
 *     buffers out.  Torchvision's 25,557,032 for ResNet-50 is that count.
 *   - FLOPs: 2 per multiply-add in conv/linear/matmul (+1 per bias add); one
 *     per element for elementwise ops, transcendental or not (tinygrad's
 *     habit: a roofline, not a cycle count); pooling one per window element;
 *     normalisation and softmax a few per element (constants below).
 *   - multiply-adds: conv/linear/matmul only — the figure torchvision and
 *     fvcore publish as "GFLOPS" (4.09 G for ResNet-50, 15.47 G for VGG-16).
 *   - launches: kernels launched per inference: one a kernel group, two for
 *     a split-K GEMM (ir_gemm_split_k: the ranges, then their sum) or split
 *     reduction (ir_reduce_split: a bias gradient of few channels), for
 *     layernorm_bwd_weight (the rows' statistics first) and for
 *     the update of an fp16 training step (the unscale kernel first).  Sources, views
 *     (flatten/reshape alias their input's bytes) and train-only identities
 *     form none; load-time groups (computed once after the weights load)
 *     are listed apart and not counted.
 *   - bytes: every kernel reads each tensor it takes from outside the group
 *     once and writes the value the group stores once; values inside a
 *     fused group never reach memory.  A training step's update also reads
 *     and writes the parameters and the optimizer's state (ir_opt_states),
 *     which its inputs (the gradients) do not name; a split kernel writes
 *     and reads back its workspace.
 *   - naive_memory: the inputs-and-activations region of the arena with no
 *     sharing: every graph input and every value a kernel group stores in its
 *     own 256-byte-aligned range (views own no bytes; weights and load-time
 *     values are not activations).
 *   - peak_memory: the size of that region as planned (Graph.act_bytes, the
 *     plan pass): exactly the bytes the generated code allocates for inputs
 *     and activations.  Without the plan pass (-O0) it equals naive_memory. */
#include <stdlib.h>
#include <string.h>

#include "cg.h"

/* Per-element FLOP estimates of the non-GEMM ops (documented above). */
enum {
  FL_BN_INFER = 2,      /* y = x*scale + shift after folding */
  FL_BN_TRAIN = 7,      /* mean, variance, normalise, affine */
  FL_LAYERNORM = 8,     /* mean, variance, normalise, affine */
  FL_SOFTMAX = 5,       /* max, subtract, exp, sum, divide */
  FL_XENT = 6,          /* log-softmax + pick + mean */
  FL_MSE = 3,           /* subtract, square, sum */
};

typedef struct Arch {
  const char *name;
  double flops, flops16, ops8, bw, launch_us;
  int sms, threads_sm, blocks_sm, smem_sm;   /* the occupancy model's machine (below) */
} Arch;
/* Dense peaks of the reference parts (vendor data sheets): fp32 on CUDA
 * cores; fp16/bf16 and int8 on tensor cores (what cuBLAS reaches for GEMMs;
 * elementwise kernels are bandwidth-bound either way); HBM/GDDR bandwidth.
 * A100-SXM4, RTX A6000-class GA102, L40-class AD102, H100-SXM5.  Launch
 * overhead ~3 us.  Then the SMs of those parts and, per SM, the most
 * resident threads and blocks and the shared memory (the CUDA programming
 * guide's table of compute capabilities; 64K 32-bit registers on all). */
static const Arch arches[] = {
  {"sm_80", 19.5e12, 312e12, 624e12, 1.555e12, 3.0, 108, 2048, 32, 164 * 1024},
  {"sm_86", 38.7e12, 155e12, 310e12, 0.768e12, 3.0, 84, 1536, 16, 100 * 1024},
  {"sm_89", 90.5e12, 181e12, 362e12, 0.864e12, 3.0, 142, 1536, 24, 100 * 1024},
  {"sm_90", 67.0e12, 989e12, 1979e12, 3.35e12, 3.0, 132, 2048, 32, 228 * 1024},
};

/* Peak for a kernel computing in dtype t. */
static double arch_peak(const Arch *a, DType t) {
  switch (t) {
  case DT_F16:
  case DT_BF16: return a->flops16;
  case DT_I8: return a->ops8;
  default: return a->flops;
  }
}

static const Arch *arch_lookup(const char *name) {
  /* --arch may be a list ("sm_80,sm_90"): model the first one. */
  for (size_t i = 0; name && i < sizeof arches / sizeof arches[0]; i++)
    if (!strncmp(name, arches[i].name, 5)) return &arches[i];
  return &arches[3];
}

static int64_t vbytes(const Value *v) { return ir_value_bytes(v); }

/* ---- the occupancy and waves model (docs/gpu.md, "The report's time model") ----
 * A kernel's launch geometry is codegen's own (cg_launch_geometry: the grid,
 * block and shared memory cg_launch_b renders).  Resident blocks per SM follow
 * cuda_occupancy.h's rules (as tests/cg/sass_report.py applies them): the
 * least of the thread limit (t), the block limit (b), the register limit (r:
 * registers a warp rounded up to 256, warps per SM allotted in fours across
 * the SM's four partitions) and the shared-memory limit (s: a block's static
 * and dynamic bytes plus 1 KiB the system reserves, in 128-byte units; at
 * most 48 KiB static and, with the opt-in attribute, the SM's bytes less that
 * 1 KiB in all).  Registers a thread are an estimate by kernel kind
 * (regs_estimate), since no ptxas runs at report time. */
typedef IrOcc Occ;

static Occ occupancy(const Arch *a, int threads, int regs, int64_t smem_static, int64_t smem_dyn) {
  IrMachine m = {a->sms, a->threads_sm, a->blocks_sm, a->smem_sm};
  return ir_occupancy(&m, threads, regs, smem_static, smem_dyn);
}

int report_blocks_per_sm(const char *arch, int threads, int regs, size_t smem_static, size_t smem_dyn, char *limit) {
  Occ o = occupancy(arch_lookup(arch), threads, regs, (int64_t)smem_static, (int64_t)smem_dyn);
  if (limit) *limit = o.limit;
  return o.per_sm;
}

/* Registers a thread the model assumes for the kernels of a group, by kind:
 * ptxas's counts for the generated kernels (nvcc 13, sm_80 and sm_90; docs/gpu.md
 * has the table they come from) rounded up to a multiple of 8.  A kind not
 * listed gets the tiled GEMM's figure. */
enum { REGS_TILED = 56, REGS_WIDE = 120, REGS_GEMV = 32, REGS_DIRECT = 24, REGS_OTHER = 32 };
/* the float32 tiles double-buffered (Node.pipe, ir_fp32_pipe_ok): ptxas 55 to 64 (64 x 64) and 122 to 127 (wide),
 * sm_80 and sm_90, ResNet-50 and VGG-16 at batch 32 and sass.fp32_wide */
enum { REGS_TILED_2ST = 64, REGS_WIDE_2ST = 128 };
/* the float32 64 x 128 tile: ptxas 64 to 72 (96 and 104 in VGG-16's first layer, whose K of 27 it unrolls), two
 * stages 80 to 92 (114), sm_80 and sm_90, ResNet-50 and VGG-16 at batch 32 */
enum { REGS_W64 = 72, REGS_W64_2ST = 96 };
static int regs_estimate(const KGroup *gr, int cublas);

/* The fraction of the machine a launch of `blocks` blocks, `per_sm` resident
 * on each of the arch's SMs, keeps busy: waves = blocks / (SMs x per_sm); up
 * to one wave, the SMs that get a block (blocks / SMs, at most 1); beyond,
 * waves / ceil(waves), the last wave's idle SMs (the tail).  The modeled time
 * is the roofline time divided by it. */
static double machine_share(const Arch *a, int64_t blocks, int per_sm, double *waves) {
  double w = (double)blocks / ((double)a->sms * per_sm);
  *waves = w;
  if (w <= 1) return blocks >= a->sms ? 1.0 : (double)blocks / a->sms;
  double full = (double)(int64_t)w;   /* ceil(w), without libm */
  return w / (full < w ? full + 1 : full);
}

static int is_param_counted(const Node *n) {
  return n->op == OP_PARAM && n->param_kind != PK_RUNNING_MEAN && n->param_kind != PK_RUNNING_VAR;
}

/* Saturating arithmetic: shapes are bounded (2^40 elements) but products of
 * them (MACs of a huge matmul) need not fit in 64 bits; a report of a silly
 * model says INT64_MAX rather than overflowing. */
static int64_t mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}
static int64_t add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

/* ---- the COST column of ops.def: cost_<name>(node, train) ----------------
 * FLOPs as documented at the top; `macs` only for conv/linear/matmul. */
typedef struct Cost { int64_t flops, macs; } Cost;

static int64_t out_numel(const Node *n) { return shape_numel(&n->out->shape); }
static int64_t in0_numel(const Node *n) { return shape_numel(&n->in[0]->shape); }
/* The kernel a GEMM-like main node gets where it is not the tiled GEMM (on
 * the default path; --cublas calls cuBLAS instead): "gemv" for a linear or
 * matmul with few rows (ir_gemm_gemv), "direct" for a convolution with few
 * output channels per group (ir_conv_direct), "mma" for the tensor-core GEMM
 * (ir_gemm_mma); "per-window" for a maxpool2d_bwd whose windows tile its
 * input (ir_pool_tiles), "per-band" for another one that runs a block a
 * band of its input's rows (ir_pool_band_rows); NULL otherwise. */
static const char *kernel_form(const Node *n) {
  if ((n->op == OP_LINEAR || n->op == OP_MATMUL) && ir_gemm_gemv(n)) return "gemv";
  if (n->op == OP_CONV2D && ir_conv_direct(n)) return "direct";
  if (ir_pool_tiles(n)) return "per-window";   /* a max pooling's gradient, a thread a window */
  if (ir_pool_band_rows(n)) return "per-band";  /* a block a band of rows, each window's argmax once */
  if (ir_gemm_mma(n)) return "mma";
  if (ir_fp32_wide(n)) return "128x128";   /* the float32 tiled GEMM's wider tiles */
  if (ir_fp32_tile(n) == IR_TILE_64x128) return "64x128";
  return NULL;
}
/* " [form, taps, phases P, split-K S]" after a group's ops, the parts that
 * apply ("" for none): which kernel its GEMM-like main node got, "taps" for
 * a convolution's gradient whose tiles each take one tap (ir_wgrad_tap_cols,
 * ir_dgrad_tap_k), "phases P" for a strided data gradient by phases
 * (ir_dgrad_phases), and its split-K */
/* The split-K of a group's main node (ir_gemm_split_k), 1 for none: the
 * cuBLAS path (--cublas) does not split; a split reduction's ranges
 * (ir_reduce_split: its sum's K split alike, the same two kernels) */
static int split_k(const Node *n, int cublas) {
  if (ir_reduce_len(n)) return ir_reduce_split(n);
  if (ir_bn_len(n)) return ir_bn_split(n);
  return ir_grad_gemm(n) || (!cublas && (ncc_ops[n->op].flags & OPF_GEMM_LIKE)) ? ir_gemm_split_k(n) : 1;
}
static const char *kernel_marks(const Node *n, int cublas, char *buf, size_t len) {
  const char *form = kernel_form(n);
  int sk = split_k(n, cublas);
  char ft[32];
  if (form && !strcmp(form, "mma")) {   /* the tensor-core GEMM with its tile (ir_gemm_tile) */
    IrTile t = ir_gemm_tile(n);
    snprintf(ft, sizeof ft, "mma %dx%d", t.BM, t.BN);
    form = ft;
  }
  char sks[24], phs[24];
  const char *parts[4];
  int np = 0;
  snprintf(sks, sizeof sks, "split-K %d", sk);
  snprintf(phs, sizeof phs, "phases %d", ir_dgrad_phases(n));
  if (form) parts[np++] = form;
  if (ir_wgrad_tap_cols(n) || ir_dgrad_tap_k(n)) parts[np++] = "taps";
  if (ir_dgrad_phases(n)) parts[np++] = phs;
  if (sk > 1) parts[np++] = sks;
  size_t l = 0;
  buf[0] = 0;
  for (int i = 0; i < np && l < len; i++) l += (size_t)snprintf(buf + l, len - l, "%s%s", i ? ", " : " [", parts[i]);
  if (np && l < len) snprintf(buf + l, len - l, "]");
  return buf;
}
/* A comment line before the table naming the marks its rows carry (those
 * present only; none: no line) */
static void marks_legend(FILE *f, const GroupList *gl, int cublas) {
  /* form NULL: split-K; "taps": ir_wgrad_tap_cols or ir_dgrad_tap_k */
  static const struct { const char *form, *says; } marks[] = {
      {"mma", "[mma BMxBN] tensor cores, a BM x BN tile"},
      {"128x128", "[128x128] the float32 GEMM's wide tile (8 x 8 outputs a thread)"},
      {"64x128", "[64x128] the float32 GEMM's 64 x 128 tile (4 x 8 outputs a thread)"},
      {"gemv", "[gemv] the GEMV kernel (few rows)"},
      {"direct", "[direct] the direct convolution (few output channels a group)"},
      {"per-window", "[per-window] a max pooling's gradient a thread a window (the windows tile the input)"},
      {"per-band", "[per-band] a max pooling's gradient a block a band of rows (each window's argmax found once)"},
      {"taps", "[taps] a convolution's gradient whose tiles each take one tap's channels (weight gradient: a tile's "
               "columns; data gradient: a K tile), its window test once a K tile"},
      {"phases", "[phases P] a strided data gradient in P phases of dx's pixels (h and w modulo the stride), each a "
                 "GEMM over the taps that reach it"},
      {NULL, "[split-K S] the GEMM's K (a reduction's length) in S ranges, a second kernel adds them"},
  };
  int any = 0;
  for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
    int seen = 0;
    for (int k = 0; k < gl->n && !seen; k++) {
      const Node *n = gl->g[k].main;
      const char *form = kernel_form(n);
      if (!marks[i].form) seen = split_k(n, cublas) > 1;
      else if (!strcmp(marks[i].form, "taps")) seen = ir_wgrad_tap_cols(n) || ir_dgrad_tap_k(n);
      else if (!strcmp(marks[i].form, "phases")) seen = ir_dgrad_phases(n) > 0;
      else seen = form && !strcmp(form, marks[i].form);
    }
    if (seen) fprintf(f, "%s%s", any++ ? "; " : "# marks: ", marks[i].says);
  }
  if (any) fputc('\n', f);
}
static Cost flops_only(int64_t f) { Cost c = {f, 0}; return c; }

static Cost gemm_cost(const Node *n, int64_t macs, int bias) {
  Cost c = {add(mul(2, macs), bias ? out_numel(n) : 0), macs};
  return c;
}
static Cost cost_conv2d(const Node *n, int train) {
  const Shape *w = &n->in[1]->shape;   /* [out, in/groups, kh, kw] */
  return gemm_cost(n, mul(mul(mul(out_numel(n), w->d[1]), w->d[2]), w->d[3]), n->nin == 3);
}
static Cost cost_linear(const Node *n, int train) {
  return gemm_cost(n, mul(out_numel(n), n->in[1]->shape.d[1]), n->nin == 3);
}
static Cost cost_matmul(const Node *n, int train) {
  const Shape *a = &n->in[0]->shape;
  return gemm_cost(n, mul(out_numel(n), a->d[a->rank - 1]), 0);
}
static Cost cost_batchnorm2d(const Node *n, int train) {
  return flops_only(mul(train ? FL_BN_TRAIN : FL_BN_INFER, out_numel(n)));
}
static Cost cost_layernorm(const Node *n, int train) { return flops_only(mul(FL_LAYERNORM, out_numel(n))); }
static Cost cost_window(const Node *n, int train) {
  return flops_only(mul(mul(out_numel(n), n->a.kernel[0]), n->a.kernel[1]));
}
static Cost cost_gavgpool(const Node *n, int train) { return flops_only(in0_numel(n)); }
static Cost cost_softmax(const Node *n, int train) { return flops_only(mul(FL_SOFTMAX, out_numel(n))); }
static Cost cost_cross_entropy(const Node *n, int train) { return flops_only(mul(FL_XENT, in0_numel(n))); }
static Cost cost_nll_loss(const Node *n, int train) { return flops_only(n->in[0]->shape.d[0]); }
static Cost cost_mse_loss(const Node *n, int train) { return flops_only(mul(FL_MSE, in0_numel(n))); }
/* elementwise, transcendental or not: one per element */
static Cost cost_elem(const Node *n, int train) { return flops_only(out_numel(n)); }
/* sources, views, identities and data movement compute nothing */
static Cost cost_none(const Node *n, int train) { return flops_only(0); }

/* training ops (autodiff): a backward conv or GEMM does the forward's
 * multiply-adds once per gradient it computes */
static Cost cost_conv2d_bwd(const Node *n, int train) {
  /* bwd_data: in = (dy, weight); bwd_weight: in = (dy, x), out = weight */
  const Shape *w = n->op == OP_CONV2D_BWD_DATA ? &n->in[1]->shape : &n->out->shape;
  /* in/groups x kh x kw: [out, in/groups, kh, kw]'s axes 1..3, or bwd_data's weight transposed (wtap: [in, kh,
   * kw, out], groups 1) axes 0..2 */
  int t = n->op == OP_CONV2D_BWD_DATA && n->a.wtap;
  int64_t macs = mul(mul(mul(shape_numel(&n->in[0]->shape), w->d[t ? 0 : 1]), w->d[t ? 1 : 2]), w->d[t ? 2 : 3]);
  Cost c = {mul(2, macs), macs};
  return c;
}
static Cost cost_linear_bwd_weight(const Node *n, int train) {
  int64_t macs = mul(out_numel(n), n->in[0]->shape.d[0]);
  Cost c = {mul(2, macs), macs};
  return c;
}
static Cost cost_bn_stats(const Node *n, int train) { return flops_only(mul(3, in0_numel(n))); }
static Cost cost_bn_train(const Node *n, int train) { return flops_only(mul(FL_BN_INFER + 2, out_numel(n))); }
static Cost cost_norm_bwd(const Node *n, int train) { return flops_only(mul(FL_LAYERNORM, shape_numel(&n->in[1]->shape))); }
static Cost cost_sum_to(const Node *n, int train) { return flops_only(in0_numel(n)); }
static Cost cost_window_bwd(const Node *n, int train) {
  return flops_only(mul(mul(in0_numel(n), n->a.kernel[0]), n->a.kernel[1]));
}
static Cost cost_loss_bwd(const Node *n, int train) { return flops_only(mul(FL_XENT, out_numel(n))); }
/* the update: a handful per parameter element (adam's is the longest) */
static Cost cost_optimizer(const Node *n, int train) {
  int64_t p = 0;
  for (int i = 0; i < n->nin; i++) p = add(p, shape_numel(&n->in[i]->shape));
  return flops_only(mul(n->nin ? 10 : 0, p));
}

static Cost (*const costs[OP__COUNT])(const Node *n, int train) = {
#define OP(name, str, flags, mn, mx, args, shape, emit, cost, expr, grad) cost_##cost,
#include "ops.def"
#undef OP
};

/* "123.4 M" style, for the human columns; exact figures are on the total line. */
static char *human(char *buf, size_t n, double v, const char *unit) {
  static const char *const sfx[] = {"", " K", " M", " G", " T", " P"};
  int k = 0;
  while (v >= 1000 && k < 5) { v /= 1000; k++; }
  if (k == 0) snprintf(buf, n, "%.0f%s%s", v, *unit ? " " : "", unit);
  else snprintf(buf, n, "%.*f%s%s", v < 10 ? 2 : v < 100 ? 1 : 0, v, sfx[k], unit);
  return buf;
}

static const char *row_name(const Node *n) {
  if (n->layer) return n->layer;
  if (n->name) return n->name;
  return "-";
}

/* Autodiff lands as a pass that appends gradient/update ops to ops.def after
 * the forward ops; a graph made only of the forward ops (up to mse_loss) has
 * no backward yet. */
static int has_backward(const Graph *g) {
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->op > OP_MSE_LOSS) return 1;
  return 0;
}

/* The nodes of a group in the order they compute (prologue, main, epilogue),
 * then its side nodes, into *buf (grown as needed; epilogue chains have no
 * fixed bound). */
static int group_nodes(const KGroup *gr, const Node ***buf, int *cap) {
  int m = gr->npro + 1 + gr->nepi + gr->nside;
  if (m > *cap) {
    *cap = m * 2;
    *buf = xrealloc(*buf, sizeof(Node *) * (size_t)*cap);
  }
  const Node **out = *buf;
  int k = 0;
  for (int i = 0; i < gr->npro; i++) out[k++] = gr->pro[i];
  out[k++] = gr->main;
  for (int i = 0; i < gr->nepi; i++) out[k++] = gr->epi[i];
  for (int i = 0; i < gr->nside; i++) out[k++] = gr->side[i];
  return k;
}

void report_print(Graph *g, FILE *f, int train, const char *arch_name) { report_print_note(g, f, train, arch_name, NULL, NULL); }

/* Registers a thread, by kernel kind (the estimate the occupancy model uses;
 * declared with the model above). */
static int regs_estimate(const KGroup *gr, int cublas) {
  static const struct { const char *form; int regs; } gemm_kinds[] = {
    {NULL, REGS_TILED},       /* the tiled GEMM and implicit-GEMM convolution */
    {"128x128", REGS_WIDE},   /* its wide tile (ptxas: 96 to 116, sm_80 and sm_90, sass.fp32_wide and VGG-16) */
    {"64x128", REGS_W64},
    {"gemv", REGS_GEMV},
    {"direct", REGS_DIRECT},
  };
  const Node *n = gr->main;
  if (!(ncc_ops[n->op].flags & OPF_GEMM_LIKE)) return REGS_OTHER;
  const char *form = kernel_form(n);
  if (form && !strcmp(form, "mma")) {   /* by its tile (ir_mma_tiles) */
    IrTile t = ir_gemm_tile(n);
    return ir_tile_regs(n, &t);
  }
  if (n->prec == PREC_FP32 && n->pipe)
    return ir_fp32_wide(n) ? REGS_WIDE_2ST : ir_fp32_tile(n) == IR_TILE_64x128 ? REGS_W64_2ST : REGS_TILED_2ST;
  for (size_t i = 0; i < sizeof gemm_kinds / sizeof gemm_kinds[0]; i++)
    if (form == gemm_kinds[i].form || (form && gemm_kinds[i].form && !strcmp(form, gemm_kinds[i].form)))
      return gemm_kinds[i].regs;
  return REGS_TILED;
}

/* Whether cuBLAS runs the group's GEMM (--cublas: every conv2d, linear and
 * matmul but the direct convolution, as emit_gemm decides): its kernels'
 * geometry is cuBLAS's, unknown here, and the group is timed by the roofline. */
static int library_gemm(const KGroup *gr, int cublas) {
  const Node *n = gr->main;
  return cublas && (ncc_ops[n->op].flags & OPF_GEMM_LIKE) && !(n->op == OP_CONV2D && ir_conv_direct(n));
}

/* The launch of group gr the occupancy model looks at: of the launches codegen
 * renders for it, the one with the most blocks (most groups make one), or
 * with `first` the first (a split-K GEMM: the GEMM, not the sum after it);
 * NULL when it makes none the list holds (a GEMM cuBLAS runs), *nl their
 * count. */
static const CgLaunch *group_launch(const CgLaunchList *ll, const KGroup *gr, int train, int *nl, int first) {
  const CgLaunch *best = NULL;
  int64_t most = 0;
  *nl = 0;
  for (int i = 0; i < ll->n; i++) {
    const CgLaunch *L = &ll->l[i];
    if (L->main != gr->main || L->train != train || L->load_time != gr->load_time) continue;
    int64_t b = (int64_t)L->grid[0] * L->grid[1] * L->grid[2];
    ++*nl;
    if (first && best) continue;
    if (b > most || first) most = b, best = L;
  }
  return best;
}
/* Is key[0..len) the layer key of a matmul of g (so that key + "#b" is its
 * second operand's entry, not a layer whose own name ends in "#b")? */
static int is_matmul_key(const Graph *g, const char *key, size_t len) {
  char kb[160];
  for (int i = 0; i < g->nnodes; i++) {
    if (g->nodes[i]->op != OP_MATMUL) continue;
    const char *k = ir_layer_key(g->nodes[i], kb, sizeof kb);
    if (strlen(k) == len && !strncmp(k, key, len)) return 1;
  }
  return 0;
}

/* --precision=int8: the calibration and each layer's choice (driver/calibrate.c) */
static void int8_table(FILE *f, const Graph *g) {
  const QuantTable *t = g->quant;
  int n8 = 0;
  for (int i = 0; i < g->nnodes; i++) n8 += g->nodes[i]->prec == PREC_INT8;
  fprintf(f, "# precision int8: %d conv2d/linear/matmul kernel%s (op:int8) quantize their input as they load it "
             "(a matmul both operands) and sum int8 products in int32: the tiled ones on tensor cores ([mma BMxBN], "
             "timed at the int8 peak), GEMV and direct convolutions on CUDA cores (the fp32 peak); the "
             "dequantization (mul) and bias (add) are their epilogue\n", n8, n8 == 1 ? "" : "s");
  if (!t) return;
  int fb = 0, nl = 0, w = 5;
  size_t lb = strlen(IR_INT8_TAP_B);
  for (int i = 0; i < t->n; i++) {   /* a matmul's second operand (KEY#b) is no layer of its own */
    size_t L = strlen(t->l[i].key);
    int b = L > lb && !strcmp(t->l[i].key + L - lb, IR_INT8_TAP_B) && is_matmul_key(g, t->l[i].key, L - lb);
    fb += !b && t->l[i].prec != PREC_INT8;
    nl += !b;
    if ((int)L > w) w = (int)L;
  }
  if (w > 40) w = 40;
  char pct[48] = "";
  if (!strcmp(t->method, "percentile")) snprintf(pct, sizeof pct, " %g", t->percentile);
  fprintf(f, "# int8 calibration: %s%s, %lld samples (%s); weights per output channel, max |w| / 127; "
             "%d of %d layers fell back to %s (error > %g)%s\n",
          t->method, pct, (long long)t->samples, t->source, fb, nl, ir_prec_name(t->fallback), t->max_error,
          nl < t->n ? "; KEY#b: a matmul's second operand" : "");
  fprintf(f, "#   %-*s  %10s  %10s  %10s  %s\n", w, "layer", "absmax", "scale", "error", "precision");
  for (int i = 0; i < t->n; i++) {
    const QuantLayer *q = &t->l[i];
    char why[96] = "int8";
    if (q->prec != PREC_INT8) snprintf(why, sizeof why, "%s (error %.3g > %g)", ir_prec_name(q->prec), q->error, t->max_error);
    fprintf(f, "#   %-*s  %10.4g  %10.4g  %10.4g  %s\n", w, q->key, q->absmax, q->scale, q->error, why);
  }
}


/* report_kernel_times' list while it runs the report (NULL otherwise): by kernel name, first launch
 * first; a kernel launched for several groups sums their times */
static ReportKernelList *collect;

static ReportKernel *collect_find(const char *name) {
  for (int i = 0; i < collect->n; i++)
    if (!strcmp(collect->k[i].name, name)) return &collect->k[i];
  if (collect->n == collect->cap) {
    collect->cap = collect->cap ? 2 * collect->cap : 64;
    collect->k = xrealloc(collect->k, sizeof *collect->k * (size_t)collect->cap);
  }
  ReportKernel *r = &collect->k[collect->n++];
  r->name = xstrdup(name);
  r->us = 0;
  return r;
}
static void collect_add(const char *name, double us) { collect_find(name)->us += us; }

/* report_kernel_times' launches, the file's (NULL otherwise: report_print_note renders its own) */
static const CgLaunchList *file_geo;

int report_kernel_times(Graph *g, Graph *gt, const char *arch, const CodegenOpts *co, ReportKernelList *out) {
  memset(out, 0, sizeof *out);
  /* the kernels as the file names them: a training step's after the inference ones */
  CgLaunchList ll;
  if (cg_launch_geometry_file(g, gt, co, &ll) != 0) return -1;
  FILE *f = fopen("/dev/null", "w");   /* the rows are computed as they are printed */
  if (!f) {
    cg_launches_free(&ll);
    return -1;
  }
  collect = out;
  file_geo = &ll;
  report_print_note(gt ? gt : g, f, gt != NULL, arch, NULL, co);
  collect = NULL;
  file_geo = NULL;
  fclose(f);
  cg_launches_free(&ll);
  return 0;
}

void report_kernel_times_free(ReportKernelList *l) {
  for (int i = 0; i < l->n; i++) free(l->k[i].name);
  free(l->k);
  memset(l, 0, sizeof *l);
}

void report_print_note(Graph *g, FILE *f, int train, const char *arch_name, const char *note, const CodegenOpts *co) {
  const Arch *arch = arch_lookup(arch_name);
  int64_t api_batch = co ? co->api_batch : 0;
  int cublas = co && co->use_cublas;
  /* the launch geometry: codegen run as it would be for this graph, its
   * launches recorded (a training step's when autodiff ran) */
  int geo_train = train && g->train.present && has_backward(g);
  CgLaunchList ll = {0};
  /* a training graph's step, or an inference graph (no gradient ops: codegen
   * emits those only in a training step); anything else goes without */
  int own_geo = !file_geo;   /* report_kernel_times hands the whole file's */
  int have_geo = (geo_train || (!train && !has_backward(g)) || (train && !g->train.present && !has_backward(g))) &&
                 (file_geo ? (ll = *file_geo, 1) : cg_launch_geometry(g, co, geo_train, &ll) == 0);
  int nn = g->nnodes;
  Liveness lv;
  ir_liveness(g, g->training, &lv);
  int *grp = malloc(sizeof(int) * (size_t)(nn + 1));     /* node id -> its group, or -1 */
  if (!grp) ncc_die("out of memory");
  GroupList gl = group_form(g, lv.need);

  int64_t batch = 0;
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    grp[i] = -1;
    if (n->op == OP_INPUT && !batch && n->out->shape.rank >= 1) batch = n->out->shape.d[0];
  }
  const Node **gn = NULL;
  int gcap = 0;
  if (batch <= 0) batch = 1;   /* no batched input (scalars only): count per graph */
  for (int k = 0; k < gl.n; k++) {
    int m = group_nodes(&gl.g[k], &gn, &gcap);
    for (int j = 0; j < m; j++) grp[gn[j]->id] = k;
  }

  /* column widths */
  int wname = 5, wops = 16;
  for (int k = 0; k < gl.n; k++) {
    int l = (int)strlen(row_name(gl.g[k].main));
    if (l > wname) wname = l;
    int m = group_nodes(&gl.g[k], &gn, &gcap), lo = m - 1;
    for (int j = 0; j < m; j++) lo += (int)strlen(ncc_ops[gn[j]->op].name) + (gn[j]->prec != PREC_FP32 ? 5 : 0);
    char mk[64];
    lo += (int)strlen(kernel_marks(gl.g[k].main, cublas, mk, sizeof mk));
    if (lo > wops) wops = lo;
  }
  if (wname > 40) wname = 40;
  if (wops > 56) wops = 56;

  fprintf(f, "# ncc report: model %s, %s, batch %lld, %s roofline (%.1f TFLOP/s fp32, %.0f fp16, %.0f GB/s, %.0f us/launch)\n",
          g->model, train ? "per training step" : "per inference", (long long)batch, arch->name, arch->flops / 1e12,
          arch->flops16 / 1e12, arch->bw / 1e9, arch->launch_us);
  if (g->precision == PREC_INT8)
    int8_table(f, g);
  else if (g->precision != PREC_FP32)
    fprintf(f, "# precision %s: the GEMM-like kernels (op:%s) take %s operands, timed at the %s tensor-core peak\n",
            ir_prec_name(g->precision), ir_prec_name(g->precision), ir_prec_name(g->precision),
            ir_prec_name(g->precision));
  if (train && !g->train.present)
    fprintf(f, "# the model has no train block: the figures are those of inference\n");
  else if (train && !has_backward(g))
    fprintf(f, "# no backward graph yet (autodiff has not run): the figures cover the forward pass only\n");
  if (have_geo)
    fprintf(f, "# blocks: the kernel's grid; blk/SM: resident blocks per SM, the limit that binds (t threads, b blocks, "
               "r registers, s shared memory); waves: blocks / (%d SMs x blk/SM)\n", arch->sms);
  marks_legend(f, &gl, cublas);
  fprintf(f, "# %4s  %-*s %-*s %-22s %11s %10s %10s %10s %9s%s\n", "id", wops, "kernel (ops)", wname, "layer", "output",
          "params", "FLOPs", "bytes", "act.bytes", "time_us", have_geo ? "   blocks blk/SM  waves" : "");

  int64_t params = 0, flops = 0, macs = 0, bytes = 0, naive = 0, peak = 0, weights = 0, load_bytes = 0;
  int launches = 0, load_kernels = 0;
  double time_us = 0, roofline_us = 0;
  int few_blocks = 0, tails = 0;   /* kernels with fewer blocks than SMs; with a partial last wave past the first */
  int side_rows = 0;               /* kernels on the side stream (Node.stream) */
  double side_us = 0;
  int nrows = 0;                   /* the inference rows (kernel groups) the waves: line counts */
  int unmodeled = 0;               /* kernels with no geometry (cuBLAS's): the roofline alone */
  const Value **seen = NULL;   /* inputs of the current kernel, deduplicated */
  int nseen_all = 0, seen_cap = 0;
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    if (n->dead) continue;
    if (is_param_counted(n)) params = add(params, shape_numel(&n->out->shape));
    if (n->op == OP_PARAM) weights = add(weights, vbytes(n->out));
    int kind = lv.kind[n->out->id];
    if (kind == LV_INPUT || kind == LV_ACT) naive = add(naive, ir_slot_bytes(n->out));
    if (kind == LV_LOAD) load_bytes = add(load_bytes, ir_slot_bytes(n->out));
  }
  /* the plan as codegen emits it (codegen.c lays values out the same way) */
  peak = g->planned ? g->act_bytes : naive;

  for (int pass = 0; pass < 2; pass++)
  for (int k = 0; k < gl.n; k++) {
    const KGroup *gr = &gl.g[k];
    /* per-inference kernels, then those run once at load time */
    if (gr->load_time != (pass == 1)) continue;
    if (pass == 1 && load_kernels++ == 0)
      fprintf(f, "# run once after the weights load (not counted below):\n");
    Value *out = group_out(gr);
    int m = group_nodes(gr, &gn, &gcap);
    int64_t np = 0, fl = 0, gm = 0, by = vbytes(out);
    for (int j = 0; j < gr->nside; j++)   /* a side node's value is a second output (an update's is a dummy) */
      if (!(ncc_ops[gr->side[j]->op].flags & OPF_UPDATE)) by = add(by, vbytes(gr->side[j]->out));
    /* fp16 training: GradScaler's unscale kernel runs before the update, reading and writing every gradient */
    int unscale = gr->main->op == OP_OPTIMIZER && g->train.loss_scaling;
    for (int q = 0; unscale && q < gr->main->nin; q++) by = add(by, 2 * vbytes(gr->main->in[q]));
    /* layernorm_bwd_weight: a first kernel writes each row's mean and rstd (x read again), the sums read them */
    int ln_stats = gr->main->op == OP_LAYERNORM_BWD_WEIGHT;
    if (ln_stats) by = add(by, add(vbytes(gr->main->in[1]), mul(16, ir_ln_rows(gr->main))));
    /* the update reads the gradients (its inputs, counted below) and reads and writes the parameters and
     * the optimizer's state, float32 like the gradients: 2 + 2 x states times the gradients' bytes */
    for (int q = 0; gr->main->op == OP_OPTIMIZER && q < gr->main->nin; q++)
      by = add(by, mul(2 + 2 * ir_opt_states(&g->train), vbytes(gr->main->in[q])));
    char ops[128];
    size_t ol = 0;
    ops[0] = 0;
    nseen_all = 0;
    int first_seen = 0;
    for (int j = 0; j < m; j++) {
      const Node *n = gn[j];
      ol += (size_t)snprintf(ops + ol, ol < sizeof ops ? sizeof ops - ol : 0, "%s%s%s%s", j ? "+" : "",
                             ncc_ops[n->op].name, n->prec != PREC_FP32 ? ":" : "",
                             n->prec != PREC_FP32 ? ir_prec_name(n->prec) : "");
      if (ol >= sizeof ops) ol = sizeof ops - 1;
      if (j == m - 1 && ol < sizeof ops) {   /* which kernel the GEMM-like op got, and its split-K */
        char mk[64];
        ol += (size_t)snprintf(ops + ol, sizeof ops - ol, "%s", kernel_marks(gr->main, cublas, mk, sizeof mk));
      }
      if (j == m - 1 && ol < sizeof ops && unscale)   /* fp16 training: the loss scaler's kernel before the update */
        ol += (size_t)snprintf(ops + ol, sizeof ops - ol, " [+unscale]");
      if (ol >= sizeof ops) ol = sizeof ops - 1;
      Cost cost = costs[n->op](n, train);
      fl = add(fl, cost.flops);
      gm = add(gm, cost.macs);
      for (int q = 0; q < n->nin; q++) {
        const Value *v = n->in[q];
        if (grp[ir_view_root(n->in[q])->def->id] == k) continue;   /* computed inside the group (a prologue: through a view) */
        /* a tensor read twice by one kernel (x * x) is loaded once */
        int dup = 0;
        for (int s = first_seen; s < nseen_all; s++) dup |= seen[s] == v;
        if (dup) continue;
        if (nseen_all == seen_cap) {
          seen_cap = seen_cap ? 2 * seen_cap : 64;
          seen = xrealloc(seen, sizeof(Value *) * (size_t)seen_cap);
        }
        seen[nseen_all++] = v;
        by = add(by, vbytes(v));
        if (is_param_counted(v->def)) np = add(np, shape_numel(&v->shape));
      }
    }
    /* split-K: the S partial sums written to the workspace and read back (a
     * split bn_bwd_data's: two sums a channel) */
    if (split_k(gr->main, cublas) > 1)
      by = add(by, mul(2 * split_k(gr->main, cublas),
                       gr->main->op == OP_BN_BWD_DATA ? mul(8, gr->main->in[1]->shape.d[1]) : vbytes(out)));
    int64_t act = vbytes(out);
    /* a GEMM computes in its inputs' dtype (int8 in, int32/f32 out) */
    double t = (double)fl / (ir_gemm_mma(gr->main) ? (gr->main->prec == PREC_TF32 ? arch->flops16 / 2   /* TF32: half of fp16's */
                                                      : gr->main->prec == PREC_INT8 ? arch->ops8          /* int8 */
                                                                                    : arch->flops16)      /* fp16, bf16 */
                                                         : arch_peak(arch, gr->main->nin ? gr->main->in[0]->dtype : out->dtype));
    double tb = (double)by / arch->bw;
    double roof = (t > tb ? t : tb) * 1e6;
    /* a split-K GEMM is two kernels: the ranges, then their sum (ir_gemm_split_k; not on the cuBLAS path);
     * the update of a loss-scaled step too: the gradients unscaled (read and written), then the update */
    int nk = 1 + (split_k(gr->main, cublas) > 1) + unscale + ln_stats;
    /* the waves: the roofline's throughput on the share of the SMs they keep busy */
    int nl = 0;
    int lib = library_gemm(gr, cublas);
    const CgLaunch *L = have_geo && !lib ? group_launch(&ll, gr, geo_train, &nl, nk > 1) : NULL;
    char geo[64] = "";
    double share = 1;
    if (L) {
      int64_t blocks = (int64_t)L->grid[0] * L->grid[1] * L->grid[2];
      Occ oc = occupancy(arch, L->block[0] * L->block[1], regs_estimate(gr, cublas), (int64_t)L->smem_static,
                         (int64_t)L->smem_dyn);
      double waves = 0;
      if (oc.per_sm > 0) share = machine_share(arch, blocks, oc.per_sm, &waves);
      if (oc.per_sm > 0)   /* waves to two decimals, three below 0.1 */
        snprintf(geo, sizeof geo, " %8lld %5d%c %6.*f", (long long)blocks, oc.per_sm, oc.limit, waves < 0.1 ? 3 : 2, waves);
      else snprintf(geo, sizeof geo, " %8lld %5d%c %6s", (long long)blocks, 0, oc.limit, "-");
      if (!gr->load_time) {
        few_blocks += blocks < arch->sms;
        tails += waves > 1 && share < 1;
      }
    } else if (have_geo) {
      snprintf(geo, sizeof geo, " %8s %6s %6s", lib ? "cuBLAS" : "-", "-", "-");
      if (!gr->load_time) unmodeled++;
    }
    double us = roof / share + nk * arch->launch_us;
    if (collect && L && !gr->load_time) {   /* report_kernel_times: the row's time by kernel */
      /* a split-K sum reads the S partial sums and writes the output; an unscale reads and writes
       * every gradient: their rooflines (and launches) out of the row's, the rest the main kernel's */
      double extra_us = 0;
      const char *main_k = L->kernel;
      for (int i = 0; i < ll.n; i++) {
        const CgLaunch *x = &ll.l[i];
        if (x->main != gr->main || x->train != geo_train || x->load_time != gr->load_time || !x->kernel) continue;
        double part = 0;
        if (strstr(x->kernel, "splitk_sum"))
          part = (double)(split_k(gr->main, cublas) + 1) * (double)vbytes(out) / arch->bw * 1e6 + arch->launch_us;
        else if (strstr(x->kernel, "bn_bwd_sums"))   /* a split bn_bwd_data's first kernel: dy and x read */
          part = (double)(vbytes(gr->main->in[0]) + vbytes(gr->main->in[1])) / arch->bw * 1e6 + arch->launch_us;
        else if (strstr(x->kernel, "layernorm_row_stats"))   /* x read, two floats a row written */
          part = ((double)vbytes(gr->main->in[1]) + 8.0 * (double)ir_ln_rows(gr->main)) / arch->bw * 1e6 + arch->launch_us;
        else if (strstr(x->kernel, "unscale_grads")) {
          double gb = 0;
          for (int q = 0; q < gr->main->nin; q++) gb += 2.0 * (double)vbytes(gr->main->in[q]);
          part = gb / arch->bw * 1e6 + arch->launch_us;
        } else {   /* the group's own kernel: listed in launch order now, its time after the loop */
          main_k = x->kernel;
          collect_add(x->kernel, 0);
          continue;
        }
        if (part > us - extra_us - arch->launch_us) part = us - extra_us - arch->launch_us;   /* the main kernel keeps a launch */
        collect_add(x->kernel, part > 0 ? part : 0);
        extra_us += part > 0 ? part : 0;
      }
      if (main_k) collect_add(main_k, us - extra_us);
    }
    if (!gr->load_time && gr->main->stream) side_rows++, side_us += us;
    if (!gr->load_time) {
      flops = add(flops, fl);
      macs = add(macs, gm);
      bytes = add(bytes, by);
      time_us += us;
      roofline_us += roof + nk * arch->launch_us;
      launches += nk;
      nrows++;
    }

    char sh[200], b1[32], b2[32], b3[32], pc[32];
    snprintf(pc, sizeof pc, "%lld", (long long)np);
    fprintf(f, "  %4d  %-*.*s %-*.*s %-22s %11s %10s %10s %10s %9.1f%s\n", gr->main->id, wops, wops, ops, wname, wname,
            row_name(gr->main), shape_str(sh, sizeof sh, ir_store_type(out), &out->shape), np ? pc : "-",
            human(b1, sizeof b1, (double)fl, ""), human(b2, sizeof b2, (double)by, "B"),
            human(b3, sizeof b3, (double)act, "B"), us, geo);
  }

  char b1[32], b2[32], b3[32];
  int64_t per = macs / batch;
  fprintf(f, "# multiply-adds: total=%lld per_sample=%lld (%s per sample)\n", (long long)macs, (long long)per,
          human(b1, sizeof b1, (double)per, ""));
  fprintf(f, "# weights: %s; activations: naive %s, %s %s; modeled time %.1f us on %s\n",
          human(b1, sizeof b1, (double)weights, "B"), human(b2, sizeof b2, (double)naive, "B"),
          g->planned ? "planned" : "no memory plan (-O0):", human(b3, sizeof b3, (double)peak, "B"), time_us, arch->name);
  if (have_geo) {
    fprintf(f, "# waves: %d of %d kernels launch fewer blocks than the %d SMs, %d end in a partial wave; modeled time "
               "%.1f us with waves and occupancy, %.1f us by the roofline alone", few_blocks, nrows, arch->sms, tails,
            time_us, roofline_us);
    if (unmodeled) fprintf(f, " (%d kernels, cuBLAS's, by the roofline alone)", unmodeled);
    fputc('\n', f);
  }
  if (side_rows) {   /* the streams pass: what may overlap the rest (the time above adds it all up) */
    /* at best the overlap hides the side kernels behind stream 0's, and no
     * better than every kernel at the whole machine's rate (the roofline) */
    double best = time_us - side_us > roofline_us ? time_us - side_us : roofline_us;
    fprintf(f, "# streams: %d of %d kernels on the side stream, %.1f us of the modeled time, off the longest chain; "
               "the time above adds them as if on one stream; overlapped, at best %.1f us (stream 0's alone, or the "
               "roofline where that is more)\n", side_rows, nrows, side_us, best);
  }
  if (load_kernels || load_bytes)
    fprintf(f, "# load-time: %d kernels, run once after the weights load, not per inference; %s kept for every inference\n", load_kernels,
            human(b1, sizeof b1, (double)load_bytes, "B"));
  if (!train && g->max_batch > 0 && api_batch > g->max_batch)
    fprintf(f, "# batch: any batch 1..%lld from this build (%s_infer_batch), run in slices of %lld rows: the figures above "
               "are one slice's\n", (long long)api_batch, g->model, (long long)g->max_batch);
  else if (!train && g->max_batch > 0)
    fprintf(f, "# batch: any batch 1..%lld from this build (%s_infer_batch): a call launches only the blocks its rows need\n",
            (long long)g->max_batch, g->model);
  else if (!train && g->batch_fixed)
    fprintf(f, "# batch: %lld only: %s\n", (long long)batch, g->batch_fixed);
  if (note && *note) fprintf(f, "# %s\n", note);
  fprintf(f, "total: params=%lld flops=%lld launches=%d bytes=%lld peak_memory=%lld naive_memory=%lld\n",
          (long long)params, (long long)flops, launches, (long long)bytes, (long long)peak, (long long)naive);
  group_free(&gl);
  if (own_geo) cg_launches_free(&ll);
  free(gn);
  free(seen);
  free(grp);
  ir_liveness_free(&lv);
}
