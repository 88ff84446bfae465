/* Core layer without a GPU: status names, errors, and every call that needs
 * CUDA failing cleanly. On a GPU machine the no-GPU cases are skipped; the
 * GPU suite covers them there. */
#include "harness.h"

static void status_names(void) {
  CHECK(!strcmp(tcuda_status_name(TCUDA_SUCCESS), "TCUDA_SUCCESS"));
  CHECK(!strcmp(tcuda_status_name(TCUDA_ERROR_INVALID_DEVICE), "TCUDA_ERROR_INVALID_DEVICE"));
  CHECK(!strcmp(tcuda_status_name(TCUDA_ERROR_OUT_OF_MEMORY), "TCUDA_ERROR_OUT_OF_MEMORY"));
  CHECK(!strcmp(tcuda_status_name((tcuda_status)9999), "TCUDA_STATUS_UNKNOWN"));
  CHECK(!strcmp(tcuda_status_string(TCUDA_SUCCESS), "success"));
  CHECK(!strcmp(tcuda_status_string((tcuda_status)-5), "unknown status"));
  /* every listed value has a distinct name */
#define NAME_OK(name, value, desc) CHECK(!strcmp(tcuda_status_name(name), #name));
  TCUDA_STATUS_LIST(NAME_OK)
#undef NAME_OK
}

static void version(void) {
  CHECK_EQ_INT(tcuda_version(), TCUDA_VERSION_MAJOR * 10000 + TCUDA_VERSION_MINOR * 100 + TCUDA_VERSION_PATCH);
  char buf[32];
  snprintf(buf, sizeof buf, "%d.%d.%d", TCUDA_VERSION_MAJOR, TCUDA_VERSION_MINOR, TCUDA_VERSION_PATCH);
  CHECK(!strcmp(tcuda_version_string(), buf));
  CHECK(tcuda_runtime_version() >= 12000);
  CHECK(strstr(tcuda_get_arch_list(), "sm_") != NULL);
  CHECK(strstr(tcuda_get_gencode_flags(), "-gencode arch=compute_") != NULL);
}

static void null_arguments(void) {
  CHECK_ERR(tcuda_current_device(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_current_device: device is NULL");
  CHECK_ERR(tcuda_device_exchange(0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "prev_device is NULL");
  CHECK_ERR(tcuda_device_maybe_exchange(0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "prev_device is NULL");
  CHECK_ERR(tcuda_device_guard_begin(NULL, 0), TCUDA_ERROR_INVALID_ARGUMENT, "guard is NULL");
  CHECK_ERR(tcuda_device_guard_end(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "guard is NULL");
  int d;
  CHECK_ERR(tcuda_device_of(NULL, &d), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_device_of: ptr is NULL");
  CHECK_ERR(tcuda_device_of(&d, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "device is NULL");
  CHECK_ERR(tcuda_get_device_properties(0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "props is NULL");
  tcuda_device_properties_t p = {0};
  CHECK_ERR(tcuda_get_device_properties(0, &p), TCUDA_ERROR_INVALID_ARGUMENT, "struct_size is 0");
  char name[8];
  CHECK_ERR(tcuda_get_device_name(0, NULL, 8), TCUDA_ERROR_INVALID_ARGUMENT, "buf is NULL");
  CHECK_ERR(tcuda_get_device_name(0, name, 0), TCUDA_ERROR_INVALID_ARGUMENT, "buf_size is 0");
  int a;
  CHECK_ERR(tcuda_get_device_capability(0, NULL, &a), TCUDA_ERROR_INVALID_ARGUMENT, "major is NULL");
  CHECK_ERR(tcuda_get_device_capability(0, &a, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "minor is NULL");
  size_t f;
  CHECK_ERR(tcuda_mem_get_info(0, NULL, &f), TCUDA_ERROR_INVALID_ARGUMENT, "free_bytes is NULL");
  CHECK_ERR(tcuda_mem_get_info(0, &f, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "total_bytes is NULL");
  CHECK_ERR(tcuda_can_device_access_peer(0, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "can_access is NULL");
}

static void error_state_is_per_thread_and_clearable(void) {
  tcuda_clear_error();
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_SUCCESS);
  CHECK(!strcmp(tcuda_last_error(), ""));
  (void)tcuda_current_device(NULL);
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_ERROR_INVALID_ARGUMENT);
  tcuda_clear_error();
  CHECK(!strcmp(tcuda_last_error(), ""));
  tcuda_string_free(NULL); /* documented as fine */
}

static void negative_device_is_noop(void) {
  /* torch: set_device(-1) and device(-1) do nothing, even without CUDA */
  CHECK_OK(tcuda_set_device(-1));
  CHECK_OK(tcuda_set_device(-7));
  tcuda_device_guard_t g;
  CHECK_OK(tcuda_device_guard_begin(&g, -1));
  CHECK_EQ_INT(g.prev_device, -1);
  CHECK_OK(tcuda_device_guard_end(&g));
}

/* The rest only holds on a machine without CUDA (CI, build hosts). */
static int no_cuda(void) { return !tcuda_is_available(); }

static void without_cuda_everything_says_not_available(void) {
  if (!no_cuda()) { TC_SKIP_PART("no-CUDA behaviour: a GPU is present"); return; }
  CHECK_EQ_INT(tcuda_device_count(), 0);
  CHECK(!tcuda_is_initialized());
  CHECK(strlen(tcuda_unavailable_reason()) > 0);
  CHECK_ERR(tcuda_init(), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_init: CUDA is not available");
  CHECK(!tcuda_is_initialized());
  CHECK_ERR(tcuda_init(), TCUDA_ERROR_NOT_AVAILABLE, "CUDA is not available"); /* still, no crash */
  int d;
  CHECK_ERR(tcuda_current_device(&d), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_current_device");
  CHECK_ERR(tcuda_set_device(0), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_set_device");
  tcuda_device_guard_t g;
  CHECK_ERR(tcuda_device_guard_begin(&g, 0), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_device_guard_begin");
  CHECK_ERR(tcuda_device_of(&d, &d), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_device_of");
  tcuda_device_properties_t p = TCUDA_DEVICE_PROPERTIES_INIT;
  CHECK_ERR(tcuda_get_device_properties(0, &p), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_get_device_properties");
  char name[64];
  CHECK_ERR(tcuda_get_device_name(-1, name, sizeof name), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_get_device_name");
  int ma, mi;
  CHECK_ERR(tcuda_get_device_capability(0, &ma, &mi), TCUDA_ERROR_NOT_AVAILABLE, "capability");
  CHECK_ERR(tcuda_synchronize(-1), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_synchronize");
  size_t fr, to;
  CHECK_ERR(tcuda_mem_get_info(0, &fr, &to), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_mem_get_info");
  CHECK_ERR(tcuda_can_device_access_peer(0, 1, &d), TCUDA_ERROR_NOT_AVAILABLE, "peer");
  CHECK_ERR(tcuda_device_selftest(0), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_device_selftest");
  CHECK_EQ_INT(tcuda_driver_version(), 0);
}

TC_MAIN(T(status_names), T(version), T(null_arguments), T(error_state_is_per_thread_and_clearable),
        T(negative_device_is_noop), T(without_cuda_everything_says_not_available))
