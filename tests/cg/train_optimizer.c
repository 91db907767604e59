/* train_optimizer.c — the optimizer update's kernel (codegen/backward.c,
 * emit_optimizer) for each configuration of Graph.train, rendered through a
 * hand-made emitter context (four flat float ranges as Cg.opt_buf) and
 * written as a standalone C program for the CPU emulation.  The program runs
 * three steps on fixed data and prints the initial parameters, then per step
 * the gradient, the parameters and both states after it (one number a line);
 * check_train_optimizer.py runs torch.optim on the same data in float32.
 *
 *   train_optimizer OUTDIR     writes OUTDIR/CFG.c for every configuration
 *   train_optimizer --list     prints the configurations: name and TrainCfg */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg.h"
#include "ir/ir.h"

typedef struct OptCase {
  const char *name;
  OptKind opt;
  double lr, momentum, wd, b1, b2, eps;
  int nesterov;
} OptCase;
static const OptCase cases[] = {
  {"sgd", OPT_SGD, 0.1, 0, 0, 0, 0, 0, 0},
  {"sgd_mom", OPT_SGD, 0.05, 0.9, 0, 0, 0, 0, 0},
  {"sgd_nesterov_wd", OPT_SGD, 0.05, 0.8, 0.01, 0, 0, 0, 1},
  {"sgd_wd", OPT_SGD, 0.1, 0, 0.001, 0, 0, 0, 0},
  {"adam", OPT_ADAM, 0.01, 0, 0, 0.9, 0.999, 1e-8, 0},
  {"adam_wd", OPT_ADAM, 0.003, 0, 0.1, 0.8, 0.99, 1e-6, 0},
  {"adamw", OPT_ADAMW, 0.01, 0, 0.05, 0.9, 0.999, 1e-8, 0},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))
#define COUNT 1000   /* floats per range: four blocks, the last one partial */

static int emit(const OptCase *oc, const char *dir) {
  static Loc L = {"train_optimizer.c", 1, 1};
  Graph *g = ir_graph_new("opt");
  g->train.present = 1;
  g->train.opt = oc->opt;
  g->train.lr = oc->lr, g->train.momentum = oc->momentum, g->train.weight_decay = oc->wd;
  g->train.beta1 = oc->b1, g->train.beta2 = oc->b2, g->train.eps = oc->eps, g->train.nesterov = oc->nesterov;
  Shape s = {1, {COUNT}};
  static const char *const nm[4] = {"params", "grads", "state1", "state2"};
  Value *v[4];
  for (int i = 0; i < 4; i++) v[i] = ir_input(g, nm[i], DT_F32, &s, L);
  Value *opt = ir_node(g, OP_OPTIMIZER, &v[1], 1, NULL, NULL, NULL, L);
  if (!opt) return 1;
  Cg c;
  memset(&c, 0, sizeof c);
  c.g = g;
  c.model = "opt";
  c.work = -1;
  c.train = 1;
  c.opt_count = COUNT;
  c.nbufs = 4;
  c.bufs = calloc(4, sizeof(CgBuf));
  for (int i = 0; i < 4; i++) c.bufs[i].v = v[i], c.opt_buf[i] = i;
  c.scale_buf = c.found_buf = -1;   /* no loss scaling */
  KGroup gr = {0};
  gr.main = opt->def;
  if (emit_optimizer(&c, &gr) || c.nk != 1) return 1;
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.c", dir, oc->name);
  FILE *f = fopen(path, "w");
  if (!f) return 1;
  fprintf(f, "#include \"ncc_kernel.h\"\n#include <stdio.h>\n#include <math.h>\n");
  /* float lr, bc1, bc2 stand for the model's host variables m->lr, ... */
  fprintf(f, "static struct { float lr, bc1, bc2; } m_, *m = &m_;\n");
  for (const char *t = c.k[0].text; *t; t++) {
    if (!strncmp(t, "@K@", 3)) fputs("opt_kernel", f), t += 2;
    else fputc(*t, f);
  }
  /* the launch: every thread of every block, with the host expressions as arguments */
  fprintf(f, "static float buf_[4][%d];\nstatic void launch(void) {\n", COUNT);
  fprintf(f, "  for (unsigned b = 0; b < %du; b++)\n    for (unsigned t = 0; t < 256u; t++) {\n", (COUNT + 255) / 256);
  fprintf(f, "      blockIdx.x = b, threadIdx.x = t;\n      opt_kernel(");
  KParams p = {0};
  (void)p;
  /* the host argument of each parameter: "&m->bufs[BUF_x]" -> buf_[i]; "&m->lr" -> m->lr */
  Buf run = c.run;
  const char *a = strstr(run.s, "void *a_[] = {");
  NCC_ASSERT(a);
  a += strlen("void *a_[] = {");
  int first = 1;
  while (*a && *a != '}') {
    while (*a == ' ' || *a == '\n' || *a == ',') a++;
    if (*a == '}') break;
    size_t l = strcspn(a, ",}");
    char arg[256];
    snprintf(arg, sizeof arg, "%.*s", (int)l, a);
    char *sp = strchr(arg, ' ');
    if (sp) *sp = 0;
    int bi = -1;
    for (int i = 0; i < 4; i++)
      if (strstr(arg, cg_buf_name(&c, i)) && arg[strlen("&m->bufs[") + strlen(cg_buf_name(&c, i))] == ']') bi = i;
    if (bi >= 0) fprintf(f, "%sbuf_[%d]", first ? "" : ", ", bi);
    else fprintf(f, "%s%s", first ? "" : ", ", arg + 1);   /* "&m->lr" -> "m->lr" */
    first = 0;
    a += l;
    /* skip the comment after the argument */
    const char *cm = strstr(a, "*/");
    if (cm && (!strchr(a, '}') || cm < strchr(a, '}'))) a = cm + 2;
  }
  fprintf(f, ");\n    }\n}\n");
  fprintf(f, "int main(void) {\n  for (int i = 0; i < %d; i++) {\n", COUNT);
  fprintf(f, "    buf_[0][i] = sinf(0.37f * (float)i);\n    buf_[2][i] = 0.0f;\n    buf_[3][i] = 0.0f;\n  }\n");
  fprintf(f, "  for (int i = 0; i < %d; i++) printf(\"%%.9g\\n\", (double)buf_[0][i]);\n", COUNT);
  fprintf(f, "  for (int step = 1; step <= 3; step++) {\n");
  fprintf(f, "    for (int i = 0; i < %d; i++) buf_[1][i] = cosf(0.11f * (float)(i * step)) * (float)(i %% 7) * 0.3f;\n", COUNT);
  fprintf(f, "    m->lr = %.9gf;\n", oc->lr);
  fprintf(f, "    m->bc1 = (float)(1.0 - pow(%.17g, step));\n    m->bc2 = (float)(1.0 - pow(%.17g, step));\n", oc->b1, oc->b2);
  fprintf(f, "    launch();\n    for (int r = 0; r < 4; r++)\n      for (int i = 0; i < %d; i++) printf(\"%%.9g\\n\", (double)buf_[r][i]);\n  }\n  return 0;\n}\n", COUNT);
  fclose(f);
  free(c.bufs);
  ir_graph_free(g);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--list")) {
    for (int i = 0; i < NCASES; i++) {
      const OptCase *o = &cases[i];
      printf("%s %s %.17g %.17g %.17g %.17g %.17g %.17g %d\n", o->name,
             o->opt == OPT_SGD ? "sgd" : o->opt == OPT_ADAM ? "adam" : "adamw", o->lr, o->momentum, o->wd, o->b1, o->b2,
             o->eps, o->nesterov);
    }
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: train_optimizer OUTDIR | --list\n");
    return 2;
  }
  for (int i = 0; i < NCASES; i++)
    if (emit(&cases[i], argv[1])) {
      fprintf(stderr, "train_optimizer: %s failed\n", cases[i].name);
      return 1;
    }
  return 0;
}
