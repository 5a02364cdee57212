//! The one list of models a person can pick from.
//!
//! Three places feed it: the embedded default model in the app's data
//! folder, the Hugging Face cache shared with other tools, and files or
//! folders the person imported (remembered in `imports.json`). Each entry is
//! inspected from headers only (never the weights) to show its architecture,
//! size, dtype and whether it is usable.

use crate::files::hf_cache;
use crate::files::paths;
use crate::formats::gguf::GgufFile;
use crate::formats::safetensors::SafetensorsHeader;
use crate::models::config::Architecture;
use crate::models::families;
use crate::models::sources::tile_cache::TileCache;
use crate::models::sources::torch_checkpoint::TorchCheckpoint;
use crate::models::vision::mmproj::{self, is_mmproj_name};
use crate::models::vision::VisionModel;
use crate::models::weights::WeightStore;
use crate::speech::family::{SpeechFamily, VoiceKind};
use crate::speech::vibevoice::tokenizer_source::tokenizer_dir;
use crate::text::embedding::EmbeddingSpec;
use crate::text::sampling::SamplingOverrides;
use crate::text::tokenizer::TextTokenizer;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelSource {
    Default,
    HfCache,
    Imported,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelStatus {
    Complete,
    Incomplete,
    NotAModel,
    /// A model in a form the engine cannot run (e.g. a quantization method).
    Unsupported,
}

/// One row of the model list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelEntry {
    /// Stable id: `default`, `hf:org/name` (a model folder), `hf:org/name/file.gguf`
    /// (one GGUF file of a repository) or `file:/abs/path`.
    pub id: String,
    pub name: String,
    pub source: ModelSource,
    pub path: PathBuf,
    /// What the model does.
    pub kind: ModelKind,
    /// What a speech model speaks in (`None` for text models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<VoiceKind>,
    pub architecture: Option<String>,
    pub parameters: Option<u64>,
    pub dtype: Option<String>,
    /// How the weights are quantized: a GGUF type ("Q4_1") or a
    /// safetensors method ("fp8", "gptq"); `None` for plain floats.
    #[serde(default)]
    pub quantization: Option<String>,
    pub size_bytes: u64,
    pub status: ModelStatus,
    /// Why the model is incomplete or not a model.
    pub problem: Option<String>,
    /// The sampling its makers recommend (a folder's `generation_config.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_defaults: Option<SamplingOverrides>,
    /// A text model that reads pictures too (its vision tower is there).
    #[serde(default)]
    pub reads_pictures: bool,
}

/// What a model does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// Chat and completion.
    Text,
    /// Text to speech.
    Speech,
    /// Text to vectors (an embedding model such as Qwen3-Embedding).
    Embedding,
}

impl ModelKind {
    /// What a model of this kind is, in a sentence ("… is a chat model").
    pub fn described(self) -> &'static str {
        match self {
            Self::Text => "a chat model",
            Self::Speech => "a speech model",
            Self::Embedding => "an embedding model",
        }
    }
}

/// What inspecting a model's files found.
#[derive(Clone)]
struct Inspection {
    kind: ModelKind,
    voice: Option<VoiceKind>,
    architecture: Option<String>,
    parameters: Option<u64>,
    dtype: Option<String>,
    quantization: Option<String>,
    status: ModelStatus,
    problem: Option<String>,
    sampling_defaults: Option<SamplingOverrides>,
    reads_pictures: bool,
}

impl Inspection {
    fn not_a_model(problem: String) -> Self {
        Self {
            kind: ModelKind::Text,
            voice: None,
            architecture: None,
            parameters: None,
            dtype: None,
            quantization: None,
            status: ModelStatus::NotAModel,
            problem: Some(problem),
            sampling_defaults: None,
            reads_pictures: false,
        }
    }
}

/// The model list, rooted at the app's data folder and the HF cache (and,
/// for the default model, the folders an installed package keeps it in).
#[derive(Clone)]
pub struct Catalog {
    data_dir: PathBuf,
    hf_cache: PathBuf,
    packaged_model_dirs: Vec<PathBuf>,
}

impl Default for Catalog {
    fn default() -> Self {
        Self::new(paths::data_dir(), hf_cache::cache_dir()).with_packaged_models(paths::packaged_model_dirs())
    }
}

impl Catalog {
    /// A catalog of `data_dir` and `hf_cache` alone.
    pub fn new(data_dir: PathBuf, hf_cache: PathBuf) -> Self {
        Self { data_dir, hf_cache, packaged_model_dirs: Vec::new() }
    }

    /// Also finds the default model in these read-only folders.
    pub fn with_packaged_models(self, packaged_model_dirs: Vec<PathBuf>) -> Self {
        Self { packaged_model_dirs, ..self }
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn hf_cache(&self) -> &Path {
        &self.hf_cache
    }

    fn default_model_path(&self) -> Option<PathBuf> {
        paths::find_default_model(&self.data_dir, &self.packaged_model_dirs)
    }

    fn imports_file(&self) -> PathBuf {
        self.data_dir.join("imports.json")
    }

    /// Every model the app knows of, default first.
    pub fn list(&self) -> Result<Vec<ModelEntry>> {
        Ok(self.candidates()?.into_iter().map(|c| c.inspect(&self.hf_cache)).collect())
    }

    /// The entry with `id` (only that model's files are inspected).
    /// The model with id `id`, or else the one model named `id` (the name
    /// an API client sees for an imported file, see [`Catalog::api_name`]).
    pub fn find(&self, id: &str) -> Result<ModelEntry> {
        let mut candidates = self.candidates()?;
        let named: Vec<usize> = (0..candidates.len()).filter(|&i| candidates[i].name == id).collect();
        let by_name = if named.len() == 1 { Some(named[0]) } else { None };
        let found = candidates.iter().position(|c| c.id == id).or(by_name);
        let index = found.with_context(|| format!("no model with id `{id}` in the library"))?;
        Ok(candidates.swap_remove(index).inspect(&self.hf_cache))
    }

    /// What an API client types for `entry`, given all of `entries`: its id,
    /// except that an imported file is named by its file name when no other
    /// model has that name (a path is no name to type).
    pub fn api_name(entry: &ModelEntry, entries: &[ModelEntry]) -> String {
        let unique = entries.iter().filter(|e| e.name == entry.name || e.id == entry.name).count() == 1;
        if entry.source == ModelSource::Imported && unique {
            entry.name.clone()
        } else {
            entry.id.clone()
        }
    }

    /// Where every known model lives, without opening any of them.
    fn candidates(&self) -> Result<Vec<Candidate>> {
        let mut found = Vec::new();
        if let Some(default) = self.default_model_path() {
            found.push(Candidate {
                id: "default".into(),
                name: "SmolLM2 135M Instruct".into(),
                source: ModelSource::Default,
                path: default,
                partial_download: false,
            });
        }
        found.extend(self.hf_cache_candidates()?);
        for path in self.imports()? {
            let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into());
            found.push(Candidate {
                id: format!("file:{}", path.display()),
                name,
                source: ModelSource::Imported,
                path,
                partial_download: false,
            });
        }
        Ok(found)
    }

    fn hf_cache_candidates(&self) -> Result<Vec<Candidate>> {
        let Ok(dir) = std::fs::read_dir(&self.hf_cache) else {
            return Ok(Vec::new());
        };
        let mut repos: Vec<String> = dir
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("models--").map(|r| r.replacen("--", "/", 1)))
            .collect();
        repos.sort();
        let mut found = Vec::new();
        for repo in repos {
            let Some(snapshot) = hf_cache::find_snapshot(&self.hf_cache, &repo)? else {
                continue;
            };
            if !snapshot.join("config.json").exists() {
                let files = gguf_files_in(&snapshot);
                if !files.is_empty() {
                    // A repository of GGUF files: each downloaded one is a model.
                    found.extend(files.into_iter().map(|file| Candidate {
                        id: format!("hf:{repo}/{file}"),
                        name: file.rsplit('/').next().unwrap_or(&file).trim_end_matches(".gguf").to_string(),
                        source: ModelSource::HfCache,
                        path: snapshot.join(&file),
                        // Its link appears only once its blob is whole.
                        partial_download: false,
                    }));
                    continue;
                }
            }
            found.push(Candidate {
                id: format!("hf:{repo}"),
                partial_download: hf_cache::has_incomplete_blobs(&self.hf_cache, &repo),
                name: repo,
                source: ModelSource::HfCache,
                path: snapshot,
            });
        }
        Ok(found)
    }

    fn imports(&self) -> Result<Vec<PathBuf>> {
        Ok(crate::files::storage::read_json(&self.imports_file())?.unwrap_or_default())
    }

    /// Changes the list of imported paths under its file's lock, so imports
    /// made at the same time all stay listed.
    fn update_imports(&self, change: impl FnOnce(&mut Vec<PathBuf>)) -> Result<()> {
        crate::files::storage::update_json(&self.imports_file(), |imports: &mut Vec<PathBuf>| {
            change(imports);
            Ok(())
        })
        .with_context(|| format!("{}: cannot update the list of imported models", self.imports_file().display()))
    }

    /// Adds a GGUF file or model folder to the list; refuses what is not a
    /// model or cannot run (e.g. an unsupported quantization).
    pub fn import(&self, path: &Path) -> Result<ModelEntry> {
        let path =
            std::fs::canonicalize(path).with_context(|| format!("{}: no such file or folder", path.display()))?;
        let inspection = inspect(&path, &self.hf_cache);
        match inspection.status {
            ModelStatus::NotAModel => {
                bail!("{} is not a model: {}", path.display(), inspection.problem.unwrap_or_default())
            }
            ModelStatus::Unsupported => {
                bail!("{} cannot run here: {}", path.display(), inspection.problem.unwrap_or_default())
            }
            ModelStatus::Complete | ModelStatus::Incomplete => {}
        }
        self.update_imports(|imports| {
            if !imports.contains(&path) {
                imports.push(path.clone());
            }
        })?;
        self.find(&format!("file:{}", path.display()))
    }

    /// Removes a model: deletes the app's copy of the default model or the
    /// model's folder in the Hugging Face cache; forgets an imported one
    /// (its files stay where they are).
    pub fn delete(&self, id: &str) -> Result<()> {
        let entry = self.find(id)?;
        match entry.source {
            ModelSource::Default => {
                std::fs::remove_file(&entry.path).with_context(|| format!("cannot delete {}", entry.path.display()))?
            }
            ModelSource::HfCache => {
                let in_repo = id.trim_start_matches("hf:");
                let repo = in_repo.splitn(3, '/').take(2).collect::<Vec<_>>().join("/");
                let dir = self.hf_cache.join(format!("models--{}", repo.replace('/', "--")));
                let snapshot = hf_cache::find_snapshot(&self.hf_cache, &repo)?;
                let others_left = entry.path.is_file() && snapshot.is_some_and(|s| gguf_files_in(&s).len() > 1);
                if others_left {
                    // One GGUF file of several: its blob and its link go.
                    let blob = std::fs::canonicalize(&entry.path)
                        .with_context(|| format!("cannot find the file of {}", entry.path.display()))?;
                    std::fs::remove_file(&blob).with_context(|| format!("cannot delete {}", blob.display()))?;
                    std::fs::remove_file(&entry.path)
                        .with_context(|| format!("cannot delete {}", entry.path.display()))?;
                } else {
                    std::fs::remove_dir_all(&dir).with_context(|| format!("cannot delete {}", dir.display()))?;
                }
            }
            ModelSource::Imported => {
                self.update_imports(|imports| imports.retain(|p| *p != entry.path))?;
            }
        }
        TileCache::drop_stale();
        Ok(())
    }
}

/// A model's place in the library, before its files are read.
struct Candidate {
    id: String,
    name: String,
    source: ModelSource,
    path: PathBuf,
    /// A download of it was interrupted.
    partial_download: bool,
}

impl Candidate {
    /// Reads the model's headers to fill in its row.
    fn inspect(self, hf_cache: &Path) -> ModelEntry {
        let mut inspection = inspect(&self.path, hf_cache);
        if self.partial_download && inspection.status == ModelStatus::Complete {
            inspection.status = ModelStatus::Incomplete;
            inspection.problem = Some("a download of this model did not finish".into());
        }
        ModelEntry {
            size_bytes: disk_size(&self.path),
            id: self.id,
            name: self.name,
            source: self.source,
            path: self.path,
            kind: inspection.kind,
            voice: inspection.voice,
            architecture: inspection.architecture,
            parameters: inspection.parameters,
            dtype: inspection.dtype,
            quantization: inspection.quantization,
            status: inspection.status,
            problem: inspection.problem,
            sampling_defaults: inspection.sampling_defaults,
            reads_pictures: inspection.reads_pictures,
        }
    }
}

/// The sampling a model folder's `generation_config.json` recommends, if it
/// recommends any (an unreadable file recommends nothing).
fn recommended_sampling(dir: &Path) -> Option<SamplingOverrides> {
    let text = std::fs::read_to_string(dir.join("generation_config.json")).ok()?;
    let config: serde_json::Value = serde_json::from_str(&text).ok()?;
    let overrides = SamplingOverrides::from_generation_config(&config);
    (overrides != SamplingOverrides::default()).then_some(overrides)
}

/// The model GGUF files of a snapshot folder and its subfolders (one
/// level), as paths inside it, sorted.
fn gguf_files_in(snapshot: &Path) -> Vec<String> {
    // A picture reader (mmproj) goes with the models beside it.
    let is_gguf = |path: &Path| {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        path.extension().is_some_and(|x| x.eq_ignore_ascii_case("gguf")) && !is_mmproj_name(name) && path.is_file()
    };
    let mut files = Vec::new();
    let entries = std::fs::read_dir(snapshot).into_iter().flatten().filter_map(|e| e.ok());
    for entry in entries {
        let (path, name) = (entry.path(), entry.file_name().to_string_lossy().into_owned());
        if is_gguf(&path) {
            files.push(name);
        } else if path.is_dir() {
            let inner = std::fs::read_dir(&path).into_iter().flatten().filter_map(|e| e.ok());
            files.extend(
                inner.filter(|e| is_gguf(&e.path())).map(|e| format!("{name}/{}", e.file_name().to_string_lossy())),
            );
        }
    }
    files.sort();
    files
}

/// Bytes on disk of a file, or of everything in a folder (following the HF
/// cache's symlinks to their blobs).
fn disk_size(path: &Path) -> u64 {
    if path.is_file() {
        return std::fs::metadata(path).map_or(0, |m| m.len());
    }
    std::fs::read_dir(path).map_or(0, |dir| {
        dir.filter_map(|e| e.ok())
            .map(|e| {
                let p = e.path();
                if p.is_dir() {
                    disk_size(&p)
                } else {
                    std::fs::metadata(&p).map_or(0, |m| m.len())
                }
            })
            .sum()
    })
}

/// Reads headers only to describe the model at `path`.
/// What the model at `path` is (`hf_cache`: where a VibeVoice model's tokenizer may be).
fn inspect(path: &Path, hf_cache: &Path) -> Inspection {
    let result = if path.is_dir() { inspect_folder(path, hf_cache) } else { inspect_gguf(path) };
    result.unwrap_or_else(|e| Inspection::not_a_model(format!("{e:#}")))
}

/// What identifies one version of a file: its size and modification time.
type FileStamp = (u64, Option<SystemTime>);

/// What a GGUF file's inspection depends on: the file's stamp, and the
/// stamps of the picture readers (mmproj files) beside it.
type GgufStamp = (FileStamp, Vec<(PathBuf, FileStamp)>);

/// GGUF files inspected before, with the stamp they had: a chat request
/// names its model, and parsing a header that holds a 49 152-token
/// vocabulary again for each request took 8 ms (and opening the picture
/// readers beside it as long). A changed file, or a picture reader put
/// beside it, changed or taken away, makes it inspected again.
static GGUF_INSPECTIONS: OnceLock<Mutex<BTreeMap<PathBuf, (GgufStamp, Inspection)>>> = OnceLock::new();

/// At most this many files' inspections are remembered.
const REMEMBERED_INSPECTIONS: usize = 256;

fn file_stamp(path: &Path) -> Result<FileStamp> {
    let metadata = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok((metadata.len(), metadata.modified().ok()))
}

fn inspect_gguf(path: &Path) -> Result<Inspection> {
    let readers = mmproj::files_beside(path).into_iter().filter_map(|p| file_stamp(&p).ok().map(|s| (p, s)));
    let stamp = (file_stamp(path)?, readers.collect());
    let memo = GGUF_INSPECTIONS.get_or_init(Default::default);
    // A thread that panicked while holding the lock left a whole map behind.
    let lock = || memo.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, inspection)) = lock().get(path).filter(|(seen, _)| *seen == stamp) {
        return Ok(inspection.clone());
    }
    let inspection = read_gguf_inspection(path)?;
    let mut remembered = lock();
    if remembered.len() >= REMEMBERED_INSPECTIONS {
        remembered.clear();
    }
    remembered.insert(path.to_path_buf(), (stamp, inspection.clone()));
    Ok(inspection)
}

/// Parses the GGUF header at `path` to describe its model.
fn read_gguf_inspection(path: &Path) -> Result<Inspection> {
    let file = GgufFile::open(path)?;
    if file.get_str("general.architecture") == Some("clip") {
        bail!(
            "a picture reader (mmproj) for a vision model, not a model by itself: keep it beside its model's GGUF file"
        );
    }
    let config = families::from_gguf(&file)?;
    let mut parameters = 0u64;
    let mut by_dtype: BTreeMap<String, u64> = BTreeMap::new();
    for info in file.header.tensor_infos.values() {
        let n = info.elements();
        parameters += n;
        *by_dtype.entry(info.ggml_type.name()).or_default() += n;
    }
    let dtype = most_common(by_dtype);
    let quantization = dtype.clone().filter(|d| !matches!(d.as_str(), "F32" | "F16" | "BF16"));
    let unreadable_vocabulary = TextTokenizer::check_gguf(&file).err();
    let embeds = EmbeddingSpec::of_gguf_file(&file).ok().flatten().is_some();
    Ok(Inspection {
        kind: if embeds { ModelKind::Embedding } else { ModelKind::Text },
        voice: None,
        architecture: Some(config.architecture.model_type().into()),
        parameters: Some(parameters),
        dtype,
        quantization,
        status: if unreadable_vocabulary.is_some() { ModelStatus::Unsupported } else { ModelStatus::Complete },
        problem: unreadable_vocabulary.map(|e| format!("{e:#}")),
        sampling_defaults: None,
        // A picture reader beside it that cannot serve is named when a picture is sent.
        reads_pictures: !embeds && matches!(VisionModel::mmproj_beside(path, config.hidden_size), Ok(Some(_))),
    })
}

fn inspect_folder(dir: &Path, hf_cache: &Path) -> Result<Inspection> {
    let config_path = dir.join("config.json");
    if !config_path.exists() {
        bail!("no config.json in {}", dir.display());
    }
    let text =
        std::fs::read_to_string(&config_path).with_context(|| format!("cannot read {}", config_path.display()))?;
    let speech = SpeechFamily::of_config(&text);
    let mut quantization = None;
    let mut refusal = None;
    let architecture = if let Some(family) = speech {
        family
            .check_config(&text)
            .with_context(|| format!("{}: not a usable {} config", config_path.display(), family.name()))?;
        if family == SpeechFamily::LuxTts {
            return Ok(inspect_luxtts(dir));
        }
        family.architecture().to_string()
    } else {
        let (hf, _) = crate::models::loader::folder_decoder_hf_config(&text)
            .with_context(|| format!("{}: invalid config", config_path.display()))?;
        quantization = hf.quantization_method();
        match hf.require_runnable_quantization() {
            // Still listed, with what it is and why it cannot load.
            Err(e) => {
                refusal = Some(format!("{e:#}"));
                Architecture::detect(&hf.architectures, hf.model_type.as_deref())?.model_type().to_string()
            }
            Ok(()) => families::from_hf(&hf)?.architecture.model_type().to_string(),
        }
    };
    let pooling = if speech.is_some() { Ok(None) } else { EmbeddingSpec::of_folder(dir) };
    let kind = match (speech, &pooling) {
        (Some(_), _) => ModelKind::Speech,
        (None, Ok(None)) => ModelKind::Text,
        (None, _) => ModelKind::Embedding,
    };
    if let Err(e) = pooling {
        refusal = refusal.or(Some(format!("{e:#}")));
    }
    let mut inspection = Inspection {
        kind,
        voice: speech.map(SpeechFamily::voice_kind),
        architecture: Some(architecture),
        parameters: None,
        dtype: None,
        quantization,
        status: ModelStatus::Complete,
        problem: None,
        sampling_defaults: recommended_sampling(dir),
        reads_pictures: kind == ModelKind::Text
            && serde_json::from_str(&text).is_ok_and(|config| VisionModel::reads_pictures(&config)),
    };
    let shards = match weight_files(dir) {
        Ok(shards) => shards,
        Err(e) => {
            inspection.status = ModelStatus::Incomplete;
            inspection.problem = Some(format!("{e:#}"));
            return Ok(inspection);
        }
    };
    let mut parameters = 0u64;
    let mut by_dtype: BTreeMap<String, u64> = BTreeMap::new();
    for shard in shards {
        match SafetensorsHeader::read(&shard) {
            Ok(header) => {
                for entry in header.tensors.values() {
                    let n: u64 = entry.shape.iter().map(|&d| d as u64).product();
                    parameters += n;
                    *by_dtype.entry(format!("{:?}", entry.dtype)).or_default() += n;
                }
            }
            Err(e) => {
                inspection.status = ModelStatus::Incomplete;
                inspection.problem = Some(format!("{e:#}"));
                return Ok(inspection);
            }
        }
    }
    inspection.parameters = Some(parameters);
    inspection.dtype = most_common(by_dtype);
    if let Some(refusal) = refusal {
        inspection.status = ModelStatus::Unsupported;
        inspection.problem = Some(refusal);
        return Ok(inspection);
    }
    if speech.is_some() {
        if let Err(e) = tokenizer_dir(dir, hf_cache) {
            inspection.status = ModelStatus::Incomplete;
            inspection.problem = Some(format!("{e:#}"));
        }
    } else if !dir.join("tokenizer.json").exists() {
        inspection.status = ModelStatus::Incomplete;
        inspection.problem = Some("no tokenizer.json in the model folder".into());
    }
    Ok(inspection)
}

/// The files of a LuxTTS folder beside its `config.json`, and the
/// checkpoint key its weights are kept under.
const LUXTTS_FILES: [(&str, Option<&str>); 2] = [("model.pt", Some("model")), ("vocoder/vocos.bin", None)];

/// A LuxTTS folder (its config already read): complete when its token
/// list, vocoder config and both checkpoints are there, counted from the
/// checkpoints' tensor lists.
fn inspect_luxtts(dir: &Path) -> Inspection {
    let mut inspection = Inspection {
        kind: ModelKind::Speech,
        voice: Some(VoiceKind::TranscribedPrompt),
        architecture: Some(SpeechFamily::LuxTts.architecture().to_string()),
        parameters: None,
        dtype: Some("F32".into()),
        quantization: None,
        status: ModelStatus::Complete,
        problem: None,
        sampling_defaults: None,
        reads_pictures: false,
    };
    let mut parameters = 0u64;
    let missing = ["tokens.txt", "vocoder/config.yaml"].into_iter().find(|file| !dir.join(file).is_file());
    let counted = match missing {
        Some(file) => Err(anyhow::anyhow!("no {file} in the model folder")),
        None => LUXTTS_FILES.iter().try_for_each(|&(file, key)| {
            let checkpoint = TorchCheckpoint::open(&dir.join(file), key)?;
            let shapes = checkpoint.names().filter_map(|name| checkpoint.shape(name));
            parameters += shapes.map(|shape| shape.iter().product::<usize>() as u64).sum::<u64>();
            Ok(())
        }),
    };
    match counted {
        Ok(()) => inspection.parameters = Some(parameters),
        Err(e) => {
            inspection.status = ModelStatus::Incomplete;
            inspection.problem = Some(format!("{e:#}"));
        }
    }
    inspection
}

/// The safetensors files a folder's weights live in; an error names a missing shard.
fn weight_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let index = dir.join("model.safetensors.index.json");
    if index.exists() {
        let text = std::fs::read_to_string(&index)?;
        let json: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: invalid JSON", index.display()))?;
        let mut files: Vec<String> = json["weight_map"]
            .as_object()
            .context("the index has no weight_map")?
            .values()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        files.sort();
        files.dedup();
        return files
            .into_iter()
            .map(|f| {
                let p = dir.join(&f);
                if p.exists() {
                    Ok(p)
                } else {
                    bail!("shard {f} is missing")
                }
            })
            .collect();
    }
    let single = dir.join("model.safetensors");
    if single.exists() {
        return Ok(vec![single]);
    }
    bail!("no model.safetensors in the folder")
}

fn most_common(counts: BTreeMap<String, u64>) -> Option<String> {
    counts.into_iter().max_by_key(|(_, n)| *n).map(|(name, _)| name.to_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gguf_file_is_inspected_again_once_it_changes() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny/gemma3_gguf");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.gguf");
        std::fs::copy(fixtures.join("model-q8_0.gguf"), &path).unwrap();
        let first = inspect(&path, dir.path());
        assert_eq!((first.status, first.dtype.as_deref()), (ModelStatus::Complete, Some("Q8_0")));
        assert_eq!(inspect(&path, dir.path()).dtype.as_deref(), Some("Q8_0"), "remembered");
        std::fs::copy(fixtures.join("model-f32.gguf"), &path).unwrap();
        assert_eq!(inspect(&path, dir.path()).dtype.as_deref(), Some("F32"), "another file at the same path");
        std::fs::write(&path, b"GGUF but not really").unwrap();
        assert_eq!(inspect(&path, dir.path()).status, ModelStatus::NotAModel);
    }

    #[test]
    fn a_folder_recommends_the_sampling_of_its_generation_config() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(recommended_sampling(dir.path()), None, "no file, no recommendation");
        let config = dir.path().join("generation_config.json");
        std::fs::write(&config, r#"{"eos_token_id": 2}"#).unwrap();
        assert_eq!(recommended_sampling(dir.path()), None, "a file without sampling recommends nothing");
        std::fs::write(
            &config,
            r#"{"do_sample": true, "temperature": 0.6, "top_p": 0.95, "repetition_penalty": 1.05}"#,
        )
        .unwrap();
        let recommended = recommended_sampling(dir.path()).unwrap();
        assert_eq!(
            (recommended.temperature, recommended.top_p, recommended.repeat_penalty, recommended.top_k),
            (Some(0.6), Some(0.95), Some(1.05), None)
        );
        std::fs::write(&config, "{not json").unwrap();
        assert_eq!(recommended_sampling(dir.path()), None);
    }
}
