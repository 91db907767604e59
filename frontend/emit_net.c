/* emit_net.c — `ncc MODEL --emit=net`: a graph written back as .net source.
 *
 * The inverse of elaborate.c for the graphs the frontends build (a .net
 * file's, an ONNX model's): one statement per node, in graph order, so that
 * compiling the text builds the same nodes in the same order
 * (docs/language.md, "Translating to .net").  What the source computed at
 * compile time (consts, loops, defs, ONNX's shape arithmetic) is folded: the
 * text holds the graph's numbers, except that the batch const every input's
 * first dimension names stays a const (`--set N=8` still works).
 *
 * - A layer with parameters (conv2d, linear, batchnorm2d, layernorm) is a call
 *   named after its parameters: `name="layer1.0.conv1"` when they are
 *   `layer1.0.conv1.weight`, ...  Parameters whose names no layer name gives
 *   (an ONNX initializer `onnx::Conv_193`) are renamed after the layer, and
 *   the caller gets the list (the driver writes the weights under the new
 *   names, MODEL.safetensors beside MODEL.net).
 * - A parameter read as data (`x * scale`) is `parameter([8, 1, 1], name=...)`.
 * - A scalar constant is a number in the expression that reads it.
 * - name= is written only where the name differs from the one .net would give
 *   (op + counter), so that a translated .net file names every node as the
 *   original did; with keep_names 0 (ONNX) ops without parameters take .net's
 *   names.
 * - Values get variables: a chain of single-use values rebinds one name
 *   (`h = relu(h)`), a value read twice gets a new one; outputs and named
 *   losses are bound to their names.
 * What .net cannot say (a layer whose weight is shared or computed, an op
 * only a pass makes) is an error naming the node. */
#include "frontend.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct Strs { const char **s; int n, cap; } Strs;

static void strs_add(Strs *t, const char *s) {
  if (t->n == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 64;
    t->s = realloc(t->s, sizeof *t->s * (size_t)t->cap);
    if (!t->s) ncc_die("out of memory");
  }
  t->s[t->n++] = s;
}
static int strs_has(const Strs *t, const char *s) {
  for (int i = 0; i < t->n; i++)
    if (!strcmp(t->s[i], s)) return 1;
  return 0;
}

typedef struct W {
  Graph *g;
  Arena *ar;
  const NetOpts *no;
  const char **var;        /* by value id: the variable (or literal, or inline call) that holds it */
  unsigned char *pinned;   /* by value id: its variable is never rebound (an input, an output, ...) */
  unsigned char *inl;      /* by value id: 1 its expression waits to be written inside a later one, 2 it was */
  int npending;            /* values with inl 1 */
  const char **pname;      /* by node id (PARAM): the parameter's name in the .net */
  Node **owner;            /* by node id (PARAM): the layer whose call makes it, or NULL */
  const char **lname;      /* by node id (layers): name= of the call */
  Strs taken_params, taken_vars;
  int counts[OP__COUNT];   /* .net's per-op counters for unnamed nodes */
  int nh;                  /* the last h<k> variable */
  const char *bconst;      /* the batch const (Graph.batch_const) when .net can name it, or NULL */
  int64_t batch;           /* its value, or 0 */
  NetRename *ren; int nren, capren;
  int errors;
} W;

static int werr(W *w, const Node *n, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_error(n->loc, "--emit=net: node %s (%s): %s", n->name ? n->name : "(unnamed)", ncc_ops[n->op].name, msg);
  w->errors++;
  return -1;
}

static int ident_ok(const char *s) {
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_')) return 0;
  return !frontend_net_keyword(s);
}

/* "onnx::Conv_193" -> "Conv_193"; other characters name= refuses -> '_' */
static char *sanitize_name(Arena *ar, const char *s) {
  if (!strncmp(s, "onnx::", 6)) s += 6;
  while (*s == '/' || *s == ':') s++;
  size_t n = strlen(s);
  if (n > 150) n = 150;
  char *r = arena_strndup(ar, s, n);
  for (char *p = r; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
          *p == '.' || *p == '-'))
      *p = '_';
  return r;
}
/* torch.onnx names a node by its module scope, "/layer2/layer2.0/downsample/
 * downsample.0/Conv": each part a module's name, the last the op.  A part
 * that extends the one before it ("downsample.0" after "downsample") names
 * that module's child; any other part is a child of the path so far.  The
 * path ("layer2.0.downsample.0") names the layer as the state_dict does;
 * NULL for other names. */
static const char *scope_path(Arena *ar, const char *s) {
  if (s[0] != '/') return NULL;
  const char *last = strrchr(s, '/');
  if (last == s) return NULL;
  char path[400] = "";
  size_t pl = 0, ps = 0;   /* the path's length, where its last part starts */
  for (const char *p = s + 1; p < last;) {
    const char *e = strchr(p, '/');
    size_t cl = (size_t)(e - p), prev = pl - ps;
    if (cl == 0 || pl + cl + 2 >= sizeof path) return NULL;
    if (!(pl && cl > prev && p[prev] == '.' && !strncmp(p, path + ps, prev))) {
      if (pl) path[pl++] = '.';
      ps = pl;
    }
    memcpy(path + ps, p, cl);
    pl = ps + cl;
    path[pl] = 0;
    p = e + 1;
  }
  return pl ? arena_strdup(ar, path) : NULL;
}

/* a variable name from anything: "layer1.0.scale" -> "layer1_0_scale" */
static const char *sanitize_ident(W *w, const char *s) {
  char *r = sanitize_name(w->ar, s);
  for (char *p = r; *p; p++)
    if (*p == '.' || *p == '-') *p = '_';
  if (!*r || (*r >= '0' && *r <= '9') || frontend_net_keyword(r)) r = arena_printf(w->ar, "p_%s", r);
  return r;
}

/* a variable nobody holds yet: base, base1, base2, ... (h1, h2: "h" + k) */
static const char *fresh_var(W *w, const char *base) {
  const char *v = base;
  for (int k = 1; strs_has(&w->taken_vars, v) || !ident_ok(v) || ir_op_lookup(v) >= 0; k++)
    v = arena_printf(w->ar, "%s%d", base, k);
  strs_add(&w->taken_vars, v);
  return v;
}
static const char *fresh_h(W *w) {
  const char *v;
  do v = w->nh ? arena_printf(w->ar, "h%d", w->nh) : "h", w->nh++;
  while (strs_has(&w->taken_vars, v));
  strs_add(&w->taken_vars, v);
  return v;
}

/* The shortest text that reads back as the same double. */
static const char *num_text(W *w, const Node *n, double x) {
  if (!isfinite(x)) { werr(w, n, "the number %g has no .net spelling", x); return "0"; }
  char buf[40];
  for (int p = 1; p <= 17; p++) {
    snprintf(buf, sizeof buf, "%.*g", p, x);
    if (strtod(buf, NULL) == x) break;
  }
  return arena_strdup(w->ar, buf);
}

/* ---- layers and their parameters ---- */

static const char *const conv_slots[] = {NULL, "weight", "bias"};
static const char *const bn_slots[] = {NULL, "weight", "bias", "running_mean", "running_var"};

static const char *const *layer_slots(const Node *n) {
  switch (n->op) {
  case OP_CONV2D: case OP_LINEAR: case OP_LAYERNORM: return conv_slots;
  case OP_BATCHNORM2D: return bn_slots;
  default: return NULL;
  }
}

static void rename_param(W *w, Node *p, const char *to) {
  w->pname[p->id] = to;
  if (!strcmp(to, p->name)) return;
  if (w->nren == w->capren) {
    w->capren = w->capren ? w->capren * 2 : 32;
    w->ren = realloc(w->ren, sizeof *w->ren * (size_t)w->capren);
    if (!w->ren) ncc_die("out of memory");
  }
  w->ren[w->nren++] = (NetRename){p->name, to};
}

/* The layer name whose parameters are exactly the current names, or NULL. */
static const char *layer_from_params(const Node *n) {
  const char *const *slot = layer_slots(n);
  const char *p = NULL;
  size_t plen = 0;
  for (int k = 1; k < n->nin; k++) {
    const char *nm = n->in[k]->def->name, *suf = slot[k];
    size_t l = strlen(nm), sl = strlen(suf);
    if (l < sl + 2 || nm[l - sl - 1] != '.' || strcmp(nm + l - sl, suf)) return NULL;
    if (p && (plen != l - sl - 1 || strncmp(p, nm, plen))) return NULL;
    p = nm, plen = l - sl - 1;
  }
  if (!p || plen >= 200) return NULL;
  char buf[200];
  memcpy(buf, p, plen);
  buf[plen] = 0;
  return frontend_name_ok(buf) ? p : NULL;
}

/* Which parameters a layer call makes; their names; the layers' names. */
static void plan_params(W *w) {
  Graph *g = w->g;
  /* a parameter is a layer's when that layer alone reads it, at its slot */
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    const char *const *slot = layer_slots(n);
    if (!slot) continue;
    int ok = 1;
    for (int k = 1; k < n->nin; k++) {
      Node *p = n->in[k]->def;
      if (p->op != OP_PARAM || p->out->nuses != 1 || p->out->dtype != DT_F32) ok = 0;
    }
    if (!ok) {
      werr(w, n, "its parameters must be its own (a weight shared with another op, or computed, has no .net form)");
      continue;
    }
    for (int k = 1; k < n->nin; k++) w->owner[n->in[k]->def->id] = n;
  }
  /* names that stay: a layer's parameters named after one layer name, free
   * parameters with a name .net accepts */
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (layer_slots(n)) {
      const char *p = layer_from_params(n);
      if (!p) continue;
      size_t l = strlen(n->in[1]->def->name) - strlen(layer_slots(n)[1]) - 1;
      w->lname[n->id] = arena_strndup(w->ar, p, l);
      for (int k = 1; k < n->nin; k++) {
        rename_param(w, n->in[k]->def, n->in[k]->def->name);
        strs_add(&w->taken_params, n->in[k]->def->name);
      }
    } else if (n->op == OP_PARAM && !w->owner[n->id] && frontend_name_ok(n->name) && !strs_has(&w->taken_params, n->name)) {
      rename_param(w, n, n->name);
      strs_add(&w->taken_params, n->name);
    }
  }
  /* the others: named after the layer (its node name), or op + counter */
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (layer_slots(n) && !w->lname[n->id]) {
      const char *const *slot = layer_slots(n);
      const char *src = n->layer ? n->layer : n->name ? n->name : "", *sp = scope_path(w->ar, src);
      const char *base = sanitize_name(w->ar, sp ? sp : src);
      if (!*base) base = ncc_ops[n->op].name;
      const char *l = base;
      for (int k = 2;; k++) {
        int clash = 0;
        for (int s = 1; s < n->nin && !clash; s++)
          clash = strs_has(&w->taken_params, arena_printf(w->ar, "%s.%s", l, slot[s]));
        if (!clash) break;
        l = arena_printf(w->ar, "%s_%d", base, k);
      }
      w->lname[n->id] = l;
      for (int s = 1; s < n->nin; s++) {
        const char *nm = arena_printf(w->ar, "%s.%s", l, slot[s]);
        rename_param(w, n->in[s]->def, nm);
        strs_add(&w->taken_params, nm);
      }
    } else if (n->op == OP_PARAM && !w->owner[n->id] && !w->pname[n->id]) {
      const char *base = sanitize_name(w->ar, n->name), *nm = *base ? base : "parameter";
      for (int k = 2; strs_has(&w->taken_params, nm); k++) nm = arena_printf(w->ar, "%s_%d", base, k);
      rename_param(w, n, nm);
      strs_add(&w->taken_params, nm);
    }
  }
}

/* ---- calls ---- */

/* name= when the node's name is not the one .net gives the call (op + the
 * next number of the op's counter); the counter moves as elaborate.c's does. */
static void name_arg(W *w, const Node *n, int op, const char *want, char *buf, size_t sz, size_t *k) {
  char autoname[64];
  if (!layer_slots(n) && op != OP_PARAM && !(w->no && w->no->keep_names)) want = NULL;
  snprintf(autoname, sizeof autoname, "%s%d", op == OP_PARAM ? "parameter" : ncc_ops[op].name, w->counts[op] + 1);
  if (!want || !strcmp(want, autoname)) {
    w->counts[op]++;
    return;
  }
  if (!frontend_name_ok(want)) {   /* an ONNX node name: keep .net's */
    w->counts[op]++;
    return;
  }
  *k += (size_t)snprintf(buf + *k, *k < sz ? sz - *k : 0, ", name=\"%s\"", want);
}

static void pair_text(char *b, size_t n, const int *p) {
  if (p[0] == p[1]) snprintf(b, n, "%d", p[0]);
  else snprintf(b, n, "[%d, %d]", p[0], p[1]);
}

/* "[d0, d1, ...]", the first written as `first` when given */
static const char *dims_text(W *w, const int64_t *d, int n, const char *first) {
  const char *t = "[";
  for (int i = 0; i < n; i++)
    t = i == 0 && first ? arena_printf(w->ar, "%s%s", t, first)
                        : arena_printf(w->ar, "%s%s%lld", t, i ? ", " : "", (long long)d[i]);
  return arena_printf(w->ar, "%s]", t);
}

/* reshape's shape: the batch const where the reshape keeps the batch on the
 * first axis, so that --set N=K still compiles the translation */
static const char *list_text(W *w, const Node *n) {
  int keeps = w->batch && n->a.nlist > 0 && n->a.list[0] == w->batch && n->in[0]->shape.rank > 0 &&
              n->in[0]->shape.d[0] == w->batch;
  return dims_text(w, n->a.list, n->a.nlist, keeps ? w->bconst : NULL);
}

/* The text of argument `arg` (spec kind and default) of n's call, or NULL
 * when it has its default. */
static const char *arg_text(W *w, const Node *n, const char *arg, const char *def) {
  const Attrs *a = &n->a;
  char b[64];
  const int *pair = !strcmp(arg, "kernel") ? a->kernel : !strcmp(arg, "stride") ? a->stride
                  : !strcmp(arg, "pad") ? a->pad : !strcmp(arg, "dilation") ? a->dilation : NULL;
  if (pair) {
    if (def && def[0] == '@') {
      if (!memcmp(pair, a->kernel, sizeof a->kernel)) return NULL;
    } else if (def && pair[0] == atoi(def) && pair[1] == atoi(def)) {
      return NULL;
    }
    pair_text(b, sizeof b, pair);
    return arena_strdup(w->ar, b);
  }
  if (!strcmp(arg, "out")) return arena_printf(w->ar, "%lld", (long long)a->out);
  if (!strcmp(arg, "groups")) return def && a->groups == atoi(def) ? NULL : arena_printf(w->ar, "%d", a->groups);
  if (!strcmp(arg, "bias")) return a->has_bias ? NULL : "false";
  double f = !strcmp(arg, "eps") ? a->eps : !strcmp(arg, "momentum") ? a->momentum : !strcmp(arg, "slope") ? a->slope
           : !strcmp(arg, "p") ? a->p : NAN;
  if (!isnan(f)) return def && strtod(def, NULL) == f ? NULL : num_text(w, n, f);
  if (!strcmp(arg, "axis")) {
    int rank = n->in[0]->shape.rank, d = def ? atoi(def) : 0;
    if (d < 0) d += rank;
    return def && a->axis == d ? NULL : arena_printf(w->ar, "%d", a->axis);
  }
  if (!strcmp(arg, "shape")) return list_text(w, n);
  if (!strcmp(arg, "perm")) return dims_text(w, a->list, a->nlist, NULL);
  werr(w, n, "argument '%s' has no .net spelling in this writer", arg);
  return NULL;
}

/* The operand's text: its variable, or the number a CONST holds. */
static const char *operand(W *w, const Node *n, int k) {
  Value *v = n->in[k];
  if (v->def->op == OP_CONST) {
    if (!(ncc_ops[n->op].flags & OPF_BINARY)) werr(w, n, "operand %d is a scalar constant, which only + - * / take", k);
    return num_text(w, n, v->def->a.fval);
  }
  if (!w->var[v->id]) {
    werr(w, n, "operand %d (%%%d) has no .net variable", k, v->id);
    return "?";
  }
  if (w->inl[v->id] == 1) w->inl[v->id] = 2, w->npending--;   /* written inside this call */
  return w->var[v->id];
}

/* The call that makes node n, without a trailing newline (strings grow in
 * the graph's arena: a concat of 64 long names has no fixed bound). */
static const char *call_text(W *w, Node *n) {
  const OpInfo *oi = &ncc_ops[n->op];
  char nm[300] = "";
  size_t nk = 0;
  if (oi->flags & OPF_BINARY) {
    const char *l = operand(w, n, 0), *r = operand(w, n, 1);
    if (n->in[0]->def->op == OP_CONST && n->in[1]->def->op == OP_CONST)
      werr(w, n, "both operands are constants");
    name_arg(w, n, n->op, n->name, nm, sizeof nm, &nk);
    if (nk) return arena_printf(w->ar, "%s(%s, %s%s)", oi->name, l, r, nm);
    static const char ops[] = {[OP_ADD] = '+', [OP_SUB] = '-', [OP_MUL] = '*', [OP_DIV] = '/'};
    return arena_printf(w->ar, "%s %c %s", l, ops[n->op], r);
  }
  const char *b = arena_printf(w->ar, "%s(", oi->name);
  /* the spec: "x:tensor out:int kernel:int2 stride:int2=1 ..." */
  char spec[256];
  snprintf(spec, sizeof spec, "%s", oi->args);
  int ti = 0, first = 1, positional = 1;
  char *save = NULL;
  for (char *tok = strtok_r(spec, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
    char *kind = strchr(tok, ':');
    *kind++ = 0;
    char *def = strchr(kind, '=');
    if (def) *def++ = 0;
    if (!strcmp(kind, "tensors")) {   /* concat */
      for (int i = 0; i < n->nin; i++) b = arena_printf(w->ar, "%s%s%s", b, i ? ", " : "", operand(w, n, i));
      first = 0;
      continue;
    }
    if (!strcmp(kind, "tensor")) {
      b = arena_printf(w->ar, "%s%s%s", b, first ? "" : ", ", operand(w, n, ti++));
      first = 0;
      continue;
    }
    const char *t = arg_text(w, n, tok, def);
    if (!t) { positional = 0; continue; }
    /* the first argument without a default by position (conv2d(x, 64, ...),
     * maxpool2d(h, 2)); the rest by keyword */
    if (positional && !def) b = arena_printf(w->ar, "%s, %s", b, t);
    else b = arena_printf(w->ar, "%s, %s=%s", b, tok, t);
    positional = 0;
  }
  name_arg(w, n, n->op, layer_slots(n) ? w->lname[n->id] : n->name, nm, sizeof nm, &nk);
  return arena_printf(w->ar, "%s%s)", b, nm);
}

/* ---- the file ---- */

static int is_named(NamedValue *nv, int n, const Value *v, const char **name) {
  for (int i = 0; i < n; i++)
    if (nv[i].v == v) { if (name) *name = nv[i].name; return 1; }
  return 0;
}

/* the optimizer call, with the arguments that differ from the defaults (docs/language.md) */
static const char *opt_text(W *w, const TrainCfg *t, const Node *where) {
  char b[400];
  size_t k = 0;
  int adam = t->opt == OPT_ADAM || t->opt == OPT_ADAMW;
  k += (size_t)snprintf(b, sizeof b, "%s(lr=%s", t->opt == OPT_SGD ? "sgd" : t->opt == OPT_ADAM ? "adam" : "adamw",
                        num_text(w, where, t->lr));
#define OPT_ARG(cond, fmt, ...) if (cond) k += (size_t)snprintf(b + k, sizeof b - k, fmt, __VA_ARGS__)
  OPT_ARG(!adam && t->momentum != 0, ", momentum=%s", num_text(w, where, t->momentum));
  OPT_ARG(adam && t->beta1 != 0.9, ", beta1=%s", num_text(w, where, t->beta1));
  OPT_ARG(adam && t->beta2 != 0.999, ", beta2=%s", num_text(w, where, t->beta2));
  OPT_ARG(adam && t->eps != 1e-8, ", eps=%s", num_text(w, where, t->eps));
  OPT_ARG(t->weight_decay != (t->opt == OPT_ADAMW ? 0.01 : 0), ", weight_decay=%s", num_text(w, where, t->weight_decay));
  OPT_ARG(t->nesterov, ", nesterov=%s", "true");
#undef OPT_ARG
  snprintf(b + k, sizeof b - k, ")");
  return arena_strdup(w->ar, b);
}

/* The translation compiled back must be the graph it was written from, node
 * for node: op, attributes, operands, dtype and shape (names aside: an ONNX
 * model's change); and the same outputs, losses and train block.  A
 * difference is an attribute this writer has no spelling for (ncc's gap,
 * reported at the node), never a silently different model. */
static int same_graph(W *w, Graph *a, const Graph *b) {
  for (int i = 0; i < a->nnodes; i++) {
    Node *x = a->nodes[i], *y = i < b->nnodes ? b->nodes[i] : NULL;
    int same = y && x->op == y->op && x->nin == y->nin && x->out->dtype == y->out->dtype &&
               x->out->shape.rank == y->out->shape.rank && !memcmp(&x->a, &y->a, sizeof x->a) &&
               !memcmp(x->out->shape.d, y->out->shape.d, sizeof(int64_t) * (size_t)x->out->shape.rank);
    for (int k = 0; same && k < x->nin; k++) same = x->in[k]->def->id == y->in[k]->def->id;
    if (!same) return werr(w, x, "the .net written for it compiles to another node (%s): .net has no spelling for "
                           "some of its attributes", y ? ncc_ops[y->op].name : "none");
  }
  int same = a->nnodes == b->nnodes && a->noutputs == b->noutputs && a->nlosses == b->nlosses &&
             a->train.present == b->train.present;
  for (int i = 0; same && i < a->noutputs; i++) same = a->outputs[i].v->id == b->outputs[i].v->id;
  for (int i = 0; same && i < a->nlosses; i++) same = a->losses[i].v->id == b->losses[i].v->id;
  if (same && a->train.present) {
    const TrainCfg *s = &a->train, *t = &b->train;
    same = s->opt == t->opt && s->lr == t->lr && s->momentum == t->momentum && s->weight_decay == t->weight_decay &&
           s->beta1 == t->beta1 && s->beta2 == t->beta2 && s->eps == t->eps && s->nesterov == t->nesterov &&
           s->sched == t->sched && s->every == t->every && s->total == t->total && s->gamma == t->gamma &&
           s->minimize && t->minimize && s->minimize->id == t->minimize->id;
  }
  if (!same) return werr(w, a->nodes[0], "the .net written compiles to another model (its outputs, losses or train block differ)");
  return 0;
}

int frontend_emit_net(Graph *g, const NetOpts *no, FILE *out, NetRename **ren, int *nren) {
  char *text = NULL;
  size_t tlen = 0;
  FILE *f = open_memstream(&text, &tlen);
  if (!f) ncc_die("out of memory");
  W w;
  memset(&w, 0, sizeof w);
  w.g = g;
  w.ar = g->arena;
  w.no = no;
  int nv = g->next_value_id + 1, nn = 0;
  for (int i = 0; i < g->nnodes; i++) nn = g->nodes[i]->id + 1 > nn ? g->nodes[i]->id + 1 : nn;
  w.var = calloc((size_t)nv, sizeof *w.var);
  w.pinned = calloc((size_t)nv, 1);
  w.inl = calloc((size_t)nv, 1);
  w.pname = calloc((size_t)nn + 1, sizeof *w.pname);
  w.owner = calloc((size_t)nn + 1, sizeof *w.owner);
  w.lname = calloc((size_t)nn + 1, sizeof *w.lname);
  if (!w.var || !w.pinned || !w.inl || !w.pname || !w.owner || !w.lname) ncc_die("out of memory");
  if (ren) *ren = NULL;
  if (nren) *nren = 0;

  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead) return werr(&w, n, "the graph has nodes a pass removed; --emit=net writes the graph as the frontend built it");
    if ((ncc_ops[n->op].flags & (OPF_INTERNAL | OPF_UPDATE)) || (n->op == OP_TRANSPOSE && n->a.flip))
      werr(&w, n, "only a pass makes this op; --emit=net writes the graph as the frontend built it (no --passes)");
  }
  if (w.errors) goto done;
  plan_params(&w);

  /* names variables must not take: inputs, outputs, losses, the batch const */
  w.bconst = g->batch_const && ident_ok(g->batch_const) ? g->batch_const : NULL;
  if (w.bconst) strs_add(&w.taken_vars, w.bconst);
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->op == OP_INPUT) strs_add(&w.taken_vars, g->nodes[i]->name);
  for (int i = 0; i < g->noutputs; i++) strs_add(&w.taken_vars, g->outputs[i].name);
  for (int i = 0; i < g->nlosses; i++) strs_add(&w.taken_vars, g->losses[i].name);
  /* outputs and losses under names .net reads (an ONNX output "output" is output_) */
  NamedValue *outs = ARENA_ARRAY(w.ar, NamedValue, g->noutputs + 1), *losses = ARENA_ARRAY(w.ar, NamedValue, g->nlosses + 1);
  int renamed_outs = 0;
  for (int i = 0; i < g->noutputs; i++) {
    outs[i] = g->outputs[i];
    if (!ident_ok(outs[i].name)) outs[i].name = fresh_var(&w, arena_printf(w.ar, "%s_", outs[i].name)), renamed_outs = 1;
  }
  for (int i = 0; i < g->nlosses; i++) {
    losses[i] = g->losses[i];
    if (!ident_ok(losses[i].name)) losses[i].name = fresh_var(&w, arena_printf(w.ar, "%s_", losses[i].name));
  }

  const char *model = ident_ok(g->model) ? g->model : arena_printf(w.ar, "m_%s", g->model);
  if (no && no->banner) fputs(no->banner, f);
  fprintf(f, "model %s\n", model);
  int64_t batch = 0;
  if (w.bconst) {
    for (int i = 0; i < g->nnodes && !batch; i++)
      if (g->nodes[i]->op == OP_INPUT && g->nodes[i]->out->shape.rank > 0) batch = g->nodes[i]->out->shape.d[0];
    fprintf(f, "const %s = %lld   # the batch: --set %s=K compiles it for another\n", w.bconst, (long long)batch,
            w.bconst);
    w.batch = batch;
  }
  int blank_after_inputs = 0, deferring = 0;
  for (int i = 0; i < g->nnodes && !w.errors; i++) {
    Node *n = g->nodes[i];
    Value *v = n->out;
    if (n->op == OP_INPUT) {
      const char *nm = n->name;
      if (!ident_ok(nm)) {   /* an ONNX input named like a .net keyword */
        nm = fresh_var(&w, arena_printf(w.ar, "%s_", n->name));
      }
      w.var[v->id] = nm;
      w.pinned[v->id] = 1;
      fprintf(f, "input %s: %s[", nm, dtype_name(v->dtype));
      for (int d = 0; d < v->shape.rank; d++) {
        if (d == 0 && w.bconst) fprintf(f, "%s", w.bconst);
        else fprintf(f, "%s%lld", d ? ", " : "", (long long)v->shape.d[d]);
      }
      fprintf(f, "]%s\n", strcmp(nm, n->name) ? arena_printf(w.ar, "   # '%s' in the source: a keyword of .net", n->name) : "");
      blank_after_inputs = 1;
      continue;
    }
    if (blank_after_inputs) { fputc('\n', f); blank_after_inputs = 0; }
    if (n->op == OP_CONST) continue;   /* a number where it is read */
    if (n->op == OP_PARAM && w.owner[n->id]) continue;   /* made by its layer's call */
    const char *expr, *note = NULL;
    if (n->op == OP_PARAM) {
      char nm[300] = "";
      size_t nk = 0;
      name_arg(&w, n, OP_PARAM, w.pname[n->id], nm, sizeof nm, &nk);
      expr = arena_printf(w.ar, "parameter(%s%s)", dims_text(&w, v->shape.d, v->shape.rank, NULL), nm);
      if (strcmp(w.pname[n->id], n->name)) note = arena_printf(w.ar, "'%s' in the source", n->name);
    } else {
      expr = call_text(&w, n);
      const char *const *slot = layer_slots(n);
      if (slot && strcmp(w.pname[n->in[1]->def->id], n->in[1]->def->name)) {
        note = "parameters";
        for (int s = 1; s < n->nin; s++) note = arena_printf(w.ar, "%s%s %s", note, s > 1 ? "," : "", n->in[s]->def->name);
        note = arena_printf(w.ar, "%s in the source", note);
      }
    }
    /* the variable */
    const char *out_name = NULL, *loss_name = NULL;
    int is_out = is_named(outs, g->noutputs, v, &out_name);
    int is_loss = is_named(losses, g->nlosses, v, &loss_name);
    const char *var = NULL;
    if (is_loss) var = loss_name;
    else if (is_out) var = out_name;
    if (var) {
      /* an output named like an input (or the batch const) is bound at the end */
      int clash = w.bconst && !strcmp(var, w.bconst);
      for (int j = 0; j < g->nnodes && !clash; j++)
        clash = g->nodes[j]->op == OP_INPUT && !strcmp(g->nodes[j]->name, var);
      if (clash) var = NULL;
    }
    /* An unnamed loss is written inside the expression that reads it (a
     * variable would make it a named loss), and so is every single-use value
     * after it up to that expression's own statement: nested calls build
     * their nodes operands first, left to right, the graph's order here
     * (`loss = cross_entropy(h, y) + (0.5 * mse_loss(h, t))`). */
    if (!var && n->op != OP_PARAM && v->nuses == 1 && (deferring || (ncc_ops[n->op].flags & OPF_LOSS))) {
      size_t ol = strlen(ncc_ops[n->op].name);
      int op_form = (ncc_ops[n->op].flags & OPF_BINARY) && (strncmp(expr, ncc_ops[n->op].name, ol) || expr[ol] != '(');
      w.var[v->id] = op_form ? arena_printf(w.ar, "(%s)", expr) : expr;   /* a + b inside c * (a + b) */
      w.npending++;
      w.pinned[v->id] = 1;
      w.inl[v->id] = 1;
      deferring = 1;
      continue;
    }
    deferring = 0;
    for (int k = 0; !var && n->op != OP_PARAM && k < n->nin; k++) {   /* h = relu(h), h = b + h */
      Value *x = n->in[k];
      if (x->nuses == 1 && !w.pinned[x->id] && x->def->op != OP_PARAM && x->def->op != OP_CONST) var = w.var[x->id];
    }
    if (!var) var = n->op == OP_PARAM ? fresh_var(&w, sanitize_ident(&w, w.pname[n->id])) : fresh_h(&w);
    if (is_out || is_loss || n->op == OP_PARAM) w.pinned[v->id] = 1;
    w.var[v->id] = var;
    if (w.npending)
      werr(&w, n, "a value meant to be written inside this expression is not read by it; .net cannot keep the graph's order");
    if (note) fprintf(f, "%s = %s   # %s\n", var, expr, note);
    else fprintf(f, "%s = %s\n", var, expr);
  }
  if (w.errors) goto done;
  /* outputs and losses whose variable is another name */
  for (int i = 0; i < g->nlosses; i++)
    if (strcmp(w.var[losses[i].v->id], losses[i].name)) fprintf(f, "%s = %s\n", losses[i].name, w.var[losses[i].v->id]);
  for (int i = 0; i < g->noutputs; i++)
    if (strcmp(w.var[outs[i].v->id], outs[i].name)) fprintf(f, "%s = %s\n", outs[i].name, w.var[outs[i].v->id]);
  if (g->noutputs) {
    fprintf(f, "\noutput ");
    for (int i = 0; i < g->noutputs; i++) fprintf(f, "%s%s", i ? ", " : "", outs[i].name);
    if (renamed_outs) {
      fputs("   # in the source:", f);
      for (int i = 0; i < g->noutputs; i++) fprintf(f, "%s %s", i ? "," : "", g->outputs[i].name);
    }
    fputc('\n', f);
  }
  if (g->train.present) {
    const TrainCfg *t = &g->train;
    Node *where = g->nodes[0];
    fprintf(f, "\ntrain {\n  optimizer %s\n", opt_text(&w, t, where));
    if (t->sched == SCHED_STEP)
      fprintf(f, "  schedule step(every=%lld, gamma=%s)\n", (long long)t->every, num_text(&w, where, t->gamma));
    else if (t->sched == SCHED_COSINE)
      fprintf(f, "  schedule cosine(total=%lld)\n", (long long)t->total);
    const char *m = t->minimize ? w.var[t->minimize->id] : NULL;
    if (!m) werr(&w, where, "the train block minimizes a value with no variable");
    else fprintf(f, "  minimize %s\n}\n", m);
  }
done:
  fclose(f);
  if (!w.errors) {   /* compiled back: the same graph, or an error */
    const char *src = arena_printf(w.ar, "%s.net (--emit=net)", g->model);
    char *keep = arena_strndup(w.ar, text, tlen);   /* diagnostics may quote it */
    int errs = diag_errors();
    Graph *back = frontend_load_text(src, keep, tlen, NULL, 0);
    if (!back || diag_errors() != errs) werr(&w, g->nodes[0], "the .net written does not compile back (ncc's bug)");
    else same_graph(&w, g, back);
    ir_graph_free(back);
  }
  if (!w.errors && (fwrite(text, 1, tlen, out) != tlen)) w.errors++;
  free(text);
  free(w.var);
  free(w.pinned);
  free(w.inl);
  free(w.pname);
  free(w.owner);
  free(w.lname);
  free(w.taken_params.s);
  free(w.taken_vars.s);
  if (ren && !w.errors) { *ren = w.ren; *nren = w.nren; }
  else free(w.ren);
  return w.errors ? -1 : 0;
}
