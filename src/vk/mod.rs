//! Vulkan: finding the devices and their identity (the UUID a CUDA device is matched by), and the
//! objects Vulkan shares with CUDA — a [`device::VulkanContext`] on the CUDA device, buffers whose
//! memory CUDA imports ([`memory::Buffer`]), and timeline semaphores both wait on and signal
//! ([`sync::TimelineSemaphore`]). The loader (`libvulkan.so.1`) is opened at run time, so a
//! machine without Vulkan runs the app all the same.
#![allow(unsafe_code)]

pub mod commands;
pub mod device;
pub mod frame;
mod image;
pub mod live;
pub mod memory;
#[cfg(feature = "app")]
pub mod panel;
pub mod pipeline;
pub mod shader;
pub mod shared;
pub mod swapchain;
pub mod sync;
pub mod target;
pub mod texture;
pub mod timing;

use std::ffi::{CStr, CString};
use std::sync::{Arc, Mutex};

use ash::vk;
use serde::Serialize;

use crate::error::{Error, Result};

/// What the Vulkan loader and its drivers offer.
#[derive(Debug, Clone, Serialize)]
pub struct VulkanProbe {
    /// The loader's instance version, e.g. "1.3.275".
    pub instance_version: String,
    /// Every physical device, in the loader's order.
    pub devices: Vec<VulkanDevice>,
}

/// One physical device.
#[derive(Debug, Clone, Serialize)]
pub struct VulkanDevice {
    /// `deviceName`.
    pub name: String,
    /// Discrete GPU, integrated GPU, CPU, ...
    pub kind: String,
    /// The driver's name and version text (`VkPhysicalDeviceDriverProperties`).
    pub driver: String,
    /// The device's Vulkan version.
    pub api_version: String,
    /// `VkPhysicalDeviceIDProperties::deviceUUID` as 32 hex digits: equal to a CUDA device's
    /// `cuDeviceGetUuid` when both name the same GPU.
    pub device_uuid: String,
    /// `VK_KHR_external_memory_fd`: memory exported as a file descriptor CUDA can import.
    pub external_memory_fd: bool,
    /// `VK_KHR_external_semaphore_fd`: semaphores exported the same way.
    pub external_semaphore_fd: bool,
    /// Timeline semaphores (Vulkan 1.2 core feature).
    pub timeline_semaphore: bool,
    /// Dynamic rendering (Vulkan 1.3): what the app's Vulkan renderer draws with.
    pub dynamic_rendering: bool,
    /// `VK_NV_cuda_kernel_launch`: CUDA kernels launched from Vulkan's own command buffers, with
    /// no second context to hand off to (not used yet; doctor reports it).
    pub cuda_kernel_launch: bool,
}

/// "name (driver)", as the log and the panel say it.
impl std::fmt::Display for VulkanDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.driver)
    }
}

impl VulkanDevice {
    /// What this device lacks for sharing memory and ordering with CUDA (empty: nothing).
    pub fn missing_for_cuda(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if !self.external_memory_fd {
            missing.push("VK_KHR_external_memory_fd");
        }
        if !self.external_semaphore_fd {
            missing.push("VK_KHR_external_semaphore_fd");
        }
        if !self.timeline_semaphore {
            missing.push("timeline semaphores");
        }
        missing
    }
}

/// A Vulkan instance with the loader it came from. Instances are shared by the whole process and
/// never destroyed: `Instance::shared`.
pub(crate) struct Instance {
    pub(crate) instance: ash::Instance,
    pub(crate) version: u32,
    pub(crate) entry: ash::Entry,
    /// The instance extensions it was made with.
    extensions: Vec<CString>,
}

/// Every instance the process has made, kept until it exits. NVIDIA's driver (580.159, measured
/// on an H100 and an H200) terminates every EGL display of the process when a Vulkan instance is
/// destroyed: the headless GL context stops being current, and `eglMakeCurrent` then fails with
/// EGL_NOT_INITIALIZED, so GL made no more objects after the external path's semaphores were set
/// up and torn down. Keeping each instance for the life of the process, and handing the same one
/// to every device opened after, avoids that, and costs one instance per set of extensions (at
/// most: none, and a window system's surface).
static INSTANCES: Mutex<Vec<Arc<Instance>>> = Mutex::new(Vec::new());

impl Instance {
    /// The process's instance with at least `extensions` enabled (a window's surface; none for
    /// offscreen work), made the first time one is asked for.
    pub(crate) fn shared(extensions: &[*const std::ffi::c_char]) -> Result<Arc<Self>> {
        // SAFETY: the pointers are NUL-terminated extension names (ash's NAME constants or
        // ash_window's list), valid for this call.
        let wanted: Vec<&CStr> = extensions.iter().map(|&name| unsafe { CStr::from_ptr(name) }).collect();
        let mut instances = INSTANCES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(instance) =
            instances.iter().find(|i| wanted.iter().all(|w| i.extensions.iter().any(|e| e.as_c_str() == *w)))
        {
            return Ok(Arc::clone(instance));
        }
        let instance = Arc::new(Self::start(&wanted)?);
        instances.push(Arc::clone(&instance));
        Ok(instance)
    }

    fn start(extensions: &[&CStr]) -> Result<Self> {
        // SAFETY: loads libvulkan.so.1 and resolves its entry points; nothing else runs meanwhile.
        let entry = unsafe { ash::Entry::load() }.map_err(|error| {
            Error::Unavailable(format!(
                "no Vulkan loader ({error}): install libvulkan1 and a Vulkan driver (the NVIDIA driver's, or Mesa's \
                 mesa-vulkan-drivers)"
            ))
        })?;
        // SAFETY: a loaded entry; the call has no preconditions.
        let version = unsafe { entry.try_enumerate_instance_version() }
            .map_err(|e| vk_error("vkEnumerateInstanceVersion", e))?
            .unwrap_or(vk::API_VERSION_1_0);
        if version < vk::API_VERSION_1_1 {
            return Err(Error::Unavailable(format!(
                "the Vulkan loader is version {}, and 1.1 or newer is needed to read device UUIDs: update libvulkan1",
                version_text(version)
            )));
        }
        let application = vk::ApplicationInfo::default()
            .application_name(c"interop-lab")
            .api_version(version.min(vk::API_VERSION_1_3));
        let names: Vec<*const std::ffi::c_char> = extensions.iter().map(|e| e.as_ptr()).collect();
        let create_info =
            vk::InstanceCreateInfo::default().application_info(&application).enabled_extension_names(&names);
        // SAFETY: valid create info whose pointers outlive the call; the instance is never
        // destroyed (see INSTANCES).
        let instance = unsafe { entry.create_instance(&create_info, None) }.map_err(|e| match e {
            vk::Result::ERROR_EXTENSION_NOT_PRESENT => Error::Unavailable(
                "the Vulkan loader cannot draw into this kind of window (no surface extension for it): use --renderer gl"
                    .to_owned(),
            ),
            vk::Result::ERROR_INCOMPATIBLE_DRIVER => Error::Unavailable(
                "the Vulkan loader found no driver: install one (the NVIDIA driver's Vulkan ICD, or mesa-vulkan-drivers), \
                 or point VK_DRIVER_FILES at its ICD file"
                    .to_owned(),
            ),
            other => vk_error("vkCreateInstance", other),
        })?;
        let extensions = extensions.iter().map(|&e| e.to_owned()).collect();
        Ok(Instance { instance, version, entry, extensions })
    }

    /// Every physical device, with its description.
    pub(crate) fn devices(&self) -> Result<Vec<(vk::PhysicalDevice, VulkanDevice)>> {
        // SAFETY: a live instance.
        let physical = unsafe { self.instance.enumerate_physical_devices() }
            .map_err(|e| vk_error("vkEnumeratePhysicalDevices", e))?;
        physical.into_iter().map(|device| Ok((device, describe(&self.instance, device)?))).collect()
    }
}

/// Opens the loader, makes an instance and describes every physical device.
pub fn probe() -> Result<VulkanProbe> {
    let instance = Instance::shared(&[])?;
    let devices = instance.devices()?.into_iter().map(|(_, device)| device).collect();
    Ok(VulkanProbe { instance_version: version_text(instance.version), devices })
}

fn describe(instance: &ash::Instance, device: vk::PhysicalDevice) -> Result<VulkanDevice> {
    let mut id = vk::PhysicalDeviceIDProperties::default();
    let mut driver = vk::PhysicalDeviceDriverProperties::default();
    let mut properties = vk::PhysicalDeviceProperties2::default().push_next(&mut id).push_next(&mut driver);
    // SAFETY: a device of this live instance; the chain's structures outlive the call.
    unsafe { instance.get_physical_device_properties2(device, &mut properties) };
    let base = properties.properties;
    let mut timeline = vk::PhysicalDeviceTimelineSemaphoreFeatures::default();
    let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut timeline);
    // SAFETY: as above.
    unsafe { instance.get_physical_device_features2(device, &mut features) };
    let timeline_semaphore = timeline.timeline_semaphore == vk::TRUE;
    // Dynamic rendering is a Vulkan 1.3 feature: asked of 1.3 devices only.
    let dynamic_rendering = base.api_version >= vk::API_VERSION_1_3 && {
        let mut features13 = vk::PhysicalDeviceVulkan13Features::default();
        let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut features13);
        // SAFETY: as above; a 1.3 device knows the structure.
        unsafe { instance.get_physical_device_features2(device, &mut features) };
        features13.dynamic_rendering == vk::TRUE
    };
    // SAFETY: as above.
    let extensions = unsafe { instance.enumerate_device_extension_properties(device) }
        .map_err(|e| vk_error("vkEnumerateDeviceExtensionProperties", e))?;
    let has = |wanted: &CStr| extensions.iter().any(|e| e.extension_name_as_c_str() == Ok(wanted));
    let text = |bytes: Result<&CStr, _>| bytes.map(|s: &CStr| s.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(VulkanDevice {
        name: text(base.device_name_as_c_str()),
        kind: kind_text(base.device_type).to_owned(),
        driver: format!("{} {}", text(driver.driver_name_as_c_str()), text(driver.driver_info_as_c_str()))
            .trim()
            .to_owned(),
        api_version: version_text(base.api_version),
        device_uuid: id.device_uuid.iter().map(|b| format!("{b:02x}")).collect(),
        external_memory_fd: has(ash::khr::external_memory_fd::NAME),
        external_semaphore_fd: has(ash::khr::external_semaphore_fd::NAME),
        timeline_semaphore,
        dynamic_rendering,
        cuda_kernel_launch: has(ash::nv::cuda_kernel_launch::NAME),
    })
}

fn kind_text(kind: vk::PhysicalDeviceType) -> &'static str {
    match kind {
        vk::PhysicalDeviceType::DISCRETE_GPU => "discrete GPU",
        vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated GPU",
        vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual GPU",
        vk::PhysicalDeviceType::CPU => "CPU (software)",
        _ => "other",
    }
}

pub(crate) fn version_text(version: u32) -> String {
    format!("{}.{}.{}", vk::api_version_major(version), vk::api_version_minor(version), vk::api_version_patch(version))
}

/// A failed Vulkan call as an [`Error`], with a hint where the result has one.
pub(crate) fn vk_error(call: &'static str, result: vk::Result) -> Error {
    let hint = match result {
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY => Some("the GPU is out of memory: use fewer or smaller buffers"),
        vk::Result::ERROR_OUT_OF_HOST_MEMORY => Some("the host is out of memory"),
        vk::Result::ERROR_DEVICE_LOST => Some("the GPU stopped responding: restart the app"),
        _ => None,
    };
    Error::Vulkan { call, result: format!("{result}"), hint }
}

/// For unit tests: a Vulkan device, or `None` (said, "skipped") where there is none and
/// `INTEROP_LAB_REQUIRE_VULKAN` does not ask for one.
#[cfg(test)]
pub(crate) fn test_context() -> Option<std::rc::Rc<device::VulkanContext>> {
    match device::VulkanContext::new(&device::DeviceChoice::Any) {
        Ok(context) => Some(context),
        Err(error) if std::env::var_os("INTEROP_LAB_REQUIRE_VULKAN").is_some() => panic!("Vulkan: {error}"),
        Err(error) => {
            eprintln!("skipped: no Vulkan device here ({error})");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_device_opened_shares_one_instance_that_outlives_it() {
        // Devices come and go (every path switch); the instance stays, since destroying one
        // terminates the process's EGL displays on NVIDIA's driver.
        let Some(first) = test_context() else { return };
        let handle = first.instance_and_physical().0.handle();
        drop(first);
        let second = device::VulkanContext::new(&device::DeviceChoice::Any).expect("a second device");
        assert_eq!(second.instance_and_physical().0.handle(), handle, "the same instance, not a new one");
        // A request for fewer extensions than an instance has takes that instance too.
        let surface = Instance::shared(&[ash::khr::surface::NAME.as_ptr()]);
        if let Ok(surface) = surface {
            let none = Instance::shared(&[]).expect("an instance");
            assert!(Arc::ptr_eq(&none, &surface) || none.instance.handle() == handle, "an existing instance");
            let again = Instance::shared(&[ash::khr::surface::NAME.as_ptr()]).expect("the surface instance");
            assert!(Arc::ptr_eq(&again, &surface), "asked twice, made once");
        }
    }
}
