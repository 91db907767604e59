/* diag.c — diagnostics with file:line:col, the source line and a caret.
 *
 * Sources are registered by name so that any Loc can be rendered, including
 * locations inside a `def` body reached through a call.  Non-printable bytes
 * in a shown line (binary garbage) are replaced by '?' so that a diagnostic
 * never writes control characters to the user's terminal. */
#include "diag.h"

#include <stdio.h>
#include <string.h>

typedef struct Source { const char *file, *text; size_t len; } Source;
static Source sources[64];
static int nsources;
static int nerrors, limit = 50, quiet;

void diag_add_source(const char *file, const char *text, size_t len) {
  if (nsources < 64) sources[nsources++] = (Source){file, text, len};
}

int diag_errors(void) { return nerrors; }
void diag_reset(void) { nerrors = 0; }
void diag_set_limit(int max_printed) { limit = max_printed; }
int diag_set_quiet(int on) {
  int was = quiet;
  quiet = on;
  return was;
}

static void show_line(Loc loc) {
  if (!loc.file || loc.line <= 0) return;
  for (int i = 0; i < nsources; i++) {
    if (strcmp(sources[i].file, loc.file) != 0) continue;
    const char *p = sources[i].text, *end = p + sources[i].len;
    for (int l = 1; l < loc.line && p < end; p++)
      if (*p == '\n') l++;
    if (p >= end && loc.line > 1) return;
    const char *e = p;
    while (e < end && *e != '\n' && e - p < 200) e++;
    /* Valid UTF-8 is shown as it is and takes one caret column per code
     * point; any other byte that is not printable ASCII is shown as '?', so a
     * binary file never writes control bytes to the terminal. */
    fputs("  ", stderr);
    int caret = 0;
    for (const char *q = p; q < e;) {
      unsigned char c = (unsigned char)*q;
      int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
      int ok = n > 1 && q + n <= e;
      for (int k = 1; ok && k < n; k++) ok = ((unsigned char)q[k] & 0xC0) == 0x80;
      if (q - p < loc.col - 1) caret++;
      if (ok) {
        fwrite(q, 1, (size_t)n, stderr);
        q += n;
      } else {
        fputc(c == '\t' ? ' ' : (c < 32 || c >= 127 ? '?' : c), stderr);
        q++;
      }
    }
    fputs("\n  ", stderr);
    for (int c = 0; c < caret && c < 200; c++) fputc(' ', stderr);
    fputs("^\n", stderr);
    return;
  }
}

static void emit(const char *kind, Loc loc, const char *fmt, va_list ap) {
  if (loc.file)
    fprintf(stderr, "%s:%d:%d: %s: ", loc.file, loc.line, loc.col, kind);
  else
    fprintf(stderr, "ncc: %s: ", kind);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  show_line(loc);
}

void diag_verror(Loc loc, const char *fmt, va_list ap) {
  if (quiet) return;
  nerrors++;
  if (nerrors == limit + 1) fprintf(stderr, "ncc: too many errors, the rest are not shown\n");
  if (nerrors > limit) return;
  emit("error", loc, fmt, ap);
}

void diag_error(Loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_verror(loc, fmt, ap);
  va_end(ap);
}

void diag_note(Loc loc, const char *fmt, ...) {
  if (quiet || nerrors > limit) return;
  va_list ap;
  va_start(ap, fmt);
  emit("note", loc, fmt, ap);
  va_end(ap);
}

void diag_warning(Loc loc, const char *fmt, ...) {
  if (quiet) return;
  va_list ap;
  va_start(ap, fmt);
  emit("warning", loc, fmt, ap);
  va_end(ap);
}
