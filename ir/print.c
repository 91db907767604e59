/* print.c — the text form of the IR (--emit=ir, --print-after, golden tests)
 * and a Graphviz view (--emit=dot).
 *
 * The text form is meant to be stable and diffable: one node per line in graph
 * order, values named %<id>, only the attributes the op reads (as listed in
 * ops.def), floats with %g, the layer name as a trailing comment.  Dead nodes
 * (marked by a pass, not yet compacted) are skipped.  Outputs, named losses
 * and the training set-up follow the nodes.  Nodes the fold pass marked for
 * load time (computed once from the parameters) say `load-time` before the type.
 *
 *   model lenet
 *   %0 = input "x" : f32[64, 1, 28, 28]
 *   %1 = param "conv1.weight" : f32[10, 1, 5, 5]
 *   %3 = conv2d(%0, %1, %2) kernel=[5,5] stride=[1,1] pad=[0,0] dilation=[1,1] groups=1 : f32[64, 10, 24, 24]  # conv1
 *   output logits = %12
 *
 * After the fuse and plan passes each node line ends with its schedule in
 * braces: the kernel group (k3), the rule that made the node an epilogue
 * (by gemm-epilogue), on a group's main node "stream 1" where the streams
 * pass put the group on the side stream, where its value lives (@4096 in
 * the activation region, @load+256 among the load-time values):
 *
 *   %3 = conv2d(...) ... : f32[64, 10, 24, 24]  # conv1  {k0}
 *   %4 = relu(%3) : f32[64, 10, 24, 24]  # relu1  {k0 by gemm-epilogue @0}
 *
 * and two closing lines give the kernel count and the region sizes.  A loss
 * or a minimised value that prune removed is listed as absent at inference,
 * never as a reference to a value the listing does not define.
 *
 * In the dot form parameters are folded into the label of the node that
 * consumes them, so that a ResNet stays readable, and kernel groups of more
 * than one node are drawn as clusters (compare -O0 with -O3); a group on the
 * side stream (the streams pass) is one even alone, in orange, "stream 1". */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static void print_pair(FILE *f, const char *k, const int *p) { fprintf(f, " %s=[%d,%d]", k, p[0], p[1]); }

static void print_list(FILE *f, const char *k, const Attrs *a) {
  fprintf(f, " %s=[", k);
  for (int i = 0; i < a->nlist && i < NCC_MAX_RANK; i++) fprintf(f, "%s%lld", i ? "," : "", (long long)a->list[i]);
  fputc(']', f);
}

/* The attributes an op reads, in a fixed order. */
static void print_attrs(FILE *f, const Node *n) {
  const Attrs *a = &n->a;
  switch (n->op) {
  case OP_CONV2D: case OP_CONV2D_BWD_DATA: case OP_CONV2D_BWD_WEIGHT:
    print_pair(f, "kernel", a->kernel);
    print_pair(f, "stride", a->stride);
    print_pair(f, "pad", a->pad);
    print_pair(f, "dilation", a->dilation);
    fprintf(f, " groups=%d", a->groups);
    if (a->wtap) fputs(n->op == OP_CONV2D_BWD_DATA ? " weight=in,kh,kw,out" : " weight=tap-major", f);
    break;
  case OP_LINEAR: fprintf(f, " out=%lld", (long long)a->out); break;
  case OP_BATCHNORM2D: case OP_BN_RUNNING: fprintf(f, " eps=%g momentum=%g", a->eps, a->momentum); break;
  case OP_LAYERNORM: case OP_BN_TRAIN: case OP_BN_BWD_DATA: case OP_BN_BWD_WEIGHT:
  case OP_LAYERNORM_BWD_DATA: case OP_LAYERNORM_BWD_WEIGHT: fprintf(f, " eps=%g", a->eps); break;
  case OP_DROPOUT_APPLY: fprintf(f, " p=%g slot=%d%s", a->p, a->slot, a->axis == 1 ? " per-channel" : ""); break;
  case OP_ACT_GRAD:
    fprintf(f, " of=%s", ncc_ops[a->act].name);
    if (a->act == OP_LEAKY_RELU) fprintf(f, " slope=%g", a->slope);
    if (a->act_at_out) fprintf(f, " from=output");
    break;
  case OP_AVGPOOL2D_BWD: case OP_MAXPOOL2D_BWD:
    print_pair(f, "kernel", a->kernel);
    print_pair(f, "stride", a->stride);
    print_pair(f, "pad", a->pad);
    break;
  case OP_SUM_TO: print_list(f, "shape", a); fprintf(f, " at=%d", a->axis); break;
  case OP_QSCALE: print_list(f, "shape", a); break;
  case OP_QUANTIZE: case OP_CAST: break;
  case OP_SLICE: fprintf(f, " axis=%d start=%lld len=%lld", a->axis, (long long)a->list[0], (long long)a->list[1]); break;
  case OP_SOFTMAX_BWD: case OP_LOG_SOFTMAX_BWD: fprintf(f, " axis=%d", a->axis); break;
  case OP_BN_STATS: case OP_LINEAR_BWD_WEIGHT: case OP_GAVGPOOL2D_BWD: case OP_CROSS_ENTROPY_BWD:
  case OP_NLL_LOSS_BWD: case OP_MSE_LOSS_BWD: case OP_OPTIMIZER:
    break;
  case OP_LEAKY_RELU: fprintf(f, " slope=%g", a->slope); break;
  case OP_DROPOUT: case OP_DROPOUT2D: fprintf(f, " p=%g", a->p); break;
  case OP_MAXPOOL2D: case OP_AVGPOOL2D:
    print_pair(f, "kernel", a->kernel);
    print_pair(f, "stride", a->stride);
    print_pair(f, "pad", a->pad);
    break;
  case OP_SOFTMAX: case OP_LOG_SOFTMAX: case OP_CONCAT: fprintf(f, " axis=%d", a->axis); break;
  case OP_RESHAPE: print_list(f, "shape", a); break;
  case OP_TRANSPOSE:
    print_list(f, "perm", a);
    if (a->flip) {
      fputs(" reversed=[", f);
      for (int d = 0, k = 0; d < NCC_MAX_RANK; d++)
        if (a->flip >> d & 1) fprintf(f, "%s%d", k++ ? "," : "", d);
      fputc(']', f);
    }
    break;
  /* no attributes (a source's are printed by ir_print) */
  case OP_INPUT: case OP_PARAM: case OP_CONST: case OP_LOSS_SCALE:
  case OP_MATMUL: case OP_RELU: case OP_RELU6: case OP_SIGMOID: case OP_TANH: case OP_GELU: case OP_SILU:
  case OP_HARDSWISH: case OP_SQRT: case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_GAVGPOOL2D: case OP_FLATTEN:
  case OP_CROSS_ENTROPY: case OP_NLL_LOSS: case OP_MSE_LOSS: case OP__COUNT:
    break;
  }
}

static const char *opt_name(OptKind k) {
  switch (k) {
  case OPT_SGD: return "sgd";
  case OPT_ADAM: return "adam";
  case OPT_ADAMW: return "adamw";
  default: return "none";
  }
}

/* " {k3 by gemm-epilogue @4096}", or nothing without a schedule */
static void print_schedule(FILE *f, const Graph *g, const Node *n) {
  int grouped = g->ngroups > 0 && n->grole != GROLE_NONE;
  int placed = g->planned && n->out->region != MEM_NONE;
  if (!grouped && !placed) return;
  fputs("  {", f);
  if (grouped) {
    fprintf(f, "k%d", n->group);
    if (n->grole == GROLE_MAIN && n->stream) fputs(" stream 1", f);   /* the streams pass: the side stream */
    if (n->grole == GROLE_EPILOGUE || n->grole == GROLE_SIDE || n->grole == GROLE_PROLOGUE)
      fprintf(f, "%s by %s", n->grole == GROLE_SIDE ? " side" : n->grole == GROLE_PROLOGUE ? " prologue" : "",
              n->fuse_rule ? n->fuse_rule : "?");
  }
  if (placed)
    fprintf(f, "%s@%s%lld", grouped ? " " : "", n->out->region == MEM_LOAD ? "load+" : "", (long long)n->out->offset);
  fputc('}', f);
}

/* Is v defined by a node the listing prints? */
static int defined(const Graph *g, const Value *v) { return v && ir_value_live(g, v); }

void ir_print(Graph *g, FILE *f) {
  char buf[200];
  fprintf(f, "model %s\n", g->model ? g->model : "?");
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (n->dead || !n->out) continue;
    fprintf(f, "%%%d = ", n->out->id);
    /* sources print what they are; every other op is a call of its inputs */
    if (n->op == OP_INPUT) {
      fprintf(f, "input \"%s\"", n->name ? n->name : "?");
    } else if (n->op == OP_PARAM) {
      fprintf(f, "param \"%s\"", n->name ? n->name : "?");
    } else if (n->op == OP_CONST) {
      fprintf(f, "const %g", n->a.fval);
    } else if (n->op == OP_LOSS_SCALE) {
      fprintf(f, "loss_scale %g", n->a.fval);   /* the initial scale; the host sets it each step */
    } else {
      fprintf(f, "%s(", ncc_ops[n->op].name);
      for (int k = 0; k < n->nin; k++) fprintf(f, "%s%%%d", k ? ", " : "", n->in[k] ? n->in[k]->id : -1);
      fputc(')', f);
      print_attrs(f, n);
    }
    if (n->load_time) fputs(" load-time", f);
    if (n->prec != PREC_FP32) fprintf(f, " %s", ir_prec_name(n->prec));
    fprintf(f, " : %s", shape_str(buf, sizeof buf, ir_store_type(n->out), &n->out->shape));
    if (n->op != OP_INPUT && n->op != OP_PARAM && n->name) fprintf(f, "  # %s", n->name);
    print_schedule(f, g, n);
    fputc('\n', f);
  }
  /* prune removes what no output needs, losses included: say so rather
   * than name a value the listing does not define */
  for (int i = 0; i < g->noutputs; i++) {
    if (defined(g, g->outputs[i].v)) fprintf(f, "output %s = %%%d\n", g->outputs[i].name, g->outputs[i].v->id);
    else fprintf(f, "output %s: absent (removed by a pass)\n", g->outputs[i].name);
  }
  for (int i = 0; i < g->nlosses; i++) {
    if (defined(g, g->losses[i].v)) fprintf(f, "loss %s = %%%d\n", g->losses[i].name, g->losses[i].v->id);
    else fprintf(f, "loss %s: absent at inference (pruned)\n", g->losses[i].name);
  }
  const TrainCfg *t = &g->train;
  if (t->present) {
    fprintf(f, "train optimizer=%s lr=%g", opt_name(t->opt), t->lr);
    if (t->opt == OPT_SGD)
      fprintf(f, " momentum=%g weight_decay=%g nesterov=%d", t->momentum, t->weight_decay, t->nesterov);
    else
      fprintf(f, " beta1=%g beta2=%g eps=%g weight_decay=%g", t->beta1, t->beta2, t->eps, t->weight_decay);
    switch (t->sched) {
    case SCHED_STEP: fprintf(f, " schedule=step every=%lld gamma=%g", (long long)t->every, t->gamma); break;
    case SCHED_COSINE: fprintf(f, " schedule=cosine total=%lld", (long long)t->total); break;
    default: fprintf(f, " schedule=none"); break;
    }
    if (!t->minimize) fprintf(f, " minimize=none\n");
    else if (defined(g, t->minimize)) fprintf(f, " minimize=%%%d\n", t->minimize->id);
    else fprintf(f, " minimize: absent at inference (pruned)\n");
  }
  if (g->precision != PREC_FP32) fprintf(f, "precision %s\n", ir_prec_name(g->precision));
  if (g->ngroups > 0) fprintf(f, "kernels %d\n", g->ngroups);
  if (g->planned) fprintf(f, "memory activations=%lld load_time=%lld\n", (long long)g->act_bytes, (long long)g->load_bytes);
}

/* Escapes a string for a dot label (quotes, backslashes). */
static void dot_str(FILE *f, const char *s) {
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if (*s == '\n') { fputs("\\n", f); continue; }
    fputc(*s, f);
  }
}

void ir_print_dot(Graph *g, FILE *f) {
  char buf[200];
  fprintf(f, "digraph \"");
  dot_str(f, g->model);
  fprintf(f, "\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n");
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (n->dead || !n->out || n->op == OP_PARAM) continue;
    fprintf(f, "  v%d [label=\"", n->out->id);
    if (n->op == OP_INPUT) {
      fprintf(f, "input ");
      dot_str(f, n->name);
    } else {
      fputs(ncc_ops[n->op].name, f);
      if (n->name) { fputs(" ", f); dot_str(f, n->name); }
    }
    fprintf(f, "\\n%s", shape_str(buf, sizeof buf, ir_store_type(n->out), &n->out->shape));
    for (int k = 0; k < n->nin; k++) {
      const Value *v = n->in[k];
      if (v && v->def && v->def->op == OP_PARAM) {
        fputs("\\n", f);
        dot_str(f, v->def->name);
        fprintf(f, " %s", shape_str(buf, sizeof buf, ir_store_type(v), &v->shape));
      }
    }
    fprintf(f, "\"%s];\n", n->op == OP_INPUT ? ", shape=ellipse" : (ncc_ops[n->op].flags & OPF_LOSS) ? ", style=bold" : "");
    for (int k = 0; k < n->nin; k++) {
      const Value *v = n->in[k];
      if (v && v->def && v->def->op != OP_PARAM) fprintf(f, "  v%d -> v%d;\n", v->id, n->out->id);
    }
  }
  for (int i = 0; i < g->noutputs; i++) {
    fprintf(f, "  out%d [label=\"output ", i);
    dot_str(f, g->outputs[i].name);
    fprintf(f, "\", shape=ellipse];\n");
    if (defined(g, g->outputs[i].v)) fprintf(f, "  v%d -> out%d;\n", g->outputs[i].v->id, i);
  }
  /* kernel groups of several nodes as clusters: one box per launch */
  unsigned char *need = malloc((size_t)g->nnodes + 1), *role = malloc((size_t)g->nnodes + 1);
  int *gid = malloc(sizeof(int) * ((size_t)g->nnodes + 1)), *size = NULL;
  if (!need || !role || !gid) ncc_die("out of memory");
  ir_needed(g, g->training, need);
  int ng = ir_schedule(g, need, gid, role);
  size = calloc((size_t)ng + 1, sizeof(int));
  if (!size) ncc_die("out of memory");
  for (int i = 0; i < g->nnodes; i++)
    if (gid[i] >= 0) size[gid[i]]++;
  for (int i = 0; i < g->nnodes; i++) {
    int side = g->nodes[i]->stream;   /* the streams pass: on the side stream, drawn even alone */
    if (role[i] != GROLE_MAIN || (size[gid[i]] < 2 && !side)) continue;
    int k = gid[i];
    fprintf(f, "  subgraph cluster_k%d {\n    label=\"kernel %d%s\"; style=\"rounded,filled\"; fillcolor=\"%s\"; color=\"%s\";\n    ",
            k, k, side ? ", stream 1" : "", side ? "#fff1e0" : "#eef3ff", side ? "#cc7a29" : "#5577cc");
    for (int j = 0; j < g->nnodes; j++)   /* from 0: a prologue comes before its main node */
      if (gid[j] == k) fprintf(f, "v%d; ", g->nodes[j]->out->id);
    fprintf(f, "\n  }\n");
  }
  fprintf(f, "  label=\"");
  dot_str(f, g->model);
  fprintf(f, ": %d kernels\"; labelloc=t;\n}\n", ng);
  free(need);
  free(role);
  free(gid);
  free(size);
}
