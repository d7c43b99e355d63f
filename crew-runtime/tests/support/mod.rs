//! Real services for the tests, started by the test binary itself: a
//! throw-away PostgreSQL cluster ([`postgres_database`]), a throw-away
//! Redis ([`RedisServer`]) and a headless Chromium driven through
//! WebDriver ([`browser`]).
//!
//! A test file includes it with `mod support;` and needs the `store`
//! feature (the databases are made through sqlx). Unix only: the server
//! runs as the `postgres` system user when the tests run as root, and the
//! watchdogs that clean up after the test binary, however it ends, rest on
//! pipes and process groups.
//!
//! Where a service is not installed, the test says so loudly on standard
//! error and checks nothing else (the helpers return `None`). With
//! `CREW_REQUIRE_SERVICES=1` (CI sets it) the test fails instead, so that
//! a missing package can never pass as a green run.
//!
//! PostgreSQL's `initdb` and `pg_ctl` are looked for in the newest
//! `/usr/lib/postgresql/<major>/bin` (Debian, Ubuntu), then on `PATH`;
//! `CREW_POSTGRES_BIN` names their directory anywhere else. Chromium and
//! chromedriver are looked for on `PATH`. Screenshots go to
//! `<target>/test-screenshots/`.
#![allow(dead_code)] // each test file uses a different part

mod browser;
mod inbox;
mod postgres;
mod redis;

use std::io::Write as _;
use std::path::{Path, PathBuf};

// Each test file uses a part: the store tests no browser, the browser
// tests no database of their own.
#[allow(unused_imports)]
pub(crate) use browser::{Browser, browser, sign_in};
#[allow(unused_imports)]
pub(crate) use inbox::{ServedInbox, serve_inbox};
#[allow(unused_imports)]
pub(crate) use postgres::{postgres_database, restart_postgres, start_postgres, stop_postgres};
#[allow(unused_imports)]
pub(crate) use redis::RedisServer;

/// The environment variable that turns a missing service into a failure.
pub(crate) const REQUIRE_SERVICES: &str = "CREW_REQUIRE_SERVICES";

/// Whether this run must not skip: `CREW_REQUIRE_SERVICES=1`.
pub(crate) fn services_required() -> bool {
    std::env::var(REQUIRE_SERVICES).is_ok_and(|value| value == "1")
}

/// The line that tells why the running test checks nothing.
pub(crate) fn skip_message(needs: &str, why: &str, install: &str) -> String {
    format!(
        "SKIPPED: {} needs {needs}: {why}; install with {install}",
        current_test()
    )
}

/// Reports that `needs` is missing: a loud message on standard error, or a
/// panic with the same message when `required` (see [`services_required`]).
pub(crate) fn unavailable(needs: &str, why: &str, install: &str, required: bool) {
    let message = skip_message(needs, why, install);
    if required {
        panic!("{message} ({REQUIRE_SERVICES}=1: this run may not skip)");
    }
    // Straight to the file descriptor: `eprintln!` inside a test is captured
    // by the harness and shown only for failures, and a skip passes.
    let banner = "!".repeat(72);
    let _ = writeln!(std::io::stderr(), "\n{banner}\n{message}\n{banner}");
}

/// The running test's name: the harness names each test's thread after it.
fn current_test() -> String {
    match std::thread::current().name() {
        Some(name) if name != "main" => name.to_owned(),
        _ => "this test".to_owned(),
    }
}

/// `error` and its causes, outermost first: the outer messages of the
/// HTTP and WebDriver clients alone rarely say what went wrong.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    // `cause`, not `source`: fantoccini's errors give their inner error only
    // through the older method (which falls back to `source` elsewhere).
    #[allow(deprecated)]
    let mut cause = error.cause();
    while let Some(inner) = cause {
        let said = inner.to_string();
        // Some errors already print their cause; say it once.
        if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        #[allow(deprecated)]
        let next = inner.cause();
        cause = next;
    }
    text
}

/// The first executable file called `name` in a directory of `PATH`.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// Whether `path` is a file someone may execute.
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}
