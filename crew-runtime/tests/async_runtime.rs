//! The async runtime (SPEC §7): kickoff awaited or blocking, inside and
//! outside a tokio runtime; async and synchronous tools; timeouts;
//! cancellation; async hooks in a crew; streamed answers; spans.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use common::*;
use crew_runtime::CrewBuilder;
use crew_runtime::prelude::*;
use crew_runtime::{POST_MODEL_CALL, llm::LlmError};

/// Sets its flag when dropped: shows that a cancelled future was dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn one_task_crew(agent: Agent) -> CrewBuilder {
    Crew::builder()
        .agent(agent.clone())
        .task(Task::builder("Work").agent(&agent).build())
        .global_registry(fresh_registry())
}

fn answering_crew(answer: &str) -> Crew {
    let llm = Arc::new(ScriptedLlm::new().answer(answer));
    one_task_crew(agent("Writer", vec![], &llm))
        .build()
        .expect("builds")
}

/// Waits (at most five seconds) for `flag`.
async fn eventually(flag: &AtomicBool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if flag.load(Ordering::SeqCst) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    flag.load(Ordering::SeqCst)
}

#[test]
fn kickoff_blocking_works_outside_a_runtime() {
    let llm = Arc::new(ScriptedLlm::new().answer("outside").answer("outside"));
    let crew = one_task_crew(agent("Writer", vec![], &llm))
        .build()
        .expect("builds");
    assert_eq!(crew.kickoff_blocking(()).expect("runs").raw, "outside");
    // The thread's runtime is kept for the next kickoff.
    assert_eq!(crew.kickoff_blocking(()).expect("runs").raw, "outside");
}

#[tokio::test(flavor = "current_thread")]
async fn kickoff_blocking_works_inside_a_current_thread_runtime() {
    let crew = answering_crew("inside");
    assert_eq!(crew.kickoff_blocking(()).expect("runs").raw, "inside");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kickoff_blocking_works_inside_a_multi_thread_runtime() {
    let crew = answering_crew("inside");
    assert_eq!(crew.kickoff_blocking(()).expect("runs").raw, "inside");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kickoff_future_is_send_and_can_be_spawned() {
    let crew = answering_crew("spawned");
    let output = tokio::spawn(async move { crew.kickoff(()).await })
        .await
        .expect("the task completes")
        .expect("runs");
    assert_eq!(output.raw, "spawned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_kickoff_cancels_a_running_tool() {
    let dropped = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let started = Arc::new(tokio::sync::Notify::new());
    let (flag, done, began) = (dropped.clone(), finished.clone(), started.clone());
    let slow = Tool::dynamic(
        "slow",
        "Takes a minute",
        json!({"type": "object"}),
        move |_| {
            let guard = DropFlag(flag.clone());
            let (done, began) = (done.clone(), began.clone());
            async move {
                let _guard = guard;
                began.notify_one();
                tokio::time::sleep(Duration::from_secs(60)).await;
                done.store(true, Ordering::SeqCst);
                Ok::<_, String>(json!("finished"))
            }
        },
    );
    let llm = Arc::new(ScriptedLlm::new().call("slow", json!({})).answer("done"));
    let crew = one_task_crew(agent("Clerk", vec![slow], &llm))
        .build()
        .expect("builds");

    let kickoff = tokio::spawn(async move { crew.kickoff(()).await });
    started.notified().await;
    kickoff.abort();
    assert!(kickoff.await.is_err_and(|error| error.is_cancelled()));

    assert!(eventually(&dropped).await, "the tool's future was dropped");
    assert!(!finished.load(Ordering::SeqCst), "the tool never finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_kickoff_cancels_every_concurrent_call() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicUsize::new(0));
    let (count, inside) = (dropped.clone(), running.clone());
    let slow = Tool::dynamic(
        "slow",
        "Takes a minute",
        json!({"type": "object"}),
        move |_| {
            let (count, inside) = (count.clone(), inside.clone());
            async move {
                struct Counted(Arc<AtomicUsize>);
                impl Drop for Counted {
                    fn drop(&mut self) {
                        self.0.fetch_add(1, Ordering::SeqCst);
                    }
                }
                let _guard = Counted(count);
                inside.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<_, String>(json!("finished"))
            }
        },
    );
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls([
                ("slow", json!({})),
                ("slow", json!({})),
                ("slow", json!({})),
            ])
            .answer("done"),
    );
    let crew = one_task_crew(agent("Clerk", vec![slow], &llm))
        .build()
        .expect("builds");
    let kickoff = tokio::spawn(async move { crew.kickoff(()).await });
    // Once the three calls are inside the tool, cancel the kickoff: its
    // join set of the turn's calls is dropped, every task aborted.
    let deadline = Instant::now() + Duration::from_secs(5);
    while running.load(Ordering::SeqCst) < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    kickoff.abort();
    assert!(kickoff.await.is_err_and(|error| error.is_cancelled()));
    let deadline = Instant::now() + Duration::from_secs(5);
    while dropped.load(Ordering::SeqCst) < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        running.load(Ordering::SeqCst),
        3,
        "the three calls ran at once"
    );
    assert_eq!(dropped.load(Ordering::SeqCst), 3, "all three were dropped");
}

#[tokio::test(flavor = "current_thread")]
async fn a_synchronous_tool_never_blocks_the_runtime() {
    // On a single-threaded runtime: the synchronous tool waits for a value
    // only the async tool of the same turn sends. Were the synchronous
    // tool run on the runtime's thread, the async one could never run.
    let (sender, receiver) = std::sync::mpsc::channel::<u32>();
    let receiver = Mutex::new(receiver);
    let waits = Tool::dynamic(
        "waits",
        "Waits for a value",
        json!({"type": "object"}),
        move |_| {
            let value = receiver
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .recv_timeout(Duration::from_secs(10))
                .map_err(|error| error.to_string())?;
            Ok::<_, String>(json!(format!("got {value}")))
        },
    );
    let sender = Mutex::new(sender);
    let sends = Tool::dynamic(
        "sends",
        "Sends a value",
        json!({"type": "object"}),
        move |_| {
            let sent = sender
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .send(42)
                .map_err(|error| error.to_string());
            async move {
                tokio::task::yield_now().await;
                sent.map(|()| json!("sent"))
            }
        },
    );
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls([("waits", json!({})), ("sends", json!({}))])
            .answer("done"),
    );
    let crew = one_task_crew(agent("Clerk", vec![waits, sends], &llm))
        .build()
        .expect("builds");
    crew.kickoff(()).await.expect("runs");
    assert_eq!(llm.requests()[1].observations(), ["got 42", "sent"]);
}

#[derive(serde::Deserialize, crew_runtime::schemars::JsonSchema)]
#[schemars(crate = "crew_runtime::schemars")]
struct Query {
    query: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_async_tools_are_awaited() {
    let search = Tool::typed("search", "Searches", |args: Query| async move {
        tokio::time::sleep(Duration::from_millis(1)).await;
        Ok::<_, String>(format!("results for {}", args.query))
    });
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("search", json!({"query": "rust"}))
            .answer("done"),
    );
    let crew = one_task_crew(agent("Researcher", vec![search.into()], &llm))
        .build()
        .expect("builds");
    crew.kickoff(()).await.expect("runs");
    assert_eq!(llm.requests()[1].observations(), ["results for rust"]);
}

#[test]
fn a_tool_past_its_timeout_is_an_error_the_agent_sees() {
    let hang = Tool::dynamic(
        "hang",
        "Never answers",
        json!({"type": "object"}),
        |_| async {
            std::future::pending::<()>().await;
            Ok::<_, String>(json!("unreachable"))
        },
    )
    .with_timeout(Duration::from_millis(30));
    let stuck = Tool::dynamic("stuck", "Blocks", json!({"type": "object"}), |_| {
        std::thread::sleep(Duration::from_millis(300));
        Ok::<_, String>(json!("late"))
    });
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls([("hang", json!({})), ("stuck", json!({}))])
            .answer("done"),
    );
    let crew = one_task_crew(agent("Clerk", vec![hang, stuck], &llm))
        .tool_timeout(Duration::from_millis(50))
        .build()
        .expect("builds");
    let output = crew.kickoff_blocking(()).expect("the run goes on");
    assert_eq!(output.raw, "done");
    assert_eq!(
        llm.requests()[1].observations(),
        [
            "Error executing tool: timed out after 30ms",
            "Error executing tool: timed out after 50ms"
        ]
    );
}

#[test]
fn a_model_past_its_timeout_fails_the_kickoff() {
    let llm = Arc::new(
        ScriptedLlm::new()
            .latency(Duration::from_secs(60))
            .answer("late"),
    );
    let crew = one_task_crew(agent("Writer", vec![], &llm))
        .model_timeout(Duration::from_millis(20))
        .build()
        .expect("builds");
    match crew.kickoff_blocking(()) {
        Err(CrewError::Model { source, .. }) => {
            assert_eq!(source, LlmError::Timeout(Duration::from_millis(20)));
        }
        other => panic!("expected a model timeout, got {other:?}"),
    }
}

#[test]
fn a_panicking_model_is_a_model_error() {
    let llm = Arc::new(ScriptedLlm::new().answer_with(|_| panic!("model broke")));
    // Not asked again: the panic is the model's last word.
    let writer = Agent::builder("Writer")
        .llm(llm.clone())
        .max_retry_limit(0)
        .build();
    let crew = one_task_crew(writer).build().expect("builds");
    match crew.kickoff_blocking(()) {
        Err(CrewError::Model { source, .. }) => {
            assert_eq!(source, LlmError::Panicked("model broke".to_owned()));
        }
        other => panic!("expected a model error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_approval_hook_waits_for_an_answer_from_another_task() {
    let (ask, mut asked) =
        tokio::sync::mpsc::unbounded_channel::<(String, tokio::sync::oneshot::Sender<bool>)>();
    let registry = fresh_registry();
    registry
        .register_async_hook(
            PRE_TOOL_CALL,
            crew_runtime::hooks_core::async_hook(move |ctx: &mut ToolCallHookContext| {
                let ask = ask.clone();
                Box::pin(async move {
                    let (answer, reply) = tokio::sync::oneshot::channel();
                    ask.send((ctx.tool_name().to_owned(), answer))
                        .map_err(|_| HookAborted::with_reason("no approver"))?;
                    match reply.await {
                        Ok(true) => Ok(()),
                        _ => Err(HookAborted::new("not approved", "approver")),
                    }
                })
            }),
        )
        .expect("registers");
    // The approver: a separate task, as a web or chat service would be.
    let approver = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some((tool, reply)) = asked.recv().await {
            let _ = reply.send(tool == "read");
            seen.push(tool);
        }
        seen
    });
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("read", json!({}))
            .call("delete", json!({}))
            .answer("done"),
    );
    let clerk = agent(
        "Clerk",
        vec![
            Tool::dynamic("read", "Reads", json!({"type": "object"}), |_| async {
                Ok::<_, String>(json!("contents"))
            }),
            Tool::dynamic("delete", "Deletes", json!({"type": "object"}), |_| async {
                Ok::<_, String>(json!("deleted"))
            }),
        ],
        &llm,
    );
    let crew = Crew::builder()
        .agent(clerk.clone())
        .task(Task::builder("Tidy up").agent(&clerk).build())
        .global_registry(registry.clone())
        .build()
        .expect("builds");
    crew.kickoff(()).await.expect("runs");
    // Dropping the hook drops its sender: the approver's queue ends.
    registry.clear_all_hooks();
    drop(crew);
    let requests = llm.requests();
    assert_eq!(requests[1].observations(), ["contents"]);
    assert_eq!(
        requests[2].observations(),
        ["Tool execution blocked by hook. Tool: delete"]
    );
    let seen = tokio::time::timeout(Duration::from_secs(5), approver)
        .await
        .expect("the approver stops once the hook is gone")
        .expect("the approver task completes");
    assert_eq!(seen, ["read", "delete"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_text_reaches_listeners_in_order_before_post_model_call() {
    let llm = Arc::new(
        ScriptedLlm::new()
            .streaming()
            .answer("Rust is fast and safe."),
    );
    let order: Log<String> = log();
    let events = order.clone();
    let crew = one_task_crew(agent("Writer", vec![], &llm))
        .build()
        .expect("builds");
    crew.events().subscribe(move |event| {
        if let Event::LlmStreamChunk(chunk) = event {
            push(&events, format!("chunk {}", chunk.chunk));
        }
    });
    let hooked = order.clone();
    crew.hooks()
        .register_hook(POST_MODEL_CALL, move |ctx: &mut LlmCallHookContext| {
            let text = ctx
                .response
                .as_ref()
                .map(|r| r.content.clone())
                .unwrap_or_default();
            push(&hooked, format!("post {text}"));
        })
        .expect("registers");
    let output = crew.kickoff(()).await.expect("runs");
    assert_eq!(output.raw, "Rust is fast and safe.");
    assert_eq!(
        take(&order),
        [
            "chunk Rust ",
            "chunk is ",
            "chunk fast ",
            "chunk and ",
            "chunk safe.",
            "post Rust is fast and safe."
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_text_of_a_redacting_crew_goes_out_by_line_cleaned() {
    let llm = Arc::new(
        ScriptedLlm::new()
            .streaming()
            .answer("The config:\npassword: hunter2\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabcDEF123\n-----END RSA PRIVATE KEY-----\ndone"),
    );
    let chunks: Log<String> = log();
    let sink = chunks.clone();
    let crew = one_task_crew(agent("Writer", vec![], &llm))
        .redact_with(crew_runtime::guards::SecretRedactor::new())
        .build()
        .expect("builds");
    crew.events().subscribe(move |event| {
        if let Event::LlmStreamChunk(chunk) = event {
            push(&sink, chunk.chunk.clone());
        }
    });
    crew.kickoff(()).await.expect("runs");
    let streamed: String = take(&chunks).concat();
    for secret in ["hunter2", "MIIEowIBAAKCAQEA7", "abcDEF123"] {
        assert!(!streamed.contains(secret), "{secret} leaked: {streamed}");
    }
    assert!(streamed.starts_with("The config:\n"), "{streamed}");
    assert!(streamed.ends_with("done"), "{streamed}");
}

/// Spans as a subscriber sees them: name, parent's name, fields.
#[derive(Default, Clone)]
struct SpanLog(Log<SeenSpan>);

/// A span's name, its parent's name and its fields.
type SeenSpan = (String, Option<String>, String);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push_str(&format!("{}={value} ", field.name()));
    }
}

impl<S> tracing_subscriber::Layer<S> for SpanLog
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attributes: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let parent = ctx
            .span(id)
            .and_then(|span| span.parent())
            .map(|parent| parent.name().to_owned());
        let mut fields = Fields(String::new());
        attributes.record(&mut fields);
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push((
            attributes.metadata().name().to_owned(),
            parent,
            fields.0,
        ));
    }
}

#[test]
fn spans_nest_kickoff_task_model_call_and_tool_call_with_gen_ai_fields() {
    use tracing_subscriber::layer::SubscriberExt;

    let spans = SpanLog::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let received = log();
    let crew = || {
        let llm = Arc::new(
            ScriptedLlm::new()
                .named("scripted-model")
                .call("web_search", json!({"query": "rust"}))
                .answer("done"),
        );
        one_task_crew(agent("Researcher", vec![search_tool(&received)], &llm))
            .build()
            .expect("builds")
    };
    tracing::subscriber::with_default(subscriber, || {
        // tracing caches each callsite's interest once for the process,
        // and with one subscriber installed it asks the registering
        // thread's: a sibling test running a kickoff on a thread with none
        // may register the run's spans as never enabled
        // (tokio-rs/tracing#3611). A first kickoff registers them all, the
        // cache is rebuilt from this thread, and the second is observed.
        crew().kickoff_blocking(()).expect("runs");
        tracing::callsite::rebuild_interest_cache();
        spans
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        crew().kickoff_blocking(()).expect("runs");
    });
    let spans = spans
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let find = |name: &str| {
        spans
            .iter()
            .filter(|(span, _, _)| span == name)
            .cloned()
            .collect::<Vec<_>>()
    };
    let kickoff = find("crew.kickoff");
    assert_eq!(kickoff.len(), 1, "{spans:?}");
    let task = find("invoke_agent");
    assert_eq!(task.len(), 1);
    assert_eq!(task[0].1.as_deref(), Some("crew.kickoff"));
    assert!(
        task[0].2.contains("gen_ai.operation.name=invoke_agent"),
        "{:?}",
        task[0]
    );
    assert!(
        task[0].2.contains("gen_ai.agent.name=Researcher"),
        "{:?}",
        task[0]
    );
    let chats = find("chat");
    assert_eq!(chats.len(), 2, "two model calls");
    for chat in &chats {
        assert_eq!(chat.1.as_deref(), Some("invoke_agent"));
        assert!(
            chat.2.contains("gen_ai.request.model=scripted-model"),
            "{chat:?}"
        );
    }
    let tools = find("execute_tool");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].1.as_deref(), Some("invoke_agent"));
    assert!(
        tools[0].2.contains("gen_ai.tool.name=web_search"),
        "{:?}",
        tools[0]
    );
    assert!(
        tools[0].2.contains("gen_ai.tool.call.id=call_1"),
        "{:?}",
        tools[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_async_hook_is_dropped_with_the_kickoff() {
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let (flag, began) = (dropped.clone(), started.clone());
    let registry = fresh_registry();
    registry
        .register_async_hook(
            PRE_TOOL_CALL,
            crew_runtime::hooks_core::async_hook(move |_: &mut ToolCallHookContext| {
                let guard = DropFlag(flag.clone());
                let began = began.clone();
                Box::pin(async move {
                    let _guard = guard;
                    began.store(true, Ordering::SeqCst);
                    std::future::pending::<()>().await;
                })
            }),
        )
        .expect("registers");
    let received = log();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .answer("done"),
    );
    let researcher = agent("Researcher", vec![search_tool(&received)], &llm);
    let crew = Crew::builder()
        .agent(researcher.clone())
        .task(Task::builder("Research").agent(&researcher).build())
        .global_registry(registry)
        .build()
        .expect("builds");
    let kickoff = tokio::spawn(async move { crew.kickoff(()).await });
    assert!(eventually(&started).await, "the hook started");
    kickoff.abort();
    assert!(kickoff.await.is_err_and(|error| error.is_cancelled()));
    assert!(eventually(&dropped).await, "the hook's future was dropped");
    assert!(take(&received).is_empty(), "the tool never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_calls_runs_at_most_the_concurrency_limit_at_once() {
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (inside, peak) = (running.clone(), most.clone());
    let work = Tool::dynamic("work", "Works", json!({"type": "object"}), move |_| {
        let (inside, peak) = (inside.clone(), peak.clone());
        async move {
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(2)).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            Ok::<_, String>(json!("done"))
        }
    });
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls((0..40).map(|n| ("work", json!({ "n": n }))))
            .answer("done"),
    );
    let crew = one_task_crew(agent("Worker", vec![work], &llm))
        .max_concurrent_tool_calls(3)
        .build()
        .expect("builds");
    crew.kickoff(()).await.expect("runs");
    assert_eq!(llm.requests()[1].observations().len(), 40);
    assert_eq!(most.load(Ordering::SeqCst), 3, "never more than 3 at once");
}

/// Rule 4: PRE and POST of one model call see the same hooks, also when the
/// model's answer is awaited in between and the registry changes meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_04_a_model_call_keeps_its_snapshot_across_the_awaited_answer() {
    let registry = fresh_registry();
    let posts = Arc::new(AtomicUsize::new(0));
    let counted = posts.clone();
    registry
        .register_hook(POST_MODEL_CALL, move |_: &mut LlmCallHookContext| {
            counted.fetch_add(1, Ordering::SeqCst);
        })
        .expect("registers");
    let changer = registry.clone();
    let llm = Arc::new(
        ScriptedLlm::new()
            .latency(Duration::from_millis(5))
            .answer_with(move |_| {
                // While the model answers, the POST hook is removed.
                changer.clear_hooks(POST_MODEL_CALL);
                "done".to_owned()
            }),
    );
    let writer = agent("Writer", vec![], &llm);
    let crew = Crew::builder()
        .agent(writer.clone())
        .task(Task::builder("Write").agent(&writer).build())
        .global_registry(registry.clone())
        .build()
        .expect("builds");
    crew.kickoff(()).await.expect("runs");
    assert_eq!(posts.load(Ordering::SeqCst), 1, "the call's POST hook ran");
    assert!(registry.get_hooks(POST_MODEL_CALL).is_empty());
}
