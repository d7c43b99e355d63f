//! Tokens broken over lines: a key wrapped by a terminal, an editor, a
//! log formatter or a person (`key sk-abcdefghij` ⏎ `klmnop…0123`), with
//! or without indentation, quotes, a `\` continuation, a comment marker
//! repeated on each line (`#`, `//`, `>`, `*`), or inside a JSON string
//! as `\n`. Each single-line rule sees only a piece, too short to match,
//! or the first piece alone, so the rest would leak.
//!
//! A piece that starts with a provider's documented prefix and ends its
//! line is joined with the pieces on the lines after it, and the other
//! built-in rules are asked whether the joined text holds a secret; when
//! it does, every piece is replaced (the line breaks, quotes and
//! indentation stay). The prefixes are those of the formats the
//! single-line rules know: OpenAI (`sk-`, `sk-proj-`, `sk-svcacct-`),
//! Anthropic (`sk-ant-`), GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`,
//! `github_pat_`), AWS key ids (`AKIA…`, also with the secret after them),
//! Slack (`xoxb-`, …), Stripe (`sk_live_`, `rk_live_`, `…_test_`), Google
//! (`AIza`), Hugging Face (`hf_`, `api_org_`), GitLab (`glpat-`), npm
//! (`npm_`), PyPI (`pypi-`), and Discord bot tokens broken after their
//! first or second part.
//!
//! What keeps ordinary text: the joined text must hold a secret that the
//! first piece alone does not, and look random (two of digits, capitals
//! and small letters); a next line that starts with a key (`host: db`,
//! `"user": …`) is never a piece. Once the pieces so far hold a secret (a
//! whole key that fills its line), a further line is joined only when it
//! is one word of digits and letters (or a long one of mixed case) that
//! stands alone on its line, as the rest of a wrapped key does; so a line
//! such as `us-east-1` alone after a key goes too, and a last piece of a
//! wrapped key made of letters only and shorter than 24 stays.
//!
//! Cost: one regex scan of the text, whose literal prefixes let it skip
//! text that holds none; the other rules run only on the joined text of
//! a prefix found at a line's end, a few hundred bytes.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::{REDACTED, replace_ranges};

/// The characters of a token's piece (base64 and base64url, for AWS
/// secrets and the rest); `=` only as padding at its end.
const PIECE: &str = r"[A-Za-z0-9_+/-]+(?:\.[A-Za-z0-9_+/-]+)*=*";

/// Between two pieces: a closing quote, a `\` continuation, a line break
/// (real, or escaped in a JSON string), indentation, a comment marker
/// repeated on the next line, an opening quote.
const BREAK: &str = concat!(
    r#"["'`]?[ \t]*\\?(?:\r?\n|\\r\\n|\\n)"#,
    r#"[ \t]*(?:(?:#|//|>|\*)[ \t]*)?["'`]?"#,
);

/// A first piece at the end of its line: a known prefix, or an AWS key
/// id (whole or cut, and the start of the secret after a whole one).
fn head_pattern() -> String {
    let prefixes = concat!(
        r"(?:sk-|gh[pousr]_|github_pat_|xox[abposre]-|[sr]k_(?:live|test)_|AIza",
        r"|hf_|api_org_|glpat-|npm_|pypi-)",
    );
    let aws = concat!(
        r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])",
        r#"(?:[A-Z0-9]{16}"?[ \t]*[\t ,;:|][ \t]*"?[A-Za-z0-9/+]{1,39}|[A-Z0-9]{0,16})"#,
    );
    // A Discord bot token cut after its id: the base64 of a snowflake id.
    let discord = r"[MNO][A-Za-z0-9_-]{22,26}={0,2}\.[A-Za-z0-9_.-]*";
    format!(
        r"(?-u:\b)(?P<head>{prefixes}[A-Za-z0-9_+/-]*|{aws}|{discord}){BREAK}(?P<piece>{PIECE})"
    )
}

static HEADS: LazyLock<Option<Regex>> = LazyLock::new(|| super::compile(&head_pattern()));
static NEXT: LazyLock<Option<Regex>> =
    LazyLock::new(|| super::compile(&format!("^{BREAK}(?P<piece>{PIECE})")));
/// The text after a piece that is a key (`host: db`, `"user": "ada"`,
/// `PORT = 5432`).
static KEY_AFTER: LazyLock<Option<Regex>> =
    LazyLock::new(|| super::compile(r#"^["'`]?[ \t]*[:=]"#));
/// A piece that stands alone on its line: the text after it.
static ALONE_AFTER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    super::compile(r#"^(?:["'`]?[,;)\]}]*[ \t]*\\?(?:\r?\n|\\r\\n|\\n|$)|["'`])"#)
});

/// How many first pieces one text may have looked at, how many lines one
/// token may span, and how long the joined text may grow (the longest
/// keys are a few hundred characters): bounded work whatever the input.
const MAX_HEADS: usize = 512;
const MAX_PIECES: usize = 16;
const MAX_JOINED: usize = 1024;

/// Writes `text` with the pieces of every broken token replaced into
/// `out`; whether there was any.
pub(super) fn redact(text: &str, out: &mut String) -> bool {
    let (Some(heads), Some(next), Some(key_after), Some(alone_after)) = (
        HEADS.as_ref(),
        NEXT.as_ref(),
        KEY_AFTER.as_ref(),
        ALONE_AFTER.as_ref(),
    ) else {
        return false;
    };
    let mut found: Vec<Range<usize>> = Vec::new();
    let mut resume = 0;
    for captures in heads.captures_iter(text).take(MAX_HEADS) {
        let (Some(head), Some(first)) = (captures.name("head"), captures.name("piece")) else {
            continue;
        };
        if head.start() < resume {
            continue;
        }
        if head.len() + first.len() > MAX_JOINED {
            continue;
        }
        let mut pieces = vec![head.range()];
        let mut joined = head.as_str().to_owned();
        let mut holds = super::holds_secret(&joined);
        let mut piece = first.range();
        for _ in 0..MAX_PIECES {
            let after = &text[piece.end..];
            let words = &text[piece.clone()];
            // `PORT=5432`: the piece took the `=` of a key.
            let assigns = words.ends_with('=')
                && after
                    .bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || b"\"'".contains(&b));
            if assigns || key_after.is_match(after) || joined.len() + words.len() > MAX_JOINED {
                break;
            }
            if holds {
                // The pieces so far are a whole key: only the rest of a
                // wrapped one may follow.
                if !(looks_like_rest_of_key(words) && alone_after.is_match(after)) {
                    break;
                }
                pieces.push(piece.clone());
            } else {
                joined.push_str(words);
                pieces.push(piece.clone());
                holds = looks_random(&joined) && super::holds_secret(&joined);
            }
            let Some(more) = next.captures(after).and_then(|c| c.name("piece")) else {
                break;
            };
            piece = piece.end + more.start()..piece.end + more.end();
        }
        if holds && pieces.len() >= 2 {
            if let Some(last) = pieces.last() {
                resume = last.end;
            }
            // Pieces joined before the secret was whole stay joined; those
            // tried after it and refused were never pushed.
            found.extend(pieces);
        }
    }
    replace_ranges(text, found, REDACTED, out)
}

/// Which of digits, capitals and small letters `text` holds.
fn classes(text: &str) -> [bool; 3] {
    let bytes = text.as_bytes();
    [
        bytes.iter().any(u8::is_ascii_digit),
        bytes.iter().any(u8::is_ascii_uppercase),
        bytes.iter().any(u8::is_ascii_lowercase),
    ]
}

/// Two of digits, capitals and small letters: what a random token has
/// and a word, a name or a number mostly lacks.
fn looks_random(text: &str) -> bool {
    classes(text).iter().filter(|&&class| class).count() >= 2
}

/// A line that may be the rest of a whole key: digits and letters (a
/// word alone on its line, `Done`, has none), or a long run of mixed
/// case (a random run of 24 has a digit but for one time in 70).
fn looks_like_rest_of_key(text: &str) -> bool {
    let [digit, upper, lower] = classes(text);
    (digit && (upper || lower)) || (upper && lower && text.len() >= 24)
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
    fn a_key_broken_over_lines_goes_whole() {
        assert_eq!(
            redacted("key sk-abcdefghij\nklmnopqrstuvwxyz0123 ok"),
            "key [REDACTED]\n[REDACTED] ok"
        );
        assert_eq!(
            redacted(r#"{"key": "sk-abcdefghij\nklmnopqrstuvwxyz0123"}"#),
            r#"{"key": "[REDACTED]\n[REDACTED]"}"#
        );
        assert_eq!(
            redacted("key sk-abcdefghij\r\n  klmnopqrstuvwxyz0123\r\nnext"),
            "key [REDACTED]\r\n  [REDACTED]\r\nnext"
        );
        // An AWS key id, then its secret on the next line.
        assert_eq!(
            redacted("AKIAIOSFODNN7EXAMPLE\nwJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"),
            "[REDACTED]\n[REDACTED]\n"
        );
    }

    #[test]
    fn the_line_after_a_whole_key_stays_unless_it_is_the_rest_of_it() {
        for text in [
            "OPENAI_API_KEY: sk-proj-Zq9xY8wV7uT6sR5qP4oN3mL2kJ\nhost: db",
            "sk-proj-Zq9xY8wV7uT6sR5qP4oN3mL2kJ\nDone",
            "sk-proj-Zq9xY8wV7uT6sR5qP4oN3mL2kJ\nnext line of prose",
        ] {
            let redacted = redacted(text);
            let second = text.lines().nth(1).unwrap_or_default();
            assert!(redacted.ends_with(second), "{text:?} -> {redacted:?}");
        }
    }

    #[test]
    fn ordinary_words_after_a_prefix_stay() {
        for text in [
            "pip install sk-\nlearn-contrib-extensions-for-python",
            "see hf_\nhub documentation",
        ] {
            assert_eq!(redacted(text), text);
        }
    }
}
