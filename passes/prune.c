/* prune.c — removes what an inference graph does not compute.
 *
 * \brief At inference, dropout/dropout2d are identities (OPF_TRAIN_ONLY): their
 * uses are rewired to their input and the nodes dropped.  Then every node that
 * no output needs (losses included, at inference) is marked dead; in training
 * the losses and the minimised value are roots too.  Graph inputs are kept
 * even when unused, so the generated API keeps the signature the user wrote. */
#include "passes.h"

static void replace_uses(Graph *g, Value *old, Value *new_) {
  for (int i = 0; i < g->nnodes; i++)
    for (int j = 0; j < g->nodes[i]->nin; j++)
      if (g->nodes[i]->in[j] == old) g->nodes[i]->in[j] = new_;
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i].v == old) g->outputs[i].v = new_;
  for (int i = 0; i < g->nlosses; i++)
    if (g->losses[i].v == old) g->losses[i].v = new_;
  if (g->train.minimize == old) g->train.minimize = new_;
}

int pass_prune(Graph *g, PassCtx *c) {
  if (!c->train) {
    for (int i = 0; i < g->nnodes; i++) {
      Node *n = g->nodes[i];
      if (ncc_ops[n->op].flags & OPF_TRAIN_ONLY) {
        replace_uses(g, n->out, n->in[0]);
        n->dead = 1;
      }
    }
  }
  /* Mark live from the roots backwards; nodes are in topological order. */
  char *live = arena_alloc(g->arena, (size_t)g->nnodes + 1);
  for (int i = 0; i < g->noutputs; i++) live[g->outputs[i].v->def->id] = 1;
  if (c->train) {
    for (int i = 0; i < g->nlosses; i++) live[g->losses[i].v->def->id] = 1;
    if (g->train.minimize) live[g->train.minimize->def->id] = 1;
  }
  for (int i = g->nnodes - 1; i >= 0; i--) {
    Node *n = g->nodes[i];
    if (n->op == OP_INPUT) live[i] = 1;
    if (!live[i] || n->dead) continue;
    for (int j = 0; j < n->nin; j++) live[n->in[j]->def->id] = 1;
  }
  for (int i = 0; i < g->nnodes; i++)
    if (!live[i]) g->nodes[i]->dead = 1;
  ir_compact(g);
  return 0;
}
