//! A body that becomes NaN or infinite during a run: the step is found out within a frame, the
//! message names what happened and where the demo went back to, the run pauses on the last good
//! state (which `--save` then writes, finite), and a headless run ends with an error instead of
//! drawing a blank screen. The CPU backend runs here with bodies so far apart that fp32 cannot
//! hold their distance; the GPU machine runs the same with an edited drift kernel that writes a
//! NaN at its 31st launch, on the tree and on all-pairs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use std::path::Path;

use common::{binary, temp_dir};
use interop_lab::demos::nbody::cpu::Params;
use interop_lab::demos::nbody::presets::Bodies;
use interop_lab::demos::nbody::state::{self, SavedState};

/// Runs a headless n-body that must diverge: its standard error, and the state it saved.
fn diverging_run(args: &[&str], dir: &Path) -> (String, SavedState) {
    let saved = dir.join("after.state");
    let output = binary()
        .args(["nbody", "--headless", "--size", "320x200"])
        .args(args)
        .arg("--save")
        .arg(&saved)
        .output()
        .expect("run");
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "a diverged run must not end as a success: {said}");
    assert!(said.contains("NaN or infinite"), "the message names what happened: {said}");
    assert!(said.contains("went back to"), "the message says where the demo went back to: {said}");
    assert!(said.contains("a shorter dt or a larger softening"), "the message says what to change: {said}");
    let state = state::load(&saved).expect("the last good state is saved");
    let finite = |v: &f64| v.is_finite();
    assert!(state.bodies.positions.iter().flatten().all(finite), "saved positions are finite");
    assert!(state.bodies.velocities.iter().flatten().all(finite), "saved velocities are finite");
    (said, state)
}

#[test]
fn bodies_that_overflow_fp32_are_found_named_and_the_start_is_kept() {
    let dir = temp_dir("diverged-cpu");
    // 2¹²⁸ apart: their distance is infinite in fp32, so the first force is NaN (2¹²⁷ itself is
    // a float, so the state kept compares equal).
    let far = 2f64.powi(127);
    let start = SavedState {
        bodies: Bodies {
            positions: vec![[far, 0.0, 0.0, 1.0], [-far, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0]],
            velocities: vec![[0.0; 3]; 3],
        },
        params: Params { dt: 0.001, softening: 0.02, gravity: 1.0, damping: 1.0 },
        step: 0,
    };
    let load = dir.join("far.state");
    state::save(&load, &start).expect("save");
    let load = load.to_str().expect("utf-8 path");
    let (said, kept) = diverging_run(&["--backend", "cpu", "--frames", "5", "--load", load], &dir);
    assert!(said.contains("went back to the starting state (step 0)"), "{said}");
    assert_eq!(kept.step, 0, "{said}");
    assert_eq!(kept.bodies, start.bodies, "the state kept is the one loaded: {said}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The project's kernels with a drift kernel that writes a NaN into body 0 at its 31st launch.
fn poisoned_kernels(dir: &Path) -> String {
    let kernels = dir.join("kernels");
    std::fs::create_dir_all(&kernels).expect("kernels folder");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    for entry in std::fs::read_dir(&root).expect("kernels/") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, kernels.join(path.file_name().expect("name"))).expect("copy");
    }
    let source = std::fs::read_to_string(root.join("nbody.cu")).expect("nbody.cu");
    let store = "    positions_out[i] = moved;\n";
    assert!(source.contains(store), "nbody_drift's store is where the test expects it");
    let poisoned = source.replacen(
        store,
        "    real4 out = moved;\n    if (i == 0 && atomicAdd(&poison_drifts, 1u) == 30u) {\n        out.x = (real)__int_as_float(0x7fc00000);\n    }\n    positions_out[i] = out;\n",
        1,
    );
    let poisoned = format!("__device__ unsigned int poison_drifts;\n{poisoned}");
    std::fs::write(kernels.join("nbody.cu"), poisoned).expect("write nbody.cu");
    kernels.to_str().expect("utf-8 path").to_owned()
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_nan_written_by_an_edited_kernel_is_found_named_and_the_last_good_state_kept() {
    for (method, preset, transfer) in
        [("tree", "merger", "interop"), ("tree", "merger", "external-semaphores"), ("all-pairs", "plummer", "interop")]
    {
        let dir = temp_dir("diverged-cuda");
        let kernels = poisoned_kernels(&dir);
        let args = [
            "--backend",
            "cuda",
            "--transfer",
            transfer,
            "--method",
            method,
            "--preset",
            preset,
            "--bodies",
            "65536",
            "--frames",
            "120",
            "--energy-every",
            "1",
            "--kernels",
            &kernels,
        ];
        let (said, kept) = diverging_run(&args, &dir);
        println!("{method} on {transfer}: {said}");
        // The first checkpoint is read at the first step, before the NaN at the 31st drift.
        assert!(said.contains("went back to the state of step 1"), "{method} on {transfer}: {said}");
        assert_eq!(kept.step, 1, "{method} on {transfer}: {said}");
        assert_eq!(kept.bodies.len(), 65536);
        std::fs::remove_dir_all(&dir).ok();
    }
}
