/* bench_frag's trace reader: a file through the project's trace parser,
 * every error naming the file and line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frag.h"
#include "replay/trace.h"

void frag_trace_free(ftrace *t) {
  free(t->ops);
  memset(t, 0, sizeof *t);
}

const char *frag_skip_blank(const char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\r') s++;
  return s;
}

int frag_trace_parse(const char *path, ftrace *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  size_t r;
  while (buf && (r = fread(buf + len, 1, cap - len, f)) > 0) {
    len += r;
    if (len == cap) {
      char *nb = realloc(buf, 2 * cap + 1);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
  }
  int rerr = ferror(f);
  fclose(f);
  if (!buf || rerr) {
    snprintf(err, errlen, "%s: %s", path, buf ? "read error" : "out of host memory");
    free(buf);
    return -1;
  }
  buf[len] = 0;
  if (memchr(buf, 0, len)) {
    snprintf(err, errlen, "%s: binary data, not a trace", path);
    free(buf);
    return -1;
  }
  /* the project's own parser (src/replay/trace.h), which tcuda replay
   * uses: its message names the line; here the file comes first */
  tc_trace tr;
  tcuda_status st = tc_trace_parse(buf, len, &tr);
  free(buf);
  if (st) {
    const char *msg = tcuda_last_error();
    if (!strncmp(msg, "trace ", 6)) snprintf(err, errlen, "%s %s", path, msg + 6);
    else snprintf(err, errlen, "%s: %s", path, msg);
    return -1;
  }
  t->ops = malloc((tr.num_ops ? tr.num_ops : 1) * sizeof *t->ops);
  if (!t->ops) {
    tc_trace_free(&tr);
    snprintf(err, errlen, "%s: out of host memory", path);
    return -1;
  }
  for (size_t i = 0; i < tr.num_ops; i++) {
    const tc_trace_op *o = &tr.ops[i];
    if (o->kind == 'a') t->ops[t->n++] = (fop){o->size, (uint32_t)o->slot, (uint16_t)o->stream, OP_ALLOC};
    else if (o->kind == 'f') t->ops[t->n++] = (fop){0, (uint32_t)o->slot, 0, OP_FREE};
    else if (o->kind == 'e') t->ops[t->n++] = (fop){0, 0, 0, OP_EMPTY};
  }
  t->nslots = (uint32_t)tr.num_slots;
  t->nstreams = (int)tr.max_stream + 1;
  tc_trace_free(&tr);
  return 0;
}
