#!/usr/bin/env python3
"""Cake vs llama.cpp on one GPU: decode and 512-token prefill tok/s on the
same files, Llama 3.2 1B and Llama 3.1 8B shapes in Q4_K_M, Q8_0 and F16.

Made for a GPU machine that has CUDA, CMake and Python but no Rust and no
network (see docs/gpu.md, "Measuring"), in two steps:

    # here: the tokenizer the models use, llama.cpp's sources (the version
    # make bench builds, from the llama-cpp-python sdist on PyPI), the
    # Vulkan loader
    python3 bench/gpu.py prepare --model <default model .gguf> --out target/gpu-bench
    # there, with a release `cake` copied into target/gpu-bench:
    python3 bench/gpu.py run --cake target/gpu-bench/cake --work /tmp/gpu-bench

`run` builds llama.cpp in the background (CUDA for the GPU's compute
capability; also Vulkan where `glslc` and the Vulkan headers are found),
writes
the F16 models meanwhile (random weights, the default model's tokenizer
padded to Llama 3's 128 256 tokens; plain Python, no numpy), quantizes
them with llama.cpp's quantizer, then measures each file: llama.cpp with
`llama-bench -p 512 -n 128 -ngl 99`, Cake with `cake run --gpu on` on 512
random prompt tokens (prefill) and 128 tokens decoded after 16. It stops
starting new files when `--deadline` seconds are near and says which were
left out. The table goes to stdout, everything to `--json`.
"""

import argparse
import gzip
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from array import array
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gguf_lite  # noqa: E402

LLAMA_VERSION = "0.3.36"  # llama-cpp-python, as make bench
VOCAB = 128256
CONTEXT = 8192
SHAPES = {
    "1b": {"name": "Llama-3.2-1B-shape", "hidden": 2048, "layers": 16, "heads": 32, "kv_heads": 8,
           "ffn": 8192, "tied": True},
    "8b": {"name": "Llama-3.1-8B-shape", "hidden": 4096, "layers": 32, "heads": 32, "kv_heads": 8,
           "ffn": 14336, "tied": False},
    # For checking the script itself on a small machine (lavapipe).
    "tiny": {"name": "tiny-shape", "hidden": 256, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 512, "tied": True},
}
PREFILL, DECODE, DECODE_PROMPT = 512, 128, 16
VULKAN_FLAGS = ["-DGGML_VULKAN=ON"]
# llama.cpp's build: never native (a VM may list AMX and trap it), AMX off.
CPU_FLAGS = ["-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_AMX_TILE=OFF",
             "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF", "-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=OFF",
             "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
             "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_APP=OFF"]
# What of llama.cpp's tree the two tools need.
SOURCE_PARTS = ["CMakeLists.txt", "cmake", "ggml", "src", "include", "common", "tools", "vendor", "LICENSE"]


def prepare(args):
    """The tokenizer keys of `--model` and llama.cpp's trimmed sources, into `--out`."""
    args.out.mkdir(parents=True, exist_ok=True)
    keys = {k: v for k, v in gguf_lite.read_metadata(args.model).items() if k.startswith("tokenizer.")}
    with gzip.open(args.out / "tokenizer.json.gz", "wt") as file:
        json.dump(keys, file)
    # The sdist (77 MB) stays out of `--out`, which is carried to the GPU machine.
    downloads = Path(tempfile.mkdtemp())
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "llama-cpp-python",
                    f"llama-cpp-python=={LLAMA_VERSION}", "-d", str(downloads)], check=True)
    sdist = downloads / f"llama_cpp_python-{LLAMA_VERSION}.tar.gz"
    prefix = f"llama_cpp_python-{LLAMA_VERSION}/vendor/llama.cpp/"
    with tarfile.open(sdist) as source, tarfile.open(args.out / "llama-src.tar.xz", "w:xz") as trimmed:
        for member in source.getmembers():
            inside = member.name.removeprefix(prefix)
            if member.name.startswith(prefix) and inside.split("/")[0] in SOURCE_PARTS:
                member.name = "llama.cpp/" + inside
                member.pax_headers.pop("path", None)  # a long name's record would win over `name`
                trimmed.addfile(member, source.extractfile(member) if member.isfile() else None)
    shutil.rmtree(downloads)
    # Cake's Vulkan backend needs the loader, which a GPU machine may lack.
    loader = Path("/usr/lib/x86_64-linux-gnu/libvulkan.so.1")
    if loader.exists():
        (args.out / "lib").mkdir(exist_ok=True)
        shutil.copy(loader.resolve(), args.out / "lib" / "libvulkan.so.1")
    print(f"wrote {args.out}: tokenizer.json.gz, llama-src.tar.xz "
          f"({(args.out / 'llama-src.tar.xz').stat().st_size / 1e6:.1f} MB), the Vulkan loader; "
          "copy a stripped release cake beside them")


def random_f16_block(n_values: int, seed: int) -> bytes:
    """`n_values` random f16 values of magnitude 2^-7..2^-5 with random signs."""
    raw = array("H", random.Random(seed).randbytes(2 * n_values))
    return array("H", [(r & 0x83FF) | ((8 + (r >> 10) % 3) << 10) for r in raw]).tobytes()


def write_f16_model(shape: dict, tokenizer: dict, path: Path) -> None:
    """A Llama-architecture GGUF of `shape` with random F16 matrices (one
    random block repeated) and unit norms."""
    h, kv, ffn = shape["hidden"], shape["hidden"] // shape["heads"] * shape["kv_heads"], shape["ffn"]
    T = gguf_lite
    tokens = tokenizer["tokenizer.ggml.tokens"][1][1]
    types = tokenizer["tokenizer.ggml.token_type"][1][1]
    pad = VOCAB - len(tokens)
    metadata = {
        "general.architecture": (T.STRING, "llama"),
        "general.name": (T.STRING, shape["name"]),
        "general.file_type": (T.UINT32, 1),
        "llama.context_length": (T.UINT32, CONTEXT),
        "llama.embedding_length": (T.UINT32, h),
        "llama.block_count": (T.UINT32, shape["layers"]),
        "llama.feed_forward_length": (T.UINT32, ffn),
        "llama.attention.head_count": (T.UINT32, shape["heads"]),
        "llama.attention.head_count_kv": (T.UINT32, shape["kv_heads"]),
        "llama.rope.freq_base": (T.FLOAT32, 500000.0),
        "llama.attention.layer_norm_rms_epsilon": (T.FLOAT32, 1e-5),
        **{k: tuple(v) for k, v in tokenizer.items()},
        "tokenizer.ggml.tokens": (T.ARRAY, (T.STRING, tokens + [f"<unused_{i}>" for i in range(pad)])),
        "tokenizer.ggml.token_type": (T.ARRAY, (T.INT32, types + [1] * pad)),
    }
    block = random_f16_block(1 << 21, 0)

    def matrix(rows, cols):
        size = 2 * rows * cols

        def write(file):
            left = size
            while left:
                piece = block[:min(left, len(block))]
                file.write(piece)
                left -= len(piece)
        return [cols, rows], T.F16, size, write

    def norm(n):
        data = array("f", [1.0] * n).tobytes()
        return [n], T.F32, len(data), lambda file: file.write(data)

    plan = [("token_embd.weight", *matrix(VOCAB, h))]
    for layer in range(shape["layers"]):
        p = f"blk.{layer}."
        plan += [(p + "attn_norm.weight", *norm(h)), (p + "attn_q.weight", *matrix(h, h)),
                 (p + "attn_k.weight", *matrix(kv, h)), (p + "attn_v.weight", *matrix(kv, h)),
                 (p + "attn_output.weight", *matrix(h, h)), (p + "ffn_norm.weight", *norm(h)),
                 (p + "ffn_gate.weight", *matrix(ffn, h)), (p + "ffn_up.weight", *matrix(ffn, h)),
                 (p + "ffn_down.weight", *matrix(h, ffn))]
    plan.append(("output_norm.weight", *norm(h)))
    if not shape["tied"]:
        plan.append(("output.weight", *matrix(VOCAB, h)))
    partial = path.with_suffix(".partial")
    gguf_lite.write(partial, metadata, plan)
    partial.rename(path)


def start_build(source: Path, build: Path, flags: list, log: Path):
    """llama-bench and llama-quantize built in the background; the process."""
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    jobs = str(os.cpu_count() or 2)
    script = (f"cmake -S {source} -B {build} {' '.join(generator + CPU_FLAGS + flags)} && "
              f"cmake --build {build} --target llama-bench llama-quantize -j {jobs}")
    return subprocess.Popen(["bash", "-c", script], stdout=log.open("w"), stderr=subprocess.STDOUT)


def gpu_description() -> dict:
    """The NVIDIA GPU's name, driver and compute capability, if nvidia-smi answers."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
        name, driver, capability = (part.strip() for part in out.split(","))
        return {"name": name, "driver": driver, "compute_capability": capability}
    except (OSError, IndexError, ValueError, subprocess.TimeoutExpired):
        return {}


def llama_bench(binary: Path, model: Path, layers_on_gpu: int, reps: int, env: dict) -> dict:
    """llama-bench's prefill and decode tok/s (means of `reps`)."""
    out = subprocess.run([str(binary), "-m", str(model), "-p", str(PREFILL), "-n", str(DECODE), "-ngl",
                          str(layers_on_gpu), "-r", str(reps), "-o", "json"],
                         capture_output=True, text=True, timeout=600, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{binary.name} failed: {out.stderr[-2000:]}")
    rows = json.loads(out.stdout)
    prefill = next(r["avg_ts"] for r in rows if r["n_prompt"] == PREFILL and r["n_gen"] == 0)
    decode = next(r["avg_ts"] for r in rows if r["n_gen"] == DECODE and r["n_prompt"] == 0)
    return {"prefill": prefill, "decode": decode}


def cake_bench(cake: Path, model: Path, reps: int, env: dict) -> dict:
    """Cake's prefill and decode tok/s on the GPU (medians of `reps`)."""
    rng = random.Random(1)
    ids = [rng.randrange(1000, 30000) for _ in range(PREFILL)]

    def run(prompt, max_tokens):
        args = [str(cake), "run", "--model", str(model), "--gpu", "on", "--prompt-tokens", ",".join(map(str, prompt)),
                "--max-tokens", str(max_tokens), "--temperature", "0", "--ignore-eos", "--json"]
        out = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
        if out.returncode != 0:
            raise RuntimeError(f"cake failed: {out.stderr[-2000:]}")
        report = json.loads(out.stdout)
        if not report["gpu"]["layers"]:
            raise RuntimeError(f"cake put no layer on the GPU: {out.stderr[-2000:]}")
        return report

    prefill = [run(ids, 1)["timings"]["prompt_tok_s"] for _ in range(reps)]
    decoded = [run(ids[:DECODE_PROMPT], DECODE + 1) for _ in range(reps)]
    return {"prefill": statistics.median(prefill), "decode": statistics.median(r["timings"]["decode_tok_s"]
                                                                              for r in decoded),
            "device": decoded[0]["gpu"]["device"]}


def run(args):
    began = time.monotonic()
    args.work.mkdir(parents=True, exist_ok=True)
    with tarfile.open(args.assets / "llama-src.tar.xz") as source:
        source.extractall(args.work, filter="data")
    source = args.work / "llama.cpp"
    gpu = gpu_description()
    builds = {}
    wanted = args.peers.split(",")
    if "cuda" in wanted:
        if shutil.which("nvcc") and gpu.get("compute_capability"):
            arch = gpu["compute_capability"].replace(".", "")
            builds["cuda"] = (["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={arch}"], 99)
        else:
            print("llama.cpp CUDA: skipped (no nvcc or no NVIDIA GPU)", flush=True)
    if "vulkan" in wanted:
        # Also SPIRV-Headers, and a glslc recent enough for its cooperative
        # matrix shaders (Debian 12's 2023.2 is not): a failed build is named.
        if shutil.which("glslc") and Path("/usr/include/vulkan/vulkan.h").exists():
            builds["vulkan"] = (VULKAN_FLAGS, 99)
        else:
            print("llama.cpp Vulkan: skipped (no glslc or no Vulkan headers)", flush=True)
    if "cpu" in wanted:
        builds["cpu"] = ([], 0)
    processes = {peer: start_build(source, args.work / f"build-{peer}", flags, args.work / f"build-{peer}.log")
                 for peer, (flags, _) in builds.items()}
    with gzip.open(args.assets / "tokenizer.json.gz", "rt") as file:
        tokenizer = json.load(file)
    files = []
    for kind in args.shapes.split(","):
        f16 = args.work / f"{SHAPES[kind]['name']}.F16.gguf"
        if not f16.exists():
            write_f16_model(SHAPES[kind], tokenizer, f16)
        files += [(kind, qtype, f16) for qtype in args.types.split(",")]
    print(f"models written at {time.monotonic() - began:.0f} s", flush=True)
    ready = {}
    for peer, process in processes.items():
        if process.wait() == 0:
            ready[peer] = args.work / f"build-{peer}" / "bin"
        else:
            print(f"llama.cpp {peer}: the build failed, see {args.work}/build-{peer}.log", flush=True)
    print(f"llama.cpp built at {time.monotonic() - began:.0f} s: {', '.join(ready) or 'none'}", flush=True)
    quantizers = [path / "llama-quantize" for path in ready.values() if (path / "llama-quantize").exists()]
    if not quantizers:
        raise SystemExit("no llama.cpp build to quantize with")
    quantizer = quantizers[0]
    env = dict(os.environ)
    if (args.assets / "lib").exists():
        env["LD_LIBRARY_PATH"] = ":".join(filter(None, [str((args.assets / "lib").resolve()),
                                                         env.get("LD_LIBRARY_PATH")]))
    results = {"gpu": gpu, "peers": {p: " ".join(CPU_FLAGS + builds[p][0]) for p in ready},
               "commit": args.commit, "rows": [], "left_out": []}
    header = ("| file | Cake prefill | " + " | ".join(f"llama.cpp {p} prefill" for p in ready)
              + " | Cake decode | " + " | ".join(f"llama.cpp {p} decode" for p in ready) + " |")
    print(header + "\n|" + "---|" * (2 + 2 * len(ready)), flush=True)
    for kind, qtype, f16 in files:
        if time.monotonic() - began > args.deadline:
            results["left_out"].append(f"{SHAPES[kind]['name']} {qtype}")
            continue
        model = f16 if qtype == "F16" else args.work / f"{SHAPES[kind]['name']}.{qtype}.gguf"
        if not model.exists():
            subprocess.run([str(quantizer), str(f16), str(model), qtype, str(os.cpu_count() or 2)],
                           check=True, capture_output=True)
        row = {"file": f"{SHAPES[kind]['name']} {qtype}", "cake": cake_bench(args.cake, model, args.reps, env)}
        for peer, binary in ready.items():
            row[peer] = llama_bench(binary / "llama-bench", model, builds[peer][1], args.reps, env)
        results["rows"].append(row)
        print(f"| {row['file']} | {row['cake']['prefill']:.1f} | "
              + " | ".join(f"{row[p]['prefill']:.1f} ({row['cake']['prefill'] / row[p]['prefill']:.2f}x)"
                           for p in ready)
              + f" | {row['cake']['decode']:.1f} | "
              + " | ".join(f"{row[p]['decode']:.1f} ({row['cake']['decode'] / row[p]['decode']:.2f}x)"
                           for p in ready) + " |", flush=True)
    if results["left_out"]:
        print(f"left out (past the {args.deadline:.0f} s deadline): {', '.join(results['left_out'])}")
    print(f"GPU: {gpu or 'not an NVIDIA GPU'}; Cake's device: "
          f"{results['rows'][0]['cake']['device'] if results['rows'] else '-'}; {time.monotonic() - began:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    p = steps.add_parser("prepare")
    p.add_argument("--model", type=Path, required=True, help="the default model's GGUF (its tokenizer)")
    p.add_argument("--out", type=Path, default=Path("target/gpu-bench"))
    r = steps.add_parser("run")
    r.add_argument("--cake", type=Path, required=True)
    r.add_argument("--assets", type=Path, default=Path("target/gpu-bench"), help="what `prepare` wrote")
    r.add_argument("--work", type=Path, default=Path("/tmp/gpu-bench"))
    r.add_argument("--shapes", default="1b,8b")
    r.add_argument("--types", default="Q4_K_M,Q8_0,F16")
    r.add_argument("--peers", default="cuda,vulkan", help="llama.cpp builds to compare: cuda, vulkan, cpu")
    r.add_argument("--reps", type=int, default=3)
    r.add_argument("--deadline", type=float, default=480.0, help="seconds after which no new file is started")
    r.add_argument("--commit", default="", help="Cake's commit, for the record")
    r.add_argument("--json", type=Path)
    args = parser.parse_args()
    prepare(args) if args.step == "prepare" else run(args)


if __name__ == "__main__":
    main()
