#!/usr/bin/env python3
"""A bounded soak test of `cake serve` over a cluster whose worker keeps dying (issue 46).

Starts, on loopback only, one `cake worker` and a `cake serve` that spreads
the default model over itself and that worker (the master's `--max-memory`
is a third of the model file plus some headroom, so the worker holds
layers), each with a temporary data folder of its own. Then, for
`--minutes`:

- `--clients` threads (16) loop streaming OpenAI chat completions
  (`/v1/chat/completions`, max_tokens 32, temperature 0.7, varied short
  prompts); a quarter of them close the socket after a few chunks;
- one thread saves a conversation through `/api/save_conversation` in a
  loop, remembering the last version acknowledged; at the end
  `/api/get_conversation` must return that version or a newer one (else
  the difference counts as lost saves);
- every `--kill-every` seconds the worker is killed (SIGKILL) and, after
  `--restart-after` seconds, started again on the same port.

Failures are counted by kind (HTTP status, an error chunk inside a 200
stream, a connection error, a timeout, a stream cut short). Those that
come from a worker's loss (a 503 with Retry-After, an error naming the
lost worker or an unreachable one, while a worker is down or within
`--recovery-grace` seconds of its restart) are "expected"; all others are
"unexpected". Also measured: time to first token (p50, p99), and the
`cake serve` process's RSS (VmRSS) and open file descriptors after warm-up
(the first completed request) and at the end, with their growth.

Prints a JSON summary and a short table; exits 1 if a save was lost, an
unexpected failure happened, or RSS grew by 5 % or more. Child processes
are always stopped; no traffic leaves 127.0.0.1. Standard library only:

    python3 bench/soak.py --minutes 10
    python3 bench/soak.py --minutes 2 --kill-every 40 --cake target/debug/cake
"""

import argparse
import http.client
import json
import math
import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

KEY = "cake soak test cluster key, loopback only"
HOST = "127.0.0.1"
WORKER_NAME = "soak-worker"
CONVERSATION_ID = "soak-saves"
RSS_GROWTH_LIMIT_PCT = 5.0
SAMPLE_EVERY_S = 10.0
END_MARGIN_S = 10.0  # no worker kill whose restart comes closer than this to the deadline
PROMPTS = [
    "Say hello in French.", "Name a color.", "What is two plus two?", "Give me a word that rhymes with cat.",
    "Name a river in Europe.", "Tell me a fun fact about cats.", "What is the capital of Italy?",
    "Write a haiku about rain.", "Name three fruits.", "What day comes after Monday?",
    "Describe the sea in one sentence.", "Suggest a name for a dog.", "Count to five.",
    "What is bread made of?", "Give me one tip for sleeping well.", "Name a planet.",
]
# An error that says a worker is gone (the master names it, or the
# addresses it cannot reach).
LOSS_MESSAGE = re.compile(r"lost worker|unreachable|worker .*(lost|gone|closed)|connection (reset|refused|closed)",
                          re.IGNORECASE)


# ---------------------------------------------------------------- processes

def default_cake() -> str:
    release = Path("target/release/cake")
    return str(release if release.exists() else Path("target/debug/cake"))


def default_model() -> Path:
    if os.environ.get("CAKE_TEST_MODEL"):
        return Path(os.environ["CAKE_TEST_MODEL"])
    data = os.environ.get("XDG_DATA_HOME", os.path.expanduser("~/.local/share"))
    return Path(data) / "cake" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def data_dir_with_model(root: Path, model: Path) -> Path:
    """A data folder whose `models/` holds a link to `model` under the default model's name."""
    data = root / "serve-data"
    (data / "models").mkdir(parents=True)
    (data / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf").symlink_to(model.resolve())
    return data


def drain_lines(stream) -> "queue.Queue[str | None]":
    """Reads `stream` to its end on a thread of its own (so the child never
    blocks on a full pipe); its lines arrive on the returned queue, then None."""
    lines: "queue.Queue[str | None]" = queue.Queue()

    def pump():
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def wait_for_line(lines: "queue.Queue[str | None]", parse, timeout: float):
    """The first non-None `parse(line)` among `lines` within `timeout` seconds, else None."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            return None
        if line is None:
            return None
        if (found := parse(line)) is not None:
            return found
    return None


def ready_address(line: str):
    """A `cake worker` readiness line (`{"ready": "<address>"}`) gives its address."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value.get("ready") if isinstance(value, dict) else None


def serving_base(line: str):
    prefix = "Cake is serving on "
    return line[len(prefix):].strip().rstrip("/") if line.startswith(prefix) else None


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop(process: subprocess.Popen | None) -> None:
    """Kills a child of ours (if still running) and reaps it."""
    if process is None or process.poll() is not None:
        return
    process.kill()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class Worker:
    """The `cake worker` process, which can be killed and started again on its port."""

    def __init__(self, cake: str, root: Path):
        self.cake = cake
        self.data = root / "worker-data"
        self.data.mkdir()
        self.log = root / "worker.log"
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.address = ""

    def start(self, attempts: int = 5) -> None:
        """Starts the worker (on its old port, after the first time) and waits until it is ready."""
        for _ in range(attempts):
            if self._try_start():
                return
            time.sleep(1)
        raise RuntimeError(f"cake worker did not start on port {self.port}:\n{tail(self.log)}")

    def _try_start(self) -> bool:
        env = dict(os.environ, CAKE_DATA_DIR=str(self.data), CAKE_CLUSTER_KEY=KEY, RAYON_NUM_THREADS="1")
        command = [self.cake, "worker", "--name", WORKER_NAME, "--host", HOST, "--port", str(self.port), "--no-mdns"]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
        address = wait_for_line(drain_lines(self.process.stdout), ready_address, timeout=60)
        if address is None:
            stop(self.process)
            return False
        self.address = address
        self.port = int(address.rsplit(":", 1)[1])
        return True

    def kill(self) -> None:
        """SIGKILL, as a crash or a pulled plug would."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        stop(self.process)


def start_serve(cake: str, root: Path, model: Path, worker: Worker, max_memory: int, ctx: int):
    """Starts `cake serve` on a free loopback port over `worker`; (process, port, log path)."""
    data = data_dir_with_model(root, model)
    log = root / "serve.log"
    env = dict(os.environ, CAKE_DATA_DIR=str(data), HF_HUB_CACHE=str(root / "hf"), RAYON_NUM_THREADS="2",
               CAKE_CLUSTER_KEY=KEY)
    command = [cake, "serve", "--host", HOST, "--port", "0", "--worker", worker.address, "--ctx", str(ctx)]
    if max_memory:
        command += ["--max-memory", str(max_memory)]
    with open(log, "wb") as log_file:
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=log_file, text=True)
    base = wait_for_line(drain_lines(process.stdout), serving_base, timeout=60)
    if base is None:
        stop(process)
        raise RuntimeError(f"cake serve did not start:\n{tail(log)}")
    return process, int(base.rsplit(":", 1)[1]), log


# ---------------------------------------------------------------- HTTP

def request(port: int, method: str, path: str, body=None, headers=None, timeout: float = 120):
    """One request to 127.0.0.1:`port`; (status, headers, parsed JSON body or text)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        all_headers = dict(headers or {})
        if data is not None:
            all_headers["content-type"] = "application/json"
        conn.request(method, path, body=data, headers=all_headers)
        response = conn.getresponse()
        raw = response.read().decode(errors="replace")
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw
        return response.status, response.headers, parsed
    finally:
        conn.close()


def session_cookie(port: int) -> str:
    """`name=value` of the session cookie the UI's page (`GET /`) hands out."""
    _, headers, _ = request(port, "GET", "/")
    cookie = headers.get("set-cookie")
    if not cookie:
        raise RuntimeError("GET / set no session cookie")
    return cookie.split(";", 1)[0].strip()


def call_api(port: int, cookie: str, command: str, args: dict, timeout: float = 120):
    """An app command (`POST /api/<command>`): (status, parsed body)."""
    status, _, body = request(port, "POST", f"/api/{command}", args, {"cookie": cookie}, timeout)
    return status, body


def error_message(body) -> str:
    """The message of an OpenAI-shaped error body (or the body itself)."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", ""))
    return str(body)[:300]


# ---------------------------------------------------------------- what happened

class Outcome:
    """How one request ended: "completed", "disconnected" (on purpose) or "failed" (with a kind)."""

    def __init__(self, result: str, kind: str = "", message: str = "", ttft: float | None = None,
                 retry_after: float | None = None, notices: int = 0):
        self.result, self.kind, self.message = result, kind, message
        self.ttft, self.retry_after, self.notices = ttft, retry_after, notices
        self.ended = time.monotonic()


class Stats:
    """Counters every thread adds to, and the worker's loss windows."""

    def __init__(self, recovery_grace: float):
        self.lock = threading.Lock()
        self.recovery_grace = recovery_grace
        self.completed = 0
        self.disconnected = 0
        self.notices = 0
        self.ttfts: list[float] = []
        self.failures = {"expected": {}, "unexpected": {}}
        self.examples: dict[str, list[str]] = {}
        self.first_completed = threading.Event()
        # Each kill: when, when the worker was back, and seconds from then to the next completed request.
        self.losses: list[dict] = []

    def worker_killed(self) -> None:
        with self.lock:
            self.losses.append({"killed": time.monotonic(), "restarted": None, "recovered_after_s": None})

    def worker_restarted(self) -> None:
        with self.lock:
            self.losses[-1]["restarted"] = time.monotonic()

    def during_loss(self, when: float) -> bool:
        """Whether a worker was down at `when`, or restarted less than the grace period before."""
        return any(loss["killed"] <= when and (loss["restarted"] is None
                                               or when <= loss["restarted"] + self.recovery_grace)
                   for loss in self.losses)

    def record(self, outcome: Outcome) -> None:
        with self.lock:
            self.notices += outcome.notices
            if outcome.ttft is not None:
                self.ttfts.append(outcome.ttft)
            if outcome.result == "completed":
                self.completed += 1
                self._note_recovery(outcome.ended)
                self.first_completed.set()
            elif outcome.result == "disconnected":
                self.disconnected += 1
            else:
                self._count_failure(outcome)

    def record_failure(self, kind: str, message: str, expected: bool = False) -> None:
        """A failure outside the chat streams (saving, the server dying)."""
        with self.lock:
            self._add(kind, message, expected)

    def _count_failure(self, outcome: Outcome) -> None:
        """Only the server's own answers can be expected: a 503 with Retry-After,
        or an error (status or chunk) that names a lost worker, during a loss."""
        answered = outcome.kind.startswith("http_") or outcome.kind == "error_chunk"
        loss_shaped = (outcome.kind == "http_503" and outcome.retry_after is not None) or bool(
            LOSS_MESSAGE.search(outcome.message))
        self._add(outcome.kind, outcome.message, answered and loss_shaped and self.during_loss(outcome.ended))

    def _add(self, kind: str, message: str, expected: bool) -> None:
        bucket = self.failures["expected" if expected else "unexpected"]
        bucket[kind] = bucket.get(kind, 0) + 1
        examples = self.examples.setdefault(f"{'expected' if expected else 'unexpected'} {kind}", [])
        if len(examples) < 3 and message[:300] not in examples:
            examples.append(message[:300])

    def _note_recovery(self, when: float) -> None:
        """The first completion after a restart closes that loss: how long it took."""
        last = self.losses[-1] if self.losses else None
        if last and last["restarted"] is not None and last["recovered_after_s"] is None and when >= last["restarted"]:
            last["recovered_after_s"] = round(when - last["restarted"], 2)


# ---------------------------------------------------------------- clients

def chat_body(prompt: str) -> dict:
    return {"model": "default", "stream": True, "max_tokens": 32, "temperature": 0.7,
            "messages": [{"role": "user", "content": prompt}]}


def stream_chat(port: int, prompt: str, disconnect_after: int | None, timeout: float) -> Outcome:
    """Streams one chat completion; closes the socket after `disconnect_after`
    content chunks if given. Never takes much longer than `timeout` seconds."""
    started = time.monotonic()
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    response = None
    ttft, chunks, notices, error = None, 0, 0, None
    try:
        conn.connect()
        sock = conn.sock
        conn.request("POST", "/v1/chat/completions", body=json.dumps(chat_body(prompt)).encode(),
                     headers={"content-type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            retry_after = response.headers.get("retry-after")
            body = response.read().decode(errors="replace")
            try:
                body = json.loads(body)
            except ValueError:
                pass
            return Outcome("failed", f"http_{response.status}", error_message(body),
                           retry_after=float(retry_after) if retry_after else None)
        while True:
            if time.monotonic() - started > timeout:
                return Outcome("failed", "timeout", f"no end after {timeout:.0f} s", ttft, notices=notices)
            line = response.readline()
            if not line:
                return Outcome("failed", "truncated_stream", f"ended without [DONE] after {chunks} chunks", ttft,
                               notices=notices)
            line = line.decode(errors="replace").rstrip("\r\n")
            if line.startswith(":"):
                notices += "notice" in line
                continue
            if not line.startswith("data:"):
                continue
            data = line[len("data:"):].strip()
            if data == "[DONE]":
                break
            event = json.loads(data)
            if "error" in event:
                error = error_message(event)
                continue
            for choice in event.get("choices", []):
                if choice.get("finish_reason") == "error" and error is None:
                    error = "finish_reason error"
                if choice.get("delta", {}).get("content"):
                    chunks += 1
                    ttft = ttft if ttft is not None else time.monotonic() - started
            if disconnect_after is not None and chunks >= disconnect_after:
                sock.shutdown(socket.SHUT_RDWR)  # the client goes away mid-stream
                return Outcome("disconnected", ttft=ttft, notices=notices)
        if error is not None:
            return Outcome("failed", "error_chunk", error, ttft, notices=notices)
        return Outcome("completed", ttft=ttft, notices=notices)
    except (socket.timeout, TimeoutError):
        return Outcome("failed", "timeout", f"no answer within {timeout:.0f} s", ttft, notices=notices)
    except ValueError as e:
        return Outcome("failed", "bad_chunk", str(e), ttft, notices=notices)
    except (OSError, http.client.HTTPException) as e:
        return Outcome("failed", "connection_error", f"{type(e).__name__}: {e}", ttft, notices=notices)
    finally:
        if response is not None:
            response.close()
        conn.close()


def client_loop(index: int, port: int, deadline: float, timeout: float, disconnects: bool, stats: Stats) -> None:
    """Streams chats one after another until the deadline (a disconnecting
    client closes each after 2 to 5 chunks)."""
    rng = random.Random(index)
    while time.monotonic() < deadline:
        disconnect_after = rng.randint(2, 5) if disconnects else None
        outcome = stream_chat(port, rng.choice(PROMPTS), disconnect_after, timeout)
        stats.record(outcome)
        if outcome.result == "failed":
            pause = outcome.retry_after if outcome.retry_after is not None else 0.5
            time.sleep(max(0.0, min(pause, deadline - time.monotonic())))


def conversation(version: int) -> dict:
    """The saved conversation at `version` (which its title carries)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "id": CONVERSATION_ID, "title": f"soak v{version}", "title_set": True, "model_id": "default",
        "system_prompt": "", "sampling": {"temperature": 0.7, "top_k": 40, "top_p": 0.9, "min_p": 0.0,
                                          "repeat_penalty": 1.0, "seed": 0},
        "messages": [{"role": "user", "content": f"save number {version}"},
                     {"role": "assistant", "content": f"saved {version} times"}],
        "created_at": now, "updated_at": now,
    }


def stored_version(body) -> int | None:
    match = re.fullmatch(r"soak v(\d+)", str(body.get("title", ""))) if isinstance(body, dict) else None
    return int(match.group(1)) if match else None


class Saver:
    """Saves the conversation in a loop, remembering the last version acknowledged."""

    def __init__(self, port: int, cookie: str, deadline: float, timeout: float, stats: Stats):
        self.port, self.cookie, self.deadline, self.timeout, self.stats = port, cookie, deadline, timeout, stats
        self.acknowledged = 0
        self.attempts = 0

    def run(self) -> None:
        version = 0
        while time.monotonic() < self.deadline:
            version += 1
            self.attempts += 1
            try:
                status, body = call_api(self.port, self.cookie, "save_conversation",
                                        {"conversation": conversation(version)}, self.timeout)
            except (OSError, http.client.HTTPException) as e:
                self.stats.record_failure("save_connection_error", f"{type(e).__name__}: {e}")
            else:
                if status == 200:
                    self.acknowledged = version
                else:
                    self.stats.record_failure(f"save_http_{status}", error_message(body))
            time.sleep(0.1)

    def lost_saves(self) -> tuple[int, int | None]:
        """(saves lost, the version stored): the stored one must be at least the last acknowledged."""
        try:
            status, body = call_api(self.port, self.cookie, "get_conversation", {"id": CONVERSATION_ID}, self.timeout)
        except (OSError, http.client.HTTPException):
            return self.acknowledged, None
        stored = stored_version(body) if status == 200 else None
        return max(0, self.acknowledged - (stored or 0)), stored


# ---------------------------------------------------------------- the serve process

def process_sample(pid: int) -> dict:
    """VmRSS (MiB) and open file descriptors of `pid`."""
    rss_kb = 0
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
    return {"rss_mib": round(rss_kb / 1024, 1), "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def growth_pct(start: float, end: float) -> float:
    return round(100.0 * (end - start) / start, 2) if start else 0.0


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile, in seconds rounded to milliseconds."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)], 3)


def plan(port: int, cookie: str) -> list[str]:
    """The cluster's stages as `node: first-last layer` (from /api/cluster_status)."""
    try:
        status, body = call_api(port, cookie, "cluster_status", {}, 30)
    except (OSError, http.client.HTTPException):
        return []
    run = body.get("run") if status == 200 and isinstance(body, dict) else None
    stages = (run or {}).get("stages") or []
    return [f"{s.get('node')}: layers {s['layers'][0]}-{s['layers'][1] - 1}" if s.get("layers") else str(s.get("node"))
            for s in stages]


# ---------------------------------------------------------------- the soak

def master_memory(args, model: Path) -> int:
    """The master's --max-memory: a third of the model file plus headroom (0: no cap)."""
    if args.max_memory is not None:
        return args.max_memory
    return model.stat().st_size // 3 + 50_000_000


def soak(args, model: Path, root: Path, children: list) -> dict:
    worker = Worker(args.cake, root)
    children.append(worker)
    worker.start()
    serve, port, serve_log = start_serve(args.cake, root, model, worker, master_memory(args, model), args.ctx)
    children.append(serve)
    cookie = session_cookie(port)
    stats = Stats(args.recovery_grace)
    started = time.monotonic()
    deadline = started + args.minutes * 60

    saver = Saver(port, cookie, deadline, args.request_timeout, stats)
    threads = [threading.Thread(target=saver.run, daemon=True)]
    disconnecting = max(1, args.clients // 4)
    for i in range(args.clients):
        threads.append(threading.Thread(
            target=client_loop, args=(i, port, deadline, args.request_timeout, i < disconnecting, stats), daemon=True))
    for thread in threads:
        thread.start()

    summary = {"minutes": args.minutes, "clients": args.clients, "disconnecting_clients": disconnecting,
               "kill_every_s": args.kill_every, "master_max_memory": master_memory(args, model) or None}
    if not stats.first_completed.wait(timeout=max(0.0, deadline - time.monotonic())):
        summary["error"] = "no request completed before the deadline"
    warm = process_sample(serve.pid)
    summary["warm_up_s"] = round(time.monotonic() - started, 1)
    summary["plan_after_warm_up"] = plan(port, cookie)
    samples = [warm]
    kills = drive(serve, worker, stats, deadline, args, samples)
    end = process_sample(serve.pid) if serve.poll() is None else None

    for thread in threads:  # each ends within one request's timeout after the deadline
        thread.join(timeout=args.request_timeout + 15)
    if serve.poll() is not None:
        stats.record_failure("serve_exited", f"cake serve exited with {serve.returncode}:\n{tail(serve_log)}")
        lost, stored, idle = saver.acknowledged, None, None
    else:
        lost, stored = saver.lost_saves()
        summary["plan_at_end"] = plan(port, cookie)
        time.sleep(2)
        idle = process_sample(serve.pid)
    summary.update(results(stats, kills, saver, lost, stored, warm, end, samples))
    summary["serve_process"]["idle_after_end"] = idle
    return summary


def drive(serve, worker: Worker, stats: Stats, deadline: float, args, samples: list) -> int:
    """Until the deadline: kills and restarts the worker every `--kill-every`
    seconds (none so close to the deadline that the end sample would fall
    in the loss) and samples the server's memory. Returns the number of kills."""
    kills = 0
    next_kill = time.monotonic() + args.kill_every
    next_sample = time.monotonic() + SAMPLE_EVERY_S
    while (now := time.monotonic()) < deadline and serve.poll() is None:
        if now >= next_kill and now + args.restart_after + END_MARGIN_S < deadline:
            worker.kill()
            stats.worker_killed()
            kills += 1
            time.sleep(args.restart_after)
            try:
                worker.start()
            except RuntimeError as e:
                stats.record_failure("worker_restart_failed", str(e))
                return kills
            stats.worker_restarted()
            next_kill += args.kill_every
        if now >= next_sample:
            samples.append(process_sample(serve.pid))
            next_sample += SAMPLE_EVERY_S
        time.sleep(max(0.0, min(0.5, deadline - time.monotonic())))
    return kills


def results(stats: Stats, kills: int, saver: Saver, lost: int, stored, warm: dict, end: dict | None,
            samples: list) -> dict:
    with stats.lock:
        out = {
            "worker_kills": kills,
            "recovered_after_s": [loss["recovered_after_s"] for loss in stats.losses],
            "requests": {"completed": stats.completed, "disconnected_on_purpose": stats.disconnected,
                         "failed_expected": sum(stats.failures["expected"].values()),
                         "failed_unexpected": sum(stats.failures["unexpected"].values())},
            "failures": stats.failures,
            "failure_examples": stats.examples,
            "loss_notices_in_streams": stats.notices,
            "ttft_s": {"p50": percentile(stats.ttfts, 50), "p99": percentile(stats.ttfts, 99),
                       "count": len(stats.ttfts)},
        }
    out["saves"] = {"attempted": saver.attempts, "last_acknowledged": saver.acknowledged, "stored": stored,
                    "lost": lost}
    out["serve_process"] = {"after_warm_up": warm, "end": end, "sampled_every_10_s": {
        "rss_mib_min_max": [min(s["rss_mib"] for s in samples), max(s["rss_mib"] for s in samples)],
        "fds_min_max": [min(s["fds"] for s in samples), max(s["fds"] for s in samples)]}}
    if end:
        out["serve_process"]["rss_growth_pct"] = growth_pct(warm["rss_mib"], end["rss_mib"])
        out["serve_process"]["fd_growth_pct"] = growth_pct(warm["fds"], end["fds"])
    return out


def problems(summary: dict) -> list[str]:
    """Why the soak failed (none: it passed)."""
    found = []
    if summary.get("error"):
        found.append(summary["error"])
    if summary["saves"]["lost"]:
        found.append(f"{summary['saves']['lost']} saves lost")
    if summary["requests"]["failed_unexpected"]:
        found.append(f"{summary['requests']['failed_unexpected']} unexpected failures")
    growth = summary["serve_process"].get("rss_growth_pct")
    if growth is None:
        found.append("cake serve was not running at the end")
    elif growth >= RSS_GROWTH_LIMIT_PCT:
        found.append(f"RSS grew by {growth} % (limit {RSS_GROWTH_LIMIT_PCT} %)")
    return found


def print_table(summary: dict) -> None:
    requests, process = summary["requests"], summary["serve_process"]
    warm, end = process["after_warm_up"], process["end"] or {}
    kinds = lambda bucket: ", ".join(f"{k}: {n}" for k, n in sorted(summary["failures"][bucket].items())) or "-"
    rows = [
        ("worker kills", f"{summary['worker_kills']} (first completion after each restart: {summary['recovered_after_s']} s)"),
        ("requests completed", requests["completed"]),
        ("disconnected on purpose", requests["disconnected_on_purpose"]),
        ("failed, expected", f"{requests['failed_expected']} ({kinds('expected')})"),
        ("failed, unexpected", f"{requests['failed_unexpected']} ({kinds('unexpected')})"),
        ("TTFT p50 / p99", f"{summary['ttft_s']['p50']} s / {summary['ttft_s']['p99']} s"),
        ("RSS warm → end", f"{warm['rss_mib']} → {end.get('rss_mib')} MiB ({process.get('rss_growth_pct')} %)"),
        ("open fds warm → end", f"{warm['fds']} → {end.get('fds')} ({process.get('fd_growth_pct')} %)"),
        ("saves acknowledged / lost",
         f"{summary['saves']['last_acknowledged']} / {summary['saves']['lost']} (stored v{summary['saves']['stored']})"),
        ("verdict", "PASS" if not summary["problems"] else "FAIL: " + "; ".join(summary["problems"])),
    ]
    print()
    for name, value in rows:
        print(f"{name:<27} {value}")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cake", default=default_cake(), help="the cake binary (default: release, else debug)")
    parser.add_argument("--model", type=Path, default=default_model(), help="GGUF file (default: $CAKE_TEST_MODEL "
                        "or the installed SmolLM2-135M-Instruct.Q4_1.gguf)")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--kill-every", type=float, default=60, help="seconds between worker kills")
    parser.add_argument("--restart-after", type=float, default=4, help="seconds a killed worker stays down")
    parser.add_argument("--recovery-grace", type=float, default=30,
                        help="seconds after a restart during which loss errors still count as expected")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--request-timeout", type=float, default=120, help="seconds per request")
    parser.add_argument("--ctx", type=int, default=1024, help="context the master plans its caches for")
    parser.add_argument("--max-memory", type=int, default=None,
                        help="the master's --max-memory in bytes (default: a third of the model file plus 50 MB; "
                             "0: no cap)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    args.cake = os.path.abspath(args.cake)
    if not os.path.exists(args.cake) or not args.model.exists():
        print(f"missing: {args.cake if not os.path.exists(args.cake) else args.model}", file=sys.stderr)
        return 2
    children: list = []
    with tempfile.TemporaryDirectory(prefix="cake-soak-") as tmp:
        try:
            summary = soak(args, args.model, Path(tmp), children)
        finally:
            for child in reversed(children):
                child.stop() if isinstance(child, Worker) else stop(child)
    summary["problems"] = problems(summary)
    print(json.dumps(summary, indent=2))
    print_table(summary)
    return 1 if summary["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
