//! What a Cedar policy set costs per tool call (SPEC §10, §5).
//!
//! The `kickoff` bench's `one_call_per_turn` shape — 10,000 turns of one
//! call of a trivial async tool, one no-op PRE and one no-op POST hook,
//! through `kickoff().await` on a multi-threaded runtime — on a crew whose
//! agent has 100 tools (`ping` and `tool_1` … `tool_99`), timed:
//! - `no_policies`: without a policy set (the runtime's own overhead);
//! - `policies_1`: one policy, a permit on `ping` reading an argument;
//! - `policies_100`: that permit and 99 more, one on each other tool.
//!
//! Targets: `policies_100` per call within 10 x `no_policies`, and within
//! 1.2 x `policies_1` (the set is indexed by tool: policies on other tools
//! cost nothing). The tool body's time is subtracted; the median of
//! `RUNS` kickoffs is printed.
//!
//! Then a reload of 1,000 policies, repeated while two threads make calls:
//! the worst call latency during the reloads against the worst without
//! (calls never wait on a reload: each call reads one snapshot).
//!
//! `cargo bench -p crew-runtime --features policy --bench policies`

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crew_runtime::llm::LlmError;
use crew_runtime::llm::{LlmRequest, ModelTurn, ToolCallRequest};
use crew_runtime::policy::Policies;
use crew_runtime::prelude::*;
use serde::Deserialize;

const CALLS: u64 = 10_000;
const RUNS: usize = 5;
const OTHER_TOOLS: usize = 99;

#[derive(Deserialize, schemars::JsonSchema)]
struct Ping {
    n: u64,
}

fn ping(args: Ping) -> Result<u64, std::convert::Infallible> {
    Ok(args.n.wrapping_add(1))
}

fn fail(what: &str, error: impl std::fmt::Display) -> ! {
    eprintln!("{what}: {error}");
    std::process::exit(1)
}

fn registry() -> Arc<HookRegistry> {
    let registry = Arc::new(HookRegistry::new());
    let pre = registry.register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
        black_box(&ctx.tool_input);
    });
    let post = registry.register_hook(POST_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
        black_box(&ctx.tool_result);
    });
    if let Err(error) = pre.and(post) {
        fail("the benchmark hooks could not be registered", error);
    }
    registry
}

fn tools() -> Vec<Tool> {
    let mut tools: Vec<Tool> =
        vec![Tool::typed("ping", "Adds one", |args: Ping| async move { ping(args) }).into()];
    for i in 1..=OTHER_TOOLS {
        tools.push(Tool::typed(format!("tool_{i}"), "Adds one", ping).into());
    }
    tools
}

/// The policy text: a permit on `ping`, and `others` permits on the other
/// tools, each reading an argument as the one on `ping` does.
fn policy_text(others: usize) -> String {
    let mut text = String::from(
        "permit(principal, action == Action::\"ping\", resource) when { context.args.n >= 0 };\n",
    );
    for i in 1..=others {
        text.push_str(&format!(
            "permit(principal, action == Action::\"tool_{}\", resource) when {{ context.args.n > {i} }};\n",
            (i - 1) % OTHER_TOOLS + 1
        ));
    }
    text
}

/// A model for any number of kickoffs: one call of `ping`, then `done`.
struct PingOnce;

#[crew_runtime::async_trait]
impl Llm for PingOnce {
    fn name(&self) -> &str {
        "ping-once"
    }

    async fn complete(&self, request: &LlmRequest<'_>) -> Result<ModelTurn, LlmError> {
        if request
            .messages
            .last()
            .is_some_and(|m| m.role == crew_runtime::Role::Tool)
        {
            return Ok(ModelTurn::FinalAnswer("done".to_owned()));
        }
        Ok(ModelTurn::ToolCalls {
            content: String::new(),
            calls: vec![ToolCallRequest {
                id: "call_1".to_owned(),
                name: "ping".to_owned(),
                arguments: r#"{"n": 1}"#.to_owned(),
            }],
        })
    }
}

fn crew(global: &Arc<HookRegistry>, calls: u64, policies: Option<&Policies>) -> Crew {
    let llm: Arc<dyn Llm> = if calls == 0 {
        Arc::new(PingOnce)
    } else {
        let mut llm = ScriptedLlm::new().without_recording();
        for n in 0..calls {
            llm = llm.call("ping", json!({ "n": n }));
        }
        Arc::new(llm.answer("done"))
    };
    let agent = Agent::builder("Pinger")
        .tools(tools())
        .llm(llm)
        .max_iter(usize::try_from(calls + 2).unwrap_or(usize::MAX))
        .build();
    let mut builder = Crew::builder()
        .agent(agent.clone())
        .task(Task::builder("Ping").agent(&agent).build())
        .global_registry(global.clone());
    if let Some(policies) = policies {
        builder = builder.policies(policies.clone());
    }
    builder
        .build()
        .unwrap_or_else(|error| fail("the benchmark crew could not be built", error))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| fail("no runtime for the benchmark", error))
}

fn check(output: Result<CrewOutput, CrewError>) {
    match output {
        Ok(output) if output.raw == "done" => {}
        other => fail(
            "the benchmark crew did not finish as planned",
            format!("{other:?}"),
        ),
    }
}

/// The median kickoff time of the shape, per call, the body's time
/// subtracted.
fn per_call(runtime: &tokio::runtime::Runtime, policies: Option<&Policies>, body: Duration) -> f64 {
    let global = registry();
    let mut samples: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let crew = crew(&global, CALLS, policies);
            let started = Instant::now();
            let output = runtime.block_on(crew.kickoff(()));
            let elapsed = started.elapsed();
            check(output);
            elapsed
        })
        .collect();
    samples.sort();
    samples[RUNS / 2].saturating_sub(body).as_nanos() as f64 / CALLS as f64
}

fn body_time() -> Duration {
    let started = Instant::now();
    for n in 0..CALLS {
        let _ = black_box(ping(black_box(Ping { n })));
    }
    started.elapsed()
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FAIL" }
}

/// The worst latency of one call of a crew's tool, over `calls` calls on
/// each of two threads, while `reloading` is set.
fn worst_call(crew: &Crew, calls: usize) -> Duration {
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    let mut worst = Duration::ZERO;
                    for _ in 0..calls {
                        let started = Instant::now();
                        check(crew.kickoff_blocking(()));
                        worst = worst.max(started.elapsed());
                    }
                    worst
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|thread| {
                thread
                    .join()
                    .unwrap_or_else(|_| fail("a caller", "panicked"))
            })
            .max()
            .unwrap_or_default()
    })
}

fn reload_under_calls() {
    let policies = Policies::from_text(&policy_text(999))
        .unwrap_or_else(|error| fail("the policies do not parse", error));
    let global = registry();
    // One call per kickoff (a model that calls once each time): the
    // latency of a kickoff is the call's.
    let crew = crew(&global, 0, Some(&policies));
    let without = worst_call(&crew, 200);
    let stop = AtomicBool::new(false);
    let mut reloads = 0usize;
    let during = std::thread::scope(|scope| {
        let reloader = scope.spawn(|| {
            let text = policy_text(999);
            let mut count = 0usize;
            while !stop.load(Ordering::Acquire) {
                if let Err(error) = policies.reload_text(&text) {
                    fail("a reload failed", error);
                }
                count += 1;
            }
            count
        });
        let worst = worst_call(&crew, 200);
        stop.store(true, Ordering::Release);
        reloads = reloader
            .join()
            .unwrap_or_else(|_| fail("the reloader", "panicked"));
        worst
    });
    println!(
        "policies reload 1000 policies x {reloads} while 2 threads call: worst call {:.0} us during reloads, {:.0} us without ({:.2} x)",
        during.as_secs_f64() * 1e6,
        without.as_secs_f64() * 1e6,
        during.as_secs_f64() / without.as_secs_f64().max(1e-9)
    );
}

fn main() {
    let runtime = runtime();
    let body = body_time();
    let policies_1 = Policies::from_text(&policy_text(0))
        .unwrap_or_else(|error| fail("the policies do not parse", error));
    let policies_100 = Policies::from_text(&policy_text(OTHER_TOOLS))
        .unwrap_or_else(|error| fail("the policies do not parse", error));
    // Warm up once.
    let _ = per_call(&runtime, Some(&policies_1), body);
    let none = per_call(&runtime, None, body);
    let one = per_call(&runtime, Some(&policies_1), body);
    let hundred = per_call(&runtime, Some(&policies_100), body);
    println!("policies no_policies {none:.0} ns per call (one call per turn, 100 tools)");
    println!("policies policies_1 {one:.0} ns per call");
    println!("policies policies_100 {hundred:.0} ns per call (1 on the called tool)");
    let ratio = hundred / none;
    println!(
        "target policies_100 <= 10 x no_policies: {ratio:.2} x {}",
        verdict(ratio <= 10.0)
    );
    let ratio = hundred / one;
    println!(
        "target policies_100 <= 1.2 x policies_1 (flat in other tools' policies): {ratio:.2} x {}",
        verdict(ratio <= 1.2)
    );
    reload_under_calls();
}
