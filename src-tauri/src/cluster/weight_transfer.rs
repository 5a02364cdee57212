//! Sending a worker exactly the weights of its layers.
//!
//! The master describes, in a [`ModelManifest`], the byte ranges of the
//! model's files a worker needs: the files' headers and the data of the
//! tensors of its layers. The worker keeps a copy of those files in its
//! cache with only these ranges filled in (the rest are holes in sparse
//! files), so the normal loader opens them and reads only what is there.
//! Ranges travel in chunks of at most [`CHUNK_BYTES`], LZ4-compressed with a
//! SHA-256 of the original bytes; the worker records each finished chunk, so
//! a transfer cut short resumes where it stopped and a model already cached
//! (same files, same tensor set: same [`ModelManifest::key`]) costs nothing.

use crate::formats::gguf::GgufFile;
use crate::formats::safetensors::SafetensorsHeader;
use crate::models::loader::TensorLayout;
use crate::models::sources::selection::TensorSelection;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Largest chunk of weights in one frame (before compression).
pub const CHUNK_BYTES: u64 = 4 << 20;
/// Most files a manifest may name (a sharded checkpoint has tens).
const MAX_FILES: usize = 1024;
/// Most chunks a manifest may need (4 TiB of weights).
const MAX_CHUNKS: u64 = 1 << 20;
/// Largest model file a manifest may describe (1 TiB).
const MAX_FILE_BYTES: u64 = 1 << 40;

/// A byte range of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    pub offset: u64,
    pub len: u64,
}

/// One file of the model and the ranges of it a worker needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileManifest {
    /// File name inside the model folder (or the GGUF file's name).
    pub name: String,
    pub len: u64,
    pub pieces: Vec<Piece>,
}

/// What a worker needs of a model for one layer range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelManifest {
    /// Identity of the files and the tensor set (hex SHA-256).
    pub key: String,
    /// A single GGUF file (the first file) rather than a model folder.
    pub gguf: bool,
    pub files: Vec<FileManifest>,
}

/// Most bytes of weights a load sends a worker, in manifests' worth: all of
/// it once, and again for chunks it lost (its disk filled, say).
pub const MOST_MANIFESTS_SENT: u64 = 2;

/// One chunk to transfer: `len` bytes at `offset` of file number `file`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChunkRef {
    pub file: usize,
    pub offset: u64,
    pub len: u64,
}

/// GGUF tensors that are part of the configuration rather than of a layer
/// (Phi-3's LongRoPE factors): every stage reads them when it opens the file.
const EVERY_STAGE_GGUF_TENSORS: [&str; 2] = ["rope_factors_long.weight", "rope_factors_short.weight"];

impl ModelManifest {
    /// The manifest of the tensors `selection` names in the checkpoint at
    /// `path` (a model folder keeps them as `layout` says).
    pub fn for_selection(
        path: &Path,
        selection: &TensorSelection,
        tied_embeddings: bool,
        layout: TensorLayout,
    ) -> Result<Self> {
        let mut hasher = Sha256::new();
        let mut files = Vec::new();
        let gguf = path.is_file();
        if gguf {
            let file = GgufFile::open(path)?;
            let len = std::fs::metadata(path)?.len();
            let header = file.header.tensor_data_offset;
            let mut pieces = vec![Piece { offset: 0, len: header }];
            let mut names: Vec<&String> = file.header.tensor_infos.keys().collect();
            names.sort();
            for name in names {
                let info = &file.header.tensor_infos[name];
                let layer = name.strip_prefix("blk.").and_then(|r| r.split('.').next()?.parse::<usize>().ok());
                let every_stage = EVERY_STAGE_GGUF_TENSORS.contains(&name.as_str());
                if every_stage || layer.is_some_and(|l| selection.layers.contains(&l)) {
                    pieces.push(Piece { offset: header + info.offset, len: info.byte_size() });
                    hasher.update(name.as_bytes());
                }
            }
            let name = path.file_name().context("model file has no name")?.to_string_lossy().into_owned();
            hash_file_header(&mut hasher, path, &name, len, header)?;
            files.push(FileManifest { name, len, pieces });
        } else {
            for small in ["config.json", "model.safetensors.index.json"] {
                let p = path.join(small);
                if p.exists() {
                    let len = std::fs::metadata(&p)?.len();
                    hash_file_header(&mut hasher, &p, small, len, len)?;
                    files.push(FileManifest { name: small.into(), len, pieces: vec![Piece { offset: 0, len }] });
                }
            }
            let mut shards: BTreeSet<String> = BTreeSet::new();
            for entry in std::fs::read_dir(path)? {
                let name = entry?.file_name().to_string_lossy().into_owned();
                if name.ends_with(".safetensors") {
                    shards.insert(name);
                }
            }
            for shard in shards {
                let p = path.join(&shard);
                let header = SafetensorsHeader::read(&p)?;
                let len = std::fs::metadata(&p)?.len();
                let mut pieces = Vec::new();
                for (name, entry) in &header.tensors {
                    if layout.wants(name, selection, tied_embeddings) {
                        pieces.push(Piece { offset: header.data_start + entry.begin, len: entry.byte_size() });
                        hasher.update(name.as_bytes());
                    }
                }
                if pieces.is_empty() {
                    continue;
                }
                pieces.insert(0, Piece { offset: 0, len: header.data_start });
                hash_file_header(&mut hasher, &p, &shard, len, header.data_start)?;
                files.push(FileManifest { name: shard, len, pieces });
            }
        }
        hasher.update(format!("{:?}", selection.layers).as_bytes());
        let key = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Ok(Self { key, gguf, files })
    }

    /// Every chunk of every piece.
    pub fn chunks(&self) -> Vec<ChunkRef> {
        let mut out = Vec::new();
        for (file, manifest) in self.files.iter().enumerate() {
            for piece in &manifest.pieces {
                let mut offset = piece.offset;
                let end = piece.offset + piece.len;
                while offset < end {
                    let len = CHUNK_BYTES.min(end - offset);
                    out.push(ChunkRef { file, offset, len });
                    offset += len;
                }
            }
        }
        out
    }

    /// Whether `chunk` is one of [`Self::chunks`], without listing them.
    pub fn lists(&self, chunk: ChunkRef) -> bool {
        let Some(file) = self.files.get(chunk.file) else { return false };
        file.pieces.iter().any(|piece| {
            let Some(end) = piece.offset.checked_add(piece.len) else { return false };
            let inside = chunk.offset >= piece.offset && chunk.offset < end;
            inside
                && (chunk.offset - piece.offset).is_multiple_of(CHUNK_BYTES)
                && chunk.len == CHUNK_BYTES.min(end - chunk.offset)
        })
    }

    /// Total bytes the manifest asks for.
    /// The chunks to send a worker that asked for `requested`, having
    /// been sent `already_sent` bytes for this load: each listed chunk once
    /// (a round sends at most the manifest), and never more than
    /// [`MOST_MANIFESTS_SENT`] manifests in all. A chunk the manifest does
    /// not list is refused before anything is summed.
    pub fn chunks_to_send(&self, mut requested: Vec<ChunkRef>, already_sent: u64) -> Result<Vec<ChunkRef>> {
        if let Some(bad) = requested.iter().find(|&&c| !self.lists(c)) {
            bail!("a chunk the manifest does not list ({bad:?})");
        }
        requested.sort_unstable();
        requested.dedup();
        let asked: u64 = requested.iter().map(|c| c.len).sum();
        let most = MOST_MANIFESTS_SENT.saturating_mul(self.total_bytes());
        if already_sent.saturating_add(asked) > most {
            bail!("more than {MOST_MANIFESTS_SENT} times its weights ({} bytes)", self.total_bytes());
        }
        Ok(requested)
    }

    pub fn total_bytes(&self) -> u64 {
        self.files.iter().flat_map(|f| &f.pieces).map(|p| p.len).sum()
    }

    /// Checks a manifest from the network before acting on it.
    pub fn validate(&self) -> Result<()> {
        if self.key.len() != 64 || !self.key.chars().all(|c| c.is_ascii_hexdigit()) {
            bail!("the model key is not a SHA-256");
        }
        if self.files.is_empty() || self.files.len() > MAX_FILES {
            bail!("a manifest must name 1 to {MAX_FILES} files, not {}", self.files.len());
        }
        if self.gguf && self.files.len() != 1 {
            bail!("a GGUF manifest must name exactly one file, not {}", self.files.len());
        }
        // Counted before `chunks()` lists them: a claim of 2^62 bytes
        // would otherwise list 2^40 chunks.
        let mut chunks = 0u64;
        for f in &self.files {
            if f.len > MAX_FILE_BYTES {
                bail!("file `{}` claims {} bytes, over the {MAX_FILE_BYTES}-byte limit", f.name, f.len);
            }
            for p in &f.pieces {
                chunks = chunks.saturating_add(p.len.div_ceil(CHUNK_BYTES));
            }
        }
        if chunks > MAX_CHUNKS {
            bail!("the manifest asks for {chunks} chunks, over the limit of {MAX_CHUNKS}");
        }
        for f in &self.files {
            if f.name.is_empty() || f.name.contains('/') || f.name.contains('\\') || f.name.starts_with('.') {
                bail!("file name `{}` is not a plain file name", f.name);
            }
            for p in &f.pieces {
                if p.offset.checked_add(p.len).is_none_or(|end| end > f.len) {
                    bail!("a range of {} lies outside the file", f.name);
                }
            }
        }
        Ok(())
    }
}

fn hash_file_header(hasher: &mut Sha256, path: &Path, name: &str, len: u64, header: u64) -> Result<()> {
    hasher.update(name.as_bytes());
    hasher.update(len.to_le_bytes());
    let mut bytes = vec![0u8; header.min(64 << 20) as usize];
    File::open(path)?.read_exact_at(&mut bytes, 0).with_context(|| format!("cannot read {}", path.display()))?;
    hasher.update(&bytes);
    Ok(())
}

/// Checks a chunk from the master against `manifest` and unpacks it: the
/// manifest must list it and its size is checked before it is decompressed.
pub fn unpack_chunk(manifest: &ModelManifest, chunk: ChunkRef, sha256: &str, packed: &[u8]) -> Result<Vec<u8>> {
    if !manifest.lists(chunk) {
        bail!("the master sent a chunk the manifest does not list");
    }
    let claimed = packed.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64);
    if claimed != Some(chunk.len) {
        bail!("a weight chunk claims the wrong size");
    }
    let bytes = lz4_flex::decompress_size_prepended(packed).context("a weight chunk does not decompress")?;
    if hex_sha256(&bytes) != sha256 {
        bail!("a weight chunk failed its checksum");
    }
    Ok(bytes)
}

/// Reads one chunk from the master's copy of the model and packs it.
pub fn read_chunk(model: &Path, manifest: &ModelManifest, chunk: ChunkRef) -> Result<(String, Vec<u8>)> {
    // Checked before the buffer exists: the request comes from the worker.
    if !manifest.lists(chunk) {
        bail!("the worker asked for a chunk the manifest does not list ({} bytes at {})", chunk.len, chunk.offset);
    }
    let file = manifest.files.get(chunk.file).context("chunk of an unknown file")?;
    let path = if manifest.gguf { model.to_path_buf() } else { model.join(&file.name) };
    let mut bytes = vec![0u8; chunk.len as usize];
    File::open(&path)?
        .read_exact_at(&mut bytes, chunk.offset)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let sha = hex_sha256(&bytes);
    Ok((sha, lz4_flex::compress_prepend_size(&bytes)))
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A worker's cache of partially received models.
pub struct WeightCache {
    root: PathBuf,
}

impl WeightCache {
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    fn dir(&self, manifest: &ModelManifest) -> PathBuf {
        self.root.join(&manifest.key)
    }

    fn done_file(&self, manifest: &ModelManifest) -> PathBuf {
        self.dir(manifest).join(".chunks-done.json")
    }

    fn done(&self, manifest: &ModelManifest) -> BTreeSet<ChunkRef> {
        std::fs::read_to_string(self.done_file(manifest))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    /// Chunks still to receive.
    pub fn missing(&self, manifest: &ModelManifest) -> Vec<ChunkRef> {
        let done = self.done(manifest);
        manifest.chunks().into_iter().filter(|c| !done.contains(c)).collect()
    }

    /// Where the loader finds the model once nothing is missing.
    pub fn model_path(&self, manifest: &ModelManifest) -> PathBuf {
        if manifest.gguf {
            self.dir(manifest).join(&manifest.files[0].name)
        } else {
            self.dir(manifest)
        }
    }

    /// Checks and stores one chunk; records it as done.
    pub fn store(&self, manifest: &ModelManifest, chunk: ChunkRef, sha256: &str, packed: &[u8]) -> Result<()> {
        let bytes = unpack_chunk(manifest, chunk, sha256, packed)?;
        let file = &manifest.files[chunk.file];
        let dir = self.dir(manifest);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(&file.name);
        let out = std::fs::OpenOptions::new().create(true).write(true).truncate(false).open(&path)?;
        if out.metadata()?.len() != file.len {
            out.set_len(file.len)?; // sparse: only received ranges take space
        }
        out.write_all_at(&bytes, chunk.offset)?;
        out.sync_data()?;
        let mut done = self.done(manifest);
        done.insert(chunk);
        crate::files::storage::write_json_atomically(&self.done_file(manifest), &done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_pieces_exactly() {
        let manifest = ModelManifest {
            key: "0".repeat(64),
            gguf: true,
            files: vec![FileManifest {
                name: "m.gguf".into(),
                len: 20 << 20,
                pieces: vec![Piece { offset: 0, len: 100 }, Piece { offset: 1000, len: CHUNK_BYTES + 5 }],
            }],
        };
        let chunks = manifest.chunks();
        assert_eq!(chunks.iter().map(|c| c.len).sum::<u64>(), manifest.total_bytes());
        assert_eq!(chunks.len(), 3);
        assert!(chunks.iter().all(|c| c.len <= CHUNK_BYTES));
        manifest.validate().unwrap();
        assert!(chunks.iter().all(|&c| manifest.lists(c)));
        let near = |c: ChunkRef| {
            [ChunkRef { len: c.len + 1, ..c }, ChunkRef { offset: c.offset + 1, ..c }, ChunkRef { file: 1, ..c }]
        };
        assert!(chunks.iter().flat_map(|&c| near(c)).all(|c| !manifest.lists(c)), "only listed chunks count");
    }

    #[test]
    fn hostile_manifests_are_refused() {
        let mut m = ModelManifest {
            key: "0".repeat(64),
            gguf: true,
            files: vec![FileManifest { name: "../../etc/passwd".into(), len: 10, pieces: vec![] }],
        };
        assert!(m.validate().is_err());
        m.files[0].name = "ok.gguf".into();
        m.files[0].pieces = vec![Piece { offset: u64::MAX, len: 2 }];
        assert!(m.validate().is_err());
        m.files[0].len = 1 << 62;
        m.files[0].pieces = vec![Piece { offset: 0, len: 1 << 62 }];
        assert!(m.validate().is_err(), "a piece of 2^62 bytes");
        let whole = |name: &str| FileManifest {
            name: name.into(),
            len: 1 << 40,
            pieces: vec![Piece { offset: 0, len: 1 << 40 }],
        };
        let folder = ModelManifest { gguf: false, files: ["a", "b", "c", "d", "e"].map(whole).to_vec(), ..m.clone() };
        assert!(folder.validate().is_err(), "5 TiB: more chunks than allowed");
        assert!(
            ModelManifest { files: folder.files[..4].to_vec(), ..folder.clone() }.validate().is_ok(),
            "4 TiB is allowed"
        );
        m.files.clear();
        assert!(m.validate().is_err(), "no files");
        m.files = vec![FileManifest { name: "a.gguf".into(), len: 1, pieces: vec![] }; 2];
        assert!(m.validate().is_err(), "two files in a GGUF manifest");
    }

    #[test]
    fn corrupted_chunks_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cache = WeightCache::new(dir.path().to_path_buf());
        let manifest = ModelManifest {
            key: "a".repeat(64),
            gguf: true,
            files: vec![FileManifest { name: "m.gguf".into(), len: 64, pieces: vec![Piece { offset: 8, len: 16 }] }],
        };
        let chunk = manifest.chunks()[0];
        let data = [7u8; 16];
        let packed = lz4_flex::compress_prepend_size(&data);
        assert!(cache.store(&manifest, chunk, &hex_sha256(&[8u8; 16]), &packed).is_err());
        assert_eq!(cache.missing(&manifest).len(), 1);
        cache.store(&manifest, chunk, &hex_sha256(&data), &packed).unwrap();
        assert!(cache.missing(&manifest).is_empty());
        let stored = std::fs::read(cache.model_path(&manifest)).unwrap();
        assert_eq!(stored.len(), 64);
        assert_eq!(&stored[8..24], &data);
    }
}
