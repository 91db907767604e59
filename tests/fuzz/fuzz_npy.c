/* fuzz_npy.c — libFuzzer target for the .npy reader: any byte string must
 * give 0 or NCC_EUSER with a message, never a crash or an out-of-bounds read.
 * The header parser runs on the buffer; ncc_npy_read (conversion included)
 * on the same bytes through a memfd. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "rt_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int fd = -1;
  int dt, kind, rank, rc;
  int64_t shape[8];
  size_t off;
  char err[1024], path[64];
  void *out = NULL;
  err[0] = 0;
  rc = ncc_npy_parse(data, size, "fuzz", &dt, &kind, &rank, shape, &off, err, sizeof err);
  if (rc != 0 && !err[0]) abort();
  if (rc == 0 && (off > size || rank < 0 || rank > 8)) abort();
  if (fd < 0 && (fd = memfd_create("fuzz.npy", 0)) < 0) abort();
  if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  err[0] = 0;
  rc = ncc_npy_read(path, &dt, &rank, shape, &out, err, sizeof err);
  if (rc != 0 && (rc != NCC_EUSER || !err[0])) abort();
  free(out);
  return 0;
}
