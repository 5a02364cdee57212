#!/usr/bin/env python3
"""VibeVoice-Realtime-0.5B: Microsoft's streaming code against `cake tts`, one run.

Builds the released model's shape (Qwen2.5-0.5B split 4 + 20 layers, the
1.5B model's acoustic decoder, a 4-layer diffusion head of width 896) with
random weights using the reference code (github.com/microsoft/VibeVoice at
e73d1e17, as tests/fixtures/generate_tiny_vibevoice_realtime.py runs it),
with the tiny fixture's tokenizer (a small vocabulary: the embedding is
looked up, never multiplied, so its size does not change the speed), the
end-of-speech classifier held off so that both sides make exactly
`--frames` frames, and a preset made by running the model on a short
prompt. Then, repetitions alternating, times the reference's `generate()`
(float32, torch threads = `--threads`) and `cake tts` (RAYON_NUM_THREADS =
`--threads`) speaking the same text in the same voice, and reports the
real-time factor (generation time / audio time) and the time to the first
frame's audio. Cake's first audio is its "playing from" line under
`--play` into ALSA's null device, in a run of its own: the null device
takes samples as fast as they come, so the playback thread spins on a
core that a real device would leave free, and generation time comes from
a run without `--play`. The reference's first audio is the end of its
first acoustic-decoder call. Model load is not counted.

    PYTHONPATH=/tmp/VibeVoice .venv-vibevoice/bin/python bench/speech_realtime.py --cake target/release/cake
"""

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "fixtures"))
from tts_run import run_tts  # noqa: E402  (bench/, the script's own folder)
import generate_tiny_vibevoice_realtime as tiny  # noqa: E402  (sets one torch thread: reset below)
from vibevoice_fixture_common import head_config, reinit_weights, tokenizer_config  # noqa: E402
from vibevoice.modular.configuration_vibevoice_streaming import VibeVoiceStreamingConfig  # noqa: E402
from vibevoice.modular.modeling_vibevoice_streaming_inference import (  # noqa: E402
    VibeVoiceStreamingForConditionalGenerationInference,
)
from vibevoice.modular.modular_vibevoice_text_tokenizer import VibeVoiceTextTokenizerFast  # noqa: E402
from vibevoice.processor.vibevoice_streaming_processor import VibeVoiceStreamingProcessor  # noqa: E402
from vibevoice.processor.vibevoice_tokenizer_processor import VibeVoiceTokenizerProcessor  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

HOP, SAMPLE_RATE = 3200, 24000
TEXT = "Hi."


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cake", default="target/release/cake")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--frames", type=int, default=24, help="frames each side makes (7.5 per second of audio)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def build(args, folder: Path):
    """The released shape, random weights, saved with the fixture's tokenizer and a preset."""
    fixture = HERE.parent / "tests" / "fixtures" / "tiny" / "vibevoice_realtime"
    for name in ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
                 "added_tokens.json"]:
        (folder / name).write_bytes((fixture / name).read_bytes())
    tokenizer = VibeVoiceTextTokenizerFast.from_pretrained(str(folder))
    decoder = dict(
        model_type="qwen2", vocab_size=(len(tokenizer) + 63) // 64 * 64, hidden_size=896, intermediate_size=4864,
        num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, hidden_act="silu",
        max_position_embeddings=8192, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False,
        use_sliding_window=False, sliding_window=None, max_window_layers=24, attention_dropout=0.0,
        torch_dtype="float32",
    )
    config = VibeVoiceStreamingConfig(
        acoustic_tokenizer_config=tokenizer_config(64, True, 32, "3-3-3-3-3-3-8", [8, 5, 5, 4, 2, 2]),
        decoder_config=decoder,
        diffusion_head_config=head_config(896, 4, 64),
        tts_backbone_num_hidden_layers=20,
        torch_dtype="float32",
    )
    config.architectures = ["VibeVoiceStreamingForConditionalGenerationInference"]
    model = VibeVoiceStreamingForConditionalGenerationInference(config).eval()
    reinit_weights(model, args.seed)
    with torch.no_grad():
        model.model.speech_scaling_factor.fill_(1.7)
        model.model.speech_bias_factor.fill_(-0.1)
        model.tts_eos_classifier.fc2.bias.fill_(-100.0)  # never ends: both sides make --frames frames
    model.set_ddpm_inference_steps(num_steps=5)
    model.save_pretrained(str(folder), safe_serialization=True)
    preset = tiny.make_preset(model, tokenizer, args.seed)
    save_file(tiny.preset_tensors(preset), str(folder / "voice.safetensors"))
    processor = VibeVoiceStreamingProcessor(tokenizer=tokenizer, audio_processor=VibeVoiceTokenizerProcessor())
    return model, processor, preset


def run_reference(model, processor, preset, args):
    inputs = processor.process_input_with_cached_prompt(
        text=TEXT, cached_prompt=preset, padding=True, return_tensors="pt", return_attention_mask=True
    )
    text_tokens = inputs["tts_text_ids"].shape[1]
    first = []
    decode = model.model.acoustic_tokenizer.decode

    def timed_decode(*a, **k):
        out = decode(*a, **k)
        if not first:
            first.append(time.perf_counter())
        return out

    model.model.acoustic_tokenizer.decode = timed_decode
    try:
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                **inputs, max_new_tokens=text_tokens + args.frames - 1, cfg_scale=1.5, tokenizer=processor.tokenizer,
                generation_config={"do_sample": False}, all_prefilled_outputs=copy.deepcopy(preset),
                show_progress_bar=False,
            )
        seconds = time.perf_counter() - start
    finally:
        model.model.acoustic_tokenizer.decode = decode
    samples = out.speech_outputs[0].numel()
    return {"seconds": seconds, "first": first[0] - start, "audio_s": samples / SAMPLE_RATE, "frames": samples // HOP}


def run_cake(args, folder: Path, frames: int, alsa: Path, out: Path):
    """Generation time from a run without playback, first audio from one with it."""
    timed = run_cake_once(args, folder, frames, alsa, out, play=False)
    played = run_cake_once(args, folder, frames, alsa, out, play=True)
    return dict(timed, first=played["first"])


def run_cake_once(args, folder: Path, frames: int, alsa: Path, out: Path, play: bool):
    max_seconds = (frames - 0.5) * HOP / SAMPLE_RATE
    cmd = [args.cake, "tts", "--model", str(folder), "--voice", str(folder / "voice.safetensors"), "--text", TEXT,
           "--out", str(out), "--seed", str(args.seed), "--max-seconds", f"{max_seconds:.6f}"]
    if play:
        cmd.append("--play")
    run = run_tts(cmd, dict(os.environ, RAYON_NUM_THREADS=str(args.threads), ALSA_CONFIG_PATH=str(alsa)))
    return {"audio_s": run["audio_s"], "frames": run["frames"], "seconds": run["wrote"] - run["loaded"],
            "first": run["playing_s"]}


def main():
    args = parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "realtime"
        folder.mkdir()
        alsa = Path(tmp) / "asound.conf"
        alsa.write_text("</usr/share/alsa/alsa.conf>\npcm.!default { type null }\n")
        torch.set_num_threads(args.threads)
        started = time.perf_counter()
        model, processor, preset = build(args, folder)
        params = sum(p.numel() for p in model.parameters())
        print(f"built {params / 1e9:.2f} B parameters in {time.perf_counter() - started:.0f} s; "
              f"{args.frames} frames, {args.threads} threads, median of {args.reps}", flush=True)
        ref, cake = [], []
        for rep in range(args.reps):
            r = run_reference(model, processor, preset, args)
            c = run_cake(args, folder, r["frames"], alsa, Path(tmp) / "out.wav")
            assert c["frames"] == r["frames"], (c, r)
            ref.append(r)
            cake.append(c)
            print(f"rep {rep}: reference {r['seconds']:.2f} s (first audio {r['first']:.2f} s), "
                  f"cake {c['seconds']:.2f} s (first audio {c['first']:.2f} s), {r['audio_s']:.2f} s of audio",
                  flush=True)
        med = lambda xs, k: statistics.median(x[k] for x in xs)  # noqa: E731
        audio = ref[0]["audio_s"]
        print()
        print("| side | generation s | real-time factor | first audio s |")
        print("|---|---|---|---|")
        for name, runs in [("reference (PyTorch, f32)", ref), ("Cake", cake)]:
            print(f"| {name} | {med(runs, 'seconds'):.2f} | {med(runs, 'seconds') / audio:.2f} | {med(runs, 'first'):.2f} |")
        print(f"\nCake / reference speed: {med(ref, 'seconds') / med(cake, 'seconds'):.2f}x "
              f"(first audio {med(ref, 'first') / med(cake, 'first'):.2f}x)")


if __name__ == "__main__":
    main()
