//! The last good state. A step whose bodies left the finite numbers (NaN or infinite positions,
//! from a time step too long for the softening or an edited kernel), or whose tree walk hit one of
//! its bounds, is not kept:
//!
//! - found within a frame: the CPU step scans what it wrote; on CUDA the tree's bounds kernel,
//!   which reads every position anyway, sets a bit of the status word the host polls each frame;
//!   all-pairs on CUDA is checked by its energy (every `--energy-every` steps) and by the
//!   checkpoint read below;
//! - named: which body, or which check, and at which step;
//! - undone: the demo goes back to the last state known to be good, the one read every
//!   `--force-check-every` seconds (checked finite as it is read) or, before the first, the start,
//!   and the session pauses with the message, so the user can change `dt` or the softening (or
//!   the kernel) and go on.

use std::sync::Arc;
use std::time::Instant;

use super::NBody;
use super::presets::Bodies;
use super::start::initial_state;
use crate::scene::Graphics;
use crate::error::{Error, Result};

/// A state read back and found finite.
pub(super) struct Checkpoint {
    pub(super) bodies: Arc<Bodies>,
    pub(super) step: u64,
    pub(super) at: Instant,
}

/// The index of the first body whose position or mass is NaN or infinite.
pub(super) fn first_non_finite<T: Copy + Into<f64>>(positions: &[[T; 4]]) -> Option<usize> {
    positions.iter().position(|p| !p.iter().all(|&v| v.into().is_finite()))
}

/// The error that says body `body` left the finite numbers.
pub(super) fn non_finite(body: usize) -> Error {
    Error::Diverged(format!("body {body}'s position became NaN or infinite"))
}

/// Whether these bodies are all finite (velocities too): a state worth going back to.
fn finite(bodies: &Bodies) -> Option<usize> {
    first_non_finite(&bodies.positions)
        .or_else(|| bodies.velocities.iter().position(|v| !v.iter().all(|c| c.is_finite())))
}

impl NBody {
    /// Keeps `bodies`, read at the current step, as the state to go back to; an error when they
    /// are not finite (which the caller treats as a diverged step).
    pub(super) fn keep_checkpoint(&mut self, bodies: &Arc<Bodies>) -> Result<()> {
        if let Some(body) = finite(bodies) {
            return Err(Error::Diverged(format!(
                "body {body} is NaN or infinite in the state read at step {}",
                self.step
            )));
        }
        self.last_good = Some(Checkpoint { bodies: Arc::clone(bodies), step: self.step, at: Instant::now() });
        Ok(())
    }

    /// Goes back to the last good state after `what` (a [`Error::Diverged`]'s message) and says
    /// so in the error returned, which pauses the session.
    pub(super) fn restore_last_good(&mut self, graphics: Graphics<'_>, what: &str) -> Error {
        let advice = "a shorter dt or a larger softening keeps the bodies finite (or, if the kernel was \
                      edited, the edit is the place to look); resume when changed";
        let (bodies, step, source) = match self.last_good.take() {
            Some(checkpoint) => {
                let ago = checkpoint.at.elapsed().as_secs_f64();
                let source = format!("the state of step {} (read {ago:.1} s before)", checkpoint.step);
                (checkpoint.bodies, checkpoint.step, source)
            }
            None => {
                let mut settings = self.settings.clone();
                let cuda = self.pipeline.cuda().is_some();
                match initial_state(&mut settings, cuda, self.window) {
                    Ok((bodies, _, step)) => (Arc::new(bodies), step, format!("the starting state (step {step})")),
                    Err(error) => {
                        return Error::Diverged(format!(
                            "n-body by step {}: {what}; the starting state could not be made again ({error})",
                            self.step + 1
                        ));
                    }
                }
            }
        };
        let at = self.step;
        match self.rebuild(graphics, self.settings.clone(), (*bodies).clone(), self.params, step) {
            Ok(()) => {
                self.last_good = Some(Checkpoint { bodies, step, at: Instant::now() });
                let message = format!("n-body by step {}: {what}; went back to {source}: {advice}", at + 1);
                log::warn!("{message}");
                Error::Diverged(message)
            }
            Err(error) => {
                Error::Diverged(format!("n-body by step {}: {what}; going back to {source} failed ({error})", at + 1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_body_with_a_nan_or_infinite_coordinate_or_mass_is_named() {
        let mut positions = vec![[0.5f32, -1.0, 2.0, 1.0]; 10];
        assert_eq!(first_non_finite(&positions), None);
        for (body, axis, value, first) in [(7, 0, f32::NAN, 7), (3, 2, f32::INFINITY, 3), (5, 3, f32::NEG_INFINITY, 3)]
        {
            positions[body][axis] = value;
            assert_eq!(first_non_finite(&positions), Some(first));
        }
        let doubles = [[0.0f64, 0.0, 0.0, 1.0], [0.0, f64::NAN, 0.0, 1.0]];
        assert_eq!(first_non_finite(&doubles), Some(1));
        assert!(non_finite(4).to_string().contains("body 4"));
    }

    #[test]
    fn a_state_with_a_nan_velocity_is_not_kept() {
        let bodies = Bodies { positions: vec![[0.0, 0.0, 0.0, 1.0]; 3], velocities: vec![[0.0, f64::NAN, 0.0]; 3] };
        assert_eq!(finite(&bodies), Some(0));
        let good = Bodies { positions: vec![[0.0, 0.0, 0.0, 1.0]; 3], velocities: vec![[0.0; 3]; 3] };
        assert_eq!(finite(&good), None);
    }
}
