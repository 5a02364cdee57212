#!/usr/bin/env python3
"""The official `openai` Python client against `cake serve`.

Starts `cake serve` on a free loopback port with a private data folder that
holds the default model, streams a chat completion with a fixed seed through
the `openai` package, and checks the text equals what `cake run --chat`
prints for the same prompt, seed and settings. Also checks a non-streaming
call, that errors arrive as the client's typed exceptions, and that what
Cake cannot honour yet (tools, a response format, an image) is refused with
a 400 naming it rather than ignored.

Usage: python tests/e2e/openai_client.py path/to/cake
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import openai
from serve_process import data_dir_with_default_model, default_model, start_server

PROMPT = "Give me two tips for baking bread."
SETTINGS = {"temperature": 0.7, "top_p": 0.9, "seed": 4242, "max_tokens": 40}


def main() -> int:
    cake = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        server, base = start_server(cake, data_dir_with_default_model(Path(tmp)))
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
            tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
            schema = {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object"}}}
            image = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
            for field, extra in [("tools", {"tools": [tool]}), ("response_format", {"response_format": schema}),
                                 ("image_url", {"messages": [{"role": "user", "content": image}]})]:
                request = {"model": "default", "messages": [{"role": "user", "content": "x"}], **extra}
                try:
                    client.chat.completions.create(**request)
                    raise AssertionError(f"a request with {field} was not refused")
                except openai.BadRequestError as e:
                    assert field in str(e), e
            print(f"openai client: streamed {len(pieces)} chunks, text equals cake run: {streamed!r}")
        finally:
            server.kill()
            server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
