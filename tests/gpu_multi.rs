//! n-body split across contexts, checked on one GPU with several contexts (`--devices 0,0`): the
//! split result equals the single-device result bit for bit when the slice length is the same,
//! an uneven three-way split equals one context, both match the f64 CPU reference, the GL demo
//! split across contexts draws the same bodies as the demo on one device, and bad device lists are
//! refused by name. Run with `--include-ignored --test-threads=1` on the GPU machine.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use interop_lab::cuda::{DeviceBuffer, Stream};
use interop_lab::demo_kit::{Demo, DemoEnv};
use interop_lab::demos::nbody::cpu::{self, Params, relative_error};
use interop_lab::demos::nbody::kernels::{Kernels, Precision, Variant};
use interop_lab::demos::nbody::multi::MultiSimulation;
use interop_lab::demos::nbody::presets::{Bodies, Preset};
use interop_lab::demos::nbody::sim::{Simulation, StepBuffers};
use interop_lab::demos::nbody::{NBody, NBodySettings};
use interop_lab::graphics::Graphics;
use interop_lab::runtime::{self, BackendRequest, CudaOptions, CudaRuntime};
use interop_lab::transfer::TransferKind;

fn cuda() -> CudaRuntime {
    runtime::cuda_without_gl(&CudaOptions { backend: BackendRequest::Cuda, ..CudaOptions::default() })
        .expect("CUDA must run for this test")
}

/// The state of one run: ping-pong positions and velocities in the first device's memory.
struct Buffers {
    positions: [DeviceBuffer; 2],
    velocities: DeviceBuffer,
    current: usize,
}

impl Buffers {
    fn new(cuda: &CudaRuntime, stream: &Stream, bodies: &Bodies) -> Self {
        let n = bodies.len();
        let positions: Vec<[f32; 4]> = bodies.positions.iter().map(|p| p.map(|v| v as f32)).collect();
        let velocities: Vec<[f32; 4]> =
            bodies.velocities.iter().map(|v| [v[0] as f32, v[1] as f32, v[2] as f32, 0.0]).collect();
        let mut buffers = Self {
            positions: [
                DeviceBuffer::new(&cuda.context, n * 16).unwrap(),
                DeviceBuffer::new(&cuda.context, n * 16).unwrap(),
            ],
            velocities: DeviceBuffer::new(&cuda.context, n * 16).unwrap(),
            current: 0,
        };
        buffers.positions[0].upload(stream, bytemuck::cast_slice(&positions)).unwrap();
        buffers.velocities.upload(stream, bytemuck::cast_slice(&velocities)).unwrap();
        buffers
    }

    fn spans(&self) -> StepBuffers {
        StepBuffers {
            positions_in: self.positions[self.current].span(),
            positions_out: self.positions[1 - self.current].span(),
            velocities: self.velocities.span(),
        }
    }

    /// Poisons what the next step must write (all of positions out; velocities are read first).
    fn poison(&mut self, stream: &Stream) {
        self.positions[1 - self.current].fill(stream, 0xff).unwrap();
    }

    fn read(&self, stream: &Stream) -> (Vec<[f32; 4]>, Vec<[f32; 4]>) {
        let n = self.velocities.len() / 16;
        let mut positions = vec![[0.0f32; 4]; n];
        let mut velocities = vec![[0.0f32; 4]; n];
        self.positions[self.current].download(stream, bytemuck::cast_slice_mut(&mut positions)).unwrap();
        self.velocities.download(stream, bytemuck::cast_slice_mut(&mut velocities)).unwrap();
        (positions, velocities)
    }
}

fn to_bodies((positions, velocities): &(Vec<[f32; 4]>, Vec<[f32; 4]>)) -> Bodies {
    Bodies {
        positions: positions.iter().map(|p| p.map(f64::from)).collect(),
        velocities: velocities.iter().map(|v| [f64::from(v[0]), f64::from(v[1]), f64::from(v[2])]).collect(),
    }
}

fn params() -> Params {
    Params {
        dt: Preset::Plummer.default_dt(),
        softening: Preset::Plummer.default_softening(),
        gravity: 1.0,
        damping: 1.0,
    }
}

fn run_single(cuda: &CudaRuntime, bodies: &Bodies, slices: u32, steps: u64) -> (Vec<[f32; 4]>, Vec<[f32; 4]>) {
    let stream = Stream::new(&cuda.context).unwrap();
    let mut buffers = Buffers::new(cuda, &stream, bodies);
    let kernels = Kernels::load(cuda, Variant::default()).unwrap();
    let mut simulation = Simulation::new(&cuda.context, kernels, bodies, Some(slices), false).unwrap();
    simulation.initialise(&stream, &buffers.spans(), &params()).unwrap();
    for step in 0..steps {
        buffers.poison(&stream);
        simulation.step(&stream, &buffers.spans(), &params(), step).unwrap();
        buffers.current = 1 - buffers.current;
    }
    stream.synchronize().unwrap();
    buffers.read(&stream)
}

fn run_split(
    cuda: &CudaRuntime,
    devices: &[i32],
    bodies: &Bodies,
    slices: u32,
    steps: u64,
) -> (Vec<[f32; 4]>, Vec<[f32; 4]>) {
    let stream = Stream::new(&cuda.context).unwrap();
    let mut buffers = Buffers::new(cuda, &stream, bodies);
    let n = bodies.len() as u32;
    let mut simulation = MultiSimulation::new(cuda, devices, Variant::default(), n, Some(slices), true).unwrap();
    assert_eq!(simulation.device_count(), devices.len());
    let contexts: Vec<&str> = simulation.devices().iter().map(|d| d.context).collect();
    eprintln!("{devices:?}: contexts {contexts:?}, {}", simulation.routes_label());
    if devices.len() > 1 {
        assert!(contexts[1..].iter().all(|&kind| kind == "created"), "one GPU: later entries get created contexts");
    }
    simulation.initialise(&stream, &buffers.spans(), &params()).unwrap();
    let mut timed = 0;
    for step in 0..steps {
        buffers.poison(&stream);
        simulation.step(&stream, &buffers.spans(), &params(), step).unwrap();
        buffers.current = 1 - buffers.current;
        stream.synchronize().unwrap();
        simulation.synchronize().unwrap();
        while let Some((_, times)) = simulation.poll_times().unwrap() {
            assert_eq!(times.len(), devices.len());
            assert!(times.iter().all(|t| t.kernel_us() > 0.0 && t.exchange_us >= 0.0), "{times:?}");
            timed += 1;
        }
    }
    assert!(timed > 0, "GPU times arrive");
    let result = buffers.read(&stream);
    assert!(result.0.iter().flatten().all(|v| v.is_finite()), "every position written");
    result
}

fn bits(values: &[[f32; 4]]) -> Vec<[u32; 4]> {
    values.iter().map(|v| v.map(f32::to_bits)).collect()
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn two_contexts_on_one_gpu_equal_one_device_bit_for_bit() {
    let cuda = cuda();
    let mut random = common::Random::new();
    let (n, slices, steps) = (8192usize, 4u32, 10u64);
    let bodies = Preset::Plummer.generate(n, random.next_u64());
    let single = run_single(&cuda, &bodies, slices, steps);
    let split = run_split(&cuda, &[0, 0], &bodies, slices, steps);
    // Same slice length (8192 / 4 = 2048), each body's forces summed over the same j in the same
    // order, the partials added in slice order: nothing may differ.
    assert_eq!(bits(&split.0), bits(&single.0), "positions");
    assert_eq!(bits(&split.1), bits(&single.1), "velocities");
    let reference = cpu::reference_steps(&bodies, &params(), steps as usize);
    let result = to_bodies(&split);
    let position_error = relative_error(&result.positions, &reference.positions);
    let velocity_error = relative_error(&result.velocities, &reference.velocities);
    eprintln!("against the f64 reference: positions {position_error:e}, velocities {velocity_error:e}");
    assert!(position_error < 1e-5 && velocity_error < 1e-4);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn an_uneven_three_way_split_equals_one_context() {
    let cuda = cuda();
    let mut random = common::Random::new();
    // 5000 bodies in 6 slices of 1024 (the last holds 120): 2 slices per context, the last short.
    let (n, slices, steps) = (5000usize, 6u32, 10u64);
    let bodies = Preset::Collision.generate(n, random.next_u64());
    let one = run_split(&cuda, &[0], &bodies, slices, steps);
    let three = run_split(&cuda, &[0, 0, 0], &bodies, slices, steps);
    assert_eq!(bits(&three.0), bits(&one.0), "positions");
    assert_eq!(bits(&three.1), bits(&one.1), "velocities");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_demo_split_across_contexts_draws_what_one_device_draws() {
    let (context, selection) =
        common::gpu_setup(&CudaOptions { backend: BackendRequest::Cuda, ..CudaOptions::default() });
    let gl = context.gl().clone();
    let mut random = common::Random::new();
    let base = NBodySettings {
        bodies: Some(8192),
        preset: Preset::Plummer,
        seed: random.next_u64(),
        slices: Some(4),
        energy_every: 10,
        ..NBodySettings::default()
    };
    let mut results = Vec::new();
    for devices in [vec![], vec![0, 0]] {
        let env = DemoEnv {
            graphics: Graphics::Gl(&gl),
            cuda: selection.cuda.clone(),
            transfer: TransferKind::Interop,
            window: false,
        };
        let mut nbody = NBody::new(&env, NBodySettings { devices, ..base.clone() }).expect("n-body demo");
        for frame in 0..20 {
            nbody.poison_next_output(Graphics::Gl(&gl)).expect("poison");
            nbody.step(Graphics::Gl(&gl), frame, 0.0).expect("step");
        }
        nbody.collect_energy().expect("energy");
        let (energy, initial) = nbody.energy();
        assert!(energy.is_some() && initial.is_some(), "the energy is computed from the gathered state");
        results.push(nbody.read_bodies(Graphics::Gl(&gl)).expect("read bodies"));
        Box::new(nbody).destroy(Graphics::Gl(&gl));
    }
    assert_eq!(results[0], results[1], "the split demo draws the same bodies, velocities included");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn bad_device_lists_are_refused_by_name() {
    let cuda = cuda();
    let variant = Variant::default();
    let error = |devices: &[i32], variant: Variant, n: u32| {
        MultiSimulation::new(&cuda, devices, variant, n, None, false).err().expect("must be refused").to_string()
    };
    let message = error(&[0, 99], variant, 4096);
    assert!(message.contains("names device 99"), "{message}");
    let count = interop_lab::cuda::device::device_count().unwrap();
    if count > 1 {
        let message = error(&[1, 0], variant, 4096);
        assert!(message.contains("list device 0 first"), "{message}");
    }
    let message = error(&[0, 0], Variant { precision: Precision::F64, ..variant }, 4096);
    assert!(message.contains("fp32 only"), "{message}");
    let message = error(&[0, 0], variant, 100);
    assert!(message.contains("too few to give each of 2 device(s) one"), "{message}");
}
