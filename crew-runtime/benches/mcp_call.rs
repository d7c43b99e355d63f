//! What the crew runtime adds to a call of an MCP tool.
//!
//! An MCP server with one tool, `echo`, runs in this process on a pipe
//! (rmcp's server side, as any Rust MCP server is written), so that the
//! figures are the protocol and the runtime, not a process or a network.
//! Two ways to make 2,000 calls of `echo`:
//!
//! - `direct`: an rmcp client calls the tool itself, one call after the
//!   other (what an MCP round trip costs, with no crew and no hook);
//! - `crew`: a crew whose scripted model asks for the 2,000 calls, 100 a
//!   turn, one at a time, with one no-op PRE and one no-op POST hook: the
//!   whole hooked path of each call (context, both chains, the MCP round
//!   trip, rendering, the observation) plus the model turn's share.
//!
//! Each runs `RUNS` times on a multi-threaded runtime; the median per call
//! is printed, and the crew's figure as a multiple of the direct one.
//!
//! `cargo bench -p crew-runtime --features mcp --bench mcp_call`

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crew_runtime::ScriptedCall;
use crew_runtime::mcp::McpServer;
use crew_runtime::prelude::*;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use tokio::io::{DuplexStream, ReadHalf, WriteHalf};

const CALLS: usize = 2_000;
const PER_TURN: usize = 100;
const RUNS: usize = 9;

/// A server with one tool, `echo`, that counts its calls.
#[derive(Clone, Default)]
struct EchoServer {
    calls: Arc<AtomicUsize>,
}

impl EchoServer {
    fn call_count(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

impl ServerHandler for EchoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        });
        let Value::Object(schema) = schema else {
            return Err(ErrorData::internal_error("the schema is an object", None));
        };
        Ok(ListToolsResult::with_all_items(vec![
            rmcp::model::Tool::new("echo", "Says the text back", schema),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let text = request
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get("text"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// The echo server on a pipe: the client's ends, and the server (whose
/// call count proves the calls were made).
fn pipe_to_server() -> (ReadHalf<DuplexStream>, WriteHalf<DuplexStream>, EchoServer) {
    let (client, server) = tokio::io::duplex(1 << 16);
    let (reads, writes) = tokio::io::split(server);
    let echo = EchoServer::default();
    let serving = echo.clone();
    tokio::spawn(async move {
        if let Ok(running) = serving.serve((reads, writes)).await {
            let _ = running.waiting().await;
        }
    });
    let (reads, writes) = tokio::io::split(client);
    (reads, writes, echo)
}

async fn direct() -> Duration {
    let (reads, writes, demo) = pipe_to_server();
    let client = ().serve((reads, writes)).await.expect("connects");
    let arguments = json!({"text": "hi"});
    let Value::Object(arguments) = arguments else {
        unreachable!("an object")
    };
    let started = Instant::now();
    for _ in 0..CALLS {
        let request = CallToolRequestParams::new("echo").with_arguments(arguments.clone());
        let result = client.call_tool(request).await.expect("the call");
        std::hint::black_box(result);
    }
    let elapsed = started.elapsed();
    assert_eq!(demo.call_count(), CALLS, "every call reached the server");
    elapsed
}

async fn crew() -> Duration {
    let (reads, writes, demo) = pipe_to_server();
    let server = McpServer::io("demo", reads, writes)
        .only(["echo"])
        .connect()
        .await
        .expect("connects");
    let mut model = ScriptedLlm::new().without_recording();
    for _ in 0..CALLS / PER_TURN {
        model =
            model.calls((0..PER_TURN).map(|_| ScriptedCall::new("echo", json!({"text": "hi"}))));
    }
    let agent = Agent::builder("Bench")
        .llm(Arc::new(model.answer("done")))
        .tools(server.tools())
        .max_iter(CALLS / PER_TURN + 2)
        .build();
    let crew = Crew::builder()
        .agent(agent.clone())
        .task(Task::builder("echo").agent(&agent).build())
        .global_registry(Arc::new(HookRegistry::new()))
        .max_concurrent_tool_calls(1)
        .max_tool_calls_per_turn(PER_TURN)
        .hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            std::hint::black_box(ctx.tool_name());
        })
        .hook(POST_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            std::hint::black_box(ctx.tool_name());
        })
        .build()
        .expect("the crew builds");
    let started = Instant::now();
    crew.kickoff(Inputs::new()).await.expect("the run");
    let elapsed = started.elapsed();
    assert_eq!(demo.call_count(), CALLS, "every call reached the server");
    elapsed
}

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let per_call = |total: Duration| total / CALLS as u32;
    let (mut directs, mut crews) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        directs.push(per_call(runtime.block_on(direct())));
        crews.push(per_call(runtime.block_on(crew())));
    }
    let (direct, crew) = (median(directs), median(crews));
    println!("mcp echo over an in-process pipe, {CALLS} calls, median of {RUNS} runs:");
    println!(
        "mcp direct rmcp call: {:.1} µs per call",
        direct.as_secs_f64() * 1e6
    );
    println!(
        "mcp crew call (1 PRE + 1 POST hook): {:.1} µs per call ({:.2} x direct)",
        crew.as_secs_f64() * 1e6,
        crew.as_secs_f64() / direct.as_secs_f64()
    );
}
