#!/usr/bin/env python3
"""Decode speed over 1, 2 and 3 machines on shaped networks.

Three "machines" are network namespaces on one bridge (bench/netlab.py),
their links shaped as a profile says: unshaped veth, a gigabit LAN
(1 Gbit/s, 0.3 ms round trip) or Wi-Fi (300 Mbit/s, 3 ± 1 ms). Two
`cake worker` processes (no mDNS) run in two of them; `cake run` in the
third decodes alone, with one worker and with both (hidden states hopping
from worker to worker, then back through the master after each; in f32,
then in f16), memory caps forcing an even split of the layers. Reports
decode tok/s (median of `--reps`, runs of
the setups alternated) beside the placement preview's prediction for the
same plan (`cake run --plan`), the ratio to one machine, and the
hidden-state bytes moved per decoded token. Then, through `cake serve` on
one machine and on three, the aggregate tok/s of 1, 2, 4 and 8 OpenAI
requests in flight at once (greedy, `--serve-tokens` each, generated
tokens over the wall time from the first request to the last answer,
median of `--reps`). Needs root (namespaces); the machines share
this computer's cores, so only one of them computes at a time (and the
cluster sends decode steps one at a time: they share a kernel).

The same requests through llama.cpp on the same file (bench/llama_batched.py,
one context with a sequence per request) give the peer's ratios.

Last, pipelined decode steps where machines do not share cores: with
`--pinned`, two machines of one core each (master and worker pinned to
cores 0 and 1 with `taskset`, one thread each) against one such machine
alone, the requests' steps sent one at a time and pipelined (each
machine working on a different half of the requests at once).

    .venv-bench/bin/python bench/cluster.py --cake target/release/cake

(the interpreter of `make bench`'s venv, which has llama-cpp-python).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from netlab import PROFILES, Network  # noqa: E402

KEY = "benchmark cluster key"
PORT = 7410
SERVE_PORT = 7480
CONCURRENCY = (1, 2, 4, 8)
SERVE_PROMPTS = [
    "Tell me a long story about a dragon.", "Write a long essay about the sea.",
    "Describe a city at night in detail.", "Explain how bread is baked, step by step.",
    "Tell me a long story about a robot.", "Write about the history of ships.",
    "Describe a forest in autumn.", "Explain how a car engine works.",
]


def default_model() -> Path:
    data = os.environ.get("CAKE_DATA_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME", os.path.expanduser("~/.local/share")), "cake"
    )
    return Path(data) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def start_worker(net, host, cake, name, max_memory, threads, data_dir, core=None):
    args = pinned(core) + [cake, "worker", "--name", name, "--host", net.address(host), "--port", str(PORT), "--no-mdns",
            "--threads", str(threads)]
    if max_memory:
        args += ["--max-memory", str(max_memory)]
    env = dict(os.environ, CAKE_CLUSTER_KEY=KEY, CAKE_DATA_DIR=data_dir)
    proc = net.popen(host, args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    for line in proc.stderr:
        if " ready on " in line:
            return
    raise SystemExit(f"worker {name} did not start")


def pinned(core):
    """The command prefix that keeps a process on `core` (none if None)."""
    return [] if core is None else ["taskset", "-c", str(core)]


def run(net, cake, model, prompt, decode, threads, extra):
    args = [cake, "run", "--model", str(model), "--prompt-tokens", prompt, "--temperature", "0", "--ignore-eos",
            "--max-tokens", str(decode), "--threads", str(threads), "--json"] + extra
    out = net.run(0, args, check=True, capture_output=True, text=True, env=dict(os.environ, CAKE_CLUSTER_KEY=KEY))
    return json.loads(out.stdout)


def predicted(net, cake, model, threads, extra, machines):
    """The preview's predicted decode tok/s for the plan over `machines` (`cake run --plan`)."""
    args = [cake, "run", "--model", str(model), "--plan", "--json", "--threads", str(threads)] + extra
    out = net.run(0, args, check=True, capture_output=True, text=True, env=dict(os.environ, CAKE_CLUSTER_KEY=KEY))
    preview = json.loads(out.stdout)
    option = next(o for o in preview["options"] if len(o["machines"]) == machines and o["prediction"])
    return option["prediction"]["decode_tokens_per_second"]


def client_main(base: str, model: str, requests: int, max_tokens: int) -> None:
    """(Run inside the master's namespace.) Sends `requests` chat requests
    at once and prints the generated tokens and the wall time as JSON."""
    counts = [0] * requests

    def ask(i):
        body = json.dumps({"model": model, "temperature": 0, "max_tokens": max_tokens,
                           "messages": [{"role": "user", "content": SERVE_PROMPTS[i % len(SERVE_PROMPTS)]}]}).encode()
        request = urllib.request.Request(f"{base}/v1/chat/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as response:
            counts[i] = json.load(response)["usage"]["completion_tokens"]

    start = time.perf_counter()
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(requests)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"tokens": sum(counts), "seconds": time.perf_counter() - start}))


def aggregate(net, args, flags, data_dir, threads=None, core=None):
    """Aggregate tok/s of `cake serve` (on host 0, with `flags`, `threads`
    of its own, on `core` if one is given) for each number of requests in
    flight: {requests: median tok/s}."""
    env = dict(os.environ, CAKE_CLUSTER_KEY=KEY, CAKE_DATA_DIR=data_dir, HF_HUB_CACHE=os.path.join(data_dir, "hf"))
    threads = threads or args.threads
    serve = net.popen(0, pinned(core) + [args.cake, "serve", "--host", "127.0.0.1", "--port", str(SERVE_PORT),
                                         "--model", str(args.model), "--threads", str(threads)] + flags,
                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    base = None
    for line in serve.stdout:
        if line.startswith("Cake is serving on "):
            base = line.split("on ", 1)[1].strip().rstrip("/")
            break
    if base is None:
        raise SystemExit("cake serve did not start")

    def measure(requests):
        out = net.run(0, [sys.executable, __file__, "--client", base, args.model.name, str(requests),
                          str(args.serve_tokens)],
                      check=True, capture_output=True, text=True)
        result = json.loads(out.stdout)
        return result["tokens"] / result["seconds"]

    try:
        measure(1)  # loads the model (and streams the workers their weights)
        rates = {n: [] for n in CONCURRENCY}
        for _ in range(args.reps):
            for n in CONCURRENCY:
                rates[n].append(measure(n))
        return {n: statistics.median(r) for n, r in rates.items()}
    finally:
        serve.terminate()
        serve.wait()


def llama_cpp_rates(args):
    """llama.cpp's aggregate tok/s for the same requests on the same file
    and threads (one machine): {requests: median tok/s}."""
    try:
        from llama_batched import aggregate_rates
        return aggregate_rates(str(args.model), args.threads, SERVE_PROMPTS, CONCURRENCY, args.serve_tokens,
                               args.reps)
    except ImportError as error:
        raise SystemExit(f"the llama.cpp peer needs llama-cpp-python and numpy (run with make bench's "
                         f".venv-bench/bin/python): {error}")


def measure_profile(args, profile, subnet):
    """Rows of (machines, tok/s, bytes per token, stages of the last run) on `profile`."""
    # Layer sizes from the file itself (cake's own loader is not exposed to
    # Python): a share of the file per machine is close enough for this
    # model. Plans also count each machine's KV cache at full context and one
    # prefill chunk's working memory (about 35 MB here), hence the headroom
    # and the short context.
    size = args.model.stat().st_size
    headroom = 50_000_000
    third, half = size // 3 + headroom, size // 2 + headroom
    scratch = tempfile.TemporaryDirectory(prefix="cake-bench-")
    with Network(3, profile, subnet) as net:
        start_worker(net, 1, args.cake, "a", third, args.worker_threads, os.path.join(scratch.name, "a"))
        start_worker(net, 2, args.cake, "b", None, args.worker_threads, os.path.join(scratch.name, "b"))
        # Each worker behind a delaying relay of its own, which the master and
        # the other worker both go through: hidden states hopping from worker
        # to worker cross a link as slow as the master's.
        a, b = (net.reach_from_all(host, PORT) for host in (1, 2))
        rtt_ms = net.round_trip_ms(1)
        common = ["--ctx", str(args.ctx)]
        three = ["--max-memory", str(third + size // 6), "--worker", a, "--worker", b]
        setups = {
            "1": common,
            "2": common + ["--max-memory", str(half), "--worker", b],
            "3": common + three,
            "3, through the master": common + three + ["--hidden-route", "through-master"],
            "3, f16 on the wire": common + three + ["--wire", "f16"],
        }
        prompt = ",".join(str(1000 + i % 500) for i in range(16))
        one_token = {}
        for machines, flags in setups.items():
            # The first run streams the workers their weights; the second
            # measures what one token costs, to leave out of the per-token bytes.
            run(net, args.cake, args.model, prompt, 1, args.threads, flags)
            one_token[machines] = min(
                run(net, args.cake, args.model, prompt, 1, args.threads, flags)["network_bytes"] for _ in range(2)
            )
        predictions = {
            machines: predicted(net, args.cake, args.model, args.threads, flags, int(machines[0]))
            for machines, flags in setups.items()
        }
        results = {machines: [] for machines in setups}
        for _ in range(args.reps):
            for machines, flags in setups.items():
                results[machines].append(run(net, args.cake, args.model, prompt, args.decode + 1, args.threads, flags))
        served = {machines: aggregate(net, args, setups[machines], os.path.join(scratch.name, f"serve-{machines}"))
                  for machines in ("1", "3")}
    scratch.cleanup()
    reference = results["1"][0]["tokens"]
    for machines, runs in results.items():
        same = all(r["tokens"] == reference for r in runs)
        # f16 hidden states may change tokens with int8 activations (docs/cluster.md); f32 ones never.
        assert same or "f16" in machines, f"{machines} machines changed the greedy output"
        if not same:
            print(f"note: {machines}: greedy tokens differ from one machine's")
    rows = []
    for machines, runs in results.items():
        tps = statistics.median(r["timings"]["decode_tok_s"] for r in runs)
        # A run whose plan differs from the last one's re-sends weights: the
        # smallest figures are the tokens' own traffic.
        per_token = (min(r["network_bytes"] for r in runs) - one_token[machines]) / args.decode
        rows.append((machines, tps, per_token, runs[-1]["stages"], predictions[machines]))
    return rows, rtt_ms, served


def measure_pipelining(args, profile, subnet):
    """Aggregate tok/s on two one-core machines (cores 0 and 1) against one:
    {setup: {requests: tok/s}}."""
    size = args.model.stat().st_size
    half = size // 2 + 50_000_000
    scratch = tempfile.TemporaryDirectory(prefix="cake-bench-")
    with Network(2, profile, subnet) as net:
        start_worker(net, 1, args.cake, "a", None, 1, os.path.join(scratch.name, "a"), core=1)
        two = ["--ctx", str(args.ctx), "--max-memory", str(half), "--worker", net.reach_from_all(1, PORT)]
        setups = {
            "1": ["--ctx", str(args.ctx)],
            "2, one step at a time": two + ["--decode-steps", "one-at-a-time"],
            "2, pipelined": two + ["--decode-steps", "pipelined"],
        }
        served = {name: aggregate(net, args, flags, os.path.join(scratch.name, f"serve-{i}"), threads=1, core=0)
                  for i, (name, flags) in enumerate(setups.items())}
    scratch.cleanup()
    return served


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cake", default="target/release/cake")
    parser.add_argument("--model", type=Path, default=default_model())
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--worker-threads", type=int, default=2)
    parser.add_argument("--decode", type=int, default=64)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--ctx", type=int, default=1024, help="context the cluster plans its caches for")
    parser.add_argument("--profiles", default="unshaped,gigabit,wifi")
    parser.add_argument("--serve-tokens", type=int, default=64, help="tokens each concurrent request generates")
    parser.add_argument("--pinned", action="store_true",
                        help="also measure pipelined steps on two one-core machines (cores 0 and 1)")
    if sys.argv[1:2] == ["--client"]:
        client_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return
    args = parser.parse_args()
    args.cake = os.path.abspath(args.cake)
    if os.geteuid() != 0:
        raise SystemExit("bench/cluster.py needs root: it builds network namespaces")

    print(f"model: {args.model.name}, {args.threads} threads on the master, {args.worker_threads} per worker, "
          f"decode {args.decode} tokens, median of {args.reps}, context {args.ctx}")
    print()
    print("| network | measured round trip | machines | decode tok/s | predicted | predicted / measured | vs one machine | bytes per token |")
    print("|---|---|---|---|---|---|---|---|")
    stages = {}
    served = {}
    for subnet, name in enumerate(filter(None, args.profiles.split(",")), start=1):
        profile = PROFILES[name]
        rows, rtt_ms, served[profile.name] = measure_profile(args, profile, subnet)
        single = rows[0][1]
        for machines, tps, per_token, _, guess in rows:
            print(f"| {profile.name} | {rtt_ms:.2f} ms | {machines} | {tps:.1f} | {guess:.1f} | {guess / tps:.2f} "
                  f"| {tps / single:.2f}x | {per_token:.0f} |", flush=True)
        stages[profile.name] = rows[2][3]
    # Requests in flight together through cake serve.
    print()
    print(f"Aggregate tok/s through `cake serve`, {args.serve_tokens} tokens per request (ratio: to one request "
          "on the same machines; to one request on one machine):")
    print()
    print("| network | machines | " + " | ".join(f"{n} in flight" for n in CONCURRENCY) + " |")
    print("|---|---|" + "---|" * len(CONCURRENCY))
    for network, by_machines in served.items():
        alone = by_machines["1"][1]
        for machines, rates in by_machines.items():
            cells = [f"{rates[n]:.1f} ({rates[n] / rates[1]:.2f}x; {rates[n] / alone:.2f}x)" for n in CONCURRENCY]
            print(f"| {network} | {machines} | " + " | ".join(cells) + " |")
    peer = llama_cpp_rates(args)
    cells = [f"{peer[n]:.1f} ({peer[n] / peer[1]:.2f}x)" for n in CONCURRENCY]
    print("| (none) | llama.cpp, 1 | " + " | ".join(cells) + " |")
    if args.pinned:
        print()
        print("Pipelined decode steps on machines of one core each (aggregate tok/s through `cake serve`; ratio to "
              "one request on one machine):")
        print()
        print("| network | machines | " + " | ".join(f"{n} in flight" for n in CONCURRENCY) + " |")
        print("|---|---|" + "---|" * len(CONCURRENCY))
        for subnet, name in enumerate(filter(None, args.profiles.split(",")), start=10):
            profile = PROFILES[name]
            rates = measure_pipelining(args, profile, subnet)
            alone = rates["1"][1]
            for machines, by_n in rates.items():
                cells = [f"{by_n[n]:.1f} ({by_n[n] / alone:.2f}x)" for n in CONCURRENCY]
                print(f"| {profile.name} | {machines} | " + " | ".join(cells) + " |", flush=True)
    # Where a 3-machine token's time goes (the last run; prefill included).
    steps = args.decode + 1
    print()
    print("| network | stage | layers | KV cache MB | layers ms/step | round trip ms/step | transport ms/step |")
    print("|---|---|---|---|---|---|---|")
    for network, last in stages.items():
        for stage in last:
            layers_ms = stage["layers_s"] * 1e3 / steps
            kv = f"{stage['kv_bytes'] / 1e6:.1f}" if "kv_bytes" in stage else "(not reported)"
            held = f"{stage['layers'][0]}-{stage['layers'][1] - 1} | {kv}"
            if "round_trips_s" in stage:
                trip_ms = stage["round_trips_s"] * 1e3 / steps
                print(f"| {network} | {stage['node']} | {held} | {layers_ms:.2f} | {trip_ms:.2f} | {trip_ms - layers_ms:.2f} |")
            else:
                print(f"| {network} | {stage['node']} (this machine) | {held} | {layers_ms:.2f} | | |")


if __name__ == "__main__":
    main()
