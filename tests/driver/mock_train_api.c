/* mock_train_api.c — a hand-written stand-in for the generated code of the
 * model `lr` of test_train.py's train_loop_mock (softmax regression on
 * f32[32, 1, 8, 8], 10 classes; SGD with momentum 0.9, lr 0.1 halved every
 * 3 epochs), with the generated API's names and meanings (docs/generated-code.md):
 * it lets the tests drive `ncc train`'s loop, resume, log, checkpoints and
 * NaN handling whatever the state of the training codegen.  Everything runs
 * on the host; checkpoints go through libnccrt like the generated ones.
 * MOCK_NAN_AT=K in the environment makes step K's loss NaN. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ncc_rt.h"
#ifndef NCC_HAVE_TRAIN_INPUTS
#define UNUSED_TIN __attribute__((unused))
#else
#define UNUSED_TIN
#endif
#define N 32
#define D 64
#define C 10
static const ncc_tensor_info in_[] = {{"x", NCC_F32, 4, {N, 1, 8, 8}}};
static const ncc_tensor_info out_[] = {{"logits", NCC_F32, 2, {N, C}}};
static const ncc_tensor_info par_[] = {{"fc.weight", NCC_F32, 2, {C, D}}, {"fc.bias", NCC_F32, 1, {C}}};
static const ncc_tensor_info tin_[] UNUSED_TIN = {{"x", NCC_F32, 4, {N, 1, 8, 8}}, {"y", NCC_I32, 1, {N}}};
static const ncc_model_info info_ = {
    .model = "lr", .ninputs = 1, .inputs = in_, .noutputs = 1, .outputs = out_, .nparams = 2, .params = par_,
#ifdef NCC_HAVE_TRAIN_INPUTS
    .ntrain_inputs = 2, .train_inputs = tin_,
#endif
};
typedef struct M { float w[C * D], b[C], mw[C * D], mb[C], gw[C * D], gb[C]; int64_t step, epoch; double lr; char err[4096]; } M;
const ncc_model_info *lr_info(void) { return &info_; }
int lr_create_on(void **m, int kind) { (void)kind; M *x = calloc(1, sizeof *x); x->lr = 0.1; *m = x; return 0; }
const char *lr_error(const void *m) { return ((const M *)m)->err; }
void lr_destroy(void *m) { free(m); }
static void fwd(const M *m, const float *x, float *lg) {
  for (int i = 0; i < N; i++) for (int c = 0; c < C; c++) { double s = m->b[c]; for (int k = 0; k < D; k++) s += m->w[c * D + k] * x[i * D + k]; lg[i * C + c] = (float)s; }
}
int lr_infer_io(void *m, const void *const *in, void *const *out) { fwd(m, in[0], out[0]); return 0; }
int lr_load(void *mm, const char *path) {
  M *m = mm;
  ncc_st_want w[7] = {
    {{"fc.weight", NCC_F32, 2, {C, D}}, m->w, NCC_ST_HOST, 0}, {{"fc.bias", NCC_F32, 1, {C}}, m->b, NCC_ST_HOST, 0},
    {{"fc.weight.momentum_buffer", NCC_F32, 2, {C, D}}, m->mw, NCC_ST_HOST | NCC_ST_OPTIONAL, 0},
    {{"fc.bias.momentum_buffer", NCC_F32, 1, {C}}, m->mb, NCC_ST_HOST | NCC_ST_OPTIONAL, 0},
    {{"__step__", NCC_I64, 0, {0}}, &m->step, NCC_ST_HOST | NCC_ST_OPTIONAL, 0},
    {{"__epoch__", NCC_I64, 0, {0}}, &m->epoch, NCC_ST_HOST | NCC_ST_OPTIONAL, 0},
    {{"__lr__", NCC_F64, 0, {0}}, &m->lr, NCC_ST_HOST | NCC_ST_OPTIONAL, 0}};
  return ncc_load_safetensors_opt(NULL, path, w, 7, 0, m->err, sizeof m->err);
}
int lr_train_step_io(void *mm, const void *const *in, float *loss) {
  M *m = mm; const float *x = in[0]; const int32_t *y = in[1]; float lg[N * C]; double L = 0;
  fwd(m, x, lg); memset(m->gw, 0, sizeof m->gw); memset(m->gb, 0, sizeof m->gb);
  for (int i = 0; i < N; i++) {
    double mx = lg[i * C], s = 0; for (int c = 1; c < C; c++) if (lg[i * C + c] > mx) mx = lg[i * C + c];
    for (int c = 0; c < C; c++) s += exp(lg[i * C + c] - mx);
    L += mx + log(s) - lg[i * C + y[i]];
    for (int c = 0; c < C; c++) { double g = (exp(lg[i * C + c] - mx) / s - (c == y[i])) / N; m->gb[c] += g; for (int k = 0; k < D; k++) m->gw[c * D + k] += g * x[i * D + k]; }
  }
  for (int k = 0; k < C * D; k++) { m->mw[k] = 0.9f * m->mw[k] + m->gw[k]; m->w[k] -= (float)m->lr * m->mw[k]; }
  for (int k = 0; k < C; k++) { m->mb[k] = 0.9f * m->mb[k] + m->gb[k]; m->b[k] -= (float)m->lr * m->mb[k]; }
  m->step++; *loss = getenv("MOCK_NAN_AT") && m->step == atoi(getenv("MOCK_NAN_AT")) ? NAN : (float)(L / N); return 0;
}
int lr_schedule_step(void *mm) { M *m = mm; m->epoch++; m->lr = 0.1 * pow(0.5, m->epoch / 3); return 0; }
double lr_lr(const void *m) { return ((const M *)m)->lr; }
int lr_set_lr(void *m, double lr) { ((M *)m)->lr = lr; return 0; }
int64_t lr_step(const void *m) { return ((const M *)m)->step; }
void lr_set_seed(void *m, uint64_t s) { (void)m; (void)s; }
int lr_save(void *mm, const char *path) {
  M *m = mm;
  ncc_tensor_info t[7] = {par_[0], par_[1], {"fc.weight.momentum_buffer", NCC_F32, 2, {C, D}}, {"fc.bias.momentum_buffer", NCC_F32, 1, {C}},
    {"__step__", NCC_I64, 0, {0}}, {"__epoch__", NCC_I64, 0, {0}}, {"__lr__", NCC_F64, 0, {0}}};
  const void *p[7] = {m->w, m->b, m->mw, m->mb, &m->step, &m->epoch, &m->lr};
  return ncc_save_safetensors(path, t, 7, p, m->err, sizeof m->err);
}
int lr_save_grads(void *mm, const char *path) { M *m = mm; const void *p[2] = {m->gw, m->gb}; return ncc_save_safetensors(path, par_, 2, p, m->err, sizeof m->err); }
