//! Kernels: NVRTC compiles `kernels/*.cu` at run time for the device's exact architecture, an
//! on-disk cache makes the second start compile nothing, and `cuModuleLoadData` loads the result.
#![allow(unsafe_code)]

use std::ffi::{CString, c_char};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use cudarc::driver::sys;
use cudarc::nvrtc::sys as nvrtc;

use super::context::Context;
use super::driver::{check, nvrtc_check, nvrtc_version};
use crate::sources::SourceFile;
use crate::{Error, Result};

/// What NVRTC produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ImageKind {
    /// Machine code for one real architecture (`sm_XX`): loads without JIT.
    Cubin,
    /// PTX for a virtual architecture (`compute_XX`): the driver JIT-compiles it at load.
    Ptx,
}

/// A compiled kernel module, ready for [`Module::load`].
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

/// Compiles kernel files for one device architecture, with a cache on disk.
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

/// A module read from the cache.
fn from_cache(origin: &str, image: Vec<u8>, kind: ImageKind, target: String) -> CompiledModule {
    CompiledModule {
        origin: origin.to_owned(),
        image,
        kind,
        target,
        from_cache: true,
        compile_time: Duration::ZERO,
        log: String::new(),
    }
}

/// The cached image at `path`, when there is a non-empty one.
fn read_cached(path: Option<&Path>) -> Option<Vec<u8>> {
    path.and_then(|path| std::fs::read(path).ok()).filter(|image| !image.is_empty())
}

/// A compile running on a background thread ([`Compiler::compile_in_background`]). NVRTC cannot
/// be interrupted, and a process that ends while one of its threads is inside NVRTC can crash in
/// the library's teardown: so the compile never outlives this value, whose `Drop` waits for the
/// thread (saying so when it has to wait).
#[derive(Debug)]
pub struct PendingCompile {
    file: String,
    receiver: std::sync::mpsc::Receiver<Result<CompiledModule>>,
    thread: Option<std::thread::JoinHandle<()>>,
    started: Instant,
    /// Why the compile could not start, if it could not.
    early: Option<String>,
}

impl PendingCompile {
    /// Runs `compile` (of kernel file `file`) on a thread of its own.
    pub fn spawn(file: &str, compile: impl FnOnce() -> Result<CompiledModule> + Send + 'static) -> Self {
        let (sender, receiver) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new().name(format!("nvrtc {file}")).spawn(move || {
            let _ = sender.send(compile());
        });
        let (thread, early) = match spawned {
            Ok(thread) => (Some(thread), None),
            Err(error) => (None, Some(format!("no thread for a background compile: {error}"))),
        };
        PendingCompile { file: file.to_owned(), receiver, thread, started: Instant::now(), early }
    }

    /// The result, once the compile has finished (`None` while it runs).
    pub fn poll(&self) -> Option<Result<CompiledModule>> {
        if let Some(error) = &self.early {
            return Some(Err(Error::Unavailable(error.clone())));
        }
        match self.receiver.try_recv() {
            Ok(result) => Some(result),
            Err(std::sync::mpsc::TryRecvError::Empty) => None,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => Some(Err(self.ended_without_result())),
        }
    }

    /// Waits for the result.
    pub fn wait(self) -> Result<CompiledModule> {
        if let Some(error) = &self.early {
            return Err(Error::Unavailable(error.clone()));
        }
        self.receiver.recv().unwrap_or_else(|_| Err(self.ended_without_result()))
    }

    fn ended_without_result(&self) -> Error {
        Error::Unavailable(format!("the background compile of {} ended without a result", self.file))
    }

    /// The kernel file being compiled.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Time since the compile started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl Drop for PendingCompile {
    fn drop(&mut self) {
        let Some(thread) = self.thread.take() else { return };
        if !thread.is_finished() {
            log::info!(
                "waiting for NVRTC to finish compiling {} (started {:.1} s ago): a compile cannot be stopped, and the \
                 process must not end under it",
                self.file,
                self.started.elapsed().as_secs_f64()
            );
        }
        if thread.join().is_err() {
            log::warn!("the background compile of {} panicked", self.file);
        }
    }
}

/// The architectures NVRTC can compile for, as `major * 10 + minor`.
pub fn supported_archs() -> Result<Vec<i32>> {
    let mut count = 0;
    // SAFETY: valid out-pointer; NVRTC presence was checked when the Compiler was made (callers
    // outside a Compiler check `nvrtc_library_present` first).
    nvrtc_check(unsafe { nvrtc::nvrtcGetNumSupportedArchs(&mut count) }, "nvrtcGetNumSupportedArchs")?;
    let mut archs = vec![0; count.max(0) as usize];
    // SAFETY: `archs` has room for `count` ints.
    nvrtc_check(unsafe { nvrtc::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }, "nvrtcGetSupportedArchs")?;
    Ok(archs)
}

/// Compiles one source with NVRTC for `target` (`sm_XY` → CUBIN, `compute_XY` → PTX).
/// Returns the image and NVRTC's log.
pub fn compile_with_nvrtc(
    name: &str,
    source: &str,
    target: &str,
    options: &[String],
    nvrtc_version: (i32, i32),
) -> Result<(Vec<u8>, String)> {
    let source_c = CString::new(source)
        .map_err(|_| Error::InvalidInput(format!("{name} contains a NUL byte and cannot be compiled")))?;
    let name_c =
        CString::new(name).map_err(|_| Error::InvalidInput(format!("kernel name {name:?} contains a NUL byte")))?;
    let mut all_options =
        vec![format!("--gpu-architecture={target}"), "--std=c++17".to_owned(), "-lineinfo".to_owned()];
    all_options.extend(options.iter().cloned());
    let options_c: Vec<CString> = all_options
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|_| Error::InvalidInput("an NVRTC option contains a NUL byte".to_owned()))?;
    let option_ptrs: Vec<*const c_char> = options_c.iter().map(|o| o.as_ptr()).collect();

    let mut program: nvrtc::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: both strings are NUL-terminated and outlive the program (destroyed below).
    nvrtc_check(
        unsafe {
            nvrtc::nvrtcCreateProgram(
                &mut program,
                source_c.as_ptr(),
                name_c.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        },
        "nvrtcCreateProgram",
    )?;
    let program = ProgramGuard(program);
    // SAFETY: the program is live; option pointers stay valid during the call.
    let status = unsafe { nvrtc::nvrtcCompileProgram(program.0, option_ptrs.len() as i32, option_ptrs.as_ptr()) };
    let log = program_log(program.0)?;
    if status == nvrtc::nvrtcResult::NVRTC_ERROR_COMPILATION {
        return Err(Error::Compile {
            file: name.to_owned(),
            arch: target.to_owned(),
            nvrtc_version: format!("{}.{}", nvrtc_version.0, nvrtc_version.1),
            log,
        });
    }
    nvrtc_check(status, "nvrtcCompileProgram")?;
    let image = if target.starts_with("sm_") {
        let mut size = 0usize;
        // SAFETY: program compiled; valid out-pointer.
        nvrtc_check(unsafe { nvrtc::nvrtcGetCUBINSize(program.0, &mut size) }, "nvrtcGetCUBINSize")?;
        let mut image = vec![0u8; size];
        // SAFETY: `image` has `size` bytes.
        nvrtc_check(unsafe { nvrtc::nvrtcGetCUBIN(program.0, image.as_mut_ptr().cast()) }, "nvrtcGetCUBIN")?;
        image
    } else {
        let mut size = 0usize;
        // SAFETY: program compiled; valid out-pointer.
        nvrtc_check(unsafe { nvrtc::nvrtcGetPTXSize(program.0, &mut size) }, "nvrtcGetPTXSize")?;
        let mut image = vec![0u8; size];
        // SAFETY: `image` has `size` bytes; NVRTC writes the PTX with its NUL terminator.
        nvrtc_check(unsafe { nvrtc::nvrtcGetPTX(program.0, image.as_mut_ptr().cast()) }, "nvrtcGetPTX")?;
        image
    };
    Ok((image, log))
}

struct ProgramGuard(nvrtc::nvrtcProgram);

impl Drop for ProgramGuard {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram, destroyed once.
        let status = unsafe { nvrtc::nvrtcDestroyProgram(&mut self.0) };
        if let Err(error) = nvrtc_check(status, "nvrtcDestroyProgram") {
            log::warn!("{error}");
        }
    }
}

fn program_log(program: nvrtc::nvrtcProgram) -> Result<String> {
    let mut size = 0usize;
    // SAFETY: live program; valid out-pointer.
    nvrtc_check(unsafe { nvrtc::nvrtcGetProgramLogSize(program, &mut size) }, "nvrtcGetProgramLogSize")?;
    let mut log = vec![0u8; size.max(1)];
    // SAFETY: `log` has `size` bytes.
    nvrtc_check(unsafe { nvrtc::nvrtcGetProgramLog(program, log.as_mut_ptr().cast()) }, "nvrtcGetProgramLog")?;
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    Ok(String::from_utf8_lossy(&log[..end]).trim_end().to_owned())
}

/// FNV-1a, 64 bit, over each part and its length: stable across Rust releases (unlike `DefaultHasher`).
pub fn cache_key(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for &b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for part in parts {
        feed(&(part.len() as u64).to_le_bytes());
        feed(part.as_bytes());
    }
    hash
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)
}

/// The default cache folder: `$INTEROP_LAB_CACHE`, else `$XDG_CACHE_HOME/interop-lab/kernels`,
/// else `~/.cache/interop-lab/kernels`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("INTEROP_LAB_CACHE") {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("interop-lab").join("kernels"))
}

/// A loaded module (`cuModuleLoadData`), unloaded when the last [`Function`] from it is dropped.
pub struct Module {
    raw: sys::CUmodule,
    context: Rc<Context>,
    origin: String,
}

impl Module {
    /// Loads a compiled image into the current context.
    pub fn load(context: &Rc<Context>, compiled: &CompiledModule) -> Result<Rc<Self>> {
        let mut image = compiled.image.clone();
        if compiled.kind == ImageKind::Ptx && image.last() != Some(&0) {
            image.push(0);
        }
        let trace = context.trace();
        if compiled.from_cache {
            trace.note(
                "kernel cache",
                || format!("{} for {} (no NVRTC needed)", compiled.origin, compiled.target),
                0.0,
            );
        } else {
            let ms = compiled.compile_time.as_secs_f64();
            trace.note("nvrtcCompileProgram", || format!("{} for {}", compiled.origin, compiled.target), ms * 1e6);
        }
        let mut raw = std::ptr::null_mut();
        // SAFETY: `image` is a complete CUBIN or NUL-terminated PTX that outlives the call.
        trace.call(
            "cuModuleLoadData",
            || format!("{} bytes of {:?}", image.len(), compiled.kind),
            || unsafe { sys::cuModuleLoadData(&mut raw, image.as_ptr().cast()) },
        )?;
        Ok(Rc::new(Self { raw, context: context.clone(), origin: compiled.origin.clone() }))
    }

    /// `cuModuleGetFunction` plus the function's attributes.
    pub fn function(self: &Rc<Self>, name: &str) -> Result<Function> {
        let name_c =
            CString::new(name).map_err(|_| Error::InvalidInput(format!("kernel name {name:?} contains a NUL byte")))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: live module; NUL-terminated name; valid out-pointer.
        let found = self.context.trace().call(
            "cuModuleGetFunction",
            || name.to_owned(),
            || unsafe { sys::cuModuleGetFunction(&mut raw, self.raw, name_c.as_ptr()) },
        );
        match found {
            Err(Error::Cuda { code, .. }) if code == sys::CUresult::CUDA_ERROR_NOT_FOUND as u32 => {
                return Err(Error::MissingKernel { file: self.origin.clone(), function: name.to_owned() });
            }
            other => other?,
        }
        let attributes = FunctionAttributes::query(raw)?;
        Ok(Function { raw, name: name.to_owned(), attributes, module: self.clone() })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: loaded in `load`, unloaded once; no Function outlives it (they hold an Rc).
        if let Err(error) =
            self.context.trace().call("cuModuleUnload", String::new, || unsafe { sys::cuModuleUnload(self.raw) })
        {
            self.context.defer_error(error);
        }
    }
}

/// What `cuFuncGetAttribute` says about a kernel as compiled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FunctionAttributes {
    /// Most threads a block of this kernel can have (registers can make it less than the device's).
    pub max_threads_per_block: i32,
    /// Registers per thread.
    pub registers: i32,
    /// Statically declared shared memory, bytes.
    pub static_shared_bytes: i32,
    /// Dynamic shared memory a launch may ask for now, bytes (raise with `cuFuncSetAttribute`).
    pub max_dynamic_shared_bytes: i32,
    /// Local memory per thread (spills, stack arrays), bytes.
    pub local_bytes: i32,
    /// Constant memory, bytes.
    pub const_bytes: i32,
    /// PTX ISA version the kernel was compiled from, e.g. 90 for 9.0.
    pub ptx_version: i32,
    /// Binary (SASS) architecture, e.g. 90.
    pub binary_version: i32,
}

impl FunctionAttributes {
    fn query(function: sys::CUfunction) -> Result<Self> {
        use sys::CUfunction_attribute as F;
        let attribute = |attribute: F| -> Result<i32> {
            let mut value = 0;
            // SAFETY: live function handle; valid out-pointer.
            check(unsafe { sys::cuFuncGetAttribute(&mut value, attribute, function) }, "cuFuncGetAttribute")?;
            Ok(value)
        };
        Ok(Self {
            max_threads_per_block: attribute(F::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            registers: attribute(F::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            static_shared_bytes: attribute(F::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            max_dynamic_shared_bytes: attribute(F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?,
            local_bytes: attribute(F::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            const_bytes: attribute(F::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES)?,
            ptx_version: attribute(F::CU_FUNC_ATTRIBUTE_PTX_VERSION)?,
            binary_version: attribute(F::CU_FUNC_ATTRIBUTE_BINARY_VERSION)?,
        })
    }
}

/// A kernel function in a loaded module.
pub struct Function {
    raw: sys::CUfunction,
    name: String,
    attributes: FunctionAttributes,
    module: Rc<Module>,
}

impl Function {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its attributes as compiled.
    pub fn attributes(&self) -> &FunctionAttributes {
        &self.attributes
    }

    /// The raw handle, for the launch code of this crate.
    pub(crate) fn raw(&self) -> sys::CUfunction {
        self.raw
    }

    /// The context the function's module was loaded into.
    pub fn context(&self) -> &Rc<Context> {
        &self.module.context
    }

    /// Lets launches ask for up to `bytes` of dynamic shared memory (beyond the 48 KiB default).
    pub fn set_max_dynamic_shared_bytes(&mut self, bytes: i32) -> Result<()> {
        // SAFETY: live function handle.
        self.module.context.trace().call(
            "cuFuncSetAttribute",
            || format!("{}: max dynamic shared memory {bytes} B", self.name),
            || unsafe {
                sys::cuFuncSetAttribute(
                    self.raw,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes,
                )
            },
        )?;
        self.attributes.max_dynamic_shared_bytes = bytes;
        Ok(())
    }

    /// `cuOccupancyMaxActiveBlocksPerMultiprocessor`: resident blocks per SM at this block size.
    pub fn max_active_blocks_per_multiprocessor(&self, block_threads: u32, dynamic_shared_bytes: u32) -> Result<i32> {
        let mut blocks = 0;
        // SAFETY: live function; valid out-pointer.
        self.module.context.trace().call("cuOccupancyMaxActiveBlocksPerMultiprocessor", String::new, || unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut blocks,
                self.raw,
                block_threads as i32,
                dynamic_shared_bytes as usize,
            )
        })?;
        Ok(blocks)
    }

    /// `cuOccupancyMaxPotentialBlockSize`: the block size with the highest occupancy for a fixed
    /// amount of dynamic shared memory per block, and the smallest grid that reaches it.
    pub fn suggested_block_size(&self, dynamic_shared_bytes: u32) -> Result<(i32, i32)> {
        let (mut min_grid, mut block) = (0, 0);
        // SAFETY: live function; valid out-pointers; no per-block-size shared memory callback.
        self.module.context.trace().call(
            "cuOccupancyMaxPotentialBlockSize",
            || format!("{} B dynamic shared", dynamic_shared_bytes),
            || unsafe {
                sys::cuOccupancyMaxPotentialBlockSize(
                    &mut min_grid,
                    &mut block,
                    self.raw,
                    None,
                    dynamic_shared_bytes as usize,
                    0,
                )
            },
        )?;
        Ok((block, min_grid))
    }
}

/// Theoretical occupancy of a launch, from the driver's occupancy API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Occupancy {
    /// `cuOccupancyMaxActiveBlocksPerMultiprocessor` at this block size and shared memory.
    pub blocks_per_multiprocessor: i32,
    /// Resident warps per SM that gives.
    pub warps_per_multiprocessor: i32,
    /// The SM's limit.
    pub max_warps_per_multiprocessor: i32,
    /// `cuOccupancyMaxPotentialBlockSize`'s block size.
    pub suggested_block: i32,
    /// ... and the minimum grid that fills the device with it.
    pub suggested_grid: i32,
}

impl Occupancy {
    /// Resident warps over the SM's maximum.
    pub fn fraction(&self) -> f64 {
        f64::from(self.warps_per_multiprocessor) / f64::from(self.max_warps_per_multiprocessor.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_background_compile_is_waited_for_not_left_running() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let finished = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&finished);
        let pending = PendingCompile::spawn("slow.cu", move || {
            std::thread::sleep(Duration::from_millis(300));
            flag.store(true, Ordering::SeqCst);
            Err(Error::Unavailable("a stand-in for NVRTC".to_owned()))
        });
        assert!(pending.poll().is_none(), "still compiling");
        drop(pending);
        assert!(finished.load(Ordering::SeqCst), "dropping waited for the thread to finish");
        let done = PendingCompile::spawn("quick.cu", || Err(Error::Unavailable("quick".to_owned())));
        assert!(done.wait().is_err_and(|e| e.to_string().contains("quick")), "the result arrives through wait");
    }

    #[test]
    fn cache_key_changes_with_every_part() {
        let base = cache_key(&["13.0", "sm_90", "", "wave.cu", "source"]);
        assert_eq!(base, cache_key(&["13.0", "sm_90", "", "wave.cu", "source"]));
        assert_ne!(base, cache_key(&["13.1", "sm_90", "", "wave.cu", "source"]));
        assert_ne!(base, cache_key(&["13.0", "sm_89", "", "wave.cu", "source"]));
        assert_ne!(base, cache_key(&["13.0", "sm_90", "-DX", "wave.cu", "source"]));
        assert_ne!(base, cache_key(&["13.0", "sm_90", "", "wave.cu", "source "]));
        // Lengths are hashed too, so moving a boundary between parts changes the key.
        assert_ne!(cache_key(&["ab", "c"]), cache_key(&["a", "bc"]));
    }
}
