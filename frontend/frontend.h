/* frontend.h — from .net source text to an IR graph.
 * lexer.l (flex) -> parser.y (bison) -> AST (ast.h) -> elaborate.c -> Graph.
 * Errors go through diag (file:line:col, caret); several per run. */
#ifndef NCC_FRONTEND_H
#define NCC_FRONTEND_H
#include <stddef.h>
#include "../ir/ir.h"

/* `--set NAME=V`: overrides `const NAME = ...` (V is an integer, float, true/false). */
typedef struct SetOpt { const char *name, *value; } SetOpt;

/* Parses and elaborates. Returns NULL when any error was reported (diag_errors() > 0).
 * `text` need not be NUL-terminated and may hold any bytes; it must outlive the
 * diagnostics. A `--set` naming no const is an error. */
Graph *frontend_load_text(const char *path, const char *text, size_t len,
                          const SetOpt *sets, int nsets);
/* Reads `path` (an unreadable file is an error naming it) and calls the above.
 * The text is kept alive until exit for diagnostics. */
Graph *frontend_load(const char *path, const SetOpt *sets, int nsets);
#endif
