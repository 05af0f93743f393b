//! The on-disk cache of compiled modules: a key stable across Rust releases, writes that a
//! crash cannot leave half done, and where the cache lives.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::compiled::{CompiledModule, ImageKind};

/// A module read from the cache.
pub(super) fn from_cache(origin: &str, image: Vec<u8>, kind: ImageKind, target: String) -> CompiledModule {
    CompiledModule {
        origin: origin.to_owned(),
        image,
        kind,
        target,
        from_cache: true,
        compile_time: Duration::ZERO,
        log: String::new(),
    }
}

/// The cached image at `path`, when there is a non-empty one.
pub(super) fn read_cached(path: Option<&Path>) -> Option<Vec<u8>> {
    path.and_then(|path| std::fs::read(path).ok()).filter(|image| !image.is_empty())
}

/// FNV-1a, 64 bit, over each part and its length: stable across Rust releases (unlike `DefaultHasher`).
pub fn cache_key(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for &b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for part in parts {
        feed(&(part.len() as u64).to_le_bytes());
        feed(part.as_bytes());
    }
    hash
}

pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)
}

/// The default cache folder: `$INTEROP_LAB_CACHE`, else `$XDG_CACHE_HOME/interop-lab/kernels`,
/// else `~/.cache/interop-lab/kernels`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("INTEROP_LAB_CACHE") {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("interop-lab").join("kernels"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_key_changes_with_every_part() {
        let base = cache_key(&["13.0", "sm_90", "", "wave.cu", "source"]);
        assert_eq!(base, cache_key(&["13.0", "sm_90", "", "wave.cu", "source"]));
        assert_ne!(base, cache_key(&["13.1", "sm_90", "", "wave.cu", "source"]));
        assert_ne!(base, cache_key(&["13.0", "sm_89", "", "wave.cu", "source"]));
        assert_ne!(base, cache_key(&["13.0", "sm_90", "-DX", "wave.cu", "source"]));
        assert_ne!(base, cache_key(&["13.0", "sm_90", "", "wave.cu", "source "]));
        // Lengths are hashed too, so moving a boundary between parts changes the key.
        assert_ne!(cache_key(&["ab", "c"]), cache_key(&["a", "bc"]));
    }
}
