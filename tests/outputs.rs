//! Outputs asked for on the command line never replace what is not a regular file: a device is
//! written in place (a full one fails the run, saying so), a folder or socket is refused before
//! the run starts.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// A character device node with `/dev/full`'s (1, 7) or `/dev/null`'s (1, 3) numbers, made in the
/// test's folder so the system's own are never at stake. Needs root (CI runs as root).
fn device_node(dir: &Path, name: &str, minor: u32) -> Option<PathBuf> {
    let path = dir.join(name);
    let made = std::process::Command::new("mknod").arg(&path).args(["c", "1", &minor.to_string()]).status();
    if made.map(|status| status.success()).unwrap_or(false) {
        return Some(path);
    }
    eprintln!("skipped: the device cases (mknod needs root)");
    None
}

fn wave_with_stats(stats: &Path) -> std::process::Output {
    common::binary()
        .args(["wave", "--headless", "--backend", "cpu", "--frames", "2", "--size", "64x48", "--stats"])
        .arg(stats)
        .output()
        .expect("run interop-lab")
}

fn is_char_device(path: &Path) -> bool {
    std::fs::symlink_metadata(path).map(|m| m.file_type().is_char_device()).unwrap_or(false)
}

#[test]
fn stats_to_a_full_device_fails_saying_so_and_the_device_stays_a_device() {
    let dir = common::temp_dir("outputs-device");
    if let (Some(full), Some(null)) = (device_node(&dir, "full", 7), device_node(&dir, "null", 3)) {
        let run = wave_with_stats(&full);
        let said = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "a stats file that could not be written fails the run: {said}");
        assert!(said.contains("no space"), "{said}");
        assert!(is_char_device(&full), "the full device was replaced by a file");
        let run = wave_with_stats(&null);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        assert!(is_char_device(&null), "the null device was replaced by a file");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn stats_to_a_folder_or_a_socket_is_refused_before_the_run() {
    let dir = common::temp_dir("outputs-refused");
    let socket = dir.join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind a socket");
    for (path, why) in [(&dir, "is a folder"), (&socket, "is a socket")] {
        let started = std::time::Instant::now();
        let run = wave_with_stats(path);
        let said = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success() && said.contains(why) && said.contains("--stats"), "{said}");
        eprintln!("{why}: refused in {:?}", started.elapsed());
    }
    assert!(socket.exists() && dir.is_dir());
    std::fs::remove_dir_all(&dir).ok();
}
