/* TCUDA_ALLOC_CONF: PyTorch's "key:value,key:value" syntax, parsed and
 * written back through the key table (TC_ALLOC_CONFIG_KEYS in config.h).
 *
 * The tokenizer splits on , : [ ] and drops whitespace, as torch's
 * ConfigTokenizer does. Unlike torch we are strict about numbers ("100abc"
 * and "-5" are errors, where stoi would accept them), because a silently
 * misread option is worse than a refusal. */
#include "alloc/config.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB ((uint64_t)1 << 20)
#define MAX_TOKENS 256
#define TOKEN_MAX 64

typedef struct {
  char tok[MAX_TOKENS][TOKEN_MAX];
  size_t n;
} tokens;

#define KEY_ROW(key, alias, kind, field, snapshot, snapshot_key, example, doc) \
  {key, alias, TC_KEY_##kind, field, snapshot, snapshot_key, example, doc},
const tc_config_key tc_alloc_config_keys[] = {TC_ALLOC_CONFIG_KEYS(KEY_ROW)};
#undef KEY_ROW
const size_t tc_alloc_config_nkeys = sizeof tc_alloc_config_keys / sizeof *tc_alloc_config_keys;

void tc_alloc_config_default(tc_alloc_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->large_segment_size = TC_LARGE_BUFFER;
  cfg->max_split_size = UINT64_MAX;
  cfg->max_non_split_rounding_size = TC_LARGE_BUFFER;
  cfg->per_process_memory_fraction = 1.0;
}

static tcuda_status lex(const char *src, const char *conf, tokens *t) {
  char buf[TOKEN_MAX];
  size_t blen = 0;
  t->n = 0;
  for (const char *p = conf;; p++) {
    char c = *p;
    int special = c == ',' || c == ':' || c == '[' || c == ']';
    if (c == 0 || special) {
      if (blen) {
        if (t->n >= MAX_TOKENS) goto too_many;
        memcpy(t->tok[t->n], buf, blen);
        t->tok[t->n++][blen] = 0;
        blen = 0;
      }
      if (c == 0) break;
      if (t->n >= MAX_TOKENS) goto too_many;
      t->tok[t->n][0] = c;
      t->tok[t->n++][1] = 0;
    } else if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\v' && c != '\f') {
      if (blen + 1 >= TOKEN_MAX)
        return tc_error(TCUDA_ERROR_CONFIG, "%s: token '%.*s...' is too long", src, (int)blen, buf);
      buf[blen++] = c;
    }
  }
  return TCUDA_SUCCESS;
too_many:
  return tc_error(TCUDA_ERROR_CONFIG, "%s: too many tokens (more than %d)", src, MAX_TOKENS);
}

/* Whole token is a decimal number that fits uint64. */
static int parse_u64(const char *s, uint64_t *out) {
  if (!*s) return 0;
  uint64_t v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return 0;
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return 0;
    v = v * 10 + d;
  }
  *out = v;
  return 1;
}

static int parse_double(const char *s, double *out) {
  if (!*s) return 0;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (*end || errno == ERANGE || isnan(v)) return 0;
  *out = v;
  return 1;
}

static int is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* The value token after "key:"; i points at the key. */
static tcuda_status value_at(const char *src, const tokens *t, size_t *i, const char *key) {
  if (*i + 1 >= t->n || strcmp(t->tok[*i + 1], ":"))
    return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: expected ':' after the key", src, key);
  if (*i + 2 >= t->n)
    return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: missing value", src, key);
  *i += 2;
  return TCUDA_SUCCESS;
}

static tcuda_status parse_bool(const char *src, const tokens *t, size_t *i, const char *key, int *out) {
  tcuda_status s = value_at(src, t, i, key);
  if (s) return s;
  const char *v = t->tok[*i];
  if (!strcmp(v, "True")) *out = 1;
  else if (!strcmp(v, "False")) *out = 0;
  else return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: expected True or False, got '%s'", src, key, v);
  return TCUDA_SUCCESS;
}

/* A size in MB: max_split_size_mb and max_non_split_rounding_mb (their
 * least value is large_segment_size_mb's, checked once the whole string is
 * read, as torch does), large_segment_size_mb (more than 10). */
static tcuda_status parse_mb(const char *src, const tokens *t, size_t *i, const char *key, uint64_t least,
                             uint64_t shown, uint64_t *out) {
  tcuda_status s = value_at(src, t, i, key);
  if (s) return s;
  uint64_t mb;
  if (!parse_u64(t->tok[*i], &mb) || mb < least)
    return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: expected a number >= %llu, got '%s'", src, key,
                    (unsigned long long)shown, t->tok[*i]);
  if (mb > UINT64_MAX / MIB) mb = UINT64_MAX / MIB; /* torch clamps likewise */
  *out = mb * MIB;
  return TCUDA_SUCCESS;
}

static tcuda_status parse_roundup(const char *src, const tokens *t, size_t *i, const char *key,
                                  unsigned div[TC_ROUNDUP_SLOTS]) {
  tcuda_status s = value_at(src, t, i, key);
  if (s) return s;
  if (strcmp(t->tok[*i], "[")) {
    uint64_t v;
    if (!parse_u64(t->tok[*i], &v) || !is_pow2(v) || v > (1u << 30))
      return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: expected a power of 2, got '%s'", src, key, t->tok[*i]);
    for (int k = 0; k < TC_ROUNDUP_SLOTS; k++) div[k] = (unsigned)v;
    return TCUDA_SUCCESS;
  }
  /* List form [K:V,...,>:V]; K in MB sets slot log2(K) (docs/allocator.md, "Configuration"). */
  int first = 1, have_last = 0;
  unsigned last = 0;
  size_t j = *i + 1;
  for (;;) {
    if (j >= t->n) return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: missing ']'", src, key);
    if (!strcmp(t->tok[j], "]")) break;
    const char *k = t->tok[j];
    if (j + 2 >= t->n || strcmp(t->tok[j + 1], ":"))
      return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: expected 'size:divisions' at '%s'", src, key, k);
    const char *vs = t->tok[j + 2];
    uint64_t v;
    if (!parse_u64(vs, &v) || (v && !is_pow2(v)) || v > (1u << 30))
      return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: divisions must be a power of 2 or 0, got '%s'", src, key, vs);
    if (!strcmp(k, ">")) {
      for (unsigned x = have_last ? last + 1 : 0; x < TC_ROUNDUP_SLOTS; x++) div[x] = (unsigned)v;
    } else {
      uint64_t mb;
      if (!parse_u64(k, &mb) || !is_pow2(mb))
        return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: interval must be a power of 2 (MB) or '>', got '%s'", src,
                        key, k);
      unsigned idx = tc_log2_floor(mb);
      if (idx > TC_ROUNDUP_SLOTS - 1) idx = TC_ROUNDUP_SLOTS - 1;
      if (first) {
        for (unsigned x = 0; x < idx; x++) div[x] = (unsigned)v;
        first = 0;
      }
      div[idx] = (unsigned)v;
      last = idx;
      have_last = 1;
    }
    j += 3;
    if (j < t->n && !strcmp(t->tok[j], ",")) j++;
    else if (j >= t->n || strcmp(t->tok[j], "]"))
      return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: expected ',' or ']' after '%s:%s'", src, key, k, vs);
  }
  *i = j;
  return TCUDA_SUCCESS;
}

static const tc_config_key *find_key(const char *key) {
  for (size_t k = 0; k < tc_alloc_config_nkeys; k++) {
    const tc_config_key *d = &tc_alloc_config_keys[k];
    if (!strcmp(key, d->key) || (d->alias && !strcmp(key, d->alias))) return d;
  }
  return NULL;
}

/* The value of key d (spelt `key`) at t->tok[*i + 2], into cfg. */
static tcuda_status parse_value(const char *src, const tokens *t, size_t *i, const char *key, const tc_config_key *d,
                                tc_alloc_config *cfg) {
  union {
    uint64_t mb;
    double fraction;
    unsigned div[TC_ROUNDUP_SLOTS];
    int flag;
  } ignored; /* where a key tcuda ignores is parsed to */
  void *field = d->field == TC_KEY_IGNORED ? (void *)&ignored : (char *)cfg + d->field;
  tcuda_status s;
  switch (d->kind) {
  case TC_KEY_MB:
    return parse_mb(src, t, i, key, 0, cfg->large_segment_size / MIB, (uint64_t *)field);
  case TC_KEY_SEGMENT_MB:
    return parse_mb(src, t, i, key, TC_MIN_LARGE_ALLOC / MIB + 1, TC_MIN_LARGE_ALLOC / MIB + 1, (uint64_t *)field);
  case TC_KEY_FRACTION: {
    double v = 0;
    if ((s = value_at(src, t, i, key))) return s;
    if (!parse_double(t->tok[*i], &v) || !(v > 0.0 && v < 1.0))
      return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: expected a number in (0, 1), got '%s'", src, key, t->tok[*i]);
    *(double *)field = v;
    return TCUDA_SUCCESS;
  }
  case TC_KEY_UNIT: {
    double v = 0;
    if ((s = value_at(src, t, i, key))) return s;
    if (!parse_double(t->tok[*i], &v) || !(v >= 0.0 && v <= 1.0)) /* torch's words */
      return tc_error(TCUDA_ERROR_CONFIG, "%s: %s is invalid, set it in [0.0, 1.0], got '%s'", src, key, t->tok[*i]);
    *(double *)field = v;
    return TCUDA_SUCCESS;
  }
  case TC_KEY_WHOLE: {
    uint64_t v;
    if ((s = value_at(src, t, i, key))) return s;
    if (!parse_u64(t->tok[*i], &v))
      return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: expected a whole number, got '%s'", src, key, t->tok[*i]);
    return TCUDA_SUCCESS;
  }
  case TC_KEY_DIVISIONS:
    return parse_roundup(src, t, i, key, (unsigned *)field);
  case TC_KEY_BOOL:
    return parse_bool(src, t, i, key, (int *)field);
  case TC_KEY_BACKEND:
    if ((s = value_at(src, t, i, key))) return s;
    if (strcmp(t->tok[*i], "native"))
      return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: only 'native' is supported, got '%s'", src, key, t->tok[*i]);
    return TCUDA_SUCCESS;
  case TC_KEY_POLICY:
    if ((s = value_at(src, t, i, key))) return s;
    if (!strcmp(t->tok[*i], "torch")) *(int *)field = TC_POLICY_TORCH;
    else if (!strcmp(t->tok[*i], "compact")) *(int *)field = TC_POLICY_COMPACT;
    else return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: expected 'torch' or 'compact', got '%s'", src, key, t->tok[*i]);
    return TCUDA_SUCCESS;
  case TC_KEY_COUNT: {
    uint64_t v;
    if ((s = value_at(src, t, i, key))) return s;
    if (!parse_u64(t->tok[*i], &v) || v > 256)
      return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: expected an integer in [0, 256], got '%s'", src, key, t->tok[*i]);
    *(int *)field = (int)v;
    return TCUDA_SUCCESS;
  }
  case TC_KEY_THREADS: {
    uint64_t v;
    if ((s = value_at(src, t, i, key))) return s;
    if (!parse_u64(t->tok[*i], &v) || !is_pow2(v) || v > 128)
      return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: expected a power of 2 <= 128, got '%s'", src, key, t->tok[*i]);
    return TCUDA_SUCCESS;
  }
  }
  return tc_error(TCUDA_ERROR_CONFIG, "%s: %s: no parser for this key", src, key);
}

/* Parse onto *cfg in place; the caller keeps a copy for rollback. */
static tcuda_status parse_into(const char *src, const char *conf, tc_alloc_config *cfg) {
  tokens *t = (tokens *)malloc(sizeof *t);
  if (!t) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", src);
  tcuda_status s = lex(src, conf, t);
  int rounding_given = 0;
  for (size_t i = 0; !s && i < t->n; i++) {
    const char *key = t->tok[i];
    const tc_config_key *d = find_key(key);
    if (d) rounding_given |= d->field == TC_KEY_FIELD(max_non_split_rounding_size);
    if (d)
      s = parse_value(src, t, &i, key, d, cfg);
    else if (!strcmp(key, ",") || !strcmp(key, ":") || !strcmp(key, "[") || !strcmp(key, "]"))
      s = tc_error(TCUDA_ERROR_CONFIG, "%s: expected a key, got '%s'", src, key);
    else
      s = tc_error(TCUDA_ERROR_CONFIG, "%s: unknown key '%s'", src, key);
    if (!s && i + 1 < t->n) {
      if (strcmp(t->tok[i + 1], ","))
        s = tc_error(TCUDA_ERROR_CONFIG, "%s: %s: expected ',' after the value, got '%s'", src, key, t->tok[i + 1]);
      else
        i++;
    }
  }
  free(t);
  if (s) return s;
  /* torch 2.11: both bounds are large_segment_size_mb, whatever the keys'
   * order, and rounding not given follows it */
  uint64_t seg = cfg->large_segment_size;
  if (!rounding_given) cfg->max_non_split_rounding_size = seg;
  if (cfg->max_split_size != UINT64_MAX && cfg->max_split_size < seg)
    return tc_error(TCUDA_ERROR_CONFIG, "%s: max_split_size_mb: expected a number >= %llu, got '%llu'", src,
                    (unsigned long long)(seg / MIB), (unsigned long long)(cfg->max_split_size / MIB));
  if (cfg->max_non_split_rounding_size < seg)
    return tc_error(TCUDA_ERROR_CONFIG, "%s: max_non_split_rounding_mb: expected a number >= %llu, got '%llu'", src,
                    (unsigned long long)(seg / MIB), (unsigned long long)(cfg->max_non_split_rounding_size / MIB));
  return TCUDA_SUCCESS;
}

tcuda_status tc_alloc_config_parse_named(const char *source, const char *conf, tc_alloc_config *cfg) {
  TC_CHECK_ARG("tc_alloc_config_parse", cfg != NULL, "cfg");
  tc_alloc_config tmp;
  tc_alloc_config_default(&tmp);
  if (conf) {
    tcuda_status s = parse_into(source, conf, &tmp);
    if (s) return s;
    snprintf(tmp.text, sizeof tmp.text, "%s", conf);
  }
  *cfg = tmp;
  return TCUDA_SUCCESS;
}

tcuda_status tc_alloc_config_parse(const char *conf, tc_alloc_config *cfg) {
  return tc_alloc_config_parse_named("TCUDA_ALLOC_CONF", conf, cfg);
}

tcuda_status tc_alloc_config_update(const char *source, const char *conf, tc_alloc_config *cfg) {
  TC_CHECK_ARG("tc_alloc_config_update", cfg != NULL, "cfg");
  TC_CHECK_ARG("tc_alloc_config_update", conf != NULL, "conf");
  /* torch's parseArgs resets these before every parse (max_non_split_rounding
   * to large_segment_size, in parse_into); the other keys keep their earlier
   * values. */
  tc_alloc_config tmp = *cfg, def;
  tc_alloc_config_default(&def);
  tmp.max_split_size = def.max_split_size;
  memcpy(tmp.roundup_power2_divisions, def.roundup_power2_divisions, sizeof tmp.roundup_power2_divisions);
  tmp.garbage_collection_threshold = 0;
  tcuda_status s = parse_into(source, conf, &tmp);
  if (s) return s;
  snprintf(tmp.text, sizeof tmp.text, "%s", conf);
  *cfg = tmp;
  return TCUDA_SUCCESS;
}

tcuda_status tc_alloc_config_from_env(tc_alloc_config *cfg) {
  static const char *vars[] = {"TCUDA_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"};
  for (size_t k = 0; k < sizeof vars / sizeof *vars; k++) {
    const char *v = getenv(vars[k]);
    if (v) return tc_alloc_config_parse_named(vars[k], v, cfg);
  }
  return tc_alloc_config_parse_named("TCUDA_ALLOC_CONF", NULL, cfg);
}

size_t tc_alloc_config_format(const tc_alloc_config *cfg, char *buf, size_t n) {
  size_t len = 0;
#define PUT(...) len += (size_t)snprintf(buf + len, len < n ? n - len : 0, __VA_ARGS__)
  for (size_t k = 0; k < tc_alloc_config_nkeys; k++) {
    const tc_config_key *d = &tc_alloc_config_keys[k];
    const char *sep = len ? "," : "";
    if (d->kind == TC_KEY_BACKEND) {
      PUT("%s%s:native", sep, d->key);
      continue;
    }
    if (d->field == TC_KEY_IGNORED) continue; /* tcuda keeps no value for it */
    const void *field = (const char *)cfg + d->field;
    if (d->kind == TC_KEY_MB) {
      uint64_t v = *(const uint64_t *)field;
      if (v != UINT64_MAX) PUT("%s%s:%llu", sep, d->key, (unsigned long long)(v / MIB));
    } else if (d->kind == TC_KEY_SEGMENT_MB) {
      uint64_t v = *(const uint64_t *)field;
      if (v != TC_LARGE_BUFFER) PUT("%s%s:%llu", sep, d->key, (unsigned long long)(v / MIB));
    } else if (d->kind == TC_KEY_FRACTION) {
      double v = *(const double *)field;
      if (v > 0) PUT("%s%s:%.17g", sep, d->key, v);
    } else if (d->kind == TC_KEY_UNIT) {
      double v = *(const double *)field;
      if (v != 1.0) PUT("%s%s:%.17g", sep, d->key, v);
    } else if (d->kind == TC_KEY_BOOL) {
      PUT("%s%s:%s", sep, d->key, *(const int *)field ? "True" : "False");
    } else if (d->kind == TC_KEY_COUNT) {
      if (*(const int *)field) PUT("%s%s:%d", sep, d->key, *(const int *)field);
    } else if (d->kind == TC_KEY_POLICY) {
      if (*(const int *)field == TC_POLICY_COMPACT) PUT("%s%s:compact", sep, d->key);
    } else if (d->kind == TC_KEY_DIVISIONS) {
      const unsigned *div = (const unsigned *)field;
      int uniform = 1, any = 0;
      for (int x = 0; x < TC_ROUNDUP_SLOTS; x++) {
        uniform &= div[x] == div[0];
        any |= div[x] != 0;
      }
      if (any && uniform) {
        PUT("%s%s:%u", sep, d->key, div[0]);
      } else if (any) {
        PUT("%s%s:[", sep, d->key);
        for (int x = 0; x < TC_ROUNDUP_SLOTS; x++) PUT("%s%u:%u", x ? "," : "", 1u << x, div[x]);
        PUT("]");
      }
    }
  }
#undef PUT
  return len;
}

const tc_config_key *tc_alloc_config_snapshot_key(int pos) {
  for (size_t k = 0; pos > 0 && k < tc_alloc_config_nkeys; k++)
    if (tc_alloc_config_keys[k].snapshot == pos) return &tc_alloc_config_keys[k];
  return NULL;
}

int64_t tc_alloc_config_int(const tc_alloc_config *cfg, const tc_config_key *d, int slot) {
  if (d->field == TC_KEY_IGNORED) return d->kind == TC_KEY_THREADS ? 1 : 0;
  const void *field = (const char *)cfg + d->field;
  switch (d->kind) {
  case TC_KEY_MB: {
    uint64_t v = *(const uint64_t *)field;
    return v == UINT64_MAX ? -1 : (int64_t)v; /* torch's int64 of its SIZE_MAX */
  }
  case TC_KEY_SEGMENT_MB: return (int64_t)*(const uint64_t *)field;
  case TC_KEY_BOOL: return *(const int *)field != 0;
  case TC_KEY_DIVISIONS: return slot >= 0 && slot < TC_ROUNDUP_SLOTS ? ((const unsigned *)field)[slot] : 0;
  case TC_KEY_POLICY:
  case TC_KEY_COUNT: return *(const int *)field;
  case TC_KEY_FRACTION: /* tc_alloc_config_real */
  case TC_KEY_UNIT:
  case TC_KEY_WHOLE:
  case TC_KEY_BACKEND:
  case TC_KEY_THREADS: break;
  }
  return 0;
}

double tc_alloc_config_real(const tc_alloc_config *cfg, const tc_config_key *d) {
  if (d->field == TC_KEY_IGNORED || (d->kind != TC_KEY_FRACTION && d->kind != TC_KEY_UNIT)) return 0;
  return *(const double *)((const char *)cfg + d->field);
}
