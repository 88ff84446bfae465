/* gzip (RFC 1952) over DEFLATE (RFC 1951), decoded under a cap on the
 * output, for snapshots saved as .pickle.gz. Written here rather than linked
 * from zlib so that a build needs nothing more, and so the cap is checked
 * before each byte is written: a small file that expands without end (a
 * "gzip bomb") stops at the cap, having cost at most cap bytes of work. */
#include "readfile.h"
#include "core/error.h"
#include <stdlib.h>
#include <string.h>

#define MAXBITS 15
#define MAXLCODES 286
#define MAXDCODES 30
#define FIXLCODES 288

typedef struct {
  const unsigned char *in;
  size_t n, pos;
  uint32_t bitbuf;
  int bitcnt;
  unsigned char *out;
  size_t len, room;
  uint64_t cap;
  int err; /* 0, or one of the E_ codes below */
} state;

enum { E_OK = 0, E_TRUNC, E_BAD, E_CAP, E_OOM };

static int need_room(state *s, size_t more) {
  if (more > s->cap || s->len > s->cap - more) { s->err = E_CAP; return 0; }
  if (s->len + more <= s->room) return 1;
  size_t want = s->room ? s->room : 1 << 16;
  while (want < s->len + more) want = want > SIZE_MAX / 2 ? SIZE_MAX - 1 : want * 2;
  if ((uint64_t)want > s->cap) want = (size_t)s->cap;
  unsigned char *p = realloc(s->out, want + 1); /* +1: the caller's NUL */
  if (!p) { s->err = E_OOM; return 0; }
  s->out = p;
  s->room = want;
  return 1;
}

static int bits(state *s, int need) {
  uint32_t v = s->bitbuf;
  while (s->bitcnt < need) {
    if (s->pos == s->n) { s->err = E_TRUNC; return 0; }
    v |= (uint32_t)s->in[s->pos++] << s->bitcnt;
    s->bitcnt += 8;
  }
  s->bitbuf = v >> need;
  s->bitcnt -= need;
  return (int)(v & ((1u << need) - 1));
}

/* A canonical Huffman code: how many codes of each length, and the symbols
 * in code order. */
typedef struct {
  short count[MAXBITS + 1];
  short symbol[FIXLCODES];
} huff;

static int decode(state *s, const huff *h) {
  int code = 0, first = 0, index = 0;
  for (int len = 1; len <= MAXBITS; len++) {
    code |= bits(s, 1);
    if (s->err) return -1;
    int count = h->count[len];
    if (code - count < first) return h->symbol[index + (code - first)];
    index += count;
    first = (first + count) << 1;
    code <<= 1;
  }
  s->err = E_BAD; /* ran off the end of the code */
  return -1;
}

/* Builds h from n code lengths. Returns <0 for an over-subscribed set,
 * 0 for complete, >0 for incomplete. */
static int build(huff *h, const short *length, int n) {
  short offs[MAXBITS + 1];
  memset(h->count, 0, sizeof h->count);
  for (int i = 0; i < n; i++) h->count[length[i]]++;
  if (h->count[0] == n) return 0;
  int left = 1;
  for (int len = 1; len <= MAXBITS; len++) {
    left <<= 1;
    left -= h->count[len];
    if (left < 0) return left;
  }
  offs[1] = 0;
  for (int len = 1; len < MAXBITS; len++) offs[len + 1] = (short)(offs[len] + h->count[len]);
  for (int i = 0; i < n; i++)
    if (length[i]) h->symbol[offs[length[i]]++] = (short)i;
  return left;
}

static const short lbase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const short lext[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const short dbase[30] = {1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
                                193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const short dext[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

static int codes(state *s, const huff *lc, const huff *dc) {
  for (;;) {
    int sym = decode(s, lc);
    if (sym < 0) return 0;
    if (sym < 256) {
      if (!need_room(s, 1)) return 0;
      s->out[s->len++] = (unsigned char)sym;
    } else if (sym == 256) {
      return 1;
    } else {
      sym -= 257;
      if (sym >= 29) { s->err = E_BAD; return 0; }
      int len = lbase[sym] + bits(s, lext[sym]);
      int d = decode(s, dc);
      if (s->err) return 0;
      if (d < 0 || d >= 30) { s->err = E_BAD; return 0; }
      size_t dist = (size_t)(dbase[d] + bits(s, dext[d]));
      if (s->err) return 0;
      if (dist > s->len) { s->err = E_BAD; return 0; } /* before the start of this file's output */
      if (!need_room(s, (size_t)len)) return 0;
      for (int i = 0; i < len; i++, s->len++) s->out[s->len] = s->out[s->len - dist]; /* may overlap */
    }
  }
}

static int stored(state *s) {
  s->bitbuf = 0;
  s->bitcnt = 0; /* to a byte boundary */
  if (s->n - s->pos < 4) { s->err = E_TRUNC; return 0; }
  unsigned len = s->in[s->pos] | (unsigned)s->in[s->pos + 1] << 8;
  unsigned nlen = s->in[s->pos + 2] | (unsigned)s->in[s->pos + 3] << 8;
  s->pos += 4;
  if (len != (~nlen & 0xffffu)) { s->err = E_BAD; return 0; }
  if (s->n - s->pos < len) { s->err = E_TRUNC; return 0; }
  if (!need_room(s, len)) return 0;
  if (len) memcpy(s->out + s->len, s->in + s->pos, len); /* out is still NULL before any byte */
  s->len += len;
  s->pos += len;
  return 1;
}

static int fixed(state *s) {
  huff l, d; /* the same every time; building them per block is cheap */
  short lengths[FIXLCODES];
  int i = 0;
  for (; i < 144; i++) lengths[i] = 8;
  for (; i < 256; i++) lengths[i] = 9;
  for (; i < 280; i++) lengths[i] = 7;
  for (; i < FIXLCODES; i++) lengths[i] = 8;
  build(&l, lengths, FIXLCODES);
  for (i = 0; i < MAXDCODES; i++) lengths[i] = 5;
  build(&d, lengths, MAXDCODES);
  return codes(s, &l, &d);
}

static int dynamic(state *s) {
  static const short order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
  short lengths[MAXLCODES + MAXDCODES];
  huff lc, dc;
  int nlen = bits(s, 5) + 257, ndist = bits(s, 5) + 1, ncode = bits(s, 4) + 4;
  if (s->err) return 0;
  if (nlen > MAXLCODES || ndist > MAXDCODES) { s->err = E_BAD; return 0; }
  int i = 0;
  for (; i < ncode; i++) lengths[order[i]] = (short)bits(s, 3);
  for (; i < 19; i++) lengths[order[i]] = 0;
  if (s->err) return 0;
  if (build(&lc, lengths, 19) != 0) { s->err = E_BAD; return 0; } /* the code-length code must be complete */
  for (i = 0; i < nlen + ndist;) {
    int sym = decode(s, &lc);
    if (sym < 0) return 0;
    if (sym < 16) {
      lengths[i++] = (short)sym;
      continue;
    }
    short len = 0;
    int rep;
    if (sym == 16) {
      if (i == 0) { s->err = E_BAD; return 0; }
      len = lengths[i - 1];
      rep = 3 + bits(s, 2);
    } else if (sym == 17) {
      rep = 3 + bits(s, 3);
    } else {
      rep = 11 + bits(s, 7);
    }
    if (s->err) return 0;
    if (i + rep > nlen + ndist) { s->err = E_BAD; return 0; }
    while (rep--) lengths[i++] = len;
  }
  if (lengths[256] == 0) { s->err = E_BAD; return 0; } /* no end-of-block code */
  int err = build(&lc, lengths, nlen);
  if (err < 0 || (err > 0 && nlen - lc.count[0] != 1)) { s->err = E_BAD; return 0; }
  err = build(&dc, lengths + nlen, ndist);
  if (err < 0 || (err > 0 && ndist - dc.count[0] != 1)) { s->err = E_BAD; return 0; }
  return codes(s, &lc, &dc);
}

static uint32_t crc32_of(const unsigned char *p, size_t n) {
  uint32_t table[256];
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

static uint32_t le32(const unsigned char *p) {
  return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* One member's header; 0 and s->err set when it is not one. */
static int header(state *s) {
  const unsigned char *p = s->in;
  size_t n = s->n, i = s->pos;
  if (n - i < 10 || p[i] != 0x1f || p[i + 1] != 0x8b) { s->err = E_BAD; return 0; }
  if (p[i + 2] != 8 || (p[i + 3] & 0xe0)) { s->err = E_BAD; return 0; } /* deflate, no reserved flags */
  int flg = p[i + 3];
  i += 10;
  if (flg & 4) { /* FEXTRA */
    if (n - i < 2) { s->err = E_TRUNC; return 0; }
    size_t xlen = p[i] | (size_t)p[i + 1] << 8;
    i += 2;
    if (n - i < xlen) { s->err = E_TRUNC; return 0; }
    i += xlen;
  }
  for (int f = 8; f <= 16; f <<= 1) { /* FNAME, FCOMMENT: NUL-terminated */
    if (!(flg & f)) continue;
    while (i < n && p[i]) i++;
    if (i == n) { s->err = E_TRUNC; return 0; }
    i++;
  }
  if (flg & 2) { /* FHCRC */
    if (n - i < 2) { s->err = E_TRUNC; return 0; }
    i += 2;
  }
  s->pos = i;
  return 1;
}

int tc_is_gzip(const void *data, size_t len) {
  const unsigned char *p = data;
  return len >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

tcuda_status tc_gunzip(const char *where, const void *data, size_t len, uint64_t cap, char **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  if (!cap) cap = TC_READ_MAX_DEFAULT;
  if (cap > SIZE_MAX - 1) cap = SIZE_MAX - 1;
  state s = {.in = data, .n = len, .cap = cap};
  do { /* members, one after another (RFC 1952 2.2) */
    size_t start = s.len;
    if (!header(&s)) break;
    s.bitbuf = 0;
    s.bitcnt = 0;
    int last;
    do {
      last = bits(&s, 1);
      int type = bits(&s, 2);
      if (s.err) break;
      if (type == 0) stored(&s);
      else if (type == 1) fixed(&s);
      else if (type == 2) dynamic(&s);
      else s.err = E_BAD;
    } while (!s.err && !last);
    if (s.err) break;
    if (s.n - s.pos < 8) { s.err = E_TRUNC; break; }
    if (le32(s.in + s.pos) != crc32_of(s.out ? s.out + start : NULL, s.len - start) ||
        le32(s.in + s.pos + 4) != (uint32_t)(s.len - start)) {
      s.err = E_BAD;
      break;
    }
    s.pos += 8;
  } while (s.pos < s.n && tc_is_gzip(s.in + s.pos, s.n - s.pos));
  tcuda_status st = TCUDA_SUCCESS;
  switch (s.err) {
  case E_OK: break;
  case E_TRUNC: st = tc_error(TCUDA_ERROR_PARSE, "%s: gzip data ends early (a truncated .gz file?)", where); break;
  case E_BAD: st = tc_error(TCUDA_ERROR_PARSE, "%s: not valid gzip data (bad header, block or checksum)", where); break;
  case E_CAP:
    st = tc_error(TCUDA_ERROR_IO,
                  "%s: larger than the input cap of %llu bytes once decompressed (max_input_bytes, --max-input "
                  "raises it)",
                  where, (unsigned long long)cap);
    break;
  default:
    st = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: host out of memory decompressing (%zu bytes so far)", where,
                  s.len);
  }
  if (st) {
    free(s.out);
    return st;
  }
  if (!s.out && !(s.out = malloc(1))) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: host out of memory", where);
  s.out[s.len] = 0;
  *out = (char *)s.out;
  *out_len = s.len;
  return TCUDA_SUCCESS;
}
