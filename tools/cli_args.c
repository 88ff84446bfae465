/* The options convention of every subcommand (cli.h): getopt_long, value
 * parsers whose messages name what was typed, and the allocator config a
 * replay takes from --config or the environment. */
#include "cli.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void vmsg(const cli_cmd *c, const char *fmt, va_list ap) {
  fprintf(stderr, "tcuda %s: ", c->name);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

int cli_usage_error(const cli_cmd *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmsg(c, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s(tcuda %s --help for more)\n", c->synopsis, c->name);
  return CLI_USAGE;
}

const char *cli_lib_message(void) {
  const char *m = tcuda_last_error(), *p = m;
  if (strncmp(m, "tcuda_", 6)) return m;
  while (*p == '_' || isalnum((unsigned char)*p)) p++;
  return p[0] == ':' && p[1] == ' ' ? p + 2 : m;
}

int cli_error(const cli_cmd *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmsg(c, fmt, ap);
  va_end(ap);
  return CLI_FAIL;
}

/* What the user typed, for a message: control bytes (terminal escapes) as
 * \xNN, long text cut. */
const char *cli_shown(const char *s, char *buf, size_t n) {
  size_t k = 0;
  for (; *s && k + 5 < n; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch < 0x20 || ch == 0x7f) k += (size_t)snprintf(buf + k, n - k, "\\x%02x", ch);
    else buf[k++] = (char)ch;
  }
  if (*s && n > 4) strcpy(buf + (k < n - 4 ? k : n - 4), "...");
  else buf[k] = 0;
  return buf;
}

int cli_getopt(const cli_cmd *c, int argc, char **argv, const char *shortopts, const struct option *longopts,
               int *rc) {
  char opts[64];
  snprintf(opts, sizeof opts, ":%s", shortopts); /* ':' reports a missing value as ':' */
  opterr = 0;
  int prev = optind, ch = getopt_long(argc, argv, opts, longopts, NULL);
  char b[128];
  /* the element that held the bad option: getopt has moved past it */
  const char *typed = optind > prev && optind - 1 < argc ? argv[optind - 1] : "?";
  switch (ch) {
  case 'h':
    fputs(c->synopsis, stdout);
    fputs(c->details, stdout);
    *rc = fflush(stdout) ? CLI_FAIL : CLI_OK;
    return CLI_DONE;
  case '?':
    if (optopt && typed[0] == '-' && typed[1] == '-' && strchr(cli_shown(typed, b, sizeof b), '='))
      *rc = cli_usage_error(c, "option '%.*s' takes no value", (int)(strchr(b, '=') - b), b);
    else if (optopt && optopt < 256 && typed[0] == '-' && typed[1] != '-')
      *rc = cli_usage_error(c, "unknown option '-%c'", optopt);
    else
      *rc = cli_usage_error(c, "unknown option '%s'", cli_shown(typed, b, sizeof b));
    return CLI_DONE;
  case ':':
    *rc = cli_usage_error(c, "option '%s' needs a value", cli_shown(typed, b, sizeof b));
    return CLI_DONE;
  default: return ch;
  }
}

int cli_operands(const cli_cmd *c, int argc, char **argv, int max) {
  int n = argc - optind;
  if (n > max) {
    char b[128];
    if (max == 0) cli_usage_error(c, "unexpected argument '%s'", cli_shown(argv[optind], b, sizeof b));
    else cli_usage_error(c, "unexpected argument '%s' (more than %d)", cli_shown(argv[optind + max], b, sizeof b), max);
    return -1;
  }
  return n;
}

/* ---- numbers ---- */

/* Decimal or 0x hex, no sign, the whole string. */
static int scan_u64(const char *s, uint64_t *v) {
  if (!*s || !isdigit((unsigned char)*s)) return 0;
  int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  if (hex && !isxdigit((unsigned char)s[2])) return 0;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(s, &end, hex ? 16 : 10);
  if (errno || *end) return 0;
  *v = x;
  return 1;
}

int cli_parse_u64(const cli_cmd *c, const char *opt, const char *s, uint64_t *v) {
  char b[128];
  if (scan_u64(s, v)) return 1;
  if (*s == '-' && scan_u64(s + 1, v))
    cli_usage_error(c, "%s %s: must be 0 or more", opt, cli_shown(s, b, sizeof b));
  else
    cli_usage_error(c, "%s '%s' is not an integer (decimal or 0x hex, 0 to 2^64-1)", opt, cli_shown(s, b, sizeof b));
  return 0;
}

int cli_parse_i64(const cli_cmd *c, const char *opt, const char *s, int64_t *v) {
  char b[128], *end;
  errno = 0;
  long long x = (*s == '-' || *s == '+' || isdigit((unsigned char)*s)) ? strtoll(s, &end, 10) : 0;
  if (!(*s == '-' || *s == '+' || isdigit((unsigned char)*s)) || errno || end == s || *end) {
    cli_usage_error(c, "%s '%s' is not an integer (-2^63 to 2^63-1)", opt, cli_shown(s, b, sizeof b));
    return 0;
  }
  *v = x;
  return 1;
}

int cli_parse_f64(const cli_cmd *c, const char *opt, const char *s, double *v) {
  char b[128], *end;
  errno = 0;
  double x = *s ? strtod(s, &end) : 0;
  if (!*s || errno == ERANGE || *end) {
    cli_usage_error(c, "%s '%s' is not a number", opt, cli_shown(s, b, sizeof b));
    return 0;
  }
  *v = x;
  return 1;
}

int cli_parse_whole(const cli_cmd *c, const char *opt, const char *s, const char *noun, uint64_t min, uint64_t max,
                    uint64_t *v) {
  char b[128];
  uint64_t x;
  if (*s == '-' || *s == '+' || !scan_u64(s, &x)) {
    const char *t = cli_shown(s, b, sizeof b);
    if ((*s == '-' || *s == '+') && scan_u64(s + 1, &x))
      cli_usage_error(c, "%s %s is not a valid %s: expected a whole number from %llu to %llu", opt, t, noun,
                      (unsigned long long)min, (unsigned long long)max);
    else
      cli_usage_error(c, "%s '%s' is not an integer (a %s, %llu to %llu)", opt, t, noun, (unsigned long long)min,
                      (unsigned long long)max);
    return 0;
  }
  if (x < min || x > max) {
    cli_usage_error(c, "%s %s is not a valid %s: %s %llu", opt, s, noun, x < min ? "at least" : "at most",
                    (unsigned long long)(x < min ? min : max));
    return 0;
  }
  *v = x;
  return 1;
}

int cli_parse_bytes(const cli_cmd *c, const char *opt, const char *s, uint64_t *v) {
  /* the library's parser, which Python's size arguments share */
  if (tcuda_size_parse(s, v) == TCUDA_SUCCESS) return 1;
  const char *m = tcuda_last_error(), *pre = "tcuda_size_parse: size ";
  if (!strncmp(m, pre, strlen(pre))) m += strlen(pre);
  cli_usage_error(c, "%s %s", opt, m);
  return 0;
}

/* ---- the allocator config of a replay ---- */

int cli_alloc_config(const cli_cmd *c, const char *option_value, const char **conf, int *rc) {
  static const char *const vars[] = {"TCUDA_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"};
  const char *var = NULL, *text = option_value;
  for (size_t k = 0; !text && k < sizeof vars / sizeof *vars; k++)
    if ((text = getenv(vars[k]))) var = vars[k];
  *conf = text;
  if (!text) return 1;
  /* an empty trace on the simulator parses the config and runs nothing */
  tcuda_replay_options_t o = TCUDA_REPLAY_OPTIONS_INIT;
  o.simulate = 1;
  o.config = text;
  char *js = NULL;
  tcuda_status s = tcuda_replay_string("", &o, &js);
  tcuda_string_free(js);
  if (!s) return 1;
  if (s != TCUDA_ERROR_CONFIG) { *rc = cli_fail(c->name); return 0; }
  const char *msg = tcuda_last_error(), *cut = strstr(msg, ": config: ");
  if (cut) msg = cut + strlen(": config: ");
  char b[256], m[512];
  cli_shown(msg, m, sizeof m);
  if (var) *rc = cli_error(c, "%s='%s': %s", var, cli_shown(text, b, sizeof b), m);
  else *rc = cli_usage_error(c, "--config '%s': %s", cli_shown(text, b, sizeof b), m);
  return 0;
}

void cli_print_request_oom(void *user, unsigned request, const char *message) {
  const cli_cmd *c = user;
  char m[1024];
  fprintf(stderr, "tcuda %s: request %u: %s\n", c->name, request, cli_shown(message, m, sizeof m));
}

void cli_print_oom(void *user, unsigned line, const char *message) {
  const cli_cmd *c = user;
  char m[1024];
  fprintf(stderr, "tcuda %s: trace line %u: %s\n", c->name, line, cli_shown(message, m, sizeof m));
}

int cli_parse_fraction(const cli_cmd *c, const char *s, double *v) {
  if (!cli_parse_f64(c, "--fraction", s, v)) return 0;
  if (*v >= 0 && *v <= 1) return 1;
  cli_usage_error(c, "--fraction %s: memory_fraction %s is not in 0~1", s, s);
  return 0;
}

/* A page's Content-Security-Policy allows only the script carrying this
 * nonce; fresh per page, so the data shown cannot know it. */
int cli_make_nonce(char out[33]) {
  unsigned char r[16];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t got = read(fd, r, sizeof r);
  close(fd);
  if (got != (ssize_t)sizeof r) return -1;
  for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", r[i]);
  return 0;
}

char *cli_read_file(const char *path, uint64_t cap, size_t *len) {
  char *data = NULL;
  tcuda_status st = tcuda_input_read(path, cap, &data, len);
  if (st == TCUDA_SUCCESS) return data;
  if (st == TCUDA_ERROR_HOST_OUT_OF_MEMORY) errno = ENOMEM;
  else if (st == TCUDA_ERROR_PARSE) errno = EILSEQ; /* bad gzip data */
  else if (strstr(tcuda_last_error(), "input cap")) errno = EFBIG;
  else if (!errno) errno = EIO; /* errno is still that of the failed open or read */
  return NULL;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void cli_progress_fn(void *user, const char *stage, uint64_t done, uint64_t total) {
  cli_progress *p = user;
  if (p->tty < 0) p->tty = isatty(STDERR_FILENO);
  if (!p->tty) return;
  double t = now_s();
  /* at most ten lines a second, but every stage's start and end */
  if (p->shown && done && done != total && t - p->last < 0.1) return;
  p->last = t;
  if (!total) fprintf(stderr, "\rtcuda %s: %s...\033[K", p->name, stage);
  else if (!strcmp(stage, "read") || !strcmp(stage, "parse"))
    fprintf(stderr, "\rtcuda %s: %s %.1f MB (%3.0f%%)\033[K", p->name, stage, (double)total / 1e6,
            100.0 * (double)done / (double)total);
  else
    fprintf(stderr, "\rtcuda %s: %s %llu/%llu (%3.0f%%)\033[K", p->name, stage, (unsigned long long)done,
            (unsigned long long)total, 100.0 * (double)done / (double)total);
  fflush(stderr);
  p->shown = 1;
}

void cli_progress_done(cli_progress *p) {
  if (p->shown) fputs("\r\033[K", stderr);
  p->shown = 0;
}

/* ---- standard input as a file ---- */

static char g_spool[64];
static void remove_spool(void) {
  if (g_spool[0]) unlink(g_spool);
}

const char *cli_spool_stdin(uint64_t cap) {
  tcuda_clear_error();
  char *data = NULL;
  size_t len = 0;
  if (tcuda_input_read("-", cap, &data, &len)) return NULL;
  const char *dir = getenv("TMPDIR");
  snprintf(g_spool, sizeof g_spool, "%s/tcuda-stdin.XXXXXX", dir && *dir && strlen(dir) < 40 ? dir : "/tmp");
  int fd = mkstemp(g_spool);
  if (fd < 0) {
    g_spool[0] = 0;
    tcuda_string_free(data);
    return NULL;
  }
  atexit(remove_spool);
  size_t done = 0;
  while (done < len) {
    ssize_t w = write(fd, data + done, len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    done += (size_t)w;
  }
  tcuda_string_free(data);
  if (close(fd) || done < len) return NULL;
  return g_spool;
}

int cli_whatif_option(const cli_cmd *c, int ch, const char *v, tcuda_whatif_options_t *o, int *top) {
  uint64_t n;
  switch (ch) {
  case CLI_WO_CAPACITY:
    if (!cli_parse_bytes(c, "--capacity", v, &n)) return -1;
    if (n < (2u << 20)) {
      cli_usage_error(c, "--capacity '%s': under 2 MiB, the allocator's grid", v);
      return -1;
    }
    o->capacity = n;
    return 1;
  case CLI_WO_FRACTION: return cli_parse_fraction(c, v, &o->memory_fraction) ? 1 : -1;
  case CLI_WO_DEVICE:
    if (!cli_parse_whole(c, "--device", v, "device index", 0, 1023, &n)) return -1;
    o->device = (int)n;
    return 1;
  case CLI_WO_MAX_INPUT:
    if (!cli_parse_bytes(c, "--max-input", v, &n)) return -1;
    o->max_input_bytes = n;
    return 1;
  case CLI_WO_WORK_BUDGET:
    if (!cli_parse_whole(c, "--work-budget", v, "work budget", 1, UINT64_MAX, &n)) return -1;
    o->work_budget = n;
    return 1;
  case CLI_WO_TOP:
    if (!cli_parse_whole(c, "--top", v, "count", 1, 1000000, &n)) return -1;
    *top = (int)n;
    return 1;
  default: return 0;
  }
}
