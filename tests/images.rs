//! Attached pictures: the four formats decode to the pixels encoded, a
//! camera's EXIF orientation is applied, and bad files (cut short, a huge
//! header, a GIF bomb, not a picture, too many bytes) get an error naming
//! the file and the problem, refused before their pixels are allocated.

mod common;

use cake::images::decode::{decode, upright_size, ImageError, ImageLimits};
use common::{computed_picture, png_header};
use image::{ImageEncoder, RgbImage};

/// A 5 × 3 picture whose every pixel differs.
fn picture() -> RgbImage {
    RgbImage::from_fn(5, 3, |x, y| image::Rgb([(x * 50) as u8, (y * 80) as u8, ((x + y) * 20) as u8]))
}

fn png(image: &RgbImage) -> Vec<u8> {
    let mut bytes = Vec::new();
    image::codecs::png::PngEncoder::new(&mut bytes)
        .write_image(image, image.width(), image.height(), image::ExtendedColorType::Rgb8)
        .unwrap();
    bytes
}

fn limits() -> ImageLimits {
    ImageLimits::default()
}

#[test]
fn lossless_formats_decode_to_the_pixels_encoded() {
    let original = picture();
    let mut webp = Vec::new();
    image::codecs::webp::WebPEncoder::new_lossless(&mut webp)
        .write_image(&original, 5, 3, image::ExtendedColorType::Rgb8)
        .unwrap();
    for (name, bytes) in [("a.png", png(&original)), ("a.webp", webp)] {
        let decoded = decode(name, &bytes, &limits()).unwrap();
        assert_eq!((decoded.width, decoded.height), (5, 3), "{name}");
        assert_eq!(decoded.rgb, original.as_raw().as_slice(), "{name}");
    }
    // GIF keeps a palette: a picture of few colours comes back exactly.
    let flat = RgbImage::from_fn(4, 2, |x, _| if x < 2 { image::Rgb([255, 0, 0]) } else { image::Rgb([0, 0, 255]) });
    let mut gif = Vec::new();
    image::codecs::gif::GifEncoder::new(&mut gif).encode(flat.as_raw(), 4, 2, image::ExtendedColorType::Rgb8).unwrap();
    let decoded = decode("a.gif", &gif, &limits()).unwrap();
    assert_eq!(decoded.rgb, flat.as_raw().as_slice());
    // JPEG is lossy: close to what was encoded.
    let smooth = RgbImage::from_fn(16, 16, |x, y| image::Rgb([(x * 8) as u8, (y * 8) as u8, 128]));
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 95).encode_image(&smooth).unwrap();
    let decoded = decode("a.jpg", &jpeg, &limits()).unwrap();
    let worst = decoded.rgb.iter().zip(smooth.as_raw()).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
    assert!(worst <= 12, "JPEG differs by up to {worst}");
}

/// A JPEG of `image` with an EXIF block saying how the camera was held
/// (`orientation`, 1–8), as phones write it.
fn jpeg_with_orientation(image: &RgbImage, orientation: u16) -> Vec<u8> {
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 100).encode_image(image).unwrap();
    // TIFF, little-endian: one IFD with one entry, Orientation (0x0112), SHORT, count 1.
    let mut tiff = b"II*\0\x08\0\0\0\x01\0".to_vec();
    tiff.extend([0x12, 0x01, 3, 0, 1, 0, 0, 0]);
    tiff.extend(orientation.to_le_bytes());
    tiff.extend([0, 0, 0, 0, 0, 0]);
    let mut app1 = b"Exif\0\0".to_vec();
    app1.extend(tiff);
    let mut segment = vec![0xFF, 0xE1];
    segment.extend(((app1.len() + 2) as u16).to_be_bytes());
    segment.extend(app1);
    // After the start-of-image marker.
    [&jpeg[..2], &segment, &jpeg[2..]].concat()
}

#[test]
fn a_cameras_orientation_is_applied() {
    // Left half dark, right half bright, 16 × 8.
    let wide = RgbImage::from_fn(16, 8, |x, _| if x < 8 { image::Rgb([0, 0, 0]) } else { image::Rgb([255, 255, 255]) });
    let upright = decode("upright.jpg", &jpeg_with_orientation(&wide, 1), &limits()).unwrap();
    assert_eq!((upright.width, upright.height), (16, 8));
    // 6: the camera was turned a quarter clockwise; shown upright, the
    // picture is tall and its left half (dark) is on top.
    let turned = decode("turned.jpg", &jpeg_with_orientation(&wide, 6), &limits()).unwrap();
    assert_eq!((turned.width, turned.height), (8, 16));
    let pixel =
        |image: &cake::images::decode::DecodedImage, x: u32, y: u32| image.rgb[((y * image.width + x) * 3) as usize];
    assert!(pixel(&turned, 4, 2) < 40 && pixel(&turned, 4, 13) > 215, "dark on top, bright below");
    // The upright size from the header alone, as decoding gives it; all
    // eight orientations (5–8 turn a quarter).
    for orientation in 1..=8 {
        let jpeg = jpeg_with_orientation(&wide, orientation);
        let decoded = decode("turned.jpg", &jpeg, &limits()).unwrap();
        let size = upright_size("turned.jpg", &jpeg, &limits()).unwrap();
        assert_eq!(size, (decoded.width, decoded.height), "orientation {orientation}");
    }
    let err = upright_size("huge.png", &png_header(30_000, 30_000), &limits()).unwrap_err();
    assert!(matches!(err, ImageError::TooLarge { width: 30_000, .. }), "{err}");
}

#[test]
fn bad_pictures_are_refused_with_the_file_and_the_reason() {
    // Cut short: the header is read, the pixels are missing.
    let whole = png(&picture());
    let err = decode("cut.png", &whole[..whole.len() - 20], &limits()).unwrap_err();
    assert!(matches!(err, ImageError::Unreadable { .. }), "{err}");
    assert!(err.to_string().starts_with("cut.png: the PNG picture is damaged"), "{err}");
    // A 30 000 × 30 000 header: refused from the header, nothing decoded.
    let err = decode("huge.png", &png_header(30_000, 30_000), &limits()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "huge.png: the picture is 30000 × 30000 pixels, over the limit of 16384 per side and 50 megapixels"
    );
    // Within the sides but over the pixel count.
    let err = decode("big.png", &png_header(16_000, 16_000), &limits()).unwrap_err();
    assert!(matches!(err, ImageError::TooLarge { width: 16_000, .. }), "{err}");
    // A GIF bomb: a 65 535 × 65 535 logical screen in a few bytes.
    let mut gif = b"GIF89a".to_vec();
    gif.extend([0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0]);
    gif.extend([0x2C, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 2, 2, 0x44, 0x01, 0, 0x3B]);
    let err = decode("bomb.gif", &gif, &limits()).unwrap_err();
    assert!(err.to_string().contains("65535 × 65535 pixels, over the limit"), "{err}");
    // Not a picture at all, and a file over the byte cap.
    let err = decode("notes.png", b"just some text, named like a picture", &limits()).unwrap_err();
    assert_eq!(err.to_string(), "notes.png: not a PNG, JPEG, WebP or GIF picture");
    let small = ImageLimits { max_file_bytes: 100, ..limits() };
    let err = decode("photo.png", &whole, &small).unwrap_err();
    assert!(matches!(err, ImageError::TooManyBytes { limit: 100, .. }), "{err}");
    // A legal picture just over a tighter pixel cap.
    let tight = ImageLimits { max_pixels: 14, ..limits() };
    assert!(matches!(decode("a.png", &whole, &tight), Err(ImageError::TooLarge { .. })));
}

/// Pillow's resampling, byte for byte: each filter the vision processors
/// use, shrinking, enlarging, both at once, one side unchanged, one pixel
/// (tests/fixtures/generate_image_resize_references.py).
#[test]
fn resizing_matches_pillow_byte_for_byte() {
    use cake::images::resize::{resize, Filter};
    let references = fixture("image_resize/references.json");
    let source = computed_picture(41, 29);
    for case in references["cases"].as_array().unwrap() {
        let filter = match case["filter"].as_str().unwrap() {
            "bilinear" => Filter::Bilinear,
            "bicubic" => Filter::Bicubic,
            _ => Filter::Lanczos,
        };
        let (w, h) = (case["width"].as_u64().unwrap() as u32, case["height"].as_u64().unwrap() as u32);
        let expected = base64_bytes(&case["rgb"]);
        let ours = resize(&source, w, h, filter);
        let differing = ours.rgb.iter().zip(&expected).filter(|(a, b)| a != b).count();
        assert_eq!(differing, 0, "{filter:?} to {w} × {h}: {differing} of {} bytes differ", expected.len());
    }
}

fn fixture(name: &str) -> serde_json::Value {
    let path = format!("{}/../tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn base64_bytes(value: &serde_json::Value) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(value.as_str().unwrap()).unwrap()
}

/// Gemma 3's processor (tests/fixtures/generate_image_pixel_references.py):
/// a square, a wide and a tall picture resized to its square and
/// normalised give transformers' pixel values bit for bit.
#[test]
fn gemma3_pixel_values_match_transformers() {
    use cake::images::pixels::{pixel_values, Normalization};
    use cake::images::resize::{resize, Filter};
    let references = fixture("image_pixels/gemma3.json");
    let size = references["size"].as_u64().unwrap() as u32;
    for case in references["cases"].as_array().unwrap() {
        let (w, h) = (case["width"].as_u64().unwrap() as u32, case["height"].as_u64().unwrap() as u32);
        let expected: Vec<f32> = base64_bytes(&case["pixel_values_f32"])
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let ours = pixel_values(&resize(&computed_picture(w, h), size, size, Filter::Bilinear), &Normalization::HALF);
        assert_eq!(ours.len(), expected.len());
        let differing = ours.iter().zip(&expected).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        assert_eq!(differing, 0, "{}: {differing} of {} values differ", case["picture"], expected.len());
    }
}
