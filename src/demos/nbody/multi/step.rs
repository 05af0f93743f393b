//! One step across the devices, and the first one after a reset or load: each device drifts its
//! bodies, sends its positions to the others while it computes forces against the slices it has,
//! waits for the rest, and kicks; the caller's stream waits for every device.

use std::rc::Rc;

use super::super::cpu::Params;
use super::super::kernels::{ForcesRange, Precision};
use super::super::sim::StepBuffers;
use super::{MultiSimulation, Part, PartSpans, Partition};
use crate::cuda::memory::copy_peer_async;
use crate::cuda::timing::{EventRing, Marks};
use crate::cuda::{Context, Event, Stream};
use crate::error::{Error, Result};

impl MultiSimulation {
    /// Spans part `index` uses this step.
    fn spans(&self, index: usize, home: &StepBuffers) -> Result<PartSpans> {
        let part = &self.parts[index];
        let vector = Precision::F32.vector_bytes();
        let own = (part.partition.first_body as usize * vector, part.partition.bodies as usize * vector);
        match (&part.positions, &part.velocities) {
            (Some(positions), Some(velocities)) => {
                Ok((positions[self.current].span(), positions[1 - self.current].span(), velocities.span()))
            }
            _ => Ok((home.positions_in, home.positions_out, home.velocities.range(own.0, own.1)?)),
        }
    }

    fn check_home(&self, home: &StepBuffers) -> Result<()> {
        let needed = self.n as usize * Precision::F32.vector_bytes();
        for (name, span) in [
            ("positions in", home.positions_in),
            ("positions out", home.positions_out),
            ("velocities", home.velocities),
        ] {
            if span.bytes < needed {
                return Err(Error::InvalidInput(format!(
                    "n-body across devices: {name} buffer has {} bytes, {needed} needed",
                    span.bytes
                )));
            }
        }
        Ok(())
    }

    /// Accelerations of the current state, after a reset or load: copies the caller's positions
    /// (all) and velocities (each device's share) to the other devices, then on every device
    /// forces against all slices and a kick with dt = 0. Work waits for, and `stream` waits on,
    /// everything queued.
    pub fn initialise(&mut self, stream: &Stream, home: &StepBuffers, params: &Params) -> Result<()> {
        let result = self.initialise_inner(stream, home, params);
        self.home.make_current()?;
        result
    }

    fn initialise_inner(&mut self, stream: &Stream, home: &StepBuffers, params: &Params) -> Result<()> {
        self.check_home(home)?;
        let only_accelerations = Params { dt: 0.0, damping: 1.0, ..*params };
        self.home.make_current()?;
        self.begin.record(stream)?;
        for index in 0..self.parts.len() {
            let (positions, _, velocities) = self.spans(index, home)?;
            let (home_context, begin) = (&self.home, &self.begin);
            let (n, slices, slice_length) = (self.n, self.slices, self.slice_length);
            let part = &mut self.parts[index];
            part.context.make_current()?;
            part.stream.wait_event(begin)?;
            if index > 0 {
                let vector = Precision::F32.vector_bytes();
                let own = home
                    .velocities
                    .range(part.partition.first_body as usize * vector, part.partition.bodies as usize * vector)?;
                copy_peer_async(&part.stream, positions, &part.context, home.positions_in, home_context)?;
                copy_peer_async(&part.stream, velocities, &part.context, own, home_context)?;
            }
            let range = ForcesRange {
                n,
                slice_length,
                slices,
                first_body: part.partition.first_body,
                bodies: part.partition.bodies,
                first_slice: 0,
                slice_count: slices,
            };
            part.kernels.forces_range(&part.stream, positions, part.partial.span(), &range, params)?;
            part.kernels.kick(
                &part.stream,
                velocities,
                part.accelerations.span(),
                part.partial.span(),
                None,
                part.partition.bodies,
                slices,
                &only_accelerations,
            )?;
            part.finished.record(&part.stream)?;
        }
        self.home.make_current()?;
        for part in &self.parts {
            stream.wait_event(&part.finished)?;
        }
        Ok(())
    }

    /// One kick-drift-kick step of all bodies on all devices; `stream` (the caller's, in the first
    /// device's context) waits for all of it, so work queued on it afterwards (an unmap, the
    /// energy) sees the whole new state in `home`. GPU times come later from [`Self::poll_times`].
    pub fn step(&mut self, stream: &Stream, home: &StepBuffers, params: &Params, tag: u64) -> Result<()> {
        let result = self.step_inner(stream, home, params, tag);
        self.home.make_current()?;
        result?;
        self.current = 1 - self.current;
        Ok(())
    }

    fn step_inner(&mut self, stream: &Stream, home: &StepBuffers, params: &Params, tag: u64) -> Result<()> {
        self.check_home(home)?;
        let spans: Vec<PartSpans> =
            (0..self.parts.len()).map(|index| self.spans(index, home)).collect::<Result<_>>()?;
        self.home.make_current()?;
        self.begin.record(stream)?;
        let marks = self.timers.iter_mut().map(EventRing::begin).collect();
        let exchange_marks = self.exchange_timers.iter_mut().map(EventRing::begin).collect();
        let mut queued = QueuedStep {
            parts: &mut self.parts,
            sent: &self.sent,
            marks,
            exchange_marks,
            spans,
            params,
            n: self.n,
            slices: self.slices,
            slice_length: self.slice_length,
        };
        queued.drift_and_send(&self.begin)?;
        queued.forces_and_kick(home, &self.home, self.gather_velocities)?;
        drop(queued);
        for timer in self.timers.iter_mut().chain(self.exchange_timers.iter_mut()) {
            timer.commit(tag);
        }

        // Phase 3: the caller's stream waits for every device.
        self.home.make_current()?;
        for part in &self.parts {
            stream.wait_event(&part.finished)?;
        }
        Ok(())
    }
}

/// One step as it is queued: the parts, and beside them the timing marks begun for this step on
/// the simulation's rings (which is why the phases are not methods of [`MultiSimulation`]: the
/// open marks borrow its rings while the phases borrow its parts).
struct QueuedStep<'a> {
    parts: &'a mut [Part],
    sent: &'a [Event],
    marks: Vec<Marks<'a>>,
    exchange_marks: Vec<Marks<'a>>,
    spans: Vec<PartSpans>,
    params: &'a Params,
    n: u32,
    slices: u32,
    slice_length: u32,
}

impl QueuedStep<'_> {
    /// Phase 1, every device: once `begin` is passed, drift its bodies, then send them to every
    /// other device. All `sent` events are recorded before any device is told to wait on one (a
    /// wait binds to the latest record at the time of the call).
    fn drift_and_send(&mut self, begin: &Event) -> Result<()> {
        let vector = Precision::F32.vector_bytes();
        let contexts: Vec<Rc<Context>> = self.parts.iter().map(|part| part.context.clone()).collect();
        for (index, part) in self.parts.iter_mut().enumerate() {
            let (positions_in, positions_out, velocities) = self.spans[index];
            let own = (part.partition.first_body as usize * vector, part.partition.bodies as usize * vector);
            part.context.make_current()?;
            part.stream.wait_event(begin)?;
            self.marks[index].mark(0, &part.stream)?;
            part.kernels.drift(
                &part.stream,
                positions_in.range(own.0, own.1)?,
                positions_out.range(own.0, own.1)?,
                velocities,
                part.accelerations.span(),
                None,
                part.partition.bodies,
                self.params,
            )?;
            self.marks[index].mark(1, &part.stream)?;
            part.drifted.record(&part.stream)?;
            part.exchange.wait_event(&part.drifted)?;
            self.exchange_marks[index].mark(0, &part.exchange)?;
            let source = positions_out.range(own.0, own.1)?;
            for (other, target) in contexts.iter().enumerate() {
                if other != index {
                    let destination = self.spans[other].1.range(own.0, own.1)?;
                    copy_peer_async(&part.exchange, destination, target, source, &part.context)?;
                }
            }
            self.exchange_marks[index].mark(1, &part.exchange)?;
            self.sent[index].record(&part.exchange)?;
        }
        Ok(())
    }

    /// Phase 2, every device: forces against its own slices (the copies run meanwhile), then
    /// against each other device's slices once they have arrived, then the kick. With
    /// `gather_velocities`, every device but the first then copies its velocities into `home`'s.
    fn forces_and_kick(&mut self, home: &StepBuffers, home_context: &Rc<Context>, gather_velocities: bool) -> Result<()> {
        let vector = Precision::F32.vector_bytes();
        let (n, slices, slice_length) = (self.n, self.slices, self.slice_length);
        let count = self.parts.len();
        let partitions: Vec<Partition> = self.parts.iter().map(|part| part.partition).collect();
        for (index, part) in self.parts.iter_mut().enumerate() {
            let (_, positions_out, velocities) = self.spans[index];
            part.context.make_current()?;
            let own = partitions[index];
            let range = |of: &Partition| ForcesRange {
                n,
                slice_length,
                slices,
                first_body: own.first_body,
                bodies: own.bodies,
                first_slice: of.first_slice,
                slice_count: of.slice_count,
            };
            part.kernels.forces_range(&part.stream, positions_out, part.partial.span(), &range(&own), self.params)?;
            self.marks[index].mark(2, &part.stream)?;
            let others = self.sent.iter().zip(&partitions).enumerate().filter(|(other, _)| *other != index);
            for (slot, (_, (sent, partition))) in others.enumerate() {
                part.stream.wait_event(sent)?;
                self.marks[index].mark(3 + 2 * slot, &part.stream)?;
                part.kernels.forces_range(
                    &part.stream,
                    positions_out,
                    part.partial.span(),
                    &range(partition),
                    self.params,
                )?;
                self.marks[index].mark(4 + 2 * slot, &part.stream)?;
            }
            part.kernels.kick(
                &part.stream,
                velocities,
                part.accelerations.span(),
                part.partial.span(),
                None,
                own.bodies,
                slices,
                self.params,
            )?;
            self.marks[index].mark(2 * count + 1, &part.stream)?;
            part.kicked.record(&part.stream)?;
            part.exchange.wait_event(&part.kicked)?;
            if gather_velocities && index > 0 {
                let destination =
                    home.velocities.range(own.first_body as usize * vector, own.bodies as usize * vector)?;
                copy_peer_async(&part.exchange, destination, home_context, velocities, &part.context)?;
            }
            part.finished.record(&part.exchange)?;
        }
        Ok(())
    }
}
