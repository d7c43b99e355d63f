//! The test support works against the real services it starts:
//!
//! - Each call to `postgres_database` gives a database of its own, also
//!   when many are asked for at once.
//! - `LISTEN`/`NOTIFY` goes through the cluster (the store's replicas
//!   wake each other with it).
//! - A form served on 127.0.0.1, filled in and submitted in a headless
//!   Chromium, reaches the server; a screenshot is a PNG file.
//! - A missing service fails the test when `CREW_REQUIRE_SERVICES=1`.
//!
//! Where PostgreSQL or Chromium is not installed, the tests that need it
//! say so and check nothing else.
#![cfg(unix)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use fantoccini::Locator;
use sqlx::Connection as _;
use sqlx::postgres::{PgConnection, PgListener};

/// How long a step against a real service may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(20);

#[tokio::test]
async fn each_call_gives_a_database_of_its_own() {
    let Some(first) = support::postgres_database().await else {
        return;
    };
    let Some(second) = support::postgres_database().await else {
        return;
    };
    assert_ne!(first, second);

    let mut one = PgConnection::connect(&first)
        .await
        .expect("connect to the first");
    let mut two = PgConnection::connect(&second)
        .await
        .expect("connect to the second");
    let name_one: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&mut one)
        .await
        .expect("first name");
    let name_two: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&mut two)
        .await
        .expect("second name");
    assert_ne!(name_one, name_two);
    assert!(
        name_one.contains("each_call_gives_a_database_of_its_own"),
        "the name says which test made it: {name_one}"
    );

    sqlx::raw_sql("CREATE TABLE marks (id integer); INSERT INTO marks VALUES (1)")
        .execute(&mut one)
        .await
        .expect("a table in the first");
    let in_second: Option<String> = sqlx::query_scalar("SELECT to_regclass('marks')::text")
        .fetch_one(&mut two)
        .await
        .expect("look in the second");
    assert_eq!(in_second, None, "the second database is empty");
}

#[tokio::test]
async fn many_databases_at_once() {
    let urls = futures_util::future::join_all((0..8).map(|_| support::postgres_database())).await;
    let urls: Option<Vec<String>> = urls.into_iter().collect();
    let Some(mut urls) = urls else {
        return;
    };
    urls.sort();
    urls.dedup();
    assert_eq!(urls.len(), 8);
}

#[tokio::test]
async fn listen_notify_round_trip() {
    let Some(url) = support::postgres_database().await else {
        return;
    };
    let mut listener = PgListener::connect(&url).await.expect("listener connects");
    listener.listen("crew_selftest").await.expect("listen");

    let mut sender = PgConnection::connect(&url).await.expect("sender connects");
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind("crew_selftest")
        .bind("a question was asked")
        .execute(&mut sender)
        .await
        .expect("notify");

    let notification = tokio::time::timeout(PATIENCE, listener.recv())
        .await
        .expect("the notification arrives in time")
        .expect("the listener reads it");
    assert_eq!(notification.channel(), "crew_selftest");
    assert_eq!(notification.payload(), "a question was asked");
}

/// The form page, and the page its submission leads to.
const FORM: &str = r#"<!doctype html>
<title>form</title>
<form method="post" action="/submit">
  <label>Name <input name="name"></label>
  <button type="submit">Send</button>
</form>"#;
const THANKS: &str = r#"<!doctype html><title>thanks</title><p id="done">Thanks</p>"#;

#[tokio::test]
async fn a_form_filled_in_a_real_browser_reaches_the_server() {
    let Some(browser) = support::browser().await else {
        return;
    };

    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind 127.0.0.1:0"));
    let port = server.server_addr().to_ip().expect("an IP address").port();
    let (bodies, received) = std::sync::mpsc::channel();
    let serving = {
        let server = Arc::clone(&server);
        std::thread::spawn(move || {
            for mut request in server.incoming_requests() {
                let page = if *request.method() == tiny_http::Method::Post {
                    let mut body = String::new();
                    // A body that cannot be read reaches the test as empty.
                    let _ = request.as_reader().read_to_string(&mut body);
                    let _ = bodies.send(body);
                    THANKS
                } else {
                    FORM
                };
                let html =
                    tiny_http::Header::from_bytes("Content-Type", "text/html; charset=utf-8")
                        .expect("a valid header");
                let _ = request.respond(tiny_http::Response::from_string(page).with_header(html));
            }
        })
    };

    let client = browser.client();
    client
        .goto(&format!("http://127.0.0.1:{port}/"))
        .await
        .expect("open the form");
    client
        .find(Locator::Css("input[name=name]"))
        .await
        .expect("the field")
        .send_keys("Ada Lovelace")
        .await
        .expect("type into it");
    client
        .find(Locator::Css("button[type=submit]"))
        .await
        .expect("the button")
        .click()
        .await
        .expect("submit");
    client
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Id("done"))
        .await
        .expect("the thanks page");

    let body = received
        .recv_timeout(PATIENCE)
        .expect("the server got the form");
    assert_eq!(body, "name=Ada+Lovelace");

    let path = browser.screenshot("support_selftest_form").await;
    let png = std::fs::read(&path).expect("the screenshot file");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is a PNG",
        path.display()
    );

    server.unblock();
    serving.join().expect("the server thread ends");
}

#[test]
#[should_panic(
    expected = "SKIPPED: a_missing_service_fails_when_services_are_required needs PostgreSQL"
)]
fn a_missing_service_fails_when_services_are_required() {
    support::unavailable(
        "PostgreSQL",
        "no initdb here",
        "apt-get install postgresql",
        true,
    );
}

#[test]
fn the_skip_message_names_the_test_the_service_and_the_fix() {
    let message =
        support::skip_message("PostgreSQL", "no initdb here", "apt-get install postgresql");
    assert_eq!(
        message,
        "SKIPPED: the_skip_message_names_the_test_the_service_and_the_fix needs PostgreSQL: \
         no initdb here; install with apt-get install postgresql"
    );
}
