//! Panics caught quietly: a hook, tool, listener or redactor that panics is
//! caught, and the runtime reports it (through `tracing` and events, after
//! the redaction in scope). The process panic hook must not print it
//! first: its message may carry a secret, and stderr is an exit like any
//! other.
//!
//! [`catch_quietly`] and [`QuietScope`] install, once, a panic hook that
//! stays silent for a thread inside a contained call and hands every other
//! panic to the hook that was installed before it (the program's own, or
//! Rust's default). The payload helpers ([`panic_message`],
//! [`drop_payload`], [`take_panic_message`]) read and drop what was caught.
//! What a runtime calls to contain a panic, with its message cleaned, is
//! [`contain_panic`](crate::runtime::contain_panic).
//!
//! ```
//! use hooks_core::runtime::{contain_panic, take_panic_message};
//!
//! let caught = contain_panic(|| -> () { panic!("the listener broke") });
//! assert_eq!(caught.map_err(take_panic_message), Err("the listener broke".to_owned()));
//! ```

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, PanicHookInfo, UnwindSafe, catch_unwind};
use std::sync::Once;

thread_local! {
    /// How many contained calls this thread is inside (they nest: a hook
    /// may start a kickoff whose tools panic).
    static CONTAINED_DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Where the last panic contained on this thread was raised, as the
    /// panic hook recorded it.
    static LAST_LOCATION: Cell<Option<String>> = const { Cell::new(None) };
}

static INSTALL: Once = Once::new();

/// Runs `f`, catching a panic like [`std::panic::catch_unwind`], with the
/// panic hook silent for it; the payload comes back as it was raised
/// ([`contain_panic`](crate::runtime::contain_panic) cleans a text
/// payload with the redaction in scope; this is for the redaction itself,
/// whose own panic must not recurse into it).
///
/// On the hot path of every hook: one atomic load and two thread-local
/// writes, no allocation, no lock.
#[inline]
pub(crate) fn catch_quietly<R>(f: impl FnOnce() -> R + UnwindSafe) -> std::thread::Result<R> {
    if !INSTALL.is_completed() {
        install_silent_hook();
    }
    // One thread-local lookup for both writes. `catch_unwind` returns
    // whatever happens inside, so the depth is always restored (no guard).
    let result = CONTAINED_DEPTH.with(|depth| {
        depth.set(depth.get().wrapping_add(1));
        let result = catch_unwind(f);
        depth.set(depth.get().wrapping_sub(1));
        result
    });
    if result.is_err() {
        report_location();
    }
    result
}

/// A stretch of code (a whole chain of hooks) during which panics on this
/// thread are contained: the silent panic hook prints nothing for them.
/// Entering costs one atomic load and one thread-local write, once per
/// chain rather than once per hook.
pub(crate) struct QuietScope(());

impl QuietScope {
    #[inline]
    pub(crate) fn enter() -> QuietScope {
        if !INSTALL.is_completed() {
            install_silent_hook();
        }
        CONTAINED_DEPTH.set(CONTAINED_DEPTH.get().wrapping_add(1));
        QuietScope(())
    }

    /// Reports where the last panic contained in this scope was raised.
    #[cold]
    pub(crate) fn panicked(&self) {
        report_location();
    }
}

impl Drop for QuietScope {
    #[inline]
    fn drop(&mut self) {
        CONTAINED_DEPTH.set(CONTAINED_DEPTH.get().wrapping_sub(1));
    }
}

/// Drops a panic payload, containing a panic of its own `Drop` (a payload
/// whose drop panics again is leaked rather than unwinding further).
///
/// Re-exported as [`runtime::drop_panic_payload`](crate::runtime::drop_panic_payload).
///
/// ```
/// use hooks_core::runtime::{contain_panic, drop_panic_payload};
///
/// struct Spiteful;
/// impl Drop for Spiteful {
///     fn drop(&mut self) {
///         panic!("dropping the payload panics too");
///     }
/// }
///
/// let caught = contain_panic(|| -> () { std::panic::panic_any(Spiteful) });
/// if let Err(payload) = caught {
///     drop_panic_payload(payload); // returns: nothing unwinds out of here
/// }
/// ```
pub fn drop_payload(payload: Box<dyn std::any::Any + Send>) {
    // Quietly: the second panic is part of the contained one.
    if let Err(again) = catch_quietly(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}

/// The text of a panic payload (a `&str` or `String` message), as contained
/// panics of hooks are reported; tools run by a runtime can be reported the
/// same way.
///
/// ```
/// use hooks_core::runtime::{contain_panic, drop_panic_payload, panic_message};
///
/// let payload = contain_panic(|| -> () { panic!("the tool broke: {}", 42) }).unwrap_err();
/// assert_eq!(panic_message(&*payload), "the tool broke: 42");
/// drop_panic_payload(payload);
/// assert_eq!(panic_message(&7_u8), "a non-text panic payload");
/// ```
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a non-text panic payload".to_owned()
    }
}

/// The text of a panic payload (see [`panic_message`]), with the payload
/// dropped the safe way (see [`drop_payload`]): what a runtime reporting a
/// contained panic of a tool or model wants, in one call.
///
/// ```
/// use hooks_core::runtime::{contain_panic, take_panic_message};
///
/// let caught = contain_panic(|| -> () { panic!("the tool broke") });
/// assert_eq!(caught.map_err(take_panic_message), Err("the tool broke".to_owned()));
/// ```
pub fn take_panic_message(panic: Box<dyn std::any::Any + Send>) -> String {
    let message = panic_message(&*panic);
    drop_payload(panic);
    message
}

#[cold]
#[inline(never)]
fn report_location() {
    if let Some(location) = LAST_LOCATION.take() {
        tracing::debug!(
            target: "hooks_core::panic",
            location = %location,
            "a panic was contained; its message is reported by the runtime"
        );
    }
}

#[cold]
#[inline(never)]
fn install_silent_hook() {
    // Replacing the hook from a panicking thread panics: try again at the
    // next contained call instead.
    if std::thread::panicking() {
        return;
    }
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
            if CONTAINED_DEPTH.get() == 0 {
                previous(info);
            } else if let Some(location) = info.location() {
                LAST_LOCATION.set(Some(location.to_string()));
            }
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_depth_is_restored_after_a_panic() {
        let _ = catch_quietly(AssertUnwindSafe(|| -> u8 { panic!("once") }));
        assert_eq!(CONTAINED_DEPTH.get(), 0);
        let nested = catch_quietly(|| catch_quietly(|| CONTAINED_DEPTH.get()));
        assert_eq!(nested.ok().and_then(Result::ok), Some(2));
        assert_eq!(CONTAINED_DEPTH.get(), 0);
    }
}
