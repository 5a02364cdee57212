#!/usr/bin/env python3
"""Cake vs llama.cpp on the same GGUF, same threads, same prompt, one run.

Measures prompt processing (prefill) and decode speed in tokens/s for both
engines and prints their ratios. llama.cpp runs through `llama-cpp-python`
(built from source by pip). Each figure is the median of `--reps` runs.

    python bench/compare.py --cake target/release/cake [--model M] [--threads 2]
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def default_model() -> Path:
    data = os.environ.get("CAKE_DATA_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME", os.path.expanduser("~/.local/share")), "cake"
    )
    return Path(data) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def prompt_tokens(llm, n):
    """`n` tokens of English text (the test fixture, repeated as needed)."""
    text = (HERE.parent / "tests/fixtures/english.txt").read_text()
    tokens = llm.tokenize(text.encode(), add_bos=False, special=False)
    while len(tokens) < n:
        tokens += tokens
    return tokens[:n]


def bench_llama_cpp(llm, prompt, decode):
    llm.reset()
    start = time.perf_counter()
    llm.eval(prompt)
    prefill_s = time.perf_counter() - start
    # Without logits_all, llama.cpp keeps only the last position's logits, as Cake does.
    token = int(llm.scores[llm.n_tokens - 1].argmax())
    start = time.perf_counter()
    for _ in range(decode):
        llm.eval([token])
        token = int(llm.scores[llm.n_tokens - 1].argmax())
    decode_s = time.perf_counter() - start
    return len(prompt) / prefill_s, decode / decode_s


def bench_cake(cake, model, prompt, decode, threads, dtype):
    args = [
        cake, "run", "--model", str(model), "--prompt-tokens", ",".join(map(str, prompt)),
        "--temperature", "0", "--max-tokens", str(decode + 1), "--ignore-eos", "--threads", str(threads), "--json",
    ]
    if dtype:
        args += ["--dtype", dtype]
    out = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    t = out["timings"]
    return t["prompt_tok_s"], t["decode_tok_s"]


def median_pair(runs):
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cake", default="target/release/cake")
    parser.add_argument("--model", type=Path, default=default_model())
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--decode", type=int, default=128)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()

    from llama_cpp import Llama, __version__ as llama_cpp_version

    llm = Llama(model_path=str(args.model), n_threads=args.threads, n_threads_batch=args.threads,
                n_ctx=args.prompt + args.decode + 16, n_batch=512, verbose=False)
    prompt = prompt_tokens(llm, args.prompt)

    llama_runs = [bench_llama_cpp(llm, prompt, args.decode) for _ in range(args.reps)]
    cake_runs = [bench_cake(args.cake, args.model, prompt, args.decode, args.threads, None) for _ in range(args.reps)]
    llama_prefill, llama_decode = median_pair(llama_runs)
    cake_prefill, cake_decode = median_pair(cake_runs)

    print(f"model: {args.model.name}, threads: {args.threads}, prompt {args.prompt} tokens, decode {args.decode} tokens, "
          f"median of {args.reps}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; llama-cpp-python {llama_cpp_version}")
    print()
    print("| engine | prefill tok/s | decode tok/s |")
    print("|---|---|---|")
    print(f"| llama.cpp | {llama_prefill:.1f} | {llama_decode:.1f} |")
    print(f"| Cake | {cake_prefill:.1f} | {cake_decode:.1f} |")
    print(f"| Cake / llama.cpp | {cake_prefill / llama_prefill:.2f}x | {cake_decode / llama_decode:.2f}x |")


if __name__ == "__main__":
    main()
