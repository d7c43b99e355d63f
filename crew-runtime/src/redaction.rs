//! A crew's redaction ([`CrewBuilder::redact_with`](crate::CrewBuilder::redact_with)),
//! applied at every exit of the crew.
//!
//! Two roads leave a crew, and each is cleaned once, where it leaves:
//! - what the model is sent — the conversation (system and task messages,
//!   the model's own text, every tool observation after the POST chain, and
//!   every message when model-call hooks may have edited them) — and what
//!   the caller gets (the error a kickoff returns, its output, a task's
//!   output file), cleaned here;
//! - every event, whoever built it (the runtime's own, the dispatches' of
//!   `hooks-core`), cleaned at the bus's edge: the crew's dispatcher
//!   carries the redaction and cleans each event as it emits it
//!   ([`Event::redact`](hooks_core::Event::redact)). Listeners — the
//!   verbose console, the transcript, the audit trail — see only cleaned
//!   events.
//!
//! What `hooks-core` writes outside events (`tracing` lines, contained
//! panics' messages, what a person is asked) is cleaned through the
//! [`RedactionScope`] the runtime enters on every thread that works for
//! the crew.

use std::borrow::Cow;
use std::sync::Arc;

use hooks_core::runtime::{RedactionScope, redact_contained};
use hooks_core::{ChatMessage, CrewOutput, HookAborted, Redact, TaskOutput};

/// A crew's redactor, or none: every method is a no-op without one.
#[derive(Clone, Default)]
pub(crate) struct Redaction(Option<Arc<dyn Redact>>);

impl Redaction {
    pub(crate) fn new(redactor: Arc<dyn Redact>) -> Self {
        Redaction(Some(redactor))
    }

    pub(crate) fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// The redactor, borrowed (for a dispatcher's edge).
    pub(crate) fn redactor_ref(&self) -> Option<&dyn Redact> {
        self.0.as_deref()
    }

    /// The redactor, for a scope that follows async work.
    pub(crate) fn redactor(&self) -> Option<Arc<dyn Redact>> {
        self.0.clone()
    }

    /// Puts the redactor in scope on this thread, for what `hooks-core`
    /// reports (see the module's documentation).
    pub(crate) fn scope(&self) -> Option<RedactionScope> {
        self.0.as_ref().map(RedactionScope::enter)
    }

    /// `text` as it may leave the crew; borrowed when unchanged.
    pub(crate) fn text<'t>(&self, text: &'t str) -> Cow<'t, str> {
        match &self.0 {
            Some(redactor) => redact_contained(&**redactor, text),
            None => Cow::Borrowed(text),
        }
    }

    /// `text` as it may leave the crew, reusing its buffer when unchanged.
    pub(crate) fn owned(&self, text: String) -> String {
        match self.text(&text) {
            Cow::Owned(cleaned) => cleaned,
            Cow::Borrowed(_) => text,
        }
    }

    /// In place, for the string fields of what leaves the crew.
    pub(crate) fn in_place(&self, text: &mut String) {
        if let Cow::Owned(cleaned) = self.text(text) {
            *text = cleaned;
        }
    }

    /// A message as it may be sent to the model: its text, and the
    /// arguments of the tool calls it holds (the model's own words, but a
    /// secret it copied into them must not go out again with the next
    /// request).
    pub(crate) fn message(&self, mut message: ChatMessage) -> ChatMessage {
        self.message_in_place(&mut message);
        message
    }

    /// [`message`](Self::message), in place.
    pub(crate) fn message_in_place(&self, message: &mut ChatMessage) {
        self.in_place(&mut message.content);
        for call in &mut message.tool_calls {
            self.in_place(&mut call.arguments);
        }
    }

    /// A hook's abort as it may leave the crew.
    pub(crate) fn abort(&self, mut abort: HookAborted) -> HookAborted {
        self.in_place(&mut abort.reason);
        self.in_place(&mut abort.source);
        abort
    }

    /// A kickoff's output as it may leave the crew: the final text and
    /// every task's (with their descriptions, which kickoff inputs filled).
    pub(crate) fn output(&self, mut output: CrewOutput) -> CrewOutput {
        if !self.is_set() {
            return output;
        }
        self.in_place(&mut output.raw);
        for task in &mut output.tasks_output {
            let TaskOutput {
                description,
                expected_output,
                raw,
                ..
            } = task;
            self.in_place(description);
            self.in_place(expected_output);
            self.in_place(raw);
        }
        output
    }
}

impl std::fmt::Debug for Redaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_set() { "set" } else { "none" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_redactor_nothing_changes() {
        let redaction = Redaction::default();
        assert_eq!(redaction.owned("hunter2".to_owned()), "hunter2");
        assert!(redaction.scope().is_none());
        assert!(redaction.redactor_ref().is_none());
    }
}
