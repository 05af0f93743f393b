//! The window's connection to the X server, watched for the server going away (killed, a remote
//! session closed, Xvfb ended). Xlib's default is to print "XIO: fatal IO error 11 …" or "X
//! connection to :1 broken" and call `exit(1)` from inside whichever call noticed, so nothing the
//! run was asked to write is written. libX11 1.7 and later let that exit be replaced
//! (`XSetIOErrorExitHandler`): here it marks the connection lost and returns. winit reads its
//! events through XCB, which may see the server gone first (winit then ends its loop), so XCB's
//! error state counts too. Once lost, no call may reach the X server again — Xlib's buffers are
//! gone and Mesa's GLX crashes in them — so the window writes what needs no display and leaves
//! everything else as it is. With an older libX11 the process still ends at the first call that
//! notices, saying so in one line.
//!
//! It sits beside [`super::catch_window_panics`] because both turn the windowing libraries'
//! failures into what the user reads, for the OpenGL and the Vulkan window alike (both draw on
//! winit's display).
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

use winit::raw_window_handle::{HasDisplayHandle, RawDisplayHandle};

/// `int (*)(Display *)`.
type IoErrorHandler = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `void (*)(Display *, void *user_data)`.
type IoErrorExitHandler = unsafe extern "C" fn(*mut c_void, *mut c_void);
/// `XSetIOErrorHandler`.
type SetIoErrorHandler = unsafe extern "C" fn(Option<IoErrorHandler>) -> Option<IoErrorHandler>;
/// `XSetIOErrorExitHandler` (libX11 1.7+).
type SetIoErrorExitHandler = unsafe extern "C" fn(*mut c_void, Option<IoErrorExitHandler>, *mut c_void);
/// `XGetXCBConnection`: the XCB connection under an Xlib display.
type XcbConnectionOf = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
/// `xcb_connection_has_error`: non-zero once the connection is broken.
type XcbHasError = unsafe extern "C" fn(*mut c_void) -> c_int;

/// The X server a window draws on, and whether it went away.
#[derive(Debug)]
pub struct XServer {
    /// Set by Xlib's exit handler when the connection broke; lives as long as the process,
    /// because Xlib keeps the pointer for as long as the display (winit never closes it).
    lost: &'static AtomicBool,
    /// XCB's view of the same connection, where it could be had.
    xcb: Option<XcbConnection>,
    /// The display as `DISPLAY` named it, e.g. `:1`.
    name: String,
}

/// The XCB connection under winit's display, with the one call that reads its error state.
#[derive(Debug)]
struct XcbConnection {
    /// Valid as long as the display, which winit keeps for the whole process.
    connection: NonNull<c_void>,
    has_error: XcbHasError,
    /// Keeps `has_error` loaded.
    _library: libloading::Library,
}

impl XServer {
    /// Watches the X connection under `display` (an event loop or a window). `None` where the
    /// window is not on X (Wayland), or where libX11 is older than 1.7 and cannot be told not to
    /// exit: then the process still ends when the server goes away, saying so in one line.
    pub fn watch(display: &impl HasDisplayHandle) -> Option<Self> {
        let handle = display.display_handle().ok()?.as_raw();
        let RawDisplayHandle::Xlib(xlib) = handle else { return None };
        let display = xlib.display?.as_ptr();
        let name = std::env::var("DISPLAY").unwrap_or_default();
        // SAFETY: libX11 is already loaded by winit (this display is its); opening it again only
        // takes a reference, and the library stays loaded while winit holds it.
        let library = unsafe { libloading::Library::new("libX11.so.6") }.ok()?;
        // SAFETY: the symbols have these C signatures (Xlib.h); the handlers stay installed for
        // the life of the process, and `lost` outlives the display it is handed with.
        unsafe {
            let set_handler = library.get::<SetIoErrorHandler>(b"XSetIOErrorHandler\0").ok()?;
            let Ok(set_exit_handler) = library.get::<SetIoErrorExitHandler>(b"XSetIOErrorExitHandler\0") else {
                log::info!("libX11 is older than 1.7: losing the X server will end the process at once");
                set_handler(Some(say_it_and_exit));
                return None;
            };
            let lost: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
            set_handler(Some(say_nothing));
            set_exit_handler(display, Some(mark_lost), std::ptr::from_ref(lost).cast_mut().cast());
            Some(Self { lost, xcb: XcbConnection::under(display), name })
        }
    }

    /// Whether the connection broke: nothing more can be drawn, and no call may reach the X
    /// server (a window's size, a swap, releasing the window).
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst) || self.xcb.as_ref().is_some_and(XcbConnection::broken)
    }

    /// The display as `DISPLAY` named it, e.g. `:1`.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl XcbConnection {
    /// The XCB connection under the Xlib `display`, if libX11-xcb and libxcb can be loaded (both
    /// are, by winit).
    fn under(display: *mut c_void) -> Option<Self> {
        // SAFETY: loading libraries winit has already loaded; the symbols have these C signatures
        // (Xlib-xcb.h, xcb.h), and `display` is winit's open display.
        unsafe {
            let xlib_xcb = libloading::Library::new("libX11-xcb.so.1").ok()?;
            let connection_of = xlib_xcb.get::<XcbConnectionOf>(b"XGetXCBConnection\0").ok()?;
            let connection = NonNull::new(connection_of(display))?;
            let library = libloading::Library::new("libxcb.so.1").ok()?;
            let has_error = *library.get::<XcbHasError>(b"xcb_connection_has_error\0").ok()?;
            Some(Self { connection, has_error, _library: library })
        }
    }

    fn broken(&self) -> bool {
        // SAFETY: the connection lives as long as winit's display (the whole process); reading
        // its error state is thread-safe and never blocks.
        unsafe { (self.has_error)(self.connection.as_ptr()) != 0 }
    }
}

/// Xlib's IO error handler while [`XServer`] watches: the window says what happened once the
/// call that noticed it has returned.
unsafe extern "C" fn say_nothing(_display: *mut c_void) -> c_int {
    0
}

/// Xlib's IO error handler where it cannot be kept from exiting (libX11 < 1.7): one sentence
/// instead of Xlib's "XIO: fatal IO error".
unsafe extern "C" fn say_it_and_exit(_display: *mut c_void) -> c_int {
    use std::io::Write;
    let name = std::env::var("DISPLAY").unwrap_or_default();
    // Not `eprintln!`: a closed stderr must not panic across this C frame.
    let _ = writeln!(std::io::stderr(), "error: the X server at {name} went away: nothing more is written");
    0
}

/// Xlib's exit handler: marks the connection lost and returns, instead of `exit(1)`.
unsafe extern "C" fn mark_lost(_display: *mut c_void, lost: *mut c_void) {
    // SAFETY: `lost` is the leaked `AtomicBool` of `XServer::watch`, alive for the whole process.
    let lost = unsafe { &*lost.cast_const().cast::<AtomicBool>() };
    lost.store(true, Ordering::SeqCst);
}
