//! A scope guard for objects that are released by an explicit call (GL objects, shared buffers:
//! they need the graphics context, so `Drop` can't release them by itself). A constructor that
//! builds several such objects wraps each in a [`Guard`] as it is made; when a later step fails
//! and `?` returns, the guards release what was built, in reverse order; on success
//! [`Guard::keep`] takes the objects out. This replaces hand-written cleanup on every error path.
//!
//! ```
//! use interop_lab::guard::Guard;
//! let released = std::cell::Cell::new(0);
//! let build = |fail: bool| -> Result<u32, &'static str> {
//!     let first = Guard::new(1, |_| released.set(released.get() + 1));
//!     if fail {
//!         return Err("the second object could not be made"); // `first` is released here
//!     }
//!     Ok(first.keep())
//! };
//! assert_eq!(build(false), Ok(1));
//! assert_eq!(released.get(), 0);
//! assert!(build(true).is_err());
//! assert_eq!(released.get(), 1);
//! ```

use std::ops::{Deref, DerefMut};

/// Holds `value` and runs `release` on it when dropped, unless [`Guard::keep`] took it out.
#[must_use = "a guard dropped at once releases its value at once"]
pub struct Guard<T, F: FnOnce(T)> {
    armed: Option<(T, F)>,
}

impl<T, F: FnOnce(T)> Guard<T, F> {
    /// Guards `value`: `release(value)` runs when the guard is dropped.
    pub fn new(value: T, release: F) -> Self {
        Self { armed: Some((value, release)) }
    }

    /// Disarms the guard and hands the value back, unreleased.
    pub fn keep(mut self) -> T {
        match self.armed.take() {
            Some((value, _)) => value,
            // `armed` is only emptied here and in `drop`, each of which runs once.
            None => unreachable!("a guard is kept or dropped once"),
        }
    }
}

impl<T, F: FnOnce(T)> Deref for Guard<T, F> {
    type Target = T;

    fn deref(&self) -> &T {
        match &self.armed {
            Some((value, _)) => value,
            None => unreachable!("a guard holds its value until kept or dropped"),
        }
    }
}

impl<T, F: FnOnce(T)> DerefMut for Guard<T, F> {
    fn deref_mut(&mut self) -> &mut T {
        match &mut self.armed {
            Some((value, _)) => value,
            None => unreachable!("a guard holds its value until kept or dropped"),
        }
    }
}

impl<T, F: FnOnce(T)> Drop for Guard<T, F> {
    fn drop(&mut self) {
        if let Some((value, release)) = self.armed.take() {
            release(value);
        }
    }
}
