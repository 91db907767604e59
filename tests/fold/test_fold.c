/* test_fold.c — unit tests of the fold pass (passes/fold.c) on graphs built
 * with ir_node(), for what the .net language cannot spell: elementwise ops on
 * constants only, statistics that arrive as inputs, elementwise ops on
 * parameters, the training mode, and the order of the rewritten graph.
 * Expected constants are worked out by hand (float arithmetic, PyTorch's NaN
 * semantics), not copied from a run. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "passes/passes.h"
#include "tests/ir_check.h"

static const Loc L = {"test_fold.c", 1, 1};

static Graph *g;

static Value *in(const char *name, Shape s) { return ir_input(g, name, DT_F32, &s, L); }
static Value *param(const char *name, int kind, Shape s) { return ir_param(g, name, kind, &s, NULL, L); }
static Value *node(OpKind op, Value **x, int n, const Attrs *a) {
  Value *v = ir_node(g, op, x, n, a, NULL, NULL, L);
  if (!v) { fprintf(stderr, "building %s failed\n", ncc_ops[op].name); exit(2); }
  return v;
}
static Value *un(OpKind op, Value *x) { return node(op, &x, 1, NULL); }
static Value *bin(OpKind op, Value *a, Value *b) { Value *v[2] = {a, b}; return node(op, v, 2, NULL); }
static Value *cst(double f) {
  Attrs a;
  ir_attrs_init(&a);
  a.fval = f;
  return node(OP_CONST, NULL, 0, &a);
}
static void output(const char *name, Value *v) {
  g->outputs = realloc(g->outputs, sizeof(NamedValue) * (size_t)(g->noutputs + 1));
  g->outputs[g->noutputs++] = (NamedValue){name, v};
}
static Value *out_value(const char *name) {
  for (int i = 0; i < g->noutputs; i++)
    if (!strcmp(g->outputs[i].name, name)) return g->outputs[i].v;
  return NULL;
}
static int count(OpKind op) {
  int n = 0;
  for (int i = 0; i < g->nnodes; i++) n += g->nodes[i]->op == op;
  return n;
}
static int run_fold(int train) {
  PassCtx c;
  memset(&c, 0, sizeof c);
  c.train = train;
  c.opt_level = 1;
  int rc = pass_fold(g, &c);
  CHECK(ir_verify(g) == 0);
  return rc;
}
static void fresh(void) {
  if (g) { free(g->outputs); ir_graph_free(g); }
  g = ir_graph_new("t");
}
static Value *bn_of(Value *x, Value *const *stats) {
  Value *v[5] = {x, stats[0], stats[1], stats[2], stats[3]};
  return node(OP_BATCHNORM2D, v, 5, NULL);
}

/* elementwise ops on constants become constants, computed in float */
static void test_constants(void) {
  fresh();
  Value *x = in("x", S(2, 2, 3));
  Value *a = bin(OP_ADD, cst(0.1), cst(0.2));              /* 0.1f + 0.2f */
  Value *r = un(OP_RELU, cst(-2.0));                       /* 0 */
  Value *n = un(OP_RELU, bin(OP_DIV, cst(0.0), cst(0.0)));  /* NaN through relu, as torch */
  Value *q = un(OP_SQRT, bin(OP_MUL, cst(3.0), cst(3.0)));  /* 3 */
  Value *s = un(OP_SIGMOID, cst(0.0));                     /* 0.5 */
  output("a", bin(OP_MUL, x, a));
  output("r", bin(OP_ADD, x, r));
  output("n", bin(OP_ADD, x, n));
  output("q", bin(OP_SUB, x, q));
  output("s", bin(OP_MUL, x, s));
  CHECK(run_fold(0) == 0);
  CHECK(out_value("a")->def->in[1]->def->op == OP_CONST);
  CHECK((float)out_value("a")->def->in[1]->def->a.fval == 0.1f + 0.2f);
  CHECK(out_value("r")->def->in[1]->def->op == OP_CONST && out_value("r")->def->in[1]->def->a.fval == 0.0);
  CHECK(out_value("n")->def->in[1]->def->op == OP_CONST && isnan(out_value("n")->def->in[1]->def->a.fval));
  CHECK(out_value("q")->def->in[1]->def->op == OP_CONST && out_value("q")->def->in[1]->def->a.fval == 3.0);
  CHECK(out_value("s")->def->in[1]->def->op == OP_CONST && out_value("s")->def->in[1]->def->a.fval == 0.5);
  /* five outputs, one input, five constants, nothing else: the folded-away operands are gone */
  CHECK(g->nnodes == 11 && count(OP_CONST) == 5);
  /* the same in training: constants do not depend on parameters */
  fresh();
  x = in("x", S(1, 4));
  output("y", bin(OP_MUL, x, bin(OP_SUB, cst(5.0), cst(3.0))));
  CHECK(run_fold(1) == 0);
  CHECK(out_value("y")->def->in[1]->def->op == OP_CONST && out_value("y")->def->in[1]->def->a.fval == 2.0);
}

/* identities: exact ones go, x + 0 stays (-0 + 0 is +0) */
static void test_identities(void) {
  fresh();
  Value *x = in("x", S(2, 2, 3)), *y = in("y", S(2, 2, 3));
  output("mul1", bin(OP_ADD, y, bin(OP_MUL, cst(1.0), x)));
  output("div1", bin(OP_ADD, y, bin(OP_DIV, x, cst(1.0))));
  output("sub0", bin(OP_ADD, y, bin(OP_SUB, x, cst(0.0))));
  output("addm0", bin(OP_ADD, y, bin(OP_ADD, x, cst(-0.0))));
  Value *keep = bin(OP_ADD, x, cst(0.0));
  output("add0", bin(OP_ADD, y, keep));
  output("subm0", bin(OP_ADD, y, bin(OP_SUB, x, cst(-0.0))));   /* -0 - (-0) is +0: stays */
  output("rsub0", bin(OP_ADD, y, bin(OP_SUB, cst(0.0), x)));     /* 0 - x is not x */
  Value *big = in("b", S(3, 4, 2, 3));
  output("bcast", bin(OP_MUL, big, cst(1.0)));                  /* x * 1 of the same shape: goes */
  output("bcast2", bin(OP_MUL, x, bin(OP_MUL, cst(1.0), cst(1.0))));
  CHECK(run_fold(0) == 0);
  CHECK(out_value("mul1")->def->in[1] == x);
  CHECK(out_value("div1")->def->in[1] == x);
  CHECK(out_value("sub0")->def->in[1] == x);
  CHECK(out_value("addm0")->def->in[1] == x);
  CHECK(out_value("add0")->def->in[1] == keep);
  CHECK(out_value("subm0")->def->in[1] != x && out_value("subm0")->def->in[1]->def->op == OP_SUB);
  CHECK(out_value("rsub0")->def->in[1]->def->op == OP_SUB);
  CHECK(out_value("bcast") == big);
  CHECK(out_value("bcast2") == x);   /* 1 * 1 folds to 1, then x * 1 goes */
}

/* batchnorm: conv+bn folds, stats that are inputs do not, training folds nothing */
static void test_batchnorm(void) {
  fresh();
  Value *x = in("x", S(4, 1, 3, 5, 5));
  Attrs a;
  ir_attrs_init(&a);
  a.out = 4;
  a.kernel[0] = a.kernel[1] = 3;
  a.pad[0] = a.pad[1] = 1;
  Value *w = param("c.weight", PK_WEIGHT, S(4, 4, 3, 3, 3));
  Value *cv[2] = {x, w};
  Value *c = node(OP_CONV2D, cv, 2, &a);
  Value *st[4] = {param("bn.weight", PK_WEIGHT, S(1, 4)), param("bn.bias", PK_BIAS, S(1, 4)),
                  param("bn.running_mean", PK_RUNNING_MEAN, S(1, 4)), param("bn.running_var", PK_RUNNING_VAR, S(1, 4))};
  output("y", un(OP_RELU, bn_of(c, st)));
  /* statistics fed as inputs: nothing to precompute, the batchnorm stays */
  Value *z = in("z", S(4, 1, 4, 5, 5));
  Value *dyn[4] = {in("g", S(1, 4)), in("b", S(1, 4)), in("m", S(1, 4)), in("v", S(1, 4))};
  output("d", bn_of(z, dyn));
  /* an elementwise op on parameters only is computed at load time */
  output("p", bin(OP_MUL, z, un(OP_RELU, param("p.weight", PK_WEIGHT, S(1, 5)))));
  CHECK(run_fold(0) == 0);
  Node *conv = out_value("y")->def->in[0]->def;
  CHECK(conv->op == OP_CONV2D && conv->nin == 3 && conv->a.has_bias);
  CHECK(conv->in[1]->def->load_time && conv->in[2]->def->load_time && !conv->load_time);
  CHECK(conv->in[1]->def->op == OP_MUL && conv->in[1]->def->in[0] == w);
  CHECK(out_value("d")->def->op == OP_BATCHNORM2D);
  CHECK(out_value("p")->def->in[1]->def->op == OP_RELU && out_value("p")->def->in[1]->def->load_time);
  CHECK(count(OP_BATCHNORM2D) == 1 && count(OP_SQRT) == 1);
  /* every parameter stays (M_load reads them, M_save writes them) */
  CHECK(ir_find_param(g, "bn.running_var") && ir_find_param(g, "c.weight") && ir_find_param(g, "bn.bias"));
  /* (run_fold verified the order: appended nodes moved before their readers) */
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->load_time)
      for (int j = 0; j < g->nodes[i]->nin; j++) CHECK(g->nodes[i]->in[j]->def->op != OP_INPUT);

  /* training: parameters change every step, nothing may be kept */
  fresh();
  x = in("x", S(4, 1, 3, 5, 5));
  Value *w2 = param("c.weight", PK_WEIGHT, S(4, 4, 3, 3, 3));
  Value *cv2[2] = {x, w2};
  c = node(OP_CONV2D, cv2, 2, &a);
  Value *st2[4] = {param("bn.weight", PK_WEIGHT, S(1, 4)), param("bn.bias", PK_BIAS, S(1, 4)),
                   param("bn.running_mean", PK_RUNNING_MEAN, S(1, 4)), param("bn.running_var", PK_RUNNING_VAR, S(1, 4))};
  output("y", bn_of(c, st2));
  CHECK(run_fold(1) == 0);
  CHECK(out_value("y")->def->op == OP_BATCHNORM2D);
  for (int i = 0; i < g->nnodes; i++) CHECK(!g->nodes[i]->load_time);
}

/* the verifier refuses a load-time node that reads an input */
static void test_verify(void) {
  fresh();
  Value *x = in("x", S(1, 3));
  Value *y = un(OP_RELU, x);
  output("y", y);
  CHECK(ir_verify(g) == 0);
  fprintf(stderr, "(the verifier message below is expected)\n");
  y->def->load_time = 1;
  CHECK(ir_verify(g) != 0);
}

int main(void) {
  test_constants();
  test_identities();
  test_batchnorm();
  test_verify();
  if (g) { free(g->outputs); ir_graph_free(g); }
  printf("test_fold: %d checks, %d failed\n", checks, fails);
  return fails != 0;
}
