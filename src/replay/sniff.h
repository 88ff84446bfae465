/* What a snapshot's bytes are: a pickle, JSON, or neither. The one test
 * shared by the reader (pyparse.c, for whatif and the replays) and by
 * `tcuda replay`, which tells a snapshot from a trace with it; header-only
 * so that the CLI, a layer over the public API, can use it too. */
#ifndef TC_SNIFF_H
#define TC_SNIFF_H
#include <stddef.h>

enum { TC_SNIFF_NONE = 0, TC_SNIFF_PICKLE = 1, TC_SNIFF_JSON = 2 };

/* From the first len bytes (the whole input, or a prefix of it): PICKLE
 * when the first byte is PROTO (0x80); JSON when, after an optional UTF-8
 * byte order mark and blanks, an object or an array opens; else NONE. */
static inline int tc_sniff(const void *data, size_t len) {
  const unsigned char *d = (const unsigned char *)data;
  if (!len) return TC_SNIFF_NONE;
  if (d[0] == 0x80) return TC_SNIFF_PICKLE;
  size_t i = len >= 3 && d[0] == 0xef && d[1] == 0xbb && d[2] == 0xbf ? 3 : 0;
  while (i < len && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r')) i++;
  return i < len && (d[i] == '{' || d[i] == '[') ? TC_SNIFF_JSON : TC_SNIFF_NONE;
}

#endif
