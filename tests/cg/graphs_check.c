/* graphs_check.c — CUDA graphs on the CPU emulation: one generated model
 * (MODEL, MODEL_H given with -D), two instances with the same random
 * weights, one with graphs on (its steps captured once and replayed), one
 * with graphs off (every kernel launched every call).  Under emulation a
 * replay runs the launches the capture recorded with the argument values the
 * capture copied, as a GPU graph would; so any value baked into a capture
 * that should have changed (the batch, the learning rate, dropout's step)
 * shows as a difference here.
 *
 *   inference: a sequence of calls with new random inputs each time and the
 *     batch changing between calls (1..N when the build takes it): outputs
 *     bit-identical, and the graph counters exactly what the design says (a
 *     batch's first call runs directly, its second captures, every call from
 *     the second replays);
 *   training (when the model has a step): K steps on new data each time, at
 *     full and (when the build takes it) partial batches: losses bit-identical
 *     every step, then the checkpoints (parameters, optimizer state) and the
 *     inference after training bit-identical;
 *   switching off (MODEL_set_graphs(m, 0)) frees the graphs and replays none.
 * Exit status 0 when all holds; the first difference is printed.
 *   graphs_check WORKDIR
 *   graphs_check WORKDIR --weights-only   (writes WORKDIR/weights.safetensors, for --freeze) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include MODEL_H

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define F(x) CAT(MODEL, CAT(_, x))

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

static size_t tbytes(const ncc_tensor_info *t) {
  size_t n = t->dtype == NCC_F16 || t->dtype == NCC_BF16 ? 2 : t->dtype == NCC_I8 ? 1 : 4;
  for (int i = 0; i < t->rank; i++) n *= (size_t)t->shape[i];
  return n;
}

/* random data for a tensor: floats in [-1, 1), labels in [0, classes) */
static void fill(const ncc_tensor_info *t, void *p, int classes) {
  size_t n = tbytes(t) / 4;
  for (size_t i = 0; i < n; i++) {
    if (t->dtype == NCC_I32) ((int32_t *)p)[i] = (int32_t)(urand() * classes);
    else ((float *)p)[i] = (float)(2.0 * urand() - 1.0);
  }
}

static int fails;
#define CHECK(c, ...)                                  \
  do {                                                 \
    if (!(c)) {                                        \
      fprintf(stderr, "graphs_check: " __VA_ARGS__);   \
      fputc('\n', stderr);                             \
      fails++;                                         \
      return 1;                                        \
    }                                                  \
  } while (0)
#define OK(m, call) CHECK((call) == 0, "%s: %s", #call, F(error)(m))

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  char *b;
  long sz;
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  b = (char *)malloc((size_t)sz + 1);
  if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) { free(b); b = NULL; }
  fclose(f);
  *n = (size_t)sz;
  return b;
}

static __attribute__((unused)) int same_file(const char *a, const char *b) {
  size_t na = 0, nb = 0;
  char *pa = slurp(a, &na), *pb = slurp(b, &nb);
  int same = pa && pb && na == nb && memcmp(pa, pb, na) == 0;
  free(pa);
  free(pb);
  return same;
}

/* one inference call on both instances; outputs compared bit for bit */
static int infer_both(MODEL *a, MODEL *b, int batch, int call) {
  const ncc_model_info *info = F(info)();
  const void *in[16];
  void *oa[16], *ob[16];
  int ni = info->ninputs, no = info->noutputs;
  CHECK(ni <= 16 && no <= 16, "too many inputs or outputs");
  for (int i = 0; i < ni; i++) {
    void *p = malloc(tbytes(&info->inputs[i]));
    fill(&info->inputs[i], p, 10);
    in[i] = p;
  }
  for (int i = 0; i < no; i++) {
    oa[i] = calloc(1, tbytes(&info->outputs[i]));
    ob[i] = calloc(1, tbytes(&info->outputs[i]));
  }
  OK(a, F(infer_io_batch)(a, batch, in, oa));
  OK(b, F(infer_io_batch)(b, batch, in, ob));
  for (int i = 0; i < no; i++) {
    size_t rows = tbytes(&info->outputs[i]) / (size_t)info->max_batch * (size_t)batch;
    CHECK(memcmp(oa[i], ob[i], rows) == 0, "inference call %d (batch %d): output %s differs with graphs on and off",
          call, batch, info->outputs[i].name);
    free(oa[i]);
    free(ob[i]);
  }
  for (int i = 0; i < ni; i++) free((void *)in[i]);
  return 0;
}

int main(int argc, char **argv) {
  const ncc_model_info *info = F(info)();
  MODEL *a = NULL, *b = NULL;
  char wpath[1024], pa[1024], pb[1024];
  ncc_graph_stats st;
  int N = info->max_batch;
  if (argc != 2 && !(argc == 3 && !strcmp(argv[2], "--weights-only"))) {
    fprintf(stderr, "usage: graphs_check WORKDIR [--weights-only]\n");
    return 2;
  }
  snprintf(wpath, sizeof wpath, "%s/weights.safetensors", argv[1]);
  snprintf(pa, sizeof pa, "%s/a.safetensors", argv[1]);
  snprintf(pb, sizeof pb, "%s/b.safetensors", argv[1]);
  if (F(create_on)(&a, NCC_DEV_EMU) || F(create_on)(&b, NCC_DEV_EMU)) {
    fprintf(stderr, "graphs_check: create: %s %s\n", F(error)(a), F(error)(b));
    return 1;
  }
  OK(a, F(set_graphs)(a, 1));
  OK(b, F(set_graphs)(b, 0));

  /* the same random weights in both (small, so that nothing overflows) */
  {
    void **h = (void **)calloc((size_t)info->nparams + 1, sizeof *h);
    char err[512];
    for (int i = 0; i < info->nparams; i++) {
      size_t n = tbytes(&info->params[i]) / 4;
      h[i] = malloc(n * 4 + 4);
      for (size_t j = 0; j < n; j++) ((float *)h[i])[j] = (float)(0.2 * urand() - 0.1);
      /* batchnorm's running variance: positive */
      if (strstr(info->params[i].name, "running_var"))
        for (size_t j = 0; j < n; j++) ((float *)h[i])[j] = (float)(0.5 + urand());
    }
    CHECK(ncc_save_safetensors(wpath, info->params, info->nparams, (const void *const *)h, err, sizeof err) == 0,
          "writing weights: %s", err);
    for (int i = 0; i < info->nparams; i++) free(h[i]);
    free(h);
  }
  if (argc == 3) return 0;
  OK(a, F(load)(a, wpath));
  OK(b, F(load)(b, wpath));

  /* inference: batches change between calls; every batch seen twice or more */
  {
    int seq[12], n = 0, distinct = 0, seen[4096] = {0};
    /* small first: a graph of batch 1 replayed for N would leave rows out */
    int one = N > 1 ? 1 : N, three = N > 3 ? 3 : N;
    int vals[] = {one, one, N, N, three, one, N, three, one};
    if (!info->batch_variable)
      for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) vals[i] = N;
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) seq[n++] = vals[i];
    for (int i = 0; i < n; i++) {
      if (infer_both(a, b, seq[i], i)) return 1;
      if (!seen[seq[i]]++) distinct++;
    }
    OK(a, F(graph_stats)(a, &st));
    CHECK(st.enabled == 1 && st.native == 0, "graphs on: enabled %d native %d", st.enabled, st.native);
#ifndef GRAPHS_SLICED
    CHECK(st.captures == distinct && st.replays == n - distinct,
          "inference: %lld captures and %lld replays, expected %d and %d", st.captures, st.replays, distinct,
          n - distinct);
#else   /* --max-memory: a graph per slice size, a replay per slice */
    CHECK(st.captures >= 1 && st.replays >= n - distinct, "inference in slices: %lld captures, %lld replays",
          st.captures, st.replays);
#endif
    CHECK(st.nodes > 0, "inference: nothing captured");
    printf("inference: %d calls, batches", n);
    for (int i = 0; i < n; i++) printf(" %d", seq[i]);
    printf(": bit-identical; %lld captured, %lld replayed\n", st.captures, st.replays);
    OK(b, F(graph_stats)(b, &st));
    CHECK(st.enabled == 0 && st.captures == 0 && st.replays == 0, "graphs off: %lld captures, %lld replays",
          st.captures, st.replays);
  }

#ifdef NCC_HAVE_TRAIN
  {
    const int K = 6;
    int tn = (int)info->train_inputs[0].shape[0];
    long long before;
    const void *in[16];
    OK(a, F(graph_stats)(a, &st));
    before = st.replays;
    CHECK(info->ntrain_inputs <= 16, "too many training inputs");
    for (int k = 0; k < K; k++) {
      int batch = info->train_batch_variable && (k == 3 || k == 4) ? (tn > 2 ? tn - 2 : tn) : tn;
      float la = -1.0f, lb = -2.0f;
      for (int i = 0; i < info->ntrain_inputs; i++) {
        void *p = malloc(tbytes(&info->train_inputs[i]));
        fill(&info->train_inputs[i], p, 10);
        in[i] = p;
      }
      if (k == 2) {   /* the schedule moves: the learning rate is a live argument */
        OK(a, F(set_lr)(a, F(lr)(a) * 0.5));
        OK(b, F(set_lr)(b, F(lr)(b) * 0.5));
      }
      OK(a, F(train_step_io_batch)(a, batch, in, &la));
      OK(b, F(train_step_io_batch)(b, batch, in, &lb));
      CHECK(memcmp(&la, &lb, sizeof la) == 0, "training step %d (batch %d): loss %.9g with graphs, %.9g without", k,
            batch, la, lb);
      for (int i = 0; i < info->ntrain_inputs; i++) free((void *)in[i]);
    }
    OK(a, F(save)(a, pa));
    OK(b, F(save)(b, pb));
    CHECK(same_file(pa, pb), "after %d training steps the checkpoints differ (%s, %s)", K, pa, pb);
    OK(a, F(graph_stats)(a, &st));
    /* the first step runs directly, the second captures, every later one replays */
    CHECK(st.replays - before == K - 1, "training: %lld replays of %d steps, expected %d", st.replays - before, K,
          K - 1);
    CHECK(st.live_updates > 0, "training: no live argument refreshed");
    printf("training: %d steps%s: losses and checkpoints bit-identical; %lld replays\n", K,
           info->train_batch_variable ? " (two of them partial batches)" : "", st.replays - before);
    /* inference after training (load-time values recomputed outside the graph) */
    if (infer_both(a, b, N, 100)) return 1;
  }
#endif

  /* off: graphs freed, nothing replayed any more */
  OK(a, F(graph_stats)(a, &st));
  {
    long long r = st.replays;
    OK(a, F(set_graphs)(a, 0));
    if (infer_both(a, b, N, 200) || infer_both(a, b, N, 201)) return 1;
    OK(a, F(graph_stats)(a, &st));
    CHECK(st.enabled == 0 && st.replays == r, "after set_graphs(0): %lld replays more", st.replays - r);
  }
  F(destroy)(a);
  F(destroy)(b);
  remove(wpath);
  remove(pa);
  remove(pb);
  printf("graphs_check %s: ok\n", info->model);
  return fails != 0;
}
