//! The tree on screen: the boxes of the top levels of the tree as lines, 12 edges (24 float4
//! vertices `x, y, z, level + 1`) a box, in a buffer the graphics API draws. CUDA writes it
//! (`tree_boxes` in `kernels/nbody_tree.cu`); on the CPU backend [`write()`] does, from the CPU
//! tree. A slot no box took holds zeros: `w` = 0 tells the line shader to skip it.

use super::build::Tree;

/// Vertices of one box: its 12 edges as pairs.
pub const VERTICES_PER_BOX: usize = 24;
/// Bytes of one box's vertices.
pub const BOX_BYTES: usize = VERTICES_PER_BOX * 16;
/// Most levels drawn: the root and 13 below it, at most 16,383 boxes (6 MiB of vertices).
pub const MAX_LEVELS: u32 = 14;
/// Levels drawn unless the user chooses otherwise.
pub const DEFAULT_LEVELS: u32 = 8;

/// Boxes of the internal nodes of a tree over `n` bodies that lie less than `levels` below the
/// root: at most 2^levels − 1 (a binary tree) and at most n − 1 (its internal nodes).
pub fn capacity(levels: u32, n: u32) -> u32 {
    let full = if levels >= 32 { u32::MAX } else { (1u32 << levels) - 1 };
    full.min(n.saturating_sub(1))
}

/// The 24 vertices of the box `low`..`high` at `level`: each edge from a corner on its low side
/// along one axis, in the order the kernel writes them.
pub fn box_vertices(low: [f32; 3], high: [f32; 3], level: u32) -> [[f32; 4]; VERTICES_PER_BOX] {
    let w = (level + 1) as f32;
    let corner = |c: usize| {
        [
            if c & 1 != 0 { high[0] } else { low[0] },
            if c & 2 != 0 { high[1] } else { low[1] },
            if c & 4 != 0 { high[2] } else { low[2] },
            w,
        ]
    };
    let mut out = [[0.0; 4]; VERTICES_PER_BOX];
    let mut edge = 0;
    for axis in 0..3 {
        for c in (0..8).filter(|c| c & (1 << axis) == 0) {
            out[2 * edge] = corner(c);
            out[2 * edge + 1] = corner(c | (1 << axis));
            edge += 1;
        }
    }
    out
}

/// Writes the boxes of `tree`'s internal nodes less than `levels` below the root into
/// `vertices` (root first, level by level), and zeros into the slots left. Returns the boxes
/// written.
pub fn write(tree: &Tree, levels: u32, vertices: &mut [[f32; 4]]) -> usize {
    vertices.fill([0.0; 4]);
    let slots = vertices.len() / VERTICES_PER_BOX;
    let n = tree.len();
    if n < 2 || levels == 0 {
        return 0;
    }
    let mut level_nodes = vec![0u32];
    let mut written = 0;
    for level in 0..levels {
        let mut next = Vec::with_capacity(level_nodes.len() * 2);
        for &node in &level_nodes {
            if written == slots {
                return written;
            }
            let moments = &tree.moments[node as usize];
            let low = moments.low.map(|v| v as f32);
            let high = moments.high.map(|v| v as f32);
            vertices[written * VERTICES_PER_BOX..(written + 1) * VERTICES_PER_BOX]
                .copy_from_slice(&box_vertices(low, high, level));
            written += 1;
            next.extend(tree.children[node as usize].iter().copied().filter(|&child| !tree.is_leaf(child)));
        }
        if next.is_empty() {
            break;
        }
        level_nodes = next;
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn random_tree(n: usize, seed: u64) -> Tree {
        let mut rng = Rng::new(seed);
        let positions: Vec<[f64; 4]> =
            (0..n).map(|_| [rng.range(-1.0, 1.0), rng.range(-1.0, 1.0), rng.uniform(), 1.0]).collect();
        let mut tree = Tree::default();
        tree.build(&positions);
        tree
    }

    #[test]
    fn a_box_has_twelve_edges_each_along_one_axis_of_its_own_length() {
        let vertices = box_vertices([0.0, 0.0, 0.0], [1.0, 2.0, 3.0], 2);
        let mut lengths = [0usize; 3];
        for pair in vertices.chunks(2) {
            let changed: Vec<usize> = (0..3).filter(|&k| pair[0][k] != pair[1][k]).collect();
            assert_eq!(changed.len(), 1, "{pair:?}");
            assert_eq!((pair[1][changed[0]] - pair[0][changed[0]]), [1.0, 2.0, 3.0][changed[0]]);
            lengths[changed[0]] += 1;
            assert!(pair.iter().all(|v| v[3] == 3.0));
        }
        assert_eq!(lengths, [4, 4, 4]);
    }

    #[test]
    fn the_boxes_are_the_top_levels_nested_and_the_rest_is_empty() {
        let n = 5_000;
        let tree = random_tree(n, 7);
        for levels in [1, 3, 8] {
            let capacity = capacity(levels, n as u32) as usize;
            let mut vertices = vec![[f32::NAN; 4]; (capacity + 3) * VERTICES_PER_BOX];
            let written = write(&tree, levels, &mut vertices);
            assert_eq!(written, capacity, "a random tree is full in its top {levels} levels");
            assert!(vertices[written * VERTICES_PER_BOX..].iter().all(|v| *v == [0.0; 4]));
            // The root's box holds every body; every box lies inside the root's.
            let root = &tree.moments[0];
            let (low, high) = (root.low.map(|v| v as f32), root.high.map(|v| v as f32));
            assert_eq!(&vertices[..VERTICES_PER_BOX], &box_vertices(low, high, 0));
            for v in &vertices[..written * VERTICES_PER_BOX] {
                assert!((0..3).all(|k| v[k] >= low[k] && v[k] <= high[k]), "{v:?} outside the root");
                assert!(v[3] >= 1.0 && v[3] <= levels as f32);
            }
        }
    }

    #[test]
    fn small_trees_and_no_levels_draw_what_they_have() {
        assert_eq!(capacity(8, 1), 0);
        assert_eq!(capacity(8, 2), 1);
        assert_eq!(capacity(3, 1_000), 7);
        assert_eq!(capacity(MAX_LEVELS, u32::MAX), (1 << MAX_LEVELS) - 1);
        let tree = random_tree(3, 1);
        let mut vertices = vec![[1.0; 4]; 4 * VERTICES_PER_BOX];
        assert_eq!(write(&tree, 8, &mut vertices), 2);
        assert_eq!(write(&tree, 0, &mut vertices), 0);
        assert!(vertices.iter().all(|v| *v == [0.0; 4]));
    }
}
