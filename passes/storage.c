/* storage.c — narrow storage between kernels (--precision=fp16|bf16|int8).
 *
 * \brief At fp16 (bf16) every GEMM-like op rounds its operands to fp16
 * (bf16) as it loads them.  A value that only such loads read may therefore
 * be stored rounded, in 16 bits, and nothing changes: rounding twice gives
 * what rounding once gives.  Neither does a max pooling computed where the
 * GEMM loads its operand (a prologue) change anything: rounding keeps order,
 * so the max of rounded values is the rounded max.  At int8 an int8 GEMM
 * quantizes its activation operand as it loads it, q = clamp(rint(x / s),
 * -127, 127) with the layer's calibrated scale s: a value whose every reader
 * is such a load with one and the same s may be stored as q, in one byte,
 * the requantization moving into the producer's epilogue; the readers then
 * take q as it is.  This pass marks such values (Value.narrow = DT_F16,
 * DT_BF16 or DT_I8 with Value.qscale, and their views alike); the plan pass
 * gives them their smaller bytes, the producing kernel stores
 * ncc_fp16_bits(v) (or the quantized byte) and the reading kernels load
 * ncc_fp16_load(x[i]) (or (float)q).  The outputs stay bit for bit what
 * float32 storage gives; the activations' bytes (and the GEMMs' operand
 * traffic) halve (quarter) where the rule holds.
 *
 * A value stays float32 when anything else reads it: an elementwise op, a
 * residual add, a softmax, a pooling kernel of its own, an average pooling
 * (a mean of rounded values is not the rounded mean), a graph output, a
 * kernel at another precision (an int8 layer's fallback), an int8 GEMM with
 * another scale.  Graph inputs and parameters keep their storage (M_load
 * fills the parameters' float32 buffers), and so does a training step (its
 * gradients read the forward's values in float32), but for its parameter
 * weights' copies made once a step (the precision pass's casts, read by the
 * forward's GEMMs; autodiff's transposes, read by the data gradients'), stored
 * in 16 bits when only those GEMMs read them.  A load-time value (a
 * folded weight; a parameter weight's cast, the precision pass converting
 * the GEMMs' weights at load; at int8 a quantize node's integers) is stored
 * narrow when only those GEMMs read it, as their weight: in 16 bits at
 * fp16/bf16, as int8 (exact integers, scale 1) at int8: a folded weight
 * and a weight reordered tap-major at load (the fold pass) alike.  With --cublas
 * nothing changes: cuBLAS reads float32 operands.
 *
 * It runs after fuse (the groups say which node stores a value and which
 * pooling is a prologue) and before plan (which sizes the buffers). */
#include "passes.h"

typedef struct {
  Graph *g;
  int prec;          /* PREC_FP16, PREC_BF16 or PREC_INT8 */
  int *is_output;    /* value id -> 1 when an output (or a loss) names it */
} Ctx;

/* Does reader r load its operand j rounded at c->prec (int8: quantized, the
 * scale agreeing with *scale, which it sets)?  weight: the operand is a
 * load-time weight (at int8 a quantize node's integers, taken as they are).
 * 2: r is a max pooling computed as a GEMM loads (a prologue), whose own
 * readers answer for it. */
static int reads_rounded(const Ctx *c, const Node *r, int j, int weight, float *scale) {
  if (r->grole == GROLE_PROLOGUE)
    /* ir_prologue_ok; not at int8, where a NaN would be quantized (to 0)
     * before the max, not after; never a weight */
    return !weight && r->op == OP_MAXPOOL2D && j == 0 && c->prec != PREC_INT8 ? 2 : 0;
  /* a strided data gradient's weight transposed once a step (Attrs.wtap: autodiff), its A at fp16 and bf16 */
  if (r->op == OP_CONV2D_BWD_DATA && r->a.wtap && weight && j == 1 && r->prec == c->prec && c->prec != PREC_INT8)
    return ir_gemm_mma(r);
  if (!(ncc_ops[r->op].flags & OPF_GEMM_LIKE) || r->prec != c->prec) return 0;
  if (weight)   /* int8: a conv2d's or linear's weight; else either rounded operand (not a bias) */
    return c->prec == PREC_INT8 ? j == 1 && r->op != OP_MATMUL : j == 1 || (r->op == OP_MATMUL && j == 0);
  /* conv2d, linear: x (in[0]); matmul: a and b.  A bias is added unrounded. */
  if (!(j == 0 || (r->op == OP_MATMUL && j == 1))) return 0;
  if (c->prec == PREC_INT8) {   /* int8: the activation scale of that operand */
    float sc = j == 1 ? r->qscale_b : r->qscale;
    if (*scale != 0.0f && *scale != sc) return 0;
    *scale = sc;
  }
  return 1;
}

/* Does every reader of v load it rounded (reads_rounded)?  Views and
 * prologues pass the question on.  When not, *why is the reader that does
 * not (NULL: v is an output). */
static int readers_round(const Ctx *c, const Value *v, int weight, int depth, const Node **why, float *scale) {
  *why = NULL;
  if (depth > 16 || c->is_output[v->id]) return 0;
  int nreaders = 0;
  for (int i = 0; i < c->g->nnodes; i++) {
    const Node *r = c->g->nodes[i];
    for (int j = 0; j < r->nin; j++) {
      if (r->in[j] != v) continue;
      nreaders++;
      int ok = ir_is_view(r) ? (j == 0 ? 2 : 0) : reads_rounded(c, r, j, weight, scale);
      if (!ok) return *why = r, 0;
      if (ok == 2 && !readers_round(c, r->out, weight, depth + 1, why, scale)) return 0;
    }
  }
  return nreaders > 0;
}

/* The main node of v's kernel group (v->def itself without the fuse pass) */
static const Node *group_main(const Graph *g, const Node *d) {
  if (d->grole == GROLE_NONE || d->grole == GROLE_MAIN) return d;
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->grole == GROLE_MAIN && g->nodes[i]->group == d->group) return g->nodes[i];
  return NULL;
}

/* The kernels whose store writes through cg_st (codegen): the GEMMs, the
 * elementwise kernels and those ending in the common flat/row store. */
static int producer_ok(const Node *m) {
  if (!m) return 0;
  if (ncc_ops[m->op].flags & (OPF_GEMM_LIKE | OPF_ELEMWISE)) return !ir_is_view(m);
  switch (m->op) {
  case OP_MAXPOOL2D: case OP_AVGPOOL2D: case OP_GAVGPOOL2D: case OP_BATCHNORM2D: case OP_LAYERNORM:
  case OP_SOFTMAX: case OP_LOG_SOFTMAX: case OP_CONCAT: case OP_TRANSPOSE:
    return 1;
  default: return 0;
  }
}

/* Is n's value stored by its kernel (not kept in registers for an epilogue of its group)? */
static int stored(const Graph *g, const Node *n) {
  if (n->grole == GROLE_NONE) return 1;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *r = g->nodes[i];
    if (r->grole != GROLE_EPILOGUE || r->group != n->group) continue;
    for (int j = 0; j < r->nin; j++)
      if (r->in[j] == n->out) return 0;
  }
  return 1;
}

static const char *vname(const Node *n) { return n->name ? n->name : n->layer ? n->layer : ncc_ops[n->op].name; }

static const char *kb(char *b, size_t n, int64_t bytes) {
  if (bytes >= 1048576) snprintf(b, n, "%.2f MB", bytes / 1048576.0);
  else snprintf(b, n, "%.1f KB", bytes / 1024.0);
  return b;
}

static void mark(Graph *g, Value *v, int t, float scale) {
  v->narrow = t;
  v->qscale = t == DT_I8 ? scale : 0.0f;
  for (int i = 0; i < g->nnodes; i++) {
    Node *r = g->nodes[i];
    if (ir_is_view(r) && r->nin >= 1 && r->in[0] == v) mark(g, r->out, t, scale);
  }
}

/* A training step: the parameter weights' copies made once a step (by the precision pass: a cast, or a
 * convolution's weight reordered tap-major; by autodiff: a data gradient's transposed weight) that only
 * rounding GEMMs read, in 16 bits; every other value as its type */
static int train_weights(Graph *g, PassCtx *pc, Ctx *c, int t) {
  int n = 0;
  int64_t bytes = 0;
  float scale;
  const Node *why;
  for (int i = 0; i < g->nnodes; i++) {
    Node *d = g->nodes[i];
    if ((d->op != OP_CAST && d->op != OP_TRANSPOSE) || d->load_time || d->in[0]->def->op != OP_PARAM ||
        d->out->dtype != DT_F32)
      continue;
    if (stored(g, d) && producer_ok(group_main(g, d)) && (scale = 0.0f, readers_round(c, d->out, 1, 0, &why, &scale))) {
      mark(g, d->out, t, 1.0f);
      n++;
      bytes += ir_value_bytes(d->out) / 4 * dtype_size(t);
    }
  }
  char b1[32];
  if (pc->verbose)
    fprintf(stderr, "pass storage: training: %d parameter weights copied once a step stored as %s (%s); every other "
                    "value as its type (the gradients read the forward's values in float32)\n",
            n, dtype_name(t), kb(b1, sizeof b1, bytes));
  return 0;
}

int pass_storage(Graph *g, PassCtx *pc) {
  int prec = pc->precision;
  int narrowing = prec == PREC_FP16 || prec == PREC_BF16 || prec == PREC_INT8;
  if (pc->cublas || !narrowing) {
    if (pc->verbose) fprintf(stderr, "pass storage: every value stored as its type (%s)\n",
                             pc->cublas ? "cuBLAS reads float32" : "fp16, bf16 and int8 builds only");
    return 0;
  }
  Ctx c = {g, prec, arena_alloc(g->arena, sizeof(int) * (size_t)(g->next_value_id + 1))};
  for (int i = 0; i < g->noutputs; i++) c.is_output[g->outputs[i].v->id] = 1;
  for (int i = 0; i < g->nlosses; i++) c.is_output[g->losses[i].v->id] = 1;
  int t = prec == PREC_FP16 ? DT_F16 : prec == PREC_BF16 ? DT_BF16 : DT_I8, nhalf = 0, nfloat = 0;
  if (pc->train || g->training) return train_weights(g, pc, &c, t);
  int64_t saved = 0, total = 0;
  /* per node: 0 nothing stored (or a load-time weight), 1 narrow, 2 float32 (its kernel), 3 float32 (a reader: why[i]) */
  unsigned char *verdict = arena_alloc(g->arena, (size_t)g->nnodes + 1);
  const Node **why = arena_alloc(g->arena, sizeof(Node *) * ((size_t)g->nnodes + 1));
  float scale;
  int nweights = 0, ncast = 0;
  int64_t wsaved = 0, cbytes = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    Value *v = n->out;
    if ((ncc_ops[n->op].flags & OPF_SOURCE) || ir_is_view(n) || v->dtype != DT_F32) continue;
    if (n->load_time) {   /* a weight computed at load: a folded weight, a parameter's cast, an int8 weight's integers */
      int q8 = prec == PREC_INT8;
      if ((!q8 || n->op == OP_QUANTIZE) && stored(g, n) && producer_ok(group_main(g, n)) &&
          (scale = 0.0f, readers_round(&c, v, 1, 0, &why[i], &scale))) {
        int64_t bytes = ir_value_bytes(v);
        mark(g, v, t, 1.0f);   /* int8: the integers as they are (scale 1) */
        if (n->op == OP_CAST) {   /* a parameter's copy (the precision pass): new bytes, not saved ones */
          ncast++;
          cbytes += bytes / 4 * dtype_size(t);
        } else {
          nweights++;
          wsaved += bytes - bytes / 4 * dtype_size(t);
        }
      }
      continue;
    }
    if (n->grole == GROLE_SIDE || n->grole == GROLE_PROLOGUE || !stored(g, n)) continue;
    int64_t bytes = ir_value_bytes(v);
    total += bytes;
    if (!producer_ok(group_main(g, n))) {
      verdict[i] = 2;
    } else if (scale = 0.0f, !readers_round(&c, v, 0, 0, &why[i], &scale)) {
      verdict[i] = 3;
    } else {
      verdict[i] = 1;
      mark(g, v, t, scale);
      saved += bytes - bytes / 4 * dtype_size(t);
    }
    nhalf += verdict[i] == 1;
    nfloat += verdict[i] > 1;
  }
  if (!pc->verbose) return 0;
  char b1[32], b2[32];
  fprintf(stderr, "pass storage: %d values stored as %s (read by %s GEMMs alone), %d as f32; %s of %s saved\n", nhalf,
          dtype_name(t), ir_prec_name(prec), nfloat, kb(b1, sizeof b1, saved), kb(b2, sizeof b2, total));
  if (nweights)
    fprintf(stderr, "pass storage: %d load-time weights (%s) stored as %s, %s saved\n", nweights,
            prec == PREC_INT8 ? "int8 integers" : "folded or reordered", dtype_name(t), kb(b1, sizeof b1, wsaved));
  if (ncast)
    fprintf(stderr, "pass storage: %d parameter weights converted at load stored as %s (%s beside their float32)\n",
            ncast, dtype_name(t), kb(b1, sizeof b1, cbytes));
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i], *w = why[i];
    if (verdict[i] == 2) {
      const Node *m = group_main(g, n);
      fprintf(stderr, "  f32: %s (%%%d): its kernel's main op (%s) stores float32 only\n", vname(n), n->out->id,
              ncc_ops[m ? m->op : n->op].name);
    } else if (verdict[i] == 3 && !w) {
      fprintf(stderr, "  f32: %s (%%%d): an output\n", vname(n), n->out->id);
    } else if (verdict[i] == 3) {
      const char *how = w->grole == GROLE_PROLOGUE && w->op != OP_MAXPOOL2D
                            ? "as its GEMM loads it (a mean of rounded values is not the rounded mean)"
                        : w->grole == GROLE_PROLOGUE ? "as its GEMM loads it (at int8 a NaN must meet the max unquantized)"
                        : !(ncc_ops[w->op].flags & OPF_GEMM_LIKE) ? "in float32"
                        : w->prec != prec                         ? "at another precision"
                        : prec == PREC_INT8                       ? "with another activation scale"
                                                                  : "unrounded (its bias)";
      fprintf(stderr, "  f32: %s (%%%d): %s (%s) reads it %s\n", vname(n), n->out->id, vname(w), ncc_ops[w->op].name, how);
    }
  }
  return 0;
}
