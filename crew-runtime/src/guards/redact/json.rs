//! JSON awareness: the decoded view every rule runs on, and the care a
//! replacement takes so that JSON stays JSON.

use std::borrow::Cow;
use std::ops::Range;

/// The text with every JSON string literal that holds escape sequences
/// decoded and re-encoded with only the escapes JSON requires. Literals
/// that are not valid JSON strings (an invalid escape, a raw control
/// character: prose with stray quotes) are left as they are. One linear
/// pass; nothing recurses, whatever the nesting of the JSON.
pub(super) fn decode_string_literals(text: &str) -> Cow<'_, str> {
    if !text.contains('\\') {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut position = 0;
    while let Some(offset) = bytes[position..].iter().position(|&b| b == b'"') {
        let start = position + offset;
        let mut at = start + 1;
        let mut escaped = false;
        let end = loop {
            match bytes.get(at) {
                None => break None,
                Some(b'"') => break Some(at),
                Some(b'\\') => {
                    escaped = true;
                    at += 2;
                }
                Some(&b) if b < 0x20 => break None,
                Some(_) => at += 1,
            }
        };
        let Some(end) = end else {
            // Not a string literal: look for the next one after the point
            // where this one failed (no unescaped quote lies in between).
            if at >= bytes.len() {
                break;
            }
            position = at;
            continue;
        };
        position = end + 1;
        if !escaped {
            continue;
        }
        // `start` and `end` index ASCII quotes, so both are char boundaries.
        let literal = &text[start..=end];
        let Ok(decoded) = serde_json::from_str::<String>(literal) else {
            continue;
        };
        let Ok(canonical) = serde_json::to_string(&decoded) else {
            continue;
        };
        if canonical != literal {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..start]);
            out.push_str(&canonical);
            copied = end + 1;
        }
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
    }
}

/// Shapes a span found by a rule that knows nothing of JSON (gitleaks'
/// rules) so that replacing it keeps JSON valid: it neither starts nor ends
/// inside an escape sequence, and it holds no `"` (a span that crosses
/// quotes is cut into the parts between them, each replaced on its own, so
/// no quote is ever removed). Pushes the parts, if any, onto `out`.
pub(super) fn push_json_safe_parts(text: &str, span: Range<usize>, out: &mut Vec<Range<usize>>) {
    let bytes = text.as_bytes();
    let (mut start, mut end) = (span.start, span.end);
    // Surrounding quotes stay: they belong to the string, not the secret.
    while start < end && bytes[start] == b'"' && !(start > 0 && escapes_next(bytes, start - 1)) {
        start += 1;
    }
    while end > start && bytes[end - 1] == b'"' && !(end >= 2 && escapes_next(bytes, end - 2)) {
        end -= 1;
    }
    if start >= end {
        return;
    }
    start = escape_start(bytes, start);
    if escapes_next(bytes, end - 1) {
        // The span ends on the backslash of an escape: take the escaped
        // character too.
        end = next_char_boundary(text, end + 1);
    }
    let mut part_start = start;
    let mut at = start;
    while at < end {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => {
                if part_start < at {
                    out.push(part_start..at);
                }
                at += 1;
                part_start = at;
            }
            _ => at += 1,
        }
    }
    let end = end.min(text.len());
    if part_start < end {
        out.push(part_start..end);
    }
}

/// Whether the byte at `at` is a backslash that escapes the next character
/// (preceded by an even number of backslashes).
fn escapes_next(bytes: &[u8], at: usize) -> bool {
    bytes[at] == b'\\'
        && bytes[..at]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count()
            % 2
            == 0
}

/// `at`, or the start of the escape sequence (`\"`, `\\`, `\u00XX`) that
/// `at` falls inside of.
fn escape_start(bytes: &[u8], at: usize) -> usize {
    if at > 0 && escapes_next(bytes, at - 1) {
        return at - 1;
    }
    // Inside `\uXXXX`: up to four hex digits back lies `\u`.
    let mut back = at;
    while back > 0 && at - back < 4 && bytes[back - 1].is_ascii_hexdigit() {
        back -= 1;
    }
    if back >= 2 && bytes[back - 1] == b'u' && escapes_next(bytes, back - 2) && at - back < 4 {
        return back - 2;
    }
    at
}

fn next_char_boundary(text: &str, mut at: usize) -> usize {
    while at < text.len() && !text.is_char_boundary(at) {
        at += 1;
    }
    at.min(text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stray_quotes_and_bad_escapes_are_left_alone() {
        assert_eq!(
            decode_string_literals(r#"C:\Users "x\q" then "\u00e9" and "open"#),
            r#"C:\Users "x\q" then "é" and "open"#
        );
        // A raw line break: not a JSON string, left alone.
        assert_eq!(decode_string_literals("\"a\\/\nb\""), "\"a\\/\nb\"");
        assert_eq!(decode_string_literals("x \"\\/\" y"), "x \"/\" y");
        assert_eq!(
            decode_string_literals("\"unterminated \\"),
            "\"unterminated \\"
        );
    }

    fn parts(text: &str, span: Range<usize>) -> Vec<&str> {
        let mut out = Vec::new();
        push_json_safe_parts(text, span, &mut out);
        out.into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn json_safe_parts_keep_quotes_and_whole_escapes() {
        assert_eq!(parts(r#"{"k":"abc"}"#, 5..10), ["abc"]);
        assert_eq!(parts(r#"{"k":"a\"bc"}"#, 7..10), [r#"\"b"#]);
        assert_eq!(parts(r#"{"k":"a\"bc"}"#, 8..10), [r#"\"b"#]);
        assert_eq!(parts(r#"{"k":"ab\\c"}"#, 6..9), [r#"ab\\"#]);
        assert_eq!(parts(r#""a\u0041b""#, 5..9), [r"\u0041b"]);
        assert_eq!(parts(r#""one", "two""#, 1..11), ["one", ", ", "two"]);
    }
}
