//! Compiles on a thread of their own, so a window keeps drawing while NVRTC works.

use std::time::{Duration, Instant};

use super::compiled::CompiledModule;
use crate::error::{Error, Result};

/// A compile running on a background thread
/// ([`Compiler::compile_in_background`](super::Compiler::compile_in_background)). NVRTC cannot
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
}
