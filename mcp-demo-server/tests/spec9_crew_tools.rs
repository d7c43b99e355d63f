//! SPEC §9: the tools of an MCP server are crew tools, every call of one
//! goes through the PRE and POST chains, hooks see the tool's annotations,
//! results reach the agent rendered and POST hooks as the MCP result.
//!
//! The server is this crate's: over stdio (its binary), in process (on a
//! pipe, where the test reads which calls the server really received) and
//! over streamable HTTP.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crew_runtime::hooks_core::ToolAnnotations;
use crew_runtime::mcp::{McpError, McpServer, McpServerBuilder};
use crew_runtime::prelude::*;
use crew_runtime::{BuildError, Tool};
use crew_runtime::{ScriptedCall, ToolCallStatus};
use mcp_demo_server::DemoServer;

/// Every wait below ends well within this.
const BOUND: Duration = Duration::from_secs(20);

async fn bounded<T>(work: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(BOUND, work).await {
        Ok(done) => done,
        Err(_) => panic!("hung past {BOUND:?}"),
    }
}

fn server_command(root: &Path, extra: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-demo-server"));
    command.arg("--root").arg(root).args(extra);
    command
}

/// The demo server in this process, on a pipe: its call log shows what the
/// server really received.
async fn in_process(root: &Path) -> (McpServer, DemoServer) {
    let demo = DemoServer::new(root);
    let mcp = bounded(serve_demo_with(demo.clone(), |mcp| mcp))
        .await
        .expect("the demo server connects");
    (mcp, demo)
}

/// Connects to a demo server in this process, configured by `configure`.
async fn serve_demo(
    root: &Path,
    configure: impl FnOnce(McpServerBuilder) -> McpServerBuilder,
) -> Result<McpServer, McpError> {
    serve_demo_with(DemoServer::new(root), configure).await
}

async fn serve_demo_with(
    demo: DemoServer,
    configure: impl FnOnce(McpServerBuilder) -> McpServerBuilder,
) -> Result<McpServer, McpError> {
    let (client, server) = tokio::io::duplex(1 << 16);
    let (server_reads, server_writes) = tokio::io::split(server);
    tokio::spawn(async move {
        let _ = mcp_demo_server::serve_io(demo, server_reads, server_writes).await;
    });
    let (client_reads, client_writes) = tokio::io::split(client);
    configure(McpServer::io("demo", client_reads, client_writes))
        .connect()
        .await
}

/// What the hooks of a crew saw, call by call.
#[derive(Default, Clone)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl Seen {
    fn push(&self, line: String) {
        if let Ok(mut lines) = self.0.lock() {
            lines.push(line);
        }
    }
    fn lines(&self) -> Vec<String> {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// A crew of one agent with `tools`, whose model makes `turns` (each a
/// list of calls), then answers; PRE and POST hooks record each call.
fn crew_of(
    tools: Vec<Tool>,
    turns: Vec<Vec<ScriptedCall>>,
    seen: &Seen,
) -> (Crew, Arc<ScriptedLlm>) {
    let mut model = ScriptedLlm::new();
    for turn in turns {
        model = model.calls(turn);
    }
    let model = Arc::new(model.answer("done"));
    let agent = Agent::builder("Librarian")
        .llm(Arc::clone(&model) as Arc<dyn Llm>)
        .tools(tools)
        .build();
    let (pre, post) = (seen.clone(), seen.clone());
    let crew = Crew::builder()
        .agent(agent.clone())
        .task(Task::builder("Look after the files").agent(&agent).build())
        .global_registry(Arc::new(HookRegistry::new()))
        .hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let server = ctx
                .tool
                .as_ref()
                .and_then(|t| t.mcp_server().map(str::to_owned));
            pre.push(format!("pre {} {server:?}", ctx.tool_name()));
        })
        .hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            post.push(format!("post {}", ctx.tool_name()));
        })
        .build()
        .expect("the crew builds");
    (crew, model)
}

fn call(name: &str, arguments: Value) -> ScriptedCall {
    ScriptedCall::new(name, arguments)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec9_a_stdio_server_reads_lists_and_writes_through_the_hooks() {
    let root = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(root.path().join("notes.txt"), "buy milk").expect("a file");
    let server = bounded(
        McpServer::stdio("files", server_command(root.path(), &[]))
            .prefix("fs")
            .connect(),
    )
    .await
    .expect("the stdio server connects");
    assert!(server.process_id().is_some());
    let names: Vec<String> = server.tools().iter().map(|t| t.name().to_owned()).collect();
    for name in [
        "fs_read_text_file",
        "fs_list_directory",
        "fs_write_file",
        "fs_echo",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }

    let seen = Seen::default();
    let (crew, model) = crew_of(
        server.tools(),
        vec![
            vec![call("fs_read_text_file", json!({"path": "notes.txt"}))],
            vec![call(
                "fs_write_file",
                json!({"path": "todo.txt", "content": "call mum"}),
            )],
            vec![call("fs_list_directory", json!({"path": "."}))],
        ],
        &seen,
    );
    bounded(crew.kickoff(Inputs::new()))
        .await
        .expect("the run ends");

    assert_eq!(
        model.observations(),
        [
            "buy milk",
            "Successfully wrote to todo.txt",
            "[FILE] notes.txt\n[FILE] todo.txt",
        ]
    );
    assert_eq!(
        std::fs::read_to_string(root.path().join("todo.txt")).expect("written"),
        "call mum"
    );
    assert_eq!(
        seen.lines(),
        [
            "pre fs_read_text_file Some(\"files\")",
            "post fs_read_text_file",
            "pre fs_write_file Some(\"files\")",
            "post fs_write_file",
            "pre fs_list_directory Some(\"files\")",
            "post fs_list_directory",
        ]
    );
}

#[tokio::test]
async fn spec9_hooks_see_the_annotations_and_the_mcp_result() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let (server, _demo) = in_process(root.path()).await;
    let write = server.tool("write_file").expect("write_file");
    let annotations = write.annotations();
    assert_eq!(annotations.title.as_deref(), Some("Write File"));
    assert_eq!(
        (
            annotations.read_only,
            annotations.destructive,
            annotations.idempotent,
            annotations.open_world
        ),
        (Some(false), Some(true), Some(true), Some(false))
    );
    let plain = server.tool("plain").expect("plain");
    assert_eq!(plain.annotations(), &ToolAnnotations::new());

    let seen = Seen::default();
    let (crew, model) = crew_of(
        server.tools(),
        vec![vec![
            call("stats", json!({})),
            call("web_lookup", json!({"query": "rust"})),
        ]],
        &seen,
    );
    let raw = Seen::default();
    let raw_sink = raw.clone();
    crew.global_registry()
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let tool = ctx.tool.as_ref().expect("a known tool");
            let flags = tool.annotations();
            let structured = ctx.raw_tool_result.as_ref().map(|raw| {
                // Raw, in the server's key order when serde_json keeps
                // insertion order: sorted for the comparison.
                let mut structured = raw.as_json()["structuredContent"].clone();
                structured.sort_all_objects();
                structured
            });
            raw_sink.push(format!(
                "{} title={:?} read_only={} open_world={} structured={}",
                ctx.tool_name(),
                flags.title,
                flags.is_read_only(),
                flags.is_open_world(),
                structured.unwrap_or_default()
            ));
        })
        .expect("registers");
    bounded(crew.kickoff(Inputs::new()))
        .await
        .expect("the run ends");
    // The two calls run side by side: sort what the hooks saw.
    let mut lines = raw.lines();
    lines.sort();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with(
            "stats title=None read_only=false open_world=true structured={\"calls\":1,\"files\":0}"
        ),
        "{lines:?}"
    );
    assert!(
        lines[1]
            .starts_with("web_lookup title=Some(\"Web Lookup\") read_only=true open_world=true"),
        "{lines:?}"
    );
    assert_eq!(model.observations().len(), 2);
}

#[tokio::test]
async fn spec9_results_of_every_kind_reach_the_agent_rendered() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let (server, _demo) = in_process(root.path()).await;
    let seen = Seen::default();
    let (crew, model) = crew_of(
        server.tools(),
        vec![vec![
            call("picture", json!({})),
            call("structured_only", json!({})),
            call("fail", json!({"message": "the disk is on fire"})),
            call("read_text_file", json!({"path": "../../etc/passwd"})),
        ]],
        &seen,
    );
    // A POST hook reads a failed call's status and the MCP result behind it.
    let failures = Seen::default();
    let sink = failures.clone();
    crew.global_registry()
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            if let ToolCallStatus::Failed { error } = ctx.status() {
                let raw = ctx.raw_tool_result.as_ref().map(|r| r.as_json().clone());
                let raw = raw.unwrap_or_default();
                sink.push(format!(
                    "{}: {error} / isError={}",
                    ctx.tool_name(),
                    raw["isError"]
                ));
            }
        })
        .expect("registers");
    bounded(crew.kickoff(Inputs::new()))
        .await
        .expect("the run ends");
    let mut failed = failures.lines();
    failed.sort();
    assert_eq!(
        failed,
        [
            "fail: the disk is on fire / isError=true",
            "read_text_file: Access denied - path outside allowed directories: ../../etc/passwd / isError=true",
        ]
    );
    let seen = model.observations();
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert!(seen[0].starts_with("[image: image/png, "), "{seen:?}");
    assert!(seen[0].contains("\n[embedded text resource: "), "{seen:?}");
    assert!(seen[0].contains("\n[resource link: "), "{seen:?}");
    assert_eq!(seen[1], r#"{"answer":42}"#);
    assert_eq!(seen[2], "Error executing tool: the disk is on fire");
    assert_eq!(
        seen[3],
        "Error executing tool: Access denied - path outside allowed directories: ../../etc/passwd"
    );
}

#[tokio::test]
async fn spec9_the_server_receives_the_arguments_the_pre_chain_left_and_nothing_it_blocked() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let (server, demo) = in_process(root.path()).await;
    let seen = Seen::default();
    let (crew, model) = crew_of(
        server.tools(),
        vec![vec![
            call("echo", json!({"text": "from the model"})),
            call("delete_record", json!({"id": "42"})),
        ]],
        &seen,
    );
    crew.global_registry()
        .register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            ctx.tool_input.insert("text".into(), json!("from a hook"));
        })
        .expect("registers");
    crew.global_registry()
        .register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            match ctx
                .tool
                .as_ref()
                .is_some_and(|t| t.annotations().is_destructive())
            {
                true => Err(HookAborted::new(
                    "destructive tools are off",
                    "no-destruction",
                )),
                false => Ok(()),
            }
        })
        .expect("registers");
    bounded(crew.kickoff(Inputs::new()))
        .await
        .expect("the run ends");

    let received: Vec<(String, Value)> = demo.calls();
    assert_eq!(
        received,
        [("echo".to_owned(), json!({"text": "from a hook"}))]
    );
    let seen = model.observations();
    assert_eq!(seen[0], "from a hook");
    assert!(
        seen[1].starts_with("Tool execution blocked by hook"),
        "{seen:?}"
    );
}

/// Coverage by construction: each way the runtime can run an MCP tool, and
/// the proof that each went through the hooks. The server's own log of
/// the calls it received is compared with what PRE and POST hooks saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec9_every_way_an_mcp_tool_runs_goes_through_the_hooks() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let (server, demo) = in_process(root.path()).await;
    let pre_calls = Arc::new(Mutex::new(Vec::<String>::new()));
    let post_calls = Arc::new(Mutex::new(Vec::<String>::new()));
    let record = |log: &Arc<Mutex<Vec<String>>>| {
        let log = Arc::clone(log);
        move |ctx: &mut ToolCallHookContext| {
            if let Ok(mut log) = log.lock() {
                log.push(ctx.tool_input["text"].as_str().unwrap_or("?").to_owned());
            }
        }
    };

    let echo = |text: &str| call("echo", json!({ "text": text }));
    let texts = |turns: &[Vec<&str>]| -> Vec<Vec<ScriptedCall>> {
        turns
            .iter()
            .map(|turn| turn.iter().map(|t| echo(t)).collect())
            .collect()
    };
    // Tools as the server lists them, one taken by name, and from a clone.
    let by_name = server.tool("echo").expect("echo");
    let cloned = server.clone().tools();
    /// A way to run the tool: its name, the agent's tools, the model's turns.
    type Way<'a> = (&'a str, Vec<Tool>, Vec<Vec<&'a str>>);
    let ways: Vec<Way<'_>> = vec![
        (
            "one call a turn",
            server.tools(),
            vec![vec!["a1"], vec!["a2"]],
        ),
        (
            "calls side by side in one turn",
            server.tools(),
            vec![vec!["b1", "b2", "b3"]],
        ),
        ("a tool taken by name", vec![by_name], vec![vec!["c1"]]),
        (
            "the tools of a cloned server value",
            cloned,
            vec![vec!["d1"]],
        ),
    ];
    let mut expected = Vec::new();
    for (way, tools, turns) in ways {
        expected.extend(turns.iter().flatten().map(|t| t.to_string()));
        let mut model = ScriptedLlm::new();
        for turn in texts(&turns) {
            model = model.calls(turn);
        }
        let agent = Agent::builder("Caller")
            .llm(Arc::new(model.answer("done")))
            .tools(tools)
            .build();
        let crew = Crew::builder()
            .agent(agent.clone())
            .task(Task::builder(way).agent(&agent).build())
            .global_registry(Arc::new(HookRegistry::new()))
            .max_concurrent_tool_calls(3)
            .hook(PRE_TOOL_CALL, record(&pre_calls))
            .hook(POST_TOOL_CALL, record(&post_calls))
            .build()
            .expect("the crew builds");
        bounded(crew.kickoff(Inputs::new())).await.expect(way);
    }

    // A crew run without awaiting, from a plain thread.
    let model = ScriptedLlm::new().calls([echo("e1")]).answer("done");
    let agent = Agent::builder("Blocking")
        .llm(Arc::new(model))
        .tools(server.tools())
        .build();
    let blocking = Crew::builder()
        .agent(agent.clone())
        .task(Task::builder("kickoff_blocking").agent(&agent).build())
        .global_registry(Arc::new(HookRegistry::new()))
        .hook(PRE_TOOL_CALL, record(&pre_calls))
        .hook(POST_TOOL_CALL, record(&post_calls))
        .build()
        .expect("the crew builds");
    let ran = tokio::task::spawn_blocking(move || blocking.kickoff_blocking(Inputs::new()));
    bounded(ran)
        .await
        .expect("joins")
        .expect("kickoff_blocking");
    expected.push("e1".to_owned());

    let mut received: Vec<String> = demo
        .calls()
        .into_iter()
        .map(|(tool, args)| {
            assert_eq!(tool, "echo");
            args["text"].as_str().unwrap_or("?").to_owned()
        })
        .collect();
    let lock = |log: &Arc<Mutex<Vec<String>>>| log.lock().map(|l| l.clone()).unwrap_or_default();
    let (mut pre, mut post) = (lock(&pre_calls), lock(&post_calls));
    for list in [&mut received, &mut pre, &mut post, &mut expected] {
        list.sort();
    }
    assert_eq!(received, expected, "the server received every call once");
    assert_eq!(pre, received, "each one passed the PRE chain");
    assert_eq!(post, received, "and the POST chain");
}

#[tokio::test]
async fn spec9_a_slow_tool_times_out_at_the_servers_call_timeout() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let server = bounded(serve_demo(root.path(), |mcp| {
        mcp.call_timeout(Duration::from_millis(200))
    }))
    .await
    .expect("connects");
    let (crew, model) = crew_of(
        server.tools(),
        vec![
            vec![call("slow", json!({"millis": 60_000}))],
            vec![call("echo", json!({"text": "still here"}))],
        ],
        &Seen::default(),
    );
    bounded(crew.kickoff(Inputs::new()))
        .await
        .expect("the run ends");
    assert_eq!(
        model.observations(),
        ["Error executing tool: timed out after 200ms", "still here"]
    );
}

#[tokio::test]
async fn spec9_a_server_reached_over_streamable_http_runs_its_tools() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let http = mcp_demo_server::serve_http(DemoServer::new(root.path()), listener)
        .await
        .expect("serves");
    let server = bounded(McpServer::http("web", http.url()).connect())
        .await
        .expect("connects over HTTP");
    let (crew, model) = crew_of(
        server.tools(),
        vec![vec![call("echo", json!({"text": "over http"}))]],
        &Seen::default(),
    );
    bounded(crew.kickoff(Inputs::new()))
        .await
        .expect("the run ends");
    assert_eq!(model.observations(), ["over http"]);

    // The server goes away: the next call fails, it does not hang.
    http.shutdown().await;
    let (later, model) = crew_of(
        server.tools(),
        vec![vec![call("echo", json!({"text": "anyone?"}))]],
        &Seen::default(),
    );
    bounded(later.kickoff(Inputs::new()))
        .await
        .expect("the run ends");
    let seen = model.observations();
    assert!(
        seen[0].starts_with("Error executing tool: the MCP server `web`"),
        "{seen:?}"
    );
}

#[tokio::test]
async fn spec9_two_servers_tools_collide_on_an_agent_unless_prefixed() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let (first, _) = in_process(root.path()).await;
    let (second, _) = in_process(root.path()).await;
    let build_with = |other: &McpServer| {
        let agent = Agent::builder("Both")
            .tools(first.tools())
            .tools(other.tools())
            .build();
        Crew::builder()
            .agent(agent.clone())
            .task(Task::builder("t").agent(&agent).build())
            .global_registry(Arc::new(HookRegistry::new()))
            .build()
    };
    let built = build_with(&second);
    assert!(
        matches!(&built, Err(BuildError::DuplicateTool { role, .. }) if role == "Both"),
        "{built:?}"
    );

    let prefixed = bounded(serve_demo(root.path(), |mcp| mcp.prefix("backup")))
        .await
        .expect("connects");
    assert!(prefixed.tool("backup_read_text_file").is_some());
    let built = build_with(&prefixed);
    assert!(built.is_ok(), "{built:?}");
}

#[tokio::test]
async fn spec9_a_stdio_server_that_dies_mid_run_fails_each_later_call() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let server = bounded(
        McpServer::stdio(
            "fragile",
            server_command(root.path(), &["--misbehave", "exit-on-call"]),
        )
        .connect(),
    )
    .await
    .expect("connects");
    let (crew, model) = crew_of(
        server.tools(),
        vec![
            vec![call("echo", json!({"text": "one"}))],
            vec![call("echo", json!({"text": "two"}))],
        ],
        &Seen::default(),
    );
    bounded(crew.kickoff(Inputs::new()))
        .await
        .expect("the run ends");
    let seen = model.observations();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for observation in &seen {
        assert!(
            observation.starts_with("Error executing tool: the MCP server `fragile`"),
            "{seen:?}"
        );
    }
    assert!(seen[1].contains("is gone"), "{seen:?}");
}

#[tokio::test]
async fn spec9_misbehaving_stdio_servers_fail_to_connect_with_clear_errors() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let connect = |mode: &str| {
        McpServer::stdio(mode, server_command(root.path(), &["--misbehave", mode]))
            .connect_timeout(Duration::from_secs(2))
            .connect()
    };
    let garbage = bounded(connect("garbage")).await.expect_err("garbage");
    assert!(
        matches!(
            garbage,
            McpError::Handshake { .. } | McpError::Timeout { .. }
        ),
        "{garbage}"
    );
    let silent = bounded(connect("silent")).await.expect_err("silence");
    assert!(
        matches!(
            silent,
            McpError::Timeout {
                stage: "handshake",
                ..
            }
        ),
        "{silent}"
    );
    let schema = bounded(connect("bad-schema"))
        .await
        .expect_err("a string schema");
    assert!(
        matches!(&schema, McpError::InvalidSchema { tool, .. } if tool == "broken"),
        "{schema}"
    );
    let colliding = bounded(connect("colliding"))
        .await
        .expect_err("two read_file");
    assert!(
        matches!(colliding, McpError::CollidingTools { .. }),
        "{colliding}"
    );
    let paged = bounded(connect("paginated")).await.expect("three pages");
    assert_eq!(paged.tools().len(), 3);

    let missing = McpServer::stdio(
        "ghost",
        tokio::process::Command::new("/nonexistent/mcp-server"),
    )
    .connect()
    .await
    .expect_err("no such program");
    assert!(matches!(missing, McpError::Spawn { .. }), "{missing}");
    assert!(
        missing.to_string().contains("/nonexistent/mcp-server"),
        "{missing}"
    );
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn spec9_the_server_process_stops_when_the_crew_and_server_are_dropped() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let server = bounded(McpServer::stdio("files", server_command(root.path(), &[])).connect())
        .await
        .expect("connects");
    let pid = server.process_id().expect("a process");
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            // A zombie (state Z) has exited and waits to be reaped.
            .is_ok_and(|stat| stat.split_whitespace().nth(2).is_none_or(|s| s != "Z"))
    };
    assert!(alive());
    let (crew, _model) = crew_of(
        server.tools(),
        vec![vec![call("echo", json!({"text": "hi"}))]],
        &Seen::default(),
    );
    bounded(crew.kickoff(Inputs::new()))
        .await
        .expect("the run ends");
    drop(crew);
    drop(server);
    bounded(async {
        while alive() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}
