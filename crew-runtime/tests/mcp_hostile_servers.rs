//! SPEC §9, bad input: MCP servers that break the protocol, never answer,
//! list unusable tools or die mid-run get a clear error within a timeout;
//! nothing panics or hangs.
//!
//! Each server here is a few lines of hand-written JSON-RPC on an
//! in-process pipe, so that every misbehavior is exact.
#![cfg(feature = "mcp")]

use std::sync::Arc;
use std::time::Duration;

use crew_runtime::mcp::{McpError, McpServer};
use crew_runtime::prelude::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

/// What a fake server answers to one request: raw lines to write back.
type Script = Box<dyn Fn(&Value) -> Vec<String> + Send + Sync>;

/// Starts a fake server on a pipe; returns the client's ends.
fn fake_server(script: Script) -> (DuplexStream, DuplexStream) {
    let (client_reads, mut server_writes) = tokio::io::duplex(1 << 16);
    let (server_reads, client_writes) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        let mut lines = BufReader::new(server_reads).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            for reply in script(&message) {
                if server_writes.write_all(reply.as_bytes()).await.is_err()
                    || server_writes.write_all(b"\n").await.is_err()
                {
                    return;
                }
            }
        }
    });
    (client_reads, client_writes)
}

fn answer(request: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": request["id"], "result": result}).to_string()
}

fn initialized(request: &Value) -> String {
    answer(
        request,
        json!({
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fake", "version": "0"}
        }),
    )
}

/// A well-behaved handshake; `tools/list` and `tools/call` as `list` and
/// `call` say.
fn server_with(
    list: impl Fn(&Value) -> Value + Send + Sync + 'static,
    call: impl Fn(&Value) -> Option<Value> + Send + Sync + 'static,
) -> Script {
    Box::new(move |message| match message["method"].as_str() {
        Some("initialize") => vec![initialized(message)],
        Some("tools/list") => vec![answer(message, list(message))],
        Some("tools/call") => call(message)
            .map(|result| vec![answer(message, result)])
            .unwrap_or_default(),
        Some("ping") => vec![answer(message, json!({}))],
        _ => Vec::new(),
    })
}

fn object_tool(name: &str) -> Value {
    json!({"name": name, "description": "a tool", "inputSchema": {"type": "object", "properties": {}}})
}

async fn connect(script: Script, timeout: Duration) -> Result<McpServer, McpError> {
    let (reader, writer) = fake_server(script);
    McpServer::io("fake", reader, writer)
        .connect_timeout(timeout)
        .connect()
        .await
}

/// Every connection attempt below must end well within this.
const BOUND: Duration = Duration::from_secs(10);

async fn bounded<T>(work: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(BOUND, work).await {
        Ok(done) => done,
        Err(_) => panic!("hung past {BOUND:?}"),
    }
}

#[tokio::test]
async fn spec9_a_server_that_answers_garbage_fails_the_handshake() {
    let garbage: Script = Box::new(|_| {
        vec![
            "this is not json".to_owned(),
            r#"{"jsonrpc": "2.0", "id": "#.to_owned(),
            "\u{1b}[2J".to_owned(),
        ]
    });
    let error = bounded(connect(garbage, Duration::from_secs(2)))
        .await
        .expect_err("garbage is no handshake");
    let message = error.to_string();
    assert!(
        matches!(error, McpError::Handshake { .. } | McpError::Timeout { .. }),
        "{message}"
    );
    assert!(message.contains("MCP server `fake`"), "{message}");
    assert!(
        !message.contains('\u{1b}'),
        "escape sequences are quoted: {message}"
    );
}

#[tokio::test]
async fn spec9_a_server_that_never_answers_times_out_naming_the_stage() {
    let silent: Script = Box::new(|_| Vec::new());
    let error = bounded(connect(silent, Duration::from_millis(300)))
        .await
        .expect_err("silence is no handshake");
    assert!(
        matches!(
            error,
            McpError::Timeout {
                stage: "handshake",
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("no answer to the handshake within 300ms"),
        "{error}"
    );

    let mute_listing = server_with(|_| json!(null), |_| None);
    let mute_listing: Script = Box::new(move |message| {
        if message["method"] == "tools/list" {
            Vec::new()
        } else {
            mute_listing(message)
        }
    });
    let error = bounded(connect(mute_listing, Duration::from_millis(300)))
        .await
        .expect_err("an unanswered listing");
    assert!(
        matches!(
            error,
            McpError::Timeout {
                stage: "tool listing",
                ..
            }
        ),
        "{error}"
    );
}

#[tokio::test]
async fn spec9_a_schema_that_is_not_an_object_is_refused_by_name() {
    let list = |_: &Value| {
        json!({"tools": [
            object_tool("fine"),
            {"name": "broken", "inputSchema": {"type": "string"}}
        ]})
    };
    let error = bounded(connect(server_with(list, |_| None), BOUND))
        .await
        .expect_err("a string schema");
    assert!(
        matches!(&error, McpError::InvalidSchema { tool, .. } if tool == "broken"),
        "{error}"
    );
    assert!(error.to_string().contains("only([...])"), "{error}");

    // Leaving the tool out makes the server usable.
    let (reader, writer) = fake_server(server_with(list, |_| None));
    let server = bounded(
        McpServer::io("fake", reader, writer)
            .only(["fine"])
            .connect(),
    )
    .await
    .expect("the usable tool alone");
    assert_eq!(server.tools().len(), 1);
}

#[tokio::test]
async fn spec9_a_listing_that_is_not_a_listing_is_a_clear_error() {
    let list = |_: &Value| json!({"tools": [{"name": "no_schema"}]});
    let error = bounded(connect(server_with(list, |_| None), Duration::from_secs(2)))
        .await
        .expect_err("a tool without a schema");
    assert!(matches!(error, McpError::Listing { .. }), "{error}");
    assert!(
        error.to_string().contains("MCP server `fake`: listing its tools failed: it answered `tools/list` with something that is not a tool listing"),
        "{error}"
    );
}

#[tokio::test]
async fn spec9_tools_that_collide_once_normalized_are_refused() {
    let list = |_: &Value| json!({"tools": [object_tool("read-file"), object_tool("read_file")]});
    let error = bounded(connect(server_with(list, |_| None), BOUND))
        .await
        .expect_err("two tools named read_file");
    let McpError::CollidingTools {
        first,
        second,
        name,
        ..
    } = &error
    else {
        panic!("{error}")
    };
    assert_eq!(
        (first.as_str(), second.as_str(), name.as_str()),
        ("read-file", "read_file", "read_file")
    );

    let nameless = |_: &Value| json!({"tools": [object_tool("???")]});
    let error = bounded(connect(server_with(nameless, |_| None), BOUND))
        .await
        .expect_err("a name without letters");
    assert!(matches!(error, McpError::InvalidToolName { .. }), "{error}");
}

#[tokio::test]
async fn spec9_listings_are_read_page_by_page_and_endless_paging_is_refused() {
    let paged = |request: &Value| match request["params"]["cursor"].as_str() {
        None => json!({"tools": [object_tool("one")], "nextCursor": "2"}),
        Some("2") => json!({"tools": [object_tool("two")], "nextCursor": "3"}),
        Some(_) => json!({"tools": [object_tool("three")]}),
    };
    let server = bounded(connect(server_with(paged, |_| None), BOUND))
        .await
        .expect("three pages");
    let names: Vec<String> = server.tools().iter().map(|t| t.name().to_owned()).collect();
    assert_eq!(names, ["one", "two", "three"]);

    let looping = |_: &Value| json!({"tools": [], "nextCursor": "again"});
    let error = bounded(connect(server_with(looping, |_| None), BOUND))
        .await
        .expect_err("a cursor that repeats");
    assert!(
        error.to_string().contains("page cursor \"again\" twice"),
        "{error}"
    );
}

#[tokio::test]
async fn spec9_only_names_tools_the_server_has() {
    let list = |_: &Value| json!({"tools": [object_tool("one")]});
    let (reader, writer) = fake_server(server_with(list, |_| None));
    let error = bounded(
        McpServer::io("fake", reader, writer)
            .only(["one", "two"])
            .connect(),
    )
    .await
    .expect_err("no tool two");
    assert!(
        matches!(&error, McpError::UnknownTools { missing, .. } if missing == &["two"]),
        "{error}"
    );
}

/// Runs a crew whose agent calls `tool` of `server` with `{}` once, then
/// answers; returns the observations the model got.
async fn observe(server: &McpServer, tool: &str) -> Vec<String> {
    observe_calls(server, tool, 1, Duration::from_millis(500)).await
}

/// Runs a crew whose agent calls `tool` of `server` with `{}` `times`
/// times in a row, each within `timeout`, then answers; returns the whole
/// observations the model got.
async fn observe_calls(
    server: &McpServer,
    tool: &str,
    times: usize,
    timeout: Duration,
) -> Vec<String> {
    let mut script = ScriptedLlm::new();
    for _ in 0..times {
        script = script.call(tool, json!({}));
    }
    let model = Arc::new(script.answer("done"));
    let agent = Agent::builder("Caller")
        .llm(Arc::clone(&model) as Arc<dyn Llm>)
        .tools(server.tools())
        .build();
    let crew = Crew::builder()
        .agent(agent.clone())
        .task(Task::builder("Call it").agent(&agent).build())
        .global_registry(Arc::new(HookRegistry::new()))
        .tool_timeout(timeout)
        .max_observation_bytes(usize::MAX)
        .build()
        .expect("the crew builds");
    let output = bounded(crew.kickoff(Inputs::new())).await;
    assert!(output.is_ok(), "the run goes on: {output:?}");
    model.observations()
}

#[tokio::test]
async fn spec9_a_server_that_never_answers_a_call_fails_it_at_the_timeout() {
    let list = |_: &Value| json!({"tools": [object_tool("stall")]});
    let server = bounded(connect(server_with(list, |_| None), BOUND))
        .await
        .expect("connects");
    let seen = observe(&server, "stall").await;
    assert_eq!(seen, ["Error executing tool: timed out after 500ms"]);
}

#[tokio::test]
async fn spec9_a_server_that_dies_mid_run_fails_the_calls_after_it() {
    let list = |_: &Value| json!({"tools": [object_tool("echo")]});
    let (reader, writer) = fake_server(server_with(list, |_| None));
    let server = bounded(McpServer::io("fake", reader, writer).connect())
        .await
        .expect("connects");
    // The server goes away: the session's streams end.
    server.shutdown(Duration::from_secs(2)).await;
    let seen = observe(&server, "echo").await;
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].starts_with("Error executing tool: the MCP server `fake` is gone"),
        "{seen:?}"
    );
}

#[tokio::test]
async fn spec9_an_out_of_protocol_call_result_fails_the_call() {
    let list = |_: &Value| json!({"tools": [object_tool("odd")]});
    let odd = |_: &Value| Some(json!({"content": "not a list"}));
    let server = bounded(connect(server_with(list, odd), BOUND))
        .await
        .expect("connects");
    let seen = observe(&server, "odd").await;
    assert_eq!(seen.len(), 1);
    assert!(seen[0].starts_with("Error executing tool: "), "{seen:?}");
}

#[tokio::test]
async fn spec9_a_server_error_reply_fails_the_call_with_its_message() {
    let list = |_: &Value| json!({"tools": [object_tool("refuse")]});
    let script = server_with(list, |_| None);
    let script: Script = Box::new(move |message| {
        if message["method"] == "tools/call" {
            vec![json!({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32602, "message": "no such file\u{1b}[31m"}}).to_string()]
        } else {
            script(message)
        }
    });
    let server = bounded(connect(script, BOUND)).await.expect("connects");
    let seen = observe(&server, "refuse").await;
    assert_eq!(
        seen,
        [r"Error executing tool: the MCP server `fake` refused the call: no such file\x1b[31m"]
    );
}

#[cfg(unix)]
#[tokio::test]
async fn spec9_a_server_that_exits_at_once_is_quoted_from_its_standard_error() {
    // Bytes that are not UTF-8, a flood of output without a line end, then
    // the line that explains: the reading never stalls, the tail holds it.
    let mut command = tokio::process::Command::new("sh");
    command.arg("-c").arg(
        "printf '\\377\\376 not utf-8\\n' >&2; \
         head -c 300000 /dev/zero | tr '\\0' x >&2; echo >&2; \
         echo 'fatal: no config file' >&2; exit 1",
    );
    let error = bounded(McpServer::stdio("broken", command).connect())
        .await
        .expect_err("the server exits");
    let message = error.to_string();
    assert!(matches!(error, McpError::Handshake { .. }), "{message}");
    assert!(message.contains("fatal: no config file"), "{message}");
    assert!(message.contains("\u{fffd}\u{fffd} not utf-8"), "{message}");
    assert!(
        message.len() < 8_000,
        "lines are cut: {} bytes",
        message.len()
    );
}

#[test]
fn spec9_connecting_outside_a_tokio_runtime_is_an_error_not_a_panic() {
    let (client, _server) = tokio::io::duplex(64);
    let (reader, writer) = tokio::io::split(client);
    let error = futures_executor::block_on(McpServer::io("fake", reader, writer).connect())
        .expect_err("no runtime");
    assert!(matches!(error, McpError::InvalidConfig { .. }), "{error}");
    assert!(error.to_string().contains("tokio runtime"), "{error}");
}

#[tokio::test]
async fn spec9_urls_the_http_transport_cannot_reach_are_refused_before_connecting() {
    let https = McpServer::http("remote", "https://mcp.example.com/mcp")
        .connect()
        .await
        .expect_err("no TLS");
    assert!(matches!(https, McpError::InvalidConfig { .. }), "{https}");
    assert!(
        https
            .to_string()
            .contains("https:// MCP servers are not supported yet"),
        "{https}"
    );
    let other = McpServer::http("remote", "ftp://mcp.example.com")
        .connect()
        .await
        .expect_err("not http");
    assert!(
        other.to_string().contains("is not an http:// URL"),
        "{other}"
    );
}

/// Longer than the most one message may hold (16 MiB).
const OVERSIZED: usize = 17 * 1024 * 1024;

/// What the model reads once a server sent a message past the limit.
const TOO_LONG: &str = "Error executing tool: the MCP server `fake` sent a message larger than \
                        16 MiB, the most one message may hold; the session is closed and its \
                        tools cannot run";

/// A server whose tool `dump` answers with `bytes` bytes of text.
fn dumping_server(bytes: usize) -> Script {
    let list = |_: &Value| json!({"tools": [object_tool("dump")]});
    server_with(list, move |_| {
        Some(json!({"content": [{"type": "text", "text": "x".repeat(bytes)}]}))
    })
}

#[tokio::test]
async fn spec9_an_oversized_result_fails_the_call_at_once() {
    let server = bounded(connect(dumping_server(OVERSIZED), BOUND))
        .await
        .expect("connects");
    // The call may wait a minute: failing at once is the server's
    // oversized answer, not a timeout. The call after it fails the same
    // way, without reaching the closed session.
    let seen = observe_calls(&server, "dump", 2, Duration::from_secs(60)).await;
    assert_eq!(seen, [TOO_LONG, TOO_LONG]);
}

#[tokio::test]
async fn spec9_a_large_result_within_the_limit_reaches_the_agent() {
    let server = bounded(connect(dumping_server(1024 * 1024), BOUND))
        .await
        .expect("connects");
    let seen = observe_calls(&server, "dump", 2, Duration::from_secs(60)).await;
    assert_eq!(seen.len(), 2);
    for observation in &seen {
        assert!(
            observation.len() == 1024 * 1024 && observation.bytes().all(|b| b == b'x'),
            "{}",
            &observation[..observation.len().min(200)]
        );
    }
}

#[tokio::test]
async fn spec9_a_message_past_a_chosen_limit_fails_the_handshake_naming_it() {
    let chatty: Script = Box::new(|message| {
        let mut reply = json!({
            "jsonrpc": "2.0",
            "id": message["id"],
            "result": {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "x".repeat(4096), "version": "0"}
            }
        });
        if message["method"] != "initialize" {
            reply = json!({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}});
        }
        vec![reply.to_string()]
    });
    let (reader, writer) = fake_server(chatty);
    let error = bounded(
        McpServer::io("fake", reader, writer)
            .max_message_bytes(1024)
            .connect_timeout(Duration::from_secs(60))
            .connect(),
    )
    .await
    .expect_err("a 4 KiB answer past a 1 KiB limit");
    assert!(matches!(error, McpError::Handshake { .. }), "{error}");
    assert_eq!(
        error.to_string(),
        "MCP server `fake`: the handshake failed: it sent a message larger than 1 KiB, the most \
         one message may hold; the session is closed"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn spec9_an_oversized_result_from_a_stdio_server_fails_the_call_at_once() {
    // A stdio server in a few lines of shell: it answers the handshake and
    // the listing, then answers a call of `dump` with one line of 17 MiB,
    // and waits for its input to close.
    let script = r#"
        id_of() { printf '%s\n' "$1" | sed -n 's/.*"id":\([0-9]*\).*/\1/p'; }
        while read -r line; do
          id=$(id_of "$line")
          case "$line" in
            *'"method":"initialize"'*)
              version=$(printf '%s\n' "$line" | sed -n 's/.*"protocolVersion":"\([^"]*\)".*/\1/p')
              printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"%s","capabilities":{"tools":{}},"serverInfo":{"name":"big","version":"0"}}}\n' "$id" "$version" ;;
            *'"method":"tools/list"'*)
              printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"dump","inputSchema":{"type":"object","properties":{}}}]}}\n' "$id" ;;
            *'"method":"tools/call"'*)
              printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"' "$id"
              head -c 17825792 /dev/zero | tr '\0' x
              printf '"}]}}\n' ;;
          esac
        done
    "#;
    let mut command = tokio::process::Command::new("sh");
    command.arg("-c").arg(script);
    let server = bounded(McpServer::stdio("big", command).connect())
        .await
        .expect("connects");
    let seen = observe_calls(&server, "dump", 1, Duration::from_secs(60)).await;
    assert_eq!(
        seen,
        [
            "Error executing tool: the MCP server `big` sent a message larger than 16 MiB, the \
          most one message may hold; the session is closed and its tools cannot run"
        ]
    );
}

/// A streamable HTTP server on 127.0.0.1 that answers each JSON-RPC
/// request with the body `script` gives: JSON, or server-sent events when
/// it starts with `data:`. A notification gets `202 Accepted`. Returns
/// the server's URL.
fn fake_http_server(script: Script) -> String {
    let server = tiny_http::Server::http("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let port = server.server_addr().to_ip().expect("an IP listener").port();
    std::thread::spawn(move || {
        while let Ok(Some(mut request)) = server.recv_timeout(BOUND) {
            let mut body = String::new();
            let _ = request.as_reader().read_to_string(&mut body);
            let message = serde_json::from_str::<Value>(&body).unwrap_or(Value::Null);
            let reply = if *request.method() != tiny_http::Method::Post {
                tiny_http::Response::from_string("").with_status_code(405)
            } else if message.get("id").is_none() {
                tiny_http::Response::from_string("").with_status_code(202)
            } else {
                let body = script(&message).concat();
                let kind = if body.starts_with("data:") {
                    "text/event-stream"
                } else {
                    "application/json"
                };
                let kind = tiny_http::Header::from_bytes("Content-Type", kind).expect("a header");
                tiny_http::Response::from_string(body).with_header(kind)
            };
            let _ = request.respond(reply);
        }
    });
    format!("http://127.0.0.1:{port}/mcp")
}

#[tokio::test]
async fn spec9_an_oversized_http_answer_fails_its_call_at_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // The calls are answered with 17 MiB of JSON, then one event of
    // 17 MiB, then an event of a few bytes: the session outlives the
    // answers it refused.
    let calls = AtomicUsize::new(0);
    let list = |_: &Value| json!({"tools": [object_tool("dump")]});
    let script = server_with(list, |_| None);
    let script: Script = Box::new(move |message| {
        if message["method"] != "tools/call" {
            return script(message);
        }
        let call = calls.fetch_add(1, Ordering::SeqCst);
        let bytes = if call < 2 { OVERSIZED } else { 5 };
        let reply = answer(
            message,
            json!({"content": [{"type": "text", "text": "x".repeat(bytes)}]}),
        );
        if call == 0 {
            vec![reply]
        } else {
            vec![format!("data: {reply}\n\n")]
        }
    });
    let url = fake_http_server(script);
    let server = bounded(McpServer::http("fake", url).connect())
        .await
        .expect("connects");
    let seen = observe_calls(&server, "dump", 3, Duration::from_secs(60)).await;
    assert_eq!(
        seen,
        [
            "Error executing tool: the MCP server `fake` answered with a message larger than \
             16 MiB, the most one message may hold",
            "Error executing tool: the MCP server `fake` ended the answer's event stream before \
             the answer, or sent an answer larger than 16 MiB, the most one message may hold",
            "xxxxx"
        ]
    );
}
