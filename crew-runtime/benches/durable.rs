//! What a durable kickoff costs per tool call (SPEC §5, §13).
//!
//! A crew on the scripted model makes `CALLS` calls of a tool whose body
//! takes 200 µs (a spin, so the sleep's granularity does not blur it), one
//! call per turn, with no hook. Durable (its journal committed before each
//! step acts: the model's answer and the call's intent before the tool, its
//! observation after: two transactions per call), with a tool that may run
//! again and with any other, against the same crew not durable,
//! alternating, on
//! SQLite (a temporary file, WAL, `synchronous=NORMAL`) and on PostgreSQL
//! (a throw-away cluster started here, or `CREW_PG_URL`; skipped with a
//! message where PostgreSQL is missing). The median time per call of each,
//! and their ratio (target on SQLite: ≤ 1.5 ×); on PostgreSQL, the time the
//! journal adds per call.
//!
//! `cargo bench -p crew-runtime --features durable,store --bench durable`

#[path = "shared/stores.rs"]
mod stores;
#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crew_runtime::durable::Durable;
use crew_runtime::prelude::*;
use crew_runtime::store::Store;
use crew_runtime::store::journal::JournalKey;

const CALLS: usize = 200;
const RUNS: usize = 25;
const BODY: Duration = Duration::from_micros(200);

fn fail(what: &str, error: impl std::fmt::Display) -> ! {
    eprintln!("{what}: {error}");
    std::process::exit(1)
}

/// The tool: 200 µs of work, then a short answer; `idempotent` (may run
/// again) or not (with a timeout). The journal costs the same for both.
fn tool(idempotent: bool) -> Tool {
    let tool = Tool::dynamic(
        "work",
        "Works for 200 µs",
        json!({"type": "object"}),
        |_| {
            let started = Instant::now();
            while started.elapsed() < BODY {
                std::hint::spin_loop();
            }
            Ok::<_, String>(json!("done"))
        },
    );
    if idempotent {
        tool.idempotent()
    } else {
        tool.with_timeout(Duration::from_secs(5))
    }
}

fn crew(durable: Option<(&Store, &JournalKey)>, idempotent: bool) -> Crew {
    let mut script = ScriptedLlm::new().without_recording();
    for _ in 0..CALLS {
        script = script.call("work", json!({}));
    }
    let llm = Arc::new(script.answer("finished"));
    let agent = Agent::builder("Worker")
        .llm(llm as Arc<dyn Llm>)
        .tool(tool(idempotent))
        .max_iter(CALLS + 1)
        .build();
    let mut builder = Crew::builder()
        .name("bench")
        .agent(agent.clone())
        .task(Task::builder("Work").agent(&agent).build())
        .global_registry(Arc::new(HookRegistry::new()));
    if let Some((store, key)) = durable {
        builder = builder.durable(Durable::new(store.clone()).journal_key(key.clone()));
    }
    match builder.build() {
        Ok(crew) => crew,
        Err(error) => fail("the crew does not build", error),
    }
}

/// The time per call of one kickoff.
async fn per_call(durable: Option<(&Store, &JournalKey)>, idempotent: bool) -> Duration {
    let crew = crew(durable, idempotent);
    let started = Instant::now();
    if let Err(error) = crew.kickoff(()).await {
        fail("the kickoff failed", error);
    }
    started.elapsed() / u32::try_from(CALLS).unwrap_or(u32::MAX)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

async fn report(backend: &str, url: &str) {
    let store = match Store::connect(url).await {
        Ok(store) => store,
        Err(error) => fail("the store does not open", error),
    };
    let key = match JournalKey::generate() {
        Ok(key) => key,
        Err(error) => fail("no key", error),
    };
    for (idempotent, tool) in [(true, "tool may run again"), (false, "any other tool")] {
        let (mut off, mut on) = (Vec::new(), Vec::new());
        // One of each first, unmeasured: the store's first writes, the
        // tool's placement record.
        per_call(None, idempotent).await;
        per_call(Some((&store, &key)), idempotent).await;
        for _ in 0..RUNS {
            off.push(per_call(None, idempotent).await);
            on.push(per_call(Some((&store, &key)), idempotent).await);
        }
        let (off, on) = (median(off), median(on));
        let ratio = on.as_secs_f64() / off.as_secs_f64();
        println!(
            "{backend:<10} {tool:<18} per call: not durable {:>7.1} µs, durable {:>7.1} µs, \
             ratio {ratio:.2} x, the journal adds {:>7.1} µs",
            off.as_secs_f64() * 1e6,
            on.as_secs_f64() * 1e6,
            (on.as_secs_f64() - off.as_secs_f64()) * 1e6,
        );
    }
}

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => fail("no runtime", error),
    };
    runtime.block_on(stores::on_each_store(|backend, url| async move {
        report(backend, &url).await;
    }));
}
