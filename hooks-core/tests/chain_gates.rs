//! SPEC §13 "Parking", in the engine: a source that keeps gates hears
//! where a call's PRE chain asks (the hook, its place, the arguments the
//! hooks before it left), and a call resumed at that gate runs the chain
//! from there: the hooks before it do not run again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use hooks_core::runtime::{TOOL_CALL_POINTS, ToolOutput};
use hooks_core::{
    ChainGate, GateFuture, HookAborted, HookFuture, HookOptions, HookRegistry, HumanAnswer,
    HumanInputError, HumanInputRequest, HumanInputSource, PRE_TOOL_CALL, ToolCallHookContext,
    async_trait,
};
use serde_json::{Map, Value, json};

/// Approves every question (with `edit` put over the arguments, if any),
/// keeps the gates it is told of, and refuses to keep them when `broken`.
#[derive(Default)]
struct Keeper {
    edit: Option<Map<String, Value>>,
    broken: bool,
    gates: Mutex<Vec<ChainGate>>,
    asked: AtomicUsize,
}

#[async_trait]
impl HumanInputSource for Keeper {
    async fn ask(&self, _request: HumanInputRequest) -> Result<String, HumanInputError> {
        Ok("yes".into())
    }

    async fn answer(&self, request: HumanInputRequest) -> Result<HumanAnswer, HumanInputError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let answer = HumanAnswer::new("yes").with_answered_by("alice");
        match (&self.edit, request.tool_input) {
            (Some(edit), Some(Value::Object(mut shown))) => {
                shown.extend(edit.clone());
                Ok(answer.with_edited_input(shown))
            }
            _ => Ok(answer),
        }
    }

    fn never_blocks(&self) -> bool {
        true
    }

    fn keeps_gates(&self) -> bool {
        true
    }

    fn keep_gate(&self, gate: ChainGate) -> GateFuture {
        self.gates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(gate);
        let broken = self.broken;
        Box::pin(async move {
            if broken {
                return Err(HumanInputError::SourceFailed("the journal is down".into()));
            }
            Ok(())
        })
    }
}

impl Keeper {
    fn gates(&self) -> Vec<ChainGate> {
        self.gates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Asks a person, and runs the call with their edit.
fn gate(ctx: &mut ToolCallHookContext) -> HookFuture<'_, Result<(), HookAborted>> {
    let question = ctx.request_approval("Refund it?", "yes/no");
    Box::pin(async move {
        let answer = question
            .await
            .map_err(|error| HookAborted::new(error.to_string(), "gate"))?;
        if let Some(edit) = answer.edited_input {
            ctx.tool_input = edit;
        }
        Ok(())
    })
}

/// A counter that stamps the call's arguments, the gate, and a counter
/// after it; and the two counts.
fn registry() -> (HookRegistry, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let registry = HookRegistry::new();
    let (before, after) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (counted, counted_after) = (Arc::clone(&before), Arc::clone(&after));
    registry
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("stamp"),
            move |ctx: &mut ToolCallHookContext| {
                counted.fetch_add(1, Ordering::SeqCst);
                ctx.tool_input.insert("token".into(), json!("s3cret"));
            },
        )
        .and_then(|_| {
            registry.register_async_hook_with(PRE_TOOL_CALL, HookOptions::new().name("gate"), gate)
        })
        .and_then(|_| {
            registry.register_hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("after"),
                move |_: &mut ToolCallHookContext| {
                    counted_after.fetch_add(1, Ordering::SeqCst);
                },
            )
        })
        .expect("the hooks register");
    (registry, before, after)
}

/// Runs one call of `refund` on `order` through `registry`, asking
/// `source`, from `gate` when given; the arguments the tool ran with.
async fn refund(
    registry: &HookRegistry,
    source: &Arc<Keeper>,
    gate: Option<ChainGate>,
) -> Option<Value> {
    let mut input = Map::new();
    input.insert("order".into(), json!("A-1"));
    let mut ctx = ToolCallHookContext::new("refund", input)
        .with_human_input(Arc::clone(source) as Arc<dyn HumanInputSource>);
    if let Some(gate) = gate {
        ctx.resume_chain_at(gate);
    }
    let (_, ran) = registry
        .dispatcher()
        .begin_call(&TOOL_CALL_POINTS)
        .run_tool_call_async_keeping(&mut ctx, |ctx| {
            let input = Value::Object(ctx.tool_input.clone());
            async move { (ToolOutput::text("refunded"), input) }
        })
        .await;
    ran
}

#[tokio::test]
async fn a_source_that_keeps_gates_hears_the_hook_its_place_and_the_arguments_it_got() {
    let (registry, _, _) = registry();
    let source = Arc::new(Keeper::default());
    refund(&registry, &source, None).await.expect("runs");
    let gates = source.gates();
    assert_eq!(gates.len(), 1, "{gates:?}");
    assert_eq!((gates[0].position, gates[0].hook.as_str()), (1, "gate"));
    assert_eq!(
        Value::Object(gates[0].input.clone()),
        json!({"order": "A-1", "token": "s3cret"})
    );
    assert!(!format!("{:?}", gates[0]).contains("s3cret"));
}

#[tokio::test]
async fn a_call_resumed_at_its_gate_runs_no_hook_before_it_and_gets_the_kept_arguments() {
    let (registry, before, after) = registry();
    let first = Arc::new(Keeper::default());
    refund(&registry, &first, None).await.expect("runs");
    let gate = first.gates().remove(0);
    let resumed = Arc::new(Keeper::default());
    let ran = refund(&registry, &resumed, Some(gate)).await;
    assert_eq!(ran, Some(json!({"order": "A-1", "token": "s3cret"})));
    assert_eq!(before.load(Ordering::SeqCst), 1, "not run again");
    assert_eq!(after.load(Ordering::SeqCst), 2, "runs in each");
    assert_eq!(
        resumed.asked.load(Ordering::SeqCst),
        1,
        "the gate asks again"
    );
}

#[tokio::test]
async fn a_gate_of_another_chain_runs_the_whole_chain_on_the_calls_own_arguments() {
    let (registry, before, _) = registry();
    let elsewhere = ChainGate::new(1, "another_gate", Map::new());
    let source = Arc::new(Keeper::default());
    let ran = refund(&registry, &source, Some(elsewhere)).await;
    assert_eq!(ran, Some(json!({"order": "A-1", "token": "s3cret"})));
    assert_eq!(before.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_edited_call_keeps_its_gate_once_and_not_on_its_second_round() {
    let (registry, before, _) = registry();
    let source = Arc::new(Keeper {
        edit: json!({"order": "A-2"}).as_object().cloned(),
        ..Keeper::default()
    });
    let ran = refund(&registry, &source, None).await;
    assert_eq!(ran, Some(json!({"order": "A-2", "token": "s3cret"})));
    assert_eq!(
        before.load(Ordering::SeqCst),
        2,
        "the second round runs all"
    );
    assert_eq!(source.gates().len(), 1, "{:?}", source.gates());
}

#[tokio::test]
async fn a_gate_that_cannot_be_kept_refuses_the_question_and_blocks_the_call() {
    let (registry, _, _) = registry();
    let source = Arc::new(Keeper {
        broken: true,
        ..Keeper::default()
    });
    assert_eq!(refund(&registry, &source, None).await, None, "blocked");
    assert_eq!(source.asked.load(Ordering::SeqCst), 0, "nobody was asked");
}
