//! Helpers shared by the integration tests.
#![allow(dead_code)]

use interop_lab::gl::context::headless::HeadlessGl;
use interop_lab::runtime::{self, CudaOptions, Selection};

/// The binary cargo built, or `INTEROP_LAB_BIN` (the GPU machine runs a copied binary).
pub fn binary() -> std::process::Command {
    match std::env::var_os("INTEROP_LAB_BIN") {
        Some(path) => std::process::Command::new(path),
        None => std::process::Command::new(env!("CARGO_BIN_EXE_interop-lab")),
    }
}

/// A fresh folder for test `name` of this process.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("interop-lab-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Whether a test that needs `what` may run. When it is missing the test is skipped with a
/// message, unless `require_var` is set (CI sets it after installing `what`): then it fails.
pub fn available(present: bool, what: &str, require_var: &str) -> bool {
    if present {
        return true;
    }
    if std::env::var_os(require_var).is_some() {
        panic!("{what} is required ({require_var} is set) but missing");
    }
    eprintln!("skipped: {what} is not available here (set {require_var}=1 to make this a failure)");
    false
}

/// A headless GL context and the backend selection for it, with CUDA required (GPU tests).
pub fn gpu_setup(options: &CudaOptions) -> (HeadlessGl, Selection) {
    let context = HeadlessGl::new(runtime::preferred_cuda_device(options)).expect("headless GL context");
    let selection = runtime::select(options, context.gl(), &|name| context.proc_address(name));
    assert!(selection.cuda.is_some(), "CUDA must run for this test: {}", selection.reason);
    (context, selection)
}

/// A deterministic generator for test inputs: xorshift64*, seeded from the clock unless
/// `INTEROP_LAB_SEED` is set, and the seed printed so a failure can be replayed.
pub struct Random(u64);

impl Random {
    pub fn new() -> Self {
        let seed = std::env::var("INTEROP_LAB_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
        });
        eprintln!("random seed {seed} (INTEROP_LAB_SEED={seed} replays it)");
        Self(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [low, high).
    pub fn range(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

/// Steps the wave once on the CPU path of `graphics` at a random phase, for each grid size, and
/// checks what the path reads back (GL: its host copy; Vulkan: the memory drawn from) against the
/// f64 reference; the buffers are poisoned with NaN first.
pub fn check_wave_cpu_step(graphics: interop_lab::graphics::Graphics<'_>, sizes: &[(u32, u32)]) {
    check_wave_step(graphics, None, interop_lab::transfer::TransferKind::Cpu, sizes, 1e-6);
}

/// As [`check_wave_cpu_step`], on transfer path `transfer` (CUDA's when `cuda` is given), with
/// ‖out − ref‖/‖ref‖ < `bound`.
pub fn check_wave_step(
    graphics: interop_lab::graphics::Graphics<'_>,
    cuda: Option<std::rc::Rc<interop_lab::runtime::CudaRuntime>>,
    transfer: interop_lab::transfer::TransferKind,
    sizes: &[(u32, u32)],
    bound: f64,
) {
    use interop_lab::demo_kit::{Demo, DemoEnv};
    use interop_lab::demos::wave::cpu::{WaveFrame, reference, relative_error};
    use interop_lab::demos::wave::{Wave, WaveSettings};

    let mut random = Random::new();
    for &(width, height) in sizes {
        let settings = WaveSettings {
            width,
            height,
            frequency: random.range(0.5, 12.0) as f32,
            amplitude: random.range(0.05, 1.0) as f32,
            ..WaveSettings::default()
        };
        let env = DemoEnv { graphics, cuda: cuda.clone(), transfer, window: false };
        let mut wave = Wave::new(&env, settings.clone()).unwrap_or_else(|e| panic!("wave on {transfer}: {e}"));
        assert_eq!(wave.pipeline().kind(), transfer);
        wave.poison_positions(graphics).expect("poison");
        let phase = random.range(0.0, std::f64::consts::TAU);
        wave.set_phase(phase);
        wave.step(graphics, 0, 0.0).expect("step");
        let out = wave.read_positions(graphics).expect("read back");
        let frame = WaveFrame {
            width,
            height,
            phase: phase as f32,
            frequency: settings.frequency,
            amplitude: settings.amplitude,
        };
        assert!(out.iter().flatten().all(|v| v.is_finite()), "{width}x{height}: every vertex written (poison was NaN)");
        let error = relative_error(&out, &reference(&frame));
        eprintln!("{width}x{height} on {transfer}: ‖out − ref‖/‖ref‖ = {error:e}");
        assert!(error < bound, "{width}x{height} on {transfer}: ‖out − ref‖/‖ref‖ = {error:e} (bound {bound:e})");
        Box::new(wave).destroy(graphics);
    }
}

/// A headless run of `frames` frames of `size` on the CPU backend, writing no files.
pub fn cpu_headless_options(
    spec: interop_lab::demo_kit::DemoSpec,
    frames: u32,
    size: [u32; 2],
) -> interop_lab::headless::HeadlessOptions {
    interop_lab::headless::HeadlessOptions {
        renderer: interop_lab::graphics::GraphicsApi::Gl,
        spec,
        frames,
        size,
        dt: 1.0 / 60.0,
        screenshot: None,
        stats: None,
        trace: None,
        panel: false,
        cuda: CudaOptions { backend: interop_lab::runtime::BackendRequest::Cpu, ..CudaOptions::default() },
        shaders_dir: None,
        what_if: Default::default(),
        open_sections: Vec::new(),
        stop: Default::default(),
        record: None,
        path_flags: Vec::new(),
        progress: false,
    }
}

/// CUDA (required) and a Vulkan device that is the CUDA device, with an offscreen target of
/// `size`, and no GL: what the Vulkan path's GPU tests run on.
pub fn vulkan_cuda_setup(
    size: [u32; 2],
) -> (interop_lab::vk::frame::VulkanGraphics, std::rc::Rc<interop_lab::runtime::CudaRuntime>) {
    use interop_lab::vk::device::DeviceChoice;
    let options = CudaOptions { backend: interop_lab::runtime::BackendRequest::Cuda, ..CudaOptions::default() };
    let cuda = runtime::cuda_without_gl(&options).expect("CUDA must run for this test");
    let device = cuda.context.device();
    let choice = DeviceChoice::CudaDevice { uuid: device.uuid.clone(), name: device.name.clone() };
    let vulkan = interop_lab::vk::frame::VulkanGraphics::new(&choice, size).expect("Vulkan on the CUDA device");
    (vulkan, std::rc::Rc::new(cuda))
}

/// A process whose output is read while it runs, so a test can act when it has said something
/// (its first frame, a compile starting) instead of after a guessed delay.
pub struct Watched {
    child: std::process::Child,
    stdout: SharedText,
    stderr: SharedText,
    readers: Vec<std::thread::JoinHandle<()>>,
}

/// What a process printed so far on one stream, filled by a reader thread.
type SharedText = std::sync::Arc<std::sync::Mutex<String>>;

impl Watched {
    /// Starts `command` with its output piped and read line by line.
    pub fn start(mut command: std::process::Command) -> Self {
        use std::io::BufRead;
        use std::process::Stdio;
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start");
        let (stdout, stderr) = (Default::default(), Default::default());
        let mut readers = Vec::new();
        let pipes: [(Box<dyn std::io::Read + Send>, &SharedText); 2] = [
            (Box::new(child.stdout.take().expect("stdout")), &stdout),
            (Box::new(child.stderr.take().expect("stderr")), &stderr),
        ];
        for (pipe, text) in pipes {
            let text = std::sync::Arc::clone(text);
            readers.push(std::thread::spawn(move || {
                for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut text = text.lock().expect("output");
                    text.push_str(&line);
                    text.push('\n');
                }
            }));
        }
        Self { child, stdout, stderr, readers }
    }

    /// Waits until the process has printed `marker` (stdout or stderr); false if it ended or
    /// `timeout` passed first.
    pub fn wait_for(&mut self, marker: &str, timeout: std::time::Duration) -> bool {
        self.wait_for_line(|line| line.contains(marker), timeout)
    }

    /// Waits until the process has printed a line (stdout or stderr) that `wanted` accepts; false
    /// if it ended or `timeout` passed first.
    pub fn wait_for_line(&mut self, wanted: impl Fn(&str) -> bool, timeout: std::time::Duration) -> bool {
        let started = std::time::Instant::now();
        let said = |text: &SharedText| text.lock().expect("output").lines().any(&wanted);
        while started.elapsed() < timeout {
            if said(&self.stdout) || said(&self.stderr) {
                return true;
            }
            if self.child.try_wait().expect("try_wait").is_some() {
                std::thread::sleep(std::time::Duration::from_millis(50)); // the readers catch up
                return said(&self.stdout) || said(&self.stderr);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        false
    }

    /// Sends `signal` (e.g. "INT", "TERM") to the process.
    pub fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([format!("-{signal}"), self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "SIG{signal} sent");
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// What it printed so far on standard error.
    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("output").clone()
    }

    /// Waits for the process to end (at most `timeout`, then kills it and fails).
    pub fn finish(mut self, timeout: std::time::Duration) -> std::process::Output {
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if started.elapsed() > timeout {
                let _ = self.child.kill();
                panic!("the process did not end within {timeout:?}; it said:\n{}", self.stderr());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        for reader in self.readers.drain(..) {
            reader.join().expect("reader");
        }
        let take = |text: &SharedText| text.lock().expect("output").clone().into_bytes();
        std::process::Output { status, stdout: take(&self.stdout), stderr: take(&self.stderr) }
    }
}

/// Starts `command`, waits until it has printed `marker` (at most a minute), sends SIGINT
/// (Ctrl-C), and returns what the process printed once it ended.
pub fn interrupt_after(command: std::process::Command, marker: &str) -> std::process::Output {
    let mut watched = Watched::start(command);
    let said = watched.wait_for(marker, std::time::Duration::from_secs(60));
    assert!(said, "the process never said {marker:?}: {}", watched.stderr());
    watched.signal("INT");
    watched.finish(std::time::Duration::from_secs(120))
}

/// PSNR of RGB over every pixel of two RGBA8 images (alpha ignored), in dB.
pub fn psnr(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let (mut sum, mut count) = (0.0f64, 0usize);
    for (p, q) in a.chunks_exact(4).zip(b.chunks_exact(4)) {
        for channel in 0..3 {
            let d = f64::from(p[channel]) - f64::from(q[channel]);
            sum += d * d;
            count += 1;
        }
    }
    let mse = sum / count.max(1) as f64;
    if mse == 0.0 { f64::INFINITY } else { 10.0 * (255.0f64 * 255.0 / mse).log10() }
}
