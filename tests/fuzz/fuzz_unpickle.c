/* libFuzzer: the snapshot readers (src/replay/pyval.h) on hostile bytes:
 * tc_pv_parse (the unpickler, or JSON after sniffing), and the JSON reader
 * on every input that is not a pickle. A refusal is TCUDA_ERROR_PARSE with
 * a message and no tree; an accepted input gives a tree whose every node
 * (walked within a budget: the memo makes it a graph) is well formed, and
 * the same tree when read again. */
#include "replay/pyval.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

#define WALK_BUDGET 200000
#define WALK_DEPTH 600

/* Checks v and what it holds, up to *budget nodes; returns a hash of them. */
static uint64_t walk(const tc_pv *v, int depth, long *budget) {
  if (!v) FAIL("a NULL node");
  if (depth > WALK_DEPTH || --*budget < 0) return 0;
  uint64_t h = (uint64_t)v->kind * 0x9e3779b97f4a7c15ull + v->n;
  switch (v->kind) {
  case TC_PV_NONE: break;
  case TC_PV_BOOL:
    if (v->u.i != 0 && v->u.i != 1) FAIL("a bool of %lld", (long long)v->u.i);
    h ^= (uint64_t)v->u.i;
    break;
  case TC_PV_INT: h ^= (uint64_t)v->u.i; break;
  case TC_PV_FLOAT: {
    uint64_t b;
    memcpy(&b, &v->u.f, 8);
    h ^= v->u.f == v->u.f ? b : 1; /* NaN payloads may differ */
    break;
  }
  case TC_PV_STR:
  case TC_PV_BYTES:
    if (!v->u.s) FAIL("text without bytes");
    if (v->u.s[v->n]) FAIL("text not NUL-terminated");
    if (v->kind == TC_PV_STR && tc_pv_utf8_valid((const unsigned char *)v->u.s, v->n) != v->n)
      FAIL("a STR that is not valid UTF-8");
    for (uint32_t i = 0; i < v->n; i++) h = h * 31 + (unsigned char)v->u.s[i];
    break;
  case TC_PV_LIST:
  case TC_PV_TUPLE:
  case TC_PV_DICT: {
    size_t slots = (size_t)v->n * (v->kind == TC_PV_DICT ? 2 : 1);
    if (slots && !v->u.items) FAIL("a container of %u without items", v->n);
    for (size_t i = 0; i < slots && *budget > 0; i++) h = h * 1000003 + walk(v->u.items[i], depth + 1, budget);
    if (v->kind == TC_PV_DICT) { /* tc_pv_get (indexed or not) finds the last pair of a STR key */
      for (size_t i = 0; i < v->n && i < 64; i++) {
        const tc_pv *k = v->u.items[2 * i];
        if (k->kind != TC_PV_STR || strlen(k->u.s) != k->n) continue;
        const tc_pv *want = NULL;
        for (size_t j = v->n; j-- > 0 && !want;) {
          const tc_pv *kj = v->u.items[2 * j];
          if (kj->kind == TC_PV_STR && kj->n == k->n && !memcmp(kj->u.s, k->u.s, k->n)) want = v->u.items[2 * j + 1];
        }
        if (tc_pv_get(v, k->u.s) != want) FAIL("tc_pv_get gives the wrong value for the key '%s'", k->u.s);
      }
    }
    break;
  }
  default: FAIL("a node of kind %d", (int)v->kind);
  }
  return h;
}

static void one(const char *what,
                tcuda_status (*fn)(const char *, const void *, size_t, tc_pv_budget *, tc_arena *, tc_pv **),
                const uint8_t *data, size_t n) {
  uint64_t hash[2] = {0, 0};
  tcuda_status st[2];
  for (int r = 0; r < 2; r++) {
    tc_arena *ar = tc_arena_create();
    if (!ar) return;
    tc_pv *v = (tc_pv *)&hash; /* must be overwritten */
    st[r] = fn("fuzz", data, n, NULL, ar, &v);
    if (st[r] == TCUDA_SUCCESS) {
      long budget = WALK_BUDGET;
      hash[r] = walk(v, 0, &budget);
    } else {
      if (st[r] != TCUDA_ERROR_PARSE && st[r] != TCUDA_ERROR_HOST_OUT_OF_MEMORY)
        FAIL("%s: unexpected status %s", what, tcuda_status_name(st[r]));
      if (v) FAIL("%s: a tree with an error", what);
      if (strncmp(tcuda_last_error(), "fuzz: ", 6)) FAIL("%s: message '%s'", what, tcuda_last_error());
    }
    tc_arena_destroy(ar);
  }
  if (st[0] != st[1] || hash[0] != hash[1]) FAIL("%s: not repeatable", what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  one("tc_pv_parse", tc_pv_parse, data, n);
  if (!n || data[0] != 0x80) one("tc_pv_json", tc_pv_json, data, n);
  return 0;
}
