/* driver.h — what the files of the `ncc` command share.
 *
 * The driver is the program around the compiler library (ncccore: frontend,
 * IR, passes, codegen) and the runtime (libnccrt).  Its files, by job:
 *   options.c  the one option table and parser; every --help
 *   compile.c  `ncc MODEL.net`: the front end, the passes, an emitter, files
 *   build.c    for run/bench: device choice, front end and passes, codegen
 *              into a temporary folder, the C/CUDA compiler, the object cache
 *   paths.c    where the runtime's headers and library, nvcc and the cache are
 *   load.c     dlopen of the built object, the generated API (docs/generated-code.md)
 *   init.c     initial parameters from the IR's parameter kinds (no --weights)
 *   run.c      `ncc run`: .npy inputs, one inference, .npy outputs
 *   bench.c    `ncc bench`: timing
 *   train.c    `ncc train`: .npy data, the training loop, checkpoints
 *   train_data.c  its sample order and loader thread (train_data.h)
 *   main.c     the command word, messages
 * Exit statuses everywhere: 0 success, 1 the user's error (after a message),
 * 2 ncc's own. */
#ifndef NCC_DRIVER_H
#define NCC_DRIVER_H

#include <stdint.h>

#include "../ir/ir.h"
#include "ncc_rt.h"
#include "options.h"
#include "../codegen/codegen.h"
#include "../frontend/frontend.h"

/* ---- messages (main.c): "ncc run: error: ..." on stderr ---- */
int drv_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));      /* returns 1 */
int drv_internal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));   /* returns 2 */
void drv_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));      /* always printed */
void drv_log(const Options *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));  /* with -v */
int drv_model_is_onnx(const char *path);   /* an ONNX model (its name, or its first byte)? */
const char *drv_command_line(void);   /* "ncc examples/lenet.net -o lenet.cu", shell-quoted */
const char *drv_cmd(void);            /* "run", "bench", or "" when compiling */
void drv_set_cmd(Command c);
/* `msg` about `path`, as "PATH: ..." exactly once: the runtime's messages
 * already start with the path; others get it prepended.  Returns buf. */
const char *with_path(char *buf, size_t n, const char *path, const char *msg);

/* ---- the initialisation plan (init.c) ---- */
typedef struct InitPlan InitPlan;

/* ---- a model built, loaded and created (build.c, load.c) ---- */
typedef struct Model {
  /* build.c */
  int gpu;                  /* runs on a GPU (nvcc or jit build), else emulation */
  int jit;                  /* host C by cc, kernels by NVRTC at create time */
  char devdesc[320];        /* "emu (2 threads)", "cuda (NVIDIA H100 ...)" */
  char tmpdir[256];         /* the generated source; removed at close */
  int keep_tmp;             /* an internal failure: keep the source for the report */
  const char *name;         /* the model's name, the generated symbols' prefix */
  Graph *g;                 /* after the passes; owns the strings below */
  Graph *gt;                /* the training step (ncc train, bench --train), or NULL */
  Graph *gsliced;           /* --max-memory: the inference graph for slices of the batch, emitted
                               instead of g (NULL: none); ws_limit and api_batch go with it */
  size_t ws_limit;
  int64_t api_batch;
  const char **live_inputs; /* graph inputs that inference reads (labels are not) */
  int nlive;
  InitPlan *init;           /* read from the graph before the passes */
  char so_path[4700];       /* the compiled object (in the cache, or in tmpdir) */
  /* load.c: the generated API, looked up by name */
  void *so;
  const ncc_model_info *(*info)(void);
  int (*create_on)(void **m, int kind);
  int (*load)(void *m, const char *path);
  int (*infer_io)(void *m, const void *const *in, void *const *out);
  int (*infer_io_batch)(void *m, int batch, const void *const *in, void *const *out);
  double (*kernel_seconds)(const void *m);   /* NULL: an object without M_kernel_seconds */
  const char *(*error)(const void *m);
  void (*destroy)(void *m);
  void *m;
  const ncc_model_info *inf;
} Model;

/* compile.c: the model's training step: the source elaborated again and the
 * training pipeline of o's -O level (autodiff first).  NULL after a message
 * when the model has no train block or a pass failed. */
Graph *train_graph_load(const Options *o);
/* --freeze: the bytes of o->weights (malloc'ed), checked against g's
 * parameters as the generated loader will check them (names, shapes,
 * dtypes; int8 with scales accepted); 0, or 1 after a message. */
int frozen_weights(const Options *o, Graph *g, unsigned char **bytes, size_t *n);
/* compile.c: the passes' context from the options (-O, --cublas, --precision,
 * -v, --print-after), for the inference (train 0) or the training pipelines. */
struct PassCtx drv_pass_ctx(const Options *o, int train, int verify);
/* budget.c: --max-memory.  Measures what codegen would allocate for g (with
 * co's options and training graph) and, when over o->max_memory, chooses
 * smaller cuBLAS workspaces (co->ws_limit) and then slices of the batch: a
 * graph compiled for fewer rows (*sliced, the caller's to free and to emit
 * instead of g; co->api_batch set).  note gets the line the report prints.
 * Returns 0, or 1 after a message (nothing fits: the smallest reachable). */
int budget_fit(const Options *o, Graph *g, CodegenOpts *co, Graph **sliced, char *note, size_t noten);
/* calibrate.c: int8 calibration (--precision=int8).  drv_calibrate runs it
 * (or reads --calibration-cache) once per process, before the model is built;
 * drv_quant is its table for the precision pass (NULL: none); drv_build_hook
 * lets the calibration's own builds add outputs to the graph (build.c calls
 * it after the front end).  0, or 1 after a message. */
int drv_calibrate(const Options *o);
const QuantTable *drv_quant(void);
/* The table drv_quant gives while t is set (--autotune's one-layer int8 builds: the layer's scales); returns
 * the one it replaces, to be set back */
const QuantTable *drv_quant_swap(const QuantTable *t);
void drv_build_hook(Graph *g);
/* build.c: compiles o->model into M->so_path.  Returns 0 or an exit status. */
int model_build(const Options *o, Model *M);
int drv_device_key(const Options *o, char *key, size_t n);   /* "emu", or the GPU's description */
int drv_cache_dir(char *out, size_t n);   /* the compile cache's folder, created; -1: none or not writable */
int drv_autotune(const Options *o);                           /* --autotune (autotune.c) */
const TuneTable *drv_tune(void);                              /* its choices; NULL: none */
void drv_random_inputs(const Options *o, const ncc_tensor_info *ts, int nt, void **data);   /* bench.c */
/* build.c's part of model_close: the temporary folder, the graph, the plan */
void build_release(Model *M);

/* paths.c: where the runtime is: headers (ncc_rt.h ...) and the folder of
 * the libnccrt this process runs with; malloc'ed, NULL when not found */
char *runtime_include_dir(void);
char *runtime_lib_dir(void);
const char *find_nvcc(void);           /* NULL when there is none */
/* "a/b/c" -> "a/b", "c" -> ".", "/c" -> "/"; malloc'ed */
char *path_dir(const char *path);

/* load.c */
int model_load(const Options *o, Model *M);      /* dlopen + the generated API */
int model_create(const Options *o, Model *M);    /* M_create_on the chosen device */
/* One inference of `batch` rows (1..M->inf->max_batch; the compiled batch for a model
 * whose batch_variable is 0). */
int model_infer(Model *M, int batch, void **in, void **out);
void model_close(Model *M);                      /* everything build/load/create made */
/* parameters: --weights, or init.c's initialisation */
int model_weights(const Options *o, Model *M);

/* onnx_weights.c: an ONNX model's initializers as safetensors.  _beside:
 * OUT with its extension replaced by .safetensors, the parameters of g, each
 * renamed as `ren` says (nren entries; --emit=net) (*written:
 * the path, malloc'ed; NULL for a model that is not ONNX).  _load: loads them
 * into M; -1 when the model is not ONNX. Both 0, or 1 after a message. */
int onnx_weights_beside(const Options *o, const Graph *g, const char *out, const NetRename *ren, int nren,
                        char **written);
int onnx_weights_load(const Options *o, Model *M);

/* init.c */
InitPlan *init_plan(const Graph *g);             /* before the passes rewrite consumers */
void init_plan_free(InitPlan *p);
/* Fills every parameter of M->inf as PyTorch initialises its layer, from
 * o->seed, and loads them through M_load.  Says so on stderr. */
int init_weights(const Options *o, Model *M);
/* splitmix64: the driver's one random generator */
uint64_t rng_next(uint64_t *s);
float rng_uniform(uint64_t *s, float lo, float hi);

/* tensors as the generated API describes them (load.c) */
int dt_size(int dt);
const char *dt_name(int dt);
char *tensor_str(char *buf, size_t n, int dt, int rank, const int64_t *shape);
int64_t numel(int rank, const int64_t *shape);
void **alloc_tensors(const ncc_tensor_info *t, int n);
void free_tensors(void **p, int n);

/* the commands */
int compile_main(const Options *o);   /* compile.c */
int run_main(const Options *o);       /* run.c */
int bench_main(const Options *o);     /* bench.c */
int train_main(const Options *o);     /* train.c */
int quantize_main(const Options *o);  /* quantize.c */

#endif
