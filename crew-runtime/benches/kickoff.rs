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
//! The tool is async (awaited in the kickoff's task) unless a line says
//! `sync_tool`: a plain `fn` tool with the default placement, which starts
//! on the runtime's blocking pool and runs in place once its calls have
//! proven quick (see `SyncPlacement`).
//!
//! Shapes measured, each through `kickoff_blocking` (the thread's own
//! current-thread runtime) and through `kickoff().await` on a
//! multi-threaded runtime:
//! - `sequential`: 100 turns of 100 calls with `max_concurrent_tool_calls(1)`,
//!   every call in the kickoff's task;
//! - `tool_call_overhead`: the same turns with the crew's defaults (up to 16
//!   calls at once, each a task of the runtime);
//! - `one_call_per_turn`: 10,000 turns of one call;
//! - `no_hooks`: the sequential shape with no hook registered;
//! - `sync_tool`: the sequential shape with a synchronous tool;
//! - `one_call_per_turn_sync_tool`: 10,000 turns of one call of the
//!   synchronous tool, against `one_call_per_turn` (SPEC §5 and the
//!   plain-tool target: within 2 x the async tool, on the current-thread
//!   runtime of `kickoff_blocking` and on a multi-threaded one).
//!
//! Then 1,000 crews kicked off at once on one multi-threaded runtime (each
//! three turns of two calls on a model that takes 20 ms per answer, so that
//! all of them are alive together): the wall time of the whole, and the
//! peak of heap memory in use over the baseline, per crew (counted by this
//! benchmark's allocator).
//!
//! Each shape runs `RUNS` times; the median is printed.

#[path = "shared/counting.rs"]
mod counting;

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use counting::{IN_USE, PEAK};
use crew_runtime::prelude::*;
use serde::Deserialize;

const CALLS: u64 = 10_000;
const RUNS: usize = 7;
const CREWS: usize = 1_000;

/// How a kickoff is run.
#[derive(Clone, Copy)]
enum Entry {
    /// `kickoff_blocking`, on the thread's own runtime.
    Blocking,
    /// `kickoff().await` on a multi-threaded runtime.
    Awaited,
}

/// Which tool the crew calls.
#[derive(Clone, Copy, PartialEq)]
enum Body {
    Async,
    Sync,
}

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

fn crew(
    global: &Arc<HookRegistry>,
    turns: u64,
    per_turn: u64,
    concurrency: usize,
    tool_body: Body,
) -> Crew {
    let mut llm = ScriptedLlm::new().without_recording();
    for turn in 0..turns {
        llm = llm.calls((0..per_turn).map(|i| ("ping", json!({ "n": turn * per_turn + i }))));
    }
    let llm = Arc::new(llm.answer("done"));
    let tool: Tool = match tool_body {
        Body::Async => {
            Tool::typed("ping", "Adds one", |args: Ping| async move { body(args) }).into()
        }
        Body::Sync => Tool::typed("ping", "Adds one", body).into(),
    };
    let agent = Agent::builder("Pinger")
        .tool(tool)
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
fn time_kickoff(
    entry: Entry,
    hooks: bool,
    turns: u64,
    per_turn: u64,
    concurrency: usize,
    tool_body: Body,
) -> Duration {
    let global = registry(hooks);
    let runtime = multi_thread_runtime();
    let samples = (0..RUNS)
        .map(|_| {
            let crew = crew(&global, turns, per_turn, concurrency, tool_body);
            let started = Instant::now();
            let output = match entry {
                Entry::Blocking => crew.kickoff_blocking(()),
                Entry::Awaited => runtime.block_on(crew.kickoff(())),
            };
            let elapsed = started.elapsed();
            check(output);
            elapsed
        })
        .collect();
    median(samples)
}

fn check(output: Result<CrewOutput, CrewError>) {
    match output {
        Ok(output) if output.raw == "done" => {}
        other => {
            eprintln!("the benchmark crew did not finish as planned: {other:?}");
            std::process::exit(1);
        }
    }
}

fn multi_thread_runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("no runtime for the benchmark: {error}");
            std::process::exit(1);
        }
    }
}

/// `CREWS` crews kicked off at once on one multi-threaded runtime: the
/// wall time of the whole, and the peak heap bytes in use above the
/// baseline, per crew.
fn many_crews() -> (Duration, usize) {
    let runtime = multi_thread_runtime();
    let global = registry(true);
    let crews: Vec<Crew> = (0..CREWS)
        .map(|_| {
            let llm = Arc::new(
                ScriptedLlm::new()
                    .without_recording()
                    .latency(Duration::from_millis(20))
                    .calls([("ping", json!({"n": 1})), ("ping", json!({"n": 2}))])
                    .calls([("ping", json!({"n": 3})), ("ping", json!({"n": 4}))])
                    .answer("done"),
            );
            let agent = Agent::builder("Pinger")
                .tool(Tool::typed("ping", "Adds one", |args: Ping| async move {
                    body(args)
                }))
                .llm(llm)
                .build();
            let built = Crew::builder()
                .agent(agent.clone())
                .task(Task::builder("Ping").agent(&agent).build())
                .global_registry(global.clone())
                .build();
            match built {
                Ok(crew) => crew,
                Err(error) => {
                    eprintln!("the benchmark crew could not be built: {error}");
                    std::process::exit(1);
                }
            }
        })
        .collect();
    let baseline = IN_USE.load(Ordering::Relaxed);
    PEAK.store(baseline, Ordering::Relaxed);
    let started = Instant::now();
    let outputs = runtime.block_on(async {
        let mut kickoffs = tokio::task::JoinSet::new();
        for crew in crews {
            kickoffs.spawn(async move { crew.kickoff(()).await });
        }
        let mut outputs = Vec::with_capacity(CREWS);
        while let Some(joined) = kickoffs.join_next().await {
            outputs.push(joined);
        }
        outputs
    });
    let elapsed = started.elapsed();
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(baseline);
    for output in outputs {
        match output {
            Ok(output) => check(output),
            Err(error) => {
                eprintln!("a kickoff task failed: {error}");
                std::process::exit(1);
            }
        }
    }
    (elapsed, peak / CREWS)
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
    // First, while the heap is small: 1,000 crews at once.
    let (crews_time, crew_bytes) = many_crews();

    // Warm up allocator and code paths once.
    let _ = time_kickoff(Entry::Blocking, true, 10, 100, threads, Body::Async);

    let baseline = time_body();
    let lines = [
        ("sequential", true, 100, 100, 1, Body::Async),
        ("tool_call_overhead", true, 100, 100, threads, Body::Async),
        ("one_call_per_turn", true, CALLS, 1, threads, Body::Async),
        ("no_hooks", false, 100, 100, 1, Body::Async),
        ("sync_tool", true, 100, 100, 1, Body::Sync),
        (
            "one_call_per_turn_sync_tool",
            true,
            CALLS,
            1,
            threads,
            Body::Sync,
        ),
    ];
    println!(
        "kickoff tool_body {:.1} ns per call (baseline, subtracted below)",
        baseline.as_nanos() as f64 / CALLS as f64
    );
    let mut figures = Vec::new();
    for (name, hooks, turns, per_turn, concurrency, tool_body) in lines {
        let blocking = per_call(
            time_kickoff(
                Entry::Blocking,
                hooks,
                turns,
                per_turn,
                concurrency,
                tool_body,
            ),
            baseline,
        );
        let awaited = per_call(
            time_kickoff(
                Entry::Awaited,
                hooks,
                turns,
                per_turn,
                concurrency,
                tool_body,
            ),
            baseline,
        );
        println!(
            "kickoff {name}_overhead blocking {blocking:.0} ns, async {awaited:.0} ns per call ({turns} turns x {per_turn} calls, {concurrency} at once)"
        );
        figures.push((name, blocking, awaited));
    }
    println!(
        "kickoff {CREWS} crews at once: {:.0} ms in all, {:.1} us per crew, peak heap {:.1} KiB per crew (3 turns of 2 calls, 20 ms per model answer)",
        crews_time.as_secs_f64() * 1e3,
        crews_time.as_secs_f64() * 1e6 / CREWS as f64,
        crew_bytes as f64 / 1024.0
    );

    // SPEC §5: the runtime's overhead per tool call within 200 x `direct`,
    // and the async entry within 1.5 x the blocking one.
    let direct = time_direct();
    println!("kickoff direct {direct:.1} ns (two hook functions called directly)");
    for (name, blocking, awaited) in &figures {
        if *name != "sequential" && *name != "tool_call_overhead" {
            continue;
        }
        for (entry, value) in [("blocking", blocking), ("async", awaited)] {
            let ratio = value / direct;
            println!(
                "target {name}_overhead ({entry}) <= 200 x direct: {value:.0} ns ({ratio:.0} x) {}",
                verdict(ratio <= 200.0)
            );
        }
        let ratio = awaited / blocking;
        println!(
            "target {name}_overhead async <= 1.5 x blocking: {ratio:.2} x {}",
            verdict(ratio <= 1.5)
        );
    }

    // A plain `fn` tool with a quick body costs within 2 x an async tool,
    // one call per turn, on both runtimes.
    let figure = |wanted: &str| {
        figures
            .iter()
            .find(|(name, _, _)| *name == wanted)
            .map(|(_, blocking, awaited)| (*blocking, *awaited))
    };
    if let (Some(async_tool), Some(sync_tool)) = (
        figure("one_call_per_turn"),
        figure("one_call_per_turn_sync_tool"),
    ) {
        for (entry, sync_ns, async_ns) in [
            ("blocking", sync_tool.0, async_tool.0),
            ("async", sync_tool.1, async_tool.1),
        ] {
            let ratio = sync_ns / async_ns;
            println!(
                "target one_call_per_turn sync tool ({entry}) <= 2 x async tool: {sync_ns:.0} ns vs {async_ns:.0} ns ({ratio:.2} x) {}",
                verdict(ratio <= 2.0)
            );
        }
    }
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FAIL" }
}
