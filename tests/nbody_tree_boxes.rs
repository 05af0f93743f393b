//! The tree on screen (`--draw-tree`): the boxes a step writes into the overlay's shared buffer
//! are the boxes of the tree of the bodies it stepped, level by level, and nothing else, output
//! poisoned first; the lines change the picture on both renderers. The CPU backend runs here
//! (on Mesa); CUDA's kernel writes the buffer through every transfer path on the GPU machine.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use common::{binary, temp_dir};
use interop_lab::demo_kit::{Demo, DemoEnv};
use interop_lab::demos::nbody::presets::Preset;
use interop_lab::demos::nbody::tree::Method;
use interop_lab::demos::nbody::tree::boxes::{self, VERTICES_PER_BOX};
use interop_lab::demos::nbody::tree::build::Tree;
use interop_lab::demos::nbody::{NBody, NBodySettings};
use interop_lab::graphics::Graphics;
use interop_lab::runtime::{BackendRequest, CudaOptions};
use interop_lab::transfer::TransferKind;

const LEVELS: u32 = 6;

fn settings(n: u32) -> NBodySettings {
    NBodySettings {
        bodies: Some(n),
        preset: Preset::Collision,
        seed: 3,
        method: Method::Tree,
        energy_every: 0,
        draw_tree: true,
        tree_levels: LEVELS,
        ..NBodySettings::default()
    }
}

/// One box: its 24 vertices.
type Box24 = Vec<[f32; 4]>;

/// The boxes of `vertices` that a step filled (w > 0), after checking that every vertex is
/// finite and every slot is either filled or empty (all zeros) as a whole.
fn filled_boxes(vertices: &[[f32; 4]]) -> Vec<Box24> {
    assert!(vertices.iter().flatten().all(|v| v.is_finite()), "a vertex is NaN or infinite: a slot was not written");
    let mut filled = Vec::new();
    for slot in vertices.chunks(VERTICES_PER_BOX) {
        if slot.iter().all(|v| *v == [0.0; 4]) {
            continue;
        }
        assert!(slot.iter().all(|v| v[3] >= 1.0 && v[3] == slot[0][3]), "a slot mixes levels or holds w = 0: {slot:?}");
        filled.push(slot.to_vec());
    }
    filled
}

/// The boxes the CPU tree of `positions` gives for the top `levels` levels.
fn expected_boxes(positions: &[[f64; 4]], levels: u32) -> (Vec<Box24>, f32) {
    let mut tree = Tree::default();
    tree.build(positions);
    let n = positions.len() as u32;
    let mut vertices = vec![[0.0f32; 4]; boxes::capacity(levels, n) as usize * VERTICES_PER_BOX];
    boxes::write(&tree, levels, &mut vertices);
    let root = &tree.moments[0];
    let extent = (0..3).map(|k| root.high[k] - root.low[k]).fold(0.0, f64::max) as f32;
    (filled_boxes(&vertices), extent)
}

/// How many of `expected` have a box in `drawn` at the same level within `tolerance` at every
/// vertex (each drawn box matched once).
fn matched(drawn: &[Box24], expected: &[Box24], tolerance: f32) -> usize {
    let mut taken = vec![false; drawn.len()];
    let close = |a: &Box24, b: &Box24| {
        a.iter().zip(b).all(|(p, q)| p[3] == q[3] && (0..3).all(|k| (p[k] - q[k]).abs() <= tolerance))
    };
    let mut count = 0;
    for wanted in expected {
        if let Some(index) = (0..drawn.len()).find(|&i| !taken[i] && close(&drawn[i], wanted)) {
            taken[index] = true;
            count += 1;
        }
    }
    count
}

/// Steps `nbody` three times, the overlay poisoned before each, and returns the boxes drawn,
/// the boxes the CPU tree of the bodies gives, and how many of those match (within `tolerance`
/// of the root box's size).
fn step_and_compare(nbody: &mut NBody, graphics: Graphics<'_>, tolerance: f32) -> (Vec<Box24>, Vec<Box24>, usize) {
    nbody.step(graphics, 0, 0.0).expect("first step: the overlay's buffer is made");
    for frame in 1..4 {
        nbody.poison_next_output(graphics).expect("poison");
        nbody.step(graphics, frame, 0.0).expect("step");
    }
    let vertices = nbody.read_tree_boxes(graphics).expect("read").expect("the overlay was written");
    assert_eq!(vertices.len(), boxes::capacity(LEVELS, nbody.len()) as usize * VERTICES_PER_BOX);
    let bodies = nbody.read_bodies(graphics).expect("read the bodies");
    let drawn = filled_boxes(&vertices);
    let (expected, extent) = expected_boxes(&bodies.positions, LEVELS);
    let count = matched(&drawn, &expected, tolerance * extent);
    (drawn, expected, count)
}

#[test]
fn the_cpu_backend_draws_the_boxes_of_the_tree_it_stepped_and_stops_when_asked() {
    let context = interop_lab::gl::context::headless::HeadlessGl::new(None).expect("an EGL device (Mesa)");
    let graphics = Graphics::Gl(context.gl());
    let env = DemoEnv { graphics, cuda: None, transfer: TransferKind::Cpu, window: false };
    let mut nbody = NBody::new(&env, settings(3000)).expect("tree demo on the CPU");
    let (drawn, expected, count) = step_and_compare(&mut nbody, graphics, 0.0);
    // The same tree from the same floats: the same boxes, exactly; up to 2^6 − 1 of them (fewer
    // where a node has a lone body as a child: a leaf has no box).
    assert!(expected.len() > 31 && expected.len() <= 63, "{} boxes in 6 levels", expected.len());
    assert_eq!((drawn.len(), count), (expected.len(), expected.len()));
    // Off: the buffer goes, nothing is drawn; on again with other levels: it comes back.
    nbody.draw_tree(None);
    nbody.step(graphics, 10, 0.0).expect("step");
    assert!(nbody.read_tree_boxes(graphics).expect("read").is_none(), "the overlay is off");
    nbody.draw_tree(Some(2));
    nbody.step(graphics, 11, 0.0).expect("step");
    let vertices = nbody.read_tree_boxes(graphics).expect("read").expect("on again");
    assert_eq!(filled_boxes(&vertices).len(), 3, "two levels: the root and its children");
    Box::new(nbody).destroy(graphics);
}

/// The picture of a headless run with and without `--draw-tree`, and the pixels that differ.
fn overlay_pixels(renderer: &str) -> Option<usize> {
    let dir = temp_dir(&format!("tree-boxes-{renderer}"));
    let shot = |name: &str, extra: &[&str]| {
        let path = dir.join(name);
        let output = binary()
            .args(["nbody", "--headless", "--backend", "cpu", "--renderer", renderer, "--method", "tree"])
            .args(["--bodies", "4096", "--frames", "3", "--size", "320x200", "--screenshot"])
            .arg(&path)
            .args(extra)
            .output()
            .expect("run");
        let said = String::from_utf8_lossy(&output.stderr).into_owned();
        (output.status.success(), said, path)
    };
    let (plain_ok, said, plain) = shot("plain.png", &[]);
    if !plain_ok && renderer == "vulkan" && !common::available(false, "a Vulkan driver", "INTEROP_LAB_REQUIRE_VULKAN") {
        eprintln!("{said}");
        return None;
    }
    assert!(plain_ok, "{said}");
    let (boxed_ok, said, boxed) = shot("boxes.png", &["--draw-tree", "--tree-levels", "4"]);
    assert!(boxed_ok, "{said}");
    let a = image::open(&plain).expect("png").to_rgba8();
    let b = image::open(&boxed).expect("png").to_rgba8();
    let differing = a.pixels().zip(b.pixels()).filter(|(p, q)| p != q).count();
    std::fs::remove_dir_all(&dir).ok();
    Some(differing)
}

#[test]
fn the_boxes_are_drawn_as_lines_over_the_bodies_on_both_renderers() {
    for renderer in ["gl", "vulkan"] {
        let Some(differing) = overlay_pixels(renderer) else { continue };
        eprintln!("{renderer}: {differing} pixels differ with the tree drawn");
        // 15 boxes of 12 edges across a 320×200 view: hundreds of pixels at least.
        assert!(differing > 300, "{renderer}: only {differing} pixels changed with the tree drawn");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn cuda_writes_the_boxes_of_its_tree_through_every_path() {
    let (context, selection) =
        common::gpu_setup(&CudaOptions { backend: BackendRequest::Cuda, ..CudaOptions::default() });
    let gl = context.gl().clone();
    let (vulkan, cuda) = common::vulkan_cuda_setup([64, 64]);
    let n = 20_000;
    for (transfer, graphics) in [
        (TransferKind::Interop, Graphics::Gl(&gl)),
        (TransferKind::HostCopy, Graphics::Gl(&gl)),
        (TransferKind::ExternalSemaphores, Graphics::Gl(&gl)),
        (TransferKind::Vulkan, Graphics::Vulkan(&vulkan)),
    ] {
        let cuda = if transfer == TransferKind::Vulkan { Some(cuda.clone()) } else { selection.cuda.clone() };
        let env = DemoEnv { graphics, cuda, transfer, window: false };
        let mut nbody = NBody::new(&env, settings(n)).expect("tree demo on CUDA");
        assert_eq!(nbody.pipeline().kind(), transfer);
        // The GPU quantises positions in fp32 and the CPU in f64: a body on a cell's edge may
        // fall on the other side, moving the boxes it bounds. Boxes match to fp32 rounding.
        let (drawn, expected, count) = step_and_compare(&mut nbody, graphics, 1e-5);
        eprintln!("{transfer:?}: {} boxes drawn, {count} of {} match the CPU tree's", drawn.len(), expected.len());
        assert_eq!(drawn.len(), expected.len(), "{transfer:?}");
        assert!(count * 100 >= expected.len() * 95, "{transfer:?}: {count} of {} boxes match", expected.len());
        Box::new(nbody).destroy(graphics);
    }
}

#[test]
fn draw_tree_picks_the_tree_unless_all_pairs_was_asked_for_and_then_says_why_nothing_is_drawn() {
    let dir = temp_dir("tree-boxes-method");
    let run = |extra: &[&str]| {
        let stats = dir.join("stats.json");
        let output = binary()
            .args(["nbody", "--headless", "--backend", "cpu", "--bodies", "2000", "--frames", "2", "--draw-tree"])
            .args(extra)
            .arg("--stats")
            .arg(&stats)
            .output()
            .expect("run");
        let said = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{said}");
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).expect("stats")).expect("JSON");
        (json["demo_stats"]["method"].as_str().unwrap_or("?").to_owned(), said)
    };
    // 2,000 bodies on the CPU would run all-pairs; the overlay asks for the tree.
    let (method, said) = run(&[]);
    assert_eq!(method, "tree", "{said}");
    assert!(said.contains("because --draw-tree draws it"), "{said}");
    let (method, said) = run(&["--method", "all-pairs"]);
    assert_eq!(method, "all-pairs", "{said}");
    assert!(said.contains("all-pairs does not build"), "{said}");
    std::fs::remove_dir_all(&dir).ok();
}
