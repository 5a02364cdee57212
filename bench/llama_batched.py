#!/usr/bin/env python3
"""llama.cpp decoding several requests together, as a peer for `cake serve`.

For each number of requests in flight, one llama.cpp context (via
llama-cpp-python's C API) with a sequence per request: the prompts (the
same user messages as bench/cluster.py sends, in the model's chat template)
are read one after another, then every step decodes one token of each
sequence in a single batch, greedily, until each has `tokens` tokens (end
of sequence ignored, so every run does the same work). Aggregate tok/s is
the generated tokens over the wall time from the first prompt to the last
token, the way bench/cluster.py measures `cake serve`. llama.cpp's own
rendering of the template adds no system prompt (18 tokens per prompt on
the default model); Cake's adds SmolLM2's, whose positions later requests
copy from its prompt cache instead of reading them.

    .venv-bench/bin/python bench/llama_batched.py MODEL.gguf --threads 2
"""

import argparse
import ctypes
import statistics
import time

import numpy as np


class Model:
    """A GGUF file loaded once, and contexts made on it for each run."""

    def __init__(self, path: str, threads: int):
        import llama_cpp

        self.api = llama_cpp
        self.threads = threads
        # llama.cpp's log lines would bury the bench's tables.
        self.quiet = llama_cpp.llama_log_callback(lambda level, text, data: None)
        llama_cpp.llama_log_set(self.quiet, ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()
        self.model = llama_cpp.llama_model_load_from_file(path.encode(), llama_cpp.llama_model_default_params())
        if not self.model:
            raise SystemExit(f"llama.cpp cannot load {path}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.template = llama_cpp.llama_model_chat_template(self.model, None)

    def prompt_tokens(self, user_message: str) -> list:
        """The user message in the model's chat template, as token ids."""
        api = self.api
        message = (api.llama_chat_message * 1)()
        message[0].role, message[0].content = b"user", user_message.encode()
        buffer = ctypes.create_string_buffer(4096)
        n = api.llama_chat_apply_template(self.template, message, 1, True, buffer, len(buffer))
        if n <= 0 or n > len(buffer):
            raise SystemExit("llama.cpp cannot apply the model's chat template")
        text = buffer.raw[:n]
        tokens = (api.llama_token * 1024)()
        count = api.llama_tokenize(self.vocab, text, len(text), tokens, len(tokens), True, True)
        if count <= 0:
            raise SystemExit("llama.cpp cannot tokenize the prompt")
        return list(tokens[:count])

    def aggregate(self, prompts: list, tokens: int) -> float:
        """Generated tokens per second for `prompts` decoded together."""
        api, streams = self.api, len(prompts)
        params = api.llama_context_default_params()
        params.n_ctx = streams * (max(map(len, prompts)) + tokens + 16)
        params.n_batch = params.n_ubatch = 512
        params.n_seq_max = streams
        params.n_threads = params.n_threads_batch = self.threads
        ctx = api.llama_init_from_model(self.model, params)
        batch = api.llama_batch_init(512, 0, streams)
        try:
            def decode(entries):
                """Decodes (token, position, sequence, wants logits) rows; returns the logits rows' argmax."""
                batch.n_tokens = len(entries)
                for i, (token, position, seq, logits) in enumerate(entries):
                    batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, position, 1
                    batch.seq_id[i][0], batch.logits[i] = seq, logits
                if api.llama_decode(ctx, batch) != 0:
                    raise SystemExit("llama_decode failed")
                picked = [i for i, entry in enumerate(entries) if entry[3]]
                return [int(np.ctypeslib.as_array(api.llama_get_logits_ith(ctx, i), shape=(self.n_vocab,)).argmax())
                        for i in picked]

            started = time.perf_counter()
            last = []
            for seq, prompt in enumerate(prompts):
                last += decode([(t, p, seq, p == len(prompt) - 1) for p, t in enumerate(prompt)])
            for step in range(1, tokens):
                last = decode([(last[s], len(prompts[s]) + step - 1, s, True) for s in range(streams)])
            return streams * tokens / (time.perf_counter() - started)
        finally:
            api.llama_batch_free(batch)
            api.llama_free(ctx)


def aggregate_rates(path: str, threads: int, messages: list, concurrency, tokens: int, reps: int) -> dict:
    """{requests in flight: median aggregate tok/s} over `reps` runs (after one to warm up)."""
    model = Model(path, threads)
    prompts = [model.prompt_tokens(m) for m in messages]
    model.aggregate(prompts[:1], tokens)
    rates = {n: [] for n in concurrency}
    for _ in range(reps):
        for n in concurrency:
            rates[n].append(model.aggregate([prompts[i % len(prompts)] for i in range(n)], tokens))
    return {n: statistics.median(r) for n, r in rates.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    from cluster import CONCURRENCY, SERVE_PROMPTS

    rates = aggregate_rates(args.model, args.threads, SERVE_PROMPTS, CONCURRENCY, args.tokens, args.reps)
    for n, rate in rates.items():
        print(f"{n} in flight: {rate:.1f} tok/s ({rate / rates[1]:.2f}x)")


if __name__ == "__main__":
    main()
