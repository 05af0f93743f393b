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
use crate::{Error, Result};

/// A retained primary context, made current on the thread that created it.
pub struct Context {
    raw: sys::CUcontext,
    device: sys::CUdevice,
    info: DeviceInfo,
    driver: Driver,
    /// Errors from `Drop` impls, which must not panic; the app shows them on the next frame.
    deferred_errors: RefCell<Vec<Error>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.info.name)
            .field("ordinal", &self.info.ordinal)
            .finish()
    }
}

impl Context {
    /// Retains device `ordinal`'s primary context (the one the runtime API would use too) and makes
    /// it current on this thread.
    pub fn new(driver: Driver, ordinal: i32) -> Result<Rc<Self>> {
        let info = DeviceInfo::query(ordinal)?;
        let mut device = 0;
        // SAFETY: valid out-pointer; the driver is initialised (we hold a `Driver`).
        check(
            unsafe { sys::cuDeviceGet(&mut device, ordinal) },
            "cuDeviceGet",
        )?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer and device.
        check(
            unsafe { sys::cuDevicePrimaryCtxRetain(&mut raw, device) },
            "cuDevicePrimaryCtxRetain",
        )?;
        let context = Rc::new(Self {
            raw,
            device,
            info,
            driver,
            deferred_errors: RefCell::new(Vec::new()),
        });
        context.make_current()?;
        Ok(context)
    }

    /// Makes this context current on the calling thread.
    pub fn make_current(&self) -> Result<()> {
        // SAFETY: `raw` is a retained primary context, valid until `Drop`.
        check(unsafe { sys::cuCtxSetCurrent(self.raw) }, "cuCtxSetCurrent")
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
        check(
            unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) },
            "cuMemGetInfo",
        )?;
        Ok((free, total))
    }

    /// Waits for all work in this context (used before tearing things down and in tests).
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments; this context is current.
        check(unsafe { sys::cuCtxSynchronize() }, "cuCtxSynchronize")
    }

    /// Keeps an error raised where it could not be returned (a `Drop`), for [`Self::take_errors`].
    pub fn defer_error(&self, error: Error) {
        log::error!("{error}");
        self.deferred_errors.borrow_mut().push(error);
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
        if let Err(error) = check(
            unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) },
            "cuDevicePrimaryCtxRelease",
        ) {
            log::error!("{error}");
        }
    }
}
