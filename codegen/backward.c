/* backward.c — emitters of the training ops autodiff writes (ops.def, the
 * "training" rows): batchnorm with batch statistics and its running-statistics
 * update, dropout masks, the gradient kernels and the optimizer update. */
#include <stdio.h>
#include <string.h>

#include "cg.h"

int emit_bn_stats(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_bn_train(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_bn_running(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_dropout(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_conv2d_bwd_data(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_conv2d_bwd_weight(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_linear_bwd_weight(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_sum_to(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_maxpool2d_bwd(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_avgpool2d_bwd(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_gavgpool2d_bwd(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_softmax_bwd(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_loss_bwd(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_layernorm_bwd(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_bn_bwd(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_slice(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

int emit_optimizer(Cg *c, const KGroup *gr) {
  (void)c;
  ncc_die("codegen: %s is not emitted yet", ncc_ops[gr->main->op].name);
}

