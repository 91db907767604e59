/* options.c — the one option table of the `ncc` command, its parser and the
 * help texts made from it.
 *
 * Why one table: `ncc MODEL.net`, `ncc run`, `ncc bench` (and `ncc train`
 * when it lands) share most flags, and three hand-written parsers with three
 * hand-written usage texts had drifted apart (flags accepted but not listed,
 * listed but refused, parsed and dropped).  Here a flag is one row; the row
 * says which commands take it, and the parser, `--help` and the hidden
 * `--list-options` (what the tests check the help against) read the same
 * row.  A flag that belongs to another command is refused with the name of
 * the command that takes it.
 *
 * Spellings: `--flag VALUE` and `--flag=VALUE` both work for every value
 * flag; `-o FILE`; `-O0`..`-O3` with the level joined; `--` ends the flags.
 * Every message goes to stderr as "ncc[ CMD]: error: ..." with exit status 1;
 * nothing has been compiled or written by then. */
#include "options.h"
#include "../passes/passes.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
  O_HELP, O_VERSION, O_LIST_OPTIONS,
  O_OUT, O_EMIT, O_JIT, O_ARCH, O_TRAIN, O_FREEZE,
  O_OPT, O_PASSES, O_PRINT_AFTER, O_SET, O_CUBLAS, O_PRECISION, O_LOSS_SCALE, O_CALIBRATE, O_CAL_METHOD, O_PERCENTILE, O_CAL_CACHE, O_MAX_ERROR, O_FALLBACK, O_GEMM_TILE, O_GEMM_PIPE, O_GEMM_STAGES, O_STREAMS, O_AUTOTUNE,
  O_VERBOSE,
  O_MAX_MEMORY, O_WEIGHTS, O_DEVICE, O_CHECK, O_SEED, O_INPUT, O_OUTPUT,
  O_PRINT_OBJECT, O_ITERS, O_WARMUP, O_COMPARE, O_PROFILE,
  O_DATA, O_EPOCHS, O_STEPS, O_NO_SHUFFLE, O_KEEP_LAST, O_CHECKPOINT, O_RESUME, O_LOG, O_SAVE_GRADS,
} OptId;

enum {
  OF_HIDDEN = 1,   /* for tests and scripts; not in --help, not in --list-options */
  OF_LEVEL = 2,    /* -O0..-O3: the value is the digit joined to the name */
};

typedef struct OptSpec {
  OptId id;
  const char *name, *alias;   /* alias: a second spelling, or NULL */
  const char *arg;            /* the value's name in help; "=X" shows `--flag=X`; NULL: a switch */
  unsigned cmds;              /* Command bits */
  unsigned flags;
  const char *help;
} OptSpec;

#define RUNS (CMD_RUN | CMD_BENCH | CMD_TRAIN)

/* The table.  One flag may have two rows when its meaning differs between
 * commands (--jit); their command sets must not overlap.  Rows of CMD_TRAIN
 * are `ncc train`'s (--data, --epochs, ...). */
static const OptSpec opts[] = {
  {O_HELP, "--help", "-h", NULL, CMD_ALL | CMD_QUANTIZE, 0, "print this help and exit"},
  {O_VERSION, "--version", NULL, NULL, CMD_COMPILE, 0, "print ncc's version and exit"},
  {O_LIST_OPTIONS, "--list-options", NULL, NULL, CMD_COMPILE, OF_HIDDEN, "every command's flags, one per line"},

  /* compiling */
  {O_OUT, "-o", NULL, "FILE", CMD_COMPILE, 0,
   "output file: MODEL.cu (MODEL.h is written beside it), or the --emit text (default, or -o -: stdout)"},
  {O_OUT, "-o", NULL, "FILE", CMD_QUANTIZE, 0, "the weight-quantized safetensors file to write (atomically)"},
  {O_EMIT, "--emit", NULL, "=KIND", CMD_COMPILE, 0,
   "what to write: cu (default), ir, dot, report (per-kernel FLOPs, bytes, memory), params, ptx, "
   "net (the model as .net source; an ONNX model's weights beside -o FILE.net as FILE.safetensors)"},
  {O_JIT, "--jit", NULL, NULL, CMD_COMPILE, 0,
   "write host C (-o MODEL.c) whose kernels NVRTC compiles when the model is created"},
  {O_ARCH, "--arch", NULL, "=SM", CMD_COMPILE, 0,
   "GPU for --emit=report's modeled time and --emit=ptx: sm_80, sm_90 (default) or sm_80,sm_90"},
  {O_TRAIN, "--train", NULL, NULL, CMD_COMPILE | CMD_BENCH, 0,
   "the training step: --emit=report, ir, dot and ptx describe its graph (autodiff, then the -O level's training pipeline); -o MODEL.cu holds it whenever the model has a train block; `ncc bench --train` times it"},

  /* compile to a shared object, load it and run it */
  {O_FREEZE, "--freeze", NULL, NULL, CMD_COMPILE | CMD_RUN | CMD_BENCH, 0,
   "carry the --weights inside the generated code (int8 ones from `ncc quantize` too): create loads them, "
   "no weight file is needed at run time; the training step is left out"},
  {O_WEIGHTS, "--weights", NULL, "FILE", CMD_COMPILE, 0, "with --freeze: the safetensors file MODEL.cu carries; with --precision=int8 --calibrate: the weights to calibrate with"},
  {O_MAX_MEMORY, "--max-memory", NULL, "=BYTES", CMD_COMPILE | CMD_RUN | CMD_BENCH, 0,
   "a budget for the device memory the model allocates (M_info()->arena_bytes; K, M, G: 2^10, 2^20, 2^30 bytes): "
   "smaller cuBLAS workspaces, then the batch in slices; an error naming the smallest reachable when nothing fits"},
  {O_WEIGHTS, "--weights", NULL, "FILE", RUNS, 0,
   "parameters from a safetensors file (PyTorch state_dict names); without it, PyTorch's default init from --seed"},
  {O_INPUT, "--input", NULL, "NAME=X.npy", CMD_RUN, 0, "the model's input NAME (NAME= may be left out for a model's only input)"},
  {O_OUTPUT, "--output", NULL, "NAME=Y.npy", CMD_RUN, 0,
   "write output NAME (repeatable); without --output, a summary of every output is printed"},
  {O_PRINT_OBJECT, "--print-object", NULL, NULL, CMD_RUN, 0,
   "build the model (or find it in the compile cache), print `device:`, `model:` (the generated API's prefix) "
   "and `object:` (the shared object's path) lines and exit without running it: for bindings (docs/python.md)"},
  {O_DEVICE, "--device", NULL, "DEV", RUNS, 0, "auto (default: a GPU when one answers, else CPU emulation), cuda or emu"},
  {O_SEED, "--seed", NULL, "S", RUNS, 0,
   "seed of the initial weights (without --weights) and of bench's random inputs (default 0)"},
  {O_CHECK, "--check", NULL, NULL, CMD_RUN | CMD_BENCH, 0,
   "emulation in checked mode: guarded buffers, thread by thread; an out-of-bounds access is reported"},
  {O_JIT, "--jit", NULL, NULL, CMD_RUN | CMD_BENCH | CMD_TRAIN, 0,
   "on a GPU, build host C with cc and the kernels with NVRTC instead of nvcc"},
  {O_ITERS, "--iters", NULL, "K", CMD_BENCH, 0, "timed runs (default 10)"},
  {O_WARMUP, "--warmup", NULL, "W", CMD_BENCH, 0, "untimed runs first (default 2)"},
  {O_COMPARE, "--compare", NULL, NULL, CMD_BENCH, 0, "also time the model at -O0 and print the speed-up of the passes"},
  {O_PROFILE, "--profile", NULL, NULL, CMD_BENCH, 0,
   "then run --iters more with every kernel timed alone (the device synchronized around each launch, no CUDA "
   "graph) and print a row per kernel, slowest first: its time per run, its share, and the report's modeled "
   "time beside it (for the GPU that runs it, sm_90 under emulation; docs/gpu.md, \"Profiling\")"},

  /* training */
  {O_DATA, "--data", NULL, "DIR", CMD_TRAIN, 0, "x.npy and y.npy (training set), optional test_x.npy and test_y.npy"},
  {O_EPOCHS, "--epochs", NULL, "E", CMD_TRAIN, 0, "passes over the training set (default 1)"},
  {O_STEPS, "--steps", NULL, "K", CMD_TRAIN, 0, "stop after K optimizer steps in all (instead of --epochs; may end mid-epoch)"},
  {O_NO_SHUFFLE, "--no-shuffle", NULL, NULL, CMD_TRAIN, 0, "visit the samples in file order"},
  {O_KEEP_LAST, "--keep-last", NULL, NULL, CMD_TRAIN, 0,
   "train on the last, partial batch of every epoch too (DataLoader's drop_last=False): batch statistics, "
   "loss and gradients over its rows alone; by default it is dropped"},
  {O_CHECKPOINT, "--checkpoint", NULL, "FILE", CMD_TRAIN, 0,
   "safetensors checkpoint (parameters, optimizer state, step) written after every epoch and at the end"},
  {O_RESUME, "--resume", NULL, NULL, CMD_TRAIN, 0, "continue from --checkpoint, which must exist"},
  {O_LOG, "--log", NULL, "FILE.csv", CMD_TRAIN, 0, "one row per step: step,epoch,loss,lr (both counted from 1)"},
  {O_SAVE_GRADS, "--save-grads", NULL, "FILE", CMD_TRAIN, 0,
   "after the last step, write its gradients (safetensors, the parameters' names): for tests and debugging"},

  /* every command */
  {O_OPT, "-O", NULL, NULL, CMD_ALL, OF_LEVEL,
   "optimisation level (default -O2): -O0 only what inference needs; higher levels add the passes that fold "
   "and fuse (`-v` prints what each pass did)"},
  {O_PASSES, "--passes", NULL, "=LIST", CMD_ALL, 0, "run these passes (comma-separated) instead of -O's pipeline"},
  {O_PRINT_AFTER, "--print-after", NULL, "=PASS", CMD_ALL, 0, "print the IR to stderr after PASS (or `all`)"},
  {O_SET, "--set", NULL, "NAME=V", CMD_ALL, 0, "override `const NAME` of the model (repeatable), e.g. --set N=8"},
  {O_CUBLAS, "--cublas", NULL, NULL, CMD_ALL, 0,
   "convolutions and GEMMs through cuBLAS (a CPU BLAS under emulation) instead of ncc's tiled kernels"},
  {O_PRECISION, "--precision", NULL, "=P", CMD_ALL, 0,
   "fp32 (default), tf32, fp16 or bf16: conv2d, linear and matmul round their operands to that type and "
   "accumulate in fp32, values stored in fp32 (docs/precision.md); a training step rounds its gradients' GEMMs "
   "too, and at fp16 scales the loss dynamically (as torch.cuda.amp.GradScaler); int8 (inference, with "
   "--calibrate or --calibration-cache): conv2d, linear and matmul with int8 operands and int32 sums, per-channel "
   "weight scales, calibrated activation scales, per-layer fallback to fp32"},
  {O_GEMM_TILE, "--gemm-tile", NULL, "=BMxBN", CMD_ALL, 0,
   "every tensor-core GEMM (tf32, fp16, bf16, int8) takes this tile instead of the tile model's choice: "
   "16x32, 16x64, 32x32, 32x64, 64x32, 64x64, 128x64, 64x128 or 128x128 (docs/gpu.md, \"Tile choice\"; "
   "-v prints each GEMM's tile and why); at fp32 every tiled conv2d, linear and matmul takes 64x64, 64x128 or "
   "128x128 (\"The float32 GEMM's wide tile\")"},
  {O_GEMM_PIPE, "--gemm-pipeline", NULL, "=on|off", CMD_ALL, 0,
   "on (the default): tensor-core GEMMs stage the operands they can (fp16/bf16/int8 ones stored narrow, tf32 "
   "float32 ones, in 16-byte pieces) with cp.async in two stages and load their fragments with ldmatrix, and load "
   "the next K tile's other B elements into registers during the MMAs; the float32 GEMMs' wide tiles are "
   "double-buffered; off: each K tile loaded, then multiplied, as before (docs/gpu.md, \"Pipelined tiles\")"},
  {O_STREAMS, "--streams", NULL, "=on|off", CMD_ALL, 0,
   "on (the default): the kernels off the step's longest chain (a downsampling branch, a training step's weight "
   "gradients) run on a second stream, beside it, each waiting only for the kernels whose buffers it shares "
   "(-v: how many; docs/generated-code.md, \"Streams\"); off: one stream, in launch order"},
  {O_GEMM_STAGES, "--gemm-stages", NULL, "=2|3|4", CMD_ALL, 0,
   "with --gemm-pipeline=on at tf32, fp16, bf16 or int8: the shared-memory stages of the operands "
   "copied by cp.async, so that the copies of "
   "that many K tiles less one are in flight while a tile's MMAs run (default 2; a tile whose stages would pass "
   "40 KiB of shared memory takes fewer; the same bits at every count; docs/gpu.md, \"Pipelined tiles\"); at fp32 "
   "only 2: the 64x64 and 64x128 tiles double-buffered too, not the wide ones alone (\"The float32 GEMM "
   "double-buffered\")"},
  {O_AUTOTUNE, "--autotune", NULL, "=SECONDS", CMD_COMPILE | CMD_RUN | CMD_BENCH, 0,
   "GEMMs (tensor cores at tf32, fp16, bf16, int8; at fp32 the CUDA-core tiles and their stages): try each shape's "
   "candidate tiles on the device within SECONDS, "
   "check each gives the default tile's bits, and keep the fastest on a GPU (under emulation the tile model's "
   "choice); with --train the training step's forward GEMMs take them too; kept in the compile cache's "
   "autotune.txt (docs/gpu.md, \"Autotuning\")"},
  {O_LOSS_SCALE, "--loss-scale", NULL, "=S", CMD_COMPILE | CMD_BENCH | CMD_TRAIN, 0,
   "fp16 training: the initial loss scale (default 65536, GradScaler's; halved after an overflow, "
   "doubled after 2000 steps without one)"},
  {O_CALIBRATE, "--calibrate", NULL, "=X.npy", CMD_COMPILE | CMD_RUN | CMD_BENCH, 0,
   "int8: calibration data, float32 rows of the model's input (a few hundred), run through the model to choose "
   "each layer's activation scale and to measure each layer's int8 error"},
  {O_CAL_METHOD, "--calibration-method", NULL, "=M", CMD_COMPILE | CMD_RUN | CMD_BENCH, 0,
   "int8: how a scale is chosen from the calibration data: entropy (default; TensorRT's KL divergence), "
   "percentile (--percentile) or minmax"},
  {O_PERCENTILE, "--percentile", NULL, "=P", CMD_COMPILE | CMD_RUN | CMD_BENCH, 0,
   "int8, --calibration-method=percentile: the percentile of |x| that maps to 127 (default 99.99)"},
  {O_CAL_CACHE, "--calibration-cache", NULL, "=FILE", CMD_COMPILE | CMD_RUN | CMD_BENCH, 0,
   "int8: the calibration's scales and errors: read when FILE exists and is of this model, else written "
   "(atomically) after calibrating with --calibrate"},
  {O_FALLBACK, "--int8-fallback", NULL, "=P", CMD_COMPILE | CMD_RUN | CMD_BENCH, 0,
   "int8: the precision of a layer that falls back: fp32 (default), fp16 or bf16"},
  {O_MAX_ERROR, "--int8-max-error", NULL, "=E", CMD_COMPILE | CMD_RUN | CMD_BENCH, 0,
   "int8: a layer whose output error at int8 against fp32 on the calibration data, ||y8 - y|| / ||y||, "
   "exceeds E stays fp32 (default 0.05)"},
  {O_VERBOSE, "-v", "--verbose", NULL, CMD_ALL, 0, "say what ncc does: per-pass statistics, compiler command, timings"},
};
enum { NOPTS = sizeof opts / sizeof opts[0] };

const char *cmd_name(Command c) {
  switch (c) {
  case CMD_COMPILE: return "";
  case CMD_RUN: return "run";
  case CMD_BENCH: return "bench";
  case CMD_TRAIN: return "train";
  case CMD_QUANTIZE: return "quantize";
  }
  return "?";
}

static Command g_cmd = CMD_COMPILE;

static int oerr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int oerr(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ncc%s%s: error: ", g_cmd == CMD_COMPILE ? "" : " ", cmd_name(g_cmd));
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(`ncc%s%s --help` lists the flags)\n", g_cmd == CMD_COMPILE ? "" : " ", cmd_name(g_cmd));
  va_end(ap);
  return 1;
}

/* ---- help -------------------------------------------------------------- */

/* "--emit=KIND", "--weights FILE", "-h, --help", "-O0, -O1, -O2, -O3" */
static void spelling(const OptSpec *s, char *buf, size_t n) {
  if (s->flags & OF_LEVEL) { snprintf(buf, n, "%s0, %s1, %s2, %s3", s->name, s->name, s->name, s->name); return; }
  const char *a = s->arg ? s->arg : "";
  const char *sep = s->arg && s->arg[0] != '=' ? " " : "";
  if (s->alias && s->alias[1] != '-')      /* short alias first: "-h, --help" */
    snprintf(buf, n, "%s, %s%s%s", s->alias, s->name, sep, a);
  else if (s->alias)
    snprintf(buf, n, "%s, %s%s%s", s->name, s->alias, sep, a);
  else
    snprintf(buf, n, "%s%s%s", s->name, sep, a);
}

/* One row: the spelling in a 24-column margin, the help wrapped at 79. */
static void flag_row(FILE *f, const char *spell, const char *help) {
  enum { MARGIN = 25, WIDTH = 79 };
  int col = fprintf(f, "  %s", spell);
  if (col >= MARGIN) { fputc('\n', f); col = 0; }
  const char *p = help;
  while (*p) {
    size_t w = strcspn(p, " ");
    if (col > MARGIN && col + 1 + (int)w > WIDTH) { fputc('\n', f); col = 0; }
    if (col < MARGIN) { fprintf(f, "%*s", MARGIN - col, ""); col = MARGIN; }
    else { fputc(' ', f); col++; }
    col += fprintf(f, "%.*s", (int)w, p);
    p += w;
    while (*p == ' ') p++;
  }
  fputc('\n', f);
}

static void flag_rows(Command cmd, FILE *f) {
  for (int i = 0; i < NOPTS; i++) {
    const OptSpec *s = &opts[i];
    if (!(s->cmds & cmd) || (s->flags & OF_HIDDEN)) continue;
    char sp[64];
    spelling(s, sp, sizeof sp);
    flag_row(f, sp, s->help);
  }
}

static void cache_note(FILE *f) {
  char dir[4096];
  if (cache_dir_path(dir, sizeof dir) != 0) snprintf(dir, sizeof dir, "(none: set NCC_CACHE_DIR or HOME)");
  fprintf(f,
          "\ncompile cache: compiled models are kept in %s\n"
          "  ($NCC_CACHE_DIR, else $XDG_CACHE_HOME/ncc, else ~/.cache/ncc): one shared object per\n"
          "  model, shapes and flags (under emulation LeNet's is about 35 KB, ResNet-50's about\n"
          "  170 KB; GPU builds are larger), so a second run of the same model skips the\n"
          "  compiler.  Objects unused for 30 days are removed whenever a new one is written.\n"
          "  NCC_CACHE_DIR=DIR moves the cache; deleting the folder clears it at any time.\n",
          dir);
  fputs("environment: NCC_EMU_THREADS (emulator threads; default: the cores), NCC_CHECK=1\n"
        "  (like --check), NCC_FIBER_ORDER=reverse, CC (C compiler for emulation), NCC_NVCC or\n"
        "  CUDA_HOME (nvcc), NCC_CUDA_ARCH (nvcc's -arch, default native), NCC_RUNTIME_DIR (the\n"
        "  runtime's headers, when they are neither in include/ncc beside ncc's folder nor in\n"
        "  ../include/ncc).\n",
        f);
}

void opts_help(Command cmd, FILE *f) {
  switch (cmd) {
  case CMD_COMPILE:
    fputs("usage: ncc MODEL.net -o MODEL.cu                  CUDA C + MODEL.h (inference)\n"
          "       ncc MODEL.net --emit=ir|dot|report|params|cu|ptx|net [-o FILE]\n"
          "       ncc MODEL.net --jit -o MODEL.c            host C; NVRTC compiles the kernels at load time\n"
          "       ncc run   MODEL.net --input x=X.npy ...   compile, load and run on .npy inputs\n"
          "       ncc run   MODEL.net --print-object        build it into the compile cache, print the object's path\n"
          "       ncc bench MODEL.net                       time one inference batch\n"
          "       ncc train MODEL.net --data DIR            train (a model with a train block) on .npy data\n"
          "       ncc quantize W.safetensors -o WQ.safetensors   int8 weights with scales, a quarter the size\n"
          "`ncc run --help`, `ncc bench --help`, `ncc train --help` and `ncc quantize --help` list the flags of\n"
          "those commands.\n"
          "Exit status: 0 success; 1 a user error (bad model, file or flag); 2 an internal error.\n"
          "\nflags (compiling):\n",
          f);
    flag_rows(cmd, f);
    fputc('\n', f);
    passes_usage(f);
    return;
  case CMD_RUN:
    fputs("usage: ncc run MODEL.net [--weights W.safetensors] --input NAME=X.npy ...\n"
          "               [--output NAME=Y.npy ...] [flags]\n"
          "Compiles MODEL.net for the shapes --set gives, builds it for the device (cc -DNCC_EMU\n"
          "for CPU emulation; nvcc, or cc and NVRTC, on a GPU), loads it, runs one inference on\n"
          "the .npy inputs and writes the outputs.\n"
          "Without --weights, parameters are initialised as PyTorch initialises the same\n"
          "layers: conv2d/linear weights kaiming_uniform(a=sqrt(5)), i.e. uniform(-1/sqrt(fan_in),\n"
          "1/sqrt(fan_in)), and biases uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)); batchnorm and\n"
          "layernorm weight 1, bias 0, running mean 0, running var 1.  The values come from ncc's\n"
          "own generator seeded by --seed (not torch.manual_seed's): one seed, one set of weights.\n"
          "\nflags:\n",
          f);
    flag_rows(cmd, f);
    cache_note(f);
    return;
  case CMD_BENCH:
    fputs("usage: ncc bench MODEL.net [flags]\n"
          "Times one inference batch on random inputs (from --seed): --warmup untimed runs, then\n"
          "the median and minimum of --iters runs, and samples/s.  Parameters as `ncc run`\n"
          "initialises them, or --weights.  --train times one training step instead (forward,\n"
          "backward, update; learning rate 0, so every step does the same work).  Under CPU\n"
          "emulation, use --cublas: convolutions go to the CPU BLAS as GEMMs, 4 to 11 times\n"
          "faster than ncc's tiled kernels (ResNet-18, N=2, 64x64, on 2 cores), which are\n"
          "written for the GPU.\n"
          "\nflags:\n",
          f);
    flag_rows(cmd, f);
    cache_note(f);
    return;
  case CMD_TRAIN:
    fputs("usage: ncc train MODEL.net --data DIR [--epochs E | --steps K] [flags]\n"
          "Compiles MODEL.net with its training step (the model needs a `train { ... }` block),\n"
          "builds and loads it as `ncc run` does, and trains it on DIR/x.npy (float32, samples\n"
          "first, then the model input's shape without N) and DIR/y.npy (int32 or int64 labels in\n"
          "[0, classes); or float32 targets [samples, ...] when the model's second training input,\n"
          "the one only the loss reads, is float: a regression).  The batch is the model's N\n"
          "(--set N=64 changes it); an epoch is floor(samples / N) steps (the last partial batch\n"
          "is dropped), in a new order each epoch drawn from --seed and the epoch number (so that\n"
          "--resume draws what an unbroken run would), unless --no-shuffle.  With DIR/test_x.npy\n"
          "and test_y.npy, every epoch ends with `epoch E: train loss L, test loss T, test\n"
          "accuracy A%` (the model's first output must be the logits [N, classes]; with float\n"
          "targets, `test loss (mean squared error) T` of the first output; the last partial test\n"
          "batch is padded, its padding ignored).\n"
          "--steps K and --epochs E count from the start of the run, also with --resume (the same\n"
          "command line plus --resume finishes an interrupted run).\n"
          "Epochs and steps are counted from 1 in messages and --log.\n"
          "Without --weights, parameters are initialised as `ncc run` initialises them (--seed).\n"
          "A loss that is NaN or infinite stops the run (status 1) without writing the checkpoint.\n"
          "\nflags:\n",
          f);
    flag_rows(cmd, f);
    cache_note(f);
    return;
  case CMD_QUANTIZE:
    fputs("usage: ncc quantize W.safetensors -o WQ.safetensors\n"
          "Weights-only quantization: every floating tensor of rank 2 or more (conv2d and linear\n"
          "weights) becomes int8, symmetric per output channel (dimension 0): scale = max|w| / 127,\n"
          "q = w / scale rounded to nearest even, stored with a float32 NAME.__scale__ [rows] beside\n"
          "it; biases, batchnorm parameters and statistics stay as they are.  The file is about a\n"
          "quarter of the size.  Every model loads it where it loads the original (--weights, M_load),\n"
          "dequantizing at load: w = q * scale, in float32.  The output is written atomically.\n"
          "\nflags:\n",
          f);
    flag_rows(cmd, f);
    return;
  }
}

void opts_list(FILE *f) {
  static const Command cmds[] = {CMD_COMPILE, CMD_RUN, CMD_BENCH, CMD_TRAIN, CMD_QUANTIZE};
  for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++)
    for (int i = 0; i < NOPTS; i++) {
      const OptSpec *s = &opts[i];
      if (!(s->cmds & cmds[c]) || (s->flags & OF_HIDDEN)) continue;
      const char *cn = cmds[c] == CMD_COMPILE ? "compile" : cmd_name(cmds[c]);
      if (s->flags & OF_LEVEL) {
        for (int k = 0; k <= 3; k++) fprintf(f, "%s %s%d\n", cn, s->name, k);
        continue;
      }
      fprintf(f, "%s %s\n", cn, s->name);
      if (s->alias) fprintf(f, "%s %s\n", cn, s->alias);
    }
}

/* ---- parsing ----------------------------------------------------------- */

static int parse_int(const char *flag, const char *v, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi)
    return oerr("%s expects an integer in [%lld, %lld], got '%s'", flag, lo, hi, v);
  *out = x;
  return 0;
}

static int parse_io(const char *flag, const char *v, IoArg *kv) {
  const char *eq = strchr(v, '=');
  if (!eq) { kv->name = NULL; kv->path = v; kv->owned = 0; return 0; }
  if (eq == v || !eq[1]) return oerr("%s expects NAME=FILE.npy, got '%s'", flag, v);
  kv->name = strndup(v, (size_t)(eq - v));
  kv->owned = 1;
  kv->path = eq + 1;
  return 0;
}

/* Which commands take spec's flag, for "--emit is a flag of ...". */
static void commands_of(const char *name, char *buf, size_t n) {
  unsigned m = 0;
  for (int i = 0; i < NOPTS; i++)
    if (!strcmp(opts[i].name, name) || (opts[i].alias && !strcmp(opts[i].alias, name))) m |= opts[i].cmds;
  size_t k = 0;
  buf[0] = 0;
  static const Command order[] = {CMD_COMPILE, CMD_RUN, CMD_BENCH, CMD_TRAIN, CMD_QUANTIZE};
  for (size_t c = 0; c < sizeof order / sizeof order[0] && k < n; c++)
    if (m & order[c])
      k += (size_t)snprintf(buf + k, n - k, "%s`ncc %s`", k ? " and " : "",
                            order[c] == CMD_COMPILE ? "MODEL.net" : cmd_name(order[c]));
}

/* Edit distance, for "did you mean". */
static int distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 40 || lb > 40) return 99;
  int d[41][41];
  for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
  for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
  for (size_t i = 1; i <= la; i++)
    for (size_t j = 1; j <= lb; j++) {
      int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
      d[i][j] = c;
    }
  return d[la][lb];
}

static int unknown(Command cmd, const char *a) {
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)strcspn(a, "="), a);
  char where[256];
  commands_of(name, where, sizeof where);
  if (where[0]) return oerr("%s is a flag of %s, not of `ncc %s`", name, where, cmd == CMD_COMPILE ? "MODEL.net" : cmd_name(cmd));
  const char *best = NULL;
  int bd = 3;
  for (int i = 0; i < NOPTS; i++) {
    if (!(opts[i].cmds & cmd) || (opts[i].flags & (OF_HIDDEN | OF_LEVEL))) continue;
    int d = distance(name, opts[i].name);
    if (d < bd) { bd = d; best = opts[i].name; }
  }
  if (best) return oerr("unknown option '%s' (did you mean %s?)", a, best);
  return oerr("unknown option '%s'", a);
}

/* Finds the row for argument a (a flag of some command).  *val gets the
 * value of a value flag ("--x=V" or the next argument). */
static const OptSpec *match(Command cmd, int argc, char **argv, int *i, const char **val, int *err) {
  const char *a = argv[*i];
  *val = NULL;
  for (int k = 0; k < NOPTS; k++) {
    const OptSpec *s = &opts[k];
    if (!(s->cmds & cmd)) continue;
    size_t n = strlen(s->name);
    if (s->flags & OF_LEVEL) {
      if (strncmp(a, s->name, n) != 0 || !a[n]) continue;
      if (a[n] < '0' || a[n] > '3' || a[n + 1]) { *err = oerr("%s: expected -O0, -O1, -O2 or -O3", a); return s; }
      *val = a + n;
      return s;
    }
    int named = !strcmp(a, s->name) || (s->alias && !strcmp(a, s->alias));
    if (!s->arg) {
      if (named) return s;
      if (!strncmp(a, s->name, n) && a[n] == '=') { *err = oerr("%s takes no value ('%s')", s->name, a); return s; }
      continue;
    }
    if (named) {
      if (*i + 1 >= argc) { *err = oerr("%s expects %s", s->name, s->arg[0] == '=' ? s->arg + 1 : s->arg); return s; }
      *val = argv[++*i];
      return s;
    }
    if (!strncmp(a, s->name, n) && a[n] == '=' && s->name[1] == '-') { *val = a + n + 1; return s; }
  }
  return NULL;
}

static int apply(Options *o, const OptSpec *s, const char *v) {
  long long x = 0;
  switch (s->id) {
  case O_HELP:
    opts_help(o->cmd, stdout);
    return OPTS_DONE;
  case O_VERSION:
    printf("ncc %s\n", NCC_VERSION);
    return OPTS_DONE;
  case O_LIST_OPTIONS:
    opts_list(stdout);
    return OPTS_DONE;
  case O_OUT: o->out = v; return 0;
  case O_EMIT: {
    static const char *const kinds[] = {"ir", "dot", "report", "params", "cu", "ptx", "net"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
      if (!strcmp(v, kinds[k])) { o->emit = v; return 0; }
    return oerr("--emit=%s: expected one of ir, dot, report, params, cu, ptx, net", v);
  }
  case O_JIT: o->jit = 1; return 0;
  case O_ARCH:
    if (strcmp(v, "sm_80") && strcmp(v, "sm_90") && strcmp(v, "sm_80,sm_90") && strcmp(v, "sm_90,sm_80"))
      return oerr("--arch=%s: expected sm_80, sm_90 or sm_80,sm_90", v);
    o->arch = v;
    return 0;
  case O_TRAIN: o->train = 1; return 0;
  case O_OPT: o->opt_level = v[0] - '0'; return 0;
  case O_PASSES: o->passes = v; return 0;
  case O_PRINT_AFTER: o->print_after = v; return 0;
  case O_SET: {
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || !eq[1]) return oerr("--set expects NAME=VALUE, got '%s'", v);
    if (o->nsets == MAX_SETS) return oerr("too many --set flags (at most %d): '%s'", MAX_SETS, v);
    o->sets[o->nsets].name = strndup(v, (size_t)(eq - v));
    o->sets[o->nsets++].value = eq + 1;
    return 0;
  }
  case O_CUBLAS: o->cublas = 1; return 0;
  case O_PRECISION:
    if (ir_prec_lookup(v) >= 0) o->precision = ir_prec_lookup(v);
    else return oerr("--precision=%s: unknown precision (fp32, tf32, fp16, bf16 or int8)", v);
    return 0;
  case O_LOSS_SCALE: {
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !(d > 0.0) || !(d <= 3.4e38))
      return oerr("--loss-scale=%s: expected a positive number (e.g. 65536)", v);
    o->loss_scale = d;
    return 0;
  }
  case O_CALIBRATE: o->calibrate = v; return 0;
  case O_CAL_CACHE: o->cal_cache = v; return 0;
  case O_CAL_METHOD:
    if (strcmp(v, "minmax") && strcmp(v, "percentile") && strcmp(v, "entropy"))
      return oerr("--calibration-method=%s: expected minmax, percentile or entropy", v);
    snprintf(o->cal_method, sizeof o->cal_method, "%s", v);
    return 0;
  case O_AUTOTUNE: {
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !(d > 0) || d > 86400)
      return oerr("--autotune=%s: expected a time budget in seconds, more than 0 and at most 86400", v);
    o->autotune = d;
    return 0;
  }
  case O_GEMM_TILE:
    o->gemm_tile = 1 + ir_tile_lookup(v);
    if (!o->gemm_tile)
      return oerr("--gemm-tile=%s: expected one of 16x32, 16x64, 32x32, 32x64, 64x32, 64x64, 128x64, 64x128, 128x128", v);
    return 0;
  case O_GEMM_PIPE:
    if (strcmp(v, "on") && strcmp(v, "off")) return oerr("--gemm-pipeline=%s: expected on or off", v);
    o->gemm_pipe = !strcmp(v, "on");
    return 0;
  case O_STREAMS:
    if (strcmp(v, "on") && strcmp(v, "off")) return oerr("--streams=%s: expected on or off", v);
    o->streams = !strcmp(v, "on");
    return 0;
  case O_GEMM_STAGES:
    if (strcmp(v, "2") && strcmp(v, "3") && strcmp(v, "4")) return oerr("--gemm-stages=%s: expected 2, 3 or 4", v);
    o->gemm_stages = v[0] - '0';
    return 0;
  case O_FALLBACK:
    if (strcmp(v, "fp32") && strcmp(v, "fp16") && strcmp(v, "bf16"))
      return oerr("--int8-fallback=%s: expected fp32, fp16 or bf16", v);
    o->int8_fallback = ir_prec_lookup(v);
    return 0;
  case O_PERCENTILE:
  case O_MAX_ERROR: {
    char *end;
    double d = strtod(v, &end);
    int pct = s->id == O_PERCENTILE;
    if (end == v || *end || !(d > 0.0) || (pct ? !(d <= 100.0) : !(d <= 1e30)))
      return oerr(pct ? "--percentile=%s: expected a number in (0, 100], e.g. 99.99"
                      : "--int8-max-error=%s: expected a positive number, e.g. 0.05", v);
    if (pct) o->percentile = d;
    else o->max_error = d;
    return 0;
  }
  case O_VERBOSE: o->verbose = 1; return 0;
  case O_WEIGHTS: o->weights = v; return 0;
  case O_FREEZE: o->freeze = 1; return 0;
  case O_MAX_MEMORY: {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    int shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10, end++;
    else if (*end == 'M' || *end == 'm') shift = 20, end++;
    else if (*end == 'G' || *end == 'g') shift = 30, end++;
    if (end == v || !(v[0] >= '0' && v[0] <= '9') || *end || errno || n == 0 || n > (ULLONG_MAX >> 1 >> shift))
      return oerr("--max-memory=%s: expected a positive number of bytes, optionally with K, M or G (e.g. 64M)", v);
    o->max_memory = (int64_t)(n << shift);
    return 0;
  }
  case O_DEVICE:
    if (!strcmp(v, "auto")) o->device = DEVICE_AUTO;
    else if (!strcmp(v, "cuda")) o->device = DEVICE_CUDA;
    else if (!strcmp(v, "emu")) o->device = DEVICE_EMU;
    else return oerr("--device expects auto, cuda or emu, got '%s'", v);
    return 0;
  case O_CHECK: o->check = 1; return 0;
  case O_SEED:
    if (parse_int("--seed", v, 0, INT64_MAX, &x)) return 1;
    o->seed = (unsigned long long)x;
    o->seed_given = 1;
    return 0;
  case O_INPUT:
    if (o->nin == MAX_IO) return oerr("too many --input flags (at most %d)", MAX_IO);
    return parse_io("--input", v, &o->in[o->nin++]);
  case O_OUTPUT:
    if (o->nout == MAX_IO) return oerr("too many --output flags (at most %d)", MAX_IO);
    return parse_io("--output", v, &o->outs[o->nout++]);
  case O_ITERS:
    if (parse_int("--iters", v, 1, 1000000, &x)) return 1;
    o->iters = (int)x;
    return 0;
  case O_WARMUP:
    if (parse_int("--warmup", v, 0, 1000000, &x)) return 1;
    o->warmup = (int)x;
    return 0;
  case O_PRINT_OBJECT: o->print_object = 1; return 0;
  case O_COMPARE: o->compare = 1; return 0;
  case O_PROFILE: o->profile = 1; return 0;
  case O_DATA: o->data = v; return 0;
  case O_EPOCHS: return parse_int("--epochs", v, 1, 1000000000, &o->epochs);
  case O_STEPS: return parse_int("--steps", v, 1, INT64_MAX, &o->steps);
  case O_NO_SHUFFLE: o->no_shuffle = 1; return 0;
  case O_KEEP_LAST: o->keep_last = 1; return 0;
  case O_CHECKPOINT: o->checkpoint = v; return 0;
  case O_RESUME: o->resume = 1; return 0;
  case O_LOG: o->log = v; return 0;
  case O_SAVE_GRADS: o->save_grads = v; return 0;
  }
  return oerr("internal: option row %d has no handler", (int)s->id);
}

/* What no single flag can check: combinations, and what the command needs. */
static int check(Options *o) {
  if (o->out && !strcmp(o->out, "-")) {   /* standard output: for the one-file listings */
    if (o->cmd != CMD_COMPILE || !o->emit || !strcmp(o->emit, "cu"))
      return oerr("-o -: %s writes %s; give a file name", o->cmd == CMD_QUANTIZE ? "ncc quantize" : "the compile",
                  o->cmd == CMD_QUANTIZE ? "a safetensors file" : "MODEL.cu and MODEL.h beside it");
    o->out = NULL;   /* --emit=ir|dot|report|params|ptx|net print to standard output without -o */
  }
  if (o->cmd == CMD_QUANTIZE) {
    if (!o->model) return oerr("no weight file given (ncc quantize W.safetensors -o WQ.safetensors)");
    if (!o->out) return oerr("no output file: use -o WQ.safetensors");
    if (!strcmp(o->out, o->model)) return oerr("-o %s is the input file: write the quantized weights elsewhere", o->out);
    return 0;
  }
  if (!o->model) return oerr("no model file given");
  if (o->cmd == CMD_COMPILE) {
    if (!o->emit) o->emit = "cu";
    if (o->jit && strcmp(o->emit, "cu")) return oerr("--jit goes with the default --emit=cu, not --emit=%s", o->emit);
    if (!strcmp(o->emit, "net") && (o->train || o->passes || o->print_after || o->max_memory || o->freeze))
      return oerr("--emit=net writes the model as written; it does not go with %s",
                  o->train ? "--train (the train block is part of the .net)" : o->passes ? "--passes"
                  : o->print_after ? "--print-after" : o->max_memory ? "--max-memory" : "--freeze");
    if (!strcmp(o->emit, "cu") && !o->out)
      return oerr("no output file: use -o MODEL.cu (or --emit=ir|dot|report to inspect)");
  }
  if (o->cmd == CMD_TRAIN) {
    if (!o->data) return oerr("no training data: use --data DIR (x.npy, y.npy, optional test_x.npy, test_y.npy)");
    if (o->epochs && o->steps) return oerr("--epochs and --steps: give one of them");
    if (o->resume && !o->checkpoint) return oerr("--resume needs --checkpoint FILE (the checkpoint to resume)");
    if (o->resume && o->weights)
      return oerr("--resume and --weights: the checkpoint holds the parameters; give one of them");
  }
  if (o->loss_scale > 0.0 && !(o->precision == PREC_FP16 && (o->cmd == CMD_TRAIN || o->train)))
    return oerr("--loss-scale goes with fp16 training (--precision=fp16 with ncc train, or --train): "
                "only fp16 gradients need the loss scaled");
  if (o->autotune > 0 && (o->cublas || o->gemm_tile))
    return oerr("--autotune tries the tiles of ncc's GEMMs (tensor cores at --precision=tf32, fp16, bf16 or int8; at "
                "fp32 the tiles and stages of the CUDA-core ones); it does not go with %s",
                o->cublas ? "--cublas" : "--gemm-tile (a tile forced)");
  if (o->gemm_stages && (!o->gemm_pipe || (o->precision == PREC_FP32 && o->gemm_stages != 2) || o->cublas))
    return oerr("--gemm-stages=%d: the stages of the cp.async copies of tf32, fp16, bf16 and int8 tensor-core GEMMs "
                "(at fp32: 2, every float32 tile that reads four floats a load double-buffered); it does not go with "
                "%s", o->gemm_stages, !o->gemm_pipe ? "--gemm-pipeline=off (no copies staged)"
                : o->cublas ? "--cublas" : "fp32 (no tensor cores; --precision=tf32, fp16, bf16 or int8)");
  if (o->gemm_tile && o->cublas)
    return oerr("--gemm-tile picks the tile of ncc's own GEMMs: it does not go with --cublas");
  if (o->gemm_tile && o->precision == PREC_FP32 && o->gemm_tile - 1 != IR_TILE_64x64 &&
      o->gemm_tile - 1 != IR_TILE_64x128 && o->gemm_tile - 1 != IR_TILE_128x128)
    return oerr("--gemm-tile=%dx%d: at fp32 the tiled GEMMs (CUDA cores) take 64x64 (the default), 64x128 or 128x128; "
                "the other tiles are the tensor cores' (--precision=tf32, fp16, bf16 or int8)",
                ir_mma_tiles[o->gemm_tile - 1].BM, ir_mma_tiles[o->gemm_tile - 1].BN);
  if (o->precision == PREC_INT8) {
    if (o->cmd == CMD_TRAIN || o->train)
      return oerr("--precision=int8 is for inference; training runs at fp32, bf16 or fp16 (then compile the "
                  "trained weights at int8)");
    if (!o->calibrate && !o->cal_cache)
      return oerr("--precision=int8 needs calibration: --calibrate=X.npy (a few hundred float32 rows of the "
                  "model's input), or --calibration-cache=FILE written by an earlier calibration");
    if (o->cublas) return oerr("--precision=int8 runs ncc's own int8 kernels; it does not go with --cublas");
    if (o->cmd == CMD_COMPILE && o->calibrate && !o->weights)
      return oerr("--calibrate runs the model: give the weights to calibrate with (--weights FILE)");
  } else if (o->calibrate || o->cal_cache || o->cal_method[0] || o->percentile > 0 || o->max_error > 0 ||
             o->int8_fallback) {
    return oerr("%s goes with --precision=int8", o->calibrate ? "--calibrate" : o->cal_cache ? "--calibration-cache"
                : o->cal_method[0] ? "--calibration-method" : o->percentile > 0 ? "--percentile"
                : o->max_error > 0 ? "--int8-max-error" : "--int8-fallback");
  }
  if (o->percentile > 0 && strcmp(o->cal_method, "percentile"))
    return oerr("--percentile goes with --calibration-method=percentile");
  if (o->freeze && !o->weights) return oerr("--freeze needs --weights FILE: the weights to carry");
  if (o->freeze && o->train) return oerr("--freeze leaves the training step out; it does not go with --train");
  if (o->cmd == CMD_COMPILE && o->weights && !o->freeze && !(o->precision == PREC_INT8 && o->calibrate))
    return oerr("--weights when compiling goes with --freeze (the weights MODEL.cu carries); "
                "without it, load them at run time (M_load, or `ncc run --weights`)");
  if (o->print_object && (o->nin || o->nout))
    return oerr("--print-object builds the model and runs nothing: --%s does not go with it", o->nin ? "input" : "output");
  if (o->cmd == CMD_RUN || o->cmd == CMD_BENCH || o->cmd == CMD_TRAIN) {
    if (o->jit && o->device == DEVICE_EMU)
      return oerr("--jit compiles kernels for a GPU with NVRTC; it does not go with --device emu");
  }
  return 0;
}

int opts_parse(Command cmd, int argc, char **argv, Options *o) {
  memset(o, 0, sizeof *o);
  o->cmd = cmd;
  g_cmd = cmd;
  o->opt_level = 2;
  o->iters = 10;
  o->warmup = 2;
  o->device = DEVICE_AUTO;
  o->gemm_pipe = 1;   /* o->gemm_stages 0: not given (two stages) */
  o->streams = 1;
  int flags_end = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!flags_end && !strcmp(a, "--")) { flags_end = 1; continue; }
    if (!flags_end && a[0] == '-' && a[1]) {
      const char *v;
      int err = 0;
      const OptSpec *s = match(cmd, argc, argv, &i, &v, &err);
      if (err) return err;
      if (!s) return unknown(cmd, a);
      int rc = apply(o, s, v);
      if (rc) return rc;
      continue;
    }
    if (o->model) return oerr("more than one model file given ('%s' and '%s')", o->model, a);
    o->model = a;
  }
  return check(o);
}

void opts_free(Options *o) {
  /* names were strndup'ed; an unnamed --input/--output borrows the model's */
  for (int i = 0; i < o->nin; i++) if (o->in[i].owned) free((void *)o->in[i].name);
  for (int i = 0; i < o->nout; i++) if (o->outs[i].owned) free((void *)o->outs[i].name);
  for (int i = 0; i < o->nsets; i++) free((void *)o->sets[i].name);
  o->nin = o->nout = o->nsets = 0;
}
