//! The tile cache: GGUF matrices repacked for Cake's kernels, kept on disk so
//! that later loads map them instead of repacking.
//!
//! Repacking a quantized matrix into tiles (`cake_kernels::packed`) costs
//! CPU and fresh memory at every load: most of the time a large model took
//! to open. The first load of a GGUF file now writes each repacked matrix to
//! `<cache>/tiles/<file key>/<tensor>.tiles`; later loads map those files
//! where they lie, as llama.cpp maps its GGUF file: the pages are the
//! system's file cache, shared with other processes, and nothing is copied.
//!
//! - The file key hashes the GGUF file's path, size, modification time and
//!   inode with the kernels' [`layout_fingerprint`]: a changed model file,
//!   or a build whose tiles differ, gets new entries and never reads old ones.
//! - Each tile file starts with a header naming its format, shape, part
//!   sizes and fingerprint, checked against what the loader expects before
//!   the file is used; a file that does not match is deleted and the matrix
//!   repacked. Files are written whole, flushed, then renamed into place.
//! - The cache keeps under a size limit (`CAKE_TILE_CACHE_GB`, default 64),
//!   dropping the least recently used models' tiles first, and never leaves
//!   the disk with less than 4 GiB or 2 % free (`CAKE_TILE_CACHE_KEEP_FREE_GB`
//!   sets another margin). `CAKE_TILE_CACHE=off` turns it off. Anything that
//!   goes wrong here only costs the repack.

use crate::files::paths::cache_dir;
use anyhow::{ensure, Context, Result};
use cake_kernels::memory::FileMapping;
use cake_kernels::packed::{layout_fingerprint, GgmlFormat, PackedMatrix, RepackScratch};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// The header's size; the parts start on page boundaries after it.
const PAGE: usize = 4096;
const MAGIC: &[u8; 8] = b"CAKETILE";
/// Marks a model folder's last use (its modification time).
const USED: &str = "used";
/// Records which GGUF file a model folder holds tiles of.
const SOURCE: &str = "source";
const GIB: u64 = 1 << 30;
/// Changes when the loader hands the cache a matrix's rows in another order
/// (2: Llama's q and k as the GGUF file stores them, no longer reordered),
/// so that tiles of the old order are never read.
const ROW_ORDER_VERSION: u8 = 2;

/// The cached tiles of one GGUF file.
pub struct TileCache {
    /// This file's folder.
    dir: PathBuf,
    /// The folder of all files' tiles.
    root: PathBuf,
    limits: Limits,
    /// Bytes the whole cache holds, as counted when opened and written since.
    held: Mutex<u64>,
    /// Tile files written under a temporary name, to be flushed to disk and
    /// renamed into place together when the load is over.
    pending: Mutex<Vec<Written>>,
    /// The repack's buffers, reused from one matrix to the next.
    scratch: Mutex<RepackScratch>,
}

/// How much the cache may hold, and how much of its disk it leaves free.
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// Bytes all files' tiles may take together.
    total: u64,
    /// Bytes of the disk to leave free; `None` for 4 GiB or 2 % of the
    /// disk's size, whichever is larger.
    keep_free: Option<u64>,
}

impl Limits {
    fn from_env() -> Self {
        let gib = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok()).map(|v| v * GIB);
        Self { total: gib("CAKE_TILE_CACHE_GB").unwrap_or(64 * GIB), keep_free: gib("CAKE_TILE_CACHE_KEEP_FREE_GB") }
    }
}

/// A tile file written but not yet flushed nor renamed into place.
struct Written {
    file: File,
    temporary: PathBuf,
    path: PathBuf,
}

/// What a tile file's header says, and what the loader expects it to say.
#[derive(Debug, PartialEq, Eq)]
struct Header {
    fingerprint: u64,
    format: String,
    rows: u64,
    cols: u64,
    parts: [u64; 2],
}

impl Header {
    fn expected(format: GgmlFormat, rows: usize, cols: usize) -> Option<Self> {
        let [tiles, supers] = PackedMatrix::part_sizes(format, rows, cols)?;
        Some(Self {
            fingerprint: layout_fingerprint(),
            format: format.name().to_string(),
            rows: rows as u64,
            cols: cols as u64,
            parts: [tiles as u64, supers as u64],
        })
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(PAGE);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&self.fingerprint.to_le_bytes());
        let mut name = [0u8; 16];
        name[..self.format.len()].copy_from_slice(self.format.as_bytes());
        bytes.extend_from_slice(&name);
        for value in [self.rows, self.cols, self.parts[0], self.parts[1]] {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        bytes.resize(PAGE, 0);
        bytes
    }

    fn from_bytes(bytes: &[u8; 64]) -> Option<Self> {
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let name = &bytes[16..32];
        let format = std::str::from_utf8(&name[..name.iter().position(|&b| b == 0).unwrap_or(16)]).ok()?;
        (&bytes[..8] == MAGIC).then(|| Self {
            fingerprint: word(8),
            format: format.to_string(),
            rows: word(32),
            cols: word(40),
            parts: [word(48), word(56)],
        })
    }

    /// Where the two parts start, and the file's whole length.
    fn layout(&self) -> ([usize; 2], u64) {
        let supers_at = PAGE + (self.parts[0] as usize).next_multiple_of(PAGE);
        let len = if self.parts[1] == 0 { (PAGE as u64) + self.parts[0] } else { supers_at as u64 + self.parts[1] };
        ([PAGE, supers_at], len)
    }
}

impl TileCache {
    /// The cache for GGUF file `path`, or `None` when the cache is off or
    /// its folder cannot be made.
    pub fn for_file(path: &Path) -> Option<Self> {
        if std::env::var("CAKE_TILE_CACHE").is_ok_and(|v| v == "off" || v == "0") {
            return None;
        }
        let root = cache_dir().join("tiles");
        match Self::open(&root, path, Limits::from_env()) {
            Ok(cache) => Some(cache),
            Err(e) => {
                tracing::warn!("tile cache off for {}: {e:#}", path.display());
                None
            }
        }
    }

    /// Drops the tiles of GGUF files that are gone or have changed since
    /// (after a model is deleted, say).
    pub fn drop_stale() {
        drop_stale_folders(&cache_dir().join("tiles"));
    }

    fn open(root: &Path, path: &Path, limits: Limits) -> Result<Self> {
        drop_stale_folders(root);
        let source = path.canonicalize().with_context(|| format!("cannot resolve {}", path.display()))?;
        let dir = root.join(file_key(&source)?);
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(dir.join(USED), b"")?;
        std::fs::write(dir.join(SOURCE), source.as_os_str().as_encoded_bytes())?;
        remove_stale_temporaries(&dir);
        let held = folder_bytes(root);
        Ok(Self {
            dir,
            root: root.to_path_buf(),
            limits,
            held: Mutex::new(held),
            pending: Mutex::new(Vec::new()),
            scratch: Mutex::new(RepackScratch::default()),
        })
    }

    /// Whether no matrix of this file has been cached yet.
    pub fn is_empty(&self) -> bool {
        let tiles = std::fs::read_dir(&self.dir).into_iter().flatten().flatten();
        !tiles.into_iter().any(|entry| entry.path().extension().is_some_and(|e| e == "tiles"))
    }

    /// Tensor `name`, a `rows × cols` matrix of `format`, if cached.
    pub fn load(&self, name: &str, format: GgmlFormat, rows: usize, cols: usize) -> Option<PackedMatrix> {
        let path = self.tile_path(name);
        let file = File::open(&path).ok()?;
        match read_tiles(&file, format, rows, cols) {
            Ok(matrix) => Some(matrix),
            Err(e) => {
                tracing::warn!("{}: {e:#}; repacking `{name}` instead", path.display());
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Repacks tensor `name`, a `rows × cols` matrix of `format` stored as
    /// `data`, straight into the cache, and returns it as mapped from there;
    /// `None` when it was not written (no room, or an error, logged). Only a
    /// few megabytes of memory are touched besides the file's pages. The
    /// file is flushed to disk and takes its place when the cache is
    /// dropped, after the load: one flush for all of them rather than one
    /// per matrix (which took 0.8 s for the default model's 211).
    pub fn repack(
        &self,
        name: &str,
        format: GgmlFormat,
        data: &[u8],
        rows: usize,
        cols: usize,
    ) -> Option<PackedMatrix> {
        let header = Header::expected(format, rows, cols)?;
        let (_, len) = header.layout();
        if !self.make_room(len) {
            return None;
        }
        let written = write_tiles(self.tile_path(name), &header, |write| {
            let mut scratch = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
            PackedMatrix::repack_into(format, data, rows, cols, &mut scratch, write)
        })
        .and_then(|written| {
            let mapped = read_tiles(&File::open(&written.temporary)?, format, rows, cols)?;
            Ok((written, mapped))
        });
        match written {
            Ok((written, mapped)) => {
                *self.held.lock().unwrap_or_else(|e| e.into_inner()) += len;
                self.pending.lock().unwrap_or_else(|e| e.into_inner()).push(written);
                Some(mapped)
            }
            Err(e) => {
                tracing::warn!("cannot cache the tiles of `{name}` in {}: {e:#}", self.dir.display());
                None
            }
        }
    }

    fn tile_path(&self, name: &str) -> PathBuf {
        let readable: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '_' { c } else { '-' }).collect();
        let digest = Sha256::digest(name.as_bytes());
        self.dir.join(format!("{readable}-{}.tiles", hex(&digest[..4])))
    }

    /// Whether `bytes` more fit under the limit and on the disk, after
    /// dropping the least recently used other files' tiles if needed.
    fn make_room(&self, bytes: u64) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let fits = |held: u64| {
            held + bytes <= self.limits.total && disk_keeps_free_space(&self.dir, bytes, self.limits.keep_free)
        };
        if !fits(*held) {
            for (dir, size) in folders_oldest_first(&self.root) {
                if dir == self.dir || fits(*held) {
                    continue;
                }
                if std::fs::remove_dir_all(&dir).is_ok() {
                    tracing::info!("tile cache: dropped {} ({} MB), least recently used", dir.display(), size >> 20);
                    *held = held.saturating_sub(size);
                }
            }
        }
        fits(*held)
    }
}

/// A name for GGUF file `resolved` (a path with no links left) as it is
/// now: a hash of its path, size, modification time and inode, and of the
/// tiles' layout.
fn file_key(resolved: &Path) -> Result<String> {
    let meta = std::fs::metadata(resolved)?;
    let modified = meta.modified()?.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let mut hasher = Sha256::new();
    hasher.update(resolved.as_os_str().as_encoded_bytes());
    hasher.update([0]);
    hasher.update(meta.len().to_le_bytes());
    hasher.update(modified.as_nanos().to_le_bytes());
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        hasher.update(meta.dev().to_le_bytes());
        hasher.update(meta.ino().to_le_bytes());
    }
    hasher.update(layout_fingerprint().to_le_bytes());
    hasher.update([ROW_ORDER_VERSION]);
    Ok(hex(&hasher.finalize()[..12]))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The matrix in tile file `file`, after checking its header and length
/// against a `rows × cols` matrix of `format`.
fn read_tiles(file: &File, format: GgmlFormat, rows: usize, cols: usize) -> Result<PackedMatrix> {
    let expected = Header::expected(format, rows, cols).context("not whole blocks")?;
    let mut bytes = [0u8; 64];
    (&*file).read_exact(&mut bytes).context("no header")?;
    let header = Header::from_bytes(&bytes).context("not a tile file")?;
    ensure!(header == expected, "holds {header:?}, not the expected {expected:?}");
    let (offsets, len) = header.layout();
    let actual = file.metadata()?.len();
    ensure!(actual == len, "{actual} bytes where the header implies {len}");
    let mapping = FileMapping::open(file).context("cannot map")?;
    PackedMatrix::from_file(format, rows, cols, &mapping, offsets)
}

/// Commits running in the background, which [`wait_for_commits`] joins.
static COMMITS: Mutex<Vec<std::thread::JoinHandle<()>>> = Mutex::new(Vec::new());

impl Drop for TileCache {
    /// Commits the tiles written during the load on a thread of its own: the
    /// model is ready while they reach the disk (a third of a 1B model's
    /// first load went to that flush).
    fn drop(&mut self) {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        if pending.is_empty() {
            return;
        }
        match std::thread::Builder::new().name("tile-commit".into()).spawn(move || commit(pending)) {
            Ok(handle) => COMMITS.lock().unwrap_or_else(|e| e.into_inner()).push(handle),
            Err(e) => tracing::warn!("tile cache: cannot start the commit ({e}); the tiles are dropped"),
        }
    }
}

impl TileCache {
    /// Flushes the tile files written so far to disk and renames them into
    /// place, before returning.
    pub fn commit(&self) {
        commit(std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner())));
    }
}

/// Waits for the tile files of finished loads to reach the disk and their
/// names: a process about to exit calls it, or its next load would repack.
pub fn wait_for_commits() {
    let commits = std::mem::take(&mut *COMMITS.lock().unwrap_or_else(|e| e.into_inner()));
    for commit in commits {
        let _ = commit.join();
    }
}

/// Flushes tile files to disk, then renames them into place: the first flush
/// writes most of them out (the file system commits their data together),
/// the others cost little. A file is never found under its name before its
/// data is on disk; one left behind by an exit is removed by an open an hour
/// later.
fn commit(pending: Vec<Written>) {
    for Written { file, temporary, path } in pending {
        if let Err(e) = file.sync_data().and_then(|()| std::fs::rename(&temporary, &path)) {
            tracing::warn!("cannot keep {}: {e}", path.display());
            let _ = std::fs::remove_file(&temporary);
        }
    }
}

/// Writes a tile file under a temporary name beside `path`: the header,
/// then the parts that `repack` hands to its writer (tiles, then the
/// super-block scales on their own page).
fn write_tiles(
    path: PathBuf,
    header: &Header,
    repack: impl FnOnce(&mut dyn FnMut(usize, &[u8]) -> std::io::Result<()>) -> Result<()>,
) -> Result<Written> {
    static WRITES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temporary = path.with_extension(format!("{}-{write}.tmp", std::process::id()));
    let result = (|| -> Result<File> {
        let mut file = std::io::BufWriter::with_capacity(1 << 20, File::create(&temporary)?);
        file.write_all(&header.to_bytes())?;
        let ([_, supers_at], len) = header.layout();
        let mut at = PAGE;
        repack(&mut |part, bytes| {
            if part == 1 && at < supers_at {
                file.write_all(&vec![0; supers_at - at])?;
                at = supers_at;
            }
            at += bytes.len();
            file.write_all(bytes)
        })?;
        ensure!(at as u64 == len, "wrote {at} bytes of {len}");
        Ok(file.into_inner().map_err(|e| e.into_error())?)
    })();
    match result {
        Ok(file) => Ok(Written { file, temporary, path }),
        Err(e) => {
            let _ = std::fs::remove_file(&temporary);
            Err(e)
        }
    }
}

/// Removes the folders under `root` whose GGUF file is gone or has changed.
fn drop_stale_folders(root: &Path) {
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let dir = entry.path();
        let Ok(source) = std::fs::read(dir.join(SOURCE)) else { continue };
        #[cfg(unix)]
        let source = PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(source));
        #[cfg(not(unix))]
        let source = PathBuf::from(String::from_utf8_lossy(&source).into_owned());
        let current = file_key(&source).ok();
        if current.as_deref() != dir.file_name().and_then(|n| n.to_str()) && std::fs::remove_dir_all(&dir).is_ok() {
            tracing::info!("tile cache: dropped the tiles of {}, which is gone or changed", source.display());
        }
    }
}

/// Removes temporary files more than an hour old (a process that stopped
/// while writing).
fn remove_stale_temporaries(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let old = entry.metadata().and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok());
        if path.extension().is_some_and(|e| e == "tmp") && old.is_some_and(|age| age > Duration::from_secs(3600)) {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn folder_bytes(dir: &Path) -> u64 {
    let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
    entries
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => folder_bytes(&entry.path()),
            Ok(_) => entry.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// The model folders under `root` with their sizes, least recently used first.
fn folders_oldest_first(root: &Path) -> Vec<(PathBuf, u64)> {
    let mut folders: Vec<(SystemTime, PathBuf, u64)> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| {
            let dir = entry.path();
            let used = std::fs::metadata(dir.join(USED)).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
            let size = folder_bytes(&dir);
            (used, dir, size)
        })
        .collect();
    folders.sort();
    folders.into_iter().map(|(_, dir, size)| (dir, size)).collect()
}

/// Whether writing `bytes` into `dir` leaves its disk `keep_free` bytes
/// free, by default at least 4 GiB and 2 % of its size.
#[cfg(unix)]
fn disk_keeps_free_space(dir: &Path, bytes: u64, keep_free: Option<u64>) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: a NUL-terminated path and a zeroed struct for the call to fill.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut stats) } != 0 {
        return false;
    }
    let unit = stats.f_frsize as u64;
    let (free, size) = (stats.f_bavail as u64 * unit, stats.f_blocks as u64 * unit);
    free >= bytes && free - bytes >= keep_free.unwrap_or((4 * GIB).max(size / 50))
}

#[cfg(not(unix))]
fn disk_keeps_free_space(_dir: &Path, _bytes: u64, _keep_free: Option<u64>) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `rows × cols` matrix of `format` with arbitrary bytes.
    fn ggml(format: GgmlFormat, rows: usize, cols: usize, seed: u32) -> Vec<u8> {
        let len = rows * cols / format.block_values() * format.block_bytes();
        (0..len as u32).map(|i| (i ^ seed).wrapping_mul(2_654_435_761).rotate_right(11) as u8).collect()
    }

    /// A total limit and no free-space margin: the tests must not depend on
    /// how full the disk they run on is.
    fn limits(total: u64) -> Limits {
        Limits { total, keep_free: Some(0) }
    }

    fn model_file(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, name.as_bytes()).unwrap();
        path
    }

    /// A stored matrix comes back, mapped, with the same tiles; a header
    /// that does not match what the loader expects, or a cut file, is
    /// deleted and reads as absent.
    #[test]
    fn tiles_come_back_and_damaged_files_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let model = model_file(dir.path(), "model.gguf");
        let cache = TileCache::open(&dir.path().join("tiles"), &model, limits(64 * GIB)).unwrap();
        assert!(cache.is_empty());
        for (name, format, rows, cols) in
            [("a.weight", GgmlFormat::Q8_0, 40, 64), ("b.weight", GgmlFormat::Q4_K, 17, 512)]
        {
            let bytes = ggml(format, rows, cols, 3);
            let packed = PackedMatrix::from_ggml(format, &bytes, rows, cols).unwrap();
            assert!(cache.load(name, format, rows, cols).is_none());
            let stored = cache.repack(name, format, &bytes, rows, cols).expect("stored");
            assert!(cache.load(name, format, rows, cols).is_none(), "in place only once flushed");
            cache.commit();
            assert_eq!(stored.parts(), packed.parts());
            let loaded = cache.load(name, format, rows, cols).expect("cached");
            assert_eq!(loaded.parts(), packed.parts());
            assert!(cache.load(name, GgmlFormat::Q8_0, rows + 1, cols).is_none(), "another shape");
            assert!(!cache.tile_path(name).exists(), "a mismatched file is deleted");
        }
        cache.repack("c.weight", GgmlFormat::Q4_0, &ggml(GgmlFormat::Q4_0, 16, 64, 5), 16, 64).unwrap();
        cache.commit();
        assert!(!cache.is_empty());
        let path = cache.tile_path("c.weight");
        let len = std::fs::metadata(&path).unwrap().len();
        File::options().write(true).open(&path).unwrap().set_len(len - 1).unwrap();
        assert!(cache.load("c.weight", GgmlFormat::Q4_0, 16, 64).is_none(), "a cut file");
        assert!(!path.exists());
    }

    /// By default a write must leave 4 GiB free; a margin of zero takes what
    /// the disk has, and nothing fits more than the disk holds.
    #[test]
    fn the_disk_keeps_its_margin() {
        let dir = tempfile::tempdir().unwrap();
        assert!(disk_keeps_free_space(dir.path(), 1, Some(0)));
        assert!(!disk_keeps_free_space(dir.path(), u64::MAX / 2, Some(0)));
        assert!(!disk_keeps_free_space(dir.path(), u64::MAX / 2, None));
        assert!(!disk_keeps_free_space(dir.path(), 0, Some(u64::MAX / 2)));
    }

    /// A changed model file gets a folder of its own; over the limit, the
    /// least recently used other folder goes first, and a matrix that cannot
    /// fit at all is not written.
    #[test]
    fn changed_files_get_new_keys_and_old_folders_make_room() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("tiles");
        let first = model_file(dir.path(), "first.gguf");
        let key = file_key(&first).unwrap();
        std::fs::write(&first, b"rewritten, longer").unwrap();
        assert_ne!(file_key(&first).unwrap(), key);
        let q8 = ggml(GgmlFormat::Q8_0, 64, 256, 1);
        let bytes = PackedMatrix::from_ggml(GgmlFormat::Q8_0, &q8, 64, 256).unwrap().bytes() as u64 + PAGE as u64;
        let limit = limits(bytes * 2 + 100);
        let old = TileCache::open(&root, &first, limit).unwrap();
        old.repack("x", GgmlFormat::Q8_0, &q8, 64, 256).unwrap();
        old.repack("y", GgmlFormat::Q8_0, &q8, 64, 256).unwrap();
        old.commit();
        let second = model_file(dir.path(), "second.gguf");
        let new = TileCache::open(&root, &second, limit).unwrap();
        assert!(new.repack("x", GgmlFormat::Q8_0, &q8, 64, 256).is_some(), "the older folder made room");
        new.commit();
        assert!(!old.dir.exists());
        assert!(new.load("x", GgmlFormat::Q8_0, 64, 256).is_some());
        let huge = ggml(GgmlFormat::Q8_0, 3 * 64, 256, 2);
        assert!(new.repack("z", GgmlFormat::Q8_0, &huge, 3 * 64, 256).is_none(), "larger than the limit");
        assert!(!new.tile_path("z").exists());
        std::fs::remove_file(&second).unwrap();
        let third = model_file(dir.path(), "third.gguf");
        TileCache::open(&root, &third, limit).unwrap();
        assert!(!new.dir.exists(), "the tiles of a deleted file go");
    }
}
