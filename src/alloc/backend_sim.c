/* The simulated device: a capacity, deterministic addresses, events that
 * complete only when told. Used by replay, what-if runs and CPU tests.
 *
 * The "driver" address model follows what was measured on an H200 with
 * driver 580 / CUDA 13.0 (the recorded tests/data/torch/NAME.addresses), refitted so that it
 * predicts every cudaMalloc address of the 15 recorded non-expandable traces
 * (548 of 548, up to the process's base). VA comes in chunks of
 * round_up(size, 32 MiB) placed downward; an allocation goes into an
 * existing chunk before a new chunk is made; a chunk goes when its last
 * allocation does. Best-fit ties in the allocator are broken by address, so
 * this order matters for exactness. */
#include "alloc/backend.h"
#include "alloc/config.h"
#include "core/table.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB ((uint64_t)1 << 20)
#define UNIT (2 * MIB)
#define CHUNK_ROUND (32 * MIB)
/* The driver's first chunk. Its offset in 512 MiB matters (512 MiB-multiple
 * requests are aligned to 512 MiB) and differs from process to process on
 * the real driver; 64 MiB is the offset seen most often (4 of 15 runs). */
#define DRIVER_BASE 0x7f0004000000ull
#define HUGE_ALIGN (512 * MIB)
#define ASC_BASE 0x7f0000000000ull
/* cuMemAddressReserve, as recorded on the H200: the first reservation at
 * 16 GiB + 32 MiB, the next at the first 32 MiB boundary after its end, a
 * released range reused. */
#define RESERVE_BASE 0x402000000ull

typedef struct sim_chunk {
  uint64_t base, size;
  uint8_t *used; /* one byte per 2 MiB unit */
  size_t nunits, nallocs;
  size_t nfree;  /* units not in use: a chunk with fewer than a request's is not scanned */
  size_t next;   /* unit after the chunk's latest allocation */
  int permanent; /* held by the driver: never released */
} sim_chunk;

/* Live segments are disjoint; they are kept in a treap by address (node 0
 * is the null link), so that freeing one and checking a range for overlap
 * cost O(log n) however many a replay holds. */
typedef struct sim_live {
  uint64_t addr, size;
  sim_chunk *chunk; /* NULL for recorded or ascending placements */
  uint32_t pri, l, r;
} sim_live;

typedef struct sim_range {
  uint64_t base, size;
} sim_range;

typedef struct sim_res {
  uint64_t addr, size, mapped;
  uint8_t *pmap; /* one byte per 2 MiB unit */
} sim_res;

typedef struct sim_event {
  uint64_t seq, stream;
  int done;
} sim_event;

typedef struct sim_sdone {
  uint64_t stream, seq;
} sim_sdone;

typedef struct sim {
  tc_backend be;
  pthread_mutex_t mu;
  uint64_t capacity, used;
  tc_sim_va va;
  sim_chunk **chunks; /* sorted by base */
  sim_chunk **byage;  /* the same, oldest first */
  size_t nchunks, capchunks, capbyage;
  sim_live *live;       /* treap nodes; free ones are chained through l */
  size_t nlive, caplive; /* live segments; nodes allocated, node 0 included */
  uint32_t live_root, live_free, live_rng;
  uint64_t ceiling; /* new chunks go below this... */
  uint64_t lowmark; /* ...and below the lowest live chunk, unless a gap takes them */
  uint64_t asc_next;
  sim_range *rec; /* recorded addresses */
  size_t nrec, rec_pos, caprec;
  uint64_t rec_low, rec_high;
  sim_res *res;
  size_t nres, capres;
  uint64_t *res_bases; /* recorded reservation bases */
  size_t nres_bases, res_pos;
  uint64_t ev_seq, ev_done;
  sim_sdone *sdone;
  size_t nsdone, capsdone;
} sim;

static tcuda_status host_oom(void) { return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "sim: out of host memory"); }

/* ---- chunks ---- */

static sim_chunk *chunk_add(sim *s, uint64_t base, uint64_t size, int permanent) {
  if (!tc_grow((void **)&s->chunks, &s->capchunks, s->nchunks + 1, sizeof *s->chunks) ||
      !tc_grow((void **)&s->byage, &s->capbyage, s->nchunks + 1, sizeof *s->byage))
    return NULL;
  sim_chunk *c = (sim_chunk *)calloc(1, sizeof *c);
  if (!c || !(c->used = (uint8_t *)calloc(size / UNIT ? size / UNIT : 1, 1))) {
    free(c);
    return NULL;
  }
  c->base = base;
  c->size = size;
  c->nunits = size / UNIT;
  c->nfree = c->nunits;
  c->permanent = permanent;
  size_t i = 0;
  while (i < s->nchunks && s->chunks[i]->base < base) i++;
  memmove(&s->chunks[i + 1], &s->chunks[i], (s->nchunks - i) * sizeof *s->chunks);
  s->chunks[i] = c;
  s->byage[s->nchunks++] = c;
  if (base < s->lowmark) s->lowmark = base;
  return c;
}

static void chunk_remove(sim *s, sim_chunk *c) {
  size_t i = 0, j = 0;
  while (s->chunks[i] != c) i++;
  while (s->byage[j] != c) j++;
  s->nchunks--;
  memmove(&s->chunks[i], &s->chunks[i + 1], (s->nchunks - i) * sizeof *s->chunks);
  memmove(&s->byage[j], &s->byage[j + 1], (s->nchunks - j) * sizeof *s->byage);
  /* The space below the lowest live chunk is not reused: the next new chunk
   * goes directly below the lowest one still there. */
  if (c->base == s->lowmark) {
    s->lowmark = s->ceiling;
    for (size_t k = 0; k < s->nchunks; k++)
      if (s->chunks[k]->base < s->lowmark) s->lowmark = s->chunks[k]->base;
  }
  free(c->used);
  free(c);
}

/* ---- live segments ---- */

/* t's nodes with addresses below key into *a, the rest into *b */
static void live_split(sim_live *v, uint32_t t, uint64_t key, uint32_t *a, uint32_t *b) {
  if (!t) {
    *a = *b = 0;
  } else if (v[t].addr < key) {
    live_split(v, v[t].r, key, &v[t].r, b);
    *a = t;
  } else {
    live_split(v, v[t].l, key, a, &v[t].l);
    *b = t;
  }
}

static uint32_t live_merge(sim_live *v, uint32_t a, uint32_t b) {
  if (!a || !b) return a ? a : b;
  if (v[a].pri > v[b].pri) {
    v[a].r = live_merge(v, v[a].r, b);
    return a;
  }
  v[b].l = live_merge(v, a, v[b].l);
  return b;
}

/* Room for one more node: 1, or 0 on host OOM. */
static int live_reserve(sim *s) {
  if (s->live_free) return 1;
  size_t cap = s->caplive;
  if (s->nlive + 2 > UINT32_MAX || !tc_grow((void **)&s->live, &cap, s->nlive + 2, sizeof *s->live)) return 0;
  s->caplive = cap;
  return 1;
}

/* After live_reserve. */
static void live_add(sim *s, uint64_t addr, uint64_t size, sim_chunk *chunk) {
  uint32_t n = s->live_free;
  if (n) s->live_free = s->live[n].l;
  else n = (uint32_t)(s->nlive + 1); /* with no free node, nodes 1..nlive are all in use */
  s->live_rng ^= s->live_rng << 13;
  s->live_rng ^= s->live_rng >> 17;
  s->live_rng ^= s->live_rng << 5;
  s->live[n] = (sim_live){addr, size, chunk, s->live_rng, 0, 0};
  uint32_t a, b;
  live_split(s->live, s->live_root, addr, &a, &b);
  s->live_root = live_merge(s->live, live_merge(s->live, a, n), b);
  s->nlive++;
}

/* The live segment at addr taken out (its node is free again), or NULL. */
static const sim_live *live_take(sim *s, uint64_t addr) {
  uint32_t a, b, m, c;
  live_split(s->live, s->live_root, addr, &a, &b);
  live_split(s->live, b, addr + 1, &m, &c);
  s->live_root = live_merge(s->live, a, c);
  if (!m) return NULL;
  s->live[m].l = s->live_free;
  s->live_free = m;
  s->nlive--;
  return &s->live[m];
}

/* The live segment that overlaps [addr, addr + size), or NULL: the one
 * starting last below the range's end is the only candidate. */
static const sim_live *live_overlap(const sim *s, uint64_t addr, uint64_t size) {
  const sim_live *best = NULL;
  for (uint32_t t = s->live_root; t;) {
    const sim_live *l = &s->live[t];
    if (l->addr - addr < size || l->addr < addr) {
      best = l;
      t = l->r;
    } else {
      t = l->l;
    }
  }
  return best && best->addr + best->size > addr ? best : NULL;
}

static int overlaps_live(const sim *s, uint64_t addr, uint64_t size, const sim_live **which) {
  const sim_live *l = live_overlap(s, addr, size);
  if (which) *which = l;
  return l != NULL;
}

static int run_free(const sim *s, const sim_chunk *c, size_t start, size_t n) {
  if (start + n > c->nunits) return 0;
  for (size_t u = start; u < start + n; u++)
    if (c->used[u]) return 0;
  return !s->rec_pos || !overlaps_live(s, c->base + start * UNIT, n * UNIT, NULL);
}

/* Room for n units inside existing chunks, newest chunk first; in a chunk,
 * right after its latest allocation if that is free, else the lowest free
 * run (recorded segments avoided). */
static sim_chunk *find_in_chunks(sim *s, size_t n, size_t *unit) {
  for (size_t k = s->nchunks; k-- > 0;) {
    sim_chunk *c = s->byage[k];
    if (c->nfree < n) continue;
    if (run_free(s, c, c->next, n)) {
      *unit = c->next;
      return c;
    }
    size_t run = 0;
    for (size_t u = 0; u < c->nunits; u++) {
      run = c->used[u] ? 0 : run + 1;
      if (run < n) continue;
      if (run_free(s, c, u + 1 - n, n)) {
        *unit = u + 1 - n;
        return c;
      }
      run = 0; /* a recorded segment sits there */
    }
  }
  return NULL;
}

static int gap_fits(const sim *s, uint64_t lo, uint64_t hi, uint64_t csize, uint64_t align, uint64_t *base) {
  if (hi <= lo || hi - lo <= csize) return 0;
  *base = (hi - csize) / align * align;
  return *base >= lo && !(s->rec_pos && overlaps_live(s, *base, csize, NULL));
}

/* Where a new chunk of csize bytes goes: at the top of the highest free gap
 * between chunks (above the lowmark, below the ceiling) that is larger than
 * the chunk (an exact fit was never taken), else directly below the lowest
 * chunk. A request that is a multiple of 512 MiB gets a 512 MiB-aligned
 * base (the driver's huge pages), which can leave a gap above it. */
static uint64_t place_new_chunk(const sim *s, uint64_t size, uint64_t csize) {
  uint64_t align = size % HUGE_ALIGN ? UNIT : HUGE_ALIGN, base = 0;
  uint64_t floor = s->lowmark;
  if (s->rec_pos && s->rec_low / CHUNK_ROUND * CHUNK_ROUND < floor) floor = s->rec_low / CHUNK_ROUND * CHUNK_ROUND;
  uint64_t top = s->ceiling; /* the gaps, highest first */
  for (size_t k = s->nchunks; k-- > 0 && top > floor;) {
    const sim_chunk *c = s->chunks[k];
    if (c->base >= s->ceiling) continue;
    if (gap_fits(s, c->base + c->size, top, csize, align, &base)) return base;
    if (c->base < top) top = c->base;
  }
  if (gap_fits(s, floor, top, csize, align, &base)) return base;
  return (floor - csize) / align * align;
}

static tcuda_status place_driver(sim *s, uint64_t size, uint64_t *addr, sim_chunk **owner) {
  size_t n = (size_t)((size + UNIT - 1) / UNIT), unit = 0;
  sim_chunk *c = find_in_chunks(s, n, &unit);
  if (!c) {
    uint64_t csize = (size + CHUNK_ROUND - 1) / CHUNK_ROUND * CHUNK_ROUND;
    if (size <= UNIT) csize = 2 * CHUNK_ROUND; /* a 2 MiB request got a 64 MiB chunk */
    c = chunk_add(s, place_new_chunk(s, size, csize), csize, 0);
    if (!c) return host_oom();
    unit = 0;
  }
  memset(c->used + unit, 1, n);
  c->nfree -= n;
  c->nallocs++;
  c->next = unit + n;
  *addr = c->base + unit * UNIT;
  *owner = c;
  return TCUDA_SUCCESS;
}

/* ---- backend functions ---- */

static tcuda_status sim_segment_alloc(void *ctx, int device, uint64_t size, uint64_t *addr) {
  sim *s = (sim *)ctx;
  (void)device;
  pthread_mutex_lock(&s->mu);
  tcuda_status st = TCUDA_SUCCESS;
  if (!size || s->used + size > s->capacity || s->used + size < s->used) {
    st = TCUDA_ERROR_OUT_OF_MEMORY; /* the policy writes the OOM message */
    goto out;
  }
  if (!live_reserve(s)) {
    st = host_oom();
    goto out;
  }
  uint64_t a = 0;
  sim_chunk *owner = NULL;
  if (s->rec_pos < s->nrec) {
    const sim_range *r = &s->rec[s->rec_pos];
    const sim_live *w;
    if (r->size != size) {
      st = tc_error(TCUDA_ERROR_INVALID_STATE,
                    "replay diverged at segment %zu: recorded size %llu, the allocator asked for %llu",
                    s->rec_pos + 1, (unsigned long long)r->size, (unsigned long long)size);
      goto out;
    }
    if (overlaps_live(s, r->base, r->size, &w)) {
      st = tc_error(TCUDA_ERROR_INVALID_STATE,
                    "replay diverged at segment %zu: recorded address 0x%llx overlaps live segment 0x%llx (%llu bytes)",
                    s->rec_pos + 1, (unsigned long long)r->base, (unsigned long long)w->addr,
                    (unsigned long long)w->size);
      goto out;
    }
    a = r->base;
    s->rec_pos++;
  } else if (s->va == TC_SIM_VA_ASCENDING) {
    if (s->rec_pos && s->asc_next < s->rec_high) s->asc_next = (s->rec_high + UNIT - 1) / UNIT * UNIT;
    a = s->asc_next;
    s->asc_next += (size + UNIT - 1) / UNIT * UNIT;
  } else {
    st = place_driver(s, size, &a, &owner);
    if (st) goto out;
  }
  live_add(s, a, size, owner);
  s->used += size;
  *addr = a;
out:
  pthread_mutex_unlock(&s->mu);
  return st;
}

static tcuda_status sim_segment_free(void *ctx, int device, uint64_t addr, uint64_t size) {
  sim *s = (sim *)ctx;
  (void)device;
  pthread_mutex_lock(&s->mu);
  const sim_live *l = live_overlap(s, addr, 1);
  if (!l || l->addr != addr || l->size != size) {
    pthread_mutex_unlock(&s->mu);
    return tc_error(TCUDA_ERROR_INVALID_POINTER, "sim: segment_free of unknown segment 0x%llx (%llu bytes)",
                    (unsigned long long)addr, (unsigned long long)size);
  }
  sim_chunk *c = live_take(s, addr)->chunk;
  s->used -= size;
  if (c) {
    memset(c->used + (addr - c->base) / UNIT, 0, (size + UNIT - 1) / UNIT);
    c->nfree += (size + UNIT - 1) / UNIT;
    if (--c->nallocs == 0 && !c->permanent) chunk_remove(s, c);
  }
  pthread_mutex_unlock(&s->mu);
  return TCUDA_SUCCESS;
}

static sim_res *res_find(sim *s, uint64_t addr, uint64_t size) {
  for (size_t i = 0; i < s->nres; i++) {
    sim_res *r = &s->res[i];
    if (addr >= r->addr && size <= r->size && addr - r->addr <= r->size - size) return r;
  }
  return NULL;
}

static int res_overlaps(const sim *s, uint64_t a, uint64_t size) {
  for (size_t i = 0; i < s->nres; i++)
    if (a < s->res[i].addr + s->res[i].size && s->res[i].addr < a + size) return 1;
  return 0;
}

/* The lowest free 32 MiB boundary from RESERVE_BASE on: right after a live
 * reservation, or the base itself (a released range was reused). */
static uint64_t res_place(const sim *s, uint64_t size) {
  uint64_t best = res_overlaps(s, RESERVE_BASE, size) ? UINT64_MAX : RESERVE_BASE;
  for (size_t i = 0; i < s->nres; i++) {
    uint64_t a = (s->res[i].addr + s->res[i].size + CHUNK_ROUND - 1) / CHUNK_ROUND * CHUNK_ROUND;
    if (a >= RESERVE_BASE && a < best && !res_overlaps(s, a, size)) best = a;
  }
  return best;
}

static tcuda_status sim_va_reserve(void *ctx, int device, uint64_t size, uint64_t *addr) {
  sim *s = (sim *)ctx;
  (void)device;
  if (!size) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "sim: va_reserve of 0 bytes");
  pthread_mutex_lock(&s->mu);
  tcuda_status st = TCUDA_SUCCESS;
  uint8_t *pmap = NULL;
  if (!tc_grow((void **)&s->res, &s->capres, s->nres + 1, sizeof *s->res) ||
      !(pmap = (uint8_t *)calloc((size + UNIT - 1) / UNIT, 1))) {
    st = host_oom();
  } else {
    uint64_t a = 0;
    if (s->res_pos < s->nres_bases) {
      a = s->res_bases[s->res_pos];
      for (size_t i = 0; i < s->nres; i++)
        if (a < s->res[i].addr + s->res[i].size && s->res[i].addr < a + size && !st)
          st = tc_error(TCUDA_ERROR_INVALID_STATE,
                        "replay diverged at reservation %zu: recorded base 0x%llx overlaps live reservation 0x%llx",
                        s->res_pos + 1, (unsigned long long)a, (unsigned long long)s->res[i].addr);
      if (!st) s->res_pos++;
    } else {
      a = res_place(s, size);
      if (a == UINT64_MAX || a + size < a)
        st = tc_error(TCUDA_ERROR_OUT_OF_MEMORY, "sim: no virtual address range of %llu bytes left",
                      (unsigned long long)size);
    }
    if (st) {
      free(pmap);
    } else {
      s->res[s->nres++] = (sim_res){a, size, 0, pmap};
      *addr = a;
    }
  }
  pthread_mutex_unlock(&s->mu);
  return st;
}

static tcuda_status sim_va_release(void *ctx, int device, uint64_t addr, uint64_t size) {
  sim *s = (sim *)ctx;
  (void)device;
  pthread_mutex_lock(&s->mu);
  tcuda_status st = TCUDA_SUCCESS;
  size_t i = 0;
  while (i < s->nres && s->res[i].addr != addr) i++;
  if (i == s->nres || s->res[i].size != size)
    st = tc_error(TCUDA_ERROR_INVALID_POINTER, "sim: va_release of unknown reservation 0x%llx",
                  (unsigned long long)addr);
  else if (s->res[i].mapped)
    st = tc_error(TCUDA_ERROR_INVALID_STATE, "sim: va_release of reservation 0x%llx with %llu bytes still mapped",
                  (unsigned long long)addr, (unsigned long long)s->res[i].mapped);
  else {
    free(s->res[i].pmap);
    s->res[i] = s->res[--s->nres];
  }
  pthread_mutex_unlock(&s->mu);
  return st;
}

static tcuda_status sim_map(void *ctx, int device, uint64_t addr, uint64_t size) {
  sim *s = (sim *)ctx;
  (void)device;
  pthread_mutex_lock(&s->mu);
  tcuda_status st = TCUDA_SUCCESS;
  sim_res *r = res_find(s, addr, size);
  if (!r || !size || (addr - r->addr) % UNIT || size % UNIT) {
    st = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "sim: map of 0x%llx (%llu bytes) outside a reservation or unaligned",
                  (unsigned long long)addr, (unsigned long long)size);
    goto out;
  }
  size_t u0 = (size_t)((addr - r->addr) / UNIT), n = (size_t)(size / UNIT);
  for (size_t u = u0; u < u0 + n; u++)
    if (r->pmap[u]) {
      st = tc_error(TCUDA_ERROR_INVALID_STATE, "sim: map of 0x%llx: already mapped",
                    (unsigned long long)(r->addr + u * UNIT));
      goto out;
    }
  if (s->used + size > s->capacity) {
    st = TCUDA_ERROR_OUT_OF_MEMORY;
    goto out;
  }
  memset(r->pmap + u0, 1, n);
  r->mapped += size;
  s->used += size;
out:
  pthread_mutex_unlock(&s->mu);
  return st;
}

static tcuda_status sim_unmap(void *ctx, int device, uint64_t addr, uint64_t size) {
  sim *s = (sim *)ctx;
  (void)device;
  pthread_mutex_lock(&s->mu);
  tcuda_status st = TCUDA_SUCCESS;
  sim_res *r = res_find(s, addr, size);
  size_t u0 = r ? (size_t)((addr - r->addr) / UNIT) : 0, n = (size_t)(size / UNIT);
  int ok = r && size && !((addr - r->addr) % UNIT) && !(size % UNIT);
  for (size_t u = u0; ok && u < u0 + n; u++) ok = r->pmap[u];
  if (!ok) {
    st = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "sim: unmap of 0x%llx (%llu bytes): not mapped",
                  (unsigned long long)addr, (unsigned long long)size);
  } else {
    memset(r->pmap + u0, 0, n);
    r->mapped -= size;
    s->used -= size;
  }
  pthread_mutex_unlock(&s->mu);
  return st;
}

static tcuda_status sim_event_record(void *ctx, int device, uint64_t stream, void **event) {
  sim *s = (sim *)ctx;
  (void)device;
  sim_event *e = (sim_event *)calloc(1, sizeof *e);
  if (!e) return host_oom();
  pthread_mutex_lock(&s->mu);
  e->seq = ++s->ev_seq;
  e->stream = stream;
  pthread_mutex_unlock(&s->mu);
  *event = e;
  return TCUDA_SUCCESS;
}

static int sim_event_query(void *ctx, void *event) {
  sim *s = (sim *)ctx;
  sim_event *e = (sim_event *)event;
  pthread_mutex_lock(&s->mu);
  int done = e->done || e->seq <= s->ev_done;
  for (size_t i = 0; !done && i < s->nsdone; i++)
    if (s->sdone[i].stream == e->stream && e->seq <= s->sdone[i].seq) done = 1;
  pthread_mutex_unlock(&s->mu);
  return done;
}

static tcuda_status sim_event_synchronize(void *ctx, void *event) {
  (void)ctx;
  ((sim_event *)event)->done = 1; /* the host waited: the GPU got there */
  return TCUDA_SUCCESS;
}

static void sim_event_release(void *ctx, void *event) {
  (void)ctx;
  free(event);
}

static tcuda_status sim_stream_synchronize(void *ctx, int device, uint64_t stream) {
  sim *s = (sim *)ctx;
  (void)device;
  pthread_mutex_lock(&s->mu);
  size_t i = 0;
  while (i < s->nsdone && s->sdone[i].stream != stream) i++;
  tcuda_status st = TCUDA_SUCCESS;
  if (i == s->nsdone) {
    if (tc_grow((void **)&s->sdone, &s->capsdone, s->nsdone + 1, sizeof *s->sdone))
      s->sdone[s->nsdone++] = (sim_sdone){stream, 0};
    else
      st = host_oom();
  }
  if (!st) s->sdone[i].seq = s->ev_seq;
  pthread_mutex_unlock(&s->mu);
  return st;
}

static tcuda_status sim_device_synchronize(void *ctx, int device) {
  (void)device;
  tc_backend_sim_complete_events(&((sim *)ctx)->be);
  return TCUDA_SUCCESS;
}

static tcuda_status sim_mem_info(void *ctx, int device, uint64_t *free_bytes, uint64_t *total_bytes) {
  sim *s = (sim *)ctx;
  (void)device;
  pthread_mutex_lock(&s->mu);
  *free_bytes = s->capacity - s->used;
  *total_bytes = s->capacity;
  pthread_mutex_unlock(&s->mu);
  return TCUDA_SUCCESS;
}

/* ---- recorded addresses ---- */

static int parse_num(const char **p, uint64_t *out) {
  const char *s = *p;
  while (*s == ' ' || *s == '\t') s++;
  if (*s < '0' || *s > '9') return 0;
  int base = (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? 16 : 10;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, base);
  if (errno || end == s || (base == 16 && end == s + 2)) return 0;
  *out = v;
  *p = end;
  return 1;
}

static tcuda_status load_addresses(sim *s, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f)
    return tc_error(TCUDA_ERROR_IO, "tc_backend_sim_create: cannot open addresses file '%s': %s", path,
                    strerror(errno));
  char line[512];
  size_t lineno = 0;
  tcuda_status st = TCUDA_SUCCESS;
  s->rec_low = UINT64_MAX;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    const char *p = line;
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
    if (!*p) continue;
    uint64_t a, sz;
    int ok = parse_num(&p, &a) && parse_num(&p, &sz);
    while (ok && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    /* cudaMalloc's addresses are aligned at least to the allocator's 512 B
     * blocks, which the policy relies on */
    if (!ok || *p || !sz || a + sz < a || !a || a % TC_MIN_BLOCK_SIZE) {
      char shown[160];
      line[strcspn(line, "\r\n")] = 0;
      st = tc_error(TCUDA_ERROR_PARSE, "tc_backend_sim_create: %s:%zu: expected 'ADDR SIZE'%s, got '%s'", path,
                    lineno,
                    ok && !*p && !a ? " with ADDR > 0 (0 is no address)"
                    : ok && !*p && sz && a + sz >= a ? " with ADDR a multiple of 512"
                                                     : "",
                    tc_printable(line, shown, sizeof shown));
      break;
    }
    if (!tc_grow((void **)&s->rec, &s->caprec, s->nrec + 1, sizeof *s->rec)) {
      st = host_oom();
      break;
    }
    s->rec[s->nrec++] = (sim_range){a, sz};
    if (a < s->rec_low) s->rec_low = a;
    if (a + sz > s->rec_high) s->rec_high = a + sz;
  }
  if (!st && ferror(f)) st = tc_error(TCUDA_ERROR_IO, "tc_backend_sim_create: error reading '%s'", path);
  fclose(f);
  return st;
}

/* ---- lifecycle ---- */

void tc_backend_sim_destroy(tc_backend *be) {
  if (!be) return;
  sim *s = (sim *)be->ctx;
  for (size_t i = 0; i < s->nchunks; i++) {
    free(s->chunks[i]->used);
    free(s->chunks[i]);
  }
  for (size_t i = 0; i < s->nres; i++) free(s->res[i].pmap);
  free(s->chunks);
  free(s->byage);
  free(s->live);
  free(s->rec);
  free(s->res);
  free(s->sdone);
  free(s->res_bases);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

tcuda_status tc_backend_sim_create(const tc_sim_options *opt, tc_backend **out) {
  TC_CHECK_ARG("tc_backend_sim_create", out != NULL, "out");
  *out = NULL;
  if (opt && opt->va != TC_SIM_VA_DRIVER && opt->va != TC_SIM_VA_ASCENDING)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "tc_backend_sim_create: unknown address model %d", (int)opt->va);
  sim *s = (sim *)calloc(1, sizeof *s);
  if (!s || pthread_mutex_init(&s->mu, NULL)) {
    free(s);
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "tc_backend_sim_create: out of host memory");
  }
  s->be = (tc_backend){"sim",           s,         sim_segment_alloc, sim_segment_free,      sim_va_reserve,
                       sim_va_release,  sim_map,   sim_unmap,         sim_event_record,      sim_event_query,
                       sim_event_synchronize, sim_event_release, sim_stream_synchronize, sim_device_synchronize,
                       sim_mem_info,          NULL,              NULL};
  s->capacity = opt && opt->capacity ? opt->capacity : TC_H200_CAPACITY;
  s->live_rng = 0x9e3779b9u; /* the treap's priorities: any fixed nonzero seed */
  s->va = opt ? opt->va : TC_SIM_VA_DRIVER;
  s->asc_next = ASC_BASE;
  tcuda_status st = TCUDA_SUCCESS;
  if (s->va == TC_SIM_VA_DRIVER) {
    int streams_first = opt && opt->streams_before_first_malloc;
    /* The driver's own first chunk: 8 MiB in use (6 MiB if streams were
     * created before the first cudaMalloc), and one free 2 MiB slot 66 MiB
     * below it, taken first; new chunks stay 480 MiB below it (right below
     * it with streams first). The driver chunk's size is not measured;
     * 32 MiB is the unit. */
    s->ceiling = s->lowmark = DRIVER_BASE - (streams_first ? 0 : 480 * MIB);
    sim_chunk *c0 = chunk_add(s, DRIVER_BASE, CHUNK_ROUND, 1);
    if (!c0) st = host_oom();
    else {
      memset(c0->used, 1, c0->next = streams_first ? 3 : 4);
      c0->nfree -= c0->next;
    }
    if (!st && !streams_first && !chunk_add(s, DRIVER_BASE - 66 * MIB, UNIT, 1)) st = host_oom();
  }
  if (!st && opt && opt->addresses_path) st = load_addresses(s, opt->addresses_path);
  if (st) {
    tc_backend_sim_destroy(&s->be);
    return st;
  }
  *out = &s->be;
  return TCUDA_SUCCESS;
}

void tc_backend_sim_complete_events(tc_backend *be) {
  sim *s = (sim *)be->ctx;
  pthread_mutex_lock(&s->mu);
  s->ev_done = s->ev_seq;
  pthread_mutex_unlock(&s->mu);
}

uint64_t tc_backend_sim_used(const tc_backend *be) {
  sim *s = (sim *)be->ctx;
  pthread_mutex_lock(&s->mu);
  uint64_t u = s->used;
  pthread_mutex_unlock(&s->mu);
  return u;
}

tcuda_status tc_backend_sim_reserve_at(tc_backend *be, const uint64_t *bases, size_t n) {
  TC_CHECK_ARG("tc_backend_sim_reserve_at", be != NULL, "backend");
  TC_CHECK_ARG("tc_backend_sim_reserve_at", bases != NULL || n == 0, "bases");
  sim *s = (sim *)be->ctx;
  uint64_t *copy = NULL;
  if (n && !(copy = (uint64_t *)malloc(n * sizeof *copy))) return host_oom();
  if (n) memcpy(copy, bases, n * sizeof *copy);
  pthread_mutex_lock(&s->mu);
  free(s->res_bases);
  s->res_bases = copy;
  s->nres_bases = n;
  s->res_pos = 0;
  pthread_mutex_unlock(&s->mu);
  return TCUDA_SUCCESS;
}

tcuda_status tc_backend_sim_place_next(tc_backend *be, uint64_t addr, uint64_t size) {
  sim *s = (sim *)be->ctx;
  pthread_mutex_lock(&s->mu);
  tcuda_status st = TCUDA_SUCCESS;
  if (!addr || !size || addr + size < addr || addr % TC_MIN_BLOCK_SIZE || overlaps_live(s, addr, size, NULL)) {
    st = TCUDA_ERROR_INVALID_STATE;
  } else if (s->rec_pos < s->nrec) {
    st = TCUDA_ERROR_INVALID_STATE; /* a file's recorded addresses are still in use */
  } else if (!tc_grow((void **)&s->rec, &s->caprec, s->nrec + 1, sizeof *s->rec)) {
    st = TCUDA_ERROR_HOST_OUT_OF_MEMORY;
  } else {
    s->rec[s->nrec++] = (sim_range){addr, size};
    if (s->nrec == 1 || addr < s->rec_low) s->rec_low = addr;
    if (addr + size > s->rec_high) s->rec_high = addr + size;
  }
  pthread_mutex_unlock(&s->mu);
  return st;
}

void tc_backend_sim_place_cancel(tc_backend *be) {
  sim *s = (sim *)be->ctx;
  pthread_mutex_lock(&s->mu);
  s->nrec = s->rec_pos;
  pthread_mutex_unlock(&s->mu);
}
