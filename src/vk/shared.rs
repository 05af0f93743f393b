//! Vulkan's half of sharing memory with CUDA: two timeline semaphores Vulkan makes and CUDA
//! imports, one per direction, so each has one producer and its values only grow.
//!
//! - `written`: CUDA's stream signals it after a kernel wrote shared memory. Every submission made
//!   through [`SharedTimeline::submit`] waits for the highest value CUDA has been asked to signal,
//!   so no command reads memory a kernel is still writing.
//! - `read`: each such submission signals the next value when its commands are done. A buffer the
//!   submission reads carries a [`ReadMark`] set to that value, and CUDA's stream waits for it
//!   before a kernel writes the buffer again.
//!
//! The host waits for neither. (One semaphore for both directions would not do: nothing orders
//! CUDA's signal after Vulkan's, so its value could be asked to go backwards.)

use std::cell::{Cell, RefCell};
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ash::vk;

use super::commands::{CommandRing, Recorder};
use super::device::VulkanContext;
use super::sync::{Signal, TimelineSemaphore, Wait};
use crate::error::Result;

/// The `read` value of the last submission that read a buffer (0: none has).
#[derive(Clone, Default)]
pub struct ReadMark(Rc<Cell<u64>>);

impl ReadMark {
    /// The value CUDA waits for before writing the buffer.
    pub fn value(&self) -> u64 {
        self.0.get()
    }
}

/// What one submission waited for and signalled, for the driver-call trace.
#[derive(Debug, Clone, Copy)]
pub struct SubmitNote {
    /// The `written` value it waited for (0: none).
    pub waited: u64,
    /// The `read` value it signals.
    pub signals: u64,
    /// Host time of the submission, µs.
    pub host_us: f64,
}

/// Told of each submission.
pub type SubmitObserver = Box<dyn Fn(SubmitNote)>;

/// The semaphore pair and the values promised on each.
pub struct SharedTimeline {
    written: TimelineSemaphore,
    read: TimelineSemaphore,
    /// The highest `written` value CUDA has been asked to signal.
    written_value: Cell<u64>,
    /// The value the last submission signals on `read`.
    read_value: Cell<u64>,
    /// Buffers the submission being recorded reads.
    readers: RefCell<Vec<ReadMark>>,
    /// Told of each submission (the CUDA side puts it in its trace).
    observer: RefCell<Option<SubmitObserver>>,
    /// What if submissions skipped the wait for CUDA: (on, submissions since, of which CUDA had
    /// not yet written what they read when they were made).
    skip_wait: Cell<(bool, u64, u64)>,
}

impl SharedTimeline {
    /// Two exportable timeline semaphores on `context`, both at 0.
    pub fn new(context: &Rc<VulkanContext>) -> Result<Self> {
        Ok(Self {
            written: TimelineSemaphore::new(context, true)?,
            read: TimelineSemaphore::new(context, true)?,
            written_value: Cell::new(0),
            read_value: Cell::new(0),
            readers: RefCell::new(Vec::new()),
            observer: RefCell::new(None),
            skip_wait: Cell::new((false, 0, 0)),
        })
    }

    /// New file descriptors for `written` and `read`, for CUDA to import.
    pub fn export_fds(&self) -> Result<(OwnedFd, OwnedFd)> {
        Ok((self.written.export_fd()?, self.read.export_fd()?))
    }

    /// The highest value CUDA has been asked to signal on `written`.
    pub fn written_value(&self) -> u64 {
        self.written_value.get()
    }

    /// The value CUDA's next signal on `written` is to set.
    pub fn next_written(&self) -> u64 {
        self.written_value.get() + 1
    }

    /// CUDA has enqueued its signal of `value` on `written`: submissions from now on wait for it.
    pub fn written_signalled(&self, value: u64) {
        self.written_value.set(self.written_value.get().max(value));
    }

    /// The value the last submission signals on `read`.
    pub fn read_value(&self) -> u64 {
        self.read_value.get()
    }

    /// Notes that the submission being recorded reads the buffer marked `mark`.
    pub fn read_by_next(&self, mark: &ReadMark) {
        self.readers.borrow_mut().push(mark.clone());
    }

    /// Forgets the readers noted for a recording that was abandoned.
    pub fn abandon(&self) {
        self.readers.borrow_mut().clear();
    }

    /// What if submissions did not wait for CUDA: on, they are made without the wait (and may
    /// read memory a kernel is still writing: torn frames). Switching resets the count.
    pub fn set_skip_wait(&self, on: bool) {
        if self.skip_wait.get().0 != on {
            self.skip_wait.set((on, 0, 0));
        }
    }

    /// While waits are skipped: submissions made, and how many of them were made while CUDA had
    /// not yet signalled what they should have waited for (each may have read a half-written
    /// buffer). `None` when waits are not skipped.
    pub fn skipped_waits(&self) -> Option<(u64, u64)> {
        let (on, made, unfinished) = self.skip_wait.get();
        on.then_some((made, unfinished))
    }

    /// Calls `observer` after each submission.
    pub fn observe(&self, observer: SubmitObserver) {
        *self.observer.borrow_mut() = Some(observer);
    }

    /// Records `record` into the next buffer of `ring` and submits it (see [`Self::submit_recorded`]).
    pub fn submit(
        &self,
        ring: &mut CommandRing,
        stage: vk::PipelineStageFlags,
        record: impl FnOnce(&Recorder<'_>) -> Result<()>,
    ) -> Result<u64> {
        ring.begin()?;
        let recorded = ring.recorder().and_then(|recorder| record(&recorder));
        if let Err(error) = recorded {
            ring.abandon();
            self.abandon();
            return Err(error);
        }
        self.submit_recorded(ring, stage, &[], &[])
    }

    /// Submits the buffer `ring` is recording: from pipeline `stage` on it waits until CUDA has
    /// written everything asked of it so far, and when done it signals the next `read` value,
    /// which becomes the [`ReadMark`] of each buffer noted by [`Self::read_by_next`]. Returns that
    /// value. `waits` and `signals` are added (a swapchain image's).
    pub fn submit_recorded(
        &self,
        ring: &mut CommandRing,
        stage: vk::PipelineStageFlags,
        waits: &[Wait<'_>],
        signals: &[Signal<'_>],
    ) -> Result<u64> {
        let mut ready = self.written_value.get();
        let (skip, made, unfinished) = self.skip_wait.get();
        if skip && ready > 0 {
            let written = self.written.value().unwrap_or(0);
            self.skip_wait.set((true, made + 1, unfinished + u64::from(written < ready)));
            ready = 0; // no wait: the what-if
        }
        let read = self.read_value.get() + 1;
        let mut all_waits = [Wait::timeline(&self.written, ready, stage); 2];
        let mut all_signals = [Signal::timeline(&self.read, read); 2];
        let wait_count = usize::from(ready > 0);
        if waits.len() > 1 || signals.len() > 1 {
            return Err(crate::error::Error::InvalidInput(
                "one extra wait and signal per shared submission".to_owned(),
            ));
        }
        all_waits[wait_count..wait_count + waits.len()].copy_from_slice(waits);
        all_signals[1..1 + signals.len()].copy_from_slice(signals);
        let started = Instant::now();
        let submitted = ring.submit_recorded(&all_waits[..wait_count + waits.len()], &all_signals[..1 + signals.len()]);
        let host_us = started.elapsed().as_secs_f64() * 1e6;
        self.read_value.set(read);
        // The buffers it reads are marked even if the submission failed: `read` is then signalled
        // from the host below, so waiting for it cannot hang. (Drained, not taken: the list keeps
        // its allocation from frame to frame.)
        for mark in self.readers.borrow_mut().drain(..) {
            mark.0.set(read);
        }
        if let Some(observer) = self.observer.borrow().as_ref() {
            observer(SubmitNote { waited: ready, signals: read, host_us });
        }
        if let Err(error) = submitted {
            // Nothing will signal `read` now, and CUDA may be told to wait for it: signal it from
            // the host once the submissions before it are done (values only grow), not hang.
            if self.read.wait(read - 1, Duration::from_secs(10)).unwrap_or(false) {
                let _ = self.read.signal(read);
            }
            return Err(error);
        }
        Ok(read)
    }

    /// CUDA's context is lost (a kernel fault): what it was asked to signal on `written` never
    /// comes, and every submission waiting for it would hold the queue for good. Signals it from
    /// the host instead (values only grow; no Vulkan submission signals `written`), so the queue
    /// drains and the frames after it run. Returns the value signalled, if one was owed.
    pub fn release_cuda_waits(&self) -> Result<Option<u64>> {
        let owed = self.written_value.get();
        if self.written.value()? >= owed {
            return Ok(None);
        }
        self.written.signal(owed)?;
        Ok(Some(owed))
    }

    /// Waits on the host, at most `timeout`, until the submission that signals `value` is done;
    /// `Ok(false)` when the time ran out.
    pub fn wait_read(&self, value: u64, timeout: Duration) -> Result<bool> {
        self.read.wait(value, timeout)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

    use super::*;

    /// The pair without export (software drivers cannot export semaphores); the host plays CUDA.
    fn local_timeline(context: &Rc<VulkanContext>) -> SharedTimeline {
        SharedTimeline {
            written: TimelineSemaphore::new(context, false).unwrap(),
            read: TimelineSemaphore::new(context, false).unwrap(),
            written_value: Cell::new(0),
            read_value: Cell::new(0),
            readers: RefCell::new(Vec::new()),
            observer: RefCell::new(None),
            skip_wait: Cell::new((false, 0, 0)),
        }
    }

    #[test]
    fn a_submission_waits_for_cuda_marks_what_it_reads_and_a_skipped_wait_is_counted() {
        let Some(context) = crate::vk::test_context() else { return };
        let timeline = local_timeline(&context);
        let mut ring = CommandRing::new(&context, 3).unwrap();
        let stage = vk::PipelineStageFlags::ALL_COMMANDS;
        let (first, second) = (ReadMark::default(), ReadMark::default());
        let submissions = Rc::new(Cell::new(0));
        let seen = submissions.clone();
        timeline.observe(Box::new(move |_| seen.set(seen.get() + 1)));

        // CUDA was asked to write (value 1) and has not signalled: the submission waits.
        timeline.written_signalled(1);
        timeline.read_by_next(&first);
        let read = timeline.submit(&mut ring, stage, |_| Ok(())).unwrap();
        assert_eq!((read, first.value(), second.value()), (1, 1, 0), "only the buffer it reads is marked");
        assert!(!timeline.wait_read(1, Duration::from_millis(200)).unwrap(), "it waits for CUDA's signal");
        timeline.written.signal(1).unwrap(); // CUDA's signal
        assert!(timeline.wait_read(1, Duration::from_secs(10)).unwrap(), "and runs once it came");

        // What if the wait is skipped: the submission runs before CUDA's signal, and is counted.
        timeline.set_skip_wait(true);
        timeline.written_signalled(2);
        timeline.read_by_next(&second);
        let read = timeline.submit(&mut ring, stage, |_| Ok(())).unwrap();
        assert_eq!(second.value(), read);
        assert!(timeline.wait_read(read, Duration::from_secs(10)).unwrap(), "no wait: done before CUDA's signal");
        assert_eq!(timeline.skipped_waits(), Some((1, 1)), "one submission, made before CUDA had written");
        timeline.written.signal(2).unwrap();

        // A recording that fails is not submitted and marks nothing.
        timeline.read_by_next(&first);
        let failed = timeline.submit(&mut ring, stage, |_| Err(crate::error::Error::InvalidInput("no".to_owned())));
        assert!(failed.is_err());
        assert_eq!((first.value(), timeline.read_value()), (1, 2));
        timeline.set_skip_wait(false);
        assert_eq!(timeline.skipped_waits(), None);
        assert_eq!(submissions.get(), 2, "the observer heard of each submission");
        assert!(ring.wait_all(Duration::from_secs(10)).unwrap());
    }

    #[test]
    fn after_cuda_is_lost_its_owed_signal_comes_from_the_host_and_the_queue_drains() {
        let Some(context) = crate::vk::test_context() else { return };
        let timeline = local_timeline(&context);
        let mut ring = CommandRing::new(&context, 3).unwrap();
        let stage = vk::PipelineStageFlags::ALL_COMMANDS;
        assert_eq!(timeline.release_cuda_waits().unwrap(), None, "nothing owed yet");
        // CUDA was asked for values 1 and 2 (a kernel fault: neither will come); two submissions wait.
        timeline.written_signalled(1);
        let first = timeline.submit(&mut ring, stage, |_| Ok(())).unwrap();
        timeline.written_signalled(2);
        let second = timeline.submit(&mut ring, stage, |_| Ok(())).unwrap();
        assert!(!timeline.wait_read(first, Duration::from_millis(200)).unwrap(), "the queue waits for CUDA");
        assert_eq!(timeline.release_cuda_waits().unwrap(), Some(2), "the highest value owed is signalled");
        assert!(timeline.wait_read(second, Duration::from_secs(10)).unwrap(), "and both submissions ran");
        assert_eq!(timeline.release_cuda_waits().unwrap(), None, "owed once");
        // Later frames (the CPU path after the recovery) submit and finish as before.
        let third = timeline.submit(&mut ring, stage, |_| Ok(())).unwrap();
        assert!(timeline.wait_read(third, Duration::from_secs(10)).unwrap());
        assert!(ring.wait_all(Duration::from_secs(10)).unwrap());
    }
}
