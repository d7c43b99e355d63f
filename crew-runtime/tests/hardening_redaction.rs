//! The redaction guarantee: with `SecretRedactor` registered as a
//! `POST_TOOL_CALL` hook, no secret of a tool's result reaches the model,
//! the crew's output, any event on the crew's or the global bus, any
//! `tracing` line, any later hook, any error message, or the verbose
//! console — in plain text, in JSON results, JSON-escaped or split by
//! escapes.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, PoisonError};

use common::*;
use crew_runtime::EventBus;
use crew_runtime::events::{
    HookDispatchedEvent, HookPanickedEvent, ToolUsageErrorEvent, ToolUsageFinishedEvent,
    ToolUsageStartedEvent,
};
use crew_runtime::guards::SecretRedactor;
use crew_runtime::prelude::*;
use serde::Serialize;

/// One secret: how it is written into results, and a distinctive part of
/// it that must never be seen again (not even partly, after the redactor
/// replaced its start).
struct Secret {
    written: &'static str,
    needle: &'static str,
}

const CORPUS: &[Secret] = &[
    Secret {
        written: "sk-ABCdef1234567890ghijKLMN",
        needle: "ABCdef1234567890ghij",
    },
    Secret {
        written: "sk-proj-Zq9_xY8-wV7uT6sR5qP4oN3mL2kJ",
        needle: "Zq9_xY8-wV7uT6sR5qP4",
    },
    Secret {
        written: "AKIAQWERTYUIOPASDFGH",
        needle: "QWERTYUIOPASDFGH",
    },
    Secret {
        written: "ghp_R2d2C3poBb8Kx9Lm4Np7Qr1St5Uv6Wx0YzAa",
        needle: "R2d2C3poBb8Kx9Lm4Np7",
    },
    Secret {
        written: "github_pat_11AAAAAAA0abcdefghijkl_MNOPQRSTUVWXYZabcdefghij",
        needle: "0abcdefghijkl_MNOPQR",
    },
    Secret {
        written: "xoxb-2048-4096-sLaCkSeCrEtVaLuE",
        needle: "sLaCkSeCrEtVaLuE",
    },
    Secret {
        written: "AIzaSyD-gOoGlEkEyVaLuE0123456789abcde",
        needle: "gOoGlEkEyVaLuE012345",
    },
    Secret {
        written: "Bearer aB3/cD4+eF5/gH6.iJ7_kL8~mN9=",
        needle: "cD4+eF5/gH6.iJ7",
    },
    Secret {
        written: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZGEifQ.c2lnbmF0dXJlU2VjcmV0",
        needle: "c2lnbmF0dXJlU2VjcmV0",
    },
    Secret {
        written: "ada.lovelace@analytical-engine.org",
        needle: "lovelace@analytical",
    },
];

/// Values of `key: value` pairs (the key/value rule's secrets).
const API_KEY_VALUE: &str = "k3yV4lu3-Secret_99";
const PASSWORD_VALUE: &str = "correct horse battery staple";
const SECRET_VALUE: &str = "s3cr3t-V@lue!x";
const TOKEN_VALUE: &str = "tkn-9f8e7d6c5b4a3210";
const CLIENT_SECRET_VALUE: &str = "cl13nt-s3cr3t-0987";

fn needles() -> Vec<&'static str> {
    CORPUS
        .iter()
        .map(|s| s.needle)
        .chain([
            API_KEY_VALUE,
            PASSWORD_VALUE,
            SECRET_VALUE,
            TOKEN_VALUE,
            CLIENT_SECRET_VALUE,
        ])
        .collect()
}

fn secret(prefix: &str) -> &'static str {
    CORPUS
        .iter()
        .map(|s| s.written)
        .find(|w| w.starts_with(prefix))
        .expect("the corpus has it")
}

/// A plain-text result with every secret, several per line.
fn plain_text() -> String {
    let mut text = String::from("Configuration dump\n");
    for pair in CORPUS.chunks(2) {
        let line: Vec<&str> = pair.iter().map(|s| s.written).collect();
        let _ = writeln!(text, "found: {} ", line.join(" and "));
    }
    let _ = writeln!(text, "api_key={API_KEY_VALUE}&region=eu");
    let _ = writeln!(text, "password: \"{PASSWORD_VALUE}\"");
    let _ = writeln!(text, "SECRET = '{SECRET_VALUE}'");
    let _ = writeln!(text, "token: {TOKEN_VALUE}");
    let _ = writeln!(text, "client_secret => {CLIENT_SECRET_VALUE}");
    text
}

/// A typed tool's result: secrets in fields, lists, maps and a JSON
/// document inside a string.
#[derive(Debug, Clone, Serialize)]
struct Record {
    api_key: String,
    password: String,
    secret: String,
    owner: String,
    openai: String,
    project_key: String,
    aws: String,
    github: Vec<String>,
    slack: String,
    google: String,
    headers: BTreeMap<String, String>,
    jwt: String,
    raw_config: String,
}

fn record() -> Record {
    Record {
        api_key: API_KEY_VALUE.into(),
        password: PASSWORD_VALUE.into(),
        secret: SECRET_VALUE.into(),
        owner: secret("ada.").into(),
        openai: secret("sk-ABC").into(),
        project_key: secret("sk-proj").into(),
        aws: secret("AKIA").into(),
        github: vec![secret("ghp_").into(), secret("github_pat_").into()],
        slack: secret("xoxb").into(),
        google: secret("AIza").into(),
        headers: BTreeMap::from([("Authorization".into(), secret("Bearer").into())]),
        jwt: secret("eyJ").into(),
        raw_config: serde_json::json!({
            "token": TOKEN_VALUE,
            "client_secret": CLIENT_SECRET_VALUE,
        })
        .to_string(),
    }
}

/// How a JSON renderer escapes the characters of strings.
#[derive(Debug, Clone, Copy)]
enum Escapes {
    /// Every character as `\uXXXX` (keys too): `ensure_ascii` taken to the
    /// end.
    Every,
    /// `/` as `\/`, as PHP and some .NET encoders write it.
    Slashes,
    /// Every fifth character as `\uXXXX` and `/` as `\/`: each secret is
    /// split by escapes.
    Split,
}

/// Renders JSON with strings escaped the `escapes` way (and the escapes
/// JSON requires).
fn render(value: &Value, escapes: Escapes, out: &mut String) {
    match value {
        Value::String(text) => write_string(text, escapes, out),
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                render(item, escapes, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (n, (key, item)) in members.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_string(key, escapes, out);
                out.push(':');
                render(item, escapes, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn write_string(text: &str, escapes: Escapes, out: &mut String) {
    out.push('"');
    for (n, ch) in text.chars().enumerate() {
        let escape = match escapes {
            Escapes::Every => true,
            Escapes::Slashes => false,
            Escapes::Split => n % 5 == 4,
        };
        if escape {
            let mut units = [0u16; 2];
            for unit in ch.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else if ch == '/' && !matches!(escapes, Escapes::Every) {
            out.push_str("\\/");
        } else if ch == '"' || ch == '\\' || ch < ' ' {
            let _ = write!(out, "\\u{:04x}", ch as u32);
        } else {
            out.push(ch);
        }
    }
    out.push('"');
}

fn record_tool(name: &str, escapes: Option<Escapes>) -> Tool {
    let tool = Tool::typed(name, "Reads the account record", |_: SearchArgs| {
        Ok::<_, String>(record())
    });
    match escapes {
        None => tool.into(),
        Some(escapes) => tool
            .with_formatter(move |record: &Record| {
                let mut out = String::new();
                let value = serde_json::to_value(record).unwrap_or_default();
                render(&value, escapes, &mut out);
                out
            })
            .into(),
    }
}

/// Every tool of the corpus: plain text, JSON in four escapings, a tool
/// that fails with secrets in its error, one that panics with them.
fn corpus_tools() -> Vec<Tool> {
    vec![
        Tool::typed("fetch_text", "Reads the config", |_: SearchArgs| {
            Ok::<_, String>(plain_text())
        })
        .into(),
        record_tool("fetch_record", None),
        record_tool("fetch_record_ascii", Some(Escapes::Every)),
        record_tool("fetch_record_slashes", Some(Escapes::Slashes)),
        record_tool("fetch_record_split", Some(Escapes::Split)),
        Tool::typed(
            "fetch_failing",
            "Fails",
            |_: SearchArgs| -> Result<String, String> {
                Err(format!(
                    "upstream refused {} for {}",
                    secret("sk-proj"),
                    secret("ada.")
                ))
            },
        )
        .into(),
        Tool::typed(
            "fetch_panicking",
            "Panics",
            |_: SearchArgs| -> Result<String, String> {
                panic!("bad credentials {} {}", secret("AKIA"), secret("ghp_"))
            },
        )
        .into(),
    ]
}

const TOOL_NAMES: [&str; 7] = [
    "fetch_text",
    "fetch_record",
    "fetch_record_ascii",
    "fetch_record_slashes",
    "fetch_record_split",
    "fetch_failing",
    "fetch_panicking",
];

/// Decodes JSON escapes anywhere in `text`, repeatedly (so a secret
/// escaped twice is found too): the check must not be fooled by the
/// escaping the redactor is supposed to see through.
fn unescaped(text: &str) -> String {
    let mut current = text.to_owned();
    for _ in 0..3 {
        let mut out = String::with_capacity(current.len());
        let mut chars = current.chars().peekable();
        let mut pending_high: Option<u16> = None;
        while let Some(ch) = chars.next() {
            if ch != '\\' {
                out.push(ch);
                continue;
            }
            match chars.peek().copied() {
                Some('u') => {
                    let _ = chars.next();
                    let hex: String = chars.by_ref().take(4).collect();
                    let Ok(unit) = u16::from_str_radix(&hex, 16) else {
                        out.push_str("\\u");
                        out.push_str(&hex);
                        continue;
                    };
                    match pending_high.take() {
                        Some(high) => {
                            if let Some(Ok(c)) = char::decode_utf16([high, unit]).next() {
                                out.push(c);
                            }
                        }
                        None if (0xD800..0xDC00).contains(&unit) => pending_high = Some(unit),
                        None => out.push(char::from_u32(u32::from(unit)).unwrap_or('?')),
                    }
                }
                Some(c @ ('/' | '"' | '\\')) => {
                    let _ = chars.next();
                    out.push(c);
                }
                _ => out.push('\\'),
            }
        }
        if out == current {
            break;
        }
        current = out;
    }
    current
}

/// Panics naming the surface where a secret was seen.
fn assert_no_secret(surface: &str, text: &str) {
    let decoded = unescaped(text);
    for needle in needles() {
        assert!(
            !text.contains(needle) && !decoded.contains(needle),
            "{surface} shows the secret {needle:?}:\n{text}"
        );
    }
}

/// The texts an event carries, field by field (not its `Debug` form, whose
/// own escaping could hide a leak from the check).
fn event_texts(event: &Event) -> Vec<String> {
    match event {
        Event::HookDispatched(HookDispatchedEvent {
            abort_reason,
            abort_source,
            tool_name,
            ..
        }) => vec![
            abort_reason.clone().unwrap_or_default(),
            abort_source.clone().unwrap_or_default(),
            tool_name.as_deref().unwrap_or_default().to_owned(),
        ],
        Event::HookPanicked(HookPanickedEvent { message, hook, .. }) => {
            vec![message.clone(), hook.clone()]
        }
        Event::ToolUsageStarted(ToolUsageStartedEvent { tool_input, .. }) => {
            vec![tool_input.to_string()]
        }
        Event::ToolUsageFinished(ToolUsageFinishedEvent { result, .. }) => vec![result.clone()],
        Event::ToolUsageError(ToolUsageErrorEvent { error, .. }) => vec![error.clone()],
        other => vec![format!("{other:?}")],
    }
}

fn record_all_events(bus: &EventBus) -> Log<Event> {
    let events = log();
    let sink = events.clone();
    bus.subscribe(move |event| push(&sink, event.clone()));
    events
}

/// A global registry with the redactor first (fail-closed), then a hook
/// that records the `tool_result` every later hook sees.
fn redacting_registry() -> (Arc<HookRegistry>, Log<String>) {
    let global = fresh_registry();
    global
        .register_hook_with(
            POST_TOOL_CALL,
            HookOptions::new().name("secret-redactor").fail_closed(),
            SecretRedactor::new().hook(),
        )
        .expect("registers");
    let seen = log();
    let sink = seen.clone();
    global
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            push(&sink, ctx.tool_result.clone().unwrap_or_default());
        })
        .expect("registers");
    (global, seen)
}

/// A model that calls every corpus tool at once, then each again one per
/// turn, then answers with everything it saw.
fn corpus_model() -> Arc<ScriptedLlm> {
    let args = || json!({"query": "credentials"});
    let mut llm = ScriptedLlm::new().calls(TOOL_NAMES.map(|name| (name, args())));
    for name in TOOL_NAMES {
        llm = llm.call(name, args());
    }
    Arc::new(llm.answer_with(|request| {
        request
            .messages
            .iter()
            .filter(|m| m.role == crew_runtime::llm::Role::Tool)
            .map(|m| m.content.clone())
            .collect::<Vec<_>>()
            .join("\n---\n")
    }))
}

fn corpus_crew(global: &Arc<HookRegistry>, llm: &Arc<ScriptedLlm>, verbose: bool) -> Crew {
    let analyst = agent("Analyst", corpus_tools(), llm);
    Crew::builder()
        .name("redaction")
        .agent(analyst.clone())
        .task(Task::builder("Audit the account").agent(&analyst).build())
        .global_registry(global.clone())
        .max_concurrent_tool_calls(4)
        .verbose(verbose)
        .build()
        .expect("builds")
}

#[test]
fn redactor_catches_every_secret_in_every_form() {
    let redactor = SecretRedactor::new();
    let value = serde_json::to_value(record()).expect("serializes");
    let mut forms = vec![
        ("plain text", plain_text()),
        ("compact JSON", value.to_string()),
        (
            "pretty JSON",
            serde_json::to_string_pretty(&value).expect("renders"),
        ),
        (
            "JSON after prose",
            format!("Result of the lookup: {value} (cached)"),
        ),
    ];
    for escapes in [Escapes::Every, Escapes::Slashes, Escapes::Split] {
        let mut out = String::new();
        render(&value, escapes, &mut out);
        assert_ne!(out, value.to_string(), "{escapes:?} changes the text");
        forms.push(("escaped JSON", out));
    }
    for (form, text) in forms {
        let redacted = redactor.redact(&text);
        assert_no_secret(form, &redacted);
        if form.contains("JSON") && !form.contains("prose") {
            let parsed: Value = serde_json::from_str(&redacted)
                .unwrap_or_else(|e| panic!("{form} is still JSON ({e}):\n{redacted}"));
            assert_eq!(parsed["owner"], "[EMAIL-REDACTED]", "{form}");
            assert_eq!(parsed["password"], "[REDACTED]", "{form}");
            assert_eq!(
                parsed["headers"]["Authorization"], "Bearer [REDACTED]",
                "{form}"
            );
            let config: Value = serde_json::from_str(parsed["raw_config"].as_str().unwrap_or(""))
                .unwrap_or_else(|e| panic!("{form}: the inner document is still JSON ({e})"));
            assert_eq!(config["token"], "[REDACTED]", "{form}");
        }
    }
}

#[test]
fn no_secret_reaches_model_output_events_later_hooks_or_logs() {
    let lines = tracing_lines();
    let (global, later_hooks_saw) = redacting_registry();
    let llm = corpus_model();
    let crew = corpus_crew(&global, &llm, false);
    let crew_events = record_all_events(crew.events());
    let global_events = record_all_events(global.events());

    let output = crew.kickoff_blocking(()).expect("the run finishes");

    // The model.
    let requests = llm.requests();
    assert_eq!(requests.len(), TOOL_NAMES.len() + 2);
    for (n, request) in requests.iter().enumerate() {
        for message in &request.messages {
            assert_no_secret(&format!("request {n} to the model"), &message.content);
        }
    }
    let first_observations = requests[1].observations();
    assert_eq!(first_observations.len(), TOOL_NAMES.len());
    assert!(first_observations[0].contains("[OPENAI-KEY-REDACTED]"));
    assert!(first_observations[5].starts_with("Error executing tool: upstream refused"));
    assert!(first_observations[6].starts_with("Error executing tool: the tool panicked"));

    // The crew's output.
    assert_no_secret("the crew output", &output.raw);
    for task in &output.tasks_output {
        assert_no_secret("a task output", &task.raw);
    }
    assert!(output.raw.contains("[AWS-KEY-REDACTED]"), "{}", output.raw);

    // Hooks after the redactor.
    let seen = take(&later_hooks_saw);
    assert_eq!(seen.len(), 2 * TOOL_NAMES.len());
    for text in &seen {
        assert_no_secret("a later POST hook", text);
    }

    // Both buses.
    for (bus, events) in [("crew bus", crew_events), ("global bus", global_events)] {
        let events = take(&events);
        let finished = events
            .iter()
            .filter(|e| matches!(e, Event::ToolUsageFinished(_)))
            .count();
        let errors = events
            .iter()
            .filter(|e| matches!(e, Event::ToolUsageError(_)))
            .count();
        // A failed call ends with its error, not a finish.
        assert_eq!(finished, 2 * TOOL_NAMES.len() - 4, "{bus}");
        assert_eq!(errors, 4, "{bus}: two failing and two panicking calls");
        // A failing tool's error is sent before the POST chain, as the
        // reference sends it: the redacting hook has not run yet. The
        // crew's own redaction cleans it (`hardening_exits.rs`,
        // `every_event_kind_on_both_buses_is_redacted`).
        for event in events.iter().filter(|event| {
            !matches!(
                event,
                Event::ToolUsageError(_) | Event::ToolFailureDetected(_)
            )
        }) {
            for text in event_texts(event) {
                assert_no_secret(bus, &text);
            }
        }
    }

    // The logs.
    let lines = lines.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert!(
        lines.iter().any(|l| l.contains("hook chain dispatched")),
        "the capturing subscriber hears the runtime: {lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("panicked")),
        "the contained tool panic is logged: {lines:?}"
    );
    for line in &lines {
        assert_no_secret("a tracing line", line);
    }
}

#[test]
fn an_abort_after_the_redactor_carries_no_secret() {
    let _lines = tracing_lines();
    let (global, _) = redacting_registry();
    global
        .register_hook_with(
            POST_TOOL_CALL,
            HookOptions::new()
                .name("auditor")
                .tools(["fetch_record_split"]),
            |ctx: &mut ToolCallHookContext| -> Result<Option<String>, HookAborted> {
                Err(HookAborted::new(
                    format!(
                        "result refused: {}",
                        ctx.tool_result.as_deref().unwrap_or("")
                    ),
                    "auditor",
                ))
            },
        )
        .expect("registers");
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("fetch_record_split", json!({"query": "x"}))
            .answer("unreachable"),
    );
    let crew = corpus_crew(&global, &llm, false);

    let error = crew
        .kickoff_blocking(())
        .expect_err("the auditor aborts the run");

    let abort = error.abort().expect("a hook abort");
    assert_eq!(abort.source, "auditor");
    assert!(abort.reason.contains("[REDACTED]"), "{}", abort.reason);
    assert_no_secret("the error's message", &error.to_string());
    assert_no_secret("the error's debug form", &format!("{error:?}"));
    assert_no_secret("the abort's reason", &abort.reason);
}

#[test]
fn raw_tool_result_keeps_the_secret_for_hooks_that_read_it() {
    // The documented boundary: the redactor changes `tool_result` only.
    let (global, _) = redacting_registry();
    let raw = log();
    let sink = raw.clone();
    global
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            if let Some(record) = ctx
                .raw_tool_result
                .as_ref()
                .and_then(|r| r.downcast_ref::<Record>())
            {
                push(&sink, record.aws.clone());
            }
        })
        .expect("registers");
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("fetch_record", json!({"query": "x"}))
            .answer("done"),
    );
    corpus_crew(&global, &llm, false)
        .kickoff_blocking(())
        .expect("runs");

    assert_eq!(take(&raw), [secret("AKIA")]);
    assert_no_secret("the observation", llm.requests()[1].observations()[0]);
}

const VERBOSE_CHILD: &str = "HARDENING_REDACTION_VERBOSE_CHILD";

#[test]
fn verbose_console_shows_no_secret() {
    if is_child(VERBOSE_CHILD) {
        let (global, _) = redacting_registry();
        let llm = corpus_model();
        corpus_crew(&global, &llm, true)
            .kickoff_blocking(())
            .expect("the run finishes");
        return;
    }
    let stdout = run_in_child("verbose_console_shows_no_secret", VERBOSE_CHILD);
    assert!(
        stdout.contains("← fetch_text: Configuration dump") && stdout.contains("final answer"),
        "the child printed the run:\n{stdout}"
    );
    assert!(stdout.contains("[OPENAI-KEY-REDACTED]"), "{stdout}");
    // The console is a listener on the crew's bus: it shows what the events
    // carry. A failing tool's error is sent before the POST chain (as the
    // reference sends it), so the redacting hook has not run on it yet; the
    // crew's own redaction cleans it (SPEC §8, `hardening_exits.rs`,
    // `the_verbose_console_is_redacted`). Every other line is clean.
    let (failures, others): (Vec<&str>, Vec<&str>) = stdout
        .lines()
        .partition(|line| line.starts_with("[Analyst] ✗ "));
    assert_eq!(
        failures.len(),
        4,
        "two failing and two panicking calls:\n{stdout}"
    );
    assert_no_secret("the verbose console", &others.join("\n"));
}

/// Shapes that need gitleaks' rules or the key/value rules (SPEC §8), each
/// with a distinctive part that must never be seen again.
const SHAPES: &[Secret] = &[
    Secret {
        written: r#"{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n"}"#,
        needle: "MIIEvQIBADANBgkqhkiG9w0",
    },
    Secret {
        written: r#"{"dbHost": "db.internal", "dbPassword": "Tr0ub4dor&3-xQ"}"#,
        needle: "Tr0ub4dor&3",
    },
    Secret {
        written: "PGPASSWORD=pg_x7Hq2mXv9L psql -h db.internal",
        needle: "pg_x7Hq2mXv9L",
    },
    Secret {
        written: "DATABASE_URL=postgres://app:pgPw-7Hq2mXv9Lr@db.internal:5432/app",
        needle: "pgPw-7Hq2mXv9Lr",
    },
    Secret {
        written: "Authorization: Basic YWRtaW46UXg3I21McDJ2Ug==",
        needle: "YWRtaW46UXg3I21McDJ2Ug",
    },
    Secret {
        written: "<password>mvn-S3cretValue</password>",
        needle: "mvn-S3cretValue",
    },
    Secret {
        written: "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF4kXq0BCADpGz3mX9vLr7Hq2\nZq9xY8wV7uT6sR5qP4oN3mL2kJ1",
        needle: "lQOYBF4kXq0BCADpGz3m",
    },
    Secret {
        written: "gitlab runner glpat-Xk3mP9qR2sT5vW8yZ1aBcD4e registered",
        needle: "Xk3mP9qR2sT5vW8yZ1aB",
    },
];

#[test]
fn cloud_credentials_env_lines_and_key_blocks_never_reach_the_model() {
    let _lines = tracing_lines();
    let (global, later_hooks_saw) = redacting_registry();
    let result: String = SHAPES
        .iter()
        .map(|shape| shape.written)
        .collect::<Vec<_>>()
        .join("\n");
    let tool: Tool = Tool::typed("read_config", "Reads the config", move |_: SearchArgs| {
        Ok::<_, String>(result.clone())
    })
    .into();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("read_config", json!({"query": "all"}))
            .answer("done"),
    );
    let analyst = agent("Analyst", vec![tool], &llm);
    let crew = Crew::builder()
        .agent(analyst.clone())
        .task(Task::builder("Audit the config").agent(&analyst).build())
        .global_registry(global.clone())
        .build()
        .expect("builds");
    let events = record_all_events(crew.events());

    crew.kickoff_blocking(()).expect("the run finishes");

    let observation = llm.requests()[1].observations()[0].to_owned();
    let seen = take(&later_hooks_saw);
    let finished: Vec<String> = take(&events)
        .iter()
        .filter_map(|event| match event {
            Event::ToolUsageFinished(ToolUsageFinishedEvent { result, .. }) => Some(result.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(finished.len(), 1);
    for text in std::iter::once(&observation).chain(&seen).chain(&finished) {
        let decoded = unescaped(text);
        for shape in SHAPES {
            assert!(
                !text.contains(shape.needle) && !decoded.contains(shape.needle),
                "{:?} is still in:\n{text}",
                shape.needle
            );
        }
    }
    for kept in [
        "postgres://app:[REDACTED]@db.internal:5432/app",
        "Authorization: Basic [REDACTED]",
        r#""dbPassword": "[REDACTED]""#,
        "[PRIVATE-KEY-REDACTED]",
    ] {
        assert!(observation.contains(kept), "{kept:?} in:\n{observation}");
    }
}

#[test]
fn a_secret_the_model_put_in_tool_arguments_is_not_sent_back_to_it() {
    // The model copies a token into a call's arguments: the tool gets
    // them as written, but the conversation history that goes out with
    // the next request carries them through the crew's redaction.
    let token = secret("ghp_");
    let received = log();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call(
                "web_search",
                json!({"query": format!("repos visible to {token}")}),
            )
            .answer("done"),
    );
    let analyst = agent("Analyst", vec![search_tool(&received)], &llm);
    let crew = Crew::builder()
        .agent(analyst.clone())
        .task(Task::builder("Audit the token").agent(&analyst).build())
        .global_registry(fresh_registry())
        .redact_with(SecretRedactor::new())
        .build()
        .expect("builds");

    crew.kickoff_blocking(()).expect("the run finishes");

    assert_eq!(
        take(&received)[0].query,
        format!("repos visible to {token}"),
        "the tool receives the arguments as the model wrote them"
    );
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    let calls: Vec<&crew_runtime::llm::ToolCallRequest> = requests[1]
        .messages
        .iter()
        .flat_map(|message| &message.tool_calls)
        .collect();
    assert_eq!(calls.len(), 1, "the history holds the model's call");
    assert_no_secret(
        "the call's arguments in the next request",
        &calls[0].arguments,
    );
    let arguments: Value =
        serde_json::from_str(&calls[0].arguments).expect("the arguments are still JSON");
    assert_eq!(
        arguments["query"],
        "repos visible to [GITHUB-TOKEN-REDACTED]"
    );
}
