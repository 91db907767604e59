/* diag.h — user-facing diagnostics: "file:line:col: error: ...", the source
 * line, and a caret (chibicc's habit).  Errors are counted, not fatal, so the
 * compiler can report several in one run; callers check diag_errors(). */
#ifndef NCC_DIAG_H
#define NCC_DIAG_H
#include <stdarg.h>
#include <stddef.h>

typedef struct Loc {
  const char *file;   /* NULL: no location (command line, internal) */
  int line, col;      /* 1-based; col counts bytes */
} Loc;

/* Registers a source buffer so that diagnostics can show its lines.  The
 * buffer must outlive the diagnostics (it is not copied). */
void diag_add_source(const char *file, const char *text, size_t len);

void diag_error(Loc loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void diag_verror(Loc loc, const char *fmt, va_list ap);
void diag_note(Loc loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void diag_warning(Loc loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int diag_errors(void);
void diag_reset(void);
/* After this many errors further ones are counted but not printed. */
void diag_set_limit(int max_printed);
/* While on, errors, warnings and notes are neither printed nor counted: a
 * trial run whose failure is an answer, not the user's error (the report
 * asking codegen for the launch geometry).  Returns the previous setting. */
int diag_set_quiet(int on);
#endif
