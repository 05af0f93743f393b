//! The force walk: each body descends the tree from the root with an explicit stack, taking a
//! node's monopole and quadrupole where the opening criterion accepts it and opening it otherwise.

use super::build::Tree;

/// Most nodes the walk's stack holds. A root-to-leaf path has at most 87 internal nodes (63
/// code bits, then 24 index bits for up to 2²⁴ equal codes), and the stack holds at most one
/// pending sibling per level, so this never fills; a full stack is reported, not ignored.
pub const STACK_NODES: usize = 96;

/// Whether a node seen from distance² `distance2` may be taken as a point mass: all its mass lies
/// within `radius` of its centre of mass, and `radius < θ·d` keeps the ratio of the two, which
/// the expansion's error is a power series in, below θ. A node of radius 0 (bodies at one point)
/// is exact at any distance, its own bodies' included (their terms are zero).
pub fn accepts(radius: f64, distance2: f64, theta: f64) -> bool {
    radius == 0.0 || radius * radius < theta * theta * distance2
}

/// The acceleration from a node of mass `mass` and traceless quadrupole `q` (xx, yy, zz, xy, xz,
/// yz) whose centre of mass is at offset `d` from the body, `r2` = |d|² + ε²:
/// M d / r³ − Q d / r⁵ + (5/2) (dᵀ Q d) d / r⁷. The monopole term is all-pairs' softened force
/// exactly; the quadrupole term takes the same softened distance, which changes it by O(ε²/d²).
pub fn node_acceleration(mass: f64, q: &[f64; 6], d: [f64; 3], r2: f64) -> [f64; 3] {
    let inverse = 1.0 / r2.sqrt();
    let inverse2 = inverse * inverse;
    let inverse3 = inverse * inverse2;
    let inverse5 = inverse3 * inverse2;
    let qd = [
        q[0] * d[0] + q[3] * d[1] + q[4] * d[2],
        q[3] * d[0] + q[1] * d[1] + q[5] * d[2],
        q[4] * d[0] + q[5] * d[1] + q[2] * d[2],
    ];
    let dqd = d[0] * qd[0] + d[1] * qd[1] + d[2] * qd[2];
    let radial = mass * inverse3 + 2.5 * dqd * inverse5 * inverse2;
    std::array::from_fn(|k| d[k] * radial - qd[k] * inverse5)
}

/// What one walk did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WalkResult {
    /// Σ m (x_node − x) / (|x_node − x|² + ε²)^{3/2}, without G.
    pub acceleration: [f64; 3],
    /// Nodes taken as point masses (leaves included).
    pub interactions: u32,
    /// The stack filled: the result is incomplete and must not be used.
    pub overflowed: bool,
}

/// The acceleration (without G) at `me` from every body of `tree`.
pub fn walk(tree: &Tree, me: [f64; 3], theta: f64, softening2: f64) -> WalkResult {
    let mut result = WalkResult::default();
    if tree.is_empty() {
        return result;
    }
    let mut stack = [0u32; STACK_NODES];
    let mut depth = 1; // the root, node 0
    while depth > 0 {
        depth -= 1;
        let node = stack[depth];
        let moments = &tree.moments[node as usize];
        let d = [moments.centre[0] - me[0], moments.centre[1] - me[1], moments.centre[2] - me[2]];
        let distance2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
        if tree.is_leaf(node) || accepts(moments.radius, distance2, theta) {
            let term = node_acceleration(moments.mass, &moments.quadrupole, d, distance2 + softening2);
            for (sum, component) in result.acceleration.iter_mut().zip(term) {
                *sum += component;
            }
            result.interactions += 1;
            continue;
        }
        if depth + 2 > STACK_NODES {
            result.overflowed = true;
            return result;
        }
        let [left, right] = tree.children[node as usize];
        stack[depth] = right;
        stack[depth + 1] = left;
        depth += 2;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demos::nbody::tree::build::quadrupole_of_point;

    #[test]
    fn the_quadrupole_term_removes_the_second_order_error() {
        // Two bodies of mass ½ at ±y from the origin, seen from 10 units away along a diagonal.
        let y = [0.3, -0.4, 0.5];
        let me = [-6.0, 5.0, 5.7];
        let exact: [f64; 3] = [1.0, -1.0].iter().fold([0.0; 3], |sum, &sign| {
            let d: [f64; 3] = std::array::from_fn(|k| sign * y[k] - me[k]);
            let r2 = d.iter().map(|c| c * c).sum::<f64>();
            std::array::from_fn(|k| sum[k] + 0.5 * d[k] / (r2 * r2.sqrt()))
        });
        let mut q = quadrupole_of_point(0.5, y);
        for (total, other) in q.iter_mut().zip(quadrupole_of_point(0.5, y.map(|c| -c))) {
            *total += other;
        }
        let d = me.map(|c| -c);
        let r2 = d.iter().map(|c| c * c).sum::<f64>();
        let error = |a: [f64; 3]| {
            let norm = |v: [f64; 3]| v.iter().map(|c| c * c).sum::<f64>().sqrt();
            norm(std::array::from_fn(|k| a[k] - exact[k])) / norm(exact)
        };
        let monopole = error(node_acceleration(1.0, &[0.0; 6], d, r2));
        let quadrupole = error(node_acceleration(1.0, &q, d, r2));
        // x = |y|/d ≈ 0.071: the monopole errs by ~x², the quadrupole (octupole zero here) by ~x⁴.
        assert!(monopole > 1e-3 && quadrupole < 1e-4, "monopole {monopole:e}, quadrupole {quadrupole:e}");
    }
}
