/* fuzz_safetensors.c — libFuzzer target for the safetensors reader: any byte
 * string must give 0 or NCC_EUSER with a message, never a crash, a hang or
 * an out-of-bounds read.  The header index and the matching run on the buffer
 * (fast); the whole ncc_load_safetensors path (mmap, conversion, copy to an
 * emu device) runs on the same bytes through a memfd. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "rt_internal.h"

static ncc_tensor_info mk(const char *name, int dtype, int rank, int64_t a, int64_t b) {
  ncc_tensor_info t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.dtype = dtype;
  t.rank = rank;
  t.shape[0] = a;
  t.shape[1] = b;
  return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static ncc_dev *dev;
  static int fd = -1;
  ncc_tensor_info p[3];
  ncc_st_entry *e = NULL;
  int ne = 0, map[3], rc;
  size_t off;
  char err[2048], path[64];
  float a[6], b[4];
  int32_t c[1];
  void *ptrs[3] = {a, b, c};
  p[0] = mk("a", NCC_F32, 2, 2, 3);
  p[1] = mk("b", NCC_F32, 1, 4, 0);
  p[2] = mk("c", NCC_I32, 1, 1, 0);
  rc = ncc_st_index(data, size, "fuzz", &e, &ne, &off, err, sizeof err);
  if (rc == 0) {
    ncc_st_match(e, ne, "fuzz", p, 3, map, err, sizeof err);
    ncc_st_free(e, ne);
  } else if (!err[0]) {
    abort();   /* an error without a message */
  }
  if (!dev && ncc_dev_open(&dev, NCC_DEV_EMU, NULL, NULL)) abort();
  if (fd < 0 && (fd = memfd_create("fuzz.safetensors", 0)) < 0) abort();
  if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  rc = ncc_load_safetensors(dev, path, p, 3, ptrs, err, sizeof err);
  if (rc != 0 && (rc != NCC_EUSER || !err[0])) abort();
  return 0;
}
