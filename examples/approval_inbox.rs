//! Approvals from a web page: a support crew whose refunds wait for a
//! person, who answers them in the approval inbox.
//!
//! The questions are rows of an SQLite store (a temporary file here;
//! `postgres://…` for several replicas), asked through `StoreApprovals`;
//! the inbox (`crew_runtime::inbox`) serves the approvers.
//!
//! `cargo run --example approval_inbox` starts the inbox on
//! 127.0.0.1:8080 (`-- --port N` for another port), creates the approver
//! `demo` with a fresh password (printed), and runs a kickoff every few
//! seconds that asks to refund an order: sign in, and approve, deny or edit
//! the refunds as they appear. Ctrl-C stops it.
//!
//! `cargo run --example approval_inbox -- --demo` serves on a free port and
//! answers through the inbox's JSON API, as a chat bot would: one refund
//! approved, one denied, one approved with a smaller amount, which is what
//! the tool then receives. It prints what happened and exits.
//!
//! `cargo run --example approval_inbox -- --demo-channels` announces three
//! refunds on Slack, by e-mail and to a webhook, all on loopback: a
//! stand-in for Slack's Web API, an SMTP server and a webhook receiver.
//! One is approved by a signed Slack click, one through the e-mailed link
//! (opened in a headless Chromium when `chromedriver` is on `PATH`), one
//! denied by a bot the webhook told, through the JSON API. It prints one
//! line per channel and exits.

use std::error::Error;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crew_runtime::ToolAnnotations;
use crew_runtime::guards::ApprovalGate;
use crew_runtime::inbox::Inbox;
use crew_runtime::prelude::*;
use crew_runtime::store::{ApproverScope, Store, StoreApprovals};
use tokio::net::TcpListener;

#[path = "support/channels_demo.rs"]
mod channels_demo;

/// How long a refund waits for a person.
const APPROVAL_WAIT: Duration = Duration::from_secs(5 * 60);

/// What the refund tool ran with, in order.
type Refunds = Arc<Mutex<Vec<Value>>>;

/// A support crew for one ticket: the model asks to refund `amount` on
/// `order`; refunds are destructive, so the gate asks a person first.
fn support_crew(store: &Store, refunds: &Refunds, order: &str, amount: u64) -> Crew {
    let ran = refunds.clone();
    let refund = Tool::dynamic(
        "refund",
        "Refunds an order",
        json!({
            "type": "object",
            "properties": {
                "order": {"type": "string"},
                "amount": {"type": "integer", "minimum": 1, "maximum": 500}
            },
            "required": ["order", "amount"],
            "additionalProperties": false
        }),
        move |args| {
            ran.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(args.clone());
            Ok::<_, String>(json!(format!(
                "refunded {} on {}",
                args["amount"], args["order"]
            )))
        },
    )
    .with_annotations(ToolAnnotations::new().destructive(true));
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("refund", json!({"order": order, "amount": amount}))
            .answer("The ticket is handled."),
    );
    let support = Agent::builder("Support")
        .goal("Resolve refund tickets")
        .backstory("Refunds what the customer is owed")
        .tools(vec![refund])
        .llm(llm)
        .build();
    let ticket = Task::builder("Handle the ticket about order {order}")
        .name("refund ticket")
        .agent(&support)
        .build();
    let built = Crew::builder()
        .name("support-desk")
        .agent(support)
        .task(ticket)
        // This crew's hooks only: the program's `#[on]` hooks stay out.
        .global_registry(Arc::new(HookRegistry::new()))
        .human_input(Arc::new(StoreApprovals::new(store.clone())))
        .human_input_timeout(APPROVAL_WAIT)
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_capabilities([Capability::Destructive]).pre_hook(),
        )
        .build();
    match built {
        Ok(crew) => crew,
        // The crew is fixed in this file: a build error is a bug here.
        Err(error) => panic!("the support crew does not build: {error}"),
    }
}

/// Runs one ticket for customer `user` and says what became of it.
async fn run_ticket(store: Store, refunds: Refunds, user: String, order: String, amount: u64) {
    let crew = support_crew(&store, &refunds, &order, amount).for_user(user.clone());
    match crew.kickoff([("order", order.as_str())]).await {
        Ok(output) => {
            let observation = output
                .tasks_output
                .first()
                .map(|task| task.raw.clone())
                .unwrap_or_default();
            println!("ticket {order} for {user}: {observation}");
        }
        Err(error) => println!("ticket {order} for {user} failed: {error}"),
    }
}

/// A password nobody can guess, for the demo approver.
fn fresh_password() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

struct Options {
    port: u16,
    demo: bool,
    demo_channels: bool,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        port: 8080,
        demo: false,
        demo_channels: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--demo" => options.demo = true,
            "--demo-channels" => options.demo_channels = true,
            "--port" => {
                let port = args.next().ok_or("--port needs a number")?;
                options.port = port
                    .parse()
                    .map_err(|_| format!("--port needs a number, not {port:?}"))?;
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?} (use --port N, --demo or --demo-channels)"
                ));
            }
        }
    }
    if options.demo {
        options.port = 0;
    }
    Ok(options)
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(error) => {
            eprintln!("approval_inbox: {error}");
            return ExitCode::from(2);
        }
    };
    match run(options).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("approval_inbox: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Serves the inbox and runs the tickets; returns the arguments the refund
/// tool ran with.
async fn run(options: Options) -> Result<Vec<Value>, Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("approvals.db").display());
    let store = Store::connect(&url).await?;
    let password = fresh_password();
    store
        .add_approver("demo", Some(&password), ApproverScope::everything())
        .await?;

    if options.demo_channels {
        let (refunds, decided) = demo_channels(&store).await?;
        for decided in &decided {
            println!(
                "{:<8} {} {} by {} ({})",
                decided.channel, decided.order, decided.decision, decided.by, decided.how
            );
        }
        return Ok(refunds);
    }
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, options.port))).await?;
    let address = listener.local_addr()?;
    let origin = format!("http://{address}");
    let inbox = Inbox::new(store.clone()).public_origin(origin.clone());
    let server = tokio::spawn(inbox.serve(listener));
    println!("approval inbox on {origin}/ (store {url})");
    let refunds: Refunds = Arc::default();

    if options.demo {
        let result = demo(&store, &refunds, &origin).await;
        server.abort();
        result?;
        return Ok(refunds_ran(&refunds));
    }

    println!("sign in as demo with the password {password}");
    println!("a refund asks for approval every 10 seconds; Ctrl-C stops");
    let mut tickets = tokio::time::interval(Duration::from_secs(10));
    for n in 1u64.. {
        tokio::select! {
            _ = tickets.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
        }
        let order = format!("A-{}", 100 + n);
        tokio::spawn(run_ticket(
            store.clone(),
            refunds.clone(),
            "carol".into(),
            order,
            40 * (n % 10 + 1),
        ));
    }
    server.abort();
    Ok(refunds_ran(&refunds))
}

/// Three refunds decided on Slack, by e-mail and through a webhook's bot
/// (see `support/channels_demo.rs`): what the refund tool ran with, and
/// what was decided where.
async fn demo_channels(
    store: &Store,
) -> Result<(Vec<Value>, Vec<channels_demo::Decided>), Box<dyn Error>> {
    let refunds: Refunds = Arc::default();
    let ticket = |order: String, amount: u64| {
        run_ticket(
            store.clone(),
            refunds.clone(),
            "carol".into(),
            order,
            amount,
        )
    };
    let decided = channels_demo::run(store, ticket).await?;
    Ok((refunds_ran(&refunds), decided))
}

/// What the refund tool ran with, by order.
fn refunds_ran(refunds: &Refunds) -> Vec<Value> {
    let mut ran = refunds
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    ran.sort_by_key(|args| args["order"].as_str().unwrap_or_default().to_owned());
    ran
}

/// Three tickets answered through the JSON API with a bearer token.
async fn demo(store: &Store, refunds: &Refunds, origin: &str) -> Result<(), Box<dyn Error>> {
    let token = store.issue_api_token("demo").await?;
    let mut tickets = Vec::new();
    for (order, amount) in [("A-101", 120), ("A-102", 480), ("A-103", 450)] {
        tickets.push(tokio::spawn(run_ticket(
            store.clone(),
            refunds.clone(),
            "carol".into(),
            order.into(),
            amount,
        )));
    }
    let client = reqwest::Client::new();
    let listed = loop {
        let listed: Value = client
            .get(format!("{origin}/api/approvals"))
            .bearer_auth(&token)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let approvals = listed["approvals"].as_array().cloned().unwrap_or_default();
        if approvals.len() == 3 {
            break approvals;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for question in &listed {
        let id = question["id"].as_str().ok_or("a question without an id")?;
        let order = question["arguments"]["order"].as_str().unwrap_or_default();
        let body = match order {
            "A-101" => json!({"decision": "approve"}),
            "A-102" => json!({"decision": "deny", "comment": "above the refund policy"}),
            _ => json!({
                "decision": "edit",
                "arguments": {"order": order, "amount": 45},
                "comment": "refund the shipping only"
            }),
        };
        println!(
            "{} asks to refund {} on {order}: answering {}",
            question["agent"].as_str().unwrap_or("?"),
            question["arguments"]["amount"],
            body["decision"]
        );
        client
            .post(format!("{origin}/api/approvals/{id}/decision"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await?
            .error_for_status()?;
    }
    for ticket in tickets {
        ticket.await?;
    }
    println!(
        "the refund tool ran with: {}",
        Value::Array(refunds_ran(refunds))
    );
    for question in store.history(10).await? {
        if let Some(answer) = &question.answer {
            println!(
                "history: {} {} by {}",
                question.arguments["order"].as_str().unwrap_or("?"),
                answer.decision,
                answer.approver
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_channel_demo_decides_one_refund_on_each_channel() {
        let dir = tempfile::tempdir().expect("a directory");
        let url = format!("sqlite://{}", dir.path().join("approvals.db").display());
        let store = Store::connect(&url).await.expect("a store");
        let (ran, decided) = demo_channels(&store).await.expect("the demo runs");
        // Approved in Slack and through the e-mailed link; the bot denied
        // the third.
        assert_eq!(
            ran,
            [
                json!({"order": "A-101", "amount": 120}),
                json!({"order": "A-102", "amount": 80}),
            ]
        );
        let said: Vec<(&str, &str, &str, &str)> = decided
            .iter()
            .map(|d| {
                (
                    d.channel,
                    d.order.as_str(),
                    d.decision.as_str(),
                    d.by.as_str(),
                )
            })
            .collect();
        assert_eq!(
            said,
            [
                ("slack", "A-101", "approved", "alice"),
                ("email", "A-102", "approved", "bob"),
                ("webhook", "A-103", "denied", "pagerbot"),
            ]
        );
        // Where the services are required, the link was opened in the
        // real browser.
        if std::env::var_os("CREW_REQUIRE_SERVICES").is_some_and(|required| required == "1") {
            assert_eq!(decided[1].how, "its link, in Chromium");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_demo_approves_one_denies_one_and_the_tool_gets_the_edit() {
        let ran = run(Options {
            port: 0,
            demo: true,
            demo_channels: false,
        })
        .await
        .expect("the demo runs");
        assert_eq!(
            ran,
            [
                json!({"order": "A-101", "amount": 120}),
                json!({"order": "A-103", "amount": 45}),
            ]
        );
    }
}
