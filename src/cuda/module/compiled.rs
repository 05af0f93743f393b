//! What a compile produces — the module image and where it came from — whether NVRTC made it
//! now or the cache kept it.

use std::time::Duration;

/// What NVRTC produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ImageKind {
    /// Machine code for one real architecture (`sm_XX`): loads without JIT.
    Cubin,
    /// PTX for a virtual architecture (`compute_XX`): the driver JIT-compiles it at load.
    Ptx,
}

/// A compiled kernel module, ready for [`Module::load`](super::Module::load).
#[derive(Debug, Clone)]
pub struct CompiledModule {
    /// Where the source came from: a path on disk or "embedded".
    pub origin: String,
    /// CUBIN or PTX bytes (PTX NUL-terminated).
    pub image: Vec<u8>,
    /// Which of the two `image` is.
    pub kind: ImageKind,
    /// Target, e.g. `sm_90` or `compute_90`.
    pub target: String,
    /// True when the image came from the on-disk cache.
    pub from_cache: bool,
    /// Time spent in NVRTC (zero when cached).
    pub compile_time: Duration,
    /// NVRTC's log (warnings), possibly empty.
    pub log: String,
}
