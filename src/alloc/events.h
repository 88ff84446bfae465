/* record_stream's events (events.c): per stream, a ring of the events
 * recorded for freed blocks that other streams used, oldest first. The
 * cached malloc tests inline whether any wait. */
#ifndef TC_ALLOC_EVENTS_H
#define TC_ALLOC_EVENTS_H
#include "alloc/types.h"
#include <stddef.h>
#include <stdint.h>

typedef struct tc_evrec {
  void *ev;
  tc_block *b;
} tc_evrec;

struct tc_evq {
  uint64_t stream;
  tc_evrec *q;
  size_t head, len, cap; /* ring, cap a power of 2 */
};

/* Moves blocks whose events have all completed back to the free set. */
SLOW_PATH tcuda_status tc_poll_events(tc_alloc *a);

static inline tcuda_status process_events(tc_alloc *a) {
  return a->ndeferred || a->nevq ? tc_poll_events(a) : TCUDA_SUCCESS;
}

/* Waits for every event (torch's synchronize_and_free_events). */
tcuda_status tc_synchronize_and_free_events(tc_alloc *a);
/* torch's insert_events: all or nothing. */
tcuda_status tc_insert_events(tc_alloc *a, tc_block *b);

#endif
