/* tcuda snapshot: the memory summary, or a snapshot file, of
 *  - a trace replayed on the simulated device (--trace): its state at the end;
 *  - this process's own allocator (no --trace): which is empty in a fresh
 *    `tcuda` process. The real use is from C: tcuda_memory_record_history()
 *    then tcuda_memory_snapshot_dump() inside the program, or
 *    TCUDA_OOM_SNAPSHOT=path for a snapshot when an OOM is raised. */
#define _GNU_SOURCE
#include "cli.h"
#include "inspect/outfile.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const cli_cmd CMD = {
    "snapshot",
    "usage: tcuda snapshot [--device N] [--trace TRACE [--config CONF] [--capacity BYTES]\n"
    "                      [--max-input BYTES]] [--json | --pickle] [-o FILE] [--abbreviated]\n",
    "  default: print memory_summary(); --pickle/--json/-o: write the snapshot (segments,\n"
    "  device_traces with the whole history, allocator_settings) to FILE or stdout.\n"
    "  --trace: replay TRACE on the simulated device and report its final state; a request\n"
    "  that does not fit prints torch's OutOfMemoryError message on stderr and the replay goes\n"
    "  on (exit 0). Without --trace: this process's allocator on device N (empty here: from C,\n"
    "  call tcuda_memory_record_history() and tcuda_memory_snapshot_dump()).\n"
    CLI_CAPACITY_HELP
    CLI_CONFIG_HELP
    "  -o FILE: a pickle, or JSON when FILE ends in .json (unless --pickle).\n"
    "  --abbreviated: the short memory_summary() (the summary only).\n"
    CLI_MAX_INPUT_HELP};

/* memory_stats() dotted keys -> the struct */
static int set_stat(tcuda_memory_stats_t *st, const char *k, long long v) {
  static const struct { const char *name; size_t off; } arr[] = {
      {"allocation", offsetof(tcuda_memory_stats_t, allocation)},
      {"segment", offsetof(tcuda_memory_stats_t, segment)},
      {"active", offsetof(tcuda_memory_stats_t, active)},
      {"inactive_split", offsetof(tcuda_memory_stats_t, inactive_split)},
      {"allocated_bytes", offsetof(tcuda_memory_stats_t, allocated_bytes)},
      {"reserved_bytes", offsetof(tcuda_memory_stats_t, reserved_bytes)},
      {"active_bytes", offsetof(tcuda_memory_stats_t, active_bytes)},
      {"inactive_split_bytes", offsetof(tcuda_memory_stats_t, inactive_split_bytes)},
      {"requested_bytes", offsetof(tcuda_memory_stats_t, requested_bytes)},
      {"oversize_allocations", offsetof(tcuda_memory_stats_t, oversize_allocations)},
      {"oversize_segments", offsetof(tcuda_memory_stats_t, oversize_segments)},
  };
  static const struct { const char *name; size_t off; } sc[] = {
      {"num_alloc_retries", offsetof(tcuda_memory_stats_t, num_alloc_retries)},
      {"num_ooms", offsetof(tcuda_memory_stats_t, num_ooms)},
      {"num_sync_all_streams", offsetof(tcuda_memory_stats_t, num_sync_all_streams)},
      {"num_device_alloc", offsetof(tcuda_memory_stats_t, num_device_alloc)},
      {"num_device_free", offsetof(tcuda_memory_stats_t, num_device_free)},
      {"max_split_size", offsetof(tcuda_memory_stats_t, max_split_size)},
  };
  static const char *const fields[] = {"current", "peak", "allocated", "freed"};
  static const char *const pools[] = {"all", "small_pool", "large_pool"};
  char *base = (char *)st;
  for (size_t i = 0; i < sizeof sc / sizeof *sc; i++)
    if (!strcmp(k, sc[i].name)) { *(int64_t *)(base + sc[i].off) = v; return 1; }
  for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) {
    size_t n = strlen(arr[i].name);
    if (strncmp(k, arr[i].name, n) || k[n] != '.') continue;
    const char *rest = k + n + 1;
    tcuda_stat_t *s = (tcuda_stat_t *)(base + arr[i].off);
    if (i < 9) {
      int p = -1;
      for (int j = 0; j < 3; j++) {
        size_t m = strlen(pools[j]);
        if (!strncmp(rest, pools[j], m) && rest[m] == '.') { p = j; rest += m + 1; break; }
      }
      if (p < 0) continue;
      s += p;
    }
    int64_t *f = &s->current;
    for (int j = 0; j < 4; j++)
      if (!strcmp(rest, fields[j])) { f[j] = v; return 1; }
  }
  return 0;
}

/* The last checkpoint's "stats" object of a replay's JSON. */
static int parse_last_stats(const char *json, tcuda_memory_stats_t *st) {
  const char *p = NULL, *q = json;
  while ((q = strstr(q, "{\"stats\": {"))) p = q++;
  if (!p) return 0;
  p += strlen("{\"stats\": {");
  memset(st, 0, sizeof *st);
  int n = 0;
  while (*p == '"') {
    const char *e = strchr(p + 1, '"');
    if (!e || (size_t)(e - p) > 63) return 0;
    char key[64];
    memcpy(key, p + 1, (size_t)(e - p - 1));
    key[e - p - 1] = 0;
    char *end;
    long long v = strtoll(e + 2, &end, 10);
    if (end == e + 2) return 0;
    n += set_stat(st, key, v);
    p = end;
    if (*p == ',') p += 2;
  }
  return n > 0;
}

static int copy_out(const char *from, const char *to) {
  tc_outfile of = {0}; /* a temporary, renamed once complete: a failed write leaves no truncated file */
  FILE *i = fopen(from, "rb");
  int opened = i && to ? tc_outfile_open(&of, to) == 0 : 1;
  if (!i || !opened) {
    fprintf(stderr, "tcuda snapshot: cannot %s '%s': %s\n", i ? "write" : "read", i ? to : from, strerror(errno));
    if (i) fclose(i);
    return 1;
  }
  FILE *o = to ? of.f : stdout;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, i)) > 0) fwrite(buf, 1, n, o);
  int bad = ferror(i) != 0;
  fclose(i);
  if (to && bad) tc_outfile_abort(&of);
  else bad |= to ? tc_outfile_commit(&of) != 0 : (fflush(o) != 0 || ferror(o));
  if (bad) fprintf(stderr, "tcuda snapshot: writing '%s' failed\n", to ? to : "stdout");
  return bad;
}

/* The replay's checkpoints are not wanted here, only its history file. */
static tcuda_status discard(void *user, const char *bytes, size_t n) {
  (void)user, (void)bytes, (void)n;
  return TCUDA_SUCCESS;
}

int cmd_snapshot(int argc, char **argv) {
  enum { O_JSON = 256, O_PICKLE, O_ABBR, O_DEV, O_TRACE, O_CONF, O_CAP, O_MAXIN };
  static const struct option longopts[] = {
      {"json", no_argument, NULL, O_JSON},          {"pickle", no_argument, NULL, O_PICKLE},
      {"abbreviated", no_argument, NULL, O_ABBR},   {"device", required_argument, NULL, O_DEV},
      {"trace", required_argument, NULL, O_TRACE},  {"output", required_argument, NULL, 'o'},
      {"config", required_argument, NULL, O_CONF},  {"capacity", required_argument, NULL, O_CAP},
      {"max-input", required_argument, NULL, O_MAXIN}, {"help", no_argument, NULL, 'h'}, {0}};
  const char *trace = NULL, *out = NULL, *config = NULL;
  int device = -1, json = 0, pickle = 0, abbreviated = 0, ch, rc;
  uint64_t capacity = 0, max_input = (uint64_t)1 << 30, n;
  while ((ch = cli_getopt(&CMD, argc, argv, "ho:", longopts, &rc)) != -1) {
    const char *v = optarg;
    switch (ch) {
    case CLI_DONE: return rc;
    case O_JSON: json = 1; break;
    case O_PICKLE: pickle = 1; break;
    case O_ABBR: abbreviated = 1; break;
    case O_TRACE:
    case 'o':
      if (!*v) return cli_usage_error(&CMD, "%s needs a file name", ch == 'o' ? "-o" : "--trace");
      *(ch == 'o' ? &out : &trace) = v;
      break;
    case O_CONF: config = v; break;
    case O_DEV:
      if (!cli_parse_whole(&CMD, "--device", v, "device index", 0, 1023, &n)) return CLI_USAGE;
      device = (int)n;
      break;
    case O_CAP:
      if (!cli_parse_bytes(&CMD, "--capacity", v, &capacity)) return CLI_USAGE;
      break;
    case O_MAXIN:
      if (!cli_parse_bytes(&CMD, "--max-input", v, &max_input)) return CLI_USAGE;
      if (max_input > SIZE_MAX - 4) max_input = SIZE_MAX - 4;
      break;
    }
  }
  if (cli_operands(&CMD, argc, argv, 0) < 0) return CLI_USAGE;
  if (json && pickle) return cli_usage_error(&CMD, "--json and --pickle exclude each other");
  if (!trace && (config || capacity || max_input != (uint64_t)1 << 30))
    return cli_usage_error(&CMD, "--config, --capacity and --max-input need --trace");
  int want_file = json || pickle || out;
  if (want_file && abbreviated) return cli_usage_error(&CMD, "--abbreviated applies to the summary only");
  if (!json && out) {
    size_t n = strlen(out);
    json = n >= 5 && !strcmp(out + n - 5, ".json") && !pickle;
  }

  if (!trace) {
    if (!want_file) {
      char *s = NULL;
      if (tcuda_memory_summary(device, abbreviated, &s)) return cli_fail("snapshot");
      fputs(s, stdout);
      tcuda_string_free(s);
      return fflush(stdout) != 0;
    }
    if (!out) {
      char tmp[] = "/tmp/tcuda-snapshot-XXXXXX";
      int fd = mkstemp(tmp);
      if (fd < 0) { fprintf(stderr, "tcuda snapshot: mkstemp: %s\n", strerror(errno)); return 1; }
      close(fd);
      int rc = (json ? tcuda_memory_snapshot_dump_json(tmp) : tcuda_memory_snapshot_dump(tmp)) ? cli_fail("snapshot")
                                                                                                : copy_out(tmp, NULL);
      unlink(tmp);
      return rc;
    }
    if (json ? tcuda_memory_snapshot_dump_json(out) : tcuda_memory_snapshot_dump(out)) return cli_fail("snapshot");
    return 0;
  }

  tcuda_replay_options_t o = TCUDA_REPLAY_OPTIONS_INIT;
  o.simulate = 1;
  o.capacity = capacity;
  o.max_input_bytes = max_input;
  o.on_oom = cli_print_oom;
  o.on_oom_user = (void *)&CMD;
  if (!cli_alloc_config(&CMD, config, &o.config, &rc)) return rc;
  if (device > 0) fprintf(stderr, "tcuda snapshot: note: the simulated replay runs on device 0\n");
  if (!want_file) {
    /* replay with a final checkpoint and format its stats */
    size_t n = 0;
    char *text = cli_read_file(trace, max_input, &n), *t = text ? realloc(text, n + 4) : NULL;
    if (!t) {
      int e = text ? ENOMEM : errno;
      free(text);
      if (e == EFBIG)
        return cli_error(&CMD, "trace '%s': larger than the input cap of %llu bytes (--max-input raises it)", trace,
                         (unsigned long long)max_input);
      return cli_error(&CMD, "cannot %s trace '%s': %s", e == ENOMEM || e == EIO ? "read" : "open", trace,
                       strerror(e));
    }
    text = t;
    memcpy(text + n, "\nc\n", 4);
    char *js = NULL;
    tcuda_status s = tcuda_replay_string(text, &o, &js);
    free(text);
    if (s) return cli_fail("snapshot");
    tcuda_memory_stats_t st;
    int ok = parse_last_stats(js, &st);
    tcuda_string_free(js);
    if (!ok) { fprintf(stderr, "tcuda snapshot: the replay returned no stats\n"); return 1; }
    char *sum = NULL;
    if (tcuda_memory_stats_summary(&st, 0, abbreviated, &sum)) return cli_fail("snapshot");
    fputs(sum, stdout);
    tcuda_string_free(sum);
    return fflush(stdout) != 0;
  }
  char tmp[] = "/tmp/tcuda-snapshot-XXXXXX.pickle";
  char tmpj[] = "/tmp/tcuda-snapshot-XXXXXX.json";
  char *t = json ? tmpj : tmp;
  int fd = mkstemps(t, json ? 5 : 7);
  if (fd < 0) { fprintf(stderr, "tcuda snapshot: mkstemps: %s\n", strerror(errno)); return 1; }
  close(fd);
  o.history_path = t;
  rc = tcuda_replay_file_to(trace, &o, discard, NULL) ? cli_fail("snapshot") : copy_out(t, out);
  unlink(t);
  return rc;
}
