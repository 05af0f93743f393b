//! Files the app writes when asked (`--screenshot`, `--stats`, `--json`, `--output`, `--save`,
//! `--record`): checked before any work starts, so a bad path fails in a millisecond rather than
//! after the run, and written whole or not at all (to a temporary name beside the target, then
//! renamed), so an interrupted or failed write never leaves a truncated file.
//!
//! Only a regular file (or a name not yet taken) is replaced that way. A character device or a
//! FIFO (`/dev/null`, `/dev/stdout` on a pipe, `mkfifo`) is written in place, as a shell's `>`
//! would: renaming over it would put a regular file where the device was. A folder, a socket or a
//! block device is refused before any work. A symbolic link is followed: the file it points to is
//! replaced, and the link stays a link.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

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
    let target = Target::of(path);
    if kind != OutputKind::Folder {
        if let Some(why) = target.refusal() {
            return refuse(why.to_owned());
        }
        if target == Target::InPlace {
            // A device or FIFO takes the bytes where it is: no folder to probe, and opening a
            // FIFO here would block until a reader comes. An image goes as PNG unless named.
            return match kind {
                OutputKind::Image | OutputKind::Png => match ImageEncoding::for_path(path) {
                    Ok(ImageEncoding::Jpeg) if kind == OutputKind::Png => {
                        refuse("this output is written as PNG, not JPEG".to_owned())
                    }
                    _ => Ok(()),
                },
                OutputKind::Data | OutputKind::Folder => Ok(()),
            };
        }
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
            return refuse("is not a folder".to_owned());
        }
        if let Err(error) = std::fs::create_dir_all(path) {
            return refuse(format!("the folder cannot be made: {error}"));
        }
        return probe_folder(path, flag);
    }
    let resolved = resolve_links(path);
    let folder = parent(&resolved);
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

/// What is at an output path now, which decides how it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Nothing yet, or a regular file (through any links): written to a temporary file beside
    /// it, then renamed over it.
    Replaced,
    /// A character device or a FIFO (a pipe): written in place.
    InPlace,
    /// A folder: never replaced by a file.
    Folder,
    /// A socket: nothing can be written to it by name.
    Socket,
    /// A block device: a disk, never overwritten by an output.
    BlockDevice,
}

impl Target {
    /// What `path` names now, following links (`/dev/stdout` to the pipe behind it included).
    fn of(path: &Path) -> Self {
        use std::os::unix::fs::FileTypeExt;
        let Ok(metadata) = std::fs::metadata(path) else { return Self::Replaced };
        let file_type = metadata.file_type();
        if file_type.is_dir() {
            Self::Folder
        } else if file_type.is_char_device() || file_type.is_fifo() {
            Self::InPlace
        } else if file_type.is_socket() {
            Self::Socket
        } else if file_type.is_block_device() {
            Self::BlockDevice
        } else {
            Self::Replaced
        }
    }

    /// Why an output cannot go to such a target, if it cannot.
    fn refusal(self) -> Option<&'static str> {
        match self {
            Self::Folder => Some("is a folder: name a file inside it"),
            Self::Socket => Some("is a socket: name a file, a FIFO or a device"),
            Self::BlockDevice => Some("is a block device: outputs are never written over a disk"),
            Self::Replaced | Self::InPlace => None,
        }
    }
}

/// The path a chain of symbolic links ends at (the path itself when it is no link), so that a
/// write replaces the file a link points to and leaves the link. A chain longer than the kernel
/// follows is left as it is: the write then fails with the kernel's own "too many links".
fn resolve_links(path: &Path) -> PathBuf {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&current) {
            Ok(target) if target.is_absolute() => current = target,
            Ok(target) => current = parent(&current).join(target),
            Err(_) => return current,
        }
    }
    current
}

/// Writes `bytes` to `path` whole. A regular file (or a new name) gets a temporary file beside
/// it, renamed over it; a link is followed to the file it points to. A character device or FIFO
/// is written in place (a full device says so as an error); a folder, socket or block device is
/// refused.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    match Target::of(path) {
        Target::Replaced => replace(&resolve_links(path), bytes),
        Target::InPlace => write_in_place(path, bytes),
        refused => Err(Error::InvalidInput(format!(
            "{}: {}",
            path.display(),
            refused.refusal().unwrap_or("cannot be written")
        ))),
    }
}

fn replace(path: &Path, bytes: &[u8]) -> Result<()> {
    let temporary = temporary_name(path);
    let written = std::fs::write(&temporary, bytes).and_then(|()| std::fs::rename(&temporary, path));
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(Error::io(path, error));
    }
    Ok(())
}

fn write_in_place(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let written = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.flush()));
    match written {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::StorageFull => Err(Error::InvalidInput(format!(
            "{}: no space left on the device ({} bytes could not be written): name another file",
            path.display(),
            bytes.len()
        ))),
        Err(error) => Err(Error::io(path, error)),
    }
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

/// Writes `image` as PNG or JPEG by `path`'s extension (JPEG: 8-bit RGB, converted); to a device
/// or FIFO without an extension, as PNG.
pub fn write_image(path: &Path, image: image::DynamicImage) -> Result<()> {
    let encoding = match ImageEncoding::for_path(path) {
        // A device or pipe has no extension to pick by: PNG, as `check` promised.
        Err(_) if Target::of(path) == Target::InPlace => ImageEncoding::Png,
        picked => picked?,
    };
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
    /// Makes a character device node `name` in `dir` with the numbers of `/dev/null` (1, 3) or
    /// `/dev/full` (1, 7), so that a test can write to a device without touching the system's
    /// own. Needs root (CI runs as root); `None`, said as skipped, elsewhere.
    fn device_node(dir: &Path, name: &str, minor: u32) -> Option<PathBuf> {
        let path = dir.join(name);
        let made = std::process::Command::new("mknod").arg(&path).args(["c", "1", &minor.to_string()]).status();
        if made.map(|status| status.success()).unwrap_or(false) {
            return Some(path);
        }
        eprintln!("skipped: device node {name} (mknod needs root)");
        None
    }

    fn is_char_device(path: &Path) -> bool {
        use std::os::unix::fs::FileTypeExt;
        std::fs::symlink_metadata(path).map(|m| m.file_type().is_char_device()).unwrap_or(false)
    }

    #[test]
    fn a_device_is_written_in_place_and_a_full_one_says_no_space() {
        let dir = temp_dir("device");
        let null = device_node(&dir, "null", 3);
        let full = device_node(&dir, "full", 7);
        if let (Some(null), Some(full)) = (null, full) {
            check(&null, OutputKind::Data, "--stats").expect("a device is a place to write");
            write(&null, b"{}").expect("written into the null device");
            assert!(is_char_device(&null), "the device node is still a device");
            check(&full, OutputKind::Data, "--stats").expect("checked: fullness shows only on writing");
            let said = write(&full, b"{}").expect_err("a full device refuses").to_string();
            assert!(said.contains("no space"), "{said}");
            assert!(is_char_device(&full), "the full device is still a device");
            let said = write_rgba8(&full, [1, 1], &[0, 0, 0, 255]).expect_err("no space").to_string();
            assert!(said.contains("no space"), "an image without an extension goes to a device too: {said}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_fifo_is_written_in_place_and_an_image_goes_as_png() {
        use std::os::unix::fs::FileTypeExt;
        let dir = temp_dir("fifo");
        let fifo = dir.join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
        assert!(made.success(), "mkfifo made the FIFO");
        check(&fifo, OutputKind::Image, "--screenshot").expect("a FIFO takes an image without an extension");
        let reading = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(&fifo).expect("read the FIFO"))
        };
        write_rgba8(&fifo, [2, 1], &[255, 0, 0, 255, 0, 255, 0, 255]).expect("written into the FIFO");
        let bytes = reading.join().expect("reader thread");
        let image = image::load_from_memory_with_format(&bytes, image::ImageFormat::Png).expect("PNG came through");
        assert_eq!((image.width(), image.height()), (2, 1));
        assert!(std::fs::symlink_metadata(&fifo).expect("still there").file_type().is_fifo());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_folder_or_a_socket_is_refused_before_any_work() {
        let dir = temp_dir("refused");
        let socket = dir.join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind a socket");
        for (path, why) in [(&dir, "is a folder"), (&socket, "is a socket")] {
            for kind in [OutputKind::Data, OutputKind::Image] {
                let said = check(path, kind, "--stats").expect_err("refused").to_string();
                assert!(said.contains(why) && said.contains("--stats"), "{said}");
            }
            let said = write(path, b"x").expect_err("refused").to_string();
            assert!(said.contains(why), "{said}");
        }
        assert!(dir.is_dir());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_link_to_a_file_replaces_the_file_and_stays_a_link() {
        let dir = temp_dir("link");
        std::fs::create_dir_all(dir.join("real")).expect("folder");
        std::fs::write(dir.join("real/stats.json"), b"old").expect("write");
        let absolute = dir.join("absolute.json");
        let relative = dir.join("relative.json");
        std::os::unix::fs::symlink(dir.join("real/stats.json"), &absolute).expect("link");
        std::os::unix::fs::symlink("real/stats.json", &relative).expect("link");
        for (link, text) in [(&absolute, "first"), (&relative, "second")] {
            check(link, OutputKind::Data, "--stats").expect("a link to a file may be written");
            write(link, text.as_bytes()).expect("written through the link");
            assert!(std::fs::symlink_metadata(link).expect("link").file_type().is_symlink(), "still a link");
            assert_eq!(std::fs::read_to_string(dir.join("real/stats.json")).expect("read"), text);
        }
        // A link to a name not yet taken makes that file, as a shell's `>` would.
        let dangling = dir.join("dangling.json");
        std::os::unix::fs::symlink("real/new.json", &dangling).expect("link");
        write(&dangling, b"new").expect("written through a dangling link");
        assert_eq!(std::fs::read_to_string(dir.join("real/new.json")).expect("read"), "new");
        let partials = std::fs::read_dir(dir.join("real")).expect("list").filter_map(|e| e.ok());
        assert!(partials.into_iter().all(|e| !e.file_name().to_string_lossy().ends_with(".partial")));
        std::fs::remove_dir_all(&dir).ok();
    }
}
