//! A kernel that faults (an out-of-bounds store) loses the CUDA context. The driver then refuses
//! all CUDA work in the process, so this test has its own file: it runs in its own process and
//! leaves the other GPU tests a clean device.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

use interop_lab::demo_kit::DemoSpec;
use interop_lab::demos::wave::{KERNEL, WaveSettings};
use interop_lab::headless::{self, HeadlessOptions};
use interop_lab::runtime::{BackendRequest, CudaOptions};
use interop_lab::transfer::WhatIf;

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_kernel_fault_loses_the_context_and_the_demo_goes_on_on_the_cpu() {
    let store = "positions[(size_t)y * width + x] =";
    assert!(KERNEL.embedded.contains(store), "the wave kernel's store is where this test expects it");
    // The store lands 2⁴⁰ elements past the buffer: the kernel launches, then faults.
    let faulting = KERNEL.embedded.replace(store, "positions[(size_t)y * width + x + (1ull << 40)] =");
    let dir = std::env::temp_dir().join(format!("interop-lab-fault-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("wave.cu"), faulting).expect("write kernel");
    // dt = 0: every frame draws the same phase, so a restarted demo draws what a clean run draws.
    let run = |cuda: CudaOptions| {
        headless::run(&HeadlessOptions {
            renderer: interop_lab::graphics::GraphicsApi::Gl,
            spec: DemoSpec::new(WaveSettings::default()),
            frames: 40,
            size: [320, 200],
            dt: 0.0,
            screenshot: None,
            stats: None,
            trace: None,
            panel: false,
            cuda,
            shaders_dir: None,
            what_if: WhatIf::default(),
            open_sections: Vec::new(),
            stop: Default::default(),
            record: None,
            path_flags: Vec::new(),
            progress: false,
        })
    };
    let faulted = run(CudaOptions {
        backend: BackendRequest::Cuda,
        kernels_dir: Some(dir.clone()),
        no_cache: true,
        ..CudaOptions::default()
    })
    .expect("a run whose kernel faults still completes");
    let notes = faulted.json["recoveries"].as_array().expect("recoveries").clone();
    assert_eq!(notes.len(), 1, "one fault, one recovery: {notes:#?}");
    let note = notes[0].as_str().expect("text");
    assert!(note.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "the driver's error is named: {note}");
    assert!(
        note.contains("CPU backend") && note.contains("relaunch"),
        "the note says what happened and the fix: {note}"
    );
    assert_eq!(faulted.json["backend"], "cpu", "{:#}", faulted.json);
    assert_eq!(faulted.json["transfer"], "cpu", "{:#}", faulted.json);

    let clean = run(CudaOptions { backend: BackendRequest::Cpu, ..CudaOptions::default() }).expect("CPU run");
    assert!(faulted.pixels == clean.pixels, "after the recovery the frame is what the CPU backend draws");
    std::fs::remove_dir_all(&dir).ok();
}
