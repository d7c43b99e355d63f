//! Property test: random chains of hooks that proceed, block, rewrite, panic
//! or abort, fail-open and fail-closed mixed, always come out as a plain
//! model of rules 11–14 says (which hooks ran, whether the tool ran, the
//! final result, the events).
//!
//! `HOOKS_TEST_SCALE` multiplies the number of cases (CI runs it larger).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hooks_core::runtime::{ToolOutput, blocked_message, withheld_message};
use hooks_core::{
    Event, HookAborted, HookOptions, HookRegistry, POST_TOOL_CALL, PRE_TOOL_CALL,
    ToolCallHookContext,
};
use proptest::prelude::*;

mod common;
use common::{cases, quiet_deliberate_panics};

#[derive(Debug, Clone)]
enum Pre {
    Proceed,
    Block,
    LegacyFalse,
    Panic { fail_closed: bool },
}

#[derive(Debug, Clone)]
enum Post {
    Keep,
    Replace(String),
    Abort,
    Panic { fail_closed: bool },
}

fn pre_strategy() -> impl Strategy<Value = Pre> {
    prop_oneof![
        4 => Just(Pre::Proceed),
        1 => Just(Pre::Block),
        1 => Just(Pre::LegacyFalse),
        1 => any::<bool>().prop_map(|fail_closed| Pre::Panic { fail_closed }),
    ]
}

fn post_strategy() -> impl Strategy<Value = Post> {
    prop_oneof![
        3 => Just(Post::Keep),
        3 => "[a-z]{0,4}".prop_map(Post::Replace),
        1 => Just(Post::Abort),
        1 => any::<bool>().prop_map(|fail_closed| Post::Panic { fail_closed }),
    ]
}

/// What rules 11–14 say a chain comes to.
#[derive(Debug, PartialEq)]
struct Expected {
    ran: Vec<String>,
    tool_ran: bool,
    result: Result<String, String>,
    blocked_source: Option<String>,
    panics: usize,
    dispatched: Vec<(&'static str, usize)>,
}

fn model(pre: &[Pre], post: &[Post]) -> Expected {
    let mut ran = Vec::new();
    let mut panics = 0;
    let mut dispatched = Vec::new();
    let mut blocked_source = None;
    for (i, hook) in pre.iter().enumerate() {
        ran.push(format!("pre{i}"));
        match hook {
            Pre::Proceed | Pre::Panic { fail_closed: false } => {
                if matches!(hook, Pre::Panic { .. }) {
                    panics += 1;
                }
            }
            Pre::Block => blocked_source = Some("policy".to_owned()),
            Pre::LegacyFalse => blocked_source = Some(format!("pre{i}")),
            Pre::Panic { fail_closed: true } => {
                panics += 1;
                blocked_source = Some(format!("pre{i}"));
            }
        }
        if blocked_source.is_some() {
            break;
        }
    }
    if !pre.is_empty() {
        let outcome = if blocked_source.is_some() {
            "aborted"
        } else {
            "proceeded"
        };
        dispatched.push((outcome, ran.len()));
    }
    let tool_ran = blocked_source.is_none();
    let mut text = if tool_ran {
        "raw".to_owned()
    } else {
        blocked_message("probe")
    };
    let mut aborted = false;
    let mut modified = false;
    let post_start = ran.len();
    for (i, hook) in post.iter().enumerate() {
        ran.push(format!("post{i}"));
        match hook {
            Post::Keep => {}
            Post::Replace(s) => {
                text = s.clone();
                modified = true;
            }
            Post::Abort => {
                aborted = true;
                break;
            }
            Post::Panic { fail_closed } => {
                panics += 1;
                if *fail_closed {
                    text = withheld_message("probe");
                    modified = true;
                }
            }
        }
    }
    if !post.is_empty() {
        let outcome = if aborted {
            "aborted"
        } else if modified {
            "modified"
        } else {
            "proceeded"
        };
        dispatched.push((outcome, ran.len() - post_start));
    }
    Expected {
        ran,
        tool_ran,
        result: if aborted {
            Err("post abort".to_owned())
        } else {
            Ok(text)
        },
        // A POST abort ends the run: no report, so no block to report.
        blocked_source: if aborted { None } else { blocked_source },
        panics,
        dispatched,
    }
}

fn observe(pre: &[Pre], post: &[Post]) -> Expected {
    let registry = HookRegistry::new();
    let ran = Arc::new(Mutex::new(Vec::new()));
    for (i, hook) in pre.iter().cloned().enumerate() {
        let ran = ran.clone();
        let name = format!("pre{i}");
        let mut options = HookOptions::new().name(name.clone());
        if matches!(hook, Pre::Panic { fail_closed: true }) {
            options = options.fail_closed();
        }
        if let Pre::LegacyFalse = hook {
            registry.register_before_tool_call_hook_with(
                options,
                move |_: &mut ToolCallHookContext| {
                    ran.lock().expect("lock").push(name.clone());
                    false
                },
            );
            continue;
        }
        registry
            .register_hook_with(
                PRE_TOOL_CALL,
                options,
                move |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                    ran.lock().expect("lock").push(name.clone());
                    match hook {
                        Pre::Proceed => Ok(()),
                        Pre::Block => Err(HookAborted::new("blocked", "policy")),
                        Pre::LegacyFalse => unreachable!("registered above"),
                        Pre::Panic { .. } => panic!("pre hook bug"),
                    }
                },
            )
            .expect("fits PRE");
    }
    for (i, hook) in post.iter().cloned().enumerate() {
        let ran = ran.clone();
        let name = format!("post{i}");
        let mut options = HookOptions::new().name(name.clone());
        if matches!(hook, Post::Panic { fail_closed: true }) {
            options = options.fail_closed();
        }
        registry
            .register_hook_with(
                POST_TOOL_CALL,
                options,
                move |_: &mut ToolCallHookContext| -> Result<Option<String>, HookAborted> {
                    ran.lock().expect("lock").push(name.clone());
                    match &hook {
                        Post::Keep => Ok(None),
                        Post::Replace(s) => Ok(Some(s.clone())),
                        Post::Abort => Err(HookAborted::new("post abort", "guard")),
                        Post::Panic { .. } => panic!("post hook bug"),
                    }
                },
            )
            .expect("fits POST");
    }
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    registry
        .events()
        .subscribe(move |event| sink.lock().expect("lock").push(event.clone()));

    let tool_runs = AtomicUsize::new(0);
    let mut ctx = ToolCallHookContext::new("probe", Default::default());
    let report = registry.run_tool_call(&mut ctx, |_| {
        tool_runs.fetch_add(1, Ordering::SeqCst);
        ToolOutput::text("raw")
    });
    let events = events.lock().expect("lock").clone();
    let ran = ran.lock().expect("lock").clone();
    Expected {
        ran,
        tool_ran: tool_runs.load(Ordering::SeqCst) == 1,
        blocked_source: report
            .as_ref()
            .ok()
            .and_then(|r| r.blocked.as_ref())
            .map(|a| a.source.clone()),
        result: report.map(|r| r.observation).map_err(|a| a.reason),
        panics: events
            .iter()
            .filter(|e| matches!(e, Event::HookPanicked(_)))
            .count(),
        dispatched: events
            .iter()
            .filter_map(|e| match e {
                Event::HookDispatched(d) => Some((d.outcome, d.hooks_run)),
                _ => None,
            })
            .collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_chains_follow_rules_11_to_14(
        pre in proptest::collection::vec(pre_strategy(), 0..6),
        post in proptest::collection::vec(post_strategy(), 0..6),
    ) {
        static QUIET: std::sync::Once = std::sync::Once::new();
        QUIET.call_once(quiet_deliberate_panics);
        prop_assert_eq!(observe(&pre, &post), model(&pre, &post));
    }
}
