//! What announcing approvals costs (SPEC §5, §14).
//!
//! **From a signed Slack click to the waiting call.** A question is asked
//! (a call waits for it); the inbox serves Slack's endpoint on loopback on
//! another handle of the store (its own connection pool, as an inbox on
//! another replica has). For each of `CLICKS` questions, one at a time: the
//! time from posting a click signed as Slack signs it to the waiting call
//! having the answer (it hears of it as another process would: `NOTIFY` on
//! PostgreSQL, the file's data version read every 100 ms on SQLite). p50
//! and p95 (target on PostgreSQL: p95 ≤ 1 s).
//!
//! **Asking while three channels announce.** `QUESTIONS` questions asked at
//! once, the time until all are in the store (what a caller waits before
//! waiting for people), with no channel, and with an announcer delivering
//! them on three channels (a Slack stand-in answering each call in
//! 500 ms, two webhook receivers) in the same process; alternating,
//! `RUNS` of each, medians and their ratio (target: ≤ 1.1 ×). A run with
//! channels goes on until the announcer has taken each of its questions on
//! the three channels; their delivery (and that of their withdrawal) goes
//! on while the next runs ask. The calls the stand-ins took are printed.
//!
//! `cargo bench -p crew-runtime --features channels,store --bench channels`

#[path = "shared/stores.rs"]
mod stores;
#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crew_runtime::channels::{Announcer, Slack, Webhook};
use crew_runtime::inbox::Inbox;
use crew_runtime::store::{ApproverScope, SlackIdentity, Store, StoreApprovals};
use crew_runtime::{HumanInputRequest, HumanInputSource};
use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;

const CLICKS: usize = 40;
const QUESTIONS: usize = 100;
const RUNS: usize = 41;
const TEAM: &str = "T024BE7LD";
const TOKEN: &str = "xoxb-17-42-bench";
const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const WEBHOOK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const PATIENCE: Duration = Duration::from_secs(60);

fn fail(what: &str, error: impl std::fmt::Display) -> ! {
    eprintln!("{what}: {error}");
    std::process::exit(1)
}

/// Serves `router` on loopback: its origin.
async fn serve(router: axum::Router) -> String {
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(listener) => listener,
        Err(error) => fail("no loopback port", error),
    };
    let origin = match listener.local_addr() {
        Ok(address) => format!("http://{address}"),
        Err(error) => fail("no address", error),
    };
    tokio::spawn(async move { axum::serve(listener, router).await });
    origin
}

/// Calls the Slack stand-in took, posts the webhook receivers took.
static SLACK_CALLS: AtomicUsize = AtomicUsize::new(0);
static WEBHOOK_POSTS: AtomicUsize = AtomicUsize::new(0);

/// A Slack Web API stand-in answering each call after `delay`.
async fn slack_stand_in(delay: Duration) -> String {
    let api = move |axum::extract::Path(method): axum::extract::Path<String>,
                    body: axum::body::Bytes| async move {
        SLACK_CALLS.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(delay).await;
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let channel = body["channel"].as_str().unwrap_or_default().to_owned();
        axum::Json(
            json!({"ok": true, "channel": format!("D{channel}"), "ts": "1.0", "method": method}),
        )
    };
    let router = axum::Router::new().route("/api/{method}", axum::routing::post(api));
    format!("{}/api/", serve(router).await)
}

/// A webhook receiver answering 200 at once.
async fn webhook_receiver() -> String {
    let router = axum::Router::new().route(
        "/hooks",
        axum::routing::post(|| async {
            WEBHOOK_POSTS.fetch_add(1, Ordering::Relaxed);
            "ok"
        }),
    );
    format!("{}/hooks", serve(router).await)
}

fn request(n: usize) -> HumanInputRequest {
    let mut request = HumanInputRequest::new("Refund this order?", "yes/no")
        .with_call_id(format!("call_{n}"))
        .with_tool("refund", json!({"order": format!("A-{n}"), "amount": 10}))
        .with_agent_role("Support");
    request.requester = Some("carol".into());
    request.timeout = Some(PATIENCE);
    request
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| i64::try_from(since.as_secs()).unwrap_or(0))
}

/// A click of alice's Slack user on Approve, signed now.
fn click(value: &str) -> (String, i64, String) {
    let payload = json!({
        "type": "block_actions",
        "team": {"id": TEAM},
        "user": {"id": "UALICE", "team_id": TEAM},
        "actions": [{"action_id": "approve", "value": value}],
    });
    let body = form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish();
    let now = now_secs();
    let mut mac = match Hmac::<Sha256>::new_from_slice(SIGNING_SECRET.as_bytes()) {
        Ok(mac) => mac,
        Err(error) => fail("no key", error),
    };
    mac.update(format!("v0:{now}:{body}").as_bytes());
    let signature = format!("v0={}", hex::encode(mac.finalize().into_bytes()));
    (body, now, signature)
}

/// The pending questions once there are `count`.
async fn pending(store: &Store, count: usize) -> Vec<crew_runtime::store::Question> {
    let started = Instant::now();
    loop {
        match store.pending().await {
            Ok(pending) if pending.len() >= count => return pending,
            Ok(_) => {}
            Err(error) => fail("the store does not list", error),
        }
        if started.elapsed() > PATIENCE {
            fail("the questions", "never all asked");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn percentile(times: &mut [Duration], p: usize) -> Duration {
    times.sort();
    times[(times.len() * p / 100).min(times.len() - 1)]
}

async fn clicks(backend: &str, url: &str) {
    let store = match Store::connect(url).await {
        Ok(store) => store,
        Err(error) => fail("the store does not open", error),
    };
    let inbox_store = match Store::connect(url).await {
        Ok(store) => store,
        Err(error) => fail("the store does not open", error),
    };
    if let Err(error) = store
        .add_approver("alice", None, ApproverScope::everything())
        .await
    {
        fail("no approver", error);
    }
    if let Err(error) = store
        .link_slack("alice", &SlackIdentity::new(TEAM, "UALICE"))
        .await
    {
        fail("no link", error);
    }
    let origin = serve(
        Inbox::new(inbox_store)
            .slack_signing_secret(SIGNING_SECRET)
            .router(),
    )
    .await;
    let client = reqwest::Client::new();
    let approvals = StoreApprovals::new(store.clone());
    let mut times = Vec::with_capacity(CLICKS);
    for n in 0..CLICKS {
        let asking = approvals.clone();
        let waiting = tokio::spawn(async move { asking.answer(request(n)).await });
        let question = pending(&store, 1).await.remove(0);
        let (body, timestamp, signature) =
            click(&format!("{}:{}", question.id, question.revision()));
        let started = Instant::now();
        let posted = client
            .post(format!("{origin}/slack/interactions"))
            .header("x-slack-request-timestamp", timestamp.to_string())
            .header("x-slack-signature", signature)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await;
        match posted {
            Ok(response) if response.status().is_success() => {}
            Ok(response) => fail("the click", response.status()),
            Err(error) => fail("the click", error),
        }
        match tokio::time::timeout(PATIENCE, waiting).await {
            Ok(Ok(Ok(_))) => times.push(started.elapsed()),
            _ => fail("the waiting call", "heard nothing"),
        }
    }
    let (p50, p95) = (percentile(&mut times, 50), percentile(&mut times, 95));
    println!(
        "{backend:<10} Slack click to the waiting call ({CLICKS}): p50 {:>7.1} ms, p95 {:>7.1} ms",
        p50.as_secs_f64() * 1e3,
        p95.as_secs_f64() * 1e3
    );
}

/// The time until `QUESTIONS` questions asked at once are all in the
/// store; then, when `announced` (channels named), until the announcer
/// has taken each on its three channels (made its announcements; their
/// delivery goes on while the next runs ask); then they are withdrawn
/// (their calls dropped) and gone from the pending list.
async fn ask_all(store: &Store, announced: bool) -> Duration {
    let approvals = StoreApprovals::new(store.clone());
    let started = Instant::now();
    let waiting: Vec<_> = (0..QUESTIONS)
        .map(|n| {
            let asking = approvals.clone();
            tokio::spawn(async move { asking.answer(request(n)).await })
        })
        .collect();
    let asked = pending(store, QUESTIONS).await;
    let took = started.elapsed();
    if announced {
        let told = Instant::now();
        for question in asked {
            while store
                .announcements(&question.id)
                .await
                .map_or(true, |announcements| announcements.len() < 3)
            {
                if told.elapsed() > PATIENCE {
                    fail("the questions", "never announced");
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    for task in waiting {
        task.abort();
    }
    let started = Instant::now();
    while store
        .pending()
        .await
        .map_or(true, |pending| !pending.is_empty())
    {
        if started.elapsed() > PATIENCE {
            fail("the questions", "never withdrawn");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    took
}

async fn asking(backend: &str, url: &str) {
    let store = match Store::connect(url).await {
        Ok(store) => store,
        Err(error) => fail("the store does not open", error),
    };
    let slack_api = slack_stand_in(Duration::from_millis(500)).await;
    let (first, second) = (webhook_receiver().await, webhook_receiver().await);
    for name in ["bob", "dave", "erin"] {
        if let Err(error) = store
            .add_approver(name, None, ApproverScope::everything())
            .await
        {
            fail("no approver", error);
        }
        let user = format!("U{}", name.to_uppercase());
        if let Err(error) = store
            .link_slack(name, &SlackIdentity::new(TEAM, user))
            .await
        {
            fail("no link", error);
        }
    }
    let announcer = || {
        let slack = Slack::new(store.clone(), "ops", TEAM, TOKEN)
            .and_then(|slack| slack.api_base(&slack_api))
            .unwrap_or_else(|error| fail("no Slack channel", error));
        let webhook = |name: &str, url: &str| {
            Webhook::new(name, url, WEBHOOK_SECRET)
                .unwrap_or_else(|error| fail("no webhook", error))
        };
        Announcer::new(store.clone())
            .channel(slack)
            .channel(webhook("pager", &first))
            .channel(webhook("bots", &second))
    };
    // One announcer delivers all along; another names its channels in the
    // store, or not, for each run.
    let switch = announcer();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(announcer().run(async move {
        let _ = stopped.await;
    }));
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        if let Err(error) = switch.unregister().await {
            fail("no channels", error);
        }
        without.push(ask_all(&store, false).await);
        if let Err(error) = switch.register().await {
            fail("channels", error);
        }
        with.push(ask_all(&store, true).await);
    }
    let _ = stop.send(());
    let _ = running.await;
    let (without, with) = (percentile(&mut without, 50), percentile(&mut with, 50));
    println!(
        "{backend:<10} {QUESTIONS} questions asked at once: no channel {:>7.1} ms, three channels {:>7.1} ms, ratio {:.2} x",
        without.as_secs_f64() * 1e3,
        with.as_secs_f64() * 1e3,
        with.as_secs_f64() / without.as_secs_f64()
    );
    println!(
        "{backend:<10} delivered meanwhile: {} Slack API calls, {} webhook posts",
        SLACK_CALLS.swap(0, Ordering::Relaxed),
        WEBHOOK_POSTS.swap(0, Ordering::Relaxed)
    );
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
        clicks(backend, &url).await;
        asking(backend, &url).await;
    }));
}
