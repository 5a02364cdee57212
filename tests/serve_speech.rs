//! Speech through the app's API on a real `cake serve`: voice prompts
//! stored from files and uploads (bad files refused with the reason),
//! speaking with progress into clips that survive a restart, and OpenAI's
//! `/v1/audio/speech`. The model is the tiny VibeVoice checkpoint made
//! talkative (tests/fixtures/make_talkative_vibevoice.py).

mod common;

use common::server::Server;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn talkative_model(root: &Path) -> PathBuf {
    let dir = root.join("talkative-vibevoice");
    let status = std::process::Command::new("python3")
        .arg(common::fixture("make_talkative_vibevoice.py"))
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("python3 runs");
    assert!(status.success());
    dir
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unbase64(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).unwrap()
}

fn call(server: &Server, command: &str, args: Value) -> Value {
    let (status, body) = server.post(&format!("/app/{command}"), &args);
    assert_eq!(status, 200, "{command}: {body}");
    body
}

/// (sample rate, channels, bits, samples) of a WAV file.
fn wav_facts(bytes: &[u8]) -> (u32, u16, u16, usize) {
    let reader = hound::WavReader::new(std::io::Cursor::new(bytes)).unwrap();
    let spec = reader.spec();
    (spec.sample_rate, spec.channels, spec.bits_per_sample, reader.len() as usize)
}

#[test]
fn voices_clips_and_the_openai_speech_route() {
    let root = tempfile::tempdir().unwrap();
    let data = common::server::data_dir_with_default_model(root.path());
    let model_dir = talkative_model(root.path());
    let hf = root.path().join("hf");
    let server = Server::start(&data, &hf, &[]);

    let entry = call(&server, "import_model", json!({"path": model_dir}));
    assert_eq!(entry["kind"], "speech");
    assert_eq!(entry["architecture"], "vibevoice");
    let model_id = entry["id"].as_str().unwrap().to_string();
    let models = call(&server, "list_models", json!({}));
    assert!(models["models"].as_array().unwrap().iter().any(|m| m["id"] == "default" && m["kind"] == "text"));

    // Voices from a path and from an upload; a bad upload is refused with its name and the reason.
    let alice = call(&server, "add_voice", json!({"name": "Alice", "path": model_dir.join("voice0.wav")}));
    assert!((alice["duration_s"].as_f64().unwrap() - 0.5).abs() < 0.01, "{alice}");
    let upload = std::fs::read(model_dir.join("voice1.wav")).unwrap();
    let bob = call(&server, "add_voice", json!({"name": "Bob", "wav_base64": base64(&upload)}));
    let (status, error) =
        server.post("/app/add_voice", &json!({"name": "noise.wav", "wav_base64": base64(b"RIFF....WAVEjunk")}));
    assert_eq!(status, 400);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("noise.wav") && message.contains("not a valid WAV file"), "{message}");
    assert_eq!(call(&server, "list_voices", json!({}))["voices"].as_array().unwrap().len(), 2);
    let prompt = unbase64(call(&server, "voice_audio", json!({"id": alice["id"]}))["wav_base64"].as_str().unwrap());
    assert_eq!(wav_facts(&prompt), (24_000, 1, 16, 12_000));

    // The wrong kind of model is refused either way.
    let (status, error) =
        server.post("/app/speak", &json!({"model_id": "default", "script": "Hi", "voice_ids": [alice["id"]]}));
    assert_eq!(status, 400, "{error}");
    let (status, _) = server.stream(
        "/app/chat",
        &json!({"model_id": model_id, "messages": [{"role": "user", "content": "hi"}]}),
        |_, _| true,
    );
    assert_eq!(status, 400);

    // Speaking a two-speaker script reports progress and keeps a clip.
    let request = json!({"model_id": model_id, "script": "Speaker 1: Hello.\nSpeaker 2: Hi there.", "voice_ids": [alice["id"], bob["id"]], "seed": 7, "max_seconds": 1.0});
    let (status, events) = server.stream("/app/speak", &request, |_, _| true);
    assert_eq!(status, 200, "{:?}", server.post("/app/speak", &request));
    let progress: Vec<Value> =
        events.iter().map(|e| serde_json::from_str::<Value>(e).unwrap()).filter(|e| e["type"] == "progress").collect();
    assert_eq!(progress.len(), 8, "{events:?}");
    assert_eq!(progress.last().unwrap()["frames"], 8);
    let done: Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!(done["type"], "done", "{events:?}");
    let clip = done["clip"].clone();
    assert_eq!(clip["frames"], 8);
    assert_eq!(clip["end"], "length");
    let audio = unbase64(call(&server, "clip_audio", json!({"id": clip["id"]}))["wav_base64"].as_str().unwrap());
    assert_eq!(wav_facts(&audio), (24_000, 1, 16, 8 * 3200));

    // A script with more speakers than voices is refused before any work.
    let (status, events) = server.stream(
        "/app/speak",
        &json!({"model_id": model_id, "script": "Speaker 1: a\nSpeaker 2: b", "voice_ids": [alice["id"]]}),
        |_, _| true,
    );
    assert_eq!(status, 200);
    assert!(events.last().unwrap().contains("2 speakers but 1 voice"), "{events:?}");
    drop(server);

    // Voices and clips survive a restart.
    let server = Server::start(&data, &hf, &[]);
    assert_eq!(call(&server, "list_voices", json!({}))["voices"].as_array().unwrap().len(), 2);
    let clips = call(&server, "list_clips", json!({}));
    assert_eq!(clips["clips"].as_array().unwrap().len(), 1);
    assert_eq!(clips["clips"][0]["id"], clip["id"]);

    // OpenAI's speech route: a voice by name, WAV back.
    let (status, content_type, body) =
        server.post_bytes("/v1/audio/speech", &json!({"model": model_id, "input": "Hello.", "voice": "Bob"}));
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(content_type, "audio/wav");
    let (rate, channels, bits, samples) = wav_facts(&body);
    assert_eq!((rate, channels, bits), (24_000, 1, 16));
    assert!(samples > 0 && samples % 3200 == 0, "{samples}");
    let (status, _, body) =
        server.post_bytes("/v1/audio/speech", &json!({"model": model_id, "input": "Hello.", "voice": "Nobody"}));
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));
    let (status, _, _) = server.post_bytes(
        "/v1/audio/speech",
        &json!({"model": model_id, "input": "Hello.", "voice": "Bob", "response_format": "mp3"}),
    );
    assert_eq!(status, 400);

    // Deleting.
    call(&server, "delete_clip", json!({"id": clip["id"]}));
    call(&server, "delete_voice", json!({"id": bob["id"]}));
    assert!(call(&server, "list_clips", json!({}))["clips"].as_array().unwrap().is_empty());
    assert_eq!(call(&server, "list_voices", json!({}))["voices"].as_array().unwrap().len(), 1);
}

#[test]
fn cake_tts_writes_speech_and_playback_without_a_device_is_only_a_notice() {
    let root = tempfile::tempdir().unwrap();
    let model = talkative_model(root.path());
    let out = root.path().join("speech.wav");
    let voice = model.join("voice0.wav");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_cake"))
        .args(["tts", "--model", model.to_str().unwrap(), "--voice", voice.to_str().unwrap()])
        .args([
            "--text",
            "Hello there.",
            "--out",
            out.to_str().unwrap(),
            "--seed",
            "1",
            "--max-seconds",
            "0.5",
            "--play",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(wav_facts(&std::fs::read(&out).unwrap()), (24_000, 1, 16, 4 * 3200));
    let has_device = std::path::Path::new("/dev/snd").exists();
    if !has_device {
        assert!(stderr.contains("playback is unavailable") && stderr.contains("speech.wav"), "{stderr}");
    }
}

/// The PCM of a stream's `audio` events, and how many there were.
fn streamed_pcm(events: &[String]) -> (Vec<u8>, usize) {
    let audio: Vec<Value> =
        events.iter().map(|e| serde_json::from_str::<Value>(e).unwrap()).filter(|e| e["type"] == "audio").collect();
    let pcm = audio.iter().flat_map(|e| unbase64(e["pcm16_base64"].as_str().unwrap())).collect();
    (pcm, audio.len())
}

#[test]
fn realtime_speaks_in_presets_and_streams_its_audio() {
    let root = tempfile::tempdir().unwrap();
    let data = common::server::data_dir_with_default_model(root.path());
    let model_dir = common::fixture("tiny/vibevoice_realtime");
    let server = Server::start(&data, &root.path().join("hf"), &[]);

    let entry = call(&server, "import_model", json!({"path": model_dir}));
    assert_eq!(
        (&entry["kind"], &entry["architecture"], &entry["voice"]),
        (&json!("speech"), &json!("vibevoice_streaming"), &json!("preset"))
    );
    let model_id = entry["id"].as_str().unwrap().to_string();

    // Presets from a path (safetensors) and an upload (Microsoft's torch.save
    // format); a broken one is refused with its name; a WAV stays a prompt.
    let plain = call(&server, "add_voice", json!({"name": "Plain", "path": model_dir.join("voice.safetensors")}));
    assert_eq!((&plain["kind"], &plain["duration_s"]), (&json!("preset"), &Value::Null), "{plain}");
    let upload = std::fs::read(model_dir.join("voice.pt")).unwrap();
    let davis =
        call(&server, "add_voice", json!({"name": "Davis", "file_base64": base64(&upload), "file_name": "davis.pt"}));
    assert_eq!(davis["kind"], "preset");
    let (status, error) = server.post(
        "/app/add_voice",
        &json!({"name": "Broken", "file_base64": base64(&upload[..upload.len() / 2]), "file_name": "broken.pt"}),
    );
    assert_eq!(status, 400, "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("broken.pt"), "{error}");
    let wav = common::fixture("tiny/vibevoice/voice0.wav");
    let alice = call(&server, "add_voice", json!({"name": "Alice", "path": wav}));
    assert_eq!(alice["kind"], "prompt");
    let (status, _) = server.post("/app/voice_audio", &json!({"id": davis["id"]}));
    assert_ne!(status, 200, "a preset has no audio to play");

    // A WAV prompt cannot voice Realtime, nor two presets: refused before any work.
    for voices in [json!([alice["id"]]), json!([davis["id"], plain["id"]])] {
        let (status, error) =
            server.post("/app/speak", &json!({"model_id": model_id, "script": "Hi.", "voice_ids": voices}));
        assert_eq!(status, 400, "{error}");
        assert!(error["error"]["message"].as_str().unwrap().contains("preset"), "{error}");
    }

    // Speaking streams each frame's audio as it is made: the stream's PCM is the clip's.
    let request = json!({"model_id": model_id, "script": "Hello there.", "voice_ids": [davis["id"]], "seed": 3, "max_seconds": 1.0});
    let (status, events) = server.stream("/app/speak", &request, |_, _| true);
    assert_eq!(status, 200);
    let done: Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!(done["type"], "done", "{events:?}");
    let clip = &done["clip"];
    let frames = clip["frames"].as_u64().unwrap() as usize;
    assert!((1..=8).contains(&frames), "{clip}");
    let (pcm, chunks) = streamed_pcm(&events);
    assert_eq!(chunks, frames);
    let audio = unbase64(call(&server, "clip_audio", json!({"id": clip["id"]}))["wav_base64"].as_str().unwrap());
    assert_eq!(audio[44..], pcm[..], "the streamed audio is the clip's");
    let progress: Value =
        events.iter().map(|e| serde_json::from_str::<Value>(e).unwrap()).find(|e| e["type"] == "progress").unwrap();
    assert_eq!((&progress["piece"], &progress["pieces"]), (&json!(1), &json!(1)), "{progress}");

    // OpenAI's route by preset name: whole, streamed as audio, and as events; the same speech each way.
    let speech = |extra: Value| {
        let mut body = json!({"model": model_id, "input": "Hello there.", "voice": "Davis"});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        server.post_bytes("/v1/audio/speech", &body)
    };
    let (status, content_type, whole) = speech(json!({}));
    assert_eq!((status, content_type.as_str()), (200, "audio/wav"), "{}", String::from_utf8_lossy(&whole));
    let (status, content_type, streamed) = speech(json!({"stream_format": "audio"}));
    assert_eq!((status, content_type.as_str()), (200, "audio/wav"));
    assert_eq!(&streamed[..4], b"RIFF");
    assert_eq!(streamed[44..].len() % 6400, 0);
    let (status, content_type, raw) = speech(json!({"stream_format": "audio", "response_format": "pcm"}));
    assert_eq!((status, content_type.as_str()), (200, "audio/pcm"));
    assert_eq!(raw.len() % 6400, 0);
    let mut arrivals = Vec::new();
    let started = std::time::Instant::now();
    let (status, events) = server.stream(
        "/v1/audio/speech",
        &json!({"model": model_id, "input": "Hello there.", "voice": "Davis", "stream_format": "sse", "seed": 1}),
        |_, _| {
            arrivals.push(started.elapsed());
            true
        },
    );
    assert_eq!(status, 200);
    let parsed: Vec<Value> = events.iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    assert_eq!(parsed.last().unwrap()["type"], "speech.audio.done", "{events:?}");
    let deltas = parsed.iter().filter(|e| e["type"] == "speech.audio.delta").count();
    assert!(deltas >= 2 && deltas == parsed.len() - 1, "{events:?}");
    // Audio comes while speech is made: the first piece long before the end.
    assert!(arrivals[0] < *arrivals.last().unwrap() / 2, "{arrivals:?}");
    for (sizes, name) in [(whole.len() - 44, "whole"), (streamed.len() - 44, "streamed"), (raw.len(), "pcm")] {
        assert!(sizes > 0, "{name}");
    }
    let (status, _, body) = speech(json!({"stream_format": "audio", "voice": "Alice"}));
    assert_eq!(status, 400, "a wrong voice still gets its status when streaming: {}", String::from_utf8_lossy(&body));
}

#[test]
fn a_long_script_is_spoken_in_pieces_into_one_clip() {
    let root = tempfile::tempdir().unwrap();
    let data = common::server::data_dir_with_default_model(root.path());
    let model_dir = talkative_model(root.path());
    let server = Server::start(&data, &root.path().join("hf"), &[]);
    let model_id = call(&server, "import_model", json!({"path": model_dir}))["id"].as_str().unwrap().to_string();
    let alice = call(&server, "add_voice", json!({"name": "Alice", "path": model_dir.join("voice0.wav")}));
    let bob = call(&server, "add_voice", json!({"name": "Bob", "path": model_dir.join("voice1.wav")}));

    // Twelve sentences, about 600 characters with the speaker labels: two
    // pieces, since a piece holds at most `PIECE_CHARS` (300) of spoken text.
    let script = (1..=12)
        .map(|i| format!("Speaker {}: This is sentence number {i} of the story.", 1 + i % 2))
        .collect::<Vec<_>>()
        .join("\n");
    let request =
        json!({"model_id": model_id, "script": script, "voice_ids": [alice["id"], bob["id"]], "seed": 2, "steps": 2});
    let (status, events) = server.stream("/app/speak", &request, |_, _| true);
    assert_eq!(status, 200);
    let done: Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!(done["type"], "done", "{:?}", &events[events.len().saturating_sub(3)..]);
    let progress: Vec<Value> =
        events.iter().map(|e| serde_json::from_str::<Value>(e).unwrap()).filter(|e| e["type"] == "progress").collect();
    let pieces: Vec<(u64, u64)> =
        progress.iter().map(|p| (p["piece"].as_u64().unwrap(), p["pieces"].as_u64().unwrap())).collect();
    assert_eq!(pieces.first(), Some(&(1, 2)));
    assert_eq!(pieces.last(), Some(&(2, 2)));
    assert!(pieces.windows(2).all(|w| w[0].0 <= w[1].0), "pieces go in order");
    // Frames count on across pieces, and the one clip holds them all.
    let frames: Vec<u64> = progress.iter().map(|p| p["frames"].as_u64().unwrap()).collect();
    assert!(frames.windows(2).all(|w| w[1] == w[0] + 1), "{frames:?}");
    let clip = &done["clip"];
    assert_eq!(clip["frames"].as_u64(), frames.last().copied());
    let audio = unbase64(call(&server, "clip_audio", json!({"id": clip["id"]}))["wav_base64"].as_str().unwrap());
    let (pcm, _) = streamed_pcm(&events);
    assert_eq!(audio[44..], pcm[..]);
    assert_eq!(wav_facts(&audio).3, frames.len() * 3200);
}

#[test]
fn luxtts_speaks_long_texts_in_a_transcribed_voice_at_48_khz() {
    let root = tempfile::tempdir().unwrap();
    let data = common::server::data_dir_with_default_model(root.path());
    let server = Server::start(&data, &root.path().join("hf"), &[]);
    let model_dir = common::fixture("tiny/luxtts");

    let entry = call(&server, "import_model", json!({"path": model_dir}));
    assert_eq!(
        (&entry["kind"], &entry["architecture"], &entry["voice"], &entry["status"]),
        (&json!("speech"), &json!("luxtts"), &json!("transcribed_prompt"), &json!("complete")),
        "{entry}"
    );
    assert!(entry["parameters"].as_u64().unwrap() > 100_000, "{entry}");
    let model_id = entry["id"].as_str().unwrap().to_string();

    // A prompt without its words cannot voice LuxTTS: refused before any work, saying why.
    let alice =
        call(&server, "add_voice", json!({"name": "Alice", "path": common::fixture("tiny/vibevoice/voice0.wav")}));
    assert_eq!(alice.get("transcript"), None);
    let speak = |script: &str| json!({"model_id": model_id, "script": script, "voice_ids": [alice["id"]], "seed": 5});
    let (status, error) = server.post("/app/speak", &speak("Hello."));
    assert_eq!(status, 400, "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("no transcript"), "{error}");
    let said =
        call(&server, "set_voice_transcript", json!({"id": alice["id"], "transcript": "  Hello there,\n my voice. "}));
    assert_eq!(said["transcript"], "Hello there, my voice.");
    // Text is read once the model is loaded: nothing to read ends the stream as the request's fault.
    let (_, events) = server.stream("/app/speak", &speak("12345 !!!"), |_, _| true);
    let last: Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!((&last["type"], &last["kind"]), (&json!("error"), &json!("bad_request")), "{last}");
    assert!(last["message"].as_str().unwrap().contains("nothing to read"), "{last}");

    // Twelve sentences come back as one clip, spoken in pieces: the first
    // piece's audio arrives while later pieces are still being made.
    let script = (1..=12).map(|i| format!("This is sentence number {i} of the story.")).collect::<Vec<_>>().join(" ");
    let (status, events) = server.stream("/app/speak", &speak(&script), |_, _| true);
    assert_eq!(status, 200);
    let parsed: Vec<Value> = events.iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    let done = parsed.last().unwrap();
    assert_eq!(done["type"], "done", "{:?}", &events[events.len().saturating_sub(3)..]);
    let pieces: Vec<(u64, u64)> = parsed
        .iter()
        .filter(|e| e["type"] == "progress")
        .map(|p| (p["piece"].as_u64().unwrap(), p["pieces"].as_u64().unwrap()))
        .collect();
    let count = pieces[0].1;
    assert!(count >= 3, "{pieces:?}");
    assert_eq!((pieces[0].0, pieces.last().unwrap().0), (1, count));
    assert!(pieces.windows(2).all(|w| w[0].0 <= w[1].0), "pieces go in order");
    // Each piece is made all at once: its four sampling steps are reported as they end.
    let steps: Vec<(u64, u64)> = parsed
        .iter()
        .filter(|e| e["type"] == "progress" && e["piece"] == json!(1) && e["frames"] == json!(0))
        .map(|e| (e["step"].as_u64().unwrap(), e["steps"].as_u64().unwrap()))
        .collect();
    assert_eq!(steps, [(1, 4), (2, 4), (3, 4), (4, 4)]);
    let first_audio = parsed.iter().position(|e| e["type"] == "audio").unwrap();
    let last_piece_starts = parsed.iter().position(|e| e["type"] == "progress" && e["piece"] == json!(count)).unwrap();
    assert!(first_audio < last_piece_starts, "audio before the last piece is made");
    assert!(parsed.iter().filter(|e| e["type"] == "audio").all(|e| e["sample_rate"] == 48_000));
    let clip = &done["clip"];
    let audio = unbase64(call(&server, "clip_audio", json!({"id": clip["id"]}))["wav_base64"].as_str().unwrap());
    let (rate, channels, _, samples) = wav_facts(&audio);
    assert_eq!((rate, channels), (48_000, 1));
    assert!(samples > 48_000, "twelve sentences make more than a second: {samples}");
    let (pcm, _) = streamed_pcm(&events);
    assert_eq!(audio[44..], pcm[..], "the streamed audio is the clip's");
    assert_eq!((&clip["steps"], &clip["cfg_scale"]), (&json!(4), &json!(3.0)), "LuxTTS's own defaults");

    // OpenAI's route streams a WAV whose header gives the 48 kHz rate.
    let body =
        json!({"model": model_id, "input": "Hello there.", "voice": "Alice", "stream_format": "audio", "seed": 1});
    let (status, content_type, streamed) = server.post_bytes("/v1/audio/speech", &body);
    assert_eq!((status, content_type.as_str()), (200, "audio/wav"), "{}", String::from_utf8_lossy(&streamed));
    assert_eq!(u32::from_le_bytes(streamed[24..28].try_into().unwrap()), 48_000);
    assert!(streamed.len() > 44);

    // `cake tts` speaks with the same model from a WAV file and its transcript.
    let out = root.path().join("lux.wav");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_cake"))
        .args(["tts", "--model", model_dir.to_str().unwrap()])
        .args(["--voice", common::fixture("tiny/vibevoice/voice0.wav").to_str().unwrap()])
        .args(["--transcript", "Hello there, my voice.", "--text", "Good morning. How are you?"])
        .args(["--out", out.to_str().unwrap(), "--seed", "1"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let (rate, _, _, samples) = wav_facts(&std::fs::read(&out).unwrap());
    assert!(rate == 48_000 && samples > 0);
}
