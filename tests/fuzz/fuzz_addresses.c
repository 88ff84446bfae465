/* libFuzzer: the simulated device's recorded-address file ("ADDR SIZE" per
 * line, what `tcuda replay --addresses` reads). A file is accepted whole or
 * refused with a parse or I/O error whose message quotes no control byte;
 * an accepted one drives allocations without an internal error. */
#define _GNU_SOURCE
#include "alloc/alloc.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

static void printable_or_die(const char *what) {
  for (const unsigned char *p = (const unsigned char *)tcuda_last_error(); *p; p++)
    if (*p < 0x20 || *p == 0x7f) FAIL("%s: control byte 0x%02x in the message", what, *p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  if (n > 1 << 16) return 0;
  int fd = memfd_create("addresses", 0);
  if (fd < 0) return 0;
  if (n && write(fd, data, n) != (ssize_t)n) { close(fd); return 0; }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  tc_sim_options o = {0};
  o.capacity = (uint64_t)1 << 40;
  o.addresses_path = path;
  tc_backend *be = NULL;
  tcuda_status st = tc_backend_sim_create(&o, &be);
  if (st) {
    if (st != TCUDA_ERROR_PARSE && st != TCUDA_ERROR_IO && st != TCUDA_ERROR_HOST_OUT_OF_MEMORY)
      FAIL("unexpected status %s: %s", tcuda_status_name(st), tcuda_last_error());
    if (be) FAIL("a refused file still made a backend");
    printable_or_die("refused file");
    close(fd);
    return 0;
  }
  tc_alloc_config cfg;
  tc_alloc_config_default(&cfg);
  tc_alloc *a = NULL;
  if (tc_alloc_create(0, be, &cfg, o.capacity, &a)) FAIL("tc_alloc_create: %s", tcuda_last_error());
  /* segments of a few sizes: each takes the next recorded address, which
   * either fits or makes a clean error (the replay diverged) */
  uint64_t addr[8];
  static const uint64_t sizes[] = {512, (uint64_t)2 << 20, (uint64_t)20 << 20, (uint64_t)3 << 20};
  for (int i = 0; i < 8; i++) {
    addr[i] = 0;
    st = tc_alloc_malloc(a, sizes[i % 4] + (uint64_t)i * 4096, 0, &addr[i]);
    if (st && st != TCUDA_ERROR_OUT_OF_MEMORY && st != TCUDA_ERROR_INVALID_STATE && st != TCUDA_ERROR_PARSE)
      FAIL("malloc %d: unexpected %s: %s", i, tcuda_status_name(st), tcuda_last_error());
    if (st) printable_or_die("malloc");
    char why[256];
    if (tc_alloc_self_check(a, why, sizeof why)) FAIL("self check after malloc %d: %s", i, why);
  }
  for (int i = 0; i < 8; i++)
    if (addr[i] && tc_alloc_free(a, addr[i])) FAIL("free %d: %s", i, tcuda_last_error());
  tc_alloc_destroy(a);
  tc_backend_sim_destroy(be);
  close(fd);
  return 0;
}
