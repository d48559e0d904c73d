/* metrale: run, audit, demo and benchmark the Qwen3 SSM layer. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
  fprintf(f,
          "metrale %s: the Qwen3-Next / Qwen3.5 Gated DeltaNet decoder layer on any GPU\n\n"
          "usage: metrale COMMAND [options]   (metrale COMMAND --help for its options)\n\n"
          "commands:\n"
          "  demo    seed a small layer, run prefill + decode, check them against each other\n"
          "          and against the CPU reference (needs no files)\n"
          "  run     run one layer of an HF checkpoint on a safetensors input\n"
          "  audit   show the backends, and which kernels a backend provides\n"
          "  bench   time the Qwen3-Next-80B-A3B layer shape against the device's ceilings\n\n"
          "backend selection: --backend auto|cpu|cuda|hip|vulkan, or METRALE_BACKEND\n"
          "METRALE_NO_FP16=1: no fp16 products (f32-class projections and delta rule)\n"
          "METRALE_NO_EARLY_START=1: no kernel starts before the one before it ends\n",
          METRALE_VERSION_STRING);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return CLI_ERROR;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    usage(stdout);
    return CLI_OK;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("metrale %s\n", METRALE_VERSION_STRING);
    return CLI_OK;
  }
  if (strcmp(cmd, "run") == 0) return cmd_run(argc - 1, argv + 1);
  if (strcmp(cmd, "audit") == 0) return cmd_audit(argc - 1, argv + 1);
  if (strcmp(cmd, "demo") == 0) return cmd_demo(argc - 1, argv + 1);
  if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 1, argv + 1);
  fprintf(stderr, "metrale: unknown command '%s' (try metrale --help)\n", cmd);
  return CLI_ERROR;
}
