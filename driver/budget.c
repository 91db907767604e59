/* budget.c — --max-memory: fit the generated object into a byte budget.
 *
 * The budget covers everything the object allocates on its device, the
 * figure M_info()->arena_bytes reports: the weights (parameters, constants,
 * load-time values, and a training step's gradients and optimizer state),
 * the activation region the plan sized, and the cuBLAS path's im2col
 * workspace.  ncc measures the layout codegen would emit (codegen_memory)
 * and tries, in this order, until it fits:
 *   1. the model as compiled;
 *   2. on the cuBLAS path, smaller im2col workspaces: chunks of fewer images,
 *      down to one image per GEMM (slower, never wrong);
 *   3. the batch in slices: the inference graph compiled for S < N rows by
 *      setting the const that every input's first dimension names (`const N`)
 *      to S, the API still taking up to N rows and running them S at a time
 *      through the same buffers (CodegenOpts.api_batch).  This needs a model
 *      whose outputs keep the batch in their rows (the batch pass); the
 *      largest S that fits wins, with the workspace of step 2 where needed.
 * None of the fusion rules costs memory (an epilogue or prologue removes a
 * stored value, recompute stores nothing), so fusion is never traded.  When
 * even one row at a time does not fit, the error names the smallest arena
 * ncc reached and what it is made of.  A training step keeps its batch: its
 * memory counts, but it is not sliced. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../codegen/codegen.h"
#include "../frontend/frontend.h"
#include "../passes/passes.h"
#include "driver.h"

static const char *mib(char *b, size_t n, size_t bytes) {
  if (bytes >= ((size_t)1 << 30)) snprintf(b, n, "%.2f GiB", (double)bytes / (double)((size_t)1 << 30));
  else if (bytes >= ((size_t)1 << 20)) snprintf(b, n, "%.2f MiB", (double)bytes / (double)((size_t)1 << 20));
  else snprintf(b, n, "%.1f KiB", (double)bytes / 1024.0);
  return b;
}

/* The inference graph with the batch const set to `rows`, through the passes. */
static Graph *graph_rows(const Options *o, const char *bconst, int64_t rows) {
  SetOpt sets[MAX_SETS + 1];
  int n = 0;
  for (int i = 0; i < o->nsets; i++)
    if (strcmp(o->sets[i].name, bconst)) sets[n++] = o->sets[i];
  char val[32];
  snprintf(val, sizeof val, "%lld", (long long)rows);
  sets[n].name = bconst;
  sets[n++].value = val;
  Graph *g = frontend_load(o->model, sets, n);
  if (!g || diag_errors()) { ir_graph_free(g); return NULL; }
  PassCtx pc = drv_pass_ctx(o, 0, 1);
  pc.print_after = NULL, pc.verbose = 0;   /* one of several trial graphs: quietly */
  if (passes_run(g, &pc, o->passes) != 0 || diag_errors()) { ir_graph_free(g); return NULL; }
  return g;
}

/* The smallest workspace limit that still lets every chunk hold one image. */
#define WS_ONE_IMAGE 1

/* Measures g with co's options; on the cuBLAS path tries smaller workspaces
 * until it fits (co->ws_limit is left at the first that does, or at one
 * image per chunk). *m gets that layout.  Returns 1 when it fits. */
static int measure(Graph *g, CodegenOpts *co, int64_t budget, CodegenMemory *m) {
  co->ws_limit = 0;
  if (codegen_memory(g, co, m) != 0) return -1;
  if ((int64_t)m->arena <= budget || !m->workspace) return (int64_t)m->arena <= budget;
  for (size_t lim = m->workspace / 2; lim >= 1; lim /= 2) {
    co->ws_limit = lim;
    if (codegen_memory(g, co, m) != 0) return -1;
    if ((int64_t)m->arena <= budget) return 1;
    if (lim == 1) break;
  }
  co->ws_limit = WS_ONE_IMAGE;
  return 0;
}

int budget_fit(const Options *o, Graph *g, CodegenOpts *co, Graph **sliced, char *note, size_t noten) {
  *sliced = NULL;
  note[0] = 0;
  if (o->max_memory <= 0) return 0;
  char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
  CodegenMemory m, m0;
  int fit = measure(g, co, o->max_memory, &m);
  if (fit < 0) return 1;
  m0 = m;
  if (fit) {
    snprintf(note, noten, "memory budget %s (--max-memory): arena %s = weights %s + activations %s + workspace %s%s",
             mib(b1, sizeof b1, (size_t)o->max_memory), mib(b2, sizeof b2, m.arena), mib(b3, sizeof b3, m.weights),
             mib(b4, sizeof b4, m.activations), mib(b5, sizeof b5, m.workspace),
             co->ws_limit ? " (smaller im2col chunks)" : "");
    drv_log(o, "%s", note);
    return 0;
  }
  /* the batch in slices */
  int64_t N = g->max_batch;
  const char *why = NULL;
  if (N <= 0) why = g->batch_fixed ? g->batch_fixed : "the batch pass did not run";
  else if (!g->batch_const) why = "the inputs' first dimension is not one `const` (as in `input x: f32[N, ...]`)";
  else if (N == 1) why = "the batch is already 1";
  int64_t best = 0;
  CodegenMemory mb = m;
  size_t ws_best = 0;
  Graph *gbest = NULL;
  if (!why) {
    int64_t lo = 1, hi = N - 1;
    while (lo <= hi) {
      int64_t s = lo + (hi - lo) / 2;
      Graph *gs = graph_rows(o, g->batch_const, s);
      if (!gs) return 1;
      if (gs->max_batch != s) {   /* a model whose shapes follow the const differently */
        ir_graph_free(gs);
        why = "setting the batch const changes more than the inputs' first dimension";
        break;
      }
      CodegenMemory ms;
      int f = measure(gs, co, o->max_memory, &ms);
      if (f < 0) { ir_graph_free(gs); ir_graph_free(gbest); return 1; }
      if (f) {
        ir_graph_free(gbest);
        gbest = gs, best = s, mb = ms, ws_best = co->ws_limit;
        lo = s + 1;
      } else {
        if (s == 1 || ms.arena < m.arena) m = ms;   /* the smallest seen, for the message */
        ir_graph_free(gs);
        hi = s - 1;
      }
    }
  }
  if (!best) {
    ir_graph_free(gbest);
    if (m.arena > m0.arena) m = m0;
    if (why)
      return drv_error("--max-memory=%lld: the model needs %s (weights %s, activations %s, workspace %s), and the batch "
                       "cannot be processed in slices: %s", (long long)o->max_memory, mib(b1, sizeof b1, m.arena),
                       mib(b2, sizeof b2, m.weights), mib(b3, sizeof b3, m.activations), mib(b4, sizeof b4, m.workspace),
                       why);
    return drv_error("--max-memory=%lld: nothing ncc can do fits: the smallest arena it reaches is %s (%lld bytes: "
                     "weights %s, activations %s for one row at a time, workspace %s)%s",
                     (long long)o->max_memory, mib(b1, sizeof b1, m.arena), (long long)m.arena,
                     mib(b2, sizeof b2, m.weights), mib(b3, sizeof b3, m.activations), mib(b4, sizeof b4, m.workspace),
                     co->train ? "; the training step in the same object keeps its batch and its state "
                                 "(--freeze leaves it out)" : "");
  }
  co->ws_limit = ws_best;
  co->api_batch = N;
  *sliced = gbest;
  snprintf(note, noten, "memory budget %s (--max-memory): the batch of %lld runs in slices of %lld rows%s; arena %s "
           "= weights %s + activations %s + workspace %s (the whole batch at once: %s)",
           mib(b1, sizeof b1, (size_t)o->max_memory), (long long)N, (long long)best,
           ws_best ? ", smaller im2col chunks" : "", mib(b2, sizeof b2, mb.arena), mib(b3, sizeof b3, mb.weights),
           mib(b4, sizeof b4, mb.activations), mib(b5, sizeof b5, mb.workspace), mib(b6, sizeof b6, m0.arena));
  drv_log(o, "%s", note);
  return 0;
}
