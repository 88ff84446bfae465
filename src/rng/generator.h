/* Internal to the rng layer (and its unit tests): the generator's fields
 * and the calls that need its mutex held. Other layers see tcuda_generator_t
 * as opaque and use rng.h. */
#ifndef TC_RNG_GENERATOR_H
#define TC_RNG_GENERATOR_H
#include "rng/rng.h"
#include <pthread.h>

#define TC_GENERATOR_MAGIC 0x52474e47u /* "GNGR": catches use after destroy */

/* torch's CUDAGeneratorState. While `capturing` (see capture.c), fills on a
 * capturing stream get device pointers plus an intragraph offset instead of
 * host values, so kernels need no change for graphs. Only the rng layer
 * touches the fields and mu; the graph layer uses rng.h's hooks. */
struct tcuda_generator {
  unsigned magic;
  pthread_mutex_t mu;
  int device;
  int is_default;
  uint64_t seed;
  uint64_t offset; /* philox_offset_per_thread, a multiple of 4 */
  int capturing;
  uint64_t *seed_extragraph;   /* device words, while graph_refs > 0 */
  uint64_t *offset_extragraph;
  uint64_t offset_intragraph;  /* < 2^32 as torch's */
  int graph_refs;              /* graphs it is registered with */
};

void tc_generator_init(tcuda_generator_t *g, int device, uint64_t seed, int is_default);
/* torch's philox_cuda_state(increment): the state for one kernel, then the
 * offset advances by increment rounded up to a multiple of 4. Caller holds
 * g->mu. stream_capturing says whether the launch stream is capturing. */
tcuda_status tc_generator_philox(const char *func, tcuda_generator_t *g, uint64_t increment,
                                 int stream_capturing, tc_philox_args *out);

#endif
