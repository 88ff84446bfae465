/* record_stream: a block freed after other streams used it waits for an
 * event recorded on each of them, and goes back to the free set once they
 * have all completed (torch's insert_events and process_events). Under a
 * capture the events wait too: recording one could land in the graph. */
#include "alloc/events.h"
#include "alloc/block.h"
#include "alloc/blockmap.h"
#include "alloc/lock.h"
#include "alloc/tcache.h"
#include <stdlib.h>
#include <string.h>

static void evq_remove_empty(tc_alloc *a) {
  size_t w = 0;
  for (size_t r = 0; r < a->nevq; r++) {
    if (a->evq[r].len) a->evq[w++] = a->evq[r];
    else free(a->evq[r].q);
  }
  a->nevq = w;
}

/* torch's insert_events_deferred_until_no_capture. On failure the blocks not
 * yet handled stay deferred. */
static tcuda_status insert_deferred(tc_alloc *a) {
  size_t i = 0;
  tcuda_status s = TCUDA_SUCCESS;
  for (; i < a->ndeferred && !s; i++) s = tc_insert_events(a, a->deferred[i]);
  if (s) i--;
  memmove(a->deferred, a->deferred + i, (a->ndeferred - i) * sizeof *a->deferred);
  a->ndeferred -= i;
  return s;
}

tcuda_status tc_poll_events(tc_alloc *a) {
  if (a->ndeferred) {
    tcuda_status s = insert_deferred(a);
    if (s) return s;
  }
  if (!a->nevq) return TCUDA_SUCCESS;
  tcuda_status s = TCUDA_SUCCESS;
  /* Streams in ascending order; torch walks a hash map, so its order across
   * streams is arbitrary. Within a stream it is FIFO, as here. */
  for (size_t i = 0; i < a->nevq && !s; i++) {
    tc_evq *q = &a->evq[i];
    while (q->len) {
      tc_evrec *r = &q->q[q->head];
      int done = a->be->event_query(a->be->ctx, r->ev);
      if (done == 0) break;
      if (done < 0) { /* the backend has set the message */
        s = tcuda_last_status() ? tcuda_last_status() : TCUDA_ERROR_CUDA;
        break;
      }
      a->be->event_release(a->be->ctx, r->ev);
      tc_block *b = r->b;
      q->head = (q->head + 1) & (q->cap - 1);
      q->len--;
      if (--b->event_count == 0) tc_free_block(a, b);
    }
  }
  evq_remove_empty(a);
  return s;
}

tcuda_status tc_synchronize_and_free_events(tc_alloc *a) {
  a->st.num_sync_all_streams++;
  tcuda_status s = a->ndeferred ? insert_deferred(a) : TCUDA_SUCCESS;
  if (s) return s;
  for (size_t i = 0; i < a->nevq && !s; i++) {
    tc_evq *q = &a->evq[i];
    while (q->len) {
      tc_evrec *r = &q->q[q->head];
      s = a->be->event_synchronize(a->be->ctx, r->ev);
      if (s) break;
      a->be->event_release(a->be->ctx, r->ev);
      tc_block *b = r->b;
      q->head = (q->head + 1) & (q->cap - 1);
      q->len--;
      if (--b->event_count == 0) tc_free_block(a, b);
    }
  }
  evq_remove_empty(a);
  return s;
}

static tc_evq *evq_get(tc_alloc *a, uint64_t stream) {
  size_t i = 0;
  while (i < a->nevq && a->evq[i].stream < stream) i++;
  if (i < a->nevq && a->evq[i].stream == stream) return &a->evq[i];
  if (a->nevq == a->capevq) {
    tc_evq *n = (tc_evq *)tc_grow(a->evq, &a->capevq, sizeof *n, 4);
    if (!n) return NULL;
    a->evq = n;
  }
  memmove(&a->evq[i + 1], &a->evq[i], (a->nevq - i) * sizeof *a->evq);
  memset(&a->evq[i], 0, sizeof a->evq[i]);
  a->evq[i].stream = stream;
  a->nevq++;
  return &a->evq[i];
}

static int evq_grow(tc_evq *q) {
  if (q->len < q->cap) return 1;
  size_t cap = q->cap ? 2 * q->cap : 8;
  tc_evrec *n = (tc_evrec *)malloc(cap * sizeof *n);
  if (!n) return 0;
  for (size_t k = 0; k < q->len; k++) n[k] = q->q[(q->head + k) & (q->cap - 1)];
  free(q->q);
  q->q = n;
  q->cap = cap;
  q->head = 0;
  return 1;
}

/* torch's insert_events: one event per stream that used the block. All or
 * nothing: on failure no event stays recorded and the block is unchanged. */
tcuda_status tc_insert_events(tc_alloc *a, tc_block *b) {
  for (uint32_t k = 0; k < b->nuses; k++) {
    tc_evq *q = evq_get(a, b->uses[k].stream);
    if (!q || !evq_grow(q)) {
      evq_remove_empty(a);
      return host_oom();
    }
  }
  void *small[8], **evs = small;
  if (b->nuses > 8 && !(evs = (void **)malloc(b->nuses * sizeof *evs))) {
    evq_remove_empty(a);
    return host_oom();
  }
  for (uint32_t k = 0; k < b->nuses; k++) {
    tcuda_status s = a->be->event_record(a->be->ctx, b->uses[k].device, b->uses[k].stream, &evs[k]);
    if (s) {
      while (k--) a->be->event_release(a->be->ctx, evs[k]);
      if (evs != small) free(evs);
      evq_remove_empty(a);
      return s;
    }
  }
  for (uint32_t k = 0; k < b->nuses; k++) {
    tc_evq *q = evq_get(a, b->uses[k].stream); /* exists, has room */
    q->q[(q->head + q->len) & (q->cap - 1)] = (tc_evrec){evs[k], b};
    q->len++;
    b->event_count++;
  }
  if (evs != small) free(evs);
  b->nuses = 0;
  return TCUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* record_stream                                                        */

tcuda_status tc_alloc_record_stream_on(tc_alloc *a, uint64_t addr, uint64_t stream, int stream_device) {
  TC_CHECK_ARG("tc_alloc_record_stream", a != NULL, "allocator");
  lk_lock(&a->mu);
  tc_block *b = addr ? ht_find(a, addr) : NULL;
  if (b && b->tcached) b = NULL; /* freed into a thread cache */
  tcuda_status s = TCUDA_SUCCESS;
  if (!b) {
    s = tc_error(TCUDA_ERROR_INVALID_POINTER,
                 "record_stream: pointer 0x%llx is not a live allocation of device %d's allocator",
                 (unsigned long long)addr, a->device);
  } else if (stream != b->stream) { /* uses on the allocation stream need no event */
    tc_tcache_forget(a, b);            /* thread_cache: never cached; its free takes the lock */
    uint32_t k = 0;
    while (k < b->nuses && (b->uses[k].stream != stream || b->uses[k].device != stream_device)) k++;
    if (k == b->nuses) {
      if (b->nuses == b->capuses) {
        uint32_t cap = 2 * b->capuses;
        tc_use *nu = (tc_use *)malloc(cap * sizeof *nu);
        if (!nu) {
          lk_unlock(&a->mu);
          return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "record_stream: out of host memory");
        }
        memcpy(nu, b->uses, b->nuses * sizeof *nu);
        if (b->uses != b->inl) free(b->uses);
        b->uses = nu;
        b->capuses = cap;
      }
      b->uses[b->nuses++] = (tc_use){stream, stream_device};
    }
  }
  lk_unlock(&a->mu);
  return s;
}

tcuda_status tc_alloc_record_stream(tc_alloc *a, uint64_t addr, uint64_t stream) {
  TC_CHECK_ARG("tc_alloc_record_stream", a != NULL, "allocator");
  return tc_alloc_record_stream_on(a, addr, stream, a->device);
}
