/* precision.c — the math precision of every op, from --precision (PassCtx.precision).
 *
 * A per-op policy, printed in docs/precision.md:
 *   fp32  every op computes and stores in float32 (nothing to do).
 *   tf32  the GEMM-like ops (conv2d, linear, matmul) take TF32 operands: the
 *         kernel rounds each element of both operands to 10 mantissa bits as
 *         it loads it (ncc_tf32: to nearest, ties away, as cvt.rna.tf32.f32)
 *         and multiplies and accumulates in float32, as a tensor core does,
 *         and as PyTorch does for convolutions (torch.backends.cudnn.allow_tf32)
 *         and, when allowed, matmuls.
 *   fp16  the GEMM-like ops take FP16 operands (ncc_fp16: to nearest even, as
 *         cvt.rn.f16.f32, with fp16's range: subnormals, overflow to Inf) and
 *         accumulate in float32, as autocast's float16 GEMMs do;
 *   bf16  the same with BF16 operands (ncc_bf16: 7 mantissa bits, float32's
 *         exponent, to nearest even, as cvt.rn.bf16.f32).
 *   int8  (inference; calibrated by the driver, PassCtx.quant) each conv2d
 *         and linear with weights whose measured int8 error is small enough
 *         gets int8 operands and int32 sums (pass_int8, below); the others,
 *         matmul included, stay float32.
 * In every mode softmax, norms, losses, reductions and elementwise ops stay
 * float32 (autocast keeps the first four in float32), and values are stored
 * in float32 between kernels: a rounded operand is rounded again where the
 * next GEMM loads it, so the numbers are those of low-precision storage of
 * the GEMMs' inputs; the bytes are float32's.
 * In a training step (after autodiff) the gradients' GEMMs round their
 * operands too: conv2d's input gradient (dy and the weight), its weight
 * gradient (dy and the input), linear's weight gradient (dy and the input)
 * and its input gradient (a matmul of dy and the weight), as autocast's
 * backward runs the GEMMs of the forward's type.  Bias gradients, the
 * optimizer and the parameters (float32 master weights) stay float32.
 * Training at fp16 scales the loss, as torch.cuda.amp.GradScaler does: small
 * gradients would underflow fp16 operands (and big ones overflow to Inf).
 * The pass turns autodiff's seed (the const 1.0 gradient of the minimised
 * loss) into a loss_scale source; codegen renders it as a value the host
 * sets before each step (GradScaler's scale S, initially 65536 or
 * --loss-scale), so every gradient of the step is S times the true one.
 * Before the update, one kernel multiplies the gradients by 1/S in float32
 * and flags any Inf or NaN; a flagged step updates nothing (parameters and
 * optimizer state, Adam's step count included, stay) and halves S; after
 * 2000 steps in a row without one, S doubles (GradScaler's defaults:
 * backoff 0.5, growth 2, interval 2000).  bf16 keeps float32's exponent
 * range and needs none of it.
 * The decision is written on the IR (Node.prec, Graph.precision); the
 * verifier checks it and codegen renders it.  With --cublas a rounded GEMM
 * is a cuBLAS call with a reduced-precision compute type (ncc_gemm_ex:
 * cuBLAS rounds the operands itself on a GPU; the emulation rounds copies
 * with the kernels' functions before the CPU BLAS). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* ---- int8 -------------------------------------------------------------------
 * A calibrated conv2d or linear y = x W^T + b (ir_int8_candidate) becomes
 *   sw = qscale(W)                 load time: max |W[c, ...]| / 127 a channel
 *   Wq = quantize(W, sw)           load time: rint(W / sw), in [-127, 127]
 *   m  = op(x, Wq)   prec int8     x quantized as loaded (qscale: the
 *                                  calibrated activation scale sx); int32 sums
 *   y  = m * (sw * sx) [+ b]       the dequantization: an epilogue after fuse
 * Per output channel the weight's scale is exact where a folded batchnorm
 * scaled the channel: the integers are those of the unfolded weight. */
static void int8_layer(Graph *g, Node *nd, double sx) {
  Value *x = nd->in[0], *w = nd->in[1], *b = nd->nin > 2 ? nd->in[2] : NULL;
  Attrs a;
  ir_attrs_init(&a);
  a.nlist = w->shape.rank;
  a.list[0] = w->shape.d[0];
  for (int i = 1; i < a.nlist; i++) a.list[i] = 1;
  Value *sw = passes_mk(g, OP_QSCALE, w, NULL, &a, nd, 1);
  Value *wq = passes_mk(g, OP_QUANTIZE, w, sw, NULL, nd, 1);
  Attrs ca = nd->a;
  ca.has_bias = 0;
  Value *in[2] = {x, wq};
  Value *m = ir_node(g, nd->op, in, 2, &ca, nd->name, nd->layer, nd->loc);
  if (!m) ncc_die("precision: rebuilding %s at int8 failed", nd->layer ? nd->layer : "?");
  m->def->prec = PREC_INT8;
  m->def->qscale = (float)sx;
  int rank = nd->out->shape.rank;
  Value *k = passes_const(g, (double)(float)sx, nd);
  Value *sc = passes_mk(g, OP_MUL, passes_channel_view(g, sw, rank, 1, nd), k, NULL, nd, 1);
  Value *y = passes_mk(g, OP_MUL, m, sc, NULL, nd, 0);
  if (b) y = passes_mk(g, OP_ADD, y, passes_channel_view(g, b, rank, 1, nd), NULL, nd, 0);
  passes_replace_uses(g, nd->out, y);
  nd->dead = 1;
}

/* A calibrated matmul y = a b (ir_int8_candidate) becomes
 *   m = matmul(a, b)   prec int8    both operands quantized as loaded, a with
 *                                   its scale sa (qscale), b with sb (qscale_b);
 *                                   int32 sums
 *   y = m * (sa * sb)               the dequantization (float32 product): an epilogue after fuse */
static void int8_matmul(Graph *g, Node *nd, double sa, double sb) {
  Value *in[2] = {nd->in[0], nd->in[1]};
  Value *m = ir_node(g, OP_MATMUL, in, 2, &nd->a, nd->name, nd->layer, nd->loc);
  if (!m) ncc_die("precision: rebuilding %s at int8 failed", nd->layer ? nd->layer : "?");
  m->def->prec = PREC_INT8;
  m->def->qscale = (float)sa;
  m->def->qscale_b = (float)sb;
  Value *y = passes_mk(g, OP_MUL, m, passes_const(g, (double)((float)sa * (float)sb), nd), NULL, nd, 0);
  passes_replace_uses(g, nd->out, y);
  nd->dead = 1;
}

/* Each tensor-core GEMM's tile (Node.tile): --gemm-tile's, else --autotune's
 * (PassCtx.tune, by ir_gemm_key), else the model's (ir_tile_choose; -v prints
 * each choice and its reason) */
static void choose_tiles(Graph *g, const PassCtx *c) {
  for (int i = 0; i < g->nnodes; i++) {
    Node *nd = g->nodes[i];
    nd->tile = 0;
    nd->pipe = nd->pipe_a = nd->pipe_r = 0;
    if (!ir_gemm_mma(nd)) continue;
    nd->pipe = c->gemm_pipe ? (c->gemm_stages ? c->gemm_stages : 2) : 0;   /* the stages asked; fitted below */
    char why[256], key[256];
    nd->tile = 1 + ir_tile_choose(nd, c->gemm_tile - 1, why, sizeof why);
    nd->tile_why = NULL;
    if (!c->gemm_tile && c->tune && ir_gemm_key(nd, key, sizeof key) == 0)   /* --autotune's choice */
      for (int k = 0; k < c->tune->n; k++)
        if (!strcmp(c->tune->e[k].key, key)) {
          nd->tile = 1 + c->tune->e[k].tile;
          nd->tile_why = c->tune->e[k].why;
          snprintf(why, sizeof why, "%s", nd->tile_why);
          break;
        }
    char stages[96] = "";
    if (nd->pipe) {   /* the stages that fit the tile's shared memory (ir_pipe_stages); A's copies but at int8 128x64 */
      IrTile t = ir_gemm_tile(nd);
      int want = nd->pipe;
      nd->pipe = ir_pipe_stages(&t, want, nd->prec);
      nd->pipe_a = !(nd->prec == PREC_INT8 && t.minb);
      nd->pipe_r = t.threads >= 256 && !(nd->op == OP_CONV2D_BWD_WEIGHT && ir_tile_minb(nd, &t));
      if (nd->pipe < want)
        snprintf(stages, sizeof stages, "; %d stages (%d would pass %d KiB of shared memory)", nd->pipe, want,
                 IR_PIPE_SMEM / 1024);
      else if (nd->pipe > 2)
        snprintf(stages, sizeof stages, "; %d stages", nd->pipe);
    }
    if (c->verbose)
      fprintf(stderr, "pass precision: %s %s: tile %s%s\n", ncc_ops[nd->op].name, nd->name ? nd->name : nd->layer ? nd->layer : "",
              why, stages);
  }
}

/* Each float32 tiled GEMM's tile (Node.tile: 1 + IR_TILE_128x128 or
 * IR_TILE_64x128, the wider ones, or 0): --gemm-tile's (64x64, 64x128 or
 * 128x128), else ir_fp32_tile_choose's
 * rule; with --gemm-pipeline=on, two stages (Node.pipe = 2) for the wide
 * tile, and for the 64 x 64 and 64 x 128 ones too with --gemm-stages=2
 * (ir_fp32_pipe_ok, ir_fp32_two_stages);
 * --autotune's tile and stages where it tried the shape (PassCtx.tune, an
 * entry with stages; Node.tile_why its reason); -v prints each choice and
 * its reason.  passes_run calls it after any
 * pipeline: at fp32 no precision pass runs, and at the other precisions the
 * layers int8 leaves in float32 take it too. */
void passes_fp32_tiles(Graph *g, const PassCtx *c) {
  for (int i = 0; i < g->nnodes; i++) {
    Node *nd = g->nodes[i];
    if (nd->dead || !ir_fp32_tiled(nd)) continue;   /* (float32: not a tensor-core GEMM) */
    nd->tile = nd->pipe = 0;
    if (c->cublas) continue;
    const TuneEntry *te = NULL;   /* --autotune's choice of tile and stages */
    char key[256];
    if (!c->gemm_tile && c->tune && ir_gemm_key(nd, key, sizeof key) == 0)
      for (int k = 0; k < c->tune->n && !te; k++)
        if (c->tune->e[k].stages && !strcmp(c->tune->e[k].key, key)) te = &c->tune->e[k];
    if (te) {
      nd->tile = te->tile == IR_TILE_64x64 ? 0 : 1 + te->tile;
      nd->pipe = te->stages == 2 && c->gemm_pipe ? 2 : 0;
      nd->tile_why = te->why;
      if (c->verbose)
        fprintf(stderr, "tiles: %s %s: fp32 tile %s\n", ncc_ops[nd->op].name,
                nd->name ? nd->name : nd->layer ? nd->layer : "", te->why);
      continue;
    }
    char why[256];
    /* --gemm-tile: 64x128 or 128x128, else the default (another tile is a tensor core's: an int8 model's fp32
     * layers) */
    int ft = c->gemm_tile - 1, forced = !c->gemm_tile ? -1 : ft == IR_TILE_64x128 || ft == IR_TILE_128x128 ? ft
                                                                                                       : IR_TILE_64x64;
    int t = ir_fp32_tile_choose(nd, forced, why, sizeof why);
    nd->tile = t == IR_TILE_64x64 ? 0 : 1 + t;
    nd->tile_why = NULL;
    /* two stages: the wide tile's, every float4 tile's with --gemm-stages=2 at fp32 (ir_fp32_two_stages) */
    nd->pipe = c->gemm_pipe && ir_fp32_pipe_ok(nd) &&
               ir_fp32_two_stages(t, c->precision == PREC_FP32 && c->gemm_stages == 2) ? 2 : 0;
    if (c->verbose)
      fprintf(stderr, "tiles: %s %s: fp32 tile %s%s\n", ncc_ops[nd->op].name,
              nd->name ? nd->name : nd->layer ? nd->layer : "", why, nd->pipe ? "; two stages" : "");
  }
}

static int pass_int8(Graph *g, PassCtx *c) {
  const QuantTable *qt = c->quant;
  if (!qt) {
    diag_error((Loc){0}, "precision: int8 needs calibration (--calibrate=X.npy, or --calibration-cache=FILE "
                         "written by an earlier calibration)");
    return -1;
  }
  if (c->train) {
    diag_error((Loc){0}, "precision: int8 is for inference; training runs at fp32, bf16 or fp16");
    return -1;
  }
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->prec == PREC_INT8) {
      diag_error((Loc){0}, "precision: the graph is at int8 already (the pass ran before)");
      return -1;
    }
  g->precision = PREC_INT8;
  g->quant = qt;
  int n0 = g->nnodes, nq = 0, nf = 0;
  for (int i = 0; i < n0; i++) {
    Node *nd = g->nodes[i];
    nd->prec = PREC_FP32;
    if (!ir_int8_candidate(nd)) continue;
    char key[160], kb[170];
    const QuantLayer *L = ir_quant_find(qt, ir_layer_key(nd, key, sizeof key)), *Lb = NULL;
    if (L && nd->op == OP_MATMUL) {   /* its second operand's scale */
      snprintf(kb, sizeof kb, "%s%s", key, IR_INT8_TAP_B);
      Lb = ir_quant_find(qt, kb);
    }
    if (!L || (nd->op == OP_MATMUL && !Lb)) {
      if (qt->fp32_missing) continue;
      diag_error(nd->loc, "precision: int8: the calibration (%s) has no layer '%s': it was made for another model",
                 qt->source, L ? kb : key);
      return -1;
    }
    if (L->prec != PREC_INT8 || (Lb && Lb->prec != PREC_INT8)) {
      nd->prec = L->prec != PREC_INT8 ? L->prec : Lb->prec;   /* the fallback: fp32, or fp16/bf16 (--int8-fallback) */
      nf++;
      continue;
    }
    if (nd->op == OP_MATMUL) int8_matmul(g, nd, L->scale, Lb->scale);
    else int8_layer(g, nd, L->scale);
    nq++;
  }
  ir_compact(g);
  passes_reorder(g);
  passes_load_time_first(g);
  choose_tiles(g, c);
  if (c->verbose)
    fprintf(stderr, "pass precision: int8: %d conv2d/linear/matmul op%s with int8 operands and int32 sums, %d fell back "
            "(to fp32, or --int8-fallback's precision), the rest in float32\n", nq, nq == 1 ? "" : "s", nf);
  return 0;
}

/* fp16/bf16: the weights converted once.  A GEMM rounds its operands to the
 * low type as it loads them, so a float32 parameter it reads as a weight
 * (conv2d's and linear's weight, either operand of a matmul) may be read
 * from a copy: a cast node, shared by the GEMMs that read one parameter,
 * which the storage pass then stores in 16 bits.  The parameter itself
 * stays float32 (M_load fills it, M_save writes it, the update writes it).
 * In inference the copy is made at load (a load-time cast, redone after
 * every load; the fold pass has reordered the convolutions' weights
 * tap-major before).  In a training step it is made once a step, before
 * the forward reads it (the update changes the parameter), as autocast
 * does: the forward's GEMMs read it, the gradients' GEMMs (conv2d_bwd_*)
 * keep the parameter.  There the copy of a convolution's weight that
 * ir_conv_tap_major_ok accepts is the fold pass's reorder instead, a
 * transpose to [out, kh, kw, in/groups] (Attrs.wtap), as fold makes at load
 * for inference (fold does not run on a training step).  Not with --cublas
 * (cuBLAS reads float32 operands).  Returns the copies made; *taps those
 * reordered. */
static int convert_weights(Graph *g, const PassCtx *c, int *taps) {
  int train = c->train || g->training;
  *taps = 0;
  if (c->cublas || (g->precision != PREC_FP16 && g->precision != PREC_BF16)) return 0;
  Value **cast = arena_alloc(g->arena, sizeof(Value *) * ((size_t)g->next_value_id + 1));
  Value **tap = arena_alloc(g->arena, sizeof(Value *) * ((size_t)g->next_value_id + 1));
  Attrs ta;   /* [out, in/g, kh, kw] -> [out, kh, kw, in/g] */
  ir_attrs_init(&ta);
  ta.nlist = 4;
  ta.list[0] = 0, ta.list[1] = 2, ta.list[2] = 3, ta.list[3] = 1;
  int made = 0, nn = g->nnodes;
  for (int i = 0; i < nn; i++) {
    Node *nd = g->nodes[i];
    if (nd->dead || nd->load_time || !(ncc_ops[nd->op].flags & OPF_GEMM_LIKE) || nd->prec != g->precision) continue;
    for (int j = 0; j < nd->nin && j < 2; j++) {
      Value *w = nd->in[j];
      if (!(j == 1 || nd->op == OP_MATMUL) || w->def->op != OP_PARAM || w->dtype != DT_F32) continue;
      int t = train && j == 1 && !nd->a.wtap && ir_conv_tap_major_ok(nd);
      Value **copy = t ? tap : cast;
      if (!copy[w->id]) {
        copy[w->id] = t ? passes_mk(g, OP_TRANSPOSE, w, NULL, &ta, nd, 0) : passes_mk(g, OP_CAST, w, NULL, NULL, nd, !train);
        made++;
        *taps += t;
      }
      nd->in[j] = copy[w->id];
      nd->a.wtap |= t;
      w->nuses--;
      copy[w->id]->nuses++;
    }
  }
  if (made && train) passes_reorder(g);   /* each copy before its first reader */
  else if (made) passes_load_time_first(g);
  return made;
}

int pass_precision(Graph *g, PassCtx *c) {
  int prec = c->precision, n = 0;
  if (prec == PREC_INT8) return pass_int8(g, c);
  if (prec < PREC_FP32 || prec > PREC_BF16) {
    diag_error((Loc){0}, "precision: unknown precision %d", prec);
    return -1;
  }
  if (c->train && prec == PREC_FP16) {
    Node *seed = g->train.seed ? g->train.seed->def : NULL;
    /* a loss_scale seed already: the pass ran before (--passes=...,precision,precision) */
    if (!seed || (seed->op != OP_LOSS_SCALE && (seed->op != OP_CONST || seed->a.fval != 1.0))) {
      diag_error((Loc){0}, "precision: fp16 training needs autodiff's seed (the const 1.0 gradient of the loss) "
                           "to scale; run autodiff first");
      return -1;
    }
    if (seed->op == OP_CONST) {
      seed->op = OP_LOSS_SCALE;
      seed->a.fval = g->train.init_scale = c->loss_scale > 0 ? c->loss_scale : 65536.0;
      g->train.loss_scaling = 1;
    }
  }
  g->precision = prec;
  for (int i = 0; i < g->nnodes; i++) {
    Node *nd = g->nodes[i];
    int gemm = ir_op_rounds(nd->op) && !nd->load_time;
    nd->prec = gemm ? g->precision : PREC_FP32;
    n += nd->prec != PREC_FP32;
  }
  int taps, casts = convert_weights(g, c, &taps);
  choose_tiles(g, c);
  static const char *const upper[] = {"FP32", "TF32", "FP16", "BF16"};
  if (c->verbose && g->precision != PREC_FP32)
    fprintf(stderr, "pass precision: %s: %d GEMM-like op%s with %s operands, the rest in float32%s\n",
            ir_prec_name(g->precision), n, n == 1 ? "" : "s", upper[g->precision],
            g->train.loss_scaling ? "; the loss scaled (dynamic, as GradScaler)" : "");
  else if (c->verbose)
    fprintf(stderr, "pass precision: fp32: every op in float32\n");
  if (c->verbose && casts)
    fprintf(stderr, "pass precision: %d parameter weight%s converted %s (a cast each%s, which storage stores as %s)\n",
            casts, casts == 1 ? "" : "s", c->train || g->training ? "once a step" : "at load",
            taps ? ", or a conv2d's reordered tap-major" : "", g->precision == PREC_FP16 ? "f16" : "bf16");
  return 0;
}
