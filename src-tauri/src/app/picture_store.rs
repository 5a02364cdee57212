//! The pictures the app's conversations show, in `pictures/` of the data
//! folder: each file kept once, as it came, named by the SHA-256 of its
//! bytes (so a picture attached twice is stored once), with a small JPEG
//! beside it for thumbnails. A file is checked by decoding it before it is
//! kept; a stored message names its pictures by these ids.

use super::error::ApiError;
use crate::files::storage::{write_atomically, StorageError};
use crate::images::decode::{DecodedImage, ImageLimits};
use crate::images::resize::{resize, Filter};
use crate::text::chat_template::{ChatMessage, MessagePart};
use crate::text::pictures::{AttachedPicture, PictureDigest};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The longest side of a thumbnail, in pixels (twice what the chat shows,
/// for sharp screens).
const THUMBNAIL_SIDE: u32 = 320;
/// How long a picture attached but never sent is kept: one still in a
/// composer must not vanish.
pub const UNSENT_PICTURE_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// A stored picture's id: the SHA-256 of its file, 64 lower-case hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PictureId(String);

impl PictureId {
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self::of_digest(&Sha256::digest(bytes).into())
    }

    fn of_digest(digest: &PictureDigest) -> Self {
        Self(digest.iter().map(|byte| format!("{byte:02x}")).collect())
    }

    pub fn digest(&self) -> PictureDigest {
        let mut digest = [0u8; 32];
        for (i, byte) in digest.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&self.0[2 * i..2 * i + 2], 16).expect("ids are checked hex");
        }
        digest
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for PictureId {
    type Error = String;

    fn try_from(id: String) -> std::result::Result<Self, String> {
        let valid = id.len() == 64 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if valid {
            Ok(Self(id))
        } else {
            Err(format!("`{}` is not a picture id (64 lower-case hex digits)", id.chars().take(80).collect::<String>()))
        }
    }
}

impl From<PictureId> for String {
    fn from(id: PictureId) -> Self {
        id.0
    }
}

/// What `add_picture` answers: the id a message names the picture by, and
/// its upright size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredPicture {
    pub id: PictureId,
    pub width: u32,
    pub height: u32,
}

pub struct PictureStore {
    dir: PathBuf,
}

impl PictureStore {
    /// The store in `data_dir/pictures`.
    pub fn new(data_dir: &Path) -> Self {
        Self { dir: data_dir.join("pictures") }
    }

    fn file(&self, id: &PictureId) -> PathBuf {
        self.dir.join(id.as_str())
    }

    fn thumbnail_file(&self, id: &PictureId) -> PathBuf {
        self.dir.join(format!("{}.thumb.jpg", id.as_str()))
    }

    /// Checks the picture file `bytes` (called `name` in errors) by
    /// decoding it, and keeps it with its thumbnail unless it is kept
    /// already (then it counts as attached just now).
    pub fn add_bytes(&self, name: &str, bytes: &[u8]) -> Result<StoredPicture> {
        let picture = AttachedPicture::decode(name, bytes)?;
        let image = picture.image()?;
        let id = PictureId::of_digest(&picture.digest);
        let file = self.file(&id);
        if file.is_file() {
            // Newly attached: not swept as an unsent upload for a while.
            let _ = std::fs::File::options().append(true).open(&file).and_then(|f| f.set_modified(SystemTime::now()));
        } else {
            write_atomically(&file, bytes)?;
        }
        if !self.thumbnail_file(&id).is_file() {
            write_atomically(&self.thumbnail_file(&id), &thumbnail_jpeg(&image)?)?;
        }
        Ok(StoredPicture { id, width: image.width, height: image.height })
    }

    /// Keeps the picture file at `path` on this machine (the desktop
    /// window's drops), as [`PictureStore::add_bytes`] does.
    pub fn add_file(&self, path: &Path) -> Result<StoredPicture> {
        let limit = ImageLimits::default().max_file_bytes as u64;
        let size = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?.len();
        if size > limit {
            anyhow::bail!("{}: the picture is {size} bytes, more than the {limit} allowed", path.display());
        }
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        self.add_bytes(&path.display().to_string(), &bytes)
    }

    /// The stored picture `id`, to attach to a prompt (its file is read
    /// only if its soft tokens are not remembered).
    pub fn attached(&self, id: &PictureId) -> Result<AttachedPicture, ApiError> {
        let file = self.file(id);
        if !file.is_file() {
            return Err(ApiError::BadRequest(format!(
                "picture {} is not kept any more (its conversation was deleted); attach it again",
                &id.as_str()[..12]
            )));
        }
        Ok(AttachedPicture::in_file(file, id.digest()))
    }

    /// The JPEG thumbnail of picture `id`, made again if it went missing.
    pub fn thumbnail(&self, id: &PictureId) -> Result<Vec<u8>, ApiError> {
        match std::fs::read(self.thumbnail_file(id)) {
            Ok(bytes) => return Ok(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(ApiError::server(StorageError::Read { path: self.thumbnail_file(id), source }.into()))
            }
        }
        let image = self.attached(id).map_err(|_| ApiError::NotFound(format!("no picture {}", id.as_str())))?;
        let image = image.image().map_err(ApiError::server)?;
        let jpeg = thumbnail_jpeg(&image).map_err(ApiError::server)?;
        write_atomically(&self.thumbnail_file(id), &jpeg).map_err(ApiError::server)?;
        Ok(jpeg)
    }

    /// Deletes the pictures among `candidates` that no conversation
    /// uses (`used`); returns how many went.
    pub fn forget(&self, candidates: &HashSet<PictureId>, used: &HashSet<PictureId>) -> usize {
        candidates.iter().filter(|id| !used.contains(*id)).filter(|id| self.remove(id)).count()
    }

    /// Deletes the pictures no conversation uses (`used`) that were
    /// attached longer than `lifetime` ago: uploads never sent.
    pub fn forget_unsent(&self, used: &HashSet<PictureId>, lifetime: Duration) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let stale = |path: &Path| {
            let modified = std::fs::metadata(path).and_then(|m| m.modified());
            modified.is_ok_and(|at| at.elapsed().is_ok_and(|age| age > lifetime))
        };
        entries
            .filter_map(|entry| entry.ok())
            .filter_map(|entry| PictureId::try_from(entry.file_name().to_string_lossy().into_owned()).ok())
            .filter(|id| !used.contains(id) && stale(&self.file(id)))
            .filter(|id| self.remove(id))
            .count()
    }

    fn remove(&self, id: &PictureId) -> bool {
        let _ = std::fs::remove_file(self.thumbnail_file(id));
        match std::fs::remove_file(self.file(id)) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => {
                tracing::warn!(picture = id.as_str(), cause = %e, "cannot delete an unused picture");
                false
            }
        }
    }
}

/// A message of the app's `chat` naming the stored pictures its turn shows
/// (before its text).
#[derive(Debug, Deserialize)]
pub struct MessageWithPictures {
    #[serde(flatten)]
    pub message: ChatMessage,
    #[serde(default)]
    pub pictures: Vec<PictureId>,
}

impl MessageWithPictures {
    /// The turn with its pictures attached; the `n`th (from 1) in errors.
    pub fn attach(self, n: usize, store: &PictureStore) -> Result<ChatMessage, ApiError> {
        if self.pictures.is_empty() {
            return Ok(self.message);
        }
        if self.message.role != "user" {
            return Err(ApiError::BadRequest(format!("message {n}: only a user's turn may show pictures")));
        }
        let mut parts = Vec::with_capacity(self.pictures.len() + 1);
        for id in &self.pictures {
            let picture = store.attached(id).map_err(|e| ApiError::BadRequest(format!("message {n}: {e}")))?;
            parts.push(MessagePart::Picture(picture));
        }
        parts.push(MessagePart::Text(self.message.content));
        Ok(ChatMessage::with_parts("user", parts))
    }
}

/// The ids a stored conversation's messages name under `pictures`, in any
/// version of it (alternatives nest messages).
pub fn pictures_in(conversation: &serde_json::Value, into: &mut HashSet<PictureId>) {
    match conversation {
        serde_json::Value::Object(fields) => {
            for (key, value) in fields {
                if key == "pictures" {
                    let ids = value.as_array().into_iter().flatten().filter_map(|v| v.as_str());
                    into.extend(ids.filter_map(|id| PictureId::try_from(id.to_string()).ok()));
                } else {
                    pictures_in(value, into);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| pictures_in(item, into)),
        _ => {}
    }
}

/// `image` shrunk to fit [`THUMBNAIL_SIDE`] (kept as it is when smaller),
/// as a JPEG file.
fn thumbnail_jpeg(image: &DecodedImage) -> Result<Vec<u8>> {
    let longest = image.width.max(image.height);
    let shrunk;
    let small = if longest > THUMBNAIL_SIDE {
        let scale =
            |side: u32| ((u64::from(side) * u64::from(THUMBNAIL_SIDE)).div_ceil(u64::from(longest)) as u32).max(1);
        shrunk = resize(image, scale(image.width), scale(image.height), Filter::Bilinear);
        &shrunk
    } else {
        image
    };
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 85)
        .encode(&small.rgb, small.width, small.height, image::ExtendedColorType::Rgb8)
        .context("cannot make the picture's thumbnail")?;
    Ok(jpeg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::ImageEncoder;

    /// A PNG file of `width × height` pixels of one colour.
    fn png(width: u32, height: u32, shade: u8) -> Vec<u8> {
        let mut bytes = Vec::new();
        let pixels = vec![shade; (width * height * 3) as usize];
        image::codecs::png::PngEncoder::new(&mut bytes)
            .write_image(&pixels, width, height, image::ExtendedColorType::Rgb8)
            .unwrap();
        bytes
    }

    #[test]
    fn a_picture_is_kept_once_under_its_digest_with_a_thumbnail() {
        let dir = tempfile::tempdir().unwrap();
        let store = PictureStore::new(dir.path());
        let file = png(1000, 500, 90);
        let stored = store.add_bytes("wide.png", &file).unwrap();
        assert_eq!((stored.width, stored.height), (1000, 500));
        assert_eq!(stored.id, PictureId::of_bytes(&file));
        assert_eq!(store.add_bytes("again.png", &file).unwrap(), stored, "the same file is the same picture");
        assert_eq!(std::fs::read(store.file(&stored.id)).unwrap(), file, "kept as it came");

        let thumbnail = image::load_from_memory(&store.thumbnail(&stored.id).unwrap()).unwrap();
        assert_eq!((thumbnail.width(), thumbnail.height()), (THUMBNAIL_SIDE, THUMBNAIL_SIDE / 2));
        std::fs::remove_file(store.thumbnail_file(&stored.id)).unwrap();
        assert!(store.thumbnail(&stored.id).is_ok(), "a lost thumbnail is made again");

        let attached = store.attached(&stored.id).unwrap();
        assert_eq!(attached.digest, stored.id.digest());
        assert_eq!(attached.image().unwrap().width, 1000);
    }

    #[test]
    fn what_is_not_a_picture_is_refused_naming_it_and_nothing_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = PictureStore::new(dir.path());
        let error = store.add_bytes("notes.txt", b"shopping list").unwrap_err();
        assert!(format!("{error:#}").starts_with("notes.txt: "), "{error:#}");
        assert!(
            !dir.path().join("pictures").exists()
                || std::fs::read_dir(dir.path().join("pictures")).unwrap().count() == 0
        );
        let missing = PictureId::of_bytes(b"never stored");
        assert!(matches!(store.attached(&missing), Err(ApiError::BadRequest(m)) if m.contains("not kept any more")));
        assert!(matches!(store.thumbnail(&missing), Err(ApiError::NotFound(_))));
    }

    #[test]
    fn ids_are_sha256_hex_and_nothing_else() {
        for bad in ["", "../etc/passwd", &"A".repeat(64), &"0".repeat(63), &format!("{}.thumb.jpg", "0".repeat(64))] {
            assert!(PictureId::try_from(bad.to_string()).is_err(), "{bad}");
        }
        let id = PictureId::of_bytes(b"abc");
        assert_eq!(id.as_str(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(PictureId::try_from(id.as_str().to_string()).unwrap(), id);
    }

    #[test]
    fn unused_pictures_go_and_used_or_fresh_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let store = PictureStore::new(dir.path());
        let [a, b, c] = [1, 2, 3].map(|shade| store.add_bytes("p.png", &png(8, 8, shade)).unwrap().id);
        let used: HashSet<PictureId> = [a.clone()].into();
        assert_eq!(store.forget_unsent(&used, UNSENT_PICTURE_LIFETIME), 0, "fresh uploads stay");
        let old = SystemTime::now() - 2 * UNSENT_PICTURE_LIFETIME;
        for id in [&a, &b] {
            std::fs::File::options().append(true).open(store.file(id)).unwrap().set_modified(old).unwrap();
        }
        assert_eq!(store.forget_unsent(&used, UNSENT_PICTURE_LIFETIME), 1);
        assert!(store.file(&a).exists() && !store.file(&b).exists() && !store.thumbnail_file(&b).exists());
        assert!(store.file(&c).exists(), "attached just now");
        assert_eq!(store.forget(&[a.clone(), c.clone()].into(), &[c.clone()].into()), 1);
        assert!(!store.file(&a).exists() && store.file(&c).exists());
    }

    #[test]
    fn a_conversation_names_its_pictures_in_every_version() {
        let [a, b] = [b"a".as_slice(), b"b"].map(PictureId::of_bytes);
        let conversation = serde_json::json!({"messages": [
            {"role": "user", "content": "x", "pictures": [a.as_str(), "not an id"],
             "alternatives": {"others": [[{"role": "user", "content": "y", "pictures": [b.as_str()]}]], "position": 1}}
        ]});
        let mut found = HashSet::new();
        pictures_in(&conversation, &mut found);
        assert_eq!(found, [a, b].into());
    }

    #[test]
    fn a_message_shows_its_pictures_before_its_text_and_only_a_user_turn_may() {
        let dir = tempfile::tempdir().unwrap();
        let store = PictureStore::new(dir.path());
        let id = store.add_bytes("p.png", &png(4, 4, 7)).unwrap().id;
        let message = |role: &str| -> MessageWithPictures {
            serde_json::from_value(
                serde_json::json!({"role": role, "content": "What is it?", "pictures": [id.as_str()]}),
            )
            .unwrap()
        };
        let attached = message("user").attach(1, &store).unwrap();
        assert_eq!(attached.content, "\u{FFFC}What is it?");
        assert_eq!(attached.pictures.len(), 1);
        assert!(
            matches!(message("assistant").attach(2, &store), Err(ApiError::BadRequest(m)) if m.starts_with("message 2"))
        );
    }
}
