//! A streamed answer: the `data:` payloads of its server-sent events put
//! back together into the turn a plain answer would have given.
//!
//! The events themselves are cut out of the byte stream by `sse-stream`,
//! which follows the SSE specification: lines that are not fields (garbage
//! between events, comments, keep-alives) are skipped. A `data:` payload,
//! though, is part of the answer, so one that is not a chunk of it (not
//! JSON, or an error object) fails the turn instead of silently losing
//! text.

use serde::Deserialize;
use serde_json::Value;

use super::wire::{content_text, error_text, excerpt};
use crate::llm::{DeltaSink, LlmError, ModelTurn, ToolCallRequest};

/// The payload that ends a stream.
const DONE: &str = "[DONE]";

/// Where a stream is after one event.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Progress {
    /// More events are to come.
    More,
    /// The server said `[DONE]`.
    Done,
}

/// The turn being put together, one event at a time.
#[derive(Debug, Default)]
pub(super) struct TurnAssembler {
    content: String,
    calls: Vec<PartialCall>,
    /// Whether the first choice said why it stopped: its answer is whole
    /// then, even if the connection ends before `[DONE]`.
    finished: bool,
    /// The tokens the server reported (in a chunk of its own, usually the
    /// last, when it reports them at all).
    pub(super) usage: Option<hooks_core::TokenUsage>,
}

#[derive(Debug)]
struct PartialCall {
    index: Option<u64>,
    id: String,
    name: String,
    /// `None` until a piece arrives: a call without any is a call of a tool
    /// without parameters, as in a plain answer.
    arguments: Option<String>,
}

impl TurnAssembler {
    /// Reads one event's `data`, handing its text to `sink` before keeping
    /// it.
    pub(super) fn push(
        &mut self,
        data: &str,
        sink: Option<&dyn DeltaSink>,
    ) -> Result<Progress, LlmError> {
        let data = data.trim();
        if data == DONE {
            return Ok(Progress::Done);
        }
        if data.is_empty() {
            return Ok(Progress::More);
        }
        let chunk: ChatCompletionChunk = serde_json::from_str(data).map_err(|e| {
            LlmError::InvalidResponse(format!(
                "a streamed event is not a chat completion chunk ({e}): {}",
                excerpt(data)
            ))
        })?;
        if let Some(error) = &chunk.error {
            let message = error_text(error).unwrap_or_else(|| excerpt(&error.to_string()));
            return Err(LlmError::InvalidResponse(format!(
                "the server reported an error in the middle of the stream: {message}"
            )));
        }
        if let Some(usage) = chunk.usage.as_ref().and_then(super::wire::WireUsage::usage) {
            self.usage = Some(usage);
        }
        // Only the first choice is an answer: the client never asks for more.
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(delta) = choice.delta {
                let text = content_text(&delta.content)?;
                if !text.is_empty() {
                    if let Some(sink) = sink {
                        sink.delta(&text);
                    }
                    self.content.push_str(&text);
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    self.add_call_piece(call);
                }
            }
            self.finished |= choice.finish_reason.is_some();
        }
        Ok(Progress::More)
    }

    /// The piece goes to the call with its `index`. Without an index (some
    /// servers send each call whole), a piece with a new id starts a call
    /// and any other piece continues the last one.
    fn add_call_piece(&mut self, piece: ToolCallDelta) {
        let id = piece.id.filter(|id| !id.is_empty());
        let position = match piece.index {
            Some(index) => self.calls.iter().position(|c| c.index == Some(index)),
            None => match &id {
                Some(id) => self.calls.iter().position(|c| &c.id == id),
                None => self.calls.len().checked_sub(1),
            },
        };
        let position = position.unwrap_or_else(|| {
            self.calls.push(PartialCall {
                index: piece.index,
                id: String::new(),
                name: String::new(),
                arguments: None,
            });
            self.calls.len() - 1
        });
        let call = &mut self.calls[position];
        if call.id.is_empty()
            && let Some(id) = id
        {
            call.id = id;
        }
        let Some(function) = piece.function else {
            return;
        };
        // The name comes whole in one piece; later pieces do not repeat it.
        if call.name.is_empty()
            && let Some(name) = function.name
        {
            call.name = name;
        }
        match function.arguments {
            Value::Null => {}
            Value::String(text) => call.arguments.get_or_insert_default().push_str(&text),
            other => call
                .arguments
                .get_or_insert_default()
                .push_str(&other.to_string()),
        }
    }

    /// The turn, after `[DONE]`.
    pub(super) fn finish(self) -> ModelTurn {
        let calls: Vec<ToolCallRequest> = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(position, call)| ToolCallRequest {
                // As in a plain answer: a call needs an id its observation
                // can answer, and its position is unique within the turn.
                id: if call.id.is_empty() {
                    format!("call_{position}")
                } else {
                    call.id
                },
                name: call.name,
                arguments: call.arguments.unwrap_or_else(|| "{}".to_owned()),
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

    /// The turn, when the stream ended without `[DONE]`: whole if the
    /// server had said why the answer stopped, cut off otherwise.
    pub(super) fn finish_at_end_of_stream(self) -> Result<ModelTurn, LlmError> {
        if self.finished {
            return Ok(self.finish());
        }
        Err(LlmError::InvalidResponse(format!(
            "the stream ended before the answer was complete (no [DONE] and no finish \
             reason; {} characters of text and {} tool calls had arrived)",
            self.content.chars().count(),
            self.calls.len()
        )))
    }
}

// Every field that some server omits has a default, as for plain answers.

#[derive(Deserialize)]
struct ChatCompletionChunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    usage: Option<super::wire::WireUsage>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    index: u64,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Value,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Value,
}

#[cfg(test)]
mod tests {
    use std::sync::{Mutex, PoisonError};

    use serde_json::json;

    use super::*;

    #[derive(Default)]
    struct Collect(Mutex<Vec<String>>);

    impl DeltaSink for Collect {
        fn delta(&self, text: &str) {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(text.to_owned());
        }
    }

    fn play(events: &[Value]) -> Result<ModelTurn, LlmError> {
        let mut turn = TurnAssembler::default();
        for event in events {
            turn.push(&event.to_string(), None)?;
        }
        turn.push(DONE, None)?;
        Ok(turn.finish())
    }

    fn call(id: &str, name: &str, arguments: &str) -> ToolCallRequest {
        ToolCallRequest {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }

    #[test]
    fn content_pieces_reach_the_sink_in_order_and_make_the_answer() {
        let sink = Collect::default();
        let mut turn = TurnAssembler::default();
        for data in [
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "lo"}}]}),
            json!({"choices": [{"index": 1, "delta": {"content": "other choice"}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            json!({"choices": [], "usage": {"total_tokens": 3}}),
        ] {
            assert_eq!(
                turn.push(&data.to_string(), Some(&sink)),
                Ok(Progress::More)
            );
        }

        assert_eq!(turn.push(" [DONE] ", Some(&sink)), Ok(Progress::Done));
        assert_eq!(turn.finish(), ModelTurn::FinalAnswer("Hello".to_owned()));
        let deltas = sink.0.into_inner().unwrap_or_else(PoisonError::into_inner);
        assert_eq!(deltas, ["Hel", "lo"]);
    }

    #[test]
    fn tool_call_arguments_are_joined_by_index() {
        let turn = play(&[
            json!({"choices": [{"delta": {"content": "Checking."}}]}),
            json!({"choices": [{"delta": {"tool_calls": [
                {"index": 0, "id": "call_a", "type": "function",
                 "function": {"name": "get_weather", "arguments": ""}},
            ]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [
                {"index": 0, "function": {"arguments": "{\"city\""}},
            ]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [
                {"index": 1, "id": "call_b", "function": {"name": "list_cities"}},
                {"index": 0, "function": {"arguments": ": \"Paris\"}"}},
            ]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [
                {"index": 2, "function": {"name": "get_weather", "arguments": "{\"city\": "}},
            ]}}]}),
        ]);

        assert_eq!(
            turn,
            Ok(ModelTurn::ToolCalls {
                content: "Checking.".to_owned(),
                calls: vec![
                    call("call_a", "get_weather", r#"{"city": "Paris"}"#),
                    call("call_b", "list_cities", "{}"),
                    // Cut-off arguments pass through, as in a plain answer.
                    call("call_2", "get_weather", r#"{"city": "#),
                ],
            })
        );
    }

    #[test]
    fn calls_without_index_are_told_apart_by_id() {
        let turn = play(&[
            json!({"choices": [{"delta": {"tool_calls": [
                {"id": "a", "function": {"name": "one", "arguments": {"x": 1}}},
            ]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [
                {"id": "b", "function": {"name": "two", "arguments": "{\"y\""}},
            ]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [
                {"function": {"arguments": ": 2}"}},
            ]}}]}),
        ]);

        assert_eq!(
            turn,
            Ok(ModelTurn::ToolCalls {
                content: String::new(),
                calls: vec![
                    call("a", "one", r#"{"x":1}"#),
                    call("b", "two", r#"{"y": 2}"#)
                ],
            })
        );
    }

    #[test]
    fn unreadable_payloads_and_error_events_fail_the_turn() {
        let mut turn = TurnAssembler::default();

        match turn.push("{\"choices\": [", None) {
            Err(LlmError::InvalidResponse(reason)) => {
                assert!(reason.contains("not a chat completion chunk"), "{reason}");
            }
            other => panic!("expected an invalid response, got {other:?}"),
        }
        match turn.push(r#"{"error": {"message": "overloaded"}}"#, None) {
            Err(LlmError::InvalidResponse(reason)) => {
                assert!(reason.contains("overloaded"), "{reason}");
            }
            other => panic!("expected an invalid response, got {other:?}"),
        }
        assert_eq!(turn.push("", None), Ok(Progress::More));
    }

    #[test]
    fn end_of_stream_without_done_is_whole_only_after_a_finish_reason() {
        let mut cut = TurnAssembler::default();
        let mut whole = TurnAssembler::default();
        let piece = json!({"choices": [{"delta": {"content": "Hi"}}]}).to_string();
        let stop = json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}).to_string();

        assert_eq!(cut.push(&piece, None), Ok(Progress::More));
        assert_eq!(whole.push(&piece, None), Ok(Progress::More));
        assert_eq!(whole.push(&stop, None), Ok(Progress::More));

        assert!(matches!(
            cut.finish_at_end_of_stream(),
            Err(LlmError::InvalidResponse(reason)) if reason.contains("before the answer was complete")
        ));
        assert_eq!(
            whole.finish_at_end_of_stream(),
            Ok(ModelTurn::FinalAnswer("Hi".to_owned()))
        );
    }
}
