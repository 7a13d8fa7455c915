# pcc: build, test and demo entry points. Everything lands in $(BUILD).
BUILD  ?= build
JOBS   ?= $(shell nproc)
PYTHON := $(BUILD)/venv/bin/python
DEMO   := $(BUILD)/demo/gpt2_tiny.pcc

.PHONY: all setup build test demo models clean sanitize sanitize-build fuzz

all: build

# System packages and the Python test environment ($(BUILD)/venv).
setup:
	bash tools/setup.sh $(BUILD)

# The Python package's module is built (PCC_PYTHON=ON: a missing nanobind or
# Python header is an error, not a skipped test) against the test environment's Python
# (nanobind comes from it), and a .pth file there puts $(BUILD)/python, where
# the package is assembled, on its path: `$(PYTHON) -c "import pcc"` works.
build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE=$(abspath $(PYTHON)) -DPCC_PYTHON=ON
	cmake --build $(BUILD) -j$(JOBS)
	$(PYTHON) -c 'import site, sys; open(site.getsitepackages()[0] + "/pcc-build.pth", "w").write(sys.argv[1] + "\n")' $(abspath $(BUILD))/python

# Unit, lit and end-to-end tests; ctest prints the summary.
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j2

# Compile the tiny GPT-2 for 8 devices, run it on 8 CPU ranks against the
# reference evaluator, and print the partition report.
demo: build
	rm -rf $(DEMO)
	mkdir -p $(dir $(DEMO))
	$(BUILD)/pcc models/gpt2_tiny.onnx --batch 8 --gpus 8 -o $(DEMO)
	$(BUILD)/pcc-run $(DEMO) --check
	$(BUILD)/pcc-report $(DEMO)

# Regenerate the committed test models (deterministic).
models: setup
	$(PYTHON) models/make_models.py

# Full-size PyTorch exports (ResNet-50, BERT-base, GPT-2, ViT-B/16, LLaMA-width
# decoder, ...) compiled at 1 and 4 devices, run on CPU ranks and compared with
# onnxruntime; torch is installed on demand into $(BUILD)/parity-venv. Slow and
# large, so not part of `make test`. PARITY_MODELS=resnet,bert picks models.
# The GPU check (tests/gpu/run.sh) on a machine with one NVIDIA GPU: builds
# pcc with the CUDA toolkit into $(GPU_BUILD), runs every e2e model and
# committed export on the cuda backend with --check, measures bandwidth and
# GEMM throughput, prints one table. Exits 2 where there is no GPU.
GPU_BUILD ?= build-gpu
.PHONY: gpu-check
gpu-check:
	bash tests/gpu/run.sh $(GPU_BUILD)

# `pip install .` into a fresh virtual environment ($(BUILD)/wheel-venv),
# reusing what `make` compiled in $(BUILD), then `import pcc` compiles and runs
# the MLP from outside the checkout (tools/wheel_check.sh; CI runs it).
.PHONY: wheel-check
wheel-check: build
	bash tools/wheel_check.sh $(BUILD)

.PHONY: parity
parity: build
	bash tools/parity.sh $(BUILD)

# AddressSanitizer + UndefinedBehaviorSanitizer build (clang-14) in $(SAN_BUILD),
# with the libFuzzer targets; `make sanitize` runs the unit, lit and e2e tests
# on it (not conformance), `make fuzz` runs each fuzzer for FUZZ_SECONDS.
SAN_BUILD    ?= build-san
FUZZ_SECONDS ?= 60
SAN_ENV := ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:abort_on_error=1 \
           LSAN_OPTIONS=suppressions=$(abspath tools/sanitize/lsan.supp):print_suppressions=0 \
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

sanitize-build: setup
	bash tools/setup.sh $(BUILD) --sanitize
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPCC_FUZZ=ON
	cmake --build $(SAN_BUILD) -j$(JOBS)
	ln -sfn $(abspath $(BUILD))/venv $(SAN_BUILD)/venv

# PCC_E2E_SUBSET=sanitize: the e2e loops over the 16 exports take the 8
# TorchScript ones (tests/e2e/pcc_e2e.py, exporter_subset).
# test_kernels reuses the plain build's kernel cache when there is one
# (PCC_E2E_KERNEL_CACHE): the same kernels, compiled by the same compilers.
sanitize: sanitize-build
	$(SAN_ENV) PCC_E2E_SUBSET=sanitize $(if $(wildcard $(BUILD)/kernel-cache),PCC_E2E_KERNEL_CACHE=$(abspath $(BUILD))/kernel-cache) \
	  ctest --test-dir $(SAN_BUILD) -LE conformance --output-on-failure -j2

fuzz: sanitize-build
	$(SAN_ENV) bash tools/fuzz.sh $(SAN_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
