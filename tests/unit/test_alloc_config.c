/* TCUDA_ALLOC_CONF parsing: every key, every bad value (an error naming the
 * key, and the config left as it was), the environment variables' order. */
#include "harness.h"
#include "alloc/alloc.h"

#define MiB ((uint64_t)1 << 20)

/* A config with every field off its default, to see that errors leave it. */
static tc_alloc_config sentinel(void) {
  tc_alloc_config c;
  CHECK_OK(tc_alloc_config_parse(
      "max_split_size_mb:77,max_non_split_rounding_mb:33,roundup_power2_divisions:8,"
      "garbage_collection_threshold:0.25,expandable_segments:True,release_lock_on_cudamalloc:True",
      &c));
  return c;
}

static void bad(const char *conf, const char *substr) {
  tc_alloc_config c = sentinel(), orig = c;
  tcuda_status s = tc_alloc_config_parse(conf, &c);
  if (s != TCUDA_ERROR_CONFIG || !strstr(tcuda_last_error(), substr)) {
    fprintf(stderr, "conf '%s': %s '%s', wanted '%s'\n", conf, tcuda_status_name(s), tcuda_last_error(), substr);
    tc_failures++;
  }
  CHECK(!memcmp(&c, &orig, sizeof c));
  /* The runtime route leaves its config alone too. */
  c = orig;
  CHECK_EQ_INT(tc_alloc_config_update("tcuda_allocator_set_config", conf, &c), TCUDA_ERROR_CONFIG);
  CHECK(strstr(tcuda_last_error(), "tcuda_allocator_set_config: "));
  CHECK(!memcmp(&c, &orig, sizeof c));
}

static void test_defaults(void) {
  tc_alloc_config c;
  tc_alloc_config_default(&c);
  CHECK_EQ_INT(c.max_split_size, UINT64_MAX);
  CHECK_EQ_INT(c.max_non_split_rounding_size, 20 * MiB);
  for (int k = 0; k < TC_ROUNDUP_SLOTS; k++) CHECK_EQ_INT(c.roundup_power2_divisions[k], 0);
  CHECK(c.garbage_collection_threshold == 0);
  CHECK(c.per_process_memory_fraction == 1.0);
  CHECK_EQ_INT(c.expandable_segments, 0);
  CHECK_EQ_INT(c.release_lock_on_cudamalloc, 0);
  tc_alloc_config d = sentinel();
  CHECK_OK(tc_alloc_config_parse(NULL, &d));
  CHECK(!memcmp(&c, &d, sizeof c));
  d = sentinel();
  CHECK_OK(tc_alloc_config_parse("", &d));
  CHECK(!memcmp(&c, &d, sizeof c));
  CHECK_ERR(tc_alloc_config_parse("", NULL), TCUDA_ERROR_INVALID_ARGUMENT, "cfg");
}

static void test_each_key(void) {
  tc_alloc_config c;
  CHECK_OK(tc_alloc_config_parse("max_split_size_mb:100", &c));
  CHECK_EQ_INT(c.max_split_size, 100 * MiB);
  CHECK_OK(tc_alloc_config_parse("max_split_size_mb:20", &c)); /* >= 20 in current torch */
  CHECK_EQ_INT(c.max_split_size, 20 * MiB);
  CHECK_OK(tc_alloc_config_parse("max_split_size_mb:18446744073709551615", &c));
  CHECK_EQ_INT(c.max_split_size, (UINT64_MAX / MiB) * MiB); /* clamped as torch does */
  CHECK_OK(tc_alloc_config_parse("max_non_split_rounding_mb:30", &c));
  CHECK_EQ_INT(c.max_non_split_rounding_size, 30 * MiB);
  CHECK_OK(tc_alloc_config_parse("garbage_collection_threshold:0.6", &c));
  CHECK(c.garbage_collection_threshold == 0.6);
  /* torch 2.11's per_process_memory_fraction: [0, 1], both ends included */
  CHECK(c.per_process_memory_fraction == 1.0);
  CHECK_OK(tc_alloc_config_parse("per_process_memory_fraction:0.5", &c));
  CHECK(c.per_process_memory_fraction == 0.5);
  CHECK_OK(tc_alloc_config_parse("per_process_memory_fraction:0", &c));
  CHECK(c.per_process_memory_fraction == 0.0);
  CHECK_OK(tc_alloc_config_parse("per_process_memory_fraction:1.0", &c));
  CHECK(c.per_process_memory_fraction == 1.0);
  CHECK_OK(tc_alloc_config_parse("expandable_segments:True", &c));
  CHECK_EQ_INT(c.expandable_segments, 1);
  CHECK_OK(tc_alloc_config_parse("expandable_segments:False", &c));
  CHECK_EQ_INT(c.expandable_segments, 0);
  CHECK_OK(tc_alloc_config_parse("release_lock_on_cudamalloc:True", &c));
  CHECK_EQ_INT(c.release_lock_on_cudamalloc, 1);
  CHECK_OK(tc_alloc_config_parse("thread_cache:16", &c));
  CHECK_EQ_INT(c.thread_cache, 16);
  CHECK_OK(tc_alloc_config_parse("thread_cache:0", &c));
  CHECK_EQ_INT(c.thread_cache, 0);
  CHECK_OK(tc_alloc_config_parse("thread_cache:256", &c));
  CHECK_EQ_INT(c.thread_cache, 256);
  CHECK_OK(tc_alloc_config_parse("backend:native", &c));
  tc_alloc_config d;
  tc_alloc_config_default(&d);
  strcpy(d.text, "backend:native");
  CHECK(!memcmp(&c, &d, sizeof c));
  /* torch accepts these; they steer parts we do not have. */
  CHECK_OK(tc_alloc_config_parse("pinned_use_cuda_host_register:True,pinned_num_register_threads:8,"
                                 "pinned_use_background_threads:False,graph_capture_record_stream_reuse:True",
                                 &c));
  CHECK_EQ_INT(c.max_split_size, UINT64_MAX);

  CHECK_OK(tc_alloc_config_parse(" max_split_size_mb : 100 , expandable_segments:True ,"
                                 "garbage_collection_threshold:0.5,",
                                 &c));
  CHECK_EQ_INT(c.max_split_size, 100 * MiB);
  CHECK_EQ_INT(c.expandable_segments, 1);
  CHECK(c.garbage_collection_threshold == 0.5);
  CHECK(!strcmp(c.text, " max_split_size_mb : 100 , expandable_segments:True ,garbage_collection_threshold:0.5,"));
}

static void test_roundup_forms(void) {
  tc_alloc_config c;
  CHECK_OK(tc_alloc_config_parse("roundup_power2_divisions:4", &c));
  for (int k = 0; k < TC_ROUNDUP_SLOTS; k++) CHECK_EQ_INT(c.roundup_power2_divisions[k], 4);
  CHECK_OK(tc_alloc_config_parse("roundup_power2_divisions:1", &c));
  CHECK_EQ_INT(c.roundup_power2_divisions[7], 1);

  static const unsigned want1[16] = {4, 4, 4, 4, 4, 4, 4, 4, 4, 1, 1, 1, 1, 1, 1, 1};
  CHECK_OK(tc_alloc_config_parse("roundup_power2_divisions:[256:4,>:1]", &c));
  for (int k = 0; k < 16; k++) CHECK_EQ_INT(c.roundup_power2_divisions[k], want1[k]);

  /* 0 is allowed in the list; keys set slot log2(K); unset middle slots stay 0. */
  static const unsigned want2[16] = {0, 0, 0, 0, 0, 0, 8, 2, 2, 2, 2, 2, 2, 2, 2, 2};
  CHECK_OK(tc_alloc_config_parse("roundup_power2_divisions:[1:0,64:8,>:2]", &c));
  for (int k = 0; k < 16; k++) CHECK_EQ_INT(c.roundup_power2_divisions[k], want2[k]);

  static const unsigned want3[16] = {16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16};
  CHECK_OK(tc_alloc_config_parse("roundup_power2_divisions:[>:16]", &c));
  for (int k = 0; k < 16; k++) CHECK_EQ_INT(c.roundup_power2_divisions[k], want3[k]);

  /* A key past 32 GiB lands in the last slot. */
  CHECK_OK(tc_alloc_config_parse("roundup_power2_divisions:[2:2,1048576:8]", &c));
  CHECK_EQ_INT(c.roundup_power2_divisions[0], 2);
  CHECK_EQ_INT(c.roundup_power2_divisions[1], 2);
  CHECK_EQ_INT(c.roundup_power2_divisions[2], 0);
  CHECK_EQ_INT(c.roundup_power2_divisions[15], 8);
}

static void test_bad_values(void) {
  bad("max_split_size_mb:abc", "TCUDA_ALLOC_CONF: max_split_size_mb: expected a number >= 20, got 'abc'");
  bad("max_split_size_mb:19", "max_split_size_mb: expected a number >= 20, got '19'");
  bad("max_split_size_mb:-5", "max_split_size_mb");
  bad("max_split_size_mb:100abc", "got '100abc'");
  bad("max_split_size_mb:99999999999999999999", "max_split_size_mb");
  bad("max_split_size_mb:", "max_split_size_mb: missing value");
  bad("max_split_size_mb", "max_split_size_mb: expected ':'");
  bad("max_split_size_mb=100", "unknown key 'max_split_size_mb=100'");
  bad("max_non_split_rounding_mb:10", "max_non_split_rounding_mb: expected a number >= 20");
  bad("thread_cache:257", "thread_cache: expected an integer in [0, 256], got '257'");
  bad("thread_cache:-1", "thread_cache: expected an integer in [0, 256], got '-1'");
  bad("thread_cache:4x", "thread_cache");
  bad("thread_cache:", "thread_cache: missing value");
  bad("garbage_collection_threshold:0", "garbage_collection_threshold: expected a number in (0, 1), got '0'");
  bad("garbage_collection_threshold:1", "garbage_collection_threshold");
  bad("garbage_collection_threshold:1.5", "garbage_collection_threshold");
  bad("garbage_collection_threshold:-0.1", "garbage_collection_threshold");
  bad("garbage_collection_threshold:nan", "garbage_collection_threshold");
  bad("garbage_collection_threshold:0.5x", "got '0.5x'");
  bad("roundup_power2_divisions:0", "roundup_power2_divisions: expected a power of 2, got '0'");
  bad("roundup_power2_divisions:3", "roundup_power2_divisions: expected a power of 2, got '3'");
  bad("roundup_power2_divisions:[256:3]", "divisions must be a power of 2 or 0, got '3'");
  bad("roundup_power2_divisions:[100:4]", "interval must be a power of 2 (MB) or '>', got '100'");
  bad("roundup_power2_divisions:[256:4", "roundup_power2_divisions: expected ',' or ']' after '256:4'");
  bad("roundup_power2_divisions:[", "roundup_power2_divisions: missing ']'");
  bad("roundup_power2_divisions:[256:4;>:1]", "roundup_power2_divisions");
  bad("roundup_power2_divisions:[256]", "expected 'size:divisions'");
  bad("roundup_power2_divisions:[0:4]", "interval must be a power of 2");
  bad("expandable_segments:true", "expandable_segments: expected True or False, got 'true'");
  bad("expandable_segments:1", "expandable_segments");
  bad("release_lock_on_cudamalloc:yes", "release_lock_on_cudamalloc: expected True or False");
  bad("backend:cudaMallocAsync", "backend: only 'native' is supported, got 'cudaMallocAsync'");
  bad("per_process_memory_fraction:-0.1", "per_process_memory_fraction is invalid, set it in [0.0, 1.0], got '-0.1'");
  bad("per_process_memory_fraction:1.1", "per_process_memory_fraction is invalid");
  bad("per_process_memory_fraction:nan", "per_process_memory_fraction is invalid");
  bad("per_process_memory_fraction:half", "per_process_memory_fraction is invalid, set it in [0.0, 1.0], got 'half'");
  bad("pinned_reserve_segment_size_mb:lots", "pinned_reserve_segment_size_mb: expected a whole number, got 'lots'");
  bad("pinned_reserve_segment_size_mb:-1", "pinned_reserve_segment_size_mb");
  bad("pinned_num_register_threads:3", "pinned_num_register_threads");
  bad("pinned_use_cuda_host_register:on", "pinned_use_cuda_host_register");
  bad("foo:1", "unknown key 'foo'");
  bad("large_segment_size_mb:10", "large_segment_size_mb: expected a number >= 11, got '10'");
  bad("large_segment_size_mb:64,max_split_size_mb:40", "max_split_size_mb: expected a number >= 64, got '40'");
  bad(",expandable_segments:True", "expected a key, got ','");
  bad("expandable_segments:True:False", "expandable_segments: expected ',' after the value, got ':'");
  bad("expandable_segments:True max_split_size_mb:100", "expandable_segments");
  /* The good key before the bad one is not applied either. */
  bad("max_split_size_mb:100,foo:1", "unknown key 'foo'");
}

/* large_segment_size_mb against torch 2.11's own parser: each row is what
 * c10's AcceleratorAllocatorConfig::parseArgs gave for the string (a fresh
 * process per row, read back through its large_segment_size,
 * max_split_size and max_non_split_rounding_size getters; 0: no limit), or
 * the bound its error named. */
static void test_large_segment(void) {
  static const struct {
    const char *conf;
    uint64_t seg, split, rounding; /* MiB */
    unsigned bound;                /* nonzero: refused, naming this least value */
  } rows[] = {
      {"", 20, 0, 20, 0},
      {"large_segment_size_mb:12", 12, 0, 12, 0},
      {"large_segment_size_mb:11", 11, 0, 11, 0},
      {"large_segment_size_mb:4096", 4096, 0, 4096, 0},
      {"large_segment_size_mb:10", 0, 0, 0, 11},
      {"large_segment_size_mb:0", 0, 0, 0, 11},
      {"large_segment_size_mb:12,max_split_size_mb:12", 12, 12, 12, 0},
      {"large_segment_size_mb:12,max_split_size_mb:11", 0, 0, 0, 12},
      {"large_segment_size_mb:12,max_non_split_rounding_mb:15", 12, 0, 15, 0},
      {"large_segment_size_mb:64,max_split_size_mb:40", 0, 0, 0, 64},
      {"max_split_size_mb:40,large_segment_size_mb:64", 0, 0, 0, 64}, /* order does not matter */
      {"max_non_split_rounding_mb:25,large_segment_size_mb:30", 0, 0, 0, 30},
      {"max_split_size_mb:19", 0, 0, 0, 20},
      {"max_non_split_rounding_mb:19", 0, 0, 0, 20},
  };
  for (size_t k = 0; k < sizeof rows / sizeof *rows; k++) {
    tc_alloc_config c;
    tcuda_status s = tc_alloc_config_parse(rows[k].conf, &c);
    if (rows[k].bound) {
      char want[32];
      snprintf(want, sizeof want, ">= %u, got", rows[k].bound);
      CHECK_EQ_INT(s, TCUDA_ERROR_CONFIG);
      if (!strstr(tcuda_last_error(), want)) {
        fprintf(stderr, "conf '%s': '%s', wanted '%s'\n", rows[k].conf, tcuda_last_error(), want);
        tc_failures++;
      }
      continue;
    }
    CHECK_OK(s);
    CHECK_EQ_INT(c.large_segment_size, rows[k].seg * MiB);
    CHECK_EQ_INT(c.max_split_size, rows[k].split ? rows[k].split * MiB : UINT64_MAX);
    CHECK_EQ_INT(c.max_non_split_rounding_size, rows[k].rounding * MiB);
  }
  /* The runtime route, as torch's repeated parseArgs: large_segment_size_mb
   * stays, max_non_split_rounding_mb goes back to it when not given. */
  tc_alloc_config c;
  CHECK_OK(tc_alloc_config_parse("large_segment_size_mb:12,max_non_split_rounding_mb:15", &c));
  CHECK_OK(tc_alloc_config_update("tcuda_allocator_set_config", "max_split_size_mb:19", &c));
  CHECK_EQ_INT(c.large_segment_size, 12 * MiB);
  CHECK_EQ_INT(c.max_split_size, 19 * MiB);
  CHECK_EQ_INT(c.max_non_split_rounding_size, 12 * MiB);
  CHECK_OK(tc_alloc_config_parse("max_non_split_rounding_mb:40", &c));
  CHECK_OK(tc_alloc_config_update("tcuda_allocator_set_config", "max_split_size_mb:30", &c));
  CHECK_EQ_INT(c.max_non_split_rounding_size, 20 * MiB);
  CHECK_OK(tc_alloc_config_update("tcuda_allocator_set_config", "large_segment_size_mb:30", &c));
  CHECK_EQ_INT(tc_alloc_config_update("tcuda_allocator_set_config", "max_non_split_rounding_mb:25", &c),
               TCUDA_ERROR_CONFIG);
  CHECK_EQ_INT(c.large_segment_size, 30 * MiB); /* a refused update changes nothing */
}

static void test_update_route(void) {
  tc_alloc_config c;
  CHECK_OK(tc_alloc_config_parse("max_split_size_mb:100,expandable_segments:True,roundup_power2_divisions:4", &c));
  CHECK_OK(tc_alloc_config_update("tcuda_allocator_set_config", "release_lock_on_cudamalloc:True", &c));
  CHECK_EQ_INT(c.max_split_size, UINT64_MAX);         /* reset by torch's parseArgs */
  CHECK_EQ_INT(c.roundup_power2_divisions[3], 0);     /* reset */
  CHECK_EQ_INT(c.expandable_segments, 1);             /* kept */
  CHECK_EQ_INT(c.release_lock_on_cudamalloc, 1);
  CHECK(!strcmp(c.text, "release_lock_on_cudamalloc:True"));
}

static void test_env(void) {
  tc_alloc_config c;
  unsetenv("TCUDA_ALLOC_CONF");
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  unsetenv("PYTORCH_ALLOC_CONF");
  CHECK_OK(tc_alloc_config_from_env(&c));
  CHECK_EQ_INT(c.max_split_size, UINT64_MAX);
  setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:50", 1);
  CHECK_OK(tc_alloc_config_from_env(&c));
  CHECK_EQ_INT(c.max_split_size, 50 * MiB);
  setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:40", 1);
  CHECK_OK(tc_alloc_config_from_env(&c));
  CHECK_EQ_INT(c.max_split_size, 40 * MiB);
  setenv("TCUDA_ALLOC_CONF", "max_split_size_mb:30", 1);
  CHECK_OK(tc_alloc_config_from_env(&c));
  CHECK_EQ_INT(c.max_split_size, 30 * MiB); /* TCUDA_ALLOC_CONF wins */
  unsetenv("TCUDA_ALLOC_CONF");
  setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:5", 1);
  tc_alloc_config before = c;
  CHECK_ERR(tc_alloc_config_from_env(&c), TCUDA_ERROR_CONFIG, "PYTORCH_CUDA_ALLOC_CONF: max_split_size_mb");
  CHECK(!memcmp(&c, &before, sizeof c));
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  unsetenv("PYTORCH_ALLOC_CONF");
}

/* Every key of the table (TC_ALLOC_CONFIG_KEYS) round-trips: its example
 * parses, the formatted config parses back to the same settings, and a key
 * tcuda keeps a value for is written back under its own name. Its alias,
 * where torch has one, means the same. */
static void test_key_table_round_trip(void) {
  CHECK(tc_alloc_config_nkeys >= 11);
  for (size_t k = 0; k < tc_alloc_config_nkeys; k++) {
    const tc_config_key *d = &tc_alloc_config_keys[k];
    int before = tc_failures;
    CHECK(d->key && d->example && d->doc && *d->doc);
    CHECK((d->snapshot == 0) == (d->snapshot_key == NULL));
    char conf[256], text[1024], again[1024], name[128];
    snprintf(conf, sizeof conf, "%s:%s", d->key, d->example);
    snprintf(name, sizeof name, "%s:", d->key);
    tc_alloc_config c, back, alias, def;
    tc_alloc_config_default(&def);
    CHECK_OK(tc_alloc_config_parse(conf, &c));
    size_t n = tc_alloc_config_format(&c, text, sizeof text);
    CHECK(n > 0 && n < sizeof text);
    CHECK_OK(tc_alloc_config_parse(text, &back));
    memset(c.text, 0, sizeof c.text);
    memset(back.text, 0, sizeof back.text);
    CHECK(!memcmp(&c, &back, sizeof c));
    tc_alloc_config_format(&back, again, sizeof again);
    CHECK(!strcmp(text, again));
    if (d->field != TC_KEY_IGNORED) {
      CHECK(memcmp(&c, &def, sizeof c) != 0); /* the example is off the default */
      CHECK(strstr(text, name) != NULL);
    } else if (d->kind != TC_KEY_BACKEND) {
      CHECK(strstr(text, name) == NULL); /* nothing kept, nothing written */
      CHECK(!memcmp(&c, &def, sizeof c));
    }
    if (d->alias) {
      snprintf(conf, sizeof conf, "%s:%s", d->alias, d->example);
      CHECK_OK(tc_alloc_config_parse(conf, &alias));
      memset(alias.text, 0, sizeof alias.text);
      CHECK(!memcmp(&alias, &c, sizeof alias));
    }
    if (tc_failures != before) fprintf(stderr, "  (key %s: '%s' -> '%s')\n", d->key, conf, text);
  }
  /* The snapshot's positions run 1..N, each once (the writer stops at a gap). */
  int reported = 0;
  for (size_t k = 0; k < tc_alloc_config_nkeys; k++) reported += tc_alloc_config_keys[k].snapshot > 0;
  for (int pos = 1; pos <= reported; pos++) {
    int rows = 0;
    for (size_t k = 0; k < tc_alloc_config_nkeys; k++) rows += tc_alloc_config_keys[k].snapshot == pos;
    CHECK_EQ_INT(rows, 1);
  }
  CHECK(tc_alloc_config_snapshot_key(reported) && !tc_alloc_config_snapshot_key(reported + 1));
  /* One row per key: no key or alias appears twice. */
  for (size_t i = 0; i < tc_alloc_config_nkeys; i++)
    for (size_t j = i + 1; j < tc_alloc_config_nkeys; j++) {
      const tc_config_key *x = &tc_alloc_config_keys[i], *y = &tc_alloc_config_keys[j];
      CHECK(strcmp(x->key, y->key) && (!x->alias || strcmp(x->alias, y->key)) &&
            (!y->alias || strcmp(y->alias, x->key)));
    }
}

/* docs/allocator.md, where the tree has it, names every key and alias of
 * the table (as `key`). */
static void test_keys_documented(void) {
  const char *data = getenv("TCUDA_TEST_DATA"); /* <source>/tests/data */
  char path[1024];
  snprintf(path, sizeof path, "%s/../../docs/allocator.md", data ? data : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    printf("note: %s not found; key documentation not checked\n", path);
    return;
  }
  static char doc[1 << 20];
  size_t n = fread(doc, 1, sizeof doc - 1, f);
  fclose(f);
  doc[n] = 0;
  for (size_t k = 0; k < tc_alloc_config_nkeys; k++) {
    const tc_config_key *d = &tc_alloc_config_keys[k];
    const char *names[2] = {d->key, d->alias};
    for (int j = 0; j < 2; j++) {
      if (!names[j]) continue;
      char quoted[128];
      snprintf(quoted, sizeof quoted, "`%s`", names[j]);
      if (!strstr(doc, quoted)) {
        fprintf(stderr, "docs/allocator.md does not name %s\n", quoted);
        tc_failures++;
      }
    }
  }
}

TC_MAIN(T(test_defaults), T(test_each_key), T(test_roundup_forms), T(test_bad_values), T(test_large_segment), T(test_update_route),
        T(test_env), T(test_key_table_round_trip),
        T(test_keys_documented))
