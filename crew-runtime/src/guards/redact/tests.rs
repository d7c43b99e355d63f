//! The redactor's unit tests: one format or guarantee each.

use super::*;

fn redact(text: &str) -> String {
    SecretRedactor::new().redact(text).into_owned()
}

#[test]
fn every_built_in_pattern_compiles() {
    let checked = patterns::CHECKED_COUNT + key_value::rule_count() + files::CHECKED_COUNT;
    // gitleaks' set and the CSV columns among the inner rules; joined
    // literals and base64 runs around them.
    assert_eq!(INNER_RULES.len(), patterns::LABELLED.len() + checked + 2);
    assert_eq!(BUILT_IN_RULES.len(), INNER_RULES.len() + 3);
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

/// Each case: a shape, and exactly what the redactor makes of it.
fn assert_redacts(cases: &[(&str, &str)]) {
    for (text, expected) in cases {
        assert_eq!(redact(text), *expected, "{text}");
        let again = SecretRedactor::new().redact(expected);
        assert!(
            matches!(again, Cow::Borrowed(_)),
            "a second pass changes {expected:?}"
        );
    }
}

#[test]
fn keys_in_any_case_style_and_format() {
    assert_redacts(&[
        (
            r#"{"dbPassword": "Tr0ub4dor&3", "dbPort": 5432}"#,
            r#"{"dbPassword": "[REDACTED]", "dbPort": 5432}"#,
        ),
        (
            "PGPASSWORD=pg_x7Hq2 psql -h db",
            "PGPASSWORD=[REDACTED] psql -h db",
        ),
        (
            "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzKq4",
            "export AWS_SECRET_ACCESS_KEY=[REDACTED]",
        ),
        ("DB_PASS=Pa55-word1", "DB_PASS=[REDACTED]"),
        ("SECRET_KEY_BASE=9f8e7d6c5b4a", "SECRET_KEY_BASE=[REDACTED]"),
        ("X-Api-Key: k3y-V4lue-99", "X-Api-Key: [REDACTED]"),
        (
            "database:\n  password: correct horse battery staple\n  host: db",
            "database:\n  password: [REDACTED]\n  host: db",
        ),
        (
            "smtp:\n  password: m41l-pw  # rotated",
            "smtp:\n  password: [REDACTED]  # rotated",
        ),
        (
            "<server><password>mvn-S3cret</password></server>",
            "<server><password>[REDACTED]</password></server>",
        ),
        (
            r#"<add key="ClientSecret" value="a1B2c3D4e5" />"#,
            r#"<add key="ClientSecret" value="[REDACTED]" />"#,
        ),
        (
            "Server=db;User ID=app;Password=Az!x9q;Encrypt=True;",
            "Server=db;User ID=app;Password=[REDACTED];Encrypt=True;",
        ),
        (
            "db:\n  password: |\n    two lines\n    of secret\n  host: db",
            "db:\n  password: |\n    [REDACTED]\n  host: db",
        ),
        (
            "mysqladmin --password hunter2x status",
            "mysqladmin --password [REDACTED] status",
        ),
        (
            "machine api.example.org login ada password n3trc-pw",
            "machine api.example.org login ada password [REDACTED]",
        ),
        (
            "CREATE USER app WITH PASSWORD 'sql-pw-1';",
            "CREATE USER app WITH PASSWORD '[REDACTED]';",
        ),
        (
            r#"requests.get(url, auth=("ada", "tuple-pw-1"))"#,
            r#"requests.get(url, auth=("ada", "[REDACTED]"))"#,
        ),
    ]);
}

#[test]
fn headers_keep_their_scheme_and_urls_their_user_and_host() {
    assert_redacts(&[
        (
            "Authorization: Basic YWRhOmh1bnRlcjI=",
            "Authorization: Basic [REDACTED]",
        ),
        (
            "Authorization: Token 9f8e7d6c5b4a3210",
            "Authorization: Token [REDACTED]",
        ),
        (
            r#"Authorization: Digest username="ada", response="6629fae4""#,
            "Authorization: Digest [REDACTED]",
        ),
        (
            "Cookie: theme=dark; sessionid=abc123def456",
            "Cookie: [REDACTED]",
        ),
        (
            "Set-Cookie: id=a3fWa; Path=/; HttpOnly",
            "Set-Cookie: [REDACTED]",
        ),
        (
            "postgres://app:pgPw-7Hq2@db.internal:5432/app",
            "postgres://app:[REDACTED]@db.internal:5432/app",
        ),
        (
            "redis://:rds-pw-99@cache:6379/0",
            "redis://:[REDACTED]@cache:6379/0",
        ),
        (
            "postgresql://report:p@ss-w0rd@db/reports",
            "postgresql://report:[REDACTED]@db/reports",
        ),
        (
            "https://x.s3.amazonaws.com/a.pdf?X-Amz-Date=20240611&X-Amz-Signature=9f8e7d6c",
            "https://x.s3.amazonaws.com/a.pdf?X-Amz-Date=20240611&X-Amz-Signature=[REDACTED]",
        ),
    ]);
}

#[test]
fn private_key_blocks_go_whole_even_when_cut_off() {
    assert_redacts(&[
        (
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\nlQOYBF4k\n=ab12\n-----END PGP PRIVATE KEY BLOCK-----",
            "[PRIVATE-KEY-REDACTED]",
        ),
        (
            "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7Hq2\nZq9xY8wV7u... (truncated)",
            "key:\n[PRIVATE-KEY-REDACTED]... (truncated)",
        ),
        (
            r#"{"private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN\nBgkqhkiG9w0B", "n": 1}"#,
            r#"{"private_key": "[PRIVATE-KEY-REDACTED]", "n": 1}"#,
        ),
    ]);
}

#[test]
fn gitleaks_findings_replace_the_whole_token_only() {
    assert_redacts(&[
        (
            "runner token glpat-Xk3mP9qR2sT5vW8yZ1aBcD4e today",
            "runner token [REDACTED] today",
        ),
        (
            "key dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.",
            "key [REDACTED].",
        ),
        (
            r#"{"npm": "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"}"#,
            r#"{"npm": "[REDACTED]"}"#,
        ),
    ]);
}

#[test]
fn code_placeholders_and_look_alikes_stay() {
    for text in [
        "fn login(user: &str, password: &str) -> bool",
        "pub api_key: Option<String>,",
        "let token = std::env::var(\"TOKEN\")?;",
        "password = getpass.getpass(\"Password: \")",
        "const apiKey = process.env.STRIPE_API_KEY;",
        "headers = {\"Authorization\": f\"Bearer {token}\"}",
        "this.apiKey = apiKey;",
        "api_key: ${API_KEY}",
        "password: \"{{ vault_db_password }}\"",
        "STRIPE_API_KEY=<your-stripe-key>",
        "Password: ********",
        "{\"password\": \"\", \"token\": null}",
        "{\"nextPageToken\": \"CiAKGjBpNDd2\", \"max_tokens\": 1024}",
        "deploy ALL=(ALL) NOPASSWD: /usr/bin/systemctl",
        "PWD=/home/ada/projects",
        "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf",
        "git@github.com:acme/api.git",
        "The bearer authentication scheme sends a token-based credential.",
        "Access-Control-Allow-Credentials: true",
        "WARN token: expired, refreshing",
        "fetch(url, { credentials: \"include\" })",
    ] {
        assert!(
            matches!(SecretRedactor::new().redact(text), Cow::Borrowed(_)),
            "changed: {text}"
        );
    }
}

#[test]
fn the_debug_form_names_the_rule_set_release() {
    let debug = format!("{:?}", SecretRedactor::new());
    assert!(debug.contains("gitleaks v8.30.1 (220 rules"), "{debug}");
}

#[test]
fn yaml_values_on_the_lines_after_their_key_go() {
    let cases = [
        (
            "db:\n  password:\n    hunter2secret\n  host: db",
            "db:\n  password:\n    [REDACTED]\n  host: db",
        ),
        (
            "password:\n  \"quoted value\"\nuser: ada",
            "password:\n  \"[REDACTED]\"\nuser: ada",
        ),
        (
            "- name: ci\n  token:\n    part-one\n    part-two\n- name: ada",
            "- name: ci\n  token:\n    [REDACTED]\n- name: ada",
        ),
        (
            "secret: >- # rotated\n  folded\n  lines\nnext: 1",
            "secret: >- # rotated\n  [REDACTED]\nnext: 1",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(redact(text), expected, "{text}");
    }
    // A mapping, a list, an alias or a Makefile recipe below the key is
    // no value; nor is prose that ends a line with a key-like word.
    for text in [
        "password:\n  type: string",
        "token:\n  - one\n  - two",
        "password:\n  *db_password",
        "token:\n\t./print-token.sh",
        "Error: invalid token:\n  the signature does not match",
    ] {
        assert!(
            matches!(SecretRedactor::new().redact(text), Cow::Borrowed(_)),
            "{text}"
        );
    }
}

#[test]
fn tokens_known_by_shape_get_their_label() {
    let cases = [
        (
            "HF hf_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3f ok",
            "HF [HUGGING-FACE-TOKEN-REDACTED] ok",
        ),
        (
            "api_org_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3f",
            "[HUGGING-FACE-TOKEN-REDACTED]",
        ),
        (
            "run('MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs')",
            "run('[DISCORD-TOKEN-REDACTED]')",
        ),
        (
            "https://discord.com/api/v10/webhooks/123456789012345678/aBcDeFgHiJkLmNoPqRsTuVwXyZ012345",
            "https://discord.com/api/v10/webhooks/123456789012345678/[REDACTED]",
        ),
        (
            r#"{"private_key_id": "0123456789abcdef0123456789abcdef01234567"}"#,
            r#"{"private_key_id": "[REDACTED]"}"#,
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(redact(text), expected, "{text}");
    }
    // A dotted id whose first part is no snowflake id is no Discord token.
    let dotted = "QWxwaGFCZXRhR2FtbWFEZWx0YUVw.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs";
    assert_eq!(redact(dotted), dotted);
}

#[test]
fn an_aws_secret_goes_by_its_place_next_to_the_key_id() {
    let cases = [
        (
            "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "[AWS-KEY-REDACTED] [REDACTED]",
        ),
        (
            "Access key ID,Secret access key\nAKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "Access key ID,Secret access key\n[AWS-KEY-REDACTED],[REDACTED]",
        ),
        (
            "User name,Password,Console login link\nada,Pa55-w0rd!x,https://123.signin.aws.amazon.com/console",
            "User name,Password,Console login link\nada,[REDACTED],https://123.signin.aws.amazon.com/console",
        ),
        (
            "AWS Secret Access Key [None]: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "AWS Secret Access Key [None]: [REDACTED]",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(redact(text), expected, "{text}");
    }
}

#[test]
fn credential_files_lose_their_passwords() {
    let cases = [
        (
            "db.internal:5432:app:ada:s3cret",
            "db.internal:5432:app:ada:[REDACTED]",
        ),
        ("*:*:*:replicator:r3pl-pw", "*:*:*:replicator:[REDACTED]"),
        (
            "ada:$6$salt$abcdefghijklmnop:19876:0:99999:7:::",
            "ada:[REDACTED]:19876:0:99999:7:::",
        ),
        (
            "admin:$apr1$abcd$efghijklmnopqrstuvwxyz",
            "admin:[REDACTED]",
        ),
        ("requirepass foobared-2024", "requirepass [REDACTED]"),
    ];
    for (text, expected) in cases {
        assert_eq!(redact(text), expected, "{text}");
    }
    for text in [
        "root:x:0:0:root:/root:/bin/bash",
        "12:30:45 started",
        "fe80:0:0:0:1",
        "localhost:6379:0:info:connected",
        "nobody:!:19500::::::",
    ] {
        assert!(
            matches!(SecretRedactor::new().redact(text), Cow::Borrowed(_)),
            "{text}"
        );
    }
}

#[test]
fn base64_runs_and_joined_literals_are_looked_inside() {
    use base64::Engine as _;
    let env_line =
        encoded::STANDARD.encode("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
    assert_eq!(
        redact(&format!("data: {env_line}")),
        "data: [BASE64-SECRET-REDACTED]"
    );
    assert_eq!(
        redact(r#"const t = "ghp_R2d2C3po" + "Bb8Kx9Lm4Np7Qr1St5Uv6Wx0YzAa";"#),
        r#"const t = "[REDACTED]" + "[REDACTED]";"#
    );
    let harmless = encoded::STANDARD.encode("the quick brown fox jumps over the lazy dog");
    assert_eq!(redact(&harmless), harmless);
}

#[test]
fn package_versions_are_not_secrets() {
    for text in [
        r#"{"dependencies": {"jsonwebtoken": "^9.0.2", "cookie": "0.6.0"}}"#,
        r#""js-cookie": "~3.0.5", "csrf-token": "latest""#,
        r#"jsonwebtoken = "9.3""#,
        r#""tough-cookie": ">=4.1.3 <5""#,
    ] {
        assert!(
            matches!(SecretRedactor::new().redact(text), Cow::Borrowed(_)),
            "{text}"
        );
    }
    // A password is a password, whatever it looks like.
    assert_eq!(
        redact(r#"{"password": "1.2.3"}"#),
        r#"{"password": "[REDACTED]"}"#
    );
}
