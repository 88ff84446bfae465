/* bench_frag's parts: the trace reader (frag_trace.c) and the child that
 * replays one trace with one allocator on the GPU (frag_child.c). */
#ifndef BENCH_FRAG_H
#define BENCH_FRAG_H
#include <stddef.h>
#include <stdint.h>

#define FRAG_MAX_STREAM 1024

/* Traces (tests/data/torch/README.md), parsed into ops with dense slots. */
enum { OP_ALLOC = 1, OP_FREE, OP_EMPTY };
typedef struct fop {
  uint64_t size;
  uint32_t slot;   /* one per allocation */
  uint16_t stream;
  uint8_t kind;
} fop;

typedef struct ftrace {
  fop *ops;
  size_t n;
  uint32_t nslots;
  int nstreams; /* highest stream number + 1 */
} ftrace;

/* 'a', 'f' and 'e' become ops; 'c' and 'r' are checked and dropped. On
 * error, err holds "PATH line N: what" (or "PATH: what") and *t is empty. */
int frag_trace_parse(const char *path, ftrace *t, char *err, size_t errlen);
void frag_trace_free(ftrace *t);
const char *frag_skip_blank(const char *s);

/* bench_frag --child KIND CONFIG TRACE; KIND is torch, async or tcuda.
 * Prints "FRAG <peak reserved> <peak allocated> <ooms>" or "FRAG NA <why>". */
int frag_child_main(const char *kind, const char *config, const char *path);

#endif
