/* tcuda info [--json]: versions, devices, free/total memory. Exits 0 even
 * without CUDA, saying why it is not available. */
#include "cli.h"

static void ver(char *b, size_t n, int v, int nccl) {
  if (!v) snprintf(b, n, "none");
  else if (nccl) snprintf(b, n, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
  else snprintf(b, n, "%d.%d", v / 1000, (v % 1000) / 10);
}

static const cli_cmd CMD = {
    "info",
    "usage: tcuda info [--json]\n",
    "  The library's version, the CUDA runtime, driver and NCCL versions, the architectures it was\n"
    "  built for, and each device: name, capability, SMs, memory, and a kernel self-test.\n"
    "  Without a GPU it says why CUDA is not available and still exits 0.\n"
    "  --json: one JSON object instead of text.\n"};

int cmd_info(int argc, char **argv) {
  static const struct option longopts[] = {{"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {0}};
  int json = 0, ch, rc;
  while ((ch = cli_getopt(&CMD, argc, argv, "h", longopts, &rc)) != -1) {
    if (ch == CLI_DONE) return rc;
    json = 1;
  }
  if (cli_operands(&CMD, argc, argv, 0) < 0) return CLI_USAGE;
  char rt[32], drv[32], nccl[32];
  ver(rt, sizeof rt, tcuda_runtime_version(), 0);
  ver(drv, sizeof drv, tcuda_driver_version(), 0);
  ver(nccl, sizeof nccl, tcuda_nccl_version(), 1);
  int avail = tcuda_init() == TCUDA_SUCCESS;
  const char *why = avail ? "" : tcuda_unavailable_reason();
  int n = avail ? tcuda_device_count() : 0;

  if (json) {
    printf("{\"tcuda_version\": \"%s\", \"cuda_runtime_version\": \"%s\", \"cuda_driver_version\": \"%s\", "
           "\"nccl_version\": \"%s\", \"arch_list\": ", tcuda_version_string(), rt, drv, nccl);
    cli_json_string(stdout, tcuda_get_arch_list());
    printf(", \"gencode_flags\": ");
    cli_json_string(stdout, tcuda_get_gencode_flags());
    printf(", \"cuda_available\": %s, \"unavailable_reason\": ", avail ? "true" : "false");
    cli_json_string(stdout, why);
    printf(", \"device_count\": %d, \"devices\": [", n);
  } else {
    printf("tcuda %s\n", tcuda_version_string());
    printf("  CUDA runtime %s, driver %s, NCCL %s\n", rt, drv, nccl);
    printf("  built for: %s\n", tcuda_get_arch_list()[0] ? tcuda_get_arch_list() : "no GPU (built without CUDA)");
    if (!avail) printf("CUDA is not available: %s\n", why);
    else printf("%d CUDA device%s\n", n, n == 1 ? "" : "s");
  }
  rc = 0;
  for (int d = 0; d < n; d++) {
    tcuda_device_properties_t p = TCUDA_DEVICE_PROPERTIES_INIT;
    size_t fr = 0, tot = 0;
    if (tcuda_get_device_properties(d, &p) || tcuda_mem_get_info(d, &fr, &tot)) { rc = cli_fail("info"); break; }
    int ok = tcuda_device_selftest(d) == TCUDA_SUCCESS;
    if (json) {
      printf("%s{\"index\": %d, \"name\": ", d ? ", " : "", d);
      cli_json_string(stdout, p.name);
      printf(", \"capability\": [%d, %d], \"total_memory\": %zu, \"free_memory\": %zu, "
             "\"multi_processor_count\": %d, \"max_threads_per_multi_processor\": %d, \"l2_cache_size\": %d, "
             "\"uuid\": \"%s\", \"pci_bus_id\": \"%s\", \"kernel_selftest\": %s}",
             p.major, p.minor, p.total_memory, fr, p.multi_processor_count,
             p.max_threads_per_multi_processor, p.l2_cache_size, p.uuid_string, p.pci_bus_string,
             ok ? "true" : "false");
    } else {
      printf("  [%d] %s  sm_%d%d  %d SMs x %d threads  L2 %d MiB  %s  %s\n", d, p.name, p.major, p.minor,
             p.multi_processor_count, p.max_threads_per_multi_processor, p.l2_cache_size >> 20,
             p.pci_bus_string, p.uuid_string);
      printf("      memory: %.2f GiB free of %.2f GiB; kernel self-test: %s\n", fr / 1073741824.0,
             tot / 1073741824.0, ok ? "ok" : tcuda_last_error());
    }
  }
  if (json) printf("]}\n");
  return rc;
}
