/* ir.c — the graph builder and the tables derived from ops.def.
 *
 * ir_node() is the only way to add a computing node: it checks arity, runs the
 * op's shape rule (shape.c) and only then appends the node, so every value in
 * a graph has a known dtype and shape. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

const OpInfo ncc_ops[OP__COUNT] = {
#define OP(name, str, flags, mn, mx, args, shape, emit, cost, expr, grad) {str, flags, mn, mx, args},
#include "ops.def"
#undef OP
};

int ir_op_lookup(const char *name) {
  for (int i = 0; i < OP__COUNT; i++)
    if (!(ncc_ops[i].flags & (OPF_SOURCE | OPF_INTERNAL)) && strcmp(ncc_ops[i].name, name) == 0) return i;
  return -1;
}

static const char *const dt_names[DT__COUNT] = {"f32", "f16", "bf16", "i32", "i8"};
static const int dt_sizes[DT__COUNT] = {4, 2, 2, 4, 1};

const char *dtype_name(DType t) { return (unsigned)t < DT__COUNT ? dt_names[t] : "?"; }
static const char *const prec_names[] = {"fp32", "tf32", "fp16", "bf16", "int8"};
const char *ir_prec_name(int prec) { return prec > 0 && prec <= PREC_INT8 ? prec_names[prec] : "fp32"; }
int ir_prec_lookup(const char *name) {
  for (int i = 0; i <= PREC_INT8; i++)
    if (!strcmp(name, prec_names[i])) return i;
  return -1;
}
const QuantLayer *ir_quant_find(const QuantTable *t, const char *key) {
  for (int i = 0; t && i < t->n; i++)
    if (!strcmp(t->l[i].key, key)) return &t->l[i];
  return NULL;
}

const char *ir_layer_key(const Node *n, char *buf, size_t len) {
  if (n->name && *n->name) snprintf(buf, len, "%s", n->name);
  else if (n->layer && *n->layer) snprintf(buf, len, "%s", n->layer);
  else snprintf(buf, len, "%s@%d:%d", ncc_ops[n->op].name, n->loc.line, n->loc.col);
  return buf;
}

int dtype_size(DType t) { return (unsigned)t < DT__COUNT ? dt_sizes[t] : 0; }
int64_t ir_value_bytes(const Value *v) { return shape_numel(&v->shape) * dtype_size(ir_store_type(v)); }
int dtype_lookup(const char *name) {
  for (int i = 0; i < DT__COUNT; i++)
    if (strcmp(dt_names[i], name) == 0) return i;
  return -1;
}

int64_t shape_numel(const Shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->d[i];
  return n;
}

char *shape_str(char *buf, size_t n, DType t, const Shape *s) {
  size_t k = (size_t)snprintf(buf, n, "%s[", dtype_name(t));
  for (int i = 0; i < s->rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)s->d[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

void ir_attrs_init(Attrs *a) {
  memset(a, 0, sizeof *a);
  for (int i = 0; i < 2; i++) a->stride[i] = a->dilation[i] = 1;
  a->groups = 1;
  a->eps = 1e-5;
  a->momentum = 0.1;
  a->slope = 0.01;
}

Graph *ir_graph_new(const char *model) {
  Arena *ar = arena_new();
  Graph *g = ARENA_NEW(ar, Graph);
  g->arena = ar;
  g->model = arena_strdup(ar, model ? model : "model");
  g->max_nodes = 1000000;
  return g;
}

void ir_graph_free(Graph *g) {
  if (!g) return;
  free(g->nodes);
  arena_free(g->arena);   /* g itself lives in the arena */
}

static Node *append(Graph *g, OpKind op, Value **in, int nin, const Attrs *a,
                    const char *name, const char *layer, Loc loc) {
  Node *n = ARENA_NEW(g->arena, Node);
  n->op = op;
  n->nin = nin;
  n->in = ARENA_ARRAY(g->arena, Value *, nin ? nin : 1);
  for (int i = 0; i < nin; i++) n->in[i] = in[i];
  if (a) n->a = *a; else ir_attrs_init(&n->a);
  n->name = name ? arena_strdup(g->arena, name) : NULL;
  n->layer = layer ? arena_strdup(g->arena, layer) : NULL;
  n->loc = loc;
  return n;
}

static Value *commit(Graph *g, Node *n, DType t, const Shape *s) {
  if (g->nnodes == g->cap) {
    g->cap = g->cap ? g->cap * 2 : 64;
    g->nodes = xrealloc(g->nodes, sizeof(Node *) * (size_t)g->cap);
  }
  n->id = g->nnodes;
  g->nodes[g->nnodes++] = n;
  Value *v = ARENA_NEW(g->arena, Value);
  v->id = g->next_value_id++;
  v->dtype = t;
  v->shape = *s;
  v->def = n;
  n->out = v;
  for (int i = 0; i < n->nin; i++) n->in[i]->nuses++;
  return v;
}

static int over_limit(Graph *g, Loc loc) {
  if (g->nnodes < g->max_nodes) return 0;
  if (g->nnodes == g->max_nodes) {
    diag_error(loc, "the model expands to more than %lld nodes; is a loop or recursion running away?",
               (long long)g->max_nodes);
    g->max_nodes = -1;   /* report once; every later node fails quietly */
  }
  return 1;
}

Value *ir_node(Graph *g, OpKind op, Value **in, int nin, const Attrs *a,
               const char *name, const char *layer, Loc loc) {
  if (g->max_nodes < 0 || over_limit(g, loc)) return NULL;
  NCC_ASSERT((unsigned)op < OP__COUNT);
  const OpInfo *oi = &ncc_ops[op];
  if (nin < oi->min_in || nin > oi->max_in) {
    diag_error(loc, "%s takes %d to %d tensor inputs, got %d", oi->name, oi->min_in, oi->max_in, nin);
    return NULL;
  }
  for (int i = 0; i < nin; i++) NCC_ASSERT(in[i] != NULL);
  Node *n = append(g, op, in, nin, a, name, layer, loc);
  DType t;
  Shape s;
  if (ir_infer(g, n, &t, &s) != 0) return NULL;
  return commit(g, n, t, &s);
}

Value *ir_input(Graph *g, const char *name, DType t, const Shape *s, Loc loc) {
  if (g->max_nodes < 0 || over_limit(g, loc)) return NULL;
  Node *n = append(g, OP_INPUT, NULL, 0, NULL, name, NULL, loc);
  return commit(g, n, t, s);
}

Value *ir_param(Graph *g, const char *name, int kind, const Shape *s, const char *layer, Loc loc) {
  if (g->max_nodes < 0 || over_limit(g, loc)) return NULL;
  Node *n = append(g, OP_PARAM, NULL, 0, NULL, name, layer, loc);
  n->param_kind = kind;
  return commit(g, n, DT_F32, s);
}

Node *ir_find_param(Graph *g, const char *name) {
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->op == OP_PARAM && !n->dead && strcmp(n->name, name) == 0) return n;
  }
  return NULL;
}

void ir_clear_schedule(Graph *g) {
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    n->grole = GROLE_NONE;
    n->group = 0;
    n->fuse_rule = NULL;
    n->stream = 0;
    n->out->region = MEM_NONE;
    n->out->offset = 0;
  }
  g->ngroups = 0;
  g->planned = 0;
  g->act_bytes = g->load_bytes = 0;
}

Value *ir_clone_at(Graph *g, const Node *src, Value **in, int pos, const char *name) {
  NCC_ASSERT(pos >= 0 && pos <= g->nnodes);
  Node *n = append(g, src->op, in, src->nin, &src->a, name, src->layer, src->loc);
  n->param_kind = src->param_kind;
  n->load_time = src->load_time;
  n->prec = src->prec;
  n->qscale = src->qscale;
  DType t;
  Shape s;
  if (ir_infer(g, n, &t, &s) != 0) ncc_die("a copy of node %d (%s) does not infer", src->id, ncc_ops[src->op].name);
  Value *v = commit(g, n, t, &s);   /* appended at the end: move it to pos */
  memmove(&g->nodes[pos + 1], &g->nodes[pos], sizeof(Node *) * (size_t)(g->nnodes - 1 - pos));
  g->nodes[pos] = n;
  for (int i = pos; i < g->nnodes; i++) g->nodes[i]->id = i;
  return v;
}

void ir_compact(Graph *g) {
  int k = 0, removed = 0;
  for (int i = 0; i < g->nnodes; i++) removed |= g->nodes[i]->dead;
  if (removed) ir_clear_schedule(g);
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead) continue;
    n->id = k;
    g->nodes[k++] = n;
    n->out->nuses = 0;
  }
  g->nnodes = k;
  for (int i = 0; i < g->nnodes; i++)
    for (int j = 0; j < g->nodes[i]->nin; j++) g->nodes[i]->in[j]->nuses++;
}
