#!/usr/bin/env python3
"""The official `ollama` Python client against `cake serve`'s Ollama routes.

Starts `cake serve` with the default model in a private data folder and
uses the `ollama` package (PyPI) as an Ollama client would: lists and shows
the model, chats and generates, streamed and whole, and checks the text
equals what `cake run` prints for the same prompt, seed and settings (the
chat through the model's template, `raw` generation on the bare prompt).
A `format` schema (a pydantic model's) shapes a reply; what Cake cannot
honour raises the client's ResponseError with status 400 naming it. With the scripted Qwen3 fixture,
a reply's reasoning arrives in `thinking`, apart from its `content`, and
`think=False` switches it off.

Usage: python tests/e2e/ollama_client.py path/to/cake
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import ollama
import pydantic
from serve_process import (data_dir_with_default_model, default_model, embedding_model, embedding_reference, script,
                           scripted_model, scripted_parts, served, vision_case, vision_model)

PROMPT = "Give me two tips for baking bread."
OPTIONS = {"temperature": 0.7, "top_p": 0.9, "seed": 4242, "num_predict": 40}


def cake_run(cake: str, *args: str) -> str:
    """What `cake run` prints for PROMPT with OPTIONS' settings."""
    run = subprocess.run(
        [cake, "run", "--model", str(default_model()), "--prompt", PROMPT, "--temperature", "0.7",
         "--top-p", "0.9", "--seed", "4242", "--max-tokens", "40", "--json", *args],
        check=True, capture_output=True, text=True,
    )
    return json.loads(run.stdout)["text"]


def refused(call, field: str) -> None:
    try:
        call()
    except ollama.ResponseError as e:
        assert e.status_code == 400 and field in e.error, (e.status_code, e.error)
        return
    raise AssertionError(f"a request with `{field}` was not refused")


def check_thinking(client: ollama.Client) -> None:
    """The scripted model's reasoning comes in `thinking`, never in `content`."""
    reasoning, answer = scripted_parts("think")
    messages = script()["think"]["messages"]
    whole = client.chat("qwen3_scripted", messages, think=True, options={"temperature": 0})
    assert (whole.message.content, whole.message.thinking) == (answer, reasoning), whole.message
    parts = list(client.chat("qwen3_scripted", messages, stream=True, options={"temperature": 0}))
    assert "".join(p.message.thinking or "" for p in parts) == reasoning
    assert "".join(p.message.content for p in parts) == answer
    off = client.chat("qwen3_scripted", script()["no_think"]["messages"], think=False, options={"temperature": 0})
    assert (off.message.content, off.message.thinking) == (scripted_parts("no_think")[1], None), off.message


class Cake(pydantic.BaseModel):
    flavour: str = pydantic.Field(max_length=30)
    layers: int = pydantic.Field(ge=1, le=9)


def check_tools(client: ollama.Client) -> None:
    """The scripted model calls the weather tool; its result sent back gets the answer."""
    tools = script()["tool_call"]["tools"]
    messages = list(script()["tool_call"]["messages"])
    reply = client.chat("qwen3_scripted", messages, tools=tools, options={"temperature": 0})
    [call] = reply.message.tool_calls
    assert (call.function.name, dict(call.function.arguments)) == ("get_weather", {"city": "Paris"}), call
    messages += [reply.message, {"role": "tool", "content": '{"temperature": 21}', "tool_name": "get_weather"}]
    answer = client.chat("qwen3_scripted", messages, tools=tools, options={"temperature": 0})
    assert answer.message.content == scripted_parts("tool_result")[1], answer.message


def check_pictures(client: ollama.Client, cake: str) -> None:
    """`images` reach a model that reads pictures as `cake run --image` gives them, in chat and generate."""
    case = vision_case(cake)
    greedy = {"temperature": 0, "num_predict": 8}
    turn = {"role": "user", "content": case["question"], "images": [case["picture"]]}
    chatted = client.chat("gemma3_vision", [turn], options=greedy)
    assert (chatted.message.content, chatted.prompt_eval_count) == (case["text"], case["prompt_tokens"]), chatted
    generated = client.generate("gemma3_vision", case["question"], images=[case["picture"]], options=greedy)
    assert (generated.response, generated.prompt_eval_count) == (case["text"], case["prompt_tokens"]), generated
    refused(lambda: client.chat("default", [turn]), "reads text only")
    assert "vision" in client.show("gemma3_vision").capabilities
    assert "vision" not in client.show("default").capabilities


def main() -> int:
    cake = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        data = data_dir_with_default_model(Path(tmp))
        models = ("--model", str(scripted_model()), "--model", str(embedding_model()), "--model", str(vision_model()))
        with served(cake, data, *models) as base:
            client = ollama.Client(host=base, timeout=300)
            listed = client.list().models
            assert [m.model for m in listed] == ["default", "qwen3_scripted", "qwen3_embedding", "gemma3_vision"], listed
            check_pictures(client, cake)
            cases = embedding_reference()["cases"]
            embedded = client.embed("qwen3_embedding", [c["text"] for c in cases]).embeddings
            for ours, case in zip(embedded, cases):
                assert max(abs(a - b) for a, b in zip(ours, case["embedding"])) < 1e-4
            assert listed[0].details.quantization_level == "Q4_1", listed[0]
            shown = client.show("default")
            assert shown.details.family == "llama", shown.details

            chat = [{"role": "user", "content": PROMPT}]
            pieces = [part.message.content for part in client.chat("default", chat, stream=True, options=OPTIONS)]
            streamed = "".join(pieces)
            assert len([p for p in pieces if p]) > 3, f"the chat did not stream: {pieces}"
            expected = cake_run(cake, "--chat")
            assert streamed == expected, f"streamed {streamed!r}\ncake run {expected!r}"
            whole = client.chat("default:latest", chat, options=OPTIONS)
            assert whole.message.content == expected, whole
            assert whole.done and whole.done_reason == "length" and whole.eval_count == 40, whole

            raw = "".join(part.response for part in client.generate("default", PROMPT, raw=True, stream=True,
                                                                    options=OPTIONS))
            assert raw == cake_run(cake), raw
            templated = client.generate("default", PROMPT, options=OPTIONS)
            assert templated.response == expected, templated
            assert client.generate("default", "").done_reason == "load"
            assert [m.model for m in client.ps().models] == ["default"]
            check_thinking(client)
            check_tools(client)

            shaped = client.chat("default", [{"role": "user", "content": "Describe a cake as a record."}],
                                 format=Cake.model_json_schema(), options={"temperature": 0, "num_predict": 200})
            Cake.model_validate_json(shaped.message.content)
            unique = {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}}
            refused(lambda: client.chat("default", chat, format=unique), "uniqueItems")
            try:
                client.chat("missing", chat)
                raise AssertionError("an unknown model was accepted")
            except ollama.ResponseError as e:
                assert e.status_code == 404 and "missing" in e.error, e
            print(f"ollama client: chat streamed {len(pieces)} pieces equal to cake run; generate raw and "
                  f"templated equal; list, show, ps, embed; thinking apart; a tool call round trip; a format schema "
                  f"followed ({shaped.message.content}); a picture read as cake run --image reads it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
