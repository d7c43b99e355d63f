//! `approval_inbox -- --demo-channels`: three refunds announced on Slack,
//! by e-mail and to a webhook, each decided on one of them.
//!
//! Everything runs here, on loopback: a stand-in for Slack's Web API
//! (it takes `chat.postMessage` and `chat.update`), an SMTP server that
//! keeps the mail, and a webhook receiver that checks each message's
//! Standard Webhooks signature. Then:
//! - alice clicks Approve in her Slack message: the click is posted to the
//!   inbox signed as Slack signs it;
//! - bob opens the link of his e-mail in a headless Chromium (when
//!   `chromedriver` is on `PATH`; otherwise the link's page is fetched and
//!   its form posted, as a browser would) and approves;
//! - a paging bot, told by the webhook, denies through the JSON API with
//!   its bearer token.

use std::error::Error;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crew_runtime::channels::{Announcer, Email, Slack, Webhook};
use crew_runtime::inbox::{Inbox, LinkKeys};
use crew_runtime::prelude::*;
use crew_runtime::serde_json;
use crew_runtime::store::{ApproverScope, SlackIdentity, Store};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::net::TcpListener;

#[path = "../../crew-runtime/tests/support/smtp.rs"]
mod smtp;

/// The Slack app's signing secret, the bot's token and the workspace.
const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const BOT_TOKEN: &str = "xoxb-17-42-demo";
const TEAM: &str = "T0DEMO";
/// The webhook's secret, and the key signed links are signed with.
const WEBHOOK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const LINK_KEYS: &str = "demo q8vN0o3bHh3XU6mCw0d2kUeUq7SQXnGkd1r5n8E3Z1I=";
/// How long the demo waits for anything it expects.
const PATIENCE: Duration = Duration::from_secs(30);

/// What was decided, on which channel: one line each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decided {
    pub(crate) channel: &'static str,
    pub(crate) order: String,
    pub(crate) decision: String,
    pub(crate) by: String,
    /// How it was decided there.
    pub(crate) how: &'static str,
}

/// Runs the demo on `store`: the three refunds (through `ticket`, which
/// runs one kickoff for an order and amount) and their decisions.
pub(crate) async fn run<F, Fut>(store: &Store, ticket: F) -> Result<Vec<Decided>, Box<dyn Error>>
where
    F: Fn(String, u64) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    // alice decides in Slack, bob from his e-mail (one click: the link is
    // his credential for that one decision), the bot through the API.
    store
        .add_approver("alice", None, ApproverScope::everything())
        .await?;
    store
        .link_slack("alice", &SlackIdentity::new(TEAM, "UALICE"))
        .await?;
    store
        .add_approver("bob", None, ApproverScope::everything())
        .await?;
    store
        .set_approver_email("bob", Some("bob@example.com"))
        .await?;
    store.set_one_click_links("bob", true).await?;
    store
        .add_approver("pagerbot", None, ApproverScope::everything())
        .await?;
    let bot_token = store.issue_api_token("pagerbot").await?;

    let slack_api = SlackStandIn::start().await?;
    let mail = smtp::SmtpServer::start().await;
    let pager = WebhookReceiver::start().await?;

    let keys = LinkKeys::parse(LINK_KEYS)?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let origin = format!("http://{}", listener.local_addr()?);
    let inbox = Inbox::new(store.clone())
        .public_origin(origin.clone())
        .slack_signing_secret(SIGNING_SECRET)
        .link_keys(keys.clone());
    let server = tokio::spawn(inbox.serve(listener));

    let slack = Slack::new(store.clone(), "ops-slack", TEAM, BOT_TOKEN)?
        .api_base(&slack_api.api)?
        .inbox(&origin);
    let email = Email::new(
        store.clone(),
        "ops-mail",
        &mail.url(),
        "Approvals <approvals@example.com>",
        &origin,
        keys,
    )?;
    let webhook = Webhook::new("pager", &pager.url, WEBHOOK_SECRET)?.inbox(&origin);
    let announcer = Announcer::new(store.clone())
        .channel(slack)
        .channel(email)
        .channel(webhook);
    announcer.register().await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let delivering = tokio::spawn(announcer.run(async {
        let _ = stopped.await;
    }));

    let mut tickets = Vec::new();
    for (order, amount) in [("A-101", 120), ("A-102", 80), ("A-103", 450)] {
        tickets.push(tokio::spawn(ticket(order.to_owned(), amount)));
    }
    let questions = wait_for("three questions", || async {
        let pending = store.pending().await.ok()?;
        (pending.len() == 3).then_some(pending)
    })
    .await?;
    let id_of = |order: &str| {
        questions
            .iter()
            .find(|question| question.arguments["order"] == order)
            .map(|question| question.id.clone())
            .ok_or_else(|| format!("no question about {order}"))
    };
    let (slack_id, email_id, webhook_id) = (id_of("A-101")?, id_of("A-102")?, id_of("A-103")?);

    // Slack: alice's message about A-101, and her click on Approve.
    let value = wait_for("alice's Slack message", || async {
        slack_api.approve_value(&slack_id)
    })
    .await?;
    slack_click(&origin, "UALICE", &value).await?;

    // E-mail: bob's mail about A-102, its link opened and approved.
    let link = wait_for("bob's e-mail", || async {
        mail.received()
            .into_iter()
            .find(|received| received.body().contains("A-102"))
            .map(|received| received.link())
    })
    .await?;
    let in_browser = open_and_approve(&link).await?;

    // Webhook: the pager is told of A-103; its bot denies it.
    wait_for("the webhook's message", || async {
        pager.told(&webhook_id).then_some(())
    })
    .await?;
    reqwest::Client::new()
        .post(format!("{origin}/api/approvals/{webhook_id}/decision"))
        .bearer_auth(&bot_token)
        .json(&json!({"decision": "deny", "comment": "no refunds above 400 without a ticket"}))
        .send()
        .await?
        .error_for_status()?;

    for ticket in tickets {
        ticket.await?;
    }
    let _ = stop.send(());
    let _ = delivering.await;
    server.abort();

    let mut decided = Vec::new();
    for (id, order) in [
        (&slack_id, "A-101"),
        (&email_id, "A-102"),
        (&webhook_id, "A-103"),
    ] {
        let question = store
            .question(id)
            .await?
            .ok_or("a decided question is gone")?;
        let answer = question.answer.ok_or("a question was not answered")?;
        let (channel, how) = match answer.via.as_deref() {
            Some("slack") => ("slack", "a signed click"),
            Some("link") if in_browser => ("email", "its link, in Chromium"),
            Some("link") => ("email", "its link, over HTTP"),
            Some("api") => ("webhook", "the bot, through the JSON API"),
            _ => ("inbox", "the inbox"),
        };
        decided.push(Decided {
            channel,
            how,
            order: order.to_owned(),
            decision: question.status.to_string(),
            by: answer.approver,
        });
    }
    Ok(decided)
}

/// Polls `probe` until it finds something, for [`PATIENCE`] at most.
async fn wait_for<T, F, Fut>(what: &str, probe: F) -> Result<T, String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(found) = probe().await {
            return Ok(found);
        }
        if started.elapsed() > PATIENCE {
            return Err(format!("{what} never came"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Serves `router` on a free port of 127.0.0.1: its origin.
async fn serve(router: axum::Router) -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let origin = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(origin)
}

/// A stand-in for Slack's Web API: keeps each posted message.
struct SlackStandIn {
    api: String,
    posted: Arc<Mutex<Vec<Value>>>,
}

impl SlackStandIn {
    async fn start() -> std::io::Result<SlackStandIn> {
        let posted = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&posted);
        let api = move |axum::extract::Path(method): axum::extract::Path<String>,
                        axum::Json(body): axum::Json<Value>| {
            let kept = Arc::clone(&kept);
            async move {
                if method == "chat.postMessage" {
                    kept.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(body.clone());
                }
                axum::Json(json!({"ok": true, "channel": "D0DEMO", "ts": "1712.000100"}))
            }
        };
        let router = axum::Router::new().route("/api/{method}", axum::routing::post(api));
        let origin = serve(router).await?;
        Ok(SlackStandIn {
            api: format!("{origin}/api/"),
            posted,
        })
    }

    /// The value of the Approve button of the message about question `id`.
    fn approve_value(&self, id: &str) -> Option<String> {
        let posted = self.posted.lock().unwrap_or_else(PoisonError::into_inner);
        posted.iter().find_map(|message| {
            message["blocks"]
                .as_array()?
                .iter()
                .filter_map(|block| block["elements"].as_array())
                .flatten()
                .filter(|element| element["action_id"] == "approve")
                .filter_map(|button| button["value"].as_str())
                .find(|value| value.starts_with(&format!("{id}:")))
                .map(str::to_owned)
        })
    }
}

/// Posts `user`'s click on the button of `value` to the inbox, signed as
/// Slack signs it.
async fn slack_click(origin: &str, user: &str, value: &str) -> Result<(), Box<dyn Error>> {
    let payload = json!({
        "type": "block_actions",
        "team": {"id": TEAM},
        "user": {"id": user, "team_id": TEAM},
        "actions": [{"action_id": "approve", "value": value, "block_id": "crew-approval"}],
    });
    let body = form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish();
    let timestamp = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let mut mac = Hmac::<Sha256>::new_from_slice(SIGNING_SECRET.as_bytes())?;
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    let signature = format!("v0={}", hex::encode(mac.finalize().into_bytes()));
    let said: Value = reqwest::Client::new()
        .post(format!("{origin}/slack/interactions"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", timestamp.to_string())
        .header("x-slack-signature", signature)
        .body(body)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    if said["decided"] != json!(true) {
        return Err(format!("the click decided nothing: {said}").into());
    }
    Ok(())
}

/// A webhook receiver that checks each message's signature and keeps the
/// questions it was told of.
struct WebhookReceiver {
    url: String,
    told: Arc<Mutex<Vec<String>>>,
}

impl WebhookReceiver {
    async fn start() -> Result<WebhookReceiver, Box<dyn Error>> {
        let told = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&told);
        let verifier = Arc::new(standardwebhooks::Webhook::new(WEBHOOK_SECRET)?);
        let receive = move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let (kept, verifier) = (Arc::clone(&kept), Arc::clone(&verifier));
            async move {
                if verifier.verify(&body, &headers).is_err() {
                    return axum::http::StatusCode::UNAUTHORIZED;
                }
                let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                if let Some(id) = message["data"]["question"].as_str() {
                    kept.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(id.to_owned());
                }
                axum::http::StatusCode::NO_CONTENT
            }
        };
        let router = axum::Router::new().route("/hooks", axum::routing::post(receive));
        let origin = serve(router).await?;
        Ok(WebhookReceiver {
            url: format!("{origin}/hooks"),
            told,
        })
    }

    fn told(&self, question: &str) -> bool {
        self.told
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|id| id == question)
    }
}

/// Opens `link` and approves: in a headless Chromium when `chromedriver`
/// is on `PATH` (`true`), else by fetching its page and posting its form.
async fn open_and_approve(link: &str) -> Result<bool, Box<dyn Error>> {
    match browser::approve(link).await {
        Ok(true) => return Ok(true),
        Ok(false) => println!(
            "(no chromedriver on PATH: the link's page is fetched and its form posted instead)"
        ),
        Err(error) => return Err(error),
    }
    let client = reqwest::Client::new();
    let page = client
        .get(link)
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .ok_or("the link's page has no form")?;
    let origin = link.split("/links/").next().unwrap_or_default();
    client
        .post(link)
        .header("origin", origin)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(
            form_urlencoded::Serializer::new(String::new())
                .append_pair("decision", "approve")
                .append_pair("csrf", csrf)
                .finish(),
        )
        .send()
        .await?
        .error_for_status()?;
    Ok(false)
}

mod browser {
    //! A headless Chromium driven through `chromedriver`.

    use std::error::Error;
    use std::process::Stdio;
    use std::time::Duration;

    use super::serde_json;
    use fantoccini::{ClientBuilder, Locator};
    use hyper_util::client::legacy::connect::HttpConnector;

    /// Opens `link` and clicks Approve: `false` when there is no
    /// chromedriver to do it with.
    pub(super) async fn approve(link: &str) -> Result<bool, Box<dyn Error>> {
        let on_path = std::env::var_os("PATH")
            .map(|paths| {
                std::env::split_paths(&paths).any(|dir| dir.join("chromedriver").is_file())
            })
            .unwrap_or(false);
        if !on_path {
            return Ok(false);
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut driver = tokio::process::Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let result = drive(port, link).await;
        let _ = driver.kill().await;
        result.map(|()| true)
    }

    async fn drive(port: u16, link: &str) -> Result<(), Box<dyn Error>> {
        let mut capabilities = serde_json::Map::new();
        // `--no-sandbox`: Chromium refuses to start as root without it.
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            serde_json::json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu"]}),
        );
        let started = std::time::Instant::now();
        let client = loop {
            let connected = ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await;
            match connected {
                Ok(client) => break client,
                Err(_) if started.elapsed() < super::PATIENCE => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => return Err(format!("chromedriver: {error}").into()),
            }
        };
        let clicked = async {
            client.goto(link).await?;
            client
                .wait()
                .at_most(super::PATIENCE)
                .for_element(Locator::Css("button.approve"))
                .await?
                .click()
                .await?;
            client
                .wait()
                .at_most(super::PATIENCE)
                .for_element(Locator::Css(".link-done"))
                .await?;
            Ok::<_, fantoccini::error::CmdError>(())
        }
        .await;
        let _ = client.close().await;
        clicked.map_err(|error| format!("the browser: {error}").into())
    }
}
