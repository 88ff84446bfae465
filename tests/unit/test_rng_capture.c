/* The rng layer's graph hooks (rng/capture.c), the only way the graph layer
 * reaches a generator: the refusals that come before any kernel, capture
 * mode, and the device words' reference count. Runs with or without a GPU. */
#include "harness.h"
#include "rng/generator.h"

static void test_refusals_and_epilogue(void) {
  tcuda_generator_t g;
  tc_generator_init(&g, 0, 5, 0);
  g.capturing = 1;
  g.offset = 40;
  g.offset_intragraph = 12;
  CHECK_ERR(tc_generator_capture_prologue("t", &g, NULL), TCUDA_ERROR_INVALID_STATE,
            "t: the generator 0x");
  CHECK_ERR(tc_generator_capture_prologue("t", &g, NULL), TCUDA_ERROR_INVALID_STATE,
            "is already capturing another graph");
  CHECK_ERR(tc_generator_replay_prologue("t", &g, 8, NULL), TCUDA_ERROR_INVALID_STATE,
            "is capturing a graph; replay after capture_end");
  CHECK_EQ_INT(g.offset, 40); /* a refused replay moves nothing */
  CHECK(g.capturing);
  CHECK_EQ_INT(tc_generator_capture_epilogue(&g), 12);
  CHECK(!g.capturing);
  CHECK_EQ_INT(tc_generator_capture_epilogue(&g), 12); /* idempotent: the undo path calls it again */
}

/* The first registration allocates the two words, the last one frees them;
 * without CUDA registration fails and changes nothing. */
static void test_register_counts(void) {
  tcuda_generator_t g;
  tc_generator_init(&g, 0, 5, 0);
  if (!tcuda_is_available()) {
    CHECK_ERR(tc_generator_register_graph("t", &g), TCUDA_ERROR_NOT_AVAILABLE, "t: ");
    CHECK_EQ_INT(g.graph_refs, 0);
    CHECK(g.seed_extragraph == NULL && g.offset_extragraph == NULL);
    return;
  }
  CHECK_OK(tc_generator_register_graph("t", &g));
  CHECK_EQ_INT(g.graph_refs, 1);
  uint64_t *seed = g.seed_extragraph, *off = g.offset_extragraph;
  CHECK(seed != NULL && off != NULL && seed != off);
  CHECK_OK(tc_generator_register_graph("t", &g));
  CHECK_EQ_INT(g.graph_refs, 2);
  CHECK(g.seed_extragraph == seed && g.offset_extragraph == off);
  CHECK_ERR(tcuda_generator_destroy(&g), TCUDA_ERROR_INVALID_STATE, "registered with 2 CUDA graph(s)");
  tc_generator_unregister_graph(&g);
  CHECK(g.seed_extragraph == seed);
  tc_generator_unregister_graph(&g);
  CHECK_EQ_INT(g.graph_refs, 0);
  CHECK(g.seed_extragraph == NULL && g.offset_extragraph == NULL);
}

TC_MAIN(T(test_refusals_and_epilogue), T(test_register_counts))
