//! Crew isolation under load: two crews with hooks of their own, kicked off
//! on two threads at once, round after round, each running several tool
//! calls concurrently. A crew's hooks see only that crew's calls, and a
//! global hook sees every call exactly once.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use common::*;
use crew_runtime::Point;
use crew_runtime::events::ToolUsageFinishedEvent;
use crew_runtime::llm::{Llm, LlmError, LlmRequest, ModelTurn, Role, ToolCallRequest};
use crew_runtime::prelude::*;
use crew_runtime::register_hook;
use hooks_core::testing::GlobalHooksFixture;

const TURNS: usize = 3;
const CALLS_PER_TURN: usize = 6;

/// Identifies one tool call across the whole test: crew, kickoff, turn,
/// call.
type CallKey = (String, u64, u64, u64);

/// A model that asks for `CALLS_PER_TURN` calls of `work` per turn for
/// `TURNS` turns, numbering them by kickoff, and checks that every
/// observation it gets back is the one for its own call.
struct LoopingLlm {
    crew: &'static str,
    kickoffs: AtomicUsize,
    wrong_observations: Log<String>,
}

#[crew_runtime::async_trait]
impl Llm for LoopingLlm {
    fn name(&self) -> &str {
        "looping"
    }

    async fn complete(&self, request: &LlmRequest<'_>) -> Result<ModelTurn, LlmError> {
        let turn = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let kickoff = if turn == 0 {
            self.kickoffs.fetch_add(1, Ordering::SeqCst)
        } else {
            self.kickoffs.load(Ordering::SeqCst) - 1
        };
        for message in request.messages.iter().filter(|m| m.role == Role::Tool) {
            let id = message.tool_call_id.as_deref().unwrap_or("");
            if message.content != format!("done {id}") {
                push(&self.wrong_observations, message.content.clone());
            }
        }
        if turn >= TURNS {
            return Ok(ModelTurn::FinalAnswer(format!("{} finished", self.crew)));
        }
        let calls = (0..CALLS_PER_TURN)
            .map(|n| {
                let id = format!("{}-{kickoff}-{turn}-{n}", self.crew);
                ToolCallRequest {
                    arguments: json!({
                        "crew": self.crew, "kickoff": kickoff, "turn": turn, "n": n, "id": id,
                    })
                    .to_string(),
                    id,
                    name: "work".into(),
                }
            })
            .collect();
        Ok(ModelTurn::ToolCalls {
            content: String::new(),
            calls,
        })
    }
}

fn call_key(crew: &str, input: &serde_json::Map<String, Value>) -> CallKey {
    let number = |key: &str| input.get(key).and_then(Value::as_u64).unwrap_or(u64::MAX);
    (
        crew.to_owned(),
        number("kickoff"),
        number("turn"),
        number("n"),
    )
}

/// What the hooks of one crew saw: `(crew seen in ctx.crew, crew named in
/// the input, agent role)` per point.
#[derive(Clone, Default)]
struct Seen {
    pre: Log<(String, String, String)>,
    post: Log<(String, String, String)>,
}

fn witness(ctx: &ToolCallHookContext) -> (String, String, String) {
    (
        ctx.crew
            .as_deref()
            .map(|c| c.name().to_owned())
            .unwrap_or_default(),
        ctx.tool_input["crew"].as_str().unwrap_or("").to_owned(),
        ctx.agent_role().unwrap_or("").to_owned(),
    )
}

/// A crew named `name` with crew-scoped PRE and POST hooks recording into
/// `seen`, on the process-wide registry.
fn crew(name: &'static str, executed: &Log<CallKey>, seen: &Seen) -> (Crew, Arc<LoopingLlm>) {
    let llm = Arc::new(LoopingLlm {
        crew: name,
        kickoffs: AtomicUsize::new(0),
        wrong_observations: log(),
    });
    let sink = executed.clone();
    let work = Tool::dynamic(
        "work",
        "Does a unit of work",
        json!({"type": "object"}),
        move |args: Value| {
            let crew = args["crew"].as_str().unwrap_or("").to_owned();
            let input = args.as_object().cloned().unwrap_or_default();
            push(&sink, call_key(&crew, &input));
            Ok::<_, String>(json!(format!("done {}", args["id"].as_str().unwrap_or(""))))
        },
    );
    let role = format!("{name} worker");
    let worker = Agent::builder(role)
        .tool(work)
        .llm(llm.clone() as Arc<dyn Llm>)
        .max_iter(TURNS + 1)
        .build();
    let (pre, post) = (seen.pre.clone(), seen.post.clone());
    let crew = Crew::builder()
        .name(name)
        .agent(worker.clone())
        .task(Task::builder("Work").agent(&worker).build())
        .max_concurrent_tool_calls(4)
        .hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name(format!("{name}-pre")),
            move |ctx: &mut ToolCallHookContext| push(&pre, witness(ctx)),
        )
        .hook_with(
            POST_TOOL_CALL,
            HookOptions::new().name(format!("{name}-post")),
            move |ctx: &mut ToolCallHookContext| push(&post, witness(ctx)),
        )
        .build()
        .expect("builds");
    (crew, llm)
}

/// How many times each key occurs.
fn multiplicities(keys: Vec<CallKey>) -> BTreeMap<CallKey, usize> {
    let mut counts = BTreeMap::new();
    for key in keys {
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

#[test]
fn each_crews_hooks_see_only_its_calls_and_global_hooks_see_each_call_once() {
    let _fixture = GlobalHooksFixture::new();
    let global_seen: [Log<CallKey>; 2] = [log(), log()];
    fn watch<P: Point<Context = ToolCallHookContext>>(point: P, sink: Log<CallKey>) {
        register_hook(point, move |ctx: &mut ToolCallHookContext| {
            let crew = ctx
                .crew
                .as_deref()
                .map(|c| c.name().to_owned())
                .unwrap_or_default();
            push(&sink, call_key(&crew, &ctx.tool_input));
        })
        .expect("registers");
    }
    watch(PRE_TOOL_CALL, global_seen[0].clone());
    watch(POST_TOOL_CALL, global_seen[1].clone());
    let executed = log();
    let (alpha_seen, beta_seen, idle_seen) = (Seen::default(), Seen::default(), Seen::default());
    let (alpha, alpha_llm) = crew("alpha", &executed, &alpha_seen);
    let (beta, beta_llm) = crew("beta", &executed, &beta_seen);
    // Another instance of a crew, built but never run: building does not
    // double anything, and its hooks never fire.
    let (_idle, _) = crew("alpha", &executed, &idle_seen);
    let finished: [Log<Option<String>>; 2] = [log(), log()];
    for (crew, sink) in [&alpha, &beta].into_iter().zip(finished.clone()) {
        crew.events().subscribe(move |event| {
            if let Event::ToolUsageFinished(ToolUsageFinishedEvent { crew, .. }) = event {
                push(&sink, crew.clone());
            }
        });
    }

    let rounds = 10 * test_scale();
    let start = Barrier::new(2);
    std::thread::scope(|scope| {
        for crew in [&alpha, &beta] {
            let start = &start;
            scope.spawn(move || {
                for _ in 0..rounds {
                    start.wait();
                    let output = crew.kickoff_blocking(()).expect("runs");
                    assert_eq!(output.raw, format!("{} finished", crew.name()));
                }
            });
        }
    });

    let per_crew = rounds * TURNS * CALLS_PER_TURN;
    for (name, seen, llm, finished) in [
        ("alpha", &alpha_seen, &alpha_llm, &finished[0]),
        ("beta", &beta_seen, &beta_llm, &finished[1]),
    ] {
        let role = format!("{name} worker");
        for (point, log) in [("PRE", &seen.pre), ("POST", &seen.post)] {
            let witnessed = take(log);
            assert_eq!(witnessed.len(), per_crew, "{name} {point}");
            assert!(
                witnessed
                    .iter()
                    .all(|(crew, input, agent)| crew == name && input == name && agent == &role),
                "{name}'s {point} hook saw another crew's call"
            );
        }
        assert!(take(&llm.wrong_observations).is_empty(), "{name}");
        let finished = take(finished);
        assert_eq!(finished.len(), per_crew, "{name}'s bus");
        assert!(finished.iter().all(|c| c.as_deref() == Some(name)));
    }
    assert!(take(&idle_seen.pre).is_empty() && take(&idle_seen.post).is_empty());

    // Every call ran once, and each global hook saw each call once.
    let expected: BTreeMap<CallKey, usize> = ["alpha", "beta"]
        .into_iter()
        .flat_map(|crew| {
            (0..rounds).flat_map(move |kickoff| {
                (0..TURNS).flat_map(move |turn| {
                    (0..CALLS_PER_TURN)
                        .map(move |n| (crew.to_owned(), kickoff as u64, turn as u64, n as u64))
                })
            })
        })
        .map(|key| (key, 1))
        .collect();
    assert_eq!(multiplicities(take(&executed)), expected, "tool runs");
    for (point, seen) in ["PRE", "POST"].into_iter().zip(&global_seen) {
        assert_eq!(multiplicities(take(seen)), expected, "global {point} hook");
    }
}
