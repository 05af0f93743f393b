//! Flags as a user types them: numbers are checked against their ranges when the command line is
//! read, and refused in words that echo what was typed; n-body on the CPU runs headless what it
//! is asked, however many bodies.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use common::{binary, temp_dir};

/// Runs `args` and checks that they are refused before any work: a non-zero exit (not a panic)
/// whose message holds every piece of `expected`.
fn refused(args: &[&str], expected: &[&str]) {
    let output = binary().args(args).env_remove("DISPLAY").output().expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{args:?} must be refused, got: {stderr}");
    assert_ne!(output.status.code(), Some(101), "{args:?} panicked: {stderr}");
    for piece in expected {
        assert!(stderr.contains(piece), "{args:?}: {stderr:?} should say {piece:?}");
    }
    assert!(!stderr.contains("{ "), "{args:?}: a message in words, not a Rust value: {stderr}");
}

#[test]
fn a_number_out_of_range_is_refused_with_the_value_as_typed_and_the_range() {
    let nbody = ["nbody", "--headless", "--backend", "cpu", "--frames", "1", "--size", "64x64"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { [&nbody[..], extra].concat() };
    refused(&with(&["--brightness", "NaN"]), &["'NaN'", "NaN is not a number", "the range is"]);
    refused(&with(&["--point-size", "-1"]), &["'-1'", "-1 is less than 0", "the range is more than 0, up to"]);
    refused(&with(&["--colour-scale", "inf"]), &["'inf'", "inf is not a finite number", "the range is"]);
    refused(
        &with(&["--block-size", "0"]),
        &["'0'", "0 is less than 32", "the range is 32 to 1024 threads, a multiple of 32"],
    );
    refused(&with(&["--dt", "1e308"]), &["'1e308'", "1e308 is more than 1", "the range is more than 0, up to 1"]);
    refused(
        &["wave", "--headless", "--backend", "cpu", "--frame-time", "1e308"],
        &["1e308 is more than", "the range is 0 to"],
    );
    refused(
        &["blur", "--headless", "--backend", "cpu", "--split", "4294967296"],
        &["4294967296 is more than 1", "the range is 0 to 1"],
    );
    refused(
        &["blur", "--headless", "--backend", "cpu", "--block", "0x0"],
        &["0x0: 0 is less than 1", "the range is each 1 to 1024"],
    );
    refused(
        &["wave", "--headless", "--backend", "cpu", "--grid", "0x0"],
        &["0x0: 0 is less than 1", "the range is x 1 to"],
    );
    refused(&["bench", "transfer", "--bytes", "9G"], &["9G is more than 4G", "the range is 4 to 4G bytes"]);
    refused(&["soak", "--frames", "-3"], &["-3 is less than 1", "the range is 1 to 1000000000 frames"]);
}

#[test]
fn cuda_launch_flags_in_range_are_read_and_left_to_the_device_check() {
    // 1024x2 is within every axis's range (1 to 1024), so the command line takes it; whether a
    // device runs 2048 threads per block is LaunchConfig::validate's to say, naming the device's
    // limit. On the CPU the flag has no effect, and the run says so.
    let output = binary()
        .args(["blur", "--headless", "--backend", "cpu", "--frames", "1", "--size", "64x64", "--block", "1024x2"])
        .env_remove("DISPLAY")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("--block 1024x2 sets how CUDA launches the kernel"), "{stderr}");
}

#[test]
fn headless_nbody_on_the_cpu_runs_more_bodies_than_the_window_takes() {
    // 16384 bodies take about 0.6 s a step on two cores: more than the window's limit on some
    // runs, never a reason to refuse an offscreen run, which does what it is asked.
    let dir = temp_dir("headless-nbody-16k");
    let stats = dir.join("stats.json");
    let output = binary()
        .args(["nbody", "--headless", "--frames", "1", "--bodies", "16384", "--backend", "cpu", "--size", "64x64"])
        .arg("--stats")
        .arg(&stats)
        .env_remove("DISPLAY")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("window"), "a headless run says nothing of a window: {stderr}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).expect("stats")).expect("JSON");
    assert_eq!(json["frames"], 1, "{json:#}");
    std::fs::remove_dir_all(&dir).ok();
}
