/* codegen.c — the driver of code generation: which buffer holds each value,
 * one emitter per kernel group's main op, and the layout of MODEL.cu
 * (docs/generated-code.md).  What to compute (ir_needed), the kernel groups
 * (fuse pass) and where values live (plan pass) are decisions on the IR; this
 * file renders them.
 *
 * Buffers, 256-byte aligned: parameters first (contiguous, in graph order, so
 * that a later "all parameters in one kernel" optimizer sees one range), then
 * constants, load-time values, the region of inputs and activations, and the
 * im2col workspace.  Inside the region every value sits at the offset the
 * plan gave it (Value.offset; values whose lifetimes do not meet share
 * bytes); without a plan (-O0) each has its own range, in graph order.  Views
 * (flatten/reshape, dropout at inference) alias what they view.
 *
 * Load-time groups (the fold pass's Node.load_time: a folded batchnorm's
 * weights, bias, scale and shift) are launched by <model>_prepare() (host.c),
 * which runs after create and after every load, not per inference; their
 * kernels go to the load-time part of the kernels section. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"

void host_header(Cg *c, FILE *h);
void host_source(Cg *c, FILE *f, const char *kernels);

static int valid_ident(const char *s) {
  if (!s || !*s || !((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_')) return 0;
  for (; *s; s++)
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')) return 0;
  return 1;
}

/* Names that CUDA's C++ headers already declare at global scope: a model
 * called so would not compile with nvcc (`typedef struct norm norm;`). */
static const char *const cuda_taken[] = {
  "abs", "acos", "asin", "atan", "atan2", "cbrt", "ceil", "clock", "copysign", "cos", "cosh", "dim3", "div",
  "erf", "erfc", "exp", "exp2", "expm1", "fabs", "fdim", "floor", "fma", "fmax", "fmin", "fmod", "free",
  "frexp", "hypot", "ilogb", "isinf", "isnan", "ldexp", "lgamma", "llabs", "log", "log10", "log1p", "log2",
  "logb", "malloc", "max", "min", "modf", "nan", "norm", "normcdf", "pow", "printf", "rcbrt", "remainder",
  "rint", "rnorm", "round", "rsqrt", "signbit", "sin", "sinh", "sqrt", "tan", "tanh", "tgamma", "trunc",
  "main", "exit", "memcpy", "memset", "assert", NULL};

static Loc noloc(void) {
  Loc l = {NULL, 0, 0};
  return l;
}

/* Can this node's main op be emitted, for these dtypes?  (f32 only until the
 * precision pass lands; labels of the classification losses are i32.) */
static int check_node(Cg *c, Node *n) {
  char sb[128];
  for (int i = 0; i < n->nin; i++) {
    Value *v = n->in[i];
    int label = ((n->op == OP_CROSS_ENTROPY || n->op == OP_NLL_LOSS) && i == 1) ||
                ((n->op == OP_CROSS_ENTROPY_BWD || n->op == OP_NLL_LOSS_BWD) && i == 2);
    if (v->dtype != (label ? DT_I32 : DT_F32)) {
      diag_error(n->loc, "codegen: %s on %s is not supported yet (only f32 tensors%s)", ncc_ops[n->op].name,
                 shape_str(sb, sizeof sb, v->dtype, &v->shape), label ? "; labels i32" : "");
      return -1;
    }
  }
  for (int i = 0; i <= n->nin; i++) {
    Value *v = i < n->nin ? n->in[i] : n->out;
    if (shape_numel(&v->shape) > 2147483647LL) {
      diag_error(n->loc, "codegen: %s has more than 2^31 elements; kernels index with 32-bit integers",
                 shape_str(sb, sizeof sb, v->dtype, &v->shape));
      return -1;
    }
  }
  return 0;
}

static size_t end_of_bufs(const Cg *c) {
  size_t e = 0;
  for (int i = 0; i < c->nbufs; i++)
    if (c->bufs[i].offset + c->bufs[i].bytes > e) e = c->bufs[i].offset + c->bufs[i].bytes;
  return (e + 255) / 256 * 256;
}

static int add_buf(Cg *c, int kind, Value *v, size_t bytes) {
  size_t off = end_of_bufs(c);   /* past every buffer so far: a range (add_span) may end before its last member */
  int i = c->nbufs++;
  c->bufs = xrealloc(c->bufs, sizeof(CgBuf) * (size_t)c->nbufs);
  c->bufs[i].kind = kind;
  c->bufs[i].v = v;
  c->bufs[i].offset = off;
  c->bufs[i].bytes = bytes ? bytes : 4;
  c->bufs[i].label = NULL;
  c->bufs[i].train = 0;
  c->bufs[i].span = -1;
  if (v) c->vbuf[v->id] = i;
  return i;
}

static int add_buf_at(Cg *c, int kind, Value *v, size_t bytes, size_t off) {
  int i = add_buf(c, kind, v, bytes);
  c->bufs[i].offset = off;
  return i;
}

static size_t vbytes(const Value *v) { return (size_t)ir_value_bytes(v); }

/* The EMIT column of ops.def: one emitter per op that can lead a kernel group
 * (an op naming an emitter that is not written does not compile). */
typedef int Emitter(Cg *c, const KGroup *gr);
static Emitter *const emitters[OP__COUNT] = {
#define OP(name, str, flags, mn, mx, args, shape, emit, cost, expr, grad) emit_##emit,
#include "ops.def"
#undef OP
};

static int emit_group(Cg *c, const KGroup *gr) {
  /* a prologue: the pooling the tiled GEMM of a conv2d or linear computes as it loads */
  if (gr->npro && (gr->npro != 1 || c->o->use_cublas || !ir_prologue_ok(gr->pro[0], gr->main)))
    ncc_die("a %s kernel with a prologue the tiled GEMM cannot compute%s", ncc_ops[gr->main->op].name,
            c->o->use_cublas ? " (the fuse pass planned for the tiled path, codegen was asked for cuBLAS)" : "");
  /* the emitters that write side values (ir_side_ok's main nodes) */
  if (gr->nside && gr->main->op != OP_BN_STATS && gr->main->op != OP_BN_BWD_DATA)
    ncc_die("a %s kernel has side nodes, which its emitter does not write", ncc_ops[gr->main->op].name);
  c->group = gr;
  int rc = emitters[gr->main->op](c, gr);
  c->group = NULL;
  return rc;
}

typedef struct Prepared {
  Cg c;
  GroupList gl, glt;
  Liveness lv, lvt;
  Buf kernels;
} Prepared;

static void prepared_free(Prepared *p) {
  group_free(&p->gl);
  group_free(&p->glt);
  ir_liveness_free(&p->lv);
  ir_liveness_free(&p->lvt);
  free(p->c.vbuf_i);
  free(p->c.vbuf_t);
  free(p->c.q8inv);
  free(p->c.bufs);
  for (int i = 0; i < p->c.nk; i++) {
    free(p->c.k[i].name);
    free(p->c.k[i].text);
    free(p->c.k[i].args);
  }
  free(p->c.k);
  free(p->c.launches.l);
  buf_free(&p->c.run);
  buf_free(&p->c.prep);
  buf_free(&p->c.trun);
  buf_free(&p->kernels);
}

static void kernel_text(Buf *b, const CgKernel *k) {
  buf_printf(b, "\n/* %s%s */\n", k->name, k->flags & NCC_KF_BARRIER_ ? " (barriers)" : "");
  for (const char *s = k->text; *s; s++) {
    if (s[0] == '@' && strncmp(s, "@K@", 3) == 0) {
      buf_puts(b, k->name);
      s += 2;
    } else {
      buf_printf(b, "%c", *s);
    }
  }
}

static void kernels_section(Prepared *p) {
  Cg *c = &p->c;
  Buf *b = &p->kernels;
  /* the section itself does not include ncc_kernel.h: NVRTC gets that from the
   * jit backend's prelude (docs/generated-code.md), MODEL.cu from the line before it */
  buf_printf(b, "%s\n", D_KERNELS_BEGIN);
  int nlt = 0;
  for (int i = 0; i < c->nk; i++)
    if (!c->k[i].load_time) kernel_text(b, &c->k[i]);
    else nlt++;
  /* the load-time kernels after the inference ones, under their own banner */
  if (nlt) buf_printf(b, "\n%s\n", D_LOAD_TIME_BEGIN);
  for (int i = 0; i < c->nk; i++)
    if (c->k[i].load_time) kernel_text(b, &c->k[i]);
  buf_printf(b, "\n%s\n", D_KERNELS_END);
}

static int *new_vbuf(const Graph *g) {
  int *vb = malloc(sizeof(int) * (size_t)(g->next_value_id + 1));
  if (!vb) ncc_die("out of memory");
  for (int i = 0; i <= g->next_value_id; i++) vb[i] = -1;
  return vb;
}

/* Trainable: what the optimizer updates (not the running statistics). */
static int trainable(const Node *n) {
  return n->op == OP_PARAM && n->param_kind != PK_RUNNING_MEAN && n->param_kind != PK_RUNNING_VAR;
}

/* Workspace bytes the group of main node n needs: a GEMM's (split-K's
 * partial sums, the cuBLAS path's im2col columns), a split reduction's
 * range sums (ir_reduce_split), a split batchnorm kernel's two figures a
 * range and channel (ir_bn_split), layernorm_bwd_weight's rows' statistics */
static size_t work_bytes(const Cg *c, const Node *n) {
  if (n->op == OP_LAYERNORM_BWD_WEIGHT)   /* the range sums of a split, then the rows' (mean, rstd) */
    return (size_t)(ir_ln_stats_offset(n) + 2 * ir_ln_rows(n)) * 4;
  if (ir_reduce_split(n) > 1) return (size_t)ir_reduce_split(n) * (size_t)shape_numel(&n->out->shape) * 4;
  if (ir_bn_split(n) > 1) return (size_t)ir_bn_split(n) * (size_t)n->in[n->op == OP_BN_BWD_DATA]->shape.d[1] * 8;
  return gemm_workspace_bytes(c, n);
}

/* Constants, inputs and activations of one graph: the constants each in its
 * own bytes, the inputs and activations where the plan put them inside the
 * activation region starting at `base` (shared by inference and training,
 * which never run at once).  Returns the region's size. */
static size_t place_values(Cg *c, Graph *g, Liveness *lv, int train, size_t base) {
  size_t run = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Value *v = g->nodes[i]->out;
    int kind = lv->kind[v->id];
    if (kind != LV_INPUT && kind != LV_ACT) continue;
    size_t off = run;
    if (g->planned) {
      NCC_ASSERT(v->region == MEM_ACT && v->offset >= 0);
      off = (size_t)v->offset;
    }
    run += (size_t)ir_slot_bytes(v);
    int b = add_buf_at(c, kind == LV_INPUT ? BK_INPUT : BK_ACT, v, vbytes(v), base + off);
    c->bufs[b].train = train;
  }
  return g->planned ? (size_t)g->act_bytes : run;
}

static void alias_views(Cg *c, Graph *g, Liveness *lv) {
  for (int i = 0; i < g->nnodes; i++)
    /* a view of a value kept inside a kernel (a prologue's) has no bytes either */
    if (lv->kind[g->nodes[i]->out->id] == LV_VIEW && lv->kind[lv->root[g->nodes[i]->out->id]->id] != LV_NONE)
      c->vbuf[g->nodes[i]->out->id] = cg_buf_of(c, lv->root[g->nodes[i]->out->id]);
}

static int add_span(Cg *c, int kind, const char *label, size_t bytes, size_t off) {
  int b = add_buf_at(c, kind, NULL, bytes, off);
  c->bufs[b].label = label;
  return b;
}

/* train_only (cg_launch_geometry of a training graph): g is o->train too, and
 * only its training step is emitted */
static int prepare_x(Graph *g, const CodegenOpts *o, Prepared *p, int train_only);
static int prepare(Graph *g, const CodegenOpts *o, Prepared *p) { return prepare_x(g, o, p, 0); }

static int prepare_x(Graph *g, const CodegenOpts *o, Prepared *p, int train_only) {
  memset(p, 0, sizeof *p);
  Cg *c = &p->c;
  Graph *gt = o->train;
  c->g = c->gi = g;
  c->gt = gt;
  c->step_rows = gt ? cg_train_batch(g, gt) : 0;
  c->o = o;
  c->model = g->model;
  c->work = -1;
  c->work_side = -1;
  for (int i = 0; i < 4; i++) c->opt_buf[i] = -1;
  c->scale_buf = c->found_buf = -1;
  if (!valid_ident(g->model)) {
    diag_error(noloc(), "codegen: the model name '%s' is not a C identifier", g->model ? g->model : "");
    return -1;
  }
  for (int i = 0; cuda_taken[i]; i++)
    if (strcmp(g->model, cuda_taken[i]) == 0) {
      diag_error(noloc(), "codegen: a model named '%s' clashes with the CUDA/C library function of that name "
                 "in the generated code; rename the model (e.g. '%s_net')", g->model, g->model);
      return -1;
    }
  if (g->noutputs < 1) {
    diag_error(noloc(), "model %s declares no output (`output NAME`): there is nothing to compute", g->model);
    return -1;
  }
  if (gt && (!gt->train.present || !gt->train.minimize || !ir_value_live(gt, gt->train.minimize))) {
    diag_error(noloc(), "codegen: the training graph of %s has no loss to minimise", g->model);
    return -1;
  }
  /* what to compute and where values live: ir_liveness reads the IR's decisions */
  Liveness *lv = &p->lv, *lvt = &p->lvt;
  ir_liveness(g, g->training, lv);
  if (gt) ir_liveness(gt, 1, lvt);
  c->vbuf = c->vbuf_i = new_vbuf(g);
  if (gt) c->vbuf_t = new_vbuf(gt);
  int bad = 0;
  for (int i = 0; i < g->nnodes; i++)
    if (ir_computes(g->nodes[i], lv->need)) bad |= check_node(c, g->nodes[i]);
  for (int i = 0; gt && i < gt->nnodes; i++)
    if (ir_computes(gt->nodes[i], lvt->need)) bad |= check_node(c, gt->nodes[i]);
  if (bad) return -1;
  /* parameters: with a training step, the trainable ones first and contiguous
   * (the optimizer updates them as one range), then the running statistics;
   * both graphs' PARAM values of one name share the buffer */
  if (!gt) {
    for (int i = 0; i < g->nnodes; i++)
      if (!g->nodes[i]->dead && g->nodes[i]->op == OP_PARAM) add_buf(c, BK_PARAM, g->nodes[i]->out, vbytes(g->nodes[i]->out));
  } else {
    int first = -1, last = -1;
    c->vbuf = c->vbuf_t;   /* add_buf records the training graph's values */
    for (int pass = 0; pass < 2; pass++)
      for (int i = 0; i < gt->nnodes; i++) {
        Node *n = gt->nodes[i];
        if (n->dead || n->op != OP_PARAM || trainable(n) != !pass) continue;
        int b = add_buf(c, BK_PARAM, n->out, vbytes(n->out));
        c->vbuf_t[n->out->id] = b;
        if (!pass) { if (first < 0) first = b; last = b; }
        Node *pi = ir_find_param(g, n->name);
        if (pi) c->vbuf_i[pi->out->id] = b;
      }
    c->vbuf = c->vbuf_i;
    for (int i = 0; i < g->nnodes; i++)   /* a parameter only inference reads (none, normally) */
      if (!g->nodes[i]->dead && g->nodes[i]->op == OP_PARAM && c->vbuf_i[g->nodes[i]->out->id] < 0)
        add_buf(c, BK_PARAM, g->nodes[i]->out, vbytes(g->nodes[i]->out));
    if (first >= 0) {
      /* a whole number of 256 bytes, as every buffer starts: the emulator's checked mode ends a
       * buffer at its guard page, and so a parameter in the range keeps the alignment a GPU gives
       * it (a 128-bit load of a float32 weight's rows, vec32_fetch) */
      size_t p0 = c->bufs[first].offset, span = (c->bufs[last].offset + c->bufs[last].bytes - p0 + 255) / 256 * 256;
      c->opt_count = (int64_t)(span / 4);
      c->opt_buf[0] = add_span(c, BK_SPAN, "trainable_params", span, p0);
      for (int b = first; b <= last; b++) c->bufs[b].span = c->opt_buf[0];
    }
  }
  for (int i = 0; i < g->nnodes; i++)
    if (lv->need[i] && g->nodes[i]->op == OP_CONST) add_buf(c, BK_CONST, g->nodes[i]->out, vbytes(g->nodes[i]->out));
  for (int i = 0; gt && i < gt->nnodes; i++)
    if (lvt->need[i] && (gt->nodes[i]->op == OP_CONST || gt->nodes[i]->op == OP_LOSS_SCALE)) {
      c->vbuf = c->vbuf_t;
      int b = add_buf(c, BK_CONST, gt->nodes[i]->out, vbytes(gt->nodes[i]->out));
      c->vbuf = c->vbuf_i;
      c->bufs[b].train = 1;
      if (gt->nodes[i]->op == OP_LOSS_SCALE) c->scale_buf = b;
    }
  if (gt && gt->train.loss_scaling) {
    NCC_ASSERT(c->scale_buf >= 0);
    c->found_buf = add_span(c, BK_WORK, "found_inf", 4, end_of_bufs(c));
  }
  /* load-time values (inference only: the fold pass does not run on training graphs) */
  {
    size_t base = end_of_bufs(c), run = 0;
    for (int i = 0; i < g->nnodes; i++) {
      Value *v = g->nodes[i]->out;
      if (lv->kind[v->id] != LV_LOAD) continue;
      size_t off = run;
      if (g->planned) {
        NCC_ASSERT(v->region == MEM_LOAD && v->offset >= 0);
        off = (size_t)v->offset;
      }
      run += (size_t)ir_slot_bytes(v);
      add_buf_at(c, BK_LOAD, v, vbytes(v), base + off);
    }
  }
  /* the activation region, shared */
  c->act_base = end_of_bufs(c);
  c->act_bytes = place_values(c, g, lv, 0, c->act_base);
  if (gt) {
    c->vbuf = c->vbuf_t;
    size_t tb = place_values(c, gt, lvt, 1, c->act_base);
    if (tb > c->act_bytes) c->act_bytes = tb;
    c->vbuf = c->vbuf_i;
  }
  alias_views(c, g, lv);
  p->gl = group_form(g, lv->need);
  if (gt) {
    c->vbuf = c->vbuf_t;
    alias_views(c, gt, lvt);
    c->vbuf = c->vbuf_i;
    p->glt = group_form(gt, lvt->need);
  }
  /* the side stream's groups (the streams pass) get a workspace of their own:
   * a kernel there runs while stream 0's run */
  size_t side_bytes = 0;
  for (int i = 0; i < p->gl.n; i++) {
    size_t w = work_bytes(c, p->gl.g[i].main);
    size_t *to = p->gl.g[i].main->stream ? &side_bytes : &c->work_bytes;
    if (w > *to) *to = w;
  }
  for (int i = 0; i < p->glt.n; i++) {
    c->g = gt, c->vbuf = c->vbuf_t;
    size_t w = work_bytes(c, p->glt.g[i].main);
    size_t *to = p->glt.g[i].main->stream ? &side_bytes : &c->work_bytes;
    if (w > *to) *to = w;
    c->g = g, c->vbuf = c->vbuf_i;
  }
  size_t after = (c->act_base + c->act_bytes + 255) / 256 * 256;
  if (c->work_bytes) {
    c->work = add_buf_at(c, BK_WORK, NULL, c->work_bytes, after);
    after = (after + c->work_bytes + 255) / 256 * 256;
  }
  if (side_bytes) {
    c->work_side = add_span(c, BK_WORK, "side_workspace", side_bytes, after);
    after = (after + side_bytes + 255) / 256 * 256;
    c->work_bytes += side_bytes;   /* the report's workspace: both */
  }
  /* training: the gradients (each where its parameter sits in the trainable
   * range) and the optimizer state, laid out like the trainable range */
  if (gt && c->opt_buf[0] >= 0) {
    size_t p0 = c->bufs[c->opt_buf[0]].offset, span = c->bufs[c->opt_buf[0]].bytes;
    size_t g0 = after;
    c->opt_buf[1] = add_span(c, BK_SPAN, "grads", span, g0);
    for (int i = 0; i < gt->nnodes; i++) {
      Value *v = gt->nodes[i]->out;
      if (lvt->kind[v->id] != LV_GRAD) continue;
      int pb = c->vbuf_t[v->grad_of->id];
      NCC_ASSERT(pb >= 0 && c->bufs[pb].offset >= p0);
      c->vbuf = c->vbuf_t;
      int b = add_buf_at(c, BK_GRAD, v, vbytes(v), g0 + (c->bufs[pb].offset - p0));
      c->vbuf = c->vbuf_i;
      c->bufs[b].train = 1;
      c->bufs[b].span = c->opt_buf[1];
    }
    size_t s0 = (g0 + span + 255) / 256 * 256;
    const TrainCfg *t = &gt->train;
    int nstate = ir_opt_states(t);
    static const char *const sgd_names[1] = {"momentum_buffer"}, *const adam_names[2] = {"exp_avg", "exp_avg_sq"};
    for (int k = 0; k < nstate; k++) {
      c->opt_buf[2 + k] = add_span(c, BK_SPAN, t->opt == OPT_SGD ? sgd_names[k] : adam_names[k], span, s0);
      s0 = (s0 + span + 255) / 256 * 256;
    }
  }
  /* inference groups launch from <model>_run (c->run); load-time groups from
   * <model>_prepare (c->prep), their kernels marked as load-time; the training
   * step's from <model>_train_run (c->trun) */
  for (int lt = 0; lt < 2 && !c->err && !train_only; lt++) {
    Buf run = c->run;
    if (lt) { memset(&c->run, 0, sizeof c->run); c->load_time = 1; }
    if (cg_emit_streams(c, &p->gl, lt, emit_group) != 0) c->err = 1;
    if (lt) { c->load_time = 0; c->prep = c->run; c->run = run; }
  }
  if (gt && !c->err) {
    Buf run = c->run;
    memset(&c->run, 0, sizeof c->run);
    c->g = gt, c->vbuf = c->vbuf_t, c->train = 1;
    if (cg_emit_streams(c, &p->glt, 0, emit_group) != 0) c->err = 1;
    c->g = g, c->vbuf = c->vbuf_i, c->train = 0;
    c->trun = c->run;
    c->run = run;
  }
  if (c->err) return -1;
  kernels_section(p);
  return 0;
}

static void banner(FILE *f, Graph *g, const CodegenOpts *o) {
  fprintf(f, "/* %s — generated by ncc %s from model %s; do not edit.\n", o->jit ? "host C (--jit)" : "CUDA C",
          "0.1.0", g->model);
  if (o->command) {
    fputs(" * command: ", f);
    for (const char *s = o->command; *s; s++) {
      if (s[0] == '*' && s[1] == '/') fputs("* /", f);   /* keep the comment closed only by us */
      else if (*s == '\n') fputc(' ', f);
      else fputc(*s, f);
      if (s[0] == '*' && s[1] == '/') s++;
    }
    fputs("\n", f);
  }
  fprintf(f, " * GEMMs and convolutions: %s. Kernels compile as CUDA (nvcc, NVRTC) and, with -DNCC_EMU,\n"
             " * as C11 on the CPU emulation of libnccrt (docs/generated-code.md). */\n",
          o->use_cublas ? "cuBLAS (CPU BLAS under emulation)" : "shared-memory tiled kernels");
}

int codegen_emit(Graph *g, const CodegenOpts *o, FILE *src, FILE *hdr) {
  Prepared p;
  int rc = prepare(g, o, &p);
  if (rc == 0) {
    banner(src, g, o);
    host_source(&p.c, src, p.kernels.s);
    host_header(&p.c, hdr);
  }
  prepared_free(&p);
  return rc;
}

int codegen_memory(Graph *g, const CodegenOpts *o, CodegenMemory *m) {
  Prepared p;
  int rc = prepare(g, o, &p);
  memset(m, 0, sizeof *m);
  if (rc == 0) {
    for (int i = 0; i < p.c.nbufs; i++)
      if (p.c.bufs[i].offset + p.c.bufs[i].bytes > m->arena) m->arena = p.c.bufs[i].offset + p.c.bufs[i].bytes;
    m->activations = p.c.act_bytes;
    m->workspace = p.c.work_bytes;
    m->weights = m->arena - m->activations - m->workspace;
  }
  prepared_free(&p);
  return rc;
}

static int launch_geometry(Graph *g, Graph *gt, const CodegenOpts *o, int train_only, CgLaunchList *out) {
  CodegenOpts co = o ? *o : (CodegenOpts){0};
  memset(out, 0, sizeof *out);
  co.train = gt;
  co.frozen = NULL, co.frozen_len = 0;   /* the geometry does not depend on them */
  int quiet = diag_set_quiet(1);
  Prepared p;
  int rc = prepare_x(g, &co, &p, train_only);
  diag_set_quiet(quiet);
  if (rc == 0) {   /* the records, for the caller to keep, with copies of their kernel names (p owns those) */
    *out = p.c.launches;
    memset(&p.c.launches, 0, sizeof p.c.launches);
    for (int i = 0; i < out->n; i++) out->l[i].kernel = out->l[i].kernel ? xstrdup(out->l[i].kernel) : NULL;
  }
  prepared_free(&p);
  return rc;
}

int cg_launch_geometry(Graph *g, const CodegenOpts *o, int train, CgLaunchList *out) {
  return launch_geometry(g, train ? g : NULL, o, train, out);
}

int cg_launch_geometry_file(Graph *g, Graph *gt, const CodegenOpts *o, CgLaunchList *out) {
  return launch_geometry(g, gt, o, 0, out);
}

void cg_launches_free(CgLaunchList *l) {
  for (int i = 0; i < l->n; i++) free((char *)l->l[i].kernel);
  free(l->l);
  memset(l, 0, sizeof *l);
}

int codegen_emit_kernels(Graph *g, const CodegenOpts *o, FILE *f) {
  Prepared p;
  int rc = prepare(g, o, &p);
  if (rc == 0) fputs(p.kernels.s, f);
  prepared_free(&p);
  return rc;
}
