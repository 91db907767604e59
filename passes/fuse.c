/* fuse.c — kernel groups, by explicit and named rules.
 *
 * \brief Fusion is grouping: the code generator emits one kernel per group,
 * and a group is one main node followed by an epilogue chain that runs on the
 * main node's result before its one store (conv+bias+bn+relu is one kernel,
 * and its intermediates never reach memory).  This pass decides the groups and
 * writes them on the IR (Node.grole, Node.group, Node.fuse_rule,
 * Graph.ngroups); the verifier checks them and codegen only reads them.
 *
 * Nodes are visited in graph order.  A node joins the kernel of the group that
 * stores one of its inputs (its "running operand") when a rule of the table
 * below matches the pair (consumer, producer kernel) and the rule's
 * conditions hold; otherwise it starts a kernel of its own.  The conditions
 * common to every epilogue rule are what the emitters can render:
 *   - the consumer is elementwise, or an inference batchnorm2d taking the
 *     value as its first input (a per-channel affine map);
 *   - the running operand has no other reader and is not an output (a group
 *     stores only its last value);
 *   - the consumer writes as many elements as the value has (an epilogue
 *     computes one element per element of the main node's output);
 *   - its other operands are parameters, inputs, load-time values, or values
 *     stored by kernels that run before the group's kernel;
 *   - a load-time node (computed once after the weights load) never shares a
 *     kernel with a per-inference node;
 *   - in a training graph (autodiff): a training op (OPF_INTERNAL) leads its
 *     own kernel and takes elementwise epilogues (train-epilogue), except
 *     bn_stats (two rows of different meaning), bn_running and optimizer (in
 *     place updates) and slice; act_grad, being elementwise, may itself join
 *     another kernel; a parameter's gradient (Value.grad_of) is stored, like
 *     an output.
 * At -O3 a conv2d or linear may take the pooling that produces its operand
 * as a prologue (rule pool-prologue, ir_prologue_ok): its GEMM loads compute
 * the window instead of reading a stored pooled tensor.
 * A training op may also join an earlier kernel as a side node (rule
 * bn-sums, ir_side_ok): a value that kernel's reductions already give,
 * written beside its own (the running statistics in bn_stats's kernel,
 * batchnorm's weight and bias gradients in bn_bwd_data's).
 * Every edge between two kernels that stays unfused is recorded with the rule
 * that refused it and why; `-v` prints them ("not fused: ...").
 *
 * With streams on (PassCtx.streams, the driver's default), an inference
 * graph's branches are first put in order (passes_branches_first): where an
 * elementwise node reads two branches that each have a GEMM, the lighter is
 * computed first, so that the node joins the heavier branch's kernel and the
 * lighter one runs beside it on the side stream (passes/streams.c).
 * At -O3 the `recompute` rule first copies cheap kernels (elementwise,
 * batchnorm, pooling) whose value has several elementwise readers, one copy
 * per reader, and groups again: each reader then takes its copy as an
 * epilogue.  More work and more code, one store and one load fewer per
 * reader, and one launch fewer. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* ---- the rules -------------------------------------------------------- */
enum { R_CHAIN, R_GEMM, R_POOL, R_ROW, R_MOVE, R_BN, R_TRAIN, R_SIDE, R_PROLOGUE, R_RECOMPUTE, R__COUNT };

typedef struct Rule {
  const char *name;
  int level;          /* the lowest -O level that applies it */
  const char *brief;
} Rule;

static const Rule rules[R__COUNT] = {
  [R_CHAIN] = {"elementwise-chain", 2,
               "an elementwise op joins the kernel of the elementwise op or batchnorm2d producing its input: "
               "a chain makes one pass over memory"},
  [R_GEMM] = {"gemm-epilogue", 2,
              "bias, activation, residual add, scaling: elementwise ops join a conv2d, linear or matmul kernel "
              "and run on the accumulator before its one store"},
  [R_POOL] = {"pool-epilogue", 2,
              "elementwise ops join a maxpool2d, avgpool2d or global_avgpool2d kernel"},
  [R_ROW] = {"row-epilogue", 2,
             "elementwise ops after softmax, log_softmax, layernorm or a loss join that row kernel "
             "(softmax chains)"},
  [R_MOVE] = {"move-epilogue", 2, "elementwise ops join a concat or transpose kernel: the copy computes on the way"},
  [R_BN] = {"bn-epilogue", 2,
            "inference batchnorm2d, a per-channel affine map, joins its producer's kernel as an epilogue "
            "(conv+bn+relu in one kernel)"},
  [R_TRAIN] = {"train-epilogue", 2,
               "elementwise ops (an activation's gradient, a sum of gradients, the activation after a batchnorm) "
               "join the kernel of the training op producing their input: batchnorm with batch statistics, "
               "dropout, a convolution's, pooling's, loss's or norm's input gradient"},
  [R_SIDE] = {"bn-sums", 2,
              "batchnorm's training reductions share a kernel: the running statistics are updated by bn_stats's "
              "kernel, which has just computed the batch's mean and variance, and the weight and bias gradients "
              "are written by bn_bwd_data's, whose per-channel sums of dy and dy * (x - mean) they are"},
  [R_PROLOGUE] = {"pool-prologue", 3,
                  "a maxpool2d or avgpool2d read only by a conv2d (or, through a flatten, a linear) on the tiled "
                  "GEMM is computed where the GEMM loads its operand: each pooled element again for every tile "
                  "that reads it, one launch and the pooled tensor's store and load fewer"},
  [R_RECOMPUTE] = {"recompute", 3,
                   "a cheap kernel (elementwise, batchnorm2d or pooling, with its epilogue) whose value has 2 to 4 "
                   "elementwise readers is copied into each reader, so that each takes it as an epilogue: "
                   "more work and code, one launch and a store and load per reader fewer"},
};

/* Limits of the recompute rule: the code a copy adds, and the work. */
#define RECOMPUTE_MAX_READERS 4
#define RECOMPUTE_MAX_NODES 8

int fuse_rule_count(void) { return R__COUNT; }
const char *fuse_rule_name(int i) { return i >= 0 && i < R__COUNT ? rules[i].name : NULL; }
const char *fuse_rule_brief(int i) { return i >= 0 && i < R__COUNT ? rules[i].brief : NULL; }
int fuse_rule_level(int i) { return i >= 0 && i < R__COUNT ? rules[i].level : 0; }

/* The epilogue rule for a consumer joining a kernel whose main node is m;
 * -1 when no rule covers the pair. */
static int rule_for(const Node *consumer, const Node *m) {
  unsigned f = ncc_ops[m->op].flags;
  /* the training ops' kernels (autodiff) render an epilogue on their result,
   * except the two-row statistics, the in-place updates and a slice */
  if (f & OPF_INTERNAL)
    return m->op == OP_BN_STATS || m->op == OP_BN_RUNNING || m->op == OP_OPTIMIZER || m->op == OP_SLICE ? -1
                                                                                                        : R_TRAIN;
  if (consumer->op == OP_BATCHNORM2D) return R_BN;
  if (f & OPF_POOL) return R_POOL;
  if (f & OPF_GEMM_LIKE) return R_GEMM;
  if ((f & OPF_ELEMWISE) || m->op == OP_BATCHNORM2D) return R_CHAIN;
  if (f & (OPF_NORM | OPF_REDUCE)) return R_ROW;
  if (f & OPF_MOVE) return R_MOVE;
  return -1;
}

/* Can the emitters render n as an epilogue at all? */
static int epilogue_op(const Node *n, int train) {
  unsigned f = ncc_ops[n->op].flags;
  if ((f & OPF_ELEMWISE) && !(f & OPF_TRAIN_ONLY)) return 1;
  return n->op == OP_BATCHNORM2D && !train;
}

/* Cheap enough to compute again in every reader (the recompute rule). */
static int cheap_op(const Node *n) {
  unsigned f = ncc_ops[n->op].flags;
  if (f & OPF_INTERNAL) return 0;   /* a copy would lead its own kernel: nothing gained */
  return ((f & OPF_ELEMWISE) && !(f & OPF_TRAIN_ONLY)) || n->op == OP_BATCHNORM2D || n->op == OP_MAXPOOL2D ||
         n->op == OP_AVGPOOL2D;
}

/* ---- state ------------------------------------------------------------- */
typedef struct Note {
  Node *consumer;
  Value *v;           /* the consumer's input the edge carries */
  int rule;           /* -1: no rule covers the pair */
  int multi;          /* refused for other readers: the recompute rule may say more */
  char *why;
} Note;

typedef struct Fuse {
  Graph *g;
  PassCtx *c;
  int level;
  Liveness lv;        /* need, roots and readers of the graph (grouping does not change them) */
  unsigned char *is_out;  /* by value id: read back by the caller (outputs; losses in training) */
  int *grp;           /* by node id: group, -1 */
  const char **rule_of;   /* by node id: the rule that made it an epilogue or a side node */
  unsigned char *side;    /* by node id: a side node of its group (GROLE_SIDE) */
  unsigned char *pro;     /* by node id: the prologue of its group (GROLE_PROLOGUE) */
  Node **gmain;
  Value **gstored;
  int *gsize;
  int ng;
  Note *notes;
  int nnotes, capnotes;
  int fused[R__COUNT];
  const char **names; /* by node id: display names, made on demand */
} Fuse;

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  int n = vsnprintf(NULL, 0, f, ap);
  va_end(ap);
  char *s = xmalloc((size_t)n + 1);
  va_start(ap, f);
  vsnprintf(s, (size_t)n + 1, f, ap);
  va_end(ap);
  return s;
}

/* "layer1.0.conv1", or "%12 (relu)" for a node without a name */
static const char *nm(Fuse *F, const Node *n) {
  if (n->name) return n->name;
  if (!F->names[n->id]) F->names[n->id] = arena_printf(F->g->arena, "%%%d (%s)", n->out->id, ncc_ops[n->op].name);
  return F->names[n->id];
}

static void shp(char *b, size_t n, const Value *v) { shape_str(b, n, v->dtype, &v->shape); }

static void note(Fuse *F, Node *consumer, Value *v, int rule, int multi, char *why) {
  /* a value computed at load time is a weight to the kernels that read it:
   * those edges were never candidates, and listing them would bury the rest */
  if (F->lv.root[v->id]->def->load_time) {
    free(why);
    return;
  }
  if (F->nnotes == F->capnotes) {
    F->capnotes = F->capnotes ? 2 * F->capnotes : 64;
    F->notes = xrealloc(F->notes, sizeof(Note) * (size_t)F->capnotes);
  }
  F->notes[F->nnotes++] = (Note){consumer, v, rule, multi, why};
}

static void clear_notes(Fuse *F) {
  for (int i = 0; i < F->nnotes; i++) free(F->notes[i].why);
  F->nnotes = 0;
}

/* Group storing the bytes of v (through views), or -1 for sources, inputs and parameters. */
static int group_of_value(Fuse *F, Value *v) {
  Value *r = F->lv.root[v->id];
  if (!r) return -1;
  return F->grp[r->def->id];
}

/* Why n cannot join group k through its input slot j, or NULL when it can.
 * *rule receives the rule checked (-1 when none covers the pair) and *multi
 * whether the refusal is "other readers". */
static char *why_not(Fuse *F, Node *n, int j, int k, int *rule, int *multi) {
  Value *v = n->in[j];
  Value *r = F->lv.root[v->id];
  Node *m = F->gmain[k];
  char b1[160], b2[160];
  *multi = 0;
  *rule = rule_for(n, m);
  if (!epilogue_op(n, F->c->train)) {
    *rule = -1;
    if (n->op == OP_BATCHNORM2D)
      return fmt("batchnorm2d in training normalises with batch statistics, a reduction over the batch");
    unsigned f = ncc_ops[n->op].flags;
    const char *how = "reads it from memory";
    if (f & OPF_GEMM_LIKE) how = "reads it from memory as a GEMM operand";
    else if (f & OPF_POOL) how = n->op == OP_GAVGPOOL2D ? "reduces over each channel of it" : "reads windows of it";
    else if (f & (OPF_NORM | OPF_REDUCE)) how = "reduces over rows of it";
    else if (f & OPF_MOVE) how = "moves its elements";
    return fmt("%s %s; only elementwise ops and inference batchnorm2d join a producer's kernel", nm(F, n), how);
  }
  if (*rule < 0) return fmt("no rule fuses into a %s kernel", ncc_ops[m->op].name);
  if (rules[*rule].level > F->level) return fmt("%s applies from -O%d", rules[*rule].name, rules[*rule].level);
  if (n->op == OP_BATCHNORM2D && j != 0)
    return fmt("batchnorm2d reads %s as a statistic, not as the value it normalises", nm(F, r->def));
  if (v != r) return fmt("it reaches %s through the view %s; an epilogue takes the value itself", nm(F, n), nm(F, v->def));
  if (m->load_time != n->load_time)
    return fmt("%s runs %s but %s's kernel runs %s", nm(F, n), n->load_time ? "once at load time" : "per inference",
               nm(F, m), m->load_time ? "once at load time" : "per inference");
  if (F->gstored[k] != v) return fmt("%s's kernel does not store it", nm(F, m));
  if (F->is_out[v->id] && v->grad_of)
    return fmt("%s is the gradient of %s: its kernel stores it for the optimizer", nm(F, v->def), v->grad_of->def->name);
  if (F->is_out[v->id]) return fmt("%s is an output of the model: its kernel stores it for the caller", nm(F, v->def));
  int nr = F->lv.readers[v->id];
  if (nr > 1) {
    /* name another reader */
    const Node *other = NULL;
    for (int i = v->def->id + 1; i < F->g->nnodes && !other; i++) {
      Node *q = F->g->nodes[i];
      if (q == n || !F->lv.need[i] || ir_is_view(q)) continue;
      for (int t = 0; t < q->nin; t++)
        if (F->lv.root[q->in[t]->id] == v) other = q;
    }
    *multi = 1;
    return fmt("%s's value is also read by %s (%d readers)", nm(F, v->def), other ? nm(F, other) : "another node", nr);
  }
  if (shape_numel(&n->out->shape) != shape_numel(&v->shape)) {
    shp(b1, sizeof b1, v);
    shp(b2, sizeof b2, n->out);
    return fmt("%s broadcasts it from %s to %s; an epilogue writes one element per element of its kernel's output",
               nm(F, n), b1, b2);
  }
  for (int t = 0; t < n->nin; t++) {
    Value *w = n->in[t];
    if (w == v) continue;
    Value *rw = F->lv.root[w->id];
    if (rw == r) return fmt("%s also reads it through the view %s", nm(F, n), nm(F, w->def));
    int q = F->grp[rw->def->id];
    if (q < 0) continue;                       /* input, parameter, constant */
    if (rw->def->load_time && !n->load_time) continue;   /* kept since load time */
    if (F->gstored[q] != rw) return fmt("its operand %s stays inside its own kernel", nm(F, rw->def));
    if (q >= k) {
      if (F->gmain[k] == v->def)
        return fmt("its other operand %s is computed by a later kernel (%s's)", nm(F, rw->def), nm(F, F->gmain[q]));
      return fmt("its other operand %s is computed by a later kernel (%s's) than the one storing %s (%s's)",
                 nm(F, rw->def), nm(F, F->gmain[q]), nm(F, v->def), nm(F, m));
    }
  }
  return NULL;
}

/* Can group k be computed again in each of its readers (the recompute rule)?
 * NULL when it can, else why not. */
static char *why_not_recompute(Fuse *F, int k) {
  Node *m = F->gmain[k];
  Value *v = F->gstored[k];
  if (m->load_time) return fmt("load-time kernels run once anyway");
  int nr = F->lv.readers[v->id];
  if (nr > RECOMPUTE_MAX_READERS) return fmt("%d readers (recompute copies a kernel for at most %d)", nr, RECOMPUTE_MAX_READERS);
  if (F->is_out[v->id]) return fmt("the value is an output: it is stored anyway");
  if (F->gsize[k] > RECOMPUTE_MAX_NODES)
    return fmt("%s's kernel has %d nodes (recompute copies at most %d)", nm(F, m), F->gsize[k], RECOMPUTE_MAX_NODES);
  for (int i = m->id; i < F->g->nnodes; i++) {
    Node *n = F->g->nodes[i];
    if (F->grp[i] == k && !cheap_op(n))
      return fmt("%s's kernel computes %s, which is not cheap to compute again", nm(F, m), ncc_ops[n->op].name);
  }
  for (int i = v->def->id + 1; i < F->g->nnodes; i++) {
    Node *n = F->g->nodes[i];
    if (!F->lv.need[i]) continue;
    for (int j = 0; j < n->nin; j++) {
      if (F->lv.root[n->in[j]->id] != v) continue;
      if (n->in[j] != v) return fmt("%s reads it through the view %s", nm(F, n), nm(F, n->in[j]->def));
      if (ir_is_view(n)) return fmt("the view %s reads it", nm(F, n));
      if (!epilogue_op(n, F->c->train) || (n->op == OP_BATCHNORM2D && j != 0))
        return fmt("its reader %s is not elementwise", nm(F, n));
      if (F->gmain[F->grp[i]] != n) return fmt("its reader %s joined another kernel", nm(F, n));
      if (shape_numel(&n->out->shape) != shape_numel(&v->shape)) return fmt("its reader %s broadcasts it", nm(F, n));
      if (n->load_time) return fmt("its reader %s runs at load time", nm(F, n));
      for (int t = 0; t < n->nin; t++) {
        Value *rw = F->lv.root[n->in[t]->id];
        if (n->in[t] != v && rw == v) return fmt("its reader %s also reads it through a view", nm(F, n));
        int q = F->grp[rw->def->id];
        if (q >= 0 && F->gstored[q] != rw) return fmt("an operand of its reader %s stays inside its kernel", nm(F, n));
      }
    }
  }
  return NULL;
}

/* ---- grouping ------------------------------------------------------------ */
static void fuse_state_free(Fuse *F) {
  ir_liveness_free(&F->lv);
  free(F->is_out);
  free(F->grp);
  free(F->rule_of);
  free(F->side);
  free(F->pro);
  free(F->gmain);
  free(F->gstored);
  free(F->gsize);
  free(F->names);
  clear_notes(F);
  F->is_out = NULL;
  F->grp = NULL;
  F->rule_of = NULL;
  F->side = NULL;
  F->pro = NULL;
  F->gmain = NULL;
  F->gstored = NULL;
  F->gsize = NULL;
  F->names = NULL;
}

/* The group n computes in as a side node (ir_side_ok with the group's main
 * node, once per op), or -1. */
static int side_group(Fuse *F, const Node *n) {
  if (rules[R_SIDE].level > F->level || !F->c->train) return -1;
  for (int k = F->ng - 1; k >= 0; k--) {
    if (!ir_side_ok(n, F->gmain[k])) continue;
    for (int i = F->gmain[k]->id; i < n->id; i++)
      if (F->grp[i] == k && F->side[i] && F->g->nodes[i]->op == n->op) return -1;
    return k;
  }
  return -1;
}

/* The group whose pooling n, a conv2d or linear, takes as its prologue
 * (ir_prologue_ok), or -1; a pair the rule covers but refuses gets a note
 * (and -2: the edge has its note). */
static int prologue_group(Fuse *F, Node *n) {
  if ((n->op != OP_CONV2D && n->op != OP_LINEAR) || n->nin < 1 || F->c->train) return -1;
  Value *v = F->lv.root[n->in[0]->id];
  if (!v || !v->def || (v->def->op != OP_MAXPOOL2D && v->def->op != OP_AVGPOOL2D)) return -1;
  int k = F->grp[v->def->id];
  if (k < 0) return -1;
  Node *pool = v->def;
  char *why = NULL;
  if (rules[R_PROLOGUE].level > F->level)
    why = fmt("%s applies from -O%d", rules[R_PROLOGUE].name, rules[R_PROLOGUE].level);
  else if (F->c->cublas)
    why = fmt("on the cuBLAS path (--cublas) %s reads its operand from memory", nm(F, n));
  else if (n->op == OP_CONV2D && ir_conv_direct(n))
    why = fmt("%s is a direct convolution (%lld output channels per group), not a tiled GEMM", nm(F, n),
              (long long)(n->out->shape.d[1] / n->a.groups));
  else if (F->gmain[k] != pool || F->gsize[k] != 1)
    why = fmt("%s's kernel also computes an epilogue", nm(F, pool));
  else if (k != F->ng - 1)
    why = fmt("a kernel runs between %s and %s", nm(F, pool), nm(F, n));
  else if (F->is_out[v->id])
    why = fmt("%s is an output of the model: its kernel stores it for the caller", nm(F, pool));
  else if (F->lv.readers[v->id] != 1)
    why = fmt("%s's value has %d readers; a prologue's value is computed for its one GEMM only", nm(F, pool),
              F->lv.readers[v->id]);
  else if (!ir_prologue_ok(pool, n))
    why = fmt("%s reaches %s otherwise than as its input (a conv2d's, or through a flatten a linear's)", nm(F, pool),
              nm(F, n));
  if (why) {
    note(F, n, v, R_PROLOGUE, 0, why);
    return -2;
  }
  return k;
}

/* Groups the graph as it is now with the rules up to F->level but recompute. */
static void group(Fuse *F) {
  Graph *g = F->g;
  fuse_state_free(F);
  ir_clear_schedule(g);
  ir_liveness(g, F->c->train, &F->lv);   /* unannotated now: roots and readers */
  int nn = g->nnodes, nv = g->next_value_id;
  F->is_out = calloc((size_t)nv + 1, 1);
  F->grp = xmalloc(sizeof(int) * ((size_t)nn + 1));
  F->rule_of = calloc((size_t)nn + 1, sizeof(char *));
  F->gmain = xmalloc(sizeof(Node *) * ((size_t)nn + 1));
  F->gstored = xmalloc(sizeof(Value *) * ((size_t)nn + 1));
  F->gsize = xmalloc(sizeof(int) * ((size_t)nn + 1));
  F->names = calloc((size_t)nn + 1, sizeof(char *));
  F->side = calloc((size_t)nn + 1, 1);
  F->pro = calloc((size_t)nn + 1, 1);
  if (!F->is_out || !F->rule_of || !F->names || !F->side || !F->pro) ncc_die("out of memory");
  for (int i = 0; i < g->noutputs; i++) F->is_out[F->lv.root[g->outputs[i].v->id]->id] = 1;
  if (F->c->train) {
    for (int i = 0; i < g->nlosses; i++)
      if (ir_value_live(g, g->losses[i].v)) F->is_out[F->lv.root[g->losses[i].v->id]->id] = 1;
    if (g->train.minimize && ir_value_live(g, g->train.minimize)) F->is_out[F->lv.root[g->train.minimize->id]->id] = 1;
  }
  /* a parameter's gradient (autodiff) is stored for the optimizer's update */
  for (int i = 0; i < nn; i++)
    if (g->nodes[i]->out->grad_of) F->is_out[g->nodes[i]->out->id] = 1;
  memset(F->fused, 0, sizeof F->fused);
  F->ng = 0;

  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    F->grp[i] = -1;
    if (!ir_computes(n, F->lv.need)) continue;
    /* a side node: computed on the way by an earlier kernel over the same operands */
    int sk = side_group(F, n);
    if (sk >= 0) {
      F->grp[i] = sk;
      F->side[i] = 1;
      F->rule_of[i] = rules[R_SIDE].name;
      F->gsize[sk]++;
      F->fused[R_SIDE]++;
      continue;
    }
    /* a GEMM that computes the pooling producing its operand as it loads it */
    int pk = prologue_group(F, n);
    if (pk >= 0) {
      Node *pool = F->gmain[pk];
      F->pro[pool->id] = 1;
      F->rule_of[pool->id] = rules[R_PROLOGUE].name;
      F->grp[i] = pk;
      F->gmain[pk] = n;
      F->gstored[pk] = n->out;
      F->gsize[pk]++;
      F->fused[R_PROLOGUE]++;
      continue;
    }
    /* the edges: inputs stored by a kernel (each value once) */
    int join = -1, join_rule = -1;
    for (int j = 0; j < n->nin; j++) {
      Value *v = n->in[j];
      int dup = 0;
      for (int t = 0; t < j; t++) dup |= n->in[t] == v;
      int k = group_of_value(F, v);
      if (dup || k < 0 || (pk == -2 && j == 0)) continue;   /* (the prologue rule's note says why not) */
      if (join >= 0) {
        note(F, n, v, epilogue_op(n, F->c->train) ? rule_for(n, F->gmain[k]) : -1, 0,
             fmt("%s joins %s's kernel through another operand and reads this one from memory there", nm(F, n),
                 nm(F, F->gmain[join])));
        continue;
      }
      int rule, multi;
      char *why = why_not(F, n, j, k, &rule, &multi);
      if (why) {
        note(F, n, v, rule, multi, why);
        continue;
      }
      join = k;
      join_rule = rule;
    }
    if (join >= 0) {
      F->grp[i] = join;
      F->rule_of[i] = rules[join_rule].name;
      F->gstored[join] = n->out;
      F->gsize[join]++;
      F->fused[join_rule]++;
    } else {
      int k = F->ng++;
      F->grp[i] = k;
      F->gmain[k] = n;
      F->gstored[k] = n->out;
      F->gsize[k] = 1;
    }
  }
}

/* Writes the groups on the IR. */
static void annotate(Fuse *F) {
  Graph *g = F->g;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    int k = F->grp[i];
    if (k < 0) continue;
    n->group = k;
    n->grole = F->gmain[k] == n ? GROLE_MAIN : F->side[i] ? GROLE_SIDE : F->pro[i] ? GROLE_PROLOGUE : GROLE_EPILOGUE;
    n->fuse_rule = n->grole != GROLE_MAIN ? F->rule_of[i] : NULL;
  }
  g->ngroups = F->ng;
}

/* The recompute rule: copies of cheap kernels, one per reader.  Returns the
 * number of copies made (the caller groups again). */
static int recompute(Fuse *F, int *ncopied_nodes) {
  Graph *g = F->g;
  int ng = F->ng, copies = 0;
  Node ***members = calloc((size_t)ng + 1, sizeof(Node **));
  unsigned char *take = calloc((size_t)ng + 1, 1);
  if (!members || !take) ncc_die("out of memory");
  for (int k = 0; k < ng; k++) {
    Value *v = F->gstored[k];
    if (F->lv.readers[v->id] < 2 || !cheap_op(F->gmain[k])) continue;
    char *why = why_not_recompute(F, k);
    if (why) { free(why); continue; }
    /* a kernel reading a value another copied kernel stores would add
     * readers to it: copy one of the two, the producer */
    int reads_taken = 0;
    for (int i = F->gmain[k]->id; i < g->nnodes; i++)
      if (F->grp[i] == k)
        for (int j = 0; j < g->nodes[i]->nin; j++) {
          int q = group_of_value(F, g->nodes[i]->in[j]);
          reads_taken |= q >= 0 && q != k && take[q];
        }
    if (reads_taken) continue;
    take[k] = 1;
    members[k] = xmalloc(sizeof(Node *) * (size_t)F->gsize[k]);
    int m = 0;
    for (int i = F->gmain[k]->id; i < g->nnodes && m < F->gsize[k]; i++)
      if (F->grp[i] == k) members[k][m++] = g->nodes[i];
  }
  /* copy after deciding: inserting nodes shifts ids, pointers stay */
  for (int k = 0; k < ng; k++) {
    if (!take[k]) continue;
    Value *v = F->gstored[k];
    Node *readers[RECOMPUTE_MAX_READERS];
    int nr = 0;
    for (int i = v->def->id + 1; i < g->nnodes; i++) {
      Node *n = g->nodes[i];
      for (int j = 0; j < n->nin; j++)
        if (n->in[j] == v && (nr == 0 || readers[nr - 1] != n)) readers[nr++] = n;
    }
    for (int r = 1; r < nr; r++) {   /* the first reader keeps the original */
      Node *rd = readers[r];
      Value *cur = NULL, *orig_cur = NULL;
      for (int t = 0; t < F->gsize[k]; t++) {
        Node *src = members[k][t];
        Value *in[64];
        NCC_ASSERT(src->nin <= 64);
        for (int j = 0; j < src->nin; j++) in[j] = src->in[j] == orig_cur && orig_cur ? cur : src->in[j];
        const char *name = src->name ? arena_printf(g->arena, "%s.copy%d", src->name, r) : NULL;
        orig_cur = src->out;
        cur = ir_clone_at(g, src, in, rd->id, name);
        (*ncopied_nodes)++;
      }
      for (int j = 0; j < rd->nin; j++)
        if (rd->in[j] == v) {
          rd->in[j] = cur;
          v->nuses--;
          cur->nuses++;
        }
      copies++;
    }
  }
  for (int k = 0; k < ng; k++) free(members[k]);
  free(members);
  free(take);
  return copies;
}

/* ---- -v ----------------------------------------------------------------- */
static void print_notes(Fuse *F, FILE *f) {
  for (int i = 0; i < F->nnotes; i++) {
    Note *t = &F->notes[i];
    Value *r = F->lv.root[t->v->id];
    fprintf(f, "  not fused: %s -> %s [%s]: %s", nm(F, r->def), nm(F, t->consumer),
            t->rule >= 0 ? rules[t->rule].name : "no rule", t->why);
    if (t->multi) {
      /* what the recompute rule says: -O3 would, or why it does not */
      int k = F->grp[r->def->id];
      char *why = k >= 0 ? why_not_recompute(F, k) : NULL;
      if (k >= 0 && !why && F->level < rules[R_RECOMPUTE].level)
        fprintf(f, "; -O%d would compute it again in each reader [%s]", rules[R_RECOMPUTE].level,
                rules[R_RECOMPUTE].name);
      else if (why && (F->level >= rules[R_RECOMPUTE].level))
        fprintf(f, "; not recomputed [%s]: %s", rules[R_RECOMPUTE].name, why);
      free(why);
    }
    fputc('\n', f);
  }
}

int pass_fuse(Graph *g, PassCtx *c) {
  Fuse F;
  memset(&F, 0, sizeof F);
  F.g = g;
  F.c = c;
  /* named explicitly (--passes=fuse at -O0/-O1), fuse applies the -O2 rules */
  F.level = c->opt_level < 2 ? 2 : c->opt_level;
  int nodes0 = g->nnodes, copies = 0, copied_nodes = 0;
  if (c->streams && !c->train) passes_branches_first(g, c->verbose);   /* see streams.c */
  group(&F);
  if (F.level >= rules[R_RECOMPUTE].level) {
    copies = recompute(&F, &copied_nodes);
    if (copies) {
      group(&F);
      F.fused[R_RECOMPUTE] = copies;
    }
  }
  annotate(&F);
  if (c->verbose) {
    int computing = 0, joined = 0;
    for (int i = 0; i < g->nnodes; i++) computing += F.grp[i] >= 0;
    for (int r = 0; r < R__COUNT; r++)
      if (r != R_RECOMPUTE) joined += F.fused[r];
    fprintf(stderr, "pass fuse: %d kernels from %d computing nodes (%d joined a producer's kernel", F.ng, computing,
            joined);
    const char *sep = ": ";
    for (int r = 0; r < R__COUNT; r++)
      if (F.fused[r] && r != R_RECOMPUTE) {
        fprintf(stderr, "%s%s %d", sep, rules[r].name, F.fused[r]);
        sep = ", ";
      }
    fprintf(stderr, "); %d edges not fused\n", F.nnotes);
    if (copies)
      fprintf(stderr, "  recompute: %d kernel copies (%d nodes added, %d -> %d nodes)\n", copies, copied_nodes,
              nodes0, g->nnodes);
    print_notes(&F, stderr);
  }
  fuse_state_free(&F);
  free(F.notes);
  return 0;
}
