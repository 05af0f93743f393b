//! Frame recording (`--record DIR`, or the panel's record button): every frame's pixels go to a
//! queue that encoder threads drain into a numbered PNG sequence, so the frame loop only pays
//! for the read-back. If the encoders fall behind, frames are dropped and counted rather than
//! stalling the window; the report says how many, and gives the ffmpeg line that makes a video.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::output::{self, OutputKind};

/// Frames waiting for an encoder before new ones are dropped (a few hundred MiB at 1280×800).
const QUEUE_FRAMES: usize = 48;

type Frame = (u64, [u32; 2], Vec<u8>);

/// A recording in progress.
pub struct FrameRecorder {
    dir: PathBuf,
    sender: Option<SyncSender<Frame>>,
    workers: Vec<JoinHandle<()>>,
    queued: u64,
    dropped: u64,
    failure: Arc<Mutex<Option<String>>>,
}

/// What a recording wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordReport {
    /// The folder.
    pub dir: PathBuf,
    /// Frames written.
    pub frames: u64,
    /// Frames dropped because the encoders were behind.
    pub dropped: u64,
}

impl RecordReport {
    /// What was recorded, where, what was dropped, and the ffmpeg command for a video at `fps`.
    pub fn summary(&self, fps: u32) -> String {
        let dropped = if self.dropped > 0 {
            format!(" ({} dropped: the encoders fell behind)", self.dropped)
        } else {
            String::new()
        };
        format!(
            "recorded {} frames into {}{dropped}; a video of them:\n  {}",
            self.frames,
            self.dir.display(),
            self.ffmpeg_line(fps)
        )
    }

    /// The ffmpeg command that turns the sequence into a video at `fps`.
    pub fn ffmpeg_line(&self, fps: u32) -> String {
        format!(
            "ffmpeg -framerate {fps} -i {}/frame-%06d.png -c:v libx264 -pix_fmt yuv420p -crf 18 {}.mp4",
            self.dir.display(),
            self.dir.display()
        )
    }
}

impl FrameRecorder {
    /// Starts recording into `dir` (made if missing; must be writable); `asked_by` names what
    /// asked for it in messages (`--record`, the panel's record button).
    pub fn start(dir: &Path, asked_by: &str) -> Result<Self> {
        output::check(dir, OutputKind::Folder, asked_by)?;
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(1, 8);
        let (sender, receiver) = sync_channel::<Frame>(QUEUE_FRAMES);
        let receiver = Arc::new(Mutex::new(receiver));
        let failure = Arc::new(Mutex::new(None));
        let mut workers = Vec::with_capacity(threads);
        for index in 0..threads {
            let (receiver, failure, dir) = (Arc::clone(&receiver), Arc::clone(&failure), dir.to_owned());
            let worker = std::thread::Builder::new()
                .name(format!("record {index}"))
                .spawn(move || encode_frames(&receiver, &dir, &failure))
                .map_err(|e| Error::Unavailable(format!("no thread to encode recorded frames: {e}")))?;
            workers.push(worker);
        }
        Ok(Self { dir: dir.to_owned(), sender: Some(sender), workers, queued: 0, dropped: 0, failure })
    }

    /// Hands one frame (RGBA8, top row first) to the encoders; drops it if they are behind.
    pub fn frame(&mut self, size: [u32; 2], pixels: Vec<u8>) {
        let Some(sender) = &self.sender else { return };
        match sender.try_send((self.queued + 1, size, pixels)) {
            Ok(()) => self.queued += 1,
            Err(TrySendError::Full(_)) => self.dropped += 1,
            Err(TrySendError::Disconnected(_)) => self.dropped += 1,
        }
    }

    /// The folder recorded into.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Frames handed over and dropped so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.queued, self.dropped)
    }

    /// Waits for every queued frame to be written.
    pub fn finish(mut self) -> Result<RecordReport> {
        self.sender = None; // the encoders end when the queue is empty
        for worker in self.workers.drain(..) {
            if worker.join().is_err() {
                return Err(Error::Unavailable("a frame encoder stopped unexpectedly".to_owned()));
            }
        }
        if let Some(failure) = self.failure.lock().ok().and_then(|mut f| f.take()) {
            return Err(Error::Unavailable(format!("recording into {}: {failure}", self.dir.display())));
        }
        Ok(RecordReport { dir: self.dir.clone(), frames: self.queued, dropped: self.dropped })
    }
}

fn encode_frames(receiver: &Mutex<Receiver<Frame>>, dir: &Path, failure: &Mutex<Option<String>>) {
    loop {
        let next = match receiver.lock() {
            Ok(receiver) => receiver.recv(),
            Err(_) => return,
        };
        let Ok((number, size, pixels)) = next else { return };
        let path = dir.join(format!("frame-{number:06}.png"));
        if let Err(error) = write_fast_png(&path, size, &pixels)
            && let Ok(mut failure) = failure.lock()
        {
            failure.get_or_insert_with(|| error.to_string());
        }
    }
}

/// PNG with fast compression: recording must keep up with the frame rate.
fn write_fast_png(path: &Path, size: [u32; 2], pixels: &[u8]) -> Result<()> {
    use image::ImageEncoder;
    use image::codecs::png::{CompressionType, FilterType, PngEncoder};
    let mut bytes = Vec::with_capacity(pixels.len() / 2);
    PngEncoder::new_with_quality(&mut bytes, CompressionType::Fast, FilterType::Sub)
        .write_image(pixels, size[0], size[1], image::ExtendedColorType::Rgba8)
        .map_err(|e| Error::Image { path: path.to_owned(), message: e.to_string() })?;
    output::write(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_frames_are_numbered_pngs_and_the_report_counts_them() {
        let dir = std::env::temp_dir().join(format!("interop-lab-record-{}", std::process::id()));
        let mut recorder = FrameRecorder::start(&dir, "--record").expect("start");
        for shade in 0..5u8 {
            recorder.frame([8, 4], vec![shade; 8 * 4 * 4]);
        }
        let report = recorder.finish().expect("finish");
        assert_eq!(report.frames + report.dropped, 5);
        assert_eq!(report.frames, 5, "five small frames never fill the queue");
        for number in 1..=5u32 {
            let frame = image::open(dir.join(format!("frame-{number:06}.png"))).expect("frame").to_rgba8();
            assert_eq!(frame.dimensions(), (8, 4));
        }
        assert!(report.ffmpeg_line(60).contains("frame-%06d.png"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
