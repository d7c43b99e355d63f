//! Ready-made hooks for common guard rails:
//! [`SecretRedactor`](crate::guards::SecretRedactor) keeps secrets out of
//! what agents, events and logs see, and
//! [`RateLimiter`](crate::guards::RateLimiter) caps how often a tool runs.
//!
//! Both are plain values with a method that returns a hook closure, so they
//! register like any other hook, globally or on one crew:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use crew_runtime::guards::{RateLimiter, SecretRedactor};
//! use crew_runtime::prelude::*;
//!
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

mod rate_limit;
mod redact;

pub use rate_limit::{Clock, ManualClock, RATE_LIMITER_SOURCE, RateLimiter, SystemClock};
pub use redact::SecretRedactor;

/// The regular expression type [`SecretRedactor::with_pattern`] takes (the
/// `regex` crate's).
pub use regex::Regex;
