# pcc: build, test and demo entry points. Everything lands in $(BUILD).
BUILD  ?= build
JOBS   ?= $(shell nproc)
PYTHON := $(BUILD)/venv/bin/python
DEMO   := $(BUILD)/demo/gpt2_tiny.pcc

.PHONY: all setup build test demo models clean

all: build

# System packages and the Python test environment ($(BUILD)/venv).
setup:
	bash tools/setup.sh $(BUILD)

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j$(JOBS)

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
.PHONY: parity
parity: build
	bash tools/parity.sh $(BUILD)

clean:
	rm -rf $(BUILD)
