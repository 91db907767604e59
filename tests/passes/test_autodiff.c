/* test_autodiff.c — the autodiff pass and the training pipelines.
 *
 *   test_autodiff EXAMPLES_DIR
 *
 * What must hold on every training graph autodiff makes (check_training):
 * the verifier passes; no batchnorm2d or dropout is left (bn_stats, bn_train
 * and bn_running replace each batchnorm2d, dropout_apply with slots 0..k-1
 * each dropout); exactly one optimizer node, whose inputs are exactly the
 * values with Value.grad_of, in parameter graph order; each trainable
 * parameter (weights and biases, not running statistics) has exactly one
 * gradient value, of its shape, stored by a computing node (no source, no
 * view); no value is the gradient of a running statistic or of two
 * parameters.  On the examples (lenet, mlp, resnet18 at a small size) and on
 * small models that use every op with a gradient rule, once each: the
 * gradient ops expected are there, and the training pipelines -O0..-O3 run
 * with the verifier after each pass (grouped and planned graphs included).
 * Refusals: a model without a train block, a graph differentiated twice,
 * autodiff without --train. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tests/ir_check.h"

static int count_op(const Graph *g, OpKind op) {
  int k = 0;
  for (int i = 0; i < g->nnodes; i++) k += g->nodes[i]->op == op;
  return k;
}

static int trainable(const Node *n) {
  return n->op == OP_PARAM && (n->param_kind == PK_WEIGHT || n->param_kind == PK_BIAS || n->param_kind == PK_NONE);
}

static int same_shape(const Shape *a, const Shape *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->d[i] != b->d[i]) return 0;
  return 1;
}

/* The invariants above.  nbn/ndrop: batchnorm2d and dropout nodes before. */
static void check_training(Graph *g, const char *what, int nbn, int ndrop) {
  int f0 = fails;
  CHECK(ir_verify(g) == 0);
  CHECK(count_op(g, OP_BATCHNORM2D) == 0 && count_op(g, OP_DROPOUT) == 0 && count_op(g, OP_DROPOUT2D) == 0);
  CHECK(count_op(g, OP_BN_STATS) == nbn && count_op(g, OP_BN_TRAIN) == nbn && count_op(g, OP_BN_RUNNING) == nbn);
  /* forward dropout_apply: one per dropout, slots 0..k-1 in graph order, each used again by the backward */
  int seen = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->op != OP_DROPOUT_APPLY) continue;
    int back = 0;
    for (int j = 0; j < i; j++) back |= g->nodes[j]->op == OP_DROPOUT_APPLY && g->nodes[j]->a.slot == n->a.slot;
    if (!back) {
      CHECK(n->a.slot == seen);
      seen++;
    }
  }
  CHECK(seen == ndrop);
  CHECK(count_op(g, OP_OPTIMIZER) == 1);
  Node *opt = NULL;
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->op == OP_OPTIMIZER) opt = g->nodes[i];
  if (!opt) return;
  int ngrad = 0, ntrain = 0, last_param = -1;
  for (int i = 0; i < g->nnodes; i++) {
    Value *v = g->nodes[i]->out;
    if (v->grad_of) ngrad++;
    if (!trainable(g->nodes[i])) {
      if (g->nodes[i]->op == OP_PARAM)
        for (int j = 0; j < g->nnodes; j++) CHECK(g->nodes[j]->out->grad_of != v);   /* running statistics */
      continue;
    }
    ntrain++;
    Value *gv = NULL;
    int n = 0;
    for (int j = 0; j < g->nnodes; j++)
      if (g->nodes[j]->out->grad_of == v) gv = g->nodes[j]->out, n++;
    CHECK(n == 1);   /* every parameter of these models reaches the loss */
    if (!gv) continue;
    CHECK(same_shape(&gv->shape, &v->shape) && gv->dtype == v->dtype);
    CHECK(!(ncc_ops[gv->def->op].flags & OPF_SOURCE) && !ir_is_view(gv->def));
    /* read by the optimizer, in parameter order */
    int at = -1;
    for (int j = 0; j < opt->nin; j++)
      if (opt->in[j] == gv) at = j;
    CHECK(at >= 0 && at > last_param);
    last_param = at;
  }
  CHECK(ngrad == ntrain && opt->nin == ntrain);
  for (int j = 0; j < opt->nin; j++) CHECK(opt->in[j]->grad_of != NULL);
  if (fails != f0) fprintf(stderr, "  (in %s)\n", what);
}

static PassCtx train_ctx(int opt) {
  PassCtx pc = {0};
  pc.train = 1;
  pc.opt_level = opt;
  pc.verify = 1;
  return pc;
}

/* Loads `text`, counts its batchnorms and dropouts, runs autodiff, checks;
 * then every training pipeline on a fresh copy.  Returns the autodiff graph. */
static Graph *train_text(const char *name, const char *text, const SetOpt *sets, int nsets) {
  Graph *g = frontend_load_text(name, text, strlen(text), sets, nsets);
  CHECK(g != NULL);
  if (!g) return NULL;
  int nbn = count_op(g, OP_BATCHNORM2D), ndrop = count_op(g, OP_DROPOUT) + count_op(g, OP_DROPOUT2D);
  PassCtx pc = train_ctx(0);
  CHECK(passes_run(g, &pc, "autodiff") == 0);
  check_training(g, name, nbn, ndrop);
  for (int o = 0; o < 4; o++) {
    Graph *h = frontend_load_text(name, text, strlen(text), sets, nsets);
    if (!h) continue;
    pc = train_ctx(o);
    CHECK(passes_run(h, &pc, NULL) == 0);   /* the verifier runs after each pass */
    check_training(h, name, nbn, ndrop);
    CHECK(o >= 2 ? h->ngroups > 0 : h->ngroups == 0);
    CHECK(o >= 1 ? h->planned : !h->planned);
    ir_graph_free(h);
  }
  return g;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = NULL; }
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

static void test_examples(const char *dir) {
  static const struct { const char *model; int nparams; SetOpt sets[2]; int nsets; } ex[] = {
    {"lenet", 8, {{"N", "4"}}, 1},
    {"mlp", 6, {{"N", "4"}}, 1},
    {"resnet18", 62, {{"N", "2"}, {"S", "32"}}, 2},
  };
  for (size_t m = 0; m < sizeof ex / sizeof ex[0]; m++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.net", dir, ex[m].model);
    char *text = slurp(path);
    CHECK(text != NULL);
    if (!text) continue;
    Graph *g = train_text(ex[m].model, text, ex[m].sets, ex[m].nsets);
    if (g) {
      CHECK(count_op(g, OP_OPTIMIZER) == 1);
      int ngrad = 0;
      for (int i = 0; i < g->nnodes; i++) ngrad += g->nodes[i]->out->grad_of != NULL;
      CHECK(ngrad == ex[m].nparams);
      fprintf(stderr, "%-9s: %d nodes after autodiff, %d gradients\n", ex[m].model, g->nnodes, ngrad);
      ir_graph_free(g);
    }
    free(text);
  }
}

/* Small models: every op with a gradient rule, and the gradient ops they must give. */
static void test_ops(void) {
  Graph *g;
  /* conv2d (grouped, strided, padded; with and without bias), pools, batchnorm, dropout */
  g = train_text("conv.net",
                 "model conv\n"
                 "input x: f32[2, 4, 8, 8]\n"
                 "input y: i32[2]\n"
                 "h = conv2d(x, 6, kernel=3, stride=2, pad=1, groups=2, name=\"c1\")\n"
                 "h = relu(batchnorm2d(h, name=\"bn1\"))\n"
                 "h = dropout2d(h, 0.25)\n"
                 "h = conv2d(h, 8, kernel=1, bias=false, name=\"c2\")\n"
                 "h = maxpool2d(h, 2, stride=1, pad=1)\n"
                 "h = avgpool2d(h, 2)\n"
                 "h = flatten(global_avgpool2d(h))\n"
                 "logits = linear(dropout(h, 0.1), 3, name=\"fc\")\n"
                 "loss = cross_entropy(logits, y)\n"
                 "train {\n  optimizer adam(lr=1e-3)\n  minimize loss\n}\n",
                 NULL, 0);
  if (g) {
    CHECK(count_op(g, OP_CONV2D_BWD_DATA) == 1);     /* the first conv reads the input: no dx */
    CHECK(count_op(g, OP_CONV2D_BWD_WEIGHT) == 2);
    CHECK(count_op(g, OP_BN_BWD_DATA) == 1 && count_op(g, OP_BN_BWD_WEIGHT) == 1);
    CHECK(count_op(g, OP_MAXPOOL2D_BWD) == 1 && count_op(g, OP_AVGPOOL2D_BWD) == 1 &&
          count_op(g, OP_GAVGPOOL2D_BWD) == 1);
    CHECK(count_op(g, OP_DROPOUT_APPLY) == 4 && count_op(g, OP_CROSS_ENTROPY_BWD) == 1);
    for (int i = 0; i < g->nnodes; i++) {
      Node *n = g->nodes[i];
      if (n->op == OP_DROPOUT_APPLY) CHECK(n->a.slot == 0 ? n->a.axis == 1 && n->a.p == 0.25 : n->a.axis == 0 && n->a.p == 0.1);
      if (n->op == OP_CONV2D_BWD_DATA) CHECK(n->a.out == 8 && n->a.kernel[0] == 1 && n->out->shape.d[1] == 6);
      if (n->op == OP_CONV2D_BWD_WEIGHT && n->out->shape.d[0] == 6)   /* c1 */
        CHECK(n->a.groups == 2 && n->a.stride[0] == 2 && n->a.pad[0] == 1 && n->out->shape.d[1] == 2);
      if (n->op == OP_BN_RUNNING) CHECK(n->a.momentum == 0.1);
    }
    ir_graph_free(g);
  }
  /* the activations, linear, mse_loss */
  g = train_text("act.net",
                 "model act\n"
                 "input x: f32[4, 5]\n"
                 "input t: f32[4, 3]\n"
                 "h = linear(x, 6, name=\"fc1\")\n"
                 "h = leaky_relu(relu6(h), slope=0.2)\n"
                 "h = tanh(h) + gelu(h) + silu(h) + hardswish(h)\n"
                 "h = sqrt(sigmoid(h))\n"
                 "h = relu(linear(h, 3, name=\"fc2\"))\n"
                 "loss = mse_loss(h, t)\n"
                 "train {\n  optimizer sgd(lr=0.1)\n  minimize loss\n}\n",
                 NULL, 0);
  if (g) {
    int acts = 0;
    for (int i = 0; i < g->nnodes; i++)
      if (g->nodes[i]->op == OP_ACT_GRAD) {
        acts |= 1 << g->nodes[i]->a.act;
        if (g->nodes[i]->a.act == OP_LEAKY_RELU) CHECK(g->nodes[i]->a.slope == 0.2);
      }
    const OpKind want[] = {OP_RELU, OP_RELU6, OP_LEAKY_RELU, OP_TANH, OP_GELU, OP_SILU, OP_HARDSWISH, OP_SIGMOID, OP_SQRT};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK(acts & (1 << want[i]));
    CHECK(count_op(g, OP_ACT_GRAD) == 9 && count_op(g, OP_MSE_LOSS_BWD) == 1);
    CHECK(count_op(g, OP_LINEAR_BWD_WEIGHT) == 2 && count_op(g, OP_MATMUL) == 1);   /* fc1's dx is not needed */
    ir_graph_free(g);
  }
  /* add, sub, mul, div with broadcasting (ranks that differ), and a sum of losses */
  g = train_text("binary.net",
                 "model binary\n"
                 "input x: f32[4, 5]\n"
                 "input z: f32[1, 3]\n"
                 "input t: f32[4, 6]\n"
                 "input y: i32[4]\n"
                 "a = linear(x, 6, name=\"fa\")\n"
                 "b = linear(x, 1, name=\"fb\")\n"
                 "s = reshape(linear(z, 6, name=\"fs\"), [6])\n"
                 "h = (a + b) * s - a / (b * b + 1)\n"
                 "h = h - s + b / s\n"
                 "loss = cross_entropy(h, y) + 0.5 * mse_loss(h, t)\n"
                 "train {\n  optimizer adamw(lr=1e-3, weight_decay=0.01)\n  minimize loss\n}\n",
                 NULL, 0);
  if (g) {
    int bcast = 0;
    for (int i = 0; i < g->nnodes; i++)
      if (g->nodes[i]->op == OP_SUM_TO && g->nodes[i]->out->shape.rank == 1 && g->nodes[i]->a.axis == 1 &&
          g->nodes[i]->in[0]->shape.rank == 2 && g->nodes[i]->out->shape.d[0] == 6)
        bcast++;
    CHECK(bcast >= 3);   /* s: [4, 6] -> [6], once per use */
    CHECK(count_op(g, OP_CROSS_ENTROPY_BWD) == 1 && count_op(g, OP_MSE_LOSS_BWD) == 1);
    ir_graph_free(g);
  }
  /* matmul (batched, a broadcast operand), transpose, softmax, log_softmax,
   * layernorm, concat, nll_loss */
  g = train_text("seq.net",
                 "model seq\n"
                 "input x: f32[2, 12]\n"
                 "input z: f32[1, 3]\n"
                 "input y: i32[2]\n"
                 "q = reshape(linear(x, 12, name=\"fq\"), [2, 3, 4])\n"
                 "p = reshape(linear(z, 20, name=\"fp\"), [4, 5])\n"
                 "k = matmul(q, p)\n"
                 "att = softmax(matmul(q, transpose(q, [0, 2, 1])))\n"
                 "m = matmul(att, k)\n"
                 "h = layernorm(concat(flatten(m), flatten(q), axis=1), name=\"ln\")\n"
                 "logp = log_softmax(linear(h, 4, name=\"head\"))\n"
                 "loss = nll_loss(logp, y)\n"
                 "train {\n  optimizer sgd(lr=0.1, momentum=0.9, nesterov=true)\n  minimize loss\n}\n",
                 NULL, 0);
  if (g) {
    CHECK(count_op(g, OP_SOFTMAX_BWD) == 1 && count_op(g, OP_LOG_SOFTMAX_BWD) == 1);
    CHECK(count_op(g, OP_LAYERNORM_BWD_DATA) == 1 && count_op(g, OP_LAYERNORM_BWD_WEIGHT) == 1);
    CHECK(count_op(g, OP_SLICE) == 2 && count_op(g, OP_NLL_LOSS_BWD) == 1);
    int psum = 0;   /* p's gradient sums over q's batch */
    for (int i = 0; i < g->nnodes; i++)
      if (g->nodes[i]->op == OP_SUM_TO && g->nodes[i]->out->shape.rank == 2 && g->nodes[i]->out->shape.d[0] == 4 &&
          g->nodes[i]->out->shape.d[1] == 5)
        psum++;
    CHECK(psum == 1);
    ir_graph_free(g);
  }
  /* a gradient that is a view: the 1-D layernorm's bias gradient is dy itself,
   * here a reshape of the loss's gradient; autodiff stores a copy, mul(dy, 1) */
  g = train_text("copy.net",
                 "model copy\n"
                 "input z: f32[1, 3]\n"
                 "input t: f32[1, 4]\n"
                 "h = layernorm(reshape(linear(z, 4, name=\"fa\"), [4]), name=\"ln\")\n"
                 "loss = mse_loss(reshape(h, [1, 4]), t)\n"
                 "train {\n  optimizer sgd(lr=0.1)\n  minimize loss\n}\n",
                 NULL, 0);
  if (g) {
    Value *gb = NULL;
    for (int i = 0; i < g->nnodes; i++)
      if (g->nodes[i]->out->grad_of && !strcmp(g->nodes[i]->out->grad_of->def->name, "ln.bias")) gb = g->nodes[i]->out;
    CHECK(gb && gb->def->op == OP_MUL && gb->def->in[1]->def->op == OP_CONST && gb->def->in[1]->def->a.fval == 1.0 &&
          gb->def->in[0]->def->op == OP_RESHAPE);
  }
  if (g) ir_graph_free(g);
}

static void test_refusals(const char *dir) {
  fprintf(stderr, "(the errors below are expected)\n");
  const char *text = "model inf\ninput x: f32[2, 3]\nh = linear(x, 2)\noutput h\n";
  Graph *g = frontend_load_text("inf.net", text, strlen(text), NULL, 0);
  CHECK(g != NULL);
  if (g) {
    PassCtx pc = train_ctx(2);
    CHECK(passes_run(g, &pc, NULL) != 0);   /* no train block */
    ir_graph_free(g);
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/mlp.net", dir);
  g = frontend_load(path, NULL, 0);
  CHECK(g != NULL);
  if (g) {
    PassCtx pc = train_ctx(0);
    pc.train = 0;
    CHECK(passes_run(g, &pc, "autodiff") != 0);   /* not a training build */
    pc.train = 1;
    CHECK(passes_run(g, &pc, "autodiff") == 0);
    CHECK(passes_run(g, &pc, "autodiff") != 0);   /* twice */
    /* fold and prune leave a training graph as it is */
    int n = g->nnodes;
    CHECK(passes_run(g, &pc, "fold,prune") == 0 && g->nnodes == n);
    ir_graph_free(g);
  }
}

/* The verifier's training checks catch corrupted gradients. */
static void test_verifier(const char *dir) {
  char path[1024];
  snprintf(path, sizeof path, "%s/resnet18.net", dir);
  SetOpt sets[2] = {{"N", "2"}, {"S", "32"}};
  Graph *g = frontend_load(path, sets, 2);
  CHECK(g != NULL);
  if (!g) return;
  PassCtx pc = train_ctx(2);
  CHECK(passes_run(g, &pc, NULL) == 0);
  Node *opt = NULL, *rm = NULL;
  for (int i = 0; i < g->nnodes; i++) {
    if (g->nodes[i]->op == OP_OPTIMIZER) opt = g->nodes[i];
    if (g->nodes[i]->op == OP_PARAM && g->nodes[i]->param_kind == PK_RUNNING_MEAN && !rm) rm = g->nodes[i];
  }
  CHECK(opt && rm && opt->nin == 62);
  if (!opt || !rm) { ir_graph_free(g); return; }
  fprintf(stderr, "(the verifier messages below are expected)\n");
  CHECK(ir_verify(g) == 0);
  Value *g0 = opt->in[0], *g1 = opt->in[1], *p0 = g0->grad_of, *p1 = g1->grad_of;
  g1->grad_of = p0;                          /* two gradients of one parameter (and a shape that differs) */
  CHECK(ir_verify(g) != 0);
  g1->grad_of = NULL;                        /* an optimizer input that is no gradient */
  CHECK(ir_verify(g) != 0);
  g1->grad_of = rm->out;                     /* the gradient of a running statistic */
  CHECK(ir_verify(g) != 0);
  g1->grad_of = p1;
  CHECK(ir_verify(g) == 0);
  /* a gradient kept in registers: an epilogue after it in its own kernel */
  Node *gd = g0->def;
  int k = gd->group;
  Node *next = NULL;
  for (int i = gd->id + 1; i < g->nnodes && !next; i++)
    if (g->nodes[i]->grole == GROLE_EPILOGUE && g->nodes[i]->group == k) next = g->nodes[i];
  if (!next) {
    /* make the gradient's group look as if it went on: a later node joins it */
    for (int i = gd->id + 1; i < g->nnodes && !next; i++)
      if (g->nodes[i]->grole == GROLE_MAIN && g->nodes[i]->group == k + 1) next = g->nodes[i];
    if (next) {
      int saved = next->group;
      next->group = k;
      next->grole = GROLE_EPILOGUE;
      CHECK(ir_verify(g) != 0);
      next->group = saved;
      next->grole = GROLE_MAIN;
    }
  }
  CHECK(ir_verify(g) == 0);
  /* side nodes (bn-sums): bn_bwd_weight beside bn_bwd_data, bn_running beside bn_stats */
  Node *side = NULL, *upd = NULL;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->grole == GROLE_SIDE && n->op == OP_BN_BWD_WEIGHT && !side) side = n;
    if (n->grole == GROLE_SIDE && n->op == OP_BN_RUNNING && !upd) upd = n;
  }
  CHECK(side && upd);
  if (side && upd) {
    CHECK(side->fuse_rule && strcmp(side->fuse_rule, "bn-sums") == 0);
    int saved = side->group;
    side->group = upd->group;                /* beside a bn_stats: no such pair */
    CHECK(ir_verify(g) != 0);
    side->group = saved;
    side->grole = GROLE_EPILOGUE;            /* a reduction is no epilogue */
    CHECK(ir_verify(g) != 0);
    side->grole = GROLE_SIDE;
    CHECK(ir_verify(g) == 0);
  }
  ir_graph_free(g);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_autodiff EXAMPLES_DIR\n");
    return 2;
  }
  test_examples(argv[1]);
  test_ops();
  test_refusals(argv[1]);
  test_verifier(argv[1]);
  fprintf(stderr, "%d checks, %d failed\n", checks, fails);
  return fails != 0;
}
