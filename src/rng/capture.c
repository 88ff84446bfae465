/* The generator's side of CUDA graphs: torch's CUDAGeneratorState
 * register_graph, capture_prologue, capture_epilogue and replay_prologue.
 * The graph layer above calls these and never touches a generator's fields
 * or lock; this layer knows nothing of graphs beyond them. */
#include "rng/capture_kernels.h"
#include "rng/generator.h"
#include "stream/stream.h"

/* Serializes graph_refs changes with the allocation or free of the words
 * they guard; g->mu is held only to publish the words (fills read them). */
static pthread_mutex_t g_graph_mu = PTHREAD_MUTEX_INITIALIZER;

tcuda_status tc_generator_register_graph(const char *F, tcuda_generator_t *g) {
  pthread_mutex_lock(&g_graph_mu);
  tcuda_status s = TCUDA_SUCCESS;
  if (g->graph_refs == 0) {
    tcuda_stream_t cur;
    void *seed = NULL, *off = NULL;
    s = tc_stream_current(F, g->device, &cur);
    if (!s) s = tcuda_malloc_on(&seed, sizeof(uint64_t), g->device, cur);
    if (!s && (s = tcuda_malloc_on(&off, sizeof(uint64_t), g->device, cur))) (void)tcuda_free(seed);
    if (!s) {
      pthread_mutex_lock(&g->mu);
      g->seed_extragraph = (uint64_t *)seed;
      g->offset_extragraph = (uint64_t *)off;
      pthread_mutex_unlock(&g->mu);
    }
  }
  if (!s) {
    pthread_mutex_lock(&g->mu); /* tcuda_generator_destroy reads it under mu */
    g->graph_refs++;
    pthread_mutex_unlock(&g->mu);
  }
  pthread_mutex_unlock(&g_graph_mu);
  return s;
}

void tc_generator_unregister_graph(tcuda_generator_t *g) {
  pthread_mutex_lock(&g_graph_mu);
  pthread_mutex_lock(&g->mu);
  int last = --g->graph_refs == 0;
  void *seed = g->seed_extragraph, *off = g->offset_extragraph;
  if (last) g->seed_extragraph = g->offset_extragraph = NULL;
  pthread_mutex_unlock(&g->mu);
  if (last) {
    (void)tcuda_free(seed);
    (void)tcuda_free(off);
  }
  pthread_mutex_unlock(&g_graph_mu);
}

tcuda_status tc_generator_capture_prologue(const char *F, tcuda_generator_t *g, cudaStream_t stream) {
  pthread_mutex_lock(&g->mu);
  tcuda_status s = TCUDA_SUCCESS;
  if (g->capturing)
    s = tc_error(TCUDA_ERROR_INVALID_STATE, "%s: the generator %p is already capturing another graph", F,
                 (void *)g);
  cudaError_t e = s ? cudaSuccess : tc_rng_set_philox_words(g->seed_extragraph, g->offset_extragraph, g->seed, 0,
                                                            stream);
  if (!s && e != cudaSuccess) s = tc_cuda_error(e, F, "RNG capture prologue kernel");
  if (!s) {
    g->capturing = 1;
    g->offset_intragraph = 0;
  }
  pthread_mutex_unlock(&g->mu);
  return s;
}

uint64_t tc_generator_capture_epilogue(tcuda_generator_t *g) {
  pthread_mutex_lock(&g->mu);
  g->capturing = 0;
  uint64_t inc = g->offset_intragraph;
  pthread_mutex_unlock(&g->mu);
  return inc;
}

tcuda_status tc_generator_replay_prologue(const char *F, tcuda_generator_t *g, uint64_t increment,
                                          cudaStream_t stream) {
  pthread_mutex_lock(&g->mu);
  tcuda_status s = TCUDA_SUCCESS;
  cudaError_t e;
  if (g->capturing)
    s = tc_error(TCUDA_ERROR_INVALID_STATE, "%s: generator %p is capturing a graph; replay after capture_end", F,
                 (void *)g);
  else if ((e = tc_rng_set_philox_words(g->seed_extragraph, g->offset_extragraph, g->seed, g->offset, stream)))
    s = tc_cuda_error(e, F, "RNG replay prologue kernel");
  else
    g->offset += increment;
  pthread_mutex_unlock(&g->mu);
  return s;
}
