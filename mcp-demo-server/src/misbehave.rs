//! Hostile servers for the tests of MCP clients: hand-written
//! newline-delimited JSON-RPC, so that they can break the protocol in ways
//! a well-made SDK never would.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::Error;

/// How [`serve_misbehaving_stdio`] misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Misbehavior {
    /// Answers every line with lines that are not JSON
    /// (`this is not json`), never with a valid response.
    Garbage,
    /// Reads its input forever and never writes anything.
    Silent,
    /// Initializes properly, then lists one tool, `broken`, whose input
    /// schema is `{"type": "string"}` rather than an object schema.
    BadSchema,
    /// Lists two tools whose names differ only by `-` and `_`:
    /// `read-file` and `read_file`.
    Colliding,
    /// Initializes and lists one tool, `echo`, properly, then exits the
    /// process with status 3 when any tool is called.
    ExitOnCall,
    /// Lists its tools over three pages, one tool a page (`page_one`,
    /// `page_two`, `page_three`) linked by `nextCursor`, and answers a call
    /// of any of them with the text `called <name>`.
    Paginated,
}

impl Misbehavior {
    /// The name of this mode on the command line (`--misbehave NAME`).
    pub fn flag(self) -> &'static str {
        match self {
            Self::Garbage => "garbage",
            Self::Silent => "silent",
            Self::BadSchema => "bad-schema",
            Self::Colliding => "colliding",
            Self::ExitOnCall => "exit-on-call",
            Self::Paginated => "paginated",
        }
    }

    /// The mode named `flag` on the command line, if there is one.
    pub fn from_flag(flag: &str) -> Option<Self> {
        [
            Self::Garbage,
            Self::Silent,
            Self::BadSchema,
            Self::Colliding,
            Self::ExitOnCall,
            Self::Paginated,
        ]
        .into_iter()
        .find(|mode| mode.flag() == flag)
    }
}

/// Plays the server `mode` describes on standard input and output, until
/// standard input closes (or, for [`Misbehavior::ExitOnCall`], until a
/// tool is called: the process then exits with status 3).
///
/// Except for [`Misbehavior::Garbage`] and [`Misbehavior::Silent`], it
/// answers `initialize` with the client's protocol version, the `tools`
/// capability and its server info, answers `ping`, ignores notifications,
/// and answers other methods with a JSON-RPC "method not found" error.
///
/// # Errors
///
/// [`Error::Io`] if standard input or output fails.
pub async fn serve_misbehaving_stdio(mode: Misbehavior) -> Result<(), Error> {
    serve_misbehaving(mode, tokio::io::stdin(), tokio::io::stdout()).await
}

async fn serve_misbehaving<R, W>(mode: Misbehavior, reader: R, mut writer: W) -> Result<(), Error>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut lines = BufReader::new(reader).lines();
    while let Some(line) = lines.next_line().await.map_err(|source| Error::Io {
        context: "cannot read standard input",
        source,
    })? {
        let answer = match mode {
            Misbehavior::Silent => continue,
            Misbehavior::Garbage => "this is not json\n{\"jsonrpc\": \"2.0\", \"id\":\n".to_owned(),
            _ => match answer(mode, &line) {
                Some(response) => format!("{response}\n"),
                None => continue,
            },
        };
        writer
            .write_all(answer.as_bytes())
            .await
            .map_err(|source| Error::Io {
                context: "cannot write standard output",
                source,
            })?;
        writer.flush().await.map_err(|source| Error::Io {
            context: "cannot write standard output",
            source,
        })?;
    }
    Ok(())
}

/// The answer to one line, if it calls for one.
fn answer(mode: Misbehavior, line: &str) -> Option<Value> {
    if line.trim().is_empty() {
        return None;
    }
    let Ok(message) = serde_json::from_str::<Value>(line) else {
        return Some(error(Value::Null, -32700, "Parse error"));
    };
    // Notifications (no id) and the client's responses (no method) need no
    // answer.
    let id = message.get("id")?.clone();
    let method = message.get("method")?.as_str()?;
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let result = match method {
        "initialize" => initialize(&params),
        "ping" => json!({}),
        "tools/list" => match list_tools(mode, &params) {
            Ok(result) => result,
            Err(message) => return Some(error(id, -32602, &message)),
        },
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            if mode == Misbehavior::ExitOnCall {
                // The exit the clients' tests are about: no answer, the
                // process simply goes away mid-call.
                std::process::exit(3);
            }
            if !tool_names(mode).contains(&name) {
                return Some(error(id, -32602, &format!("Unknown tool: {name}")));
            }
            json!({"content": [{"type": "text", "text": format!("called {name}")}], "isError": false})
        }
        other => return Some(error(id, -32601, &format!("Method not found: {other}"))),
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn initialize(params: &Value) -> Value {
    let version = params
        .get("protocolVersion")
        .cloned()
        .unwrap_or_else(|| json!("2025-06-18"));
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "mcp-demo-server-misbehaving", "version": env!("CARGO_PKG_VERSION")},
    })
}

fn tool_names(mode: Misbehavior) -> &'static [&'static str] {
    match mode {
        Misbehavior::BadSchema => &["broken"],
        Misbehavior::Colliding => &["read-file", "read_file"],
        Misbehavior::ExitOnCall => &["echo"],
        Misbehavior::Paginated => &["page_one", "page_two", "page_three"],
        Misbehavior::Garbage | Misbehavior::Silent => &[],
    }
}

fn list_tools(mode: Misbehavior, params: &Value) -> Result<Value, String> {
    let object_schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
    let tool = |name: &str, schema: &Value| json!({"name": name, "description": format!("The {name} tool."), "inputSchema": schema});
    Ok(match mode {
        Misbehavior::BadSchema => json!({"tools": [tool("broken", &json!({"type": "string"}))]}),
        Misbehavior::Paginated => {
            let cursor = params.get("cursor").and_then(Value::as_str);
            let (name, next) = match cursor {
                None => ("page_one", Some("page-2")),
                Some("page-2") => ("page_two", Some("page-3")),
                Some("page-3") => ("page_three", None),
                Some(other) => return Err(format!("Invalid cursor: {other}")),
            };
            let mut page = json!({"tools": [tool(name, &object_schema)]});
            if let Some(next) = next {
                page["nextCursor"] = json!(next);
            }
            page
        }
        _ => json!({
            "tools": tool_names(mode)
                .iter()
                .map(|name| tool(name, &object_schema))
                .collect::<Vec<_>>(),
        }),
    })
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}
