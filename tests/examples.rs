//! The programs in examples/, run as a user runs them. `cargo test` builds them beside the test
//! executables (target/*/examples/). Without an NVIDIA driver each must say what is missing and
//! exit with status 1, without a panic and without writing its output; on the GPU machine each
//! must check its values and write its PNG.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

/// The examples that need a GPU to do their work.
const EXAMPLES: &[&str] = &["egl_texture", "gl_buffer", "vulkan_shared"];

/// The built example `name`: in `INTEROP_LAB_EXAMPLES` (the GPU machine: scripts/stage-examples),
/// else target/<profile>/examples/<name>, beside this test's deps/ folder.
fn example(name: &str) -> PathBuf {
    let folder = std::env::var_os("INTEROP_LAB_EXAMPLES").map(PathBuf::from).unwrap_or_else(|| {
        let exe = std::env::current_exe().expect("test executable");
        exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>").join("examples")
    });
    let path = folder.join(name);
    assert!(path.exists(), "{} is not built: cargo test builds examples (cargo build --examples)", path.display());
    path
}

/// Runs example `name` writing `out`: gl_buffer closes after 60 frames (its first argument).
fn run(name: &str, out: &std::path::Path) -> Output {
    let mut command = Command::new(example(name));
    if name == "gl_buffer" {
        command.arg("60");
    }
    command.arg(out).output().expect("run the example")
}

#[test]
fn without_an_nvidia_driver_each_example_says_what_is_missing() {
    if interop_lab::cuda::driver::driver_library_present() {
        println!("skipped: this machine has an NVIDIA driver (tests/examples.rs's GPU test runs the examples)");
        return;
    }
    let dir = common::temp_dir("examples-without-gpu");
    for name in EXAMPLES {
        let out = dir.join(format!("{name}.png"));
        let output = run(name, &out);
        let said = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{name}: {said}");
        assert!(said.starts_with(&format!("{name}: ")) && said.contains("install the NVIDIA driver"), "{name}: {said}");
        assert!(!said.contains("panicked"), "{name}: {said}");
        assert!(!out.exists(), "{name} wrote {} though it could not run", out.display());
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn on_the_gpu_each_example_checks_its_values_and_writes_its_png() {
    let dir = common::temp_dir("examples-on-gpu");
    for name in EXAMPLES {
        if *name == "gl_buffer" && std::env::var_os("DISPLAY").is_none() {
            println!("skipped: gl_buffer opens a window and there is no display (run it under Xvfb)");
            continue;
        }
        let out = dir.join(format!("{name}.png"));
        let output = run(name, &out);
        let (said, told) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "{name}: {said}{told}");
        assert!(said.contains("matches"), "{name} says what it checked: {said}");
        let image = image::open(&out).unwrap_or_else(|e| panic!("{name}'s PNG: {e}"));
        assert!(image.width() > 0 && image.height() > 0, "{name}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
