//! A demo's settings as one value the app passes around: enough to start the demo, or to start
//! it again after the CUDA context was lost. Each demo's settings type implements [`Settings`];
//! [`DemoSpec`] holds any of them, so nothing below the registry has to list the demos.

use std::any::Any;
use std::fmt;

use std::path::PathBuf;

use super::{Demo, DemoEnv};
use crate::args::RunArgs;
use crate::error::Result;
use crate::output::OutputKind;

/// A demo's settings type.
pub trait Settings: fmt::Debug + Clone + PartialEq + 'static {
    /// The demo's name, as on the command line.
    const NAME: &'static str;

    /// Creates the demo with these settings.
    fn create(&self, env: &DemoEnv<'_>) -> Result<Box<dyn Demo>>;

    /// The same settings as the CPU backend can run them (all of them, unless a demo says otherwise).
    fn on_cpu(&self) -> Self {
        self.clone()
    }

    /// Files these settings ask to be written when the run ends, with their kind and flag, so
    /// they can be checked before the run starts.
    fn outputs(&self) -> Vec<Output> {
        Vec::new()
    }

    /// Frames a headless run needs when `--frames` is not given: `None` for the usual count. A
    /// demo whose result does not change from frame to frame (a filtered image) needs one.
    fn headless_frames(&self) -> Option<u32> {
        None
    }
}

/// A file a demo writes: its path, what it holds, and the flag that asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// Where.
    pub path: PathBuf,
    /// What it holds.
    pub kind: OutputKind,
    /// The flag that named it, e.g. `--output`.
    pub flag: &'static str,
}

/// [`Settings`] without its type, so that any demo's can be held in one [`DemoSpec`].
trait AnySettings: fmt::Debug {
    fn name(&self) -> &'static str;
    fn create(&self, env: &DemoEnv<'_>) -> Result<Box<dyn Demo>>;
    fn on_cpu(&self) -> Box<dyn AnySettings>;
    fn outputs(&self) -> Vec<Output>;
    fn headless_frames(&self) -> Option<u32>;
    fn clone_box(&self) -> Box<dyn AnySettings>;
    fn as_any(&self) -> &dyn Any;
    fn equals(&self, other: &dyn AnySettings) -> bool;
}

impl<T: Settings> AnySettings for T {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn create(&self, env: &DemoEnv<'_>) -> Result<Box<dyn Demo>> {
        Settings::create(self, env)
    }

    fn on_cpu(&self) -> Box<dyn AnySettings> {
        Box::new(Settings::on_cpu(self))
    }

    fn outputs(&self) -> Vec<Output> {
        Settings::outputs(self)
    }

    fn headless_frames(&self) -> Option<u32> {
        Settings::headless_frames(self)
    }

    fn clone_box(&self) -> Box<dyn AnySettings> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn equals(&self, other: &dyn AnySettings) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
}

/// A demo and its settings, as the command line or the panel describes it.
pub struct DemoSpec(Box<dyn AnySettings>);

impl DemoSpec {
    /// The demo `settings` belong to, with those settings.
    pub fn new<T: Settings>(settings: T) -> Self {
        Self(Box::new(settings))
    }

    /// The demo's name.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// The settings, when they are of demo `T`.
    pub fn settings<T: Settings>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref::<T>()
    }

    /// The same settings as the CPU backend can run them (e.g. n-body's split across CUDA devices
    /// is dropped: the CPU computes all bodies itself).
    pub fn on_cpu(&self) -> Self {
        Self(self.0.on_cpu())
    }

    /// Checks every file these settings will write (before the run, so a bad path costs nothing).
    pub fn check_outputs(&self) -> Result<()> {
        for output in self.0.outputs() {
            crate::output::check(&output.path, output.kind, output.flag)?;
        }
        Ok(())
    }

    /// Frames a headless run needs when `--frames` is not given (`None`: the usual count).
    pub fn headless_frames(&self) -> Option<u32> {
        self.0.headless_frames()
    }

    /// Creates the demo.
    pub fn create(&self, env: &DemoEnv<'_>) -> Result<Box<dyn Demo>> {
        self.0.create(env)
    }
}

impl Clone for DemoSpec {
    fn clone(&self) -> Self {
        Self(self.0.clone_box())
    }
}

impl PartialEq for DemoSpec {
    fn eq(&self, other: &Self) -> bool {
        self.0.equals(other.0.as_ref())
    }
}

impl fmt::Debug for DemoSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// What the demos' registry (`demos/mod.rs`) asks of each demo's command (`interop-lab wave …`).
pub trait DemoArgs {
    /// The run options, with the demo's flags that only some paths use, and the demo with the
    /// settings the flags ask for.
    fn demo_run(&self) -> Result<(RunArgs, DemoSpec)>;
}
