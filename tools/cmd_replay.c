/* tcuda replay: run an allocation trace through a fresh caching allocator
 * (simulated or on the GPU) and print the stats and segments at each
 * checkpoint as JSON, streamed as the checkpoints are taken (the output
 * can be far larger than the trace). A failure part-way leaves the array
 * unclosed on stdout, never a complete document, and exits 1. */
#include "cli.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *USAGE =
    "usage: tcuda replay [--simulate [--va driver|ascending] [--addresses FILE] [--maps FILE]\n"
    "                               [--capacity BYTES]]\n"
    "                    [--record-addresses FILE] [--config CONF] [--fraction F] [--device N]\n"
    "                    [--history SNAPSHOT] TRACE\n"
    "  --addresses: recorded 'ADDR SIZE' per cudaMalloc, used in order (torch's NAME.addresses)\n"
    "  --maps: expandable segments: recorded 'ADDR SIZE' per segment_map, in order (NAME.maps);\n"
    "          each VA reservation goes where torch's segment began, and maps must follow it\n"
    "  --history: record the allocator history and write a snapshot at the end (a memory_viz\n"
    "             pickle, or JSON if SNAPSHOT ends in .json): open it with 'tcuda viz'\n"
    "  TRACE lines: 'a ID SIZE [STREAM]', 'f ID', 'c' (checkpoint), 'e' (empty_cache), 'r' (reset peaks)\n";

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "tcuda replay: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n%s", USAGE);
  return 2;
}

static int parse_num(const char *s, unsigned long long *out) {
  if (!s || !*s || *s == '-') return 0;
  char *end;
  errno = 0;
  *out = strtoull(s, &end, 0);
  return !errno && !*end;
}

typedef struct {
  int err; /* errno of the first failed write to stdout */
} out_ctx;

static tcuda_status to_stdout(void *user, const char *bytes, size_t n) {
  out_ctx *c = user;
  if (fwrite(bytes, 1, n, stdout) == n) return TCUDA_SUCCESS;
  c->err = errno ? errno : EIO;
  return TCUDA_ERROR_IO;
}

int cmd_replay(int argc, char **argv) {
  tcuda_replay_options_t o = TCUDA_REPLAY_OPTIONS_INIT;
  const char *trace = NULL;
  int sim_only = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    unsigned long long n;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(USAGE, stdout); return 0; }
    if (!strcmp(a, "--simulate")) { o.simulate = 1; continue; }
    if (!strcmp(a, "--va") || !strcmp(a, "--addresses") || !strcmp(a, "--maps") || !strcmp(a, "--capacity") || !strcmp(a, "--config") ||
        !strcmp(a, "--device") || !strcmp(a, "--fraction") || !strcmp(a, "--record-addresses") ||
        !strcmp(a, "--history")) {
      if (!v) return usage_error("%s needs a value", a);
      i++;
      if (!strcmp(a, "--va")) {
        if (!strcmp(v, "driver")) o.va_mode = 0;
        else if (!strcmp(v, "ascending")) o.va_mode = 1;
        else return usage_error("--va '%s': expected driver or ascending", v);
        sim_only = 1;
      } else if (!strcmp(a, "--addresses")) {
        o.addresses_file = v;
        sim_only = 1;
      } else if (!strcmp(a, "--maps")) {
        o.maps_file = v;
        sim_only = 1;
      } else if (!strcmp(a, "--capacity")) {
        if (!parse_num(v, &n) || !n) return usage_error("--capacity '%s': expected a positive byte count", v);
        o.capacity = n;
        sim_only = 1;
      } else if (!strcmp(a, "--config")) {
        o.config = v;
      } else if (!strcmp(a, "--history")) {
        if (!*v) return usage_error("%s", "--history needs a file name");
        o.history_path = v;
      } else if (!strcmp(a, "--record-addresses")) {
        o.record_addresses = v;
      } else if (!strcmp(a, "--fraction")) {
        char *end;
        errno = 0;
        o.memory_fraction = strtod(v, &end);
        if (errno || *end || !*v) return usage_error("--fraction '%s': expected a number in 0~1", v);
      } else {
        if (!parse_num(v, &n) || n > 1 << 20) return usage_error("--device '%s': expected a device index", v);
        o.device = (int)n;
      }
      continue;
    }
    if (a[0] == '-' && a[1]) return usage_error("unknown option '%s'", a);
    if (trace) return usage_error("more than one trace ('%s')", a);
    trace = a;
  }
  if (!trace) return usage_error("%s", "no trace given");
  if (sim_only && !o.simulate) return usage_error("%s", "--va, --addresses, --maps and --capacity need --simulate");
  out_ctx c = {0};
  if (tcuda_replay_file_to(trace, &o, to_stdout, &c)) {
    if (!c.err) return cli_fail("replay");
    fprintf(stderr, "tcuda replay: write error: %s\n", strerror(c.err));
    return 1;
  }
  if (fflush(stdout)) { fprintf(stderr, "tcuda replay: write error: %s\n", strerror(errno)); return 1; }
  return 0;
}
