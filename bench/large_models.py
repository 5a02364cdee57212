#!/usr/bin/env python3
"""Cake vs llama.cpp at the sizes people run: Llama 3.2 1B and Llama 3.1 8B
layer shapes with random weights, and long contexts, in one run.

The models are written by the `gguf` package in F16 (random normal weights,
std 0.02; the default model's tokenizer, padded with unused tokens to Llama
3's vocabulary of 128 256), then quantized by llama.cpp's own quantizer to
each type asked for. Everything is generated on the fly and cached in
`--dir` (outside the repository; the 8B F16 file takes 16 GB), never
committed.

Measured per file, both engines in fresh processes, alternating, `--reps`
times, medians: load time, prefill of a `--prompt`-token prompt (tok/s),
`--decode` greedy tokens after it (tok/s) and peak resident memory. Ratios
above 1 favour Cake (for load time and memory: llama.cpp's over Cake's).
Cake's first load of each file, which repacks it and writes the tile cache
that the repetitions then map, is shown in brackets.

Long context on the default model's weights (`--long-types`): prefill of a
2 048-token prompt, and decode with 4 096 tokens in the KV cache.

    python bench/large_models.py --cake target/release/cake [--shapes 1b,8b] [--types Q4_K_M,Q4_0,Q8_0]
"""

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare  # noqa: E402  (the shared measuring code)
import quant_types  # noqa: E402  (llama.cpp's quantizer, cached files)

SHAPES = {
    # Llama 3.2 1B: tied embeddings.
    "1b": {"name": "Llama-3.2-1B-shape", "hidden": 2048, "layers": 16, "heads": 32, "kv_heads": 8,
           "ffn": 8192, "tied": True},
    # Llama 3.1 8B: its own output matrix.
    "8b": {"name": "Llama-3.1-8B-shape", "hidden": 4096, "layers": 32, "heads": 32, "kv_heads": 8,
           "ffn": 14336, "tied": False},
}
VOCAB = 128256
CONTEXT = 8192


def tokenizer_fields(model: Path):
    """The default model's tokenizer metadata, tokens padded to `VOCAB`."""
    from gguf import GGUFReader

    reader = GGUFReader(str(model))

    def field(name):
        f = reader.fields[name]
        return f.contents()

    tokens = field("tokenizer.ggml.tokens")
    types = field("tokenizer.ggml.token_type")
    padding = VOCAB - len(tokens)
    tokens = tokens + [f"<unused_{i}>" for i in range(padding)]
    types = types + [1] * padding
    return {
        "model": field("tokenizer.ggml.model"),
        "pre": field("tokenizer.ggml.pre"),
        "tokens": tokens,
        "types": types,
        "merges": field("tokenizer.ggml.merges"),
        "bos": field("tokenizer.ggml.bos_token_id"),
        "eos": field("tokenizer.ggml.eos_token_id"),
    }


def tensor_plan(shape):
    """(name, numpy shape) of every tensor, in file order."""
    h, kv = shape["hidden"], shape["hidden"] // shape["heads"] * shape["kv_heads"]
    plan = [("token_embd.weight", (VOCAB, h))]
    for layer in range(shape["layers"]):
        p = f"blk.{layer}."
        plan += [
            (p + "attn_norm.weight", (h,)), (p + "attn_q.weight", (h, h)), (p + "attn_k.weight", (kv, h)),
            (p + "attn_v.weight", (kv, h)), (p + "attn_output.weight", (h, h)), (p + "ffn_norm.weight", (h,)),
            (p + "ffn_gate.weight", (shape["ffn"], h)), (p + "ffn_up.weight", (shape["ffn"], h)),
            (p + "ffn_down.weight", (h, shape["ffn"])),
        ]
    plan.append(("output_norm.weight", (h,)))
    if not shape["tied"]:
        plan.append(("output.weight", (VOCAB, h)))
    return plan


def random_f16_model(kind: str, out_dir: Path, default_model: Path) -> Path:
    """The `kind` shape in F16 with random weights (cached)."""
    import gguf

    shape = SHAPES[kind]
    target = out_dir / f"{shape['name']}.F16.gguf"
    if target.exists():
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    writer = gguf.GGUFWriter(str(partial), "llama")
    writer.add_name(shape["name"])
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(shape["hidden"])
    writer.add_block_count(shape["layers"])
    writer.add_feed_forward_length(shape["ffn"])
    writer.add_head_count(shape["heads"])
    writer.add_head_count_kv(shape["kv_heads"])
    writer.add_rope_freq_base(500000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    tok = tokenizer_fields(default_model)
    writer.add_tokenizer_model(tok["model"])
    writer.add_tokenizer_pre(tok["pre"])
    writer.add_token_list(tok["tokens"])
    writer.add_token_types(tok["types"])
    writer.add_token_merges(tok["merges"])
    writer.add_bos_token_id(tok["bos"])
    writer.add_eos_token_id(tok["eos"])
    plan = tensor_plan(shape)
    for name, dims in plan:
        dtype = np.float32 if len(dims) == 1 else np.float16
        writer.add_tensor_info(name, dims, np.dtype(dtype), int(np.prod(dims)) * np.dtype(dtype).itemsize)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.default_rng(0)
    for name, dims in plan:
        if len(dims) == 1:
            writer.write_tensor_data(np.ones(dims, dtype=np.float32))
            continue
        # Row blocks keep the memory of an 8B model's largest matrix small.
        rows_per_chunk = max(1, (64 << 20) // (dims[1] * 4))
        tensor = np.empty(dims, dtype=np.float16)
        for start in range(0, dims[0], rows_per_chunk):
            chunk = rng.standard_normal((min(rows_per_chunk, dims[0] - start), dims[1]), dtype=np.float32)
            tensor[start:start + chunk.shape[0]] = chunk * 0.02
        writer.write_tensor_data(tensor)
        del tensor
    writer.close()
    partial.rename(target)
    return target


def measure(cake: str, model: Path, prompt, decode: int, threads: int, reps: int):
    """Medians of both engines' prefill, decode, load and peak RSS."""
    runs = {"Cake": [], "llama.cpp": []}
    first_open_s = compare.cake_first_open(cake, model, prompt[:16], threads)
    for _ in range(reps):
        runs["llama.cpp"].append(compare.llama_cpp_run(model, "throughput", prompt, decode, threads))
        runs["Cake"].append(compare.cake_run(cake, model, "throughput", prompt, decode, threads))
    table = {
        engine: {
            "prefill": statistics.median(r["prompt_tok_s"] for r in rs),
            "decode": statistics.median(r["decode_tok_s"] for r in rs),
            "load_s": statistics.median(r["load_s"] for r in rs),
            "rss_mb": statistics.median(r["rss"] for r in rs) / 1e6,
        }
        for engine, rs in runs.items()
    }
    table["Cake"]["first_open_s"] = first_open_s
    return table


def row(label: str, table) -> str:
    ours, theirs = table["Cake"], table["llama.cpp"]
    return (f"| {label} | {ours['prefill']:.1f} | {theirs['prefill']:.1f} | {ours['prefill'] / theirs['prefill']:.2f}x | "
            f"{ours['decode']:.2f} | {theirs['decode']:.2f} | {ours['decode'] / theirs['decode']:.2f}x | "
            f"{ours['load_s']:.2f} ({ours['first_open_s']:.2f}) / {theirs['load_s']:.2f} s | {ours['rss_mb']:.0f} / {theirs['rss_mb']:.0f} MB | "
            f"{ours['rss_mb'] / theirs['rss_mb']:.2f}x |")


HEADER = ("| file | Cake prefill | llama.cpp prefill | ratio | Cake decode | llama.cpp decode | ratio | "
          "load Cake (first) / llama.cpp | peak RSS Cake / llama.cpp | RSS ratio (≤ 1.1) |\n"
          "|---|---|---|---|---|---|---|---|---|---|")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cake", default="target/release/cake")
    parser.add_argument("--model", type=Path, default=compare.default_model())
    parser.add_argument("--shapes", default="1b,8b")
    parser.add_argument("--types", default="Q4_K_M,Q4_0,Q8_0")
    parser.add_argument("--long-types", default="Q4_K_M")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--decode", type=int, default=32)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path.home() / ".cache" / "cake-bench")
    args = parser.parse_args()

    import llama_cpp

    print(f"llama.cpp {llama_cpp.__version__}; {args.threads} threads; medians of {args.reps}; "
          f"prefill of {args.prompt} tokens, then {args.decode} decoded tokens")
    print(HEADER)
    for kind in filter(None, args.shapes.split(",")):
        for qtype in args.types.split(","):
            path = args.dir / f"{SHAPES[kind]['name']}.{qtype}.gguf"
            if not path.exists():
                # The F16 file is only needed to make a quantized one (the
                # 8B's is 16 GB: it may be deleted once they are made).
                path = quant_types.quantized(random_f16_model(kind, args.dir, args.model), qtype, args.dir)
            prompt = compare.text_tokens(compare.vocabulary(path), args.prompt)
            table = measure(args.cake, path, prompt, args.decode, args.threads, args.reps)
            print(row(f"{SHAPES[kind]['name']} {qtype} ({quant_types.tensor_types(path)})", table), flush=True)
    f32 = compare.make_f32_copy(args.model, args.dir)
    for qtype in filter(None, args.long_types.split(",")):
        path = quant_types.quantized(f32, qtype, args.dir)
        long_prefill = measure(args.cake, path, compare.text_tokens(compare.vocabulary(path), 2048), 1, args.threads, args.reps)
        print(row(f"{args.model.stem} {qtype}, 2 048-token prompt", long_prefill), flush=True)
        long_decode = measure(args.cake, path, compare.text_tokens(compare.vocabulary(path), 4096), args.decode, args.threads, args.reps)
        print(row(f"{args.model.stem} {qtype}, decode after 4 096 tokens", long_decode), flush=True)


if __name__ == "__main__":
    main()
