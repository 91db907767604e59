/* safetensors.c — reading and writing weights and checkpoints in the
 * safetensors format (8-byte little-endian header length, a JSON header of
 * {name: {dtype, shape, data_offsets}}, then raw little-endian data), so that
 * PyTorch state_dicts load directly.
 *
 * A file is untrusted input: the header length is checked against the file
 * size, the JSON against the format (every field, every offset inside the
 * data area, no two tensors overlapping, byte size = numel x dtype size)
 * before anything is copied, and every complaint names the file.  Matching
 * against the model lists ALL missing, unexpected and mis-shaped tensors in
 * one message, since fixing them one run at a time is miserable.  Writes are
 * atomic: temp file in the same directory, fsync, rename, fsync of the
 * directory, so that a crash never leaves a torn checkpoint.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ncc_emu.h"     /* the f16/bf16 conversions */
#include "rt_internal.h"

static const struct { const char *name; int size; } st_dtypes[] = {
    {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}, {"I64", 8}, {"I32", 4},
    {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1},
};
enum { ST_F32, ST_F16, ST_BF16, ST_F64, ST_I64, ST_I32, ST_I16, ST_I8, ST_U8, ST_BOOL, ST_NDT };

static int st_dtype(const char *s) {
  int i;
  for (i = 0; i < ST_NDT; i++)
    if (strcmp(s, st_dtypes[i].name) == 0) return i;
  return -1;
}

/* a JSON number that is a non-negative integer below 2^53 (exact in a double);
 * the range is checked before any cast, which would be undefined beyond it */
static int is_count(const cJSON *d) {
  return cJSON_IsNumber(d) && d->valuedouble >= 0 && d->valuedouble <= 9.0e15 &&
         d->valuedouble == floor(d->valuedouble);
}

static int cmp_begin(const void *a, const void *b) {
  const ncc_st_entry *x = (const ncc_st_entry *)a, *y = (const ncc_st_entry *)b;
  return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Appends to a bounded message without overflowing it. */
static void cat(char *err, size_t errn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void cat(char *err, size_t errn, const char *fmt, ...) {
  size_t l = strlen(err);
  va_list ap;
  if (l + 1 >= errn) return;
  va_start(ap, fmt);
  vsnprintf(err + l, errn - l, fmt, ap);
  va_end(ap);
}

void ncc_st_free(ncc_st_entry *e, int n) {
  int i;
  if (!e) return;
  for (i = 0; i < n; i++) free(e[i].name);
  free(e);
}

int ncc_st_index(const unsigned char *buf, size_t n, const char *path, ncc_st_entry **out, int *nout, size_t *data_off,
                 char *err, size_t errn) {
  uint64_t hlen = 0;
  size_t datasz;
  cJSON *root = NULL, *it;
  ncc_st_entry *e = NULL;
  int ne = 0, cap = 0, i, rc = NCC_EUSER;
  *out = NULL;
  *nout = 0;
  if (n < 8) {
    ncc_errf(err, errn, "%s: not a safetensors file: %zu bytes, shorter than the 8-byte header length", path, n);
    return NCC_EUSER;
  }
  for (i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
  if (hlen < 2 || hlen > n - 8 || hlen > (100u << 20)) {
    ncc_errf(err, errn,
             "%s: not a safetensors file: the header claims %llu bytes but the file has %zu after the length",
             path, (unsigned long long)hlen, n - 8);
    return NCC_EUSER;
  }
  *data_off = 8 + (size_t)hlen;
  datasz = n - *data_off;
  root = cJSON_ParseWithLength((const char *)buf + 8, (size_t)hlen);
  if (!root) {
    const char *ep = cJSON_GetErrorPtr();
    long at = ep ? (long)(ep - (const char *)buf) : -1;
    ncc_errf(err, errn, "%s: the safetensors header is not valid JSON (near byte %ld)", path, at);
    return NCC_EUSER;
  }
  if (!cJSON_IsObject(root)) {
    ncc_errf(err, errn, "%s: the safetensors header is not a JSON object", path);
    goto out;
  }
  for (it = root->child; it; it = it->next) {
    cJSON *dt, *sh, *off, *d;
    ncc_st_entry *x;
    double numel = 1;
    uint64_t bytes;
    if (!it->string) { ncc_errf(err, errn, "%s: header entry without a name", path); goto out; }
    if (strcmp(it->string, "__metadata__") == 0) continue;
    if (!cJSON_IsObject(it)) { ncc_errf(err, errn, "%s: tensor '%s': entry is not an object", path, it->string); goto out; }
    dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
    sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
    off = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off)) {
      ncc_errf(err, errn, "%s: tensor '%s': needs \"dtype\" (string), \"shape\" (array) and \"data_offsets\" (array)",
               path, it->string);
      goto out;
    }
    for (i = 0; i < ne; i++)
      if (strcmp(e[i].name, it->string) == 0) {
        ncc_errf(err, errn, "%s: tensor '%s' appears twice in the header", path, it->string);
        goto out;
      }
    if (ne == cap) {
      ncc_st_entry *ng = realloc(e, sizeof *e * (size_t)(cap = cap ? 2 * cap : 16));
      if (!ng) { ncc_errf(err, errn, "%s: out of memory", path); goto out; }
      e = ng;
    }
    x = &e[ne];
    memset(x, 0, sizeof *x);
    if (!(x->name = strdup(it->string))) { ncc_errf(err, errn, "%s: out of memory", path); goto out; }
    ne++;
    if ((x->dtype = st_dtype(dt->valuestring)) < 0) {
      ncc_errf(err, errn, "%s: tensor '%s': unknown dtype \"%.32s\" (F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL)",
               path, it->string, dt->valuestring);
      goto out;
    }
    x->rank = cJSON_GetArraySize(sh);
    if (x->rank > 8) {
      ncc_errf(err, errn, "%s: tensor '%s': rank %d, at most 8 supported", path, it->string, x->rank);
      goto out;
    }
    i = 0;
    cJSON_ArrayForEach(d, sh) {
      if (!is_count(d)) {
        ncc_errf(err, errn, "%s: tensor '%s': shape[%d] is not a non-negative integer", path, it->string, i);
        goto out;
      }
      x->shape[i++] = (int64_t)d->valuedouble;
      numel *= d->valuedouble;
    }
    if (cJSON_GetArraySize(off) != 2 || !is_count(off->child) || !is_count(off->child->next)) {
      ncc_errf(err, errn, "%s: tensor '%s': data_offsets must be two non-negative integers [begin, end]", path,
               it->string);
      goto out;
    }
    x->begin = (uint64_t)off->child->valuedouble;
    x->end = (uint64_t)off->child->next->valuedouble;
    if (x->begin > x->end || x->end > datasz) {
      ncc_errf(err, errn, "%s: tensor '%s': data_offsets [%llu, %llu] outside the data area of %zu bytes", path,
               it->string, (unsigned long long)x->begin, (unsigned long long)x->end, datasz);
      goto out;
    }
    bytes = x->end - x->begin;
    if (numel * st_dtypes[x->dtype].size != (double)bytes) {
      ncc_errf(err, errn, "%s: tensor '%s': %llu bytes of data for %.0f elements of %s (%d bytes each)", path,
               it->string, (unsigned long long)bytes, numel, st_dtypes[x->dtype].name, st_dtypes[x->dtype].size);
      goto out;
    }
    x->numel = (int64_t)numel;
  }
  if (ne > 1) {
    ncc_st_entry *s = malloc(sizeof *s * (size_t)ne);
    if (!s) { ncc_errf(err, errn, "%s: out of memory", path); goto out; }
    memcpy(s, e, sizeof *s * (size_t)ne);
    qsort(s, (size_t)ne, sizeof *s, cmp_begin);
    for (i = 1; i < ne; i++)
      if (s[i].begin < s[i - 1].end && s[i].begin < s[i].end) {
        ncc_errf(err, errn, "%s: tensors '%s' and '%s' overlap in the data area", path, s[i - 1].name, s[i].name);
        free(s);
        goto out;
      }
    free(s);
  }
  rc = 0;
out:
  cJSON_Delete(root);
  if (rc) ncc_st_free(e, ne);
  else { *out = e; *nout = ne; }
  return rc;
}

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

static void shape_str(char *buf, size_t n, int rank, const int64_t *shape) {
  int i;
  buf[0] = 0;
  cat(buf, n, "[");
  for (i = 0; i < rank; i++) cat(buf, n, "%s%lld", i ? ", " : "", (long long)shape[i]);
  cat(buf, n, "]");
}

static int is_int_dtype(int dt) { return dt == NCC_I32 || dt == NCC_I8 || dt == NCC_I64; }

/* Weight-quantized files (ncc_quantize_safetensors): a floating tensor W may
 * be stored as int8 beside "W.__scale__", float32 [W's first dimension] (one
 * scale per output channel) or [] (one for the tensor); W = q * scale. */
#define NCC_SCALE_SUFFIX ".__scale__"

/* The scale entry of the int8 entry x, or -1. */
static int scale_of(const ncc_st_entry *e, int ne, const ncc_st_entry *x) {
  size_t l = strlen(x->name);
  int j;
  for (j = 0; j < ne; j++)
    if (strncmp(e[j].name, x->name, l) == 0 && strcmp(e[j].name + l, NCC_SCALE_SUFFIX) == 0) return j;
  return -1;
}

/* Is entry s a well-formed scale of the int8 entry x? */
static int scale_fits(const ncc_st_entry *x, const ncc_st_entry *s) {
  return s->dtype == ST_F32 && ((s->rank == 0) || (s->rank == 1 && x->rank >= 1 && s->shape[0] == x->shape[0]));
}

/* Is entry name the training state of a checkpoint (`ncc train`, M_save)
 * that a model without that state (an inference build, `ncc run --weights`)
 * skips: its step, epoch and learning rate, or the optimizer
 * state of one of the wanted tensors, under torch.optim's names
 * ("P.momentum_buffer", "P.exp_avg", "P.exp_avg_sq")?  A model that wants
 * them matches them first. */
static int training_state(const char *name, const ncc_st_want *w, int n) {
  static const char *const opt[] = {".momentum_buffer", ".exp_avg", ".exp_avg_sq"};
  static const char *const counters[] = {"__step__", "__epoch__", "__lr__",
                                         "__loss_scale__", "__growth_tracker__", "__optimizer_step__"};
  size_t l;
  int i, k;
  for (k = 0; k < (int)(sizeof counters / sizeof counters[0]); k++)
    if (!strcmp(name, counters[k])) return 1;
  for (i = 0; i < n; i++) {
    l = strlen(w[i].t.name);
    if (strncmp(name, w[i].t.name, l) != 0) continue;
    for (k = 0; k < 3; k++)
      if (!strcmp(name + l, opt[k])) return 1;
  }
  return 0;
}

/* The matching of ncc_st_match and ncc_load_safetensors_opt: map[i] is the
 * entry of w[i], or -1 when the file lacks it (an error unless optional). */
static int match_want(const ncc_st_entry *e, int ne, const char *path, const ncc_st_want *w, int n, int allow_extra,
                      int *map, char *err, size_t errn) {
  int i, j, nmiss = 0, nextra = 0, nshape = 0, ndtype = 0;
  char *used = calloc((size_t)ne + 1, 1);
  char a[200], b[200];
  if (!used) { ncc_errf(err, errn, "%s: out of memory", path); return NCC_EUSER; }
  for (i = 0; i < n; i++) {
    map[i] = -1;
    for (j = 0; j < ne; j++)
      if (strcmp(e[j].name, w[i].t.name) == 0) { map[i] = j; used[j] = 1; break; }
    /* an int8 tensor of a weight-quantized file brings its scale */
    if (map[i] >= 0 && e[map[i]].dtype == ST_I8 && !is_int_dtype(w[i].t.dtype)) {
      int s = scale_of(e, ne, &e[map[i]]);
      if (s >= 0) used[s] = 1;
    }
  }
  ncc_errf(err, errn, "%s: does not match the model:", path);
  for (i = 0; i < n; i++)
    if (map[i] < 0 && !(w[i].flags & NCC_ST_OPTIONAL))
      cat(err, errn, "%s '%s'", nmiss++ ? "," : "\n  missing:", w[i].t.name);
  for (j = 0; j < ne && !allow_extra; j++)
    if (!used[j] && !ends_with(e[j].name, "num_batches_tracked") && !training_state(e[j].name, w, n))
      cat(err, errn, "%s '%s'", nextra++ ? "," : "\n  unexpected:", e[j].name);
  for (i = 0; i < n; i++) {
    const ncc_st_entry *x;
    int same;
    if (map[i] < 0) continue;
    x = &e[map[i]];
    same = x->rank == w[i].t.rank;
    for (j = 0; same && j < x->rank; j++) same = x->shape[j] == w[i].t.shape[j];
    if (!same) {
      shape_str(a, sizeof a, x->rank, x->shape);
      shape_str(b, sizeof b, w[i].t.rank, w[i].t.shape);
      cat(err, errn, "%s '%s' is %s in the file, the model wants %s", nshape++ ? "," : "\n  wrong shape:",
          w[i].t.name, a, b);
    }
  }
  for (i = 0; i < n; i++) {
    int want_int = is_int_dtype(w[i].t.dtype), dt;
    if (map[i] < 0) continue;
    dt = e[map[i]].dtype;
    if (!want_int && dt == ST_I8) {   /* quantized: needs its scale */
      int s = scale_of(e, ne, &e[map[i]]);
      if (s < 0 || !scale_fits(&e[map[i]], &e[s]))
        cat(err, errn, "%s '%s' is int8 without a float32 '%s%s' of shape [%lld] or []", ndtype++ ? "," : "\n  wrong dtype:",
            w[i].t.name, w[i].t.name, NCC_SCALE_SUFFIX, (long long)(e[map[i]].rank ? e[map[i]].shape[0] : 1));
      continue;
    }
    if (want_int ? !(dt == ST_I32 || dt == ST_I64 || dt == ST_I16 || dt == ST_I8 || dt == ST_U8)
                 : !(dt == ST_F32 || dt == ST_F16 || dt == ST_BF16 || dt == ST_F64))
      cat(err, errn, "%s '%s' is %s, the model wants %s", ndtype++ ? "," : "\n  wrong dtype:", w[i].t.name,
          st_dtypes[dt].name, want_int ? "an integer tensor" : "a floating-point tensor");
  }
  free(used);
  if (nmiss || nextra || nshape || ndtype) {
    cat(err, errn, "\n  (%d missing, %d unexpected, %d wrong shape, %d wrong dtype)", nmiss, nextra, nshape, ndtype);
    return NCC_EUSER;
  }
  err[0] = 0;
  return 0;
}

/* the wanted list of a plain parameter list: every one required, on the device */
static ncc_st_want *wants_of(const ncc_tensor_info *params, int n, void *const *dev_ptrs) {
  ncc_st_want *w = calloc((size_t)n + 1, sizeof *w);
  int i;
  if (!w) return NULL;
  for (i = 0; i < n; i++) {
    w[i].t = params[i];
    if (!is_int_dtype(w[i].t.dtype)) w[i].t.dtype = NCC_F32;
    w[i].dst = dev_ptrs ? dev_ptrs[i] : NULL;
  }
  return w;
}

int ncc_st_match(const ncc_st_entry *e, int ne, const char *path, const ncc_tensor_info *params, int n, int *map,
                 char *err, size_t errn) {
  ncc_st_want *w = wants_of(params, n, NULL);
  int rc;
  if (!w) { ncc_errf(err, errn, "%s: out of memory", path); return NCC_EUSER; }
  rc = match_want(e, ne, path, w, n, 0, map, err, errn);
  free(w);
  return rc;
}

/* Converts one tensor to what the device holds: f32 for floating parameters,
 * i32 (or i8) for integer ones; i64 or f64 for host scalars.  Returns -1, or the index of the first element
 * that the integer target cannot hold (a value is never silently wrapped). */
static int64_t convert(const unsigned char *src, int dt, int64_t numel, int target, void *dst) {
  int64_t i;
  for (i = 0; i < numel; i++) {
    const unsigned char *p = src + i * st_dtypes[dt].size;
    double v = 0;
    switch (dt) {
      case ST_F32: { float f; memcpy(&f, p, 4); v = f; break; }
      case ST_F16: { unsigned short h; memcpy(&h, p, 2); v = ncc_f16_bits_to_f32(h); break; }
      case ST_BF16: { unsigned short h; memcpy(&h, p, 2); v = ncc_bf16_bits_to_f32(h); break; }
      case ST_F64: memcpy(&v, p, 8); break;
      case ST_I64: { int64_t x; memcpy(&x, p, 8); v = (double)x; break; }
      case ST_I32: { int32_t x; memcpy(&x, p, 4); v = x; break; }
      case ST_I16: { int16_t x; memcpy(&x, p, 2); v = x; break; }
      case ST_I8: v = (int8_t)*p; break;
      default: v = *p; break;
    }
    if (target == NCC_I64) {
      if (dt == ST_I64) { memcpy((int64_t *)dst + i, p, 8); continue; }
      if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) return i;
      ((int64_t *)dst)[i] = (int64_t)v;
    } else if (target == NCC_F64) {
      ((double *)dst)[i] = v;
    } else if (target == NCC_I32) {
      if (!(v >= -2147483648.0 && v <= 2147483647.0)) return i;
      ((int32_t *)dst)[i] = (int32_t)v;
    } else if (target == NCC_I8) {
      if (!(v >= -128.0 && v <= 127.0)) return i;
      ((int8_t *)dst)[i] = (int8_t)v;
    } else {
      ((float *)dst)[i] = (float)v;
    }
  }
  return -1;
}

static int map_file(const char *path, unsigned char **buf, size_t *n, char *err, size_t errn) {
  struct stat st;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  *buf = NULL;
  *n = 0;
  if (fd < 0) { ncc_errf(err, errn, "%s: cannot open: %s", path, strerror(errno)); return NCC_EUSER; }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ncc_errf(err, errn, "%s: not a regular file", path);
    close(fd);
    return NCC_EUSER;
  }
  *n = (size_t)st.st_size;
  if (*n) {
    void *m = mmap(NULL, *n, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ncc_errf(err, errn, "%s: cannot map: %s", path, strerror(errno));
      close(fd);
      return NCC_EUSER;
    }
    *buf = (unsigned char *)m;
  }
  close(fd);
  return 0;
}

static int esize(int target) {
  switch (target) {
    case NCC_I8: return 1;
    case NCC_I64: case NCC_F64: return 8;
    default: return 4;
  }
}

/* The loading of ncc_load_safetensors_opt from the file's bytes (a mapping,
 * or memory: ncc_load_safetensors_mem); `path` names them in messages. */
static int load_from(ncc_dev *d, const char *path, const unsigned char *buf, size_t sz, ncc_st_want *w, int n,
                     int flags, char *err, size_t errn);

int ncc_load_safetensors_opt(ncc_dev *d, const char *path, ncc_st_want *w, int n, int flags, char *err,
                             size_t errn) {
  unsigned char *buf;
  size_t sz;
  int i, rc;
  for (i = 0; i < n; i++) {
    w[i].present = 0;
    if (!(w[i].flags & NCC_ST_HOST) && (!d || w[i].t.dtype == NCC_I64 || w[i].t.dtype == NCC_F64)) {
      ncc_errf(err, errn, "%s: tensor '%s': %s", path, w[i].t.name,
               d ? "64-bit tensors load into host memory only (NCC_ST_HOST)" : "no device for a device tensor");
      return NCC_EUSER;
    }
  }
  rc = map_file(path, &buf, &sz, err, errn);
  if (rc) return rc;
  rc = load_from(d, path, buf, sz, w, n, flags, err, errn);
  if (buf) munmap(buf, sz);
  return rc;
}

int ncc_load_safetensors_mem(ncc_dev *d, const void *bytes, size_t n, const char *what, const ncc_tensor_info *params,
                             int np, void *const *dev_ptrs, char *err, size_t errn) {
  ncc_st_want *w = wants_of(params, np, dev_ptrs);
  int rc;
  if (!w) { ncc_errf(err, errn, "%s: out of memory", what); return NCC_EUSER; }
  rc = load_from(d, what, (const unsigned char *)bytes, n, w, np, 0, err, errn);
  free(w);
  return rc;
}

static int load_from(ncc_dev *d, const char *path, const unsigned char *buf, size_t sz, ncc_st_want *w, int n,
                     int flags, char *err, size_t errn) {
  size_t data_off;
  ncc_st_entry *e = NULL;
  int ne = 0, i, rc, *map;
  rc = ncc_st_index(buf, sz, path, &e, &ne, &data_off, err, errn);
  if (rc) goto out;
  map = malloc(sizeof *map * (size_t)(n + 1));
  if (!map) { ncc_errf(err, errn, "%s: out of memory", path); rc = NCC_EUSER; goto out; }
  rc = match_want(e, ne, path, w, n, flags & NCC_ST_ALLOW_EXTRA, map, err, errn);
  for (i = 0; !rc && i < n; i++) {
    const ncc_st_entry *x;
    int target = w[i].t.dtype, host = w[i].flags & NCC_ST_HOST;
    size_t bytes;
    void *tmp;
    if (map[i] < 0) continue;
    x = &e[map[i]];
    bytes = (size_t)x->numel * (size_t)esize(target);
    if (!host && ((x->dtype == ST_F32 && target == NCC_F32) || (x->dtype == ST_I32 && target == NCC_I32))) {
      /* already what the device holds: straight from the mapping */
      if (bytes && ncc_memcpy_h2d(d, w[i].dst, buf + data_off + x->begin, bytes)) {
        ncc_errf(err, errn, "%s: copying tensor '%s' to the device: %s", path, x->name, ncc_dev_error(d));
        rc = NCC_EUSER;
      }
      w[i].present = !rc;
      continue;
    }
    tmp = host ? w[i].dst : malloc(bytes ? bytes : 1);
    if (!tmp) { ncc_errf(err, errn, "%s: out of memory for tensor '%s'", path, x->name); rc = NCC_EUSER; break; }
    if (x->dtype == ST_I8 && (target == NCC_F32 || target == NCC_F64)) {   /* dequantized: q * scale */
      const ncc_st_entry *s = &e[scale_of(e, ne, x)];
      const int8_t *q = (const int8_t *)(buf + data_off + x->begin);
      int64_t per = s->rank == 0 || x->shape[0] == 0 ? x->numel : x->numel / x->shape[0], k;
      for (k = 0; k < x->numel; k++) {
        float sc;
        memcpy(&sc, buf + data_off + s->begin + 4 * (size_t)(s->rank == 0 ? 0 : k / per), 4);
        if (target == NCC_F32) ((float *)tmp)[k] = (float)q[k] * sc;
        else ((double *)tmp)[k] = (double)((float)q[k] * sc);
      }
    } else {
      int64_t badi = convert(buf + data_off + x->begin, x->dtype, x->numel, target, tmp);
      if (badi >= 0) {
        ncc_errf(err, errn, "%s: tensor '%s': element %lld does not fit in %s", path, x->name, (long long)badi,
                 target == NCC_I8 ? "int8" : target == NCC_I64 ? "int64" : "int32");
        rc = NCC_EUSER;
      }
    }
    if (!rc && !host && bytes && ncc_memcpy_h2d(d, w[i].dst, tmp, bytes)) {
      ncc_errf(err, errn, "%s: copying tensor '%s' to the device: %s", path, x->name, ncc_dev_error(d));
      rc = NCC_EUSER;
    }
    if (!host) free(tmp);
    w[i].present = !rc;
  }
  free(map);
out:
  ncc_st_free(e, ne);
  return rc;
}

int ncc_load_safetensors(ncc_dev *d, const char *path, const ncc_tensor_info *params, int n, void *const *dev_ptrs,
                         char *err, size_t errn) {
  ncc_st_want *w = wants_of(params, n, dev_ptrs);
  int rc;
  if (!w) { ncc_errf(err, errn, "%s: out of memory", path); return NCC_EUSER; }
  rc = ncc_load_safetensors_opt(d, path, w, n, 0, err, errn);
  free(w);
  return rc;
}

/* ---------------------------------------------------------------- writing */
static const char *ncc_dtype_st(int dt, int *size) {
  switch (dt) {
    case NCC_F32: *size = 4; return "F32";
    case NCC_F16: *size = 2; return "F16";
    case NCC_BF16: *size = 2; return "BF16";
    case NCC_I32: *size = 4; return "I32";
    case NCC_I8: *size = 1; return "I8";
    case NCC_I64: *size = 8; return "I64";
    case NCC_F64: *size = 8; return "F64";
    default: *size = 0; return NULL;
  }
}

static int write_full(int fd, const void *p, size_t n) {
  const char *c = (const char *)p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (w == 0) { errno = ENOSPC; return -1; }   /* no progress: the disk is full */
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Writes [parts...] to path atomically and durably; shared with npy.c.
 * PATH.tmp.<pid> beside it (same file system, so the rename is atomic),
 * fsync, close, rename over PATH, fsync of the folder.  Any failure removes
 * the temporary file and leaves a previous PATH as it was. */
int ncc_write_atomic(const char *path, const void *const *parts, const size_t *sizes, int nparts, char *err,
                     size_t errn) {
  char *tmp, *dirc, *dir;
  int fd, i, dfd, e;
  size_t len = strlen(path) + 32;
  const char *step = "write";
  tmp = malloc(len);
  dirc = strdup(path);
  if (!tmp || !dirc) { free(tmp); free(dirc); ncc_errf(err, errn, "%s: out of memory", path); return NCC_EUSER; }
  snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());
  /* a leftover of an earlier process with this pid is garbage: truncate it */
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    ncc_errf(err, errn, "%s: cannot create the temporary file %s beside it: %s", path, tmp, strerror(errno));
    free(tmp); free(dirc);
    return NCC_EUSER;
  }
  for (i = 0; i < nparts; i++)
    if (sizes[i] && write_full(fd, parts[i], sizes[i])) break;
  if (i < nparts || (step = "fsync", fsync(fd) != 0)) {
    e = errno;
    ncc_errf(err, errn, "%s: %s failed (the previous file, if any, is unchanged): %s", path, step, strerror(e));
    close(fd);
    unlink(tmp);
    free(tmp); free(dirc);
    return NCC_EUSER;
  }
  if (close(fd) != 0) {
    e = errno;
    ncc_errf(err, errn, "%s: close failed (the previous file, if any, is unchanged): %s", path, strerror(e));
    unlink(tmp);
    free(tmp); free(dirc);
    return NCC_EUSER;
  }
  if (rename(tmp, path) != 0) {
    e = errno;
    ncc_errf(err, errn, "%s: cannot replace the file: %s", path, strerror(e));
    unlink(tmp);
    free(tmp); free(dirc);
    return NCC_EUSER;
  }
  /* the rename itself must reach the disk */
  dir = dirname(dirc);
  dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || (fsync(dfd) != 0 && errno != EINVAL)) {
    e = errno;
    if (dfd >= 0) close(dfd);
    ncc_errf(err, errn, "%s: written, but syncing its folder %s failed (it may not survive a crash): %s", path, dir,
             strerror(e));
    free(tmp); free(dirc);
    return NCC_EUSER;
  }
  close(dfd);
  free(tmp);
  free(dirc);
  return 0;
}

int ncc_save_safetensors(const char *path, const ncc_tensor_info *t, int n, const void *const *host_ptrs, char *err,
                         size_t errn) {
  cJSON *root = cJSON_CreateObject(), *meta;
  char *json = NULL, *hdr = NULL;
  uint64_t off = 0;
  size_t hl, padded;
  int i, j, rc = NCC_EUSER;
  const void **parts = NULL;
  size_t *sizes = NULL;
  if (!root) { ncc_errf(err, errn, "%s: out of memory", path); return NCC_EUSER; }
  meta = cJSON_AddObjectToObject(root, "__metadata__");
  if (meta) cJSON_AddStringToObject(meta, "format", "pt");
  parts = malloc(sizeof *parts * (size_t)(n + 1));
  sizes = malloc(sizeof *sizes * (size_t)(n + 1));
  if (!parts || !sizes) { ncc_errf(err, errn, "%s: out of memory", path); goto out; }
  for (i = 0; i < n; i++) {
    int esz;
    const char *dn = ncc_dtype_st(t[i].dtype, &esz);
    cJSON *x, *sh, *o;
    uint64_t numel = 1;
    if (!t[i].name || !*t[i].name || !dn || t[i].rank < 0 || t[i].rank > 8) {
      ncc_errf(err, errn, "%s: tensor #%d ('%s'): bad name, dtype or rank", path, i, t[i].name ? t[i].name : "");
      goto out;
    }
    for (j = 0; j < i; j++)
      if (strcmp(t[j].name, t[i].name) == 0) {
        ncc_errf(err, errn, "%s: tensor '%s' given twice", path, t[i].name);
        goto out;
      }
    x = cJSON_AddObjectToObject(root, t[i].name);
    if (!x) { ncc_errf(err, errn, "%s: out of memory", path); goto out; }
    cJSON_AddStringToObject(x, "dtype", dn);
    sh = cJSON_AddArrayToObject(x, "shape");
    for (j = 0; j < t[i].rank; j++) {
      if (t[i].shape[j] < 0) { ncc_errf(err, errn, "%s: tensor '%s': negative dimension", path, t[i].name); goto out; }
      cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t[i].shape[j]));
      numel *= (uint64_t)t[i].shape[j];
    }
    o = cJSON_AddArrayToObject(x, "data_offsets");
    cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
    cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + numel * (uint64_t)esz)));
    parts[i + 1] = host_ptrs[i];
    sizes[i + 1] = (size_t)(numel * (uint64_t)esz);
    if (sizes[i + 1] && !host_ptrs[i]) { ncc_errf(err, errn, "%s: tensor '%s': no data", path, t[i].name); goto out; }
    off += numel * (uint64_t)esz;
  }
  json = cJSON_PrintUnformatted(root);
  if (!json) { ncc_errf(err, errn, "%s: out of memory", path); goto out; }
  hl = strlen(json);
  padded = (hl + 7) / 8 * 8;   /* keeps the data area 8-byte aligned */
  hdr = malloc(8 + padded);
  if (!hdr) { ncc_errf(err, errn, "%s: out of memory", path); goto out; }
  for (i = 0; i < 8; i++) hdr[i] = (char)(((uint64_t)padded >> (8 * i)) & 0xff);
  memcpy(hdr + 8, json, hl);
  memset(hdr + 8 + hl, ' ', padded - hl);
  parts[0] = hdr;
  sizes[0] = 8 + padded;
  rc = ncc_write_atomic(path, parts, sizes, n + 1, err, errn);
out:
  free(hdr);
  free(json);
  free(parts);
  free(sizes);
  cJSON_Delete(root);
  return rc;
}

/* ---- weight quantization ------------------------------------------------ */

/* The file's dtype as an NCC_* the writer takes, or -1. */
static int st_to_ncc(int dt) {
  switch (dt) {
    case ST_F32: return NCC_F32;
    case ST_F16: return NCC_F16;
    case ST_BF16: return NCC_BF16;
    case ST_F64: return NCC_F64;
    case ST_I64: return NCC_I64;
    case ST_I32: return NCC_I32;
    case ST_I8: return NCC_I8;
    default: return -1;
  }
}

int ncc_quantize_safetensors(const char *in, const char *out, int *nquant, int64_t *bytes_in, int64_t *bytes_out,
                             char *err, size_t errn) {
  unsigned char *buf = NULL;
  size_t sz = 0, data_off = 0;
  ncc_st_entry *e = NULL;
  int ne = 0, i, nt = 0, rc, nq = 0;
  ncc_tensor_info *t = NULL;
  const void **ptrs = NULL;
  void **owned = NULL;
  int nowned = 0;
  char tn[300];
  if (nquant) *nquant = 0;
  rc = map_file(in, &buf, &sz, err, errn);
  if (rc) return rc;
  rc = ncc_st_index(buf, sz, in, &e, &ne, &data_off, err, errn);
  if (rc) goto out;
  t = calloc((size_t)(2 * ne + 1), sizeof *t);
  ptrs = calloc((size_t)(2 * ne + 1), sizeof *ptrs);
  owned = calloc((size_t)(3 * ne + 1), sizeof *owned);
  if (!t || !ptrs || !owned) { ncc_errf(err, errn, "%s: out of memory", in); rc = NCC_EUSER; goto out; }
  for (i = 0; i < ne; i++) {
    const ncc_st_entry *x = &e[i];
    int floating = x->dtype == ST_F32 || x->dtype == ST_F16 || x->dtype == ST_BF16 || x->dtype == ST_F64, k;
    if (strlen(x->name) + sizeof NCC_SCALE_SUFFIX > sizeof tn) {
      ncc_errf(err, errn, "%s: tensor name '%.40s...' too long", in, x->name);
      rc = NCC_EUSER;
      goto out;
    }
    if (floating && x->rank >= 2 && x->numel > 0) {
      /* per output channel (dimension 0), symmetric: scale = max|w| / 127,
       * q = w / scale rounded to nearest even, in [-127, 127] */
      int64_t rows = x->shape[0], per = x->numel / rows, r;
      float *w = malloc(sizeof *w * (size_t)x->numel), *sc = malloc(sizeof *sc * (size_t)rows);
      int8_t *q = malloc((size_t)x->numel);
      owned[nowned++] = w;
      owned[nowned++] = sc;
      owned[nowned++] = q;
      if (!w || !sc || !q) { ncc_errf(err, errn, "%s: out of memory", in); rc = NCC_EUSER; goto out; }
      convert(buf + data_off + x->begin, x->dtype, x->numel, NCC_F32, w);
      for (r = 0; r < rows; r++) {
        float m = 0.0f;
        for (k = 0; k < per; k++) {
          float a = fabsf(w[r * per + k]);
          if (!(a <= 3.4e38f)) {   /* NaN or Inf: no scale represents it */
            ncc_errf(err, errn, "%s: tensor '%s': element %lld is not finite; it cannot be quantized", in, x->name,
                     (long long)(r * per + k));
            rc = NCC_EUSER;
            goto out;
          }
          if (a > m) m = a;
        }
        sc[r] = m / 127.0f;
        for (k = 0; k < per; k++) {
          float v = sc[r] > 0.0f ? nearbyintf(w[r * per + k] / sc[r]) : 0.0f;
          q[r * per + k] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
        }
      }
      t[nt].name = x->name;
      t[nt].dtype = NCC_I8;
      t[nt].rank = x->rank;
      memcpy(t[nt].shape, x->shape, sizeof x->shape);
      ptrs[nt++] = q;
      snprintf(tn, sizeof tn, "%s%s", x->name, NCC_SCALE_SUFFIX);
      owned[nowned] = strdup(tn);
      if (!owned[nowned]) { ncc_errf(err, errn, "%s: out of memory", in); rc = NCC_EUSER; goto out; }
      t[nt].name = (const char *)owned[nowned++];
      t[nt].dtype = NCC_F32;
      t[nt].rank = 1;
      t[nt].shape[0] = rows;
      ptrs[nt++] = sc;
      nq++;
      continue;
    }
    {   /* everything else as it is */
      int d = st_to_ncc(x->dtype);
      if (d < 0) {
        ncc_errf(err, errn, "%s: tensor '%s' is %s, which the quantizer does not carry over", in, x->name,
                 st_dtypes[x->dtype].name);
        rc = NCC_EUSER;
        goto out;
      }
      t[nt].name = x->name;
      t[nt].dtype = d;
      t[nt].rank = x->rank;
      memcpy(t[nt].shape, x->shape, sizeof x->shape);
      ptrs[nt++] = buf + data_off + x->begin;
    }
  }
  rc = ncc_save_safetensors(out, t, nt, ptrs, err, errn);
  if (!rc) {
    struct stat st;
    if (nquant) *nquant = nq;
    if (bytes_in) *bytes_in = (int64_t)sz;
    if (bytes_out) *bytes_out = stat(out, &st) == 0 ? (int64_t)st.st_size : -1;
  }
out:
  for (i = 0; i < nowned; i++) free(owned[i]);
  free(owned);
  free(ptrs);
  free(t);
  ncc_st_free(e, ne);
  if (buf) munmap(buf, sz);
  return rc;
}
