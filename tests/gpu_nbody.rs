//! n-body on the GPU against the f64 CPU reference: one step and 100 steps through GL interop,
//! every kernel variant, fp32 and fp64, momentum, a two-body orbit, energy, state files, and bad
//! launch configurations; path switching and pipelined steps on both renderers. Run with `--include-ignored --test-threads=1` on the GPU machine.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use interop_lab::demo_kit::{Demo, DemoEnv, DemoTransfer};
use interop_lab::demos::nbody::cpu::{self, Params, relative_error};
use interop_lab::demos::nbody::kernels::{Precision, Variant};
use interop_lab::demos::nbody::presets::{Bodies, Preset};
use interop_lab::demos::nbody::state::{self, SavedState};
use interop_lab::demos::nbody::{NBody, NBodySettings};
use interop_lab::graphics::Graphics;
use interop_lab::runtime::{BackendRequest, CudaOptions, Selection};
use interop_lab::transfer::TransferKind;

fn setup() -> (interop_lab::gl::context::headless::HeadlessGl, Selection) {
    common::gpu_setup(&CudaOptions { backend: BackendRequest::Cuda, ..CudaOptions::default() })
}

fn demo(gl: &glow::Context, selection: &Selection, transfer: TransferKind, settings: NBodySettings) -> NBody {
    let env = DemoEnv { graphics: Graphics::Gl(gl), cuda: selection.cuda.clone(), transfer, window: false };
    NBody::new(&env, settings).expect("n-body demo")
}

/// Steps the demo `steps` times, poisoning what each step writes first.
fn run(graphics: Graphics<'_>, nbody: &mut NBody, steps: u64) {
    for frame in 0..steps {
        nbody.poison_next_output(graphics).expect("poison");
        nbody.step(graphics, frame, 0.0).expect("step");
    }
    let (positions, velocities) = nbody.read_drawn_buffers(graphics).expect("read the drawn buffers");
    assert!(positions.iter().flatten().all(|v| v.is_finite()), "every position written");
    assert!(velocities.iter().flatten().all(|v| v.is_finite()), "every velocity written");
}

fn errors(result: &Bodies, reference: &Bodies) -> (f64, f64) {
    (relative_error(&result.positions, &reference.positions), relative_error(&result.velocities, &reference.velocities))
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn one_and_hundred_steps_match_the_f64_reference() {
    let (context, selection) = setup();
    let gl = context.gl().clone();
    let mut random = common::Random::new();
    for precision in [Precision::F32, Precision::F64] {
        for steps in [1u64, 100] {
            let seed = random.next_u64();
            let n = 4096;
            let settings = NBodySettings {
                bodies: Some(n),
                preset: Preset::Plummer,
                seed,
                variant: Variant { precision, ..Variant::default() },
                energy_every: 0,
                ..NBodySettings::default()
            };
            let params = settings.params();
            let initial = Preset::Plummer.generate(n as usize, seed);
            let mut nbody = demo(&gl, &selection, TransferKind::Interop, settings);
            run(Graphics::Gl(&gl), &mut nbody, steps);
            let result = nbody.read_bodies(Graphics::Gl(&gl)).expect("read bodies");
            let reference = cpu::reference_steps(&initial, &params, steps as usize);
            let (position_error, velocity_error) = errors(&result, &reference);
            // fp32: rsqrtf (≤ 2 ulp) and f32 sums over 4096 bodies give ~1e-6 relative
            // accelerations; after one step positions carry only f32 rounding. fp64: ~1e-15.
            let (position_bound, velocity_bound) = match (precision, steps) {
                (Precision::F32, 1) => (1e-6, 1e-5),
                (Precision::F32, _) => (1e-5, 1e-4),
                (Precision::F64, _) => (1e-12, 1e-11),
            };
            eprintln!(
                "{precision:?}, {steps} steps: position error {position_error:e}, velocity error {velocity_error:e}"
            );
            assert!(position_error < position_bound, "{precision:?} {steps} steps: positions {position_error:e}");
            assert!(velocity_error < velocity_bound, "{precision:?} {steps} steps: velocities {velocity_error:e}");
            Box::new(nbody).destroy(Graphics::Gl(&gl));
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn every_variant_and_slicing_agrees_with_the_reference() {
    let (context, selection) = setup();
    let gl = context.gl().clone();
    let mut random = common::Random::new();
    let n = 3001; // not a multiple of any block or tile: exercises every tail
    let seed = random.next_u64();
    let initial = Preset::Collision.generate(n, seed);
    let base = NBodySettings {
        bodies: Some(n as u32),
        preset: Preset::Collision,
        seed,
        energy_every: 0,
        ..NBodySettings::default()
    };
    let reference = cpu::reference_steps(&initial, &base.params(), 5);
    let shapes = [
        (64u32, 64u32, 1u32, 1u32, None),
        (128, 512, 16, 4, Some(7)),
        (256, 256, 8, 2, Some(1)),
        (512, 128, 4, 8, None),
        (1024, 2048, 32, 1, Some(3)),
    ];
    for (block_size, tile_size, unroll, bodies_per_thread, slices) in shapes {
        let variant = Variant { precision: Precision::F32, block_size, tile_size, unroll, bodies_per_thread };
        let mut nbody = demo(&gl, &selection, TransferKind::Interop, NBodySettings { variant, slices, ..base.clone() });
        run(Graphics::Gl(&gl), &mut nbody, 5);
        let (position_error, velocity_error) = errors(&nbody.read_bodies(Graphics::Gl(&gl)).expect("read"), &reference);
        eprintln!("{variant:?} slices {:?}: {position_error:e} {velocity_error:e}", nbody.slices());
        assert!(position_error < 1e-6 && velocity_error < 1e-5, "{variant:?}: {position_error:e} {velocity_error:e}");
        Box::new(nbody).destroy(Graphics::Gl(&gl));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn momentum_is_conserved_and_the_paths_agree() {
    let (context, selection) = setup();
    let gl = context.gl().clone();
    let settings = NBodySettings {
        bodies: Some(2048),
        preset: Preset::Collision,
        seed: 11,
        energy_every: 0,
        ..NBodySettings::default()
    };
    let mut results = Vec::new();
    for transfer in [TransferKind::Interop, TransferKind::HostCopy] {
        let mut nbody = demo(&gl, &selection, transfer, settings.clone());
        let p0 = nbody.read_bodies(Graphics::Gl(&gl)).expect("read").momentum();
        run(Graphics::Gl(&gl), &mut nbody, 100);
        let after = nbody.read_bodies(Graphics::Gl(&gl)).expect("read");
        let scale: f64 = after
            .positions
            .iter()
            .zip(&after.velocities)
            .map(|(p, v)| p[3] * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt())
            .sum();
        let p1 = after.momentum();
        for axis in 0..3 {
            assert!((p1[axis] - p0[axis]).abs() < 1e-5 * scale, "{transfer}: axis {axis} {} → {}", p0[axis], p1[axis]);
        }
        results.push(after);
        Box::new(nbody).destroy(Graphics::Gl(&gl));
    }
    assert!(results[0] == results[1], "interop and host copy run the same kernels on the same data: identical results");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn two_body_orbit_closes_after_one_period() {
    let (context, selection) = setup();
    let gl = context.gl().clone();
    let steps = 2000;
    let softening: f64 = 1e-3;
    let omega = (1.0 / (1.0 + softening * softening).powf(1.5)).sqrt();
    let speed = omega / 2.0;
    let bodies = Bodies {
        positions: vec![[0.5, 0.0, 0.0, 0.5], [-0.5, 0.0, 0.0, 0.5]],
        velocities: vec![[0.0, 0.0, speed], [0.0, 0.0, -speed]],
    };
    let params = Params { dt: std::f64::consts::TAU / omega / steps as f64, softening, gravity: 1.0, damping: 1.0 };
    let path = std::env::temp_dir().join(format!("interop-lab-orbit-{}.state", std::process::id()));
    state::save(&path, &SavedState { bodies: bodies.clone(), params, step: 0 }).expect("save");
    for precision in [Precision::F32, Precision::F64] {
        let settings = NBodySettings {
            load: Some(path.clone()),
            variant: Variant { precision, ..Variant::default() },
            energy_every: 0,
            ..NBodySettings::default()
        };
        let mut nbody = demo(&gl, &selection, TransferKind::Interop, settings);
        for frame in 0..steps {
            nbody.step(Graphics::Gl(&gl), frame, 0.0).expect("step");
        }
        let after = nbody.read_bodies(Graphics::Gl(&gl)).expect("read");
        let error = relative_error(&after.positions, &bodies.positions);
        eprintln!("{precision:?}: orbit closes within {error:e}");
        // Leapfrog's phase error after one orbit at 2000 steps is ~1e-5; f32 rounding adds ~1e-6.
        assert!(error < 1e-4, "{precision:?}: {error:e}");
        Box::new(nbody).destroy(Graphics::Gl(&gl));
    }
    std::fs::remove_file(&path).ok();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_energy_equals_the_cpu_energy_of_the_same_state() {
    let (context, selection) = setup();
    let gl = context.gl().clone();
    for precision in [Precision::F32, Precision::F64] {
        let settings = NBodySettings {
            bodies: Some(3000),
            preset: Preset::Plummer,
            seed: 3,
            energy_every: 10,
            variant: Variant { precision, ..Variant::default() },
            ..NBodySettings::default()
        };
        let mut nbody = demo(&gl, &selection, TransferKind::Interop, settings);
        for frame in 0..10 {
            nbody.step(Graphics::Gl(&gl), frame, 0.0).expect("step");
        }
        // Energy results arrive a few frames late (the GPU runs behind the host); one request is
        // in flight at a time. Drain it, then ask for the energy of the state now.
        nbody.collect_energy().expect("energy");
        nbody.request_energy(Graphics::Gl(&gl)).expect("request");
        nbody.collect_energy().expect("energy");
        let (Some((step, kinetic, potential)), Some(initial)) = nbody.energy() else { panic!("energy computed") };
        assert_eq!(step, 10);
        let bodies = nbody.read_bodies(Graphics::Gl(&gl)).expect("read");
        let velocities: Vec<[f64; 4]> = bodies.velocities.iter().map(|v| [v[0], v[1], v[2], 0.0]).collect();
        let (cpu_kinetic, cpu_potential) = cpu::energy(&bodies.positions, &velocities, &nbody.params());
        let bound = 1e-9;
        assert!(
            ((kinetic - cpu_kinetic) / cpu_kinetic).abs() < bound,
            "{precision:?} kinetic {kinetic} vs {cpu_kinetic}"
        );
        assert!(
            ((potential - cpu_potential) / cpu_potential).abs() < bound,
            "{precision:?} potential {potential} vs {cpu_potential}"
        );
        let drift = ((kinetic + potential) - initial) / initial.abs();
        assert!(drift.abs() < 1e-4, "{precision:?}: energy drift {drift:e} after 10 steps");
        Box::new(nbody).destroy(Graphics::Gl(&gl));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_launch_the_device_cannot_run_is_refused_by_name() {
    let (context, selection) = setup();
    let gl = context.gl().clone();
    // 8192 fp64 bodies per tile need 256 KiB of shared memory; the H200 allows 227 KiB per block.
    let variant =
        Variant { precision: Precision::F64, block_size: 256, tile_size: 8192, unroll: 4, bodies_per_thread: 1 };
    let env = DemoEnv {
        graphics: Graphics::Gl(&gl),
        cuda: selection.cuda.clone(),
        transfer: TransferKind::Interop,
        window: false,
    };
    let error = NBody::new(&env, NBodySettings { bodies: Some(10_000), variant, ..NBodySettings::default() })
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains("dynamic shared memory") && error.contains("262144 bytes"), "{error}");
    let error = NBody::new(&env, NBodySettings { bodies: Some(0), ..NBodySettings::default() })
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains("the number of bodies 0 is less than 1; the range is 1 to 16777216"), "{error}");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_simulation_carries_over_between_every_path() {
    let (context, selection) = setup();
    let gl = context.gl().clone();
    let path = [
        TransferKind::External,
        TransferKind::ExternalSemaphores,
        TransferKind::Cpu,
        TransferKind::HostCopyPageable,
        TransferKind::HostCopy,
        TransferKind::Interop,
    ];
    carry_over(Graphics::Gl(&gl), selection.cuda.clone(), TransferKind::Interop, &path);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn on_vulkan_the_simulation_carries_over_between_every_path() {
    let (vulkan, cuda) = common::vulkan_cuda_setup([64, 64]);
    let path = [TransferKind::HostCopy, TransferKind::Cpu, TransferKind::HostCopyPageable, TransferKind::Vulkan];
    carry_over(Graphics::Vulkan(&vulkan), Some(cuda), TransferKind::Vulkan, &path);
}

/// Steps once on each path of `path` (starting on `start`), checking that each switch keeps the
/// bodies, then once more; the state must be the f64 reference's after that many steps.
fn carry_over(
    graphics: Graphics<'_>,
    cuda: Option<std::rc::Rc<interop_lab::runtime::CudaRuntime>>,
    start: TransferKind,
    path: &[TransferKind],
) {
    let n = 1024;
    let settings = NBodySettings {
        bodies: Some(n),
        preset: Preset::Plummer,
        seed: 21,
        energy_every: 0,
        ..NBodySettings::default()
    };
    let initial = Preset::Plummer.generate(n as usize, 21);
    let env = DemoEnv { graphics, cuda, transfer: start, window: false };
    let mut nbody = NBody::new(&env, settings.clone()).expect("n-body demo");
    assert_eq!(nbody.pipeline().kind(), start);
    for (frame, &transfer) in path.iter().enumerate() {
        nbody.step(graphics, frame as u64, 0.0).expect("step");
        let before = nbody.read_bodies(graphics).expect("read");
        nbody.switch_transfer(graphics, transfer).unwrap_or_else(|e| panic!("switch to {transfer}: {e}"));
        assert_eq!(nbody.pipeline().kind(), transfer);
        assert!(nbody.read_bodies(graphics).expect("read") == before, "the bodies survive the switch to {transfer}");
    }
    nbody.step(graphics, 99, 0.0).expect("step");
    let reference = cpu::reference_steps(&initial, &settings.params(), path.len() + 1);
    let (position_error, velocity_error) = errors(&nbody.read_bodies(graphics).expect("read"), &reference);
    assert!(position_error < 1e-6 && velocity_error < 1e-5, "{position_error:e} {velocity_error:e}");
    Box::new(nbody).destroy(graphics);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn more_bodies_than_free_device_memory_are_refused_and_fewer_then_run() {
    let (context, selection) = setup();
    let gl = context.gl().clone();
    let cuda = selection.cuda.clone().expect("cuda");
    let env = DemoEnv {
        graphics: Graphics::Gl(&gl),
        cuda: selection.cuda.clone(),
        transfer: TransferKind::Interop,
        window: false,
    };
    let n = 4_000_000u32; // ≥ 6 × 4 M × 16 bytes ≈ 366 MiB with its slices and GL buffers
    // Another user of the GPU holds all but 256 MiB.
    let (free, _) = cuda.context.memory_info().expect("memory info");
    let hog = interop_lab::cuda::DeviceBuffer::new(&cuda.context, free - (256 << 20)).expect("hold the memory");
    let error = NBody::new(&env, NBodySettings { bodies: Some(n), ..NBodySettings::default() })
        .err()
        .expect("refused while the memory is taken")
        .to_string();
    assert!(error.contains("MiB are free: choose fewer bodies"), "{error}");
    drop(hog);
    let nbody =
        NBody::new(&env, NBodySettings { bodies: Some(n), ..NBodySettings::default() }).expect("runs once freed");
    Box::new(nbody).destroy(Graphics::Gl(&gl));
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_background_compile_draws_still_bodies_then_steps_like_the_reference() {
    // As the window starts: kernels not cached (no cache at all here), compiled on a thread.
    let options = CudaOptions {
        backend: BackendRequest::Cuda,
        no_cache: true,
        background_compiles: true,
        ..CudaOptions::default()
    };
    let (context, selection) = common::gpu_setup(&options);
    let gl = context.gl().clone();
    let seed = common::Random::new().next_u64();
    let n = 2048;
    let settings = NBodySettings {
        bodies: Some(n),
        preset: Preset::Plummer,
        seed,
        auto_variant: false,
        energy_every: 0,
        ..NBodySettings::default()
    };
    let params = settings.params();
    let initial = Preset::Plummer.generate(n as usize, seed);
    let mut nbody = demo(&gl, &selection, TransferKind::Interop, settings);
    assert!(nbody.compiling().is_some(), "the kernels compile in the background");
    // Frames go on while NVRTC works: each leaves the bodies where they started.
    let started = std::time::Instant::now();
    let mut waiting_frames = 0u64;
    while nbody.compiling().is_some() {
        assert!(started.elapsed().as_secs() < 120, "the background compile did not finish in 120 s");
        nbody.step(Graphics::Gl(&gl), waiting_frames, 0.0).expect("a frame while compiling");
        if nbody.compiling().is_some() {
            assert_eq!(nbody.steps(), 0, "no step before the kernels arrive");
            assert_eq!(nbody.read_bodies(Graphics::Gl(&gl)).expect("read"), initial);
        }
        waiting_frames += 1;
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    eprintln!("{waiting_frames} frames drawn while compiling ({:.2} s)", started.elapsed().as_secs_f64());
    // The frame that took the kernels stepped once; step on to 10 and compare.
    let steps = 10;
    let remaining = steps - nbody.steps();
    run(Graphics::Gl(&gl), &mut nbody, remaining);
    assert_eq!(nbody.steps(), steps);
    let result = nbody.read_bodies(Graphics::Gl(&gl)).expect("read bodies");
    let (position_error, velocity_error) = errors(&result, &cpu::reference_steps(&initial, &params, steps as usize));
    eprintln!("after {steps} steps: position error {position_error:e}, velocity error {velocity_error:e}");
    assert!(position_error < 1e-5 && velocity_error < 1e-4, "{position_error:e} {velocity_error:e}");
    Box::new(nbody).destroy(Graphics::Gl(&gl));
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_pipeline_keeps_the_state_on_the_device_and_draws_each_step_as_it_is() {
    // --pipeline-depth 2: the state lives in device memory and two pairs of GL buffers take turns
    // as the drawn copy; each step writes the pair mapped during the step before. After steps run
    // back to back, the state must match the f64 reference, and the drawn copy must be the current
    // state (a pair left from two steps ago, or a copy not fully written, would differ).
    let (context, selection) = setup();
    let gl = context.gl().clone();
    let paths =
        [TransferKind::Interop, TransferKind::External, TransferKind::ExternalSemaphores, TransferKind::HostCopy];
    pipelined_steps_match(Graphics::Gl(&gl), selection.cuda.clone(), &paths);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn on_vulkan_a_pipeline_keeps_the_state_on_the_device_and_draws_each_step_as_it_is() {
    let (vulkan, cuda) = common::vulkan_cuda_setup([64, 64]);
    pipelined_steps_match(Graphics::Vulkan(&vulkan), Some(cuda), &[TransferKind::Vulkan, TransferKind::HostCopy]);
}

/// Steps at pipeline depth 2 on each path, fp32 and fp64; the state must match the f64 reference and
/// the drawn copy must be the current state.
fn pipelined_steps_match(
    graphics: Graphics<'_>,
    cuda: Option<std::rc::Rc<interop_lab::runtime::CudaRuntime>>,
    paths: &[TransferKind],
) {
    let mut random = common::Random::new();
    for precision in [Precision::F32, Precision::F64] {
        for &transfer in paths {
            let seed = random.next_u64();
            let n = 2048;
            let settings = NBodySettings {
                bodies: Some(n),
                preset: Preset::Plummer,
                seed,
                variant: Variant { precision, ..Variant::default() },
                energy_every: 4,
                pipeline_depth: 2,
                ..NBodySettings::default()
            };
            let params = settings.params();
            let initial = Preset::Plummer.generate(n as usize, seed);
            let env = DemoEnv { graphics, cuda: cuda.clone(), transfer, window: false };
            let mut nbody = NBody::new(&env, settings).expect("n-body demo");
            assert_eq!(nbody.pipeline().kind(), transfer);
            let steps = 11;
            for frame in 0..steps {
                nbody.step(graphics, frame, 0.0).expect("step");
            }
            let result = nbody.read_bodies(graphics).expect("read bodies");
            let (position_error, velocity_error) =
                errors(&result, &cpu::reference_steps(&initial, &params, steps as usize));
            let (position_bound, velocity_bound) =
                if precision == Precision::F32 { (1e-5, 1e-4) } else { (1e-12, 1e-11) };
            let label = format!("{} {precision:?} {transfer}", graphics.api().label());
            eprintln!("{label}: position error {position_error:e}, velocity error {velocity_error:e}");
            assert!(position_error < position_bound && velocity_error < velocity_bound, "{label}");
            let (positions, velocities) = nbody.read_drawn_buffers(graphics).expect("read the drawn buffers");
            for (i, (drawn, state)) in positions.iter().zip(&result.positions).enumerate() {
                assert_eq!(*drawn, state.map(|v| v as f32), "{label}: body {i}'s drawn position");
            }
            for (i, (drawn, state)) in velocities.iter().zip(&result.velocities).enumerate() {
                assert_eq!(drawn[..3], state.map(|v| v as f32), "{label}: body {i}'s drawn velocity");
            }
            Box::new(nbody).destroy(graphics);
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn on_vulkan_cuda_steps_imported_memory_like_the_reference() {
    let (vulkan, cuda) = common::vulkan_cuda_setup([64, 64]);
    let graphics = Graphics::Vulkan(&vulkan);
    let mut random = common::Random::new();
    for steps in [1u64, 20] {
        let (n, seed) = (4096, random.next_u64());
        let settings = NBodySettings {
            bodies: Some(n),
            preset: Preset::Plummer,
            seed,
            energy_every: 0,
            ..NBodySettings::default()
        };
        let reference =
            cpu::reference_steps(&Preset::Plummer.generate(n as usize, seed), &settings.params(), steps as usize);
        let env = DemoEnv { graphics, cuda: Some(cuda.clone()), transfer: TransferKind::Vulkan, window: false };
        let mut nbody = NBody::new(&env, settings).expect("n-body on the Vulkan path");
        assert_eq!(nbody.pipeline().kind(), TransferKind::Vulkan);
        // Each step's output poisoned (NaN) first; read back through CUDA's import.
        run(graphics, &mut nbody, steps);
        let (position_error, velocity_error) = errors(&nbody.read_bodies(graphics).expect("read"), &reference);
        eprintln!("Vulkan, {steps} steps: position error {position_error:e}, velocity error {velocity_error:e}");
        // As on GL interop (fp32, 4096 bodies): f32 rounding after one step, growing slowly.
        let (position_bound, velocity_bound) = if steps == 1 { (1e-6, 1e-5) } else { (1e-5, 1e-4) };
        assert!(position_error < position_bound, "{steps} steps: positions {position_error:e}");
        assert!(velocity_error < velocity_bound, "{steps} steps: velocities {velocity_error:e}");
        Box::new(nbody).destroy(graphics);
    }
}
