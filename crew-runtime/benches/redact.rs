//! What redacting a large tool result costs.
//!
//! The text is ordinary tool output (access logs, JSON with ids and
//! escapes, code, prose with non-ASCII letters, a YAML manifest) repeated
//! to the size wanted, with a secret of a different kind every 64 KiB (a
//! GitHub token, a password in a URL, a JSON `"apiKey"`, a PEM block, …),
//! so every kind of rule has work: the fixed formats, gitleaks' rules whose
//! keywords occur, the key/value rules and the e-mail rule.
//!
//! Printed: the first `SecretRedactor::new()` of the process (the fixed
//! rules compile, gitleaks' file is parsed), the first `redact()` and a
//! later `new()` (a reference count), then the throughput on 1 MiB (median of
//! `RUNS`), and the linearity check: the time for 4 MiB over the time for
//! 1 MiB (4.00 means linear). Run with
//! `cargo bench -p crew-runtime --bench redact`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crew_runtime::guards::SecretRedactor;

const MIB: usize = 1 << 20;
const RUNS: usize = 7;
const SECRET_EVERY: usize = 64 * 1024;

const ORDINARY: &[&str] = &[
    r#"10.0.3.7 - - [11/Jun/2024:09:12:44 +0000] "GET /api/v1/orders?page=2&per_page=50 HTTP/1.1" 200 5123 "-" "Mozilla/5.0""#,
    r#"{"id": "3f8e2a4c-9b1d-4e7f-a2c3-5d6e7f8a9b0c", "order_id": 48213, "status": "shipped", "note": "caf\u00e9 \/ ok", "usage": {"prompt_tokens": 812, "max_tokens": 1024}}"#,
    "2024-06-11T09:12:44.512Z INFO request_id=7c1e0f4a-2b3d-4c5e-8f9a-0b1c2d3e4f5a method=POST path=/v1/charges status=201 duration_ms=182",
    "fn login(user: &str, password: &str) -> Result<Session, AuthError> { let token = issue_token(user)?; Ok(Session { token }) }",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 Merge pull request #812 from acme/tokens: rotate the session key handling",
    "Ça marche très bien — 東京 の天気は晴れ。The bearer authentication scheme sends the token in every request.",
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n        - name: api\n          image: ghcr.io/acme/api@sha256:5d41402abc4b2a76b9719d911017c592e3b0c44298fc1c149afbf4c8996fb924",
    "const apiKey = process.env.STRIPE_API_KEY; const res = await fetch(url, { credentials: \"include\" });",
    "Traceback (most recent call last):\n  File \"/app/auth.py\", line 42, in verify\n    raise InvalidToken(\"token signature mismatch\")",
];

const SECRETS: &[&str] = &[
    "GH_TOKEN=ghp_R2d2C3poBb8Kx9Lm4Np7Qr1St5Uv6Wx0YzAa",
    "DATABASE_URL=postgres://app:pgPw-7Hq2mXv9Lr@db.internal:5432/app",
    r#"{"service": "geo", "apiKey": "Zq9xY8wV7uT6sR5qP4oN3mL2kJ1iH0gF"}"#,
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7Hq2mXv9LrZq9xY8wV7uT6sR5qP4oN3mL2kJ1iH0gFfEdCbA\n-----END RSA PRIVATE KEY-----",
    "Authorization: Basic YWRhOmh1bnRlcjItN0hxMm1Ydjk=",
    "export GITLAB_TOKEN=glpat-Xk3mP9qR2sT5vW8yZ1aB",
    "password: correct horse battery staple",
    "STRIPE_KEY=sk_live_4eC39HqLyjWDarjtT1zdp7dc",
];

/// `bytes` of ordinary text with one secret every `SECRET_EVERY` bytes;
/// returns the text and how many secrets it holds.
fn mixed_text(bytes: usize) -> (String, usize) {
    let mut text = String::with_capacity(bytes + 4096);
    let mut next_secret = SECRET_EVERY / 2;
    let mut secrets = 0;
    let mut n = 0;
    while text.len() < bytes {
        if text.len() >= next_secret {
            text.push_str(SECRETS[secrets % SECRETS.len()]);
            text.push('\n');
            secrets += 1;
            next_secret += SECRET_EVERY;
        }
        text.push_str(ORDINARY[n % ORDINARY.len()]);
        text.push('\n');
        n += 1;
    }
    (text, secrets)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn time(redactor: &SecretRedactor, text: &str, runs: usize) -> Duration {
    let times = (0..runs)
        .map(|_| {
            let start = Instant::now();
            black_box(redactor.redact(black_box(text)));
            start.elapsed()
        })
        .collect();
    median(times)
}

fn main() {
    let start = Instant::now();
    let redactor = SecretRedactor::new();
    let first_new = start.elapsed();
    let start = Instant::now();
    black_box(redactor.redact("warm-up: an ordinary text names few rules' keywords"));
    let first_redact = start.elapsed();
    let start = Instant::now();
    for _ in 0..1000 {
        black_box(SecretRedactor::new());
    }
    let later_new = start.elapsed() / 1000;
    println!(
        "redact first SecretRedactor::new() {:.1} ms (the fixed rules compile; gitleaks' file is parsed, its rules wait for their keywords)",
        first_new.as_secs_f64() * 1e3
    );
    println!(
        "redact first redact() of an ordinary text {:.1} ms (gitleaks' rules without keywords compile)",
        first_redact.as_secs_f64() * 1e3
    );
    println!(
        "redact later SecretRedactor::new() {:.0} ns (a reference count)",
        later_new.as_secs_f64() * 1e9
    );
    let start = Instant::now();
    black_box(redactor.redact(&format!("{ORDINARY:?} ghp_R2d2{}", "a".repeat(32))));
    println!(
        "redact first redact() of ordinary tool output {:.1} ms (the rules whose keywords it names compile)",
        start.elapsed().as_secs_f64() * 1e3
    );

    let (one, secrets) = mixed_text(MIB);
    let (four, _) = mixed_text(4 * MIB);
    // The benchmark measures real work only if the secrets really go.
    let redacted = redactor.redact(&one);
    for needle in [
        "ghp_R2d2",
        "pgPw-7Hq2",
        "Zq9xY8wV7u",
        "MIIEpAIB",
        "glpat-Xk3",
        "horse",
        "sk_live_4e",
    ] {
        if redacted.contains(needle) {
            eprintln!("the benchmark text still shows {needle:?} after redaction");
            std::process::exit(1);
        }
    }
    println!(
        "text: {} bytes, {} secrets, {} bytes after redaction",
        one.len(),
        secrets,
        redacted.len()
    );

    let one_time = time(&redactor, &one, RUNS);
    let four_time = time(&redactor, &four, RUNS.div_ceil(2));
    let megabytes = one.len() as f64 / MIB as f64;
    println!(
        "redact 1MB {:.1} MB/s ({:.2} ms, median of {RUNS})",
        megabytes / one_time.as_secs_f64(),
        one_time.as_secs_f64() * 1e3
    );
    let ratio = (four_time.as_secs_f64() / four.len() as f64)
        / (one_time.as_secs_f64() / one.len() as f64)
        * 4.0;
    println!("redact linearity 4MB/1MB time ratio {ratio:.2} (4.00 = linear)");
}
