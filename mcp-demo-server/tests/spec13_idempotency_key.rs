//! SPEC §13 "Effect once", over MCP: a call's idempotency key reaches an
//! MCP server in the `_meta` of its `tools/call` request, under
//! `dev.crewhooks/idempotency-key`; a call without a key sends no such
//! entry. Against this crate's server over stdio (its binary), whose
//! `echo_meta` tool answers with the `_meta` it received.

use std::sync::Arc;
use std::time::Duration;

use crew_runtime::IdempotencyKey;
use crew_runtime::mcp::McpServer;
use crew_runtime::prelude::*;
use crew_runtime::serde_json::Map;

/// Every wait below ends well within this.
const BOUND: Duration = Duration::from_secs(20);

async fn bounded<T>(work: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(BOUND, work).await {
        Ok(done) => done,
        Err(_) => panic!("hung past {BOUND:?}"),
    }
}

/// The demo server's binary over stdio, confined to a fresh folder.
async fn stdio_server() -> (McpServer, tempfile::TempDir) {
    let root = tempfile::tempdir().expect("a temporary directory");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-demo-server"));
    command.arg("--root").arg(root.path());
    let server = bounded(McpServer::stdio("demo", command).connect())
        .await
        .expect("the stdio server connects");
    (server, root)
}

/// The `_meta` the server got for one `echo_meta` call of a crew whose
/// PRE hook leaves `key` (if any) in the call's extensions, as a durable
/// kickoff's layer does.
async fn meta_sent(server: &McpServer, key: Option<IdempotencyKey>) -> Map<String, Value> {
    let model = Arc::new(
        ScriptedLlm::new()
            .call("echo_meta", json!({}))
            .answer("done"),
    );
    let agent = Agent::builder("Clerk")
        .llm(Arc::clone(&model) as Arc<dyn Llm>)
        .tools(server.tools())
        .build();
    let crew = Crew::builder()
        .agent(agent.clone())
        .task(Task::builder("Echo").agent(&agent).build())
        .global_registry(Arc::new(HookRegistry::new()))
        .hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            if let Some(key) = &key {
                ctx.extensions.insert(key.clone());
            }
        })
        .build()
        .expect("the crew builds");
    let output = bounded(crew.kickoff(Inputs::new()))
        .await
        .expect("the crew runs");
    assert_eq!(output.raw, "done");
    let observations = model.observations();
    let [observation] = observations.as_slice() else {
        panic!("one call, one observation: {observations:?}");
    };
    match serde_json::from_str(observation) {
        Ok(Value::Object(meta)) => meta,
        other => panic!("echo_meta answers a JSON object, got {observation:?} ({other:?})"),
    }
}

/// A key as a durable kickoff's journal records it (any text reads back
/// as a key; deriving one needs the `durable` feature, which this crate's
/// tests leave off).
fn recorded_key(text: &str) -> IdempotencyKey {
    serde_json::from_value(json!(text)).expect("a key reads back from its text")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec13_an_mcp_call_sends_its_idempotency_key_in_meta() {
    let (server, _root) = stdio_server().await;
    let key = recorded_key("5b1f0c7e9a2d4e6f8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f");
    let meta = meta_sent(&server, Some(key.clone())).await;
    assert_eq!(
        IdempotencyKey::MCP_META_KEY,
        "dev.crewhooks/idempotency-key"
    );
    assert_eq!(
        meta.get(IdempotencyKey::MCP_META_KEY),
        Some(&json!(key.as_str())),
        "{meta:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec13_an_mcp_call_without_a_key_sends_no_key_entry() {
    let (server, _root) = stdio_server().await;
    let meta = meta_sent(&server, None).await;
    assert!(
        !meta.contains_key(IdempotencyKey::MCP_META_KEY),
        "no key, no entry: {meta:?}"
    );
    // Two calls, one with a key and one without, on one session: the key
    // of the first does not leak into the second.
    let key = recorded_key("first-call-key");
    let with_key = meta_sent(&server, Some(key)).await;
    assert_eq!(
        with_key.get(IdempotencyKey::MCP_META_KEY),
        Some(&json!("first-call-key"))
    );
    let after = meta_sent(&server, None).await;
    assert!(
        !after.contains_key(IdempotencyKey::MCP_META_KEY),
        "{after:?}"
    );
}
