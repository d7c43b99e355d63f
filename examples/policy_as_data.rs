//! Policies as data: a Cedar policy file decides every tool call of a
//! support crew, beside (not instead of) hooks written in Rust.
//!
//! `cargo run --example policy_as_data` runs, offline on a scripted model:
//! 1. the policies of `examples/policy_as_data.cedar`, enforced: a refund
//!    above the limit denied by a `forbid`, a small one allowed by a
//!    `permit`, closing an account asked of a (scripted) person, who
//!    approves once and refuses once;
//! 2. the same traffic in shadow mode: nothing blocked, what would have
//!    been printed as `would deny` / `would ask`;
//! 3. a policy with a misspelled tool and one with a misspelled argument,
//!    refused when the crew is built, with `did you mean`;
//! 4. a reload between two calls: the first lookup runs, the second is
//!    denied by the set swapped in after it.

use std::error::Error;
use std::sync::{Arc, Mutex, PoisonError};

use crew_runtime::CrewBuilder;
use crew_runtime::policy::{Policies, PolicyDecidedEvent};
use crew_runtime::prelude::*;
use crew_runtime::{InterceptionPoint, ScriptedInput, ToolAnnotations};

/// The policy file beside this example.
const POLICY_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/policy_as_data.cedar");

/// What the scenes print, kept for the test.
type Lines = Arc<Mutex<Vec<String>>>;

fn say(lines: &Lines, line: impl Into<String>) {
    let line = line.into();
    println!("{line}");
    lines
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(line);
}

/// `refund` (order, amount), `lookup` (read-only) and `close_account`
/// (destructive), each printing when it really runs.
fn tools(lines: &Lines) -> Vec<Tool> {
    let ran = |name: &'static str| {
        let lines = lines.clone();
        move |args: Value| {
            say(&lines, format!("    ran {name} {args}"));
            Ok::<_, String>(json!(format!("{name} done")))
        }
    };
    let order = json!({ "type": "string" });
    vec![
        Tool::dynamic(
            "refund",
            "Refunds part of an order",
            json!({
                "type": "object",
                "properties": { "order": order, "amount": { "type": "integer" } },
                "required": ["order", "amount"],
            }),
            ran("refund"),
        ),
        Tool::dynamic(
            "lookup",
            "Looks an order up",
            json!({ "type": "object", "properties": { "order": order }, "required": ["order"] }),
            ran("lookup"),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::dynamic(
            "close_account",
            "Closes a customer's account",
            json!({ "type": "object", "properties": { "customer": { "type": "string" } } }),
            ran("close_account"),
        )
        .with_annotations(ToolAnnotations::new().destructive(true)),
    ]
}

/// A crew of one `Support` agent whose model makes `calls`, under
/// `policies`, with a person who answers `answers`.
fn crew(
    lines: &Lines,
    policies: Policies,
    calls: Vec<(&str, Value)>,
    answers: Vec<&str>,
    extra: impl FnOnce(CrewBuilder) -> CrewBuilder,
) -> Result<Crew, BuildError> {
    let mut model = ScriptedLlm::new();
    for (tool, args) in calls {
        model = model.call(tool, args);
    }
    let support = Agent::builder("Support")
        .goal("Help customers")
        .tools(tools(lines))
        .llm(Arc::new(model.answer("done")))
        .build();
    let builder = Crew::builder()
        .name("support")
        .agent(support.clone())
        .task(
            Task::builder("Handle the tickets")
                .name("tickets")
                .agent(&support)
                .build(),
        )
        .global_registry(Arc::new(HookRegistry::new()))
        .human_input(Arc::new(ScriptedInput::new(answers)))
        .policies(policies);
    let crew = extra(builder).build()?;
    let sink = lines.clone();
    crew.events().subscribe(move |event| match event {
        Event::Integration(event) => {
            if let Some(decided) = event.downcast_ref::<PolicyDecidedEvent>() {
                say(
                    &sink,
                    format!(
                        "  {} {}{}{}",
                        decided.tool_name,
                        decided.decision.replace('_', " "),
                        if decided.policies.is_empty() {
                            String::new()
                        } else {
                            format!(" by {}", decided.policies.join(", "))
                        },
                        decided
                            .reason
                            .as_ref()
                            .map(|reason| format!(": {reason}"))
                            .unwrap_or_default()
                    ),
                );
            }
        }
        Event::HookDispatched(dispatched) => {
            if let (Some(source), Some(reason)) =
                (&dispatched.abort_source, &dispatched.abort_reason)
                && dispatched.point == InterceptionPoint::PRE_TOOL_CALL
            {
                say(&sink, format!("    blocked [{source}]: {reason}"));
            }
        }
        _ => {}
    });
    Ok(crew)
}

/// The traffic of scenes 1 and 2.
fn traffic() -> Vec<(&'static str, Value)> {
    vec![
        ("refund", json!({ "order": "A-17", "amount": 900 })),
        ("refund", json!({ "order": "A-17", "amount": 120 })),
        ("close_account", json!({ "customer": "c-42" })),
        ("close_account", json!({ "customer": "c-43" })),
    ]
}

fn run(lines: &Lines) -> Result<(), Box<dyn Error>> {
    say(lines, "1. enforced");
    let policies = Policies::from_file(POLICY_FILE)?;
    crew(lines, policies, traffic(), vec!["yes", "no"], |b| b)?.kickoff_blocking(())?;

    say(lines, "2. shadow mode: the same traffic, nothing blocked");
    let policies = Policies::from_file(POLICY_FILE)?.shadow();
    crew(lines, policies, traffic(), vec![], |b| b)?.kickoff_blocking(())?;

    say(lines, "3. mistakes refused at load");
    for text in [
        r#"permit(principal, action == Action::"refnd", resource);"#,
        r#"forbid(principal, action == Action::"refund", resource) when { context.args.amout > 400 };"#,
    ] {
        match crew(lines, Policies::from_text(text)?, vec![], vec![], |b| b) {
            Ok(_) => say(lines, "  accepted (unexpected)"),
            Err(error) => say(lines, format!("  {error}").replace('\n', "\n  ")),
        }
    }

    say(lines, "4. a reload between two calls");
    let policies = Policies::from_file(POLICY_FILE)?;
    let handle = policies.clone();
    let calls = vec![
        ("lookup", json!({ "order": "A-17" })),
        ("lookup", json!({ "order": "A-18" })),
    ];
    let reloaded = lines.clone();
    crew(lines, policies, calls, vec![], move |builder| {
        // After the first call, the operators tighten the rules.
        let once = std::sync::Once::new();
        builder.hook(POST_TOOL_CALL, move |_: &mut ToolCallHookContext| {
            once.call_once(|| {
                let tightened = r#"
                @id("lookups-paused")
                @reason("lookups are paused during the audit")
                forbid(principal, action == Action::"lookup", resource);
                permit(principal, action, resource);
            "#;
                match handle.reload_text(tightened) {
                    Ok(()) => say(&reloaded, "    reloaded: lookups paused"),
                    Err(error) => say(&reloaded, format!("    reload refused: {error}")),
                }
            });
            None::<String>
        })
    })?
    .kickoff_blocking(())?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    let lines = Lines::default();
    match run(&lines) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transcript_shows_each_decision() {
        let lines = Lines::default();
        run(&lines).expect("the example runs");
        let lines = lines.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let expected = [
            "1. enforced",
            "  refund deny by refund-limit: refunds above 400 need a manager",
            "    blocked [policy:refund-limit]: refunds above 400 need a manager",
            "  refund allow by support-may-refund",
            "    ran refund {\"amount\":120,\"order\":\"A-17\"}",
            "  close_account ask by closing-accounts-is-asked: closing an account cannot be undone",
            "    ran close_account {\"customer\":\"c-42\"}",
            "  close_account ask by closing-accounts-is-asked: closing an account cannot be undone",
            "    blocked [policy:closing-accounts-is-asked]: closing an account cannot be undone: not approved",
            "2. shadow mode: the same traffic, nothing blocked",
            "  refund would deny by refund-limit: refunds above 400 need a manager",
            "    ran refund {\"amount\":900,\"order\":\"A-17\"}",
            "  refund allow by support-may-refund",
            "    ran refund {\"amount\":120,\"order\":\"A-17\"}",
            "  close_account would ask by closing-accounts-is-asked: closing an account cannot be undone",
            "    ran close_account {\"customer\":\"c-42\"}",
            "  close_account would ask by closing-accounts-is-asked: closing an account cannot be undone",
            "    ran close_account {\"customer\":\"c-43\"}",
            "3. mistakes refused at load",
            "  the crew's policies were refused:",
            "  policy `policy0` (line 1, column 37): no tool of this crew is named `refnd` (in `Action::\"refnd\"`); did you mean `refund`?",
            "  the crew's policies were refused:",
            "  policy `policy0` (line 1, column 77): `context.args.amout`: `refund` takes no argument `amout`; did you mean `amount`?",
            "4. a reload between two calls",
            "  lookup allow by lookups-are-fine",
            "    ran lookup {\"order\":\"A-17\"}",
            "    reloaded: lookups paused",
            "  lookup deny by lookups-paused: lookups are paused during the audit",
            "    blocked [policy:lookups-paused]: lookups are paused during the audit",
        ];
        let text: Vec<String> = lines
            .iter()
            .flat_map(|l| l.lines().map(str::to_owned))
            .collect();
        assert_eq!(text, expected, "{text:#?}");
    }
}
