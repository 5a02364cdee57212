//! Downloading from a hub-shaped local server: progress, resume after an
//! interruption, corrupted files, refused access, cancellation, and the
//! same through `cake serve` and `cake pull`.

mod common;

use cake::library::catalog::{Catalog, ModelStatus};
use cake::library::download::{DownloadError, Downloader};
use common::fake_hub::{Behaviour, FakeHub, COMMIT};
use common::fixture;
use serde_json::{json, Value};
use std::path::Path;

const REPO: &str = "tiny-org/tiny-qwen2";
/// The fixture's llama.cpp conversion, which the safetensors repo it stands for would not hold.
const NOT_IN_REPO: &[&str] = &["model-f32.gguf"];

fn hub(behaviour: Behaviour) -> FakeHub {
    FakeHub::start_repos(&[("*", &fixture("tiny/qwen2"), NOT_IN_REPO)], behaviour)
}

/// `cake serve` with its data and Hugging Face cache under `root`, asking `hub`.
fn serve_with(hub: &FakeHub, root: &Path) -> common::server::Server {
    std::fs::create_dir_all(root.join("data")).unwrap();
    common::server::Server::start_with_env(&root.join("data"), &root.join("hf"), &[], &[("HF_ENDPOINT", &hub.endpoint)])
}

fn blobs(cache: &Path) -> Vec<String> {
    std::fs::read_dir(cache.join("models--tiny-org--tiny-qwen2/blobs"))
        .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

#[test]
fn download_reports_progress_and_lands_in_the_hf_cache_layout() {
    let hub = hub(Behaviour::default());
    let cache = tempfile::tempdir().unwrap();
    let downloader = Downloader::new(cache.path().to_path_buf(), &hub.endpoint, None);
    let mut events = Vec::new();
    let snapshot = downloader
        .download(REPO, &mut |p| {
            events.push(p.clone());
            true
        })
        .unwrap();
    assert_eq!(snapshot, cache.path().join(format!("models--tiny-org--tiny-qwen2/snapshots/{COMMIT}")));
    let refs = std::fs::read_to_string(cache.path().join("models--tiny-org--tiny-qwen2/refs/main")).unwrap();
    assert_eq!(refs.trim(), COMMIT);
    assert!(!events.is_empty());
    let last = events.last().unwrap();
    assert_eq!(last.downloaded_bytes, last.total_bytes);
    assert!(events.windows(2).all(|w| w[0].downloaded_bytes <= w[1].downloaded_bytes));
    assert!(snapshot.join("model.safetensors").is_symlink());
    // Only what the engine needs: no reference.json, no training leftovers.
    assert!(!snapshot.join("reference.json").exists());

    let catalog = Catalog::new(cache.path().join("data"), cache.path().to_path_buf());
    let entry = catalog.find(&format!("hf:{REPO}")).unwrap();
    assert_eq!(entry.status, ModelStatus::Complete, "{:?}", entry.problem);
    assert_eq!(entry.architecture.as_deref(), Some("qwen2"));
}

#[test]
fn interrupted_download_resumes_where_it_stopped() {
    let hub = hub(Behaviour { cut_weights_after: Some(40_000), ..Default::default() });
    let cache = tempfile::tempdir().unwrap();
    let downloader = Downloader::new(cache.path().to_path_buf(), &hub.endpoint, None);
    let first = downloader.download(REPO, &mut |_| true);
    let message = format!("{:#}", first.unwrap_err());
    assert!(message.contains("connection broke"), "{message}");
    assert!(blobs(cache.path()).iter().any(|b| b.ends_with(".incomplete")));

    downloader.download(REPO, &mut |_| true).unwrap();
    let ranges = hub.weight_ranges();
    assert_eq!(ranges.len(), 2, "{ranges:?}");
    assert_eq!(ranges[0], None);
    let resumed_from: usize =
        ranges[1].as_deref().unwrap().trim_start_matches("bytes=").trim_end_matches('-').parse().unwrap();
    assert!(resumed_from >= 36_000 && resumed_from < hub.weights_len(), "resumed from {resumed_from}");
    assert!(!blobs(cache.path()).iter().any(|b| b.ends_with(".incomplete")));
}

#[test]
fn corrupted_file_is_detected_deleted_and_not_used() {
    let hub = hub(Behaviour { corrupt_weights: true, ..Default::default() });
    let cache = tempfile::tempdir().unwrap();
    let downloader = Downloader::new(cache.path().to_path_buf(), &hub.endpoint, None);
    let message = format!("{:#}", downloader.download(REPO, &mut |_| true).unwrap_err());
    assert!(message.contains("model.safetensors is corrupted") && message.contains("SHA-256"), "{message}");
    let sha_blob = |b: &String| b.len() == 64 || b.ends_with(".incomplete") && b.len() == 64 + 11;
    assert!(!blobs(cache.path()).iter().any(sha_blob), "{:?}", blobs(cache.path()));
    let catalog = Catalog::new(cache.path().join("data"), cache.path().to_path_buf());
    assert!(catalog.find(&format!("hf:{REPO}")).is_err(), "a corrupted download must not appear as a model");

    hub.set_behaviour(Behaviour::default());
    downloader.download(REPO, &mut |_| true).unwrap();
}

#[test]
fn refused_access_says_what_to_do() {
    for code in [401, 403] {
        let hub = hub(Behaviour { refuse_with: Some(code), ..Default::default() });
        let cache = tempfile::tempdir().unwrap();
        let downloader = Downloader::new(cache.path().to_path_buf(), &hub.endpoint, None);
        let message = format!("{:#}", downloader.download(REPO, &mut |_| true).unwrap_err());
        assert!(message.contains("refused") && message.contains("HF_TOKEN") && message.contains(REPO), "{message}");
    }
}

#[test]
fn cancelled_download_keeps_its_part_for_later() {
    let hub = hub(Behaviour { slow_ms: 5, ..Default::default() });
    let cache = tempfile::tempdir().unwrap();
    let downloader = Downloader::new(cache.path().to_path_buf(), &hub.endpoint, None);
    let mut weight_progress = 0;
    let result = downloader.download(REPO, &mut |p| {
        if p.file == "model.safetensors" {
            weight_progress += 1;
        }
        weight_progress < 2
    });
    assert!(matches!(result, Err(DownloadError::Cancelled)));
    assert!(blobs(cache.path()).iter().any(|b| b.ends_with(".incomplete")));
    downloader.download(REPO, &mut |_| true).unwrap();
    assert!(hub.weight_ranges()[1].is_some(), "the second run resumed");
}

#[test]
fn serve_streams_download_progress_then_the_model() {
    let hub = hub(Behaviour::default());
    let root = tempfile::tempdir().unwrap();
    let server = serve_with(&hub, root.path());
    let (status, payloads) = server.stream("/app/download_model", &json!({"repo_id": REPO}), |_, _| true);
    assert_eq!(status, 200);
    let events: Vec<Value> = payloads.iter().map(|p| serde_json::from_str(p).unwrap()).collect();
    assert!(events.iter().any(|e| e["type"] == "progress" && e["total_bytes"].as_u64().unwrap() > 0));
    let done = events.last().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["model"]["id"], format!("hf:{REPO}"));
    let (status, reply) = server.post(
        "/v1/chat/completions",
        &json!({"model": format!("hf:{REPO}"), "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}),
    );
    assert_eq!(status, 200, "{reply}");
}

#[test]
fn cake_pull_list_and_rm() {
    let hub = hub(Behaviour::default());
    let root = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_cake"))
            .args(args)
            .env("HF_ENDPOINT", &hub.endpoint)
            .env("HF_HUB_CACHE", root.path().join("hf"))
            .env("CAKE_DATA_DIR", root.path().join("data"))
            .output()
            .unwrap()
    };
    let pulled = run(&["pull", REPO]);
    assert!(pulled.status.success(), "{}", String::from_utf8_lossy(&pulled.stderr));
    let listed = run(&["list", "--json"]);
    let models: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(models[0]["id"], format!("hf:{REPO}"));
    assert_eq!(models[0]["status"], "complete");
    let refused = run(&["rm", REPO]);
    assert!(!refused.status.success(), "rm without a terminal needs --yes");
    let removed = run(&["rm", REPO, "--yes"]);
    assert!(removed.status.success(), "{}", String::from_utf8_lossy(&removed.stderr));
    assert!(!root.path().join("hf/models--tiny-org--tiny-qwen2").exists());
}

#[test]
fn a_vibevoice_download_fetches_the_tokenizer_it_lacks_from_its_language_model() {
    let fixture = common::fixture("tiny/vibevoice");
    let tokenizer_files: &[&str] = &[
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.json",
        "merges.txt",
        "special_tokens_map.json",
        "added_tokens.json",
    ];
    let hub = common::fake_hub::FakeHub::start_repos(
        &[("microsoft/VibeVoice-1.5B", &fixture, tokenizer_files), ("Qwen/Qwen2.5-1.5B", &fixture, &[])],
        Behaviour::default(),
    );
    let cache = tempfile::tempdir().unwrap();
    let downloader = Downloader::new(cache.path().to_path_buf(), &hub.endpoint, None);
    let snapshot = downloader.download("microsoft/VibeVoice-1.5B", &mut |_| true).unwrap();
    assert!(!snapshot.join("tokenizer.json").exists(), "the checkpoint itself ships no tokenizer");
    assert!(snapshot.join("preprocessor_config.json").exists());
    // Only the tokenizer of the language model was fetched, into the shared cache.
    let qwen = cache.path().join(format!("models--Qwen--Qwen2.5-1.5B/snapshots/{COMMIT}"));
    assert!(qwen.join("tokenizer.json").exists());
    assert!(!qwen.join("model.safetensors").exists(), "not the language model's weights");

    let catalog = Catalog::new(cache.path().join("data"), cache.path().to_path_buf());
    let entry = catalog.find("hf:microsoft/VibeVoice-1.5B").unwrap();
    assert_eq!(entry.status, ModelStatus::Complete, "{:?}", entry.problem);
    assert_eq!(entry.architecture.as_deref(), Some("vibevoice"));
    assert_eq!(entry.kind, cake::library::catalog::ModelKind::Speech);
    // Without that tokenizer in the cache the model is incomplete, and says what to add.
    std::fs::remove_dir_all(cache.path().join("models--Qwen--Qwen2.5-1.5B")).unwrap();
    let entry = catalog.find("hf:microsoft/VibeVoice-1.5B").unwrap();
    assert_eq!(entry.status, ModelStatus::Incomplete);
    assert!(entry.problem.as_deref().unwrap().contains("Qwen/Qwen2.5-1.5B's tokenizer.json"), "{:?}", entry.problem);
}

/// An imported VibeVoice folder without its tokenizer is listed as
/// incomplete; `fetch_speech_tokenizer` (the Speech screen's one click)
/// downloads only that tokenizer, and the model is complete.
#[test]
fn an_imported_vibevoice_folder_gets_its_tokenizer_in_one_command() {
    let fixture = common::fixture("tiny/vibevoice");
    let hub = FakeHub::start_repos(&[("Qwen/Qwen2.5-1.5B", &fixture, &[])], Behaviour::default());
    let root = tempfile::tempdir().unwrap();
    let folder = root.path().join("VibeVoice-1.5B");
    std::fs::create_dir_all(&folder).unwrap();
    for entry in std::fs::read_dir(&fixture).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let tokenizer =
            ["tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"].contains(&name.as_str());
        if !tokenizer && !name.starts_with("reference") {
            std::fs::copy(&path, folder.join(&name)).unwrap();
        }
    }
    let server = serve_with(&hub, root.path());
    let (status, entry) = server.post("/app/import_model", &json!({"path": folder}));
    assert_eq!(status, 200, "{entry}");
    assert_eq!((entry["kind"].as_str(), entry["status"].as_str()), (Some("speech"), Some("incomplete")), "{entry}");

    let (status, payloads) = server.stream("/app/fetch_speech_tokenizer", &json!({"id": entry["id"]}), |_, _| true);
    assert_eq!(status, 200);
    let events: Vec<Value> = payloads.iter().map(|p| serde_json::from_str(p).unwrap()).collect();
    assert!(events.iter().any(|e| e["type"] == "progress"), "{events:?}");
    let done = events.last().unwrap();
    assert_eq!((done["type"].as_str(), done["model"]["status"].as_str()), (Some("done"), Some("complete")), "{done}");
    let qwen = root.path().join(format!("hf/models--Qwen--Qwen2.5-1.5B/snapshots/{COMMIT}"));
    assert!(qwen.join("tokenizer.json").exists() && !qwen.join("model.safetensors").exists());
    // Asked again for a model that needs nothing, it says so.
    let (status, reply) = server.post("/app/fetch_speech_tokenizer", &json!({"id": entry["id"]}));
    assert_eq!(status, 400, "{reply}");
    assert!(reply["error"]["message"].as_str().unwrap().contains("needs no tokenizer download"), "{reply}");
}

/// Finding a GGUF model on the hub: a search lists repositories, a
/// repository its GGUF files with sizes and quantizations, and one file at a
/// time downloads into the cache, where the library lists each as a model of
/// its own; deleting one keeps the repository's other file.
#[test]
fn gguf_models_are_found_listed_downloaded_and_deleted_one_file_at_a_time() {
    use cake::library::hub::HubConnection;

    const GGUF_REPO: &str = "tiny-org/Tiny-MoE-GGUF";
    let folder = fixture("tiny/qwen3_moe_sparse");
    let not_gguf = [
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ];
    let qwen2 = fixture("tiny/qwen2");
    let hub =
        FakeHub::start_repos(&[(GGUF_REPO, &folder, &not_gguf), (REPO, &qwen2, NOT_IN_REPO)], Behaviour::default());
    let connection = HubConnection::new(&hub.endpoint, None);

    let found = connection.search_models("  moe ").unwrap();
    assert_eq!(found.iter().map(|m| m.repo_id.as_str()).collect::<Vec<_>>(), [GGUF_REPO]);
    assert!(connection.search_models("   ").is_err(), "an empty search is refused");
    let listed = connection.gguf_files(GGUF_REPO).unwrap();
    let size = |name: &str| std::fs::metadata(folder.join(name)).unwrap().len();
    let rows: Vec<_> =
        listed.files.iter().map(|f| (f.name.as_str(), f.size_bytes, f.quantization.as_deref())).collect();
    assert_eq!(
        rows,
        [
            ("model-bf16.gguf", size("model-bf16.gguf"), Some("BF16")),
            ("model-f32.gguf", size("model-f32.gguf"), Some("F32")),
            ("model-q8_0.gguf", size("model-q8_0.gguf"), Some("Q8_0")),
        ]
    );
    assert_eq!(connection.gguf_files(REPO).unwrap().files, [], "a safetensors repo has no GGUF files");
    let missing = connection.gguf_files("tiny-org/no-such-repo").unwrap_err();
    assert!(format!("{missing:#}").contains("HTTP 404"), "{missing:#}");

    let cache = tempfile::tempdir().unwrap();
    let downloader = Downloader::new(cache.path().to_path_buf(), &hub.endpoint, None);
    for file in ["model-q8_0.gguf", "model-bf16.gguf"] {
        let mut last = None;
        let path = downloader
            .download_gguf(GGUF_REPO, file, &mut |p| {
                last = Some(p.clone());
                true
            })
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(folder.join(file)).unwrap());
        let last = last.expect("progress was reported");
        assert_eq!((last.downloaded_bytes, last.total_bytes), (size(file), size(file)));
    }
    for bad in ["../escape.gguf", "missing.gguf", "model.safetensors"] {
        assert!(downloader.download_gguf(GGUF_REPO, bad, &mut |_| true).is_err(), "{bad}");
    }

    let catalog = Catalog::new(cache.path().join("data"), cache.path().to_path_buf());
    let q8 = format!("hf:{GGUF_REPO}/model-q8_0.gguf");
    let bf16 = format!("hf:{GGUF_REPO}/model-bf16.gguf");
    let entry = catalog.find(&q8).unwrap();
    assert_eq!(entry.status, ModelStatus::Complete, "{:?}", entry.problem);
    assert_eq!((entry.name.as_str(), entry.size_bytes), ("model-q8_0", size("model-q8_0.gguf")));
    assert_eq!(entry.quantization.as_deref(), Some("Q8_0"));
    catalog.delete(&q8).unwrap();
    assert!(catalog.find(&q8).is_err());
    assert_eq!(catalog.find(&bf16).unwrap().status, ModelStatus::Complete, "the other file stays");
    catalog.delete(&bf16).unwrap();
    assert!(!cache.path().join("models--tiny-org--Tiny-MoE-GGUF").exists(), "the last file takes the repo with it");
}

/// A vision model published as llama.cpp converts one: the text model's
/// GGUF and the picture reader's mmproj GGUF. The picture reader is offered
/// with the model, not as a model; it comes with the model's download,
/// and the library lists one model that reads pictures; on its own it is
/// refused as a model, with the reason.
#[test]
fn a_gguf_vision_model_comes_with_its_picture_reader() {
    use cake::library::hub::HubConnection;

    const REPO: &str = "tiny-org/tiny-gemma3-vision-GGUF";
    let folder = fixture("tiny/gemma3_vision");
    let beside: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.ends_with(".gguf"))
        .collect();
    let beside: Vec<&str> = beside.iter().map(String::as_str).collect();
    let hub = FakeHub::start_repos(&[(REPO, &folder, &beside)], Behaviour::default());
    let listed = HubConnection::new(&hub.endpoint, None).gguf_files(REPO).unwrap();
    assert_eq!(listed.files.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["model-f32.gguf"]);
    let reader = listed.picture_reader.expect("the mmproj file is offered as the picture reader");
    assert_eq!(reader.name, "mmproj-f32.gguf");
    assert_eq!(reader.size_bytes, std::fs::metadata(folder.join("mmproj-f32.gguf")).unwrap().len());

    let cache = tempfile::tempdir().unwrap();
    let downloader = Downloader::new(cache.path().to_path_buf(), &hub.endpoint, None);
    let refused = downloader.download_gguf(REPO, "mmproj-f32.gguf", &mut |_| true).unwrap_err();
    assert!(format!("{refused}").contains("no model file mmproj-f32.gguf"), "{refused}");
    let model = downloader.download_gguf(REPO, "model-f32.gguf", &mut |_| true).unwrap();
    let reader = model.with_file_name("mmproj-f32.gguf");
    assert_eq!(std::fs::read(&reader).unwrap(), std::fs::read(folder.join("mmproj-f32.gguf")).unwrap());

    let catalog = Catalog::new(cache.path().join("data"), cache.path().to_path_buf());
    let listed = catalog.list().unwrap();
    let ids: Vec<&str> = listed.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, [format!("hf:{REPO}/model-f32.gguf")], "the picture reader is not a model of its own");
    assert!(listed[0].reads_pictures && listed[0].status == ModelStatus::Complete, "{:?}", listed[0].problem);
    let alone = catalog.import(&reader).unwrap_err();
    assert!(format!("{alone:#}").contains("a picture reader (mmproj) for a vision model"), "{alone:#}");

    // Without its picture reader the model reads text only.
    let copy = cache.path().join("text-only.gguf");
    std::fs::copy(&model, &copy).unwrap();
    assert!(!catalog.import(&copy).unwrap().reads_pictures);
    // A picture reader put beside it later is seen at once.
    std::fs::copy(folder.join("mmproj-f32.gguf"), cache.path().join("mmproj-f32.gguf")).unwrap();
    let imported: Vec<_> = catalog.list().unwrap().into_iter().filter(|e| !e.id.starts_with("hf:")).collect();
    assert!(imported.len() == 1 && imported[0].reads_pictures, "{imported:?}");
    catalog.delete(&format!("hf:{REPO}/model-f32.gguf")).unwrap();
    assert!(!reader.exists(), "the picture reader goes with the repository's last model");
}
