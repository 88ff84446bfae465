/* tcuda: command-line front end. */
#include "cli.h"
#include "inspect/jsonwrite.h"
#include <string.h>

typedef struct { const char *name; int (*fn)(int, char **); const char *help; } command;

static const command commands[] = {
  {"info", cmd_info, "versions, devices and memory (--json)"},
  {"demo", cmd_demo, "a short tour: device, stream, allocator, stats"},
  {"replay", cmd_replay, "replay an allocation trace (GPU or --simulate), JSON per checkpoint"},
  {"snapshot", cmd_snapshot, "memory summary or snapshot (pickle/JSON), of a simulated trace or this process"},
  {"whatif", cmd_whatif, "a torch snapshot's history under other allocator configs or a limit (table, JSON, HTML)"},
  {"compare", cmd_compare, "two torch snapshots (before, after a change): peaks, OOMs, what holds the memory"},
  {"viz", cmd_viz, "one self-contained HTML page from a memory snapshot (timeline, segments, summary)"},
  {"rand", cmd_rand, "torch-identical random numbers (rand, randn, randint, random_) as raw bytes"},
};

int cli_fail(const char *what) {
  fprintf(stderr, "tcuda %s: %s\n", what, tcuda_last_error());
  return 1;
}

/* The library's escaping rules (src/inspect/jsonwrite.h), straight to f. */
void cli_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    char e[6];
    size_t used;
    fwrite(e, 1, tc_json_escape_char(p, e, &used), f);
    p += used;
  }
  fputc('"', f);
}

static void usage(FILE *f) {
  fprintf(f, "usage: tcuda <command> [options]    (tcuda <command> --help, or tcuda help <command>)\n\n"
             "commands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
  fprintf(f, "\nexit status, for every command:\n"
             "  0  success (--help too; a replay that runs out of simulated memory succeeds, with the\n"
             "     OOM message on stderr)\n"
             "  1  a failure at run time: I/O, a malformed input file, no GPU or a CUDA error, a bad\n"
             "     allocator config in the environment\n"
             "  2  bad usage: an unknown option, a missing or extra argument, a bad option value, an\n"
             "     option that does not apply (the message and the usage go to stderr)\n");
}

static const command *find(const char *name) {
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    if (!strcmp(name, commands[i].name)) return &commands[i];
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) { usage(stderr); return CLI_USAGE; }
  const char *a = argv[1];
  if (!strcmp(a, "-h") || !strcmp(a, "--help") || (!strcmp(a, "help") && argc == 2)) {
    usage(stdout);
    return fflush(stdout) ? CLI_FAIL : CLI_OK;
  }
  if (!strcmp(a, "help")) { /* tcuda help CMD: CMD --help */
    const command *c = argc == 3 ? find(argv[2]) : NULL;
    if (!c) {
      fprintf(stderr, argc == 3 ? "tcuda: unknown command '%s'\n" : "tcuda help: one command, please\n", argv[2]);
      usage(stderr);
      return CLI_USAGE;
    }
    char *h[] = {argv[2], "--help", NULL};
    return c->fn(2, h);
  }
  if (!strcmp(a, "--version")) { printf("tcuda %s\n", tcuda_version_string()); return CLI_OK; }
  const command *c = find(a);
  if (c) return c->fn(argc - 1, argv + 1);
  fprintf(stderr, "tcuda: unknown command '%s'\n", a);
  usage(stderr);
  return CLI_USAGE;
}
