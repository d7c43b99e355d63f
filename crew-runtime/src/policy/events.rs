//! What a policy set reports on the crew's buses, as
//! [`Event::Integration`](hooks_core::Event::Integration) events: the
//! engine carries them without knowing them.

/// A policy set's decision on one tool call, sent as an
/// [`Event::Integration`](hooks_core::Event::Integration) of kind [`KIND`](Self::KIND).
///
/// In shadow mode nothing is blocked or asked, and `decision` says what
/// would have happened: `would_deny`, `would_ask` (or `allow`).
///
/// ```
/// use crew_runtime::Event;
/// use crew_runtime::policy::PolicyDecidedEvent;
///
/// let event = Event::from(PolicyDecidedEvent {
///     tool_name: "refund".into(),
///     agent_role: Some("Support".into()),
///     decision: "would_deny",
///     shadow: true,
///     policies: vec!["no-big-refunds".into()],
///     reason: Some("refunds above 400 need a manager".into()),
/// });
/// // A listener reads it by its type.
/// if let Event::Integration(integration) = &event
///     && let Some(decided) = integration.downcast_ref::<PolicyDecidedEvent>()
/// {
///     assert!(decided.shadow);
/// }
/// # else { unreachable!() }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDecidedEvent {
    /// The normalized tool name.
    pub tool_name: String,
    /// The agent's role.
    pub agent_role: Option<String>,
    /// `allow`, `deny`, `ask` (approved or refused after), or in shadow
    /// mode `would_deny` and `would_ask`.
    pub decision: &'static str,
    /// Whether the set runs in shadow mode (nothing enforced).
    pub shadow: bool,
    /// The ids of the policies that decided, in the set's text order.
    pub policies: Vec<String>,
    /// Why the call is (or would be) denied or asked about.
    pub reason: Option<String>,
}

crate::extension::integration_event!(PolicyDecidedEvent, "PolicyDecided");

/// A policy set refused at a reload (or when attached after a build): it
/// failed to read, parse or validate. The running set stays. Sent as an
/// [`Event::Integration`](hooks_core::Event::Integration) of kind [`KIND`](Self::KIND).
///
/// ```
/// use crew_runtime::Event;
/// use crew_runtime::policy::PolicySetRejectedEvent;
///
/// let event = Event::from(PolicySetRejectedEvent {
///     origin: "policies.cedar".into(),
///     error: "policy `p` (line 1, column 30): no tool of this crew is named `delte_file`".into(),
/// });
/// let Event::Integration(integration) = &event else { unreachable!() };
/// assert_eq!(integration.kind(), "PolicySetRejected");
/// let rejected = integration.downcast_ref::<PolicySetRejectedEvent>();
/// assert!(rejected.is_some_and(|rejected| rejected.error.contains("delte_file")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySetRejectedEvent {
    /// Where the set came from: a file's path, or `text`.
    pub origin: String,
    /// Every problem found, as one message.
    pub error: String,
}

crate::extension::integration_event!(PolicySetRejectedEvent, "PolicySetRejected");
