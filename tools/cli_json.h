/* Reading a JSON document of the library back (cli_json.c), for the
 * subcommands that print tables from it: the text, the JSON and the page
 * then cannot disagree. */
#ifndef TCUDA_CLI_JSON_H
#define TCUDA_CLI_JSON_H
#include <stddef.h>
#include <stdio.h>

typedef struct jv {
  char kind;         /* 'o' object, 'a' array, 's' string, 'n' number, 't' true, 'f' false, 'z' null */
  char *text;        /* 's': the decoded string; 'n': the number as written */
  size_t n;          /* items */
  struct jv *items;
  char **keys;       /* 'o' */
} jv;

/* text into *v (free it with jv_free, also after a failure): 1, or 0 when
 * malformed, nested past 64 levels or out of memory. */
int jv_parse(const char *text, jv *v);
void jv_free(jv *v);
/* o[key]; NULL when o is no object or lacks it. */
const jv *jv_get(const jv *o, const char *key);
int jv_is_num(const jv *v);
double jv_num(const jv *v);          /* 0 when no number */
unsigned long long jv_u64(const jv *v); /* 0 when no number or negative */
long long jv_i64(const jv *v);
const char *jv_str(const jv *v);     /* "" when no string */

/* ---- whatif_explain.c ---- */

/* Bytes for a table: "761.3 MiB", whole bytes under 1 KiB. */
const char *cli_bytes(unsigned long long b, char *buf, size_t n);
/* The document's "explain" object as text: per instant (peak reserved,
 * peak allocated, first OOM) its split of reserved bytes and its top
 * holders (at most top), then the first OOM's stack. */
void cli_explain_print(FILE *o, const jv *explain, int top);
/* Whether an "explain" object says any allocation had a stack. */
int cli_stacks_recorded(const jv *explain);
/* A holder's stack on one line: innermost frame first, callers after '<';
 * a holder without one says why, by whether the snapshot had stacks. */
void cli_holder_key(FILE *o, const jv *holder, int stacks_recorded);
/* One line per holder of a stack's frames: "  a.py:3:f <- b.py:9:g". */
void cli_frames_print(FILE *o, const char *indent, const jv *frames);

#endif
