/* init.c — initial parameters when `ncc run` / `ncc bench` get no --weights.
 *
 * PyTorch's defaults, decided by what the IR says a parameter is (its
 * Node.param_kind) and which op consumes it, never by its name:
 *   conv2d, linear  weight: kaiming_uniform_(a=sqrt(5)), i.e.
 *                     uniform(-b, b), b = gain * sqrt(3 / fan_in) with
 *                     gain = sqrt(2 / (1 + a^2)) = sqrt(1/3): b = 1/sqrt(fan_in)
 *                   bias:   uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in
 *                     that of the layer's weight (in channels / groups x kernel)
 *   batchnorm2d     weight 1, bias 0, running_mean 0, running_var 1
 *   layernorm       weight 1, bias 0
 * A parameter of any other kind or consumer has no rule: an error that asks
 * for --weights rather than a guess.
 *
 * The plan is read from the graph as the front end built it, before the
 * passes: folding may rewrite a parameter's consumer (batchnorm into the
 * convolution's weights) and the plan must still see the layer PyTorch sees.
 *
 * The distributions are PyTorch's; the random stream is ncc's own: one
 * splitmix64 stream per parameter, seeded by --seed and the parameter's name,
 * so a parameter's values depend on the seed and on nothing else (not on the
 * order of the others, nor on -O).  They are not torch.manual_seed's values.
 * The tensors are written to a safetensors file and loaded through the
 * generated M_load, the path --weights takes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

typedef enum { RULE_NONE, RULE_KAIMING_UNIFORM, RULE_BIAS_UNIFORM, RULE_ONES, RULE_ZEROS, RULE__COUNT } Rule;

typedef struct InitItem {
  char *name;
  Rule rule;
  int64_t fan_in;
  char why[96];          /* for the error when there is no rule: "bias of matmul" */
} InitItem;

struct InitPlan {
  InitItem *items;
  int n;
};

uint64_t rng_next(uint64_t *s) {            /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

float rng_uniform(uint64_t *s, float lo, float hi) {
  double u = (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);   /* [0, 1), 53 bits */
  return (float)(lo + (hi - lo) * u);
}

static const char *kind_name(int k) {
  switch (k) {
  case PK_NONE: return "parameter";
  case PK_WEIGHT: return "weight";
  case PK_BIAS: return "bias";
  case PK_RUNNING_MEAN: return "running_mean";
  case PK_RUNNING_VAR: return "running_var";
  }
  return "parameter";
}

/* fan_in of a conv2d/linear weight [out, in/groups, kh, kw] or [out, in]:
 * torch.nn.init._calculate_fan_in_and_fan_out's size(1) * receptive field */
static int64_t fan_in_of(const Value *w) {
  if (w->shape.rank < 2 || w->shape.d[0] <= 0) return 0;
  return shape_numel(&w->shape) / w->shape.d[0];
}

/* The rule for parameter p consumed by n. */
static Rule rule_for(const Node *p, const Node *n, int64_t *fan_in) {
  int gemm = n->op == OP_CONV2D || n->op == OP_LINEAR;
  int norm = n->op == OP_BATCHNORM2D || n->op == OP_LAYERNORM;
  *fan_in = 0;
  switch (p->param_kind) {
  case PK_WEIGHT:
    if (gemm) { *fan_in = fan_in_of(p->out); return RULE_KAIMING_UNIFORM; }
    if (norm) return RULE_ONES;
    return RULE_NONE;
  case PK_BIAS:
    if (gemm && n->nin >= 2) { *fan_in = fan_in_of(n->in[1]); return RULE_BIAS_UNIFORM; }
    if (norm) return RULE_ZEROS;
    return RULE_NONE;
  case PK_RUNNING_MEAN:
    return n->op == OP_BATCHNORM2D ? RULE_ZEROS : RULE_NONE;
  case PK_RUNNING_VAR:
    return n->op == OP_BATCHNORM2D ? RULE_ONES : RULE_NONE;
  case PK_NONE:
    return RULE_NONE;
  }
  return RULE_NONE;
}

InitPlan *init_plan(const Graph *g) {
  InitPlan *p = calloc(1, sizeof *p);
  p->items = calloc((size_t)g->nnodes + 1, sizeof *p->items);
  /* the first op that reads a parameter decides its rule */
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->nin; k++) {
      const Node *d = n->in[k] ? n->in[k]->def : NULL;
      if (!d || d->op != OP_PARAM || !d->name) continue;
      int seen = 0;
      for (int j = 0; j < p->n && !seen; j++) seen = !strcmp(p->items[j].name, d->name);
      if (seen) continue;
      InitItem *it = &p->items[p->n++];
      it->name = strdup(d->name);
      it->rule = rule_for(d, n, &it->fan_in);
      snprintf(it->why, sizeof it->why, "%s of %s", kind_name(d->param_kind), ncc_ops[n->op].name);
    }
  }
  return p;
}

void init_plan_free(InitPlan *p) {
  if (!p) return;
  for (int i = 0; i < p->n; i++) free(p->items[i].name);
  free(p->items);
  free(p);
}

static const InitItem *plan_find(const InitPlan *p, const char *name) {
  for (int i = 0; p && i < p->n; i++)
    if (!strcmp(p->items[i].name, name)) return &p->items[i];
  return NULL;
}

static void fill(const InitItem *it, uint64_t seed, float *v, int64_t n) {
  /* the parameter's own stream: seed and name, FNV-1a mixed */
  uint64_t s = 14695981039346656037ULL;
  for (const char *c = it->name; *c; c++) { s ^= (unsigned char)*c; s *= 1099511628211ULL; }
  s ^= seed * 0x9E3779B97F4A7C15ULL;
  double bound = 0;
  switch (it->rule) {
  case RULE_KAIMING_UNIFORM: {
    double a = sqrt(5.0), gain = sqrt(2.0 / (1.0 + a * a));
    bound = it->fan_in > 0 ? gain * sqrt(3.0 / (double)it->fan_in) : 0;
    break;
  }
  case RULE_BIAS_UNIFORM:
    bound = it->fan_in > 0 ? 1.0 / sqrt((double)it->fan_in) : 0;
    break;
  case RULE_ONES:
    for (int64_t k = 0; k < n; k++) v[k] = 1.0f;
    return;
  case RULE_ZEROS: case RULE_NONE: case RULE__COUNT:
    for (int64_t k = 0; k < n; k++) v[k] = 0.0f;
    return;
  }
  for (int64_t k = 0; k < n; k++) v[k] = rng_uniform(&s, (float)-bound, (float)bound);
}

/* The stderr line that says what was done, naming only the rules used. */
static void announce(const Options *o, const int *count, int nparams) {
  static const char *const what[RULE__COUNT] = {
    [RULE_KAIMING_UNIFORM] = "conv2d/linear weights kaiming_uniform(a=sqrt(5))",
    [RULE_BIAS_UNIFORM] = "their biases uniform(+-1/sqrt(fan_in))",
    [RULE_ONES] = "norm weights and running_var 1",
    [RULE_ZEROS] = "norm biases and running_mean 0",
  };
  if (o->quiet_init) return;
  char list[512] = "";
  size_t k = 0;
  for (int r = RULE_KAIMING_UNIFORM; r < RULE__COUNT && k < sizeof list; r++)
    if (count[r]) k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", k ? "; " : "", what[r]);
  drv_note("no --weights: %d parameter tensor%s initialised as PyTorch initialises these layers (%s), "
           "from seed %llu%s",
           nparams, nparams == 1 ? "" : "s", list, o->seed, o->seed_given ? "" : " (the default; --seed S changes it)");
}

int init_weights(const Options *o, Model *M) {
  const ncc_model_info *inf = M->inf;
  if (inf->nparams == 0) return 0;
  int count[RULE__COUNT] = {0};
  void **bufs = (void **)calloc((size_t)inf->nparams, sizeof *bufs);
  int rc = 0;
  for (int i = 0; i < inf->nparams && !rc; i++) {
    const ncc_tensor_info *t = &inf->params[i];
    const InitItem *it = plan_find(M->init, t->name);
    if (!it) {
      rc = drv_internal("parameter %s of the compiled model is not in the graph the front end built", t->name);
      break;
    }
    if (it->rule == RULE_NONE) {
      rc = drv_error("parameter %s (%s): no default initialisation is known for it; give --weights", t->name, it->why);
      break;
    }
    if (t->dtype != NCC_F32) {
      rc = drv_error("parameter %s is %s; only f32 parameters can be initialised; give --weights", t->name,
                     dt_name(t->dtype));
      break;
    }
    int64_t n = numel(t->rank, t->shape);
    bufs[i] = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    fill(it, o->seed, (float *)bufs[i], n);
    count[it->rule]++;
  }
  char path[600], err[1024] = "";
  snprintf(path, sizeof path, "%s/init.safetensors", M->tmpdir);
  if (!rc && ncc_save_safetensors(path, inf->params, inf->nparams, (const void *const *)bufs, err, sizeof err) != 0)
    rc = drv_internal("cannot write the initial weights: %s", err);
  for (int i = 0; i < inf->nparams; i++) free(bufs[i]);
  free(bufs);
  if (rc) return rc;
  if (M->load(M->m, path) != 0) {
    const char *msg = M->error(M->m);
    return drv_internal("loading the initial weights failed: %s", msg && *msg ? msg : "(no message)");
  }
  announce(o, count, inf->nparams);
  return 0;
}
