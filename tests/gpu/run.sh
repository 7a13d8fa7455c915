#!/usr/bin/env bash
# The GPU check (`make gpu-check`; docs/runtime.md#cuda-backend), for a machine
# with one NVIDIA GPU:
#   tests/gpu/run.sh [BUILD_DIR]        (default: build-gpu)
#  1. Builds pcc and pcc-run with the CUDA toolkit (PCC_WITH_CUDA=ON, tests
#     off), running tools/setup.sh once if the configure fails for want of
#     the libraries it installs; builds tests/gpu/gpu_bench.cpp.
#  2. Compiles every e2e model and committed export at --gpus 1 with
#     `pcc --target cuda` and runs it with `pcc-run --backend cuda --check`
#     (float32 tolerance: pcc-run's defaults), counting the op kinds left
#     on the CPU fallback (--profile).
#  3. Bandwidth: one large fused elementwise kernel (tests/gpu/
#     make_elementwise.py, 512 MiB in and out) against the measured
#     device-to-device copy bandwidth (goal: at least 80%).
#  4. cuBLASLt GEMM TFLOP/s (f32 and TF32, 8192^3); convolution: the ResNet
#     export's time with Conv on cuDNN against Conv on the CPU fallback
#     (PCC_CUDNN_LIB naming no library), and how many Conv calls each placed.
#  5. BERT-base and ResNet-50 against onnxruntime-gpu when both the full-size
#     exports ($PCC_PARITY_CACHE, else BUILD/parity-cache, from `make parity`)
#     and onnxruntime's CUDA provider are there; else one line saying which
#     is missing.
#  6. One table. Exit 0 when every run matched its reference, 1 otherwise,
#     2 when there is no GPU (nvidia-smi fails) or no toolkit.
# The checks (2-5) are bounded to about 6 minutes; the build is timed apart.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
cuda=${CUDA_HOME:-/usr/local/cuda}
jobs=$(nproc)
say() { echo "gpu-check: $*"; }
die() { echo "gpu-check: FAIL: $*" >&2; exit 1; }

if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no GPU (nvidia-smi failed): nothing to check here" >&2
  exit 2
fi
if [ ! -f "$cuda/include/cuda.h" ]; then
  echo "gpu-check: no CUDA toolkit at $cuda (set CUDA_HOME)" >&2
  exit 2
fi
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
say "GPU: $gpu"

# --- 1. Build.
t0=$(date +%s)
mkdir -p "$build"
configure() {
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPCC_WITH_CUDA=ON -DPCC_BUILD_TESTS=OFF \
    >"$build/gpu-configure.log" 2>&1
}
if ! configure; then
  say "configure failed; running tools/setup.sh once (see $build/gpu-configure.log)"
  bash "$root/tools/setup.sh" "$build" >"$build/gpu-setup.log" 2>&1 || die "tools/setup.sh failed (see $build/gpu-setup.log)"
  configure || { tail -20 "$build/gpu-configure.log" >&2; die "cmake configure failed"; }
fi
cmake --build "$build" -j"$jobs" --target pcc pcc-run >"$build/gpu-build.log" 2>&1 \
  || { tail -30 "$build/gpu-build.log" >&2; die "build of pcc and pcc-run failed"; }
g++ -O2 -std=c++17 -I"$cuda/include" "$root/tests/gpu/gpu_bench.cpp" -o "$build/gpu_bench" \
  -L"$cuda/lib64" -L"$cuda/lib64/stubs" -lcublasLt -lcuda 2>"$build/gpu-bench-build.log" \
  || { cat "$build/gpu-bench-build.log" >&2; die "build of gpu_bench failed"; }
build_s=$(( $(date +%s) - t0 ))
say "built in ${build_s} s"

t1=$(date +%s)
deadline=$(( t1 + 330 ))
left() { local l=$(( deadline - $(date +%s) )); [ "$l" -lt 10 ] && l=10; echo "$l"; }
work=$(mktemp -d "${TMPDIR:-/tmp}/pcc-gpu-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
export PCC_CACHE_DIR="$work/cache"
py=python3
[ -x "$root/build/venv/bin/python" ] && py="$root/build/venv/bin/python"
[ -x "$build/venv/bin/python" ] && py="$build/venv/bin/python"

rows=()
failed=0
row() { rows+=("$(printf '%-34s %-10s %s' "$1" "$2" "$3")"); }

# --- 2. Every e2e model and committed export on the CUDA backend.
batch_of() {  # the manifest's batch of export $1 (key), else 4
  "$py" - "$root/models/exported/manifest.json" "$1" <<'PY' 2>/dev/null || echo 4
import json, sys
try:
    e = {f"{x['name']}.{x['exporter']}": x for x in json.load(open(sys.argv[1]))["exports"]}
    print(e.get(sys.argv[2], {}).get("batch") or 4)
except Exception:
    print(4)
PY
}
run_model() {  # name model batch [inputs dir]
  local name=$1 model=$2 batch=$3 data=${4:-} plan="$work/$1.pcc" out="$work/$1.out"
  local inputs=()
  [ -n "$data" ] && [ -d "$data" ] && inputs=(--inputs "$data")
  if ! timeout "$(left)" "$build/pcc" "$model" --gpus 1 --target cuda -o "$plan" --quiet >"$out" 2>&1 &&
     ! timeout "$(left)" "$build/pcc" "$model" --gpus 1 --batch "$batch" --target cuda -o "$plan" --quiet >"$out" 2>&1; then
    echo "gpu-check: FAIL: $name: pcc --target cuda: $(tail -1 "$out")" >&2
    row "$name" FAIL "does not compile"
    failed=1
    return
  fi
  if timeout "$(left)" "$build/pcc-run" "$plan" --backend cuda --check --profile "${inputs[@]}" >"$out" 2>&1; then
    local ms fb
    ms=$(sed -n 's/^rank 0: \([0-9.]*\) ms$/\1/p' "$out" | head -1)
    fb=$(grep -c '(cpu fallback' "$out" || true)
    row "$name" ok "${ms:-?} ms, ${fb} op kinds on the CPU fallback"
  else
    echo "gpu-check: FAIL: $name: pcc-run --backend cuda --check:" >&2
    tail -5 "$out" >&2
    row "$name" FAIL "$(tail -1 "$out" | cut -c1-90)"
    failed=1
  fi
}
for m in "$root"/models/*.onnx; do
  run_model "$(basename "$m" .onnx)" "$m" 4
done
for m in "$root"/models/exported/*.onnx; do
  [ -e "$m" ] || continue
  key=$(basename "$m" .onnx)
  run_model "$key" "$m" "$(batch_of "$key")" "${m%.onnx}"
done

# --- 3. Fused elementwise bandwidth against device-to-device copies.
copy=$(timeout "$(left)" "$build/gpu_bench" copy 512 | sed -n 's/^copy_gbs //p') || copy=""
if [ -z "$copy" ]; then
  row "d2d copy bandwidth" FAIL "gpu_bench copy failed"
  failed=1
elif ! "$py" -c "import onnx" 2>/dev/null; then
  row "d2d copy bandwidth" ok "$copy GB/s"
  row "fused elementwise bandwidth" skipped "no Python with onnx to write the model"
else
  row "d2d copy bandwidth" ok "$copy GB/s"
  "$py" "$root/tests/gpu/make_elementwise.py" "$work/ew.onnx" 128
  timeout "$(left)" "$build/pcc" "$work/ew.onnx" --gpus 1 --target cuda -o "$work/ew.pcc" --quiet \
    || die "pcc --target cuda of the elementwise model failed"
  timeout "$(left)" "$build/pcc-run" "$work/ew.pcc" --backend cuda --warmup 2 --iters 5 \
    --profile-json "$work/ew.json" >"$work/ew.out" 2>&1 || { cat "$work/ew.out" >&2; die "elementwise run failed"; }
  read -r gbs pct <<<"$("$py" - "$work/ew.json" "$copy" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
ins = [i for i in doc["ranks"][0]["instructions"] if i["kind"] == "LAUNCH" and i["calls"] > 0]
if not ins:
    print("0 0")
    sys.exit()
t = min(i["min_seconds"] for i in ins)
gbs = 2 * 4 * 128 * (1 << 20) / t / 1e9
print(f"{gbs:.1f} {100 * gbs / float(sys.argv[2]):.0f}")
PY
)"
  if [ "$gbs" = "0" ]; then
    row "fused elementwise bandwidth" FAIL "no LAUNCH ran on the device"
    failed=1
  elif [ "$pct" -ge 80 ]; then
    row "fused elementwise bandwidth" ok "$gbs GB/s = $pct% of copy (goal >= 80%)"
  else
    row "fused elementwise bandwidth" missed "$gbs GB/s = $pct% of copy (goal >= 80%)"
  fi
fi

# --- 4. cuBLASLt GEMM.
if g=$(timeout "$(left)" "$build/gpu_bench" gemm 8192 8192 8192); then
  row "cuBLASLt GEMM 8192^3" ok "$(echo "$g" | sed -n 's/^gemm_f32_tflops //p') TFLOP/s f32, $(echo "$g" | sed -n 's/^gemm_tf32_tflops //p') TF32"
else
  row "cuBLASLt GEMM 8192^3" FAIL "gpu_bench gemm failed"
  failed=1
fi

# Conv on cuDNN against the CPU fallback, on the plan step 2 compiled.
conv_calls() {  # profile file, placement: the Conv calls --profile lists under it
  sed -n "s/^profile rank 0: Conv (\($2\)[^)]*).* \([0-9]*\) calls$/\2/p" "$1" | awk '{s += $1} END {print s + 0}'
}
if [ -e "$work/resnet.ts.pcc" ]; then
  timeout "$(left)" "$build/pcc-run" "$work/resnet.ts.pcc" --backend cuda --warmup 1 --iters 3 --profile \
    >"$work/conv-dnn.out" 2>&1 || true
  PCC_CUDNN_LIB=libpcc-no-cudnn.so.9 timeout "$(left)" "$build/pcc-run" "$work/resnet.ts.pcc" --backend cuda \
    --warmup 1 --iters 3 --profile >"$work/conv-cpu.out" 2>&1 || true
  dms=$(sed -n 's/^rank 0: \([0-9.]*\) ms$/\1/p' "$work/conv-dnn.out" | head -1)
  cms=$(sed -n 's/^rank 0: \([0-9.]*\) ms$/\1/p' "$work/conv-cpu.out" | head -1)
  if [ -n "$dms" ] && [ -n "$cms" ]; then
    row "resnet.ts Conv: cuDNN vs CPU" ok "${dms} ms ($(conv_calls "$work/conv-dnn.out" cudnn) Conv calls on cuDNN) vs ${cms} ms ($(conv_calls "$work/conv-cpu.out" 'cpu fallback') on the CPU fallback)"
  else
    row "resnet.ts Conv: cuDNN vs CPU" FAIL "$(tail -1 "$work/conv-dnn.out" | cut -c1-90)"
    failed=1
  fi
else
  row "resnet.ts Conv: cuDNN vs CPU" skipped "no resnet.ts plan from step 2"
fi

# --- 5. BERT-base and ResNet-50 against onnxruntime-gpu.
cache=${PCC_PARITY_CACHE:-$build/parity-cache}
ort=no
"$py" -c "import onnxruntime as o, sys; sys.exit(0 if 'CUDAExecutionProvider' in o.get_available_providers() else 1)" \
  2>/dev/null && ort=yes
for want in bert resnet; do
  model=$(find "$cache" -maxdepth 3 -iname "${want}*.onnx" 2>/dev/null | head -1 || true)
  if [ -z "$model" ]; then
    row "$want full size vs onnxruntime" skipped "no full-size export under $cache (make parity)"
  elif [ "$ort" != yes ]; then
    row "$want full size vs onnxruntime" skipped "onnxruntime-gpu (CUDA provider) not installed"
  else
    timeout "$(left)" "$build/pcc" "$model" --gpus 1 --batch 8 --target cuda -o "$work/$want.pcc" --quiet \
      || { row "$want full size vs onnxruntime" FAIL "pcc failed"; failed=1; continue; }
    ms=$(timeout "$(left)" "$build/pcc-run" "$work/$want.pcc" --backend cuda --warmup 3 --iters 10 \
      | sed -n 's/^rank 0: \([0-9.]*\) ms$/\1/p' | head -1) || ms=""
    ortms=$("$py" - "$model" <<'PY' 2>/dev/null || true
import sys, time
import numpy as np, onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=["CUDAExecutionProvider"])
feed = {}
for i in s.get_inputs():
    shape = [d if isinstance(d, int) else 8 for d in i.shape]
    feed[i.name] = (np.random.rand(*shape).astype(np.float32) if "float" in i.type
                    else np.random.randint(0, 4, size=shape).astype(np.int64))
for _ in range(3):
    s.run(None, feed)
t = time.perf_counter()
for _ in range(10):
    s.run(None, feed)
print(f"{(time.perf_counter() - t) * 100:.3f}")
PY
)
    row "$want full size vs onnxruntime" ok "pcc ${ms:-?} ms, onnxruntime-gpu ${ortms:-?} ms (batch 8)"
  fi
done

# --- 6. The table.
check_s=$(( $(date +%s) - t1 ))
echo
echo "GPU check on $gpu (build ${build_s} s, checks ${check_s} s; nothing is compared across machines)"
printf '%-34s %-10s %s\n' "check" "result" "figure"
for r in "${rows[@]}"; do echo "$r"; done
[ "$check_s" -le 360 ] || say "the checks took ${check_s} s, over the 6-minute budget"
exit "$failed"
