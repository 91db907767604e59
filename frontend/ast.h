/* ast.h — the syntax tree of a .net file, as the parser (parser.y) builds it
 * and elaborate.c walks it.
 *
 * Like the IR it uses one wide node struct per category (expressions and
 * statements) instead of a union per kind: each kind reads the fields it
 * needs, documented next to the enum.  Every node carries its Loc
 * (file:line:col) because every diagnostic of elaboration points at one.
 * All nodes live in one arena owned by the parse, freed in one go, so the
 * fuzzer's repeated loads leak nothing and error recovery never has to free
 * half-built subtrees. */
#ifndef NCC_AST_H
#define NCC_AST_H
#include <stdint.h>

#include "../ir/arena.h"
#include "../ir/diag.h"

typedef struct Expr Expr;
typedef struct Stmt Stmt;

typedef enum {
  E_INT,      /* ival */
  E_FLOAT,    /* fval */
  E_BOOL,     /* ival (0/1) */
  E_STR,      /* parts: a list of E_STR_TEXT (sval) and interpolated exprs */
  E_STR_TEXT, /* sval: a literal piece of a string */
  E_NAME,     /* sval */
  E_LIST,     /* items[nitems] */
  E_INDEX,    /* lhs[rhs] */
  E_MEMBER,   /* lhs.sval  (shape, rank) */
  E_CALL,     /* sval(items[nitems]); kw[i] != NULL marks `kw[i]=items[i]` */
  E_BINOP,    /* lhs op rhs */
  E_UNOP,     /* op lhs: '-' or 'n' (not) */
} ExprKind;

/* Binary operators; logical and/or short-circuit. */
enum {
  BO_ADD = '+', BO_SUB = '-', BO_MUL = '*', BO_DIV = '/', BO_MOD = '%',
  BO_IDIV = 'f',   /* // */
  BO_EQ = 'e', BO_NE = 'n', BO_LT = '<', BO_LE = 'l', BO_GT = '>', BO_GE = 'g',
  BO_AND = '&', BO_OR = '|',
  UO_NEG = '-', UO_NOT = '!',
};

struct Expr {
  ExprKind kind;
  Loc loc;
  int op;
  int64_t ival;
  double fval;
  const char *sval;
  Expr *lhs, *rhs;
  Expr **items;      /* list items, call args, string parts */
  const char **kw;   /* E_CALL: keyword of each arg, or NULL when positional */
  Loc *kwloc;        /* E_CALL: where each keyword is */
  int nitems;
};

typedef enum {
  S_MODEL,    /* name */
  S_CONST,    /* name = e */
  S_INPUT,    /* name: dtype[items] ; sval = dtype spelling, dtloc */
  S_ASSIGN,   /* name = e */
  S_OUTPUT,   /* names[nnames] */
  S_DEF,      /* name(params[nparams] = defaults[i] or NULL) body */
  S_RETURN,   /* e */
  S_IF,       /* if e body else els (els may be NULL, or one S_IF for `else if`) */
  S_FOR,      /* for name in e body */
  S_TRAIN,    /* body: S_TRAIN_ITEM statements */
  S_TRAIN_ITEM, /* name (optimizer/schedule/minimize) e */
  S_EXPR,     /* a bare expression (an error unless it is a call whose result is dropped) */
} StmtKind;

typedef struct Block { Stmt **s; int n; Loc loc; } Block;

struct Stmt {
  StmtKind kind;
  Loc loc;
  const char *name;
  Loc nameloc;
  Expr *e;
  const char *sval;
  Loc dtloc;
  Expr **items; int nitems;      /* S_INPUT dims */
  const char **names; Loc *nlocs; int nnames;   /* S_OUTPUT */
  const char **params; Loc *plocs; Expr **defaults; int nparams;  /* S_DEF */
  Block body;
  Stmt *els;       /* S_IF else: an S_IF (else if) or a block wrapped in an S_IF with e == NULL */
};

/* A growable array of pointers in the arena, for the parser's lists. */
typedef struct PtrVec { void **p; int n, cap; } PtrVec;
void ptrvec_push(Arena *ar, PtrVec *v, void *x);

Expr *ast_expr(Arena *ar, ExprKind k, Loc loc);
Stmt *ast_stmt(Arena *ar, StmtKind k, Loc loc);

/* Parses a whole file into a block of top-level statements.  Reports syntax
 * errors through diag; returns the statements it could recover in any case
 * (elaboration is skipped by the caller when errors were reported). */
Block ast_parse(Arena *ar, const char *file, const char *text, size_t len);

/* Elaborates the top-level statements into g (elaborate.c): runs the
 * compile-time program, calls ir_node() for every op.  set_used[i] is set when
 * sets[i] names a const.  Errors go through diag. */
struct Graph;
struct SetOpt;
void elaborate(struct Graph *g, Block *top, const struct SetOpt *sets, int nsets, int *set_used);
#endif
