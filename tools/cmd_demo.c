/* tcuda demo: a short tour of the API on whatever machine this is. */
#include "cli.h"

static const cli_cmd CMD = {
    "demo",
    "usage: tcuda demo\n",
    "  A short tour of the API on this machine: the current device, a kernel, a pool stream,\n"
    "  an allocation from the caching allocator, memory_summary(), and an error. Without a GPU\n"
    "  it shows the error path instead and exits 0.\n"};

int cmd_demo(int argc, char **argv) {
  static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {0}};
  int ch, rc;
  while ((ch = cli_getopt(&CMD, argc, argv, "h", longopts, &rc)) != -1)
    if (ch == CLI_DONE) return rc;
  if (cli_operands(&CMD, argc, argv, 0) < 0) return CLI_USAGE;
  printf("tcuda demo\n");
  if (!tcuda_is_available()) {
    printf("  CUDA is not available (%s): showing the error path instead.\n", tcuda_unavailable_reason());
    int d;
    tcuda_status s = tcuda_current_device(&d);
    printf("  tcuda_current_device -> %s: %s\n", tcuda_status_name(s), tcuda_last_error());
    return 0;
  }
  int d = -1;
  if (tcuda_current_device(&d)) return cli_fail("demo");
  char name[256];
  if (tcuda_get_device_name(d, name, sizeof name)) return cli_fail("demo");
  printf("  current device %d: %s\n", d, name);
  if (tcuda_device_selftest(d)) return cli_fail("demo");
  printf("  libtcuda kernel ran on device %d\n", d);
  tcuda_stream_t stream;
  void *p = NULL;
  int64_t allocated = 0;
  if (tcuda_stream_from_pool(d, 0, &stream) || tcuda_malloc_on(&p, 3 << 20, d, stream) ||
      tcuda_memory_allocated(d, &allocated))
    return cli_fail("demo");
  printf("  3 MiB from the caching allocator on pool stream %lld: memory_allocated = %lld bytes\n",
         (long long)stream.id, (long long)allocated);
  if (tcuda_free(p) || tcuda_memory_allocated(d, &allocated)) return cli_fail("demo");
  printf("  freed (cached for reuse): memory_allocated = %lld bytes\n", (long long)allocated);
  char *summary = NULL;
  if (tcuda_memory_summary(d, 1, &summary)) return cli_fail("demo");
  fputs(summary, stdout);
  tcuda_string_free(summary);
  tcuda_status s = tcuda_set_device(tcuda_device_count());
  printf("  set_device(out of range) -> %s: %s\n", tcuda_status_name(s), tcuda_last_error());
  return 0;
}
