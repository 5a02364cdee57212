#!/usr/bin/env python3
"""The official `openai` Python client against `cake serve`.

Starts `cake serve` on a free loopback port with a private data folder that
holds the default model, streams a chat completion with a fixed seed through
the `openai` package, and checks the text equals what `cake run --chat`
prints for the same prompt, seed and settings. Also checks a non-streaming
call and that errors arrive as the client's typed exceptions.

Usage: python tests/e2e/openai_client.py path/to/cake
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import openai

PROMPT = "Give me two tips for baking bread."
SETTINGS = {"temperature": 0.7, "top_p": 0.9, "seed": 4242, "max_tokens": 40}


def default_model() -> Path:
    data = os.environ.get("CAKE_DATA_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME", os.path.expanduser("~/.local/share")), "cake"
    )
    return Path(data) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def start_server(cake: str, data_dir: Path) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, CAKE_DATA_DIR=str(data_dir), HF_HUB_CACHE=str(data_dir / "hf"))
    server = subprocess.Popen(
        [cake, "serve", "--host", "127.0.0.1", "--port", "0"], stdout=subprocess.PIPE, env=env, text=True
    )
    for _ in range(50):
        line = server.stdout.readline()
        if line.startswith("Cake is serving on "):
            return server, line.removeprefix("Cake is serving on ").strip().rstrip("/")
    server.kill()
    raise SystemExit("cake serve did not start")


def main() -> int:
    cake = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        (data / "models").mkdir()
        (data / "models" / default_model().name).symlink_to(default_model())
        server, base = start_server(cake, data)
        try:
            client = openai.OpenAI(base_url=f"{base}/v1", api_key="not-needed", timeout=300, max_retries=0)
            models = [m.id for m in client.models.list()]
            assert models == ["default"], models

            stream = client.chat.completions.create(
                model="default", messages=[{"role": "user", "content": PROMPT}], stream=True, **SETTINGS
            )
            pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
            streamed = "".join(pieces)
            assert len([p for p in pieces if p]) > 3, f"reply did not stream: {pieces}"

            run = subprocess.run(
                [cake, "run", "--model", str(default_model()), "--chat", "--prompt", PROMPT,
                 "--temperature", str(SETTINGS["temperature"]), "--top-p", str(SETTINGS["top_p"]),
                 "--seed", str(SETTINGS["seed"]), "--max-tokens", str(SETTINGS["max_tokens"]), "--json"],
                check=True, capture_output=True, text=True,
            )
            expected = json.loads(run.stdout)["text"]
            assert streamed == expected, f"streamed {streamed!r}\ncake run {expected!r}"

            whole = client.chat.completions.create(
                model="default", messages=[{"role": "user", "content": PROMPT}], **SETTINGS
            )
            assert whole.choices[0].message.content == expected
            assert whole.usage.completion_tokens > 0

            try:
                client.chat.completions.create(model="missing", messages=[{"role": "user", "content": "x"}])
                raise AssertionError("an unknown model was accepted")
            except openai.NotFoundError as e:
                assert "missing" in str(e), e
            print(f"openai client: streamed {len(pieces)} chunks, text equals cake run: {streamed!r}")
        finally:
            server.kill()
            server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
