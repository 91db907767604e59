/* group.c — kernel groups: the unit codegen emits one kernel (or one GEMM call
 * sequence) for.
 *
 * The groups are decided by the fuse pass (passes/fuse.c) and written on the
 * IR: Node.grole says whether a node is its group's main node or part of the
 * epilogue chain, Node.group which group, numbered in launch order.  This
 * file only reads them, through ir_schedule(), which also gives the
 * schedule of a graph the fuse pass did not run on (-O0, --passes without
 * fuse, graphs built by hand): every computing node its own group.  Nodes
 * that compute nothing form no group: sources (their buffers are filled by
 * the host) and views (flatten/reshape view the input's bytes; dropout is the
 * identity at inference). */
#include <stdlib.h>

#include "cg.h"

int node_is_alias(const Node *n) { return ir_is_view(n); }

Value *group_out(const KGroup *gr) {
  return gr->nepi ? gr->epi[gr->nepi - 1]->out : gr->main->out;
}

GroupList group_form(Graph *g, const unsigned char *need) {
  GroupList gl = {NULL, 0};
  int *gid = xmalloc(sizeof(int) * ((size_t)g->nnodes + 1));
  unsigned char *role = xmalloc((size_t)g->nnodes + 1);
  int ng = ir_schedule(g, need, gid, role);
  int *nepi = calloc((size_t)ng + 1, sizeof(int)), *nside = calloc((size_t)ng + 1, sizeof(int));
  int *npro = calloc((size_t)ng + 1, sizeof(int));
  gl.g = calloc((size_t)ng + 1, sizeof(KGroup));
  if (!nepi || !nside || !npro || !gl.g) ncc_die("out of memory");
  gl.n = ng;
  for (int i = 0; i < g->nnodes; i++) {
    if (role[i] == GROLE_EPILOGUE) nepi[gid[i]]++;
    if (role[i] == GROLE_SIDE) nside[gid[i]]++;
    if (role[i] == GROLE_PROLOGUE) npro[gid[i]]++;
  }
  for (int k = 0; k < ng; k++) {
    if (nepi[k]) gl.g[k].epi = xmalloc(sizeof(Node *) * (size_t)nepi[k]);
    if (nside[k]) gl.g[k].side = xmalloc(sizeof(Node *) * (size_t)nside[k]);
    if (npro[k]) gl.g[k].pro = xmalloc(sizeof(Node *) * (size_t)npro[k]);
  }
  /* graph order is chain order: each epilogue node takes the previous one's value */
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (gid[i] < 0) continue;
    KGroup *gr = &gl.g[gid[i]];
    if (role[i] == GROLE_MAIN) {
      gr->main = n;
      gr->load_time = n->load_time;
    } else if (role[i] == GROLE_SIDE) {
      gr->side[gr->nside++] = n;
    } else if (role[i] == GROLE_PROLOGUE) {
      gr->pro[gr->npro++] = n;
    } else {
      gr->epi[gr->nepi++] = n;
    }
  }
  for (int k = 0; k < ng; k++)
    if (!gl.g[k].main) ncc_die("kernel group %d has no main node", k);
  free(gid);
  free(role);
  free(nepi);
  free(nside);
  free(npro);
  return gl;
}

void group_free(GroupList *gl) {
  for (int i = 0; i < gl->n; i++) {
    free(gl->g[i].epi);
    free(gl->g[i].pro);
    free(gl->g[i].side);
  }
  free(gl->g);
  gl->g = NULL;
  gl->n = 0;
}
