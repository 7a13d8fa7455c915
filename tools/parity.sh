#!/usr/bin/env bash
# `make parity`: full-size PyTorch exports compiled by pcc, run on CPU ranks and
# compared with onnxruntime. Slow (tens of minutes) and large (several GB).
#   tools/parity.sh [BUILD_DIR]
# Environment: PARITY_MODELS=resnet,bert,... (default: all of models/export.py),
#              PARITY_GPUS=1,4, PARITY_CACHE=DIR (default BUILD_DIR/parity-cache).
# torch, torchvision, transformers and onnxscript go into BUILD_DIR/parity-venv
# (pinned in tests/parity/requirements.txt), never into the test venv.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
cache=${PARITY_CACHE:-$build/parity-cache}
venv=$build/parity-venv
req=$here/tests/parity/requirements.txt
stamp=$venv/.pcc-requirements

if [ ! -f "$stamp" ] || ! cmp -s "$req" "$stamp"; then
  echo "parity: installing torch and exporters into $venv (a few GB, several minutes)"
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  cp "$req" "$stamp"
fi

only=()
[ -n "${PARITY_MODELS:-}" ] && only=(--only "$PARITY_MODELS")
export_rc=0
"$venv/bin/python" "$here/models/export.py" --full --cache "$cache" --skip-existing "${only[@]}" \
  || export_rc=$?
"$build/venv/bin/python" "$here/tests/parity/parity.py" --bin "$build" --cache "$cache" \
  --gpus "${PARITY_GPUS:-1,4}" -o "$cache/parity.md" "${only[@]}"
# An export failure is already a row of the table; keep the exit code honest too.
exit "$export_rc"
