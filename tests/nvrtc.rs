//! NVRTC, which runs without a GPU: every kernel of the project compiles for the architectures the
//! app targets, a broken kernel reports NVRTC's log with file and line, and the cache works.
//! Needs libnvrtc on the loader path; CI installs it and sets INTEROP_LAB_REQUIRE_NVRTC=1.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use interop_lab::Error;
use interop_lab::cuda::driver;
use interop_lab::cuda::module::{Compiler, compile_with_nvrtc, supported_archs};

fn nvrtc() -> bool {
    common::available(driver::nvrtc_library_present(), "NVRTC (libnvrtc.so.13)", "INTEROP_LAB_REQUIRE_NVRTC")
}

#[test]
fn every_kernel_compiles_for_every_target_architecture() {
    if !nvrtc() {
        return;
    }
    let version = driver::nvrtc_version().expect("NVRTC version");
    let supported = supported_archs().expect("supported architectures");
    // Turing to Hopper: what the app is built for; each must be supported by the pinned NVRTC.
    let targets = [75, 80, 86, 89, 90];
    for arch in targets {
        assert!(supported.contains(&arch), "NVRTC {version:?} does not support sm_{arch}: {supported:?}");
    }
    for file in interop_lab::kernels::all() {
        for arch in targets {
            let (image, log) = compile_with_nvrtc(file.name, file.embedded, &format!("sm_{arch}"), &[], version)
                .unwrap_or_else(|e| panic!("{} for sm_{arch}: {e}", file.name));
            assert!(image.starts_with(b"\x7fELF"), "{} for sm_{arch}: a CUBIN is an ELF image", file.name);
            assert!(!log.contains("error"), "{} for sm_{arch}: {log}", file.name);
        }
        let (ptx, _) = compile_with_nvrtc(file.name, file.embedded, "compute_90", &[], version).expect("PTX");
        let text = String::from_utf8_lossy(&ptx);
        assert!(text.contains(".target sm_90"), "{}: PTX for compute_90", file.name);
    }
}

#[test]
fn a_kernel_that_does_not_compile_reports_file_and_line() {
    if !nvrtc() {
        return;
    }
    let version = driver::nvrtc_version().expect("NVRTC version");
    let source = "extern \"C\" __global__ void broken(float* out) {\n    out[0] = not_declared;\n}\n";
    let error = compile_with_nvrtc("broken.cu", source, "sm_90", &[], version).expect_err("must fail");
    let Error::Compile { file, log, .. } = &error else { panic!("expected a compile error, got {error}") };
    assert_eq!(file, "broken.cu");
    assert!(log.contains("broken.cu(2)"), "NVRTC's log names file and line: {log}");
    assert!(log.contains("not_declared"), "{log}");
    assert!(error.to_string().contains("compiling broken.cu failed"), "{error}");
}

#[test]
fn second_compile_comes_from_the_cache() {
    if !nvrtc() {
        return;
    }
    let cache = std::env::temp_dir().join(format!("interop-lab-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let compiler = Compiler::new((9, 0), None, Some(cache.clone())).expect("compiler");
    let file = interop_lab::kernels::all()[0];
    let first = compiler.compile(&file, &[]).expect("first compile");
    assert!(!first.from_cache);
    let second = compiler.compile(&file, &[]).expect("second compile");
    assert!(second.from_cache, "the second start compiles nothing");
    assert_eq!(first.image, second.image);
    let other = compiler.compile(&file, &["-DINTEROP_LAB_TEST=1".to_owned()]).expect("other options");
    assert!(!other.from_cache, "other options are another cache entry");
    let entries = std::fs::read_dir(&cache).expect("cache dir").count();
    assert_eq!(entries, 2, "one file per (source, arch, options)");
    std::fs::remove_dir_all(&cache).ok();
}

#[test]
fn nbody_variants_the_panel_offers_compile() {
    if !nvrtc() {
        return;
    }
    use interop_lab::demos::nbody::kernels::{KERNEL, Precision, Variant};
    let version = driver::nvrtc_version().expect("NVRTC version");
    // The corners of the panel's choices, in both precisions.
    let shapes = [(64u32, 64u32, 1u32, 1u32), (256, 256, 8, 2), (1024, 2048, 32, 8), (128, 512, 16, 4)];
    for precision in [Precision::F32, Precision::F64] {
        for (block_size, tile_size, unroll, bodies_per_thread) in shapes {
            let variant = Variant { precision, block_size, tile_size, unroll, bodies_per_thread };
            let (image, log) = compile_with_nvrtc(KERNEL.name, KERNEL.embedded, "sm_90", &variant.options(), version)
                .unwrap_or_else(|e| panic!("{variant:?}: {e}"));
            assert!(image.starts_with(b"\x7fELF"), "{variant:?}");
            assert!(!log.contains("warning"), "{variant:?}: {log}");
        }
    }
}

#[test]
fn blur_formats_and_tile_widths_compile() {
    if !nvrtc() {
        return;
    }
    let version = driver::nvrtc_version().expect("NVRTC version");
    let kernel = interop_lab::demos::blur::KERNEL;
    for format in ["", "-DFORMAT_F32"] {
        for pixels_per_thread in [1, 2, 4, 8] {
            let mut options = vec![format!("-DPIXELS_PER_THREAD={pixels_per_thread}")];
            if !format.is_empty() {
                options.push(format.to_owned());
            }
            let (image, log) = compile_with_nvrtc(kernel.name, kernel.embedded, "sm_90", &options, version)
                .unwrap_or_else(|e| panic!("{options:?}: {e}"));
            assert!(image.starts_with(b"\x7fELF"), "{options:?}");
            assert!(!log.contains("warning"), "{options:?}: {log}");
            // Every entry point BlurKernels::load looks up is in the image, the recursive ones too.
            for name in [
                "blur_naive_to_surface",
                "blur_gaussian_second_to_surface",
                "blur_box_second_to_surface",
                "blur_recursive_first",
                "blur_recursive_second_to_buffer",
                "blur_recursive_second_to_surface",
            ] {
                assert!(image.windows(name.len()).any(|w| w == name.as_bytes()), "{options:?}: {name} missing");
            }
        }
    }
}

#[test]
fn nbody_tree_compiles_without_warnings_with_every_entry_point() {
    if !nvrtc() {
        return;
    }
    let version = driver::nvrtc_version().expect("NVRTC version");
    let kernel = interop_lab::demos::nbody::tree::gpu::KERNEL;
    for arch in ["sm_75", "sm_90"] {
        let options = ["--ftz=true".to_owned()];
        let (image, log) = compile_with_nvrtc(kernel.name, kernel.embedded, arch, &options, version)
            .unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert!(!log.contains("warning"), "{arch}: {log}");
        // Every entry point GpuTree::new looks up is in the image.
        for name in [
            "tree_bounds_partial",
            "tree_bounds_final",
            "tree_codes",
            "radix_histogram",
            "radix_scatter",
            "scan_blocks",
            "scan_block_sums",
            "scan_add_block_sums",
            "tree_karras",
            "tree_leaves",
            "tree_moments",
            "tree_walk",
        ] {
            assert!(image.windows(name.len()).any(|w| w == name.as_bytes()), "{arch}: {name} missing");
        }
    }
}
