//! The misbehaving modes, checked line by line on the binary's stdio.

use std::{process::Stdio, time::Duration};

use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout, Command},
};

/// Every wait is bounded, so that a broken server fails the test instead of
/// hanging it.
const LIMIT: Duration = Duration::from_secs(20);

/// How long a silent server is watched for output.
const QUIET: Duration = Duration::from_millis(300);

struct Raw {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Raw {
    fn start(mode: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-demo-server"))
            .args(["--misbehave", mode])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the server starts");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        Self {
            child,
            stdin,
            stdout,
        }
    }

    async fn send(&mut self, message: Value) {
        let line = format!("{message}\n");
        tokio::time::timeout(LIMIT, self.stdin.write_all(line.as_bytes()))
            .await
            .expect("the server reads in time")
            .expect("the server's stdin is open");
    }

    async fn line(&mut self) -> String {
        tokio::time::timeout(LIMIT, self.stdout.next_line())
            .await
            .expect("the server writes in time")
            .expect("the server's stdout is readable")
            .expect("the server writes a line")
    }

    async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let response: Value = serde_json::from_str(&self.line().await).expect("a JSON response");
        assert_eq!(response["id"], json!(id), "{response}");
        response
    }

    /// Initializes as a client would, checking the answer's shape.
    async fn initialize(&mut self) {
        let params = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "misbehave-test", "version": "0"},
        });
        let response = self.request(1, "initialize", params).await;
        assert_eq!(response["result"]["protocolVersion"], json!("2025-06-18"));
        assert_eq!(response["result"]["capabilities"], json!({"tools": {}}));
        assert!(response["result"]["serverInfo"]["name"].is_string());
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        let pong = self.request(2, "ping", json!({})).await;
        assert_eq!(
            pong["result"],
            json!({}),
            "notifications get no answer; ping does"
        );
    }

    async fn tool_names(&mut self, id: u64, params: Value) -> (Vec<Value>, Value) {
        let response = self.request(id, "tools/list", params).await;
        let tools = response["result"]["tools"]
            .as_array()
            .expect("a tool list")
            .clone();
        (tools, response["result"]["nextCursor"].clone())
    }
}

#[tokio::test]
async fn garbage_answers_lines_that_are_not_json() {
    let mut server = Raw::start("garbage");
    server
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
        .await;
    let first = server.line().await;
    assert_eq!(first, "this is not json");
    let second = server.line().await;
    assert!(serde_json::from_str::<Value>(&second).is_err(), "{second}");
}

#[tokio::test]
async fn silent_reads_and_never_writes() {
    let mut server = Raw::start("silent");
    server
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
        .await;
    let answer = tokio::time::timeout(QUIET, server.stdout.next_line()).await;
    assert!(answer.is_err(), "no answer: {answer:?}");
    assert!(
        server.child.try_wait().expect("a status").is_none(),
        "still running"
    );
}

#[tokio::test]
async fn bad_schema_lists_a_tool_whose_schema_is_not_an_object() {
    let mut server = Raw::start("bad-schema");
    server.initialize().await;
    let (tools, _) = server.tool_names(3, json!({})).await;
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["name"], json!("broken"));
    assert_eq!(tools[0]["inputSchema"], json!({"type": "string"}));
}

#[tokio::test]
async fn colliding_lists_names_that_differ_by_dash_and_underscore() {
    let mut server = Raw::start("colliding");
    server.initialize().await;
    let (tools, _) = server.tool_names(3, json!({})).await;
    let names: Vec<_> = tools.iter().map(|tool| tool["name"].clone()).collect();
    assert_eq!(names, vec![json!("read-file"), json!("read_file")]);
}

#[tokio::test]
async fn exit_on_call_exits_with_status_3_when_a_tool_is_called() {
    let mut server = Raw::start("exit-on-call");
    server.initialize().await;
    let (tools, _) = server.tool_names(3, json!({})).await;
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["name"], json!("echo"));
    assert_eq!(tools[0]["inputSchema"]["type"], json!("object"));

    server
        .send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"text": "hi"}}}))
        .await;
    let status = tokio::time::timeout(LIMIT, server.child.wait())
        .await
        .expect("the server exits in time")
        .expect("an exit status");
    assert_eq!(status.code(), Some(3));
    let rest = tokio::time::timeout(LIMIT, server.stdout.next_line())
        .await
        .expect("stdout closes in time")
        .expect("stdout is readable");
    assert_eq!(rest, None, "no answer to the call");
}

#[tokio::test]
async fn paginated_lists_one_tool_a_page_over_three_pages() {
    let mut server = Raw::start("paginated");
    server.initialize().await;
    let mut names = Vec::new();
    let mut params = json!({});
    for id in 3..10 {
        let (tools, next) = server.tool_names(id, params).await;
        assert_eq!(tools.len(), 1);
        names.push(tools[0]["name"].clone());
        if next.is_null() {
            break;
        }
        params = json!({"cursor": next});
    }
    assert_eq!(
        names,
        vec![json!("page_one"), json!("page_two"), json!("page_three")]
    );

    let called = server
        .request(
            20,
            "tools/call",
            json!({"name": "page_two", "arguments": {}}),
        )
        .await;
    assert_eq!(
        called["result"]["content"],
        json!([{"type": "text", "text": "called page_two"}])
    );
}
