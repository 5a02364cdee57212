//! The entries of a zip archive whose files are stored uncompressed, as
//! `torch.save` writes them: read from the central directory at the end,
//! each entry's bytes checked to lie inside the file before it is used.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// End of central directory record: signature and fixed size.
const END_SIGNATURE: u32 = 0x0605_4b50;
const END_SIZE: usize = 22;
/// Central directory file header.
const CENTRAL_SIGNATURE: u32 = 0x0201_4b50;
const CENTRAL_SIZE: usize = 46;
/// Local file header.
const LOCAL_SIGNATURE: u32 = 0x0403_4b50;
const LOCAL_SIZE: usize = 30;
/// Longest archive comment, which may follow the end record.
const MAX_COMMENT: usize = 0xFFFF;

/// An archive of stored entries, memory-mapped.
pub struct StoredZip {
    path: PathBuf,
    mmap: memmap2::Mmap,
    entries: BTreeMap<String, Range<usize>>,
}

fn u16_at(bytes: &[u8], at: usize) -> usize {
    u16::from_le_bytes([bytes[at], bytes[at + 1]]) as usize
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

impl StoredZip {
    /// Opens `path` and reads its directory.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        // SAFETY: read-only map; a file changing underneath is outside what we defend against.
        let mmap = unsafe { memmap2::Mmap::map(&file) }.with_context(|| format!("cannot map {}", path.display()))?;
        let entries =
            read_directory(&mmap).with_context(|| format!("{}: not a readable zip archive", path.display()))?;
        Ok(Self { path: path.to_path_buf(), mmap, entries })
    }

    /// The entries' names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The bytes of entry `name`.
    pub fn entry(&self, name: &str) -> Result<&[u8]> {
        let range = self.entries.get(name).with_context(|| format!("{}: no entry `{name}`", self.path.display()))?;
        Ok(&self.mmap[range.clone()])
    }
}

/// Every entry's data range, from the central directory.
fn read_directory(bytes: &[u8]) -> Result<BTreeMap<String, Range<usize>>> {
    if bytes.len() < END_SIZE {
        bail!("too short for a zip archive");
    }
    let earliest = bytes.len().saturating_sub(END_SIZE + MAX_COMMENT);
    let end = (earliest..=bytes.len() - END_SIZE)
        .rev()
        .find(|&at| u32_at(bytes, at) == END_SIGNATURE)
        .context("no end of central directory")?;
    let count = u16_at(bytes, end + 10);
    let directory_size = u32_at(bytes, end + 12) as usize;
    let directory_start = u32_at(bytes, end + 16) as usize;
    if directory_start.checked_add(directory_size).is_none_or(|e| e > end) {
        bail!("the central directory lies outside the file (a zip64 archive is not supported)");
    }
    let mut entries = BTreeMap::new();
    let mut at = directory_start;
    for _ in 0..count {
        if at + CENTRAL_SIZE > end || u32_at(bytes, at) != CENTRAL_SIGNATURE {
            bail!("a damaged central directory entry at byte {at}");
        }
        let method = u16_at(bytes, at + 10);
        let size = u32_at(bytes, at + 20) as usize;
        let stored_size = u32_at(bytes, at + 24) as usize;
        let (name_len, extra_len, comment_len) =
            (u16_at(bytes, at + 28), u16_at(bytes, at + 30), u16_at(bytes, at + 32));
        let local = u32_at(bytes, at + 42) as usize;
        let name_end = at + CENTRAL_SIZE + name_len;
        if name_end > end {
            bail!("an entry name runs past the directory");
        }
        let name =
            String::from_utf8(bytes[at + CENTRAL_SIZE..name_end].to_vec()).context("an entry name is not UTF-8")?;
        if method != 0 || size != stored_size {
            bail!("entry `{name}` is compressed (method {method}); only stored entries are read");
        }
        if local + LOCAL_SIZE > bytes.len() || u32_at(bytes, local) != LOCAL_SIGNATURE {
            bail!("entry `{name}`: its local header is missing");
        }
        let data = local + LOCAL_SIZE + u16_at(bytes, local + 26) + u16_at(bytes, local + 28);
        if data.checked_add(size).is_none_or(|e| e > bytes.len()) {
            bail!("entry `{name}` runs past the end of the file");
        }
        entries.insert(name, data..data + size);
        at = name_end + extra_len + comment_len;
    }
    Ok(entries)
}
