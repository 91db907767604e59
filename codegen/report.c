/* report.c — `ncc --emit=report`: what the compiled model costs.
 *
 * One row per node that becomes (part of) a kernel, in graph order: op, layer,
 * output shape, parameters it owns, FLOPs, bytes moved, the activation it
 * writes and a roofline time on --arch.  Then human summary lines and, last,
 * the one machine-readable line tools and tests parse (ARCHITECTURE.md):
 *   total: params=P flops=F launches=L bytes=B peak_memory=M naive_memory=U
 *
 * Conventions (chosen to match how the published model figures are counted):
 *   - params: numel of every PARAM except BatchNorm running statistics — the
 *     count of torch's `sum(p.numel() for p in m.parameters())`, which leaves
 *     buffers out.  Torchvision's 25,557,032 for ResNet-50 is that count.
 *   - FLOPs: 2 per multiply-add in conv/linear/matmul (+1 per bias add); one
 *     per element for elementwise ops, transcendental or not (tinygrad's
 *     habit: a roofline, not a cycle count); pooling one per window element;
 *     normalisation and softmax a few per element (constants below).
 *   - multiply-adds: conv/linear/matmul only — the figure torchvision and
 *     fvcore publish as "GFLOPS" (4.09 G for ResNet-50, 15.47 G for VGG-16).
 *   - launches: nodes that would become kernels: not sources, not shape-only
 *     views (flatten/reshape alias their input's bytes) and, at inference, not
 *     train-only identities (dropout).  Until the fusion pass groups nodes,
 *     one node is one kernel.
 *   - bytes: every kernel reads each input once and writes its output once.
 *   - naive_memory: the sum of all activation buffers (graph inputs and every
 *     kernel output; views own no bytes; weights are not activations).
 *   - peak_memory: a liveness walk over the node order: a buffer is allocated
 *     when its node runs and freed after its last use (through views); graph
 *     inputs and outputs stay live to the end.  The memory-planning pass
 *     should reach this figure; it is the lower bound for this order. */
#include "codegen.h"

#include <stdlib.h>
#include <string.h>

/* Per-element FLOP estimates of the non-GEMM ops (documented above). */
enum {
  FL_BN_INFER = 2,      /* y = x*scale + shift after folding */
  FL_BN_TRAIN = 7,      /* mean, variance, normalise, affine */
  FL_LAYERNORM = 8,     /* mean, variance, normalise, affine */
  FL_SOFTMAX = 5,       /* max, subtract, exp, sum, divide */
  FL_XENT = 6,          /* log-softmax + pick + mean */
  FL_MSE = 3,           /* subtract, square, sum */
};

typedef struct Arch { const char *name; double flops, bw, launch_us; } Arch;
/* fp32 (non-tensor-core) peak and HBM bandwidth of the reference parts:
 * A100-SXM4 and H100-SXM5; launch overhead ~3 us. */
static const Arch arches[] = {
  {"sm_80", 19.5e12, 1.555e12, 3.0},
  {"sm_86", 35.6e12, 0.936e12, 3.0},
  {"sm_89", 82.6e12, 1.008e12, 3.0},
  {"sm_90", 67.0e12, 3.35e12, 3.0},
};

static const Arch *arch_lookup(const char *name) {
  /* --arch may be a list ("sm_80,sm_90"): model the first one. */
  for (size_t i = 0; name && i < sizeof arches / sizeof arches[0]; i++)
    if (!strncmp(name, arches[i].name, 5)) return &arches[i];
  return &arches[3];
}

static int64_t vbytes(const Value *v) { return shape_numel(&v->shape) * dtype_size(v->dtype); }

static int is_param_counted(const Node *n) {
  return n->op == OP_PARAM && n->param_kind != PK_RUNNING_MEAN && n->param_kind != PK_RUNNING_VAR;
}

/* Does this node become a kernel? */
static int is_kernel(const Node *n, int train) {
  unsigned f = ncc_ops[n->op].flags;
  if (f & (OPF_SOURCE | OPF_SHAPE_ONLY)) return 0;
  if ((f & OPF_TRAIN_ONLY) && !train) return 0;
  return 1;
}

/* Is the output a view of in[0] (no bytes of its own)? */
static int is_view(const Node *n, int train) {
  unsigned f = ncc_ops[n->op].flags;
  return n->nin >= 1 && ((f & OPF_SHAPE_ONLY) || ((f & OPF_TRAIN_ONLY) && !train));
}

/* Graph inputs and kernel outputs own activation buffers; views, weights and
 * constants do not. */
static int owns_buffer(const Node *n, int train) {
  return n->op == OP_INPUT || (is_kernel(n, train) && !is_view(n, train));
}

static int64_t gemm_macs(const Node *n) {
  const Shape *o = &n->out->shape;
  switch (n->op) {
  case OP_CONV2D: {
    const Shape *w = &n->in[1]->shape;  /* [out, in/groups, kh, kw] */
    return shape_numel(o) * w->d[1] * w->d[2] * w->d[3];
  }
  case OP_LINEAR: return shape_numel(o) * n->in[1]->shape.d[1];
  case OP_MATMUL: {
    const Shape *a = &n->in[0]->shape;
    return shape_numel(o) * a->d[a->rank - 1];
  }
  default: return 0;
  }
}

static int64_t node_flops(const Node *n, int train) {
  int64_t out = shape_numel(&n->out->shape), in0 = n->nin ? shape_numel(&n->in[0]->shape) : 0;
  switch (n->op) {
  case OP_CONV2D:
  case OP_LINEAR: return 2 * gemm_macs(n) + (n->nin == 3 ? out : 0);
  case OP_MATMUL: return 2 * gemm_macs(n);
  case OP_BATCHNORM2D: return (train ? FL_BN_TRAIN : FL_BN_INFER) * out;
  case OP_LAYERNORM: return FL_LAYERNORM * out;
  case OP_MAXPOOL2D:
  case OP_AVGPOOL2D: return out * n->a.kernel[0] * n->a.kernel[1];
  case OP_GAVGPOOL2D: return in0;
  case OP_SOFTMAX:
  case OP_LOG_SOFTMAX: return FL_SOFTMAX * out;
  case OP_CROSS_ENTROPY: return FL_XENT * in0;
  case OP_NLL_LOSS: return in0 ? n->in[0]->shape.d[0] : 0;
  case OP_MSE_LOSS: return FL_MSE * in0;
  default: break;
  }
  unsigned f = ncc_ops[n->op].flags;
  if (f & (OPF_SOURCE | OPF_SHAPE_ONLY | OPF_MOVE)) return 0;
  if ((f & OPF_TRAIN_ONLY) && !train) return 0;
  /* elementwise and anything added later: one per output element */
  return out;
}

/* "123.4 M" style, for the human columns; exact figures are on the total line. */
static char *human(char *buf, size_t n, double v, const char *unit) {
  static const char *const sfx[] = {"", " K", " M", " G", " T", " P"};
  int k = 0;
  while (v >= 1000 && k < 5) { v /= 1000; k++; }
  if (k == 0) snprintf(buf, n, "%.0f%s%s", v, *unit ? " " : "", unit);
  else snprintf(buf, n, "%.*f%s%s", v < 10 ? 2 : v < 100 ? 1 : 0, v, sfx[k], unit);
  return buf;
}

static const char *row_name(const Node *n) {
  if (n->layer) return n->layer;
  if (n->name) return n->name;
  return "-";
}

/* Autodiff lands as a pass that appends gradient/update ops to ops.def after
 * the forward ops; a graph made only of the forward ops (up to mse_loss) has
 * no backward yet. */
static int has_backward(const Graph *g) {
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->op > OP_MSE_LOSS) return 1;
  return 0;
}

void report_print(Graph *g, FILE *f, int train, const char *arch_name) {
  const Arch *arch = arch_lookup(arch_name);
  int nn = g->nnodes;
  /* root[i]: the node whose buffer node i's output lives in (through views). */
  int *root = malloc(sizeof(int) * (size_t)(nn + 1));
  int *last = malloc(sizeof(int) * (size_t)(nn + 1));
  if (!root || !last) ncc_die("out of memory");
  int64_t batch = 0;
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    root[i] = is_view(n, train) ? root[n->in[0]->def->id] : i;
    last[i] = -1;
    if (n->op == OP_INPUT && !batch && n->out->shape.rank >= 1) batch = n->out->shape.d[0];
  }
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    for (int j = 0; j < n->nin; j++) last[root[n->in[j]->def->id]] = i;
  }
  for (int i = 0; i < nn; i++)
    if (g->nodes[i]->op == OP_INPUT) last[i] = nn;   /* inputs stay live */
  /* losses pruned at inference are no longer in the graph: skip them */
  for (int i = 0; i < g->noutputs; i++)
    if (ir_value_live(g, g->outputs[i].v)) last[root[g->outputs[i].v->def->id]] = nn;
  for (int i = 0; i < g->nlosses; i++)
    if (ir_value_live(g, g->losses[i].v)) last[root[g->losses[i].v->def->id]] = nn;

  /* column width of the layer names */
  int wname = 5;
  for (int i = 0; i < nn; i++) {
    int l = (int)strlen(row_name(g->nodes[i]));
    if (is_kernel(g->nodes[i], train) && l > wname) wname = l;
  }
  if (wname > 40) wname = 40;

  fprintf(f, "# ncc report: model %s, %s, batch %lld, %s roofline (fp32 %.1f TFLOP/s, %.0f GB/s, %.0f us/launch)\n",
          g->model, train ? "per training step" : "per inference", (long long)batch, arch->name, arch->flops / 1e12,
          arch->bw / 1e9, arch->launch_us);
  if (train && !g->train.present)
    fprintf(f, "# the model has no train block: the figures are those of inference\n");
  else if (train && !has_backward(g))
    fprintf(f, "# no backward graph yet (autodiff has not run): the figures cover the forward pass only\n");
  fprintf(f, "# %4s  %-16s %-*s %-22s %11s %10s %10s %10s %9s\n", "id", "op", wname, "layer", "output", "params",
          "FLOPs", "bytes", "act.bytes", "time_us");

  int64_t params = 0, flops = 0, macs = 0, bytes = 0, naive = 0, peak = 0, live = 0, weights = 0;
  int64_t launches = 0;
  double time_us = 0;
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    if (is_param_counted(n)) params += shape_numel(&n->out->shape);
    if (n->op == OP_PARAM) weights += vbytes(n->out);
    /* liveness: graph inputs and kernel outputs own buffers; views do not */
    int owns = owns_buffer(n, train);
    if (owns) {
      naive += vbytes(n->out);
      live += vbytes(n->out);
      if (live > peak) peak = live;
    }
    if (is_kernel(n, train)) {
      int64_t np = 0, by = vbytes(n->out), fl = node_flops(n, train);
      for (int j = 0; j < n->nin; j++) {
        by += vbytes(n->in[j]);
        if (is_param_counted(n->in[j]->def)) np += shape_numel(&n->in[j]->shape);
      }
      double t = (double)fl / arch->flops, tb = (double)by / arch->bw;
      double us = (t > tb ? t : tb) * 1e6 + arch->launch_us;
      launches++;
      flops += fl;
      macs += gemm_macs(n);
      bytes += by;
      time_us += us;
      char sh[200], b1[32], b2[32], b3[32], pc[32];
      snprintf(pc, sizeof pc, "%lld", (long long)np);
      fprintf(f, "  %4d  %-16s %-*.*s %-22s %11s %10s %10s %10s %9.1f\n", n->id, ncc_ops[n->op].name, wname, wname,
              row_name(n), shape_str(sh, sizeof sh, n->out->dtype, &n->out->shape), np ? pc : "-",
              human(b1, sizeof b1, (double)fl, ""), human(b2, sizeof b2, (double)by, "B"),
              human(b3, sizeof b3, (double)(root[i] == i ? vbytes(n->out) : 0), "B"), us);
    }
    /* free what dies here (after the node ran: its inputs and output coexisted) */
    for (int j = 0; j < n->nin; j++) {
      int r = root[n->in[j]->def->id];
      if (last[r] == i && owns_buffer(g->nodes[r], train)) { live -= vbytes(g->nodes[r]->out); last[r] = -2; }
    }
    if (owns && last[i] == -1) live -= vbytes(n->out);  /* computed but never used */
  }

  char b1[32], b2[32], b3[32];
  fprintf(f, "# multiply-adds: total=%lld per_sample=%lld (%s per sample)\n", (long long)macs,
          (long long)(batch > 0 ? macs / batch : macs), human(b1, sizeof b1, (double)(batch > 0 ? macs / batch : macs), ""));
  fprintf(f, "# weights: %s; activations: naive %s, peak %s; modeled time %.1f us on %s\n",
          human(b1, sizeof b1, (double)weights, "B"), human(b2, sizeof b2, (double)naive, "B"),
          human(b3, sizeof b3, (double)peak, "B"), time_us, arch->name);
  fprintf(f, "total: params=%lld flops=%lld launches=%lld bytes=%lld peak_memory=%lld naive_memory=%lld\n",
          (long long)params, (long long)flops, (long long)launches, (long long)bytes, (long long)peak,
          (long long)naive);
  free(root);
  free(last);
}
