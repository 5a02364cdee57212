// Tests for the speech actions against a fake Api and a fake live player:
// voices (list, add prompts and presets from an upload or a path, refusals,
// notices, delete), speaking (progress, pieces, the new clip, audio heard as
// it is made, stop, failures), what prompt and preset models need, clips,
// audio and waveforms, and which models the chat and the Speech screen offer.

import { describe, expect, it, vi } from "vitest";
import { createCake } from "../src/state";
import {
  completeModels,
  effectiveModelId,
  selectedConversation,
  speechModelId,
  speechVoiceKind,
  type SpeakState,
} from "../src/state/app-state";
import { bytesToBase64 } from "../src/lib/base64";
import { speakableText } from "../src/lib/speech";
import {
  PRESET_BYTES,
  audioEvent,
  clip,
  createFakeApi,
  fakeLiveSpeech,
  memoryStorage,
  model,
  preset,
  speakUntilStopped,
  voice,
} from "./fake-api";
import { buildWav } from "./wav-builder";

const TWO_SPEAKERS = "Speaker 1: Welcome back.\nSpeaker 2: Thanks for having me.";

/** A VibeVoice-1.5B folder as an older backend lists it (no `voice`: prompts). */
const PROMPT_MODEL = model("vv", { kind: "speech", architecture: "vibevoice" });
const PRESET_MODEL = model("rt", { kind: "speech", architecture: "vibevoice_streaming", voice: "preset" });

async function started(setup: Parameters<typeof createFakeApi>[0] = {}) {
  const { api, server } = createFakeApi({
    models: [model("m1"), PROMPT_MODEL],
    voices: [voice("v2", { name: "Bob" }), voice("v1", { name: "Alice" })],
    clips: [clip("c-old")],
    ...setup,
  });
  const { live, calls: liveCalls, played } = fakeLiveSpeech();
  const cake = createCake(api, memoryStorage(), live);
  await cake.start();
  await cake.speech.refresh();
  return { cake, api, server, liveCalls, played, state: () => cake.store.get() };
}

describe("voices", () => {
  it("lists the stored voices and clips", async () => {
    const { state } = await started();
    expect(state().voicesReady).toBe(true);
    expect(state().voices.map((v) => v.name)).toEqual(["Bob", "Alice"]);
    expect(state().clipsReady).toBe(true);
    expect(state().clips.map((c) => c.id)).toEqual(["c-old"]);
  });

  it("keeps a voice added while an older list was on its way", async () => {
    const { cake, api, server, state } = await started();
    // The list is asked for, and answers only after the upload landed.
    let answer: () => void = () => {};
    const listed = structuredClone(server.voices);
    vi.mocked(api.listVoices).mockImplementationOnce(
      () => new Promise((resolve) => (answer = () => resolve({ voices: listed }))),
    );
    const refreshing = cake.speech.refresh();
    await cake.speech.addVoiceUpload("Carol.wav", buildWav([0, 0.5, -0.5]));
    answer();
    await refreshing;
    expect(state().voices.map((v) => v.name)).toEqual(["Carol", "Bob", "Alice"]);
  });

  it("adds an uploaded WAV named after its file", async () => {
    const { cake, api, state } = await started();
    const bytes = buildWav([0, 0.5, -0.5]);
    const added = await cake.speech.addVoiceUpload("Carol.wav", bytes);

    expect(api.addVoice).toHaveBeenCalledWith({
      name: "Carol",
      file_base64: bytesToBase64(bytes),
      file_name: "Carol.wav",
    });
    expect(added?.name).toBe("Carol");
    expect(added?.kind).toBe("prompt");
    expect(state().voices.map((v) => v.name)).toEqual(["Carol", "Bob", "Alice"]);
    expect(state().addingVoices).toBe(0);
    expect(state().notices).toEqual([]);
  });

  it("adds an uploaded voice preset as a preset", async () => {
    const { cake, api, state } = await started();
    const added = await cake.speech.addVoiceUpload("en-Carter_man.pt", PRESET_BYTES);

    expect(api.addVoice).toHaveBeenCalledWith({
      name: "en-Carter_man",
      file_base64: bytesToBase64(PRESET_BYTES),
      file_name: "en-Carter_man.pt",
    });
    expect(added).toMatchObject({ name: "en-Carter_man", kind: "preset", duration_s: null, sample_rate: null });
    expect(state().voices.map((v) => v.kind)).toEqual(["preset", "prompt", "prompt"]);
    expect(state().notices).toEqual([]);
  });

  it("adds files of the serving machine by path", async () => {
    const { cake, api, state } = await started({ voices: [] });
    await cake.speech.addVoicePaths(["/rec/dave.wav", "C:\\rec\\Eve.wav"]);
    expect(api.addVoice).toHaveBeenNthCalledWith(1, { name: "dave", path: "/rec/dave.wav" });
    expect(api.addVoice).toHaveBeenNthCalledWith(2, { name: "Eve", path: "C:\\rec\\Eve.wav" });
    expect(state().voices.map((v) => v.name)).toEqual(["Eve", "dave"]);
  });

  it("shows the backend's refusal and adds nothing", async () => {
    const { cake, state } = await started();
    const before = state().voices;
    expect(await cake.speech.addVoiceUpload("notes.txt", new TextEncoder().encode("hello"))).toBeNull();
    expect(await cake.speech.addVoice({ name: "song", path: "/music/song.mp3" })).toBeNull();

    expect(state().voices).toEqual(before);
    expect(state().notices.map((n) => n.message)).toEqual([
      "notes.txt: neither a WAV file nor a voice preset",
      "/music/song.mp3: neither a WAV file nor a voice preset",
    ]);
    expect(state().notices.every((n) => (n.tone ?? "error") === "error")).toBe(true);
    expect(state().addingVoices).toBe(0);
  });

  it("shows a voice's notice (a prompt cut at 60 s) without an error", async () => {
    const { cake, server, state } = await started();
    server.nextVoiceNotice = "long.wav was 95 s long: only the first 60 s are kept";
    const added = await cake.speech.addVoice({ name: "long", path: "/rec/long.wav" });
    expect(added?.notice).toMatch(/60 s/);
    expect(state().voices[0].name).toBe("long");
    expect(state().notices).toEqual([
      expect.objectContaining({ message: "long.wav was 95 s long: only the first 60 s are kept", tone: "info" }),
    ]);
  });

  it("counts the adds in progress", async () => {
    const { cake, api, state } = await started();
    let release = () => {};
    vi.mocked(api.addVoice).mockImplementationOnce(
      () => new Promise((resolve) => (release = () => resolve(voice("slow")))),
    );
    const adding = cake.speech.addVoice({ name: "slow", path: "/rec/slow.wav" });
    expect(state().addingVoices).toBe(1);
    release();
    await adding;
    expect(state().addingVoices).toBe(0);
  });

  it("deletes a voice and clears the speaker slots that used it", async () => {
    const { cake, server, state } = await started();
    cake.speech.edit({ script: TWO_SPEAKERS });
    cake.speech.chooseVoice(0, "v1");
    cake.speech.chooseVoice(1, "v2");
    await cake.speech.deleteVoice("v1");
    expect(state().voices.map((v) => v.id)).toEqual(["v2"]);
    expect(server.voices.map((v) => v.id)).toEqual(["v2"]);
    expect(state().speechForm.voiceIds).toEqual(["", "v2"]);
    expect(cake.speech.problem()).toBe("Choose a voice for Speaker 1.");
  });

  it("keeps a voice the backend would not delete", async () => {
    const { cake, state } = await started();
    await cake.speech.deleteVoice("nope");
    expect(state().voices).toHaveLength(2);
    expect(state().notices.map((n) => n.message)).toEqual(["no voice nope"]);
  });
});

describe("speak", () => {
  async function ready(setup: Parameters<typeof createFakeApi>[0] = {}) {
    const setupDone = await started(setup);
    setupDone.cake.speech.edit({ script: TWO_SPEAKERS });
    setupDone.cake.speech.chooseVoice(0, "v1");
    setupDone.cake.speech.chooseVoice(1, "v2");
    return setupDone;
  }

  it("streams progress, then the clip joins the list as the latest", async () => {
    const { cake, api, server, state } = await ready();
    const seen: SpeakState[] = [];
    cake.store.subscribe(() => {
      const speaking = state().speaking;
      if (speaking && seen[seen.length - 1] !== speaking) seen.push(speaking);
    });
    expect(cake.speech.problem()).toBeNull();

    const made = await cake.speech.speak();

    expect(made?.id).toBe("c-new");
    const one = { piece: 1, pieces: 1 }; // an older backend: no pieces
    expect(seen[0]).toEqual({ loading: null, frames: 0, seconds: 0, ...one });
    expect(seen).toContainEqual({
      loading: { fraction: 0.5, message: "Reading weights" },
      frames: 0,
      seconds: 0,
      ...one,
    });
    expect(seen).toContainEqual({ loading: null, frames: 8, seconds: 1.07, ...one });
    expect(seen[seen.length - 1]).toEqual({ loading: null, frames: 15, seconds: 2, ...one });
    expect(state().speaking).toBeNull();
    expect(state().clips.map((c) => c.id)).toEqual(["c-new", "c-old"]);
    expect(state().latestClipId).toBe("c-new");
    expect(state().loadedModelId).toBe("vv");

    // CFG scale and steps not typed: left to the model's defaults.
    const request = vi.mocked(api.speak).mock.calls[0][0];
    expect(request).toEqual({ model_id: "vv", script: TWO_SPEAKERS, voice_ids: ["v1", "v2"] });
    // The clip is kept by the backend: a fresh list (as after a restart) has it too.
    expect(server.clips.map((c) => c.id)).toEqual(["c-new", "c-old"]);
    await cake.speech.refreshClips();
    expect(state().clips.map((c) => c.id)).toEqual(["c-new", "c-old"]);
  });

  it("sends the settings typed", async () => {
    const { cake, api } = await ready();
    cake.speech.edit({ cfgScale: "2", steps: "25", seed: "1234", maxSeconds: "30" });
    await cake.speech.speak();
    expect(vi.mocked(api.speak).mock.calls[0][0]).toMatchObject({
      cfg_scale: 2,
      steps: 25,
      seed: 1234,
      max_seconds: 30,
    });
  });

  it("shows which piece of a long script is spoken", async () => {
    const { cake, server, state } = await ready();
    const seen: SpeakState[] = [];
    cake.store.subscribe(() => {
      const speaking = state().speaking;
      if (speaking && seen[seen.length - 1] !== speaking) seen.push(speaking);
    });
    server.speakScript = async (request, onProgress) => {
      onProgress({ type: "progress", frames: 20, seconds: 2.67, piece: 1, pieces: 3 });
      onProgress({ type: "progress", frames: 37, seconds: 4.93, piece: 2, pieces: 3 });
      return clip("c-long", { script: request.script });
    };
    await cake.speech.speak();
    expect(seen.slice(1)).toEqual([
      { loading: null, frames: 20, seconds: 2.67, piece: 1, pieces: 3 },
      { loading: null, frames: 37, seconds: 4.93, piece: 2, pieces: 3 },
    ]);
  });

  it("hands the audio to the live player as it arrives, and lets it play out when done", async () => {
    const { cake, liveCalls, played } = await ready();
    await cake.speech.speak();
    expect(liveCalls).toEqual(["begin", "play", "play", "finish"]);
    expect(played).toEqual([
      { samples: [0.5, -0.5], sampleRate: 24000 },
      { samples: [0.25], sampleRate: 24000 },
    ]);
  });

  it("ends live playback at a chunk it cannot read, and still makes the clip", async () => {
    const { cake, server, liveCalls, played, state } = await ready();
    server.speakScript = async (request, onProgress) => {
      onProgress(audioEvent([0.5]));
      onProgress({ type: "audio", pcm16_base64: bytesToBase64(new Uint8Array([1, 2, 3])), sample_rate: 24000 });
      onProgress(audioEvent([0.25]));
      return clip("c-new", { script: request.script });
    };
    expect((await cake.speech.speak())?.id).toBe("c-new");
    expect(liveCalls).toEqual(["begin", "play", "stop", "finish"]);
    expect(played).toHaveLength(1);
    expect(state().notices.map((n) => n.message)).toEqual([
      "Cannot play the speech while it is made: Cake sent 3 bytes of 16-bit audio: not a whole number of samples.",
    ]);
  });

  it("stops: no clip, no error, silent at once, ready again", async () => {
    const { cake, server, liveCalls, state } = await ready();
    server.speakScript = speakUntilStopped;
    const speaking = cake.speech.speak();
    await vi.waitFor(() => expect(state().speaking?.frames).toBe(4));
    expect(await cake.speech.speak()).toBeNull(); // one at a time

    cake.speech.stop();
    expect(liveCalls).toEqual(["begin", "play", "stop"]);
    expect(await speaking).toBeNull();
    expect(state().speaking).toBeNull();
    expect(state().clips.map((c) => c.id)).toEqual(["c-old"]);
    expect(state().latestClipId).toBeNull();
    expect(state().notices).toEqual([]);
    expect(cake.speech.problem()).toBeNull();
  });

  it("reports a failure", async () => {
    const { cake, server, state } = await ready();
    server.speakScript = async (_request, onProgress) => {
      onProgress({ type: "progress", frames: 2, seconds: 0.27 });
      throw new Error("the speech model ran out of memory");
    };
    expect(await cake.speech.speak()).toBeNull();
    expect(state().speaking).toBeNull();
    expect(state().notices.map((n) => n.message)).toEqual(["the speech model ran out of memory"]);
  });

  it("does not start before the form is ready, and says why", async () => {
    const { cake, api, liveCalls, state } = await started();
    cake.speech.edit({ script: TWO_SPEAKERS });
    cake.speech.chooseVoice(0, "v1");
    expect(await cake.speech.speak()).toBeNull();
    expect(api.speak).not.toHaveBeenCalled();
    expect(liveCalls).toEqual([]);
    expect(state().notices.map((n) => n.message)).toEqual(["Choose a voice for Speaker 2."]);
  });

  it("needs a speech model", async () => {
    const { cake, state } = await ready({ models: [model("m1")] });
    expect(speechModelId(state())).toBeNull();
    expect(cake.speech.problem()).toBe("Choose a speech model.");
  });
});

describe("prompt and preset models", () => {
  const voices = [preset("p1", { name: "Carter" }), voice("v1", { name: "Alice" })];

  it("reads what a model speaks in; an older backend's speech model speaks in prompts", async () => {
    const { cake, state } = await started({ models: [PROMPT_MODEL, PRESET_MODEL], voices });
    expect(speechVoiceKind(state())).toBe("prompt");
    cake.speech.edit({ modelId: "rt" });
    expect(speechVoiceKind(state())).toBe("preset");
  });

  it("speaks plain text in one preset, with the model's default settings", async () => {
    const { cake, api, state } = await started({ models: [PRESET_MODEL], voices });
    cake.speech.edit({ script: "Welcome back. It is good to be here." });
    expect(cake.speech.problem()).toBe("Choose a voice preset.");
    cake.speech.chooseVoice(0, "v1"); // a prompt is no preset
    expect(cake.speech.problem()).toBe("Choose a voice preset.");
    cake.speech.chooseVoice(0, "p1");
    expect(cake.speech.problem()).toBeNull();

    await cake.speech.speak();
    expect(vi.mocked(api.speak).mock.calls[0][0]).toEqual({
      model_id: "rt",
      script: "Welcome back. It is good to be here.",
      voice_ids: ["p1"],
    });
    expect(state().notices).toEqual([]);
  });

  it("sends the settings typed to a preset model", async () => {
    const { cake, api } = await started({ models: [PRESET_MODEL], voices });
    cake.speech.edit({ script: "Hello.", voiceIds: ["p1"], cfgScale: "2", steps: "8" });
    await cake.speech.speak();
    expect(vi.mocked(api.speak).mock.calls[0][0]).toMatchObject({ cfg_scale: 2, steps: 8 });
  });

  it("needs a preset added for a preset model", async () => {
    const { cake } = await started({ models: [PRESET_MODEL] });
    cake.speech.edit({ script: "Hello." });
    expect(cake.speech.problem()).toBe("Add a voice preset first: VibeVoice-Realtime speaks in one.");
    await cake.speech.addVoiceUpload("en-Carter_man.pt", PRESET_BYTES);
    expect(cake.speech.problem()).toBe("Choose a voice preset.");
  });

  it("gives a prompt model's speakers prompts only", async () => {
    const { cake } = await started({ models: [PROMPT_MODEL], voices });
    cake.speech.edit({ script: TWO_SPEAKERS, voiceIds: ["p1", "v1"] });
    expect(cake.speech.problem()).toBe("Choose a voice for Speaker 1.");
  });

  it("needs a WAV voice prompt added for a prompt model", async () => {
    const { cake } = await started({ models: [PROMPT_MODEL], voices: [preset("p1")] });
    cake.speech.edit({ script: "Hello." });
    expect(cake.speech.problem()).toBe("Add a voice first: a WAV recording of someone speaking.");
  });

  it("counts a chosen voice of the other kind as none when the model changes", async () => {
    const { cake } = await started({ models: [PROMPT_MODEL, PRESET_MODEL], voices });
    cake.speech.edit({ script: "Hello.", voiceIds: ["v1"] });
    expect(cake.speech.problem()).toBeNull();
    cake.speech.edit({ modelId: "rt" });
    expect(cake.speech.problem()).toBe("Choose a voice preset.");
    cake.speech.chooseVoice(0, "p1");
    expect(cake.speech.problem()).toBeNull();
    cake.speech.edit({ modelId: "vv" });
    expect(cake.speech.problem()).toBe("Choose a voice for Speaker 1.");
  });
});

describe("clips and audio", () => {
  it("deletes a clip, also the latest", async () => {
    const { cake, state } = await started();
    cake.speech.edit({ script: "Hello.", voiceIds: ["v1"] });
    await cake.speech.speak();
    await cake.speech.deleteClip("c-new");
    expect(state().clips.map((c) => c.id)).toEqual(["c-old"]);
    expect(state().latestClipId).toBeNull();
  });

  it("fetches audio once for playback and waveforms of any width", async () => {
    const { cake, api, server } = await started();
    server.audio.set("v1", buildWav([0, 1, -1, 0.5, -0.5, 0.25]));
    const bytes = await cake.speech.audio("voice", "v1");
    expect(new TextDecoder().decode(bytes.subarray(0, 4))).toBe("RIFF");

    expect(await cake.speech.peaks("voice", "v1", 3)).toEqual([
      { min: 0, max: expect.closeTo(1, 3) },
      { min: -1, max: 0.5 },
      { min: -0.5, max: expect.closeTo(0.25, 3) },
    ]);
    expect(await cake.speech.peaks("voice", "v1", 2)).toHaveLength(2);
    expect(api.voiceAudio).toHaveBeenCalledTimes(1);

    await cake.speech.peaks("clip", "c-old", 10);
    expect(api.clipAudio).toHaveBeenCalledWith("c-old");
  });

  it("tries a failed fetch again", async () => {
    const { cake, api } = await started();
    await expect(cake.speech.audio("voice", "missing")).rejects.toThrow(/no such item/);
    await expect(cake.speech.audio("voice", "missing")).rejects.toThrow(/no such item/);
    expect(api.voiceAudio).toHaveBeenCalledTimes(2);
  });
});

describe("model kinds", () => {
  it("offers text models to the chat and speech models to the Speech screen", async () => {
    const { cake, state } = await started({
      models: [model("vv", { kind: "speech" }), model("old"), model("m1", { kind: "text" })],
    });
    expect(completeModels(state()).map((m) => m.id)).toEqual(["old", "m1"]);
    expect(completeModels(state(), "speech").map((m) => m.id)).toEqual(["vv"]);
    expect(speechModelId(state())).toBe("vv");
    // A loaded speech model is not a chat model.
    cake.store.update({ loadedModelId: "vv" });
    expect(effectiveModelId(state(), selectedConversation(state()))).toBe("old");
    await cake.chat.send("Hi");
    expect(selectedConversation(state())?.model_id).toBe("old");
  });

  it("keeps the picked speech model while it is usable", async () => {
    const { cake, state } = await started({
      models: [
        model("vv", { kind: "speech" }),
        model("vv2", { kind: "speech" }),
        model("broken", { kind: "speech", status: "incomplete" }),
      ],
    });
    cake.speech.edit({ modelId: "vv2" });
    expect(speechModelId(state())).toBe("vv2");
    cake.speech.edit({ modelId: "broken" });
    expect(speechModelId(state())).toBe("vv");
  });
});

describe("replies read aloud", () => {
  const voices = [preset("p1", { name: "Carter" }), voice("v1", { name: "Alice" })];

  it("reads a reply's words in the first fitting voice, heard as made, keeping nothing", async () => {
    const { cake, api, liveCalls, played, state } = await started({ models: [model("m1"), PRESET_MODEL], voices });
    const clipsBefore = state().clips.length;
    await cake.speech.readAloud(
      "c1:1",
      "## Cakes\n\n**Sponge** is light: see [this](http://x).\n\n```py\nprint(1)\n```",
    );
    expect(vi.mocked(api.readAloud).mock.calls[0][0]).toEqual({
      model_id: "rt",
      script: "Cakes\n\nSponge is light: see this.",
      voice_ids: ["p1"],
    });
    expect(liveCalls.slice(-4)).toEqual(["begin", "play", "play", "finish"]);
    expect(played.map((p) => p.samples.length)).toEqual([2, 1]);
    expect(state().readingAloud).toEqual({ key: "c1:1", making: false });
    expect(state().clips.length).toBe(clipsBefore);
  });

  it("stops at once, and says what is missing when it cannot read", async () => {
    const { cake, server, state } = await started({ models: [model("m1"), PRESET_MODEL], voices });
    server.speakScript = speakUntilStopped;
    const reading = cake.speech.readAloud("c1:1", "Hello there.");
    await Promise.resolve();
    expect(state().readingAloud).toEqual({ key: "c1:1", making: true });
    cake.speech.stopReading();
    await reading;
    expect(state().readingAloud).toBeNull();
    expect(state().notices).toEqual([]);

    const none = await started({ models: [model("m1"), PRESET_MODEL], voices: [] });
    await none.cake.speech.readAloud("c1:1", "Hello there.");
    expect(none.state().notices.map((n) => n.message)).toEqual([
      "Cannot read this reply aloud: Add a voice preset first: VibeVoice-Realtime speaks in one.",
    ]);
  });

  it("reads each new reply of a conversation that asks for it", async () => {
    const { cake, api, state } = await started({ models: [model("m1"), PRESET_MODEL], voices });
    await cake.chat.send("Hi");
    expect(api.readAloud).not.toHaveBeenCalled();
    cake.conversations.change(state().selectedId!, { auto_read: true });
    await cake.chat.send("Again");
    expect(vi.mocked(api.readAloud).mock.calls.map((call) => call[0].script)).toEqual(["Hello there"]);
    expect(state().readingAloud?.key).toBe(`${state().selectedId}:3`);
  });
});

describe("speakable text", () => {
  it("leaves out code and Markdown's marks", () => {
    expect(speakableText("# Title\n- one *two* __three__\n1. `four`\n> five")).toBe("Title\none two three\nfour\nfive");
    expect(speakableText("| a | b |\n|---|---|\n| 1 | 2 |")).toBe("a, b\n1, 2");
    expect(speakableText("snake_case stays; ![a cat](cat.png) <b>bold</b>")).toBe("snake_case stays; a cat bold");
  });
});

describe("a VibeVoice folder without its tokenizer", () => {
  it("gets it in one click and becomes usable", async () => {
    const lacking = model("vv-folder", { kind: "speech", status: "incomplete", problem: "no tokenizer.json" });
    const { cake, api, state } = await started({ models: [model("m1"), lacking] });
    expect(completeModels(state(), "speech")).toEqual([]);
    await cake.models.fetchSpeechTokenizer(lacking);
    expect(vi.mocked(api.fetchSpeechTokenizer).mock.calls[0][0]).toBe("vv-folder");
    expect(completeModels(state(), "speech").map((m) => m.id)).toEqual(["vv-folder"]);
    expect(state().download).toBeNull();
  });
});
