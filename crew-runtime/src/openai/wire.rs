//! The chat-completions wire format: the request the client sends and the
//! plain (not streamed) answer it reads.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::llm::{ChatMessage, LlmError, ModelTurn, Role, ToolCallRequest, ToolDefinition};

/// How much of an error body [`LlmError::Http`] keeps.
const ERROR_BODY_CHARS: usize = 500;
/// How much of an unreadable answer [`LlmError::InvalidResponse`] quotes.
const EXCERPT_CHARS: usize = 200;

#[derive(Serialize)]
pub(super) struct ChatCompletionRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    /// The answer's cap, in the field the client was told to use.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    /// Sent only when on, so that a plain request is the same as from any
    /// other client.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    /// `null` only for an assistant turn that has tool calls and no text,
    /// as the API itself sends such turns.
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// Which field carries an answer's cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CapField {
    /// `max_tokens`: what every OpenAI-compatible server reads.
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's own (its reasoning models take
    /// no other).
    MaxCompletionTokens,
}

pub(super) fn wire_request<'a>(
    model: &'a str,
    temperature: Option<f32>,
    cap: Option<(u32, CapField)>,
    stream: bool,
    messages: &'a [ChatMessage],
    tools: &'a [ToolDefinition],
) -> ChatCompletionRequest<'a> {
    ChatCompletionRequest {
        model,
        messages: messages.iter().map(wire_message).collect(),
        tools: tools
            .iter()
            .map(|tool| WireTool {
                kind: "function",
                function: WireFunction {
                    name: &tool.name,
                    description: &tool.description,
                    parameters: &tool.parameters,
                },
            })
            .collect(),
        temperature,
        max_tokens: cap
            .and_then(|(tokens, field)| (field == CapField::MaxTokens).then_some(tokens)),
        max_completion_tokens: cap
            .and_then(|(tokens, field)| (field == CapField::MaxCompletionTokens).then_some(tokens)),
        stream,
    }
}

fn wire_message(message: &ChatMessage) -> WireMessage<'_> {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let content = if message.content.is_empty() && !message.tool_calls.is_empty() {
        None
    } else {
        Some(message.content.as_str())
    };
    WireMessage {
        role,
        content,
        tool_calls: message
            .tool_calls
            .iter()
            .map(|call| WireToolCall {
                id: &call.id,
                kind: "function",
                function: WireFunctionCall {
                    name: &call.name,
                    arguments: &call.arguments,
                },
            })
            .collect(),
        tool_call_id: message.tool_call_id.as_deref(),
    }
}

// Servers differ in what they leave out, so every field that some server
// omits has a default; only a shape that cannot be read fails.

#[derive(Deserialize)]
struct ChatCompletionResponse {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// The `usage` object of a response (or of a stream's last chunk). A
/// server may leave out any count; a missing total is prompt +
/// completion.
#[derive(Deserialize, Default)]
pub(super) struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    total_tokens: Option<u64>,
}

impl WireUsage {
    pub(super) fn usage(&self) -> Option<hooks_core::TokenUsage> {
        if self.prompt_tokens.is_none()
            && self.completion_tokens.is_none()
            && self.total_tokens.is_none()
        {
            return None;
        }
        let prompt = self.prompt_tokens.unwrap_or(0);
        let completion = self.completion_tokens.unwrap_or(0);
        let total = self
            .total_tokens
            .unwrap_or_else(|| prompt.saturating_add(completion));
        Some(hooks_core::TokenUsage::new(prompt, completion, total))
    }
}

#[derive(Deserialize)]
struct Choice {
    message: ResponseMessage,
}

#[derive(Deserialize)]
struct ResponseMessage {
    /// A string, `null`, or (some servers) a list of `{type, text}` parts.
    #[serde(default)]
    content: Value,
    #[serde(default)]
    tool_calls: Option<Vec<ResponseToolCall>>,
}

#[derive(Deserialize)]
struct ResponseToolCall {
    #[serde(default)]
    id: Option<String>,
    function: ResponseFunction,
}

#[derive(Deserialize)]
struct ResponseFunction {
    #[serde(default)]
    name: String,
    /// A string of JSON text per the API; some servers send the object
    /// itself.
    #[serde(default)]
    arguments: Value,
}

/// The turn in a whole (not streamed) answer, with the tokens the server
/// reported for it.
pub(super) fn parse_response(
    text: &str,
) -> Result<(ModelTurn, Option<hooks_core::TokenUsage>), LlmError> {
    if text.trim().is_empty() {
        return Err(LlmError::InvalidResponse("the body is empty".to_owned()));
    }
    let response: ChatCompletionResponse = serde_json::from_str(text).map_err(|e| {
        LlmError::InvalidResponse(format!("not a chat completion ({e}): {}", excerpt(text)))
    })?;
    let usage = response.usage.as_ref().and_then(WireUsage::usage);
    let Some(choice) = response.choices.into_iter().next() else {
        let reason = match response.error.as_ref().and_then(error_text) {
            Some(message) => format!("the server reported an error: {message}"),
            None => format!("no choices in {}", excerpt(text)),
        };
        return Err(LlmError::InvalidResponse(reason));
    };
    let content = content_text(&choice.message.content)?;
    let calls: Vec<ToolCallRequest> = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(index, call)| ToolCallRequest {
            // A call without an id still needs one its observation can
            // answer; its position is unique within the turn.
            id: call
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| format!("call_{index}")),
            name: call.function.name,
            arguments: arguments_text(call.function.arguments),
        })
        .collect();
    if calls.is_empty() {
        Ok((ModelTurn::FinalAnswer(content), usage))
    } else {
        Ok((ModelTurn::ToolCalls { content, calls }, usage))
    }
}

pub(super) fn content_text(content: &Value) -> Result<String, LlmError> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => Ok(parts
            .iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(text.as_str()),
                part => part.get("text").and_then(Value::as_str),
            })
            .collect()),
        other => Err(LlmError::InvalidResponse(format!(
            "the message content is neither text nor a list of parts: {}",
            excerpt(&other.to_string())
        ))),
    }
}

/// The arguments as the model produced them: the string itself when the
/// server sent a string (valid JSON or not), the JSON text of anything else,
/// and an empty object when there were none (a call of a tool without
/// parameters).
fn arguments_text(arguments: Value) -> String {
    match arguments {
        Value::String(text) => text,
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    }
}

/// The message of an error body (`{"error": {"message": …}}` from OpenAI,
/// vLLM and llama.cpp, `{"error": "…"}` from Ollama), or the body itself,
/// truncated.
pub(super) fn error_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|value| {
            value.get("error").and_then(error_text).or_else(|| {
                value
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
        })
        .map(|message| truncate(&message, ERROR_BODY_CHARS))
        .unwrap_or_else(|| match body.trim() {
            "" => "(empty body)".to_owned(),
            body => truncate(body, ERROR_BODY_CHARS),
        })
}

pub(super) fn error_text(error: &Value) -> Option<String> {
    match error {
        Value::String(message) => Some(message.clone()),
        Value::Object(fields) => fields
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    }
}

/// The start of `text` on one line, for an error message.
pub(super) fn excerpt(text: &str) -> String {
    let line: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    truncate(&line, EXCERPT_CHARS)
}

pub(super) fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}
