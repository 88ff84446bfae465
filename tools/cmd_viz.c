/* tcuda viz: one self-contained HTML page (no network) from a snapshot
 * written by tcuda (pickle or JSON) or by torch.cuda.memory._dump_snapshot.
 * The library reduces the snapshot to what the page draws (tcuda_viz_file:
 * bounded in size however long the history), and the page
 * (tools/viz/viewer.html, embedded at build time) draws it. */
#include "cli.h"
#include "inspect/outfile.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const char tcuda_viz_html[];
extern const unsigned long tcuda_viz_html_len;

static const cli_cmd CMD = {
    "viz",
    "usage: tcuda viz SNAPSHOT [-o REPORT.html] [--max-input BYTES]\n",
    "  SNAPSHOT: a pickle (tcuda_memory_snapshot_dump, tcuda replay --history, or torch's\n"
    "            _dump_snapshot) or its JSON form. Without -o the page goes to stdout.\n"
    "  -o, --output FILE: write the page there.\n"
    "  Long histories are drawn from bounded data (docs/whatif.md, section 9): the page\n"
    "  stays a few MB at most. Progress goes to stderr when it is a terminal.\n"
    CLI_MAX_INPUT_HELP
    "  A file that is not a snapshot exits 1.\n"};

static int fail(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "tcuda viz: ");
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
  return 1;
}

/* Writes [a, b) with each @@NONCE@@ replaced by nonce. */
static void put_nonced(FILE *o, const char *a, const char *b, const char *nonce) {
  for (const char *m; a < b && (m = strstr(a, "@@NONCE@@")) && m < b; a = m + 9) {
    fwrite(a, 1, (size_t)(m - a), o);
    fputs(nonce, o);
  }
  fwrite(a, 1, (size_t)(b - a), o);
}

/* A JSON reader just deep enough to tell a memory snapshot from other JSON:
 * the whole text must be one valid value, and the top level a dict with a
 * "segments" list (and "device_traces" a list where present). The page
 * checks the rest. */
typedef struct { const char *p, *end; const char *why; } jcur;

static void jws(jcur *c) { while (c->p < c->end && strchr(" \t\r\n", *c->p) && *c->p) c->p++; }
static int jfail(jcur *c, const char *why) { if (!c->why) c->why = why; return -1; }

/* Returns the value's kind ('{', '[', '"', 'n' number, 'l' literal) or -1. */
static int jvalue(jcur *c, int depth);

static int jstring(jcur *c) {
  if (c->p >= c->end || *c->p != '"') return jfail(c, "a string was expected");
  for (c->p++; c->p < c->end; c->p++) {
    unsigned char ch = (unsigned char)*c->p;
    if (ch == '"') { c->p++; return '"'; }
    if (ch < 0x20) return jfail(c, "a control character inside a string");
    if (ch == '\\' && ++c->p >= c->end) break;
  }
  return jfail(c, "an unterminated string");
}

static int jvalue(jcur *c, int depth) {
  jws(c);
  if (c->p >= c->end) return jfail(c, "the text ends early");
  if (depth > 200) return jfail(c, "nesting deeper than 200");
  char ch = *c->p;
  if (ch == '"') return jstring(c);
  if (ch == '{' || ch == '[') {
    char close = ch == '{' ? '}' : ']';
    c->p++;
    jws(c);
    if (c->p < c->end && *c->p == close) { c->p++; return ch; }
    for (;;) {
      if (ch == '{') {
        jws(c);
        if (jstring(c) < 0) return -1;
        jws(c);
        if (c->p >= c->end || *c->p++ != ':') return jfail(c, "':' was expected");
      }
      if (jvalue(c, depth + 1) < 0) return -1;
      jws(c);
      if (c->p < c->end && *c->p == ',') { c->p++; continue; }
      if (c->p < c->end && *c->p == close) { c->p++; return ch; }
      return jfail(c, ch == '{' ? "',' or '}' was expected" : "',' or ']' was expected");
    }
  }
  if (ch == '-' || (ch >= '0' && ch <= '9')) {
    char *e;
    errno = 0;
    const char *q = c->p;
    while (q < c->end && strchr("+-.eE0123456789", *q) && *q) q++;
    char buf[64];
    size_t n = (size_t)(q - c->p);
    if (n >= sizeof buf) return jfail(c, "a number too long");
    memcpy(buf, c->p, n);
    buf[n] = 0;
    (void)strtod(buf, &e);
    if (*e || !n) return jfail(c, "a malformed number");
    c->p = q;
    return 'n';
  }
  static const char *const lits[] = {"true", "false", "null"};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(lits[i]);
    if ((size_t)(c->end - c->p) >= n && !memcmp(c->p, lits[i], n)) { c->p += n; return 'l'; }
  }
  return jfail(c, "an unexpected character");
}

/* NULL when text is a snapshot's JSON, else why not. */
static const char *json_snapshot_problem(const char *text, size_t n) {
  jcur c = {text, text + n, NULL};
  jws(&c);
  if (c.p >= c.end || *c.p != '{') return "its top level is not a dict";
  c.p++;
  int segments = 0, traces_ok = 1;
  jws(&c);
  if (c.p < c.end && *c.p == '}') c.p++;
  else for (;;) {
    jws(&c);
    const char *k = c.p;
    if (jstring(&c) < 0) return c.why;
    size_t kn = (size_t)(c.p - k);
    jws(&c);
    if (c.p >= c.end || *c.p++ != ':') return "':' was expected";
    int kind = jvalue(&c, 1);
    if (kind < 0) return c.why;
    if (kn == 10 && !memcmp(k, "\"segments\"", 10)) segments = kind == '[' ? 1 : -1;
    if (kn == 15 && !memcmp(k, "\"device_traces\"", 15)) traces_ok = kind == '[';
    jws(&c);
    if (c.p < c.end && *c.p == ',') { c.p++; continue; }
    if (c.p < c.end && *c.p == '}') { c.p++; break; }
    return "',' or '}' was expected";
  }
  jws(&c);
  if (c.p != c.end) return "text follows the JSON value";
  if (segments == 0) return "it has no \"segments\" list";
  if (segments < 0) return "its \"segments\" is not a list";
  if (!traces_ok) return "its \"device_traces\" is not a list";
  return NULL;
}

int cmd_viz(int argc, char **argv) {
  enum { O_MAXIN = 256 };
  static const struct option longopts[] = {{"output", required_argument, NULL, 'o'},
                                           {"max-input", required_argument, NULL, O_MAXIN},
                                           {"help", no_argument, NULL, 'h'},
                                           {0}};
  const char *in = NULL, *out = NULL;
  uint64_t cap = (uint64_t)1 << 30;
  int ch, rc;
  while ((ch = cli_getopt(&CMD, argc, argv, "ho:", longopts, &rc)) != -1) {
    if (ch == CLI_DONE) return rc;
    if (ch == O_MAXIN) {
      if (!cli_parse_bytes(&CMD, "--max-input", optarg, &cap)) return CLI_USAGE;
      if (cap > SIZE_MAX - 1) cap = SIZE_MAX - 1;
      continue;
    }
    if (!*optarg) return cli_usage_error(&CMD, "-o needs a file name");
    out = optarg;
  }
  if (optind == argc) return cli_usage_error(&CMD, "no snapshot given");
  if (argc - optind > 1) return cli_usage_error(&CMD, "more than one snapshot ('%s')", argv[optind + 1]);
  in = argv[optind];
  if (!strcmp(in, "-") && !(in = cli_spool_stdin(cap))) /* read twice below */
    return fail("cannot read standard input: %s%s", tcuda_last_status() ? tcuda_last_error() : strerror(errno), "");
  size_t n = 0;
  char *data = cli_read_file(in, cap, &n);
  if (!data && errno == EFBIG) {
    char m[64];
    snprintf(m, sizeof m, "%llu", (unsigned long long)cap);
    return fail("'%s': larger than the input cap of %s bytes (--max-input raises it)", in, m);
  }
  if (!data) return fail("cannot read '%s': %s", in, strerror(errno));
  size_t k = 0;
  while (k < n && strchr(" \t\r\n", data[k])) k++;
  const char *format = NULL;
  if (n >= 2 && (unsigned char)data[0] == 0x80 && data[1] >= 2 && data[1] <= 5) format = "pickle";
  else if (k < n && data[k] == '{') format = "json";
  if (!format) {
    free(data);
    return fail("'%s' is not a snapshot (expected a pickle, protocol 2-5, or JSON)%s", in, "");
  }
  if (format[0] == 'j') {
    const char *why = json_snapshot_problem(data, n);
    if (why) {
      free(data);
      return fail("'%s' is not a memory snapshot: %s", in, why);
    }
  }
  free(data); /* the sniffing above gives the plain messages; the library reads it again */
  tcuda_viz_options_t vo = TCUDA_VIZ_OPTIONS_INIT;
  cli_progress pr = {.name = "viz", .tty = -1};
  vo.max_input_bytes = cap;
  vo.progress = cli_progress_fn;
  vo.progress_user = &pr;
  char *doc = NULL;
  tcuda_status st = tcuda_viz_file(in, &vo, &doc);
  cli_progress_done(&pr);
  if (st) return fail("%s%s", cli_lib_message(), "");
  char nonce[33];
  if (cli_make_nonce(nonce)) {
    tcuda_string_free(doc);
    return fail("%s%s", "cannot read /dev/urandom for the page's script nonce", "");
  }
  const char *tpl = tcuda_viz_html;
  const char *m = strstr(tpl, "@@DATA@@");
  if (!m || !strstr(tpl, "@@NONCE@@")) {
    tcuda_string_free(doc);
    return fail("%s%s", "the embedded viewer page is damaged (markers missing)", "");
  }
  tc_outfile of = {0}; /* -o: a temporary, renamed once complete: a failed write leaves no truncated page */
  if (out && tc_outfile_open(&of, out)) {
    tcuda_string_free(doc);
    return fail("cannot write '%s': %s", out, strerror(errno));
  }
  FILE *o = out ? of.f : stdout;
  put_nonced(o, tpl, m, nonce);
  /* '<', '>' and '&' occur only inside JSON strings, where \u003c etc.
   * mean the same: no text from the snapshot can end the script element */
  size_t size = 0;
  for (const char *p = doc; *p; p++, size++) {
    if (*p == '<') fputs("\\u003c", o);
    else if (*p == '>') fputs("\\u003e", o);
    else if (*p == '&') fputs("\\u0026", o);
    else fputc(*p, o);
  }
  put_nonced(o, m + 8, tpl + strlen(tpl), nonce);
  tcuda_string_free(doc);
  int bad = out ? tc_outfile_commit(&of) != 0 : (fflush(o) != 0 || ferror(o));
  if (bad) return fail("writing '%s' failed: %s", out ? out : "stdout", strerror(errno));
  if (out)
    fprintf(stderr, "tcuda viz: wrote %s (from a %s snapshot of %zu bytes; %zu bytes of data)\n", out, format, n, size);
  return 0;
}
