//! An MCP tool result as the agent reads it: text blocks as they are,
//! images, audio and resources as described placeholders, structured
//! content as compact JSON when there is no text.
//!
//! Rendering works on the result's JSON wire form, so content kinds a newer
//! server sends are described instead of refused.

use hooks_core::runtime::ToolOutput;
use hooks_core::{RawToolResult, ToolCallStatus};
use serde_json::Value;

use crate::tool::{ToolFailure, ToolResult};

/// What the agent sees of a tool that returned nothing at all.
pub(super) const NO_CONTENT: &str = "(the tool returned no content)";

/// What the agent sees of a tool error without a message.
pub(super) const NO_MESSAGE: &str = "the MCP tool reported an error without a message";

/// Turns a `tools/call` result (its JSON form) into the tool's outcome: an
/// `isError` result is a failed call, anything else the rendered text with
/// the whole MCP result as the raw result.
pub(super) fn outcome(result: Value) -> ToolResult {
    let failed = result.get("isError").and_then(Value::as_bool) == Some(true);
    let text = render(&result);
    if failed {
        let message = if text.is_empty() {
            NO_MESSAGE.to_owned()
        } else {
            text
        };
        return Err(ToolFailure::Reported { message, result });
    }
    Ok(ToolOutput {
        rendered: if text.is_empty() {
            NO_CONTENT.to_owned()
        } else {
            text
        },
        raw: RawToolResult::from_json(result),
        status: ToolCallStatus::Ran,
    })
}

/// The text of a result: its content blocks, one per line group, or its
/// structured content when it has no blocks.
pub(super) fn render(result: &Value) -> String {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if blocks.is_empty() {
        return match result.get("structuredContent") {
            Some(Value::String(text)) => text.clone(),
            Some(structured) => structured.to_string(),
            None => String::new(),
        };
    }
    blocks.iter().map(block).collect::<Vec<_>>().join("\n")
}

fn block(block: &Value) -> String {
    let field = |name: &str| block.get(name).and_then(Value::as_str);
    match field("type").unwrap_or_default() {
        "text" => field("text").unwrap_or_default().to_owned(),
        kind @ ("image" | "audio") => format!(
            "[{kind}: {}, {}]",
            field("mimeType").unwrap_or("unknown type"),
            size(decoded_len(field("data").unwrap_or_default())),
        ),
        "resource" => {
            let resource = block.get("resource").unwrap_or(&Value::Null);
            let field = |name: &str| resource.get(name).and_then(Value::as_str);
            let (kind, length) = match (field("text"), field("blob")) {
                (Some(text), _) => ("text", text.len()),
                (None, Some(blob)) => ("binary", decoded_len(blob)),
                (None, None) => ("empty", 0),
            };
            format!(
                "[embedded {kind} resource: {} ({}), {}]",
                field("uri").unwrap_or("no uri"),
                field("mimeType").unwrap_or("unknown type"),
                size(length),
            )
        }
        "resource_link" => format!(
            "[resource link: {}{}]",
            field("uri").unwrap_or("no uri"),
            field("name").map(|n| format!(" ({n})")).unwrap_or_default(),
        ),
        "" => "[a content block without a type]".to_owned(),
        other => format!("[{} content]", crate::console::escape_control(other)),
    }
}

/// The size of base64 data once decoded (padding aside), without decoding it.
fn decoded_len(base64: &str) -> usize {
    let data = base64.trim_end_matches('=');
    data.len() * 3 / 4
}

fn size(bytes: usize) -> String {
    match bytes {
        1 => "1 byte".to_owned(),
        n => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_blocks_are_joined_by_lines() {
        let result =
            json!({"content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]});
        assert_eq!(render(&result), "one\ntwo");
    }

    #[test]
    fn binary_content_is_described() {
        let result = json!({"content": [
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAAAA=="}},
            {"type": "resource_link", "uri": "file:///c.txt", "name": "c.txt"},
            {"type": "hologram"},
            {"type": "text"}
        ]});
        assert_eq!(
            render(&result),
            "[image: image/png, 8 bytes]\n\
             [audio: audio/wav, 3 bytes]\n\
             [embedded text resource: file:///a.txt (text/plain), 5 bytes]\n\
             [embedded binary resource: file:///b.bin (unknown type), 4 bytes]\n\
             [resource link: file:///c.txt (c.txt)]\n\
             [hologram content]\n"
        );
    }

    #[test]
    fn structured_content_stands_in_for_missing_blocks() {
        let result = json!({"content": [], "structuredContent": {"files": 2}});
        assert_eq!(render(&result), r#"{"files":2}"#);
        let Ok(output) = outcome(result) else {
            panic!("a structured result is not an error")
        };
        assert_eq!(output.raw.as_json()["structuredContent"]["files"], 2);
    }

    #[test]
    fn errors_fail_the_call_with_their_text() {
        let failed =
            outcome(json!({"content": [{"type": "text", "text": "disk full"}], "isError": true}));
        assert!(
            matches!(&failed, Err(ToolFailure::Reported { message, result }) if message == "disk full" && result["isError"] == true)
        );
        let silent = outcome(json!({"isError": true}));
        assert!(
            matches!(silent, Err(ToolFailure::Reported { message, .. }) if message == NO_MESSAGE)
        );
    }

    #[test]
    fn an_empty_result_says_so() {
        let Ok(output) = outcome(json!({"content": []})) else {
            panic!("an empty result is not an error")
        };
        assert_eq!(output.rendered, NO_CONTENT);
    }
}
