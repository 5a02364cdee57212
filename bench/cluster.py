#!/usr/bin/env python3
"""Decode speed on master + 2 workers over loopback against one process.

Starts two `cake worker` processes on 127.0.0.1 (no mDNS), caps memory so
the default model's layers split over all three processes, and compares
decode tok/s of `cake run` with the workers against `cake run` alone, in one
run, median of `--reps`. Also reports the bytes exchanged per decoded token.

    python bench/cluster.py --cake target/release/cake
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

KEY = "benchmark cluster key"


def default_model() -> Path:
    data = os.environ.get("CAKE_DATA_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME", os.path.expanduser("~/.local/share")), "cake"
    )
    return Path(data) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def start_worker(cake, name, max_memory, threads, data_dir):
    args = [cake, "worker", "--name", name, "--host", "127.0.0.1", "--port", "0", "--no-mdns", "--threads", str(threads)]
    if max_memory:
        args += ["--max-memory", str(max_memory)]
    env = dict(os.environ, CAKE_CLUSTER_KEY=KEY, CAKE_DATA_DIR=data_dir)
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env=env)
    for line in proc.stderr:
        if " ready on " in line:
            return proc, line.split(" ready on ")[1].split()[0]
    raise SystemExit(f"worker {name} did not start")


def run(cake, model, prompt, decode, threads, extra):
    args = [cake, "run", "--model", str(model), "--prompt-tokens", prompt, "--temperature", "0", "--ignore-eos",
            "--max-tokens", str(decode), "--threads", str(threads), "--json"] + extra
    out = subprocess.run(args, check=True, capture_output=True, text=True, env=dict(os.environ, CAKE_CLUSTER_KEY=KEY))
    return json.loads(out.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cake", default="target/release/cake")
    parser.add_argument("--model", type=Path, default=default_model())
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--worker-threads", type=int, default=None, help="threads per worker (default: --threads)")
    parser.add_argument("--decode", type=int, default=64)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()

    # Layer sizes from the file itself (via cake's own loader is not exposed to Python):
    # a third of the file per node is a fair approximation for this model.
    size = args.model.stat().st_size
    third = size // 3
    worker_threads = args.worker_threads or args.threads
    scratch = tempfile.TemporaryDirectory(prefix="cake-bench-")
    workers = [
        start_worker(args.cake, "a", third, worker_threads, os.path.join(scratch.name, "a")),
        start_worker(args.cake, "b", None, worker_threads, os.path.join(scratch.name, "b")),
    ]
    try:
        prompt = ",".join(str(1000 + i % 500) for i in range(16))
        cluster_flags = ["--max-memory", str(third + size // 6)]
        for _, address in workers:
            cluster_flags += ["--worker", address]
        # The first run streams the workers their weights; later runs find them cached.
        first = run(args.cake, args.model, prompt, 1, args.threads, cluster_flags)
        one_token = run(args.cake, args.model, prompt, 1, args.threads, cluster_flags)
        # Alternate the two setups so that a shared machine's changing load
        # weighs on both alike.
        single, cluster = [], []
        for _ in range(args.reps):
            single.append(run(args.cake, args.model, prompt, args.decode + 1, args.threads, []))
            cluster.append(run(args.cake, args.model, prompt, args.decode + 1, args.threads, cluster_flags))
        assert all(c["tokens"] == single[0]["tokens"] for c in cluster), "the cluster's greedy output differs"
        single_tps = statistics.median(r["timings"]["decode_tok_s"] for r in single)
        cluster_tps = statistics.median(r["timings"]["decode_tok_s"] for r in cluster)
        per_token = (cluster[0]["network_bytes"] - one_token["network_bytes"]) / args.decode
        print(f"model: {args.model.name}, {args.threads} threads on the master, {worker_threads} per worker, decode {args.decode} tokens, median of {args.reps}")
        print(f"weights streamed to the workers on the first run: {(first['network_bytes'] - one_token['network_bytes']) / 1e6:.1f} MB")
        print()
        print("| setup | decode tok/s | bytes per token |")
        print("|---|---|---|")
        print(f"| one process | {single_tps:.1f} | 0 |")
        print(f"| master + 2 workers (loopback) | {cluster_tps:.1f} | {per_token:.0f} |")
        print(f"| ratio | {cluster_tps / single_tps:.2f}x | |")
        # Where a cluster token's time goes (the last run; prefill included).
        last = cluster[-1]
        steps = args.decode + 1
        print()
        print("| stage | layers ms/step | round trip ms/step | transport ms/step |")
        print("|---|---|---|---|")
        for stage in last["stages"]:
            layers_ms = stage["layers_s"] * 1e3 / steps
            if "round_trips_s" in stage:
                trip_ms = stage["round_trips_s"] * 1e3 / steps
                print(f"| {stage['node']} | {layers_ms:.2f} | {trip_ms:.2f} | {trip_ms - layers_ms:.2f} |")
            else:
                print(f"| {stage['node']} (master) | {layers_ms:.2f} | | |")
    finally:
        for proc, _ in workers:
            proc.kill()
            proc.wait()
        scratch.cleanup()


if __name__ == "__main__":
    main()
