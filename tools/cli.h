/* Subcommands of the `tcuda` tool. Each returns the process exit code.
 *
 * Every subcommand follows one convention (tools/cli_args.c implements it):
 *   0  success; --help prints the usage on stdout. A replay that runs out of
 *      simulated memory succeeds too (the OOM message goes to stderr).
 *   1  a failure at run time: I/O, a malformed input file, CUDA missing or
 *      failing, a bad allocator config in the environment.
 *   2  bad usage: an unknown option, a missing or extra argument, a bad
 *      option value, an option that does not apply. The message and the
 *      usage go to stderr. */
#ifndef TCUDA_CLI_H
#define TCUDA_CLI_H
#include "tcuda.h"
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

int cmd_info(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_rand(int argc, char **argv);
int cmd_viz(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_whatif(int argc, char **argv);
int cmd_compare(int argc, char **argv);

/* Print "tcuda <what>: <message>" for the last failed call and return 1. */
int cli_fail(const char *what);
/* Write s as a JSON string literal. */
void cli_json_string(FILE *f, const char *s);

/* ---- cli_args.c: options ---- */

/* A subcommand's name, synopsis ("usage: tcuda NAME ..." lines) and the
 * rest of its help. --help prints both on stdout; a usage error prints the
 * synopsis on stderr. */
typedef struct cli_cmd {
  const char *name;
  const char *synopsis;
  const char *details;
} cli_cmd;

/* "tcuda NAME: <printf message>", then the synopsis, on stderr; returns 2. */
int cli_usage_error(const cli_cmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The library's last message without its leading "tcuda_function: ", for
 * a message about what the user typed. */
const char *cli_lib_message(void);
/* "tcuda NAME: <printf message>" on stderr; returns 1. */
int cli_error(const cli_cmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* getopt_long with the convention: returns an option's val, or -1 once the
 * options end (argv[optind..] are the operands), or CLI_DONE when the
 * command must return *rc now (--help printed: 0; an unknown option or a
 * missing value reported: 2). longopts must hold {"help", 0, 0, 'h'}. */
#define CLI_DONE (-2)
int cli_getopt(const cli_cmd *c, int argc, char **argv, const char *shortopts, const struct option *longopts,
               int *rc);
/* Operands after the options: at most `max`, else a usage error. Returns
 * how many there are, or -1 after reporting too many. */
int cli_operands(const cli_cmd *c, int argc, char **argv, int max);

/* Values; each returns 1, or 0 after printing a message that names the
 * option and what was typed (the caller then returns 2). */
int cli_parse_u64(const cli_cmd *c, const char *opt, const char *s, uint64_t *v);  /* decimal or 0x hex */
int cli_parse_i64(const cli_cmd *c, const char *opt, const char *s, int64_t *v);
int cli_parse_f64(const cli_cmd *c, const char *opt, const char *s, double *v);
/* --fraction: a number in 0~1 (set_per_process_memory_fraction). */
int cli_parse_fraction(const cli_cmd *c, const char *s, double *v);
/* What the user or a file gave, for a message or a terminal: control bytes
 * (terminal escapes) as \xNN, long text cut with "...". */
const char *cli_shown(const char *s, char *buf, size_t n);
/* The whole file (malloc'd; free it) and its length, at most cap bytes:
 * NULL with errno set (EFBIG past the cap; ENOMEM when memory runs out: the
 * read stops there, never going on from a device that does not end). */
char *cli_read_file(const char *path, uint64_t cap, size_t *len);
/* "-" (standard input) read once, decompressed, at most cap bytes, into a
 * temporary file removed at exit: for commands that read their input more
 * than once (to sniff it, then through the library). Its path, or NULL
 * (tcuda_last_error() says why when tcuda_last_status() is set, else errno). */
const char *cli_spool_stdin(uint64_t cap);
/* 32 hex digits from /dev/urandom for a page's script nonce; -1 if unreadable. */
int cli_make_nonce(char out[33]);
/* A whole number in min..max: `noun` names it in messages ("-n -4 is not a
 * valid count: ..."). */
int cli_parse_whole(const cli_cmd *c, const char *opt, const char *s, const char *noun, uint64_t min, uint64_t max,
                    uint64_t *v);
/* Bytes: plain (decimal or 0x hex), or a number with a unit: kB MB GB TB
 * (powers of 1000) or KiB MiB GiB TiB (powers of 1024); "1.5GiB" works
 * when it is a whole number of bytes. Must be > 0. */
int cli_parse_bytes(const cli_cmd *c, const char *opt, const char *s, uint64_t *v);

/* The allocator config a replay uses: --config if given, else the first of
 * TCUDA_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF, PYTORCH_ALLOC_CONF that is set
 * (the library's order), else the defaults (NULL). The value is checked
 * before anything runs: a bad --config is a usage error (2), a bad variable a
 * run-time error (1) naming it; then *rc is set and 0 returned. */
int cli_alloc_config(const cli_cmd *c, const char *option_value, const char **conf, int *rc);
/* The usage lines that describe cli_alloc_config and --capacity. */
#define CLI_CONFIG_HELP                                                                                  \
  "  --config CONF: allocator options, PYTORCH_CUDA_ALLOC_CONF syntax. Without it the environment's\n" \
  "          TCUDA_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF, else PYTORCH_ALLOC_CONF (the first set)\n" \
  "          is used, as the library does; else the defaults. A bad --config exits 2, a bad\n"         \
  "          variable 1.\n"
#define CLI_CAPACITY_HELP                                                                             \
  "  --capacity BYTES: the simulated device's memory; default an H200's 150109880320 bytes.\n"       \
  "          Plain bytes, or with a unit: 80GB = 80e9, 80GiB = 80*2^30 (kB MB GB TB, KiB MiB GiB TiB).\n"

/* --max-input: the largest input file a command reads (a device such as
 * /dev/zero, or a hostile file, would otherwise fill memory). */
#define CLI_MAX_INPUT_HELP                                                                              \
  "  --max-input BYTES: the largest input file read (default 1GiB); a larger one exits 1.\n"
#define CLI_WORK_BUDGET_HELP                                                                            \
  "  --work-budget N: the work a snapshot may cost, in units (values, blocks, bytes made; default\n"   \
  "          a multiple of its size); past it the command exits 1, naming the limit.\n"

/* The options `tcuda whatif` and `tcuda compare` share: their getopt ids
 * (a command numbers its own from CLI_WO_NEXT), their longopts rows, and
 * their parsing into the library's options (top: --top's count).
 * cli_whatif_option returns 1 when ch was one of them and its value good,
 * 0 when ch is none of them, -1 after a usage message. */
enum { CLI_WO_CAPACITY = 256, CLI_WO_FRACTION, CLI_WO_DEVICE, CLI_WO_MAX_INPUT, CLI_WO_WORK_BUDGET, CLI_WO_TOP,
       CLI_WO_NEXT };
#define CLI_WHATIF_LONGOPTS                                                                                   \
  {"capacity", required_argument, NULL, CLI_WO_CAPACITY}, {"fraction", required_argument, NULL, CLI_WO_FRACTION}, \
      {"device", required_argument, NULL, CLI_WO_DEVICE}, {"max-input", required_argument, NULL, CLI_WO_MAX_INPUT}, \
      {"work-budget", required_argument, NULL, CLI_WO_WORK_BUDGET}, {"top", required_argument, NULL, CLI_WO_TOP}
int cli_whatif_option(const cli_cmd *c, int ch, const char *v, tcuda_whatif_options_t *o, int *top);

/* A replay's OOM observer: torch's message for each request that did not
 * fit, on stderr as "tcuda NAME: trace line N: CUDA out of memory. ...".
 * Pass the cli_cmd as user. */
void cli_print_oom(void *user, unsigned line, const char *message);
/* The same for a snapshot replay: the request's position in the history. */
void cli_print_request_oom(void *user, unsigned request, const char *message);

/* Progress of a long library call on stderr, one line redrawn in place,
 * only when stderr is a terminal (a log or a pipe gets nothing). Pass a
 * cli_progress for user; cli_progress_done clears the line. */
typedef struct cli_progress {
  const char *name; /* "viz", "whatif" */
  int shown, tty;   /* tty: -1 until first asked */
  double last;      /* seconds of the last line drawn */
} cli_progress;
void cli_progress_fn(void *user, const char *stage, uint64_t done, uint64_t total);
void cli_progress_done(cli_progress *p);
#endif
