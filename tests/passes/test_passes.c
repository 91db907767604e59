/* test_passes.c — the passes on every example model at every -O level, with
 * the verifier after each pass, and the verifier's checks of the kernel
 * groups and of the memory plan on corrupted annotations.
 *
 *   test_passes EXAMPLES_DIR
 *
 * What must hold on the examples: -O0/-O1 leave one node per kernel and -O2/
 * -O3 group; -O1 and up plan memory; the report's peak_memory is the plan's
 * activation region (the naive one without a plan) and planning shrinks it;
 * ResNet-18 and ResNet-50 at -O3 launch at most half the kernels of -O0.  A
 * load-time node (Node.load_time, set by hand here as the fold pass will) is
 * its own kernel, never fused with per-inference work, and lives in the
 * load-time region. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tests/ir_check.h"


typedef struct Totals { long long params, flops, launches, bytes, peak, naive; } Totals;

static Totals report(Graph *g, char **text) {
  Totals t = {0};
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  report_print(g, f, 0, "sm_90");
  fclose(f);
  const char *tot = strstr(buf, "\ntotal: ");
  CHECK(tot && sscanf(tot + 1, "total: params=%lld flops=%lld launches=%lld bytes=%lld peak_memory=%lld naive_memory=%lld",
                      &t.params, &t.flops, &t.launches, &t.bytes, &t.peak, &t.naive) == 6);
  if (text) *text = buf;
  else free(buf);
  return t;
}

static Graph *load(const char *dir, const char *model, int opt) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.net", dir, model);
  Graph *g = frontend_load(path, NULL, 0);
  CHECK(g != NULL);
  if (!g) return NULL;
  PassCtx pc = {0};
  pc.opt_level = opt;
  pc.verify = 1;   /* a broken annotation dies here, naming the pass */
  CHECK(passes_run(g, &pc, NULL) == 0);
  return g;
}

static void test_examples(const char *dir) {
  static const char *const models[] = {"lenet", "mlp", "vgg11", "vgg16", "vgg19", "resnet18", "resnet50", "mobilenet_v2"};
  for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
    Totals t[4];
    for (int o = 0; o < 4; o++) {
      Graph *g = load(dir, models[m], o);
      if (!g) return;
      CHECK(ir_verify(g) == 0);
      CHECK(o >= 2 ? g->ngroups > 0 : g->ngroups == 0);
      CHECK(o >= 1 ? g->planned : !g->planned);
      t[o] = report(g, NULL);
      CHECK(t[o].peak == (g->planned ? g->act_bytes : t[o].naive));
      if (o >= 1) CHECK(t[o].peak < t[o].naive);
      fprintf(stderr, "%-13s -O%d: launches=%lld peak_memory=%lld naive_memory=%lld\n", models[m], o, t[o].launches,
              t[o].peak, t[o].naive);
      ir_graph_free(g);
    }
    /* the levels never change the parameters; fold (-O1) can only remove
     * per-inference work (a batchnorm's arithmetic moves to load time) and
     * launches, fusion (-O2) removes launches but never work */
    CHECK(t[0].params == t[3].params && t[1].flops <= t[0].flops && t[3].flops == t[1].flops);
    CHECK(t[2].launches < t[1].launches && t[3].launches <= t[2].launches && t[1].launches <= t[0].launches);
    if (!strncmp(models[m], "resnet", 6)) CHECK(2 * t[3].launches <= t[0].launches);
    /* VGG at -O3: one launch per conv2d and linear (pool-prologue takes the
     * maxpools), two for one that splits K (the ranges, then their sum) */
    if (!strncmp(models[m], "vgg", 3)) {
      Graph *g = load(dir, models[m], 3);
      if (!g) return;
      long long gemms = 0;
      for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->op == OP_CONV2D || g->nodes[i]->op == OP_LINEAR) gemms += 1 + (ir_gemm_split_k(g->nodes[i]) > 1);
      CHECK(t[3].launches == gemms);
      ir_graph_free(g);
    }
  }
}

/* Each corruption of a grouped and planned LeNet is caught; restored, the graph verifies. */
static void test_verifier(const char *dir) {
  Graph *g = load(dir, "lenet", 3);
  if (!g) return;
  Node *epi = NULL, *main1 = NULL, *conv1 = NULL, *flat = NULL;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (!epi && n->grole == GROLE_EPILOGUE) epi = n;
    if (n->grole == GROLE_MAIN && n->group == 1) main1 = n;
    if (n->op == OP_CONV2D && !conv1) conv1 = n;
    if (n->op == OP_FLATTEN) flat = n;
  }
  CHECK(epi && main1 && conv1 && flat);
  if (!epi || !main1 || !conv1 || !flat) return;
  fprintf(stderr, "(the verifier messages below are expected)\n");
  CHECK(ir_verify(g) == 0);
  epi->grole = GROLE_NONE;                  /* a computing node in no group */
  CHECK(ir_verify(g) != 0);
  epi->grole = GROLE_EPILOGUE;
  int k = epi->group;
  epi->group = k + 1;                       /* does not take its group's running value */
  CHECK(ir_verify(g) != 0);
  epi->group = k;
  const char *rule = epi->fuse_rule;
  epi->fuse_rule = NULL;                    /* an epilogue without its rule */
  CHECK(ir_verify(g) != 0);
  epi->fuse_rule = rule;
  main1->group = 0;                         /* two mains in group 0, none in group 1 */
  CHECK(ir_verify(g) != 0);
  main1->group = 1;
  epi->load_time = 1;                       /* load-time and per-inference work in one kernel */
  CHECK(ir_verify(g) != 0);
  epi->load_time = 0;
  CHECK(ir_verify(g) == 0);
  Value *x = g->nodes[0]->out, *c = conv1->out;
  Value *stored = c->region == MEM_ACT ? c : NULL;
  for (int i = 0; !stored && i < g->nnodes; i++)
    if (g->nodes[i]->group == conv1->group && g->nodes[i]->out->region == MEM_ACT) stored = g->nodes[i]->out;
  CHECK(stored != NULL && x->region == MEM_ACT);
  if (stored) {
    int64_t off = stored->offset;
    stored->offset = off + 128;             /* unaligned */
    CHECK(ir_verify(g) != 0);
    stored->offset = x->offset;             /* shares bytes with the input, both live */
    CHECK(ir_verify(g) != 0);
    stored->offset = g->act_bytes;          /* outside the region */
    CHECK(ir_verify(g) != 0);
    stored->offset = off;
  }
  int64_t fo = flat->out->offset;
  flat->out->offset = fo + 256;             /* a view apart from what it views */
  CHECK(ir_verify(g) != 0);
  flat->out->offset = fo;
  CHECK(ir_verify(g) == 0);
  /* a pass that removes nodes drops the schedule */
  Node *last = g->nodes[g->nnodes - 1];
  CHECK(ir_verify(g) == 0 && g->ngroups > 0 && g->planned);
  Attrs a;
  ir_attrs_init(&a);
  Value *extra = ir_node(g, OP_SIGMOID, &last->out, 1, &a, "extra", NULL, last->loc);
  CHECK(extra != NULL);
  if (extra) {
    extra->def->dead = 1;
    ir_compact(g);
    CHECK(g->ngroups == 0 && !g->planned && ir_verify(g) == 0);
  }
  ir_graph_free(g);
}

/* The digits network at -O3: both maxpools are prologues (of conv2 and,
 * through the flatten, of fc1); each corruption of that is caught. */
static void test_prologue(const char *dir) {
  Graph *g = load(dir, "digits", 3);
  if (!g) return;
  Node *pro[2] = {NULL, NULL};
  int np = 0;
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->grole == GROLE_PROLOGUE && np < 2) pro[np++] = g->nodes[i];
  CHECK(np == 2 && pro[0]->op == OP_MAXPOOL2D && pro[1]->op == OP_MAXPOOL2D);
  if (np != 2) { ir_graph_free(g); return; }
  CHECK(pro[0]->out->region == MEM_NONE && pro[1]->out->region == MEM_NONE);   /* never stored */
  CHECK(ir_verify(g) == 0);
  fprintf(stderr, "(the verifier messages below are expected)\n");
  pro[0]->group = pro[1]->group;            /* the prologue of fc1's kernel too: two, and conv2 reads an unstored value */
  CHECK(ir_verify(g) != 0);
  int k0 = -1;
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->op == OP_CONV2D && g->nodes[i]->in[0] == pro[0]->out) k0 = g->nodes[i]->group;
  CHECK(k0 >= 0);
  pro[0]->group = k0;
  CHECK(ir_verify(g) == 0);
  pro[0]->grole = GROLE_EPILOGUE;           /* a pooling is no epilogue */
  CHECK(ir_verify(g) != 0);
  pro[0]->grole = GROLE_PROLOGUE;
  const char *rule = pro[0]->fuse_rule;
  pro[0]->fuse_rule = NULL;                 /* a prologue without its rule */
  CHECK(ir_verify(g) != 0);
  pro[0]->fuse_rule = rule;
  CHECK(ir_verify(g) == 0);
  ir_graph_free(g);
}

/* A load-time node (what fold marks) is its own kernel and lives apart. */
static void test_load_time(void) {
  Graph *g = ir_graph_new("lt");
  Loc L = {"test", 1, 1};
  Shape sx = {2, {2, 4}}, sw = {1, {4}};
  Value *x = ir_input(g, "x", DT_F32, &sx, L);
  Value *w = ir_param(g, "w", PK_WEIGHT, &sw, "lt", L);
  Attrs a;
  ir_attrs_init(&a);
  Value *lw = ir_node(g, OP_RELU, &w, 1, &a, "scale", NULL, L);
  lw->def->load_time = 1;
  Value *in2[2] = {x, lw};
  Value *y = ir_node(g, OP_MUL, in2, 2, &a, "mul", NULL, L);
  Value *z = ir_node(g, OP_TANH, &y, 1, &a, "tanh", NULL, L);
  g->outputs = ARENA_NEW(g->arena, NamedValue);
  g->outputs[0] = (NamedValue){"z", z};
  g->noutputs = 1;
  PassCtx pc = {0};
  pc.opt_level = 3;
  pc.verify = 1;
  CHECK(passes_run(g, &pc, "fuse,plan") == 0);
  CHECK(g->ngroups == 2 && lw->def->grole == GROLE_MAIN && y->def->grole == GROLE_MAIN);
  CHECK(z->def->grole == GROLE_EPILOGUE && z->def->group == y->def->group);
  CHECK(lw->region == MEM_LOAD && g->load_bytes == 256 && x->region == MEM_ACT && z->region == MEM_ACT);
  char *text = NULL;
  Totals t = report(g, &text);
  CHECK(t.launches == 1 && text && strstr(text, "# load-time: 1 kernels") != NULL);
  CHECK(t.peak == g->act_bytes && t.peak == 512);   /* x and the stored tanh: 256 each */
  free(text);
  /* codegen gives it a buffer of its own, outside the activation region */
  char *src = NULL, *hdr = NULL;
  size_t ls = 0, lh = 0;
  FILE *fs = open_memstream(&src, &ls), *fh = open_memstream(&hdr, &lh);
  CodegenOpts co = {0};
  CHECK(codegen_emit(g, &co, fs, fh) == 0);
  fclose(fs);
  fclose(fh);
  const char *e = src ? strstr(src, "BUF_scale = ") : NULL;   /* the enum row of its buffer */
  CHECK(e && strstr(e, "/* load-time f32") != NULL && strstr(e, "/* load-time f32") < strchr(e, '\n'));
  free(src);
  free(hdr);
  ir_graph_free(g);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_passes EXAMPLES_DIR\n");
    return 2;
  }
  test_examples(argv[1]);
  test_verifier(argv[1]);
  test_prologue(argv[1]);
  test_load_time();
  fprintf(stderr, "test_passes: %d checks, %d failed\n", checks, fails);
  return fails != 0;
}
