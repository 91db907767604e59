/* elaborate.c — runs a .net file's compile-time program and builds the IR.
 *
 * The AST is interpreted once: consts, lists, loops, `if`s and `def` calls
 * are evaluated here, and every op call becomes ir_node() (shape inference
 * and shape errors happen there, at the op call's location).  So nothing of
 * the surface language survives into the IR.
 *
 * Values (Val) are compile-time numbers, bools, strings, lists, tensors (an
 * IR Value*), "none" (a def without return) and POISON.  An erroneous
 * expression reports once and yields POISON; every operation on POISON
 * yields POISON quietly, so one mistake gives one message, not a cascade.
 * A name assigned inside a branch that could not be decided is bound to
 * POISON too, for the same reason.
 *
 * Names (docs/language.md "Parameter names"): every call frame has a prefix and a
 * table of per-op counters.  A `def` called with name="layer1.0" opens a new
 * prefix and fresh counters; a call without name= is transparent (same
 * prefix, same counters), so that helper functions called several times
 * unnamed give conv2d1, conv2d2, ... rather than colliding.  Auto names are
 * 1-based, counted per op per scope, and only unnamed ops consume a number:
 * the first unnamed conv2d of a scope is `conv2d1`.
 *
 * Limits keep hostile input fast and stack-safe: call depth (200), depth of
 * expression recursion (400), loop iterations in all (100k), evaluation steps
 * (1M), bytes of compile-time values (256 MiB) and the graph's node limit
 * (lowered to 100k during elaboration; ResNet-50 has ~1k nodes).  Hitting a
 * limit reports once and aborts the elaboration.
 *
 * Where docs/language.md is silent, Python's choices: `/` on numbers gives a float
 * (an integral float is accepted where an integer is needed, so `c / 2` works
 * as a channel count), `//` and `%` floor; `else if` chains; lists and
 * strings concatenate with `+`, index with negative indices; builtins len,
 * range (1-3 arguments), min, max, int, float, abs.  `name` is reserved for
 * naming a call and cannot be a def parameter.  A def may be called before
 * its definition (defs are collected first). */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "frontend.h"

enum {
  MAX_CALL_DEPTH = 200,
  MAX_EXPR_DEPTH = 400,
  MAX_LOOP_ITERS = 100000,   /* all loops together */
  MAX_LIST = 1000000,
  FRONTEND_MAX_NODES = 100000,
};
static const int64_t MAX_STEPS = 1000000;   /* evaluations and statements; ResNet-50 takes ~10k */
/* compile-time lists and strings are immutable and copied on `+`, so a loop
 * that grows one is quadratic: the arena's size bounds it */
static const size_t MAX_ARENA_BYTES = (size_t)256 << 20;

typedef enum { V_POISON, V_NONE, V_INT, V_FLOAT, V_BOOL, V_STR, V_LIST, V_TENSOR } VKind;
typedef struct Val Val;
struct Val {
  VKind k;
  int n;            /* V_LIST: items */
  Loc f0;           /* only in the table of parameters: the call that made it */
  union {
    int64_t i;      /* V_INT, V_BOOL */
    double f;
    const char *s;
    Val *items;
    Value *t;
  };
};
static const Val POISON = {.k = V_POISON};
static const Val NONE = {.k = V_NONE};
static Val vint(int64_t i) { return (Val){.k = V_INT, .i = i}; }
static Val vfloat(double f) { return (Val){.k = V_FLOAT, .f = f}; }
static Val vbool(int b) { return (Val){.k = V_BOOL, .i = !!b}; }
static Val vstr(const char *s) { return (Val){.k = V_STR, .s = s}; }
static Val vtensor(Value *t) { return t ? (Val){.k = V_TENSOR, .t = t} : POISON; }

/* ---- scopes: small open-addressing hash tables in the elaboration arena ---- */
typedef struct Bind { const char *name; Val v; Loc loc; int is_const; } Bind;
typedef struct Scope { Bind *tab; int cap, n; } Scope;

static unsigned hash_str(const char *s) {
  unsigned h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

static Bind *scope_find(Scope *sc, const char *name) {
  if (!sc || !sc->cap) return NULL;
  for (unsigned i = hash_str(name) & (unsigned)(sc->cap - 1);; i = (i + 1) & (unsigned)(sc->cap - 1)) {
    if (!sc->tab[i].name) return NULL;
    if (strcmp(sc->tab[i].name, name) == 0) return &sc->tab[i];
  }
}

static Bind *scope_put(Arena *ar, Scope *sc, const char *name) {
  Bind *b = scope_find(sc, name);
  if (b) return b;
  if ((sc->n + 1) * 2 > sc->cap) {
    int cap = sc->cap ? sc->cap * 2 : 16;
    Bind *old = sc->tab;
    int oldcap = sc->cap;
    sc->tab = ARENA_ARRAY(ar, Bind, cap);
    sc->cap = cap;
    sc->n = 0;
    for (int i = 0; i < oldcap; i++)
      if (old[i].name) *scope_put(ar, sc, old[i].name) = old[i];
  }
  unsigned i = hash_str(name) & (unsigned)(sc->cap - 1);
  while (sc->tab[i].name) i = (i + 1) & (unsigned)(sc->cap - 1);
  sc->tab[i].name = name;
  sc->n++;
  return &sc->tab[i];
}

/* ---- the elaborator ---- */
typedef struct Frame Frame;
struct Frame {
  Frame *parent;
  Scope *locals;        /* NULL at top level: bindings go to the globals */
  const char *prefix;   /* "" at top level */
  int *counts;          /* per-op counters of the naming scope */
  const char *fname;    /* def name, NULL at top level */
  Loc call;             /* where this frame was called */
  Val ret;
  int returned;
};

typedef struct Elab {
  Graph *g;
  Arena *ar;            /* values, strings, scopes: freed with the graph's arena */
  Scope globals, defs, params, inputs;
  Frame *fr;
  int depth, edepth;
  int64_t steps, iters;
  int abort;
  int errors0;      /* diag_errors() at the start: stop after many errors */
  const SetOpt *sets; int nsets; int *set_used;
  NamedValue *outs; int nouts, capouts;
  NamedValue *losses; int nlosses, caplosses;
  Loc *outlocs;
  int train_seen;
  Loc train_loc;
  int inputs_seen;      /* Graph.batch_const is decided by the first input, kept while the others agree */
} Elab;

/* "in the call of 'basic' here" for each enclosing call, innermost first;
 * a run of calls from one place (recursion) is shown once with its count. */
static void call_notes(Elab *E) {
  int shown = 0;
  for (Frame *f = E->fr; f && f->fname;) {
    int n = 1;
    Frame *g = f->parent;
    while (g && g->fname && g->call.line == f->call.line && g->call.col == f->call.col && g->call.file == f->call.file) {
      n++;
      g = g->parent;
    }
    if (shown++ == 4) { diag_note(f->call, "... (and more enclosing calls)"); break; }
    if (n > 1) diag_note(f->call, "in the call of '%s' here (%d nested calls from this place)", f->fname, n);
    else diag_note(f->call, "in the call of '%s' here", f->fname);
    f = g;
  }
}

__attribute__((format(printf, 3, 4)))
static void err(Elab *E, Loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_verror(loc, fmt, ap);
  va_end(ap);
  call_notes(E);
}

static void fatal_limit(Elab *E) { E->abort = 1; }

static const char *kind_name(VKind k) {
  switch (k) {
  case V_POISON: return "an erroneous value";
  case V_NONE: return "nothing (a def without return)";
  case V_INT: return "an integer";
  case V_FLOAT: return "a number";
  case V_BOOL: return "a bool";
  case V_STR: return "a string";
  case V_LIST: return "a list";
  case V_TENSOR: return "a tensor";
  }
  return "?";
}

/* "an integer (3)", "a tensor f32[1, 2]": what an error says it found. */
static const char *describe(Elab *E, Val v) {
  char buf[160];
  switch (v.k) {
  case V_INT: return arena_printf(E->ar, "an integer (%lld)", (long long)v.i);
  case V_FLOAT: return arena_printf(E->ar, "a number (%g)", v.f);
  case V_BOOL: return v.i ? "a bool (true)" : "a bool (false)";
  case V_STR: return arena_printf(E->ar, "a string (\"%.40s\")", v.s);
  case V_LIST: return arena_printf(E->ar, "a list of %d items", v.n);
  case V_TENSOR: return arena_printf(E->ar, "a tensor %s", shape_str(buf, sizeof buf, v.t->dtype, &v.t->shape));
  default: return kind_name(v.k);
  }
}

static const char *tshape(Elab *E, Value *t) {
  char buf[160];
  return arena_strdup(E->ar, shape_str(buf, sizeof buf, t->dtype, &t->shape));
}

/* Levenshtein distance, for "did you mean". */
static int edit_distance(const char *a, const char *b) {
  int la = (int)strlen(a), lb = (int)strlen(b);
  if (la > 40 || lb > 40) return 99;
  int d[41][41];
  for (int i = 0; i <= la; i++) d[i][0] = i;
  for (int j = 0; j <= lb; j++) d[0][j] = j;
  for (int i = 1; i <= la; i++)
    for (int j = 1; j <= lb; j++) {
      int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
      d[i][j] = c;
    }
  return d[la][lb];
}

typedef struct Suggest { const char *best; int dist; } Suggest;
static void suggest(Suggest *s, const char *want, const char *cand) {
  int d = edit_distance(want, cand);
  int lim = (int)strlen(want) / 3 + 1;
  if (d <= lim && (!s->best || d < s->dist)) { s->best = cand; s->dist = d; }
}
static const char *did_you_mean(Elab *E, Suggest *s) {
  return s->best ? arena_printf(E->ar, "; did you mean '%s'?", s->best) : "";
}

/* ---- value helpers ---- */
static int is_num(Val v) { return v.k == V_INT || v.k == V_FLOAT; }
static double num(Val v) { return v.k == V_INT ? (double)v.i : v.f; }

/* An integer where one is needed; an integral float is accepted, since `/`
 * gives floats as in Python (`c / 2` for a channel count). */
static int to_int(Elab *E, Val v, Loc loc, const char *what, int64_t *out) {
  if (v.k == V_POISON) return -1;
  if (v.k == V_INT) { *out = v.i; return 0; }
  if (v.k == V_FLOAT && v.f == floor(v.f) && fabs(v.f) < 9e15) { *out = (int64_t)v.f; return 0; }
  err(E, loc, "%s must be an integer, got %s", what, describe(E, v));
  return -1;
}

static int to_float(Elab *E, Val v, Loc loc, const char *what, double *out) {
  if (v.k == V_POISON) return -1;
  if (is_num(v)) { *out = num(v); return 0; }
  err(E, loc, "%s must be a number, got %s", what, describe(E, v));
  return -1;
}

static int to_bool(Elab *E, Val v, Loc loc, const char *what, int *out) {
  if (v.k == V_POISON) return -1;
  if (v.k == V_BOOL) { *out = (int)v.i; return 0; }
  if (is_num(v)) { *out = num(v) != 0; return 0; }
  err(E, loc, "%s must be true or false, got %s%s", what, describe(E, v),
      v.k == V_TENSOR ? " (a tensor has no truth value at compile time)" : "");
  return -1;
}

static int fmt_val(Elab *E, char *buf, size_t n, size_t *k, Val v, int depth) {
  if (depth > 50) return -1;
  switch (v.k) {
  case V_INT: *k += (size_t)snprintf(buf + *k, *k < n ? n - *k : 0, "%lld", (long long)v.i); break;
  case V_FLOAT: *k += (size_t)snprintf(buf + *k, *k < n ? n - *k : 0, "%g", v.f); break;
  case V_BOOL: *k += (size_t)snprintf(buf + *k, *k < n ? n - *k : 0, "%s", v.i ? "true" : "false"); break;
  case V_STR: *k += (size_t)snprintf(buf + *k, *k < n ? n - *k : 0, "%s", v.s); break;
  case V_LIST:
    *k += (size_t)snprintf(buf + *k, *k < n ? n - *k : 0, "[");
    for (int i = 0; i < v.n && *k < n; i++) {
      if (i) *k += (size_t)snprintf(buf + *k, *k < n ? n - *k : 0, ", ");
      if (fmt_val(E, buf, n, k, v.items[i], depth + 1)) return -1;
    }
    *k += (size_t)snprintf(buf + *k, *k < n ? n - *k : 0, "]");
    break;
  default: return -1;
  }
  return 0;
}

static int val_eq(Val a, Val b, int depth) {
  if (depth > 100) return 0;
  if (is_num(a) && is_num(b)) return num(a) == num(b);
  if (a.k != b.k) return 0;
  switch (a.k) {
  case V_BOOL: return a.i == b.i;
  case V_STR: return strcmp(a.s, b.s) == 0;
  case V_LIST:
    if (a.n != b.n) return 0;
    for (int i = 0; i < a.n; i++)
      if (!val_eq(a.items[i], b.items[i], depth + 1)) return 0;
    return 1;
  case V_TENSOR: return a.t == b.t;
  case V_NONE: return 1;
  default: return 0;
  }
}

/* ---- names ---- */
static Bind *lookup(Elab *E, const char *name) {
  if (E->fr->locals) {
    Bind *b = scope_find(E->fr->locals, name);
    if (b) return b;
    b = scope_find(&E->globals, name);   /* a def sees only the top-level consts */
    return b && b->is_const ? b : NULL;
  }
  return scope_find(&E->globals, name);
}

static Scope *cur_scope(Elab *E) { return E->fr->locals ? E->fr->locals : &E->globals; }

static void bind(Elab *E, const char *name, Val v, Loc loc) {
  Bind *b = scope_put(E->ar, cur_scope(E), name);
  b->v = v;
  b->loc = loc;
}

static Val undefined(Elab *E, const char *name, Loc loc) {
  Suggest s = {0};
  Scope *scs[2] = {E->fr->locals, &E->globals};
  for (int k = 0; k < 2; k++) {
    Scope *sc = scs[k];
    if (!sc) continue;
    for (int i = 0; i < sc->cap; i++)
      if (sc->tab[i].name && (k == 0 || !E->fr->locals || sc->tab[i].is_const)) suggest(&s, name, sc->tab[i].name);
  }
  if (E->fr->locals && scope_find(&E->globals, name))
    err(E, loc, "undefined name '%s' (a def sees only its parameters, its own names and the top-level consts)", name);
  else
    err(E, loc, "undefined name '%s'%s", name, did_you_mean(E, &s));
  bind(E, name, POISON, loc);   /* report it once */
  return POISON;
}

/* The full name of a layer: "layer1.0" + "." + "conv1". */
static const char *scoped(Elab *E, const char *local) {
  const char *p = E->fr->prefix;
  return p && *p ? arena_printf(E->ar, "%s.%s", p, local) : arena_strdup(E->ar, local);
}

static const char *layer_name(Elab *E, int op, const char *given) {
  if (given) return scoped(E, given);
  int k = ++E->fr->counts[op];
  return scoped(E, arena_printf(E->ar, "%s%d", ncc_ops[op].name, k));
}

/* Parameter named `name`, with a duplicate check that shows both places. */
static Value *param_named(Elab *E, const char *name, const char *layer, int kind, Shape s, Loc loc) {
  Bind *b = scope_find(&E->params, name);
  if (b) {
    diag_error(loc, "two parameters are named '%s'; give the layers distinct name= values", name);
    diag_note(b->loc, "'%s' was first defined here", name);
    if (b->v.k == V_STR) diag_note(b->v.f0, "(in the call of '%s' here)", b->v.s);
    call_notes(E);
    return NULL;
  }
  int64_t numel = 1;
  for (int i = 0; i < s.rank; i++)
    if (s.d[i] < 1 || __builtin_mul_overflow(numel, s.d[i], &numel) || numel > ((int64_t)1 << 40)) {
      char buf[160];
      err(E, loc, "parameter '%s' would be %s: too large", name, shape_str(buf, sizeof buf, DT_F32, &s));
      return NULL;
    }
  Value *v = ir_param(E->g, name, kind, &s, layer, loc);
  if (!v) {
    if (E->g->max_nodes < 0) fatal_limit(E);
    return NULL;
  }
  b = scope_put(E->ar, &E->params, name);
  b->loc = loc;
  if (E->fr->fname) {   /* remember the call that made it, for the note above */
    b->v.k = V_STR;
    b->v.s = E->fr->fname;
    b->v.f0 = E->fr->call;
  }
  return v;
}

/* A layer's parameter: "conv1" + "." + "weight". */
static Value *param(Elab *E, const char *layer, const char *suffix, int kind, Shape s, Loc loc) {
  return param_named(E, arena_printf(E->ar, "%s.%s", layer, suffix), layer, kind, s, loc);
}

static Val eval(Elab *E, Expr *e);
static void exec_block(Elab *E, Block *b);

/* ---- compile-time arithmetic ---- */
static Val tensor_binop(Elab *E, int op, Val a, Val b, Loc loc);

static Val arith(Elab *E, int op, Val a, Val b, Loc loc) {
  if (a.k == V_POISON || b.k == V_POISON) return POISON;
  if (a.k == V_TENSOR || b.k == V_TENSOR) {
    if (op == BO_ADD || op == BO_SUB || op == BO_MUL || op == BO_DIV) return tensor_binop(E, op, a, b, loc);
    err(E, loc, "operator '%s' does not apply to tensors (only + - * / do, elementwise)",
        op == BO_MOD ? "%" : "//");
    return POISON;
  }
  if (op == BO_ADD && a.k == V_STR && b.k == V_STR)
    return vstr(arena_printf(E->ar, "%s%s", a.s, b.s));
  if (op == BO_ADD && a.k == V_LIST && b.k == V_LIST) {
    if ((int64_t)a.n + b.n > MAX_LIST) { err(E, loc, "list too long"); return POISON; }
    Val r = {.k = V_LIST, .n = a.n + b.n};
    r.items = ARENA_ARRAY(E->ar, Val, r.n + 1);
    memcpy(r.items, a.items, sizeof(Val) * (size_t)a.n);
    memcpy(r.items + a.n, b.items, sizeof(Val) * (size_t)b.n);
    return r;
  }
  if (!is_num(a) || !is_num(b)) {
    static const char *const names[] = {['+'] = "+", ['-'] = "-", ['*'] = "*", ['/'] = "/", ['%'] = "%", ['f'] = "//"};
    err(E, loc, "operator '%s' needs numbers or tensors, got %s and %s", names[op], describe(E, a), describe(E, b));
    return POISON;
  }
  if (a.k == V_INT && b.k == V_INT && op != BO_DIV) {
    int64_t x = a.i, y = b.i, r = 0;
    int ovf = 0;
    switch (op) {
    case BO_ADD: ovf = __builtin_add_overflow(x, y, &r); break;
    case BO_SUB: ovf = __builtin_sub_overflow(x, y, &r); break;
    case BO_MUL: ovf = __builtin_mul_overflow(x, y, &r); break;
    case BO_MOD: case BO_IDIV:
      if (y == 0) { err(E, loc, "division by zero"); return POISON; }
      if (x == INT64_MIN && y == -1) { ovf = 1; break; }
      r = op == BO_MOD ? x % y : x / y;
      if (op == BO_MOD && r != 0 && ((r < 0) != (y < 0))) r += y;          /* Python's sign rule */
      if (op == BO_IDIV && (x % y != 0) && ((x < 0) != (y < 0))) r -= 1;   /* floor */
      break;
    }
    if (ovf) { err(E, loc, "integer overflow"); return POISON; }
    return vint(r);
  }
  double x = num(a), y = num(b);
  switch (op) {
  case BO_ADD: return vfloat(x + y);
  case BO_SUB: return vfloat(x - y);
  case BO_MUL: return vfloat(x * y);
  case BO_DIV:
    if (y == 0) { err(E, loc, "division by zero"); return POISON; }
    return vfloat(x / y);
  case BO_IDIV:
    if (y == 0) { err(E, loc, "division by zero"); return POISON; }
    return vfloat(floor(x / y));
  case BO_MOD:
    if (y == 0) { err(E, loc, "division by zero"); return POISON; }
    { double r = fmod(x, y); if (r != 0 && ((r < 0) != (y < 0))) r += y; return vfloat(r); }
  }
  return POISON;
}

static Val compare(Elab *E, int op, Val a, Val b, Loc loc) {
  if (a.k == V_POISON || b.k == V_POISON) return POISON;
  if (a.k == V_TENSOR || b.k == V_TENSOR) {
    err(E, loc, "cannot compare tensors at compile time; compare their shapes (x.shape[i]) instead");
    return POISON;
  }
  if (op == BO_EQ) return vbool(val_eq(a, b, 0));
  if (op == BO_NE) return vbool(!val_eq(a, b, 0));
  int c;
  if (is_num(a) && is_num(b)) {
    double x = num(a), y = num(b);
    if (a.k == V_INT && b.k == V_INT) c = a.i < b.i ? -1 : a.i > b.i;
    else c = x < y ? -1 : x > y;
  } else if (a.k == V_STR && b.k == V_STR) {
    c = strcmp(a.s, b.s);
  } else {
    err(E, loc, "cannot order %s and %s", describe(E, a), describe(E, b));
    return POISON;
  }
  switch (op) {
  case BO_LT: return vbool(c < 0);
  case BO_LE: return vbool(c <= 0);
  case BO_GT: return vbool(c > 0);
  default: return vbool(c >= 0);
  }
}

/* A number used with a tensor becomes a CONST scalar node (broadcast). */
static Value *const_node(Elab *E, double f, Loc loc) {
  Attrs a;
  ir_attrs_init(&a);
  a.fval = f;
  return ir_node(E->g, OP_CONST, NULL, 0, &a, NULL, NULL, loc);
}

static Val make_op(Elab *E, int op, Value **in, int nin, Attrs *a, const char *layer, Loc loc) {
  Value *v = ir_node(E->g, op, in, nin, a, layer, layer, loc);
  if (!v) {
    if (E->g->max_nodes < 0) fatal_limit(E);
    else call_notes(E);
    return POISON;
  }
  return vtensor(v);
}

static Val tensor_binop_named(Elab *E, int op, Val a, Val b, Loc loc, const char *given) {
  Value *in[2];
  Val ab[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    if (ab[i].k == V_TENSOR) in[i] = ab[i].t;
    else if (is_num(ab[i])) {
      in[i] = const_node(E, num(ab[i]), loc);
      if (!in[i]) {
        if (E->g->max_nodes < 0) fatal_limit(E);
        return POISON;
      }
    } else {
      err(E, loc, "elementwise arithmetic needs tensors or numbers, got %s", describe(E, ab[i]));
      return POISON;
    }
  }
  int irop = op == BO_ADD ? OP_ADD : op == BO_SUB ? OP_SUB : op == BO_MUL ? OP_MUL : OP_DIV;
  return make_op(E, irop, in, 2, NULL, layer_name(E, irop, given), loc);
}

static Val tensor_binop(Elab *E, int op, Val a, Val b, Loc loc) {
  return tensor_binop_named(E, op, a, b, loc, NULL);
}

/* ---- op calls ----
 * How a call binds its arguments is the `args` column of ir/ops.def
 * ("x:tensor out:int stride:int2=1 ..."), parsed once into OpSpecs here; what
 * the values mean (attributes, parameters) is call_op's switch below. */
typedef enum { A_T, A_TN, A_INT, A_FLOAT, A_BOOL, A_INT2, A_INTS, A_TENSORS } AKind;
enum { MAX_OP_ARGS = 8 };
typedef struct ArgSpec { const char *name; AKind k; const char *def; } ArgSpec;   /* def NULL: required */
typedef struct OpSpec { const char *name; int op; int n; ArgSpec a[MAX_OP_ARGS]; } OpSpec;

static const struct { const char *s; AKind k; } arg_kinds[] = {
  {"tensor", A_T}, {"tensor|number", A_TN}, {"int", A_INT}, {"float", A_FLOAT}, {"bool", A_BOOL},
  {"int2", A_INT2}, {"ints", A_INTS}, {"tensors", A_TENSORS},
};

/* A spec that does not parse is a bug of ops.def: every op's is parsed at
 * the first call of any, so any test that elaborates a model finds it. */
static void parse_spec(OpSpec *sp, int op) {
  static char pool[4096];
  static size_t used;
  const char *src = ncc_ops[op].args;
  size_t len = strlen(src) + 1;
  if (used + len > sizeof pool) ncc_die("ops.def: the argument specs need more than %zu bytes", sizeof pool);
  char *buf = memcpy(pool + used, src, len);
  used += len;
  sp->name = ncc_ops[op].name;
  sp->op = op;
  sp->n = 0;
  for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
    if (sp->n == MAX_OP_ARGS) ncc_die("ops.def: %s has more than %d arguments", sp->name, MAX_OP_ARGS);
    ArgSpec *a = &sp->a[sp->n++];
    char *kind = strchr(tok, ':');
    if (!kind) ncc_die("ops.def: %s: argument '%s' has no kind", sp->name, tok);
    *kind++ = 0;
    char *def = strchr(kind, '=');
    if (def) *def++ = 0;
    a->name = tok;
    a->def = def;
    size_t k = 0;
    while (k < sizeof arg_kinds / sizeof arg_kinds[0] && strcmp(arg_kinds[k].s, kind) != 0) k++;
    if (k == sizeof arg_kinds / sizeof arg_kinds[0]) ncc_die("ops.def: %s: unknown argument kind '%s'", sp->name, kind);
    a->k = arg_kinds[k].k;
  }
}

static const OpSpec *find_op(const char *name) {
  static OpSpec specs[OP__COUNT];
  static int ready;
  if (!ready) {
    for (int op = 0; op < OP__COUNT; op++)
      if (!(ncc_ops[op].flags & (OPF_SOURCE | OPF_INTERNAL))) parse_spec(&specs[op], op);
    ready = 1;
  }
  int op = ir_op_lookup(name);
  return op < 0 ? NULL : &specs[op];
}

/* The index of argument `name` of the spec; ncc's bug when it has none. */
static int argi(const OpSpec *sp, const char *name) {
  for (int i = 0; i < sp->n; i++)
    if (strcmp(sp->a[i].name, name) == 0) return i;
  ncc_die("ops.def: %s has no argument '%s'", sp->name, name);
}

static const char *const builtin_fns[] = {"len", "range", "min", "max", "int", "float", "abs", NULL};
static int is_builtin_fn(const char *n) {
  for (int i = 0; builtin_fns[i]; i++)
    if (strcmp(builtin_fns[i], n) == 0) return 1;
  return 0;
}

/* A bound argument after conversion. */
typedef struct Arg {
  Val v;
  Loc loc;
  int given;
  int64_t i;
  double f;
  int pair[2];
  int64_t ints[NCC_MAX_RANK];
  int nints;
} Arg;

static int small_int(Elab *E, int64_t v, Loc loc, const char *op, const char *what, int *out) {
  if (v < -1000000 || v > 1000000) {
    err(E, loc, "%s: %s = %lld is out of range", op, what, (long long)v);
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int convert_arg(Elab *E, const OpSpec *sp, const ArgSpec *as, Arg *a) {
  Val v = a->v;
  if (v.k == V_POISON) return -1;
  const char *what = arena_printf(E->ar, "%s: argument '%s'", sp->name, as->name);
  switch (as->k) {
  case A_T:
    if (v.k != V_TENSOR) {
      err(E, a->loc, "%s must be a tensor, got %s", what, describe(E, v));
      return -1;
    }
    return 0;
  case A_TN:
    if (v.k != V_TENSOR && !is_num(v)) {
      err(E, a->loc, "%s must be a tensor or a number, got %s", what, describe(E, v));
      return -1;
    }
    return 0;
  case A_INT: return to_int(E, v, a->loc, what, &a->i);
  case A_FLOAT: return to_float(E, v, a->loc, what, &a->f);
  case A_BOOL: { int b; if (to_bool(E, v, a->loc, what, &b)) return -1; a->i = b; return 0; }
  case A_INT2: {
    int64_t h, w;
    if (v.k == V_LIST) {
      if (v.n != 2) {
        err(E, a->loc, "%s must be an integer or [h, w], got a list of %d items", what, v.n);
        return -1;
      }
      if (to_int(E, v.items[0], a->loc, what, &h) || to_int(E, v.items[1], a->loc, what, &w)) return -1;
    } else if (is_num(v)) {
      if (to_int(E, v, a->loc, what, &h)) return -1;
      w = h;
    } else {
      err(E, a->loc, "%s must be an integer or [h, w], got %s", what, describe(E, v));
      return -1;
    }
    if (small_int(E, h, a->loc, sp->name, as->name, &a->pair[0]) ||
        small_int(E, w, a->loc, sp->name, as->name, &a->pair[1])) return -1;
    return 0;
  }
  case A_INTS:
    if (v.k != V_LIST) {
      err(E, a->loc, "%s must be a list of integers, got %s", what, describe(E, v));
      return -1;
    }
    if (v.n > NCC_MAX_RANK) {
      err(E, a->loc, "%s has %d items; at most %d dimensions are supported", what, v.n, NCC_MAX_RANK);
      return -1;
    }
    for (int i = 0; i < v.n; i++)
      if (to_int(E, v.items[i], a->loc, what, &a->ints[i])) return -1;
    a->nints = v.n;
    return 0;
  case A_TENSORS: ncc_die("%s: a variadic argument is bound by its op (op_concat)", what);
  }
  return -1;
}

static Val parse_default(const char *d) {
  if (strcmp(d, "true") == 0) return vbool(1);
  if (strcmp(d, "false") == 0) return vbool(0);
  if (strpbrk(d, ".e")) return vfloat(strtod(d, NULL));
  return vint(strtoll(d, NULL, 10));
}

/* Evaluated call arguments. */
typedef struct CallArgs {
  int n;
  Val *v;
  Loc *loc;
  const char **kw;
  Loc *kwloc;
  const char *name;   /* name= */
  Loc nameloc;
  int has_name;
  int poison;
} CallArgs;

static int eval_args(Elab *E, Expr *c, CallArgs *ca) {
  memset(ca, 0, sizeof *ca);
  ca->v = ARENA_ARRAY(E->ar, Val, c->nitems + 1);
  ca->loc = ARENA_ARRAY(E->ar, Loc, c->nitems + 1);
  ca->kw = ARENA_ARRAY(E->ar, const char *, c->nitems + 1);
  ca->kwloc = ARENA_ARRAY(E->ar, Loc, c->nitems + 1);
  int seen_kw = 0;
  for (int i = 0; i < c->nitems; i++) {
    Val v = eval(E, c->items[i]);
    if (E->abort) return -1;
    if (v.k == V_POISON) ca->poison = 1;
    if (c->kw[i] && strcmp(c->kw[i], "name") == 0) {
      if (ca->has_name) { err(E, c->kwloc[i], "name= is given twice"); ca->poison = 1; continue; }
      ca->has_name = 1;
      ca->nameloc = c->kwloc[i];
      if (v.k == V_STR) ca->name = v.s;
      else if (v.k == V_INT) ca->name = arena_printf(E->ar, "%lld", (long long)v.i);
      else if (v.k != V_POISON) { err(E, c->items[i]->loc, "name= must be a string, got %s", describe(E, v)); ca->poison = 1; }
      /* names end up in state_dict keys, C comments and kernel names */
      if (ca->name && !frontend_name_ok(ca->name)) {
        err(E, c->items[i]->loc, "name= may hold only letters, digits, '_', '.' and '-' (at most 199), got \"%.60s\"",
            ca->name);
        ca->poison = 1;
      }
      continue;
    }
    if (c->kw[i]) seen_kw = 1;
    else if (seen_kw) {
      err(E, c->items[i]->loc, "a positional argument cannot follow keyword arguments");
      ca->poison = 1;
    }
    for (int j = 0; c->kw[i] && j < ca->n; j++)
      if (ca->kw[j] && strcmp(ca->kw[j], c->kw[i]) == 0) {
        err(E, c->kwloc[i], "argument '%s' is given twice", c->kw[i]);
        ca->poison = 1;
      }
    ca->v[ca->n] = v;
    ca->loc[ca->n] = c->items[i]->loc;
    ca->kw[ca->n] = c->kw[i];
    ca->kwloc[ca->n] = c->kwloc[i];
    ca->n++;
  }
  return 0;
}

/* Binds call arguments to an op's specification: positional in order, then
 * keywords; defaults for the rest. Returns -1 after reporting. */
static int bind_op_args(Elab *E, const OpSpec *sp, CallArgs *ca, Loc cloc, Arg *out, int first) {
  int ns = sp->n, bad = 0;
  for (int i = 0; i < ns; i++) memset(&out[i], 0, sizeof out[i]);
  int pos = first;
  for (int j = 0; j < ca->n; j++) {
    if (ca->kw[j]) {
      int k = -1;
      for (int i = 0; i < ns; i++)
        if (strcmp(sp->a[i].name, ca->kw[j]) == 0) k = i;
      if (k < 0) {
        Suggest s = {0};
        for (int i = 0; i < ns; i++) suggest(&s, ca->kw[j], sp->a[i].name);
        suggest(&s, ca->kw[j], "name");
        char list[200];
        size_t l = 0;
        list[0] = 0;
        for (int i = 0; i < ns && l < sizeof list; i++)
          l += (size_t)snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", sp->a[i].name);
        err(E, ca->kwloc[j], "%s has no argument '%s'%s (it takes %s, name)", sp->name, ca->kw[j],
            did_you_mean(E, &s), list);
        bad = 1;
        continue;
      }
      if (out[k].given) {
        err(E, ca->kwloc[j], "%s: argument '%s' is given twice", sp->name, ca->kw[j]);
        bad = 1;
        continue;
      }
      out[k].v = ca->v[j]; out[k].loc = ca->loc[j]; out[k].given = 1;
    } else {
      if (pos >= ns) {
        err(E, ca->loc[j], "%s takes at most %d arguments (and name=), got %d", sp->name, ns, ca->n);
        return -1;
      }
      out[pos].v = ca->v[j]; out[pos].loc = ca->loc[j]; out[pos].given = 1;
      pos++;
    }
  }
  if (bad) return -1;
  for (int i = first; i < ns; i++) {
    if (out[i].given) continue;
    if (!sp->a[i].def) {
      err(E, cloc, "%s needs the argument '%s'", sp->name, sp->a[i].name);
      return -1;
    }
    out[i].loc = cloc;
    if (sp->a[i].def[0] == '@') {
      for (int k = 0; k < ns; k++)
        if (strcmp(sp->a[k].name, sp->a[i].def + 1) == 0) out[i].v = out[k].v;
    } else {
      out[i].v = parse_default(sp->a[i].def);
    }
  }
  if (ca->poison) return -1;
  for (int i = first; i < ns; i++)
    if (convert_arg(E, sp, &sp->a[i], &out[i])) bad = 1;
  return bad ? -1 : 0;
}

static int check_pos(Elab *E, Arg *a, const char *op, const char *what, int min) {
  for (int k = 0; k < 2; k++)
    if (a->pair[k] < min) {
      err(E, a->loc, "%s: %s must be %s, got %d", op, what, min > 0 ? "positive" : "non-negative", a->pair[k]);
      return -1;
    }
  return 0;
}

static Val op_concat(Elab *E, const OpSpec *sp, CallArgs *ca, Loc loc) {
  /* concat(a, b, ..., axis=1) or concat([a, b], axis=1) */
  Value *in[64];
  int nin = 0;
  const ArgSpec *axs = &sp->a[argi(sp, "axis")];
  Arg ax;
  memset(&ax, 0, sizeof ax);
  ax.v = parse_default(axs->def);
  ax.loc = loc;
  for (int j = 0; j < ca->n; j++) {
    if (ca->kw[j]) {
      if (strcmp(ca->kw[j], "axis") != 0) {
        err(E, ca->kwloc[j], "concat has no argument '%s' (it takes tensors, axis, name)", ca->kw[j]);
        return POISON;
      }
      ax.v = ca->v[j]; ax.loc = ca->loc[j];
      continue;
    }
    Val v = ca->v[j];
    Val *items = &v;
    int n = 1;
    if (v.k == V_LIST) { items = v.items; n = v.n; }
    for (int i = 0; i < n; i++) {
      if (items[i].k == V_POISON) return POISON;
      if (items[i].k != V_TENSOR) {
        err(E, ca->loc[j], "concat: inputs must be tensors, got %s", describe(E, items[i]));
        return POISON;
      }
      if (nin == 64) { err(E, ca->loc[j], "concat takes at most 64 tensors"); return POISON; }
      in[nin++] = items[i].t;
    }
  }
  if (ca->poison) return POISON;
  if (nin == 0) { err(E, loc, "concat needs at least one tensor"); return POISON; }
  if (convert_arg(E, sp, axs, &ax)) return POISON;
  int rank = in[0]->shape.rank;
  int64_t axis = ax.i < 0 ? ax.i + rank : ax.i;
  if (axis < 0 || axis >= rank) {
    err(E, ax.loc, "concat: axis %lld is out of range for %s", (long long)ax.i, tshape(E, in[0]));
    return POISON;
  }
  Attrs a;
  ir_attrs_init(&a);
  a.axis = (int)axis;
  return make_op(E, OP_CONCAT, in, nin, &a, layer_name(E, OP_CONCAT, ca->name), loc);
}

/* What a call's bound arguments mean: attributes, parameters made for the
 * layer, checks the shape rule cannot word as well.  Every op of ops.def
 * has its case (no default: -Wswitch names an op added without one). */
static Val call_op(Elab *E, const OpSpec *sp, Expr *c) {
  CallArgs ca;
  if (eval_args(E, c, &ca)) return POISON;
  Loc loc = c->loc;
  if (sp->op == OP_CONCAT) return op_concat(E, sp, &ca, loc);
  Arg A[MAX_OP_ARGS];
  if (bind_op_args(E, sp, &ca, loc, A, 0)) return POISON;
#define ARG(name) (&A[argi(sp, name)])
  Attrs a;
  ir_attrs_init(&a);
  OpKind op = (OpKind)sp->op;
  const char *nm = sp->name;
  Value *x = A[0].v.k == V_TENSOR ? A[0].v.t : NULL;
  Value *in[5];
  switch (op) {
  case OP_CONV2D: {
    if (x->shape.rank != 4) {
      err(E, loc, "conv2d expects a 4-D input [N, C, H, W], got %s", tshape(E, x));
      return POISON;
    }
    Arg *outa = ARG("out");
    int64_t C = x->shape.d[1], out = outa->i, groups = ARG("groups")->i;
    if (out <= 0 || out > (1 << 24)) { err(E, outa->loc, "conv2d: out channels must be positive, got %lld", (long long)out); return POISON; }
    /* the weight's shape needs C / groups: check what shape.c would, in its words */
    if (groups < 1 || groups > (1 << 24)) { err(E, loc, "conv2d: groups must be at least 1, got %lld", (long long)groups); return POISON; }
    if (C % groups) {
      err(E, loc, "conv2d: input has %lld channels but groups=%lld does not divide it (input %s)", (long long)C,
          (long long)groups, tshape(E, x));
      return POISON;
    }
    if (out % groups) {
      err(E, loc, "conv2d: %lld output channels are not divisible by groups=%lld", (long long)out, (long long)groups);
      return POISON;
    }
    if (check_pos(E, ARG("kernel"), nm, "kernel", 1)) return POISON;
    const char *layer = layer_name(E, op, ca.name);
    memcpy(a.kernel, ARG("kernel")->pair, sizeof a.kernel);
    memcpy(a.stride, ARG("stride")->pair, sizeof a.stride);
    memcpy(a.pad, ARG("pad")->pair, sizeof a.pad);
    memcpy(a.dilation, ARG("dilation")->pair, sizeof a.dilation);
    a.groups = (int)groups;
    a.out = out;
    a.has_bias = (int)ARG("bias")->i;
    in[0] = x;
    in[1] = param(E, layer, "weight", PK_WEIGHT, (Shape){4, {out, C / groups, a.kernel[0], a.kernel[1]}}, loc);
    if (!in[1]) return POISON;   /* one report per layer */
    in[2] = a.has_bias ? param(E, layer, "bias", PK_BIAS, (Shape){1, {out}}, loc) : NULL;
    if (!in[1] || (a.has_bias && !in[2])) return POISON;
    return make_op(E, op, in, 2 + a.has_bias, &a, layer, loc);
  }
  case OP_LINEAR: {
    if (x->shape.rank != 2) {
      if (x->shape.rank > 2)
        err(E, loc, "linear expects a 2-D input, got %s; did you mean flatten() first?", tshape(E, x));
      else
        err(E, loc, "linear expects a 2-D input [N, features], got %s", tshape(E, x));
      return POISON;
    }
    Arg *outa = ARG("out");
    int64_t out = outa->i;
    if (out <= 0 || out > (1 << 26)) { err(E, outa->loc, "linear: out features must be positive, got %lld", (long long)out); return POISON; }
    const char *layer = layer_name(E, op, ca.name);
    a.out = out;
    a.has_bias = (int)ARG("bias")->i;
    in[0] = x;
    in[1] = param(E, layer, "weight", PK_WEIGHT, (Shape){2, {out, x->shape.d[1]}}, loc);
    if (!in[1]) return POISON;
    in[2] = a.has_bias ? param(E, layer, "bias", PK_BIAS, (Shape){1, {out}}, loc) : NULL;
    if (!in[1] || (a.has_bias && !in[2])) return POISON;
    return make_op(E, op, in, 2 + a.has_bias, &a, layer, loc);
  }
  case OP_BATCHNORM2D: {
    if (x->shape.rank != 4) {
      err(E, loc, "batchnorm2d expects a 4-D input [N, C, H, W], got %s", tshape(E, x));
      return POISON;
    }
    Arg *eps = ARG("eps");
    if (!(eps->f > 0)) { err(E, eps->loc, "batchnorm2d: eps must be positive"); return POISON; }
    const char *layer = layer_name(E, op, ca.name);
    Shape s = {1, {x->shape.d[1]}};
    a.eps = eps->f;
    a.momentum = ARG("momentum")->f;
    in[0] = x;
    in[1] = param(E, layer, "weight", PK_WEIGHT, s, loc);
    if (!in[1]) return POISON;
    in[2] = param(E, layer, "bias", PK_BIAS, s, loc);
    in[3] = param(E, layer, "running_mean", PK_RUNNING_MEAN, s, loc);
    in[4] = param(E, layer, "running_var", PK_RUNNING_VAR, s, loc);
    for (int i = 1; i < 5; i++) if (!in[i]) return POISON;
    return make_op(E, op, in, 5, &a, layer, loc);
  }
  case OP_LAYERNORM: {
    if (x->shape.rank < 1) {
      err(E, loc, "layernorm expects an input with at least one dimension, got %s", tshape(E, x));
      return POISON;
    }
    Arg *eps = ARG("eps");
    if (!(eps->f > 0)) { err(E, eps->loc, "layernorm: eps must be positive"); return POISON; }
    const char *layer = layer_name(E, op, ca.name);
    Shape s = {1, {x->shape.d[x->shape.rank - 1]}};
    a.eps = eps->f;
    in[0] = x;
    in[1] = param(E, layer, "weight", PK_WEIGHT, s, loc);
    if (!in[1]) return POISON;
    in[2] = param(E, layer, "bias", PK_BIAS, s, loc);
    if (!in[2]) return POISON;
    return make_op(E, op, in, 3, &a, layer, loc);
  }
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: {
    int bo = op == OP_ADD ? BO_ADD : op == OP_SUB ? BO_SUB : op == OP_MUL ? BO_MUL : BO_DIV;
    Arg *l = ARG("a"), *r = ARG("b");
    if (l->v.k != V_TENSOR && r->v.k != V_TENSOR) {
      err(E, loc, "%s needs at least one tensor, got %s and %s (use the operator for numbers)", nm,
          describe(E, l->v), describe(E, r->v));
      return POISON;
    }
    return tensor_binop_named(E, bo, l->v, r->v, loc, ca.name);
  }
  case OP_LEAKY_RELU:
    a.slope = ARG("slope")->f;
    break;
  case OP_DROPOUT: case OP_DROPOUT2D: {
    Arg *p = ARG("p");
    if (!(p->f >= 0 && p->f <= 1)) {
      err(E, p->loc, "%s: p must be a probability in [0, 1], got %g", nm, p->f);
      return POISON;
    }
    a.p = p->f;
    break;
  }
  case OP_MAXPOOL2D: case OP_AVGPOOL2D:   /* shape.c checks the window */
    memcpy(a.kernel, ARG("kernel")->pair, sizeof a.kernel);
    memcpy(a.stride, ARG("stride")->pair, sizeof a.stride);
    memcpy(a.pad, ARG("pad")->pair, sizeof a.pad);
    if (op == OP_MAXPOOL2D) memcpy(a.dilation, ARG("dilation")->pair, sizeof a.dilation);
    break;
  case OP_SOFTMAX: case OP_LOG_SOFTMAX: {
    Arg *ax = ARG("axis");
    int rank = x->shape.rank;
    int64_t axis = ax->i < 0 ? ax->i + rank : ax->i;
    if (axis < 0 || axis >= rank) {
      err(E, ax->loc, "%s: axis %lld is out of range for %s", nm, (long long)ax->i, tshape(E, x));
      return POISON;
    }
    a.axis = (int)axis;
    break;
  }
  case OP_RESHAPE:   /* ir/shape.c resolves -1 and checks the element count */
  case OP_TRANSPOSE: { /* and checks the permutation */
    Arg *l = ARG(op == OP_RESHAPE ? "shape" : "perm");
    a.nlist = l->nints;
    memcpy(a.list, l->ints, sizeof a.list);
    break;
  }
  /* tensors in, no attributes */
  case OP_MATMUL:
  case OP_RELU: case OP_RELU6: case OP_SIGMOID: case OP_TANH: case OP_GELU: case OP_SILU: case OP_HARDSWISH: case OP_SQRT:
  case OP_GAVGPOOL2D:
  case OP_FLATTEN:
  case OP_CROSS_ENTROPY: case OP_NLL_LOSS: case OP_MSE_LOSS:
    break;
  case OP_CONCAT:   /* op_concat, above */
  case OP_INPUT: case OP_PARAM: case OP_CONST: case OP_LOSS_SCALE:/* no call makes a source */
  /* nor an op only autodiff makes (OPF_INTERNAL) */
  case OP_BN_STATS: case OP_BN_TRAIN: case OP_BN_RUNNING: case OP_DROPOUT_APPLY: case OP_ACT_GRAD:
  case OP_CONV2D_BWD_DATA: case OP_CONV2D_BWD_WEIGHT: case OP_LINEAR_BWD_WEIGHT: case OP_SUM_TO:
  case OP_MAXPOOL2D_BWD: case OP_AVGPOOL2D_BWD: case OP_GAVGPOOL2D_BWD: case OP_SOFTMAX_BWD: case OP_LOG_SOFTMAX_BWD:
  case OP_CROSS_ENTROPY_BWD: case OP_NLL_LOSS_BWD: case OP_MSE_LOSS_BWD: case OP_LAYERNORM_BWD_DATA:
  case OP_LAYERNORM_BWD_WEIGHT: case OP_BN_BWD_DATA: case OP_BN_BWD_WEIGHT: case OP_SLICE: case OP_OPTIMIZER:
  case OP_QSCALE: case OP_QUANTIZE: case OP_CAST:
  case OP__COUNT:
    ncc_die("call_op: %s is not called this way", nm);
  }
#undef ARG
  int nin = 0;
  for (int i = 0; i < sp->n; i++)
    if (sp->a[i].k == A_T) in[nin++] = A[i].v.t;
  return make_op(E, op, in, nin, &a, layer_name(E, op, ca.name), loc);
}

/* ---- builtin functions: len, range, min, max, int, float, abs ---- */
static Val make_range(Elab *E, int64_t a, int64_t b, int64_t st, Loc loc) {
  if (st == 0) { err(E, loc, "range: step must not be zero"); return POISON; }
  int64_t n = st > 0 ? (b > a ? (b - a + st - 1) / st : 0) : (a > b ? (a - b - st - 1) / -st : 0);
  if (n > MAX_LIST) {
    err(E, loc, "range of %lld items exceeds the limit of %d; is the bound right?", (long long)n, MAX_LIST);
    fatal_limit(E);
    return POISON;
  }
  Val r = {.k = V_LIST, .n = (int)n};
  r.items = ARENA_ARRAY(E->ar, Val, n + 1);
  for (int64_t i = 0; i < n; i++) r.items[i] = vint(a + i * st);
  return r;
}

static int range_bounds(Elab *E, CallArgs *ca, Loc loc, int64_t *a, int64_t *b, int64_t *st) {
  if (ca->n < 1 || ca->n > 3) { err(E, loc, "range takes 1 to 3 integers, got %d arguments", ca->n); return -1; }
  for (int i = 0; i < ca->n; i++)
    if (ca->kw[i]) { err(E, ca->kwloc[i], "range takes no keyword arguments"); return -1; }
  int64_t v[3];
  for (int i = 0; i < ca->n; i++)
    if (to_int(E, ca->v[i], ca->loc[i], "range bound", &v[i])) return -1;
  *st = 1;
  if (ca->n == 1) { *a = 0; *b = v[0]; }
  else { *a = v[0]; *b = v[1]; if (ca->n == 3) *st = v[2]; }
  if (*a < -((int64_t)1 << 40) || *a > ((int64_t)1 << 40) || *b < -((int64_t)1 << 40) || *b > ((int64_t)1 << 40)) {
    err(E, loc, "range bounds are too large");
    return -1;
  }
  if (*st == 0) { err(E, loc, "range: step must not be zero"); return -1; }
  return 0;
}

static Val call_builtin(Elab *E, Expr *c) {
  CallArgs ca;
  if (eval_args(E, c, &ca)) return POISON;
  Loc loc = c->loc;
  const char *f = c->sval;
  if (ca.has_name) { err(E, ca.nameloc, "%s() takes no name=", f); return POISON; }
  if (ca.poison) return POISON;
  if (strcmp(f, "range") == 0) {
    int64_t a, b, st;
    if (range_bounds(E, &ca, loc, &a, &b, &st)) return POISON;
    return make_range(E, a, b, st, loc);
  }
  for (int i = 0; i < ca.n; i++)
    if (ca.kw[i]) { err(E, ca.kwloc[i], "%s() takes no keyword arguments", f); return POISON; }
  if (strcmp(f, "len") == 0) {
    if (ca.n != 1) { err(E, loc, "len takes one argument, got %d", ca.n); return POISON; }
    if (ca.v[0].k == V_LIST) return vint(ca.v[0].n);
    if (ca.v[0].k == V_STR) return vint((int64_t)strlen(ca.v[0].s));
    if (ca.v[0].k == V_TENSOR) return vint(ca.v[0].t->shape.rank ? ca.v[0].t->shape.d[0] : 0);
    err(E, ca.loc[0], "len needs a list, a string or a tensor, got %s", describe(E, ca.v[0]));
    return POISON;
  }
  if (strcmp(f, "min") == 0 || strcmp(f, "max") == 0) {
    Val *items = ca.v;
    int n = ca.n;
    if (n == 1 && ca.v[0].k == V_LIST) { items = ca.v[0].items; n = ca.v[0].n; }
    if (n == 0) { err(E, loc, "%s of nothing", f); return POISON; }
    Val best = items[0];
    for (int i = 0; i < n; i++) {
      if (!is_num(items[i])) { err(E, loc, "%s needs numbers, got %s", f, describe(E, items[i])); return POISON; }
      if (f[1] == 'i' ? num(items[i]) < num(best) : num(items[i]) > num(best)) best = items[i];
    }
    return best;
  }
  if (ca.n != 1) { err(E, loc, "%s takes one argument, got %d", f, ca.n); return POISON; }
  Val v = ca.v[0];
  if (!is_num(v)) { err(E, ca.loc[0], "%s needs a number, got %s", f, describe(E, v)); return POISON; }
  if (strcmp(f, "float") == 0) return vfloat(num(v));
  if (strcmp(f, "abs") == 0) {
    if (v.k == V_INT) { if (v.i == INT64_MIN) { err(E, loc, "integer overflow"); return POISON; } return vint(v.i < 0 ? -v.i : v.i); }
    return vfloat(fabs(v.f));
  }
  /* int(): truncates like Python */
  if (v.k == V_INT) return v;
  if (!(fabs(v.f) < 9e18)) { err(E, loc, "int(): %g is out of range", v.f); return POISON; }
  return vint((int64_t)v.f);
}

/* ---- parameter(shape): a learned tensor read as data ----
 * `scale = parameter([8, 1, 1], name="scale")` makes the parameter `scale`
 * (with the def prefix, as layers get theirs): an ONNX initializer that a mul
 * or a matmul reads (ncc --emit=net writes them so).  Without name= it is
 * parameter1, parameter2, ... like other unnamed layers. */
static const char PARAMETER_FN[] = "parameter";

static Val call_parameter(Elab *E, Expr *c) {
  CallArgs ca;
  if (eval_args(E, c, &ca)) return POISON;
  Loc loc = c->loc;
  if (ca.poison) return POISON;
  if (ca.n != 1 || (ca.kw[0] && strcmp(ca.kw[0], "shape") != 0)) {
    err(E, ca.n > 1 ? ca.loc[1] : ca.n == 1 ? ca.kwloc[0] : loc,
        "parameter takes one argument, its shape (and name=): parameter([8, 1, 1], name=\"scale\")");
    return POISON;
  }
  Val v = ca.v[0];
  if (v.k != V_LIST) {
    err(E, ca.loc[0], "parameter: the shape must be a list of dimensions, got %s", describe(E, v));
    return POISON;
  }
  if (v.n > NCC_MAX_RANK) {
    err(E, ca.loc[0], "parameter: the shape has %d dimensions; at most %d are supported", v.n, NCC_MAX_RANK);
    return POISON;
  }
  Shape s = {v.n, {0}};
  for (int i = 0; i < v.n; i++)
  {
    if (to_int(E, v.items[i], ca.loc[0], "parameter: a dimension", &s.d[i])) return POISON;
    if (s.d[i] < 1) {
      err(E, ca.loc[0], "parameter: dimension %d must be positive, got %lld", i, (long long)s.d[i]);
      return POISON;
    }
  }
  const char *name = ca.name ? scoped(E, ca.name)
                             : scoped(E, arena_printf(E->ar, "%s%d", PARAMETER_FN, ++E->fr->counts[OP_PARAM]));
  const char *dot = strrchr(name, '.');
  const char *layer = dot ? arena_strndup(E->ar, name, (size_t)(dot - name)) : NULL;
  return vtensor(param_named(E, name, layer, PK_NONE, s, loc));
}

/* ---- def calls ---- */
static Val call_def(Elab *E, Stmt *d, Expr *c) {
  CallArgs ca;
  if (eval_args(E, c, &ca)) return POISON;
  if (E->depth >= MAX_CALL_DEPTH) {
    err(E, c->loc, "calls nest more than %d deep; is '%s' recursive without a base case?", MAX_CALL_DEPTH, d->name);
    fatal_limit(E);
    return POISON;
  }
  Frame fr;
  memset(&fr, 0, sizeof fr);
  fr.parent = E->fr;
  fr.locals = ARENA_NEW(E->ar, Scope);
  fr.fname = d->name;
  fr.call = c->loc;
  if (ca.has_name && ca.name) {
    fr.prefix = scoped(E, ca.name);
    fr.counts = ARENA_ARRAY(E->ar, int, OP__COUNT);
  } else {
    fr.prefix = E->fr->prefix;
    fr.counts = E->fr->counts;
  }
  /* bind arguments */
  int bad = ca.poison;
  int np = d->nparams;
  Val *vals = ARENA_ARRAY(E->ar, Val, np + 1);
  int *given = ARENA_ARRAY(E->ar, int, np + 1);
  int pos = 0;
  for (int j = 0; j < ca.n; j++) {
    int k = -1;
    if (ca.kw[j]) {
      for (int i = 0; i < np; i++)
        if (strcmp(d->params[i], ca.kw[j]) == 0) k = i;
      if (k < 0) {
        Suggest s = {0};
        for (int i = 0; i < np; i++) suggest(&s, ca.kw[j], d->params[i]);
        err(E, ca.kwloc[j], "'%s' has no parameter '%s'%s", d->name, ca.kw[j], did_you_mean(E, &s));
        diag_note(d->nameloc, "'%s' is defined here", d->name);
        bad = 1;
        continue;
      }
      if (given[k]) { err(E, ca.kwloc[j], "parameter '%s' of '%s' is given twice", ca.kw[j], d->name); bad = 1; continue; }
    } else {
      if (pos >= np) {
        err(E, ca.loc[j], "'%s' takes %d argument%s, got %d", d->name, np, np == 1 ? "" : "s", ca.n);
        diag_note(d->nameloc, "'%s' is defined here", d->name);
        return POISON;
      }
      k = pos++;
    }
    vals[k] = ca.v[j];
    given[k] = 1;
  }
  Frame *saved = E->fr;
  E->fr = &fr;
  E->depth++;
  for (int i = 0; i < np && !bad; i++) {
    if (!given[i]) {
      if (!d->defaults[i]) {
        E->fr = saved;
        err(E, c->loc, "call of '%s' lacks the argument '%s'", d->name, d->params[i]);
        diag_note(d->plocs[i], "parameter '%s' is declared here", d->params[i]);
        E->fr = &fr;
        bad = 1;
        break;
      }
      vals[i] = eval(E, d->defaults[i]);  /* in the callee: sees consts and earlier parameters */
    }
    bind(E, d->params[i], vals[i], d->plocs[i]);
  }
  Val r = POISON;
  if (!bad && !E->abort) {
    exec_block(E, &d->body);
    r = E->abort ? POISON : fr.returned ? fr.ret : NONE;   /* an abort unwinds quietly */
  }
  E->depth--;
  E->fr = saved;
  return r;
}

static Val eval_call(Elab *E, Expr *c) {
  Bind *d = scope_find(&E->defs, c->sval);
  if (d) return call_def(E, (Stmt *)(void *)d->v.s, c);
  const OpSpec *sp = find_op(c->sval);
  if (sp) return call_op(E, sp, c);
  if (is_builtin_fn(c->sval)) return call_builtin(E, c);
  if (strcmp(c->sval, PARAMETER_FN) == 0) return call_parameter(E, c);
  Suggest s = {0};
  suggest(&s, c->sval, PARAMETER_FN);
  for (int i = 0; i < OP__COUNT; i++)
    if (!(ncc_ops[i].flags & (OPF_SOURCE | OPF_INTERNAL))) suggest(&s, c->sval, ncc_ops[i].name);
  for (int i = 0; i < E->defs.cap; i++)
    if (E->defs.tab[i].name) suggest(&s, c->sval, E->defs.tab[i].name);
  for (int i = 0; builtin_fns[i]; i++) suggest(&s, c->sval, builtin_fns[i]);
  err(E, c->loc, "unknown op or function '%s'%s", c->sval, did_you_mean(E, &s));
  /* evaluate the arguments anyway: their own errors are worth reporting */
  for (int i = 0; i < c->nitems && !E->abort; i++) eval(E, c->items[i]);
  return POISON;
}

/* ---- expressions ---- */
static Val eval_str(Elab *E, Expr *e) {
  size_t cap = 64, k = 0;
  char *buf = xmalloc(cap);
  buf[0] = 0;
  Val r;
  for (int i = 0; i < e->nitems; i++) {
    Expr *p = e->items[i];
    const char *piece;
    if (p->kind == E_STR_TEXT) piece = p->sval;
    else {
      Val v = eval(E, p);
      if (v.k == V_POISON) { free(buf); return POISON; }
      if (v.k == V_TENSOR || v.k == V_NONE) {
        err(E, p->loc, "cannot put %s into a string", describe(E, v));
        free(buf);
        return POISON;
      }
      char tmp[512];
      size_t n = 0;
      if (fmt_val(E, tmp, sizeof tmp, &n, v, 0) || n >= sizeof tmp) {
        err(E, p->loc, "value too large to put into a string");
        free(buf);
        return POISON;
      }
      piece = arena_strdup(E->ar, tmp);
    }
    size_t n = strlen(piece);
    if (k + n + 1 > (1u << 20)) { err(E, e->loc, "string longer than 1 MiB"); free(buf); return POISON; }
    if (k + n + 1 > cap) {
      while (k + n + 1 > cap) cap *= 2;
      buf = xrealloc(buf, cap);
    }
    memcpy(buf + k, piece, n + 1);
    k += n;
  }
  r = vstr(arena_strndup(E->ar, buf, k));
  free(buf);
  return r;
}

static Val eval_member(Elab *E, Expr *e) {
  Val x = eval(E, e->lhs);
  if (x.k == V_POISON) return POISON;
  if (x.k != V_TENSOR) {
    err(E, e->loc, "'.%s' needs a tensor, got %s", e->sval, describe(E, x));
    return POISON;
  }
  if (strcmp(e->sval, "rank") == 0) return vint(x.t->shape.rank);
  if (strcmp(e->sval, "shape") == 0) {
    Val r = {.k = V_LIST, .n = x.t->shape.rank};
    r.items = ARENA_ARRAY(E->ar, Val, r.n + 1);
    for (int i = 0; i < r.n; i++) r.items[i] = vint(x.t->shape.d[i]);
    return r;
  }
  if (strcmp(e->sval, "dtype") == 0) return vstr(dtype_name(x.t->dtype));
  err(E, e->loc, "a tensor has no member '%s' (it has .shape, .rank and .dtype)", e->sval);
  return POISON;
}

static Val eval_index(Elab *E, Expr *e) {
  Val x = eval(E, e->lhs);
  Val i = eval(E, e->rhs);
  if (x.k == V_POISON || i.k == V_POISON) return POISON;
  if (x.k == V_TENSOR) {
    err(E, e->loc, "a tensor cannot be indexed at compile time; did you mean x.shape[i]?");
    return POISON;
  }
  if (x.k != V_LIST && x.k != V_STR) {
    err(E, e->loc, "only lists can be indexed, got %s", describe(E, x));
    return POISON;
  }
  int64_t k;
  if (i.k != V_INT) {
    err(E, e->rhs->loc, "an index must be an integer, got %s", describe(E, i));
    return POISON;
  }
  k = i.i;
  int64_t n = x.k == V_LIST ? x.n : (int64_t)strlen(x.s);
  if (k < 0) k += n;
  if (k < 0 || k >= n) {
    err(E, e->rhs->loc, "index %lld is out of range for %s", (long long)i.i, describe(E, x));
    return POISON;
  }
  if (x.k == V_STR) return vstr(arena_strndup(E->ar, x.s + k, 1));
  return x.items[k];
}

static Val eval(Elab *E, Expr *e) {
  if (E->abort) return POISON;
  if (++E->steps > MAX_STEPS) {
    err(E, e->loc, "elaboration takes more than %lld steps; is a loop or a recursion running away?", (long long)MAX_STEPS);
    fatal_limit(E);
    return POISON;
  }
  if (E->ar->total > MAX_ARENA_BYTES) {
    err(E, e->loc, "elaboration uses more than %zu MiB for compile-time values and nodes; is a loop growing a list or a string without end?",
        MAX_ARENA_BYTES >> 20);
    fatal_limit(E);
    return POISON;
  }
  if (E->edepth >= MAX_EXPR_DEPTH) {
    err(E, e->loc, "expression nests more than %d levels deep", MAX_EXPR_DEPTH);
    fatal_limit(E);
    return POISON;
  }
  E->edepth++;
  Val r = POISON;
  switch (e->kind) {
  case E_INT: r = vint(e->ival); break;
  case E_FLOAT: r = vfloat(e->fval); break;
  case E_BOOL: r = vbool((int)e->ival); break;
  case E_STR: r = eval_str(E, e); break;
  case E_STR_TEXT: r = vstr(e->sval); break;
  case E_NAME: {
    Bind *b = lookup(E, e->sval);
    if (b) r = b->v;
    else if (scope_find(&E->defs, e->sval) || find_op(e->sval) || is_builtin_fn(e->sval)) {
      err(E, e->loc, "'%s' is a function; call it with ( )", e->sval);
    } else r = undefined(E, e->sval, e->loc);
    break;
  }
  case E_LIST: {
    Val l = {.k = V_LIST, .n = e->nitems};
    l.items = ARENA_ARRAY(E->ar, Val, e->nitems + 1);
    for (int i = 0; i < e->nitems; i++) l.items[i] = eval(E, e->items[i]);
    r = l;
    break;
  }
  case E_INDEX: r = eval_index(E, e); break;
  case E_MEMBER: r = eval_member(E, e); break;
  case E_CALL: r = eval_call(E, e); break;
  case E_UNOP: {
    Val a = eval(E, e->lhs);
    if (a.k == V_POISON) break;
    if (e->op == UO_NOT) {
      int b;
      if (!to_bool(E, a, e->lhs->loc, "the operand of 'not'", &b)) r = vbool(!b);
    } else if (a.k == V_INT) {
      if (a.i == INT64_MIN) err(E, e->loc, "integer overflow");
      else r = vint(-a.i);
    } else if (a.k == V_FLOAT) r = vfloat(-a.f);
    else if (a.k == V_TENSOR) r = tensor_binop(E, BO_MUL, a, vint(-1), e->loc);
    else err(E, e->loc, "unary '-' needs a number or a tensor, got %s", describe(E, a));
    break;
  }
  case E_BINOP: {
    if (e->op == BO_AND || e->op == BO_OR) {
      Val a = eval(E, e->lhs);
      int x, y;
      if (a.k == V_POISON || to_bool(E, a, e->lhs->loc, e->op == BO_AND ? "the operand of 'and'" : "the operand of 'or'", &x))
        break;
      if (e->op == BO_AND ? !x : x) { r = vbool(x); break; }
      Val b = eval(E, e->rhs);
      if (b.k == V_POISON || to_bool(E, b, e->rhs->loc, e->op == BO_AND ? "the operand of 'and'" : "the operand of 'or'", &y))
        break;
      r = vbool(y);
      break;
    }
    Val a = eval(E, e->lhs);
    Val b = eval(E, e->rhs);
    switch (e->op) {
    case BO_EQ: case BO_NE: case BO_LT: case BO_LE: case BO_GT: case BO_GE:
      r = compare(E, e->op, a, b, e->loc);
      break;
    default:
      r = arith(E, e->op, a, b, e->loc);
    }
    break;
  }
  }
  E->edepth--;
  return r;
}

/* ---- statements ---- */

/* Names a block would assign: bound to POISON when the block cannot run
 * because its condition or list is erroneous. */
static void poison_assigned(Elab *E, Block *b, int depth) {
  if (depth > 50) return;
  for (int i = 0; i < b->n; i++) {
    Stmt *s = b->s[i];
    if (s->kind == S_ASSIGN && !(lookup(E, s->name) && lookup(E, s->name)->is_const)) bind(E, s->name, POISON, s->loc);
    if (s->kind == S_FOR) { bind(E, s->name, POISON, s->loc); poison_assigned(E, &s->body, depth + 1); }
    if (s->kind == S_IF) {
      for (Stmt *t = s; t; t = t->els) poison_assigned(E, &t->body, depth + 1);
    }
  }
}

static int top_only(Elab *E, Stmt *s, const char *what) {
  if (E->fr->locals || E->depth > 0) {
    err(E, s->loc, "%s is only allowed at the top level of the file", what);
    return 0;
  }
  return 1;
}

static Val parse_set_value(Elab *E, const SetOpt *so, Loc loc, int *ok) {
  const char *v = so->value ? so->value : "";
  char *end;
  *ok = 1;
  if (strcmp(v, "true") == 0) return vbool(1);
  if (strcmp(v, "false") == 0) return vbool(0);
  if (*v) {
    long long i = strtoll(v, &end, 10);
    if (*end == 0 && !(i == LLONG_MAX || i == LLONG_MIN)) return vint(i);
    double f = strtod(v, &end);
    if (*end == 0 && isfinite(f)) return vfloat(f);
  }
  *ok = 0;
  diag_error((Loc){0}, "--set %s=%s: expected an integer, a number, true or false", so->name, v);
  diag_note(loc, "'%s' is declared here", so->name);
  return POISON;
}

static void exec_const(Elab *E, Stmt *s) {
  if (!top_only(E, s, "'const'")) return;
  Bind *old = scope_find(&E->globals, s->name);
  if (old && old->is_const) {
    err(E, s->nameloc, "const '%s' is declared twice", s->name);
    diag_note(old->loc, "first declared here");
    return;
  }
  if (old) {
    err(E, s->nameloc, "'%s' is already a variable; a const must be declared before any use of its name", s->name);
    diag_note(old->loc, "'%s' is bound here", s->name);
    return;
  }
  Val v = eval(E, s->e);
  for (int i = 0; i < E->nsets; i++) {
    if (!E->sets[i].name || strcmp(E->sets[i].name, s->name) != 0) continue;
    E->set_used[i] = 1;
    int ok;
    Val sv = parse_set_value(E, &E->sets[i], s->nameloc, &ok);
    if (ok) v = sv;
    else v = POISON;
  }
  if (v.k != V_POISON && v.k != V_INT && v.k != V_FLOAT && v.k != V_BOOL) {
    err(E, s->e->loc, "a const must be an integer, a number or a bool, got %s", describe(E, v));
    v = POISON;
  }
  Bind *b = scope_put(E->ar, &E->globals, s->name);
  b->v = v;
  b->loc = s->nameloc;
  b->is_const = 1;
}

static void exec_input(Elab *E, Stmt *s) {
  if (!top_only(E, s, "'input'")) return;
  Bind *prev = scope_find(&E->inputs, s->name);
  if (prev) {
    err(E, s->nameloc, "input '%s' is declared twice", s->name);
    diag_note(prev->loc, "first declared here");
    return;
  }
  int dt = dtype_lookup(s->sval);
  int bad = 0;
  if (dt < 0) {
    err(E, s->dtloc, "unknown dtype '%s'; expected f32, f16, bf16, i32 or i8", s->sval);
    bad = 1;
  }
  Shape sh = {0};
  if (s->nitems > NCC_MAX_RANK) {
    err(E, s->loc, "input '%s' has %d dimensions; at most %d are supported", s->name, s->nitems, NCC_MAX_RANK);
    bad = 1;
  }
  int64_t numel = 1;
  for (int i = 0; i < s->nitems && i < NCC_MAX_RANK; i++) {
    Val v = eval(E, s->items[i]);
    int64_t d;
    if (to_int(E, v, s->items[i]->loc, "a dimension", &d)) { bad = 1; continue; }
    if (d <= 0) {
      err(E, s->items[i]->loc, "dimension %d of input '%s' must be positive, got %lld", i, s->name, (long long)d);
      bad = 1;
      continue;
    }
    if (__builtin_mul_overflow(numel, d, &numel) || numel > ((int64_t)1 << 40)) {
      err(E, s->items[i]->loc, "input '%s' is too large", s->name);
      bad = 1;
      continue;
    }
    sh.d[i] = d;
  }
  sh.rank = s->nitems <= NCC_MAX_RANK ? s->nitems : 0;
  /* the const every input's first dimension names (`f32[N, ...]`): --max-memory
   * may compile the model for fewer rows by setting it */
  const char *bc = NULL;
  if (s->nitems > 0 && s->items[0]->kind == E_NAME) {
    Bind *b = lookup(E, s->items[0]->sval);
    if (b && b->is_const) bc = s->items[0]->sval;
  }
  if (!E->inputs_seen++) E->g->batch_const = bc ? arena_strdup(E->ar, bc) : NULL;
  else if (!bc || !E->g->batch_const || strcmp(bc, E->g->batch_const)) E->g->batch_const = NULL;
  Bind *ib = scope_put(E->ar, &E->inputs, s->name);
  ib->loc = s->nameloc;
  if (bad) { bind(E, s->name, POISON, s->nameloc); return; }
  Value *v = ir_input(E->g, s->name, (DType)dt, &sh, s->loc);
  if (!v && E->g->max_nodes < 0) fatal_limit(E);
  bind(E, s->name, vtensor(v), s->nameloc);
}

static void add_named(Elab *E, NamedValue **arr, int *n, int *cap, const char *name, Value *v) {
  for (int i = 0; i < *n; i++)
    if (strcmp((*arr)[i].name, name) == 0) { (*arr)[i].v = v; return; }
  if (*n == *cap) {
    int nc = *cap ? *cap * 2 : 8;
    NamedValue *na = ARENA_ARRAY(E->ar, NamedValue, nc);
    if (*n) memcpy(na, *arr, sizeof(NamedValue) * (size_t)*n);
    *arr = na;
    *cap = nc;
  }
  (*arr)[(*n)++] = (NamedValue){name, v};
}

static void exec_output(Elab *E, Stmt *s) {
  if (!top_only(E, s, "'output'")) return;
  for (int i = 0; i < s->nnames; i++) {
    const char *nm = s->names[i];
    Bind *b = lookup(E, nm);
    if (!b) { undefined(E, nm, s->nlocs[i]); continue; }
    if (b->v.k == V_POISON) continue;
    if (b->v.k != V_TENSOR) {
      err(E, s->nlocs[i], "output '%s' must be a tensor, got %s", nm, describe(E, b->v));
      continue;
    }
    int dup = 0;
    for (int k = 0; k < E->nouts; k++)
      if (strcmp(E->outs[k].name, nm) == 0) {
        err(E, s->nlocs[i], "'%s' is already an output", nm);
        diag_note(E->outlocs[k], "declared an output here");
        dup = 1;
      }
    if (dup) continue;
    int cap = E->capouts;
    add_named(E, &E->outs, &E->nouts, &E->capouts, arena_strdup(E->g->arena, nm), b->v.t);
    if (E->capouts != cap) {
      Loc *nl = ARENA_ARRAY(E->ar, Loc, E->capouts);
      if (E->nouts > 1) memcpy(nl, E->outlocs, sizeof(Loc) * (size_t)(E->nouts - 1));
      E->outlocs = nl;
    }
    E->outlocs[E->nouts - 1] = s->nlocs[i];
  }
}

static void exec_assign(Elab *E, Stmt *s) {
  Bind *old = lookup(E, s->name);
  if (old && old->is_const) {
    err(E, s->nameloc, "cannot assign to const '%s'", s->name);
    diag_note(old->loc, "declared const here");
    eval(E, s->e);
    return;
  }
  Val v = eval(E, s->e);
  if (v.k == V_NONE) {
    err(E, s->e->loc, "this call returns nothing (its def has no return)");
    v = POISON;
  }
  bind(E, s->name, v, s->nameloc);
  if (!E->fr->locals && v.k == V_TENSOR && (ncc_ops[v.t->def->op].flags & OPF_LOSS))
    add_named(E, &E->losses, &E->nlosses, &E->caplosses, arena_strdup(E->g->arena, s->name), v.t);
}

static void exec_for(Elab *E, Stmt *s) {
  /* range() is iterated lazily: no list of a million items is built */
  Expr *it = s->e;
  int64_t a = 0, b = 0, st = 1;
  Val list = POISON;
  int lazy = it->kind == E_CALL && strcmp(it->sval, "range") == 0 && !scope_find(&E->defs, "range");
  if (lazy) {
    CallArgs ca;
    if (eval_args(E, it, &ca) || ca.poison) { poison_assigned(E, &s->body, 0); bind(E, s->name, POISON, s->nameloc); return; }
    if (ca.has_name) { err(E, ca.nameloc, "range() takes no name="); return; }
    if (range_bounds(E, &ca, it->loc, &a, &b, &st)) { poison_assigned(E, &s->body, 0); bind(E, s->name, POISON, s->nameloc); return; }
    int64_t n = st > 0 ? (b > a ? (b - a + st - 1) / st : 0) : (a > b ? (a - b - st - 1) / -st : 0);
    if (n > MAX_LOOP_ITERS) {
      err(E, it->loc, "this loop would run %lld times; the limit is %d", (long long)n, MAX_LOOP_ITERS);
      fatal_limit(E);
      return;
    }
  } else {
    list = eval(E, it);
    if (list.k == V_POISON) { poison_assigned(E, &s->body, 0); bind(E, s->name, POISON, s->nameloc); return; }
    if (list.k != V_LIST) {
      err(E, it->loc, "'for' needs a list or range(...), got %s", describe(E, list));
      poison_assigned(E, &s->body, 0);
      bind(E, s->name, POISON, s->nameloc);
      return;
    }
  }
  for (int64_t i = 0;; i++) {
    Val v;
    if (lazy) {
      int64_t x = a + i * st;
      if (st > 0 ? x >= b : x <= b) break;
      v = vint(x);
    } else {
      if (i >= list.n) break;
      v = list.items[i];
    }
    if (++E->iters > MAX_LOOP_ITERS) {
      err(E, s->loc, "loops run more than %d iterations in all; is a loop running away?", MAX_LOOP_ITERS);
      fatal_limit(E);
      return;
    }
    bind(E, s->name, v, s->nameloc);
    exec_block(E, &s->body);
    if (E->abort || E->fr->returned) return;
  }
}

static void exec_if(Elab *E, Stmt *s) {
  for (Stmt *t = s; t; t = t->els) {
    if (!t->e) { exec_block(E, &t->body); return; }   /* plain else */
    Val c = eval(E, t->e);
    int b;
    if (c.k == V_POISON || to_bool(E, c, t->e->loc, "an 'if' condition", &b)) {
      for (Stmt *u = s; u; u = u->els) poison_assigned(E, &u->body, 0);
      return;
    }
    if (b) { exec_block(E, &t->body); return; }
  }
}

/* train { optimizer sgd(...); schedule step(...); minimize loss } */
typedef struct KV { const char *k; double *dst; int is_bool; int *bdst; int is_int; int64_t *idst; int required; } KV;

static int train_call(Elab *E, Expr *e, const char *what, const char *const *kinds, int *kind_out,
                      CallArgs *ca) {
  const char *fn = e->kind == E_CALL ? e->sval : e->kind == E_NAME ? e->sval : NULL;
  if (!fn) {
    err(E, e->loc, "%s expects one of %s(...)%s%s, got an expression", what, kinds[0], kinds[1] ? ", " : "",
        kinds[1] ? kinds[1] : "");
    return -1;
  }
  int k = -1;
  for (int i = 0; kinds[i]; i++)
    if (strcmp(kinds[i], fn) == 0) k = i;
  if (k < 0) {
    char list[200];
    size_t l = 0;
    for (int i = 0; kinds[i] && l < sizeof list; i++)
      l += (size_t)snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", kinds[i]);
    err(E, e->loc, "unknown %s '%s'; expected one of %s", what, fn, list);
    return -1;
  }
  *kind_out = k;
  if (e->kind == E_CALL) {
    if (eval_args(E, e, ca)) return -1;
    if (ca->poison) return -1;
    if (ca->has_name) { err(E, ca->nameloc, "%s takes no name=", fn); return -1; }
  } else {
    memset(ca, 0, sizeof *ca);
  }
  return 0;
}

static int bind_kv(Elab *E, const char *fn, CallArgs *ca, KV *kv, int nkv, Loc loc) {
  int *seen = ARENA_ARRAY(E->ar, int, nkv + 1);
  int pos = 0, bad = 0;
  for (int j = 0; j < ca->n; j++) {
    int k = -1;
    if (ca->kw[j]) {
      for (int i = 0; i < nkv; i++)
        if (strcmp(kv[i].k, ca->kw[j]) == 0) k = i;
      if (k < 0) {
        Suggest s = {0};
        for (int i = 0; i < nkv; i++) suggest(&s, ca->kw[j], kv[i].k);
        err(E, ca->kwloc[j], "%s has no setting '%s'%s", fn, ca->kw[j], did_you_mean(E, &s));
        bad = 1;
        continue;
      }
    } else {
      if (pos >= nkv) { err(E, ca->loc[j], "%s takes at most %d arguments", fn, nkv); bad = 1; continue; }
      k = pos++;
    }
    if (seen[k]) { err(E, ca->loc[j], "%s: '%s' is given twice", fn, kv[k].k); bad = 1; continue; }
    seen[k] = 1;
    const char *what = arena_printf(E->ar, "%s: '%s'", fn, kv[k].k);
    if (kv[k].is_bool) { if (to_bool(E, ca->v[j], ca->loc[j], what, kv[k].bdst)) bad = 1; }
    else if (kv[k].is_int) { if (to_int(E, ca->v[j], ca->loc[j], what, kv[k].idst)) bad = 1; }
    else if (to_float(E, ca->v[j], ca->loc[j], what, kv[k].dst)) bad = 1;
  }
  for (int i = 0; i < nkv && !bad; i++)
    if (kv[i].required && !seen[i]) { err(E, loc, "%s needs '%s'", fn, kv[i].k); bad = 1; }
  return bad ? -1 : 0;
}

static void exec_train(Elab *E, Stmt *s) {
  if (!top_only(E, s, "'train'")) return;
  if (E->train_seen) {
    err(E, s->loc, "a second train block");
    diag_note(E->train_loc, "the first one is here");
    return;
  }
  E->train_seen = 1;
  E->train_loc = s->loc;
  TrainCfg t;
  memset(&t, 0, sizeof t);
  t.loc = s->loc;
  t.sched = SCHED_NONE;
  int have_opt = 0, have_min = 0, have_sched = 0, bad = 0;
  for (int i = 0; i < s->body.n; i++) {
    Stmt *it = s->body.s[i];
    const char *k = it->name;
    CallArgs ca;
    if (strcmp(k, "optimizer") == 0) {
      static const char *const kinds[] = {"sgd", "adam", "adamw", NULL};
      int kind;
      if (have_opt) { err(E, it->loc, "the optimizer is given twice"); bad = 1; continue; }
      have_opt = 1;
      if (train_call(E, it->e, "optimizer", kinds, &kind, &ca)) { bad = 1; continue; }
      Loc cl = it->e->loc;
      if (kind == 0) {
        t.opt = OPT_SGD;
        t.lr = 0; t.momentum = 0; t.weight_decay = 0; t.nesterov = 0;
        KV kv[] = {{.k = "lr", .dst = &t.lr, .required = 1}, {.k = "momentum", .dst = &t.momentum},
                   {.k = "weight_decay", .dst = &t.weight_decay}, {.k = "nesterov", .is_bool = 1, .bdst = &t.nesterov}};
        if (bind_kv(E, "sgd", &ca, kv, 4, cl)) { bad = 1; continue; }
        if (t.nesterov && t.momentum <= 0) {
          err(E, cl, "sgd: nesterov=true needs a momentum > 0 (as in torch.optim.SGD)");
          bad = 1;
        }
        if (t.momentum < 0) { err(E, cl, "sgd: momentum must be >= 0, got %g", t.momentum); bad = 1; }
      } else {
        t.opt = kind == 1 ? OPT_ADAM : OPT_ADAMW;
        t.lr = 1e-3; t.beta1 = 0.9; t.beta2 = 0.999; t.eps = 1e-8;
        t.weight_decay = kind == 1 ? 0 : 0.01;
        KV kv[] = {{.k = "lr", .dst = &t.lr}, {.k = "beta1", .dst = &t.beta1}, {.k = "beta2", .dst = &t.beta2},
                   {.k = "eps", .dst = &t.eps}, {.k = "weight_decay", .dst = &t.weight_decay}};
        if (bind_kv(E, kinds[kind], &ca, kv, 5, cl)) { bad = 1; continue; }
        if (!(t.beta1 >= 0 && t.beta1 < 1) || !(t.beta2 >= 0 && t.beta2 < 1)) {
          err(E, cl, "%s: betas must be in [0, 1), got beta1=%g beta2=%g", kinds[kind], t.beta1, t.beta2);
          bad = 1;
        }
        if (!(t.eps >= 0)) { err(E, cl, "%s: eps must be >= 0", kinds[kind]); bad = 1; }
      }
      if (!(t.lr >= 0) || !isfinite(t.lr)) { err(E, cl, "learning rate must be >= 0, got %g", t.lr); bad = 1; }
      if (!(t.weight_decay >= 0)) { err(E, cl, "weight_decay must be >= 0, got %g", t.weight_decay); bad = 1; }
    } else if (strcmp(k, "schedule") == 0) {
      static const char *const kinds[] = {"none", "step", "cosine", NULL};
      int kind;
      if (have_sched) { err(E, it->loc, "the schedule is given twice"); bad = 1; continue; }
      have_sched = 1;
      if (train_call(E, it->e, "schedule", kinds, &kind, &ca)) { bad = 1; continue; }
      Loc cl = it->e->loc;
      if (kind == 0) {
        t.sched = SCHED_NONE;
        if (ca.n) { err(E, cl, "schedule none takes no arguments"); bad = 1; }
      } else if (kind == 1) {
        t.sched = SCHED_STEP;
        t.gamma = 0.1;
        KV kv[] = {{.k = "every", .is_int = 1, .idst = &t.every, .required = 1}, {.k = "gamma", .dst = &t.gamma}};
        if (bind_kv(E, "step", &ca, kv, 2, cl)) { bad = 1; continue; }
        if (t.every <= 0) { err(E, cl, "step: every must be positive, got %lld", (long long)t.every); bad = 1; }
      } else {
        t.sched = SCHED_COSINE;
        KV kv[] = {{.k = "total", .is_int = 1, .idst = &t.total, .required = 1}};
        if (bind_kv(E, "cosine", &ca, kv, 1, cl)) { bad = 1; continue; }
        if (t.total <= 0) { err(E, cl, "cosine: total must be positive, got %lld", (long long)t.total); bad = 1; }
      }
    } else if (strcmp(k, "minimize") == 0) {
      if (have_min) { err(E, it->loc, "minimize is given twice"); bad = 1; continue; }
      have_min = 1;
      Val v = eval(E, it->e);
      if (v.k == V_POISON) { bad = 1; continue; }
      if (v.k != V_TENSOR) {
        err(E, it->e->loc, "minimize needs a scalar tensor (a loss), got %s", describe(E, v));
        bad = 1;
        continue;
      }
      if (shape_numel(&v.t->shape) != 1) {
        err(E, it->e->loc, "minimize needs a scalar loss, got %s", tshape(E, v.t));
        bad = 1;
        continue;
      }
      t.minimize = v.t;
      if (it->e->kind == E_NAME)
        add_named(E, &E->losses, &E->nlosses, &E->caplosses, arena_strdup(E->g->arena, it->e->sval), v.t);
    } else {
      Suggest sg = {0};
      suggest(&sg, k, "optimizer");
      suggest(&sg, k, "schedule");
      suggest(&sg, k, "minimize");
      err(E, it->nameloc, "unknown train setting '%s'%s; expected optimizer, schedule or minimize", k,
          did_you_mean(E, &sg));
      bad = 1;
    }
  }
  if (!have_opt && !bad) { err(E, s->loc, "the train block needs an optimizer (e.g. optimizer sgd(lr=0.01))"); bad = 1; }
  if (!have_min && !bad) { err(E, s->loc, "the train block needs 'minimize LOSS'"); bad = 1; }
  if (bad) return;
  t.present = 1;
  E->g->train = t;
}

static void exec_stmt(Elab *E, Stmt *s) {
  if (E->abort) return;
  if (diag_errors() - E->errors0 > 100) {   /* nobody reads further; a loop could repeat them forever */
    fatal_limit(E);
    return;
  }
  if (++E->steps > MAX_STEPS) {
    err(E, s->loc, "elaboration takes more than %lld steps; is a loop or a recursion running away?", (long long)MAX_STEPS);
    fatal_limit(E);
    return;
  }
  switch (s->kind) {
  case S_MODEL:
    break;   /* handled before elaboration (the graph needs the name) */
  case S_CONST: exec_const(E, s); break;
  case S_INPUT: exec_input(E, s); break;
  case S_ASSIGN: exec_assign(E, s); break;
  case S_OUTPUT: exec_output(E, s); break;
  case S_DEF:
    if (E->fr->locals || E->depth > 0) err(E, s->loc, "a def inside a def or a block is not allowed; define it at the top level");
    break;   /* top-level defs are collected before running */
  case S_RETURN:
    if (!E->fr->fname) { err(E, s->loc, "'return' outside a def"); break; }
    E->fr->ret = eval(E, s->e);
    E->fr->returned = 1;
    break;
  case S_IF: exec_if(E, s); break;
  case S_FOR: exec_for(E, s); break;
  case S_TRAIN: exec_train(E, s); break;
  case S_TRAIN_ITEM: case S_EXPR:
    err(E, s->loc, "unexpected statement");
    break;
  }
}

static void exec_block(Elab *E, Block *b) {
  for (int i = 0; i < b->n && !E->abort && !E->fr->returned; i++) exec_stmt(E, b->s[i]);
}

static int is_reserved_fn(const char *n) { return find_op(n) || is_builtin_fn(n) || strcmp(n, PARAMETER_FN) == 0; }

void elaborate(Graph *g, Block *top, const SetOpt *sets, int nsets, int *set_used) {
  Elab E;
  memset(&E, 0, sizeof E);
  E.g = g;
  E.ar = g->arena;
  E.sets = sets;
  E.nsets = nsets;
  E.set_used = set_used;
  E.errors0 = diag_errors();
  Frame fr;
  memset(&fr, 0, sizeof fr);
  fr.prefix = "";
  fr.counts = ARENA_ARRAY(E.ar, int, OP__COUNT);
  E.fr = &fr;

  int64_t saved_max = g->max_nodes;
  if (g->max_nodes > FRONTEND_MAX_NODES) g->max_nodes = FRONTEND_MAX_NODES;

  /* `model` comes first; defs are hoisted so that order of definition does not matter */
  for (int i = 0; i < top->n; i++) {
    Stmt *s = top->s[i];
    if (s->kind == S_MODEL && i != 0) err(&E, s->loc, "'model NAME' must be the first statement of the file");
    if (s->kind != S_DEF) continue;
    if (is_reserved_fn(s->name)) {
      err(&E, s->nameloc, "'%s' is a built-in op or function; choose another name for this def", s->name);
      continue;
    }
    Bind *old = scope_find(&E.defs, s->name);
    if (old) {
      err(&E, s->nameloc, "def '%s' is defined twice", s->name);
      diag_note(old->loc, "first defined here");
      continue;
    }
    for (int p = 0; p < s->nparams; p++) {
      if (strcmp(s->params[p], "name") == 0)
        err(&E, s->plocs[p], "'name' cannot be a parameter: name= on a call names its layers");
      for (int q = 0; q < p; q++)
        if (strcmp(s->params[p], s->params[q]) == 0) err(&E, s->plocs[p], "parameter '%s' is declared twice", s->params[p]);
      if (!s->defaults[p] && p > 0 && s->defaults[p - 1])
        err(&E, s->plocs[p], "parameter '%s' without a default follows one with a default", s->params[p]);
    }
    Bind *b = scope_put(E.ar, &E.defs, s->name);
    b->v.s = (const char *)(void *)s;   /* the def's AST, kept in the string slot */
    b->loc = s->nameloc;
  }

  exec_block(&E, top);

  if (g->max_nodes >= 0) g->max_nodes = saved_max;
  g->outputs = E.outs;
  g->noutputs = E.nouts;
  g->losses = E.losses;
  g->nlosses = E.nlosses;
}
