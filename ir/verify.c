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
 *   - training (autodiff): a gradient (Value.grad_of) is computed by a kernel
 *     (no source, no view) and has its parameter's dtype and shape; its
 *     parameter is a live trainable PARAM (not a running statistic) with no
 *     other gradient; in a training graph (Graph.training), an update's
 *     (OPF_UPDATE) dummy output has no reader and every input of the
 *     optimizer is a gradient; with kernel groups, a
 *     gradient is what its group stores;
 *   - outputs, losses and the minimised value are live values of the graph,
 *     losses scalar; PARAM/INPUT names present and unique;
 *   - kernel groups (fuse pass, Node.grole): every node the outputs need and
 *     that computes is in exactly one group, sources and views in none; each
 *     group has one main node, first in graph order, and groups are numbered
 *     in the order of their main nodes (the launch order); each epilogue node
 *     is one the emitters render (elementwise, inference batchnorm2d), takes
 *     the running value (the previous node's output, read by nothing else and
 *     not an output) and keeps the element count; every other operand is ready
 *     before the group runs (a source, a load-time value, or stored by an
 *     earlier group); load-time and per-inference nodes never share a group;
 *     a side node is a pair ir_side_ok accepts, after its main node, and its
 *     value, stored by the group, is ready for the groups after it; a
 *     prologue node comes before its main node, which ir_prologue_ok
 *     accepts, and its value is read by nothing else;
 *   - memory plan (plan pass, Value.region): every stored value is placed,
 *     256-aligned, inside its region; views sit where what they view sits;
 *     no two values whose lifetimes meet share a byte, except a group's value
 *     written in place over an operand that dies there (ir_inplace_ok);
 *     load-time values share nothing;
 *   - narrow storage (storage pass, Value.narrow): only a float32 value of
 *     an inference graph whose precision is that type (f16, bf16, i8), not a
 *     source or an output; a view holds what it views (and its scale); every
 *     reader is a view of it, a max pooling computed as a GEMM loads (a
 *     prologue; not at int8), or a GEMM-like op at that precision reading it
 *     as an operand it rounds (x; matmul's a and b), at int8 with the value's
 *     own activation scale (Value.qscale); a load-time value only as the
 *     weight operand of such GEMMs (at int8 a quantize node's integers, scale 1).
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

/* Gradients and updates: see the list at the top. */
static void verify_training(const Graph *g, const int *uses) {
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (!n || (unsigned)n->op >= OP__COUNT || !n->out) continue;
    /* (a graph built by hand, not a training step, may use the ops freely: test_ir's fuzz) */
    if (g->training && (ncc_ops[n->op].flags & OPF_UPDATE) && uses[i])
      bad(n, "an update's dummy output is read by %d nodes", uses[i]);
    if (g->training && n->op == OP_OPTIMIZER)
      for (int j = 0; j < n->nin; j++)
        if (n->in[j] && !n->in[j]->grad_of) bad(n, "input %d (%%%d) is not a parameter's gradient", j, n->in[j]->id);
    Value *p = n->out->grad_of;
    if (!p) continue;
    if (!in_graph(g, p) || p->def->dead || p->def->op != OP_PARAM) {
      bad(n, "its value is the gradient of something that is not a live parameter of the graph");
      continue;
    }
    if (p->def->param_kind == PK_RUNNING_MEAN || p->def->param_kind == PK_RUNNING_VAR)
      bad(n, "its value is the gradient of the running statistic %s", p->def->name);
    if ((ncc_ops[n->op].flags & OPF_SOURCE) || ir_is_view(n))
      bad(n, "the gradient of %s is not computed by a kernel", p->def->name);
    if (n->out->dtype != p->dtype || !same_shape(&n->out->shape, &p->shape)) {
      char b1[200], b2[200];
      bad(n, "the gradient of %s is %s, the parameter %s", p->def->name,
          shape_str(b1, sizeof b1, n->out->dtype, &n->out->shape), shape_str(b2, sizeof b2, p->dtype, &p->shape));
    }
    for (int j = 0; j < i; j++)
      if (g->nodes[j] && g->nodes[j]->out && g->nodes[j]->out->grad_of == p)
        bad(n, "a second gradient of %s (the first is %%%d)", p->def->name, g->nodes[j]->out->id);
  }
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Kernel groups: see the list at the top. */
static void verify_groups(Graph *g, const unsigned char *need) {
  int ng = g->ngroups;
  Node **mainof = calloc((size_t)ng + 1, sizeof(Node *));
  Value **cur = calloc((size_t)ng + 1, sizeof(Value *));   /* running value so far */
  int *stored_at = malloc(sizeof(int) * ((size_t)g->next_value_id + 1));   /* value id -> group storing it last */
  unsigned char *side_out = calloc((size_t)g->next_value_id + 1, 1);      /* value id -> stored by a side node */
  Node **pro = calloc((size_t)ng + 1, sizeof(Node *));                     /* group -> its prologue node */
  if (!mainof || !cur || !stored_at || !side_out || !pro) ncc_die("out of memory");
  for (int i = 0; i <= g->next_value_id; i++) stored_at[i] = -1;
  int last_main = -1;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    int computes = ir_computes(n, need);
    if (n->grole == GROLE_NONE) {
      if (computes) bad(n, "computes but is in no kernel group");
      continue;
    }
    if (n->grole != GROLE_MAIN && n->grole != GROLE_EPILOGUE && n->grole != GROLE_SIDE && n->grole != GROLE_PROLOGUE) {
      bad(n, "kernel group role %d is not one", n->grole);
      continue;
    }
    if ((ncc_ops[n->op].flags & OPF_SOURCE) || ir_is_view(n)) { bad(n, "a source or a view in kernel group %d", n->group); continue; }
    int k = n->group;
    if (k < 0 || k >= ng) { bad(n, "kernel group %d is outside 0..%d", k, ng - 1); continue; }
    if (n->grole == GROLE_PROLOGUE) {
      /* before its main node; checked against it when the main node comes */
      if (mainof[k]) bad(n, "prologue of kernel group %d after its main node", k);
      else if (pro[k]) bad(n, "second prologue of kernel group %d", k);
      pro[k] = n;
      if (!n->fuse_rule) bad(n, "a prologue node without the fusion rule that put it there");
    }
    if (n->grole == GROLE_SIDE) {
      /* computes in group k from the main node's operands (or its value) and
       * stores its own value; the chain's running value is untouched */
      Node *m = mainof[k];
      if (!m) { bad(n, "side node of kernel group %d before its main node", k); continue; }
      if (!ir_side_ok(n, m)) bad(n, "a %s cannot compute beside a %s in one kernel", ncc_ops[n->op].name, ncc_ops[m->op].name);
      if (!n->fuse_rule) bad(n, "a side node without the fusion rule that put it there");
      for (int j = 0; j < n->nin; j++) {
        Value *r = ir_view_root(n->in[j]);
        if (!r || !r->def || r == m->out || (ncc_ops[r->def->op].flags & OPF_SOURCE)) continue;
        int q = stored_at[r->id];
        if (q < 0 || q >= k) bad(n, "input %d (%%%d) is stored by no kernel group that runs before group %d", j, r->id, k);
      }
      stored_at[n->out->id] = k;
      side_out[n->out->id] = 1;
      continue;
    }
    if (n->grole == GROLE_MAIN) {
      if (mainof[k]) { bad(n, "second main node of kernel group %d (the first is node %d)", k, mainof[k]->id); continue; }
      if (k != last_main + 1) bad(n, "main of kernel group %d follows the main of group %d: groups are numbered in launch order", k, last_main);
      last_main = k;
      mainof[k] = n;
      if (n->fuse_rule) bad(n, "a main node with a fusion rule (%s)", n->fuse_rule);
      if (pro[k] && !ir_prologue_ok(pro[k], n))
        bad(n, "cannot take the %s %%%d as its prologue (kernel group %d)", ncc_ops[pro[k]->op].name, pro[k]->out->id, k);
    } else if (n->grole == GROLE_EPILOGUE) {
      Node *m = mainof[k];
      if (!m) { bad(n, "epilogue of kernel group %d before its main node", k); continue; }
      unsigned f = ncc_ops[n->op].flags;
      if (!(((f & OPF_ELEMWISE) && !(f & OPF_TRAIN_ONLY)) || (n->op == OP_BATCHNORM2D && !g->training)))
        bad(n, "a %s cannot be an epilogue (elementwise ops and inference batchnorm2d only)", ncc_ops[n->op].name);
      if (!n->fuse_rule) bad(n, "an epilogue node without the fusion rule that put it there");
      if (n->load_time != m->load_time) bad(n, "load-time and per-inference nodes share kernel group %d", k);
      int takes = 0;
      for (int j = 0; j < n->nin; j++) takes |= n->in[j] == cur[k];
      if (!takes || (n->op == OP_BATCHNORM2D && n->in[0] != cur[k]))
        bad(n, "epilogue of kernel group %d does not take the running value %%%d", k, cur[k] ? cur[k]->id : -1);
      if (shape_numel(&n->out->shape) != shape_numel(&m->out->shape))
        bad(n, "epilogue writes %lld elements, the main node of group %d %lld", (long long)shape_numel(&n->out->shape),
            k, (long long)shape_numel(&m->out->shape));
      /* the running value stays in registers: its only reader is n */
      int slots = 0;
      for (int j = 0; j < n->nin; j++) slots += n->in[j] == cur[k];
      if (cur[k] && cur[k]->nuses != slots)
        bad(n, "the running value %%%d of kernel group %d has readers outside it", cur[k]->id, k);
      for (int o = 0; cur[k] && o < g->noutputs; o++)
        if (g->outputs[o].v && ir_view_root(g->outputs[o].v) == cur[k])
          bad(n, "the running value %%%d of kernel group %d is an output", cur[k]->id, k);
    }
    /* operands ready before the group runs */
    for (int j = 0; j < n->nin; j++) {
      Value *v = n->in[j];
      if (!in_graph(g, v) || v == cur[k]) continue;
      Value *r = ir_view_root(v);
      if (!r || !r->def || (ncc_ops[r->def->op].flags & OPF_SOURCE)) continue;
      if (r->def == pro[k] && n->grole == GROLE_MAIN) continue;   /* computed by the group's prologue */
      if (r->def->load_time && !n->load_time) continue;
      int q = stored_at[r->id];
      if (q < 0 || r->def->group != q) {
        bad(n, "input %d (%%%d) is stored by no kernel group that runs before group %d", j, v->id, k);
      } else if (q >= k) {
        bad(n, "input %d (%%%d) is stored by kernel group %d, which does not run before group %d", j, v->id, q, k);
      } else if (cur[q] != r && !side_out[r->id]) {
        bad(n, "input %d (%%%d) is the running value of kernel group %d, not what it stores", j, v->id, q);
      }
    }
    if (n->grole == GROLE_PROLOGUE) continue;   /* its value stays inside the kernel */
    if (cur[k]) stored_at[cur[k]->id] = -1;
    cur[k] = n->out;
    stored_at[n->out->id] = k;
  }
  for (int k = 0; k < ng; k++)
    if (!mainof[k]) bad(NULL, "kernel group %d has no main node", k);
  /* the optimizer reads a parameter's gradient from memory */
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->out->grad_of && n->grole != GROLE_NONE && n->grole != GROLE_SIDE && n->group >= 0 && n->group < ng &&
        cur[n->group] != n->out)
      bad(n, "the gradient of %s is not what kernel group %d stores", n->out->grad_of->def->name, n->group);
  }
  free(mainof);
  free(cur);
  free(stored_at);
  free(side_out);
  free(pro);
}

static int overlap(int64_t a, int64_t as, int64_t b, int64_t bs) { return a < b + bs && b < a + as; }

/* The memory plan: see the list at the top. */
static void verify_plan(Graph *g) {
  Liveness lv;
  ir_liveness(g, g->training, &lv);
  int n = 0;
  Value **act = malloc(sizeof(Value *) * ((size_t)g->nnodes + 1));
  if (!act) ncc_die("out of memory");
  for (int i = 0; i < g->nnodes; i++) {
    Value *v = g->nodes[i]->out;
    int kind = lv.kind[v->id];
    int want = kind == LV_ACT || kind == LV_INPUT ? MEM_ACT : kind == LV_LOAD ? MEM_LOAD : MEM_NONE;
    if (kind == LV_VIEW) {
      Value *r = lv.root[v->id];
      if (v->region != r->region || v->offset != r->offset)
        bad(g->nodes[i], "a view placed apart from the value it views (%%%d)", r->id);
      continue;
    }
    if (v->region != want) {
      bad(g->nodes[i], "memory region %d, expected %d", v->region, want);
      continue;
    }
    if (want == MEM_NONE) continue;
    int64_t lim = want == MEM_ACT ? g->act_bytes : g->load_bytes;
    if (v->offset < 0 || v->offset % 256 || v->offset + ir_slot_bytes(v) > lim)
      bad(g->nodes[i], "placed at %lld (+%lld bytes), outside its region of %lld bytes or unaligned",
          (long long)v->offset, (long long)ir_slot_bytes(v), (long long)lim);
    act[n++] = v;
  }
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++) {
      Value *x = act[a], *y = act[b];
      if (x->region != y->region || !overlap(x->offset, ir_slot_bytes(x), y->offset, ir_slot_bytes(y))) continue;
      if (x->region == MEM_LOAD) {
        bad(y->def, "shares load-time bytes with %%%d", x->id);
        continue;
      }
      if (lv.first[x->id] > lv.last[y->id] || lv.first[y->id] > lv.last[x->id]) continue;   /* lifetimes apart */
      /* in place: y written by the group in which x dies, over the same bytes */
      Value *early = lv.first[x->id] <= lv.first[y->id] ? x : y, *late = early == x ? y : x;
      if (lv.last[early->id] == lv.first[late->id] && early->offset == late->offset &&
          ir_inplace_ok(g, &lv, lv.first[late->id] - 1, early))
        continue;
      bad(y->def, "shares bytes with %%%d while both are live (positions %d..%d and %d..%d)", x->id,
          lv.first[y->id], lv.last[y->id], lv.first[x->id], lv.last[x->id]);
    }
  free(act);
  ir_liveness_free(&lv);
}

static void verify_narrow(const Graph *g) {
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (!n || !n->out) continue;
    const Value *v = n->out;
    if (ir_is_view(n) && n->nin >= 1 && n->in[0] && (n->in[0]->narrow != v->narrow || n->in[0]->qscale != v->qscale))
      bad(n, "a view stored as %s of a value stored as %s", dtype_name(ir_store_type(v)),
          dtype_name(ir_store_type(n->in[0])));
    if (!v->narrow) continue;
    int prec = v->narrow == DT_F16 ? PREC_FP16 : v->narrow == DT_BF16 ? PREC_BF16 : v->narrow == DT_I8 ? PREC_INT8 : -1;
    if (prec == PREC_INT8 && !(v->qscale > 0.0f && v->qscale < 3.0e38f))
      bad(n, "stored as i8 without a positive scale (%g)", (double)v->qscale);
    /* a weight computed at load (int8: a quantize node's integers, scale 1), or in a training step a
     * parameter's copy made once a step (the precision pass: a cast, a tap-major reorder), nothing else */
    int step_cast = g->training && (n->op == OP_CAST || n->op == OP_TRANSPOSE) && !n->load_time && n->in[0] &&
                    n->in[0]->def->op == OP_PARAM;
    int lt = n->load_time || step_cast;
    if (prec < 0 || v->dtype != DT_F32 || (g->training && !step_cast) || g->precision != prec ||
        (ncc_ops[n->op].flags & OPF_SOURCE) ||
        (lt && prec == PREC_INT8 && (ir_view_root((Value *)v)->def->op != OP_QUANTIZE || v->qscale != 1.0f)))
      bad(n, "stored as %s: only a float32 value computed in a graph at %s (at load time, at int8, a quantize "
             "node's integers)", dtype_name((DType)v->narrow), prec < 0 ? "fp16, bf16 or int8" : ir_prec_name(prec));
    for (int k = 0; k < g->noutputs; k++)
      if (g->outputs[k].v == v) bad(n, "stored as %s but it is the output %s", dtype_name((DType)v->narrow), g->outputs[k].name);
    for (int k = i + 1; k < g->nnodes; k++) {
      const Node *r = g->nodes[k];
      for (int j = 0; r && j < r->nin; j++) {
        if (r->in[j] != v || ir_is_view(r)) continue;
        int gemm = (ncc_ops[r->op].flags & OPF_GEMM_LIKE) && r->prec == prec && r->grole != GROLE_PROLOGUE;
        /* a strided data gradient's weight transposed once a step (Attrs.wtap), on tensor cores */
        int dgw = step_cast && r->op == OP_CONV2D_BWD_DATA && r->a.wtap && j == 1 && r->prec == prec &&
                  prec != PREC_INT8 && ir_gemm_mma(r);
        int ok = dgw ? 1
                 : lt ? gemm && (prec == PREC_INT8 ? j == 1 && r->op != OP_MATMUL : j == 1 || (r->op == OP_MATMUL && j == 0))
                 : r->grole == GROLE_PROLOGUE ? r->op == OP_MAXPOOL2D && j == 0 && prec != PREC_INT8
                 : gemm && (j == 0 || (r->op == OP_MATMUL && j == 1)) &&
                       (prec != PREC_INT8 || (j == 1 ? r->qscale_b : r->qscale) == v->qscale);
        if (!ok)
          bad(r, "reads %%%d, stored as %s, as its input %d without rounding it to that type", v->id,
              dtype_name((DType)v->narrow), j);
      }
    }
  }
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
    if (n->prec == PREC_INT8 && n->op == OP_MATMUL) {
      if (g->precision != PREC_INT8 || !(n->qscale > 0.0f) || n->qscale > 3.0e38f || !(n->qscale_b > 0.0f) ||
          n->qscale_b > 3.0e38f)
        bad(n, "int8 matmul: only in a graph at int8, with positive scales of both operands (%g, %g)",
            (double)n->qscale, (double)n->qscale_b);
    } else if (n->prec == PREC_INT8) {
      if (g->precision != PREC_INT8 || (n->op != OP_CONV2D && n->op != OP_LINEAR) || n->nin != 2 ||
          !(n->qscale > 0.0f) || n->qscale > 3.0e38f || n->in[1]->def->op != OP_QUANTIZE)
        bad(n, "int8: only a conv2d or linear without bias input, of a graph at int8, with a positive "
               "activation scale (%g) and a quantize node's weight", (double)n->qscale);
    } else if (n->prec != PREC_FP32 && (n->prec < 0 || n->prec > PREC_BF16 || !ir_op_rounds(n->op) ||
                                 (n->prec != g->precision &&   /* an int8 layer's fallback to fp16, bf16 */
                                  !(g->precision == PREC_INT8 &&
                                    (n->op == OP_CONV2D || n->op == OP_LINEAR || n->op == OP_MATMUL)))))
      bad(n, "precision %s: only a GEMM-like op (or a gradient's GEMM) takes rounded operands, and only at the "
             "graph's precision (%s)",
          ir_prec_name(n->prec), ir_prec_name(g->precision));
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
  verify_narrow(g);
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n && n->out && n->out->nuses != uses[i])
      bad(n, "nuses is %d but the value has %d uses", n->out->nuses, uses[i]);
  }
  verify_training(g, uses);
  qsort(names, (size_t)nnames, sizeof *names, cmp_str);
  for (int i = 1; i < nnames; i++)
    if (!strcmp(names[i - 1], names[i])) bad(NULL, "two parameters are named %s", names[i]);

  for (int i = 0; i < g->noutputs; i++) check_root(g, "output", g->outputs[i].name, g->outputs[i].v, 0);
  for (int i = 0; i < g->nlosses; i++) check_root(g, "loss", g->losses[i].name, g->losses[i].v, 1);
  if (g->train.minimize) check_root(g, "the minimised value", "of the train block", g->train.minimize, 1);

  free(uses);
  free(names);
  if (nbad == 0 && (g->ngroups > 0 || g->planned)) {
    /* annotations: only on a graph whose structure is sound */
    unsigned char *need = malloc((size_t)g->nnodes + 1);
    if (!need) ncc_die("out of memory");
    ir_needed(g, g->training, need);
    if (g->ngroups > 0) verify_groups(g, need);
    free(need);
    if (nbad == 0 && g->planned) verify_plan(g);
  }
  if (nbad > 50) fprintf(stderr, "ncc: internal error: verify: %d more problems not shown\n", nbad - 50);
  return nbad ? -1 : 0;
}
