/* gemm.c — conv2d, linear and matmul: a shared-memory tiled GEMM kernel
 * (implicit GEMM for convolutions, no im2col buffer), a direct kernel for
 * convolutions with few output channels per group (depthwise), and the
 * cuBLAS path (CodegenOpts.use_cublas) through ncc_sgemm.
 *
 * The tiled kernel is written once, for C[z][m][n] = sum_k A(z,m,k) B(z,k,n):
 * each op supplies C statements that load one element of A and of B, the
 * index of the output element and the bias term.  Blocks of 16x16 threads
 * compute a (16*TM) x (16*TN) tile, each thread a TM x TN micro-tile strided
 * by 16 so that stores are coalesced along n; K advances by 16, both tiles
 * staged through shared memory between two barriers.  Each operand is loaded
 * along its contiguous axis (k or m/n) so consecutive threads read
 * consecutive addresses.  The epilogue (bias, then the group's elementwise
 * chain) runs on the accumulator just before the single store. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cg.h"

#define LL(x) ((long long)(x))
#define BK 16

typedef struct GemmSpec {
  int64_t M, N, K, Z;
  int a_kcontig, b_kcontig;
  char a_load[2048];   /* statement: sets float v from A(z, m, k), indices in range */
  char b_load[2048];   /* statement: sets float v from B(z, k, n) */
  char a_bits[512];    /* fp16, bf16, int8: an operand stored narrow (Value.narrow) at the MMA's type:
                          a statement setting v (unsigned short; int8: signed char, mma_bits) to
                          A's stored bits, which the MMA tile takes as they are (no conversion
                          and rounding or quantizing back); or "" */
  char b_bits[512];    /* the same for B */
  char a_vec[512];     /* with a_bits, when A is k-contiguous with rows a multiple of 16 bytes long:
                          the address of A(z, m, k), whose 16 bytes from k on (a multiple of
                          16 bytes into the row) one 128-bit load stages; or "" */
  char b_vec[512];     /* the same for B(z, k, n), with n for m */
  char a_f4[512];      /* tf32, fp16, bf16, when A is float32 (not narrow), k-contiguous with rows a multiple of
                          4 floats long: the address of A(z, m, k), whose 4 floats from k on (a multiple of 4)
                          one 128-bit load stages (vec32_fetch); or "" */
  char b_f4[512];      /* the same for B(z, k, n), with n for m */
  char b_nvec[512];    /* fp16, bf16: when B is stored narrow (Value.narrow) and n-contiguous in whole pieces of
                          b_piece values (8 or 4: 16 or 8 bytes; N and a row's start multiples of it; a
                          convolution's: each piece in one image): the address of B(z, k, n), whose piece
                          from n on one cp.async copies into the k-major tile that ldmatrix.trans reads
                          (async_tile_kn); or "" */
  int b_piece;         /* with b_nvec: the values a copy, 8 or 4 */
  char b_f4n[512];     /* fp16, bf16: when B is float32 (not narrow) and n-contiguous with rows a multiple of 4 floats
                          long: the address of B(z, k, n), whose 4 floats from n on (a multiple of 4) one 128-bit
                          load stages, rounded, into the k-major tile that ldmatrix.trans reads (vec32n_fetch);
                          or "" */
  char a_f4m[512];     /* the same for A(z, m, k), m-contiguous (4 floats of m a load; the linear weight gradient's dy) */
  char out_idx[512];   /* expression: linear index of C(z, m, n) in the main output */
  int out_quad;        /* C(z, m, n + e) is stored at out_idx + e (e < 4) for every n a multiple of 4, and N is one:
                          the float32 float4 tiles' four consecutive columns one store (ncc_st4f), the index a
                          multiple of 4, so aligned to 16 bytes (every buffer starts 256-aligned) */
  int out_pair;        /* C(z, m, n + 1) is stored at out_idx + 1 for every even n, and N is even: n and n + 1
                          (an MMA fragment's two columns c0, c1) one store of two (ncc_st2f/h/b), the
                          index even, so aligned to the pair (every buffer starts 256-aligned) */
  char store_if[256];  /* a condition on (m, n) for C(z, m, n) to be stored, or "" for every one in M x N: a phase's
                          column past the input's last row or column (ir_dgrad_phases, sides the stride does not
                          divide) */
  char bias[256];      /* the bias the accumulator gets (its array), or "": at bias_at, or at the column */
  char bias_at[96];    /* the bias's index where it is a row's (m; z * Mg + m grouped), "" where it is the
                          column's: n, or n + e in the paired epilogue (bias_term) */
  char b_pre[1024];    /* statements before the K loop that b_tile's per-thread state needs, or "" */
  char b_tile[4096];   /* statements that store the whole B tile Bs for K tile k0 (b_load unused), or "" */
  char b_regs[160];    /* with b_tile, for --gemm-pipeline (Node.pipe): the declaration of the registers
                          that hold a thread's B elements of the next K tile; or "" */
  char b_first[4096];  /* statements that load the first K tile's B elements into those registers */
  char b_fetch[4096];  /* statements that load K tile k0 + BK's (the next one's) */
  char b_put[1024];    /* statements that store the registers into Bs (as b_tile would) */
  int b_pad;           /* b_tile stores into a tile of padded slices (mma_dst's pad): a convolution's gathered
                          tile, whose columns (not its k) vary along a warp, so that unpadded its 2-byte
                          stores would meet 8 to a bank, padded 2, and 1 where a warp holds 16 columns at
                          two rows (im2col_tile's b_warp16); int8's byte stores 4, padded 1 (only where a
                          lane's slot is 16 bytes: NJ >= 4) */
  int b_swz;          /* with b_kfast, the float32 float4 tile (64 x 64): b_tile stores row kk's column rr at
                          rr ^ 2 where kk & 8 (Bs[kk][rr ^ ((kk & 8) >> 2)]), so that a warp's 16 k of two columns,
                          rows BN + 4 words apart (16-byte aligned, so k and k + 8 a bank apart by 0), meet 32
                          banks; the FMA loop reads a row's four columns as one float4 and swaps its halves back in
                          those rows (kk a constant once ptxas unrolls the loop over k) */
  int b_kfast;        /* b_tile's threads take consecutive k (kk = tid % BK), several columns each: the weight
                          gradients' tiles (wgrad_tile), stored into the CUDA-core kernel's Bs as load_tile
                          stores a k-contiguous operand (tiled: the rows' padding) */
  int b_gather;        /* B(k, n) is a gather whose index b_load works out an element at a time (the data gradient's dy
                          where not tap-major): load_tile keeps a warp 32 columns wide at one k, not 16 at two
                          (b_warp16), where ptxas keeps that index work out of the loop (16 wide took ResNet-18's
                          strided 1 x 1 data gradients at fp16 from 84 instructions a K tile to 96, from 80 registers
                          to 92, and from 6 and 7 blocks a SM to 5) */
  int rolled;          /* the K loop kept a loop (NCC_ROLLED) where its trip count is constant: a 256-thread
                          weight gradient's tap-major tile (wgrad_tile_taps), whose few K tiles ptxas would
                          unroll whole, hoist their loads and spill (ResNet-18 at tf32, sm_80: 144 bytes) */
  int uses_z;
  char k_pre[1024];    /* statements after z is known, before the K loop and split-K's range, or "": a strided data
                          gradient's phase (ir_dgrad_phases), which declares its K, kc (k_var) */
  int k_var;           /* the block's K is kc (k_pre's), at most K: the K loop, split-K's range and the copies ahead
                          end there, the first ones tested (none may be due) */
  int S;               /* split-K: ranges of K (ir_gemm_split_k), 1: none */
  int64_t span;        /* split-K: the K extent of a range (ir_gemm_split_span) */
  Value *bias_v;       /* split-K: the bias the sum kernel adds (bias[(o / bias_inner) % bias_n]), or NULL */
  int64_t bias_inner, bias_n;
  int baxis;           /* the grid axis whose index has the batch outermost (0: n, x; 1: m, y;
                          2: z), for a launch that follows the batch; -1: none */
  int a_w, b_w;        /* is A (B) the op's weight?  At int8 an activation is quantized as it is
                          loaded (a matmul's both, each with its scale), the weight is integers already */
  int a_q, b_q;        /* int8: A (B) an activation stored quantized (Value.narrow DT_I8): its
                          integers are loaded as they are, like a weight's */
} GemmSpec;

/* The operand expressions of A and B for the spec (of v, the loaded element);
 * int8's scale a parameter of p */
static void spec_rv(Cg *c, KParams *p, const Node *n, const GemmSpec *s, char ra[64], char rb[64]) {
  int qa = s->a_w || s->a_q, qb = s->b_w || s->b_q;   /* integers already */
  const char *inv = NULL, *inv_b = NULL;
  if (n->op == OP_MATMUL) {
    if (!qa) inv = cg_q8_param(c, p, n);
    if (!qb) inv_b = cg_q8_param_b(c, p, n);
  } else if (!qa || !qb) {
    inv = inv_b = cg_q8_param(c, p, n);
  }
  cg_operand_rv(ra, 64, n, "v", qa ? NULL : inv);
  cg_operand_rv(rb, 64, n, "v", qb ? NULL : inv_b);
}

/* Does a k-contiguous operand v stored narrow, with rows of rowlen elements,
 * come in whole 16-byte pieces (vec_tile)?  Its buffer starts 256-aligned. */
static int vec_ok(const Value *v, int64_t rowlen) {
  int es = v->narrow ? dtype_size((DType)v->narrow) : 0;
  return es && es <= 2 && rowlen % (16 / es) == 0;
}

/* The values of an n-contiguous operand v stored narrow in 16 bits, with
 * rows of rowlen elements, that one cp.async copies (GemmSpec.b_piece): 8
 * (16 bytes) where the rows come in whole 8s, else 4 (8 bytes) where in
 * 4s; 0: neither.  Its buffer starts 256-aligned. */
static int nvec_piece(const Value *v, int64_t rowlen) {
  int es = v->narrow ? dtype_size((DType)v->narrow) : 0;
  return es != 2 ? 0 : rowlen % 8 == 0 ? 8 : rowlen % 4 == 0 ? 4 : 0;
}

/* Does a k-contiguous float32 operand v (not stored narrow), with rows of
 * rowlen elements, come in whole 16-byte pieces (vec32_fetch)? */
static int vec32_ok(const Value *v, int64_t rowlen) {
  return !v->narrow && v->dtype == DT_F32 && rowlen % 4 == 0;
}

/* b's text into dst (n bytes: a GemmSpec's b_pre, b_tile ...), and b
 * emptied for the next statements */
static void buf_take(Buf *b, char *dst, size_t n) {
  NCC_ASSERT(b->len < n);
  memcpy(dst, b->s, b->len + 1);
  b->len = 0;
  b->s[0] = 0;
}

/* Copies src to dst (of n bytes) with `extra` more spaces before each line
 * (extra < 0: that many fewer) */
static void indent_into(char *dst, size_t n, const char *src, int extra) {
  size_t o = 0;
  for (const char *p = src; *p && o + (size_t)(extra > 0 ? extra : 0) + 1 < n; p++) {
    if (p == src || p[-1] == '\n') {
      for (int i = 0; i < extra && *p != '\n'; i++) dst[o++] = ' ';
      for (int i = 0; i < -extra && *p == ' '; i++) p++;
    }
    dst[o++] = *p;
  }
  NCC_ASSERT(o + 1 < n);
  dst[o] = 0;
}

/* "if (c1 && c2) {" with the conditions given (NULL: none), or "{" */
static void guard_open(Buf *b, const char *ind, const char *c1, const char *c2) {
  if (c1 || c2) buf_printf(b, "%sif (%s%s%s) {\n", ind, c1 ? c1 : "", c1 && c2 ? " && " : "", c2 ? c2 : "");
  else buf_printf(b, "%s{\n", ind);
}

/* "int z = ..." and, for split-K, this block's range of K [kb, ke): grid
 * axis z runs the Z batches times the S ranges */
static void z_and_range(Buf *b, const GemmSpec *s) {
  if (s->S > 1) {
    if (s->uses_z) buf_printf(b, "  int z = %s / %d, sk = %s %% %d;\n", D_BID_Z, s->S, D_BID_Z, s->S);
    else buf_printf(b, "  int sk = %s;\n", D_BID_Z);
    buf_puts(b, s->k_pre);
    char ke[24];
    if (s->k_var) snprintf(ke, sizeof ke, "kc");
    else snprintf(ke, sizeof ke, "%lld", (long long)s->K);
    buf_printf(b, "  int kb = sk * %lld, ke = kb + %lld < %s ? kb + %lld : %s;   /* this block's range of K (split-K) */\n",
               (long long)s->span, (long long)s->span, ke, (long long)s->span, ke);
  } else {
    if (s->uses_z) buf_printf(b, "  int z = %s;\n", D_BID_Z);
    buf_puts(b, s->k_pre);
  }
}

/* The end of the block's K: split-K's range ke, the block's kc (k_var), else K */
static const char *k_end(const GemmSpec *s, char *buf, size_t n) {
  if (s->S > 1) snprintf(buf, n, "ke");
  else if (s->k_var) snprintf(buf, n, "kc");
  else snprintf(buf, n, "%lld", (long long)s->K);
  return buf;
}

/* The loop over K tiles of BK */
static void k_loop(Buf *b, const GemmSpec *s, int bk) {
  char ke[32];
  k_end(s, ke, sizeof ke);
  if (s->S > 1) buf_printf(b, "  for (int k0 = kb; k0 < ke; k0 += %d) {\n", bk);
  else buf_printf(b, "%s  for (int k0 = 0; k0 < %s; k0 += %d) {\n", s->rolled ? "  NCC_ROLLED\n" : "", ke, bk);
}

/* Split-K: the block's partial sum of output element o into range sk of the
 * workspace (the sum kernel adds the ranges, the bias and the epilogue) */
static void store_partial(Cg *c, KParams *p, const GemmSpec *s, Buf *b, int ind) {
  int sp = 2 * ind;
  const char *ws = kp_work(c, p, "partial");
  buf_printf(b, "%*sint o = %s;\n", sp, "", s->out_idx);
  buf_printf(b, "%*s%s[sk * %lld + o] = v;\n", sp, "", ws, (long long)shape_numel(&group_out(c->group)->shape));
}

static int split_sum(Cg *c, const KGroup *gr, const GemmSpec *s);

/* The bias term of column col (n; n + e in mma_epilogue_pairs) */
static const char *bias_term(char *dst, size_t cap, const GemmSpec *s, const char *col) {
  snprintf(dst, cap, "%s[%s]", s->bias, s->bias_at[0] ? s->bias_at : col);
  return dst;
}

/* The end of an output element `v` (a sum of products) at depth ind (2
 * spaces each), for the tiled GEMM and the GEMV alike: the bias, the output
 * index o, the fused epilogue, the store. */
static int store_tail(Cg *c, const KGroup *gr, KParams *p, const GemmSpec *s, Buf *b, int ind) {
  if (s->store_if[0]) {   /* a column that stands for no output element stores nothing */
    buf_printf(b, "%*sif (%s) {\n", 2 * ind, "", s->store_if);
    ind++;
  }
  int sp = 2 * ind;
  if (s->S > 1) {
    store_partial(c, p, s, b, ind);
  } else {
    char bt[384];
    if (s->bias[0]) buf_printf(b, "%*sv = v + %s;\n", sp, "", bias_term(bt, sizeof bt, s, "n"));
    buf_printf(b, "%*sint o = %s;\n", sp, "", s->out_idx);
    if (cg_epilogue(c, gr, p, b, "v", "o", ind)) return -1;
    char st[64];
    buf_printf(b, "%*s%s[o] = %s;\n", sp, "", kp_value(c, p, group_out(gr), 1, "y"),
               cg_st(st, sizeof st, group_out(gr), "v"));
  }
  if (s->store_if[0]) buf_printf(b, "%*s}\n", 2 * (ind - 1), "");
  return 0;
}

static int tile_of(int64_t d) { return ir_fp32_tile_dim(d) / 16; }   /* a thread's outputs along d */

/* The op's MMA: MMA_TF32 m16n8k8; MMA_F16 m16n8k16 with FP16/BF16 operands;
 * MMA_S8 m16n8k16 with int8 operands and int32 sums */
enum { MMA_TF32, MMA_F16, MMA_S8 };

/* Does text name the identifier id (not as part of a longer name)? */
static int names_ident(const char *text, const char *id) {
  size_t l = strlen(id);
  for (const char *q = strstr(text, id); q; q = strstr(q + 1, id)) {
    int before = q > text && (isalnum((unsigned char)q[-1]) || q[-1] == '_');
    int after = isalnum((unsigned char)q[l]) || q[l] == '_';
    if (!before && !after) return 1;
  }
  return 0;
}

/* The MMA kernel's epilogue where the output takes a fragment's two columns
 * at once (GemmSpec.out_pair): for each of the fragment's rows (h: gid and
 * gid + 8), columns n and n + 1 (c0, c1; c2, c3) are finished one after the
 * other (e: bias, index op + e, the fused epilogue, whose operands of the
 * output's shape are read a pair a load, cg_epilogue_pair) and stored by
 * one store of two at op, an even index.  N is even, so n < N holds for
 * n + 1 too.  Split-K's partial sums go to the workspace the same way. */
static int mma_epilogue_pairs(Cg *c, const KGroup *gr, KParams *p, const GemmSpec *s, Buf *b, int MI, int NJ, int BM,
                              int BN, int kind) {
  NCC_ASSERT(s->N % 2 == 0 && !s->store_if[0]);
  buf_printf(b, "  NCC_UNROLL\n  for (int i = 0; i < %d; i++)\n    NCC_UNROLL\n    for (int j = 0; j < %d; j++)\n"
                "      NCC_UNROLL\n      for (int h = 0; h < 2; h++) {   /* rows gid, gid + 8: columns n, n + 1 one store */\n",
             MI, NJ);
  buf_puts(b, "        int m = m0 + wr + 16 * i + gid + 8 * h, n = n0 + wc + 8 * j + 2 * tig;\n");
  char c1[48], c2[48];
  snprintf(c1, sizeof c1, "m < %lld", LL(s->M));
  snprintf(c2, sizeof c2, "n < %lld", LL(s->N));
  guard_open(b, "        ", s->M % BM ? c1 : NULL, s->N % BN ? c2 : NULL);
  buf_printf(b, "          int op = %s;   /* column n's index; n + 1's is op + 1 */\n", s->out_idx);
  const char *cast = kind == MMA_S8 ? "(float)" : "";
  if (s->S > 1) {
    buf_printf(b, "          ncc_st2f(&%s[sk * %lld + op], %sacc[i][j][2 * h], %sacc[i][j][2 * h + 1]);\n",
               kp_work(c, p, "partial"), (long long)shape_numel(&group_out(c->group)->shape), cast, cast);
    buf_puts(b, "        }\n      }\n");
    return 0;
  }
  Buf pre = {0}, body = {0}, epi = {0};
  if (cg_epilogue_pair(c, gr, p, &epi, &pre, "v", "o", 6)) {
    buf_free(&pre), buf_free(&body), buf_free(&epi);
    return -1;
  }
  buf_puts(&body, "          NCC_UNROLL\n          for (int e = 0; e < 2; e++) {   /* column n + e */\n");
  buf_printf(&body, "            float v = %sacc[i][j][2 * h + e];\n", cast);
  char bt[384];
  if (s->bias[0]) buf_printf(&body, "            v = v + %s;\n", bias_term(bt, sizeof bt, s, "n + e"));
  if (epi.len && names_ident(epi.s, "o")) buf_puts(&body, "            int o = op + e;\n");
  if (epi.len) buf_puts(&body, epi.s);
  char st[64], l = cg_pair_letter(group_out(gr));
  NCC_ASSERT(l);
  buf_printf(&body, "            yv[e] = %s;\n          }\n", cg_st(st, sizeof st, group_out(gr), "v"));
  buf_printf(b, "          %s yv[2];   /* the two columns' values as stored */\n", cg_elem_type(group_out(gr)));
  if (pre.len) buf_puts(b, pre.s);
  buf_puts(b, body.s);
  buf_printf(b, "          ncc_st2%c(&%s[op], yv[0], yv[1]);\n        }\n      }\n", l, kp_value(c, p, group_out(gr), 1, "y"));
  buf_free(&pre), buf_free(&body), buf_free(&epi);
  return 0;
}

/* The rows of the B tile that a thread of im2col_tile holds, J of them
 * (KS = T / BN threads a column), as its first row and the j-th's distance
 * from it:
 *   ROWS_STRIDED: kq + j KS;
 *   ROWS_PAIRS:   kq J + j, J consecutive rows, two a 32-bit word (tap_pairs);
 *   ROWS_QUADS:   kq + j % 4 + j / 4 * 8, fours 8 apart (tf32 with a warp
 *                 16 columns wide: b_warp16). */
enum { ROWS_STRIDED, ROWS_PAIRS, ROWS_QUADS };
static const char *row_first(char *buf, size_t n, int form, int J) {
  snprintf(buf, n, form == ROWS_PAIRS ? "kq * %d" : "kq", J);
  return buf;
}
/* (the element's index: j, or v where v is not NULL) */
static const char *row_step(char *buf, size_t n, int form, int J, int KS, const char *v) {
  if (!v) v = "j";
  if (form == ROWS_STRIDED) snprintf(buf, n, "%s * %d", v, KS);
  else if (form == ROWS_QUADS && J > 4) snprintf(buf, n, "(%s %% 4 + %s / 4 * 8)", v, v);   /* (J = 4: j) */
  else snprintf(buf, n, "%s", v);
  return buf;
}
/* row j of the thread: "kq + j * 2", "kq * 8 + j" */
static const char *row_of(char *buf, size_t n, int form, int J, int KS, const char *v) {
  char f[24], st[40];
  snprintf(buf, n, "%s + %s", row_first(f, sizeof f, form, J), row_step(st, sizeof st, form, J, KS, v));
  return buf;
}

/* The declaration of im2col_tile's thread's column rb and first row kq (row_first).  A warp stores
 * one element of each of its threads at once.  32 neighbouring columns at one row fall, in the
 * padded fragment order (mma_dst), in 16 banks: the columns' words all lie in even banks at fp16 and
 * bf16, in banks 4 apart at tf32 but for the two words of a column's slot.  So with w16 (tf32, fp16,
 * bf16; KS >= 2) a warp holds 16 columns (lanes 0..15, and 16..31 the same ones) and two rows:
 *   ROWS_PAIRS (a word of rows k, k + 1): rows 8 apart, kq and kq + KS / 2, one word apart;
 *   ROWS_STRIDED at fp16 and bf16 (2-byte stores): rows k and k + 1, the two halves of one word;
 *   ROWS_QUADS (tf32): rows 4 apart, which the fragment order puts one word apart;
 * and its 32 stores meet 32 banks (half of them, one word each, where two lanes share a word).
 * Else a warp holds 32 columns at one row, kq = tid / BN. */
/* b_warp16's two expressions (w16): the thread's column (rb) and its first row (kq) */
static void warp16_exprs(char *rb, size_t rn, char *kq, size_t kn, int form, int BN, int J, int KS) {
  NCC_ASSERT(BN % 16 == 0 && KS % 2 == 0 && (form != ROWS_QUADS || J % 4 == 0));   /* (J = 16 / KS: BN >= 32) */
  int NC = BN / 16;   /* a block's warps: NC 16-column slices, then KS / 2 pairs of rows */
  char q[48];   /* the warp's pair of rows (none where KS = 2) */
  if (NC > 1) snprintf(rb, rn, "tid %% 16 + tid / 32 %% %d * 16", NC);
  else snprintf(rb, rn, "tid %% 16");
  snprintf(q, sizeof q, "tid / %d", 32 * NC);
  if (KS == 2 && form == ROWS_QUADS) snprintf(kq, kn, "tid / 16 %% 2 * 4");
  else if (KS == 2) snprintf(kq, kn, "tid / 16 %% 2");
  else if (form == ROWS_PAIRS) snprintf(kq, kn, "tid / 16 %% 2 * %d + %s", KS / 2, q);
  else if (form == ROWS_STRIDED) snprintf(kq, kn, "%s * 2 + tid / 16 %% 2", q);
  else snprintf(kq, kn, "tid / 16 %% 2 * 4 + %s * %d", q, 2 * J);   /* ROWS_QUADS: the pair's fours 4 apart */
}
static void b_warp16(Buf *b, int w16, int form, int BN, int J, int KS, const char *cv, const char *tail) {
  if (!w16) {
    buf_printf(b, "  int %s = tid %% %d, kq = tid / %d%s;\n", cv, BN, BN, tail);
    return;
  }
  char rb[64], kq[96];
  warp16_exprs(rb, sizeof rb, kq, sizeof kq, form, BN, J, KS);
  buf_printf(b, "  int %s = %s, kq = %s%s;   /* a warp: 16 columns, two rows (b_warp16) */\n", cv, rb, kq, tail);
}

/* load_tile's w16 for a k-contiguous float32 operand of tiled's float4 tiles: a warp 8 k of 4 rows */
enum { K_EIGHTS = -2 };

/* "if (m < M && k < K) {" for a tile's element (row `rowvar`, k) of a K tile
 * of `rows` rows, without the tests that always hold (M, K multiples of the
 * tile), or "{" */
static void tile_guard(Buf *b, int rows, const char *rowvar, int64_t RMAX, int64_t K) {
  char c1[64], c2[48];
  snprintf(c1, sizeof c1, "%s < %lld", rowvar, LL(RMAX));
  snprintf(c2, sizeof c2, "k < %lld", LL(K));
  guard_open(b, "      ", RMAX % rows ? c1 : NULL, K % BK ? c2 : NULL);
}

/* The head of a loop over a thread's P = BK rows / T elements p of a BK x rows tile, declaring kk and rr
 * (element (kk, rr)) and, with rowvar, rowvar = rowbase + rr and k = kb + kk: a k-contiguous operand 8 k of
 * 4 rows a warp (K_EIGHTS: the float32 float4 tiles, rows BM + 4 words: (k mod 8) 4 + row in 32 banks,
 * where 16 k of 2 rows would meet 2 to a bank; its global loads one 32-byte sector a row), the other a
 * row a thread (32 consecutive rows a warp) */
static void f32_head(Buf *b, int rows, int T, int kcontig, const char *rowvar, const char *rowbase, const char *kb) {
  int P = BK * rows / T;
  char row[64] = "", k[48] = "";
  if (rowvar) {
    snprintf(row, sizeof row, ", %s = %s + rr", rowvar, rowbase);
    if (strcmp(kb, "0")) snprintf(k, sizeof k, ", k = %s + kk", kb);
    else snprintf(k, sizeof k, ", k = kk");
  }
  if (kcontig) {
    NCC_ASSERT(P % 2 == 0 && T % 8 == 0);
    buf_printf(b, "    for (int p = 0; p < %d; p++) {   /* %d elements a thread: 8 k of 4 rows a warp */\n"
                  "      int kk = tid %% 8 + p %% 2 * 8, rr = tid / 8 + p / 2 * %d%s%s;\n", P, P, T / 8, row, k);
  } else {
    NCC_ASSERT(T % rows == 0);
    buf_printf(b, "    for (int p = 0, rr = tid %% %d%s; p < %d; p++) {   /* %d elements a thread, one row */\n"
                  "      int kk = tid / %d + p * %d%s;\n", rows, row, P, P, rows, T / rows, k);
  }
}

/* Statements that fill a shared tile of BK x rows elements (element (kk,
 * rr): row rowbase + rr, k = k0 + kk) with T threads, numbered tid; dst is
 * the element's place, an lvalue in kk and rr */
static void load_tile(Buf *b, const char *dst, int rows, int T, int kcontig, const char *rowvar, const char *rowbase,
                      int64_t RMAX, int64_t K, const char *stmt, const char *rv, const char *bits, int w16) {
  /* a fixed count a thread (every tile's BK x rows is a multiple of its threads, and its threads of
   * BK and of rows), and one of k and the row the same for all of them: its index arithmetic once,
   * not once an element */
  int P = BK * rows / T;
  NCC_ASSERT(BK * rows % T == 0 && T % BK == 0 && T % rows == 0);
  if (P == 1) buf_puts(b, "    {   /* one element a thread */\n");
  if (kcontig && w16 == K_EIGHTS)
    f32_head(b, rows, T, kcontig, rowvar, rowbase, "k0");
  else if (kcontig && P == 1)
    buf_printf(b, "      int kk = tid %% %d, rr = tid / %d;\n      int %s = %s + rr, k = k0 + kk;\n", BK, BK, rowvar, rowbase);
  else if (kcontig)
    buf_printf(b, "    for (int p = 0, kk = tid %% %d, k = k0 + kk; p < %d; p++) {   /* %d elements a thread, one k */\n"
                  "      int rr = tid / %d + p * %d, %s = %s + rr;\n", BK, P, P, BK, T / BK, rowvar, rowbase);
  else if (P == 1)
    buf_printf(b, "      int rr = tid %% %d, kk = tid / %d;\n      int %s = %s + rr, k = k0 + kk;\n", rows, rows, rowvar, rowbase);
  else if (T / rows >= 2 && (w16 == MMA_F16 || (w16 == MMA_TF32 && P % 4 == 0))) {
    /* an MMA tile in padded slices: a warp 16 rows (columns) wide at two k (b_warp16's), its 32 stores in 32 banks */
    int form = w16 == MMA_TF32 ? ROWS_QUADS : ROWS_STRIDED;
    char rr[64], kq[96], kk[80];
    warp16_exprs(rr, sizeof rr, kq, sizeof kq, form, rows, P, T / rows);
    buf_printf(b, "    for (int p = 0, rr = %s, kq = %s, %s = %s + rr; p < %d; p++) {   /* %d elements a thread, one row "
                  "(b_warp16) */\n      int kk = %s, k = k0 + kk;\n", rr, kq, rowvar, rowbase, P, P,
               row_of(kk, sizeof kk, form, P, T / rows, "p"));
  } else
    f32_head(b, rows, T, 0, rowvar, rowbase, "k0");
  buf_printf(b, "      %s\n", bits ? bits : "float v = 0.0f;");
  tile_guard(b, rows, rowvar, RMAX, K);
  buf_printf(b, "        %s\n      }\n", stmt);
  /* --precision=tf32|fp16|bf16: the operand rounded as it enters shared memory (int8: quantized) */
  buf_printf(b, "      %s = %s;\n    }\n", dst, rv);
}

/* A double-buffered float32 tile's loads (tiled, Node.pipe): a thread's elements of K tile kb into
 * registers reg[p] (f32_fetch, rounded as rv), and the registers into the tile at dst, an lvalue in kk and
 * rr (f32_put); each `extra` spaces deeper than load_tile's statements (less where negative) */
static void f32_fetch(Buf *b, const char *reg, int rows, int T, int kcontig, const char *rowvar, const char *rowbase,
                      int64_t RMAX, int64_t K, const char *stmt, const char *rv, const char *kb, int extra) {
  Buf t = {0};
  f32_head(&t, rows, T, kcontig, rowvar, rowbase, kb);
  buf_puts(&t, "      float v = 0.0f;\n");
  tile_guard(&t, rows, rowvar, RMAX, K);
  buf_printf(&t, "        %s\n      }\n      %s[p] = %s;\n    }\n", stmt, reg, rv);
  char out[4096];
  indent_into(out, sizeof out, t.s, extra);
  buf_puts(b, out);
  buf_free(&t);
}

static void f32_put(Buf *b, const char *dst, const char *reg, int rows, int T, int kcontig, int extra) {
  Buf t = {0};
  f32_head(&t, rows, T, kcontig, NULL, NULL, NULL);
  buf_printf(&t, "      %s = %s[p];\n    }\n", dst, reg);
  char out[1024];
  indent_into(out, sizeof out, t.s, extra);
  buf_puts(b, out);
  buf_free(&t);
}

/* The grid of a tiled kernel fits (row tiles of BM on y, batches on z) */
static int grid_fits(Cg *c, const KGroup *gr, const GemmSpec *s, int BM) {
  if ((s->M + BM - 1) / BM <= 65535 && s->Z <= 65535) return 1;
  diag_error(gr->main->loc, "codegen: %s with %lld rows in %lld batches exceeds the tiled kernel's grid "
             "(65535 row tiles of %d, 65535 batches); try --cublas", ncc_ops[gr->main->op].name, LL(s->M),
             LL(s->Z), BM);
  c->err = 1;
  return 0;
}

/* The launch of a tiled kernel of BM x BN tiles and T x TY threads, its grid
 * following the batch along s->baxis */
static void tiled_launch(Cg *c, const KGroup *gr, const KParams *p, const GemmSpec *s, const char *name, int BM, int BN,
                         int T, int TY) {
  CgBatch bg;
  const CgBatch *bp = NULL;
  if (s->baxis >= 0)
    bp = cg_batch_grid(c, gr, s->baxis, s->baxis == 0 ? s->N : s->baxis == 1 ? s->M : s->Z,
                       s->baxis == 0 ? BN : s->baxis == 1 ? BM : 1, &bg);
  cg_launch_b(c, name, p, (s->N + BN - 1) / BN, (s->M + BM - 1) / BM, s->Z * s->S, T, TY, 0, bp);
}

/* "<op>_<form>" (with the prologue's op first) for a GEMM kernel in another form than the tiled one */
static const char *form_name(const KGroup *gr, const char *form, char opn[96]) {
  char base[64];
  if (gr->npro) snprintf(base, sizeof base, "%s_%s_%s", ncc_ops[gr->pro[0]->op].name, ncc_ops[gr->main->op].name, form);
  else snprintf(base, sizeof base, "%s_%s", ncc_ops[gr->main->op].name, form);
  return cg_opname(gr, base, opn);
}

/* The float32 tiled GEMM: 256 threads (16 x 16: tx, ty) a BM x BN tile, K tiles of BK between two
 * barriers (one where double-buffered, Node.pipe); a thread's TM x TN outputs.  Where TM and TN are multiples of 4 (the 64 x 64 tile, 4 x 4 a
 * thread, and the wider ones, ir_fp32_tile: 64 x 128, 4 x 8, and 128 x 128, 8 x 8) each four of a
 * thread's rows (columns) are consecutive, rows 4 ty + i % 4 + 64 (i / 4) and columns 4 tx + j % 4 + 64
 * (j / 4), and a k's four are one 128-bit shared load (ncc_lds4): a warp's loads of A are two addresses
 * (broadcasts), of B 16 consecutive float4 (two wavefronts).  The 64 x 64 tile takes 2 loads for 16 FMAs
 * a k, 64 x 128 3 for 32, 128 x 128 4 for 64.  Smaller tiles (16 TM x 16 TN, TM or TN 1 or 2) keep a
 * float a load, rows ty + 16 i and columns tx + 16 j. */
static int f32_epilogue(Cg *c, const KGroup *gr, KParams *p, const GemmSpec *s, Buf *b, int TM, int TN, int vec);
static int f32_epilogue_quads(Cg *c, const KGroup *gr, KParams *p, const GemmSpec *s, Buf *b, int TM, int TN);
static int tiled(Cg *c, const KGroup *gr, KParams *p, const GemmSpec *s) {
  int ft = ir_fp32_tile(gr->main), wide = ft != IR_TILE_64x64;   /* 128 x 128 or 64 x 128 (ir_fp32_tile_choose) */
  int TM = ft == IR_TILE_128x128 ? 8 : ft == IR_TILE_64x128 ? 4 : tile_of(s->M), TN = wide ? 8 : tile_of(s->N);
  int BM = 16 * TM, BN = 16 * TN;
  /* a weight gradient's tile (b_kfast: wgrad_tile's threads take consecutive k, 16 of them a warp) with its
   * columns swizzled (b_swz), whose stores into rows of BN + 4 words would meet 2 to a bank unswizzled */
  int vec = TM % 4 == 0 && TN % 4 == 0 && !(s->b_tile[0] && s->b_kfast && !s->b_swz);
  NCC_ASSERT(!s->b_swz || vec);
  NCC_ASSERT(vec || !wide);
  /* double-buffered (Node.pipe, ir_fp32_pipe_ok): two stages of both tiles, the next K tile's elements loaded
   * into registers while this one's FMAs run, stored into the other stage after them; one barrier a K tile */
  int dbl = gr->main->pipe != 0;
  NCC_ASSERT(!dbl || (vec && !s->k_var && (!s->b_tile[0] || s->b_fetch[0])));
  if (!grid_fits(c, gr, s, BM)) return -1;
  NCC_ASSERT(gr->main->prec != PREC_INT8);   /* int8's tiled GEMMs are tensor-core ones (ir_gemm_mma) */
  Buf b = {0};
  /* The rows' padding, for the stores (the FMA loop's loads are at one kk a warp: a broadcast and 16
   * consecutive words).  A warp of a k-contiguous operand stores 16 k of two rows: with rows of
   * BM + 2 words (2 mod 4) they meet 32 banks; of BM + 1, 2 to a bank.  One stored a row at a time
   * stores 32 consecutive columns of one k, or 16 of two k, which rows of BM words keep in 32 banks.
   * With float4 loads the rows stay 16-byte aligned: BM + 4, and a warp of a k-contiguous operand stores
   * 8 k of 4 rows (load_tile's K_EIGHTS), which meet 32 banks. */
  int pad = vec ? 4 : 2;
  int pa = s->a_kcontig ? pad : 0, pb = (s->b_tile[0] ? s->b_kfast : s->b_kcontig) ? pad : 0;
  const char *al = vec ? " __align__(16)" : "", *stage = dbl ? "[2]" : "", *st = dbl ? "[st]" : "";
  buf_printf(&b, "  %s%s float As%s[%d][%d];\n  %s%s float Bs%s[%d][%d];\n", D_SHARED, al, stage, BK, BM + pa, D_SHARED,
             al, stage, BK, BN + pb);
  buf_printf(&b, "  int tx = %s, ty = %s, tid = ty * 16 + tx;\n", D_TID_X, D_TID_Y);
  buf_printf(&b, "  int m0 = %s * %d, n0 = %s * %d;\n", D_BID_Y, BM, D_BID_X, BN);
  z_and_range(&b, s);
  if (s->b_tile[0]) buf_puts(&b, s->b_pre);
  buf_printf(&b, "  float acc[%d][%d];\n", TM, TN);
  buf_printf(&b, "  for (int i = 0; i < %d; i++)\n    for (int j = 0; j < %d; j++) acc[i][j] = 0.0f;\n", TM, TN);
  char ra[64], rb[64], ke[32];
  spec_rv(c, p, gr->main, s, ra, rb);
  k_end(s, ke, sizeof ke);
  int ga = vec ? K_EIGHTS : -1;
  if (dbl) {   /* the first K tile, into registers and stage 0 */
    const char *k1 = s->S > 1 ? "kb" : "0";
    buf_printf(&b, "  float aq[%d];   /* this thread's A elements of the next K tile */\n", BK * BM / 256);
    if (s->b_tile[0]) buf_printf(&b, "  %s\n", s->b_regs);
    else buf_printf(&b, "  float bq[%d];   /* this thread's B elements of the next K tile */\n", BK * BN / 256);
    f32_fetch(&b, "aq", BM, 256, s->a_kcontig, "m", "m0", s->M, s->K, s->a_load, ra, k1, -2);
    if (s->b_tile[0]) buf_puts(&b, s->b_first);
    else f32_fetch(&b, "bq", BN, 256, s->b_kcontig, "n", "n0", s->N, s->K, s->b_load, rb, k1, -2);
    buf_puts(&b, "  {\n    int nx = 0;\n");
    f32_put(&b, "As[nx][kk][rr]", "aq", BM, 256, s->a_kcontig, 0);
    if (s->b_tile[0]) buf_puts(&b, s->b_put);
    else f32_put(&b, "Bs[nx][kk][rr]", "bq", BN, 256, s->b_kcontig, 0);
    buf_printf(&b, "  }\n  %s\n  int st = 0;   /* the stage the FMAs read; the loads fill the other, nx */\n", D_BARRIER);
  }
  k_loop(&b, s, BK);
  if (dbl) {
    char kx[32];
    snprintf(kx, sizeof kx, "k0 + %d", BK);
    buf_printf(&b, "    int nx = st ^ 1;\n    if (k0 + %d < %s) {   /* the next K tile's elements, in flight during the FMAs */\n",
               BK, ke);
    f32_fetch(&b, "aq", BM, 256, s->a_kcontig, "m", "m0", s->M, s->K, s->a_load, ra, kx, 2);
    if (s->b_tile[0]) buf_puts(&b, s->b_fetch);
    else f32_fetch(&b, "bq", BN, 256, s->b_kcontig, "n", "n0", s->N, s->K, s->b_load, rb, kx, 2);
    buf_puts(&b, "    }\n");
  } else {
    load_tile(&b, "As[kk][rr]", BM, 256, s->a_kcontig, "m", "m0", s->M, s->K, s->a_load, ra, NULL, ga);
    if (s->b_tile[0]) buf_puts(&b, s->b_tile);
    else load_tile(&b, "Bs[kk][rr]", BN, 256, s->b_kcontig, "n", "n0", s->N, s->K, s->b_load, rb, NULL, ga);
    buf_printf(&b, "    %s\n", D_BARRIER);
  }
  /* af/bf, not a/b: matmul's parameters are a and b */
  buf_printf(&b, "    for (int kk = 0; kk < %d; kk++) {\n      float af[%d], bf[%d];\n", BK, TM, TN);
  if (vec) {
    for (int q = 0; q < TM / 4; q++)
      buf_printf(&b, "      ncc_lds4(af%s, &As%s[kk][%s4 * ty]);%s\n", q ? " + 4" : "", st, q ? "64 + " : "",
                 q ? "" : "   /* rows 4 ty .. 4 ty + 3 (and 64 on): 128 bits a load */");
    for (int q = 0; q < TN / 4; q++)
      buf_printf(&b, "      ncc_lds4(bf%s, &Bs%s[kk][%s4 * tx]);\n", q ? " + 4" : "", st, q ? "64 + " : "");
    if (s->b_swz)
      buf_printf(&b, "      if (kk & 8)   /* rows 8 to 15 hold each four's halves swapped, b_swz */\n"
                     "        for (int j = 0; j < %d; j += 4) {\n"
                     "          float t0 = bf[j], t1 = bf[j + 1];\n"
                     "          bf[j] = bf[j + 2], bf[j + 1] = bf[j + 3], bf[j + 2] = t0, bf[j + 3] = t1;\n"
                     "        }\n", TN);
  } else {
    buf_printf(&b, "      for (int i = 0; i < %d; i++) af[i] = As[kk][ty + 16 * i];\n", TM);
    buf_printf(&b, "      for (int j = 0; j < %d; j++) bf[j] = Bs[kk][tx + 16 * j];\n", TN);
  }
  buf_printf(&b, "      for (int i = 0; i < %d; i++)\n        for (int j = 0; j < %d; j++) acc[i][j] = fmaf(af[i], bf[j], acc[i][j]);\n",
             TM, TN);
  if (dbl) {
    buf_printf(&b, "    }\n    if (k0 + %d < %s) {   /* into stage nx (the last K tile's FMAs read it before the last barrier) */\n",
               BK, ke);
    f32_put(&b, "As[nx][kk][rr]", "aq", BM, 256, s->a_kcontig, 2);
    if (s->b_tile[0]) {
      char put[sizeof s->b_put + 256];
      indent_into(put, sizeof put, s->b_put, 2);
      buf_puts(&b, put);
    } else
      f32_put(&b, "Bs[nx][kk][rr]", "bq", BN, 256, s->b_kcontig, 2);
    buf_printf(&b, "    }\n    %s\n    st = nx;\n  }\n", D_BARRIER);
  } else
    buf_printf(&b, "    }\n    %s\n  }\n", D_BARRIER);
  /* the float4 tiles' four consecutive columns one store where the output (float32) takes them so */
  int quads = vec && s->out_quad && !s->store_if[0] && !strcmp(cg_elem_type(group_out(gr)), "float");
  if (quads ? f32_epilogue_quads(c, gr, p, s, &b, TM, TN) : f32_epilogue(c, gr, p, s, &b, TM, TN, vec)) {
    buf_free(&b);
    return -1;
  }
  char opn[96];
  const char *name = cg_finish(c, cg_opname(gr, NULL, opn), NCC_KF_BARRIER_, p, &b);
  tiled_launch(c, gr, p, s, name, BM, BN, 16, 16);
  buf_free(&b);
  return s->S > 1 ? split_sum(c, gr, s) : 0;
}

/* The float32 tiled GEMM's epilogue an element at a time: its rows and columns (the float4 tiles' fours, or
 * strided by 16), each output finished and stored by store_tail */
static int f32_epilogue(Cg *c, const KGroup *gr, KParams *p, const GemmSpec *s, Buf *b, int TM, int TN, int vec) {
  if (vec) {
    buf_printf(b, "  NCC_UNROLL\n  for (int i = 0; i < %d; i++)\n    NCC_UNROLL\n    for (int j = 0; j < %d; j++) {\n", TM, TN);
    buf_printf(b, "      int m = m0 + 4 * ty + %s, n = n0 + 4 * tx + %s;\n", TM > 4 ? "i % 4 + 64 * (i / 4)" : "i",
               TN > 4 ? "j % 4 + 64 * (j / 4)" : "j");
  } else {
    buf_printf(b, "  for (int i = 0; i < %d; i++)\n    for (int j = 0; j < %d; j++) {\n", TM, TN);
    buf_printf(b, "      int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;\n");
  }
  buf_printf(b, "      if (m < %lld && n < %lld) {\n", LL(s->M), LL(s->N));
  buf_printf(b, "        float v = acc[i][j];\n");
  if (store_tail(c, gr, p, s, b, 4)) return -1;
  buf_puts(b, "      }\n    }\n");
  return 0;
}

/* The float4 tiles' epilogue where the output takes four consecutive columns at once (GemmSpec.out_quad,
 * a float32 output): a thread's columns n .. n + 3 of a row (4 tx, and 64 on) are finished one after the
 * other (e: bias, index op + e, the fused epilogue) and stored by one 128-bit store at op, a multiple of 4:
 * a warp's 16 threads of a row 256 consecutive bytes, where a float a store put them 16 bytes apart.  N is a
 * multiple of 4, so n < N holds for n + 3 too.  Split-K's partial sums go to the workspace the same way. */
static int f32_epilogue_quads(Cg *c, const KGroup *gr, KParams *p, const GemmSpec *s, Buf *b, int TM, int TN) {
  NCC_ASSERT(s->N % 4 == 0 && TM % 4 == 0 && TN % 4 == 0);
  buf_printf(b, "  NCC_UNROLL\n  for (int i = 0; i < %d; i++)\n", TM);
  if (TN > 4) buf_printf(b, "    NCC_UNROLL\n    for (int q = 0; q < %d; q++) {   /* columns n .. n + 3: one store of four */\n",
                         TN / 4);
  else buf_puts(b, "    {   /* columns n .. n + 3: one store of four */\n");
  buf_printf(b, "      int m = m0 + 4 * ty + %s, n = n0 + 4 * tx%s;\n", TM > 4 ? "i % 4 + 64 * (i / 4)" : "i",
             TN > 4 ? " + 64 * q" : "");
  char c1[48], c2[48];
  snprintf(c1, sizeof c1, "m < %lld", LL(s->M));
  snprintf(c2, sizeof c2, "n < %lld", LL(s->N));
  guard_open(b, "      ", s->M % (16 * TM) ? c1 : NULL, s->N % (16 * TN) ? c2 : NULL);
  buf_printf(b, "        int op = %s;   /* column n's index; n + e's is op + e */\n", s->out_idx);
  if (s->S > 1) {
    buf_printf(b, "        ncc_st4f(&%s[sk * %lld + op], acc[i]%s);\n      }\n    }\n", kp_work(c, p, "partial"),
               (long long)shape_numel(&group_out(c->group)->shape), TN > 4 ? " + 4 * q" : "");
    return 0;
  }
  Buf epi = {0};
  if (cg_epilogue(c, gr, p, &epi, "v", "o", 5)) {
    buf_free(&epi);
    return -1;
  }
  buf_puts(b, "        float yv[4];   /* the four columns' values */\n");
  buf_puts(b, "        NCC_UNROLL\n        for (int e = 0; e < 4; e++) {   /* column n + e */\n");
  buf_printf(b, "          float v = acc[i][%se];\n", TN > 4 ? "4 * q + " : "");
  char bt[384];
  if (s->bias[0]) buf_printf(b, "          v = v + %s;\n", bias_term(bt, sizeof bt, s, "n + e"));
  if (epi.len && names_ident(epi.s, "o")) buf_puts(b, "          int o = op + e;\n");
  if (epi.len) buf_puts(b, epi.s);
  buf_printf(b, "          yv[e] = v;\n        }\n        ncc_st4f(&%s[op], yv);\n      }\n    }\n",
             kp_value(c, p, group_out(gr), 1, "y"));
  buf_free(&epi);
  return 0;
}

/* ---- tensor cores (ir_gemm_mma: --precision=tf32|fp16|bf16|int8) ----------
 * A block of WM x WN warps (128 threads; 256 for the 128 x 128 tile)
 * computes a BM x BN tile, the one the precision pass chose (ir_gemm_tile,
 * ir/tile.c); warp w owns a (BM / WM) x (BN / WN) part of it, MI x NJ tiles
 * of 16 x 8, each one accumulator fragment (4 floats a lane).  K advances by
 * BK = 16: both tiles are staged in shared memory, rounded to the op's
 * precision as they are stored (tf32 floats, fp16/bf16 their 16 bits, int8
 * bytes), between two barriers; then the warps load their fragments and
 * issue the MMAs (ncc_kernel.h; the fragment layouts are in
 * docs/emulator.md, "Tensor cores"):
 *   tf32: two k-steps of 8, MI * NJ mma.sync.m16n8k8 each
 *         (ncc_mma_tf32_16x8x8);
 *   fp16, bf16: one k-step of 16, MI * NJ mma.sync.m16n8k16 with FP16
 *         (BF16) operands (ncc_mma_f16_16x8x16, ncc_mma_bf16_16x8x16), at
 *         twice TF32's rate;
 *   int8: one k-step of 16, MI * NJ mma.sync.m16n8k16 with s8 operands
 *         and s32 sums (ncc_mma_s8_16x8x16).
 *
 * Shared memory holds the tiles in fragment order (mma_dst): for each k-step
 * and each 16-row (A) or 16-column (B) slice, the 32 lanes' 16-byte slots
 * one after another, a slot a lane's A fragment or its B fragments of two
 * 8-column blocks.  So a lane loads them with one 128-bit load (ncc_lds4,
 * ncc_lds_u32x4; the 16 x 32 tile's one block a warp, half a slot), a
 * phase of 8 lanes reads 128 consecutive bytes (no bank conflict), and a
 * k-step costs MI + NJ / 2 shared loads for MI * NJ MMAs.  The epilogue runs on each accumulator element at its
 * (row, column): gid + 8 (r / 2), 2 tig + r % 2 of its 16 x 8 tile. */
typedef struct MmaCfg { int BM, BN, WM, WN, MI, NJ, T, minb; } MmaCfg;

/* The node's tile (ir_gemm_tile: the precision pass's choice, Node.tile) */
static MmaCfg mma_cfg(const Node *n) {
  IrTile t = ir_gemm_tile(n);
  MmaCfg g = {t.BM, t.BN, t.WM, t.WN, t.BM / t.WM / 16, t.BN / t.WN / 8, t.threads, ir_tile_minb(n, &t)};
  NCC_ASSERT(g.MI >= 1 && g.NJ >= 1 && g.WM * g.WN * 32 == g.T);
  return g;
}

/* The op's MMA */
static int mma_kind(const Node *n) {
  return n->prec == PREC_INT8 ? MMA_S8 : n->prec == PREC_FP16 || n->prec == PREC_BF16 ? MMA_F16 : MMA_TF32;
}
/* The C type of an MMA tile's element: fp16/bf16 their 16 bits, int8 a byte, tf32 a float */
static const char *mma_type(const Node *n) {
  return mma_kind(n) == MMA_S8 ? "signed char" : mma_kind(n) == MMA_F16 ? "unsigned short" : "float";
}

/* The shared-memory place of element (kk, rr) of the A tile (rr: its row,
 * 16-row slices) or the B tile (rr: its column, 16-column slices) of `rows`
 * rows or columns, in fragment order: for each slice (and k-step), 32 slots
 * of 16 bytes, one for each lane, which a lane reads with one 128-bit load.
 * The lane of the element is g * 4 + t (g = rr % 8; t as below), and so is
 * its slot; with `pad` (a tile that a warp stores 32 consecutive rows or
 * columns of one k at a time), slot lane + lane / 8: a slot of padding
 * after each 8, 36 a slice.  A phase of a 128-bit load (8 lanes) still
 * reads 128 consecutive bytes, and such a store then writes 16 banks, not 4
 * (2-way conflicts, not 8-way); 32 where a warp stores 16 columns at two
 * rows (im2col_tile's b_warp16).
 * m16n8k8 (tf32): t = kk % 4; A: slice (kk / 8, rr / 16), element rr % 16 / 8
 * + 2 (kk % 8 / 4) (the fragment's register); B: slice (kk / 8, rr / 16),
 * element rr % 16 / 8 * 2 + kk % 8 / 4 (the registers of columns 0..7 of
 * the slice, then of 8..15).
 * m16n8k16 (fp16, bf16): t = kk % 8 / 2; A: slice rr / 16, element kk / 8 * 4
 * + rr % 16 / 8 * 2 + kk % 2 (registers 0..3: rows 0..7 and 8..15 at k < 8,
 * then at k >= 8); B: slice rr / 16, element rr % 16 / 8 * 4 + kk / 8 * 2 +
 * kk % 2.
 * m16n8k16 s8 (MMA_S8): lane (rr % 8) * 4 + kk / 4, a slot of 8 bytes (A)
 * or 4 G (B); A: slice rr / 16, element rr % 16 / 8 * 4 + kk % 4 (register
 * 0 the rows 0..7 of the slice, 1 the rows 8..15, one 64-bit load); B:
 * slice rr / (8 G), element rr % (8 G) / 8 * 4 + kk % 4, the registers of
 * G = min(nj, 4) 8-column blocks side by side (nj: the warp's blocks, NJ),
 * one load of 4 G bytes.  Padded only where G = 4 (B; A never): slots of
 * 16 bytes as fp16's, so a phase of 8 lanes' 128-bit loads still reads 128
 * consecutive bytes, while a warp's byte stores of 32 consecutive columns at
 * one k meet 32 banks, not 8 (a 64- or 32-bit load's phase of 16 or 32
 * lanes would meet a padding slot). */
static const char *mma_dst(char *dst, size_t n, int ab, int rows, const char *rr, int kind, int pad, int nj) {
  NCC_ASSERT(rows % 16 == 0);
  if (kind == MMA_S8 && ab == 'A')
    snprintf(dst, n, "As[((%s / 16 * 32 + %s %% 8 * 4 + kk / 4) * 2 + %s %% 16 / 8) * 4 + kk %% 4]", rr, rr, rr);
  else if (kind == MMA_S8 && pad) {   /* G = 4 (frag_b_s8's 128-bit loads): a slot of padding after each 8 */
    NCC_ASSERT(nj >= 4);
    snprintf(dst, n, "Bs[(%s / 32 * 36 + %s %% 8 * 4 + %s %% 8 / 2 + kk / 4) * 16 + %s %% 32 / 8 * 4 + kk %% 4]", rr, rr, rr,
             rr);
  } else if (kind == MMA_S8) {
    int G = nj >= 4 ? 4 : nj;
    NCC_ASSERT(G == 1 || G == 2 || G == 4);
    snprintf(dst, n, "Bs[(%s / %d * 32 + %s %% 8 * 4 + kk / 4) * %d + %s %% %d / 8 * 4 + kk %% 4]", rr, 8 * G, rr, 4 * G, rr,
             8 * G);
  } else {
    int k16 = kind == MMA_F16, SS = pad ? 36 : 32;   /* slots a slice (a padded one: 4 more) */
    char sl[64];   /* the element's slot in its slice */
    if (pad)   /* after every 8 slots a slot of padding */
      snprintf(sl, sizeof sl, "%s %% 8 * 4 + %s %% 8 / 2 + kk %% %s", rr, rr, k16 ? "8 / 2" : "4");
    else
      snprintf(sl, sizeof sl, "%s %% 8 * 4 + kk %% %s", rr, k16 ? "8 / 2" : "4");
    if (k16 && ab == 'A')
      snprintf(dst, n, "As[(%s / 16 * %d + %s) * 8 + kk / 8 * 4 + %s %% 16 / 8 * 2 + kk %% 2]", rr, SS, sl, rr);
    else if (k16)
      snprintf(dst, n, "Bs[(%s / 16 * %d + %s) * 8 + %s %% 16 / 8 * 4 + kk / 8 * 2 + kk %% 2]", rr, SS, sl, rr);
    else if (ab == 'A')
      snprintf(dst, n, "As[((kk / 8 * %d + %s / 16) * %d + %s) * 4 + %s %% 16 / 8 + kk %% 8 / 4 * 2]", rows / 16, rr, SS, sl, rr);
    else
      snprintf(dst, n, "Bs[((kk / 8 * %d + %s / 16) * %d + %s) * 4 + %s %% 16 / 8 * 2 + kk %% 8 / 4]", rows / 16, rr, SS, sl, rr);
  }
  return dst;
}

/* An operand element as an MMA tile stores it: tf32 the rounded float rv; fp16
 * and bf16 the 16 bits of v rounded (ncc_fp16_bits, ncc_bf16_bits: the bits
 * of ncc_fp16(v), ncc_bf16(v)); int8 a byte (rv is an integer in [-127, 127]
 * already) */
static const char *mma_store_rv(char *buf, size_t n, const Node *nd, const char *rv) {
  if (mma_kind(nd) == MMA_S8) snprintf(buf, n, "(signed char)%s", rv);
  else if (mma_kind(nd) == MMA_F16) snprintf(buf, n, "%s_bits(v)", cg_operand_round(nd));
  else return rv;
  return buf;
}

/* The head of a loop that gives T threads (tid) the n pieces of a tile, l
 * the piece (then its statements, and the caller's closing brace): a
 * fixed count a thread where T divides n or n divides T, so that the
 * compiler unrolls it without a remainder loop.  `one` comments a piece a
 * thread, `each` (n > T) a loop of n / T pieces a thread. */
static void piece_loop(Buf *b, const char *ind, int n, int T, const char *one, const char *each) {
  if (n == T) buf_printf(b, "%s{   /* %s */\n%s  int l = tid;\n", ind, one, ind);
  else if (n < T) buf_printf(b, "%sif (tid < %d) {   /* %s */\n%s  int l = tid;\n", ind, n, one, ind);
  else if (n % T == 0)
    buf_printf(b, "%sfor (int q = 0; q < %d; q++) {   /* %s */\n%s  int l = tid + q * %d;\n", ind, n / T, each, ind, T);
  else buf_printf(b, "%sfor (int l = tid; l < %d; l += %d) {   /* %s */\n", ind, n, T, one);
}

/* Statements that fill the MMA tile `ab` ('A' or 'B') of `rows` rows from an
 * operand stored narrow at the MMA's type, k-contiguous, with 16-byte rows
 * pieces (GemmSpec.a_vec): each thread loads 16 bytes of a row at once
 * (ncc_ldg128: 8 fp16/bf16 values, or 16 int8) and stores them as four
 * 32-bit words, each two (four) neighbours in k that the fragment order
 * keeps side by side; zero past M (N) and K (K is a multiple of the piece,
 * so a piece is all in or all out). */
static void vec_tile(Buf *b, int ab, int rows, int T, const char *rowvar, const char *rowbase, int64_t RMAX, int64_t K,
                     const char *addr, int kind, int nj) {
  int E = kind == MMA_S8 ? 16 : 8, P = BK / E, W = E / 4;   /* elements a piece, pieces a row, elements a word */
  char dst[200];
  buf_printf(b, "    for (int l = tid; l < %d; l += %d) {   /* 16 bytes a thread: one 128-bit load */\n", rows * P, T);
  if (P > 1) buf_printf(b, "      int rr = l / %d, kv = l %% %d * %d;\n", P, P, E);
  else buf_puts(b, "      int rr = l, kv = 0;\n");
  buf_printf(b, "      int %s = %s + rr, k = k0 + kv;\n      unsigned q[4] = {0u, 0u, 0u, 0u};\n", rowvar, rowbase);
  tile_guard(b, rows, rowvar, RMAX, K);
  buf_printf(b, "        ncc_ldg128(q, %s);\n      }\n", addr);
  buf_printf(b, "      for (int p = 0; p < 4; p++) {\n        int kk = kv + %d * p;\n        ncc_sts32(&%s, q[p]);\n      }\n    }\n",
             W, mma_dst(dst, sizeof dst, ab, rows, "rr", kind, 0, nj));
}

/* The tf32, fp16 or bf16 MMA tile `ab` ('A' or 'B') of `rows` rows from a
 * float32 operand whose rows are k-contiguous in whole 16-byte pieces
 * (GemmSpec.a_f4, b_f4).  vec32_fetch: a thread's pieces of the K tile at
 * kx, 4 floats of a row with one 128-bit load each (vec32_pieces: which),
 * into the registers a4[NP][4] (b4 for B), zero past RMAX and K (K is a
 * multiple of 4, so a piece is all in or all out).  vec32_put: rounds each
 * as load_tile does (rv, of v) and stores them, tf32 a float each, fp16 and
 * bf16 a pair of k a 32-bit word, into a padded tile (mma_dst's pad, and
 * vec32_pieces' choice of a warp's pieces: a store's 32 threads then fall
 * in 32 banks).
 * Unpipelined, a K tile is fetched and put at the top of its iteration;
 * with Node.pipe the next tile's are fetched after the barrier, in flight
 * during the MMAs (as vec32n_fetch's). */
static int vec32_np(int rows, int T) {
  int n = rows * BK / 4;   /* pieces */
  NCC_ASSERT(n % T == 0 || n < T);
  return n >= T ? n / T : 1;
}
/* A thread's 128-bit load of piece q into the registers rg[q] (ncc_ldg128f), zero where the piece is past
 * the rows (c1: "row < RMAX", where rows % R) or past K (c2: "k < K", where K % BK); ind: its indent */
static void ldg128f_piece(Buf *b, const char *ind, const char *rg, const char *c1, const char *c2, const char *addr) {
  if (c1 || c2)
    buf_printf(b, "%s  for (int p = 0; p < 4; p++) %s[q][p] = 0.0f;\n%s  if (%s%s%s) ncc_ldg128f(%s[q], %s);\n", ind, rg, ind,
               c1 ? c1 : "", c1 && c2 ? " && " : "", c2 ? c2 : "", rg, addr);
  else
    buf_printf(b, "%s  ncc_ldg128f(%s[q], %s);\n", ind, rg, addr);
}

/* Piece l's row rr and first k kv.  Each 16-row slice of the tile is two
 * warps' 64 pieces, and a warp's 32 are chosen so that its stores into the
 * fragment order (mma_dst, padded) meet each bank once, where a warp taking
 * 8 whole rows of 16 k met them twice: at fp16/bf16 rows {0..3, 8..11} of the
 * slice (the second warp {4..7, 12..15}), 16 k each (four lanes a row, 64
 * bytes); at tf32 all 16 rows, 8 k each (k 0..7, the second warp 8..15; two
 * lanes a row, 32 bytes).  A warp's 128-bit loads still read whole 32-byte
 * sectors: 16 of them either way. */
static void vec32_pieces(Buf *b, int rows, int T, int kind, const char *ind) {
  int n = rows * BK / 4;
  NCC_ASSERT(BK == 16 && rows % 16 == 0 && T % 32 == 0);
  if (n < T) buf_printf(b, "%sfor (int q = 0; q < 1 && tid < %d; q++) {   /* 4 floats a piece: one 128-bit load */\n", ind, n);
  else buf_printf(b, "%sfor (int q = 0; q < %d; q++) {   /* 4 floats a piece: one 128-bit load */\n", ind, n / T);
  if (kind == MMA_F16)
    buf_printf(b, "%s  int l = tid + q * %d, rr = l / 64 * 16 + l %% 32 / 16 * 8 + l / 32 %% 2 * 4 + l %% 16 / 4, kv = l %% 4 * 4;\n",
               ind, T);
  else
    buf_printf(b, "%s  int l = tid + q * %d, rr = l / 64 * 16 + l %% 32 / 2, kv = l / 32 %% 2 * 8 + l %% 2 * 4;\n", ind, T);
}
static void vec32_fetch(Buf *b, int ab, int rows, int T, int kind, const char *rowvar, const char *rowbase, int64_t RMAX,
                        int64_t K, const char *addr, const char *kx, const char *ind) {
  const char *rg = ab == 'A' ? "a4" : "b4";
  char c1[64], c2[48];
  snprintf(c1, sizeof c1, "%s < %lld", rowvar, LL(RMAX));
  snprintf(c2, sizeof c2, "k < %lld", LL(K));
  vec32_pieces(b, rows, T, kind, ind);
  if (strcmp(kx, "0")) buf_printf(b, "%s  int %s = %s + rr, k = %s + kv;\n", ind, rowvar, rowbase, kx);
  else buf_printf(b, "%s  int %s = %s + rr, k = kv;\n", ind, rowvar, rowbase);
  ldg128f_piece(b, ind, rg, RMAX % rows ? c1 : NULL, K % BK ? c2 : NULL, addr);
  buf_printf(b, "%s}\n", ind);
}
static void vec32_put(Buf *b, int ab, int rows, int T, int kind, const char *rv) {
  const char *rg = ab == 'A' ? "a4" : "b4";
  char dst[200];
  vec32_pieces(b, rows, T, kind, "    ");
  mma_dst(dst, sizeof dst, ab, rows, "rr", kind, 1, 0);
  if (kind == MMA_F16)
    buf_printf(b, "      for (int p = 0; p < 4; p += 2) {   /* k and k + 1: a word */\n        int kk = kv + p;\n"
                  "        float v = %s[q][p];\n        unsigned lo = %s;\n        v = %s[q][p + 1];\n"
                  "        unsigned w = lo | (unsigned)%s << 16;\n        ncc_sts32(&%s, w);\n      }\n    }\n",
               rg, rv, rg, rv, dst);
  else
    buf_printf(b, "      for (int p = 0; p < 4; p++) {\n        int kk = kv + p;\n        float v = %s[q][p];\n"
                  "        %s = %s;\n      }\n    }\n", rg, dst, rv);
}

/* The padded row of a k-major tile of R rows or columns (async_tile_kn,
 * vec32n_fetch; B: R = BN, A: BM): R + 8 values, rows 16 bytes apart
 * modulo 128 */
static int bnp(int BN) { return BN + 8; }

/* The k-major fp16/bf16 tile `ab` ('B': Bs[16 * (BN + 8)], a row of BN
 * values of n for each k, as async_tile_kn's stage; 'A': As, rows of BM
 * values of m) from a float32 operand whose rows of n (m) are contiguous in
 * whole 16-byte pieces (GemmSpec.b_f4n, a_f4m): each of the T threads has
 * NP = 4 R / T pieces (4 floats of n or m at one k; R: BN or BM) of a K
 * tile.  vec32n_fetch: statements that load them, a 128-bit load
 * (ncc_ldg128f) each, into the registers bf4[NP][4] (af4), from the K tile
 * at `kx` (zero past RMAX and K; RMAX is a multiple of 4, so a piece is all
 * in or all out); vec32n_put: statements that round them as load_tile does
 * (rv, of v) and store each piece's four 16-bit values as two 32-bit words.
 * Unpipelined, a K tile is fetched and put at the top of its iteration;
 * with Node.pipe the next tile's are fetched after the barrier, in flight
 * during the MMAs (as a convolution's gathered B, b_fetch). */
static void vec32n_fetch(Buf *b, int ab, int R, int T, int64_t RMAX, int64_t K, const char *kx, const char *addr,
                         const char *ind) {
  int P = R / 4, NP = 4 * R >= T ? 4 * R / T : 1;   /* pieces a row of k, pieces a thread (16 rows: a thread of two) */
  const char *rg = ab == 'A' ? "af4" : "bf4", *rv = ab == 'A' ? "m" : "n";
  NCC_ASSERT(4 * R % T == 0 || T % (4 * R) == 0);
  char c1[48], c2[48];
  snprintf(c1, sizeof c1, "%s < %lld", rv, LL(RMAX));
  snprintf(c2, sizeof c2, "k < %lld", LL(K));
  if (4 * R < T)
    buf_printf(b, "%sfor (int q = 0; q < %d && tid < %d; q++) {   /* 4 floats of %s a piece: one 128-bit load */\n", ind, NP,
               4 * R, rv);
  else
    buf_printf(b, "%sfor (int q = 0; q < %d; q++) {   /* 4 floats of %s a piece: one 128-bit load */\n", ind, NP, rv);
  buf_printf(b, "%s  int l = tid + q * %d, kk = l / %d, %sv = l %% %d * 4;\n", ind, T, P, rv, P);
  if (strcmp(kx, "0")) buf_printf(b, "%s  int k = %s + kk, %s = %s0 + %sv;\n", ind, kx, rv, rv, rv);
  else buf_printf(b, "%s  int k = kk, %s = %s0 + %sv;\n", ind, rv, rv, rv);
  ldg128f_piece(b, ind, rg, RMAX % R ? c1 : NULL, K % BK ? c2 : NULL, addr);
  buf_printf(b, "%s}\n", ind);
}
static void vec32n_put(Buf *b, int ab, int R, int T, const char *rv) {
  int P = R / 4, NP = 4 * R >= T ? 4 * R / T : 1;
  const char *rg = ab == 'A' ? "af4" : "bf4", *r = ab == 'A' ? "m" : "n";
  if (4 * R < T) buf_printf(b, "    for (int q = 0; q < %d && tid < %d; q++) {\n", NP, 4 * R);
  else buf_printf(b, "    for (int q = 0; q < %d; q++) {\n", NP);
  buf_printf(b, "      int l = tid + q * %d, kk = l / %d, %sv = l %% %d * 4;\n", T, P, r, P);
  buf_printf(b, "      for (int p = 0; p < 4; p += 2) {   /* %s and %s + 1: a word */\n"
                "        float v = %s[q][p];\n        unsigned lo = %s;\n        v = %s[q][p + 1];\n"
                "        unsigned w = lo | (unsigned)%s << 16;\n        ncc_sts32(&%s[kk * %d + %sv + p], w);\n      }\n    }\n",
             r, r, rg, rv, rg, rv, ab == 'A' ? "As" : "Bs", bnp(R), r);
}

/* The A tile of a pipelined GEMM (Node.pipe; fp16/bf16/int8: GemmSpec.a_vec,
 * tf32: a_f4), and the B tile of one whose B is k-contiguous too
 * (GemmSpec.b_vec, tf32 b_f4: a linear's weight): row-major, a row (m of A,
 * n of B) of BK = 16 values padded to 48 bytes (the eight 16-byte rows an
 * ldmatrix phase reads fall in distinct banks): AP = 24 16-bit values, or
 * AP8 = 48 int8 ones; tf32's float32 rows padded to AP32 = 20 floats (80
 * bytes: the eight rows at 80-byte steps fall in distinct 16-byte bank
 * groups too).  Node.pipe stages.  Statements that issue stage `stg`'s
 * copies of the K tile at `kx` into `arr` (As, Bs) of `tt` (unsigned short,
 * signed char, float), row `var` (m, n) from `base` (m0, n0) on: 16 bytes a
 * thread with cp.async (k-contiguous rows, whole 16-byte pieces: two a row
 * of 16-bit values, one of int8, four of floats), zeros stored past RMAX
 * and K. */
#define AP 24
#define AP8 48
#define AP32 20
static void async_tile(Buf *b, const char *arr, const char *tt, const char *var, const char *base, int rows, int T,
                       int64_t RMAX, int64_t K, const char *kx, const char *stg, const char *addr, const char *ind) {
  int i8 = !strcmp(tt, "signed char"), f32 = !strcmp(tt, "float");
  int P = i8 ? 1 : f32 ? 4 : 2, ap = i8 ? AP8 : f32 ? AP32 : AP;
  char c1[64], c2[48], cond[128] = "";
  snprintf(c1, sizeof c1, "%s < %lld", var, LL(RMAX));
  snprintf(c2, sizeof c2, "k < %lld", LL(K));
  if (RMAX % rows || K % BK)
    snprintf(cond, sizeof cond, "%s%s%s", RMAX % rows ? c1 : "", RMAX % rows && K % BK ? " && " : "", K % BK ? c2 : "");
  int n = rows * P;   /* the tile's pieces: P a row */
  char each[64];
  snprintf(each, sizeof each, "16 bytes a copy, %d a thread: cp.async", n / T);
  piece_loop(b, ind, n, T, "16 bytes a thread: cp.async", each);
  if (P > 1) buf_printf(b, "%s  int rr = l / %d, kv = l %% %d * %d;\n", ind, P, P, BK / P);
  else buf_printf(b, "%s  int rr = l, kv = 0;\n", ind);
  buf_printf(b, "%s  int %s = %s + rr, k = %s + kv;\n", ind, var, base, kx);
  buf_printf(b, "%s  %s *dst = &%s[%s][rr * %d + kv];\n", ind, tt, arr, stg, ap);
  if (cond[0])
    buf_printf(b, "%s  if (%s) {\n%s    ncc_cp_async16(dst, %s);\n%s  } else {\n"
                  "%s    unsigned z = 0u;\n%s    for (int p = 0; p < 4; p++) ncc_sts32(dst + %d * p, z);\n%s  }\n",
               ind, cond, ind, addr, ind, ind, ind, i8 ? 4 : f32 ? 1 : 2, ind);
  else
    buf_printf(b, "%s  ncc_cp_async16(dst, %s);\n", ind, addr);
  buf_printf(b, "%s}\n", ind);
}

/* tf32: statements that round to TF32, in place, the pieces of stage st of
 * the float32 tile `arr` (As, Bs) of `rows` rows that this thread copied
 * (async_tile's pieces, four a row): after its wait they have landed, for
 * it; the barrier after publishes them.  Each element is rounded once a
 * block, as the tiles stored by the threads are, and the fragments are read
 * as they are. */
static void round_tf32_tile(Buf *b, const char *arr, int rows, int T) {
  const char *what = "this thread's copies, rounded to TF32 in place";
  piece_loop(b, "    ", rows * 4, T, what, what);
  buf_printf(b, "      float *e = &%s[st][l / 4 * %d + l %% 4 * 4];\n"
                "      for (int p = 0; p < 4; p++) e[p] = ncc_tf32(e[p]);\n    }\n", arr, AP32);
}

/* The B tile of a pipelined fp16/bf16 GEMM whose B is n-contiguous
 * (GemmSpec.b_nvec: a matmul's b, a 1x1 convolution's image), k-major: a
 * row of BN values for each of the BK k, padded to BNP = BN + 8 (rows 16
 * bytes apart modulo 128, so the 8 rows of k an ldmatrix.trans phase reads
 * fall in distinct banks); Node.pipe stages.  Statements that issue stage
 * `stg`'s copies of the K tile at `kx`: pieces of PW values (8 or 4: 16 or
 * 8 bytes) a thread with cp.async, zeros stored past N and K (N is a
 * multiple of PW: a piece is all in or all out). */
static void async_tile_kn(Buf *b, int BN, int T, int64_t N, int64_t K, const char *kx, const char *stg, const char *addr,
                          const char *ind, int PW) {
  int P = BN / PW, n = BK * P;   /* pieces a row of k, pieces a tile */
  NCC_ASSERT(PW == 8 || PW == 4);
  char c1[48], c2[48], cond[112] = "";
  snprintf(c1, sizeof c1, "n < %lld", LL(N));
  snprintf(c2, sizeof c2, "k < %lld", LL(K));
  if (N % BN || K % BK) snprintf(cond, sizeof cond, "%s%s%s", N % BN ? c1 : "", N % BN && K % BK ? " && " : "", K % BK ? c2 : "");
  char one[48], each[64];
  snprintf(one, sizeof one, "%d bytes (%d n) a thread: cp.async", 2 * PW, PW);
  snprintf(each, sizeof each, "%d bytes (%d n) a copy, %d a thread: cp.async", 2 * PW, PW, n / T);
  piece_loop(b, ind, n, T, one, each);
  buf_printf(b, "%s  int kk = l / %d, nv = l %% %d * %d;\n", ind, P, P, PW);
  buf_printf(b, "%s  int k = %s + kk, n = n0 + nv;\n", ind, kx);
  buf_printf(b, "%s  unsigned short *dst = &Bs[%s][kk * %d + nv];\n", ind, stg, bnp(BN));
  if (cond[0])
    buf_printf(b, "%s  if (%s) {\n%s    ncc_cp_async%d(dst, %s);\n%s  } else {\n"
                  "%s    unsigned z = 0u;\n%s    for (int p = 0; p < %d; p++) ncc_sts32(dst + 2 * p, z);\n%s  }\n",
               ind, cond, ind, 2 * PW, addr, ind, ind, ind, PW / 2, ind);
  else
    buf_printf(b, "%s  ncc_cp_async%d(dst, %s);\n", ind, 2 * PW, addr);
  buf_printf(b, "%s}\n", ind);
}

/* A loop that fills fragments d[I][0..1] and d[I + 1][0..1] (I = 0, 2, ..
 * n - 2) from one ldmatrix x4 (ld: ncc_ldmatrix_x4 or _x4_trans) each, at
 * &arr[base + I * stride] (arr: the tile, a stage's "As[st]", or "Bs"): two
 * 16-row slices of an int8 A, or two 8-column blocks of a 16-bit B */
static void ldsm_x4_pairs(Buf *b, const char *ld, const char *d, const char *I, int n, const char *arr, const char *base,
                          int stride) {
  buf_printf(b, "      for (int %s = 0; %s < %d; %s += 2) {\n        unsigned q[4];\n"
                "        %s(q, &%s[%s + %s * %d]);\n"
                "        %s[%s][0] = q[0], %s[%s][1] = q[1], %s[%s + 1][0] = q[2], %s[%s + 1][1] = q[3];\n      }\n",
             I, I, n, I, ld, arr, base, I, stride, d, I, d, I, d, I, d, I);
}

/* The declaration of v for a tile element copied as stored (an operand of
 * Value.narrow at the MMA's type: fp16/bf16 bits, int8 integers), zero
 * outside the operand (+0.0, 0); NULL at tf32 (nothing is stored as tf32) */
static const char *mma_bits(int kind) {
  return kind == MMA_F16 ? "unsigned short v = 0;   /* the stored bits, 0: +0.0 */"
         : kind == MMA_S8 ? "signed char v = 0;   /* the stored integer */"
                          : NULL;
}

/* The loads of a warp's B fragments from a B tile in fragment order
 * (mma_dst), the NJ 8-column blocks from column wc on: two blocks a 128-bit
 * load (ld2 of `type`, d[j] and d[j + 1] from one slot) where NJ is even;
 * a tile of one block a warp (NJ = 1, 16 x 32) the half of the slot its
 * block has (ld1).  `ks` starts the slice index (tf32's k-step), `w` is the
 * values in a slot. */
static void frag_b(Buf *b, const char *ld2, const char *ld1, const char *type, const char *d, int NJ, const char *ks,
                   int w, int pad) {
  const char *ls = pad ? "lp" : "lane";
  int SS = pad ? 36 : 32;
  NCC_ASSERT(NJ % 2 == 0 || NJ == 1);
  if (NJ == 1)
    buf_printf(b, "      %s(%s[0], &Bs[((%swc / 16) * %d + %s) * %d + wc / 8 %% 2 * %d]);\n", ld1, d, ks, SS, ls, w, w / 2);
  else
    buf_printf(b, "      for (int j = 0; j < %d; j += 2) {\n        %s q[4];\n"
                  "        %s(q, &Bs[((%swc / 16 + j / 2) * %d + %s) * %d]);\n"
                  "        %s[j][0] = q[0], %s[j][1] = q[1], %s[j + 1][0] = q[2], %s[j + 1][1] = q[3];\n      }\n",
               NJ, type, ld2, ks, SS, ls, w, d, d, d, d);
}

/* The int8 B fragments of a warp's NJ blocks from a tile in fragment order
 * (mma_dst): G = min(NJ, 4) blocks' registers a lane's slot, one 32-, 64-
 * or 128-bit load */
static void frag_b_s8(Buf *b, int NJ, int pad) {
  int G = NJ >= 4 ? 4 : NJ;
  NCC_ASSERT(!pad || G == 4);
  if (pad)   /* mma_dst's padded slices: slot lp of 36 */
    buf_printf(b, "      for (int j = 0; j < %d; j += 4) {\n        unsigned q[4];\n"
                  "        ncc_lds_u32x4(q, (const unsigned short *)&Bs[((wc / 32 + j / 4) * 36 + lp) * 16]);\n"
                  "        for (int r = 0; r < 4; r++) bh[j + r][0] = q[r];\n      }\n",
               NJ);
  else if (G == 1)
    buf_printf(b, "      for (int j = 0; j < %d; j++) bh[j][0] = ncc_lds_s8x4(&Bs[((wc / 8 + j) * 32 + lane) * 4]);\n", NJ);
  else
    buf_printf(b, "      for (int j = 0; j < %d; j += %d) {\n        unsigned q[%d];\n"
                  "        ncc_lds_u32x%d(q, (const unsigned short *)&Bs[((wc / %d + j / %d) * 32 + lane) * %d]);\n"
                  "        for (int r = 0; r < %d; r++) bh[j + r][0] = q[r];\n      }\n",
               NJ, G, G, G, 8 * G, G, 4 * G, G);
}

static int tiled_mma(Cg *c, const KGroup *gr, KParams *p, const GemmSpec *s) {
  MmaCfg g = mma_cfg(gr->main);
  int BM = g.BM, BN = g.BN, MI = g.MI, NJ = g.NJ, T = g.T;
  if (!grid_fits(c, gr, s, BM)) return -1;
  Buf b = {0};
  /* fp16, bf16: the tiles in 16-bit values, int8 in bytes: a lane loads its registers as they are; tf32 in floats */
  const char *TT = mma_type(gr->main);
  /* A through cp.async and ldmatrix, in Node.pipe stages: an fp16/bf16/int8 A stored so, k-contiguous in 16-byte
   * pieces */
  int kind = mma_kind(gr->main), k16 = kind != MMA_TF32, i8 = kind == MMA_S8, ap = i8 ? AP8 : k16 ? AP : AP32;
  /* (not where the precision pass says no: Node.pipe_a); tf32: a float32 A k-contiguous in 16-byte pieces, copied as
   * it is (a_f4) and rounded in place once landed (round_tf32_tile) */
  int t32 = kind == MMA_TF32;
  int pipe = gr->main->pipe && gr->main->pipe_a && (k16 ? s->a_bits[0] && s->a_vec[0] : s->a_f4[0] != 0);
  /* B the same way where it is stored so too (a linear's weight converted at load; tf32: its float32 weight), not
   * gathered (b_tile); int8 with two 8-column blocks a warp at least (ldmatrix x2 and x4 of B's one-register
   * fragments) */
  int pipe_bv = gr->main->pipe && !s->b_tile[0] &&
                (k16 ? s->b_bits[0] && s->b_vec[0] && (!i8 || NJ % 2 == 0) : s->b_f4[0] != 0);
  /* B n-contiguous and stored so at fp16/bf16 (a matmul's b, a 1x1 convolution's image: GemmSpec.b_nvec): copied
   * k-major by cp.async, read by ldmatrix.trans (in place of a convolution's gathered tile, b_tile) */
  int pipe_bt = gr->main->pipe && kind == MMA_F16 && s->b_nvec[0] && !pipe_bv;
  int cpb = pipe_bv || pipe_bt;   /* B by cp.async */
  const char *avec = t32 ? s->a_f4 : s->a_vec, *bvec = t32 ? s->b_f4 : s->b_vec;   /* the copies' addresses */
  /* the stages of those copies (Node.pipe, at least 2): the copies of S - 1 K tiles in flight */
  int S = gr->main->pipe > 2 ? gr->main->pipe : 2;
  /* the operand (a stored narrow one: its bits, mma_bits); B through registers (--gemm-pipeline, a
   * convolution's B tile); an operand stored a row (column) at a time along m (n), element by element:
   * its tile's slices padded (mma_dst) */
  const char *bits = mma_bits(kind);
  int ab = bits && s->a_bits[0], bb = bits && s->b_bits[0];
  /* B float32, n-contiguous (a matmul's input, a 1x1 convolution's image, in place of its gathered tile b_tile):
   * 128-bit loads into a k-major tile (vec32n_fetch) */
  int f4nb = kind == MMA_F16 && !cpb && !(bb && s->b_vec[0]) && !s->b_f4[0] && s->b_f4n[0];
  int pipe_b = gr->main->pipe && s->b_tile[0] && s->b_fetch[0] && !pipe_bt && !f4nb;
  /* the tf32/fp16/bf16 operands the threads stage element by element, or four floats a load */
  int ela = !i8 && !pipe && !(ab && s->a_vec[0]);
  int elb = !i8 && !cpb && !pipe_b && !s->b_tile[0] && !(bb && s->b_vec[0]);
  int f4a = ela && s->a_f4[0], f4b = elb && s->b_f4[0];   /* float32 by 128-bit loads (vec32_fetch) */
  int f4ma = kind == MMA_F16 && ela && !f4a && s->a_f4m[0];   /* A float32, m-contiguous: a k-major tile (vec32n_fetch) */
  int ktile = pipe_bt || f4nb;   /* a k-major B tile, read by ldmatrix.trans */
  int pada = ela && !f4ma && (!s->a_kcontig || f4a);
  int padb = elb ? !f4nb && (!s->b_kcontig || f4b) : s->b_tile[0] && !ktile && s->b_pad;
  static const char *const stage_words[] = {"", "", "two", "three", "four"};
  const char *sw = stage_words[S <= IR_PIPE_MAX_STAGES ? S : 2];
  if (pipe)
    buf_printf(&b, "  %s __align__(16) %s As[%d][%d];   /* A tile, %d x %d row-major (rows padded to %d), "
                   "%s stages: cp.async, ldmatrix */\n", D_SHARED, TT, S, BM * ap, BM, BK, ap, sw);
  else if (f4ma)
    buf_printf(&b, "  %s __align__(16) %s As[%d];   /* A tile, %d x %d, a row of m for each k (rows padded to %d): "
                   "ldmatrix.trans */\n", D_SHARED, TT, BK * bnp(BM), BM, BK, bnp(BM));
  else
    buf_printf(&b, "  %s __align__(16) %s As[%d];   /* A tile, %d x %d, in fragment order%s */\n", D_SHARED, TT,
               BK * BM / 32 * (pada ? 36 : 32), BM, BK, pada ? " (padded slices)" : "");
  if (pipe_bv)
    buf_printf(&b, "  %s __align__(16) %s Bs[%d][%d];   /* B tile, %d x %d, a row of k for each n (rows padded "
                   "to %d), %s stages: cp.async, ldmatrix */\n", D_SHARED, TT, S, BN * ap, BK, BN, ap, sw);
  else if (pipe_bt)
    buf_printf(&b, "  %s __align__(16) %s Bs[%d][%d];   /* B tile, %d x %d, a row of n for each k (rows padded "
                   "to %d), %s stages: cp.async, ldmatrix.trans */\n", D_SHARED, TT, S, BK * bnp(BN), BK, BN, bnp(BN), sw);
  else if (f4nb)
    buf_printf(&b, "  %s __align__(16) %s Bs[%d];   /* B tile, %d x %d, a row of n for each k (rows padded to %d): "
                   "ldmatrix.trans */\n", D_SHARED, TT, BK * bnp(BN), BK, BN, bnp(BN));
  else
    buf_printf(&b, "  %s __align__(16) %s Bs[%d];   /* B tile, %d x %d, in fragment order%s */\n", D_SHARED, TT,
               BK * BN / 32 * (padb ? 36 : 32), BK, BN, padb ? " (padded slices)" : "");
  buf_printf(&b, "  int tid = %s, lane = tid %% 32, warp = tid / 32;\n", D_TID_X);
  buf_puts(&b, "  int gid = lane / 4, tig = lane % 4;   /* the lane's group and its place in it (PTX: groupID, threadID_in_group) */\n");
  if (pada || padb)
    buf_puts(&b, "  int lp = lane + lane / 8;   /* the lane's 16-byte slot in a padded slice (mma_dst) */\n");
  if (g.WM > 1)
    buf_printf(&b, "  int wr = warp / %d * %d, wc = warp %% %d * %d;   /* the warp's part of the tile */\n", g.WN, BM / g.WM,
               g.WN, BN / g.WN);
  else
    buf_printf(&b, "  int wr = 0, wc = warp * %d;   /* the warp's part of the tile */\n", BN / g.WN);
  buf_printf(&b, "  int m0 = %s * %d, n0 = %s * %d;\n", D_BID_Y, BM, D_BID_X, BN);
  z_and_range(&b, s);
  if (s->b_tile[0] && !pipe_bt && !f4nb) buf_puts(&b, s->b_pre);
  buf_printf(&b, "  %s acc[%d][%d][4];\n", kind == MMA_S8 ? "int" : "float", MI, NJ);
  buf_printf(&b, "  for (int i = 0; i < %d; i++)\n    for (int j = 0; j < %d; j++)\n"
                 "      for (int r = 0; r < 4; r++) acc[i][j][r] = %s;\n", MI, NJ, kind == MMA_S8 ? "0" : "0.0f");
  char kend[32];   /* the end of this block's K: split-K's range, the block's (k_var), else K */
  k_end(s, kend, sizeof kend);
  /* the first K tile, and whether the copies ahead test theirs at run time (a block's K may be shorter) */
  const char *k1 = s->S > 1 ? "kb" : "0";
  int rt = s->S > 1 || s->k_var;
  if (f4ma)   /* x4.trans: lanes 0..7 name rows k 0..7 of rows m wr.., 8..15 the same k of m + 8, 16..31 k 8..15 */
    buf_printf(&b, "  int la = (lane %% 8 + 8 * (lane / 16)) * %d + wr + 8 * (lane / 8 %% 2);   /* this lane's ldmatrix row of A (a k) */\n",
               bnp(BM));
  if (ktile)   /* x4.trans: lanes 0..7 name rows k 0..7 of columns wc.., 8..15 k 8..15, 16..31 columns wc + 8..;
                 x2.trans: lanes 0..15 */
    buf_printf(&b, "  int lb = (lane %% 8 + 8 * (lane / 8 %% 2)) * %d + wc%s;   /* this lane's ldmatrix row of B (a k) */\n",
               bnp(BN), NJ % 2 ? "" : " + 8 * (lane / 16)");
  if (pipe || cpb) {   /* the first K tile's copies in flight before the loop */
    buf_puts(&b, "  int st = 0;   /* the stage the loop's MMAs read */\n");
    /* int8: a 16-byte row is a row's 16 k; an 8 x 8 matrix of 16-bit pairs gives lane l the bytes
     * 4 (l % 4) .. + 3 of row l / 4: the s8 fragment of rows (A) or columns (B) 0..7 */
    /* 16 bytes: 8 16-bit values, 4 tf32 floats (an 8 x 8 matrix of 16-bit halves gives lane l the float
     * l % 4 of row l / 4: the tf32 fragment's register) */
    int h = t32 ? 4 : 8, ap2 = t32 ? AP32 : AP;
    if (pipe && !i8)
      buf_printf(&b, "  int lo = (wr + lane %% 8 + 8 * (lane / 8 %% 2)) * %d + %d * (lane / 16);   /* this lane's ldmatrix row of A */\n",
                 ap2, h);
    else if (pipe)   /* x4: lane l names row l of two 16-row slices; x2: row l %% 16 of one */
      buf_printf(&b, "  int lo = (wr + lane%s) * %d;   /* this lane's ldmatrix row of A */\n", MI % 2 ? " % 16" : "", AP8);
    if (pipe_bv && !i8 && NJ % 2 == 0)   /* x4: lanes 0..7 name rows n (k 0..7), 8..15 the same n (k 8..15), 16..31 n + 8 */
      buf_printf(&b, "  int lb = (wc + lane %% 8 + 8 * (lane / 16)) * %d + %d * (lane / 8 %% 2);   /* this lane's ldmatrix row of B */\n",
                 ap2, h);
    else if (pipe_bv && !i8)   /* x2: lanes 0..7 rows n (k 0..7), 8..15 the same n (k 8..15); the others' as theirs */
      buf_printf(&b, "  int lb = (wc + lane %% 8) * %d + %d * (lane / 8 %% 2);   /* this lane's ldmatrix row of B */\n", ap2, h);
    else if (pipe_bv)   /* x4: lane l names column l of four 8-column blocks; x2: column l %% 16 of two */
      buf_printf(&b, "  int lb = (wc + lane%s) * %d;   /* this lane's ldmatrix row of B */\n", NJ % 4 ? " % 16" : "", AP8);
    if (s->k_var) buf_printf(&b, "  if (%s < %s) {\n", k1, kend);
    else buf_puts(&b, "  {\n");
    if (pipe) async_tile(&b, "As", TT, "m", "m0", BM, T, s->M, s->K, k1, "0", avec, "    ");
    if (pipe_bv) async_tile(&b, "Bs", TT, "n", "n0", BN, T, s->N, s->K, k1, "0", bvec, "    ");
    if (pipe_bt) async_tile_kn(&b, BN, T, s->N, s->K, k1, "0", s->b_nvec, "    ", s->b_piece);
    if (s->k_var) buf_puts(&b, "  }\n  ncc_cp_async_commit();\n");
    else buf_puts(&b, "    ncc_cp_async_commit();\n  }\n");
    for (int q = 1; q < S - 1; q++) {   /* and the next ones' (a group each, empty past the end) */
      char kx[32], stg[16];
      if (s->S > 1) snprintf(kx, sizeof kx, "kb + %d", q * BK);
      else snprintf(kx, sizeof kx, "%d", q * BK);
      snprintf(stg, sizeof stg, "%d", q);
      if (rt) buf_printf(&b, "  if (%s < %s) {\n", kx, kend);
      else if (q * BK < s->K) buf_puts(&b, "  {\n");
      if (rt || q * BK < s->K) {
        if (pipe) async_tile(&b, "As", TT, "m", "m0", BM, T, s->M, s->K, kx, stg, avec, "    ");
        if (pipe_bv) async_tile(&b, "Bs", TT, "n", "n0", BN, T, s->N, s->K, kx, stg, bvec, "    ");
        if (pipe_bt) async_tile_kn(&b, BN, T, s->N, s->K, kx, stg, s->b_nvec, "    ", s->b_piece);
        buf_puts(&b, "  }\n");
      }
      buf_printf(&b, "  ncc_cp_async_commit();%s\n", rt || q * BK < s->K ? "" : "   /* (empty: K has no such tile) */");
    }
  }
  /* B through registers (--gemm-pipeline, a convolution's B tile): the next K tile's elements are
   * loaded while this one's MMAs run, and stored into the tile at the top of the next iteration */
  if (pipe_b) {
    NCC_ASSERT(!s->k_var);   /* (b_first fetches K tile 0 untested: the forward convolutions' tiles only) */
    buf_printf(&b, "  %s\n", s->b_regs);
    buf_puts(&b, s->b_first);
  }
  /* a thread's float32 pieces of A, B (vec32n_fetch); pipelined, the first K tile's before the loop */
  if (f4ma) buf_printf(&b, "  float af4[%d][4];\n", 4 * BM >= T ? 4 * BM / T : 1);
  if (f4nb) buf_printf(&b, "  float bf4[%d][4];\n", 4 * BN / T);
  /* float32 k-contiguous pieces (vec32_fetch); pipelined, the first K tile's before the loop */
  int f4ap = f4a && gr->main->pipe && gr->main->pipe_r, f4bp = f4b && gr->main->pipe && gr->main->pipe_r;
  if (f4a) buf_printf(&b, "  float a4[%d][4];   /* this thread's A pieces of a K tile */\n", vec32_np(BM, T));
  if (f4b) buf_printf(&b, "  float b4[%d][4];   /* this thread's B pieces of a K tile */\n", vec32_np(BN, T));
  int f1 = f4ap || f4bp || ((f4ma || f4nb) && gr->main->pipe);   /* pieces fetched before the loop */
  if (f1 && s->k_var) buf_printf(&b, "  if (%s < %s) {   /* (the block may have no K tile) */\n", k1, kend);
  const char *ind1 = f1 && s->k_var ? "    " : "  ";
  if (f4ap) vec32_fetch(&b, 'A', BM, T, kind, "m", "m0", s->M, s->K, s->a_f4, k1, ind1);
  if (f4bp) vec32_fetch(&b, 'B', BN, T, kind, "n", "n0", s->N, s->K, s->b_f4, k1, ind1);
  if (f4ma && gr->main->pipe) vec32n_fetch(&b, 'A', BM, T, s->M, s->K, k1, s->a_f4m, ind1);
  if (f4nb && gr->main->pipe) vec32n_fetch(&b, 'B', BN, T, s->N, s->K, k1, s->b_f4n, ind1);
  if (f1 && s->k_var) buf_puts(&b, "  }\n");
  k_loop(&b, s, BK);
  char dst[160];
  char ra[64], rb[64], sa[96], sb[96];
  spec_rv(c, p, gr->main, s, ra, rb);
  if (pipe || cpb) {   /* the copies of the K tile S - 1 on, into the stage the last iteration read,
                              while this one's loads and MMAs run */
    buf_printf(&b, "    if (k0 + %d < %s) {\n", (S - 1) * BK, kend);
    char knext[32], stg[32];
    snprintf(knext, sizeof knext, "k0 + %d", (S - 1) * BK);
    if (S == 2) snprintf(stg, sizeof stg, "st ^ 1");
    else snprintf(stg, sizeof stg, "st ? st - 1 : %d", S - 1);
    if (pipe) async_tile(&b, "As", TT, "m", "m0", BM, T, s->M, s->K, knext, stg, avec, "      ");
    if (pipe_bv) async_tile(&b, "Bs", TT, "n", "n0", BN, T, s->N, s->K, knext, stg, bvec, "      ");
    if (pipe_bt) async_tile_kn(&b, BN, T, s->N, s->K, knext, stg, s->b_nvec, "      ", s->b_piece);
    buf_puts(&b, "    }\n    ncc_cp_async_commit();   /* (an empty group after the last tile) */\n");
  }
  if (pipe)
    ;   /* A by cp.async, above */
  else if (ab && s->a_vec[0])   /* 16 bytes a load where the stored operand's rows allow */
    vec_tile(&b, 'A', BM, T, "m", "m0", s->M, s->K, s->a_vec, kind, NJ);
  else if (f4a) {   /* float32 pieces of k: this K tile's (fetched in the last iteration, or now) */
    if (!f4ap) vec32_fetch(&b, 'A', BM, T, kind, "m", "m0", s->M, s->K, s->a_f4, "k0", "    ");
    vec32_put(&b, 'A', BM, T, kind, mma_store_rv(sa, sizeof sa, gr->main, ra));
  }
  else if (f4ma) {   /* float32 pieces of m: this K tile's (fetched in the last iteration, or now) */
    if (!gr->main->pipe) vec32n_fetch(&b, 'A', BM, T, s->M, s->K, "k0", s->a_f4m, "    ");
    vec32n_put(&b, 'A', BM, T, mma_store_rv(sa, sizeof sa, gr->main, ra));
  }
  else
    load_tile(&b, mma_dst(dst, sizeof dst, 'A', BM, "rr", kind, pada, NJ), BM, T, s->a_kcontig, "m", "m0", s->M, s->K,
              ab ? s->a_bits : s->a_load, ab ? "v" : mma_store_rv(sa, sizeof sa, gr->main, ra), ab ? bits : NULL,
              pada && !s->a_kcontig ? kind : -1);
  if (cpb)
    ;   /* B by cp.async, above */
  else if (f4nb) {   /* float32 pieces of n: this K tile's (fetched in the last iteration, or now) */
    if (!gr->main->pipe) vec32n_fetch(&b, 'B', BN, T, s->N, s->K, "k0", s->b_f4n, "    ");
    vec32n_put(&b, 'B', BN, T, mma_store_rv(sb, sizeof sb, gr->main, rb));
  } else if (pipe_b) buf_puts(&b, s->b_put);
  else if (s->b_tile[0]) buf_puts(&b, s->b_tile);
  else if (bb && s->b_vec[0]) vec_tile(&b, 'B', BN, T, "n", "n0", s->N, s->K, s->b_vec, kind, NJ);
  else if (f4b) {
    if (!f4bp) vec32_fetch(&b, 'B', BN, T, kind, "n", "n0", s->N, s->K, s->b_f4, "k0", "    ");
    vec32_put(&b, 'B', BN, T, kind, mma_store_rv(sb, sizeof sb, gr->main, rb));
  }
  else load_tile(&b, mma_dst(dst, sizeof dst, 'B', BN, "rr", kind, padb, NJ), BN, T, s->b_kcontig, "n", "n0", s->N, s->K,
                 bb ? s->b_bits : s->b_load, bb ? "v" : mma_store_rv(sb, sizeof sb, gr->main, rb), bb ? bits : NULL,
                 padb && !s->b_kcontig && !s->b_gather ? kind : -1);
  if (pipe || cpb) {
    if (S == 2) buf_puts(&b, "    ncc_cp_async_wait(1);   /* this K tile's copies have landed (the next one's may not) */\n");
    else buf_printf(&b, "    ncc_cp_async_wait(%d);   /* this K tile's copies have landed (the next %d tiles' may not) */\n", S - 1, S - 1);
  }
  if (t32 && pipe) round_tf32_tile(&b, "As", BM, T);
  if (t32 && pipe_bv) round_tf32_tile(&b, "Bs", BN, T);
  char adv[48] = "";   /* the next stage */
  if ((pipe || cpb) && S == 2) snprintf(adv, sizeof adv, "    st ^= 1;\n");
  else if (pipe || cpb) snprintf(adv, sizeof adv, "    st = st == %d ? 0 : st + 1;\n", S - 1);
  buf_printf(&b, "    %s\n", D_BARRIER);
  if (pipe_b) {
    buf_printf(&b, "    if (k0 + %d < %s) {   /* the next K tile's B elements, in flight during the MMAs */\n", BK, kend);
    buf_puts(&b, s->b_fetch);
    buf_puts(&b, "    }\n");
  }
  if (f4ap || f4bp) {
    char kx[32];
    snprintf(kx, sizeof kx, "k0 + %d", BK);
    buf_printf(&b, "    if (k0 + %d < %s) {   /* the next K tile's %s pieces, in flight during the MMAs */\n", BK, kend,
               f4ap && f4bp ? "A and B" : f4ap ? "A" : "B");
    if (f4ap) vec32_fetch(&b, 'A', BM, T, kind, "m", "m0", s->M, s->K, s->a_f4, kx, "      ");
    if (f4bp) vec32_fetch(&b, 'B', BN, T, kind, "n", "n0", s->N, s->K, s->b_f4, kx, "      ");
    buf_puts(&b, "    }\n");
  }
  if ((f4ma || f4nb) && gr->main->pipe) {
    char kx[32];
    snprintf(kx, sizeof kx, "k0 + %d", BK);
    buf_printf(&b, "    if (k0 + %d < %s) {   /* the next K tile's %s pieces, in flight during the MMAs */\n", BK, kend,
               f4ma && f4nb ? "A and B" : f4ma ? "A" : "B");
    if (f4ma) vec32n_fetch(&b, 'A', BM, T, s->M, s->K, kx, s->a_f4m, "      ");
    if (f4nb) vec32n_fetch(&b, 'B', BN, T, s->N, s->K, kx, s->b_f4n, "      ");
    buf_puts(&b, "    }\n");
  }
  if (kind == MMA_S8) {   /* a lane's A: 2 registers of 4 int8 (rows g, g + 8), B: 1, each one 32-bit load */
    buf_printf(&b, "    {\n      unsigned ah[%d][2], bh[%d][1];\n", MI, NJ);
    if (pipe && MI % 2 == 0)   /* ldmatrix x4: rows 0..7, 8..15 of slices i and i + 1 */
      ldsm_x4_pairs(&b, "ncc_ldmatrix_x4", "ah", "i", MI, "As[st]", "lo", 16 * AP8);
    else if (pipe)
      buf_printf(&b, "      for (int i = 0; i < %d; i++) ncc_ldmatrix_x2(ah[i], &As[st][lo + i * %d]);\n", MI, 16 * AP8);
    else
      buf_printf(&b, "      for (int i = 0; i < %d; i++)\n"
                     "        ncc_lds_u32x2(ah[i], (const unsigned short *)&As[((wr / 16 + i) * 32 + lane) * 8]);\n", MI);
    if (pipe_bv && NJ % 4 == 0)   /* ldmatrix x4: columns 0..7 of blocks j .. j + 3 */
      buf_printf(&b, "      for (int j = 0; j < %d; j += 4) {\n        unsigned q[4];\n"
                     "        ncc_ldmatrix_x4(q, &Bs[st][lb + j * %d]);\n"
                     "        for (int r = 0; r < 4; r++) bh[j + r][0] = q[r];\n      }\n", NJ, 8 * AP8);
    else if (pipe_bv)
      buf_printf(&b, "      for (int j = 0; j < %d; j += 2) {\n        unsigned q[2];\n"
                     "        ncc_ldmatrix_x2(q, &Bs[st][lb + j * %d]);\n"
                     "        bh[j][0] = q[0], bh[j + 1][0] = q[1];\n      }\n", NJ, 8 * AP8);
    else
      frag_b_s8(&b, NJ, padb);
    buf_printf(&b, "      for (int i = 0; i < %d; i++)\n        for (int j = 0; j < %d; j++) ncc_mma_s8_16x8x16(acc[i][j], ah[i], bh[j]);\n",
               MI, NJ);
    buf_printf(&b, "    }\n    %s\n%s  }\n", D_BARRIER, adv);
  } else if (k16) {   /* a lane's A: 4 registers of two 16-bit values, B: 2; two values a 32-bit word */
    const char *t = gr->main->prec == PREC_BF16 ? "bf16" : "f16";
    buf_printf(&b, "    {\n      unsigned ah[%d][4], bh[%d][2];\n", MI, NJ);
    if (pipe)   /* ldmatrix x4: lane l names row l % 8 + 8 (l / 8 % 2), columns 8 (l / 16) on, of a 16-row slice */
      buf_printf(&b, "      for (int i = 0; i < %d; i++) ncc_ldmatrix_x4(ah[i], &As[st][lo + i * %d]);\n", MI, 16 * AP);
    else if (f4ma)   /* ldmatrix x4.trans from the k-major tile: a 16-row slice's four registers */
      buf_printf(&b, "      for (int i = 0; i < %d; i++) ncc_ldmatrix_x4_trans(ah[i], &As[la + i * 16]);\n", MI);
    else
      buf_printf(&b, "      for (int i = 0; i < %d; i++) ncc_lds_u32x4(ah[i], &As[((wr / 16 + i) * %d + %s) * 8]);\n", MI,
                 pada ? 36 : 32, pada ? "lp" : "lane");
    if (pipe_bv && NJ % 2 == 0)   /* ldmatrix x4: the fragments of columns 8 j .. 8 j + 15, k 0..15 */
      ldsm_x4_pairs(&b, "ncc_ldmatrix_x4", "bh", "j", NJ, "Bs[st]", "lb", 8 * AP);
    else if (ktile && NJ % 2 == 0)   /* ldmatrix x4.trans: columns 8 j .. 8 j + 15, k 0..15 */
      ldsm_x4_pairs(&b, "ncc_ldmatrix_x4_trans", "bh", "j", NJ, pipe_bt ? "Bs[st]" : "Bs", "lb", 8);
    else if (ktile)
      buf_printf(&b, "      ncc_ldmatrix_x2_trans(bh[0], &%s[lb]);\n", pipe_bt ? "Bs[st]" : "Bs");
    else if (pipe_bv)
      buf_printf(&b, "      for (int j = 0; j < %d; j++) ncc_ldmatrix_x2(bh[j], &Bs[st][lb + j * %d]);\n", NJ, 8 * AP);
    else
      frag_b(&b, "ncc_lds_u32x4", "ncc_lds_u32x2", "unsigned", "bh", NJ, "", 8, padb);
    buf_printf(&b, "      for (int i = 0; i < %d; i++)\n        for (int j = 0; j < %d; j++) ncc_mma_%s_16x8x16(acc[i][j], ah[i], bh[j]);\n",
               MI, NJ, t);
    buf_printf(&b, "    }\n    %s\n%s  }\n", D_BARRIER, adv);
  } else {
    buf_printf(&b, "    for (int ks = 0; ks < 2; ks++) {\n      float af[%d][4], bf[%d][2];\n", MI, NJ);
    if (pipe)   /* ldmatrix x4 of the float32 rows (rounded in place): rows 0..7 and 8..15 of the slice at k 0..3, then 4..7 */
      buf_printf(&b, "      for (int i = 0; i < %d; i++) {\n        unsigned q[4];\n"
                     "        ncc_ldmatrix_x4(q, &As[st][lo + i * %d + ks * 8]);\n"
                     "        for (int r = 0; r < 4; r++) af[i][r] = ncc_f32_bits(q[r]);\n      }\n", MI, 16 * AP32);
    else
      buf_printf(&b, "      for (int i = 0; i < %d; i++) ncc_lds4(af[i], &As[((ks * %d + wr / 16 + i) * %d + %s) * 4]);\n", MI,
                 BM / 16, pada ? 36 : 32, pada ? "lp" : "lane");
    if (pipe_bv && NJ % 2 == 0)   /* ldmatrix x4: columns 0..7 of the block at k 0..3, 4..7, then the next block's */
      buf_printf(&b, "      for (int j = 0; j < %d; j += 2) {\n        unsigned q[4];\n"
                     "        ncc_ldmatrix_x4(q, &Bs[st][lb + j * %d + ks * 8]);\n"
                     "        bf[j][0] = ncc_f32_bits(q[0]), bf[j][1] = ncc_f32_bits(q[1]);\n"
                     "        bf[j + 1][0] = ncc_f32_bits(q[2]), bf[j + 1][1] = ncc_f32_bits(q[3]);\n      }\n", NJ, 8 * AP32);
    else if (pipe_bv)
      buf_puts(&b, "      {\n        unsigned q[2];\n        ncc_ldmatrix_x2(q, &Bs[st][lb + ks * 8]);\n"
                   "        bf[0][0] = ncc_f32_bits(q[0]), bf[0][1] = ncc_f32_bits(q[1]);\n      }\n");
    else {
      char ks[48];
      snprintf(ks, sizeof ks, "ks * %d + ", BN / 16);
      frag_b(&b, "ncc_lds4", "ncc_lds2", "float", "bf", NJ, ks, 4, padb);
    }
    buf_printf(&b, "      for (int i = 0; i < %d; i++)\n        for (int j = 0; j < %d; j++) ncc_mma_tf32_16x8x8(acc[i][j], af[i], bf[j]);\n",
               MI, NJ);
    buf_printf(&b, "    }\n    %s\n%s  }\n", D_BARRIER, adv);
  }
  /* the epilogue unrolled whole: with a loop left, nvcc keeps acc in local memory (a stack frame); a fragment's
   * columns n, n + 1 one store where the output allows (out_pair; not a phase's, whose pixels are sw apart) */
  if (s->out_pair && !s->store_if[0]) {
    if (mma_epilogue_pairs(c, gr, p, s, &b, MI, NJ, BM, BN, kind)) {
      buf_free(&b);
      return -1;
    }
  } else {
    buf_printf(&b, "  NCC_UNROLL\n  for (int i = 0; i < %d; i++)\n    NCC_UNROLL\n    for (int j = 0; j < %d; j++)\n"
               "      NCC_UNROLL\n      for (int r = 0; r < 4; r++) {\n", MI, NJ);
    buf_puts(&b, "        int m = m0 + wr + 16 * i + gid + 8 * (r / 2), n = n0 + wc + 8 * j + 2 * tig + r % 2;\n");
    char c1[48], c2[48];
    snprintf(c1, sizeof c1, "m < %lld", LL(s->M));
    snprintf(c2, sizeof c2, "n < %lld", LL(s->N));
    guard_open(&b, "        ", s->M % BM ? c1 : NULL, s->N % BN ? c2 : NULL);
    buf_printf(&b, "          float v = %sacc[i][j][r];\n", kind == MMA_S8 ? "(float)" : "");
    if (store_tail(c, gr, p, s, &b, 5)) {
      buf_free(&b);
      return -1;
    }
    buf_puts(&b, "        }\n      }\n");
  }
  char opn[96];
  const char *name = cg_finish_bounds(c, form_name(gr, "mma", opn), NCC_KF_BARRIER_, p, &b, T, g.minb);
  tiled_launch(c, gr, p, s, name, BM, BN, T, 1);
  buf_free(&b);
  return s->S > 1 ? split_sum(c, gr, s) : 0;
}

/* ---- GEMV: few rows (ir_gemm_gemv) -------------------------------------------
 * A block of 256 threads computes R = IR_GEMV_BLOCK_ROWS rows (fewer when M
 * is smaller) of F output columns; its threads split K into S slices, F * S =
 * 256.  Along B's contiguous axis the threads are consecutive: B k-contiguous
 * (linear's weight rows) gives a warp to each column, its 32 lanes reading 32
 * consecutive weights (S = 32, F = 8); B n-contiguous (matmul's b) gives 32
 * consecutive columns to a warp and 8 slices of K (S = 8, F = 32).  A thread
 * keeps R partial sums; K advances four slices at a time (four independent
 * loads in flight), then one at a time.  With B k-contiguous a column's 32
 * partial sums are one warp's: a butterfly of __shfl_xor_sync adds them (no
 * shared memory, no barrier) and lane 0 runs the epilogue and the stores of
 * the R rows.  With B n-contiguous the partial sums meet in shared memory (a
 * row padded to S + 1 floats: no bank conflict) after one barrier; R * F
 * threads each add their column's S partials, in order, and run the epilogue
 * and the store as the tiled kernel does.  A's element is loaded by every
 * thread that needs it (a broadcast within a warp, cached after). */
static int gemv(Cg *c, const KGroup *gr, KParams *p, const GemmSpec *s) {
  int R = s->M < IR_GEMV_BLOCK_ROWS ? (int)s->M : IR_GEMV_BLOCK_ROWS;
  int S = s->b_kcontig ? 32 : 8, F = 256 / S, U = 4;
  int q8 = gr->main->prec == PREC_INT8;   /* int8: int32 sums of the quantized integers */
  const char *T = q8 ? "int" : "float";
  int mrem = s->M % R != 0, nrem = s->N % F != 0;
  if (s->Z > 65535) {
    diag_error(gr->main->loc, "codegen: %s with %lld batches exceeds the GEMV kernel's grid (65535); try --cublas",
               ncc_ops[gr->main->op].name, LL(s->Z));
    c->err = 1;
    return -1;
  }
  Buf b = {0};
  if (!s->b_kcontig) buf_printf(&b, "  %s %s red[%d][%d][%d];\n", D_SHARED, T, R, F, S + 1);
  if (s->b_kcontig) buf_printf(&b, "  int t = %s, ks = t %% 32, f = t / 32;\n", D_TID_X);
  else buf_printf(&b, "  int t = %s, f = t %% 32, ks = t / 32;\n", D_TID_X);
  if (R > 1) buf_printf(&b, "  int m0 = %s * %d, n0 = %s * %d;\n", D_BID_Y, R, D_BID_X, F);
  else buf_printf(&b, "  int m0 = %s, n0 = %s * %d;\n", D_BID_Y, D_BID_X, F);
  if (s->uses_z) buf_printf(&b, "  int z = %s;\n", D_BID_Z);
  buf_printf(&b, "  %s acc[%d];\n  for (int r = 0; r < %d; r++) acc[r] = %s;\n", T, R, R, q8 ? "0" : "0.0f");
  buf_printf(&b, "  {\n    int n = n0 + f;\n");
  if (nrem) buf_printf(&b, "    if (n < %lld) {\n", LL(s->N));
  else buf_puts(&b, "    {\n");
  char ra[64], rb[64], fa[96];
  spec_rv(c, p, gr->main, s, ra, rb);
  /* the multiply-add of A's element (ra) and B's (bv[u], bk) into acc[r] */
  snprintf(fa, sizeof fa, q8 ? "acc[r] += (int)(%s) * " : "acc[r] = fmaf(%s, ", ra);
  const char *fz = q8 ? ";" : ", acc[r]);";
  /* four slices a step: the loads first, then the multiply-adds */
  buf_printf(&b, "      int kb = ks;\n      for (; kb + %d < %lld; kb += %d) {\n        %s bv[%d];\n", (U - 1) * S,
             LL(s->K), U * S, T, U);
  buf_printf(&b, "        for (int u = 0; u < %d; u++) {\n          int k = kb + u * %d;\n          float v = 0.0f;\n"
                 "          %s\n          bv[u] = %s;\n        }\n", U, S, s->b_load, rb);
  buf_printf(&b, "        for (int r = 0; r < %d; r++)\n          for (int u = 0; u < %d; u++) {\n", R, U);
  buf_printf(&b, "            int m = m0 + r, k = kb + u * %d;\n            float v = 0.0f;\n", S);
  if (mrem) buf_printf(&b, "            if (m < %lld) {\n              %s\n            }\n", LL(s->M), s->a_load);
  else buf_printf(&b, "            {\n              %s\n            }\n", s->a_load);
  buf_printf(&b, "            %sbv[u]%s\n          }\n      }\n", fa, fz);
  buf_printf(&b, "      for (int k = kb; k < %lld; k += %d) {\n        %s bk;\n", LL(s->K), S, T);
  buf_printf(&b, "        {\n          float v = 0.0f;\n          %s\n          bk = %s;\n        }\n", s->b_load, rb);
  buf_printf(&b, "        for (int r = 0; r < %d; r++) {\n          int m = m0 + r;\n          float v = 0.0f;\n", R);
  if (mrem) buf_printf(&b, "          if (m < %lld) {\n            %s\n          }\n", LL(s->M), s->a_load);
  else buf_printf(&b, "          {\n            %s\n          }\n", s->a_load);
  buf_printf(&b, "          %sbk%s\n        }\n      }\n    }\n  }\n", fa, fz);
  char c1[48], c2[48];
  snprintf(c1, sizeof c1, "m < %lld", LL(s->M));
  snprintf(c2, sizeof c2, "n < %lld", LL(s->N));
  if (s->b_kcontig) {   /* the warp's 32 slices of column n0 + f */
    buf_printf(&b, "  for (int r = 0; r < %d; r++)\n"
                   "    for (int o = 16; o > 0; o >>= 1) acc[r] = acc[r] + __shfl_xor_sync(0xffffffffu, acc[r], o);\n", R);
    buf_printf(&b, "  if (ks == 0)\n    for (int r = 0; r < %d; r++) {\n      int m = m0 + r, n = n0 + f;\n", R);
    guard_open(&b, "      ", mrem ? c1 : NULL, nrem ? c2 : NULL);
    buf_printf(&b, "        float v = %sacc[r];\n", q8 ? "(float)" : "");
    if (store_tail(c, gr, p, s, &b, 4)) {
      buf_free(&b);
      return -1;
    }
    buf_puts(&b, "      }\n    }\n");
  } else {
    buf_printf(&b, "  for (int r = 0; r < %d; r++) red[r][f][ks] = acc[r];\n  %s\n", R, D_BARRIER);
    buf_printf(&b, "  if (t < %d) {\n    int m = m0 + t / %d, n = n0 + t %% %d;\n", R * F, F, F);
    guard_open(&b, "    ", mrem ? c1 : NULL, nrem ? c2 : NULL);
    if (q8)
      buf_printf(&b, "      int vi = 0;\n      for (int q = 0; q < %d; q++) vi += red[t / %d][t %% %d][q];\n"
                     "      float v = (float)vi;\n", S, F, F);
    else
      buf_printf(&b, "      float v = 0.0f;\n      for (int q = 0; q < %d; q++) v = v + red[t / %d][t %% %d][q];\n", S, F, F);
    if (store_tail(c, gr, p, s, &b, 3)) {
      buf_free(&b);
      return -1;
    }
    buf_puts(&b, "    }\n  }\n");
  }
  char opn[96];
  const char *name = cg_finish(c, form_name(gr, "gemv", opn), NCC_KF_BARRIER_, p, &b);
  CgBatch bg;
  const CgBatch *bp = NULL;
  if (s->baxis == 1) bp = cg_batch_grid(c, gr, 1, s->M, R, &bg);
  else if (s->baxis == 2) bp = cg_batch_grid(c, gr, 2, s->Z, 1, &bg);
  cg_launch_b(c, name, p, (s->N + F - 1) / F, (s->M + R - 1) / R, s->Z, 256, 1, 0, bp);
  buf_free(&b);
  return 0;
}

/* The kernel a GEMM-like op gets on ncc's own path (docs/gpu.md, "Kernel designs") */
static int gemm_kernel(Cg *c, const KGroup *gr, KParams *p, const GemmSpec *s) {
  if (ir_gemm_gemv(gr->main)) return gemv(c, gr, p, s);
  if (ir_gemm_mma(gr->main)) return tiled_mma(c, gr, p, s);
  return tiled(c, gr, p, s);
}

/* The spec's split-K (ir_gemm_split_k; 1: none) and the bias its sum kernel adds */
static void split_of(GemmSpec *s, const Node *n, Value *bias, int64_t inner, int64_t nb) {
  s->S = ir_gemm_split_k(n);
  s->span = s->S > 1 ? ir_gemm_split_span(n) : 0;
  s->bias_v = bias, s->bias_inner = inner, s->bias_n = nb;
}

/* ---- convolution ------------------------------------------------------- */
typedef struct ConvDims {
  int64_t Nb, Cin, H, W, Cout, OH, OW, G, Cig, Mg, KH, KW, Kg;
  int sh, sw, ph, pw, dh, dw;
} ConvDims;

static ConvDims conv_dims(const Node *n) {
  ConvDims d;
  const Shape *xs = &n->in[0]->shape, *ys = &n->out->shape;
  const Attrs *a = &n->a;
  d.Nb = xs->d[0], d.Cin = xs->d[1], d.H = xs->d[2], d.W = xs->d[3];
  d.Cout = ys->d[1], d.OH = ys->d[2], d.OW = ys->d[3];
  d.G = a->groups, d.Cig = d.Cin / d.G, d.Mg = d.Cout / d.G;
  d.KH = a->kernel[0], d.KW = a->kernel[1], d.Kg = d.Cig * d.KH * d.KW;
  d.sh = a->stride[0], d.sw = a->stride[1], d.ph = a->pad[0], d.pw = a->pad[1];
  d.dh = a->dilation[0], d.dw = a->dilation[1];
  return d;
}

/* "x * s + c + t * d" (c and d may be negative) without the multiplications
 * by 1 and the terms that are 0 (x or t "0", c or d 0), so that the generated
 * index arithmetic reads like hand-written code; "0" when nothing is left */
static const char *window_sum(char *dst, size_t n, const char *x, int64_t s, int64_t c, const char *t, int64_t d) {
  Buf e = {0};
  int k = 0;
  cg_term(&e, &k, x, s);
  if (c) buf_printf(&e, k++ ? " %c %lld" : "%c%lld", c < 0 ? '-' : '+', LL(c < 0 ? -c : c));
  if (strcmp(t, "0") && d) {
    char pt[64];
    int64_t ad = d < 0 ? -d : d;
    if (k++) buf_printf(&e, " %c ", d < 0 ? '-' : '+');
    else if (d < 0) buf_puts(&e, "-");
    if (ad == 1) buf_puts(&e, t);
    else buf_printf(&e, "%s * %lld", cg_paren(pt, sizeof pt, t), LL(ad));
  }
  snprintf(dst, n, "%s", k ? (e.s[0] == '+' ? e.s + 1 : e.s) : "0");
  buf_free(&e);
  return dst;
}

/* "o * s - p + k * dil"; k NULL: a kernel of extent 1 */
void cg_window_index(char *dst, size_t n, const char *o, int s, int p, const char *k, int dil) {
  window_sum(dst, n, o, s, -p, k ? k : "0", dil);
}

/* Statements that set v to the pooled element (plane, ph, pw) of the
 * prologue `pool` (maxpool2d or avgpool2d, as kernels.c's emit_pool computes
 * it: padding takes no part in a max and counts in an average, a NaN in a
 * max window wins) from its input X; plane = image * C + channel.  The
 * expressions may be any C; `ind` indents the lines after the first. */
static void pool_load(char *dst, size_t n, const Node *pool, const char *X, const char *plane, const char *ph,
                      const char *pw, const char *ind) {
  const Attrs *a = &pool->a;
  const Shape *xs = &pool->in[0]->shape;
  int is_max = pool->op == OP_MAXPOOL2D;
  int dil[2] = {is_max ? a->dilation[0] : 1, is_max ? a->dilation[1] : 1};
  int64_t H = xs->d[2], W = xs->d[3];
  char iy[160], ix[160], pp[96], lit[40];
  cg_window_index(iy, sizeof iy, "qh", a->stride[0], a->pad[0], "py", dil[0]);
  cg_window_index(ix, sizeof ix, "qw", a->stride[1], a->pad[1], "px", dil[1]);
  Buf b = {0};
  buf_printf(&b, "const %s *xq = %s + %s * %lld;\n", cg_elem_type(pool->in[0]), X, cg_paren(pp, sizeof pp, plane), LL(H * W));
  buf_printf(&b, "%sint qh = %s, qw = %s;\n%sv = %s;\n", ind, ph, pw, ind, is_max ? D_NEG_INF : "0.0f");
  buf_printf(&b, "%sfor (int py = 0; py < %d; py++) {\n%s  int iy = %s;\n", ind, a->kernel[0], ind, iy);
  if (a->pad[0]) buf_printf(&b, "%s  if (iy < 0 || iy >= %lld) continue;\n", ind, LL(H));
  buf_printf(&b, "%s  for (int px = 0; px < %d; px++) {\n%s    int ix = %s;\n", ind, a->kernel[1], ind, ix);
  if (a->pad[1]) buf_printf(&b, "%s    if (ix < 0 || ix >= %lld) continue;\n", ind, LL(W));
  char xe[64], ld[96];
  snprintf(xe, sizeof xe, "xq[iy * %lld + ix]", LL(W));
  buf_printf(&b, "%s    float e = %s;\n", ind, cg_ld(ld, sizeof ld, pool->in[0], xe));
  if (is_max) buf_printf(&b, "%s    v = (e > v || e != e) ? e : v;\n", ind);
  else buf_printf(&b, "%s    v = v + e;\n", ind);
  buf_printf(&b, "%s  }\n%s}", ind, ind);
  if (!is_max) buf_printf(&b, "\n%sv = v / %s;", ind, cg_flit(lit, (double)a->kernel[0] * a->kernel[1]));
  NCC_ASSERT(b.len < n);
  memcpy(dst, b.s, b.len + 1);
  buf_free(&b);
}

/* Statements that set v = x[img, cbase + ci, ih, iw] for the element (k, p)
 * of the column matrix (k: input channel and kernel tap, p: output pixel),
 * zero in the padding.  `img`, `k`, `p` and `cbase` are C expressions; "0"
 * for img or cbase drops the term.  The bounds test covers only the padded
 * axes: without padding every window lies inside the input.  `ind` indents
 * the lines after the first. */
static void im2col_load(char *dst, size_t n, const ConvDims *d, const char *x, const char *img, const char *k,
                        const char *p, const char *cbase, const char *ind, const Node *pool) {
  int64_t KK = d->KH * d->KW;
  char kx[96], px[96], taps[320] = "", ih[200], iw[200], test[200] = "", chan[200] = "";
  cg_paren(kx, sizeof kx, k);
  cg_paren(px, sizeof px, p);
  if (d->KH > 1 && d->KW > 1)
    snprintf(taps, sizeof taps, ", kh = (%s %% %lld) / %lld, kw = %s %% %lld", kx, LL(KK), LL(d->KW), kx, LL(d->KW));
  else if (d->KH > 1)
    snprintf(taps, sizeof taps, ", kh = %s %% %lld", kx, LL(d->KH));
  else if (d->KW > 1)
    snprintf(taps, sizeof taps, ", kw = %s %% %lld", kx, LL(d->KW));
  cg_window_index(ih, sizeof ih, "oh", d->sh, d->ph, d->KH > 1 ? "kh" : NULL, d->dh);
  cg_window_index(iw, sizeof iw, "ow", d->sw, d->pw, d->KW > 1 ? "kw" : NULL, d->dw);
  if (d->ph && d->pw)
    snprintf(test, sizeof test, "if (ih >= 0 && ih < %lld && iw >= 0 && iw < %lld) ", LL(d->H), LL(d->W));
  else if (d->ph)
    snprintf(test, sizeof test, "if (ih >= 0 && ih < %lld) ", LL(d->H));
  else if (d->pw)
    snprintf(test, sizeof test, "if (iw >= 0 && iw < %lld) ", LL(d->W));
  size_t l = 0;
  char pi[96], ci[420], pc[220];
  if (strcmp(img, "0") && d->Cin > 1)
    l += (size_t)snprintf(chan + l, sizeof chan - l, "%s * %lld + ", cg_paren(pi, sizeof pi, img), LL(d->Cin));
  else if (strcmp(img, "0"))
    l += (size_t)snprintf(chan + l, sizeof chan - l, "%s + ", img);
  if (strcmp(cbase, "0")) l += (size_t)snprintf(chan + l, sizeof chan - l, "%s + ", cbase);
  snprintf(chan + l, sizeof chan - l, "ci");
  if (KK == 1) snprintf(ci, sizeof ci, "%s", k);
  else snprintf(ci, sizeof ci, "%s / %lld%s", kx, LL(KK), taps);
  Buf b = {0};
  buf_printf(&b, "int ci = %s, oh = %s / %lld, ow = %s %% %lld;\n%sint ih = %s, iw = %s;\n", ci, px, LL(d->OW), px,
             LL(d->OW), ind, ih, iw);
  if (pool) {   /* x is the pooling's input: the element (chan, ih, iw) of its output, computed here */
    char in2[40], pl[1024];
    snprintf(in2, sizeof in2, "%s  ", ind);
    pool_load(pl, sizeof pl, pool, x, chan, "ih", "iw", in2);
    buf_printf(&b, "%s%s{\n%s  %s\n%s}", ind, test, ind, pl, ind);
  } else {
    buf_printf(&b, "%s%sv = %s[(%s * %lld + ih) * %lld + iw];", ind, test, x, cg_paren(pc, sizeof pc, chan),
               LL(d->H), LL(d->W));
  }
  NCC_ASSERT(b.len < n);
  memcpy(dst, b.s, b.len + 1);
  buf_free(&b);
}

static int conv_direct(Cg *c, const KGroup *gr, const ConvDims *d) {
  Node *nd = gr->main;
  KParams p = {0};
  Buf b = {0};
  const char *x = kp_value(c, &p, nd->in[0], 0, "x"), *w = kp_value(c, &p, nd->in[1], 0, "weight");
  const char *bias = nd->nin > 2 ? kp_value(c, &p, nd->in[2], 0, "bias") : NULL;
  int64_t OHW = d->OH * d->OW, total = d->Nb * d->Cout * OHW;
  buf_printf(&b, "  int i = %s * 256 + %s;\n  if (i < %lld) {\n", D_BID_X, D_TID_X, LL(total));
  buf_printf(&b, "    int ow = i %% %lld, oh = (i / %lld) %% %lld, co = (i / %lld) %% %lld, img = i / %lld;\n",
             LL(d->OW), LL(d->OW), LL(d->OH), LL(OHW), LL(d->Cout), LL(d->Cout * OHW));
  /* the first input channel of co's group: (co / Mg) * Cig, "co" for depthwise */
  char c0[64];
  if (d->Mg == 1 && d->Cig == 1) snprintf(c0, sizeof c0, "co");
  else if (d->Mg == 1) snprintf(c0, sizeof c0, "co * %lld", LL(d->Cig));
  else if (d->Cig == 1) snprintf(c0, sizeof c0, "co / %lld", LL(d->Mg));
  else snprintf(c0, sizeof c0, "(co / %lld) * %lld", LL(d->Mg), LL(d->Cig));
  buf_printf(&b, "    const %s *xp = %s + (img * %lld + %s) * %lld;\n", cg_elem_type(nd->in[0]), x, LL(d->Cin), c0,
             LL(d->H * d->W));
  int q8 = nd->prec == PREC_INT8;   /* int8: int32 sums of the quantized integers */
  buf_printf(&b, "    const %s *wp = %s + co * %lld;\n    %s;\n", cg_elem_type(nd->in[1]), w, LL(d->Kg),
             q8 ? "int vi = 0" : "float v = 0.0f");
  buf_printf(&b, "    for (int ci = 0; ci < %lld; ci++)\n      for (int kh = 0; kh < %lld; kh++) {\n", LL(d->Cig),
             LL(d->KH));
  char ix[160];
  cg_window_index(ix, sizeof ix, "oh", d->sh, d->ph, "kh", d->dh);
  buf_printf(&b, "        int ih = %s;\n", ix);
  if (d->ph) buf_printf(&b, "        if (ih < 0 || ih >= %lld) continue;\n", LL(d->H));
  buf_printf(&b, "        for (int kw = 0; kw < %lld; kw++) {\n", LL(d->KW));
  cg_window_index(ix, sizeof ix, "ow", d->sw, d->pw, "kw", d->dw);
  buf_printf(&b, "          int iw = %s;\n", ix);
  if (d->pw) buf_printf(&b, "          if (iw < 0 || iw >= %lld) continue;\n", LL(d->W));
  {   /* --precision=tf32|fp16|bf16: both operands rounded; int8: x quantized, w integers */
    char xe0[96], xe[128], we0[96], we[128], xr[160], wr[160];
    snprintf(xe0, sizeof xe0, "xp[(ci * %lld + ih) * %lld + iw]", LL(d->H), LL(d->W));
    cg_ld(xe, sizeof xe, nd->in[0], xe0);
    snprintf(we0, sizeof we0, "wp[(ci * %lld + kh) * %lld + kw]", LL(d->KH), LL(d->KW));
    cg_ld(we, sizeof we, nd->in[1], we0);
    const char *inv = nd->in[0]->narrow == DT_I8 ? NULL : cg_q8_param(c, &p, nd);   /* stored quantized: as it is */
    cg_operand_rv(xr, sizeof xr, nd, xe, inv);
    cg_operand_rv(wr, sizeof wr, nd, we, NULL);
    if (q8) buf_printf(&b, "          vi += (int)%s * (int)%s;\n", xr, wr);
    else buf_printf(&b, "          v = fmaf(%s, %s, v);\n", xr, wr);
  }
  buf_puts(&b, "        }\n      }\n");
  if (q8) buf_puts(&b, "    float v = (float)vi;\n");
  if (bias) buf_printf(&b, "    v = v + %s[co];\n", bias);
  if (cg_epilogue(c, gr, &p, &b, "v", "i", 2)) {
    buf_free(&b);
    return -1;
  }
  char st[64];
  buf_printf(&b, "    %s[i] = %s;\n  }\n", kp_value(c, &p, group_out(gr), 1, "y"), cg_st(st, sizeof st, group_out(gr), "v"));
  char opn[96];
  const char *name = cg_finish(c, cg_opname(gr, NULL, opn), 0, &p, &b);
  CgBatch bg;
  cg_launch_b(c, name, &p, (total + 255) / 256, 1, 1, 256, 1, 0, cg_batch_grid(c, gr, 0, total, 256, &bg));
  buf_free(&b);
  return 0;
}

/* The B tile of the implicit GEMM (column n: pixel n % OHW of image n / OHW;
 * row k: input channel k / (KH * KW) of the group, tap (k / KW) % KH,
 * k % KW) without a division in the K loop.  The tile is BK x BN, loaded by
 * T threads, and BN divides T, so thread tid always loads column n0 + tid % BN,
 * rows tid / BN + j * (T / BN) for j < J = BK * BN / T: the column's image and
 * pixel (ih0, iw0: the window's corner) are worked out once before the K
 * loop, and each of the J rows keeps its k as digits (ci, kh, kw) that
 * advance by BK a tile with constant steps and at most one carry a digit.
 * The divisions that remain run once per thread. */
/* The padding test of input element (ih, iw), only on the padded axes; ""
 * when nothing is padded; `extra` (or NULL) joins it */
static void pad_test(char *dst, size_t n, const ConvDims *d, const char *extra) {
  char t[160] = "";
  if (d->ph && d->pw) snprintf(t, sizeof t, "ih >= 0 && ih < %lld && iw >= 0 && iw < %lld", LL(d->H), LL(d->W));
  else if (d->ph) snprintf(t, sizeof t, "ih >= 0 && ih < %lld", LL(d->H));
  else if (d->pw) snprintf(t, sizeof t, "iw >= 0 && iw < %lld", LL(d->W));
  snprintf(dst, n, "%s%s%s", extra ? extra : "", extra && t[0] ? " && " : "", t);
}

/* GemmSpec.b_regs and b_put for a B tile whose thread holds J elements,
 * rows row_of (im2col_tile, tap_tile), in registers bq of type tt */
static void b_regs_put(GemmSpec *s, const char *tt, int J, int KS, int form, const char *dst) {
  char r[80];
  snprintf(s->b_regs, sizeof s->b_regs, "%s bq[%d];   /* this thread's B elements of the next K tile */", tt, J);
  snprintf(s->b_put, sizeof s->b_put, "    for (int j = 0; j < %d; j++) {   /* the B elements fetched, into the tile */\n"
           "      int kk = %s;\n      %s = bq[j];\n    }\n", J, row_of(r, sizeof r, form, J, KS, NULL), dst);
}

/* Whether tap_tile gives a thread J consecutive rows kq J + j (not kq + j KS)
 * and stores them two 16-bit values a 32-bit word: fp16/bf16 registers (tt),
 * J even.  Rows k and k + 1 (k even) are neighbours in a slot of the
 * fragment-order tile (mma_dst), so a word holds both: half the stores. */
static int tap_pairs(const char *tt, int J) { return tt && !strcmp(tt, "unsigned short") && J % 2 == 0; }

/* b_put for tap_pairs: the J registers two a word */
static void b_put_pairs(GemmSpec *s, int J, const char *dst) {
  snprintf(s->b_put, sizeof s->b_put, "    for (int j = 0; j < %d; j += 2) {   /* the B elements fetched, into the tile: "
           "rows kk and kk + 1 a word */\n      int kk = kq * %d + j;\n"
           "      unsigned w = (unsigned)bq[j] | (unsigned)bq[j + 1] << 16;\n      ncc_sts32(&%s, w);\n    }\n", J, J, dst);
}

/* The B tile's statements for mode 0 (b_tile: K tile k0, stored), 1
 * (b_first: the first K tile, kb or 0, into registers bq, before the K
 * loop, two spaces less deep) or 2 (b_fetch: K tile k0 + BK, into bq, two
 * spaces deeper): where they go, and the first row k of the tile they load */
static char *b_mode(GemmSpec *s, int mode, char *kx, size_t n) {
  if (mode == 1) snprintf(kx, n, "%s", s->S > 1 ? "kb" : "0");
  else if (mode == 2) snprintf(kx, n, "k0 + %d", BK);
  else snprintf(kx, n, "k0");
  return mode == 0 ? s->b_tile : mode == 1 ? s->b_first : s->b_fetch;
}

/* im2col_tile's K loop for a tap-major weight (Attrs.wtap: the fold pass
 * reordered it [out][kh][kw][in/groups] at load): row k is tap k / Cig,
 * channel k % Cig, and Cig is a multiple of BK (ir_conv_tap_major_ok), so a
 * K tile is channels c0..c0+BK-1 of one tap.  The tap's window offset and
 * padding test are worked out once a tile; the thread's J rows (row_of) are
 * channels at constant distances in x. */
static void tap_tile(GemmSpec *s, const ConvDims *d, const char *x, const Value *xv, const Node *pool, const char *rv,
                     int BN, int T, const char *dst, const char *bits, const char *tt, int form) {
  int J = BK * BN / T, KS = T / BN, pairs = form == ROWS_PAIRS;
  int64_t HW = d->H * d->W;
  NCC_ASSERT(d->Cig % BK == 0 && d->KH * d->KW > 1 && s->K % BK == 0);
  char kq[24], kk[80], step[40];   /* the thread's first row, its j-th, the distance between them */
  row_first(kq, sizeof kq, form, J);
  row_of(kk, sizeof kk, form, J, KS, NULL);
  row_step(step, sizeof step, form, J, KS, NULL);
  char ih[96], iw[96], c1[48], test[240];
  /* the tap's (kh, kw): tap / KW, tap % KW (one of them the tap itself when the other extent is 1) */
  char kh[48], kw[48];
  snprintf(kh, sizeof kh, d->KW > 1 ? "tap / %lld" : "tap", LL(d->KW));
  snprintf(kw, sizeof kw, d->KH > 1 ? "tap %% %lld" : "tap", LL(d->KW));
  window_sum(ih, sizeof ih, "ih0", 1, 0, d->KH > 1 ? kh : "0", d->dh);
  window_sum(iw, sizeof iw, "iw0", 1, 0, d->KW > 1 ? kw : "0", d->dw);
  snprintf(c1, sizeof c1, "col < %lld", LL(s->N));
  pad_test(test, sizeof test, d, s->N % BN ? c1 : NULL);
  /* mode 0: the tile, stored; 1, 2 (tt: the tile's element type): the elements into registers bq (b_mode) */
  for (int mode = 0; mode < (tt ? 3 : 1); mode++) {
    Buf b = {0};
    char kx[32], kp[40];
    char *to = b_mode(s, mode, kx, sizeof kx);
    buf_printf(&b, "    {   /* one tap a K tile (weight tap-major): its window offset and padding test once */\n");
    if (!strcmp(kx, "0")) buf_puts(&b, "      int tap = 0, c0 = 0;\n");
    else buf_printf(&b, "      int tap = %s / %lld, c0 = %s %% %lld;\n", cg_paren(kp, sizeof kp, kx), LL(d->Cig), kp, LL(d->Cig));
    buf_printf(&b, "      int ih = %s, iw = %s;\n", ih, iw);
    if (test[0]) buf_printf(&b, "      int inb = %s;\n", test);
    if (!pool) buf_printf(&b, "      int xo = ((cb0 + c0 + %s) * %lld + ih) * %lld + iw;\n", kq, LL(d->H), LL(d->W));
    buf_printf(&b, "      for (int j = 0; j < %d; j++) {\n", J);
    if (mode == 0 || pool) buf_printf(&b, "        int kk = %s;\n", kk);
    buf_printf(&b, "        %s\n", bits ? bits : "float v = 0.0f;");
    const char *ind = test[0] ? "          " : "        ";
    if (test[0]) buf_puts(&b, "        if (inb) {\n");
    if (pool) {   /* x is the pooling's input: the element (plane, ih, iw) of its output, computed here */
      char pl[1024], in2[24];
      snprintf(in2, sizeof in2, "%s", ind);
      pool_load(pl, sizeof pl, pool, x, "cb0 + c0 + kk", "ih", "iw", in2);
      buf_printf(&b, "%s%s\n", ind, pl);
    } else {
      char xe[200], ld[240];
      if (form == ROWS_QUADS && J > 4) snprintf(xe, sizeof xe, "%s[xo + %s * %lld]", x, step, LL(HW));
      else snprintf(xe, sizeof xe, "%s[xo + j * %lld]", x, LL((form == ROWS_STRIDED ? KS : 1) * HW));
      buf_printf(&b, "%sv = %s;\n", ind, bits ? xe : cg_ld(ld, sizeof ld, xv, xe));
    }
    if (test[0]) buf_puts(&b, "        }\n");
    buf_printf(&b, "        %s = %s;\n      }\n    }\n", mode ? "bq[j]" : dst, bits ? "v" : rv);
    indent_into(to, sizeof s->b_tile, b.s, mode == 2 ? 2 : mode == 1 ? -2 : 0);
    buf_free(&b);
  }
  if (tt) b_regs_put(s, tt, J, KS, form, dst);
  if (pairs) b_put_pairs(s, J, dst);
}

/* im2col_tile's rows from a table (a convolution of more than one tap whose
 * weight is not tap-major: Cig not a multiple of 16, the first layers' 3
 * channels; no pooling prologue; K, rounded up to the tile, more than 4 K
 * tiles and at most KTAB_MAX rows.  A 1x1 one's digits only add 16 a tile,
 * no carry; ptxas unrolls a K loop of 4 tiles or fewer whole and folds the
 * digits into constants: VGG-16's first layer, K = 27, took 96 registers
 * with the table, 72 without, at fp16 on sm_90).
 * Before the K loop the block writes, for each row k, its offset in x from
 * the window's corner (ci H W + kh dh W + kw dw) and its tap (kh dh * 65536
 * + kw dw) into shared memory, and each thread works out its window
 * corner's offset xb once.  An element of row k is then its two table
 * entries, side by side: one 64-bit load (ncc_lds_i32x2; at most two
 * addresses a warp, in distinct banks: its threads hold one row or two
 * (b_warp16); two
 * 32-bit loads a row put 2.5 shared loads a MMA in ResNet-18's stem at
 * fp16, past the two of sass.tensor_cores), the padding test on ih0 + kh
 * dh and iw0 + kw dw, and
 * the load at xb + its offset: no digits that carry from tile to tile (3 J
 * registers a thread) and no branches.  A row past K has a tap 32767 rows
 * down, which the test refuses. */
enum { KTAB_MAX = 512 };
static void ktab_tile(GemmSpec *s, const ConvDims *d, const char *x, const Value *xv, const char *rv, int BN, int T,
                      const char *dst, const char *bits, const char *tt, Buf *pre, int64_t Kp, int form) {
  int J = BK * BN / T, KS = T / BN;
  char row[80];
  row_of(row, sizeof row, form, J, KS, NULL);
  int64_t KK = d->KH * d->KW, HW = d->H * d->W;
  int krem = s->K % BK != 0, nrem = s->N % BN != 0;
  int th = d->ph > 0 || krem, tw = d->pw > 0;   /* the test on ih (also the rows past K), on iw */
  int tb = th || tw;   /* the table holds the taps too: two ints a row, one 64-bit load */
  if (tb)
    buf_printf(pre, "  %s __align__(8) int ktab[%lld];   /* row k: [2k] its offset in x from the window's corner, "
                    "[2k + 1] its tap, kh dh * 65536 + kw dw */\n", D_SHARED, LL(2 * Kp));
  else
    buf_printf(pre, "  %s int ktab[%lld];   /* row k: its offset in x from the window's corner */\n", D_SHARED, LL(Kp));
  buf_printf(pre, "  for (int k = tid; k < %lld; k += %d) {\n", LL(Kp), T);
  char ci[64] = "k", kh[64] = "0", kw[64] = "0";
  if (KK > 1) snprintf(ci, sizeof ci, "k / %lld", LL(KK));
  if (d->KH > 1 && d->KW > 1) snprintf(kh, sizeof kh, "k / %lld %% %lld", LL(d->KW), LL(d->KH));
  else if (d->KH > 1) snprintf(kh, sizeof kh, "k %% %lld", LL(d->KH));
  if (d->KW > 1) snprintf(kw, sizeof kw, "k %% %lld", LL(d->KW));
  buf_printf(pre, "    int ci = %s, kh = %s, kw = %s;\n", ci, kh, kw);
  char khd[48], kwd[48];   /* the tap's rows and columns down and across the window */
  snprintf(khd, sizeof khd, d->dh > 1 ? "kh * %d" : "kh", d->dh);
  snprintf(kwd, sizeof kwd, d->dw > 1 ? "kw * %d" : "kw", d->dw);
  const char *o = tb ? "2 * k" : "k";
  if (krem) {
    buf_printf(pre, "    ktab[%s] = k < %lld ? ci * %lld + %s * %lld + %s : 0;\n", o, LL(s->K), LL(HW), khd, LL(d->W), kwd);
    buf_printf(pre, "    ktab[2 * k + 1] = k < %lld ? %s * 65536 + %s : 32767 * 65536;   /* past K: a tap no test lets in */\n",
               LL(s->K), khd, kwd);
  } else {
    buf_printf(pre, "    ktab[%s] = ci * %lld + %s * %lld + %s;\n", o, LL(HW), khd, LL(d->W), kwd);
    if (tb) buf_printf(pre, "    ktab[2 * k + 1] = %s * 65536 + %s;\n", khd, kwd);
  }
  buf_printf(pre, "  }\n  %s\n", D_BARRIER);
  buf_printf(pre, "  int xb = (cb0 * %lld + ih0) * %lld + iw0;   /* the window's corner in x */\n", LL(d->H), LL(d->W));
  buf_take(pre, s->b_pre, sizeof s->b_pre);
  char c1[48], test[200] = "";
  snprintf(c1, sizeof c1, "col < %lld", LL(s->N));
  if (th && tw) snprintf(test, sizeof test, "if ((unsigned)(ih0 + (t >> 16)) < %lldu && (unsigned)(iw0 + (t & 65535)) < %lldu) ",
                         LL(d->H), LL(d->W));
  else if (th) snprintf(test, sizeof test, "if ((unsigned)(ih0 + (t >> 16)) < %lldu) ", LL(d->H));
  else if (tw) snprintf(test, sizeof test, "if ((unsigned)(iw0 + (t & 65535)) < %lldu) ", LL(d->W));
  Buf b = {0};
  for (int mode = 0; mode < (tt ? 3 : 1); mode++) {
    char kx[32];
    char *to = b_mode(s, mode, kx, sizeof kx);
    b.len = 0;
    if (b.s) b.s[0] = 0;
    buf_printf(&b, "    for (int j = 0; j < %d; j++) {\n", J);
    if (mode == 0) buf_printf(&b, "      int kk = %s, k = k0 + kk;\n", row);
    else if (!strcmp(kx, "0")) buf_printf(&b, "      int k = %s;\n", row);
    else buf_printf(&b, "      int k = %s + %s;\n", kx, row);
    buf_printf(&b, "      %s\n", bits ? bits : "float v = 0.0f;");
    guard_open(&b, "      ", nrem ? c1 : NULL, NULL);
    if (test[0])
      buf_puts(&b, "        int e[2];   /* the row's offset and tap: one 64-bit load */\n"
                   "        ncc_lds_i32x2(e, &ktab[2 * k]);\n"
                   "        int o = e[0], t = e[1];\n");
    char xe[200], ld[240];
    snprintf(xe, sizeof xe, "%s[xb + %s]", x, test[0] ? "o" : "ktab[k]");
    buf_printf(&b, "        %sv = %s;\n", test, bits ? xe : cg_ld(ld, sizeof ld, xv, xe));
    buf_printf(&b, "      }\n      %s = %s;\n", mode ? "bq[j]" : dst, bits ? "v" : rv);
    buf_puts(&b, "    }\n");
    indent_into(to, sizeof s->b_tile, b.s, mode == 2 ? 2 : mode == 1 ? -2 : 0);
  }
  buf_free(&b);
  if (tt) b_regs_put(s, tt, J, KS, form, dst);
}

static void im2col_tile(GemmSpec *s, const ConvDims *d, const char *x, const Value *xv, const char *cbase, const Node *pool, const char *rv,
                        int BN, int T, const char *dst, const char *bits, int tap, const char *tt, int kind) {
  int J = BK * BN / T, KS = T / BN;
  NCC_ASSERT(T % BN == 0 && BK * BN % T == 0);
  int64_t KK = d->KH * d->KW, OHW = d->OH * d->OW;
  int hkh = d->KH > 1, hkw = d->KW > 1;
  /* the thread's rows (row_of), and whether a warp is 16 columns wide (b_warp16) */
  int w16 = (kind == MMA_F16 || kind == MMA_TF32) && s->b_pad && KS >= 2;
  int form = tap && tap_pairs(tt, J) ? ROWS_PAIRS : w16 && kind == MMA_TF32 ? ROWS_QUADS : ROWS_STRIDED;
  Buf b = {0};
  /* before the K loop: the column's pixel, its window corner, the first digits */
  b_warp16(&b, w16, form, BN, J, KS, "rb", ", col = n0 + rb");
  char cb0[160] = "", pix[64];
  size_t l = 0;
  if (d->Nb > 1) {
    if (d->Cin > 1) l += (size_t)snprintf(cb0 + l, sizeof cb0 - l, "(col / %lld) * %lld", LL(OHW), LL(d->Cin));
    else l += (size_t)snprintf(cb0 + l, sizeof cb0 - l, "col / %lld", LL(OHW));
    snprintf(pix, sizeof pix, "col %% %lld", LL(OHW));
  } else {
    snprintf(pix, sizeof pix, "col");
  }
  if (strcmp(cbase, "0")) l += (size_t)snprintf(cb0 + l, sizeof cb0 - l, "%s%s", l ? " + " : "", cbase);
  if (!l) snprintf(cb0, sizeof cb0, "0");
  char ih0[160], iw0[160];
  cg_window_index(ih0, sizeof ih0, "oh", d->sh, d->ph, NULL, 1);
  cg_window_index(iw0, sizeof iw0, "ow", d->sw, d->pw, NULL, 1);
  buf_printf(&b, "  int pix = %s, oh = pix / %lld, ow = pix %% %lld;\n", pix, LL(d->OW), LL(d->OW));
  buf_printf(&b, "  int ih0 = %s, iw0 = %s, cb0 = %s;\n", ih0, iw0, cb0);
  if (tap) {   /* no digits: each K tile works out its tap */
    buf_take(&b, s->b_pre, sizeof s->b_pre);
    buf_free(&b);
    tap_tile(s, d, x, xv, pool, rv, BN, T, dst, bits, tt, form);
    return;
  }
  int krem = s->K % BK != 0, nrem = s->N % BN != 0;
  int64_t HW = d->H * d->W, Kp = (s->K + BK - 1) / BK * BK;
  if (!pool && KK > 1 && Kp > 4 * BK && Kp <= KTAB_MAX && (d->KH - 1) * d->dh < 32767 && (d->KW - 1) * d->dw < 65536 &&
      d->H + d->ph < 32767 && d->Cin * HW < INT32_MAX / 2) {
    /* the rows' offsets and taps from a table in shared memory, built once (ktab_tile) */
    ktab_tile(s, d, x, xv, rv, BN, T, dst, bits, tt, &b, Kp, form);
    buf_free(&b);
    return;
  }
  buf_printf(&b, "  int ci[%d];\n", J);
  if (hkh) buf_printf(&b, "  int kh[%d];\n", J);
  if (hkw) buf_printf(&b, "  int kw[%d];\n", J);
  char row[80];
  row_of(row, sizeof row, form, J, KS, NULL);
  buf_printf(&b, "  for (int j = 0; j < %d; j++) {\n    int k = %s%s;\n", J, s->S > 1 ? "kb + " : "", row);
  if (KK == 1) buf_puts(&b, "    ci[j] = k;\n");
  else buf_printf(&b, "    ci[j] = k / %lld;\n", LL(KK));
  if (hkh && hkw) buf_printf(&b, "    kh[j] = (k / %lld) %% %lld;\n", LL(d->KW), LL(d->KH));
  else if (hkh) buf_printf(&b, "    kh[j] = k %% %lld;\n", LL(d->KH));
  if (hkw) buf_printf(&b, "    kw[j] = k %% %lld;\n", LL(d->KW));
  buf_puts(&b, "  }\n");
  buf_take(&b, s->b_pre, sizeof s->b_pre);

  /* in the K loop: J elements, then the digits advance by BK.  mode 0: the tile, stored; 1, 2 (tt: the
   * tile's element type): the elements into registers bq (b_mode; --gemm-pipeline) */
  char c1[48], c2[48];
  snprintf(c1, sizeof c1, "col < %lld", LL(s->N));
  snprintf(c2, sizeof c2, "k < %lld", LL(s->K));
  char ih[96], iw[96], test[200] = "";
  if (hkh && d->dh == 1) snprintf(ih, sizeof ih, "ih0 + kh[j]");
  else if (hkh) snprintf(ih, sizeof ih, "ih0 + kh[j] * %d", d->dh);
  else snprintf(ih, sizeof ih, "ih0");
  if (hkw && d->dw == 1) snprintf(iw, sizeof iw, "iw0 + kw[j]");
  else if (hkw) snprintf(iw, sizeof iw, "iw0 + kw[j] * %d", d->dw);
  else snprintf(iw, sizeof iw, "iw0");
  char pt[160];
  pad_test(pt, sizeof pt, d, NULL);
  if (pt[0]) snprintf(test, sizeof test, "if (%s) ", pt);
  for (int mode = 0; mode < (tt ? 3 : 1); mode++) {
    char kx[32];
    char *to = b_mode(s, mode, kx, sizeof kx);
    b.len = 0;
    b.s[0] = 0;
    buf_printf(&b, "    for (int j = 0; j < %d; j++) {\n", J);
    if (mode == 0) buf_printf(&b, "      int kk = %s%s;\n", row, krem ? ", k = k0 + kk" : "");
    else if (krem && !strcmp(kx, "0")) buf_printf(&b, "      int k = %s;\n", row);
    else if (krem) buf_printf(&b, "      int k = %s + %s;\n", kx, row);
    buf_printf(&b, "      %s\n", bits ? bits : "float v = 0.0f;");
    guard_open(&b, "      ", nrem ? c1 : NULL, krem ? c2 : NULL);
    buf_printf(&b, "        int ih = %s, iw = %s;\n", ih, iw);
    if (pool) {   /* x is the pooling's input: the element (plane, ih, iw) of its output, computed here */
      char pl[1024];
      pool_load(pl, sizeof pl, pool, x, "cb0 + ci[j]", "ih", "iw", "          ");
      buf_printf(&b, "        %s{\n          %s\n        }\n", test, pl);
    } else {
      char xe[200], ld[240];
      snprintf(xe, sizeof xe, "%s[((cb0 + ci[j]) * %lld + ih) * %lld + iw]", x, LL(d->H), LL(d->W));
      buf_printf(&b, "        %sv = %s;\n", test, bits ? xe : cg_ld(ld, sizeof ld, xv, xe));
    }
    buf_printf(&b, "      }\n      %s = %s;\n", mode ? "bq[j]" : dst, bits ? "v" : rv);
    /* k += BK as digits: kw += BK % KW, kh += (BK / KW) % KH, ci += BK / (KH * KW), carries */
    int64_t dw = hkw ? BK % d->KW : 0, dh = hkh ? (BK / d->KW) % d->KH : 0, dc = BK / KK;
    if (dw) buf_printf(&b, "      kw[j] += %lld;\n", LL(dw));
    if (dh) buf_printf(&b, "      kh[j] += %lld;\n", LL(dh));
    if (dc) buf_printf(&b, "      ci[j] += %lld;\n", LL(dc));
    if (dw) buf_printf(&b, "      if (kw[j] >= %lld) {\n        kw[j] -= %lld;\n        %s;\n      }\n", LL(d->KW), LL(d->KW),
                       hkh ? "kh[j]++" : "ci[j]++");
    if (hkh && (dh || dw))
      buf_printf(&b, "      if (kh[j] >= %lld) {\n        kh[j] -= %lld;\n        ci[j]++;\n      }\n", LL(d->KH), LL(d->KH));
    buf_puts(&b, "    }\n");
    indent_into(to, sizeof s->b_tile, b.s, mode == 2 ? 2 : mode == 1 ? -2 : 0);
  }
  buf_free(&b);
  if (tt) b_regs_put(s, tt, J, KS, form, dst);
}

static int conv_is_1x1(const ConvDims *d);
static int conv_tiled(Cg *c, const KGroup *gr, const ConvDims *d) {
  Node *nd = gr->main;
  KParams p = {0};
  GemmSpec s;
  memset(&s, 0, sizeof s);
  const Node *pool = gr->npro ? gr->pro[0] : NULL;   /* pool-prologue: x is the pooling's input */
  Value *xin = pool ? pool->in[0] : nd->in[0];
  const char *x = kp_value(c, &p, xin, 0, "x"), *w = kp_value(c, &p, nd->in[1], 0, "weight");
  int64_t OHW = d->OH * d->OW;
  split_of(&s, nd, nd->nin > 2 ? nd->in[2] : NULL, OHW, d->Cout);
  const char *bias = nd->nin > 2 && s.S == 1 ? kp_value(c, &p, nd->in[2], 0, "bias") : NULL;
  s.M = d->Mg, s.N = d->Nb * OHW, s.K = d->Kg, s.Z = d->G;
  s.uses_z = d->G > 1;
  s.baxis = 0;   /* column n is pixel n % OHW of image n / OHW */
  s.a_kcontig = 1, s.b_kcontig = 0;
  {   /* weight[z * Mg + m][k] */
    Buf la = {0};
    int na = 0;
    cg_term(&la, &na, s.uses_z ? "z" : "0", d->Mg * d->Kg), cg_term(&la, &na, "m", d->Kg), cg_term(&la, &na, "k", 1);
    char we[200], ld[240];
    snprintf(we, sizeof we, "%s[%s]", w, la.s);
    snprintf(s.a_load, sizeof s.a_load, "v = %s;", cg_ld(ld, sizeof ld, nd->in[1], we));
    if (nd->in[1]->narrow) snprintf(s.a_bits, sizeof s.a_bits, "v = %s;", we);   /* stored narrow at load */
    if (vec_ok(nd->in[1], d->Kg)) snprintf(s.a_vec, sizeof s.a_vec, "&%s", we);
    if (vec32_ok(nd->in[1], d->Kg)) snprintf(s.a_f4, sizeof s.a_f4, "&%s", we);
    buf_free(&la);
  }
  /* column n is pixel n % OHW of image n / OHW (one image: pixel n): im2col_tile */
  char cb[64], ch[64];
  if (s.uses_z) snprintf(cb, sizeof cb, "z * %lld", LL(d->Cig));
  else snprintf(cb, sizeof cb, "0");
  s.a_w = 1;   /* A the weight, B the image columns */
  /* a 1x1 convolution (stride 1, no padding): B(k, n) is channel k of pixel n, n-contiguous in an image.  Stored
   * narrow: pieces of 16 or 8 bytes where the images' pixels come in whole pieces (cp.async, ldmatrix.trans);
   * float32: 4 floats a load where in 4s (vec32n_fetch) */
  if (conv_is_1x1(d) && !pool && ((s.b_piece = nvec_piece(xin, OHW)) || vec32_ok(xin, OHW))) {
    char plane[128], *addr = s.b_piece ? s.b_nvec : s.b_f4n;   /* plane: image n / OHW's channel (z's group's) k */
    if (d->Nb > 1)
      snprintf(plane, sizeof plane, "(n / %lld * %lld + %s%sk)", LL(OHW), LL(d->Cin), s.uses_z ? cb : "", s.uses_z ? " + " : "");
    else if (s.uses_z)
      snprintf(plane, sizeof plane, "(%s + k)", cb);
    else
      snprintf(plane, sizeof plane, "k");
    if (d->Nb > 1) snprintf(addr, sizeof s.b_nvec, "&%s[%s * %lld + n %% %lld]", x, plane, LL(OHW), LL(OHW));
    else snprintf(addr, sizeof s.b_nvec, "&%s[%s * %lld + n]", x, plane, LL(OHW));
  }
  s.b_q = xin->narrow == DT_I8;
  char ra[64], rb[64];
  spec_rv(c, &p, nd, &s, ra, rb);
  if (ir_gemm_mma(nd)) {
    char dst[160], sb[96];
    MmaCfg g = mma_cfg(nd);
    int BN = g.BN;
    /* stored narrow: the tile takes the stored bits (a pooling computes in floats) */
    const char *bits = xin->narrow && !pool ? mma_bits(mma_kind(nd)) : NULL;
    s.b_pad = mma_kind(nd) != MMA_S8 || g.NJ >= 4;   /* (int8's tile is padded where frag_b_s8 loads 128 bits) */
    im2col_tile(&s, d, x, xin, cb, pool, mma_store_rv(sb, sizeof sb, nd, rb), BN, g.T,
                mma_dst(dst, sizeof dst, 'B', BN, "rb", mma_kind(nd), s.b_pad, g.NJ), bits, nd->a.wtap,
                nd->pipe ? mma_type(nd) : NULL, mma_kind(nd));
  } else {
    /* double-buffered (tiled): the elements fetched into registers, stored into stage nx */
    im2col_tile(&s, d, x, xin, cb, pool, rb, ir_fp32_tile(nd) != IR_TILE_64x64 ? 128 : 16 * tile_of(s.N), 256,
                nd->pipe ? "Bs[nx][kk][rb]" : "Bs[kk][rb]", NULL, nd->a.wtap, nd->pipe ? "float" : NULL, -1);
  }
  /* output channel of row m */
  if (s.uses_z) snprintf(ch, sizeof ch, "z * %lld + m", LL(d->Mg));
  else snprintf(ch, sizeof ch, "m");
  if (d->Nb > 1)
    snprintf(s.out_idx, sizeof s.out_idx, "((n / %lld) * %lld + %s) * %lld + n %% %lld", LL(OHW), LL(d->Cout), ch,
             LL(OHW), LL(OHW));
  else if (s.uses_z)
    snprintf(s.out_idx, sizeof s.out_idx, "(%s) * %lld + n", ch, LL(OHW));
  else
    snprintf(s.out_idx, sizeof s.out_idx, "m * %lld + n", LL(OHW));
  s.out_pair = OHW % 2 == 0;   /* an even pixel's next one: in its image, at o + 1 */
  s.out_quad = OHW % 4 == 0;   /* the next three of a multiple of 4: in its image */
  if (bias) {
    snprintf(s.bias, sizeof s.bias, "%s", bias);
    snprintf(s.bias_at, sizeof s.bias_at, "%s", ch);   /* the output channel's */
  }
  return gemm_kernel(c, gr, &p, &s);
}

/* ---- the cuBLAS path ----------------------------------------------------- */
#define WS_LIMIT ((int64_t)64 << 20)   /* bytes of im2col columns per chunk of images (CodegenOpts.ws_limit: less) */

static int conv_is_1x1(const ConvDims *d) {
  return d->KH == 1 && d->KW == 1 && d->sh == 1 && d->sw == 1 && d->ph == 0 && d->pw == 0;
}

static int64_t conv_chunk(const Cg *c, const ConvDims *d) {
  int64_t per = d->Cin * d->KH * d->KW * d->OH * d->OW * 4;
  int64_t ch = (c->o->ws_limit ? (int64_t)c->o->ws_limit : WS_LIMIT) / per;
  if (ch < 1) ch = 1;
  if (ch > d->Nb) ch = d->Nb;
  return ch;
}

size_t gemm_workspace_bytes(const Cg *c, const Node *n) {
  if ((ir_grad_gemm(n) || (!c->o->use_cublas && ncc_ops[n->op].flags & OPF_GEMM_LIKE)) && ir_gemm_split_k(n) > 1)
    /* split-K's partial sums */
    return (size_t)ir_gemm_split_k(n) * (size_t)shape_numel(&n->out->shape) * 4;
  if (!c->o->use_cublas || n->op != OP_CONV2D) return 0;
  ConvDims d = conv_dims(n);
  if (conv_is_1x1(&d) || d.Mg < 8) return 0;
  return (size_t)(conv_chunk(c, &d) * d.Cin * d.KH * d.KW * d.OH * d.OW * 4);
}

/* y[i] = epilogue(y[i] + bias[(i / inner) % nb]) on the group's output: in
 * place (the cuBLAS path), or with y[i] first the sum of the S > 1 partial
 * sums of split-K in order (the workspace holds range r's at r * total + i) */
static int sum_bias_epilogue(Cg *c, const KGroup *gr, Value *bias, int64_t inner, int64_t nb, int S) {
  if (!bias && !gr->nepi && S <= 1) return 0;
  KParams p = {0};
  Buf b = {0};
  Value *y = group_out(gr);
  int64_t total = shape_numel(&y->shape);
  const char *ws = S > 1 ? kp_work(c, &p, "partial") : NULL;
  const char *yn = kp_value(c, &p, y, 1, "y");
  const char *bn = bias ? kp_value(c, &p, bias, 0, "bias") : NULL;
  char yi[64], ld[96], st[64];
  snprintf(yi, sizeof yi, "%s[i]", yn);
  if (S > 1)
    buf_printf(&b, "  int i = %s * 256 + %s;\n  if (i < %lld) {\n    float v = %s[i];\n"
                   "    for (int r = 1; r < %d; r++) v = v + %s[r * %lld + i];\n", D_BID_X, D_TID_X, LL(total), ws, S, ws,
               LL(total));
  else
    buf_printf(&b, "  int i = %s * 256 + %s;\n  if (i < %lld) {\n    float v = %s;\n", D_BID_X, D_TID_X, LL(total),
               cg_ld(ld, sizeof ld, y, yi));
  if (bn) {
    if (inner == 1) buf_printf(&b, "    v = v + %s[i %% %lld];\n", bn, LL(nb));
    else buf_printf(&b, "    v = v + %s[(i / %lld) %% %lld];\n", bn, LL(inner), LL(nb));
  }
  if (cg_epilogue(c, gr, &p, &b, "v", "i", 2)) {
    buf_free(&b);
    return -1;
  }
  buf_printf(&b, "    %s[i] = %s;\n  }\n", yn, cg_st(st, sizeof st, y, "v"));
  char opn[96];
  const char *name = cg_finish(c, cg_opname(gr, S > 1 ? "splitk_sum" : bias ? "bias" : "", opn), 0, &p, &b);
  CgBatch bg;
  cg_launch_b(c, name, &p, (total + 255) / 256, 1, 1, 256, 1, 0, cg_batch_grid(c, gr, 0, total, 256, &bg));
  buf_free(&b);
  return 0;
}

/* Split-K's second kernel: the partial sums added, then the bias and the epilogue */
static int split_sum(Cg *c, const KGroup *gr, const GemmSpec *s) {
  return sum_bias_epilogue(c, gr, s->bias_v, s->bias_inner, s->bias_n, s->S);
}

static const char *what(const Node *n, char *buf, size_t len) {
  snprintf(buf, len, "%s%s%s (%s)", ncc_ops[n->op].name, n->name ? " " : "", n->name ? n->name : "",
           n->prec == PREC_FP32 ? "ncc_sgemm" : "ncc_gemm_ex");
  return buf;
}

/* "(const float *)m->bufs[BUF_x] + 64", without "+ 0" */
static const char *buf_ptr(Cg *c, char *dst, size_t n, const char *type, int buf, const char *off) {
  snprintf(dst, n, "(%s)m->bufs[%s]%s%s", type, cg_buf_name(c, buf), strcmp(off, "0") ? " + " : "",
           strcmp(off, "0") ? off : "");
  return dst;
}

static void sgemm(Cg *c, const Node *n, int ta, int tb, const char *M, int64_t N, int64_t K, int A, int64_t aoff,
                  int64_t lda, int64_t sa, int B, int64_t boff, int64_t ldb, int64_t sb, int C, const char *coff,
                  int64_t ldc, int64_t sc, const char *batch) {
  char w[256], ao[32], bo[32], pa[CG_HOST_LEN], pb[CG_HOST_LEN], pc[CG_HOST_LEN];
  /* the label goes into a C string literal: keep only harmless characters */
  what(n, w, sizeof w);
  for (char *q = w; *q; q++)
    if (*q == '"' || *q == '\\' || (unsigned char)*q < 32) *q = '_';
  snprintf(ao, sizeof ao, "%lld", LL(aoff));
  snprintf(bo, sizeof bo, "%lld", LL(boff));
  /* a rounded precision: cuBLAS's reduced-precision compute type (ncc_gemm_ex; the ops' PREC_* are its NCC_GEMM_*) */
  static const char *const gemm_prec[] = {"", "NCC_GEMM_TF32, ", "NCC_GEMM_FP16, ", "NCC_GEMM_BF16, "};
  NCC_ASSERT(n->prec >= PREC_FP32 && n->prec <= PREC_BF16);
  if (c->acc) {   /* the buffers it passes (the streams pass keeps cuBLAS calls on stream 0) */
    cg_access_add(c->acc, A, 0);
    cg_access_add(c->acc, B, 0);
    cg_access_add(c->acc, C, 1);
  }
  buf_printf(&c->run,
             "  rc = %s(m->dev, %s%d, %d, %s, %lld, %lld, 1.0f, %s, %lld, %lldLL,\n"
             "                 %s, %lld, %lldLL, 0.0f, %s, %lld, %lldLL, %s);\n"
             "  if (rc) return %s_fail(m, rc, \"%s\");\n",
             n->prec == PREC_FP32 ? "ncc_sgemm" : "ncc_gemm_ex", gemm_prec[n->prec], ta, tb, M, LL(N), LL(K),
             buf_ptr(c, pa, sizeof pa, "const float *", A, ao), LL(lda), LL(sa),
             buf_ptr(c, pb, sizeof pb, "const float *", B, bo), LL(ldb), LL(sb),
             buf_ptr(c, pc, sizeof pc, "float *", C, coff), LL(ldc), LL(sc), batch, c->model, w);
}

static int conv_cublas(Cg *c, const KGroup *gr, const ConvDims *d) {
  Node *nd = gr->main;
  int X = cg_buf_of(c, nd->in[0]), Wb = cg_buf_of(c, nd->in[1]), Y = cg_buf_of(c, group_out(gr));
  int64_t OHW = d->OH * d->OW;
  char nbs[48], coff[64], mg[24];
  cg_batch_count(c, gr, 1, d->Nb, nbs, sizeof nbs);   /* the images of this call: m->nb, or Nb */
  snprintf(mg, sizeof mg, "%lld", LL(d->Mg));
  if (conv_is_1x1(d)) {
    /* each image's [Cin, H*W] block is already the column matrix */
    for (int64_t g = 0; g < d->G; g++) {
      snprintf(coff, sizeof coff, "%lld", LL(g * d->Mg * OHW));
      sgemm(c, nd, 0, 0, mg, OHW, d->Cig, Wb, g * d->Mg * d->Cig, d->Cig, 0, X, g * d->Cig * OHW, OHW,
            d->Cin * OHW, Y, coff, OHW, d->Cout * OHW, nbs);
    }
  } else {
    int64_t CH = conv_chunk(c, d), Kall = d->Cin * d->KH * d->KW;
    int one = CH >= d->Nb;   /* every image in one chunk: no loop, no first-image argument */
    KParams p = {0};
    Buf b = {0};
    const char *x = kp_value(c, &p, nd->in[0], 0, "x"), *ws = kp_work(c, &p, "cols");
    const char *n0 = one ? NULL : kp_int(&p, "n0", "n0_");
    int64_t total = CH * Kall * OHW;
    buf_printf(&b, "  int i = %s * 256 + %s;\n  if (i < %lld) {\n", D_BID_X, D_TID_X, LL(total));
    char img[96];
    if (one) snprintf(img, sizeof img, "i / %lld", LL(Kall * OHW));
    else snprintf(img, sizeof img, "%s + i / %lld", n0, LL(Kall * OHW));
    buf_printf(&b, "    int p = i %% %lld, kq = (i / %lld) %% %lld, img = %s;\n    float v = 0.0f;\n", LL(OHW),
               LL(OHW), LL(Kall), img);
    char ld[1024];
    im2col_load(ld, sizeof ld, d, x, "img", "kq", "p", "0", "      ", NULL);
    if (one) buf_printf(&b, "    {\n      %s\n    }\n    %s[i] = v;\n  }\n", ld, ws);
    else buf_printf(&b, "    if (img < %lld) {\n      %s\n    }\n    %s[i] = v;\n  }\n", LL(d->Nb), ld, ws);
    const char *name = cg_finish(c, "im2col", 0, &p, &b);
    buf_free(&b);
    CgBatch bg;
    if (!one) {   /* chunks of CH images up to the call's batch; the last chunk's im2col runs whole */
      buf_printf(&c->run, "  for (int n0_ = 0; n0_ < %s; n0_ += %lld) {\n", nbs, LL(CH));
      buf_printf(&c->run, "  int nb_ = %s - n0_ < %lld ? (int)(%s - n0_) : %lld;\n", nbs, LL(CH), nbs, LL(CH));
      cg_launch(c, name, &p, (total + 255) / 256, 1, 1, 256, 1, 0);
    } else {      /* column i belongs to image i / (Kall * OHW) */
      cg_launch_b(c, name, &p, (total + 255) / 256, 1, 1, 256, 1, 0, cg_batch_grid(c, gr, 0, total, 256, &bg));
    }
    for (int64_t g = 0; g < d->G; g++) {
      if (one) snprintf(coff, sizeof coff, "%lld", LL(g * d->Mg * OHW));
      else if (g) snprintf(coff, sizeof coff, "(long long)n0_ * %lld + %lld", LL(d->Cout * OHW), LL(g * d->Mg * OHW));
      else snprintf(coff, sizeof coff, "(long long)n0_ * %lld", LL(d->Cout * OHW));
      sgemm(c, nd, 0, 0, mg, OHW, d->Kg, Wb, g * d->Mg * d->Kg, d->Kg, 0, c->work, g * d->Kg * OHW, OHW,
            Kall * OHW, Y, coff, OHW, d->Cout * OHW, one ? nbs : "nb_");
    }
    if (!one) buf_puts(&c->run, "  }\n");
  }
  return sum_bias_epilogue(c, gr, nd->nin > 2 ? nd->in[2] : NULL, OHW, d->Cout, 1);
}

/* ---- linear and matmul ----------------------------------------------------- */
static int emit_linear(Cg *c, const KGroup *gr) {
  Node *nd = gr->main;
  const Shape *xs = &nd->in[0]->shape;
  int64_t rows = xs->d[0], in = xs->d[1], out = nd->out->shape.d[1];
  if (c->o->use_cublas) {
    char coff[8] = "0", ms[48];
    sgemm(c, nd, 0, 1, cg_batch_count(c, gr, 1, rows, ms, sizeof ms), out, in, cg_buf_of(c, nd->in[0]), 0, in, 0, cg_buf_of(c, nd->in[1]), 0, in, 0,
          cg_buf_of(c, group_out(gr)), coff, out, 0, "1");
    return sum_bias_epilogue(c, gr, nd->nin > 2 ? nd->in[2] : NULL, 1, out, 1);
  }
  KParams p = {0};
  GemmSpec s;
  memset(&s, 0, sizeof s);
  const Node *pool = gr->npro ? gr->pro[0] : NULL;   /* pool-prologue: x is the pooling's input */
  const char *x = kp_value(c, &p, pool ? pool->in[0] : nd->in[0], 0, "x"), *w = kp_value(c, &p, nd->in[1], 0, "weight");
  split_of(&s, nd, nd->nin > 2 ? nd->in[2] : NULL, 1, out);
  const char *bias = nd->nin > 2 && s.S == 1 ? kp_value(c, &p, nd->in[2], 0, "bias") : NULL;
  s.M = rows, s.N = out, s.K = in, s.Z = 1;
  s.a_kcontig = s.b_kcontig = 1;
  s.b_w = 1;   /* A the rows of x, B the weight */
  s.a_q = nd->in[0]->narrow == DT_I8;
  s.baxis = 1;   /* row m is image m */
  Buf la = {0}, lb = {0}, lo = {0};
  int na = 0, nb = 0, no = 0;
  cg_term(&la, &na, "m", in), cg_term(&la, &na, "k", 1);
  cg_term(&lb, &nb, "n", in), cg_term(&lb, &nb, "k", 1);
  cg_term(&lo, &no, "m", out), cg_term(&lo, &no, "n", 1);
  s.out_pair = out % 2 == 0;
  s.out_quad = out % 4 == 0;
  if (pool) {
    /* feature k of row m is the pooled element (channel, ph, pw) of image m */
    const Shape *ps = &pool->out->shape;
    int64_t PC = ps->d[1], PH = ps->d[2], PW = ps->d[3];
    char plane[96], ph[64], pw[64], pl[2048];
    snprintf(plane, sizeof plane, "m * %lld + k / %lld", LL(PC), LL(PH * PW));
    snprintf(ph, sizeof ph, "(k / %lld) %% %lld", LL(PW), LL(PH));
    snprintf(pw, sizeof pw, "k %% %lld", LL(PW));
    pool_load(pl, sizeof pl, pool, x, plane, ph, pw, "        ");
    snprintf(s.a_load, sizeof s.a_load, "%s", pl);
  } else {
    char xe[160], ld[200];
    snprintf(xe, sizeof xe, "%s[%s]", x, la.s);
    snprintf(s.a_load, sizeof s.a_load, "v = %s;", cg_ld(ld, sizeof ld, nd->in[0], xe));
    if (nd->in[0]->narrow) snprintf(s.a_bits, sizeof s.a_bits, "v = %s;", xe);
    if (vec_ok(nd->in[0], in)) snprintf(s.a_vec, sizeof s.a_vec, "&%s", xe);
    if (vec32_ok(nd->in[0], in)) snprintf(s.a_f4, sizeof s.a_f4, "&%s", xe);
  }
  {
    char we[200], ld[240];
    snprintf(we, sizeof we, "%s[%s]", w, lb.s);
    snprintf(s.b_load, sizeof s.b_load, "v = %s;", cg_ld(ld, sizeof ld, nd->in[1], we));
    if (nd->in[1]->narrow) snprintf(s.b_bits, sizeof s.b_bits, "v = %s;", we);   /* stored narrow at load */
    if (vec_ok(nd->in[1], in)) snprintf(s.b_vec, sizeof s.b_vec, "&%s", we);
    if (vec32_ok(nd->in[1], in)) snprintf(s.b_f4, sizeof s.b_f4, "&%s", we);
  }
  snprintf(s.out_idx, sizeof s.out_idx, "%s", lo.s);
  buf_free(&la);
  buf_free(&lb);
  buf_free(&lo);
  if (bias) snprintf(s.bias, sizeof s.bias, "%s", bias);   /* the column's: bias_at "" */
  return gemm_kernel(c, gr, &p, &s);
}

static int emit_matmul(Cg *c, const KGroup *gr) {
  Node *nd = gr->main;
  Shape A = nd->in[0]->shape, B = nd->in[1]->shape;
  if (A.rank == 1) A = (Shape){2, {1, A.d[0]}};
  if (B.rank == 1) B = (Shape){2, {B.d[0], 1}};
  int64_t M = A.d[A.rank - 2], K = A.d[A.rank - 1], N = B.d[B.rank - 1];
  Shape ba = {A.rank - 2, {0}}, bb = {B.rank - 2, {0}}, bo = {0, {0}};
  for (int i = 0; i < ba.rank; i++) ba.d[i] = A.d[i];
  for (int i = 0; i < bb.rank; i++) bb.d[i] = B.d[i];
  bo.rank = ba.rank > bb.rank ? ba.rank : bb.rank;
  for (int i = 0; i < bo.rank; i++) {
    int ia = i - (bo.rank - ba.rank), ib = i - (bo.rank - bb.rank);
    int64_t da = ia >= 0 ? ba.d[ia] : 1, db = ib >= 0 ? bb.d[ib] : 1;
    bo.d[i] = da > db ? da : db;
  }
  int64_t Z = shape_numel(&bo), za = shape_numel(&ba), zb = shape_numel(&bb);
  if (Z > 65535) {
    diag_error(nd->loc, "codegen: matmul with %lld batch matrices (more than 65535) is not supported yet", LL(Z));
    c->err = 1;
    return -1;
  }
  /* cuBLAS's strided batch covers full or single operands; mixed broadcasts go tiled */
  /* the batch, when this launch follows it: the first axis of the batch
   * matrices (rank >= 3), else the rows of a (the batch pass allows no other) */
  int brank3 = nd->out->shape.rank >= 3;
  if (c->o->use_cublas && (za == Z || za == 1) && (zb == Z || zb == 1)) {
    char coff[8] = "0", zs[48], ms[48];
    int64_t per = nd->out->shape.d[0] > 0 ? Z / nd->out->shape.d[0] : 1;
    if (brank3) {
      cg_batch_count(c, gr, per, Z, zs, sizeof zs);
      snprintf(ms, sizeof ms, "%lld", LL(M));
    } else {
      snprintf(zs, sizeof zs, "%lld", LL(Z));
      if (nd->out->shape.rank == 2) cg_batch_count(c, gr, 1, M, ms, sizeof ms);
      else snprintf(ms, sizeof ms, "%lld", LL(M));
    }
    sgemm(c, nd, 0, 0, ms, N, K, cg_buf_of(c, nd->in[0]), 0, K, za == 1 ? 0 : M * K, cg_buf_of(c, nd->in[1]), 0, N,
          zb == 1 ? 0 : K * N, cg_buf_of(c, group_out(gr)), coff, N, M * N, zs);
    return sum_bias_epilogue(c, gr, NULL, 1, 1, 1);
  }
  KParams p = {0};
  GemmSpec s;
  memset(&s, 0, sizeof s);
  const char *a = kp_value(c, &p, nd->in[0], 0, "a"), *b = kp_value(c, &p, nd->in[1], 0, "b");
  split_of(&s, nd, NULL, 1, 1);
  s.M = M, s.N = N, s.K = K, s.Z = Z;
  s.uses_z = Z > 1;
  s.a_kcontig = 1, s.b_kcontig = 0;
  s.baxis = brank3 ? 2 : nd->out->shape.rank == 2 ? 1 : -1;
  Buf ia = {0}, ib = {0};
  cg_bcast_index(&ia, &bo, &ba, "z");
  cg_bcast_index(&ib, &bo, &bb, "z");
  /* A[z'][m][k], B[z''][k][n], C[z][m][n]; z', z'' the broadcast batch indices */
  Buf la = {0}, lb = {0}, lo = {0};
  int na = 0, nb = 0, no = 0;
  cg_term(&la, &na, s.uses_z ? ia.s : "0", M * K), cg_term(&la, &na, "m", K), cg_term(&la, &na, "k", 1);
  cg_term(&lb, &nb, s.uses_z ? ib.s : "0", K * N), cg_term(&lb, &nb, "k", N), cg_term(&lb, &nb, "n", 1);
  cg_term(&lo, &no, s.uses_z ? "z" : "0", M * N), cg_term(&lo, &no, "m", N), cg_term(&lo, &no, "n", 1);
  s.out_pair = N % 2 == 0;
  s.out_quad = N % 4 == 0;
  {
    char e[2][400], ld[2][440];
    snprintf(e[0], sizeof e[0], "%s[%s]", a, na ? la.s : "0");
    snprintf(e[1], sizeof e[1], "%s[%s]", b, nb ? lb.s : "0");
    snprintf(s.a_load, sizeof s.a_load, "v = %s;", cg_ld(ld[0], sizeof ld[0], nd->in[0], e[0]));
    snprintf(s.b_load, sizeof s.b_load, "v = %s;", cg_ld(ld[1], sizeof ld[1], nd->in[1], e[1]));
    if (nd->in[0]->narrow) snprintf(s.a_bits, sizeof s.a_bits, "v = %s;", e[0]);
    if (vec_ok(nd->in[0], K)) snprintf(s.a_vec, sizeof s.a_vec, "&%s", e[0]);
    if (vec32_ok(nd->in[0], K)) snprintf(s.a_f4, sizeof s.a_f4, "&%s", e[0]);
    if (nd->in[1]->narrow) snprintf(s.b_bits, sizeof s.b_bits, "v = %s;", e[1]);
    if ((s.b_piece = nvec_piece(nd->in[1], N))) snprintf(s.b_nvec, sizeof s.b_nvec, "&%s", e[1]);   /* rows of n in pieces */
    if (vec32_ok(nd->in[1], N)) snprintf(s.b_f4n, sizeof s.b_f4n, "&%s", e[1]);   /* float32 rows of 4n */
    s.a_q = nd->in[0]->narrow == DT_I8, s.b_q = nd->in[1]->narrow == DT_I8;
  }
  snprintf(s.out_idx, sizeof s.out_idx, "%s", no ? lo.s : "0");
  buf_free(&la);
  buf_free(&lb);
  buf_free(&lo);
  buf_free(&ia);
  buf_free(&ib);
  return gemm_kernel(c, gr, &p, &s);
}

int emit_gemm(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  if (n->op == OP_LINEAR) return emit_linear(c, gr);
  if (n->op == OP_MATMUL) return emit_matmul(c, gr);
  ConvDims d = conv_dims(n);
  if (ir_window_out(d.H, (int)d.KH, d.sh, d.ph, d.dh) != d.OH || ir_window_out(d.W, (int)d.KW, d.sw, d.pw, d.dw) != d.OW)
    ncc_die("conv2d attributes disagree with the output shape");
  /* few output channels per group (depthwise): a GEMM tile (or one cuBLAS
   * call per group) would idle; a thread per output with the window loop is
   * both simpler and faster */
  if (d.Mg < 8) return conv_direct(c, gr, &d);
  if (c->o->use_cublas && gr->main->a.wtap) {   /* the fold pass reorders no weight with --cublas */
    diag_error(gr->main->loc, "codegen: %s's weight is tap-major (a fold pass run without --cublas); "
               "the cuBLAS path takes it as declared: run the passes with --cublas", gr->main->layer ? gr->main->layer : "conv2d");
    c->err = 1;
    return -1;
  }
  if (c->o->use_cublas) return conv_cublas(c, gr, &d);
  return conv_tiled(c, gr, &d);
}

/* ---- the gradients' GEMMs (ir_grad_gemm) ------------------------------------
 * conv2d_bwd_data, conv2d_bwd_weight and linear_bwd_weight as the tiled GEMM
 * (tensor cores at a rounded precision, like the forward's; split-K for a
 * long K of few tiles), their operands gathered by the load statements
 * (A(z, m, k), B(z, k, n)) and the fused epilogue (act_grad) kept.  The
 * dimensions are ir_gemm_dims'. */

/* The digits of var in the mixed radix r[0..n) (r[0] the most significant,
 * unbounded): "int name = digit," declared into b for each digit that is not
 * always 0, whose expression (its name, or "0") goes to e[i]. */
static void digits(Buf *b, const char *var, int n, const char *const *name, const int64_t *r, char e[][32]) {
  int64_t div = 1;
  for (int i = n - 1; i >= 0; i--) {
    char d[96];
    if (r[i] == 1) {
      snprintf(e[i], 32, "0");
    } else {
      cg_digit(d, sizeof d, var, div, i == 0 ? 0 : r[i]);
      buf_printf(b, "int %s = %s; ", name[i], d);
      snprintf(e[i], 32, "%s", name[i]);
    }
    div *= r[i];
  }
}

/* A convolution gradient's index var as the digits (channel c, kh, kw) of
 * radices (C, KH, KW), channel-major, or tap-major (kh, kw, c) where the
 * GEMM orders it so (ir_dgrad_tap_k, ir_wgrad_tap_cols): declared into b
 * as digits does, their expressions to e[0] (c), e[1] (kh), e[2] (kw) */
static void tap_digits(Buf *b, const char *var, int taps, const char *c, int64_t C, int64_t KH, int64_t KW, char e[][32]) {
  if (!taps) {
    const char *nm[] = {c, "kh", "kw"};
    const int64_t r[] = {C, KH, KW};
    digits(b, var, 3, nm, r, e);
    return;
  }
  const char *nm[] = {"kh", "kw", c};
  const int64_t r[] = {KH, KW, C};
  char t[3][32];
  digits(b, var, 3, nm, r, t);
  snprintf(e[0], 32, "%s", t[2]);
  snprintf(e[1], 32, "%s", t[0]);
  snprintf(e[2], 32, "%s", t[1]);
}

/* buf[sum of e[i] * k[i]], the zero terms left out */
static void gather(Buf *b, const char *buf, int n, const char *const *e, const int64_t *k) {
  int t = 0;
  buf_printf(b, "%s[", buf);
  for (int i = 0; i < n; i++) cg_term(b, &t, e[i], k[i]);
  buf_printf(b, "%s]", t ? "" : "0");
}

/* The weight gradient's B tile (B(k, n): x under tap n = (ci, kh, kw) of
 * output pixel k = (img, oh, ow)) for the tiled kernels.  A thread loads
 * along k as load_tile does: its k is k0 + kk (kk = tid % BK), its P columns
 * n0 + tid / BK + p T / BK, the same in every K tile.  So before the K loop
 * each column's offset in x (channel and tap) and its tap's (kh dh, kw dw)
 * are worked out once, into registers; each K tile decodes the thread's one
 * k into its window corner, and an element costs two adds, the padding test
 * and the load (the generic gather: the six digits of k and n an element).
 * A column past N gets a tap that fails the test (kh dh = 32767); with no
 * padding and N a multiple of BN there is no test.  The tile is stored at
 * dst (an lvalue in kk and rr) as rv.  Not through registers a K tile ahead
 * (b_fetch, Node.pipe): with the columns' state, that takes the registers of
 * a second block an SM (ResNet-18 at fp16, sm_90: 128 to 160 at 128 x 128).
 * At 256 threads the kernel asks for two blocks an SM (ir_tile_minb): 128
 * registers, no spill (ResNet-18 at tf32 and fp16, --gemm-tile=128x128).
 * The thread's kk is kt at the kernel's scope: the A tile's loop declares kk
 * in its for-init, and nvcc warns of a later use of an outer kk. */
typedef struct WgradDims {
  int64_t Nb, C, H, W, Cg, OH, OW, KH, KW;
  int sh, sw, ph, pw, dh, dw;
} WgradDims;

/* The start of a weight gradient's B tile in the K loop: a block opened
 * (its comment `what`), the thread's k (k0 + kt), an output pixel, decoded
 * into its window's corner (ih0, iw0) and the corner's offset in x, xb
 * (plus `plus`, or "") */
static void wgrad_corner(Buf *b, const WgradDims *d, const char *what, const char *plus) {
  int64_t HW = d->H * d->W, OHW = d->OH * d->OW;
  buf_printf(b, "    {   /* %s */\n      int k = k0 + kt;\n", what);
  const char *pix = "k";
  if (d->Nb > 1) {
    buf_printf(b, "      int img = k / %lld, pix = k %% %lld;\n", LL(OHW), LL(OHW));
    pix = "pix";
  }
  char ih0[96], iw0[96];
  if (d->OW > 1) buf_printf(b, "      int oh = %s / %lld, ow = %s %% %lld;\n", pix, LL(d->OW), pix, LL(d->OW));
  cg_window_index(ih0, sizeof ih0, d->OW > 1 ? "oh" : pix, d->sh, d->ph, NULL, 1);
  cg_window_index(iw0, sizeof iw0, d->OW > 1 ? "ow" : "0", d->sw, d->pw, NULL, 1);
  buf_printf(b, "      int ih0 = %s, iw0 = %s;\n", ih0, iw0);
  if (d->Nb > 1) buf_printf(b, "      int xb = img * %lld + ih0 * %lld + iw0%s;\n", LL(d->C * HW), LL(d->W), plus);
  else buf_printf(b, "      int xb = ih0 * %lld + iw0%s;\n", LL(d->W), plus);
}

/* The tile where the columns are tap-major (ir_wgrad_tap_cols): every
 * column of the block's tile is one tap's channel, n = tap Cg + ci.  Before
 * the K loop a thread works out its first column's offset in x (its channel
 * and the block's tap) and the tap's kh dh, kw dw; its column p lies p CS
 * channel planes on.  Each K tile decodes its k into the window corner and
 * tests the padding once; an element is then its load (at an offset known
 * when compiling) and its store. */
static void wgrad_tile_taps(GemmSpec *s, const WgradDims *d, const char *x, int BN, int T, const char *dst,
                            const char *rv) {
  int P = BK * BN / T, CS = T / BK, KK = (int)(d->KH * d->KW);
  NCC_ASSERT(BK * BN % T == 0 && T % BK == 0 && d->Cg % BN == 0 && s->N % BN == 0);
  int64_t HW = d->H * d->W;
  int test = d->ph > 0 || d->pw > 0, krem = s->K % BK != 0;
  Buf b = {0};
  buf_printf(&b, "  int kt = tid %% %d;   /* this thread's k in each K tile (kk of the tile); its columns n0 + tid / %d + %d p: "
                 "one tap's channels */\n", BK, BK, CS);
  buf_printf(&b, "  int xo%s;   /* column 0's offset in x (channel, tap); column p's %d p planes on%s */\n",
             test ? ", xth, xtw" : "", CS, test ? "; the tap's kh dh, kw dw" : "");
  buf_puts(&b, "  {\n");
  if (KK > 1) buf_printf(&b, "    int tap = n0 / %lld, ci = n0 %% %lld + tid / %d;\n", LL(d->Cg), LL(d->Cg), BK);
  else buf_printf(&b, "    int ci = n0 + tid / %d;\n", BK);
  char t1[64] = "0", t2[64] = "0";
  if (d->KH > 1 && d->KW > 1) buf_printf(&b, "    int kh = tap / %lld, kw = tap %% %lld;\n", LL(d->KW), LL(d->KW));
  else if (d->KH > 1) buf_puts(&b, "    int kh = tap;\n");
  else if (d->KW > 1) buf_puts(&b, "    int kw = tap;\n");
  if (d->KH > 1) snprintf(t1, sizeof t1, d->dh > 1 ? "kh * %d" : "kh", d->dh);
  if (d->KW > 1) snprintf(t2, sizeof t2, d->dw > 1 ? "kw * %d" : "kw", d->dw);
  if (s->uses_z) buf_printf(&b, "    xo = (z * %lld + ci) * %lld", LL(d->Cg), LL(HW));
  else buf_printf(&b, "    xo = ci * %lld", LL(HW));
  if (d->KH > 1) buf_printf(&b, " + %s * %lld", t1, LL(d->W));
  if (d->KW > 1) buf_printf(&b, " + %s", t2);
  buf_puts(&b, ";\n");
  if (test) buf_printf(&b, "    xth = %s, xtw = %s;\n", t1, t2);
  buf_puts(&b, "  }\n");
  buf_take(&b, s->b_pre, sizeof s->b_pre);
  wgrad_corner(&b, d, "the thread's k: an output pixel, its window corner in x, its padding test", " + xo");
  char cond[300] = "";
  size_t l = 0;
  if (krem) l += (size_t)snprintf(cond + l, sizeof cond - l, "k < %lld", LL(s->K));
  if (test)
    snprintf(cond + l, sizeof cond - l, "%s(unsigned)(ih0 + xth) < %lldu && (unsigned)(iw0 + xtw) < %lldu", l ? " && " : "",
             LL(d->H), LL(d->W));
  if (cond[0]) buf_printf(&b, "      int in = %s;\n", cond);
  buf_printf(&b, "      for (int p = 0; p < %d; p++) {\n", P);
  buf_printf(&b, "        int rr = tid / %d + p * %d, kk = kt;\n", BK, CS);
  buf_puts(&b, "        float v = 0.0f;\n");
  buf_printf(&b, "        %sv = %s[xb + p * %lld];\n", cond[0] ? "if (in) " : "", x, LL(CS * HW));
  buf_printf(&b, "        %s = %s;\n      }\n    }\n", dst, rv);
  buf_take(&b, s->b_tile, sizeof s->b_tile);
  buf_free(&b);
}

static void wgrad_tile(GemmSpec *s, const WgradDims *d, const char *x, int BN, int T, const char *dst, const char *rv,
                       int taps) {
  s->b_kfast = 1;   /* both forms: kk = kt = tid % BK */
  if (taps) {
    NCC_ASSERT(taps == BN);
    wgrad_tile_taps(s, d, x, BN, T, dst, rv);
    return;
  }
  int P = BK * BN / T, CS = T / BK;
  /* the tap's offsets fit xt's halves, and the past-N tap (32767 rows down) falls outside every window */
  NCC_ASSERT(BK * BN % T == 0 && T % BK == 0 && (d->KH - 1) * d->dh < 32767 && (d->KW - 1) * d->dw < 65536 &&
             d->H + d->ph < 32767);
  int64_t HW = d->H * d->W;
  int test = d->ph > 0 || d->pw > 0 || s->N % BN != 0, krem = s->K % BK != 0;
  char e[64], t1[64], t2[64];
  Buf b = {0};
  /* before the K loop: the thread's columns */
  buf_printf(&b, "  int kt = tid %% %d;   /* this thread's k in each K tile (kk of the tile); its columns n0 + tid / %d + %d p */\n",
             BK, BK, CS);
  if (test)
    buf_printf(&b, "  int xo[%d], xt[%d];   /* column p: its offset in x (channel, tap); its tap's kh dh * 65536 + kw dw */\n",
               P, P);
  else
    buf_printf(&b, "  int xo[%d];   /* column p: its offset in x (channel, tap) */\n", P);
  buf_printf(&b, "  for (int p = 0; p < %d; p++) {\n    int n = n0 + tid / %d + p * %d;\n", P, BK, CS);
  buf_printf(&b, "    int ci = %s", d->KH * d->KW > 1 ? cg_digit(e, sizeof e, "n", d->KH * d->KW, 0) : "n");
  if (d->KH > 1) buf_printf(&b, ", kh = %s", cg_digit(e, sizeof e, "n", d->KW, d->KH));
  if (d->KW > 1) buf_printf(&b, ", kw = %s", cg_digit(e, sizeof e, "n", 1, d->KW));
  buf_puts(&b, ";\n");
  /* the tap's rows and columns down and across the window: kh dh, kw dw (none for an extent of 1) */
  snprintf(t1, sizeof t1, d->KH == 1 ? "" : d->dh > 1 ? "kh * %d" : "kh", d->dh);
  snprintf(t2, sizeof t2, d->KW == 1 ? "" : d->dw > 1 ? "kw * %d" : "kw", d->dw);
  char xo[200];
  size_t l = 0;
  if (s->uses_z) l += (size_t)snprintf(xo + l, sizeof xo - l, "(z * %lld + ci) * %lld", LL(d->Cg), LL(HW));
  else l += (size_t)snprintf(xo + l, sizeof xo - l, "ci * %lld", LL(HW));
  if (t1[0]) l += (size_t)snprintf(xo + l, sizeof xo - l, " + %s * %lld", t1, LL(d->W));
  if (t2[0]) snprintf(xo + l, sizeof xo - l, " + %s", t2);
  buf_printf(&b, "    xo[p] = %s;\n", xo);
  if (test) {
    char tap[160];
    if (t1[0] && t2[0]) snprintf(tap, sizeof tap, "%s * 65536 + %s", t1, t2);
    else if (t1[0]) snprintf(tap, sizeof tap, "%s * 65536", t1);
    else snprintf(tap, sizeof tap, "%s", t2[0] ? t2 : "0");
    if (s->N % BN) buf_printf(&b, "    xt[p] = n < %lld ? %s : 32767 * 65536;   /* past N: a tap no test lets in */\n",
                              LL(s->N), tap);
    else buf_printf(&b, "    xt[p] = %s;\n", tap);
  }
  buf_puts(&b, "  }\n");
  buf_take(&b, s->b_pre, sizeof s->b_pre);
  /* in the K loop: the thread's k, its window corner, then its P elements */
  {
    wgrad_corner(&b, d, "the thread's k: an output pixel, its window corner in x", "");
    buf_printf(&b, "      for (int p = 0; p < %d; p++) {\n", P);
    buf_printf(&b, "        int rr = tid / %d + p * %d, kk = kt;\n", BK, CS);
    buf_puts(&b, "        float v = 0.0f;\n");
    char cond[200] = "";
    size_t l = 0;
    if (krem) l += (size_t)snprintf(cond + l, sizeof cond - l, "k < %lld", LL(s->K));
    if (test) {
      buf_puts(&b, "        int ih = ih0 + (xt[p] >> 16), iw = iw0 + (xt[p] & 65535);\n");
      snprintf(cond + l, sizeof cond - l, "%s(unsigned)ih < %lldu && (unsigned)iw < %lldu", l ? " && " : "", LL(d->H),
               LL(d->W));
    }
    if (cond[0]) buf_printf(&b, "        if (%s) v = %s[xb + xo[p]];\n", cond, x);
    else buf_printf(&b, "        v = %s[xb + xo[p]];\n", x);
    buf_printf(&b, "        %s = %s;\n      }\n    }\n", dst, rv);
  }
  buf_take(&b, s->b_tile, sizeof s->b_tile);
  buf_free(&b);
}

/* The data gradient's B tile (B(k, n): dy at the output whose window puts
 * tap (kh, kw) of k on input pixel n) where K is tap-major
 * (ir_dgrad_tap_k: k = tap Og + co, each K tile one tap's channels).  A
 * thread loads along n as load_tile does: its column n0 + dc is the same in
 * every K tile, its P k's consecutive (at fp16 and bf16 a pair of them is
 * one word of the tile: one store), or at tf32 fours 8 apart; a warp holds
 * 16 columns at two rows where the tile has two or more threads a column
 * (b_warp16).  Before the
 * K loop it works out its pixel's (h + ph, w + pw) and its offset in dy
 * (image, group, first channel); a column past N gets a row no tap
 * reaches.  Each K tile
 * takes the tap from k0, finds the output under it (stride 1: the row and
 * column; else their divisibility too) and tests it once; an element is
 * then its load, p channel planes on, and its store.
 *
 * By phases (ir_dgrad_phases, d->P): the column is pixel (a, b) of the
 * block's phase (rh, rw), dx's (sh a + rh, sw b + rw); its row of dy under
 * the phase's first tap is a + qh, its column b + qw (phase_pre), and a K
 * tile's tap (i, j) of the phase moves them back by i and j: the test of a
 * stride-1 gradient, no divisibility. */
typedef struct DgradDims {
  int64_t O, Og, OH, OW, H, W, KH, KW;
  int sh, sw, ph, pw, dh, dw;
  int P;   /* the phases (ir_dgrad_phases), 0: none */
} DgradDims;

/* A phase's rows and columns of pixels (ir_dgrad_phases), the first phase's: ceil(H / sh), ceil(W / sw); where the
 * stride does not divide a side, the later phases have one fewer, their last column past it (store_if) */
static int64_t phase_rows(const DgradDims *d) { return (d->H + d->sh - 1) / d->sh; }
static int64_t phase_cols(const DgradDims *d) { return (d->W + d->sw - 1) / d->sw; }

/* A phase's taps (ir_dgrad_phases): the most a phase takes, ceil(KH / sh) x ceil(KW / sw), and which of
 * them is 1 (its taps a column or a row of the kernel's: no division by nw) */
static int64_t phase_taps(const DgradDims *d, int *nh1, int *nw1) {
  int64_t th = (d->KH + d->sh - 1) / d->sh, tw = (d->KW + d->sw - 1) / d->sw;
  *nh1 = th == 1, *nw1 = tw == 1;
  return th * tw;
}

/* The taps of one axis that reach a phase whose first tap is f (stride st, a kernel of K taps): f, f + st, ...
 * below K; phase_axis emits the same in the kernel, for the block's phase */
static int axis_taps(int f, int st, int64_t K) { return f < K ? (int)((K - 1 - f) / st + 1) : 0; }

/* One axis of phase_pre ("h": rh of stride st, padding p, a kernel of K taps): its first tap f, its
 * dy offset q and its taps n (axis_taps), the constants folded (no "+ 0", no "% 1") */
static void phase_axis(Buf *b, const char *ax, int st, int p, int64_t K) {
  if (st == 1) {   /* every tap, each pixel its own */
    buf_printf(b, "  int f%s = 0, q%s = %d, n%s = %lld;\n", ax, ax, p, ax, LL(K));
    return;
  }
  int pm = p % st, pq = p / st;
  char f[48], q[64], n[96];
  if (pm) {
    snprintf(f, sizeof f, "(r%s + %d) %% %d", ax, pm, st);
    if (pq) snprintf(q, sizeof q, "(r%s + %d) / %d + %d", ax, pm, st, pq);
    else snprintf(q, sizeof q, "(r%s + %d) / %d", ax, pm, st);
  } else {   /* (r + p) % st = r */
    snprintf(f, sizeof f, "r%s", ax);
    snprintf(q, sizeof q, "%d", pq);
  }
  if (K == 1) snprintf(n, sizeof n, "f%s == 0", ax);
  else if (K <= st) snprintf(n, sizeof n, "f%s < %lld", ax, LL(K));
  else snprintf(n, sizeof n, "f%s < %lld ? (%lld - f%s) / %d + 1 : 0", ax, LL(K), LL(K - 1), ax, st);
  buf_printf(b, "  int f%s = %s, q%s = %s, n%s = %s;\n", ax, f, ax, q, ax, n);
}

/* The statements before the K loop that give the block its phase z (ir_dgrad_phases; grouped, zq = z % P, its
 * group zg = z / P; the phases of most taps first, zp): dx's rows sh a + rh,
 * columns sw b + rw; the taps that reach them, kh = fh + sh i (i < nh) and kw = fw + sw j (j < nw), under
 * pixel (a, b) dy's output (a + qh - i, b + qw - j); the phase's K, kc = nh nw Og, its local tap tl = i nw +
 * j; for the weight (phase_tap): tb, the first tap's index kh KW + kw, tq, its step from i to i + 1 less
 * nw of j's, and tm, 65536 / nw rounded up (i = tl tm >> 16, exact for tl nw < 65536) */
static void phase_pre(GemmSpec *s, const DgradDims *d) {
  int nh1, nw1;
  int64_t kt = phase_taps(d, &nh1, &nw1);
  Buf b = {0};
  buf_printf(&b, "  /* the block's phase (rh, rw): dx's rows %d a + rh, columns %d b + rw; the taps that reach them, kh = fh + "
                 "%d i (i < nh)\n   * and kw = fw + %d j (j < nw); under its pixel (a, b) dy's (a + qh - i, b + qw - j); "
                 "its K kc, k / %lld its tap tl = i nw + j */\n",
             d->sh, d->sw, d->sh, d->sw, LL(d->Og));
  /* the phases the longest first (blocks start in z's order: the short ones fill in behind), as a table of
   * 4 bits a phase where it fits 64 bits; ties and the rest in order */
  int P = d->P, ord[16], nt[16];
  char pz[16] = "z";   /* the phase's index: z, or with groups z % P (the group zg = z / P) */
  if (s->Z > P) {
    buf_printf(&b, "  int zg = z / %d, zq = z %% %d;   /* the group, the phase's index */\n", P, P);
    snprintf(pz, sizeof pz, "zq");
  }
  const char *ph = pz;
  if (P <= 16) {
    for (int q = 0; q < P; q++) {
      int rh = q / d->sw, rw = q % d->sw, fh = (rh + d->ph) % d->sh, fw = (rw + d->pw) % d->sw;
      nt[q] = axis_taps(fh, d->sh, d->KH) * axis_taps(fw, d->sw, d->KW);
      int i = q;
      for (; i > 0 && nt[ord[i - 1]] < nt[q]; i--) ord[i] = ord[i - 1];
      ord[i] = q;
    }
    int same = 1;
    unsigned long long tab = 0;
    for (int q = 0; q < P; q++) same &= ord[q] == q, tab |= (unsigned long long)ord[q] << 4 * q;
    if (!same) {
      buf_printf(&b, "  int zp = (int)(0x%llxull >> 4 * %s & 15);   /* the phase: the one of most taps first */\n", tab, pz);
      ph = "zp";
    }
  }
  if (d->sh == 1) buf_printf(&b, "  int rh = 0, rw = %s;\n", ph);
  else if (d->sw == 1) buf_printf(&b, "  int rh = %s, rw = 0;\n", ph);
  else buf_printf(&b, "  int rh = %s / %d, rw = %s %% %d;\n", ph, d->sw, ph, d->sw);
  phase_axis(&b, "h", d->sh, d->ph, d->KH);
  phase_axis(&b, "w", d->sw, d->pw, d->KW);
  if (d->KW > 1) buf_printf(&b, "  int kc = nh * nw * %lld, tb = fh * %lld + fw;\n", LL(d->Og), LL(d->KW));
  else buf_printf(&b, "  int kc = nh * nw * %lld, tb = fh + fw;\n", LL(d->Og));
  if (kt > 1 && !nh1 && !nw1)
    buf_printf(&b, "  int tq = %lld - %d * nw, tm = nw ? (65535 + nw) / nw : 1;\n", LL(d->sh * d->KW), d->sw);
  buf_take(&b, s->k_pre, sizeof s->k_pre);
  s->k_var = 1;
}

/* The weight's tap index (kh KW + kw) of a phase's local tap tl (phase_pre's names) */
static void phase_tap(char *out, size_t n, const char *tl, const DgradDims *d) {
  int nh1, nw1;
  int64_t kt = phase_taps(d, &nh1, &nw1);
  if (kt == 1) snprintf(out, n, "tb");
  else if (nw1) snprintf(out, n, "tb + %s * %lld", tl, LL(d->sh * d->KW));   /* i = tl */
  else if (nh1) snprintf(out, n, "tb + %s * %d", tl, d->sw);                  /* j = tl */
  else snprintf(out, n, "tb + (%s * tm >> 16) * tq + %s * %d", tl, tl, d->sw);
}

static void dgrad_tile_taps(GemmSpec *s, const DgradDims *d, const char *dy, int BN, int T, const char *dst,
                            const char *rv, int kind) {
  int P = BK * BN / T, KK = (int)(d->KH * d->KW), st = d->sh > 1 || d->sw > 1, KS = T / BN, pack = kind == MMA_F16;
  /* a thread's P rows: consecutive (kq P + j: ROWS_PAIRS' order), or at tf32 with a warp 16 columns wide fours 8
   * apart (ROWS_QUADS); b_warp16 */
  int w16 = (kind == MMA_F16 || kind == MMA_TF32) && KS >= 2, form = w16 && kind == MMA_TF32 ? ROWS_QUADS : ROWS_PAIRS;
  char kk[80], step[40];
  row_of(kk, sizeof kk, form, P, KS, NULL);
  row_step(step, sizeof step, form, P, KS, NULL);
  NCC_ASSERT(BK * BN % T == 0 && T % BN == 0 && d->Og % BK == 0 && s->K % BK == 0);
  int64_t HW = d->H * d->W, OHW = d->OH * d->OW;
  Buf b = {0};
  buf_printf(&b, "  /* this thread's column (n0 + dc) in each K tile; its k %s */\n", kk);
  b_warp16(&b, w16, form, BN, P, KS, "dc", "");
  if (d->P) {   /* a phase's pixels: ceil(H / sh) x ceil(W / sw) an image (phase_rows) */
    HW = phase_rows(d) * phase_cols(d);
    buf_puts(&b, "  int dyo, dth, dtw;   /* the column's offset in dy (image, the thread's first channel); its row and "
                 "column in dy under the phase's first tap */\n");
  } else {
    buf_puts(&b, "  int dyo, dth, dtw;   /* the column's offset in dy (image, group, the thread's first channel); "
                 "its pixel's h + ph, w + pw */\n");
  }
  buf_printf(&b, "  {\n    int n = n0 + dc, img = n / %lld, pix = n %% %lld;\n", LL(HW), LL(HW));
  if (s->uses_z && (!d->P || s->Z > d->P))   /* (by phases: z the group's phase, zg the group) */
    buf_printf(&b, "    dyo = img * %lld + %s * %lld + kq * %lld;\n", LL(d->O * OHW), d->P ? "zg" : "z", LL(d->Og * OHW),
               LL((form == ROWS_PAIRS ? P : 1) * OHW));
  else
    buf_printf(&b, "    dyo = img * %lld + kq * %lld;\n", LL(d->O * OHW), LL((form == ROWS_PAIRS ? P : 1) * OHW));
  char ph[24] = "", pw[24] = "";
  if (d->ph) snprintf(ph, sizeof ph, " + %d", d->ph);
  if (d->pw) snprintf(pw, sizeof pw, " + %d", d->pw);
  /* (by phases, a column past the input's last row or column loads in bounds, and stores nothing: store_if) */
  if (d->P) buf_printf(&b, "    dth = pix / %lld + qh, dtw = pix %% %lld + qw;\n", LL(phase_cols(d)), LL(phase_cols(d)));
  else buf_printf(&b, "    dth = pix / %lld%s, dtw = pix %% %lld%s;\n", LL(d->W), ph, LL(d->W), pw);
  if (s->N % BN) buf_printf(&b, "    if (n >= %lld) dth = -1048576;   /* past N: a row no tap reaches */\n", LL(s->N));
  buf_puts(&b, "  }\n");
  buf_take(&b, s->b_pre, sizeof s->b_pre);
  buf_puts(&b, "    {   /* this K tile's tap; the column's element of dy under it, tested once */\n");
  if (d->P) {   /* the phase's tap (i, j): dy's row and column i and j back from the first tap's */
    int nh1, nw1;
    int64_t kt = phase_taps(d, &nh1, &nw1);
    if (kt == 1) buf_puts(&b, "      int co0 = k0, th = dth, tw = dtw;\n");
    else {
      buf_printf(&b, "      int tl = k0 / %lld, co0 = k0 %% %lld;\n", LL(d->Og), LL(d->Og));
      if (nw1) buf_puts(&b, "      int th = dth - tl, tw = dtw;\n");
      else if (nh1) buf_puts(&b, "      int th = dth, tw = dtw - tl;\n");
      else buf_puts(&b, "      int ti = tl * tm >> 16, th = dth - ti, tw = dtw - (tl - ti * nw);\n");
    }
  } else if (KK > 1) buf_printf(&b, "      int tap = k0 / %lld, co0 = k0 %% %lld;\n", LL(d->Og), LL(d->Og));
  else buf_puts(&b, "      int co0 = k0;\n");
  char kh[48] = "0", kw[48] = "0";
  if (d->P)
    ;
  else if (d->KH > 1 && d->KW > 1) buf_printf(&b, "      int kh = tap / %lld, kw = tap %% %lld;\n", LL(d->KW), LL(d->KW));
  else if (d->KH > 1) buf_puts(&b, "      int kh = tap;\n");
  else if (d->KW > 1) buf_puts(&b, "      int kw = tap;\n");
  if (d->KH > 1) snprintf(kh, sizeof kh, d->dh > 1 ? " - kh * %d" : " - kh", d->dh);
  else kh[0] = 0;
  if (d->KW > 1) snprintf(kw, sizeof kw, d->dw > 1 ? " - kw * %d" : " - kw", d->dw);
  else kw[0] = 0;
  if (!d->P) buf_printf(&b, "      int th = dth%s, tw = dtw%s;\n", kh, kw);
  if (!st || d->P) {
    buf_printf(&b, "      int in = (unsigned)th < %lldu && (unsigned)tw < %lldu;\n", LL(d->OH), LL(d->OW));
    buf_printf(&b, "      int yo = dyo + co0 * %lld + th * %lld + tw;\n", LL(OHW), LL(d->OW));
  } else {
    buf_printf(&b, "      int oh = th / %d, ow = tw / %d;\n", d->sh, d->sw);
    buf_printf(&b, "      int in = th >= 0 && tw >= 0 && oh * %d == th && ow * %d == tw && oh < %lld && ow < %lld;\n", d->sh,
               d->sw, LL(d->OH), LL(d->OW));
    buf_printf(&b, "      int yo = dyo + co0 * %lld + oh * %lld + ow;\n", LL(OHW), LL(d->OW));
  }
  if (pack) {   /* 16-bit elements: k and k + 1 of the column are one word of the tile (mma_dst), one store */
    NCC_ASSERT(P % 2 == 0);
    buf_printf(&b, "      for (int j = 0; j < %d; j += 2) {\n", P);
    buf_printf(&b, "        int rr = dc, kk = %s;\n", kk);
    buf_puts(&b, "        float v = 0.0f, v1 = 0.0f;\n");
    buf_printf(&b, "        if (in) v = %s[yo + j * %lld], v1 = %s[yo + (j + 1) * %lld];\n", dy, LL(OHW), dy, LL(OHW));
    buf_printf(&b, "        unsigned lo = %s;\n        v = v1;\n        unsigned w = lo | (unsigned)%s << 16;\n", rv, rv);
    buf_printf(&b, "        ncc_sts32(&%s, w);\n      }\n    }\n", dst);
  } else {
    buf_printf(&b, "      for (int j = 0; j < %d; j++) {\n", P);
    buf_printf(&b, "        int rr = dc, kk = %s;\n", kk);
    buf_puts(&b, "        float v = 0.0f;\n");
    if (form == ROWS_QUADS && P > 4) buf_printf(&b, "        if (in) v = %s[yo + %s * %lld];\n", dy, step, LL(OHW));
    else buf_printf(&b, "        if (in) v = %s[yo + j * %lld];\n", dy, LL(OHW));
    buf_printf(&b, "        %s = %s;\n      }\n    }\n", dst, rv);
  }
  buf_take(&b, s->b_tile, sizeof s->b_tile);
  buf_free(&b);
}

int emit_grad_gemm(Cg *c, const KGroup *gr) {
  Node *n = gr->main;
  const Attrs *a = &n->a;
  KParams p = {0};
  GemmSpec s;
  memset(&s, 0, sizeof s);
  ir_gemm_dims(n, &s.M, &s.N, &s.K, &s.Z);
  split_of(&s, n, NULL, 1, 1);   /* a long K of few tiles: split-K, the epilogue in the sum kernel */
  s.baxis = -1, s.uses_z = s.Z > 1;
  const char *z = s.uses_z ? "z" : "0";
  Buf la = {0}, lb = {0}, lo = {0};
  if (n->op == OP_LINEAR_BWD_WEIGHT) {   /* dweight[O, I] = dy[rows, O]^T x[rows, I] */
    const char *dy = kp_value(c, &p, n->in[0], 0, "dy"), *x = kp_value(c, &p, n->in[1], 0, "x");
    const char *ea[] = {"k", "m"}, *eb[] = {"k", "n"}, *eo[] = {"m", "n"};
    const int64_t ka[] = {s.M, 1}, kb[] = {s.N, 1}, ko[] = {s.N, 1};
    s.a_kcontig = 0, s.b_kcontig = 0;   /* a warp's loads run along m (n): contiguous rows of dy (x) */
    buf_puts(&la, "v = "), gather(&la, dy, 2, ea, ka), buf_puts(&la, ";");
    buf_puts(&lb, "v = "), gather(&lb, x, 2, eb, kb), buf_puts(&lb, ";");
    if (vec32_ok(n->in[1], s.N)) {   /* x's rows of I floats, 4n: 4 of n a 128-bit load (vec32n_fetch) */
      Buf ad = {0};
      buf_puts(&ad, "&"), gather(&ad, x, 2, eb, kb);
      snprintf(s.b_f4n, sizeof s.b_f4n, "%s", ad.s);
      buf_free(&ad);
    }
    if (vec32_ok(n->in[0], s.M)) {   /* dy's rows of O floats, 4n: 4 of m a load */
      Buf ad = {0};
      buf_puts(&ad, "&"), gather(&ad, dy, 2, ea, ka);
      snprintf(s.a_f4m, sizeof s.a_f4m, "%s", ad.s);
      buf_free(&ad);
    }
    for (int i = 0, t = 0; i < 2; i++) cg_term(&lo, &t, eo[i], ko[i]);
    s.out_pair = s.N % 2 == 0;
    s.out_quad = s.N % 4 == 0;
  } else {
    int64_t KH = a->kernel[0], KW = a->kernel[1];
    const Shape *dys = &n->in[0]->shape;
    int64_t O = dys->d[1], OH = dys->d[2], OW = dys->d[3], Og = O / a->groups;
    int sh = a->stride[0], sw = a->stride[1], ph = a->pad[0], pw = a->pad[1], dh = a->dilation[0], dw = a->dilation[1];
    char ke[3][32], ne[3][32], x0[160], x1[160], cond[600];
    if (n->op == OP_CONV2D_BWD_DATA) {
      /* dx[img, z Cg + m, h, w] = sum over k = (co, kh, kw) of weight[z Og + co, m, kh, kw]
       * dy[img, z Og + co, oh, ow], (oh, ow) the output whose window puts tap (kh, kw) on (h, w) */
      const Shape *xs = &n->out->shape;
      int64_t C = xs->d[1], H = xs->d[2], W = xs->d[3], Cg = s.M;
      const char *dy = kp_value(c, &p, n->in[0], 0, "dy"), *w = kp_value(c, &p, n->in[1], 0, "weight");
      const char *nn[] = {"img", "h", "w"};
      const int64_t nr[] = {xs->d[0], H, W};
      DgradDims dd = {O, Og, OH, OW, H, W, KH, KW, sh, sw, ph, pw, dh, dw, ir_dgrad_phases(n)};
      if (dd.P) {   /* grid axis z: the groups' phases (the group zg); the phase's taps and K */
        z = a->groups > 1 ? "zg" : "0";
        phase_pre(&s, &dd);
      }
      /* by phases: k's tap (the weight's kh KW + kw) and k as the weight's tap-major k, tap Og + k % Og */
      char pk[320] = "k", ptap[200] = "";
      if (dd.P) {
        char tl[48];
        snprintf(tl, sizeof tl, "(k / %lld)", LL(Og));
        phase_tap(ptap, sizeof ptap, tl, &dd);
        if (ir_dgrad_phase_taps(n) == 1) snprintf(pk, sizeof pk, "(k + tb * %lld)", LL(Og));   /* k < Og */
        else snprintf(pk, sizeof pk, "((%s) * %lld + k %% %lld)", ptap, LL(Og), LL(Og));
      }
      s.a_kcontig = 1, s.b_kcontig = 0;
      /* A: weight[z Og + co, m, t], t = kh KW + kw: k = co KH KW + t, or tap-major (ir_dgrad_tap_k) t Og + co */
      int taps = ir_dgrad_tap_k(n);
      s.b_gather = 1;   /* (load_tile, where not taps) */
      if (a->wtap) {   /* the weight transposed a step, [C][KH][KW][O] (autodiff): A(m, k) = weight[m K + k] */
        NCC_ASSERT(taps && a->groups == 1 && n->in[1]->shape.d[0] == C && n->in[1]->shape.d[3] == O);
        char we[420], ld[460];
        snprintf(we, sizeof we, "%s[m * %lld + %s]", w, LL(O * KH * KW), pk);
        buf_printf(&la, "v = %s;", cg_ld(ld, sizeof ld, n->in[1], we));
        if (n->in[1]->narrow) snprintf(s.a_bits, sizeof s.a_bits, "v = %s;", we);   /* stored narrow */
        if (vec_ok(n->in[1], O * KH * KW)) snprintf(s.a_vec, sizeof s.a_vec, "&%s", we);   /* (a phase's k: 8 of */
        if (vec32_ok(n->in[1], O * KH * KW)) snprintf(s.a_f4, sizeof s.a_f4, "&%s", we);   /* one tap, contiguous) */
      } else {
        char te[2][32];   /* k's channel co and tap t */
        if (dd.P) {   /* the phase's tap */
          buf_printf(&la, "int co = k %% %lld, t = %s; ", LL(Og), ptap);
          snprintf(te[0], sizeof te[0], "co");
          snprintf(te[1], sizeof te[1], "t");
        } else if (taps) {
          const char *tn[] = {"t", "co"};
          const int64_t tr[] = {KH * KW, Og};
          char tt[2][32];
          digits(&la, "k", 2, tn, tr, tt);
          snprintf(te[0], sizeof te[0], "%s", tt[1]);
          snprintf(te[1], sizeof te[1], "%s", tt[0]);
        } else {
          const char *tn[] = {"co", "t"};
          const int64_t tr[] = {Og, KH * KW};
          digits(&la, "k", 2, tn, tr, te);
        }
        const char *e[] = {z, te[0], "m", te[1]};
        const int64_t k[] = {Og * Cg * KH * KW, Cg * KH * KW, KH * KW, 1};
        buf_puts(&la, "v = "), gather(&la, w, 4, e, k), buf_puts(&la, ";");
      }
      /* B: dy at (th, tw) = (h + ph - kh dh, w + pw - kw dw) / stride, where that divides and lands inside */
      tap_digits(&lb, "k", taps, "co", Og, KH, KW, ke);
      digits(&lb, "n", 3, nn, nr, ne);
      window_sum(x0, sizeof x0, ne[1], 1, ph, ke[1], -dh);
      window_sum(x1, sizeof x1, ne[2], 1, pw, ke[2], -dw);
      buf_printf(&lb, "int th = %s, tw = %s; ", x0, x1);
      if (sh == 1 && sw == 1) {
        snprintf(cond, sizeof cond, "th >= 0 && th < %lld && tw >= 0 && tw < %lld", LL(OH), LL(OW));
      } else {
        buf_printf(&lb, "int oh = th / %d, ow = tw / %d; ", sh, sw);
        snprintf(cond, sizeof cond, "th >= 0 && tw >= 0 && oh * %d == th && ow * %d == tw && oh < %lld && ow < %lld", sh,
                 sw, LL(OH), LL(OW));
      }
      {
        const char *e[] = {ne[0], z, ke[0], sh == 1 && sw == 1 ? "th" : "oh", sh == 1 && sw == 1 ? "tw" : "ow"};
        const int64_t k[] = {O * OH * OW, Og * OH * OW, OH * OW, OW, 1};
        buf_printf(&lb, "if (%s) v = ", cond), gather(&lb, dy, 5, e, k), buf_puts(&lb, ";");
      }
      if (taps) {   /* the tiled kernels: a K tile's tap and the column's element of dy once a tile */
        char ra[64], rb[64], dst[160], sb[96];
        spec_rv(c, &p, n, &s, ra, rb);
        if (ir_gemm_mma(n)) {
          MmaCfg g = mma_cfg(n);
          s.b_pad = 1;   /* the columns vary along a warp: padded slices (mma_dst), as load_tile's would be */
          dgrad_tile_taps(&s, &dd, dy, g.BN, g.T, mma_dst(dst, sizeof dst, 'B', g.BN, "rr", mma_kind(n), 1, g.NJ),
                          mma_store_rv(sb, sizeof sb, n, rb), mma_kind(n));
        } else {
          dgrad_tile_taps(&s, &dd, dy, 16 * tile_of(s.N), 256, "Bs[kk][rr]", rb, -1);
        }
      }
      /* C: dx[img, z Cg + m, h, w], n = img H W + (h W + w); by phases dx[img, zg Cg + m, sh a + rh, sw b + rw],
       * n = img Hp Wp + a Wp + b (Hp, Wp: phase_rows, phase_cols), stored where that pixel is dx's (store_if) */
      if (dd.P) {
        int64_t Wp = phase_cols(&dd), HWp = phase_rows(&dd) * Wp;
        char zt[48] = "";
        if (a->groups > 1) snprintf(zt, sizeof zt, " + zg * %lld", LL(Cg * H * W));
        buf_printf(&lo, "n / %lld * %lld%s + m * %lld + (n %% %lld / %lld * %d + rh) * %lld + n %% %lld * %d + rw",
                   LL(HWp), LL(C * H * W), zt, LL(H * W), LL(HWp), LL(Wp), sh, LL(W), LL(Wp), sw);
        size_t l = 0;
        if (H % sh)
          l += (size_t)snprintf(s.store_if + l, sizeof s.store_if - l, "n %% %lld / %lld * %d + rh < %lld", LL(HWp), LL(Wp),
                                sh, LL(H));
        if (W % sw)
          snprintf(s.store_if + l, sizeof s.store_if - l, "%sn %% %lld * %d + rw < %lld", l ? " && " : "", LL(Wp), sw,
                   LL(W));
      } else {
        char di[64], dr[64];
        const char *e[] = {cg_digit(di, sizeof di, "n", H * W, 0), z, "m", cg_digit(dr, sizeof dr, "n", 1, H * W)};
        const int64_t k[] = {C * H * W, Cg * H * W, H * W, 1};
        for (int i = 0, t = 0; i < 4; i++) cg_term(&lo, &t, e[i], k[i]);
        s.out_pair = H * W % 2 == 0;   /* an even pixel's next one: in its image, at o + 1 */
        s.out_quad = H * W % 4 == 0;
      }
    } else {
      /* dweight[z Og + m, ci, kh, kw] = sum over k = (img, oh, ow) of dy[img, z Og + m, oh, ow]
       * x[img, z Cg + ci, oh sh - ph + kh dh, ow sw - pw + kw dw] */
      const Shape *xs = &n->in[1]->shape;
      int64_t C = xs->d[1], H = xs->d[2], W = xs->d[3], Cg = C / a->groups;
      const char *dy = kp_value(c, &p, n->in[0], 0, "dy"), *x = kp_value(c, &p, n->in[1], 0, "x");
      const char *qn[] = {"img", "oh", "ow"};
      const int64_t qr[] = {dys->d[0], OH, OW};
      s.a_kcontig = 1, s.b_kcontig = 1;   /* consecutive k: consecutive output pixels of one image */
      /* A: dy[img, z Og + m, p], k = img OH OW + p */
      {
        char di[64], dr[64];
        const char *e[] = {cg_digit(di, sizeof di, "k", OH * OW, 0), z, "m", cg_digit(dr, sizeof dr, "k", 1, OH * OW)};
        const int64_t k[] = {O * OH * OW, Og * OH * OW, OH * OW, 1};
        buf_puts(&la, "v = "), gather(&la, dy, 4, e, k), buf_puts(&la, ";");
        if (vec32_ok(n->in[0], OH * OW)) {   /* 4 pixels from a k that 4 divides: one image's, contiguous */
          Buf ad = {0};
          gather(&ad, dy, 4, e, k);
          snprintf(s.a_f4, sizeof s.a_f4, "&%s", ad.s);
          buf_free(&ad);
        }
      }
      /* B: the input under tap (kh, kw) of output (oh, ow), 0 in the padding; its column n is (ci, kh,
       * kw), or (kh, kw, ci) where the columns are tap-major (ir_wgrad_tap_cols) */
      int taps = ir_wgrad_tap_cols(n);
      digits(&lb, "k", 3, qn, qr, ke);
      tap_digits(&lb, "n", taps, "ci", Cg, KH, KW, ne);
      window_sum(x0, sizeof x0, ke[1], sh, -ph, ne[1], dh);
      window_sum(x1, sizeof x1, ke[2], sw, -pw, ne[2], dw);
      buf_printf(&lb, "int ih = %s, iw = %s; ", x0, x1);
      {
        const char *e[] = {ke[0], z, ne[0], "ih", "iw"};
        const int64_t k[] = {C * H * W, Cg * H * W, H * W, W, 1};
        buf_printf(&lb, "if (ih >= 0 && ih < %lld && iw >= 0 && iw < %lld) v = ", LL(H), LL(W));
        gather(&lb, x, 5, e, k), buf_puts(&lb, ";");
      }
      if (!ir_gemm_gemv(n)) {   /* the tiled kernels: the columns' state once, a k's once a K tile */
        WgradDims wd = {dys->d[0], C, H, W, Cg, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw};
        char ra[64], rb[64], dst[160], sb[96];
        spec_rv(c, &p, n, &s, ra, rb);
        if (ir_gemm_mma(n)) {
          MmaCfg g = mma_cfg(n);
          wgrad_tile(&s, &wd, x, g.BN, g.T, mma_dst(dst, sizeof dst, 'B', g.BN, "rr", mma_kind(n), 0, g.NJ),
                     mma_store_rv(sb, sizeof sb, n, rb), taps);
          s.rolled = taps && g.T >= 256;
        } else {
          /* the float4 tile (64 x 64) with its columns swizzled (b_swz), else a float a load */
          s.b_swz = tile_of(s.M) == 4 && tile_of(s.N) == 4;
          wgrad_tile(&s, &wd, x, 16 * tile_of(s.N), 256, s.b_swz ? "Bs[kk][rr ^ ((kk & 8) >> 2)]" : "Bs[kk][rr]", rb,
                     taps);
        }
      }
      /* C: dweight[z Og + m, ci, kh, kw]: its column n, or tap-major, ci = n % Cg and the tap n / Cg */
      {
        char ci[64] = "n", tp[64] = "";
        if (taps && KH * KW > 1) {
          snprintf(ci, sizeof ci, "n %% %lld * %lld", LL(Cg), LL(KH * KW));
          snprintf(tp, sizeof tp, "n / %lld", LL(Cg));
        }
        const char *e[] = {z, "m", ci, tp[0] ? tp : "0"};
        const int64_t k[] = {Og * s.N, s.N, 1, tp[0] ? 1 : 0};
        for (int i = 0, t = 0; i < 4; i++) cg_term(&lo, &t, e[i], k[i]);
        s.out_pair = !tp[0] && s.N % 2 == 0;   /* (tap-major columns lie KH KW apart) */
        s.out_quad = !tp[0] && s.N % 4 == 0;
      }
    }
  }
  snprintf(s.a_load, sizeof s.a_load, "%s", la.s);
  snprintf(s.b_load, sizeof s.b_load, "%s", lb.s);
  snprintf(s.out_idx, sizeof s.out_idx, "%s", lo.s ? lo.s : "0");
  buf_free(&la);
  buf_free(&lb);
  buf_free(&lo);
  return gemm_kernel(c, gr, &p, &s);
}
