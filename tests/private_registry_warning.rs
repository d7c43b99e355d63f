//! A crew given an empty registry of its own, in a program with attribute
//! hooks, is warned about once: those hooks do not run for it. One given
//! `HookRegistry::with_static_hooks()` keeps them, without a warning.
//!
//! Each case runs in a child process of its own: the warning is once per
//! process, and it goes to standard error.

use std::process::Command;
use std::sync::Arc;

use crew_runtime::prelude::*;

#[on(PRE_TOOL_CALL, tools = ["lookup"])]
fn mark_lookup(ctx: &mut ToolCallHookContext) {
    ctx.tool_input.insert("marked".into(), true.into());
}

const CHILD: &str = "PRIVATE_REGISTRY_WARNING_CHILD";

fn crew(registry: HookRegistry) -> Crew {
    let agent = Agent::builder("Clerk")
        .llm(Arc::new(ScriptedLlm::new().answer("done")))
        .build();
    Crew::builder()
        .agent(agent.clone())
        .task(Task::builder("File it").agent(&agent).build())
        .global_registry(Arc::new(registry))
        .build()
        .expect("builds")
}

/// Runs this test binary's `case` in a child with `mode`, returning what
/// it wrote on standard error.
fn child_stderr(case: &str, mode: &str) -> String {
    let output = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", case, "--nocapture", "--test-threads=1"])
        .env(CHILD, mode)
        .output()
        .expect("the child runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

const WARNING: &str = "warning: a crew was given an empty registry of its own";

#[test]
fn an_empty_private_registry_is_warned_about_once_and_static_hooks_keep_the_attribute_hooks() {
    match std::env::var(CHILD).as_deref() {
        Ok("empty") => {
            let _ = crew(HookRegistry::new());
            let _ = crew(HookRegistry::new());
            return;
        }
        Ok("static") => {
            let crew = crew(HookRegistry::with_static_hooks());
            assert_eq!(
                crew.global_registry().get_hooks(PRE_TOOL_CALL).len(),
                1,
                "the #[on] hook is in the registry"
            );
            return;
        }
        _ => {}
    }
    let case =
        "an_empty_private_registry_is_warned_about_once_and_static_hooks_keep_the_attribute_hooks";
    let empty = child_stderr(case, "empty");
    assert_eq!(empty.matches(WARNING).count(), 1, "{empty}");
    assert!(
        empty.contains("HookRegistry::with_static_hooks()"),
        "{empty}"
    );
    let kept = child_stderr(case, "static");
    assert_eq!(kept.matches(WARNING).count(), 0, "{kept}");
}
