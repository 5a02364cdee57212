#!/usr/bin/env python3
"""The official `openai` Python client against `cake serve`.

Starts `cake serve` on a free loopback port with a private data folder that
holds the default model, streams a chat completion with a fixed seed through
the `openai` package, and checks the text equals what `cake run --chat`
prints for the same prompt, seed and settings. Also checks a non-streaming
call, that errors arrive as the client's typed exceptions, and that what
Cake cannot honour (several choices, an image) is refused with a 400
naming it rather than ignored; `logprobs` come back on both text routes (structured output has its own check,
structured_output.py). With the scripted Qwen3 fixture, a
reply's reasoning arrives in `reasoning_content`, whole and streamed, apart
from its `content`, and `reasoning_effort: "none"` switches it off.

Usage: python tests/e2e/openai_client.py path/to/cake
"""

import base64
import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import openai
from serve_process import (data_dir_with_default_model, default_model, embedding_model, embedding_reference, script,
                           scripted_model, scripted_parts, served, vision_case, vision_model)

PROMPT = "Give me two tips for baking bread."
SETTINGS = {"temperature": 0.7, "top_p": 0.9, "seed": 4242, "max_tokens": 40}


def check_reasoning(client: openai.OpenAI) -> None:
    """The scripted model's reasoning comes in `reasoning_content`, never in `content`."""
    reasoning, answer = scripted_parts("think")
    messages = script()["think"]["messages"]
    whole = client.chat.completions.create(model="qwen3_scripted", messages=messages, temperature=0)
    message = whole.choices[0].message
    assert (message.content, message.reasoning_content) == (answer, reasoning), message

    streamed = {"reasoning_content": "", "content": ""}
    for chunk in client.chat.completions.create(model="qwen3_scripted", messages=messages, temperature=0,
                                                stream=True):
        delta = chunk.choices[0].delta
        thought = getattr(delta, "reasoning_content", None)
        if thought:
            assert streamed["content"] == "", "reasoning came after the answer began"
            streamed["reasoning_content"] += thought
        streamed["content"] += delta.content or ""
    assert streamed == {"reasoning_content": reasoning, "content": answer}, streamed

    off = client.chat.completions.create(model="qwen3_scripted", messages=script()["no_think"]["messages"],
                                         temperature=0, reasoning_effort="none")
    assert off.choices[0].message.content == scripted_parts("no_think")[1], off
    assert getattr(off.choices[0].message, "reasoning_content", None) is None, off


def check_pictures(client: openai.OpenAI, cake: str) -> None:
    """A picture as a data: URL is read as `cake run --image` reads it; misplaced ones are refused."""
    case = vision_case(cake)
    url = "data:image/png;base64," + base64.b64encode(case["picture"].read_bytes()).decode()
    content = [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": case["question"]}]
    reply = client.chat.completions.create(model="gemma3_vision", messages=[{"role": "user", "content": content}],
                                           temperature=0, max_tokens=8)
    assert reply.usage.prompt_tokens == case["prompt_tokens"], reply.usage
    assert reply.choices[0].message.content == case["text"], (reply.choices[0].message.content, case)
    for model, image_url, said in [("default", url, "reads text only"),
                                   ("gemma3_vision", "https://example.com/cat.png", "does not fetch pictures")]:
        content = [{"type": "image_url", "image_url": {"url": image_url}}, {"type": "text", "text": "What is it?"}]
        try:
            client.chat.completions.create(model=model, messages=[{"role": "user", "content": content}])
            raise AssertionError(f"a picture for {model} at {image_url[:30]} was not refused")
        except openai.BadRequestError as e:
            assert said in str(e), e


def check_embeddings(client: openai.OpenAI) -> None:
    """`/v1/embeddings` gives transformers' vectors, as floats and as base64; a chat model is refused."""
    cases = embedding_reference()["cases"]
    got = client.embeddings.create(model="qwen3_embedding", input=[c["text"] for c in cases])
    for item, case in zip(got.data, cases):
        assert max(abs(a - b) for a, b in zip(item.embedding, case["embedding"])) < 1e-4, item.index
    packed = client.embeddings.create(model="qwen3_embedding", input=cases[0]["text"], encoding_format="base64")
    unpacked = struct.unpack(f"<{len(cases[0]['embedding'])}f", base64.b64decode(packed.data[0].embedding))
    assert max(abs(a - b) for a, b in zip(unpacked, cases[0]["embedding"])) < 1e-4, packed
    try:
        client.embeddings.create(model="default", input="hello")
        raise AssertionError("a chat model made embeddings")
    except openai.BadRequestError as e:
        assert "is a chat model, not an embedding model" in str(e), e


def check_completions(client: openai.OpenAI, cake: str) -> None:
    """`/v1/completions` continues the bare prompt as `cake run` does; `echo` puts the prompt first."""
    run = subprocess.run(
        [cake, "run", "--model", str(default_model()), "--prompt", PROMPT, "--temperature", "0.7", "--top-p", "0.9",
         "--seed", "4242", "--max-tokens", "40", "--json"], check=True, capture_output=True, text=True)
    expected = json.loads(run.stdout)["text"]
    whole = client.completions.create(model="default", prompt=PROMPT, **SETTINGS)
    assert whole.choices[0].text == expected and whole.object == "text_completion", whole
    assert whole.choices[0].finish_reason == "length" and whole.usage.completion_tokens == 40, whole
    pieces = [c.choices[0].text for c in client.completions.create(model="default", prompt=PROMPT, stream=True,
                                                                      **SETTINGS) if c.choices]
    assert "".join(pieces) == expected and len([p for p in pieces if p]) > 3, pieces
    echoed = client.completions.create(model="default", prompt=PROMPT, echo=True, **SETTINGS)
    assert echoed.choices[0].text == PROMPT + expected, echoed
    scored = client.completions.create(model="default", prompt=PROMPT, logprobs=2, **SETTINGS).choices[0]
    assert "".join(scored.logprobs.tokens) == expected and len(scored.logprobs.token_logprobs) == 40, scored
    chat = client.chat.completions.create(model="default", messages=[{"role": "user", "content": PROMPT}],
                                          logprobs=True, top_logprobs=2, **SETTINGS).choices[0]
    entries = chat.logprobs.content
    assert "".join(e.token for e in entries) == chat.message.content and len(entries) == 40, entries[:3]
    assert all(len(e.top_logprobs) == 2 and e.logprob <= 0 for e in entries), entries[:3]


def check_responses(client: openai.OpenAI) -> None:
    """`/v1/responses`: greedy text equals the chat route's, streamed alike; a function call round trip;
    a JSON schema followed."""
    question = [{"role": "user", "content": PROMPT}]
    chat = client.chat.completions.create(model="default", messages=question, temperature=0, max_tokens=30)
    whole = client.responses.create(model="default", input=PROMPT, temperature=0, max_output_tokens=30)
    assert whole.output_text == chat.choices[0].message.content and whole.status == "incomplete", whole
    deltas, final = [], None
    for event in client.responses.create(model="default", input=PROMPT, temperature=0, max_output_tokens=30,
                                         stream=True):
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        elif event.type in ("response.completed", "response.incomplete"):
            final = event.response
    assert "".join(deltas) == whole.output_text == final.output_text and len(deltas) > 3, deltas

    case = script()["tool_call"]
    function = case["tools"][0]["function"]
    tools = [{"type": "function", "name": function["name"], "description": function["description"],
              "parameters": function["parameters"]}]
    asked = [{"role": "user", "content": case["messages"][0]["content"]}]
    called = client.responses.create(model="qwen3_scripted", input=asked, tools=tools, temperature=0)
    kinds = [item.type for item in called.output]
    assert kinds == ["reasoning", "function_call"], called.output
    call = called.output[1]
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"}), call
    result = {"type": "function_call_output", "call_id": call.call_id, "output": '{"temperature": 21}'}
    answered = client.responses.create(model="qwen3_scripted", input=asked + called.output + [result],
                                       tools=tools, temperature=0)
    assert answered.output_text == scripted_parts("tool_result")[1], answered.output

    schema = {"type": "object", "properties": {"tip": {"type": "string", "maxLength": 60}}, "required": ["tip"],
              "additionalProperties": False}
    shaped = client.responses.create(model="default", input=PROMPT, temperature=0, max_output_tokens=100,
                                     text={"format": {"type": "json_schema", "name": "tip", "schema": schema}})
    assert set(json.loads(shaped.output_text)) == {"tip"}, shaped.output_text


def check_tool_round_trip(client: openai.OpenAI) -> None:
    """The scripted model calls the weather tool; its result sent back gets the answer."""
    tools = script()["tool_call"]["tools"]
    messages = list(script()["tool_call"]["messages"])
    reply = client.chat.completions.create(model="qwen3_scripted", messages=messages, tools=tools, temperature=0)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    [call] = choice.message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}, call

    streamed = {}
    for chunk in client.chat.completions.create(model="qwen3_scripted", messages=messages, tools=tools,
                                                temperature=0, stream=True):
        for delta in chunk.choices[0].delta.tool_calls or []:
            entry = streamed.setdefault(delta.index, {"name": "", "arguments": ""})
            entry["name"] += delta.function.name or ""
            entry["arguments"] += delta.function.arguments or ""
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed.values()] == [("get_weather", {"city": "Paris"})]

    # Forced: the default model, which has no tool syntax of its own, calls the named tool.
    forced = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Hello!"}], tools=tools, temperature=0,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}).choices[0]
    assert forced.finish_reason == "tool_calls" and forced.message.tool_calls[0].function.name == "get_weather"
    assert isinstance(json.loads(forced.message.tool_calls[0].function.arguments)["city"], str), forced

    messages.append(choice.message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 21}'})
    answer = client.chat.completions.create(model="qwen3_scripted", messages=messages, tools=tools, temperature=0)
    assert answer.choices[0].message.content == scripted_parts("tool_result")[1], answer


def main() -> int:
    cake = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        data = data_dir_with_default_model(Path(tmp))
        models = ("--model", str(scripted_model()), "--model", str(embedding_model()), "--model", str(vision_model()))
        with served(cake, data, *models) as base:
            client = openai.OpenAI(base_url=f"{base}/v1", api_key="not-needed", timeout=300, max_retries=0)
            models = [m.id for m in client.models.list()]
            assert models == ["default", "qwen3_scripted", "qwen3_embedding", "gemma3_vision"], models
            check_pictures(client, cake)
            check_embeddings(client)
            check_reasoning(client)
            check_completions(client, cake)
            check_responses(client)
            check_tool_round_trip(client)

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
            image = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
            for field, extra in [("`n`", {"n": 2}),
                                 ("image_url", {"messages": [{"role": "user", "content": image}]})]:
                request = {"model": "default", "messages": [{"role": "user", "content": "x"}], **extra}
                try:
                    client.chat.completions.create(**request)
                    raise AssertionError(f"a request with {field} was not refused")
                except openai.BadRequestError as e:
                    assert field in str(e), e
            print(f"openai client: streamed {len(pieces)} chunks, text equals cake run: {streamed!r}; "
                  "reasoning apart from content, whole and streamed; a tool call round trip, whole and streamed; "
                  "/v1/completions whole, streamed and echoed equal cake run; /v1/responses text, stream, a "
                  "function call round trip and a schema; embeddings equal transformers'; a picture read as "
                  "cake run --image reads it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
