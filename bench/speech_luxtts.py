#!/usr/bin/env python3
"""LuxTTS: the reference's PyTorch route against `cake tts`, one run.

Builds the released model's shape (tests/fixtures/luxtts/config.json: the
ZipVoice-Distill acoustic model, 122.7 M parameters, and LinaCodec's 48 kHz
Vocos of tests/fixtures/luxtts/vocoder_config.yaml, 15.7 M) with random
weights from the reference classes (shifted by the tiny fixture's
`perturb`, so that nothing sits at its initial value), cached in --cache.
A 4-second voice prompt is synthesized (a pitch-varying pulse train through
three formant resonators) and given a fixed transcript. Then, repetitions
alternating, it times the reference's `generate` (LuxTTS 381b1609's
modeling_utils.generate, float32, torch threads = `--threads`; the prompt
features made by its `process_audio` beforehand, not counted) and `cake
tts` (RAYON_NUM_THREADS = `--threads`; from its "loaded" line to its
"wrote" line, so prompt features and phonemes are counted on Cake's side)
speaking the same texts in the same voice with LuxTTS's defaults:

- a short text (one piece for Cake: at most 120 characters);
- a long text of 8 sentences, which the reference speaks in one pass and
  Cake in pieces of whole sentences.

It reports the real-time factor (generation time / audio time) and the
time to the first audio: the reference returns the whole waveform at the
end; Cake's first audio is its first frame's progress line ("frame 1: …
after X s", the moment the first samples are handed on; `--play` would
play them then, but into ALSA's null device its playback thread spins on
one of the two cores and slows the rest). Model load is not counted.

    PYTHONPATH=/root/lux-src/LuxTTS:/root/lux-src/LinaCodec/src \\
        /root/venv-lux/bin/python bench/speech_luxtts.py --cake target/release/cake
"""

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "tests" / "fixtures"
sys.path.insert(0, str(FIXTURES))
from tts_run import run_tts  # noqa: E402  (bench/, the script's own folder)
import generate_tiny_luxtts as tiny  # noqa: E402  (sets one torch thread: reset below)
import torch  # noqa: E402
from linacodec.vocoder.vocos import Vocos  # noqa: E402
from torch.nn.utils import parametrize  # noqa: E402
from zipvoice.models.zipvoice_distill import ZipVoiceDistill  # noqa: E402
from zipvoice.tokenizer.tokenizer import EmiliaTokenizer  # noqa: E402

PROMPT_SECONDS = 4.0
PROMPT_TEXT = "This is a short recording of my own voice, made for the test."
TEXTS = {
    "short": "The quick brown fox jumps over the lazy dog. It was a bright, cold day in April.",
    "long": " ".join([
        "The quick brown fox jumps over the lazy dog.",
        "It was a bright, cold day in April, and the clocks were striking thirteen.",
        "Every morning the baker opened his shop before the sun came up.",
        "The smell of fresh bread drifted down the narrow street.",
        "Children stopped on their way to school to look through the window.",
        "Some of them pressed their noses against the glass.",
        "The baker waved at them and smiled.",
        "Then he went back to work, because the town would soon be awake.",
    ]),
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cake", default="target/release/cake")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", default=str(Path.home() / ".cache" / "cake-bench" / "luxtts-full"))
    return p.parse_args()


def build(folder: Path, seed: int):
    """The released shapes with random weights, in the Hub's layout (skipped when cached)."""
    if (folder / "vocoder" / "vocos.bin").exists():
        return
    (folder / "vocoder").mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "tiny" / "luxtts" / "tokens.txt", folder / "tokens.txt")
    config = json.loads((FIXTURES / "luxtts" / "config.json").read_text())
    tokenizer = EmiliaTokenizer(token_file=str(folder / "tokens.txt"))
    torch.manual_seed(seed)
    model = ZipVoiceDistill(**config["model"], vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id)
    tiny.perturb(model, seed)
    torch.save({"model": model.state_dict()}, folder / "model.pt")
    shutil.copy(FIXTURES / "luxtts" / "vocoder_config.yaml", folder / "vocoder" / "config.yaml")
    torch.manual_seed(seed + 1)
    vocos = Vocos.from_hparams(str(folder / "vocoder" / "config.yaml"))
    parametrize.remove_parametrizations(vocos.upsampler.upsample_layers[0], "weight")
    parametrize.remove_parametrizations(vocos.upsampler.upsample_layers[1], "weight")
    tiny.perturb(vocos, seed + 1)
    torch.save(vocos.state_dict(), folder / "vocoder" / "vocos.bin")
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def write_prompt(path: Path, seed: int):
    """A voice-like 24 kHz prompt: a gliding pulse train through three formant resonators."""
    rate = 24000
    n = int(PROMPT_SECONDS * rate)
    t = np.arange(n) / rate
    pitch = 120 + 20 * np.sin(2 * np.pi * 0.7 * t)
    phase = np.cumsum(pitch / rate)
    source = (np.diff(np.floor(phase), prepend=0) > 0).astype(np.float64)
    source += np.random.default_rng(seed).normal(0, 0.02, n)
    signal = np.zeros(n)
    for formant, width in [(700, 110), (1200, 120), (2600, 160)]:
        r = math.exp(-math.pi * width / rate)
        a1, a2 = -2 * r * math.cos(2 * math.pi * formant / rate), r * r
        y1 = y2 = 0.0
        out = np.empty(n)
        for i, x in enumerate(source):
            y = x - a1 * y1 - a2 * y2
            out[i], y2, y1 = y, y1, y
        signal += out
    syllables = 0.5 + 0.5 * np.abs(np.sin(2 * np.pi * 2.5 * t))
    signal *= syllables / np.max(np.abs(signal)) * 0.5
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(rate)
        f.writeframes((signal * 32767).astype("<i2").tobytes())


def run_reference(loaded, prompt_path: Path, text: str):
    model, feature_extractor, vocos, tokenizer = loaded
    prompt = tiny.lux.process_audio(
        str(prompt_path), lambda _wav: {"text": PROMPT_TEXT}, tokenizer, feature_extractor, "cpu",
        target_rms=tiny.PROMPT_TARGET_RMS, duration=tiny.PROMPT_DURATION)
    start = time.perf_counter()
    wav = tiny.lux.generate(*prompt, text, model, vocos, tokenizer, num_step=tiny.NUM_STEPS,
                            guidance_scale=tiny.GUIDANCE_SCALE, speed=tiny.SPEED, t_shift=tiny.T_SHIFT)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "first": seconds, "audio_s": wav.shape[-1] / 48000}


def run_cake(args, folder: Path, prompt: Path, text: str, out: Path):
    cmd = [args.cake, "tts", "--model", str(folder), "--voice", str(prompt), "--transcript", PROMPT_TEXT,
           "--text", text, "--out", str(out), "--seed", str(args.seed)]
    run = run_tts(cmd, dict(os.environ, RAYON_NUM_THREADS=str(args.threads)))
    return {"audio_s": run["audio_s"], "seconds": run["wrote"] - run["loaded"], "first": run["first_frame_s"]}


def main():
    args = parse_args()
    folder = Path(args.cache)
    started = time.perf_counter()
    build(folder, args.seed)
    torch.set_num_threads(args.threads)
    loaded = tiny.load_like_luxtts(folder)
    loaded[2].freq_range = tiny.FREQ_RANGE  # LuxTTS.__init__
    loaded[2].return_48k = True
    params = sum(p.numel() for p in loaded[0].parameters()) + sum(p.numel() for p in loaded[2].parameters())
    print(f"{params / 1e6:.1f} M parameters ready in {time.perf_counter() - started:.0f} s; "
          f"{args.threads} threads, median of {args.reps}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        prompt = Path(tmp) / "prompt.wav"
        write_prompt(prompt, args.seed)
        for name, text in TEXTS.items():
            ref, cake = [], []
            for rep in range(args.reps):
                r = run_reference(loaded, prompt, text)
                c = run_cake(args, folder, prompt, text, Path(tmp) / "out.wav")
                ref.append(r)
                cake.append(c)
                print(f"{name} rep {rep}: reference {r['seconds']:.2f} s for {r['audio_s']:.2f} s of audio, "
                      f"cake {c['seconds']:.2f} s for {c['audio_s']:.2f} s (first audio {c['first']:.2f} s)",
                      flush=True)
            rows.append((name, len(text), ref, cake))
    med = lambda xs, k: statistics.median(x[k] for x in xs)  # noqa: E731
    print()
    print("| text | side | audio s | generation s | real-time factor | first audio s |")
    print("|---|---|---|---|---|---|")
    for name, chars, ref, cake in rows:
        for side, runs in [("reference (PyTorch, f32)", ref), ("Cake", cake)]:
            audio = med(runs, "audio_s")
            print(f"| {name} ({chars} chars) | {side} | {audio:.2f} | {med(runs, 'seconds'):.2f} | "
                  f"{med(runs, 'seconds') / audio:.2f} | {med(runs, 'first'):.2f} |")
    for name, _, ref, cake in rows:
        speed = (med(ref, "seconds") / med(ref, "audio_s")) / (med(cake, "seconds") / med(cake, "audio_s"))
        print(f"{name}: Cake / reference speed (by real-time factor) {speed:.2f}x, "
              f"first audio {med(ref, 'first') / med(cake, 'first'):.2f}x")


if __name__ == "__main__":
    main()
