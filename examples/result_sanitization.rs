//! Result sanitization: API keys, tokens and e-mail addresses are redacted
//! from what the agent sees, while hooks can still read the raw result.
//!
//! `cargo run --example result_sanitization`
//!
//! A POST_TOOL_CALL hook rewrites `ctx.tool_result` (the text the agent
//! will see) with the guide's regular expressions. A second POST hook, for
//! monitoring, reads `ctx.raw_tool_result`: the tool's own typed value,
//! which replacements never touch, reached by downcast.

use std::error::Error;
use std::process::ExitCode;
use std::sync::{Arc, LazyLock};

use crew_runtime::prelude::*;
use crew_runtime::schemars::JsonSchema;
use crew_runtime::serde::{Deserialize, Serialize};
use crew_runtime::transcript::Transcript;
use crew_runtime::transcript::note;
use regex::Regex;

/// `api_key=…`, `api-key: …`, `token=…` (any case), as the guide writes it.
static API_KEY: LazyLock<Regex> = LazyLock::new(|| {
    // A literal pattern: it compiles, as the tests show.
    Regex::new(r#"(?i)(api[_-]?key|token)["']?\s*[:=]\s*["']?[\w-]+"#)
        .expect("the API key pattern is valid")
});

/// E-mail addresses. (The guide's `[A-Z|a-z]` also allowed a `|` in the
/// top-level domain; that is dropped here.)
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    // A literal pattern: it compiles, as the tests show.
    Regex::new(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b")
        .expect("the e-mail pattern is valid")
});

/// Rewrites the agent-facing result; returns `None` (keep it) when there
/// is nothing to redact, so telemetry says "kept" rather than "replaced".
#[on(POST_TOOL_CALL)]
fn sanitize_sensitive_data(ctx: &mut ToolCallHookContext) -> Option<String> {
    let result = ctx.tool_result.as_deref()?;
    let redacted = API_KEY.replace_all(result, "${1}: [REDACTED]");
    let redacted = EMAIL.replace_all(&redacted, "[EMAIL-REDACTED]");
    (redacted != result).then(|| redacted.into_owned())
}

/// Monitoring runs after the redaction (`order = 10`) and still sees the
/// raw, typed response: replacements change `tool_result` only.
#[on(POST_TOOL_CALL, tools = ["http_get"], order = 10)]
fn audit_raw_result(ctx: &ToolCallHookContext) {
    let raw = ctx.raw_tool_result.as_ref();
    let Some(response) = raw.and_then(|raw| raw.downcast_ref::<HttpResponse>()) else {
        return;
    };
    let agent_text = ctx.tool_result.as_deref().unwrap_or_default();
    note(
        ctx,
        format!(
            "audit: raw HttpResponse (status {}) holds {} secret(s); the agent's text holds {}",
            response.status,
            count_secrets(&response.body),
            count_secrets(agent_text)
        ),
    );
}

fn count_secrets(text: &str) -> usize {
    API_KEY.find_iter(text).count() + EMAIL.find_iter(text).count()
}

/// The typed value the tool returns; the agent sees it through the tool's
/// formatter, hooks can downcast to it.
#[derive(Serialize)]
#[serde(crate = "crew_runtime::serde")]
struct HttpResponse {
    status: u16,
    body: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "crew_runtime::serde")]
#[schemars(crate = "crew_runtime::schemars")]
struct GetArgs {
    /// The URL to fetch.
    url: String,
}

fn http_get(args: GetArgs) -> Result<HttpResponse, String> {
    let body = if args.url.ends_with("/config") {
        "service=billing api-key: sk_live_51HxQ9 token=tok-8f2c owner=ops@example.com"
    } else {
        "all systems normal"
    };
    Ok(HttpResponse {
        status: 200,
        body: body.to_owned(),
    })
}

fn run() -> Result<Vec<String>, Box<dyn Error>> {
    let transcript = Transcript::new();

    let tool = Tool::typed("http_get", "Fetches a URL", http_get).with_formatter(
        |response: &HttpResponse| format!("HTTP {}: {}", response.status, response.body),
    );
    let model = ScriptedLlm::new()
        .call(
            "http_get",
            json!({"url": "https://internal.example/status"}),
        )
        .call(
            "http_get",
            json!({"url": "https://internal.example/config"}),
        )
        .answer("Billing is up; its configuration is in place.");
    let operator = Agent::builder("Operator")
        .goal("Check the billing service")
        .tool(tool)
        .llm(transcript.model("Operator", Arc::new(model)))
        .build();
    let task = Task::builder("Check the billing service")
        .agent(&operator)
        .build();
    let crew = Crew::builder().agent(operator).task(task).build()?;
    transcript.attach(&crew);

    crew.kickoff_blocking(())?;
    Ok(transcript.lines())
}

fn main() -> ExitCode {
    match run() {
        Ok(lines) => {
            // Lines hold text the model and the tools chose: the console
            // escapes control characters.
            for line in lines {
                crew_runtime::console::print_line(&line);
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!(
                "error: {}",
                crew_runtime::console::escape_control(&error.to_string())
            );
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guides_patterns_redact_keys_tokens_and_emails() {
        let mut ctx = ToolCallHookContext::new("x", Default::default());
        ctx.tool_result = Some(r#"API_KEY="abc-123" Token: xyz me@mail.example.org"#.to_owned());
        assert_eq!(
            sanitize_sensitive_data(&mut ctx).as_deref(),
            Some("API_KEY: [REDACTED]\" Token: [REDACTED] [EMAIL-REDACTED]")
        );
        ctx.tool_result = Some("nothing to hide".to_owned());
        assert_eq!(sanitize_sensitive_data(&mut ctx), None);
    }

    #[test]
    fn the_agent_sees_redacted_text_and_hooks_the_raw_value() {
        let lines = run().expect("the example runs");
        assert_has_lines(
            &lines,
            &[
                "    POST_TOOL_CALL kept the result (2 hooks ran)",
                "    audit: raw HttpResponse (status 200) holds 0 secret(s); the agent's text holds 0",
                "[Operator] agent saw: HTTP 200: all systems normal",
                "    audit: raw HttpResponse (status 200) holds 3 secret(s); the agent's text holds 0",
                "    POST_TOOL_CALL replaced the result (2 hooks ran)",
                "[Operator] agent saw: HTTP 200: service=billing api-key: [REDACTED] token: [REDACTED] owner=[EMAIL-REDACTED]",
            ],
        );
        assert!(
            !lines
                .iter()
                .any(|l| l.contains("agent saw") && l.contains("sk_live"))
        );
    }

    /// Panics unless every `expected` line is among `lines`, showing them
    /// all.
    #[track_caller]
    fn assert_has_lines(lines: &[String], expected: &[&str]) {
        for wanted in expected {
            assert!(
                lines.iter().any(|line| line == wanted),
                "missing {wanted:?} in {lines:#?}"
            );
        }
    }
}
