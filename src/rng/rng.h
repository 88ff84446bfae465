/* Internal API of the RNG layer: generator state, torch's launch arithmetic
 * and the fill entry point (for tests, benches and the graph layer). */
#ifndef TC_RNG_H
#define TC_RNG_H
#include "core/core.h"
#include "rng/kernels.h"
#include <pthread.h>

#define TC_GENERATOR_MAGIC 0x52474e47u /* "GNGR": catches use after destroy */

/* torch's CUDAGeneratorState. While `capturing` (set by the graph layer),
 * fills on a capturing stream get device pointers plus an intragraph offset
 * instead of host values, so kernels need no change for graphs. */
struct tcuda_generator {
  unsigned magic;
  pthread_mutex_t mu;
  int device;
  int is_default;
  uint64_t seed;
  uint64_t offset; /* philox_offset_per_thread, a multiple of 4 */
  int capturing;
  uint64_t *seed_extragraph;   /* device memory, owned by the graph layer */
  uint64_t *offset_extragraph; /* device memory, owned by the graph layer */
  uint64_t offset_intragraph;  /* < 2^32 as torch's */
  int graph_refs;              /* graphs it is registered with; the extragraph
                                  memory lives while this is > 0 */
};

/* torch's CUDAGeneratorState graph hooks, for the graph layer. Callers hold
 * g->mu for the last three. */
/* capture_prologue: capture mode on, intragraph offset 0. */
void tc_generator_capture_prologue(tcuda_generator_t *g);
/* capture_epilogue: capture mode off; returns the whole-graph increment. */
uint64_t tc_generator_capture_epilogue(tcuda_generator_t *g);

/* The default generator of a resolved, in-range device (created on first
 * use with a nondeterministic seed). */
tcuda_status tc_default_generator(const char *func, int device, tcuda_generator_t **out);
void tc_generator_init(tcuda_generator_t *g, int device, uint64_t seed, int is_default);
/* Check a generator argument (NULL, destroyed). */
tcuda_status tc_generator_check(const char *func, const tcuda_generator_t *g);
/* torch's philox_cuda_state(increment): the state for one kernel, then the
 * offset advances by increment rounded up to a multiple of 4. Caller holds
 * g->mu. stream_capturing says whether the launch stream is capturing. */
tcuda_status tc_generator_philox(const char *func, tcuda_generator_t *g, uint64_t increment,
                                 int stream_capturing, tc_philox_args *out);

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
