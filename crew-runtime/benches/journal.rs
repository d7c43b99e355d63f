//! What the durable kickoffs' journal costs (SPEC §5, §13).
//!
//! On each store: the time per append (one committed, sealed, fenced
//! entry of 256 bytes, 1,000 in a row on one kickoff; with `append`, which
//! reads the step in its transaction, and with `append_after`, one round
//! trip for a writer that counts its entries), and the time per
//! claim of a resumer taking 1,000 expired kickoffs, one claim at a time
//! and in claims of 100. SQLite in a temporary file; PostgreSQL in a
//! throw-away cluster started here (`CREW_PG_URL` names another server
//! instead), skipped with a message where PostgreSQL is missing.
//!
//! `cargo bench -p crew-runtime --features durable --bench journal`

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use crew_runtime::store::Store;
use crew_runtime::store::journal::{Journal, JournalKey, KickoffStatus};

const APPENDS: usize = 1_000;
const KICKOFFS: usize = 1_000;
const LEASE: Duration = Duration::from_secs(600);

fn fail(what: &str, error: impl std::fmt::Display) -> ! {
    eprintln!("{what}: {error}");
    std::process::exit(1)
}

fn per(total: Duration, count: usize) -> String {
    format!("{:>8.1} µs", total.as_secs_f64() * 1e6 / count as f64)
}

/// 1,000 expired kickoffs to claim (a lease of zero has run out at once).
async fn expired(journal: &Journal) {
    for _ in 0..KICKOFFS {
        if let Err(error) = journal
            .create_kickoff("bench", "fingerprint", "gone", Duration::ZERO)
            .await
        {
            fail("starting a kickoff failed", error);
        }
    }
}

/// Claims every claimable kickoff `limit` at a time: how many, how long.
async fn claim_all(journal: &Journal, limit: usize) -> (usize, Duration) {
    let started = Instant::now();
    let mut claimed = 0;
    // Bounded: each round claims at least one, or ends.
    for _ in 0..=KICKOFFS {
        match journal.claim("resumer", LEASE, limit).await {
            Ok(leases) if leases.is_empty() => break,
            Ok(leases) => claimed += leases.len(),
            Err(error) => fail("claiming failed", error),
        }
    }
    (claimed, started.elapsed())
}

async fn report(backend: &str, url: &str) {
    let store = Store::connect(url)
        .await
        .unwrap_or_else(|error| fail("the store does not open", error));
    let key = JournalKey::generate().unwrap_or_else(|error| fail("no key", error));
    let journal = Journal::new(store, key);

    let lease = journal
        .create_kickoff("bench", "fingerprint", "writer", LEASE)
        .await
        .unwrap_or_else(|error| fail("starting a kickoff failed", error));
    let payload = vec![b'x'; 256];
    let started = Instant::now();
    for _ in 0..APPENDS {
        if let Err(error) = journal.append(&lease, "tool_intent", &payload).await {
            fail("appending failed", error);
        }
    }
    let appends = started.elapsed();
    if let Err(error) = journal.finish(&lease, KickoffStatus::Completed).await {
        fail("finishing failed", error);
    }

    // A writer that counts its entries: one round trip per append.
    let lease = journal
        .create_kickoff("bench", "fingerprint", "writer", LEASE)
        .await
        .unwrap_or_else(|error| fail("starting a kickoff failed", error));
    let started = Instant::now();
    for after in 0..APPENDS as u64 {
        if let Err(error) = journal
            .append_after(&lease, after, &[("tool_intent", &payload)])
            .await
        {
            fail("appending failed", error);
        }
    }
    let counted = started.elapsed();
    if let Err(error) = journal.finish(&lease, KickoffStatus::Completed).await {
        fail("finishing failed", error);
    }

    expired(&journal).await;
    let (one_by_one, one_time) = claim_all(&journal, 1).await;
    expired(&journal).await;
    let (batched, batch_time) = claim_all(&journal, 100).await;
    if one_by_one != KICKOFFS || batched != KICKOFFS {
        fail(
            "not every expired kickoff was claimed",
            format!("{one_by_one} and {batched} of {KICKOFFS}"),
        );
    }
    println!(
        "{backend:<10} append (256 B, committed): {} each ({APPENDS}), {} each after a count; claim of {KICKOFFS} expired kickoffs: {} per claim one at a time, {} per kickoff in claims of 100",
        per(appends, APPENDS),
        per(counted, APPENDS),
        per(one_time, KICKOFFS),
        per(batch_time, KICKOFFS),
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
        let sqlite = format!("sqlite://{}", dir.path().join("journal.db").display());
        report("SQLite", &sqlite).await;
        let postgres = match std::env::var("CREW_PG_URL") {
            Ok(url) => Some(url),
            Err(_) => support::postgres_database().await,
        };
        match postgres {
            Some(url) => report("PostgreSQL", &url).await,
            None => println!("PostgreSQL: not installed here, not measured"),
        }
    });
}
