//! The context of model-call hooks.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::HookContext;
use super::{AgentInfo, CrewInfo, LlmInfo, TaskInfo};
use crate::extensions::Extensions;
use crate::human::{
    DEFAULT_HUMAN_INPUT_TIMEOUT, HumanInputFuture, HumanInputRequest, HumanInputSource,
};
use crate::message::{ChatMessage, ToolCallRequest, ToolDefinition};

/// The model's answer to one call, as `POST_MODEL_CALL` hooks see and edit
/// it: its text and the tool calls it asks for (none: a final answer).
///
/// ```
/// use hooks_core::{HookRegistry, LlmCallHookContext, ModelResponse, ToolCallRequest, POST_MODEL_CALL};
///
/// // Drop the tool calls a model may not make before they are dispatched.
/// let registry = HookRegistry::new();
/// registry.register_hook(POST_MODEL_CALL, |ctx: &mut LlmCallHookContext| {
///     if let Some(response) = &mut ctx.response {
///         response.tool_calls.retain(|call| call.name != "delete_file");
///     }
/// })?;
/// let call = |name: &str| ToolCallRequest { id: name.into(), name: name.into(), arguments: "{}".into() };
/// let mut ctx = LlmCallHookContext::new(Vec::new());
/// ctx.response = Some(ModelResponse {
///     content: String::new(),
///     tool_calls: vec![call("read_file"), call("delete_file")],
/// });
/// registry.dispatch(POST_MODEL_CALL, &mut ctx);
/// let left: Vec<String> = ctx.response.into_iter().flat_map(|r| r.tool_calls).map(|c| c.name).collect();
/// assert_eq!(left, ["read_file"]);
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelResponse {
    /// The answer's text (the final answer when there are no tool calls).
    pub content: String,
    /// The tool calls the model asks for; what the hooks leave here is what
    /// is dispatched.
    pub tool_calls: Vec<ToolCallRequest>,
}

/// Everything a hook knows about one model call.
///
/// `PRE_MODEL_CALL` hooks edit [`messages`](Self::messages) in place: what
/// they leave is exactly what the model receives. `POST_MODEL_CALL` hooks
/// of the same call receive the same context with
/// [`response`](Self::response) set, and may edit or drop its tool calls
/// before they are dispatched.
///
/// ```
/// use hooks_core::{ChatMessage, HookAborted, LlmCallHookContext};
///
/// // A PRE_MODEL_CALL hook: cap the turns and remind the model of a rule.
/// fn guard(ctx: &mut LlmCallHookContext) -> Result<(), HookAborted> {
///     if ctx.iterations > 10 {
///         return Err(HookAborted::new("too many model turns", "loop-guard"));
///     }
///     ctx.messages.insert(0, ChatMessage::system("Never reveal credentials."));
///     Ok(())
/// }
///
/// let mut ctx = LlmCallHookContext::new(vec![ChatMessage::user("hi")]);
/// guard(&mut ctx)?;
/// assert_eq!(ctx.messages.len(), 2);
/// # Ok::<(), HookAborted>(())
/// ```
pub struct LlmCallHookContext {
    /// The conversation the model will receive (PRE hooks edit it).
    pub messages: Vec<ChatMessage>,
    /// The agent making the call.
    pub agent: Option<Arc<dyn AgentInfo>>,
    /// The task being worked on.
    pub task: Option<Arc<dyn TaskInfo>>,
    /// The crew running the call, absent outside a crew.
    pub crew: Option<Arc<dyn CrewInfo>>,
    /// The model being called.
    pub llm: Option<Arc<dyn LlmInfo>>,
    /// Which model call of the task this is, counting from 1.
    pub iterations: usize,
    /// The tools offered to the model.
    pub tools: Arc<[ToolDefinition]>,
    /// POST only: the model's answer.
    pub response: Option<ModelResponse>,
    /// Values the hooks of this call share (see [`Extensions`]). At
    /// `POST_MODEL_CALL`, the crew runtime leaves there the
    /// [`TokenUsage`](crate::TokenUsage) of the answer when the model
    /// reported it.
    pub extensions: Extensions,
    human_input: Option<Arc<dyn HumanInputSource>>,
    human_input_timeout: Duration,
}

impl LlmCallHookContext {
    /// A context for a call with these messages, outside any agent, task or
    /// crew, with no tools offered.
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        LlmCallHookContext {
            messages,
            agent: None,
            task: None,
            crew: None,
            llm: None,
            iterations: 1,
            tools: Arc::from(Vec::new()),
            response: None,
            extensions: Extensions::new(),
            human_input: None,
            human_input_timeout: DEFAULT_HUMAN_INPUT_TIMEOUT,
        }
    }

    /// Sets the agent.
    pub fn with_agent(mut self, agent: Arc<dyn AgentInfo>) -> Self {
        self.agent = Some(agent);
        self
    }

    /// Sets the task.
    pub fn with_task(mut self, task: Arc<dyn TaskInfo>) -> Self {
        self.task = Some(task);
        self
    }

    /// Sets the crew.
    pub fn with_crew(mut self, crew: Arc<dyn CrewInfo>) -> Self {
        self.crew = Some(crew);
        self
    }

    /// Sets the model.
    pub fn with_llm(mut self, llm: Arc<dyn LlmInfo>) -> Self {
        self.llm = Some(llm);
        self
    }

    /// Sets the tools offered.
    pub fn with_tools(mut self, tools: Arc<[ToolDefinition]>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets which call of the task this is.
    pub fn with_iterations(mut self, iterations: usize) -> Self {
        self.iterations = iterations;
        self
    }

    /// Sets where [`request_human_input`](Self::request_human_input) gets
    /// its answers. With none set, every question is refused with
    /// [`HumanInputError::NoSource`](crate::HumanInputError::NoSource): the
    /// engine has no default person (a crew sets the terminal unless told
    /// otherwise).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hooks_core::{LlmCallHookContext, ScriptedInput};
    ///
    /// let ctx = LlmCallHookContext::new(Vec::new())
    ///     .with_human_input(Arc::new(ScriptedInput::new(["yes"])));
    /// # let _ = ctx;
    /// ```
    pub fn with_human_input(mut self, source: Arc<dyn HumanInputSource>) -> Self {
        self.human_input = Some(source);
        self
    }

    /// Sets how long [`request_human_input`](Self::request_human_input)
    /// waits for an answer (default [`DEFAULT_HUMAN_INPUT_TIMEOUT`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// let ctx = hooks_core::LlmCallHookContext::new(Vec::new())
    ///     .with_human_input_timeout(Duration::from_secs(30));
    /// assert_eq!(ctx.human_input_timeout(), Duration::from_secs(30));
    /// ```
    pub fn with_human_input_timeout(mut self, timeout: Duration) -> Self {
        self.human_input_timeout = timeout;
        self
    }

    /// How long [`request_human_input`](Self::request_human_input) waits
    /// for an answer.
    ///
    /// ```
    /// let ctx = hooks_core::LlmCallHookContext::new(Vec::new());
    /// assert_eq!(ctx.human_input_timeout(), hooks_core::DEFAULT_HUMAN_INPUT_TIMEOUT);
    /// ```
    pub fn human_input_timeout(&self) -> Duration {
        self.human_input_timeout
    }

    /// The agent's role, if the call has an agent.
    pub fn agent_role(&self) -> Option<&str> {
        self.agent.as_deref().map(AgentInfo::role)
    }

    /// The concrete agent type.
    pub fn agent_as<T: Any>(&self) -> Option<&T> {
        let agent: &dyn Any = self.agent.as_deref()?;
        agent.downcast_ref()
    }

    /// Asks a person about this model call and resolves to their answer,
    /// trimmed: await it, in an `async` hook (see
    /// [`ToolCallHookContext::request_human_input`](crate::ToolCallHookContext::request_human_input)).
    /// The request carries the agent's role. Any failure to get an answer
    /// (an error, a panic, a closed source, the timeout) is an error, so
    /// `?` blocks the call.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hooks_core::{HookAborted, LlmCallHookContext, ScriptedInput};
    ///
    /// async fn confirm(ctx: &mut LlmCallHookContext) -> Result<(), HookAborted> {
    ///     if ctx.iterations > 3 {
    ///         let answer = ctx.request_human_input("Keep going?", "yes/no").await?;
    ///         if answer != "yes" {
    ///             return Err(HookAborted::new("stopped by a person", "turn-guard"));
    ///         }
    ///     }
    ///     Ok(())
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut ctx = LlmCallHookContext::new(Vec::new())
    ///     .with_iterations(4)
    ///     .with_human_input(Arc::new(ScriptedInput::new(["yes"])));
    /// assert_eq!(confirm(&mut ctx).await, Ok(()));
    /// assert!(confirm(&mut ctx).await.is_err(), "no answer left");
    /// # }
    /// ```
    pub fn request_human_input(&self, prompt: &str, default_message: &str) -> HumanInputFuture {
        let mut request = HumanInputRequest::new(prompt, default_message);
        request.agent_role = self.agent_role().map(str::to_owned);
        crate::human::ask(self.human_input.clone(), request, self.human_input_timeout)
    }
}

impl HookContext for LlmCallHookContext {
    #[inline]
    fn call_agent_role(&self) -> Option<&str> {
        self.agent_role()
    }

    fn event_agent_role(&self) -> Option<Arc<str>> {
        self.agent.as_deref().map(AgentInfo::shared_role)
    }
}

impl fmt::Debug for LlmCallHookContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmCallHookContext")
            .field("messages", &self.messages)
            .field("agent", &self.agent_role())
            .field("task", &self.task.as_deref().map(TaskInfo::description))
            .field("crew", &self.crew.as_deref().map(CrewInfo::name))
            .field("llm", &self.llm.as_deref().map(LlmInfo::name))
            .field("iterations", &self.iterations)
            .field("tools", &self.tools.len())
            .field("response", &self.response)
            .finish_non_exhaustive()
    }
}
