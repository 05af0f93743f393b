//! Images in and out: PNG/JPEG through the `image` crate, with the size checked before decoding
//! and the pixels turned upright by the file's EXIF orientation, a generated test pattern when the
//! user gives none, and PNG output at full resolution.

use std::borrow::Cow;
use std::path::Path;

use image::ImageDecoder as _;

use super::cpu::{self, Image};
use crate::pixel::PixelFormat;
use crate::error::{Error, Result};

/// Largest side accepted (textures of that size exist on any GPU the app targets).
pub const MAX_SIDE: u32 = 16_384;

/// Host bytes per pixel while an image decodes: the decoder's buffer (up to 8, 16-bit RGBA), the
/// RGBA8 copy (4), and the 16-bit copy a 16-bit source keeps (8).
pub const DECODE_BYTES_PER_PIXEL: u64 = 20;

/// An image as loaded: RGBA8, and the 16-bit pixels of a source that had more than 8 bits, so
/// that RGBA32F keeps their precision. RGBA32F is made from them when it is asked for, not kept.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceImage {
    /// Pixels per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// RGBA8, rows top first.
    pub rgba8: Vec<u8>,
    /// RGBA16 of a source with more than 8 bits per channel, rows top first.
    pub rgba16: Option<Vec<u16>>,
    /// Where it came from.
    pub origin: String,
}

impl SourceImage {
    /// Tightly packed pixels in `format` (what textures and kernels take): RGBA8 as held, RGBA32F
    /// made for the occasion.
    pub fn bytes(&self, format: PixelFormat) -> Cow<'_, [u8]> {
        match format {
            PixelFormat::Rgba8 => Cow::Borrowed(&self.rgba8),
            PixelFormat::Rgba32f => Cow::Owned(bytemuck::cast_slice(&self.rgba32f()).to_vec()),
        }
    }

    /// RGBA32F in 0..1, from the 16-bit pixels where the source had them.
    pub fn rgba32f(&self) -> Vec<f32> {
        match &self.rgba16 {
            Some(wide) => wide.iter().map(|&v| f32::from(v) / 65535.0).collect(),
            None => self.rgba8.iter().map(|&v| f32::from(v) / 255.0).collect(),
        }
    }

    /// `pixels.len()` pixels of row `y` from column `x` on, as the CPU filters take them (RGBA8
    /// as 0..=255, RGBA32F in 0..1).
    pub fn read_pixels(&self, format: PixelFormat, y: usize, x: usize, pixels: &mut [[f32; 4]]) {
        let first = (y * self.width as usize + x) * 4;
        match (format, &self.rgba16) {
            (PixelFormat::Rgba8, _) => {
                for (pixel, bytes) in pixels.iter_mut().zip(self.rgba8[first..].chunks_exact(4)) {
                    *pixel = [bytes[0], bytes[1], bytes[2], bytes[3]].map(f32::from);
                }
            }
            (PixelFormat::Rgba32f, Some(wide)) => {
                for (pixel, words) in pixels.iter_mut().zip(wide[first..].chunks_exact(4)) {
                    *pixel = [words[0], words[1], words[2], words[3]].map(|v| f32::from(v) / 65535.0);
                }
            }
            (PixelFormat::Rgba32f, None) => {
                for (pixel, bytes) in pixels.iter_mut().zip(self.rgba8[first..].chunks_exact(4)) {
                    *pixel = [bytes[0], bytes[1], bytes[2], bytes[3]].map(|v| f32::from(v) / 255.0);
                }
            }
        }
    }

    /// The whole image as the CPU filters take it (what the references are computed from).
    pub fn to_float_image(&self, format: PixelFormat) -> Image<f32> {
        let (width, height) = (self.width as usize, self.height as usize);
        let mut image = Image::new(width, height);
        for (y, row) in image.pixels.chunks_exact_mut(width).enumerate() {
            self.read_pixels(format, y, 0, row);
        }
        image
    }
}

/// Decodes a PNG or JPEG, refusing sizes beyond [`MAX_SIDE`] before any pixel is decoded, and
/// refusing an image whose decoding, or what follows it (`bytes_per_pixel` of host memory per
/// pixel, from the caller), does not fit in the memory this process can have. The pixels come
/// turned as the file's EXIF orientation says (a portrait photo taken sideways stands up), so
/// width and height may be the stored ones swapped.
pub fn load(path: &Path, bytes_per_pixel: u64) -> Result<SourceImage> {
    let image_error = |message: String| Error::Image { path: path.to_owned(), message };
    let reader = image::ImageReader::open(path)
        .map_err(|e| Error::io(path, e))?
        .with_guessed_format()
        .map_err(|e| Error::io(path, e))?;
    let (width, height) =
        reader.into_dimensions().map_err(|e| image_error(format!("not a readable PNG or JPEG image: {e}")))?;
    check_size(width, height).map_err(&image_error)?;
    let pixels = u64::from(width) * u64::from(height);
    let per_pixel = bytes_per_pixel.max(DECODE_BYTES_PER_PIXEL);
    crate::host_memory::check(
        &format!("{} ({width}x{height} pixels, {per_pixel} bytes each here)", path.display()),
        pixels * per_pixel,
        "use a smaller image (scale it down), or close other programs",
    )?;
    let reader = image::ImageReader::open(path)
        .map_err(|e| Error::io(path, e))?
        .with_guessed_format()
        .map_err(|e| Error::io(path, e))?;
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(8 << 30);
    // Large images take seconds to decode: said while it runs (a bar, or lines in a log).
    let progress = (pixels >= 16 << 20).then(|| {
        crate::progress::Progress::new(
            &format!("decoding {} ({width}x{height})", path.display()),
            1,
            &crate::stop::StopRequest::new(),
        )
    });
    let decoded = decode_upright(reader, limits, path).map_err(|e| image_error(format!("cannot decode it: {e}")))?;
    let (width, height) = (decoded.width(), decoded.height());
    let wide = decoded.color().bytes_per_pixel() / decoded.color().channel_count() > 1;
    let rgba16 = wide.then(|| decoded.to_rgba16().into_raw());
    let rgba8 = decoded.to_rgba8().into_raw();
    drop(decoded);
    if let Some(progress) = progress {
        progress.done_one();
    }
    Ok(SourceImage { width, height, rgba8, rgba16, origin: path.display().to_string() })
}

/// Decodes within `limits` (the decoded buffer counted against them, as `ImageReader::decode`
/// does), then turns the pixels the way the file's EXIF orientation says,
/// so that a portrait photo stored sideways stands up. Turning by a quarter takes one more copy of
/// the decoded image while it runs, within [`DECODE_BYTES_PER_PIXEL`]. An orientation that cannot
/// be read leaves the pixels as stored, and says so.
fn decode_upright<R: std::io::BufRead + std::io::Seek>(
    mut reader: image::ImageReader<R>,
    mut limits: image::Limits,
    path: &Path,
) -> image::ImageResult<image::DynamicImage> {
    reader.limits(limits.clone());
    let mut decoder = reader.into_decoder()?;
    limits.reserve(decoder.total_bytes())?;
    decoder.set_limits(limits)?;
    let orientation = decoder.orientation().unwrap_or_else(|error| {
        log::warn!("{}: its orientation cannot be read ({error}): shown as stored", path.display());
        image::metadata::Orientation::NoTransforms
    });
    let mut decoded = image::DynamicImage::from_decoder(decoder)?;
    decoded.apply_orientation(orientation);
    Ok(decoded)
}

/// Checks an image size: both sides 1..=[`MAX_SIDE`].
pub fn check_size(width: u32, height: u32) -> std::result::Result<(), String> {
    if width == 0 || height == 0 || width > MAX_SIDE || height > MAX_SIDE {
        return Err(format!("{width}x{height} pixels: each side must be 1..={MAX_SIDE}"));
    }
    Ok(())
}

/// A generated test image: colour fields with hard edges, fine rings and thin lines, so every
/// blur radius has something to smooth. The same for the same size, on every machine.
pub fn test_pattern(width: u32, height: u32) -> SourceImage {
    let (w, h) = (width.max(1) as f32, height.max(1) as f32);
    let mut rgba8 = Vec::with_capacity(width as usize * height as usize * 4);
    for y in 0..height {
        for x in 0..width {
            let (u, v) = (x as f32 / w, y as f32 / h);
            // Background: a diagonal colour gradient.
            let mut colour = [0.15 + 0.6 * u, 0.2 + 0.5 * v, 0.75 - 0.5 * u * v];
            // A grid of coloured squares with hard edges.
            let (cell_x, cell_y) = ((u * 8.0) as i32, (v * 5.0) as i32);
            if (cell_x + cell_y) % 3 == 0 && (u * 8.0).fract() < 0.7 && (v * 5.0).fract() < 0.7 {
                let hue = ((cell_x * 5 + cell_y * 3) % 7) as f32 / 7.0;
                colour = [
                    0.5 + 0.5 * (std::f32::consts::TAU * hue).cos(),
                    0.5 + 0.5 * (std::f32::consts::TAU * (hue + 0.33)).cos(),
                    0.5 + 0.5 * (std::f32::consts::TAU * (hue + 0.67)).cos(),
                ];
            }
            // Concentric rings whose spacing shrinks outwards: fine detail a small σ removes.
            let (dx, dy) = ((u - 0.72) * w / h, v - 0.5);
            let r = (dx * dx + dy * dy).sqrt();
            if r < 0.28 && (r * r * 900.0).sin() > 0.0 {
                colour = [0.97, 0.95, 0.9];
            }
            // Thin dark lines every 37 pixels.
            if x % 37 == 0 || y % 37 == 0 {
                colour = colour.map(|c| c * 0.25);
            }
            rgba8.extend(colour.map(|c| (c.clamp(0.0, 1.0) * 255.0).round() as u8));
            rgba8.push(255);
        }
    }
    SourceImage { width, height, rgba8, rgba16: None, origin: format!("generated test pattern {width}x{height}") }
}

/// Writes `bytes` (`format`, tightly packed, top row first) as PNG or JPEG by the extension: PNG
/// 8-bit for RGBA8 and 16-bit for RGBA32F (so the extra precision is kept), JPEG 8-bit RGB.
pub fn save(path: &Path, size: [u32; 2], format: PixelFormat, bytes: &[u8]) -> Result<()> {
    let image_error = |message: String| Error::Image { path: path.to_owned(), message };
    let mismatch = || image_error("pixel data does not match the size".to_owned());
    let image = match format {
        PixelFormat::Rgba8 => image::DynamicImage::ImageRgba8(
            image::RgbaImage::from_raw(size[0], size[1], bytes.to_vec()).ok_or_else(mismatch)?,
        ),
        PixelFormat::Rgba32f => {
            let floats: &[f32] = bytemuck::try_cast_slice(bytes).map_err(|e| image_error(e.to_string()))?;
            let words: Vec<u16> = floats.iter().map(|&v| (v.clamp(0.0, 1.0) * 65535.0).round() as u16).collect();
            image::DynamicImage::ImageRgba16(
                image::ImageBuffer::<image::Rgba<u16>, Vec<u16>>::from_raw(size[0], size[1], words)
                    .ok_or_else(mismatch)?,
            )
        }
    };
    crate::output::write_image(path, image)
}

/// Pixels the CPU filters produced, as texture bytes in `format` (RGBA8 rounded as the GPU does).
pub fn float_row_bytes(pixels: &[[f32; 4]], format: PixelFormat, out: &mut [u8]) {
    match format {
        PixelFormat::Rgba8 => {
            for (pixel, chunk) in pixels.iter().zip(out.chunks_exact_mut(4)) {
                for c in 0..4 {
                    chunk[c] = cpu::to_bytes(pixel[c]);
                }
            }
        }
        PixelFormat::Rgba32f => {
            for (pixel, chunk) in pixels.iter().zip(out.chunks_exact_mut(16)) {
                chunk.copy_from_slice(bytemuck::cast_slice(pixel));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_corrupt_and_huge_images_are_refused_with_the_reason() {
        let dir = std::env::temp_dir().join(format!("interop-lab-images-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let missing = load(&dir.join("missing.png"), 0).expect_err("missing").to_string();
        assert!(missing.contains("missing.png"), "{missing}");
        std::fs::write(dir.join("corrupt.png"), b"\x89PNG\r\n\x1a\nnot really").expect("write");
        let corrupt = load(&dir.join("corrupt.png"), 0).expect_err("corrupt").to_string();
        assert!(corrupt.contains("corrupt.png") && corrupt.contains("not a readable"), "{corrupt}");
        // A valid PNG header claiming 20000 × 10 pixels: refused before decoding.
        let mut header = Vec::new();
        {
            let encoder = image::codecs::png::PngEncoder::new(&mut header);
            use image::ImageEncoder;
            encoder
                .write_image(&vec![0u8; 20_000 * 10 * 4], 20_000, 10, image::ExtendedColorType::Rgba8)
                .expect("encode");
        }
        std::fs::write(dir.join("huge.png"), &header).expect("write");
        let huge = load(&dir.join("huge.png"), 0).expect_err("huge").to_string();
        assert!(huge.contains("20000x10") && huge.contains("1..=16384"), "{huge}");

        let pattern = test_pattern(64, 40);
        save(&dir.join("pattern.png"), [64, 40], PixelFormat::Rgba8, &pattern.rgba8).expect("save");
        let reloaded = load(&dir.join("pattern.png"), 0).expect("reload");
        assert_eq!(reloaded.rgba8, pattern.rgba8);
        let floats = pattern.rgba32f();
        save(&dir.join("pattern16.png"), [64, 40], PixelFormat::Rgba32f, bytemuck::cast_slice(&floats))
            .expect("save 16-bit");
        let reloaded16 = load(&dir.join("pattern16.png"), 0).expect("reload 16-bit");
        assert!(reloaded16.rgba16.is_some(), "a 16-bit source keeps its 16 bits");
        assert!(reloaded16.rgba32f().iter().zip(&floats).all(|(a, b)| (a - b).abs() < 1e-4));
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A JPEG of `width × height` mid grey with a red 8×8 square in its top left corner, and, with
    /// `orientation`, an APP1 segment holding an EXIF orientation tag (big-endian TIFF, one entry).
    fn jpeg_with_red_corner(width: u32, height: u32, orientation: Option<u16>) -> Vec<u8> {
        let mut rgb = vec![128u8; (width * height * 3) as usize];
        for y in 0..8 {
            for x in 0..8 {
                let at = ((y * width + x) * 3) as usize;
                rgb[at..at + 3].copy_from_slice(&[255, 0, 0]);
            }
        }
        let mut jpeg = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 100)
            .encode(&rgb, width, height, image::ExtendedColorType::Rgb8)
            .expect("encode");
        let Some(orientation) = orientation else { return jpeg };
        let mut exif = b"Exif\0\0MM\0\x2a\0\0\0\x08".to_vec();
        exif.extend([0, 1]); // one entry
        exif.extend([0x01, 0x12, 0, 3, 0, 0, 0, 1]); // Orientation, SHORT, one value
        exif.extend(orientation.to_be_bytes());
        exif.extend([0, 0, 0, 0, 0, 0]); // the value's padding, no next directory
        let mut segment = vec![0xff, 0xe1];
        segment.extend(u16::try_from(exif.len() + 2).expect("short segment").to_be_bytes());
        segment.extend(exif);
        // Right after the start-of-image marker, where cameras put it.
        jpeg.splice(2..2, segment);
        jpeg
    }

    fn is_red(image: &SourceImage, x: u32, y: u32) -> bool {
        let at = ((y * image.width + x) * 4) as usize;
        let [r, g, b] = [image.rgba8[at], image.rgba8[at + 1], image.rgba8[at + 2]];
        r > 200 && g < 60 && b < 60
    }

    #[test]
    fn a_jpeg_taken_sideways_loads_turned_as_its_exif_orientation_says() {
        let dir = std::env::temp_dir().join(format!("interop-lab-orientation-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        // Stored 32 × 16, red square at the top left (x 0..8, y 0..8).
        // (orientation, size shown, a pixel inside the square as shown, one outside it)
        let cases = [
            (None, (32, 16), (4, 4), (20, 4)),
            // 6: turn 90° clockwise to show: the top left goes to the top right.
            (Some(6), (16, 32), (12, 4), (4, 4)),
            // 8: turn 90° anticlockwise: the top left goes to the bottom left.
            (Some(8), (16, 32), (4, 28), (4, 4)),
        ];
        for (orientation, size, inside, outside) in cases {
            let path = dir.join(format!("sideways-{orientation:?}.jpg"));
            std::fs::write(&path, jpeg_with_red_corner(32, 16, orientation)).expect("write");
            let loaded = load(&path, 0).expect("load");
            assert_eq!((loaded.width, loaded.height), size, "orientation {orientation:?}: size");
            assert_eq!(loaded.rgba8.len(), (size.0 * size.1 * 4) as usize);
            assert!(is_red(&loaded, inside.0, inside.1), "orientation {orientation:?}: red at {inside:?}");
            assert!(!is_red(&loaded, outside.0, outside.1), "orientation {orientation:?}: grey at {outside:?}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
