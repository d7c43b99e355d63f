//! Secrets encoded in base64: a run of base64 that decodes to text holding
//! a secret (an env line encoded whole, a key file, a token) is replaced
//! whole.
//!
//! The work is bounded: runs shorter than [`MIN_RUN`] or longer than
//! [`MAX_RUN`] characters are not decoded, at most [`MAX_DECODED`] bytes
//! are decoded per text, and only a run that decodes to text (UTF-8, no
//! control characters but line breaks and tabs) is looked at, once, by the
//! other built-in rules (a secret encoded twice is not found).

use std::ops::Range;
use std::sync::LazyLock;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use regex::Regex;

use super::json::push_json_safe_parts;
use super::replace_ranges;

/// What replaces a run that hides a secret.
const LABEL: &str = "[BASE64-SECRET-REDACTED]";

/// The shortest run decoded: 12 bytes (`PASSWORD=abc`).
const MIN_RUN: usize = 16;

/// The longest run decoded (a PEM key of 4096 bits is some 4,500).
const MAX_RUN: usize = 64 * 1024;

/// How many bytes one text may have decoded in all.
const MAX_DECODED: usize = 1024 * 1024;

/// The decoding options both alphabets share: padding optional, stray
/// bits in the last character allowed (a run cut short still decodes).
const CONFIG: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);

/// Base64 with `+` and `/`.
pub(super) const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, CONFIG);

/// Base64url, with `-` and `_` (JWT parts, Discord tokens).
pub(super) const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, CONFIG);

/// A run: lines of 40 or more base64 characters wrapped (as `base64` and
/// PEM write them, line breaks real or JSON-escaped, indented in YAML)
/// and a last line, or one unbroken run in either alphabet.
const RUN: &str = concat!(
    r"(?:[A-Za-z0-9+/]{40,}(?:\r?\n|\\r\\n|\\n)[ \t]*)+[A-Za-z0-9+/]*={0,2}",
    r"|[A-Za-z0-9+/_-]{16,}={0,2}",
);

static RUNS: LazyLock<Option<Regex>> = LazyLock::new(|| super::compile(RUN));

/// Writes `text` with every base64 run that hides a secret replaced into
/// `out`; whether there was any.
pub(super) fn redact(text: &str, out: &mut String) -> bool {
    let Some(runs) = RUNS.as_ref() else {
        return false;
    };
    let mut budget = MAX_DECODED;
    let mut found = Vec::new();
    for run in runs.find_iter(text) {
        if budget == 0 {
            break;
        }
        let mut range = run.range();
        // `\nMIIE…` in a JSON string: the `n` belongs to the escape.
        if range.start > 0 && text.as_bytes()[range.start - 1] == b'\\' {
            range.start += 1;
        }
        let mut secret_ranges = Vec::new();
        if hides_secret(&text[range.clone()], &mut budget) {
            secret_ranges.push(range);
        } else if text[range.clone()].contains(['\n', '\\']) {
            // Lines that do not decode together may each be a run.
            secret_ranges.extend(
                line_ranges(text, range)
                    .filter(|line| hides_secret(&text[line.clone()], &mut budget)),
            );
        }
        for range in secret_ranges {
            push_json_safe_parts(text, range, &mut found);
        }
    }
    replace_ranges(text, found, LABEL, out)
}

/// The ranges of the lines of a wrapped run.
fn line_ranges(text: &str, range: Range<usize>) -> impl Iterator<Item = Range<usize>> + '_ {
    let start = range.start;
    let run = &text[range];
    let mut offset = 0;
    run.split_inclusive('\n')
        .flat_map(|line| line.split_inclusive("\\n"))
        .filter_map(move |line| {
            let line_start = start + offset;
            offset += line.len();
            let content = line
                .trim_end_matches(['\r', '\n'])
                .trim_end_matches("\\n")
                .trim_end_matches("\\r");
            let leading = content.len() - content.trim_start().len();
            let content_start = line_start + leading;
            let content_end = line_start + content.len();
            (content_end - content_start >= MIN_RUN).then_some(content_start..content_end)
        })
}

/// Whether `run` decodes to text that holds a secret; `budget` is what is
/// left of [`MAX_DECODED`].
fn hides_secret(run: &str, budget: &mut usize) -> bool {
    if run.len() < MIN_RUN || run.len() > MAX_RUN {
        return false;
    }
    // A hex digest decodes, but never to text.
    if run.bytes().all(|b| b.is_ascii_hexdigit()) {
        return false;
    }
    let compact: String = run
        .replace("\\r", "")
        .replace("\\n", "")
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let url_safe = compact.contains(['-', '_']);
    if url_safe && compact.contains(['+', '/']) {
        return false;
    }
    let engine = if url_safe { &URL_SAFE } else { &STANDARD };
    let decoded_length = compact.len() / 4 * 3 + 3;
    if decoded_length > *budget {
        *budget = 0;
        return false;
    }
    *budget -= decoded_length;
    let Ok(bytes) = engine.decode(compact.trim_end_matches('=')) else {
        return false;
    };
    let Ok(decoded) = std::str::from_utf8(&bytes) else {
        return false;
    };
    let is_text = decoded
        .chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'));
    is_text && super::holds_secret(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redacted(text: &str) -> String {
        let mut out = String::new();
        if redact(text, &mut out) {
            out
        } else {
            text.to_owned()
        }
    }

    #[test]
    fn a_run_that_decodes_to_a_secret_goes_whole() {
        let encoded = STANDARD.encode("PGPASSWORD=hunter2-and-more");
        assert_eq!(redacted(&format!("x {encoded} y")), format!("x {LABEL} y"));
        let encoded = URL_SAFE.encode("ghp_R2d2C3poBb8Kx9Lm4Np7Qr1St5Uv6Wx0YzAa");
        assert_eq!(redacted(&encoded), LABEL);
    }

    #[test]
    fn harmless_text_and_binary_stay() {
        for text in [
            STANDARD.encode("the quick brown fox jumps over the lazy dog"),
            STANDARD.encode([0u8, 159, 146, 150, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]),
            "0a7edca5b4eec0a0f98b7fd216d63d17418e52d2d058b3abc4aa0df28d2993a3".to_owned(),
        ] {
            assert_eq!(redacted(&text), text);
        }
    }

    #[test]
    fn work_is_bounded() {
        let encoded = STANDARD.encode("PGPASSWORD=hunter2-and-more");
        let mut budget = 0;
        assert!(!hides_secret(&encoded, &mut budget));
        let long = "A".repeat(MAX_RUN + 4);
        let mut budget = MAX_DECODED;
        assert!(!hides_secret(&long, &mut budget));
        assert_eq!(budget, MAX_DECODED, "a run too long is not decoded");
    }
}
