//! Choosing what runs: CUDA or the CPU, and which transfer path, with the reason for each choice.
//!
//! The fallback chain with OpenGL: GL interop if CUDA works and `cuGLGetDevices` says the GL
//! context runs on a CUDA device; else host copy if CUDA works; else the CPU backend. With Vulkan:
//! the Vulkan device whose UUID is the CUDA device's, CUDA importing its memory; else the CPU
//! backend. The result is a [`Selection`]: the path, why, and every path this renderer offers.

use std::path::PathBuf;
use std::rc::Rc;

use serde::Serialize;

use crate::cuda::Stream;
use crate::cuda::interop::{self, GlEntryPoints};
use crate::cuda::{Compiler, Context, driver, module};
use crate::error::{Error, Result};
use crate::gl::external::{GlMemoryObjects, GlSemaphores, Loader};
use crate::graphics::GraphicsApi;
use crate::transfer::{self, CudaSide, Transfer, TransferKind};

mod vulkan;
pub use self::vulkan::open_vulkan;

/// What the user asked for with `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendRequest {
    /// CUDA when it works, else the CPU.
    #[default]
    Auto,
    /// CUDA (falls back to the CPU with a message if it can't run).
    Cuda,
    /// The CPU, even if CUDA is present.
    Cpu,
}

/// What the user asked for with `--transfer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferRequest {
    /// The API's fastest path that works here (GL interop, Vulkan's imported memory), else a host
    /// copy.
    #[default]
    Auto,
    /// GL interop (map / unmap).
    Interop,
    /// Copy through pinned host memory.
    Copy,
    /// Copy through pageable host memory.
    Pageable,
    /// Memory CUDA exports and GL imports (no map / unmap), ordered by host waits.
    External,
    /// As `external`, ordered on the GPU by semaphores (GL_EXT_semaphore_fd; Vulkan makes them).
    ExternalSemaphores,
}

impl TransferRequest {
    /// This request as a run drawn with `api` takes it. A benchmark that runs both renderers
    /// passes its `--transfer` to OpenGL; the Vulkan renderer has a path of its own and is asked
    /// for its fastest (`auto`).
    pub fn on(self, api: GraphicsApi) -> Self {
        if api == GraphicsApi::Gl { self } else { TransferRequest::Auto }
    }
}

/// Options that decide how CUDA is set up.
#[derive(Debug, Clone, Default)]
pub struct CudaOptions {
    /// `--backend`.
    pub backend: BackendRequest,
    /// `--transfer`.
    pub transfer: TransferRequest,
    /// `--device`: the CUDA device to compute on (default: the GL context's device, else 0).
    pub device: Option<i32>,
    /// The flag that chose `device`, as the user typed it, when it was not `--device` (n-body's
    /// `--devices 0,1` computes on the first it lists): messages name what was typed.
    pub device_flag: Option<String>,
    /// `--kernels`: a folder whose `*.cu` files replace the embedded kernels.
    pub kernels_dir: Option<PathBuf>,
    /// Disable the on-disk kernel cache.
    pub no_cache: bool,
    /// Compile kernels that are not in the cache on a background thread while frames go on
    /// without them (the window, so its first frame comes at once); headless runs wait instead.
    pub background_compiles: bool,
}

impl CudaOptions {
    /// The same options with the CPU backend: no CUDA is set up (after a kernel fault CUDA cannot
    /// run again in the process; a CPU row of a bench).
    pub fn on_cpu(&self) -> Self {
        Self { backend: BackendRequest::Cpu, ..self.clone() }
    }
}

/// CUDA, set up: the context of the device the app computes on, the kernel compiler, and the GL
/// entry points when the GL context runs on that device.
pub struct CudaRuntime {
    /// The primary context.
    pub context: Rc<Context>,
    /// NVRTC with the on-disk cache.
    pub compiler: Compiler,
    /// `cudaGL.h` entry points, present when interop is possible.
    pub interop: Option<GlEntryPoints>,
    /// GL's memory-object entry points, present when GL can import memory CUDA exports.
    pub external: Option<GlMemoryObjects>,
    /// GL's semaphore entry points, present when external memory is and GL imports semaphores.
    pub gl_semaphores: Option<GlSemaphores>,
    /// Demos may compile kernels in the background ([`CudaOptions::background_compiles`]).
    pub background_compiles: bool,
    /// Why GL interop cannot run with this GL context (`None`: it can).
    pub why_no_interop: Option<String>,
}

impl CudaRuntime {
    /// Creates the transfer path of `kind` for a demo computing on `stream`.
    pub fn transfer(&self, kind: TransferKind, stream: &Rc<Stream>) -> Result<Box<dyn Transfer>> {
        let side = CudaSide {
            context: &self.context,
            stream,
            interop: self.interop,
            external: self.external,
            gl_semaphores: self.gl_semaphores,
        };
        transfer::create(kind, Some(side))
    }
}

/// Creates the transfer path of `kind`: through CUDA when it runs (with the demo's `stream`), else
/// only the CPU path can be had.
pub fn create_transfer(
    cuda: Option<&CudaRuntime>,
    stream: Option<&Rc<Stream>>,
    kind: TransferKind,
) -> Result<Box<dyn Transfer>> {
    match cuda.zip(stream) {
        Some((cuda, stream)) => cuda.transfer(kind, stream),
        None => transfer::create(kind, None),
    }
}

/// The outcome of the start-up choice.
pub struct Selection {
    /// CUDA, when it runs.
    pub cuda: Option<Rc<CudaRuntime>>,
    /// The transfer path to start with.
    pub transfer: TransferKind,
    /// Why that path, in a sentence the panel and the log show.
    pub reason: String,
    /// The user asked for something that could not be given (e.g. `--backend cuda` without a
    /// driver): the message says what and why.
    pub unmet_request: Option<String>,
    /// A kernel fault lost the CUDA context: CUDA runs again only in a new process.
    pub cuda_lost: bool,
    /// Why each path this selection cannot run is missing, in a sentence.
    pub unavailable: Vec<(TransferKind, String)>,
    /// The paths that can run with this selection, in the order the panel offers them.
    pub offered: Vec<TransferKind>,
}

impl Selection {
    /// Why path `kind` cannot run with this selection (`None`: it can).
    pub fn why_unavailable(&self, kind: TransferKind) -> Option<&str> {
        self.unavailable.iter().find(|(missing, _)| *missing == kind).map(|(_, why)| why.as_str())
    }

    /// CUDA with GL interop's entry points (`cudaGL.h`), for a program that registers GL buffers
    /// itself; [`Error::Unavailable`] with the selection's reason where there is none (no CUDA, or
    /// a GL context on another device).
    pub fn gl_interop(&self) -> Result<(&CudaRuntime, &GlEntryPoints)> {
        let unavailable = || Error::Unavailable(self.reason.clone());
        let cuda = self.cuda.as_deref().ok_or_else(unavailable)?;
        Ok((cuda, cuda.interop.as_ref().ok_or_else(unavailable)?))
    }

    /// Transfer paths that can run with this selection.
    pub fn available_transfers(&self) -> Vec<TransferKind> {
        self.offered.clone()
    }

    /// After a kernel fault lost the CUDA context: no CUDA, the CPU path only, and why.
    pub fn lose_cuda(&mut self, reason: String) {
        if let Some(lost) = self.cuda.take() {
            for error in lost.context.take_errors() {
                log::debug!("while releasing the lost context: {error}");
            }
        }
        self.transfer = TransferKind::Cpu;
        self.cuda_lost = true;
        self.reason = reason;
        let why = "a kernel fault lost the CUDA context: relaunch the app to use CUDA again";
        self.unavailable =
            self.offered.iter().filter(|&&k| k != TransferKind::Cpu).map(|&k| (k, why.to_owned())).collect();
        self.offered = vec![TransferKind::Cpu];
    }
}

/// What the driver probe found before any GL context exists: which CUDA device the GL context
/// should be created on.
pub fn preferred_cuda_device(options: &CudaOptions) -> Option<i32> {
    if options.backend == BackendRequest::Cpu || !driver::driver_library_present() {
        return None;
    }
    driver::load().ok()?;
    Some(options.device.unwrap_or(0))
}

/// Chooses backend and transfer path. A GL context must be current on this thread: interop is
/// decided by asking the driver which CUDA devices that context runs on.
pub fn select(options: &CudaOptions, gl: &glow::Context, loader: Loader<'_>) -> Selection {
    if options.backend == BackendRequest::Cpu {
        // Said only where asked for (the panel's "Why", doctor): the user typed it, or a benchmark
        // chose it for its CPU rows.
        let reason = "CPU backend requested (--backend cpu)".to_owned();
        log::debug!("{reason}");
        let unavailable = cuda_paths("CUDA is switched off (--backend cpu)");
        return Selection {
            cuda: None,
            transfer: TransferKind::Cpu,
            reason,
            unmet_request: None,
            cuda_lost: false,
            unavailable,
            offered: vec![TransferKind::Cpu],
        };
    }
    match set_up_cuda(options, gl, loader) {
        Ok((cuda, transfer, reason, unmet_request)) => {
            log::info!("transfer path: {}: {reason}", transfer.label());
            if let Some(message) = &unmet_request {
                log::warn!("{message}");
            }
            let unavailable = gl_paths_missing(&cuda);
            let offered = gl_paths_offered(&cuda);
            Selection {
                cuda: Some(Rc::new(cuda)),
                transfer,
                reason,
                unmet_request,
                cuda_lost: false,
                unavailable,
                offered,
            }
        }
        Err(error) => {
            let reason = format!("CPU backend, because CUDA can't run here: {error}");
            log::warn!("{reason}");
            let unmet_request = if matches!(error, Error::InvalidInput(_)) {
                // A flag naming something that does not exist (e.g. --device 9): said as such.
                Some(error.to_string())
            } else if options.backend == BackendRequest::Cuda {
                Some(format!("--backend cuda was asked for, but CUDA can't run here: {error}"))
            } else if let Some(ordinal) = options.device {
                let flag = options.device_flag.clone().unwrap_or_else(|| format!("--device {ordinal}"));
                Some(format!("{flag} was asked for, but CUDA can't run here: {error}"))
            } else {
                // A CUDA transfer path asked for by name can't be given without CUDA either.
                cuda_transfer_flag(options.transfer)
                    .map(|flag| format!("{flag} was asked for, but CUDA can't run here: {error}"))
            };
            let unavailable = cuda_paths(&format!("it needs CUDA, which can't run here: {error}"));
            Selection {
                cuda: None,
                transfer: TransferKind::Cpu,
                reason,
                unmet_request,
                cuda_lost: false,
                unavailable,
                offered: vec![TransferKind::Cpu],
            }
        }
    }
}

/// Every GL path that computes with CUDA, each missing for `why`.
fn cuda_paths(why: &str) -> Vec<(TransferKind, String)> {
    [
        TransferKind::Interop,
        TransferKind::External,
        TransferKind::ExternalSemaphores,
        TransferKind::HostCopy,
        TransferKind::HostCopyPageable,
    ]
    .into_iter()
    .map(|kind| (kind, why.to_owned()))
    .collect()
}

/// The GL paths CUDA runs with this GL context, in the panel's order.
fn gl_paths_offered(cuda: &CudaRuntime) -> Vec<TransferKind> {
    let mut kinds = Vec::new();
    if cuda.interop.is_some() {
        kinds.push(TransferKind::Interop);
    }
    if cuda.external.is_some() {
        kinds.push(TransferKind::External);
    }
    if cuda.gl_semaphores.is_some() {
        kinds.push(TransferKind::ExternalSemaphores);
    }
    kinds.extend([TransferKind::HostCopy, TransferKind::HostCopyPageable, TransferKind::Cpu]);
    kinds
}

/// The GL paths CUDA runs without, and why.
fn gl_paths_missing(cuda: &CudaRuntime) -> Vec<(TransferKind, String)> {
    let mut missing = Vec::new();
    if let Some(why) = &cuda.why_no_interop {
        for kind in [TransferKind::Interop, TransferKind::External, TransferKind::ExternalSemaphores] {
            missing.push((kind, format!("it needs the GL context on the CUDA device, and {why}")));
        }
        return missing;
    }
    if cuda.external.is_none() {
        let why = "GL lacks GL_EXT_memory_object_fd, or the device does not export memory as file descriptors";
        missing.push((TransferKind::External, why.to_owned()));
        missing.push((TransferKind::ExternalSemaphores, why.to_owned()));
    } else if cuda.gl_semaphores.is_none() {
        missing.push((TransferKind::ExternalSemaphores, "this GL context lacks GL_EXT_semaphore_fd".to_owned()));
    }
    missing
}

type CudaSetup = (CudaRuntime, TransferKind, String, Option<String>);

/// The command-line flag of a transfer request that needs CUDA (all but `auto`).
pub(crate) fn cuda_transfer_flag(request: TransferRequest) -> Option<&'static str> {
    match request {
        TransferRequest::Auto => None,
        TransferRequest::Interop => Some("--transfer interop"),
        TransferRequest::Copy => Some("--transfer copy"),
        TransferRequest::Pageable => Some("--transfer pageable"),
        TransferRequest::External => Some("--transfer external"),
        TransferRequest::ExternalSemaphores => Some("--transfer external-semaphores"),
    }
}

/// The CUDA device to run on: `--device` when given (checked against the `device_count` there
/// are), else the first device the GL context runs on, else device 0.
fn chosen_device(asked: Option<i32>, device_count: i32, gl_devices: &[i32]) -> Result<i32> {
    match asked {
        Some(ordinal) if ordinal < 0 || ordinal >= device_count => Err(Error::InvalidInput(format!(
            "--device {ordinal} does not exist: this machine has CUDA devices 0..{}",
            device_count - 1
        ))),
        Some(ordinal) => Ok(ordinal),
        None => Ok(gl_devices.first().copied().unwrap_or(0)),
    }
}

/// Why CUDA device `ordinal` cannot take GL interop with the current GL context: the failure of
/// `cuGLGetDevices` (`gl_note`), or the CUDA devices it says GL runs on (`gl_devices`).
fn why_not_on_gl_device(gl_note: Option<String>, gl_devices: &[i32], ordinal: i32) -> String {
    if let Some(note) = gl_note {
        format!("cuGLGetDevices failed ({note})")
    } else if gl_devices.is_empty() {
        "cuGLGetDevices says the GL context is not on a CUDA device (it runs on another GPU or a software renderer)"
            .to_owned()
    } else {
        format!("the GL context is on CUDA device(s) {gl_devices:?}, not on device {ordinal}")
    }
}

fn set_up_cuda(options: &CudaOptions, gl: &glow::Context, loader: Loader<'_>) -> Result<CudaSetup> {
    let loaded = driver::load()?;
    // NVRTC is checked before any context is made: without it no kernel can run.
    driver::nvrtc_version()?;
    let device_count = crate::cuda::device::device_count()?;
    if device_count == 0 {
        return Err(Error::Unavailable("the driver reports no CUDA device: check `nvidia-smi`".to_owned()));
    }

    // Which CUDA devices does the current GL context run on?
    let (entry_points, gl_devices, gl_note) = match GlEntryPoints::load() {
        Ok(entry_points) => match interop::gl_devices(&entry_points) {
            Ok(devices) => (Some(entry_points), devices, None),
            Err(error) => (Some(entry_points), Vec::new(), Some(error.to_string())),
        },
        Err(error) => (None, Vec::new(), Some(error.to_string())),
    };
    let ordinal = chosen_device(options.device, device_count, &gl_devices)?;
    let context = Context::new(loaded, ordinal)?;
    let on_gl_device = gl_devices.contains(&context.raw_device());
    let cache_dir = if options.no_cache { None } else { module::default_cache_dir() };
    let compiler = Compiler::new(context.device().compute_capability, options.kernels_dir.clone(), cache_dir)?;
    let device_name = context.device().name.clone();

    let why_no_interop = if on_gl_device { None } else { Some(why_not_on_gl_device(gl_note, &gl_devices, ordinal)) };

    let interop = if why_no_interop.is_none() { entry_points } else { None };
    // Importing CUDA's memory into GL needs both on the same GPU, the extensions, and a device
    // that exports file descriptors.
    let external =
        if interop.is_some() && context.device().posix_fd_export { GlMemoryObjects::load(gl, loader) } else { None };
    let gl_semaphores = if external.is_some() { GlSemaphores::load(gl, loader) } else { None };
    let copy = |why: &str| (TransferKind::HostCopy, format!("host copy on {device_name}: {why}"));
    let (transfer, reason, unmet) = match (options.transfer, &why_no_interop) {
        (TransferRequest::Copy, _) => {
            (TransferKind::HostCopy, format!("host copy requested (--transfer copy) on {device_name}"), None)
        }
        (TransferRequest::Pageable, _) => (
            TransferKind::HostCopyPageable,
            format!("pageable host copy requested (--transfer pageable) on {device_name}"),
            None,
        ),
        (TransferRequest::External, None) if external.is_some() => (
            TransferKind::External,
            format!("external memory requested (--transfer external): {device_name} exports, GL imports"),
            None,
        ),
        (TransferRequest::ExternalSemaphores, None) if external.is_some() => {
            match semaphores_unavailable(gl_semaphores.is_some(), &context.device().uuid) {
                None => (
                    TransferKind::ExternalSemaphores,
                    format!(
                        "external memory with semaphores requested (--transfer external-semaphores): {device_name} \
                         exports, GL imports, Vulkan makes the semaphores"
                    ),
                    None,
                ),
                Some(why) => (
                    TransferKind::External,
                    format!("external memory with host waits on {device_name}: {why}"),
                    Some(format!(
                        "--transfer external-semaphores was asked for, but {why}: host waits order it instead"
                    )),
                ),
            }
        }
        (TransferRequest::External | TransferRequest::ExternalSemaphores, why) => {
            let why = why.clone().unwrap_or_else(|| {
                "GL lacks GL_EXT_memory_object_fd or the device does not export file descriptors".to_owned()
            });
            let (kind, reason) = copy(&why);
            let flag = cuda_transfer_flag(options.transfer).unwrap_or("--transfer external");
            (kind, reason, Some(format!("{flag} was asked for, but {why}")))
        }
        (_, None) => (
            TransferKind::Interop,
            format!(
                "the GL context runs on CUDA device {ordinal} ({device_name}), so kernels write GL buffers in place"
            ),
            None,
        ),
        (request, Some(why)) => {
            let (kind, reason) = copy(why);
            (
                kind,
                reason,
                (request == TransferRequest::Interop).then(|| format!("--transfer interop was asked for, but {why}")),
            )
        }
    };
    let background_compiles = options.background_compiles;
    let cuda = CudaRuntime { context, compiler, interop, external, gl_semaphores, background_compiles, why_no_interop };
    Ok((cuda, transfer, reason, unmet))
}

/// Why the GL external path cannot be ordered by semaphores here (`None`: it can): GL must import
/// them, and a Vulkan device on the CUDA device (`uuid`) must make them.
fn semaphores_unavailable(gl_imports: bool, uuid: &str) -> Option<String> {
    if !gl_imports {
        return Some("this GL context lacks GL_EXT_semaphore_fd".to_owned());
    }
    let probe = match crate::vk::probe() {
        Ok(probe) => probe,
        Err(error) => return Some(format!("Vulkan, which makes the semaphores, cannot start ({error})")),
    };
    match probe.devices.iter().find(|d| d.device_uuid == uuid) {
        None => Some(
            "no Vulkan device is this CUDA device (install the NVIDIA driver's Vulkan ICD; `doctor` lists both UUIDs)"
                .to_owned(),
        ),
        Some(device) if !device.external_semaphore_fd => {
            Some(format!("Vulkan device {device} lacks VK_KHR_external_semaphore_fd"))
        }
        Some(_) => None,
    }
}

/// CUDA without any GL context (benchmarks of kernels alone): the context of `--device` (or 0)
/// and the compiler; no interop entry points.
pub fn cuda_without_gl(options: &CudaOptions) -> Result<CudaRuntime> {
    if options.backend == BackendRequest::Cpu {
        return Err(Error::Unavailable("CPU backend requested (--backend cpu)".to_owned()));
    }
    let loaded = driver::load()?;
    driver::nvrtc_version()?;
    let count = crate::cuda::device::device_count()?;
    let ordinal = options.device.unwrap_or(0);
    if ordinal < 0 || ordinal >= count {
        return Err(Error::InvalidInput(format!(
            "--device {ordinal} does not exist: this machine has {count} CUDA device(s)"
        )));
    }
    let context = Context::new(loaded, ordinal)?;
    let cache_dir = if options.no_cache { None } else { module::default_cache_dir() };
    let compiler = Compiler::new(context.device().compute_capability, options.kernels_dir.clone(), cache_dir)?;
    Ok(CudaRuntime {
        context,
        compiler,
        interop: None,
        external: None,
        gl_semaphores: None,
        background_compiles: false,
        why_no_interop: Some("no GL context runs beside CUDA here".to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_is_the_one_asked_for_else_the_gl_contexts_else_the_first() {
        assert_eq!(chosen_device(Some(1), 2, &[0]).unwrap(), 1);
        assert_eq!(chosen_device(None, 2, &[1, 0]).unwrap(), 1);
        assert_eq!(chosen_device(None, 2, &[]).unwrap(), 0);
        for asked in [-1, 2] {
            let error = chosen_device(Some(asked), 2, &[0]).unwrap_err().to_string();
            assert!(error.contains(&format!("--device {asked} does not exist")), "{error}");
            assert!(error.contains("CUDA devices 0..1"), "{error}");
        }
    }

    #[test]
    fn why_there_is_no_interop_names_what_cu_gl_get_devices_said() {
        let failed = why_not_on_gl_device(Some("not supported".to_owned()), &[], 0);
        assert_eq!(failed, "cuGLGetDevices failed (not supported)");
        assert!(why_not_on_gl_device(None, &[], 0).contains("not on a CUDA device"));
        assert_eq!(why_not_on_gl_device(None, &[1], 0), "the GL context is on CUDA device(s) [1], not on device 0");
    }
}
