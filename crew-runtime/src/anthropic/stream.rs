//! A streamed answer: the server-sent events of the Messages API put back
//! together into the turn a plain answer would have given.
//!
//! The events are cut out of the byte stream by `sse-stream`, which follows
//! the SSE specification (lines that are not fields are skipped). Each
//! event's `data` is a JSON object whose `type` says what it is:
//! `message_start`, `content_block_start`, `content_block_delta`,
//! `content_block_stop`, `message_delta`, `message_stop`, `ping`, or
//! `error`. Kinds this client does not know (the API may add some) are
//! skipped; a payload that is not JSON, or an `error` event, fails the turn
//! instead of silently losing text.

use std::collections::BTreeMap;

use serde_json::Value;

use super::wire::{WireUsage, error_text, excerpt, input_text};
use crate::llm::{DeltaSink, LlmError, ModelTurn, ToolCallRequest};

/// Where a stream is after one event.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Progress {
    /// More events are to come.
    More,
    /// The server said `message_stop`.
    Done,
}

/// The turn being put together, one event at a time.
#[derive(Debug, Default)]
pub(super) struct TurnAssembler {
    content: String,
    /// The `tool_use` blocks, by their index in the message: the calls in
    /// the order the model made them.
    calls: BTreeMap<u64, PartialCall>,
    /// Why the answer stopped (`message_delta`): it is whole then, even if
    /// the connection ends before `message_stop`.
    stop_reason: Option<String>,
    usage: WireUsage,
}

#[derive(Debug)]
struct PartialCall {
    id: String,
    name: String,
    /// The `input` of `content_block_start` (an empty object, per the API).
    start_input: Value,
    /// The `partial_json` pieces, joined; `None` until one arrives.
    json: Option<String>,
}

impl TurnAssembler {
    /// Reads one event (its `event:` name and its `data`), handing its text
    /// to `sink` before keeping it.
    pub(super) fn push(
        &mut self,
        name: Option<&str>,
        data: &str,
        sink: Option<&dyn DeltaSink>,
    ) -> Result<Progress, LlmError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Progress::More);
        }
        let event: Value = serde_json::from_str(data).map_err(|e| {
            LlmError::InvalidResponse(format!(
                "a streamed event is not JSON ({e}): {}",
                excerpt(data)
            ))
        })?;
        let kind = event
            .get("type")
            .and_then(Value::as_str)
            .or(name)
            .unwrap_or_default();
        match kind {
            "message_start" => {
                if let Some(usage) = event.pointer("/message/usage") {
                    self.update_usage(usage)?;
                }
            }
            "content_block_start" => self.start_block(&event, sink)?,
            "content_block_delta" => self.add_delta(&event, sink)?,
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = event.get("usage") {
                    self.update_usage(usage)?;
                }
            }
            "message_stop" => return Ok(Progress::Done),
            "error" => {
                let message = event
                    .get("error")
                    .and_then(error_text)
                    .unwrap_or_else(|| excerpt(data));
                return Err(LlmError::InvalidResponse(format!(
                    "the server reported an error in the middle of the stream: {message}"
                )));
            }
            // `ping`, `content_block_stop` (the input is handed on as it
            // came, see `finish`), and kinds to come.
            _ => {}
        }
        Ok(Progress::More)
    }

    fn update_usage(&mut self, usage: &Value) -> Result<(), LlmError> {
        let usage: WireUsage = serde_json::from_value(usage.clone()).map_err(|e| {
            LlmError::InvalidResponse(format!(
                "the token counts of a streamed event cannot be read ({e}): {}",
                excerpt(&usage.to_string())
            ))
        })?;
        self.usage.update(&usage);
        Ok(())
    }

    fn start_block(&mut self, event: &Value, sink: Option<&dyn DeltaSink>) -> Result<(), LlmError> {
        let index = block_index(event)?;
        let block = event.get("content_block").unwrap_or(&Value::Null);
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                self.add_text(text, sink);
            }
            Some("tool_use") => {
                if self.calls.contains_key(&index) {
                    return Err(LlmError::InvalidResponse(format!(
                        "the stream started content block {index} twice"
                    )));
                }
                let text = |field| {
                    block
                        .get(field)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                self.calls.insert(
                    index,
                    PartialCall {
                        id: text("id"),
                        name: text("name"),
                        start_input: block.get("input").cloned().unwrap_or(Value::Null),
                        json: None,
                    },
                );
            }
            // Thinking and the blocks of server tools are not part of the
            // turn.
            _ => {}
        }
        Ok(())
    }

    fn add_delta(&mut self, event: &Value, sink: Option<&dyn DeltaSink>) -> Result<(), LlmError> {
        let index = block_index(event)?;
        let delta = event.get("delta").unwrap_or(&Value::Null);
        let piece = |field: &str| match delta.get(field) {
            Some(Value::String(text)) => Ok(text.as_str()),
            _ => Err(LlmError::InvalidResponse(format!(
                "a streamed delta without its {field}: {}",
                excerpt(&event.to_string())
            ))),
        };
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => self.add_text(piece("text")?, sink),
            Some("input_json_delta") => {
                let json = piece("partial_json")?;
                let Some(call) = self.calls.get_mut(&index) else {
                    return Err(LlmError::InvalidResponse(format!(
                        "the stream sent tool input for content block {index}, which is not \
                         a tool_use block that has started"
                    )));
                };
                call.json.get_or_insert_default().push_str(json);
            }
            // Thinking, signatures, citations, and kinds to come.
            _ => {}
        }
        Ok(())
    }

    fn add_text(&mut self, text: &str, sink: Option<&dyn DeltaSink>) {
        if text.is_empty() {
            return;
        }
        if let Some(sink) = sink {
            sink.delta(text);
        }
        self.content.push_str(text);
    }

    /// The tokens reported so far.
    pub(super) fn usage(&self) -> Option<hooks_core::TokenUsage> {
        self.usage.usage()
    }

    /// The turn, after `message_stop`. A tool's input is handed on as the
    /// pieces made it, valid JSON or not, as in a plain answer and as the
    /// chat-completions client does: the executor checks it and tells the
    /// model what was wrong.
    pub(super) fn finish(self) -> ModelTurn {
        if self.stop_reason.as_deref() == Some("max_tokens") {
            tracing::warn!("the model's answer was cut at max_tokens");
        }
        let calls: Vec<ToolCallRequest> = self
            .calls
            .into_values()
            .enumerate()
            .map(|(position, call)| ToolCallRequest {
                id: if call.id.is_empty() {
                    format!("toolu_{position}")
                } else {
                    call.id
                },
                name: call.name,
                arguments: match call.json {
                    Some(json) if !json.trim().is_empty() => json,
                    _ => input_text(call.start_input),
                },
            })
            .collect();
        if calls.is_empty() {
            ModelTurn::FinalAnswer(self.content)
        } else {
            ModelTurn::ToolCalls {
                content: self.content,
                calls,
            }
        }
    }

    /// The turn, when the stream ended without `message_stop`: whole if the
    /// server had said why the answer stopped, cut off otherwise.
    pub(super) fn finish_at_end_of_stream(self) -> Result<ModelTurn, LlmError> {
        if self.stop_reason.is_some() {
            return Ok(self.finish());
        }
        Err(LlmError::InvalidResponse(format!(
            "the stream ended before the answer was complete (no message_stop and no stop \
             reason; {} characters of text and {} tool calls had arrived)",
            self.content.chars().count(),
            self.calls.len()
        )))
    }
}

fn block_index(event: &Value) -> Result<u64, LlmError> {
    event.get("index").and_then(Value::as_u64).ok_or_else(|| {
        LlmError::InvalidResponse(format!(
            "a streamed content block event without an index: {}",
            excerpt(&event.to_string())
        ))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn play(events: &[Value]) -> Result<ModelTurn, LlmError> {
        let mut turn = TurnAssembler::default();
        for event in events {
            turn.push(None, &event.to_string(), None)?;
        }
        turn.push(Some("message_stop"), r#"{"type":"message_stop"}"#, None)?;
        Ok(turn.finish())
    }

    #[test]
    fn tool_input_pieces_are_joined_per_block_in_block_order() {
        let turn = play(&[
            json!({"type": "content_block_start", "index": 2,
                   "content_block": {"type": "tool_use", "id": "b", "name": "two", "input": {}}}),
            json!({"type": "content_block_start", "index": 1,
                   "content_block": {"type": "tool_use", "id": "a", "name": "one", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "input_json_delta", "partial_json": "{\"x\""}}),
            json!({"type": "content_block_delta", "index": 2,
                   "delta": {"type": "input_json_delta", "partial_json": "{\"y\": "}}),
            json!({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "input_json_delta", "partial_json": ": 1}"}}),
            json!({"type": "content_block_start", "index": 3,
                   "content_block": {"type": "tool_use", "name": "three", "input": {}}}),
        ]);

        assert_eq!(
            turn,
            Ok(ModelTurn::ToolCalls {
                content: String::new(),
                calls: vec![
                    ToolCallRequest {
                        id: "a".to_owned(),
                        name: "one".to_owned(),
                        arguments: r#"{"x": 1}"#.to_owned(),
                    },
                    // Cut-off input passes through, as in a plain answer.
                    ToolCallRequest {
                        id: "b".to_owned(),
                        name: "two".to_owned(),
                        arguments: r#"{"y": "#.to_owned(),
                    },
                    ToolCallRequest {
                        id: "toolu_2".to_owned(),
                        name: "three".to_owned(),
                        arguments: "{}".to_owned(),
                    },
                ],
            })
        );
    }

    #[test]
    fn hostile_events_fail_the_turn() {
        for data in [
            "{not json",
            r#"{"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}}"#,
            r#"{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}}"#,
            r#"{"type": "content_block_delta", "index": 5,
                "delta": {"type": "input_json_delta", "partial_json": "{}"}}"#,
            r#"{"type": "message_start", "message": {"usage": {"input_tokens": "many"}}}"#,
        ] {
            let mut turn = TurnAssembler::default();
            assert!(
                matches!(
                    turn.push(None, data, None),
                    Err(LlmError::InvalidResponse(_))
                ),
                "{data}"
            );
        }
    }

    #[test]
    fn unknown_events_and_the_event_name_fallback() {
        let mut turn = TurnAssembler::default();

        assert_eq!(
            turn.push(None, r#"{"type": "something_new"}"#, None),
            Ok(Progress::More)
        );
        assert_eq!(turn.push(Some("ping"), "{}", None), Ok(Progress::More));
        assert_eq!(
            turn.push(Some("message_stop"), "{}", None),
            Ok(Progress::Done)
        );
    }
}
