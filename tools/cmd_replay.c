/* tcuda replay: run an allocation trace through a fresh caching allocator
 * (simulated or on the GPU) and print the stats and segments at each
 * checkpoint as JSON, streamed as the checkpoints are taken (the output
 * can be far larger than the trace). A failure part-way leaves the array
 * unclosed on stdout, never a complete document, and exits 1.
 *
 * A PyTorch memory snapshot in place of the trace (told apart by its
 * content) replays its history on the simulated device instead. */
#include "cli.h"
#include "replay/sniff.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const cli_cmd CMD = {
    "replay",
    "usage: tcuda replay [--simulate [--va driver|ascending] [--addresses FILE] [--maps FILE]\n"
    "                               [--capacity BYTES]]\n"
    "                    [--record-addresses FILE] [--config CONF] [--fraction F] [--device N]\n"
    "                    [--history SNAPSHOT] [--max-input BYTES] TRACE\n"
    "       tcuda replay --simulate [--config CONF] [--capacity BYTES] [--fraction F] [--device N]\n"
    "                    [--history OUT] [--max-input BYTES] [--work-budget N] SNAPSHOT\n",
    "  Replays TRACE on a fresh caching allocator and prints, per checkpoint, memory_stats() and\n"
    "  the segments as JSON. On the real GPU by default; --simulate replays on a simulated H200\n"
    "  (no GPU needed). A request that does not fit is an OOM, as in torch: its message (torch's\n"
    "  OutOfMemoryError text) goes to stderr, num_ooms counts it, and the replay goes on (exit 0).\n"
    "  --addresses: recorded 'ADDR SIZE' per cudaMalloc, used in order (torch's NAME.addresses)\n"
    "  --maps: expandable segments: recorded 'ADDR SIZE' per segment_map, in order (NAME.maps);\n"
    "          each VA reservation goes where torch's segment began, and maps must follow it\n"
    CLI_CAPACITY_HELP
    CLI_CONFIG_HELP
    "  --fraction F: set_per_process_memory_fraction(F), F in 0~1.\n"
    "  --record-addresses FILE: on the real GPU, write each segment cudaMalloc returned (for an\n"
    "          exact --simulate --addresses rerun).\n"
    "  --history: record the allocator history and write a snapshot at the end (a memory_viz\n"
    "             pickle, or JSON if SNAPSHOT ends in .json): open it with 'tcuda viz'\n"
    CLI_MAX_INPUT_HELP
    CLI_WORK_BUDGET_HELP
    "  TRACE lines: 'a ID SIZE [STREAM]', 'f ID', 'c' (checkpoint), 'e' (empty_cache), 'r' (reset peaks)\n"
    "  A malformed trace or addresses file exits 1; so does a replay without --simulate on a\n"
    "  machine without a GPU.\n"
    "\n"
    "  SNAPSHOT: a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot()'s pickle, or its\n"
    "  JSON form) in place of TRACE, told apart by its content. Its history (device N's, default\n"
    "  0) replays on the simulated device only (--simulate), with one element per 'snapshot'\n"
    "  entry of the history and one for its end. The pickle is read as plain data: nothing in it\n"
    "  runs. --config here comes from the command line only (the environment is not read):\n"
    "  without it the snapshot's own recorded settings are used, with segments where torch\n"
    "  placed them. --va, --addresses, --maps and --record-addresses do not apply. OOMs count in\n"
    "  num_ooms (exit 0). tcuda whatif compares configs on a snapshot.\n"};

typedef struct {
  int err; /* errno of the first failed write to stdout */
} out_ctx;

static tcuda_status to_stdout(void *user, const char *bytes, size_t n) {
  out_ctx *c = user;
  if (fwrite(bytes, 1, n, stdout) == n) return TCUDA_SUCCESS;
  c->err = errno ? errno : EIO;
  return TCUDA_ERROR_IO;
}

/* A snapshot is what the library's reader takes for one (replay/sniff.h:
 * a pickle, or JSON after an optional byte order mark); a trace line never
 * starts with '{' or '['. A gzip file is sniffed after decompressing it.
 * 0: not a snapshot, or the file cannot be read (the trace path reports
 * that). */
static int is_snapshot(const char *path, uint64_t cap) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  static char head[1 << 16]; /* blanks longer than this before a snapshot's '{' are not worth a guess */
  size_t n = fread(head, 1, sizeof head, f);
  fclose(f);
  if (n >= 2 && (unsigned char)head[0] == 0x1f && (unsigned char)head[1] == 0x8b) {
    char *data = NULL;
    size_t len = 0;
    if (tcuda_input_read(path, cap, &data, &len)) return 0;
    int r = tc_sniff(data, len) != TC_SNIFF_NONE;
    tcuda_string_free(data);
    return r;
  }
  return tc_sniff(head, n) != TC_SNIFF_NONE;
}


/* The exit code of a replay that wrote through to_stdout: its error, a
 * write error, or 0 once stdout is flushed. */
static int finish(tcuda_status s, const out_ctx *c) {
  if (s) {
    if (!c->err) return cli_fail("replay");
    fprintf(stderr, "tcuda replay: write error: %s\n", strerror(c->err));
    return 1;
  }
  if (fflush(stdout)) {
    fprintf(stderr, "tcuda replay: write error: %s\n", strerror(errno));
    return 1;
  }
  return 0;
}

static int replay_snapshot(const char *path, tcuda_replay_options_t *o, const char *config) {
  int rc;
  if (config && !cli_alloc_config(&CMD, config, &o->config, &rc)) return rc;
  if (o->capacity)
    fprintf(stderr, "tcuda replay: simulated device of %llu bytes (--capacity)\n", (unsigned long long)o->capacity);
  else
    fprintf(stderr, "tcuda replay: simulated device of 150109880320 bytes (an H200's; --capacity sets it)\n");
  out_ctx c = {0};
  tcuda_status s = tcuda_replay_snapshot_to(path, o, to_stdout, &c);
  return finish(s, &c);
}

int cmd_replay(int argc, char **argv) {
  enum { O_SIM = 256, O_VA, O_ADDR, O_MAPS, O_CAP, O_CONF, O_DEV, O_FRAC, O_REC, O_HIST, O_MAXIN, O_BUDGET };
  static const struct option longopts[] = {
      {"simulate", no_argument, NULL, O_SIM},           {"va", required_argument, NULL, O_VA},
      {"addresses", required_argument, NULL, O_ADDR},   {"maps", required_argument, NULL, O_MAPS},
      {"capacity", required_argument, NULL, O_CAP},     {"config", required_argument, NULL, O_CONF},
      {"device", required_argument, NULL, O_DEV},       {"fraction", required_argument, NULL, O_FRAC},
      {"record-addresses", required_argument, NULL, O_REC}, {"history", required_argument, NULL, O_HIST},
      {"max-input", required_argument, NULL, O_MAXIN},  {"work-budget", required_argument, NULL, O_BUDGET},
      {"help", no_argument, NULL, 'h'},                 {0}};
  tcuda_replay_options_t o = TCUDA_REPLAY_OPTIONS_INIT;
  const char *config = NULL;
  int sim_only = 0, trace_only = 0, ch, rc;
  while ((ch = cli_getopt(&CMD, argc, argv, "h", longopts, &rc)) != -1) {
    const char *v = optarg;
    uint64_t n;
    switch (ch) {
    case CLI_DONE: return rc;
    case O_SIM: o.simulate = 1; break;
    case O_VA:
      if (!strcmp(v, "driver")) o.va_mode = 0;
      else if (!strcmp(v, "ascending")) o.va_mode = 1;
      else return cli_usage_error(&CMD, "--va '%s': expected driver or ascending", v);
      sim_only = trace_only = 1;
      break;
    case O_ADDR: o.addresses_file = v; sim_only = trace_only = 1; break;
    case O_MAPS: o.maps_file = v; sim_only = trace_only = 1; break;
    case O_CAP:
      if (!cli_parse_bytes(&CMD, "--capacity", v, &n)) return CLI_USAGE;
      o.capacity = n;
      sim_only = 1;
      break;
    case O_CONF: config = v; break;
    case O_MAXIN:
      if (!cli_parse_bytes(&CMD, "--max-input", v, &n)) return CLI_USAGE;
      o.max_input_bytes = n;
      break;
    case O_BUDGET:
      if (!cli_parse_whole(&CMD, "--work-budget", v, "work budget", 1, UINT64_MAX, &n)) return CLI_USAGE;
      o.work_budget = n;
      break;
    case O_HIST:
      if (!*v) return cli_usage_error(&CMD, "--history needs a file name");
      o.history_path = v;
      break;
    case O_REC:
      if (!*v) return cli_usage_error(&CMD, "--record-addresses needs a file name");
      o.record_addresses = v;
      trace_only = 1;
      break;
    case O_FRAC:
      if (!cli_parse_fraction(&CMD, v, &o.memory_fraction)) return CLI_USAGE;
      break;
    case O_DEV:
      if (!cli_parse_whole(&CMD, "--device", v, "device index", 0, 1023, &n)) return CLI_USAGE;
      o.device = (int)n;
      break;
    }
  }
  if (argc - optind > 1) return cli_usage_error(&CMD, "more than one trace ('%s')", argv[optind + 1]);
  const char *trace = optind < argc ? argv[optind] : NULL;
  if (!trace) return cli_usage_error(&CMD, "no trace given");
  if (!strcmp(trace, "-") && !(trace = cli_spool_stdin(o.max_input_bytes)))
    return cli_error(&CMD, "cannot read standard input: %s", tcuda_last_status() ? tcuda_last_error() : strerror(errno));
  if (is_snapshot(trace, o.max_input_bytes)) {
    if (!o.simulate)
      return cli_usage_error(&CMD, "the file given is a memory snapshot: snapshots replay only on the "
                                   "simulated device (add --simulate)");
    if (trace_only)
      return cli_usage_error(&CMD, "--va, --addresses, --maps and --record-addresses do not apply to a snapshot "
                                   "(it holds its own addresses)");
    o.on_oom = cli_print_request_oom;
    o.on_oom_user = (void *)&CMD;
    return replay_snapshot(trace, &o, config);
  }
  if (sim_only && !o.simulate)
    return cli_usage_error(&CMD, "--va, --addresses, --maps and --capacity need --simulate");
  if (o.work_budget) return cli_usage_error(&CMD, "--work-budget applies to a snapshot, not a trace");
  if (o.simulate && o.record_addresses)
    return cli_usage_error(&CMD, "--record-addresses (record_addresses) needs the real GPU, not --simulate");
  if (!cli_alloc_config(&CMD, config, &o.config, &rc)) return rc;
  o.on_oom = cli_print_oom;
  o.on_oom_user = (void *)&CMD;
  out_ctx c = {0};
  tcuda_status s = tcuda_replay_file_to(trace, &o, to_stdout, &c);
  if (s == TCUDA_ERROR_NOT_AVAILABLE && !o.simulate)
    return cli_error(&CMD, "%s; add --simulate to replay on a simulated H200 without a GPU", tcuda_last_error());
  return finish(s, &c);
}
