/* Shared plumbing of the metrale program's commands. */
#ifndef METRALE_CLI_H
#define METRALE_CLI_H

#include <stdint.h>

#include "metrale/metrale.h"

/* Exit statuses: 0 success, 1 a check the command makes failed (demo), 2 bad input or
 * any other error (DESIGN.md section 6). */
enum { CLI_OK = 0, CLI_CHECK_FAILED = 1, CLI_ERROR = 2 };

typedef struct cli_opt {
  const char *name; /* "--model" */
  int takes_value;
  const char *value; /* filled by cli_parse; "1" for flags present */
  const char *help;
} cli_opt;

/* Parses --name value / --name=value / --flag.  Unknown options, missing values and
 * stray arguments print one message and return CLI_ERROR; --help prints usage and
 * returns -1 (caller exits 0). */
int cli_parse(const char *cmd, const char *usage, cli_opt *opts, int nopts, int argc, char **argv);
/* Prints "metrale CMD: CODE: message" for an error status, frees it, returns CLI_ERROR. */
int cli_fail(const char *cmd, metrale_status s);
/* Strict unsigned integer parsing (whole string, base 10, in range). */
metrale_status cli_parse_u32(const char *what, const char *text, uint32_t *out);
/* A comma-separated list of positive integers. */
metrale_status cli_parse_u32_list(const char *what, const char *text, uint32_t *out, int cap, int *count);
/* Peak resident set size of the process in bytes (VmHWM), and a reset of it. */
uint64_t cli_peak_rss(void);
uint64_t cli_current_rss(void);
void cli_reset_peak_rss(void);
double cli_now(void); /* monotonic seconds */

int cmd_audit(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
