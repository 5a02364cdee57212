#!/usr/bin/env python3
"""Decode speed with and without a JSON schema, Cake beside llama.cpp.

The same prompt on the default model, greedy, 128 new tokens: free text,
and constrained to a schema long enough to fill the budget (an object
holding 40 short strings). Cake through `cake serve` (Ollama's `/api/chat`,
whose `eval_count`/`eval_duration` time the tokens after the first);
llama.cpp through llama-cpp-python's chat completion with the same schema
as `response_format` (its grammar sampler), timed from the first streamed
token to the last. Prints the median of `--reps` runs of each and the
slowdown the schema costs each engine.

    python bench/structured_output.py --cake target/release/cake [--reps 5] [--threads 2]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "e2e"))
from serve_process import data_dir_with_default_model, default_model  # noqa: E402

PROMPT = "List forty fruits."
TOKENS = 128
SCHEMA = {
    "type": "object",
    "properties": {"fruits": {"type": "array", "items": {"type": "string", "maxLength": 24},
                              "minItems": 40, "maxItems": 40}},
    "required": ["fruits"],
}


def start_cake(cake: str, data: Path, threads: int):
    env = dict(os.environ, CAKE_DATA_DIR=str(data), HF_HUB_CACHE=str(data / "hf"), RAYON_NUM_THREADS=str(threads))
    proc = subprocess.Popen([cake, "serve", "--host", "127.0.0.1", "--port", "0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        if line.startswith("Cake is serving on "):
            return proc, line.split("on ", 1)[1].strip().rstrip("/")
    raise SystemExit("cake serve did not start")


def cake_decode(base: str, schema) -> tuple[float, int]:
    body = {"model": "default", "messages": [{"role": "user", "content": PROMPT}], "stream": False,
            "options": {"temperature": 0, "num_predict": TOKENS}}
    if schema is not None:
        body["format"] = schema
    request = urllib.request.Request(f"{base}/api/chat", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        reply = json.loads(response.read())
    return (reply["eval_count"] - 1) / (reply["eval_duration"] / 1e9), reply["eval_count"]


def llama_decode(llm, schema) -> tuple[float, int]:
    extra = {} if schema is None else {"response_format": {"type": "json_object", "schema": schema}}
    stamps = []
    for chunk in llm.create_chat_completion(messages=[{"role": "user", "content": PROMPT}], max_tokens=TOKENS,
                                            temperature=0, stream=True, **extra):
        if chunk["choices"][0]["delta"].get("content"):
            stamps.append(time.perf_counter())
    return (len(stamps) - 1) / (stamps[-1] - stamps[0]), len(stamps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cake", required=True)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = start_cake(args.cake, data_dir_with_default_model(Path(tmp)), args.threads)
        try:
            cake_decode(base, None)  # loads the model
            for name, schema in [("free", None), ("schema", SCHEMA)]:
                runs = [cake_decode(base, schema) for _ in range(args.reps)]
                results[("cake", name)] = (statistics.median(r[0] for r in runs), runs[0][1])
        finally:
            proc.kill()
            proc.wait()

    from llama_cpp import Llama

    llm = Llama(model_path=str(default_model()), n_threads=args.threads, n_ctx=2048, verbose=False)
    llama_decode(llm, None)
    for name, schema in [("free", None), ("schema", SCHEMA)]:
        runs = [llama_decode(llm, schema) for _ in range(args.reps)]
        results[("llama.cpp", name)] = (statistics.median(r[0] for r in runs), runs[0][1])

    print(f"decode tok/s, {TOKENS} new tokens, greedy, {args.threads} threads, median of {args.reps}")
    print(f"{'engine':10} {'free':>8} {'schema':>8} {'schema costs':>13} {'tokens free/schema':>19}")
    for engine in ("cake", "llama.cpp"):
        (free, free_n), (schema, schema_n) = results[(engine, "free")], results[(engine, "schema")]
        print(f"{engine:10} {free:8.1f} {schema:8.1f} {100 * (1 - schema / free):12.1f}% {free_n:>10}/{schema_n}")
    cake_schema, llama_schema = results[("cake", "schema")][0], results[("llama.cpp", "schema")][0]
    print(f"cake / llama.cpp with the schema: {cake_schema / llama_schema:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
