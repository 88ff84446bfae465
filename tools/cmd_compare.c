/* tcuda compare BEFORE AFTER: two PyTorch memory snapshots (before and
 * after a change), each replayed under its own config
 * (tcuda_whatif_compare_files): peaks, their ratio, OOM counts and what
 * holds the memory at each peak reserved, side by side. Printed from the
 * library's document, as tcuda whatif does. */
#include "cli.h"
#include "cli_json.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const cli_cmd CMD = {
    "compare",
    "usage: tcuda compare BEFORE AFTER [--capacity BYTES] [--fraction F] [--device N] [--top N] [--json]\n"
    "                     [--max-input BYTES] [--work-budget N]\n",
    "  Replays two PyTorch memory snapshots (torch.cuda.memory._dump_snapshot()'s pickle, or its\n"
    "  JSON form), each under the allocator settings it was recorded with, and prints their peak\n"
    "  reserved and allocated bytes, the ratio after/before, their OOMs, and the stacks that hold\n"
    "  the memory at each one's peak reserved, side by side; then what holds the memory in each\n"
    "  (as tcuda whatif prints it). docs/whatif.md, \"What holds the memory\".\n"
    "  --capacity BYTES, --fraction F: the simulated device and set_per_process_memory_fraction,\n"
    "          for both (default an H200's 150109880320 bytes, no fraction).\n"
    "  --device N: whose history (default 0); snapshots of different device counts need it.\n"
    "  --top N: the largest holders shown (default 5; --json lists them all).\n"
    "  --json: print the library's JSON document instead.\n"
    CLI_MAX_INPUT_HELP
    CLI_WORK_BUDGET_HELP
    "  An unreadable or malformed snapshot exits 1 with a message naming the argument (before\n"
    "  or after) and the file.\n"};

static void print_compare(FILE *o, const jv *doc, int top) {
  const jv *bf = jv_get(doc, "before"), *af = jv_get(doc, "after"), *ch = jv_get(doc, "change");
  char b[600];
  fprintf(o, "before: %s (device %llu, %llu requests)\n", cli_shown(jv_str(jv_get(bf, "path")), b, sizeof b),
          jv_u64(jv_get(bf, "device")), jv_u64(jv_get(bf, "requests")));
  fprintf(o, "after:  %s (device %llu, %llu requests)\n\n", cli_shown(jv_str(jv_get(af, "path")), b, sizeof b),
          jv_u64(jv_get(af, "device")), jv_u64(jv_get(af, "requests")));
  fprintf(o, "%-8s %13s  %14s  %6s  %5s  %8s\n", "", "peak reserved", "peak allocated", "ratio", "OOMs", "replayed");
  for (int i = 0; i < 2; i++) {
    const jv *x = i ? af : bf;
    char b1[64], b2[64];
    const jv *ratio = jv_get(x, "ratio");
    fprintf(o, "%-8s %13s  %14s  ", i ? "after" : "before", cli_bytes(jv_u64(jv_get(x, "peak_reserved")), b1, sizeof b1),
            cli_bytes(jv_u64(jv_get(x, "peak_allocated")), b2, sizeof b2));
    if (jv_is_num(ratio)) fprintf(o, "%6.3f", jv_num(ratio));
    else fprintf(o, "%6s", "-");
    fprintf(o, "  %5llu  %8llu\n", jv_u64(jv_get(x, "recorded_ooms")), jv_u64(jv_get(x, "ooms")));
  }
  const jv *rr = jv_get(ch, "peak_reserved_ratio"), *ra = jv_get(ch, "peak_allocated_ratio");
  fprintf(o, "change: peak reserved %+lld bytes (x%s), peak allocated %+lld bytes (x%s), OOMs %+lld\n",
          jv_i64(jv_get(ch, "peak_reserved")), jv_is_num(rr) ? jv_get(ch, "peak_reserved_ratio")->text : "-",
          jv_i64(jv_get(ch, "peak_allocated")), jv_is_num(ra) ? jv_get(ch, "peak_allocated_ratio")->text : "-",
          jv_i64(jv_get(ch, "recorded_ooms")));

  const jv *hs = jv_get(doc, "holders_at_peak_reserved");
  int rec = cli_stacks_recorded(jv_get(doc, "before_explain")) || cli_stacks_recorded(jv_get(doc, "after_explain"));
  size_t n = hs && hs->kind == 'a' ? hs->n : 0;
  if (n) {
    fprintf(o, "\nat each peak reserved, by stack:\n  %12s  %12s  allocated at\n", "before", "after");
    for (size_t i = 0; i < n && (int)i < top; i++) {
      const jv *h = &hs->items[i];
      char b1[64], b2[64];
      fprintf(o, "  %12s  %12s  ", cli_bytes(jv_u64(jv_get(h, "before_bytes")), b1, sizeof b1),
              cli_bytes(jv_u64(jv_get(h, "after_bytes")), b2, sizeof b2));
      cli_holder_key(o, h, rec);
      fputc('\n', o);
    }
    if (n > (size_t)top) fprintf(o, "  ... %zu more stacks (--top N, --json)\n", n - (size_t)top);
  }
  for (int i = 0; i < 2; i++) {
    fprintf(o, "\n%s:", i ? "after" : "before");
    cli_explain_print(o, jv_get(doc, i ? "after_explain" : "before_explain"), top);
  }
}

int cmd_compare(int argc, char **argv) {
  enum { O_JSON = CLI_WO_NEXT };
  static const struct option longopts[] = {CLI_WHATIF_LONGOPTS, {"json", no_argument, NULL, O_JSON},
                                           {"help", no_argument, NULL, 'h'}, {0}};
  tcuda_whatif_options_t o = TCUDA_WHATIF_OPTIONS_INIT;
  int json = 0, ch, rc, top = 5;
  while ((ch = cli_getopt(&CMD, argc, argv, "h", longopts, &rc)) != -1) {
    int w = cli_whatif_option(&CMD, ch, optarg, &o, &top);
    if (w < 0) return CLI_USAGE;
    if (w) continue;
    switch (ch) {
    case CLI_DONE: return rc;
    case O_JSON: json = 1; break;
    }
  }
  if (argc - optind < 2) return cli_usage_error(&CMD, argc == optind ? "no snapshots given" : "no AFTER snapshot given");
  if (cli_operands(&CMD, argc, argv, 2) < 0) return CLI_USAGE;
  char *doc = NULL;
  if (tcuda_whatif_compare_files(argv[optind], argv[optind + 1], &o, &doc)) return cli_fail("compare");
  if (json) {
    fputs(doc, stdout);
  } else {
    jv v;
    int ok = jv_parse(doc, &v) && v.kind == 'o';
    if (ok) print_compare(stdout, &v, top);
    jv_free(&v);
    if (!ok) {
      tcuda_string_free(doc);
      return cli_error(&CMD, "the library's document did not read back as JSON");
    }
  }
  tcuda_string_free(doc);
  if (fflush(stdout) || ferror(stdout)) return cli_error(&CMD, "write error: %s", strerror(errno ? errno : EIO));
  return 0;
}
