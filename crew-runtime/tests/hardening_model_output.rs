//! Hostile model output: random and adversarial tool-call batches fed
//! through a scripted model into a real crew. Whatever the model sends —
//! invalid JSON, arguments that are not objects, huge or deeply nested
//! arguments, unknown, near-miss and look-alike tool names, empty names,
//! duplicate call ids, thousands of calls in one turn — kickoff does not
//! panic, no tool receives arguments outside its schema, every call gets
//! exactly one observation addressed to its id and in order (ids made
//! unique within the turn), the model is told clearly what was wrong, and a
//! call a PRE hook blocks never runs.
//!
//! The crew's limits (calls per turn, observation size) are lifted here:
//! they have their own tests in `hardening_limits.rs`.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::llm::{ChatMessage, ModelTurn, Role, ToolCallRequest};
use crew_runtime::normalize_tool_name;
use crew_runtime::prelude::*;
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Map;

const AVAILABLE: &str = "Available tools: web_search, delete_file, echo_json";
const INVALID_ARGUMENTS_END: &str =
    "No tool ran; call it again with a JSON object of arguments that matches its schema.";

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
struct PathArgs {
    path: String,
}

/// What the tools received and what the hooks saw, for one crew.
#[derive(Clone, Default)]
struct Records {
    searched: Log<SearchArgs>,
    deleted: Log<PathArgs>,
    echoed: Log<Value>,
    pre: Log<String>,
    post: Log<String>,
}

/// `web_search` (typed), `delete_file` (typed, always blocked by a PRE
/// hook), `echo_json` (dynamic: any object in, the same object out).
fn tools(records: &Records) -> Vec<Tool> {
    let searched = records.searched.clone();
    let deleted = records.deleted.clone();
    let echoed = records.echoed.clone();
    vec![
        Tool::typed("web_search", "Searches the web", move |args: SearchArgs| {
            let answer = format!("results for {}", args.query);
            push(&searched, args);
            Ok::<_, String>(answer)
        })
        .into(),
        Tool::typed("delete_file", "Deletes a file", move |args: PathArgs| {
            push(&deleted, args);
            Ok::<_, String>("deleted")
        })
        .into(),
        Tool::dynamic(
            "echo_json",
            "Echoes its arguments",
            json!({"type": "object"}),
            move |args: Value| {
                push(&echoed, args.clone());
                Ok::<_, String>(args)
            },
        ),
    ]
}

/// A registry that records every call reaching each chain, blocks every
/// `delete_file` call, and blocks searches for anything `forbidden`.
fn guarded_registry(records: &Records) -> Arc<HookRegistry> {
    let global = fresh_registry();
    let pre = records.pre.clone();
    global
        .register_hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            push(&pre, ctx.tool_name().to_owned());
        })
        .expect("registers");
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("no-deletes").tools(["delete_file"]),
            |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                Err(HookAborted::new("deleting is not allowed", "safety-policy"))
            },
        )
        .expect("registers");
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new()
                .name("no-forbidden-searches")
                .tools(["web_search"]),
            |ctx: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                if is_forbidden(&ctx.tool_input) {
                    return Err(HookAborted::new("forbidden query", "content-policy"));
                }
                Ok(())
            },
        )
        .expect("registers");
    let post = records.post.clone();
    global
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            push(&post, ctx.tool_name().to_owned());
        })
        .expect("registers");
    global
}

fn is_forbidden(input: &Map<String, Value>) -> bool {
    input
        .get("query")
        .and_then(Value::as_str)
        .is_some_and(|q| q.contains("forbidden"))
}

/// Runs the turns (then a final answer, when `answer`) through a crew;
/// returns the kickoff's outcome, the model and the records.
fn run(
    turns: &[Vec<ToolCallRequest>],
    answer: bool,
    concurrency: usize,
) -> (Result<CrewOutput, CrewError>, Arc<ScriptedLlm>, Records) {
    let records = Records::default();
    let mut llm = ScriptedLlm::new();
    for calls in turns {
        llm = llm.turn(ModelTurn::ToolCalls {
            content: String::new(),
            calls: calls.clone(),
        });
    }
    if answer {
        llm = llm.answer("done");
    }
    let llm = Arc::new(llm);
    let worker = Agent::builder("Worker")
        .tools(tools(&records))
        .llm(llm.clone())
        .max_iter(turns.len() + 1)
        // A script that runs out ends the run at once, not after retries.
        .max_retry_limit(0)
        .build();
    let crew = Crew::builder()
        .agent(worker.clone())
        .task(Task::builder("Do the work").agent(&worker).build())
        .global_registry(guarded_registry(&records))
        .max_concurrent_tool_calls(concurrency)
        .max_tool_calls_per_turn(usize::MAX)
        .max_observation_bytes(usize::MAX)
        .build()
        .expect("builds");
    (crew.kickoff_blocking(()), llm, records)
}

fn call(
    id: impl Into<String>,
    name: impl Into<String>,
    arguments: impl Into<String>,
) -> ToolCallRequest {
    ToolCallRequest {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

/// What should become of one call, worked out from the rules (not from the
/// runtime's code): which tool the name means, whether the arguments are a
/// JSON object, and what that tool's schema and the hooks make of them.
#[derive(Debug, Clone, PartialEq)]
enum Expected {
    /// Not JSON, or not an object: no hook, no tool.
    InvalidArguments { tool: String },
    /// A name no tool of the agent has.
    NotFound { name: String },
    /// A PRE hook blocks it.
    Blocked { tool: &'static str },
    /// `web_search` runs with these arguments.
    Searched(SearchArgs),
    /// `web_search`'s schema refuses the arguments.
    SearchRefused,
    /// `echo_json` runs with this object.
    Echoed(Map<String, Value>),
}

impl Expected {
    fn of(call: &ToolCallRequest) -> Expected {
        let tool = normalize_tool_name(&call.name);
        let text = call.arguments.trim();
        let input = if text.is_empty() {
            Map::new()
        } else {
            match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(input)) => input,
                _ => return Expected::InvalidArguments { tool },
            }
        };
        match tool.as_str() {
            "delete_file" => Expected::Blocked {
                tool: "delete_file",
            },
            "web_search" if is_forbidden(&input) => Expected::Blocked { tool: "web_search" },
            "web_search" => match serde_json::from_value::<SearchArgs>(Value::Object(input)) {
                Ok(args) => Expected::Searched(args),
                Err(_) => Expected::SearchRefused,
            },
            "echo_json" => {
                // The runtime renders objects with sorted keys, whether or
                // not serde_json keeps insertion order.
                let mut input = input;
                input.values_mut().for_each(Value::sort_all_objects);
                input.sort_keys();
                Expected::Echoed(input)
            }
            _ => Expected::NotFound {
                name: call.name.clone(),
            },
        }
    }

    fn reaches_hooks(&self) -> bool {
        !matches!(self, Expected::InvalidArguments { .. })
    }

    /// Checks the observation the model got for this call.
    fn check(&self, observation: &str) -> Result<(), String> {
        let fits = match self {
            Expected::InvalidArguments { tool } => {
                observation.starts_with(&format!("Invalid arguments for tool `{tool}`: "))
                    && observation.ends_with(INVALID_ARGUMENTS_END)
            }
            Expected::NotFound { name } => {
                let shown = if name.trim().is_empty() {
                    "(the call named no tool)".to_owned()
                } else {
                    escaped(name)
                };
                observation == format!("Tool not found: {shown}. {AVAILABLE}")
            }
            Expected::Blocked { tool } => {
                observation == format!("Tool execution blocked by hook. Tool: {tool}")
            }
            Expected::Searched(args) => observation == format!("results for {}", args.query),
            Expected::SearchRefused => {
                observation.starts_with("Error executing tool: invalid arguments: ")
            }
            Expected::Echoed(input) => {
                serde_json::to_string(input).is_ok_and(|rendered| rendered == observation)
            }
        };
        if fits {
            Ok(())
        } else {
            Err(format!(
                "expected {self:?}, the model was told {:?}",
                excerpt(observation)
            ))
        }
    }
}

fn excerpt(text: &str) -> String {
    text.chars().take(300).collect()
}

/// A name as the model is shown it: control characters escaped.
fn escaped(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().collect()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Checks that the ids the model was answered with are its own where they
/// were usable (not blank, first in the turn) and otherwise new ones, none
/// of them an id the model gave, all different.
fn check_ids(turn: usize, calls: &[ToolCallRequest], answered: &[&str]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for (n, (call, id)) in calls.iter().zip(answered).enumerate() {
        let usable = !call.id.trim().is_empty() && !calls[..n].iter().any(|c| c.id == call.id);
        let fits = if usable {
            *id == call.id
        } else {
            !id.trim().is_empty() && !calls.iter().any(|c| c.id == *id)
        };
        if !fits || !seen.insert(*id) {
            return Err(format!(
                "turn {turn} call {n}: the model's id {:?} was answered as {id:?}",
                call.id
            ));
        }
    }
    Ok(())
}

/// Checks everything the run did against the expectations of its calls.
fn check_run(
    turns: &[Vec<ToolCallRequest>],
    outcome: &Result<CrewOutput, CrewError>,
    llm: &ScriptedLlm,
    records: &Records,
    answered: bool,
) -> Result<(), String> {
    match (outcome, answered) {
        (Ok(output), true) => {
            if output.raw != "done" {
                return Err(format!("unexpected output {:?}", output.raw));
            }
        }
        (Err(error), false) => {
            let message = error.to_string();
            if !message.contains("the scripted model has no more turns") {
                return Err(format!("unclear error: {message}"));
            }
        }
        (other, _) => return Err(format!("unexpected outcome {other:?}")),
    }
    let requests = llm.requests();
    if requests.len() != turns.len() + 1 {
        return Err(format!(
            "{} requests for {} turns",
            requests.len(),
            turns.len()
        ));
    }
    let mut expected = Vec::new();
    for (turn, calls) in turns.iter().enumerate() {
        let messages = &requests[turn + 1].messages;
        // The turn's own assistant message, then one answer per call.
        let start = messages
            .len()
            .checked_sub(calls.len() + 1)
            .ok_or("too few messages")?;
        let asked: &ChatMessage = &messages[start];
        let same_but_ids = asked.tool_calls.len() == calls.len()
            && asked
                .tool_calls
                .iter()
                .zip(calls)
                .all(|(a, c)| (&a.name, &a.arguments) == (&c.name, &c.arguments));
        if asked.role != Role::Assistant || !same_but_ids {
            return Err(format!(
                "turn {turn}: the model's calls are not echoed back"
            ));
        }
        let ids: Vec<&str> = asked.tool_calls.iter().map(|c| c.id.as_str()).collect();
        check_ids(turn, calls, &ids)?;
        for (n, ((call, id), answer)) in calls
            .iter()
            .zip(&ids)
            .zip(&messages[start + 1..])
            .enumerate()
        {
            if answer.role != Role::Tool || answer.tool_call_id.as_deref() != Some(*id) {
                return Err(format!(
                    "turn {turn} call {n}: answered {:?} for id {id:?}",
                    answer.tool_call_id
                ));
            }
            let expectation = Expected::of(call);
            expectation
                .check(&answer.content)
                .map_err(|e| format!("turn {turn} call {n} ({:?}): {e}", call.name))?;
            expected.push(expectation);
        }
    }
    // No tool ran outside its schema, none ran for a blocked call, and each
    // call that should run ran exactly once.
    let mut searched = take(&records.searched);
    let mut should_search: Vec<SearchArgs> = expected
        .iter()
        .filter_map(|e| match e {
            Expected::Searched(args) => Some(args.clone()),
            _ => None,
        })
        .collect();
    let by_query = |a: &SearchArgs, b: &SearchArgs| (&a.query, a.limit).cmp(&(&b.query, b.limit));
    searched.sort_by(by_query);
    should_search.sort_by(by_query);
    if searched != should_search {
        return Err(format!(
            "web_search ran {} times, {} expected",
            searched.len(),
            should_search.len()
        ));
    }
    if !take(&records.deleted).is_empty() {
        return Err("a blocked delete_file ran".into());
    }
    let mut echoed: Vec<String> = take(&records.echoed).iter().map(Value::to_string).collect();
    let mut should_echo: Vec<String> = expected
        .iter()
        .filter_map(|e| match e {
            Expected::Echoed(input) => Some(Value::Object(input.clone()).to_string()),
            _ => None,
        })
        .collect();
    echoed.sort();
    should_echo.sort();
    if echoed != should_echo {
        return Err(format!(
            "echo_json received {echoed:?}, expected {should_echo:?}"
        ));
    }
    let reaching = expected.iter().filter(|e| e.reaches_hooks()).count();
    let (pre, post) = (take(&records.pre).len(), take(&records.post).len());
    if (pre, post) != (reaching, reaching) {
        return Err(format!(
            "{pre} PRE and {post} POST dispatches for {reaching} calls with object arguments"
        ));
    }
    Ok(())
}

// ---- strategies ----

/// Spellings a model might use: exact, normalizable, near misses, look-
/// alikes, empty and odd ones.
const NAMES: &[&str] = &[
    "web_search",
    "Web Search",
    "WebSearch",
    "web-search",
    "Web-Search ",
    "  web_search\t",
    "ｗｅｂ＿ｓｅａｒｃｈ",
    "web_search\u{200b}",
    "web_serch",
    "websearch",
    "w\u{0435}b_search",
    "web_search_v2",
    "delete_file",
    "Delete File",
    "DELETE_FILE",
    "deleteFile",
    "delete\u{0}file",
    "delete_f\u{0456}le",
    "delete_files",
    "echo_json",
    "EchoJSON",
    "echo json",
    "",
    " ",
    "_",
    "\u{0}",
    "../../etc/passwd",
    "tool\nname",
];

const SCHEMA_INVALID: &[&str] = &[
    r#"{"query": 5}"#,
    r#"{"query": null}"#,
    r#"{"query": ["a"]}"#,
    r#"{"query": {"nested": "x"}}"#,
    r#"{"q": "missing query"}"#,
    r#"{"query": "x", "limit": -1}"#,
    r#"{"query": "x", "limit": "ten"}"#,
    r#"{"query": "x", "limit": 4294967296}"#,
    r#"{"query": "x", "limit": 1.5}"#,
    r#"{"query": "a", "query": "b"}"#,
    r#"{"path": 7}"#,
    "{}",
    "",
    "   \n",
];

const NOT_OBJECTS: &[&str] = &[
    "[1, 2]",
    "[]",
    r#""a string""#,
    "42",
    "-0.5e10",
    "null",
    "true",
    r#"[{"query": "inside an array"}]"#,
    r#""{\"query\": \"doubly encoded\"}""#,
];

const NOT_JSON: &[&str] = &[
    "{",
    "}",
    "{not json",
    r#"{"query": }"#,
    r#"{"query": "unterminated"#,
    r#"{'query': 'single quotes'}"#,
    r#"{"query": "x",}"#,
    r#"{"query": "x"} trailing"#,
    "NaN",
    "\u{feff}{}",
    r#"{"query": "\ud800"}"#,
    r#"{"query": "bad \x escape"}"#,
    "query=rust",
];

/// Text nested `depth` levels deep: arrays, objects, or a valid object
/// carrying the nesting in a field.
fn nested(depth: usize, shape: u8) -> String {
    match shape % 3 {
        0 => format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
        1 => format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth)),
        _ => format!(
            r#"{{"query": "deep", "extra": {}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        ),
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arguments() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (any::<String>(), prop::option::of(any::<u32>()))
            .prop_map(|(query, limit)| json!({"query": query, "limit": limit}).to_string()),
        1 => any::<String>()
            .prop_map(|q| json!({"query": format!("{q} forbidden"), "limit": 1}).to_string()),
        1 => "[a-z/.]{0,20}".prop_map(|path| json!({"path": path}).to_string()),
        2 => prop::sample::select(SCHEMA_INVALID).prop_map(str::to_owned),
        2 => prop::sample::select(NOT_OBJECTS).prop_map(str::to_owned),
        2 => prop::sample::select(NOT_JSON).prop_map(str::to_owned),
        1 => any::<String>(),
        1 => arb_json().prop_map(|v| v.to_string()),
        1 => (1usize..400, any::<u8>()).prop_map(|(depth, shape)| nested(depth, shape)),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(NAMES).prop_map(str::to_owned),
        1 => any::<String>(),
        1 => "[A-Za-z_ -]{0,14}",
    ]
}

/// Ids: mostly unique, sometimes repeated, empty or odd.
fn id_choice() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        4 => Just(None),
        1 => prop::sample::select(&["dup", "", "call_1", " ", "é"][..]).prop_map(Some),
    ]
}

fn batch() -> impl Strategy<Value = Vec<(String, String, Option<&'static str>)>> {
    prop::collection::vec((name(), arguments(), id_choice()), 1..20)
}

fn cases() -> u32 {
    48 * test_scale() as u32
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_and_adversarial_batches_are_handled_call_by_call(
        batches in prop::collection::vec(batch(), 1..3),
        answer in prop::bool::weighted(0.9),
        concurrency in prop::sample::select(&[1usize, 3, 16][..]),
    ) {
        let mut next = 0;
        let turns: Vec<Vec<ToolCallRequest>> = batches
            .into_iter()
            .map(|calls| {
                calls
                    .into_iter()
                    .map(|(name, arguments, id)| {
                        next += 1;
                        let id = id.map_or_else(|| format!("call_{next}"), str::to_owned);
                        call(id, name, arguments)
                    })
                    .collect()
            })
            .collect();

        let (outcome, llm, records) = run(&turns, answer, concurrency);

        if let Err(problem) = check_run(&turns, &outcome, &llm, &records, answer) {
            return Err(TestCaseError::fail(problem));
        }
    }
}

// ---- the extreme cases, one by one ----

/// Checks one single-turn run and returns its observations.
fn run_checked(calls: Vec<ToolCallRequest>, concurrency: usize) -> Vec<String> {
    let turns = [calls];
    let (outcome, llm, records) = run(&turns, true, concurrency);
    check_run(&turns, &outcome, &llm, &records, true).unwrap_or_else(|problem| panic!("{problem}"));
    llm.requests()[1]
        .observations()
        .iter()
        .map(|o| (*o).to_owned())
        .collect()
}

#[test]
fn deeply_nested_arguments_are_refused_without_exhausting_the_stack() {
    let depth = 10_000;
    let calls: Vec<ToolCallRequest> = (0..3u8)
        .flat_map(|shape| {
            let text = nested(depth, shape);
            [
                call(format!("s{shape}"), "web_search", text.clone()),
                call(format!("e{shape}"), "echo_json", text.clone()),
                // Unclosed: the parser must stop at its limit, not at the end.
                call(format!("u{shape}"), "web_search", &text[..text.len() / 2]),
            ]
        })
        .collect();

    // A small stack: anything that recursed once per level of a
    // 10,000-deep document would overflow it many times over.
    let observations = std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(move || run_checked(calls, 4))
        .expect("spawns")
        .join()
        .expect("no stack overflow, no panic");

    assert_eq!(observations.len(), 9);
    for observation in &observations {
        assert!(
            observation.contains("recursion limit exceeded"),
            "{}",
            excerpt(observation)
        );
        assert!(
            observation.len() < 1_000,
            "the refusal quotes only an excerpt"
        );
    }
}

#[test]
fn megabyte_arguments_reach_the_tool_intact_or_are_refused_briefly() {
    let big = "λ".repeat(512 * 1024); // 1 MiB of UTF-8
    let calls = vec![
        call("valid", "web_search", json!({"query": big}).to_string()),
        call("echo", "echo_json", json!({"blob": big}).to_string()),
        call(
            "unterminated",
            "web_search",
            format!(r#"{{"query": "{big}"#),
        ),
        call("array", "web_search", json!([big]).to_string()),
        call(
            "long-name",
            "x".repeat(100_000),
            json!({"query": "rust"}).to_string(),
        ),
    ];

    let observations = run_checked(calls, 2);

    assert_eq!(observations[0].len(), "results for ".len() + big.len());
    assert!(observations[2].len() < 1_000 && observations[3].len() < 1_000);
    assert!(observations[3].contains("expected a JSON object, got an array"));
}

#[test]
fn two_thousand_calls_in_one_turn_each_get_one_answer_in_order() {
    let count = 2_000 * test_scale();
    let calls: Vec<ToolCallRequest> = (0..count)
        .map(|n| {
            let (name, arguments) = match n % 7 {
                0 => ("web_search", json!({"query": format!("q{n}")}).to_string()),
                1 => (
                    "delete_file",
                    json!({"path": format!("/tmp/{n}")}).to_string(),
                ),
                2 => ("web_serch", json!({"query": "typo"}).to_string()),
                3 => ("web_search", "{not json".to_owned()),
                4 => ("echo_json", json!({ "n": n }).to_string()),
                5 => ("web_search", json!({"query": n}).to_string()),
                _ => (
                    "Web Search",
                    json!({"query": format!("forbidden {n}")}).to_string(),
                ),
            };
            // Every tenth id repeats an earlier one.
            let id = if n % 10 == 9 {
                format!("call_{}", n - 9)
            } else {
                format!("call_{n}")
            };
            call(id, name, arguments)
        })
        .collect();

    let observations = run_checked(calls, 16);

    assert_eq!(observations.len(), count);
    assert_eq!(observations[0], "results for q0");
    assert_eq!(observations[4], r#"{"n":4}"#);
}

#[test]
fn no_spelling_of_a_blocked_tool_reaches_it() {
    let spellings = [
        ("delete_file", true),
        ("Delete File", true),
        ("DeleteFile", true),
        ("deleteFile", true),
        ("delete-file", true),
        (" delete_file ", true),
        ("DELETE_FILE", true),
        ("ｄｅｌｅｔｅ＿ｆｉｌｅ", true),
        ("delete_file\u{200b}", true),
        ("delete\u{0}file", true),
        ("Délete_file", true),
        // A Cyrillic `і` reads as `i` (rule 22): it is delete_file.
        ("delete_f\u{0456}le", true),
        ("delete_files", false),
        ("deletefile", false),
        ("delete__file__", true),
    ];
    let calls = spellings
        .iter()
        .enumerate()
        .map(|(n, (name, _))| {
            call(
                format!("c{n}"),
                *name,
                json!({"path": "/etc/passwd"}).to_string(),
            )
        })
        .collect();

    let observations = run_checked(calls, 4);

    for ((name, blocked), observation) in spellings.iter().zip(&observations) {
        let expected = if *blocked {
            "Tool execution blocked by hook. Tool: delete_file".to_owned()
        } else {
            format!("Tool not found: {name}. {AVAILABLE}")
        };
        assert_eq!(observation, &expected, "{name:?}");
    }
}

#[test]
fn near_misses_are_not_found_and_normalized_spellings_run() {
    let observations = run_checked(
        vec![
            call("a", "web_serch", json!({"query": "a"}).to_string()),
            call("b", "Web-Search ", json!({"query": "b"}).to_string()),
            call("c", "w\u{0435}b_search", json!({"query": "c"}).to_string()),
            call("d", "", json!({"query": "d"}).to_string()),
            call("e", "WebSearch", json!({"query": "e"}).to_string()),
        ],
        1,
    );

    assert_eq!(
        observations,
        [
            format!("Tool not found: web_serch. {AVAILABLE}"),
            "results for b".to_owned(),
            // A Cyrillic `е` reads as `e` (rule 22): the call is web_search's,
            // through web_search's hooks.
            "results for c".to_owned(),
            format!("Tool not found: (the call named no tool). {AVAILABLE}"),
            "results for e".to_owned(),
        ]
    );
}

#[test]
fn duplicate_and_empty_call_ids_are_answered_by_position() {
    let calls = vec![
        call("same", "web_search", json!({"query": "first"}).to_string()),
        call("same", "web_search", json!({"query": "second"}).to_string()),
        call("", "echo_json", json!({"k": 1}).to_string()),
        call("", "nope", "{}"),
        call("same", "web_search", "[]"),
    ];

    let observations = run_checked(calls, 3);

    assert_eq!(
        observations[..3],
        ["results for first", "results for second", r#"{"k":1}"#]
    );
}
