/* Generators: torch's CUDAGeneratorImpl state (seed, Philox offset), the
 * default generator per device, and torch.cuda's seeding and state API
 * (docs/rng.md). */
#include "rng/generator.h"
#include "stream/stream.h"
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ---- state bytes and seeds ---- */

void tc_rng_state_encode(uint64_t seed, uint64_t offset, uint8_t out[16]) {
  for (int i = 0; i < 8; i++) {
    out[i] = (uint8_t)(seed >> (8 * i));
    out[8 + i] = (uint8_t)(offset >> (8 * i));
  }
}

tcuda_status tc_rng_state_decode(const char *F, const char *arg, const void *state, size_t size,
                                 uint64_t *seed, uint64_t *offset) {
  TC_CHECK_ARG(F, state, arg);
  if (size != 16 && size != 8)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: %s has %zu bytes; an RNG state is 16 bytes (seed, offset) or 8 (seed only)", F, arg,
                    size);
  const uint8_t *b = state;
  uint64_t s = 0, o = 0;
  for (int i = 0; i < 8; i++) s |= (uint64_t)b[i] << (8 * i);
  if (size == 16)
    for (int i = 0; i < 8; i++) o |= (uint64_t)b[8 + i] << (8 * i);
  if (o % 4)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s offset %lld is not a multiple of 4", F, arg,
                    (long long)o);
  *seed = s;
  *offset = o;
  return TCUDA_SUCCESS;
}

uint64_t tc_rng_nondeterministic_seed(void) {
  uint64_t r = 0;
  ssize_t got = getrandom(&r, sizeof r, 0);
  if (got != (ssize_t)sizeof r) {
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    got = fd >= 0 ? read(fd, &r, sizeof r) : -1;
    if (fd >= 0) close(fd);
    if (got != (ssize_t)sizeof r) { /* no OS entropy: the clock, mixed */
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      r = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
      r ^= r >> 29; r *= 0xbf58476d1ce4e5b9ull; r ^= r >> 32;
    }
  }
  return r & 0x1FFFFFFFFFFFFFull; /* 53 bits, as torch for CUDA */
}

/* ---- generator objects ---- */

void tc_generator_init(tcuda_generator_t *g, int device, uint64_t seed, int is_default) {
  memset(g, 0, sizeof *g);
  g->magic = TC_GENERATOR_MAGIC;
  pthread_mutex_init(&g->mu, NULL);
  g->device = device;
  g->is_default = is_default;
  g->seed = seed;
}

tcuda_status tc_generator_check(const char *F, const tcuda_generator_t *g) {
  TC_CHECK_ARG(F, g, "generator");
  if (g->magic != TC_GENERATOR_MAGIC)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: generator %p is not a live tcuda generator", F,
                    (const void *)g);
  return TCUDA_SUCCESS;
}

tcuda_status tc_generator_philox(const char *F, tcuda_generator_t *g, uint64_t inc, int stream_capturing,
                                 tc_philox_args *out) {
  inc = (inc + 3) / 4 * 4;
  memset(out, 0, sizeof *out);
  if (stream_capturing) {
    if (!g->capturing)
      return tc_error(TCUDA_ERROR_INVALID_STATE,
                      "%s: the stream is capturing a CUDA graph but the generator of device %d is not in "
                      "capture mode (register it with the graph)", F, g->device);
    if (g->offset_intragraph > 0xFFFFFFFFull - inc)
      return tc_error(TCUDA_ERROR_OVERFLOW, "%s: graph's RNG offset would pass 2^32", F);
    out->captured = 1;
    out->seed_ptr = g->seed_extragraph;
    out->offset_ptr = g->offset_extragraph;
    out->offset_intragraph = g->offset_intragraph;
    g->offset_intragraph += inc;
  } else {
    if (g->capturing)
      return tc_error(TCUDA_ERROR_INVALID_STATE,
                      "%s: the generator of device %d is in graph capture mode but the stream is not capturing",
                      F, g->device);
    out->seed = g->seed;
    out->offset = g->offset;
    g->offset += inc;
  }
  return TCUDA_SUCCESS;
}

/* Setters refuse while a graph is being captured, as torch. Holds g->mu. */
static tcuda_status not_capturing(const char *F, const tcuda_generator_t *g) {
  if (g->capturing)
    return tc_error(TCUDA_ERROR_INVALID_STATE, "%s: not allowed while the generator is capturing a CUDA graph",
                    F);
  return TCUDA_SUCCESS;
}

static tcuda_generator_t *_Atomic g_defaults[TC_MAX_DEVICES];
static pthread_mutex_t g_defaults_mu = PTHREAD_MUTEX_INITIALIZER;

/* device is resolved and in range. */
tcuda_status tc_default_generator(const char *F, int device, tcuda_generator_t **out) {
  if (device >= TC_MAX_DEVICES)
    return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: device %d: tcuda supports at most %d devices", F, device,
                    TC_MAX_DEVICES);
  tcuda_generator_t *g = atomic_load_explicit(&g_defaults[device], memory_order_acquire);
  if (g) { *out = g; return TCUDA_SUCCESS; }
  pthread_mutex_lock(&g_defaults_mu);
  g = atomic_load(&g_defaults[device]);
  if (!g) {
    g = malloc(sizeof *g);
    if (g) {
      /* getDefaultCUDAGenerator seeds nondeterministically on creation. */
      tc_generator_init(g, device, tc_rng_nondeterministic_seed(), 1);
      atomic_store_explicit(&g_defaults[device], g, memory_order_release);
    }
  }
  pthread_mutex_unlock(&g_defaults_mu);
  if (!g) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: cannot allocate the default generator", F);
  *out = g;
  return TCUDA_SUCCESS;
}

static tcuda_status resolve_default(const char *F, int device, tcuda_generator_t **out) {
  tcuda_status s = tc_resolve_device(F, &device);
  if (s) return s;
  return tc_default_generator(F, device, out);
}

tcuda_status tcuda_default_generator(int device, tcuda_generator_t **out) {
  static const char *F = "tcuda_default_generator";
  TC_CHECK_ARG(F, out, "out");
  return resolve_default(F, device, out);
}

tcuda_status tcuda_generator_create(int device, uint64_t seed, tcuda_generator_t **out) {
  static const char *F = "tcuda_generator_create";
  TC_CHECK_ARG(F, out, "out");
  tcuda_status s = tc_resolve_device(F, &device);
  if (s) return s;
  tcuda_generator_t *g = malloc(sizeof *g);
  if (!g) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: cannot allocate a generator", F);
  tc_generator_init(g, device, seed, 0);
  *out = g;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_generator_destroy(tcuda_generator_t *g) {
  static const char *F = "tcuda_generator_destroy";
  if (!g) return TCUDA_SUCCESS;
  tcuda_status s = tc_generator_check(F, g);
  if (s) return s;
  if (g->is_default)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: generator %p is the default generator of device %d",
                    F, (void *)g, g->device);
  pthread_mutex_lock(&g->mu);
  int refs = g->graph_refs;
  pthread_mutex_unlock(&g->mu);
  if (refs) /* the graphs' replays would read a dead generator */
    return tc_error(TCUDA_ERROR_INVALID_STATE,
                    "%s: generator %p is registered with %d CUDA graph(s); destroy those graphs first", F,
                    (void *)g, refs);
  g->magic = 0;
  pthread_mutex_destroy(&g->mu);
  free(g);
  return TCUDA_SUCCESS;
}

int tcuda_generator_device(const tcuda_generator_t *g) {
  return g && g->magic == TC_GENERATOR_MAGIC ? g->device : -1;
}

tcuda_status tcuda_generator_get_state(tcuda_generator_t *g, uint8_t state[16]) {
  static const char *F = "tcuda_generator_get_state";
  tcuda_status s = tc_generator_check(F, g);
  if (s) return s;
  TC_CHECK_ARG(F, state, "state");
  pthread_mutex_lock(&g->mu);
  if (!(s = not_capturing(F, g))) tc_rng_state_encode(g->seed, g->offset, state);
  pthread_mutex_unlock(&g->mu);
  return s;
}

tcuda_status tcuda_generator_set_state(tcuda_generator_t *g, const void *state, size_t size) {
  static const char *F = "tcuda_generator_set_state";
  tcuda_status s = tc_generator_check(F, g);
  uint64_t seed, offset;
  if (s || (s = tc_rng_state_decode(F, "state", state, size, &seed, &offset))) return s;
  pthread_mutex_lock(&g->mu);
  if (!(s = not_capturing(F, g))) { g->seed = seed; g->offset = offset; }
  pthread_mutex_unlock(&g->mu);
  return s;
}

tcuda_status tcuda_generator_manual_seed(tcuda_generator_t *g, uint64_t seed) {
  static const char *F = "tcuda_generator_manual_seed";
  tcuda_status s = tc_generator_check(F, g);
  if (s) return s;
  pthread_mutex_lock(&g->mu);
  if (!(s = not_capturing(F, g))) { g->seed = seed; g->offset = 0; }
  pthread_mutex_unlock(&g->mu);
  return s;
}

tcuda_status tcuda_generator_seed(tcuda_generator_t *g, uint64_t *seed) {
  static const char *F = "tcuda_generator_seed";
  tcuda_status s = tc_generator_check(F, g);
  if (s) return s;
  uint64_t r = tc_rng_nondeterministic_seed();
  pthread_mutex_lock(&g->mu);
  if (!(s = not_capturing(F, g))) { g->seed = r; g->offset = 0; }
  pthread_mutex_unlock(&g->mu);
  if (!s && seed) *seed = r;
  return s;
}

tcuda_status tcuda_generator_initial_seed(tcuda_generator_t *g, uint64_t *seed) {
  static const char *F = "tcuda_generator_initial_seed";
  tcuda_status s = tc_generator_check(F, g);
  if (s) return s;
  TC_CHECK_ARG(F, seed, "seed");
  pthread_mutex_lock(&g->mu);
  if (!(s = not_capturing(F, g))) *seed = g->seed;
  pthread_mutex_unlock(&g->mu);
  return s;
}

tcuda_status tcuda_generator_get_offset(tcuda_generator_t *g, uint64_t *offset) {
  static const char *F = "tcuda_generator_get_offset";
  tcuda_status s = tc_generator_check(F, g);
  if (s) return s;
  TC_CHECK_ARG(F, offset, "offset");
  pthread_mutex_lock(&g->mu);
  if (!(s = not_capturing(F, g))) *offset = g->offset;
  pthread_mutex_unlock(&g->mu);
  return s;
}

tcuda_status tcuda_generator_set_offset(tcuda_generator_t *g, uint64_t offset) {
  static const char *F = "tcuda_generator_set_offset";
  tcuda_status s = tc_generator_check(F, g);
  if (s) return s;
  if (offset % 4)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: offset %llu is not a multiple of 4", F,
                    (unsigned long long)offset);
  pthread_mutex_lock(&g->mu);
  if (!(s = not_capturing(F, g))) g->offset = offset;
  pthread_mutex_unlock(&g->mu);
  return s;
}

/* ---- torch.cuda's functions on the default generators ---- */

tcuda_status tcuda_get_rng_state(int device, uint8_t state[16]) {
  static const char *F = "tcuda_get_rng_state";
  TC_CHECK_ARG(F, state, "state");
  tcuda_generator_t *g;
  tcuda_status s = resolve_default(F, device, &g);
  if (s) return s;
  pthread_mutex_lock(&g->mu);
  if (!(s = not_capturing(F, g))) tc_rng_state_encode(g->seed, g->offset, state);
  pthread_mutex_unlock(&g->mu);
  return s;
}

static tcuda_status set_state(const char *F, tcuda_generator_t *g, uint64_t seed, uint64_t offset) {
  pthread_mutex_lock(&g->mu);
  tcuda_status s = not_capturing(F, g);
  if (!s) { g->seed = seed; g->offset = offset; }
  pthread_mutex_unlock(&g->mu);
  return s;
}

tcuda_status tcuda_set_rng_state(int device, const void *state, size_t size) {
  static const char *F = "tcuda_set_rng_state";
  uint64_t seed, offset;
  tcuda_generator_t *g;
  tcuda_status s = tc_rng_state_decode(F, "state", state, size, &seed, &offset);
  if (s || (s = resolve_default(F, device, &g))) return s;
  return set_state(F, g, seed, offset);
}

tcuda_status tcuda_get_rng_state_all(uint8_t *out, size_t size) {
  static const char *F = "tcuda_get_rng_state_all";
  TC_CHECK_ARG(F, out, "out");
  tcuda_status s = tc_lazy_init(F);
  if (s) return s;
  int n = tc_device_count();
  if (size < (size_t)n * 16)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: size %zu is too small for %d devices (need %d bytes)", F,
                    size, n, n * 16);
  for (int d = 0; d < n; d++)
    if ((s = tcuda_get_rng_state(d, out + 16 * d))) return s;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_set_rng_state_all(const void *states, size_t size) {
  static const char *F = "tcuda_set_rng_state_all";
  TC_CHECK_ARG(F, states, "states");
  if (size == 0 || size % 16)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: size %zu is not a positive multiple of 16", F, size);
  size_t k = size / 16;
  uint64_t seed, offset;
  tcuda_status s;
  for (size_t i = 0; i < k; i++) {
    char arg[32];
    snprintf(arg, sizeof arg, "state %zu", i);
    if ((s = tc_rng_state_decode(F, arg, (const uint8_t *)states + 16 * i, 16, &seed, &offset))) return s;
  }
  if ((s = tc_lazy_init(F))) return s;
  if (k > (size_t)tc_device_count())
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %zu states for %d devices", F, k, tc_device_count());
  tcuda_generator_t *gens[TC_MAX_DEVICES];
  for (size_t i = 0; i < k; i++)
    if ((s = tc_default_generator(F, (int)i, &gens[i]))) return s;
  for (size_t i = 0; i < k; i++) {
    tc_rng_state_decode(F, "state", (const uint8_t *)states + 16 * i, 16, &seed, &offset);
    if ((s = set_state(F, gens[i], seed, offset))) return s;
  }
  return TCUDA_SUCCESS;
}

/* "Silently ignored without CUDA", as torch.cuda's seeding functions. */
static int no_cuda(void) { return !tcuda_is_initialized() && !tcuda_is_available(); }

tcuda_status tcuda_manual_seed(uint64_t seed) {
  if (no_cuda()) return TCUDA_SUCCESS;
  tcuda_generator_t *g;
  tcuda_status s = resolve_default("tcuda_manual_seed", -1, &g);
  return s ? s : tcuda_generator_manual_seed(g, seed);
}

tcuda_status tcuda_manual_seed_all(uint64_t seed) {
  static const char *F = "tcuda_manual_seed_all";
  if (no_cuda()) return TCUDA_SUCCESS;
  tcuda_status s = tc_lazy_init(F);
  for (int d = 0; !s && d < tc_device_count(); d++) {
    tcuda_generator_t *g;
    if (!(s = tc_default_generator(F, d, &g))) s = tcuda_generator_manual_seed(g, seed);
  }
  return s;
}

tcuda_status tcuda_seed(void) {
  if (no_cuda()) return TCUDA_SUCCESS;
  tcuda_generator_t *g;
  tcuda_status s = resolve_default("tcuda_seed", -1, &g);
  return s ? s : tcuda_generator_seed(g, NULL);
}

tcuda_status tcuda_seed_all(void) {
  static const char *F = "tcuda_seed_all";
  if (no_cuda()) return TCUDA_SUCCESS;
  tcuda_status s = tc_lazy_init(F);
  uint64_t seed = 0;
  for (int d = 0; !s && d < tc_device_count(); d++) {
    tcuda_generator_t *g;
    if ((s = tc_default_generator(F, d, &g))) break;
    s = d == 0 ? tcuda_generator_seed(g, &seed) : tcuda_generator_manual_seed(g, seed);
  }
  return s;
}

tcuda_status tcuda_initial_seed(int device, uint64_t *seed) {
  static const char *F = "tcuda_initial_seed";
  TC_CHECK_ARG(F, seed, "seed");
  tcuda_generator_t *g;
  tcuda_status s = resolve_default(F, device, &g);
  return s ? s : tcuda_generator_initial_seed(g, seed);
}
