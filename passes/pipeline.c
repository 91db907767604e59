/* pipeline.c — the pass registry and the -O pipelines, as plain lists.
 *
 * Every pass has one signature (passes.h).  The pipelines are strings so that
 * `--passes=` and `-O` go through the same code, and `--print-after=NAME`
 * prints the IR after the named pass (or after every pass with "all").  With
 * c->verify the verifier re-checks the graph after each pass (on in debug
 * builds, in `ncc run` and in the tests).
 *
 * The -O levels (also printed by `ncc --help`, passes_usage()):
 *   -O0  prune: only what defines the inference graph.  Dropout is the
 *        identity at inference and what no output needs is not computed; the
 *        generated API lists exactly the inputs and outputs the pruned graph
 *        has.  Nothing else: one kernel per op (no fuse annotations means one
 *        node per group, ir_schedule) and every stored value its own bytes
 *        (no plan).
 *   -O1  prune, fold, plan: constants and parameter-only subgraphs computed
 *        once (fold), values whose lifetimes do not meet share bytes (plan).
 *   -O2  adds fuse with the -O2 rules: epilogue fusion (elementwise chains;
 *        bias, activation, residual and inference batchnorm into conv, GEMM,
 *        pooling, softmax/layernorm, concat/transpose kernels).  The default.
 *   -O3  fuse with the -O3 rules too: they trade work or code size for
 *        launches and bytes (recompute: a cheap kernel with several
 *        elementwise readers is computed again inside each).
 *   From -O2 on, streams (after fuse, before plan) puts the kernel groups
 *   off the step's longest chain on a second stream (--streams=off: not).
 * `--passes=LIST` runs exactly LIST; fuse named there applies the rules of
 * max(-O2, the -O level).
 *
 * Training (PassCtx.train: --train, `ncc train`) has its own pipelines, and
 * `autodiff` always comes first: it turns the forward graph into a training
 * step (training forward, backward graph, updates).  prune and fold are
 * inference passes and are not in them (dropout is no identity in training,
 * and nothing computed from the parameters may be kept between steps):
 *   -O0  autodiff
 *   -O1  autodiff, plan
 *   -O2  autodiff, fuse, streams, plan   (-O3 alike; fuse applies its -O3 rules)
 * With --passes=LIST and --train, LIST is taken as given.
 * Every inference pipeline ends with `batch`, an analysis that changes
 * nothing in the graph: it marks the values whose rows follow the batch, so
 * that one build serves batches 1..N (passes/batch.c).  Without it (a
 * --passes list that leaves it out) the build runs the compiled batch only.
 * --precision other than fp32 adds the precision pass to the inference
 * pipelines, after fold and before fuse, and to the training ones right
 * after autodiff (docs/precision.md); both also run the storage pass after
 * fuse, before plan (at fp16, bf16 and int8: narrow storage of what only the
 * rounding or quantizing GEMMs read; in a training step only the weights'
 * copies the precision pass makes once a step). */
#include "passes.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const Pass passes[] = {
  {"autodiff", pass_autodiff, "training: batchnorm and dropout in training form, the backward graph (gradients) "
                              "and the updates (optimizer, running statistics)"},
  {"prune", pass_prune, "inference: drop train-only identities (dropout) and nodes no output needs"},
  {"fold", pass_fold, "constant folding; inference batchnorm folded into the conv before it (or into a scale/shift), "
                      "its parameter-only arithmetic marked load-time; conv weights reordered tap-major at load"},
  {"fuse", pass_fuse, "kernel groups by named rules: epilogues into their producer's kernel (-v: what stays unfused, and why)"},
  {"streams", pass_streams, "kernel groups off the step's longest chain (by estimated work) on a second stream, "
                            "beside it (--streams=off: one stream)"},
  {"plan", pass_plan, "memory plan: arena offsets of stored values; lifetimes that do not meet share bytes, in place where legal"},
  {"batch", pass_batch, "inference: which values keep the batch in their rows, so that one build serves batches 1..N"},
  {"precision", pass_precision, "the math precision of each op from --precision (tf32: GEMM operands rounded to TF32; "
                                "fp16/bf16 inference: the GEMMs' parameter weights converted at load); "
                                "in every pipeline when --precision is not fp32"},
  {"storage", pass_storage, "fp16/bf16/int8: a value that only GEMMs rounding to that type (int8: quantizing with "
                            "one scale) read is stored so, in 16 bits (8) (lossless: the outputs stay bit for bit)"},
};

static const char *const pipelines[4] = {
  "prune,batch",                 /* -O0 */
  "prune,fold,plan,batch",       /* -O1 */
  "prune,fold,fuse,streams,plan,batch",  /* -O2 */
  "prune,fold,fuse,streams,plan,batch",  /* -O3: fuse applies its -O3 rules */
};

/* with --precision other than fp32: the precision pass after fold, before fuse */
static const char *const prec_pipelines[4] = {
  "prune,precision,storage,batch",
  "prune,fold,precision,storage,plan,batch",
  "prune,fold,precision,fuse,storage,streams,plan,batch",
  "prune,fold,precision,fuse,storage,streams,plan,batch",
};

static const char *const train_pipelines[4] = {
  "autodiff",                /* -O0 */
  "autodiff,plan",           /* -O1 */
  "autodiff,fuse,streams,plan",      /* -O2 */
  "autodiff,fuse,streams,plan",      /* -O3 */
};

/* with --precision tf32, fp16 or bf16: the precision pass after autodiff, so
 * that the gradients' GEMMs are marked too (and, at fp16, the loss scaled) */
static const char *const prec_train_pipelines[4] = {
  "autodiff,precision,storage",
  "autodiff,precision,storage,plan",
  "autodiff,precision,fuse,storage,streams,plan",
  "autodiff,precision,fuse,storage,streams,plan",
};

const Pass *pass_lookup(const char *name) {
  for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++)
    if (strcmp(passes[i].name, name) == 0) return &passes[i];
  return NULL;
}

void passes_usage(FILE *f) {
  fputs("optimisation levels (-O2 is the default):\n", f);
  for (int o = 0; o < 4; o++) {
    static const char *const what[4] = {
      "nothing but the inference graph: one kernel per op, no memory sharing",
      "+ fold (batchnorm into the conv, computed at load time) and memory plan (shared bytes)",
      "+ fusion: epilogues (bias, activation, residual, batchnorm) into their producer's kernel",
      "+ fusion rules that trade work or code for launches (recompute cheap kernels in each reader)"};
    fprintf(f, "  -O%d  %-27s %s\n", o, pipelines[o], what[o]);
  }
  fputs("  with --precision other than fp32, the precision pass runs after fold (before fuse),\n"
        "  and the storage pass after fuse (before plan)\n", f);
  fputs("training (--train, ncc train): autodiff first; prune and fold are inference passes:\n", f);
  for (int o = 0; o < 4; o++) fprintf(f, "  -O%d  %s\n", o, train_pipelines[o]);
  fputs("  with --precision tf32, fp16 or bf16, the precision pass runs after autodiff, and the storage pass\n"
        "  after fuse (the weights' copies made once a step, in 16 bits)\n", f);
  fputs("passes (--passes=LIST, --print-after=NAME|all; -v prints what each did):\n", f);
  for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++)
    fprintf(f, "  %-8s %s\n", passes[i].name, passes[i].brief);
  fputs("fusion rules (fuse; -v names the rule that refused each unfused edge):\n", f);
  for (int i = 0; i < fuse_rule_count(); i++)
    fprintf(f, "  %-18s -O%d  %s\n", fuse_rule_name(i), fuse_rule_level(i), fuse_rule_brief(i));
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int passes_run(Graph *g, PassCtx *c, const char *list) {
  int o = c->opt_level < 0 ? 0 : c->opt_level > 3 ? 3 : c->opt_level, from_level = !list;
  if (!list)
    list = c->train ? (c->precision != PREC_FP32 ? prec_train_pipelines[o] : train_pipelines[o])
                    : c->precision != PREC_FP32 ? prec_pipelines[o] : pipelines[o];
  g->training = c->train;
  /* Check every name first: a typo must not leave a half-run pipeline. */
  char name[64];
  double t0 = now_ms();
  for (int pass = 0; pass < 2; pass++) {
    const char *p = list;
    while (*p) {
      size_t n = strcspn(p, ",");
      if (n == 0 || n >= sizeof name) {
        if (pass == 0 && n) { diag_error((Loc){0}, "--passes: pass name too long"); return -1; }
      } else {
        memcpy(name, p, n);
        name[n] = 0;
        const Pass *ps = pass_lookup(name);
        if (pass == 0 && !ps) {
          char known[256] = "";
          for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", passes[i].name);
          diag_error((Loc){0}, "--passes: unknown pass '%s' (known: %s)", name, known);
          return -1;
        }
        if (pass == 1) {
          if (ps->fn(g, c) != 0) return -1;
          if (c->verify && ir_verify(g) != 0) ncc_die("IR verification failed after pass '%s'", name);
          if (c->print_after && (strcmp(c->print_after, "all") == 0 || strcmp(c->print_after, name) == 0)) {
            fprintf(stderr, "; IR after %s\n", name);
            ir_print(g, stderr);
          }
        }
      }
      p += n;
      if (*p == ',') p++;
    }
  }
  passes_fp32_tiles(g, c);
  if (c->verbose) {
    fprintf(stderr, "passes: %s", *list ? list : "(none)");
    if (from_level) fprintf(stderr, " (-O%d)", o);
    fprintf(stderr, " in %.2f ms\n", now_ms() - t0);
  }
  return 0;
}
