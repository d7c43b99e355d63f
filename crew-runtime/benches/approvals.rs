//! How soon an approval reaches the call waiting for it (SPEC §11).
//!
//! Two handles on one store, each with its own connection pool, as two
//! processes would have: one asks ([`StoreApprovals`], as a crew's gate
//! does), the other answers ([`Store::decide`], as the inbox does). For
//! each of 100 questions: once the question is listed and a person's
//! moment has passed (0 to 197 ms, spread so that answers do not fall in
//! step with SQLite's polling), the answer is given and the time until the
//! waiting call has it is taken. Printed:
//! the median and worst latency, on SQLite (the asking side polls every
//! 100 ms) and on PostgreSQL (`LISTEN`/`NOTIFY`; a throw-away cluster
//! started here, skipped with a message where PostgreSQL is missing).
//!
//! `cargo bench -p crew-runtime --features store --bench approvals`

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use crew_runtime::prelude::*;
use crew_runtime::store::{Answer, Decision, Store, StoreApprovals};
use crew_runtime::{HumanInputRequest, HumanInputSource};

const APPROVALS: usize = 100;

fn fail(what: &str, error: impl std::fmt::Display) -> ! {
    eprintln!("{what}: {error}");
    std::process::exit(1)
}

/// The latencies of `APPROVALS` answers given through `answering` to
/// questions asked through `asking`.
async fn latencies(asking: Store, answering: Store) -> Vec<Duration> {
    let approvals = StoreApprovals::new(asking);
    let mut taken = Vec::with_capacity(APPROVALS);
    for n in 0..APPROVALS {
        let mut request = HumanInputRequest::new("Run it?", "yes/no")
            .with_call_id(format!("call_{n}"))
            .with_tool("deploy", json!({"service": "web"}));
        request.timeout = Some(Duration::from_secs(60));
        let source = approvals.clone();
        let waiting = tokio::spawn(async move { source.answer(request).await });
        let id = loop {
            match answering.pending().await {
                Ok(pending) if !pending.is_empty() => break pending[0].id.clone(),
                Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                Err(error) => fail("listing the questions failed", error),
            }
        };
        // A person answers at no particular moment.
        let thinking = (n as u64 * 37) % 199;
        tokio::time::sleep(Duration::from_millis(thinking)).await;
        let answered = Instant::now();
        if let Err(error) = answering
            .decide(&id, Answer::new("bench", Decision::Approve))
            .await
        {
            fail("answering failed", error);
        }
        match waiting.await {
            Ok(Ok(answer)) if answer.text == "yes" => taken.push(answered.elapsed()),
            other => fail("the waiting call got no approval", format!("{other:?}")),
        }
    }
    taken.sort();
    taken
}

async fn report(backend: &str, url: &str) {
    let (asking, answering) = match (Store::connect(url).await, Store::connect(url).await) {
        (Ok(asking), Ok(answering)) => (asking, answering),
        (Err(error), _) | (_, Err(error)) => fail("the store does not open", error),
    };
    let taken = latencies(asking, answering).await;
    let median = taken[taken.len() / 2];
    let worst = taken[taken.len() - 1];
    println!(
        "{backend:<10} {APPROVALS} approvals: median {:>8.1} ms, worst {:>8.1} ms",
        median.as_secs_f64() * 1e3,
        worst.as_secs_f64() * 1e3
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|error| fail("no runtime", error));
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap_or_else(|error| fail("no temporary directory", error));
        let sqlite = format!("sqlite://{}", dir.path().join("approvals.db").display());
        report("SQLite", &sqlite).await;
        match support::postgres_database().await {
            Some(url) => report("PostgreSQL", &url).await,
            None => println!("PostgreSQL: not installed here, not measured"),
        }
    });
}
