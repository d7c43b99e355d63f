//! What the runtime costs per tool call, beyond the tool's own body.
//!
//! A crew on the scripted model makes 10,000 calls of a trivial typed tool
//! (`{"n": <u64>}` in, the number out) with one no-op PRE and one no-op POST
//! hook. The kickoff time, minus 10,000 direct calls of the tool body, over
//! 10,000, is the overhead per call: parsing the model's argument text,
//! building the hook context, both chains, deserializing the arguments,
//! rendering the result, the observation message, and the model turn's
//! share of the scripted model and the conversation.
//!
//! Not measured: building the crew and the model's plan (done before the
//! clock starts). The scripted model runs without recording requests (a
//! recording copies the whole conversation on every turn).
//!
//! Shapes measured:
//! - `tool_call_overhead`: 100 turns of 100 calls, the crew's defaults (the
//!   calls of a turn spread over up to 16 threads: the agent's own and 15
//!   helpers the kickoff starts once and keeps across turns; on a 2-core
//!   machine that concurrency costs more than it saves for a trivial tool,
//!   and pays off for tools that wait on the network);
//! - `sequential`: the same turns with `max_concurrent_tool_calls(1)`, all
//!   on the kickoff thread;
//! - `one_call_per_turn`: 10,000 turns of one call (a single call never
//!   leaves the agent's thread);
//! - `no_hooks`: the default shape with no hook registered, to show the
//!   hooks' share.
//!
//! Each shape runs `RUNS` times; the median is printed.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crew_runtime::prelude::*;
use serde::Deserialize;

const CALLS: u64 = 10_000;
const RUNS: usize = 7;

#[derive(Deserialize, schemars::JsonSchema)]
struct Ping {
    n: u64,
}

fn body(args: Ping) -> Result<u64, std::convert::Infallible> {
    Ok(args.n.wrapping_add(1))
}

fn registry(hooks: bool) -> Arc<HookRegistry> {
    let registry = Arc::new(HookRegistry::new());
    if hooks {
        let pre = registry.register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            black_box(&ctx.tool_input);
        });
        let post = registry.register_hook(POST_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            black_box(&ctx.tool_result);
        });
        if pre.is_err() || post.is_err() {
            eprintln!("the benchmark hooks could not be registered");
            std::process::exit(1);
        }
    }
    registry
}

fn crew(global: &Arc<HookRegistry>, turns: u64, per_turn: u64, concurrency: usize) -> Crew {
    let mut llm = ScriptedLlm::new().without_recording();
    for turn in 0..turns {
        llm = llm.calls((0..per_turn).map(|i| ("ping", json!({ "n": turn * per_turn + i }))));
    }
    let llm = Arc::new(llm.answer("done"));
    let agent = Agent::builder("Pinger")
        .tool(Tool::typed("ping", "Adds one", body))
        .llm(llm)
        .max_iter(usize::try_from(turns + 1).unwrap_or(usize::MAX))
        .build();
    let task = Task::builder("Ping").agent(&agent).build();
    let built = Crew::builder()
        .agent(agent)
        .task(task)
        .global_registry(global.clone())
        .max_concurrent_tool_calls(concurrency)
        .build();
    match built {
        Ok(crew) => crew,
        Err(error) => {
            eprintln!("the benchmark crew could not be built: {error}");
            std::process::exit(1);
        }
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The median time of a kickoff of a fresh crew of this shape.
fn time_kickoff(hooks: bool, turns: u64, per_turn: u64, concurrency: usize) -> Duration {
    let global = registry(hooks);
    let samples = (0..RUNS)
        .map(|_| {
            let crew = crew(&global, turns, per_turn, concurrency);
            let started = Instant::now();
            let output = crew.kickoff_blocking(());
            let elapsed = started.elapsed();
            match output {
                Ok(output) if output.raw == "done" => elapsed,
                other => {
                    eprintln!("the benchmark crew did not finish as planned: {other:?}");
                    std::process::exit(1);
                }
            }
        })
        .collect();
    median(samples)
}

/// The median time of `CALLS` direct calls of the tool body.
fn time_body() -> Duration {
    let samples = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            for n in 0..CALLS {
                let _ = black_box(body(black_box(Ping { n })));
            }
            started.elapsed()
        })
        .collect();
    median(samples)
}

fn noop_pre(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    black_box(ctx);
    Ok(())
}

fn noop_post(ctx: &mut ToolCallHookContext) -> Option<String> {
    black_box(ctx);
    None
}

/// `direct` of SPEC §5, as the dispatch benchmark measures it: the two hook
/// functions of one call, called through function pointers, no registry.
fn time_direct() -> f64 {
    type Pre = fn(&mut ToolCallHookContext) -> Result<(), HookAborted>;
    type Post = fn(&mut ToolCallHookContext) -> Option<String>;
    let mut ctx = ToolCallHookContext::new("ping", Default::default());
    let rounds = 1_000_000u64;
    let samples = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..rounds {
                let ctx = black_box(&mut ctx);
                let blocked = black_box(noop_pre as Pre)(ctx).is_err();
                let replaced = black_box(noop_post as Post)(ctx).is_some();
                black_box((blocked, replaced));
            }
            started.elapsed()
        })
        .collect();
    median(samples).as_nanos() as f64 / rounds as f64
}

fn per_call(total: Duration, baseline: Duration) -> f64 {
    total.saturating_sub(baseline).as_nanos() as f64 / CALLS as f64
}

fn main() {
    let threads = crew_runtime::DEFAULT_MAX_CONCURRENT_TOOL_CALLS;
    // Warm up allocator and code paths once.
    let _ = time_kickoff(true, 10, 100, threads);

    let baseline = time_body();
    let default_shape = time_kickoff(true, 100, 100, threads);
    let sequential = time_kickoff(true, 100, 100, 1);
    let one_per_turn = time_kickoff(true, CALLS, 1, threads);
    let no_hooks = time_kickoff(false, 100, 100, threads);

    println!(
        "kickoff tool_body {:.1} ns per call (baseline, subtracted below)",
        baseline.as_nanos() as f64 / CALLS as f64
    );
    println!(
        "kickoff tool_call_overhead {:.0} ns",
        per_call(default_shape, baseline)
    );
    println!(
        "kickoff sequential_overhead {:.0} ns (100 turns x 100 calls, one thread)",
        per_call(sequential, baseline)
    );
    println!(
        "kickoff one_call_per_turn_overhead {:.0} ns (10,000 turns x 1 call, no thread spawned)",
        per_call(one_per_turn, baseline)
    );
    println!(
        "kickoff no_hooks_overhead {:.0} ns (100 turns x 100 calls, no hook registered)",
        per_call(no_hooks, baseline)
    );

    // SPEC §5: the runtime's overhead per tool call, all on the agent's
    // thread (`sequential`: what the runtime itself costs, without the
    // hand-off to helper threads), within 200 x `direct`.
    let direct = time_direct();
    let sequential_ns = per_call(sequential, baseline);
    let ratio = sequential_ns / direct;
    println!("kickoff direct {direct:.1} ns (two hook functions called directly)");
    println!(
        "target sequential_overhead <= 200 x direct: {sequential_ns:.0} ns ({ratio:.0} x) {}",
        if ratio <= 200.0 { "PASS" } else { "FAIL" }
    );
}
