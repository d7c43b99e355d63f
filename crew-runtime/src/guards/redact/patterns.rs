//! Fixed formats: the labelled token formats, private-key blocks, `Bearer`
//! credentials, passwords in URLs, and e-mail addresses.
//!
//! Word boundaries are ASCII (`(?-u:\b)`): a Unicode boundary would let a
//! letter such as `é` glue itself to a token (`ésk-…` would not match), and
//! it makes the regex engine give up its fast path on non-ASCII text.

use std::sync::LazyLock;

use regex::Captures;

use super::{CheckedRule, Decision, REDACTED};

/// A PEM or PGP private-key block. Whole (`BEGIN` to `END`, with no `"`
/// in between, so inside a JSON string it stays in that string), or cut
/// off: the `BEGIN` line and every line after it that is base64 or a
/// `Header: value` line (`Proc-Type`, `DEK-Info`, `Version`), line breaks
/// real or JSON-escaped.
const PRIVATE_KEY_BLOCK: &str = concat!(
    r"-----BEGIN[A-Z0-9 _-]*PRIVATE KEY(?: BLOCK)?-----",
    r"(?:",
    r#"[^"]*?-----END[A-Z0-9 _-]*PRIVATE KEY(?: BLOCK)?-----"#,
    r"|",
    r"(?:(?:[ \t]*(?:\r?\n|\\r\\n|\\n)[ \t]*)(?:[A-Za-z0-9+/=]+|[A-Za-z][A-Za-z0-9-]*:[ \t][^\r\n\x22\\]*)?",
    r"|[ \t]+[A-Za-z0-9+/=]{16,})*",
    r")",
);

/// The private part of a PuTTY key file (`.ppk`): `Private-Lines: N`,
/// the base64 lines after it, and the `Private-MAC` line.
const PUTTY_PRIVATE_LINES: &str = concat!(
    r"Private-Lines:[ \t]*\d+(?:(?:\r?\n|\\r\\n|\\n)",
    r"(?:Private-(?:MAC|Hash):[ \t]*[0-9A-Fa-f]+|[A-Za-z0-9+/=]+))+",
);

/// The formats replaced by a label of their own, most specific first: a
/// token inside a `Bearer …` header or an `api_key=…` pair keeps its own
/// label.
pub(super) const LABELLED: &[(&str, &str)] = &[
    (PRIVATE_KEY_BLOCK, "[PRIVATE-KEY-REDACTED]"),
    (PUTTY_PRIVATE_LINES, "[PRIVATE-KEY-REDACTED]"),
    (
        r"(?-u:\b)eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*",
        "[JWT-REDACTED]",
    ),
    (r"(?-u:\b)sk-[A-Za-z0-9_-]{20,}", "[OPENAI-KEY-REDACTED]"),
    // An AWS key id and the secret that follows it (the second column of
    // the console's `accessKeys.csv`, the text output of `aws iam
    // create-access-key` with its date in between, `id secret` pairs): the
    // secret has no shape of its own but its place next to the id.
    (
        concat!(
            r#"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}"#,
            r#"(?P<between>"?[ \t]*[\t ,;:|][ \t]*"?(?:\d{4}-\d{2}-\d{2}T[0-9:.+-]+Z?"?[ \t]*[\t ,;|][ \t]*"?)?)"#,
            r"[A-Za-z0-9/+]{40}(?P<after>[^A-Za-z0-9/+=]|$)",
        ),
        "[AWS-KEY-REDACTED]${between}[REDACTED]${after}",
    ),
    // `aws configure` asking for the secret: `AWS Secret Access Key [None]: …`.
    (
        r"(?i)(?P<prompt>secret access key(?:[ \t]*\[[^\]\r\n]*\])?:[ \t]*)[A-Za-z0-9/+]{40}",
        "${prompt}[REDACTED]",
    ),
    (
        r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?-u:\b)",
        "[AWS-KEY-REDACTED]",
    ),
    // Hugging Face user and organization tokens (gitleaks' rules allow
    // letters only; tokens hold digits too).
    (
        r"(?-u:\b)(?:hf|api_org)_[A-Za-z0-9]{34,}(?-u:\b)",
        "[HUGGING-FACE-TOKEN-REDACTED]",
    ),
    // A GCP service account's key id: with the account's e-mail it names
    // the key to use, and it is not meant to be public.
    (
        r#"(?i)(?P<key>private_key_id\\?["']?[ \t]*[:=][ \t]*\\?["']?)[0-9a-f]{40}(?-u:\b)"#,
        "${key}[REDACTED]",
    ),
    (
        r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
        "[GITHUB-TOKEN-REDACTED]",
    ),
    (
        r"(?-u:\b)xox[abposre]-[A-Za-z0-9-]{10,}",
        "[SLACK-TOKEN-REDACTED]",
    ),
    (r"(?-u:\b)AIza[0-9A-Za-z_-]{30,}", "[GOOGLE-KEY-REDACTED]"),
    // A Telegram bot token (`123456789:AA…`), also inside a bot API URL.
    (
        r"(?:(?-u:\b)|(?P<bot>/bot))[0-9]{8,10}:AA[A-Za-z0-9_-]{33}",
        "${bot}[REDACTED]",
    ),
    // A Discord webhook's token: the URL alone lets anyone post.
    // With or without a scheme, on any release channel, any API version.
    (
        r"(?i)(?P<url>(?-u:\b)(?:https?://)?(?:(?:ptb|canary|www)\.)?discord(?:app)?\.com/api(?:/v[0-9]+)?/webhooks/[0-9]+/)[A-Za-z0-9_-]{20,}",
        "${url}[REDACTED]",
    ),
];

/// `Bearer <token>`, any case. The token must hold a digit or one of
/// `_ / + ~ =`, so prose ("the bearer authentication scheme",
/// "token-based") is left alone.
const BEARER: &str = r"(?i)(?-u:\b)bearer[ \t]+(?P<token>[A-Za-z0-9._~+/=-]{8,})";

fn bearer(_: &str, captures: &Captures<'_>) -> Decision {
    let Some(token) = captures.name("token") else {
        return keep_after(captures);
    };
    let looks_like_token = token
        .as_str()
        .bytes()
        .any(|b| b.is_ascii_digit() || b"_/+~=".contains(&b));
    if looks_like_token {
        Decision::Replace {
            range: token.range(),
            label: REDACTED,
            quote: None,
        }
    } else {
        keep_after(captures)
    }
}

/// `scheme://user:password@host`: the password goes, user and host stay.
/// The password may hold `@` (the last one before the host counts), not
/// `/`, `?`, `#` or whitespace.
const URL_USERINFO: &str = concat!(
    r"(?i)(?-u:\b)[a-z][a-z0-9+.-]{1,30}://",
    r#"[^:@/\s"'<>\\?#\[\]]*:(?P<password>[^/\s"'<>\\?#]+)@[^@/\s"'<>\\?#:]+"#,
);

fn url_userinfo(_: &str, captures: &Captures<'_>) -> Decision {
    match captures.name("password") {
        Some(password) if !super::key_value::is_placeholder(password.as_str()) => {
            Decision::Replace {
                range: password.range(),
                label: REDACTED,
                quote: None,
            }
        }
        _ => keep_after(captures),
    }
}

/// A Discord bot token: three base64url parts, the first the base64 of
/// the bot's snowflake id (17 to 20 digits, 23 to 27 characters; padded
/// by some encoders), then a timestamp (6 characters) and an HMAC (27 in
/// older tokens, 38 in newer ones; the whole run is taken, so a longer
/// one leaves nothing behind).
///
/// No word boundary before it: after a JSON escape (`\nMTk…`, `\tMTk…`)
/// or glued to a name, the token would be missed. The first part must
/// decode to a snowflake id instead, and a match that starts inside a
/// longer run is retried one character on.
const DISCORD_BOT_TOKEN: &str =
    r"(?P<id>[MNO][A-Za-z0-9_-]{22,26}={0,2})\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{25,}";

/// Only a first part that decodes to a snowflake id makes a token, so a
/// dotted identifier of the same shape stays.
fn discord_bot_token(_: &str, captures: &Captures<'_>) -> Decision {
    use base64::Engine as _;
    let is_snowflake = captures.name("id").is_some_and(|id| {
        super::encoded::URL_SAFE
            .decode(id.as_str())
            .is_ok_and(|digits| {
                (16..=20).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit)
            })
    });
    if is_snowflake {
        Decision::Replace {
            range: captures.get_match().range(),
            label: "[DISCORD-TOKEN-REDACTED]",
            quote: None,
        }
    } else {
        // The id may start one character further on (`xMTk…`, `_MTk…`).
        Decision::Keep { resume: 0 }
    }
}

const EMAIL: &str = r"(?-u:\b)[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}(?-u:\b)";

/// An address followed by `:path` is an scp-style remote
/// (`git@github.com:org/repo.git`), not an e-mail address.
fn email(text: &str, captures: &Captures<'_>) -> Decision {
    let whole = captures.get_match();
    let mut rest = text[whole.end()..].chars();
    if rest.next() == Some(':') && rest.next().is_some_and(|c| !c.is_whitespace()) {
        return keep_after(captures);
    }
    Decision::Replace {
        range: whole.range(),
        label: "[EMAIL-REDACTED]",
        quote: None,
    }
}

fn keep_after(captures: &Captures<'_>) -> Decision {
    Decision::Keep {
        resume: captures.get_match().end(),
    }
}

/// The checked rules that run before gitleaks' rules.
pub(super) static BEFORE_RULE_SET: LazyLock<Vec<CheckedRule>> = LazyLock::new(|| {
    [
        (BEARER, bearer as super::Decide),
        (URL_USERINFO, url_userinfo),
        (DISCORD_BOT_TOKEN, discord_bot_token),
    ]
    .into_iter()
    .filter_map(|(pattern, decide)| CheckedRule::new(pattern, decide))
    .collect()
});

/// The checked rules that run last: e-mail addresses (after the key/value
/// rules, so `password: ada@example.com` is one `[REDACTED]`).
pub(super) static AFTER_KEY_VALUES: LazyLock<Vec<CheckedRule>> = LazyLock::new(|| {
    CheckedRule::new(EMAIL, email as super::Decide)
        .into_iter()
        .collect()
});

/// How many checked rules this module defines (for the tests).
#[cfg(test)]
pub(super) const CHECKED_COUNT: usize = 4;
