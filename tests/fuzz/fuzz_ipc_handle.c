/* libFuzzer: tcuda_ipc_import on untrusted handle bytes. Without a GPU no
 * import can succeed; what must hold is that every handle is refused with a
 * message that quotes no control byte, the pointer stays NULL, and a slot
 * in a genuine-looking reference file is never claimed. Byte 0's low bit
 * points the handle at such a file (made here, as a producer would), so the
 * fuzzer reaches the checks behind the file name. */
#include "tcuda.h"
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)
#define SLOTS 10000

static char g_name[48];
static int32_t g_pid;
static int64_t *g_slots;

static void make_file(void) {
  g_pid = (int32_t)getpid() + 1;
  snprintf(g_name, sizeof g_name, "/tcuda-ipc-%d-0", (int)g_pid);
  shm_unlink(g_name);
  int fd = shm_open(g_name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || ftruncate(fd, SLOTS * 16)) FAIL("cannot make the reference file");
  g_slots = mmap(NULL, SLOTS * 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (g_slots == MAP_FAILED) FAIL("mmap");
  for (int i = 0; i < SLOTS; i++) {
    g_slots[2 * i] = -1;               /* exported, not yet imported */
    g_slots[2 * i + 1] = 1000 + i;     /* token */
  }
}

static void cleanup(void) { shm_unlink(g_name); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  if (!g_slots) {
    make_file();
    atexit(cleanup);
  }
  if (n < 1) return 0;
  tcuda_ipc_handle_t h;
  memset(&h, 0, sizeof h);
  memcpy(&h, data + 1, n - 1 < sizeof h ? n - 1 : sizeof h);
  if (data[0] & 1) {
    h.magic = 0x50494354u;
    h.version = TCUDA_IPC_HANDLE_VERSION;
    h.producer_pid = g_pid;
    memcpy(h.ref_name, g_name, sizeof h.ref_name);
    h.ref_slot %= SLOTS;
    if (data[0] & 2) h.token = 1000 + h.ref_slot; /* the slot's own token */
  }
  void *p = (void *)1;
  tcuda_status st = tcuda_ipc_import(&h, &p);
  if (st == TCUDA_SUCCESS) FAIL("a handle was imported without a GPU");
  if (p) FAIL("refused import left the pointer set");
  for (const unsigned char *m = (const unsigned char *)tcuda_last_error(); *m; m++)
    if (*m < 0x20 || *m == 0x7f) FAIL("control byte 0x%02x in: %s", *m, tcuda_last_error());
  if (h.ref_slot < SLOTS && g_slots[2 * h.ref_slot] != -1) FAIL("slot %llu was claimed", (unsigned long long)h.ref_slot);
  return 0;
}
