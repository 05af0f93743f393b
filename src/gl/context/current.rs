//! The EGL binding of this thread — display, draw and read surfaces, context — saved before, and
//! put back after, work of another API that may change it. NVIDIA's drivers keep EGL's and
//! Vulkan's per-thread state in one library; offscreen (EGL) on NVIDIA, GL stopped making objects
//! right after a Vulkan device was opened for the external path's semaphores ("Unable to create
//! Framebuffer object"), while a GLX window went on. `vk` wraps the opening and closing of its
//! instances and devices in an [`EglBinding`], so whatever the driver does to the thread's
//! binding is undone before GL is used again, and said in the log when it happens.
#![allow(unsafe_code)]

use std::ffi::c_void;

/// `RTLD_NOLOAD` (glibc, Linux): open a library only if the process has it loaded already.
const RTLD_NOLOAD: i32 = 0x4;
/// `EGL_DRAW` and `EGL_READ` of `eglGetCurrentSurface`.
const EGL_DRAW: i32 = 0x3059;
const EGL_READ: i32 = 0x305A;
/// `EGL_SUCCESS`.
const EGL_SUCCESS: i32 = 0x3000;

type Handle = *mut c_void;
type GetCurrent = unsafe extern "C" fn() -> Handle;
type GetCurrentSurface = unsafe extern "C" fn(i32) -> Handle;
type MakeCurrent = unsafe extern "C" fn(Handle, Handle, Handle, Handle) -> u32;
type GetError = unsafe extern "C" fn() -> i32;

/// The entry points, from the process's own libEGL.
struct Egl {
    get_display: GetCurrent,
    get_context: GetCurrent,
    get_surface: GetCurrentSurface,
    make_current: MakeCurrent,
    get_error: GetError,
    /// Keeps the library loaded while the pointers above are used.
    _library: libloading::os::unix::Library,
}

/// One thread's EGL binding at one moment, to be put back.
pub struct EglBinding {
    egl: Egl,
    display: Handle,
    draw: Handle,
    read: Handle,
    context: Handle,
}

/// What [`EglBinding::restore`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// The binding had not changed.
    Unchanged,
    /// It had changed and was put back.
    PutBack,
    /// It had changed and could not be put back: `eglMakeCurrent` failed with this EGL error
    /// (EGL_NOT_INITIALIZED: the display itself was terminated under the context).
    Failed(i32),
}

impl Egl {
    fn load() -> Option<Self> {
        // SAFETY: RTLD_NOLOAD only returns a handle to a libEGL this process has loaded already
        // (so no library initialiser runs here); the symbols have the EGL 1.4 signatures above.
        unsafe {
            let library = libloading::os::unix::Library::open(
                Some("libEGL.so.1"),
                libloading::os::unix::RTLD_LAZY | RTLD_NOLOAD,
            )
            .ok()?;
            let get_display = *library.get::<GetCurrent>(b"eglGetCurrentDisplay\0").ok()?;
            let get_context = *library.get::<GetCurrent>(b"eglGetCurrentContext\0").ok()?;
            let get_surface = *library.get::<GetCurrentSurface>(b"eglGetCurrentSurface\0").ok()?;
            let make_current = *library.get::<MakeCurrent>(b"eglMakeCurrent\0").ok()?;
            let get_error = *library.get::<GetError>(b"eglGetError\0").ok()?;
            Some(Self { get_display, get_context, get_surface, make_current, get_error, _library: library })
        }
    }
}

impl EglBinding {
    /// This thread's EGL binding now; `None` when the process has no libEGL loaded or no EGL
    /// context is current on this thread (nothing to keep).
    pub fn current() -> Option<Self> {
        let egl = Egl::load()?;
        // SAFETY: the eglGetCurrent* queries take no arguments but the surface kind, and only
        // read this thread's state.
        let (display, draw, read, context) = unsafe {
            ((egl.get_display)(), (egl.get_surface)(EGL_DRAW), (egl.get_surface)(EGL_READ), (egl.get_context)())
        };
        (!context.is_null()).then_some(Self { egl, display, draw, read, context })
    }

    /// Makes the saved binding current again if it no longer is; says what it found.
    pub fn restore(&self) -> Restored {
        // SAFETY: as in `current`.
        let now = unsafe { ((self.egl.get_display)(), (self.egl.get_context)()) };
        if now == (self.display, self.context) {
            return Restored::Unchanged;
        }
        // SAFETY: the handles were current on this thread when saved and the app has destroyed
        // none of them since (the caller holds the context); eglMakeCurrent checks them anyway and
        // fails with an error code rather than crashing on a terminated display.
        let made = unsafe { (self.egl.make_current)(self.display, self.draw, self.read, self.context) };
        // SAFETY: no arguments; reads this thread's last EGL error.
        let error = unsafe { (self.egl.get_error)() };
        if made != 0 && error == EGL_SUCCESS { Restored::PutBack } else { Restored::Failed(error) }
    }
}

/// Runs `work` (`what`, for the log), then puts this thread's EGL binding back as it was before
/// it, when `work` changed it.
pub fn keeping_egl_binding<T>(what: &str, work: impl FnOnce() -> T) -> T {
    let saved = EglBinding::current();
    let result = work();
    match saved.as_ref().map(EglBinding::restore) {
        None | Some(Restored::Unchanged) => {}
        Some(Restored::PutBack) => {
            log::info!("{what} changed this thread's current EGL context (NVIDIA's driver does): made it current again")
        }
        Some(Restored::Failed(error)) => log::error!(
            "{what} changed this thread's current EGL context, and it could not be made current again (EGL error \
             {error:#x}): OpenGL calls on this thread will fail"
        ),
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_other_work_dropped_is_put_back() {
        let gl = crate::gl::context::headless::HeadlessGl::new(None).expect("an EGL device (Mesa's software one)");
        let saved = EglBinding::current().expect("a headless context is current");
        assert_eq!(saved.restore(), Restored::Unchanged);
        // What a driver that takes the thread's binding does: it releases it.
        let release = || {
            // SAFETY: releasing this thread's binding is always allowed.
            let released = unsafe {
                (saved.egl.make_current)(saved.display, std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut())
            };
            assert_eq!(released, 1, "released");
            assert!(EglBinding::current().is_none(), "no context is current inside the work");
        };
        keeping_egl_binding("a test", release);
        let now = EglBinding::current().expect("a context is current again");
        assert_eq!((now.display, now.context), (saved.display, saved.context), "the same one");
        drop(gl);
    }
}
