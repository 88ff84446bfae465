// RNG fill kernels. Every value comes from cuRAND's own device functions
// (curand_Philox4x32_10 and the _curand_* transforms behind curand_uniform4,
// curand_normal4 and the double variants), so equal counters give torch's bits.
//
// torch's kernel: thread t of S = 256*grid calls curand_init(seed, t, offset)
// and in iteration k takes the k-th curand4, whose lane ii becomes element
// t + S*(U*k + ii). The fast kernel keeps that element -> (t, k, ii) mapping
// but schedules it differently: one CUDA thread handles V consecutive t for
// one k, computing each counter directly (no curand_init), so every lane ii
// becomes one V-element vector store. 64-bit draws into 8-byte outputs
// (int64, float64) go through a resident-block loop over the same items
// instead (loop_kernel): one item per thread left int64 random_ behind
// torch, as each thread then writes only 32 bytes after its setup.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <curand_kernel.h>
#include "rng/kernels.h"

namespace {

__device__ __forceinline__ void unpack(const tc_philox_args &a, unsigned long long &seed,
                                       unsigned long long &offset) {
  if (a.captured) {
    seed = *a.seed_ptr;
    offset = *a.offset_ptr + a.offset_intragraph;
  } else {
    seed = a.seed;
    offset = a.offset;
  }
}

// ---- draws: one Philox call -> U values of the accumulate type ----
struct DUniformF {
  typedef float A;
  enum { U = 4 };
  __device__ static void words(uint4 w, A r[4]) {
    float4 f = _curand_uniform4(w);
    r[0] = f.x; r[1] = f.y; r[2] = f.z; r[3] = f.w;
  }
  __device__ static void draw(curandStatePhilox4_32_10_t *s, A r[4]) {
    float4 f = curand_uniform4(s);
    r[0] = f.x; r[1] = f.y; r[2] = f.z; r[3] = f.w;
  }
};
struct DUniformD {
  typedef double A;
  enum { U = 2 };
  __device__ static void words(uint4 w, A r[2]) {
    r[0] = _curand_uniform_double_hq(w.x, w.y);
    r[1] = _curand_uniform_double_hq(w.z, w.w);
  }
  __device__ static void draw(curandStatePhilox4_32_10_t *s, A r[2]) {
    double2 f = curand_uniform2_double(s);
    r[0] = f.x; r[1] = f.y;
  }
};
struct DNormalF {
  typedef float A;
  enum { U = 4 };
  __device__ static void words(uint4 w, A r[4]) {
    float2 p = _curand_box_muller(w.x, w.y), q = _curand_box_muller(w.z, w.w);
    r[0] = p.x; r[1] = p.y; r[2] = q.x; r[3] = q.y;
  }
  __device__ static void draw(curandStatePhilox4_32_10_t *s, A r[4]) {
    float4 f = curand_normal4(s);
    r[0] = f.x; r[1] = f.y; r[2] = f.z; r[3] = f.w;
  }
};
struct DNormalD {
  typedef double A;
  enum { U = 2 };
  __device__ static void words(uint4 w, A r[2]) {
    double2 p = _curand_box_muller_double(w.x, w.y, w.z, w.w);
    r[0] = p.x; r[1] = p.y;
  }
  __device__ static void draw(curandStatePhilox4_32_10_t *s, A r[2]) {
    double2 f = curand_normal2_double(s);
    r[0] = f.x; r[1] = f.y;
  }
};
struct DBits32 {
  typedef unsigned A;
  enum { U = 4 };
  __device__ static void words(uint4 w, A r[4]) { r[0] = w.x; r[1] = w.y; r[2] = w.z; r[3] = w.w; }
  __device__ static void draw(curandStatePhilox4_32_10_t *s, A r[4]) { words(curand4(s), r); }
};
struct DBits64 {
  typedef unsigned long long A;
  enum { U = 2 };
  // The first word is the high half here (the opposite of the double pairing).
  __device__ static void words(uint4 w, A r[2]) {
    r[0] = ((unsigned long long)w.x << 32) | w.y;
    r[1] = ((unsigned long long)w.z << 32) | w.w;
  }
  __device__ static void draw(curandStatePhilox4_32_10_t *s, A r[2]) { words(curand4(s), r); }
};

// ---- outputs: storage type and torch's casts into it ----
template <int O> struct Out;
template <> struct Out<TC_OUT_F32> {
  typedef float S;
  __device__ static S f(float x) { return x; }
  __device__ static S d(double x) { return (float)x; }
  __device__ static S i(long long v) { return (float)v; }
  __device__ static float back(S s) { return s; }
};
template <> struct Out<TC_OUT_F64> {
  typedef double S;
  __device__ static S f(float x) { return x; }
  __device__ static S d(double x) { return x; }
  __device__ static S i(long long v) { return (double)v; }
  __device__ static double back(S s) { return s; }
};
// c10::Half and c10::BFloat16 convert through float with round-to-nearest-even.
template <> struct Out<TC_OUT_F16> {
  typedef unsigned short S;
  __device__ static S f(float x) { return __half_as_ushort(__float2half_rn(x)); }
  __device__ static S d(double x) { return f((float)x); }
  __device__ static S i(long long v) { return f((float)v); }
  __device__ static float back(S s) { return __half2float(__ushort_as_half(s)); }
};
template <> struct Out<TC_OUT_BF16> {
  typedef unsigned short S;
  __device__ static S f(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
  __device__ static S d(double x) { return f((float)x); }
  __device__ static S i(long long v) { return f((float)v); }
  __device__ static float back(S s) { return __bfloat162float(__ushort_as_bfloat16(s)); }
};
template <typename I> struct OutInt {
  typedef I S;
  __device__ static S i(long long v) { return (S)(unsigned long long)v; }
};
template <> struct Out<TC_OUT_I8> : OutInt<unsigned char> {};
template <> struct Out<TC_OUT_I16> : OutInt<unsigned short> {};
template <> struct Out<TC_OUT_I32> : OutInt<unsigned> {};
template <> struct Out<TC_OUT_I64> : OutInt<unsigned long long> {};

// ---- transforms: accumulate value -> stored value ----
// uniform_: fma in opmath, cast, and a value equal to `to` becomes `from`.
template <int O> struct TUniformF {
  typedef typename Out<O>::S S;
  float from, range, to;
  __device__ S operator()(float u) const {
    S v = Out<O>::f(fmaf(u, range, from));
    return Out<O>::back(v) == to ? Out<O>::f(from) : v;
  }
};
struct TUniformD {
  typedef double S;
  double from, range, to;
  __device__ S operator()(double u) const {
    double v = fma(u, range, from);
    return v == to ? from : v;
  }
};
template <int O> struct TNormalF {
  typedef typename Out<O>::S S;
  float mean, std;
  __device__ S operator()(float x) const { return Out<O>::f(fmaf(x, std, mean)); }
};
struct TNormalD {
  typedef double S;
  double mean, std;
  __device__ S operator()(double x) const { return fma(x, std, mean); }
};
// random_ / randint: (w mod range) + base in uint64, read as int64, cast.
template <int O, typename W> struct TBits {
  typedef typename Out<O>::S S;
  unsigned long long range;
  long long base;
  int pow2;
  __device__ S operator()(W w) const {
    unsigned long long v;
    if (range == 0) v = w;
    else if (pow2) v = (unsigned long long)w & (range - 1);
    else if (sizeof(W) == 4) v = (unsigned)w % (unsigned)range; // range < 2^32 on this path
    else v = (unsigned long long)w % range;
    return Out<O>::i((long long)(v + (unsigned long long)base));
  }
};

// The same transform for 64-bit words, with its case fixed on the host (no
// unused 64-bit division in the kernel) and `%` by a non-power-of-two range
// done by multiplication (tc_fastdiv_mod, exact for every word).
enum { BITS_FULL, BITS_MASK, BITS_MOD };
template <int O, int M> struct TBits64 {
  typedef typename Out<O>::S S;
  unsigned long long mask;
  long long base;
  tc_fastdiv fd;
  __device__ S operator()(unsigned long long w) const {
    const unsigned long long v = M == BITS_FULL ? w : M == BITS_MASK ? w & mask : tc_fastdiv_mod(w, fd);
    return Out<O>::i((long long)(v + (unsigned long long)base));
  }
};

template <int BYTES> struct Vec;
template <> struct Vec<16> { typedef uint4 T; };
template <> struct Vec<8> { typedef uint2 T; };
template <> struct Vec<4> { typedef unsigned T; };
template <> struct Vec<2> { typedef unsigned short T; };
template <> struct Vec<1> { typedef unsigned char T; };

// items = K * (S/V): item i is iteration k = i / (S/V) for threads
// t0 .. t0+V-1, t0 = V * (i mod S/V). S is a multiple of 256, so a warp never
// straddles two k and its stores for one lane are contiguous.
template <class D, class T, int V>
__global__ void __launch_bounds__(256) fast_kernel(T tr, typename T::S *out, long long n, unsigned S,
                                                   tc_philox_args pa, unsigned items) {
  typedef typename T::S St;
  enum { U = D::U };
  unsigned long long seed, offset;
  unpack(pa, seed, offset);
  const uint2 key = make_uint2((unsigned)seed, (unsigned)(seed >> 32));
  const unsigned long long o4 = offset / 4;
  const unsigned G = S / V;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long ig = blockIdx.x * blockDim.x + threadIdx.x; ig < items; ig += stride) {
    const unsigned i = (unsigned)ig;
    const unsigned k = i / G;
    const unsigned t0 = (i - k * G) * V;
    const long long e0 = (long long)t0 + (long long)S * U * k;
    if (e0 >= n) continue;
    // curand_init's counter: (offset/4 + k) in words 0-1, thread index in 2-3,
    // one 128-bit number (the k increment carries into the thread words).
    const unsigned long long lo = o4 + k;
    const unsigned carry = lo < o4;
    St vals[U][V];
#pragma unroll
    for (int j = 0; j < V; j++) {
      unsigned long long hi = (unsigned long long)(t0 + j) + carry;
      uint4 ctr = make_uint4((unsigned)lo, (unsigned)(lo >> 32), (unsigned)hi, (unsigned)(hi >> 32));
      typename D::A r[U];
      D::words(curand_Philox4x32_10(ctr, key), r);
#pragma unroll
      for (int ii = 0; ii < U; ii++) vals[ii][j] = tr(r[ii]);
    }
#pragma unroll
    for (int ii = 0; ii < U; ii++) {
      long long e = e0 + (long long)S * ii;
      if (e + V <= n) {
        union { St s[V]; typename Vec<V * sizeof(St)>::T v; } u;
#pragma unroll
        for (int j = 0; j < V; j++) u.s[j] = vals[ii][j];
        *reinterpret_cast<typename Vec<V * sizeof(St)>::T *>(out + e) = u.v;
      } else {
#pragma unroll
        for (int j = 0; j < V; j++)
          if (e + j < n) out[e + j] = vals[ii][j];
      }
    }
  }
}

// torch's distribution_elementwise_grid_stride_kernel, shape for shape.
template <class D, class T>
__global__ void __launch_bounds__(256, 4) ref_kernel(T tr, typename T::S *out, long long n, tc_philox_args pa) {
  unsigned long long seed, offset;
  unpack(pa, seed, offset);
  long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  curandStatePhilox4_32_10_t state;
  curand_init(seed, idx, offset, &state);
  const long long S = (long long)blockDim.x * gridDim.x;
  const long long rounded = ((n - 1) / (S * D::U) + 1) * S * D::U;
  for (long long li = idx; li < rounded; li += S * D::U) {
    typename D::A r[D::U];
    D::draw(&state, r);
#pragma unroll
    for (int ii = 0; ii < D::U; ii++) {
      long long e = li + S * ii;
      if (e < n) out[e] = tr(r[ii]);
    }
    __syncthreads();
  }
}

// Vector stores in PTX, so ptxas keeps the vector whole (a plain store of
// a union was split into 8+4+4 bytes; __stwb becomes a strong store).
__device__ __forceinline__ void store(uint4 *p, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void store(uint2 *p, uint2 v) {
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(v.x), "r"(v.y) : "memory");
}

// Resident blocks looping over items: thread tid starts at item tid
// (k = tid / G, V threads' draws t0 = V*g) and steps by the grid size T,
// kept as (k, g) += (T / G, T % G), so a step costs adds, not a division.
// G and T are multiples of 32, so a warp never straddles two k.
template <class D, class T, int V>
__global__ void __launch_bounds__(256) loop_kernel(T tr, typename T::S *out, long long n, unsigned S,
                                                   tc_philox_args pa, unsigned K, unsigned qT, unsigned rT) {
  typedef typename T::S St;
  enum { U = D::U, CB = V * sizeof(St) < 16 ? V * sizeof(St) : 16, NC = V * sizeof(St) / CB };
  typedef typename Vec<CB>::T Vt;
  unsigned long long seed, offset;
  unpack(pa, seed, offset);
  const uint2 key = make_uint2((unsigned)seed, (unsigned)(seed >> 32));
  const unsigned long long o4 = offset / 4, un = (unsigned long long)n, SU = (unsigned long long)S * U;
  const unsigned G = S / V;
  const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned k = tid / G, g = tid - k * G;
  while (k < K) {
    const unsigned long long e0 = SU * k + (unsigned long long)g * V;
    if (e0 < un) {
      const unsigned long long lo = o4 + k;
      const unsigned carry = lo < o4;
      St vals[U][V];
#pragma unroll
      for (int j = 0; j < V; j++) {
        const unsigned long long hi = (unsigned long long)(g * V + j) + carry;
        const uint4 ctr = make_uint4((unsigned)lo, (unsigned)(lo >> 32), (unsigned)hi, (unsigned)(hi >> 32));
        typename D::A r[U];
        D::words(curand_Philox4x32_10(ctr, key), r);
#pragma unroll
        for (int ii = 0; ii < U; ii++) vals[ii][j] = tr(r[ii]);
      }
#pragma unroll
      for (int ii = 0; ii < U; ii++) {
        const unsigned long long e = e0 + (unsigned long long)S * ii;
        St *p = out + e;
        if (e + V <= un) {
          union { St s[V]; Vt v[NC]; } u;
#pragma unroll
          for (int j = 0; j < V; j++) u.s[j] = vals[ii][j];
#pragma unroll
          for (int c = 0; c < NC; c++) store(reinterpret_cast<Vt *>(p) + c, u.v[c]);
        } else {
#pragma unroll
          for (int j = 0; j < V; j++)
            if (e + j < un) p[j] = vals[ii][j];
        }
      }
    }
    g += rT;
    k += qT;
    if (g >= G) { g -= G; k++; }
  }
}

// Resident blocks per SM for a kernel, asked once per instantiation (the
// devices of one process are taken to be of one kind).
template <class K> cudaError_t blocks_per_sm(K kernel, int *out) {
  static int cached;
  int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (!v) {
    cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kernel, 256, 0);
    if (e != cudaSuccess) return e;
    if (v < 1) v = 1;
    __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  }
  *out = v;
  return cudaSuccess;
}

template <class D, class T, int V>
cudaError_t launch_loop(const T &tr, void *outp, unsigned long long n, unsigned S, const tc_philox_args *pa,
                        int sm_count, cudaStream_t st) {
  const unsigned long long per_k = (unsigned long long)S * D::U;
  const unsigned long long K = (n + per_k - 1) / per_k, G = S / V;
  const unsigned long long items = K * G;
  if (items > 0xFFFFFFFFull) return cudaErrorInvalidValue; // the host splits far below this
  int nb;
  cudaError_t e = blocks_per_sm(loop_kernel<D, T, V>, &nb);
  if (e != cudaSuccess) return e;
  unsigned long long blocks = (items + 255) / 256;
  const unsigned long long cap = (unsigned long long)(sm_count > 0 ? sm_count : 1) * nb;
  if (blocks > cap) blocks = cap; // one wave of resident blocks
  const unsigned long long threads = blocks * 256;
  loop_kernel<D, T, V><<<(unsigned)blocks, 256, 0, st>>>(tr, (typename T::S *)outp, (long long)n, S, *pa,
                                                         (unsigned)K, (unsigned)(threads / G),
                                                         (unsigned)(threads % G));
  return cudaGetLastError();
}

template <class D, class T>
cudaError_t launch_fast(const T &tr, void *outp, unsigned long long n, unsigned S, const tc_philox_args *pa,
                        int sm_count, cudaStream_t st) {
  typedef typename T::S St;
  St *out = (St *)outp;
  enum { VB = 16 / sizeof(St) > 8 ? 8 : 16 / sizeof(St) };
  const unsigned long long per_k = (unsigned long long)S * D::U;
  const unsigned long long K = (n + per_k - 1) / per_k;
  const bool vec = ((uintptr_t)outp % (VB * sizeof(St))) == 0;
  const unsigned long long items = K * (S / (vec ? VB : 1));
  if (items > 0xFFFFFFFFull) return cudaErrorInvalidValue; // the host splits far below this
  unsigned long long blocks = (items + 255) / 256;
  const unsigned long long cap = (unsigned long long)(sm_count > 0 ? sm_count : 1) * 2048;
  if (blocks > cap) blocks = cap; // grid-stride beyond: keeps the index in 32 bits
  if (vec)
    fast_kernel<D, T, VB><<<(unsigned)blocks, 256, 0, st>>>(tr, out, (long long)n, S, *pa, (unsigned)items);
  else
    fast_kernel<D, T, 1><<<(unsigned)blocks, 256, 0, st>>>(tr, out, (long long)n, S, *pa, (unsigned)items);
  return cudaGetLastError();
}

template <class D, class T>
cudaError_t launch(const T &tr, void *outp, unsigned long long n, unsigned S, const tc_philox_args *pa,
                   int reference, int sm_count, cudaStream_t st) {
  typedef typename T::S St;
  if (reference) {
    ref_kernel<D, T><<<S / 256, 256, 0, st>>>(tr, (St *)outp, (long long)n, *pa);
    return cudaGetLastError();
  }
  return launch_fast<D>(tr, outp, n, S, pa, sm_count, st);
}

// 64-bit draws into 8-byte outputs: the resident-block loop. Vector stores
// need the buffer 16-byte aligned; otherwise 8-byte stores.
template <class T>
cudaError_t launch_bits64(const T &tr, void *out, unsigned long long n, unsigned S, const tc_philox_args *pa,
                          int sms, cudaStream_t st) {
  return (uintptr_t)out % 16 == 0 ? launch_loop<DBits64, T, 2>(tr, out, n, S, pa, sms, st)
                                  : launch_loop<DBits64, T, 1>(tr, out, n, S, pa, sms, st);
}

template <int O>
cudaError_t launch_bits64_out(const tc_rng_op *op, void *out, unsigned long long n, unsigned S,
                              const tc_philox_args *pa, int sms, cudaStream_t st) {
  const unsigned long long r = op->range;
  if (r == 0) {
    TBits64<O, BITS_FULL> t = {0, op->base, {0, 0, 0}};
    return launch_bits64(t, out, n, S, pa, sms, st);
  }
  if ((r & (r - 1)) == 0) {
    TBits64<O, BITS_MASK> t = {r - 1, op->base, {0, 0, 0}};
    return launch_bits64(t, out, n, S, pa, sms, st);
  }
  TBits64<O, BITS_MOD> t = {0, op->base, tc_fastdiv_make(r)};
  return launch_bits64(t, out, n, S, pa, sms, st);
}

template <class D, typename W>
cudaError_t launch_bits(const tc_rng_op *op, void *out, unsigned long long n, unsigned S,
                        const tc_philox_args *pa, int ref, int sms, cudaStream_t st) {
  const unsigned long long r = op->range;
  const int pow2 = r != 0 && (r & (r - 1)) == 0;
#define TC_BITS(O)                                                                   \
  case O: {                                                                          \
    TBits<O, W> t = {r, op->base, pow2};                                             \
    return launch<D>(t, out, n, S, pa, ref, sms, st);                                \
  }
  switch (op->out) {
    TC_BITS(TC_OUT_F32) TC_BITS(TC_OUT_F64) TC_BITS(TC_OUT_F16) TC_BITS(TC_OUT_BF16)
    TC_BITS(TC_OUT_I8) TC_BITS(TC_OUT_I16) TC_BITS(TC_OUT_I32) TC_BITS(TC_OUT_I64)
  }
#undef TC_BITS
  return cudaErrorInvalidValue;
}

} // namespace

extern "C" cudaError_t tc_rng_launch(const tc_rng_op *op, void *out, uint64_t n, uint32_t S,
                                     const tc_philox_args *pa, int ref, int sms, cudaStream_t st) {
  if (n == 0 || S == 0 || S % 256) return cudaErrorInvalidValue;
  switch (op->dist) {
  case TC_DIST_UNIFORM_F: {
    const float a = (float)op->a, b = (float)op->b, c = (float)op->c;
    switch (op->out) {
    case TC_OUT_F32: { TUniformF<TC_OUT_F32> t = {a, b, c}; return launch<DUniformF>(t, out, n, S, pa, ref, sms, st); }
    case TC_OUT_F16: { TUniformF<TC_OUT_F16> t = {a, b, c}; return launch<DUniformF>(t, out, n, S, pa, ref, sms, st); }
    case TC_OUT_BF16: { TUniformF<TC_OUT_BF16> t = {a, b, c}; return launch<DUniformF>(t, out, n, S, pa, ref, sms, st); }
    default: return cudaErrorInvalidValue;
    }
  }
  case TC_DIST_UNIFORM_D: {
    if (op->out != TC_OUT_F64) return cudaErrorInvalidValue;
    TUniformD t = {op->a, op->b, op->c};
    return launch<DUniformD>(t, out, n, S, pa, ref, sms, st);
  }
  case TC_DIST_NORMAL_F: {
    const float mean = (float)op->a, sd = (float)op->b;
    switch (op->out) {
    case TC_OUT_F32: { TNormalF<TC_OUT_F32> t = {mean, sd}; return launch<DNormalF>(t, out, n, S, pa, ref, sms, st); }
    case TC_OUT_F16: { TNormalF<TC_OUT_F16> t = {mean, sd}; return launch<DNormalF>(t, out, n, S, pa, ref, sms, st); }
    case TC_OUT_BF16: { TNormalF<TC_OUT_BF16> t = {mean, sd}; return launch<DNormalF>(t, out, n, S, pa, ref, sms, st); }
    default: return cudaErrorInvalidValue;
    }
  }
  case TC_DIST_NORMAL_D: {
    if (op->out != TC_OUT_F64) return cudaErrorInvalidValue;
    TNormalD t = {op->a, op->b};
    return launch<DNormalD>(t, out, n, S, pa, ref, sms, st);
  }
  case TC_DIST_BITS32: return launch_bits<DBits32, unsigned>(op, out, n, S, pa, ref, sms, st);
  case TC_DIST_BITS64:
    if (!ref) {
      if (op->out == TC_OUT_I64) return launch_bits64_out<TC_OUT_I64>(op, out, n, S, pa, sms, st);
      if (op->out == TC_OUT_F64) return launch_bits64_out<TC_OUT_F64>(op, out, n, S, pa, sms, st);
    }
    return launch_bits<DBits64, unsigned long long>(op, out, n, S, pa, ref, sms, st);
  }
  return cudaErrorInvalidValue;
}
