//! What every demo is: the [`Demo`] trait, what a demo gets when it is created ([`DemoEnv`]), its
//! settings as one value the app passes around ([`DemoSpec`]), and its route to the screen
//! ([`Pipeline`]). The demos themselves live in `demos/`, one folder each, and import this; the
//! registry that lists them (`demos/mod.rs`) sits above them.

pub mod bench;
pub mod pipeline;
pub mod spec;

use std::rc::Rc;

pub use self::pipeline::Pipeline;
pub use self::spec::{DemoArgs, DemoSpec, Output, Settings};
use crate::camera::OrbitCamera;
use crate::cuda::LaunchConfig;
use crate::cuda::module::{CompiledModule, FunctionAttributes};
use crate::error::{Error, Result};
use crate::runtime::CudaRuntime;
pub use crate::scene::View;
use crate::scene::{Graphics, Scene};
use crate::sources::SourceFile;
use crate::stats::StageTimes;
use crate::transfer::{SharedBuffer, TransferKind};

/// What a demo gets when it is created.
pub struct DemoEnv<'a> {
    /// The graphics side (its context is current).
    pub graphics: Graphics<'a>,
    /// CUDA, if it runs.
    pub cuda: Option<Rc<CudaRuntime>>,
    /// The transfer path to start on.
    pub transfer: TransferKind,
    /// A user watches the frames in a window, which answers input only between them: a demo
    /// refuses work whose steps would leave it unresponsive. Offscreen runs (headless, benches,
    /// tests) do what they are asked, however slowly.
    pub window: bool,
}

/// Which kind of mouse drag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drag {
    /// Left button.
    Primary,
    /// Right or middle button, or shift + left.
    Secondary,
}

/// The kernel a demo runs now, for the panel.
#[derive(Debug, Clone)]
pub struct KernelInfo {
    /// Kernel name.
    pub name: String,
    /// Where its source came from.
    pub origin: String,
    /// The launch configuration in use.
    pub launch: LaunchConfig,
    /// `cuFuncGetAttribute` values.
    pub attributes: FunctionAttributes,
    /// The occupancy API's view of this launch.
    pub occupancy: Option<crate::cuda::module::Occupancy>,
}

/// Remembers the occupancy of the last kernel and launch configuration asked about, so the panel can show
/// it every frame without asking the driver every frame.
#[derive(Debug, Default)]
pub struct OccupancyCache(std::cell::RefCell<Option<(String, LaunchConfig, crate::cuda::module::Occupancy)>>);

impl OccupancyCache {
    /// The occupancy of `function` launched with `config`.
    pub fn get(
        &self,
        function: &crate::cuda::Function,
        config: &LaunchConfig,
    ) -> Option<crate::cuda::module::Occupancy> {
        if let Some((name, cached, occupancy)) = &*self.0.borrow()
            && name == function.name()
            && cached == config
        {
            return Some(*occupancy);
        }
        let occupancy = function.occupancy(config).ok()?;
        *self.0.borrow_mut() = Some((function.name().to_owned(), *config, occupancy));
        Some(occupancy)
    }
}

/// One demo. The required methods are what every demo does: say its name and settings
/// ([`Self::spec`]), step, say what to draw, lay out its panel, release what it holds, and show
/// what a transfer path carries of it ([`Self::pipeline`], [`Self::shared`]: switching paths,
/// handing buffers over and "use while mapped" are done from those once for all demos, by
/// [`DemoTransfer`]). The provided methods are hooks a demo may fill in (what changes with the
/// path, what to do at the end); what only some can do (be moved with the mouse, reload
/// kernels, open files) a caller asks for through the capability methods, which answer `None`
/// unless the demo has it.
pub trait Demo {
    /// Name, as on the command line.
    fn name(&self) -> &'static str;

    /// The demo's current settings, enough to start it again (after the CUDA context was lost).
    fn spec(&self) -> DemoSpec;

    /// As [`Self::spec`], and what the demo has computed so far, so that a demo started from it
    /// (in another window: the renderer switch) goes on where this one is. Most demos compute
    /// nothing beyond their settings.
    fn spec_with_state(&mut self, _graphics: Graphics<'_>) -> Result<DemoSpec> {
        Ok(self.spec())
    }

    /// The demo's transfer path and CUDA stream.
    fn pipeline(&self) -> &Pipeline;

    /// Hook: how many sets of buffers the frames use in turn (the pipeline depth), so the frame
    /// that last used this frame's buffers is that many back.
    fn buffer_sets(&self) -> u32 {
        1
    }

    /// What a transfer path moves of this demo: its pipeline, the buffers a path switch carries
    /// over, and the buffer the last frame drew.
    fn shared(&mut self) -> SharedParts<'_>;

    /// Hook: the path is about to change to `next` (the buffers are still on the old one). A
    /// failure leaves the demo where it was.
    fn before_path_change(&mut self, _graphics: Graphics<'_>, _next: TransferKind) -> Result<()> {
        Ok(())
    }

    /// Hook: the path changed from `previous` and the carried buffers moved with it; what else
    /// depends on the path (an engine on CUDA or the CPU, a kernel, an output made by the path)
    /// follows here. On failure the path is switched back to `previous`.
    fn path_changed(&mut self, _graphics: Graphics<'_>, _previous: TransferKind) -> Result<()> {
        Ok(())
    }

    /// Advances by `dt` seconds and writes frame `frame`'s buffers through the transfer path.
    fn step(&mut self, graphics: Graphics<'_>, frame: u64, dt: f32) -> Result<StageTimes>;

    /// What to draw of the current state into `view` (the graphics side draws it).
    fn scene(&mut self, view: &View) -> Scene<'_>;

    /// The demo's section of the side panel.
    fn panel(&mut self, ui: &mut egui::Ui);

    /// What the demo measured of itself beyond the frame timings, for `--stats` (`demo_stats`):
    /// e.g. n-body's method, energy drift and force error. `None`: nothing.
    fn stats(&self) -> Option<serde_json::Value> {
        None
    }

    /// Releases the graphics objects (the context must be current) and then everything else.
    fn destroy(self: Box<Self>, graphics: Graphics<'_>);

    /// The run is ending (headless run done, window closing): collect last results, write what
    /// the settings ask to be written. The graphics context is current. Most demos have nothing
    /// to do.
    fn finish(&mut self, _graphics: Graphics<'_>) -> Result<()> {
        Ok(())
    }

    /// Capability: the view moves with the mouse (an orbit camera, or panning an image).
    fn view_controls(&mut self) -> Option<&mut dyn ViewControls> {
        None
    }

    /// Capability: the demo's kernels can be inspected and replaced while it runs.
    fn live_kernels(&mut self) -> Option<&mut dyn LiveKernels> {
        None
    }

    /// Capability: the demo as itself, for a tool that drives one demo it knows (the soak drives
    /// the wave's buffers).
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }

    /// Capability: the demo opens files (dropped on the window or chosen in the panel).
    fn file_opener(&mut self) -> Option<&mut dyn OpensFiles> {
        None
    }
}

/// What a transfer path moves of a demo: its pipeline, the buffers a path switch carries over
/// with their contents, and the buffer the last frame drew.
pub struct SharedParts<'a> {
    /// The demo's transfer path and CUDA stream.
    pub pipeline: &'a mut Pipeline,
    /// The buffers a path switch carries over, contents kept (none for a demo that makes its
    /// output again every frame).
    pub carried: Vec<&'a mut SharedBuffer>,
    /// The buffer the last frame drew, the one "use while mapped" maps.
    pub drawn: Drawn<'a>,
}

/// Which buffer the last frame drew.
pub enum Drawn<'a> {
    /// The carried buffer at this index.
    Carried(usize),
    /// A buffer the switch does not carry (the demo makes it again on the new path).
    Other(&'a mut SharedBuffer),
    /// None that can be shown; the sentence says why.
    Unavailable(String),
}

/// What is done with every demo's transfer path, written once for all demos from what
/// [`Demo::shared`] hands over.
pub trait DemoTransfer {
    /// The demo's pipeline, to change it (the learners' switches, waiting for its GPU work).
    fn pipeline_mut(&mut self) -> &mut Pipeline;

    /// Moves the demo to path `kind`, the carried buffers with their contents; then what depends
    /// on the path follows ([`Demo::path_changed`]). On failure the demo stays where it was.
    fn switch_transfer(&mut self, graphics: Graphics<'_>, kind: TransferKind) -> Result<()>;

    /// Shows what the driver answers when a buffer CUDA holds is used (interop only): maps the
    /// buffer the last frame drew and asks for it again; the message says why when that can't be
    /// shown.
    fn use_while_mapped(&mut self) -> Result<String>;
}

impl<D: Demo + ?Sized> DemoTransfer for D {
    fn pipeline_mut(&mut self) -> &mut Pipeline {
        self.shared().pipeline
    }

    fn switch_transfer(&mut self, graphics: Graphics<'_>, kind: TransferKind) -> Result<()> {
        // Frames mapped ahead go back to the graphics API first: the switch (and the hooks) read
        // the buffers.
        let SharedParts { pipeline, mut carried, .. } = self.shared();
        pipeline.transfer().release_prepared(&mut carried)?;
        let previous = pipeline.kind();
        if kind == previous {
            return Ok(());
        }
        self.before_path_change(graphics, kind)?;
        let SharedParts { pipeline, mut carried, .. } = self.shared();
        pipeline.switch(graphics, kind, &mut carried)?;
        if let Err(error) = self.path_changed(graphics, previous) {
            let SharedParts { pipeline, mut carried, .. } = self.shared();
            pipeline.switch(graphics, previous, &mut carried)?;
            return Err(error);
        }
        Ok(())
    }

    fn use_while_mapped(&mut self) -> Result<String> {
        let SharedParts { pipeline, mut carried, drawn } = self.shared();
        pipeline.transfer().release_prepared(&mut carried)?;
        match drawn {
            Drawn::Carried(index) => pipeline.transfer().use_while_mapped(carried[index]),
            Drawn::Other(buffer) => pipeline.transfer().use_while_mapped(buffer),
            Drawn::Unavailable(why) => Err(Error::Unavailable(why)),
        }
    }
}

/// A view the mouse moves.
pub trait ViewControls {
    /// A drag of `dx`, `dy` pixels in a view `view_height` pixels high.
    fn drag(&mut self, drag: Drag, dx: f32, dy: f32, view_height: f32);

    /// Scroll-wheel steps (positive: closer).
    fn zoom(&mut self, steps: f32);
}

impl ViewControls for OrbitCamera {
    /// Primary orbits, secondary pans.
    fn drag(&mut self, drag: Drag, dx: f32, dy: f32, view_height: f32) {
        match drag {
            Drag::Primary => self.orbit(dx, dy),
            Drag::Secondary => self.pan(dx, dy, view_height),
        }
    }

    fn zoom(&mut self, steps: f32) {
        OrbitCamera::zoom(self, steps);
    }
}

/// Kernels that can be inspected and swapped while the demo runs.
pub trait LiveKernels {
    /// The kernel running now, when on CUDA.
    fn kernel_info(&self) -> Option<KernelInfo>;

    /// The kernel builds this demo runs now: each source file with its NVRTC options (none on the
    /// CPU backend). A watcher recompiles them when the file changes on disk.
    fn kernel_builds(&self) -> Vec<(SourceFile, Vec<String>)>;

    /// Replaces the running kernels of `file` by `compiled` (built with `options`). On failure the
    /// old kernels keep running.
    fn swap_kernels(&mut self, file: &str, options: &[String], compiled: &CompiledModule) -> Result<()>;
}

/// A demo that opens files.
pub trait OpensFiles {
    /// A file dropped on the window or chosen in the panel; opened at the next step.
    fn open_file(&mut self, path: &std::path::Path) -> Result<()>;
}
