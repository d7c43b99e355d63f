//! The redactor's unit tests: one format or guarantee each.

use super::*;

fn redact(text: &str) -> String {
    SecretRedactor::new().redact(text).into_owned()
}

#[test]
fn every_built_in_pattern_compiles() {
    let checked = patterns::CHECKED_COUNT + key_value::rule_count();
    assert_eq!(BUILT_IN_RULES.len(), patterns::LABELLED.len() + checked + 1);
    assert!(SecretRedactor::new().pattern_count() > 200);
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
