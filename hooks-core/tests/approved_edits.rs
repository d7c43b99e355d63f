//! SPEC §11 "Under attack", in the engine: an approver's edit goes
//! through the call's PRE chain again, once, whether the runtime awaits
//! the call or runs it on its thread; the edit is merged back onto the
//! real arguments; and the source hears what became of the call.

use std::sync::{Arc, Mutex, PoisonError};

use hooks_core::runtime::{RedactionScope, TOOL_CALL_POINTS, ToolOutput};
use hooks_core::{
    ApprovedCallOutcome, HookAborted, HookFuture, HookOptions, HookRegistry, HumanAnswer,
    HumanInputError, HumanInputRequest, HumanInputSource, PRE_TOOL_CALL, Redact,
    ToolCallHookContext, async_trait,
};
use serde_json::{Map, Value, json};

/// Approves every question with `edit` (fields put over what it was
/// shown), as `alice`, and keeps what it was asked and told.
#[derive(Default)]
struct Approver {
    edit: Map<String, Value>,
    asked: Mutex<Vec<HumanInputRequest>>,
    told: Mutex<Vec<(String, ApprovedCallOutcome)>>,
}

#[async_trait]
impl HumanInputSource for Approver {
    async fn ask(&self, _request: HumanInputRequest) -> Result<String, HumanInputError> {
        Ok("yes".into())
    }

    async fn answer(&self, request: HumanInputRequest) -> Result<HumanAnswer, HumanInputError> {
        let mut shown = match &request.tool_input {
            Some(Value::Object(shown)) => shown.clone(),
            _ => Map::new(),
        };
        let n = {
            let mut asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
            asked.push(request);
            asked.len()
        };
        let answer = HumanAnswer::new("yes")
            .with_answered_by("alice")
            .with_question_id(format!("q{n}"));
        if self.edit.is_empty() {
            return Ok(answer);
        }
        shown.extend(self.edit.clone());
        Ok(answer.with_edited_input(shown))
    }

    fn never_blocks(&self) -> bool {
        true
    }

    fn settled(&self, question_id: &str, outcome: &ApprovedCallOutcome) {
        self.told
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((question_id.to_owned(), outcome.clone()));
    }
}

impl Approver {
    fn editing(edit: Value) -> Arc<Approver> {
        Arc::new(Approver {
            edit: edit.as_object().cloned().unwrap_or_default(),
            ..Approver::default()
        })
    }

    fn asked(&self) -> usize {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn told(&self) -> Vec<(String, ApprovedCallOutcome)> {
        self.told
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Refuses paths outside `drafts/`.
fn drafts_only(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    match ctx.tool_input["path"].as_str() {
        Some(path) if path.starts_with("drafts/") => Ok(()),
        _ => Err(HookAborted::new("outside drafts/", "drafts-only")),
    }
}

/// Asks a person, and runs the call with their edit.
fn gate(ctx: &mut ToolCallHookContext) -> HookFuture<'_, Result<(), HookAborted>> {
    let question = ctx.request_approval("Write it?", "yes/no");
    Box::pin(async move {
        let answer = question
            .await
            .map_err(|error| HookAborted::new(error.to_string(), "gate"))?;
        if answer.text != "yes" {
            return Err(HookAborted::new("refused", "gate"));
        }
        if let Some(edit) = answer.edited_input {
            ctx.tool_input = edit;
        }
        Ok(())
    })
}

/// The guard, then the gate.
fn registry() -> HookRegistry {
    let registry = HookRegistry::new();
    registry
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("drafts-only"),
            drafts_only,
        )
        .and_then(|_| {
            registry.register_async_hook_with(PRE_TOOL_CALL, HookOptions::new().name("gate"), gate)
        })
        .expect("the hooks register");
    registry
}

fn call(source: &Arc<Approver>, input: Value) -> ToolCallHookContext {
    ToolCallHookContext::new("write_file", input.as_object().cloned().unwrap_or_default())
        .with_human_input(Arc::clone(source) as Arc<dyn HumanInputSource>)
}

/// Runs one call awaiting it; returns the arguments the tool ran with.
async fn run_awaited(registry: &HookRegistry, ctx: &mut ToolCallHookContext) -> Option<Value> {
    let (_, ran) = registry
        .dispatcher()
        .begin_call(&TOOL_CALL_POINTS)
        .run_tool_call_async_keeping(ctx, |ctx| {
            let input = Value::Object(ctx.tool_input.clone());
            async move { (ToolOutput::text("written"), input) }
        })
        .await;
    ran
}

/// Runs one call on this thread; returns the arguments the tool ran with.
fn run_on_thread(registry: &HookRegistry, ctx: &mut ToolCallHookContext) -> Option<Value> {
    let mut ran = None;
    let _ = registry
        .dispatcher()
        .begin_call(&TOOL_CALL_POINTS)
        .run_tool_call(ctx, |ctx| {
            ran = Some(Value::Object(ctx.tool_input.clone()));
            ToolOutput::text("written")
        });
    ran
}

#[tokio::test]
async fn an_edit_past_an_earlier_guard_is_refused_by_it_when_awaited() {
    let source = Approver::editing(json!({"path": "/etc/cron.d/evil"}));
    let registry = registry();
    let mut ctx = call(&source, json!({"path": "drafts/a.md"}));
    assert_eq!(run_awaited(&registry, &mut ctx).await, None);
    assert_eq!(
        source.told(),
        [(
            "q1".to_owned(),
            ApprovedCallOutcome::Refused {
                source: "drafts-only".into(),
                reason: "outside drafts/".into()
            }
        )]
    );
}

#[test]
fn an_edit_past_an_earlier_guard_is_refused_by_it_on_the_calls_thread() {
    let source = Approver::editing(json!({"path": "/etc/cron.d/evil"}));
    let registry = registry();
    let mut ctx = call(&source, json!({"path": "drafts/a.md"}));
    assert_eq!(run_on_thread(&registry, &mut ctx), None);
    assert!(
        matches!(&source.told()[..], [(_, ApprovedCallOutcome::Refused { source, .. })] if source == "drafts-only"),
        "{:?}",
        source.told()
    );
}

#[tokio::test]
async fn an_edit_the_guards_accept_runs_once_asked_once_and_is_told_it_ran() {
    let source = Approver::editing(json!({"path": "drafts/b.md"}));
    let registry = registry();
    let mut ctx = call(&source, json!({"path": "drafts/a.md"}));
    assert_eq!(
        run_awaited(&registry, &mut ctx).await,
        Some(json!({"path": "drafts/b.md"}))
    );
    // The gate asked again on the second round, about exactly what was
    // approved: answered from the call's ledger, not by a person.
    assert_eq!(source.asked(), 1);
    assert_eq!(source.told(), [("q1".to_owned(), ApprovedCallOutcome::Ran)]);
}

/// Redacts one secret.
struct Hide(&'static str);

impl Redact for Hide {
    fn redact<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        if text.contains(self.0) {
            std::borrow::Cow::Owned(text.replace(self.0, "[REDACTED]"))
        } else {
            std::borrow::Cow::Borrowed(text)
        }
    }
}

#[tokio::test]
async fn a_redacted_value_left_as_shown_reaches_the_tool_and_a_changed_one_is_refused() {
    let redactor: Arc<dyn Redact> = Arc::new(Hide("hunter2"));
    let registry = registry();

    let source = Approver::editing(json!({"path": "drafts/b.md"}));
    let mut ctx = call(
        &source,
        json!({"path": "drafts/a.md", "password": "hunter2"}),
    );
    let ran = {
        let _scope = RedactionScope::enter(&redactor);
        run_awaited(&registry, &mut ctx).await
    };
    let shown = source.asked.lock().unwrap_or_else(PoisonError::into_inner)[0]
        .tool_input
        .clone();
    assert_eq!(
        shown,
        Some(json!({"path": "drafts/a.md", "password": "[REDACTED]"}))
    );
    assert_eq!(
        ran,
        Some(json!({"path": "drafts/b.md", "password": "hunter2"}))
    );

    let source = Approver::editing(json!({"password": "[REDACTED]!"}));
    let mut ctx = call(
        &source,
        json!({"path": "drafts/a.md", "password": "hunter2"}),
    );
    let ran = {
        let _scope = RedactionScope::enter(&redactor);
        run_awaited(&registry, &mut ctx).await
    };
    assert_eq!(ran, None, "a changed placeholder never reaches the tool");
    assert!(
        matches!(&source.told()[..], [(_, ApprovedCallOutcome::Refused { source, .. })] if source == "approval-recheck"),
        "{:?}",
        source.told()
    );
}
