/* verify.c — the IR verifier (QBE's habit): re-checks the invariants that
 * ir_node() establishes, so that a pass which breaks one is caught right after
 * it runs (the pass manager calls ir_verify after every pass in debug builds)
 * instead of as a wrong kernel three stages later.
 *
 * Invariants checked:
 *   - g->nodes[i]->id == i, no node is marked dead (passes must ir_compact());
 *   - every input is a value defined by an earlier node of this graph
 *     (topological order) and every node's out->def points back at it;
 *   - arity is within ops.def's bounds, and conv2d/linear's has_bias agrees with it;
 *   - re-running the shape rule gives the stored dtype and shape;
 *   - use counts equal the number of uses;
 *   - a load-time node (fold pass) reads only parameters, constants and
 *     load-time values: it runs once, before any input exists;
 *   - outputs, losses and the minimised value are live values of the graph,
 *     losses scalar; PARAM/INPUT names present and unique.
 * Every violation is printed (not just the first) because one broken rewrite
 * usually breaks several, and the pattern points at the culprit. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

static int nbad;

static void bad(const Node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bad(const Node *n, const char *fmt, ...) {
  va_list ap;
  nbad++;
  if (nbad > 50) return;
  if (n)
    fprintf(stderr, "ncc: internal error: verify: node %d (%s%s%s): ", n->id, ncc_ops[n->op].name,
            n->name ? " " : "", n->name ? n->name : "");
  else
    fprintf(stderr, "ncc: internal error: verify: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* Is v the output of a node that lives in g at position v->def->id? */
static int in_graph(const Graph *g, const Value *v) {
  return v && v->def && v->def->id >= 0 && v->def->id < g->nnodes && g->nodes[v->def->id] == v->def &&
         v->def->out == v;
}

int ir_value_live(const Graph *g, const Value *v) { return in_graph(g, v) && !v->def->dead; }

static int same_shape(const Shape *a, const Shape *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->d[i] != b->d[i]) return 0;
  return 1;
}

static void check_root(const Graph *g, const char *what, const char *name, const Value *v, int scalar) {
  /* An inference graph drops the losses (prune marks their nodes dead and
   * compacts them away) but keeps g->losses for the record; such a root is
   * allowed for losses, never for outputs.  Readers of g->losses must check
   * ir_value_live(). */
  if (scalar && v && v->def && v->def->dead && !ir_value_live(g, v)) return;
  if (!in_graph(g, v)) {
    bad(NULL, "%s %s does not point at a value of the graph", what, name ? name : "?");
    return;
  }
  if (v->def->dead) bad(v->def, "%s %s points at a dead node", what, name ? name : "?");
  if (scalar && v->shape.rank != 0) {
    char b[200];
    bad(v->def, "%s %s must be a scalar, is %s", what, name ? name : "?", shape_str(b, sizeof b, v->dtype, &v->shape));
  }
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int ir_verify(Graph *g) {
  nbad = 0;
  int *uses = calloc((size_t)g->nnodes + 1, sizeof(int));
  const char **names = calloc((size_t)g->nnodes + 1, sizeof(char *));
  int nnames = 0;
  if (!uses || !names) ncc_die("out of memory");

  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (!n) { bad(NULL, "g->nodes[%d] is NULL", i); continue; }
    if (n->id != i) bad(n, "id is %d but the node sits at position %d", n->id, i);
    if ((unsigned)n->op >= OP__COUNT) { bad(NULL, "node %d has op %d, not in ops.def", i, (int)n->op); continue; }
    if (n->dead) bad(n, "marked dead but still in the graph (missing ir_compact?)");
    const OpInfo *oi = &ncc_ops[n->op];
    if (n->nin < oi->min_in || n->nin > oi->max_in)
      bad(n, "has %d inputs, ops.def allows %d to %d", n->nin, oi->min_in, oi->max_in);
    if (!n->out || n->out->def != n) { bad(n, "its output value does not point back at it"); continue; }
    int inputs_ok = 1;
    for (int j = 0; j < n->nin; j++) {
      Value *v = n->in[j];
      if (!v) { bad(n, "input %d is NULL", j); inputs_ok = 0; continue; }
      if (!in_graph(g, v)) { bad(n, "input %d is not a value of this graph", j); inputs_ok = 0; continue; }
      if (v->def->id >= i) { bad(n, "input %d is defined by node %d, not before it", j, v->def->id); inputs_ok = 0; }
      if (v->def->dead) bad(n, "input %d is defined by the dead node %d", j, v->def->id);
      if (n->load_time && v->def->op != OP_PARAM && v->def->op != OP_CONST && !v->def->load_time)
        bad(n, "is computed at load time but its input %d (%s) is not known until inference", j,
            ncc_ops[v->def->op].name);
      uses[v->def->id]++;
    }
    if ((n->op == OP_CONV2D || n->op == OP_LINEAR) && (n->nin == 3) != (n->a.has_bias != 0))
      bad(n, "attrs.has_bias is %d but the node has %d inputs", n->a.has_bias, n->nin);
    if ((n->op == OP_PARAM || n->op == OP_INPUT) && (!n->name || !*n->name))
      bad(n, "a %s without a name", oi->name);
    if (n->op == OP_PARAM && n->name) names[nnames++] = n->name;
    if (n->op == OP_PARAM || n->op == OP_INPUT) continue;
    if (!inputs_ok || n->nin < oi->min_in || n->nin > oi->max_in) continue;
    DType t;
    Shape s;
    if (ir_infer(g, n, &t, &s) != 0) {
      bad(n, "its shape rule now rejects its inputs (error above)");
      continue;
    }
    if (t != n->out->dtype || !same_shape(&s, &n->out->shape)) {
      char b1[200], b2[200];
      bad(n, "stores %s but its shape rule gives %s", shape_str(b1, sizeof b1, n->out->dtype, &n->out->shape),
          shape_str(b2, sizeof b2, t, &s));
    }
  }
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n && n->out && n->out->nuses != uses[i])
      bad(n, "nuses is %d but the value has %d uses", n->out->nuses, uses[i]);
  }
  qsort(names, (size_t)nnames, sizeof *names, cmp_str);
  for (int i = 1; i < nnames; i++)
    if (!strcmp(names[i - 1], names[i])) bad(NULL, "two parameters are named %s", names[i]);

  for (int i = 0; i < g->noutputs; i++) check_root(g, "output", g->outputs[i].name, g->outputs[i].v, 0);
  for (int i = 0; i < g->nlosses; i++) check_root(g, "loss", g->losses[i].name, g->losses[i].v, 1);
  if (g->train.minimize) check_root(g, "the minimised value", "of the train block", g->train.minimize, 1);

  free(uses);
  free(names);
  if (nbad > 50) fprintf(stderr, "ncc: internal error: verify: %d more problems not shown\n", nbad - 50);
  return nbad ? -1 : 0;
}
