//! Device memory (`cuMemAlloc`) and page-locked host memory (`cuMemHostAlloc`), freed on drop.
#![allow(unsafe_code)]

use std::rc::Rc;

use cudarc::driver::sys;

use super::context::Context;
use super::stream::Stream;
use crate::error::{Error, Result};

/// A device pointer and the number of bytes behind it. What kernels receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceSpan {
    /// Device address.
    pub ptr: sys::CUdeviceptr,
    /// Length in bytes.
    pub bytes: usize,
}

impl DeviceSpan {
    /// `bytes` bytes starting `offset` bytes in, or an error naming the overrun.
    pub fn range(self, offset: usize, bytes: usize) -> Result<DeviceSpan> {
        match offset.checked_add(bytes) {
            Some(end) if end <= self.bytes => Ok(DeviceSpan { ptr: self.ptr + offset as u64, bytes }),
            _ => Err(Error::InvalidInput(format!(
                "a range of {bytes} bytes at offset {offset} does not fit in a buffer of {} bytes",
                self.bytes
            ))),
        }
    }
}

/// Queues `cuMemcpyPeerAsync` of `source` (memory of `source_context`) into `destination` (memory
/// of `destination_context`) on `stream`. With peer access enabled between two devices the copy
/// engine moves the bytes directly; without it the driver stages them through host memory; between
/// two contexts of one device it is a copy within that device's memory.
pub fn copy_peer_async(
    stream: &Stream,
    destination: DeviceSpan,
    destination_context: &Context,
    source: DeviceSpan,
    source_context: &Context,
) -> Result<()> {
    ensure_len(source.bytes, destination.bytes)?;
    // SAFETY: both spans come from live allocations of their contexts (the caller keeps them alive
    // until the stream has passed the copy) and the destination has ≥ source.bytes bytes.
    stream.context().trace().call(
        "cuMemcpyPeerAsync",
        || format!("{} bytes", source.bytes),
        || unsafe {
            sys::cuMemcpyPeerAsync(
                destination.ptr,
                destination_context.raw(),
                source.ptr,
                source_context.raw(),
                source.bytes,
                stream.raw(),
            )
        },
    )
}

/// Device memory owned by the app.
pub struct DeviceBuffer {
    span: DeviceSpan,
    context: Rc<Context>,
}

impl DeviceBuffer {
    /// `cuMemAlloc` of `bytes` (at least 1).
    pub fn new(context: &Rc<Context>, bytes: usize) -> Result<Self> {
        let mut ptr = 0;
        // SAFETY: valid out-pointer; the context is current.
        context.trace().call(
            "cuMemAlloc",
            || format!("{bytes} bytes"),
            || unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes.max(1)) },
        )?;
        Ok(Self { span: DeviceSpan { ptr, bytes }, context: context.clone() })
    }

    /// Address and length.
    pub fn span(&self) -> DeviceSpan {
        self.span
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.span.bytes
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.span.bytes == 0
    }

    /// Queues a copy of `data` into the buffer (from pageable memory the copy is synchronous
    /// for the host).
    pub fn upload(&mut self, stream: &Stream, data: &[u8]) -> Result<()> {
        copy_to_device(stream, self.span, data)
    }

    /// Copies the buffer into `out` and waits for it.
    pub fn download(&self, stream: &Stream, out: &mut [u8]) -> Result<()> {
        copy_from_device(stream, self.span, out)
    }

    /// Fills the buffer with `byte` (used to poison outputs in tests).
    pub fn fill(&mut self, stream: &Stream, byte: u8) -> Result<()> {
        // SAFETY: the range is exactly this allocation.
        self.context.trace().call(
            "cuMemsetD8Async",
            || format!("{} bytes to {byte:#04x}", self.span.bytes),
            || unsafe { sys::cuMemsetD8Async(self.span.ptr, byte, self.span.bytes, stream.raw()) },
        )
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc in `new`, freed once here; the context is alive.
        if let Err(error) =
            self.context.trace().call("cuMemFree", String::new, || unsafe { sys::cuMemFree_v2(self.span.ptr) })
        {
            self.context.defer_error(error);
        }
    }
}

/// Page-locked host memory: the copy engine reads and writes it directly, so transfers are faster
/// and can be asynchronous.
pub struct PinnedBuffer {
    ptr: *mut u8,
    bytes: usize,
    context: Rc<Context>,
}

impl PinnedBuffer {
    /// `cuMemHostAlloc` of `bytes` (at least 1), zero-filled.
    pub fn new(context: &Rc<Context>, bytes: usize) -> Result<Self> {
        let mut ptr = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current.
        context.trace().call(
            "cuMemHostAlloc",
            || format!("{bytes} bytes, pinned"),
            || unsafe { sys::cuMemHostAlloc(&mut ptr, bytes.max(1), 0) },
        )?;
        let ptr = ptr.cast::<u8>();
        // SAFETY: the allocation has at least `bytes` bytes; zeroing makes every byte initialised.
        unsafe { std::ptr::write_bytes(ptr, 0, bytes) };
        Ok(Self { ptr, bytes, context: context.clone() })
    }

    /// The memory as bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points to `bytes` initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }

    /// Copies the buffer while an asynchronous copy may still be writing it, as a host that skips
    /// the synchronisation does. Reads are volatile, so the compiler assumes nothing about the
    /// bytes; what comes out may mix old and new data, which is the point of the demonstration.
    pub fn snapshot_racing(&self) -> Vec<u8> {
        let words = self.bytes / 8;
        let mut out = vec![0u8; self.bytes];
        let base = self.ptr.cast_const();
        for (index, chunk) in out.chunks_exact_mut(8).take(words).enumerate() {
            // SAFETY: in bounds of the live allocation; the allocation is 8-byte aligned (page aligned).
            let word = unsafe { std::ptr::read_volatile(base.add(index * 8).cast::<u64>()) };
            chunk.copy_from_slice(&word.to_ne_bytes());
        }
        for (index, byte) in out.iter_mut().enumerate().skip(words * 8) {
            // SAFETY: in bounds of the live allocation.
            *byte = unsafe { std::ptr::read_volatile(base.add(index)) };
        }
        out
    }

    /// Queues a device-to-host copy of `source` into this buffer. The bytes are valid after the
    /// stream is synchronised; `&mut self` keeps Rust from reading them before the caller does so.
    pub fn download_async(&mut self, stream: &Stream, source: DeviceSpan) -> Result<()> {
        ensure_len(source.bytes, self.bytes)?;
        // SAFETY: the destination is pinned memory owned by self with ≥ source.bytes bytes. Callers
        // synchronise `stream` before reading or freeing it (documented above); until then the
        // bytes may change under a reader, which for plain bytes means stale data, not invalid values.
        self.context.trace().call("cuMemcpyDtoHAsync", String::new, || unsafe {
            sys::cuMemcpyDtoHAsync_v2(self.ptr.cast(), source.ptr, source.bytes, stream.raw())
        })
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemHostAlloc in `new`, freed once here.
        if let Err(error) =
            self.context.trace().call("cuMemFreeHost", String::new, || unsafe { sys::cuMemFreeHost(self.ptr.cast()) })
        {
            self.context.defer_error(error);
        }
    }
}

/// Copies `data` to the start of `destination` and waits for the copy.
pub(crate) fn copy_to_device(stream: &Stream, destination: DeviceSpan, data: &[u8]) -> Result<()> {
    ensure_len(data.len(), destination.bytes)?;
    // SAFETY: the destination span (from an owned allocation of this crate) has ≥ data.len()
    // bytes; the source slice is alive for the call, and we synchronise before returning.
    stream.context().trace().call(
        "cuMemcpyHtoDAsync",
        || format!("{} bytes", data.len()),
        || unsafe { sys::cuMemcpyHtoDAsync_v2(destination.ptr, data.as_ptr().cast(), data.len(), stream.raw()) },
    )?;
    stream.synchronize()
}

/// Copies the start of `source` into `out` and waits for the copy.
pub(crate) fn copy_from_device(stream: &Stream, source: DeviceSpan, out: &mut [u8]) -> Result<()> {
    ensure_len(out.len(), source.bytes)?;
    let length = out.len();
    // SAFETY: `out` is a live, writable host slice of out.len() ≤ source.bytes; we synchronise
    // before returning so the slice outlives the copy.
    stream.context().trace().call(
        "cuMemcpyDtoHAsync",
        || format!("{length} bytes"),
        || unsafe { sys::cuMemcpyDtoHAsync_v2(out.as_mut_ptr().cast(), source.ptr, length, stream.raw()) },
    )?;
    stream.synchronize()
}

fn ensure_len(needed: usize, available: usize) -> Result<()> {
    if needed > available {
        return Err(Error::InvalidInput(format!("copy of {needed} bytes into a buffer of {available} bytes")));
    }
    Ok(())
}
