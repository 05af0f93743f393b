//! A Vulkan logical device with one queue, opened on the physical device a CUDA device is (same
//! UUID), or on any device when no CUDA runs (the CPU backend). Objects made from it hold it by
//! `Rc`, the way CUDA objects hold their context, so it is destroyed after the last of them.
#![allow(unsafe_code)]

use std::ffi::CStr;

use ash::vk;

use super::{Instance, VulkanDevice, vk_error};
use crate::error::{Error, Result};

/// Which physical device to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The device with this UUID (32 hex digits, `cuDeviceGetUuid`), with everything needed to
    /// share memory and semaphores with CUDA.
    CudaDevice {
        /// The CUDA device's UUID.
        uuid: String,
        /// Its name, for messages.
        name: String,
    },
    /// The first device with timeline semaphores (the CPU backend: nothing is shared with CUDA).
    Any,
}

/// A logical device, its queue and what the app asks of its physical device. Waits for the device
/// to go idle and destroys it when the last `Rc` goes (the instance stays: `Instance::shared`).
pub struct VulkanContext {
    // Drop destroys the device, then the surface; the instance is the process's and stays.
    window: Option<WindowSurface>,
    external_memory: Option<ash::khr::external_memory_fd::Device>,
    external_semaphore: Option<ash::khr::external_semaphore_fd::Device>,
    device: ash::Device,
    queue: vk::Queue,
    queue_family: u32,
    memory: vk::PhysicalDeviceMemoryProperties,
    timestamp_period_ns: f32,
    /// Reads the device's timestamp clock from the host (`VK_KHR/EXT_calibrated_timestamps`).
    gpu_clock: Option<GpuClock>,
    max_image_size: u32,
    /// Whether the queue writes timestamps.
    timestamps: bool,
    /// Whether RGBA32F images can be sampled with linear filtering (RGBA8 always can).
    filter_float: bool,
    dynamic_rendering: bool,
    description: VulkanDevice,
    physical: vk::PhysicalDevice,
    instance: std::sync::Arc<Instance>,
}

/// `vkGetCalibratedTimestamps*`, from whichever extension the device offers.
enum GpuClock {
    Khr(ash::khr::calibrated_timestamps::Device),
    Ext(ash::ext::calibrated_timestamps::Device),
}

/// The device's timestamp clock read from the host.
#[derive(Debug, Clone, Copy)]
pub struct GpuClockReading {
    /// Host time at the middle of the read, µs on [`crate::stats::clock_us`]'s clock.
    pub host_us: f64,
    /// The device's timestamp then, in µs (ticks × the timestamp period).
    pub device_us: f64,
    /// Half the host time the read took plus the driver's stated deviation, µs.
    pub error_us: f64,
}

/// A window's surface and the functions that present to it (the device has `VK_KHR_swapchain`).
pub(crate) struct WindowSurface {
    pub(crate) surface: vk::SurfaceKHR,
    pub(crate) surfaces: ash::khr::surface::Instance,
    pub(crate) swapchains: ash::khr::swapchain::Device,
}

/// The raw handles of the window a device is to present to.
#[derive(Clone, Copy)]
pub struct WindowHandles {
    /// The display connection.
    pub display: winit::raw_window_handle::RawDisplayHandle,
    /// The window.
    pub window: winit::raw_window_handle::RawWindowHandle,
}

impl std::fmt::Debug for VulkanContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VulkanContext").field("device", &self.description.name).finish_non_exhaustive()
    }
}

impl VulkanContext {
    /// Opens the loader and a device as `choice` asks, with timeline semaphores and, where the
    /// device has them, external memory and semaphore file descriptors.
    pub fn new(choice: &DeviceChoice) -> Result<std::rc::Rc<Self>> {
        Self::open(choice, None)
    }

    /// As [`Self::new`], also presenting to `window`: the instance gets the window system's
    /// surface extensions, the queue must be able to present to the window's surface, and the
    /// device gets `VK_KHR_swapchain`.
    pub fn with_window(choice: &DeviceChoice, window: WindowHandles) -> Result<std::rc::Rc<Self>> {
        Self::open(choice, Some(window))
    }

    fn open(choice: &DeviceChoice, window: Option<WindowHandles>) -> Result<std::rc::Rc<Self>> {
        let surface_extensions = match window {
            Some(handles) => ash_window::enumerate_required_extensions(handles.display)
                .map_err(|e| vk_error("vkEnumerateInstanceExtensionProperties (surface)", e))?,
            None => &[],
        };
        let instance = Instance::shared(surface_extensions)?;
        // The surface, destroyed by the guard below if anything fails before the context owns it.
        let surface = create_surface(&instance, window)?;
        let surfaces = ash::khr::surface::Instance::new(&instance.entry, &instance.instance);
        let surface_guard = crate::guard::Guard::new(surface, |surface: Option<vk::SurfaceKHR>| {
            if let Some(surface) = surface {
                // SAFETY: made above from this instance; nothing uses it yet.
                unsafe { surfaces.destroy_surface(surface, None) };
            }
        });
        if instance.version < vk::API_VERSION_1_2 {
            return Err(Error::Unavailable(format!(
                "the Vulkan loader is version {}, and timeline semaphores need 1.2: update libvulkan1",
                super::version_text(instance.version)
            )));
        }
        let devices = instance.devices()?;
        let (physical, description) = pick(&devices, choice)?;
        let (physical, description) = (*physical, description.clone());

        // SAFETY: a device of this live instance.
        let families = unsafe { instance.instance.get_physical_device_queue_family_properties(physical) };
        let queue_family = queue_family(&families, &description.name, *surface_guard, |family, surface| {
            // SAFETY: a family index of this device and a live surface of this instance.
            unsafe { surfaces.get_physical_device_surface_support(physical, family, surface).unwrap_or(false) }
        })?;

        let clock_extension = clock_extension(&instance, physical);
        let dynamic_rendering = description.dynamic_rendering;
        // SAFETY: a device of this live instance.
        let float_features = unsafe {
            instance.instance.get_physical_device_format_properties(physical, vk::Format::R32G32B32A32_SFLOAT)
        };
        let filter_float =
            float_features.optimal_tiling_features.contains(vk::FormatFeatureFlags::SAMPLED_IMAGE_FILTER_LINEAR);
        let swapchain = surface_guard.is_some();
        let device = create_device(&instance, physical, &description, queue_family, swapchain, clock_extension)?;
        // SAFETY: queue 0 of a family the device was created with.
        let queue = unsafe { device.get_device_queue(queue_family, 0) };
        // SAFETY: a device of this live instance.
        let memory = unsafe { instance.instance.get_physical_device_memory_properties(physical) };
        // SAFETY: as above.
        let limits = unsafe { instance.instance.get_physical_device_properties(physical) }.limits;
        let external_memory = description
            .external_memory_fd
            .then(|| ash::khr::external_memory_fd::Device::new(&instance.instance, &device));
        let external_semaphore = description
            .external_semaphore_fd
            .then(|| ash::khr::external_semaphore_fd::Device::new(&instance.instance, &device));
        let gpu_clock = clock_extension.map(|name| {
            if name == ash::khr::calibrated_timestamps::NAME {
                GpuClock::Khr(ash::khr::calibrated_timestamps::Device::new(&instance.instance, &device))
            } else {
                GpuClock::Ext(ash::ext::calibrated_timestamps::Device::new(&instance.instance, &device))
            }
        });
        log::debug!("Vulkan device: {} ({}), queue family {queue_family}", description.name, description.driver);
        let window = surface_guard.keep().map(|surface| WindowSurface {
            surface,
            surfaces,
            swapchains: ash::khr::swapchain::Device::new(&instance.instance, &device),
        });
        Ok(std::rc::Rc::new(Self {
            window,
            external_memory,
            external_semaphore,
            device,
            queue,
            queue_family,
            memory,
            timestamp_period_ns: limits.timestamp_period,
            gpu_clock,
            max_image_size: limits.max_image_dimension2_d,
            timestamps: families[queue_family as usize].timestamp_valid_bits > 0 && limits.timestamp_period > 0.0,
            filter_float,
            dynamic_rendering,
            description,
            physical,
            instance,
        }))
    }

    /// The window surface this device presents to, when it was opened with one.
    pub(crate) fn window(&self) -> Result<&WindowSurface> {
        self.window
            .as_ref()
            .ok_or_else(|| Error::InvalidInput("this Vulkan device was opened without a window".to_owned()))
    }

    /// The instance and physical device (for libraries that make their own objects on them).
    pub(crate) fn instance_and_physical(&self) -> (&ash::Instance, vk::PhysicalDevice) {
        (&self.instance.instance, self.physical)
    }

    /// The device's functions.
    pub fn device(&self) -> &ash::Device {
        &self.device
    }

    /// The one queue everything is submitted to.
    pub fn queue(&self) -> vk::Queue {
        self.queue
    }

    /// Its family.
    pub fn queue_family(&self) -> u32 {
        self.queue_family
    }

    /// What the physical device is.
    pub fn description(&self) -> &VulkanDevice {
        &self.description
    }

    /// Whether the renderer can draw on this device (dynamic rendering, Vulkan 1.3).
    pub fn can_render(&self) -> bool {
        self.dynamic_rendering
    }

    /// Whether sampled images of `format` can be filtered linearly.
    pub fn can_filter_linearly(&self, format: vk::Format) -> bool {
        format != vk::Format::R32G32B32A32_SFLOAT || self.filter_float
    }

    /// The largest width or height of a 2D image (`maxImageDimension2D`).
    pub fn max_image_size(&self) -> u32 {
        self.max_image_size
    }

    /// Whether the queue writes timestamps (GPU times of Vulkan work).
    pub fn timestamps(&self) -> bool {
        self.timestamps
    }

    /// Reads the device's timestamp clock between two host clock reads; `None` where the device
    /// offers no calibrated timestamps (or the read failed).
    pub fn read_gpu_clock(&self) -> Option<GpuClockReading> {
        let clock = self.gpu_clock.as_ref()?;
        let info = [vk::CalibratedTimestampInfoKHR::default().time_domain(vk::TimeDomainKHR::DEVICE)];
        let before = std::time::Instant::now();
        // SAFETY: the extension is enabled on this device; one valid info, one result.
        let read = unsafe {
            match clock {
                GpuClock::Khr(device) => device.get_calibrated_timestamps(&info),
                GpuClock::Ext(device) => device.get_calibrated_timestamps(&info),
            }
        };
        let after = std::time::Instant::now();
        let (stamps, deviation_ns) = match read {
            Ok(read) => read,
            Err(error) => {
                log::debug!("vkGetCalibratedTimestamps failed: {error}");
                return None;
            }
        };
        let half = (after - before) / 2;
        Some(GpuClockReading {
            host_us: crate::stats::clock_us(before + half),
            device_us: *stamps.first()? as f64 * f64::from(self.timestamp_period_ns) / 1e3,
            error_us: half.as_secs_f64() * 1e6 + deviation_ns as f64 / 1e3,
        })
    }

    /// Nanoseconds per timestamp tick.
    pub fn timestamp_period_ns(&self) -> f32 {
        self.timestamp_period_ns
    }

    /// `VK_KHR_external_memory_fd`, or why it is missing.
    pub(crate) fn external_memory(&self) -> Result<&ash::khr::external_memory_fd::Device> {
        self.external_memory.as_ref().ok_or_else(|| self.missing("VK_KHR_external_memory_fd"))
    }

    /// `VK_KHR_external_semaphore_fd`, or why it is missing.
    pub(crate) fn external_semaphore(&self) -> Result<&ash::khr::external_semaphore_fd::Device> {
        self.external_semaphore.as_ref().ok_or_else(|| self.missing("VK_KHR_external_semaphore_fd"))
    }

    fn missing(&self, extension: &str) -> Error {
        Error::Unavailable(format!(
            "Vulkan device {} ({}) lacks {extension}, so it cannot share with CUDA: use the NVIDIA driver's Vulkan ICD",
            self.description.name, self.description.driver
        ))
    }

    /// The first memory type allowed by `type_bits` with all of `flags`.
    pub(crate) fn memory_type(&self, type_bits: u32, flags: vk::MemoryPropertyFlags) -> Option<u32> {
        let types = &self.memory.memory_types[..self.memory.memory_type_count as usize];
        types
            .iter()
            .enumerate()
            .find(|(index, kind)| type_bits & (1 << index) != 0 && kind.property_flags.contains(flags))
            .map(|(index, _)| index as u32)
    }
}

impl Drop for VulkanContext {
    fn drop(&mut self) {
        // SAFETY: every object made from the device holds an Rc to this context, so none is left;
        // waiting first means no submitted work still uses the device.
        unsafe {
            if let Err(error) = self.device.device_wait_idle() {
                log::warn!("vkDeviceWaitIdle before destroying the Vulkan device: {error}");
            }
            self.device.destroy_device(None);
            if let Some(window) = &self.window {
                window.surfaces.destroy_surface(window.surface, None);
            }
        }
    }
}

/// The physical device `choice` names, or why there is none.
fn pick<'a>(
    devices: &'a [(vk::PhysicalDevice, VulkanDevice)],
    choice: &DeviceChoice,
) -> Result<&'a (vk::PhysicalDevice, VulkanDevice)> {
    if devices.is_empty() {
        return Err(Error::Unavailable(
            "the Vulkan loader found no device: install a Vulkan driver (the NVIDIA driver's ICD, or mesa-vulkan-drivers)"
                .to_owned(),
        ));
    }
    let listed =
        || devices.iter().map(|(_, d)| format!("{} (UUID {})", d.name, d.device_uuid)).collect::<Vec<_>>().join(", ");
    match choice {
        DeviceChoice::CudaDevice { uuid, name } => {
            let found = devices.iter().find(|(_, d)| d.device_uuid.eq_ignore_ascii_case(uuid)).ok_or_else(|| {
                Error::Unavailable(format!(
                    "no Vulkan device is the CUDA device {name} (UUID {uuid}); Vulkan has {}: install the NVIDIA \
                     driver's Vulkan ICD, or point VK_DRIVER_FILES at its nvidia_icd.json",
                    listed()
                ))
            })?;
            let missing = found.1.missing_for_cuda();
            if !missing.is_empty() {
                return Err(Error::Unavailable(format!(
                    "Vulkan device {} is the CUDA device but lacks {}: update the NVIDIA driver",
                    found.1.name,
                    missing.join(", ")
                )));
            }
            Ok(found)
        }
        // A device the renderer can draw with first (dynamic rendering), else any with timelines.
        DeviceChoice::Any => devices
            .iter()
            .find(|(_, d)| d.timeline_semaphore && d.dynamic_rendering)
            .or_else(|| devices.iter().find(|(_, d)| d.timeline_semaphore))
            .ok_or_else(|| {
                Error::Unavailable(format!("no Vulkan device has timeline semaphores (Vulkan 1.2): {}", listed()))
            }),
    }
}

/// The logical device with one queue of `queue_family`, the extensions the app uses that the
/// device has (external memory and semaphores, the swapchain with a window, the clock), timeline
/// semaphores, and dynamic rendering (1.3: drawing without render pass objects) and large points
/// (sprites wider than a pixel) where the device has them. Destroyed by the context's Drop.
fn create_device(
    instance: &Instance,
    physical: vk::PhysicalDevice,
    description: &VulkanDevice,
    queue_family: u32,
    swapchain: bool,
    clock_extension: Option<&CStr>,
) -> Result<ash::Device> {
    let mut extensions: Vec<&CStr> = Vec::new();
    if description.external_memory_fd {
        extensions.push(ash::khr::external_memory_fd::NAME);
    }
    if description.external_semaphore_fd {
        extensions.push(ash::khr::external_semaphore_fd::NAME);
    }
    if swapchain {
        extensions.push(ash::khr::swapchain::NAME);
    }
    extensions.extend(clock_extension);
    let extension_names: Vec<*const std::ffi::c_char> = extensions.iter().map(|e| e.as_ptr()).collect();
    // SAFETY: a device of this live instance.
    let large_points = unsafe { instance.instance.get_physical_device_features(physical) }.large_points == vk::TRUE;
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(queue_family).queue_priorities(&priorities)];
    let mut features12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
    let mut features13 = vk::PhysicalDeviceVulkan13Features::default().dynamic_rendering(true);
    let base = vk::PhysicalDeviceFeatures::default().large_points(large_points);
    let mut create_info = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_extension_names(&extension_names)
        .enabled_features(&base)
        .push_next(&mut features12);
    if description.dynamic_rendering {
        create_info = create_info.push_next(&mut features13);
    }
    // SAFETY: valid create info whose pointers outlive the call.
    unsafe { instance.instance.create_device(physical, &create_info, None) }.map_err(|e| vk_error("vkCreateDevice", e))
}

/// The window's surface (`None` offscreen).
fn create_surface(instance: &Instance, window: Option<WindowHandles>) -> Result<Option<vk::SurfaceKHR>> {
    let Some(handles) = window else { return Ok(None) };
    // SAFETY: handles of a live window (the caller keeps it open longer than the context).
    unsafe { ash_window::create_surface(&instance.entry, &instance.instance, handles.display, handles.window, None) }
        .map(Some)
        .map_err(|e| vk_error("vkCreate*SurfaceKHR", e))
}

/// The queue family to use: graphics and compute that presents to `surface` (when there is one,
/// asked through `presents(family, surface)`), else offscreen any compute family.
fn queue_family(
    families: &[vk::QueueFamilyProperties],
    device_name: &str,
    surface: Option<vk::SurfaceKHR>,
    presents: impl Fn(u32, vk::SurfaceKHR) -> bool,
) -> Result<u32> {
    let wanted = vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE;
    let presents = |family: usize| surface.is_none_or(|surface| presents(family as u32, surface));
    let family = families
        .iter()
        .enumerate()
        .position(|(i, f)| f.queue_flags.contains(wanted) && presents(i))
        .or_else(|| {
            let any = families.iter().position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE));
            any.filter(|_| surface.is_none())
        })
        .ok_or_else(|| match surface {
            Some(_) => Error::Unavailable(format!(
                "Vulkan device {device_name} cannot present to this window (no queue presents to its surface; a \
                 display served by another GPU or by software, e.g. Xvfb, can do that): use --renderer gl"
            )),
            None => Error::Unavailable(format!("Vulkan device {device_name} has no compute queue")),
        })?;
    Ok(family as u32)
}

/// The calibrated-timestamps extension (KHR, else EXT) the device offers and whose time domains
/// include the device's own clock (nearly always so), if any.
fn clock_extension(instance: &Instance, physical: vk::PhysicalDevice) -> Option<&'static CStr> {
    // SAFETY: a device of this live instance.
    let offered = unsafe { instance.instance.enumerate_device_extension_properties(physical) }.unwrap_or_default();
    let offers = |name: &CStr| offered.iter().any(|e| e.extension_name_as_c_str() == Ok(name));
    let reads_device_clock = |name: &CStr| {
        let (entry, vk_instance) = (&instance.entry, &instance.instance);
        // SAFETY: a physical-device query of an extension this device offers.
        let domains = unsafe {
            if name == ash::khr::calibrated_timestamps::NAME {
                ash::khr::calibrated_timestamps::Instance::new(entry, vk_instance)
                    .get_physical_device_calibrateable_time_domains(physical)
            } else {
                ash::ext::calibrated_timestamps::Instance::new(entry, vk_instance)
                    .get_physical_device_calibrateable_time_domains(physical)
            }
        };
        domains.is_ok_and(|domains| domains.contains(&vk::TimeDomainKHR::DEVICE))
    };
    [ash::khr::calibrated_timestamps::NAME, ash::ext::calibrated_timestamps::NAME]
        .into_iter()
        .find(|&name| offers(name) && reads_device_clock(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(name: &str, uuid: &str, shares: bool) -> (vk::PhysicalDevice, VulkanDevice) {
        let description = VulkanDevice {
            name: name.to_owned(),
            kind: "discrete GPU".to_owned(),
            driver: "test".to_owned(),
            api_version: "1.3.0".to_owned(),
            device_uuid: uuid.to_owned(),
            external_memory_fd: shares,
            external_semaphore_fd: shares,
            timeline_semaphore: true,
            dynamic_rendering: true,
            cuda_kernel_launch: false,
        };
        (vk::PhysicalDevice::null(), description)
    }

    #[test]
    fn the_cuda_device_is_found_by_uuid_and_a_mismatch_names_both_sides() {
        let devices = [device("software", "00", true), device("H200", "4680973C", true)];
        let choice = DeviceChoice::CudaDevice { uuid: "4680973c".to_owned(), name: "H200".to_owned() };
        assert_eq!(pick(&devices, &choice).map(|d| d.1.name.as_str()).ok(), Some("H200"));

        let other = DeviceChoice::CudaDevice { uuid: "ffff".to_owned(), name: "A100".to_owned() };
        let message = pick(&devices, &other).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message.contains("A100") && message.contains("ffff") && message.contains("H200 (UUID 4680973C)"),
            "{message}"
        );
        assert!(message.contains("VK_DRIVER_FILES"), "names the fix: {message}");
    }

    #[test]
    fn a_device_that_cannot_share_is_refused_with_what_it_lacks() {
        let devices = [device("H200", "aa", false)];
        let choice = DeviceChoice::CudaDevice { uuid: "aa".to_owned(), name: "H200".to_owned() };
        let message = pick(&devices, &choice).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("VK_KHR_external_memory_fd") && !message.contains("timeline"), "{message}");
        assert!(pick(&devices, &DeviceChoice::Any).is_ok(), "the CPU backend shares nothing");
        let mut old = device("old", "bb", true);
        old.1.dynamic_rendering = false;
        let both = [old, device("new", "cc", true)];
        let chosen = pick(&both, &DeviceChoice::Any).map(|d| d.1.name.as_str()).ok();
        assert_eq!(chosen, Some("new"), "a device the renderer can draw with comes first");
        assert!(pick(&[], &DeviceChoice::Any).is_err());
    }
}
