#!/usr/bin/env python3
"""Structured output from `cake serve`, checked with the `openai` SDK and `jsonschema`.

200 random JSON schemas (a fixed seed; objects, arrays, strings with
escapes and lengths, numbers with bounds, enums, consts, required and
optional properties, anyOf, nested $refs; nesting up to depth 4) are each
sent as `response_format: json_schema` to the default model with random
sampling, eight at a time (Cake decodes them together): every reply must
parse and validate. Keywords Cake cannot enforce get a 400 naming them;
`client.beta.chat.completions.parse` fills a pydantic model; `json_object`
gives an object; and `tool_choice` `required` makes the default model
(which has no tool syntax of its own) call a tool with valid arguments.

Usage: python tests/e2e/structured_output.py path/to/cake
"""

import json
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import openai
import pydantic
from serve_process import data_dir_with_default_model, served

SCHEMAS = 200
SEED = 2026
WORDS = ["name", "city", "count", "items", "price", "tags", "note", "id", "score", "owner", "kind", "size"]
REFUSED = ["not", "if", "uniqueItems", "contains", "propertyNames", "dependentRequired"]


def random_schema(rng: random.Random, depth: int, defs: dict) -> dict:
    """A schema whose values nest at most `depth` more levels."""
    kinds = ["string", "integer", "number", "boolean", "enum", "const"]
    if depth > 0:
        kinds += ["object", "object", "array", "anyOf", "ref"]
    kind = rng.choice(kinds)
    if kind == "string":
        schema = {"type": "string", "maxLength": rng.randint(1, 24)}
        if rng.random() < 0.3:
            schema["minLength"] = rng.randint(0, schema["maxLength"])
        return schema
    if kind == "integer":
        low = rng.randint(-100, 100)
        return {"type": "integer", "minimum": low, "maximum": low + rng.randint(0, 1000)}
    if kind == "number":
        return {"type": "number", "minimum": -1000, "maximum": 1000}
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "enum":
        return {"enum": rng.sample(["red", "green", "blue", 'say "hi"', "a\\b", 1, 2.5, None, True], rng.randint(1, 4))}
    if kind == "const":
        return {"const": rng.choice(["fixed", 42, 'quote " and \\ backslash', False])}
    if kind == "object":
        names = rng.sample(WORDS, rng.randint(1, 4))
        properties = {name: random_schema(rng, depth - 1, defs) for name in names}
        required = [name for name in names if rng.random() < 0.7]
        schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
        return schema
    if kind == "array":
        low = rng.randint(0, 2)
        return {"type": "array", "items": random_schema(rng, depth - 1, defs), "minItems": low,
                "maxItems": low + rng.randint(0, 3)}
    if kind == "anyOf":
        return {"anyOf": [random_schema(rng, depth - 1, defs) for _ in range(rng.randint(2, 3))]}
    name = f"def{len(defs)}"
    defs[name] = {}  # the name taken before the definition's own $refs are made
    defs[name] = random_schema(rng, depth - 1, defs)
    return {"$ref": f"#/$defs/{name}"}


def schemas() -> list[dict]:
    rng = random.Random(SEED)
    out = []
    while len(out) < SCHEMAS:
        defs: dict = {}
        names = rng.sample(WORDS, rng.randint(1, 4))
        top = {"type": "object", "properties": {n: random_schema(rng, rng.randint(1, 3), defs) for n in names},
               "required": names, "additionalProperties": False}
        if defs:
            top["$defs"] = defs
        out.append(top)
    return out


def ask(client: openai.OpenAI, index: int, schema: dict) -> tuple[int, str, str, int]:
    reply = client.chat.completions.create(
        model="default",
        messages=[{"role": "user", "content": "Fill in this record with plausible values."}],
        response_format={"type": "json_schema", "json_schema": {"name": f"record{index}", "schema": schema,
                                                                "strict": True}},
        temperature=0.8, top_p=0.95, seed=index, max_tokens=600,
    )
    choice = reply.choices[0]
    return index, choice.message.content, choice.finish_reason, reply.usage.completion_tokens


class City(pydantic.BaseModel):
    name: str
    country: str
    population: int


def main() -> int:
    cake = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        data = data_dir_with_default_model(Path(tmp))
        with served(cake, data) as base:
            client = openai.OpenAI(base_url=f"{base}/v1", api_key="not-needed", timeout=600, max_retries=0)
            all_schemas = schemas()
            started = time.time()
            with ThreadPoolExecutor(max_workers=8) as pool:
                replies = list(pool.map(lambda pair: ask(client, *pair), enumerate(all_schemas)))
            elapsed = time.time() - started
            failures = []
            for index, text, finish, _ in replies:
                try:
                    jsonschema.Draft202012Validator(all_schemas[index]).validate(json.loads(text))
                except (json.JSONDecodeError, jsonschema.ValidationError) as e:
                    failures.append(f"schema {index} ({finish}): {text!r}: {e}")
            assert not failures, f"{len(failures)} of {SCHEMAS} replies fail their schema:\n" + "\n".join(failures)
            tokens = sum(r[3] for r in replies)

            for keyword in REFUSED:
                schema = {"type": "object", "properties": {"a": {"type": "array", keyword: {"type": "string"}}}}
                if keyword in ("uniqueItems",):
                    schema["properties"]["a"][keyword] = True
                try:
                    client.chat.completions.create(
                        model="default", messages=[{"role": "user", "content": "x"}],
                        response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": schema}})
                    raise AssertionError(f"a schema with `{keyword}` was accepted")
                except openai.BadRequestError as e:
                    assert keyword in str(e), e

            parsed = client.beta.chat.completions.parse(
                model="default", messages=[{"role": "user", "content": "Describe Paris as a record."}],
                response_format=City, temperature=0.7, seed=1, max_tokens=200,
            ).choices[0].message.parsed
            assert isinstance(parsed, City), parsed

            anything = client.chat.completions.create(
                model="default",
                messages=[{"role": "user", "content": 'Answer in JSON: is the sky blue? Use the key "answer".'}],
                response_format={"type": "json_object"}, temperature=0, max_tokens=300).choices[0]
            assert anything.finish_reason == "stop", anything
            assert isinstance(json.loads(anything.message.content), dict), anything

            tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string", "maxLength": 40}}, "required": ["city"],
                "additionalProperties": False}}}
            called = client.chat.completions.create(
                model="default", messages=[{"role": "user", "content": "Is it raining in Lyon?"}], tools=[tool],
                tool_choice="required", seed=5, max_tokens=100).choices[0]
            assert called.finish_reason == "tool_calls", called
            arguments = json.loads(called.message.tool_calls[0].function.arguments)
            jsonschema.validate(arguments, tool["function"]["parameters"])

            print(f"structured output: {SCHEMAS}/{SCHEMAS} random schemas valid ({tokens} tokens in {elapsed:.0f} s, "
                  f"8 at a time); {len(REFUSED)} unsupported keywords refused by name; pydantic parse {parsed!r}; "
                  f"json_object; a forced call {arguments}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
