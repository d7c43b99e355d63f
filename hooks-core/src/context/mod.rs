//! The contexts hooks receive, one type per family of points, and the views
//! of the runtime's agents, tasks, crews, tools and models they carry.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use serde_json::Value;

use crate::human::{HumanInputError, HumanInputSource, TerminalInput};

mod execution;
mod llm;
mod step;
mod tool;

pub use execution::{
    ExecutionEndContext, ExecutionStartContext, ExecutionStatus, InputContext, OutputContext,
};
pub use llm::{LlmCallHookContext, ModelResponse};
pub use step::{StepContext, StepKind};
pub use tool::{RawToolResult, ToolCallHookContext, ToolCallStatus};

/// What a hook can see of the tool being called. The runtime's tool type
/// implements it; hooks reach the concrete type with
/// [`ToolCallHookContext::tool_as`].
pub trait ToolInfo: Any + Send + Sync {
    /// The tool's normalized name.
    fn name(&self) -> &str;
    /// What the tool does, as the model is told.
    fn description(&self) -> &str;
    /// The JSON schema of the tool's arguments.
    fn args_schema(&self) -> &Value;
}

/// What a hook can see of the agent making the call.
pub trait AgentInfo: Any + Send + Sync {
    /// The agent's role; `agents = [...]` filters match it exactly.
    fn role(&self) -> &str;

    /// The role as a shared string, for events. The default copies
    /// [`role`](Self::role); an agent that keeps its role in an `Arc<str>`
    /// returns a clone of it, so that reporting a dispatch allocates
    /// nothing.
    fn shared_role(&self) -> Arc<str> {
        Arc::from(self.role())
    }
}

/// What a hook can see of the task being worked on.
pub trait TaskInfo: Any + Send + Sync {
    /// The task's description, with its inputs filled in.
    fn description(&self) -> &str;
}

/// What a hook can see of the crew running the call.
pub trait CrewInfo: Any + Send + Sync {
    /// The crew's name.
    fn name(&self) -> &str;
}

/// What a hook can see of the model being called.
pub trait LlmInfo: Any + Send + Sync {
    /// The model's name (`gpt-4o-mini`, `scripted`, …).
    fn name(&self) -> &str;
}

/// Asks `source` (the terminal when there is none) and trims the answer.
///
/// Whatever the source does, no answer is an error: a panic of the source
/// is caught here and reported as [`HumanInputError::SourceFailed`], so it
/// never unwinds into the hook that asked, and `?` there refuses.
pub(crate) fn ask_human(
    source: Option<&Arc<dyn HumanInputSource>>,
    prompt: &str,
    default_message: &str,
) -> Result<String, HumanInputError> {
    // A person is an exit too: the crew's redaction in scope cleans what
    // they are shown (a credential an earlier PRE hook put in the input).
    let prompt = crate::events::redact_in_scope(prompt);
    let default_message = crate::events::redact_in_scope(default_message);
    // The source is only read through `&self`; one that a panic left in a
    // bad state fails its next question, which refuses as well. Contained
    // quietly: its message may carry what it was shown.
    let asked = crate::panic::contain_panic(AssertUnwindSafe(|| match source {
        Some(source) => source.ask(&prompt, &default_message),
        None => TerminalInput::new().ask(&prompt, &default_message),
    }));
    match asked {
        Ok(answer) => Ok(answer?.trim().to_owned()),
        Err(panic) => {
            let message = crate::dispatch::panic_message(&*panic);
            crate::dispatch::drop_payload(panic);
            Err(HumanInputError::SourceFailed(format!(
                "it panicked: {message}"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::human::{
        CallbackInput, ChannelInput, HumanInputError, HumanInputSource, ScriptedInput,
    };
    use crate::{HookAborted, LlmCallHookContext, ToolCallHookContext};

    fn tool_call(source: impl HumanInputSource + 'static) -> ToolCallHookContext {
        ToolCallHookContext::new("send_email", Default::default())
            .with_human_input(Arc::new(source))
    }

    fn ask(source: impl HumanInputSource + 'static) -> Result<String, HumanInputError> {
        tool_call(source).request_human_input("Send it?", "yes/no")
    }

    /// A `PRE_TOOL_CALL` gate written the way the guide writes it.
    fn gate(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
        let answer = ctx.request_human_input("Send it?", "yes/no")?;
        if answer == "yes" {
            Ok(())
        } else {
            Err(HookAborted::new("refused", "gate"))
        }
    }

    #[test]
    fn the_answer_is_trimmed() {
        assert_eq!(ask(ScriptedInput::new([" yes \r\n"])), Ok("yes".to_owned()));
    }

    #[test]
    fn an_error_of_the_source_is_an_error() {
        let failing =
            CallbackInput::new(|_: &str, _: &str| Err(HumanInputError::Io("broken pipe".into())));
        assert_eq!(ask(failing), Err(HumanInputError::Io("broken pipe".into())));
    }

    #[test]
    fn a_closed_source_is_an_error() {
        let (closed, questions) = ChannelInput::new(Duration::from_secs(30));
        drop(questions);
        assert_eq!(ask(closed), Err(HumanInputError::Closed));
        assert_eq!(
            ask(ScriptedInput::default().then_fail(HumanInputError::Closed)),
            Err(HumanInputError::Closed)
        );
    }

    #[test]
    fn a_source_that_times_out_is_an_error() {
        // Nobody reads the questions: the source gives up after its timeout.
        let (silent, _questions) = ChannelInput::new(Duration::from_millis(10));
        assert_eq!(
            ask(silent),
            Err(HumanInputError::TimedOut(Duration::from_millis(10)))
        );
    }

    #[test]
    fn a_panicking_source_is_an_error_and_the_panic_stays_inside() {
        let panicking = CallbackInput::new(|_: &str, _: &str| -> Result<String, HumanInputError> {
            panic!("the approval UI crashed")
        });
        assert_eq!(
            ask(panicking),
            Err(HumanInputError::SourceFailed(
                "it panicked: the approval UI crashed".into()
            ))
        );
        let formatted =
            CallbackInput::new(|prompt: &str, _: &str| -> Result<String, HumanInputError> {
                panic!("cannot show {prompt:?}")
            });
        assert_eq!(
            ask(formatted).map_err(|error| error.to_string()),
            Err("the answer source failed: it panicked: cannot show \"Send it?\"".into())
        );
        let non_text = CallbackInput::new(|_: &str, _: &str| -> Result<String, HumanInputError> {
            std::panic::panic_any(42_u8)
        });
        assert_eq!(
            ask(non_text),
            Err(HumanInputError::SourceFailed(
                "it panicked: a non-text panic payload".into()
            ))
        );
    }

    #[test]
    fn every_failure_of_the_source_makes_the_gate_refuse() {
        let (closed, questions) = ChannelInput::new(Duration::from_secs(30));
        drop(questions);
        let (silent, _questions) = ChannelInput::new(Duration::from_millis(10));
        let sources: Vec<Arc<dyn HumanInputSource>> = vec![
            Arc::new(CallbackInput::new(|_: &str, _: &str| {
                Err(HumanInputError::Io("broken pipe".into()))
            })),
            Arc::new(closed),
            Arc::new(silent),
            Arc::new(ScriptedInput::default()),
            Arc::new(CallbackInput::new(
                |_: &str, _: &str| -> Result<String, HumanInputError> {
                    panic!("the approval UI crashed")
                },
            )),
        ];
        for source in sources {
            let mut ctx =
                ToolCallHookContext::new("send_email", Default::default()).with_human_input(source);
            let refusal = gate(&mut ctx).expect_err("no answer refuses");
            assert_eq!(refusal.source, "human-input");
            assert!(
                refusal.reason.starts_with("no human approval: "),
                "{refusal:?}"
            );
        }
        let mut approved = tool_call(ScriptedInput::new(["yes"]));
        assert_eq!(gate(&mut approved), Ok(()));
    }

    #[test]
    fn model_call_hooks_get_the_same_guarantee() {
        let panicking = CallbackInput::new(|_: &str, _: &str| -> Result<String, HumanInputError> {
            panic!("the approval UI crashed")
        });
        let ctx = LlmCallHookContext::new(Vec::new()).with_human_input(Arc::new(panicking));
        assert_eq!(
            ctx.request_human_input("Call the model?", "yes/no"),
            Err(HumanInputError::SourceFailed(
                "it panicked: the approval UI crashed".into()
            ))
        );
    }
}
