/* tcuda viz: one self-contained HTML page (no network) from a snapshot
 * written by tcuda (pickle or JSON) or by torch.cuda.memory._dump_snapshot.
 * The page (tools/viz/viewer.html, embedded at build time) decodes the
 * snapshot itself, so the CLI only wraps the bytes. */
#include "cli.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

extern const char tcuda_viz_html[];
extern const unsigned long tcuda_viz_html_len;

static const char *USAGE =
    "usage: tcuda viz SNAPSHOT [-o REPORT.html]\n"
    "  SNAPSHOT: a pickle (tcuda_memory_snapshot_dump, tcuda replay --history, or torch's\n"
    "            _dump_snapshot) or its JSON form. Without -o the page goes to stdout.\n";

static int fail(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "tcuda viz: ");
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
  return 1;
}

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *p = malloc(cap);
  while (p) {
    if (n == cap) {
      char *q = realloc(p, cap *= 2);
      if (!q) { free(p); p = NULL; break; }
      p = q;
    }
    size_t r = fread(p + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
  }
  if (p && ferror(f)) { free(p); p = NULL; errno = EIO; }
  fclose(f);
  *len = n;
  return p;
}

static void put_base64(FILE *o, const unsigned char *s, size_t n) {
  static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
    char c[4] = {t[v >> 18 & 63], t[v >> 12 & 63], i + 1 < n ? t[v >> 6 & 63] : '=', i + 2 < n ? t[v & 63] : '='};
    fwrite(c, 1, 4, o);
    if (i % 57 == 54) fputc('\n', o);
  }
}

int cmd_viz(int argc, char **argv) {
  const char *in = NULL, *out = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { fputs(USAGE, stdout); return 0; }
    if (!strcmp(argv[i], "-o")) {
      if (i + 1 >= argc) { fprintf(stderr, "tcuda viz: -o needs a file name\n%s", USAGE); return 2; }
      out = argv[++i];
      continue;
    }
    if (argv[i][0] == '-' && argv[i][1]) { fprintf(stderr, "tcuda viz: unknown option '%s'\n%s", argv[i], USAGE); return 2; }
    if (in) { fprintf(stderr, "tcuda viz: more than one snapshot ('%s')\n%s", argv[i], USAGE); return 2; }
    in = argv[i];
  }
  if (!in) { fprintf(stderr, "tcuda viz: no snapshot given\n%s", USAGE); return 2; }
  size_t n = 0;
  char *data = read_all(in, &n);
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
  const char *tpl = tcuda_viz_html;
  const char *m1 = strstr(tpl, "@@FORMAT@@"), *m2 = m1 ? strstr(m1, "@@DATA@@") : NULL;
  if (!m1 || !m2) {
    free(data);
    return fail("%s%s", "the embedded viewer page is damaged (markers missing)", "");
  }
  FILE *o = out ? fopen(out, "wb") : stdout;
  if (!o) {
    free(data);
    return fail("cannot write '%s': %s", out, strerror(errno));
  }
  fwrite(tpl, 1, (size_t)(m1 - tpl), o);
  fputs(format, o);
  fwrite(m1 + 10, 1, (size_t)(m2 - (m1 + 10)), o);
  if (format[0] == 'p') {
    put_base64(o, (const unsigned char *)data, n);
  } else {
    /* '<' only occurs inside JSON strings, where \u003c means the same and
     * cannot end the script element */
    for (size_t i = 0; i < n; i++) {
      if (data[i] == '<') fputs("\\u003c", o);
      else fputc(data[i], o);
    }
  }
  fputs(m2 + 8, o);
  free(data);
  int bad = ferror(o) != 0;
  if (out) bad |= fclose(o) != 0;
  else bad |= fflush(o) != 0;
  if (bad) return fail("writing '%s' failed: %s", out ? out : "stdout", strerror(errno));
  if (out) fprintf(stderr, "tcuda viz: wrote %s (%s snapshot, %zu bytes)\n", out, format, n);
  return 0;
}
