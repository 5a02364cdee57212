//! SmolVLM's picture reader (Idefics3's design, `SmolVLMForConditionalGeneration`):
//! the processor cuts a picture into square tiles plus the whole picture
//! shrunk to one tile, SigLIP reads each tile, and the connector folds
//! each `scale × scale` block of patches into one token (pixel shuffle)
//! and projects it into the text model's width.
//!
//! The model looks its positions up by bucketing each patch's place in its
//! tile (it was trained on pictures of any shape). Every tile the
//! processor makes is whole, and for a whole tile those buckets are the
//! patches' own positions in the released grids (26, 27 and 32 patches a
//! side; transformers computes them with `torch.arange` in float32, whose
//! rounding depends on the processor's vector width, and makes some other
//! grids, such as 19 or 25, skip a bucket).

use super::mmproj::Mmproj;
use super::siglip::{SiglipConfig, SiglipVision};
use super::tensors::Tensors;
use super::{PictureSpelling, PictureVocabulary, Spelled};
use crate::images::decode::DecodedImage;
use crate::images::pixels::{pixel_values, Normalization};
use crate::images::resize::{resize, Filter};
use anyhow::{bail, Context, Result};
use candle_core::Tensor;
use serde::Deserialize;
use std::path::Path;

/// The largest side the processor lets a resized picture have.
const MAX_SIDE: u32 = 4096;

/// The picture-related part of a SmolVLM config.json.
#[derive(Debug, Deserialize)]
struct SmolVlmConfig {
    vision_config: SiglipConfig,
    #[serde(default = "default_scale")]
    scale_factor: usize,
    image_token_id: Option<u32>,
}

/// What processor_config.json says: the tokens of one tile.
#[derive(Debug, Deserialize)]
struct ProcessorConfig {
    image_seq_len: Option<usize>,
}

/// Where the tower's and the connector's weights are, in a model folder.
const PREFIXES: &[&str] = &["model.vision_model.", "model.connector."];
/// The connector's projection.
const PROJECTION: &str = "model.connector.modality_projection.proj.weight";

/// The tokens SmolVLM's processor spells a picture with.
const FAKE_TOKEN_AROUND_IMAGE: &str = "<fake_token_around_image>";
const GLOBAL_IMAGE: &str = "<global-img>";
const IMAGE: &str = "<image>";

/// The token that opens the tile in row `row`, column `col` (from 1).
fn tile_token(row: u32, col: u32) -> String {
    format!("<row_{row}_col_{col}>")
}

fn default_scale() -> usize {
    2
}

/// What preprocessor_config.json says of the pictures' preparation.
#[derive(Debug, Deserialize)]
struct Preprocessor {
    size: LongestEdge,
    max_image_size: LongestEdge,
    #[serde(default = "yes")]
    do_image_splitting: bool,
    #[serde(default = "yes")]
    do_resize: bool,
    /// PIL's resampling code (1: Lanczos, 2: bilinear, 3: bicubic).
    #[serde(default = "lanczos")]
    resample: u8,
    image_mean: Option<[f32; 3]>,
    image_std: Option<[f32; 3]>,
    rescale_factor: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct LongestEdge {
    longest_edge: u32,
}

fn yes() -> bool {
    true
}
fn lanczos() -> u8 {
    1
}

/// How the processor prepares a picture.
pub struct Tiling {
    /// The side the picture's longest side is first resized to.
    longest_side: Option<u32>,
    /// A tile's side (the tower's picture size).
    tile: u32,
    split: bool,
    filter: Filter,
    pub normalization: Normalization,
}

/// A picture cut into tiles: `rows × cols` tiles row by row, then the
/// whole picture as one tile (just that one when `rows` and `cols` are 0).
pub struct Tiles {
    pub tiles: Vec<DecodedImage>,
    pub rows: usize,
    pub cols: usize,
}

impl Tiling {
    /// The size a `width × height` picture is first resized to.
    fn first_size(&self, width: u32, height: u32) -> (u32, u32) {
        match self.longest_side {
            Some(side) => {
                let (w, h) = longest_side_made(width, height, side);
                within(w, h, MAX_SIDE)
            }
            None => (width, height),
        }
    }

    /// The rows and columns of tiles a `width × height` picture is cut
    /// into, with the size it is resized to for cutting; `None` when it
    /// makes one tile.
    fn grid(&self, width: u32, height: u32) -> Option<(u32, u32, (u32, u32))> {
        if !self.split {
            return None;
        }
        let (w, h) = self.first_size(width, height);
        let (w, h) = whole_tiles(w, h, self.tile);
        (w > self.tile || h > self.tile).then_some((h / self.tile, w / self.tile, (w, h)))
    }

    /// The tiles of `picture`, as SmolVLMImageProcessor makes them.
    pub fn tiles(&self, picture: &DecodedImage) -> Tiles {
        let (w, h) = self.first_size(picture.width, picture.height);
        let image = match self.longest_side {
            Some(_) => resize(picture, w, h, self.filter),
            None => picture.clone(),
        };
        let Some((rows, cols, (w, h))) = self.grid(picture.width, picture.height) else {
            return Tiles { tiles: vec![resize(&image, self.tile, self.tile, self.filter)], rows: 0, cols: 0 };
        };
        let image = resize(&image, w, h, self.filter);
        let mut tiles: Vec<DecodedImage> = (0..rows)
            .flat_map(|r| (0..cols).map(move |c| (r, c)))
            .map(|(r, c)| image.crop(c * self.tile, r * self.tile, self.tile, self.tile))
            .collect();
        tiles.push(resize(&image, self.tile, self.tile, self.filter));
        Tiles { tiles, rows: rows as usize, cols: cols as usize }
    }
}

/// `(width, height)` with the longest side made `side` (the other in
/// proportion, rounded down, then up to even), as the processor resizes.
fn longest_side_made(width: u32, height: u32, side: u32) -> (u32, u32) {
    let aspect = f64::from(width) / f64::from(height);
    let (width, height) = if width >= height {
        let h = (f64::from(side) / aspect) as u32;
        (side, h + h % 2)
    } else {
        let w = (f64::from(side) * aspect) as u32;
        (w + w % 2, side)
    };
    (width.max(1), height.max(1))
}

/// `(width, height)` shrunk in proportion so that no side passes `limit`.
fn within(width: u32, height: u32, limit: u32) -> (u32, u32) {
    let aspect = f64::from(width) / f64::from(height);
    let (width, height) = if width >= height && width > limit {
        (limit, (f64::from(limit) / aspect) as u32)
    } else if height > width && height > limit {
        ((f64::from(limit) * aspect) as u32, limit)
    } else {
        (width, height)
    };
    (width.max(1), height.max(1))
}

/// `(width, height)` grown to whole tiles of `tile`, as the processor
/// resizes before cutting.
fn whole_tiles(width: u32, height: u32, tile: u32) -> (u32, u32) {
    let aspect = f64::from(width) / f64::from(height);
    let up = |side: u32| side.div_ceil(tile) * tile;
    if width >= height {
        let w = up(width);
        (w, up((f64::from(w) / aspect) as u32))
    } else {
        let h = up(height);
        (up((f64::from(h) * aspect) as u32), h)
    }
}

pub struct SmolVlmVision {
    tower: SiglipVision,
    /// `(text hidden, vision hidden · scale²)`.
    projection: Tensor,
    scale: usize,
    tiling: Tiling,
    tokens: PictureTokens,
}

/// The ids of the tokens that spell a picture.
struct PictureTokens {
    /// `<fake_token_around_image>`, around each tile.
    around: u32,
    /// `<global-img>`, before the whole picture's tile.
    global: u32,
    /// `<image>`, whose positions a tile's tokens take.
    soft: u32,
    /// `<row_r_col_c>` before each cut tile, row by row, as many rows and
    /// columns as the largest picture makes.
    grid: Vec<Vec<u32>>,
    /// The tokens of one tile.
    per_tile: usize,
}

impl SmolVlmVision {
    /// The reader of the folder `dir` whose config.json is `config`, for
    /// a text model whose vocabulary is `vocabulary`.
    pub fn load(dir: &Path, config: &serde_json::Value, vocabulary: &dyn PictureVocabulary) -> Result<Self> {
        let config: SmolVlmConfig = serde_json::from_value(config.clone()).context("config.json")?;
        let path = dir.join("preprocessor_config.json");
        let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
        let preprocessor: Preprocessor = serde_json::from_str(&text).with_context(|| path.display().to_string())?;
        let vision = config.vision_config;
        let tile = vision.image_size as u32;
        if preprocessor.max_image_size.longest_edge != tile {
            bail!(
                "{}: tiles of {} for a tower reading {tile}",
                path.display(),
                preprocessor.max_image_size.longest_edge
            );
        }
        let filter = match preprocessor.resample {
            1 => Filter::Lanczos,
            2 => Filter::Bilinear,
            3 => Filter::Bicubic,
            other => bail!("{}: resampling filter {other} is not supported", path.display()),
        };
        let tiling = Tiling {
            longest_side: preprocessor.do_resize.then_some(preprocessor.size.longest_edge),
            tile,
            split: preprocessor.do_image_splitting,
            filter,
            normalization: Normalization {
                rescale: preprocessor.rescale_factor.unwrap_or(1.0 / 255.0),
                mean: preprocessor.image_mean.unwrap_or(Normalization::HALF.mean),
                std: preprocessor.image_std.unwrap_or(Normalization::HALF.std),
            },
        };
        let reader = Self::build(vision, config.scale_factor, tiling, &Tensors::open(dir, PREFIXES)?, vocabulary)?;
        if config.image_token_id.is_some_and(|configured| configured != reader.tokens.soft) {
            bail!("config.json's image_token_id is not the vocabulary's {IMAGE} ({})", reader.tokens.soft);
        }
        let path = dir.join("processor_config.json");
        if let Ok(text) = std::fs::read_to_string(&path) {
            let processor: ProcessorConfig = serde_json::from_str(&text).with_context(|| path.display().to_string())?;
            if processor.image_seq_len.is_some_and(|n| n != reader.tokens.per_tile) {
                bail!("{}: image_seq_len is not the {} tokens a tile makes", path.display(), reader.tokens.per_tile);
            }
        }
        Ok(reader)
    }

    /// The reader in llama.cpp's mmproj file `mmproj` (projector
    /// `idefics3`), for a text model whose vocabulary is `vocabulary`. The
    /// file keeps the tower's shape, the longest side pictures are resized
    /// to and their normalisation; the rest is as the released processors
    /// prepare pictures (Lanczos, cut into tiles).
    pub fn from_mmproj(mmproj: Mmproj, vocabulary: &dyn PictureVocabulary) -> Result<Self> {
        let origin = mmproj.path().display().to_string();
        let vision = mmproj.siglip_config()?;
        let tile = vision.image_size as u32;
        let longest_side = match mmproj.vision_usize("preproc_image_size")? {
            Some(side) => u32::try_from(side).with_context(|| format!("{origin}: a longest side of {side}"))?,
            None => tile,
        };
        let tiling = Tiling {
            longest_side: Some(longest_side),
            tile,
            split: true,
            filter: Filter::Lanczos,
            normalization: Normalization {
                rescale: 1.0 / 255.0,
                mean: mmproj.channel_values("image_mean")?.unwrap_or(Normalization::HALF.mean),
                std: mmproj.channel_values("image_std")?.unwrap_or(Normalization::HALF.std),
            },
        };
        let scale = mmproj.vision_usize("projector.scale_factor")?.unwrap_or_else(default_scale);
        Self::build(vision, scale, tiling, &Tensors::Mmproj(mmproj), vocabulary)
            .with_context(|| format!("{origin}: not a usable SmolVLM picture reader"))
    }

    fn build(
        vision: SiglipConfig,
        scale: usize,
        tiling: Tiling,
        tensors: &Tensors,
        vocabulary: &dyn PictureVocabulary,
    ) -> Result<Self> {
        let side = vision.patches_per_side();
        if scale == 0 || !side.is_multiple_of(scale) {
            bail!("a {side} × {side} patch grid cannot be shuffled in blocks of {scale}");
        }
        let per_tile = (side / scale) * (side / scale);
        let tokens = picture_tokens(&tiling, per_tile, vocabulary)?;
        let vision_width = vision.hidden_size;
        let tower = SiglipVision::load(vision, tensors, "model.vision_model")?;
        let projection = tensors.load(PROJECTION)?;
        if projection.dim(1)? != vision_width * scale * scale {
            bail!("the connector's projection {:?} does not take {vision_width} × {scale}² values", projection.dims());
        }
        Ok(Self { tower, projection, scale, tiling, tokens })
    }

    /// How the prompt spells a `width × height` picture: each tile's
    /// tokens after its row and column, a line per row of tiles, then the
    /// whole picture's.
    pub fn spelling(&self, width: u32, height: u32) -> Result<PictureSpelling> {
        let tokens = &self.tokens;
        let mut expansion = Vec::new();
        if let Some((rows, cols, _)) = self.tiling.grid(width, height) {
            for row in 0..rows as usize {
                for col in 0..cols as usize {
                    let Some(&opens) = tokens.grid.get(row).and_then(|r| r.get(col)) else {
                        bail!(
                            "a {width} × {height} picture makes {rows} × {cols} tiles, more than the vocabulary names"
                        );
                    };
                    expansion.extend([Spelled::Token(tokens.around), Spelled::Token(opens), Spelled::SoftTokens]);
                }
                expansion.push(Spelled::Text("\n"));
            }
            expansion.push(Spelled::Text("\n"));
        }
        expansion.extend([
            Spelled::Token(tokens.around),
            Spelled::Token(tokens.global),
            Spelled::SoftTokens,
            Spelled::Token(tokens.around),
        ]);
        Ok(PictureSpelling { expansion, soft_token: tokens.soft, run_length: tokens.per_tile, mutual: false })
    }

    /// The tokens of `picture`: each tile's, in the order of its spelling.
    pub fn encode(&self, picture: &DecodedImage) -> Result<Tensor> {
        let tiles = self.tiling.tiles(picture);
        let encoded = tiles.tiles.iter().map(|tile| self.encode_tile(tile)).collect::<Result<Vec<_>>>()?;
        Ok(Tensor::cat(&encoded, 0)?)
    }

    pub fn tiling(&self) -> &Tiling {
        &self.tiling
    }

    /// The tower's features of one tile: `(patches, vision hidden)`.
    pub fn tower_features(&self, tile: &DecodedImage) -> Result<Tensor> {
        self.tower.forward(&pixel_values(tile, &self.tiling.normalization))
    }

    /// The tokens of one tile: `(tokens, text hidden)`.
    pub fn encode_tile(&self, tile: &DecodedImage) -> Result<Tensor> {
        let shuffled = pixel_shuffle(&self.tower_features(tile)?, self.scale)?;
        Ok(shuffled.matmul(&self.projection.t()?)?)
    }

    /// The width of its tokens (the text model's).
    pub fn output_width(&self) -> usize {
        self.projection.dim(0).unwrap_or(0)
    }
}

/// The ids of the tokens that spell a picture in the vocabulary.
fn picture_tokens(tiling: &Tiling, per_tile: usize, vocabulary: &dyn PictureVocabulary) -> Result<PictureTokens> {
    let id = |name: &str| vocabulary.id(name).with_context(|| format!("the vocabulary has no {name}"));
    // The longest side a picture is cut at, in tiles.
    let most = tiling.longest_side.unwrap_or(MAX_SIDE).min(MAX_SIDE).div_ceil(tiling.tile);
    let grid = (1..=most)
        .map(|row| (1..=most).map(|col| id(&tile_token(row, col))).collect::<Result<Vec<_>>>())
        .collect::<Result<Vec<_>>>()?;
    Ok(PictureTokens {
        around: id(FAKE_TOKEN_AROUND_IMAGE)?,
        global: id(GLOBAL_IMAGE)?,
        soft: id(IMAGE)?,
        grid,
        per_tile,
    })
}

/// The patches `(side², d)` of a tile, each `scale × scale` block made one
/// token of `d · scale²` values: `(side² / scale², d · scale²)`, in the
/// model's order.
pub fn pixel_shuffle(features: &Tensor, scale: usize) -> Result<Tensor> {
    let (patches, d) = features.dims2()?;
    let side = (patches as f64).sqrt() as usize;
    if side * side != patches || !side.is_multiple_of(scale) {
        bail!("{patches} patches cannot be shuffled in blocks of {scale}");
    }
    let x = features.reshape((side, side / scale, d * scale))?.permute((1, 0, 2))?;
    let x = x.reshape((side / scale, side / scale, d * scale * scale))?.permute((1, 0, 2))?;
    Ok(x.reshape((patches / (scale * scale), d * scale * scale))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_processor() {
        assert_eq!(longest_side_made(90, 30, 192), (192, 64));
        assert_eq!(longest_side_made(30, 70, 192), (82, 192));
        assert_eq!(whole_tiles(192, 64, 48), (192, 96));
        assert_eq!(whole_tiles(82, 192, 48), (96, 192));
        assert_eq!(within(5000, 100, 4096), (4096, 81));
    }
}
