//! The hook dispatch of SPEC §5, measured.
//!
//! Each scenario times one tool call's hook dispatch: `dispatch_pre` then
//! `dispatch_post` on a context built once, outside the loop. Every scenario
//! is first calibrated to a number of calls that takes about 60 ms and warmed
//! up; then 15 rounds each take one sample of every scenario in turn, so that
//! a noisy moment on a shared machine hits all scenarios alike rather than
//! one. The figure is the median sample, printed with the fastest and the
//! slowest so noise is visible.
//!
//! Each sample records both the measuring thread's CPU time and wall-clock
//! time. The figures and the checks use CPU time: dispatch never blocks, so
//! on a quiet machine the two agree, while on a shared machine wall-clock
//! time also counts the moments the benchmark's threads were preempted by
//! other work (with two threads on two shared cores, it mostly measures that
//! other work). Wall-clock medians are printed beside the figures, and a note
//! says when the two disagree. Where the thread CPU clock is unavailable the
//! figures fall back to wall-clock time.
//!
//! A counting global allocator counts heap allocations per thread, over the
//! sampled runs only.
//!
//! Run with `cargo bench -p crew-hooks-core --bench dispatch`.

// The counting allocator must implement `GlobalAlloc`, an unsafe trait, and
// the thread CPU clock is only reachable through `libc`. This benchmark is
// the one place in the workspace that needs unsafe code; the workspace
// denies it everywhere else.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::error::Error;
use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use hooks_core::runtime::{Dispatcher, MODEL_CALL_POINTS, TOOL_CALL_POINTS, register_crew_hook};
use hooks_core::{
    AgentInfo, ChatMessage, DispatchOutcome, Event, HookAborted, HookOptions, HookRegistry,
    HookStyle, LlmCallHookContext, POST_MODEL_CALL, POST_TOOL_CALL, PRE_MODEL_CALL, PRE_TOOL_CALL,
    ToolCallHookContext,
};
use serde_json::{Map, Value, json};

// ---------------------------------------------------------------------------
// Counting allocator and clocks

thread_local! {
    /// Heap allocations (`alloc`, `alloc_zeroed`, `realloc`) made by this
    /// thread. Constant-initialized and without a destructor, so reaching it
    /// from inside the allocator never allocates and never fails.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_allocation() {
    // `try_with` only fails during thread teardown, when nothing is measured.
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
}

/// Allocations made by the calling thread so far.
fn thread_allocations() -> u64 {
    ALLOCATIONS.try_with(Cell::get).unwrap_or(0)
}

/// `System`, counting every allocation.
struct CountingAllocator;

// SAFETY: every method forwards its arguments unchanged to `System`, which
// upholds the `GlobalAlloc` contract; counting touches no memory of the
// allocation and does not allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        // SAFETY: the caller's contract for `alloc_zeroed` is passed on as is.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_allocation();
        // SAFETY: `ptr` was allocated by `System` through this allocator with
        // `layout`; the caller's contract is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` through this allocator with
        // `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// CPU time the calling thread has used (NaN if the clock is unavailable).
fn thread_cpu_ns() -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable `timespec` for the whole call.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if status != 0 {
        return f64::NAN;
    }
    now.tv_sec as f64 * 1e9 + now.tv_nsec as f64
}

// ---------------------------------------------------------------------------
// Harness

const ROUNDS: usize = 15;
const SAMPLE_TARGET: Duration = Duration::from_millis(60);

/// One timed run of `calls` calls.
#[derive(Clone, Copy)]
struct Sample {
    /// Wall-clock nanoseconds per call (the slower thread's, with two).
    wall: f64,
    /// CPU nanoseconds per call (the slower thread's, with two).
    cpu: f64,
    /// Heap allocations during the run, every thread's.
    allocations: u64,
    /// Calls made, every thread's.
    calls: u64,
    /// Each thread's CPU and wall-clock nanoseconds per call, with two
    /// threads.
    per_thread: Option<[(f64, f64); 2]>,
}

/// Times `run(calls)` on the calling thread.
fn time_here(calls: u64, run: &mut dyn FnMut(u64)) -> Sample {
    let allocations = thread_allocations();
    let cpu = thread_cpu_ns();
    let started = Instant::now();
    run(calls);
    let wall = started.elapsed();
    let cpu = thread_cpu_ns() - cpu;
    Sample {
        wall: wall.as_nanos() as f64 / calls as f64,
        cpu: cpu / calls as f64,
        allocations: thread_allocations() - allocations,
        calls,
        per_thread: None,
    }
}

/// Sorted copy's median, minimum and maximum.
fn stats(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    (median, values[0], values[n - 1])
}

type SampleFn<'a> = Box<dyn FnMut(u64) -> Result<Sample, Box<dyn Error>> + 'a>;

/// A scenario: how to take a sample, and the samples taken.
struct Scenario<'a> {
    name: &'static str,
    take: SampleFn<'a>,
    /// Calls per sample, set by calibration.
    calls: u64,
    samples: Vec<Sample>,
    /// Every call made, calibration and warm-up included.
    calls_made: u64,
}

impl<'a> Scenario<'a> {
    fn new(name: &'static str, take: SampleFn<'a>) -> Self {
        Scenario {
            name,
            take,
            calls: 0,
            samples: Vec::with_capacity(ROUNDS),
            calls_made: 0,
        }
    }

    /// A scenario timed on the calling thread; `run(n)` makes `n` calls.
    fn here(name: &'static str, mut run: impl FnMut(u64) + 'a) -> Self {
        Scenario::new(name, Box::new(move |calls| Ok(time_here(calls, &mut run))))
    }

    fn sample(&mut self, calls: u64) -> Result<Sample, Box<dyn Error>> {
        let sample = (self.take)(calls)?;
        self.calls_made += sample.calls;
        Ok(sample)
    }

    /// Finds a number of calls that takes about [`SAMPLE_TARGET`] (which
    /// also warms caches, branch predictors and thread-locals), unless
    /// `calls` is given, then warms up with one full-size run.
    fn calibrate(&mut self, calls: Option<u64>) -> Result<(), Box<dyn Error>> {
        self.calls = match calls {
            Some(calls) => calls,
            None => {
                let mut calls = 1u64;
                loop {
                    let sample = self.sample(calls)?;
                    let elapsed = sample.wall * calls as f64;
                    if elapsed >= SAMPLE_TARGET.as_nanos() as f64 / 8.0 {
                        let scale = SAMPLE_TARGET.as_nanos() as f64 / elapsed;
                        break ((calls as f64 * scale).ceil() as u64).max(1);
                    }
                    calls *= 2;
                }
            }
        };
        self.sample(self.calls)?;
        Ok(())
    }

    fn measure_round(&mut self) -> Result<(), Box<dyn Error>> {
        let sample = self.sample(self.calls)?;
        self.samples.push(sample);
        Ok(())
    }

    fn wall(&self) -> f64 {
        stats(self.samples.iter().map(|s| s.wall).collect()).0
    }

    fn cpu(&self) -> f64 {
        stats(self.samples.iter().map(|s| s.cpu).collect()).0
    }

    /// The scenario's figure: median CPU nanoseconds per call, or wall-clock
    /// nanoseconds where the CPU clock is unavailable.
    fn figure(&self) -> f64 {
        let cpu = self.cpu();
        if cpu.is_finite() { cpu } else { self.wall() }
    }

    fn allocations_per_call(&self) -> f64 {
        let allocations: u64 = self.samples.iter().map(|s| s.allocations).sum();
        let calls: u64 = self.samples.iter().map(|s| s.calls).sum();
        allocations as f64 / calls as f64
    }

    fn print_detail(&self) {
        let (wall, wall_min, wall_max) = stats(self.samples.iter().map(|s| s.wall).collect());
        let (cpu, cpu_min, cpu_max) = stats(self.samples.iter().map(|s| s.cpu).collect());
        println!(
            "{:<18} cpu {:>7.1} ns/call (min {:>7.1}, max {:>7.1})  wall {:>7.1} (min {:>7.1}, max {:>7.1})  {} x {} calls  {} allocs/call",
            self.name,
            cpu,
            cpu_min,
            cpu_max,
            wall,
            wall_min,
            wall_max,
            self.samples.len(),
            self.calls,
            format_allocations(self.allocations_per_call()),
        );
        for thread in 0..2 {
            let per_call: Vec<(f64, f64)> = self
                .samples
                .iter()
                .filter_map(|s| s.per_thread.map(|t| t[thread]))
                .collect();
            if !per_call.is_empty() {
                let (cpu, cpu_min, cpu_max) = stats(per_call.iter().map(|t| t.0).collect());
                let (wall, wall_min, wall_max) = stats(per_call.iter().map(|t| t.1).collect());
                println!(
                    "  thread {thread}         cpu {cpu:>7.1} ns/call (min {cpu_min:>7.1}, max {cpu_max:>7.1})  wall {wall:>7.1} (min {wall_min:>7.1}, max {wall_max:>7.1})"
                );
            }
        }
    }

    fn summary_line(&self) -> String {
        format!(
            "dispatch {} {:.1} ns {} allocs",
            self.name,
            self.figure(),
            format_allocations(self.allocations_per_call())
        )
    }
}

fn format_allocations(per_call: f64) -> String {
    if per_call.fract() == 0.0 {
        format!("{per_call:.0}")
    } else {
        format!("{per_call:.6}")
    }
}

// ---------------------------------------------------------------------------
// What is measured

/// A no-op PRE hook, in the guide's signature.
fn noop_pre(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    black_box(ctx);
    Ok(())
}

/// A no-op POST hook, in the guide's signature. It keeps `tool_result`
/// unchanged, so no scenario needs to reset it between calls.
fn noop_post(ctx: &mut ToolCallHookContext) -> Option<String> {
    black_box(ctx);
    None
}

type PreFnPointer = fn(&mut ToolCallHookContext) -> Result<(), HookAborted>;
type PostFnPointer = fn(&mut ToolCallHookContext) -> Option<String>;

/// An agent that keeps its role shared, as the runtime's `Agent` does, so
/// that events name it without copying.
struct BenchAgent(Arc<str>);

impl BenchAgent {
    fn new() -> Self {
        BenchAgent(Arc::from("Researcher"))
    }
}

impl AgentInfo for BenchAgent {
    fn role(&self) -> &str {
        &self.0
    }

    fn shared_role(&self) -> Arc<str> {
        Arc::clone(&self.0)
    }
}

const CALLED_TOOL: &str = "web_search";

/// The context of a typical call: an agent's web search, in its POST state.
fn prepared_context() -> ToolCallHookContext {
    let input = match json!({"query": "tool-call hooks in Rust", "max_results": 5}) {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let mut ctx =
        ToolCallHookContext::new(CALLED_TOOL, input).with_agent(Arc::new(BenchAgent::new()));
    ctx.tool_result = Some("3 results: …".to_owned());
    ctx
}

// Both loops below hand the optimizer opaque inputs (the dispatcher or the
// function pointers, and the context) on every call, and consume each
// decision the way a caller does: by looking at which decision it is.
// (Passing the whole returned value through `black_box` would instead time a
// store-forwarding stall on reading it back.)

/// One tool call's hook dispatch, `calls` times: one snapshot for the
/// call, then its PRE and its POST chain, as the runtime does.
#[inline(never)]
fn dispatch_calls(dispatcher: &Dispatcher<'_>, ctx: &mut ToolCallHookContext, calls: u64) {
    for _ in 0..calls {
        let dispatcher = black_box(dispatcher);
        let ctx = black_box(&mut *ctx);
        let hooks = dispatcher.begin_call(&TOOL_CALL_POINTS);
        let blocked = matches!(
            hooks.dispatch(PRE_TOOL_CALL, ctx),
            DispatchOutcome::Aborted(_)
        );
        let aborted = matches!(
            hooks.dispatch(POST_TOOL_CALL, ctx),
            DispatchOutcome::Aborted(_)
        );
        black_box((blocked, aborted));
    }
}

/// One tool call's hook dispatch through the awaiting path, `calls` times:
/// each future is polled once with a waker that does nothing, which
/// completes it (the hooks measured never wait).
#[inline(never)]
fn dispatch_async_calls(dispatcher: &Dispatcher<'_>, ctx: &mut ToolCallHookContext, calls: u64) {
    let mut poll_context = std::task::Context::from_waker(std::task::Waker::noop());
    for _ in 0..calls {
        let dispatcher = black_box(dispatcher);
        let ctx = black_box(&mut *ctx);
        let hooks = dispatcher.begin_call(&TOOL_CALL_POINTS);
        let blocked = {
            let mut pre = std::pin::pin!(hooks.dispatch_async(PRE_TOOL_CALL, &mut *ctx));
            matches!(
                pre.as_mut().poll(&mut poll_context),
                std::task::Poll::Ready(DispatchOutcome::Aborted(_))
            )
        };
        let aborted = {
            let mut post = std::pin::pin!(hooks.dispatch_async(POST_TOOL_CALL, &mut *ctx));
            matches!(
                post.as_mut().poll(&mut poll_context),
                std::task::Poll::Ready(DispatchOutcome::Aborted(_))
            )
        };
        black_box((blocked, aborted));
    }
}

fn dispatching_async<'a>(name: &'static str, dispatcher: Dispatcher<'a>) -> Scenario<'a> {
    let mut ctx = prepared_context();
    Scenario::here(name, move |calls| {
        dispatch_async_calls(&dispatcher, &mut ctx, calls)
    })
}

/// An `async` no-op PRE hook that completes without waiting.
async fn noop_pre_async(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    black_box(ctx);
    Ok(())
}

/// One model call's hook dispatch, `calls` times (PRE and POST on one
/// snapshot).
#[inline(never)]
fn model_calls(dispatcher: &Dispatcher<'_>, ctx: &mut LlmCallHookContext, calls: u64) {
    for _ in 0..calls {
        let dispatcher = black_box(dispatcher);
        let ctx = black_box(&mut *ctx);
        let hooks = dispatcher.begin_call(&MODEL_CALL_POINTS);
        let blocked = matches!(
            hooks.dispatch(PRE_MODEL_CALL, ctx),
            DispatchOutcome::Aborted(_)
        );
        let aborted = matches!(
            hooks.dispatch(POST_MODEL_CALL, ctx),
            DispatchOutcome::Aborted(_)
        );
        black_box((blocked, aborted));
    }
}

fn noop_pre_model(ctx: &mut LlmCallHookContext) -> Result<(), HookAborted> {
    black_box(ctx);
    Ok(())
}

fn noop_post_model(ctx: &mut LlmCallHookContext) -> Option<String> {
    black_box(ctx);
    None
}

/// A model call of the researcher with a short conversation.
fn model_context() -> LlmCallHookContext {
    LlmCallHookContext::new(vec![
        ChatMessage::system("You are a researcher."),
        ChatMessage::user("Research Rust."),
    ])
    .with_agent(Arc::new(BenchAgent::new()))
}

fn dispatching_model<'a>(name: &'static str, dispatcher: Dispatcher<'a>) -> Scenario<'a> {
    let mut ctx = model_context();
    Scenario::here(name, move |calls| model_calls(&dispatcher, &mut ctx, calls))
}

/// Registers 20,000 hooks filtered to distinct tools on a fresh registry,
/// one by one. Returns the time of the first 10,000 in all, and of the
/// thousand registrations that bring the chain to 10,000 and to 20,000:
/// when the cost of one registration does not grow with the chain, the two
/// thousands take about as long.
fn registration_cost() -> Result<(Duration, Duration, Duration), Box<dyn Error>> {
    let registry = HookRegistry::new();
    let started = Instant::now();
    let mut first_ten_thousand = Duration::ZERO;
    let mut at_ten = Duration::ZERO;
    let mut thousand_started = started;
    for i in 0..20_000usize {
        if i % 1000 == 0 {
            let thousand = thousand_started.elapsed();
            if i == 10_000 {
                at_ten = thousand;
                first_ten_thousand = started.elapsed();
            }
            thousand_started = Instant::now();
        }
        registry.register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().tools([format!("tool_{i}")]),
            noop_pre,
        )?;
    }
    let at_twenty = thousand_started.elapsed();
    if registry.get_hooks(PRE_TOOL_CALL).len() != 20_000 {
        return Err("not every registration was kept".into());
    }
    Ok((first_ten_thousand, at_ten, at_twenty))
}

/// The two hook functions called directly, `calls` times.
#[inline(never)]
fn direct_calls(pre: PreFnPointer, post: PostFnPointer, ctx: &mut ToolCallHookContext, calls: u64) {
    for _ in 0..calls {
        let ctx = black_box(&mut *ctx);
        let blocked = black_box(pre)(ctx).is_err();
        let replaced = black_box(post)(ctx).is_some();
        black_box((blocked, replaced));
    }
}

/// Building the context of a call, `calls` times. The arguments map is
/// empty: the executor hands over the map it parsed from the model's output,
/// so building that map is not part of building a context.
#[inline(never)]
fn context_builds(agent: &Arc<dyn AgentInfo>, calls: u64) {
    for _ in 0..calls {
        let ctx = ToolCallHookContext::new(black_box(CALLED_TOOL), Map::new())
            .with_agent(Arc::clone(black_box(agent)));
        black_box(ctx);
    }
}

/// Two threads dispatching on `registry` at the same time, `calls` calls
/// each. Each thread warms up on its own before both start together.
fn two_thread_sample(registry: &HookRegistry, calls: u64) -> Result<Sample, Box<dyn Error>> {
    let start = Barrier::new(2);
    let samples = thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let start = &start;
                scope.spawn(move || {
                    let dispatcher = Dispatcher::new(registry);
                    let mut ctx = prepared_context();
                    dispatch_calls(&dispatcher, &mut ctx, calls / 8 + 1);
                    start.wait();
                    time_here(calls, &mut |n| dispatch_calls(&dispatcher, &mut ctx, n))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join())
            .collect::<Result<Vec<Sample>, _>>()
    });
    let [first, second] = samples
        .map_err(|_| "a dispatching thread panicked")?
        .try_into()
        .map_err(|_| "expected two threads")?;
    Ok(Sample {
        wall: first.wall.max(second.wall),
        cpu: first.cpu.max(second.cpu),
        allocations: first.allocations + second.allocations,
        calls: first.calls + second.calls,
        per_thread: Some([(first.cpu, first.wall), (second.cpu, second.wall)]),
    })
}

fn register_one_and_one(registry: &HookRegistry) -> Result<(), Box<dyn Error>> {
    registry.register_hook(PRE_TOOL_CALL, noop_pre)?;
    registry.register_hook(POST_TOOL_CALL, noop_post)?;
    Ok(())
}

/// `count` PRE and `count` POST hooks, each filtered to its own tool; the
/// one at position `matching` (if any) is filtered to the called tool.
fn register_filtered(
    registry: &HookRegistry,
    count: usize,
    matching: Option<usize>,
) -> Result<(), Box<dyn Error>> {
    for i in 0..count {
        let tool = if Some(i) == matching {
            CALLED_TOOL.to_owned()
        } else {
            format!("other_tool_{i}")
        };
        registry.register_hook_with(PRE_TOOL_CALL, HookOptions::new().tools([&tool]), noop_pre)?;
        registry.register_hook_with(
            POST_TOOL_CALL,
            HookOptions::new().tools([&tool]),
            noop_post,
        )?;
    }
    Ok(())
}

/// Checks that a scenario runs the hooks it claims to: dispatches once with
/// a listener attached and compares the hooks run at each point (0 where no
/// event came) with `expected`.
fn check_hooks_run(
    name: &str,
    dispatcher: &Dispatcher<'_>,
    expected: [usize; 2],
) -> Result<(), Box<dyn Error>> {
    let seen = Arc::new(Mutex::new([0usize; 2]));
    let sink = Arc::clone(&seen);
    let bus = dispatcher.global().events();
    let listener = bus.subscribe(move |event| {
        if let Event::HookDispatched(event) = event {
            let index = usize::from(event.point == POST_TOOL_CALL);
            sink.lock().unwrap_or_else(PoisonError::into_inner)[index] += event.hooks_run;
        }
    });
    let mut ctx = prepared_context();
    let hooks = dispatcher.begin_call(&TOOL_CALL_POINTS);
    hooks.dispatch(PRE_TOOL_CALL, &mut ctx);
    hooks.dispatch(POST_TOOL_CALL, &mut ctx);
    drop(hooks);
    bus.unsubscribe(listener);
    let got = *seen.lock().unwrap_or_else(PoisonError::into_inner);
    if got != expected {
        return Err(format!(
            "scenario {name} ran {got:?} hooks (PRE, POST), expected {expected:?}"
        )
        .into());
    }
    Ok(())
}

/// A fresh registry set up by `register`, checked to run `expected` hooks.
fn scenario_registry(
    name: &str,
    expected: [usize; 2],
    register: impl FnOnce(&HookRegistry) -> Result<(), Box<dyn Error>>,
) -> Result<HookRegistry, Box<dyn Error>> {
    let registry = HookRegistry::new();
    register(&registry)?;
    check_hooks_run(name, &Dispatcher::new(&registry), expected)?;
    Ok(registry)
}

fn dispatching<'a>(name: &'static str, dispatcher: Dispatcher<'a>) -> Scenario<'a> {
    let mut ctx = prepared_context();
    Scenario::here(name, move |calls| {
        dispatch_calls(&dispatcher, &mut ctx, calls)
    })
}

// ---------------------------------------------------------------------------
// Report

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FAIL" }
}

fn main() -> Result<(), Box<dyn Error>> {
    let empty = scenario_registry("none", [0, 0], |_| Ok(()))?;
    let one = scenario_registry("one_pre_one_post", [1, 1], register_one_and_one)?;
    // The 1 + 1 hooks filtered to the called tool: the same lookup as
    // ten_ten_one_match, without the nine other tools.
    let one_filtered = scenario_registry("one_one_filtered", [1, 1], |r| {
        register_filtered(r, 1, Some(0))
    })?;
    let ten = scenario_registry("ten_ten_one_match", [1, 1], |r| {
        register_filtered(r, 10, Some(4))
    })?;
    let hundred = scenario_registry("hundred_filtered", [0, 0], |r| {
        register_filtered(r, 50, None)
    })?;
    let listened = scenario_registry("listener", [1, 1], register_one_and_one)?;
    let events_seen = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&events_seen);
    listened.events().subscribe(move |_event| {
        counter.fetch_add(1, Ordering::Relaxed);
    });
    let shared = scenario_registry("two_threads", [1, 1], register_one_and_one)?;
    // The same 1 + 1 hooks, crew-scoped: the global registry has none.
    let global = HookRegistry::new();
    let crew = HookRegistry::new();
    register_crew_hook(
        &crew,
        PRE_TOOL_CALL,
        "BenchCrew",
        HookStyle::On,
        HookOptions::new(),
        noop_pre,
    )?;
    register_crew_hook(
        &crew,
        POST_TOOL_CALL,
        "BenchCrew",
        HookStyle::On,
        HookOptions::new(),
        noop_post,
    )?;
    let scoped = Dispatcher::new(&global).with_scope(&crew);
    check_hooks_run("crew_scoped", &scoped, [1, 1])?;
    let model = HookRegistry::new();
    model.register_hook(PRE_MODEL_CALL, noop_pre_model)?;
    model.register_hook(POST_MODEL_CALL, noop_post_model)?;
    let agent: Arc<dyn AgentInfo> = Arc::new(BenchAgent::new());
    let with_async = HookRegistry::new();
    with_async.register_async_hook(PRE_TOOL_CALL, noop_pre_async)?;
    with_async.register_hook(POST_TOOL_CALL, noop_post)?;

    let mut direct_ctx = prepared_context();
    let mut scenarios = vec![
        Scenario::here("direct", move |calls| {
            direct_calls(noop_pre, noop_post, &mut direct_ctx, calls);
        }),
        dispatching("none", Dispatcher::new(&empty)),
        dispatching("one_pre_one_post", Dispatcher::new(&one)),
        dispatching("ten_ten_one_match", Dispatcher::new(&ten)),
        dispatching("hundred_filtered", Dispatcher::new(&hundred)),
        dispatching("listener", Dispatcher::new(&listened)),
        Scenario::new(
            "two_threads",
            Box::new(|calls| two_thread_sample(&shared, calls)),
        ),
        dispatching("crew_scoped", scoped),
        Scenario::here("context_build", |calls| context_builds(&agent, calls)),
        dispatching_model("model_none", Dispatcher::new(&empty)),
        dispatching_model("model_one_one", Dispatcher::new(&model)),
        dispatching("one_one_filtered", Dispatcher::new(&one_filtered)),
        dispatching_async("async_path_one_one", Dispatcher::new(&one)),
        dispatching_async("one_async_one_sync", Dispatcher::new(&with_async)),
    ];
    const DIRECT: usize = 0;
    const NONE: usize = 1;
    const ONE: usize = 2;
    const TEN: usize = 3;
    const HUNDRED: usize = 4;
    const LISTENER: usize = 5;
    const TWO_THREADS: usize = 6;
    const CREW: usize = 7;
    const MODEL_NONE: usize = 9;
    const MODEL_ONE: usize = 10;
    const ONE_FILTERED: usize = 11;
    const ASYNC_PATH: usize = 12;
    const ONE_ASYNC: usize = 13;

    println!(
        "hook dispatch, PRE + POST of one tool call: {ROUNDS} rounds of one ~{} ms sample per scenario; {} CPUs",
        SAMPLE_TARGET.as_millis(),
        thread::available_parallelism().map_or(0, usize::from),
    );
    for (index, scenario) in scenarios.iter_mut().enumerate() {
        if index != TWO_THREADS {
            scenario.calibrate(None)?;
        }
    }
    // Each of the two threads makes as many calls as one thread alone does.
    let one_calls = scenarios[ONE].calls;
    scenarios[TWO_THREADS].calibrate(Some(one_calls))?;

    for _ in 0..ROUNDS {
        for scenario in &mut scenarios {
            scenario.measure_round()?;
        }
    }

    for scenario in &scenarios {
        scenario.print_detail();
    }
    let listener = &scenarios[LISTENER];
    let events_got = events_seen.load(Ordering::Relaxed);
    if events_got != 2 * listener.calls_made {
        return Err(format!(
            "the listener saw {events_got} events for {} calls, expected two per call",
            listener.calls_made
        )
        .into());
    }
    println!("  listener saw {events_got} events: 2 per call");

    let busy: Vec<&str> = scenarios
        .iter()
        .filter(|s| s.wall() > 1.1 * s.cpu())
        .map(|s| s.name)
        .collect();
    if !scenarios[ONE].cpu().is_finite() {
        println!("  note: no thread CPU clock; the figures below are wall-clock time");
    } else if !busy.is_empty() {
        println!(
            "  note: wall-clock time exceeds CPU time by more than 10% for {}: the machine is busy",
            busy.join(", ")
        );
    }

    println!();
    for scenario in &scenarios {
        println!("{}", scenario.summary_line());
    }

    // SPEC §5, as ratios inside this run. `direct` calls the two hook
    // functions of a call with no registry.
    let direct = scenarios[DIRECT].figure();
    let ratio_line = |name: &str, value: f64, base: f64, base_name: &str, limit: f64| {
        let ratio = value / base;
        println!(
            "target {name} <= {limit} x {base_name}: {value:.1} ns ({ratio:.2} x) {}",
            verdict(ratio <= limit)
        );
    };
    // Every point runs the same generic code with its id as a constant: the
    // tool-call and model-call pairs stand for all ten.
    ratio_line("none", scenarios[NONE].figure(), direct, "direct", 1.0);
    ratio_line(
        "model_none",
        scenarios[MODEL_NONE].figure(),
        direct,
        "direct",
        1.0,
    );
    let one = scenarios[ONE].figure();
    ratio_line("one_pre_one_post", one, direct, "direct", 8.0);
    ratio_line(
        "model_one_one",
        scenarios[MODEL_ONE].figure(),
        direct,
        "direct",
        8.0,
    );
    ratio_line(
        "ten_ten_one_match",
        scenarios[TEN].figure(),
        one,
        "one_pre_one_post",
        1.2,
    );
    // Flat in non-matching hooks: the same call with only the matching
    // hooks registered.
    ratio_line(
        "ten_ten_one_match",
        scenarios[TEN].figure(),
        scenarios[ONE_FILTERED].figure(),
        "one_one_filtered",
        1.2,
    );
    ratio_line(
        "hundred_filtered",
        scenarios[HUNDRED].figure(),
        one,
        "one_pre_one_post",
        1.2,
    );
    ratio_line(
        "crew_scoped",
        scenarios[CREW].figure(),
        one,
        "one_pre_one_post",
        1.3,
    );
    ratio_line(
        "listener",
        scenarios[LISTENER].figure(),
        direct,
        "direct",
        60.0,
    );
    let listener_allocations = scenarios[LISTENER].allocations_per_call();
    println!(
        "target listener <= 2 allocations per call: {} {}",
        format_allocations(listener_allocations),
        verdict(listener_allocations <= 2.0)
    );
    ratio_line(
        "two_threads",
        scenarios[TWO_THREADS].figure(),
        one,
        "one_pre_one_post",
        1.5,
    );

    // The awaiting path with only sync hooks runs them exactly as the
    // synchronous path does.
    ratio_line(
        "async_path_one_one",
        scenarios[ASYNC_PATH].figure(),
        one,
        "one_pre_one_post",
        1.2,
    );
    println!(
        "one async hook (PRE) + one sync hook (POST): {:.1} ns, {} allocations per call (the async hook's boxed future, and the awaiting walk, boxed so that the usual path's futures stay small)",
        scenarios[ONE_ASYNC].figure(),
        format_allocations(scenarios[ONE_ASYNC].allocations_per_call())
    );
    let sync_only = [
        ASYNC_PATH,
        NONE,
        ONE,
        TEN,
        HUNDRED,
        TWO_THREADS,
        CREW,
        MODEL_NONE,
        MODEL_ONE,
    ];
    let allocating: Vec<&str> = sync_only
        .iter()
        .filter(|&&index| scenarios[index].allocations_per_call() != 0.0)
        .map(|&index| scenarios[index].name)
        .collect();
    println!(
        "target 0 allocations per dispatch where no hook or only sync hooks run: {} {}",
        if allocating.is_empty() {
            "none allocates".to_owned()
        } else {
            format!("{} allocate", allocating.join(", "))
        },
        verdict(allocating.is_empty())
    );

    let (total, at_ten, at_twenty) = registration_cost()?;
    println!(
        "register 10000 filtered hooks one by one: {:.1} ms in all; the 1000 up to 10000 {:.2} ms, up to 20000 {:.2} ms",
        total.as_secs_f64() * 1e3,
        at_ten.as_secs_f64() * 1e3,
        at_twenty.as_secs_f64() * 1e3
    );
    let growth = at_twenty.as_secs_f64() / at_ten.as_secs_f64();
    println!(
        "target register 10000 <= 1 s, and a registration costs about the same at 20000 as at 10000 (<= 1.5 x): {:.2} x {}",
        growth,
        verdict(total <= Duration::from_secs(1) && growth <= 1.5)
    );
    Ok(())
}
