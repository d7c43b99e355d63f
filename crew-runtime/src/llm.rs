//! The model side: a trait for chat models with native tool calling.
//!
//! An agent sends its model an [`LlmRequest`] (the conversation and the
//! tools on offer) and gets back a [`ModelTurn`]: tool calls to run, or a
//! final answer. Any [`Llm`] can be asked directly too:
//!
//! ```
//! use crew_runtime::ScriptedLlm;
//! use crew_runtime::llm::{ChatMessage, Llm, LlmRequest, ModelTurn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), crew_runtime::llm::LlmError> {
//! let model = ScriptedLlm::new().answer("Paris");
//! let messages = [ChatMessage::user("What is the capital of France?")];
//! let turn = model.complete(&LlmRequest::new(&messages, &[])).await?;
//! assert!(matches!(turn, ModelTurn::FinalAnswer(ref text) if text == "Paris"));
//! # Ok(())
//! # }
//! ```

use std::fmt;

pub use hooks_core::{ChatMessage, Role, ToolCallRequest, ToolDefinition};

/// What the model is asked: the conversation so far and the tools it may
/// call, and where to send the text of a streamed answer as it arrives.
#[derive(Clone, Copy)]
pub struct LlmRequest<'a> {
    /// The conversation, oldest first.
    pub messages: &'a [ChatMessage],
    /// The tools on offer.
    pub tools: &'a [ToolDefinition],
    /// Where a model that streams sends its answer's text, piece by piece,
    /// while the answer is still coming (`None`: nobody listens). The
    /// complete answer is returned either way.
    pub stream: Option<&'a dyn DeltaSink>,
}

impl<'a> LlmRequest<'a> {
    /// A request with nobody listening to its stream.
    ///
    /// ```
    /// use crew_runtime::llm::{ChatMessage, LlmRequest};
    /// let messages = [ChatMessage::user("Hello")];
    /// let request = LlmRequest::new(&messages, &[]);
    /// assert!(request.stream.is_none());
    /// ```
    pub fn new(messages: &'a [ChatMessage], tools: &'a [ToolDefinition]) -> Self {
        LlmRequest {
            messages,
            tools,
            stream: None,
        }
    }
}

impl<'a> LlmRequest<'a> {
    /// The tool observations answering the model's previous turn, in call
    /// order (the trailing `Role::Tool` messages; empty on a first turn).
    ///
    /// ```
    /// use crew_runtime::llm::{ChatMessage, LlmRequest};
    /// let messages = [
    ///     ChatMessage::user("Look up hola"),
    ///     ChatMessage::assistant(""),
    ///     ChatMessage::tool("call_1", "hola means hello"),
    /// ];
    /// assert_eq!(LlmRequest::new(&messages, &[]).observations(), ["hola means hello"]);
    /// ```
    pub fn observations(&self) -> Vec<&'a str> {
        observations(self.messages)
    }

    /// The first user message: the task as the agent was given it.
    ///
    /// ```
    /// use crew_runtime::llm::{ChatMessage, LlmRequest};
    /// let messages = [ChatMessage::system("You help."), ChatMessage::user("Translate hola")];
    /// assert_eq!(LlmRequest::new(&messages, &[]).task_prompt(), Some("Translate hola"));
    /// ```
    pub fn task_prompt(&self) -> Option<&'a str> {
        task_prompt(self.messages)
    }

    /// The latest user message (a follow-up, a person's feedback, or the
    /// task itself when there is no other).
    ///
    /// ```
    /// use crew_runtime::llm::{ChatMessage, LlmRequest};
    /// let messages = [
    ///     ChatMessage::user("Translate hola"),
    ///     ChatMessage::assistant("hello"),
    ///     ChatMessage::user("Shorter, please"),
    /// ];
    /// assert_eq!(LlmRequest::new(&messages, &[]).last_user_message(), Some("Shorter, please"));
    /// ```
    pub fn last_user_message(&self) -> Option<&'a str> {
        last_user_message(self.messages)
    }

    /// The names of the tools on offer, in order.
    ///
    /// ```
    /// use crew_runtime::llm::{LlmRequest, ToolDefinition};
    /// use serde_json::json;
    /// let tools = [ToolDefinition {
    ///     name: "lookup".into(),
    ///     description: "Looks a word up".into(),
    ///     parameters: json!({"type": "object"}),
    /// }];
    /// assert_eq!(LlmRequest::new(&[], &tools).tool_names(), ["lookup"]);
    /// ```
    pub fn tool_names(&self) -> Vec<&'a str> {
        self.tools.iter().map(|tool| tool.name.as_str()).collect()
    }
}

/// The trailing `Role::Tool` messages' texts: what answers the model's
/// previous turn. Shared by [`LlmRequest`] and
/// [`RecordedRequest`](crate::RecordedRequest), so both read a
/// conversation the same way.
pub(crate) fn observations(messages: &[ChatMessage]) -> Vec<&str> {
    let trailing = messages
        .iter()
        .rev()
        .take_while(|m| m.role == Role::Tool)
        .count();
    messages[messages.len() - trailing..]
        .iter()
        .map(|m| m.content.as_str())
        .collect()
}

/// The first user message's text.
pub(crate) fn task_prompt(messages: &[ChatMessage]) -> Option<&str> {
    messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(|m| m.content.as_str())
}

/// The last user message's text.
pub(crate) fn last_user_message(messages: &[ChatMessage]) -> Option<&str> {
    messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(|m| m.content.as_str())
}

impl fmt::Debug for LlmRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmRequest")
            .field("messages", &self.messages)
            .field("tools", &self.tools)
            .field("streamed", &self.stream.is_some())
            .finish()
    }
}

/// Receives a streamed answer's text as it arrives.
///
/// ```
/// use std::sync::Mutex;
/// use crew_runtime::llm::DeltaSink;
///
/// #[derive(Default)]
/// struct Collect(Mutex<String>);
///
/// impl DeltaSink for Collect {
///     fn delta(&self, text: &str) {
///         self.0.lock().unwrap_or_else(|e| e.into_inner()).push_str(text);
///     }
/// }
/// let sink = Collect::default();
/// sink.delta("Hel");
/// sink.delta("lo");
/// assert_eq!(*sink.0.lock().unwrap_or_else(|e| e.into_inner()), "Hello");
/// ```
pub trait DeltaSink: Send + Sync {
    /// One piece of the answer's text, in order.
    fn delta(&self, text: &str);
}

/// The model's answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelTurn {
    /// The model asks for these tool calls (run concurrently), possibly
    /// with some text.
    ToolCalls {
        /// Text said along with the calls.
        content: String,
        /// The calls.
        calls: Vec<ToolCallRequest>,
    },
    /// The model's final answer for the task.
    FinalAnswer(String),
}

/// The answer as model-call hooks see it: its text and the tool calls it
/// asks for (none for a final answer).
///
/// ```
/// use crew_runtime::llm::ModelTurn;
/// use crew_runtime::ModelResponse;
///
/// let seen: ModelResponse = ModelTurn::FinalAnswer("done".into()).into();
/// assert_eq!((seen.content.as_str(), seen.tool_calls.len()), ("done", 0));
/// ```
impl From<ModelTurn> for hooks_core::ModelResponse {
    fn from(turn: ModelTurn) -> Self {
        match turn {
            ModelTurn::FinalAnswer(content) => hooks_core::ModelResponse {
                content,
                tool_calls: Vec::new(),
            },
            ModelTurn::ToolCalls { content, calls } => hooks_core::ModelResponse {
                content,
                tool_calls: calls,
            },
        }
    }
}

/// Why a model could not answer.
///
/// A crew reports it as [`CrewError::Model`](crate::CrewError::Model),
/// naming the agent:
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::llm::LlmError;
///
/// // A scripted model with nothing left to say.
/// let llm = Arc::new(ScriptedLlm::new());
/// let writer = Agent::builder("Writer").llm(llm).build();
/// let crew = Crew::builder()
///     .agent(writer.clone())
///     .task(Task::builder("Write").agent(&writer).build())
///     .global_registry(Arc::new(HookRegistry::new()))
///     .build()?;
/// let error = crew.kickoff_blocking(()).unwrap_err();
/// // Asked once, then again twice (the agent's default `max_retry_limit`).
/// assert!(matches!(
///     error,
///     CrewError::Model { source: LlmError::ScriptExhausted { asked: 3 }, .. }
/// ));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The server answered with an HTTP error status.
    #[error("the model server answered HTTP {status}: {body}")]
    Http {
        /// The status code.
        status: u16,
        /// The response body (truncated).
        body: String,
    },
    /// No answer within the timeout.
    #[error("the model server did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// The connection failed.
    #[error("could not reach the model server: {0}")]
    Transport(String),
    /// The server's answer could not be understood.
    #[error("the model's answer could not be read: {0}")]
    InvalidResponse(String),
    /// The client is not configured (a missing base URL, model or key).
    #[error("the model client is not configured: {0}")]
    Config(String),
    /// A scripted model has no more turns to play.
    #[error("the scripted model has no more turns (it was asked {asked} times)")]
    ScriptExhausted {
        /// How many requests it received.
        asked: usize,
    },
    /// The model panicked while answering (the panic was contained).
    #[error("the model panicked: {0}")]
    Panicked(String),
}

/// A chat model with native tool calling.
///
/// Implement it with [`async_trait`](crate::async_trait):
///
/// ```
/// use crew_runtime::async_trait;
/// use crew_runtime::llm::{Llm, LlmError, LlmRequest, ModelTurn};
///
/// /// Always answers the same.
/// struct Parrot;
///
/// #[async_trait]
/// impl Llm for Parrot {
///     fn name(&self) -> &str {
///         "parrot"
///     }
///
///     async fn complete(&self, request: &LlmRequest<'_>) -> Result<ModelTurn, LlmError> {
///         let last = request.messages.last().map(|m| m.content.clone()).unwrap_or_default();
///         Ok(ModelTurn::FinalAnswer(last))
///     }
/// }
/// # let _ = Parrot;
/// ```
#[async_trait::async_trait]
pub trait Llm: Send + Sync {
    /// A short name for logs (`scripted`, `gpt-4o-mini`, …).
    fn name(&self) -> &str;

    /// The most tokens one answer may have, when the client sets a cap
    /// (Anthropic's `max_tokens`): what a token budget reserves for the
    /// answer before a call. `None` (the default): nothing bounds an
    /// answer, and a token budget refuses the model's calls.
    ///
    /// ```
    /// use crew_runtime::llm::Llm;
    /// use crew_runtime::ScriptedLlm;
    /// assert_eq!(ScriptedLlm::new().max_output_tokens(), None);
    /// assert_eq!(ScriptedLlm::new().max_tokens(512).max_output_tokens(), Some(512));
    /// ```
    fn max_output_tokens(&self) -> Option<u64> {
        None
    }

    /// Answers one request. A model that can stream sends its text to
    /// `request.stream` as it arrives, and returns the whole answer.
    async fn complete(&self, request: &LlmRequest<'_>) -> Result<ModelTurn, LlmError>;

    /// Answers one request, with the tokens the provider reported for the
    /// answer (prompt, completion, total), when it reports them. The
    /// runtime calls this one; by default it is [`complete`](Self::complete)
    /// with no count. A client whose provider reports usage overrides it
    /// (the OpenAI-compatible client and [`ScriptedLlm`](crate::ScriptedLlm)
    /// do).
    ///
    /// ```
    /// use crew_runtime::async_trait;
    /// use crew_runtime::llm::{Llm, LlmError, LlmRequest, ModelTurn};
    /// use crew_runtime::TokenUsage;
    ///
    /// struct Counted;
    ///
    /// #[async_trait]
    /// impl Llm for Counted {
    ///     fn name(&self) -> &str {
    ///         "counted"
    ///     }
    ///
    ///     async fn complete(&self, request: &LlmRequest<'_>) -> Result<ModelTurn, LlmError> {
    ///         Ok(self.complete_with_usage(request).await?.0)
    ///     }
    ///
    ///     async fn complete_with_usage(
    ///         &self,
    ///         _: &LlmRequest<'_>,
    ///     ) -> Result<(ModelTurn, Option<TokenUsage>), LlmError> {
    ///         Ok((ModelTurn::FinalAnswer("hi".into()), Some(TokenUsage::new(12, 1, 13))))
    ///     }
    /// }
    /// # let _ = Counted;
    /// ```
    async fn complete_with_usage(
        &self,
        request: &LlmRequest<'_>,
    ) -> Result<(ModelTurn, Option<hooks_core::TokenUsage>), LlmError> {
        Ok((self.complete(request).await?, None))
    }
}
