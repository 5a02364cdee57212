#!/usr/bin/env python3
"""Time to first token of each turn of a 10-turn conversation through
`cake serve`'s OpenAI API, the client resending the whole history each turn
(as OpenAI clients do). With the kept session a later turn reads only its
new tokens, so its time to first token should not grow with the history.

The conversation is held `--reps` times over (greedy, so every time alike);
prints per turn: prompt tokens, tokens reused from the cache, and the median
time to first token (streamed, from the request to the first content
chunk). A turn whose reply differs between repetitions is reported.

    python bench/chat_turns.py --cake target/release/cake [--turns 10] [--reps 5] [--max-tokens 64] [--model FILE.gguf]

Without `--model` it runs the default model; with it, `cake serve --model`
loads that file (e.g. the 1B shape `bench/large_models.py` writes).
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUESTIONS = [
    "Tell me about the history of bread in three sentences.",
    "How did sourdough come about?",
    "What changed with industrial baking?",
    "Which grains besides wheat make good bread?",
    "How does rye behave differently from wheat?",
    "What is the role of salt in dough?",
    "Why do some breads have a hard crust?",
    "How long should a dough rest, and why?",
    "What makes a baguette different from a loaf of sandwich bread?",
    "Summarise everything we discussed in two sentences.",
]


def start_server(cake: str, data: Path, model: Path | None):
    env = dict(os.environ, CAKE_DATA_DIR=str(data), HF_HUB_CACHE=str(data / "hf"))
    extra = ["--model", str(model)] if model else []
    proc = subprocess.Popen([cake, "serve", "--host", "127.0.0.1", "--port", "0", *extra], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        if line.startswith("Cake is serving on "):
            return proc, line.split("on ", 1)[1].strip().rstrip("/")
    raise SystemExit("cake serve did not start")


def served_model(base: str, wanted: Path | None) -> str:
    """The id `/v1/models` gives the model to run."""
    if wanted is None:
        return "default"
    with urllib.request.urlopen(f"{base}/v1/models", timeout=60) as response:
        ids = [entry["id"] for entry in json.load(response)["data"]]
    matching = [i for i in ids if wanted.stem in i or str(wanted) in i]
    if not matching:
        raise SystemExit(f"{wanted} is not among the served models: {ids}")
    return matching[0]


def turn(base: str, model: str, messages, max_tokens: int):
    body = json.dumps({"model": model, "messages": messages, "stream": True, "temperature": 0,
                       "max_tokens": max_tokens, "stream_options": {"include_usage": True}}).encode()
    request = urllib.request.Request(f"{base}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    first, text, usage = None, "", None
    with urllib.request.urlopen(request, timeout=600) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk.get("choices", []):
                piece = choice.get("delta", {}).get("content")
                if piece:
                    first = first or time.perf_counter() - start
                    text += piece
    return first, text, usage


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cake", default="target/release/cake")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--model", type=Path, default=None, help="a GGUF file instead of the default model")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        data = Path(root)
        (data / "models").mkdir()
        model = Path(os.environ.get("CAKE_DATA_DIR", Path.home() / ".local/share/cake")) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
        (data / "models" / model.name).symlink_to(model)
        proc, base = start_server(args.cake, data, args.model)
        try:
            model_id = served_model(base, args.model)
            # Per turn: time to first token of each repetition, and the reply and usage of the first.
            times = [[] for _ in QUESTIONS[: args.turns]]
            first_run = []
            for _ in range(args.reps):
                # Loads the model the first time; later, leaves the engine a
                # session unrelated to the conversation, as before the first.
                turn(base, model_id, [{"role": "user", "content": "Hi"}], 1)
                messages = [{"role": "system", "content": "You are a helpful baker."}]
                for i, question in enumerate(QUESTIONS[: args.turns]):
                    messages.append({"role": "user", "content": question})
                    ttft, text, usage = turn(base, model_id, messages, args.max_tokens)
                    times[i].append(ttft)
                    if len(first_run) <= i:
                        first_run.append((text, usage))
                    elif text != first_run[i][0]:
                        print(f"turn {i + 1}: the reply differs between repetitions", flush=True)
                    messages.append({"role": "assistant", "content": text})
            print(f"| turn | prompt tokens | reused | time to first token, ms (median of {args.reps}) |")
            print("|---|---|---|---|")
            medians = [statistics.median(t) for t in times]
            for i, ((_, usage), median) in enumerate(zip(first_run, medians), 1):
                reused = usage["prompt_tokens_details"]["cached_tokens"]
                print(f"| {i} | {usage['prompt_tokens']} | {reused} | {1000 * median:.1f} |")
            print(f"\nturn {args.turns} / turn 1 time to first token: {medians[-1] / medians[0]:.2f}x")
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
