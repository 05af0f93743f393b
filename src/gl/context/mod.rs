//! Making GL contexts: in a window ([`window`]) or headless on an EGL device ([`headless`]).

pub mod headless;
pub mod window;

/// Core-profile versions tried in order. Mesa's software renderer stops at 4.5 and refuses 4.6,
/// and the app needs only 3.3, so it asks for the newest and steps down.
pub const GL_VERSIONS: [(u8, u8); 4] = [(4, 6), (4, 5), (4, 3), (3, 3)];
