//! The call a running tool serves: what the tool's own code can read of
//! it (its id, its tool, its idempotency key), wherever the tool runs.

use std::future::Future;
use std::sync::Arc;

use super::IdempotencyKey;

tokio::task_local! {
    /// The call whose tool runs: set around an async tool's future (and a
    /// synchronous body run in place, which runs inside it), and around a
    /// synchronous body on its blocking-pool thread (`sync_scope`).
    static CURRENT_CALL: CurrentCall;
}

/// The tool call being run, as the tool's own code reads it: from inside
/// a tool's function (async or not, wherever its body runs), during a
/// crew's run. Outside a tool's run, there is none: not in hooks, and not
/// in a task the tool spawns (read it first, and hand it over).
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::CurrentCall;
/// use crew_runtime::prelude::*;
///
/// let charge = Tool::dynamic("charge", "Charges a card", json!({"type": "object"}), |_| async {
///     let call = CurrentCall::get().ok_or("not in a tool call")?;
///     // A payment API's own idempotency key would carry
///     // `call.idempotency_key()` (a durable kickoff's calls have one).
///     Ok::<_, String>(json!(format!("{} ran as {}", call.tool_name(), call.call_id())))
/// });
///
/// let llm = Arc::new(ScriptedLlm::new().call("charge", json!({})).answer("done"));
/// let clerk = Agent::builder("Clerk").tool(charge).llm(llm.clone()).build();
/// let crew = Crew::builder()
///     .agent(clerk.clone())
///     .task(Task::builder("Charge").agent(&clerk).build())
///     .global_registry(Arc::new(HookRegistry::new()))
///     .build()?;
/// crew.kickoff_blocking(())?;
/// assert!(llm.observations()[0].starts_with("charge ran as "));
/// assert!(CurrentCall::get().is_none(), "no call outside a tool's run");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct CurrentCall {
    // Shared with the call's hook context: setting the current call costs
    // two reference counts, no copy.
    call_id: Option<Arc<str>>,
    tool_name: Arc<str>,
    idempotency_key: Option<IdempotencyKey>,
}

impl CurrentCall {
    /// The call being run, when called from a tool's run; `None` anywhere
    /// else.
    ///
    /// ```
    /// assert!(crew_runtime::CurrentCall::get().is_none());
    /// ```
    pub fn get() -> Option<CurrentCall> {
        CURRENT_CALL.try_with(CurrentCall::clone).ok()
    }

    /// The call's id, as the model's turn named it (unique in its turn).
    ///
    /// ```
    /// // Read from inside a tool: see [`CurrentCall`].
    /// assert!(crew_runtime::CurrentCall::get().map(|call| call.call_id().to_owned()).is_none());
    /// ```
    pub fn call_id(&self) -> &str {
        self.call_id.as_deref().unwrap_or_default()
    }

    /// The (normalized) name of the tool called.
    ///
    /// ```
    /// // Read from inside a tool: see [`CurrentCall`].
    /// assert!(crew_runtime::CurrentCall::get().map(|call| call.tool_name().to_owned()).is_none());
    /// ```
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }

    /// The call's idempotency key: present in a durable kickoff (SPEC
    /// §13), the same each time the call runs again; `None` otherwise.
    ///
    /// ```
    /// // Read from inside a tool: see [`CurrentCall`].
    /// assert!(crew_runtime::CurrentCall::get().and_then(|call| call.idempotency_key().cloned()).is_none());
    /// ```
    pub fn idempotency_key(&self) -> Option<&IdempotencyKey> {
        self.idempotency_key.as_ref()
    }

    /// The call `call_id` of `tool_name`, with its key if it has one.
    pub(crate) fn new(
        call_id: Option<Arc<str>>,
        tool_name: Arc<str>,
        idempotency_key: Option<IdempotencyKey>,
    ) -> CurrentCall {
        CurrentCall {
            call_id,
            tool_name,
            idempotency_key,
        }
    }

    /// `future`, polled as this call's run.
    pub(crate) fn scope<F: Future>(self, future: F) -> impl Future<Output = F::Output> {
        CURRENT_CALL.scope(self, future)
    }

    /// `body`, run on this thread as this call's run (a synchronous
    /// tool's body on the blocking pool).
    pub(crate) fn run<R>(self, body: impl FnOnce() -> R) -> R {
        CURRENT_CALL.sync_scope(self, body)
    }
}
