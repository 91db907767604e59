/* fake_cuda.c — a stand-in libcuda.so.1 for testing the jit backend on a
 * machine without a GPU: one "device" of compute capability 9.0, host memory
 * as device memory, modules that must be real ELF cubins (as NVRTC makes
 * them) whose symbol names are looked up in the image, and launches that are
 * recorded rather than run, and CUDA graphs by stream capture (below), with
 * events and the rules by which a second stream joins a capture.  Only
 * test_jit loads it (LD_LIBRARY_PATH). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

/* what the test reads back (dlsym through RTLD_NOLOAD) */
char fake_last_kernel[256];
unsigned fake_last_grid[3], fake_last_block[3], fake_last_shmem;
void *fake_last_stream;           /* the stream of the last launch */
int fake_streams;                 /* streams alive */
int fake_last_arg_int;            /* the 4th argument's value, read as an int */
int fake_module_loads, fake_func_attr_sets;

typedef struct { char *img; size_t n; } module;
typedef struct { char name[256]; } function;

CUresult cuInit(unsigned f) { (void)f; return 0; }
/* NVRTC itself dlopens libcuda.so.1 and asks for the driver's private tables:
 * there are none here, which it takes as "no driver features" */
CUresult cuGetExportTable(const void **table, const void *id) {
  (void)id;
  *table = NULL;
  return 801;   /* CUDA_ERROR_NOT_SUPPORTED */
}
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int i) { *d = i; return i == 0 ? 0 : 101; }
CUresult cuDeviceGetName(char *s, int n, int d) { (void)d; strncpy(s, "Fake GPU", (size_t)n); return 0; }
CUresult cuDeviceGetAttribute(int *v, int a, int d) {
  (void)d;
  *v = a == 75 ? 9 : a == 76 ? 0 : a == 97 ? 232448 : 0;
  return 0;
}
CUresult cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = (void *)0x1; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return 0; }
CUresult cuCtxSetCurrent(void *c) { (void)c; return 0; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuModuleLoadData(void **m, const void *img) {
  const unsigned char *p = (const unsigned char *)img;
  module *mod;
  unsigned long long shoff;
  unsigned short shentsize, shnum;
  fake_module_loads++;
  if (memcmp(p, "\x7f" "ELF", 4) != 0) return 200;   /* CUDA_ERROR_INVALID_IMAGE */
  memcpy(&shoff, p + 0x28, 8);
  memcpy(&shentsize, p + 0x3a, 2);
  memcpy(&shnum, p + 0x3c, 2);
  mod = calloc(1, sizeof *mod);
  mod->n = (size_t)(shoff + (unsigned long long)shentsize * shnum);
  mod->img = malloc(mod->n);
  memcpy(mod->img, img, mod->n);
  *m = mod;
  return 0;
}
CUresult cuModuleUnload(void *m) {
  module *mod = (module *)m;
  free(mod->img);
  free(mod);
  return 0;
}
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
  module *mod = (module *)m;
  function *fn;
  if (!memmem(mod->img, mod->n, name, strlen(name) + 1)) return 500;   /* CUDA_ERROR_NOT_FOUND */
  fn = calloc(1, sizeof *fn);
  strncpy(fn->name, name, sizeof fn->name - 1);
  *f = fn;
  return 0;
}
CUresult cuFuncSetAttribute(void *f, int a, int v) { (void)f; (void)a; (void)v; fake_func_attr_sets++; return 0; }
static void capture_node(void *stream);
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, void *stream, void **args, void **extra) {
  (void)extra;
  capture_node(stream);
  fake_last_stream = stream;
  snprintf(fake_last_kernel, sizeof fake_last_kernel, "%s", ((function *)f)->name);
  fake_last_grid[0] = gx; fake_last_grid[1] = gy; fake_last_grid[2] = gz;
  fake_last_block[0] = bx; fake_last_block[1] = by; fake_last_block[2] = bz;
  fake_last_shmem = shmem;
  fake_last_arg_int = args && args[3] ? *(int *)args[3] : -1;
  return 0;
}
CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) { (void)flags; *p = malloc(n); return *p ? 0 : 2; }
CUresult cuMemFreeHost(void *p) { free(p); return 0; }
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { *p = (CUdeviceptr)(size_t)malloc(n); return *p ? 0 : 2; }
CUresult cuMemFree_v2(CUdeviceptr p) { free((void *)(size_t)p); return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)(size_t)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { memcpy(d, (void *)(size_t)s, n); return 0; }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { memcpy((void *)(size_t)d, (void *)(size_t)s, n); return 0; }
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { memset((void *)(size_t)d, v, n); return 0; }
/* streams: distinct handles, work done at once (so synchronising is a no-op) */
CUresult cuStreamCreate(void **st, unsigned flags) { (void)flags; *st = malloc(1); fake_streams++; return *st ? 0 : 2; }
CUresult cuStreamDestroy_v2(void *st) { free(st); fake_streams--; return 0; }
CUresult cuStreamSynchronize(void *st) { (void)st; return 0; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, void *st) { (void)st; return cuMemcpyHtoD_v2(d, s, n); }
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, void *st) { (void)st; return cuMemcpyDtoH_v2(d, s, n); }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void *st) { (void)st; return cuMemcpyDtoD_v2(d, s, n); }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *st) { (void)st; return cuMemsetD8_v2(d, v, n); }
CUresult cuGetErrorString(CUresult r, const char **s) {
  *s = r == 200 ? "device kernel image is invalid" : r == 500 ? "named symbol not found" : "fake error";
  return 0;
}

/* CUDA graphs by stream capture, modelling the rule a real driver enforces:
 * a kernel node whose arguments cuGraphExecKernelNodeSetParams replaces must
 * belong to the graph the instance was made from, and that graph must still
 * exist (a destroyed graph's nodes are invalid: CUDA_ERROR_INVALID_VALUE).
 * Launches during a capture become nodes; nothing runs. */
typedef struct fgraph { int alive; } fgraph;
typedef struct fnode { fgraph *g; } fnode;
typedef struct fexec { fgraph *g; } fexec;
typedef struct {   /* CUDA_KERNEL_NODE_PARAMS_v2 */
  void *func;
  unsigned gx, gy, gz, bx, by, bz, shmem;
  void **params, **extra;
  void *kern, *ctx;
} fparams;
static void *cap_stream;          /* the stream being captured, if any */
static fgraph *cap_graph;
static fnode *cap_last;
int fake_graph_launches, fake_node_sets, fake_last_set_arg_int = -1;
/* A second stream takes part in the capture once it waits for an event
 * recorded on a capturing stream; its work must be joined back (the origin
 * waiting for an event recorded after it) before the capture ends, else
 * CUDA_ERROR_STREAM_CAPTURE_UNJOINED.  A launch on a stream outside the
 * capture while one is under way runs at once, outside the graph: counted
 * (fake_eager_launches), since a step that does it replays without it. */
static void *cap_joined;          /* the second stream in the capture, if any */
static int cap_joined_work;       /* its launches since the origin last waited for it */
int fake_eager_launches, fake_events, fake_event_waits;
typedef struct fevent { void *stream; int captured, work; } fevent;

static int capturing(void *stream) { return cap_stream && (stream == cap_stream || stream == cap_joined); }
static void capture_node(void *stream) {
  if (!cap_stream) return;
  if (!capturing(stream)) {
    fake_eager_launches++;
    return;
  }
  if (stream == cap_joined) cap_joined_work++;
  cap_last = calloc(1, sizeof *cap_last);
  cap_last->g = cap_graph;
}
CUresult cuEventCreate(void **ev, unsigned flags) {
  (void)flags;
  *ev = calloc(1, sizeof(fevent));
  fake_events++;
  return *ev ? 0 : 2;
}
CUresult cuEventDestroy_v2(void *ev) { free(ev); fake_events--; return 0; }
CUresult cuEventRecord(void *ev, void *st) {
  fevent *e = (fevent *)ev;
  e->stream = st;
  e->captured = capturing(st);
  e->work = st == cap_joined ? cap_joined_work : 0;
  return 0;
}
CUresult cuStreamWaitEvent(void *st, void *ev, unsigned flags) {
  fevent *e = (fevent *)ev;
  (void)flags;
  fake_event_waits++;
  if (!cap_stream) return 0;
  if (e->captured && !capturing(st)) {   /* st joins the capture */
    if (cap_joined) return 900;
    cap_joined = st, cap_joined_work = 0;
  } else if (!e->captured && capturing(st)) {
    return 905;   /* CUDA_ERROR_STREAM_CAPTURE_ISOLATION: an event from outside the capture */
  }
  if (st == cap_stream && e->stream == cap_joined && e->work == cap_joined_work) cap_joined_work = -1;   /* joined */
  return 0;
}
CUresult cuStreamBeginCapture_v2(void *st, int mode) {
  (void)mode;
  if (cap_stream) return 900;   /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
  cap_stream = st;
  cap_graph = calloc(1, sizeof *cap_graph);
  cap_graph->alive = 1;
  cap_last = NULL;
  return 0;
}
CUresult cuStreamGetCaptureInfo_v3(void *st, int *status, unsigned long long *id, void **graph,
                                   const void **deps, const void **edges, size_t *n) {
  (void)id; (void)graph; (void)edges;
  *status = capturing(st) ? 1 : 0;
  *deps = (const void *)&cap_last;   /* one node: the last launch's */
  *n = cap_last ? 1 : 0;
  return 0;
}
CUresult cuStreamEndCapture(void *st, void **graph) {
  if (st != cap_stream) return 901;   /* CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */
  if (cap_joined && cap_joined_work > 0) return 904;   /* CUDA_ERROR_STREAM_CAPTURE_UNJOINED */
  *graph = cap_graph;
  cap_stream = NULL, cap_graph = NULL, cap_last = NULL, cap_joined = NULL;
  return 0;
}
CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
  fexec *e = calloc(1, sizeof *e);
  (void)flags;
  e->g = (fgraph *)graph;
  *exec = e;
  return 0;
}
CUresult cuGraphExecKernelNodeSetParams_v2(void *exec, void *node, const fparams *p) {
  fnode *nd = (fnode *)node;
  if (!nd || nd->g != ((fexec *)exec)->g || !nd->g->alive) return 1;   /* CUDA_ERROR_INVALID_VALUE */
  fake_node_sets++;
  fake_last_set_arg_int = p->params && p->params[3] ? *(int *)p->params[3] : -1;
  return 0;
}
CUresult cuGraphLaunch(void *exec, void *st) {
  (void)st;
  if (!((fexec *)exec)->g->alive) return 1;
  fake_graph_launches++;
  return 0;
}
CUresult cuGraphExecDestroy(void *exec) { free(exec); return 0; }
/* the graph is marked dead, not freed, so that a node handle kept past it is caught */
CUresult cuGraphDestroy(void *graph) { ((fgraph *)graph)->alive = 0; return 0; }
