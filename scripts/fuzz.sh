#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ for a set time each (`make fuzz`).
#
# Needs nightly Rust (libFuzzer's instrumentation) and cargo-fuzz, which it
# installs into .tools/ when missing. Seeds come from the test fixtures;
# corpora grow in fuzz/corpus/<target>/ (kept between runs, not committed);
# a failing input lands in fuzz/artifacts/<target>/ and ends that target's
# run. Each target's executions and failures go to target/fuzz-report.txt.
#
# Usage: scripts/fuzz.sh [seconds per target] [target ...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(cluster_message master_load worker_step gguf_header safetensors_header wav chat_template torch_pickle picture)

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
export PATH="$PWD/.tools/bin:$PATH"
command -v cargo-fuzz >/dev/null || cargo install --locked --root .tools cargo-fuzz

# Without sanitizers: the targets are safe Rust readers, so libFuzzer's
# coverage and its panic, timeout and memory checks find what matters, and
# the build takes minutes instead of much longer. Debug assertions on, so an
# arithmetic overflow is a failure, as in the test builds.
fuzz_flags=(--sanitizer none --release --debug-assertions)
(cd fuzz && cargo +nightly fuzz build "${fuzz_flags[@]}")

seed() {
  local target="$1" corpus="fuzz/corpus/$1"
  mkdir -p "$corpus"
  case "$target" in
    cluster_message) python3 fuzz/seed_cluster_messages.py "$corpus" ;;
    gguf_header) find tests/fixtures -name '*.gguf' -size -200k -exec cp -n {} "$corpus/" \; ;;
    safetensors_header) find tests/fixtures -name '*.safetensors' -size -200k -exec sh -c 'cp -n "$1" "$2/$(basename "$(dirname "$1")").safetensors"' _ {} "$corpus" \; ;;
    wav) find tests/fixtures -name '*.wav' -size -200k -exec cp -n {} "$corpus/" \; ;;
    picture) find icons -name '*.png' -size -200k -exec cp -n {} "$corpus/" \; ;;
    torch_pickle) python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); open(sys.argv[2] + "/voice.pkl", "wb").write(z.read([n for n in z.namelist() if n.endswith("data.pkl")][0]))' tests/fixtures/tiny/vibevoice_realtime/voice.pt "$corpus" ;;
    chat_template) find tests/fixtures -name 'chat_template.jinja' -exec sh -c 'cp -n "$1" "$2/$(basename "$(dirname "$1")").jinja"' _ {} "$corpus" \; ;;
  esac
  cp -n tests/fuzz_regressions/"$target"/* "$corpus/" 2>/dev/null || true
}

report=target/fuzz-report.txt
mkdir -p target
: > "$report"
status=0
for target in "${targets[@]}"; do
  seed "$target"
  mkdir -p "fuzz/artifacts/$target"
  log="target/fuzz-$target.log"
  echo "fuzzing $target for ${seconds}s (log: $log)"
  set +e
  (cd fuzz && cargo +nightly fuzz run "${fuzz_flags[@]}" "$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1) >"$log" 2>&1
  code=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  found=$(find "fuzz/artifacts/$target" -type f | wc -l)
  echo "$target: ${runs:-?} executions in ${seconds}s, exit $code, failing inputs kept: $found" | tee -a "$report"
  [ "$code" -eq 0 ] || status=1
done
exit $status
