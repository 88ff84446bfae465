/* What holds the memory, as text: the "explain" object of a whatif
 * document (docs/whatif.md, "What holds the memory"), printed by `tcuda whatif` and
 * `tcuda compare`. */
#include "cli.h"
#include "cli_json.h"
#include <string.h>

const char *cli_bytes(unsigned long long b, char *buf, size_t n) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (b < 1024) { snprintf(buf, n, "%llu B", b); return buf; }
  double v = (double)b / 1024;
  int u = 0;
  while (v >= 1024 && u < 4) { v /= 1024; u++; }
  snprintf(buf, n, "%.1f %s", v, units[u]);
  return buf;
}

void cli_holder_key(FILE *o, const jv *h, int stacks_recorded) {
  const char *kind = jv_str(jv_get(h, "stack"));
  const jv *fr = jv_get(h, "frames");
  if (!strcmp(kind, "none")) {
    fputs(stacks_recorded ? "(no Python frames: allocated outside Python, as on autograd's backward thread)"
                          : "(no stack recorded)",
          o);
    return;
  }
  if (!strcmp(kind, "before_window")) { fputs("(allocated before the history's window)", o); return; }
  char b[600];
  for (size_t i = 0; fr && fr->kind == 'a' && i < fr->n; i++)
    fprintf(o, "%s%s", i ? " < " : "", cli_shown(jv_str(&fr->items[i]), b, sizeof b));
}

void cli_frames_print(FILE *o, const char *indent, const jv *frames) {
  char b[600];
  for (size_t i = 0; frames && frames->kind == 'a' && i < frames->n; i++)
    fprintf(o, "%s%s\n", indent, cli_shown(jv_str(&frames->items[i]), b, sizeof b));
}

static void put_instant(FILE *o, const char *what, const jv *in, int top, int rec) {
  char b1[64], b2[64], b3[64], b4[64];
  unsigned long long res = jv_u64(jv_get(in, "reserved")), al = jv_u64(jv_get(in, "allocated"));
  const jv *rq = jv_get(in, "request"), *sp = jv_get(in, "inactive_split"), *fs = jv_get(in, "free_segments");
  fprintf(o, "%s", what);
  if (jv_is_num(rq)) fprintf(o, " (request #%llu, %.3f s)", jv_u64(rq), jv_num(jv_get(in, "time_ms")) / 1000);
  fprintf(o, ": reserved %s = allocated %s (%.1f%%) + cached free %s (%.1f%%)", cli_bytes(res, b1, sizeof b1),
          cli_bytes(al, b2, sizeof b2), res ? 100.0 * (double)al / (double)res : 0.0,
          cli_bytes(jv_u64(jv_get(in, "cached_free")), b3, sizeof b3), 100.0 * jv_num(jv_get(in, "cached_share")));
  if (jv_u64(jv_get(in, "pending_free")))
    fprintf(o, " + waiting on streams %s", cli_bytes(jv_u64(jv_get(in, "pending_free")), b4, sizeof b4));
  fprintf(o, "\n  cached free: %s in %llu inactive split blocks, %s in %llu whole free segments\n",
          cli_bytes(jv_u64(jv_get(sp, "bytes")), b1, sizeof b1), jv_u64(jv_get(sp, "blocks")),
          cli_bytes(jv_u64(jv_get(fs, "bytes")), b2, sizeof b2), jv_u64(jv_get(fs, "segments")));
  const jv *hs = jv_get(in, "holders");
  size_t n = hs && hs->kind == 'a' ? hs->n : 0;
  if (!n) return;
  fprintf(o, "  %10s  %6s  %6s  allocated at\n", "bytes", "share", "blocks");
  unsigned long long rest = 0;
  for (size_t i = 0; i < n; i++) {
    const jv *h = &hs->items[i];
    if ((int)i >= top) { rest += jv_u64(jv_get(h, "bytes")); continue; }
    fprintf(o, "  %10s  %5.1f%%  %6llu  ", cli_bytes(jv_u64(jv_get(h, "bytes")), b1, sizeof b1),
            100.0 * jv_num(jv_get(h, "share")), jv_u64(jv_get(h, "blocks")));
    cli_holder_key(o, h, rec);
    fputc('\n', o);
  }
  if (n > (size_t)top)
    fprintf(o, "  ... %zu more stacks hold %s (--top N shows more, --json all)\n", n - (size_t)top,
            cli_bytes(rest, b1, sizeof b1));
}

int cli_stacks_recorded(const jv *explain) {
  const jv *r = explain ? jv_get(explain, "stacks_recorded") : NULL;
  return r && r->kind == 't';
}

void cli_explain_print(FILE *o, const jv *ex, int top) {
  if (!ex || ex->kind != 'o') return;
  char b[600];
  fputs("\nwhat holds the memory (the recorded config, replayed):\n", o);
  const jv *pr = jv_get(ex, "peak_reserved"), *pa = jv_get(ex, "peak_allocated"), *fo = jv_get(ex, "first_oom");
  int rec = cli_stacks_recorded(ex);
  if (pr && pr->kind == 'o') put_instant(o, "at peak reserved", pr, top, rec);
  if (pa && pa->kind == 'o') put_instant(o, "at peak allocated", pa, top, rec);
  if (fo && fo->kind == 'o') {
    const jv *st = jv_get(fo, "state"), *stack = jv_get(fo, "stack");
    char what[160], b1[64];
    snprintf(what, sizeof what, "at the first OOM (%s asked%s)", cli_bytes(jv_u64(jv_get(fo, "size")), b1, sizeof b1),
             jv_get(fo, "survived_by_library") && jv_get(fo, "survived_by_library")->kind == 't'
                 ? ", a library's workspace try it survived" : "");
    if (st && st->kind == 'o') put_instant(o, what, st, top, rec);
    if (stack && stack->kind == 'a' && stack->n) {
      fputs("  first OOM's stack (user frames, innermost first):\n", o);
      cli_frames_print(o, "    ", stack);
    } else {
      fputs("  first OOM's stack: not recorded\n", o);
    }
  }
  const jv *how = jv_get(ex, "how_to_record");
  if (how && how->kind == 's') fprintf(o, "stacks: %s\n", cli_shown(jv_str(how), b, sizeof b));
}
