/* main.c — the `ncc` command: picks the command from the first word, parses
 * its flags with the one option table (options.c) and hands over.
 *
 *   ncc MODEL.net ...        compile.c
 *   ncc run MODEL.net ...    run.c
 *   ncc bench MODEL.net ...  bench.c
 *   ncc train MODEL.net ...  train.c
 *
 * The messages of every command go through here, prefixed "ncc: " or
 * "ncc run: " so that a script running several commands can tell them apart. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "driver.h"

static Command g_cmd = CMD_COMPILE;

void drv_set_cmd(Command c) { g_cmd = c; }
const char *drv_cmd(void) { return cmd_name(g_cmd); }

static void vmsg(const char *kind, const char *fmt, va_list ap) {
  fprintf(stderr, "ncc%s%s: %s", g_cmd == CMD_COMPILE ? "" : " ", cmd_name(g_cmd), kind);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

int drv_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmsg("error: ", fmt, ap);
  va_end(ap);
  return 1;
}

int drv_internal(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmsg("internal error: ", fmt, ap);
  va_end(ap);
  return 2;
}

void drv_note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmsg("", fmt, ap);
  va_end(ap);
}

void drv_log(const Options *o, const char *fmt, ...) {
  if (!o->verbose) return;
  va_list ap;
  va_start(ap, fmt);
  vmsg("", fmt, ap);
  va_end(ap);
}

const char *with_path(char *buf, size_t n, const char *path, const char *msg) {
  if (!msg || !*msg) msg = "(no message)";
  if (strstr(msg, path)) snprintf(buf, n, "%s", msg);
  else snprintf(buf, n, "%s: %s", path, msg);
  return buf;
}

/* The command line, for the banner of a compiled MODEL.cu: words with
 * characters a shell would read apart are single-quoted. */
static char g_cmdline[4096];
const char *drv_command_line(void) { return g_cmdline; }

static void keep_command_line(int argc, char **argv) {
  size_t k = 0;
  for (int i = 0; i < argc && k + 4 < sizeof g_cmdline; i++) {
    const char *w = i == 0 ? "ncc" : argv[i];
    int quote = !*w || strpbrk(w, " \t'\"$`\\*?;&|<>()") != NULL;
    k += (size_t)snprintf(g_cmdline + k, sizeof g_cmdline - k, "%s%s", i ? " " : "", quote ? "'" : "");
    for (const char *c = w; *c && k + 6 < sizeof g_cmdline; c++) {
      if (*c == '\'' && quote) k += (size_t)snprintf(g_cmdline + k, sizeof g_cmdline - k, "'\\''");
      else g_cmdline[k++] = *c;
    }
    if (quote && k + 2 < sizeof g_cmdline) g_cmdline[k++] = '\'';
    g_cmdline[k] = 0;
  }
}

int main(int argc, char **argv) {
  Command cmd = CMD_COMPILE;
  keep_command_line(argc, argv);
  if (argc >= 2 && !strcmp(argv[1], "run")) cmd = CMD_RUN;
  else if (argc >= 2 && !strcmp(argv[1], "bench")) cmd = CMD_BENCH;
  else if (argc >= 2 && !strcmp(argv[1], "train")) cmd = CMD_TRAIN;
  else if (argc >= 2 && !strcmp(argv[1], "quantize")) cmd = CMD_QUANTIZE;
  drv_set_cmd(cmd);
  if (argc == 1) {            /* a bare `ncc`: the usage, as an error */
    opts_help(CMD_COMPILE, stderr);
    return 1;
  }
  Options o;
  int shift = cmd == CMD_COMPILE ? 0 : 1;
  int rc = opts_parse(cmd, argc - shift, argv + shift, &o);
  if (rc == OPTS_DONE) rc = 0;
  else if (rc == 0) {
    switch (cmd) {
    case CMD_COMPILE: rc = compile_main(&o); break;
    case CMD_RUN: rc = run_main(&o); break;
    case CMD_BENCH: rc = bench_main(&o); break;
    case CMD_TRAIN: rc = train_main(&o); break;
    case CMD_QUANTIZE: rc = quantize_main(&o); break;
    }
  }
  opts_free(&o);
  return rc;
}
