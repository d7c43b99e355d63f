//! The redaction in scope: a [`Redact`] put in scope on a thread with
//! [`RedactionScope`] cleans the texts that leave a crew's calls on that
//! thread (the dispatches' events and `tracing` lines, contained panics'
//! messages, what a person is shown) before they reach anybody.
//!
//! ```
//! use std::borrow::Cow;
//! use std::sync::Arc;
//! use hooks_core::Redact;
//! use hooks_core::runtime::{RedactionScope, redact_in_scope};
//!
//! struct HideKey;
//! impl Redact for HideKey {
//!     fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
//!         Cow::Owned(text.replace("sk-123", "[KEY]"))
//!     }
//! }
//!
//! let redactor: Arc<dyn Redact> = Arc::new(HideKey);
//! let _scope = RedactionScope::enter(&redactor);
//! assert_eq!(redact_in_scope("key sk-123"), "key [KEY]");
//! ```

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use crate::panic::{catch_quietly, drop_payload};

/// Cleans text before it leaves a crew: the model's next request, events,
/// `tracing` output, the console, error texts, the kickoff output and
/// contained panic messages.
///
/// `crew-runtime`'s `SecretRedactor` implements it; implement it for a
/// redactor of your own. Return the text borrowed when there was nothing
/// to clean (that costs nothing), and make cleaning clean text a no-op: a
/// text may pass through the redaction more than once on its way out. A
/// redactor that panics withholds the text it was cleaning (see
/// [`REDACTION_FAILED`]).
///
/// ```
/// use std::borrow::Cow;
/// use hooks_core::Redact;
///
/// /// Hides one known value.
/// struct HideValue(&'static str);
///
/// impl Redact for HideValue {
///     fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
///         if text.contains(self.0) {
///             Cow::Owned(text.replace(self.0, "[REDACTED]"))
///         } else {
///             Cow::Borrowed(text)
///         }
///     }
/// }
///
/// let redactor = HideValue("hunter2");
/// assert_eq!(redactor.redact("password: hunter2"), "password: [REDACTED]");
/// assert!(matches!(redactor.redact("all clear"), Cow::Borrowed(_)));
/// ```
pub trait Redact: Send + Sync {
    /// `text` with every secret replaced; borrowed when there was none.
    fn redact<'t>(&self, text: &'t str) -> Cow<'t, str>;
}

impl<R: Redact + ?Sized> Redact for Arc<R> {
    fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        (**self).redact(text)
    }
}

impl<R: Redact + ?Sized> Redact for &R {
    fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        (**self).redact(text)
    }
}

/// What replaces a text whose redactor panicked: the text is withheld
/// rather than let out uncleaned.
///
/// ```
/// use std::borrow::Cow;
/// use hooks_core::Redact;
/// use hooks_core::runtime::{REDACTION_FAILED, redact_contained};
///
/// struct Unfinished;
/// impl Redact for Unfinished {
///     fn redact<'t>(&self, _: &'t str) -> Cow<'t, str> {
///         panic!("this redactor has a bug")
///     }
/// }
/// assert_eq!(redact_contained(&Unfinished, "password: hunter2"), REDACTION_FAILED);
/// ```
pub const REDACTION_FAILED: &str = "[REDACTION FAILED: text withheld]";

/// Runs `redactor` on `text`, containing a panic: a text the redactor could
/// not clean is replaced by [`REDACTION_FAILED`]. The panic's own message
/// (which may quote the text) is never shown.
///
/// ```
/// use std::borrow::Cow;
/// use hooks_core::Redact;
/// use hooks_core::runtime::{REDACTION_FAILED, redact_contained};
///
/// struct Broken;
/// impl Redact for Broken {
///     fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
///         panic!("cannot clean {text}")
///     }
/// }
/// assert_eq!(redact_contained(&Broken, "token=abc"), REDACTION_FAILED);
/// ```
pub fn redact_contained<'t>(redactor: &dyn Redact, text: &'t str) -> Cow<'t, str> {
    match catch_quietly(AssertUnwindSafe(|| redactor.redact(text))) {
        Ok(cleaned) => cleaned,
        Err(panic) => {
            drop_payload(panic);
            tracing::warn!(
                target: "hooks_core::events",
                "a redactor panicked; the text it was cleaning is withheld"
            );
            // Owned: "borrowed" tells callers nothing changed.
            Cow::Owned(REDACTION_FAILED.to_owned())
        }
    }
}

/// The redaction in scope, as a [`Redact`] (cleans nothing when none is).
pub(crate) struct InScope;

impl Redact for InScope {
    fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        redact_in_scope(text)
    }
}

/// The redactors in scope on a thread, outermost first.
type ScopeStack = Arc<[Arc<dyn Redact>]>;

thread_local! {
    static REDACTION: Cell<Option<ScopeStack>> = const { Cell::new(None) };
}

/// Whether a redactor is in scope on this thread (no reference count): a
/// caller with a costly text to build for [`redact_in_scope`] can skip
/// building it when nothing would clean it.
///
/// ```
/// use hooks_core::runtime::redaction_in_scope;
/// assert!(!redaction_in_scope());
/// ```
pub fn redaction_in_scope() -> bool {
    let stack = REDACTION.take();
    let set = stack.is_some();
    REDACTION.set(stack);
    set
}

/// The redactors in scope on this thread, if any (one reference count).
fn in_scope() -> Option<ScopeStack> {
    let stack = REDACTION.take();
    REDACTION.set(stack.clone());
    stack
}

/// Puts a redactor in scope on this thread until dropped: the texts of the
/// dispatches (`HookDispatchedEvent`'s abort reason, source and tool
/// name, and the `tracing` line of the dispatch) and the messages of
/// panics contained on this thread (hooks, tools, listeners:
/// `HookPanickedEvent`, their `tracing` lines, a fail-closed hook's
/// abort) pass through it.
///
/// A runtime enters one around a crew's work, on every thread that works
/// for it. Scopes nest: a kickoff started inside another's hook cleans
/// with both redactors; entering a redactor already in scope changes
/// nothing. Drop guards in the reverse order of entering them.
///
/// ```
/// use std::borrow::Cow;
/// use std::sync::Arc;
/// use hooks_core::Redact;
/// use hooks_core::runtime::{RedactionScope, redact_in_scope};
///
/// struct HidePin;
/// impl Redact for HidePin {
///     fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
///         if text.contains("1234") { Cow::Owned(text.replace("1234", "[PIN]")) } else { Cow::Borrowed(text) }
///     }
/// }
///
/// let redactor: Arc<dyn Redact> = Arc::new(HidePin);
/// assert_eq!(redact_in_scope("pin 1234"), "pin 1234");
/// {
///     let _scope = RedactionScope::enter(&redactor);
///     assert_eq!(redact_in_scope("pin 1234"), "pin [PIN]");
/// }
/// assert_eq!(redact_in_scope("pin 1234"), "pin 1234");
/// ```
#[must_use = "the redactor leaves the scope as soon as the guard is dropped"]
pub struct RedactionScope {
    previous: Option<ScopeStack>,
    /// The scope belongs to the thread that entered it.
    _thread: PhantomData<*const ()>,
}

impl RedactionScope {
    /// Puts `redactor` in scope on this thread (see [`RedactionScope`]).
    /// Entering one already in scope changes nothing.
    ///
    /// ```
    /// use std::borrow::Cow;
    /// use std::sync::Arc;
    /// use hooks_core::Redact;
    /// use hooks_core::runtime::{RedactionScope, redact_in_scope};
    ///
    /// struct Upper;
    /// impl Redact for Upper {
    ///     fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
    ///         Cow::Owned(text.to_uppercase())
    ///     }
    /// }
    ///
    /// let redactor: Arc<dyn Redact> = Arc::new(Upper);
    /// let _outer = RedactionScope::enter(&redactor);
    /// let _again = RedactionScope::enter(&redactor);
    /// assert_eq!(redact_in_scope("key"), "KEY");
    /// ```
    pub fn enter(redactor: &Arc<dyn Redact>) -> RedactionScope {
        let previous = REDACTION.take();
        let current = match &previous {
            Some(stack) if stack.iter().any(|r| same_redactor(r, redactor)) => Arc::clone(stack),
            Some(stack) => stack
                .iter()
                .cloned()
                .chain(std::iter::once(Arc::clone(redactor)))
                .collect(),
            None => Arc::from([Arc::clone(redactor)]),
        };
        REDACTION.set(Some(current));
        RedactionScope {
            previous,
            _thread: PhantomData,
        }
    }
}

impl Drop for RedactionScope {
    fn drop(&mut self) {
        REDACTION.set(self.previous.take());
    }
}

impl RedactionScope {
    /// `future`, each poll of it run with `redactor` in scope on the
    /// polling thread, over the redactors in scope where this is called
    /// (see [`RedactionScope`]). For async work, which may move between
    /// threads at every await: a scope entered on a thread would not
    /// follow it.
    ///
    /// ```
    /// use std::borrow::Cow;
    /// use std::sync::Arc;
    /// use hooks_core::Redact;
    /// use hooks_core::runtime::{RedactionScope, redact_in_scope};
    ///
    /// struct HidePin;
    /// impl Redact for HidePin {
    ///     fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
    ///         Cow::Owned(text.replace("1234", "[PIN]"))
    ///     }
    /// }
    ///
    /// let redactor: Arc<dyn Redact> = Arc::new(HidePin);
    /// let seen = futures_executor::block_on(RedactionScope::instrument(
    ///     Some(redactor),
    ///     async { redact_in_scope("pin 1234").into_owned() },
    /// ));
    /// assert_eq!(seen, "pin [PIN]");
    /// assert_eq!(redact_in_scope("pin 1234"), "pin 1234");
    /// ```
    pub fn instrument<F: std::future::Future>(
        redactor: Option<Arc<dyn Redact>>,
        future: F,
    ) -> InRedactionScope<F> {
        let stack = match redactor {
            Some(redactor) => {
                let _scope = RedactionScope::enter(&redactor);
                in_scope()
            }
            None => in_scope(),
        };
        InRedactionScope { future, stack }
    }
}

pin_project_lite::pin_project! {
    /// A future polled with redactors in scope: see
    /// [`RedactionScope::instrument`].
    ///
    /// ```
    /// use std::borrow::Cow;
    /// use std::sync::Arc;
    /// use hooks_core::Redact;
    /// use hooks_core::runtime::{redact_in_scope, InRedactionScope, RedactionScope};
    ///
    /// struct HideToken;
    /// impl Redact for HideToken {
    ///     fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
    ///         Cow::Owned(text.replace("tok-123", "[TOKEN]"))
    ///     }
    /// }
    ///
    /// let redactor: Arc<dyn Redact> = Arc::new(HideToken);
    /// let work: InRedactionScope<_> =
    ///     RedactionScope::instrument(Some(redactor), async { redact_in_scope("used tok-123").into_owned() });
    /// assert_eq!(futures_executor::block_on(work), "used [TOKEN]");
    /// ```
    pub struct InRedactionScope<F> {
        #[pin]
        future: F,
        stack: Option<ScopeStack>,
    }
}

impl<F: std::future::Future> std::future::Future for InRedactionScope<F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let this = self.project();
        // Lent to the thread for the poll, taken back after it (on unwind
        // too: a panic in the future must not leave its scope on the thread).
        crate::lend::lend_for_poll(&REDACTION, this.stack, || this.future.poll(cx))
    }
}

impl<F> fmt::Debug for InRedactionScope<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InRedactionScope").finish_non_exhaustive()
    }
}

impl fmt::Debug for RedactionScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedactionScope").finish_non_exhaustive()
    }
}

fn same_redactor(a: &Arc<dyn Redact>, b: &Arc<dyn Redact>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// `text` cleaned by the redactors in scope on this thread (innermost
/// first), or borrowed as it is when none is (see [`RedactionScope`]).
///
/// ```
/// use std::borrow::Cow;
/// use hooks_core::runtime::redact_in_scope;
///
/// // No redactor in scope on this thread: the text comes back borrowed.
/// assert!(matches!(redact_in_scope("token=abc"), Cow::Borrowed("token=abc")));
/// ```
pub fn redact_in_scope(text: &str) -> Cow<'_, str> {
    let Some(stack) = in_scope() else {
        return Cow::Borrowed(text);
    };
    let mut current = Cow::Borrowed(text);
    for redactor in stack.iter().rev() {
        if let Cow::Owned(cleaned) = redact_contained(&**redactor, &current) {
            current = Cow::Owned(cleaned);
        }
    }
    current
}
