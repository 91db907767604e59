/* tile.c — the tensor-core GEMM's tile, and the analytic model that picks it
 * (docs/gpu.md, "Tile choice").
 *
 * A tensor-core GEMM (ir_gemm_mma) computes its output in BM x BN tiles, a
 * block of `threads` threads (WM x WN warps) each; ir_mma_tiles lists the
 * tiles codegen can render.  The precision pass records each GEMM's choice
 * on the node (Node.tile): the tile --gemm-tile forces, or the one the model
 * below gives the least time.  The model stands in for timing on a GPU (none
 * answers at compile time):
 *
 *   blocks   = ceil(M / BM) ceil(N / BN) Z   (split-K GEMMs keep the default
 *              tile: ir_gemm_split_k chose their ranges for it)
 *   resident = blocks an SM holds at once (ir_occupancy: threads, registers,
 *              shared memory, blocks; ir_tile_machine: an H100's SMs)
 *   per_sm   = ceil(blocks / SMs): the blocks the busiest SM runs (waves)
 *   warps    = min(resident, per_sm) x threads / 32: warps it runs at once
 *   cost     = ceil(K / 16) x (IR_TILE_STAGE x (BM + BN) x 16 / 32
 *                              + IR_TILE_MMA x MMAs a K tile):
 *              warp instructions of a block's main loop (the staging of the
 *              two tiles, then the MMAs with their fragment loads)
 *   time     = per_sm x cost / (4 x min(1, warps / IR_TILE_HIDE_WARPS))
 *              cycles: the four schedulers of an SM issue one instruction
 *              each a cycle when 8 warps (two a scheduler, each with MI x NJ
 *              independent MMAs and its loads) hide the latencies,
 *              proportionally less with fewer.
 *
 * The constants are estimates from the SASS of the generated 64 x 64 kernels
 * (nvcc 13, sm_90; docs/gpu.md has the figures), not GPU timings: a staged
 * element costs its address, load, rounding and store, a MMA its fragment
 * loads.  A larger
 * tile stages fewer elements a MMA but launches fewer blocks: it wins where
 * the smaller tile already fills the SMs. */
#include "ir.h"

#include <stdio.h>
#include <string.h>

/* BM, BN, WM, WN, threads, minb (__launch_bounds__), then the registers a
 * thread of a convolution's kernel (its im2col state) and of a linear's or
 * matmul's.  64 x 64 and the larger tiles: ptxas's most over tf32 and fp16
 * (nvcc 13, sm_90, VGG-16 at batch 32), rounded up to 8.  The smaller
 * defaults: upper bounds (MobileNetV2's convolutions measured 40 at 16 x 64,
 * 80 at 32 x 64, 48 at 64 x 32; 16 x 32 and 32 x 32 are estimates).  The
 * first six are the default tiles by shape (ir_tile_default); the last three
 * the larger ones the model may choose.  128 x 64 asks for three
 * blocks an SM (168 registers; four would spill); 128 x 128 asks for none:
 * with two its convolutions spill a few bytes, so one block of 8 warps. */
const IrTile ir_mma_tiles[IR_NTILES] = {
  {16, 32, 1, 4, 128, 0, 64, 64},    {16, 64, 1, 4, 128, 0, 72, 64},    {32, 32, 2, 2, 128, 0, 72, 64},
  {32, 64, 2, 2, 128, 0, 96, 64},    {64, 32, 2, 2, 128, 0, 96, 64},    {64, 64, 2, 2, 128, 0, 120, 64},
  {128, 64, 2, 2, 128, 3, 160, 128}, {64, 128, 2, 2, 128, 0, 192, 128}, {128, 128, 2, 4, 256, 0, 160, 128},
};

const IrMachine ir_tile_machine = {132, 2048, 32, 228 * 1024};   /* an H100 (sm_90): the split-K model's machine */

static int64_t round_up(int64_t x, int64_t u) { return (x + u - 1) / u * u; }

IrOcc ir_occupancy(const IrMachine *a, int threads, int regs, int64_t smem_static, int64_t smem_dyn) {
  IrOcc o = {a->blocks_sm, 'b'};
  int warps = (threads + 31) / 32;
  int lim_t = a->threads_sm / 32 / warps;
  int64_t regs_warp = round_up((int64_t)(regs > 0 ? regs : 1) * 32, IR_OCC_REG_UNIT);
  int lim_r = regs > 255 || regs_warp * round_up(warps, 4) > IR_OCC_REGS_SM
                  ? 0 : (int)((IR_OCC_REGS_SM / 4 / regs_warp) * 4 / warps);
  int64_t smem = round_up(smem_static + smem_dyn + IR_OCC_SMEM_RESERVED, IR_OCC_SMEM_UNIT);
  int lim_s = smem_static > IR_OCC_SMEM_STATIC_MAX || smem > a->smem_sm ? 0 : (int)(a->smem_sm / smem);
  if (lim_t < o.per_sm) o.per_sm = lim_t, o.limit = 't';
  if (lim_r < o.per_sm) o.per_sm = lim_r, o.limit = 'r';
  if (lim_s < o.per_sm) o.per_sm = lim_s, o.limit = 's';
  return o;
}

int ir_tile_default(int64_t M, int64_t N) {
  int bm = M >= 64 ? 64 : M >= 32 ? 32 : 16, bn = N >= 64 ? 64 : 32;
  for (int i = 0; i < IR_NTILES; i++)
    if (ir_mma_tiles[i].BM == bm && ir_mma_tiles[i].BN == bn) return i;
  return IR_TILE_64x64;
}

int ir_tile_lookup(const char *s) {
  int bm, bn, len = 0;
  if (!s || sscanf(s, "%dx%d%n", &bm, &bn, &len) != 2 || s[len]) return -1;
  for (int i = 0; i < IR_NTILES; i++)
    if (ir_mma_tiles[i].BM == bm && ir_mma_tiles[i].BN == bn) return i;
  return -1;
}

IrTile ir_gemm_tile(const Node *n) {
  int64_t M, N, K, Z;
  if (n->tile > 0 && n->tile <= IR_NTILES) return ir_mma_tiles[n->tile - 1];
  ir_gemm_dims(n, &M, &N, &K, &Z);
  return ir_mma_tiles[ir_tile_default(M, N)];
}

int ir_tile_regs(const Node *n, const IrTile *t) { return n->op == OP_CONV2D ? t->regs_conv : t->regs_gemm; }

int ir_tile_minb(const Node *n, const IrTile *t) {
  return n->op == OP_CONV2D_BWD_WEIGHT && t->threads >= 256 && !t->minb ? 2 : t->minb;
}

int ir_wgrad_tap_cols(const Node *n) {
  if (n->op != OP_CONV2D_BWD_WEIGHT || !ir_grad_gemm(n)) return 0;
  int64_t M, N, K, Z, Cg = n->out->shape.d[1];   /* the weight [O, Cg, KH, KW] */
  ir_gemm_dims(n, &M, &N, &K, &Z);
  int bn = ir_gemm_mma(n) ? ir_gemm_tile(n).BN : N >= 64 ? 64 : N >= 32 ? 32 : 16;
  return Cg % bn == 0 ? bn : 0;
}

int ir_dgrad_tap_k(const Node *n) {
  if (n->op != OP_CONV2D_BWD_DATA || !ir_grad_gemm(n)) return 0;
  if (ir_dgrad_phases(n)) return 1;
  if (n->a.kernel[0] * n->a.kernel[1] == 1) return 0;
  return n->in[0]->shape.d[1] / n->a.groups % 16 == 0;   /* dy [N, O, OH, OW]: Og */
}

int64_t ir_pipe_smem(const IrTile *t, int stages, int prec) {
  return (int64_t)stages * (t->BM + t->BN) * (prec == PREC_TF32 ? IR_PIPE_ROW_BYTES_TF32 : IR_PIPE_ROW_BYTES);
}

int ir_pipe_stages(const IrTile *t, int want, int prec) {
  int s = want < 2 ? 2 : want > IR_PIPE_MAX_STAGES ? IR_PIPE_MAX_STAGES : want;
  while (s > 2 && ir_pipe_smem(t, s, prec) > IR_PIPE_SMEM) s--;
  return s;
}

/* Bytes of one staged operand element: tf32 a float, fp16/bf16 16 bits, int8 a byte */
static int elem_bytes(int prec) { return prec == PREC_INT8 ? 1 : prec == PREC_FP16 || prec == PREC_BF16 ? 2 : 4; }

double ir_tile_model(const Node *n, int t, IrTileEst *e) {
  int64_t M, N, K, Z;
  ir_gemm_dims(n, &M, &N, &K, &Z);
  const IrTile *c = &ir_mma_tiles[t];
  const IrMachine *a = &ir_tile_machine;
  IrTileEst x;
  x.blocks = (M + c->BM - 1) / c->BM * ((N + c->BN - 1) / c->BN) * Z;
  /* the tiles' shared memory: one K tile of each, or (pipelined) the stages of both at the precision's row bytes */
  int64_t smem = n->pipe ? ir_pipe_smem(c, ir_pipe_stages(c, n->pipe, n->prec), n->prec)
                         : (int64_t)(c->BM + c->BN) * 16 * elem_bytes(n->prec);
  IrOcc o = ir_occupancy(a, c->threads, ir_tile_regs(n, c), smem, 0);
  x.resident = o.per_sm, x.limit = o.limit;
  x.per_sm = (x.blocks + a->sms - 1) / a->sms;
  x.waves = o.per_sm > 0 ? (double)x.blocks / ((double)a->sms * o.per_sm) : 0;
  int64_t conc = x.per_sm < x.resident ? x.per_sm : x.resident;
  double warps = (double)conc * c->threads / 32, eff = warps >= IR_TILE_HIDE_WARPS ? 1 : warps / IR_TILE_HIDE_WARPS;
  /* MMAs a K tile of 16: m16n8k8 at tf32 (two a K tile), m16n8k16 otherwise */
  double mmas = (double)c->BM * c->BN / 128 * (n->prec == PREC_TF32 ? 2 : 1);
  double tile = IR_TILE_STAGE * (c->BM + c->BN) * 16 / 32 + IR_TILE_MMA * mmas, cost = (double)((K + 15) / 16) * tile;
  x.cycles = o.per_sm > 0 ? (double)x.per_sm * cost / (4 * eff) : 1e300;
  int P = ir_dgrad_phases(n);
  if (P && o.per_sm > 0) {   /* by phases: K is the longest phase's; the phases' K tiles average KH KW Og / 16 / P, and
                                the longest phase's block bounds the time however few the blocks */
    double avg = (double)n->a.kernel[0] * n->a.kernel[1] * (n->in[0]->shape.d[1] / n->a.groups) / 16 / P;
    double thru = (double)x.per_sm * avg * tile, crit = cost;
    x.cycles = (thru > crit ? thru : crit) / (4 * eff);
  }
  if (e) *e = x;
  return x.cycles;
}

int ir_tile_candidates(const Node *n, int out[IR_NTILES]) {
  int64_t M, N, K, Z;
  ir_gemm_dims(n, &M, &N, &K, &Z);
  int k = 0;
  out[k++] = ir_tile_default(M, N);
  if (ir_gemm_split_k(n) > 1) return k;   /* its ranges were sized for the default tile */
  if (ir_grad_split(n)) return k;   /* a long-K gradient: split for 64 x 64 blocks, or enough of them already */
  for (int i = IR_TILE_64x64 + 1; i < IR_NTILES; i++) {
    const IrTile *c = &ir_mma_tiles[i];
    if (M < c->BM || N < c->BN) continue;   /* a tile mostly padding */
    if (n->op == OP_CONV2D && c->BM < c->BN) continue;   /* 128 im2col columns for 4 warps: 190 registers */
    out[k++] = i;
  }
  return k;
}

int ir_tile_choose(const Node *n, int forced, char *why, size_t nwhy) {
  int64_t M, N, K, Z;
  ir_gemm_dims(n, &M, &N, &K, &Z);
  int d = ir_tile_default(M, N), best = d;
  IrTileEst ed, eb;
  double td = ir_tile_model(n, d, &ed), tb = td;
  if (forced >= 0) {
    best = forced;
    tb = ir_tile_model(n, best, &eb);
  }
  int cand[IR_NTILES], nc = ir_tile_candidates(n, cand);
  if (forced < 0) {
    eb = ed;
    for (int j = 1; j < nc; j++) {
      IrTileEst e;
      double t = ir_tile_model(n, cand[j], &e);
      if (t < IR_TILE_MARGIN * tb) best = cand[j], tb = t, eb = e;   /* the larger tile must clearly win */
    }
  }
  if (why) {
    const IrTile *c = &ir_mma_tiles[best];
    if (forced >= 0)
      snprintf(why, nwhy, "%dx%d, forced (--gemm-tile); model %.2fx of the %dx%d default", c->BM, c->BN, tb / td,
               ir_mma_tiles[d].BM, ir_mma_tiles[d].BN);
    else if (ir_gemm_split_k(n) > 1)
      snprintf(why, nwhy, "%dx%d, the default: split-K into %d ranges", c->BM, c->BN, ir_gemm_split_k(n));
    else if (ir_grad_split(n))
      snprintf(why, nwhy, "%dx%d, the default: a gradient GEMM of K %lld keeps it (%lld blocks, enough without "
               "split-K)", c->BM, c->BN, (long long)K, (long long)ed.blocks);
    else if (nc == 1)
      snprintf(why, nwhy, "%dx%d, the default: no larger tile suits a %lld x %lld GEMM (128 rows need M >= 128%s)",
               c->BM, c->BN, (long long)M, (long long)N, n->op == OP_CONV2D ? "; a convolution takes no 64x128"
                                                                             : ", 128 columns N >= 128");
    else if (best == d)
      snprintf(why, nwhy, "%dx%d, the default: %lld blocks, %d a SM resident (%c), %.2f waves; no larger tile models "
               "%.0f%% less time", c->BM, c->BN, (long long)ed.blocks, ed.resident, ed.limit, ed.waves,
               100 * (1 - IR_TILE_MARGIN));
    else
      snprintf(why, nwhy, "%dx%d: %lld blocks, %d a SM resident (%c), %.2f waves; model %.2fx of the %dx%d default "
               "(%lld blocks)", c->BM, c->BN, (long long)eb.blocks, eb.resident, eb.limit, eb.waves, tb / td,
               ir_mma_tiles[d].BM, ir_mma_tiles[d].BN, (long long)ed.blocks);
  }
  return best;
}

int ir_gemm_key(const Node *n, char *buf, size_t len) {
  const char *pr = ir_prec_name(n->prec);
  int w;
  if (n->op == OP_CONV2D) {
    const Shape *x = &n->in[0]->shape, *k = &n->in[1]->shape;
    const Attrs *a = &n->a;
    /* the weight's dims as declared, [out, in/groups, kh, kw]; a tap-major one's kernel differs: its own key */
    int t = a->wtap, ci = t ? 3 : 1, kh = t ? 1 : 2, kw = t ? 2 : 3;
    w = snprintf(buf, len, "%s conv2d x=%lldx%lldx%lldx%lld w=%lldx%lldx%lldx%lld s=%dx%d p=%dx%d d=%dx%d g=%d%s", pr,
                 (long long)x->d[0], (long long)x->d[1], (long long)x->d[2], (long long)x->d[3], (long long)k->d[0],
                 (long long)k->d[ci], (long long)k->d[kh], (long long)k->d[kw], a->stride[0], a->stride[1], a->pad[0],
                 a->pad[1], a->dilation[0], a->dilation[1], a->groups, t ? " tap-major" : "");
  } else if (n->op == OP_LINEAR) {
    int64_t M, N, K, Z;
    ir_gemm_dims(n, &M, &N, &K, &Z);
    w = snprintf(buf, len, "%s linear m=%lld k=%lld n=%lld", pr, (long long)M, (long long)K, (long long)N);
  } else if (n->op == OP_MATMUL) {
    w = snprintf(buf, len, "%s matmul a=", pr);
    for (int j = 0; j < 2 && w >= 0 && (size_t)w < len; j++) {
      const Shape *s = &n->in[j]->shape;
      for (int i = 0; i < s->rank && w >= 0 && (size_t)w < len; i++)
        w += snprintf(buf + w, len - (size_t)w, "%s%lld", i ? "x" : "", (long long)s->d[i]);
      if (!j && (size_t)w < len) w += snprintf(buf + w, len - (size_t)w, " b=");
    }
  } else {
    return -1;   /* the gradients' GEMMs keep the model's tile */
  }
  return w < 0 || (size_t)w >= len ? -1 : 0;
}

const char *ir_tile_why(const Node *n, char *why, size_t nwhy) {
  if (n->tile_why) {
    snprintf(why, nwhy, "%s", n->tile_why);
    return why;
  }
  int t = n->tile > 0 ? n->tile - 1 : -1;
  if (ir_tile_choose(n, -1, why, nwhy) != t && t >= 0) ir_tile_choose(n, t, why, nwhy);
  return why;
}

int ir_fp32_tiled(const Node *n) {
  if (n->prec != PREC_FP32 || n->load_time) return 0;
  if (n->op == OP_CONV2D) return !ir_conv_direct(n);
  return (n->op == OP_LINEAR || n->op == OP_MATMUL) && !ir_gemm_gemv(n);
}

int ir_fp32_tile_choose(const Node *n, int forced, char *why, size_t nwhy) {
  int64_t M, N, K, Z;
  ir_gemm_dims(n, &M, &N, &K, &Z);
  int64_t blocks = (M + 127) / 128 * ((N + 127) / 128) * Z, b64 = (M + 63) / 64 * ((N + 127) / 128) * Z;
  int sk = ir_gemm_split_k(n), t;
  int dm = ir_fp32_tile_dim(M), dn = ir_fp32_tile_dim(N);   /* the default tile by shape */
  if (forced >= 0) t = forced;
  else if (sk == 1 && M >= 128 && N >= 128 && blocks >= IR_FP32_WIDE_BLOCKS) t = IR_TILE_128x128;
  else if (sk == 1 && M >= 64 && N >= 128 && b64 >= IR_FP32_WIDE_BLOCKS) t = IR_TILE_64x128;
  else t = IR_TILE_64x64;
  if (why) {
    long long w = M >= 128 ? blocks : b64;   /* the widest tile the shape takes, its blocks */
    if (forced >= 0 && t == IR_TILE_128x128)
      snprintf(why, nwhy, "128x128, forced (--gemm-tile); %lld blocks of 128x128", (long long)blocks);
    else if (forced >= 0 && t == IR_TILE_64x128)
      snprintf(why, nwhy, "64x128, forced (--gemm-tile); %lld blocks of 64x128", (long long)b64);
    else if (forced >= 0)
      snprintf(why, nwhy, "%dx%d, the default, forced (--gemm-tile)", dm, dn);
    else if (sk > 1)
      snprintf(why, nwhy, "%dx%d, the default: split-K into %d ranges", dm, dn, sk);
    else if (t == IR_TILE_128x128)
      snprintf(why, nwhy, "128x128: %lld blocks of 128x128, at least %d (two a SM on %d SMs)", (long long)blocks,
               IR_FP32_WIDE_BLOCKS, ir_tile_machine.sms);
    else if (t == IR_TILE_64x128)
      snprintf(why, nwhy, "64x128: %lld blocks of 64x128, at least %d (two a SM on %d SMs)%s", (long long)b64,
               IR_FP32_WIDE_BLOCKS, ir_tile_machine.sms, M >= 128 ? "; too few of 128x128" : "");
    else if (M < 64 || N < 128)
      snprintf(why, nwhy, "%dx%d, the default: a %lld x %lld GEMM (the wider tiles need M >= 64 and N >= 128)", dm, dn,
               (long long)M, (long long)N);
    else
      snprintf(why, nwhy, "%dx%d, the default: %lld blocks of %s, fewer than %d (two a SM on %d SMs)", dm, dn, w,
               M >= 128 ? "128x128" : "64x128", IR_FP32_WIDE_BLOCKS, ir_tile_machine.sms);
  }
  return t;
}

int ir_fp32_pipe_ok(const Node *n) {
  if (!ir_fp32_tiled(n)) return 0;
  int64_t M, N, K, Z;
  ir_gemm_dims(n, &M, &N, &K, &Z);
  return ir_fp32_tile(n) != IR_TILE_64x64 || (ir_fp32_tile_dim(M) == 64 && ir_fp32_tile_dim(N) == 64);
}

int ir_fp32_two_stages(int t, int stages2) { return t == IR_TILE_128x128 || stages2; }

int ir_fp32_candidates(const Node *n, int pipe, int stages2, int tile[6], int stages[6], int *pick) {
  *pick = 0;
  if (!ir_fp32_tiled(n)) return 0;
  int64_t M, N, K, Z;
  ir_gemm_dims(n, &M, &N, &K, &Z);
  int c = 0, sk1 = ir_gemm_split_k(n) == 1;
  int four = ir_fp32_tile_dim(M) == 64 && ir_fp32_tile_dim(N) == 64;   /* the default tile reads float4s */
  int rule = ir_fp32_tile_choose(n, -1, NULL, 0);
  static const int tiles[3] = {IR_TILE_64x64, IR_TILE_64x128, IR_TILE_128x128};
  for (int w = 0; w < 3; w++) {
    int t = tiles[w];
    if ((t == IR_TILE_64x128 && !(sk1 && M >= 64 && N >= 128)) || (t == IR_TILE_128x128 && !(sk1 && M >= 128 && N >= 128)))
      continue;
    for (int st = 1; st <= 2; st++) {
      if (st == 2 && !(pipe && (w || four))) continue;
      /* the rule's tile, in the stages passes_fp32_tiles gives it */
      if (t == rule && st == (pipe && (w || four) && ir_fp32_two_stages(t, stages2) ? 2 : 1)) *pick = c;
      tile[c] = t, stages[c] = st, c++;
    }
  }
  return c;
}
