# Cake's two entry points (see README.md):
#   make run   – start Cake on the embedded default model
#   make test  – set everything up and run the whole test suite
# Both install what they need on a fresh Debian/Ubuntu machine.

SHELL := /bin/bash
CARGO ?= cargo
PYTHON ?= python3
export RAYON_NUM_THREADS ?= 2

.PHONY: run test model deps build fixtures bench

run: deps model
	$(CARGO) run --release --bin cake -- chat

test: deps model
	$(CARGO) test --workspace --no-fail-fast

## The embedded default model, fetched once into the app's data folder.
model:
	$(PYTHON) scripts/fetch_default_model.py

## System packages the build needs (only installs what is missing).
deps:
	@bash scripts/install_deps.sh

build: deps
	$(CARGO) build --release

## Regenerate reference fixtures with transformers + torch (not needed for tests).
fixtures: model
	$(PYTHON) -m venv .venv-ref
	.venv-ref/bin/pip install --quiet torch transformers accelerate gguf tokenizers
	.venv-ref/bin/python tests/fixtures/generate_tiny_models.py --seed $${SEED:-0}
	.venv-ref/bin/python tests/fixtures/generate_smollm2_reference.py

## Cake vs llama.cpp (llama-cpp-python built from source) on the default model.
bench: deps model
	$(CARGO) build --release
	$(PYTHON) -m venv .venv-bench
	.venv-bench/bin/pip install --quiet llama-cpp-python
	.venv-bench/bin/python bench/compare.py --cake target/release/cake
