/* One replay of a torch history (torchsnap.h) on a fresh allocator over the
 * simulated device, and tcuda_replay_snapshot_to, which prints its
 * checkpoints.
 *
 * Exact mode (the snapshot's own settings) follows torch's recorded segment
 * addresses and expandable maps, and tells empty_cache calls from the
 * policy's own segment frees: torch records no entry for empty_cache, and
 * its frees look like those of the OOM retry and of garbage collection. A
 * recorded run of segment frees that the policy did not make by the next
 * request (or other call) was an empty_cache; it is flagged on that op
 * (HOP_F_EMPTY_BEFORE) for every later replay of the history.
 *
 * record_stream frees are replayed with events that complete exactly where
 * torch's free_completed entries were, in their order (each waits on the
 * stream tc_tsnap_event_streams gives its slot). */
#include "backend_wrap.h"
#include "core/core.h"
#include "core/table.h"
#include "inspect/history.h"
#include "inspect/report.h"
#include "torchsnap.h"
#include "trace.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint64_t addr, size;
} range;

/* A multiset of ranges (recorded segment frees the replay has not made
 * yet, and the reverse). A file can repeat one segment_free any number of
 * times for 2 bytes each, so matching one must not scan the others: each
 * (addr, size) hashes to a chain of its entries, newest first. */
typedef struct {
  uint64_t addr, size;
  uint32_t next; /* the next entry of the chain, index + 1; 0: none */
} rnode;

typedef struct {
  rnode *v;
  size_t n, cap, live; /* entries made, room, entries in the set */
  uint32_t free;       /* entries taken out, chained through next */
  tc_u64map head;      /* hash -> the chain's newest entry, index + 1 */
} rset;

#define QUERY_UNITS 4

struct hr;
typedef struct hr {
  const char *func;
  tc_tsnap *h;
  const tc_tsrun_opts *o;
  tc_backend *sim;
  tc_bwrap be; /* the simulator, placed as torch was, with events that complete where the history says */
  tc_alloc *a;
  uint64_t *addr;          /* slot -> current address (0: none) */
  unsigned char *done;     /* slot -> its free_completed was passed */
  uint32_t cur_slot;       /* the slot whose free records an event now */
  uint64_t *ev_stream;     /* slot -> the stream its record_stream free waits on */
  /* the allocator's queries of those frees' events: each waits on a stream
   * of its own when torch completed them out of order, so a hostile history
   * could make every malloc look at every pending free; the queries of one
   * replay are held to the input's work budget, QUERY_UNITS units each (a
   * query costs the allocator a few times what a parsed value does) */
  uint64_t queries;
  /* exact mode: torch's segment placements, in order */
  range *segs, *maps;
  size_t nsegs, nmaps, seg_pos, map_pos;
  int follow_segs, follow_maps;
  int placing; /* the segment_alloc under way was given torch's address */
  /* exact mode: recorded segment frees the replay has not made yet, and
   * frees the replay made that the history has not shown yet */
  rset pend, early;
  int seg_alloc_since_free;
  int start_oom;           /* the starting state did not fit */
  uint64_t segment_calls;
  size_t diverged;
  /* private pools: routing is on only around an allocation that goes there */
  struct route {
    struct hr *r;
    uint16_t pool;
  } *routes;
  unsigned char *pool_made;
  uint16_t route_now;
} hr;

/* ---- the backend: the simulator, placed as torch was, with events that
 * complete where the history says ---- */

static uint64_t rkey(uint64_t addr, uint64_t size) {
  uint64_t k = addr ^ (size * 0x9e3779b97f4a7c15ULL);
  k ^= k >> 31;
  k *= 0xbf58476d1ce4e5b9ULL;
  return k ^ (k >> 29);
}

static int rset_push(rset *s, uint64_t addr, uint64_t size) {
  uint32_t i = s->free;
  if (i) {
    s->free = s->v[i - 1].next;
  } else {
    if (s->n >= UINT32_MAX || !tc_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) return 0;
    i = (uint32_t)++s->n;
  }
  uint64_t k = rkey(addr, size), *h = tc_u64map_get(&s->head, k);
  s->v[i - 1] = (rnode){addr, size, h ? (uint32_t)*h : 0};
  if (!tc_u64map_put(&s->head, k, i)) {
    s->v[i - 1].next = s->free;
    s->free = i;
    return 0;
  }
  s->live++;
  return 1;
}

static int rset_take(rset *s, uint64_t addr, uint64_t size) {
  uint64_t k = rkey(addr, size), *h = tc_u64map_get(&s->head, k);
  uint32_t prev = 0;
  for (uint32_t i = h ? (uint32_t)*h : 0; i; prev = i, i = s->v[i - 1].next) {
    rnode *e = &s->v[i - 1];
    if (e->addr != addr || e->size != size) continue;
    if (prev) s->v[prev - 1].next = e->next;
    else if (e->next) *h = e->next;
    else tc_u64map_del(&s->head, k);
    e->next = s->free;
    s->free = i;
    s->live--;
    return 1;
  }
  return 0;
}

static void rset_clear(rset *s) {
  tc_u64map_free(&s->head);
  s->n = s->live = 0;
  s->free = 0;
}

static void rset_free(rset *s) {
  tc_u64map_free(&s->head);
  free(s->v);
  memset(s, 0, sizeof *s);
}

/* A segment free (or unmap) the replay made: it answers a recorded one, or
 * waits for it. */
static void replay_freed(hr *r, uint64_t addr, uint64_t size) {
  if (r->o->exact != 1 || rset_take(&r->pend, addr, size)) return;
  if (!rset_push(&r->early, addr, size)) r->diverged++;
}

static tcuda_status w_before_alloc(void *c, uint64_t size) {
  hr *r = c;
  r->placing = 0;
  if (r->follow_segs) {
    if (r->seg_pos < r->nsegs && r->segs[r->seg_pos].size == size &&
        tc_backend_sim_place_next(r->sim, r->segs[r->seg_pos].addr, size) == TCUDA_SUCCESS) {
      r->placing = 1;
    } else {
      r->follow_segs = 0; /* once off torch's path, the driver model places the rest */
      r->diverged++;
    }
  }
  return TCUDA_SUCCESS;
}

static void w_after_alloc(void *c, tcuda_status st, uint64_t addr, uint64_t size) {
  hr *r = c;
  (void)addr;
  (void)size;
  if (st) {
    if (r->placing) tc_backend_sim_place_cancel(r->sim);
    return;
  }
  if (r->placing) r->seg_pos++;
  r->segment_calls++;
}

static tcuda_status w_before_reserve(void *c, uint64_t size) {
  hr *r = c;
  (void)size;
  if (r->follow_maps && r->map_pos < r->nmaps) return tc_backend_sim_reserve_at(r->sim, &r->maps[r->map_pos].addr, 1);
  return TCUDA_SUCCESS;
}

static void w_after_map(void *c, tcuda_status st, uint64_t addr, uint64_t size) {
  hr *r = c;
  if (st) return;
  r->segment_calls++;
  if (r->follow_maps) {
    if (r->map_pos < r->nmaps && r->maps[r->map_pos].addr == addr && r->maps[r->map_pos].size == size) {
      r->map_pos++;
    } else {
      r->follow_maps = 0;
      r->diverged++;
      tc_backend_sim_reserve_at(r->sim, NULL, 0);
    }
  }
}

/* a segment free or an unmap */
static void w_before_release(void *c, uint64_t addr, uint64_t size) { replay_freed(c, addr, size); }

static tcuda_status w_event_record(void *c, uint64_t stream, void **ev) {
  hr *r = c;
  (void)stream;
  *ev = (void *)(uintptr_t)((uint64_t)r->cur_slot + 1);
  return TCUDA_SUCCESS;
}
static int w_event_query(void *c, void *ev) {
  hr *r = c;
  r->queries++;
  uint64_t slot = (uint64_t)(uintptr_t)ev - 1;
  return slot < r->h->num_slots ? r->done[slot] : 1;
}
static tcuda_status w_event_synchronize(void *c, void *ev) {
  hr *r = c;
  uint64_t slot = (uint64_t)(uintptr_t)ev - 1;
  if (slot < r->h->num_slots) r->done[slot] = 1;
  return TCUDA_SUCCESS;
}

static const tc_bwrap_hooks w_hooks = {.before_alloc = w_before_alloc, .after_alloc = w_after_alloc,
                                       .before_reserve = w_before_reserve, .after_map = w_after_map,
                                       .before_release = w_before_release, .event_record = w_event_record,
                                       .event_query = w_event_query, .event_synchronize = w_event_synchronize};

/* ---- private pools ---- */

static int route_filter(void *ctx, uint64_t stream) {
  (void)stream;
  const struct route *rt = ctx;
  return rt->r->route_now == rt->pool;
}

/* An allocation torch routed to a graph's private pool: route it there
 * alone. The pool's first use stands for its graph and is kept; later ones
 * are given back at once. Routing is off otherwise, since the allocator
 * does not process events while a capture is underway. */
static tcuda_status malloc_in_pool(hr *r, const tc_tsop *op, uint64_t *p) {
  const uint64_t *id = r->h->pool_ids[op->pool - 1];
  struct route *rt = &r->routes[op->pool - 1];
  rt->r = r;
  rt->pool = op->pool;
  tcuda_status s = tc_alloc_begin_allocate_to_pool(r->a, id, route_filter, rt);
  if (s) return s;
  r->route_now = op->pool;
  tcuda_status m = tc_alloc_malloc(r->a, op->size, op->stream, p);
  r->route_now = 0;
  if ((s = tc_alloc_end_allocate_to_pool(r->a, id))) return s;
  if (r->pool_made[op->pool - 1] && (s = tc_alloc_release_pool(r->a, id))) return s;
  r->pool_made[op->pool - 1] = 1;
  return m;
}

/* ---- setup ---- */

static tcuda_status oom(const char *func) { return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func); }

static tcuda_status collect_placements(hr *r) {
  const tc_tsnap *h = r->h;
  size_t ns = 0, nm = 0;
  for (size_t i = 0; i < h->num_ops; i++) {
    ns += h->ops[i].kind == HOP_SEG_ALLOC;
    nm += h->ops[i].kind == HOP_SEG_MAP;
  }
  r->segs = malloc((ns ? ns : 1) * sizeof *r->segs);
  r->maps = malloc((nm ? nm : 1) * sizeof *r->maps);
  if (!r->segs || !r->maps) return oom(r->func);
  for (size_t i = 0; i < h->num_ops; i++) {
    const tc_tsop *op = &h->ops[i];
    if (op->kind == HOP_SEG_ALLOC) r->segs[r->nsegs++] = (range){op->addr, op->size};
    if (op->kind == HOP_SEG_MAP) r->maps[r->nmaps++] = (range){op->addr, op->size};
  }
  r->follow_segs = r->follow_maps = 1;
  return TCUDA_SUCCESS;
}

/* A truncated history's starting state. Exact mode rebuilds torch's
 * segments at their addresses and carves them into the live blocks and
 * free gaps (allocating every piece in address order, then freeing the
 * gaps); other configs allocate the live blocks in address order and let
 * the policy place them. Peaks then restart (reset_peak), so peaks are
 * those of the window. */
static tcuda_status seed(hr *r) {
  tc_tsnap *h = r->h;
  tcuda_status s = TCUDA_SUCCESS;
  uint64_t *gaps = NULL;
  size_t ngaps = 0, capg = 0;
  for (size_t k = 0; k < h->num_segs && !s; k++) {
    const tc_tsseg *sg = &h->segs[k];
    const tc_tsblock *b = h->blocks ? h->blocks + sg->first_block : NULL; /* NULL when num_blocks is 0 */
    const tc_alloc_config *cfg = r->o->cfg ? r->o->cfg : &h->cfg;
    uint64_t req = sg->small ? TC_SMALL_SIZE : sg->size;
    /* the segment can be remade only if one request of its pool makes exactly it */
    int remake = r->o->exact && !sg->expandable && tc_alloc_segment_size(cfg, tc_alloc_round_size(cfg, req)) == sg->size &&
                 (!sg->small || sg->size == TC_SMALL_BUFFER);
    if (remake && tc_backend_sim_place_next(r->sim, sg->addr, sg->size)) remake = 0;
    if (!remake) r->diverged += r->o->exact != 0;
    if (remake) {
      /* the whole segment as one block, freed: the pool then holds it alone on its stream */
      uint64_t whole = 0;
      int follow = r->follow_segs;
      r->follow_segs = 0;
      s = tc_alloc_malloc(r->a, req, sg->stream, &whole);
      r->follow_segs = follow;
      tc_backend_sim_place_cancel(r->sim); /* not taken if a cached block served it */
      if (s) break;
      uint64_t got_seg = 0, got_size = 0, bs, bz;
      tc_alloc_block_info(r->a, whole, &bs, &bz, &got_seg, &got_size);
      if (got_seg != sg->addr || got_size != sg->size) r->diverged++;
      /* for the small pool the 1 MiB request split it: free both halves */
      uint64_t other = 0;
      if (sg->small) s = tc_alloc_malloc(r->a, TC_SMALL_SIZE, sg->stream, &other);
      if (!s) s = tc_alloc_free(r->a, whole);
      if (!s && other) s = tc_alloc_free(r->a, other);
      uint64_t at = sg->addr;
      for (size_t j = 0; j <= sg->num_blocks && !s; j++) {
        uint64_t next = j < sg->num_blocks ? b[j].addr : sg->addr + sg->size;
        while (next > at && !s) { /* a free gap: hold it while carving, in pieces its pool takes */
          uint64_t g = 0, piece = next - at;
          if (sg->small && piece > TC_SMALL_SIZE) piece = TC_SMALL_SIZE;
          at += piece;
          if (!(s = tc_alloc_malloc(r->a, piece, sg->stream, &g))) {
            if (ngaps == capg) {
              size_t nc = capg ? capg * 2 : 64;
              uint64_t *ng = realloc(gaps, nc * sizeof *ng);
              if (!ng) { s = oom(r->func); break; }
              gaps = ng;
              capg = nc;
            }
            gaps[ngaps++] = g;
          }
        }
        if (s || j == sg->num_blocks) break;
        uint64_t p = 0;
        uint64_t want = tc_alloc_round_size(&h->cfg, b[j].requested) == b[j].size ? b[j].requested : b[j].size;
        if (!(s = tc_alloc_malloc(r->a, want, sg->stream, &p))) {
          if (p != b[j].addr) r->diverged++;
          if (b[j].slot != HOP_NO_SLOT) r->addr[b[j].slot] = p;
        }
        at = b[j].addr + b[j].size;
      }
    } else {
      for (size_t j = 0; j < sg->num_blocks && !s; j++) {
        uint64_t p = 0;
        s = tc_alloc_malloc(r->a, b[j].requested ? b[j].requested : b[j].size, sg->stream, &p);
        if (!s && b[j].slot != HOP_NO_SLOT) r->addr[b[j].slot] = p;
      }
    }
  }
  for (size_t i = 0; i < ngaps && !s; i++) s = tc_alloc_free(r->a, gaps[i]);
  free(gaps);
  /* blocks whose free was requested before the window: their events wait */
  for (size_t k = 0; k < h->num_blocks && !s; k++) {
    const tc_tsblock *b = &h->blocks[k];
    if (!b->pending || b->slot == HOP_NO_SLOT || !r->addr[b->slot]) continue;
    r->cur_slot = b->slot;
    s = tc_alloc_record_stream(r->a, r->addr[b->slot], r->ev_stream[b->slot]);
    if (!s) s = tc_alloc_free(r->a, r->addr[b->slot]);
    r->addr[b->slot] = 0;
  }
  if (s == TCUDA_ERROR_OUT_OF_MEMORY) {
    /* never go on from a smaller state than torch's: its figures would
     * look like an answer */
    tcuda_clear_error();
    s = TCUDA_SUCCESS;
    r->start_oom = 1;
  }
  tc_alloc_reset_peak(r->a);
  return s;
}

/* The state when the history begins is torch's, not a prediction: when it
 * does not fit, no figure after it would be right. Under a limit only its
 * live blocks must fit (torch would have released cached segments). */
static tcuda_status start_too_big(hr *r, uint64_t cap, uint64_t allowed, uint64_t live) {
  const tc_tsnap *h = r->h;
  uint64_t seg = 0;
  for (size_t k = 0; k < h->num_segs; k++) seg += h->segs[k].size;
  if (allowed)
    return tc_error(TCUDA_ERROR_OUT_OF_MEMORY,
                    "%s: the state when the history begins does not fit: its live blocks hold %llu bytes, over "
                    "the limit of %llu bytes; raise the limit",
                    h->where, (unsigned long long)live, (unsigned long long)allowed);
  return tc_error(TCUDA_ERROR_OUT_OF_MEMORY,
                  "%s: the state when the history begins does not fit: its %zu segments hold %llu bytes, the "
                  "simulated device has %llu bytes; raise the capacity",
                  h->where, h->num_segs, (unsigned long long)seg, (unsigned long long)cap);
}

/* ---- the loop ---- */

/* Could the policy itself free segments in this request? Only when no
 * cached block fits (the recorded history then shows a new segment, or an
 * OOM), and only under a limit that the new segment would pass, or with
 * garbage collection on. */
static int policy_may_free(hr *r, const tc_tsop *op, const tc_alloc_config *cfg, uint64_t allowed) {
  if (op->kind != HOP_OOM && !r->seg_alloc_since_free) return 0;
  tcuda_memory_stats_t st;
  tc_alloc_get_stats(r->a, &st);
  uint64_t need = tc_alloc_segment_size(cfg, tc_alloc_round_size(cfg, op->size));
  uint64_t reserved = (uint64_t)st.reserved_bytes[TCUDA_STAT_ALL].current;
  if (allowed && (cfg->garbage_collection_threshold > 0 || reserved + need > allowed)) return 1;
  uint64_t cap = r->o->capacity ? r->o->capacity : TC_H200_CAPACITY;
  return reserved + need > cap;
}

typedef struct {
  int n, cur;
  size_t per;
  uint64_t rmin, amin; /* since the last point */
} series_state;

static tcuda_status series_init(hr *r, tc_tsrun_result *res, series_state *ss) {
  int n = r->o->series_points;
  if (n <= 0) return TCUDA_SUCCESS;
  size_t ops = r->h->num_ops ? r->h->num_ops : 1;
  if ((size_t)n > ops) n = (int)ops;
  res->series_t = calloc((size_t)n, sizeof *res->series_t);
  res->series_reserved = calloc((size_t)n, sizeof *res->series_reserved);
  res->series_allocated = calloc((size_t)n, sizeof *res->series_allocated);
  res->series_reserved_min = calloc((size_t)n, sizeof *res->series_reserved_min);
  res->series_allocated_min = calloc((size_t)n, sizeof *res->series_allocated_min);
  if (!res->series_t || !res->series_reserved || !res->series_allocated || !res->series_reserved_min ||
      !res->series_allocated_min)
    return oom(r->func);
  ss->rmin = ss->amin = UINT64_MAX;
  ss->n = n;
  ss->per = (ops + (size_t)n - 1) / (size_t)n;
  ss->cur = 0;
  return TCUDA_SUCCESS;
}

/* The point that ends at op i: the maxima since the last point, read from
 * the peaks, which restart at each point (the run's peaks are then the
 * maxima of the points). */
static void series_point(hr *r, tc_tsrun_result *res, series_state *ss, size_t i) {
  tcuda_memory_stats_t st;
  tc_alloc_get_stats(r->a, &st);
  uint64_t pr = (uint64_t)st.reserved_bytes[0].peak, pa = (uint64_t)st.allocated_bytes[0].peak;
  uint64_t ps = (uint64_t)st.segment[0].peak;
  if (pr > res->peak_reserved) res->peak_reserved = pr;
  if (pa > res->peak_allocated) res->peak_allocated = pa;
  if (ps > res->peak_segments) res->peak_segments = ps;
  if (ss->cur < ss->n) {
    size_t n = r->h->num_ops;
    res->series_t[ss->cur] = n ? (double)r->h->op_time_us[i < n ? i : n - 1] / 1000.0 : 0.0;
    res->series_reserved[ss->cur] = pr;
    res->series_allocated[ss->cur] = pa;
    res->series_reserved_min[ss->cur] = ss->rmin <= pr ? ss->rmin : pr;
    res->series_allocated_min[ss->cur] = ss->amin <= pa ? ss->amin : pa;
    res->series_n = ++ss->cur;
  }
  ss->rmin = ss->amin = UINT64_MAX;
  tc_alloc_reset_peak(r->a);
}

/* The minima need the state after every op (the maxima come from the
 * peaks): read only for the replay that draws a series. */
static void series_low(hr *r, series_state *ss) {
  tcuda_memory_stats_t st;
  tc_alloc_get_stats(r->a, &st);
  uint64_t cr = (uint64_t)st.reserved_bytes[0].current, ca = (uint64_t)st.allocated_bytes[0].current;
  if (cr < ss->rmin) ss->rmin = cr;
  if (ca < ss->amin) ss->amin = ca;
}

static tcuda_status run_ops(hr *r, tc_tsrun_result *res, const tc_alloc_config *cfg, uint64_t allowed) {
  tc_tsnap *h = r->h;
  const tc_tsrun_opts *o = r->o;
  series_state ss = {0};
  tcuda_status s = series_init(r, res, &ss);
  size_t req = 0;
  int empty_since_alloc = 0;
  for (size_t i = 0; i < h->num_ops && !s; i++) {
    tc_tsop *op = &h->ops[i];
    if (o->exact == 1) {
      switch (op->kind) {
      case HOP_SEG_FREE:
      case HOP_SEG_UNMAP:
        if (!rset_take(&r->early, op->addr, op->size) && !rset_push(&r->pend, op->addr, op->size))
          return oom(r->func);
        r->seg_alloc_since_free = 0;
        break;
      case HOP_SEG_ALLOC:
      case HOP_SEG_MAP:
        r->seg_alloc_since_free = 1;
        break;
      case HOP_FREE_DONE:
        break;
      default:
        if (r->pend.live && !((op->kind == HOP_ALLOC || op->kind == HOP_OOM) && policy_may_free(r, op, cfg, allowed))) {
          op->flags |= HOP_F_EMPTY_BEFORE;
          res->inferred_empty++;
        }
      }
    }
    if ((op->flags & HOP_F_EMPTY_BEFORE) || ((op->flags & HOP_F_CAPTURE) && !empty_since_alloc)) {
      if ((s = tc_alloc_empty_cache(r->a))) break;
      empty_since_alloc = 1;
      if (o->exact == 1 && r->pend.live) { /* frees that neither the policy nor empty_cache explain */
        r->diverged += r->pend.live;
        rset_clear(&r->pend);
      }
    }
    size_t req_at = req;
    uint64_t got = 0;
    switch (op->kind) {
    case HOP_ALLOC:
    case HOP_OOM: {
      uint64_t p = 0;
      empty_since_alloc = 0;
      if (op->pool && op->pool <= h->num_pools && op->kind == HOP_ALLOC) s = malloc_in_pool(r, op, &p);
      else s = tc_alloc_malloc(r->a, op->size, op->stream, &p);
      if (s == TCUDA_ERROR_OUT_OF_MEMORY) {
        if (o->on_oom) o->on_oom(o->oom_user, (unsigned)req, tcuda_last_error());
        tcuda_clear_error();
        s = TCUDA_SUCCESS;
        if (res->first_oom < 0) {
          res->first_oom = (int64_t)req;
          res->first_oom_size = op->size;
        }
        if (o->stop_at_oom) i = h->num_ops;
        p = 0;
      } else if (!s && op->kind == HOP_OOM && p) {
        /* torch refused it and the program went on without it: here it
         * fits, and is given back at once */
        s = tc_alloc_free(r->a, p);
        p = 0;
      }
      if (op->kind == HOP_ALLOC && op->slot < h->num_slots) r->addr[op->slot] = p;
      got = op->kind == HOP_ALLOC ? p : 0;
      req++;
      break;
    }
    case HOP_FREE:
      if (op->slot < h->num_slots && r->addr[op->slot]) s = tc_alloc_free(r->a, r->addr[op->slot]);
      if (op->slot < h->num_slots) r->addr[op->slot] = 0;
      break;
    case HOP_FREE_REQ:
      if (op->slot < h->num_slots && r->addr[op->slot]) {
        r->cur_slot = op->slot;
        s = tc_alloc_record_stream(r->a, r->addr[op->slot], r->ev_stream[op->slot]);
        if (!s) s = tc_alloc_free(r->a, r->addr[op->slot]);
        r->addr[op->slot] = 0;
      }
      break;
    case HOP_FREE_DONE:
      if (op->slot < h->num_slots) r->done[op->slot] = 1;
      break;
    case HOP_SNAPSHOT:
      if (o->checkpoint) s = o->checkpoint(o->user, r->a, 0);
      break;
    default:
      break;
    }
    if (!s && h->budget.limit && r->queries > h->budget.limit / QUERY_UNITS) /* 0: built by hand, unbudgeted */
      s = tc_error(TCUDA_ERROR_PARSE,
                   "%s: the replay checked pending record_stream frees more often than the input's work budget of "
                   "%llu units allows (frees completed in an order that makes every allocation look at all of them; "
                   "work_budget, --work-budget raises it)",
                   h->where, (unsigned long long)h->budget.limit);
    if (!s && ss.n) series_low(r, &ss);
    if (!s && o->on_op) s = o->on_op(o->op_user, r->a, i, req_at, got);
    if (!s && ss.n && ((i + 1) % ss.per == 0)) series_point(r, res, &ss, i);
  }
  if (!s && ss.n) series_point(r, res, &ss, h->num_ops ? h->num_ops - 1 : 0);
  return s;
}

void tc_tsrun_result_free(tc_tsrun_result *r) {
  free(r->series_t);
  free(r->series_reserved);
  free(r->series_allocated);
  free(r->series_reserved_min);
  free(r->series_allocated_min);
  r->series_t = NULL;
  r->series_reserved = r->series_allocated = r->series_reserved_min = r->series_allocated_min = NULL;
  r->series_n = 0;
}

double tc_tsnap_limit_fraction(uint64_t limit, uint64_t capacity) {
  if (!capacity || limit >= capacity) return 1.0;
  /* as a program sets it, set_per_process_memory_fraction(limit / total):
   * torch then allows (size_t)(fraction * total) bytes, which can be one
   * short of the limit, and a history that fits exactly then runs out */
  return (double)limit / (double)capacity;
}

tcuda_status tc_tsnap_run(const char *func, tc_tsnap *h, const tc_tsrun_opts *o, tc_tsrun_result *res) {
  memset(res, 0, sizeof *res);
  if (o->exact == 1) /* this run infers them afresh */
    for (size_t i = 0; i < h->num_ops; i++) h->ops[i].flags &= (uint8_t)~HOP_F_EMPTY_BEFORE;
  res->first_oom = -1;
  hr r;
  memset(&r, 0, sizeof r);
  r.func = func;
  r.h = h;
  r.o = o;
  const tc_alloc_config *cfg = o->cfg ? o->cfg : &h->cfg;
  uint64_t cap = o->capacity ? o->capacity : TC_H200_CAPACITY;
  tc_sim_options so = {.capacity = cap, .va = TC_SIM_VA_DRIVER};
  /* the driver's first layout differs when a side stream allocates first */
  for (size_t i = 0; i < h->num_ops; i++) {
    if (h->ops[i].kind == HOP_ALLOC) {
      so.streams_before_first_malloc = h->ops[i].stream != 0;
      break;
    }
  }
  tcuda_status s = tc_backend_sim_create(&so, &r.sim);
  if (!s && o->exact) s = collect_placements(&r);
  if (!s) {
    r.addr = calloc(h->num_slots ? h->num_slots : 1, sizeof *r.addr);
    r.done = calloc(h->num_slots ? h->num_slots : 1, 1);
    r.routes = calloc(h->num_pools ? h->num_pools : 1, sizeof *r.routes);
    r.pool_made = calloc(h->num_pools ? h->num_pools : 1, 1);
    if (!r.addr || !r.done || !r.routes || !r.pool_made) s = oom(func);
  }
  if (!s) s = tc_tsnap_event_streams(func, h, &r.ev_stream);
  if (!s) {
    tc_bwrap_init(&r.be, r.sim, &w_hooks, &r);
    s = tc_alloc_create(0, &r.be.be, cfg, cap, &r.a);
  }
  if (!s && o->on_create) s = o->on_create(o->user, r.a);
  /* the starting state is rebuilt before the limit is set: torch held it */
  if (!s && h->truncated) s = seed(&r);
  if (!s && r.start_oom && !o->stop_at_oom) s = start_too_big(&r, cap, 0, 0);
  uint64_t allowed = 0;
  double fraction = o->fraction;
  if (o->limit) fraction = tc_tsnap_limit_fraction(o->limit, cap);
  if (!s && fraction > 0) {
    if (fraction > 1.0) fraction = 1.0;
    s = tc_alloc_set_memory_fraction(r.a, fraction);
    allowed = (uint64_t)(fraction * (double)cap);
    tcuda_memory_stats_t st;
    tc_alloc_get_stats(r.a, &st);
    uint64_t live = (uint64_t)st.allocated_bytes[TCUDA_STAT_ALL].current;
    if (!s && !r.start_oom && live > allowed) {
      r.start_oom = 1;
      if (!o->stop_at_oom) s = start_too_big(&r, cap, allowed, live);
    }
  }
  res->start_oom = r.start_oom;
  if (!s && !r.start_oom) s = run_ops(&r, res, cfg, allowed);
  if (!s && o->checkpoint) s = o->checkpoint(o->user, r.a, 1);
  if (!s) {
    tcuda_memory_stats_t st;
    tc_alloc_get_stats(r.a, &st);
    if (!o->series_points) {
      res->peak_reserved = (uint64_t)st.reserved_bytes[0].peak;
      res->peak_allocated = (uint64_t)st.allocated_bytes[0].peak;
      res->peak_segments = (uint64_t)st.segment[0].peak;
    }
    res->retries = (uint64_t)st.num_alloc_retries;
    res->ooms = (uint64_t)st.num_ooms;
    res->segment_calls = r.segment_calls;
    res->diverged = r.diverged + r.pend.live + r.early.live;
  }
  if (r.a) tc_alloc_destroy(r.a);
  if (r.sim) tc_backend_sim_destroy(r.sim);
  free(r.addr);
  free(r.done);
  free(r.ev_stream);
  free(r.routes);
  free(r.pool_made);
  free(r.segs);
  free(r.maps);
  rset_free(&r.pend);
  rset_free(&r.early);
  if (s) tc_tsrun_result_free(res);
  return s;
}

/* ---- tcuda replay --simulate SNAPSHOT ---- */

typedef struct {
  const char *func;
  tc_tsnap *h;
  tcuda_status (*write)(void *, const char *, size_t);
  void *user;
  int first, sink_failed;
  tc_history *hist;
  const char *history_path;
  const tc_alloc_config *cfg;
  const char *conf_text;
} snap_out;

static tcuda_status emit(snap_out *so, const char *p, size_t n) {
  tcuda_status s = so->write(so->user, p, n);
  if (!s) return s;
  so->sink_failed = 1;
  if (s == TCUDA_ERROR_HOST_OUT_OF_MEMORY) return tc_error(s, "%s: out of host memory", so->func);
  return tc_error(s, "%s: the output callback returned %s", so->func, tcuda_status_name(s));
}

static tcuda_status on_checkpoint(void *user, tc_alloc *a, int last) {
  snap_out *so = user;
  tcuda_memory_stats_t st;
  tc_alloc_get_stats(a, &st);
  tcuda_snapshot_t *snap = NULL;
  tcuda_status s = tc_alloc_snapshot(a, &snap);
  if (s) return s;
  char *sj = tc_report_stats_json_window(&st, so->h->truncated);
  char *gj = tc_report_snapshot_json(snap, NULL, NULL);
  tc_snapshot_free(snap);
  if (!sj || !gj) s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", so->func);
  const char *head = so->first ? "[\n{\"stats\": " : ",\n{\"stats\": ";
  /* the output counts against the snapshot's work budget: one 'snapshot'
   * entry, 2 bytes through the pickle memo, prints every live block */
  if (!s) s = tc_tsnap_spend(so->h, "the replay's output", strlen(head) + strlen(sj) + 14 + strlen(gj) + 4);
  if (!s && !(s = emit(so, head, strlen(head))) && !(s = emit(so, sj, strlen(sj))) &&
      !(s = emit(so, ", \"segments\": ", 14)) && !(s = emit(so, gj, strlen(gj))))
    s = emit(so, "}", 1);
  so->first = 0;
  free(sj);
  free(gj);
  if (!s && last && so->history_path)
    s = tc_replay_write_history(so->func, a, so->hist, 0, so->cfg, so->conf_text, so->history_path, NULL, NULL);
  if (!s && last) s = emit(so, "\n]\n", 3);
  return s;
}

static tcuda_status on_create(void *user, tc_alloc *a) {
  snap_out *so = user;
  if (so->hist) tc_alloc_set_trace(a, tc_history_trace, so->hist);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_replay_snapshot_to(const char *snapshot_path, const tcuda_replay_options_t *opt,
                                      tcuda_status (*write_fn)(void *user, const char *bytes, size_t n), void *user) {
  static const char *F = "tcuda_replay_snapshot_to";
  TC_CHECK_ARG(F, snapshot_path, "snapshot_path");
  TC_CHECK_ARG(F, write_fn, "write_fn");
  TC_CHECK_ARG(F, opt, "opt");
  if (opt->struct_size < sizeof(tcuda_replay_options_t))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: opt->struct_size %zu is not sizeof(tcuda_replay_options_t) (%zu)",
                    F, opt->struct_size, sizeof(tcuda_replay_options_t));
  if (opt->simulate != 1)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: a snapshot replays on the simulated device only (simulate = 1)", F);
  if (opt->addresses_file || opt->maps_file || opt->record_addresses || opt->va_mode)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: addresses_file, maps_file, record_addresses and va_mode do not apply to a snapshot (it "
                    "holds its own addresses)",
                    F);
  if (!(opt->memory_fraction >= 0.0 && opt->memory_fraction <= 1.0))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: memory_fraction %g out of range (0~1)", F, opt->memory_fraction);
  if (opt->history_path && !*opt->history_path)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: history_path is empty", F);
  if (opt->device < -1) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: device %d is negative", F, opt->device);
  tc_alloc_config cfg;
  tc_alloc_config_default(&cfg);
  int given = opt->config && *opt->config;
  tcuda_status s = TCUDA_SUCCESS;
  if (given) {
    char src[64];
    snprintf(src, sizeof src, "%s: config", F);
    if ((s = tc_alloc_config_parse_named(src, opt->config, &cfg))) return s;
  }
  tc_tsnap h;
  tc_tsnap_limits lim = {opt->max_input_bytes, opt->work_budget};
  if ((s = tc_tsnap_load_file(F, snapshot_path, opt->device, &lim, &h))) return s;
  snap_out so = {.func = F, .h = &h, .write = write_fn, .user = user, .first = 1, .history_path = opt->history_path,
                 .cfg = given ? &cfg : &h.cfg, .conf_text = given ? opt->config : h.conf_text};
  if (opt->history_path && (s = tc_history_create(0, 0, &so.hist))) {
    tc_tsnap_free(&h);
    return s;
  }
  tc_tsrun_result r;
  if (given) { /* torch's run first, to find the empty_cache calls */
    tc_tsrun_opts eo = {.exact = 1, .capacity = opt->capacity, .fraction = opt->memory_fraction};
    if (!(s = tc_tsnap_run(F, &h, &eo, &r))) tc_tsrun_result_free(&r);
  }
  if (!s) {
    tc_tsrun_opts ro = {.cfg = &cfg, .exact = given ? TC_TSRUN_FOLLOW : 1, .capacity = opt->capacity,
                       .fraction = opt->memory_fraction, .checkpoint = on_checkpoint, .user = &so,
                       .on_create = on_create, .on_oom = opt->on_oom, .oom_user = opt->on_oom_user};
    if (!given) ro.cfg = NULL;
    s = tc_tsnap_run(F, &h, &ro, &r);
    if (!s) tc_tsrun_result_free(&r);
  }
  tc_history_destroy(so.hist);
  tc_tsnap_free(&h);
  return s;
}
