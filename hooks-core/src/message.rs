//! The conversation with a model: messages, tool calls and tool
//! definitions, as model-call hooks see and edit them.

use serde_json::Value;

/// Who said a message in a conversation.
///
/// ```
/// use hooks_core::{ChatMessage, Role};
///
/// let conversation = [
///     ChatMessage::system("Be brief."),
///     ChatMessage::user("What is 2 + 2?"),
///     ChatMessage::assistant("4"),
/// ];
/// // A PRE_MODEL_CALL hook might count what the user said.
/// let from_user = conversation.iter().filter(|m| m.role == Role::User).count();
/// assert_eq!(from_user, 1);
/// for message in &conversation {
///     let who = match message.role {
///         Role::System => "system",
///         Role::User => "user",
///         Role::Assistant => "assistant",
///         Role::Tool => "tool",
///     };
///     println!("{who}: {}", message.content);
/// }
/// ```
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
///
/// ```
/// use hooks_core::{ChatMessage, ToolCallRequest};
///
/// let call = ToolCallRequest {
///     id: "call_1".into(),
///     name: "Web Search".into(),
///     arguments: r#"{"query": "rust hooks"}"#.into(),
/// };
/// let turn = ChatMessage::assistant_tool_calls("", vec![call]);
/// // The arguments are the model's text: parse them to read them.
/// let args: serde_json::Value = serde_json::from_str(&turn.tool_calls[0].arguments)?;
/// assert_eq!(args["query"], "rust hooks");
/// # Ok::<(), serde_json::Error>(())
/// ```
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
///
/// ```
/// use hooks_core::{ChatMessage, Role};
///
/// let answer = ChatMessage::tool("call_1", "3 results");
/// assert_eq!(answer.role, Role::Tool);
/// assert_eq!(answer.tool_call_id.as_deref(), Some("call_1"));
///
/// let question = ChatMessage::user("Find the docs");
/// assert_eq!((question.role, question.content.as_str()), (Role::User, "Find the docs"));
/// assert!(question.tool_calls.is_empty());
/// ```
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
///
/// ```
/// use std::sync::Arc;
/// use hooks_core::{HookRegistry, LlmCallHookContext, ToolDefinition, PRE_MODEL_CALL};
/// use serde_json::json;
///
/// let search = ToolDefinition {
///     name: "web_search".into(),
///     description: "Searches the web".into(),
///     parameters: json!({"type": "object", "properties": {"query": {"type": "string"}}}),
/// };
/// // PRE_MODEL_CALL hooks see the tools the model is offered.
/// let registry = HookRegistry::new();
/// registry.register_hook(PRE_MODEL_CALL, |ctx: &mut LlmCallHookContext| {
///     let names: Vec<&str> = ctx.tools.iter().map(|t| t.name.as_str()).collect();
///     assert_eq!(names, ["web_search"]);
/// })?;
/// let mut ctx = LlmCallHookContext::new(Vec::new()).with_tools(Arc::from([search]));
/// assert_eq!(registry.dispatch(PRE_MODEL_CALL, &mut ctx).as_str(), "proceeded");
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    /// The normalized tool name.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// The JSON schema of its arguments (an object schema).
    pub parameters: Value,
}
