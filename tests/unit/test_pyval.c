/* The value-tree readers (src/replay/pyval.h): the restricted unpickler on
 * pickles that python3's pickle module wrote (the byte strings below, with
 * the values they hold), on torch's recorded snapshots and on hostile
 * bytes; the JSON reader on the same snapshot as JSON and on the corners of
 * RFC 8259; the sniffing and the accessors. */
#include "harness.h"
#include "replay/pyval.h"
#include <math.h>

#define LIT(s) s, sizeof(s) - 1

static tc_arena *g_ar;

static tcuda_status parse(const void *d, size_t n, tc_pv **out) {
  tc_arena_destroy(g_ar);
  g_ar = tc_arena_create();
  return tc_pv_parse("test", d, n, NULL, g_ar, out);
}
static void done(void) {
  tc_arena_destroy(g_ar);
  g_ar = NULL;
}

/* the file tests/data/<name>, or NULL (then the part is skipped) */
static char *read_data(const char *name, size_t *len) {
  const char *dir = getenv("TCUDA_TEST_DATA");
  if (!dir) {
    TC_SKIP_PART("TCUDA_TEST_DATA is not set");
    return NULL;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    tc_failures++;
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc(n > 0 ? (size_t)n : 1);
  *len = fread(b, 1, (size_t)n, f);
  fclose(f);
  return b;
}

static int64_t int_of(const tc_pv *v) {
  int64_t i = INT64_MIN + 12345; /* a value no test expects */
  CHECK(tc_pv_as_int(v, &i));
  return i;
}
static const tc_pv *item(const tc_pv *seq, size_t i) {
  tc_pv *const *it;
  size_t n;
  if (!tc_pv_as_seq(seq, &it, &n) || i >= n) return NULL;
  return it[i];
}
static int is_str(const tc_pv *v, const char *s) {
  return v && v->kind == TC_PV_STR && v->n == strlen(s) && !memcmp(v->u.s, s, v->n);
}

/* Bounded structural equality: a TUPLE equals a LIST (JSON has no
 * tuples); floats bit for bit but for NaN. */
static int pv_eq(const tc_pv *a, const tc_pv *b, int depth) {
  if (depth > 64 || !a || !b) return 0;
  tc_pv_kind ka = a->kind == TC_PV_TUPLE ? TC_PV_LIST : a->kind, kb = b->kind == TC_PV_TUPLE ? TC_PV_LIST : b->kind;
  if (ka != kb || a->n != b->n) return 0;
  switch (ka) {
  case TC_PV_NONE: return 1;
  case TC_PV_BOOL:
  case TC_PV_INT: return a->u.i == b->u.i;
  case TC_PV_FLOAT: return a->u.f == b->u.f || (isnan(a->u.f) && isnan(b->u.f));
  case TC_PV_STR:
  case TC_PV_BYTES: return !memcmp(a->u.s, b->u.s, a->n);
  default: break;
  }
  size_t slots = (size_t)a->n * (ka == TC_PV_DICT ? 2 : 1);
  for (size_t i = 0; i < slots; i++)
    if (!pv_eq(a->u.items[i], b->u.items[i], depth + 1)) return 0;
  return 1;
}

/* ---- pickles python3 wrote: pickle.dumps(OBJ, protocol=N) with
 * OBJ = {'a': [1, -2, 300, 70000, -2**31, 2**40, -2**63, 2**63-1],
 *        'b': (None, True, False), 'f': 1.5, 's': 'hé中😀', 't': (), 'e': []} */
static const char P2[] =
    "\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71\x02\x28\x4b\x01\x4a\xfe\xff\xff\xff\x4d\x2c"
    "\x01\x4a\x70\x11\x01\x00\x4a\x00\x00\x00\x80\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x08\x00\x00\x00\x00\x00\x00"
    "\x00\x80\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f\x65\x58\x01\x00\x00\x00\x62\x71\x03\x4e\x88\x89\x87\x71\x04"
    "\x58\x01\x00\x00\x00\x66\x71\x05\x47\x3f\xf8\x00\x00\x00\x00\x00\x00\x58\x01\x00\x00\x00\x73\x71\x06\x58\x0a"
    "\x00\x00\x00\x68\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\x71\x07\x58\x01\x00\x00\x00\x74\x71\x08\x29\x58\x01\x00"
    "\x00\x00\x65\x71\x09\x5d\x71\x0a\x75\x2e";
/* protocol 3 writes the same opcodes for these values */
static const char P4[] =
    "\x80\x04\x95\x6f\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x5d\x94\x28\x4b\x01\x4a\xfe\xff\xff"
    "\xff\x4d\x2c\x01\x4a\x70\x11\x01\x00\x4a\x00\x00\x00\x80\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x08\x00\x00\x00"
    "\x00\x00\x00\x00\x80\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f\x65\x8c\x01\x62\x94\x4e\x88\x89\x87\x94\x8c\x01"
    "\x66\x94\x47\x3f\xf8\x00\x00\x00\x00\x00\x00\x8c\x01\x73\x94\x8c\x0a\x68\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"
    "\x94\x8c\x01\x74\x94\x29\x8c\x01\x65\x94\x5d\x94\x75\x2e";
/* protocol 5: the same opcodes as 4 */

/* {'x': L, 'y': L, 'b': b'\x00\xffz'} with L = [1, 2], protocols 3 and 4 */
static const char S3[] =
    "\x80\x03\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x78\x71\x01\x5d\x71\x02\x28\x4b\x01\x4b\x02\x65\x58\x01\x00\x00"
    "\x00\x79\x71\x03\x68\x02\x58\x01\x00\x00\x00\x62\x71\x04\x43\x03\x00\xff\x7a\x71\x05\x75\x2e";
static const char S4[] =
    "\x80\x04\x95\x21\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x78\x94\x5d\x94\x28\x4b\x01\x4b\x02\x65\x8c"
    "\x01\x79\x94\x68\x02\x8c\x01\x62\x94\x43\x03\x00\xff\x7a\x94\x75\x2e";

static void check_obj(const tc_pv *v) {
  CHECK(v && v->kind == TC_PV_DICT && v->n == 6);
  const tc_pv *a = tc_pv_get(v, "a");
  CHECK(a && a->kind == TC_PV_LIST && a->n == 8);
  static const int64_t want[] = {1, -2, 300, 70000, INT32_MIN, (int64_t)1 << 40, INT64_MIN, INT64_MAX};
  for (size_t i = 0; i < 8; i++) CHECK_EQ_INT(int_of(item(a, i)), want[i]);
  const tc_pv *b = tc_pv_get(v, "b");
  CHECK(b && b->kind == TC_PV_TUPLE && b->n == 3);
  CHECK(item(b, 0) && item(b, 0)->kind == TC_PV_NONE);
  CHECK(item(b, 1) && item(b, 1)->kind == TC_PV_BOOL && int_of(item(b, 1)) == 1);
  CHECK(item(b, 2) && item(b, 2)->kind == TC_PV_BOOL && int_of(item(b, 2)) == 0);
  double f = 0;
  CHECK(tc_pv_as_double(tc_pv_get(v, "f"), &f) && f == 1.5);
  CHECK(is_str(tc_pv_get(v, "s"), "h\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"));
  const tc_pv *t = tc_pv_get(v, "t"), *e = tc_pv_get(v, "e");
  CHECK(t && t->kind == TC_PV_TUPLE && t->n == 0);
  CHECK(e && e->kind == TC_PV_LIST && e->n == 0);
  CHECK(is_str(v->u.items[0], "a") && is_str(v->u.items[10], "e")); /* insertion order */
}

static void test_protocols_2_to_5(void) {
  char p[sizeof P2 > sizeof P4 ? sizeof P2 : sizeof P4];
  for (int proto = 2; proto <= 5; proto++) {
    tc_pv *v = NULL;
    if (proto <= 3) memcpy(p, P2, sizeof P2);
    else memcpy(p, P4, sizeof P4);
    p[1] = (char)proto;
    CHECK_OK(parse(p, proto <= 3 ? sizeof P2 - 1 : sizeof P4 - 1, &v));
    check_obj(v);
  }
  done();
}

static void test_memo_shares_nodes(void) {
  const char *src[] = {S3, S4};
  size_t len[] = {sizeof S3 - 1, sizeof S4 - 1};
  for (int i = 0; i < 2; i++) {
    tc_pv *v = NULL;
    CHECK_OK(parse(src[i], len[i], &v));
    const tc_pv *x = tc_pv_get(v, "x"), *y = tc_pv_get(v, "y"), *b = tc_pv_get(v, "b");
    CHECK(x && x == y && x->kind == TC_PV_LIST && x->n == 2);
    CHECK_EQ_INT(int_of(item(x, 1)), 2);
    CHECK(b && b->kind == TC_PV_BYTES && b->n == 3 && !memcmp(b->u.s, "\x00\xffz", 3));
  }
  done();
}

static void test_list_appended_to_itself(void) {
  /* l = []; l.append(l); pickle.dumps(l, protocol=4) */
  tc_pv *v = NULL;
  CHECK_OK(parse(LIT("\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00\x5d\x94\x68\x00\x61\x2e"), &v));
  CHECK(v && v->kind == TC_PV_LIST && v->n == 1 && v->u.items[0] == v);
  CHECK(pv_eq(v, v, 0) == 0); /* the bounded walk gives up, it does not recurse forever */
  done();
}

static void test_bytearray8_is_bytes(void) {
  /* pickle.dumps(bytearray(b'ab'), protocol=5) */
  tc_pv *v = NULL;
  CHECK_OK(parse(LIT("\x80\x05\x95\x0d\x00\x00\x00\x00\x00\x00\x00\x96\x02\x00\x00\x00\x00\x00\x00\x00\x61\x62\x94"
                     "\x2e"),
                 &v));
  CHECK(v && v->kind == TC_PV_BYTES && v->n == 2 && !strcmp(v->u.s, "ab"));
  /* BINBYTES8, BINUNICODE8, BINBYTES, BINUNICODE of lengths 0 and 1 */
  CHECK_OK(parse(LIT("\x80\x04(\x8e\x00\x00\x00\x00\x00\x00\x00\x00\x8d\x01\x00\x00\x00\x00\x00\x00\x00z"
                     "B\x01\x00\x00\x00yX\x00\x00\x00\x00t."),
                 &v));
  CHECK(v && v->n == 4 && item(v, 0)->kind == TC_PV_BYTES && item(v, 0)->n == 0);
  CHECK(is_str(item(v, 1), "z") && item(v, 2)->kind == TC_PV_BYTES && is_str(item(v, 3), ""));
  done();
}

static void test_big_ints(void) {
  tc_pv *v = NULL;
  /* 2**63 (LONG1 of 9 bytes) does not fit; the error names the offset */
  CHECK_ERR(parse(LIT("\x80\x04\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00."), &v), TCUDA_ERROR_PARSE,
            "LONG1 at offset 2: the integer does not fit in 64 bits");
  CHECK(!v);
  CHECK_ERR(parse(LIT("\x80\x04\x8b\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01."), &v), TCUDA_ERROR_PARSE,
            "LONG4 at offset 2");
  /* longer than needed but sign extension only: fits */
  CHECK_OK(parse(LIT("\x80\x04\x8a\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff."), &v));
  CHECK_EQ_INT(int_of(v), -1);
  CHECK_OK(parse(LIT("\x80\x04\x8b\x04\x00\x00\x00\x00\x00\x80\x00."), &v)); /* LONG4: 2**23 */
  CHECK_EQ_INT(int_of(v), 1 << 23);
  CHECK_OK(parse(LIT("\x80\x04\x8b\x03\x00\x00\x00\x00\x00\x80."), &v)); /* the top bit is the sign */
  CHECK_EQ_INT(int_of(v), -(1 << 23));
  CHECK_OK(parse(LIT("\x80\x04\x8a\x00."), &v)); /* LONG1 of no bytes: 0 */
  CHECK_EQ_INT(int_of(v), 0);
  CHECK_OK(parse(LIT("\x80\x04\x8a\x01\x80."), &v));
  CHECK_EQ_INT(int_of(v), -128);
  CHECK_ERR(parse(LIT("\x80\x04\x8b\xff\xff\xff\xff."), &v), TCUDA_ERROR_PARSE, "LONG4 at offset 2: a negative");
  /* a length past the end: truncated, whatever its size */
  CHECK_ERR(parse(LIT("\x80\x04\x8b\xff\xff\xff\x7f\x00."), &v), TCUDA_ERROR_PARSE, "truncated");
  done();
}

static void test_refused_opcodes(void) {
  static const struct { unsigned char op; const char *name; } r[] = {
      {0x63, "GLOBAL"}, {0x93, "STACK_GLOBAL"}, {0x52, "REDUCE"}, {0x62, "BUILD"}, {0x69, "INST"},
      {0x6f, "OBJ"}, {0x81, "NEWOBJ"}, {0x92, "NEWOBJ_EX"}, {0x82, "EXT1"}, {0x83, "EXT2"}, {0x84, "EXT4"},
      {0x50, "PERSID"}, {0x51, "BINPERSID"}, {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"},
      {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x49, "INT"}, {0x4c, "LONG"},
      {0x46, "FLOAT"}, {0x53, "STRING"}, {0x54, "BINSTRING"}, {0x55, "SHORT_BINSTRING"}, {0x56, "UNICODE"},
      {0x70, "PUT"}, {0x67, "GET"},
  };
  for (size_t i = 0; i < sizeof r / sizeof *r; i++) {
    char p[8] = "\x80\x04N?N.";
    p[3] = (char)r[i].op;
    char want[160];
    snprintf(want, sizeof want,
             "test: pickle opcode %s at offset 3 is refused: only plain data (dict, list, tuple, str, bytes, int, "
             "float, bool, None) is read",
             r[i].name);
    tc_pv *v = NULL;
    CHECK_ERR(parse(p, 6, &v), TCUDA_ERROR_PARSE, want);
    CHECK(!v);
  }
  tc_pv *v = NULL;
  CHECK_ERR(parse(LIT("\x80\x04\xff."), &v), TCUDA_ERROR_PARSE, "test: unknown pickle opcode 0xff at offset 2");
  CHECK_ERR(parse(LIT("\x80\x04N\x00."), &v), TCUDA_ERROR_PARSE, "unknown pickle opcode 0x00 at offset 3");
  /* what python3 writes for {'k': collections.OrderedDict()}, protocols 4 and 2 */
  CHECK_ERR(parse(LIT("\x80\x04\x95\x29\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x8c\x01\x6b\x94\x8c\x0b\x63\x6f\x6c\x6c"
                      "\x65\x63\x74\x69\x6f\x6e\x73\x94\x8c\x0b\x4f\x72\x64\x65\x72\x65\x64\x44\x69\x63\x74\x94\x93"
                      "\x94\x29\x52\x94\x73\x2e"),
                  &v),
            TCUDA_ERROR_PARSE, "pickle opcode STACK_GLOBAL at offset 45 is refused");
  CHECK_ERR(parse(LIT("\x80\x02\x7d\x71\x00\x58\x01\x00\x00\x00\x6b\x71\x01\x63\x63\x6f\x6c\x6c\x65\x63\x74\x69\x6f"
                      "\x6e\x73\x0a\x4f\x72\x64\x65\x72\x65\x64\x44\x69\x63\x74\x0a\x71\x02\x29\x52\x71\x03\x73\x2e"),
                  &v),
            TCUDA_ERROR_PARSE, "pickle opcode GLOBAL at offset 13 is refused");
  done();
}

static void test_protocol_range(void) {
  tc_pv *v = NULL;
  CHECK_ERR(parse(LIT("\x80\x01N."), &v), TCUDA_ERROR_PARSE, "protocol 1 (PROTO at offset 0) is not read");
  CHECK_ERR(parse(LIT("\x80\x06N."), &v), TCUDA_ERROR_PARSE, "protocol 6");
  CHECK_ERR(parse(LIT("\x80\x04\x80\x00N."), &v), TCUDA_ERROR_PARSE, "protocol 0 (PROTO at offset 2)");
  CHECK_OK(parse(LIT("\x80\x02N."), &v));
  CHECK(v && v->kind == TC_PV_NONE);
  tc_arena *ar = tc_arena_create();
  CHECK_ERR(tc_pv_unpickle("f", LIT("N."), NULL, ar, &v), TCUDA_ERROR_PARSE, "f: not a pickle of protocol 2 to 5");
  CHECK_ERR(tc_pv_unpickle("f", "", 0, NULL, ar, &v), TCUDA_ERROR_PARSE, "f: the pickle is empty");
  tc_arena_destroy(ar);
  done();
}

/* every proper prefix of a valid pickle is an error, never a crash */
static void truncations(const char *p, size_t n, size_t step) {
  for (size_t k = 0; k < n; k += step) {
    tc_pv *v = (tc_pv *)1;
    tcuda_status s = parse(p, k, &v);
    if (s != TCUDA_ERROR_PARSE || v) {
      fprintf(stderr, "prefix of %zu of %zu bytes: %s\n", k, n, tcuda_status_name(s));
      tc_failures++;
      return;
    }
  }
}

static void test_truncation_at_every_byte(void) {
  truncations(P2, sizeof P2 - 1, 1);
  truncations(P4, sizeof P4 - 1, 1);
  truncations(S3, sizeof S3 - 1, 1);
  tc_pv *v = NULL;
  CHECK_ERR(parse(P2, 22, &v), TCUDA_ERROR_PARSE,
            "test: pickle truncated: opcode BININT at offset 20 needs 4 more bytes, 1 remain");
  CHECK_ERR(parse(P2, sizeof P2 - 2, &v), TCUDA_ERROR_PARSE, "pickle truncated: it ends at offset 144 without STOP");
  CHECK_ERR(parse(P4, 20, &v), TCUDA_ERROR_PARSE,
            "pickle truncated: opcode FRAME at offset 2 needs 111 more bytes, 9 remain");
  size_t n = 0;
  char *big = read_data("whatif/side_stream.pickle", &n);
  if (big && n > 11 && (unsigned char)big[2] == 0x95) {
    truncations(big, n, 1); /* each fails at the FRAME */
    memmove(big + 2, big + 11, n - 11); /* without it: each fails where it is cut */
    truncations(big, n - 9, 1);
    tc_pv *v = NULL;
    CHECK_OK(parse(big, n - 9, &v));
  }
  free(big);
  done();
}

static void test_stack_discipline(void) {
  tc_pv *v = NULL;
  CHECK_ERR(parse(LIT("\x80\x04}K\x01" "a."), &v), TCUDA_ERROR_PARSE, "APPEND at offset 5: the target is not a list");
  CHECK_ERR(parse(LIT("\x80\x04]K\x01K\x02s."), &v), TCUDA_ERROR_PARSE,
            "SETITEM at offset 7: the target is not a dict");
  CHECK_ERR(parse(LIT("\x80\x04}(K\x01K\x02K\x03u."), &v), TCUDA_ERROR_PARSE, "SETITEMS at offset 10: an odd number");
  CHECK_ERR(parse(LIT("\x80\x04(K\x01K\x02K\x03" "d."), &v), TCUDA_ERROR_PARSE, "DICT at offset 9: an odd number");
  CHECK_ERR(parse(LIT("\x80\x04]K\x01" "e."), &v), TCUDA_ERROR_PARSE, "APPENDS at offset 5: no MARK is open");
  CHECK_ERR(parse(LIT("\x80\x04(K\x01" "e."), &v), TCUDA_ERROR_PARSE,
            "APPENDS at offset 5: no container below the MARK");
  CHECK_ERR(parse(LIT("\x80\x04]\x31."), &v), TCUDA_ERROR_PARSE, "POP_MARK at offset 3: no MARK is open");
  CHECK_ERR(parse(LIT("\x80\x04l."), &v), TCUDA_ERROR_PARSE, "LIST at offset 2: no MARK is open");
  CHECK_ERR(parse(LIT("\x80\x04]K\x01(a."), &v), TCUDA_ERROR_PARSE, "APPEND at offset 6: needs 2 values above");
  CHECK_ERR(parse(LIT("\x80\x04\x30."), &v), TCUDA_ERROR_PARSE, "POP at offset 2");
  CHECK_ERR(parse(LIT("\x80\x04\x32."), &v), TCUDA_ERROR_PARSE, "DUP at offset 2");
  CHECK_ERR(parse(LIT("\x80\x04\x86."), &v), TCUDA_ERROR_PARSE, "TUPLE2 at offset 2");
  CHECK_ERR(parse(LIT("\x80\x04NN."), &v), TCUDA_ERROR_PARSE, "STOP at offset 4: the stack holds 2 values, not 1");
  CHECK_ERR(parse(LIT("\x80\x04."), &v), TCUDA_ERROR_PARSE, "STOP at offset 2: the stack holds 0 values");
  CHECK_ERR(parse(LIT("\x80\x04(N."), &v), TCUDA_ERROR_PARSE, "STOP at offset 4: a MARK is still open");
  CHECK(!v);
  /* POP removes a MARK with nothing above it, DUP copies, POP_MARK drops */
  CHECK_OK(parse(LIT("\x80\x04K\x07(\x30\x32(KaKb\x31\x86."), &v));
  CHECK(v && v->kind == TC_PV_TUPLE && v->n == 2 && item(v, 0) == item(v, 1) && int_of(item(v, 0)) == 7);
  /* a container from a MARK on the empty stack (the stack array is never NULL) */
  CHECK_OK(parse(LIT("\x80\x04(t."), &v));
  CHECK(v && v->kind == TC_PV_TUPLE && v->n == 0);
  CHECK_OK(parse(LIT("\x80\x04(d."), &v));
  CHECK(v && v->kind == TC_PV_DICT && v->n == 0);
  /* bytes after STOP are ignored, as pickle.loads does */
  CHECK_OK(parse(LIT("\x80\x04K\x05.\xff\xff garbage"), &v));
  CHECK_EQ_INT(int_of(v), 5);
  /* TUPLE1, TUPLE3, TUPLE, LIST, DICT; SETITEM keeps duplicates, get finds the last */
  CHECK_OK(parse(LIT("\x80\x04(K\x01\x85K\x02K\x03K\x04\x87(t(K\x05l(\x8c\x01kK\x06" "d\x8c\x01kK\x07s\x8c\x01kK\x08s"
                     "t."),
                 &v));
  CHECK(v && v->kind == TC_PV_TUPLE && v->n == 5);
  CHECK(item(v, 0)->kind == TC_PV_TUPLE && int_of(item(item(v, 0), 0)) == 1);
  CHECK(item(v, 1)->n == 3 && int_of(item(item(v, 1), 2)) == 4);
  CHECK(item(v, 2)->kind == TC_PV_TUPLE && item(v, 2)->n == 0);
  CHECK(item(v, 3)->kind == TC_PV_LIST && int_of(item(item(v, 3), 0)) == 5);
  const tc_pv *d = item(v, 4);
  CHECK(d && d->kind == TC_PV_DICT && d->n == 3);
  CHECK_EQ_INT(int_of(tc_pv_get(d, "k")), 8);
  done();
}

static void test_memo_bounds(void) {
  tc_pv *v = NULL;
  CHECK_ERR(parse(LIT("\x80\x04h\x03."), &v), TCUDA_ERROR_PARSE, "BINGET at offset 2: memo index 3 was never stored");
  CHECK_ERR(parse(LIT("\x80\x04j\xff\xff\xff\xff."), &v), TCUDA_ERROR_PARSE, "memo index 4294967295 was never stored");
  /* a hostile index is refused, not allocated */
  CHECK_ERR(parse(LIT("\x80\x04Nr\xff\xff\xff\xff."), &v), TCUDA_ERROR_PARSE,
            "LONG_BINPUT at offset 3: memo index 4294967295 is beyond the 1 values and memo stores read so");
  CHECK_ERR(parse(LIT("\x80\x04N\x94q\x03."), &v), TCUDA_ERROR_PARSE, "memo index 3 is beyond the 2 values");
  /* one value memoized again and again, as Python allows */
  CHECK_OK(parse(LIT("\x80\x04K\x09\x94\x94\x94\x94\x94\x30h\x04."), &v));
  CHECK_EQ_INT(int_of(v), 9);
  CHECK_ERR(parse(LIT("\x80\x04q\x00."), &v), TCUDA_ERROR_PARSE, "BINPUT at offset 2: needs 1 value");
  /* puts out of order, overwrites, then MEMOIZE at the memo's size */
  CHECK_OK(parse(LIT("\x80\x04(K\x01q\x01K\x02q\x00K\x03q\x01\x94h\x01h\x00h\x02l."), &v));
  CHECK(v && v->n == 6);
  CHECK_EQ_INT(int_of(item(v, 3)), 3);
  CHECK_EQ_INT(int_of(item(v, 4)), 2);
  CHECK_EQ_INT(int_of(item(v, 5)), 3);
  done();
}

static void test_mark_depth_limit(void) {
  char p[2 * TC_PV_MAX_DEPTH + 8];
  size_t n = 0;
  p[n++] = '\x80';
  p[n++] = 4;
  for (int i = 0; i < TC_PV_MAX_DEPTH; i++) p[n++] = '(';
  for (int i = 0; i < TC_PV_MAX_DEPTH; i++) p[n++] = 'l';
  p[n++] = '.';
  tc_pv *v = NULL;
  CHECK_OK(parse(p, n, &v));
  int depth = 0;
  for (const tc_pv *x = v; x && x->kind == TC_PV_LIST; x = x->n ? x->u.items[0] : NULL) depth++;
  CHECK_EQ_INT(depth, TC_PV_MAX_DEPTH);
  memmove(p + 3, p + 2, n - 2); /* one MARK more */
  CHECK_ERR(parse(p, n + 1, &v), TCUDA_ERROR_PARSE, "MARK at offset 514: MARKs nest deeper than 512 levels");
  done();
}

static void test_pickle_utf8(void) {
  static const struct { const char *s; size_t n; } bad[] = {
      {"\xc3\x28", 2}, {"\xc0\x80", 2}, {"\xed\xa0", 2}, {"\xf4\x90\x80\x80", 4},
      {"a\xe4\xb8", 3}, {"\xff", 1}, {"\x80", 1}, {"\xf8\x88\x80\x80\x80", 5},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char p[32] = "\x80\x04\x8c";
    p[3] = (char)bad[i].n;
    memcpy(p + 4, bad[i].s, bad[i].n);
    p[4 + bad[i].n] = '.';
    tc_pv *v = NULL;
    char want[96];
    snprintf(want, sizeof want, "SHORT_BINUNICODE at offset 2: invalid UTF-8 at byte offset %d", i == 4 ? 5 : 4);
    CHECK_ERR(parse(p, 5 + bad[i].n, &v), TCUDA_ERROR_PARSE, want);
  }
  /* the same bytes are fine as bytes; the largest code point and a NUL are fine as text */
  tc_pv *v = NULL;
  CHECK_OK(parse(LIT("\x80\x04\x43\x02\xc3\x28."), &v));
  CHECK(v && v->kind == TC_PV_BYTES);
  CHECK_OK(parse(LIT("\x80\x04\x8c\x05\xf4\x8f\xbf\xbf\x00."), &v));
  CHECK(v && v->kind == TC_PV_STR && v->n == 5 && v->u.s[5] == 0);
  /* a lone surrogate, as python3's pickle.dumps('a\udc80', 4) writes it, reads as U+FFFD */
  CHECK_OK(parse(LIT("\x80\x04\x95\x08\x00\x00\x00\x00\x00\x00\x00\x8c\x04" "a\xed\xb2\x80\x94."), &v));
  CHECK(v && v->kind == TC_PV_STR && v->n == 4 && !memcmp(v->u.s, "a\xef\xbf\xbd", 4));
  done();
}

static void test_frame_bounds(void) {
  tc_pv *v = NULL;
  CHECK_ERR(parse(LIT("\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00N."), &v), TCUDA_ERROR_PARSE,
            "pickle truncated: opcode FRAME at offset 2 needs 16 more bytes, 2 remain");
  CHECK_ERR(parse(LIT("\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xffN."), &v), TCUDA_ERROR_PARSE, "FRAME at offset 2");
  CHECK_ERR(parse(LIT("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xffN."), &v), TCUDA_ERROR_PARSE,
            "BINUNICODE8 at offset 2 needs 18446744073709551615 more bytes, 2 remain");
  done();
}

static void test_list_growth(void) {
  /* 300 APPENDS of 1000 items, then 5000 single APPENDs */
  size_t cap = 2 + 1 + 300 * (2 + 2000) + 5000 * 3 + 2, n = 0;
  char *p = malloc(cap);
  p[n++] = '\x80';
  p[n++] = 4;
  p[n++] = ']';
  for (int b = 0; b < 300; b++) {
    p[n++] = '(';
    for (int i = 0; i < 1000; i++) p[n++] = 'K', p[n++] = (char)((b + i) & 0xff);
    p[n++] = 'e';
  }
  for (int i = 0; i < 5000; i++) p[n++] = 'K', p[n++] = (char)(i & 0xff), p[n++] = 'a';
  p[n++] = '.';
  tc_pv *v = NULL;
  CHECK_OK(parse(p, n, &v));
  CHECK(v && v->kind == TC_PV_LIST && v->n == 305000);
  int bad = 0;
  for (size_t i = 0; v && i < v->n; i++) {
    int64_t want = i < 300000 ? (int64_t)((i / 1000 + i % 1000) & 0xff) : (int64_t)((i - 300000) & 0xff);
    bad += v->u.items[i]->u.i != want;
  }
  CHECK_EQ_INT(bad, 0);
  free(p);
  done();
}

static void test_snapshot_pickle_equals_json(void) {
  size_t np = 0, nj = 0;
  char *p = read_data("whatif/tf_default.pickle", &np), *j = read_data("whatif/tf_default.json", &nj);
  if (p && j) {
    tc_arena *a1 = tc_arena_create(), *a2 = tc_arena_create();
    tc_pv *vp = NULL, *vj = NULL;
    CHECK_OK(tc_pv_parse("t", p, np, NULL, a1, &vp));
    CHECK_OK(tc_pv_parse("t", j, nj, NULL, a2, &vj));
    CHECK(pv_eq(vp, vj, 0));
    /* values that python3's json module printed for this file */
    const tc_pv *seg = item(tc_pv_get(vp, "segments"), 0);
    CHECK_EQ_INT(int_of(tc_pv_get(seg, "device")), 0);
    CHECK_EQ_INT(int_of(tc_pv_get(seg, "address")), 139986775048192);
    CHECK_EQ_INT(int_of(tc_pv_get(seg, "total_size")), 132120576);
    CHECK(is_str(tc_pv_get(seg, "segment_type"), "large"));
    const tc_pv *pool = tc_pv_get(seg, "segment_pool_id");
    CHECK(pool && pool->kind == TC_PV_TUPLE && pool->n == 2);
    CHECK(tc_pv_get(seg, "is_expandable") && tc_pv_get(seg, "is_expandable")->kind == TC_PV_BOOL);
    /* a changed value is seen */
    const tc_pv *addr = tc_pv_get(seg, "address");
    if (addr) {
      ((tc_pv *)addr)->u.i++;
      CHECK(!pv_eq(vp, vj, 0));
    }
    tc_arena_destroy(a1);
    tc_arena_destroy(a2);
  }
  free(p);
  free(j);
}

static void test_recorded_snapshots_parse(void) {
  static const char *files[] = {"cnn_default", "cnn_expandable", "cnn_limit", "graph_pool", "kv_decoder",
                                "side_stream", "tf_default", "tf_expandable", "tf_gc", "tf_limit",
                                "tf_msplit128", "tf_rp2", "tf_trunc", "unet"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char name[96];
    snprintf(name, sizeof name, "whatif/%s.pickle", files[i]);
    size_t n = 0;
    char *p = read_data(name, &n);
    if (!p) continue;
    tc_pv *v = NULL;
    CHECK_OK(parse(p, n, &v));
    const tc_pv *traces = tc_pv_get(v, "device_traces");
    CHECK(traces && traces->kind == TC_PV_LIST && traces->n >= 1);
    const tc_pv *e = item(item(traces, 0), 0);
    CHECK(tc_pv_as_str(tc_pv_get(e, "action")) != NULL);
    CHECK(tc_pv_get(v, "segments") && tc_pv_get(v, "allocator_settings"));
    free(p);
  }
  done();
}

static void test_sniffing(void) {
  tc_pv *v = NULL;
  CHECK_ERR(parse("", 0, &v), TCUDA_ERROR_PARSE, "test: the file is empty");
  CHECK_ERR(parse(LIT("hello"), &v), TCUDA_ERROR_PARSE,
            "test: the file is neither a pickle (protocol 2 to 5) nor JSON");
  CHECK_ERR(parse(LIT("123"), &v), TCUDA_ERROR_PARSE, "neither a pickle");
  CHECK_ERR(parse(LIT("\xef\xbb\xbf  "), &v), TCUDA_ERROR_PARSE, "neither a pickle");
  CHECK_OK(parse(LIT("\xef\xbb\xbf \r\n\t{}"), &v));
  CHECK(v && v->kind == TC_PV_DICT && v->n == 0);
  CHECK_OK(parse(LIT(" [1]"), &v));
  CHECK(v && v->kind == TC_PV_LIST && v->n == 1);
  CHECK_OK(parse(LIT("\x80\x04N."), &v));
  CHECK(v && v->kind == TC_PV_NONE);
  tc_arena *ar = tc_arena_create();
  CHECK_ERR(tc_pv_parse("f", NULL, 4, NULL, ar, &v), TCUDA_ERROR_INVALID_ARGUMENT, "f: data is NULL");
  CHECK_ERR(tc_pv_parse("f", "{}", 2, NULL, NULL, &v), TCUDA_ERROR_INVALID_ARGUMENT, "f: ar is NULL");
  CHECK_ERR(tc_pv_json("f", "{}", 2, NULL, ar, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "f: out is NULL");
  tc_arena_destroy(ar);
  done();
}

static void test_json_values(void) {
  tc_pv *v = NULL;
  CHECK_OK(parse(LIT("[0, -0, 9223372036854775807, -9223372036854775808, 9223372036854775808, 1e2, -1.5E-3, "
                     "0.5, true, false, null, NaN, Infinity, -Infinity, \"\", {\"a\": {}, \"a\": []}, 1e999]"),
                 &v));
  CHECK(v && v->n == 17);
  if (!v || v->n != 17) {
    done();
    return;
  }
  static const int64_t ints[] = {0, 0, INT64_MAX, INT64_MIN};
  for (int i = 0; i < 4; i++) {
    CHECK(item(v, i)->kind == TC_PV_INT);
    CHECK_EQ_INT(int_of(item(v, i)), ints[i]);
  }
  static const double fl[] = {9223372036854775808.0, 100.0, -1.5e-3, 0.5};
  for (int i = 0; i < 4; i++) CHECK(item(v, 4 + i)->kind == TC_PV_FLOAT && item(v, 4 + i)->u.f == fl[i]);
  CHECK(item(v, 8)->kind == TC_PV_BOOL && item(v, 8)->u.i == 1);
  CHECK(item(v, 9)->kind == TC_PV_BOOL && item(v, 9)->u.i == 0);
  CHECK(item(v, 10)->kind == TC_PV_NONE);
  CHECK(item(v, 11)->kind == TC_PV_FLOAT && isnan(item(v, 11)->u.f));
  CHECK(item(v, 12)->u.f == INFINITY && item(v, 13)->u.f == -INFINITY && item(v, 16)->u.f == INFINITY);
  CHECK(is_str(item(v, 14), ""));
  const tc_pv *d = item(v, 15);
  CHECK(d->kind == TC_PV_DICT && d->n == 2 && tc_pv_get(d, "a")->kind == TC_PV_LIST); /* the last wins */
  done();
}

static void test_json_escapes(void) {
  tc_pv *v = NULL;
  CHECK_OK(parse(LIT("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\u00e9\\u4E2D\\ud83d\\ude00\", \"a\\u0000b\", "
                     "\"h\xc3\xa9\xf0\x9f\x98\x80\"]"),
                 &v));
  CHECK(v && v->n == 4);
  if (!v || v->n != 4) {
    done();
    return;
  }
  CHECK(is_str(item(v, 0), "\"\\/\b\f\n\r\t"));
  CHECK(is_str(item(v, 1), "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"));
  CHECK(item(v, 2)->n == 3 && !memcmp(item(v, 2)->u.s, "a\0b", 4));
  CHECK(is_str(item(v, 3), "h\xc3\xa9\xf0\x9f\x98\x80"));
  done();
}

static void test_json_surrogates(void) {
  tc_pv *v = NULL;
  CHECK_ERR(parse(LIT("[\"\\ud83d\"]"), &v), TCUDA_ERROR_PARSE, "JSON line 1 column 3: lone surrogate \\ud83d");
  CHECK_ERR(parse(LIT("[\"\\ude00\\ud83d\"]"), &v), TCUDA_ERROR_PARSE, "lone surrogate \\ude00");
  CHECK_ERR(parse(LIT("[\"\\ud83d\\u0041\"]"), &v), TCUDA_ERROR_PARSE, "lone surrogate \\ud83d");
  CHECK_ERR(parse(LIT("[\"\\ud83dx\\ude00\"]"), &v), TCUDA_ERROR_PARSE, "lone surrogate");
  CHECK_ERR(parse(LIT("[\"\\ud83d\\ud83d\"]"), &v), TCUDA_ERROR_PARSE, "lone surrogate");
  CHECK_ERR(parse(LIT("[\"\\u12\"]"), &v), TCUDA_ERROR_PARSE, "four hex digits");
  CHECK_ERR(parse(LIT("[\"\\u12g4\"]"), &v), TCUDA_ERROR_PARSE, "four hex digits");
  CHECK_ERR(parse(LIT("[\"\\x\"]"), &v), TCUDA_ERROR_PARSE, "invalid escape '\\x'");
  done();
}

static void test_json_errors(void) {
  static const struct { const char *in; const char *msg; } bad[] = {
      {"[1] x", "test: JSON line 1 column 5: unexpected 'x' after the JSON value"},
      {"{\n  \"a\": x}", "JSON line 2 column 8: unexpected 'x' where a value is expected"},
      {"[\"a\tb\"]", "line 1 column 4: control character 0x09 in a string"},
      {"[\"\xc3\x28\"]", "line 1 column 3: invalid UTF-8 in a string"},
      {"[\"\xe9\"]", "invalid UTF-8"},
      {"[1,]", "column 4: unexpected ']' where a value is expected"},
      {"{\"a\" 1}", "expected ':', found '1'"},
      {"{\"a\": 1,}", "expected a string key, found '}'"},
      {"{1: 2}", "expected a string key"},
      {"[1 2]", "expected ',' or ']', found '2'"},
      {"{\"a\": 1]", "expected ',' or '}', found ']'"},
      {"[\"abc", "the string is not terminated"},
      {"[1, [2", "the input ends inside an array"},
      {"[01]", "expected ',' or ']', found '1'"},
      {"[1.]", "a digit must follow the decimal point"},
      {"[.5]", "unexpected '.'"},
      {"[+1]", "unexpected '+'"},
      {"[1e]", "a digit must follow the exponent mark"},
      {"[-]", "invalid number"},
      {"[tru]", "unexpected 't'"},
      {"[nan]", "unexpected 'n'"},
      {"[-Inf]", "unexpected '-'"},
      {"[\"a\"\x01]", "found 0x01"},
      {"[", "the input ends where a value is expected"},
      {"\xef\xbb\xbf[1,\n\xc3\xa9]", "line 2 column 1: unexpected 0xc3"},
      {"[\"\xc3\xa9\xc3\xa9\", ?]", "line 1 column 8: unexpected '?'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    tc_pv *v = NULL;
    tcuda_status s = parse(bad[i].in, strlen(bad[i].in), &v);
    if (s != TCUDA_ERROR_PARSE || v || !strstr(tcuda_last_error(), bad[i].msg)) {
      fprintf(stderr, "JSON case %zu: %s: '%s' lacks '%s'\n", i, tcuda_status_name(s), tcuda_last_error(), bad[i].msg);
      tc_failures++;
    }
  }
  /* any JSON value at the top, when asked for JSON directly */
  tc_pv *v = NULL;
  tc_arena *ar = tc_arena_create();
  CHECK_OK(tc_pv_json("t", LIT(" 42 "), NULL, ar, &v));
  CHECK(v && int_of(v) == 42);
  CHECK_ERR(tc_pv_json("t", "", 0, NULL, ar, &v), TCUDA_ERROR_PARSE, "t: JSON line 1 column 1: the input ends");
  tc_arena_destroy(ar);
  done();
}

static void test_json_depth_limit(void) {
  char p[2 * TC_PV_MAX_DEPTH + 4];
  for (int i = 0; i < TC_PV_MAX_DEPTH; i++) p[i] = '[', p[TC_PV_MAX_DEPTH + i] = ']';
  tc_pv *v = NULL;
  CHECK_OK(parse(p, 2 * TC_PV_MAX_DEPTH, &v));
  char q[2 * TC_PV_MAX_DEPTH + 4];
  q[0] = '[';
  memcpy(q + 1, p, 2 * TC_PV_MAX_DEPTH);
  q[2 * TC_PV_MAX_DEPTH + 1] = ']';
  CHECK_ERR(parse(q, 2 * TC_PV_MAX_DEPTH + 2, &v), TCUDA_ERROR_PARSE,
            "JSON line 1 column 513: nesting deeper than 512 levels");
  /* objects count too */
  char o[8 * TC_PV_MAX_DEPTH];
  size_t n = 0;
  for (int i = 0; i <= TC_PV_MAX_DEPTH; i++) memcpy(o + n, "{\"a\":", 5), n += 5;
  CHECK_ERR(parse(o, n, &v), TCUDA_ERROR_PARSE, "nesting deeper than 512 levels");
  done();
}

static void test_accessors(void) {
  tc_pv *v = NULL;
  /* {'k': 1, 2: 'x', 'k': True, 'f': 2.5, 's': 'str', 't': (1,)} with a non-str key */
  CHECK_OK(parse(LIT("\x80\x04}(\x8c\x01kK\x01K\x02\x8c\x01x\x8c\x01k\x88\x8c\x01" "fG@\x04\x00\x00\x00\x00\x00\x00"
                     "\x8c\x01s\x8c\x03str\x8c\x01tK\x01\x85u."),
                 &v));
  int64_t i = 0;
  double f = 0;
  CHECK(tc_pv_as_int(tc_pv_get(v, "k"), &i) && i == 1); /* True, the last 'k' */
  CHECK(tc_pv_get(v, "k")->kind == TC_PV_BOOL);
  CHECK(tc_pv_as_double(tc_pv_get(v, "k"), &f) && f == 1.0);
  CHECK(tc_pv_as_double(tc_pv_get(v, "f"), &f) && f == 2.5);
  CHECK(!tc_pv_as_int(tc_pv_get(v, "f"), &i));
  CHECK(!strcmp(tc_pv_as_str(tc_pv_get(v, "s")), "str"));
  CHECK(!tc_pv_as_str(tc_pv_get(v, "f")));
  CHECK(!tc_pv_get(v, "x") && !tc_pv_get(v, "missing") && !tc_pv_get(v, ""));
  CHECK(!tc_pv_get(tc_pv_get(v, "s"), "k") && !tc_pv_get(NULL, "k"));
  tc_pv *const *it = NULL;
  size_t n = 0;
  CHECK(tc_pv_as_seq(tc_pv_get(v, "t"), &it, &n) && n == 1 && int_of(it[0]) == 1);
  CHECK(!tc_pv_as_seq(v, &it, &n) && !tc_pv_as_seq(NULL, &it, &n));
  CHECK(!tc_pv_as_int(NULL, &i) && !tc_pv_as_double(NULL, &f) && !tc_pv_as_str(NULL));
  done();
}

/* A pickle or JSON dict of n keys "k0".."k{n-1}" (value: the key's number),
 * then "k3" again (value -1), a non-str key 7, and "a\0b"; tc_pv_get must
 * agree with a scan from the end (the oracle), indexed or not. */
static size_t dict_doc(char *buf, size_t cap, int n, int json) {
  size_t m = 0;
  if (json) {
    m += (size_t)snprintf(buf + m, cap - m, "{");
    for (int i = 0; i < n; i++) m += (size_t)snprintf(buf + m, cap - m, "\"k%d\": %d, ", i, i);
    m += (size_t)snprintf(buf + m, cap - m, "\"k3\": -1, \"a\\u0000b\": 5}");
    return m;
  }
  m += (size_t)snprintf(buf + m, cap - m, "\x80\x04}(");
  for (int i = 0; i <= n; i++) {
    char k[16];
    int kn = snprintf(k, sizeof k, "k%d", i < n ? i : 3);
    buf[m++] = (char)0x8c;
    buf[m++] = (char)kn;
    memcpy(buf + m, k, (size_t)kn);
    m += (size_t)kn;
    buf[m++] = 'J';
    int32_t v = i < n ? i : -1;
    memcpy(buf + m, &v, 4);
    m += 4;
  }
  memcpy(buf + m, "K\x07N\x8c\x03" "a\0bK\x05u.", 12);
  return m + 12;
}

static const tc_pv *get_oracle(const tc_pv *d, const char *key, size_t kn) {
  for (size_t i = d->n; i-- > 0;) {
    const tc_pv *k = d->u.items[2 * i];
    if (k->kind == TC_PV_STR && k->n == kn && !memcmp(k->u.s, key, kn)) return d->u.items[2 * i + 1];
  }
  return NULL;
}

static void test_dict_index(void) {
  static char buf[1 << 16];
  int sizes[] = {0, 1, TC_PV_INDEX_MIN - 1, TC_PV_INDEX_MIN, TC_PV_INDEX_MIN + 1, 100, 2000};
  for (int json = 0; json < 2; json++)
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
      int n = sizes[t];
      size_t len = dict_doc(buf, sizeof buf, n, json);
      tc_pv *v = NULL;
      CHECK_OK(parse(buf, len, &v));
      if (!v) continue;
      CHECK_EQ_INT(v->n, (size_t)n + (json ? 2 : 3));
      for (int i = -2; i < n + 2; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        CHECK(tc_pv_get(v, k) == get_oracle(v, k, strlen(k)));
      }
      int64_t x = 0;
      if (n > 3) CHECK(tc_pv_as_int(tc_pv_get(v, "k3"), &x) && x == -1); /* the last duplicate */
      CHECK(!tc_pv_get(v, "a") && !tc_pv_get(v, "") && !tc_pv_get(v, "k") && !tc_pv_get(v, "zzz"));
      CHECK(get_oracle(v, "a\0b", 3) != NULL);
    }
  /* a dict grown after it was memoized and fetched again (SETITEM on a GET) */
  char p[4096];
  size_t m = 0;
  memcpy(p, "\x80\x04}\x94", 4);
  m = 4;
  for (int i = 0; i < 20; i++) {
    char k[8];
    int kn = snprintf(k, sizeof k, "g%d", i);
    p[m++] = 'h';
    p[m++] = 0;
    p[m++] = (char)0x8c;
    p[m++] = (char)kn;
    memcpy(p + m, k, (size_t)kn);
    m += (size_t)kn;
    p[m++] = 'K';
    p[m++] = (char)i;
    p[m++] = 's';
    p[m++] = '0';
  }
  p[m++] = '.';
  tc_pv *v = NULL;
  CHECK_OK(parse(p, m, &v));
  int64_t x = -1;
  CHECK(v && v->n == 20 && tc_pv_as_int(tc_pv_get(v, "g17"), &x) && x == 17);
  done();
}

static void test_budget(void) {
  tc_pv_budget b;
  tc_pv_budget_init(&b, 0, 1000);
  CHECK_EQ_INT(b.limit, 1000 * (uint64_t)TC_PV_WORK_PER_BYTE + TC_PV_WORK_MIN);
  CHECK_EQ_INT(b.used, 0);
  tc_pv_budget_init(&b, 0, SIZE_MAX);
  CHECK(b.limit >= TC_PV_WORK_MIN); /* saturates, never wraps */
  tc_pv_budget_init(&b, 77, 1000);
  CHECK_EQ_INT(b.limit, 77);
  /* [x, x, ..., x]: one dict and 300 memo references to it */
  static char p[2048];
  size_t m = 0;
  memcpy(p, "\x80\x04](}\x94", 6);
  m = 6;
  for (int i = 0; i < 299; i++) p[m++] = 'h', p[m++] = 0;
  memcpy(p + m, "e.", 2);
  m += 2;
  tc_arena *ar = tc_arena_create();
  tc_pv *v = NULL;
  tc_pv_budget_init(&b, 0, m);
  CHECK_OK(tc_pv_parse("t", p, m, &b, ar, &v));
  CHECK(b.used >= 301 && b.used < 400); /* each reference counts */
  tc_pv_budget_init(&b, 250, m);
  CHECK_ERR(tc_pv_parse("t", p, m, &b, ar, &v), TCUDA_ERROR_PARSE,
            "t: the input needs more work than its budget of 250 units");
  CHECK(v == NULL);
  /* JSON counts its values too; a budget shared with later work keeps counting */
  tc_pv_budget_init(&b, 5, 0);
  CHECK_ERR(tc_pv_json("j", LIT("[1, 2, 3, 4, 5, 6]"), &b, ar, &v), TCUDA_ERROR_PARSE, "budget of 5 units");
  tc_pv_budget_init(&b, 100, 0);
  CHECK_OK(tc_pv_json("j", LIT("[1, 2, 3]"), &b, ar, &v));
  CHECK_EQ_INT(b.used, 4);
  CHECK_OK(tc_pv_spend("j", &b, 96));
  CHECK_ERR(tc_pv_spend("j", &b, 1), TCUDA_ERROR_PARSE, "j: the input needs more work than its budget of 100");
  tc_arena_destroy(ar);
}

static void test_str_lengths(void) {
  tc_pv *v = NULL;
  /* ["alloc\0junk", "alloc"] */
  CHECK_OK(parse(LIT("[\"alloc\\u0000junk\", \"alloc\"]"), &v));
  tc_pv *const *it = NULL;
  size_t n = 0, len = 0;
  CHECK(tc_pv_as_seq(v, &it, &n) && n == 2);
  if (n == 2) {
    CHECK(tc_pv_as_strn(it[0], &len) && len == 10);
    CHECK(!tc_pv_is_str(it[0], "alloc") && tc_pv_is_str(it[1], "alloc") && !tc_pv_is_str(it[1], "allo"));
    CHECK(!tc_pv_as_strn(v, &len) && !tc_pv_is_str(NULL, "alloc"));
  }
  done();
}

static void test_arena(void) {
  tc_arena *ar = tc_arena_create();
  CHECK(ar != NULL);
  size_t sizes[] = {0, 1, 15, 16, 17, 100, 4096, 70000, 1 << 20, 3, 5 << 20};
  for (int r = 0; r < 10; r++)
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
      unsigned char *p = tc_arena_alloc(ar, sizes[k]);
      CHECK(p && ((uintptr_t)p & 15) == 0);
      size_t z = 0;
      for (size_t j = 0; p && j < sizes[k]; j += 97) z += p[j];
      CHECK_EQ_INT(z, 0);
      if (p && sizes[k]) memset(p, 0xab, sizes[k]);
    }
  CHECK(tc_arena_alloc(ar, SIZE_MAX - 3) == NULL);
  tc_arena_destroy(ar);
  tc_arena_destroy(NULL);
}

TC_MAIN(T(test_protocols_2_to_5), T(test_memo_shares_nodes), T(test_list_appended_to_itself),
        T(test_bytearray8_is_bytes), T(test_big_ints), T(test_refused_opcodes), T(test_protocol_range),
        T(test_truncation_at_every_byte), T(test_stack_discipline), T(test_memo_bounds), T(test_mark_depth_limit),
        T(test_pickle_utf8), T(test_frame_bounds), T(test_list_growth), T(test_snapshot_pickle_equals_json),
        T(test_recorded_snapshots_parse), T(test_sniffing), T(test_json_values), T(test_json_escapes),
        T(test_json_surrogates), T(test_json_errors), T(test_json_depth_limit), T(test_accessors), T(test_dict_index), T(test_budget),
        T(test_str_lengths), T(test_arena))
