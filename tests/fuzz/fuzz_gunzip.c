/* libFuzzer: the gzip decoder (src/replay/inflate.c) on hostile bytes. A
 * refusal is an error status with a message and no output; an accepted input
 * gives at most the cap, NUL-terminated, and the same bytes when decoded
 * again; under a smaller cap it is either the same bytes or refused for the
 * cap. */
#include "replay/readfile.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)
#define CAP ((uint64_t)1 << 22)
#define SMALL_CAP 4096

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  char *out = NULL, *again = NULL, *small = NULL;
  size_t len = 0, len2 = 0, slen = 0;
  tcuda_status s = tc_gunzip("fuzz", d, n, CAP, &out, &len);
  if (s) {
    if (out || len) FAIL("an error with output");
    if (!*tcuda_last_error()) FAIL("an error without a message");
    return 0;
  }
  if (!out || len > CAP || out[len]) FAIL("bad output: len %zu", len);
  if (tc_gunzip("fuzz", d, n, CAP, &again, &len2) || len2 != len || memcmp(out, again, len))
    FAIL("a second decode differs");
  tcuda_status s2 = tc_gunzip("fuzz", d, n, SMALL_CAP, &small, &slen);
  if (len <= SMALL_CAP && (s2 || slen != len || memcmp(small, out, len))) FAIL("a cap above the output changed it");
  if (len > SMALL_CAP && (s2 != TCUDA_ERROR_IO || small)) FAIL("%zu bytes under a cap of %d", len, SMALL_CAP);
  free(out);
  free(again);
  free(small);
  return 0;
}
