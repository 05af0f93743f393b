//! The compiler: picks the target NVRTC can build for this device, and serves a module from the
//! on-disk cache before it asks NVRTC for one.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::background::PendingCompile;
use super::cache::{cache_key, from_cache, read_cached, write_atomically};
use super::compiled::{CompiledModule, ImageKind};
use super::nvrtc::{compile_with_nvrtc, supported_archs};
use crate::cuda::driver::nvrtc_version;
use crate::error::{Error, Result};
use crate::sources::SourceFile;

/// Compiles kernel files for one device architecture with NVRTC, loaded at run time
/// (`nvrtcCompileProgram`: a CUBIN for the device's `sm_XY` where NVRTC knows it, else PTX that the
/// driver compiles at load), with a cache of the results on disk.
#[derive(Debug, Clone)]
pub struct Compiler {
    arch: (i32, i32),
    nvrtc_version: (i32, i32),
    kernels_dir: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
}

impl Compiler {
    /// A compiler for compute capability `arch`. Sources are read from `kernels_dir` when a file
    /// of that name exists there, else the embedded copy is used. `cache_dir: None` disables the cache.
    pub fn new(arch: (i32, i32), kernels_dir: Option<PathBuf>, cache_dir: Option<PathBuf>) -> Result<Self> {
        Ok(Self { arch, nvrtc_version: nvrtc_version()?, kernels_dir, cache_dir })
    }

    /// NVRTC's version.
    pub fn nvrtc_version(&self) -> (i32, i32) {
        self.nvrtc_version
    }

    /// The folder compiled modules are cached in, if any.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    /// The folder kernel sources are read from before falling back to the embedded copies.
    pub fn kernels_dir(&self) -> Option<&Path> {
        self.kernels_dir.as_deref()
    }

    /// Compiles `file` with extra NVRTC `options` (e.g. `-DBLOCK_SIZE=256`), or takes it from the cache.
    pub fn compile(&self, file: &SourceFile, options: &[String]) -> Result<CompiledModule> {
        let (source, origin) = file.read(self.kernels_dir.as_deref())?;
        self.compile_source(file.name, &source, &origin, options)
    }

    /// The module `file` with `options` compiles to, when it is in the on-disk cache (no NVRTC).
    pub fn cached(&self, file: &SourceFile, options: &[String]) -> Result<Option<CompiledModule>> {
        let (source, origin) = file.read(self.kernels_dir.as_deref())?;
        let (target, kind, cache_path) = self.cache_entry(file.name, &source, options)?;
        Ok(read_cached(cache_path.as_deref()).map(|image| from_cache(&origin, image, kind, target)))
    }

    /// [`Self::compile`] on a thread of its own: NVRTC needs no CUDA context, so a window keeps
    /// drawing while a kernel compiles. The result lands in the cache as usual.
    pub fn compile_in_background(&self, file: &SourceFile, options: &[String]) -> PendingCompile {
        let (compiler, source, options) = (self.clone(), *file, options.to_vec());
        PendingCompile::spawn(file.name, move || compiler.compile(&source, &options))
    }

    /// Target, image kind and cache path of `name` with `source` and `options`.
    fn cache_entry(
        &self,
        name: &str,
        source: &str,
        options: &[String],
    ) -> Result<(String, ImageKind, Option<PathBuf>)> {
        let target = self.target()?;
        let key = cache_key(&[
            &format!("{}.{}", self.nvrtc_version.0, self.nvrtc_version.1),
            &target,
            &options.join("\u{1}"),
            name,
            source,
        ]);
        let kind = if target.starts_with("sm_") { ImageKind::Cubin } else { ImageKind::Ptx };
        let cache_path = self.cache_dir.as_ref().map(|dir| {
            let stem = name.trim_end_matches(".cu");
            dir.join(format!("{stem}-{target}-{key:016x}.{}", if kind == ImageKind::Cubin { "cubin" } else { "ptx" }))
        });
        Ok((target, kind, cache_path))
    }

    /// As [`Self::compile`], for a source text already in hand.
    pub fn compile_source(&self, name: &str, source: &str, origin: &str, options: &[String]) -> Result<CompiledModule> {
        let (target, kind, cache_path) = self.cache_entry(name, source, options)?;
        if let Some(image) = read_cached(cache_path.as_deref()) {
            return Ok(from_cache(origin, image, kind, target));
        }
        let started = Instant::now();
        let (image, log) = compile_with_nvrtc(name, source, &target, options, self.nvrtc_version)?;
        log::info!("NVRTC compiled {name} {} for {target} in {} ms", options.join(" "), started.elapsed().as_millis());
        let compiled = CompiledModule {
            origin: origin.to_owned(),
            image,
            kind,
            target,
            from_cache: false,
            compile_time: started.elapsed(),
            log,
        };
        if let Some(path) = cache_path {
            // A cache that can't be written only costs a recompile next time: warn, don't fail.
            if let Err(error) = write_atomically(&path, &compiled.image) {
                log::warn!("kernel cache not written ({}): {error}", path.display());
            }
        }
        Ok(compiled)
    }

    /// `sm_XY` when NVRTC knows the device's architecture, else PTX for the newest architecture
    /// NVRTC supports that is not newer than the device (the driver JIT-compiles it forward).
    fn target(&self) -> Result<String> {
        let wanted = self.arch.0 * 10 + self.arch.1;
        let supported = supported_archs()?;
        if supported.contains(&wanted) {
            return Ok(format!("sm_{wanted}"));
        }
        supported.iter().copied().filter(|&arch| arch <= wanted).max().map(|arch| format!("compute_{arch}")).ok_or_else(
            || {
                Error::Unavailable(format!(
                    "NVRTC {}.{} cannot compile for compute capability {}.{} (it supports {supported:?}): \
                     install an NVRTC that supports this GPU",
                    self.nvrtc_version.0, self.nvrtc_version.1, self.arch.0, self.arch.1
                ))
            },
        )
    }
}
