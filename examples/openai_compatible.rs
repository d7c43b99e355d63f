//! The quickstart's crew against a real model: any server that speaks the
//! OpenAI chat-completions API with tool calling (OpenAI, Ollama, vLLM, a
//! llama.cpp server).
//!
//! ```sh
//! # a local Ollama server
//! OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.1 \
//!     cargo run --example openai_compatible
//! # OpenAI itself (https needs the `tls` feature)
//! OPENAI_API_KEY=... OPENAI_MODEL=gpt-4o-mini \
//!     cargo run --example openai_compatible --features tls
//! ```
//!
//! Without `OPENAI_MODEL` it says how to set things up and exits 0 without
//! sending anything. The hooks are the same as with the scripted model:
//! they cannot tell one model from another, and no model gets around them.

use std::error::Error;
use std::process::ExitCode;

use crew_runtime::openai::{
    API_KEY_VAR, BASE_URL_VAR, MODEL_VAR, MissingEnv, OpenAiCompatible, OpenAiConfig,
};
use crew_runtime::prelude::*;
use crew_runtime::schemars::JsonSchema;
use crew_runtime::serde::Deserialize;
use crew_runtime::transcript::Transcript;

#[on(PRE_TOOL_CALL, tools = ["delete_file"])]
fn block_delete(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    Err(HookAborted::new(
        format!("{} is not allowed", ctx.tool_name()),
        "safety-policy",
    ))
}

#[on(POST_TOOL_CALL)]
fn redact_password(ctx: &mut ToolCallHookContext) -> Option<String> {
    let result = ctx.tool_result.as_deref()?;
    result
        .contains("hunter2")
        .then(|| result.replace("hunter2", "[REDACTED]"))
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "crew_runtime::serde")]
#[schemars(crate = "crew_runtime::schemars")]
struct PathArgs {
    /// The file's path, e.g. `notes.txt`.
    path: String,
}

/// What to print when no server is configured.
fn not_configured(missing: &MissingEnv) -> Vec<String> {
    vec![
        "This example talks to an OpenAI-compatible model server, and none is configured.".into(),
        missing.to_string(),
        "With a local Ollama server, for example:".into(),
        format!(
            "  {BASE_URL_VAR}=http://localhost:11434/v1 {MODEL_VAR}=llama3.1 \
             cargo run --example openai_compatible"
        ),
        "With OpenAI itself (its https endpoint needs the `tls` feature):".into(),
        format!(
            "  {API_KEY_VAR}=... {MODEL_VAR}=gpt-4o-mini \
             cargo run --example openai_compatible --features tls"
        ),
        "No request was sent. `cargo run --example quickstart` runs the same crew offline.".into(),
    ]
}

/// Runs the crew against the server the variables (read through `lookup`)
/// name.
fn run(lookup: impl FnMut(&str) -> Option<String>) -> Result<Vec<String>, Box<dyn Error>> {
    let config = match OpenAiConfig::from_lookup(lookup) {
        Ok(config) => config,
        Err(missing) => return Ok(not_configured(&missing)),
    };
    let transcript = Transcript::new();
    transcript.line(format!("model {} at {}", config.model, config.base_url));
    let model = OpenAiCompatible::with_config(config).temperature(0.0);
    // Checked before anything is sent: a URL this build cannot use fails
    // here, with what to do about it.
    if let Err(error) = model.check() {
        let hint = if cfg!(feature = "tls") {
            ""
        } else {
            " (for this example: add `--features tls` to `cargo run`)"
        };
        return Err(format!("{error}{hint}").into());
    }

    let read_file = Tool::typed("read_file", "Reads a file", |args: PathArgs| {
        Ok::<_, String>(format!("{}: db password is hunter2", args.path))
    });
    let delete_file = Tool::typed("delete_file", "Deletes a file", |args: PathArgs| {
        Ok::<_, String>(format!("deleted {}", args.path))
    });
    let assistant = Agent::builder("Assistant")
        .goal("Tidy up the project folder")
        .tool(read_file)
        .tool(delete_file)
        .llm(transcript.model("Assistant", std::sync::Arc::new(model)))
        // A real model may loop; a few turns are plenty here.
        .max_iter(6)
        .build();
    let task = Task::builder(
        "Read {file} with the read_file tool, then delete it with the delete_file tool, \
         then say in one sentence what it contained and whether the deletion worked.",
    )
    .agent(&assistant)
    .build();
    let crew = Crew::builder().agent(assistant).task(task).build()?;
    transcript.attach(&crew);

    let output = crew.kickoff_blocking([("file", "notes.txt")])?;
    transcript.line(format!("final output: {output}"));
    Ok(transcript.lines())
}

fn main() -> ExitCode {
    match run(|name| std::env::var(name).ok()) {
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
    fn without_a_model_it_explains_and_sends_nothing() {
        let lines = run(|_| None).expect("not configured is not an error");
        assert_eq!(
            lines.first().map(String::as_str),
            Some(
                "This example talks to an OpenAI-compatible model server, and none is configured."
            )
        );
        assert!(lines[1].starts_with("set OPENAI_MODEL "), "{lines:#?}");
        assert!(
            lines
                .iter()
                .any(|l| l.contains("OPENAI_BASE_URL=http://localhost:11434/v1")),
            "{lines:#?}"
        );
        assert_eq!(
            lines.last().map(String::as_str),
            Some(
                "No request was sent. `cargo run --example quickstart` runs the same crew offline."
            )
        );
    }

    #[test]
    fn an_unusable_base_url_fails_before_any_request() {
        let lookup = |name: &str| match name {
            "OPENAI_MODEL" => Some("llama3.1".to_owned()),
            "OPENAI_BASE_URL" => Some("ftp://localhost:11434/v1".to_owned()),
            _ => None,
        };
        let error = run(lookup).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            error.contains("must start with http:// or https://"),
            "{error}"
        );
    }
}
