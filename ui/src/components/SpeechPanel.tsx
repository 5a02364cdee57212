// The Speech screen: a speech model, the script and a voice per speaker,
// the settings, Generate with its progress, the latest clip and the past
// ones, and beside them the voice library. Voices and clips are fetched
// when the screen opens; playback, also of speech heard as it is made,
// stops when it closes.

import { useEffect } from "preact/hooks";
import { completeModels } from "../state/app-state";
import { ClipList } from "./ClipList";
import { ClipResult } from "./ClipResult";
import { useAppState, useCake } from "./context";
import { liveAudio } from "./live-audio";
import { player } from "./playback";
import { ScriptEditor } from "./ScriptEditor";
import { SpeakControls } from "./SpeakControls";
import { SpeechModelSelect } from "./SpeechModelSelect";
import { SpeechNoModel } from "./SpeechNoModel";
import { SpeechSettings } from "./SpeechSettings";
import { VoiceLibrary } from "./VoiceLibrary";
import { VoiceSlots } from "./VoiceSlots";
import { SidebarToggle } from "./SidebarToggle";

export function SpeechPanel() {
  const state = useAppState();
  const cake = useCake();
  const noModel = state.modelsReady && completeModels(state, "speech").length === 0;
  const latest = state.clips.find((clip) => clip.id === state.latestClipId) ?? null;

  useEffect(() => {
    void cake.speech.refresh();
    return () => {
      player.stop();
      liveAudio.stop();
    };
  }, [cake]);

  return (
    <section class="speech-panel" data-testid="speech-view" aria-labelledby="speech-title">
      <header class="view-header">
        <SidebarToggle />
        <h1 id="speech-title">Speech</h1>
        <SpeechModelSelect />
        <button type="button" class="header-end" onClick={() => cake.showView("chat")}>
          Back to chat
        </button>
      </header>
      <div class="speech-body">
        <div class="speech-main">
          {noModel ? <SpeechNoModel /> : null}
          <ScriptEditor />
          <VoiceSlots />
          <SpeechSettings />
          <SpeakControls />
          {latest ? <ClipResult key={latest.id} clip={latest} /> : null}
          <ClipList />
        </div>
        <aside class="speech-side" aria-label="Voices">
          <VoiceLibrary />
        </aside>
      </div>
    </section>
  );
}
