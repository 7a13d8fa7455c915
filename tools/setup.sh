#!/usr/bin/env bash
# Installs what pcc's build and tests need. Idempotent: skips what is present.
#   tools/setup.sh [BUILD_DIR] [--sanitize]   (the Python venv goes in BUILD_DIR/venv; default build/;
#                                             --sanitize adds clang and its sanitizer runtimes)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}

# ocl-icd-opencl-dev and opencl-c-headers: Debian builds oneDNN with its OpenCL GPU
# runtime, so its CMake package (find_package(dnnl CONFIG)) requires OpenCL.
# graphviz: its dot program draws pcc-report's HTML graph (and the tests run it).
# libxtensor-dev (its xnpy.hpp) and libzip-dev: pcc-run's .npy and .npz tensor files.
# python3-dev: Python's headers, for the Python package's module (nanobind).
# openmpi-bin: mpirun starts pcc-run processes in tests/e2e/test_launch.py (only
# as a launcher: gloo carries the collectives).
debs=(cmake g++ make pkg-config
      libonnx-dev libprotobuf-dev protobuf-compiler
      libgtest-dev libgmock-dev libbenchmark-dev
      libgloo-dev libdnnl-dev ocl-icd-opencl-dev opencl-c-headers llvm-14-tools libonnx-testdata libssl-dev
      libcli11-dev nlohmann-json3-dev libxtensor-dev libzip-dev
      graphviz
      openmpi-bin
      python3 python3-venv python3-dev)
# `make sanitize` and `make fuzz` (tools/setup.sh BUILD --sanitize): clang with
# its sanitizer and libFuzzer runtimes, and the OpenMP header clang reads.
if [ "${2:-}" = "--sanitize" ]; then
  debs+=(clang-14 libclang-rt-14-dev libomp-14-dev)
fi
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python for tests only: pinned, in the build tree, built on Debian's python3.
venv=$build/venv
stamp=$venv/.pcc-requirements
req=$here/tools/requirements.txt
if [ ! -f "$stamp" ] || ! cmp -s "$req" "$stamp"; then
  echo "setup: creating Python environment in $venv"
  mkdir -p "$build"
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  cp "$req" "$stamp"
fi
echo "setup: ok"
