//! The demos the app knows, one folder each behind the [`Demo`](crate::demo::Demo) trait. A demo
//! owns its kernels, its GL objects, its panel and its CPU twin; this registry is the one place
//! that names them all, so adding a demo touches this file and its own folder.

pub mod blur;
pub mod nbody;
pub mod wave;

use crate::demo::DemoSpec;
use crate::{Error, Result};

/// The demos the app knows, in menu order.
pub const NAMES: &[&str] = &["nbody", "blur", "wave"];

/// Demo `name` with its default settings.
pub fn default_spec(name: &str) -> Result<DemoSpec> {
    match name {
        "blur" => Ok(DemoSpec::new(blur::BlurSettings::default())),
        "nbody" => Ok(DemoSpec::new(nbody::NBodySettings::default())),
        "wave" => Ok(DemoSpec::new(wave::WaveSettings::default())),
        other => Err(Error::InvalidInput(format!("unknown demo {other:?}; the demos are {NAMES:?}"))),
    }
}
