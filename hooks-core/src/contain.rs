//! Contained panics: a panic caught quietly (see [`crate::panic`]), its
//! text payload passed through the redaction in scope (see
//! [`RedactionScope`](crate::runtime::RedactionScope)), ready for the
//! caller to report.
//!
//! ```
//! use std::panic::AssertUnwindSafe;
//! use hooks_core::runtime::{contain_panic, take_panic_message};
//!
//! // Nothing is printed on stderr for this panic.
//! let caught = contain_panic(AssertUnwindSafe(|| -> u32 { panic!("the tool broke") }));
//! assert_eq!(caught.map_err(take_panic_message), Err("the tool broke".to_owned()));
//! ```

use std::panic::UnwindSafe;

use crate::panic::{catch_quietly, drop_payload, panic_message};
use crate::redaction::redact_in_scope;

/// Runs `f`, catching a panic like [`std::panic::catch_unwind`], as a
/// *contained* call: the panic hook prints nothing for a panic raised
/// inside (it records where it was raised, reported at `DEBUG` under the
/// `hooks_core::panic` target), and a text payload comes back passed
/// through the redaction in scope (see
/// [`RedactionScope`](crate::runtime::RedactionScope)), ready for the
/// caller to report.
///
/// Panics anywhere else (outside contained calls, or on other threads)
/// still reach the panic hook that was installed before: the program's
/// own, or Rust's default, which prints them. The silent hook is installed
/// the first time this runs; a program that installs a panic hook of its
/// own should do so before its first kickoff, so that the two chain.
///
/// ```
/// use std::panic::AssertUnwindSafe;
/// use hooks_core::runtime::{contain_panic, panic_message};
///
/// // Nothing is printed on stderr for this panic.
/// let caught = contain_panic(AssertUnwindSafe(|| -> u32 { panic!("the tool broke") }));
/// let message = caught.map_err(|payload| panic_message(&*payload));
/// assert_eq!(message, Err("the tool broke".to_owned()));
/// assert_eq!(contain_panic(|| 7).ok(), Some(7));
/// ```
#[inline]
pub fn contain_panic<R>(f: impl FnOnce() -> R + UnwindSafe) -> std::thread::Result<R> {
    match catch_quietly(f) {
        Ok(value) => Ok(value),
        Err(payload) => Err(redact_payload(payload)),
    }
}

/// `future` with its panics contained like [`contain_panic`]'s: each poll
/// runs with the panic hook silent on the polling thread, and a panic ends
/// the future with `Err(payload)`, its message cleaned by the redactors in
/// scope. For async tools a runtime runs.
///
/// ```
/// use std::panic::AssertUnwindSafe;
/// use hooks_core::runtime::{contain_panic_async, panic_message};
///
/// let caught = futures_executor::block_on(contain_panic_async(AssertUnwindSafe(async {
///     if true {
///         panic!("the tool broke");
///     }
///     7
/// })));
/// assert_eq!(caught.map_err(|p| panic_message(&*p)), Err("the tool broke".to_owned()));
/// ```
pub fn contain_panic_async<F>(future: F) -> ContainedPanic<F>
where
    F: std::future::Future + UnwindSafe,
{
    ContainedPanic { future }
}

pin_project_lite::pin_project! {
    /// A future whose panics are contained: see [`contain_panic_async`].
    ///
    /// ```
    /// use std::panic::AssertUnwindSafe;
    /// use hooks_core::runtime::{contain_panic_async, take_panic_message, ContainedPanic};
    ///
    /// let fine: ContainedPanic<_> = contain_panic_async(AssertUnwindSafe(async { 42 }));
    /// assert_eq!(futures_executor::block_on(fine).ok(), Some(42));
    ///
    /// let broken = contain_panic_async(AssertUnwindSafe(async {
    ///     if true {
    ///         panic!("the model client crashed");
    ///     }
    ///     0
    /// }));
    /// let caught = futures_executor::block_on(broken).map_err(take_panic_message);
    /// assert_eq!(caught, Err("the model client crashed".to_owned()));
    /// ```
    #[derive(Debug)]
    pub struct ContainedPanic<F> {
        #[pin]
        future: F,
    }
}

impl<F: std::future::Future + UnwindSafe> std::future::Future for ContainedPanic<F> {
    type Output = std::thread::Result<F::Output>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let future = self.project().future;
        let mut cx = std::panic::AssertUnwindSafe(cx);
        match catch_quietly(std::panic::AssertUnwindSafe(move || future.poll(&mut cx))) {
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Ok(std::task::Poll::Ready(value)) => std::task::Poll::Ready(Ok(value)),
            Err(payload) => std::task::Poll::Ready(Err(redact_payload(payload))),
        }
    }
}

/// The redaction in scope applied to a contained panic's message.
pub(crate) fn redacted_message(payload: &(dyn std::any::Any + Send)) -> String {
    let message = panic_message(payload);
    match redact_in_scope(&message) {
        std::borrow::Cow::Borrowed(_) => message,
        std::borrow::Cow::Owned(redacted) => redacted,
    }
}

/// A text payload with the redaction in scope applied (other payloads are
/// left as they are: nobody can print them).
#[cold]
#[inline(never)]
fn redact_payload(payload: Box<dyn std::any::Any + Send>) -> Box<dyn std::any::Any + Send> {
    let is_text = payload.is::<&'static str>() || payload.is::<String>();
    if !is_text {
        return payload;
    }
    let message = panic_message(&*payload);
    match redact_in_scope(&message) {
        std::borrow::Cow::Borrowed(_) => payload,
        std::borrow::Cow::Owned(redacted) => {
            drop_payload(payload);
            Box::new(redacted)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::panic::AssertUnwindSafe;
    use std::sync::Arc;

    use super::*;
    use crate::redaction::{Redact, RedactionScope};

    struct HideDigits;

    impl Redact for HideDigits {
        fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
            if text.contains(|c: char| c.is_ascii_digit()) {
                Cow::Owned(text.replace(|c: char| c.is_ascii_digit(), "#"))
            } else {
                Cow::Borrowed(text)
            }
        }
    }

    #[test]
    fn a_contained_panic_message_is_redacted_in_scope() {
        let redactor: Arc<dyn Redact> = Arc::new(HideDigits);
        let _scope = RedactionScope::enter(&redactor);
        let caught = contain_panic(AssertUnwindSafe(|| -> u8 { panic!("pin {}", 1234) }));
        let message = caught.map_err(|payload| panic_message(&*payload));
        assert_eq!(message, Err("pin ####".to_owned()));
    }

    #[test]
    fn without_a_scope_the_payload_is_untouched() {
        let caught = contain_panic(AssertUnwindSafe(|| -> u8 { panic!("pin 1234") }));
        let message = caught.map_err(|payload| panic_message(&*payload));
        assert_eq!(message, Err("pin 1234".to_owned()));
    }
}
