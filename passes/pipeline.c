/* pipeline.c — the pass registry and the -O pipelines, as plain lists.
 *
 * Every pass has one signature (passes.h).  The pipelines are strings so that
 * `--passes=` and `-O` go through the same code, and `--print-after=NAME`
 * prints the IR after the named pass (or after every pass with "all").  With
 * c->verify the verifier re-checks the graph after each pass (on in debug
 * builds and in the tests). */
#include "passes.h"

#include <stdio.h>
#include <string.h>

static const Pass passes[] = {
  {"prune", pass_prune, "inference: drop train-only identities (dropout) and nodes no output needs"},
  {"fold", pass_fold, "constant folding; inference batchnorm folded into the conv before it (or into scale/shift), "
                      "its parameter-only arithmetic marked load-time"},
  {"fuse", pass_fuse, "merge single-use elementwise nodes and inference batchnorm into their producer's kernel"},
};

static const char *const pipelines[4] = {
  "prune",        /* -O0: one kernel per op */
  "prune,fold,fuse",   /* -O1 */
  "prune,fold,fuse",   /* -O2 */
  "prune,fold,fuse",   /* -O3 */
};

const Pass *pass_lookup(const char *name) {
  for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++)
    if (strcmp(passes[i].name, name) == 0) return &passes[i];
  return NULL;
}

int passes_run(Graph *g, PassCtx *c, const char *list) {
  if (!list) {
    int o = c->opt_level < 0 ? 0 : c->opt_level > 3 ? 3 : c->opt_level;
    list = pipelines[o];
  }
  /* Check every name first: a typo must not leave a half-run pipeline. */
  char name[64];
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
          diag_error((Loc){0}, "--passes: unknown pass '%s' (known: prune, fold, fuse)", name);
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
  return 0;
}
