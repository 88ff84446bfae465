/* The replays' backend adaptor (backend_wrap.h). */
#include "backend_wrap.h"
#include <string.h>

static tcuda_status w_segment_alloc(void *c, int dev, uint64_t size, uint64_t *addr) {
  tc_bwrap *w = c;
  tcuda_status st = w->hooks.before_alloc ? w->hooks.before_alloc(w->user, size) : TCUDA_SUCCESS;
  if (st) return st;
  st = w->inner->segment_alloc(w->inner->ctx, dev, size, addr);
  if (w->hooks.after_alloc) w->hooks.after_alloc(w->user, st, st ? 0 : *addr, size);
  return st;
}
static tcuda_status w_segment_free(void *c, int dev, uint64_t addr, uint64_t size) {
  tc_bwrap *w = c;
  if (w->hooks.before_release) w->hooks.before_release(w->user, addr, size);
  return w->inner->segment_free(w->inner->ctx, dev, addr, size);
}
static tcuda_status w_va_reserve(void *c, int dev, uint64_t size, uint64_t *addr) {
  tc_bwrap *w = c;
  tcuda_status st = w->hooks.before_reserve ? w->hooks.before_reserve(w->user, size) : TCUDA_SUCCESS;
  if (st) return st;
  return w->inner->va_reserve(w->inner->ctx, dev, size, addr);
}
static tcuda_status w_va_release(void *c, int dev, uint64_t addr, uint64_t size) {
  tc_bwrap *w = c;
  return w->inner->va_release(w->inner->ctx, dev, addr, size);
}
static tcuda_status w_map(void *c, int dev, uint64_t addr, uint64_t size) {
  tc_bwrap *w = c;
  tcuda_status st = w->hooks.before_map ? w->hooks.before_map(w->user, addr, size) : TCUDA_SUCCESS;
  if (st) return st;
  st = w->inner->map(w->inner->ctx, dev, addr, size);
  if (w->hooks.after_map) w->hooks.after_map(w->user, st, addr, size);
  return st;
}
static tcuda_status w_unmap(void *c, int dev, uint64_t addr, uint64_t size) {
  tc_bwrap *w = c;
  if (w->hooks.before_release) w->hooks.before_release(w->user, addr, size);
  return w->inner->unmap(w->inner->ctx, dev, addr, size);
}
static tcuda_status w_unmap_keep(void *c, int dev, uint64_t addr, uint64_t size) {
  tc_bwrap *w = c;
  if (w->hooks.before_release) w->hooks.before_release(w->user, addr, size);
  return w->inner->unmap_keep(w->inner->ctx, dev, addr, size);
}
static void w_release_kept(void *c, int dev) {
  tc_bwrap *w = c;
  w->inner->release_kept(w->inner->ctx, dev);
}
static tcuda_status w_event_record(void *c, int dev, uint64_t stream, void **ev) {
  tc_bwrap *w = c;
  if (w->hooks.event_record) return w->hooks.event_record(w->user, stream, ev);
  return w->inner->event_record(w->inner->ctx, dev, stream, ev);
}
static int w_event_query(void *c, void *ev) {
  tc_bwrap *w = c;
  if (w->hooks.event_record) return w->hooks.event_query ? w->hooks.event_query(w->user, ev) : 1;
  return w->inner->event_query(w->inner->ctx, ev);
}
static tcuda_status w_event_synchronize(void *c, void *ev) {
  tc_bwrap *w = c;
  if (w->hooks.event_record)
    return w->hooks.event_synchronize ? w->hooks.event_synchronize(w->user, ev) : TCUDA_SUCCESS;
  return w->inner->event_synchronize(w->inner->ctx, ev);
}
static void w_event_release(void *c, void *ev) {
  tc_bwrap *w = c;
  if (!w->hooks.event_record) w->inner->event_release(w->inner->ctx, ev);
  else if (w->hooks.event_release) w->hooks.event_release(w->user, ev);
}
static tcuda_status w_stream_synchronize(void *c, int dev, uint64_t stream) {
  tc_bwrap *w = c;
  return w->inner->stream_synchronize(w->inner->ctx, dev, stream);
}
static tcuda_status w_device_synchronize(void *c, int dev) {
  tc_bwrap *w = c;
  return w->inner->device_synchronize(w->inner->ctx, dev);
}
static tcuda_status w_mem_info(void *c, int dev, uint64_t *fr, uint64_t *tot) {
  tc_bwrap *w = c;
  return w->inner->mem_info(w->inner->ctx, dev, fr, tot);
}

void tc_bwrap_init(tc_bwrap *w, const tc_backend *inner, const tc_bwrap_hooks *hooks, void *user) {
  memset(w, 0, sizeof *w);
  w->inner = inner;
  if (hooks) w->hooks = *hooks;
  w->user = user;
  w->be = (tc_backend){.name = inner->name,
                       .ctx = w,
                       .segment_alloc = w_segment_alloc,
                       .segment_free = w_segment_free,
                       .va_reserve = w_va_reserve,
                       .va_release = w_va_release,
                       .map = w_map,
                       .unmap = w_unmap,
                       .event_record = w_event_record,
                       .event_query = w_event_query,
                       .event_synchronize = w_event_synchronize,
                       .event_release = w_event_release,
                       .stream_synchronize = w_stream_synchronize,
                       .device_synchronize = w_device_synchronize,
                       .mem_info = w_mem_info,
                       .unmap_keep = inner->unmap_keep ? w_unmap_keep : NULL,
                       .release_kept = inner->release_kept ? w_release_kept : NULL};
}
