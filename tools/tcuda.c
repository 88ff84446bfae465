/* tcuda: command-line front end. */
#include "cli.h"
#include "inspect/json.h"
#include <string.h>

typedef struct { const char *name; int (*fn)(int, char **); const char *help; } command;

static const command commands[] = {
  {"info", cmd_info, "versions, devices and memory (--json)"},
  {"demo", cmd_demo, "a short tour: device, stream, allocator, stats"},
  {"replay", cmd_replay, "replay an allocation trace (GPU or --simulate), JSON per checkpoint"},
  {"snapshot", cmd_snapshot, "memory summary or snapshot (pickle/JSON), of a simulated trace or this process"},
  {"viz", cmd_viz, "one self-contained HTML page from a memory snapshot (timeline, segments, summary)"},
  {"rand", cmd_rand, "torch-identical random numbers (rand, randn, randint, random_) as raw bytes"},
};

int cli_fail(const char *what) {
  fprintf(stderr, "tcuda %s: %s\n", what, tcuda_last_error());
  return 1;
}

/* The library's escaping rules (src/inspect/json.h), straight to f. */
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
  fprintf(f, "usage: tcuda <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
  if (argc < 2) { usage(stderr); return 2; }
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) { printf("tcuda %s\n", tcuda_version_string()); return 0; }
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "tcuda: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
