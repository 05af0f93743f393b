//! Kernel and shader files: embedded in the binary at build time, and replaceable by a file of the
//! same name in a folder on disk (`--kernels`, `--shaders`) so they can be edited without a rebuild.

use std::path::Path;

use crate::error::{Error, Result};

/// A source file of the project: its name under `kernels/` or `shaders/` and its embedded text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceFile {
    /// File name, e.g. `wave.cu`.
    pub name: &'static str,
    /// The text as it was when the binary was built.
    pub embedded: &'static str,
}

impl SourceFile {
    /// The text from `dir` when a file of this name exists there, else the embedded copy, with a
    /// description of where it came from.
    pub fn read(&self, dir: Option<&Path>) -> Result<(String, String)> {
        if let Some(dir) = dir {
            let path = dir.join(self.name);
            if path.is_file() {
                let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
                return Ok((text, path.display().to_string()));
            }
        }
        Ok((self.embedded.to_owned(), format!("{} (embedded)", self.name)))
    }
}

/// Declares a [`SourceFile`] for a file of the crate, e.g. `source_file!("kernels/wave.cu")` (the
/// app's kernels and shaders).
#[cfg(feature = "app")]
macro_rules! source_file {
    ($path:literal) => {
        $crate::sources::SourceFile {
            name: $crate::sources::file_name($path),
            embedded: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $path)),
        }
    };
}
#[cfg(feature = "app")]
pub(crate) use source_file;

/// The part of `path` after its last `/` (usable in constants).
pub const fn file_name(path: &'static str) -> &'static str {
    let bytes = path.as_bytes();
    let mut start = bytes.len();
    while start > 0 && bytes[start - 1] != b'/' {
        start -= 1;
    }
    let (_, name) = bytes.split_at(start);
    match std::str::from_utf8(name) {
        Ok(name) => name,
        Err(_) => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_copy_replaces_the_embedded_one() {
        let file = SourceFile { name: "probe.cu", embedded: "embedded text" };
        let dir = std::env::temp_dir().join(format!("interop-lab-sources-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        assert_eq!(file.read(Some(&dir)).expect("read").0, "embedded text");
        std::fs::write(dir.join("probe.cu"), "disk text").expect("write");
        let (text, origin) = file.read(Some(&dir)).expect("read");
        assert_eq!(text, "disk text");
        assert!(origin.ends_with("probe.cu"), "{origin}");
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(file_name("kernels/wave.cu"), "wave.cu");
        assert_eq!(file_name("wave.cu"), "wave.cu");
    }
}
