//! The order of the semaphores' signals and waits within a step and across steps, apart from the
//! APIs that make them, so that a model of binary semaphores can check it.

use super::GlNames;
use crate::error::Result;

/// The calls that order one step of the external path, in the order [`Protocol::step`] makes
/// them: on GL and CUDA ([`GpuCalls`](super::semaphores::GpuCalls)), or, in the tests, on a model
/// of binary semaphores.
pub(super) trait StepCalls {
    /// GL's later commands wait for CUDA's signal of `written`.
    fn gl_wait_written(&mut self) -> Result<()>;
    /// GL signals `released` after every command given so far (then flushes); `buffers` are the
    /// ones it was given for, the next step's when `ahead`.
    fn gl_signal_released(&mut self, buffers: GlNames, ahead: bool) -> Result<()>;
    /// CUDA's stream waits for GL's signal of `released`; `timed` for the step's own wait (an
    /// earlier signal consumed first is not).
    fn cuda_wait_released(&mut self, timed: bool) -> Result<()>;
    /// The kernels.
    fn compute(&mut self) -> Result<()>;
    /// CUDA's stream signals `written`.
    fn cuda_signal_written(&mut self) -> Result<()>;
}

/// What is pending between steps of the external path's semaphores. Binary semaphores: every
/// signal must be waited for exactly once, and no wait may come before its signal. A signal a
/// step leaves (given ahead for the next step, or by a step that failed half-way) is waited for,
/// never signalled again.
#[derive(Debug, Default)]
pub(super) struct Protocol {
    /// GL signalled `released` and CUDA has not waited for it.
    released_pending: bool,
    /// CUDA signalled `written` and GL has not waited for it.
    written_pending: bool,
    /// The buffers `released` was signalled ahead for: a step that writes others waits for a new
    /// signal, since the one ahead may have come before their last draw.
    released_for: Option<GlNames>,
}

impl Protocol {
    /// One step writing `buffers`; `next` (empty: not pipelined) are the next step's buffers, for
    /// which GL's `released` is signalled right after this step's wait, before this frame's draw.
    pub(super) fn step(&mut self, calls: &mut impl StepCalls, buffers: GlNames, next: GlNames) -> Result<()> {
        if self.written_pending {
            calls.gl_wait_written()?;
            self.written_pending = false;
        }
        if self.released_pending && self.released_for != Some(buffers) {
            // Signalled ahead for other buffers: consumed, and signalled again below.
            calls.cuda_wait_released(false)?;
            self.released_pending = false;
        }
        if !self.released_pending {
            calls.gl_signal_released(buffers, false)?;
            self.released_pending = true;
            self.released_for = None;
        }
        calls.cuda_wait_released(true)?;
        self.released_pending = false;
        calls.compute()?;
        calls.cuda_signal_written()?;
        self.written_pending = true;
        calls.gl_wait_written()?;
        self.written_pending = false;
        if !next.as_slice().is_empty() {
            calls.gl_signal_released(next, true)?;
            self.released_pending = true;
            self.released_for = Some(next);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::error::Error;

    impl GlNames {
        fn from_slice(slice: &[u32]) -> Self {
            let mut names = Self::NONE;
            names.names[..slice.len()].copy_from_slice(slice);
            names.len = slice.len();
            names
        }
    }

    /// The two binary semaphores and the two queues, modelled: every GL and CUDA operation is
    /// numbered in order of issue, and a signal covers its queue's operations issued before it.
    /// What the protocol must never do is recorded as a violation.
    #[derive(Default)]
    struct Model {
        ops: u64,
        /// GL's pending signal of `released`: GL operations before this number are done.
        released: Option<u64>,
        /// CUDA's pending signal of `written`: CUDA operations before this number are done.
        written: Option<u64>,
        /// CUDA's stream runs after the GL operations before this.
        cuda_after_gl: u64,
        /// GL's later commands run after the CUDA operations before this.
        gl_after_cuda: u64,
        last_draw: HashMap<u32, u64>,
        last_write: HashMap<u32, u64>,
        /// The buffers of the step being made.
        writing: Vec<u32>,
        /// Calls made, and the one to fail (1-based), if any.
        calls: u32,
        fail_at: Option<u32>,
        violations: Vec<String>,
    }

    impl Model {
        fn call(&mut self) -> Result<()> {
            self.calls += 1;
            if self.fail_at == Some(self.calls) {
                return Err(Error::Unavailable("a call failed (as the test asked)".to_owned()));
            }
            Ok(())
        }

        fn op(&mut self) -> u64 {
            self.ops += 1;
            self.ops
        }

        /// GL draws `buffer`; `checked`: the step that wrote it succeeded, so the draw must come
        /// after its kernel.
        fn draw(&mut self, buffer: u32, checked: bool) {
            let write = self.last_write.get(&buffer).copied().unwrap_or(0);
            if checked && write >= self.gl_after_cuda {
                self.violations.push(format!("GL draws buffer {buffer} before the kernel that wrote it is done"));
            }
            let op = self.op();
            self.last_draw.insert(buffer, op);
        }
    }

    impl StepCalls for Model {
        fn gl_wait_written(&mut self) -> Result<()> {
            self.call()?;
            match self.written.take() {
                Some(covered) => self.gl_after_cuda = self.gl_after_cuda.max(covered),
                None => self.violations.push("GL waits for `written` with no signal pending".to_owned()),
            }
            Ok(())
        }

        fn gl_signal_released(&mut self, _buffers: GlNames, _ahead: bool) -> Result<()> {
            self.call()?;
            if self.released.is_some() {
                self.violations.push("GL signals `released` while a signal is pending".to_owned());
            }
            let op = self.op();
            self.released = Some(op);
            Ok(())
        }

        fn cuda_wait_released(&mut self, _timed: bool) -> Result<()> {
            self.call()?;
            match self.released.take() {
                Some(covered) => self.cuda_after_gl = self.cuda_after_gl.max(covered),
                None => self.violations.push("CUDA waits for `released` with no signal pending".to_owned()),
            }
            Ok(())
        }

        fn compute(&mut self) -> Result<()> {
            self.call()?;
            for buffer in self.writing.clone() {
                let draw = self.last_draw.get(&buffer).copied().unwrap_or(0);
                if draw >= self.cuda_after_gl {
                    self.violations.push(format!("the kernel writes buffer {buffer} while GL may still draw it"));
                }
                let op = self.op();
                self.last_write.insert(buffer, op);
            }
            Ok(())
        }

        fn cuda_signal_written(&mut self) -> Result<()> {
            self.call()?;
            if self.written.is_some() {
                self.violations.push("CUDA signals `written` while a signal is pending".to_owned());
            }
            let op = self.op();
            self.written = Some(op);
            Ok(())
        }
    }

    /// Frames on a ring of `depth` buffers, each step followed by the frame's draw; now and then
    /// the buffers are made again (new names), the demo pauses (draws with no step), or, with
    /// `failures`, one call of a step fails. Returns the model's violations and the steps that
    /// succeeded.
    fn frames(depth: u32, count: u64, seed: u64, failures: bool) -> (Vec<String>, u64) {
        let mut rng = crate::rng::Rng::new(seed);
        let mut model = Model::default();
        let mut protocol = Protocol::default();
        let mut base = 1u32;
        let mut drawn = None;
        let mut succeeded = 0;
        for frame in 0..count {
            if rng.uniform() < 0.05 {
                base += 100; // re-allocated: the ring's buffers have new names
            }
            let slot = (frame % u64::from(depth)) as u32;
            let this = base + slot;
            let next = (depth > 1).then(|| base + (slot + 1) % depth);
            model.writing = vec![this];
            model.calls = 0;
            model.fail_at = (failures && rng.uniform() < 0.2).then(|| 1 + (rng.next_u64() % 8) as u32);
            let next = match next {
                Some(next) => GlNames::from_slice(&[next]),
                None => GlNames::NONE,
            };
            let ok = protocol.step(&mut model, GlNames::from_slice(&[this]), next).is_ok();
            model.fail_at = None;
            if ok {
                succeeded += 1;
                model.draw(this, true);
                drawn = Some(this);
            } else if let Some(buffer) = drawn {
                model.draw(buffer, false);
            }
            while rng.uniform() < 0.1 {
                if let Some(buffer) = drawn {
                    model.draw(buffer, ok); // paused: the same picture again
                }
            }
        }
        (model.violations, succeeded)
    }

    #[test]
    fn every_binary_signal_is_waited_for_once_and_orders_kernel_and_draw_at_every_depth() {
        for depth in 1..=4 {
            for seed in 0..20 {
                let (violations, succeeded) = frames(depth, 300, seed, false);
                assert!(violations.is_empty(), "depth {depth}, seed {seed}: {violations:?}");
                assert_eq!(succeeded, 300);
            }
        }
    }

    #[test]
    fn a_step_that_fails_half_way_leaves_nothing_the_next_steps_trip_on() {
        for depth in 1..=3 {
            for seed in 0..50 {
                let (violations, succeeded) = frames(depth, 300, seed, true);
                assert!(violations.is_empty(), "depth {depth}, seed {seed}: {violations:?}");
                assert!(succeeded > 150, "most steps still succeed: {succeeded}");
            }
        }
    }

    #[test]
    fn the_model_catches_a_kernel_that_overwrites_what_gl_still_draws() {
        // The checks above must be able to fail. `run_pipelined` forbids GL to use the next
        // step's buffers before that step: drawing one after the signal given ahead for it means
        // the next kernel may overwrite it mid-draw, and the model says so.
        let mut model = Model::default();
        let mut protocol = Protocol::default();
        let (a, b) = (GlNames::from_slice(&[1]), GlNames::from_slice(&[2]));
        model.writing = vec![1];
        protocol.step(&mut model, a, b).unwrap();
        model.draw(1, true);
        assert!(model.violations.is_empty(), "{:?}", model.violations);
        model.draw(2, false); // against the contract
        model.writing = vec![2];
        protocol.step(&mut model, b, GlNames::NONE).unwrap();
        assert!(
            model.violations.iter().any(|v| v.contains("the kernel writes buffer 2 while GL may still draw it")),
            "{:?}",
            model.violations
        );
    }
}
