/* Allocation history: a ring buffer of torch's TraceEntry records, fed by
 * the allocator's trace hook (tc_alloc_set_trace), plus the public
 * record/dump API and the snapshot written on OOM.
 *
 * With history off the allocator's hook pointer is NULL, so the hot path
 * pays one untaken branch. With it on, each event costs a clock read, an
 * uncontended mutex and, with stacks, one backtrace(): the stack is kept as
 * raw return addresses and symbolized only when a snapshot is written. */
#define _GNU_SOURCE
#include "history.h"
#include "report.h"
#include "alloc/hooks.h"
#include "core/core.h"
#include "stream/stream.h"
#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Stacks kept by address while stacks are on, as torch keeps them on its
 * blocks: each live block's allocation stack (the snapshot's blocks show
 * it however short the ring), and each segment's, which torch's "alloc"
 * context gives the segment's free. Open addressing on the address. */
struct kept_stack {
  uint64_t addr; /* 0: an empty slot */
  uint64_t size; /* a segment's bytes */
  uint8_t n;
  uint8_t whole, split; /* a cudaMalloc segment; split at its start since (entry_stack) */
  void *pcs[TC_HISTORY_DEPTH];
};

struct kept_map {
  struct kept_stack *s;
  size_t cap, n; /* cap: 0 or a power of 2 */
};

static uint64_t kept_hash(uint64_t a) {
  a ^= a >> 33;
  a *= 0xff51afd7ed558ccdULL;
  return a ^ (a >> 33);
}

static struct kept_stack *kept_find(struct kept_map *m, uint64_t addr) {
  if (!m->cap) return NULL;
  for (size_t k = kept_hash(addr) & (m->cap - 1);; k = (k + 1) & (m->cap - 1)) {
    if (m->s[k].addr == addr) return &m->s[k];
    if (!m->s[k].addr) return NULL;
  }
}

/* Insert or replace; on host OOM the stack is just not kept. */
static void kept_put(struct kept_map *m, uint64_t addr, void *const *pcs, int n) {
  if (!addr) return;
  struct kept_stack *x = kept_find(m, addr);
  if (!x) {
    if (2 * (m->n + 1) > m->cap) {
      size_t cap = m->cap ? 2 * m->cap : 256;
      struct kept_stack *s = calloc(cap, sizeof *s);
      if (!s) return;
      for (size_t i = 0; i < m->cap; i++) {
        if (!m->s[i].addr) continue;
        size_t k = kept_hash(m->s[i].addr) & (cap - 1);
        while (s[k].addr) k = (k + 1) & (cap - 1);
        s[k] = m->s[i];
      }
      free(m->s);
      m->s = s;
      m->cap = cap;
    }
    size_t k = kept_hash(addr) & (m->cap - 1);
    while (m->s[k].addr) k = (k + 1) & (m->cap - 1);
    x = &m->s[k];
    x->addr = addr;
    m->n++;
  }
  x->n = (uint8_t)n;
  if (n) memcpy(x->pcs, pcs, (size_t)n * sizeof *pcs);
}

/* Remove addr's stack, copying it to pcs when pcs is not NULL; returns its
 * frame count, or -1 when none was kept. */
static int kept_take(struct kept_map *m, uint64_t addr, void **pcs) {
  struct kept_stack *x = kept_find(m, addr);
  if (!x) return -1;
  int n = x->n;
  if (pcs && n) memcpy(pcs, x->pcs, (size_t)n * sizeof *pcs);
  /* backward-shift deletion keeps every probe run unbroken */
  size_t i = (size_t)(x - m->s), j = i;
  for (;;) {
    j = (j + 1) & (m->cap - 1);
    if (!m->s[j].addr) break;
    size_t home = kept_hash(m->s[j].addr) & (m->cap - 1);
    if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
      m->s[i] = m->s[j];
      i = j;
    }
  }
  m->s[i].addr = 0;
  m->n--;
  return n;
}

static void kept_clear(struct kept_map *m) {
  free(m->s);
  memset(m, 0, sizeof *m);
}

struct tc_history {
  pthread_mutex_t mu;
  size_t max;  /* 0: unbounded */
  atomic_int stacks;
  tc_history_entry *e;
  void **pcs;  /* TC_HISTORY_DEPTH per slot, when stacks were ever on */
  size_t cap, head, n; /* entry i (oldest first) is slot (head + i) % cap */
  pthread_mutex_t kept_mu; /* blocks and segs; never held with mu taken after it by trace */
  struct kept_map blocks, segs;
};

/* Context ids: a caller (torch's glue) tags the entries a thread records
 * with an id of its own, so it can find its own data for them later (torch
 * gathers Python frames, which needs the GIL, before entering the
 * allocator). The hooks keep the id's data alive while an entry holds it. */
static _Thread_local uint64_t tl_ctx;
static _Atomic(uintptr_t) g_retain, g_release;
static _Atomic(void *) g_hook_user;
static atomic_llong g_ctx_held; /* entries holding a retain */

uint64_t tcuda_history_set_thread_context(uint64_t context) {
  uint64_t prev = tl_ctx;
  tl_ctx = context;
  return prev;
}

tcuda_status tcuda_history_set_context_hooks(void (*retain)(void *user, uint64_t context),
                                             void (*release)(void *user, uint64_t context), void *user) {
  static const char *F = "tcuda_history_set_context_hooks";
  if (!retain != !release)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: retain and release must both be set or both be NULL", F);
  long long held = atomic_load(&g_ctx_held);
  if (held)
    return tc_error(TCUDA_ERROR_INVALID_STATE,
                    "%s: %lld history entries still hold contexts retained through the current hooks; stop "
                    "recording history (tcuda_memory_record_history(..., 0, ...)) first", F, held);
  atomic_store(&g_hook_user, user);
  atomic_store(&g_retain, (uintptr_t)retain);
  atomic_store(&g_release, (uintptr_t)release);
  return TCUDA_SUCCESS;
}

void tc_history_ctx_release(uint64_t ctx) {
  uintptr_t rel = atomic_load_explicit(&g_release, memory_order_acquire);
  atomic_fetch_sub(&g_ctx_held, 1);
  if (rel) ((void (*)(void *, uint64_t))rel)(atomic_load_explicit(&g_hook_user, memory_order_relaxed), ctx);
}

/* Release the contexts of n entries (outside h->mu). */
static void release_entries(const tc_history_entry *e, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (e[i].held) tc_history_ctx_release(e[i].ctx);
}

tcuda_status tc_history_create(size_t max_entries, int stacks, tc_history **out) {
  *out = NULL;
  tc_history *h = calloc(1, sizeof *h);
  if (!h) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "memory history: out of host memory");
  pthread_mutex_init(&h->mu, NULL);
  pthread_mutex_init(&h->kept_mu, NULL);
  h->max = max_entries;
  atomic_store(&h->stacks, stacks);
  if (stacks) {
    /* backtrace() loads its unwinder on first use: do that here, not under
     * the allocator's lock */
    void *warm[2];
    backtrace(warm, 2);
  }
  *out = h;
  return TCUDA_SUCCESS;
}

void tc_history_destroy(tc_history *h) {
  if (!h) return;
  for (size_t i = 0; i < h->n; i++) {
    const tc_history_entry *x = &h->e[(h->head + i) % h->cap];
    if (x->held) tc_history_ctx_release(x->ctx);
  }
  pthread_mutex_destroy(&h->mu);
  free(h->e);
  free(h->pcs);
  kept_clear(&h->blocks);
  kept_clear(&h->segs);
  pthread_mutex_destroy(&h->kept_mu);
  free(h);
}

/* Re-lay the ring oldest-first into arrays of new_cap slots, keeping the
 * newest min(n, new_cap) entries. Under h->mu. */
static int relayout(tc_history *h, size_t new_cap, int want_pcs) {
  tc_history_entry *e = malloc((new_cap ? new_cap : 1) * sizeof *e);
  void **pcs = want_pcs ? malloc((new_cap ? new_cap : 1) * TC_HISTORY_DEPTH * sizeof *pcs) : NULL;
  if (!e || (want_pcs && !pcs)) {
    free(e);
    free(pcs);
    return 0;
  }
  size_t keep = h->n < new_cap ? h->n : new_cap;
  for (size_t i = 0; i < h->n - keep; i++) { /* the oldest go */
    const tc_history_entry *x = &h->e[(h->head + i) % h->cap];
    if (x->held) tc_history_ctx_release(x->ctx);
  }
  for (size_t i = 0; i < keep; i++) {
    size_t from = (h->head + h->n - keep + i) % h->cap;
    e[i] = h->e[from];
    if (pcs) {
      if (h->pcs) memcpy(pcs + i * TC_HISTORY_DEPTH, h->pcs + from * TC_HISTORY_DEPTH, TC_HISTORY_DEPTH * sizeof *pcs);
      else e[i].nframes = 0;
    }
  }
  free(h->e);
  free(h->pcs);
  h->e = e;
  h->pcs = pcs;
  h->cap = new_cap;
  h->head = 0;
  h->n = keep;
  return 1;
}

tcuda_status tc_history_configure(tc_history *h, size_t max_entries, int stacks) {
  pthread_mutex_lock(&h->mu);
  int ok = 1;
  if (max_entries && h->n > max_entries) ok = relayout(h, max_entries, h->pcs || stacks);
  else if (stacks && !h->pcs && h->cap) ok = relayout(h, h->cap, 1);
  if (ok) {
    h->max = max_entries;
    atomic_store(&h->stacks, stacks);
  }
  pthread_mutex_unlock(&h->mu);
  if (!ok) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "memory history: out of host memory");
  if (!stacks) { /* kept stacks would go stale while nothing updates them */
    pthread_mutex_lock(&h->kept_mu);
    kept_clear(&h->blocks);
    kept_clear(&h->segs);
    pthread_mutex_unlock(&h->kept_mu);
  }
  if (stacks) {
    void *warm[2];
    backtrace(warm, 2);
  }
  return TCUDA_SUCCESS;
}

/* Whether torch splits a fresh segment of seg bytes for a request of req
 * bytes at its start: the small pool (2 MiB segments) whenever anything is
 * left, the large pool when more than 1 MiB is. */
static int segment_splits(uint64_t seg, uint64_t req) {
  uint64_t r = (req + 511) / 512 * 512;
  if (r >= seg) return 0;
  return seg <= ((uint64_t)2 << 20) ? 1 : seg - r > ((uint64_t)1 << 20);
}

/* The frames an entry keeps under `mode` (tcuda_memory_record_history's
 * stacks), by torch's rules: 1 ("all") each entry its own; 2 ("alloc") the
 * allocating events their own, a block's frees its allocation stack and a
 * segment's free or unmap the segment's, unless the segment was split at
 * its start: torch keeps that stack on the segment's first block object,
 * which a split moves to the tail and the merge at the next free deletes
 * (torch 2.11 on the H200: a 12 MiB segment of one block shows it, a
 * 2 MiB one under a small tensor does not); 3 ("state") none. A snapshot
 * entry has none. pcs holds the n frames just taken, and gets the entry's;
 * returns their count. Keeps the stacks these rules and the snapshot need.
 * *framed: whether torch's entry would carry a context at all (its
 * snapshot then has a "frames" key, possibly empty): under "all" every
 * entry but a snapshot; under "alloc" the allocating ones and the frees of
 * blocks and segments whose allocation context was kept; else none. */
static int entry_stack(tc_history *h, int mode, tc_trace_action action, uint64_t addr, uint64_t size, void **pcs,
                       int n, int *framed) {
  struct kept_stack *sg;
  int keep = n, k, own = mode == 1 || mode == 2;
  pthread_mutex_lock(&h->kept_mu);
  switch (action) {
  case TC_TRACE_ALLOC:
    kept_put(&h->blocks, addr, pcs, n);
    if ((sg = kept_find(&h->segs, addr)) != NULL && sg->whole) sg->split |= segment_splits(sg->size, size);
    break;
  case TC_TRACE_SEGMENT_ALLOC:
  case TC_TRACE_SEGMENT_MAP:
    kept_put(&h->segs, addr, pcs, n);
    if ((sg = kept_find(&h->segs, addr)) != NULL) {
      sg->size = size;
      sg->whole = action == TC_TRACE_SEGMENT_ALLOC;
      sg->split = 0;
    }
    break;
  case TC_TRACE_FREE_REQUESTED:
    if (mode == 2) {
      struct kept_stack *x = kept_find(&h->blocks, addr);
      keep = x ? x->n : 0;
      own = x != NULL;
      if (keep) memcpy(pcs, x->pcs, (size_t)keep * sizeof *pcs);
    }
    break;
  case TC_TRACE_FREE_COMPLETED:
    k = kept_take(&h->blocks, addr, mode == 2 ? pcs : NULL);
    if (mode == 2) keep = k < 0 ? 0 : k, own = k >= 0;
    break;
  case TC_TRACE_SEGMENT_FREE:
  case TC_TRACE_SEGMENT_UNMAP:
    sg = kept_find(&h->segs, addr);
    if (sg && sg->split) {
      (void)kept_take(&h->segs, addr, NULL);
      if (mode == 2) keep = 0, own = 0;
    } else {
      k = kept_take(&h->segs, addr, mode == 2 ? pcs : NULL);
      if (mode == 2) keep = k < 0 ? 0 : k, own = k >= 0;
    }
    break;
  case TC_TRACE_SNAPSHOT: keep = 0, own = 0; break;
  default: break; /* oom: its own */
  }
  pthread_mutex_unlock(&h->kept_mu);
  *framed = own;
  return mode == 3 ? 0 : keep;
}

void tc_history_trace(void *ctx, tc_trace_action action, uint64_t addr, uint64_t size, uint64_t stream) {
  tc_history *h = ctx;
  void *pcs[TC_HISTORY_DEPTH + 1];
  int np = 0, framed = 0;
  int mode = atomic_load_explicit(&h->stacks, memory_order_relaxed);
  if (mode) {
    /* only events that start a stack, or that keep their own, take one */
    if (mode == 1 ? action != TC_TRACE_SNAPSHOT
                  : action == TC_TRACE_ALLOC || action == TC_TRACE_SEGMENT_ALLOC || action == TC_TRACE_SEGMENT_MAP ||
                        (mode == 2 && action == TC_TRACE_OOM)) {
      np = backtrace(pcs, TC_HISTORY_DEPTH + 1) - 1; /* drop this function's own frame */
      if (np < 0) np = 0;
    }
    np = entry_stack(h, mode, action, addr, size, pcs + 1, np, &framed);
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tc_history_entry x = {.addr = addr, .size = size, .stream = stream,
                     .time_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000, .ctx = tl_ctx,
                     .action = (uint8_t)action, .nframes = (uint8_t)np, .framed = (uint8_t)framed};
  if (x.ctx) {
    uintptr_t ret = atomic_load_explicit(&g_retain, memory_order_acquire);
    if (ret) {
      ((void (*)(void *, uint64_t))ret)(atomic_load_explicit(&g_hook_user, memory_order_relaxed), x.ctx);
      atomic_fetch_add(&g_ctx_held, 1);
      x.held = 1;
    }
  }
  tc_history_entry gone = {0}; /* an entry the ring dropped: its context goes after the unlock */
  pthread_mutex_lock(&h->mu);
  if (h->n == h->cap && (!h->max || h->cap < h->max) && h->head == 0) {
    /* grow; on host OOM the ring just wraps early */
    size_t nc = h->cap ? 2 * h->cap : 1024;
    if (h->max && nc > h->max) nc = h->max;
    tc_history_entry *ne = realloc(h->e, nc * sizeof *ne);
    if (ne) {
      h->e = ne;
      if (np || h->pcs) {
        void **npcs = realloc(h->pcs, nc * TC_HISTORY_DEPTH * sizeof *npcs);
        if (npcs) {
          if (!h->pcs)
            for (size_t i = 0; i < h->n; i++) h->e[i].nframes = 0;
          h->pcs = npcs;
          h->cap = nc;
        }
      } else {
        h->cap = nc;
      }
    }
  }
  if (h->cap) {
    size_t slot;
    if (h->n < h->cap) {
      slot = (h->head + h->n) % h->cap;
      h->n++;
    } else { /* full: the oldest entry goes */
      slot = h->head;
      h->head = (h->head + 1) % h->cap;
      gone = h->e[slot];
    }
    if (!h->pcs) x.nframes = 0;
    h->e[slot] = x;
    if (x.nframes) memcpy(h->pcs + slot * TC_HISTORY_DEPTH, pcs + 1, (size_t)x.nframes * sizeof *pcs);
  } else {
    gone = x; /* no room at all: the new entry is dropped */
  }
  pthread_mutex_unlock(&h->mu);
  release_entries(&gone, 1);
}

tcuda_status tc_history_copy_take(tc_history *h, tc_history_copy *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&h->kept_mu);
  pthread_mutex_lock(&h->mu);
  size_t n = h->n, nl = h->blocks.n, all = n + nl;
  tc_history_entry *e = malloc((all ? all : 1) * sizeof *e);
  int want_pcs = h->pcs || nl;
  void **pcs = want_pcs ? malloc((all ? all : 1) * TC_HISTORY_DEPTH * sizeof *pcs) : NULL;
  if (!e || (want_pcs && !pcs)) {
    pthread_mutex_unlock(&h->mu);
    pthread_mutex_unlock(&h->kept_mu);
    free(e);
    free(pcs);
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "memory history: out of host memory");
  }
  for (size_t i = 0; i < n; i++) {
    size_t from = (h->head + i) % h->cap;
    e[i] = h->e[from];
    if (pcs && h->pcs)
      memcpy(pcs + i * TC_HISTORY_DEPTH, h->pcs + from * TC_HISTORY_DEPTH, e[i].nframes * sizeof *pcs);
    else
      e[i].nframes = 0;
  }
  size_t k = n;
  for (size_t i = 0; i < h->blocks.cap; i++) {
    const struct kept_stack *x = &h->blocks.s[i];
    if (!x->addr) continue;
    e[k] = (tc_history_entry){.addr = x->addr, .action = TC_TRACE_ALLOC, .nframes = x->n};
    memcpy(pcs + k * TC_HISTORY_DEPTH, x->pcs, (size_t)x->n * sizeof *pcs);
    k++;
  }
  out->live_kept = atomic_load(&h->stacks) != 0;
  pthread_mutex_unlock(&h->mu);
  pthread_mutex_unlock(&h->kept_mu);
  out->e = e;
  out->pcs = pcs;
  out->n = n;
  out->nlive = nl;
  return TCUDA_SUCCESS;
}

void tc_history_copy_free(tc_history_copy *c) {
  if (!c) return;
  free(c->e);
  free(c->pcs);
  memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------------ */
/* the public per-device recorders                                      */

typedef struct {
  tc_alloc *a;       /* the device's public allocator, once attached */
  tc_history *h;     /* non-NULL while recording */
} hdev;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static hdev g_dev[TC_MAX_DEVICES];
static int64_t (*g_sid)(uint64_t);

void tc_history_attach(tc_alloc *a, int device, int64_t (*stream_id)(uint64_t key)) {
  if (!a || device < 0 || device >= TC_MAX_DEVICES) return;
  pthread_mutex_lock(&g_mu);
  g_dev[device].a = a;
  if (stream_id) g_sid = stream_id;
  if (g_dev[device].h) tc_alloc_set_trace(a, tc_history_trace, g_dev[device].h);
  pthread_mutex_unlock(&g_mu);
}

/* For tests that attach short-lived allocators: forget `a`. */
void tc_history_detach(tc_alloc *a) {
  pthread_mutex_lock(&g_mu);
  for (int d = 0; d < TC_MAX_DEVICES; d++)
    if (g_dev[d].a == a) {
      tc_alloc_set_trace(a, NULL, NULL);
      g_dev[d].a = NULL;
    }
  pthread_mutex_unlock(&g_mu);
}

/* The body of tcuda_memory_record_history once device is resolved. */
tcuda_status tc_history_record(const char *func, int device, int enabled, size_t max_entries, int stacks) {
  if (device < 0 || device >= TC_MAX_DEVICES)
    return tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: device %d out of range (history supports 0..%d)", func, device,
                    TC_MAX_DEVICES - 1);
  tcuda_status s = TCUDA_SUCCESS;
  pthread_mutex_lock(&g_mu);
  hdev *d = &g_dev[device];
  if (!enabled) {
    if (d->h) {
      if (d->a) tc_alloc_set_trace(d->a, NULL, NULL); /* no callback runs after this */
      tc_history_destroy(d->h);
      d->h = NULL;
    }
  } else if (d->h) {
    if ((s = tc_history_configure(d->h, max_entries, stacks)))
      s = tc_error(s, "%s: out of host memory resizing the history to %zu entries", func, max_entries);
  } else {
    tc_history *h = NULL;
    if ((s = tc_history_create(max_entries, stacks, &h))) {
      s = tc_error(s, "%s: out of host memory", func);
    } else {
      d->h = h;
      if (d->a) tc_alloc_set_trace(d->a, tc_history_trace, h);
    }
  }
  pthread_mutex_unlock(&g_mu);
  return s;
}

tcuda_status tcuda_memory_record_history(int device, int enabled, size_t max_entries, int stacks) {
  static const char *F = "tcuda_memory_record_history";
  if (enabled != 0 && enabled != 1)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: enabled %d is not 0 or 1", F, enabled);
  if (stacks < 0 || stacks > 3)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: stacks %d is not 0 (none), 1 (all), 2 (alloc) or 3 (state): torch's contexts", F, stacks);
  if (max_entries > ((size_t)1 << 40))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: max_entries %zu is too large (at most 2^40; 0 = no limit)", F,
                    max_entries);
  tcuda_status s = tc_resolve_device(F, &device);
  if (s) return s;
  return tc_history_record(F, device, enabled, max_entries, stacks);
}

const char *tcuda_history_action_name(tcuda_history_action a) {
  static const char *const n[] = {"alloc",         "free_requested", "free_completed",
                                  "segment_alloc", "segment_free",   "segment_map",
                                  "segment_unmap", "snapshot",       "oom"};
  return (unsigned)a < sizeof n / sizeof *n ? n[a] : "unknown";
}

/* The history of a resolved device as public entries. */
tcuda_status tc_history_entries(const char *func, int device, tcuda_history_entry_t **entries, size_t *count) {
  *entries = NULL;
  *count = 0;
  if (device < 0 || device >= TC_MAX_DEVICES)
    return tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: device %d out of range (history supports 0..%d)", func, device,
                    TC_MAX_DEVICES - 1);
  tc_history_copy c = {0};
  tcuda_status s = TCUDA_SUCCESS;
  pthread_mutex_lock(&g_mu);
  if (g_dev[device].h) s = tc_history_copy_take(g_dev[device].h, &c);
  int64_t (*sid)(uint64_t) = g_sid;
  pthread_mutex_unlock(&g_mu);
  if (s) return tc_error(s, "%s: out of host memory", func);
  if (!c.n) {
    tc_history_copy_free(&c);
    return TCUDA_SUCCESS;
  }
  tcuda_history_entry_t *out = malloc(c.n * sizeof *out);
  if (!out) {
    tc_history_copy_free(&c);
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  }
  for (size_t i = 0; i < c.n; i++)
    out[i] = (tcuda_history_entry_t){.action = (tcuda_history_action)c.e[i].action, .addr = c.e[i].addr,
                                     .size = c.e[i].size,
                                     .stream = sid ? sid(c.e[i].stream) : (int64_t)c.e[i].stream,
                                     .time_us = c.e[i].time_us, .num_frames = c.e[i].nframes,
                                     .context = c.e[i].ctx};
  *entries = out;
  *count = c.n;
  tc_history_copy_free(&c);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_memory_history(int device, tcuda_history_entry_t **entries, size_t *count) {
  static const char *F = "tcuda_memory_history";
  TC_CHECK_ARG(F, entries != NULL, "entries");
  TC_CHECK_ARG(F, count != NULL, "count");
  *entries = NULL;
  *count = 0;
  tcuda_status s = tc_resolve_device(F, &device);
  if (s) return s;
  return tc_history_entries(F, device, entries, count);
}

void tcuda_memory_history_free(tcuda_history_entry_t *entries) { free(entries); }

/* ------------------------------------------------------------------ */
/* dump                                                                 */

static int64_t sid_map(void *ctx, int64_t key) {
  int64_t (*sid)(uint64_t) = *(int64_t (**)(uint64_t))ctx;
  return sid ? sid((uint64_t)key) : key;
}

/* Copy the histories, snapshot every attached allocator (adding a
 * "snapshot" entry to each recording one, as torch does), and encode. */
tcuda_status tc_history_dump(const char *func, const char *path, int json) {
  if (!path || !*path)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: path is %s", func, path ? "empty" : "NULL");
  tcuda_snapshot_t all = {0};
  tc_history_copy traces[TC_MAX_DEVICES];
  memset(traces, 0, sizeof traces);
  tc_alloc_config cfg;
  tc_alloc_config_default(&cfg);
  int have_cfg = 0, ndev = 0;
  tcuda_status s = TCUDA_SUCCESS;
  pthread_mutex_lock(&g_mu);
  int64_t (*sid)(uint64_t) = g_sid;
  for (int d = 0; d < TC_MAX_DEVICES && !s; d++) {
    if (g_dev[d].a || g_dev[d].h) ndev = d + 1;
    /* the history before the snapshot, as torch copies it: the "snapshot"
     * entry a dump adds shows in later dumps, never in its own */
    if (g_dev[d].h && (s = tc_history_copy_take(g_dev[d].h, &traces[d]))) break;
    if (g_dev[d].a) {
      if (!have_cfg) {
        tc_alloc_get_config(g_dev[d].a, &cfg);
        have_cfg = 1;
      }
      tcuda_snapshot_t *one = NULL;
      if ((s = tc_alloc_snapshot(g_dev[d].a, &one))) break;
      if (one->num_segments) {
        tcuda_segment_info_t *segs =
            realloc(all.segments, (all.num_segments + one->num_segments) * sizeof *segs);
        if (!segs) {
          tc_snapshot_free(one);
          s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "out of host memory");
          break;
        }
        all.segments = segs;
        memcpy(segs + all.num_segments, one->segments, one->num_segments * sizeof *segs);
        all.num_segments += one->num_segments;
      }
      free(one->segments); /* the blocks moved to `all` */
      free(one);
    }
  }
  pthread_mutex_unlock(&g_mu);
  if (!have_cfg && tc_alloc_config_from_env(&cfg)) {
    tcuda_clear_error();
    tc_alloc_config_default(&cfg);
  }
  if (!s) {
    tc_snapshot_doc doc = {.snap = &all, .num_devices = ndev ? ndev : 1, .traces = traces, .cfg = &cfg,
                           .conf_text = cfg.text, .seg_stream = sid_map, .trace_stream = sid_map,
                           .stream_ctx = &sid};
    s = tc_snapshot_doc_write(func, &doc, path, json);
  } else {
    char msg[TC_ERRMSG_MAX - 64];
    snprintf(msg, sizeof msg, "%s", tcuda_last_error());
    s = tc_error(s, "%s: %s", func, msg);
  }
  for (int d = 0; d < TC_MAX_DEVICES; d++) tc_history_copy_free(&traces[d]);
  for (size_t i = 0; i < all.num_segments; i++) free(all.segments[i].blocks);
  free(all.segments);
  return s;
}

tcuda_status tcuda_memory_snapshot_dump(const char *path) {
  return tc_history_dump("tcuda_memory_snapshot_dump", path, 0);
}

tcuda_status tcuda_memory_snapshot_dump_json(const char *path) {
  return tc_history_dump("tcuda_memory_snapshot_dump_json", path, 1);
}

tcuda_status tcuda_memory_stats_summary(const tcuda_memory_stats_t *stats, int device, int abbreviated, char **out) {
  static const char *F = "tcuda_memory_stats_summary";
  TC_CHECK_ARG(F, out != NULL, "out");
  *out = NULL;
  TC_CHECK_ARG(F, stats != NULL, "stats");
  if (abbreviated != 0 && abbreviated != 1)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: abbreviated %d is not 0 or 1", F, abbreviated);
  if (!(*out = tc_report_summary(stats, device, abbreviated)))
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  return TCUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* snapshot on OOM                                                      */

const char *tc_history_on_oom(int device, size_t requested) {
  static _Thread_local char note[TC_ERRMSG_MAX / 2];
  (void)device;
  (void)requested;
  note[0] = 0;
  const char *path = getenv("TCUDA_OOM_SNAPSHOT");
  if (!path || !*path) return note;
  /* keep the OOM message: the dump may set its own */
  tcuda_status keep_s = tcuda_last_status();
  char *keep = strdup(tcuda_last_error());
  tcuda_status s = tc_history_dump("TCUDA_OOM_SNAPSHOT", path, 0);
  if (s) snprintf(note, sizeof note, "; memory snapshot to %s failed: %s", path, tcuda_last_error());
  else snprintf(note, sizeof note, "; memory snapshot written to %s", path);
  if (keep) {
    if (keep_s) tc_error(keep_s, "%s", keep);
    else tcuda_clear_error();
    free(keep);
  }
  return note;
}

/* History joins the allocator through its hooks: it attaches to each device
 * allocator as it is made, and snapshots on OOM. At load time, so that
 * TCUDA_OOM_SNAPSHOT needs no history call first. (From the static library
 * a program gets this file only if it calls a function defined here.) */
__attribute__((constructor)) static void join_allocator_hooks(void) {
  (void)tc_hook_on_created(tc_history_attach); /* the first of each kind: cannot fail */
  (void)tc_hook_on_oom(tc_history_on_oom);
}
