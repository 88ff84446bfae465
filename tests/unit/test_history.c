/* Memory history: the recorder's entries and ring buffer, the snapshot
 * document (decoded by python3's pickle/pickletools: only the opcodes
 * MemoryViz knows, torch's keys), JSON, the device hooks, snapshot on
 * OOM, replay --history, and every bad-input path. CPU only (simulated). */
#define _GNU_SOURCE
#include "harness.h"
#include "alloc/alloc.h"
#include "inspect/history.h"
#include "inspect/jsonwrite.h"
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB ((uint64_t)1 << 20)

static tc_backend *g_be;

static tc_alloc *sim_alloc(uint64_t capacity) {
  tc_sim_options o = {0};
  o.capacity = capacity;
  o.va = TC_SIM_VA_ASCENDING;
  g_be = NULL;
  tc_alloc *a = NULL;
  CHECK_OK(tc_backend_sim_create(&o, &g_be));
  CHECK_OK(tc_alloc_create(0, g_be, NULL, capacity, &a));
  return a;
}
static void sim_free(tc_alloc *a) {
  tc_alloc_destroy(a);
  tc_backend_sim_destroy(g_be);
}

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static void test_entries_and_meanings(void) {
  tc_alloc *a = sim_alloc(1ull << 34);
  tc_history *h = NULL;
  CHECK_OK(tc_history_create(0, 0, &h));
  tc_alloc_set_trace(a, tc_history_trace, h);
  int64_t t0 = now_us();
  uint64_t p = 0, q = 0;
  CHECK_OK(tc_alloc_malloc(a, 1000, 0, &p));     /* small: 2 MiB segment, 1024-byte block */
  CHECK_OK(tc_alloc_malloc(a, 3 * MiB, 7, &q));  /* large, stream 7: 20 MiB segment */
  CHECK_OK(tc_alloc_free(a, p));
  CHECK_OK(tc_alloc_free(a, q));
  CHECK_OK(tc_alloc_empty_cache(a));
  tc_history_copy c;
  CHECK_OK(tc_history_copy_take(h, &c));
  static const struct { tc_trace_action act; uint64_t size; uint64_t stream; } want[] = {
      {TC_TRACE_SEGMENT_ALLOC, 2 * MiB, 0}, {TC_TRACE_ALLOC, 1000, 0},
      {TC_TRACE_SEGMENT_ALLOC, 20 * MiB, 7}, {TC_TRACE_ALLOC, 3 * MiB, 7},
      {TC_TRACE_FREE_REQUESTED, 1000, 0}, {TC_TRACE_FREE_COMPLETED, 1000, 0},
      {TC_TRACE_FREE_REQUESTED, 3 * MiB, 7}, {TC_TRACE_FREE_COMPLETED, 3 * MiB, 7},
  };
  size_t nw = sizeof want / sizeof *want;
  CHECK(c.n >= nw + 2); /* + two segment_free from empty_cache */
  for (size_t i = 0; i < nw && i < c.n; i++) {
    CHECK_EQ_INT(c.e[i].action, want[i].act);
    CHECK_EQ_INT(c.e[i].size, want[i].size);
    CHECK_EQ_INT(c.e[i].stream, want[i].stream);
    CHECK_EQ_INT(c.e[i].nframes, 0);
    CHECK(c.e[i].time_us >= t0 - 1000 && c.e[i].time_us <= now_us() + 1000);
    if (i) CHECK(c.e[i].time_us >= c.e[i - 1].time_us);
  }
  if (c.n >= nw) {
    CHECK(c.e[1].addr == p && c.e[4].addr == p && c.e[5].addr == p);
    CHECK(c.e[0].addr == p); /* the block starts its segment */
  }
  if (c.n == nw + 2) CHECK(c.e[nw].action == TC_TRACE_SEGMENT_FREE && c.e[nw + 1].action == TC_TRACE_SEGMENT_FREE);
  CHECK(c.pcs == NULL);
  tc_history_copy_free(&c);
  tc_alloc_set_trace(a, NULL, NULL);
  tc_history_destroy(h);
  sim_free(a);
}

static void test_ring_buffer(void) {
  tc_alloc *a = sim_alloc(1ull << 34);
  tc_history *h = NULL;
  CHECK_OK(tc_history_create(5, 0, &h));
  tc_alloc_set_trace(a, tc_history_trace, h);
  uint64_t p[6];
  for (int i = 0; i < 6; i++) CHECK_OK(tc_alloc_malloc(a, 512u * (i + 1), 0, &p[i]));
  /* 1 segment_alloc + 6 allocs: the newest 5 are the allocs of sizes 2..6 x 512 */
  tc_history_copy c;
  CHECK_OK(tc_history_copy_take(h, &c));
  CHECK_EQ_INT(c.n, 5);
  for (size_t i = 0; i < c.n; i++) {
    CHECK_EQ_INT(c.e[i].action, TC_TRACE_ALLOC);
    CHECK_EQ_INT(c.e[i].size, 512u * (i + 2));
  }
  tc_history_copy_free(&c);
  /* shrink keeps the newest; grow then keeps everything new */
  CHECK_OK(tc_history_configure(h, 2, 0));
  CHECK_OK(tc_history_copy_take(h, &c));
  CHECK_EQ_INT(c.n, 2);
  if (c.n == 2) CHECK(c.e[0].size == 5 * 512 && c.e[1].size == 6 * 512);
  tc_history_copy_free(&c);
  CHECK_OK(tc_history_configure(h, 0, 1));
  for (int i = 0; i < 6; i++) CHECK_OK(tc_alloc_free(a, p[i]));
  CHECK_OK(tc_history_copy_take(h, &c));
  CHECK_EQ_INT(c.n, 2 + 12);
  if (c.n == 14) {
    CHECK_EQ_INT(c.e[0].nframes, 0); /* recorded before stacks were on */
    CHECK(c.e[2].nframes > 0 && c.pcs != NULL);
  }
  tc_history_copy_free(&c);
  tc_alloc_set_trace(a, NULL, NULL);
  tc_history_destroy(h);
  sim_free(a);
}

/* python3 checks the pickle: allowed opcodes, torch's keys, values. */
static const char *PYCHECK =
    "import sys, pickle, pickletools, json\n"
    "path, jpath = sys.argv[1], sys.argv[2]\n"
    "data = open(path, 'rb').read()\n"
    "allowed = {'PROTO','FRAME','EMPTY_DICT','EMPTY_LIST','EMPTY_TUPLE','MARK','SETITEM','SETITEMS','APPEND',\n"
    "  'APPENDS','DICT','LIST','TUPLE','TUPLE1','TUPLE2','TUPLE3','BININT','BININT1','BININT2','LONG1',\n"
    "  'BINFLOAT','SHORT_BINUNICODE','BINUNICODE','NEWTRUE','NEWFALSE','NONE','MEMOIZE','BINPUT',\n"
    "  'LONG_BINPUT','BINGET','LONG_BINGET','STOP'}\n"
    "ops = set()\n"
    "for op, arg, pos in pickletools.genops(data):\n"
    "  ops.add(op.name)\n"
    "  if op.name == 'PROTO': assert 2 <= arg <= 4, arg\n"
    "  if op.name == 'LONG1': assert len(data) and True\n"
    "bad = ops - allowed\n"
    "assert not bad, bad\n"
    "s = pickle.loads(data)\n"
    "assert list(s) == ['segments', 'device_traces', 'allocator_settings', 'external_annotations'], list(s)\n"
    "assert s['external_annotations'] == []\n"
    "segs = s['segments']\n"
    "assert len(segs) == 2, len(segs)\n"
    "for g in segs:\n"
    "  for k in ('device','address','total_size','allocated_size','active_size','requested_size','stream',\n"
    "            'segment_type','segment_pool_id','is_expandable','frames','blocks'):\n"
    "    assert k in g, k\n"
    "  assert g['segment_pool_id'] == (0, 0)\n"
    "  assert sum(b['size'] for b in g['blocks']) == g['total_size']\n"
    "  a = g['address']\n"
    "  for b in g['blocks']:\n"
    "    assert b['address'] == a and b['state'] in ('active_allocated','active_pending_free','inactive')\n"
    "    assert isinstance(b['frames'], list)\n"
    "    a += b['size']\n"
    "small = [g for g in segs if g['segment_type'] == 'small'][0]\n"
    "live = [b for b in small['blocks'] if b['state'] == 'active_allocated']\n"
    "assert len(live) == 1 and live[0]['requested_size'] == 1000, live\n"
    "assert live[0]['frames'] and all(set(f) == {'filename','line','name'} for f in live[0]['frames'])\n"
    "assert any('test_' in f['name'] or 'main' in f['name'] or f['filename'].endswith('test_history') for f in live[0]['frames']), live[0]['frames']\n"
    "big = [g for g in segs if g['segment_type'] == 'large'][0]\n"
    "assert big['stream'] == 1007, big['stream']\n"
    "tr = s['device_traces']\n"
    "assert len(tr) == 2 and tr[0] == [], [len(t) for t in tr]\n"
    "acts = [e['action'] for e in tr[1]]\n"
    "assert acts[:7] == ['segment_alloc','alloc','segment_alloc','alloc','alloc','free_requested',\n"
    "                    'free_completed'], acts\n"
    "assert 'oom' in acts and acts[-1] == 'snapshot', acts\n"
    "for e in tr[1]:\n"
    "  addr = 'device_free' if e['action'] == 'oom' else 'addr'\n"
    "  keys = ['action', addr, 'size', 'stream', 'time_us', 'compile_context', 'user_metadata']\n"
    "  if e['action'] != 'snapshot': keys.append('frames')  # torch's snapshot entry has no context\n"
    "  assert list(e) == keys, list(e)\n"
    "  assert e['compile_context'] == 'N/A' and e['user_metadata'] == '', e\n"
    "  assert ('device_free' in e) == (e['action'] == 'oom') and ('addr' in e) != (e['action'] == 'oom')\n"
    "  assert e['time_us'] > 1.6e15\n"
    "  assert all(set(f) == {'filename','line','name'} for f in e.get('frames', []))\n"
    "oom = [e for e in tr[1] if e['action'] == 'oom'][0]\n"
    "assert oom['size'] == 1 << 40 and oom['device_free'] > 0, oom\n"
    "st = s['allocator_settings']\n"
    "assert st['PYTORCH_CUDA_ALLOC_CONF'] == 'max_split_size_mb:64' and st['max_split_size'] == 64 << 20, st\n"
    "assert st['expandable_segments'] is False and st['garbage_collection_threshold'] == 0.0\n"
    "assert sorted(st['roundup_power2_divisions'], key=int) == [str(1 << k) for k in range(16)]\n"
    "assert list(st) == ['PYTORCH_CUDA_ALLOC_CONF', 'max_split_size', 'garbage_collection_threshold',\n"
    "  'expandable_segments', 'pinned_num_register_threads', 'release_lock_on_cudamalloc',\n"
    "  'pinned_use_cuda_host_register', 'graph_capture_record_stream_reuse', 'roundup_power2_divisions'], list(st)\n"
    "assert st['graph_capture_record_stream_reuse'] is False\n"
    "j = json.load(open(jpath))\n"
    "norm = lambda x: json.loads(json.dumps(x))\n"
    "for t in (j, s):\n"
    "  for e in t['device_traces'][1]: e.pop('time_us')\n"
    "  t['device_traces'][1] = [e for e in t['device_traces'][1] if e['action'] != 'snapshot']\n"
    "assert norm(s) == j, 'JSON differs from the pickle'\n"
    "print('pickle ok:', len(data), 'bytes, opcodes', sorted(ops))\n";

static int64_t stream_plus_1000(void *ctx, int64_t key) { return key + 1000; }

/* Two call sites with stacks of their own, for the context rules below. */
__attribute__((noinline)) static void ctx_alloc(tc_alloc *a, uint64_t size, uint64_t *p) {
  CHECK_OK(tc_alloc_malloc(a, size, 0, p));
  __asm__ volatile("" ::: "memory"); /* not a tail call: this frame stays */
}
__attribute__((noinline)) static void ctx_release(tc_alloc *a, uint64_t p) {
  CHECK_OK(tc_alloc_free(a, p));
  CHECK_OK(tc_alloc_empty_cache(a));
  __asm__ volatile("" ::: "memory");
}

static int same_stack(const tc_history_copy *c, size_t i, size_t j) {
  return c->e[i].nframes && c->e[i].nframes == c->e[j].nframes &&
         !memcmp(c->pcs + i * TC_HISTORY_DEPTH, c->pcs + j * TC_HISTORY_DEPTH, c->e[i].nframes * sizeof(void *));
}

static long find_entry(const tc_history_copy *c, tc_trace_action act, uint64_t addr) {
  for (size_t i = 0; i < c->n; i++)
    if (c->e[i].action == act && c->e[i].addr == addr) return (long)i;
  return -1;
}

/* torch's context rules for frames (its test_memory_plots_free_stack and
 * _free_segment_stack): "all" gives each event its own stack, "alloc" gives
 * a block's frees its allocation stack and a segment's free the segment's,
 * "state" no event any; and a live block keeps its allocation stack in the
 * snapshot however short the ring (torch keeps it on the block). */
static void test_context_modes(void) {
  for (int mode = 1; mode <= 3; mode++) {
    tc_alloc *a = sim_alloc(1ull << 34);
    tc_history *h = NULL;
    CHECK_OK(tc_history_create(0, mode, &h));
    tc_alloc_set_trace(a, tc_history_trace, h);
    uint64_t keep = 0, gone = 0;
    ctx_alloc(a, 15 * MiB, &keep);  /* a segment that stays */
    ctx_alloc(a, 12 * MiB, &gone);  /* a segment of its own */
    ctx_release(a, gone);           /* free_requested, free_completed, segment_free */
    tc_history_copy c;
    CHECK_OK(tc_history_copy_take(h, &c));
    long al = find_entry(&c, TC_TRACE_ALLOC, gone), sa = find_entry(&c, TC_TRACE_SEGMENT_ALLOC, gone);
    long fr = find_entry(&c, TC_TRACE_FREE_REQUESTED, gone), fc = find_entry(&c, TC_TRACE_FREE_COMPLETED, gone);
    long sf = find_entry(&c, TC_TRACE_SEGMENT_FREE, gone);
    CHECK(al >= 0 && sa >= 0 && fr >= 0 && fc >= 0 && sf >= 0);
    if (al >= 0 && sa >= 0 && fr >= 0 && fc >= 0 && sf >= 0) {
      if (mode == 1) {
        CHECK(c.e[al].nframes > 0 && c.e[fr].nframes > 0 && c.e[sf].nframes > 0);
        CHECK(!same_stack(&c, fr, al) && !same_stack(&c, sf, sa)); /* the freeing call's own */
      } else if (mode == 2) {
        CHECK(c.e[al].nframes > 0 && c.e[sa].nframes > 0);
        CHECK(same_stack(&c, fr, al) && same_stack(&c, fc, al)); /* the block's allocation stack */
        CHECK(same_stack(&c, sf, sa));                           /* the segment's (never split) */
      } else {
        for (size_t i = 0; i < c.n; i++) CHECK_EQ_INT(c.e[i].nframes, 0);
      }
    }
    /* the live block: one kept stack, the one its alloc had */
    CHECK_EQ_INT(c.nlive, 1);
    CHECK(c.live_kept);
    if (c.nlive == 1) {
      CHECK(c.e[c.n].addr == keep && c.e[c.n].nframes > 0);
      long ka = find_entry(&c, TC_TRACE_ALLOC, keep);
      if (mode != 3) CHECK(ka >= 0 && same_stack(&c, ka, c.n));
    }
    tc_history_copy_free(&c);
    /* a ring of one entry (torch's "state" recording) still shows it */
    CHECK_OK(tc_history_configure(h, 1, mode));
    CHECK_OK(tc_alloc_malloc(a, 4096, 0, &gone));
    CHECK_OK(tc_alloc_free(a, gone));
    tcuda_snapshot_t *snap = NULL;
    CHECK_OK(tc_alloc_snapshot(a, &snap));
    CHECK_OK(tc_history_copy_take(h, &c));
    CHECK_EQ_INT(c.n, 1);
    tc_snapshot_doc doc = {.snap = snap, .num_devices = 1, .traces = &c};
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(tc_snapshot_doc_encode("t", &doc, 1, &text, &len));
    if (text) {
      char want[96];
      snprintf(want, sizeof want, "{\"address\": %llu, \"size\": ", (unsigned long long)keep);
      const char *b = strstr(text, want);
      CHECK(b != NULL);
      const char *fr_at = b ? strstr(b, "\"frames\": [") : NULL;
      CHECK(fr_at && !strncmp(fr_at, "\"frames\": [{\"filename\"", strlen("\"frames\": [{\"filename\"")));
      if (tc_failures) fprintf(stderr, "  mode %d: %.300s\n", mode, b ? b : text);
      free(text);
    }
    tc_history_copy_free(&c);
    tc_snapshot_free(snap);
    /* stacks off: nothing is kept any more */
    CHECK_OK(tc_history_configure(h, 0, 0));
    CHECK_OK(tc_history_copy_take(h, &c));
    CHECK(c.nlive == 0 && !c.live_kept);
    tc_history_copy_free(&c);
    CHECK_OK(tc_alloc_free(a, keep));
    tc_alloc_set_trace(a, NULL, NULL);
    tc_history_destroy(h);
    sim_free(a);
  }
}

/* Which trace entries carry a "frames" key, as torch decides it. Paraphrase
 * of torch's sources: torch/csrc/cuda/Module.cpp (_memorySnapshot) writes
 * "frames" on a trace entry only when the entry holds a context, and
 * segments and blocks always (an empty list without one);
 * c10/cuda/CUDACachingAllocator.cpp (record_trace) keeps an entry's
 * context only when recording at RecordContext::ALLOC or above, gathers
 * the context of frees and of emptyCache only at ALL, lets a block's free
 * under ALLOC fall back to its allocation context, which exists only for
 * what was allocated while recording, and records the snapshot entry
 * without one. A segment's free under ALLOC falls back to the context
 * kept on the segment's first block object, which a split at the
 * segment's start moves to the tail and the next merge deletes: torch 2.11
 * on the H200 showed it for a 12 MiB segment of one block
 * (tests/python/diff_torch.py) and not for a small tensor's 2 MiB segment
 * (tests/gpu/torch_dropin.py, flush_history_context). So: "all" keys every
 * entry but the snapshot's, even one whose stack came out empty; "alloc"
 * the allocating entries, the frees of blocks allocated while it recorded
 * and of such segments never split; "state" and no stacks none. */
typedef struct {
  char action[24];
  uint64_t addr;
  int framed;
} keyed_entry;

/* The trace entries of the JSON document, with whether each has "frames". */
static size_t trace_keys(const char *doc, keyed_entry *out, size_t max) {
  const char *p = strstr(doc, "\"device_traces\": [");
  size_t n = 0;
  while (p && n < max && (p = strstr(p, "{\"action\": \""))) {
    p += strlen("{\"action\": \"");
    keyed_entry *k = &out[n];
    size_t len = strcspn(p, "\"");
    snprintf(k->action, sizeof k->action, "%.*s", (int)(len < sizeof k->action ? len : sizeof k->action - 1), p);
    const char *ad = strstr(p, "\"addr\": ");
    const char *md = strstr(p, "\"user_metadata\": \"\"");
    if (!md) break;
    k->addr = ad && ad < md ? strtoull(ad + strlen("\"addr\": "), NULL, 10) : 0;
    md += strlen("\"user_metadata\": \"\"");
    k->framed = !strncmp(md, ", \"frames\": [", strlen(", \"frames\": ["));
    CHECK(k->framed || *md == '}');
    n++;
    p = md;
  }
  return n;
}

static int keyed(const keyed_entry *k, size_t n, const char *action, uint64_t addr) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(k[i].action, action) && k[i].addr == addr) return k[i].framed;
  return -1; /* no such entry */
}

static void test_frames_key_rule(void) {
  /* mode: tc_history_create's stacks (0 none, 1 all, 2 alloc, 3 state) */
  for (int mode = 0; mode <= 3; mode++) {
    tc_alloc *a = sim_alloc(1ull << 34);
    uint64_t early = 0, keep = 0, gone = 0, small = 0;
    ctx_alloc(a, 11 * MiB, &early); /* allocated before recording: its own segment */
    tc_history *h = NULL;
    CHECK_OK(tc_history_create(0, mode, &h));
    tc_alloc_set_trace(a, tc_history_trace, h);
    ctx_alloc(a, 15 * MiB, &keep);
    ctx_alloc(a, 12 * MiB, &gone);
    ctx_release(a, gone);  /* free_requested, free_completed, segment_free */
    ctx_release(a, early); /* the same for a block whose allocation was not recorded */
    ctx_alloc(a, 48, &small); /* a small tensor: its 2 MiB segment is split */
    ctx_release(a, small);
    tcuda_snapshot_t *snap = NULL;
    CHECK_OK(tc_alloc_snapshot(a, &snap)); /* the "snapshot" entry */
    tc_history_copy c;
    CHECK_OK(tc_history_copy_take(h, &c));
    tc_snapshot_doc doc = {.snap = snap, .num_devices = 1, .traces = &c};
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(tc_snapshot_doc_encode("t", &doc, 1, &text, &len));
    keyed_entry k[64];
    size_t n = text ? trace_keys(text, k, 64) : 0;
    CHECK_EQ_INT(n, c.n);
    int all = mode == 1, alloc = mode == 2;
    struct { const char *action; uint64_t addr; int want; } rule[] = {
        {"alloc", keep, all || alloc},           {"segment_alloc", keep, all || alloc},
        {"alloc", gone, all || alloc},           {"free_requested", gone, all || alloc},
        {"free_completed", gone, all || alloc},  {"segment_free", gone, all || alloc},
        {"segment_free", small, all}, /* split at its start: torch lost the segment's context */
        {"free_requested", early, all},          {"free_completed", early, all},
        {"segment_free", early, all},            {"snapshot", 0, 0},
    };
    for (size_t i = 0; i < sizeof rule / sizeof *rule; i++) {
      int got = keyed(k, n, rule[i].action, rule[i].addr);
      if (got != rule[i].want)
        fprintf(stderr, "  mode %d: %s at %llu: frames key %d, torch's rule %d\n", mode, rule[i].action,
                (unsigned long long)rule[i].addr, got, rule[i].want);
      CHECK_EQ_INT(got, rule[i].want);
    }
    /* under "all" a context without frames still writes the key, empty */
    if (all && c.n) {
      c.e[0].nframes = 0;
      free(text);
      text = NULL;
      CHECK_OK(tc_snapshot_doc_encode("t", &doc, 1, &text, &len));
      n = text ? trace_keys(text, k, 64) : 0;
      CHECK(n > 0 && k[0].framed);
      CHECK(text && strstr(text, "\"user_metadata\": \"\", \"frames\": []}"));
    }
    free(text);
    tc_history_copy_free(&c);
    tc_snapshot_free(snap);
    CHECK_OK(tc_alloc_free(a, keep));
    tc_alloc_set_trace(a, NULL, NULL);
    tc_history_destroy(h);
    sim_free(a);
  }
}

static void test_document_pickle_and_json(void) {
  if (system("python3 -c 'import pickle, pickletools' 2>/dev/null") != 0) {
    TC_SKIP_PART("pickle decoding needs python3");
    return;
  }
  tc_alloc_config cfg;
  tc_alloc_config_default(&cfg);
  CHECK_OK(tc_alloc_config_parse("max_split_size_mb:64", &cfg));
  tc_sim_options o = {0};
  o.capacity = 1ull << 34;
  tc_backend *be = NULL;
  tc_alloc *a = NULL;
  CHECK_OK(tc_backend_sim_create(&o, &be));
  CHECK_OK(tc_alloc_create(1, be, &cfg, o.capacity, &a));
  tc_history *h = NULL;
  CHECK_OK(tc_history_create(0, 1, &h));
  tc_alloc_set_trace(a, tc_history_trace, h);
  uint64_t p = 0, q = 0, r = 0, big = 0;
  CHECK_OK(tc_alloc_malloc(a, 1000, 0, &p));
  CHECK_OK(tc_alloc_malloc(a, 3 * MiB, 7, &q));
  CHECK_OK(tc_alloc_malloc(a, 5000, 0, &r));
  CHECK_OK(tc_alloc_free(a, r));
  CHECK(tc_alloc_malloc(a, 1ull << 40, 0, &big) == TCUDA_ERROR_OUT_OF_MEMORY);
  tcuda_clear_error();
  tcuda_snapshot_t *snap = NULL;
  CHECK_OK(tc_alloc_snapshot(a, &snap));
  tc_history_copy tr[2];
  memset(tr, 0, sizeof tr);
  CHECK_OK(tc_history_copy_take(h, &tr[1]));
  tc_snapshot_doc doc = {.snap = snap, .num_devices = 2, .traces = tr, .cfg = &cfg,
                         .conf_text = "max_split_size_mb:64", .seg_stream = stream_plus_1000,
                         .trace_stream = NULL};
  char pk[] = "/tmp/tc_histtest_XXXXXX.pickle", js[] = "/tmp/tc_histtest_XXXXXX.json";
  int fd = mkstemps(pk, 7);
  close(fd);
  fd = mkstemps(js, 5);
  close(fd);
  CHECK_OK(tc_snapshot_doc_write("test", &doc, pk, 0));
  CHECK_OK(tc_snapshot_doc_write("test", &doc, js, 1));
  char py[] = "/tmp/tc_histtest_XXXXXX.py";
  fd = mkstemps(py, 3);
  if (fd >= 0) {
    CHECK(write(fd, PYCHECK, strlen(PYCHECK)) == (ssize_t)strlen(PYCHECK));
    close(fd);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 %s %s %s", py, pk, js);
    CHECK_EQ_INT(system(cmd), 0);
    unlink(py);
  }
  /* an unwritable path fails with the path named and leaves no file */
  CHECK_ERR(tc_snapshot_doc_write("test", &doc, "/nonexistent-dir/x.pickle", 0), TCUDA_ERROR_IO,
            "/nonexistent-dir/x.pickle");
  CHECK_ERR(tc_snapshot_doc_write("test", &doc, "", 0), TCUDA_ERROR_INVALID_ARGUMENT, "path is empty");
  CHECK_ERR(tc_snapshot_doc_write("test", &doc, NULL, 0), TCUDA_ERROR_INVALID_ARGUMENT, "path is NULL");
  unlink(pk);
  unlink(js);
  tc_history_copy_free(&tr[1]);
  tc_snapshot_free(snap);
  tc_alloc_set_trace(a, NULL, NULL);
  tc_history_destroy(h);
  tc_alloc_destroy(a);
  tc_backend_sim_destroy(be);
}

/* Large integers and floats round-trip through the LONG1/BINFLOAT paths. */
static void test_encoding_edges(void) {
  tcuda_block_info_t blk = {.address = 0xfedcba9876543210ull, .size = 1ull << 40, .requested_size = 65536,
                            .state = TCUDA_BLOCK_ACTIVE_PENDING_FREE};
  tcuda_segment_info_t seg = {.device = 0, .address = 0xfedcba9876543210ull, .total_size = 1ull << 40,
                              .stream = -5, .is_large = 1, .pool_id = {3, 1ull << 33}, .num_blocks = 1,
                              .blocks = &blk};
  tcuda_snapshot_t snap = {.num_segments = 1, .segments = &seg};
  tc_alloc_config cfg;
  tc_alloc_config_default(&cfg);
  cfg.garbage_collection_threshold = 0.625;
  cfg.expandable_segments = 1;
  tc_snapshot_doc doc = {.snap = &snap, .num_devices = 1, .cfg = &cfg};
  char *buf = NULL;
  size_t len = 0;
  CHECK_OK(tc_snapshot_doc_encode("t", &doc, 0, &buf, &len));
  CHECK(len > 2 && (unsigned char)buf[0] == 0x80 && buf[1] == 4 && buf[len - 1] == '.');
  char pk[] = "/tmp/tc_histtest_XXXXXX.pickle";
  int fd = mkstemps(pk, 7);
  CHECK(write(fd, buf, len) == (ssize_t)len);
  close(fd);
  free(buf);
  if (system("python3 -c '' 2>/dev/null") == 0) {
    char cmd[768];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import pickle; s = pickle.load(open('%s','rb')); g = s['segments'][0]; "
             "assert g['address'] == 0xfedcba9876543210 and g['total_size'] == 1 << 40 and g['stream'] == -5; "
             "assert g['segment_pool_id'] == (3, 1 << 33) and g['blocks'][0]['state'] == 'active_pending_free'; "
             "st = s['allocator_settings']; assert st['garbage_collection_threshold'] == 0.625; "
             "assert st['expandable_segments'] is True and st['max_split_size'] == -1; "
             "assert s['device_traces'] == [[]]\"",
             pk);
    CHECK_EQ_INT(system(cmd), 0);
  }
  unlink(pk);
  CHECK_OK(tc_snapshot_doc_encode("t", &doc, 1, &buf, &len));
  CHECK(strstr(buf, "\"address\": 18364758544493064720") != NULL);
  CHECK(strstr(buf, "\"segment_pool_id\": [3, 8589934592]") != NULL);
  free(buf);
}

/* The temporary file is created exclusively: a link planted at its old,
 * predictable name (PATH.tmp<pid>) is not followed, the victim it points
 * to keeps its bytes, and the snapshot is a regular file with the mode a
 * plain fopen() would give it. */
static void test_write_ignores_planted_link(void) {
  char dir[] = "/tmp/tc_link_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[128], victim[128], link[160];
  snprintf(path, sizeof path, "%s/snap.pickle", dir);
  snprintf(victim, sizeof victim, "%s/victim", dir);
  snprintf(link, sizeof link, "%s.tmp%ld", path, (long)getpid());
  FILE *f = fopen(victim, "w");
  CHECK(f != NULL);
  if (f) {
    fputs("precious", f);
    fclose(f);
  }
  CHECK_EQ_INT(symlink(victim, link), 0);
  tcuda_snapshot_t snap = {0};
  tc_snapshot_doc doc = {.snap = &snap, .num_devices = 1};
  mode_t um = umask(0);
  umask(um);
  for (int json = 0; json < 2; json++) {
    CHECK_OK(tc_snapshot_doc_write("test", &doc, path, json));
    char text[64] = {0};
    f = fopen(victim, "r");
    if (f) {
      CHECK(fread(text, 1, sizeof text - 1, f) == 8);
      fclose(f);
    }
    CHECK(!strcmp(text, "precious"));
    struct stat st;
    CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0);
    CHECK_EQ_INT(st.st_mode & 0777, 0666 & ~um);
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode)); /* left alone */
  }
  /* nothing else is left in the directory */
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  CHECK_EQ_INT(n, 3);
  unlink(link);
  unlink(victim);
  unlink(path);
  rmdir(dir);
}

/* Text with valid multibyte characters and bytes outside UTF-8, in the
 * allocator settings and (as argv[0], which glibc reports as the main
 * program's file name) in every frame: JSON and pickle stay valid UTF-8,
 * valid text is kept, and each byte that starts no valid character becomes
 * U+FFFD. The frames need a process started under that argv[0]: this test
 * runs itself again as the child. */
#define UTF8_TEXT "/tmp/caf\xc3\xa9-\xe6\x97\xa5\xe6\x9c\xac-\xff\xfe\x80-\xed\xa0\x80-\xe6\x97-\x01\x1b-end"
static const char *UTF8_PY =
    "import json, pickle, sys\n"
    "d = sys.argv[1]\n"
    "want = '/tmp/caf\\u00e9-\\u65e5\\u672c-\\ufffd\\ufffd\\ufffd-\\ufffd\\ufffd\\ufffd-\\ufffd\\ufffd-\\x01\\x1b-end'\n"
    "for name in ('s.json', 's.pickle'):\n"
    "  raw = open(d + '/' + name, 'rb').read()\n"
    "  s = json.loads(raw) if name.endswith('json') else pickle.loads(raw)\n"
    "  got = s['allocator_settings']['PYTORCH_CUDA_ALLOC_CONF']\n"
    "  assert got == want, (name, got, want)\n"
    "  files = {f['filename'] for e in s['device_traces'][0] for f in e.get('frames', [])}\n"
    "  assert want in files, (name, files)\n"
    "print('utf-8 ok')\n";

static void utf8_child(const char *dir) {
  tc_alloc *a = sim_alloc(1ull << 34);
  tc_history *h = NULL;
  CHECK_OK(tc_history_create(0, 1, &h));
  tc_alloc_set_trace(a, tc_history_trace, h);
  uint64_t p = 0;
  CHECK_OK(tc_alloc_malloc(a, 1000, 0, &p));
  tcuda_snapshot_t *snap = NULL;
  CHECK_OK(tc_alloc_snapshot(a, &snap));
  tc_history_copy c;
  CHECK_OK(tc_history_copy_take(h, &c));
  tc_snapshot_doc doc = {.snap = snap, .num_devices = 1, .traces = &c, .conf_text = UTF8_TEXT};
  char path[256];
  snprintf(path, sizeof path, "%s/s.json", dir);
  CHECK_OK(tc_snapshot_doc_write("test", &doc, path, 1));
  snprintf(path, sizeof path, "%s/s.pickle", dir);
  CHECK_OK(tc_snapshot_doc_write("test", &doc, path, 0));
  tc_history_copy_free(&c);
  tc_snapshot_free(snap);
  tc_alloc_set_trace(a, NULL, NULL);
  tc_history_destroy(h);
  sim_free(a);
}

static void test_utf8_text(void) {
  const char *child = getenv("TC_UTF8_CHILD");
  if (child) {
    utf8_child(child);
    return;
  }
  /* the writer itself: ASCII escapes, UTF-8 kept, U+FFFD per bad byte */
  tc_sbuf b = {0};
  tc_json_str(&b, "a\xc3\xa9\xff\"\n\x7f\xe6\x97");
  char *js = tc_sbuf_take(&b);
  CHECK(js && !strcmp(js, "\"a\xc3\xa9\xef\xbf\xbd\\\"\\u000a\x7f\xef\xbf\xbd\xef\xbf\xbd\""));
  free(js);
  CHECK_EQ_INT(tc_utf8_fixed_len("\xe6\x97\xa5\xff"), 6);
  if (system("python3 -c '' 2>/dev/null") != 0) {
    TC_SKIP_PART("decoding needs python3");
    return;
  }
  char dir[] = "/tmp/tc_utf8_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("TC_UTF8_CHILD", dir, 1);
    char *argv[] = {UTF8_TEXT, "test_utf8_text", NULL};
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  int status = -1;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char py[300], cmd[700];
  snprintf(py, sizeof py, "%s/check.py", dir);
  FILE *f = fopen(py, "w");
  CHECK(f != NULL);
  if (f) {
    fputs(UTF8_PY, f);
    fclose(f);
  }
  snprintf(cmd, sizeof cmd, "python3 %s %s", py, dir);
  CHECK_EQ_INT(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK_EQ_INT(system(cmd), 0);
}

static void test_device_hooks_and_dump(void) {
  tc_alloc *a = sim_alloc(1ull << 34);
  /* recording before the allocator exists starts tracing at attach */
  CHECK_OK(tc_history_record("t", 0, 1, 0, 0));
  tc_history_attach(a, 0, NULL);
  uint64_t p = 0;
  CHECK_OK(tc_alloc_malloc(a, 4096, 0, &p));
  tcuda_history_entry_t *e = NULL;
  size_t n = 0;
  CHECK_OK(tc_history_entries("t", 0, &e, &n));
  CHECK_EQ_INT(n, 2);
  if (n == 2) {
    CHECK(e[0].action == TCUDA_HISTORY_SEGMENT_ALLOC && e[1].action == TCUDA_HISTORY_ALLOC);
    CHECK(e[1].addr == p && e[1].size == 4096 && e[1].num_frames == 0);
    CHECK(!strcmp(tcuda_history_action_name(e[1].action), "alloc"));
  }
  tcuda_memory_history_free(e);
  /* the public dump writes what the attached allocators hold */
  char js[] = "/tmp/tc_histtest_XXXXXX.json";
  int fd = mkstemps(js, 5);
  close(fd);
  CHECK_OK(tc_history_dump("tcuda_memory_snapshot_dump_json", js, 1));
  FILE *f = fopen(js, "r");
  char text[8192] = {0};
  if (f) {
    CHECK(fread(text, 1, sizeof text - 1, f) > 0);
    fclose(f);
  }
  CHECK(strstr(text, "\"segments\": [{\"device\": 0") != NULL);
  /* torch copies the history before its snapshot adds the "snapshot"
   * entry: a dump shows the entry of an earlier snapshot, never its own */
  CHECK(strstr(text, "\"action\": \"snapshot\"") == NULL);
  CHECK_OK(tc_history_dump("tcuda_memory_snapshot_dump_json", js, 1));
  memset(text, 0, sizeof text);
  if ((f = fopen(js, "r"))) {
    CHECK(fread(text, 1, sizeof text - 1, f) > 0);
    fclose(f);
  }
  const char *snap_at = strstr(text, "\"action\": \"snapshot\"");
  CHECK(snap_at != NULL && strstr(snap_at + 1, "\"action\": \"snapshot\"") == NULL);
  unlink(js);
  /* stop: tracing ends and the history is gone */
  CHECK_OK(tc_history_record("t", 0, 0, 0, 0));
  CHECK_OK(tc_alloc_free(a, p));
  CHECK_OK(tc_history_entries("t", 0, &e, &n));
  CHECK(n == 0 && e == NULL);
  CHECK_ERR(tc_history_record("t", 64, 1, 0, 0), TCUDA_ERROR_INVALID_DEVICE, "device 64");
  CHECK_ERR(tc_history_entries("t", -3, &e, &n), TCUDA_ERROR_INVALID_DEVICE, "device -3");
  tc_history_detach(a);
  sim_free(a);
}

static void test_oom_snapshot(void) {
  unsetenv("TCUDA_OOM_SNAPSHOT");
  CHECK(!strcmp(tc_history_on_oom(0, 1), ""));
  char pk[] = "/tmp/tc_oom_XXXXXX";
  int fd = mkstemp(pk);
  close(fd);
  unlink(pk);
  setenv("TCUDA_OOM_SNAPSHOT", pk, 1);
  tc_error(TCUDA_ERROR_OUT_OF_MEMORY, "CUDA out of memory. Tried to allocate 2.00 GiB.");
  const char *note = tc_history_on_oom(0, 1);
  char want[256];
  snprintf(want, sizeof want, "; memory snapshot written to %s", pk);
  CHECK(!strcmp(note, want));
  CHECK(file_exists(pk));
  /* the OOM message survives */
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_ERROR_OUT_OF_MEMORY);
  CHECK(!strcmp(tcuda_last_error(), "CUDA out of memory. Tried to allocate 2.00 GiB."));
  unlink(pk);
  setenv("TCUDA_OOM_SNAPSHOT", "/nonexistent-dir/oom.pickle", 1);
  note = tc_history_on_oom(0, 1);
  CHECK(strstr(note, "; memory snapshot to /nonexistent-dir/oom.pickle failed:") == note);
  CHECK(!strcmp(tcuda_last_error(), "CUDA out of memory. Tried to allocate 2.00 GiB."));
  unsetenv("TCUDA_OOM_SNAPSHOT");
}

static void test_replay_history(void) {
  const char *trace = "a 1 1000\na 2 3000000 1\nf 1\nc\na 3 50000000\n";
  char pk[] = "/tmp/tc_rh_XXXXXX.pickle";
  int fd = mkstemps(pk, 7);
  close(fd);
  tcuda_replay_options_t o = TCUDA_REPLAY_OPTIONS_INIT;
  o.simulate = 1;
  o.history_path = pk;
  char *json = NULL;
  CHECK_OK(tcuda_replay_string(trace, &o, &json));
  tcuda_string_free(json);
  if (system("python3 -c '' 2>/dev/null") == 0) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import pickle; s = pickle.load(open('%s','rb')); t = s['device_traces'][0]; "
             "a = [e['action'] for e in t]; "
             "assert a == ['segment_alloc','alloc','segment_alloc','alloc','free_requested','free_completed',"
             "'snapshot','segment_alloc','alloc','snapshot'], a; "
             "assert [e['stream'] for e in t if e['action'] == 'alloc'] == [0, 1, 0]; "
             "assert {g['stream'] for g in s['segments']} == {0, 1}; "
             "assert sum(b['requested_size'] for g in s['segments'] for b in g['blocks'] "
             "if b['state'] == 'active_allocated') == 53000000\"",
             pk);
    CHECK_EQ_INT(system(cmd), 0);
  }
  unlink(pk);
  /* bad history paths: nothing returned, nothing written */
  o.history_path = "";
  json = (char *)1;
  CHECK_ERR(tcuda_replay_string(trace, &o, &json), TCUDA_ERROR_INVALID_ARGUMENT, "history_path is empty");
  CHECK(json == NULL);
  o.history_path = "/nonexistent-dir/h.pickle";
  CHECK_ERR(tcuda_replay_string(trace, &o, &json), TCUDA_ERROR_IO, "/nonexistent-dir/h.pickle");
  CHECK(json == NULL);
}

static void test_public_bad_input(void) {
  CHECK_ERR(tcuda_memory_record_history(0, 2, 0, 0), TCUDA_ERROR_INVALID_ARGUMENT, "enabled 2");
  CHECK_ERR(tcuda_memory_record_history(0, 1, 0, 4), TCUDA_ERROR_INVALID_ARGUMENT, "stacks 4");
  CHECK_ERR(tcuda_memory_record_history(0, 1, 0, -1), TCUDA_ERROR_INVALID_ARGUMENT, "stacks -1");
  CHECK_ERR(tcuda_memory_record_history(0, 1, (size_t)1 << 41, 0), TCUDA_ERROR_INVALID_ARGUMENT, "max_entries");
  tcuda_history_entry_t *e = NULL;
  size_t n = 0;
  CHECK_ERR(tcuda_memory_history(0, NULL, &n), TCUDA_ERROR_INVALID_ARGUMENT, "entries is NULL");
  CHECK_ERR(tcuda_memory_history(0, &e, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "count is NULL");
  if (!tcuda_is_available()) {
    CHECK(tcuda_memory_record_history(-1, 1, 0, 0) != TCUDA_SUCCESS);
    CHECK(tcuda_memory_history(-1, &e, &n) != TCUDA_SUCCESS && e == NULL && n == 0);
  }
  CHECK_ERR(tcuda_memory_snapshot_dump(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_memory_snapshot_dump: path is NULL");
  CHECK_ERR(tcuda_memory_snapshot_dump(""), TCUDA_ERROR_INVALID_ARGUMENT, "path is empty");
  CHECK_ERR(tcuda_memory_snapshot_dump_json("/nonexistent-dir/s.json"), TCUDA_ERROR_IO,
            "tcuda_memory_snapshot_dump_json: cannot write '/nonexistent-dir/s.json'");
  CHECK(!file_exists("/nonexistent-dir/s.json"));
  /* a path is quoted without its terminal escapes */
  CHECK_ERR(tcuda_memory_snapshot_dump_json("/nonexistent-dir/\033[2J.json"), TCUDA_ERROR_IO,
            "cannot write '/nonexistent-dir/\\x1b[2J.json'");
  tcuda_memory_stats_t st;
  memset(&st, 0, sizeof st);
  char *out = (char *)1;
  CHECK_ERR(tcuda_memory_stats_summary(NULL, 0, 0, &out), TCUDA_ERROR_INVALID_ARGUMENT, "stats is NULL");
  CHECK(out == NULL);
  CHECK_ERR(tcuda_memory_stats_summary(&st, 0, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  CHECK_ERR(tcuda_memory_stats_summary(&st, 0, 2, &out), TCUDA_ERROR_INVALID_ARGUMENT, "abbreviated 2");
  st.allocated_bytes[0].current = 3 << 20;
  CHECK_OK(tcuda_memory_stats_summary(&st, 5, 1, &out));
  CHECK(out && strstr(out, "device ID 5") && strstr(out, "|   3072 KiB |"));
  tcuda_string_free(out);
  CHECK(!strcmp(tcuda_history_action_name((tcuda_history_action)99), "unknown"));
  CHECK(!strcmp(tcuda_history_action_name(TCUDA_HISTORY_OOM), "oom"));
}

TC_MAIN(T(test_entries_and_meanings), T(test_ring_buffer), T(test_context_modes), T(test_frames_key_rule),
        T(test_document_pickle_and_json),
        T(test_encoding_edges),
        T(test_write_ignores_planted_link), T(test_utf8_text),
        T(test_device_hooks_and_dump), T(test_oom_snapshot), T(test_replay_history), T(test_public_bad_input))
