//! The bus's edge: what an event's texts look like once a crew's redaction
//! has cleaned them. Every event of a crew passes here once, on its way to
//! the buses ([`Dispatcher::emit`](crate::runtime::Dispatcher::emit)).

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use super::Event;
use crate::redaction::{Redact, redact_contained};

impl Event {
    /// Cleans, with `redactor`, every text of the event that can carry what
    /// a model, a tool, a hook, a person or a kickoff's inputs wrote: tool
    /// names and arguments, results, errors, reasons, outputs, contexts,
    /// task names and prompts, a model's answer and the names of the tools
    /// it asked for, input values. A redactor that panics withholds the
    /// text it was cleaning (see [`redact_contained`]).
    ///
    /// Left as they are: the names the program chose (agent roles, crew
    /// and model names, hook names, the kickoff's user and id, which a
    /// secret rule could mistake for a key), the conversation a model
    /// call lends ([`LlmCallStartedEvent::messages`](super::LlmCallStartedEvent::messages),
    /// cleaned as it is built, because the model receives it), a streamed
    /// chunk (cleaned by its stream, which sees a secret that straddles
    /// two chunks) and an integration's payload (its integration cleans
    /// it).
    ///
    /// ```
    /// use std::borrow::Cow;
    /// use hooks_core::events::ToolUsageErrorEvent;
    /// use hooks_core::{Event, Redact};
    ///
    /// struct HideKey;
    /// impl Redact for HideKey {
    ///     fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
    ///         if text.contains("sk-123") { Cow::Owned(text.replace("sk-123", "[KEY]")) } else { Cow::Borrowed(text) }
    ///     }
    /// }
    ///
    /// let mut event = Event::ToolUsageError(ToolUsageErrorEvent {
    ///     meta: Default::default(),
    ///     tool_name: "fetch".into(),
    ///     tool_input: serde_json::json!({"token": "sk-123"}),
    ///     error: "refused sk-123".into(),
    ///     agent_role: Some("Analyst".into()),
    ///     task: None,
    ///     crew: None,
    /// });
    /// event.redact(&HideKey);
    /// let Event::ToolUsageError(error) = event else { unreachable!() };
    /// assert_eq!(error.error, "refused [KEY]");
    /// assert_eq!(error.tool_input, serde_json::json!({"token": "[KEY]"}));
    /// ```
    pub fn redact(&mut self, redactor: &dyn Redact) {
        let text = |text: &mut String| clean(redactor, text);
        let some = |text: &mut Option<String>| {
            if let Some(text) = text {
                clean(redactor, text);
            }
        };
        let json = |value: &mut Value| *value = redact_json(redactor, std::mem::take(value));
        match self {
            Event::HookDispatched(e) => {
                some(&mut e.abort_reason);
                some(&mut e.abort_source);
                if let Some(name) = &mut e.tool_name
                    && let Cow::Owned(cleaned) = redact_contained(redactor, name)
                {
                    *name = Arc::from(cleaned);
                }
            }
            Event::HookPanicked(e) => {
                text(&mut e.message);
                some(&mut e.tool_name);
            }
            Event::ToolUsageStarted(e) | Event::ToolExecutionStarted(e) => {
                text(&mut e.tool_name);
                json(&mut e.tool_input);
                some(&mut e.task);
            }
            Event::ToolUsageFinished(e) => {
                text(&mut e.tool_name);
                json(&mut e.tool_input);
                text(&mut e.result);
                some(&mut e.task);
            }
            Event::ToolUsageError(e) => {
                text(&mut e.tool_name);
                json(&mut e.tool_input);
                text(&mut e.error);
                some(&mut e.task);
            }
            Event::ToolFailureDetected(e) => {
                text(&mut e.tool_name);
                text(&mut e.reason);
                some(&mut e.task);
            }
            Event::ToolUsageAbandoned(e) => {
                text(&mut e.tool_name);
                some(&mut e.result);
                some(&mut e.task);
            }
            Event::CrewKickoffStarted(e) => {
                if e.inputs.iter().any(|(_, value)| changes(redactor, value)) {
                    e.inputs = e
                        .inputs
                        .iter()
                        .map(|(name, value)| (name, redact_contained(redactor, value)))
                        .collect();
                }
            }
            Event::CrewKickoffCompleted(e) => text(&mut e.output),
            Event::CrewKickoffFailed(e) => text(&mut e.error),
            Event::TaskStarted(e) => {
                text(&mut e.task_name);
                text(&mut e.context);
            }
            Event::TaskCompleted(e) => {
                text(&mut e.task_name);
                text(&mut e.output);
            }
            Event::TaskFailed(e) => {
                text(&mut e.task_name);
                text(&mut e.error);
            }
            Event::AgentExecutionStarted(e) => {
                text(&mut e.task_name);
                text(&mut e.task_prompt);
            }
            Event::AgentExecutionCompleted(e) => {
                text(&mut e.task_name);
                text(&mut e.output);
            }
            Event::AgentExecutionError(e) => {
                text(&mut e.task_name);
                text(&mut e.error);
            }
            Event::LlmCallStarted(e) => text(&mut e.task_name),
            Event::LlmCallCompleted(e) => {
                text(&mut e.task_name);
                text(&mut e.response);
                e.tool_calls.iter_mut().for_each(text);
            }
            Event::LlmCallFailed(e) => {
                text(&mut e.task_name);
                text(&mut e.error);
            }
            Event::LlmStreamChunk(_) | Event::Integration(_) => {}
        }
    }
}

/// `text`, cleaned in place (its buffer kept when nothing changed).
fn clean(redactor: &dyn Redact, text: &mut String) {
    if let Cow::Owned(cleaned) = redact_contained(redactor, text) {
        *text = cleaned;
    }
}

/// Whether `redactor` changes `text`.
fn changes(redactor: &dyn Redact, text: &str) -> bool {
    matches!(redact_contained(redactor, text), Cow::Owned(_))
}

/// A JSON value (a tool's arguments) as it may leave a crew. The whole
/// document is cleaned as text, so that key/value rules see the keys; it
/// is read back as JSON, or kept as a string if the redactor did not leave
/// JSON.
///
/// ```
/// use std::borrow::Cow;
/// use hooks_core::Redact;
/// use hooks_core::runtime::redact_json;
/// use serde_json::json;
///
/// struct HideHunter2;
/// impl Redact for HideHunter2 {
///     fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
///         if text.contains("hunter2") { Cow::Owned(text.replace("hunter2", "[REDACTED]")) } else { Cow::Borrowed(text) }
///     }
/// }
///
/// let cleaned = redact_json(&HideHunter2, json!({"user": "ann", "password": "hunter2"}));
/// assert_eq!(cleaned, json!({"user": "ann", "password": "[REDACTED]"}));
/// ```
pub fn redact_json(redactor: &dyn Redact, value: Value) -> Value {
    let text = value.to_string();
    match redact_contained(redactor, &text) {
        Cow::Borrowed(_) => value,
        Cow::Owned(cleaned) => serde_json::from_str(&cleaned).unwrap_or(Value::String(cleaned)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{CrewKickoffStartedEvent, ToolUsageFinishedEvent};
    use serde_json::json;

    struct HideHunter2;

    impl Redact for HideHunter2 {
        fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
            if text.contains("hunter2") {
                Cow::Owned(text.replace("hunter2", "[REDACTED]"))
            } else {
                Cow::Borrowed(text)
            }
        }
    }

    struct Mangle;

    impl Redact for Mangle {
        fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
            Cow::Owned(format!("<{}>", text.len()))
        }
    }

    struct Panics;

    impl Redact for Panics {
        fn redact<'t>(&self, _: &'t str) -> Cow<'t, str> {
            panic!("the rule set failed to load")
        }
    }

    #[test]
    fn json_stays_json_when_the_redactor_keeps_it() {
        let input = json!({"query": "rust", "password": "hunter2"});
        assert_eq!(
            redact_json(&HideHunter2, input),
            json!({"query": "rust", "password": "[REDACTED]"})
        );
    }

    #[test]
    fn json_becomes_a_string_when_the_redactor_breaks_it() {
        assert_eq!(redact_json(&Mangle, json!({"a": 1})), json!("<7>"));
    }

    fn finished(text: &str) -> Event {
        Event::ToolUsageFinished(ToolUsageFinishedEvent {
            meta: Default::default(),
            tool_name: format!("fetch_{text}"),
            tool_input: json!({ "key": text }),
            result: format!("got {text}"),
            blocked: false,
            duration: std::time::Duration::ZERO,
            agent_role: Some(format!("role {text}")),
            task: Some(format!("task {text}")),
            crew: Some(format!("crew {text}")),
        })
    }

    #[test]
    fn what_the_call_carries_is_cleaned_and_the_names_the_program_chose_are_kept() {
        let mut event = finished("hunter2");
        event.redact(&HideHunter2);
        let Event::ToolUsageFinished(e) = event else {
            panic!("still a finish")
        };
        assert_eq!(e.tool_name, "fetch_[REDACTED]");
        assert_eq!(e.tool_input, json!({"key": "[REDACTED]"}));
        assert_eq!(e.result, "got [REDACTED]");
        assert_eq!(e.task.as_deref(), Some("task [REDACTED]"));
        assert_eq!(e.agent_role.as_deref(), Some("role hunter2"));
        assert_eq!(e.crew.as_deref(), Some("crew hunter2"));
    }

    #[test]
    fn a_kickoffs_input_values_are_cleaned_and_its_id_is_kept() {
        let mut event = Event::CrewKickoffStarted(CrewKickoffStartedEvent {
            meta: Default::default(),
            crew_name: "ops".into(),
            inputs: [("password", "hunter2"), ("user", "ann")]
                .into_iter()
                .collect(),
            user: Some("ann".into()),
            kickoff_id: Some("hunter2-run".into()),
        });
        event.redact(&HideHunter2);
        let Event::CrewKickoffStarted(e) = event else {
            panic!("still a start")
        };
        assert_eq!(e.inputs.get("password"), Some("[REDACTED]"));
        assert_eq!(e.inputs.get("user"), Some("ann"));
        assert_eq!(e.kickoff_id.as_deref(), Some("hunter2-run"));
    }

    #[test]
    fn a_redactor_that_panics_withholds_every_text_it_was_given() {
        let mut event = finished("hunter2");
        event.redact(&Panics);
        let Event::ToolUsageFinished(e) = event else {
            panic!("still a finish")
        };
        let withheld = crate::redaction::REDACTION_FAILED;
        assert_eq!(e.result, withheld);
        assert_eq!(e.tool_name, withheld);
        assert!(!e.tool_input.to_string().contains("hunter2"));
    }
}
