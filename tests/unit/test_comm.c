/* comm layer on the CPU: DLTensor checks, every validation path with
 * PyTorch's wording, bucketing (C++ and Python take_tensors), chunk and
 * shape arithmetic, and the public calls' argument errors before CUDA. */
#include "comm/comm.h" /* dlpack (real or mirror) before tcuda.h */
#include "harness.h"

/* A fake tensor: valid metadata, a data pointer that is never touched. */
typedef struct {
  DLTensor t;
  int64_t shape[8], strides[8];
} fake;

static char g_mem[64];

static DLDataType dt(int code, int bits) { return (DLDataType){(uint8_t)code, (uint8_t)bits, 1}; }
static const DLDataType F32 = {TC_DL_FLOAT, 32, 1}, F64 = {TC_DL_FLOAT, 64, 1};

static void mk(fake *f, int dev_type, int dev, DLDataType d, int ndim, const int64_t *shape, const int64_t *strides) {
  memset(f, 0, sizeof *f);
  f->t.data = g_mem;
  f->t.device.device_type = dev_type;
  f->t.device.device_id = dev;
  f->t.ndim = ndim;
  f->t.dtype = d;
  if (ndim) memcpy(f->shape, shape, (size_t)ndim * sizeof *shape);
  f->t.shape = f->shape;
  if (strides) {
    memcpy(f->strides, strides, (size_t)ndim * sizeof *strides);
    f->t.strides = f->strides;
  }
}
static void gpu(fake *f, int dev, DLDataType d, int ndim, const int64_t *shape) { mk(f, TC_DL_CUDA, dev, d, ndim, shape, NULL); }

static tc_tensor tt(const fake *f) {
  tc_tensor t;
  tcuda_status st = tc_tensor_from_dl("t", "x", (size_t)-1, &f->t, &t);
  if (st) fprintf(stderr, "tt: %s\n", tcuda_last_error());
  return t;
}

static void test_tensor_from_dl(void) {
  fake f;
  tc_tensor t;
  int64_t s23[] = {2, 3};
  CHECK_ERR(tc_tensor_from_dl("f", "tensors", 4, NULL, &t), TCUDA_ERROR_INVALID_ARGUMENT, "f: tensors[4] is NULL");
  CHECK_ERR(tc_tensor_from_dl("f", "tensor", (size_t)-1, NULL, &t), TCUDA_ERROR_INVALID_ARGUMENT, "f: tensor is NULL");
  gpu(&f, 0, F32, 2, s23);
  f.t.ndim = 26;
  CHECK_ERR(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t), TCUDA_ERROR_INVALID_ARGUMENT, "ndim 26");
  f.t.ndim = -1;
  CHECK_ERR(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t), TCUDA_ERROR_INVALID_ARGUMENT, "ndim -1");
  gpu(&f, 0, F32, 2, s23);
  f.t.shape = NULL;
  CHECK_ERR(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t), TCUDA_ERROR_INVALID_ARGUMENT, "shape is NULL");
  gpu(&f, 0, (DLDataType){TC_DL_FLOAT, 32, 4}, 2, s23);
  CHECK_ERR(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t), TCUDA_ERROR_NOT_SUPPORTED, "lanes 4");
  gpu(&f, 0, dt(TC_DL_FLOAT, 8), 2, s23);
  CHECK_ERR(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t), TCUDA_ERROR_NOT_SUPPORTED, "code 2, bits 8");
  gpu(&f, 0, dt(3, 64), 2, s23); /* opaque handle */
  CHECK_ERR(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t), TCUDA_ERROR_NOT_SUPPORTED, "unsupported dtype");
  mk(&f, 7, 0, F32, 2, s23, NULL); /* Vulkan */
  CHECK_ERR(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t), TCUDA_ERROR_NOT_SUPPORTED, "device type 7");
  gpu(&f, -1, F32, 2, s23);
  CHECK_ERR(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t), TCUDA_ERROR_INVALID_DEVICE, "device id -1");
  int64_t neg[] = {2, -3};
  gpu(&f, 0, F32, 2, neg);
  CHECK_ERR(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t), TCUDA_ERROR_INVALID_ARGUMENT, "negative size -3 at dim 1");
  int64_t huge[] = {INT64_MAX / 2, 4};
  gpu(&f, 0, F32, 2, huge);
  CHECK_ERR(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t), TCUDA_ERROR_OVERFLOW, "too large");
  gpu(&f, 0, F32, 2, s23);
  f.t.data = NULL;
  CHECK_ERR(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t), TCUDA_ERROR_INVALID_ARGUMENT, "NULL data and 6 elements");
  int64_t s0[] = {0, 3};
  gpu(&f, 0, F32, 2, s0);
  f.t.data = NULL; /* empty tensors may have no data */
  CHECK_OK(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t));
  CHECK_EQ_INT(t.numel, 0);

  gpu(&f, 3, dt(TC_DL_COMPLEX, 128), 2, s23);
  f.t.byte_offset = 32;
  CHECK_OK(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t));
  CHECK(t.data == g_mem + 32);
  CHECK_EQ_INT(t.strides[0], 3);
  CHECK_EQ_INT(t.strides[1], 1);
  CHECK_EQ_INT(t.elem_size, 16);
  CHECK_EQ_INT(t.numel, 6);
  CHECK_EQ_INT(t.device, 3);
  CHECK(t.on_gpu);
  mk(&f, TC_DL_CUDA_HOST, 1, F32, 2, s23, (int64_t[]){1, 2});
  CHECK_OK(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t));
  CHECK(!t.on_gpu);
  CHECK_EQ_INT(t.device, -1);
  CHECK_EQ_INT(t.strides[1], 2);
  mk(&f, TC_DL_CUDA_MANAGED, 1, F32, 0, NULL, NULL);
  CHECK_OK(tc_tensor_from_dl("f", "x", (size_t)-1, &f.t, &t));
  CHECK(t.on_gpu);
  CHECK_EQ_INT(t.numel, 1);

  const DLTensor *list[2] = {&f.t, NULL};
  tc_tensor ts[2];
  CHECK_ERR(tc_tensors_from_dl("g", "inputs", list, 2, ts), TCUDA_ERROR_INVALID_ARGUMENT, "g: inputs[1] is NULL");
  CHECK_ERR(tc_tensors_from_dl("g", "inputs", NULL, 2, ts), TCUDA_ERROR_INVALID_ARGUMENT, "g: inputs is NULL");
  CHECK_OK(tc_tensors_from_dl("g", "inputs", NULL, 0, ts));
}

static void test_dtypes(void) {
  struct { int code, bits; int64_t size; const char *name; int rank; } cases[] = {
      {TC_DL_INT, 8, 1, "Char", 1},          {TC_DL_INT, 16, 2, "Short", 2},
      {TC_DL_INT, 32, 4, "Int", 3},          {TC_DL_INT, 64, 8, "Long", 4},
      {TC_DL_UINT, 8, 1, "Byte", 0},         {TC_DL_UINT, 16, 2, "UInt16", 27},
      {TC_DL_UINT, 32, 4, "UInt32", 28},     {TC_DL_UINT, 64, 8, "UInt64", 29},
      {TC_DL_FLOAT, 16, 2, "Half", 5},       {TC_DL_FLOAT, 32, 4, "Float", 6},
      {TC_DL_FLOAT, 64, 8, "Double", 7},     {TC_DL_BFLOAT, 16, 2, "BFloat16", 15},
      {TC_DL_BOOL, 8, 1, "Bool", 11},        {TC_DL_COMPLEX, 32, 4, "ComplexHalf", 5},
      {TC_DL_COMPLEX, 64, 8, "ComplexFloat", 6}, {TC_DL_COMPLEX, 128, 16, "ComplexDouble", 7},
      {12, 8, 1, "Float8_e5m2", 23},         {10, 8, 1, "Float8_e4m3fn", 24},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    DLDataType d = dt(cases[i].code, cases[i].bits);
    CHECK_EQ_INT(tc_dtype_size(d), cases[i].size);
    CHECK(!strcmp(tc_dtype_name(d), cases[i].name));
    CHECK_EQ_INT(tc_dtype_rank(d), cases[i].rank); /* complex groups with its real type */
  }
  CHECK_EQ_INT(tc_dtype_size(dt(TC_DL_BOOL, 1)), 0);
  CHECK_EQ_INT(tc_dtype_size(dt(TC_DL_INT, 4)), 0);
  CHECK_EQ_INT(tc_dtype_size(dt(TC_DL_BFLOAT, 32)), 0);
  CHECK_EQ_INT(tc_dtype_size(dt(TC_DL_COMPLEX, 16)), 0);
  DLDataType r = tc_dtype_real(dt(TC_DL_COMPLEX, 64));
  CHECK(r.code == TC_DL_FLOAT && r.bits == 32);
  CHECK(tc_dtype_eq(F32, F32) && !tc_dtype_eq(F32, F64));
}

static void test_shapes_and_layouts(void) {
  char b[64];
  int64_t s[] = {2, 3, 4};
  CHECK(!strcmp(tc_shape_str(b, sizeof b, 3, s), "[2, 3, 4]"));
  CHECK(!strcmp(tc_shape_str(b, sizeof b, 0, s), "[]"));
  CHECK(!strcmp(tc_shape_x(b, sizeof b, 3, s), "2x3x4"));
  CHECK(!strcmp(tc_shape_x(b, sizeof b, 0, s), ""));
  char tiny[6];
  tc_shape_str(tiny, sizeof tiny, 3, s); /* truncates safely */
  CHECK(strlen(tiny) == 5);

  fake f;
  gpu(&f, 0, F32, 3, s);
  tc_tensor t = tt(&f);
  CHECK(tc_tensor_contiguous(&t) && tc_tensor_dense(&t));
  /* transposed: dense, not contiguous */
  mk(&f, TC_DL_CUDA, 0, F32, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3});
  t = tt(&f);
  CHECK(!tc_tensor_contiguous(&t) && tc_tensor_dense(&t));
  /* channels_last NCHW: dense */
  mk(&f, TC_DL_CUDA, 0, F32, 4, (int64_t[]){2, 3, 4, 5}, (int64_t[]){60, 1, 15, 3});
  t = tt(&f);
  CHECK(!tc_tensor_contiguous(&t) && tc_tensor_dense(&t));
  /* a column slice: neither */
  mk(&f, TC_DL_CUDA, 0, F32, 2, (int64_t[]){4, 2}, (int64_t[]){3, 1});
  t = tt(&f);
  CHECK(!tc_tensor_contiguous(&t) && !tc_tensor_dense(&t));
  /* size-1 dims with odd strides are still contiguous */
  mk(&f, TC_DL_CUDA, 0, F32, 3, (int64_t[]){1, 4, 1}, (int64_t[]){99, 1, 7});
  t = tt(&f);
  CHECK(tc_tensor_contiguous(&t) && tc_tensor_dense(&t));
  /* broadcast (stride 0): overlapping */
  mk(&f, TC_DL_CUDA, 0, F32, 2, (int64_t[]){4, 3}, (int64_t[]){0, 1});
  t = tt(&f);
  CHECK(!tc_tensor_contiguous(&t) && !tc_tensor_dense(&t));
  /* empty is contiguous */
  mk(&f, TC_DL_CUDA, 0, F32, 2, (int64_t[]){0, 3}, (int64_t[]){1, 5});
  t = tt(&f);
  CHECK(tc_tensor_contiguous(&t) && tc_tensor_dense(&t));

  int64_t st[3];
  tc_contiguous_strides(3, (int64_t[]){2, 0, 4}, st);
  CHECK(st[0] == 4 && st[1] == 4 && st[2] == 1);

  gpu(&f, 0, F32, 3, s);
  t = tt(&f);
  tc_tensor n;
  tc_tensor_narrow(&t, 1, 1, 2, &n);
  CHECK(n.data == g_mem + 1 * 4 * 4);
  CHECK(n.shape[1] == 2 && n.numel == 16 && n.strides[0] == 12);
  CHECK(!tc_tensor_dense(&n));
  tc_tensor_narrow(&t, 0, 1, 1, &n);
  CHECK(n.data == g_mem + 12 * 4 && tc_tensor_contiguous(&n));
}

static void test_wrap_dim(void) {
  int w;
  CHECK_OK(tc_wrap_dim("f", -1, 3, &w));
  CHECK_EQ_INT(w, 2);
  CHECK_OK(tc_wrap_dim("f", 0, 0, &w)); /* scalars wrap as 1-d */
  CHECK_EQ_INT(w, 0);
  CHECK_OK(tc_wrap_dim("f", -1, 0, &w));
  CHECK_EQ_INT(w, 0);
  CHECK_ERR(tc_wrap_dim("f", 3, 3, &w), TCUDA_ERROR_INVALID_ARGUMENT,
            "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
  CHECK_ERR(tc_wrap_dim("f", -4, 3, &w), TCUDA_ERROR_INVALID_ARGUMENT, "but got -4)");
  CHECK_ERR(tc_wrap_dim("f", 1, 0, &w), TCUDA_ERROR_INVALID_ARGUMENT, "[-1, 0], but got 1");
}

static void test_chunks(void) {
  int64_t s[8];
  CHECK_EQ_INT(tc_chunk_sizes(10, 3, s), 3);
  CHECK(s[0] == 4 && s[1] == 4 && s[2] == 2);
  CHECK_EQ_INT(tc_chunk_sizes(5, 4, s), 3); /* torch.chunk may return fewer */
  CHECK(s[0] == 2 && s[1] == 2 && s[2] == 1);
  CHECK_EQ_INT(tc_chunk_sizes(6, 4, s), 3);
  CHECK(s[0] == 2 && s[1] == 2 && s[2] == 2);
  CHECK_EQ_INT(tc_chunk_sizes(0, 3, s), 3);
  CHECK(s[0] == 0 && s[1] == 0 && s[2] == 0);
  CHECK_EQ_INT(tc_chunk_sizes(3, 5, s), 3);
  CHECK(s[0] == 1 && s[1] == 1 && s[2] == 1);
  CHECK_EQ_INT(tc_chunk_sizes(7, 1, s), 1);
  CHECK(s[0] == 7);
  CHECK_EQ_INT(tc_chunk_sizes(256, 2, s), 2);
  CHECK(s[0] == 128 && s[1] == 128);

  CHECK_OK(tc_check_split("f", (int64_t[]){2, 0, 3}, 3, 5, 0));
  CHECK_ERR(tc_check_split("f", (int64_t[]){2, -1, 4}, 3, 5, 1), TCUDA_ERROR_INVALID_ARGUMENT,
            "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=[2, -1, 4]");
  CHECK_ERR(tc_check_split("f", (int64_t[]){2, 2}, 2, 5, 1), TCUDA_ERROR_INVALID_ARGUMENT,
            "split_with_sizes expects split_sizes to sum exactly to 5 (input tensor's size at dimension 1), but got "
            "split_sizes=[2, 2]");
}

static void test_take_tensors_cpp(void) {
  size_t b[16];
  /* one dtype: a bucket is emitted once it reaches the limit (>=) */
  int k1[] = {6, 6, 6, 6};
  uint64_t s1[] = {4, 4, 2, 4};
  CHECK_EQ_INT(tc_take_tensors(TC_TAKE_CPP, k1, s1, 4, 10, b), 2);
  CHECK(b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 1);
  /* overshoot by one tensor: 4 + 20 */
  uint64_t s2[] = {4, 20, 4, 4};
  CHECK_EQ_INT(tc_take_tensors(TC_TAKE_CPP, k1, s2, 4, 10, b), 2);
  CHECK(b[0] == 0 && b[1] == 0 && b[2] == 1 && b[3] == 1);
  /* mixed dtypes: full buckets in completion order, leftovers by ScalarType
   * (Long=4 before Float=6, although Float came first) */
  int k3[] = {6, 7, 4, 7, 6};
  uint64_t s3[] = {4, 8, 8, 8, 4};
  CHECK_EQ_INT(tc_take_tensors(TC_TAKE_CPP, k3, s3, 5, 10, b), 3);
  CHECK(b[1] == 0 && b[3] == 0); /* double 16 >= 10 */
  CHECK(b[2] == 1);              /* long leftover */
  CHECK(b[0] == 2 && b[4] == 2); /* float leftover */
  /* zero-byte tensors still get a bucket */
  int k4[] = {6, 6};
  uint64_t s4[] = {0, 0};
  CHECK_EQ_INT(tc_take_tensors(TC_TAKE_CPP, k4, s4, 2, 10, b), 1);
  CHECK(b[0] == 0 && b[1] == 0);
  CHECK_EQ_INT(tc_take_tensors(TC_TAKE_CPP, k4, s4, 0, 10, b), 0);
  /* limit 0: every tensor its own bucket */
  CHECK_EQ_INT(tc_take_tensors(TC_TAKE_CPP, k1, s1, 4, 0, b), 4);

  /* the benchmark's case: 1000 x 64 KiB float32 at 10 MiB: 6 x 160 + 40 */
  enum { N = 1000 };
  static int k[N];
  static uint64_t sz[N];
  static size_t bk[N];
  for (int i = 0; i < N; i++) { k[i] = 6; sz[i] = 65536; }
  CHECK_EQ_INT(tc_take_tensors(TC_TAKE_CPP, k, sz, N, 10485760, bk), 7);
  CHECK_EQ_INT(bk[0], 0);
  CHECK_EQ_INT(bk[159], 0);
  CHECK_EQ_INT(bk[160], 1);
  CHECK_EQ_INT(bk[959], 5);
  CHECK_EQ_INT(bk[960], 6);
  CHECK_EQ_INT(bk[999], 6);
}

static void test_take_tensors_py(void) {
  size_t b[16];
  /* the bucket is emitted BEFORE adding a tensor that would overflow it */
  int k1[] = {6, 6, 6, 6};
  uint64_t s1[] = {4, 4, 4, 4};
  CHECK_EQ_INT(tc_take_tensors(TC_TAKE_PY, k1, s1, 4, 10, b), 2);
  CHECK(b[0] == 0 && b[1] == 0 && b[2] == 1 && b[3] == 1);
  /* an oversized tensor into an empty bucket: kept, then flushed by the next */
  uint64_t s2[] = {20, 4, 4, 4};
  CHECK_EQ_INT(tc_take_tensors(TC_TAKE_PY, k1, s2, 4, 10, b), 3);
  CHECK(b[0] == 0 && b[1] == 1 && b[2] == 1 && b[3] == 2);
  /* exactly the limit fits (> not >=) */
  uint64_t s3[] = {5, 5, 5};
  CHECK_EQ_INT(tc_take_tensors(TC_TAKE_PY, k1, s3, 3, 10, b), 2);
  CHECK(b[0] == 0 && b[1] == 0 && b[2] == 1);
  /* leftovers in order of first appearance: float (6) before long (4) */
  int k4[] = {6, 4, 6};
  uint64_t s4[] = {4, 4, 4};
  CHECK_EQ_INT(tc_take_tensors(TC_TAKE_PY, k4, s4, 3, 10, b), 2);
  CHECK(b[0] == 0 && b[2] == 0 && b[1] == 1);
}

static void test_check_broadcast(void) {
  fake fs, fo[3];
  int64_t s23[] = {2, 3}, s3[] = {3};
  gpu(&fs, 0, F32, 2, s23);
  tc_tensor src = tt(&fs), outs[3];
  gpu(&fo[0], 1, F32, 2, s23);
  mk(&fo[1], TC_DL_CPU, 0, F32, 2, s23, NULL);
  gpu(&fo[2], 1, F32, 1, s3);
  for (int i = 0; i < 3; i++) outs[i] = tt(&fo[i]);
  CHECK_OK(tc_check_broadcast_out("f", &src, outs, 1));
  CHECK_ERR(tc_check_broadcast_out("f", &src, outs, 2), TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected all output tensors to be CUDA tensors, but output tensor at index 1 has device 'cpu'");
  outs[1] = outs[2];
  CHECK_ERR(tc_check_broadcast_out("f", &src, outs, 2), TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected all output tensors to have same shape as the source tensor [2, 3], but output tensor at index 1 "
            "has shape [3]");
  gpu(&fo[1], 1, F64, 2, s23);
  outs[1] = tt(&fo[1]);
  CHECK_ERR(tc_check_broadcast_out("f", &src, outs, 2), TCUDA_ERROR_INVALID_ARGUMENT,
            "same dtype as the source tensor Float, but output tensor at index 1 has dtype Double");

  CHECK_OK(tc_check_device_list("f", (int[]){0, 1}, 2));
  CHECK_OK(tc_check_device_list("f", NULL, 0));
  CHECK_ERR(tc_check_device_list("f", NULL, 2), TCUDA_ERROR_INVALID_ARGUMENT, "devices is NULL");
  CHECK_ERR(tc_check_device_list("f", (int[]){0, -1}, 2), TCUDA_ERROR_INVALID_DEVICE,
            "Expected non-negative device index, but got -1");

  tc_tensor ts[2] = {src, src};
  CHECK_OK(tc_check_broadcast_coalesced("f", ts, 2, (int[]){0, 1}, 2));
  CHECK_OK(tc_check_broadcast_coalesced("f", ts, 0, (int[]){0}, 1));
  CHECK_ERR(tc_check_broadcast_coalesced("f", ts, 2, (int[]){0}, 0), TCUDA_ERROR_INVALID_ARGUMENT, "devices is empty");
  CHECK_ERR(tc_check_broadcast_coalesced("f", ts, 2, (int[]){1, 0}, 2), TCUDA_ERROR_INVALID_ARGUMENT,
            "All tensors must be on devices[0]: 1");
  CHECK_ERR(tc_check_broadcast_coalesced("f", ts, 2, (int[]){0, -2}, 2), TCUDA_ERROR_INVALID_DEVICE,
            "non-negative device index, but got -2");
  mk(&fo[0], TC_DL_CPU, 0, F32, 2, s23, NULL);
  ts[1] = tt(&fo[0]); /* a host tensor is on no device */
  CHECK_ERR(tc_check_broadcast_coalesced("f", ts, 2, (int[]){0, 1}, 2), TCUDA_ERROR_INVALID_ARGUMENT,
            "All tensors must be on devices[0]: 0");
}

static void test_check_reduce_add(void) {
  fake f[4];
  int64_t s23[] = {2, 3}, s32[] = {3, 2};
  gpu(&f[0], 0, F32, 2, s23);
  gpu(&f[1], 1, F32, 2, s23);
  gpu(&f[2], 1, F32, 2, s32);
  gpu(&f[3], 1, F64, 2, s23);
  tc_tensor in[4];
  for (int i = 0; i < 4; i++) in[i] = tt(&f[i]);
  size_t root = 99;
  CHECK_OK(tc_check_reduce_add("f", in, 2, 1, &root));
  CHECK_EQ_INT(root, 1);
  tc_tensor same[3] = {in[0], in[0], in[1]}; /* the LAST input on destination is the root */
  CHECK_OK(tc_check_reduce_add("f", same, 3, 0, &root));
  CHECK_EQ_INT(root, 1);
  CHECK_ERR(tc_check_reduce_add("f", in, 0, 0, &root), TCUDA_ERROR_INVALID_ARGUMENT, "at least one input");
  tc_tensor badsz[2] = {in[0], in[2]};
  CHECK_ERR(tc_check_reduce_add("f", badsz, 2, 0, &root), TCUDA_ERROR_INVALID_ARGUMENT,
            "input 1 has invalid size: got 3x2, but expected 2x3");
  tc_tensor baddt[2] = {in[0], in[3]};
  CHECK_ERR(tc_check_reduce_add("f", baddt, 2, 0, &root), TCUDA_ERROR_INVALID_ARGUMENT,
            "all inputs and outputs must be of the same Tensor dtype");
  CHECK_ERR(tc_check_reduce_add("f", in, 2, 5, &root), TCUDA_ERROR_INVALID_ARGUMENT,
            "reduce_add expects destination to be on the same GPU with one of the tensors");
  fake h;
  mk(&h, TC_DL_CPU, 0, F32, 2, s23, NULL);
  tc_tensor withcpu[2] = {in[0], tt(&h)};
  CHECK_ERR(tc_check_reduce_add("f", withcpu, 2, 0, &root), TCUDA_ERROR_INVALID_ARGUMENT,
            "reduce_add expects all inputs to be on GPUs");

  /* coalesced: [ngpus][ntensors] */
  tc_tensor grid[4] = {in[0], in[0], in[1], in[1]};
  CHECK_OK(tc_check_reduce_add_coalesced("f", grid, 2, 2, 1));
  CHECK_OK(tc_check_reduce_add_coalesced("f", grid, 0, 2, 1));
  CHECK_ERR(tc_check_reduce_add_coalesced("f", grid, 2, 2, 3), TCUDA_ERROR_INVALID_ARGUMENT,
            "destination to be on the same GPU");
  tc_tensor mixed[4] = {in[0], in[1], in[1], in[1]};
  CHECK_ERR(tc_check_reduce_add_coalesced("f", mixed, 2, 2, 1), TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!");
  tc_tensor badshape[4] = {in[0], in[0], in[1], in[2]};
  CHECK_ERR(tc_check_reduce_add_coalesced("f", badshape, 2, 2, 1), TCUDA_ERROR_INVALID_ARGUMENT,
            "inputs[1][1] has invalid size: got 3x2, but expected 2x3");
  tc_tensor badtype[4] = {in[0], in[0], in[1], in[3]};
  CHECK_ERR(tc_check_reduce_add_coalesced("f", badtype, 2, 2, 1), TCUDA_ERROR_INVALID_ARGUMENT,
            "same Tensor dtype (inputs[1][1] is Double");
  tc_tensor cpu2[4] = {in[0], in[0], withcpu[1], withcpu[1]};
  CHECK_ERR(tc_check_reduce_add_coalesced("f", cpu2, 2, 2, 0), TCUDA_ERROR_INVALID_ARGUMENT, "on GPUs");
}

static void test_plan_scatter(void) {
  fake f;
  int64_t s[] = {10, 4};
  gpu(&f, 0, F32, 2, s);
  tc_tensor src = tt(&f);
  int w;
  int64_t sizes[8];
  size_t n;
  CHECK_OK(tc_plan_scatter("f", &src, 3, NULL, 0, 0, &w, sizes, &n));
  CHECK(w == 0 && n == 3 && sizes[0] == 4 && sizes[1] == 4 && sizes[2] == 2);
  CHECK_OK(tc_plan_scatter("f", &src, 2, (int64_t[]){1, 3}, 2, -1, &w, sizes, &n));
  CHECK(w == 1 && n == 2 && sizes[0] == 1 && sizes[1] == 3);
  CHECK_ERR(tc_plan_scatter("f", &src, 0, NULL, 0, 0, &w, sizes, &n), TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected at least one device to scatter to");
  CHECK_ERR(tc_plan_scatter("f", &src, 2, (int64_t[]){1, 3, 6}, 3, 0, &w, sizes, &n), TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected devices and chunk_sizes to be of same length, but got len(devices) = 2 and len(chunk_sizes) = 3");
  CHECK_ERR(tc_plan_scatter("f", &src, 2, NULL, 0, 2, &w, sizes, &n), TCUDA_ERROR_INVALID_ARGUMENT,
            "Dimension out of range");
  CHECK_ERR(tc_plan_scatter("f", &src, 2, (int64_t[]){4, 4}, 2, 0, &w, sizes, &n), TCUDA_ERROR_INVALID_ARGUMENT,
            "sum exactly to 10 (input tensor's size at dimension 0), but got split_sizes=[4, 4]");
  CHECK_ERR(tc_plan_scatter("f", &src, 2, (int64_t[]){11, -1}, 2, 0, &w, sizes, &n), TCUDA_ERROR_INVALID_ARGUMENT,
            "only non-negative entries");
  fake sc;
  gpu(&sc, 0, F32, 0, s);
  tc_tensor scalar = tt(&sc);
  CHECK_ERR(tc_plan_scatter("f", &scalar, 2, NULL, 0, 0, &w, sizes, &n), TCUDA_ERROR_INVALID_ARGUMENT,
            "chunk expects at least a 1-dimensional tensor");

  CHECK_OK(tc_check_scatter_stream("f", 0, 1, 1));
  CHECK_ERR(tc_check_scatter_stream("f", 1, 0, 1), TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected the device associated with the stream at index 1 (was 0) to match the device supplied at that "
            "index (expected 1)");

  fake fo[3];
  gpu(&fo[0], 0, F32, 2, (int64_t[]){6, 4});
  gpu(&fo[1], 1, F32, 2, (int64_t[]){4, 4});
  mk(&fo[2], TC_DL_CPU, 0, F32, 2, (int64_t[]){4, 4}, NULL);
  tc_tensor outs[3] = {tt(&fo[0]), tt(&fo[1]), tt(&fo[2])};
  CHECK_OK(tc_plan_scatter_out("f", &src, outs, 2, 0, &w));
  CHECK_ERR(tc_plan_scatter_out("f", &src, outs, 0, 0, &w), TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected at least one output tensor to scatter to");
  CHECK_ERR(tc_plan_scatter_out("f", &src, outs, 3, 0, &w), TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected all output tensors to be CUDA tensors, but output tensor at index 2 has device 'cpu'");
  CHECK_ERR(tc_plan_scatter_out("f", &src, outs, 1, 0, &w), TCUDA_ERROR_INVALID_ARGUMENT,
            "Total size for output tensors along scatter dim 0 does not match the source tensor size at dim 0. "
            "Expected 10, but got total size 6");
  CHECK_ERR(tc_plan_scatter_out("f", &src, outs, 2, 1, &w), TCUDA_ERROR_INVALID_ARGUMENT,
            "Output tensor at index 0 has incorrect shape: [6, 4]. Expected same shape except for scatter dim 1 as "
            "the source tensor: [10, 4]");
  gpu(&fo[1], 1, F32, 3, (int64_t[]){4, 4, 1});
  outs[1] = tt(&fo[1]);
  CHECK_ERR(tc_plan_scatter_out("f", &src, outs, 2, 0, &w), TCUDA_ERROR_INVALID_ARGUMENT,
            "Output tensor at index 1 has incorrect shape: [4, 4, 1]");
  gpu(&fo[1], 1, F64, 2, (int64_t[]){4, 4});
  outs[1] = tt(&fo[1]);
  CHECK_ERR(tc_plan_scatter_out("f", &src, outs, 2, 0, &w), TCUDA_ERROR_INVALID_ARGUMENT, "has dtype Double");
  CHECK_ERR(tc_plan_scatter_out("f", &src, outs, 2, -3, &w), TCUDA_ERROR_INVALID_ARGUMENT, "Dimension out of range");
}

static void test_plan_gather(void) {
  fake f[5];
  gpu(&f[0], 0, F32, 2, (int64_t[]){2, 3});
  gpu(&f[1], 1, F32, 2, (int64_t[]){5, 3});
  gpu(&f[2], 1, F32, 2, (int64_t[]){5, 4});
  gpu(&f[3], 1, F32, 3, (int64_t[]){2, 3, 1});
  mk(&f[4], TC_DL_CPU, 0, F32, 2, (int64_t[]){2, 3}, NULL);
  tc_tensor t[5];
  for (int i = 0; i < 5; i++) t[i] = tt(&f[i]);
  int w;
  int64_t shape[4];
  CHECK_OK(tc_plan_gather("f", t, 2, 0, &w, shape));
  CHECK(w == 0 && shape[0] == 7 && shape[1] == 3);
  tc_tensor cols[2] = {t[1], t[2]};
  CHECK_OK(tc_plan_gather("f", cols, 2, -1, &w, shape));
  CHECK(w == 1 && shape[0] == 5 && shape[1] == 7);
  CHECK_ERR(tc_plan_gather("f", t, 0, 0, &w, shape), TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected at least one tensor to gather from");
  CHECK_ERR(tc_plan_gather("f", t, 3, 0, &w, shape), TCUDA_ERROR_INVALID_ARGUMENT,
            "Input tensor at index 2 has invalid shape [5, 4], but expected [5, 3]");
  tc_tensor nd[2] = {t[0], t[3]};
  CHECK_ERR(tc_plan_gather("f", nd, 2, 0, &w, shape), TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected all input tensors to have the same number of dimensions, but tensor at index 1 has 3 dimensions, "
            "(expected 2)");
  tc_tensor host[2] = {t[0], t[4]};
  CHECK_ERR(tc_plan_gather("f", host, 2, 0, &w, shape), TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected all input tensors to be CUDA tensors, but tensor at index 1 has device cpu");
  CHECK_ERR(tc_plan_gather("f", t, 2, 2, &w, shape), TCUDA_ERROR_INVALID_ARGUMENT, "Dimension out of range");
  gpu(&f[2], 1, F64, 2, (int64_t[]){5, 3});
  tc_tensor dts[2] = {t[0], tt(&f[2])};
  CHECK_ERR(tc_plan_gather("f", dts, 2, 0, &w, shape), TCUDA_ERROR_INVALID_ARGUMENT, "has dtype Double");
  fake sc;
  gpu(&sc, 0, F32, 0, NULL);
  tc_tensor scalar = tt(&sc);
  CHECK_ERR(tc_plan_gather("f", &scalar, 1, 0, &w, shape), TCUDA_ERROR_INVALID_ARGUMENT,
            "dimension specified as 0 but tensor has no dimensions");
}

/* The public calls refuse bad input before touching CUDA, so these hold
 * with or without a GPU. */
static void test_public_argument_errors(void) {
  fake a, b, h;
  int64_t s[] = {4, 2};
  gpu(&a, 0, F32, 2, s);
  gpu(&b, 0, F32, 2, (int64_t[]){3, 2});
  mk(&h, TC_DL_CPU, 0, F32, 2, s, NULL);
  DLManagedTensor *out[4] = {0};
  size_t nout = 7;

  CHECK_ERR(tcuda_comm_broadcast(NULL, (int[]){0}, 1, out), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_comm_broadcast: tensor is NULL");
  CHECK_ERR(tcuda_comm_broadcast(&a.t, (int[]){0, -1}, 2, out), TCUDA_ERROR_INVALID_DEVICE,
            "tcuda_comm_broadcast: Expected non-negative device index, but got -1");
  CHECK_ERR(tcuda_comm_broadcast(&a.t, NULL, 2, out), TCUDA_ERROR_INVALID_ARGUMENT, "devices is NULL");
  CHECK_ERR(tcuda_comm_broadcast(&a.t, (int[]){0}, 1, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  CHECK_OK(tcuda_comm_broadcast(&a.t, NULL, 0, NULL)); /* PyTorch returns [] */

  const DLTensor *outs[2] = {&b.t, &h.t};
  CHECK_ERR(tcuda_comm_broadcast_out(&a.t, outs, 1), TCUDA_ERROR_INVALID_ARGUMENT, "has shape [3, 2]");
  outs[0] = &a.t;
  CHECK_ERR(tcuda_comm_broadcast_out(&a.t, outs, 2), TCUDA_ERROR_INVALID_ARGUMENT, "has device 'cpu'");
  CHECK_ERR(tcuda_comm_broadcast_out(&a.t, NULL, 2), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");

  const DLTensor *list[2] = {&a.t, &b.t};
  CHECK_ERR(tcuda_comm_broadcast_coalesced(list, 2, (int[]){1, 0}, 2, 100, out), TCUDA_ERROR_INVALID_ARGUMENT,
            "All tensors must be on devices[0]: 1");
  CHECK_ERR(tcuda_comm_broadcast_coalesced(list, 2, NULL, 0, 100, out), TCUDA_ERROR_INVALID_ARGUMENT,
            "devices is empty");
  CHECK_ERR(tcuda_comm_broadcast_coalesced(list, 2, (int[]){0, 1}, 2, 100, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "out is NULL");

  CHECK_ERR(tcuda_comm_reduce_add(list, 0, 0, out), TCUDA_ERROR_INVALID_ARGUMENT, "at least one input");
  CHECK_ERR(tcuda_comm_reduce_add(list, 2, 0, out), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_comm_reduce_add: input 1 has invalid size: got 3x2, but expected 4x2");
  CHECK_ERR(tcuda_comm_reduce_add(list, 1, 1, out), TCUDA_ERROR_INVALID_ARGUMENT, "same GPU with one of the tensors");
  CHECK_ERR(tcuda_comm_reduce_add(list, 1, -3, out), TCUDA_ERROR_INVALID_DEVICE, "destination -3");
  CHECK_ERR(tcuda_comm_reduce_add(list, 1, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  const DLTensor *hl[2] = {&a.t, &h.t};
  CHECK_ERR(tcuda_comm_reduce_add(hl, 2, 0, out), TCUDA_ERROR_INVALID_ARGUMENT, "expects all inputs to be on GPUs");

  const DLTensor *grid[4] = {&a.t, &a.t, &a.t, &b.t};
  CHECK_ERR(tcuda_comm_reduce_add_coalesced(grid, 2, 2, 0, 100, out), TCUDA_ERROR_INVALID_ARGUMENT,
            "inputs[1][1] has invalid size");
  CHECK_ERR(tcuda_comm_reduce_add_coalesced(grid, 2, 2, 0, 100, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  CHECK_OK(tcuda_comm_reduce_add_coalesced(grid, 0, 2, 0, 100, NULL)); /* PyTorch returns () */

  CHECK_ERR(tcuda_comm_scatter(&a.t, NULL, 0, NULL, 0, 0, NULL, out, &nout), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_comm_scatter: Expected at least one device to scatter to");
  CHECK_ERR(tcuda_comm_scatter(&a.t, (int[]){0, 1}, 2, (int64_t[]){1, 1}, 2, 0, NULL, out, &nout),
            TCUDA_ERROR_INVALID_ARGUMENT, "sum exactly to 4");
  CHECK_ERR(tcuda_comm_scatter(&a.t, (int[]){0, -1}, 2, NULL, 0, 0, NULL, out, &nout), TCUDA_ERROR_INVALID_DEVICE,
            "Expected non-negative device index, but got -1");
  tcuda_stream_t s0 = {NULL, 0, 0, 0};
  const tcuda_stream_t *streams[2] = {NULL, &s0};
  CHECK_ERR(tcuda_comm_scatter(&a.t, (int[]){0, 1}, 2, NULL, 0, 0, streams, out, &nout), TCUDA_ERROR_INVALID_ARGUMENT,
            "stream at index 1 (was 0) to match the device supplied at that index (expected 1)");
  CHECK_ERR(tcuda_comm_scatter(&a.t, (int[]){0, 1}, 2, NULL, 0, 5, NULL, out, &nout), TCUDA_ERROR_INVALID_ARGUMENT,
            "Dimension out of range");
  CHECK_ERR(tcuda_comm_scatter(&a.t, (int[]){0, 1}, 2, NULL, 0, 0, NULL, NULL, &nout), TCUDA_ERROR_INVALID_ARGUMENT,
            "out is NULL");
  CHECK_EQ_INT(nout, 7); /* untouched on error */
  const DLTensor *souts[2] = {&a.t, &b.t};
  CHECK_ERR(tcuda_comm_scatter_out(&a.t, souts, 2, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected 4, but got total size 7");
  CHECK_ERR(tcuda_comm_scatter_out(&a.t, souts, 0, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected at least one output tensor to scatter to");
  gpu(&b, 1, F32, 2, (int64_t[]){0, 2});
  const tcuda_stream_t *bad[2] = {NULL, &s0};
  CHECK_ERR(tcuda_comm_scatter_out(&a.t, souts, 2, 0, bad), TCUDA_ERROR_INVALID_ARGUMENT,
            "stream at index 1 (was 0) to match the device supplied at that index (expected 1)");

  CHECK_ERR(tcuda_comm_gather(list, 0, 0, 0, out), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_comm_gather: Expected at least one tensor to gather from");
  CHECK_ERR(tcuda_comm_gather(hl, 2, 0, 0, out), TCUDA_ERROR_INVALID_ARGUMENT, "to be CUDA tensors");
  CHECK_ERR(tcuda_comm_gather(list, 1, 0, -3, out), TCUDA_ERROR_INVALID_DEVICE, "destination -3");
  CHECK_ERR(tcuda_comm_gather(list, 1, 0, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  gpu(&b, 0, F32, 2, (int64_t[]){3, 2});
  CHECK_ERR(tcuda_comm_gather_out(list, 2, 0, &b.t), TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected out tensor to have shape [7, 2], but got [3, 2]");
  CHECK_ERR(tcuda_comm_gather_out(list, 2, 1, &b.t), TCUDA_ERROR_INVALID_ARGUMENT,
            "Input tensor at index 1 has invalid shape [3, 2], but expected [4, 2]");
  CHECK_ERR(tcuda_comm_gather_out(list, 2, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  for (int i = 0; i < 4; i++) CHECK(out[i] == NULL); /* nothing produced */

}

/* The engine option: checked, process-wide, AUTO until set; no GPU needed. */
static void test_engine_option(void) {
  tcuda_comm_engine e = (tcuda_comm_engine)7;
  CHECK_OK(tcuda_comm_get_engine(&e));
  CHECK(e == TCUDA_COMM_ENGINE_AUTO);
  CHECK_ERR(tcuda_comm_get_engine(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_comm_get_engine: engine is NULL");
  CHECK_ERR(tcuda_comm_set_engine((tcuda_comm_engine)3), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_comm_set_engine: engine 3 is not a tcuda_comm_engine");
  CHECK_ERR(tcuda_comm_set_engine((tcuda_comm_engine)-1), TCUDA_ERROR_INVALID_ARGUMENT, "engine -1");
  CHECK_OK(tcuda_comm_get_engine(&e));
  CHECK(e == TCUDA_COMM_ENGINE_AUTO); /* a refused value changes nothing */
  static const tcuda_comm_engine all[] = {TCUDA_COMM_ENGINE_NCCL, TCUDA_COMM_ENGINE_COPY, TCUDA_COMM_ENGINE_AUTO};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
    CHECK_OK(tcuda_comm_set_engine(all[i]));
    CHECK_OK(tcuda_comm_get_engine(&e));
    CHECK(e == all[i]);
  }
}

static void test_rank_api_errors(void) {
  tcuda_comm_t *c = (tcuda_comm_t *)0x1;
  tcuda_comm_unique_id_t id;
  memset(&id, 0, sizeof id);
  CHECK_ERR(tcuda_comm_unique_id(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "id is NULL");
  CHECK_ERR(tcuda_comm_init_rank(0, &id, 0, 0, &c), TCUDA_ERROR_INVALID_ARGUMENT, "nranks 0");
  CHECK_ERR(tcuda_comm_init_rank(2, &id, 2, 0, &c), TCUDA_ERROR_INVALID_ARGUMENT, "rank 2 out of range");
  CHECK_ERR(tcuda_comm_init_rank(2, &id, -1, 0, &c), TCUDA_ERROR_INVALID_ARGUMENT, "rank -1 out of range");
  CHECK_ERR(tcuda_comm_init_rank(2, NULL, 0, 0, &c), TCUDA_ERROR_INVALID_ARGUMENT, "id is NULL");
  CHECK_ERR(tcuda_comm_init_rank(2, &id, 0, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  CHECK(c == (tcuda_comm_t *)0x1);
  CHECK_OK(tcuda_comm_destroy(NULL));
  CHECK_ERR(tcuda_comm_info(NULL, NULL, NULL, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "comm is NULL");
  CHECK_ERR(tcuda_comm_broadcast_rank(NULL, NULL, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "comm is NULL");
  CHECK_ERR(tcuda_comm_reduce_rank(NULL, NULL, NULL, -1, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "invalid root -1");
  CHECK_ERR(tcuda_comm_all_reduce_rank(NULL, NULL, NULL, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "comm is NULL");
}

/* Without a GPU a well-formed call fails cleanly, allocating nothing. */
static void test_no_gpu(void) {
  if (tcuda_is_available()) return;
  fake a;
  gpu(&a, 0, F32, 2, (int64_t[]){4, 2});
  DLManagedTensor *out[2] = {0};
  CHECK_ERR(tcuda_comm_broadcast(&a.t, (int[]){0, 1}, 2, out), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_comm_broadcast");
  CHECK(!out[0] && !out[1]);
}

TC_MAIN(T(test_tensor_from_dl), T(test_dtypes), T(test_shapes_and_layouts), T(test_wrap_dim), T(test_chunks),
        T(test_take_tensors_cpp), T(test_take_tensors_py), T(test_check_broadcast), T(test_check_reduce_add),
        T(test_plan_scatter), T(test_plan_gather), T(test_public_argument_errors), T(test_engine_option),
        T(test_rank_api_errors),
        T(test_no_gpu))
