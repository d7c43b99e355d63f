//! Budgets' counters (SPEC §15, "Reserve, then settle" and "Exact"): the
//! in-process ledger, the store's on a real SQLite file and a real
//! PostgreSQL, and Redis's on a real Redis; exact under 8 processes ×
//! 1,000 concurrent calls against one budget.

#[path = "support/stores.rs"]
mod stores;
mod support;

use std::slice::from_ref;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use crew_runtime::budget::{Charge, InProcessLedger, Ledger, LedgerError, Reserved, Window};
use crew_runtime::store::Store;
use stores::{Keep, on_both_stores};

/// The scenarios, each run on the in-process ledger and on the store's.
mod scenarios {
    use super::*;

    pub(crate) async fn a_budget_admits_calls_up_to_its_limit_and_refuses_the_next(
        ledger: &dyn Ledger,
    ) {
        let charge = Charge::new("tool-calls", "user:carol", 3, 1);
        for call in ["c1", "c2", "c3"] {
            assert_eq!(
                ledger.reserve(call, from_ref(&charge)).await.expect(call),
                Reserved::New
            );
        }
        let refused = ledger.reserve("c4", from_ref(&charge)).await;
        match refused {
            Err(LedgerError::Exceeded(over)) => {
                assert_eq!(
                    (over.budget.as_str(), over.key.as_str()),
                    ("tool-calls", "user:carol")
                );
                assert_eq!((over.limit, over.used, over.asked), (3, 3, 1));
            }
            other => panic!("refused as exceeded, not {other:?}"),
        }
        assert_eq!(ledger.used(&charge).await.expect("reads"), 3);
        // Another key of the same budget counts apart.
        let dave = Charge::new("tool-calls", "user:dave", 3, 1);
        ledger
            .reserve("d1", from_ref(&dave))
            .await
            .expect("dave's own");
        assert_eq!(ledger.used(&dave).await.expect("reads"), 1);
    }

    pub(crate) async fn one_call_under_three_budgets_one_full_reserves_in_none(
        ledger: &dyn Ledger,
    ) {
        let per_kickoff = Charge::new("tokens", "kickoff:k1", 10_000, 4_000);
        let per_user =
            Charge::new("daily-tokens", "user:carol", 50_000, 4_000).window(Window::DayUtc);
        let per_tenant = Charge::new("tenant-tokens", "tenant:acme", 5_000, 4_000);
        ledger
            .reserve("first", from_ref(&per_tenant))
            .await
            .expect("the tenant's budget takes the first");
        let refused = ledger
            .reserve(
                "second",
                &[per_kickoff.clone(), per_user.clone(), per_tenant.clone()],
            )
            .await;
        assert!(
            matches!(&refused, Err(LedgerError::Exceeded(over)) if over.budget == "tenant-tokens"),
            "{refused:?}"
        );
        assert_eq!(ledger.used(&per_kickoff).await.expect("reads"), 0);
        assert_eq!(ledger.used(&per_user).await.expect("reads"), 0);
        assert_eq!(ledger.used(&per_tenant).await.expect("reads"), 4_000);
        // And the call is not taken for one that reserved.
        let again = ledger
            .reserve("second", &[per_kickoff.clone(), per_user.clone()])
            .await
            .expect("fits now");
        assert_eq!(again, Reserved::New);
        assert_eq!(ledger.used(&per_kickoff).await.expect("reads"), 4_000);
    }

    pub(crate) async fn a_call_reserving_again_is_counted_once_in_its_budget(ledger: &dyn Ledger) {
        let charge = Charge::new("model-calls", "crew:support", 10, 1);
        assert_eq!(
            ledger
                .reserve("turn-1", from_ref(&charge))
                .await
                .expect("admitted"),
            Reserved::New
        );
        assert_eq!(
            ledger
                .reserve("turn-1", from_ref(&charge))
                .await
                .expect("admitted again"),
            Reserved::Before
        );
        assert_eq!(ledger.used(&charge).await.expect("reads"), 1);
    }

    pub(crate) async fn settling_replaces_a_budgets_reservation_and_an_unsettled_one_stays_in_full(
        ledger: &dyn Ledger,
    ) {
        let tokens = Charge::new("tokens", "kickoff:k2", 10_000, 6_000);
        let calls = Charge::new("model-calls", "kickoff:k2", 10, 1);
        ledger
            .reserve("turn-1", &[tokens.clone(), calls.clone()])
            .await
            .expect("admitted");
        // 6 000 reserved: a second turn of 6 000 does not fit.
        assert!(ledger.reserve("turn-2", from_ref(&tokens)).await.is_err());
        // The first took 1 200 tokens; the call count is not named, so it
        // stays as reserved.
        ledger
            .settle("turn-1", &[("tokens", 1_200)])
            .await
            .expect("settled");
        assert_eq!(ledger.used(&tokens).await.expect("reads"), 1_200);
        assert_eq!(ledger.used(&calls).await.expect("reads"), 1);
        // Settled twice: counted once.
        ledger
            .settle("turn-1", &[("tokens", 9_000)])
            .await
            .expect("nothing to settle");
        assert_eq!(ledger.used(&tokens).await.expect("reads"), 1_200);
        // A turn whose process died never settles: charged in full.
        ledger
            .reserve("turn-2", from_ref(&tokens))
            .await
            .expect("fits now");
        assert_eq!(ledger.used(&tokens).await.expect("reads"), 7_200);
        assert!(ledger.reserve("turn-3", from_ref(&tokens)).await.is_err());
    }

    pub(crate) async fn bad_budget_charges_are_refused_with_what_is_wrong(ledger: &dyn Ledger) {
        let charge = Charge::new("tool-calls", "user:carol", 3, 1);
        let empty = ledger.reserve("", from_ref(&charge)).await;
        assert!(
            matches!(&empty, Err(LedgerError::Invalid(why)) if why.contains("empty")),
            "{empty:?}"
        );
        let twice = ledger
            .reserve("c1", &[charge.clone(), charge.clone()])
            .await;
        assert!(
            matches!(&twice, Err(LedgerError::Invalid(why)) if why.contains("twice")),
            "{twice:?}"
        );
        // Larger than the limit on its own: refused, nothing counted.
        let huge = Charge::new("tool-calls", "user:carol", 3, 4);
        assert!(matches!(
            ledger.reserve("c2", &[huge]).await,
            Err(LedgerError::Exceeded(_))
        ));
        assert_eq!(ledger.used(&charge).await.expect("reads"), 0);
    }

    pub(crate) async fn a_forgotten_budget_counter_counts_from_nothing(ledger: &dyn Ledger) {
        let kickoff = Charge::new("turns", "kickoff:k1", 2, 1);
        let other = Charge::new("turns", "kickoff:k2", 2, 1);
        for call in ["t1", "t2"] {
            ledger.count(call, from_ref(&kickoff)).await.expect(call);
        }
        ledger.count("u1", from_ref(&other)).await.expect("u1");
        ledger.forget(from_ref(&kickoff)).await.expect("forgets");
        assert_eq!(ledger.used(&kickoff).await.expect("reads"), 0);
        assert_eq!(
            ledger.used(&other).await.expect("reads"),
            1,
            "only the counter named"
        );
        ledger.forget(&[]).await.expect("nothing to forget");
    }
}

/// Each scenario on the in-process ledger.
mod in_process {
    use super::*;

    macro_rules! in_process {
        ($($scenario:ident),* $(,)?) => {
            $(
                #[tokio::test]
                async fn $scenario() {
                    let ledger = InProcessLedger::new();
                    scenarios::$scenario(&ledger).await;
                }
            )*
        };
    }

    in_process!(
        a_budget_admits_calls_up_to_its_limit_and_refuses_the_next,
        one_call_under_three_budgets_one_full_reserves_in_none,
        a_call_reserving_again_is_counted_once_in_its_budget,
        settling_replaces_a_budgets_reservation_and_an_unsettled_one_stays_in_full,
        bad_budget_charges_are_refused_with_what_is_wrong,
        a_forgotten_budget_counter_counts_from_nothing,
    );

    #[tokio::test]
    async fn a_daily_budget_starts_afresh_each_utc_day_and_a_rolling_one_as_its_window_passes() {
        let now = Arc::new(AtomicI64::new(1_700_000_000_000));
        let clock = Arc::clone(&now);
        let ledger = InProcessLedger::with_clock(Arc::new(move || clock.load(Ordering::Relaxed)));
        windows(&ledger, |by| {
            now.fetch_add(
                i64::try_from(by.as_millis()).unwrap_or(0),
                Ordering::Relaxed,
            );
        })
        .await;
    }
}

/// Each scenario on a Redis of its own.
mod on_redis {
    use super::*;
    use crew_runtime::budget::RedisLedger;

    /// A Redis, initialized, and a ledger on it; `None` where Redis is
    /// not installed (said loudly, or failed under
    /// `CREW_REQUIRE_SERVICES=1`).
    pub(crate) async fn ledger() -> Option<(support::RedisServer, RedisLedger)> {
        let server = support::RedisServer::start()?;
        RedisLedger::initialize(&server.url())
            .await
            .expect("initialized");
        let ledger = RedisLedger::connect(&server.url()).await.expect("connects");
        Some((server, ledger))
    }

    macro_rules! on_redis {
        ($($scenario:ident),* $(,)?) => {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let Some((_server, ledger)) = ledger().await else {
                        return;
                    };
                    scenarios::$scenario(&ledger).await;
                }
            )*
        };
    }

    on_redis!(
        a_budget_admits_calls_up_to_its_limit_and_refuses_the_next,
        one_call_under_three_budgets_one_full_reserves_in_none,
        a_call_reserving_again_is_counted_once_in_its_budget,
        settling_replaces_a_budgets_reservation_and_an_unsettled_one_stays_in_full,
        bad_budget_charges_are_refused_with_what_is_wrong,
        a_forgotten_budget_counter_counts_from_nothing,
    );

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_budget_on_a_redis_that_lost_its_counters_is_refused_until_it_is_initialized() {
        let Some((server, ledger)) = ledger().await else {
            return;
        };
        let charge = Charge::new("tool-calls", "tenant:acme", 2, 1);
        ledger
            .reserve("a", from_ref(&charge))
            .await
            .expect("counted");
        // Restarted without persistence: every counter is gone, and so is
        // the marker.
        server.restart();
        // Refused while the ledger reconnects, then for the marker.
        let started = std::time::Instant::now();
        loop {
            match ledger.reserve("b", from_ref(&charge)).await {
                Err(LedgerError::Unavailable(why)) if why.contains("marker") => break,
                Err(LedgerError::Unavailable(_)) if started.elapsed() < Duration::from_secs(20) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => panic!("refused for the marker, not {other:?}"),
            }
        }
        // A ledger connecting now finds the loss recorded: it connects,
        // and refuses the same.
        let again = RedisLedger::connect(&server.url())
            .await
            .expect("connects to a Redis whose loss was found");
        let refused = again.reserve("b", from_ref(&charge)).await;
        assert!(
            matches!(&refused, Err(LedgerError::Unavailable(why)) if why.contains("lost its data")),
            "{refused:?}"
        );
        // An operator initializes it, knowing what was lost.
        initialized_again(&server, &ledger, &charge, "b").await;
    }

    /// An operator initializes `server` again: `old`, connected before,
    /// refuses `call` of `charge` (an old epoch); a ledger connected now
    /// counts it.
    async fn initialized_again(
        server: &support::RedisServer,
        old: &RedisLedger,
        charge: &Charge,
        call: &str,
    ) {
        RedisLedger::initialize(&server.url())
            .await
            .expect("initialized");
        assert!(
            old.reserve(call, from_ref(charge)).await.is_err(),
            "an old epoch"
        );
        let fresh = RedisLedger::connect(&server.url()).await.expect("connects");
        fresh
            .reserve(call, from_ref(charge))
            .await
            .expect("counted on the counters it holds");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_budget_ledger_refuses_a_redis_never_initialized() {
        let Some(server) = support::RedisServer::start() else {
            return;
        };
        let refused = RedisLedger::connect(&server.url()).await;
        assert!(
            matches!(&refused, Err(LedgerError::Unavailable(why)) if why.contains("no budgets' marker")),
            "{refused:?}"
        );
    }

    /// The UTC day (from the epoch) on this machine's clock.
    fn today() -> u128 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() / 86_400_000)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_budget_on_a_redis_that_lost_its_counters_counts_again_once_its_window_has_passed() {
        let Some((server, ledger)) = ledger().await else {
            return;
        };
        // One machine: no clock skew between the ledger and Redis.
        let ledger = ledger.with_clock_skew(Duration::ZERO);
        let second = Charge::new("per-second", "user:carol", 50, 1)
            .window(Window::Rolling(Duration::from_secs(1)));
        let daily = Charge::new("daily", "user:carol", 50, 1).window(Window::DayUtc);
        let life = Charge::new("lifetime", "user:carol", 50, 1);
        for charge in [&second, &daily, &life] {
            ledger
                .reserve(&format!("before-{}", charge.budget()), from_ref(charge))
                .await
                .expect("counted");
        }
        let day = today();
        server.restart();
        // Refused while the ledger reconnects, then for the loss, found
        // at the first call that reached Redis.
        let lost = |result: &Result<Reserved, LedgerError>| matches!(result, Err(LedgerError::Unavailable(why)) if why.contains("lost its data"));
        let found = loop {
            let asked = std::time::Instant::now();
            let result = ledger.reserve("second-1", from_ref(&second)).await;
            if lost(&result) {
                break asked;
            }
            assert!(
                matches!(result, Err(LedgerError::Unavailable(_)))
                    && asked.elapsed() < Duration::from_secs(20),
                "refused for the loss, not {result:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // A rolling second: counted again once a second and one slice
        // passed since the loss was found.
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = ledger
                .reserve(&format!("second-{attempt}"), from_ref(&second))
                .await;
            if result.is_ok() {
                break;
            }
            assert!(
                lost(&result) && found.elapsed() < Duration::from_secs(20),
                "refused for the loss until its window passed, then admitted, not {result:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            found.elapsed() >= Duration::from_secs(1),
            "admitted {:?} after the loss was found",
            found.elapsed()
        );
        assert!(attempt > 1, "refused at first");
        assert_eq!(
            ledger.used(&second).await.expect("reads"),
            1,
            "counted afresh"
        );
        // Settled, though the marker is still gone.
        ledger
            .reserve("held", from_ref(&second))
            .await
            .expect("counted");
        ledger
            .settle("held", &[("per-second", 0)])
            .await
            .expect("settled");
        assert_eq!(ledger.used(&second).await.expect("reads"), 1);
        // The day of the loss and a lifetime: still refused.
        if today() == day {
            assert!(lost(&ledger.reserve("daily-1", from_ref(&daily)).await));
        }
        assert!(lost(&ledger.reserve("life-1", from_ref(&life)).await));
        // A loss found yesterday: the day's budget counts again, a
        // lifetime's never does.
        let client = redis::Client::open(server.url()).expect("a client");
        let mut raw = client
            .get_multiplexed_async_connection()
            .await
            .expect("connects");
        let yesterday = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after the epoch")
            .as_millis()
            - 86_400_000;
        redis::cmd("SET")
            .arg("crew:budget:lost")
            .arg(yesterday.to_string())
            .query_async::<()>(&mut raw)
            .await
            .expect("set");
        ledger
            .reserve("daily-2", from_ref(&daily))
            .await
            .expect("counted afresh the day after the loss");
        assert_eq!(ledger.used(&daily).await.expect("reads"), 1);
        assert!(lost(&ledger.reserve("life-2", from_ref(&life)).await));
        // An operator initializes it: the loss is forgotten, and ledgers
        // connected before connect again.
        initialized_again(&server, &ledger, &life, "life-3").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_budget_whose_redis_stops_refuses_calls_then_admits_them_once_it_is_back() {
        let Some(server) = support::RedisServer::start_persistent() else {
            return;
        };
        RedisLedger::initialize(&server.url())
            .await
            .expect("initialized");
        let ledger = RedisLedger::connect(&server.url()).await.expect("connects");
        let charge = Charge::new("tool-calls", "tenant:acme", 3, 1);
        ledger
            .reserve("a", from_ref(&charge))
            .await
            .expect("counted");
        server.stop();
        let refused = ledger.reserve("b", from_ref(&charge)).await;
        assert!(
            matches!(refused, Err(LedgerError::Unavailable(_))),
            "{refused:?}"
        );
        server.run();
        // The same ledger reconnects; what it counted before is still there.
        let started = std::time::Instant::now();
        loop {
            match ledger.reserve("b", from_ref(&charge)).await {
                Ok(_) => break,
                Err(LedgerError::Unavailable(_)) if started.elapsed() < Duration::from_secs(20) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => panic!("admitted once Redis is back, not {other:?}"),
            }
        }
        assert_eq!(ledger.used(&charge).await.expect("reads"), 2);
    }
}

/// A daily budget and an hourly rolling one, as `advance` moves the
/// ledger's clock.
async fn windows(ledger: &dyn Ledger, advance: impl Fn(Duration)) {
    let daily = Charge::new("daily", "user:carol", 2, 1).window(Window::DayUtc);
    let hourly = Charge::new("hourly", "user:carol", 2, 1)
        .window(Window::Rolling(Duration::from_secs(3_600)));
    for call in ["a", "b"] {
        ledger
            .reserve(call, &[daily.clone(), hourly.clone()])
            .await
            .expect(call);
    }
    assert!(ledger.reserve("c", from_ref(&hourly)).await.is_err());
    // An hour and two minutes later: the rolling window has passed the
    // first two calls; the day (in all but a few cases) has not.
    advance(Duration::from_secs(3_720));
    ledger
        .reserve("c", from_ref(&hourly))
        .await
        .expect("the window moved");
    assert_eq!(ledger.used(&hourly).await.expect("reads"), 1);
    // A day later the daily budget is empty again.
    advance(Duration::from_secs(86_400));
    assert_eq!(ledger.used(&daily).await.expect("reads"), 0);
    ledger
        .reserve("d", from_ref(&daily))
        .await
        .expect("a new day");
}

// The same scenarios on the store, SQLite and PostgreSQL.
async fn a_budget_admits_calls_up_to_its_limit_and_refuses_the_next(store: Store, _keep: Keep) {
    scenarios::a_budget_admits_calls_up_to_its_limit_and_refuses_the_next(&store).await;
}

async fn one_call_under_three_budgets_one_full_reserves_in_none(store: Store, _keep: Keep) {
    scenarios::one_call_under_three_budgets_one_full_reserves_in_none(&store).await;
}

async fn a_call_reserving_again_is_counted_once_in_its_budget(store: Store, _keep: Keep) {
    scenarios::a_call_reserving_again_is_counted_once_in_its_budget(&store).await;
}

async fn settling_replaces_a_budgets_reservation_and_an_unsettled_one_stays_in_full(
    store: Store,
    _keep: Keep,
) {
    scenarios::settling_replaces_a_budgets_reservation_and_an_unsettled_one_stays_in_full(&store)
        .await;
}

async fn bad_budget_charges_are_refused_with_what_is_wrong(store: Store, _keep: Keep) {
    scenarios::bad_budget_charges_are_refused_with_what_is_wrong(&store).await;
}

async fn a_forgotten_budget_counter_counts_from_nothing(store: Store, _keep: Keep) {
    scenarios::a_forgotten_budget_counter_counts_from_nothing(&store).await;
}

async fn a_daily_budget_starts_afresh_each_utc_day_and_a_rolling_one_as_its_window_passes(
    store: Store,
    _keep: Keep,
) {
    windows(&store, |by| store.advance_clock(by)).await;
}

async fn a_second_replica_sees_the_first_ones_budget_reservations(store: Store, keep: Keep) {
    let other = Store::connect(&keep.url).await.expect("opens again");
    let charge = Charge::new("model-calls", "tenant:acme", 2, 1);
    store.reserve("r1", from_ref(&charge)).await.expect("first");
    other
        .reserve("r2", from_ref(&charge))
        .await
        .expect("second");
    assert!(store.reserve("r3", from_ref(&charge)).await.is_err());
    assert!(other.reserve("r3", from_ref(&charge)).await.is_err());
    // The call the first replica reserved, re-checked on the second.
    assert_eq!(
        other
            .reserve("r1", from_ref(&charge))
            .await
            .expect("admitted"),
        Reserved::Before
    );
}

/// How many rows the counters of budget `budget` have in the store at
/// `url`.
async fn counter_rows(url: &str, budget: &str) -> i64 {
    rows(url, "crew_budget_counters", budget).await
}

/// How many rows of `table` are of budget `budget`'s counters.
async fn rows(url: &str, table: &str, budget: &str) -> i64 {
    let sql = format!("SELECT COUNT(*) FROM {table} WHERE counter LIKE $1");
    let sql = sql.as_str();
    let like = format!("{budget}|%");
    if url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(url).await.expect("opens");
        sqlx::query_scalar(sql)
            .bind(like)
            .fetch_one(&pool)
            .await
            .expect("counts")
    } else {
        let pool = sqlx::PgPool::connect(url).await.expect("opens");
        sqlx::query_scalar(sql)
            .bind(like)
            .fetch_one(&pool)
            .await
            .expect("counts")
    }
}

async fn a_budget_store_keeps_only_what_can_still_count(store: Store, keep: Keep) {
    let daily = Charge::new("daily", "user:carol", 10, 1).window(Window::DayUtc);
    let life = Charge::new("life", "crew:support", 10, 1);
    let kickoff = Charge::new("turns", "kickoff:k1", 10, 1);
    store
        .reserve("a", &[daily.clone(), life.clone(), kickoff.clone()])
        .await
        .expect("counted");
    assert_eq!(counter_rows(&keep.url, "daily").await, 1);
    // The next day's first call drops yesterday's row.
    store.advance_clock(Duration::from_secs(86_400));
    store
        .reserve("b", &[daily.clone(), life.clone()])
        .await
        .expect("counted");
    assert_eq!(counter_rows(&keep.url, "daily").await, 1, "today's only");
    assert_eq!(store.used(&daily).await.expect("reads"), 1);
    // A kickoff's counters, forgotten once it ended.
    store.forget(from_ref(&kickoff)).await.expect("forgets");
    assert_eq!(counter_rows(&keep.url, "turns").await, 0);
    assert_eq!(store.used(&kickoff).await.expect("reads"), 0);
    // A week on, the calls' reservations are purged; their amounts stay.
    assert_eq!(rows(&keep.url, "crew_budget_reservations", "life").await, 2);
    store.advance_clock(Duration::from_secs(8 * 86_400));
    // (A purge the ledger started in the background may have taken some.)
    let purged = store.purge_budget_reservations().await.expect("purges");
    assert!(purged <= 5, "a's three reservations and b's two");
    for budget in ["daily", "life", "turns"] {
        assert_eq!(rows(&keep.url, "crew_budget_reservations", budget).await, 0);
    }
    assert_eq!(store.used(&life).await.expect("reads"), 2);
    // Purged, call `a` is a call the ledger no longer knows.
    assert_eq!(
        store.reserve("a", from_ref(&life)).await.expect("counted"),
        Reserved::New
    );
    assert_eq!(store.used(&life).await.expect("reads"), 3);
}

on_both_stores!(
    a_budget_store_keeps_only_what_can_still_count,
    a_forgotten_budget_counter_counts_from_nothing,
    a_budget_admits_calls_up_to_its_limit_and_refuses_the_next,
    one_call_under_three_budgets_one_full_reserves_in_none,
    a_call_reserving_again_is_counted_once_in_its_budget,
    settling_replaces_a_budgets_reservation_and_an_unsettled_one_stays_in_full,
    bad_budget_charges_are_refused_with_what_is_wrong,
    a_daily_budget_starts_afresh_each_utc_day_and_a_rolling_one_as_its_window_passes,
    a_second_replica_sees_the_first_ones_budget_reservations,
);

/// The environment a worker process of the concurrency test reads.
const WORKER_URL: &str = "CREW_BUDGET_WORKER_URL";
const WORKER_ID: &str = "CREW_BUDGET_WORKER_ID";
const WORKER_CALLS: &str = "CREW_BUDGET_WORKER_CALLS";
const WORKER_LIMIT: &str = "CREW_BUDGET_WORKER_LIMIT";
const WORKER_KIND: &str = "CREW_BUDGET_WORKER_KIND";
const WORKER_HOLDS: &str = "CREW_BUDGET_WORKER_HOLDS";

/// One worker process of the concurrency test: its calls all at once
/// against the one budget, then a line with what became of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process of budget_exact_under_concurrency, which runs it"]
async fn budget_worker() {
    let read = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is set"));
    let url = read(WORKER_URL);
    let id = read(WORKER_ID);
    let calls: usize = read(WORKER_CALLS).parse().expect("a count");
    let limit: u64 = read(WORKER_LIMIT).parse().expect("a limit");
    let ledger: Arc<dyn Ledger> = if read(WORKER_KIND) == "redis" {
        Arc::new(
            crew_runtime::budget::RedisLedger::connect(&url)
                .await
                .expect("Redis answers"),
        )
    } else {
        Arc::new(Store::connect(&url).await.expect("the store opens"))
    };
    if std::env::var(WORKER_HOLDS).is_ok() {
        // Reserves a model turn's tokens, says so, and waits to be killed
        // before it settles.
        let tokens = Charge::new("tokens", "tenant:acme", limit, 4_000);
        ledger
            .reserve(&format!("{id}-turn"), &[tokens])
            .await
            .expect("reserved");
        println!("BUDGET_WORKER held");
        tokio::time::sleep(Duration::from_secs(120)).await;
        return;
    }
    let charge = Charge::new("tool-calls", "tenant:acme", limit, 1);
    let tasks: Vec<_> = (0..calls)
        .map(|n| {
            let (ledger, charge, call) = (Arc::clone(&ledger), charge.clone(), format!("{id}-{n}"));
            tokio::spawn(async move { ledger.reserve(&call, &[charge]).await })
        })
        .collect();
    let (mut admitted, mut exceeded, mut unavailable) = (0, 0, Vec::new());
    for task in tasks {
        match task.await.expect("no panic") {
            Ok(_) => admitted += 1,
            Err(LedgerError::Exceeded(_)) => exceeded += 1,
            Err(other) => unavailable.push(other.to_string()),
        }
    }
    println!(
        "BUDGET_WORKER admitted={admitted} exceeded={exceeded} unavailable={} {:?}",
        unavailable.len(),
        unavailable.first()
    );
}

/// `processes` worker processes of `calls` concurrent calls each, against
/// one budget of `limit` on the store at `url`: the calls admitted, and
/// what the counter holds after.
fn run_workers(kind: &str, url: &str, processes: usize, calls: usize, limit: u64) -> u64 {
    let exe = std::env::current_exe().expect("the test binary");
    let children: Vec<_> = (0..processes)
        .map(|id| {
            std::process::Command::new(&exe)
                .args(["--ignored", "--exact", "budget_worker", "--nocapture"])
                .env(WORKER_URL, url)
                .env(WORKER_ID, format!("p{id}"))
                .env(WORKER_CALLS, calls.to_string())
                .env(WORKER_LIMIT, limit.to_string())
                .env(WORKER_KIND, kind)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("a worker starts")
        })
        .collect();
    let mut admitted = 0;
    for child in children {
        let output = child.wait_with_output().expect("the worker ends");
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "a worker failed: {said}");
        let line = said
            .lines()
            .find(|line| line.starts_with("BUDGET_WORKER"))
            .unwrap_or_else(|| panic!("the worker's report: {said}"));
        let field = |name: &str| -> u64 {
            line.split_whitespace()
                .find_map(|part| part.strip_prefix(&format!("{name}=")))
                .and_then(|value| value.parse().ok())
                .unwrap_or_else(|| panic!("{name} in {line}"))
        };
        assert_eq!(field("unavailable"), 0, "{line}");
        assert_eq!(
            field("admitted") + field("exceeded"),
            u64::try_from(calls).expect("a count"),
            "{line}"
        );
        admitted += field("admitted");
    }
    admitted
}

/// SPEC §15, "Exact": 8 processes × 1,000 concurrent calls against one
/// budget on a real PostgreSQL and a real Redis: the calls admitted never
/// exceed the limit (each reserves 1, so not by one call either), and the
/// counter holds exactly what was admitted. On SQLite, 4 processes × 250.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_exact_under_concurrency() {
    for (kind, processes, calls, limit) in [
        ("postgres", 8, 1_000, 3_000),
        ("redis", 8, 1_000, 3_000),
        ("sqlite", 4, 250, 600),
    ] {
        // What keeps the counters' home alive, its URL, and a ledger on it.
        let (keep, url, ledger): (Box<dyn std::any::Any>, String, Arc<dyn Ledger>) = match kind {
            "redis" => {
                let Some((server, ledger)) = on_redis::ledger().await else {
                    continue;
                };
                let url = server.url();
                (Box::new(server), url, Arc::new(ledger))
            }
            _ => {
                let Some((store, keep)) = stores::store(kind).await else {
                    continue;
                };
                let url = keep.url.clone();
                (Box::new(keep), url, Arc::new(store))
            }
        };
        let worker_url = url.clone();
        let admitted = tokio::task::spawn_blocking(move || {
            run_workers(kind, &worker_url, processes, calls, limit)
        })
        .await
        .expect("the workers ran");
        let used = ledger
            .used(&Charge::new("tool-calls", "tenant:acme", limit, 1))
            .await
            .expect("reads");
        println!(
            "{kind}: {admitted} admitted of {} asked, limit {limit}, overshoot {}",
            processes * calls,
            i128::from(admitted) - i128::from(limit)
        );
        assert_eq!(
            admitted, limit,
            "{kind}: every call fitting admitted, none more"
        );
        assert_eq!(
            used, admitted,
            "{kind}: the counter holds what was admitted"
        );
        drop(keep);
    }
}

/// SPEC §15: a process killed while it holds a reservation (its model
/// call under way, never settled) leaves it charged in full: the call may
/// have been billed. On PostgreSQL and on Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_keeps_a_killed_process_reservation_charged_in_full() {
    use std::io::BufRead as _;
    for kind in ["postgres", "redis"] {
        let (keep, url, ledger): (Box<dyn std::any::Any>, String, Arc<dyn Ledger>) = match kind {
            "redis" => {
                let Some((server, ledger)) = on_redis::ledger().await else {
                    continue;
                };
                let url = server.url();
                (Box::new(server), url, Arc::new(ledger))
            }
            _ => {
                let Some((store, keep)) = stores::store(kind).await else {
                    continue;
                };
                let url = keep.url.clone();
                (Box::new(keep), url, Arc::new(store))
            }
        };
        let exe = std::env::current_exe().expect("the test binary");
        let mut child = std::process::Command::new(exe)
            .args(["--ignored", "--exact", "budget_worker", "--nocapture"])
            .env(WORKER_URL, &url)
            .env(WORKER_ID, "killed")
            .env(WORKER_CALLS, "0")
            .env(WORKER_LIMIT, "10000")
            .env(WORKER_KIND, kind)
            .env(WORKER_HOLDS, "1")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("a worker starts");
        let stdout = child.stdout.take().expect("its output");
        let held = tokio::task::spawn_blocking(move || {
            std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .any(|line| line.contains("BUDGET_WORKER held"))
        })
        .await
        .expect("read");
        assert!(held, "{kind}: the worker reserved");
        child.kill().expect("killed");
        let _ = child.wait();
        let tokens = Charge::new("tokens", "tenant:acme", 10_000, 4_000);
        assert_eq!(ledger.used(&tokens).await.expect("reads"), 4_000, "{kind}");
        // The budget has 6 000 left: one more such turn, not two.
        ledger
            .reserve("after-1", from_ref(&tokens))
            .await
            .expect("fits");
        assert!(
            matches!(
                ledger.reserve("after-2", from_ref(&tokens)).await,
                Err(LedgerError::Exceeded(_))
            ),
            "{kind}"
        );
        drop(keep);
    }
}
