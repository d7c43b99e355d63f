//! Generic key/value detection: a secret-looking key, and the value that
//! goes with it in whatever format the text is in.
//!
//! One key grammar ([`key_pattern`]) serves every format: JSON and YAML
//! (`"dbPassword": "…"`, `password: …`), env and INI lines
//! (`PGPASSWORD=…`, `export AWS_SECRET_ACCESS_KEY=…`), XML
//! (`<password>…</password>`, `<add key="Password" value="…"/>`), HTTP
//! header lines (`Authorization: Basic …`, `Cookie: …`), command lines
//! (`--password …`) and `.netrc` files. Each match is then looked at in
//! code: whether the key really is one (`bypass` and `nextPageToken` are
//! not), and whether the value is a secret or a placeholder, a type or an
//! expression of some program.

use std::ops::Range;
use std::sync::LazyLock;

use regex::{Captures, Match};

use super::{CheckedRule, Decide, Decision, REDACTED};

/// Words that make a key secret wherever they stand in it (`PGPASSWORD`,
/// `dbPassword`, `client_secret`, `x-api-key`).
const LONG_WORDS: &str = concat!(
    r"passw(?:or)?d|passphrase|secret|token|credentials?|authorization|cookie",
    r"|(?:api|access|secret|private|priv|master|encryption|signing|account|",
    r"subscription|client|consumer|auth|app|license|licence|webhook|deploy|",
    r"hmac|jwt|session|storage|service|shared[_.-]?access)[_.-]?key",
);

/// Words that count only as a word of their own in the key: `DB_PASS`,
/// `dbPass`, `auth`, but not `bypass`, `compass` or `oauth`.
const SHORT_WORDS: &str = r"pass|pwd|creds|auth";

/// What may follow the word: `SECRET_KEY_BASE`, `password_hash`,
/// `client-key-data` (kubeconfig), `token2`.
const ENDINGS: &str =
    r"base|value|plain(?:text)?|hash|b64|base64|raw|str|string|text|bytes|hex|data|enc(?:rypted)?";

/// Keys that hold a secret word but no secret (compared with everything
/// but letters and digits removed, lower-cased, as an ending).
const NOT_SECRET_KEYS: &[&str] = &[
    "nopasswd",
    "nopassword",
    "pagetoken",
    "nexttoken",
    "continuationtoken",
    "synctoken",
    "cancellationtoken",
    "publictoken",
    "resumetoken",
];

/// Beginnings of keys that name a condition, not a secret
/// (`InvalidToken: signature mismatch`, `missing_api_key: true`), compared
/// like [`NOT_SECRET_KEYS`].
const NOT_SECRET_KEY_STARTS: &[&str] = &[
    "invalid", "expired", "missing", "wrong", "bad", "unknown", "empty", "required",
];

/// The key grammar, without its left boundary: an optional namespace
/// prefix of key characters, then a secret word, then an ending. Inside
/// `(?i)`.
fn key_pattern() -> String {
    format!(
        r"(?P<key>[A-Za-z0-9_.-]*?(?:(?P<short>{SHORT_WORDS})|{LONG_WORDS})(?:[_.-]?(?:{ENDINGS}))?[0-9]?)"
    )
}

/// Whether a key the grammar matched is a secret key.
fn is_secret_key(key: &Match<'_>, short: Option<Match<'_>>) -> bool {
    let squashed: String = key
        .as_str()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if NOT_SECRET_KEYS.iter().any(|word| squashed.ends_with(word))
        || NOT_SECRET_KEY_STARTS
            .iter()
            .any(|word| squashed.starts_with(word))
    {
        return false;
    }
    let Some(short) = short else {
        return true;
    };
    // A short word stands on its own: at the key's start or after a
    // separator, or as a camel-case word (`dbPass`); and it ends the key,
    // or a separator, digit or new camel-case word follows.
    let bytes = key.as_str().as_bytes();
    let start = short.start() - key.start();
    let end = short.end() - key.start();
    let first = bytes[start];
    let starts_word = start == 0
        || matches!(bytes[start - 1], b'_' | b'-' | b'.')
        || (first.is_ascii_uppercase()
            && (bytes[start - 1].is_ascii_lowercase() || bytes[start - 1].is_ascii_digit()));
    let ends_word = end == bytes.len()
        || matches!(bytes[end], b'_' | b'-' | b'.')
        || bytes[end].is_ascii_digit()
        || (bytes[end].is_ascii_uppercase() && bytes[end - 1].is_ascii_lowercase());
    starts_word && ends_word
}

/// Whether `name`, whole, is a secret key (a CSV column's name, spaces
/// made `_`).
pub(super) fn is_secret_name(name: &str) -> bool {
    static NAME: LazyLock<Option<regex::Regex>> =
        LazyLock::new(|| super::compile(&format!("(?i)^{}$", key_pattern())));
    NAME.as_ref()
        .and_then(|name_pattern| name_pattern.captures(name))
        .is_some_and(|captures| {
            captures
                .name("key")
                .is_some_and(|key| is_secret_key(&key, captures.name("short")))
        })
}

/// The key's secret word is one of the password family: only for those is
/// a number a plausible value (`"db_password": 1234`), and only their
/// unquoted values may be several words (`password: correct horse`); a
/// token or key is one word (`auth: token refreshed` is a log line).
pub(super) fn is_password_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    lower.contains("pass") || lower.contains("pwd")
}

/// `key: value`, `key=value`, `"key": "value"`, `key => 'value'`,
/// `key := value`, also with the quotes escaped (`\"token\":\"…\"`, JSON
/// inside a JSON string): the key and the separator. The value is read in
/// code ([`value_after`]): a regex that also matched it would have to run
/// its slowest engine over every value just to find where it ends.
fn key_value_pattern() -> String {
    format!(
        r#"(?i)(?-u:\b){key}(?P<kq>\\*["'])?(?P<assign>[ \t]*(?:=>|:=|\?=|\+=|:|=)[ \t]*)"#,
        key = key_pattern()
    )
}

/// A YAML block scalar (`password: |` or `>-`, maybe with a comment,
/// then lines indented deeper than the key's): the range from its first
/// character to the end of its last non-blank line.
fn yaml_block(text: &str, key_start: usize, value_start: usize) -> Option<Range<usize>> {
    let rest = &text[value_start..];
    let header = rest.strip_prefix(['|', '>'])?;
    let header_length = header
        .bytes()
        .take_while(|&b| matches!(b, b'-' | b'+' | b'0'..=b'9' | b' ' | b'\t'))
        .count();
    let mut after_header = &header[header_length..];
    if after_header.starts_with('#') && header[..header_length].ends_with([' ', '\t']) {
        after_header = &after_header[after_header.find('\n').unwrap_or(after_header.len())..];
    }
    let after_newline = after_header
        .strip_prefix("\r\n")
        .or_else(|| after_header.strip_prefix('\n'))?;
    let block_start = text.len() - after_newline.len();
    yaml_lines_deeper(text, key_start, block_start)
}

/// The lines from `block_start` on that are indented deeper than the line
/// of the key at `key_start` (blank lines among them included): the range
/// from their first character to the end of the last non-blank one.
fn yaml_lines_deeper(text: &str, key_start: usize, block_start: usize) -> Option<Range<usize>> {
    let line_start = text[..key_start].rfind('\n').map_or(0, |at| at + 1);
    let key_indent = text[line_start..key_start]
        .bytes()
        .take_while(|&b| b == b' ')
        .count();
    let mut end = block_start;
    let mut at = block_start;
    for line in text[block_start..].split_inclusive('\n') {
        let content = line.trim_end_matches(['\r', '\n']);
        let indent = content.bytes().take_while(|&b| b == b' ').count();
        if content.trim().is_empty() {
            at += line.len();
            continue;
        }
        if indent <= key_indent {
            break;
        }
        end = at + content.len();
        at += line.len();
    }
    let first =
        block_start + text[block_start..end].len() - text[block_start..end].trim_start().len();
    (first < end).then_some(first..end)
}

/// A YAML scalar on the lines after its key (`password:` alone on its
/// line, the value indented below it, plain or quoted): the range of the
/// value, inside its quotes if quoted. Only for a key that starts its line
/// (after indentation, `- ` and a quote), and only when the first line
/// below is a scalar: not a mapping (`type: string`), a list item, a
/// comment, a flow collection, an anchor, alias or tag. Lines indented
/// with tabs (a Makefile recipe under `token:`) are no YAML.
fn yaml_next_lines(text: &str, key_start: usize, value_start: usize) -> Option<Range<usize>> {
    let line_rest = &text[value_start..];
    let line_end = line_rest.find('\n')?;
    if !line_rest[..line_end].trim().is_empty() {
        return None;
    }
    let line_start = text[..key_start].rfind('\n').map_or(0, |at| at + 1);
    let before_key = text[line_start..key_start].trim_start_matches(' ');
    let mut before_key = before_key;
    while let Some(rest) = before_key.strip_prefix("- ") {
        before_key = rest.trim_start_matches(' ');
    }
    if !matches!(before_key, "" | "\"" | "'") {
        return None;
    }
    let block_start = value_start + line_end + 1;
    let first_line = text[block_start..]
        .lines()
        .map(str::trim_end)
        .find(|line| !line.trim().is_empty())?;
    if first_line.starts_with('\t') || first_line.trim_start().starts_with('\t') {
        return None;
    }
    let content = first_line.trim_start();
    if content.starts_with(['-', '#', '{', '[', '&', '*', '!', '|', '>', '%', '@', '?'])
        || is_mapping_line(content)
    {
        return None;
    }
    let range = yaml_lines_deeper(text, key_start, block_start)?;
    // Lines after the first that open a mapping end the scalar there.
    let mut end = range.start;
    let mut at = range.start;
    for (index, line) in text[range.clone()].split_inclusive('\n').enumerate() {
        if index > 0 && is_mapping_line(line) {
            break;
        }
        if !line.trim().is_empty() {
            end = at + line.trim_end().len();
        }
        at += line.len();
    }
    let value = &text[range.start..end];
    let quoted = value.len() >= 2
        && ((value.starts_with('"') && value.ends_with('"'))
            || (value.starts_with('\'') && value.ends_with('\'')));
    if quoted {
        return (range.start + 1 < end - 1).then_some(range.start + 1..end - 1);
    }
    (range.start < end).then_some(range.start..end)
}

/// `name: …`, `"name": …`, `name:` at the end of a line: a YAML mapping
/// entry, not a scalar.
fn is_mapping_line(line: &str) -> bool {
    let line = line.trim();
    let after_name = if let Some(rest) = line.strip_prefix('"') {
        rest.find('"').map(|at| &rest[at + 1..])
    } else if let Some(rest) = line.strip_prefix('\'') {
        rest.find('\'').map(|at| &rest[at + 1..])
    } else {
        line.find(':').map(|at| &line[at..])
    };
    after_name
        .map(|after| after.trim_start_matches([' ', '\t']))
        .and_then(|after| after.strip_prefix(':'))
        .is_some_and(|after| after.is_empty() || after.starts_with([' ', '\t']))
}

/// A value after a separator.
enum Value {
    /// A quoted string's contents (its closing quote, if any, not
    /// included); `quote` is the opening quote with any backslashes.
    Quoted {
        quote: Range<usize>,
        contents: Range<usize>,
    },
    /// An unquoted value, to the end of its line (or of the JSON string it
    /// stands in); [`bare_value_end`] finds where it really ends.
    Bare(Range<usize>),
}

/// The value that starts at `at`:
/// - in double quotes, to the closing quote, escaped quotes included;
/// - in escaped double quotes (`\"…\"`), to the next escaped quote;
/// - in single quotes or backticks, to the closing one;
/// - unquoted, to the end of the line or the next `"`, unless it starts
///   like no value (`{`, `[`, `(`, `&`, `*`, `#`, `<`, `!`, a separator).
fn value_after(text: &str, at: usize) -> Option<Value> {
    let bytes = text.as_bytes();
    let backslashes = bytes[at..].iter().take_while(|&&b| b == b'\\').count();
    let start = at + backslashes;
    let scan = |from: usize, stop: &dyn Fn(u8) -> bool, escapable: &dyn Fn(u8) -> bool| {
        let mut i = from;
        while i < bytes.len() {
            let b = bytes[i];
            if b == b'\\' {
                match bytes.get(i + 1) {
                    Some(&next) if escapable(next) => i += 1 + utf8_length(next),
                    _ => break,
                }
            } else if stop(b) {
                break;
            } else {
                i += 1;
            }
        }
        i
    };
    let line_end = |b: u8| b == b'\r' || b == b'\n';
    match bytes.get(start) {
        Some(b'"') => {
            let from = start + 1;
            let end = if backslashes == 0 {
                scan(from, &|b| b == b'"' || line_end(b), &|b| !line_end(b))
            } else {
                scan(from, &|b| b == b'"' || line_end(b), &|b| {
                    !line_end(b) && b != b'"' && b != b'\\'
                })
            };
            Some(Value::Quoted {
                quote: at..from,
                contents: from..end,
            })
        }
        Some(b'\'') => {
            let from = start + 1;
            let end = scan(from, &|b| b == b'\'' || line_end(b), &|b| {
                !line_end(b) && b != b'\'' && b != b'\\'
            });
            Some(Value::Quoted {
                quote: at..from,
                contents: from..end,
            })
        }
        Some(b'`') if backslashes == 0 => {
            let from = start + 1;
            let end = scan(from, &|b| b == b'`' || line_end(b), &|_| false);
            Some(Value::Quoted {
                quote: at..from,
                contents: from..end,
            })
        }
        _ => {
            // Unquoted: a first character that can start a value (an escape
            // pair counts), then anything up to a quote or the line's end.
            let ordinary = |b: u8| b"\"\r\n".contains(&b);
            let escapable = |b: u8| !b"nrt\"\r\n".contains(&b);
            let first = *bytes.get(at)?;
            let starts_value = if first == b'\\' {
                bytes.get(at + 1).is_some_and(|&next| escapable(next))
            } else {
                !first.is_ascii_whitespace() && !b"\"'`:={[(<>,;&|#*!".contains(&first)
            };
            if !starts_value {
                return None;
            }
            let end = scan(at, &ordinary, &escapable);
            (end > at).then_some(Value::Bare(at..end))
        }
    }
}

/// The length of the UTF-8 sequence a byte starts (1 for a stray
/// continuation byte, which never starts a char of valid text anyway).
fn utf8_length(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

fn key_value(text: &str, captures: &Captures<'_>) -> Decision {
    let (Some(key), Some(assign)) = (captures.name("key"), captures.name("assign")) else {
        return keep_from(captures);
    };
    let keep = Decision::Keep { resume: key.end() };
    if !is_secret_key(&key, captures.name("short")) {
        return keep;
    }
    if let Some(block) = yaml_block(text, key.start(), assign.end()) {
        return match secret_part(text, block, key.as_str()) {
            Some(range) => replace(range),
            None => keep,
        };
    }
    if assign.as_str().trim() == ":"
        && let Some(value) = yaml_next_lines(text, key.start(), assign.end())
    {
        let first_line = text[value.clone()].lines().next().unwrap_or("");
        if is_code(first_line, "", key.as_str()) {
            return keep;
        }
        return match secret_part(text, value, key.as_str()) {
            Some(range) => replace(range),
            None => keep,
        };
    }
    let bare = match value_after(text, assign.end()) {
        None => return keep,
        Some(Value::Quoted { quote, contents }) => {
            // `"Password: "`: the quote after the separator closes the
            // string the key stands in; it opens no value.
            let opening = text[quote].chars().next_back();
            if captures.name("kq").is_none() && text[..key.start()].chars().next_back() == opening {
                return keep;
            }
            return match secret_part(text, contents, key.as_str()) {
                Some(range) => replace(range),
                None => keep,
            };
        }
        Some(Value::Bare(bare)) => bare,
    };
    let assign = assign.as_str();
    // `secret:db-x` in an ARN, `user:token:42`: an unquoted key whose
    // colon no space follows is a namespace, not YAML.
    if captures.name("kq").is_none() && assign.trim() == ":" && !assign.ends_with([' ', '\t']) {
        return keep;
    }
    let shape = if is_header_key(key.as_str()) {
        BareValue::WholeLine
    } else if assign == "=" {
        BareValue::UpToSeparator
    } else if is_password_key(key.as_str()) {
        BareValue::Words
    } else {
        BareValue::OneWord
    };
    let end = bare.start + bare_value_end(&text[bare.clone()], shape);
    let range = bare.start..end;
    let value = &text[range.clone()];
    let after = &text[end..];
    // `f"Bearer {token}"`, `b'…'`: a string prefix, not a value.
    let string_prefix = value.len() <= 2
        && value.bytes().all(|b| b.is_ascii_alphabetic())
        && after.starts_with(['"', '\'']);
    if string_prefix || is_code(value, after, key.as_str()) {
        return keep;
    }
    match secret_part(text, range, key.as_str()) {
        Some(range) => Decision::Replace {
            range,
            label: REDACTED,
            quote: captures.name("kq").map(|quote| quote.range()),
        },
        None => keep,
    }
}

fn replace(range: Range<usize>) -> Decision {
    Decision::Replace {
        range,
        label: REDACTED,
        quote: None,
    }
}

fn keep_from(captures: &Captures<'_>) -> Decision {
    Decision::Keep {
        resume: captures.get_match().end(),
    }
}

/// Header-like keys whose value is the whole rest of the line, `;` and
/// `=` included (`Cookie: a=1; b=2`, `Authorization: Digest a=1, b=2`).
fn is_header_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    lower.ends_with("cookie") || lower.ends_with("authorization")
}

/// How far an unquoted value reaches.
#[derive(Clone, Copy)]
enum BareValue {
    /// A header's value: the whole rest of the line, `;` and `=` included.
    WholeLine,
    /// After a tight `=` (`PGPASSWORD=x psql`, `a=1&b=2`,
    /// `AccountKey=…;Endpoint=…`): up to the first space, `&`, `;`, `,` or
    /// bracket.
    UpToSeparator,
    /// A password after `:` or a spaced `=`: the rest of the line, up to a
    /// comment or the next `key=`/`key:` pair.
    Words,
    /// Any other value: up to the first space.
    OneWord,
}

/// Where a bare value ends (an offset into `value`, which runs to the end
/// of its line or JSON string), with trailing spaces, separators and
/// unbalanced closing brackets cut.
fn bare_value_end(value: &str, shape: BareValue) -> usize {
    let bytes = value.as_bytes();
    let first =
        |stop: &dyn Fn(u8) -> bool| bytes.iter().position(|&b| stop(b)).unwrap_or(bytes.len());
    let mut end = match shape {
        BareValue::WholeLine => bytes.len(),
        BareValue::UpToSeparator => first(&|b| b.is_ascii_whitespace() || b"&;,)]}<>".contains(&b)),
        BareValue::Words => next_pair_or_comment(value).unwrap_or(bytes.len()),
        BareValue::OneWord => first(&|b| b.is_ascii_whitespace()),
    };
    loop {
        let before = end;
        while end > 0 && (bytes[end - 1].is_ascii_whitespace() || b",;".contains(&bytes[end - 1])) {
            end -= 1;
        }
        if end > 0 && b")]}".contains(&bytes[end - 1]) {
            let (open, close) = match bytes[end - 1] {
                b')' => (b'(', b')'),
                b']' => (b'[', b']'),
                _ => (b'{', b'}'),
            };
            let opens = bytes[..end].iter().filter(|&&b| b == open).count();
            let closes = bytes[..end].iter().filter(|&&b| b == close).count();
            if closes > opens {
                end -= 1;
            }
        }
        if end == before {
            break;
        }
    }
    end
}

/// The offset of ` # comment`, `, next: …`, ` next=…` in a value.
fn next_pair_or_comment(value: &str) -> Option<usize> {
    let bytes = value.as_bytes();
    for at in 1..bytes.len() {
        let b = bytes[at];
        if !(b.is_ascii_whitespace() || b == b',' || b == b';') {
            continue;
        }
        let rest = value[at..]
            .trim_start_matches(|c: char| c.is_ascii_whitespace() || c == ',' || c == ';');
        if b.is_ascii_whitespace() && (rest.starts_with('#') || rest.starts_with("//")) {
            return Some(at);
        }
        let rest = rest.trim_start_matches(['"', '\'']);
        let name_length = rest
            .bytes()
            .take_while(|&c| c.is_ascii_alphanumeric() || b"_.-".contains(&c))
            .count();
        if name_length == 0 || !rest.as_bytes()[0].is_ascii_alphabetic() {
            continue;
        }
        let after = rest[name_length..].trim_start_matches(['"', '\'']);
        let after = after.trim_start_matches([' ', '\t']);
        let pair = (after.starts_with('=') && !after.starts_with("=="))
            || (after.starts_with(':')
                && after[1..]
                    .chars()
                    .next()
                    .is_none_or(|c| c.is_whitespace() || c == '"' || c == '\''));
        if pair {
            return Some(at);
        }
    }
    None
}

/// Auth schemes kept in front of the credential: `Basic [REDACTED]`.
const SCHEMES: &[&str] = &[
    "basic",
    "bearer",
    "token",
    "digest",
    "negotiate",
    "ntlm",
    "hoba",
    "mutual",
    "apikey",
    "sso-key",
    "key",
    "oauth",
    "aws4-hmac-sha256",
    "sharedkey",
    "sharedaccesssignature",
];

/// The part of a value to replace: `range` less an auth scheme in front;
/// `None` when the value is no secret (empty, a placeholder, a scheme
/// alone, already redacted).
pub(super) fn secret_part(text: &str, mut range: Range<usize>, key: &str) -> Option<Range<usize>> {
    let value = &text[range.clone()];
    let trimmed = value.trim();
    let first_word = trimmed.split_whitespace().next().unwrap_or("");
    if !trimmed.bytes().any(|b| b.is_ascii_alphanumeric())
        || is_placeholder(trimmed)
        || is_placeholder(first_word)
        || is_mode_word(trimmed, key)
        || is_version_requirement(trimmed, key)
    {
        return None;
    }
    range.start += value.len() - value.trim_start().len();
    range.end -= value.len() - value.trim_end().len();
    let value = &text[range.clone()];
    if let Some((scheme, rest)) = value.split_once([' ', '\t'])
        && SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme))
    {
        let rest_trimmed = rest.trim_start();
        if rest_trimmed.is_empty() || is_placeholder(rest_trimmed) {
            return None;
        }
        range.start += value.len() - rest_trimmed.len();
    }
    Some(range)
}

/// Values that stand for a secret without being one.
pub(super) fn is_placeholder(value: &str) -> bool {
    static PLACEHOLDER: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
        super::compile(concat!(
            r"(?i)^(?:",
            r"null|nil|none|undefined|true|false|yes|no|on|off|n/?a|tbd|todo",
            r"|required|optional|empty|unset|hidden|redacted|filtered|masked|omitted",
            r"|ok|okay|success|successful|failed|failure|denied|expired|invalid|missing|valid",
            r"|enabled|disabled|set|not[ \t]set|none[ \t]set|sensitive|default|auto",
            // a permission (`id-token: write`), a size (`kubectl describe`)
            r"|read|write|read-write|read-only|readonly|\d+[ \t]+bytes?",
            r"|\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\$\(.*\)|\$\d+|\$\{\{.*\}\}",
            r"|\{\{.*\}\}|\{%.*%\}|\{[A-Za-z0-9_.]*\}|<%=?.*%>|#\{.*\}",
            r"|<[^<>]*>|%[A-Za-z_][A-Za-z0-9_]*%|%[sdvq]|%\(\w+\)s|@[A-Za-z_]+@",
            r"|\*+|x{3,}|•+|\.{3}|…|-+|\?+|:[A-Za-z_]\w*",
            r"|(?:your|my|the)[_-][a-z_-]*|(?:your|my)(?:token|key|secret|password|apikey)",
            r"|!\w+(?:\s.*)?",
            r"|\[[A-Z-]*(?:REDACTED|FILTERED|HIDDEN|MASKED)\]",
            r")$",
        ))
    });
    PLACEHOLDER
        .as_ref()
        .is_some_and(|placeholder| placeholder.is_match(value))
}

/// A dependency's version requirement: a package named like a secret
/// (`"jsonwebtoken": "^9.0.2"`, `cookie = "0.6"`, `"js-cookie": "~3.0"`)
/// is a name, and its version no secret. A password that looks like a
/// plain version (`"password": "1.2.3"`) still counts; one that starts
/// with a range operator does not.
fn is_version_requirement(value: &str, key: &str) -> bool {
    static VERSION: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
        super::compile(concat!(
            r"^(?:latest|workspace:\S*|npm:\S+|link:\S+|file:\S+|\*",
            r"|(?P<operator>\^|~>?|[<>]=?|=)?[ \t]*v?\d+(?:\.(?:\d+|[xX*])){0,3}",
            r"(?:-[0-9A-Za-z.]+)?(?:\+[0-9A-Za-z.]+)?",
            r"(?:[ \t]*(?:\|\||,|[ \t]-[ \t]|[ \t])[ \t]*(?:\^|~>?|[<>]=?|=)?[ \t]*v?\d+(?:\.(?:\d+|[xX*])){0,3}(?:-[0-9A-Za-z.]+)?)*",
            r")$",
        ))
    });
    let Some(captures) = VERSION.as_ref().and_then(|version| version.captures(value)) else {
        return false;
    };
    let numbered = value.starts_with(|c: char| c.is_ascii_digit() || c == 'v');
    captures.name("operator").is_some()
        || (!is_password_key(key) && (!numbered || value.contains('.')))
}

/// `credentials: "include"` (the fetch API's modes), `auth: "basic"` (a
/// scheme named, not used).
fn is_mode_word(value: &str, key: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    (key.to_ascii_lowercase().contains("credential")
        && matches!(lower.as_str(), "include" | "omit" | "same-origin"))
        || SCHEMES.contains(&lower.as_str())
        || matches!(
            lower.as_str(),
            "oauth2" | "password" | "sasl" | "md5" | "trust" | "scram-sha-256"
        ) && key.to_ascii_lowercase().contains("auth")
}

/// The words a variable holding a secret is named after.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "pass",
    "pwd",
    "passphrase",
    "secret",
    "token",
    "key",
    "apikey",
    "auth",
    "credential",
    "credentials",
    "creds",
    "cookie",
];

/// Whether an unquoted value is an expression of a program rather than a
/// literal: a call, a member path, a type, a variable named like the key,
/// a file path, or a small number.
fn is_code(value: &str, after: &str, key: &str) -> bool {
    static CODE: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
        super::compile(concat!(
            r"^(?:",
            // a call: getpass(), os.getenv("PW"), Secret::new(…)
            r"[A-Za-z_$][\w$]*(?:(?:\.|::|->|\?\.)[A-Za-z_$][\w$]*)*(?:<[^>]*>)?[ \t]*\(.*",
            // a member path or index: self.password, process.env.TOKEN, ENV['X']
            r"|[A-Za-z_$][A-Za-z_$]*[0-9]?(?:(?:\.|::|->|\?\.)[A-Za-z_$][A-Za-z_$]*[0-9]?)+(?:[\[;,) \t].*)?",
            r"|[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*\[.*",
            // a keyword that starts an expression
            r"|(?:new|await|yield|typeof|function|fn|lambda|async|move|ref|mut|dyn|impl|const|static|let|var)[ \t].*",
            // a type: &str, &'a [u8], *const u8, Option<String>, String, string | null
            r"|&.*|\*(?:const|mut)[ \t].*|[A-Z][A-Za-z]*<.*",
            r"|(?:str|string|bool|boolean|int|integer|number|float|double|bytes|char|any|unknown|object|void|[iu](?:8|16|32|64|128|size))(?:[ \t]*[|,;)=].*)?",
            r"|[A-Z][a-z]+(?:[A-Z][a-z]*)*(?:[ \t]*[|,;)=].*)?",
            // a file path
            r"|(?:~|\.{1,2})?/[\w./-]*|[A-Za-z]:\\.*",
            // a version or a decimal
            r"|\d+\.\d+(?:\.\d+)*",
            r")$",
        ))
    });
    if CODE.as_ref().is_some_and(|code| code.is_match(value)) {
        return true;
    }
    let lower = value.to_ascii_lowercase();
    let identifier = !lower.is_empty()
        && lower.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_')
        && lower.len() <= 40;
    // A variable named like a secret (`password: password`,
    // `token = accessToken`, `secret=client_secret`; not `monkey`), or one
    // passed as an argument (`connect(password=pw)`).
    let compound = value.contains('_')
        || value
            .as_bytes()
            .windows(2)
            .any(|pair| pair[0].is_ascii_lowercase() && pair[1].is_ascii_uppercase());
    let names_a_secret = SECRET_WORDS.contains(&lower.as_str())
        || (compound && SECRET_WORDS.iter().any(|word| lower.contains(word)));
    if identifier && (names_a_secret || after.starts_with([',', ')'])) {
        return true;
    }
    // A number is a password only where a password is asked for, and
    // only from four digits on (`"pass": 12` counts tests).
    if lower.bytes().all(|b| b.is_ascii_digit()) {
        return !(is_password_key(key) && lower.len() >= 4);
    }
    false
}

/// `<password>…</password>`, `<db:secret>…</db:secret>`, also with
/// attributes and CDATA.
fn xml_element_pattern() -> String {
    format!(
        r"(?i)<(?:[A-Za-z_][\w.-]*:)?{key}(?:\s[^<>]*)?>(?:<!\[CDATA\[(?P<cdata>.*?)\]\]>|(?P<text>[^<]+))</",
        key = key_pattern()
    )
}

/// `<add key="Password" value="…"/>`, `<property name="db.password"
/// value="…"/>`, `<string name="api_key">…</string>`.
fn xml_named_pattern() -> String {
    format!(
        r#"(?i)(?-u:\b)(?:key|name)\s*=\s*"(?:[A-Za-z_][\w.-]*:)?{key}"(?:\s+value\s*=\s*"(?P<value>[^"]*)"|[^<>]*>(?P<text>[^<]+)</)"#,
        key = key_pattern()
    )
}

fn xml(text: &str, captures: &Captures<'_>) -> Decision {
    let Some(key) = captures.name("key") else {
        return keep_from(captures);
    };
    let keep = Decision::Keep { resume: key.end() };
    if !is_secret_key(&key, captures.name("short")) {
        return keep;
    }
    let value = ["cdata", "value", "text"]
        .iter()
        .find_map(|name| captures.name(name));
    match value.and_then(|value| secret_part(text, value.range(), key.as_str())) {
        Some(range) => replace(range),
        None => keep,
    }
}

/// A header line (`Authorization: Digest username="ada", response="…"`,
/// `Set-Cookie: id=…; Path=/`, also as `curl -v` prints them after `> `
/// or `< `): the whole rest of the line is the value, quotes included.
const HEADER_LINE: &str = r"(?im)^[ \t]*(?:[<>*][ \t]+)?(?P<key>(?:proxy-)?authorization|(?:set-)?cookie)[ \t]*:[ \t]*(?P<value>[^\r\n]*[^\s])";

fn header_line(text: &str, captures: &Captures<'_>) -> Decision {
    let (Some(key), Some(value)) = (captures.name("key"), captures.name("value")) else {
        return keep_from(captures);
    };
    match secret_part(text, value.range(), key.as_str()) {
        Some(range) => replace(range),
        None => keep_from(captures),
    }
}

/// `--password hunter2`, `--api-key "…"` on a command line (the `=` form
/// is a key/value pair).
fn command_line_pattern() -> String {
    format!(
        r#"(?im)(?:^|[ \t])--?{key}[ \t]+(?:"(?P<dq>[^"\r\n]*)"|'(?P<sq>[^'\r\n]*)'|(?P<bare>[^\s"'\-][^\s]*))"#,
        key = key_pattern()
    )
}

fn command_line(text: &str, captures: &Captures<'_>) -> Decision {
    let Some(key) = captures.name("key") else {
        return keep_from(captures);
    };
    let keep = Decision::Keep { resume: key.end() };
    if !is_secret_key(&key, captures.name("short")) {
        return keep;
    }
    let Some(value) = ["dq", "sq", "bare"]
        .iter()
        .find_map(|name| captures.name(name))
    else {
        return keep;
    };
    match secret_part(text, value.range(), key.as_str()) {
        Some(range) => replace(range),
        None => keep,
    }
}

/// `.netrc`: `machine api.example.com login ada password hunter2`, on one
/// line or several.
const NETRC: &str = r"(?i)(?-u:\b)(?:machine[ \t]+\S+|default)(?:\s+(?:login|account|port|protocol)[ \t]+\S+)*\s+password[ \t]+(?P<value>\S+)";

fn netrc(text: &str, captures: &Captures<'_>) -> Decision {
    match captures
        .name("value")
        .and_then(|value| secret_part(text, value.range(), "password"))
    {
        Some(range) => replace(range),
        None => keep_from(captures),
    }
}

/// SQL that sets a password: `CREATE USER … WITH PASSWORD '…'`,
/// `ALTER USER … IDENTIFIED BY '…'`.
const SQL_PASSWORD: &str = r#"(?i)(?-u:\b)(?:with[ \t]+(?:encrypted[ \t]+)?password|identified[ \t]+(?:with[ \t]+\w+[ \t]+)?by(?:[ \t]+password)?)[ \t]+(?:'(?P<sq>(?:[^'\\\r\n]|''|\\.)*)'|"(?P<dq>[^"\r\n]*)")"#;

fn sql_password(text: &str, captures: &Captures<'_>) -> Decision {
    match ["sq", "dq"]
        .iter()
        .find_map(|name| captures.name(name))
        .and_then(|value| secret_part(text, value.range(), "password"))
    {
        Some(range) => replace(range),
        None => keep_from(captures),
    }
}

/// The password of a (user, password) pair given to an HTTP client:
/// `auth=("ada", "…")` (Python requests), `basic_auth: ['ada', '…']`.
const AUTH_PAIR: &str = r#"(?i)(?-u:\b)(?:[a-z_]*auth|credentials)["']?[ \t]*(?:=|:|=>)[ \t]*[(\[][ \t]*(?:"[^"\r\n]*"|'[^'\r\n]*'|[A-Za-z_][\w.]*)[ \t]*,[ \t]*(?:"(?P<dq>[^"\r\n]*)"|'(?P<sq>[^'\r\n]*)')"#;

/// Signatures and session tokens in a URL's query: presigned S3 and GCS
/// links, Azure SAS tokens.
const URL_SIGNATURE: &str = r#"(?i)[?&](?:x-amz-signature|x-amz-security-token|x-goog-signature|sig|signature)=(?P<value>[^&#\s"'<>\\]+)"#;

/// The first of `names` that took part in the match, as a replacement of
/// its contents (when they are a secret).
fn replace_group(text: &str, captures: &Captures<'_>, names: &[&str], key: &str) -> Decision {
    match names
        .iter()
        .find_map(|name| captures.name(name))
        .and_then(|value| secret_part(text, value.range(), key))
    {
        Some(range) => replace(range),
        None => keep_from(captures),
    }
}

fn auth_pair(text: &str, captures: &Captures<'_>) -> Decision {
    replace_group(text, captures, &["dq", "sq"], "password")
}

fn url_signature(text: &str, captures: &Captures<'_>) -> Decision {
    replace_group(text, captures, &["value"], "signature")
}

fn patterns() -> Vec<(String, Decide)> {
    vec![
        (AUTH_PAIR.to_owned(), auth_pair as Decide),
        (URL_SIGNATURE.to_owned(), url_signature),
        (SQL_PASSWORD.to_owned(), sql_password),
        (HEADER_LINE.to_owned(), header_line),
        (xml_element_pattern(), xml),
        (xml_named_pattern(), xml),
        (NETRC.to_owned(), netrc),
        (command_line_pattern(), command_line),
        (key_value_pattern(), key_value),
    ]
}

/// The rules of this module, in the order they run.
pub(super) static RULES: LazyLock<Vec<CheckedRule>> = LazyLock::new(|| {
    patterns()
        .into_iter()
        .filter_map(|(pattern, decide)| CheckedRule::new(&pattern, decide))
        .collect()
});

/// How many rules this module defines (for the tests).
#[cfg(test)]
pub(super) fn rule_count() -> usize {
    patterns().len()
}
