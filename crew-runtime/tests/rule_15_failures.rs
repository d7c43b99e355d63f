//! Rule 15: failing tools, unknown tools and malformed arguments never
//! crash a run; the model is told what went wrong.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::InterceptionPoint;
use crew_runtime::Point;
use crew_runtime::prelude::*;

/// Records every hook run at either point as `(point, tool_name, has_tool,
/// tool_result)`.
fn watch_hooks(global: &HookRegistry) -> Log<(InterceptionPoint, String, bool, Option<String>)> {
    fn watch<P: Point<Context = ToolCallHookContext>>(
        global: &HookRegistry,
        point: P,
        sink: Log<(InterceptionPoint, String, bool, Option<String>)>,
    ) {
        global
            .register_hook(point, move |ctx: &mut ToolCallHookContext| {
                push(
                    &sink,
                    (
                        P::ID,
                        ctx.tool_name().to_owned(),
                        ctx.tool.is_some(),
                        ctx.tool_result.clone(),
                    ),
                );
            })
            .expect("registers");
    }
    let seen = log();
    watch(global, PRE_TOOL_CALL, seen.clone());
    watch(global, POST_TOOL_CALL, seen.clone());
    seen
}

#[test]
fn failing_tool_gives_error_text_and_run_goes_on() {
    let global = fresh_registry();
    let hooks = watch_hooks(&global);
    let flaky = Tool::typed(
        "fetch",
        "Fetches a page",
        |_: SearchArgs| -> Result<String, String> { Err("rate limited, retry in 30s".into()) },
    );
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("fetch", json!({"query": "rust"}))
            .answer("gave up"),
    );
    let crew = crew(&global, agent("Researcher", vec![flaky.into()], &llm));
    let events = record_events(crew.events());

    let output = crew
        .kickoff_blocking(())
        .expect("a failing tool does not end the run");

    let error = "Error executing tool: rate limited, retry in 30s".to_owned();
    assert_eq!(output.raw, "gave up");
    assert_eq!(llm.requests()[1].observations(), [error.as_str()]);
    assert_eq!(
        take(&hooks),
        [
            (InterceptionPoint::PRE_TOOL_CALL, "fetch".into(), true, None),
            (
                InterceptionPoint::POST_TOOL_CALL,
                "fetch".into(),
                true,
                Some(error.clone())
            ),
        ]
    );
    assert!(
        take(&events).contains(&"error tool=fetch error=rate limited, retry in 30s".to_owned())
    );
}

#[test]
fn panicking_tool_is_contained() {
    let global = fresh_registry();
    let hooks = watch_hooks(&global);
    let broken = Tool::typed(
        "fetch",
        "Fetches a page",
        |_: SearchArgs| -> Result<String, String> { panic!("index out of bounds") },
    );
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("fetch", json!({"query": "rust"}))
            .answer("moved on"),
    );
    let crew = crew(&global, agent("Researcher", vec![broken.into()], &llm));

    let output = crew
        .kickoff_blocking(())
        .expect("a panicking tool does not end the run");

    let error = "Error executing tool: the tool panicked: index out of bounds";
    assert_eq!(output.raw, "moved on");
    assert_eq!(llm.requests()[1].observations(), [error]);
    assert_eq!(
        take(&hooks)[1].3.as_deref(),
        Some(error),
        "POST hooks see the error"
    );
}

/// A panic payload whose own `Drop` panics again.
struct Spiteful;

impl Drop for Spiteful {
    fn drop(&mut self) {
        panic!("dropping the payload panics too");
    }
}

#[test]
fn a_tool_panicking_with_a_payload_whose_drop_panics_is_contained() {
    let global = fresh_registry();
    let plain = Tool::dynamic("plain", "Panics", json!({"type": "object"}), |_| {
        if true {
            std::panic::panic_any(Spiteful);
        }
        Ok::<_, String>(json!("unreachable"))
    });
    let awaited = Tool::dynamic(
        "awaited",
        "Panics too",
        json!({"type": "object"}),
        |_| async {
            if true {
                std::panic::panic_any(Spiteful);
            }
            Ok::<_, String>(json!("unreachable"))
        },
    );
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("plain", json!({}))
            .call("awaited", json!({}))
            .answer("moved on"),
    );
    let crew = crew(&global, agent("Researcher", vec![plain, awaited], &llm));

    let output = crew
        .kickoff_blocking(())
        .expect("neither panic leaves the kickoff");

    let error = "Error executing tool: the tool panicked: a non-text panic payload";
    assert_eq!(output.raw, "moved on");
    assert_eq!(llm.requests()[1].observations(), [error]);
    assert_eq!(llm.requests()[2].observations(), [error]);
}

#[test]
fn invalid_typed_arguments_are_a_tool_error() {
    let global = fresh_registry();
    let hooks = watch_hooks(&global);
    let received = log();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"q": "rust"}))
            .answer("done"),
    );
    let crew = crew(
        &global,
        agent("Researcher", vec![search_tool(&received)], &llm),
    );

    crew.kickoff_blocking(()).expect("the run finishes");

    let error = "Error executing tool: invalid arguments: missing field `query`";
    assert!(take(&received).is_empty(), "the tool body never runs");
    assert_eq!(llm.requests()[1].observations(), [error]);
    assert_eq!(take(&hooks)[1].3.as_deref(), Some(error));
}

#[test]
fn unknown_tool_runs_hooks_without_tool() {
    let global = fresh_registry();
    let hooks = watch_hooks(&global);
    let received = log();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("WebSerch", json!({"query": "rust"}))
            .answer("done"),
    );
    let crew = crew(
        &global,
        agent("Researcher", vec![search_tool(&received)], &llm),
    );
    let events = record_events(crew.events());

    crew.kickoff_blocking(())
        .expect("an unknown tool does not end the run");

    let message = "Tool not found: WebSerch. Available tools: web_search".to_owned();
    assert!(take(&received).is_empty());
    assert_eq!(llm.requests()[1].observations(), [message.as_str()]);
    assert_eq!(
        take(&hooks),
        [
            (
                InterceptionPoint::PRE_TOOL_CALL,
                "web_serch".into(),
                false,
                None
            ),
            (
                InterceptionPoint::POST_TOOL_CALL,
                "web_serch".into(),
                false,
                Some(message.clone())
            ),
        ]
    );
    assert!(take(&events).contains(&format!("error tool=WebSerch error={message}")));
}

#[test]
fn non_object_arguments_never_reach_hooks_or_tool() {
    let global = fresh_registry();
    let hooks = watch_hooks(&global);
    let received = log();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!(["rust", "lang"]))
            .call_raw("web_search", "\"rust\"")
            .answer("done"),
    );
    let crew = crew(
        &global,
        agent("Researcher", vec![search_tool(&received)], &llm),
    );
    let events = record_events(crew.events());

    crew.kickoff_blocking(())
        .expect("malformed arguments do not end the run");

    assert!(take(&hooks).is_empty(), "no hook runs");
    assert!(take(&received).is_empty(), "no tool runs");
    let requests = llm.requests();
    assert_eq!(
        requests[1].observations(),
        [
            "Invalid arguments for tool `web_search`: expected a JSON object, got an array: \
          [\"rust\",\"lang\"]. No tool ran; call it again with a JSON object of arguments that \
          matches its schema."
        ]
    );
    assert_eq!(
        requests[2].observations(),
        [
            "Invalid arguments for tool `web_search`: expected a JSON object, got a string: \
          \"rust\". No tool ran; call it again with a JSON object of arguments that matches its \
          schema."
        ]
    );
    let events = take(&events);
    assert_eq!(
        events.len(),
        4,
        "each call begun and ended with its usage error, nothing else: {events:?}"
    );
    for pair in events.chunks(2) {
        assert!(
            pair[0].starts_with("started tool=web_search input=\""),
            "{pair:?}"
        );
        assert!(
            pair[1].starts_with("error tool=web_search error=Invalid arguments"),
            "{pair:?}"
        );
    }
}

#[test]
fn invalid_json_arguments_are_reported() {
    let global = fresh_registry();
    let hooks = watch_hooks(&global);
    let received = log();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call_raw("web_search", "{not json")
            .answer("done"),
    );
    let crew = crew(
        &global,
        agent("Researcher", vec![search_tool(&received)], &llm),
    );

    let output = crew
        .kickoff_blocking(())
        .expect("invalid JSON does not end the run");

    assert_eq!(output.raw, "done");
    assert!(take(&hooks).is_empty());
    assert!(take(&received).is_empty());
    let observation = llm.requests()[1].observations()[0].to_owned();
    assert!(
        observation
            .starts_with("Invalid arguments for tool `web_search`: they are not valid JSON ("),
        "{observation}"
    );
    assert!(
        observation.contains("): {not json. No tool ran;"),
        "{observation}"
    );
}
