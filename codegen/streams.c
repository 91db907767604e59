/* streams.c — a step's kernel groups rendered on two streams.
 *
 * The streams pass chose the groups that run on the side stream (Node.stream
 * on a group's main node).  Here each group is rendered by itself, and the
 * buffers its launches pass are recorded (CgAccess: read, or written; a
 * kernel parameter that is not const is written).  Then the groups go out in
 * launch order, each after an ncc_stream where the stream changes, and a
 * group waits for the other stream wherever the two meet: group i waits for
 * the latest group p on the other stream whose buffers share bytes of the
 * arena with i's where either writes them (i reads what p wrote, overwrites
 * what p reads, or writes where p writes), unless i's stream has already
 * waited for p or a later group of that stream (a stream runs in order).  The
 * wait is an event recorded right after p.  The step ends with a join, so
 * that stream 0 (the copies that read the outputs, the next step) follows
 * everything.  Byte ranges, not values: two values that share bytes in the
 * memory plan meet, and so do a gradient and the optimizer's range over all
 * of them.  The emulator checks the waits (NCC_STREAM_ORDER=side-last and
 * main-last hold one stream back until the other waits for it). */
#include <stdlib.h>
#include <string.h>

#include "cg.h"

typedef struct GText {
  Buf text;
  CgAccess acc;
  int stream;
  const Node *main;
} GText;

static int bufs_meet(const Cg *c, int a, int b) {
  const CgBuf *x = &c->bufs[a], *y = &c->bufs[b];
  if (!x->bytes || !y->bytes) return 0;
  return x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes;
}

/* 0: apart; 1: q reads what p wrote; 2: q overwrites what p reads; 3: both write */
static int meet(const Cg *c, const GText *p, const GText *q) {
  int kind = 0;
  if (p->acc.all || q->acc.all) return 3;
  for (int i = 0; i < p->acc.n; i++)
    for (int j = 0; j < q->acc.n; j++) {
      if (!p->acc.wr[i] && !q->acc.wr[j]) continue;
      if (!bufs_meet(c, p->acc.buf[i], q->acc.buf[j])) continue;
      int k = p->acc.wr[i] && q->acc.wr[j] ? 3 : p->acc.wr[i] ? 1 : 2;
      if (!kind || k < kind) kind = k;
    }
  return kind;
}

/* the group's name in a comment: its main node's, kept from closing the comment */
static const char *gname(const Node *n, char *b, size_t len) {
  if (n->name) snprintf(b, len, "%s", n->name);
  else if (n->out->grad_of && n->out->grad_of->def->name)   /* a weight gradient: its parameter */
    snprintf(b, len, "%s (%s's gradient)", ncc_ops[n->op].name, n->out->grad_of->def->name);
  else if (n->layer) snprintf(b, len, "%s in %s", ncc_ops[n->op].name, n->layer);
  else snprintf(b, len, "%s", ncc_ops[n->op].name);
  for (char *q = b; *q; q++)
    if ((q[0] == '*' && q[1] == '/') || (unsigned char)*q < 32) *q = '_';
  return b;
}

static void call(Cg *c, const char *stmt, const char *comment) {
  buf_printf(&c->run, "  rc = %s;   /* %s */\n  if (rc) return %s_fail(m, rc, \"%.*s\");\n", stmt, comment, c->model,
             (int)strcspn(stmt, "("), stmt);
}

int cg_emit_streams(Cg *c, const GroupList *gl, int load_time, int (*emit)(Cg *, const KGroup *)) {
  int n = 0, side = 0;
  for (int i = 0; i < gl->n; i++)
    if (gl->g[i].load_time == load_time) {
      n++;
      side += gl->g[i].main->stream != 0;
    }
  if (!side || load_time) {   /* one stream: in launch order */
    for (int i = 0; i < gl->n; i++)
      if (gl->g[i].load_time == load_time && emit(c, &gl->g[i]) != 0) return -1;
    return 0;
  }
  GText *t = calloc((size_t)n, sizeof *t);
  int *waitfor = malloc(sizeof(int) * (size_t)n), *why = malloc(sizeof(int) * (size_t)n),
      *lastwait = malloc(sizeof(int) * (size_t)n), *ev = malloc(sizeof(int) * (size_t)n);
  if (!t || !waitfor || !why || !lastwait || !ev) ncc_die("out of memory");
  Buf run = c->run;
  int k = 0, rc = 0;
  for (int i = 0; i < gl->n && !rc; i++) {
    if (gl->g[i].load_time != load_time) continue;
    memset(&c->run, 0, sizeof c->run);
    c->acc = &t[k].acc;
    rc = emit(c, &gl->g[i]);
    c->acc = NULL;
    t[k].text = c->run;
    t[k].stream = gl->g[i].main->stream != 0;
    t[k].main = gl->g[i].main;
    k++;
  }
  c->run = run;
  if (rc) goto done;
  /* the waits: each stream has waited for the other's groups up to covered[s] */
  int covered[2] = {-1, -1};
  for (int i = 0; i < n; i++) {
    int s = t[i].stream;
    waitfor[i] = -1;
    lastwait[i] = -1;
    ev[i] = -1;
    for (int p = i - 1; p > covered[s]; p--) {
      int kind;
      if (t[p].stream == s || !(kind = meet(c, &t[p], &t[i]))) continue;
      waitfor[i] = p;
      why[i] = kind;
      covered[s] = p;
      break;
    }
  }
  for (int i = 0; i < n; i++)
    if (waitfor[i] >= 0) lastwait[waitfor[i]] = i;
  /* events: one per group the other stream waits for (once: a stream waits in
   * order), live from its record to that wait */
  int over = 0;
  {
    int owner[CG_MAX_EVENTS];
    for (int e = 0; e < CG_MAX_EVENTS; e++) owner[e] = -1;
    for (int i = 0; i < n && !over; i++) {
      if (waitfor[i] >= 0 && lastwait[waitfor[i]] == i) owner[ev[waitfor[i]]] = -1;   /* free after its last wait */
      if (lastwait[i] < 0) continue;
      int e = 0;
      while (e < CG_MAX_EVENTS && owner[e] >= 0) e++;
      if (e == CG_MAX_EVENTS) over = 1;   /* more in flight than the runtime has: one stream */
      else owner[e] = i, ev[i] = e;
    }
  }
  if (over) {
    for (int i = 0; i < n; i++) buf_puts(&c->run, t[i].text.s ? t[i].text.s : "");
    goto done;
  }
  /* a test hook, never set by ncc: the waits left out, so that a test can see
   * the emulator's held-back orders give wrong results without them
   * (tests/driver/test_train.py, streams) */
  if (getenv("NCC_TEST_STREAMS_NO_WAITS"))
    for (int i = 0; i < n; i++) waitfor[i] = ev[i] = -1;
  int cur = 0;
  char a[256], b[256], stmt[64], cm[700];
  for (int i = 0; i < n; i++) {
    if (t[i].stream != cur) {
      cur = t[i].stream;
      snprintf(stmt, sizeof stmt, "ncc_stream(m->dev, %d)", cur);
      call(c, stmt, cur ? "the side stream: kernels off the longest chain (the streams pass)" : "stream 0");
    }
    if (waitfor[i] >= 0) {
      static const char *const how[] = {"", "reads its value", "overwrites bytes it reads", "writes bytes it writes"};
      snprintf(stmt, sizeof stmt, "ncc_event_wait(m->dev, %d)", ev[waitfor[i]]);
      snprintf(cm, sizeof cm, "after %s: %s %s", gname(t[waitfor[i]].main, a, sizeof a),
               gname(t[i].main, b, sizeof b), how[why[i]]);
      call(c, stmt, cm);
    }
    buf_puts(&c->run, t[i].text.s ? t[i].text.s : "");
    if (ev[i] >= 0) {
      snprintf(stmt, sizeof stmt, "ncc_event_record(m->dev, %d)", ev[i]);
      snprintf(cm, sizeof cm, "%s done: stream %d waits for it", gname(t[i].main, a, sizeof a), 1 - t[i].stream);
      call(c, stmt, cm);
    }
  }
  call(c, "ncc_stream_join(m->dev)", "stream 0 waits for the side stream: the step ends with both done");
done:
  for (int i = 0; i < k; i++) {
    buf_free(&t[i].text);
    free(t[i].acc.buf);
    free(t[i].acc.wr);
  }
  free(t);
  free(waitfor);
  free(why);
  free(lastwait);
  free(ev);
  return rc;
}
