//! Building the tree on the CPU: Morton codes of the bodies in their bounding box, sorted, a
//! binary radix tree over the sorted codes (Karras 2012), and bottom-up moments (mass, centre of
//! mass, quadrupole, and the radius around the centre that holds every body).
//!
//! `kernels/nbody_tree.cu` builds the same tree on the GPU, stage for stage, so the two can be
//! compared body by body.

use rayon::prelude::*;

/// Bits of each axis in a Morton code: 3 × 21 = 63 bits, so a huge bounding box (one body far
/// away) still leaves the rest of the bodies about two million cells per axis.
pub const BITS_PER_AXIS: u32 = 21;

/// A node index meaning "none" (the root's parent).
pub const NO_NODE: u32 = u32::MAX;

/// One node's monopole moments and size: what the walk reads.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Moments {
    /// Centre of mass (the bounding box's centre when the node has no mass).
    pub centre: [f64; 3],
    /// Total mass.
    pub mass: f64,
    /// Distance from the centre of mass to the farthest corner of the bounding box of the node's
    /// bodies: every body of the node lies within it.
    pub radius: f64,
    /// Traceless quadrupole about the centre of mass, Σ m (3 y_i y_j − |y|² δ_ij) with y the
    /// offset from the centre: xx, yy, zz, xy, xz, yz.
    pub quadrupole: [f64; 6],
    /// Bounding box of the node's bodies: lowest corner.
    pub low: [f64; 3],
    /// Bounding box of the node's bodies: highest corner.
    pub high: [f64; 3],
}

/// A tree over `n` bodies: internal nodes `0 .. n − 1`, leaf `k` (the `k`-th body in Morton
/// order) at node `n − 1 + k`; the root is node 0 (a leaf when `n` = 1).
#[derive(Debug, Clone, Default)]
pub struct Tree {
    /// Body index of each leaf, in Morton order.
    pub order: Vec<u32>,
    /// Morton code of each leaf, sorted.
    pub codes: Vec<u64>,
    /// Left and right child of each internal node.
    pub children: Vec<[u32; 2]>,
    /// Parent of every node (`NO_NODE` for the root).
    pub parent: Vec<u32>,
    /// Moments of every node.
    pub moments: Vec<Moments>,
}

impl Tree {
    /// Number of bodies (leaves).
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the tree holds no bodies.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Whether `node` is a leaf.
    pub fn is_leaf(&self, node: u32) -> bool {
        node as usize + 1 >= self.order.len()
    }

    /// Rebuilds the tree for `positions` (x, y, z, mass), reusing its allocations.
    pub fn build(&mut self, positions: &[[f64; 4]]) {
        let n = positions.len();
        let (low, scale) = quantisation(positions);
        let mut keyed: Vec<(u64, u32)> = positions
            .par_iter()
            .enumerate()
            .map(|(i, p)| (morton_code([p[0], p[1], p[2]], low, scale), i as u32))
            .collect();
        // Equal codes keep body order: the GPU's radix sort is stable, so both make one tree.
        keyed.par_sort_unstable();
        self.order.clear();
        self.order.extend(keyed.iter().map(|&(_, i)| i));
        self.codes.clear();
        self.codes.extend(keyed.iter().map(|&(code, _)| code));
        let internal = n.saturating_sub(1);
        self.children.clear();
        self.children.par_extend((0..internal).into_par_iter().map(|i| karras_children(&self.codes, i)));
        self.parent.clear();
        self.parent.resize(internal + n, NO_NODE);
        for (node, pair) in self.children.iter().enumerate() {
            for &child in pair {
                self.parent[child as usize] = node as u32;
            }
        }
        self.moments.clear();
        self.moments.resize(internal + n, Moments::default());
        for (k, &body) in self.order.iter().enumerate() {
            let p = positions[body as usize];
            let at = [p[0], p[1], p[2]];
            self.moments[internal + k] =
                Moments { centre: at, mass: p[3], radius: 0.0, quadrupole: [0.0; 6], low: at, high: at };
        }
        self.sum_moments();
    }

    /// Moments of the internal nodes from their children's, children first: a post-order walk
    /// from the root with an explicit stack (no recursion; the depth is at most 87).
    fn sum_moments(&mut self) {
        if self.children.is_empty() {
            return;
        }
        let mut stack: Vec<(u32, bool)> = vec![(0, false)];
        while let Some((node, children_done)) = stack.pop() {
            if self.is_leaf(node) {
                continue;
            }
            let [left, right] = self.children[node as usize];
            if children_done {
                let combined = combine(&self.moments[left as usize], &self.moments[right as usize]);
                self.moments[node as usize] = combined;
            } else {
                stack.push((node, true));
                stack.push((right, false));
                stack.push((left, false));
            }
        }
    }
}

/// A node's moments from its two children's.
pub fn combine(a: &Moments, b: &Moments) -> Moments {
    let mass = a.mass + b.mass;
    let low: [f64; 3] = std::array::from_fn(|k| a.low[k].min(b.low[k]));
    let high: [f64; 3] = std::array::from_fn(|k| a.high[k].max(b.high[k]));
    let centre: [f64; 3] = if mass > 0.0 {
        // Clamped to the box: rounding must not put the centre outside the bodies' hull.
        std::array::from_fn(|k| ((a.mass * a.centre[k] + b.mass * b.centre[k]) / mass).clamp(low[k], high[k]))
    } else {
        std::array::from_fn(|k| 0.5 * (low[k] + high[k]))
    };
    let mut quadrupole = [0.0; 6];
    for child in [a, b] {
        // Parallel-axis theorem: the child's quadrupole moved from its centre to the parent's.
        let y: [f64; 3] = std::array::from_fn(|k| child.centre[k] - centre[k]);
        let shifted = quadrupole_of_point(child.mass, y);
        for (sum, (own, shift)) in quadrupole.iter_mut().zip(child.quadrupole.iter().zip(shifted)) {
            *sum += own + shift;
        }
    }
    Moments { centre, mass, radius: corner_distance(centre, low, high), quadrupole, low, high }
}

/// The traceless quadrupole of mass `m` at offset `y`: m (3 y_i y_j − |y|² δ_ij).
pub fn quadrupole_of_point(m: f64, y: [f64; 3]) -> [f64; 6] {
    let r2 = y[0] * y[0] + y[1] * y[1] + y[2] * y[2];
    [
        m * (3.0 * y[0] * y[0] - r2),
        m * (3.0 * y[1] * y[1] - r2),
        m * (3.0 * y[2] * y[2] - r2),
        m * 3.0 * y[0] * y[1],
        m * 3.0 * y[0] * y[2],
        m * 3.0 * y[1] * y[2],
    ]
}

/// Distance from `centre` (inside the box) to the box's farthest corner.
pub fn corner_distance(centre: [f64; 3], low: [f64; 3], high: [f64; 3]) -> f64 {
    let mut sum = 0.0;
    for k in 0..3 {
        let reach = (centre[k] - low[k]).max(high[k] - centre[k]).max(0.0);
        sum += reach * reach;
    }
    sum.sqrt()
}

/// The lowest corner of the bodies' bounding box and the factor per axis that maps it onto
/// `0 ..= 2²¹ − 1` (0 for an axis where every body has the same coordinate: a plane or a line).
/// Non-finite coordinates are left out (their bodies get code 0).
pub fn quantisation(positions: &[[f64; 4]]) -> ([f64; 3], [f64; 3]) {
    let (low, high) = positions
        .par_iter()
        .fold(
            || ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]),
            |(mut low, mut high), p| {
                for k in 0..3 {
                    if p[k].is_finite() {
                        low[k] = low[k].min(p[k]);
                        high[k] = high[k].max(p[k]);
                    }
                }
                (low, high)
            },
        )
        .reduce(
            || ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]),
            |a, b| (std::array::from_fn(|k| a.0[k].min(b.0[k])), std::array::from_fn(|k| a.1[k].max(b.1[k]))),
        );
    let cells = f64::from((1u32 << BITS_PER_AXIS) - 1);
    let mut scale = [0.0; 3];
    let mut origin = [0.0; 3];
    for k in 0..3 {
        let extent = high[k] - low[k];
        if extent.is_finite() && extent > 0.0 {
            scale[k] = cells / extent;
            origin[k] = low[k];
        }
    }
    (origin, scale)
}

/// The 63-bit Morton code of a point: 21 bits per axis, x's bit highest within each triple.
pub fn morton_code(point: [f64; 3], low: [f64; 3], scale: [f64; 3]) -> u64 {
    let cells = f64::from((1u32 << BITS_PER_AXIS) - 1);
    let mut code = 0;
    for k in 0..3 {
        // `as` saturates and maps NaN to 0: every input gets a code in range.
        let cell = ((point[k] - low[k]) * scale[k]).clamp(0.0, cells) as u64;
        code |= spread_bits(cell) << (2 - k);
    }
    code
}

/// The low 21 bits of `value`, two zero bits inserted after each.
pub fn spread_bits(value: u64) -> u64 {
    let mut x = value & 0x1f_ffff;
    x = (x | (x << 32)) & 0x001f_0000_0000_ffff;
    x = (x | (x << 16)) & 0x001f_0000_ff00_00ff;
    x = (x | (x << 8)) & 0x100f_00f0_0f00_f00f;
    x = (x | (x << 4)) & 0x10c3_0c30_c30c_30c3;
    x = (x | (x << 2)) & 0x1249_2492_4924_9249;
    x
}

/// Length of the common prefix of leaves `i` and `j` (codes, then indices where codes are equal,
/// which makes every key distinct); −1 when `j` is outside `0 .. n`.
fn common_prefix(codes: &[u64], i: usize, j: i64) -> i32 {
    if j < 0 || j >= codes.len() as i64 {
        return -1;
    }
    let (a, b) = (codes[i], codes[j as usize]);
    if a != b { (a ^ b).leading_zeros() as i32 } else { 64 + ((i as u32) ^ (j as u32)).leading_zeros() as i32 }
}

/// The children of internal node `i` of the radix tree over sorted `codes` (Karras 2012,
/// figure 4), as node indices: internal nodes below `n − 1`, leaf `k` at `n − 1 + k`.
pub fn karras_children(codes: &[u64], i: usize) -> [u32; 2] {
    let n = codes.len();
    let index = i as i64;
    let direction: i64 =
        if common_prefix(codes, i, index + 1) - common_prefix(codes, i, index - 1) >= 0 { 1 } else { -1 };
    let floor = common_prefix(codes, i, index - direction);
    // Upper bound on the other end's distance, then binary search for it.
    let mut most: i64 = 2;
    while common_prefix(codes, i, index + most * direction) > floor {
        most *= 2;
    }
    let mut length: i64 = 0;
    let mut step = most / 2;
    while step >= 1 {
        if common_prefix(codes, i, index + (length + step) * direction) > floor {
            length += step;
        }
        step /= 2;
    }
    let other = index + length * direction;
    let node_prefix = common_prefix(codes, i, other);
    // The split: the last leaf that shares more than `node_prefix` bits with leaf i.
    let mut split: i64 = 0;
    let mut step = length;
    loop {
        step = (step + 1) / 2;
        if common_prefix(codes, i, index + (split + step) * direction) > node_prefix {
            split += step;
        }
        if step <= 1 {
            break;
        }
    }
    let gamma = index + split * direction + direction.min(0);
    let (first, last) = (index.min(other), index.max(other));
    let leaf = |k: i64| (n as i64 - 1 + k) as u32;
    let left = if first == gamma { leaf(gamma) } else { gamma as u32 };
    let right = if last == gamma + 1 { leaf(gamma + 1) } else { (gamma + 1) as u32 };
    [left, right]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_tree(tree: &Tree, positions: &[[f64; 4]]) {
        let n = positions.len();
        // Every node except the root has exactly one parent, and walking up always ends at the root.
        let mut seen = vec![0u32; 2 * n - 1];
        for pair in &tree.children {
            for &child in pair {
                seen[child as usize] += 1;
            }
        }
        assert_eq!(seen[0], 0, "the root is nobody's child");
        assert!(seen[1..].iter().all(|&count| count == 1), "every other node has one parent");
        let total: f64 = positions.iter().map(|p| p[3]).sum();
        assert!((tree.moments[0].mass - total).abs() <= 1e-12 * total.max(1.0));
        let m = &tree.moments[0];
        for p in positions {
            assert!((0..3).all(|k| m.low[k] <= p[k] && p[k] <= m.high[k]), "the root's box holds every body");
        }
    }

    #[test]
    fn morton_codes_interleave_x_highest() {
        assert_eq!(spread_bits(0b111), 0b1001001);
        assert_eq!(spread_bits((1 << 21) - 1).count_ones(), 21);
        let code = morton_code([1.0, 0.0, 0.0], [0.0; 3], [1.0; 3]);
        assert_eq!(code, 0b100);
        // NaN and infinities still get a code in range.
        assert_eq!(morton_code([f64::NAN, 0.0, 0.0], [0.0; 3], [1.0; 3]), 0);
        assert!(morton_code([f64::INFINITY; 3], [0.0; 3], [1.0; 3]) < 1 << 63);
    }

    #[test]
    fn trees_of_random_and_duplicated_bodies_are_well_formed() {
        let mut rng = crate::rng::Rng::new(9);
        let random: Vec<[f64; 4]> = (0..1000).map(|_| [rng.uniform(), rng.uniform(), rng.uniform(), 1e-3]).collect();
        let same = vec![[0.5, 0.5, 0.5, 1.0]; 777];
        let pairs: Vec<[f64; 4]> = (0..500).map(|i| [(i / 2) as f64, 0.0, 0.0, 1.0]).collect();
        for positions in [random, same, pairs, vec![[1.0, 2.0, 3.0, 4.0]], vec![[0.0; 4], [1.0; 4]]] {
            let mut tree = Tree::default();
            tree.build(&positions);
            check_tree(&tree, &positions);
        }
    }
}
