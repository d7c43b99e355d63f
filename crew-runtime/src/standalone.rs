//! An agent run on its own, without a crew: CrewAI's
//! `Agent.kickoff(messages)`.
//!
//! The run goes through the crew machinery (one task carrying the
//! caller's messages, on a crew made for the run and dropped after it), so
//! it meets every point a crew's task meets, in the same order, with the
//! same guarantees; only, hooks see no crew (and the model-call hooks no
//! task, as the reference's), crew-scoped hooks do not
//! exist for it, and no crew-kickoff event is reported.

use std::sync::{Arc, PoisonError};

use hooks_core::{ChatMessage, CrewOutput, Role, TokenUsage, global_registry};

use crate::agent::Agent;
use crate::crew::Crew;
use crate::error::CrewError;
use crate::run::Conversation;
use crate::task::Task;

/// What a standalone agent is asked ([`Agent::kickoff`]): a prompt (one
/// user message) or a conversation of [`ChatMessage`]s.
///
/// ```
/// use crew_runtime::{AgentMessages, ChatMessage};
///
/// let prompt = AgentMessages::from("What is Rust?");
/// assert_eq!(prompt.as_slice(), [ChatMessage::user("What is Rust?")]);
///
/// let conversation = AgentMessages::from(vec![
///     ChatMessage::user("Name a systems language."),
///     ChatMessage::assistant("Rust."),
///     ChatMessage::user("Why that one?"),
/// ]);
/// assert_eq!(conversation.as_slice().len(), 3);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentMessages(Vec<ChatMessage>);

impl AgentMessages {
    /// The messages, in order.
    pub fn as_slice(&self) -> &[ChatMessage] {
        &self.0
    }

    /// The messages, taken out.
    pub fn into_vec(self) -> Vec<ChatMessage> {
        self.0
    }
}

impl From<&str> for AgentMessages {
    /// One user message.
    fn from(prompt: &str) -> Self {
        AgentMessages(vec![ChatMessage::user(prompt)])
    }
}

impl From<String> for AgentMessages {
    /// One user message.
    fn from(prompt: String) -> Self {
        AgentMessages(vec![ChatMessage::user(prompt)])
    }
}

impl From<&String> for AgentMessages {
    /// One user message.
    fn from(prompt: &String) -> Self {
        AgentMessages::from(prompt.as_str())
    }
}

impl From<ChatMessage> for AgentMessages {
    fn from(message: ChatMessage) -> Self {
        AgentMessages(vec![message])
    }
}

impl From<Vec<ChatMessage>> for AgentMessages {
    fn from(messages: Vec<ChatMessage>) -> Self {
        AgentMessages(messages)
    }
}

impl From<&[ChatMessage]> for AgentMessages {
    fn from(messages: &[ChatMessage]) -> Self {
        AgentMessages(messages.to_vec())
    }
}

impl<const N: usize> From<[ChatMessage; N]> for AgentMessages {
    fn from(messages: [ChatMessage; N]) -> Self {
        AgentMessages(messages.into())
    }
}

impl FromIterator<ChatMessage> for AgentMessages {
    fn from_iter<I: IntoIterator<Item = ChatMessage>>(messages: I) -> Self {
        AgentMessages(messages.into_iter().collect())
    }
}

/// What a standalone agent's run gives back ([`Agent::kickoff`]), as
/// CrewAI's `LiteAgentOutput`: the final answer, the whole conversation,
/// who answered and the tokens it took.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::{ChatMessage, TokenUsage};
///
/// let model = Arc::new(ScriptedLlm::new().reporting_usage(TokenUsage::new(12, 3, 15)).answer("Rust."));
/// let agent = Agent::builder("Advisor").llm(model).global_registry(Arc::new(HookRegistry::new())).build();
/// let output = agent.kickoff_blocking("Which language?")?;
/// assert_eq!(output.raw, "Rust.");
/// assert_eq!(output.agent_role, "Advisor");
/// assert_eq!(output.token_usage.total_tokens, 15);
/// assert_eq!(output.messages.last(), Some(&ChatMessage::assistant("Rust.")));
/// assert!(!output.iteration_limit_reached);
/// # Ok::<(), CrewError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentOutput {
    /// The final answer, as the `POST_STEP` and `OUTPUT` hooks left it
    /// (or the note saying the agent reached its `max_iter`).
    pub raw: String,
    /// The conversation as the model last saw it — the agent's system
    /// message, the messages it was given, its tool calls and their
    /// observations, as the model-call hooks left them — ending with the
    /// model's final answer (as the `POST_MODEL_CALL` hooks left it).
    pub messages: Vec<ChatMessage>,
    /// The agent's role.
    pub agent_role: String,
    /// The tokens of the run's model responses, as the provider reported
    /// them.
    pub token_usage: TokenUsage,
    /// Whether the agent stopped at its `max_iter` without a final answer.
    pub iteration_limit_reached: bool,
}

impl Agent {
    /// Runs the agent on its own, without a crew, on `messages` (a prompt
    /// or a conversation): CrewAI's `Agent.kickoff(messages)`.
    ///
    /// The run goes through every point a crew's task meets:
    /// `EXECUTION_START` and `INPUT` (with no inputs), `PRE_STEP` (a
    /// payload a hook leaves there reaches the model as context),
    /// `PRE_MODEL_CALL` / `POST_MODEL_CALL` at every model turn,
    /// `PRE_TOOL_CALL` / `POST_TOOL_CALL` around every tool call,
    /// `POST_STEP`, `OUTPUT`, and `EXECUTION_END` once. The hooks come
    /// from the global registry, or the one given with
    /// [`AgentBuilder::global_registry`](crate::AgentBuilder::global_registry);
    /// they see `crew` absent, as for any call outside a crew, and the
    /// model-call hooks see no task (as the reference). The model is
    /// told who the agent is (a system message), then `messages`; the texts
    /// are sent as they are (no `{placeholder}` is filled).
    ///
    /// Events: the task, agent-execution, model-call and tool events of a
    /// crew's task, on the registry's bus, with an empty crew name; no
    /// `CrewKickoff*` event. It fails as a crew's kickoff fails (a hook's
    /// abort, the model's error), with [`CrewError::NoMessages`] for an
    /// empty conversation and [`CrewError::InvalidAgent`] for an agent no
    /// crew could run (two tools of one name, `max_iter` 0). Dropping the
    /// future cancels the run, as for [`Crew::kickoff`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::Role;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let delete = Tool::dynamic("delete_file", "Deletes a file", json!({"type": "object"}), |_| {
    ///     Ok::<_, String>(json!("deleted"))
    /// });
    /// let model = Arc::new(ScriptedLlm::new().call("delete_file", json!({"path": "notes.txt"})).answer("Could not delete it."));
    /// let hooks = Arc::new(HookRegistry::new());
    /// hooks.register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
    ///     Err(HookAborted::new("deleting is not allowed", "safety-policy"))
    /// })?;
    /// let janitor = Agent::builder("Janitor").tool(delete).llm(model).global_registry(hooks).build();
    ///
    /// let output = janitor.kickoff("Delete notes.txt").await?;
    ///
    /// assert_eq!(output.raw, "Could not delete it.");
    /// let roles: Vec<Role> = output.messages.iter().map(|m| m.role).collect();
    /// assert_eq!(roles, [Role::System, Role::User, Role::Assistant, Role::Tool, Role::Assistant]);
    /// assert_eq!(output.messages[3].content, "Tool execution blocked by hook. Tool: delete_file");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn kickoff(
        &self,
        messages: impl Into<AgentMessages>,
    ) -> Result<AgentOutput, CrewError> {
        let (crew, conversation) = self.standalone_crew(messages.into())?;
        let output = crew.kickoff(()).await?;
        Ok(self.output(output, &conversation))
    }

    /// [`Agent::kickoff`] for synchronous code, as
    /// [`Crew::kickoff_blocking`] is for crews: outside a tokio runtime it
    /// runs on a runtime of this thread's own, inside one on a thread of
    /// its own.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::ChatMessage;
    ///
    /// let model = Arc::new(ScriptedLlm::new().answer("Ferris."));
    /// let agent = Agent::builder("Guide").llm(model.clone()).global_registry(Arc::new(HookRegistry::new())).build();
    /// let output = agent.kickoff_blocking(vec![
    ///     ChatMessage::user("Who is Rust's mascot?"),
    ///     ChatMessage::assistant("A crab."),
    ///     ChatMessage::user("Its name?"),
    /// ])?;
    /// assert_eq!(output.raw, "Ferris.");
    /// // The model saw the agent's system message, then the conversation.
    /// assert_eq!(model.requests()[0].messages.len(), 4);
    /// # Ok::<(), CrewError>(())
    /// ```
    pub fn kickoff_blocking(
        &self,
        messages: impl Into<AgentMessages>,
    ) -> Result<AgentOutput, CrewError> {
        let (crew, conversation) = self.standalone_crew(messages.into())?;
        let output = crew.kickoff_blocking(())?;
        Ok(self.output(output, &conversation))
    }

    /// A crew carrying this agent's run: one task opening with `messages`,
    /// on the agent's registry.
    fn standalone_crew(&self, messages: AgentMessages) -> Result<(Crew, Conversation), CrewError> {
        let messages = messages.into_vec();
        if messages.is_empty() {
            return Err(CrewError::NoMessages {
                agent: self.role().to_owned(),
            });
        }
        // What step contexts and events name the run by: what was asked
        // last.
        let description = messages
            .iter()
            .rev()
            .find(|message| message.role == Role::User)
            .or(messages.last())
            .map(|message| message.content.clone())
            .unwrap_or_default();
        let task = Task::opening_with(description, self, messages);
        let conversation = Conversation::default();
        let registry = self
            .registry()
            .cloned()
            .unwrap_or_else(|| global_registry().into());
        let crew = Crew::builder()
            .name(self.role())
            .agent(self.clone())
            .task(task)
            .global_registry(registry)
            .standalone(Arc::clone(&conversation))
            .build()
            .map_err(|source| CrewError::InvalidAgent {
                agent: self.role().to_owned(),
                source: Box::new(source),
            })?;
        Ok((crew, conversation))
    }

    fn output(&self, output: CrewOutput, conversation: &Conversation) -> AgentOutput {
        let messages =
            std::mem::take(&mut *conversation.lock().unwrap_or_else(PoisonError::into_inner));
        AgentOutput {
            iteration_limit_reached: output
                .tasks_output
                .first()
                .is_some_and(|task| task.iteration_limit_reached),
            raw: output.raw,
            messages,
            agent_role: self.role().to_owned(),
            token_usage: output.token_usage,
        }
    }
}
