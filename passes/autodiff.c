/* autodiff.c — reverse-mode differentiation of the IR (the `autodiff` pass).
 *
 * For a training step it rewrites the forward graph into its training form
 * and appends the backward graph and the updates, all as ordinary IR nodes,
 * so that fusion, memory planning and codegen treat them like any other. */
#include <string.h>

#include "passes.h"

typedef struct AdCtx AdCtx;
struct AdCtx {
  Graph *g;
};

typedef int GradRule(AdCtx *c, Node *n, Value *dy);
static int grad_none(AdCtx *c, Node *n, Value *dy) {
  (void)c; (void)dy;
  diag_error(n->loc, "autodiff: %s has no gradient", ncc_ops[n->op].name);
  return -1;
}
static int grad_conv2d(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_linear(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_matmul(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_layernorm(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_act(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_add(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_sub(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_mul(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_div(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_maxpool2d(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_avgpool2d(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_gavgpool2d(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_softmax(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_log_softmax(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_concat(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_reshape(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_transpose(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_cross_entropy(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_nll_loss(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_mse_loss(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_bn_train(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }
static int grad_dropout_apply(AdCtx *c, Node *n, Value *dy) { return grad_none(c, n, dy); }

/* The GRAD column of ops.def. */
static GradRule *const grad_rules[OP__COUNT] = {
#define OP(name, str, flags, mn, mx, args, shape, emit, cost, expr, grad) grad_##grad,
#include "../ir/ops.def"
#undef OP
};

int pass_autodiff(Graph *g, PassCtx *pc) {
  (void)pc;
  (void)grad_rules;
  diag_error(g->train.loc, "autodiff: not written yet");
  return -1;
}
