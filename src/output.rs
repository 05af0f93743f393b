//! Files the app writes when asked (`--screenshot`, `--stats`, `--json`, `--output`, `--save`,
//! `--record`): checked before any work starts, so a bad path fails in a millisecond rather than
//! after the run, and written whole or not at all (to a temporary name beside the target, then
//! renamed), so an interrupted or failed write never leaves a truncated file.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// What is written to a path, which decides what the path must look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// An image: the extension picks the encoder (`.png`, `.jpg` / `.jpeg`).
    Image,
    /// A PNG only (16-bit results, which JPEG cannot hold).
    Png,
    /// Any other file (JSON, CSV, state files): any name.
    Data,
    /// A folder that files are written into (created if missing).
    Folder,
}

/// Image encoders the app writes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageEncoding {
    /// Lossless, with alpha.
    Png,
    /// Lossy, no alpha (written at quality 92).
    Jpeg,
}

impl ImageEncoding {
    /// The encoder for `path`'s extension.
    pub fn for_path(path: &Path) -> Result<Self> {
        let extension = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        match extension.as_deref() {
            Some("png") => Ok(Self::Png),
            Some("jpg" | "jpeg") => Ok(Self::Jpeg),
            other => Err(Error::InvalidInput(format!(
                "{}: {} — images are written as PNG (.png) or JPEG (.jpg, .jpeg)",
                path.display(),
                match other {
                    Some(ext) => format!("cannot write .{ext} images"),
                    None => "the name has no extension to pick the format by".to_owned(),
                }
            ))),
        }
    }
}

/// [`check`] for an output that may not have been asked for.
pub fn check_optional(path: &Option<PathBuf>, kind: OutputKind, flag: &str) -> Result<()> {
    match path {
        Some(path) => check(path, kind, flag),
        None => Ok(()),
    }
}

/// Checks that `path` can be written as `kind` now: the format is one the app writes, the path
/// is not a folder (or, for [`OutputKind::Folder`], is one or can be made), and its folder
/// exists and takes a new file. Nothing is left behind.
pub fn check(path: &Path, kind: OutputKind, flag: &str) -> Result<()> {
    let refuse = |why: String| Err(Error::InvalidInput(format!("{flag} {}: {why}", path.display())));
    if kind != OutputKind::Folder && path.is_dir() {
        return refuse("is a folder: name a file inside it".to_owned());
    }
    match kind {
        OutputKind::Image => {
            ImageEncoding::for_path(path).map_err(|e| Error::InvalidInput(format!("{flag} {e}")))?;
        }
        OutputKind::Png if ImageEncoding::for_path(path).ok() != Some(ImageEncoding::Png) => {
            return refuse("this output is written as PNG: give the name a .png extension".to_owned());
        }
        _ => {}
    }
    if kind == OutputKind::Folder {
        if path.exists() && !path.is_dir() {
            return refuse("is a file, not a folder".to_owned());
        }
        if let Err(error) = std::fs::create_dir_all(path) {
            return refuse(format!("the folder cannot be made: {error}"));
        }
        return probe_folder(path, flag);
    }
    let folder = parent(path);
    if !folder.is_dir() {
        return refuse(format!("the folder {} does not exist", folder.display()));
    }
    probe_folder(folder, flag)
}

/// Creates and removes a file in `folder`: the one reliable test that a write will be allowed.
fn probe_folder(folder: &Path, flag: &str) -> Result<()> {
    let probe = folder.join(format!(".interop-lab-probe-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(error) => Err(Error::InvalidInput(format!("{flag}: cannot write into {}: {error}", folder.display()))),
    }
}

/// The folder a file path lives in (`.` for a bare name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    }
}

/// Writes `bytes` to `path` whole: into a temporary file beside it, then renamed over it.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    let temporary = temporary_name(path);
    let written = std::fs::write(&temporary, bytes).and_then(|()| std::fs::rename(&temporary, path));
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(Error::io(path, error));
    }
    Ok(())
}

fn temporary_name(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    parent(path).join(format!(".{name}.{}.partial", std::process::id()))
}

/// Writes tightly packed RGBA8 pixels (top row first) as PNG or JPEG by `path`'s extension; JPEG
/// drops the alpha channel.
pub fn write_rgba8(path: &Path, size: [u32; 2], pixels: &[u8]) -> Result<()> {
    let image = image::RgbaImage::from_raw(size[0], size[1], pixels.to_vec()).ok_or_else(|| Error::Image {
        path: path.to_owned(),
        message: "pixel data does not match the size".to_owned(),
    })?;
    write_image(path, image::DynamicImage::ImageRgba8(image))
}

/// Writes `image` as PNG or JPEG by `path`'s extension (JPEG: 8-bit RGB, converted).
pub fn write_image(path: &Path, image: image::DynamicImage) -> Result<()> {
    let encoding = ImageEncoding::for_path(path)?;
    let image_error = |e: image::ImageError| Error::Image { path: path.to_owned(), message: e.to_string() };
    let mut bytes = Vec::new();
    match encoding {
        ImageEncoding::Png => {
            image.write_with_encoder(image::codecs::png::PngEncoder::new(&mut bytes)).map_err(image_error)?
        }
        ImageEncoding::Jpeg => image::DynamicImage::ImageRgb8(image.to_rgb8())
            .write_with_encoder(image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, 92))
            .map_err(image_error)?,
    }
    write(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("interop-lab-output-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn bad_output_paths_are_named_before_anything_is_written() {
        let dir = temp_dir("check");
        let said = |path: &Path, kind| check(path, kind, "--output").expect_err("refused").to_string();
        assert!(said(&dir, OutputKind::Image).contains("is a folder"));
        assert!(said(&dir.join("x.gif"), OutputKind::Image).contains("PNG (.png) or JPEG"));
        assert!(said(&dir.join("x"), OutputKind::Image).contains("no extension"));
        assert!(said(&dir.join("x.jpg"), OutputKind::Png).contains(".png"));
        assert!(said(&dir.join("missing/x.png"), OutputKind::Image).contains("does not exist"));
        std::fs::write(dir.join("file"), b"").expect("write");
        assert!(said(&dir.join("file"), OutputKind::Folder).contains("not a folder"));
        for (name, kind) in [("x.png", OutputKind::Image), ("x.JPEG", OutputKind::Image), ("s.json", OutputKind::Data)]
        {
            check(&dir.join(name), kind, "--output").expect(name);
        }
        check(&dir.join("frames"), OutputKind::Folder, "--record").expect("folder made");
        assert!(dir.join("frames").is_dir());
        let left: Vec<_> = std::fs::read_dir(&dir).expect("list").map(|e| e.expect("entry").file_name()).collect();
        assert_eq!(left.len(), 2, "only the test's own file and folder remain: {left:?}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn jpeg_and_png_are_written_whole_and_read_back() {
        let dir = temp_dir("write");
        let (w, h) = (37u32, 21u32);
        let pixels: Vec<u8> = (0..w * h * 4).map(|i| if i % 4 == 3 { 255 } else { (i * 7 % 251) as u8 }).collect();
        write_rgba8(&dir.join("a.png"), [w, h], &pixels).expect("png");
        let png = image::open(dir.join("a.png")).expect("read png").to_rgba8();
        assert_eq!(png.into_raw(), pixels);
        write_rgba8(&dir.join("a.jpg"), [w, h], &pixels).expect("jpeg");
        let jpeg = image::open(dir.join("a.jpg")).expect("read jpeg");
        assert_eq!((jpeg.width(), jpeg.height()), (w, h));
        assert!(std::fs::metadata(dir.join("a.jpg")).expect("size").len() > 100);
        // No temporary file is left beside them.
        let names: Vec<String> = std::fs::read_dir(&dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".partial")), "{names:?}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
