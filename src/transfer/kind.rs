//! Which path a frame's data takes ([`TransferKind`]: its names, what it needs, and the edges
//! the frame anatomy draws for it) and the learners' switches that break one of its rules on
//! purpose ([`WhatIf`]).

use serde::Serialize;

use crate::anatomy::{EdgeRule, FromFrame};
use crate::stats::Stage;

/// Which path a frame's data takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferKind {
    /// CUDA writes the GL buffer in place (register once, map / unmap each frame).
    Interop,
    /// CUDA writes device memory; it is copied through pinned host memory into the graphics API's
    /// buffer (GL or Vulkan).
    HostCopy,
    /// As `HostCopy`, through ordinary (pageable) host memory: what a naive copy costs.
    HostCopyPageable,
    /// CUDA writes memory it exported and GL imported (`GL_EXT_memory_object_fd`): no map, no unmap.
    External,
    /// The CPU computes and uploads; no CUDA.
    Cpu,
    /// Vulkan allocates, CUDA imports; timeline semaphores order the two (the Vulkan renderer).
    Vulkan,
    /// As `External`, ordered on the GPU by semaphores GL and CUDA import (`GL_EXT_semaphore_fd`)
    /// instead of host waits.
    ExternalSemaphores,
}

impl TransferKind {
    /// How this path orders a frame's stages across the APIs: the frame anatomy's edges.
    pub fn edges(self) -> &'static [EdgeRule] {
        self.edges_with(WhatIf::default())
    }

    /// As [`Self::edges`], with `what_if` in force: where a switch takes an ordering away, its
    /// edge stays, labelled as not waited for, so the view and the trace show the draw starting
    /// before the signal it skipped whenever it does.
    pub fn edges_with(self, what_if: WhatIf) -> &'static [EdgeRule] {
        const fn rule(from: Stage, to: Stage, label: &'static str) -> EdgeRule {
            EdgeRule { from, to, label, from_frame: FromFrame::This, via: None }
        }
        const SIGNAL: Option<&str> = Some("cuSignalExternalSemaphoresAsync");
        const WAIT: Option<&str> = Some("cuWaitExternalSemaphoresAsync");
        const fn signalled(label: &'static str) -> EdgeRule {
            EdgeRule { via: SIGNAL, ..rule(Stage::Kernel, Stage::Draw, label) }
        }
        // From the draw of the frame that last used the buffers to this frame's kernel: what
        // keeps CUDA from writing a buffer the graphics API still reads.
        const fn after_last_draw(from_frame: FromFrame, via: Option<&'static str>, label: &'static str) -> EdgeRule {
            EdgeRule { from: Stage::Draw, to: Stage::Kernel, label, from_frame, via }
        }
        const INTEROP: &[EdgeRule] = &[
            rule(Stage::Map, Stage::Kernel, "mapped: the kernel may write"),
            rule(Stage::Unmap, Stage::Draw, "unmapped: the draw may read"),
            after_last_draw(FromFrame::LastUseAtDepthOne, None, "GL has finished with the buffer: the map returns"),
        ];
        const HOST_COPY: &[EdgeRule] = &[
            rule(Stage::Kernel, Stage::Download, "stream order: then the copy"),
            rule(Stage::Download, Stage::Upload, "the host holds the copy: upload"),
            rule(Stage::Upload, Stage::Draw, "uploaded: the draw may read"),
        ];
        const HOST_WAITS: &[EdgeRule] = &[
            rule(Stage::Kernel, Stage::Sync, "the host waits for the stream"),
            rule(Stage::Sync, Stage::Draw, "waited: the draw may read"),
            after_last_draw(FromFrame::LastUse, None, "the host waited for GL's fence: the kernel may write"),
        ];
        const SEMAPHORES: &[EdgeRule] = &[
            signalled("CUDA signals the semaphore the draw waits for"),
            after_last_draw(FromFrame::LastUse, WAIT, "GL signals it has finished with the buffers; CUDA waits"),
        ];
        const VULKAN_READ: EdgeRule =
            after_last_draw(FromFrame::LastUse, WAIT, "Vulkan signals it has read the buffer; CUDA waits");
        const VULKAN: &[EdgeRule] = &[signalled("CUDA signals the timeline value the draw waits for"), VULKAN_READ];
        const VULKAN_NO_WAIT: &[EdgeRule] = &[
            signalled("what if: the draw does not wait for CUDA's signal (torn where this points back)"),
            VULKAN_READ,
        ];
        const CPU: &[EdgeRule] = &[
            rule(Stage::Kernel, Stage::Upload, "computed: upload"),
            rule(Stage::Upload, Stage::Draw, "uploaded: the draw may read"),
        ];
        match self {
            Self::Interop => INTEROP,
            Self::HostCopy | Self::HostCopyPageable => HOST_COPY,
            Self::External => HOST_WAITS,
            Self::ExternalSemaphores => SEMAPHORES,
            Self::Vulkan if what_if.skip_semaphore_wait => VULKAN_NO_WAIT,
            Self::Vulkan => VULKAN,
            Self::Cpu => CPU,
        }
    }

    /// A short label for the panel.
    pub fn label(self) -> &'static str {
        match self {
            Self::Interop => "GL interop",
            Self::HostCopy => "host copy (pinned)",
            Self::HostCopyPageable => "host copy (pageable)",
            Self::External => "external memory",
            Self::Cpu => "CPU",
            Self::Vulkan => "Vulkan external memory",
            Self::ExternalSemaphores => "external + semaphores",
        }
    }

    /// One sentence for learners.
    pub fn explanation(self) -> &'static str {
        match self {
            Self::Interop => {
                "The GL buffer is registered with CUDA once; each frame CUDA maps it, the kernel writes it in \
                 place, and unmapping hands it back to GL. The data never leaves the GPU."
            }
            Self::HostCopy => {
                "The kernel writes CUDA memory, which is copied to pinned host memory and then uploaded into \
                 the GL buffer: two trips over PCIe per frame."
            }
            Self::HostCopyPageable => {
                "As host copy, but through ordinary pageable memory: the driver stages each copy through its \
                 own pinned buffer, so it is slower still."
            }
            Self::External => {
                "CUDA allocates exportable memory (cuMemCreate), hands GL a file descriptor, and GL builds the \
                 buffer on that memory: both see the same bytes with no map or unmap. Ordering is the app's \
                 job: wait for GL before the kernel, for the kernel before GL draws."
            }
            Self::Cpu => {
                "No CUDA: the CPU computes the data and uploads it: into the GL buffer with glBufferSubData, or \
                 into the host-visible Vulkan memory the draw reads."
            }
            Self::Vulkan => {
                "Vulkan allocates exportable memory and CUDA imports it once (cuImportExternalMemory). Two timeline \
                 semaphores order them on the GPU: CUDA waits until Vulkan has read the buffer, writes, signals; \
                 Vulkan's submission waits for that signal. The host waits for neither."
            }
            Self::ExternalSemaphores => {
                "The external-memory buffers, ordered on the GPU instead of the host: GL signals a semaphore when \
                 it is done with the buffers, CUDA's stream waits for it, writes, and signals a second one that \
                 GL's draw waits for. Vulkan makes the two semaphores (neither GL nor CUDA can make one to share); \
                 GL imports them with GL_EXT_semaphore_fd and CUDA with cuImportExternalSemaphore."
            }
        }
    }

    /// Whether the path computes with CUDA.
    pub fn uses_cuda(self) -> bool {
        !matches!(self, Self::Cpu)
    }
}

impl std::fmt::Display for TransferKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Switches for learners: each breaks or slows one rule of the transfer paths on purpose, so its
/// effect can be seen. Paths a switch does not concern ignore it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WhatIf {
    /// Interop: unregister and register the buffers every frame instead of once.
    pub register_every_frame: bool,
    /// Host copy: upload the staging memory without waiting for the copy into it to finish.
    pub skip_copy_sync: bool,
    /// Vulkan: submit the frame without waiting for CUDA's semaphore signal.
    pub skip_semaphore_wait: bool,
}

impl WhatIf {
    /// For each switch that is on but does nothing on `kind`, a sentence that says so.
    pub fn inapplicable(&self, kind: TransferKind) -> Vec<String> {
        let mut notes = Vec::new();
        if self.register_every_frame && kind != TransferKind::Interop {
            notes.push(format!(
                "what if register-every-frame: it concerns GL interop, and this runs on {}: no effect until the path \
                 is GL interop",
                kind.label()
            ));
        }
        if self.skip_copy_sync && !matches!(kind, TransferKind::HostCopy | TransferKind::HostCopyPageable) {
            notes.push(format!(
                "what if skip-copy-sync: it concerns the host-copy paths, and this runs on {}: no effect until the \
                 path is a host copy",
                kind.label()
            ));
        }
        if self.skip_semaphore_wait && kind != TransferKind::Vulkan {
            notes.push(format!(
                "what if skip-semaphore-wait: it concerns the Vulkan path (--renderer vulkan), and this runs on {}: no \
                 effect until the path is Vulkan",
                kind.label()
            ));
        }
        notes
    }
}
