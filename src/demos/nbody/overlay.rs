//! The tree on screen: the shared buffer the tree's boxes are written into each step (by CUDA,
//! or by the CPU backend) and drawn from as lines over the bodies (`tree::boxes`).

use super::NBody;
use super::engine::Engine;
use super::tree::Method;
use super::tree::boxes::{self, BOX_BYTES, MAX_LEVELS, VERTICES_PER_BOX};
use crate::error::Result;
use crate::scene::{Boxes, Graphics};
use crate::transfer::SharedBuffer;

/// The overlay's buffer: room for `levels` levels of the tree of `bodies` bodies.
pub(super) struct TreeBoxes {
    buffer: SharedBuffer,
    bodies: u32,
    levels: u32,
    /// A step has written the buffer.
    written: bool,
}

impl TreeBoxes {
    /// The buffer, to be written this step.
    pub(super) fn buffer(&mut self) -> &mut SharedBuffer {
        &mut self.buffer
    }

    /// The buffer, to be destroyed.
    pub(super) fn into_buffer(self) -> SharedBuffer {
        self.buffer
    }

    /// The levels the buffer has room for: the ones each step writes.
    pub(super) fn levels(&self) -> u32 {
        self.levels
    }

    /// A step wrote the buffer.
    pub(super) fn wrote(&mut self) {
        self.written = true;
    }

    /// The lines to draw, once a step has written them.
    pub(super) fn drawn(&self) -> Option<Boxes<'_>> {
        let boxes = boxes::capacity(self.levels, self.bodies);
        (self.written && boxes > 0).then(|| Boxes { vertices: &self.buffer, count: boxes * VERTICES_PER_BOX as u32 })
    }
}

impl NBody {
    /// The levels this step draws: the overlay is on, the method is the tree and a step runs.
    pub(super) fn tree_levels_drawn(&self) -> Option<u32> {
        let on = self.settings.draw_tree
            && self.settings.method == Method::Tree
            && !matches!(self.engine, Engine::Compiling(_));
        on.then_some(self.settings.tree_levels.clamp(1, MAX_LEVELS))
    }

    /// Makes the overlay's buffer when the overlay is on (again for another body count or
    /// depth), and frees it when off: after it, the overlay has a buffer exactly when it is on.
    pub(super) fn prepare_tree_boxes(&mut self, graphics: Graphics<'_>) -> Result<()> {
        let n = self.len();
        let wanted = self.tree_levels_drawn();
        let keep = self.tree_boxes.as_ref().is_some_and(|b| b.bodies == n && Some(b.levels) == wanted);
        if keep {
            return Ok(());
        }
        if self.tree_boxes.is_some() {
            self.pipeline.transfer().synchronize()?; // the last step's writes are done
            self.drop_tree_boxes(graphics);
        }
        let Some(levels) = wanted else { return Ok(()) };
        let slots = boxes::capacity(levels, n).max(1) as usize;
        let buffer = self.pipeline.transfer().create_buffer(graphics, &vec![0u8; slots * BOX_BYTES])?;
        self.tree_boxes = Some(TreeBoxes { buffer, bodies: n, levels, written: false });
        Ok(())
    }

    /// Draws the tree's top `levels` levels over the bodies from the next step on (`None`: not).
    pub fn draw_tree(&mut self, levels: Option<u32>) {
        self.settings.draw_tree = levels.is_some();
        if let Some(levels) = levels {
            self.settings.tree_levels = levels.clamp(1, MAX_LEVELS);
        }
    }

    /// The overlay's vertices as the last step wrote them (`None`: the overlay is off or no
    /// step has written it yet), for tests.
    pub fn read_tree_boxes(&mut self, graphics: Graphics<'_>) -> Result<Option<Vec<[f32; 4]>>> {
        self.release_prepared()?;
        self.pipeline.transfer().synchronize()?;
        let Some(boxes) = self.tree_boxes.as_ref().filter(|boxes| boxes.written) else { return Ok(None) };
        let bytes = self.pipeline.transfer().read_buffer(graphics, &boxes.buffer)?;
        Ok(Some(bytemuck::pod_collect_to_vec(&bytes)))
    }

    /// Refills the overlay's buffer with NaN (before a step that must write all of it), for
    /// tests; nothing when the overlay has no buffer.
    pub(super) fn poison_tree_boxes(&mut self, graphics: Graphics<'_>) -> Result<()> {
        let Some(boxes) = self.tree_boxes.as_mut() else { return Ok(()) };
        let floats = boxes.buffer.len() / 4;
        let poison = vec![f32::NAN; floats];
        let buffer = self.pipeline.transfer().create_buffer(graphics, bytemuck::cast_slice(&poison))?;
        std::mem::replace(&mut boxes.buffer, buffer).destroy(graphics);
        Ok(())
    }

    /// Frees the overlay's buffer (off, another body count, or before a change of path: the
    /// buffer belongs to the path that made it).
    pub(super) fn drop_tree_boxes(&mut self, graphics: Graphics<'_>) {
        if let Some(boxes) = self.tree_boxes.take() {
            boxes.buffer.destroy(graphics);
        }
    }
}
