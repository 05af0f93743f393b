//! Live kernel editing: watches a folder of kernel sources; when a file the running demo uses
//! changes, NVRTC recompiles it on a background thread and the demo swaps the new module in
//! only if that succeeds. A compile error is shown (NVRTC's log, with file:line) and the old
//! kernels keep running.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::cuda::Compiler;
use crate::cuda::module::{CompiledModule, PendingCompile};
use crate::demo_kit::Demo;
use crate::error::{Error, Result};

/// How often the folder is looked at.
const SCAN_INTERVAL: Duration = Duration::from_millis(400);

/// Where a reload stands, for the panel.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchStatus {
    /// Nothing changed yet.
    Watching,
    /// NVRTC is compiling `file` in the background.
    Compiling {
        /// The file.
        file: String,
        /// Since when.
        since: Instant,
    },
    /// The last change of `file` was compiled and swapped in.
    Reloaded {
        /// The file.
        file: String,
        /// NVRTC time, ms.
        compile_ms: f64,
    },
    /// The last change failed; `message` is NVRTC's log or the load error. The old kernels run.
    Failed {
        /// The file.
        file: String,
        /// What went wrong.
        message: String,
    },
}

/// Watches one folder of kernel sources.
pub struct KernelWatcher {
    dir: PathBuf,
    compiler: Compiler,
    seen: HashMap<String, SystemTime>,
    last_scan: Option<Instant>,
    /// The compile running, with the NVRTC options it was started with.
    in_flight: Option<(PendingCompile, Vec<String>)>,
    status: WatchStatus,
}

impl KernelWatcher {
    /// Watches `dir`, compiling with `compiler`. Files as they are now count as seen.
    pub fn new(dir: PathBuf, compiler: Compiler) -> Self {
        let mut watcher = Self {
            seen: HashMap::new(),
            dir,
            compiler,
            last_scan: None,
            in_flight: None,
            status: WatchStatus::Watching,
        };
        watcher.seen = watcher.modification_times();
        watcher
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the last reload stands.
    pub fn status(&self) -> &WatchStatus {
        &self.status
    }

    fn modification_times(&self) -> HashMap<String, SystemTime> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return HashMap::new() };
        entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "cu"))
            .filter_map(|e| Some((e.file_name().to_string_lossy().into_owned(), e.metadata().ok()?.modified().ok()?)))
            .collect()
    }

    /// Call once per frame: finishes a compile that is done (swapping the module into `demo`),
    /// or, every few hundred ms, looks for changed files the demo uses and starts compiling one.
    pub fn poll(&mut self, demo: &mut dyn Demo) {
        if let Some((pending, _)) = &self.in_flight {
            let Some(compiled) = pending.poll() else { return };
            if let Some((pending, options)) = self.in_flight.take() {
                self.swap_in(demo, pending.file().to_owned(), &options, compiled);
            }
        }
        if self.last_scan.is_some_and(|t| t.elapsed() < SCAN_INTERVAL) {
            return;
        }
        self.last_scan = Some(Instant::now());
        let now = self.modification_times();
        let changed: Vec<String> = now
            .iter()
            .filter(|(name, time)| self.seen.get(*name) != Some(*time))
            .map(|(name, _)| name.clone())
            .collect();
        self.seen = now;
        for file in changed {
            let builds = demo.live_kernels().map(|kernels| kernels.kernel_builds()).unwrap_or_default();
            let Some((_, options)) = builds.into_iter().find(|(source, _)| source.name == file) else {
                continue;
            };
            if let Err(error) = self.start(&file, options) {
                self.status = WatchStatus::Failed { file, message: error.to_string() };
            }
            break;
        }
    }

    /// Swaps `compiled` (of `file`, built with `options`) into `demo`, and says how that went.
    fn swap_in(&mut self, demo: &mut dyn Demo, file: String, options: &[String], compiled: Result<CompiledModule>) {
        let name = demo.name();
        let swapped = compiled.and_then(|c| match demo.live_kernels() {
            Some(kernels) => kernels.swap_kernels(&file, options, &c).map(|()| c),
            None => Err(Error::Unavailable(format!("the {name} demo does not reload {file}"))),
        });
        self.status = match swapped {
            Ok(compiled) => {
                log::info!("reloaded {file}");
                WatchStatus::Reloaded { file, compile_ms: compiled.compile_time.as_secs_f64() * 1e3 }
            }
            Err(error) => WatchStatus::Failed { file, message: error.to_string() },
        };
    }

    fn start(&mut self, file: &str, options: Vec<String>) -> Result<()> {
        let path = self.dir.join(file);
        let source = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        log::info!("{file} changed: NVRTC recompiles it in the background");
        let (compiler, name, origin, build_options) =
            (self.compiler.clone(), file.to_owned(), path.display().to_string(), options.clone());
        // The compile is joined when it is dropped: closing the app mid-compile waits for it.
        let pending =
            PendingCompile::spawn(file, move || compiler.compile_source(&name, &source, &origin, &build_options));
        self.in_flight = Some((pending, options));
        self.status = WatchStatus::Compiling { file: file.to_owned(), since: Instant::now() };
        Ok(())
    }

    /// Waits for a compile in flight (tests and headless runs), then applies it like [`Self::poll`].
    pub fn wait(&mut self, demo: &mut dyn Demo) {
        if let Some((pending, options)) = self.in_flight.take() {
            let file = pending.file().to_owned();
            let compiled = pending.wait();
            self.swap_in(demo, file, &options, compiled);
        }
    }
}

/// The kernel folder of the checkout this binary was built from, if it is still there.
pub fn checkout_kernels_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels"));
    dir.is_dir().then_some(dir)
}
