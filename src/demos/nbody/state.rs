//! Saved simulations: bodies and parameters in a small binary file (little-endian f64, so an f32
//! run and an f64 run can both be saved without loss and reloaded into either).
//!
//! Layout: `ILNBODY1` (8 bytes), body count (u32), reserved (u32, 0), step (u64), dt, softening,
//! gravity, damping (f64 each), then per body x, y, z, mass, vx, vy, vz (f64 each).

use std::path::Path;

use super::cpu::Params;
use super::presets::Bodies;
use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"ILNBODY1";
const HEADER_BYTES: usize = 8 + 4 + 4 + 8 + 4 * 8;
const BODY_BYTES: usize = 7 * 8;
/// Most bodies a state file may hold (what the demo accepts).
pub const MAX_BODIES: usize = 1 << 24;

/// A simulation as saved.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedState {
    /// The bodies.
    pub bodies: Bodies,
    /// The parameters it ran with.
    pub params: Params,
    /// Steps taken since its preset was generated.
    pub step: u64,
}

/// Encodes a state.
pub fn encode(state: &SavedState) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_BYTES + state.bodies.len() * BODY_BYTES);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(state.bodies.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&state.step.to_le_bytes());
    for value in [state.params.dt, state.params.softening, state.params.gravity, state.params.damping] {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    for (p, v) in state.bodies.positions.iter().zip(&state.bodies.velocities) {
        for value in p.iter().chain(v.iter()) {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
    }
    bytes
}

/// Decodes a state, checking everything a damaged or foreign file could get wrong.
pub fn decode(bytes: &[u8]) -> std::result::Result<SavedState, String> {
    if bytes.len() < HEADER_BYTES || &bytes[..8] != MAGIC {
        return Err("not an interop-lab n-body state (it does not start with ILNBODY1)".to_owned());
    }
    let u32_at = |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let f64_at = |at: usize| {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(&bytes[at..at + 8]);
        f64::from_le_bytes(raw)
    };
    let count = u32_at(8) as usize;
    if count == 0 || count > MAX_BODIES {
        return Err(format!("the file says it holds {count} bodies; 1..={MAX_BODIES} are allowed"));
    }
    let expected = HEADER_BYTES + count * BODY_BYTES;
    if bytes.len() != expected {
        return Err(format!(
            "{count} bodies need {expected} bytes but the file has {}: it is truncated or damaged",
            bytes.len()
        ));
    }
    let mut step_bytes = [0u8; 8];
    step_bytes.copy_from_slice(&bytes[16..24]);
    let step = u64::from_le_bytes(step_bytes);
    let params = Params { dt: f64_at(24), softening: f64_at(32), gravity: f64_at(40), damping: f64_at(48) };
    let mut positions = Vec::with_capacity(count);
    let mut velocities = Vec::with_capacity(count);
    for body in 0..count {
        let at = HEADER_BYTES + body * BODY_BYTES;
        let values: [f64; 7] = std::array::from_fn(|k| f64_at(at + 8 * k));
        if values.iter().any(|v| !v.is_finite()) {
            return Err(format!("body {body} has a value that is not a finite number"));
        }
        if values[3] < 0.0 {
            return Err(format!("body {body} has a negative mass"));
        }
        positions.push([values[0], values[1], values[2], values[3]]);
        velocities.push([values[4], values[5], values[6]]);
    }
    Ok(SavedState { bodies: Bodies { positions, velocities }, params, step })
}

/// Writes `state` to `path`.
pub fn save(path: &Path, state: &SavedState) -> Result<()> {
    crate::output::write(path, &encode(state))
}

/// Reads a state from `path`.
pub fn load(path: &Path) -> Result<SavedState> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    decode(&bytes).map_err(|message| Error::InvalidInput(format!("{}: {message}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demos::nbody::presets::Preset;

    #[test]
    fn round_trip_and_every_kind_of_damage_is_named() {
        let state = SavedState {
            bodies: Preset::Disk.generate(33, 4),
            params: Params { dt: 0.001, softening: 0.02, gravity: 1.0, damping: 0.999 },
            step: 1234,
        };
        let bytes = encode(&state);
        assert_eq!(decode(&bytes).as_ref(), Ok(&state));

        let expect = |bytes: &[u8], message: &str| {
            let error = decode(bytes).expect_err("damaged input must be rejected");
            assert!(error.contains(message), "{error:?} should mention {message:?}");
        };
        expect(b"hello", "does not start with ILNBODY1");
        expect(&bytes[..bytes.len() - 1], "truncated");
        let mut longer = bytes.clone();
        longer.push(0);
        expect(&longer, "truncated or damaged");
        let mut zero = bytes.clone();
        zero[8..12].copy_from_slice(&0u32.to_le_bytes());
        expect(&zero, "holds 0 bodies");
        let mut nan = bytes.clone();
        nan[HEADER_BYTES + 8..HEADER_BYTES + 16].copy_from_slice(&f64::NAN.to_le_bytes());
        expect(&nan, "body 0 has a value that is not a finite number");
        let mut negative = bytes.clone();
        let mass_at = HEADER_BYTES + BODY_BYTES + 24;
        negative[mass_at..mass_at + 8].copy_from_slice(&(-1.0f64).to_le_bytes());
        expect(&negative, "body 1 has a negative mass");
    }
}
