//! The rows where the way back to CUDA is no semaphore but a word of shared memory that the
//! graphics API writes and CUDA's stream polls (`cuStreamWaitValue64`): whether a semaphore wait
//! costs anything beside the context change.

#![allow(unsafe_code)] // GL calls, each with its SAFETY line

use std::time::Instant;

use ash::vk as raw;
use glow::HasContext;

use super::sides::copy_gl_bytes;
use super::{Bench, CudaLegs, Row, TIMEOUT, TINY_BYTES, wait_timeline};
use crate::cuda::Event;
use crate::cuda::external::ExportableMemory;
use crate::cuda::import::{ImportedMemory, ImportedSemaphore};
use crate::cuda::memory::copy_to_device;
use crate::error::{Error, Result};
use crate::gl;
use crate::vk::commands::CommandRing;
use crate::vk::memory::{Buffer, MemoryKind};
use crate::vk::sync::{ExportableBinarySemaphore, Signal, TimelineSemaphore, Wait};

impl Bench {
    /// Waits (at most [`TIMEOUT`]) for the stream to pass `end`, the event after its wait for the
    /// word to reach `last`. Should the word never come, the other stream writes it, so the first
    /// is not left waiting for ever, and the row says what happened.
    fn finish_word_chain(&self, end: &Event, address: u64, last: u64) -> Result<()> {
        let started = Instant::now();
        while !end.is_complete()? {
            if started.elapsed() > TIMEOUT {
                self.streams[1].write_value(address, last)?;
                self.streams[0].synchronize()?;
                return Err(Error::Unavailable(format!(
                    "the word the graphics API writes did not reach CUDA's stream within {} s",
                    TIMEOUT.as_secs()
                )));
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    pub(super) fn cuda_vulkan_word(&mut self) -> Result<Row> {
        let vulkan = self.vulkan()?;
        let there = TimelineSemaphore::new(&vulkan, true)?;
        let context = self.cuda.context.clone();
        let cuda_there = ImportedSemaphore::new_timeline(&context, there.export_fd()?, "there")?;
        let usage = raw::BufferUsageFlags::TRANSFER_DST;
        let word = Buffer::new(&vulkan, TINY_BYTES, usage, MemoryKind::Exportable)?;
        let cuda_word = ImportedMemory::new(&context, word.export_fd()?, word.allocation_size(), TINY_BYTES)?;
        let address = cuda_word.span().ptr;
        let mut ring = CommandRing::new(&vulkan, self.rounds as usize + 1)?;
        // The word starts at 0 (exported memory holds anything at first).
        let done = TimelineSemaphore::new(&vulkan, false)?;
        ring.submit(&[], &[Signal::timeline(&done, 1)], |rec| rec.write_done_word(&word, 0))?;
        wait_timeline(&done, 1)?;
        let marks = [Event::new(&context)?, Event::new(&context)?];
        let legs = CudaLegs {
            wait_back: &|stream, value| stream.wait_value(address, value),
            signal_there: &|stream, value| cuda_there.signal_async(stream, value),
            finish: &|bench, end, last| bench.finish_word_chain(end, address, last),
        };
        // Reaching the end means CUDA saw the last word: nothing more to check.
        let row = self.chains(|bench, first| {
            bench.cuda_led_chain(first, &marks, &legs, &mut |_, value| {
                let wait = Wait::timeline(&there, value, raw::PipelineStageFlags::TRANSFER);
                ring.submit(&[wait], &[], |rec| rec.write_done_word(&word, value))
            })
        });
        let settled = self.streams[0].synchronize();
        drop(ring); // waits for Vulkan's submissions
        drop((cuda_there, cuda_word));
        settled?;
        row
    }

    pub(super) fn cuda_gl_word(&mut self) -> Result<Row> {
        let vulkan = self.vulkan()?;
        let semaphores = self.gl_semaphores()?;
        let memory_objects = self
            .cuda
            .external
            .ok_or_else(|| Error::Unavailable("this GL context offers no GL_EXT_memory_object_fd".to_owned()))?;
        let gl = self.gl.clone();
        let context = self.cuda.context.clone();
        let there = ExportableBinarySemaphore::new(&vulkan)?;
        let cuda_there = ImportedSemaphore::new_binary(&context, there.export_fd()?, "there")?;
        let shared = ExportableMemory::new(&context, TINY_BYTES)?;
        copy_to_device(&self.streams[0], shared.span(), &[0u8; 8])?;
        self.streams[0].synchronize()?;
        let address = shared.span().ptr;
        let (memory, mut gl_word) =
            memory_objects.import_buffer(&gl, shared.export_fd()?, shared.allocation_size(), TINY_BYTES)?;
        let names = match semaphores.import(&gl, there.export_fd()?) {
            Ok(name) => name,
            Err(error) => {
                gl_word.destroy(&gl);
                memory_objects.delete(memory);
                return Err(error);
            }
        };
        // Every value GL copies into the shared word, 8 bytes each, written by the host up front.
        let values = match gl::Buffer::uninitialized(&gl, self.rounds as usize * 8) {
            Ok(values) => values,
            Err(error) => {
                semaphores.delete(names);
                gl_word.destroy(&gl);
                memory_objects.delete(memory);
                return Err(error);
            }
        };
        let marks = [Event::new(&context)?, Event::new(&context)?];
        let legs = CudaLegs {
            wait_back: &|stream, value| stream.wait_value(address, value),
            signal_there: &|stream, _| cuda_there.signal_async(stream, 0),
            finish: &|bench, end, last| bench.finish_word_chain(end, address, last),
        };
        let row = self.chains(|bench, first| {
            let words: Vec<u8> = (0..u64::from(bench.rounds)).flat_map(|r| (first + r + 1).to_ne_bytes()).collect();
            values.write(&gl, &words)?;
            bench.cuda_led_chain(first, &marks, &legs, &mut |_, value| {
                semaphores.wait(&gl, names, &[])?;
                // Round `value` copies the value written for it (8 bytes at (value − first − 1)·8).
                copy_gl_bytes(&gl, &values, (value - first - 1) as usize * 8, &gl_word, 8)?;
                // SAFETY: a call on the current context.
                unsafe { gl.flush() };
                Ok(())
            })
        });
        let settled = self.streams[0].synchronize();
        semaphores.finish();
        semaphores.delete(names);
        let mut values = values;
        values.destroy(&gl);
        gl_word.destroy(&gl);
        memory_objects.delete(memory);
        drop(cuda_there);
        settled?;
        row
    }
}
