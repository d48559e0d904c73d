#!/bin/bash
# test_cli.sh METRALE FIXTURES: the program's contract on the cpu backend.
# Every refusal must exit 2 with one message on stderr and leave no output file.
set -u
bin=$1
fix=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

# expect_refusal NAME ARGS...: exit 2, exactly one stderr line, no $tmp/out.st
expect_refusal() {
  local name=$1; shift
  rm -f "$tmp/out.st" "$tmp/err"
  "$bin" "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  local lines
  lines=$(grep -vc '^metrale run: note:' "$tmp/err")
  if [ "$rc" -ne 2 ]; then bad "$name: exit $rc, expected 2: $(head -c 300 "$tmp/err")"
  elif [ "$lines" -ne 1 ]; then bad "$name: $lines stderr lines, expected 1: $(cat "$tmp/err")"
  elif [ -e "$tmp/out.st" ]; then bad "$name: an output file was left behind"
  elif ls "$tmp" | grep -q '^out\.st\.'; then bad "$name: a temporary output file was left behind"
  else ok; fi
}

# expect_success NAME ARGS...
expect_success() {
  local name=$1; shift
  if "$bin" "$@" >"$tmp/stdout" 2>"$tmp/err"; then ok; else bad "$name: exit $?: $(head -c 500 "$tmp/err")"; fi
}

model=$fix/moe_r2
good_in=$fix/moe_r2/io.safetensors
run=(run --backend cpu --layer 1 --output "$tmp/out.st")

# --- the happy paths ------------------------------------------------------------------
expect_success help --help
expect_success run_prefill "${run[@]}" --model "$model" --input "$good_in"
[ -s "$tmp/out.st" ] && ok || bad "run wrote no output"
for mode in decode split:4; do
  for part in mixer layer; do
    expect_success "run_${mode}_${part}" "${run[@]}" --model "$model" --input "$good_in" --mode $mode --part $part
  done
done
# decode steps launched eagerly must write the same file as the default (graphs where the
# backend has them)
cp "$tmp/out.st" "$tmp/out_default.st"
expect_success run_decode_no_graphs "${run[@]}" --model "$model" --input "$good_in" --mode split:4 --part layer --no-graphs
cmp -s "$tmp/out.st" "$tmp/out_default.st" && ok || bad "run --no-graphs wrote another result"
expect_success bench_no_graphs bench --backend cpu --decode 1 --prefill 16 --samples 2 --warmup 1 --no-graphs --json
grep -q '"decode_graphs": false' "$tmp/stdout" && ok || bad "bench --no-graphs did not say so: $(cat "$tmp/stdout")"
bench_layer=(bench --backend cpu --model "$model" --layer 1 --part layer --decode 1 --prefill 16 --samples 2 --warmup 1 --json)
expect_success bench_second_stream "${bench_layer[@]}"
grep -q '"second_stream": true' "$tmp/stdout" && ok || bad "a MoE layer on cpu did not fork its shared expert: $(cat "$tmp/stdout")"
# each case names the kernels one call launched: a layer decode step runs the residual norm
grep -Eq '"kind": "decode", [^]]*"kernels": \{"norm\.rmsnorm[^}]*"norm\.add_rmsnorm": 1' "$tmp/stdout" && ok ||
  bad "bench's layer decode does not list norm.add_rmsnorm among its kernels: $(cat "$tmp/stdout")"
expect_success bench_one_stream "${bench_layer[@]}" --one-stream
grep -q '"second_stream": false' "$tmp/stdout" && ok || bad "bench --one-stream did not say so: $(cat "$tmp/stdout")"
expect_success audit audit
grep -q '^cpu     available' "$tmp/stdout" && ok || bad "audit does not show cpu available"
for b in cuda hip vulkan; do
  grep -Eq "^$b +(available|unavailable): ." "$tmp/stdout" && ok || bad "audit has no line with a reason for $b"
done
expect_success audit_cpu audit --backend cpu
grep -q 'gdn          delta_rule_prefill   required  present' "$tmp/stdout" && ok || bad "audit --backend cpu lacks the kernel table"
grep -q 'early start of the manifest.s early-start rows: no' "$tmp/stdout" && ok || bad "audit --backend cpu does not say the cpu starts nothing early"
grep -q '^  hidden 2048, 16 key / 32 value heads of 128/128' "$tmp/stdout" && ok || bad "audit --backend cpu lacks the paths at the bench shape"
# the cpu backend serves every GEMM launch shape, the split cluster tiles too
grep -q '^  GEMMs of few 128x256 tiles, K split over a cluster: gemm.gemm_bf16_ws_splitk4 gemm.gemm_bf16_ws_splitk8 gemm.gemm_f32in_ws_splitk2 gemm.gemm_bf16_ws64_splitk8 gemm.gemm_f32in_ws64_splitk2$' "$tmp/stdout" && ok ||
  bad "audit --backend cpu does not list the split GEMM kernels"
expect_success demo demo --backend cpu
grep -q 'demo: all checks passed' "$tmp/stdout" && ok || bad "demo did not pass its checks"
expect_success bench_json bench --backend cpu --decode 1 --prefill 16 --samples 3 --warmup 1 --json
grep -q '"results": \[{"kind": "decode"' "$tmp/stdout" && ok || bad "bench --json printed no results: $(cat "$tmp/stdout")"

# --config: random weights at a config's shape (moe_r4's: four value heads a key head), its first
# linear-attention layer; the audit's paths at that shape
expect_success bench_config bench --backend cpu --config "$fix/moe_r4/config.json" --part layer --decode 1 --prefill 8 \
  --samples 1 --warmup 0 --json
grep -q '"shape": {"hidden": 96, "nk": 1, "nv": 4, "dk": 24, "dv": 16}' "$tmp/stdout" && ok ||
  bad "bench --config did not time moe_r4's shape: $(head -c 400 "$tmp/stdout")"
grep -q '"kind": "decode", "n": 1' "$tmp/stdout" && ok || bad "bench --config timed no decode: $(head -c 400 "$tmp/stdout")"
expect_success bench_config_core bench --backend cpu --config "$fix/config/qwen3_5_text.json" --core --prefill 64 \
  --samples 1 --warmup 0 --json
grep -q '"shape": {"nk": 16, "nv": 16, "dk": 128, "dv": 128}' "$tmp/stdout" && ok ||
  bad "bench --config --core did not take qwen3_5_text's heads: $(head -c 400 "$tmp/stdout")"
expect_refusal bench_config_and_model bench --backend cpu --config "$fix/moe_r4/config.json" --model "$model"
expect_refusal bench_config_missing bench --backend cpu --config "$tmp/nope.json" --decode 1 --prefill 8
expect_refusal bench_config_hostile bench --backend cpu --config "$fix/hostile/cfg_qwen3_5_no_text_config.json" --decode 1
expect_refusal bench_config_layer_not_linear bench --backend cpu --config "$fix/moe_r4/config.json" --layer 99 --decode 1
expect_success audit_config audit --backend cpu --config "$fix/moe_r4/config.json"
grep -q "^        at the shape of $fix/moe_r4/config.json, layer 0:" "$tmp/stdout" && ok ||
  bad "audit --config does not describe the config's shape: $(tail -5 "$tmp/stdout")"
expect_refusal audit_config_missing audit --backend cpu --config "$tmp/nope.json"

expect_success bench_model bench --backend cpu --model "$model" --layer 1 --part layer --decode 2 --prefill 8 --samples 3 --warmup 1 --json
grep -q '"weight_bytes": [1-9]' "$tmp/stdout" && ok || bad "bench --model printed no weight bytes: $(cat "$tmp/stdout")"

# --- bad command lines ------------------------------------------------------------------
expect_refusal unknown_command frobnicate
expect_refusal unknown_option run --frob
expect_refusal missing_model run --layer 1 --input "$good_in" --output "$tmp/out.st"
expect_refusal layer_not_number "${run[@]/1/x}" --model "$model" --input "$good_in"
expect_refusal layer_out_of_range run --backend cpu --layer 7 --output "$tmp/out.st" --model "$model" --input "$good_in"
expect_refusal layer_negative run --backend cpu --layer -1 --output "$tmp/out.st" --model "$model" --input "$good_in"
expect_refusal bad_mode "${run[@]}" --model "$model" --input "$good_in" --mode sideways
expect_refusal bad_split "${run[@]}" --model "$model" --input "$good_in" --mode split:x
expect_refusal bad_part "${run[@]}" --model "$model" --input "$good_in" --part ffn
expect_success bench_core_slow bench --backend cpu --core --gates slow --prefill 128 --samples 1 --warmup 0 --json
grep -q '"gates": "slow"' "$tmp/stdout" && ok || bad "bench --core --gates slow did not say so: $(cat "$tmp/stdout")"
grep -q '"kernels": {"gdn_chunked\.delta_rule_prefill_chunked_prep": 1' "$tmp/stdout" && ok ||
  bad "bench --core does not list the chunked core's phase 0 among its kernels: $(cat "$tmp/stdout")"
expect_success bench_core_peer bench --backend cpu --core --gates peer --prefill 128 --samples 1 --warmup 0 --json
grep -q '"gates": "peer"' "$tmp/stdout" && ok || bad "bench --core --gates peer did not say so: $(cat "$tmp/stdout")"
expect_refusal bench_gates_unknown bench --backend cpu --core --gates sometimes --prefill 128
# --seqs: each length as that many sequences, each from a state of its own
expect_success bench_core_seqs bench --backend cpu --core --seqs 3 --prefill 200 --samples 1 --warmup 0 --json
grep -q '"sequences": 3' "$tmp/stdout" && ok || bad "bench --core --seqs 3 did not say so: $(cat "$tmp/stdout")"
grep -q '"n": 200' "$tmp/stdout" && ok || bad "bench --core --seqs 3 --prefill 200 timed no 200 tokens: $(cat "$tmp/stdout")"
expect_success bench_seqs_mixer bench --backend cpu --decode 1 --prefill 16 --seqs 2 --samples 1 --warmup 0 --json
grep -q '"prefill_sequences": 2' "$tmp/stdout" && ok || bad "bench --seqs 2 did not say so: $(cat "$tmp/stdout")"
expect_refusal bench_seqs_past_prefill bench --backend cpu --seqs 9 --decode 1 --prefill 8
# --new-slots: decode steps alternate between two slot lists
expect_success bench_new_slots bench --backend cpu --decode 2 --prefill 8 --new-slots --samples 2 --warmup 1 --json
grep -q '"new_slots": true' "$tmp/stdout" && ok || bad "bench --new-slots did not say so: $(cat "$tmp/stdout")"
expect_refusal bench_new_slots_core bench --backend cpu --core --new-slots --prefill 64
# --cycle: one more case, decode steps going round the --decode batches
expect_success bench_cycle bench --backend cpu --decode 1,2,3 --prefill 8 --cycle --samples 2 --warmup 1 --json
grep -q '"kind": "cycle", "n": 3' "$tmp/stdout" && ok || bad "bench --cycle timed no cycle of 3 batches: $(cat "$tmp/stdout")"
expect_refusal bench_cycle_core bench --backend cpu --core --cycle --prefill 64
expect_refusal bench_seqs_zero bench --backend cpu --core --seqs 0 --prefill 128
expect_refusal bench_seqs_past_tokens bench --backend cpu --core --seqs 9 --prefill 8
"$bin" bench --backend cpu --core --seqs 9 --prefill 64,8 >"$tmp/stdout" 2>/dev/null
[ ! -s "$tmp/stdout" ] && ok || bad "bench --core refused --seqs 9 --prefill 64,8 after printing: $(cat "$tmp/stdout")"
expect_refusal bench_gates_without_core bench --backend cpu --gates slow --decode 1 --prefill 8
expect_refusal bench_model_missing bench --backend cpu --model "$tmp/nope" --decode 1 --prefill 8
expect_refusal bench_layer_without_model bench --backend cpu --layer 1
expect_refusal bench_layer_out_of_range bench --backend cpu --model "$model" --layer 9 --decode 1 --prefill 8
expect_refusal unknown_backend run --backend tpu --layer 1 --output "$tmp/out.st" --model "$model" --input "$good_in"
expect_refusal missing_model_dir "${run[@]}" --model "$tmp/nope" --input "$good_in"
expect_refusal missing_input "${run[@]}" --model "$model" --input "$tmp/nope.st"
expect_refusal output_dir_missing run --backend cpu --layer 1 --model "$model" --input "$good_in" --output "$tmp/no/dir/out.st"
# an input of the wrong hidden size: another fixture's input
expect_refusal wrong_hidden "${run[@]}" --model "$model" --input "$fix/dense_r1/io.safetensors"
# a checkpoint whose layer tensors have the wrong shapes: dense_r1's weights under moe_r2's config
mkdir -p "$tmp/mixed"
cp "$fix"/dense_r1/*.safetensors "$fix"/dense_r1/model.safetensors.index.json "$tmp/mixed/"
cp "$fix/moe_r2/config.json" "$tmp/mixed/"
expect_refusal wrong_shapes run --backend cpu --layer 0 --output "$tmp/out.st" --model "$tmp/mixed" --input "$good_in"

# --- the hostile corpus ---------------------------------------------------------------
corpus=$fix/hostile
for f in "$corpus"/cfg_*.json; do
  d=$tmp/cfg_model
  rm -rf "$d"; mkdir -p "$d"
  cp "$model"/*.safetensors "$model"/model.safetensors.index.json "$d/"
  cp "$f" "$d/config.json"
  expect_refusal "$(basename "$f")" "${run[@]}" --model "$d" --input "$good_in"
done
for d in "$corpus"/ckpt_*/; do
  m=$tmp/ckpt_model
  rm -rf "$m"; cp -r "$d" "$m"; cp "$model/config.json" "$m/"
  expect_refusal "$(basename "$d")" "${run[@]}" --model "$m" --input "$good_in"
done
for f in "$corpus"/st_*.safetensors; do
  expect_refusal "input $(basename "$f")" "${run[@]}" --model "$model" --input "$f"
  m=$tmp/st_model
  rm -rf "$m"; mkdir -p "$m"; cp "$model/config.json" "$m/"; cp "$f" "$m/model.safetensors"
  expect_refusal "weights $(basename "$f")" "${run[@]}" --model "$m" --input "$good_in"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
