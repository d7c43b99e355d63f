//! The crew of the inbox tests about an approver's edit (SPEC §11 "Under
//! attack"): a sync PRE guard `drafts-only` that refuses `write_file`
//! outside `drafts/`, then the approval gate on `write_file`, asking
//! through a `StoreApprovals` on the inbox's store for the user `carol`.
//!
//! The guard lets the model's call through to the question; an approver
//! who edits the path elsewhere must meet the guard again, and be told.
#![allow(dead_code)] // each test file uses a different part

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use crew_runtime::ToolAnnotations;
use crew_runtime::guards::{ApprovalGate, SecretRedactor};
use crew_runtime::prelude::*;
use crew_runtime::store::{Store, StoreApprovals};
use tokio::task::JoinHandle;

/// A GitHub token of the documented shape (not a real one): what the
/// crew's redactor hides from the approver.
pub(crate) const TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";

/// How long the crew waits for an answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(120);

/// A kickoff of the drafts crew, under way on a task of its own.
pub(crate) struct DraftsKickoff {
    /// The kickoff.
    pub(crate) run: JoinHandle<Result<CrewOutput, CrewError>>,
    /// The arguments `write_file` ran with, once per run.
    pub(crate) ran: Log<Value>,
    /// The model, with the requests it was sent.
    pub(crate) llm: Arc<ScriptedLlm>,
}

/// The guard of a crew that writes only under `drafts/`.
fn drafts_only(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    let path = ctx.tool_input["path"].as_str().unwrap_or_default();
    if path.starts_with("drafts/") {
        Ok(())
    } else {
        Err(HookAborted::new(
            format!("{path} is outside drafts/"),
            "drafts-only",
        ))
    }
}

/// A destructive `write_file` tool that records the arguments it ran with.
fn write_file_tool(ran: &Log<Value>) -> Tool {
    let sink = ran.clone();
    Tool::dynamic(
        "write_file",
        "Writes a file",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "content": {"type": "string"},
                "token": {"type": "string"}
            },
            "required": ["path"],
            "additionalProperties": false
        }),
        move |args| {
            push(&sink, args.clone());
            Ok::<_, String>(json!("written"))
        },
    )
    .with_annotations(ToolAnnotations::new().destructive(true))
}

/// Kicks off, for `carol`, a crew whose model calls `write_file` once
/// with `args` and then answers `done`; it asks through `store`, with
/// secrets redacted from what the approver is shown.
pub(crate) fn kickoff(store: &Store, args: Value) -> DraftsKickoff {
    let ran = log();
    let llm = Arc::new(ScriptedLlm::new().call("write_file", args).answer("done"));
    let writer = agent("Writer", vec![write_file_tool(&ran)], &llm);
    let crew = Crew::builder()
        .name("writers")
        .agent(writer.clone())
        .task(Task::builder("Write the notes").agent(&writer).build())
        .global_registry(fresh_registry())
        .human_input(Arc::new(StoreApprovals::new(store.clone())))
        .human_input_timeout(ANSWER_WITHIN)
        .redact_with(SecretRedactor::new())
        .hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("drafts-only"),
            drafts_only,
        )
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_tools(["write_file"]).pre_hook(),
        )
        .build()
        .expect("the crew builds")
        .for_user("carol");
    DraftsKickoff {
        run: tokio::spawn(async move { crew.kickoff(()).await }),
        ran,
        llm,
    }
}

impl DraftsKickoff {
    /// Waits, up to `patience`, for the kickoff to end well.
    pub(crate) async fn ended(&mut self, patience: Duration) {
        tokio::time::timeout(patience, &mut self.run)
            .await
            .expect("the crew goes on once answered")
            .expect("the kickoff does not panic")
            .expect("the kickoff ends well");
    }
}
