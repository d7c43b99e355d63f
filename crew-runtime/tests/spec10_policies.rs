//! Policies as data (SPEC §10): a Cedar policy set given to a crew decides
//! each tool call — forbid wins, default deny, `@ask` goes to a person,
//! shadow mode only reports — and is checked against the crew's tools
//! when attached and at every reload, which is atomic and keeps the
//! running set when it fails.
#![cfg(feature = "policy")]

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::CrewBuilder;
use crew_runtime::policy::{Policies, PolicyDecidedEvent, PolicyError, PolicySetRejectedEvent};
use crew_runtime::prelude::*;
use crew_runtime::{InterceptionPoint, ScriptedInput, ToolAnnotations};

/// `refund` (order: string, amount: integer, both required; note:
/// optional string) and `lookup` (order: string), recording their calls.
fn tools(ran: &Log<String>) -> Vec<Tool> {
    let refunds = ran.clone();
    let lookups = ran.clone();
    vec![
        Tool::dynamic(
            "refund",
            "Refunds an order",
            json!({
                "type": "object",
                "properties": {
                    "order": { "type": "string" },
                    "amount": { "type": "integer" },
                    "note": { "type": "string" },
                },
                "required": ["order", "amount"],
            }),
            move |args| {
                push(&refunds, format!("refund {}", args["amount"]));
                Ok::<_, String>(json!("refunded"))
            },
        ),
        Tool::dynamic(
            "lookup",
            "Looks an order up",
            json!({ "type": "object", "properties": { "order": { "type": "string" } } }),
            move |args| {
                push(&lookups, format!("lookup {}", args["order"]));
                Ok::<_, String>(json!("found"))
            },
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
    ]
}

const POLICIES: &str = r#"
@id("support-refunds")
permit(principal == Agent::"Support", action == Action::"refund", resource);

@id("refund-limit")
@reason("refunds above 400 need a manager")
forbid(principal, action == Action::"refund", resource)
when { context.args.amount > 400 };

@id("read-only")
permit(principal, action, resource)
when { resource.capabilities.contains("read_only") };
"#;

struct Setup {
    crew: Crew,
    model: Arc<ScriptedLlm>,
    ran: Log<String>,
    events: Log<Event>,
}

fn setup(policies: Policies, model: ScriptedLlm, role: &str) -> Setup {
    setup_with(policies, model, role, |builder| builder)
}

fn setup_with(
    policies: Policies,
    model: ScriptedLlm,
    role: &str,
    extra: impl FnOnce(CrewBuilder) -> CrewBuilder,
) -> Setup {
    setup_with_tools(policies, model, role, tools, extra)
}

fn setup_with_tools(
    policies: Policies,
    model: ScriptedLlm,
    role: &str,
    tools: fn(&Log<String>) -> Vec<Tool>,
    extra: impl FnOnce(CrewBuilder) -> CrewBuilder,
) -> Setup {
    let ran = log();
    let model = Arc::new(model);
    let agent = agent(role, tools(&ran), &model);
    let builder = Crew::builder()
        .name("shop")
        .agent(agent.clone())
        .task(
            Task::builder("Handle order A-1")
                .name("refunds")
                .agent(&agent)
                .build(),
        )
        .global_registry(fresh_registry())
        .policies(policies);
    let crew = extra(builder).build().expect("the policies fit the crew");
    let events = log();
    let sink = events.clone();
    crew.events()
        .subscribe(move |event| push(&sink, event.clone()));
    Setup {
        crew,
        model,
        ran,
        events,
    }
}

fn decisions(events: &Log<Event>) -> Vec<PolicyDecidedEvent> {
    take(events)
        .into_iter()
        .filter_map(|event| match event {
            Event::Integration(event) => event.downcast_ref::<PolicyDecidedEvent>().cloned(),
            _ => None,
        })
        .collect()
}

/// The abort (source, reason) of the crew's PRE_TOOL_CALL dispatches.
fn blocks(events: &Log<Event>) -> Vec<(String, String)> {
    take(events)
        .into_iter()
        .filter_map(|event| match event {
            Event::HookDispatched(dispatched)
                if dispatched.point == InterceptionPoint::PRE_TOOL_CALL =>
            {
                Some((dispatched.abort_source?, dispatched.abort_reason?))
            }
            _ => None,
        })
        .collect()
}

fn observations(model: &ScriptedLlm) -> Vec<String> {
    model
        .requests()
        .iter()
        .flat_map(|request| request.observations().into_iter().map(str::to_owned))
        .collect()
}

fn policies(text: &str) -> Policies {
    Policies::from_text(text).expect("the policy text parses")
}

#[test]
fn forbid_wins_over_a_permit_and_blocks_with_the_policys_id_and_reason() {
    let model = ScriptedLlm::new()
        .call("refund", json!({ "order": "A-1", "amount": 900 }))
        .answer("done");
    let s = setup(policies(POLICIES), model, "Support");
    s.crew.kickoff_blocking(()).expect("the kickoff runs");
    assert!(take(&s.ran).is_empty(), "the refund never ran");
    assert_eq!(
        blocks(&s.events),
        [(
            "policy:refund-limit".to_owned(),
            "refunds above 400 need a manager".to_owned()
        )]
    );
    assert!(observations(&s.model)[0].contains("Tool execution blocked by hook. Tool: refund"));
    let decided = decisions(&s.events);
    assert_eq!(decided[0].decision, "deny");
    assert_eq!(decided[0].policies, ["refund-limit"]);
}

#[test]
fn a_permit_lets_the_call_through() {
    let model = ScriptedLlm::new()
        .call("refund", json!({ "order": "A-1", "amount": 100 }))
        .call("lookup", json!({ "order": "A-1" }))
        .answer("done");
    let s = setup(policies(POLICIES), model, "Support");
    s.crew.kickoff_blocking(()).expect("the kickoff runs");
    assert_eq!(take(&s.ran), ["refund 100", "lookup \"A-1\""]);
    let decided = decisions(&s.events);
    assert_eq!(decided[0].decision, "allow");
    assert_eq!(decided[0].policies, ["support-refunds"]);
    assert_eq!(decided[1].policies, ["read-only"]);
}

#[test]
fn default_deny_blocks_a_call_no_policy_permits() {
    let model = ScriptedLlm::new()
        .call("refund", json!({ "order": "A-1", "amount": 100 }))
        .answer("done");
    let s = setup(policies(POLICIES), model, "Intern");
    s.crew.kickoff_blocking(()).expect("the kickoff runs");
    assert!(take(&s.ran).is_empty());
    assert_eq!(
        blocks(&s.events),
        [(
            "policy:default-deny".to_owned(),
            "no policy permits refund".to_owned()
        )]
    );
}

#[test]
fn default_allow_lets_a_call_no_policy_decides_through_and_forbids_still_win() {
    let model = ScriptedLlm::new()
        .call("refund", json!({ "order": "A-1", "amount": 100 }))
        .call("refund", json!({ "order": "A-1", "amount": 900 }))
        .answer("done");
    let set = policies(
        r#"forbid(principal, action == Action::"refund", resource) when { context.args.amount > 400 };"#,
    )
    .default_allow();
    let s = setup(set, model, "Intern");
    s.crew.kickoff_blocking(()).expect("the kickoff runs");
    assert_eq!(take(&s.ran), ["refund 100"]);
    assert_eq!(
        blocks(&s.events),
        [(
            "policy:policy0".to_owned(),
            "denied by policy policy0".to_owned()
        )]
    );
}

const ASKING: &str = r#"
@id("big-refunds-asked")
@ask("a refund above 400 needs a person's yes")
permit(principal, action == Action::"refund", resource) when { context.args.amount > 400 };
permit(principal, action == Action::"refund", resource);
"#;

#[test]
fn an_ask_permit_runs_the_call_only_after_a_person_approves() {
    for (answers, expected_runs) in [(vec!["yes"], 1), (vec!["no"], 0), (vec![], 0)] {
        let model = ScriptedLlm::new()
            .call("refund", json!({ "order": "A-1", "amount": 900 }))
            .answer("done");
        let input = Arc::new(ScriptedInput::new(answers.clone()));
        let s = setup_with(policies(ASKING), model, "Support", |builder| {
            builder.human_input(input.clone())
        });
        s.crew.kickoff_blocking(()).expect("the kickoff runs");
        assert_eq!(take(&s.ran).len(), expected_runs, "answers {answers:?}");
        assert_eq!(decisions(&s.events)[0].decision, "ask");
        if expected_runs == 0 {
            let blocked = blocks(&s.events);
            assert_eq!(blocked[0].0, "policy:big-refunds-asked", "{blocked:?}");
        }
    }
}

#[test]
fn shadow_mode_blocks_and_asks_nothing_and_reports_what_it_would_do() {
    let model = ScriptedLlm::new()
        .call("refund", json!({ "order": "A-1", "amount": 900 }))
        .answer("done");
    let s = setup(policies(POLICIES).shadow(), model, "Support");
    s.crew.kickoff_blocking(()).expect("the kickoff runs");
    assert_eq!(take(&s.ran), ["refund 900"]);
    assert!(blocks(&s.events).is_empty());
    let decided = decisions(&s.events);
    assert_eq!(decided[0].decision, "would_deny");
    assert!(decided[0].shadow);
    assert_eq!(
        decided[0].reason.as_deref(),
        Some("refunds above 400 need a manager")
    );

    // An ask in shadow mode asks nobody.
    let model = ScriptedLlm::new()
        .call("refund", json!({ "order": "A-1", "amount": 900 }))
        .answer("done");
    let s = setup(policies(ASKING).shadow(), model, "Support");
    s.crew.kickoff_blocking(()).expect("the kickoff runs");
    assert_eq!(take(&s.ran), ["refund 900"]);
    assert_eq!(decisions(&s.events)[0].decision, "would_ask");
}

#[test]
fn post_hooks_run_on_a_call_a_policy_blocks() {
    let model = ScriptedLlm::new()
        .call("refund", json!({ "order": "A-1", "amount": 900 }))
        .answer("done");
    let seen = log();
    let sink = seen.clone();
    let s = setup_with(policies(POLICIES), model, "Support", |builder| {
        builder.hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            push(&sink, ctx.tool_result.clone().unwrap_or_default());
            None::<String>
        })
    });
    s.crew.kickoff_blocking(()).expect("the kickoff runs");
    let seen = take(&seen);
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].contains("Tool execution blocked by hook"),
        "{seen:?}"
    );
}

#[test]
fn arguments_that_do_not_fit_the_tools_schema_are_denied_naming_the_argument() {
    let model = ScriptedLlm::new()
        .call("refund", json!({ "order": "A-1", "amount": "900" }))
        .call("refund", json!({ "order": "A-1" }))
        .answer("done");
    let s = setup(policies(POLICIES), model, "Support");
    s.crew.kickoff_blocking(()).expect("the kickoff runs");
    assert!(take(&s.ran).is_empty());
    let reasons: Vec<String> = blocks(&s.events)
        .into_iter()
        .map(|(_, reason)| reason)
        .collect();
    assert_eq!(
        reasons,
        [
            "the argument `amount` must be an integer, not a string (refund does not fit its schema)",
            "the required argument `amount` is missing (refund does not fit its schema)",
        ]
    );
}

/// `pay` (to: string; amount: a JSON number, as money is often written;
/// both required), recording its calls.
fn paying_tools(ran: &Log<String>) -> Vec<Tool> {
    let payments = ran.clone();
    vec![Tool::dynamic(
        "pay",
        "Pays someone",
        json!({
            "type": "object",
            "properties": {
                "to": { "type": "string" },
                "amount": { "type": "number" },
            },
            "required": ["to", "amount"],
        }),
        move |args| {
            push(&payments, format!("pay {}", args["amount"]));
            Ok::<_, String>(json!("paid"))
        },
    )]
}

#[test]
fn spec10_a_missing_required_number_argument_is_denied() {
    let model = ScriptedLlm::new()
        .call("pay", json!({ "to": "ada" }))
        .call("pay", json!({ "to": "ada", "amount": null }))
        .call("pay", json!({ "to": "ada", "amount": "12.50" }))
        .call("pay", json!({ "to": "ada", "amount": 12.5 }))
        .answer("done");
    let s = setup_with_tools(
        policies(r#"permit(principal, action == Action::"pay", resource);"#),
        model,
        "Support",
        paying_tools,
        |builder| builder,
    );
    s.crew.kickoff_blocking(()).expect("the kickoff runs");
    assert_eq!(take(&s.ran), ["pay 12.5"], "only the call that fits ran");
    let reasons: Vec<String> = blocks(&s.events)
        .into_iter()
        .map(|(_, reason)| reason)
        .collect();
    assert_eq!(
        reasons,
        [
            "the required argument `amount` is missing (pay does not fit its schema)",
            "the required argument `amount` is missing (pay does not fit its schema)",
            "the argument `amount` must be a number, not a string (pay does not fit its schema)",
        ]
    );
}

#[test]
fn spec10_a_policy_reading_a_number_argument_is_refused_with_the_true_reason() {
    assert_eq!(
        build_error_with_tools(
            "permit(principal, action == Action::\"pay\", resource)\nwhen { context.args.amount < 400 };",
            paying_tools,
        ),
        "policy `policy0` (line 2, column 21): `context.args.amount`: `amount` is a JSON \
         number, which policies cannot read: use an integer type"
    );
    assert_eq!(
        build_error_with_tools(
            "permit(principal, action == Action::\"pay\", resource)\nwhen { context.args has amount };",
            paying_tools,
        ),
        "policy `policy0` (line 2, column 25): `context.args.amount`: `amount` is a JSON \
         number, which policies cannot read: use an integer type"
    );
    // Named nowhere in the scope: every tool's arguments count.
    assert_eq!(
        build_error_with_tools(
            "permit(principal, action, resource)\nwhen { context.args.amount < 400 };",
            paying_tools,
        ),
        "policy `policy0` (line 2, column 21): `context.args.amount`: `amount` is a JSON \
         number, which policies cannot read: use an integer type"
    );
}

#[test]
fn a_policy_that_fails_to_evaluate_denies_the_whole_call() {
    let model = ScriptedLlm::new()
        .call("refund", json!({ "order": "A-1", "amount": 2 }))
        .answer("done");
    let text = r#"
        permit(principal, action, resource);
        @id("overflows")
        forbid(principal, action == Action::"refund", resource)
        when { context.args.amount * 9223372036854775807 < 0 };
    "#;
    let s = setup(policies(text), model, "Support");
    s.crew.kickoff_blocking(()).expect("the kickoff runs");
    assert!(
        take(&s.ran).is_empty(),
        "an erroring forbid must not be skipped"
    );
    let blocked = blocks(&s.events);
    assert_eq!(blocked[0].0, "policy:overflows");
    assert!(
        blocked[0]
            .1
            .starts_with("policy overflows could not be evaluated"),
        "{blocked:?}"
    );
}

#[test]
fn principal_user_and_crew_context_task_and_iteration_reach_the_policies() {
    let text = r#"
        permit(principal, action == Action::"lookup", resource)
        when {
            principal has user && principal.user == "alice" && principal.crew == "shop"
            && context.task == "refunds" && context.iteration == 1
            && context.call_id == "call_1" && resource.server == "local"
        };
    "#;
    let run = |user: Option<&str>| {
        let model = ScriptedLlm::new()
            .call("lookup", json!({ "order": "A-1" }))
            .call("lookup", json!({ "order": "A-2" }))
            .answer("done");
        let s = setup(policies(text), model, "Support");
        let crew = match user {
            Some(user) => s.crew.for_user(user),
            None => s.crew.clone(),
        };
        crew.kickoff_blocking(()).expect("the kickoff runs");
        take(&s.ran)
    };
    // The second call is on turn 2 with id call_2: denied.
    assert_eq!(run(Some("alice")), ["lookup \"A-1\""]);
    assert!(run(Some("bob")).is_empty());
    assert!(run(None).is_empty());
}

fn build_error(text: &str) -> String {
    build_error_with_tools(text, tools)
}

fn build_error_with_tools(text: &str, tools: fn(&Log<String>) -> Vec<Tool>) -> String {
    let ran = log();
    let model = Arc::new(ScriptedLlm::new().answer("done"));
    let agent = agent("Support", tools(&ran), &model);
    let error = Crew::builder()
        .agent(agent.clone())
        .task(Task::builder("Handle").agent(&agent).build())
        .global_registry(fresh_registry())
        .policies(policies(text))
        .build()
        .expect_err("the policies do not fit the crew's tools");
    let refused = match &error {
        BuildError::Integration(refused) => refused.downcast_ref::<PolicyError>(),
        _ => None,
    };
    match refused {
        Some(PolicyError::Invalid { problems }) => problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
        _ => panic!("not a policy error: {error}"),
    }
}

#[test]
fn a_policy_naming_an_unknown_tool_is_refused_with_its_place_and_the_closest_name() {
    assert_eq!(
        build_error("@id(\"p\")\npermit(principal, action == Action::\"refnd\", resource);"),
        "policy `p` (line 2, column 37): no tool of this crew is named `refnd` \
         (in `Action::\"refnd\"`); did you mean `refund`?"
    );
    assert_eq!(
        build_error("permit(principal, action, resource == Tool::\"lokup\");"),
        "policy `policy0` (line 1, column 45): no tool of this crew is named `lokup` \
         (in `Tool::\"lokup\"`); did you mean `lookup`?"
    );
    assert_eq!(
        build_error("permit(principal, action, resource == Tool::\"send_email\");"),
        "policy `policy0` (line 1, column 45): no tool of this crew is named `send_email` \
         (in `Tool::\"send_email\"`)"
    );
}

#[test]
fn a_policy_naming_an_unknown_argument_is_refused_also_in_has() {
    assert_eq!(
        build_error(
            "permit(principal, action == Action::\"refund\", resource)\nwhen { context.args.ammount > 1 };"
        ),
        "policy `policy0` (line 2, column 21): `context.args.ammount`: `refund` takes no \
         argument `ammount`; did you mean `amount`?"
    );
    assert_eq!(
        build_error(
            "permit(principal, action == Action::\"refund\", resource)\nwhen { context.args has nte };"
        ),
        "policy `policy0` (line 2, column 25): `context.args.nte`: `refund` takes no argument \
         `nte`; did you mean `note`?"
    );
}

#[test]
fn a_policy_comparing_an_argument_with_the_wrong_type_is_refused() {
    assert_eq!(
        build_error(
            "@id(\"t\")\npermit(principal, action == Action::\"refund\", resource)\nwhen { context.args.amount == \"900\" };"
        ),
        "policy `t` (line 3, column 8): in `context.args.amount == \"900\"`: the types Long and \
         String are not compatible (both operands to a `==` expression must have compatible \
         types. Types must be exactly equal to be compatible)"
    );
}

#[test]
fn bad_policy_text_is_refused_clearly_and_never_crashes() {
    let message = |result: Result<Policies, PolicyError>| result.expect_err("refused").to_string();
    assert!(message(Policies::from_text("")).contains("has no policies"));
    assert!(message(Policies::from_text("// only a comment\n")).contains("has no policies"));
    let garbage: String = (0..10 * 1024 * 1024)
        .map(|i| char::from(b'!' + (i % 90) as u8))
        .collect();
    assert!(message(Policies::from_text(&garbage)).contains("more than the 1048576 accepted"));
    let deep = format!(
        "permit(principal, action, resource) when {{ {}true{} }};",
        "(".repeat(2000),
        ")".repeat(2000)
    );
    assert!(message(Policies::from_text(&deep)).contains("nested more than 32 deep"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("bad.cedar");
    std::fs::write(&file, b"permit(principal, action, resource) when { \xff };").expect("written");
    let error = message(Policies::from_file(&file));
    assert!(
        error.contains("bad.cedar") && error.contains("not UTF-8"),
        "{error}"
    );
}

#[test]
fn a_policy_errors_debug_reads_like_its_message_with_line_and_column() {
    // `main() -> Result<(), Box<dyn Error>>` prints the error's `Debug`.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("desk.cedar");
    std::fs::write(
        &file,
        "permit(principal, action, resource);\nforbid(principal, action",
    )
    .expect("written");
    let error = Policies::from_file(&file).expect_err("the second policy is cut short");
    let debug = format!("{error:?}");
    assert_eq!(debug, error.to_string());
    assert!(debug.contains("line 2, column"), "{debug}");
    assert!(
        !debug.contains("Invalid {") && !debug.contains("PolicyProblem {"),
        "{debug}"
    );
    let boxed: Box<dyn std::error::Error> = Box::new(error);
    assert_eq!(format!("{boxed:?}"), debug);
}

#[test]
fn build_and_crew_errors_debug_read_like_their_messages() {
    let error = Crew::builder().build().expect_err("a crew needs a task");
    assert_eq!(format!("{error:?}"), error.to_string());
    assert!(format!("{error:?}").contains("Crew::builder().task(..)"));

    let writer = Agent::builder("Writer")
        .llm(Arc::new(ScriptedLlm::new()))
        .build();
    let crew = Crew::builder()
        .agent(writer.clone())
        .task(Task::builder("Write").agent(&writer).build())
        .global_registry(fresh_registry())
        .build()
        .expect("the crew builds");
    let error = crew
        .kickoff_blocking(())
        .expect_err("the model has nothing to say");
    let debug = format!("{error:?}");
    assert_eq!(debug, error.to_string());
    assert!(
        debug.contains("agent `Writer`") && !debug.contains("Model {"),
        "{debug}"
    );
}

#[test]
fn a_reload_takes_effect_between_two_calls() {
    let set = policies("permit(principal, action, resource);");
    let handle = set.clone();
    let model = ScriptedLlm::new()
        .call("lookup", json!({ "order": "A-1" }))
        .call("lookup", json!({ "order": "A-2" }))
        .answer("done");
    let s = setup_with(set, model, "Support", move |builder| {
        builder.hook(POST_TOOL_CALL, move |_: &mut ToolCallHookContext| {
            handle
                .reload_text(r#"@id("closed") forbid(principal, action, resource);"#)
                .expect("the new set fits");
            None::<String>
        })
    });
    s.crew.kickoff_blocking(()).expect("the kickoff runs");
    assert_eq!(take(&s.ran), ["lookup \"A-1\""]);
    assert_eq!(blocks(&s.events)[0].0, "policy:closed");
}

#[test]
fn a_reload_that_fails_keeps_the_running_set_and_is_reported() {
    let set = policies("permit(principal, action, resource);");
    let model = ScriptedLlm::new()
        .call("lookup", json!({ "order": "A-1" }))
        .answer("done");
    let s = setup(set.clone(), model, "Support");
    let error = set
        .reload_text(r#"forbid(principal, action == Action::"lookp", resource);"#)
        .expect_err("an unknown tool");
    assert!(
        error.to_string().contains("did you mean `lookup`?"),
        "{error}"
    );
    let rejected: Vec<PolicySetRejectedEvent> = take(&s.events)
        .into_iter()
        .filter_map(|event| match event {
            Event::Integration(event) => event.downcast_ref::<PolicySetRejectedEvent>().cloned(),
            _ => None,
        })
        .collect();
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].origin, "text");
    s.crew.kickoff_blocking(()).expect("the kickoff runs");
    assert_eq!(
        take(&s.ran),
        ["lookup \"A-1\""],
        "the old set still permits"
    );
}

#[test]
fn a_tool_that_declares_nothing_counts_as_destructive_to_policies() {
    let text = r#"
        permit(principal, action, resource);
        @id("no-destructive")
        forbid(principal, action, resource) when { resource.capabilities.contains("destructive") };
    "#;
    let model = ScriptedLlm::new()
        .call("refund", json!({ "order": "A-1", "amount": 1 }))
        .call("lookup", json!({ "order": "A-1" }))
        .answer("done");
    let s = setup(policies(text), model, "Support");
    s.crew.kickoff_blocking(()).expect("the kickoff runs");
    assert_eq!(take(&s.ran), ["lookup \"A-1\""]);
    assert_eq!(blocks(&s.events)[0].0, "policy:no-destructive");
}

#[test]
fn tools_no_policy_could_ever_permit_are_not_offered_yet_a_call_to_one_is_still_blocked() {
    let text = r#"permit(principal == Agent::"Support", action == Action::"lookup", resource);"#;
    let model = ScriptedLlm::new()
        .call("refund", json!({ "order": "A-1", "amount": 1 }))
        .answer("done");
    let s = setup(policies(text), model, "Support");
    s.crew.kickoff_blocking(()).expect("the kickoff runs");
    assert_eq!(s.model.requests()[0].tools, ["lookup"]);
    assert!(take(&s.ran).is_empty());
    assert_eq!(blocks(&s.events)[0].0, "policy:default-deny");

    // Opted out, in shadow mode, or with default allow: every tool.
    for set in [
        policies(text).offer_all_tools(),
        policies(text).shadow(),
        policies(text).default_allow(),
    ] {
        let s = setup(set, ScriptedLlm::new().answer("done"), "Support");
        s.crew.kickoff_blocking(()).expect("the kickoff runs");
        assert_eq!(s.model.requests()[0].tools, ["refund", "lookup"]);
    }
}

#[test]
fn explain_lists_the_policies_that_decide_a_call() {
    let s = setup(
        policies(POLICIES),
        ScriptedLlm::new().answer("done"),
        "Support",
    );
    let explained = s.crew.explain("refund", "Support");
    assert_eq!(
        explained.notes,
        ["policies: support-refunds, refund-limit, read-only decide `refund`"]
    );
    let explained = s.crew.explain("refund", "Intern");
    assert_eq!(
        explained.notes,
        ["policies: refund-limit, read-only decide `refund`"]
    );
    assert!(
        explained
            .to_string()
            .contains("refund-limit, read-only decide")
    );
    let s = setup(
        policies(r#"permit(principal, action == Action::"lookup", resource);"#),
        ScriptedLlm::new().answer("done"),
        "Support",
    );
    assert_eq!(
        s.crew.explain("refund", "Support").notes,
        ["policies: none decides `refund`: denied by default"]
    );
}

#[test]
fn calls_go_on_while_a_reload_of_1000_policies_is_held_mid_swap() {
    let per_thread = 5 * test_scale();
    let set = policies("@id(\"open\") permit(principal, action, resource);");
    let one_lookup = || {
        ScriptedLlm::new()
            .call("lookup", json!({ "order": "A-1" }))
            .answer("done")
    };
    let prepared: Vec<Vec<Setup>> = (0..3)
        .map(|_| {
            (0..per_thread)
                .map(|_| setup(set.clone(), one_lookup(), "Support"))
                .collect()
        })
        .collect();
    let mut text = String::from(
        "@id(\"paused\") forbid(principal, action == Action::\"lookup\", resource);\n",
    );
    for i in 1..1000 {
        text.push_str(&format!(
            "permit(principal, action == Action::\"lookup\", resource) \
             when {{ context.args has order && context.args.order == \"X{i}\" }};\n"
        ));
    }
    let (held, is_held) = std::sync::mpsc::channel();
    let held = std::sync::Mutex::new(held);
    let release = std::sync::Barrier::new(2);
    let mut prepared = prepared.into_iter();
    let (first, second, after) = (
        prepared.next().expect("three batches"),
        prepared.next().expect("three batches"),
        prepared.next().expect("three batches"),
    );
    std::thread::scope(|scope| {
        let reloader = scope.spawn(|| {
            let reloaded = set.reload_text_pausing(&text, &|| {
                let _ = held.lock().map(|held| held.send(true));
                release.wait();
            });
            if reloaded.is_err() {
                // Never held: let the test go on to report it.
                let _ = held.lock().map(|held| held.send(false));
            }
            reloaded
        });
        let was_held = is_held
            .recv_timeout(std::time::Duration::from_secs(600))
            .expect("the reload reaches its swap");
        // The reload is checked, compiled and holds its lock: calls on two
        // threads complete meanwhile, on the running set.
        let callers: Vec<_> = [first, second]
            .into_iter()
            .map(|batch| {
                scope.spawn(move || {
                    for s in &batch {
                        s.crew.kickoff_blocking(()).expect("the kickoff runs");
                        assert_eq!(take(&s.ran), ["lookup \"A-1\""], "decided by the old set");
                    }
                })
            })
            .collect();
        for caller in callers {
            caller.join().expect("the calls complete during the reload");
        }
        if was_held {
            release.wait();
        }
        reloader
            .join()
            .expect("the reload finishes")
            .expect("the new set fits");
    });
    assert_eq!(set.len(), 1000);
    for s in &after {
        s.crew.kickoff_blocking(()).expect("the kickoff runs");
        assert!(take(&s.ran).is_empty(), "decided by the new set");
        assert_eq!(blocks(&s.events)[0].0, "policy:paused");
    }
}

/// Waits (up to a minute) until `done` holds: file events arrive on the
/// watcher's thread.
fn eventually(done: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    done()
}

#[test]
fn a_watched_policy_file_reloads_when_it_changes_and_a_bad_edit_keeps_the_running_set() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("policies.cedar");
    std::fs::write(&file, "@id(\"open\") permit(principal, action, resource);").expect("written");
    let set = Policies::from_file(&file).expect("the file parses");
    let s = setup(set.clone(), ScriptedLlm::new().answer("done"), "Support");
    let _watching = set.watch(&file).expect("the file can be watched");

    // Written in place.
    std::fs::write(
        &file,
        "@id(\"closed\") forbid(principal, action, resource);",
    )
    .expect("written");
    assert!(eventually(|| set.ids() == ["closed"]), "{:?}", set.ids());

    // A bad edit: refused and reported, the running set stays.
    std::fs::write(
        &file,
        "forbid(principal, action == Action::\"lokup\", resource);",
    )
    .expect("written");
    let rejected = || {
        take(&s.events)
            .iter()
            .any(|event| matches!(event, Event::Integration(e) if e.downcast_ref::<PolicySetRejectedEvent>().is_some_and(|r| r.error.contains("did you mean `lookup`?"))))
    };
    assert!(eventually(rejected));
    assert_eq!(set.ids(), ["closed"]);

    // Replaced by a rename, as editors and deployment tools do.
    let staged = dir.path().join("staged.cedar");
    std::fs::write(
        &staged,
        "@id(\"renamed\") permit(principal, action, resource);",
    )
    .expect("written");
    std::fs::rename(&staged, &file).expect("renamed");
    assert!(eventually(|| set.ids() == ["renamed"]), "{:?}", set.ids());
}

const REGISTERED: &str = r#"
@id("no-deletes")
forbid(principal, action == Action::"delete_file", resource);
@id("lookups")
permit(principal, action == Action::"lookup", resource);
"#;

#[test]
fn a_set_registered_on_a_registry_decides_for_every_crew_built_on_it() {
    let registry = fresh_registry();
    let set = policies(REGISTERED);
    set.register_on(registry.clone()).expect("registers");
    // This crew has no `delete_file`: the policy on it is left out for it.
    let ran = log();
    let model = Arc::new(
        ScriptedLlm::new()
            .call("lookup", json!({ "order": "A-1" }))
            .call("refund", json!({ "order": "A-1", "amount": 5 }))
            .answer("done"),
    );
    let support = agent("Support", tools(&ran), &model);
    let crew = Crew::builder()
        .agent(support.clone())
        .task(Task::builder("Handle").agent(&support).build())
        .global_registry(registry.clone())
        .build()
        .expect("the registered set fits, its policy on delete_file left out");
    crew.kickoff_blocking(()).expect("the kickoff runs");
    assert_eq!(take(&ran), ["lookup \"A-1\""]);
    let observations = observations(&model);
    assert!(
        observations[1].contains("Tool execution blocked by hook. Tool: refund"),
        "{observations:?}"
    );
    assert_eq!(
        crew.explain("lookup", "Support").notes,
        ["policies: lookups decide `lookup`"]
    );

    // An agent run on its own on that registry is decided too.
    let ran = log();
    let model = Arc::new(
        ScriptedLlm::new()
            .call("refund", json!({ "order": "A-1", "amount": 5 }))
            .answer("done"),
    );
    let alone = Agent::builder("Support")
        .tools(tools(&ran))
        .llm(model.clone())
        .global_registry(registry.clone())
        .build();
    alone.kickoff_blocking("Refund A-1").expect("the run ends");
    assert!(
        take(&ran).is_empty(),
        "the standalone agent's refund is denied too"
    );
}

#[test]
fn a_registered_set_naming_an_unknown_argument_of_a_crews_tool_fails_that_crews_build() {
    let registry = fresh_registry();
    policies(r#"permit(principal, action == Action::"refund", resource) when { context.args.amont > 1 };"#)
        .register_on(registry.clone())
        .expect("registers");
    let ran = log();
    let model = Arc::new(ScriptedLlm::new().answer("done"));
    let support = agent("Support", tools(&ran), &model);
    let error = Crew::builder()
        .agent(support.clone())
        .task(Task::builder("Handle").agent(&support).build())
        .global_registry(registry)
        .build()
        .expect_err("an unknown argument of a tool the crew has");
    assert!(
        error.to_string().contains("did you mean `amount`?"),
        "{error}"
    );
}

#[test]
fn a_call_dispatched_outside_any_crew_is_denied_by_a_registered_set() {
    let registry = fresh_registry();
    policies("permit(principal, action, resource);")
        .register_on(registry.clone())
        .expect("registers");
    let mut ctx = ToolCallHookContext::new("lookup", Default::default());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let outcome = runtime.block_on(async {
        let hooks = crew_runtime::runtime::Dispatcher::new(&registry)
            .begin_call(&crew_runtime::runtime::TOOL_CALL_POINTS);
        hooks.dispatch_async(PRE_TOOL_CALL, &mut ctx).await
    });
    assert!(outcome.aborted().is_some(), "{outcome:?}");
}

#[test]
fn a_registered_set_naming_a_tool_no_crew_has_warns_at_the_first_kickoff_and_fails_it_when_strict()
{
    for strict in [false, true] {
        let registry = fresh_registry();
        policies(
            r#"permit(principal, action == Action::"lookup", resource);
               @id("typo") forbid(principal, action == Action::"refnd", resource);"#,
        )
        .register_on(registry.clone())
        .expect("registers");
        let ran = log();
        let model = Arc::new(
            ScriptedLlm::new()
                .call("lookup", json!({ "order": "A-1" }))
                .answer("done"),
        );
        let support = agent("Support", tools(&ran), &model);
        let crew = Crew::builder()
            .agent(support.clone())
            .task(Task::builder("Handle").agent(&support).build())
            .global_registry(registry)
            .strict(strict)
            .build()
            .expect("a tool this crew lacks is no build error");
        let kicked_off = crew.kickoff_blocking(());
        if strict {
            let error = kicked_off.expect_err("strict: the unknown tool fails the kickoff");
            assert_eq!(
                error.to_string(),
                "registered policies name tools no crew has:\npolicy `typo` (line 2, column 64): \
                 no tool of the crews built on this registry is named `refnd` (in \
                 `Action::\"refnd\"`); did you mean `refund`?"
            );
        } else {
            kicked_off.expect("a warning only");
            assert_eq!(take(&ran), ["lookup \"A-1\""]);
        }
    }
}

#[test]
fn the_policies_errors_are_the_policy_integrations_errors_of_the_build_and_the_kickoff() {
    let ran = log();
    let model = Arc::new(ScriptedLlm::new().answer("done"));
    let support = agent("Support", tools(&ran), &model);
    let built = Crew::builder()
        .agent(support.clone())
        .task(Task::builder("Handle").agent(&support).build())
        .global_registry(fresh_registry())
        .policies(policies(
            r#"permit(principal, action == Action::"refnd", resource);"#,
        ))
        .build();
    let Err(BuildError::Integration(refused)) = built else {
        panic!("the build is refused by the policies: {built:?}");
    };
    assert_eq!(refused.integration(), "policy");
    assert!(
        matches!(refused.downcast_ref::<PolicyError>(), Some(PolicyError::Invalid { problems }) if problems.len() == 1),
        "{refused:?}"
    );

    let registry = fresh_registry();
    policies(r#"@id("typo") forbid(principal, action == Action::"refnd", resource);"#)
        .register_on(registry.clone())
        .expect("registers");
    let crew = Crew::builder()
        .agent(support.clone())
        .task(Task::builder("Handle").agent(&support).build())
        .global_registry(registry)
        .strict(true)
        .build()
        .expect("a tool this crew lacks is no build error");
    let error = crew.kickoff_blocking(()).expect_err("strict");
    let CrewError::Integration(stopped) = &error else {
        panic!("the kickoff is stopped by the policies: {error:?}");
    };
    assert_eq!(stopped.integration(), "policy");
    let Some(PolicyError::Invalid { problems }) = stopped.downcast_ref::<PolicyError>() else {
        panic!("the policies' own error: {stopped:?}");
    };
    assert_eq!(problems[0].policy.as_deref(), Some("typo"));
    assert_eq!(error.clone(), error);
}

#[test]
fn explain_call_names_the_policy_that_fires_for_concrete_arguments() {
    let s = setup(
        policies(POLICIES),
        ScriptedLlm::new().answer("done"),
        "Support",
    );
    assert_eq!(
        s.crew.explain_call(
            "refund",
            "Support",
            json!({ "order": "A-1", "amount": 900 })
        ),
        ["policies: denied by refund-limit (refunds above 400 need a manager)"]
    );
    assert_eq!(
        s.crew
            .explain_call("refund", "Support", json!({ "order": "A-1", "amount": 9 })),
        ["policies: allowed by support-refunds"]
    );
    assert_eq!(
        s.crew
            .explain_call("refund", "Intern", json!({ "order": "A-1", "amount": 9 })),
        ["policies: denied by default-deny (no policy permits refund)"]
    );
    let s = setup(
        policies(ASKING),
        ScriptedLlm::new().answer("done"),
        "Support",
    );
    assert_eq!(
        s.crew.explain_call(
            "refund",
            "Support",
            json!({ "order": "A-1", "amount": 900 })
        ),
        ["policies: asked by big-refunds-asked (a refund above 400 needs a person's yes)"]
    );
}
