/* tcuda's own NVTX annotations of long operations (empty_cache, collectives,
 * graph capture, OOM retry), on when TCUDA_NVTX=1. Costs one load when off. */
#ifndef TC_ANNOTATE_H
#define TC_ANNOTATE_H
extern int tc_annotate_enabled; /* -1 unknown, 0 off, 1 on */
int tc_annotate_check(void);
void tc_annotate_push(const char *name);
void tc_annotate_pop(void);
#define TC_ANNOTATE_BEGIN(name) \
  int tc_ann_on_ = tc_annotate_enabled > 0 || (tc_annotate_enabled < 0 && tc_annotate_check()); \
  if (tc_ann_on_) tc_annotate_push(name)
#define TC_ANNOTATE_END() \
  do { if (tc_ann_on_) tc_annotate_pop(); } while (0)
#endif
