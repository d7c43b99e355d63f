//! A store on each backend, for the test files that run every scenario on
//! SQLite and on PostgreSQL (`on_both_stores!`). A test file includes it
//! beside `mod support;`, as `#[path = "support/stores.rs"] mod stores;`.

use crew_runtime::store::Store;

/// What a store's test keeps alive (its directory, on SQLite), and the
/// store's URL (to open it again, as another process would).
pub(crate) struct Keep {
    #[allow(dead_code, reason = "a file may only keep the store alive")]
    pub(crate) url: String,
    /// The SQLite file's directory (none for PostgreSQL).
    #[allow(dead_code, reason = "a file may only keep it alive")]
    pub(crate) dir: Option<tempfile::TempDir>,
}

/// A store of the backend `kind` (`"sqlite"`: a file in a temporary
/// directory; `"postgres"`: a database of the throw-away cluster), with
/// what keeps it alive, or `None` (after a loud message) when PostgreSQL is
/// missing on this machine.
pub(crate) async fn store(kind: &str) -> Option<(Store, Keep)> {
    match kind {
        "sqlite" => {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let url = format!("sqlite://{}", dir.path().join("store.db").display());
            let store = Store::connect(&url).await.expect("SQLite opens");
            Some((
                store,
                Keep {
                    url,
                    dir: Some(dir),
                },
            ))
        }
        _ => {
            let url = crate::support::postgres_database().await?;
            let store = Store::connect(&url).await.expect("PostgreSQL opens");
            Some((store, Keep { url, dir: None }))
        }
    }
}

/// Runs each `scenario(store, keep)` of the file on SQLite and on
/// PostgreSQL, as two tests (`sqlite::scenario`, `postgres::scenario`).
macro_rules! on_both_stores {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let (store, keep) = crate::stores::store("sqlite")
                        .await
                        .expect("SQLite is always there");
                    super::$scenario(store, keep).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let Some((store, keep)) = crate::stores::store("postgres").await
                    else {
                        return;
                    };
                    super::$scenario(store, keep).await;
                }
            )*
        }
    };
}
pub(crate) use on_both_stores;
