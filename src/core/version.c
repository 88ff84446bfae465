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
#ifndef TCUDA_CUBLAS_MAJOR
#define TCUDA_CUBLAS_MAJOR "13"
#endif
#ifndef TCUDA_CUBLAS_PATH
#define TCUDA_CUBLAS_PATH ""
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

/* NCCL (200+ MB) and cuBLAS are loaded on first use only, so start-up does
 * not pay for them and binaries start where they are missing. The soname
 * is tried first, then the path found at build time. */
typedef struct lazy_lib {
  const char *soname, *path;
  pthread_once_t once;
  void *handle;
} lazy_lib;

static lazy_lib g_libs[] = {
  {TCUDA_NCCL_SONAME, TCUDA_NCCL_PATH, PTHREAD_ONCE_INIT, NULL},
  {"libcublas.so." TCUDA_CUBLAS_MAJOR, TCUDA_CUBLAS_PATH, PTHREAD_ONCE_INIT, NULL},
};

static void load_nccl(void) {
  lazy_lib *l = &g_libs[0];
  l->handle = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
  if (!l->handle && l->path[0]) l->handle = dlopen(l->path, RTLD_NOW | RTLD_LOCAL);
}
static void load_cublas(void) {
  lazy_lib *l = &g_libs[1];
  l->handle = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
  if (!l->handle && l->path[0]) l->handle = dlopen(l->path, RTLD_NOW | RTLD_LOCAL);
}

void *tc_nccl_sym(const char *name) {
#ifdef TCUDA_NO_CUDA
  return NULL; /* a NCCL found on the machine could not run without CUDA */
#endif
  pthread_once(&g_libs[0].once, load_nccl);
  return g_libs[0].handle ? dlsym(g_libs[0].handle, name) : NULL;
}

void *tc_cublas_sym(const char *name) {
#ifdef TCUDA_NO_CUDA
  return NULL;
#endif
  pthread_once(&g_libs[1].once, load_cublas);
  return g_libs[1].handle ? dlsym(g_libs[1].handle, name) : NULL;
}

int tcuda_nccl_version(void) {
  int (*get)(int *) = (int (*)(int *))tc_nccl_sym("ncclGetVersion");
  int v = 0;
  if (!get || get(&v) != 0) return 0;
  return v;
}
