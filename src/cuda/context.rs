//! Contexts: the device's primary context, shared by everything that talks to that device, and
//! (for n-body split across devices) further contexts made with `cuCtxCreate`, so one GPU can play
//! several devices.
//!
//! Every CUDA object of the app (streams, events, memory, modules, graphics registrations) holds an
//! `Rc<Context>`, so the context is released only after the last of them.
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::rc::Rc;

use cudarc::driver::sys;

use super::device::DeviceInfo;
use super::driver::{Driver, check};
use super::trace::{Trace, TraceEntry};
use crate::error::{Error, Result};

/// How a context came to be, which decides how it is let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextKind {
    /// `cuDevicePrimaryCtxRetain`: the device's one primary context; released on drop.
    Primary,
    /// `cuCtxCreate`: a context of its own on the device; destroyed on drop.
    Created,
}

/// A CUDA context: a retained primary context, or one made with `cuCtxCreate`.
pub struct Context {
    raw: sys::CUcontext,
    kind: ContextKind,
    device: sys::CUdevice,
    info: DeviceInfo,
    driver: Driver,
    /// Errors from `Drop` impls, which must not panic; the app shows them on the next frame.
    deferred_errors: RefCell<Vec<Error>>,
    /// Releases that failed because a kernel fault lost the context: the first is logged as an
    /// error, the rest (every event, stream and module fails the same way) at debug level.
    lost_releases: std::cell::Cell<u32>,
    /// The driver calls made through this context.
    trace: Trace,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("device", &self.info.name).field("ordinal", &self.info.ordinal).finish()
    }
}

impl Context {
    /// Retains device `ordinal`'s primary context (the one the runtime API would use too) and makes
    /// it current on this thread.
    pub fn new(driver: Driver, ordinal: i32) -> Result<Rc<Self>> {
        let note =
            |call, detail: String, host_us| TraceEntry { call, detail, host_us, start_us: f64::NAN, error: None };
        let mut setup = vec![
            note("cuInit", "flags 0".to_owned(), driver.init_us[0]),
            note("cuDriverGetVersion", format!("CUDA {}.{}", driver.version.0, driver.version.1), driver.init_us[1]),
        ];
        let started = std::time::Instant::now();
        let info = DeviceInfo::query(ordinal)?;
        setup.push(note(
            "cuDeviceGetAttribute",
            format!("×31 for device {ordinal} ({}), with cuDeviceGetName and cuDeviceTotalMem", info.name),
            started.elapsed().as_secs_f64() * 1e6,
        ));
        let trace = Trace::new(setup);
        let mut device = 0;
        // SAFETY: valid out-pointer; the driver is initialised (we hold a `Driver`).
        trace.call(
            "cuDeviceGet",
            || format!("ordinal {ordinal}"),
            || unsafe { sys::cuDeviceGet(&mut device, ordinal) },
        )?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer and device.
        trace.call(
            "cuDevicePrimaryCtxRetain",
            || format!("device {device}"),
            || unsafe { sys::cuDevicePrimaryCtxRetain(&mut raw, device) },
        )?;
        let context = Rc::new(Self {
            raw,
            kind: ContextKind::Primary,
            device,
            info,
            driver,
            deferred_errors: RefCell::new(Vec::new()),
            lost_releases: std::cell::Cell::new(0),
            trace,
        });
        context.make_current()?;
        Ok(context)
    }

    /// A new context of its own on device `ordinal` (`cuCtxCreate`), separate from the primary
    /// context and from every other: its own memory, modules and streams. It is *not* left
    /// current: the caller's current context stays as it was.
    pub fn new_separate(driver: Driver, ordinal: i32) -> Result<Rc<Self>> {
        let info = DeviceInfo::query(ordinal)?;
        let trace = Trace::new(Vec::new());
        let mut device = 0;
        // SAFETY: valid out-pointer; the driver is initialised (we hold a `Driver`).
        trace.call(
            "cuDeviceGet",
            || format!("ordinal {ordinal}"),
            || unsafe { sys::cuDeviceGet(&mut device, ordinal) },
        )?;
        let mut raw = std::ptr::null_mut();
        // No execution affinity, no CUDA-in-graphics sharing: a plain context.
        let mut params = sys::CUctxCreateParams {
            execAffinityParams: std::ptr::null_mut(),
            numExecAffinityParams: 0,
            cigParams: std::ptr::null_mut(),
        };
        // SAFETY: valid out-pointer, parameter struct and device; flags 0 = automatic scheduling.
        // (CUDA 13's `cuCtxCreate` is the `_v4` entry point, which takes the parameter struct.)
        trace.call(
            "cuCtxCreate",
            || format!("device {device}, flags 0"),
            || unsafe { sys::cuCtxCreate_v4(&mut raw, &mut params, 0, device) },
        )?;
        // cuCtxCreate pushed the new context onto this thread's stack; pop it so the caller's
        // context is current again.
        let mut popped = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the new context is on top of this thread's stack.
        let popped_result =
            trace.call("cuCtxPopCurrent", String::new, || unsafe { sys::cuCtxPopCurrent_v2(&mut popped) });
        let context = Rc::new(Self {
            raw,
            kind: ContextKind::Created,
            device,
            info,
            driver,
            deferred_errors: RefCell::new(Vec::new()),
            lost_releases: std::cell::Cell::new(0),
            trace,
        });
        popped_result?;
        Ok(context)
    }

    /// Primary or created.
    pub fn kind(&self) -> ContextKind {
        self.kind
    }

    /// The raw handle, for driver calls of this crate that name a context (peer copies).
    pub(crate) fn raw(&self) -> sys::CUcontext {
        self.raw
    }

    /// `cuDeviceCanAccessPeer`: whether this context's device can read and write `peer`'s device
    /// memory directly (NVLink or PCIe peer to peer). False for the same device: contexts on one
    /// GPU copy to each other through the GPU's own memory, with no peer mapping involved.
    pub fn can_access_peer(&self, peer: &Context) -> Result<bool> {
        if self.device == peer.device {
            return Ok(false);
        }
        let mut can = 0;
        // SAFETY: valid out-pointer and device handles.
        self.trace.call(
            "cuDeviceCanAccessPeer",
            || format!("device {} -> device {}", self.device, peer.device),
            || unsafe { sys::cuDeviceCanAccessPeer(&mut can, self.device, peer.device) },
        )?;
        Ok(can != 0)
    }

    /// `cuCtxEnablePeerAccess`: lets this context reach `peer`'s memory directly. Makes this
    /// context current. Asking twice is not an error.
    pub fn enable_peer_access(&self, peer: &Context) -> Result<()> {
        self.make_current()?;
        // SAFETY: both contexts are live; flags must be 0.
        self.trace.call(
            "cuCtxEnablePeerAccess",
            || format!("device {} -> device {}", self.device, peer.device),
            || match unsafe { sys::cuCtxEnablePeerAccess(peer.raw, 0) } {
                sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => sys::CUresult::CUDA_SUCCESS,
                other => other,
            },
        )
    }

    /// Makes this context current on the calling thread.
    pub fn make_current(&self) -> Result<()> {
        // SAFETY: `raw` is a retained primary context, valid until `Drop`.
        self.trace.call("cuCtxSetCurrent", || format!("{:?}", self.raw), || unsafe { sys::cuCtxSetCurrent(self.raw) })
    }

    /// The device's attributes.
    pub fn device(&self) -> &DeviceInfo {
        &self.info
    }

    /// The raw `CUdevice`.
    pub fn raw_device(&self) -> sys::CUdevice {
        self.device
    }

    /// The driver this context was made with.
    pub fn driver(&self) -> Driver {
        self.driver
    }

    /// `cuMemGetInfo`: (free, total) device memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers; this context is current on the app's thread.
        self.trace.call("cuMemGetInfo", String::new, || unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })?;
        Ok((free, total))
    }

    /// Waits for all work in this context (used before tearing things down and in tests).
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments; this context is current.
        self.trace.call("cuCtxSynchronize", String::new, || unsafe { sys::cuCtxSynchronize() })
    }

    /// Keeps an error raised where it could not be returned (a `Drop`), for [`Self::take_errors`].
    pub fn defer_error(&self, error: Error) {
        if error.is_context_lost() {
            let earlier = self.lost_releases.replace(self.lost_releases.get() + 1);
            match earlier {
                0 => {
                    log::error!("{error} (later releases in the lost context fail the same way; logged at debug level)")
                }
                _ => log::debug!("{error}"),
            }
        } else {
            log::error!("{error}");
        }
        self.deferred_errors.borrow_mut().push(error);
    }

    /// The driver-call trace of this context.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Errors recorded since the last call; the app shows them to the user.
    pub fn take_errors(&self) -> Vec<Error> {
        std::mem::take(&mut *self.deferred_errors.borrow_mut())
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        let released = match self.kind {
            // SAFETY: the context was retained in `new`; everything that used it held an `Rc` to
            // it and is gone.
            ContextKind::Primary => {
                check(unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) }, "cuDevicePrimaryCtxRelease")
            }
            // SAFETY: created in `new_separate` and destroyed once here; everything made in it
            // held an `Rc` to it and is gone. Destroying a context that is current on this thread
            // leaves no context current, which the next `make_current` replaces.
            ContextKind::Created => check(unsafe { sys::cuCtxDestroy_v2(self.raw) }, "cuCtxDestroy"),
        };
        if let Err(error) = released {
            log::error!("{error}");
        }
    }
}
