/* codegen.c — the driver of code generation: which nodes inference needs,
 * which buffer holds each value, the groups, one emitter per group's main op,
 * and the layout of MODEL.cu (codegen/GENERATED.md).
 *
 * Buffers: parameters first (contiguous, in graph order, so that a later
 * "all parameters in one kernel" optimizer sees one range), then constants,
 * inputs, activations and the im2col workspace, 256-byte aligned; then
 * plan_memory() lets activations whose lifetimes do not meet share bytes.  Nodes that compute
 * nothing (flatten/reshape, dropout at inference) alias their input's buffer. */
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
    int label = (n->op == OP_CROSS_ENTROPY || n->op == OP_NLL_LOSS) && i == 1;
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

static int add_buf(Cg *c, int kind, Value *v, size_t bytes) {
  int i = c->nbufs++;
  c->bufs = xrealloc(c->bufs, sizeof(CgBuf) * (size_t)c->nbufs);
  size_t off = 0;
  if (i) off = (c->bufs[i - 1].offset + c->bufs[i - 1].bytes + 255) / 256 * 256;
  c->bufs[i].kind = kind;
  c->bufs[i].v = v;
  c->bufs[i].offset = off;
  c->bufs[i].bytes = bytes ? bytes : 4;
  if (v) c->vbuf[v->id] = i;
  return i;
}

static size_t vbytes(const Value *v) { return (size_t)shape_numel(&v->shape) * (size_t)dtype_size(v->dtype); }

/* The EMIT column of ops.def: one emitter per op that can lead a kernel group
 * (an op naming an emitter that is not written does not compile). */
typedef int Emitter(Cg *c, const KGroup *gr);
static Emitter *const emitters[OP__COUNT] = {
#define OP(name, str, flags, mn, mx, args, shape, emit, cost, expr) emit_##emit,
#include "ops.def"
#undef OP
};

static int emit_group(Cg *c, const KGroup *gr) {
  if (gr->npro) ncc_die("prologue chains are not emitted yet");
  c->group = gr;
  int rc = emitters[gr->main->op](c, gr);
  c->group = NULL;
  return rc;
}

typedef struct Prepared {
  Cg c;
  GroupList gl;
  unsigned char *live;
  Buf kernels;
} Prepared;

static void prepared_free(Prepared *p) {
  group_free(&p->gl);
  free(p->live);
  free(p->c.vbuf);
  free(p->c.bufs);
  for (int i = 0; i < p->c.nk; i++) {
    free(p->c.k[i].name);
    free(p->c.k[i].text);
    free(p->c.k[i].args);
  }
  free(p->c.k);
  buf_free(&p->c.run);
  buf_free(&p->kernels);
}

static void kernels_section(Prepared *p) {
  Cg *c = &p->c;
  Buf *b = &p->kernels;
  /* the section itself does not include ncc_kernel.h: NVRTC gets that from the
   * jit backend's prelude (GENERATED.md), MODEL.cu from the line before it */
  buf_printf(b, "%s\n", D_KERNELS_BEGIN);
  for (int i = 0; i < c->nk; i++) {
    buf_printf(b, "\n/* %s%s */\n", c->k[i].name, c->k[i].flags & NCC_KF_BARRIER_ ? " (barriers)" : "");
    for (const char *s = c->k[i].text; *s; s++) {
      if (s[0] == '@' && strncmp(s, "@K@", 3) == 0) {
        buf_puts(b, c->k[i].name);
        s += 2;
      } else {
        buf_printf(b, "%c", *s);
      }
    }
  }
  buf_printf(b, "\n%s\n", D_KERNELS_END);
}

static void plan_memory(Cg *c, Graph *g, const GroupList *gl);

static int prepare(Graph *g, const CodegenOpts *o, Prepared *p) {
  memset(p, 0, sizeof *p);
  Cg *c = &p->c;
  c->g = g;
  c->o = o;
  c->model = g->model;
  c->work = -1;
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
  /* liveness: what the outputs need, walking back in topological order */
  p->live = calloc((size_t)g->nnodes + 1, 1);
  c->vbuf = malloc(sizeof(int) * (size_t)(g->next_value_id + 1));
  if (!p->live || !c->vbuf) ncc_die("out of memory");
  for (int i = 0; i <= g->next_value_id; i++) c->vbuf[i] = -1;
  for (int i = 0; i < g->noutputs; i++) p->live[g->outputs[i].v->def->id] = 1;
  for (int i = g->nnodes - 1; i >= 0; i--) {
    Node *n = g->nodes[i];
    NCC_ASSERT(n->id == i);
    if (!p->live[i] || n->dead) continue;
    for (int j = 0; j < n->nin; j++) p->live[n->in[j]->def->id] = 1;
  }
  int bad = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (p->live[i] && !n->dead && !(ncc_ops[n->op].flags & OPF_SOURCE) && !node_is_alias(n)) bad |= check_node(c, n);
  }
  if (bad) return -1;
  /* buffers */
  for (int i = 0; i < g->nnodes; i++)
    if (!g->nodes[i]->dead && g->nodes[i]->op == OP_PARAM) add_buf(c, BK_PARAM, g->nodes[i]->out, vbytes(g->nodes[i]->out));
  for (int k = 0; k < 3; k++) {
    int want = k == 0 ? OP_CONST : k == 1 ? OP_INPUT : -1;
    for (int i = 0; i < g->nnodes; i++) {
      Node *n = g->nodes[i];
      if (n->dead || !p->live[i] || n->op == OP_PARAM) continue;
      if (want >= 0 ? (int)n->op != want : (n->op == OP_CONST || n->op == OP_INPUT)) continue;
      if (node_is_alias(n)) c->vbuf[n->out->id] = cg_buf_of(c, n->in[0]);
      else add_buf(c, k == 0 ? BK_CONST : k == 1 ? BK_INPUT : BK_ACT, n->out, vbytes(n->out));
    }
  }
  p->gl = group_form(g, p->live);
  if (o->fuse || g->fuse_epilogues) group_fuse_epilogues(g, &p->gl, p->live);
  for (int i = 0; i < p->gl.n; i++) {
    size_t w = gemm_workspace_bytes(c, p->gl.g[i].main);
    if (w > c->work_bytes) c->work_bytes = w;
  }
  if (c->work_bytes) c->work = add_buf(c, BK_WORK, NULL, c->work_bytes);
  for (int i = 0; i < p->gl.n; i++)
    if (emit_group(c, &p->gl.g[i]) != 0) return -1;
  if (c->err) return -1;
  plan_memory(c, g, &p->gl);
  kernels_section(p);
  return 0;
}

/* Memory planning (ARCHITECTURE.md, decision 5): activations whose
 * lifetimes do not meet share bytes.  A buffer lives from the first group that
 * touches it to the last one (graph outputs to the end); lifetimes are
 * inclusive, so a group's output never shares bytes with one of its inputs.
 * Values a fused group keeps in registers are never touched and take no room
 * of their own.  Placement is first fit in order of first use, 256-byte
 * aligned, after the parameters, constants, inputs and workspace, which keep
 * their own ranges (they outlive every launch).  In checked mode the runtime
 * maps every buffer apart anyway, so an overlap bug shows as a wrong result
 * in the unchecked tests, not as a silent pass. */
static int in_group(const KGroup *gr, const Node *n) {
  if (gr->main == n) return 1;
  for (int j = 0; j < gr->nepi; j++)
    if (gr->epi[j] == n) return 1;
  return 0;
}

static void touch(int *first, int *last, int b, int k) {
  if (k < first[b]) first[b] = k;
  if (k > last[b]) last[b] = k;
}

static void plan_memory(Cg *c, Graph *g, const GroupList *gl) {
  int nb = c->nbufs, ng = gl->n;
  int *first = xmalloc(sizeof(int) * (size_t)(nb + 1)), *last = xmalloc(sizeof(int) * (size_t)(nb + 1));
  int *order = xmalloc(sizeof(int) * (size_t)(nb + 1)), *placed = xmalloc(sizeof(int) * (size_t)(nb + 1));
  for (int b = 0; b < nb; b++) first[b] = ng + 1, last[b] = -1;
  for (int k = 0; k < ng; k++) {
    const KGroup *gr = &gl->g[k];
    for (int j = -1; j < gr->nepi; j++) {
      const Node *n = j < 0 ? gr->main : gr->epi[j];
      for (int i = 0; i < n->nin; i++)
        if (!in_group(gr, n->in[i]->def)) touch(first, last, cg_buf_of(c, n->in[i]), k);
    }
    touch(first, last, cg_buf_of(c, group_out(gr)), k);
  }
  for (int i = 0; i < g->noutputs; i++)
    if (ir_value_live(g, g->outputs[i].v)) touch(first, last, cg_buf_of(c, g->outputs[i].v), ng);
  size_t base = 0;
  int n = 0;
  for (int b = 0; b < nb; b++) {
    if (c->bufs[b].kind != BK_ACT) {
      size_t end = (c->bufs[b].offset + c->bufs[b].bytes + 255) / 256 * 256;
      if (end > base) base = end;
    } else if (last[b] >= 0) {
      order[n++] = b;
    }
  }
  /* order by first use (insertion sort: buffers are created in graph order,
   * so this is nearly sorted already) */
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && first[order[j]] < first[order[j - 1]]; j--) {
      int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
    }
  int np = 0;
  for (int i = 0; i < n; i++) {
    int b = order[i];
    size_t off = base, sz = (c->bufs[b].bytes + 255) / 256 * 256;
    for (int again = 1; again;) {   /* lowest offset that meets no live placed buffer */
      again = 0;
      for (int j = 0; j < np; j++) {
        int q = placed[j];
        if (first[q] > last[b] || last[q] < first[b]) continue;          /* lifetimes apart */
        size_t qo = c->bufs[q].offset, qe = qo + (c->bufs[q].bytes + 255) / 256 * 256;
        if (off < qe && qo < off + sz) { off = qe; again = 1; }
      }
    }
    c->bufs[b].offset = off;
    placed[np++] = b;
  }
  for (int b = 0; b < nb; b++)   /* never touched: at the base, where it harms nothing */
    if (c->bufs[b].kind == BK_ACT && last[b] < 0) c->bufs[b].offset = base;
  free(first); free(last); free(order); free(placed);
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
             " * as C11 on the CPU emulation of libnccrt (codegen/GENERATED.md). */\n",
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

int codegen_emit_kernels(Graph *g, const CodegenOpts *o, FILE *f) {
  Prepared p;
  int rc = prepare(g, o, &p);
  if (rc == 0) fputs(p.kernels.s, f);
  prepared_free(&p);
  return rc;
}
