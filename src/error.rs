//! The crate's one error type. Each variant says what went wrong *and* what the user can do.

use std::path::PathBuf;

use cudarc::driver::sys;

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, phrased for the person running the app.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `libcuda.so.1` could not be loaded.
    #[error("the NVIDIA driver library (libcuda.so.1) was not found: install the NVIDIA driver to use CUDA")]
    NoCudaDriver,

    /// `libnvrtc` could not be loaded.
    #[error(
        "NVRTC (libnvrtc.so.13 or libnvrtc.so.12) was not found, so no kernel can be compiled: install the CUDA \
         toolkit, or `pip install nvidia-cuda-nvrtc==13.0.88` and add its nvidia/cu13/lib folder to LD_LIBRARY_PATH"
    )]
    NoNvrtc,

    /// A CUDA driver call returned an error.
    #[error("{call} failed: {name} ({description}){hint}", hint = hint_suffix(hint))]
    Cuda {
        /// The driver entry point, e.g. `cuGraphicsGLRegisterBuffer`.
        call: &'static str,
        /// The numeric `CUresult`.
        code: u32,
        /// `cuGetErrorName`.
        name: String,
        /// `cuGetErrorString`.
        description: String,
        /// What the user can do about it, when we know.
        hint: Option<&'static str>,
    },

    /// An NVRTC call (not the compilation itself) failed.
    #[error("{call} failed: {message}")]
    Nvrtc {
        /// The NVRTC entry point.
        call: &'static str,
        /// `nvrtcGetErrorString`.
        message: String,
    },

    /// NVRTC rejected a kernel source; `log` is NVRTC's own message with file:line.
    #[error("compiling {file} failed (NVRTC {nvrtc_version}, {arch}):\n{log}")]
    Compile {
        /// Kernel file name, or the path it was read from.
        file: String,
        /// Target architecture, e.g. `sm_90`.
        arch: String,
        /// NVRTC's version, `major.minor`.
        nvrtc_version: String,
        /// NVRTC's program log.
        log: String,
    },

    /// A launch configuration the device or kernel can't run.
    #[error("invalid launch configuration: {0}")]
    Launch(#[from] LaunchError),

    /// A kernel's module does not contain the function we asked for.
    #[error("kernel `{function}` was not found in {file}: check its name and that it is declared extern \"C\"")]
    MissingKernel {
        /// Kernel file.
        file: String,
        /// Function name.
        function: String,
    },

    /// A Vulkan call returned an error.
    #[error("{call} failed: {result}{hint}", hint = hint_suffix(hint))]
    Vulkan {
        /// The entry point, e.g. `vkAllocateMemory`.
        call: &'static str,
        /// The `VkResult`, e.g. `ERROR_OUT_OF_DEVICE_MEMORY`.
        result: String,
        /// What the user can do about it, when we know.
        hint: Option<&'static str>,
    },

    /// GL context or surface creation failed.
    #[error("OpenGL context: {0}")]
    GlContext(String),

    /// A GL call, shader compile or framebuffer check failed.
    #[error("OpenGL: {0}")]
    Gl(String),

    /// A window could not be opened.
    #[error("cannot open a window: {0}")]
    Window(String),

    /// The display server went away while the window was open: what was and was not written.
    #[error("{0}")]
    DisplayLost(String),

    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },

    /// An image could not be decoded or encoded.
    #[error("{path}: {message}")]
    Image {
        /// The file.
        path: PathBuf,
        /// What the image codec said.
        message: String,
    },

    /// A user-supplied value is out of range or malformed.
    #[error("{0}")]
    InvalidInput(String),

    /// The requested combination of backend and transfer path can't run here.
    #[error("{0}")]
    Unavailable(String),

    /// A simulation's state stopped being usable (a value became NaN or infinite, or a step's
    /// work hit a bound); what it says names which. The demo goes back to its last good state.
    #[error("{0}")]
    Diverged(String),
}

fn hint_suffix(hint: &Option<&'static str>) -> String {
    hint.map(|h| format!(": {h}")).unwrap_or_default()
}

impl Error {
    /// Whether this is a kernel fault that leaves the CUDA context unusable (see
    /// [`context_lost`]): the caller must recreate its CUDA state.
    pub fn is_context_lost(&self) -> bool {
        matches!(self, Self::Cuda { code, .. } if context_lost(*code))
    }

    /// An I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }
}

/// Whether `CUresult` `code` is one of the "sticky" errors after which the context can no longer be
/// used: every later call in it returns the same error, so the context must be destroyed and made
/// again. These are the faults of a running kernel (bad address, trap, assert, watchdog timeout).
pub fn context_lost(code: u32) -> bool {
    use sys::CUresult as E;
    [
        E::CUDA_ERROR_ILLEGAL_ADDRESS,
        E::CUDA_ERROR_LAUNCH_TIMEOUT,
        E::CUDA_ERROR_ASSERT,
        E::CUDA_ERROR_HARDWARE_STACK_ERROR,
        E::CUDA_ERROR_ILLEGAL_INSTRUCTION,
        E::CUDA_ERROR_MISALIGNED_ADDRESS,
        E::CUDA_ERROR_INVALID_ADDRESS_SPACE,
        E::CUDA_ERROR_INVALID_PC,
        E::CUDA_ERROR_LAUNCH_FAILED,
    ]
    .iter()
    .any(|lost| *lost as u32 == code)
}

/// Why a launch configuration can't run, with the limit it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// A zero in grid or block.
    #[error("grid {grid:?} × block {block:?} has a zero extent in {axis}: every extent must be at least 1")]
    ZeroExtent {
        /// The axis.
        axis: char,
        /// The grid asked for.
        grid: [u32; 3],
        /// The block asked for.
        block: [u32; 3],
    },
    /// Block larger than the device allows along one axis.
    #[error("block {axis} = {value} exceeds the device's maximum block {axis} of {limit} (CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_{axis_upper})", axis_upper = axis.to_ascii_uppercase())]
    BlockExtent {
        /// The axis.
        axis: char,
        /// Requested extent.
        value: u32,
        /// Device limit.
        limit: u32,
    },
    /// Grid larger than the device allows along one axis.
    #[error("grid {axis} = {value} exceeds the device's maximum grid {axis} of {limit} (CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_{axis_upper})", axis_upper = axis.to_ascii_uppercase())]
    GridExtent {
        /// The axis.
        axis: char,
        /// Requested extent.
        value: u32,
        /// Device limit.
        limit: u32,
    },
    /// More threads per block than the device allows.
    #[error(
        "a block of {threads} threads exceeds the device's limit of {limit} threads per block (CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)"
    )]
    DeviceThreads {
        /// Requested threads.
        threads: u64,
        /// Device limit.
        limit: u32,
    },
    /// More threads per block than this kernel's register use allows.
    #[error(
        "a block of {threads} threads exceeds this kernel's limit of {limit} threads per block: it uses {registers} registers per thread (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)"
    )]
    KernelThreads {
        /// Requested threads.
        threads: u64,
        /// Kernel limit.
        limit: i32,
        /// Registers per thread.
        registers: i32,
    },
    /// More dynamic shared memory than a block can have.
    #[error(
        "{requested} bytes of dynamic shared memory exceed the {limit} bytes a block of this kernel can have (opt-in maximum CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN minus {static_bytes} bytes of static shared memory)"
    )]
    SharedMemory {
        /// Requested bytes.
        requested: u32,
        /// Limit for this kernel.
        limit: u32,
        /// The kernel's static shared memory.
        static_bytes: i32,
    },
}
