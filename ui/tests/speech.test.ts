// Tests for the Speech screen's pure helpers: voice kinds, script speakers
// (read like the backend), the form check before `speak` for prompt and
// preset models, progress texts, base64, PCM chunks, the WAV reader and the
// waveform bins.

import { describe, expect, it } from "vitest";
import { base64ToBytes, bytesToBase64 } from "../src/lib/base64";
import { pcm16Samples } from "../src/lib/pcm";
import {
  DEFAULT_SPEECH_SETTINGS,
  SPEECH_DEFAULTS,
  clipEndText,
  clipFileName,
  fileStem,
  formatAudioDuration,
  formatClock,
  modelVoiceKind,
  planSpeech,
  scriptExcerpt,
  scriptLines,
  scriptSpeakers,
  speakProgressFraction,
  speakProgressText,
  speakSettings,
  speakerCount,
  voiceKind,
  voiceLabel,
  voicesOfKind,
} from "../src/lib/speech";
import { parseWav } from "../src/lib/wav";
import { mergePeaks, peakLevel, waveformPeaks } from "../src/lib/waveform";
import { preset, voice } from "./fake-api";

describe("voice kinds", () => {
  it("reads a voice's and a model's kind; absent (an older backend) means prompts", () => {
    expect(voiceKind({ kind: "preset" })).toBe("preset");
    expect(voiceKind({ kind: "prompt" })).toBe("prompt");
    expect(voiceKind({})).toBe("prompt");
    expect(modelVoiceKind({ voice: "preset" })).toBe("preset");
    expect(modelVoiceKind({ voice: "transcribed_prompt" })).toBe("transcribed_prompt");
    expect(modelVoiceKind({ voice: null })).toBe("prompt");
    expect(modelVoiceKind({})).toBe("prompt");
  });

  it("keeps the voices of one kind, in order", () => {
    const voices = [voice("a"), preset("p"), voice("b", { kind: undefined })];
    expect(voicesOfKind(voices, "prompt").map((v) => v.id)).toEqual(["a", "b"]);
    expect(voicesOfKind(voices, "preset").map((v) => v.id)).toEqual(["p"]);
  });

  it("has each kind's default settings", () => {
    expect(SPEECH_DEFAULTS.prompt).toEqual({ cfgScale: 1.3, steps: 10 });
    expect(SPEECH_DEFAULTS.preset).toEqual({ cfgScale: 1.5, steps: 5 });
  });
});
import { buildWav } from "./wav-builder";

describe("script speakers", () => {
  it("counts distinct speakers of `Speaker N:` lines, any case and spacing", () => {
    const script = "Speaker 1: Hello there!\n\nnarration without a speaker\nspeaker 2 :  Hi.\nSPEAKER 1:again";
    expect(scriptSpeakers(script)).toEqual({ numbers: [1, 2], count: 2, plain: false });
    expect(speakerCount(script)).toBe(2);
  });

  it("reads lines like the backend: shifted down by one when nobody is speaker 0", () => {
    expect(scriptLines("Speaker 1: Hello there!\n\nnarration\nspeaker 2 :  Hi.\nSPEAKER 1:again")).toEqual([
      { speaker: 0, text: "Hello there!" },
      { speaker: 1, text: "Hi." },
      { speaker: 0, text: "again" },
    ]);
    expect(scriptLines("Speaker 0: a\nSpeaker 1: b").map((line) => line.speaker)).toEqual([0, 1]);
    expect(scriptLines("Speaker 2: a\nSpeaker 4: b").map((line) => line.speaker)).toEqual([1, 3]);
  });

  it("keeps the numbers as written, in order, for the voice slots", () => {
    expect(scriptSpeakers("Speaker 3: c\nSpeaker 1: a\nSpeaker 3: again").numbers).toEqual([1, 3]);
    expect(scriptSpeakers("Speaker 0: a\nSpeaker 1: b").numbers).toEqual([0, 1]);
    expect(scriptSpeakers("Speaker 01: a\nSpeaker 1: b").count).toBe(1);
  });

  it("accepts indentation and Windows line ends", () => {
    expect(speakerCount("   Speaker 1: a\r\n\tSpeaker 2: b\r\n")).toBe(2);
  });

  it("ignores lines that only look like speaker lines", () => {
    // As in the backend, "speaker" and the number are separated by whitespace.
    expect(scriptSpeakers("Speaker1: a\nSpeaker: b\nThe speaker 2: c\nSpeaker two: d").plain).toBe(true);
    expect(scriptLines("Speaker1: a\nSpeaker: b")).toEqual([]);
  });

  it("treats plain text as one speaker and an empty script as none", () => {
    expect(scriptSpeakers("Just read this aloud.")).toEqual({ numbers: [1], count: 1, plain: true });
    expect(scriptSpeakers("")).toEqual({ numbers: [], count: 0, plain: false });
    expect(scriptSpeakers("  \n\t\n")).toEqual({ numbers: [], count: 0, plain: false });
  });

  it("counts more than four speakers so the screen can refuse them", () => {
    expect(speakerCount("Speaker 1: a\nSpeaker 2: b\nSpeaker 3: c\nSpeaker 4: d\nSpeaker 5: e")).toBe(5);
  });
});

describe("planSpeech", () => {
  const voices = [voice("v1"), voice("v2"), preset("p1")];
  const base = {
    modelId: "vv",
    kind: "prompt" as const,
    script: "Speaker 1: Hi.\nSpeaker 2: Hello.",
    voiceIds: ["v1", "v2"],
    voices,
    settings: DEFAULT_SPEECH_SETTINGS,
  };

  it("builds the request, leaving the untyped settings to the model", () => {
    expect(planSpeech(base)).toEqual({
      request: { model_id: "vv", script: base.script, voice_ids: ["v1", "v2"] },
      problem: null,
    });
  });

  it("sends only the voices of the script's speakers", () => {
    const plan = planSpeech({ ...base, script: "One voice only.", voiceIds: ["v2", "v1"] });
    expect(plan.request?.voice_ids).toEqual(["v2"]);
  });

  it("passes a seed and a length limit when given", () => {
    const plan = planSpeech({ ...base, settings: { cfgScale: "2", steps: "20", seed: "42", maxSeconds: "12.5" } });
    expect(plan.request).toMatchObject({ cfg_scale: 2, steps: 20, seed: 42, max_seconds: 12.5 });
  });

  it("says what is missing", () => {
    expect(planSpeech({ ...base, modelId: null }).problem).toMatch(/speech model/);
    expect(planSpeech({ ...base, script: "  " }).problem).toMatch(/script/);
    expect(planSpeech({ ...base, voiceIds: ["v1"] }).problem).toBe("Choose a voice for Speaker 2.");
    expect(planSpeech({ ...base, voiceIds: ["v1", ""] }).problem).toBe("Choose a voice for Speaker 2.");
    // A chosen voice that was deleted since counts as none.
    expect(planSpeech({ ...base, voiceIds: ["gone", "v2"] }).problem).toBe("Choose a voice for Speaker 1.");
    const five = "Speaker 1: a\nSpeaker 2: b\nSpeaker 3: c\nSpeaker 4: d\nSpeaker 5: e";
    expect(planSpeech({ ...base, script: five }).problem).toMatch(/5 speakers; at most 4/);
    expect(planSpeech({ ...base, voiceIds: ["v1", "v2"] }).request).not.toBeNull();
    // A preset is no voice prompt.
    expect(planSpeech({ ...base, voiceIds: ["v1", "p1"] }).problem).toBe("Choose a voice for Speaker 2.");
    expect(planSpeech({ ...base, voices: [preset("p1")] }).problem).toMatch(/^Add a voice first: a WAV/);
  });

  describe("for a preset model", () => {
    const presetBase = { ...base, modelId: "rt", kind: "preset" as const, script: "Hi. Hello.", voiceIds: ["p1"] };

    it("speaks the text as it is in the one preset chosen", () => {
      expect(planSpeech(presetBase)).toEqual({
        request: { model_id: "rt", script: "Hi. Hello.", voice_ids: ["p1"] },
        problem: null,
      });
      // Speaker lines are no speakers here: still one preset.
      const lines = planSpeech({ ...presetBase, script: base.script, voiceIds: ["p1", "v2"] });
      expect(lines.request?.voice_ids).toEqual(["p1"]);
    });

    it("says what is missing", () => {
      expect(planSpeech({ ...presetBase, script: " " }).problem).toBe("Write the text to speak.");
      expect(planSpeech({ ...presetBase, voiceIds: [] }).problem).toBe("Choose a voice preset.");
      expect(planSpeech({ ...presetBase, voiceIds: ["v1"] }).problem).toBe("Choose a voice preset.");
      expect(planSpeech({ ...presetBase, voices: [voice("v1")] }).problem).toBe(
        "Add a voice preset first: VibeVoice-Realtime speaks in one.",
      );
    });
  });

  describe("for a LuxTTS model", () => {
    const said = voice("v3", { transcript: "Hello there." });
    const luxBase = {
      ...base,
      modelId: "lux",
      kind: "transcribed_prompt" as const,
      script: "Speaker 1: Hi. Speaker 2: no speakers here.",
      voiceIds: ["v3"],
      voices: [...voices, said],
    };

    it("speaks the text as it is in the one transcribed prompt chosen", () => {
      expect(planSpeech(luxBase)).toEqual({
        request: { model_id: "lux", script: luxBase.script, voice_ids: ["v3"] },
        problem: null,
      });
    });

    it("says what is missing, naming a voice without its words", () => {
      expect(planSpeech({ ...luxBase, script: "" }).problem).toBe("Write the text to speak.");
      expect(planSpeech({ ...luxBase, voiceIds: [] }).problem).toBe("Choose a voice.");
      expect(planSpeech({ ...luxBase, voiceIds: ["p1"] }).problem).toBe("Choose a voice.");
      expect(planSpeech({ ...luxBase, voiceIds: ["v1"] }).problem).toBe(
        "Add what “v1” says: LuxTTS reads the voice's transcript beside its audio.",
      );
      expect(planSpeech({ ...luxBase, voices: [preset("p1")] }).problem).toMatch(/^Add a voice first: a WAV/);
    });
  });

  it("checks the settings", () => {
    const withSettings = (change: Partial<typeof DEFAULT_SPEECH_SETTINGS>) =>
      speakSettings({ ...DEFAULT_SPEECH_SETTINGS, ...change });
    expect(withSettings({ cfgScale: "0" }).problem).toMatch(/CFG/);
    expect(withSettings({ cfgScale: "abc" }).problem).toMatch(/CFG/);
    expect(withSettings({ steps: "2.5" }).problem).toMatch(/Steps/);
    expect(withSettings({ steps: "0" }).problem).toMatch(/Steps/);
    expect(withSettings({ seed: "-1" }).problem).toMatch(/seed/);
    expect(withSettings({ seed: "1.5" }).problem).toMatch(/seed/);
    expect(withSettings({ maxSeconds: "0" }).problem).toMatch(/Max seconds/);
    // Empty fields mean the model's defaults (and a random seed, no limit): nothing is sent.
    expect(withSettings({ cfgScale: "", steps: " ", seed: "", maxSeconds: "" })).toEqual({
      settings: {},
      problem: null,
    });
    expect(withSettings({ cfgScale: "1.3", steps: "10" }).settings).toEqual({ cfg_scale: 1.3, steps: 10 });
    expect(withSettings({ seed: "0" }).settings.seed).toBe(0);
  });
});

describe("speak progress", () => {
  const progress = { frames: 37, seconds: 4.93, piece: 1, pieces: 1 };

  it("says the audio made, and the piece of a long script", () => {
    expect(speakProgressText({ ...progress, frames: 0, seconds: 0 })).toBe("Starting…");
    expect(speakProgressText({ ...progress, frames: 1, seconds: 0.13 })).toBe("1 frame · 0.13 s of audio");
    expect(speakProgressText(progress)).toBe("37 frames · 4.93 s of audio");
    expect(speakProgressText({ ...progress, piece: 2, pieces: 5 })).toBe("Piece 2 of 5 · 37 frames · 4.93 s of audio");
  });

  it("fills the bar by the length limit, else by the pieces done, else not at all", () => {
    expect(speakProgressFraction({ ...progress, seconds: 5 }, 20)).toBe(0.25);
    expect(speakProgressFraction({ ...progress, seconds: 5, piece: 2, pieces: 5 }, 20)).toBe(0.25);
    expect(speakProgressFraction({ ...progress, piece: 2, pieces: 5 }, null)).toBe(0.2);
    expect(speakProgressFraction({ ...progress, piece: 1, pieces: 5 }, null)).toBe(0);
    expect(speakProgressFraction(progress, null)).toBeNull();
  });

  it("counts the sampling steps of a piece made all at once (LuxTTS)", () => {
    const lux = { frames: 0, seconds: 0, piece: 1, pieces: 3, step: 2, steps: 4 };
    expect(speakProgressText(lux)).toBe("Piece 1 of 3 · step 2 of 4");
    expect(speakProgressText({ ...lux, pieces: 1 })).toBe("Step 2 of 4");
    expect(speakProgressText({ ...lux, piece: 2, step: 1, frames: 20, seconds: 1.7 })).toBe(
      "Piece 2 of 3 · step 1 of 4 · 20 frames · 1.70 s of audio",
    );
    // The last step done: the piece's audio follows.
    expect(speakProgressText({ ...lux, step: 4, frames: 20, seconds: 1.7 })).toBe(
      "Piece 1 of 3 · 20 frames · 1.70 s of audio",
    );
    expect(speakProgressFraction(lux, null)).toBeCloseTo(0.5 / 3);
    expect(speakProgressFraction({ ...lux, piece: 3, step: 4 }, null)).toBe(1);
    expect(speakProgressFraction({ ...lux, pieces: 1 }, null)).toBe(0.5);
  });
});

describe("speech texts", () => {
  it("names voices after their file", () => {
    expect(fileStem("/home/me/voices/Alice.wav")).toBe("Alice");
    expect(fileStem("C:\\Users\\me\\Bob Smith.WAV")).toBe("Bob Smith");
    expect(fileStem("carol.take2.wav")).toBe("carol.take2");
    expect(fileStem("dave")).toBe("dave");
    expect(fileStem(".hidden")).toBe(".hidden");
    expect(fileStem("/folder/")).toBe("voice");
  });

  it("names saved clips after their time", () => {
    expect(clipFileName({ id: "abc", created_at: "2024-05-01T12:30:05.123Z" })).toBe(
      "cake-speech-2024-05-01_12-30-05.wav",
    );
    expect(clipFileName({ id: "abc/../x", created_at: "yesterday" })).toBe("cake-speech-abcx.wav");
  });

  it("shortens scripts and writes lengths", () => {
    expect(scriptExcerpt("Speaker 1: Hi.\n\nSpeaker 2:   Hello.")).toBe("Speaker 1: Hi. Speaker 2: Hello.");
    const long = scriptExcerpt("word ".repeat(50), 20);
    expect(long).toHaveLength(20);
    expect(long.endsWith("…")).toBe(true);
    expect(formatAudioDuration(0.5)).toBe("0.5 s");
    expect(formatAudioDuration(4.2)).toBe("0:04");
    expect(formatAudioDuration(75.6)).toBe("1:16");
    expect(formatAudioDuration(Number.NaN)).toBe("—");
    expect(formatAudioDuration(null)).toBe("—");
    expect(clipEndText("length")).toMatch(/length/);
  });

  it("counts a playing clock in whole seconds", () => {
    expect(formatClock(0)).toBe("0:00");
    expect(formatClock(2.9)).toBe("0:02");
    expect(formatClock(75.2)).toBe("1:15");
    expect(formatClock(Number.NaN)).toBe("0:00");
  });

  it("labels a voice prompt with its length and a preset with its name", () => {
    expect(voiceLabel(voice("v1", { name: "Alice", duration_s: 4.2 }))).toBe("Alice (0:04)");
    expect(voiceLabel(preset("p1", { name: "Carter" }))).toBe("Carter");
  });
});

describe("base64", () => {
  it("encodes like the standard", () => {
    const text = (s: string) => new TextEncoder().encode(s);
    expect(bytesToBase64(text("Man"))).toBe("TWFu");
    expect(bytesToBase64(text("Ma"))).toBe("TWE=");
    expect(bytesToBase64(text("M"))).toBe("TQ==");
    expect(bytesToBase64(new Uint8Array())).toBe("");
  });

  it("round-trips every byte value and large buffers", () => {
    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    expect(base64ToBytes(bytesToBase64(all))).toEqual(all);
    const big = Uint8Array.from({ length: 70_001 }, (_, i) => (i * 7919) & 255);
    const encoded = bytesToBase64(big);
    expect(encoded).toBe(Buffer.from(big).toString("base64"));
    expect(base64ToBytes(encoded)).toEqual(big);
  });

  it("decodes with whitespace and refuses garbage", () => {
    expect(Array.from(base64ToBytes("TW\nFu"))).toEqual([77, 97, 110]);
    expect(() => base64ToBytes("not base64!")).toThrow(/base64/);
  });
});

describe("pcm16Samples", () => {
  const base64 = (bytes: number[]) => bytesToBase64(new Uint8Array(bytes));

  it("reads little-endian signed 16-bit samples as exact floats", () => {
    // 0, 32767, −32768, 16384, −1
    const samples = pcm16Samples(base64([0x00, 0x00, 0xff, 0x7f, 0x00, 0x80, 0x00, 0x40, 0xff, 0xff]));
    expect(samples).toBeInstanceOf(Float32Array);
    expect(Array.from(samples)).toEqual([0, 32767 / 32768, -1, 0.5, -1 / 32768]);
  });

  it("reads an empty chunk as no samples", () => {
    expect(pcm16Samples("")).toHaveLength(0);
  });

  it("rejects a chunk that is not whole samples, or not base64", () => {
    expect(() => pcm16Samples(base64([0x00, 0x40, 0x01]))).toThrow(
      "Cake sent 3 bytes of 16-bit audio: not a whole number of samples.",
    );
    expect(() => pcm16Samples("not base64!")).toThrow(/base64/);
  });
});

describe("parseWav", () => {
  it("reads 16-bit PCM mono", () => {
    const wav = parseWav(buildWav([0, 0.5, -0.5, 1, -1], { sampleRate: 24000 }));
    expect(wav.sampleRate).toBe(24000);
    expect(wav.channels).toBe(1);
    expect(Array.from(wav.samples).map((x) => Math.round(x * 1000) / 1000)).toEqual([0, 0.5, -0.5, 1, -1]);
    expect(wav.durationS).toBeCloseTo(5 / 24000);
  });

  it("mixes several channels down to one", () => {
    const wav = parseWav(buildWav([0.5, -0.5, 0.25, 0.75], { channels: 2 }));
    expect(wav.channels).toBe(2);
    expect(Array.from(wav.samples).map((x) => Math.round(x * 100) / 100)).toEqual([0, 0.5]);
  });

  it("walks unknown chunks, odd sizes and any chunk order", () => {
    const odd = { id: "LIST", bytes: new Uint8Array([1, 2, 3]) };
    expect(parseWav(buildWav([0.5, 0.5], { extraChunks: [odd] })).samples).toHaveLength(2);
    expect(parseWav(buildWav([0.5, 0.5, 0.5], { dataFirst: true })).samples).toHaveLength(3);
  });

  it("accepts PCM in the extensible format", () => {
    expect(parseWav(buildWav([0.25], { format: 0xfffe, subFormat: 1 })).samples).toHaveLength(1);
  });

  it("reads what is there of a cut file", () => {
    const full = buildWav([0.1, 0.2, 0.3, 0.4], { declaredDataSize: 1000 });
    expect(parseWav(full).samples).toHaveLength(4);
    // Half a sample at the end is dropped.
    expect(parseWav(full.subarray(0, full.length - 1)).samples).toHaveLength(3);
  });

  it("reads a WAV inside a larger buffer", () => {
    const wav = buildWav([0.5, -0.5]);
    const padded = new Uint8Array(wav.length + 10);
    padded.set(wav, 5);
    expect(parseWav(padded.subarray(5, 5 + wav.length)).samples).toHaveLength(2);
  });

  it("rejects anything but 16-bit PCM, saying why", () => {
    expect(() => parseWav(buildWav([0.5], { format: 3, bitsPerSample: 32 }))).toThrow(/16-bit PCM/);
    expect(() => parseWav(buildWav([0.5], { bitsPerSample: 8 }))).toThrow(/8-bit/);
    expect(() => parseWav(buildWav([0.5], { format: 0xfffe, subFormat: 3 }))).toThrow(/format 3/);
    expect(() => parseWav(new TextEncoder().encode("ID3 this is an mp3"))).toThrow(/Not a WAV/);
    expect(() => parseWav(new Uint8Array())).toThrow(/Not a WAV/);
  });

  it("rejects files without fmt or data", () => {
    const wav = buildWav([0.5]);
    // Keep only the RIFF header and the fmt chunk (12 + 8 + 16 bytes).
    expect(() => parseWav(wav.subarray(0, 36))).toThrow(/no data chunk/);
    const noFmt = buildWav([0.5]);
    noFmt.set(new TextEncoder().encode("junk"), 12); // rename "fmt " to an unknown chunk
    expect(() => parseWav(noFmt)).toThrow(/no fmt chunk/);
  });
});

describe("waveform peaks", () => {
  it("keeps the lowest and highest sample of each bin", () => {
    expect(waveformPeaks([0, 1, -1, 0.5, 0.25, -0.25], 2)).toEqual([
      { min: -1, max: 1 },
      { min: -0.25, max: 0.5 },
    ]);
  });

  it("spreads an odd length over the bins without losing samples", () => {
    const samples = [5, 1, 4, 2, 3];
    const peaks = waveformPeaks(samples, 2);
    expect(peaks).toEqual([
      { min: 1, max: 5 },
      { min: 2, max: 4 },
    ]);
    const seven = waveformPeaks([1, 2, 3, 4, 5, 6, 7], 3);
    expect(seven).toHaveLength(3);
    expect(seven[0].min).toBe(1);
    expect(seven[2].max).toBe(7);
  });

  it("gives one bin per sample when there are fewer samples than bins", () => {
    expect(waveformPeaks([0.5, -0.5], 10)).toEqual([
      { min: 0.5, max: 0.5 },
      { min: -0.5, max: -0.5 },
    ]);
  });

  it("gives no bins for no samples or no bins", () => {
    expect(waveformPeaks([], 100)).toEqual([]);
    expect(waveformPeaks(new Float32Array(0), 100)).toEqual([]);
    expect(waveformPeaks([1, 2, 3], 0)).toEqual([]);
  });

  it("works on Float32Array samples", () => {
    expect(waveformPeaks(Float32Array.from([0.5, -0.25, 0.25]), 1)).toEqual([{ min: -0.25, max: 0.5 }]);
  });

  it("merges peaks for narrow canvases and finds the level", () => {
    const peaks = waveformPeaks([0.1, -0.2, 0.3, -0.4, 0.5, -0.6], 6);
    expect(mergePeaks(peaks, 3)).toEqual([
      { min: -0.2, max: 0.1 },
      { min: -0.4, max: 0.3 },
      { min: -0.6, max: 0.5 },
    ]);
    expect(mergePeaks(peaks, 10)).toEqual(peaks);
    expect(peakLevel(peaks)).toBeCloseTo(0.6);
    expect(peakLevel([])).toBe(0);
  });
});
