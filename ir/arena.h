/* arena.h — bump allocation for everything that lives as long as a graph or a
 * compile: nodes, values, strings, AST.  Nothing is freed one by one
 * (one arena per graph). Allocation failure is fatal: ncc exits 2. */
#ifndef NCC_ARENA_H
#define NCC_ARENA_H
#include <stddef.h>

typedef struct ArenaBlock ArenaBlock;
typedef struct Arena {
  ArenaBlock *head;
  size_t total;   /* bytes handed out, for the curious */
} Arena;

Arena *arena_new(void);
void arena_free(Arena *a);
void *arena_alloc(Arena *a, size_t n);       /* zeroed, 16-byte aligned */
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...)
  __attribute__((format(printf, 2, 3)));
#define ARENA_NEW(a, T) ((T *)arena_alloc((a), sizeof(T)))
#define ARENA_ARRAY(a, T, n) ((T *)arena_alloc((a), sizeof(T) * (size_t)(n)))

/* For ncc's own bugs and out-of-memory: prints file:line and exits 2. */
_Noreturn void ncc_die_at(const char *file, int line, const char *fmt, ...)
  __attribute__((format(printf, 3, 4)));
#define ncc_die(...) ncc_die_at(__FILE__, __LINE__, __VA_ARGS__)
#define NCC_ASSERT(c) do { if (!(c)) ncc_die("assertion failed: %s", #c); } while (0)
void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
#endif
