/* libFuzzer: trace parser, replay and the allocator policy on the simulated
 * device. Byte 0 picks a config and address model; the rest is a trace.
 *  - a trace the parser rejects names its line;
 *  - an accepted trace replays to the end and gives one JSON element per
 *    checkpoint: the parser refuses what the allocator cannot take (sizes
 *    above TC_TRACE_MAX_SIZE, whose rounding would overflow), and a request
 *    the device cannot hold is an OOM, a normal outcome, never an error;
 *  - run op by op on the engine, every invariant of alloc_check.h holds
 *    after every operation, and freeing everything returns every byte. */
#include "replay/trace.h"
#include "alloc_check.h"
#include <stdlib.h>
#include <string.h>

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)
#define MAX_OPS 4000
#define CAPACITY ((uint64_t)1 << 30)

static const char *const CONFIGS[] = {
    "", "max_split_size_mb:20", "roundup_power2_divisions:4", "roundup_power2_divisions:[1:2,16:8,>:1]",
    "expandable_segments:True", "expandable_segments:True,max_split_size_mb:40",
    "garbage_collection_threshold:0.5", "max_split_size_mb:24,max_non_split_rounding_mb:64",
    "policy:compact",
};
#define NCONF (sizeof CONFIGS / sizeof *CONFIGS)

static void run_engine(const tc_trace *tr, const char *conf, double fraction, int va) {
  tc_alloc_config cfg;
  tc_alloc_config_default(&cfg);
  if (tc_alloc_config_parse(conf, &cfg)) FAIL("config '%s': %s", conf, tcuda_last_error());
  tc_sim_options so = {0};
  so.capacity = CAPACITY;
  so.va = va ? TC_SIM_VA_ASCENDING : TC_SIM_VA_DRIVER;
  tc_backend *be = NULL;
  tc_alloc *a = NULL;
  if (tc_backend_sim_create(&so, &be)) FAIL("sim: %s", tcuda_last_error());
  if (tc_alloc_create(0, be, &cfg, CAPACITY, &a)) FAIL("create: %s", tcuda_last_error());
  if (fraction > 0 && tc_alloc_set_memory_fraction(a, fraction)) FAIL("fraction: %s", tcuda_last_error());
  uint64_t *addr = calloc(tr->num_slots + 1, sizeof *addr);
  tc_check_handle *live = calloc(tr->num_slots + 1, sizeof *live);
  size_t *where = calloc(tr->num_slots + 1, sizeof *where);     /* slot -> index in live */
  size_t *live_slot = calloc(tr->num_slots + 1, sizeof *live_slot); /* index in live -> slot */
  int nlive = 0;
  for (size_t i = 0; i < tr->num_ops; i++) {
    const tc_trace_op *op = &tr->ops[i];
    if (op->kind == 'a' && op->size > TC_TRACE_MAX_SIZE) FAIL("line %u: size above the bound parsed", op->line);
    uint64_t stream = op->stream ? 0x7f0000000000ULL + (uint64_t)op->stream * 0x1000 : 0;
    tcuda_status s = TCUDA_SUCCESS;
    switch (op->kind) {
    case 'a':
      s = tc_alloc_malloc(a, op->size, stream, &addr[op->slot]);
      if (s == TCUDA_ERROR_OUT_OF_MEMORY) { addr[op->slot] = 0; s = TCUDA_SUCCESS; }
      if (!s && addr[op->slot]) {
        where[op->slot] = (size_t)nlive;
        live_slot[nlive] = op->slot;
        live[nlive++] = (tc_check_handle){addr[op->slot], op->size};
      }
      break;
    case 'f':
      if (addr[op->slot]) {
        s = tc_alloc_free(a, addr[op->slot]);
        size_t w = where[op->slot];
        nlive--;
        live[w] = live[nlive];
        live_slot[w] = live_slot[nlive];
        where[live_slot[w]] = w;
        addr[op->slot] = 0;
      }
      break;
    case 'e': s = tc_alloc_empty_cache(a); break;
    case 'r': tc_alloc_reset_peak(a); break;
    default: break;
    }
    if (s) FAIL("line %u (%c): %s", op->line, op->kind, tcuda_last_error());
    tc_check_result r = {{0}, 0};
    tc_check_alloc(&r, a, be, &cfg, live, nlive, 0);
    if (r.failed) FAIL("config '%s' va %d after line %u (%c): %s", conf, va, op->line, op->kind, r.why);
  }
  for (size_t k = 0; k < tr->num_slots; k++)
    if (addr[k] && tc_alloc_free(a, addr[k])) FAIL("final free: %s", tcuda_last_error());
  if (tc_alloc_empty_cache(a)) FAIL("final empty_cache: %s", tcuda_last_error());
  if (tc_backend_sim_used(be)) FAIL("%llu bytes still reserved after freeing everything",
                                    (unsigned long long)tc_backend_sim_used(be));
  tc_alloc_destroy(a);
  tc_backend_sim_destroy(be);
  free(addr);
  free(live);
  free(where);
  free(live_slot);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  if (n < 1 || n > 65536) return 0;
  unsigned sel = data[0];
  const char *text = (const char *)data + 1;
  size_t len = n - 1;
  tc_trace tr;
  tcuda_status st = tc_trace_parse(text, len, &tr);
  if (st) {
    if (st == TCUDA_ERROR_PARSE && strncmp(tcuda_last_error(), "trace line ", 11))
      FAIL("parse error without a line: %s", tcuda_last_error());
    if (st != TCUDA_ERROR_PARSE && st != TCUDA_ERROR_HOST_OUT_OF_MEMORY)
      FAIL("parse status %s", tcuda_status_name(st));
    return 0;
  }
  if (tr.num_ops > MAX_OPS) { tc_trace_free(&tr); return 0; }
  const char *conf = CONFIGS[sel % NCONF];
  int va = (sel / NCONF) & 1;
  double fraction = strstr(conf, "garbage") ? 0.5 : 0;

  /* the public replay: text without NULs (the parser rejected those) */
  char *copy = malloc(len + 1);
  memcpy(copy, text, len);
  copy[len] = 0;
  tcuda_replay_options_t o = TCUDA_REPLAY_OPTIONS_INIT;
  o.simulate = 1;
  o.va_mode = va;
  o.capacity = CAPACITY;
  o.config = conf;
  o.memory_fraction = fraction;
  char *json = NULL;
  if (tcuda_replay_string(copy, &o, &json)) FAIL("replay of a valid trace failed: %s", tcuda_last_error());
  size_t cps = 0;
  for (const char *p = json; (p = strstr(p, "{\"stats\": ")); p++) cps++;
  if (cps != tr.num_checkpoints) FAIL("%zu checkpoints in the JSON, %zu in the trace", cps, tr.num_checkpoints);
  tcuda_string_free(json);
  free(copy);

  run_engine(&tr, conf, fraction, va);
  tc_trace_free(&tr);
  return 0;
}
