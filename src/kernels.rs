//! Every kernel file of the project, for the tools that compile them all (`doctor`, the NVRTC
//! tests): the demos' (from the registry, `demos::KERNELS`) and the benchmarks' own. The list
//! lives above the demos and the benchmarks that own the files, so the CUDA layer below them never
//! has to know who its users are.

use crate::sources::SourceFile;

/// Every kernel file of the project: the benchmarks' own, then the demos' in menu order.
pub fn all() -> Vec<SourceFile> {
    let tools: &[SourceFile] = &[crate::bench::fill::KERNEL];
    tools.iter().chain(crate::demos::KERNELS.iter().flat_map(|files| files.iter())).copied().collect()
}
