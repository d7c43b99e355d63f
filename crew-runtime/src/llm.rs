//! The model side: a trait for chat models with native tool calling.

pub use hooks_core::{ChatMessage, Role, ToolCallRequest, ToolDefinition};

/// What the model is asked: the conversation so far and the tools it may
/// call.
#[derive(Debug, Clone, Copy)]
pub struct LlmRequest<'a> {
    /// The conversation, oldest first.
    pub messages: &'a [ChatMessage],
    /// The tools on offer.
    pub tools: &'a [ToolDefinition],
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

/// Why a model could not answer.
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
}

/// A chat model with native tool calling.
pub trait Llm: Send + Sync {
    /// A short name for logs (`scripted`, `gpt-4o-mini`, …).
    fn name(&self) -> &str;

    /// Answers one request.
    fn complete(&self, request: &LlmRequest<'_>) -> Result<ModelTurn, LlmError>;
}
