//! The stores a bench of the store runs on, in turn.

use std::future::Future;

/// Runs `report(backend, url)` on a temporary SQLite file, then on
/// PostgreSQL (`CREW_PG_URL`, or a throw-away cluster started here;
/// skipped with a message where PostgreSQL is missing).
pub(crate) async fn on_each_store<F, R>(report: F)
where
    F: Fn(&'static str, String) -> R,
    R: Future<Output = ()>,
{
    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(error) => {
            eprintln!("no temporary directory: {error}");
            std::process::exit(1)
        }
    };
    report(
        "SQLite",
        format!("sqlite://{}", dir.path().join("bench.db").display()),
    )
    .await;
    match std::env::var("CREW_PG_URL") {
        Ok(url) => report("PostgreSQL", url).await,
        Err(_) => match crate::support::postgres_database().await {
            Some(url) => report("PostgreSQL", url).await,
            None => println!("PostgreSQL: skipped (not installed here)"),
        },
    }
}
