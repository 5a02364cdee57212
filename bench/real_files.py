#!/usr/bin/env python3
"""Cake vs llama.cpp on one real, published GGUF file: tokens, greedy
replies and accuracy, both engines on the same file in one run.

- token ids: every test string of llama.cpp's tokenizer suite (the
  `ggml-vocab-llama-spm.gguf.inp` strings, fetched by
  scripts/fetch_llama_vocabs.py) plus a few chat lines, tokenized with the
  model's BOS by `cake run --json` and by llama.cpp (specials parsed, as
  both read a prompt);
- greedy replies: a few prompts, up to `--reply-tokens` tokens each, Cake's
  `cake run --temperature 0` against llama.cpp's argmax decoding; where
  they part, how close the two choices were in llama.cpp's logits, and how
  many leading tokens each shares with the exact (F32-dequantized) reply;
- accuracy: per-token NLL over `bench/market_town.txt` from both engines
  against the exact computation on the same weights dequantized
  (`cake perplexity --dtype f32`), as bench/quant_types.py measures it.

    .venv-bench/bin/python bench/real_files.py --cake target/release/cake --model FILE.gguf
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare  # noqa: E402
import quant_types  # noqa: E402

PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little",
    "def fibonacci(n):\n",
    "Les trois couleurs du drapeau français sont",
]
CHAT_LINES = ["<|user|>\nHello!<|end|>", "<start_of_turn>user\nHi<end_of_turn>", "[INST] Hi [/INST]"]


def vocab_test_strings() -> list[str]:
    vocabs = Path(os.environ.get("CAKE_LLAMA_VOCABS", Path.home() / ".cache/cake-test/llama-vocabs-0.3.36"))
    texts = (vocabs / "ggml-vocab-llama-spm.gguf.inp").read_text().split("\n__ggml_vocab_test__\n")[:-1]
    return [t for t in texts if t.strip()] + CHAT_LINES


def cake_run(cake: str, model: Path, *args: str) -> dict:
    out = subprocess.run([cake, "run", "--model", str(model), "--json", *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def compare_tokens(cake: str, model: Path, llm) -> tuple[int, list[str]]:
    texts = vocab_test_strings()
    differing = []
    for text in texts:
        ours = cake_run(cake, model, "--prompt", text, "--max-tokens", "1")["prompt_tokens"]
        # Special tokens parsed on both sides, as `cake run --prompt` and
        # llama.cpp's own programs read a prompt.
        theirs = llm.tokenize(text.encode(), add_bos=True, special=True)
        if ours != theirs:
            differing.append(f"{text!r}: cake {ours} llama.cpp {theirs}")
    return len(texts), differing


def llama_greedy(llm, prompt_tokens: list[int], count: int) -> list[int]:
    llm.reset()
    llm.eval(prompt_tokens)
    reply = []
    for _ in range(count):
        token = compare.greedy_token(llm)
        if token == llm.token_eos():
            break
        reply.append(token)
        llm.eval([token])
    return reply


def leading_equal(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def llama_logits_after(llm, tokens: list[int]):
    import llama_cpp
    import numpy as np

    llm.reset()
    llm.eval(tokens)
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),)).copy()


def compare_replies(cake: str, model: Path, llm, count: int) -> list[dict]:
    rows = []
    for prompt in PROMPTS:
        ours = cake_run(cake, model, "--prompt", prompt, "--max-tokens", str(count), "--temperature", "0")
        exact = cake_run(cake, model, "--prompt", prompt, "--max-tokens", str(count), "--temperature", "0",
                         "--dtype", "f32")["tokens"]
        theirs = llama_greedy(llm, ours["prompt_tokens"], count)
        same = next((i for i, (a, b) in enumerate(zip(ours["tokens"], theirs)) if a != b), min(len(ours["tokens"]), len(theirs)))
        margin = None
        if same < min(len(ours["tokens"]), len(theirs)):
            # How far apart the two choices were in llama.cpp's own logits there.
            logits = llama_logits_after(llm, ours["prompt_tokens"] + theirs[:same])
            margin = float(logits[theirs[same]] - logits[ours["tokens"][same]])
        rows.append({"prompt": prompt, "cake": ours["text"], "equal_leading": same, "margin": margin,
                     "cake_exact": leading_equal(ours["tokens"], exact), "llama_exact": leading_equal(theirs, exact),
                     "cake_tokens": len(ours["tokens"]), "llama_tokens": len(theirs),
                     "equal": ours["tokens"] == theirs})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cake", required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--reply-tokens", type=int, default=32)
    parser.add_argument("--nll-tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(args.model), n_ctx=1024, n_threads=args.threads, verbose=False)
    total, differing = compare_tokens(args.cake, args.model, llm)
    print(f"token ids: {total - len(differing)}/{total} strings equal")
    for line in differing:
        print("  " + line)
    replies = compare_replies(args.cake, args.model, llm, args.reply_tokens)
    print("\n| prompt | Cake's greedy reply | equal to llama.cpp's | leading tokens equal | "
          "where they part: llama.cpp's logit gap between the two choices | "
          "leading tokens equal to the exact F32 reply: Cake / llama.cpp |")
    print("|---|---|---|---|---|---|")
    for r in replies:
        gap = "" if r["margin"] is None else f"{r['margin']:.3f}"
        print(f"| {r['prompt']!r} | {r['cake']!r} | {'yes' if r['equal'] else 'no'} | "
              f"{r['equal_leading']}/{max(r['cake_tokens'], r['llama_tokens'])} | {gap} | "
              f"{r['cake_exact']} / {r['llama_exact']} |")
    text = (HERE / "market_town.txt").read_text()
    tokens = llm.tokenize(text.encode(), add_bos=True, special=False)[: args.nll_tokens]
    del llm
    acc = quant_types.accuracy(args.cake, args.model, tokens, args.threads)
    print(f"\nNLL over {len(tokens)} tokens of market_town.txt, against the exact F32 computation:")
    print("| Cake mean abs ΔNLL | llama.cpp mean abs ΔNLL | exact ppl | Cake ppl | llama.cpp ppl |")
    print("|---|---|---|---|---|")
    print(f"| {acc['cake_dnll']:.4f} | {acc['llama_dnll']:.4f} | {acc['exact_ppl']:.3f} | {acc['cake_ppl']:.3f} | "
          f"{acc['llama_ppl']:.3f} |")
    # Greedy replies on a quantized file part at near-ties (both engines then
    # differ from the exact reply too), so the bar is the tokens and the NLL.
    ok = not differing and acc["cake_dnll"] <= 1.25 * acc["llama_dnll"] + 0.005
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
