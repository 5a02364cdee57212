#!/usr/bin/env python3
"""Cake vs llama.cpp on the GGUF types people download, made by llama.cpp's
own quantizer from an F32 copy of the default model, in one run.

For each file type (Q4_K_M, Q5_K_M, Q6_K, Q8_0, Q4_0, Q5_0, Q5_1, …):

- speed: decode and 256-token prefill tok/s, both engines in fresh
  processes, `--reps` times alternating, medians (as `compare.py`);
- accuracy: per-token negative log-likelihood of 900 tokens of
  `bench/market_town.txt` (plain English prose written for this; over the
  256 tokens of `tests/fixtures/english.txt` the perplexity moved by
  ± 0.4 % with the kernels' summation order alone) from each engine on the quantized file, against the exact computation on
  the same weights dequantized (`cake perplexity --dtype f32` on the same
  file, which matches llama.cpp's F32 to 5e-6 nats): mean |ΔNLL| and
  perplexity for both. The bar: Cake's mean |ΔNLL| ≤ 1.25 × llama.cpp's
  + 0.005 nats and its perplexity no further from the exact one than
  llama.cpp's + 0.5 %.

Files are cached in `--dir` (outside the repository).

    python bench/quant_types.py --cake target/release/cake [--types Q4_K_M,Q6_K] [--reps 5]
"""

import argparse
import contextlib
import os
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare  # noqa: E402  (the shared measuring code)

FTYPES = {
    "Q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0",
    "Q4_1": "LLAMA_FTYPE_MOSTLY_Q4_1",
    "Q5_0": "LLAMA_FTYPE_MOSTLY_Q5_0",
    "Q5_1": "LLAMA_FTYPE_MOSTLY_Q5_1",
    "Q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
    "Q4_K_S": "LLAMA_FTYPE_MOSTLY_Q4_K_S",
    "Q4_K_M": "LLAMA_FTYPE_MOSTLY_Q4_K_M",
    "Q5_K_S": "LLAMA_FTYPE_MOSTLY_Q5_K_S",
    "Q5_K_M": "LLAMA_FTYPE_MOSTLY_Q5_K_M",
    "Q6_K": "LLAMA_FTYPE_MOSTLY_Q6_K",
    "Q3_K_M": "LLAMA_FTYPE_MOSTLY_Q3_K_M",
    "Q2_K": "LLAMA_FTYPE_MOSTLY_Q2_K",
    "IQ4_NL": "LLAMA_FTYPE_MOSTLY_IQ4_NL",
    "IQ4_XS": "LLAMA_FTYPE_MOSTLY_IQ4_XS",
    # Half-precision matrices (one-dimensional tensors stay F32).
    "F16": "LLAMA_FTYPE_MOSTLY_F16",
    "BF16": "LLAMA_FTYPE_MOSTLY_BF16",
}
CHILD_ONLY = "--nll-child"


@contextlib.contextmanager
def quiet_stderr():
    """Silences what C code writes to stderr (llama.cpp logs every tensor)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def quantized(f32: Path, kind: str, out_dir: Path) -> Path:
    """`f32` quantized to `kind` by llama.cpp (cached)."""
    import llama_cpp

    target = out_dir / f"{f32.stem.removesuffix('.F32').removesuffix('.F16')}.{kind}.gguf"
    if not target.exists():
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, FTYPES[kind])
        params.nthread = 2
        partial = target.with_suffix(".partial")
        with quiet_stderr():
            done = llama_cpp.llama_model_quantize(str(f32).encode(), str(partial).encode(), params)
        if done != 0:
            raise SystemExit(f"llama.cpp could not quantize {f32} to {kind}")
        partial.rename(target)
    return target


def tensor_types(path: Path) -> str:
    """The tensor types in a file, as `Q4_K ×96, Q6_K ×14, …`."""
    from gguf import GGUFReader

    counts = {}
    for tensor in GGUFReader(str(path)).tensors:
        name = tensor.tensor_type.name
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{name} ×{n}" for name, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def llama_nll_child(spec):
    """Per-token NLL from llama.cpp (all logits of one pass); prints JSON."""
    import llama_cpp
    import numpy as np

    tokens = spec["tokens"]
    llm = llama_cpp.Llama(model_path=spec["model"], n_threads=spec["threads"], n_threads_batch=spec["threads"],
                          n_ctx=len(tokens) + 8, n_batch=512, logits_all=True, verbose=False)
    llm.eval(tokens)
    logits = np.asarray(llm.scores[: len(tokens)], dtype=np.float64)
    top = logits.max(axis=1, keepdims=True)
    log_z = (top[:, 0] + np.log(np.exp(logits - top).sum(axis=1)))
    nll = [float(log_z[i] - logits[i, tokens[i + 1]]) for i in range(len(tokens) - 1)]
    print(json.dumps({"nll": nll}))


def cake_nll(cake: str, model: Path, tokens, dtype=None):
    args = [cake, "perplexity", "--model", str(model), "--tokens", ",".join(map(str, tokens)), "--json"]
    if dtype:
        args += ["--dtype", dtype]
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)["nll"]


def llama_nll(model: Path, tokens, threads: int):
    spec = {"model": str(model), "tokens": tokens, "threads": threads}
    out = subprocess.run([sys.executable, __file__, CHILD_ONLY, json.dumps(spec)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["nll"]


def accuracy(cake: str, model: Path, tokens, threads: int):
    exact = cake_nll(cake, model, tokens, "f32")
    ours = cake_nll(cake, model, tokens)
    theirs = llama_nll(model, tokens, threads)
    mean_delta = lambda nll: statistics.fmean(abs(a - b) for a, b in zip(nll, exact))  # noqa: E731
    ppl = lambda nll: math.exp(statistics.fmean(nll))  # noqa: E731
    return {
        "cake_dnll": mean_delta(ours), "llama_dnll": mean_delta(theirs),
        "exact_ppl": ppl(exact), "cake_ppl": ppl(ours), "llama_ppl": ppl(theirs),
    }


def main():
    if len(sys.argv) == 3 and sys.argv[1] == CHILD_ONLY:
        return llama_nll_child(json.loads(sys.argv[2]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cake", default="target/release/cake")
    parser.add_argument("--model", type=Path, default=compare.default_model())
    parser.add_argument("--types", default="Q4_K_M,Q5_K_M,Q6_K,Q8_0,Q4_0,Q5_0,Q5_1,IQ4_XS,IQ4_NL,Q3_K_M,Q2_K,F16,BF16")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--decode", type=int, default=128)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path.home() / ".cache" / "cake-bench")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--text", type=Path, default=None,
                        help="English text for the accuracy table (default: bench/market_town.txt)")
    parser.add_argument("--text-tokens", type=int, default=900, help="tokens of --text to score")
    args = parser.parse_args()

    import llama_cpp

    f32 = compare.make_f32_copy(args.model, args.dir)
    chat, long = compare.token_ids(args.model)
    text = args.text or Path(__file__).with_name("market_town.txt")
    text_tokens = compare.text_tokens(compare.vocabulary(args.model), args.text_tokens, text)
    text_name = text.name
    print(f"{args.model.name} requantized from its F32 copy by llama.cpp {llama_cpp.__version__}; "
          f"{args.threads} threads; median of {args.reps}; NLL over {len(text_tokens)} tokens of {text_name}")
    speed_rows, accuracy_rows = [], []
    for kind in args.types.split(","):
        path = quantized(f32, kind, args.dir)
        types = tensor_types(path)
        acc = accuracy(args.cake, path, text_tokens, args.threads)
        dnll_ok = acc["cake_dnll"] <= 1.25 * acc["llama_dnll"] + 0.005
        ppl_ok = abs(acc["cake_ppl"] / acc["exact_ppl"] - 1) <= abs(acc["llama_ppl"] / acc["exact_ppl"] - 1) + 0.005
        accuracy_rows.append(
            f"| {kind} | {acc['cake_dnll']:.4f} | {acc['llama_dnll']:.4f} | {acc['exact_ppl']:.3f} | "
            f"{acc['cake_ppl']:.3f} | {acc['llama_ppl']:.3f} | {'yes' if dnll_ok and ppl_ok else 'NO'} |")
        if not args.skip_speed:
            table = compare.measure(args.cake, path, args.threads, args.reps, chat, long, args.decode)
            ours, theirs = table["Cake"], table["llama.cpp"]
            speed_rows.append(
                f"| {kind} ({types}) | {ours['decode']:.1f} | {theirs['decode']:.1f} | {ours['decode'] / theirs['decode']:.2f}x | "
                f"{ours['prefill']:.1f} | {theirs['prefill']:.1f} | {ours['prefill'] / theirs['prefill']:.2f}x | "
                f"{theirs['rss_mb'] / ours['rss_mb']:.2f}x |")
        print(f"{kind}: done", file=sys.stderr, flush=True)
    if speed_rows:
        print("\n| file (tensor types) | Cake decode | llama.cpp decode | ratio | Cake prefill | llama.cpp prefill | ratio | RSS llama.cpp / Cake |")
        print("|---|---|---|---|---|---|---|---|")
        print("\n".join(speed_rows))
    print("\n| file | Cake mean abs ΔNLL | llama.cpp mean abs ΔNLL | exact ppl | Cake ppl | llama.cpp ppl | within the bar |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(accuracy_rows))


if __name__ == "__main__":
    main()
