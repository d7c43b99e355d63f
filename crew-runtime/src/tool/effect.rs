//! What a tool says about running again (SPEC §13 "Effect once"): the
//! idempotency key of a call, and the reconciler that tells whether an
//! interrupted call's effect happened.

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use hooks_core::runtime::{contain_panic_async, take_panic_message};
use serde_json::{Map, Value};

/// The idempotency key of one tool call: an opaque, unguessable text,
/// the same every time the same call of the same kickoff runs (a resumed
/// kickoff's call keeps its key), so that a payment API's own idempotency
/// key can carry it.
///
/// A running tool reads its call's key through
/// [`CurrentCall::idempotency_key`](crate::CurrentCall::idempotency_key);
/// a tool of an MCP server gets it in the `_meta` of its `tools/call`
/// request, under [`IdempotencyKey::MCP_META_KEY`]. A call has one only in
/// a durable kickoff, which derives it with `IdempotencyKey::derive`
/// (feature `durable`). The call's `PRE_TOOL_CALL` and `POST_TOOL_CALL`
/// hooks find it in the context's extensions
/// (`ctx.extensions.get::<IdempotencyKey>()`), as a model turn's hooks find
/// the turn's own key: a hook that counts calls (a budget) keys them by
/// it, so a call whose hooks run again after a crash is counted once.
///
/// ```
/// use crew_runtime::IdempotencyKey;
///
/// // What an MCP server reads in a `tools/call`'s `_meta`.
/// assert_eq!(IdempotencyKey::MCP_META_KEY, "dev.crewhooks/idempotency-key");
/// ```
///
/// It serializes as its text, and deserializes from it: how a journal
/// keeps a call's key, and reads it back for the call's next run.
///
/// ```
/// use crew_runtime::IdempotencyKey;
///
/// let recorded = serde_json::json!("3f9a…");
/// let key: IdempotencyKey = serde_json::from_value(recorded)?;
/// assert_eq!(key.as_str(), "3f9a…");
/// assert_eq!(serde_json::to_value(&key)?, "3f9a…");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The key under which a `tools/call` request's `_meta` carries the
    /// call's idempotency key (a reverse-DNS prefix, as MCP asks of
    /// `_meta` keys that are not its own).
    ///
    /// ```
    /// assert!(crew_runtime::IdempotencyKey::MCP_META_KEY.starts_with("dev.crewhooks/"));
    /// ```
    pub const MCP_META_KEY: &'static str = "dev.crewhooks/idempotency-key";

    /// The key of the call at `place` in a run (its position, as text:
    /// the task, the turn, the call's index, say), at its `attempt`,
    /// derived from `secret` (the kickoff's random id): HMAC-SHA256 of the
    /// place and the attempt, keyed by the secret, as 64 hexadecimal
    /// digits. The same inputs give the same key; any change of any input
    /// gives another; the key tells nothing of the secret, so it can leave
    /// the process (to an MCP server, a payment API) without making the
    /// keys of other calls guessable. Keep the secret unguessable: the
    /// keys are only as unguessable as it is.
    ///
    /// ```
    /// use crew_runtime::IdempotencyKey;
    ///
    /// let kickoff_id = b"0b6f5c1e-8a55-4d8e-9d0f-3f3b1f0a7c21";
    /// let key = IdempotencyKey::derive(kickoff_id, "task 0/turn 2/call 1", 0);
    /// assert_eq!(key, IdempotencyKey::derive(kickoff_id, "task 0/turn 2/call 1", 0));
    /// assert_ne!(key, IdempotencyKey::derive(kickoff_id, "task 0/turn 2/call 1", 1));
    /// assert_eq!(key.as_str().len(), 64);
    /// ```
    #[cfg(feature = "durable")]
    pub fn derive(secret: &[u8], place: &str, attempt: u32) -> IdempotencyKey {
        use hmac::{Hmac, Mac};
        use sha2::Sha256;

        // HMAC takes a key of any length (a longer one is hashed first):
        // `new_from_slice` has no error to return for it.
        #[allow(clippy::expect_used)]
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
        // A label, so that no other use of the same secret can produce
        // these bytes; the place's length, so that place and attempt
        // cannot be shifted into each other.
        mac.update(b"crew-hooks idempotency key v1\0");
        mac.update(&(place.len() as u64).to_be_bytes());
        mac.update(place.as_bytes());
        mac.update(&attempt.to_be_bytes());
        let digest = mac.finalize().into_bytes();
        let mut text = String::with_capacity(digest.len() * 2);
        for byte in digest {
            use std::fmt::Write;
            // Writing to a `String` cannot fail.
            let _ = write!(text, "{byte:02x}");
        }
        IdempotencyKey(text)
    }

    /// The key as text.
    ///
    /// ```
    /// # #[cfg(feature = "durable")] {
    /// let key = crew_runtime::IdempotencyKey::derive(b"secret", "call 1", 0);
    /// assert!(key.as_str().bytes().all(|b| b.is_ascii_hexdigit()));
    /// # }
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("IdempotencyKey").field(&self.0).finish()
    }
}

/// A reconciler's answer: whether the effect of a call that was
/// interrupted (its result never recorded) happened.
///
/// ```
/// use crew_runtime::Reconciled;
/// use serde_json::json;
///
/// let charged = Reconciled::Happened { result: Some(json!({"charge": "ch_1"})) };
/// assert_ne!(charged, Reconciled::DidNotHappen);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Reconciled {
    /// The effect happened: the call is not run again, and `result` (when
    /// the reconciler could find it) stands as the call's result.
    Happened {
        /// The call's result, as the tool would have given it.
        result: Option<Value>,
    },
    /// The effect did not happen: the call may run again.
    DidNotHappen,
}

/// Why a reconciler gave no answer.
///
/// ```
/// use crew_runtime::ReconcileError;
///
/// let error = ReconcileError::Failed("the payments API is down".into());
/// assert!(error.to_string().contains("the payments API is down"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReconcileError {
    /// The reconciler returned an error.
    #[error(
        "the tool's reconciler could not tell whether the call's effect happened: {0}; \
         check the effect by hand before the call runs again"
    )]
    Failed(String),
    /// The reconciler panicked (the panic's message).
    #[error(
        "the tool's reconciler panicked: {0}; fix the reconciler, or check the effect by hand \
         before the call runs again"
    )]
    Panicked(String),
}

type Reconcile = dyn Fn(
        IdempotencyKey,
        Map<String, Value>,
    ) -> Pin<Box<dyn Future<Output = Result<Reconciled, String>> + Send>>
    + Send
    + Sync;

/// A tool's reconciler ([`Tool::reconcile`](crate::Tool::reconcile)):
/// asked, for a call whose result was never recorded, whether its effect
/// happened. Cloning is cheap.
///
/// ```
/// use crew_runtime::{Reconciled, Reconciler};
///
/// let reconciler = Reconciler::new(|_key, _args| async { Ok::<_, String>(Reconciled::DidNotHappen) });
/// # let _ = reconciler;
/// ```
#[derive(Clone)]
pub struct Reconciler(Arc<Reconcile>);

impl Reconciler {
    /// A reconciler from an async function of the call's key and
    /// arguments (the arguments exactly as the tool got them). It gets
    /// both by value, so that its future can keep them. An `Err(e)` is
    /// reported as [`ReconcileError::Failed`], a panic as
    /// [`ReconcileError::Panicked`].
    ///
    /// ```
    /// use crew_runtime::{Reconciled, Reconciler};
    /// use serde_json::json;
    ///
    /// // Asks the payments API whether a charge with this key exists.
    /// let reconciler = Reconciler::new(|key, _args| async move {
    ///     let found = key.as_str().is_empty(); // a lookup by key, here
    ///     Ok::<_, String>(if found {
    ///         Reconciled::Happened { result: Some(json!({"charge": "ch_1"})) }
    ///     } else {
    ///         Reconciled::DidNotHappen
    ///     })
    /// });
    /// # let _ = reconciler;
    /// ```
    pub fn new<F, Fut, E>(reconcile: F) -> Reconciler
    where
        F: Fn(IdempotencyKey, Map<String, Value>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Reconciled, E>> + Send + 'static,
        E: fmt::Display,
    {
        Reconciler(Arc::new(move |key, args| {
            let asked = reconcile(key, args);
            Box::pin(async move { asked.await.map_err(|error| error.to_string()) })
        }))
    }

    /// Asks whether the effect of the call with `key` and `args` happened.
    /// A panic of the reconciler (while it is called or polled) is
    /// contained and reported as [`ReconcileError::Panicked`].
    ///
    /// ```
    /// use crew_runtime::{ReconcileError, Reconciled, Reconciler};
    ///
    /// # #[cfg(feature = "durable")] {
    /// let key = crew_runtime::IdempotencyKey::derive(b"kickoff", "call 1", 0);
    /// let broken = Reconciler::new(|_key, _args| async {
    ///     Err::<Reconciled, _>("no connection")
    /// });
    /// let answer = futures_executor::block_on(broken.ask(&key, &Default::default()));
    /// assert!(matches!(answer, Err(ReconcileError::Failed(message)) if message == "no connection"));
    /// # }
    /// ```
    pub async fn ask(
        &self,
        key: &IdempotencyKey,
        args: &Map<String, Value>,
    ) -> Result<Reconciled, ReconcileError> {
        let reconcile = Arc::clone(&self.0);
        let (key, args) = (key.clone(), args.clone());
        // Called inside the contained future: a panic before the first
        // `.await` of the reconciler is contained too.
        let asked =
            contain_panic_async(AssertUnwindSafe(async move { reconcile(key, args).await }));
        match asked.await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(message)) => Err(ReconcileError::Failed(message)),
            Err(panic) => Err(ReconcileError::Panicked(take_panic_message(panic))),
        }
    }
}

impl fmt::Debug for Reconciler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reconciler").finish_non_exhaustive()
    }
}
