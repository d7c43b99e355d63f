//! Property test: random chains at the points beyond the tool calls —
//! hooks that continue, replace, abort or panic (fail-open or
//! fail-closed), some filtered to an agent — come out as a plain model of
//! SPEC §6 and rules 11–14 says: which hooks ran, the value the point ends
//! with, the outcome, the abort's source, the events.
//!
//! `HOOKS_TEST_SCALE` multiplies the number of cases (CI runs it larger).

use std::sync::{Arc, Mutex, PoisonError};

use hooks_core::{
    AgentInfo, ChatMessage, DispatchOutcome, Event, HookAborted, HookOptions, HookRegistry, INPUT,
    InputContext, Inputs, LlmCallHookContext, POST_STEP, PRE_MODEL_CALL, StepContext, StepKind,
};
use proptest::prelude::*;

mod common;
use common::{cases, quiet_deliberate_panics};

#[derive(Debug, Clone)]
enum Act {
    Continue,
    Replace(String),
    Abort,
    Panic { fail_closed: bool },
}

#[derive(Debug, Clone)]
struct Hook {
    act: Act,
    /// Limited to the role `Writer` (the call's agent is `Researcher`).
    other_agent: bool,
}

fn hook_strategy(can_replace: bool, can_filter: bool) -> impl Strategy<Value = Hook> {
    let act = prop_oneof![
        3 => Just(Act::Continue),
        if can_replace { 3 } else { 0 } => "[a-z]{0,4}".prop_map(Act::Replace),
        1 => Just(Act::Abort),
        1 => any::<bool>().prop_map(|fail_closed| Act::Panic { fail_closed }),
    ];
    (act, any::<bool>()).prop_map(move |(act, filtered)| Hook {
        act,
        other_agent: can_filter && filtered,
    })
}

/// What the chain should come to: the names of the hooks that ran, the
/// final value, the outcome's name, the abort source, the panics.
#[derive(Debug, PartialEq)]
struct Expected {
    ran: Vec<String>,
    value: String,
    outcome: &'static str,
    source: Option<String>,
    events: Vec<usize>,
}

fn model(hooks: &[Hook], start: &str) -> Expected {
    let mut ran = Vec::new();
    let mut value = start.to_owned();
    let mut modified = false;
    let mut source = None;
    for (index, hook) in hooks.iter().enumerate() {
        if hook.other_agent {
            continue;
        }
        let name = format!("h{index}");
        ran.push(name.clone());
        match &hook.act {
            Act::Continue => {}
            Act::Replace(text) => {
                value = text.clone();
                modified = true;
            }
            Act::Abort => {
                source = Some(name);
                break;
            }
            Act::Panic { fail_closed: false } => {}
            Act::Panic { fail_closed: true } => {
                source = Some(name);
                break;
            }
        }
    }
    let outcome = match (&source, modified) {
        (Some(_), _) => "aborted",
        (None, true) => "modified",
        (None, false) => "proceeded",
    };
    Expected {
        events: if ran.is_empty() {
            vec![]
        } else {
            vec![ran.len()]
        },
        ran,
        value,
        outcome,
        source,
    }
}

struct Researcher;

impl AgentInfo for Researcher {
    fn role(&self) -> &str {
        "Researcher"
    }
}

type Log = Arc<Mutex<Vec<String>>>;

fn record(log: &Log, name: &str) {
    log.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(name.to_owned());
}

fn options(index: usize, hook: &Hook, can_filter: bool) -> HookOptions {
    let mut options = HookOptions::new().name(format!("h{index}"));
    if can_filter && hook.other_agent {
        options = options.agents(["Writer"]);
    }
    if matches!(hook.act, Act::Panic { fail_closed: true }) {
        options = options.fail_closed();
    }
    options
}

/// Registers `hooks` at the point, each recording its name and acting as
/// told; `replace` turns a text into the point's replacement.
macro_rules! register_all {
    ($registry:expr, $point:expr, $ctx:ty, $hooks:expr, $log:expr, $can_filter:expr, $replace:expr) => {
        for (index, hook) in $hooks.iter().enumerate() {
            let log = Arc::clone(&$log);
            let act = hook.act.clone();
            let name = format!("h{index}");
            $registry
                .register_hook_with(
                    $point,
                    options(index, hook, $can_filter),
                    move |_: &mut $ctx| {
                        record(&log, &name);
                        match &act {
                            Act::Continue => Ok(None),
                            Act::Replace(text) => Ok(Some($replace(text.clone()))),
                            Act::Abort => Err(HookAborted::with_reason("stop")),
                            Act::Panic { .. } => panic!("deliberate hook bug"),
                        }
                    },
                )
                .expect("the options fit the point");
        }
    };
}

fn events_of(registry: &HookRegistry) -> Arc<Mutex<Vec<usize>>> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    registry.events().subscribe(move |event| {
        if let Event::HookDispatched(dispatched) = event {
            sink.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(dispatched.hooks_run);
        }
    });
    events
}

fn finish(
    outcome: DispatchOutcome,
    value: String,
    log: &Log,
    events: &Arc<Mutex<Vec<usize>>>,
) -> Expected {
    Expected {
        ran: log.lock().unwrap_or_else(PoisonError::into_inner).clone(),
        value,
        outcome: outcome.as_str(),
        source: outcome.aborted().map(|abort| abort.source.clone()),
        events: events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone(),
    }
}

fn observe_post_step(hooks: &[Hook]) -> Expected {
    let registry = HookRegistry::new();
    let log: Log = Arc::default();
    register_all!(
        registry,
        POST_STEP,
        StepContext,
        hooks,
        log,
        true,
        |text: String| text
    );
    let events = events_of(&registry);
    let mut ctx =
        StepContext::new(StepKind::Task, "research", "start").with_agent(Arc::new(Researcher));
    let outcome = registry.dispatch(POST_STEP, &mut ctx);
    finish(outcome, ctx.payload, &log, &events)
}

fn observe_input(hooks: &[Hook]) -> Expected {
    let registry = HookRegistry::new();
    let log: Log = Arc::default();
    register_all!(
        registry,
        INPUT,
        InputContext,
        hooks,
        log,
        false,
        |text: String| { Inputs::from([("topic", text)]) }
    );
    let events = events_of(&registry);
    let mut ctx = InputContext::new([("topic", "start")]);
    let outcome = registry.dispatch(INPUT, &mut ctx);
    let value = ctx.inputs.get("topic").unwrap_or_default().to_owned();
    finish(outcome, value, &log, &events)
}

fn observe_pre_model_call(hooks: &[Hook]) -> Expected {
    let registry = HookRegistry::new();
    let log: Log = Arc::default();
    for (index, hook) in hooks.iter().enumerate() {
        let log = Arc::clone(&log);
        let act = hook.act.clone();
        let name = format!("h{index}");
        registry
            .register_hook_with(
                PRE_MODEL_CALL,
                options(index, hook, true),
                move |_: &mut LlmCallHookContext| {
                    record(&log, &name);
                    match &act {
                        Act::Continue | Act::Replace(_) => Ok(()),
                        Act::Abort => Err(HookAborted::with_reason("stop")),
                        Act::Panic { .. } => panic!("deliberate hook bug"),
                    }
                },
            )
            .expect("the options fit the point");
    }
    let events = events_of(&registry);
    let mut ctx =
        LlmCallHookContext::new(vec![ChatMessage::user("start")]).with_agent(Arc::new(Researcher));
    let outcome = registry.dispatch(PRE_MODEL_CALL, &mut ctx);
    let value = ctx
        .messages
        .first()
        .map(|m| m.content.clone())
        .unwrap_or_default();
    finish(outcome, value, &log, &events)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_post_step_chains_follow_the_model(
        hooks in proptest::collection::vec(hook_strategy(true, true), 0..7),
    ) {
        static QUIET: std::sync::Once = std::sync::Once::new();
        QUIET.call_once(quiet_deliberate_panics);
        prop_assert_eq!(observe_post_step(&hooks), model(&hooks, "start"));
    }

    #[test]
    fn random_input_chains_follow_the_model(
        hooks in proptest::collection::vec(hook_strategy(true, false), 0..7),
    ) {
        static QUIET: std::sync::Once = std::sync::Once::new();
        QUIET.call_once(quiet_deliberate_panics);
        prop_assert_eq!(observe_input(&hooks), model(&hooks, "start"));
    }

    #[test]
    fn random_pre_model_call_chains_follow_the_model(
        hooks in proptest::collection::vec(hook_strategy(false, true), 0..7),
    ) {
        static QUIET: std::sync::Once = std::sync::Once::new();
        QUIET.call_once(quiet_deliberate_panics);
        prop_assert_eq!(observe_pre_model_call(&hooks), model(&hooks, "start"));
    }
}
