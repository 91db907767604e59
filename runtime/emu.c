/* emu.c — runs generated kernels on the CPU (the emulator behind ncc_emu.h).
 *
 * A launch is a grid of blocks; blocks are handed out one at a time (an atomic
 * counter) to a persistent pool of OS threads, the caller included.  A block
 * runs on one OS thread, start to end, so that `__shared__` (static
 * _Thread_local) storage is exactly block-shared.
 *   - Barrier-free kernels: the generated fn_block loops over the threads with the
 *     body inlined (2 ns/element territory, docs/emulator.md).
 *   - Kernels flagged NCC_KF_BARRIER: one user-level fiber per thread.  Fibers
 *     are switched by hand-written x86-64 assembly (swapcontext costs a syscall
 *     per switch: 19x slower), chained round-robin: at __syncthreads() a fiber
 *     passes control straight to the next one; the last one returns to the
 *     block's scheduler, which starts the next phase.  Each fiber counts its
 *     barriers; a block whose fibers end in different phases (a `return`
 *     before a barrier) is reported as an error, not run on silently.
 *     NCC_FIBER_ORDER=reverse runs every phase last-thread-first, so that a
 *     missing barrier shows up as a wrong result in one of the two orders.
 *   - Checked mode: buffers have guard pages (ncc_emu_guarded_alloc); barrier-free
 *     kernels then run thread by thread through fn_thread, so that threadIdx in
 *     memory is always the faulting thread's, and a SIGSEGV handler on an
 *     alternate stack names buffer, kernel, block and thread, then _exit(2).
 *     Dynamic shared memory is filled with 0xff bytes before every block.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "ncc_emu.h"
#include "rt_internal.h"

/* x86-64 switches fibers with its own assembly; elsewhere (or with
 * NCC_EMU_UCONTEXT, which the tests use to keep this path honest) the portable
 * but slower ucontext functions do it. */
#if defined(__x86_64__) && !defined(NCC_EMU_UCONTEXT)
#define NCC_FIBER_ASM 1
typedef void *fiber_ctx;
#else
#include <ucontext.h>
typedef ucontext_t fiber_ctx;
#endif

/* ThreadSanitizer and fibers.  All fibers of a worker run on its one OS thread,
 * one at a time, so by default ThreadSanitizer is told nothing: it sees them as
 * that thread (correctly ordered: no race between them is real), and checks
 * what matters here, the accesses of different OS threads (blocks on the pool,
 * application threads driving distinct instances).  Only its reports' stacks
 * may then mix frames of several fibers.  With -DNCC_EMU_TSAN_FIBERS every
 * fiber and every switch is announced through its fiber API (exact stacks);
 * each fiber is then a thread of its own to ThreadSanitizer, every switch
 * synchronises (flags 0, as a barrier does) at a cost that grows with the
 * number of fibers alive: some 100x slower with 16 launching threads. */
#if defined(__SANITIZE_THREAD__)
#define NCC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NCC_TSAN 1
#endif
#endif
#if !defined(NCC_EMU_TSAN_FIBERS)
#undef NCC_TSAN
#endif
#ifdef NCC_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#define TSAN_SWITCH(tf) __tsan_switch_to_fiber((tf), 0)
#else
#define TSAN_SWITCH(tf) ((void)0)
#endif
/* AddressSanitizer poisons a frame's redzones on entry and clears them on
 * return; a fiber abandoned mid-kernel (a deadlocked launch) never returns,
 * so its restarted stack is unpoisoned, or the next kernel to run there would
 * trip over the old frames' redzones */
#if defined(__SANITIZE_ADDRESS__)
#define NCC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NCC_ASAN 1
#endif
#endif
#ifdef NCC_ASAN
#include <sanitizer/asan_interface.h>
#define ASAN_STACK_CLEAN(f) ASAN_UNPOISON_MEMORY_REGION((f)->map + pagesz(), (f)->maplen - (size_t)pagesz())
#else
#define ASAN_STACK_CLEAN(f) ((void)0)
#endif

_Thread_local uint3 threadIdx NCC_EMU_TLS;
_Thread_local uint3 blockIdx NCC_EMU_TLS;
_Thread_local dim3 blockDim NCC_EMU_TLS;
_Thread_local dim3 gridDim NCC_EMU_TLS;
_Thread_local void *ncc_emu_shared_dyn NCC_EMU_TLS;

void ncc_errf(char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  if (!err || !n) return;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

/* ---------------------------------------------------------------- context switch */
/* ncc_fiber_switch(save, to): pushes the callee-saved registers, stores rsp in
 * *save, loads `to` and pops the other side's registers.  A fresh fiber's stack is
 * laid out so that the first switch "returns" into ncc_fiber_entry with the
 * function in r13 and its argument in r12.  Top-level asm must sit in its own
 * section push/pop (docs/emulator.md, pitfall 7). */
#ifdef NCC_FIBER_ASM
void ncc_fiber_switch(void **save, void *to);
void ncc_fiber_entry(void);
#define CTX_SWITCH(from, to) ncc_fiber_switch((from), *(to))
__asm__(".pushsection .text\n"
        ".globl ncc_fiber_switch\n"
        ".hidden ncc_fiber_switch\n"
        ".type ncc_fiber_switch,@function\n"
        "ncc_fiber_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size ncc_fiber_switch, .-ncc_fiber_switch\n"
        ".globl ncc_fiber_entry\n"
        ".hidden ncc_fiber_entry\n"
        ".type ncc_fiber_entry,@function\n"
        "ncc_fiber_entry:\n"
        "  movq %r12, %rdi\n"
        "  callq *%r13\n"
        "  ud2\n"
        ".size ncc_fiber_entry, .-ncc_fiber_entry\n"
        ".popsection\n");
#else
#define CTX_SWITCH(from, to) swapcontext((from), (to))
#endif

enum { FIBER_STACK = 16 * 1024, ALT_STACK = 64 * 1024 };

/* one cp.async copy: the source's bytes (read at issue), where they land, the group */
struct cpa {
  unsigned char data[16];
  void *dst;
  int n, group;   /* group -1: not committed yet */
};

typedef struct fiber {
  fiber_ctx ctx;
  char *map;            /* guard page + stack */
  size_t maplen;
  unsigned tx, ty, tz;
  int nbar;             /* barriers passed in this block */
  int done;             /* finished this block's thread */
  int wait;             /* W_RUN, or where it waits: W_BAR (__syncthreads), W_WARP (a warp collective) */
  int wop;              /* the collective (NCC_EMU_SHFL_IDX...), its mask, operands and result */
  unsigned wmask;
  int wb, wwidth;
  unsigned long long wval, wres;
  struct cpa *cp;       /* its cp.async copies not landed yet, in issue order (ncc_emu_cp_async) */
  int ncp, capcp;
  int cpgroups;         /* groups committed in this block (cp.async.commit_group) */
  int fresh;            /* stack must be (re)initialised before the next switch */
  int colour;           /* cache colour of the stack top */
  struct worker *w;
  void *tsan;           /* ThreadSanitizer's handle of this fiber (NCC_TSAN) */
} fiber;

enum { MODE_IDLE, MODE_BLOCK, MODE_FIBER, MODE_THREAD };
enum { W_RUN, W_BAR, W_WARP };

typedef struct worker {
  fiber **fib;
  int nfib;
  fiber_ctx sched;
  int cur, dir, nthreads;
  int *run, nrun, runpos, caprun;   /* this round's runnable fibers, in run order */
  int mode;
  const ncc_kernel *k;
  void **args;
  char *dyn;
  size_t dyncap;
  int misuse;           /* 1: __syncthreads() outside a barrier kernel; 2: a warp collective outside a warp
                           kernel; 4: a vector load from an address its size does not divide; 8: ldmatrix or
                           cp.async at an address its size does not divide; 16: a thread exits with cp.async
                           copies it did not wait for (checked mode) */
  void *altstack;
  int own_altstack;     /* altstack is ours to free (not the thread's own) */
  void *tsan_sched;     /* ThreadSanitizer's handle of the OS thread's own stack */
} worker;

static _Thread_local worker *tw NCC_EMU_TLS;

/* ---------------------------------------------------------------- settings */
static int g_checked = -1;         /* -1: read NCC_CHECK on first use */
static int g_reverse = -1;         /* -1: read NCC_FIBER_ORDER */
static long g_pagesz;

void ncc_emu_set_checked(int on) { __atomic_store_n(&g_checked, on ? 1 : 0, __ATOMIC_SEQ_CST); }
int ncc_emu_checked(void) {
  int c = __atomic_load_n(&g_checked, __ATOMIC_SEQ_CST);
  if (c < 0) {
    const char *e = getenv("NCC_CHECK");
    c = e && *e && strcmp(e, "0") != 0;
    __atomic_store_n(&g_checked, c, __ATOMIC_SEQ_CST);
  }
  return c;
}
void ncc_emu_set_fiber_order(int reverse) { __atomic_store_n(&g_reverse, reverse ? 1 : 0, __ATOMIC_SEQ_CST); }
static int fiber_reverse(void) {
  int r = __atomic_load_n(&g_reverse, __ATOMIC_SEQ_CST);
  if (r < 0) {
    const char *e = getenv("NCC_FIBER_ORDER");
    r = e && strcmp(e, "reverse") == 0;
    __atomic_store_n(&g_reverse, r, __ATOMIC_SEQ_CST);
  }
  return r;
}
/* racing first calls store the same value: relaxed atomics make that defined */
static long pagesz(void) {
  long p = __atomic_load_n(&g_pagesz, __ATOMIC_RELAXED);
  if (!p) {
    p = sysconf(_SC_PAGESIZE);
    __atomic_store_n(&g_pagesz, p, __ATOMIC_RELAXED);
  }
  return p;
}

/* ---------------------------------------------------------------- checked mode */
static ncc_guarded *volatile g_guarded;      /* read by the signal handler */
static pthread_mutex_t g_guard_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_handler_installed;

static void ensure_altstack(worker *w) {
  stack_t ss, old;
  if (w->altstack) return;
  /* a thread that has one already (a sanitizer's, the application's) keeps it:
   * replacing it would make its owner free our memory at thread exit */
  if (sigaltstack(NULL, &old) == 0 && !(old.ss_flags & SS_DISABLE) && old.ss_size >= 16384) {
    w->altstack = old.ss_sp;
    return;
  }
  w->altstack = malloc(ALT_STACK);
  if (!w->altstack) return;
  w->own_altstack = 1;
  memset(&ss, 0, sizeof ss);
  ss.ss_sp = w->altstack;
  ss.ss_size = ALT_STACK;
  sigaltstack(&ss, NULL);
}

static void segv_report(int sig, siginfo_t *si, void *uc) {
  char msg[768], where[256];
  const char *a = (const char *)si->si_addr;
  worker *w = tw;
  ncc_guarded *g;
  int i, len = -1;
  (void)uc;
  if (w && w->k && w->mode != MODE_IDLE)
    snprintf(where, sizeof where, "kernel %s, block (%u,%u,%u), thread (%u,%u,%u)", w->k->name,
             blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
  else
    snprintf(where, sizeof where, "host code (not in a kernel)");
  for (g = g_guarded; g && len < 0; g = g->gnext)
    for (i = 0; i < g->n; i++) {
      struct gbuf *b = &g->b[i];
      if (a >= b->start + b->size && a < b->map + b->maplen) {
        len = snprintf(msg, sizeof msg,
                       "ncc: checked mode: out-of-bounds access at %p (%zu bytes past buffer #%d of %zu bytes) in %s\n",
                       (const void *)a, (size_t)(a - (b->start + b->size)), i, b->size, where);
        break;
      }
      if (a >= b->map && a < b->start) {
        len = snprintf(msg, sizeof msg,
                       "ncc: checked mode: out-of-bounds access at %p (%zu bytes before buffer #%d of %zu bytes) in %s\n",
                       (const void *)a, (size_t)(b->start - a), i, b->size, where);
        break;
      }
    }
  if (len < 0 && w)
    for (i = 0; i < w->nfib; i++)
      if (a >= w->fib[i]->map && a < w->fib[i]->map + pagesz()) {
        len = snprintf(msg, sizeof msg, "ncc: emulator: fiber stack overflow (%d KiB) in %s\n",
                       FIBER_STACK / 1024, where);
        break;
      }
  if (len < 0) {
    if (!(w && w->k && w->mode != MODE_IDLE)) {
      /* not ours: let the default action happen */
      signal(sig, SIG_DFL);
      return;
    }
    len = snprintf(msg, sizeof msg, "ncc: checked mode: invalid memory access at %p (not next to any buffer) in %s\n",
                   (const void *)a, where);
  }
  if (len > (int)sizeof msg - 1) len = (int)sizeof msg - 1;
  if (write(2, msg, (size_t)len) < 0) { /* nothing left to do */ }
  _exit(2);
}

static void install_handler(void) {
  struct sigaction sa;
  if (g_handler_installed) return;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = segv_report;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
  g_handler_installed = 1;
}

static worker *get_worker(void);

int ncc_emu_guarded_alloc(int n, const size_t *sizes, void **ptrs, ncc_guarded **out, char *err, size_t errn) {
  size_t pg = (size_t)pagesz();
  ncc_guarded *g = calloc(1, sizeof *g);
  int i;
  if (!g || !(g->b = calloc(n > 0 ? (size_t)n : 1, sizeof *g->b))) {
    free(g);
    ncc_errf(err, errn, "checked mode: out of memory");
    return NCC_EUSER;
  }
  for (i = 0; i < n; i++) {
    size_t body = (sizes[i] + pg - 1) / pg * pg;
    size_t len = body + 2 * pg;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      ncc_errf(err, errn, "checked mode: cannot map buffer #%d of %zu bytes: %s", i, sizes[i], strerror(errno));
      g->n = i;
      ncc_emu_guarded_free(g);
      return NCC_EUSER;
    }
    mprotect(m, pg, PROT_NONE);
    mprotect(m + pg + body, pg, PROT_NONE);
    g->b[i].map = m;
    g->b[i].maplen = len;
    g->b[i].size = sizes[i];
    /* end-aligned: the first byte past the buffer is the first byte of the guard */
    g->b[i].start = m + pg + body - sizes[i];
    ptrs[i] = g->b[i].start;
  }
  g->n = n;
  pthread_mutex_lock(&g_guard_mu);
  g->gnext = g_guarded;
  g_guarded = g;
  install_handler();
  pthread_mutex_unlock(&g_guard_mu);
  ensure_altstack(get_worker());
  *out = g;
  return 0;
}

void ncc_emu_guarded_free(ncc_guarded *g) {
  ncc_guarded **pp;
  int i;
  if (!g) return;
  pthread_mutex_lock(&g_guard_mu);
  for (pp = (ncc_guarded **)&g_guarded; *pp; pp = &(*pp)->gnext)
    if (*pp == g) { *pp = g->gnext; break; }
  pthread_mutex_unlock(&g_guard_mu);
  for (i = 0; i < g->n; i++) munmap(g->b[i].map, g->b[i].maplen);
  free(g->b);
  free(g);
}

/* ---------------------------------------------------------------- fibers */
/* Every OS thread that runs blocks (a pool thread, or an application thread
 * launching) has a worker: its fibers, dynamic shared memory, alternate signal
 * stack.  An application thread may come and go (a server's thread pool): its
 * worker is freed when it exits, through a pthread key's destructor. */
static pthread_key_t g_worker_key;
static pthread_once_t g_worker_once = PTHREAD_ONCE_INIT;
static int g_worker_key_ok;

static void worker_free(void *p) {
  worker *w = (worker *)p;
  int i;
  if (!w) return;
  for (i = 0; i < w->nfib; i++) {
#ifdef NCC_TSAN
    if (w->fib[i]->tsan) __tsan_destroy_fiber(w->fib[i]->tsan);
#endif
    munmap(w->fib[i]->map, w->fib[i]->maplen);
    free(w->fib[i]->cp);
    free(w->fib[i]);
  }
  free(w->fib);
  free(w->run);
  free(w->dyn);
  if (w->own_altstack) {
    /* the kernel must stop using it before it goes back to malloc */
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
    free(w->altstack);
  }
  free(w);
  if (tw == w) tw = NULL;
}

static void worker_key_init(void) { g_worker_key_ok = pthread_key_create(&g_worker_key, worker_free) == 0; }

static worker *get_worker(void) {
  if (!tw) {
    pthread_once(&g_worker_once, worker_key_init);
    tw = calloc(1, sizeof *tw);
    if (tw && g_worker_key_ok) pthread_setspecific(g_worker_key, tw);
#ifdef NCC_TSAN
    if (tw) tw->tsan_sched = __tsan_get_current_fiber();
#endif
  }
  return tw;
}

static void fiber_main(void *p);

/* a (re)started fiber is a new one for ThreadSanitizer: an abandoned one's
 * frames must not stay on its shadow stack */
static void tsan_fiber_reset(fiber *f) {
#ifdef NCC_TSAN
  if (f->tsan) __tsan_destroy_fiber(f->tsan);
  f->tsan = __tsan_create_fiber(0);
#else
  (void)f;
#endif
}

#ifdef NCC_FIBER_ASM
static void fiber_reset(fiber *f) {
  /* stacks are page-aligned: without an offset every fiber's hot frames would
   * fall into the same few L1 sets; colour them by 64-byte lines */
  uintptr_t top = ((uintptr_t)(f->map + f->maplen - 64 * f->colour)) & ~(uintptr_t)15;
  /* rsp after the six pops and the ret must be 16-byte aligned at the `call` */
  void **sp = (void **)(top - 72);
  ASAN_STACK_CLEAN(f);
  memset(sp, 0, 72);
  sp[2] = (void *)fiber_main;            /* r13 */
  sp[3] = f;                             /* r12 */
  sp[6] = (void *)ncc_fiber_entry;       /* return address */
  f->ctx = sp;
  f->fresh = 0;
  tsan_fiber_reset(f);
}
#else
static _Thread_local fiber *starting_fiber;   /* makecontext passes ints only */
static void fiber_start_uc(void) { fiber_main(starting_fiber); }
static void fiber_reset(fiber *f) {
  size_t pg = (size_t)pagesz();
  ASAN_STACK_CLEAN(f);
  getcontext(&f->ctx);
  f->ctx.uc_stack.ss_sp = f->map + pg;
  f->ctx.uc_stack.ss_size = f->maplen - pg - 64 * (size_t)f->colour;
  f->ctx.uc_link = NULL;
  makecontext(&f->ctx, fiber_start_uc, 0);
  f->fresh = 0;
  tsan_fiber_reset(f);
}
#endif

/* Resets a fresh fiber and switches to it from *from. */
static void switch_to(fiber_ctx *from, fiber *g) {
  if (g->fresh) {
    fiber_reset(g);
#ifndef NCC_FIBER_ASM
    starting_fiber = g;
#endif
  }
  TSAN_SWITCH(g->tsan);   /* the last thing before the switch (the fiber API's rule) */
  CTX_SWITCH(from, &g->ctx);
}

static int ensure_fibers(worker *w, int n, char *err, size_t errn) {
  size_t pg = (size_t)pagesz();
  fiber **nf;
  if (w->nfib >= n) return 0;
  /* an array of pointers: a fiber's own stack holds its address, so fibers never move */
  nf = realloc(w->fib, (size_t)n * sizeof *nf);
  if (!nf) { ncc_errf(err, errn, "emulator: out of memory for %d fibers", n); return NCC_EINTERNAL; }
  w->fib = nf;
  for (; w->nfib < n; w->nfib++) {
    fiber *f = calloc(1, sizeof *f);
    size_t len = FIBER_STACK + pg;
    if (!f) { ncc_errf(err, errn, "emulator: out of memory for %d fibers", n); return NCC_EINTERNAL; }
    f->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (f->map == MAP_FAILED) {
      free(f);
      ncc_errf(err, errn, "emulator: cannot map a fiber stack: %s", strerror(errno));
      return NCC_EINTERNAL;
    }
    mprotect(f->map, pg, PROT_NONE);     /* stack overflow faults instead of corrupting */
    f->maplen = len;
    f->w = w;
    f->fresh = 1;
    f->colour = w->nfib % 64;   /* 64 lines of 64 bytes: one page, every L1 set */
    w->fib[w->nfib] = f;
  }
  return 0;
}

/* Passes control from fiber f to the next runnable fiber of this round, or to
 * the scheduler after the last one. */
static void fiber_pass(worker *w, fiber *f) {
  int p = w->runpos + 1;
  if (p < w->nrun) {
    fiber *g = w->fib[w->run[p]];
    w->runpos = p;
    w->cur = w->run[p];
    threadIdx.x = g->tx;
    threadIdx.y = g->ty;
    threadIdx.z = g->tz;
    switch_to(&f->ctx, g);
  } else {
    TSAN_SWITCH(w->tsan_sched);
    CTX_SWITCH(&f->ctx, &w->sched);
  }
}

static void fiber_main(void *p) {
  fiber *f = (fiber *)p;
  for (;;) {
    worker *w = f->w;
    w->k->emu_thread(w->args);
    if (f->ncp) {   /* copies never waited for: they land (a GPU completes them); checked mode says so */
      if (ncc_emu_checked()) w->misuse |= 16;
      for (int i = 0; i < f->ncp; i++) memcpy(f->cp[i].dst, f->cp[i].data, (size_t)f->cp[i].n);
      f->ncp = 0;
    }
    f->done = 1;
    fiber_pass(w, f);
  }
}

void ncc_emu_syncthreads(void) {
  worker *w = tw;
  fiber *f;
  if (!w || w->mode != MODE_FIBER || !(w->k->flags & NCC_KF_BARRIER)) {
    /* a kernel with a barrier that is not flagged NCC_KF_BARRIER: its threads run
     * one after another here, so the barrier cannot be honoured */
    if (w) w->misuse |= 1;
    return;
  }
  f = w->fib[w->cur];
  f->nbar++;
  f->wait = W_BAR;
  fiber_pass(w, f);
}

/* ---------------------------------------------------------------- warp collectives */
/* A lane at a collective posts its operands and waits (like a barrier, but
 * for its warp alone); when a round of the block's fibers is over, warp_resolve
 * completes every collective whose lanes have all arrived.  Lanes are the
 * block's threads in x-major order, 32 to a warp, the last warp partial when
 * the block size is not a multiple of 32. */
static const char *const wop_name[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
                                       "__ballot_sync", "__all_sync", "__any_sync", "__syncwarp", "__activemask",
                                       "mma.sync.m16n8k8 (tf32)", "mma.sync.m16n8k16 (f16)",
                                       "mma.sync.m16n8k16 (bf16)", "mma.sync.m16n8k16 (s8)", "ldmatrix.sync.m8n8"};

/* D (16x8) += A (16xK) B (Kx8): each element of D is C plus the K products in
 * k order, float32 fused multiply-adds, as the tensor cores sum (above).  The
 * loops run i, k, j so that the 8 of j are one vector; where the CPU has AVX2
 * and FMA a copy built for them runs (the same roundings: one fused
 * multiply-add an element a step), else fmaf's. */
#define NCC_EMU_MMA_F32(A, B, D, K)                                      \
  for (int i_ = 0; i_ < 16; i_++) {                                      \
    float d_[8];                                                         \
    memcpy(d_, (D)[i_], sizeof d_);                                      \
    for (int k_ = 0; k_ < (K); k_++) {                                   \
      float a_ = (A)[i_ * (K) + k_];                                     \
      for (int j_ = 0; j_ < 8; j_++) d_[j_] = fmaf(a_, (B)[k_][j_], d_[j_]); \
    }                                                                    \
    memcpy((D)[i_], d_, sizeof d_);                                      \
  }
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx2,fma"))) static void mma_f32_fma(const float *restrict A, float (*restrict B)[8], float (*restrict D)[8], int K) {
  NCC_EMU_MMA_F32(A, B, D, K)
}
static int mma_fma_ok = -1;   /* -1: not asked yet */
/* Does the CPU have AVX2 and FMA (asked once)? */
static int avx2_fma(void) {
  int ok = __atomic_load_n(&mma_fma_ok, __ATOMIC_RELAXED);
  if (ok < 0) {
    __builtin_cpu_init();
    ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    __atomic_store_n(&mma_fma_ok, ok, __ATOMIC_RELAXED);
  }
  return ok;
}
#endif
static void mma_f32(const float *restrict A, float (*restrict B)[8], float (*restrict D)[8], int K) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (avx2_fma()) {
    mma_f32_fma(A, B, D, K);
    return;
  }
#endif
  NCC_EMU_MMA_F32(A, B, D, K)
}

/* D (16x8) += A (16x16) B (16x8) in int32, exact in any order (ncc's int8
 * operands: a K of 16 adds at most 16 x 127^2): the loops i, k, j, the 8 of j
 * one vector; with AVX2 its 32-bit multiplies (vpmulld) instead of SSE2's
 * emulation of them */
#define NCC_EMU_MMA_S32(A, B, D)                                          \
  for (int i_ = 0; i_ < 16; i_++)                                         \
    for (int k_ = 0; k_ < 16; k_++)                                       \
      for (int j_ = 0; j_ < 8; j_++) (D)[i_][j_] += (A)[i_][k_] * (B)[k_][j_];
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx2"))) static void mma_s32_avx2(int (*restrict A)[16], int (*restrict B)[8], int (*restrict D)[8]) {
  NCC_EMU_MMA_S32(A, B, D)
}
#endif
static void mma_s32(int (*restrict A)[16], int (*restrict B)[8], int (*restrict D)[8]) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (avx2_fma()) {
    mma_s32_avx2(A, B, D);
    return;
  }
#endif
  NCC_EMU_MMA_S32(A, B, D)
}

/* mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: D = A B + C, A 16x8, B
 * 8x8, C and D 16x8, spread over the 32 lanes as the PTX ISA documents
 * ("Matrix fragments for mma.m16n8k8", .tf32): with g = lane / 4 and t = lane
 * % 4, lane holds
 *   A: a[0] = A[g][t], a[1] = A[g+8][t], a[2] = A[g][t+4], a[3] = A[g+8][t+4]
 *   B: b[0] = B[t][g], b[1] = B[t+4][g]
 *   C, D: d[r] = D[g + 8 (r / 2)][2 t + r % 2]
 * The operands are TF32: a tensor core reads the top 19 bits of each 32-bit
 * register, so the low 13 are cleared here (the kernels round with ncc_tf32
 * before, so that clears nothing).  Each element of D is C plus the 8
 * products, added in k order by fused multiply-adds in float32: a product of
 * two TF32 numbers is exact in float32, and that order makes the tensor-core
 * kernel give the bits of the CUDA-core kernel that adds in k order.  A GPU's
 * tensor core adds the products in its own order and internal precision, so
 * its result may differ in the last bits (docs/emulator.md). */
static float tf32_bits(float x) {
  union { float f; uint32_t u; } v;
  v.f = x;
  v.u &= 0xffffe000u;
  return v.f;
}
static void mma_tf32(fiber **L) {
  float A[16][8], B[8][8], D[16][8];
  int l, i;
  for (l = 0; l < 32; l++) {
    const ncc_emu_mma_frag *fr = (const ncc_emu_mma_frag *)(uintptr_t)L[l]->wval;
    const float *a = (const float *)fr->a, *b = (const float *)fr->b;
    int g = l / 4, t = l % 4;
    A[g][t] = tf32_bits(a[0]), A[g + 8][t] = tf32_bits(a[1]);
    A[g][t + 4] = tf32_bits(a[2]), A[g + 8][t + 4] = tf32_bits(a[3]);
    B[t][g] = tf32_bits(b[0]), B[t + 4][g] = tf32_bits(b[1]);
    for (i = 0; i < 4; i++) D[g + 8 * (i / 2)][2 * t + i % 2] = fr->d[i];
  }
  mma_f32(&A[0][0], B, D, 8);
  for (l = 0; l < 32; l++) {
    const ncc_emu_mma_frag *fr = (const ncc_emu_mma_frag *)(uintptr_t)L[l]->wval;
    int g = l / 4, t = l % 4;
    for (i = 0; i < 4; i++) fr->d[i] = D[g + 8 * (i / 2)][2 * t + i % 2];
  }
}

/* mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (.bf16.bf16): A 16x16,
 * B 16x8, C and D 16x8; a lane's a[4] and b[2] are 32-bit registers of two
 * FP16 (BF16) values each, element 2i in the low half and 2i+1 in the high
 * half of register i.  As the PTX ISA documents ("Matrix fragments for
 * mma.m16n8k16 with floating point type"), with g = lane / 4, t = lane % 4:
 *   A: element i (0..7) is A[g + 8 (i / 2 % 2)][2 t + i % 2 + 8 (i / 4)]
 *   B: element i (0..3) is B[2 t + i % 2 + 8 (i / 2)][g]
 *   C, D: as m16n8k8.
 * Each element of D is C plus the 16 products in k order, float32 fused
 * multiply-adds: a product of two FP16 (BF16) numbers is exact in float32. */
static float half_bits(unsigned h, int bf) {
  union { float f; uint32_t u; } v;
  if (!bf) return ncc_f16_bits_to_f32((unsigned short)h);
  v.u = h << 16;
  return v.f;
}
static void mma_f16(fiber **L, int bf) {
  float A[16][16], B[16][8], D[16][8];
  int l, i;
  for (l = 0; l < 32; l++) {
    const ncc_emu_mma_frag *fr = (const ncc_emu_mma_frag *)(uintptr_t)L[l]->wval;
    const unsigned *a = (const unsigned *)fr->a, *b = (const unsigned *)fr->b;
    int g = l / 4, t = l % 4;
    for (i = 0; i < 8; i++)
      A[g + 8 * (i / 2 % 2)][2 * t + i % 2 + 8 * (i / 4)] = half_bits((a[i / 2] >> (16 * (i % 2))) & 0xffffu, bf);
    for (i = 0; i < 4; i++) B[2 * t + i % 2 + 8 * (i / 2)][g] = half_bits((b[i / 2] >> (16 * (i % 2))) & 0xffffu, bf);
    for (i = 0; i < 4; i++) D[g + 8 * (i / 2)][2 * t + i % 2] = fr->d[i];
  }
  mma_f32(&A[0][0], B, D, 16);
  for (l = 0; l < 32; l++) {
    const ncc_emu_mma_frag *fr = (const ncc_emu_mma_frag *)(uintptr_t)L[l]->wval;
    int g = l / 4, t = l % 4;
    for (i = 0; i < 4; i++) fr->d[i] = D[g + 8 * (i / 2)][2 * t + i % 2];
  }
}

/* mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32: A 16x16, B 16x8 of int8,
 * C and D 16x8 of int32; a lane's a[2] and b[1] are 32-bit registers of four
 * int8 each, element 4i + j in byte j of register i.  As the PTX ISA
 * documents ("Matrix Fragments for mma.m16n8k16 with integer type"), with
 * g = lane / 4, t = lane % 4:
 *   A: element i (0..7) is A[g + 8 (i / 4)][4 t + i % 4]
 *   B: element i (0..3) is B[4 t + i][g]
 *   C, D: element i (0..3) is D[g + 8 (i / 2)][2 t + i % 2], as m16n8k8.
 * The sums are exact int32 (ncc's operands are in [-127, 127]: a K of 16
 * adds at most 16 * 127^2). */
static void mma_s8(fiber **L) {
  int A[16][16], B[16][8], D[16][8];
  int l, i;
  for (l = 0; l < 32; l++) {
    const ncc_emu_mma_frag *fr = (const ncc_emu_mma_frag *)(uintptr_t)L[l]->wval;
    const unsigned *a = (const unsigned *)fr->a, *b = (const unsigned *)fr->b;
    const int *d = (const int *)(const void *)fr->d;
    int g = l / 4, t = l % 4;
    for (i = 0; i < 8; i++) A[g + 8 * (i / 4)][4 * t + i % 4] = (signed char)((a[i / 4] >> (8 * (i % 4))) & 0xffu);
    for (i = 0; i < 4; i++) B[4 * t + i][g] = (signed char)((b[0] >> (8 * i)) & 0xffu);
    for (i = 0; i < 4; i++) D[g + 8 * (i / 2)][2 * t + i % 2] = d[i];
  }
  mma_s32(A, B, D);
  for (l = 0; l < 32; l++) {
    const ncc_emu_mma_frag *fr = (const ncc_emu_mma_frag *)(uintptr_t)L[l]->wval;
    int *d = (int *)(void *)fr->d;
    int g = l / 4, t = l % 4;
    for (i = 0; i < 4; i++) d[i] = D[g + 8 * (i / 2)][2 * t + i % 2];
  }
}

void ncc_emu_misaligned(void) {
  if (tw) tw->misuse |= 4;
}

/* ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16, as the PTX ISA documents
 * it ("Warp-level matrix load instruction: ldmatrix"): lanes 8 i .. 8 i + 7
 * give the addresses of rows 0..7 of matrix i (i < N; 16 bytes a row, 16-byte
 * aligned), and lane l receives in register i the two 16-bit elements of
 * matrix i at row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1, the first in
 * the low half; with .trans, those at rows 2 (l % 4) and 2 (l % 4) + 1 of
 * column l / 4.  That is an mma.m16n8k16 operand fragment: x4 over a
 * row-major 16x16 A tile gives a[0..3], x2.trans over a k-major 16x8 B tile
 * gives b[0..1]. */
static void ldmatrix(fiber **L) {
  const ncc_emu_ldm *q0 = (const ncc_emu_ldm *)(uintptr_t)L[0]->wval;
  int num = q0->num, trans = q0->trans, i, l;
  for (l = 0; l < 8 * num; l++) {   /* the lanes whose addresses name rows (x1: 0..7, x2: 0..15, x4: all) */
    const ncc_emu_ldm *q = (const ncc_emu_ldm *)(uintptr_t)L[l]->wval;
    if ((uintptr_t)q->p & 15u) tw->misuse |= 8;
  }
  if (tw->misuse & 8) return;
  for (i = 0; i < num; i++)
    for (l = 0; l < 32; l++) {
      const ncc_emu_ldm *q = (const ncc_emu_ldm *)(uintptr_t)L[l]->wval;
      int r = l / 4, c = 2 * (l % 4);
      unsigned short e0, e1;
      if (!trans) {
        const unsigned char *row = (const unsigned char *)((const ncc_emu_ldm *)(uintptr_t)L[8 * i + r]->wval)->p;
        memcpy(&e0, row + 2 * c, 2);
        memcpy(&e1, row + 2 * (c + 1), 2);
      } else {
        const unsigned char *r0 = (const unsigned char *)((const ncc_emu_ldm *)(uintptr_t)L[8 * i + c]->wval)->p;
        const unsigned char *r1 = (const unsigned char *)((const ncc_emu_ldm *)(uintptr_t)L[8 * i + c + 1]->wval)->p;
        memcpy(&e0, r0 + 2 * r, 2);
        memcpy(&e1, r1 + 2 * r, 2);
      }
      q->d[i] = (unsigned)e0 | (unsigned)e1 << 16;
    }
}

/* ---- cp.async: per thread, the copies wait in its fiber's queue ----
 * Outside fiber mode (a kernel without barriers: its threads run one after
 * another, and no other thread can read the destination before this one
 * waits) a copy lands at once. */
static fiber *cp_fiber(void) {
  worker *w = tw;
  return w && w->mode == MODE_FIBER ? w->fib[w->cur] : NULL;
}

static void cp_land(fiber *f, int upto) {   /* lands the copies of groups < upto; keeps the others in order */
  int i, k = 0;
  for (i = 0; i < f->ncp; i++) {
    struct cpa *c = &f->cp[i];
    if (c->group >= 0 && c->group < upto) memcpy(c->dst, c->data, (size_t)c->n);
    else f->cp[k++] = *c;
  }
  f->ncp = k;
}

void ncc_emu_cp_async(void *dst, const void *src, int bytes) {
  fiber *f = cp_fiber();
  if ((bytes != 4 && bytes != 8 && bytes != 16) || ((uintptr_t)dst | (uintptr_t)src) % (unsigned)bytes) {
    if (tw) tw->misuse |= 8;
    return;
  }
  if (!f) {
    memcpy(dst, src, (size_t)bytes);
    return;
  }
  if (f->ncp == f->capcp) {
    int cap = f->capcp ? 2 * f->capcp : 16;
    struct cpa *nc = realloc(f->cp, (size_t)cap * sizeof *nc);
    if (!nc) {   /* out of memory: land it now (a legal completion time) */
      memcpy(dst, src, (size_t)bytes);
      return;
    }
    f->cp = nc;
    f->capcp = cap;
  }
  struct cpa *c = &f->cp[f->ncp++];
  memcpy(c->data, src, (size_t)bytes);
  c->dst = dst;
  c->n = bytes;
  c->group = -1;
  if (ncc_emu_checked()) memset(dst, 0xff, (size_t)bytes);   /* read before the wait: NaN / -1 */
}

void ncc_emu_cp_async_commit(void) {
  fiber *f = cp_fiber();
  int i;
  if (!f) return;
  for (i = 0; i < f->ncp; i++)
    if (f->cp[i].group < 0) f->cp[i].group = f->cpgroups;
  f->cpgroups++;
}

void ncc_emu_cp_async_wait(int n) {
  fiber *f = cp_fiber();
  if (f) cp_land(f, f->cpgroups - (n < 0 ? 0 : n));
}

unsigned long long ncc_emu_warp(int op, unsigned mask, unsigned long long v, int b, int width) {
  worker *w = tw;
  fiber *f;
  if (!w || w->mode != MODE_FIBER || !(w->k->flags & NCC_KF_WARP)) {
    /* an unflagged kernel's threads run one after another: they cannot meet */
    if (w) w->misuse |= 2;
    return v;
  }
  f = w->fib[w->cur];
  f->wait = W_WARP;
  f->wop = op;
  f->wmask = mask;
  f->wval = v;
  f->wb = b;
  f->wwidth = width;
  fiber_pass(w, f);
  return f->wres;
}

/* The collective of lanes `part` of warp L (all waiting at the same one) completes.
 * Shuffles follow PTX's shfl.sync: the source lane j, and lane's own value when j
 * falls outside its width-wide segment.  A source lane outside `part` (not in the
 * mask, or exited) gives CUDA an undefined value: the reader's own value here, or
 * all-ones bits (NaN, -1) in checked mode, so that a kernel using it shows. */
static void warp_complete(fiber **L, unsigned part, int op, int checked) {
  unsigned ballot = 0;
  int l;
  if (op >= NCC_EMU_MMA_TF32) {   /* warp_resolve has seen all 32 lanes arrive */
    if (op == NCC_EMU_LDMATRIX) ldmatrix(L);
    else if (op == NCC_EMU_MMA_TF32) mma_tf32(L);
    else if (op == NCC_EMU_MMA_S8) mma_s8(L);
    else mma_f16(L, op == NCC_EMU_MMA_BF16);
    for (l = 0; l < 32; l++) L[l]->wait = W_RUN;
    return;
  }
  for (l = 0; l < 32; l++)
    if ((part >> l & 1) && L[l]->wval) ballot |= 1u << l;
  for (l = 0; l < 32; l++) {
    fiber *f;
    if (!(part >> l & 1)) continue;
    f = L[l];
    switch (op) {
    case NCC_EMU_BALLOT: f->wres = ballot; break;
    case NCC_EMU_ALL: f->wres = ballot == part; break;
    case NCC_EMU_ANY: f->wres = ballot != 0; break;
    case NCC_EMU_SHFL_IDX: case NCC_EMU_SHFL_UP: case NCC_EMU_SHFL_DOWN: case NCC_EMU_SHFL_XOR: {
      int seg = (32 - f->wwidth) & 31, bv = f->wb & 31;   /* PTX's segmask and b[4:0] */
      int maxl = (l & seg) | ((op == NCC_EMU_SHFL_UP ? 0 : 31) & ~seg), j, ok;
      if (op == NCC_EMU_SHFL_UP) j = l - bv, ok = j >= maxl;
      else if (op == NCC_EMU_SHFL_DOWN) j = l + bv, ok = j <= maxl;
      else if (op == NCC_EMU_SHFL_XOR) j = l ^ bv, ok = j <= maxl;
      else j = (l & seg) | (bv & ~seg), ok = j <= maxl;
      if (!ok) j = l;
      f->wres = part >> j & 1 ? L[j]->wval : checked ? ~0ull : f->wval;
      break;
    }
    default: f->wres = 0; break;   /* __syncwarp */
    }
    f->wait = W_RUN;
  }
}

static void lane_where(const fiber *g, char *buf, size_t n) {
  if (g->done) snprintf(buf, n, "has exited");
  else if (g->wait == W_BAR) snprintf(buf, n, "waits at __syncthreads() (its barrier %d)", g->nbar);
  else if (g->wait == W_WARP) snprintf(buf, n, "waits at %s (mask 0x%08x)", wop_name[g->wop], g->wmask);
  else snprintf(buf, n, "runs");
}

static void warp_errf(worker *w, char *err, size_t errn, int base, int l, const char *what) {
  const fiber *f = w->fib[base + l];
  ncc_errf(err, errn, "emulator: kernel %s, block (%u,%u,%u), warp %d, lane %d (thread (%u,%u,%u)) %s", w->k->name,
           blockIdx.x, blockIdx.y, blockIdx.z, base / 32, l, f->tx, f->ty, f->tz, what);
}

/* Completes every collective whose lanes have all arrived; returns how many,
 * or -1 (err set) for a misuse that waiting cannot cure. */
static int warp_resolve(worker *w, int checked, char *err, size_t errn) {
  int n = w->nthreads, base, progress = 0;
  char what[512];
  for (base = 0; base < n; base += 32) {
    int nl = n - base < 32 ? n - base : 32, l, b;
    fiber **L = w->fib + base;
    /* __activemask: the lanes that reached the same one (its source line, in b)
     * in this round */
    for (l = 0; l < nl; l++)
      if (!L[l]->done && L[l]->wait == W_WARP && L[l]->wop == NCC_EMU_ACTIVEMASK) {
        unsigned am = 0;
        for (b = l; b < nl; b++)
          if (!L[b]->done && L[b]->wait == W_WARP && L[b]->wop == NCC_EMU_ACTIVEMASK && L[b]->wb == L[l]->wb)
            am |= 1u << b;
        for (b = l; b < nl; b++)
          if (am >> b & 1) L[b]->wres = am, L[b]->wait = W_RUN;
        progress++;
      }
    for (l = 0; l < nl; l++) {
      fiber *f = L[l];
      unsigned m, part = 0;
      int ready = 1;
      if (f->done || f->wait != W_WARP) continue;
      m = f->wmask;
      if (!(m >> l & 1)) {
        snprintf(what, sizeof what, "calls %s with mask 0x%08x, which does not name the lane itself", wop_name[f->wop], m);
        warp_errf(w, err, errn, base, l, what);
        return -1;
      }
      if (f->wop <= NCC_EMU_SHFL_XOR && (f->wwidth < 1 || f->wwidth > 32 || (f->wwidth & (f->wwidth - 1)))) {
        snprintf(what, sizeof what, "calls %s with width %d (a power of two from 1 to 32)", wop_name[f->wop], f->wwidth);
        warp_errf(w, err, errn, base, l, what);
        return -1;
      }
      for (b = 0; b < 32 && ready; b++) {
        fiber *g;
        if (!(m >> b & 1)) continue;
        if (b >= nl) continue;   /* past a partial last warp: a lane that never existed, not waited for */
        if (L[b]->done) {
          /* CUDA waits for the non-exited lanes of the mask only; a lane that has
           * exited is almost always a bug (its value is undefined): checked mode says so */
          if (checked) {
            snprintf(what, sizeof what, "waits at %s (mask 0x%08x), but lane %d (thread (%u,%u,%u)) named in the "
                     "mask has exited without reaching it", wop_name[f->wop], m, b, L[b]->tx, L[b]->ty, L[b]->tz);
            warp_errf(w, err, errn, base, l, what);
            return -1;
          }
          continue;
        }
        g = L[b];
        if (g->wait != W_WARP || g->wop != f->wop || g->wmask != m) ready = 0;
        else part |= 1u << b;
      }
      if (!ready) continue;
      if (f->wop >= NCC_EMU_MMA_TF32 && part != 0xffffffffu) {
        /* .aligned: every lane of the warp executes the same mma.sync */
        if (nl < 32) snprintf(what, sizeof what, "calls %s in a warp of %d threads (the block's last, partial one): "
                              "mma.sync needs all 32 lanes", wop_name[f->wop], nl);
        else snprintf(what, sizeof what, "calls %s, but lanes 0x%08x of its warp have exited without reaching it: "
                      "mma.sync needs all 32 lanes", wop_name[f->wop], ~part);
        warp_errf(w, err, errn, base, l, what);
        return -1;
      }
      warp_complete(L, part, f->wop, checked);
      progress++;
    }
  }
  return progress;
}

/* Nothing can run, no collective can complete, and the block is not at a
 * barrier: name a lane that waits at a collective and a lane of its mask that
 * will never join it. */
static void warp_deadlock(worker *w, char *err, size_t errn) {
  int n = w->nthreads, i, b;
  char what[512], where[160];
  for (i = 0; i < n; i++) {
    int base = i / 32 * 32, l = i % 32, nl = n - base < 32 ? n - base : 32;
    fiber *f = w->fib[i];
    if (f->done || f->wait != W_WARP) continue;
    for (b = 0; b < nl; b++) {
      fiber *g = w->fib[base + b];
      if (!(f->wmask >> b & 1) || g->done) continue;
      if (g->wait == W_WARP && g->wop == f->wop && g->wmask == f->wmask) continue;
      lane_where(g, where, sizeof where);
      snprintf(what, sizeof what, "waits at %s (mask 0x%08x), but lane %d (thread (%u,%u,%u)) named in the mask %s: "
               "every lane named in a mask must reach the same collective with the same mask",
               wop_name[f->wop], f->wmask, b, g->tx, g->ty, g->tz, where);
      warp_errf(w, err, errn, base, l, what);
      return;
    }
  }
  ncc_errf(err, errn, "emulator: kernel %s, block (%u,%u,%u): the threads of the block wait for each other",
           w->k->name, blockIdx.x, blockIdx.y, blockIdx.z);
}

/* Runs one block as fibers, in rounds: every runnable fiber runs (in the fiber
 * order) until it waits at a barrier or a warp collective, or ends; then the
 * collectives whose lanes have all arrived complete, or, when every thread
 * waits at __syncthreads(), the barrier opens.  Anything else is a deadlock on
 * a GPU and an error here. */
static int run_block_fibers(worker *w, int checked, char *err, size_t errn) {
  int n = w->nthreads, i, ndone, nbar, r;
  unsigned bx = blockDim.x, by = blockDim.y;
  int rc = ensure_fibers(w, n, err, errn);
  if (rc) return rc;
  if (w->caprun < n) {
    int *nr = realloc(w->run, (size_t)n * sizeof *nr);
    if (!nr) { ncc_errf(err, errn, "emulator: out of memory for %d fibers", n); return NCC_EINTERNAL; }
    w->run = nr;
    w->caprun = n;
  }
  for (i = 0; i < n; i++) {
    fiber *f = w->fib[i];
    f->tx = (unsigned)i % bx;
    f->ty = ((unsigned)i / bx) % by;
    f->tz = (unsigned)i / (bx * by);
    f->nbar = 0;
    f->done = 0;
    f->wait = W_RUN;
    f->ncp = 0;
    f->cpgroups = 0;
  }
  for (;;) {
    w->nrun = 0;
    for (i = 0; i < n; i++) {
      int k = w->dir > 0 ? i : n - 1 - i;
      if (!w->fib[k]->done && w->fib[k]->wait == W_RUN) w->run[w->nrun++] = k;
    }
    if (w->nrun) {
      fiber *f = w->fib[w->run[0]];
      w->runpos = 0;
      w->cur = w->run[0];
      threadIdx.x = f->tx;
      threadIdx.y = f->ty;
      threadIdx.z = f->tz;
      switch_to(&w->sched, f);
    }
    r = (w->k->flags & NCC_KF_WARP) ? warp_resolve(w, checked, err, errn) : 0;
    if (r < 0) break;
    if (r > 0) continue;
    for (ndone = nbar = 0, i = 0; i < n; i++) {
      ndone += w->fib[i]->done;
      nbar += !w->fib[i]->done && w->fib[i]->wait == W_BAR;
    }
    if (ndone == n) return 0;
    if (nbar == n) {                 /* everybody waits at the same barrier */
      for (i = 0; i < n; i++) w->fib[i]->wait = W_RUN;
      continue;
    }
    if (nbar + ndone == n) {
      fiber *d = NULL, *b = NULL;
      for (i = 0; i < n; i++) {
        if (w->fib[i]->done && !d) d = w->fib[i];
        if (!w->fib[i]->done && !b) b = w->fib[i];
      }
      ncc_errf(err, errn,
               "emulator: kernel %s, block (%u,%u,%u): thread (%u,%u,%u) returned after %d __syncthreads() "
               "while thread (%u,%u,%u) waits at barrier %d: threads of a block reached different numbers "
               "of barriers (a return before a barrier?)",
               w->k->name, blockIdx.x, blockIdx.y, blockIdx.z, d->tx, d->ty, d->tz, d->nbar, b->tx, b->ty,
               b->tz, b->nbar);
    } else {
      warp_deadlock(w, err, errn);
    }
    break;
  }
  /* the waiting fibers are abandoned mid-kernel: restart their stacks next time */
  for (i = 0; i < n; i++)
    if (!w->fib[i]->done) w->fib[i]->fresh = 1;
  return NCC_EINTERNAL;
}

/* ---------------------------------------------------------------- the pool */
typedef struct job {
  const ncc_kernel *k;
  ncc_dim3 grid, block;
  size_t shmem;
  void **args;
  long long nblocks;
  atomic_llong next;
  atomic_int failed;
  long long failblock;   /* the block whose error msg holds (-1: not a block's) */
  int use_fibers, checked, dir;
  atomic_int nthreads_used;
  pthread_mutex_t mu;
  char msg[1024];
} job;

/* Records block b's error (b = -1: the worker's own, out of memory) and stops
 * the launch.  The lowest block's error is kept: blocks are handed out in
 * order and every block below a failing one runs to its end, so the report
 * names the first failing block of the grid whatever the threads' timing. */
static void job_fail(job *j, long long b, const char *msg) {
  pthread_mutex_lock(&j->mu);
  if (!atomic_load(&j->failed) || b < j->failblock) {
    snprintf(j->msg, sizeof j->msg, "%s", msg);
    j->failblock = b;
  }
  atomic_store(&j->failed, 1);
  pthread_mutex_unlock(&j->mu);
  atomic_store(&j->next, j->nblocks);
}

static void run_job(job *j) {
  worker *w = get_worker();
  char err[1024];
  long long b;
  int ran = 0;
  unsigned nthreads = j->block.x * j->block.y * j->block.z;
  if (!w) { job_fail(j, -1, "emulator: out of memory"); return; }
  if (j->checked) ensure_altstack(w);
  if (j->shmem > w->dyncap) {
    free(w->dyn);
    w->dyn = aligned_alloc(64, (j->shmem + 63) / 64 * 64);
    w->dyncap = w->dyn ? j->shmem : 0;
    if (!w->dyn) { job_fail(j, -1, "emulator: out of memory for dynamic shared memory"); return; }
  }
  ncc_emu_shared_dyn = j->shmem ? w->dyn : NULL;
  gridDim.x = j->grid.x; gridDim.y = j->grid.y; gridDim.z = j->grid.z;
  blockDim.x = j->block.x; blockDim.y = j->block.y; blockDim.z = j->block.z;
  w->k = j->k;
  w->args = j->args;
  w->nthreads = (int)nthreads;
  w->dir = j->dir;
  w->misuse = 0;
  while ((b = atomic_fetch_add(&j->next, 1)) < j->nblocks) {
    if (!ran) { ran = 1; atomic_fetch_add(&j->nthreads_used, 1); }
    blockIdx.x = (unsigned)(b % j->grid.x);
    blockIdx.y = (unsigned)((b / j->grid.x) % j->grid.y);
    blockIdx.z = (unsigned)(b / ((long long)j->grid.x * j->grid.y));
    /* checked mode: a block must not see what the previous block left in dynamic
     * shared memory (on a GPU it is undefined): NaN / -1 in every byte */
    if (j->checked && j->shmem) memset(w->dyn, 0xff, j->shmem);
    if (j->use_fibers) {
      w->mode = MODE_FIBER;
      if (run_block_fibers(w, j->checked, err, sizeof err)) { w->mode = MODE_IDLE; job_fail(j, b, err); break; }
    } else if (j->checked) {
      unsigned x, y, z;
      w->mode = MODE_THREAD;
      for (z = 0; z < j->block.z; z++)
        for (y = 0; y < j->block.y; y++)
          for (x = 0; x < j->block.x; x++) {
            threadIdx.x = x; threadIdx.y = y; threadIdx.z = z;
            j->k->emu_thread(j->args);
          }
    } else {
      w->mode = MODE_BLOCK;
      j->k->emu_block(j->args);
    }
    w->mode = MODE_IDLE;
    if (w->misuse) {
      /* the first misuse by this order; bit 2 (a warp collective in an unflagged kernel) last */
      static const struct { int bit; const char *fmt; } why[] = {
        {4, "emulator: kernel %s makes a vector load or store at an address its size does not divide (ncc_ldg128, "
            "ncc_ldg128f: not aligned to 16 bytes; ncc_lds4, ncc_lds_u32x4, ncc_st4f: 16; ncc_lds2, ncc_lds_u32x2, ncc_lds_i32x2, "
            "ncc_ld2f, ncc_st2f: 8; ncc_ld2h, ncc_st2h: 4; ncc_ld2b, ncc_st2b: 2; a GPU faults)"},
        {8, "emulator: kernel %s calls ldmatrix or cp.async at an address its size does not divide (ldmatrix: "
            "16-byte rows; cp.async: 4, 8 or 16 bytes, both addresses; a GPU faults)"},
        {16, "emulator: kernel %s has a thread that exits with cp.async copies it never waited for "
             "(cp.async.wait_group)"},
        {1, "emulator: kernel %s calls __syncthreads() but is not flagged NCC_KF_BARRIER "
            "(its threads ran one after another, the barrier was not honoured)"},
        {2, "emulator: kernel %s calls a warp collective (__shfl_*_sync, __ballot_sync, __syncwarp...) "
            "but is not flagged NCC_KF_WARP (its threads ran one after another, the lanes did not meet)"},
      };
      size_t m = 0;
      while (m + 1 < sizeof why / sizeof why[0] && !(w->misuse & why[m].bit)) m++;
      snprintf(err, sizeof err, why[m].fmt, j->k->name);
      job_fail(j, b, err);
      break;
    }
  }
  w->mode = MODE_IDLE;
  w->k = NULL;
}

static struct {
  pthread_mutex_t mu;          /* guards everything below */
  pthread_cond_t wake, done;
  pthread_mutex_t launch_mu;   /* one launch at a time uses the pool */
  int nthreads;                /* OS threads running blocks, the caller included */
  int started;
  unsigned long gen;
  int running;
  job *cur;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, NULL};

static void *pool_main(void *arg) {
  /* the generation at creation (after a fork it is not 0): only later jobs are ours */
  unsigned long seen = (unsigned long)(uintptr_t)arg;
  sigset_t all;
  /* signals go to the application's threads, not to the emulator's */
  sigfillset(&all);
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGBUS);
  sigdelset(&all, SIGFPE);
  sigdelset(&all, SIGILL);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  ensure_altstack(get_worker());
  pthread_mutex_lock(&pool.mu);
  for (;;) {
    while (pool.gen == seen) pthread_cond_wait(&pool.wake, &pool.mu);
    seen = pool.gen;
    {
      job *j = pool.cur;
      pthread_mutex_unlock(&pool.mu);
      run_job(j);
      pthread_mutex_lock(&pool.mu);
    }
    if (--pool.running == 0) pthread_cond_signal(&pool.done);
  }
  return NULL;
}

int ncc_emu_threads(void) {
  int n;
  pthread_mutex_lock(&pool.mu);
  if (!pool.nthreads) {
    const char *e = getenv("NCC_EMU_THREADS");
    long v = e && *e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    if (v < 1) v = 1;
    if (v > 256) v = 256;
    pool.nthreads = (int)v;
  }
  n = pool.nthreads;   /* read under the lock: pool_start may lower it */
  pthread_mutex_unlock(&pool.mu);
  return n;
}

/* A forked child has the caller's thread only: it starts a pool of its own. */
static void pool_after_fork(void) {
  pthread_mutex_init(&pool.mu, NULL);
  pthread_mutex_init(&pool.launch_mu, NULL);
  pthread_cond_init(&pool.wake, NULL);
  pthread_cond_init(&pool.done, NULL);
  pool.started = 0;
  pool.running = 0;
  pool.cur = NULL;
}

/* Starts the pool's threads (nthreads - 1 of them) once; returns how many OS
 * threads run blocks (the caller included), read under the lock. */
static int pool_start(void) {
  int i, rc = 0, n;
  static int atfork_done;
  pthread_mutex_lock(&pool.mu);
  if (!atfork_done) {
    pthread_atfork(NULL, NULL, pool_after_fork);
    atfork_done = 1;
  }
  if (!pool.started) {
    for (i = 1; i < pool.nthreads; i++) {
      pthread_t t;
      pthread_attr_t at;
      pthread_attr_init(&at);
      pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
      rc = pthread_create(&t, &at, pool_main, (void *)(uintptr_t)pool.gen);
      pthread_attr_destroy(&at);
      if (rc) { pool.nthreads = i; break; }
    }
    pool.started = 1;
  }
  n = pool.nthreads;
  pthread_mutex_unlock(&pool.mu);
  return n;
}

static _Thread_local int last_threads;
int ncc_emu_last_launch_threads(void) { return last_threads; }

int ncc_emu_launch(const ncc_kernel *k, ncc_dim3 grid, ncc_dim3 block, size_t shmem, void **args, char *err,
                   size_t errn) {
  job *j;
  unsigned long long nthr = (unsigned long long)block.x * block.y * block.z;
  int nt = ncc_emu_threads(), rc;
  if (!k || !k->name) { ncc_errf(err, errn, "launch: no kernel"); return NCC_EINTERNAL; }
  /* emu_block: none for a kernel that runs on fibers (barriers, warp collectives) */
  if (!k->emu_thread || (!k->emu_block && !(k->flags & (NCC_KF_BARRIER | NCC_KF_WARP)))) {
    ncc_errf(err, errn, "kernel %s has no CPU emulation in this build (build the model with -DNCC_EMU)", k->name);
    return NCC_EUSER;
  }
  /* the limits of a CUDA launch, so that emulation rejects what a GPU rejects */
  if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z || nthr > 1024 || block.z > 64 ||
      grid.y > 65535 || grid.z > 65535 || grid.x > 2147483647u) {
    ncc_errf(err, errn, "kernel %s: invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u)", k->name,
             grid.x, grid.y, grid.z, block.x, block.y, block.z);
    return NCC_EINTERNAL;
  }
  if (shmem > 227 * 1024) {
    ncc_errf(err, errn, "kernel %s: %zu bytes of dynamic shared memory exceed the 227 KiB of a block", k->name, shmem);
    return NCC_EINTERNAL;
  }
  j = calloc(1, sizeof *j);
  if (!j) { ncc_errf(err, errn, "emulator: out of memory"); return NCC_EINTERNAL; }
  j->k = k;
  j->grid = grid;
  j->block = block;
  j->shmem = shmem;
  j->args = args;
  j->nblocks = (long long)grid.x * grid.y * grid.z;
  atomic_init(&j->next, 0);
  atomic_init(&j->failed, 0);
  j->failblock = -1;
  atomic_init(&j->nthreads_used, 0);
  pthread_mutex_init(&j->mu, NULL);
  j->use_fibers = (k->flags & (NCC_KF_BARRIER | NCC_KF_WARP)) != 0;
  j->checked = ncc_emu_checked();
  j->dir = fiber_reverse() ? -1 : 1;
  /* The pool serves one launch at a time.  A launch that finds it busy (another
   * application thread's, on another device or model instance) runs its blocks
   * on its own thread instead of queueing: with several launching threads
   * every core is busy anyway, and no thread waits behind another's kernel. */
  if (nt > 1 && j->nblocks > 1 && pool_start() > 1 && pthread_mutex_trylock(&pool.launch_mu) == 0) {
    pthread_mutex_lock(&pool.mu);
    pool.cur = j;
    pool.running = pool.nthreads - 1;
    pool.gen++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
    run_job(j);
    pthread_mutex_lock(&pool.mu);
    while (pool.running > 0) pthread_cond_wait(&pool.done, &pool.mu);
    pool.cur = NULL;
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.launch_mu);
  } else {
    run_job(j);
  }
  last_threads = atomic_load(&j->nthreads_used);
  rc = 0;
  if (atomic_load(&j->failed)) {
    ncc_errf(err, errn, "%s", j->msg);
    rc = NCC_EINTERNAL;
  }
  pthread_mutex_destroy(&j->mu);
  free(j);
  return rc;
}
