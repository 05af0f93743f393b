//! The crate's one error type. Each variant says what went wrong *and* what the user can do.

use std::path::PathBuf;

use crate::cuda::launch::LaunchError;

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, phrased for the person running the app.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `libcuda.so.1` could not be loaded.
    #[error(
        "the NVIDIA driver library (libcuda.so.1) was not found: install the NVIDIA driver to use CUDA; \
         until then the CPU backend runs (--backend cpu)"
    )]
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

    /// GL context or surface creation failed.
    #[error("OpenGL context: {0}")]
    GlContext(String),

    /// A GL call, shader compile or framebuffer check failed.
    #[error("OpenGL: {0}")]
    Gl(String),

    /// A window could not be opened.
    #[error("cannot open a window: {0}")]
    Window(String),

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
}

fn hint_suffix(hint: &Option<&'static str>) -> String {
    hint.map(|h| format!(": {h}")).unwrap_or_default()
}

impl Error {
    /// Whether this is a kernel fault that leaves the CUDA context unusable (see
    /// [`crate::cuda::driver::context_lost`]): the caller must recreate its CUDA state.
    pub fn is_context_lost(&self) -> bool {
        matches!(self, Self::Cuda { code, .. } if crate::cuda::driver::context_lost(*code))
    }

    /// An I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }
}
