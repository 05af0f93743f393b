//! `blur`: Gaussian blur written by CUDA into GL pixel buffers and textures.

use crate::sources::SourceFile;
use crate::source_file;

/// The kernel source.
pub const KERNEL: SourceFile = source_file!("kernels/blur.cu");
