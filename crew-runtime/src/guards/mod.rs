//! Ready-made hooks for common guard rails:
//! [`SecretRedactor`](crate::guards::SecretRedactor) keeps secrets out of
//! what agents, events and logs see,
//! [`RateLimiter`](crate::guards::RateLimiter) caps how often a tool runs,
//! and [`ApprovalGate`](crate::guards::ApprovalGate) has a person approve
//! chosen calls before they run.
//!
//! Each is a plain value with a method that returns a hook closure, so they
//! register like any other hook, globally or on one crew:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use crew_runtime::guards::{ApprovalGate, RateLimiter, SecretRedactor};
//! use crew_runtime::prelude::*;
//!
//! let gate = ApprovalGate::for_tools(["send_email", "make_purchase"]);
//! let limiter = RateLimiter::new(10, Duration::from_secs(60));
//! let redactor = SecretRedactor::new();
//!
//! let researcher = Agent::builder("Researcher")
//!     .llm(Arc::new(ScriptedLlm::new().answer("done")))
//!     .build();
//! let crew = Crew::builder()
//!     .agent(researcher.clone())
//!     .task(Task::builder("Research").agent(&researcher).build())
//!     .global_registry(Arc::new(HookRegistry::new()))
//!     // Ask first: a refused call is then not counted by the limiter.
//!     .hook_with(PRE_TOOL_CALL, HookOptions::new().name("approval-gate"), gate.pre_hook())
//!     .hook_with(PRE_TOOL_CALL, HookOptions::new().name("rate-limiter"), limiter.pre_hook())
//!     .hook_with(
//!         POST_TOOL_CALL,
//!         HookOptions::new().name("secret-redactor").fail_closed(),
//!         redactor.hook(),
//!     )
//!     .build()?;
//! # let _ = crew;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Approvals
//!
//! [`ApprovalGate`](crate::guards::ApprovalGate) asks through the crew's
//! human-input source (the terminal unless the crew was given another:
//! scripted answers in tests, a channel or a callback for a web UI or a
//! chat) and fails closed: a call runs only when a person answered and the
//! answer approves (`y` or `yes` by default). A source that is closed, not
//! a terminal, times out, fails or panics refuses the call, and so does a
//! panic in the gate's own closures, however the hook was registered. On
//! the terminal the question is framed apart from the agents' output, its
//! text escaped (a model-chosen argument cannot clear the screen or
//! reorder what is shown), and input typed before the question appeared is
//! dropped.
//!
//! ```
//! use std::sync::Arc;
//! use crew_runtime::guards::ApprovalGate;
//! use crew_runtime::prelude::*;
//!
//! let gate = ApprovalGate::for_tools(["send_email"]);
//! let refused = gate.check(
//!     &ToolCallHookContext::new("send_email", Default::default())
//!         .with_human_input(Arc::new(ScriptedInput::new(["no"]))),
//! );
//! assert_eq!(refused.err().map(|a| a.source), Some("approval-gate".to_owned()));
//! ```

mod approval;
mod rate_limit;
mod redact;

pub use approval::{APPROVAL_GATE_SOURCE, ApprovalGate, DEFAULT_APPROVAL_MESSAGE};
pub use rate_limit::{Clock, ManualClock, RATE_LIMITER_SOURCE, RateLimiter, SystemClock};
pub use redact::SecretRedactor;

/// The regular expression type [`SecretRedactor::with_pattern`] takes (the
/// `regex` crate's).
pub use regex::Regex;
