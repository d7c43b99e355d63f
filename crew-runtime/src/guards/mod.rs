//! Ready-made hooks for common guard rails:
//! [`SecretRedactor`](crate::guards::SecretRedactor) keeps secrets out of
//! what agents, events and logs see (as a hook, or as a crew's redaction
//! at every exit),
//! [`RateLimiter`](crate::guards::RateLimiter) caps how often a tool runs,
//! [`ApprovalGate`](crate::guards::ApprovalGate) has a person approve
//! chosen calls before they run, and
//! [`CapabilityGuard`](crate::guards::CapabilityGuard) blocks tools by what
//! they declare they do (destructive, open-world, not read-only: the MCP
//! annotations, with a tool that declares nothing counted as destructive),
//! not by their name.
//!
//! Each is a plain value with a method that returns a hook closure, so they
//! register like any other hook, globally or on one crew (the approval gate
//! as an `async` hook: it waits for a person without holding a thread):
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
//!     .async_hook_with(PRE_TOOL_CALL, HookOptions::new().name("approval-gate"), gate.pre_hook())
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
//! chat), each question naming the call it is about, and fails closed: a
//! call runs only when a person answered and the answer approves (`y` or
//! `yes` by default). A source that is closed, not a terminal, fails or
//! panics refuses the call, and so does no answer within the crew's
//! human-input timeout (five minutes by default) or a panic in the gate's
//! own closures, however the hook was registered. On
//! the terminal the question is framed apart from the agents' output, its
//! text escaped (a model-chosen argument cannot clear the screen or
//! reorder what is shown), and input typed before the question appeared is
//! dropped.
//!
//! ```
//! use std::sync::Arc;
//! use crew_runtime::guards::ApprovalGate;
//! use crew_runtime::prelude::*;
//! use crew_runtime::ScriptedInput;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let gate = ApprovalGate::for_tools(["send_email"]);
//! let ctx = ToolCallHookContext::new("send_email", Default::default())
//!     .with_human_input(Arc::new(ScriptedInput::new(["no"])));
//! let refused = gate.check(&ctx).await;
//! assert_eq!(refused.err().map(|a| a.source), Some("approval-gate".to_owned()));
//! # }
//! ```
//!
//! # Nothing secret leaves a crew
//!
//! As a `POST_TOOL_CALL` hook, the redactor cleans tool results. To clean
//! *every* exit of a crew, give the crew the redactor itself with
//! [`CrewBuilder::redact_with`](crate::CrewBuilder::redact_with): then the
//! model's requests (tool observations after the POST chain, task context,
//! kickoff inputs in the task), the tool-usage and hook-dispatch events on
//! the crew's bus and the global one (a credential a PRE hook injected
//! into `tool_input` included), the crew's `tracing` lines, the verbose
//! console, the error and output of `kickoff`, and the messages of
//! contained tool and hook panics all pass through it. Any
//! [`Redact`](crate::Redact) works, so a redactor of your own can take
//! its place. Hooks and tools still see the crew's texts as they are.
//!
//! Contained panics never reach stderr raw, with or without a redaction:
//! the first contained call installs a panic hook that stays silent for
//! them (the runtime reports them through `tracing` and events) and hands
//! every other panic to the hook installed before it. Install a panic
//! hook of your own before the first kickoff, so that the two chain.
//!
//! ```
//! use std::sync::Arc;
//! use crew_runtime::guards::SecretRedactor;
//! use crew_runtime::prelude::*;
//!
//! let lookup = Tool::dynamic("lookup", "Reads a config", json!({"type": "object"}), |_| {
//!     Ok::<_, String>(json!("DATABASE_URL=postgres://app:s3cr3t@db/app"))
//! });
//! let llm = Arc::new(
//!     ScriptedLlm::new()
//!         .call("lookup", json!({"name": "db"}))
//!         .answer_with(|request| {
//!             request.messages.last().map(|m| m.content.clone()).unwrap_or_default()
//!         }),
//! );
//! let ops = Agent::builder("Ops").tool(lookup).llm(llm.clone()).build();
//!
//! let hooks = Arc::new(HookRegistry::new());
//! // A PRE hook hands the tool a credential: the tool gets it, nothing else.
//! hooks.register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
//!     ctx.tool_input.insert("token".into(), json!("glpat-Xk3mP9qR2sT5vW8yZ1aB"));
//! })?;
//! let started = Arc::new(std::sync::Mutex::new(Vec::new()));
//! let seen = started.clone();
//! hooks.events().subscribe(move |event| {
//!     if let Event::ToolExecutionStarted(started) = event {
//!         seen.lock().unwrap_or_else(|e| e.into_inner()).push(started.tool_input.clone());
//!     }
//! });
//!
//! let crew = Crew::builder()
//!     .agent(ops.clone())
//!     .task(Task::builder("Check the database").agent(&ops).build())
//!     .global_registry(hooks)
//!     .redact_with(SecretRedactor::new())
//!     .build()?;
//! let output = crew.kickoff_blocking(())?;
//!
//! assert_eq!(output.raw, "DATABASE_URL=postgres://app:[REDACTED]@db/app");
//! let inputs = started.lock().unwrap_or_else(|e| e.into_inner()).clone();
//! assert_eq!(inputs, [json!({"name": "db", "token": "[REDACTED]"})]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod approval;
mod capability;
mod rate_limit;
mod redact;

pub use approval::{APPROVAL_GATE_SOURCE, ApprovalGate, DEFAULT_APPROVAL_MESSAGE};
pub use capability::{CAPABILITY_GUARD_SOURCE, CapabilityGuard};
pub use rate_limit::{Clock, ManualClock, RATE_LIMITER_SOURCE, RateLimiter, SystemClock};
pub use redact::SecretRedactor;

/// The regular expression type [`SecretRedactor::with_pattern`] takes (the
/// `regex` crate's).
pub use regex::Regex;
