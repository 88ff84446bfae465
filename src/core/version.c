/* Version and build information. */
#include "core.h"
#include <dlfcn.h>
#include <pthread.h>

#ifndef TCUDA_ARCH_LIST
#define TCUDA_ARCH_LIST ""
#endif
#ifndef TCUDA_GENCODE_FLAGS
#define TCUDA_GENCODE_FLAGS ""
#endif
#ifndef TCUDA_NCCL_SONAME
#define TCUDA_NCCL_SONAME "libnccl.so.2"
#endif
#ifndef TCUDA_NCCL_PATH
#define TCUDA_NCCL_PATH ""
#endif

int tcuda_version(void) {
  return TCUDA_VERSION_MAJOR * 10000 + TCUDA_VERSION_MINOR * 100 + TCUDA_VERSION_PATCH;
}
const char *tcuda_version_string(void) { return TCUDA_VERSION_STRING; }
int tcuda_runtime_version(void) { return CUDART_VERSION; }

int tcuda_driver_version(void) {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess) { (void)cudaGetLastError(); return 0; }
  return v;
}

const char *tcuda_get_arch_list(void) { return TCUDA_ARCH_LIST; }
const char *tcuda_get_gencode_flags(void) { return TCUDA_GENCODE_FLAGS; }

/* NCCL is 200+ MB: load it on first use only, so start-up does not pay. */
static void *g_nccl;
static pthread_once_t g_nccl_once = PTHREAD_ONCE_INIT;
static void load_nccl(void) {
  g_nccl = dlopen(TCUDA_NCCL_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!g_nccl && TCUDA_NCCL_PATH[0]) g_nccl = dlopen(TCUDA_NCCL_PATH, RTLD_NOW | RTLD_LOCAL);
}
void *tc_nccl_sym(const char *name) {
  pthread_once(&g_nccl_once, load_nccl);
  return g_nccl ? dlsym(g_nccl, name) : NULL;
}

int tcuda_nccl_version(void) {
  int (*get)(int *) = (int (*)(int *))tc_nccl_sym("ncclGetVersion");
  int v = 0;
  if (!get || get(&v) != 0) return 0;
  return v;
}
