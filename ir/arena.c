/* arena.c — bump allocator; see arena.h. */
#include "arena.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ArenaBlock {
  ArenaBlock *next;
  size_t used, size;
  _Alignas(16) unsigned char data[];
};

_Noreturn void ncc_die_at(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "ncc: internal error at %s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(2);
}

void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) ncc_die("out of memory (%zu bytes)", n);
  return p;
}

void *xrealloc(void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p) ncc_die("out of memory (%zu bytes)", n);
  return p;
}

char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(xmalloc(n), s, n);
}

Arena *arena_new(void) {
  Arena *a = xmalloc(sizeof *a);
  a->head = NULL;
  a->total = 0;
  return a;
}

void arena_free(Arena *a) {
  if (!a) return;
  for (ArenaBlock *b = a->head, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  free(a);
}

void *arena_alloc(Arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  ArenaBlock *b = a->head;
  if (!b || b->size - b->used < n) {
    size_t sz = n > 65536 ? n : 65536;
    b = xmalloc(sizeof *b + sz);
    b->next = a->head;
    b->used = 0;
    b->size = sz;
    a->head = b;
  }
  void *p = b->data + b->used;
  b->used += n;
  a->total += n;
  memset(p, 0, n);
  return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *p = arena_alloc(a, n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(Arena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = arena_alloc(a, (size_t)n + 1);
  vsnprintf(p, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return p;
}
