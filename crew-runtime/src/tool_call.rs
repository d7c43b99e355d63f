//! One tool call, the only way any tool runs: arguments checked, context
//! built, PRE chain, tool, POST chain, events, observation.
//!
//! What the agent sees, case by case:
//! - arguments that are not a JSON object (or not JSON): `Invalid arguments
//!   for tool …`; no hook and no tool runs; a `ToolUsageError` event;
//! - a tool the agent does not have: `Tool not found: <name>. Available
//!   tools: …`; PRE and POST hooks run with `ctx.tool` absent; a
//!   `ToolUsageError` event;
//! - a call a PRE hook blocks: `Tool execution blocked by hook. Tool: …`
//!   (POST hooks run and may replace it);
//! - a tool that fails or panics: `Error executing tool: <message>` (POST
//!   hooks see it); a `ToolUsageError` event, sent after the POST chain
//!   with the message as the hooks left it (so a redacting hook's work
//!   holds there too);
//! - otherwise the tool's rendered result, after POST hooks.
//!
//! Every call that reaches the hooks ends with one `ToolUsageFinished` event
//! carrying the text the agent sees, unless a POST hook aborts the run.
//! `ToolUsageStarted` is sent when a tool actually starts (after the PRE
//! chain let the call through).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hooks_core::events::{ToolUsageErrorEvent, ToolUsageFinishedEvent, ToolUsageStartedEvent};
use hooks_core::runtime::{TOOL_ERROR_PREFIX, ToolOutput, panic_message};
use hooks_core::{Event, ToolCallHookContext, ToolInfo, normalize_tool_name};
use serde_json::{Map, Value};

use crate::error::CrewError;
use crate::executor::{AgentRun, excerpt};
use crate::llm::ToolCallRequest;
use crate::tool::Tool;

impl AgentRun {
    /// Runs one tool call the model asked for and returns the observation
    /// the model gets, or the abort of a POST hook.
    pub(crate) fn run_call(&self, call: &ToolCallRequest) -> Result<String, CrewError> {
        let input = match parse_arguments(&call.arguments) {
            Ok(input) => input,
            Err(problem) => return Ok(self.reject_arguments(call, &problem)),
        };
        let mut ctx = ToolCallHookContext::new(&call.name, input)
            .with_agent(Arc::clone(&self.agent_info))
            .with_task(Arc::clone(&self.task_info))
            .with_crew(Arc::clone(&self.crew_info))
            .with_human_input(Arc::clone(&self.inner().human_input));
        let tool = self.agent().find_tool(ctx.tool_name());
        if let Some(tool) = tool {
            ctx.tool = Some(Arc::clone(tool) as Arc<dyn ToolInfo>);
        }
        if self.verbose {
            let input = serde_json::to_string(&ctx.tool_input).unwrap_or_default();
            self.say(&format!("→ {} {}", ctx.tool_name(), excerpt(&input, 300)));
        }

        let mut ran_for = Duration::ZERO;
        let mut failed = None;
        let mut before_post = None;
        let result = self.dispatcher().run_tool_call(&mut ctx, |ctx| {
            let output = match tool {
                Some(tool) => self.execute(tool, ctx, &mut ran_for, &mut failed),
                None => self.not_found(call),
            };
            if self.verbose {
                before_post = Some(output.rendered.clone());
            }
            output
        });

        match result {
            Ok(report) => {
                if let Some(failure) = failed {
                    self.report_failure(failure, ctx.tool_name(), &report.observation);
                }
                if self.verbose {
                    if let Some(abort) = &report.blocked {
                        self.say(&format!("  blocked by {}: {}", abort.source, abort.reason));
                    } else if before_post.as_deref() != Some(report.observation.as_str()) {
                        self.say("  result replaced by a POST_TOOL_CALL hook");
                    }
                    self.say(&format!(
                        "← {}: {}",
                        ctx.tool_name(),
                        excerpt(&report.observation, 300)
                    ));
                }
                if self.listening() {
                    self.emit(Event::ToolUsageFinished(ToolUsageFinishedEvent {
                        tool_name: ctx.tool_name().to_owned(),
                        result: report.observation.clone(),
                        blocked: report.blocked.is_some(),
                        duration: ran_for,
                        agent_role: Some(self.role().to_owned()),
                        task: Some(self.task.description().to_owned()),
                        crew: Some(self.inner().name.clone()),
                    }));
                }
                Ok(report.observation)
            }
            Err(abort) => {
                if let Some(failure) = failed {
                    let text = ctx.tool_result.as_deref().unwrap_or_default();
                    self.report_failure(failure, ctx.tool_name(), text);
                }
                if self.verbose {
                    self.say(&format!(
                        "  run aborted after {} by {}: {}",
                        ctx.tool_name(),
                        abort.source,
                        abort.reason
                    ));
                }
                Err(CrewError::Aborted {
                    tool: ctx.tool_name().to_owned(),
                    agent: self.role().to_owned(),
                    abort,
                })
            }
        }
    }

    /// Runs the tool on the input the PRE chain left, containing a panic.
    /// Sets `failed` when the tool failed or panicked: the caller reports
    /// (and logs) the error once the POST chain has seen, and maybe
    /// redacted, it.
    fn execute(
        &self,
        tool: &Tool,
        ctx: &ToolCallHookContext,
        ran_for: &mut Duration,
        failed: &mut Option<Failure>,
    ) -> ToolOutput {
        let listening = self.listening();
        if listening {
            self.emit(Event::ToolUsageStarted(ToolUsageStartedEvent {
                tool_name: ctx.tool_name().to_owned(),
                tool_input: Value::Object(ctx.tool_input.clone()),
                agent_role: Some(self.role().to_owned()),
                task: Some(self.task.description().to_owned()),
                crew: Some(self.inner().name.clone()),
            }));
        }
        let started = (listening || self.verbose).then(Instant::now);
        let result = catch_unwind(AssertUnwindSafe(|| tool.invoke(&ctx.tool_input)));
        if let Some(started) = started {
            *ran_for = started.elapsed();
        }
        let (kind, message) = match result {
            Ok(Ok(output)) => return output,
            Ok(Err(failure)) => (Failure::Error, failure.to_string()),
            Err(panic) => (
                Failure::Panic,
                format!("the tool panicked: {}", panic_message(&*panic)),
            ),
        };
        *failed = Some(kind);
        ToolOutput::error(message)
    }

    /// Reports a failed call with its error as the agent was told it:
    /// a `ToolUsageError` event, and for a panic a warning in the log.
    fn report_failure(&self, failure: Failure, tool_name: &str, told: &str) {
        let error = failure_text(told);
        if failure == Failure::Panic {
            tracing::warn!(
                target: "crew_runtime::executor",
                tool = %tool_name,
                agent = %self.role(),
                "{error}; the panic was contained and reported to the agent"
            );
        }
        self.report_error(tool_name, error);
    }

    /// The observation for a tool the agent does not have.
    fn not_found(&self, call: &ToolCallRequest) -> ToolOutput {
        let named = if call.name.trim().is_empty() {
            "(the call named no tool)"
        } else {
            call.name.as_str()
        };
        let message = format!(
            "Tool not found: {named}. Available tools: {}",
            self.agent().tool_names()
        );
        self.report_error(&call.name, &message);
        ToolOutput::not_found(message)
    }

    /// The observation for arguments that are not a JSON object: no hook
    /// and no tool runs.
    fn reject_arguments(&self, call: &ToolCallRequest, problem: &str) -> String {
        let name = normalize_tool_name(&call.name);
        let message = format!(
            "Invalid arguments for tool `{name}`: {problem}. No tool ran; call it again with a \
             JSON object of arguments that matches its schema."
        );
        let event_name = if self.agent().find_tool(&name).is_some() {
            name.as_str()
        } else {
            call.name.as_str()
        };
        self.report_error(event_name, &message);
        if self.verbose {
            self.say(&format!("✗ {}: {message}", call.name));
        }
        message
    }

    fn report_error(&self, tool_name: &str, error: &str) {
        if self.listening() {
            self.emit(Event::ToolUsageError(ToolUsageErrorEvent {
                tool_name: tool_name.to_owned(),
                error: error.to_owned(),
                agent_role: Some(self.role().to_owned()),
                task: Some(self.task.description().to_owned()),
                crew: Some(self.inner().name.clone()),
            }));
        }
    }
}

/// The model's argument text as a JSON object, or what is wrong with it.
/// Empty text means no arguments.
fn parse_arguments(text: &str) -> Result<Map<String, Value>, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(input)) => Ok(input),
        Ok(other) => Err(format!(
            "expected a JSON object, got {}: {}",
            json_kind(&other),
            excerpt(trimmed, 200)
        )),
        Err(error) => Err(format!(
            "they are not valid JSON ({error}): {}",
            excerpt(trimmed, 200)
        )),
    }
}

/// How a tool call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// The tool returned an error (or its arguments did not fit).
    Error,
    /// The tool panicked.
    Panic,
}

/// The error of a failed call as the agent was told it, without the
/// `Error executing tool: ` its observation starts with.
fn failure_text(observation: &str) -> &str {
    observation
        .strip_prefix(TOOL_ERROR_PREFIX)
        .unwrap_or(observation)
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_arguments_parse() {
        let input = parse_arguments(r#" {"query": "rust"} "#);
        assert_eq!(input.map(|m| m["query"].clone()), Ok(Value::from("rust")));
    }

    #[test]
    fn empty_arguments_are_no_arguments() {
        assert_eq!(parse_arguments("  "), Ok(Map::new()));
    }

    #[test]
    fn non_objects_are_refused_with_their_kind() {
        assert_eq!(
            parse_arguments("[1, 2]"),
            Err("expected a JSON object, got an array: [1, 2]".to_owned())
        );
        assert_eq!(
            parse_arguments(r#""rust""#),
            Err(r#"expected a JSON object, got a string: "rust""#.to_owned())
        );
    }

    #[test]
    fn invalid_json_is_refused() {
        let problem = parse_arguments("{not json").err().unwrap_or_default();
        assert!(
            problem.starts_with("they are not valid JSON ("),
            "{problem}"
        );
        assert!(problem.ends_with("): {not json"), "{problem}");
    }
}
