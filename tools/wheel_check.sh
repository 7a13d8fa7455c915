#!/usr/bin/env bash
# `pip install .` into a fresh virtual environment, then compile and run the
# MLP through `import pcc` from outside the checkout (docs/python.md#installing).
#   tools/wheel_check.sh BUILD
# The wheel is built in BUILD (scikit-build-core's build-dir), so that what
# `make` compiled there is reused rather than compiled a second time; the
# fresh environment gets only what pyproject.toml asks for (numpy), plus the
# build's own requirements (scikit-build-core and nanobind, pinned as in
# tools/requirements.txt), installed first since the build is not isolated.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: tools/wheel_check.sh BUILD}" && pwd)
venv=$build/wheel-venv
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
pin() { grep -E "^$1==" "$here/tools/requirements.txt"; }
"$venv/bin/pip" install -q --disable-pip-version-check "$(pin scikit-build-core)" "$(pin nanobind)"
echo "wheel-check: pip install $here (build folder $build)"
CMAKE_GENERATOR="Unix Makefiles" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation \
  --config-settings=build-dir="$build" --config-settings=cmake.define.PCC_BUILD_TESTS=ON "$here"
# From an empty folder: the installed package, not the checkout's python/.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$venv/bin/python" - "$here/models/mlp.onnx" <<'PY'
import os, sys
import numpy as np
import pcc
assert os.path.dirname(pcc.__file__).startswith(sys.prefix), f"pcc imported from {pcc.__file__}, not the install"
plan = pcc.compile(sys.argv[1], gpus=2, strategy="tp=2", batch=4, quiet=True)
x = np.random.default_rng(0).standard_normal(plan.inputs[0].shape).astype(np.float32)
(y,) = pcc.Session(plan).run(None, {plan.inputs[0].name: x})
ref = plan.run_reference({plan.inputs[0].name: x})[plan.outputs[0].name]
np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
print(f"wheel-check: pcc {pcc.__version__} from {os.path.dirname(pcc.__file__)}: "
      f"{plan.ranks} ranks, output {list(y.shape)} equals the reference")
PY
