/* IPC argument and handle validation without a GPU. */
#include "harness.h"
#include <unistd.h>

static tcuda_ipc_handle_t good_looking(void) {
  tcuda_ipc_handle_t h;
  memset(&h, 0, sizeof h);
  h.magic = 0x50494354u;
  h.version = TCUDA_IPC_HANDLE_VERSION;
  h.producer_pid = (int32_t)getpid() + 1;
  snprintf(h.ref_name, sizeof h.ref_name, "/tcuda-ipc-1-0");
  return h;
}

static void arguments(void) {
  tcuda_ipc_handle_t h;
  int x;
  void *p;
  CHECK_ERR(tcuda_ipc_export(NULL, &h), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_ipc_export: ptr is NULL");
  CHECK_ERR(tcuda_ipc_export(&x, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "handle is NULL");
  CHECK_ERR(tcuda_ipc_import(NULL, &p), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_ipc_import: handle is NULL");
  CHECK_ERR(tcuda_ipc_import(&h, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "ptr is NULL");
  CHECK_ERR(tcuda_ipc_close(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_ipc_close: ptr is NULL");
  CHECK_ERR(tcuda_ipc_close(&x), TCUDA_ERROR_INVALID_POINTER, "was not returned by tcuda_ipc_import");
  CHECK_OK(tcuda_ipc_collect()); /* nothing exported: nothing to do */
}

static void handle_validation(void) {
  void *p = (void *)1;
  tcuda_ipc_handle_t h = good_looking();
  h.magic = 0x12345678;
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "not a tcuda IPC handle (magic 0x12345678)");
  CHECK(p == NULL);
  h = good_looking();
  h.version = 99;
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_NOT_SUPPORTED, "handle version 99");
  h = good_looking();
  h.ref_slot = 10000;
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "bad reference slot");
  h = good_looking();
  memset(h.ref_name, 'a', sizeof h.ref_name); /* not terminated */
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "bad reference slot");
  h = good_looking();
  snprintf(h.ref_name, sizeof h.ref_name, "/etc/passwd");
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "bad reference slot");
  h = good_looking();
  h.producer_pid = (int32_t)getpid();
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "exported by this process");
  if (!tcuda_is_available()) {
    h = good_looking();
    CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_ipc_import");
    int x;
    CHECK_ERR(tcuda_ipc_export(&x, &h), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_ipc_export");
  }
}

TC_MAIN(T(arguments), T(handle_validation))
