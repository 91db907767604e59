/* frontend.c — the entry points of frontend.h: text -> AST -> Graph.
 *
 * Owns what happens around the parse: empty input, the model name (the graph
 * needs it before elaboration starts), `--set` options that name no const,
 * and the rule that a load either succeeds completely or returns NULL with
 * every error reported.  The AST lives in its own arena, freed before
 * returning; the graph keeps only what it needs in its own arena. */
#include "frontend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"

/* C's keywords (C11, and C++'s that CUDA C rejects): a graph or a name
 * spelled so ("case", "int") would not compile as an identifier */
int frontend_name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= 200) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
          *s == '.' || *s == '-'))
      return 0;
  return 1;
}

int frontend_c_keyword(const char *s) {
  static const char *kw[] = {"auto", "bool", "break", "case", "char", "class", "const", "continue", "default",
                             "delete", "do", "double", "else", "enum", "extern", "false", "float", "for", "goto",
                             "if", "inline", "int", "long", "new", "operator", "private", "protected", "public",
                             "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
                             "switch", "template", "this", "throw", "true", "try", "typedef", "typename", "union",
                             "unsigned", "using", "virtual", "void", "volatile", "while"};
  for (size_t k = 0; k < sizeof kw / sizeof *kw; k++)
    if (!strcmp(s, kw[k])) return 1;
  return 0;
}

/* "path/to/lenet.net" -> "lenet", made a C identifier (a keyword or a
 * leading digit gets "m_"): the model name when the file has no `model`
 * statement, and an ONNX model's. */
char *frontend_stem_name(Arena *ar, const char *path) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  size_t n = strcspn(b, ".");
  char *s = arena_strndup(ar, b, n);
  for (char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_')) *p = '_';
  if (!*s || (*s >= '0' && *s <= '9') || frontend_c_keyword(s)) return arena_printf(ar, "m_%s", s);
  return s;
}

static int blank(const char *t, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (t[i] == '#') { while (i < len && t[i] != '\n') i++; continue; }
    if (t[i] != ' ' && t[i] != '\t' && t[i] != '\r' && t[i] != '\n') return 0;
  }
  return 1;
}

/* A NUL byte, or many bytes that are neither printable text nor valid UTF-8,
 * mean "not a text file": one clear error at the first such byte instead of
 * one per byte from the lexer. */
static int binary_at(const char *t, size_t len, size_t *pos, int *nul) {
  size_t bad = 0, first = (size_t)-1;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)t[i];
    if (c == 0) { *pos = i; *nul = 1; return 1; }
    int isbad = 0;
    if (c < 32 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') isbad = 1;
    else if (c == 127) isbad = 1;
    else if (c >= 0x80) {
      int n = c >= 0xf0 && c < 0xf5 ? 3 : c >= 0xe0 ? 2 : c >= 0xc2 && c < 0xe0 ? 1 : -1;
      if (c >= 0xf5) n = -1;
      for (int k = 1; n > 0 && k <= n; k++)
        if (i + (size_t)k >= len || ((unsigned char)t[i + (size_t)k] & 0xc0) != 0x80) n = -1;
      if (n < 0) isbad = 1;
      else i += (size_t)n;
    }
    if (isbad) {
      if (first == (size_t)-1) first = i;
      bad++;
    }
  }
  *nul = 0;
  *pos = first;
  return bad > 8 && bad * 50 > len;
}

Graph *frontend_load_text(const char *path, const char *text, size_t len, const SetOpt *sets, int nsets) {
  if (!path) path = "<input>";
  int errors0 = diag_errors();
  diag_add_source(path, text ? text : "", text ? len : 0);
  Loc start = {path, 1, 1};
  if (!text || blank(text, len)) {
    diag_error(start, "the file is empty; a model starts with 'model NAME' followed by its inputs and ops");
    return NULL;
  }
  if (len > ((size_t)1 << 28)) {
    diag_error(start, "the file is larger than 256 MiB; this is not a .net model");
    return NULL;
  }
  size_t bpos;
  int nul;
  if (binary_at(text, len, &bpos, &nul)) {
    Loc l = {path, 1, 1};
    for (size_t i = 0; i < bpos; i++) {
      if (text[i] == '\n') { l.line++; l.col = 1; }
      else l.col++;
    }
    diag_error(l, "the file holds %s; this does not look like a .net text file",
               nul ? "a NUL byte" : "binary data (bytes that are neither text nor UTF-8)");
    return NULL;
  }
  Arena *ar = arena_new();
  Block top = ast_parse(ar, path, text, len);

  /* --set must name a const; after syntax errors the const may be in a
   * statement that did not parse, so only a clean parse can tell */
  int parsed_ok = diag_errors() == errors0;
  int *used = xmalloc(sizeof(int) * (size_t)(nsets > 0 ? nsets : 1));
  memset(used, 0, sizeof(int) * (size_t)(nsets > 0 ? nsets : 1));
  for (int i = 0; i < nsets; i++)
    for (int k = 0; k < top.n; k++)
      if (top.s[k]->kind == S_CONST && sets[i].name && strcmp(top.s[k]->name, sets[i].name) == 0) used[i] = 1;
  for (int i = 0; i < nsets && parsed_ok; i++)
    if (!used[i])
      diag_error((Loc){0}, "--set %s=%s: %s has no const named '%s'", sets[i].name ? sets[i].name : "",
                 sets[i].value ? sets[i].value : "", path, sets[i].name ? sets[i].name : "");

  Graph *g = NULL;
  if (diag_errors() == errors0) {
    const char *model = NULL;
    if (top.n > 0 && top.s[0]->kind == S_MODEL) model = top.s[0]->name;
    g = ir_graph_new(model ? model : frontend_stem_name(ar, path));
    memset(used, 0, sizeof(int) * (size_t)(nsets > 0 ? nsets : 1));
    elaborate(g, &top, sets, nsets, used);
    if (diag_errors() != errors0) {
      ir_graph_free(g);
      g = NULL;
    }
  }
  free(used);
  arena_free(ar);
  return g;
}

/* Loaded texts stay alive until exit: diagnostics may show their lines at
 * any time.  Kept reachable here so leak checkers do not flag them. */
static char **kept;
static int nkept;

Graph *frontend_load(const char *path, const SetOpt *sets, int nsets) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    diag_error((Loc){0}, "cannot open '%s': %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = xmalloc(cap);
  for (;;) {
    if (len == cap) {
      if (cap >= ((size_t)1 << 29)) break;
      cap *= 2;
      buf = xrealloc(buf, cap);
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  int rerr = ferror(f);
  int e = errno;
  fclose(f);
  if (rerr) {
    diag_error((Loc){0}, "cannot read '%s': %s", path, strerror(e));
    free(buf);
    return NULL;
  }
  kept = xrealloc(kept, sizeof(char *) * (size_t)(nkept + 1));
  kept[nkept++] = buf;
  if (frontend_is_onnx(path, buf, len)) return frontend_load_onnx(path, buf, len, sets, nsets);
  return frontend_load_text(path, buf, len, sets, nsets);
}
