//! The contexts hooks receive, one type per family of points, and the views
//! of the runtime's agents, tasks, crews, tools and models they carry.

use std::any::Any;
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
pub(crate) fn ask_human(
    source: Option<&Arc<dyn HumanInputSource>>,
    prompt: &str,
    default_message: &str,
) -> Result<String, HumanInputError> {
    let answer = match source {
        Some(source) => source.ask(prompt, default_message)?,
        None => TerminalInput::new().ask(prompt, default_message)?,
    };
    Ok(answer.trim().to_owned())
}
