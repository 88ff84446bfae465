/* bench_frag's trace reader: the format of tests/data/torch/README.md, every
 * error naming the file and line. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frag.h"

#define SIZE_MAX_TRACE (UINT64_MAX - 2097152ull) /* larger overflows the allocator's rounding */

void frag_trace_free(ftrace *t) {
  free(t->ops);
  memset(t, 0, sizeof *t);
}

/* decimal or 0x hex; the token must end at a blank, a '#' or the line's end */
static int parse_u64(const char **p, uint64_t *out) {
  const char *s = *p;
  unsigned base = 10;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s += 2;
  }
  uint64_t v = 0;
  int nd = 0;
  for (;; s++, nd++) {
    unsigned d;
    if (*s >= '0' && *s <= '9')
      d = (unsigned)(*s - '0');
    else if (base == 16 && isxdigit((unsigned char)*s))
      d = (unsigned)(tolower((unsigned char)*s) - 'a' + 10);
    else
      break;
    if (v > (UINT64_MAX - d) / base) return -1;
    v = v * base + d;
  }
  if (!nd || !(*s == 0 || *s == ' ' || *s == '\t' || *s == '\r' || *s == '#')) return -1;
  *p = s;
  *out = v;
  return 0;
}

const char *frag_skip_blank(const char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\r') s++;
  return s;
}

/* id -> slot of a live allocation; open addressing, deleted entries kept as
 * tombstones (the table is sized for every allocation of the trace). */
typedef struct idmap {
  uint64_t *key;
  uint32_t *slot;
  uint8_t *state; /* 0 empty, 1 live, 2 deleted */
  size_t mask;
} idmap;

static size_t id_hash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return (size_t)k;
}

/* the live entry for k, or (insert != 0) the first free place for it */
static long idmap_find(const idmap *m, uint64_t k, int insert) {
  long tomb = -1;
  for (size_t i = id_hash(k) & m->mask;; i = (i + 1) & m->mask) {
    if (m->state[i] == 0) return insert ? (tomb >= 0 ? tomb : (long)i) : -1;
    if (m->state[i] == 2) {
      if (tomb < 0) tomb = (long)i;
    } else if (m->key[i] == k) {
      return insert ? -2 : (long)i;
    }
  }
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
  size_t nlines = 1;
  for (size_t i = 0; i < len; i++) nlines += buf[i] == '\n';
  size_t hcap = 16;
  while (hcap < 2 * nlines) hcap *= 2;
  idmap m = {calloc(hcap, sizeof *m.key), calloc(hcap, sizeof *m.slot), calloc(hcap, 1), hcap - 1};
  t->ops = malloc(nlines * sizeof *t->ops);
  int rc = -1;
  if (!m.key || !m.slot || !m.state || !t->ops) {
    snprintf(err, errlen, "%s: out of host memory", path);
    goto done;
  }
  unsigned lineno = 0;
  for (char *line = buf; line; ) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    lineno++;
    const char *s = frag_skip_blank(line);
    char c = *s;
    line = nl ? nl + 1 : NULL;
    if (c == 0 || c == '#') continue;
    s++;
    if (*s && *s != ' ' && *s != '\t' && *s != '\r' && *s != '#') c = '?';
    uint64_t id = 0, size = 0, stream = 0;
    fop op = {0};
    switch (c) {
    case 'a':
      s = frag_skip_blank(s);
      if (parse_u64(&s, &id) || (s = frag_skip_blank(s), parse_u64(&s, &size))) {
        snprintf(err, errlen, "%s line %u: expected 'a ID SIZE [STREAM]'", path, lineno);
        goto done;
      }
      s = frag_skip_blank(s);
      if (*s && *s != '#' && parse_u64(&s, &stream)) {
        snprintf(err, errlen, "%s line %u: bad STREAM", path, lineno);
        goto done;
      }
      if (size > SIZE_MAX_TRACE) {
        snprintf(err, errlen, "%s line %u: SIZE above 2^64 - 2 MiB - 1", path, lineno);
        goto done;
      }
      if (stream > FRAG_MAX_STREAM) {
        snprintf(err, errlen, "%s line %u: STREAM above %d", path, lineno, FRAG_MAX_STREAM);
        goto done;
      }
      long at = idmap_find(&m, id, 1);
      if (at == -2) {
        snprintf(err, errlen, "%s line %u: id %llu is already live", path, lineno, (unsigned long long)id);
        goto done;
      }
      m.key[at] = id;
      m.state[at] = 1;
      m.slot[at] = t->nslots;
      op = (fop){size, t->nslots++, (uint16_t)stream, OP_ALLOC};
      if ((int)stream + 1 > t->nstreams) t->nstreams = (int)stream + 1;
      break;
    case 'f': {
      s = frag_skip_blank(s);
      if (parse_u64(&s, &id)) {
        snprintf(err, errlen, "%s line %u: expected 'f ID'", path, lineno);
        goto done;
      }
      long i = idmap_find(&m, id, 0);
      if (i < 0) {
        snprintf(err, errlen, "%s line %u: free of unknown id %llu", path, lineno, (unsigned long long)id);
        goto done;
      }
      m.state[i] = 2;
      op = (fop){0, m.slot[i], 0, OP_FREE};
      break;
    }
    case 'e': op.kind = OP_EMPTY; break;
    case 'c':
    case 'r': break;
    default:
      snprintf(err, errlen, "%s line %u: unknown op (want a, f, c, e or r)", path, lineno);
      goto done;
    }
    s = frag_skip_blank(s);
    if (*s && *s != '#') {
      snprintf(err, errlen, "%s line %u: extra text after the op", path, lineno);
      goto done;
    }
    if (op.kind) t->ops[t->n++] = op;
  }
  if (t->nstreams == 0) t->nstreams = 1;
  rc = 0;
done:
  free(m.key);
  free(m.slot);
  free(m.state);
  free(buf);
  if (rc) frag_trace_free(t);
  return rc;
}
