//! `cake serve` under load and abuse, from this separate process over real
//! loopback connections: concurrent saves and imports lose nothing, a crash
//! mid-save leaves no half-written file, slow or idle connections cannot
//! lock anyone out, and one greedy request cannot starve the others.

mod common;

use common::server::{data_dir_with_default_model, Server};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

fn start(root: &Path, extra_args: &[&str]) -> Server {
    let data = data_dir_with_default_model(root);
    Server::start(&data, &root.join("hf-cache"), extra_args)
}

/// A conversation whose size depends on `version`, so that a mix of two
/// writes would not parse.
fn conversation(id: &str, writer: usize, version: usize) -> Value {
    let words = "bread ".repeat(1 + (writer * 131 + version * 17) % 700);
    json!({
        "id": id, "title": format!("{writer}/{version}"), "model_id": "default", "system_prompt": "",
        "sampling": {}, "created_at": "2026-12-06T00:00:00Z", "updated_at": format!("2026-12-06T00:00:{:02}Z", version % 60),
        "messages": [{"role": "user", "content": words}, {"role": "assistant", "content": format!("v{version}")}],
    })
}

/// Temporary files a writer left in `folder`.
fn leftovers(folder: &Path) -> Vec<String> {
    std::fs::read_dir(folder)
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".tmp"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn concurrent_saves_of_one_conversation_lose_nothing_and_always_read_whole() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path(), &[]);
    let (writers, rounds) = (4, 40);
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|writer| {
                let server = &server;
                scope.spawn(move || {
                    let mut failures = Vec::new();
                    for version in 0..rounds {
                        let saved = conversation("shared", writer, version);
                        let (status, body) = server.post("/app/save_conversation", &json!({"conversation": saved}));
                        if status != 200 {
                            failures.push(format!("save {writer}/{version}: {status} {body}"));
                        }
                        let (status, read) = server.post("/app/get_conversation", &json!({"id": "shared"}));
                        if status != 200 || !read["messages"].is_array() {
                            failures.push(format!("read after {writer}/{version}: {status} {read}"));
                        }
                    }
                    failures
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert!(failures.is_empty(), "{} failures, first: {:?}", failures.len(), failures.first());
    // Once the writers are done, the last acknowledged save is what is there.
    let last = conversation("shared", 9, 999);
    assert_eq!(server.post("/app/save_conversation", &json!({"conversation": last})).0, 200);
    assert_eq!(server.post("/app/get_conversation", &json!({"id": "shared"})).1, last);
    assert_eq!(leftovers(&server.data_dir.join("conversations")), Vec::<String>::new());
}

#[test]
fn concurrent_imports_are_all_recorded() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path(), &[]);
    let model = common::fixture("tiny/gemma3_gguf/model-q8_0.gguf");
    let copies: Vec<_> = (0..8)
        .map(|i| {
            let copy = root.path().join(format!("model-{i}.gguf"));
            std::fs::copy(&model, &copy).unwrap();
            copy
        })
        .collect();
    let statuses: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = copies
            .iter()
            .map(|copy| {
                let server = &server;
                scope.spawn(move || server.post("/app/import_model", &json!({"path": copy})))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (status, body) in &statuses {
        assert_eq!(*status, 200, "{body}");
    }
    let imports: Vec<String> =
        serde_json::from_slice(&std::fs::read(server.data_dir.join("imports.json")).unwrap()).unwrap();
    assert_eq!(imports.len(), 8, "{imports:?}");
    let (_, listed) = server.post("/app/list_models", &json!({}));
    let imported = listed["models"].as_array().unwrap().iter().filter(|m| m["source"] == "imported").count();
    assert_eq!(imported, 8, "{listed}");
}

#[test]
fn a_server_killed_during_bursts_of_saves_keeps_every_acknowledged_one() {
    let root = tempfile::tempdir().unwrap();
    let data = data_dir_with_default_model(root.path());
    let hf = root.path().join("hf-cache");
    for _ in 0..3 {
        let server = Server::start(&data, &hf, &[]);
        // Each writer saves its own conversation with rising versions and
        // remembers the last one acknowledged, until the server dies.
        let acknowledged: Vec<usize> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..3)
                .map(|writer| {
                    let server = &server;
                    scope.spawn(move || {
                        let mut last = 0;
                        for version in 1.. {
                            let saved = conversation(&format!("c{writer}"), writer, version);
                            match server.try_post("/app/save_conversation", &json!({"conversation": saved})) {
                                Some(200) => last = version,
                                _ => return last,
                            }
                        }
                        last
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(700));
            server.kill();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(acknowledged.iter().all(|&n| n > 0), "saves went through before the kill: {acknowledged:?}");
        let server = Server::start(&data, &hf, &[]);
        for (writer, last) in acknowledged.iter().enumerate() {
            let (status, read) = server.post("/app/get_conversation", &json!({"id": format!("c{writer}")}));
            assert_eq!(status, 200, "{read}");
            let version: usize = read["messages"][1]["content"].as_str().unwrap()[1..].parse().unwrap();
            // The save in flight at the kill may have landed too.
            assert!(version == *last || version == last + 1, "writer {writer}: acknowledged {last}, found {version}");
        }
        assert_eq!(leftovers(&data.join("conversations")), Vec::<String>::new(), "swept at start");
    }
}

#[test]
fn a_conversation_file_that_cannot_be_read_is_listed_as_damaged_and_kept() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path(), &[]);
    let folder = server.data_dir.join("conversations");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("broken.json"), "{\"id\": \"broken\", \"messa").unwrap();
    let (status, list) = server.post("/app/list_conversations", &json!({}));
    assert_eq!(status, 200);
    let broken = &list["conversations"][0];
    assert_eq!(broken["id"], "broken");
    assert!(broken["damaged"].as_str().unwrap().contains("not valid JSON"), "{list}");
    let (status, body) = server.post("/app/get_conversation", &json!({"id": "broken"}));
    assert_eq!(status, 500, "a damaged file is the server's problem, not a missing one: {body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("broken.json"), "{body}");
    assert!(folder.join("broken.json").exists());
}

#[test]
fn a_header_sent_one_byte_a_second_is_cut_off() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path(), &[]);
    let mut drip = TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    drip.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let started = Instant::now();
    let header = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".repeat(10);
    for byte in header.iter() {
        if drip.write_all(&[*byte]).is_err() {
            break;
        }
        // A closed connection reads as end of file (or a reset).
        match drip.read(&mut [0u8; 256]) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break,
        }
        std::thread::sleep(Duration::from_millis(800));
        assert!(started.elapsed() < Duration::from_secs(30), "the drip was never cut off");
    }
    let cut_after = started.elapsed();
    assert!(cut_after < Duration::from_secs(15), "cut off after {cut_after:?}");
    assert!(cut_after >= Duration::from_secs(5), "cut off suspiciously early: {cut_after:?}");
}

/// Raises this process's open-file limit to its hard limit.
fn raise_open_files() -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain calls that read and write the struct given.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    limit.rlim_cur as usize
}

#[test]
fn two_thousand_idle_connections_do_not_keep_a_request_out() {
    let limit = raise_open_files();
    assert!(limit > 2100, "this test needs 2 100 open files; the hard limit is {limit}");
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path(), &[]);
    let idle: Vec<TcpStream> =
        (0..2000).filter_map(|_| TcpStream::connect(("127.0.0.1", server.port())).ok()).collect();
    assert!(idle.len() >= 1990, "the server accepted {} of 2000", idle.len());
    let started = Instant::now();
    let (status, models) = server.get("/v1/models");
    assert_eq!(status, 200, "{models}");
    assert!(started.elapsed() < Duration::from_secs(10), "answered after {:?}", started.elapsed());
    // Connections beyond the server's cap were closed to make room.
    let mut closed = 0;
    for mut stream in idle {
        stream.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        if matches!(stream.read(&mut [0u8; 1]), Ok(0) | Err(_)) && stream.take_error().is_ok() {
            closed += 1;
        }
    }
    assert!(closed > 0, "no idle connection was closed");
}

/// A stream asking for far more tokens than the context holds (and one
/// asking for 2^64 − 1) neither starves a short request nor breaks
/// admission: the short one gets its first token within the round under
/// way when it arrives and the next (its prompt is tokenized beside them,
/// which may take one more), counted in the greedy streams' own tokens,
/// and ends first.
#[test]
fn greedy_requests_do_not_keep_a_short_one_waiting() {
    use std::sync::Mutex;
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path(), &["--ctx", "1024"]);
    let chat = |max_tokens: u64| {
        json!({
            "model": "default", "stream": true, "temperature": 0, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": "Tell me a very long story about the sea."}],
        })
    };
    assert_eq!(
        server
            .post(
                "/v1/chat/completions",
                &json!({"model": "default", "max_tokens": 1,
        "messages": [{"role": "user", "content": "Hi"}]})
            )
            .0,
        200,
        "the model loads first"
    );
    let short_done = std::sync::OnceLock::new();
    // When each greedy stream's tokens arrived.
    let arrivals: [Mutex<Vec<Instant>>; 2] = Default::default();
    let (greedy_done_before_short, sent, first) = std::thread::scope(|scope| {
        let greedy: Vec<_> = [100_000, u64::MAX]
            .into_iter()
            .zip(&arrivals)
            .map(|(max_tokens, arrived)| {
                let (server, short_done, body) = (&server, &short_done, chat(max_tokens));
                scope.spawn(move || {
                    let (status, payloads) = server.stream("/v1/chat/completions", &body, |_, payload| {
                        if payload.contains("\"content\"") {
                            arrived.lock().unwrap().push(Instant::now());
                        }
                        true
                    });
                    assert_eq!(status, 200);
                    assert_eq!(payloads.last().map(String::as_str), Some("[DONE]"), "{payloads:?}");
                    let ends: Vec<&String> =
                        payloads.iter().filter(|p| p.contains("\"finish_reason\":\"length\"")).collect();
                    assert_eq!(ends.len(), 1, "ended by the context: {:?}", payloads.last());
                    short_done.get().is_none()
                })
            })
            .collect();
        // Both greedy streams are decoding by now.
        std::thread::sleep(Duration::from_millis(1500));
        let short = json!({"model_id": "default", "max_tokens": 4, "sampling": {"temperature": 0},
            "messages": [{"role": "user", "content": "Say hi."}]});
        let (sent, mut first) = (Instant::now(), None);
        let (status, payloads) = server.stream("/app/chat", &short, |_, payload| {
            if first.is_none() && payload.contains("\"type\":\"token\"") {
                first = Some(Instant::now());
            }
            true
        });
        assert_eq!(status, 200);
        let done: Value = serde_json::from_str(payloads.last().unwrap()).unwrap();
        assert_eq!(done["type"], "done", "{payloads:?}");
        assert!(done["stats"]["decoded_together"].as_u64().unwrap() >= 2, "{done}");
        short_done.set(()).unwrap();
        let done_before: Vec<bool> = greedy.into_iter().map(|h| h.join().unwrap()).collect();
        (done_before, sent, first.expect("the short reply streamed a token"))
    });
    assert_eq!(greedy_done_before_short, vec![false, false], "the short request waited for the greedy ones");
    for arrived in &arrivals {
        let rounds = arrived.lock().unwrap().iter().filter(|&&at| at > sent && at <= first).count();
        eprintln!("a greedy stream decoded {rounds} tokens before the short reply's first");
        assert!(rounds <= 3, "{rounds} rounds of a greedy stream passed before the short one's first token");
    }
}

#[test]
fn a_prompt_far_beyond_the_context_is_refused_untokenized() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path(), &["--ctx", "256"]);
    let huge = "lighthouse ".repeat(180_000);
    let (status, body) = server.post(
        "/v1/chat/completions",
        &json!({"model": "default", "messages": [{"role": "user", "content": huge}], "max_tokens": 4}),
    );
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("at least") && message.contains("context length"), "{message}");
}

/// A voice prompt of the longest length used, as a 48 kHz stereo 32-bit
/// WAV sent as base64, is taken (cut to 60 s with a notice), not refused
/// by the body limit every other route keeps.
#[test]
fn a_long_voice_prompt_in_studio_quality_uploads() {
    use base64::Engine;
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path(), &[]);
    let (rate, channels, seconds) = (48_000u32, 2u16, 61u32);
    let mut wav = Vec::new();
    {
        let spec = hound::WavSpec {
            channels,
            sample_rate: rate,
            bits_per_sample: 32,
            sample_format: hound::SampleFormat::Float,
        };
        let mut writer = hound::WavWriter::new(std::io::Cursor::new(&mut wav), spec).unwrap();
        for i in 0..rate * seconds {
            let sample = (i as f32 * 440.0 * std::f32::consts::TAU / rate as f32).sin() * 0.3;
            for _ in 0..channels {
                writer.write_sample(sample).unwrap();
            }
        }
        writer.finalize().unwrap();
    }
    assert!(wav.len() > 23_000_000, "{} bytes", wav.len());
    let upload = json!({"name": "Studio", "file_base64": base64::engine::general_purpose::STANDARD.encode(&wav),
                        "file_name": "studio.wav"});
    let (status, voice) = server.post("/app/add_voice", &upload);
    assert_eq!(status, 200, "{voice}");
    assert!(voice["notice"].as_str().unwrap_or_default().contains("only its first 60 s"), "{voice}");
    // Other routes keep their 2 MB: a body is refused once past it (this
    // one sends a little more than that of the 3 MB it announces).
    let mut stream = TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let request = format!(
        "POST /app/list_models HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nCookie: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        server.port(),
        server.session_cookie(),
        3 << 20
    );
    stream.write_all(request.as_bytes()).unwrap();
    stream.write_all(&vec![b' '; (2 << 20) + 4096]).unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head[9..12], b"413", "{}", String::from_utf8_lossy(&head));
}
