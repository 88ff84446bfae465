/* Engine variants of bench_comm's sweep (see comm_sweep.h). The code is the
 * library's before it kept one path per operation: a peer copy as lanes on
 * forked streams, and reduce_add's per-input step in five ways. */
#include "comm_sweep.h"
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_err[256];
const char *sw_error(void) { return g_err; }

/* A failed tcuda call: keep its message. */
static tcuda_status note(tcuda_status s) {
  if (s) snprintf(g_err, sizeof g_err, "%s", tcuda_last_error());
  return s;
}
static tcuda_status cuda_fail(int e, const char *call) {
  snprintf(g_err, sizeof g_err, "%s: %s", call, cudaGetErrorString((cudaError_t)e));
  return TCUDA_ERROR_CUDA;
}

/* ---------------------------------------------------------------------
 * settings
 * --------------------------------------------------------------------- */
static const char *const P2P_NAMES[] = {"kernel", "pull", "pushpull", "ce",       "ce2",
                                        "ce4",    "cex2", "cex4",     "cekernel", "cepull"};
static const char *const RED_NAMES[] = {"fused", "push", "mix", "copy", "pipe"};

static int choice(const char *v, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!strcmp(v, names[i])) return i;
  return -1;
}

/* An integer in [lo, hi]; pow2: also a power of two. */
static int int_in(const char *v, long lo, long hi, int pow2, int *out) {
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || end == v || x < lo || x > hi || (pow2 && (x & (x - 1)))) return -1;
  *out = (int)x;
  return 0;
}

int sw_parse(const char *settings, sw_opts *o) {
  char buf[256], *save = NULL;
  memset(o, 0, sizeof *o);
  o->p2p = SW_P2P_CE;
  o->red = SW_RED_FUSED;
  o->split = 50;
  o->chunks = 4;
  snprintf(buf, sizeof buf, "%s", settings);
  for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
    char *v = strchr(t, '=');
    int bad = !v;
    if (v) *v++ = 0;
    if (bad) {
    } else if (!strcmp(t, "P2P")) {
      bad = (o->p2p = choice(v, P2P_NAMES, (int)(sizeof P2P_NAMES / sizeof *P2P_NAMES))) < 0;
    } else if (!strcmp(t, "REDUCE")) {
      bad = (o->red = choice(v, RED_NAMES, (int)(sizeof RED_NAMES / sizeof *RED_NAMES))) < 0;
    } else if (!strcmp(t, "BLOCKS_PER_SM")) {
      bad = int_in(v, 1, 32, 0, &o->bpsm);
    } else if (!strcmp(t, "THREADS")) {
      bad = int_in(v, 64, 1024, 1, &o->threads);
    } else if (!strcmp(t, "UNROLL")) {
      bad = int_in(v, 1, 12, 0, &o->unroll) || (o->unroll != 1 && o->unroll != 2 && o->unroll != 4 &&
                                                 o->unroll != 8 && o->unroll != 12);
    } else if (!strcmp(t, "SPLIT")) {
      bad = int_in(v, 1, 99, 0, &o->split);
    } else if (!strcmp(t, "CHUNKS")) {
      bad = int_in(v, 2, 64, 0, &o->chunks);
    } else {
      bad = 1;
    }
    if (bad) {
      snprintf(g_err, sizeof g_err, "bad setting '%s%s%s'", t, v ? "=" : "", v ? v : "");
      return -1;
    }
  }
  if (o->threads > 512 && o->unroll > 4) {
    snprintf(g_err, sizeof g_err, "%d threads with UNROLL=%d (at most 512 threads above 4)", o->threads, o->unroll);
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------------
 * devices and streams
 * --------------------------------------------------------------------- */
static int sm_count(int dev) {
  static int cache[64];
  if (dev < 0 || dev >= 64) return 32;
  if (!cache[dev]) {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) {
      (void)cudaGetLastError();
      n = 32;
    }
    cache[dev] = n;
  }
  return cache[dev];
}

/* Launch shape of the bulk kernels on dev: one wave of resident blocks
 * (the library's: 4 blocks of 512 threads per SM). */
static void kshape(const sw_opts *o, int dev, int *blocks, int *threads) {
  *threads = o->threads ? o->threads : 512;
  int bpsm = o->bpsm ? o->bpsm : 4;
  if (bpsm * *threads > 2048) bpsm = 2048 / *threads;
  *blocks = sm_count(dev) * bpsm;
}

/* 1 when kernels on `dev` can touch `peer`'s memory (access enabled once). */
static int peer_ok(int dev, int peer) {
  static signed char known[8][8]; /* 0 unknown, 1 enabled, -1 not possible */
  if (dev == peer) return 1;
  if (dev < 0 || peer < 0 || dev >= 8 || peer >= 8) return 0;
  if (!known[dev][peer]) {
    int can = 0, v = -1;
    tcuda_device_guard_t g;
    if (cudaDeviceCanAccessPeer(&can, dev, peer) == cudaSuccess && can && !tcuda_device_guard_begin(&g, dev)) {
      cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
      if (e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled) v = 1;
      (void)cudaGetLastError();
      (void)tcuda_device_guard_end(&g);
    }
    (void)cudaGetLastError();
    known[dev][peer] = (signed char)v;
  }
  return known[dev][peer] > 0;
}

static tcuda_stream_t cur(int dev) {
  tcuda_stream_t s;
  memset(&s, 0, sizeof s);
  (void)tcuda_current_stream(dev, &s);
  return s;
}
static int same_stream(tcuda_stream_t a, tcuda_stream_t b) { return a.device == b.device && a.handle == b.handle; }
/* Later work on `waiter` waits for work queued on `other` so far. */
static tcuda_status wait_stream(tcuda_stream_t waiter, tcuda_stream_t other) {
  if (same_stream(waiter, other)) return TCUDA_SUCCESS;
  return note(tcuda_stream_wait_stream(waiter, other));
}

/* ---------------------------------------------------------------------
 * peer copy
 * --------------------------------------------------------------------- */
/* One GPU-to-GPU copy as lanes, each an engine with a share of the bytes on
 * its own stream, forked from s and joined back into it, so that to the
 * caller it is one copy on s. */
enum { LANE_PUSH, LANE_PULL, LANE_CE };
typedef struct {
  int kind, dev, pct;
  tcuda_stream_t s;
} sw_lane;

static int p2p_lanes(const sw_opts *o, int sdev, int ddev, int sdef, sw_lane *l) {
  int n = 0, sp = o->split;
#define LANE(k, d, p) (l[n].kind = (k), l[n].dev = (d), l[n].pct = (p), n++)
  switch (o->p2p) {
  case SW_P2P_PULL: LANE(LANE_PULL, ddev, 100); break;
  case SW_P2P_PUSHPULL: LANE(LANE_PUSH, sdev, sp); LANE(LANE_PULL, ddev, 100 - sp); break;
  case SW_P2P_CE: LANE(LANE_CE, sdef, 100); break;
  case SW_P2P_CE2: LANE(LANE_CE, sdev, 50); LANE(LANE_CE, sdev, 50); break;
  case SW_P2P_CE4: for (int i = 0; i < 4; i++) LANE(LANE_CE, sdev, 25); break;
  case SW_P2P_CEX2: LANE(LANE_CE, sdev, 50); LANE(LANE_CE, ddev, 50); break;
  case SW_P2P_CEX4: for (int i = 0; i < 4; i++) LANE(LANE_CE, i & 1 ? ddev : sdev, 25); break;
  case SW_P2P_CEKERNEL: LANE(LANE_CE, sdev, sp); LANE(LANE_PUSH, sdev, 100 - sp); break;
  case SW_P2P_CEPULL: LANE(LANE_CE, sdev, sp); LANE(LANE_PULL, ddev, 100 - sp); break;
  default: LANE(LANE_PUSH, sdev, 100); break;
  }
#undef LANE
  /* a kernel needs peer access from where it runs; else the copy engines
   * (from the same device: a CE lane may run on either end) */
  for (int i = 0; i < n; i++)
    if (l[i].kind != LANE_CE && !peer_ok(l[i].dev, l[i].kind == LANE_PUSH ? ddev : sdev)) l[i].kind = LANE_CE;
  return n;
}

tcuda_status sw_p2p_copy(const sw_opts *o, void *dstv, int ddev, const void *srcv, int sdev, size_t bytes,
                         tcuda_stream_t s) {
  char *dst = dstv;
  const char *src = srcv;
  if (!bytes) return TCUDA_SUCCESS;
  sw_lane l[4];
  int n = p2p_lanes(o, sdev, ddev, s.device, l), used_s = 0;
  /* small copies: splitting costs more than it gains */
  if (bytes < ((size_t)64 << 10)) {
    n = 1;
    l[0].pct = 100;
  }
  tcuda_status st = TCUDA_SUCCESS;
  for (int i = 0; i < n && !st; i++) {
    if (l[i].dev == s.device && !used_s) {
      l[i].s = s;
      used_s = 1;
    } else if (!(st = note(tcuda_stream_from_pool(l[i].dev, 0, &l[i].s)))) {
      st = wait_stream(l[i].s, s);
    }
  }
  if (st) n = 0; /* the forked streams hold no work yet */
  size_t off = 0, cum = 0;
  for (int i = 0; i < n; i++) {
    /* 4 KiB boundaries keep every part as aligned as the whole */
    cum += (size_t)l[i].pct;
    size_t end = i == n - 1 ? bytes : (size_t)((double)bytes * (double)cum / 100.0) & ~(size_t)4095;
    if (end < off) end = off;
    size_t len = end - off;
    int e = 0;
    const char *call = l[i].kind == LANE_CE ? "cudaMemcpyPeerAsync" : "sw_k_copy";
    tcuda_device_guard_t g;
    if (!st && len && !(st = note(tcuda_device_guard_begin(&g, l[i].dev)))) {
      if (l[i].kind == LANE_CE) {
        e = (int)cudaMemcpyPeerAsync(dst + off, ddev, src + off, sdev, len, l[i].s.handle);
      } else {
        int blocks, threads;
        kshape(o, l[i].dev, &blocks, &threads);
        e = sw_k_copy(l[i].s.handle, dst + off, src + off, len, blocks, threads, o->unroll);
      }
      (void)tcuda_device_guard_end(&g);
      if (e) st = cuda_fail(e, call);
    }
    off = end;
  }
  /* what was issued is joined, even after an error */
  for (int i = 0; i < n; i++) {
    tcuda_status s2 = wait_stream(s, l[i].s);
    if (!st) st = s2;
  }
  return st;
}

/* ---------------------------------------------------------------------
 * sum
 * --------------------------------------------------------------------- */
/* out = a + b, n floats, on stream s (any of them may be on a peer of
 * s.device). */
static tcuda_status add_on(const sw_opts *o, tcuda_stream_t s, float *out, const float *a, const float *b, size_t n) {
  tcuda_device_guard_t g;
  tcuda_status st = note(tcuda_device_guard_begin(&g, s.device));
  if (st) return st;
  int blocks, threads;
  kshape(o, s.device, &blocks, &threads);
  int e = sw_k_add_f32(s.handle, out, a, b, n, blocks, threads, o->unroll);
  (void)tcuda_device_guard_end(&g);
  return e ? cuda_fail(e, "sw_k_add_f32") : TCUDA_SUCCESS;
}

tcuda_status sw_reduce_f32(const sw_opts *o, float *result, const float *acc, int dest, const float *b, int od,
                           size_t nadd) {
  tcuda_stream_t ds = cur(dest), os = cur(od);
  const size_t aes = sizeof(float);
  void *tmp = NULL;
  tcuda_status st = TCUDA_SUCCESS;
  int red = o->red;
  if (od == dest) red = SW_RED_FUSED;
  if ((red == SW_RED_FUSED || red == SW_RED_MIX) && od != dest && !peer_ok(dest, od)) red = SW_RED_COPY;
  if ((red == SW_RED_PUSH || red == SW_RED_MIX) && !peer_ok(od, dest)) red = SW_RED_COPY;
  if (red == SW_RED_COPY || red == SW_RED_PIPE) {
    /* peer copy into a buffer on the destination, pipe: chunk by chunk,
     * each add waiting only for its own chunk. The pipe runs on pool
     * streams forked from the callers' ones and joined back: on the
     * legacy default streams a peer copy may order itself after the
     * destination's adds, which would undo the overlap. */
    int chunks = red == SW_RED_PIPE ? o->chunks : 1;
    tcuda_stream_t cs = os, as = ds;
    st = note(tcuda_malloc_on(&tmp, nadd * aes, dest, ds));
    if (!st) st = wait_stream(os, ds);
    if (!st && red == SW_RED_PIPE && !(st = note(tcuda_stream_from_pool(od, 0, &cs))) &&
        !(st = note(tcuda_stream_from_pool(dest, 0, &as)))) {
      st = wait_stream(cs, os);
      if (!st) st = wait_stream(as, ds);
    }
    size_t at = 0;
    for (int c = 0; c < chunks && !st; c++) {
      /* 1024-element boundaries keep chunks 16-byte aligned */
      size_t end = c == chunks - 1 ? nadd : nadd / (size_t)chunks * (size_t)(c + 1) / 1024 * 1024;
      if (end <= at) continue;
      st = sw_p2p_copy(o, (char *)tmp + at * aes, dest, (const char *)b + at * aes, od, (end - at) * aes, cs);
      if (!st) st = wait_stream(as, cs);
      if (!st) st = add_on(o, as, result + at, acc + at, (float *)tmp + at, end - at);
      at = end;
    }
    /* join: the result on the destination's stream, the input's reads on
     * its own (even after an error, so nothing is left unordered) */
    tcuda_status j1 = wait_stream(ds, as), j2 = wait_stream(os, cs);
    if (!st) st = j1 ? j1 : j2;
  } else if (red == SW_RED_FUSED) {
    if (od != dest) st = wait_stream(ds, os);
    if (!st) st = add_on(o, ds, result, acc, b, nadd);
    /* the other device may reuse its input only after the read */
    if (!st && od != dest) st = wait_stream(os, ds);
  } else {
    /* push: the sum runs on the input's device, reading the partial sum
     * and writing the result over NVLink; mix: the first split percent
     * fused on the destination, the rest pushed, at once */
    size_t k = red == SW_RED_MIX && nadd >= 65536 ? nadd / 100 * (size_t)o->split / 1024 * 1024 : 0;
    st = wait_stream(os, ds);
    if (!st && k) st = wait_stream(ds, os);
    if (!st && k) st = add_on(o, ds, result, acc, b, k);
    if (!st) st = add_on(o, os, result + k, acc + k, b + k, nadd - k);
    tcuda_status s2 = wait_stream(ds, os);
    if (!st) st = s2;
    if (!st && k) st = wait_stream(os, ds);
  }
  if (tmp) (void)tcuda_free(tmp);
  return st;
}
