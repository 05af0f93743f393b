//! What both the OpenGL and the Vulkan window share below the renderers: winit's failures turned
//! into what the user reads ([`catch_window_panics`], [`winit_error_text`]), and the window's X
//! connection, watched for the server going away ([`x_server`]). Neither names a graphics API, so
//! the window shell (`app/`) and `doctor` reach them without going through GL.

pub mod x_server;

use crate::error::{Error, Result};

/// Runs `f`, which drives winit, and turns a panic inside it into an error that names the fix.
/// winit (0.30) unwraps some failures of the libraries it loads at run time — the X keyboard
/// library `libxkbcommon-x11` and its keyboard data above all — instead of returning them; the
/// user gets a sentence instead of a backtrace into a dependency, and the default panic message
/// is kept out of the terminal while `f` runs.
pub fn catch_window_panics<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    install_quiet_panic_hook();
    CATCHING.with(|catching| catching.set(catching.get() + 1));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CATCHING.with(|catching| catching.set(catching.get() - 1));
    outcome.unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("a panic without a message");
        Err(Error::Window(window_panic_message(what)))
    })
}

/// The sentence for a panic inside the windowing libraries.
fn window_panic_message(what: &str) -> String {
    if what.contains("XKB") || what.contains("xkb") {
        format!(
            "the X keyboard support could not be loaded ({what}): install libxkbcommon-x11-0 and the keyboard data \
             (xkb-data), e.g. `apt-get install libxkbcommon-x11-0 xkb-data`, or run headless (`--headless`)"
        )
    } else {
        format!(
            "the windowing library failed ({what}); run headless (`--headless`), or report it with `interop-lab doctor`"
        )
    }
}

thread_local! {
    /// Depth of [`catch_window_panics`] calls on this thread: while above zero, panics are caught
    /// and said by the caller, so the panic hook stays quiet.
    static CATCHING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

fn install_quiet_panic_hook() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CATCHING.with(|catching| catching.get()) > 0 {
                log::debug!("caught in the windowing libraries: {info}");
            } else {
                previous(info);
            }
        }));
    });
}

/// winit's error text without the source location it prefixes (`os error at <file>:<line>: `),
/// which points into winit's own source, not at anything the user can act on.
pub fn winit_error_text(error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    match text.strip_prefix("os error at ").and_then(|rest| rest.split_once(": ")) {
        Some((_, message)) => message.trim_end_matches('.').to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn winit_errors_lose_their_source_location_and_panics_become_errors() {
        let text = "os error at /root/.cargo/registry/src/x/winit-0.30.13/src/platform_impl/linux/mod.rs:765: \
                    neither WAYLAND_DISPLAY nor WAYLAND_SOCKET nor DISPLAY is set.";
        assert_eq!(winit_error_text(&text), "neither WAYLAND_DISPLAY nor WAYLAND_SOCKET nor DISPLAY is set");
        assert_eq!(winit_error_text(&"plain"), "plain");
        let caught: Result<()> =
            catch_window_panics(|| panic!("called `Result::unwrap()` on an `Err` value: XKBNotFound"));
        let said = caught.expect_err("a panic becomes an error").to_string();
        assert!(said.contains("xkb-data") && said.contains("--headless"), "{said}");
        assert_eq!(catch_window_panics(|| Ok(7)).expect("no panic"), 7);
    }
}
