/* The public allocator API's paths that need no GPU: argument checks, bad
 * pointers, the fraction range, and the config route (environment, set,
 * get). With a GPU the allocation calls succeed instead of failing. */
#include "harness.h"
#include "alloc/alloc.h"
#include <math.h>
#include <stdlib.h>

/* Must run first: the environment is read once, at first use. */
static void test_env_config_bad_then_replaced(void) {
  setenv("TCUDA_ALLOC_CONF", "max_split_size_mb:5", 1);
  char *s = NULL;
  CHECK_ERR(tcuda_allocator_get_config(&s), TCUDA_ERROR_CONFIG,
            "tcuda_allocator_get_config: TCUDA_ALLOC_CONF: max_split_size_mb: expected a number >= 20, got '5'");
  void *p = (void *)1;
  if (tcuda_is_available()) {
    CHECK_ERR(tcuda_malloc(&p, 100), TCUDA_ERROR_CONFIG, "tcuda_malloc: TCUDA_ALLOC_CONF: max_split_size_mb");
    CHECK(p == NULL);
  }
  unsetenv("TCUDA_ALLOC_CONF");
  CHECK_OK(tcuda_allocator_set_config("expandable_segments:False")); /* replaces the bad one */
  CHECK_OK(tcuda_allocator_get_config(&s));
  CHECK(!strcmp(s, "backend:native,max_non_split_rounding_mb:20,expandable_segments:False,"
                   "release_lock_on_cudamalloc:False"));
  tcuda_string_free(s);
}

static void test_config_round_trip(void) {
  const char *conf = "max_split_size_mb:100, roundup_power2_divisions:[256:4,>:1], garbage_collection_threshold:0.3,"
                     "expandable_segments:True,max_non_split_rounding_mb:40";
  CHECK_OK(tcuda_allocator_set_config(conf));
  char *s = NULL;
  CHECK_OK(tcuda_allocator_get_config(&s));
  tc_alloc_config want, got;
  CHECK_OK(tc_alloc_config_parse(conf, &want));
  CHECK_OK(tc_alloc_config_parse(s, &got));
  memset(want.text, 0, sizeof want.text);
  memset(got.text, 0, sizeof got.text);
  CHECK(!memcmp(&want, &got, sizeof want));
  CHECK(strstr(s, "max_split_size_mb:100,"));
  CHECK(strstr(s, "roundup_power2_divisions:[1:4,2:4,4:4,8:4,16:4,32:4,64:4,128:4,256:4,512:1,"));
  tcuda_string_free(s);

  /* torch's set route: the reset keys go back to defaults (rounding to
   * large_segment_size_mb's 20, as torch 2.11's parser does); the rest stay. */
  CHECK_OK(tcuda_allocator_set_config("release_lock_on_cudamalloc:True"));
  CHECK_OK(tcuda_allocator_get_config(&s));
  CHECK(!strcmp(s, "backend:native,max_non_split_rounding_mb:20,expandable_segments:True,"
                   "release_lock_on_cudamalloc:True"));
  tcuda_string_free(s);

  /* A bad string: an error naming the key, and nothing changes. */
  CHECK_ERR(tcuda_allocator_set_config("expandable_segments:False,max_split_size_mb:abc"), TCUDA_ERROR_CONFIG,
            "tcuda_allocator_set_config: max_split_size_mb: expected a number >= 20, got 'abc'");
  CHECK_ERR(tcuda_allocator_set_config("bogus:1"), TCUDA_ERROR_CONFIG, "unknown key 'bogus'");
  CHECK_ERR(tcuda_allocator_set_config(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "conf");
  CHECK_OK(tcuda_allocator_get_config(&s));
  CHECK(strstr(s, "expandable_segments:True,release_lock_on_cudamalloc:True"));
  tcuda_string_free(s);
  CHECK_OK(tcuda_allocator_set_config(""));
  CHECK_ERR(tcuda_allocator_get_config(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out");
}

static void test_arguments(void) {
  CHECK_ERR(tcuda_malloc(NULL, 8), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_malloc: ptr is NULL");
  tcuda_stream_t s0 = {0};
  CHECK_ERR(tcuda_malloc_on(NULL, 8, 0, s0), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_malloc_on: ptr");
  CHECK_OK(tcuda_free(NULL));
  int x;
  CHECK_ERR(tcuda_free(&x), TCUDA_ERROR_INVALID_POINTER, "tcuda_free: pointer 0x");
  CHECK_ERR(tcuda_free((void *)0x1234), TCUDA_ERROR_INVALID_POINTER, "0x1234");
  CHECK_ERR(tcuda_record_stream(NULL, s0), TCUDA_ERROR_INVALID_ARGUMENT, "ptr");
  CHECK_ERR(tcuda_memory_stats(0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out");
  CHECK_ERR(tcuda_memory_stats_json(0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "json");
  CHECK_ERR(tcuda_memory_allocated(0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_memory_allocated: bytes");
  CHECK_ERR(tcuda_memory_summary(0, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out");
  CHECK_ERR(tcuda_memory_snapshot(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out");
  CHECK_ERR(tcuda_get_per_process_memory_fraction(0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "fraction");
  CHECK_ERR(tcuda_set_per_process_memory_fraction(1.5, 0), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_set_per_process_memory_fraction: Invalid fraction value: 1.5");
  CHECK_ERR(tcuda_set_per_process_memory_fraction(-0.25, -1), TCUDA_ERROR_INVALID_ARGUMENT, "Invalid fraction value");
  CHECK_ERR(tcuda_set_per_process_memory_fraction(NAN, 0), TCUDA_ERROR_INVALID_ARGUMENT, "Invalid fraction value");
  CHECK_OK(tcuda_empty_cache()); /* nothing to do, no CUDA needed */
}

static void test_without_gpu(void) {
  if (tcuda_is_available()) { /* the GPU half lives in tests/gpu/test_alloc_cuda.c */
    void *p = NULL;
    CHECK_OK(tcuda_malloc(&p, 8));
    CHECK(p != NULL);
    CHECK_OK(tcuda_free(p));
    return;
  }
  void *p = (void *)1;
  CHECK_EQ_INT(tcuda_malloc(&p, 8), TCUDA_ERROR_NOT_AVAILABLE);
  CHECK(p == NULL);
  tcuda_memory_stats_t st;
  CHECK_EQ_INT(tcuda_memory_stats(-1, &st), TCUDA_ERROR_NOT_AVAILABLE);
  int64_t v;
  CHECK_EQ_INT(tcuda_memory_reserved(0, &v), TCUDA_ERROR_NOT_AVAILABLE);
  CHECK_EQ_INT(tcuda_set_per_process_memory_fraction(0.5, 0), TCUDA_ERROR_NOT_AVAILABLE);
  tcuda_snapshot_t *s = NULL;
  CHECK_OK(tcuda_memory_snapshot(&s)); /* no allocator anywhere: empty */
  CHECK_EQ_INT(s->num_segments, 0);
  tcuda_snapshot_free(s);
  char *j = NULL;
  CHECK_OK(tcuda_memory_snapshot_json(&j));
  CHECK(j && j[0] == '[');
  tcuda_string_free(j);
}

TC_MAIN(T(test_env_config_bad_then_replaced), T(test_config_round_trip), T(test_arguments), T(test_without_gpu))
