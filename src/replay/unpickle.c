/* A restricted unpickler: the plain data of pickle protocols 2 to 5 into
 * the value tree (pyval.h), from untrusted bytes.
 *
 * Read: PROTO, FRAME, STOP, MARK, POP, POP_MARK, DUP, NONE, NEWTRUE,
 * NEWFALSE, BININT, BININT1, BININT2, LONG1, LONG4 (values that fit in
 * int64), BINFLOAT, SHORT_BINUNICODE, BINUNICODE, BINUNICODE8 (valid UTF-8
 * only), SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8 (as bytes),
 * EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE, DICT, LIST, TUPLE, TUPLE1-3, APPEND,
 * APPENDS, SETITEM, SETITEMS, MEMOIZE, BINPUT, LONG_BINPUT, BINGET and
 * LONG_BINGET.
 *
 * Refused: everything that names or calls code (GLOBAL, STACK_GLOBAL,
 * REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT1/2/4, PERSID,
 * BINPERSID), out-of-band buffers (NEXT_BUFFER, READONLY_BUFFER), sets
 * (EMPTY_SET, ADDITEMS, FROZENSET: a snapshot has none), and the text
 * opcodes of protocols 0 and 1 (INT, LONG, FLOAT, STRING, UNICODE, PUT,
 * GET, BINSTRING, SHORT_BINSTRING), which Python never writes for plain
 * data at protocol 2 and above.
 *
 * Stricter than Python where a well-formed pickle never goes: APPEND(S) only
 * into a list, SETITEM(S) only into a dict, every operand above the newest
 * MARK, no MARK left open at STOP. Bytes after STOP are ignored, as
 * pickle.loads does. The memo is an array indexed by memo number; a number
 * may not exceed the count of values and memo stores read so far (Python's
 * pickler numbers the memo densely from 0), so its size stays proportional
 * to the input and a hostile index cannot make it large. */
#include "pyval.h"
#include "core/error.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  OP_MARK = 0x28, OP_EMPTY_TUPLE = 0x29, OP_STOP = 0x2e, OP_POP = 0x30, OP_POP_MARK = 0x31, OP_DUP = 0x32,
  OP_BINBYTES = 0x42, OP_SHORT_BINBYTES = 0x43, OP_BINFLOAT = 0x47, OP_BININT = 0x4a, OP_BININT1 = 0x4b,
  OP_BININT2 = 0x4d, OP_NONE = 0x4e, OP_BINUNICODE = 0x58, OP_EMPTY_LIST = 0x5d, OP_APPEND = 0x61,
  OP_DICT = 0x64, OP_APPENDS = 0x65, OP_BINGET = 0x68, OP_LONG_BINGET = 0x6a, OP_LIST = 0x6c,
  OP_BINPUT = 0x71, OP_LONG_BINPUT = 0x72, OP_SETITEM = 0x73, OP_TUPLE = 0x74, OP_SETITEMS = 0x75,
  OP_EMPTY_DICT = 0x7d, OP_PROTO = 0x80, OP_TUPLE1 = 0x85, OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87,
  OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89, OP_LONG1 = 0x8a, OP_LONG4 = 0x8b, OP_SHORT_BINUNICODE = 0x8c,
  OP_BINUNICODE8 = 0x8d, OP_BINBYTES8 = 0x8e, OP_MEMOIZE = 0x94, OP_FRAME = 0x95, OP_BYTEARRAY8 = 0x96,
};

/* Every opcode of pickle protocols 0 to 5 by its name; NULL: no opcode. */
static const char *const op_names[256] = {
    [0x28] = "MARK", [0x29] = "EMPTY_TUPLE", [0x2e] = "STOP", [0x30] = "POP", [0x31] = "POP_MARK",
    [0x32] = "DUP", [0x42] = "BINBYTES", [0x43] = "SHORT_BINBYTES", [0x46] = "FLOAT", [0x47] = "BINFLOAT",
    [0x49] = "INT", [0x4a] = "BININT", [0x4b] = "BININT1", [0x4c] = "LONG", [0x4d] = "BININT2",
    [0x4e] = "NONE", [0x50] = "PERSID", [0x51] = "BINPERSID", [0x52] = "REDUCE", [0x53] = "STRING",
    [0x54] = "BINSTRING", [0x55] = "SHORT_BINSTRING", [0x56] = "UNICODE", [0x58] = "BINUNICODE",
    [0x5d] = "EMPTY_LIST", [0x61] = "APPEND", [0x62] = "BUILD", [0x63] = "GLOBAL", [0x64] = "DICT",
    [0x65] = "APPENDS", [0x67] = "GET", [0x68] = "BINGET", [0x69] = "INST", [0x6a] = "LONG_BINGET",
    [0x6c] = "LIST", [0x6f] = "OBJ", [0x70] = "PUT", [0x71] = "BINPUT", [0x72] = "LONG_BINPUT",
    [0x73] = "SETITEM", [0x74] = "TUPLE", [0x75] = "SETITEMS", [0x7d] = "EMPTY_DICT", [0x80] = "PROTO",
    [0x81] = "NEWOBJ", [0x82] = "EXT1", [0x83] = "EXT2", [0x84] = "EXT4", [0x85] = "TUPLE1",
    [0x86] = "TUPLE2", [0x87] = "TUPLE3", [0x88] = "NEWTRUE", [0x89] = "NEWFALSE", [0x8a] = "LONG1",
    [0x8b] = "LONG4", [0x8c] = "SHORT_BINUNICODE", [0x8d] = "BINUNICODE8", [0x8e] = "BINBYTES8",
    [0x8f] = "EMPTY_SET", [0x90] = "ADDITEMS", [0x91] = "FROZENSET", [0x92] = "NEWOBJ_EX",
    [0x93] = "STACK_GLOBAL", [0x94] = "MEMOIZE", [0x95] = "FRAME", [0x96] = "BYTEARRAY8",
    [0x97] = "NEXT_BUFFER", [0x98] = "READONLY_BUFFER",
};


typedef struct up {
  const char *F;
  const unsigned char *d;
  size_t len, pos; /* pos: the next byte to read */
  size_t at;       /* offset of the opcode being run */
  tc_pv_build b; /* arena, node pool, value stack */
  size_t marks[TC_PV_MAX_DEPTH]; /* stack heights at each open MARK */
  int nmarks;
  tc_pv **memo;
  size_t memo_cap, memo_count; /* slots; indexes stored (MEMOIZE's next index) */
  uint64_t nvalues, nputs;     /* values and memo stores so far: bound memo indexes */
  tc_pv *none_, *true_, *false_;
} up;

static const char *opname(uint8_t op) { return op_names[op] ? op_names[op] : "?"; }

static tcuda_status oom(up *u) {
  return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: host out of memory reading the pickle (at offset %zu)",
                  u->F, u->at);
}

/* An error about the opcode being run. */
static tcuda_status bad(up *u, const char *what) {
  return tc_error(TCUDA_ERROR_PARSE, "%s: pickle opcode %s at offset %zu: %s", u->F, opname(u->d[u->at]), u->at,
                  what);
}

static tcuda_status truncated(up *u, uint64_t k) {
  return tc_error(TCUDA_ERROR_PARSE,
                  "%s: pickle truncated: opcode %s at offset %zu needs %llu more bytes, %zu remain", u->F,
                  opname(u->d[u->at]), u->at, (unsigned long long)k, u->len - u->pos);
}

/* k more bytes of argument, else the truncation error */
static inline tcuda_status need(up *u, uint64_t k) {
  return k <= u->len - u->pos ? TCUDA_SUCCESS : truncated(u, k);
}

static uint64_t le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n; i-- > 0;) v = v << 8 | p[i];
  return v;
}

static inline tc_pv *node(up *u, tc_pv_kind kind) { return tc_pv_node(&u->b, kind); }

/* Every push costs a unit of the budget: a memo reference (GET) or a DUP
 * as much as a new value, since whatever walks the tree sees each. */
static inline tcuda_status push(up *u, tc_pv *x) {
  tcuda_status s = tc_pv_spend(u->F, u->b.budget, 1);
  if (s) return s;
  return tc_pv_push(&u->b, x) ? TCUDA_SUCCESS : oom(u);
}

/* A new value onto the stack (counted for the memo bound). */
static tcuda_status push_new(up *u, tc_pv *v) {
  u->nvalues++;
  return push(u, v);
}

static size_t fence(const up *u) { return u->nmarks ? u->marks[u->nmarks - 1] : 0; }

/* at least k values above the newest MARK */
static tcuda_status operands(up *u, size_t k) {
  if (u->b.sn - fence(u) >= k) return TCUDA_SUCCESS;
  char m[96];
  snprintf(m, sizeof m, "needs %zu value%s above the last MARK, the stack has %zu", k, k == 1 ? "" : "s",
           u->b.sn - fence(u));
  return bad(u, m);
}

/* Pop the values above the newest MARK and the MARK: *base is where they
 * start on the stack, *k their count. */
static tcuda_status pop_mark(up *u, size_t *base, size_t *k) {
  if (!u->nmarks) return bad(u, "no MARK is open");
  *base = u->marks[--u->nmarks];
  *k = u->b.sn - *base;
  return TCUDA_SUCCESS;
}

/* k values from src into a fresh array of `slots` (>= k); a dict's keeps
 * the slot for its index. */
static tc_pv **items_copy(up *u, tc_pv *const *src, size_t k, size_t slots, int dict) {
  if (!slots) return NULL;
  tc_pv **a = dict ? tc_pv_dict_items(u->b.ar, slots) : tc_arena_alloc(u->b.ar, slots * sizeof *a);
  if (a && k) memcpy(a, src, k * sizeof *a);
  return a;
}

/* Append k slots (k / per items) to a LIST (per 1) or DICT (per 2). The
 * arrays double (tc_pv_cap), the old one stays in the arena. */
static tcuda_status extend(up *u, tc_pv *c, tc_pv *const *src, size_t k, size_t per) {
  size_t n = c->n, add = k / per;
  if (add > UINT32_MAX - n) return bad(u, "the container would exceed 2^32 - 1 items");
  if (n + add > tc_pv_cap(n)) {
    tc_pv **a = items_copy(u, c->u.items, n * per, tc_pv_cap(n + add) * per, per == 2);
    if (!a) return oom(u);
    c->u.items = a;
  }
  if (k) memcpy(c->u.items + n * per, src, k * sizeof *src);
  c->n = (uint32_t)(n + add);
  return TCUDA_SUCCESS;
}

/* A LIST, TUPLE or DICT from the k values at stack[base]. */
static tcuda_status build(up *u, tc_pv_kind kind, size_t base, size_t k) {
  size_t per = kind == TC_PV_DICT ? 2 : 1;
  if (per == 2 && k % 2) return bad(u, "an odd number of values for key/value pairs");
  if (k / per > UINT32_MAX) return bad(u, "the container would exceed 2^32 - 1 items");
  tc_pv *v = node(u, kind);
  if (!v || (per == 2 && !tc_pv_track_dict(&u->b, v))) return oom(u);
  size_t slots = kind == TC_PV_TUPLE ? k : tc_pv_cap(k / per) * per;
  v->u.items = items_copy(u, u->b.stack + base, k, slots, per == 2);
  if (slots && !v->u.items) return oom(u);
  v->n = (uint32_t)(k / per);
  u->b.sn = base;
  return push_new(u, v);
}

/* APPENDS, SETITEMS: the values above the newest MARK into the container
 * just below it. */
static tcuda_status extend_mark(up *u, tc_pv_kind kind) {
  if (!u->nmarks) return bad(u, "no MARK is open");
  size_t base = u->marks[u->nmarks - 1];
  size_t below = u->nmarks > 1 ? u->marks[u->nmarks - 2] : 0;
  if (base <= below) return bad(u, "no container below the MARK");
  tc_pv *c = u->b.stack[base - 1];
  size_t per = kind == TC_PV_DICT ? 2 : 1;
  if (c->kind != kind) return bad(u, per == 2 ? "the target is not a dict" : "the target is not a list");
  size_t k = u->b.sn - base;
  if (k % per) return bad(u, "an odd number of values for key/value pairs");
  tcuda_status s = extend(u, c, u->b.stack + base, k, per);
  if (s) return s;
  u->nmarks--;
  u->b.sn = base;
  return TCUDA_SUCCESS;
}

static tcuda_status memo_put(up *u, uint64_t idx) {
  tcuda_status s = operands(u, 1);
  if (s) return s;
  if (idx > u->nvalues + u->nputs) {
    char m[128];
    snprintf(m, sizeof m, "memo index %llu is beyond the %llu values and memo stores read so far",
             (unsigned long long)idx, (unsigned long long)(u->nvalues + u->nputs));
    return bad(u, m);
  }
  u->nputs++;
  if (idx >= u->memo_cap) {
    size_t cap = u->memo_cap ? u->memo_cap : 1024;
    while (cap <= idx) cap *= 2;
    tc_pv **m = realloc(u->memo, cap * sizeof *m);
    if (!m) return oom(u);
    memset(m + u->memo_cap, 0, (cap - u->memo_cap) * sizeof *m);
    u->memo = m;
    u->memo_cap = cap;
  }
  if (!u->memo[idx]) u->memo_count++;
  u->memo[idx] = u->b.stack[u->b.sn - 1];
  return TCUDA_SUCCESS;
}

static tcuda_status memo_get(up *u, uint64_t idx) {
  if (idx >= u->memo_cap || !u->memo[idx]) {
    char m[96];
    snprintf(m, sizeof m, "memo index %llu was never stored", (unsigned long long)idx);
    return bad(u, m);
  }
  return push(u, u->memo[idx]);
}

/* LONG1/LONG4: n bytes of little-endian two's complement at pos */
static tcuda_status long_n(up *u, uint64_t n) {
  tcuda_status s = need(u, n);
  if (s) return s;
  const unsigned char *p = u->d + u->pos;
  int64_t v = 0;
  if (n) {
    size_t low = n < 8 ? (size_t)n : 8;
    int neg = p[low - 1] >= 0x80;
    for (uint64_t i = 8; i < n; i++) /* longer forms must be sign extension */
      if (p[i] != (neg ? 0xff : 0x00)) return bad(u, "the integer does not fit in 64 bits");
    uint64_t w = le(p, (int)low);
    if (neg && low < 8) w |= ~(uint64_t)0 << (8 * low);
    v = (int64_t)w;
  }
  u->pos += n;
  tc_pv *x = node(u, TC_PV_INT);
  if (x) x->u.i = v;
  return push_new(u, x);
}

/* STR or BYTES of n bytes at pos. Python writes a str's lone surrogates
 * (file names decoded with surrogateescape, say) as three bytes that are
 * not UTF-8; they become U+FFFD, three bytes too, so that such a snapshot
 * still reads. Any other invalid UTF-8 is refused. */
static tcuda_status text(up *u, uint64_t n, tc_pv_kind kind) {
  tcuda_status s = need(u, n);
  if (s) return s;
  if (n > UINT32_MAX - 1) return bad(u, "a string or bytes of 4 GiB or more");
  const unsigned char *p = u->d + u->pos;
  tc_pv *x = node(u, kind);
  unsigned char *t = x ? tc_arena_alloc(u->b.ar, (size_t)n + 1) : NULL; /* zeroed: NUL-terminated */
  if (!t) return oom(u);
  memcpy(t, p, (size_t)n);
  for (size_t i = 0; kind == TC_PV_STR && i < n;) {
    i += tc_pv_utf8_valid(t + i, (size_t)n - i);
    if (i == n) break;
    if (n - i >= 3 && t[i] == 0xed && t[i + 1] >= 0xa0 && t[i + 1] <= 0xbf && (t[i + 2] & 0xc0) == 0x80) {
      t[i] = 0xef, t[i + 1] = 0xbf, t[i + 2] = 0xbd;
      i += 3;
      continue;
    }
    char m[80];
    snprintf(m, sizeof m, "invalid UTF-8 at byte offset %zu", u->pos + i);
    return bad(u, m);
  }
  x->u.s = (const char *)t;
  x->n = (uint32_t)n;
  u->pos += n;
  return push_new(u, x);
}

static tcuda_status refused(up *u, uint8_t op) {
  if (!op_names[op])
    return tc_error(TCUDA_ERROR_PARSE, "%s: unknown pickle opcode 0x%02x at offset %zu", u->F, op, u->at);
  return tc_error(TCUDA_ERROR_PARSE,
                  "%s: pickle opcode %s at offset %zu is refused: only plain data (dict, list, tuple, str, bytes, "
                  "int, float, bool, None) is read",
                  u->F, op_names[op], u->at);
}

static tc_pv *singleton(up *u, tc_pv **slot, tc_pv_kind kind, int64_t i) {
  if (!*slot) {
    *slot = node(u, kind);
    if (*slot) (*slot)->u.i = i;
  }
  return *slot;
}

static tcuda_status run(up *u, tc_pv **out) {
  tcuda_status s = TCUDA_SUCCESS;
  if (!u->len) return tc_error(TCUDA_ERROR_PARSE, "%s: the pickle is empty", u->F);
  if (u->d[0] != OP_PROTO)
    return tc_error(TCUDA_ERROR_PARSE, "%s: not a pickle of protocol 2 to 5 (the first opcode is not PROTO)", u->F);
  for (;;) {
    if (s) return s;
    if (u->pos >= u->len)
      return tc_error(TCUDA_ERROR_PARSE, "%s: pickle truncated: it ends at offset %zu without STOP", u->F, u->len);
    u->at = u->pos;
    uint8_t op = u->d[u->pos++];
    const unsigned char *a = u->d + u->pos; /* the argument, once need() said it is there */
    uint64_t n;
    tc_pv *x;
    switch (op) {
    case OP_PROTO:
      if ((s = need(u, 1))) break;
      if (a[0] < 2 || a[0] > 5) {
        return tc_error(TCUDA_ERROR_PARSE, "%s: pickle protocol %u (PROTO at offset %zu) is not read: only 2 to 5",
                        u->F, a[0], u->at);
      }
      u->pos++;
      break;
    case OP_FRAME: /* only checked: opcodes are read the same inside a frame */
      if ((s = need(u, 8))) break;
      u->pos += 8;
      s = need(u, le(a, 8));
      break;
    case OP_STOP:
      if (u->nmarks) return bad(u, "a MARK is still open");
      if (u->b.sn != 1) {
        char m[96];
        snprintf(m, sizeof m, "the stack holds %zu values, not 1", u->b.sn);
        return bad(u, m);
      }
      *out = u->b.stack[0];
      return tc_pv_index_dicts(u->F, &u->b);
    case OP_MARK:
      if (u->nmarks == TC_PV_MAX_DEPTH) {
        char m[64];
        snprintf(m, sizeof m, "MARKs nest deeper than %d levels", TC_PV_MAX_DEPTH);
        return bad(u, m);
      }
      u->marks[u->nmarks++] = u->b.sn;
      break;
    case OP_POP: /* like Python: a MARK with nothing above it is what goes */
      if (u->nmarks && u->marks[u->nmarks - 1] == u->b.sn) u->nmarks--;
      else if ((s = operands(u, 1)) == TCUDA_SUCCESS) u->b.sn--;
      break;
    case OP_POP_MARK: {
      size_t base = 0, k = 0;
      if ((s = pop_mark(u, &base, &k)) == TCUDA_SUCCESS) u->b.sn = base;
      break;
    }
    case OP_DUP:
      if ((s = operands(u, 1)) == TCUDA_SUCCESS) s = push(u, u->b.stack[u->b.sn - 1]);
      break;
    case OP_NONE: s = push_new(u, singleton(u, &u->none_, TC_PV_NONE, 0)); break;
    case OP_NEWTRUE: s = push_new(u, singleton(u, &u->true_, TC_PV_BOOL, 1)); break;
    case OP_NEWFALSE: s = push_new(u, singleton(u, &u->false_, TC_PV_BOOL, 0)); break;
    case OP_BININT:
    case OP_BININT1:
    case OP_BININT2: {
      int w = op == OP_BININT ? 4 : op == OP_BININT1 ? 1 : 2;
      if ((s = need(u, (uint64_t)w))) break;
      uint64_t v = le(a, w);
      u->pos += (size_t)w;
      if ((x = node(u, TC_PV_INT))) x->u.i = op == OP_BININT ? (int64_t)(int32_t)(uint32_t)v : (int64_t)v;
      s = push_new(u, x);
      break;
    }
    case OP_LONG1:
      if ((s = need(u, 1))) break;
      u->pos++;
      s = long_n(u, a[0]);
      break;
    case OP_LONG4:
      if ((s = need(u, 4))) break;
      n = le(a, 4);
      if (n >= 0x80000000u) return bad(u, "a negative byte count");
      u->pos += 4;
      s = long_n(u, n);
      break;
    case OP_BINFLOAT: {
      if ((s = need(u, 8))) break;
      uint64_t bits = 0;
      for (int i = 0; i < 8; i++) bits = bits << 8 | a[i]; /* big-endian */
      u->pos += 8;
      if ((x = node(u, TC_PV_FLOAT))) memcpy(&x->u.f, &bits, 8);
      s = push_new(u, x);
      break;
    }
    case OP_SHORT_BINUNICODE:
    case OP_SHORT_BINBYTES:
      if ((s = need(u, 1))) break;
      u->pos++;
      s = text(u, a[0], op == OP_SHORT_BINUNICODE ? TC_PV_STR : TC_PV_BYTES);
      break;
    case OP_BINUNICODE:
    case OP_BINBYTES:
      if ((s = need(u, 4))) break;
      u->pos += 4;
      s = text(u, le(a, 4), op == OP_BINUNICODE ? TC_PV_STR : TC_PV_BYTES);
      break;
    case OP_BINUNICODE8:
    case OP_BINBYTES8:
    case OP_BYTEARRAY8:
      if ((s = need(u, 8))) break;
      u->pos += 8;
      s = text(u, le(a, 8), op == OP_BINUNICODE8 ? TC_PV_STR : TC_PV_BYTES);
      break;
    case OP_EMPTY_DICT:
      x = node(u, TC_PV_DICT);
      s = x && !tc_pv_track_dict(&u->b, x) ? oom(u) : push_new(u, x);
      break;
    case OP_EMPTY_LIST: s = push_new(u, node(u, TC_PV_LIST)); break;
    case OP_EMPTY_TUPLE: s = push_new(u, node(u, TC_PV_TUPLE)); break;
    case OP_DICT:
    case OP_LIST:
    case OP_TUPLE: {
      size_t base = 0, k = 0;
      if ((s = pop_mark(u, &base, &k))) break;
      s = build(u, op == OP_DICT ? TC_PV_DICT : op == OP_LIST ? TC_PV_LIST : TC_PV_TUPLE, base, k);
      break;
    }
    case OP_TUPLE1:
    case OP_TUPLE2:
    case OP_TUPLE3: {
      size_t k = (size_t)(op - OP_TUPLE1 + 1);
      if ((s = operands(u, k))) break;
      s = build(u, TC_PV_TUPLE, u->b.sn - k, k);
      break;
    }
    case OP_APPEND:
    case OP_SETITEM: {
      size_t per = op == OP_SETITEM ? 2 : 1;
      if ((s = operands(u, per + 1))) break;
      tc_pv *c = u->b.stack[u->b.sn - per - 1];
      if (c->kind != (per == 2 ? TC_PV_DICT : TC_PV_LIST))
        return bad(u, per == 2 ? "the target is not a dict" : "the target is not a list");
      if ((s = extend(u, c, u->b.stack + u->b.sn - per, per, per))) break;
      u->b.sn -= per;
      break;
    }
    case OP_APPENDS: s = extend_mark(u, TC_PV_LIST); break;
    case OP_SETITEMS: s = extend_mark(u, TC_PV_DICT); break;
    case OP_MEMOIZE: s = memo_put(u, u->memo_count); break;
    case OP_BINPUT:
    case OP_LONG_BINPUT: {
      int w = op == OP_BINPUT ? 1 : 4;
      if ((s = need(u, (uint64_t)w))) break;
      u->pos += (size_t)w;
      s = memo_put(u, le(a, w));
      break;
    }
    case OP_BINGET:
    case OP_LONG_BINGET: {
      int w = op == OP_BINGET ? 1 : 4;
      if ((s = need(u, (uint64_t)w))) break;
      u->pos += (size_t)w;
      s = memo_get(u, le(a, w));
      break;
    }
    default: return refused(u, op);
    }
  }
}

tcuda_status tc_pv_unpickle(const char *func, const void *data, size_t len, tc_pv_budget *budget, tc_arena *ar,
                            tc_pv **out) {
  const char *F = func ? func : "tc_pv_unpickle";
  tcuda_status s = tc_pv_entry_check(F, data, len, ar, out);
  if (s) return s;
  up *u = calloc(1, sizeof *u);
  if (!u) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: host out of memory reading the pickle", F);
  u->F = F;
  u->d = data;
  u->len = len;
  tc_pv_budget own;
  tc_pv *top = NULL;
  s = tc_pv_build_start(&u->b, ar, budget, &own, len) ? TCUDA_SUCCESS : oom(u);
  if (!s) s = run(u, &top);
  if (!s) *out = top;
  tc_pv_build_free(&u->b);
  free(u->memo);
  free(u);
  return s;
}
