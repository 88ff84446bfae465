/* Subcommands of the `tcuda` tool. Each returns the process exit code. */
#ifndef TCUDA_CLI_H
#define TCUDA_CLI_H
#include "tcuda.h"
#include <stdio.h>

int cmd_info(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_rand(int argc, char **argv);
int cmd_viz(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);

/* Print "tcuda: <message>" for the last failed call and return 1. */
int cli_fail(const char *what);
/* Write s as a JSON string literal. */
void cli_json_string(FILE *f, const char *s);
#endif
