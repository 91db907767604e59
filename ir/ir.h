/* ir.h — the IR of ncc: a graph of typed values with static shapes.
 *
 * Design (ARCHITECTURE.md, decision 1): every node produces exactly one value;
 * every value has a dtype and a fully known shape once the node is built
 * (shape inference runs inside ir_node(), so an ill-shaped graph can never be
 * built).  Parameters are values too, produced by PARAM nodes that carry the
 * PyTorch state_dict name, so passes (autodiff, folding) see them as ordinary
 * inputs of conv2d/linear/batchnorm2d.
 *
 * One wide Attrs struct instead of per-op unions (chibicc's habit): each op
 * reads the fields it needs, documented in ops.def.  Everything is allocated
 * from the graph's arena and freed at once with ir_graph_free().
 *
 * Nodes are kept in g->nodes in creation order, which is a topological order
 * (a node's inputs always exist before it).  Passes that delete nodes mark
 * them dead and compact with ir_compact().
 */
#ifndef NCC_IR_H
#define NCC_IR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "arena.h"
#include "diag.h"

typedef enum {
#define OP(name, str, flags, mn, mx, args, shape, emit, cost, expr) OP_##name,
#include "ops.def"
#undef OP
  OP__COUNT
} OpKind;

enum {
  OPF_SOURCE     = 1 << 0,  /* no inputs: graph input, parameter, constant */
  OPF_ELEMWISE   = 1 << 1,
  OPF_BINARY     = 1 << 2,  /* two-input broadcasting elementwise */
  OPF_REDUCE     = 1 << 3,
  OPF_POOL       = 1 << 4,
  OPF_GEMM_LIKE  = 1 << 5,
  OPF_SHAPE_ONLY = 1 << 6,  /* output aliases the input's bytes */
  OPF_MOVE       = 1 << 7,  /* data movement (concat, transpose) */
  OPF_LOSS       = 1 << 8,
  OPF_TRAIN_ONLY = 1 << 9,  /* identity at inference (pruned) */
  OPF_NORM       = 1 << 10,
};

/* The data columns of ops.def; the function columns (shape rule, emitter,
 * cost) and the expression become tables of the layers that use them. */
typedef struct OpInfo {
  const char *name;
  unsigned flags;
  int min_in, max_in;
  const char *args;        /* argument spec of a .net call; "" for sources */
} OpInfo;
extern const OpInfo ncc_ops[OP__COUNT];
/* Look an op up by its .net spelling; returns -1 when unknown. */
int ir_op_lookup(const char *name);

typedef enum { DT_F32, DT_F16, DT_BF16, DT_I32, DT_I8, DT__COUNT } DType;
const char *dtype_name(DType t);   /* "f32", ... */
int dtype_size(DType t);           /* bytes */
int dtype_lookup(const char *name);/* -1 when unknown */

#define NCC_MAX_RANK 8
typedef struct Shape {
  int rank;
  int64_t d[NCC_MAX_RANK];
} Shape;
int64_t shape_numel(const Shape *s);
/* Writes "f32[64, 1, 28, 28]" into buf; returns buf. */
char *shape_str(char *buf, size_t n, DType t, const Shape *s);

/* Attributes: one wide struct; see ops.def for which op reads which field. */
typedef struct Attrs {
  int kernel[2], stride[2], pad[2], dilation[2];
  int groups;
  int has_bias;            /* conv2d/linear: a bias input is present */
  int64_t out;             /* conv2d out channels, linear out features */
  int axis;                /* softmax/log_softmax/concat, normalised to >= 0 */
  double eps, momentum;    /* batchnorm2d, layernorm */
  double p;                /* dropout */
  double slope;            /* leaky_relu */
  double fval;             /* CONST */
  int nlist;
  int64_t list[NCC_MAX_RANK]; /* reshape target dims, transpose perm */
} Attrs;

typedef struct Node Node;
typedef struct Value {
  int id;
  DType dtype;
  Shape shape;
  Node *def;               /* the node that produces it */
  int nuses;               /* maintained by ir_node()/ir_compact() */
} Value;

struct Node {
  int id;
  OpKind op;
  int nin;
  Value **in;
  Value *out;
  Attrs a;
  const char *name;        /* PARAM: state_dict name ("layer1.0.conv1.weight");
                              INPUT: input name; others: the layer's name or NULL */
  const char *layer;       /* the layer instance that created it ("conv1"); NULL if none */
  Loc loc;                 /* where in the source it was made */
  int dead;                /* marked by passes; removed by ir_compact() */
  int param_kind;          /* PARAM: PK_* below */
  int load_time;           /* set by the fold pass: computed once, right after the
                              weights are loaded, from parameters and constants only
                              (a folded batchnorm's scale and shift); its value is
                              kept for every inference, like a parameter */
};

enum { PK_NONE, PK_WEIGHT, PK_BIAS, PK_RUNNING_MEAN, PK_RUNNING_VAR };

typedef enum { OPT_NONE, OPT_SGD, OPT_ADAM, OPT_ADAMW } OptKind;
typedef enum { SCHED_NONE, SCHED_STEP, SCHED_COSINE } SchedKind;
typedef struct TrainCfg {
  int present;
  OptKind opt;
  double lr, momentum, weight_decay, beta1, beta2, eps;
  int nesterov;
  SchedKind sched;
  int64_t every, total;
  double gamma;
  Value *minimize;
  Loc loc;
} TrainCfg;

typedef struct NamedValue { const char *name; Value *v; } NamedValue;

typedef struct Graph {
  Arena *arena;
  const char *model;       /* `model NAME` */
  Node **nodes; int nnodes, cap;
  int next_value_id;
  NamedValue *outputs; int noutputs;  /* `output a, b` in order */
  NamedValue *losses; int nlosses;    /* named scalar loss values (e.g. `loss = ...`) */
  TrainCfg train;
  int64_t max_nodes;       /* elaboration limit; ir_node() fails beyond it */
  int fuse_epilogues;      /* set by the fuse pass: codegen and the report merge
                              single-use elementwise nodes (and inference BN) into
                              the kernel group of their producer */
} Graph;

Graph *ir_graph_new(const char *model);
void ir_graph_free(Graph *g);

/* Builds a node, runs its shape rule and returns its output value.  On a
 * shape/type error it reports through diag at `loc` (naming the shapes) and
 * returns NULL; nothing is added to the graph then. `name`/`layer` may be NULL. */
Value *ir_node(Graph *g, OpKind op, Value **in, int nin, const Attrs *a,
               const char *name, const char *layer, Loc loc);
Value *ir_input(Graph *g, const char *name, DType t, const Shape *s, Loc loc);
Value *ir_param(Graph *g, const char *name, int kind, const Shape *s, const char *layer, Loc loc);
/* Finds a PARAM node by state_dict name, or NULL. */
Node *ir_find_param(Graph *g, const char *name);
void ir_attrs_init(Attrs *a);   /* the defaults: stride 1, dilation 1, groups 1, ... */

/* Shape rule of one op: fills *out_t and *out_s, or reports an error at n->loc and
 * returns -1.  Implemented in shape.c. */
int ir_infer(Graph *g, Node *n, DType *out_t, Shape *out_s);

/* Removes dead nodes, recounts uses. */
void ir_compact(Graph *g);
/* Checks the invariants (topological order, arity, shapes re-inferred equal,
 * use counts).  Returns 0 when sound; prints what is broken to stderr otherwise. */
int ir_verify(Graph *g);
/* Is v the output of a node still in g (not dead, not compacted away)?  A pruned
 * inference graph keeps g->losses and g->train.minimize pointing at removed
 * nodes; check with this before following them.  In verify.c. */
int ir_value_live(const Graph *g, const Value *v);

void ir_print(Graph *g, FILE *f);      /* --emit=ir */
void ir_print_dot(Graph *g, FILE *f);  /* --emit=dot */

/* Output size of a convolution/pooling window along one axis. */
static inline int64_t ir_window_out(int64_t in, int k, int s, int p, int dil) {
  return (in + 2 * (int64_t)p - (int64_t)dil * (k - 1) - 1) / s + 1;
}

#endif
