#!/usr/bin/env python3
"""The official `anthropic` Python client against `cake serve`'s `/v1/messages`.

With the default model: a system prompt and a question, whole and streamed
(`messages.stream`), give the same greedy text as the OpenAI route for the
same conversation. With the scripted Qwen3 fixture: a tool is offered, the
reply is a `thinking` block and a `tool_use` block (`stop_reason:
tool_use`), streamed alike; the `tool_result` sent back with the reply's
blocks gets the scripted answer; `tool_choice: any` forces a call. With
the tiny Gemma 3 that reads pictures, an `image` block is read as `cake
run --image` reads it (the same prompt tokens and reply); a broken
picture, a web address and a picture for a text-only model are refused
with a 400 naming the problem.

Usage: python tests/e2e/anthropic_client.py path/to/cake
"""

import base64
import sys
import tempfile
from pathlib import Path

import anthropic
import openai
from serve_process import (data_dir_with_default_model, script, scripted_model, scripted_parts, served, vision_case,
                           vision_model)

SYSTEM = "You are a baker. Answer in one sentence."
# This SDK has no sampling arguments; Cake reads Anthropic's `temperature` field.
GREEDY = {"temperature": 0}
QUESTION = "How long should bread dough rise?"


def check_system_prompt(client: anthropic.Anthropic, base: str) -> str:
    messages = [{"role": "user", "content": QUESTION}]
    whole = client.messages.create(model="default", system=SYSTEM, messages=messages, max_tokens=40,
                                   extra_body=GREEDY)
    text = "".join(block.text for block in whole.content if block.type == "text")
    assert whole.stop_reason in ("end_turn", "max_tokens") and whole.usage.output_tokens > 0, whole
    with client.messages.stream(model="default", system=SYSTEM, messages=messages, max_tokens=40,
                                extra_body=GREEDY) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(pieces) == text and len(pieces) > 3, pieces
    assert final.content[0].text == text
    same = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0).chat.completions.create(
        model="default", messages=[{"role": "system", "content": SYSTEM}, *messages], max_tokens=40, temperature=0)
    assert same.choices[0].message.content == text, (same.choices[0].message.content, text)
    return text


def check_tools(client: anthropic.Anthropic) -> None:
    case = script()["tool_call"]
    function = case["tools"][0]["function"]
    tools = [{"name": function["name"], "description": function["description"],
              "input_schema": function["parameters"]}]
    messages = [{"role": "user", "content": case["messages"][0]["content"]}]
    reasoning, _ = scripted_parts("tool_call")
    reply = client.messages.create(model="qwen3_scripted", messages=messages, tools=tools, max_tokens=200,
                                   extra_body=GREEDY)
    assert reply.stop_reason == "tool_use", reply
    kinds = [block.type for block in reply.content]
    assert kinds == ["thinking", "tool_use"], kinds
    assert reply.content[0].thinking == reasoning, reply.content[0]
    call = reply.content[1]
    assert (call.name, call.input) == ("get_weather", {"city": "Paris"}), call

    with client.messages.stream(model="qwen3_scripted", messages=messages, tools=tools, max_tokens=200,
                                extra_body=GREEDY) as stream:
        streamed = stream.get_final_message()
    assert [b.type for b in streamed.content] == kinds and streamed.content[1].input == {"city": "Paris"}, streamed

    messages += [{"role": "assistant", "content": reply.content},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                               "content": '{"temperature": 21}'}]}]
    answer = client.messages.create(model="qwen3_scripted", messages=messages, tools=tools, max_tokens=200,
                                    extra_body=GREEDY)
    text = "".join(block.text for block in answer.content if block.type == "text")
    assert (text, answer.stop_reason) == (scripted_parts("tool_result_thought")[1], "end_turn"), answer

    forced = client.messages.create(model="qwen3_scripted", messages=[{"role": "user", "content": "Hello"}],
                                    tools=tools, tool_choice={"type": "any"}, max_tokens=200, extra_body=GREEDY)
    assert forced.stop_reason == "tool_use" and forced.content[-1].name == "get_weather", forced

    # A system prompt and a tool together, whole and streamed: the default model made to call it.
    asked = {"model": "default", "system": SYSTEM, "messages": [{"role": "user", "content": "Weather in Oslo?"}],
             "tools": tools, "tool_choice": {"type": "tool", "name": "get_weather"}, "max_tokens": 100,
             "extra_body": GREEDY}
    whole = client.messages.create(**asked)
    with client.messages.stream(**asked) as stream:
        streamed = stream.get_final_message()
    for message in (whole, streamed):
        call = message.content[-1]
        assert (message.stop_reason, call.type, call.name) == ("tool_use", "tool_use", "get_weather"), message
        assert isinstance(call.input["city"], str), call
    assert whole.content[-1].input == streamed.content[-1].input


def check_pictures(client: anthropic.Anthropic, cake: str) -> None:
    """An `image` block reaches a model that reads pictures as `cake run --image` gives it; a broken picture,
    a web address and a picture for a text-only model are refused with a 400 naming the problem."""
    case = vision_case(cake)
    data = base64.b64encode(case["picture"].read_bytes()).decode()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    turn = {"role": "user", "content": [image, {"type": "text", "text": case["question"]}]}
    reply = client.messages.create(model="gemma3_vision", max_tokens=8, messages=[turn], extra_body=GREEDY)
    assert (reply.content[0].text, reply.usage.input_tokens) == (case["text"], case["prompt_tokens"]), reply
    sources = [("default", image["source"], "reads text only"),
               ("gemma3_vision", {"type": "base64", "media_type": "image/png", "data": "AAAA"}, "not a PNG"),
               ("gemma3_vision", {"type": "url", "url": "https://example.com/cat.png"}, "does not fetch")]
    for model, source, said in sources:
        try:
            client.messages.create(model=model, max_tokens=5,
                                   messages=[{"role": "user", "content": [{"type": "image", "source": source}]}])
            raise AssertionError(f"an image block for {model} ({said}) was accepted")
        except anthropic.BadRequestError as e:
            assert said in str(e), e


def main() -> int:
    cake = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        data = data_dir_with_default_model(Path(tmp))
        with served(cake, data, "--model", str(scripted_model()), "--model", str(vision_model())) as base:
            client = anthropic.Anthropic(base_url=base, api_key="not-needed", timeout=300, max_retries=0)
            text = check_system_prompt(client, base)
            check_tools(client)
            check_pictures(client, cake)
            print(f"anthropic client: system prompt whole and streamed equal the OpenAI route ({text!r}); "
                  "thinking and tool_use blocks, streamed alike; the tool_result answered; a forced call; "
                  "a picture read as cake run --image reads it; a broken one and a web address refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
