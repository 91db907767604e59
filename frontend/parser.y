/* parser.y — the grammar of .net files (docs/language.md), building the AST of ast.h.
 *
 * Pure (no globals) with locations: every node gets file:line:col from the
 * token that starts it, operators from the operator token.  Syntax errors are
 * reported by yyreport_syntax_error as "expected X, found Y" and recovered at
 * statement level (`error sep`), so one run reports errors of several
 * statements.  After an error the lexer is told to forget the bracket depth at
 * the next newline (ctx->resync), otherwise one unclosed `(` would glue the
 * rest of the file into a single statement.
 *
 * The parser stack is capped (YYMAXDEPTH) so that absurdly nested input is an
 * error, not a huge allocation; elaboration caps the depth of its own
 * recursion separately (left-deep `a+a+a+...` chains nest without growing the
 * parser stack). */
%code requires {
#include "ast.h"
typedef void *yyscan_t;
struct ParseCtx {
  Arena *ar;
  const char *file;
  int line, col;       /* position of the next byte */
  int depth;           /* ( [ nesting: newlines inside are not tokens */
  Loc open;            /* where the outermost open bracket is */
  int resync;          /* a syntax error happened: reset depth at the next newline */
  int stopped;         /* binary input: lexing stopped, stay quiet */
  int quiet;           /* the lexer just reported; skip the next syntax error */
  int bad_runs;
  int eof_nl;
  int eof_in_str;      /* "unterminated string" at the end of the file was reported */
  int unclosed;        /* the file ended inside ( or [ */
  Loc braces[64];      /* where the open { are, for "never closed" */
  int nbraces;
  Loc str_start;
  char last[48];       /* text of the last token, for "found 'x'" */
  Block top;
};
typedef struct ParseCtx ParseCtx;
int ncc_parse_text(struct ParseCtx *ctx, const char *text, size_t len);
}

%code provides {
int yylex(YYSTYPE *lval, YYLTYPE *lloc, yyscan_t scanner);
}

%code {
#include <stdio.h>
#include <string.h>

#define YYMAXDEPTH 3000
#define LOC(l) ((Loc){ctx->file, (l).first_line, (l).first_column})

static Expr *bin(ParseCtx *ctx, int op, Expr *a, Expr *b, Loc loc) {
  Expr *e = ast_expr(ctx->ar, E_BINOP, loc);
  e->op = op; e->lhs = a; e->rhs = b;
  return e;
}
static Expr *un(ParseCtx *ctx, int op, Expr *a, Loc loc) {
  Expr *e = ast_expr(ctx->ar, E_UNOP, loc);
  e->op = op; e->lhs = a;
  return e;
}
static Block mkblock(PtrVec v, Loc loc) {
  return (Block){(Stmt **)v.p, v.n, loc};
}
static void push(ParseCtx *ctx, PtrVec *v, void *x) { ptrvec_push(ctx->ar, v, x); }
/* Call arguments come as a list of Expr with a parallel list of keywords. */
typedef struct Arg { const char *kw; Loc kwloc; Expr *e; } Arg;
static Arg *mkarg(ParseCtx *ctx, const char *kw, Loc kwloc, Expr *e) {
  Arg *a = ARENA_NEW(ctx->ar, Arg);
  a->kw = kw; a->kwloc = kwloc; a->e = e;
  return a;
}
static void yyerror(YYLTYPE *l, yyscan_t sc, ParseCtx *ctx, const char *msg) {
  (void)sc;
  ctx->resync = 1;
  if (ctx->stopped) return;
  if (strcmp(msg, "memory exhausted") == 0)
    diag_error(LOC(*l), "the input nests too deeply (more than %d levels)", YYMAXDEPTH);
  else
    diag_error(LOC(*l), "%s", msg);
}
}

%define api.pure full
%locations
%define parse.error custom
%define parse.lac full
%lex-param {yyscan_t scanner}
%parse-param {yyscan_t scanner} {ParseCtx *ctx}

%union {
  Expr *e;
  Stmt *st;
  const char *s;
  int64_t i;
  double f;
  PtrVec v;
  Block b;
}

%token MODEL "'model'" CONST "'const'" INPUT "'input'" OUTPUT "'output'" DEF "'def'"
%token RETURN "'return'" IF "'if'" ELSE "'else'" FOR "'for'" IN "'in'" TRAIN "'train'"
%token AND "'and'" OR "'or'" NOT "'not'" TRUE "'true'" FALSE "'false'"
%token <s> IDENT "name"
%token <i> INT "integer"
%token <f> FLOAT "number"
%token <s> STR_TEXT "string text"
%token STR_BEGIN "string" STR_END "end of string" INTERP_BEGIN "'{' in a string" INTERP_END "'}' closing an interpolation"
%token EQ "'=='" NE "'!='" LE "'<='" GE "'>='" IDIV "'//'"
%token NL "newline"

%left OR
%left AND
%precedence NOT
%nonassoc EQ NE '<' LE '>' GE
%left '+' '-'
%left '*' '/' '%' IDIV
%precedence UMINUS

%type <e> expr postfix primary string
%type <st> stmt if_stmt tstmt
%type <v> stmts tstmts exprs_opt exprs idents params_opt params args_opt args strparts
%type <b> block

%%

file: stmts                       { ctx->top = mkblock($1, LOC(@1)); }
    ;

sep: NL | ';' ;

stmts: %empty                     { $$ = (PtrVec){0}; }
     | stmts sep                  { $$ = $1; }
     | stmts stmt sep             { $$ = $1; push(ctx, &$$, $2); }
     | stmts error sep            { $$ = $1; yyerrok; }
     ;

block: '{' stmts '}'              { $$ = mkblock($2, LOC(@1)); }
     | '{' stmts stmt '}'         { PtrVec v = $2; push(ctx, &v, $3); $$ = mkblock(v, LOC(@1)); }
     | '{' stmts error '}'        { $$ = mkblock($2, LOC(@1)); yyerrok; }
     ;

stmt: MODEL IDENT                 { $$ = ast_stmt(ctx->ar, S_MODEL, LOC(@1)); $$->name = $2; $$->nameloc = LOC(@2); }
    | CONST IDENT '=' expr        { $$ = ast_stmt(ctx->ar, S_CONST, LOC(@1)); $$->name = $2; $$->nameloc = LOC(@2); $$->e = $4; }
    | INPUT IDENT ':' IDENT '[' exprs_opt ']'
                                  { $$ = ast_stmt(ctx->ar, S_INPUT, LOC(@1)); $$->name = $2; $$->nameloc = LOC(@2);
                                    $$->sval = $4; $$->dtloc = LOC(@4);
                                    $$->items = (Expr **)$6.p; $$->nitems = $6.n; }
    | IDENT '=' expr              { $$ = ast_stmt(ctx->ar, S_ASSIGN, LOC(@1)); $$->name = $1; $$->nameloc = LOC(@1); $$->e = $3; }
    | OUTPUT idents               { $$ = ast_stmt(ctx->ar, S_OUTPUT, LOC(@1));
                                    $$->nnames = $2.n / 2;
                                    $$->names = ARENA_ARRAY(ctx->ar, const char *, $$->nnames + 1);
                                    $$->nlocs = ARENA_ARRAY(ctx->ar, Loc, $$->nnames + 1);
                                    for (int i = 0; i < $$->nnames; i++) {
                                      $$->names[i] = $2.p[2 * i];
                                      $$->nlocs[i] = *(Loc *)$2.p[2 * i + 1];
                                    } }
    | DEF IDENT '(' params_opt ')' block
                                  { $$ = ast_stmt(ctx->ar, S_DEF, LOC(@1)); $$->name = $2; $$->nameloc = LOC(@2);
                                    $$->nparams = $4.n / 3;
                                    $$->params = ARENA_ARRAY(ctx->ar, const char *, $$->nparams + 1);
                                    $$->plocs = ARENA_ARRAY(ctx->ar, Loc, $$->nparams + 1);
                                    $$->defaults = ARENA_ARRAY(ctx->ar, Expr *, $$->nparams + 1);
                                    for (int i = 0; i < $$->nparams; i++) {
                                      $$->params[i] = $4.p[3 * i];
                                      $$->plocs[i] = *(Loc *)$4.p[3 * i + 1];
                                      $$->defaults[i] = $4.p[3 * i + 2];
                                    }
                                    $$->body = $6; }
    | RETURN expr                 { $$ = ast_stmt(ctx->ar, S_RETURN, LOC(@1)); $$->e = $2; }
    | if_stmt                     { $$ = $1; }
    | FOR IDENT IN expr block     { $$ = ast_stmt(ctx->ar, S_FOR, LOC(@1)); $$->name = $2; $$->nameloc = LOC(@2);
                                    $$->e = $4; $$->body = $5; }
    | TRAIN '{' tstmts '}'        { $$ = ast_stmt(ctx->ar, S_TRAIN, LOC(@1)); $$->body = mkblock($3, LOC(@2)); }
    | TRAIN '{' tstmts tstmt '}'  { $$ = ast_stmt(ctx->ar, S_TRAIN, LOC(@1)); PtrVec v = $3; push(ctx, &v, $4);
                                    $$->body = mkblock(v, LOC(@2)); }
    | TRAIN '{' tstmts error '}'  { $$ = ast_stmt(ctx->ar, S_TRAIN, LOC(@1)); $$->body = mkblock($3, LOC(@2)); yyerrok; }
    ;

if_stmt: IF expr block            { $$ = ast_stmt(ctx->ar, S_IF, LOC(@1)); $$->e = $2; $$->body = $3; }
       | IF expr block ELSE block { $$ = ast_stmt(ctx->ar, S_IF, LOC(@1)); $$->e = $2; $$->body = $3;
                                    $$->els = ast_stmt(ctx->ar, S_IF, LOC(@4)); $$->els->body = $5; }
       | IF expr block ELSE if_stmt
                                  { $$ = ast_stmt(ctx->ar, S_IF, LOC(@1)); $$->e = $2; $$->body = $3; $$->els = $5; }
       ;

tstmts: %empty                    { $$ = (PtrVec){0}; }
      | tstmts sep                { $$ = $1; }
      | tstmts tstmt sep          { $$ = $1; push(ctx, &$$, $2); }
      | tstmts error sep          { $$ = $1; yyerrok; }
      ;

tstmt: IDENT expr                 { $$ = ast_stmt(ctx->ar, S_TRAIN_ITEM, LOC(@1)); $$->name = $1; $$->nameloc = LOC(@1); $$->e = $2; }
     ;

idents: IDENT                     { $$ = (PtrVec){0}; push(ctx, &$$, (void *)$1);
                                    Loc *l = ARENA_NEW(ctx->ar, Loc); *l = LOC(@1); push(ctx, &$$, l); }
      | idents ',' IDENT          { $$ = $1; push(ctx, &$$, (void *)$3);
                                    Loc *l = ARENA_NEW(ctx->ar, Loc); *l = LOC(@3); push(ctx, &$$, l); }
      ;

params_opt: %empty                { $$ = (PtrVec){0}; }
          | params                { $$ = $1; }
          | params ','            { $$ = $1; }
          ;
params: IDENT                     { $$ = (PtrVec){0}; Loc *l = ARENA_NEW(ctx->ar, Loc); *l = LOC(@1);
                                    push(ctx, &$$, (void *)$1); push(ctx, &$$, l); push(ctx, &$$, NULL); }
      | IDENT '=' expr            { $$ = (PtrVec){0}; Loc *l = ARENA_NEW(ctx->ar, Loc); *l = LOC(@1);
                                    push(ctx, &$$, (void *)$1); push(ctx, &$$, l); push(ctx, &$$, $3); }
      | params ',' IDENT          { $$ = $1; Loc *l = ARENA_NEW(ctx->ar, Loc); *l = LOC(@3);
                                    push(ctx, &$$, (void *)$3); push(ctx, &$$, l); push(ctx, &$$, NULL); }
      | params ',' IDENT '=' expr { $$ = $1; Loc *l = ARENA_NEW(ctx->ar, Loc); *l = LOC(@3);
                                    push(ctx, &$$, (void *)$3); push(ctx, &$$, l); push(ctx, &$$, $5); }
      ;

exprs_opt: %empty                 { $$ = (PtrVec){0}; }
         | exprs                  { $$ = $1; }
         | exprs ','              { $$ = $1; }
         ;
exprs: expr                       { $$ = (PtrVec){0}; push(ctx, &$$, $1); }
     | exprs ',' expr             { $$ = $1; push(ctx, &$$, $3); }
     ;

args_opt: %empty                  { $$ = (PtrVec){0}; }
        | args                    { $$ = $1; }
        | args ','                { $$ = $1; }
        ;
args: expr                        { $$ = (PtrVec){0}; push(ctx, &$$, mkarg(ctx, NULL, LOC(@1), $1)); }
    | IDENT '=' expr              { $$ = (PtrVec){0}; push(ctx, &$$, mkarg(ctx, $1, LOC(@1), $3)); }
    | args ',' expr               { $$ = $1; push(ctx, &$$, mkarg(ctx, NULL, LOC(@3), $3)); }
    | args ',' IDENT '=' expr     { $$ = $1; push(ctx, &$$, mkarg(ctx, $3, LOC(@3), $5)); }
    ;

expr: expr OR expr                { $$ = bin(ctx, BO_OR, $1, $3, LOC(@2)); }
    | expr AND expr               { $$ = bin(ctx, BO_AND, $1, $3, LOC(@2)); }
    | NOT expr                    { $$ = un(ctx, UO_NOT, $2, LOC(@1)); }
    | expr EQ expr                { $$ = bin(ctx, BO_EQ, $1, $3, LOC(@2)); }
    | expr NE expr                { $$ = bin(ctx, BO_NE, $1, $3, LOC(@2)); }
    | expr '<' expr               { $$ = bin(ctx, BO_LT, $1, $3, LOC(@2)); }
    | expr LE expr                { $$ = bin(ctx, BO_LE, $1, $3, LOC(@2)); }
    | expr '>' expr               { $$ = bin(ctx, BO_GT, $1, $3, LOC(@2)); }
    | expr GE expr                { $$ = bin(ctx, BO_GE, $1, $3, LOC(@2)); }
    | expr '+' expr               { $$ = bin(ctx, BO_ADD, $1, $3, LOC(@2)); }
    | expr '-' expr               { $$ = bin(ctx, BO_SUB, $1, $3, LOC(@2)); }
    | expr '*' expr               { $$ = bin(ctx, BO_MUL, $1, $3, LOC(@2)); }
    | expr '/' expr               { $$ = bin(ctx, BO_DIV, $1, $3, LOC(@2)); }
    | expr '%' expr               { $$ = bin(ctx, BO_MOD, $1, $3, LOC(@2)); }
    | expr IDIV expr              { $$ = bin(ctx, BO_IDIV, $1, $3, LOC(@2)); }
    | '-' expr %prec UMINUS       { $$ = un(ctx, UO_NEG, $2, LOC(@1)); }
    | '+' expr %prec UMINUS       { $$ = $2; }
    | postfix                     { $$ = $1; }
    ;

postfix: primary                  { $$ = $1; }
       | postfix '[' expr ']'     { $$ = ast_expr(ctx->ar, E_INDEX, LOC(@2)); $$->lhs = $1; $$->rhs = $3; }
       | postfix '.' IDENT        { $$ = ast_expr(ctx->ar, E_MEMBER, LOC(@3)); $$->lhs = $1; $$->sval = $3; }
       | IDENT '(' args_opt ')'   { $$ = ast_expr(ctx->ar, E_CALL, LOC(@1)); $$->sval = $1;
                                    $$->nitems = $3.n;
                                    $$->items = ARENA_ARRAY(ctx->ar, Expr *, $3.n + 1);
                                    $$->kw = ARENA_ARRAY(ctx->ar, const char *, $3.n + 1);
                                    $$->kwloc = ARENA_ARRAY(ctx->ar, Loc, $3.n + 1);
                                    for (int i = 0; i < $3.n; i++) {
                                      Arg *a = $3.p[i];
                                      $$->items[i] = a->e; $$->kw[i] = a->kw; $$->kwloc[i] = a->kwloc;
                                    } }
       ;

primary: INT                      { $$ = ast_expr(ctx->ar, E_INT, LOC(@1)); $$->ival = $1; }
       | FLOAT                    { $$ = ast_expr(ctx->ar, E_FLOAT, LOC(@1)); $$->fval = $1; }
       | TRUE                     { $$ = ast_expr(ctx->ar, E_BOOL, LOC(@1)); $$->ival = 1; }
       | FALSE                    { $$ = ast_expr(ctx->ar, E_BOOL, LOC(@1)); $$->ival = 0; }
       | string                   { $$ = $1; }
       | IDENT                    { $$ = ast_expr(ctx->ar, E_NAME, LOC(@1)); $$->sval = $1; }
       | '[' exprs_opt ']'        { $$ = ast_expr(ctx->ar, E_LIST, LOC(@1));
                                    $$->items = (Expr **)$2.p; $$->nitems = $2.n; }
       | '(' expr ')'             { $$ = $2; }
       ;

string: STR_BEGIN strparts STR_END
                                  { $$ = ast_expr(ctx->ar, E_STR, LOC(@1));
                                    $$->items = (Expr **)$2.p; $$->nitems = $2.n; }
      ;
strparts: %empty                  { $$ = (PtrVec){0}; }
        | strparts STR_TEXT       { $$ = $1; Expr *t = ast_expr(ctx->ar, E_STR_TEXT, LOC(@2)); t->sval = $2;
                                    push(ctx, &$$, t); }
        | strparts INTERP_BEGIN expr INTERP_END
                                  { $$ = $1; push(ctx, &$$, $3); }
        ;

%%

/* "expected ')' or ',', found newline": what the user needs to fix a line. */
static int yyreport_syntax_error(const yypcontext_t *pc, yyscan_t sc, ParseCtx *ctx) {
  (void)sc;
  ctx->resync = 1;
  if (ctx->stopped) return 0;
  if (ctx->quiet) { ctx->quiet = 0; return 0; }
  Loc loc = LOC(*yypcontext_location(pc));
  yysymbol_kind_t found = yypcontext_token(pc);
  yysymbol_kind_t all[YYNTOKENS], exp[6];
  int na = yypcontext_expected_tokens(pc, all, YYNTOKENS), n = 0, ops = 0;
  /* after an operand every binary operator is possible: say "an operator"
   * instead of listing fifteen of them */
  for (int i = 0; i < na; i++) {
    static const char *const binops[] = {"'+'", "'-'", "'*'", "'/'", "'%'", "'<'", "'>'", "'//'", "'=='",
                                         "'!='", "'<='", "'>='", "'and'", "'or'", "'.'", "'['", NULL};
    int isop = 0;
    for (int k = 0; binops[k]; k++) isop |= strcmp(yysymbol_name(all[i]), binops[k]) == 0;
    if (isop) ops++;
    else {
      if (n < 6) exp[n] = all[i];
      n++;
    }
  }
  /* where an operand may start, "an expression" says it better than a list */
  int expr_start = 0;
  for (int i = 0; i < na; i++) expr_start |= all[i] == YYSYMBOL_INT;
  if (n > 5 || expr_start) n = 0;
  char buf[400];
  size_t k = 0;
  if (n > 0 && n <= 5) {
    k += (size_t)snprintf(buf + k, sizeof buf - k, "expected ");
    for (int i = 0; i < n && k < sizeof buf; i++)
      k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ",
                            yysymbol_name(exp[i]));
    if (ops && k < sizeof buf) k += (size_t)snprintf(buf + k, sizeof buf - k, " (or an operator)");
    if (k < sizeof buf) k += (size_t)snprintf(buf + k, sizeof buf - k, ", ");
  }
  if (k >= sizeof buf) k = sizeof buf - 1;
  if (expr_start && !k) k = (size_t)snprintf(buf, sizeof buf, "expected an expression, ");
  char what[120];
  if (found == YYSYMBOL_YYEOF)
    snprintf(what, sizeof what, "the end of the file");
  else if (found == YYSYMBOL_NL)
    snprintf(what, sizeof what, "the end of the line");
  else if (found == YYSYMBOL_IDENT || found == YYSYMBOL_INT || found == YYSYMBOL_FLOAT)
    snprintf(what, sizeof what, "%s '%s'", yysymbol_name(found), ctx->last);
  else
    snprintf(what, sizeof what, "%s", yysymbol_name(found));
  if (k) diag_error(loc, "syntax error: %sfound %s", buf, what);
  else diag_error(loc, "syntax error: unexpected %s", strncmp(what, "the ", 4) ? what : what + 4);
  if ((found == YYSYMBOL_YYEOF || found == YYSYMBOL_NL) && ctx->open.file && ctx->unclosed)
    diag_note(ctx->open, "this bracket is never closed");
  else if (ctx->depth > 0 && ctx->open.file && loc.line > ctx->open.line)
    diag_note(ctx->open, "this bracket is not closed before");
  else if ((found == YYSYMBOL_YYEOF || found == YYSYMBOL_NL) && ctx->eof_nl && ctx->nbraces > 0)
    diag_note(ctx->braces[ctx->nbraces > 64 ? 63 : ctx->nbraces - 1], "this '{' is never closed");
  return 0;
}
