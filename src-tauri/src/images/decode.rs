//! Decoding an attached picture: the format from its first bytes (never
//! from a name or a MIME type), its size checked from the header against
//! [`ImageLimits`] before decoding, the decoder's own allocation capped as
//! a second guard, and the EXIF orientation a camera recorded applied so
//! the picture is upright.

use image::metadata::Orientation;
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};
use std::fmt;
use std::io::Cursor;

/// What an attached picture may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLimits {
    /// Bytes of the encoded file.
    pub max_file_bytes: usize,
    /// Pixels on either side.
    pub max_side: u32,
    /// Width × height.
    pub max_pixels: u64,
}

impl Default for ImageLimits {
    /// 32 MB files, sides up to 16 384 pixels, 50 megapixels: any photo a
    /// phone takes, far below what would exhaust memory (50 MP of RGBA
    /// decode to 200 MB at most).
    fn default() -> Self {
        Self { max_file_bytes: Self::DEFAULT_FILE_BYTES, max_side: 16_384, max_pixels: 50_000_000 }
    }
}

impl ImageLimits {
    /// The default largest file.
    pub const DEFAULT_FILE_BYTES: usize = 32 << 20;
}

/// An upright picture as 8-bit RGB, row by row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedImage {
    pub width: u32,
    pub height: u32,
    /// `width × height × 3` bytes.
    pub rgb: Vec<u8>,
}

impl DecodedImage {
    /// The `width × height` part whose top left corner is at `(x, y)`,
    /// clipped to the picture (as slicing an array is).
    pub fn crop(&self, x: u32, y: u32, width: u32, height: u32) -> DecodedImage {
        let (x, y) = (x.min(self.width), y.min(self.height));
        let (width, height) = (width.min(self.width - x), height.min(self.height - y));
        let mut rgb = Vec::with_capacity(width as usize * height as usize * 3);
        for row in y..y + height {
            let start = (row as usize * self.width as usize + x as usize) * 3;
            rgb.extend_from_slice(&self.rgb[start..start + width as usize * 3]);
        }
        DecodedImage { width, height, rgb }
    }
}

/// Why a picture was refused; [`fmt::Display`] names it by `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageError {
    TooManyBytes { name: String, bytes: usize, limit: usize },
    NotAnImage { name: String },
    TooLarge { name: String, width: u32, height: u32, limits: ImageLimits },
    Unreadable { name: String, format: &'static str, reason: String },
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyBytes { name, bytes, limit } => {
                write!(f, "{name}: the picture is {bytes} bytes, more than the {limit} allowed")
            }
            Self::NotAnImage { name } => write!(f, "{name}: not a PNG, JPEG, WebP or GIF picture"),
            Self::TooLarge { name, width, height, limits } => write!(
                f,
                "{name}: the picture is {width} × {height} pixels, over the limit of {} per side and {} \
                 megapixels",
                limits.max_side,
                limits.max_pixels / 1_000_000
            ),
            Self::Unreadable { name, format, reason } => write!(f, "{name}: the {format} picture is damaged: {reason}"),
        }
    }
}

impl std::error::Error for ImageError {}

/// The name of a format Cake reads.
fn format_name(format: ImageFormat) -> Option<&'static str> {
    match format {
        ImageFormat::Png => Some("PNG"),
        ImageFormat::Jpeg => Some("JPEG"),
        ImageFormat::WebP => Some("WebP"),
        ImageFormat::Gif => Some("GIF"),
        _ => None,
    }
}

/// Decodes the picture `bytes` (called `name` in errors) within `limits`.
pub fn decode(name: &str, bytes: &[u8], limits: &ImageLimits) -> Result<DecodedImage, ImageError> {
    let (mut decoder, unreadable) = checked_decoder(name, bytes, limits)?;
    let orientation = decoder.orientation().map_err(&unreadable)?;
    let mut picture = DynamicImage::from_decoder(decoder).map_err(&unreadable)?;
    picture.apply_orientation(orientation);
    let rgb = picture.into_rgb8();
    Ok(DecodedImage { width: rgb.width(), height: rgb.height(), rgb: rgb.into_raw() })
}

/// The `(width, height)` the picture `bytes` has upright (its recorded
/// orientation applied), read from its header without decoding pixels,
/// within `limits` as [`decode`] checks them.
pub fn upright_size(name: &str, bytes: &[u8], limits: &ImageLimits) -> Result<(u32, u32), ImageError> {
    let (mut decoder, unreadable) = checked_decoder(name, bytes, limits)?;
    let (width, height) = decoder.dimensions();
    let turned = matches!(
        decoder.orientation().map_err(&unreadable)?,
        Orientation::Rotate90 | Orientation::Rotate270 | Orientation::Rotate90FlipH | Orientation::Rotate270FlipH
    );
    Ok(if turned { (height, width) } else { (width, height) })
}

/// A decoder of the picture `bytes` whose sides were checked against
/// `limits` from its header, with its allocation capped; and what makes a
/// decoder's error this picture's.
fn checked_decoder<'b>(
    name: &str,
    bytes: &'b [u8],
    limits: &ImageLimits,
) -> Result<(impl ImageDecoder + 'b, impl Fn(image::ImageError) -> ImageError), ImageError> {
    let name = name.to_string();
    if bytes.len() > limits.max_file_bytes {
        return Err(ImageError::TooManyBytes { name, bytes: bytes.len(), limit: limits.max_file_bytes });
    }
    let reader = ImageReader::new(Cursor::new(bytes)).with_guessed_format().expect("reading memory cannot fail");
    let Some(format) = reader.format().and_then(format_name) else {
        return Err(ImageError::NotAnImage { name });
    };
    let unreadable = {
        let name = name.clone();
        move |error: image::ImageError| ImageError::Unreadable { name: name.clone(), format, reason: error.to_string() }
    };
    // The header alone first: the sides are checked before any pixel buffer exists.
    let mut header = ImageReader::with_format(Cursor::new(bytes), reader.format().expect("guessed above"));
    header.no_limits();
    let (width, height) = header.into_dimensions().map_err(&unreadable)?;
    if width > limits.max_side || height > limits.max_side || u64::from(width) * u64::from(height) > limits.max_pixels {
        return Err(ImageError::TooLarge { name, width, height, limits: *limits });
    }
    let mut reader = reader;
    let mut decoder_limits = Limits::default();
    decoder_limits.max_image_width = Some(limits.max_side);
    decoder_limits.max_image_height = Some(limits.max_side);
    // The RGBA picture and as much again for the decoder's own buffers.
    decoder_limits.max_alloc = Some(8 * limits.max_pixels);
    reader.limits(decoder_limits);
    let decoder = reader.into_decoder().map_err(&unreadable)?;
    Ok((decoder, unreadable))
}
