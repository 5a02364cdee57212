//! Talking to the Hugging Face hub (or the one `HF_ENDPOINT` names): the
//! connection with its token, and the two questions the Models screen asks
//! before a download: which repositories hold GGUF models matching a query,
//! and which GGUF files a repository has, with their sizes and
//! quantizations. Every answer is read with a size cap and its lists cut to
//! a bound before use.

use crate::models::vision::mmproj::{self, is_mmproj_name};
use anyhow::{bail, Context, Result};
use hf_hub::Cache;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::time::Duration;

/// The hub could not be reached at all (no network, no DNS, the
/// connection refused): not an answer of the hub but its absence, which
/// the app tells the person as being offline, with what else to do.
#[derive(Debug)]
pub struct HubUnreachable {
    /// What was being done ("searching for models", "downloading org/name").
    pub doing: String,
    /// The network library's own words.
    pub cause: String,
}

impl std::fmt::Display for HubUnreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot reach the hub {}: {}", self.doing, self.cause)
    }
}

impl std::error::Error for HubUnreachable {}

impl HubUnreachable {
    /// Whether `error` or one of its causes is this.
    pub fn is_in(error: &anyhow::Error) -> bool {
        error.chain().any(|cause| cause.is::<Self>())
    }
}

/// Repositories a search returns at most.
const SEARCH_LIMIT: usize = 30;
/// Files of one repository listed at most.
const FILE_LIMIT: usize = 500;
/// Bytes an API answer may have (the hub's lists are far smaller).
const MAX_ANSWER_BYTES: u64 = 8 << 20;
/// Longest search accepted.
const MAX_QUERY_CHARS: usize = 100;

/// Quantization names as llama.cpp writes them into file names, longest
/// first so that `Q4_K_M` is not read as `Q4_K`.
const QUANTIZATIONS: [&str; 33] = [
    "IQ2_XXS", "IQ3_XXS", "IQ2_XS", "IQ3_XS", "IQ4_NL", "IQ4_XS", "Q2_K_S", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S",
    "Q4_K_M", "Q5_K_S", "Q5_K_M", "IQ1_S", "IQ1_M", "IQ2_S", "IQ2_M", "IQ3_S", "IQ3_M", "Q2_K", "Q4_0", "Q4_1", "Q5_0",
    "Q5_1", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "BF16", "F16", "F32",
];

/// The hub's address, the user's token, and an HTTP agent that does not
/// follow redirects by itself (a token must not reach another host).
pub struct HubConnection {
    pub endpoint: String,
    token: Option<String>,
    pub agent: ureq::Agent,
}

/// A repository a search found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HubModel {
    pub repo_id: String,
    pub downloads: u64,
    pub likes: u64,
}

/// A GGUF file of a repository.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HubFile {
    /// Path inside the repository.
    pub name: String,
    pub size_bytes: u64,
    /// As its name says (`Q4_K_M`, `IQ4_XS`, `F16`, …), if it says.
    pub quantization: Option<String>,
}

/// What a repository offers to download.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HubFiles {
    pub files: Vec<HubFile>,
    /// The picture reader (llama.cpp's mmproj file) downloaded with a file
    /// of its folder, where the repository has one: a vision model's.
    pub picture_reader: Option<HubFile>,
    /// Files of models split over several GGUF files, which Cake cannot read.
    pub split_files: usize,
}

#[derive(Deserialize)]
struct SearchAnswer {
    id: String,
    #[serde(default)]
    downloads: u64,
    #[serde(default)]
    likes: u64,
}

#[derive(Deserialize)]
struct TreeEntry {
    #[serde(rename = "type")]
    kind: String,
    path: String,
    #[serde(default)]
    size: u64,
    /// Large files: the LFS object, whose size is the file's.
    #[serde(default)]
    lfs: Option<LfsObject>,
}

#[derive(Deserialize)]
struct LfsObject {
    size: u64,
}

impl HubConnection {
    /// The hub at `HF_ENDPOINT` (default the public hub), with `HF_TOKEN` or
    /// the token `huggingface-cli login` saved.
    pub fn from_env() -> Self {
        let endpoint = std::env::var("HF_ENDPOINT").unwrap_or_else(|_| "https://huggingface.co".into());
        let token = std::env::var("HF_TOKEN").ok().or_else(|| Cache::from_env().token());
        Self::new(&endpoint, token)
    }

    pub fn new(endpoint: &str, token: Option<String>) -> Self {
        Self {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            token,
            agent: ureq::AgentBuilder::new()
                .timeout_connect(Duration::from_secs(20))
                .timeout_read(Duration::from_secs(60))
                .redirects(0)
                .build(),
        }
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// A request to the hub itself, carrying the token.
    pub fn request(&self, method: &str, url: &str) -> ureq::Request {
        let request = self.agent.request(method, url);
        match &self.token {
            Some(token) => request.set("authorization", &format!("Bearer {token}")),
            None => request,
        }
    }

    /// GETs `path` of the hub's API and reads the JSON answer (at most
    /// [`MAX_ANSWER_BYTES`]); `what` names the question in errors.
    fn get_json<T: serde::de::DeserializeOwned>(&self, path_and_query: &str, what: &str) -> Result<T> {
        let url = format!("{}{path_and_query}", self.endpoint);
        let response = match self.request("GET", &url).call() {
            Ok(response) => response,
            Err(ureq::Error::Status(code, _)) => bail!("the hub answered HTTP {code} to {what}"),
            Err(e) => {
                let doing = format!("at {} for {what}", self.endpoint);
                return Err(HubUnreachable { doing, cause: e.to_string() }.into());
            }
        };
        let mut body = Vec::new();
        response
            .into_reader()
            .take(MAX_ANSWER_BYTES + 1)
            .read_to_end(&mut body)
            .with_context(|| format!("the hub's answer to {what} broke off"))?;
        if body.len() as u64 > MAX_ANSWER_BYTES {
            bail!("the hub's answer to {what} is larger than {MAX_ANSWER_BYTES} bytes");
        }
        serde_json::from_slice(&body).with_context(|| format!("the hub's answer to {what} is not what Cake expects"))
    }

    /// Repositories with GGUF files matching `query`, most downloaded first.
    pub fn search_models(&self, query: &str) -> Result<Vec<HubModel>> {
        let query = query.split_whitespace().collect::<Vec<_>>().join(" ");
        if query.is_empty() {
            bail!("type part of a model's name to search for");
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            bail!("a search is at most {MAX_QUERY_CHARS} characters");
        }
        let path = format!(
            "/api/models?search={}&filter=gguf&sort=downloads&direction=-1&limit={SEARCH_LIMIT}",
            query_component(&query)
        );
        let found: Vec<SearchAnswer> = self.get_json(&path, &format!("the search for `{query}`"))?;
        Ok(found
            .into_iter()
            .take(SEARCH_LIMIT)
            .map(|m| HubModel { repo_id: m.id, downloads: m.downloads, likes: m.likes })
            .collect())
    }

    /// The GGUF files of `repo_id`, by name.
    pub fn gguf_files(&self, repo_id: &str) -> Result<HubFiles> {
        if !crate::files::hf_cache::looks_like_repo_id(repo_id) {
            bail!("`{repo_id}` is not a Hugging Face model id (org/name)");
        }
        let path = format!("/api/models/{repo_id}/tree/main?recursive=true");
        let entries: Vec<TreeEntry> = self.get_json(&path, &format!("the file list of {repo_id}"))?;
        let mut listed = HubFiles { files: Vec::new(), picture_reader: None, split_files: 0 };
        let mut picture_readers = Vec::new();
        for entry in entries.into_iter().take(FILE_LIMIT) {
            if entry.kind != "file" || !entry.path.to_ascii_lowercase().ends_with(".gguf") {
                continue;
            }
            if is_split_part(&entry.path) {
                listed.split_files += 1;
                continue;
            }
            let size_bytes = entry.lfs.map_or(entry.size, |lfs| lfs.size);
            let file = HubFile { quantization: quantization_of(&entry.path), name: entry.path, size_bytes };
            if is_mmproj_name(&file.name) {
                picture_readers.push(file);
            } else {
                listed.files.push(file);
            }
        }
        listed.files.sort_by(|a, b| a.name.cmp(&b.name));
        let chosen = mmproj::preferred(picture_readers.iter().map(|f| f.name.as_str())).map(str::to_string);
        listed.picture_reader = picture_readers.into_iter().find(|f| Some(&f.name) == chosen.as_ref());
        Ok(listed)
    }
}

/// `text` as a URL query value: unreserved characters as they are, every
/// other byte as `%XX`.
fn query_component(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Whether `name` is one part of a split GGUF model (`…-00001-of-00003.gguf`).
fn is_split_part(name: &str) -> bool {
    let stem = &name[..name.len() - ".gguf".len()];
    let Some((before, count)) = stem.rsplit_once("-of-") else {
        return false;
    };
    let index = before.rsplit('-').next().unwrap_or("");
    [index, count].iter().all(|part| part.len() == 5 && part.bytes().all(|b| b.is_ascii_digit()))
}

/// The quantization a GGUF file's name gives, as a whole word of it.
pub fn quantization_of(name: &str) -> Option<String> {
    let file = name.rsplit('/').next().unwrap_or(name);
    let upper = file.to_ascii_uppercase();
    let is_word_char = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    QUANTIZATIONS.iter().find_map(|quantization| {
        upper.match_indices(quantization).find_map(|(at, _)| {
            let before = upper[..at].chars().next_back();
            let after = upper[at + quantization.len()..].chars().next();
            (!is_word_char(before) && !is_word_char(after)).then(|| quantization.to_string())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantizations_are_read_from_file_names() {
        let cases = [
            ("SmolLM2-135M-Instruct.Q4_K_M.gguf", Some("Q4_K_M")),
            ("llama-3.2-1b-instruct-q4_k_m.gguf", Some("Q4_K_M")),
            ("Qwen3-8B-IQ4_XS.gguf", Some("IQ4_XS")),
            ("sub/model-Q4_K.gguf", Some("Q4_K")),
            ("model-bf16.gguf", Some("BF16")),
            ("model-f16.gguf", Some("F16")),
            ("Q8_0/model.gguf", None),
            ("model.gguf", None),
            ("model-Q4_K_MX.gguf", None),
        ];
        for (name, expected) in cases {
            assert_eq!(quantization_of(name).as_deref(), expected, "{name}");
        }
    }

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(query_component("llama 3.2&x=ü"), "llama%203.2%26x%3D%C3%BC");
    }

    #[test]
    fn split_parts_are_told_from_whole_files() {
        assert!(is_split_part("Llama-70B-Q4_K_M-00001-of-00002.gguf"));
        assert!(is_split_part("dir/x-00002-of-00002.gguf"));
        assert!(!is_split_part("model-of-dreams.gguf"));
        assert!(!is_split_part("Q4_K_M.gguf"));
    }
}
