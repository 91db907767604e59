/* test_checkpoint.c — what `ncc train` relies on in libnccrt's safetensors code:
 *   - 64-bit scalars (I64, F64) are saved and read back exactly;
 *   - ncc_load_safetensors_opt: optional tensors absent from the file are
 *     reported absent, required ones are an error listing all of them, extra
 *     tensors are an error unless NCC_ST_ALLOW_EXTRA, but a checkpoint's
 *     training state (step, epoch, rate, optimizer state of the wanted
 *     tensors) is skipped, so an inference build loads it; host/device targets;
 *   - saving is atomic: a save that fails for a full disk (a 64 KiB tmpfs when
 *     this process may mount one, and always RLIMIT_FSIZE in a child) returns
 *     an error naming the file, leaves the previous file byte-identical and
 *     no temporary file behind;
 *   - ncc_npy_map maps .npy files as they are (f32, i32, an int64 file made
 *     by hand) and refuses truncated ones naming the file;
 *   - a process killed with SIGKILL at random moments while saving over and
 *     over leaves a file that loads and is exactly the old or the new one.
 * Usage: test_checkpoint [WORKDIR]  (default: a fresh folder under $TMPDIR). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ncc_rt.h"

static char dir[512];

static void path_of(char *p, size_t n, const char *name) { snprintf(p, n, "%s/%s", dir, name); }

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  unsigned char *b = NULL;
  long sz;
  *n = 0;
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
    b = malloc((size_t)sz + 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) { free(b); b = NULL; }
    else *n = (size_t)sz;
  }
  fclose(f);
  return b;
}

/* files in d whose name contains ".tmp." */
static int count_tmp(const char *d) {
  DIR *dd = opendir(d);
  struct dirent *e;
  int n = 0;
  if (!dd) return -1;
  while ((e = readdir(dd)))
    if (strstr(e->d_name, ".tmp.")) n++;
  closedir(dd);
  return n;
}

static void test_scalars_and_optional(ncc_dev *dev) {
  char path[600], err[2048];
  float w[6] = {1, 2, 3, 4, 5, 6}, b[2] = {-1, 0.5f};
  int64_t step = 123456789012345LL, nbt = 7;
  double lr = 0.1 + 1e-17;   /* not a float: F64 must keep every bit */
  ncc_tensor_info t[5] = {
      {"fc.weight", NCC_F32, 2, {2, 3}}, {"fc.bias", NCC_F32, 1, {2}}, {"__step__", NCC_I64, 0, {0}},
      {"__lr__", NCC_F64, 0, {0}},       {"bn.num_batches_tracked", NCC_I64, 0, {0}},
  };
  const void *hp[5] = {w, b, &step, &lr, &nbt};
  path_of(path, sizeof path, "ckpt.safetensors");
  int rc = ncc_save_safetensors(path, t, 5, hp, err, sizeof err);
  CHECK(rc == 0, "save with I64/F64 scalars: %s", err);

  /* everything back, scalars on the host, the tensors on the device */
  float *dw = NULL, *db = NULL, hw[6], hb[2];
  int64_t step2 = 0, nbt2 = 0;
  double lr2 = 0;
  float mom[2] = {9, 9};
  CHECK(ncc_malloc(dev, (void **)&dw, sizeof hw) == 0 && ncc_malloc(dev, (void **)&db, sizeof hb) == 0, "malloc");
  ncc_st_want want[6] = {
      {{"fc.weight", NCC_F32, 2, {2, 3}}, dw, 0, 0},
      {{"fc.bias", NCC_F32, 1, {2}}, db, 0, 0},
      {{"__step__", NCC_I64, 0, {0}}, &step2, NCC_ST_HOST | NCC_ST_OPTIONAL, 0},
      {{"__lr__", NCC_F64, 0, {0}}, &lr2, NCC_ST_HOST | NCC_ST_OPTIONAL, 0},
      {{"bn.num_batches_tracked", NCC_I64, 0, {0}}, &nbt2, NCC_ST_HOST | NCC_ST_OPTIONAL, 0},
      {{"fc.bias.momentum_buffer", NCC_F32, 1, {2}}, mom, NCC_ST_HOST | NCC_ST_OPTIONAL, 0},
  };
  rc = ncc_load_safetensors_opt(dev, path, want, 6, 0, err, sizeof err);
  CHECK(rc == 0, "load_opt: %s", err);
  ncc_memcpy_d2h(dev, hw, dw, sizeof hw);
  ncc_memcpy_d2h(dev, hb, db, sizeof hb);
  CHECK(!memcmp(hw, w, sizeof w) && !memcmp(hb, b, sizeof b), "tensors differ after the round trip");
  CHECK(step2 == step, "__step__ %lld, wanted %lld", (long long)step2, (long long)step);
  CHECK(lr2 == lr, "__lr__ %.17g, wanted %.17g", lr2, lr);
  CHECK(nbt2 == 7, "num_batches_tracked %lld", (long long)nbt2);
  CHECK(want[0].present && want[1].present && want[2].present && want[3].present && want[4].present,
        "present flags of the tensors in the file");
  CHECK(!want[5].present && mom[0] == 9 && mom[1] == 9, "an absent optional tensor was touched or reported present");

  /* a required tensor missing: an error naming it (and only it) */
  ncc_st_want req[2] = {
      {{"fc.weight", NCC_F32, 2, {2, 3}}, dw, 0, 0},
      {{"fc.running_mean", NCC_F32, 1, {2}}, db, 0, 0},
  };
  rc = ncc_load_safetensors_opt(dev, path, req, 2, NCC_ST_ALLOW_EXTRA, err, sizeof err);
  CHECK(rc == NCC_EUSER && strstr(err, "missing: 'fc.running_mean'") && strstr(err, path) &&
            !strstr(err, "unexpected:"),
        "a missing required tensor: %s", err);
  /* extra tensors: an error without NCC_ST_ALLOW_EXTRA, fine with it; a
   * checkpoint's training state (num_batches_tracked, __step__, __epoch__,
   * __lr__) is skipped by a model that does not want it */
  ncc_st_want one[1] = {{{"fc.weight", NCC_F32, 2, {2, 3}}, dw, 0, 0}};
  rc = ncc_load_safetensors_opt(dev, path, one, 1, 0, err, sizeof err);
  CHECK(rc == NCC_EUSER && strstr(err, "unexpected: 'fc.bias'\n") && !strstr(err, "num_batches_tracked") &&
            !strstr(err, "__step__") && !strstr(err, "__lr__"),
        "extra tensors without ALLOW_EXTRA: %s", err);
  rc = ncc_load_safetensors_opt(dev, path, one, 1, NCC_ST_ALLOW_EXTRA, err, sizeof err);
  CHECK(rc == 0 && one[0].present, "extra tensors with ALLOW_EXTRA: %s", err);
  /* the plain loader (an inference build's M_load) takes a checkpoint of its model */
  memset(hw, 0, sizeof hw);
  ncc_memcpy_h2d(dev, dw, hw, sizeof hw);
  rc = ncc_load_safetensors(dev, path, t, 2, (void *const[]){dw, db}, err, sizeof err);
  ncc_memcpy_d2h(dev, hw, dw, sizeof hw);
  CHECK(rc == 0 && !memcmp(hw, w, sizeof w), "plain load of a checkpoint: %s", err);
  /* optimizer state under torch.optim's names is skipped when it belongs to a
   * wanted tensor, and unexpected when it does not */
  {
    float m1[6] = {0}, m2[6] = {0}, m3[2] = {0};
    ncc_tensor_info ot[5] = {
        {"fc.weight", NCC_F32, 2, {2, 3}}, {"fc.weight.exp_avg", NCC_F32, 2, {2, 3}},
        {"fc.weight.exp_avg_sq", NCC_F32, 2, {2, 3}}, {"fc.bias.momentum_buffer", NCC_F32, 1, {2}},
        {"__epoch__", NCC_I64, 0, {0}},
    };
    const void *op[5] = {w, m1, m2, m3, &step};
    char opath[600];
    path_of(opath, sizeof opath, "opt.safetensors");
    rc = ncc_save_safetensors(opath, ot, 5, op, err, sizeof err);
    CHECK(rc == 0, "save with optimizer state: %s", err);
    rc = ncc_load_safetensors(dev, opath, t, 1, (void *const[]){dw}, err, sizeof err);
    CHECK(rc == NCC_EUSER && strstr(err, "unexpected: 'fc.bias.momentum_buffer'\n") && !strstr(err, "exp_avg") &&
              !strstr(err, "__epoch__"),
          "optimizer state of a tensor the model does not have: %s", err);
    ncc_tensor_info tb[2] = {{"fc.weight", NCC_F32, 2, {2, 3}}, {"fc.bias", NCC_F32, 1, {2}}};
    ncc_st_want wb[2] = {{tb[0], dw, 0, 0}, {tb[1], db, NCC_ST_OPTIONAL, 0}};
    rc = ncc_load_safetensors_opt(dev, opath, wb, 2, 0, err, sizeof err);
    CHECK(rc == 0 && wb[0].present && !wb[1].present, "optimizer state of wanted tensors skipped: %s", err);
  }
  /* an optional tensor present with the wrong shape is still an error */
  ncc_st_want badshape[1] = {{{"__step__", NCC_I64, 1, {2}}, &step2, NCC_ST_HOST | NCC_ST_OPTIONAL, 0}};
  rc = ncc_load_safetensors_opt(dev, path, badshape, 1, NCC_ST_ALLOW_EXTRA, err, sizeof err);
  CHECK(rc == NCC_EUSER && strstr(err, "wrong shape: '__step__' is [] in the file, the model wants [2]"),
        "wrong shape of an optional tensor: %s", err);
  /* F32 in the file, I64 wanted: a dtype error; F32 into F64: converted */
  ncc_st_want kinds[2] = {{{"fc.bias", NCC_I64, 1, {2}}, &step2, NCC_ST_HOST, 0}};
  rc = ncc_load_safetensors_opt(dev, path, kinds, 1, NCC_ST_ALLOW_EXTRA, err, sizeof err);
  CHECK(rc == NCC_EUSER && strstr(err, "wrong dtype: 'fc.bias' is F32"), "F32 as I64: %s", err);
  double bd[2] = {0, 0};
  kinds[0] = (ncc_st_want){{"fc.bias", NCC_F64, 1, {2}}, bd, NCC_ST_HOST, 0};
  rc = ncc_load_safetensors_opt(dev, path, kinds, 1, NCC_ST_ALLOW_EXTRA, err, sizeof err);
  CHECK(rc == 0 && bd[0] == -1 && bd[1] == 0.5, "F32 into F64: %s (%g %g)", err, bd[0], bd[1]);
  /* I64 to the device is refused (host-only dtype) */
  kinds[0] = (ncc_st_want){{"__step__", NCC_I64, 0, {0}}, dw, 0, 0};
  rc = ncc_load_safetensors_opt(dev, path, kinds, 1, NCC_ST_ALLOW_EXTRA, err, sizeof err);
  CHECK(rc == NCC_EUSER && strstr(err, "host memory only"), "I64 to the device: %s", err);
  /* everything on the host, no device at all */
  float hw2[6];
  kinds[0] = (ncc_st_want){{"fc.weight", NCC_F32, 2, {2, 3}}, hw2, NCC_ST_HOST, 0};
  rc = ncc_load_safetensors_opt(NULL, path, kinds, 1, NCC_ST_ALLOW_EXTRA, err, sizeof err);
  CHECK(rc == 0 && !memcmp(hw2, w, sizeof w), "host-only load without a device: %s", err);
  ncc_free(dev, dw);
  ncc_free(dev, db);
}

/* A big enough checkpoint that a kill or a full disk lands mid-write. */
enum { BIG = 256 * 1024 };   /* floats: 1 MiB */
static float *big_a, *big_b;

static int save_big(const char *path, const float *data, int64_t stepv, char *err, size_t errn) {
  ncc_tensor_info t[2] = {{"w", NCC_F32, 1, {BIG}}, {"__step__", NCC_I64, 0, {0}}};
  const void *hp[2] = {data, &stepv};
  return ncc_save_safetensors(path, t, 2, hp, err, errn);
}

/* 0 when path holds exactly the checkpoint of data (step stepv) */
static int is_checkpoint(const char *path, const float *data, int64_t stepv, float *scratch) {
  char err[1024];
  int64_t s = -1;
  ncc_st_want w[2] = {{{"w", NCC_F32, 1, {BIG}}, scratch, NCC_ST_HOST, 0},
                      {{"__step__", NCC_I64, 0, {0}}, &s, NCC_ST_HOST, 0}};
  if (ncc_load_safetensors_opt(NULL, path, w, 2, 0, err, sizeof err) != 0) return -1;
  return s == stepv && !memcmp(scratch, data, sizeof(float) * BIG) ? 0 : -1;
}

/* Saves into a folder whose file system fills up mid-write: the old file must
 * be byte-identical afterwards, the error must name it, no temporary is left. */
static void full_disk_in(const char *d, const char *how) {
  char path[700], err[2048];
  size_t n0, n1;
  float small[4] = {1, 2, 3, 4};
  ncc_tensor_info t = {"w", NCC_F32, 1, {4}};
  const void *hp[1] = {small};
  snprintf(path, sizeof path, "%s/full.safetensors", d);
  int rc = ncc_save_safetensors(path, &t, 1, hp, err, sizeof err);
  CHECK(rc == 0, "%s: the first (small) save: %s", how, err);
  unsigned char *before = slurp(path, &n0);
  rc = save_big(path, big_a, 1, err, sizeof err);
  CHECK(rc == NCC_EUSER, "%s: a 1 MiB save onto a full disk succeeded", how);
  CHECK(strstr(err, path) != NULL && (strstr(err, "No space") || strstr(err, "too large")),
        "%s: the error should name the file and the reason: %s", how, err);
  unsigned char *after = slurp(path, &n1);
  CHECK(before && after && n0 == n1 && !memcmp(before, after, n0), "%s: the previous file changed", how);
  CHECK(count_tmp(d) == 0, "%s: a temporary file was left behind", how);
  free(before);
  free(after);
}

static void test_full_disk(void) {
  char sub[600];
  /* a 64 KiB tmpfs, where this process may mount one (root, a mount namespace) */
  snprintf(sub, sizeof sub, "%s/tmpfs", dir);
  mkdir(sub, 0755);
  if (mount("tmpfs", sub, "tmpfs", 0, "size=64k") == 0) {
    full_disk_in(sub, "tmpfs of 64 KiB");
    umount2(sub, MNT_DETACH);
    printf("full disk: 64 KiB tmpfs checked\n");
  } else {
    printf("full disk: cannot mount a tmpfs (%s); RLIMIT_FSIZE only\n", strerror(errno));
  }
  rmdir(sub);
  /* RLIMIT_FSIZE in a child: write() fails with EFBIG past 128 KiB */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit rl = {128 * 1024, 128 * 1024};
    failures = 0;   /* the parent's count is the parent's */
    signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &rl);
    full_disk_in(dir, "RLIMIT_FSIZE of 128 KiB");
    fflush(NULL);
    _exit(failures ? 1 : 0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the RLIMIT_FSIZE child failed (status %d)", st);
}

/* A child saves A, B, A, B ... as fast as it can; it is killed at a random
 * moment; the file must then be a whole A or a whole B. */
static void test_kill_loop(void) {
  char path[600], err[1024];
  float *scratch = malloc(sizeof(float) * BIG);
  int i, kills = 0, seen_a = 0, seen_b = 0;
  struct timespec ts;
  path_of(path, sizeof path, "killed.safetensors");
  CHECK(save_big(path, big_a, 1, err, sizeof err) == 0, "first save: %s", err);
  srand(12345);
  for (i = 0; i < 50; i++) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      char e2[1024];
      for (unsigned k = 0;; k++)
        if (save_big(path, k & 1 ? big_a : big_b, k & 1 ? 1 : 2, e2, sizeof e2)) _exit(3);
    }
    ts.tv_sec = 0;
    ts.tv_nsec = (long)(rand() % 30000) * 1000L;   /* 0 to 30 ms */
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    kills += WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
    if (is_checkpoint(path, big_a, 1, scratch) == 0) seen_a++;
    else if (is_checkpoint(path, big_b, 2, scratch) == 0) seen_b++;
    else CHECK(0, "after kill %d the file is neither the old nor the new checkpoint", i);
    /* the killed writer's temporary (PATH.tmp.<pid>) may remain: remove it */
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)pid);
    unlink(tmp);
  }
  CHECK(kills == 50, "only %d of 50 children died of SIGKILL", kills);
  printf("kill loop: 50 kills, file whole each time (%d times A, %d times B)\n", seen_a, seen_b);
  free(scratch);
}

static void test_npy_map(void) {
  char path[600], err[1024];
  float x[2][3] = {{1, 2, 3}, {4, 5, 6}};
  int32_t y[4] = {3, -1, 7, 0};
  int64_t xs[2] = {2, 3}, ys[1] = {4};
  ncc_npy_mapped a;
  path_of(path, sizeof path, "x.npy");
  CHECK(ncc_npy_write(path, NCC_F32, 2, xs, x, err, sizeof err) == 0, "npy write: %s", err);
  CHECK(ncc_npy_map(path, &a, err, sizeof err) == 0, "npy map: %s", err);
  CHECK(a.dtype == NCC_F32 && a.esize == 4 && a.rank == 2 && a.shape[0] == 2 && a.shape[1] == 3 &&
            !memcmp(a.data, x, sizeof x),
        "f32 [2, 3] mapped as dtype %d rank %d", a.dtype, a.rank);
  ncc_npy_unmap(&a);
  ncc_npy_unmap(&a);   /* twice is harmless */
  path_of(path, sizeof path, "y.npy");
  CHECK(ncc_npy_write(path, NCC_I32, 1, ys, y, err, sizeof err) == 0, "npy write: %s", err);
  CHECK(ncc_npy_map(path, &a, err, sizeof err) == 0 && a.dtype == NCC_I32 && a.shape[0] == 4 &&
            !memcmp(a.data, y, sizeof y),
        "i32 [4]: %s", err);
  ncc_npy_unmap(&a);
  /* int64 as numpy writes it: mapped as I64, not converted */
  {
    const char hdr[] = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }";
    unsigned char buf[128 + 24];
    int64_t v[3] = {5, -2, 1LL << 40};
    size_t hl = 128 - 10;
    FILE *f;
    memset(buf, ' ', sizeof buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)hl;
    buf[9] = 0;
    memcpy(buf + 10, hdr, sizeof hdr - 1);
    buf[127] = '\n';
    memcpy(buf + 128, v, sizeof v);
    path_of(path, sizeof path, "y64.npy");
    f = fopen(path, "wb");
    fwrite(buf, 1, sizeof buf, f);
    fclose(f);
    CHECK(ncc_npy_map(path, &a, err, sizeof err) == 0 && a.dtype == NCC_I64 && a.esize == 8 && a.rank == 1 &&
              a.shape[0] == 3 && !memcmp(a.data, v, sizeof v),
          "i64 [3]: %s", err);
    ncc_npy_unmap(&a);
    /* truncated by one element */
    f = fopen(path, "wb");
    fwrite(buf, 1, sizeof buf - 8, f);
    fclose(f);
    CHECK(ncc_npy_map(path, &a, err, sizeof err) == NCC_EUSER && strstr(err, path) && a.base == NULL,
          "a truncated .npy: %s", err);
  }
  path_of(path, sizeof path, "none.npy");
  CHECK(ncc_npy_map(path, &a, err, sizeof err) == NCC_EUSER && strstr(err, "none.npy"), "a missing .npy: %s", err);
}

int main(int argc, char **argv) {
  ncc_dev *dev = NULL;
  if (argc > 1) snprintf(dir, sizeof dir, "%s", argv[1]);
  else {
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ncc-ckpt-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
  }
  if (ncc_dev_open(&dev, NCC_DEV_EMU, NULL, NULL) != 0) {
    fprintf(stderr, "cannot open the emulator: %s\n", dev ? ncc_dev_error(dev) : "?");
    return 1;
  }
  big_a = malloc(sizeof(float) * BIG);
  big_b = malloc(sizeof(float) * BIG);
  for (int i = 0; i < BIG; i++) { big_a[i] = (float)i; big_b[i] = -(float)i - 0.5f; }
  test_scalars_and_optional(dev);
  test_npy_map();
  test_full_disk();
  test_kill_loop();
  ncc_dev_close(dev);
  free(big_a);
  free(big_b);
  if (argc <= 1) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (!failures && system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", dir);
  }
  printf("%s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}
