//! Ordering on the GPU: timeline semaphores (a 64-bit counter that submissions, CUDA streams and
//! the host wait on and signal), optionally exportable as a file descriptor CUDA imports
//! (`cuImportExternalSemaphore`), and the waits and signals a submission names. Nothing here waits
//! on the host unless asked to.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, OwnedFd};
use std::rc::Rc;
use std::time::Duration;

use ash::vk;

use super::device::VulkanContext;
use super::vk_error;
use crate::error::{Error, Result};

/// A timeline semaphore, destroyed on drop.
pub struct TimelineSemaphore {
    semaphore: vk::Semaphore,
    exportable: bool,
    context: Rc<VulkanContext>,
}

impl TimelineSemaphore {
    /// A timeline semaphore at 0; `exportable` makes it exportable as an opaque file descriptor.
    pub fn new(context: &Rc<VulkanContext>, exportable: bool) -> Result<Self> {
        if exportable {
            context.external_semaphore()?;
        }
        let mut timeline = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
        let mut export =
            vk::ExportSemaphoreCreateInfo::default().handle_types(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
        let mut create_info = vk::SemaphoreCreateInfo::default().push_next(&mut timeline);
        if exportable {
            create_info = create_info.push_next(&mut export);
        }
        // SAFETY: valid create info whose chain outlives the call; destroyed in Drop.
        let semaphore = unsafe { context.device().create_semaphore(&create_info, None) }
            .map_err(|e| vk_error("vkCreateSemaphore", e))?;
        Ok(Self { semaphore, exportable, context: context.clone() })
    }

    /// The Vulkan handle, for submissions.
    pub fn raw(&self) -> vk::Semaphore {
        self.semaphore
    }

    /// A new file descriptor for the semaphore (`vkGetSemaphoreFdKHR`); the importer takes it over.
    pub fn export_fd(&self) -> Result<OwnedFd> {
        if !self.exportable {
            return Err(Error::InvalidInput("this timeline semaphore was not made exportable".to_owned()));
        }
        export_fd(&self.context, self.semaphore)
    }

    /// The counter now (`vkGetSemaphoreCounterValue`).
    pub fn value(&self) -> Result<u64> {
        // SAFETY: a live timeline semaphore.
        unsafe { self.context.device().get_semaphore_counter_value(self.semaphore) }
            .map_err(|e| vk_error("vkGetSemaphoreCounterValue", e))
    }

    /// Waits on the host until the counter reaches `value`; `Ok(false)` when `timeout` passed first.
    pub fn wait(&self, value: u64, timeout: Duration) -> Result<bool> {
        let semaphores = [self.semaphore];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
        let nanoseconds = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: a live timeline semaphore; the arrays outlive the call.
        match unsafe { self.context.device().wait_semaphores(&info, nanoseconds) } {
            Ok(()) => Ok(true),
            Err(vk::Result::TIMEOUT) => Ok(false),
            Err(e) => Err(vk_error("vkWaitSemaphores", e)),
        }
    }

    /// Sets the counter to `value` from the host (it must be above the current value).
    pub fn signal(&self, value: u64) -> Result<()> {
        let info = vk::SemaphoreSignalInfo::default().semaphore(self.semaphore).value(value);
        // SAFETY: a live timeline semaphore.
        unsafe { self.context.device().signal_semaphore(&info) }.map_err(|e| vk_error("vkSignalSemaphore", e))
    }
}

impl Drop for TimelineSemaphore {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once; submissions that use it are the owner's to
        // finish first (the device context waits for idle before it goes, too).
        unsafe { self.context.device().destroy_semaphore(self.semaphore, None) };
    }
}

/// A binary semaphore made to be exported: the APIs that import it wait on it and signal it
/// (OpenGL's `GL_EXT_semaphore_fd` and CUDA, which can import semaphores but not make them);
/// Vulkan itself does so only in `bench handoff`'s Vulkan ⇄ GL row. Destroyed on drop; the imports keep the payload alive on their own.
pub struct ExportableBinarySemaphore {
    semaphore: vk::Semaphore,
    context: Rc<VulkanContext>,
}

impl ExportableBinarySemaphore {
    /// An unsignalled binary semaphore, exportable as an opaque file descriptor.
    pub fn new(context: &Rc<VulkanContext>) -> Result<Self> {
        context.external_semaphore()?;
        let mut export =
            vk::ExportSemaphoreCreateInfo::default().handle_types(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
        let create_info = vk::SemaphoreCreateInfo::default().push_next(&mut export);
        // SAFETY: valid create info whose chain outlives the call; destroyed in Drop.
        let semaphore = unsafe { context.device().create_semaphore(&create_info, None) }
            .map_err(|e| vk_error("vkCreateSemaphore", e))?;
        Ok(Self { semaphore, context: context.clone() })
    }

    /// The Vulkan handle, for a submission that waits on it or signals it.
    pub fn raw(&self) -> vk::Semaphore {
        self.semaphore
    }

    /// A new file descriptor for the semaphore; each call gives one more reference to the same
    /// payload, which the importer takes over.
    pub fn export_fd(&self) -> Result<OwnedFd> {
        export_fd(&self.context, self.semaphore)
    }
}

impl Drop for ExportableBinarySemaphore {
    fn drop(&mut self) {
        // SAFETY: created in `new`, never used by a submission of this device, destroyed once.
        unsafe { self.context.device().destroy_semaphore(self.semaphore, None) };
    }
}

/// `vkGetSemaphoreFdKHR` for a semaphore made exportable as an opaque file descriptor.
fn export_fd(context: &VulkanContext, semaphore: vk::Semaphore) -> Result<OwnedFd> {
    let info = vk::SemaphoreGetFdInfoKHR::default()
        .semaphore(semaphore)
        .handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
    // SAFETY: a semaphore created with this export type; the new descriptor is owned below.
    let fd = unsafe { context.external_semaphore()?.get_semaphore_fd(&info) }
        .map_err(|e| vk_error("vkGetSemaphoreFdKHR", e))?;
    // SAFETY: a fresh descriptor the call gave to us and to no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What a submission waits for before its commands run, from `stage` on: a timeline value, or a
/// binary semaphore (a swapchain image being ready).
#[derive(Clone, Copy)]
pub struct Wait<'a> {
    pub(crate) semaphore: vk::Semaphore,
    /// Ignored for a binary semaphore.
    pub(crate) value: u64,
    pub(crate) stage: vk::PipelineStageFlags,
    _borrow: std::marker::PhantomData<&'a TimelineSemaphore>,
}

impl<'a> Wait<'a> {
    /// Until `semaphore` reaches `value`.
    pub fn timeline(semaphore: &'a TimelineSemaphore, value: u64, stage: vk::PipelineStageFlags) -> Self {
        Self { semaphore: semaphore.raw(), value, stage, _borrow: std::marker::PhantomData }
    }

    /// Until the binary `semaphore` is signalled (its owner keeps it alive until the submission
    /// is done).
    pub(crate) fn binary(semaphore: vk::Semaphore, stage: vk::PipelineStageFlags) -> Self {
        Self { semaphore, value: 0, stage, _borrow: std::marker::PhantomData }
    }
}

/// What a submission signals when its commands are done: a timeline value, or a binary semaphore
/// (the frame may be presented).
#[derive(Clone, Copy)]
pub struct Signal<'a> {
    pub(crate) semaphore: vk::Semaphore,
    /// Ignored for a binary semaphore.
    pub(crate) value: u64,
    _borrow: std::marker::PhantomData<&'a TimelineSemaphore>,
}

impl<'a> Signal<'a> {
    /// Sets `semaphore` to `value`.
    pub fn timeline(semaphore: &'a TimelineSemaphore, value: u64) -> Self {
        Self { semaphore: semaphore.raw(), value, _borrow: std::marker::PhantomData }
    }

    /// Signals the binary `semaphore`.
    pub(crate) fn binary(semaphore: vk::Semaphore) -> Self {
        Self { semaphore, value: 0, _borrow: std::marker::PhantomData }
    }
}
