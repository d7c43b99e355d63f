//! The Messages API wire format: the request the client sends, the plain
//! (not streamed) answer it reads, its token counts and its error bodies.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::llm::{ChatMessage, LlmError, ModelTurn, Role, ToolCallRequest, ToolDefinition};

/// How much of an error body [`LlmError::Http`] keeps.
const ERROR_BODY_CHARS: usize = 500;
/// How much of an unreadable answer [`LlmError::InvalidResponse`] quotes.
const EXCERPT_CHARS: usize = 200;

#[derive(Serialize)]
pub(super) struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    /// Every system message of the conversation, in order: the API takes
    /// them here and not among the messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    /// Sent only when on, so that a plain request carries no extra field.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

#[derive(Serialize, Debug, PartialEq)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        /// Left out when blank: the API refuses a text without anything
        /// but white space, but takes a result without content.
        #[serde(skip_serializing_if = "is_blank")]
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

/// The request for `messages` and `tools`.
pub(super) struct RequestOptions<'a> {
    pub(super) model: &'a str,
    pub(super) max_tokens: u32,
    pub(super) temperature: Option<f32>,
    pub(super) stream: bool,
}

pub(super) fn wire_request<'a>(
    options: RequestOptions<'a>,
    messages: &'a [ChatMessage],
    tools: &'a [ToolDefinition],
) -> MessagesRequest<'a> {
    let system: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::System && !m.content.trim().is_empty())
        .map(|m| m.content.as_str())
        .collect();
    MessagesRequest {
        model: options.model,
        max_tokens: options.max_tokens,
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        messages: wire_messages(messages),
        tools: tools
            .iter()
            .map(|tool| WireTool {
                name: &tool.name,
                description: &tool.description,
                input_schema: &tool.parameters,
            })
            .collect(),
        temperature: options.temperature,
        stream: options.stream,
    }
}

/// The conversation without its system messages, as the alternating
/// `user` and `assistant` turns the API wants: a tool's result is a
/// `tool_result` block of a user turn, and neighbours of the same role are
/// one turn (several results of one round of parallel calls are one user
/// turn). A message with nothing to say (no text, no calls) is left out:
/// the API refuses empty turns and empty texts.
fn wire_messages(messages: &[ChatMessage]) -> Vec<WireMessage<'_>> {
    let mut turns: Vec<WireMessage<'_>> = Vec::new();
    for message in messages {
        let (role, blocks) = match message.role {
            Role::System => continue,
            Role::User => ("user", text_block(&message.content)),
            Role::Assistant => {
                let mut blocks = text_block(&message.content);
                blocks.extend(message.tool_calls.iter().map(|call| Block::ToolUse {
                    id: &call.id,
                    name: &call.name,
                    input: tool_input(&call.arguments),
                }));
                ("assistant", blocks)
            }
            Role::Tool => match &message.tool_call_id {
                Some(id) => (
                    "user",
                    vec![Block::ToolResult {
                        tool_use_id: id,
                        content: &message.content,
                    }],
                ),
                // A result that answers no call can only be said as text.
                None => ("user", text_block(&message.content)),
            },
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => turns.push(WireMessage {
                role,
                content: blocks,
            }),
        }
    }
    turns
}

fn is_blank(text: &str) -> bool {
    text.trim().is_empty()
}

fn text_block(text: &str) -> Vec<Block<'_>> {
    if is_blank(text) {
        Vec::new()
    } else {
        vec![Block::Text { text }]
    }
}

/// A call's arguments as the `input` object the API wants back. Arguments
/// that are not a JSON object (the model wrote something else, and the
/// call's result already told it so) go back as an empty object: the API
/// takes nothing else there.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(input)) => Value::Object(input),
        _ => Value::Object(Map::new()),
    }
}

// Every field that a gateway might leave out has a default; only a shape
// that cannot be read fails.

#[derive(Deserialize)]
struct MessagesResponse {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    content: Option<Vec<Value>>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

/// The `usage` object of a response, of `message_start` or of
/// `message_delta`. Any count may be missing (or `null`).
#[derive(Deserialize, Default, Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Takes every count `later` has (a stream's `message_delta` has the
    /// final output count, and may repeat the others).
    pub(super) fn update(&mut self, later: &WireUsage) {
        let keep = |now: &mut Option<u64>, later: Option<u64>| {
            if later.is_some() {
                *now = later;
            }
        };
        keep(&mut self.input_tokens, later.input_tokens);
        keep(&mut self.output_tokens, later.output_tokens);
        keep(
            &mut self.cache_creation_input_tokens,
            later.cache_creation_input_tokens,
        );
        keep(
            &mut self.cache_read_input_tokens,
            later.cache_read_input_tokens,
        );
    }

    /// The counts as the runtime keeps them. The prompt is every input
    /// token, read from the cache or written to it included (the API counts
    /// those apart from `input_tokens`; a chat-completions server counts
    /// them in its prompt), and the total is prompt + completion, which the
    /// API does not send. `None` when the server reported nothing.
    pub(super) fn usage(&self) -> Option<hooks_core::TokenUsage> {
        if *self == WireUsage::default() {
            return None;
        }
        let prompt = [
            self.input_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        ]
        .into_iter()
        .flatten()
        .fold(0u64, u64::saturating_add);
        let completion = self.output_tokens.unwrap_or(0);
        Some(hooks_core::TokenUsage::new(
            prompt,
            completion,
            prompt.saturating_add(completion),
        ))
    }
}

/// The turn in a whole (not streamed) answer, with the tokens the server
/// reported for it.
pub(super) fn parse_response(
    text: &str,
) -> Result<(ModelTurn, Option<hooks_core::TokenUsage>), LlmError> {
    if text.trim().is_empty() {
        return Err(LlmError::InvalidResponse("the body is empty".to_owned()));
    }
    let response: MessagesResponse = serde_json::from_str(text).map_err(|e| {
        LlmError::InvalidResponse(format!(
            "not a Messages API answer ({e}): {}",
            excerpt(text)
        ))
    })?;
    if response.kind.as_deref() == Some("error") || response.error.is_some() {
        let message = response
            .error
            .as_ref()
            .and_then(error_text)
            .unwrap_or_else(|| excerpt(text));
        return Err(LlmError::InvalidResponse(format!(
            "the server reported an error: {message}"
        )));
    }
    let Some(content) = response.content else {
        return Err(LlmError::InvalidResponse(format!(
            "no content in {}",
            excerpt(text)
        )));
    };
    let mut answer = String::new();
    let mut calls = Vec::new();
    for block in &content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => match block.get("text") {
                Some(Value::String(piece)) => answer.push_str(piece),
                _ => {
                    return Err(LlmError::InvalidResponse(format!(
                        "a text block without text: {}",
                        excerpt(&block.to_string())
                    )));
                }
            },
            Some("tool_use") => calls.push(tool_call(block, calls.len())?),
            // Thinking, server tools' blocks, and kinds to come: not part of
            // the turn.
            _ => {}
        }
    }
    if response.stop_reason.as_deref() == Some("max_tokens") {
        tracing::warn!("the model's answer was cut at max_tokens");
    }
    let usage = response.usage.as_ref().and_then(WireUsage::usage);
    if calls.is_empty() {
        Ok((ModelTurn::FinalAnswer(answer), usage))
    } else {
        Ok((
            ModelTurn::ToolCalls {
                content: answer,
                calls,
            },
            usage,
        ))
    }
}

/// One `tool_use` block as a call; `position` among the turn's calls names
/// a call that came without an id.
fn tool_call(block: &Value, position: usize) -> Result<ToolCallRequest, LlmError> {
    let text = |field: &str| match block.get(field) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(other) => Err(LlmError::InvalidResponse(format!(
            "the {field} of a tool_use block is not text: {}",
            excerpt(&other.to_string())
        ))),
    };
    let id = text("id")?;
    Ok(ToolCallRequest {
        // A call needs an id its result can answer; its position is unique
        // within the turn.
        id: if id.is_empty() {
            format!("toolu_{position}")
        } else {
            id
        },
        name: text("name")?,
        arguments: input_text(block.get("input").cloned().unwrap_or(Value::Null)),
    })
}

/// A tool's input as the call's arguments: the JSON text of what the server
/// sent, an empty object when it sent nothing. A string is handed on as it
/// is, JSON or not, as the chat-completions client does: the executor
/// checks the arguments and tells the model what was wrong.
pub(super) fn input_text(input: Value) -> String {
    match input {
        Value::Null => "{}".to_owned(),
        Value::String(text) => text,
        other => other.to_string(),
    }
}

/// The message of an error body (`{"type": "error", "error": {"type":
/// "rate_limit_error", "message": …}}`), with the request id when the
/// server gave one, or the body itself, truncated.
pub(super) fn error_message(body: &str) -> String {
    let parsed = serde_json::from_str::<Value>(body).ok();
    let message = parsed.as_ref().and_then(|value| {
        let message = value.get("error").and_then(error_text).or_else(|| {
            value
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })?;
        Some(match value.get("request_id").and_then(Value::as_str) {
            Some(id) => format!("{message} (request {id})"),
            None => message,
        })
    });
    match message {
        Some(message) => truncate(&message, ERROR_BODY_CHARS),
        None => match body.trim() {
            "" => "(empty body)".to_owned(),
            body => truncate(body, ERROR_BODY_CHARS),
        },
    }
}

/// `type: message` of an error object, or the message alone, or a string
/// error itself.
pub(super) fn error_text(error: &Value) -> Option<String> {
    match error {
        Value::String(message) => Some(message.clone()),
        Value::Object(fields) => {
            let message = fields.get("message").and_then(Value::as_str)?;
            Some(match fields.get("type").and_then(Value::as_str) {
                Some(kind) => format!("{kind}: {message}"),
                None => message.to_owned(),
            })
        }
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

fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(id: &str, name: &str, arguments: &str) -> ToolCallRequest {
        ToolCallRequest {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }

    fn request_json(messages: &[ChatMessage]) -> Value {
        let options = RequestOptions {
            model: "m",
            max_tokens: 10,
            temperature: None,
            stream: false,
        };
        serde_json::to_value(wire_request(options, messages, &[])).unwrap_or(Value::Null)
    }

    #[test]
    fn empty_messages_are_left_out_and_neighbours_merged() {
        let sent = request_json(&[
            ChatMessage::user("one"),
            ChatMessage::assistant(""),
            ChatMessage::user("  "),
            ChatMessage::user("two"),
            ChatMessage::assistant_tool_calls("", vec![call("a", "t", "not json")]),
        ]);

        assert_eq!(
            sent["messages"],
            json!([
                {"role": "user", "content": [
                    {"type": "text", "text": "one"},
                    {"type": "text", "text": "two"},
                ]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "a", "name": "t", "input": {}},
                ]},
            ])
        );
        assert!(sent.get("system").is_none());
    }

    #[test]
    fn a_result_without_content_or_call_id_is_still_sent() {
        let mut orphan = ChatMessage::tool("x", "orphan result");
        orphan.tool_call_id = None;

        let sent = request_json(&[ChatMessage::tool("a", " \n"), orphan]);

        assert_eq!(
            sent["messages"],
            json!([{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a"},
                {"type": "text", "text": "orphan result"},
            ]}])
        );
    }

    #[test]
    fn usage_counts_cached_input_in_the_prompt() {
        let mut usage: WireUsage = serde_json::from_value(json!({
            "input_tokens": 10, "output_tokens": 1,
            "cache_creation_input_tokens": 100, "cache_read_input_tokens": null,
        }))
        .unwrap_or_default();
        let later: WireUsage =
            serde_json::from_value(json!({"output_tokens": 7})).unwrap_or_default();
        usage.update(&later);

        assert_eq!(
            usage.usage(),
            Some(hooks_core::TokenUsage::new(110, 7, 117))
        );
        assert_eq!(WireUsage::default().usage(), None);
    }

    #[test]
    fn error_bodies_give_type_message_and_request_id() {
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}"#
            ),
            "overloaded_error: Overloaded (request req_1)"
        );
        assert_eq!(error_message("  "), "(empty body)");
        assert_eq!(error_message("<html>bad gateway"), "<html>bad gateway");
    }

    #[test]
    fn unknown_blocks_are_skipped_and_odd_ones_refused() {
        let thinking = json!({
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "Hi"},
            ],
        });
        assert_eq!(
            parse_response(&thinking.to_string()).map(|(turn, _)| turn),
            Ok(ModelTurn::FinalAnswer("Hi".to_owned()))
        );

        for body in [
            json!({"content": [{"type": "text", "text": 3}]}),
            json!({"content": [{"type": "tool_use", "id": 1, "name": "t", "input": {}}]}),
            json!({"id": "msg_1"}),
        ] {
            assert!(
                matches!(
                    parse_response(&body.to_string()),
                    Err(LlmError::InvalidResponse(_))
                ),
                "{body}"
            );
        }
    }
}
