/* options.h — the command line of every `ncc` command, as one table.
 *
 * Each flag is one row of the table in options.c: its spelling, the commands
 * that take it, the value it expects and one line of help.  The parser, each
 * command's `--help` and the hidden `ncc --list-options` (which the tests
 * compare with every help text) all read that table, so a flag cannot be
 * accepted without being documented, nor documented for a command that
 * refuses it.  Values land in one Options struct shared by all commands. */
#ifndef NCC_DRIVER_OPTIONS_H
#define NCC_DRIVER_OPTIONS_H

#include <stdio.h>

#include "../frontend/frontend.h"

/* The commands; a row of the table names the set that takes it. */
typedef enum {
  CMD_COMPILE = 1,   /* ncc MODEL.net ...      */
  CMD_RUN = 2,       /* ncc run MODEL.net ...  */
  CMD_BENCH = 4,     /* ncc bench MODEL.net ...*/
  CMD_TRAIN = 8,     /* ncc train MODEL.net ... */
  CMD_QUANTIZE = 16, /* ncc quantize W.safetensors -o WQ.safetensors */
} Command;
/* the commands that compile a model (quantize only rewrites a weight file) */
enum { CMD_ALL = CMD_COMPILE | CMD_RUN | CMD_BENCH | CMD_TRAIN };

const char *cmd_name(Command c);   /* "run"; "" for compile */

enum { MAX_IO = 64, MAX_SETS = 64 };

/* --input NAME=FILE / --output NAME=FILE; name NULL until the model's only
 * input/output fills it in */
typedef struct IoArg { const char *name, *path; int owned; } IoArg;

/* devices for --device; the values are libnccrt's NCC_DEV_* */
enum { DEVICE_AUTO = 0, DEVICE_CUDA = 1, DEVICE_EMU = 2 };

typedef struct Options {
  Command cmd;
  const char *model;
  /* compiling */
  const char *out, *emit, *arch;
  int jit;                      /* compile: host C for NVRTC; run/bench: build the model that way */
  int train;                    /* compile: the training step */
  /* every command */
  int opt_level;
  const char *passes, *print_after;
  int cublas, verbose;
  int precision;                /* PREC_* (ir/ir.h), --precision */
  double loss_scale;            /* --loss-scale: fp16 training's initial loss scale (0: 65536) */
  /* int8 (driver/calibrate.c) */
  const char *calibrate;        /* --calibrate=X.npy */
  const char *cal_cache;        /* --calibration-cache=FILE */
  char cal_method[16];          /* --calibration-method: minmax, percentile, entropy ("": entropy) */
  double percentile;            /* --percentile (0: 99.99) */
  double max_error;             /* --int8-max-error (0: 0.05) */
  int int8_fallback;            /* --int8-fallback: PREC_FP16 or PREC_BF16; 0 (PREC_FP32): fp32 */
  int gemm_tile;                /* --gemm-tile: 1 + its index in ir_mma_tiles; 0: the tile model's choice */
  int gemm_pipe;                /* --gemm-pipeline=on (the default) */
  int streams;                  /* --streams=on (the default): a second stream beside the longest chain */
  int gemm_stages;              /* --gemm-stages: the pipeline's cp.async stages, 2 (the default) to 4 */
  double autotune;              /* --autotune=SECONDS: the budget for trying tiles (0: none) */
  int quiet_init;               /* no flag: the autotuner's own builds do not announce their random weights */
  SetOpt sets[MAX_SETS];
  int nsets;
  /* running a model */
  const char *weights;
  int device, check;
  unsigned long long seed;
  int seed_given;
  IoArg in[MAX_IO], outs[MAX_IO];
  int nin, nout;
  int iters, warmup, compare;   /* bench */
  int profile;                  /* bench --profile: each kernel timed alone, beside the report's model */
  int freeze;                   /* --freeze: the weights inside the generated code */
  int64_t max_memory;           /* --max-memory: bytes the model may allocate (0: no budget; driver/budget.c) */
  int print_object;             /* run --print-object: build, print the object's path, run nothing */
  /* training */
  const char *data, *checkpoint, *log, *save_grads;
  long long epochs, steps;
  int no_shuffle, resume;
  int keep_last;                /* ncc train --keep-last: the last partial batch of an epoch is a step too */
} Options;

/* Parses argv[1..argc-1] (argv[0] is the program or the command word) for
 * `cmd`.  Returns 0 to go on, 1 after a message on stderr (exit status 1), or
 * OPTS_DONE after printing --help / --version / --list-options (exit 0). */
enum { OPTS_DONE = -1 };
int opts_parse(Command cmd, int argc, char **argv, Options *o);
void opts_free(Options *o);

/* The help of one command, generated from the table. */
void opts_help(Command cmd, FILE *f);
/* "COMMAND FLAG" per line for every flag each command takes (the hidden
 * `--list-options`; COMMAND is compile, run, bench or train). */
void opts_list(FILE *f);

/* The compile cache's directory ($NCC_CACHE_DIR, $XDG_CACHE_HOME/ncc or
 * ~/.cache/ncc), written into out; -1 when no variable names one.  Does not
 * create it.  In paths.c; declared here because the help text quotes it. */
int cache_dir_path(char *out, size_t n);

#endif
