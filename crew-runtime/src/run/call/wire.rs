//! The wire: a call as the model sent it, read once. Its arguments become
//! a JSON object (keys sorted, so what the runtime renders of them is the
//! same whatever serde_json's map order) or stay the text the model sent,
//! with what is wrong with it; the call's name is escaped wherever it is
//! echoed; each call of a turn gets an id of its own.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::console::excerpt;
use crate::llm::ToolCallRequest;

/// A call's arguments, read once at the wire.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Arguments {
    /// A JSON object (empty text reads as no arguments).
    Object(Map<String, Value>),
    /// Text that is not a JSON object, and what is wrong with it.
    Unparsable(String),
}

impl Arguments {
    /// The model's argument text, read.
    pub(super) fn read(text: &str) -> Arguments {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Arguments::Object(Map::new());
        }
        match serde_json::from_str::<Value>(trimmed) {
            Ok(Value::Object(mut input)) => {
                sort_keys(&mut input);
                Arguments::Object(input)
            }
            Ok(other) => Arguments::Unparsable(format!(
                "expected a JSON object, got {}: {}",
                json_kind(&other),
                excerpt(trimmed, 200)
            )),
            Err(error) => Arguments::Unparsable(format!(
                "they are not valid JSON ({error}): {}",
                excerpt(trimmed, 200)
            )),
        }
    }
}

/// Sorts the keys of a JSON object at every level, so that what the
/// runtime renders of it is the same whether or not serde_json keeps
/// insertion order (its `preserve_order` feature, which any crate of the
/// program may turn on). Without that feature maps are always sorted and
/// this does nothing.
pub(super) fn sort_keys(map: &mut Map<String, Value>) {
    map.values_mut().for_each(Value::sort_all_objects);
    map.sort_keys();
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The calls with ids unique within the turn: an empty id, or one an
/// earlier call of the turn already has, is replaced by a generated one
/// (`call_<n>`, suffixed until it is no id the model gave in the turn), so
/// each observation answers exactly one call. A turn whose ids are fine
/// (the usual case) costs no allocation.
pub(crate) fn unique_call_ids(mut calls: Vec<ToolCallRequest>) -> Vec<ToolCallRequest> {
    let replace = ids_to_replace(&calls);
    if replace.is_empty() {
        return calls;
    }
    let mut taken: HashSet<String> = calls.iter().map(|call| call.id.clone()).collect();
    for position in replace {
        let base = format!("call_{}", position + 1);
        let mut id = base.clone();
        let mut suffix = 1;
        while taken.contains(&id) {
            suffix += 1;
            id = format!("{base}_{suffix}");
        }
        taken.insert(id.clone());
        calls[position].id = id;
    }
    calls
}

/// The positions of the calls whose id is blank or repeats an earlier
/// call's.
fn ids_to_replace(calls: &[ToolCallRequest]) -> Vec<usize> {
    let blank = |call: &ToolCallRequest| call.id.trim().is_empty();
    // Few calls: comparing each with the earlier ones allocates nothing.
    if calls.len() <= 32 {
        return (0..calls.len())
            .filter(|&n| blank(&calls[n]) || calls[..n].iter().any(|c| c.id == calls[n].id))
            .collect();
    }
    let mut seen = HashSet::with_capacity(calls.len());
    (0..calls.len())
        .filter(|&n| blank(&calls[n]) || !seen.insert(calls[n].id.as_str()))
        .collect()
}

/// Whether `c` would drive or garble a terminal when echoed: a control
/// character, or an invisible mark that reorders the text around it
/// (bidirectional overrides, isolates and marks).
fn is_hostile_character(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with the characters of [`is_hostile_character`] escaped as
/// `\n`, `\u{1b}`, `\u{202e}`, …, so a name the model chose can neither
/// drive a terminal nor hide text when it is echoed.
pub(super) fn escape_control_characters(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hostile_character) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_hostile_character(c) {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    Cow::Owned(escaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Map<String, Value>, String> {
        match Arguments::read(text) {
            Arguments::Object(input) => Ok(input),
            Arguments::Unparsable(problem) => Err(problem),
        }
    }

    #[test]
    fn object_arguments_parse() {
        let input = parsed(r#" {"query": "rust"} "#);
        assert_eq!(input.map(|m| m["query"].clone()), Ok(Value::from("rust")));
    }

    #[test]
    fn empty_arguments_are_no_arguments() {
        assert_eq!(parsed("  "), Ok(Map::new()));
    }

    #[test]
    fn non_objects_are_refused_with_their_kind() {
        assert_eq!(
            parsed("[1, 2]"),
            Err("expected a JSON object, got an array: [1, 2]".to_owned())
        );
        assert_eq!(
            parsed(r#""rust""#),
            Err(r#"expected a JSON object, got a string: "rust""#.to_owned())
        );
    }

    #[test]
    fn ids_are_made_unique_in_long_turns_too() {
        let calls: Vec<ToolCallRequest> = (0..40)
            .map(|n| ToolCallRequest {
                // Every fourth call repeats the id of the call before it.
                id: format!("id{}", n - usize::from(n % 4 == 3)),
                name: "t".into(),
                arguments: String::new(),
            })
            .collect();
        let ids: Vec<String> = unique_call_ids(calls).into_iter().map(|c| c.id).collect();
        let distinct: HashSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), 40);
        assert_eq!(ids[2], "id2");
        assert_eq!(ids[3], "call_4");
    }

    #[test]
    fn only_hostile_characters_are_escaped() {
        assert!(matches!(
            escape_control_characters("web_search ü"),
            Cow::Borrowed("web_search ü")
        ));
        assert_eq!(
            escape_control_characters("a\tb\u{1b}c\u{2066}"),
            "a\\tb\\u{1b}c\\u{2066}"
        );
    }

    #[test]
    fn invalid_json_is_refused() {
        let problem = parsed("{not json").err().unwrap_or_default();
        assert!(
            problem.starts_with("they are not valid JSON ("),
            "{problem}"
        );
        assert!(problem.ends_with("): {not json"), "{problem}");
    }
}
