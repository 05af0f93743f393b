//! A demo's route to the graphics API (GL or Vulkan): its CUDA stream (one per demo) and its
//! transfer path, which can be switched live with the buffers' contents kept.

use std::rc::Rc;

use crate::cuda::Stream;
use crate::error::Result;
use crate::guard::Guard;
use crate::runtime::{CudaRuntime, create_transfer};
use crate::scene::Graphics;
use crate::transfer::{SharedBuffer, Transfer, TransferKind, WhatIf};

/// A demo's route to the graphics API: its CUDA stream (one per demo) and its transfer path.
pub struct Pipeline {
    cuda: Option<Rc<CudaRuntime>>,
    stream: Option<Rc<Stream>>,
    transfer: Box<dyn Transfer>,
    what_if: WhatIf,
}

impl Pipeline {
    /// A pipeline on path `kind`, with a new stream when CUDA runs.
    pub fn new(cuda: Option<Rc<CudaRuntime>>, kind: TransferKind) -> Result<Self> {
        let stream = match &cuda {
            Some(cuda) => Some(Rc::new(Stream::new(&cuda.context)?)),
            None => None,
        };
        let transfer = create_transfer(cuda.as_deref(), stream.as_ref(), kind)?;
        Ok(Self { cuda, stream, transfer, what_if: WhatIf::default() })
    }

    /// CUDA, when the path in use computes with it (the CPU path does not, even with CUDA present).
    pub fn cuda(&self) -> Option<&Rc<CudaRuntime>> {
        self.cuda.as_ref().filter(|_| self.kind().uses_cuda())
    }

    /// The transfer path.
    pub fn transfer(&mut self) -> &mut dyn Transfer {
        self.transfer.as_mut()
    }

    /// The transfer path, to read.
    pub fn transfer_ref(&self) -> &dyn Transfer {
        self.transfer.as_ref()
    }

    /// The path in use.
    pub fn kind(&self) -> TransferKind {
        self.transfer.kind()
    }

    /// Moves `buffers` to path `kind`: reads each, recreates it on the new path, destroys the old
    /// one. On failure nothing changes.
    pub fn switch(
        &mut self,
        graphics: Graphics<'_>,
        kind: TransferKind,
        buffers: &mut [&mut SharedBuffer],
    ) -> Result<()> {
        if kind == self.kind() {
            return Ok(());
        }
        let mut next = create_transfer(self.cuda.as_deref(), self.stream.as_ref(), kind)?;
        // Buffers mapped ahead for a next frame go back to the graphics API first: it reads them below.
        self.transfer.release_prepared(buffers)?;
        self.transfer.synchronize()?;
        let mut replacements = Guard::new(Vec::with_capacity(buffers.len()), |made: Vec<SharedBuffer>| {
            made.into_iter().for_each(|buffer| buffer.destroy(graphics))
        });
        for buffer in buffers.iter() {
            let data = self.transfer.read_buffer(graphics, buffer)?;
            replacements.push(next.create_buffer(graphics, &data)?);
        }
        for (buffer, replacement) in buffers.iter_mut().zip(replacements.keep()) {
            std::mem::replace(*buffer, replacement).destroy(graphics);
        }
        next.set_what_if(self.what_if);
        self.transfer = next;
        Ok(())
    }

    /// Applies the learners' switches to this path and every later one.
    pub fn set_what_if(&mut self, what_if: WhatIf) {
        self.what_if = what_if;
        self.transfer.set_what_if(what_if);
    }

    /// The switches in effect.
    pub fn what_if(&self) -> WhatIf {
        self.what_if
    }

    /// What the switches did on the current path, in a sentence.
    pub fn what_if_report(&self) -> Option<String> {
        self.transfer.what_if_report()
    }
}
