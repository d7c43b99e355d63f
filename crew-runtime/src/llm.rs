//! The model side: a trait for chat models with native tool calling.

use serde_json::Value;

/// Who said a message in a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Instructions to the model.
    System,
    /// The task and inputs.
    User,
    /// The model's own turns (text and/or tool calls).
    Assistant,
    /// A tool's observation, answering one tool call by id.
    Tool,
}

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallRequest {
    /// The call's id, echoed back with its observation.
    pub id: String,
    /// The tool name as the model spelled it (not yet normalized).
    pub name: String,
    /// The arguments exactly as the model produced them: JSON text that may
    /// be invalid or not an object; the executor checks it.
    pub arguments: String,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// Who said it.
    pub role: Role,
    /// The text (may be empty for an assistant turn with only tool calls).
    pub content: String,
    /// Tool calls of an assistant turn.
    pub tool_calls: Vec<ToolCallRequest>,
    /// For a `Role::Tool` message: the id of the call it answers.
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage::plain(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage::plain(Role::User, content)
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        ChatMessage::plain(Role::Assistant, content)
    }

    /// An assistant turn that asks for tool calls.
    pub fn assistant_tool_calls(content: impl Into<String>, calls: Vec<ToolCallRequest>) -> Self {
        ChatMessage {
            tool_calls: calls,
            ..ChatMessage::plain(Role::Assistant, content)
        }
    }

    /// A tool observation answering call `id`.
    pub fn tool(id: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            tool_call_id: Some(id.into()),
            ..ChatMessage::plain(Role::Tool, content)
        }
    }

    fn plain(role: Role, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool as the model is told about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    /// The normalized tool name.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// The JSON schema of its arguments (an object schema).
    pub parameters: Value,
}

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
