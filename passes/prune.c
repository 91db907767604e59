/* prune.c — removes what an inference graph does not compute.
 *
 * \brief At inference, dropout/dropout2d are identities (OPF_TRAIN_ONLY): their
 * uses are rewired to their input and the nodes dropped.  Then every node that
 * no root needs (ir_needed: the outputs; in training also the losses and the
 * minimised value) is removed.  Graph inputs are kept even when unused, so the
 * generated API keeps the signature the user wrote.  The losses of an
 * inference graph stay in g->losses for the record: the IR listing says they
 * are absent at inference.
 *
 * In training (PassCtx.train, or a graph autodiff has differentiated)
 * dropout stays: it is dropout_apply there, or becomes it.  Only what no root
 * needs goes (the updates are roots then: ir_needed). */
#include "passes.h"

int pass_prune(Graph *g, PassCtx *c) {
  int before = g->nnodes, identities = 0;
  int train = c->train || g->training;
  for (int i = 0; i < g->nnodes && !train; i++)
    train = (ncc_ops[g->nodes[i]->op].flags & (OPF_INTERNAL | OPF_UPDATE)) != 0;
  if (!train) {
    for (int i = 0; i < g->nnodes; i++) {
      Node *n = g->nodes[i];
      if (ncc_ops[n->op].flags & OPF_TRAIN_ONLY) {
        passes_replace_uses(g, n->out, n->in[0]);
        n->dead = 1;
        identities++;
      }
    }
  }
  unsigned char *need = arena_alloc(g->arena, (size_t)g->nnodes + 1);
  ir_needed(g, train, need);
  for (int i = 0; i < g->nnodes; i++)
    if (!need[i] && g->nodes[i]->op != OP_INPUT) g->nodes[i]->dead = 1;
  ir_compact(g);
  if (c->verbose)
    fprintf(stderr, "pass prune: %d nodes removed (%d train-only %s, %d that no %s needs); %d left\n",
            before - g->nnodes, identities, identities == 1 ? "identity" : "identities", before - g->nnodes - identities,
            train ? "root" : "output", g->nnodes);
  return 0;
}
