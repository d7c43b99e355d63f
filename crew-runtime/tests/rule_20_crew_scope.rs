//! Rule 20 (and rule 3 for crews): a crew's own hooks fire only for its
//! calls, in their place in the registration order.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::HookOrigin;
use crew_runtime::hooks_core::__private::CrewScope;
use crew_runtime::prelude::*;
use crew_runtime::runtime::ToolOutput;
use crew_runtime::{POST_STEP, StepContext};

fn searching_crew(
    name: &str,
    global: &Arc<HookRegistry>,
    llm: &Arc<ScriptedLlm>,
) -> crew_runtime::CrewBuilder {
    let researcher = agent("Researcher", vec![search_tool(&log())], llm);
    Crew::builder()
        .name(name)
        .agent(researcher.clone())
        .task(Task::builder("Research").agent(&researcher).build())
        .global_registry(global.clone())
}

fn search_then_answer() -> Arc<ScriptedLlm> {
    Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .answer("done"),
    )
}

#[test]
fn crew_scoped_hooks_fire_only_for_their_crew() {
    let global = fresh_registry();
    let fired = log();

    // Crew alpha: a hook given to the builder.
    let sink = fired.clone();
    let alpha = searching_crew("alpha", &global, &search_then_answer())
        .hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let crew = ctx.crew_as::<Crew>().map(|c| c.name().to_owned());
            push(&sink, ("alpha hook", crew));
        })
        .build()
        .expect("builds");

    // Crew beta: a hook registered on the built crew's own registry.
    let beta = searching_crew("beta", &global, &search_then_answer())
        .build()
        .expect("builds");
    let sink = fired.clone();
    beta.hooks()
        .register_hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let crew = ctx.crew_as::<Crew>().map(|c| c.name().to_owned());
            push(&sink, ("beta hook", crew));
        })
        .expect("registers");

    alpha.kickoff_blocking(()).expect("alpha runs");
    beta.kickoff_blocking(()).expect("beta runs");
    // A call outside any crew, on the same global registry.
    let mut ctx = ToolCallHookContext::new("web_search", Default::default());
    global
        .run_tool_call(&mut ctx, |_| ToolOutput::text("outside"))
        .expect("no abort");

    assert_eq!(
        take(&fired),
        [
            ("alpha hook", Some("alpha".to_owned())),
            ("beta hook", Some("beta".to_owned())),
        ]
    );
    assert!(
        global.get_hooks(PRE_TOOL_CALL).is_empty(),
        "crew hooks are never global"
    );
    let alpha_hooks = alpha.hooks().get_hooks(PRE_TOOL_CALL);
    assert_eq!(alpha_hooks.len(), 1);
    assert_eq!(
        alpha_hooks[0].origin,
        HookOrigin::Crew {
            crew: "alpha".into()
        }
    );
    assert!(
        std::ptr::eq(alpha.crew_hooks(), alpha.hooks()),
        "CrewScope names the same registry"
    );
}

#[test]
fn each_built_crew_has_fresh_hooks() {
    let global = fresh_registry();
    let build = || {
        searching_crew("same", &global, &search_then_answer())
            .hook(POST_TOOL_CALL, |_: &mut ToolCallHookContext| {
                Some("scoped".to_owned())
            })
            .build()
            .expect("builds")
    };
    let first = build();
    let second = build();

    assert_eq!(first.hooks().get_hooks(POST_TOOL_CALL).len(), 1);
    assert_eq!(
        second.hooks().get_hooks(POST_TOOL_CALL).len(),
        1,
        "no doubling"
    );
    // A clone is the same crew, sharing its hooks.
    let clone = first.clone();
    clone
        .hooks()
        .register_hook(POST_TOOL_CALL, |_: &mut ToolCallHookContext| {})
        .expect("registers");
    assert_eq!(first.hooks().get_hooks(POST_TOOL_CALL).len(), 2);
    assert_eq!(second.hooks().get_hooks(POST_TOOL_CALL).len(), 1);
}

#[test]
fn crew_hooks_take_their_place_in_registration_order() {
    let global = fresh_registry();
    let order = log();
    let sink = order.clone();
    global
        .register_hook(PRE_TOOL_CALL, move |_: &mut ToolCallHookContext| {
            push(&sink, "global before")
        })
        .expect("registers");
    let sink = order.clone();
    let llm = search_then_answer();
    let crew = searching_crew("ordered", &global, &llm)
        .hook(PRE_TOOL_CALL, move |_: &mut ToolCallHookContext| {
            push(&sink, "crew")
        })
        .build()
        .expect("builds");
    let sink = order.clone();
    global
        .register_hook(PRE_TOOL_CALL, move |_: &mut ToolCallHookContext| {
            push(&sink, "global after")
        })
        .expect("registers");

    crew.kickoff_blocking(()).expect("runs");

    assert_eq!(take(&order), ["global before", "crew", "global after"]);
    assert_eq!(
        crew.explain("web_search", "Researcher")
            .running(PRE_TOOL_CALL)
            .len(),
        3
    );
}

#[test]
fn a_crew_hook_with_a_filter_its_point_does_not_take_fails_the_build() {
    // A wrong return type no longer reaches run time: it does not compile
    // (see the compile_fail doctest of `HookRegistry::register_hook`).
    let global = fresh_registry();
    let result = searching_crew("typo", &global, &search_then_answer())
        .hook_with(
            POST_STEP,
            HookOptions::new().tools(["web_search"]),
            |_: &mut StepContext| {},
        )
        .build();

    assert!(
        matches!(result, Err(BuildError::Register(_))),
        "expected a registration error, got {result:?}"
    );
}
