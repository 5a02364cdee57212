#!/usr/bin/env python3
"""Cake vs llama.cpp on the same GGUF files, same threads, same prompts, one run.

For the default model as shipped (Q4_1) and for an all-F32 copy of the same
weights (made by llama.cpp's own quantize tool), each engine is measured in
fresh processes, `--reps` times, alternating:

- load + first token: load the file, then a 16-token chat prompt until the
  first generated token (load time, time to first token);
- throughput: a 256-token prompt (prefill tok/s), then 128 greedy tokens
  (decode tok/s), and the process's peak resident memory.

Both engines also run the throughput test with 1 thread, for thread scaling. Every
figure is the median of the repetitions; ratios above 1 favour Cake (for
times and memory the ratio is llama.cpp's over Cake's, so above 1 still
favours Cake). llama.cpp runs through `llama-cpp-python` in a child Python
process; the interpreter's own memory (measured after `import llama_cpp`,
before loading) is subtracted from its peak so that it is not held against it.

    python bench/compare.py --cake target/release/cake [--model M] [--threads 2] [--reps 5]
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Cake keeps the tiles it repacks a GGUF file into in its tile cache
# (docs/gguf.md); the bench keeps its own, outside the user's.
TILE_CACHE = Path(os.environ.setdefault("CAKE_CACHE_DIR", str(Path.home() / ".cache" / "cake-bench" / "cache")))
CHAT_PROMPT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"

# The llama.cpp side, run as `python compare.py --llama-child JSON`.
CHILD_ONLY = "--llama-child"


def default_model() -> Path:
    data = os.environ.get("CAKE_DATA_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME", os.path.expanduser("~/.local/share")), "cake"
    )
    return Path(data) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def status_bytes(field: str) -> int:
    """A memory figure of this process from /proc/self/status: "VmRSS"
    (resident now) or "VmHWM" (its peak)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def greedy_token(llm) -> int:
    """The most likely next token after what `llm` has evaluated. (Without
    `logits_all`, llama-cpp-python 0.3.36 no longer copies logits into
    `llm.scores`: they are read from the context.)"""
    import llama_cpp
    import numpy as np

    logits = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    return int(np.ctypeslib.as_array(logits, shape=(llm.n_vocab(),)).argmax())


def llama_child(spec):
    """One llama.cpp measurement in this (child) process; prints JSON."""
    import time
    import llama_cpp

    baseline = status_bytes("VmRSS")
    start = time.perf_counter()
    llm = llama_cpp.Llama(model_path=spec["model"], n_threads=spec["threads"], n_threads_batch=spec["threads"],
                          n_ctx=spec["n_ctx"], n_batch=512, verbose=False)
    load_s = time.perf_counter() - start
    result = {"baseline_rss": baseline, "load_s": load_s}
    prompt = spec["prompt"]
    start = time.perf_counter()
    llm.eval(prompt)
    # Without logits_all llama.cpp keeps only the last position's logits, as Cake does.
    token = greedy_token(llm)
    first_token_s = time.perf_counter() - start
    if spec["kind"] == "first_token":
        result["ttft_s"] = first_token_s
    else:
        result["prompt_tok_s"] = len(prompt) / first_token_s
        start = time.perf_counter()
        for _ in range(spec["decode"]):
            llm.eval([token])
            token = greedy_token(llm)
        result["decode_tok_s"] = spec["decode"] / (time.perf_counter() - start)
    result["peak_rss"] = status_bytes("VmHWM")
    print(json.dumps(result))


def run_measured(args):
    """Runs `args` and returns its standard output. Peak memory is not taken
    from `wait4`: on Linux a child's `ru_maxrss` also counts this (parent)
    process's resident memory when it started the child, which once made a
    large parent look like Cake's peak. Each engine reports its own peak
    (`VmHWM`) instead."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.run(args, stdout=out, stderr=subprocess.DEVNULL)
        out.seek(0)
        text = out.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{args[0]} failed (exit {proc.returncode}): {' '.join(map(str, args[:6]))[:300]} …")
    return text


def llama_cpp_run(model, kind, prompt, decode, threads):
    spec = {"model": str(model), "kind": kind, "prompt": prompt, "decode": decode, "threads": threads,
            "n_ctx": len(prompt) + decode + 16}
    result = json.loads(run_measured([sys.executable, __file__, CHILD_ONLY, json.dumps(spec)]))
    result["rss"] = result["peak_rss"] - result["baseline_rss"]
    return result


def cake_run(cake, model, kind, prompt, decode, threads):
    args = [cake, "run", "--model", str(model), "--prompt-tokens", ",".join(map(str, prompt)), "--temperature", "0",
            "--max-tokens", str(1 if kind == "first_token" else decode + 1), "--ignore-eos", "--threads", str(threads),
            "--json"]
    report = json.loads(run_measured(args))
    # What the model costs, as for llama.cpp: the peak less what the process
    # held before loading it (Cake's own code and startup).
    peak = report["rss_peak_bytes"]
    before = report.get("rss_before_load_bytes") or 0
    return {**report["timings"], "rss": peak - before, "rss_peak": peak}


def forget_tiles(model) -> None:
    """Drops Cake's cached tiles of `model`: its next load repacks and writes them."""
    target = str(Path(model).resolve())
    for folder in (TILE_CACHE / "tiles").glob("*"):
        source = folder / "source"
        if source.exists() and source.read_text() == target:
            shutil.rmtree(folder)


def cake_first_open(cake, model, prompt, threads, reps=3) -> float:
    """Seconds Cake takes to load `model` the first time (median of `reps`):
    repacking every matrix and writing the tile cache (later loads map the
    tiles). The file is read once before, so that its pages are in the
    system's cache as they are for every other load measured."""
    times = []
    for _ in range(reps):
        forget_tiles(model)
        with open(model, "rb") as file:
            while file.read(16 << 20):
                pass
        times.append(cake_run(cake, model, "first_token", prompt, 0, threads)["load_s"])
    return statistics.median(times)


def make_f32_copy(model: Path, out_dir: Path) -> Path:
    """The same weights, dequantized to F32 by llama.cpp's quantize tool."""
    import llama_cpp

    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / (model.stem + ".F32.gguf")
    if not target.exists():
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = llama_cpp.LLAMA_FTYPE_ALL_F32
        params.allow_requantize = True
        params.nthread = 2
        partial = target.with_suffix(".partial")
        if llama_cpp.llama_model_quantize(str(model).encode(), str(partial).encode(), params) != 0:
            raise SystemExit(f"llama.cpp could not write an F32 copy of {model}")
        partial.rename(target)
    return target


def vocabulary(model: Path):
    """llama.cpp's tokenizer of `model` (no weights loaded)."""
    import llama_cpp

    return llama_cpp.Llama(model_path=str(model), vocab_only=True, verbose=False)


def text_tokens(llm, n: int, path: Path | None = None):
    """The first `n` token ids of `path` (english.txt), repeated as often as needed."""
    text = (path or HERE.parent / "tests/fixtures/english.txt").read_text()
    ids = llm.tokenize(text.encode(), add_bos=False, special=False)
    return (ids * (n // len(ids) + 1))[:n]


def token_ids(model: Path):
    """The benchmark prompts as token ids, from llama.cpp's tokenizer (both engines get the same ids)."""
    llm = vocabulary(model)
    chat = llm.tokenize(CHAT_PROMPT.encode(), add_bos=False, special=True)
    return chat, text_tokens(llm, 256)


def median(runs, key):
    return statistics.median(r[key] for r in runs)


def measure(cake, model, threads, reps, chat, long, decode):
    """Medians for both engines on one file."""
    runs = {"llama.cpp": {"first": [], "tput": []}, "Cake": {"first": [], "tput": []},
            "Cake 1 thread": {"tput": []}, "llama.cpp 1 thread": {"tput": []}}
    first_open_ms = 1000 * cake_first_open(cake, model, chat, threads)
    for _ in range(reps):
        runs["llama.cpp"]["first"].append(llama_cpp_run(model, "first_token", chat, 0, threads))
        runs["Cake"]["first"].append(cake_run(cake, model, "first_token", chat, 0, threads))
        runs["llama.cpp"]["tput"].append(llama_cpp_run(model, "throughput", long, decode, threads))
        runs["Cake"]["tput"].append(cake_run(cake, model, "throughput", long, decode, threads))
        runs["Cake 1 thread"]["tput"].append(cake_run(cake, model, "throughput", long, decode, 1))
        runs["llama.cpp 1 thread"]["tput"].append(llama_cpp_run(model, "throughput", long, decode, 1))
    table = {}
    for engine in ("llama.cpp", "Cake"):
        first, tput = runs[engine]["first"], runs[engine]["tput"]
        table[engine] = {
            "prefill": median(tput, "prompt_tok_s"),
            "decode": median(tput, "decode_tok_s"),
            "ttft_ms": 1000 * median(first, "ttft_s"),
            "load_ms": 1000 * median(first, "load_s"),
            "open_to_first_ms": 1000 * statistics.median(r["load_s"] + r["ttft_s"] for r in first),
            "rss_mb": median(tput, "rss") / 1e6,
        }
    table["Cake"]["first_open_ms"] = first_open_ms
    table["llama.cpp"]["first_open_ms"] = table["llama.cpp"]["load_ms"]
    for engine in ("llama.cpp", "Cake"):
        table[engine]["decode_1_thread"] = median(runs[f"{engine} 1 thread"]["tput"], "decode_tok_s")
    return table


def print_table(name, table, threads):
    ours, theirs = table["Cake"], table["llama.cpp"]
    rows = [
        ("prefill tok/s (256)", "prefill", "{:.1f}", True),
        ("decode tok/s", "decode", "{:.1f}", True),
        ("time to first token, ms (16-token chat)", "ttft_ms", "{:.1f}", False),
        ("load, ms", "load_ms", "{:.1f}", False),
        ("first load of the file, ms (Cake repacks it into its tile cache)", "first_open_ms", "{:.1f}", False),
        ("open to first token, ms", "open_to_first_ms", "{:.1f}", False),
        ("peak RSS, MB", "rss_mb", "{:.1f}", False),
    ]
    print(f"\n### {name}\n")
    print("| measure | llama.cpp | Cake | Cake vs llama.cpp |")
    print("|---|---|---|---|")
    for label, key, fmt, higher_better in rows:
        ratio = ours[key] / theirs[key] if higher_better else theirs[key] / ours[key]
        print(f"| {label} | {fmt.format(theirs[key])} | {fmt.format(ours[key])} | {ratio:.2f}x |")
    for engine, figures in (("Cake", ours), ("llama.cpp", theirs)):
        scaling = figures["decode"] / figures["decode_1_thread"]
        print(f"\n{engine} decode with 1 thread: {figures['decode_1_thread']:.1f} tok/s; {threads} threads / 1 thread = {scaling:.2f}x")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == CHILD_ONLY:
        return llama_child(json.loads(sys.argv[2]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cake", default="target/release/cake")
    parser.add_argument("--model", type=Path, default=default_model())
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--decode", type=int, default=128)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--f32-dir", type=Path, default=Path.home() / ".cache" / "cake-bench",
                        help="where to keep the F32 copy (not in the model library)")
    parser.add_argument("--skip-f32", action="store_true")
    args = parser.parse_args()

    import llama_cpp

    chat, long = token_ids(args.model)
    print(f"model: {args.model.name}; {args.threads} threads; prompts of {len(chat)} (chat) and {len(long)} tokens, "
          f"decode {args.decode}; median of {args.reps} fresh processes per engine and measure")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; "
          f"llama-cpp-python {llama_cpp.__version__}")
    files = [("Q4_1 (as shipped)", args.model)]
    if not args.skip_f32:
        files.append(("F32 (the same weights, dequantized)", make_f32_copy(args.model, args.f32_dir)))
    for name, path in files:
        print_table(name, measure(args.cake, path, args.threads, args.reps, chat, long, args.decode), args.threads)


if __name__ == "__main__":
    main()
