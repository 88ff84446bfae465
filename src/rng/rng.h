/* Internal API of the RNG layer: generators (opaque outside the layer; the
 * fields are in generator.h), their graph hooks, torch's launch arithmetic
 * and the fill entry point (for tests, benches and the graph layer). */
#ifndef TC_RNG_H
#define TC_RNG_H
#include "core/core.h"
#include "rng/kernels.h"

/* ---- capture.c: torch's CUDAGeneratorState graph hooks, for the graph
 * layer. Each takes the locks it needs; callers hold none of the rng
 * layer's. */
/* register_graph: one more graph uses g. The first gives g its device words
 * (seed, offset) that kernels read under capture: two 8-byte allocations
 * from the caching allocator on g's device and current stream, as torch's
 * two 1-element tensors. On error nothing changed. */
tcuda_status tc_generator_register_graph(const char *func, tcuda_generator_t *g);
/* unregister_graph: one graph fewer; the last one frees the words. */
void tc_generator_unregister_graph(tcuda_generator_t *g);
/* capture_prologue: refuses when g is already capturing; else queues
 * (seed, offset 0) into the words on `stream` and turns capture mode on
 * with intragraph offset 0. g must be registered. */
tcuda_status tc_generator_capture_prologue(const char *func, tcuda_generator_t *g, cudaStream_t stream);
/* capture_epilogue: capture mode off; returns the whole-graph increment. */
uint64_t tc_generator_capture_epilogue(tcuda_generator_t *g);
/* replay_prologue: refuses while g is capturing; else queues (seed, offset)
 * into the words on `stream`, then moves the offset past the whole graph
 * (increment). Nothing changes on error. */
tcuda_status tc_generator_replay_prologue(const char *func, tcuda_generator_t *g, uint64_t increment,
                                          cudaStream_t stream);

/* The default generator of a resolved, in-range device (created on first
 * use with a nondeterministic seed). */
tcuda_status tc_default_generator(const char *func, int device, tcuda_generator_t **out);
/* Check a generator argument (NULL, destroyed). */
tcuda_status tc_generator_check(const char *func, const tcuda_generator_t *g);

/* getNonDeterministicRandom(is_cuda=true): 64 OS random bits limited to 53. */
uint64_t tc_rng_nondeterministic_seed(void);
/* The 16-byte state: seed then offset, little-endian. */
void tc_rng_state_encode(uint64_t seed, uint64_t offset, uint8_t out[16]);
/* Parse 16 bytes (seed, offset) or 8 (seed; offset 0); the offset must be a
 * multiple of 4. Errors name func and arg. */
tcuda_status tc_rng_state_decode(const char *func, const char *arg, const void *state, size_t size,
                                 uint64_t *seed, uint64_t *offset);

/* calc_execution_policy: blocks of 256 threads, capped at
 * SMs * (maxThreadsPerSM / 256), and the offset increment for n elements. */
uint32_t tc_rng_grid(uint64_t n, int sm_count, int max_threads_per_sm);
uint64_t tc_rng_increment(uint64_t n, uint32_t grid, int unroll);

/* TensorIterator's 32-bit indexing split of a contiguous 1-D buffer: fits
 * when n <= INT32_MAX and 1 + (n-1)*elem_size <= INT32_MAX; otherwise halves
 * (first floor(n/2)), recursively, in order. Writes up to cap pieces and
 * returns how many there are (1 = no split). */
typedef struct tc_rng_piece { uint64_t start, count; } tc_rng_piece;
int tc_rng_fits_32bit(uint64_t n, size_t elem_size);
size_t tc_rng_split(uint64_t n, size_t elem_size, tc_rng_piece *out, size_t cap);

/* A fill request as the public functions take it. */
typedef enum tc_rand_kind {
  TC_RAND_UNIFORM, TC_RAND_NORMAL, TC_RAND_RANDOM, TC_RAND_RANDINT, TC_RAND_RANDOM_FROM
} tc_rand_kind;
typedef struct tc_rand_req {
  tc_rand_kind kind;
  double a, b;     /* uniform from/to, normal mean/std */
  int64_t lo, hi;  /* randint [lo, hi), random_from lo */
} tc_rand_req;

/* torch's checks and host-side arithmetic for a request: the kernel op, and
 * how many kernel elements one buffer element is (2 for complex). No CUDA. */
tcuda_status tc_rand_build_op(const char *func, tcuda_dtype dtype, const tc_rand_req *req, tc_rng_op *op,
                              size_t *elem_size, unsigned *per_element);

/* The public fills, with the kernel choice: reference = 1 runs torch's
 * exact kernel shape instead of tcuda's schedule (same values). */
tcuda_status tc_rand_fill(const char *func, tcuda_generator_t *gen, void *buf, size_t n, tcuda_dtype dtype,
                          const tc_rand_req *req, const tcuda_stream_t *stream, int reference);

/* SM count and max threads per SM of a device (cached). */
tcuda_status tc_rng_device_shape(const char *func, int device, int *sm_count, int *max_threads_per_sm);

/* float <-> half / bfloat16 with round-to-nearest-even, as c10 on the host. */
uint16_t tc_float_to_half(float f);
float tc_half_to_float(uint16_t h);
uint16_t tc_float_to_bf16(float f);
float tc_bf16_to_float(uint16_t b);

#endif
