// Speech: the stored voices (prompts and presets: list, add from a path or
// an upload, delete), speaking a script with a cancellable progress stream
// whose audio plays as it arrives, the stored clips, and the audio of
// voices and clips (fetched once, kept for a while, and reduced to
// waveform peaks).

import type { Api } from "../api/commands";
import type { Clip, SpeakAudioEvent, Voice, VoiceSource } from "../api/types";
import { base64ToBytes, bytesToBase64 } from "../lib/base64";
import { pcm16Samples } from "../lib/pcm";
import { fileStem, planSpeech, speakableText, voicesOfKind } from "../lib/speech";
import { parseWav } from "../lib/wav";
import { waveformPeaks, type Peak } from "../lib/waveform";
import type { Store } from "./store";
import { speechModelId, speechVoiceKind, type AppState, type SpeakState, type SpeechForm } from "./app-state";
import type { Notices } from "./notices";

export type AudioKind = "voice" | "clip";

/**
 * Where the audio of a `speak` stream plays while it is made (the UI's is
 * components/live-audio.ts; tests pass a fake).
 */
export interface LiveSpeech {
  /** Readies audio within a click or key press (autoplay rules), for speech that starts later. */
  prime(): void;
  /** A stream starts. Called within the Generate click, so audio may start (autoplay rules). */
  begin(): void;
  /** Play mono samples right after those before. */
  play(samples: Float32Array<ArrayBuffer>, sampleRate: number): void;
  /** The stream ended: what is queued plays to its end. */
  finish(): void;
  /** Silence at once. */
  stop(): void;
}

/** Audio files kept in memory (the most recently used ones). */
const AUDIO_CACHE_SIZE = 8;

/** A `speak` stream before its first event. */
const STARTING: SpeakState = { loading: null, frames: 0, seconds: 0, piece: 1, pieces: 1 };

export function createSpeechActions(store: Store<AppState>, api: Api, notices: Notices, live: LiveSpeech | null) {
  let speakAbort: AbortController | null = null;
  const audioCache = new Map<string, Promise<Uint8Array<ArrayBuffer>>>();
  const peaksCache = new Map<string, Peak[]>();

  /** Counts changes to the voice list made here, so a list asked for before one is not shown after it. */
  let voiceChanges = 0;

  async function refreshVoices(): Promise<void> {
    try {
      // A voice added or removed while the list was on its way makes it
      // stale: ask again (a few times at most) rather than drop the change.
      for (let attempt = 0; attempt < 3; attempt++) {
        const before = voiceChanges;
        const { voices } = await api.listVoices();
        if (before === voiceChanges || attempt === 2) {
          if (before === voiceChanges) store.update({ voices });
          break;
        }
      }
      store.update({ voicesReady: true });
    } catch (error) {
      store.update({ voicesReady: true });
      notices.report(error);
    }
  }

  async function refreshClips(): Promise<void> {
    try {
      const { clips } = await api.listClips();
      store.update({ clips, clipsReady: true });
    } catch (error) {
      store.update({ clipsReady: true });
      notices.report(error);
    }
  }

  /** Fetch the voices and the clips. */
  async function refresh(): Promise<void> {
    await Promise.all([refreshVoices(), refreshClips()]);
  }

  /**
   * Store a voice (a WAV prompt or a preset). A refused file is reported (the
   * backend's message names it and says why) and nothing is added; a prompt
   * cut to the limit is added and its notice shown. Resolves with the voice,
   * or null.
   */
  async function addVoice(source: VoiceSource): Promise<Voice | null> {
    store.update((state) => ({ addingVoices: state.addingVoices + 1 }));
    try {
      const voice = await api.addVoice(source);
      voiceChanges++;
      store.update((state) => ({ voices: [voice, ...state.voices.filter((v) => v.id !== voice.id)] }));
      if (voice.notice) notices.inform(voice.notice);
      return voice;
    } catch (error) {
      notices.report(error);
      return null;
    } finally {
      store.update((state) => ({ addingVoices: state.addingVoices - 1 }));
    }
  }

  /** Add files of the serving machine (the desktop window's drops), one after another. */
  async function addVoicePaths(paths: readonly string[]): Promise<void> {
    for (const path of paths) await addVoice({ name: fileStem(path), path });
  }

  /** Add an uploaded file (the browser's drops and file input). */
  function addVoiceUpload(fileName: string, bytes: Uint8Array): Promise<Voice | null> {
    return addVoice({ name: fileStem(fileName), file_base64: bytesToBase64(bytes), file_name: fileName });
  }

  /** Set what prompt voice `id` says (blank clears it); a refusal is reported. Resolves with whether it was kept. */
  async function setTranscript(id: string, transcript: string): Promise<boolean> {
    try {
      const voice = await api.setVoiceTranscript(id, transcript);
      voiceChanges++;
      store.update((state) => ({ voices: state.voices.map((v) => (v.id === id ? voice : v)) }));
      return true;
    } catch (error) {
      notices.report(error);
      return false;
    }
  }

  async function deleteVoice(id: string): Promise<void> {
    try {
      await api.deleteVoice(id);
    } catch (error) {
      notices.report(error);
      return;
    }
    forget("voice", id);
    voiceChanges++;
    store.update((state) => ({
      voices: state.voices.filter((voice) => voice.id !== id),
      speechForm: {
        ...state.speechForm,
        voiceIds: state.speechForm.voiceIds.map((voiceId) => (voiceId === id ? "" : voiceId)),
      },
    }));
  }

  async function deleteClip(id: string): Promise<void> {
    try {
      await api.deleteClip(id);
    } catch (error) {
      notices.report(error);
      return;
    }
    forget("clip", id);
    store.update((state) => ({
      clips: state.clips.filter((clip) => clip.id !== id),
      latestClipId: state.latestClipId === id ? null : state.latestClipId,
    }));
  }

  /** Change the Speech form. */
  function edit(change: Partial<SpeechForm>): void {
    store.update((state) => ({ speechForm: { ...state.speechForm, ...change } }));
  }

  /** Choose the voice of the speaker in `slot` ("" clears it). */
  function chooseVoice(slot: number, voiceId: string): void {
    const voiceIds = [...store.get().speechForm.voiceIds];
    while (voiceIds.length <= slot) voiceIds.push("");
    voiceIds[slot] = voiceId;
    edit({ voiceIds });
  }

  /** Why the form cannot be spoken yet, or null when it can. */
  function problem(state: AppState = store.get()): string | null {
    return plan(state).problem;
  }

  function plan(state: AppState) {
    const form = state.speechForm;
    return planSpeech({
      modelId: speechModelId(state),
      kind: speechVoiceKind(state),
      script: form.script,
      voiceIds: form.voiceIds,
      voices: state.voices,
      settings: form,
    });
  }

  /**
   * Speak the form's script. Progress goes to `speaking` and the audio to
   * the live player as it arrives; the new clip joins the list and becomes
   * the latest. Resolves with it, or null when the form is not ready, the
   * stream failed (reported) or was stopped. Call it from the Generate click
   * (see `LiveSpeech.begin`).
   */
  async function speak(): Promise<Clip | null> {
    stopReading();
    const state = store.get();
    if (state.speaking) return null;
    const { request, problem } = plan(state);
    if (request === null) {
      notices.report(new Error(problem ?? "Cannot speak this yet."));
      return null;
    }
    const controller = new AbortController();
    speakAbort = controller;
    live?.begin();
    const hear = liveListener();
    store.update({ speaking: STARTING });
    try {
      const clip = await api.speak(
        request,
        (event) => {
          if (event.type === "loading") {
            const { fraction, message } = event;
            store.update((s) => ({ speaking: { ...(s.speaking ?? STARTING), loading: { fraction, message } } }));
          } else if (event.type === "progress") {
            const { frames, seconds, piece = 1, pieces = 1, step, steps } = event;
            const sampling = step !== undefined && steps !== undefined ? { step, steps } : {};
            store.update({ speaking: { loading: null, frames, seconds, piece, pieces, ...sampling } });
          } else {
            hear(event);
          }
        },
        controller.signal,
      );
      store.update((s) => ({
        clips: [clip, ...s.clips.filter((c) => c.id !== clip.id)],
        latestClipId: clip.id,
        loadedModelId: request.model_id, // `speak` loads the model it needs
      }));
      return clip;
    } catch (error) {
      notices.report(error); // a stop is not reported
      return null;
    } finally {
      speakAbort = null;
      live?.finish();
      store.update({ speaking: null });
    }
  }

  /**
   * Hands one stream's audio chunks to the live player. A chunk that cannot
   * be read ends live playback for the stream (reported); the clip is still made.
   */
  function liveListener(): (event: SpeakAudioEvent) => void {
    let broken = false;
    return (event) => {
      if (live === null || broken) return;
      try {
        live.play(pcm16Samples(event.pcm16_base64), event.sample_rate);
      } catch (error) {
        broken = true;
        live.stop();
        const reason = error instanceof Error ? error.message : String(error);
        notices.report(new Error(`Cannot play the speech while it is made: ${reason}`));
      }
    };
  }

  /** Stop speaking and silence its audio at once; nothing is kept of a stopped clip. */
  function stop(): void {
    speakAbort?.abort();
    live?.stop();
  }

  let readAbort: AbortController | null = null;

  /**
   * Read a chat reply aloud with the Speech screen's model and voice (its
   * first fitting voice when none is chosen there), heard as it is made;
   * nothing is kept. `key` names the reply (its button shows it being
   * read). Another reply being read stops first. Call it within a click,
   * or after `prime` was (autoplay rules).
   */
  async function readAloud(key: string, markdown: string): Promise<void> {
    stopReading();
    const state = store.get();
    if (state.speaking) {
      notices.report(new Error("The Speech screen is making speech: wait for it, or stop it, then read this reply."));
      return;
    }
    const { request, problem } = readingPlan(state, speakableText(markdown));
    if (request === null) {
      notices.report(new Error(`Cannot read this reply aloud: ${problem ?? "nothing to read."}`));
      return;
    }
    const controller = new AbortController();
    readAbort = controller;
    live?.begin();
    const hear = liveListener();
    store.update({ readingAloud: { key, making: true } });
    try {
      await api.readAloud(request, (event) => (event.type === "audio" ? hear(event) : undefined), controller.signal);
      store.update((s) => (s.readingAloud?.key === key ? { readingAloud: { key, making: false } } : {}));
      store.update({ loadedModelId: request.model_id }); // `speak` loads the model it needs
    } catch (error) {
      notices.report(error); // a stop is not reported
      store.update((s) => (s.readingAloud?.key === key ? { readingAloud: null } : {}));
    } finally {
      if (readAbort === controller) {
        readAbort = null;
        live?.finish();
      }
    }
  }

  /** The request reading `text` aloud: the form's model, and its first voice (else the first that fits). */
  function readingPlan(state: AppState, text: string) {
    const kind = speechVoiceKind(state);
    const fits = voicesOfKind(state.voices, kind === "preset" ? "preset" : "prompt").filter(
      (voice) => kind !== "transcribed_prompt" || voice.transcript,
    );
    const chosen = state.speechForm.voiceIds[0] ?? "";
    const voiceId = fits.some((voice) => voice.id === chosen) ? chosen : (fits[0]?.id ?? chosen);
    return planSpeech({
      modelId: speechModelId(state),
      kind,
      script: text,
      voiceIds: [voiceId],
      voices: state.voices,
      settings: state.speechForm,
    });
  }

  /** Stop reading a reply aloud, at once. */
  function stopReading(): void {
    if (readAbort === null && store.get().readingAloud === null) return;
    readAbort?.abort();
    readAbort = null;
    live?.stop();
    store.update({ readingAloud: null });
  }

  /** Ready the audio within the click or key press that will lead to a reply read aloud. */
  function prepareReading(): void {
    live?.prime();
  }

  /** The WAV file of a voice or clip; fetched once and kept while used recently. */
  function audio(kind: AudioKind, id: string): Promise<Uint8Array<ArrayBuffer>> {
    const key = `${kind}:${id}`;
    const cached = audioCache.get(key);
    if (cached) {
      audioCache.delete(key); // most recently used last
      audioCache.set(key, cached);
      return cached;
    }
    const request = kind === "voice" ? api.voiceAudio(id) : api.clipAudio(id);
    const bytes = request.then(({ wav_base64 }) => base64ToBytes(wav_base64));
    bytes.catch(() => {
      if (audioCache.get(key) === bytes) audioCache.delete(key); // a failure is tried again next time
    });
    audioCache.set(key, bytes);
    for (const oldest of audioCache.keys()) {
      if (audioCache.size <= AUDIO_CACHE_SIZE) break;
      audioCache.delete(oldest);
    }
    return bytes;
  }

  /** `bins` min/max pairs of a voice's or clip's samples, for its waveform. */
  async function peaks(kind: AudioKind, id: string, bins: number): Promise<Peak[]> {
    const key = `${kind}:${id}:${bins}`;
    const cached = peaksCache.get(key);
    if (cached) return cached;
    const result = waveformPeaks(parseWav(await audio(kind, id)).samples, bins);
    peaksCache.set(key, result);
    return result;
  }

  function forget(kind: AudioKind, id: string): void {
    audioCache.delete(`${kind}:${id}`);
    for (const key of peaksCache.keys()) if (key.startsWith(`${kind}:${id}:`)) peaksCache.delete(key);
  }

  return {
    refresh,
    refreshVoices,
    refreshClips,
    addVoice,
    addVoicePaths,
    addVoiceUpload,
    setTranscript,
    deleteVoice,
    deleteClip,
    edit,
    chooseVoice,
    problem,
    speak,
    stop,
    readAloud,
    stopReading,
    prepareReading,
    audio,
    peaks,
  };
}

export type SpeechActions = ReturnType<typeof createSpeechActions>;
