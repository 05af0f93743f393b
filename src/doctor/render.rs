//! `doctor`'s report as text for a terminal, one section after another: CUDA, the GL contexts,
//! the kernels, Vulkan, the environment and the verdict.

use std::fmt::Write;

use super::{GlCheck, Report};

/// The report as text for a terminal.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "interop-lab doctor\n");
    render_cuda(&mut out, report);
    render_egl_devices(&mut out, report);
    for check in std::iter::once(&report.headless_gl).chain(report.window_gl.as_ref()) {
        render_gl_check(&mut out, check);
    }
    render_kernels(&mut out, report);
    render_vulkan(&mut out, report);
    render_environment(&mut out, report);
    render_verdict(&mut out, report);
    out
}

/// The mark in front of a line that says whether the thing works.
fn mark(ok: bool) -> &'static str {
    if ok { "ok " } else { "-- " }
}

/// The driver, NVRTC and the CUDA devices.
fn render_cuda(out: &mut String, report: &Report) {
    let _ = writeln!(
        out,
        "{}CUDA driver: {}",
        mark(report.driver_cuda_version.is_some()),
        report
            .driver_cuda_version
            .as_deref()
            .map(|v| format!("supports CUDA {v}"))
            .unwrap_or_else(|| "not available".to_owned())
    );
    let _ = writeln!(
        out,
        "{}NVRTC: {}",
        mark(report.nvrtc_version.is_some()),
        report.nvrtc_version.as_deref().unwrap_or("not available")
    );
    for d in &report.devices {
        let _ = writeln!(
            out,
            "   device {}: {} (sm_{}{}), {} SMs, {:.1} GiB, {} MHz, PCI {}, UUID {}",
            d.ordinal,
            d.name,
            d.compute_capability.0,
            d.compute_capability.1,
            d.multiprocessors,
            d.total_memory_bytes as f64 / (1u64 << 30) as f64,
            d.clock_rate_khz / 1000,
            d.pci_bus_id,
            d.uuid
        );
    }
}

/// The EGL devices, and the CUDA device behind each.
fn render_egl_devices(out: &mut String, report: &Report) {
    for e in &report.egl_devices {
        let _ = writeln!(
            out,
            "   EGL device {}: {}{}{}",
            e.index,
            e.name.as_deref().or(e.vendor.as_deref()).unwrap_or("unnamed"),
            e.cuda_device.map(|c| format!(", CUDA device {c}")).unwrap_or_default(),
            if e.software { ", software" } else { "" }
        );
    }
}

/// One GL context: its strings, whether it can import memory and semaphores, which CUDA devices
/// run it, and whether Vulkan can present to such a window.
fn render_gl_check(out: &mut String, check: &GlCheck) {
    match &check.info {
        Some(info) => {
            let _ = writeln!(out, "ok GL {}: {} / {} / {}", check.kind, info.vendor, info.renderer, info.version);
            let missing: Vec<&str> = crate::gl::SHARING_EXTENSIONS
                .iter()
                .copied()
                .filter(|e| !info.sharing.iter().any(|s| s == e))
                .collect();
            let _ = match missing.as_slice() {
                [] => {
                    writeln!(out, "     imports memory and semaphores (GL_EXT_memory_object_fd, GL_EXT_semaphore_fd)")
                }
                _ => writeln!(
                    out,
                    "     lacks {}: --transfer external{} cannot run on it",
                    missing.join(", "),
                    if missing.iter().any(|e| e.contains("memory_object")) { "" } else { "-semaphores" }
                ),
            };
            match &check.cuda_devices {
                Some(devices) if !devices.is_empty() => {
                    let _ = writeln!(out, "ok   cuGLGetDevices: CUDA device(s) {devices:?} own this context");
                }
                Some(_) => {
                    let _ = writeln!(out, "--   cuGLGetDevices: no CUDA device owns this context");
                }
                None => {}
            }
        }
        None => {
            let _ = writeln!(out, "-- GL {}: {}", check.kind, check.error.as_deref().unwrap_or("not created"));
        }
    }
    match &check.vulkan_window {
        Some(Ok(found)) => {
            let _ = writeln!(out, "ok Vulkan {}: presents ({found}): --renderer vulkan opens here", check.kind);
        }
        Some(Err(why)) => {
            let _ = writeln!(out, "-- Vulkan {}: {why}; --renderer vulkan draws with OpenGL here", check.kind);
        }
        None => {}
    }
}

/// Each kernel: where it came from, or why it failed.
fn render_kernels(out: &mut String, report: &Report) {
    for k in &report.kernels {
        let _ = writeln!(
            out,
            "{}kernel {}: {}",
            mark(k.error.is_none()),
            k.file,
            match (&k.error, &k.target) {
                (Some(e), _) => e.clone(),
                (None, Some(t)) if k.cached => format!("{t}, from the cache"),
                (None, Some(t)) => format!("{t}, compiled in {:.0} ms", k.compile_ms),
                (None, None) => String::new(),
            }
        );
    }
}

/// Vulkan's loader and devices, and the verdict on the CUDA device.
fn render_vulkan(out: &mut String, report: &Report) {
    if let Some(probe) = &report.vulkan.probe {
        let _ = writeln!(out, "   Vulkan loader {}", probe.instance_version);
        for (index, v) in probe.devices.iter().enumerate() {
            let features: Vec<&str> = [
                (v.external_memory_fd, "external memory fd"),
                (v.external_semaphore_fd, "external semaphore fd"),
                (v.timeline_semaphore, "timeline semaphores"),
                (v.dynamic_rendering, "dynamic rendering (--renderer vulkan)"),
                (v.cuda_kernel_launch, "CUDA kernels in its command buffers (VK_NV_cuda_kernel_launch)"),
            ]
            .iter()
            .filter_map(|(has, name)| has.then_some(*name))
            .collect();
            let _ = writeln!(
                out,
                "   Vulkan device {index}: {} ({}, Vulkan {}, {}), UUID {}; {}",
                v.name,
                v.kind,
                v.api_version,
                v.driver,
                v.device_uuid,
                if features.is_empty() { "no sharing extensions".to_owned() } else { features.join(", ") }
            );
        }
    }
    let _ = writeln!(out, "{}Vulkan: {}", mark(report.vulkan.cuda_match.is_some()), report.vulkan.verdict);
}

/// The kernel cache, the session type and the environment variables that are set.
fn render_environment(out: &mut String, report: &Report) {
    if let Some(cache) = &report.kernel_cache {
        let _ = writeln!(out, "   kernel cache: {cache}");
    }
    let _ = writeln!(out, "   session: {}", report.session_type);
    for (name, value) in &report.environment {
        let _ = writeln!(out, "   {name}={value}");
    }
}

/// The transfer path, the problems with their fixes, and the exit code.
fn render_verdict(out: &mut String, report: &Report) {
    let _ = writeln!(out, "\ntransfer path: {} ({})", report.transfer.label(), report.reason);
    if report.problems.is_empty() {
        let _ = writeln!(out, "no problems found");
    }
    for p in &report.problems {
        let _ = writeln!(out, "\nproblem: {}\n    fix: {}", p.problem, p.fix);
    }
    let _ = writeln!(
        out,
        "\nexit code {}: {}",
        report.exit_code,
        match report.exit_code {
            0 => "GL interop works",
            1 => "the app runs, on a fallback path",
            _ => "the app cannot render",
        }
    );
}
