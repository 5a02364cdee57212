//! Downloading a model from the Hugging Face hub into the shared cache.
//!
//! `hf-hub` provides the hub's API (the repo's file list, file URLs, the
//! token from `HF_TOKEN` or the token file) and the cache's `refs/`; the
//! transfer itself is done here because it must report progress, stop when
//! cancelled, resume a partial file with an HTTP range request, and check
//! every large file against its SHA-256 (the hub's `x-linked-etag`) before
//! it is used. Files land exactly where `transformers` puts them:
//! `models--org--name/blobs/<etag>` with `snapshots/<commit>/<file>` links.
//! `HF_ENDPOINT` points it at another hub (the tests' local one).

use super::hub::{HubConnection, HubUnreachable};
use crate::files::hf_cache;
use crate::models::vision::mmproj::{self, is_mmproj_name};
use anyhow::{bail, Context, Result};
use hf_hub::api::sync::{ApiBuilder, ApiError};
use hf_hub::{Cache, Repo, RepoType};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Files besides the weights that a text model needs (a vision model's
/// processor files too).
const TEXT_FILES: [&str; 9] = [
    "config.json",
    "preprocessor_config.json",
    "processor_config.json",
    "chat_template.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
];

/// Progress of a whole model download.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DownloadProgress {
    /// The file being transferred.
    pub file: String,
    pub downloaded_bytes: u64,
    pub total_bytes: u64,
    pub bytes_per_s: f64,
    pub eta_s: Option<f64>,
}

/// Why a download stopped early.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error("the download was cancelled (it resumes where it stopped next time)")]
    Cancelled,
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

/// One file to fetch, with what the hub says about it.
struct RemoteFile {
    name: String,
    url: String,
    size: u64,
    /// Content hash: SHA-256 for large (LFS) files, git's blob id otherwise.
    etag: String,
}

/// Where to download from and to.
pub struct Downloader {
    cache_dir: PathBuf,
    hub: HubConnection,
}

/// Picks the files to download from those a repository has, given how to
/// name a file's address.
type ChooseFiles<'a> = &'a dyn Fn(&[String], &dyn Fn(&str) -> String) -> Result<Vec<String>>;

impl Downloader {
    /// A downloader into `cache_dir`, from `HF_ENDPOINT` (default the public
    /// hub), with `HF_TOKEN` or the token `huggingface-cli login` saved.
    pub fn from_env(cache_dir: PathBuf) -> Self {
        Self { cache_dir, hub: HubConnection::from_env() }
    }

    /// A downloader into `cache_dir` from the hub at `endpoint`.
    pub fn new(cache_dir: PathBuf, endpoint: &str, token: Option<String>) -> Self {
        Self { cache_dir, hub: HubConnection::new(endpoint, token) }
    }

    fn repo_dir(&self, repo_id: &str) -> PathBuf {
        self.cache_dir.join(format!("models--{}", repo_id.replace('/', "--")))
    }

    fn request(&self, method: &str, url: &str) -> ureq::Request {
        self.hub.request(method, url)
    }

    /// Downloads what a model needs from `repo_id` (for a VibeVoice model,
    /// also the tokenizer it lacks); returns its snapshot folder.
    /// `on_progress` returning `false` cancels.
    pub fn download(
        &self,
        repo_id: &str,
        on_progress: &mut dyn FnMut(&DownloadProgress) -> bool,
    ) -> Result<PathBuf, DownloadError> {
        let snapshot =
            self.download_files(repo_id, &|available, url| self.files_to_fetch(repo_id, available, url), on_progress)?;
        let is_vibevoice = std::fs::read(snapshot.join("config.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|c| c["model_type"] == "vibevoice");
        if is_vibevoice && !snapshot.join("tokenizer.json").exists() {
            // VibeVoice ships no tokenizer: fetch its language model's.
            self.download_speech_tokenizer(&snapshot, on_progress)?;
        }
        Ok(snapshot)
    }

    /// Downloads the tokenizer files (only those) of the language model the
    /// VibeVoice checkpoint in `model_dir` was trained from, into the cache
    /// where the model finds them; returns that snapshot.
    pub fn download_speech_tokenizer(
        &self,
        model_dir: &Path,
        on_progress: &mut dyn FnMut(&DownloadProgress) -> bool,
    ) -> Result<PathBuf, DownloadError> {
        let tokenizer_repo = crate::speech::vibevoice::tokenizer_source::tokenizer_repo(model_dir);
        let choose = |available: &[String], _: &dyn Fn(&str) -> String| -> Result<Vec<String>> {
            if !available.iter().any(|a| a == "tokenizer.json") {
                bail!("{tokenizer_repo} has no tokenizer.json, which {} needs", model_dir.display());
            }
            Ok(["tokenizer.json", "tokenizer_config.json"]
                .iter()
                .filter(|n| available.iter().any(|a| a == *n))
                .map(|n| n.to_string())
                .collect())
        };
        self.download_files(&tokenizer_repo, &choose, on_progress)
    }

    /// Downloads the GGUF file `file` of `repo_id` (a model in one file, its
    /// tokenizer inside), and the repository's picture reader (an mmproj
    /// file, the one [`mmproj::preferred`] picks) where it has one; returns
    /// the model's path in the snapshot.
    pub fn download_gguf(
        &self,
        repo_id: &str,
        file: &str,
        on_progress: &mut dyn FnMut(&DownloadProgress) -> bool,
    ) -> Result<PathBuf, DownloadError> {
        let inside = Path::new(file).components().all(|c| matches!(c, std::path::Component::Normal(_)));
        if !inside || !file.to_ascii_lowercase().ends_with(".gguf") {
            return Err(anyhow::anyhow!("`{file}` is not the name of a GGUF file in a repository").into());
        }
        let choose = |available: &[String], _: &dyn Fn(&str) -> String| -> Result<Vec<String>> {
            if !available.iter().any(|a| a == file) || is_mmproj_name(file) {
                bail!("{repo_id} has no model file {file}");
            }
            // From the model's folder of the repository, where Cake looks for it.
            let beside = available.iter().map(String::as_str).filter(|name| folder_of(name) == folder_of(file));
            let picture_reader = mmproj::preferred(beside);
            Ok([Some(file), picture_reader].into_iter().flatten().map(str::to_string).collect())
        };
        Ok(self.download_files(repo_id, &choose, on_progress)?.join(file))
    }

    /// Downloads the files `choose(available, url_of)` picks from `repo_id`
    /// into the cache and records the snapshot; returns its folder.
    fn download_files(
        &self,
        repo_id: &str,
        choose: ChooseFiles,
        on_progress: &mut dyn FnMut(&DownloadProgress) -> bool,
    ) -> Result<PathBuf, DownloadError> {
        if !hf_cache::looks_like_repo_id(repo_id) {
            return Err(anyhow::anyhow!("`{repo_id}` is not a Hugging Face model id (expected org/name)").into());
        }
        let api = ApiBuilder::from_cache(Cache::new(self.cache_dir.clone()))
            .with_endpoint(self.hub.endpoint.clone())
            .with_token(self.hub.token().map(str::to_string))
            .with_progress(false)
            .build()
            .context("cannot set up the hub client")?;
        let repo = api.repo(Repo::new(repo_id.to_string(), RepoType::Model));
        let info = repo.info().map_err(|e| hub_error(repo_id, e))?;
        let available: Vec<String> = info.siblings.into_iter().map(|s| s.rfilename).collect();
        let names = choose(&available, &|name| repo.url(name))?;
        let files =
            names.iter().map(|name| self.describe(repo_id, name, &repo.url(name))).collect::<Result<Vec<_>>>()?;

        let total: u64 = files.iter().map(|f| f.size).sum();
        let mut meter = Meter::new(total);
        for file in &files {
            self.fetch(repo_id, file, &mut meter, on_progress)?;
        }
        let snapshot = self.repo_dir(repo_id).join("snapshots").join(&info.sha);
        for file in &files {
            let link = snapshot.join(&file.name);
            if let Some(parent) = link.parent() {
                std::fs::create_dir_all(parent).context("cannot create the snapshot folder")?;
            }
            let _ = std::fs::remove_file(&link);
            let depth = file.name.matches('/').count();
            let target = PathBuf::from("../".repeat(depth + 2)).join("blobs").join(&file.etag);
            std::os::unix::fs::symlink(&target, &link).with_context(|| format!("cannot link {}", link.display()))?;
        }
        Cache::new(self.cache_dir.clone())
            .repo(Repo::new(repo_id.to_string(), RepoType::Model))
            .create_ref(&info.sha)
            .context("cannot record the downloaded revision")?;
        Ok(snapshot)
    }

    /// The repo's files a text model needs: config and tokenizer files, and
    /// the safetensors weights (the single file, or the index and its shards).
    fn files_to_fetch(&self, repo_id: &str, available: &[String], url: &dyn Fn(&str) -> String) -> Result<Vec<String>> {
        let has = |name: &str| available.iter().any(|a| a == name);
        if !has("config.json") {
            bail!("{repo_id} has no config.json: it is not a transformers model Cake can download");
        }
        let mut names: Vec<String> = TEXT_FILES.iter().filter(|n| has(n)).map(|n| n.to_string()).collect();
        if has("model.safetensors") {
            names.push("model.safetensors".into());
        } else if has("model.safetensors.index.json") {
            let index: serde_json::Value = self
                .request("GET", &url("model.safetensors.index.json"))
                .call()
                .map_err(|e| anyhow::anyhow!("cannot read the weight index of {repo_id}: {e}"))?
                .into_json()
                .context("the weight index is not valid JSON")?;
            let mut shards: Vec<String> = index["weight_map"]
                .as_object()
                .context("the weight index has no weight_map")?
                .values()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            shards.sort();
            shards.dedup();
            names.push("model.safetensors.index.json".into());
            names.extend(shards);
        } else {
            bail!("{repo_id} has no safetensors weights (model.safetensors or model.safetensors.index.json)");
        }
        Ok(names)
    }

    /// Size and hash of a file, from a `HEAD` request (not following the
    /// redirect the hub answers for large files).
    fn describe(&self, repo_id: &str, name: &str, url: &str) -> Result<RemoteFile> {
        let response = match self.request("HEAD", url).call() {
            Ok(r) => r,
            Err(ureq::Error::Status(code, _)) => bail!("{}", status_message(repo_id, code)),
            Err(e) => {
                return Err(HubUnreachable { doing: format!("for {repo_id}/{name}"), cause: e.to_string() }.into())
            }
        };
        let header = |key: &str| response.header(key).map(|v| v.trim_matches('"').to_string());
        let etag = header("x-linked-etag")
            .or_else(|| header("etag"))
            .with_context(|| format!("the hub gave no etag for {repo_id}/{name}"))?;
        if etag.is_empty() || !etag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            bail!("the hub gave an unusable etag `{etag}` for {repo_id}/{name}");
        }
        let size = header("x-linked-size")
            .or_else(|| header("content-length"))
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("the hub gave no size for {repo_id}/{name}"))?;
        Ok(RemoteFile { name: name.to_string(), url: url.to_string(), size, etag })
    }

    /// Brings one file into `blobs/`, resuming a partial `.incomplete` file.
    fn fetch(
        &self,
        repo_id: &str,
        file: &RemoteFile,
        meter: &mut Meter,
        on_progress: &mut dyn FnMut(&DownloadProgress) -> bool,
    ) -> Result<(), DownloadError> {
        let blobs = self.repo_dir(repo_id).join("blobs");
        std::fs::create_dir_all(&blobs).context("cannot create the cache folder")?;
        let blob = blobs.join(&file.etag);
        if std::fs::metadata(&blob).is_ok_and(|m| m.len() == file.size) {
            meter.already_there(file.size);
            return Ok(());
        }
        let partial = blobs.join(format!("{}.incomplete", file.etag));
        let mut start = std::fs::metadata(&partial).map_or(0, |m| m.len());
        if start > file.size {
            std::fs::remove_file(&partial).context("cannot reset a partial download")?;
            start = 0;
        }
        meter.already_there(start);
        if start < file.size {
            self.transfer(repo_id, file, &partial, start, meter, on_progress)?;
        }
        if let Err(e) = verify(&partial, file) {
            let _ = std::fs::remove_file(&partial);
            return Err(e.into());
        }
        std::fs::rename(&partial, &blob).context("cannot move the finished download into place")?;
        Ok(())
    }

    fn transfer(
        &self,
        repo_id: &str,
        file: &RemoteFile,
        partial: &Path,
        start: u64,
        meter: &mut Meter,
        on_progress: &mut dyn FnMut(&DownloadProgress) -> bool,
    ) -> Result<(), DownloadError> {
        let response = self.get_following_redirects(repo_id, &file.url, start)?;
        let resumed = response.status() == 206;
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .append(resumed)
            .write(true)
            .truncate(!resumed)
            .open(partial)
            .context("cannot write the download")?;
        if !resumed && start > 0 {
            // The server ignored the range: start over.
            meter.forget(start);
        }
        let mut reader = response.into_reader().take(file.size + 1);
        let mut buffer = vec![0u8; 256 * 1024];
        loop {
            let n = reader
                .read(&mut buffer)
                .with_context(|| format!("the connection broke while downloading {}", file.name))?;
            if n == 0 {
                break;
            }
            out.write_all(&buffer[..n]).context("cannot write the download")?;
            meter.transferred(n as u64);
            if !on_progress(&meter.progress(&file.name)) {
                out.flush().ok();
                return Err(DownloadError::Cancelled);
            }
        }
        out.sync_all().context("cannot write the download")?;
        Ok(())
    }

    /// GET with a range from `start`, following redirects (to the hub's CDN)
    /// without sending the token to other hosts.
    fn get_following_redirects(&self, repo_id: &str, url: &str, start: u64) -> Result<ureq::Response> {
        let mut url = url.to_string();
        for _ in 0..5 {
            let same_host = url.starts_with(&self.hub.endpoint);
            let request = if same_host { self.request("GET", &url) } else { self.hub.agent.get(&url) };
            let request = if start > 0 { request.set("range", &format!("bytes={start}-")) } else { request };
            // With redirects off, ureq hands back 3xx answers as successes.
            match request.call() {
                Ok(r) if (300..400).contains(&r.status()) => {
                    let location = r.header("location").context("a redirect without a location")?;
                    url = if location.starts_with('/') {
                        format!("{}{location}", self.hub.endpoint)
                    } else {
                        location.to_string()
                    };
                }
                Ok(r) => return Ok(r),
                Err(ureq::Error::Status(code, _)) => bail!("{}", status_message(repo_id, code)),
                Err(e) => {
                    let doing = format!("downloading {repo_id}");
                    return Err(HubUnreachable { doing, cause: e.to_string() }.into());
                }
            }
        }
        bail!("too many redirects downloading {url}")
    }
}

/// Checks a finished file's size, and its SHA-256 where the hub gives one.
fn verify(path: &Path, file: &RemoteFile) -> Result<()> {
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    if size != file.size {
        bail!("{} is corrupted: {size} bytes arrived, the hub announced {}", file.name, file.size);
    }
    let is_sha256 = file.etag.len() == 64 && file.etag.chars().all(|c| c.is_ascii_hexdigit());
    if is_sha256 {
        let mut hasher = Sha256::new();
        let mut f = std::fs::File::open(path).context("cannot read the download back")?;
        std::io::copy(&mut f, &mut hasher).context("cannot read the download back")?;
        let digest: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
        if digest != file.etag.to_lowercase() {
            bail!("{} is corrupted: its SHA-256 is {digest}, the hub says {}; it was deleted", file.name, file.etag);
        }
    }
    Ok(())
}

fn status_message(repo_id: &str, code: u16) -> String {
    match code {
        401 | 403 => format!(
            "access to {repo_id} was refused (HTTP {code}): the model may be gated or private; \
             accept its terms on huggingface.co and set HF_TOKEN to a token that has access"
        ),
        404 => format!("{repo_id} was not found on the hub"),
        _ => format!("the hub answered HTTP {code} for {repo_id}"),
    }
}

fn hub_error(repo_id: &str, error: ApiError) -> anyhow::Error {
    match error {
        ApiError::RequestError(e) => match *e {
            ureq::Error::Status(code, _) => anyhow::anyhow!(status_message(repo_id, code)),
            other => HubUnreachable { doing: format!("for {repo_id}"), cause: other.to_string() }.into(),
        },
        other => anyhow::anyhow!("cannot list the files of {repo_id}: {other}"),
    }
}

/// Bytes done over a whole download, with speed and time left.
struct Meter {
    total: u64,
    done: u64,
    /// Bytes transferred by this run (what the speed is computed from).
    this_run: u64,
    started: Instant,
}

impl Meter {
    fn new(total: u64) -> Self {
        Self { total, done: 0, this_run: 0, started: Instant::now() }
    }

    /// Counts bytes a previous run left on disk.
    fn already_there(&mut self, n: u64) {
        self.done += n;
    }

    /// Counts bytes that just arrived.
    fn transferred(&mut self, n: u64) {
        self.done += n;
        self.this_run += n;
    }

    /// Takes back bytes that will be downloaded again.
    fn forget(&mut self, n: u64) {
        self.done = self.done.saturating_sub(n);
    }

    fn progress(&self, file: &str) -> DownloadProgress {
        let speed = self.this_run as f64 / self.started.elapsed().as_secs_f64().max(1e-3);
        DownloadProgress {
            file: file.to_string(),
            downloaded_bytes: self.done,
            total_bytes: self.total,
            bytes_per_s: speed,
            eta_s: (speed > 0.0).then(|| self.total.saturating_sub(self.done) as f64 / speed),
        }
    }
}

/// The folder of a file named by its path inside a repository ("" at the top).
fn folder_of(name: &str) -> &str {
    name.rsplit_once('/').map_or("", |(folder, _)| folder)
}
