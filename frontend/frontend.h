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
/* Reads `path` (an unreadable file is an error naming it) and calls the above,
 * or frontend_load_onnx for an ONNX model (frontend_is_onnx).
 * The text is kept alive until exit for diagnostics. */
Graph *frontend_load(const char *path, const SetOpt *sets, int nsets);
/* For both readers: "dir/lenet.net" -> "lenet" as a C identifier, and
 * whether a name is a C (or CUDA C++) keyword that cannot be an identifier. */
char *frontend_stem_name(Arena *ar, const char *path);
int frontend_c_keyword(const char *s);
/* Is s a keyword of .net (model, input, output, ...; lexer.l)?  And may s
 * be a name= (letters, digits, '_', '.', '-'; 1 to 199 of them)? */
int frontend_net_keyword(const char *s);
int frontend_name_ok(const char *s);

/* ---- --emit=net (emit_net.c): a graph written back as .net source ---- */
typedef struct NetOpts {
  const char *banner;      /* comment lines written first, or NULL */
  int keep_names;          /* write name= of ops without parameters where .net would name them
                              otherwise (a .net source); 0: .net's names (an ONNX model's) */
} NetOpts;
/* A parameter the .net text names otherwise than the graph (an ONNX
 * initializer "onnx::Conv_193" becomes "Conv_0.weight"). */
typedef struct NetRename { const char *from, *to; } NetRename;
/* Writes g (as a frontend built it: no pass has run) to f.  *ren (malloc'd,
 * *nren entries; both may be NULL) lists the renamed parameters, whose
 * strings live in g's arena.  Returns 0, or -1 after errors that name the
 * node .net cannot write. */
int frontend_emit_net(Graph *g, const NetOpts *no, FILE *f, NetRename **ren, int *nren);

/* ---- ONNX (onnx.c, docs/onnx.md) ---- */
/* Is this an ONNX model rather than .net text?  A name ending in .onnx, or a
 * first byte 0x08 (a ModelProto's ir_version tag; no text starts with it). */
int frontend_is_onnx(const char *path, const char *bytes, size_t len);
/* Imports a serialized ModelProto.  `--set NAME=N` gives symbolic input
 * dimensions.  NULL after errors (a build without protobuf-c says so). */
Graph *frontend_load_onnx(const char *path, const char *bytes, size_t len, const SetOpt *sets, int nsets);
/* The initializers the last ONNX load of `path` made parameters, f32 by
 * name and shape (the data of the model's parameters); 0 for anything else. */
typedef struct FrontendWeight {
  const char *name;
  int rank;
  int64_t shape[NCC_MAX_RANK];
  const float *data;
} FrontendWeight;
int frontend_weights(const char *path, const FrontendWeight **w);
#endif
