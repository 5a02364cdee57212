#!/usr/bin/env python3
"""VibeVoice text to speech: the reference package against `cake tts`, one run.

Builds a mid-size VibeVoice with random weights using the reference package
(`vibevoice` 0.0.1), made "talkative" so that both sides keep choosing "one
more frame of speech" until their frame limit (the same edit as
tests/fixtures/make_talkative_vibevoice.py), saves it with the tiny fixture's
tokenizer files into a temporary folder, writes a synthetic voice WAV and a
one-line script, then times generating `--frames` frames with the reference
(float32 on CPU, torch threads = `--threads`) and with `cake tts`
(RAYON_NUM_THREADS = `--threads`) on the same folder, voice and script.
Repetitions alternate between the two sides; each figure is the median of
`--reps` (after `--warmup` untimed runs per side). Model load is reported
separately and is not part of the generation time.

Run with the reference venv:

    /work/vvenv/bin/python bench/speech.py --cake target/release/cake

Generation time covers, on both sides, the prefill (voice prompt through
the acoustic and semantic encoders, the prompt through the language model)
and every frame (positive and negative language-model steps, the diffusion
head under guidance, the streaming acoustic decoder and semantic encoder).
Reference: the processor call plus `generate()`. Cake: from its "loaded"
stderr line to its "wrote" line, timestamped as they arrive. "First frame"
is the time to the first frame's audio and features (prompt, prefill, one
frame): for the reference a hook on the semantic connector (which only runs
per frame), for Cake its "frame 1:" progress line (printed when that comes
0.5 s or more after the prefill began; otherwise n/a).

The machine may be shared: every run starts once other processes use little
CPU (from /proc/stat, minus this process and its children), and a run during
which they used more than `--busy` cores is redone (up to `--retries` times).
PyTorch's OpenMP threads slow down far more than Cake's under such contention,
so a disturbed run would distort the ratio.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import wave
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TINY = ROOT / "tests" / "fixtures" / "tiny" / "vibevoice"
TOKENIZER_FILES = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "preprocessor_config.json",
]
SAMPLE_RATE = 24000
HOP = 3200  # samples per speech frame (product of the tokenizer ratios)
RATIOS = [8, 5, 5, 4, 2, 2]  # the real checkpoints' encoder_ratios / decoder_ratios
BOOST = 100.0  # the talkative edit's first-component boost
SCRIPT = (
    "Speaker 1: Cake runs language models on the machines of a home network, "
    "and now it speaks as well. The quick brown fox jumps over the lazy dog.\n"
)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cake", default=str(ROOT / "target" / "release" / "cake"))
    ap.add_argument("--frames", type=int, default=40, help="speech frames to generate (7.5 per second of audio)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs per side before the timed ones")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=768, help="LM hidden size (and diffusion head width)")
    ap.add_argument("--layers", type=int, default=8, help="LM layers")
    ap.add_argument("--filters", type=int, default=16, help="speech tokenizers' n_filters (real: 32)")
    ap.add_argument("--depths", default="3-3-3-3-3-3-8", help="encoder depths (real: 3-3-3-3-3-3-8)")
    ap.add_argument("--head-layers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10, help="diffusion steps per frame")
    ap.add_argument("--cfg-scale", type=float, default=1.3)
    ap.add_argument("--voice-seconds", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--busy", type=float, default=0.1,
                    help="a run during which other processes used more cores than this is redone")
    ap.add_argument("--retries", type=int, default=5)
    ap.add_argument("--max-wait", type=float, default=900, help="seconds to wait for a quiet machine before a run")
    ap.add_argument("--keep", type=Path, help="build the model in this folder and keep it")
    return ap.parse_args()


ARGS = parse_args()
# Thread settings must be in place before torch is imported.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
os.environ["MKL_NUM_THREADS"] = str(ARGS.threads)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from vibevoice.modular.configuration_vibevoice import VibeVoiceConfig  # noqa: E402
from vibevoice.modular.modeling_vibevoice_inference import VibeVoiceForConditionalGenerationInference  # noqa: E402
from vibevoice.modular.modular_vibevoice_text_tokenizer import VibeVoiceTextTokenizerFast  # noqa: E402
from vibevoice.processor.vibevoice_processor import VibeVoiceProcessor  # noqa: E402
from vibevoice.processor.vibevoice_tokenizer_processor import VibeVoiceTokenizerProcessor  # noqa: E402

# The fixture generator's model helpers (it sets one torch thread on import: reset after).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))
from tts_run import run_tts  # noqa: E402  (bench/, the script's own folder)
from generate_tiny_vibevoice import head_config, reinit_weights, tokenizer_config  # noqa: E402

torch.set_num_threads(ARGS.threads)
hf_logging.set_verbosity_error()


# --------------------------------------------------------------------------------------
# model


def build_config(args, vocab_size, eos_id):
    hidden = args.hidden
    heads = max(1, hidden // 64)
    # Qwen2.5-1.5B: 1536 wide, MLP 8960 (x5.83), 12 query heads, 2 KV heads.
    intermediate = int(round(hidden * 8960 / 1536 / 64)) * 64
    decoder = dict(
        model_type="qwen2",
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=heads,
        num_key_value_heads=2 if heads % 2 == 0 else 1,
        hidden_act="silu",
        max_position_embeddings=8192,
        initializer_range=0.02,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        rope_scaling=None,
        use_sliding_window=False,
        sliding_window=None,
        max_window_layers=args.layers,
        attention_dropout=0.0,
        tie_word_embeddings=False,  # the talkative edit needs its own LM head
        use_cache=True,
        torch_dtype="float32",
        eos_token_id=eos_id,
        bos_token_id=None,
    )
    head = head_config(hidden, args.head_layers, 64)
    config = VibeVoiceConfig(
        acoustic_tokenizer_config=tokenizer_config(64, True, args.filters, args.depths, RATIOS),
        semantic_tokenizer_config=tokenizer_config(128, False, args.filters, args.depths, RATIOS),
        decoder_config=decoder,
        diffusion_head_config=head,
        torch_dtype="float32",
    )
    config.tie_word_embeddings = False
    return config


def redraw_weights(model, seed):
    """The package's init makes most of the network a no-op (zeroed adaLN, 1e-6 layer
    scales); redraw every parameter as the fixture generator does."""
    reinit_weights(model, seed)


def make_talkative(model, frame_token):
    """Every LM input gets a large positive first component (token embeddings and both
    connectors' outputs), the final norm keeps only that component, and the LM head scores
    only the speech-frame token on it: the greedy choice is always one more frame."""
    lm = model.model.language_model
    with torch.no_grad():
        lm.embed_tokens.weight[:, 0] += BOOST
        model.model.acoustic_connector.fc2.bias[0] += BOOST
        model.model.semantic_connector.fc2.bias[0] += BOOST
        lm.norm.weight.zero_()
        lm.norm.weight[0] = 1.0
        model.lm_head.weight.zero_()
        model.lm_head.weight[frame_token, 0] = 1.0


def synth_voice(seconds, seed):
    """A gliding voiced tone with a few harmonics, a slow vibrato and a little noise."""
    rng = np.random.default_rng(seed)
    n = int(round(seconds * SAMPLE_RATE))
    t = np.arange(n) / SAMPLE_RATE
    f0 = 120.0 + 20.0 * np.sin(2 * np.pi * 0.7 * t) + 30.0 * t / max(seconds, 1e-9)
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    sig = sum(a * np.sin(k * phase + rng.uniform(0, 2 * np.pi)) for k, a in enumerate([1.0, 0.6, 0.35, 0.2, 0.1], 1))
    sig = sig * (0.6 + 0.4 * np.sin(2 * np.pi * 3.0 * t) ** 2) + 0.02 * rng.standard_normal(n)
    ramp = np.minimum(1.0, np.minimum(t / 0.03, (seconds - t) / 0.03))
    return 0.6 * sig * ramp / np.max(np.abs(sig))


def write_wav(path, sig):
    pcm = np.clip(np.round(sig * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(pcm.tobytes())


def read_wav(path):
    with wave.open(str(path), "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, SAMPLE_RATE)
        raw = w.readframes(w.getnframes())
    return np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0


def make_processor(model_dir):
    tokenizer = VibeVoiceTextTokenizerFast.from_pretrained(str(model_dir))
    return VibeVoiceProcessor(
        tokenizer=tokenizer,
        audio_processor=VibeVoiceTokenizerProcessor(),
        speech_tok_compress_ratio=HOP,
        db_normalize=True,
    )


def processor_inputs(processor, script, voice):
    return processor(text=[script], voice_samples=[[voice]], padding=True, return_tensors="pt", return_attention_mask=True)


def build_model(args, model_dir, voice):
    """Writes the random talkative checkpoint into model_dir; returns a description."""
    model_dir.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copy(TINY / name, model_dir / name)
    processor = make_processor(model_dir)
    tokenizer = processor.tokenizer
    vocab_size = ((len(tokenizer) + 63) // 64) * 64
    config = build_config(args, vocab_size, tokenizer.eos_token_id)
    torch.manual_seed(args.seed)
    model = VibeVoiceForConditionalGenerationInference(config)
    redraw_weights(model, args.seed + 17)
    assert model.lm_head.weight.data_ptr() != model.model.language_model.embed_tokens.weight.data_ptr()
    make_talkative(model, tokenizer.speech_diffusion_id)
    model.eval()
    # speech_scaling_factor / speech_bias_factor from the voice's latent means, as the
    # training code derives them (real checkpoints store them).
    inputs = processor_inputs(processor, SCRIPT, voice)
    with torch.no_grad():
        mean = model.model.acoustic_tokenizer.encode(inputs["speech_tensors"].unsqueeze(1)).mean
        valid = mean[inputs["speech_masks"]].flatten()
        model.model.speech_scaling_factor.copy_(1.0 / valid.std())
        model.model.speech_bias_factor.copy_(-valid.mean())
    model.save_pretrained(str(model_dir), safe_serialization=True)
    cfg_path = model_dir / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["architectures"] = ["VibeVoiceForConditionalGeneration"]  # what real checkpoints name
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")

    m = model.model

    def count(module):
        return sum(p.numel() for p in module.parameters())

    d = config.decoder_config
    info = {
        "lm": f"Qwen2, hidden {d.hidden_size}, {d.num_hidden_layers} layers, {d.num_attention_heads} heads "
        f"({d.num_key_value_heads} KV), MLP {d.intermediate_size}, vocab {d.vocab_size}",
        "head": f"hidden {config.diffusion_head_config.hidden_size}, {config.diffusion_head_config.head_layers} layers, "
        f"FFN x{config.diffusion_head_config.head_ffn_ratio}, latent 64",
        "tokenizers": f"n_filters {args.filters} (widest {args.filters * 2 ** len(RATIOS)} channels), "
        f"depths {args.depths} (decoder reversed), ratios {'-'.join(map(str, RATIOS))}, vae 64 / 128",
        "params": {
            "lm": count(m.language_model) + count(model.lm_head),
            "head": count(m.prediction_head),
            "acoustic_encoder": count(m.acoustic_tokenizer.encoder),
            "acoustic_decoder": count(m.acoustic_tokenizer.decoder),
            "semantic_encoder": count(m.semantic_tokenizer.encoder),
            "connectors": count(m.acoustic_connector) + count(m.semantic_connector),
            "total": count(model),
        },
        "size_mb": (model_dir / "model.safetensors").stat().st_size / 1e6,
        "frame_token": tokenizer.speech_diffusion_id,
    }
    del model
    return info


# --------------------------------------------------------------------------------------
# the two sides


def load_reference(model_dir):
    start = time.perf_counter()
    model = VibeVoiceForConditionalGenerationInference.from_pretrained(str(model_dir), torch_dtype=torch.float32)
    model.eval()
    processor = make_processor(model_dir)
    return model, processor, time.perf_counter() - start


def run_reference(model, processor, script, voice, frames, args, seed):
    model.set_ddpm_inference_steps(num_steps=args.steps)
    torch.manual_seed(seed)
    first = []  # the semantic connector runs once per frame (not in the prefill)
    hook = model.model.semantic_connector.register_forward_hook(
        lambda *_: first.append(time.perf_counter()) if not first else None
    )
    start = time.perf_counter()
    inputs = processor_inputs(processor, script, voice)
    with torch.no_grad():
        out = model.generate(
            **inputs,
            max_new_tokens=frames,
            cfg_scale=args.cfg_scale,
            tokenizer=processor.tokenizer,
            generation_config={"do_sample": False},
            verbose=False,
            show_progress_bar=False,
        )
    elapsed = time.perf_counter() - start
    hook.remove()
    audio = out.speech_outputs[0]
    n_samples = 0 if audio is None else int(audio.shape[-1])
    generated = out.sequences[0, inputs["input_ids"].shape[1]:].tolist()
    made = sum(1 for t in generated if t == processor.tokenizer.speech_diffusion_id)
    assert n_samples == made * HOP, (n_samples, made)
    return {
        "seconds": elapsed,
        "first": first[0] - start if first else None,
        "frames": made,
        "audio_s": n_samples / SAMPLE_RATE,
        "prompt_tokens": inputs["input_ids"].shape[1],
    }


def run_cake(cake, model_dir, voice_path, script_path, out_path, frames, args, seed):
    # ceil(max_seconds * 24000 / 3200) frames: half a frame under N gives exactly N.
    max_seconds = (frames - 0.5) * HOP / SAMPLE_RATE
    cmd = [
        cake, "tts", "--model", str(model_dir), "--voice", str(voice_path), "--script", str(script_path),
        "--out", str(out_path), "--cfg-scale", str(args.cfg_scale), "--steps", str(args.steps),
        "--seed", str(seed), "--max-seconds", f"{max_seconds:.6f}",
    ]
    run = run_tts(cmd, dict(os.environ, RAYON_NUM_THREADS=str(args.threads)))
    with wave.open(str(out_path), "rb") as w:
        assert w.getnframes() == run["frames"] * HOP, (w.getnframes(), run["frames"])
    # "frame 1" is printed when the first frame came 0.5 s or more after the prefill began.
    first = run["first_frame"]
    return {
        "audio_s": run["audio_s"],
        "frames": run["frames"],
        "end": run["end"],
        "seconds": run["wrote"] - run["loaded"],  # build prompt + generate + write the WAV
        "first": None if first is None else first - run["loaded"],
        "load": run["loaded"] - run["start"],  # process start, voice WAV, model load
        "printed_load": run["load_s"],
        "printed_gen": run["generation_s"],
        "total": run["ended"] - run["start"],
    }


# --------------------------------------------------------------------------------------


CLK_TCK = os.sysconf("SC_CLK_TCK")


def system_busy():
    """CPU seconds all CPUs have spent busy (steal included) since boot."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = f[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def own_cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class OtherLoad:
    """CPU used by everything but this process and its children over a span, in cores."""

    def __enter__(self):
        self.t, self.busy, self.own = time.perf_counter(), system_busy(), own_cpu()
        return self

    def __exit__(self, *exc):
        span = max(time.perf_counter() - self.t, 1e-9)
        own = own_cpu() - self.own
        self.cores = max(0.0, (system_busy() - self.busy) - own) / span
        self.own_cores = own / span
        return False


def wait_quiet(threshold, max_wait):
    """Waits (up to max_wait s) until other processes use under `threshold` cores over 2 s."""
    start = time.perf_counter()
    while True:
        with OtherLoad() as load:
            time.sleep(2.0)
        if load.cores < threshold:
            return time.perf_counter() - start
        if time.perf_counter() - start > max_wait:
            print(f"machine still busy ({load.cores:.2f} cores used by others); going on", file=sys.stderr)
            return time.perf_counter() - start


def measured(fn, args):
    """Runs fn() once the machine is quiet, again (up to --retries times) while other
    processes took more than --busy cores during the run. Returns (result, their cores)."""
    for attempt in range(args.retries + 1):
        wait_quiet(args.busy / 2, args.max_wait)
        with OtherLoad() as load:
            res = fn()
        res["others"] = load.cores
        res["cores"] = load.own_cores  # this process and its children, over the run
        if load.cores < args.busy:
            return res
        print(f"  disturbed (others used {load.cores:.2f} cores during {res['seconds']:.1f} s); again", file=sys.stderr)
    return res


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def loadavg():
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def fmt_params(n):
    return f"{n / 1e6:.1f}M"


def main():
    args = ARGS
    cake = Path(args.cake)
    if not cake.exists():
        sys.exit(f"{cake}: no such binary (build it with `cargo build --release`)")
    if args.keep:
        root = args.keep
        root.mkdir(parents=True, exist_ok=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="cake-speech-bench-"))
    model_dir = root / "model"
    voice_path = root / "voice.wav"
    script_path = root / "script.txt"
    out_path = root / "cake-out.wav"
    load_before = loadavg()
    try:
        write_wav(voice_path, synth_voice(args.voice_seconds, args.seed))
        script_path.write_text(SCRIPT)
        voice = read_wav(voice_path)

        t0 = time.perf_counter()
        info = build_model(args, model_dir, voice)
        print(f"built the model in {time.perf_counter() - t0:.1f} s ({info['size_mb']:.0f} MB) at {model_dir}", file=sys.stderr)

        model, processor, ref_load = load_reference(model_dir)
        print(f"reference loaded in {ref_load:.2f} s", file=sys.stderr)

        ref_runs, cake_runs = [], []
        for i in range(args.warmup + args.reps):
            seed = args.seed + 1000 + i
            timed = i >= args.warmup
            r = measured(lambda: run_reference(model, processor, SCRIPT, voice, args.frames, args, seed), args)
            c = measured(lambda: run_cake(cake, model_dir, voice_path, script_path, out_path, args.frames, args, seed), args)
            for side, res in (("reference", r), ("cake", c)):
                if res["frames"] != args.frames:
                    raise RuntimeError(f"{side} made {res['frames']} frames, not {args.frames}")
            tag = "run" if timed else "warm-up"
            print(
                f"{tag} {i + 1}: reference {r['seconds']:.2f} s, cake {c['seconds']:.2f} s "
                f"(cake printed load {c['printed_load']:.1f} s / generation {c['printed_gen']:.1f} s; "
                f"others used {r['others']:.2f} / {c['others']:.2f} cores)",
                file=sys.stderr,
            )
            if timed:
                ref_runs.append(r)
                cake_runs.append(c)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    load_after = loadavg()

    frames = args.frames
    audio_s = frames * HOP / SAMPLE_RATE
    ref_gen = statistics.median(r["seconds"] for r in ref_runs)
    cake_gen = statistics.median(c["seconds"] for c in cake_runs)
    cake_load = statistics.median(c["load"] for c in cake_runs)
    p = info["params"]

    print(
        f"VibeVoice (random weights, talkative), float32 on CPU, {args.threads} threads, {frames} frames, "
        f"{args.steps} diffusion steps, cfg {args.cfg_scale}, voice prompt {args.voice_seconds:g} s, "
        f"prompt {ref_runs[0]['prompt_tokens']} tokens, median of {args.reps} (after {args.warmup} warm-up)"
    )
    print(f"- LM: {info['lm']} ({fmt_params(p['lm'])} params)")
    print(f"- diffusion head: {info['head']} ({fmt_params(p['head'])} params)")
    print(
        f"- speech tokenizers: {info['tokenizers']} (acoustic encoder {fmt_params(p['acoustic_encoder'])}, "
        f"decoder {fmt_params(p['acoustic_decoder'])}, semantic encoder {fmt_params(p['semantic_encoder'])})"
    )
    print(f"- total {fmt_params(p['total'])} params, model.safetensors {info['size_mb']:.0f} MB")
    print(
        f"- machine: {cpu_model()}, {os.cpu_count()} logical CPUs, {platform.machine()}, {platform.platform()}; "
        f"load average {load_before} before, {load_after} after"
    )
    print(
        f"- reference: vibevoice 0.0.1, torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"transformers {transformers.__version__}, attention {model.model.language_model.config._attn_implementation}"
    )
    print(f"- Cake: {cake} with RAYON_NUM_THREADS={args.threads}")
    print()
    def split(runs):
        """Median time to the first frame (prompt + prefill + one frame) and per later frame."""
        firsts = [r["first"] for r in runs if r["first"] is not None]
        if not firsts or frames < 2:
            return None, None
        per = [(r["seconds"] - r["first"]) / (frames - 1) for r in runs if r["first"] is not None]
        return statistics.median(firsts), statistics.median(per)

    def cell(x, digits=2):
        return "n/a" if x is None else f"{x:.{digits}f}"

    ref_first, ref_per = split(ref_runs)
    cake_first, cake_per = split(cake_runs)
    ratio = lambda a, b: "n/a" if a is None or b is None else f"{a / b:.2f}x"  # noqa: E731
    print("| engine | frames | audio s | load s | generation s | real-time factor | first frame s | per later frame s |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| reference (PyTorch) | {frames} | {audio_s:.2f} | {ref_load:.2f} | {ref_gen:.2f} | {ref_gen / audio_s:.2f} "
          f"| {cell(ref_first)} | {cell(ref_per, 3)} |")
    print(f"| Cake | {frames} | {audio_s:.2f} | {cake_load:.2f} | {cake_gen:.2f} | {cake_gen / audio_s:.2f} "
          f"| {cell(cake_first)} | {cell(cake_per, 3)} |")
    print(f"| reference / Cake | | | | {ref_gen / cake_gen:.2f}x | | {ratio(ref_first, cake_first)} | {ratio(ref_per, cake_per)} |")
    print()
    print("runs (generation s): reference " + ", ".join(f"{r['seconds']:.2f}" for r in ref_runs)
          + "; Cake " + ", ".join(f"{c['seconds']:.2f}" for c in cake_runs)
          + " (Cake's own \"wrote\" lines: " + ", ".join(f"{c['printed_gen']:.1f}" for c in cake_runs) + ")")
    print("CPU used by each side during its runs (cores, of {}): reference ".format(os.cpu_count())
          + ", ".join(f"{r['cores']:.2f}" for r in ref_runs) + "; Cake " + ", ".join(f"{c['cores']:.2f}" for c in cake_runs))
    print("CPU used by other processes during the timed runs (cores): reference "
          + ", ".join(f"{r['others']:.2f}" for r in ref_runs) + "; Cake " + ", ".join(f"{c['others']:.2f}" for c in cake_runs))


if __name__ == "__main__":
    main()
