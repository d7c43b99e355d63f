//! What binding an approval to what was approved costs per approved call
//! (SPEC §11 "Under attack"): the call's answers kept in its ledger, an
//! edit merged back onto the real arguments by JSON path (placeholders
//! refused), the second round of the PRE chain on an edited call, and the
//! source told what became of the call.
//!
//! One tool call through a PRE chain of a synchronous guard and the
//! approval gate, the answer given at once by an in-process source (so
//! that only the runtime's work is timed, not a person or a store):
//!
//! - `approved`: approved as asked (ledger, outcome told);
//! - `edited`: approved with an edit, which then goes through the guard
//!   and the gate again (the gate's question is answered from the ledger);
//! - `edited, redacted`: the same with the crew's redaction in scope, so
//!   the question shows a placeholder and the edit's is merged back.
//!
//! Printed: the median time per call of each (median of `RUNS` runs of
//! `CALLS` calls), and the edit's added cost over an approval as asked.
//! `cargo bench -p crew-runtime --bench approval_edits`

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crew_runtime::guards::{ApprovalGate, SecretRedactor};
use crew_runtime::prelude::*;
use crew_runtime::runtime::{RedactionScope, TOOL_CALL_POINTS, ToolOutput};
use crew_runtime::{ApprovedCallOutcome, HumanAnswer, HumanInputRequest, Redact};
use crew_runtime::{HumanInputError, HumanInputSource};
use serde_json::{Map, Value};

const CALLS: usize = 20_000;
const RUNS: usize = 7;
const TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";

fn fail(what: &str, error: impl std::fmt::Display) -> ! {
    eprintln!("{what}: {error}");
    std::process::exit(1)
}

/// Approves at once: as asked, or with the path changed (every other
/// argument as the question showed it).
struct Approver {
    edit: bool,
}

#[crew_runtime::async_trait]
impl HumanInputSource for Approver {
    async fn ask(&self, _request: HumanInputRequest) -> Result<String, HumanInputError> {
        Ok("yes".into())
    }

    async fn answer(&self, request: HumanInputRequest) -> Result<HumanAnswer, HumanInputError> {
        let answer = HumanAnswer::new("yes")
            .with_answered_by("alice")
            .with_question_id("q");
        if !self.edit {
            return Ok(answer);
        }
        let mut shown = match request.tool_input {
            Some(Value::Object(shown)) => shown,
            _ => Map::new(),
        };
        shown.insert("path".into(), json!("drafts/b.md"));
        Ok(answer.with_edited_input(shown))
    }

    fn never_blocks(&self) -> bool {
        true
    }

    fn settled(&self, question_id: &str, outcome: &ApprovedCallOutcome) {
        black_box((question_id, outcome));
    }
}

fn drafts_only(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    match ctx.tool_input["path"].as_str() {
        Some(path) if path.starts_with("drafts/") => Ok(()),
        _ => Err(HookAborted::new("outside drafts/", "drafts-only")),
    }
}

fn registry() -> HookRegistry {
    let registry = HookRegistry::new();
    let registered = registry
        .register_hook(PRE_TOOL_CALL, drafts_only)
        .and_then(|_| {
            registry.register_async_hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("approval-gate"),
                ApprovalGate::for_tools(["write_file"]).pre_hook(),
            )
        });
    if let Err(error) = registered {
        fail("the hooks do not register", error);
    }
    registry
}

/// The median time of one call over `RUNS` runs of `CALLS` calls.
async fn per_call(
    registry: &HookRegistry,
    edit: bool,
    redactor: Option<&Arc<dyn Redact>>,
) -> Duration {
    let source: Arc<dyn HumanInputSource> = Arc::new(Approver { edit });
    let mut input = Map::new();
    input.insert("path".into(), json!("drafts/a.md"));
    input.insert("content".into(), json!("notes"));
    input.insert("token".into(), json!(TOKEN));
    let mut runs = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        for _ in 0..CALLS {
            let mut ctx = ToolCallHookContext::new("write_file", input.clone())
                .with_human_input(Arc::clone(&source));
            let _scope = redactor.map(RedactionScope::enter);
            let (report, ran) = registry
                .dispatcher()
                .begin_call(&TOOL_CALL_POINTS)
                .run_tool_call_async_keeping(&mut ctx, |ctx| {
                    let path = ctx.tool_input["path"].as_str().map(str::to_owned);
                    async move { (ToolOutput::text("written"), path) }
                })
                .await;
            let expected = if edit { "drafts/b.md" } else { "drafts/a.md" };
            if ran.flatten().as_deref() != Some(expected) || report.is_err() {
                fail("the approved call", "did not run with what was approved");
            }
            if redactor.is_some() && ctx.tool_input["token"] != json!(TOKEN) {
                fail("the approved call", "lost its secret to a placeholder");
            }
            black_box(report.ok());
        }
        runs.push(started.elapsed() / u32::try_from(CALLS).unwrap_or(u32::MAX));
    }
    runs.sort();
    runs[RUNS / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| fail("no runtime", error));
    let redactor: Arc<dyn Redact> = Arc::new(SecretRedactor::new());
    runtime.block_on(async {
        let registry = registry();
        // Warm up: the redactor compiles its rules on first use.
        let _ = per_call(&registry, true, Some(&redactor)).await;
        let approved = per_call(&registry, false, None).await;
        let edited = per_call(&registry, true, None).await;
        let redacted_approved = per_call(&registry, false, Some(&redactor)).await;
        let redacted = per_call(&registry, true, Some(&redactor)).await;
        let ns = |d: Duration| d.as_secs_f64() * 1e9;
        println!("approved as asked            {:>9.0} ns per call", ns(approved));
        println!(
            "approved with an edit        {:>9.0} ns per call ({:.2} x; +{:.0} ns for the second round and the merge)",
            ns(edited),
            ns(edited) / ns(approved),
            ns(edited) - ns(approved)
        );
        println!(
            "as asked, redaction on       {:>9.0} ns per call",
            ns(redacted_approved)
        );
        println!(
            "with an edit, redaction on   {:>9.0} ns per call ({:.2} x; +{:.0} ns)",
            ns(redacted),
            ns(redacted) / ns(redacted_approved),
            ns(redacted) - ns(redacted_approved)
        );
    });
}
