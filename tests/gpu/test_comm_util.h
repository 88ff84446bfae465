/* Helpers of the comm GPU tests: device tensors as DLTensors, small-integer
 * fills whose sums are exact in every dtype, host references. */
#ifndef TEST_COMM_UTIL_H
#define TEST_COMM_UTIL_H
#include "comm/comm.h" /* dlpack (real or mirror) before tcuda.h */
#include "harness.h"
#include <cuda_runtime_api.h>

typedef struct {
  DLTensor t;
  int64_t shape[8], strides[8];
  void *base;
  int host;
} ten;

static const DLDataType F16 = {TC_DL_FLOAT, 16, 1}, BF16 = {TC_DL_BFLOAT, 16, 1}, F32 = {TC_DL_FLOAT, 32, 1},
                        F64 = {TC_DL_FLOAT, 64, 1}, I8 = {TC_DL_INT, 8, 1}, U8 = {TC_DL_UINT, 8, 1},
                        I16 = {TC_DL_INT, 16, 1}, I32 = {TC_DL_INT, 32, 1}, I64 = {TC_DL_INT, 64, 1},
                        BOOL = {TC_DL_BOOL, 8, 1}, C64 = {TC_DL_COMPLEX, 64, 1};

static size_t esz(DLDataType d) { return (size_t)tc_dtype_size(d); }

static void sync_all(void) {
  for (int d = 0; d < tcuda_device_count(); d++) CHECK_OK(tcuda_synchronize(d));
}

static void *dmalloc(int dev, size_t bytes) {
  tcuda_device_guard_t g;
  void *p = NULL;
  CHECK_OK(tcuda_device_guard_begin(&g, dev));
  CHECK(cudaMalloc(&p, bytes ? (bytes + 255) / 256 * 256 : 16) /* as any allocator rounds; NCCL reads whole words */ == cudaSuccess);
  CHECK_OK(tcuda_device_guard_end(&g));
  return p;
}

/* Tensor over `span` elements of fresh memory (dev -1: host), with shape
 * and optional strides. */
static void ten_make(ten *x, int dev, DLDataType d, int ndim, const int64_t *shape, const int64_t *strides,
                     int64_t span) {
  memset(x, 0, sizeof *x);
  x->host = dev < 0;
  x->base = x->host ? calloc((size_t)span + 1, esz(d)) : dmalloc(dev, (size_t)span * esz(d));
  x->t.data = x->base;
  x->t.device.device_type = (int)(x->host ? TC_DL_CPU : TC_DL_CUDA);
  x->t.device.device_id = x->host ? 0 : dev;
  x->t.ndim = ndim;
  x->t.dtype = d;
  memcpy(x->shape, shape, (size_t)ndim * sizeof *shape);
  x->t.shape = x->shape;
  if (strides) {
    memcpy(x->strides, strides, (size_t)ndim * sizeof *strides);
    x->t.strides = x->strides;
  }
}
static void ten_free(ten *x) {
  if (x->host) free(x->base);
  else cudaFree(x->base);
}

static int64_t numel_of(const DLTensor *t) {
  int64_t n = 1;
  for (int k = 0; k < t->ndim; k++) n *= t->shape[k];
  return n;
}

/* Small integers encoded in dtype d: sums of two stay exact. */
static uint16_t half_of(int v) {
  if (!v) return 0;
  uint16_t s = v < 0 ? 0x8000 : 0;
  int m = v < 0 ? -v : v, e = 0;
  while ((m >> (e + 1)) > 0) e++;
  return (uint16_t)(s | (uint16_t)((e + 15) << 10) | (uint16_t)(((unsigned)m << (10 - e)) & 0x3FF));
}
static uint16_t bf16_of(int v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}
static void put(DLDataType d, void *buf, int64_t i, int v) {
  char *p = (char *)buf + (size_t)i * esz(d);
  switch (d.code) {
  case TC_DL_BOOL: *(uint8_t *)p = (uint8_t)(v & 1); break;
  case TC_DL_INT:
  case TC_DL_UINT:
    if (d.bits == 8) *(int8_t *)p = (int8_t)v;
    else if (d.bits == 16) *(int16_t *)p = (int16_t)v;
    else if (d.bits == 32) *(int32_t *)p = v;
    else *(int64_t *)p = v;
    break;
  case TC_DL_BFLOAT: *(uint16_t *)p = bf16_of(v); break;
  case TC_DL_FLOAT:
    if (d.bits == 16) *(uint16_t *)p = half_of(v);
    else if (d.bits == 32) *(float *)p = (float)v;
    else *(double *)p = v;
    break;
  case TC_DL_COMPLEX: ((float *)p)[0] = (float)v; ((float *)p)[1] = (float)(-2 * v); break;
  }
}
/* value of element i of fill `seed`: small, signed, varied */
static int val(DLDataType d, int64_t i, int seed) {
  if (d.code == TC_DL_BOOL) return (int)((i * 7 + seed) % 3 == 0);
  if (d.code == TC_DL_INT && d.bits == 8) return (int)((i * 37 + seed * 11) % 120); /* 100+100 wraps */
  return (int)((i * 13 + seed * 5) % 121) - 60;
}
static void fill_host(DLDataType d, void *buf, int64_t n, int seed) {
  for (int64_t i = 0; i < n; i++) put(d, buf, i, val(d, i, seed));
}
/* expected sum of fills seeds[0..k) at element i (wrapping like the dtype) */
static void put_sum(DLDataType d, void *buf, int64_t i, const int *seeds, int k) {
  int s = 0;
  if (d.code == TC_DL_BOOL) {
    for (int j = 0; j < k; j++) s |= val(d, i, seeds[j]);
  } else {
    for (int j = 0; j < k; j++) s += val(d, i, seeds[j]);
  }
  put(d, buf, i, s);
}

/* Upload a contiguous host array into a (maybe strided) device tensor. */
static void upload(ten *x, const void *host) {
  int64_t n = numel_of(&x->t);
  size_t es = esz(x->t.dtype);
  int nd = x->t.ndim;
  int64_t st[8];
  if (x->t.strides) memcpy(st, x->t.strides, (size_t)nd * 8);
  else tc_contiguous_strides(nd, x->t.shape, st);
  int64_t span = 1;
  for (int k = 0; k < nd; k++)
    if (x->t.shape[k]) span += (x->t.shape[k] - 1) * st[k];
  char *img = calloc((size_t)span + 1, es);
  int64_t idx[8] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int k = 0; k < nd; k++) off += idx[k] * st[k];
    memcpy(img + off * (int64_t)es, (const char *)host + i * (int64_t)es, es);
    for (int k = nd - 1; k >= 0; k--) {
      if (++idx[k] < x->t.shape[k]) break;
      idx[k] = 0;
    }
  }
  CHECK(cudaMemcpy((char *)x->t.data + x->t.byte_offset, img, (size_t)span * es, cudaMemcpyDefault) == cudaSuccess);
  free(img);
}

/* Read any DLTensor (device or host, any strides) into a contiguous host
 * array (malloc'ed). */
static void *download(const DLTensor *t) {
  sync_all();
  int64_t n = numel_of(t);
  size_t es = esz(t->dtype);
  int nd = t->ndim;
  int64_t st[8];
  if (t->strides) memcpy(st, t->strides, (size_t)nd * 8);
  else tc_contiguous_strides(nd, t->shape, st);
  int64_t span = 1;
  for (int k = 0; k < nd; k++)
    if (t->shape[k]) span += (t->shape[k] - 1) * st[k];
  char *img = calloc((size_t)span + 1, es), *out = calloc((size_t)n + 1, es);
  if (n) CHECK(cudaMemcpy(img, (const char *)t->data + t->byte_offset, (size_t)span * es, cudaMemcpyDefault) == cudaSuccess);
  int64_t idx[8] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int k = 0; k < nd; k++) off += idx[k] * st[k];
    memcpy(out + i * (int64_t)es, img + off * (int64_t)es, es);
    for (int k = nd - 1; k >= 0; k--) {
      if (++idx[k] < t->shape[k]) break;
      idx[k] = 0;
    }
  }
  free(img);
  return out;
}

/* Element-by-element comparison; reports the first mismatch. */
static int same_elems(const void *a, const void *b, int64_t n, size_t es, const char *what) {
  for (int64_t i = 0; i < n; i++)
    if (memcmp((const char *)a + i * (int64_t)es, (const char *)b + i * (int64_t)es, es)) {
      fprintf(stderr, "%s: element %lld differs\n", what, (long long)i);
      return 0;
    }
  return 1;
}

static int is_contiguous_dl(const DLTensor *t) {
  if (!t->strides) return 1;
  int64_t st[8];
  tc_contiguous_strides(t->ndim, t->shape, st);
  for (int k = 0; k < t->ndim; k++)
    if (t->shape[k] != 1 && t->strides[k] != st[k]) return 0;
  return 1;
}

static void drop(DLManagedTensor *m) {
  if (m) m->deleter(m);
}

/* ---- the suite, on devices a and b (a == b on one GPU) ---- */
static const DLDataType *all_types(size_t *n) {
  static DLDataType t[11];
  t[0] = F32; t[1] = F16; t[2] = BF16; t[3] = I8; t[4] = U8; t[5] = I16;
  t[6] = I32; t[7] = I64; t[8] = BOOL; t[9] = C64; t[10] = F64;
  *n = 11;
  return t;
}

/* a device tensor of `shape` filled with fill(seed); transposed when tr */
static void make_filled(ten *x, int dev, DLDataType d, int64_t r, int64_t c, int tr, int seed, void **host_ref) {
  int64_t n = r * c;
  void *h = calloc((size_t)n + 1, esz(d));
  fill_host(d, h, n, seed);
  if (tr) ten_make(x, dev, d, 2, (int64_t[]){r, c}, (int64_t[]){1, r}, n);
  else ten_make(x, dev, d, 2, (int64_t[]){r, c}, NULL, n);
  if (dev < 0) {
    /* host tensor: write through the strides */
    int64_t st0 = tr ? 1 : c, st1 = tr ? r : 1;
    for (int64_t i = 0; i < r; i++)
      for (int64_t j = 0; j < c; j++)
        memcpy((char *)x->base + (i * st0 + j * st1) * (int64_t)esz(d), (char *)h + (i * c + j) * (int64_t)esz(d), esz(d));
  } else {
    upload(x, h);
  }
  *host_ref = h;
}

static void check_equal(const DLTensor *t, const void *ref, const char *what) {
  void *got = download(t);
  CHECK(same_elems(got, ref, numel_of(t), esz(t->dtype), what));
  free(got);
}

static void suite_broadcast(int a, int b) {
  size_t nt;
  const DLDataType *types = all_types(&nt);
  for (size_t k = 0; k < nt; k++) {
    for (int tr = 0; tr < 2; tr++) {
      ten src;
      void *ref;
      make_filled(&src, a, types[k], 33, 17, tr, (int)k, &ref);
      DLManagedTensor *out[3] = {0};
      int devs[3] = {a, b, b};
      CHECK_OK(tcuda_comm_broadcast((const tcuda_dltensor_t *)&src.t, devs, 3, out));
      CHECK(out[0] && out[0]->dl_tensor.data == src.t.data); /* own device: the source itself */
      for (int i = 1; i < 3; i++) {
        if (b == a) CHECK(out[i]->dl_tensor.data == src.t.data);
        else {
          CHECK(out[i]->dl_tensor.device.device_id == b && is_contiguous_dl(&out[i]->dl_tensor));
          check_equal(&out[i]->dl_tensor, ref, "broadcast");
        }
      }
      for (int i = 0; i < 3; i++) drop(out[i]);
      /* out= into a contiguous tensor on b and a strided one on a */
      ten o1, o2;
      ten_make(&o1, b, types[k], 2, (int64_t[]){33, 17}, NULL, 33 * 17);
      ten_make(&o2, a, types[k], 2, (int64_t[]){33, 17}, (int64_t[]){1, 33}, 33 * 17);
      const DLTensor *outs[2] = {&o1.t, &o2.t};
      CHECK_OK(tcuda_comm_broadcast_out((const tcuda_dltensor_t *)&src.t, (const tcuda_dltensor_t *const *)outs, 2));
      check_equal(&o1.t, ref, "broadcast_out contiguous");
      check_equal(&o2.t, ref, "broadcast_out strided");
      ten_free(&o1);
      ten_free(&o2);
      ten_free(&src);
      free(ref);
    }
  }
  /* a host source (strided too) is copied to every device */
  ten hs;
  void *ref;
  make_filled(&hs, -1, F32, 9, 5, 1, 3, &ref);
  DLManagedTensor *out[2] = {0};
  CHECK_OK(tcuda_comm_broadcast((const tcuda_dltensor_t *)&hs.t, (int[]){a, b}, 2, out));
  for (int i = 0; i < 2; i++) {
    CHECK(out[i]->dl_tensor.data != hs.t.data && (int)out[i]->dl_tensor.device.device_type == TC_DL_CUDA);
    check_equal(&out[i]->dl_tensor, ref, "broadcast from host");
    drop(out[i]);
  }
  ten_free(&hs);
  free(ref);
}

static void suite_coalesced(int a, int b) {
  enum { N = 7 };
  ten t[N];
  void *ref[N];
  DLDataType d[N] = {F32, F64, I64, F32, F16, C64, BOOL};
  int64_t r[N] = {100, 7, 50, 5, 33, 9, 1}, c[N] = {1, 3, 1, 4, 1, 1, 1};
  int tr[N] = {0, 0, 0, 1, 0, 0, 0};
  const DLTensor *list[N];
  for (int i = 0; i < N; i++) {
    make_filled(&t[i], a, d[i], r[i], c[i], tr[i], i, &ref[i]);
    list[i] = &t[i].t;
  }
  size_t sizes[] = {256, 1, TCUDA_COMM_BUFFER_SIZE_DEFAULT};
  for (int s = 0; s < 3; s++) {
    DLManagedTensor *out[2 * N] = {0};
    CHECK_OK(tcuda_comm_broadcast_coalesced((const tcuda_dltensor_t *const *)list, N, (int[]){a, b}, 2, sizes[s], out));
    for (int i = 0; i < N; i++) {
      CHECK(out[i] && out[i]->dl_tensor.data == t[i].t.data); /* row 0 is the input list */
      const DLTensor *o = &out[N + i]->dl_tensor;
      CHECK(o->device.device_id == b && is_contiguous_dl(o) && o->dtype.code == d[i].code);
      CHECK(o->shape[0] == r[i] && o->shape[1] == c[i]);
      check_equal(o, ref[i], "broadcast_coalesced");
    }
    for (int i = 0; i < 2 * N; i++) drop(out[i]);
  }
  for (int i = 0; i < N; i++) { ten_free(&t[i]); free(ref[i]); }
}

static void suite_reduce(int a, int b) {
  size_t nt;
  const DLDataType *types = all_types(&nt);
  for (size_t k = 0; k < nt; k++) {
    DLDataType dt = types[k];
    int64_t R = 257, C = 3, n = R * C;
    ten x, y, z;
    void *rx, *ry, *rz;
    make_filled(&x, a, dt, R, C, 0, 1, &rx);
    make_filled(&y, b, dt, R, C, (int)(k & 1), 2, &ry); /* every other dtype strided */
    make_filled(&z, a, dt, R, C, 0, 3, &rz);
    void *exp2 = calloc((size_t)n, esz(dt)), *exp3 = calloc((size_t)n, esz(dt));
    for (int64_t i = 0; i < n; i++) {
      put_sum(dt, exp2, i, (int[]){1, 2}, 2);
      put_sum(dt, exp3, i, (int[]){1, 2, 3}, 3);
    }
    const DLTensor *in2[2] = {&x.t, &y.t}, *in3[3] = {&x.t, &y.t, &z.t};
    DLManagedTensor *o = NULL;
    int dests[2] = {a, b};
    for (int di = 0; di < 2; di++) {
      CHECK_OK(tcuda_comm_reduce_add((const tcuda_dltensor_t *const *)in2, 2, dests[di], &o));
      if (o) {
        CHECK(o->dl_tensor.device.device_id == dests[di]);
        check_equal(&o->dl_tensor, exp2, tc_dtype_name(dt));
        drop(o);
        o = NULL;
      }
    }
    CHECK_OK(tcuda_comm_reduce_add((const tcuda_dltensor_t *const *)in3, 3, a, &o));
    if (o) { check_equal(&o->dl_tensor, exp3, "reduce_add of 3"); drop(o); o = NULL; }
    CHECK_OK(tcuda_comm_reduce_add((const tcuda_dltensor_t *const *)in2, 1, a, &o));
    CHECK(o && o->dl_tensor.data == x.t.data); /* one input: returned as is */
    drop(o);
    ten_free(&x); ten_free(&y); ten_free(&z);
    free(rx); free(ry); free(rz); free(exp2); free(exp3);
  }
}

static void suite_reduce_coalesced(int a, int b) {
  enum { N = 4 };
  DLDataType d[N] = {F32, I32, F32, F16};
  int64_t r[N] = {40, 10, 5, 70}, c[N] = {1, 1, 2, 1};
  ten t[2][N];
  void *ref[2][N];
  const DLTensor *grid[2 * N];
  for (int g = 0; g < 2; g++)
    for (int i = 0; i < N; i++) {
      make_filled(&t[g][i], g ? b : a, d[i], r[i], c[i], i == 2, 10 * g + i, &ref[g][i]);
      grid[g * N + i] = &t[g][i].t;
    }
  size_t sizes[] = {64, TCUDA_COMM_BUFFER_SIZE_DEFAULT};
  for (int s = 0; s < 2; s++) {
    DLManagedTensor *out[N] = {0};
    CHECK_OK(tcuda_comm_reduce_add_coalesced((const tcuda_dltensor_t *const *)grid, 2, N, b, sizes[s], out));
    for (int i = 0; i < N; i++) {
      if (!out[i]) continue;
      int64_t n = r[i] * c[i];
      void *e = calloc((size_t)n, esz(d[i]));
      for (int64_t j = 0; j < n; j++) put_sum(d[i], e, j, (int[]){i, 10 + i}, 2);
      CHECK(out[i]->dl_tensor.device.device_id == b && out[i]->dl_tensor.shape[0] == r[i]);
      check_equal(&out[i]->dl_tensor, e, "reduce_add_coalesced");
      free(e);
      drop(out[i]);
    }
  }
  for (int g = 0; g < 2; g++)
    for (int i = 0; i < N; i++) { ten_free(&t[g][i]); free(ref[g][i]); }
}

/* rows [r0, r0+nr) x cols [c0, c0+nc) of a row-major R x C host array */
static void *sub(const void *h, DLDataType d, int64_t C, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  size_t es = esz(d);
  char *o = malloc((size_t)(nr * nc + 1) * es);
  for (int64_t i = 0; i < nr; i++)
    memcpy(o + i * nc * (int64_t)es, (const char *)h + ((r0 + i) * C + c0) * (int64_t)es, (size_t)nc * es);
  return o;
}

static void suite_scatter(int a, int b) {
  ten src;
  void *ref;
  make_filled(&src, a, F32, 10, 4, 0, 7, &ref);
  DLManagedTensor *out[4] = {0};
  size_t n = 0;
  CHECK_OK(tcuda_comm_scatter((const tcuda_dltensor_t *)&src.t, (int[]){a, b}, 2, NULL, 0, 0, NULL, out, &n));
  CHECK_EQ_INT(n, 2);
  CHECK(out[0]->dl_tensor.data == src.t.data); /* chunk on its device: a view */
  void *e = sub(ref, F32, 4, 5, 5, 0, 4);
  check_equal(&out[1]->dl_tensor, e, "scatter dim 0");
  free(e);
  drop(out[0]); drop(out[1]);
  /* chunk sizes along dim 1: column chunks are not dense -> contiguous copies */
  tcuda_stream_t sb;
  CHECK_OK(tcuda_stream_from_pool(b, 0, &sb));
  const tcuda_stream_t *streams[2] = {NULL, &sb};
  CHECK_OK(tcuda_comm_scatter((const tcuda_dltensor_t *)&src.t, (int[]){a, b}, 2, (int64_t[]){1, 3}, 2, -1, streams,
                              out, &n));
  e = sub(ref, F32, 4, 0, 10, 1, 3);
  check_equal(&out[1]->dl_tensor, e, "scatter dim 1 on a pool stream");
  CHECK(out[1]->dl_tensor.shape[1] == 3);
  free(e);
  e = sub(ref, F32, 4, 0, 10, 0, 1);
  check_equal(&out[0]->dl_tensor, e, "scatter dim 1 chunk 0");
  free(e);
  drop(out[0]); drop(out[1]);
  /* chunk() makes fewer chunks than devices: 3 rows over 4 devices */
  ten small;
  void *sref;
  make_filled(&small, a, F32, 3, 4, 0, 8, &sref);
  CHECK_OK(tcuda_comm_scatter((const tcuda_dltensor_t *)&small.t, (int[]){b, b, a, b}, 4, NULL, 0, 0, NULL, out, &n));
  CHECK_EQ_INT(n, 3);
  for (size_t i = 0; i < n; i++) {
    e = sub(sref, F32, 4, (int64_t)i, 1, 0, 4);
    check_equal(&out[i]->dl_tensor, e, "scatter fewer chunks");
    free(e);
    drop(out[i]);
  }
  /* a host source: every chunk is a copy */
  ten hs;
  void *href;
  make_filled(&hs, -1, I64, 6, 3, 1, 9, &href);
  CHECK_OK(tcuda_comm_scatter((const tcuda_dltensor_t *)&hs.t, (int[]){a, b}, 2, NULL, 0, 0, NULL, out, &n));
  for (int i = 0; i < 2; i++) {
    e = sub(href, I64, 3, 3 * i, 3, 0, 3);
    CHECK((int)out[i]->dl_tensor.device.device_type == TC_DL_CUDA);
    check_equal(&out[i]->dl_tensor, e, "scatter from host");
    free(e);
    drop(out[i]);
  }
  /* out=: a contiguous tensor on b, a strided one on a */
  ten o1, o2;
  ten_make(&o1, b, F32, 2, (int64_t[]){4, 4}, NULL, 16);
  ten_make(&o2, a, F32, 2, (int64_t[]){6, 4}, (int64_t[]){1, 6}, 24);
  const DLTensor *outs[2] = {&o1.t, &o2.t};
  CHECK_OK(tcuda_comm_scatter_out((const tcuda_dltensor_t *)&src.t, (const tcuda_dltensor_t *const *)outs, 2, 0, NULL));
  e = sub(ref, F32, 4, 0, 4, 0, 4);
  check_equal(&o1.t, e, "scatter_out 0");
  free(e);
  e = sub(ref, F32, 4, 4, 6, 0, 4);
  check_equal(&o2.t, e, "scatter_out 1 strided");
  free(e);
  ten_free(&o1); ten_free(&o2); ten_free(&src); ten_free(&small); ten_free(&hs);
  free(ref); free(sref); free(href);
}

static void suite_gather(int a, int b) {
  size_t nt;
  const DLDataType *types = all_types(&nt);
  for (size_t k = 0; k < nt; k += 3) {
    DLDataType d = types[k];
    for (int dim = 0; dim < 2; dim++) {
      ten t0, t1;
      void *r0, *r1;
      int64_t R0 = dim ? 4 : 3, C0 = dim ? 3 : 4, R1 = dim ? 4 : 5, C1 = dim ? 5 : 4;
      make_filled(&t0, a, d, R0, C0, 0, 1, &r0);
      make_filled(&t1, b, d, R1, C1, (int)(k & 1), 2, &r1);
      int64_t R = dim ? 4 : 8, C = dim ? 8 : 4;
      char *e = calloc((size_t)(R * C), esz(d));
      for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++) {
          int second = dim ? j >= C0 : i >= R0;
          const char *src = second ? r1 : r0;
          int64_t si = second && !dim ? i - R0 : i, sj = second && dim ? j - C0 : j, sc = second ? C1 : C0;
          memcpy(e + (i * C + j) * (int64_t)esz(d), src + (si * sc + sj) * (int64_t)esz(d), esz(d));
        }
      const DLTensor *in[2] = {&t0.t, &t1.t};
      int dests[3] = {a, b, TCUDA_COMM_HOST};
      for (int di = 0; di < 3; di++) {
        DLManagedTensor *o = NULL;
        CHECK_OK(tcuda_comm_gather((const tcuda_dltensor_t *const *)in, 2, dim, dests[di], &o));
        if (!o) continue;
        CHECK(o->dl_tensor.shape[0] == R && o->dl_tensor.shape[1] == C);
        if (dests[di] == TCUDA_COMM_HOST) {
          CHECK((int)o->dl_tensor.device.device_type == TC_DL_CPU);
          CHECK(same_elems(o->dl_tensor.data, e, R * C, esz(d), "gather to host (no sync needed)"));
        } else {
          CHECK(o->dl_tensor.device.device_id == dests[di]);
          check_equal(&o->dl_tensor, e, "gather");
        }
        drop(o);
      }
      /* out=: pageable host memory, and a strided device tensor */
      ten ho, dvo;
      ten_make(&ho, -1, d, 2, (int64_t[]){R, C}, NULL, R * C);
      ten_make(&dvo, a, d, 2, (int64_t[]){R, C}, (int64_t[]){1, R}, R * C);
      CHECK_OK(tcuda_comm_gather_out((const tcuda_dltensor_t *const *)in, 2, dim, (const tcuda_dltensor_t *)&ho.t));
      CHECK(same_elems(ho.base, e, R * C, esz(d), "gather_out to pageable host"));
      CHECK_OK(tcuda_comm_gather_out((const tcuda_dltensor_t *const *)in, 2, dim, (const tcuda_dltensor_t *)&dvo.t));
      check_equal(&dvo.t, e, "gather_out strided");
      ten_free(&ho); ten_free(&dvo); ten_free(&t0); ten_free(&t1);
      free(r0); free(r1); free(e);
    }
  }
}

static void run_suite(int a, int b) {
  suite_broadcast(a, b);
  suite_coalesced(a, b);
  suite_reduce(a, b);
  suite_reduce_coalesced(a, b);
  suite_scatter(a, b);
  suite_gather(a, b);
}
#endif
