/* bench_alloc's churn workload (h); see alloc_churn.h. */
#define _GNU_SOURCE
#include "alloc_churn.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloc/alloc.h" /* the policy on the simulated device, for churn_sim */
#include "bench_util.h"

/* An RL fine-tuning loop, each step a rollout and then a
 * training step on it. In the rollout every layer's K and V caches grow by a
 * chunk of tokens per decode step: a larger copy, then the old one freed (as
 * torch.cat does), so each hole left is too small for the next request and
 * the caches' layout moves through memory. The training step's activations
 * are sized by the rollout's length (2-64 MiB), and the next rollout starts
 * in the holes the training step left. Sizes are never whole 2 MiB pages,
 * the live total comes close to its peak in every rollout, and a policy
 * that keeps reserved memory near the peak allocated must give free pages
 * back and map others, in most steps. Training-only loops with random
 * sizes did not do that, nor did rollouts of widely varying length: free
 * holes kept fitting the next requests. Generated, not stored, so every
 * run is the same. A failed run leaves its blocks to the process's exit. */
enum { CH_LAYERS = 16, CH_PARAMS = 16, CH_SMALL = 32, CH_CHUNK = 32, CH_MAXLEN = 1535 };
#define CH_MIB (1024.0 * 1024.0)
#define CH_TOKEN_BYTES 24576u /* one layer's K (or V) per token: 12 sequences x 8 heads x 128 x 2 B */
#define CH_HIDDEN_BYTES 98304u /* one token's hidden state for the 12 sequences: 4096 x 2 B x 12 */
#define CH_VOCAB 32000u

typedef struct churn_run {
  const churn_allocator *A;
  uint64_t rng;
  long step, allocs;
  int failed;              /* a free failed */
  size_t width[CH_LAYERS]; /* bytes per token of each layer's saved activation */
  void *param[CH_PARAMS + CH_SMALL];
} churn_run;

static int ch_alloc(churn_run *c, void **p, size_t n) {
  c->allocs++;
  return c->A->alloc(p, n);
}

static void ch_free(churn_run *c, void *p) {
  if (c->A->free(p)) c->failed = -1;
}

static int churn_start(churn_run *c, const churn_allocator *A) {
  memset(c, 0, sizeof *c);
  c->A = A;
  c->rng = 11;
  for (int l = 0; l < CH_LAYERS; l++) { /* 3.3-64 MiB at the longest rollout */
    double mib = exp(log(3.3) + (log(64.0) - log(3.3)) * rng_unit(&c->rng));
    c->width[l] = ((size_t)(mib * CH_MIB / CH_MAXLEN) + 63) & ~(size_t)63;
  }
  for (int i = 0; i < CH_PARAMS + CH_SMALL; i++) { /* weights 1-45 MiB, small state */
    size_t n = i < CH_PARAMS ? (size_t)(CH_MIB * exp(log(45.0) * rng_unit(&c->rng)))
                             : 4096 + (size_t)(rng_next(&c->rng) % (256u << 10));
    if (ch_alloc(c, &c->param[i], n)) return -1;
  }
  return 0;
}

static int churn_step(churn_run *c) {
  void *kv[CH_LAYERS][2], *x, *grown;
  /* odd token counts; a batch decodes until its longest sequence stops,
   * so rollouts end near the limit while prompts vary */
  size_t prompt = 129 + 2 * (size_t)(rng_next(&c->rng) % 192);
  size_t end = CH_MAXLEN - 2 * (size_t)(rng_next(&c->rng) % 64);
  for (int l = 0; l < CH_LAYERS; l++) /* prefill */
    for (int h = 0; h < 2; h++)
      if (ch_alloc(c, &kv[l][h], prompt * CH_TOKEN_BYTES)) return -1;
  for (size_t t = prompt; t < end;) { /* decode, a chunk per step */
    size_t t2 = t + CH_CHUNK < end ? t + CH_CHUNK : end;
    for (int l = 0; l < CH_LAYERS; l++) {
      if (ch_alloc(c, &x, (t2 - t) * CH_HIDDEN_BYTES)) return -1;
      for (int h = 0; h < 2; h++) {
        if (ch_alloc(c, &grown, t2 * CH_TOKEN_BYTES)) return -1;
        ch_free(c, kv[l][h]);
        kv[l][h] = grown;
      }
      ch_free(c, x);
    }
    if (ch_alloc(c, &x, (t2 - t) * 12 * CH_VOCAB * 2)) return -1; /* logits */
    ch_free(c, x);
    t = t2;
  }
  for (int l = 0; l < CH_LAYERS; l++)
    for (int h = 0; h < 2; h++) ch_free(c, kv[l][h]);

  void *act[CH_LAYERS], *small[CH_LAYERS], *tmp, *grad, *prev = NULL;
  for (int l = 0; l < CH_LAYERS; l++) { /* training: forward over the rollout */
    if (ch_alloc(c, &act[l], end * c->width[l])) return -1;
    if (ch_alloc(c, &tmp, end * c->width[(l + 7) % CH_LAYERS] / 4 * 3)) return -1;
    if (ch_alloc(c, &small[l], 512 + (size_t)(rng_next(&c->rng) % 65536))) return -1;
    ch_free(c, tmp);
  }
  for (int l = CH_LAYERS - 1; l >= 0; l--) { /* backward */
    if (ch_alloc(c, &grad, end * c->width[l])) return -1;
    ch_free(c, act[l]);
    ch_free(c, small[l]);
    if (prev) ch_free(c, prev);
    prev = grad;
  }
  ch_free(c, prev);
  c->step++;
  return c->failed;
}

static void churn_end(churn_run *c) {
  for (int i = 0; i < CH_PARAMS + CH_SMALL; i++) ch_free(c, c->param[i]);
}

double churn_timed(const churn_allocator *A, long warm, int trials, long steps, tcuda_memory_stats_t *s0,
                   tcuda_memory_stats_t *s1) {
  static churn_run c;
  double trial[5];
  if (trials < 1 || trials > 5 || churn_start(&c, A)) return NAN;
  for (long i = 0; i < warm; i++)
    if (churn_step(&c)) return NAN;
  if (A->stats(s0)) return NAN;
  for (int t = 0; t < trials; t++) {
    long a0 = c.allocs;
    uint64_t t0 = now_ns();
    for (long i = 0; i < steps; i++)
      if (churn_step(&c)) return NAN;
    trial[t] = (double)(now_ns() - t0) / (double)(c.allocs - a0);
  }
  if (A->stats(s1)) return NAN;
  churn_end(&c);
  return c.failed ? NAN : median(trial, trials);
}

/* churn_sim: the allocator's policy on the simulated device */
static tc_alloc *g_sim;
static char g_sim_err[512];
static int sim_note(const char *what) {
  if (!g_sim_err[0]) snprintf(g_sim_err, sizeof g_sim_err, "%s: %s", what, tcuda_last_error());
  return -1;
}
static int sim_alloc(void **p, size_t n) {
  uint64_t addr = 0;
  if (tc_alloc_malloc(g_sim, n, 0, &addr)) return sim_note("malloc");
  *p = (void *)(uintptr_t)addr;
  return 0;
}
static int sim_free(void *p) { return tc_alloc_free(g_sim, (uint64_t)(uintptr_t)p) ? sim_note("free") : 0; }
static int sim_stats(tcuda_memory_stats_t *st) {
  tc_alloc_get_stats(g_sim, st);
  return 0;
}

int churn_sim(const char *conf, long warm, long steps) {
  tc_alloc_config cfg;
  tc_sim_options so;
  tc_backend *be = NULL;
  memset(&so, 0, sizeof so);
  tc_alloc_config_default(&cfg);
  if (tc_alloc_config_parse(conf, &cfg) || tc_backend_sim_create(&so, &be) ||
      tc_alloc_create(0, be, &cfg, 150109880320ull, &g_sim)) { /* the H200's memory */
    printf("CHURN-SIM NA %s\n", tcuda_last_error());
    return 1;
  }
  churn_allocator A = {sim_alloc, sim_free, sim_stats};
  tcuda_memory_stats_t s0, s1;
  double ns = churn_timed(&A, warm, 5, steps, &s0, &s1);
  if (isnan(ns)) {
    printf("CHURN-SIM NA %s\n", g_sim_err);
    return 1;
  }
  printf("CHURN-SIM %s: %.4g ns per pair (policy alone); timed steps: %lld maps, %lld unmaps, %.1f MiB unmapped; "
         "peak reserved %.1f MiB, peak allocated %.1f MiB\n",
         conf, ns, (long long)(s1.num_device_alloc - s0.num_device_alloc),
         (long long)(s1.num_device_free - s0.num_device_free),
         (double)(s1.reserved_bytes[TCUDA_STAT_ALL].freed - s0.reserved_bytes[TCUDA_STAT_ALL].freed) / CH_MIB,
         (double)s1.reserved_bytes[TCUDA_STAT_ALL].peak / CH_MIB,
         (double)s1.allocated_bytes[TCUDA_STAT_ALL].peak / CH_MIB);
  tc_alloc_destroy(g_sim);
  tc_backend_sim_destroy(be);
  return 0;
}
