/* libFuzzer: a hostile snapshot through the whole what-if path: the
 * readers, the history model (torchsnap.c), its replays (snapreplay.c) and
 * the sweep's document (whatif.c).
 *  - bytes that are no snapshot give an error with a message, never more;
 *  - a snapshot that loads replays to the end under its own settings and
 *    another config, and the document is one JSON object;
 *  - nothing leaks, nothing prints, nothing aborts (ASan, UBSan, LSan). */
#include "tcuda.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
  static const char *const configs[] = {"expandable_segments:True", "max_split_size_mb:20,roundup_power2_divisions:4"};
  tcuda_whatif_options_t o = TCUDA_WHATIF_OPTIONS_INIT;
  o.configs = configs;
  o.num_configs = 2;
  o.threads = 1;
  o.capacity = (uint64_t)1 << 30; /* small: requests run out of memory often */
  o.no_min_limit = n & 1;         /* the search too, on half the inputs */
  o.series_points = 8;
  char *doc = NULL;
  tcuda_status s = tcuda_whatif_buffer(data, n, &o, &doc);
  if (s) {
    if (doc) FAIL("error %s with a document", tcuda_status_name(s));
    if (!*tcuda_last_error()) FAIL("error %s without a message", tcuda_status_name(s));
    /* OUT_OF_MEMORY: the state when the history begins does not fit the
     * simulated device, which is an error and not a smaller answer */
    if (s != TCUDA_ERROR_PARSE && s != TCUDA_ERROR_INVALID_ARGUMENT && s != TCUDA_ERROR_CONFIG &&
        s != TCUDA_ERROR_HOST_OUT_OF_MEMORY && s != TCUDA_ERROR_OUT_OF_MEMORY)
      FAIL("unexpected status %s: %s", tcuda_status_name(s), tcuda_last_error());
    return 0;
  }
  size_t len = strlen(doc);
  if (len < 2 || doc[0] != '{' || !strstr(doc, "\"configs\": [")) FAIL("not a document: %.200s", doc);
  tcuda_string_free(doc);
  return 0;
}
