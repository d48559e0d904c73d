/* The layer against transformers' Qwen3NextDecoderLayer (tests/fixtures/README.md):
 * every part (mixer, whole layer), every mode (prefill, decode, split), one sequence
 * and a batch; output, recurrent state and conv state within relative L2 1.5e-2. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "layer_util.h"

typedef struct mode_case {
  const char *name;
  run_mode mode;
  uint32_t split;
} mode_case;

static const mode_case modes[] = {
    {"prefill", MODE_PREFILL, 0},
    {"decode", MODE_DECODE, 0},
    {"split:3", MODE_SPLIT, 3},
    {"split:17", MODE_SPLIT, 17},
};

/* Runs one part in every mode, for sequences named by suffixes ("" or ".0", ".1", ...). */
static void check_part(metrale_device *dev, lt_fixture *f, metrale_part part, int batch) {
  const char *in_name = part == METRALE_PART_MIXER ? "mixer_input" : "input";
  const char *out_name = part == METRALE_PART_MIXER ? "mixer_output" : "layer_output";
  uint32_t nseq = 0, lens[16];
  float *seq_x[16];
  char name[64];
  for (;;) {
    if (batch) snprintf(name, sizeof name, "%s.%u", in_name, nseq);
    else snprintf(name, sizeof name, "%s", in_name);
    if (!metrale_safetensors_find(f->io, name) || nseq == 16) break;
    uint64_t n;
    seq_x[nseq] = lt_read(f, name, &n);
    lens[nseq] = (uint32_t)(n / f->cfg.hidden_size);
    nseq++;
    if (!batch) break;
  }
  cr_assert(nseq > 0, "fixture %s lacks %s", f->dir, in_name);
  uint64_t T = 0, H = f->cfg.hidden_size;
  for (uint32_t i = 0; i < nseq; i++) T += lens[i];
  float *x = malloc(T * H * sizeof *x);
  for (uint32_t i = 0, at = 0; i < nseq; at += lens[i], i++)
    for (uint64_t e = 0; e < lens[i] * H; e++) x[at * H + e] = seq_x[i][e];

  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    lt_run r;
    lt_run_init(&r, dev, f, &f->cfg, 0, part, x, lens, nseq, nseq);
    lt_run_mode(&r, modes[m].mode, modes[m].split);
    lt_run_read_states(&r);
    for (uint32_t i = 0; i < nseq; i++) {
      const char *sfx = batch ? "." : "";
      char idx[16] = "";
      if (batch) snprintf(idx, sizeof idx, "%u", i);
      char what[1024], tname[64];
      uint64_t n;
      snprintf(tname, sizeof tname, "%s%s%s", out_name, sfx, idx);
      float *want = lt_read(f, tname, &n);
      snprintf(what, sizeof what, "%s %s %s %s", f->dir, part == METRALE_PART_MIXER ? "mixer" : "layer",
               modes[m].name, tname);
      lt_expect_close(what, r.c.y + r.c.first[i] * H, want, n, LAYER_TOL);
      free(want);
      snprintf(tname, sizeof tname, "recurrent_state%s%s", sfx, idx);
      want = lt_read(f, tname, &n);
      snprintf(what, sizeof what, "%s %s %s", f->dir, modes[m].name, tname);
      lt_expect_close(what, r.rec + r.rf * i, want, n, LAYER_TOL);
      free(want);
      snprintf(tname, sizeof tname, "conv_state%s%s", sfx, idx);
      want = lt_read(f, tname, &n);
      snprintf(what, sizeof what, "%s %s %s", f->dir, modes[m].name, tname);
      lt_expect_close(what, r.conv + r.cf * i, want, n, LAYER_TOL);
      free(want);
    }
    lt_run_free(&r);
  }
  for (uint32_t i = 0; i < nseq; i++) free(seq_x[i]);
  free(x);
}

static void check_fixture(const char *name, uint32_t layer, metrale_part part) {
  metrale_device *dev = lt_open_device();
  lt_fixture f;
  lt_fixture_open(&f, name, layer);
  check_part(dev, &f, part, 0);
  check_part(dev, &f, part, 1);
  lt_fixture_close(&f);
  metrale_device_destroy(dev);
}

/* MoE, nv = 2 nk, the layer under test is layer 1 (layer 0 is a decoy) */
Test(fixtures, moe_r2_mixer) { check_fixture("moe_r2", 1, METRALE_PART_MIXER); }
Test(fixtures, moe_r2_layer) { check_fixture("moe_r2", 1, METRALE_PART_LAYER); }
/* dense MLP, nv == nk, a sequence of one token */
Test(fixtures, dense_r1_mixer) { check_fixture("dense_r1", 0, METRALE_PART_MIXER); }
Test(fixtures, dense_r1_layer) { check_fixture("dense_r1", 0, METRALE_PART_LAYER); }
/* MoE, nv = 4 nk, conv width 3, layer 2 of 3 */
Test(fixtures, moe_r4_mixer) { check_fixture("moe_r4", 2, METRALE_PART_MIXER); }
Test(fixtures, moe_r4_layer) { check_fixture("moe_r4", 2, METRALE_PART_LAYER); }
/* MoE, nv = 2 nk, dv = 48, sequences of 64 tokens and more: where a backend has the chunked
 * delta-rule prefill (kernels.def delta_rule_prefill_chunked), prefill takes it here (the
 * ops take it from 64 tokens a sequence on average: one of 200; 64, 130, 7), across chunk
 * boundaries and a partial last chunk; the split modes and the other fixtures run the
 * sequential kernel, except where the fp16 chunked kernel runs (from 32 tokens on average:
 * moe_r2's 40 and dense_r1's 50 tokens alone take it there too). */
Test(fixtures, long_r2_mixer) { check_fixture("long_r2", 1, METRALE_PART_MIXER); }
Test(fixtures, long_r2_layer) { check_fixture("long_r2", 1, METRALE_PART_LAYER); }
