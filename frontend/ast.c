/* ast.c — constructors of AST nodes and the entry point of the parse.
 *
 * The parse itself is parser.y + lexer.l; this file only owns what both of
 * them and elaborate.c share, so that the generated files stay thin. */
#include "ast.h"

#include <string.h>

#include "parser.h"

void ptrvec_push(Arena *ar, PtrVec *v, void *x) {
  if (v->n == v->cap) {
    /* arena arrays are never freed one by one: doubling keeps the waste at
     * most the final size, and parser lists are small */
    int cap = v->cap ? v->cap * 2 : 4;
    void **p = ARENA_ARRAY(ar, void *, cap);
    if (v->n) memcpy(p, v->p, sizeof(void *) * (size_t)v->n);
    v->p = p;
    v->cap = cap;
  }
  v->p[v->n++] = x;
}

Expr *ast_expr(Arena *ar, ExprKind k, Loc loc) {
  Expr *e = ARENA_NEW(ar, Expr);
  e->kind = k;
  e->loc = loc;
  return e;
}

Stmt *ast_stmt(Arena *ar, StmtKind k, Loc loc) {
  Stmt *s = ARENA_NEW(ar, Stmt);
  s->kind = k;
  s->loc = loc;
  return s;
}

Block ast_parse(Arena *ar, const char *file, const char *text, size_t len) {
  ParseCtx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.ar = ar;
  ctx.file = file;
  ctx.line = ctx.col = 1;
  ncc_parse_text(&ctx, text, len);
  return ctx.top;
}
