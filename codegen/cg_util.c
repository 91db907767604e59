/* cg_util.c — the small machinery every emitter shares: text buffers, float
 * literals, kernel registration with dedupe, launch statements, kernel
 * parameters, broadcast index expressions and the block reduction. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"

void buf_printf(Buf *b, const char *fmt, ...) {
  va_list ap;
  /* formatted once into the room left when it fits (most calls), else
   * measured, grown and formatted again */
  if (b->cap - b->len < 256) {
    size_t cap = b->cap ? 2 * b->cap : 1024;
    b->s = xrealloc(b->s, cap);
    b->cap = cap;
  }
  va_start(ap, fmt);
  int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  NCC_ASSERT(n >= 0);
  if (b->len + (size_t)n + 1 <= b->cap) {
    b->len += (size_t)n;
    return;
  }
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (b->len + (size_t)n + 1 > cap) cap *= 2;
    b->s = xrealloc(b->s, cap);
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void buf_puts(Buf *b, const char *s) {
  size_t n = strlen(s);
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (b->len + n + 1 > cap) cap *= 2;
    b->s = xrealloc(b->s, cap);
    b->cap = cap;
  }
  memcpy(b->s + b->len, s, n + 1);
  b->len += n;
}

void buf_free(Buf *b) {
  free(b->s);
  b->s = NULL;
  b->len = b->cap = 0;
}

void cg_ind(Buf *b, int ind) {
  for (int i = 0; i < ind; i++) buf_puts(b, "  ");
}

/* %.9g round-trips a float; a literal needs a '.' or an exponent before the
 * 'f' suffix ("2f" is not C). */
const char *cg_flit(char out[40], double v) {
  float f = (float)v;
  char tmp[32];
  snprintf(tmp, sizeof tmp, "%.9g", (double)f);
  if (!strpbrk(tmp, ".eEn")) strcat(tmp, ".0");
  snprintf(out, 40, "%sf", tmp);
  return out;
}

static void args_list(const KParams *p, Buf *b) {
  for (int i = 0; i < p->n; i++) buf_printf(b, "%sNCC_ARG(%s, %d)", i ? ", " : "", p->ctype[i], i);
}

static uint64_t fnv1a(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

const char *cg_flags_name(int flags) {
  static const char *const nm[4] = {"0", "NCC_KF_BARRIER", "NCC_KF_WARP", "NCC_KF_BARRIER_WARP"};
  return nm[flags & 3];
}

/* ---- static shared memory, read back from a kernel's text ----------------
 * The emitters declare their shared arrays as `__shared__ TYPE name[A][B];`
 * (D_SHARED) with constant dimensions; the report's occupancy model needs
 * their bytes.  Dimensions are integer literals or + - * / ( ) of them;
 * `extern __shared__` (dynamic: the launch passes its bytes) counts nothing. */
static long long smem_expr(const char **s);
static long long smem_atom(const char **s) {
  while (**s == ' ') (*s)++;
  if (**s == '(') {
    (*s)++;
    long long v = smem_expr(s);
    while (**s == ' ') (*s)++;
    if (**s != ')') ncc_die("cg_kernel: a __shared__ array dimension that is not a constant expression: %.40s", *s);
    (*s)++;
    return v;
  }
  char *end;
  long long v = strtoll(*s, &end, 10);
  if (end == *s) ncc_die("cg_kernel: a __shared__ array dimension that is not an integer constant: %.40s", *s);
  *s = end;
  while (**s == 'u' || **s == 'U' || **s == 'l' || **s == 'L') (*s)++;
  return v;
}
static long long smem_term(const char **s) {
  long long v = smem_atom(s);
  for (;;) {
    while (**s == ' ') (*s)++;
    if (**s == '*') { (*s)++; v *= smem_atom(s); }
    else if (**s == '/') { (*s)++; long long d = smem_atom(s); NCC_ASSERT(d != 0); v /= d; }
    else return v;
  }
}
static long long smem_expr(const char **s) {
  long long v = smem_term(s);
  for (;;) {
    while (**s == ' ') (*s)++;
    if (**s == '+') { (*s)++; v += smem_term(s); }
    else if (**s == '-') { (*s)++; v -= smem_term(s); }
    else return v;
  }
}
/* Bytes of one element of the type words before a shared array's name. */
static size_t smem_elem(const char *type, size_t n) {
  static const struct { const char *w; size_t b; } sizes[] = {
    {"double4", 32}, {"float4", 16}, {"int4", 16}, {"uint4", 16}, {"double2", 16}, {"float2", 8}, {"int2", 8},
    {"double", 8}, {"long", 8}, {"__nv_bfloat162", 4}, {"__half2", 4}, {"half2", 4}, {"__nv_bfloat16", 2},
    {"__half", 2}, {"half", 2}, {"short", 2}, {"char", 1}, {"int8_t", 1}, {"uint8_t", 1}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t l = strlen(sizes[i].w);
    for (const char *q = type; q + l <= type + n; q++)
      if (!strncmp(q, sizes[i].w, l) && (q == type || q[-1] == ' ') && (q + l == type + n || q[l] == ' '))
        return sizes[i].b;
  }
  return 4;   /* float, int, unsigned */
}
static size_t smem_static(const char *text) {
  size_t total = 0;
  const size_t kw = strlen(D_SHARED);
  for (const char *s = strstr(text, D_SHARED); s; s = strstr(s, D_SHARED)) {
    int ext = s - text >= 7 && !strncmp(s - 7, "extern ", 7);
    s += kw;
    const char *semi = strchr(s, ';');
    if (ext || !semi) continue;
    /* the type: the words up to the last identifier before the first '[' , ',' or ';' */
    const char *stop = s + strcspn(s, "[,;");
    const char *name = stop;
    while (name > s && name[-1] == ' ') name--;
    while (name > s && name[-1] != ' ') name--;
    size_t elem = smem_elem(s, (size_t)(name - s));
    /* each declarator: name[A][B]..., separated by ',' */
    const char *q = stop;
    long long count = 1;
    for (;;) {
      if (*q == '[') {
        q++;
        count *= smem_expr(&q);
        while (*q == ' ') q++;
        if (*q != ']') ncc_die("cg_kernel: a __shared__ array dimension it cannot read: %.40s", q);
        q++;
        while (*q == ' ') q++;
      } else if (*q == ',') {
        total += elem * (size_t)count;
        count = 1;
        q++;
        q += strcspn(q, "[,;");
      } else {
        break;
      }
    }
    total += elem * (size_t)count;
    s = semi;
  }
  return total;
}

const char *cg_kernel(Cg *c, const char *op, int flags, const KParams *p, const char *text) {
  Buf args = {0};
  /* the emulator's flags follow from the text, so that they cannot disagree
   * with it (codegen.ptxas checks the barrier flag against ptxas again) */
  flags &= ~(NCC_KF_BARRIER_ | NCC_KF_WARP_);
  if (strstr(text, "__syncthreads()")) flags |= NCC_KF_BARRIER_;
  if (strstr(text, "__shfl_") || strstr(text, "__syncwarp(") || strstr(text, "__ballot_sync(") ||
      strstr(text, "__all_sync(") || strstr(text, "__any_sync(") || strstr(text, "__activemask(") ||
      strstr(text, "ncc_mma_") || strstr(text, "ncc_ldmatrix_"))
    flags |= NCC_KF_WARP_;
  args_list(p, &args);
  uint64_t h = fnv1a(fnv1a(14695981039346656037ULL, text), args.s ? args.s : "");
  for (int i = 0; i < c->nk; i++)
    if (c->k[i].hash == h && c->k[i].flags == flags && c->k[i].load_time == c->load_time &&
        strcmp(c->k[i].text, text) == 0 &&
        strcmp(c->k[i].args, args.s) == 0) {
      buf_free(&args);
      return c->k[i].name;
    }
  if (c->nk == c->capk) {
    c->capk = c->capk ? 2 * c->capk : 32;
    c->k = xrealloc(c->k, sizeof(CgKernel) * (size_t)c->capk);
  }
  CgKernel *k = &c->k[c->nk];
  char name[256];
  /* load-time kernels say so in their name: <model>_prep<i>_<op> */
  snprintf(name, sizeof name, "%s_%s%d_%s", c->model, c->load_time ? "prep" : "k", c->nk, op);
  k->name = xstrdup(name);
  k->text = xstrdup(text);
  k->args = args.s ? args.s : xstrdup("");
  k->flags = flags;
  k->hash = h;
  k->load_time = c->load_time;
  k->smem = smem_static(text);
  c->nk++;
  return k->name;
}

const CgBatch *cg_batch_grid(const Cg *c, const KGroup *gr, int axis, int64_t extent, int64_t tile, CgBatch *bg) {
  int64_t n = c->g->max_batch;
  if (c->train || c->load_time || c->g != c->gi || n <= 0 || !gr || group_out(gr)->batch != VB_ROWS ||
      extent % n != 0)
    return NULL;
  bg->axis = axis, bg->per = extent / n, bg->tile = tile;
  return bg;
}

int64_t cg_train_batch(const Graph *gi, const Graph *gt) {
  if (!gt || gi->max_batch <= 0) return 0;
  int64_t n = -1;
  for (int i = 0; i < gt->nnodes; i++) {
    const Node *nd = gt->nodes[i];
    if (nd->dead || nd->op != OP_INPUT) continue;
    if (nd->out->shape.rank < 1 || (n >= 0 && nd->out->shape.d[0] != n)) return 0;
    n = nd->out->shape.d[0];
  }
  /* every kernel that mixes rows must see the batch as its first axis, or
   * it could not count the step's rows alone (cg_step_rows) */
  for (int i = 0; n > 0 && i < gt->nnodes; i++) {
    const Node *nd = gt->nodes[i];
    int x = -1;
    switch (nd->op) {
    case OP_BN_STATS: case OP_CROSS_ENTROPY: case OP_NLL_LOSS: case OP_MSE_LOSS: x = 0; break;
    case OP_CROSS_ENTROPY_BWD: case OP_NLL_LOSS_BWD: case OP_MSE_LOSS_BWD: case OP_BN_BWD_DATA: x = 1; break;
    default: break;
    }
    if (!nd->dead && x >= 0 && (nd->in[x]->shape.rank < 1 || nd->in[x]->shape.d[0] != n)) return 0;
  }
  return n > 0 ? n : 0;
}

const char *cg_step_rows(Cg *c, KParams *p, int64_t d0, char *buf, size_t n) {
  if (c->train && c->step_rows > 0 && d0 == c->step_rows) {
    for (int i = 0; i < p->n; i++)   /* already a parameter of this kernel (a side node's statements) */
      if (!strcmp(strrchr(p->decl[i], ' ') + 1, "nb")) return "nb";
    return kp_int(p, "nb", "m->nb");
  }
  snprintf(buf, n, "%lld", (long long)d0);
  return buf;
}

const char *cg_batch_count(const Cg *c, const KGroup *gr, int64_t k, int64_t full, char *dst, size_t n) {
  CgBatch bg;
  if (cg_batch_grid(c, gr, 0, c->g->max_batch, 1, &bg) && full == k * c->g->max_batch) {
    if (k == 1) snprintf(dst, n, "m->nb");
    else snprintf(dst, n, "m->nb * %lldLL", (long long)k);
  } else {
    snprintf(dst, n, "%lld", (long long)full);
  }
  return dst;
}

void cg_access_add(CgAccess *a, int buf, int wr) {
  for (int i = 0; i < a->n; i++)
    if (a->buf[i] == buf) {
      a->wr[i] |= (unsigned char)wr;
      return;
    }
  if (a->n == a->cap) {
    a->cap = a->cap ? 2 * a->cap : 16;
    a->buf = xrealloc(a->buf, sizeof(int) * (size_t)a->cap);
    a->wr = xrealloc(a->wr, (size_t)a->cap);
  }
  a->buf[a->n] = buf;
  a->wr[a->n++] = (unsigned char)wr;
}

void cg_launch(Cg *c, const char *name, const KParams *p, long long gx, long long gy, long long gz,
               int bx, int by, size_t shmem) {
  cg_launch_b(c, name, p, gx, gy, gz, bx, by, shmem, NULL);
}

/* One grid extent: the constant, or the blocks that cover nb * per elements. */
static void grid_dim(Buf *b, long long g, const CgBatch *bg, int axis) {
  if (!bg || bg->axis != axis) {
    buf_printf(b, "%lldu", g);
    return;
  }
  long long per = bg->per, tile = bg->tile;
  NCC_ASSERT(per >= 1 && tile >= 1);
  if (per % tile == 0 && per == tile) buf_puts(b, "(unsigned)m->nb");
  else if (per % tile == 0) buf_printf(b, "(unsigned)m->nb * %lldu", per / tile);
  else if (per == 1) buf_printf(b, "(unsigned)((m->nb + %lld) / %lld)", tile - 1, tile);
  else buf_printf(b, "(unsigned)((m->nb * %lldLL + %lld) / %lld)", per, tile - 1, tile);
}

void cg_launch_b(Cg *c, const char *name, const KParams *p, long long gx, long long gy, long long gz, int bx, int by,
                 size_t shmem, const CgBatch *bg) {
  NCC_ASSERT(gx >= 1 && gx <= 2147483647LL && gy >= 1 && gy <= 65535 && gz >= 1 && gz <= 65535);
  if (!c->train && !c->load_time) {
    c->nlaunch++;
    c->nbatched += bg != NULL;
  }
  {   /* the geometry, for the report (cg_launch_geometry): at the compiled batch every grid is whole */
    CgLaunchList *ll = &c->launches;
    if (ll->n == ll->cap) {
      ll->cap = ll->cap ? 2 * ll->cap : 64;
      ll->l = xrealloc(ll->l, sizeof(CgLaunch) * (size_t)ll->cap);
    }
    CgLaunch *L = &ll->l[ll->n++];
    memset(L, 0, sizeof *L);
    L->main = c->group ? c->group->main : NULL;
    L->train = c->train, L->load_time = c->load_time;
    L->grid[0] = gx, L->grid[1] = gy, L->grid[2] = gz;
    L->block[0] = bx, L->block[1] = by;
    L->smem_dyn = shmem;
    for (int i = 0; i < c->nk; i++)
      if (!strcmp(c->k[i].name, name)) L->smem_static = c->k[i].smem, L->kernel = c->k[i].name;
  }
  if (c->acc)   /* what it reads and writes, for the waits between streams */
    for (int i = 0; i < p->n; i++) {
      if (p->buf1[i]) cg_access_add(c->acc, p->buf1[i] - 1, strncmp(p->ctype[i], "const", 5) != 0);
      else if (strstr(p->host[i], "m->bufs[")) c->acc->all = 1;   /* a buffer no kp_ function named */
    }
  Buf *b = &c->run;
  if (c->group) {   /* which layers this launch computes: the buffers are named below */
    const KGroup *gr = c->group;
    buf_puts(b, "  /*");
    for (int i = -1 - gr->npro; i < gr->nepi + gr->nside; i++) {
      const Node *n = i < -1 ? gr->pro[i + 1 + gr->npro] : i < 0 ? gr->main : i < gr->nepi ? gr->epi[i] : gr->side[i - gr->nepi];
      char nm[256];
      snprintf(nm, sizeof nm, "%s", n->name ? n->name : ncc_ops[n->op].name);
      for (char *q = nm; *q; q++)   /* keep the comment closed */
        if ((q[0] == '*' && q[1] == '/') || (unsigned char)*q < 32) *q = '_';
      buf_puts(b, i == -1 - gr->npro ? " " : ", ");
      buf_puts(b, nm);
    }
    if (ir_gemm_mma(gr->main)) {   /* the tensor-core GEMM's tile and why (the precision pass's choice) */
      char why[256];
      buf_printf(b, ": tile %s", ir_tile_why(gr->main, why, sizeof why));
    } else if (gr->main->prec == PREC_FP32 && gr->main->tile_why && ir_fp32_tiled(gr->main)) {
      buf_printf(b, ": fp32 tile %s", gr->main->tile_why);   /* --autotune's tile and stages, and why */
    } else if (ir_fp32_tile(gr->main) != IR_TILE_64x64 || (gr->main->prec == PREC_FP32 && gr->main->pipe)) {
      /* the float32 GEMM's wider tile (the rule's reason, or forced), and its stages */
      char why[256];
      int t = ir_fp32_tile(gr->main);
      if (ir_fp32_tile_choose(gr->main, -1, why, sizeof why) != t) ir_fp32_tile_choose(gr->main, t, why, sizeof why);
      buf_printf(b, ": fp32 tile %s%s", why, gr->main->pipe ? "; two stages" : "");
    }
    buf_puts(b, " */\n");
  }
  /* one argument a line, with the kernel parameter it becomes */
  buf_printf(b, "  {\n    void *a_[] = {");
  size_t w = 0;
  for (int i = 0; i < p->n; i++)
    if (strlen(p->host[i]) > w) w = strlen(p->host[i]);
  static const char spaces[] = "                                                                ";
  for (int i = 0; i < p->n; i++) {
    size_t pad = w - strlen(p->host[i]) + (i + 1 < p->n ? 2 : 0);
    buf_puts(b, i ? "\n                  " : "");
    buf_puts(b, p->host[i]);
    buf_puts(b, i + 1 < p->n ? "," : "}; ");
    for (; pad > 0; pad -= pad < sizeof spaces - 1 ? pad : sizeof spaces - 1)
      buf_puts(b, spaces + (sizeof spaces - 1 - (pad < sizeof spaces - 1 ? pad : sizeof spaces - 1)));
    buf_puts(b, "/* ");
    buf_puts(b, strrchr(p->decl[i], ' ') + 1);
    buf_puts(b, " */");
  }
  if (!p->n) buf_puts(b, "NULL};");
  buf_puts(b, "\n    ncc_dim3 g_ = {");
  grid_dim(b, gx, bg, 0);
  buf_puts(b, ", ");
  grid_dim(b, gy, bg, 1);
  buf_puts(b, ", ");
  grid_dim(b, gz, bg, 2);
  buf_printf(b, "}, b_ = {%du, %du, 1u};\n", bx, by);
  buf_printf(b, "    rc = ncc_launch(m->dev, &%s_desc, g_, b_, %zu, a_);\n", name, shmem);
  buf_printf(b, "    if (rc) return %s_fail(m, rc, \"%s\");\n  }\n", c->model, name);
}

int cg_buf_of(Cg *c, Value *v) {
  int b = c->vbuf[v->id];
  NCC_ASSERT(b >= 0);
  return b;
}

/* ---- buffer names -------------------------------------------------------
 * Host code addresses buffers by enum constants, BUF_<name>: a parameter by
 * its state_dict name, an input by its name, an activation by the layer of
 * the node that computes it, the workspace as im2col_workspace; characters
 * C does not allow become '_', and a name already taken gets _2, _3...
 * Names are given in buffer order and a buffer's name never changes, so
 * buffers added later (the workspace) leave the others as they were. */
static int name_taken(Cg *c, int upto, const char *name) {
  for (int i = 0; i < upto; i++)
    if (strcmp(c->bufname[i], name) == 0) return 1;
  return 0;
}

const char *cg_buf_name(Cg *c, int b) {
  NCC_ASSERT(b >= 0 && b < c->nbufs);
  if (c->nbufname < c->nbufs) {
    const char **names = ARENA_ARRAY(c->g->arena, const char *, c->nbufs);
    for (int i = 0; i < c->nbufname; i++) names[i] = c->bufname[i];
    c->bufname = names;
    for (int i = c->nbufname; i < c->nbufs; i++) {
      const Value *v = c->bufs[i].v;
      char base[224], cand[240];
      if (c->bufs[i].label) snprintf(base, sizeof base, "%s", c->bufs[i].label);
      else if (!v) snprintf(base, sizeof base, c->o->use_cublas ? "im2col_workspace" : "workspace");   /* im2col columns, or split-K partial sums */
      else if (v->grad_of) snprintf(base, sizeof base, "grad_%s", v->grad_of->def->name);
      else if (v->def->op == OP_PARAM || v->def->op == OP_INPUT) snprintf(base, sizeof base, "%s", v->def->name);
      else if (c->bufs[i].train)   /* the training step's values: t_<layer> */
        snprintf(base, sizeof base, "t_%s", v->def->name ? v->def->name : ncc_ops[v->def->op].name);
      else if (v->def->name) snprintf(base, sizeof base, "%s", v->def->name);
      else snprintf(base, sizeof base, "%s%d", ncc_ops[v->def->op].name, v->id);
      for (char *q = base; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9'))) *q = '_';
      snprintf(cand, sizeof cand, "BUF_%s", base);
      for (int k = 2; name_taken(c, i, cand); k++) snprintf(cand, sizeof cand, "BUF_%s_%d", base, k);
      names[i] = arena_strdup(c->g->arena, cand);
    }
    c->nbufname = c->nbufs;
  }
  return c->bufname[b];
}

/* ---- kernel parameters --------------------------------------------------
 * A parameter is named after its role in the kernel (x, weight, bias, y,
 * bn_running_mean, add_b), never after the buffer it gets: the text of two
 * kernels that compute the same thing on different buffers stays equal, so
 * the second is not emitted again (cg_kernel), and the launch site names
 * the buffers (BUF_...). */
static const char *kp_add(KParams *p, const char *ctype, const char *role, const char *host) {
  NCC_ASSERT(p->n < CG_MAX_PARAMS);
  int i = p->n++;
  char name[48];
  snprintf(name, sizeof name, "%s", role);
  for (int k = 2;; k++) {   /* two parameters of one role: weight, weight2 */
    int taken = 0;
    for (int j = 0; j < i; j++) taken |= strcmp(strrchr(p->decl[j], ' ') + 1, name) == 0;
    if (!taken) break;
    snprintf(name, sizeof name, "%s%d", role, k);
  }
  snprintf(p->ctype[i], sizeof p->ctype[i], "%s", ctype);
  int ptr = strchr(ctype, '*') != NULL;
  snprintf(p->decl[i], sizeof p->decl[i], "%s%s%s", ctype, ptr ? D_RESTRICT " " : " ", name);
  snprintf(p->host[i], sizeof p->host[i], "%s", host);
  p->buf1[i] = 0;
  /* the C name is the decl's last word */
  return strrchr(p->decl[i], ' ') + 1;
}

const char *kp_value(Cg *c, KParams *p, Value *v, int is_out, const char *role) {
  char host[CG_HOST_LEN];
  snprintf(host, sizeof host, "&m->bufs[%s]", cg_buf_name(c, cg_buf_of(c, v)));
  /* the same buffer twice (x + x) gets one parameter: __restrict__ then still holds */
  for (int i = 0; i < p->n; i++)
    if (strcmp(p->host[i], host) == 0 && !is_out && strncmp(p->ctype[i], "const", 5) == 0)
      return strrchr(p->decl[i], ' ') + 1;
  char ct[48];
  snprintf(ct, sizeof ct, "%s%s *", is_out ? "" : "const ", cg_elem_type(v));
  const char *nm = kp_add(p, ct, role, host);
  p->buf1[p->n - 1] = 1 + cg_buf_of(c, v);
  return nm;
}

const char *cg_elem_type(const Value *v) {
  DType t = ir_store_type(v);
  return t == DT_I32 ? "int" : t == DT_F16 || t == DT_BF16 ? "unsigned short" : t == DT_I8 ? "signed char" : "float";
}

const char *cg_ld(char *dst, size_t n, const Value *v, const char *elem) {
  DType t = ir_store_type(v);
  if (t == DT_F16 || t == DT_BF16) snprintf(dst, n, "%s(%s)", t == DT_F16 ? "ncc_fp16_load" : "ncc_bf16_load", elem);
  else if (t == DT_I8) snprintf(dst, n, "(float)%s", elem);
  else snprintf(dst, n, "%s", elem);
  return dst;
}

const char *cg_st(char *dst, size_t n, const Value *v, const char *f) {
  DType t = ir_store_type(v);
  if (t == DT_F16 || t == DT_BF16) {
    snprintf(dst, n, "%s(%s)", t == DT_F16 ? "ncc_fp16_bits" : "ncc_bf16_bits", f);
  } else if (t == DT_I8) {   /* the readers' quantization, with their 1 / scale (q8_param's float) */
    char lit[40];
    snprintf(dst, n, "(signed char)ncc_q8(%s * %s)", f, cg_flit(lit, (double)(1.0f / v->qscale)));
  } else {
    snprintf(dst, n, "%s", f);
  }
  return dst;
}

char cg_pair_letter(const Value *v) {
  DType t = ir_store_type(v);
  return t == DT_F32 ? 'f' : t == DT_F16 || t == DT_BF16 ? 'h' : t == DT_I8 ? 'b' : 0;
}

const char *cg_arg_role(const Node *n, int j, char out[32]) {
  if (n->op == OP_ACT_GRAD && n->a.act_at_out && j == 1) return strcpy(out, "y");   /* the derivative from the output */
  const char *s = ncc_ops[n->op].args;
  for (int k = 0; *s;) {
    size_t len = strcspn(s, " ");
    const char *colon = memchr(s, ':', len);
    if (colon && strncmp(colon + 1, "tensor", 6) == 0 && (colon[7] == ' ' || colon[7] == '|' || !colon[7])) {
      if (k++ == j) {
        snprintf(out, 32, "%.*s", (int)(colon - s), s);
        return out;
      }
    }
    s += len;
    while (*s == ' ') s++;
  }
  snprintf(out, 32, "in%d", j);
  return out;
}

const char *kp_work(Cg *c, KParams *p, const char *role) {
  char host[CG_HOST_LEN];
  int w = c->group && c->group->main->stream && c->work_side >= 0 ? c->work_side : c->work;   /* the side stream's own */
  NCC_ASSERT(w >= 0);
  snprintf(host, sizeof host, "&m->bufs[%s]", cg_buf_name(c, w));
  const char *nm = kp_add(p, "float *", role, host);
  p->buf1[p->n - 1] = 1 + w;
  return nm;
}

const char *kp_int(KParams *p, const char *role, const char *hostvar) {
  char host[CG_HOST_LEN];
  snprintf(host, sizeof host, "&%s", hostvar);
  return kp_add(p, "int", role, host);
}

const char *kp_float(KParams *p, const char *role, const char *hostvar) {
  char host[CG_HOST_LEN];
  snprintf(host, sizeof host, "&%s", hostvar);
  return kp_add(p, "float", role, host);
}

const char *kp_buf(Cg *c, KParams *p, int b, int is_out, const char *role) {
  char host[CG_HOST_LEN];
  snprintf(host, sizeof host, "&m->bufs[%s]", cg_buf_name(c, b));
  const char *nm = kp_add(p, is_out ? "float *" : "const float *", role, host);
  p->buf1[p->n - 1] = 1 + b;
  return nm;
}

const char *kp_flag(Cg *c, KParams *p, int b, int is_out, const char *role) {
  char host[CG_HOST_LEN];
  snprintf(host, sizeof host, "&m->bufs[%s]", cg_buf_name(c, b));
  const char *nm = kp_add(p, is_out ? "int *" : "const int *", role, host);
  p->buf1[p->n - 1] = 1 + b;
  return nm;
}

void kp_decl(const KParams *p, Buf *b) {
  /* one line while it is short; else the parameters on lines of their own,
   * a few to a line, under the kernel's name */
  size_t all = 0;
  for (int i = 0; i < p->n; i++) all += strlen(p->decl[i]) + 2;
  size_t col = 0;
  for (int i = 0; i < p->n; i++) {
    size_t l = strlen(p->decl[i]);
    if (all > 80 && (i == 0 || col + l > 100)) {
      buf_puts(b, i ? ",\n    " : "\n    ");
      col = 4;
    } else if (i) {
      buf_puts(b, ", ");
      col += 2;
    }
    buf_puts(b, p->decl[i]);
    col += l;
  }
}

const char *cg_paren(char *dst, size_t n, const char *e) {
  int simple = *e != 0;
  for (const char *q = e; *q; q++)
    simple &= (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_';
  snprintf(dst, n, simple ? "%s" : "(%s)", e);
  return dst;
}

const char *cg_digit(char *dst, size_t n, const char *var, int64_t div, int64_t mod) {
  if (mod == 1) snprintf(dst, n, "0");
  else if (div == 1) snprintf(dst, n, mod > 0 ? "%s %% %lld" : "%s", var, (long long)mod);
  else if (mod > 0) snprintf(dst, n, "(%s / %lld) %% %lld", var, (long long)div, (long long)mod);
  else snprintf(dst, n, "%s / %lld", var, (long long)div);
  return dst;
}

const char *cg_lin(char *dst, size_t n, const char *a, int64_t k, const char *b) {
  char pa[200];
  cg_paren(pa, sizeof pa, a);
  if (k == 1) snprintf(dst, n, "%s + %s", a, b);
  else snprintf(dst, n, "%s * %lld + %s", pa, (long long)k, b);
  return dst;
}

void cg_term(Buf *b, int *nterms, const char *e, int64_t k) {
  if (k == 0 || strcmp(e, "0") == 0) return;
  char pe[200];
  buf_puts(b, (*nterms)++ ? " + " : "");
  if (k == 1) buf_puts(b, e);
  else buf_printf(b, "%s * %lld", cg_paren(pe, sizeof pe, e), (long long)k);
}

void cg_bcast_index(Buf *b, const Shape *out, const Shape *in, const char *idx) {
  int64_t n_in = shape_numel(in), n_out = shape_numel(out);
  if (n_in == n_out) {          /* same elements in the same order (leading 1s only) */
    buf_printf(b, "%s", idx);
    return;
  }
  if (n_in == 1) {
    buf_puts(b, "0");
    return;
  }
  int off = out->rank - in->rank;
  int64_t ostride = 1, istride = 1;
  int64_t ostr[NCC_MAX_RANK], istr[NCC_MAX_RANK];
  for (int d = out->rank - 1; d >= 0; d--) {
    ostr[d] = ostride;
    ostride *= out->d[d];
    int di = d - off;
    int64_t ind = di >= 0 ? in->d[di] : 1;
    istr[d] = ind == 1 ? 0 : istride;
    istride *= ind;
  }
  int terms = 0;
  for (int d = 0; d < out->rank; d++) terms += istr[d] && out->d[d] != 1;
  if (terms > 1) buf_puts(b, "(");   /* a sum: callers multiply the index */
  int first = 1;
  for (int d = 0; d < out->rank; d++) {
    if (!istr[d] || out->d[d] == 1) continue;
    buf_printf(b, "%s", first ? "" : " + ");
    first = 0;
    /* coordinate d of the output: (idx / ostr) % dim; the outermost needs no % */
    int outer = 1;
    for (int e = 0; e < d; e++) outer &= out->d[e] == 1;
    char ix[160];
    cg_paren(ix, sizeof ix, idx);
    /* parentheses only where C needs them: "(i / 20) % 3 * 5" */
    if (ostr[d] != 1 && !outer) buf_printf(b, "(%s / %lld) %% %lld", ix, (long long)ostr[d], (long long)out->d[d]);
    else if (ostr[d] != 1) buf_printf(b, "%s / %lld", ix, (long long)ostr[d]);
    else if (!outer) buf_printf(b, "%s %% %lld", ix, (long long)out->d[d]);
    else buf_puts(b, ix);
    if (istr[d] != 1) buf_printf(b, " * %lld", (long long)istr[d]);
  }
  if (first) buf_puts(b, "0");
  if (terms > 1) buf_puts(b, ")");
}

int cg_reduce_threads(int64_t d) {
  int t = 32;
  while (t < 256 && t < d) t *= 2;
  return t;
}

void cg_reduce_shared(Buf *b, const char *red, int nthr) {
  if (nthr > 32) buf_printf(b, "  %s float %s[%d];\n", D_SHARED, red, nthr / 32);
}

void cg_block_reduce(Buf *b, const char *red, const char *var, int nthr, int is_max, int ind) {
  /* each warp by shuffles (a butterfly: every lane ends with its warp's
   * result), then the warps' results through red[0 .. nthr/32 - 1], combined
   * in the same order by every thread; all threads reach the shuffles and
   * barriers (block-uniform code, nthr a multiple of 32), and the last
   * barrier fences the reads of red before its next use */
  int nw = nthr / 32;
  cg_ind(b, ind);
  buf_puts(b, "for (int ws = 16; ws > 0; ws >>= 1) {\n");
  cg_ind(b, ind + 1);
  /* the maximum propagates NaN, as PyTorch's max does (fmaxf would drop it) */
  if (is_max) buf_printf(b, "float o = __shfl_xor_sync(0xffffffffu, %s, ws);\n", var);
  else buf_printf(b, "%s = %s + __shfl_xor_sync(0xffffffffu, %s, ws);\n", var, var, var);
  if (is_max) {
    cg_ind(b, ind + 1);
    buf_printf(b, "if (o > %s || o != o) %s = o;\n", var, var);
  }
  cg_ind(b, ind);
  buf_puts(b, "}\n");
  if (nw <= 1) return;
  cg_ind(b, ind);
  buf_printf(b, "if ((t & 31) == 0) %s[t >> 5] = %s;\n", red, var);
  cg_ind(b, ind);
  buf_printf(b, "%s\n", D_BARRIER);
  cg_ind(b, ind);
  buf_printf(b, "%s = %s[0];\n", var, red);
  cg_ind(b, ind);
  if (is_max)
    buf_printf(b, "for (int wi = 1; wi < %d; wi++)\n", nw), cg_ind(b, ind + 1),
        buf_printf(b, "if (%s[wi] > %s || %s[wi] != %s[wi]) %s = %s[wi];\n", red, var, red, red, var, red);
  else buf_printf(b, "for (int wi = 1; wi < %d; wi++) %s = %s + %s[wi];\n", nw, var, var, red);
  cg_ind(b, ind);
  buf_printf(b, "%s\n", D_BARRIER);
}

const char *cg_finish(Cg *c, const char *op, int flags, const KParams *p, const Buf *body) {
  return cg_finish_bounds(c, op, flags, p, body, 0, 0);
}

const char *cg_finish_bounds(Cg *c, const char *op, int flags, const KParams *p, const Buf *body, int threads,
                             int min_blocks) {
  Buf k = {0};
  if (min_blocks > 0) buf_printf(&k, "%s __launch_bounds__(%d, %d) @K@(", D_KERNEL, threads, min_blocks);
  else buf_printf(&k, "%s @K@(", D_KERNEL);
  kp_decl(p, &k);
  buf_printf(&k, ") {\n%s}\n", body->s ? body->s : "");
  const char *name = cg_kernel(c, op, flags, p, k.s);
  buf_free(&k);
  return name;
}

const char *cg_opname(const KGroup *gr, const char *base, char out[96]) {
  size_t n = 0;
  out[0] = 0;
  if (!base)   /* a prologue's op first: maxpool2d_conv2d_relu */
    for (int i = 0; i < gr->npro && n < 40; i++) n += (size_t)snprintf(out + n, 96 - n, "%s_", ncc_ops[gr->pro[i]->op].name);
  n += (size_t)snprintf(out + n, 96 - n, "%s", base ? base : ncc_ops[gr->main->op].name);
  for (int i = 0; i < gr->nepi + gr->nside && n < 80; i++)
    n += (size_t)snprintf(out + n, 96 - n, "%s%s", n ? "_" : "",
                          ncc_ops[(i < gr->nepi ? gr->epi[i] : gr->side[i - gr->nepi])->op].name);
  if (!out[0]) snprintf(out, 96, "epilogue");
  return out;
}

int emit_none(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("%s leads a kernel group, but ops.def gives it no emitter", ncc_ops[gr->main->op].name);
}

/* ---- common kernel shapes ------------------------------------------------ */

void cg_flat_head(Buf *b, int64_t total) {
  buf_printf(b, "  int i = %s * 256 + %s;\n  if (i < %lld) {\n", D_BID_X, D_TID_X, (long long)total);
}

/* The epilogue chain on `v` at index i, the store that closes the kernel's
 * if (or row loop), the kernel and its launch; frees b. */
static int finish_store(Cg *c, const KGroup *gr, KParams *p, Buf *b, int flags, long long grid, int T,
                        const CgBatch *bg) {
  int rc = -1;
  if (cg_epilogue(c, gr, p, b, "v", "i", 2) == 0) {
    char st[64];
    buf_printf(b, "    %s[i] = %s;\n  }\n", kp_value(c, p, group_out(gr), 1, "y"), cg_st(st, sizeof st, group_out(gr), "v"));
    char opn[96];
    const char *name = cg_finish(c, cg_opname(gr, NULL, opn), flags, p, b);
    cg_launch_b(c, name, p, grid, 1, 1, T, 1, 0, bg);
    rc = 0;
  }
  buf_free(b);
  return rc;
}

/* Element i of a flat kernel is element i of the group's value, whose first
 * axis is the batch: the first b rows are the first b * numel / N elements.
 * Row r of a row kernel (softmax, layernorm) lies in image r / (rows / N). */
int cg_flat_finish(Cg *c, const KGroup *gr, KParams *p, Buf *b, int64_t total) {
  CgBatch bg;
  const CgBatch *bp = total == shape_numel(&group_out(gr)->shape) ? cg_batch_grid(c, gr, 0, total, 256, &bg) : NULL;
  return finish_store(c, gr, p, b, 0, (total + 255) / 256, 256, bp);
}

int cg_rows_finish(Cg *c, const KGroup *gr, KParams *p, Buf *b, int64_t total, int64_t per_block) {
  CgBatch bg;
  const CgBatch *bp =
      total == shape_numel(&group_out(gr)->shape) ? cg_batch_grid(c, gr, 0, total, per_block, &bg) : NULL;
  return finish_store(c, gr, p, b, 0, (total + per_block - 1) / per_block, 256, bp);
}

int cg_row_finish(Cg *c, const KGroup *gr, KParams *p, Buf *b, int64_t rows, int T) {
  CgBatch bg;
  return finish_store(c, gr, p, b, NCC_KF_BARRIER_, rows, T, cg_batch_grid(c, gr, 0, rows, 1, &bg));
}

/* The expression of a GEMM operand element held in `v` as the kernel
 * multiplies it: v at fp32, v rounded at tf32/fp16/bf16; at int8 an
 * activation quantized with its scale, as a float integer (inv: the
 * parameter holding 1 / scale, cg_q8_param or cg_q8_param_b), and a weight
 * (inv NULL: the quantize node's integers) as it is. */
const char *cg_operand_rv(char *buf, size_t n, const Node *nd, const char *v, const char *inv) {
  if (nd->prec == PREC_INT8 && inv) {
    snprintf(buf, n, "ncc_q8(%s * %s)", v, inv);
  } else if (cg_operand_round(nd)) {
    snprintf(buf, n, "%s(%s)", cg_operand_round(nd), v);
  } else {
    snprintf(buf, n, "%s", v);
  }
  return buf;
}

static const char *q8_param(Cg *c, KParams *p, const Node *n, float scale, const char *role) {
  if (n->prec != PREC_INT8) return NULL;
  float inv = 1.0f / scale;
  int i = 0;
  while (i < c->nq8 && c->q8inv[i] != inv) i++;
  if (i == c->nq8) {
    float *q = realloc(c->q8inv, sizeof *q * (size_t)(c->nq8 + 1));
    if (!q) ncc_die("out of memory");
    c->q8inv = q;
    c->q8inv[c->nq8++] = inv;
  }
  char host[CG_HOST_LEN - 8];
  snprintf(host, sizeof host, "%s_q8_inv_[%d]", c->model, i);
  for (int j = 0; j < p->n; j++)   /* added already (an operand's loader and the tile's both ask) */
    if (!strcmp(p->host[j] + 1, host)) return strrchr(p->decl[j], ' ') + 1;
  return kp_float(p, role, host);
}

const char *cg_q8_param(Cg *c, KParams *p, const Node *n) { return q8_param(c, p, n, n->qscale, "inv_scale"); }

const char *cg_q8_param_b(Cg *c, KParams *p, const Node *n) {
  return n->op == OP_MATMUL ? q8_param(c, p, n, n->qscale_b, "inv_scale_b") : NULL;
}

/* The kernel-header function that rounds a GEMM operand element to the op's
 * precision (passes/precision.c), NULL at fp32 and int8 */
const char *cg_operand_round(const Node *n) {
  switch (n->prec) {
  case PREC_TF32: return "ncc_tf32";
  case PREC_FP16: return "ncc_fp16";
  case PREC_BF16: return "ncc_bf16";
  default: return NULL;
  }
}
