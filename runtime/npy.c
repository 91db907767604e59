/* npy.c — NumPy .npy files, the tensors in and out of `ncc run`.
 *
 * The reader takes versions 1.0, 2.0 and 3.0, parses the header dict (a
 * Python literal: 'descr', 'fortran_order', 'shape', exactly those keys, as
 * numpy itself insists) with a small hand parser, and checks the data size
 * against the file exactly: a truncated or padded file is an error, not a
 * guess.  Little-endian f4, f2, i4, i1 are returned as they are; f8 becomes
 * f32 and i8 becomes i32 (checked for range), u1 becomes i32.  Errors name the
 * file and what is wrong.  The writer uses version 1.0 (2.0 for huge headers),
 * pads the header to 64 bytes as numpy does, and writes atomically.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "rt_internal.h"

enum { K_F4, K_F2, K_I4, K_I1, K_F8, K_I8, K_U1 };
static const struct { const char *descr; int kind, size, dtype; } npy_types[] = {
    {"<f4", K_F4, 4, NCC_F32}, {"<f2", K_F2, 2, NCC_F16}, {"<i4", K_I4, 4, NCC_I32}, {"|i1", K_I1, 1, NCC_I8},
    {"<f8", K_F8, 8, NCC_F32}, {"<i8", K_I8, 8, NCC_I32}, {"|u1", K_U1, 1, NCC_I32},
};

typedef struct cur { const char *p, *end; } cur;
static void ws(cur *c) { while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++; }
static int eat(cur *c, char ch) {
  ws(c);
  if (c->p < c->end && *c->p == ch) { c->p++; return 1; }
  return 0;
}
/* a quoted Python string without escapes */
static int pystr(cur *c, char *out, size_t n) {
  char q;
  size_t l = 0;
  ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
  q = *c->p++;
  while (c->p < c->end && *c->p != q) {
    if (*c->p == '\\' || l + 1 >= n) return 0;
    out[l++] = *c->p++;
  }
  if (c->p >= c->end) return 0;
  c->p++;
  out[l] = 0;
  return 1;
}

int ncc_npy_parse(const unsigned char *buf, size_t n, const char *path, int *dtype, int *src_kind, int *rank,
                  int64_t shape[8], size_t *data_off, char *err, size_t errn) {
  size_t hlen, hstart;
  int major, i, have_d = 0, have_f = 0, have_s = 0, ti = -1;
  cur c;
  double numel = 1;
  char key[64], val[64];
  if (n < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) {
    ncc_errf(err, errn, "%s: not a .npy file (no \\x93NUMPY magic)", path);
    return NCC_EUSER;
  }
  major = buf[6];
  if (major == 1) { hlen = (size_t)buf[8] | (size_t)buf[9] << 8; hstart = 10; }
  else if (major == 2 || major == 3) {
    if (n < 12) { ncc_errf(err, errn, "%s: .npy file truncated in its header length", path); return NCC_EUSER; }
    hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    hstart = 12;
  } else {
    ncc_errf(err, errn, "%s: .npy format version %d.%d is not supported (1.0, 2.0, 3.0)", path, major, buf[7]);
    return NCC_EUSER;
  }
  if (hlen > n - hstart) {
    ncc_errf(err, errn, "%s: .npy header claims %zu bytes, the file has %zu after the preamble", path, hlen, n - hstart);
    return NCC_EUSER;
  }
  c.p = (const char *)buf + hstart;
  c.end = c.p + hlen;
  *rank = 0;
  if (!eat(&c, '{')) goto bad;
  for (;;) {
    if (eat(&c, '}')) break;
    if (!pystr(&c, key, sizeof key) || !eat(&c, ':')) goto bad;
    if (strcmp(key, "descr") == 0 && !have_d) {
      have_d = 1;
      if (!pystr(&c, val, sizeof val)) {
        ncc_errf(err, errn, "%s: .npy 'descr' must be a simple type string (structured dtypes are not supported)", path);
        return NCC_EUSER;
      }
      for (i = 0; i < (int)(sizeof npy_types / sizeof npy_types[0]); i++)
        if (strcmp(val, npy_types[i].descr) == 0) ti = i;
      if (ti < 0 && strcmp(val, "<u1") == 0) ti = 6;
      if (ti < 0 && strcmp(val, "<i1") == 0) ti = 3;
      if (ti < 0) {
        ncc_errf(err, errn, "%s: .npy dtype '%s' is not supported (<f4, <f2, <f8, <i4, <i8, |i1, |u1; little-endian)",
                 path, val);
        return NCC_EUSER;
      }
    } else if (strcmp(key, "fortran_order") == 0 && !have_f) {
      have_f = 1;
      ws(&c);
      if (c.end - c.p >= 5 && memcmp(c.p, "False", 5) == 0) c.p += 5;
      else if (c.end - c.p >= 4 && memcmp(c.p, "True", 4) == 0) {
        ncc_errf(err, errn, "%s: .npy array is in Fortran order; save it C-contiguous (np.ascontiguousarray)", path);
        return NCC_EUSER;
      } else goto bad;
    } else if (strcmp(key, "shape") == 0 && !have_s) {
      have_s = 1;
      if (!eat(&c, '(')) goto bad;
      for (;;) {
        long long v = 0;
        int digits = 0;
        if (eat(&c, ')')) break;
        if (*rank >= 8) { ncc_errf(err, errn, "%s: .npy array has more than 8 dimensions", path); return NCC_EUSER; }
        ws(&c);
        while (c.p < c.end && isdigit((unsigned char)*c.p)) {
          if (v > (1LL << 50)) goto bad;
          v = v * 10 + (*c.p++ - '0');
          digits++;
        }
        if (c.p < c.end && *c.p == 'L') c.p++;   /* Python 2 longs */
        if (!digits) goto bad;
        shape[(*rank)++] = v;
        numel *= (double)v;
        if (!eat(&c, ',')) {
          if (!eat(&c, ')')) goto bad;
          break;
        }
      }
    } else {
      ncc_errf(err, errn, "%s: .npy header has an unexpected or repeated key '%s'", path, key);
      return NCC_EUSER;
    }
    if (!eat(&c, ',')) {
      if (!eat(&c, '}')) goto bad;
      break;
    }
  }
  if (!have_d || !have_f || !have_s) {
    ncc_errf(err, errn, "%s: .npy header lacks %s", path, !have_d ? "'descr'" : !have_f ? "'fortran_order'" : "'shape'");
    return NCC_EUSER;
  }
  *data_off = hstart + hlen;
  if (numel * npy_types[ti].size != (double)(n - *data_off)) {
    ncc_errf(err, errn, "%s: .npy data is %zu bytes, shape and dtype %s want %.0f", path, n - *data_off,
             npy_types[ti].descr, numel * npy_types[ti].size);
    return NCC_EUSER;
  }
  *dtype = npy_types[ti].dtype;
  *src_kind = npy_types[ti].kind;
  return 0;
bad:
  ncc_errf(err, errn, "%s: .npy header is not a valid dict literal near byte %ld", path,
           (long)(c.p - (const char *)buf));
  return NCC_EUSER;
}

int ncc_npy_read(const char *path, int *dtype, int *rank, int64_t shape[8], void **data, char *err, size_t errn) {
  FILE *f;
  unsigned char *buf = NULL;
  long sz;
  size_t off, i, numel, esz;
  int kind, rc;
  *data = NULL;
  f = fopen(path, "rb");
  if (!f) { ncc_errf(err, errn, "%s: cannot open: %s", path, strerror(errno)); return NCC_EUSER; }
  if (fseek(f, 0, SEEK_END) != 0 || (sz = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    ncc_errf(err, errn, "%s: cannot read (not a regular file?)", path);
    fclose(f);
    return NCC_EUSER;
  }
  buf = malloc((size_t)sz + 1);
  if (!buf || fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
    ncc_errf(err, errn, "%s: cannot read %ld bytes: %s", path, sz, buf ? strerror(errno) : "out of memory");
    free(buf);
    fclose(f);
    return NCC_EUSER;
  }
  fclose(f);
  rc = ncc_npy_parse(buf, (size_t)sz, path, dtype, &kind, rank, shape, &off, err, errn);
  if (rc) { free(buf); return rc; }
  esz = kind == K_F8 || kind == K_I8 ? 8 : kind == K_F4 || kind == K_I4 ? 4 : kind == K_F2 ? 2 : 1;
  numel = ((size_t)sz - off) / esz;
  if (kind == K_F8 || kind == K_I8 || kind == K_U1) {
    void *out = malloc(numel * 4 + 1);
    if (!out) { free(buf); ncc_errf(err, errn, "%s: out of memory", path); return NCC_EUSER; }
    for (i = 0; i < numel; i++) {
      const unsigned char *p = buf + off + i * esz;
      if (kind == K_F8) {
        double v;
        memcpy(&v, p, 8);
        ((float *)out)[i] = (float)v;
      } else if (kind == K_I8) {
        int64_t v;
        memcpy(&v, p, 8);
        if (v < INT32_MIN || v > INT32_MAX) {
          ncc_errf(err, errn, "%s: element %zu (%lld) of the int64 array does not fit in int32", path, i, (long long)v);
          free(out);
          free(buf);
          return NCC_EUSER;
        }
        ((int32_t *)out)[i] = (int32_t)v;
      } else {
        ((int32_t *)out)[i] = *p;
      }
    }
    free(buf);
    *data = out;
    return 0;
  }
  /* the data as it is: move it to the front of the buffer we own */
  memmove(buf, buf + off, (size_t)sz - off);
  *data = buf;
  return 0;
}

int ncc_npy_map(const char *path, ncc_npy_mapped *a, char *err, size_t errn) {
  struct stat st;
  int fd, dtype, kind, rc;
  size_t off;
  memset(a, 0, sizeof *a);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) { ncc_errf(err, errn, "%s: cannot open: %s", path, strerror(errno)); return NCC_EUSER; }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ncc_errf(err, errn, "%s: not a regular file", path);
    close(fd);
    return NCC_EUSER;
  }
  if (st.st_size < 10) {
    ncc_errf(err, errn, "%s: not a .npy file (%lld bytes)", path, (long long)st.st_size);
    close(fd);
    return NCC_EUSER;
  }
  a->len = (size_t)st.st_size;
  a->base = mmap(NULL, a->len, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (a->base == MAP_FAILED) {
    a->base = NULL;
    ncc_errf(err, errn, "%s: cannot map: %s", path, strerror(errno));
    return NCC_EUSER;
  }
  rc = ncc_npy_parse((const unsigned char *)a->base, a->len, path, &dtype, &kind, &a->rank, a->shape, &off, err, errn);
  if (rc) { ncc_npy_unmap(a); return rc; }
  switch (kind) {
    case K_F4: a->dtype = NCC_F32; a->esize = 4; break;
    case K_F2: a->dtype = NCC_F16; a->esize = 2; break;
    case K_I4: a->dtype = NCC_I32; a->esize = 4; break;
    case K_I1: a->dtype = NCC_I8; a->esize = 1; break;
    case K_F8: a->dtype = NCC_F64; a->esize = 8; break;
    case K_I8: a->dtype = NCC_I64; a->esize = 8; break;
    default: a->dtype = NCC_U8; a->esize = 1; break;
  }
  a->data = (const unsigned char *)a->base + off;
  return 0;
}

void ncc_npy_unmap(ncc_npy_mapped *a) {
  if (a->base) munmap(a->base, a->len);
  memset(a, 0, sizeof *a);
}

int ncc_npy_write(const char *path, int dtype, int rank, const int64_t *shape, const void *data, char *err, size_t errn) {
  const char *descr;
  char hdr[65536 + 128], dict[2048];
  size_t dl, total, esz, numel = 1, pre;
  int i;
  const void *parts[2];
  size_t sizes[2];
  switch (dtype) {
    case NCC_F32: descr = "<f4"; esz = 4; break;
    case NCC_F16: descr = "<f2"; esz = 2; break;
    case NCC_I32: descr = "<i4"; esz = 4; break;
    case NCC_I8: descr = "|i1"; esz = 1; break;
    default:
      ncc_errf(err, errn, "%s: dtype %d has no .npy equivalent (bf16 is not a numpy type)", path, dtype);
      return NCC_EUSER;
  }
  if (rank < 0 || rank > 8) { ncc_errf(err, errn, "%s: rank %d out of range", path, rank); return NCC_EUSER; }
  dl = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (i = 0; i < rank; i++) {
    if (shape[i] < 0) { ncc_errf(err, errn, "%s: negative dimension", path); return NCC_EUSER; }
    dl += (size_t)snprintf(dict + dl, sizeof dict - dl, "%s%lld", i ? ", " : "", (long long)shape[i]);
    numel *= (size_t)shape[i];
  }
  dl += (size_t)snprintf(dict + dl, sizeof dict - dl, "%s), }", rank == 1 ? "," : "");
  /* version 1.0: 10-byte preamble; pad with spaces and a final newline to a multiple of 64 */
  pre = 10;
  total = (pre + dl + 1 + 63) / 64 * 64;
  memcpy(hdr, "\x93NUMPY\x01\x00", 8);
  hdr[8] = (char)((total - pre) & 0xff);
  hdr[9] = (char)(((total - pre) >> 8) & 0xff);
  memcpy(hdr + pre, dict, dl);
  memset(hdr + pre + dl, ' ', total - pre - dl - 1);
  hdr[total - 1] = '\n';
  parts[0] = hdr;
  sizes[0] = total;
  parts[1] = data;
  sizes[1] = numel * esz;
  if (sizes[1] && !data) { ncc_errf(err, errn, "%s: no data", path); return NCC_EUSER; }
  return ncc_write_atomic(path, parts, sizes, 2, err, errn);
}
