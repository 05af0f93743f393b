//! The host-copy path: the kernel writes ordinary device memory, which is copied to host memory
//! (pinned, or pageable to show what a naive copy costs) and from there into the GL buffer, or
//! into the host-visible Vulkan buffer the draw reads.

use std::rc::Rc;
use std::time::Instant;

use super::memory::{Staging, wait_for_readers};
use super::{Access, BufferMemory, Compute, Link, SharedBuffer, Target, Transfer, TransferKind, WhatIf};
use super::{DeviceSpans, mismatch, poll_stages};
use crate::cuda::timing::EventRing;
use crate::cuda::{Context, DeviceBuffer, PinnedBuffer, Stream};
use crate::error::Result;
use crate::graphics::Graphics;
use crate::stats::{LateGpuTimes, Stage, StageTimes};

/// The host-copy path.
pub struct HostCopy {
    context: Rc<Context>,
    stream: Rc<Stream>,
    events: EventRing,
    pinned: bool,
    skip_sync: bool,
    raced: RaceCount,
}

/// Frames uploaded without waiting for their copy, and how many of those were uploaded while the
/// copy was still running (stale or torn).
#[derive(Debug, Default, Clone, Copy)]
struct RaceCount {
    unsynchronized: u64,
    raced: u64,
}

impl HostCopy {
    /// The path on `stream`, staging through pinned (or else pageable) host memory.
    pub(super) fn new(context: Rc<Context>, stream: Rc<Stream>, events: EventRing, pinned: bool) -> Self {
        Self { context, stream, events, pinned, skip_sync: false, raced: RaceCount::default() }
    }
}

impl Transfer for HostCopy {
    fn kind(&self) -> TransferKind {
        if self.pinned { TransferKind::HostCopy } else { TransferKind::HostCopyPageable }
    }

    fn calibration(&self) -> Option<crate::anatomy::Calibration> {
        super::cuda_calibration(&self.events)
    }

    fn create_buffer(&mut self, graphics: Graphics<'_>, initial: &[u8]) -> Result<SharedBuffer> {
        let mut device = DeviceBuffer::new(&self.context, initial.len())?;
        device.upload(&self.stream, initial)?;
        let staging = if self.pinned {
            Staging::Pinned(PinnedBuffer::new(&self.context, initial.len())?)
        } else {
            Staging::Pageable(vec![0u8; initial.len()])
        };
        let memory = BufferMemory::filled_by_host(graphics, initial)?;
        Ok(SharedBuffer { link: Link::HostCopy { device, staging }, memory })
    }

    fn read_buffer(&mut self, _graphics: Graphics<'_>, buffer: &SharedBuffer) -> Result<Vec<u8>> {
        match &buffer.link {
            Link::HostCopy { device, .. } => {
                let mut data = vec![0u8; device.len()];
                device.download(&self.stream, &mut data)?;
                Ok(data)
            }
            _ => Err(mismatch(self.kind())),
        }
    }

    fn run(
        &mut self,
        graphics: Graphics<'_>,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes> {
        let kind = self.kind();
        let mut times = StageTimes::default();
        let stream = &*self.stream;
        let spans = DeviceSpans::of(buffers, kind, |link| match link {
            Link::HostCopy { device, .. } => Some(device.span()),
            _ => None,
        })?;
        let timing = self.events.begin_calibrated()?;

        let started = Instant::now();
        timing.mark(0, stream)?;
        compute(Target::Device { buffers: spans.as_slice(), stream })?;
        timing.mark(1, stream)?;
        times.set_host_since(Stage::Kernel, started);

        let started = Instant::now();
        for (buffer, access) in buffers.iter_mut() {
            if let (Link::HostCopy { device, staging }, true) = (&mut buffer.link, access.writes()) {
                match staging {
                    Staging::Pinned(pinned) => pinned.download_async(stream, device.span())?,
                    // A pageable destination makes the copy synchronous for the host.
                    Staging::Pageable(bytes) => device.download(stream, bytes)?,
                }
            }
        }
        timing.mark(2, stream)?;
        self.events.commit(frame);
        // The CPU must not read the staging memory before the copies land (unless a learner
        // switched this off to see stale and torn frames).
        let racing = if self.skip_sync {
            self.raced.unsynchronized += 1;
            let racing = !stream.is_idle()?;
            self.raced.raced += u64::from(racing);
            racing
        } else {
            stream.synchronize()?;
            false
        };
        times.set_host_since(Stage::Download, started);

        // Where the API draws from the very memory written next, the frames that read it are
        // waited for (a stage of its own, as on the CPU path).
        let started = Instant::now();
        if wait_for_readers(graphics)? {
            times.set_host_since(Stage::Sync, started);
        }
        let started = Instant::now();
        for (buffer, access) in buffers.iter_mut() {
            if let (Link::HostCopy { staging, .. }, true) = (&buffer.link, access.writes()) {
                let racing_copy;
                let bytes = match staging {
                    Staging::Pinned(pinned) if racing => {
                        racing_copy = pinned.snapshot_racing();
                        &racing_copy[..]
                    }
                    staging => staging.bytes(),
                };
                buffer.memory.upload(graphics, bytes)?;
            }
        }
        times.set_host_since(Stage::Upload, started);
        Ok(times)
    }

    fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>> {
        poll_stages(&mut self.events, &[Stage::Kernel, Stage::Download])
    }

    fn set_what_if(&mut self, what_if: WhatIf) {
        if what_if.skip_copy_sync != self.skip_sync {
            self.raced = RaceCount::default();
        }
        self.skip_sync = what_if.skip_copy_sync;
    }

    fn what_if_report(&self) -> Option<String> {
        let RaceCount { unsynchronized, raced } = self.raced;
        self.skip_sync.then(|| {
            format!(
                "{raced} of {unsynchronized} frames were uploaded while their copy was still running (stale or torn)"
            )
        })
    }

    fn synchronize(&mut self) -> Result<()> {
        self.stream.synchronize()
    }
}
