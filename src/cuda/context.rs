//! The device's primary context, shared by everything that talks to that device.
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
use crate::{Error, Result};

/// A retained primary context, made current on the thread that created it.
pub struct Context {
    raw: sys::CUcontext,
    device: sys::CUdevice,
    info: DeviceInfo,
    driver: Driver,
    /// Errors from `Drop` impls, which must not panic; the app shows them on the next frame.
    deferred_errors: RefCell<Vec<Error>>,
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
        let note = |call, detail: String, host_us| TraceEntry { call, detail, host_us, error: None };
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
        let context = Rc::new(Self { raw, device, info, driver, deferred_errors: RefCell::new(Vec::new()), trace });
        context.make_current()?;
        Ok(context)
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
        log::error!("{error}");
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
        // SAFETY: the context was retained in `new`; everything that used it held an `Rc` to it
        // and is gone.
        if let Err(error) =
            check(unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) }, "cuDevicePrimaryCtxRelease")
        {
            log::error!("{error}");
        }
    }
}
