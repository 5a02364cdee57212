//! Pictures in a prompt: the rows of embeddings a vision model made of each
//! one (its soft tokens), which take the place of the embeddings of the
//! prompt positions its image tokens hold.

use super::tokenizer::TextTokenizer;
use crate::images::decode::{decode, upright_size, DecodedImage, ImageLimits};
use crate::models::vision::{PictureSpelling, Spelled};
use anyhow::{bail, Context, Result};
use candle_core::Tensor;
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::VecDeque;
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What a message's text holds where a picture goes until the prompt is
/// rendered: U+FFFC, Unicode's placeholder for an embedded object (people's
/// own texts may not hold it). Each is then spelled the way the model's
/// processor spells a picture.
pub const PICTURE_MARK: char = '\u{FFFC}';

/// The SHA-256 of a picture's file: what the prompt cache compares, so a
/// cached prompt is reused only for the same picture.
pub type PictureDigest = [u8; 32];

/// One picture placed in a prompt.
#[derive(Debug, Clone)]
pub struct PromptPicture {
    /// The first prompt position its tokens hold.
    pub start: usize,
    /// `(tokens, hidden)`: the embeddings of positions `start..start + tokens`.
    pub embeddings: Tensor,
    pub digest: PictureDigest,
    /// Whether its tokens see each other both ways (Gemma 3) rather than
    /// only those before them.
    pub mutual: bool,
}

impl PromptPicture {
    /// The prompt positions its tokens hold.
    pub fn positions(&self) -> Range<usize> {
        self.start..self.start + self.embeddings.dim(0).unwrap_or(0)
    }
}

/// The spans of positions that see each other both ways and reach into
/// the positions `read` (a piece of the prompt being read).
pub fn mutual_spans(pictures: &[PromptPicture], read: Range<usize>) -> Vec<Range<usize>> {
    let reaching = |span: &Range<usize>| span.start < read.end && span.end > read.start;
    pictures.iter().filter(|p| p.mutual).map(PromptPicture::positions).filter(reaching).collect()
}

/// `embedded (1, t, hidden)`, the embeddings of positions `first..first + t`,
/// with the rows the pictures hold replaced by theirs.
pub fn place(embedded: Tensor, first: usize, pictures: &[PromptPicture]) -> Result<Tensor> {
    let t = embedded.dim(1)?;
    let chunk = first..first + t;
    let mut placed = embedded;
    for picture in pictures {
        let span = picture.positions();
        let (from, to) = (span.start.max(chunk.start), span.end.min(chunk.end));
        if from >= to {
            continue;
        }
        let rows = picture.embeddings.narrow(0, from - span.start, to - from)?.to_dtype(placed.dtype())?;
        let rows = rows.to_device(placed.device())?.unsqueeze(0)?;
        placed = placed.slice_assign(&[0..1, from - first..to - first, 0..placed.dim(2)?], &rows)?;
    }
    Ok(placed)
}

/// `tokens`, the prompt positions `first..`, with the positions pictures
/// take made id 0: their embeddings are replaced, and a picture's
/// placeholder token may lie past the embedding table (a GGUF vocabulary
/// lacks Gemma 3's `<image_soft_token>`, which is added past its end).
pub fn embeddable<'t>(tokens: &'t [u32], first: usize, pictures: &[PromptPicture]) -> Cow<'t, [u32]> {
    let chunk = first..first + tokens.len();
    let inside =
        |picture: &&PromptPicture| picture.positions().start < chunk.end && chunk.start < picture.positions().end;
    if !pictures.iter().any(|p| inside(&p)) {
        return Cow::Borrowed(tokens);
    }
    let mut ids = tokens.to_vec();
    for span in pictures.iter().filter(inside).map(PromptPicture::positions) {
        let (from, to) = (span.start.max(chunk.start), span.end.min(chunk.end));
        ids[from - first..to - first].fill(0);
    }
    Cow::Owned(ids)
}

/// How many of the `wanted` positions from `start` to read at once: fewer
/// where the last would cut a span that sees itself both ways (it must be
/// read in one piece), so the piece ends before that span.
pub fn piece_length(start: usize, wanted: usize, pictures: &[PromptPicture]) -> Result<usize> {
    let end = start + wanted;
    let cut = pictures.iter().filter(|p| p.mutual).map(PromptPicture::positions).find(|s| s.start < end && s.end > end);
    match cut {
        None => Ok(wanted),
        Some(span) if span.start > start => Ok(span.start - start),
        Some(span) => bail!("a picture of {} tokens does not fit in one piece of {wanted}", span.len()),
    }
}

/// Checks that the pictures lie in order inside a prompt of `tokens`
/// positions, one after another without overlapping.
pub fn check_placement(pictures: &[PromptPicture], tokens: usize) -> Result<()> {
    let mut free_from = 0;
    for picture in pictures {
        let span = picture.positions();
        if span.is_empty() || span.start < free_from || span.end > tokens {
            bail!("a picture placed at positions {span:?} of a prompt of {tokens} tokens");
        }
        free_from = span.end;
    }
    Ok(())
}

/// Pictures a request holds that the model cannot take: the request's
/// fault (a 400), not the server's.
#[derive(Debug)]
pub struct PicturesRefused(pub String);

impl std::fmt::Display for PicturesRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PicturesRefused {}

/// A picture attached to a prompt: its file's digest, and its upright
/// pixels, decoded already or read from a kept file when first needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedPicture {
    pub digest: PictureDigest,
    pixels: Pixels,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pixels {
    Decoded(DecodedImage),
    /// A file checked when it was kept, whose digest names it.
    InFile(PathBuf),
}

impl AttachedPicture {
    pub fn new(image: DecodedImage, digest: PictureDigest) -> Self {
        Self { digest, pixels: Pixels::Decoded(image) }
    }

    /// Decodes the file `bytes` (called `name` in errors) within the
    /// default limits.
    pub fn decode(name: &str, bytes: &[u8]) -> Result<Self> {
        let image = decode(name, bytes, &ImageLimits::default())?;
        Ok(Self::new(image, Sha256::digest(bytes).into()))
    }

    /// Reads and decodes the picture file at `path`; a file larger than the
    /// limit is refused before it is read.
    pub fn read(path: &Path) -> Result<Self> {
        Self::decode(&path.display().to_string(), &read_capped(path)?)
    }

    /// The picture kept in the file at `path`, whose contents have the
    /// SHA-256 `digest`: read only when its pixels are needed (a picture
    /// whose soft tokens are remembered never is).
    pub fn in_file(path: PathBuf, digest: PictureDigest) -> Self {
        Self { digest, pixels: Pixels::InFile(path) }
    }

    /// Its upright `(width, height)`, from a kept file's header.
    pub fn upright_size(&self) -> Result<(u32, u32)> {
        match &self.pixels {
            Pixels::Decoded(image) => Ok((image.width, image.height)),
            Pixels::InFile(path) => {
                let bytes = read_capped(path)?;
                Ok(upright_size(&path.display().to_string(), &bytes, &ImageLimits::default())?)
            }
        }
    }

    /// Its upright pixels.
    pub fn image(&self) -> Result<Cow<'_, DecodedImage>> {
        match &self.pixels {
            Pixels::Decoded(image) => Ok(Cow::Borrowed(image)),
            Pixels::InFile(path) => {
                let bytes = read_capped(path)?;
                Ok(Cow::Owned(decode(&path.display().to_string(), &bytes, &ImageLimits::default())?))
            }
        }
    }
}

/// The bytes of the picture file at `path`; a file larger than the limit
/// is refused having read one byte past it.
fn read_capped(path: &Path) -> Result<Vec<u8>> {
    let name = path.display();
    let limit = ImageLimits::default().max_file_bytes;
    let file = std::fs::File::open(path).with_context(|| format!("cannot open {name}"))?;
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1).read_to_end(&mut bytes).with_context(|| format!("cannot read {name}"))?;
    Ok(bytes)
}

/// `rendered`, a prompt whose messages held one [`PICTURE_MARK`] per
/// picture, with each mark spelled as the model's processor spells that
/// picture (`spellings`, in order; for Gemma 3: `\n\n<start_of_image>`,
/// the soft tokens, `<end_of_image>\n\n`).
pub fn spell_pictures(
    rendered: &str,
    spellings: &[Cow<'_, PictureSpelling>],
    tokenizer: &TextTokenizer,
) -> Result<String> {
    let marks = rendered.matches(PICTURE_MARK).count();
    if marks != spellings.len() {
        let why = format!("the model's chat template kept {marks} of the conversation's {} pictures", spellings.len());
        return Err(PicturesRefused(why).into());
    }
    let mut pieces = rendered.split(PICTURE_MARK);
    let mut spelled = String::from(pieces.next().unwrap_or_default());
    for (piece, spelling) in pieces.zip(spellings) {
        spelled.push_str(&spell(spelling, tokenizer)?);
        spelled.push_str(piece);
    }
    Ok(spelled)
}

/// The text one picture is spelled as.
fn spell(spelling: &PictureSpelling, tokenizer: &TextTokenizer) -> Result<String> {
    let name = |id: u32| tokenizer.decode(&[id], false);
    let run = name(spelling.soft_token)?.repeat(spelling.run_length);
    let mut spelled = String::new();
    for piece in &spelling.expansion {
        match piece {
            Spelled::Text(text) => spelled.push_str(text),
            Spelled::Token(id) => spelled.push_str(&name(*id)?),
            Spelled::SoftTokens => spelled.push_str(&run),
        }
    }
    Ok(spelled)
}

/// The pictures of a tokenized prompt: each picture (`attached`, spelled
/// as `spellings` say) takes the next runs of soft tokens, and the
/// embeddings `encode` makes of it fill them in order.
pub fn place_pictures(
    tokens: &[u32],
    attached: &[&AttachedPicture],
    spellings: &[Cow<'_, PictureSpelling>],
    encode: impl Fn(&AttachedPicture) -> Result<Tensor>,
) -> Result<Vec<PromptPicture>> {
    let Some(first) = spellings.first() else { return Ok(Vec::new()) };
    let runs = soft_token_runs(tokens, first.soft_token);
    let wanted: usize = spellings.iter().map(|s| s.runs()).sum();
    if runs.len() != wanted || attached.len() != spellings.len() {
        let why = format!("the prompt holds {} runs of picture tokens where its pictures make {wanted}", runs.len());
        return Err(PicturesRefused(why).into());
    }
    let mut runs = runs.into_iter();
    let mut placed = Vec::with_capacity(wanted);
    for (picture, spelling) in attached.iter().zip(spellings) {
        let length = spelling.run_length;
        let own: Vec<Range<usize>> = runs.by_ref().take(spelling.runs()).collect();
        if let Some(run) = own.iter().find(|run| run.len() != length) {
            bail!("a picture's tokens run over {} positions, not {length}", run.len());
        }
        let embeddings = encode(picture)?;
        if embeddings.dim(0)? != own.len() * length {
            bail!("the picture reader made {} tokens for {} places", embeddings.dim(0)?, own.len() * length);
        }
        for (i, run) in own.iter().enumerate() {
            let embeddings = embeddings.narrow(0, i * length, length)?;
            placed.push(PromptPicture {
                start: run.start,
                embeddings,
                digest: picture.digest,
                mutual: spelling.mutual,
            });
        }
    }
    Ok(placed)
}

/// How many pictures' soft tokens [`PictureMemo`] keeps: a conversation's
/// recent pictures (Gemma 3 4B's take 2.6 MB each).
const REMEMBERED_PICTURES: usize = 8;

/// How many pictures' sizes [`PictureMemo`] keeps (a few bytes each).
const REMEMBERED_SIZES: usize = 256;

/// The soft tokens of the pictures read last, by digest: a conversation
/// sends its pictures again with every question, and each is read once;
/// and their sizes, which spell a picture for some models, so that a kept
/// file's header is read once.
pub struct PictureMemo {
    tokens: Recent<Tensor>,
    sizes: Recent<(u32, u32)>,
}

impl Default for PictureMemo {
    fn default() -> Self {
        Self { tokens: Recent::new(REMEMBERED_PICTURES), sizes: Recent::new(REMEMBERED_SIZES) }
    }
}

impl PictureMemo {
    /// The soft tokens of the picture with `digest`: remembered, or made by
    /// `encode` and remembered (the oldest forgotten past the limit).
    pub fn get_or_encode(&self, digest: PictureDigest, encode: impl FnOnce() -> Result<Tensor>) -> Result<Tensor> {
        self.tokens.get_or_make(digest, encode)
    }

    /// The upright size of `picture`, remembered or read.
    pub fn upright_size(&self, picture: &AttachedPicture) -> Result<(u32, u32)> {
        self.sizes.get_or_make(picture.digest, || picture.upright_size())
    }
}

/// The values made last for at most `limit` digests.
struct Recent<V> {
    kept: Mutex<VecDeque<(PictureDigest, V)>>,
    limit: usize,
}

impl<V: Clone> Recent<V> {
    fn new(limit: usize) -> Self {
        Self { kept: Mutex::default(), limit }
    }

    /// The value for `digest`: remembered, or made by `make` and
    /// remembered (the oldest forgotten past the limit).
    fn get_or_make(&self, digest: PictureDigest, make: impl FnOnce() -> Result<V>) -> Result<V> {
        if let Some(found) = self.kept().iter().find(|(d, _)| *d == digest).map(|(_, v)| v.clone()) {
            return Ok(found);
        }
        // Made without the lock held: another request's picture need not wait.
        let made = make()?;
        let mut kept = self.kept();
        if !kept.iter().any(|(d, _)| *d == digest) {
            if kept.len() == self.limit {
                kept.pop_front();
            }
            kept.push_back((digest, made.clone()));
        }
        Ok(made)
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, VecDeque<(PictureDigest, V)>> {
        // A making that panicked left the list whole: each change is one push or pop.
        self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The runs of consecutive `token` in `tokens`.
fn soft_token_runs(tokens: &[u32], token: u32) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    for (i, _) in tokens.iter().enumerate().filter(|(_, &t)| t == token) {
        match runs.last_mut() {
            Some(run) if run.end == i => run.end = i + 1,
            _ => runs.push(i..i + 1),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn picture(start: usize, tokens: usize, mutual: bool) -> PromptPicture {
        let embeddings = Tensor::ones((tokens, 2), candle_core::DType::F32, &Device::Cpu).unwrap();
        PromptPicture { start, embeddings, digest: [0; 32], mutual }
    }

    #[test]
    fn pieces_end_before_a_picture_they_would_cut() {
        let pictures = [picture(10, 4, true)];
        assert_eq!(piece_length(0, 12, &pictures).unwrap(), 10);
        assert_eq!(piece_length(10, 12, &pictures).unwrap(), 12);
        assert_eq!(piece_length(0, 14, &pictures).unwrap(), 14);
        // Tokens that see only their past may be cut anywhere.
        assert_eq!(piece_length(0, 12, &[picture(10, 4, false)]).unwrap(), 12);
        assert!(piece_length(10, 3, &pictures).is_err());
    }

    #[test]
    fn rows_of_a_picture_replace_the_embeddings_they_overlap() {
        let embedded = Tensor::zeros((1, 4, 2), candle_core::DType::F32, &Device::Cpu).unwrap();
        let placed = place(embedded, 8, &[picture(10, 4, true)]).unwrap();
        let rows: Vec<Vec<f32>> = placed.squeeze(0).unwrap().to_vec2().unwrap();
        assert_eq!(rows, [[0.0, 0.0], [0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]);
    }

    #[test]
    fn the_memo_reads_each_picture_once_and_forgets_the_oldest() {
        let memo = PictureMemo::default();
        let reads = std::cell::Cell::new(0);
        let read = |value: f32| {
            reads.set(reads.get() + 1);
            Ok(Tensor::new(&[value], &Device::Cpu)?)
        };
        for round in 0..2 {
            for picture in 0..REMEMBERED_PICTURES as u8 {
                let got = memo.get_or_encode([picture; 32], || read(f32::from(picture))).unwrap();
                assert_eq!(got.to_vec1::<f32>().unwrap(), [f32::from(picture)], "round {round}");
            }
        }
        assert_eq!(reads.get(), REMEMBERED_PICTURES);
        memo.get_or_encode([200; 32], || read(200.0)).unwrap();
        memo.get_or_encode([0; 32], || read(0.0)).unwrap();
        assert_eq!(reads.get(), REMEMBERED_PICTURES + 2, "the oldest was forgotten");
    }

    #[test]
    fn soft_tokens_are_found_as_runs() {
        assert_eq!(soft_token_runs(&[1, 7, 7, 2, 7, 3], 7), [1..3, 4..5]);
        assert!(soft_token_runs(&[1, 2], 7).is_empty());
    }

    #[test]
    fn overlapping_or_outside_pictures_are_refused() {
        assert!(check_placement(&[picture(0, 4, true), picture(3, 2, true)], 10).is_err());
        assert!(check_placement(&[picture(8, 4, true)], 10).is_err());
        assert!(check_placement(&[picture(0, 4, true), picture(4, 2, true)], 10).is_ok());
    }
}
