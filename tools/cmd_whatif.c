/* tcuda whatif: a PyTorch memory snapshot's history replayed under its own
 * allocator config and others (tcuda_whatif_file), shown as a table, the
 * library's JSON document, or one self-contained HTML page
 * (tools/whatif/page.html, embedded at build time).
 *
 * The table is printed from the document itself, read back by the small
 * JSON reader below, so the text, the JSON and the page cannot disagree. */
#include "cli.h"
#include "cli_json.h"
#include "inspect/outfile.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const char tcuda_whatif_html[];
extern const unsigned long tcuda_whatif_html_len;

#define MAX_CONFIGS 255 /* the library's rows, less the recorded one */
#define SERIES_POINTS 400
#define CONFIG_COL 56   /* the table's config column at most */

static const cli_cmd CMD = {
    "whatif",
    "usage: tcuda whatif SNAPSHOT [--config CONF]... [--capacity BYTES] [--fraction F] [--device N]\n"
    "                    [--threads N] [--json] [--html OUT] [--top N] [--max-input BYTES] [--work-budget N]\n",
    "  Replays the history in a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot()'s\n"
    "  pickle, or its JSON form) on the simulated device, first under the allocator settings it\n"
    "  was recorded with (row 'recorded': torch's run, reproduced), then under each --config, and\n"
    "  prints per row the peaks, segment calls, retries, OOMs, the first OOM and min_limit: the\n"
    "  smallest per-process limit (2 MiB grid) under which the history runs with no OOM. Two\n"
    "  recommendations, each a PYTORCH_CUDA_ALLOC_CONF line: the lowest min_limit (to fit under a\n"
    "  cap), and the lowest peak reserved with no OOM (to hold less memory). Without --fraction,\n"
    "  a limit the history's OOMs show it ran under is inferred and used. The pickle is read as\n"
    "  plain data: nothing in it runs. docs/whatif.md says what the replay reproduces exactly.\n"
    "  --config CONF: a row, PYTORCH_CUDA_ALLOC_CONF syntax; repeat it for more rows (at most\n"
    "          255). Without it, a default sweep of configs (expandable segments, max_split_size_mb,\n"
    "          roundup_power2_divisions and, with --fraction, garbage_collection_threshold), plus\n"
    "          tcuda's own policy:compact (never the recommendation: torch cannot set it). The\n"
    "          environment's allocator variables are not read.\n"
    "  --capacity BYTES: the simulated device's memory; default an H200's 150109880320 bytes.\n"
    "          Plain bytes, or with a unit: 80GB = 80e9, 80GiB = 80*2^30 (kB MB GB TB, KiB MiB GiB TiB).\n"
    "  --fraction F: set_per_process_memory_fraction(F) for every row, F in 0~1 (0: none, or the\n"
    "          inferred limit).\n"
    "  --device N: whose history, for a snapshot of several devices (default 0).\n"
    "  --threads N: rows replayed at once (default one per CPU).\n"
    "  --json: print the library's JSON document instead of the table (with --html, its rows\n"
    "          carry the chart's series too).\n"
    "  --html OUT: also write one self-contained page (no network): a chart of reserved and\n"
    "          allocated bytes over time for every row, the table, the recommendation and each\n"
    "          row's first-OOM stack. Progress goes to stderr when it is a terminal.\n"
    CLI_MAX_INPUT_HELP
    CLI_WORK_BUDGET_HELP
    "  --top N: after the table, what holds the memory in the recorded config's replay at peak\n"
    "          reserved, peak allocated and the first OOM (live blocks by allocation stack, and the\n"
    "          cached bytes that are free): the N largest holders of each (default 5; --json: all).\n"
    "  A file that is not a snapshot, or a pickle that would build objects or call anything,\n"
    "  exits 1. A history that runs out of memory succeeds (the OOMs are in the table).\n"};

/* ---- reading the document back (cli_json.c) ---- */

static const jv *get(const jv *o, const char *key) { return jv_get(o, key); }
static int is_num(const jv *v) { return jv_is_num(v); }
static double num(const jv *v) { return jv_num(v); }
static unsigned long long u64(const jv *v) { return jv_u64(v); }
static const char *str(const jv *v) { return jv_str(v); }

/* ---- the table ---- */

/* 761.3 MiB; whole bytes under 1 KiB. */
static const char *human(unsigned long long b, char *buf, size_t n) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (b < 1024) { snprintf(buf, n, "%llu B", b); return buf; }
  double v = (double)b / 1024;
  int u = 0;
  while (v >= 1024 && u < 4) { v /= 1024; u++; }
  snprintf(buf, n, "%.1f %s", v, units[u]);
  return buf;
}

static const char *config_name(const jv *row, char *buf, size_t n) {
  const char *c = str(get(row, "config"));
  return *c ? cli_shown(c, buf, n) : "(torch default)";
}

enum { NCOL = 11 };
static const char *const HEAD[NCOL] = {"config", "source", "peak reserved", "peak allocated", "ratio",
                                       "peak segments", "segment calls", "retries", "ooms", "first OOM",
                                       "min_limit"};

/* One row's cells; min_limit carries '*' when it depends on a library adapting. */
static void cells(const jv *row, char c[NCOL][160]) {
  char b[64], name[160];
  /* a long config (the recorded one can list 16 roundup divisions) is cut
     here; the header lines and --json have it whole */
  const char *cn = config_name(row, name, sizeof name);
  if (strlen(cn) > CONFIG_COL) snprintf(c[0], 160, "%.*s...", CONFIG_COL - 3, cn);
  else snprintf(c[0], 160, "%s", cn);
  cli_shown(str(get(row, "source")), c[1], 160);
  snprintf(c[2], 160, "%s", human(u64(get(row, "peak_reserved")), b, sizeof b));
  snprintf(c[3], 160, "%s", human(u64(get(row, "peak_allocated")), b, sizeof b));
  const jv *ratio = get(row, "ratio");
  if (is_num(ratio)) snprintf(c[4], 160, "%.3f", num(ratio));
  else snprintf(c[4], 160, "-");
  snprintf(c[5], 160, "%llu", u64(get(row, "peak_segments")));
  snprintf(c[6], 160, "%llu", u64(get(row, "segment_calls")));
  snprintf(c[7], 160, "%llu", u64(get(row, "retries")));
  snprintf(c[8], 160, "%llu", u64(get(row, "ooms")));
  const jv *oom = get(row, "first_oom");
  if (oom && oom->kind == 'o')
    snprintf(c[9], 160, "#%llu (%s)", u64(get(oom, "request")), human(u64(get(oom, "size")), b, sizeof b));
  else
    snprintf(c[9], 160, "-");
  const jv *ml = get(row, "min_limit"), *mb = get(row, "min_limit_bisected");
  const jv *ad = get(row, "depends_on_adaptive");
  if (is_num(ml))
    snprintf(c[10], 160, "%s%s%s", human(u64(ml), b, sizeof b), is_num(mb) && u64(mb) != u64(ml) ? "~" : "",
             ad && ad->kind == 't' ? "*" : "");
  else snprintf(c[10], 160, "none");
}

static const char *plural(unsigned long long n, const char *one, const char *many) { return n == 1 ? one : many; }

/* One line, never wrapped mid-sentence (a terminal wraps long ones). */
static void put_line(FILE *o, const char *prefix, const char *text) {
  char buf[4096];
  fprintf(o, "%s%s\n", prefix, cli_shown(text, buf, sizeof buf));
}

/* "N bytes (P%) below/above the recorded config's (H)" */
static void put_versus(FILE *o, const jv *rec, const char *what, unsigned long long was_h) {
  const jv *sb = get(rec, "saving_bytes");
  char b[64];
  if (!is_num(sb)) return;
  long long save = strtoll(sb->text, NULL, 10);
  double pct = num(get(rec, "saving_percent"));
  if (!save) {
    fprintf(o, "  the same %s as the recorded config's\n", what);
    return;
  }
  fprintf(o, "  %lld bytes (%.2f%%) %s the recorded config's %s (%s)\n", save >= 0 ? save : -save, pct >= 0 ? pct : -pct,
          save >= 0 ? "below" : "above", what, human(was_h, b, sizeof b));
}

/* One of the two recommendations. */
static void put_advice(FILE *o, const jv *doc, const jv *row0, const char *key, const char *title) {
  const jv *rec = get(doc, key), *wh = get(doc, "recommendation_withheld");
  char b1[64], b3[600];
  fprintf(o, "%s:\n", title);
  if (!rec || rec->kind != 'o') {
    if (wh && wh->kind == 's') put_line(o, "  none: ", str(wh));
    else if (!strcmp(key, "recommended"))
      fputs("  none: no config a PyTorch user can set has a min_limit on this device\n", o);
    else {
      const jv *rows = get(doc, "configs");
      int runs = 0;
      for (size_t i = 0; rows && rows->kind == 'a' && i < rows->n; i++) {
        const jv *r = &rows->items[i], *fo = get(r, "first_oom");
        runs |= !u64(get(r, "ooms")) && (!fo || fo->kind == 'z') && !strstr(str(get(r, "config")), "policy:");
      }
      fputs(runs ? "  none: each config that runs with no OOM here has a higher min_limit than the recorded one\n"
                 : "  none: every config a PyTorch user can set runs out of memory here\n",
            o);
    }
    return;
  }
  const jv *is_rec = get(rec, "is_recorded");
  char line[700];
  const char *set = str(get(rec, "setting"));
  /* an empty value is torch's defaults: say so rather than end the line on '=' */
  snprintf(line, sizeof line, "%s%s", set, *str(get(rec, "config")) ? "" : " (empty, or unset: torch's defaults)");
  put_line(o, is_rec && is_rec->kind == 't' ? "  keep the recorded settings: " : "  ", line);
  if (!strcmp(key, "recommended")) {
    fprintf(o, "  min_limit %s (%llu bytes); peak reserved without a limit %s\n",
            human(u64(get(rec, "min_limit")), b1, sizeof b1), u64(get(rec, "min_limit")),
            human(u64(get(rec, "peak_reserved_no_limit")), b3, sizeof b3));
    if (!(is_rec && is_rec->kind == 't')) put_versus(o, rec, "min_limit", u64(get(row0, "min_limit")));
  } else {
    fprintf(o, "  peak reserved %s (%llu bytes), no OOM\n", human(u64(get(rec, "peak_reserved")), b1, sizeof b1),
            u64(get(rec, "peak_reserved")));
    if (!(is_rec && is_rec->kind == 't')) put_versus(o, rec, "peak reserved", u64(get(row0, "peak_reserved")));
  }
}

static void print_table(FILE *o, const jv *doc) {
  const jv *snap = get(doc, "snapshot"), *rows = get(doc, "configs");
  char b1[64], b2[64], b3[600];
  double ms = num(get(snap, "duration_ms"));
  unsigned long long entries = u64(get(snap, "entries")), reqs = u64(get(snap, "requests"));
  fprintf(o, "snapshot: device %llu (of %llu), %llu %s, %llu %s over %.3f s%s\n", u64(get(snap, "device")),
          u64(get(snap, "devices")), entries, plural(entries, "entry", "entries"), reqs,
          plural(reqs, "request", "requests"), ms / 1000,
          get(snap, "truncated") && get(snap, "truncated")->kind == 't' ? " (truncated: its start was lost)" : "");
  const char *rc = str(get(snap, "recorded_config"));
  unsigned long long nooms = u64(get(snap, "recorded_ooms")), nad = u64(get(snap, "adaptive_ooms"));
  unsigned long long nempty = u64(get(snap, "inferred_empty_cache"));
  fprintf(o, "recorded with: %s; torch had %llu %s", *rc ? cli_shown(rc, b3, sizeof b3) : "(torch default)", nooms,
          plural(nooms, "OOM", "OOMs"));
  if (nad) fprintf(o, " (%llu a library survived)", nad);
  fprintf(o, "; %llu empty_cache %s inferred\n", nempty, plural(nempty, "call", "calls"));
  fprintf(o, "simulated device: %s (%llu bytes)", human(u64(get(snap, "capacity")), b1, sizeof b1),
          u64(get(snap, "capacity")));
  const char *src = str(get(snap, "limit_source"));
  if (is_num(get(snap, "limit"))) {
    fprintf(o, ", limit %s (%llu bytes", human(u64(get(snap, "limit")), b2, sizeof b2), u64(get(snap, "limit")));
    if (!strcmp(src, "inferred")) fputs(", inferred from the history: see the notes", o);
    else fprintf(o, ", fraction %s", get(snap, "fraction") ? get(snap, "fraction")->text : "?");
    fputc(')', o);
  }
  fputs("\n\n", o);

  size_t n = rows && rows->kind == 'a' ? rows->n : 0;
  char(*c)[NCOL][160] = calloc(n ? n : 1, sizeof *c);
  if (!c) return;
  int w[NCOL], adaptive = 0, gap = 0;
  for (int k = 0; k < NCOL; k++) w[k] = (int)strlen(HEAD[k]);
  for (size_t i = 0; i < n; i++) {
    cells(&rows->items[i], c[i]);
    for (int k = 0; k < NCOL; k++)
      if ((int)strlen(c[i][k]) > w[k]) w[k] = (int)strlen(c[i][k]);
    adaptive |= strchr(c[i][10], '*') != NULL;
    gap |= strchr(c[i][10], '~') != NULL;
  }
  for (int k = 0; k < NCOL; k++) fprintf(o, k < 2 ? "%-*s  " : k + 1 < NCOL ? "%*s  " : "%*s\n", w[k], HEAD[k]);
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < NCOL; k++) fprintf(o, k < 2 ? "%-*s  " : k + 1 < NCOL ? "%*s  " : "%*s\n", w[k], c[i][k]);
  free(c);
  if (adaptive) fputs("* the history's OOMs include a library taking a smaller workspace: see the notes\n", o);
  if (gap)
    fputs("~ no OOM at min_limit, but some limits above it run out (up to min_limit_bisected in --json): a flush "
          "under a tight limit changed what followed\n",
          o);
  if (n) {
    unsigned long long rooms = u64(get(&rows->items[0], "ooms"));
    if (rooms != nooms)
      fprintf(o, "the recorded row has %llu %s under this table's device and limit, torch had %llu\n", rooms,
              plural(rooms, "OOM", "OOMs"), nooms);
  }

  const jv *row0 = n ? &rows->items[0] : NULL;
  fputc('\n', o);
  put_advice(o, doc, row0, "recommended", "to fit under a cap or on a smaller GPU (lowest min_limit)");
  put_advice(o, doc, row0, "recommended_reserved", "to hold less memory on this GPU (lowest peak reserved, no OOM)");
  const jv *rec = get(doc, "recommended");
  for (size_t i = 0; i < n; i++) { /* tcuda's own policy: what a PyTorch user gains by plugging it in */
    const jv *r = &rows->items[i], *ml = get(r, "min_limit"), *rm = rec && rec->kind == 'o' ? get(rec, "min_limit") : NULL;
    if (strcmp(str(get(r, "config")), "policy:compact") || !is_num(ml)) continue;
    fprintf(o, "with tcuda as torch's allocator (TCUDA_TORCH_ALLOCATOR=1 TCUDA_ALLOC_CONF=policy:compact): min_limit %s",
            human(u64(ml), b1, sizeof b1));
    if (is_num(rm)) {
      long long d = (long long)u64(rm) - (long long)u64(ml);
      if (d) fprintf(o, ", %lld bytes %s the recommended config's", d > 0 ? d : -d, d > 0 ? "below" : "above");
      else fputs(", the same as the recommended config's", o);
    }
    fputc('\n', o);
  }
  const jv *notes = get(doc, "notes");
  if (notes && notes->kind == 'a' && notes->n) {
    fputs("notes:\n", o);
    for (size_t i = 0; i < notes->n; i++) put_line(o, "  - ", str(&notes->items[i]));
  }
}

/* ---- the page ---- */

static void put_nonced(FILE *o, const char *a, const char *b, const char *nonce) {
  for (const char *m; a < b && (m = strstr(a, "@@NONCE@@")) && m < b; a = m + 9) {
    fwrite(a, 1, (size_t)(m - a), o);
    fputs(nonce, o);
  }
  fwrite(a, 1, (size_t)(b - a), o);
}

/* The page with the document in a data block. '<', '>' and '&' occur
 * only inside JSON strings, where \u003c etc. mean the same: no text from
 * the snapshot or a config can end the script element or open a comment. */
static int write_page(const char *path, const char *json) {
  char nonce[33];
  if (cli_make_nonce(nonce)) return cli_error(&CMD, "cannot read /dev/urandom for the page's script nonce");
  const char *tpl = tcuda_whatif_html, *m = strstr(tpl, "@@DATA@@");
  if (!m || !strstr(tpl, "@@NONCE@@")) return cli_error(&CMD, "the embedded page is damaged (markers missing)");
  tc_outfile out = {0}; /* a temporary, renamed once complete: a failed write leaves no truncated page */
  char b[600];
  if (tc_outfile_open(&out, path))
    return cli_error(&CMD, "cannot write '%s': %s", cli_shown(path, b, sizeof b), strerror(errno));
  FILE *o = out.f;
  put_nonced(o, tpl, m, nonce);
  for (const char *p = json; *p; p++) {
    if (*p == '<') fputs("\\u003c", o);
    else if (*p == '>') fputs("\\u003e", o);
    else if (*p == '&') fputs("\\u0026", o);
    else fputc(*p, o);
  }
  put_nonced(o, m + 8, tpl + strlen(tpl), nonce);
  if (tc_outfile_commit(&out))
    return cli_error(&CMD, "writing '%s' failed: %s", cli_shown(path, b, sizeof b), strerror(errno));
  return 0;
}

/* ---- the command ---- */

int cmd_whatif(int argc, char **argv) {
  enum { O_CONF = CLI_WO_NEXT, O_THREADS, O_JSON, O_HTML };
  static const struct option longopts[] = {CLI_WHATIF_LONGOPTS,
                                           {"config", required_argument, NULL, O_CONF},
                                           {"threads", required_argument, NULL, O_THREADS},
                                           {"json", no_argument, NULL, O_JSON},
                                           {"html", required_argument, NULL, O_HTML},
                                           {"help", no_argument, NULL, 'h'},
                                           {0}};
  static const char *configs[MAX_CONFIGS];
  tcuda_whatif_options_t o = TCUDA_WHATIF_OPTIONS_INIT;
  const char *html = NULL;
  int json = 0, ch, rc, top = 5;
  size_t nconf = 0;
  while ((ch = cli_getopt(&CMD, argc, argv, "h", longopts, &rc)) != -1) {
    const char *v = optarg;
    uint64_t n;
    int w = cli_whatif_option(&CMD, ch, v, &o, &top);
    if (w < 0) return CLI_USAGE;
    if (w) continue;
    switch (ch) {
    case CLI_DONE: return rc;
    case O_CONF:
      if (nconf == MAX_CONFIGS) return cli_usage_error(&CMD, "--config given more than %d times", MAX_CONFIGS);
      /* checked now, as a usage error naming it; the environment is not read */
      if (*v && !cli_alloc_config(&CMD, v, &configs[nconf], &rc)) return rc;
      configs[nconf++] = v;
      break;
    case O_THREADS:
      if (!cli_parse_whole(&CMD, "--threads", v, "thread count", 1, 256, &n)) return CLI_USAGE;
      o.threads = (int)n;
      break;
    case O_JSON: json = 1; break;
    case O_HTML:
      if (!*v) return cli_usage_error(&CMD, "--html needs a file name");
      html = v;
      break;
    }
  }
  if (optind == argc) return cli_usage_error(&CMD, "no snapshot given");
  if (cli_operands(&CMD, argc, argv, 1) < 0) return CLI_USAGE;
  const char *path = argv[optind];
  o.configs = nconf ? configs : NULL;
  o.num_configs = nconf;
  if (html) o.series_points = SERIES_POINTS;

  cli_progress pr = {.name = "whatif", .tty = -1};
  o.progress = cli_progress_fn;
  o.progress_user = &pr;
  char *doc = NULL;
  tcuda_status st = tcuda_whatif_file(path, &o, &doc);
  cli_progress_done(&pr);
  if (st) return cli_fail("whatif");
  if (html && (rc = write_page(html, doc))) {
    tcuda_string_free(doc);
    return rc;
  }
  if (json) {
    fputs(doc, stdout);
  } else {
    jv v;
    int ok = jv_parse(doc, &v) && v.kind == 'o';
    if (ok) print_table(stdout, &v);
    if (ok) cli_explain_print(stdout, get(&v, "explain"), top);
    jv_free(&v);
    if (!ok) {
      tcuda_string_free(doc);
      return cli_error(&CMD, "the library's document did not read back as JSON");
    }
  }
  tcuda_string_free(doc);
  if (fflush(stdout) || ferror(stdout)) return cli_error(&CMD, "write error: %s", strerror(errno ? errno : EIO));
  if (html) {
    char b[600];
    fprintf(stderr, "tcuda whatif: wrote %s\n", cli_shown(html, b, sizeof b));
  }
  return 0;
}
