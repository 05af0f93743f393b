//! Every kernel file of the project, for the tools that compile them all (`doctor`, the NVRTC
//! tests). The list lives above the demos and the benchmarks that own the files, so the CUDA layer
//! below them never has to know who its users are.

use crate::sources::SourceFile;

/// Every kernel file of the project.
pub const ALL_KERNELS: &[SourceFile] = &[
    crate::bench::fill::KERNEL,
    crate::demos::blur::KERNEL,
    crate::demos::nbody::KERNEL,
    crate::demos::nbody::tree::gpu::KERNEL,
    crate::demos::wave::KERNEL,
];
