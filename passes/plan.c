/* plan.c — memory planning: where every stored value lives.
 *
 * \brief The code generator allocates one arena at create time; this pass
 * decides the part of it that holds per-inference values and writes the
 * decision on the IR (Value.region/offset, Graph.act_bytes/load_bytes), which
 * the verifier checks, codegen emits as it is and the report prints as
 * peak_memory.
 *
 *   - MEM_ACT: graph inputs and the values kernel groups store.  Lifetimes
 *     come from ir_liveness() over the kernel groups' launch order; values
 *     whose lifetimes do not meet share bytes.  Placement is first fit in the
 *     order of first use, 256-byte aligned.
 *   - In place: a group whose kernel reads an operand only at the index it
 *     writes (an elementwise or batchnorm2d kernel; ir_inplace_ok) stores its
 *     value in that operand's bytes when the operand dies there, so
 *     relu(x + y) at -O0 needs no third buffer.
 *   - MEM_LOAD: values computed once after the weights load (Node.load_time)
 *     and read per inference are kept for every inference like parameters:
 *     each its own range, never shared.  One that only load-time kernels
 *     read (a batchnorm scale's intermediates) is scratch in
 *     MEM_ACT, live over the load-time groups (ir_liveness), which run
 *     before any activation is.
 * Views (flatten, reshape, dropout at inference) take the place of what they
 * view.  Without this pass (-O0) codegen gives every stored value its own
 * range: the report's naive_memory. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* A slot: one value, or a chain of values each written in place over the
 * previous one (they share bytes and their lifetimes join end to start). */
typedef struct Slot {
  Value *head;        /* first value of the chain */
  int64_t size;
  int first, last;
  int64_t off;
} Slot;

typedef struct Span {
  int64_t off, end;
} Span;

static int cmp_span(const void *a, const void *b) {
  const Span *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off;
}

static int by_first(const void *a, const void *b) {
  const Slot *x = *(Slot *const *)a, *y = *(Slot *const *)b;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return x->head->id < y->head->id ? -1 : x->head->id > y->head->id;
}

static int by_size(const void *a, const void *b) {
  const Slot *x = *(Slot *const *)a, *y = *(Slot *const *)b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  return by_first(a, b);
}

/* First fit in the given order; returns the region size. */
static int64_t first_fit(Slot **order, int n, Span *conf) {
  int64_t top = 0;
  for (int i = 0; i < n; i++) {
    Slot *s = order[i];
    int nc = 0;
    for (int t = 0; t < i; t++) {
      Slot *q = order[t];
      if (q->first > s->last || q->last < s->first) continue;   /* lifetimes apart */
      conf[nc++] = (Span){q->off, q->off + q->size};
    }
    qsort(conf, (size_t)nc, sizeof *conf, cmp_span);
    int64_t off = 0;
    for (int t = 0; t < nc; t++) {
      if (conf[t].off >= off + s->size) break;   /* the gap before it fits */
      if (conf[t].end > off) off = conf[t].end;
    }
    s->off = off;
    if (off + s->size > top) top = off + s->size;
  }
  return top;
}

/* "2.25 MB", "12.0 KB" */
static const char *mb(char *b, size_t n, int64_t bytes) {
  if (bytes >= 1048576) snprintf(b, n, "%.2f MB", bytes / 1048576.0);
  else snprintf(b, n, "%.1f KB", bytes / 1024.0);
  return b;
}

int pass_plan(Graph *g, PassCtx *c) {
  Liveness lv;
  ir_liveness(g, g->training, &lv);
  int nv = lv.nvalues, nn = g->nnodes;
  for (int i = 0; i < nn; i++) {
    g->nodes[i]->out->region = MEM_NONE;
    g->nodes[i]->out->offset = 0;
  }
  int *slot_of = xmalloc(sizeof(int) * ((size_t)nv + 1));      /* value id -> slot */
  unsigned char *hosts = calloc((size_t)nv + 1, 1);             /* already overwritten in place */
  Slot *slots = xmalloc(sizeof(Slot) * ((size_t)nn + 1));
  Slot **order = xmalloc(sizeof(Slot *) * ((size_t)nn + 1));
  Span *conf = xmalloc(sizeof(Span) * ((size_t)nn + 1));
  if (!hosts) ncc_die("out of memory");
  int ns = 0, inplace = 0, nvals = 0;
  int64_t load = 0, naive = 0;
  /* graph order is the order of first use within the region: a value is
   * written by its group, after the inputs (position 0) */
  for (int i = 0; i < nn; i++) {
    Value *v = g->nodes[i]->out;
    int kind = lv.kind[v->id];
    slot_of[v->id] = -1;
    if (kind == LV_LOAD) {
      v->region = MEM_LOAD;
      v->offset = load;
      load += ir_slot_bytes(v);
      continue;
    }
    if (kind != LV_ACT && kind != LV_INPUT) continue;
    nvals++;
    naive += ir_slot_bytes(v);
    /* in place over an operand of its group that dies there */
    int k = lv.first[v->id] - 1, host = -1;
    if (kind == LV_ACT) {
      const Node *m = lv.main[k];
      for (int j = m->id; j <= v->def->id && host < 0; j++) {
        const Node *n = g->nodes[j];
        if (lv.gid[j] != k) continue;
        for (int t = 0; t < n->nin && host < 0; t++) {
          Value *a = lv.root[n->in[t]->id];
          if (!hosts[a->id] && slot_of[a->id] >= 0 && ir_inplace_ok(g, &lv, k, a)) host = a->id;
        }
      }
    }
    if (host >= 0) {
      Slot *s = &slots[slot_of[host]];
      hosts[host] = 1;
      slot_of[v->id] = slot_of[host];
      if (lv.last[v->id] > s->last) s->last = lv.last[v->id];
      inplace++;
    } else {
      slot_of[v->id] = ns;
      slots[ns++] = (Slot){v, ir_slot_bytes(v), lv.first[v->id], lv.last[v->id], 0};
    }
  }
  /* two orders, the smaller region wins: first use (keeps early values low)
   * and largest first (big values pack first, small ones fill the gaps) */
  int64_t best = -1;
  int64_t *best_off = xmalloc(sizeof(int64_t) * ((size_t)ns + 1));
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < ns; i++) order[i] = &slots[i];
    qsort(order, (size_t)ns, sizeof *order, pass == 0 ? by_first : by_size);
    int64_t top = first_fit(order, ns, conf);
    if (best < 0 || top < best) {
      best = top;
      for (int i = 0; i < ns; i++) best_off[i] = slots[i].off;
    }
  }
  if (best < 0) best = 0;
  for (int i = 0; i < nn; i++) {
    Value *v = g->nodes[i]->out;
    if (slot_of[v->id] < 0) continue;
    v->region = MEM_ACT;
    v->offset = best_off[slot_of[v->id]];
  }
  /* views take the place of what they view (graph order: roots first) */
  for (int i = 0; i < nn; i++) {
    Node *nd = g->nodes[i];
    if (lv.kind[nd->out->id] != LV_VIEW) continue;
    Value *r = lv.root[nd->out->id];
    nd->out->region = r->region;
    nd->out->offset = r->offset;
  }
  g->act_bytes = best;
  g->load_bytes = load;
  g->planned = 1;
  if (c->verbose) {
    /* the most bytes live at once: no placement in this launch order does better */
    int64_t bound = 0;
    for (int p = 0; p <= lv.end; p++) {
      int64_t live = 0;
      for (int i = 0; i < ns; i++)
        if (slots[i].first <= p && p <= slots[i].last) live += slots[i].size;
      if (live > bound) bound = live;
    }
    char b1[32], b2[32], b3[32];
    fprintf(stderr, "pass plan: activations %s for %d values (%.0f%% of %s unshared; %d in place; the most live at "
            "once: %s)", mb(b1, sizeof b1, best), nvals, naive ? 100.0 * (double)best / (double)naive : 100.0,
            mb(b2, sizeof b2, naive), inplace, mb(b3, sizeof b3, bound));
    if (load) fprintf(stderr, "; load-time values %s", mb(b1, sizeof b1, load));
    fputc('\n', stderr);
  }
  free(slot_of);
  free(hosts);
  free(slots);
  free(order);
  free(conf);
  free(best_off);
  ir_liveness_free(&lv);
  return 0;
}
