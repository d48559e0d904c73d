#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void print_usage(FILE *f, const char *cmd, const char *usage, const cli_opt *opts, int nopts) {
  fprintf(f, "usage: metrale %s %s\n\noptions:\n", cmd, usage);
  for (int i = 0; i < nopts; i++)
    fprintf(f, "  %-20s %s\n", opts[i].name, opts[i].help);
  fprintf(f, "  %-20s %s\n", "--help", "show this help");
}

int cli_parse(const char *cmd, const char *usage, cli_opt *opts, int nopts, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      print_usage(stdout, cmd, usage, opts, nopts);
      return -1;
    }
    const char *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    int found = 0;
    for (int k = 0; k < nopts && !found; k++) {
      if (strlen(opts[k].name) != len || strncmp(opts[k].name, a, len) != 0) continue;
      found = 1;
      if (!opts[k].takes_value) {
        if (eq) {
          fprintf(stderr, "metrale %s: %s takes no value\n", cmd, opts[k].name);
          return CLI_ERROR;
        }
        opts[k].value = "1";
      } else if (eq) {
        opts[k].value = eq + 1;
      } else if (i + 1 < argc) {
        opts[k].value = argv[++i];
      } else {
        fprintf(stderr, "metrale %s: %s needs a value\n", cmd, opts[k].name);
        return CLI_ERROR;
      }
    }
    if (!found) {
      fprintf(stderr, "metrale %s: unknown option '%s' (try metrale %s --help)\n", cmd, a, cmd);
      return CLI_ERROR;
    }
  }
  return CLI_OK;
}

int cli_fail(const char *cmd, metrale_status s) {
  fprintf(stderr, "metrale %s: %s: %s\n", cmd, metrale_code_name(metrale_status_code(s)),
          metrale_status_message(s));
  metrale_status_free(s);
  return CLI_ERROR;
}

metrale_status cli_parse_u32(const char *what, const char *text, uint32_t *out) {
  if (!text || !*text || *text == '-' || *text == '+' || *text == ' ')
    return METRALE_ERROR(INVALID_ARGUMENT, "%s must be a non-negative integer, got '%s'", what, text ? text : "");
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || *end || v > UINT32_MAX)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s must be an integer in 0..%u, got '%s'", what, UINT32_MAX, text);
  *out = (uint32_t)v;
  return METRALE_OK;
}

metrale_status cli_parse_u32_list(const char *what, const char *text, uint32_t *out, int cap, int *count) {
  char buf[512];
  if (!text || strlen(text) >= sizeof buf) return METRALE_ERROR(INVALID_ARGUMENT, "%s: bad list", what);
  snprintf(buf, sizeof buf, "%s", text);
  int n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (n >= cap) return METRALE_ERROR(INVALID_ARGUMENT, "%s: at most %d values", what, cap);
    METRALE_RETURN_IF_ERROR(cli_parse_u32(what, tok, &out[n]));
    if (out[n] == 0) return METRALE_ERROR(INVALID_ARGUMENT, "%s: values must be positive", what);
    n++;
  }
  if (n == 0) return METRALE_ERROR(INVALID_ARGUMENT, "%s: empty list", what);
  *count = n;
  return METRALE_OK;
}

static uint64_t status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  size_t klen = strlen(key);
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, key, klen) == 0) {
      kb = strtoull(line + klen, NULL, 10);
      break;
    }
  }
  fclose(f);
  return kb * 1024;
}

uint64_t cli_peak_rss(void) { return status_kb("VmHWM:"); }
uint64_t cli_current_rss(void) { return status_kb("VmRSS:"); }

void cli_reset_peak_rss(void) {
  /* "5" resets the peak RSS counter (Linux >= 4.0) */
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f) return;
  fputs("5", f);
  fclose(f);
}

double cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
