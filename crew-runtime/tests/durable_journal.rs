//! Durable kickoffs' journal in the store (SPEC §13): kickoff rows, the
//! write-ahead journal fenced by leases on the database's clock, and its
//! sealed payloads, on a real SQLite file and a real PostgreSQL server
//! (started by the test run). Every scenario runs on both.
//!
//! Expired leases are made with a lease of zero (run out as soon as it is
//! written, on the database's clock): nothing here waits for time to pass.
//! Every loop is bounded.

#[path = "support/stores.rs"]
mod stores;
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crew_runtime::store::Store;
use crew_runtime::store::journal::{
    Journal, JournalError, JournalKey, KickoffId, KickoffStatus, Lease,
};

/// A lease that outlives any test.
const LONG: Duration = Duration::from_secs(600);

use stores::{Keep, on_both_stores, store};

on_both_stores!(
    entries_read_back_in_order_with_contiguous_sequence_numbers,
    an_append_with_a_stale_epoch_is_refused_and_writes_nothing,
    an_expired_lease_cannot_append_even_with_the_right_epoch,
    a_ready_kickoff_is_claimable_at_once_and_a_parked_one_is_not,
    an_answer_while_running_makes_the_kickoff_ready_when_it_parks,
    a_running_kickoff_with_a_live_lease_is_not_claimed,
    a_wrong_key_is_told_apart_from_a_changed_entry,
    an_entry_moved_to_another_place_does_not_open,
    an_entry_removed_from_the_journal_is_named,
    an_unknown_kickoff_is_refused_as_unknown,
    purge_removes_the_entries_and_keeps_the_row,
    purging_finished_kickoffs_before_a_time_leaves_the_others,
    a_finished_kickoff_takes_no_more_entries,
    the_fingerprint_and_summary_are_as_started,
    every_stored_payload_is_sealed_with_a_nonce_of_its_own,
    entries_appended_after_a_count_land_together_in_order,
    entries_appended_after_a_wrong_count_are_refused_and_nothing_is_written,
    entries_appended_after_a_count_with_a_lost_lease_are_refused_and_nothing_is_written,
    entries_appended_together_land_in_order,
    the_database_clock_is_the_one_entries_are_stamped_with,
);

fn journal_on(store: &Store) -> Journal {
    Journal::new(store.clone(), JournalKey::from_bytes([7; 32]))
}

/// The kinds of the entries of `lease`'s kickoff, in order.
async fn kinds(journal: &Journal, lease: &Lease) -> Vec<String> {
    journal
        .entries(&lease.kickoff)
        .await
        .expect("read back")
        .into_iter()
        .map(|entry| entry.kind)
        .collect()
}

/// A kickoff held for a long lease, its start (entry 1) appended.
async fn started(journal: &Journal) -> Lease {
    let lease = running(journal, LONG).await;
    assert_eq!(
        journal
            .append(&lease, "start", b"s")
            .await
            .expect("appended"),
        1
    );
    lease
}

async fn running(journal: &Journal, lease: Duration) -> Lease {
    journal
        .create_kickoff("research", "fingerprint-1", "worker-a", lease)
        .await
        .expect("a kickoff starts")
}

fn lease_lost(result: Result<impl std::fmt::Debug, JournalError>) -> String {
    match result {
        Err(error @ JournalError::LeaseLost { .. }) => error.to_string(),
        other => panic!("expected LeaseLost, got {other:?}"),
    }
}

async fn entries_read_back_in_order_with_contiguous_sequence_numbers(store: Store, _keep: Keep) {
    let journal = journal_on(&store);
    let lease = running(&journal, LONG).await;
    let other = running(&journal, LONG).await;
    let mut written = Vec::new();
    for n in 0..20u32 {
        let payload = format!("payload {n}").into_bytes();
        let seq = journal
            .append(&lease, &format!("kind_{}", n % 3), &payload)
            .await
            .expect("appended");
        written.push(seq);
        // Another kickoff's entries interleave and number on their own.
        journal
            .append(&other, "other", b"x")
            .await
            .expect("appended");
    }
    assert_eq!(written, (1..=20).collect::<Vec<u64>>());
    let entries = journal.entries(&lease.kickoff).await.expect("read back");
    assert_eq!(entries.len(), 20);
    for (n, entry) in entries.iter().enumerate() {
        assert_eq!(entry.seq, n as u64 + 1);
        assert_eq!(entry.kind, format!("kind_{}", n % 3));
        assert_eq!(entry.payload, format!("payload {n}").into_bytes());
    }
    assert_eq!(
        store.kickoff(&lease.kickoff).await.expect("listed").step,
        20
    );
    assert_eq!(
        journal.entries(&other.kickoff).await.expect("read").len(),
        20
    );
}

async fn an_append_with_a_stale_epoch_is_refused_and_writes_nothing(store: Store, _keep: Keep) {
    let journal = journal_on(&store);
    let first = running(&journal, LONG).await;
    journal
        .append(&first, "start", b"inputs")
        .await
        .expect("appended");
    // The first owner gives up its lease (a deploy); another process claims.
    journal.release(&first).await.expect("released");
    let claimed = journal.claim("worker-b", LONG, 10).await.expect("claimed");
    assert_eq!(claimed.len(), 1);
    let second = claimed[0].clone();
    assert_eq!((second.kickoff, second.epoch), (first.kickoff, 2));

    // The first owner, not knowing, tries to go on: refused, nothing written.
    let message = lease_lost(journal.append(&first, "tool_intent", b"pay 10").await);
    assert!(
        message.contains("worker-b claimed it since, at epoch 2"),
        "{message}"
    );
    lease_lost(journal.renew(&first, LONG).await);
    lease_lost(journal.finish(&first, KickoffStatus::Completed).await);
    lease_lost(journal.park(&first).await);
    lease_lost(journal.release(&first).await);
    // The same owner's name with the old epoch is still stale.
    let stale = Lease {
        owner: "worker-b".into(),
        ..first.clone()
    };
    lease_lost(journal.append(&stale, "tool_intent", b"pay 10").await);

    let summary = store.kickoff(&first.kickoff).await.expect("listed");
    assert_eq!(
        (summary.step, summary.epoch, summary.owner.as_str()),
        (1, 2, "worker-b")
    );
    assert_eq!(summary.status, KickoffStatus::Running);
    // The new owner's entry follows on at 2: nothing of the stale one's.
    assert_eq!(
        journal
            .append(&second, "tool_intent", b"pay 20")
            .await
            .expect("appended"),
        2
    );
    let entries = journal.entries(&first.kickoff).await.expect("read");
    let payloads: Vec<&[u8]> = entries
        .iter()
        .map(|entry| entry.payload.as_slice())
        .collect();
    assert_eq!(payloads, [&b"inputs"[..], &b"pay 20"[..]]);
}

async fn an_expired_lease_cannot_append_even_with_the_right_epoch(store: Store, _keep: Keep) {
    let journal = journal_on(&store);
    // A lease of zero has run out as soon as it is written, on the
    // database's clock: the owner and epoch are still the current ones.
    let lease = running(&journal, Duration::ZERO).await;
    let summary = store.kickoff(&lease.kickoff).await.expect("listed");
    assert_eq!((summary.owner.as_str(), summary.epoch), ("worker-a", 1));
    let message = lease_lost(journal.append(&lease, "start", b"inputs").await);
    assert!(message.contains("its lease ran out"), "{message}");
    lease_lost(journal.renew(&lease, LONG).await);
    lease_lost(journal.finish(&lease, KickoffStatus::Completed).await);
    assert_eq!(store.kickoff(&lease.kickoff).await.expect("listed").step, 0);
    assert!(
        journal
            .entries(&lease.kickoff)
            .await
            .expect("read")
            .is_empty()
    );

    // A lease renewed in time holds.
    let held = running(&journal, LONG).await;
    journal.renew(&held, LONG).await.expect("renewed");
    assert_eq!(
        journal
            .append(&held, "start", b"inputs")
            .await
            .expect("appended"),
        1
    );
    // Renewed to zero, it has run out.
    journal.renew(&held, Duration::ZERO).await.expect("renewed");
    lease_lost(journal.append(&held, "more", b"x").await);
}

async fn a_ready_kickoff_is_claimable_at_once_and_a_parked_one_is_not(store: Store, _keep: Keep) {
    let journal = journal_on(&store);
    let lease = running(&journal, LONG).await;
    journal
        .append(&lease, "question", b"q-1")
        .await
        .expect("appended");
    assert_eq!(
        journal.park(&lease).await.expect("parked"),
        KickoffStatus::Parked
    );
    // Parked: held by nobody, but nobody may take it until it is ready.
    assert!(
        journal
            .claim("resumer", LONG, 10)
            .await
            .expect("claim")
            .is_empty()
    );
    lease_lost(journal.append(&lease, "after_park", b"x").await);

    assert_eq!(
        store.set_ready(&lease.kickoff).await.expect("ready"),
        KickoffStatus::Ready
    );
    assert_eq!(
        store.kickoff(&lease.kickoff).await.expect("listed").status,
        KickoffStatus::Ready
    );
    let claimed = journal.claim("resumer", LONG, 10).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        claimed[0],
        Lease {
            kickoff: lease.kickoff,
            owner: "resumer".into(),
            epoch: 2
        }
    );
    assert_eq!(
        store.kickoff(&lease.kickoff).await.expect("listed").status,
        KickoffStatus::Running
    );
    assert_eq!(
        journal
            .append(&claimed[0], "answer", b"yes")
            .await
            .expect("appended"),
        2
    );
    // Claimed once: a second resumer finds nothing.
    assert!(
        journal
            .claim("resumer-2", LONG, 10)
            .await
            .expect("claim")
            .is_empty()
    );
}

async fn an_answer_while_running_makes_the_kickoff_ready_when_it_parks(store: Store, _keep: Keep) {
    let journal = journal_on(&store);
    let lease = running(&journal, LONG).await;
    // The answer arrives before the kickoff parks: it stays running…
    assert_eq!(
        store.set_ready(&lease.kickoff).await.expect("set"),
        KickoffStatus::Running
    );
    // …and parking it then makes it ready, not parked (no answer lost).
    assert_eq!(
        journal.park(&lease).await.expect("parked"),
        KickoffStatus::Ready
    );
    assert_eq!(
        journal
            .claim("resumer", LONG, 10)
            .await
            .expect("claim")
            .len(),
        1
    );

    // A finished kickoff is left as it is.
    let done = running(&journal, LONG).await;
    journal
        .finish(&done, KickoffStatus::Failed)
        .await
        .expect("finished");
    assert_eq!(
        store.set_ready(&done.kickoff).await.expect("set"),
        KickoffStatus::Failed
    );
}

async fn a_running_kickoff_with_a_live_lease_is_not_claimed(store: Store, _keep: Keep) {
    let journal = journal_on(&store);
    let live = running(&journal, LONG).await;
    let dead = running(&journal, Duration::ZERO).await;
    let claimed = journal.claim("resumer", LONG, 10).await.expect("claim");
    assert_eq!(
        claimed.iter().map(|l| l.kickoff).collect::<Vec<_>>(),
        [dead.kickoff]
    );
    journal
        .append(&live, "still_mine", b"x")
        .await
        .expect("the holder goes on");
    assert!(
        journal
            .claim("resumer", LONG, 0)
            .await
            .expect("claim")
            .is_empty()
    );
}

async fn a_wrong_key_is_told_apart_from_a_changed_entry(store: Store, _keep: Keep) {
    let journal = journal_on(&store);
    let lease = running(&journal, LONG).await;
    journal
        .append(&lease, "start", b"inputs")
        .await
        .expect("appended");
    let other = Journal::new(store.clone(), JournalKey::from_bytes([8; 32]));
    match other.entries(&lease.kickoff).await {
        Err(JournalError::WrongKey { kickoff }) => assert_eq!(kickoff, lease.kickoff),
        other => panic!("expected WrongKey, got {other:?}"),
    }
    // The right key still reads it.
    assert_eq!(
        journal.entries(&lease.kickoff).await.expect("read").len(),
        1
    );
}

async fn an_entry_moved_to_another_place_does_not_open(store: Store, keep: Keep) {
    let journal = journal_on(&store);
    let lease = running(&journal, LONG).await;
    for kind in ["start", "tool_intent", "tool_result"] {
        journal
            .append(&lease, kind, kind.as_bytes())
            .await
            .expect("appended");
    }
    let id = lease.kickoff.to_string();
    // Entries 2 and 3 swap places (their kinds go with them).
    raw(
        &keep.url,
        &format!(
            "UPDATE crew_journal SET seq = 0 - seq WHERE kickoff_id = '{id}' AND seq IN (2, 3)"
        ),
    )
    .await;
    raw(&keep.url, &format!(
        "UPDATE crew_journal SET seq = CASE seq WHEN -2 THEN 3 ELSE 2 END WHERE kickoff_id = '{id}' AND seq < 0"
    ))
    .await;
    corrupt_at(&journal, &lease.kickoff, 2).await;

    // An entry carried over from another kickoff, at the same place.
    let second = running(&journal, LONG).await;
    journal
        .append(&second, "start", b"start")
        .await
        .expect("appended");
    let second_id = second.kickoff.to_string();
    raw(
        &keep.url,
        &format!("DELETE FROM crew_journal WHERE kickoff_id = '{second_id}'"),
    )
    .await;
    raw(&keep.url, &format!(
        "INSERT INTO crew_journal (kickoff_id, seq, kind, payload, at) \
         SELECT '{second_id}', seq, kind, payload, at FROM crew_journal WHERE kickoff_id = '{id}' AND seq = 1"
    ))
    .await;
    corrupt_at(&journal, &second.kickoff, 1).await;

    // An entry whose kind was changed.
    let third = running(&journal, LONG).await;
    journal
        .append(&third, "tool_intent", b"pay 10")
        .await
        .expect("appended");
    let third_id = third.kickoff.to_string();
    raw(
        &keep.url,
        &format!("UPDATE crew_journal SET kind = 'tool_result' WHERE kickoff_id = '{third_id}'"),
    )
    .await;
    corrupt_at(&journal, &third.kickoff, 1).await;
}

async fn an_entry_removed_from_the_journal_is_named(store: Store, keep: Keep) {
    let journal = journal_on(&store);
    let lease = running(&journal, LONG).await;
    for n in 0..3 {
        journal
            .append(&lease, "step", &[n])
            .await
            .expect("appended");
    }
    let id = lease.kickoff.to_string();
    raw(
        &keep.url,
        &format!("DELETE FROM crew_journal WHERE kickoff_id = '{id}' AND seq = 3"),
    )
    .await;
    corrupt_at(&journal, &lease.kickoff, 3).await;
    raw(
        &keep.url,
        &format!("DELETE FROM crew_journal WHERE kickoff_id = '{id}' AND seq = 1"),
    )
    .await;
    corrupt_at(&journal, &lease.kickoff, 1).await;
}

async fn corrupt_at(journal: &Journal, kickoff: &KickoffId, at: u64) {
    match journal.entries(kickoff).await {
        Err(error @ JournalError::Corrupt { .. }) => {
            let JournalError::Corrupt {
                kickoff: named,
                seq,
                ..
            } = &error
            else {
                unreachable!()
            };
            assert_eq!((named, *seq), (kickoff, at), "{error}");
            assert!(
                error.to_string().contains(&format!("entry {at}")),
                "{error}"
            );
        }
        other => panic!("expected Corrupt at {at}, got {other:?}"),
    }
}

async fn an_unknown_kickoff_is_refused_as_unknown(store: Store, _keep: Keep) {
    let journal = journal_on(&store);
    let unknown = KickoffId::generate().expect("an id");
    let is_unknown =
        |error: JournalError| matches!(error, JournalError::UnknownKickoff(id) if id == unknown);
    assert!(is_unknown(
        store.kickoff(&unknown).await.expect_err("refused")
    ));
    assert!(is_unknown(
        store.fingerprint(&unknown).await.expect_err("refused")
    ));
    assert!(is_unknown(
        store.set_ready(&unknown).await.expect_err("refused")
    ));
    assert!(is_unknown(
        store.purge(&unknown).await.expect_err("refused")
    ));
    assert!(is_unknown(
        journal.entries(&unknown).await.expect_err("refused")
    ));
    let lease = Lease {
        kickoff: unknown,
        owner: "worker-a".into(),
        epoch: 1,
    };
    assert!(is_unknown(
        journal
            .append(&lease, "start", b"x")
            .await
            .expect_err("refused")
    ));
    assert!(is_unknown(
        journal.renew(&lease, LONG).await.expect_err("refused")
    ));
    let message = store
        .kickoff(&unknown)
        .await
        .expect_err("refused")
        .to_string();
    assert!(message.contains(&unknown.to_string()), "{message}");
}

async fn purge_removes_the_entries_and_keeps_the_row(store: Store, keep: Keep) {
    let journal = journal_on(&store);
    let lease = running(&journal, LONG).await;
    journal
        .append(&lease, "start", b"inputs")
        .await
        .expect("appended");
    journal
        .append(&lease, "end", b"output")
        .await
        .expect("appended");
    match store.purge(&lease.kickoff).await {
        Err(JournalError::NotFinished {
            status: KickoffStatus::Running,
            ..
        }) => {}
        other => panic!("a running kickoff's journal must not be purged: {other:?}"),
    }
    assert_eq!(
        journal.entries(&lease.kickoff).await.expect("read").len(),
        2
    );
    journal
        .finish(&lease, KickoffStatus::Completed)
        .await
        .expect("finished");
    assert_eq!(store.purge(&lease.kickoff).await.expect("purged"), 2);
    assert_eq!(count(&keep.url, &lease.kickoff).await, 0);
    let summary = store.kickoff(&lease.kickoff).await.expect("the row stays");
    assert_eq!(
        (summary.status, summary.step),
        (KickoffStatus::Completed, 2)
    );
    assert!(summary.purged_at.is_some() && summary.finished_at.is_some());
    assert!(
        journal
            .entries(&lease.kickoff)
            .await
            .expect("read")
            .is_empty()
    );
}

async fn purging_finished_kickoffs_before_a_time_leaves_the_others(store: Store, keep: Keep) {
    let journal = journal_on(&store);
    let finished = running(&journal, LONG).await;
    journal
        .append(&finished, "start", b"x")
        .await
        .expect("appended");
    journal
        .finish(&finished, KickoffStatus::InDoubt)
        .await
        .expect("finished");
    let open = running(&journal, LONG).await;
    journal
        .append(&open, "start", b"x")
        .await
        .expect("appended");

    assert_eq!(
        store
            .purge_finished_before(SystemTime::UNIX_EPOCH)
            .await
            .expect("purged"),
        0
    );
    assert_eq!(count(&keep.url, &finished.kickoff).await, 1);
    let later = SystemTime::now() + Duration::from_secs(3600);
    assert_eq!(store.purge_finished_before(later).await.expect("purged"), 1);
    assert_eq!(count(&keep.url, &finished.kickoff).await, 0);
    assert_eq!(count(&keep.url, &open.kickoff).await, 1);
    // Already purged: not counted again.
    assert_eq!(store.purge_finished_before(later).await.expect("purged"), 0);
    assert_eq!(store.kickoffs().await.expect("listed").len(), 2);
}

async fn a_finished_kickoff_takes_no_more_entries(store: Store, _keep: Keep) {
    let journal = journal_on(&store);
    let lease = running(&journal, LONG).await;
    match journal.finish(&lease, KickoffStatus::Parked).await {
        Err(JournalError::Invalid(message)) => assert!(message.contains("parked"), "{message}"),
        other => panic!("parked is not an end: {other:?}"),
    }
    journal
        .finish(&lease, KickoffStatus::Cancelled)
        .await
        .expect("finished");
    let message = lease_lost(journal.append(&lease, "late", b"x").await);
    assert!(message.contains("it is cancelled"), "{message}");
    // Not claimable either.
    assert!(
        journal
            .claim("resumer", LONG, 10)
            .await
            .expect("claim")
            .is_empty()
    );
}

async fn the_fingerprint_and_summary_are_as_started(store: Store, _keep: Keep) {
    let journal = journal_on(&store);
    let lease = journal
        .create_kickoff(
            "billing",
            "agents=Clerk;tools=pay{amount}",
            "worker-a",
            LONG,
        )
        .await
        .expect("started");
    assert_eq!(
        store.fingerprint(&lease.kickoff).await.expect("read"),
        "agents=Clerk;tools=pay{amount}"
    );
    let summaries = store.kickoffs().await.expect("listed");
    assert_eq!(summaries.len(), 1);
    let summary = &summaries[0];
    assert_eq!(summary.id, lease.kickoff);
    assert_eq!(summary.crew, "billing");
    assert_eq!(
        (
            summary.status,
            summary.owner.as_str(),
            summary.epoch,
            summary.step
        ),
        (KickoffStatus::Running, "worker-a", 1, 0)
    );
    assert!(summary.lease_until > summary.created_at);
    assert_eq!(summary.finished_at, None);
    // An empty owner is refused.
    assert!(matches!(
        journal.create_kickoff("billing", "f", " ", LONG).await,
        Err(JournalError::Invalid(_))
    ));
}

async fn every_stored_payload_is_sealed_with_a_nonce_of_its_own(store: Store, keep: Keep) {
    let journal = journal_on(&store);
    let lease = running(&journal, LONG).await;
    let marker = b"PLAINTEXT-MARKER-iban-DE89";
    for _ in 0..3 {
        journal
            .append(&lease, "tool_intent", marker)
            .await
            .expect("appended");
    }
    let sql = "SELECT payload FROM crew_journal WHERE kickoff_id = $1 ORDER BY seq";
    let id = lease.kickoff.to_string();
    let stored: Vec<Vec<u8>> = if keep.url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(&keep.url)
            .await
            .expect("raw SQLite");
        sqlx::query_scalar(sql)
            .bind(&id)
            .fetch_all(&pool)
            .await
            .expect(sql)
    } else {
        let pool = sqlx::PgPool::connect(&keep.url)
            .await
            .expect("raw PostgreSQL");
        sqlx::query_scalar(sql)
            .bind(&id)
            .fetch_all(&pool)
            .await
            .expect(sql)
    };
    assert_eq!(stored.len(), 3);
    for payload in &stored {
        // A format byte, a 24-byte nonce, the ciphertext and a 16-byte tag.
        assert_eq!(payload.len(), 1 + 24 + marker.len() + 16);
        assert!(!payload.windows(marker.len()).any(|window| window == marker));
    }
    // The same payload three times: three different nonces and ciphertexts.
    assert_ne!(stored[0][1..25], stored[1][1..25]);
    assert_ne!(stored[1][1..25], stored[2][1..25]);
    assert_ne!(stored[0][25..], stored[1][25..]);
}

/// Runs `sql` straight on the database at `url` (what an attacker with
/// write access to the database could do).
async fn raw(url: &str, sql: &str) {
    if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await.expect("raw SQLite");
        sqlx::query(sql).execute(&pool).await.expect(sql);
        pool.close().await;
    } else {
        let pool = sqlx::PgPool::connect(url).await.expect("raw PostgreSQL");
        sqlx::query(sql).execute(&pool).await.expect(sql);
        pool.close().await;
    }
}

/// How many journal rows `kickoff` has in the database at `url`.
async fn count(url: &str, kickoff: &KickoffId) -> i64 {
    let sql = "SELECT COUNT(*) FROM crew_journal WHERE kickoff_id = $1";
    if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await.expect("raw SQLite");
        sqlx::query_scalar(sql)
            .bind(kickoff.to_string())
            .fetch_one(&pool)
            .await
            .expect(sql)
    } else {
        let pool = sqlx::PgPool::connect(url).await.expect("raw PostgreSQL");
        sqlx::query_scalar(sql)
            .bind(kickoff.to_string())
            .fetch_one(&pool)
            .await
            .expect(sql)
    }
}

/// `claimers` handles on the store at `url`, each with its own connection
/// pool (as separate processes have), race to claim 50 expired kickoffs a
/// few at a time: each is claimed exactly once, and every one is claimed.
async fn racing_claimers_claim_each_kickoff_once(url: &str, claimers: usize) {
    const KICKOFFS: usize = 50;
    let store = Store::connect(url).await.expect("opens");
    let journal = journal_on(&store);
    let mut all = Vec::new();
    for _ in 0..KICKOFFS {
        all.push(running(&journal, Duration::ZERO).await.kickoff);
    }
    let start = Arc::new(tokio::sync::Barrier::new(claimers));
    let mut tasks = Vec::new();
    for n in 0..claimers {
        let store = Store::connect(url).await.expect("opens");
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            let journal = journal_on(&store);
            let owner = format!("resumer-{n}");
            let mut mine = Vec::new();
            start.wait().await;
            // Bounded: 50 kickoffs take at most 50 non-empty claims.
            for _ in 0..=KICKOFFS {
                let claimed = journal.claim(&owner, LONG, 3).await.expect("claim");
                if claimed.is_empty() {
                    break;
                }
                for lease in claimed {
                    assert_eq!((lease.owner.as_str(), lease.epoch), (owner.as_str(), 2));
                    // The claim is real: the claimer can write.
                    journal
                        .append(&lease, "resumed", owner.as_bytes())
                        .await
                        .expect("appended");
                    mine.push(lease.kickoff);
                }
            }
            mine
        }));
    }
    let mut claims: BTreeMap<KickoffId, usize> = BTreeMap::new();
    let mut claimers_that_won = 0;
    for task in tasks {
        let mine = task.await.expect("a claimer");
        claimers_that_won += usize::from(!mine.is_empty());
        for id in mine {
            *claims.entry(id).or_default() += 1;
        }
    }
    assert_eq!(claims.len(), KICKOFFS, "every kickoff is claimed");
    assert!(
        claims.values().all(|&n| n == 1),
        "each exactly once: {claims:?}"
    );
    all.sort();
    assert_eq!(claims.keys().copied().collect::<Vec<_>>(), all);
    for summary in store.kickoffs().await.expect("listed") {
        assert_eq!((summary.epoch, summary.step), (2, 1));
    }
    eprintln!("{claimers_that_won} of {claimers} claimers won kickoffs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sqlite_claimers_racing_claim_each_kickoff_once() {
    let (_store, keep) = store("sqlite").await.expect("SQLite is always there");
    racing_claimers_claim_each_kickoff_once(&keep.url, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_postgres_claimers_racing_claim_each_kickoff_once() {
    let Some((_store, keep)) = store("postgres").await else {
        return;
    };
    racing_claimers_claim_each_kickoff_once(&keep.url, 8).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_payload_is_not_readable_in_the_sqlite_file() {
    let (store, keep) = store("sqlite").await.expect("SQLite is always there");
    let journal = journal_on(&store);
    let lease = journal
        .create_kickoff("crew-NAME-IN-CLEAR", "fingerprint", "worker-a", LONG)
        .await
        .expect("started");
    let marker = b"PLAINTEXT-MARKER-card-4242-4242";
    for _ in 0..3 {
        journal
            .append(&lease, "tool_intent", marker)
            .await
            .expect("appended");
    }
    drop(journal);
    drop(store);
    let dir = keep.dir.as_ref().expect("a directory");
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir.path()).expect("listed") {
        bytes.extend(std::fs::read(entry.expect("an entry").path()).expect("read"));
    }
    let has = |needle: &[u8]| bytes.windows(needle.len()).any(|window| window == needle);
    // What is stored in clear is found (the search works)…
    assert!(has(b"crew-NAME-IN-CLEAR"));
    // …and the payload is not.
    assert!(!has(marker));
    assert!(!has(b"PLAINTEXT-MARKER"));
}

/// On SQLite an append takes the file's write lock at once or waits for it
/// off the caller's thread: here, on a runtime of one thread, another
/// connection holds the lock, the append waits, this task goes on running
/// beside it, and the append lands once the lock is let go.
#[tokio::test(flavor = "current_thread")]
async fn an_sqlite_append_behind_another_writer_waits_off_the_callers_thread() {
    let (store, keep) = store("sqlite").await.expect("SQLite is always there");
    let journal = journal_on(&store);
    let lease = started(&journal).await;
    let other = sqlx::SqlitePool::connect(&keep.url)
        .await
        .expect("raw SQLite");
    let mut holder = other.acquire().await.expect("a connection");
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut *holder)
        .await
        .expect("the write lock");
    let appending = tokio::spawn({
        let journal = journal.clone();
        let lease = lease.clone();
        async move { journal.append_after(&lease, 1, &[("intent", b"i")]).await }
    });
    // Had the append blocked the runtime's only thread, this sleep would
    // end only after it, and the lock would still be held.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!appending.is_finished(), "the append waits for the lock");
    sqlx::query("COMMIT")
        .execute(&mut *holder)
        .await
        .expect("lets go");
    let last = appending.await.expect("no panic").expect("appended");
    assert_eq!(last, 2);
    assert_eq!(kinds(&journal, &lease).await, ["start", "intent"]);
}

/// The journal's appends never checkpoint SQLite's write-ahead log on
/// commit (it would `fsync` on the caller's thread); the store has it
/// checkpointed beside them, so the log is reused instead of growing with
/// every entry ever written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_log_is_reused_as_appends_go_on() {
    const APPENDS: u64 = 1100;
    let (store, keep) = store("sqlite").await.expect("SQLite is always there");
    let journal = journal_on(&store);
    let lease = running(&journal, LONG).await;
    for after in 0..APPENDS {
        journal
            .append_after(&lease, after, &[("result", &[7; 200])])
            .await
            .expect("appended");
    }
    // The last checkpoint asked for ends; the next append then writes the
    // log from its start again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    journal
        .append_after(&lease, APPENDS, &[("result", b"r")])
        .await
        .expect("appended");
    let raw = sqlx::SqlitePool::connect(&keep.url)
        .await
        .expect("raw SQLite");
    // (busy, frames in the log, frames checkpointed): each append wrote at
    // least one frame (a page) to the log.
    let (_, frames, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(&raw)
        .await
        .expect("the log's state");
    assert!(
        frames < i64::try_from(APPENDS).expect("small"),
        "the log holds {frames} frames after {APPENDS} appends: it was never checkpointed"
    );
}

#[test]
fn a_malformed_kickoff_id_is_a_clear_error() {
    for text in [
        "",
        "123",
        "g0000000000000000000000000000000",
        &"0".repeat(33),
    ] {
        let error = text.parse::<KickoffId>().expect_err("refused");
        assert!(
            matches!(error, JournalError::MalformedKickoffId { .. }),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains("is not a kickoff id") && message.contains("32 hexadecimal digits"),
            "{message}"
        );
    }
    let from_json = serde_json::from_str::<KickoffId>("\"nope\"").expect_err("refused");
    assert!(
        from_json.to_string().contains("is not a kickoff id"),
        "{from_json}"
    );
    let id = KickoffId::generate().expect("an id");
    let back: KickoffId =
        serde_json::from_str(&serde_json::to_string(&id).expect("json")).expect("parsed");
    assert_eq!(back, id);
}

#[test]
fn a_journal_key_never_shows_and_a_malformed_one_is_refused() {
    let key = JournalKey::from_bytes([0x41; 32]);
    let shown = format!("{key:?}");
    assert!(
        !shown.contains(&key.to_base64()) && !shown.contains("AAAA") && !shown.contains("65"),
        "{shown}"
    );
    for text in ["", "not base64!", "QUJD"] {
        assert!(
            matches!(
                JournalKey::from_base64(text),
                Err(JournalError::MalformedKey(_))
            ),
            "{text}"
        );
    }
    let again = JournalKey::from_base64(&key.to_base64()).expect("read back");
    assert_eq!(again.to_base64(), key.to_base64());
}

async fn entries_appended_after_a_count_land_together_in_order(store: Store, _keep: Keep) {
    let journal = journal_on(&store);
    let lease = started(&journal).await;
    let last = journal
        .append_after(&lease, 1, &[("answer", b"a"), ("intent", b"i")])
        .await
        .expect("appended");
    assert_eq!(last, 3);
    assert_eq!(
        journal
            .append_after(&lease, 3, &[("result", b"r")])
            .await
            .expect("appended"),
        4
    );
    let entries = journal.entries(&lease.kickoff).await.expect("read back");
    let read: Vec<(u64, &str, &[u8])> = entries
        .iter()
        .map(|entry| (entry.seq, entry.kind.as_str(), entry.payload.as_slice()))
        .collect();
    assert_eq!(
        read,
        [
            (1, "start", &b"s"[..]),
            (2, "answer", &b"a"[..]),
            (3, "intent", &b"i"[..]),
            (4, "result", &b"r"[..]),
        ]
    );
    assert_eq!(store.kickoff(&lease.kickoff).await.expect("reads").step, 4);
}

async fn entries_appended_after_a_wrong_count_are_refused_and_nothing_is_written(
    store: Store,
    _keep: Keep,
) {
    let journal = journal_on(&store);
    let lease = running(&journal, LONG).await;
    journal
        .append(&lease, "start", b"s")
        .await
        .expect("appended");
    for wrong in [0, 2, 7] {
        match journal
            .append_after(&lease, wrong, &[("answer", b"a")])
            .await
        {
            Err(JournalError::Corrupt { why, .. }) => {
                assert!(why.contains("holds 1 entries"), "{why}");
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }
    assert_eq!(
        journal
            .entries(&lease.kickoff)
            .await
            .expect("read back")
            .len(),
        1
    );
    // The store goes on taking writes (no transaction was left open).
    assert_eq!(
        journal
            .append_after(&lease, 1, &[("answer", b"a")])
            .await
            .expect("appended"),
        2
    );
}

async fn entries_appended_after_a_count_with_a_lost_lease_are_refused_and_nothing_is_written(
    store: Store,
    _keep: Keep,
) {
    let journal = journal_on(&store);
    let lease = running(&journal, Duration::ZERO).await;
    let refused = journal
        .append_after(&lease, 0, &[("start", b"s"), ("inputs", b"i")])
        .await;
    lease_lost(refused);
    let claimed = journal
        .claim("worker-b", LONG, 1)
        .await
        .expect("claims")
        .remove(0);
    let stale = Lease {
        epoch: claimed.epoch - 1,
        ..claimed.clone()
    };
    lease_lost(journal.append_after(&stale, 0, &[("start", b"s")]).await);
    assert!(
        journal
            .entries(&claimed.kickoff)
            .await
            .expect("read back")
            .is_empty()
    );
    assert_eq!(
        journal
            .append_after(&claimed, 0, &[("start", b"s")])
            .await
            .expect("appended"),
        1
    );
}

async fn entries_appended_together_land_in_order(store: Store, _keep: Keep) {
    let journal = journal_on(&store);
    let lease = running(&journal, LONG).await;
    let last = journal
        .append_all(&lease, &[("start", b"s"), ("inputs", b"i"), ("step", b"p")])
        .await
        .expect("appended");
    assert_eq!(last, 3);
    assert_eq!(kinds(&journal, &lease).await, ["start", "inputs", "step"]);
}

/// What a call in doubt is judged against (SPEC §13: the database's clock,
/// never a process's): the store's now, at or after an entry's time.
async fn the_database_clock_is_the_one_entries_are_stamped_with(store: Store, _keep: Keep) {
    let journal = journal_on(&store);
    let lease = running(&journal, LONG).await;
    journal
        .append(&lease, "intent", b"i")
        .await
        .expect("appended");
    let written = journal.entries(&lease.kickoff).await.expect("read back")[0].written_at;
    let now = journal.database_now().await.expect("the store's clock");
    let since = now
        .duration_since(written)
        .expect("now is not before the entry");
    assert!(since < Duration::from_secs(60), "{since:?}");
}
