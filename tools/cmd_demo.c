/* tcuda demo: a short tour of the API on whatever machine this is. */
#include "cli.h"

int cmd_demo(int argc, char **argv) {
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
  tcuda_status s = tcuda_set_device(tcuda_device_count());
  printf("  set_device(out of range) -> %s: %s\n", tcuda_status_name(s), tcuda_last_error());
  return 0;
}
