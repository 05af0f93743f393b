//! Opening the Vulkan renderer's device, and CUDA on the same device when it runs.

use std::rc::Rc;

use super::{BackendRequest, CudaOptions, Selection, TransferRequest, cuda_transfer_flag, cuda_without_gl};
use crate::error::{Error, Result};
use crate::transfer::TransferKind;
use crate::vk::device::{DeviceChoice, VulkanContext, WindowHandles};
use crate::vk::frame::VulkanGraphics;

/// The Vulkan device (presenting to `window`, when given) with a target of `size`, and, when
/// CUDA runs, CUDA on the same device. With `--backend auto` a machine without CUDA, or without
/// a Vulkan device that is the CUDA device, draws with the CPU backend and says why; with
/// `--backend cuda` that is an error. The selection offers Vulkan's own path (memory Vulkan
/// allocated, imported by CUDA, ordered by timeline semaphores) and the copies through host
/// memory when CUDA runs on the Vulkan device, and the CPU's always.
pub fn open_vulkan(
    options: &CudaOptions,
    size: [u32; 2],
    window: Option<WindowHandles>,
) -> Result<(VulkanGraphics, Selection)> {
    // Vulkan offers its own path and the copies through host memory; GL's paths are GL's.
    let asked_path = match options.transfer {
        TransferRequest::Auto => None,
        TransferRequest::Copy => Some(TransferKind::HostCopy),
        TransferRequest::Pageable => Some(TransferKind::HostCopyPageable),
        TransferRequest::Interop | TransferRequest::External | TransferRequest::ExternalSemaphores => {
            return Err(Error::InvalidInput(format!(
                "{} is an OpenGL path; the Vulkan renderer takes Vulkan's own path with CUDA, or a copy \
                 through host memory (--transfer copy or pageable): drop --transfer, or use --renderer gl",
                cuda_transfer_flag(options.transfer).unwrap_or("--transfer")
            )));
        }
    };
    let graphics = |choice: &DeviceChoice| {
        let context = match window {
            Some(handles) => VulkanContext::with_window(choice, handles)?,
            None => VulkanContext::new(choice)?,
        };
        VulkanGraphics::on(context, size)
    };
    let required = options.backend == BackendRequest::Cuda;
    let on_cpu = |reason: String, unmet_request: Option<String>| Selection {
        cuda: None,
        transfer: TransferKind::Cpu,
        unavailable: [TransferKind::Vulkan, TransferKind::HostCopy, TransferKind::HostCopyPageable]
            .into_iter()
            .map(|kind| (kind, reason.clone()))
            .collect(),
        reason,
        unmet_request,
        cuda_lost: false,
        offered: vec![TransferKind::Cpu],
    };
    let cuda = match options.backend {
        BackendRequest::Cpu => {
            let reason = "CPU backend requested (--backend cpu)".to_owned();
            return Ok((graphics(&DeviceChoice::Any)?, on_cpu(reason, None)));
        }
        _ => match cuda_without_gl(options) {
            Ok(cuda) => cuda,
            Err(error) if required => return Err(error),
            Err(error) => {
                let reason = format!("CPU backend, because CUDA can't run here: {error}");
                log::warn!("{reason}");
                let unmet = match options.device {
                    Some(ordinal) => {
                        let flag = options.device_flag.clone().unwrap_or_else(|| format!("--device {ordinal}"));
                        Some(format!("{flag} was asked for, but CUDA can't run here: {error}"))
                    }
                    None => cuda_transfer_flag(options.transfer)
                        .map(|flag| format!("{flag} was asked for, but CUDA can't run here: {error}")),
                };
                return Ok((graphics(&DeviceChoice::Any)?, on_cpu(reason, unmet)));
            }
        },
    };
    let device = cuda.context.device();
    let choice = DeviceChoice::CudaDevice { uuid: device.uuid.clone(), name: device.name.clone() };
    match graphics(&choice) {
        Ok(vulkan) => {
            let mut reason = format!(
                "Vulkan runs on CUDA device {} ({}): CUDA imports the memory Vulkan allocates",
                cuda.context.raw_device(),
                device.name
            );
            if let Some(path) = asked_path {
                reason = format!("{} requested (--transfer), Vulkan on CUDA device {}", path.label(), device.name);
            }
            let selection = Selection {
                cuda: Some(Rc::new(cuda)),
                transfer: asked_path.unwrap_or(TransferKind::Vulkan),
                reason,
                unmet_request: None,
                cuda_lost: false,
                unavailable: Vec::new(),
                offered: vec![
                    TransferKind::Vulkan,
                    TransferKind::HostCopy,
                    TransferKind::HostCopyPageable,
                    TransferKind::Cpu,
                ],
            };
            Ok((vulkan, selection))
        }
        Err(error) if required => Err(error),
        Err(error) => {
            let reason = format!("CPU backend, because Vulkan cannot share memory with CUDA here: {error}");
            log::warn!("{reason}");
            Ok((graphics(&DeviceChoice::Any)?, on_cpu(reason, None)))
        }
    }
}
