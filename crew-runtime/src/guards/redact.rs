//! [`SecretRedactor`]: replaces secrets in tool results before the agent,
//! the events and the logs see them.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, LazyLock};

use hooks_core::ToolCallHookContext;
use regex::{Captures, Regex};

/// What replaces a redacted value of a `key: value` pair.
const REDACTED: &str = "[REDACTED]";

/// How a rule turns a match into its replacement.
#[derive(Clone)]
enum Replacement {
    /// A `regex` replacement template (`$name`, `${1}`, `$$`).
    Template(String),
    /// The built-in `api_key: value` rule: keeps the key, the separator and
    /// the quoting, replaces only the value.
    KeyValue,
}

#[derive(Clone)]
struct Rule {
    regex: Regex,
    replacement: Replacement,
}

impl Rule {
    fn template(regex: Regex, replacement: impl Into<String>) -> Rule {
        Rule {
            regex,
            replacement: Replacement::Template(replacement.into()),
        }
    }

    fn render(&self, captures: &Captures<'_>, out: &mut String) {
        match &self.replacement {
            Replacement::Template(template) => captures.expand(template, out),
            Replacement::KeyValue => render_key_value(captures, out),
        }
    }

    /// Replaces every match; borrowed when no replacement differs from
    /// what it matched (so a second pass over redacted text is a no-op).
    fn apply<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out: Option<String> = None;
        let mut copied = 0;
        let mut replacement = String::new();
        for captures in self.regex.captures_iter(text) {
            let found = captures.get_match();
            replacement.clear();
            self.render(&captures, &mut replacement);
            if replacement == found.as_str() {
                continue;
            }
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..found.start()]);
            out.push_str(&replacement);
            copied = found.end();
        }
        match out {
            None => Cow::Borrowed(text),
            Some(mut out) => {
                out.push_str(&text[copied..]);
                Cow::Owned(out)
            }
        }
    }
}

/// `key` + `kq` (the key's closing quote, if any) + `assign`, then the
/// value's opening quote and `[REDACTED]`; a bare value after a quoted key
/// (`"password": 1234`) is quoted like the key, so JSON stays JSON.
fn render_key_value(captures: &Captures<'_>, out: &mut String) {
    let part = |name: &str| captures.name(name).map_or("", |m| m.as_str());
    out.push_str(part("key"));
    out.push_str(part("kq"));
    out.push_str(part("assign"));
    let quoted = ["dq", "edq", "sq"]
        .iter()
        .find_map(|name| captures.name(name));
    if let Some(quote) = quoted {
        out.push_str(quote.as_str());
        out.push_str(REDACTED);
    } else {
        let quote = part("kq");
        out.push_str(quote);
        out.push_str(REDACTED);
        out.push_str(quote);
    }
}

/// The built-in patterns, most specific first: a token inside a
/// `Bearer …` header or an `api_key=…` pair keeps its own label.
const BUILT_IN: &[(&str, &str)] = &[
    (
        r#"-----BEGIN[A-Z ]*PRIVATE KEY-----[^"]*?-----END[A-Z ]*PRIVATE KEY-----"#,
        "[PRIVATE-KEY-REDACTED]",
    ),
    (
        r"\beyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*",
        "[JWT-REDACTED]",
    ),
    (r"\bsk-[A-Za-z0-9_-]{20,}", "[OPENAI-KEY-REDACTED]"),
    (
        r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b",
        "[AWS-KEY-REDACTED]",
    ),
    (
        r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
        "[GITHUB-TOKEN-REDACTED]",
    ),
    (r"\bxox[abposr]-[A-Za-z0-9-]{10,}", "[SLACK-TOKEN-REDACTED]"),
    (r"\bAIza[0-9A-Za-z_-]{30,}", "[GOOGLE-KEY-REDACTED]"),
    (
        r"(?i)\b(bearer)[ \t]+[A-Za-z0-9._~+/=-]{8,}",
        "${1} [REDACTED]",
    ),
];

/// `api_key=…`, `"password": "…"`, `token: …`, `client_secret => '…'`,
/// also with the quotes escaped (`\"token\":\"…\"`, JSON inside a JSON
/// string). Keys end at a word boundary, so `tokens` or `token_count` are
/// left alone. A value in plain double quotes runs to its closing quote,
/// escaped quotes included; one in escaped quotes (`\"…\"`) stops at the
/// next escaped quote.
const KEY_VALUE: &str = r#"(?ix)
    (?P<key>\b(?:[a-z0-9]+[_-])*
        (?:api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret
          |access[_-]?token|auth[_-]?token|refresh[_-]?token|token|secret|password|passwd|passphrase)
    \b)
    (?P<kq>\\*["'])?
    (?P<assign>[\ \t]*(?:=>|[:=])[\ \t]*)
    (?:
        (?P<dq>")(?:[^"\\\r\n]|\\[^\r\n])+
      | (?P<edq>\\+")(?:[^"\\\r\n]|\\[^"\\\r\n])+
      | (?P<sq>\\*')(?:[^'\\\r\n]|\\[^'\\\r\n])+
      | [^\s"'\\,;&<>\[\]{}()]+
    )"#;

const EMAIL: &str = r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b";

/// Compiled once per process; every `SecretRedactor::new` shares them
/// (cloning a `Regex` is a reference count).
static BUILT_IN_RULES: LazyLock<Arc<Vec<Rule>>> = LazyLock::new(|| {
    let mut rules: Vec<Rule> = BUILT_IN
        .iter()
        .filter_map(|(pattern, replacement)| Some(Rule::template(compile(pattern)?, *replacement)))
        .collect();
    if let Some(regex) = compile(KEY_VALUE) {
        rules.push(Rule {
            regex,
            replacement: Replacement::KeyValue,
        });
    }
    if let Some(regex) = compile(EMAIL) {
        rules.push(Rule::template(regex, "[EMAIL-REDACTED]"));
    }
    Arc::new(rules)
});

/// The built-in patterns are constants checked by this module's tests, so
/// compiling cannot fail; if it ever did, the rule would be missing (and
/// the tests would say which), never a panic at run time.
fn compile(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

/// Replaces secrets in text: a reusable `POST_TOOL_CALL` hook.
///
/// [`SecretRedactor::new`] knows these formats:
///
/// | secret | example | becomes |
/// |---|---|---|
/// | OpenAI-style keys | `sk-…`, `sk-proj-…` (20+ characters after `sk-`) | `[OPENAI-KEY-REDACTED]` |
/// | AWS access key ids | `AKIA…`, `ASIA…` (+ 16) | `[AWS-KEY-REDACTED]` |
/// | GitHub tokens | `ghp_…`, `gho_…`, `ghs_…`, `github_pat_…` | `[GITHUB-TOKEN-REDACTED]` |
/// | Slack tokens | `xoxb-…`, `xoxp-…`, `xoxa-…`, `xoxs-…` | `[SLACK-TOKEN-REDACTED]` |
/// | Google API keys | `AIza…` | `[GOOGLE-KEY-REDACTED]` |
/// | JSON Web Tokens | `eyJ….….…` | `[JWT-REDACTED]` |
/// | bearer credentials | `Bearer <token>` (any case) | `Bearer [REDACTED]` |
/// | PEM private keys | `-----BEGIN … PRIVATE KEY-----…-----END …` | `[PRIVATE-KEY-REDACTED]` |
/// | `key`/value pairs | `api_key=…`, `"password": "…"`, `token: …`, `client_secret => '…'` | the value becomes `[REDACTED]`, key and quoting stay |
/// | e-mail addresses | `ada@example.com` | `[EMAIL-REDACTED]` |
///
/// The key/value rule covers the keys `api_key` (`api-key`, `apikey`),
/// `access_key`, `secret_key`, `private_key`, `client_secret`,
/// `access_token`, `auth_token`, `refresh_token`, `token`, `secret`,
/// `password`, `passwd` and `passphrase`, in any case and with any
/// `prefix_` (`db_password`, `aws_secret_access_key`), separated from the
/// value by `:`, `=` or `=>`. A bare value after a quoted key is quoted
/// (`"password": 1234` becomes `"password": "[REDACTED]"`), so a JSON
/// result stays valid JSON. Patterns of your own join with
/// [`with_pattern`](Self::with_pattern).
///
/// # What is guaranteed
///
/// The patterns run over a *decoded view* of the text: every JSON string
/// literal in it (a whole JSON result, or JSON embedded in prose whose own
/// quotes pair up; literals are found left to right) that
/// contains escape sequences is decoded and written back with only the
/// escapes JSON requires (`\"`, `\\` and control characters). So a secret
/// written with `\uXXXX` escapes (`sk-\u0041bc…`, or a key whose every
/// character is escaped), with `\/` for `/`, or as surrogate pairs is
/// matched as the characters it stands for. Then:
///
/// - if no pattern matches the decoded view, [`redact`](Self::redact)
///   returns the text unchanged (borrowed, not even re-escaped);
/// - otherwise it returns the decoded view with every match replaced, in
///   pattern order (each pattern runs on the output of the one before).
///   For JSON input this is still valid JSON meaning the same thing apart
///   from the replaced parts: the built-in replacements never remove a
///   quote or a backslash, and add quotes only around the `[REDACTED]` of
///   a bare value after a quoted key.
///
/// Not covered: secrets escaped twice (`\\u0041`: a JSON document inside a
/// JSON string is matched only where its escaped quotes are the only
/// escapes), secrets split across separate strings or values, otherwise
/// encoded (base64, `%41`, HTML entities), or in a format no pattern
/// describes. The redactor changes `tool_result`, the text the agent, the
/// `ToolUsageFinished` event and the logs get; `raw_tool_result` is never
/// changed, so a hook that reads it sees the secret.
///
/// # As a hook
///
/// Register [`hook`](Self::hook) at `POST_TOOL_CALL` before any hook that
/// copies the result somewhere (a log, an abort reason): hooks after it see
/// the redacted text. Registering it fail-closed withholds the result if
/// the redactor ever panicked.
///
/// ```
/// use crew_runtime::guards::{Regex, SecretRedactor};
/// use crew_runtime::prelude::*;
///
/// let redactor = SecretRedactor::new()
///     .with_pattern(Regex::new(r"\bEMP-\d{6}\b")?, "[EMPLOYEE-ID]");
/// assert_eq!(
///     redactor.redact("token=abc123 for ada@example.com (EMP-123456)"),
///     "token=[REDACTED] for [EMAIL-REDACTED] ([EMPLOYEE-ID])"
/// );
/// // JSON escapes do not hide a key.
/// assert_eq!(
///     redactor.redact(r#"{"key":"sk-\u0041bcdefghijklmnopqrstuvwxyz"}"#),
///     r#"{"key":"[OPENAI-KEY-REDACTED]"}"#
/// );
///
/// let registry = HookRegistry::new();
/// registry.register_hook_with(
///     POST_TOOL_CALL,
///     HookOptions::new().name("secret-redactor").fail_closed(),
///     redactor.hook(),
/// )?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct SecretRedactor {
    rules: Arc<Vec<Rule>>,
}

impl SecretRedactor {
    /// A redactor with every built-in pattern.
    pub fn new() -> Self {
        SecretRedactor {
            rules: Arc::clone(&BUILT_IN_RULES),
        }
    }

    /// A redactor with no pattern at all, for a set of your own.
    pub fn empty() -> Self {
        SecretRedactor {
            rules: Arc::new(Vec::new()),
        }
    }

    /// Adds a pattern, run after the ones already there. `replacement` is a
    /// `regex` replacement template: `$1`, `${name}` refer to capture
    /// groups, `$$` is a dollar sign.
    pub fn with_pattern(mut self, pattern: Regex, replacement: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.rules).push(Rule::template(pattern, replacement));
        self
    }

    /// How many patterns run.
    pub fn pattern_count(&self) -> usize {
        self.rules.len()
    }

    /// The text with every secret replaced; borrowed when there was none.
    /// See [the type's documentation](Self) for exactly what is matched.
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let decoded = decode_string_literals(text);
        let mut current: Cow<'_, str> = Cow::Borrowed(&decoded);
        let mut changed = false;
        for rule in self.rules.iter() {
            let next = match rule.apply(&current) {
                Cow::Owned(next) => Some(next),
                Cow::Borrowed(_) => None,
            };
            if let Some(next) = next {
                current = Cow::Owned(next);
                changed = true;
            }
        }
        if changed {
            Cow::Owned(current.into_owned())
        } else {
            Cow::Borrowed(text)
        }
    }

    /// A `POST_TOOL_CALL` hook that replaces `tool_result` with its redacted
    /// form (and keeps it when there was nothing to redact).
    pub fn hook(
        &self,
    ) -> impl Fn(&mut ToolCallHookContext) -> Option<String> + Send + Sync + 'static {
        let redactor = self.clone();
        move |ctx: &mut ToolCallHookContext| match redactor.redact(ctx.tool_result.as_deref()?) {
            Cow::Owned(redacted) => Some(redacted),
            Cow::Borrowed(_) => None,
        }
    }
}

impl Default for SecretRedactor {
    fn default() -> Self {
        SecretRedactor::new()
    }
}

impl fmt::Debug for SecretRedactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretRedactor")
            .field(
                "patterns",
                &self
                    .rules
                    .iter()
                    .map(|r| r.regex.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The text with every JSON string literal that holds escape sequences
/// decoded and re-encoded with only the escapes JSON requires. Literals
/// that are not valid JSON strings (an invalid escape, a raw control
/// character: prose with stray quotes) are left as they are. One linear
/// pass; nothing recurses, whatever the nesting of the JSON.
fn decode_string_literals(text: &str) -> Cow<'_, str> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn redact(text: &str) -> String {
        SecretRedactor::new().redact(text).into_owned()
    }

    #[test]
    fn every_built_in_pattern_compiles() {
        assert_eq!(BUILT_IN_RULES.len(), BUILT_IN.len() + 2);
    }

    #[test]
    fn each_format_is_replaced_by_its_label() {
        let cases = [
            (
                "key sk-abcdefghijklmnopqrstuvwxyz0123",
                "key [OPENAI-KEY-REDACTED]",
            ),
            (
                "sk-proj-Ab3_dEf-GhIjKlMnOpQrStUvWx",
                "[OPENAI-KEY-REDACTED]",
            ),
            ("id AKIAIOSFODNN7EXAMPLE.", "id [AWS-KEY-REDACTED]."),
            (
                "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "[GITHUB-TOKEN-REDACTED]",
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "[GITHUB-TOKEN-REDACTED]",
            ),
            ("xoxb-123456789012-abcdefABCDEF", "[SLACK-TOKEN-REDACTED]"),
            (
                "AIzaSyA-1234567890abcdefghijklmnopqrstu",
                "[GOOGLE-KEY-REDACTED]",
            ),
            (
                "Authorization: Bearer abc.DEF-123_xyz~",
                "Authorization: Bearer [REDACTED]",
            ),
            (
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.sig-nature_1",
                "jwt [JWT-REDACTED]",
            ),
            ("mail ada@example.com now", "mail [EMAIL-REDACTED] now"),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
                "[PRIVATE-KEY-REDACTED]",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(redact(text), expected, "{text}");
        }
    }

    #[test]
    fn key_value_pairs_keep_key_and_quoting() {
        let cases = [
            ("api_key=abc123&x=1", "api_key=[REDACTED]&x=1"),
            ("API-KEY: abc123", "API-KEY: [REDACTED]"),
            (
                r#"{"password": "correct horse", "user": "ada"}"#,
                r#"{"password": "[REDACTED]", "user": "ada"}"#,
            ),
            (r#"{"db_password":1234}"#, r#"{"db_password":"[REDACTED]"}"#),
            ("client_secret => 'x y'", "client_secret => '[REDACTED]'"),
            (
                r#"{"password": "a\"b\\", "n": 1}"#,
                r#"{"password": "[REDACTED]", "n": 1}"#,
            ),
            (
                r#"{"body":"{\"token\":\"abc\"}"}"#,
                r#"{"body":"{\"token\":\"[REDACTED]\"}"}"#,
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(redact(text), expected, "{text}");
        }
    }

    #[test]
    fn look_alike_words_are_left_alone() {
        for text in [
            "tokens: 5",
            r#"{"max_tokens": 100, "token_count": 3}"#,
            "the task-runner finished",
            "passwords: none",
            "a bearer of news",
        ] {
            assert!(
                matches!(SecretRedactor::new().redact(text), Cow::Borrowed(_)),
                "{text}"
            );
        }
    }

    #[test]
    fn redacting_twice_changes_nothing_more() {
        let text = r#"{"password":"x","k":"sk-abcdefghijklmnopqrstuvwxyz","m":"a@b.io"}"#;
        let once = redact(text);
        assert!(matches!(
            SecretRedactor::new().redact(&once),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn json_escapes_do_not_hide_secrets() {
        let cases = [
            (
                r#"{"k":"sk-\u0061bcdefghijklmnopqrstuvwxyz","n":"caf\u00e9"}"#,
                r#"{"k":"[OPENAI-KEY-REDACTED]","n":"café"}"#,
            ),
            (
                r#"{"h":"Bearer abc\/def\/ghijkl"}"#,
                r#"{"h":"Bearer [REDACTED]"}"#,
            ),
            (
                r#"{"\u0070\u0061\u0073\u0073\u0077\u006f\u0072\u0064":"hunter2"}"#,
                r#"{"password":"[REDACTED]"}"#,
            ),
            (r#"["ada\u0040example.com"]"#, r#"["[EMAIL-REDACTED]"]"#),
            (
                r#"{"t":"line\nbreak","k":"AKIA\u0049OSFODNN7EXAMPLE"}"#,
                r#"{"t":"line\nbreak","k":"[AWS-KEY-REDACTED]"}"#,
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(redact(text), expected, "{text}");
            let parsed: Result<serde_json::Value, _> = serde_json::from_str(&redact(text));
            assert!(parsed.is_ok(), "still JSON: {text}");
        }
    }

    #[test]
    fn text_without_secrets_is_returned_unchanged_even_with_escapes() {
        let text = r#"{"note":"caf\u00e9 \/ \"quoted\""}"#;
        assert!(matches!(
            SecretRedactor::new().redact(text),
            Cow::Borrowed(same) if same == text
        ));
    }

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

    #[test]
    fn deeply_nested_json_is_decoded_without_recursion() {
        let depth = 100_000;
        let text = format!(
            "{}\"sk-\\u0061bcdefghijklmnopqrstuvwxyz\"{}",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let redacted = redact(&text);
        assert!(redacted.contains("\"[OPENAI-KEY-REDACTED]\""));
        assert!(!redacted.contains("sk-"));
    }

    #[test]
    fn custom_patterns_run_after_the_built_in_ones() {
        let redactor = SecretRedactor::empty().with_pattern(
            Regex::new(r"(?P<user>\w+):(?P<pass>\w+)@").expect("valid"),
            "$user:***@",
        );
        assert_eq!(redactor.pattern_count(), 1);
        assert_eq!(
            redactor.redact("https://ada:s3cret@example.com"),
            "https://ada:***@example.com"
        );
        assert_eq!(
            redactor.redact("mail ada@example.com"),
            "mail ada@example.com",
            "empty() has no built-in pattern"
        );
    }
}
