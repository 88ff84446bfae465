/* Sharing caching-allocator memory with other processes (PyTorch's
 * CudaIPCTypes and ipc_collect).
 *
 * The producer exports a block: the cudaIpcMemHandle of its whole segment,
 * the offset, an interprocess event recorded after its pending work, and a
 * slot in a shared-memory file. The slot says who holds the block:
 *   -1  exported, not yet imported
 *   >0  imported by that process id
 *    0  released (closed, or given up)
 * A producer free of a block whose slot is not 0 parks the block instead;
 * tcuda_ipc_collect (and the allocator's OOM path) frees parked blocks once
 * their slots are 0 or their consumer has died. The pid is what lets a dead
 * consumer be detected: PyTorch's counter cannot tell, and leaks. */
#include "alloc/alloc.h"
#include "alloc/hooks.h"
#include "core/core.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define TC_IPC_MAGIC 0x50494354u /* "TCIP" */
#define SLOTS_PER_FILE 10000

_Static_assert(sizeof(cudaIpcMemHandle_t) == 64, "IPC memory handle size");
_Static_assert(sizeof(cudaIpcEventHandle_t) == 64, "IPC event handle size");

/* ---- shared-memory reference files ---- */
/* A slot: its state (above) and the export's random token, which the
 * handle carries too, so a handle cannot name another export's slot. */
typedef struct ipc_slot {
  _Atomic int64_t state;
  _Atomic uint64_t token;
} ipc_slot;
#define REF_FILE_BYTES (SLOTS_PER_FILE * sizeof(ipc_slot))

typedef struct ref_file {
  char name[48];
  ipc_slot *slots;
  size_t next;    /* producer: next unused slot */
  int users;      /* producer: records using it; consumer: imports using it */
  int producer;   /* created here (unlink when idle) */
  struct ref_file *next_file;
} ref_file;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static ref_file *g_files;
static ref_file *g_current; /* producer's file for new exports */
static unsigned g_file_serial;

/* Maps a reference file; NULL with errno set, or with *why set when an
 * existing file is not one this process may trust (another owner, or
 * shorter than a reference file: mapping it whole would fault). */
static ref_file *file_map(const char *name, int create, const char **why) {
  int fd = shm_open(name, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR | O_NOFOLLOW, 0600);
  if (fd < 0) return NULL;
  size_t bytes = REF_FILE_BYTES;
  if (!create) {
    struct stat sb;
    const char *bad = fstat(fd, &sb) != 0 ? "cannot be examined (fstat failed)"
                      : !S_ISREG(sb.st_mode) ? "is not a regular file"
                      : sb.st_uid != geteuid() ? "belongs to another user"
                      : (sb.st_mode & 022) ? "is writable by group or others"
                      : sb.st_size != (off_t)bytes ? "does not have a reference file's size (truncated or forged)"
                      : NULL;
    if (bad) {
      close(fd);
      *why = bad;
      return NULL;
    }
  }
  if (create && ftruncate(fd, (off_t)bytes) != 0) {
    close(fd);
    shm_unlink(name);
    return NULL;
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    if (create) shm_unlink(name);
    return NULL;
  }
  ref_file *f = calloc(1, sizeof *f);
  if (!f) {
    munmap(p, bytes);
    if (create) shm_unlink(name);
    return NULL;
  }
  snprintf(f->name, sizeof f->name, "%s", name);
  f->slots = p;
  f->producer = create;
  f->next_file = g_files;
  g_files = f;
  return f;
}

static void file_drop(ref_file *f) {
  ref_file **pp = &g_files;
  while (*pp != f) pp = &(*pp)->next_file;
  *pp = f->next_file;
  if (g_current == f) g_current = NULL;
  munmap((void *)f->slots, REF_FILE_BYTES);
  if (f->producer) shm_unlink(f->name);
  free(f);
}

static ref_file *file_find(const char *name) {
  for (ref_file *f = g_files; f; f = f->next_file)
    if (!strcmp(f->name, name)) return f;
  return NULL;
}

/* A slot is free to reclaim when released or when its consumer is gone. */
static int slot_released(int64_t v) {
  if (v == 0) return 1;
  if (v > 0 && kill((pid_t)v, 0) != 0 && errno == ESRCH) return 1;
  return 0;
}

/* Tokens need not be secret from this user's other processes (they can
 * map the file), only unguessable enough that a forged or stale handle
 * does not match a live slot by chance. */
static uint64_t random_token(void) {
  uint64_t t = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (read(fd, &t, sizeof t) != (ssize_t)sizeof t) t = 0;
    close(fd);
  }
  if (!t) { /* no urandom: time and address bits, still never 0 */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&t ^ ((uint64_t)getpid() << 40);
  }
  return t;
}

/* ---- producer ---- */
typedef struct export_rec {
  void *block;        /* block start: what the producer frees */
  int device;
  ref_file *file;
  size_t slot;
  cudaEvent_t event;
  int parked;         /* the producer freed the block already */
  struct export_rec *next;
} export_rec;

static export_rec *g_exports;

static void rec_remove(export_rec *r) {
  export_rec **pp = &g_exports;
  while (*pp != r) pp = &(*pp)->next;
  *pp = r->next;
  if (r->event) cudaEventDestroy(r->event);
  atomic_store(&r->file->slots[r->slot].state, 0);
  atomic_store(&r->file->slots[r->slot].token, 0);
  if (--r->file->users == 0 && r->file != g_current) file_drop(r->file);
  free(r);
}

/* Every record of `block` released? (g_mu held) */
static int block_released(void *block) {
  for (export_rec *r = g_exports; r; r = r->next)
    if (r->block == block && !slot_released(atomic_load(&r->file->slots[r->slot].state))) return 0;
  return 1;
}

static void drop_block_records(void *block) {
  for (export_rec *r = g_exports, *n; r; r = n) {
    n = r->next;
    if (r->block == block) rec_remove(r);
  }
}

/* Allocator hook: 1 = parked (the caller must not free). */
static int park_on_free(void *ptr) {
  pthread_mutex_lock(&g_mu);
  int exported = 0;
  for (export_rec *r = g_exports; r; r = r->next)
    if (r->block == ptr) { exported = 1; break; }
  if (!exported) {
    pthread_mutex_unlock(&g_mu);
    return 0;
  }
  if (block_released(ptr)) {
    drop_block_records(ptr);
    pthread_mutex_unlock(&g_mu);
    return 0;
  }
  for (export_rec *r = g_exports; r; r = r->next)
    if (r->block == ptr) r->parked = 1;
  pthread_mutex_unlock(&g_mu);
  return 1;
}

/* Free parked blocks whose consumers are done; returns how many. */
static int collect(void) {
  void **victims = NULL;
  size_t n = 0, cap = 0;
  pthread_mutex_lock(&g_mu);
  for (export_rec *r = g_exports; r; r = r->next) {
    if (!r->parked || !block_released(r->block)) continue;
    int dup = 0;
    for (size_t i = 0; i < n; i++) dup |= victims[i] == r->block;
    if (dup) continue;
    if (n == cap) {
      size_t c = cap ? cap * 2 : 8;
      void **v = realloc(victims, c * sizeof *v);
      if (!v) break;
      victims = v;
      cap = c;
    }
    victims[n++] = r->block;
  }
  for (size_t i = 0; i < n; i++) drop_block_records(victims[i]);
  /* Nothing exported any more: drop the current file too (PyTorch drops
   * the ref-counter file once no slot is in use). */
  if (!g_exports && g_current && g_current->users == 0) file_drop(g_current);
  pthread_mutex_unlock(&g_mu);
  for (size_t i = 0; i < n; i++) tcuda_free(victims[i]); /* records gone: the hook lets it through */
  free(victims);
  return (int)n;
}

static void install_hooks(void) {
  /* no error: IPC is the one layer that takes frees over, and adding twice is a no-op */
  (void)tc_hook_on_free(park_on_free);
  (void)tc_hook_on_reclaim(collect);
}

tcuda_status tcuda_ipc_collect(void) {
  collect();
  return TCUDA_SUCCESS;
}

/* The live block holding ptr, from the allocator's snapshot (export is not
 * a hot path). */
static tcuda_status find_block(const char *F, uint64_t p, tcuda_segment_info_t *seg_out,
                               tcuda_block_info_t *blk_out) {
  tcuda_snapshot_t *snap = NULL;
  tcuda_status s = tcuda_memory_snapshot(&snap);
  if (s) return s;
  s = tc_error(TCUDA_ERROR_INVALID_POINTER, "%s: ptr %p is not a live allocation of tcuda's caching allocator", F,
               (void *)(uintptr_t)p);
  for (size_t i = 0; i < snap->num_segments; i++) {
    tcuda_segment_info_t *sg = &snap->segments[i];
    if (p < sg->address || p >= sg->address + sg->total_size) continue;
    for (size_t j = 0; j < sg->num_blocks; j++) {
      tcuda_block_info_t *b = &sg->blocks[j];
      if (p < b->address || p >= b->address + b->size) continue;
      if (b->state == TCUDA_BLOCK_ACTIVE_ALLOCATED) {
        *seg_out = *sg;
        seg_out->blocks = NULL;
        *blk_out = *b;
        s = TCUDA_SUCCESS;
      }
      break;
    }
    break;
  }
  tcuda_snapshot_free(snap);
  return s;
}

tcuda_status tcuda_ipc_export(void *ptr, tcuda_ipc_handle_t *h) {
  static const char *F = "tcuda_ipc_export";
  TC_CHECK_ARG(F, ptr, "ptr");
  TC_CHECK_ARG(F, h, "handle");
  tcuda_status s = tc_lazy_init(F);
  if (s) return s;
  tcuda_segment_info_t seg = {0};
  tcuda_block_info_t blk = {0};
  if ((s = find_block(F, (uint64_t)(uintptr_t)ptr, &seg, &blk))) return s;
  if (seg.is_expandable)
    return tc_error(TCUDA_ERROR_NOT_SUPPORTED,
                    "%s: ptr %p lives in an expandable segment (expandable_segments:True or policy:compact), "
                    "which cudaIpc cannot share; allocate it with expandable_segments:False and policy:torch",
                    F, ptr);
  memset(h, 0, sizeof *h);
  tcuda_device_guard_t g;
  if ((s = tcuda_device_guard_begin(&g, seg.device))) return s;
  cudaEvent_t ev = NULL;
  cudaError_t e = cudaIpcGetMemHandle((cudaIpcMemHandle_t *)h->mem_handle, (void *)(uintptr_t)seg.address);
  const char *call = "cudaIpcGetMemHandle";
  if (e == cudaSuccess) {
    call = "cudaEventCreateWithFlags";
    e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventInterprocess);
  }
  tcuda_stream_t cur = {0};
  if (e == cudaSuccess && (s = tcuda_current_stream(seg.device, &cur)) == TCUDA_SUCCESS) {
    call = "cudaEventRecord";
    e = cudaEventRecord(ev, (cudaStream_t)cur.handle);
    if (e == cudaSuccess) {
      call = "cudaIpcGetEventHandle";
      e = cudaIpcGetEventHandle((cudaIpcEventHandle_t *)h->event_handle, ev);
    }
  }
  tcuda_device_guard_end(&g);
  if (s || e != cudaSuccess) {
    if (ev) cudaEventDestroy(ev);
    return s ? s : tc_cuda_error(e, F, call);
  }

  export_rec *r = calloc(1, sizeof *r);
  pthread_mutex_lock(&g_mu);
  if (r && (!g_current || g_current->next == SLOTS_PER_FILE)) {
    if (g_current && g_current->users == 0) file_drop(g_current);
    g_current = NULL;
    char name[48];
    snprintf(name, sizeof name, "/tcuda-ipc-%d-%u", (int)getpid(), g_file_serial++);
    const char *why = NULL;
    g_current = file_map(name, 1, &why);
  }
  if (!r || !g_current) {
    int err = errno;
    pthread_mutex_unlock(&g_mu);
    free(r);
    cudaEventDestroy(ev);
    return r ? tc_error(TCUDA_ERROR_IO, "%s: cannot create the shared-memory reference file: %s", F, strerror(err))
             : tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  }
  r->block = (void *)(uintptr_t)blk.address;
  r->device = seg.device;
  r->file = g_current;
  r->slot = g_current->next++;
  r->event = ev;
  g_current->users++;
  uint64_t token = 0;
  while (!token) token = random_token();
  atomic_store(&g_current->slots[r->slot].token, token);
  atomic_store(&g_current->slots[r->slot].state, -1);
  r->next = g_exports;
  g_exports = r;
  h->magic = TC_IPC_MAGIC;
  h->version = TCUDA_IPC_HANDLE_VERSION;
  h->device = seg.device;
  h->producer_pid = (int32_t)getpid();
  h->offset = (uint64_t)(uintptr_t)ptr - seg.address;
  h->size = blk.address + blk.size - (uint64_t)(uintptr_t)ptr;
  snprintf(h->ref_name, sizeof h->ref_name, "%s", g_current->name);
  h->ref_slot = r->slot;
  h->token = token;
  pthread_mutex_unlock(&g_mu);
  install_hooks();
  return TCUDA_SUCCESS;
}

/* ---- consumer ---- */
typedef struct opened_seg {
  unsigned char key[64];
  int device;
  void *base;
  int users;
  struct opened_seg *next;
} opened_seg;

typedef struct import_rec {
  void *ptr;
  opened_seg *seg;
  ref_file *file;
  size_t slot;
  struct import_rec *next;
} import_rec;

static opened_seg *g_segs;
static import_rec *g_imports;

static tcuda_status check_handle(const char *F, const tcuda_ipc_handle_t *h) {
  if (h->magic != TC_IPC_MAGIC)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: handle is not a tcuda IPC handle (magic 0x%08x)", F,
                    h->magic);
  if (h->version != TCUDA_IPC_HANDLE_VERSION)
    return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: handle version %u, this library reads version %u", F,
                    h->version, TCUDA_IPC_HANDLE_VERSION);
  if (h->ref_slot >= SLOTS_PER_FILE || memchr(h->ref_name, 0, sizeof h->ref_name) == NULL ||
      strncmp(h->ref_name, "/tcuda-ipc-", 11) != 0)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: handle has a bad reference slot", F);
  if (h->producer_pid == (int32_t)getpid())
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: the handle was exported by this process; use the pointer itself (CUDA cannot open "
                    "its own IPC handles)",
                    F);
  /* the file is named after the process that made it */
  char want[48];
  int n = snprintf(want, sizeof want, "/tcuda-ipc-%d-", (int)h->producer_pid);
  if (h->producer_pid <= 0 || strncmp(h->ref_name, want, (size_t)n) != 0 || !h->ref_name[n] ||
      strspn(h->ref_name + n, "0123456789") != strlen(h->ref_name + n)) {
    char shown[200];
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: handle's reference file '%s' is not producer %d's", F,
                    tc_printable(h->ref_name, shown, sizeof shown), (int)h->producer_pid);
  }
  if (h->size == 0 || h->offset + h->size < h->offset)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: handle's offset %llu and size %llu do not make a range", F,
                    (unsigned long long)h->offset, (unsigned long long)h->size);
  if (h->device < 0)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: handle's device %d is not a device", F, (int)h->device);
  return TCUDA_SUCCESS;
}

/* The reference file named by h, mapped and checked, with h's token in its
 * slot (g_mu held). *new_file: mapped by this call. */
static tcuda_status ref_file_for(const char *F, const tcuda_ipc_handle_t *h, ref_file **out, int *new_file) {
  *new_file = 0;
  ref_file *f = file_find(h->ref_name);
  if (!f) {
    const char *why = NULL;
    errno = 0;
    if (!(f = file_map(h->ref_name, 0, &why))) {
      if (why) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: reference file %s %s", F, h->ref_name, why);
      return tc_error(TCUDA_ERROR_INVALID_STATE, "%s: cannot open reference file %s (%s): the producer has released it",
                      F, h->ref_name, strerror(errno));
    }
    *new_file = 1;
  }
  if (atomic_load(&f->slots[h->ref_slot].token) != h->token) {
    if (*new_file) file_drop(f);
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: handle's token does not match slot %llu of %s (a forged handle, another export's slot, "
                    "or an export the producer has released)",
                    F, (unsigned long long)h->ref_slot, h->ref_name);
  }
  *out = f;
  return TCUDA_SUCCESS;
}

/* The allocation the driver opened at base: offset + size must lie in it. */
static tcuda_status check_range(const char *F, const tcuda_ipc_handle_t *h, void *base) {
  typedef int (*pfn_range)(unsigned long long *, size_t *, unsigned long long);
  pfn_range range = (pfn_range)tc_driver_fn("cuMemGetAddressRange");
  unsigned long long b = 0;
  size_t sz = 0;
  if (!range || range(&b, &sz, (unsigned long long)(uintptr_t)base) != 0)
    return tc_error(TCUDA_ERROR_CUDA, "%s: cuMemGetAddressRange failed on the opened allocation", F);
  uint64_t off = (uint64_t)(uintptr_t)base - b + h->offset;
  if (h->offset >= sz || off + h->size > sz || off + h->size < off)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: handle's offset %llu and size %llu reach past the shared allocation (%zu bytes)", F,
                    (unsigned long long)h->offset, (unsigned long long)h->size, sz);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_ipc_import(const tcuda_ipc_handle_t *h, void **ptr) {
  static const char *F = "tcuda_ipc_import";
  TC_CHECK_ARG(F, h, "handle");
  TC_CHECK_ARG(F, ptr, "ptr");
  *ptr = NULL;
  tcuda_status s = check_handle(F, h);
  if (s) return s;
  /* the file and slot are checked before CUDA: a forged handle is refused
   * the same way with or without a GPU */
  ref_file *f = NULL;
  int new_file = 0;
  pthread_mutex_lock(&g_mu);
  s = ref_file_for(F, h, &f, &new_file);
  if (!s && new_file) file_drop(f);
  pthread_mutex_unlock(&g_mu);
  if (s || (s = tc_lazy_init(F))) return s;
  int dev = h->device;
  if ((s = tc_resolve_device(F, &dev))) return s;

  pthread_mutex_lock(&g_mu);
  if ((s = ref_file_for(F, h, &f, &new_file))) {
    pthread_mutex_unlock(&g_mu);
    return s;
  }
  /* claim the slot: only one import, ever, per handle */
  int64_t expect = -1;
  if (!atomic_compare_exchange_strong(&f->slots[h->ref_slot].state, &expect, (int64_t)getpid())) {
    if (new_file) file_drop(f);
    pthread_mutex_unlock(&g_mu);
    if (expect > 0)
      return tc_error(TCUDA_ERROR_INVALID_STATE, "%s: handle was already imported (by process %lld)", F,
                      (long long)expect);
    return tc_error(TCUDA_ERROR_INVALID_STATE, "%s: handle was already imported and released", F);
  }
  opened_seg *sg = g_segs;
  while (sg && (sg->device != dev || memcmp(sg->key, h->mem_handle, 64))) sg = sg->next;
  cudaError_t e = cudaSuccess;
  const char *call = "";
  tcuda_device_guard_t g;
  int guarded = tcuda_device_guard_begin(&g, dev) == TCUDA_SUCCESS;
  if (!guarded) e = cudaErrorInvalidDevice, call = "device guard";
  if (e == cudaSuccess && !sg) {
    sg = calloc(1, sizeof *sg);
    cudaIpcMemHandle_t mh;
    memcpy(&mh, h->mem_handle, 64);
    call = "cudaIpcOpenMemHandle";
    if (!sg) e = cudaErrorMemoryAllocation;
    else if ((e = cudaIpcOpenMemHandle(&sg->base, mh, cudaIpcMemLazyEnablePeerAccess)) == cudaSuccess) {
      memcpy(sg->key, h->mem_handle, 64);
      sg->device = dev;
      sg->next = g_segs;
      g_segs = sg;
    } else {
      free(sg);
      sg = NULL;
    }
  }
  tcuda_status range_st = TCUDA_SUCCESS;
  char range_msg[TC_ERRMSG_MAX];
  if (e == cudaSuccess && (range_st = check_range(F, h, sg->base))) {
    snprintf(range_msg, sizeof range_msg, "%s", tcuda_last_error());
    e = cudaErrorInvalidValue;
  }
  import_rec *r = NULL;
  if (e == cudaSuccess) {
    /* order our later work after the producer's writes */
    cudaIpcEventHandle_t eh;
    memcpy(&eh, h->event_handle, 64);
    cudaEvent_t ev = NULL;
    tcuda_stream_t cur = {0};
    call = "cudaIpcOpenEventHandle";
    if ((e = cudaIpcOpenEventHandle(&ev, eh)) == cudaSuccess) {
      call = "cudaStreamWaitEvent";
      if (tcuda_current_stream(dev, &cur) == TCUDA_SUCCESS) e = cudaStreamWaitEvent((cudaStream_t)cur.handle, ev, 0);
      cudaEventDestroy(ev);
    }
  }
  if (e == cudaSuccess && !(r = calloc(1, sizeof *r))) e = cudaErrorMemoryAllocation, call = "calloc";
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (sg && sg->users == 0) {
      cudaIpcCloseMemHandle(sg->base);
      opened_seg **pp = &g_segs;
      while (*pp != sg) pp = &(*pp)->next;
      *pp = sg->next;
      free(sg);
    }
    if (guarded) tcuda_device_guard_end(&g);
    atomic_store(&f->slots[h->ref_slot].state, -1); /* give the claim back */
    if (new_file) file_drop(f);
    pthread_mutex_unlock(&g_mu);
    return range_st ? tc_error(range_st, "%s", range_msg) : tc_cuda_error(e, F, call);
  }
  if (guarded) tcuda_device_guard_end(&g);
  sg->users++;
  f->users++;
  r->ptr = (char *)sg->base + h->offset;
  r->seg = sg;
  r->file = f;
  r->slot = h->ref_slot;
  r->next = g_imports;
  g_imports = r;
  *ptr = r->ptr;
  pthread_mutex_unlock(&g_mu);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_ipc_close(void *ptr) {
  static const char *F = "tcuda_ipc_close";
  TC_CHECK_ARG(F, ptr, "ptr");
  pthread_mutex_lock(&g_mu);
  import_rec **pp = &g_imports;
  while (*pp && (*pp)->ptr != ptr) pp = &(*pp)->next;
  if (!*pp) {
    pthread_mutex_unlock(&g_mu);
    return tc_error(TCUDA_ERROR_INVALID_POINTER, "%s: %p was not returned by tcuda_ipc_import, or was closed", F, ptr);
  }
  import_rec *r = *pp;
  *pp = r->next;
  opened_seg *sg = r->seg;
  /* PyTorch: the consumer's work on the memory must finish before the
   * producer may reuse it */
  tcuda_stream_t cur;
  tcuda_device_guard_t g;
  tcuda_status s = tcuda_device_guard_begin(&g, sg->device);
  int guarded = s == TCUDA_SUCCESS;
  if (guarded && !(s = tcuda_current_stream(sg->device, &cur))) {
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)cur.handle);
    if (e != cudaSuccess) s = tc_cuda_error(e, F, "cudaStreamSynchronize");
  }
  if (--sg->users == 0) {
    if (guarded) cudaIpcCloseMemHandle(sg->base);
    opened_seg **sp = &g_segs;
    while (*sp != sg) sp = &(*sp)->next;
    *sp = sg->next;
    free(sg);
  }
  if (guarded) tcuda_device_guard_end(&g);
  atomic_store(&r->file->slots[r->slot].state, 0);
  if (--r->file->users == 0) file_drop(r->file);
  free(r);
  pthread_mutex_unlock(&g_mu);
  return s;
}
