//! Streams (ordered queues of GPU work) and events (timestamps recorded in a stream).
#![allow(unsafe_code)]

use std::rc::Rc;

use cudarc::driver::sys;

use super::context::Context;
use super::driver::{check, proc_address};
use crate::error::Result;

/// A CUDA stream (`cuStreamCreate`, destroyed on drop with `cuStreamDestroy`): work queued on it
/// runs in order, so a map → kernel → unmap sequence on one stream is ordered. Each demo owns one.
pub struct Stream {
    raw: sys::CUstream,
    context: Rc<Context>,
}

impl Stream {
    /// `cuStreamCreate` with `CU_STREAM_NON_BLOCKING`: no implicit sync with the legacy default stream.
    pub fn new(context: &Rc<Context>) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current on this thread.
        context.trace().call(
            "cuStreamCreate",
            || "CU_STREAM_NON_BLOCKING".to_owned(),
            || unsafe { sys::cuStreamCreate(&mut raw, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32) },
        )?;
        Ok(Self { raw, context: context.clone() })
    }

    /// The raw handle, for driver calls made by this crate.
    pub fn raw(&self) -> sys::CUstream {
        self.raw
    }

    /// The context this stream belongs to.
    pub fn context(&self) -> &Rc<Context> {
        &self.context
    }

    /// Whether all work queued so far has finished (`cuStreamQuery`), without waiting.
    pub fn is_idle(&self) -> Result<bool> {
        let mut status = sys::CUresult::CUDA_SUCCESS;
        // SAFETY: `raw` is a live stream. NOT_READY is an answer here, not a failure.
        let traced = self.context.trace().call("cuStreamQuery", String::new, || {
            status = unsafe { sys::cuStreamQuery(self.raw) };
            match status {
                sys::CUresult::CUDA_ERROR_NOT_READY => sys::CUresult::CUDA_SUCCESS,
                other => other,
            }
        });
        traced.map(|()| status == sys::CUresult::CUDA_SUCCESS)
    }

    /// `cuStreamWaitEvent`: work queued on this stream after the call waits, on the GPU, for the
    /// work before `event`'s latest record, which may be in another context or on another device.
    /// The host does not wait.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        // SAFETY: both handles are live; flags must be 0.
        self.context
            .trace()
            .call("cuStreamWaitEvent", String::new, || unsafe { sys::cuStreamWaitEvent(self.raw, event.raw, 0) })
    }

    /// `cuStreamWaitValue64`: work queued on this stream after the call waits, on the GPU, until
    /// the 64-bit word at `address` (device memory, 8-byte aligned: memory another API writes, for
    /// one) is at least `value`. The host does not wait.
    pub fn wait_value(&self, address: sys::CUdeviceptr, value: u64) -> Result<()> {
        let flags = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
        // SAFETY: a live stream; the caller keeps the memory at `address` alive while the stream
        // may wait on it.
        self.context.trace().call(
            "cuStreamWaitValue64",
            || format!("word ≥ {value}"),
            || unsafe { sys::cuStreamWaitValue64_v2(self.raw, address, value, flags) },
        )
    }

    /// `cuStreamWriteValue64`: when the stream reaches this point, the 64-bit word at `address`
    /// (device memory, 8-byte aligned) becomes `value`.
    pub fn write_value(&self, address: sys::CUdeviceptr, value: u64) -> Result<()> {
        // SAFETY: a live stream; the caller keeps the memory at `address` alive until written.
        self.context.trace().call(
            "cuStreamWriteValue64",
            || format!("word = {value}"),
            || unsafe { sys::cuStreamWriteValue64_v2(self.raw, address, value, 0) },
        )
    }

    /// Blocks the host until all work queued so far has finished.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: `raw` is a live stream.
        self.context.trace().call("cuStreamSynchronize", String::new, || unsafe { sys::cuStreamSynchronize(self.raw) })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: `raw` is a live stream owned by us; the context is alive (we hold an Rc).
        if let Err(error) =
            self.context.trace().call("cuStreamDestroy", String::new, || unsafe { sys::cuStreamDestroy_v2(self.raw) })
        {
            self.context.defer_error(error);
        }
    }
}

/// A CUDA event with timing enabled.
pub struct Event {
    raw: sys::CUevent,
    context: Rc<Context>,
}

/// `cuEventElapsedTime` as it was in CUDA 12.0. cudarc's CUDA 13 bindings call `_v2`, which drivers
/// older than 12.8 lack, so the app resolves it through `cuGetProcAddress` instead.
type ElapsedTimeFn = unsafe extern "C" fn(*mut f32, sys::CUevent, sys::CUevent) -> sys::CUresult;

impl Event {
    /// `cuEventCreate` with default flags (timing enabled).
    pub fn new(context: &Rc<Context>) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer; context current.
        context.trace().call("cuEventCreate", String::new, || unsafe {
            sys::cuEventCreate(&mut raw, sys::CUevent_flags::CU_EVENT_DEFAULT as u32)
        })?;
        Ok(Self { raw, context: context.clone() })
    }

    /// `cuEventCreate` with `CU_EVENT_DISABLE_TIMING`: an event only to order work by (cheaper to
    /// record and wait on than a timed one).
    pub fn new_untimed(context: &Rc<Context>) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current.
        context.trace().call(
            "cuEventCreate",
            || "CU_EVENT_DISABLE_TIMING".to_owned(),
            || unsafe { sys::cuEventCreate(&mut raw, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32) },
        )?;
        Ok(Self { raw, context: context.clone() })
    }

    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        // SAFETY: both handles are live.
        self.context
            .trace()
            .call("cuEventRecord", String::new, || unsafe { sys::cuEventRecord(self.raw, stream.raw()) })
    }

    /// Whether the work before the event has finished (never blocks).
    pub fn is_complete(&self) -> Result<bool> {
        // SAFETY: live event.
        match unsafe { sys::cuEventQuery(self.raw) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            other => check(other, "cuEventQuery").map(|()| false),
        }
    }

    /// Blocks until the event has completed.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: live event.
        self.context.trace().call("cuEventSynchronize", String::new, || unsafe { sys::cuEventSynchronize(self.raw) })
    }

    /// As [`Self::synchronize`], for an event on a stream with no other work: a reading of the
    /// GPU's clock, not a wait for work; the trace says so.
    pub fn read_clock(&self) -> Result<()> {
        // SAFETY: live event.
        self.context.trace().call(
            "cuEventSynchronize",
            || "clock reading: an event on an idle stream of its own".to_owned(),
            || unsafe { sys::cuEventSynchronize(self.raw) },
        )
    }

    /// Milliseconds between `start` and `self`, both completed.
    pub fn elapsed_ms_since(&self, start: &Event) -> Result<f32> {
        let function = elapsed_time_fn()?;
        let mut ms = 0.0f32;
        // SAFETY: `function` has cuEventElapsedTime's 12.0 signature; both events are live.
        check(unsafe { function(&mut ms, start.raw, self.raw) }, "cuEventElapsedTime")?;
        Ok(ms)
    }
}

fn elapsed_time_fn() -> Result<ElapsedTimeFn> {
    use std::sync::OnceLock;
    static FUNCTION: OnceLock<usize> = OnceLock::new();
    if let Some(&address) = FUNCTION.get() {
        // SAFETY: the address was resolved for this exact symbol and signature below.
        return Ok(unsafe { std::mem::transmute::<usize, ElapsedTimeFn>(address) });
    }
    let address = proc_address(c"cuEventElapsedTime")? as usize;
    let _ = FUNCTION.set(address);
    // SAFETY: `cuGetProcAddress` returned the entry point of cuEventElapsedTime at the 12.0 ABI,
    // whose C signature is `CUresult (float*, CUevent, CUevent)`.
    Ok(unsafe { std::mem::transmute::<usize, ElapsedTimeFn>(address) })
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: live event owned by us.
        if let Err(error) =
            self.context.trace().call("cuEventDestroy", String::new, || unsafe { sys::cuEventDestroy_v2(self.raw) })
        {
            self.context.defer_error(error);
        }
    }
}
