//! The conversation with a model: messages, tool calls and tool
//! definitions, as model-call hooks see and edit them.

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
