#!/usr/bin/env bash
# Runs each libFuzzer target of a PCC_FUZZ build for a while, from seed corpora
# made of the committed models, IR tests, tensor files, freshly compiled plans
# and names that try to leave the comment generated code prints them in. A crash, a sanitizer report, a timeout or running out of memory
# leaves its input in BUILD/fuzz/artifacts and makes this script fail.
#   tools/fuzz.sh BUILD_SAN [SECONDS_PER_TARGET] [TARGET...]
# (`make fuzz FUZZ_SECONDS=1800` for a long run.)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: tools/fuzz.sh BUILD_SAN [SECONDS] [TARGET...]}" && pwd)
seconds=${2:-60}
shift $(( $# >= 2 ? 2 : $# ))
targets=("$@")
((${#targets[@]})) || targets=(onnx_import plan_reader ir_parser tensor_file codegen_names)

work=$build/fuzz
mkdir -p "$work/artifacts"

# --- seed corpora (rebuilt every run; the fuzzers add what they find to
# corpus/<target>, which is kept between runs)
seeds=$work/seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{onnx_import,plan_reader,ir_parser,tensor_file,codegen_names}
# Names (and, after a NUL byte, a Gelu `approximate` string) that try to leave
# the comment they are printed in: line breaks, a line splice, a trigraph, "*/".
printf 'fused_add_relu' > "$seeds/codegen_names/plain"
printf 'x\n__attribute__((constructor)) static void f(){}' > "$seeds/codegen_names/newline"
printf 'a\\\nb' > "$seeds/codegen_names/splice"
printf 'x\r#include "/etc/passwd"' > "$seeds/codegen_names/cr_include"
printf 'x??/\nint y;' > "$seeds/codegen_names/trigraph"
printf 'x */ int y; /*\0tanh' > "$seeds/codegen_names/block_end"
cp "$here"/models/*.onnx "$seeds/onnx_import/"
for m in "$here"/models/exported/*.onnx; do
  [ "$(stat -c %s "$m")" -le 2000000 ] && cp "$m" "$seeds/onnx_import/"
done
find "$here/tests/lit" -name '*.ir' -exec cp {} "$seeds/ir_parser/" \;
find "$here/tests/data" -name '*.pb' | while read -r f; do
  cp "$f" "$seeds/tensor_file/$(echo "$f" | md5sum | cut -c1-12).pb"
done
# Plans: plan.pb of the bundled models at a few device counts and strategies;
# the weights of the first one back the plan-reader target (PCC_FUZZ_BUNDLE):
# a single rank, so that the target's run of rank 0 has no collective to refuse.
bundle=""
for spec in "mlp 1" "mlp 2" "mlp 2 tp=2" "gpt2_tiny 4 dp=2,tp=2" "cnn_small 2"; do
  read -r model gpus strategy <<< "$spec"
  out=$work/plans/$model-$gpus-${strategy//[=,]/_}.pcc
  rm -rf "$out"
  "$build/pcc" "$here/models/$model.onnx" --batch 4 --gpus "$gpus" \
      ${strategy:+--strategy "$strategy"} -o "$out" --quiet
  cp "$out/plan.pb" "$seeds/plan_reader/$(basename "$out" .pcc).pb"
  [ -n "$bundle" ] || bundle=$out
done
# A generation plan (its KV cache as state bindings), split over two ranks.
out=$work/plans/llama-generate.pcc
rm -rf "$out"
"$build/pcc" "$here/models/exported/decoders/llama.ts.onnx" --batch 2 --max-context 8 --gpus 2 \
    --strategy tp=2 -o "$out" --quiet
cp "$out/plan.pb" "$seeds/plan_reader/llama-generate.pb"
export PCC_FUZZ_BUNDLE=$bundle

status=0
for t in "${targets[@]}"; do
  bin=$build/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz: $bin not built (configure with -DPCC_FUZZ=ON)" >&2; exit 2; }
  corpus=$work/corpus/$t
  mkdir -p "$corpus"
  echo "fuzz: $t for ${seconds}s (corpus $corpus)"
  set +e
  # -timeout: one input may legitimately take seconds under ASan (the IR
  # parser fills a `const` of 10^8 elements with seeded values); a minute
  # still catches a hang.
  "$bin" "$corpus" "$seeds/$t" -max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 \
      -max_len=2000000 -artifact_prefix="$work/artifacts/$t-" -print_final_stats=1 \
      > "$work/$t.log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$' || echo "?")
  if [ $rc -ne 0 ]; then
    echo "fuzz: $t FAILED (exit $rc) after $runs runs; see $work/$t.log and $work/artifacts/"
    grep -m5 -E 'ERROR|SUMMARY|==[0-9]+==' "$work/$t.log" || true
    status=1
  else
    echo "fuzz: $t ok, $runs runs in ${seconds}s"
  fi
done
exit $status
