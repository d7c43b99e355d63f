//! Secrets split into string literals that the code joins again:
//! `"ghp_abc" + "def…"` (JavaScript, Java, Python, Go), `'sk_' . '…'`
//! (PHP), `"AIza" .. "…"` (Lua), `'…' || '…'` (SQL), `"…" & "…"` (Visual
//! Basic), and literals side by side (`"glpat-" "…"` in C and Python,
//! `'ghp_'"…"` in a shell), across line breaks and `\` line
//! continuations. The contents of the literals are joined and looked at by
//! the other built-in rules; when they find a secret, the contents of
//! every literal of the join are replaced (the quotes and the operators
//! stay, so code stays code and JSON stays JSON).

use std::sync::LazyLock;

use regex::Regex;

use super::{REDACTED, replace_ranges};

/// One string literal, with a prefix such as `r`, `b`, `f`, `u`, `@`, `$`.
const LITERAL: &str = r#"(?:"(?:[^"\\\r\n]|\\.)*"|'(?:[^'\\\r\n]|\\.)*'|`[^`\\\r\n]*`)"#;

/// Two or more literals with joins between them: an operator, or none,
/// with spaces, up to two line breaks and `\` continuations on each side.
fn joined_pattern() -> String {
    let space = r"[ \t]*(?:\\?\r?\n[ \t]*){0,2}";
    let prefix = r"(?:[rRbBuUfF]{1,2}|@|\$)?";
    format!(r"{LITERAL}(?:{space}(?:(?:\+|\.\.?|&|\|\||~){space})?{prefix}{LITERAL})+")
}

static JOINED: LazyLock<Option<Regex>> = LazyLock::new(|| super::compile(&joined_pattern()));
static LITERALS: LazyLock<Option<Regex>> = LazyLock::new(|| super::compile(LITERAL));

/// The longest joined text looked at, and how many joins one text may have
/// looked at: bounded work whatever the input.
const MAX_JOINED: usize = 8 * 1024;
const MAX_JOINS: usize = 512;

/// Writes `text` with the literals of every join that holds a secret
/// replaced into `out`; whether there was any.
pub(super) fn redact(text: &str, out: &mut String) -> bool {
    let (Some(joins), Some(literals)) = (JOINED.as_ref(), LITERALS.as_ref()) else {
        return false;
    };
    let mut found = Vec::new();
    for join in joins.find_iter(text).take(MAX_JOINS) {
        if join.len() > MAX_JOINED {
            continue;
        }
        let mut joined = String::with_capacity(join.len());
        let mut contents = Vec::new();
        for literal in literals.find_iter(join.as_str()) {
            // Every literal's quotes are one byte each.
            let inner = join.start() + literal.start() + 1..join.start() + literal.end() - 1;
            joined.push_str(&text[inner.clone()]);
            if !inner.is_empty() {
                contents.push(inner);
            }
        }
        if contents.len() >= 2 && super::holds_secret(&joined) {
            found.extend(contents);
        }
    }
    replace_ranges(text, found, REDACTED, out)
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
    fn joined_pieces_of_a_token_go() {
        assert_eq!(
            redacted(r#"t = "ghp_R2d2C3po" + "Bb8Kx9Lm4Np7Qr1St5Uv6Wx0YzAa";"#),
            r#"t = "[REDACTED]" + "[REDACTED]";"#
        );
        assert_eq!(
            redacted("k = ('sk-proj-'\n     'Zq9_xY8-wV7uT6sR5qP4oN3mL2kJ')"),
            "k = ('[REDACTED]'\n     '[REDACTED]')"
        );
    }

    #[test]
    fn joined_ordinary_strings_stay() {
        for text in [
            r#"greeting = "Hello, " + "world" + "!""#,
            "msg = ('first part of a long message '\n       'and the second part')",
            r#"url = "https://" + "api.example.org" + "/v1""#,
        ] {
            assert_eq!(redacted(text), text);
        }
    }
}
