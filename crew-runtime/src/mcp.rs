//! The tools of MCP servers as crew tools.
//!
//! [`McpServer`] connects to a server of the Model Context Protocol (a
//! child process over stdio, a streamable HTTP endpoint, or any pair of
//! pipes), lists its tools and turns each into a [`Tool`]. Give them to an
//! agent like any other tool: every call the model makes then goes through
//! the crew's `PRE_TOOL_CALL` and `POST_TOOL_CALL` chains. There is no
//! other way to call them: the session with the server is private to this
//! module, and a [`Tool`] only runs inside a crew.
//!
//! ```no_run
//! use std::sync::Arc;
//! use crew_runtime::mcp::McpServer;
//! use crew_runtime::prelude::*;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let mut command = tokio::process::Command::new("npx");
//! command.args(["-y", "@modelcontextprotocol/server-filesystem", "/srv/reports"]);
//! let files = McpServer::stdio("filesystem", command).connect().await?;
//!
//! let analyst = Agent::builder("Analyst")
//!     .llm(Arc::new(ScriptedLlm::new().answer("done")))
//!     .tools(files.tools())
//!     .build();
//! # let _ = analyst;
//! # Ok(())
//! # }
//! ```
//!
//! # Names
//!
//! A tool keeps the server's name, normalized as every tool name is
//! (`read-file` becomes `read_file`). With
//! [`McpServerBuilder::prefix`], names start with the prefix
//! (`fs_read_file`), so that two servers' tools cannot collide; tools of
//! one agent that still share a name make the crew's build fail, as for
//! any tool. [`McpServerBuilder::only`] keeps the tools you name and drops
//! the rest.
//!
//! # Capabilities
//!
//! The server's tool annotations (read-only, destructive, idempotent,
//! open-world, title) become the tool's [`ToolAnnotations`]: hooks read
//! them through `ctx.tool`, filters and guards match them (see
//! [`Capability`](hooks_core::Capability)). They are hints from the
//! server: trust them as far as you trust the server.
//!
//! # Idempotency keys
//!
//! A call with an idempotency key (a durable kickoff's call; see
//! [`CurrentCall::idempotency_key`]) sends it in its `tools/call`
//! request's `_meta`, under `"dev.crewhooks/idempotency-key"`
//! ([`IdempotencyKey::MCP_META_KEY`]), as a string: a server can pass it on
//! to an API of its own (a payment's idempotency key), so that a call run
//! again after a crash has its effect once. A call without a key sends no
//! such entry.
//!
//! # Results
//!
//! Text content reaches the agent as it is; images, audio and resources as
//! a described placeholder (`[image: image/png, 2048 bytes]`); structured
//! content as compact JSON when there is no text. POST hooks find the whole
//! MCP result, as JSON, in `raw_tool_result`. A result flagged `isError`
//! is a failed call (`Error executing tool: <its text>`), and so is a
//! server that went away or answered out of protocol.
//!
//! One message from a server holds at most [`DEFAULT_MAX_MESSAGE_BYTES`]
//! (see [`McpServerBuilder::max_message_bytes`]). Over stdio or a pipe, a
//! longer one closes the session: the calls waiting on it fail at once,
//! saying so, and so does every later call. Over HTTP, a longer answer
//! fails its call and the session goes on.
//!
//! # Lifetime
//!
//! The session lives as long as the [`McpServer`] or any of its tools:
//! once the crew and the server value are dropped, the session closes and
//! a stdio server's process (with its process group) is stopped. The
//! session runs on the tokio runtime that connected it, which must outlive
//! the crew's use of the tools. A server that dies mid-run fails the calls
//! made after it, with a message saying so; a server that never answers
//! fails the call at its timeout.

mod bounded;
mod child;
mod render;

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::console::escape_control;
use futures_util::FutureExt;
use hooks_core::{ToolAnnotations, normalize_tool_name};
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation,
    PaginatedRequestParams, RequestMetaObject,
};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::{StreamableHttpClient, StreamableHttpError};
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use crate::tool::{CurrentCall, IdempotencyKey, Tool, ToolFailure, ToolResult, ToolRun};
use bounded::{BoundedLines, MessageLimit, size};
use child::ChildTransport;

/// How long [`McpServerBuilder::connect`] waits for the server to start,
/// answer the handshake and list its tools, unless told otherwise.
///
/// ```
/// use std::time::Duration;
/// use crew_runtime::mcp::{DEFAULT_CONNECT_TIMEOUT, McpError, McpServer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// assert_eq!(DEFAULT_CONNECT_TIMEOUT, Duration::from_secs(30));
///
/// // A server that never answers, waited for a tenth of a second.
/// let (client, _silent_server) = tokio::io::duplex(64 * 1024);
/// let (reader, writer) = tokio::io::split(client);
/// let error = McpServer::io("silent", reader, writer)
///     .connect_timeout(Duration::from_millis(100))
///     .connect()
///     .await
///     .unwrap_err();
/// assert!(matches!(error, McpError::Timeout { stage: "handshake", .. }));
/// # }
/// ```
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The most bytes one message from a server may hold, unless told
/// otherwise with [`McpServerBuilder::max_message_bytes`]: 16 MiB, as rmcp
/// allows over streamable HTTP.
///
/// Over stdio or a pipe a message is one line, counted without its line
/// end; over HTTP, one response body or one server-sent event. A server
/// that sends more over stdio or a pipe has its session closed, and every
/// call waiting on it fails at once with a message naming the server and
/// the limit (not at its timeout).
///
/// ```
/// assert_eq!(crew_runtime::mcp::DEFAULT_MAX_MESSAGE_BYTES, 16 * 1024 * 1024);
/// ```
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The most tools one server may list; a server past it is refused.
const MAX_TOOLS: usize = 10_000;
/// The most pages of a tool listing; a server past it is refused.
const MAX_PAGES: usize = 1_000;
/// The longest tool description the model is told; longer ones are cut.
const MAX_DESCRIPTION_BYTES: usize = 8 * 1024;
/// How many of a stdio server's last standard-error lines an error quotes.
const STDERR_LINES: usize = 20;
/// The longest standard-error line kept.
const STDERR_LINE_BYTES: usize = 500;
/// The longest server-supplied text quoted in an error.
const QUOTE_BYTES: usize = 300;

/// Why connecting to an MCP server failed. Every variant names the server;
/// texts that came from the server are quoted with control characters
/// escaped and cut to a few hundred bytes.
///
/// ```
/// use crew_runtime::mcp::{McpError, McpServer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let command = tokio::process::Command::new("/no/such/mcp-server");
/// let error = McpServer::stdio("files", command).connect().await.unwrap_err();
/// assert!(matches!(error, McpError::Spawn { ref server, .. } if server == "files"));
/// assert!(error.to_string().starts_with("MCP server `files`: could not start"));
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The server's process could not be started.
    #[error("MCP server `{server}`: could not start `{command}`: {source}")]
    Spawn {
        /// The server's name.
        server: String,
        /// The program.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The handshake failed: the server closed the connection, answered
    /// out of protocol or refused.
    #[error("MCP server `{server}`: the handshake failed: {reason}{stderr}", stderr = stderr_note(.stderr))]
    Handshake {
        /// The server's name.
        server: String,
        /// What went wrong.
        reason: String,
        /// The last lines the server wrote to its standard error.
        stderr: Vec<String>,
    },
    /// The server did not finish starting (handshake and tool listing) in
    /// time.
    #[error(
        "MCP server `{server}`: no answer to the {stage} within {after:?}{stderr}",
        stderr = stderr_note(.stderr)
    )]
    Timeout {
        /// The server's name.
        server: String,
        /// What was waited for (`handshake`, `tool listing`).
        stage: &'static str,
        /// How long.
        after: Duration,
        /// The last lines the server wrote to its standard error.
        stderr: Vec<String>,
    },
    /// Listing the tools failed.
    #[error("MCP server `{server}`: listing its tools failed: {reason}")]
    Listing {
        /// The server's name.
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// A tool's name is empty once normalized.
    #[error(
        "MCP server `{server}`: the tool name {tool:?} has no letter or digit to name a tool by"
    )]
    InvalidToolName {
        /// The server's name.
        server: String,
        /// The name as the server gave it (escaped, cut).
        tool: String,
    },
    /// A tool's input schema is not a JSON schema of an object.
    #[error(
        "MCP server `{server}`: the input schema of tool `{tool}` is not an object schema \
         ({reason}); leave the tool out with `only([...])`"
    )]
    InvalidSchema {
        /// The server's name.
        server: String,
        /// The tool.
        tool: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Two tools of the server have the same name once normalized (and
    /// prefixed).
    #[error(
        "MCP server `{server}`: tools {first:?} and {second:?} would both be named `{name}`; \
         leave one out with `only([...])`"
    )]
    CollidingTools {
        /// The server's name.
        server: String,
        /// The first tool, as the server names it.
        first: String,
        /// The second tool, as the server names it.
        second: String,
        /// The name both would have.
        name: String,
    },
    /// [`McpServerBuilder::only`] names tools the server does not have.
    #[error("MCP server `{server}` has no tool named {missing:?}; it has {available:?}")]
    UnknownTools {
        /// The server's name.
        server: String,
        /// The names it does not have.
        missing: Vec<String>,
        /// The names it has.
        available: Vec<String>,
    },
    /// The builder was given something it cannot use (an empty server
    /// name, a URL that is not `http://`).
    #[error("MCP server `{server}`: {reason}")]
    InvalidConfig {
        /// The server's name.
        server: String,
        /// What is wrong.
        reason: String,
    },
}

fn stderr_note(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("; its last output:\n  {}", lines.join("\n  "))
    }
}

/// Server-supplied text fit to quote: control characters escaped, cut on a
/// character boundary.
fn quote(text: &str, limit: usize) -> String {
    let escaped = escape_control(text);
    if escaped.len() <= limit {
        return escaped.into_owned();
    }
    let mut end = limit;
    while !escaped.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &escaped[..end])
}

/// How to reach the server.
enum Connection {
    Stdio(Box<tokio::process::Command>),
    Http(String),
    Io(
        Box<dyn AsyncRead + Send + Unpin>,
        Box<dyn AsyncWrite + Send + Unpin>,
    ),
}

/// How to connect to one MCP server: made by [`McpServer::stdio`],
/// [`McpServer::http`] or [`McpServer::io`], finished by
/// [`connect`](Self::connect).
pub struct McpServerBuilder {
    name: String,
    connection: Connection,
    prefix: Option<String>,
    only: Option<Vec<String>>,
    connect_timeout: Duration,
    call_timeout: Option<Duration>,
    bearer_token: Option<String>,
    max_message_bytes: usize,
}

impl fmt::Debug for McpServerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let connection = match &self.connection {
            Connection::Stdio(command) => format!("stdio {:?}", command.as_std().get_program()),
            Connection::Http(url) => format!("http {url}"),
            Connection::Io(..) => "io".to_owned(),
        };
        f.debug_struct("McpServerBuilder")
            .field("name", &self.name)
            .field("connection", &connection)
            .field("prefix", &self.prefix)
            .field("only", &self.only)
            .field("connect_timeout", &self.connect_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "…"))
            .field("max_message_bytes", &self.max_message_bytes)
            .finish()
    }
}

impl McpServerBuilder {
    fn new(name: impl Into<String>, connection: Connection) -> Self {
        McpServerBuilder {
            name: name.into(),
            connection,
            prefix: None,
            only: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            call_timeout: None,
            bearer_token: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
        }
    }

    /// Starts every tool name with `prefix` and an underscore
    /// (`fs` gives `fs_read_file`), so that the tools of two servers
    /// cannot collide.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// Keeps only these tools (named as the server names them, before any
    /// prefix) and drops the rest: least privilege, and a way past a tool
    /// whose schema or name is unusable. Naming a tool the server does not
    /// have fails [`connect`](Self::connect).
    pub fn only<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.only = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// How long to wait for the server to start, answer the handshake and
    /// list its tools ([`DEFAULT_CONNECT_TIMEOUT`] unless set).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Gives up on a call of one of the server's tools after `timeout`
    /// (see [`Tool::with_timeout`]); without it, the crew's
    /// [`tool_timeout`](crate::CrewBuilder::tool_timeout) applies.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = Some(timeout);
        self
    }

    /// Sends `Authorization: Bearer <token>` with every request to an HTTP
    /// server (ignored for the other transports). The token never appears
    /// in `Debug` output or errors.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(token.into());
        self
    }

    /// The most bytes one message from the server may hold
    /// ([`DEFAULT_MAX_MESSAGE_BYTES`] unless set). Over stdio or a pipe, a
    /// longer message closes the session and fails every call waiting on
    /// it at once; over HTTP, a longer answer fails its call.
    ///
    /// ```no_run
    /// use crew_runtime::mcp::McpServer;
    ///
    /// # async fn run() -> Result<(), crew_runtime::mcp::McpError> {
    /// let command = tokio::process::Command::new("report-server");
    /// let reports = McpServer::stdio("reports", command)
    ///     .max_message_bytes(64 * 1024 * 1024)
    ///     .connect()
    ///     .await?;
    /// # let _ = reports;
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Connects, lists the server's tools (every page) and checks them.
    ///
    /// Fails, within the connect timeout, when the server cannot be
    /// started, breaks the protocol, does not answer, or lists tools that
    /// cannot be crew tools: a name that normalizes to nothing, an input
    /// schema that is not an object schema, two tools that would share a
    /// name. Must be called inside a tokio runtime, which then runs the
    /// session.
    pub async fn connect(self) -> Result<McpServer, McpError> {
        let McpServerBuilder {
            name,
            connection,
            prefix,
            only,
            connect_timeout,
            call_timeout,
            bearer_token,
            max_message_bytes,
        } = self;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(McpError::InvalidConfig {
                server: name,
                reason: "connecting needs a tokio runtime, which then runs the session".to_owned(),
            });
        }
        if normalize_tool_name(&name).is_empty() {
            return Err(McpError::InvalidConfig {
                server: name,
                reason: "a server needs a name with a letter or digit in it".to_owned(),
            });
        }
        let name: Arc<str> = Arc::from(name);
        let stderr = Arc::new(StderrTail::default());
        let limit = Arc::new(MessageLimit::new(max_message_bytes));
        let deadline = tokio::time::Instant::now() + connect_timeout;
        let timeout = |stage| McpError::Timeout {
            server: name.to_string(),
            stage,
            after: connect_timeout,
            stderr: stderr.lines(),
        };

        let client = client_info();
        let mut http = None;
        let (started, process_id) = match connection {
            Connection::Stdio(command) => {
                let (process, process_id) = spawn(&name, *command, &stderr, &limit)?;
                (client.serve(process).boxed(), process_id)
            }
            Connection::Http(url) => {
                let config = http_config(&name, url, bearer_token, max_message_bytes)?;
                let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
                http = Some(http_answer_too_large(&transport));
                (client.serve(transport).boxed(), None)
            }
            Connection::Io(reader, writer) => {
                let reader = BoundedLines::new(reader, Arc::clone(&limit));
                // The reader bounds each line; rmcp's own bound would skip
                // a long line rather than end the session.
                let transport =
                    rmcp::transport::async_rw::AsyncRwTransport::new_client(reader, writer)
                        .with_max_line_length(usize::MAX);
                (client.serve(transport).boxed(), None)
            }
        };
        let service = match tokio::time::timeout_at(deadline, started).await {
            Err(_) => return Err(timeout("handshake")),
            Ok(Err(error)) => {
                // Let the server's last words reach the tail.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let reason = if limit.was_exceeded() {
                    too_long(&limit)
                } else {
                    quote(&error.to_string(), QUOTE_BYTES)
                };
                return Err(McpError::Handshake {
                    server: name.to_string(),
                    reason,
                    stderr: stderr.lines(),
                });
            }
            Ok(Ok(service)) => service,
        };
        // A message past the limit ends the session; the listing then
        // fails at once rather than when rmcp has wound the session down.
        let listing = async {
            tokio::select! {
                biased;
                () = limit.exceeded() => Err(too_long(&limit)),
                listed = list_tools(service.peer()) => listed.map_err(|reason| {
                    if limit.was_exceeded() { too_long(&limit) } else { reason }
                }),
            }
        };
        let listed = match tokio::time::timeout_at(deadline, listing).await {
            Err(_) => return Err(timeout("tool listing")),
            Ok(Err(reason)) => {
                return Err(McpError::Listing {
                    server: name.to_string(),
                    reason,
                });
            }
            Ok(Ok(tools)) => tools,
        };
        let session = Arc::new(Session {
            name: Arc::clone(&name),
            peer: service.peer().clone(),
            service: tokio::sync::Mutex::new(Some(service)),
            stderr,
            process_id,
            limit,
            http,
        });
        let tools = crew_tools(&session, listed, prefix.as_deref(), only, call_timeout)?;
        Ok(McpServer { session, tools })
    }
}

/// Why connecting failed, when the server sent a message past the limit.
fn too_long(limit: &MessageLimit) -> String {
    format!(
        "it sent {}, the most one message may hold; the session is closed",
        limit.breach()
    )
}

/// The identity this client gives servers.
fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("crew-runtime", env!("CARGO_PKG_VERSION")),
    )
}

/// Starts a stdio server: its own process group (so a launcher and what
/// it starts stop together), killed if dropped, standard output read
/// within the message limit, standard error read into the tail and the
/// log.
fn spawn(
    name: &Arc<str>,
    mut command: tokio::process::Command,
    stderr: &Arc<StderrTail>,
    limit: &Arc<MessageLimit>,
) -> Result<(ChildTransport, Option<u32>), McpError> {
    let program = command
        .as_std()
        .get_program()
        .to_string_lossy()
        .into_owned();
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[allow(unused_mut)]
    let mut wrapped = process_wrap::tokio::CommandWrap::from(command);
    #[cfg(unix)]
    {
        wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
        wrapped.wrap(process_wrap::tokio::KillOnDrop);
    }
    let (process, error_output) = wrapped
        .spawn()
        .and_then(|child| ChildTransport::new(child, Arc::clone(limit)))
        .map_err(|source| McpError::Spawn {
            server: name.to_string(),
            command: program,
            source,
        })?;
    let process_id = process.id();
    if let Some(error_output) = error_output {
        tokio::spawn(Arc::clone(stderr).follow(Arc::clone(name), error_output));
    }
    Ok((process, process_id))
}

fn http_config(
    name: &str,
    url: String,
    bearer_token: Option<String>,
    max_message_bytes: usize,
) -> Result<rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig, McpError>
{
    let lowercase = url.to_ascii_lowercase();
    if lowercase.starts_with("https://") {
        return Err(McpError::InvalidConfig {
            server: name.to_owned(),
            reason: "https:// MCP servers are not supported yet (the MCP HTTP client is built \
                     without TLS); reach the server over http:// on a trusted network, or \
                     through a local TLS proxy"
                .to_owned(),
        });
    }
    if !lowercase.starts_with("http://") {
        return Err(McpError::InvalidConfig {
            server: name.to_owned(),
            reason: format!("{:?} is not an http:// URL", quote(&url, QUOTE_BYTES)),
        });
    }
    let mut config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url)
            .max_json_response_size(max_message_bytes)
            .max_sse_event_size(max_message_bytes);
    if let Some(token) = bearer_token {
        config = config.auth_header(token);
    }
    Ok(config)
}

/// Every page of the server's tool listing, within limits: a server that
/// pages forever, repeats a cursor or lists too many tools is refused.
async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<rmcp::model::Tool>, String> {
    let mut tools = Vec::new();
    let mut cursors = HashSet::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let page = peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .map_err(|error| match error {
                ServiceError::UnexpectedResponse => {
                    "it answered `tools/list` with something that is not a tool listing".to_owned()
                }
                other => quote(&other.to_string(), QUOTE_BYTES),
            })?;
        tools.extend(page.tools);
        if tools.len() > MAX_TOOLS {
            return Err(format!("it lists more than {MAX_TOOLS} tools"));
        }
        match page.next_cursor {
            None => return Ok(tools),
            Some(next) if !cursors.insert(next.clone()) => {
                return Err(format!(
                    "it returned the page cursor {:?} twice",
                    quote(&next, QUOTE_BYTES)
                ));
            }
            Some(next) => cursor = Some(next),
        }
    }
    Err(format!("it kept paginating past {MAX_PAGES} pages"))
}

/// The server's tools as crew tools, checked: usable names, object
/// schemas, no two alike.
fn crew_tools(
    session: &Arc<Session>,
    listed: Vec<rmcp::model::Tool>,
    prefix: Option<&str>,
    only: Option<Vec<String>>,
    call_timeout: Option<Duration>,
) -> Result<Vec<Tool>, McpError> {
    let server = || session.name.to_string();
    let listed = match only {
        None => listed,
        Some(wanted) => {
            let missing: Vec<String> = wanted
                .iter()
                .filter(|w| !listed.iter().any(|t| t.name == w.as_str()))
                .cloned()
                .collect();
            if !missing.is_empty() {
                return Err(McpError::UnknownTools {
                    server: server(),
                    missing,
                    available: listed.iter().map(|t| quote(&t.name, QUOTE_BYTES)).collect(),
                });
            }
            listed
                .into_iter()
                .filter(|t| wanted.iter().any(|w| t.name == w.as_str()))
                .collect()
        }
    };
    let mut names: HashMap<String, String> = HashMap::new();
    let mut tools = Vec::with_capacity(listed.len());
    for listed in listed {
        let remote = listed.name.to_string();
        // The name as the server spelled it (behind the prefix): the
        // crew's look-alike checks read it, not the normalized one.
        let spelled = match prefix {
            Some(prefix) => format!("{prefix}_{remote}"),
            None => remote.clone(),
        };
        let local = normalize_tool_name(&spelled);
        if normalize_tool_name(&remote).is_empty() {
            return Err(McpError::InvalidToolName {
                server: server(),
                tool: quote(&remote, QUOTE_BYTES),
            });
        }
        if let Some(first) = names.insert(local.clone(), remote.clone()) {
            return Err(McpError::CollidingTools {
                server: server(),
                first: quote(&first, QUOTE_BYTES),
                second: quote(&remote, QUOTE_BYTES),
                name: local,
            });
        }
        let schema = Value::Object((*listed.input_schema).clone());
        if let Err(reason) = check_schema(&schema) {
            return Err(McpError::InvalidSchema {
                server: server(),
                tool: quote(&remote, QUOTE_BYTES),
                reason,
            });
        }
        let description = listed
            .description
            .as_deref()
            .or(listed.title.as_deref())
            .unwrap_or_default();
        let mut annotations = ToolAnnotations::new();
        if let Some(given) = &listed.annotations {
            annotations.read_only = given.read_only_hint;
            annotations.destructive = given.destructive_hint;
            annotations.idempotent = given.idempotent_hint;
            annotations.open_world = given.open_world_hint;
            annotations.title = given.title.clone();
        }
        annotations.title = annotations.title.or(listed.title.clone());

        let remote: Arc<str> = Arc::from(remote);
        let caller = Arc::clone(session);
        let invoke = move |input: &Map<String, Value>| {
            let caller = Arc::clone(&caller);
            let remote = Arc::clone(&remote);
            let arguments = input.clone();
            ToolRun::Async(Box::pin(async move {
                // Read as the call runs: the runtime sets it around the
                // tool's future.
                let key = CurrentCall::get().and_then(|call| call.idempotency_key().cloned());
                caller.call(&remote, arguments, key).await
            }))
        };
        let tool = Tool::from_parts(
            spelled,
            cut(description, MAX_DESCRIPTION_BYTES),
            schema,
            Arc::new(invoke),
        )
        .with_annotations(annotations)
        .of_mcp_server(Arc::clone(&session.name));
        tools.push(match call_timeout {
            Some(timeout) => tool.with_timeout(timeout),
            None => tool,
        });
    }
    Ok(tools)
}

/// Whether a tool's input schema describes an object, as MCP requires.
fn check_schema(schema: &Value) -> Result<(), String> {
    match schema.get("type") {
        Some(Value::String(kind)) if kind == "object" => {}
        Some(other) => return Err(format!("its type is {}", quote(&other.to_string(), 80))),
        None => return Err("it has no `type`".to_owned()),
    }
    match schema.get("properties") {
        None | Some(Value::Object(_)) => Ok(()),
        Some(_) => Err("its `properties` is not an object".to_owned()),
    }
}

fn cut(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The session with one server, shared by the server value and its tools.
struct Session {
    name: Arc<str>,
    peer: Peer<RoleClient>,
    /// Dropped with the last tool and server value: that closes the
    /// connection and stops a stdio server.
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, ClientConfig>>>,
    stderr: Arc<StderrTail>,
    process_id: Option<u32>,
    /// Over stdio or a pipe: exceeded once the server sent a message too
    /// long, which closed the session.
    limit: Arc<MessageLimit>,
    /// Over HTTP: how to tell an answer past the limit.
    http: Option<AnswerTooLarge>,
}

impl Session {
    /// One `tools/call`, on the arguments the PRE chain left, with the
    /// call's idempotency key (if it has one) in the request's `_meta`
    /// under [`IdempotencyKey::MCP_META_KEY`]. Dropping the future (a
    /// timeout, a cancelled kickoff) tells the server the request is
    /// cancelled.
    async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        key: Option<IdempotencyKey>,
    ) -> ToolResult {
        if self.limit.was_exceeded() {
            return Err(ToolFailure::Failed(self.too_long()));
        }
        let mut request = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        if let Some(key) = key {
            let mut meta = RequestMetaObject::new();
            meta.insert(
                IdempotencyKey::MCP_META_KEY.to_owned(),
                Value::String(key.as_str().to_owned()),
            );
            request.meta = Some(meta);
        }
        // A message past the limit ends the session: the call fails then,
        // not when rmcp has wound the session down (which, for a process,
        // waits for it to exit).
        let answer = tokio::select! {
            biased;
            () = self.limit.exceeded() => return Err(ToolFailure::Failed(self.too_long())),
            answer = self.peer.call_tool(request) => answer,
        };
        match answer {
            Ok(result) => match serde_json::to_value(&result) {
                Ok(json) => render::outcome(json),
                Err(error) => Err(ToolFailure::Unrenderable(error.to_string())),
            },
            Err(error) => Err(ToolFailure::Failed(self.failure(&error))),
        }
    }

    /// Why every call fails once the server sent a message past the limit.
    fn too_long(&self) -> String {
        format!(
            "the MCP server `{}` sent {}, the most one message may hold; the session is closed \
             and its tools cannot run",
            self.name,
            self.limit.breach()
        )
    }

    /// A failed request, as the agent reads it. The server's standard
    /// error goes to the log, not to the model.
    fn failure(&self, error: &ServiceError) -> String {
        let name = &self.name;
        let lines = self.stderr.lines();
        if !lines.is_empty() {
            tracing::warn!(
                target: "crew_runtime::mcp",
                server = %name,
                "a call failed ({error}); the server's last output:\n  {}",
                lines.join("\n  ")
            );
        }
        if self.limit.was_exceeded() {
            return self.too_long();
        }
        if let Some(answer_too_large) = self.http {
            if let Some(limit) = answer_too_large(error) {
                return format!(
                    "the MCP server `{name}` answered with a message larger than {}, the most \
                     one message may hold",
                    size(limit)
                );
            }
            // rmcp ends an answer's event stream at an event past the
            // limit and fails the call as if the session had closed; the
            // session goes on.
            if matches!(error, ServiceError::TransportClosed) && !self.peer.is_transport_closed() {
                return format!(
                    "the MCP server `{name}` ended the answer's event stream before the answer, \
                     or sent an answer larger than {}, the most one message may hold",
                    size(self.limit.bytes())
                );
            }
        }
        match error {
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => format!(
                "the MCP server `{name}` is gone (its connection closed); its tools cannot run"
            ),
            ServiceError::McpError(data) => format!(
                "the MCP server `{name}` refused the call: {}",
                quote(&data.message, QUOTE_BYTES)
            ),
            ServiceError::UnexpectedResponse => {
                format!("the MCP server `{name}` answered the call with something else")
            }
            other => format!(
                "the MCP server `{name}` failed: {}",
                quote(&other.to_string(), QUOTE_BYTES)
            ),
        }
    }
}

/// The limit an HTTP answer went past, when that is why a request failed.
type AnswerTooLarge = fn(&ServiceError) -> Option<usize>;

/// Over HTTP, rmcp refuses a body past the limit before reading it whole,
/// and fails the request with its client's error type (the `reqwest` rmcp
/// builds, not the one this crate uses): read from the transport's type.
fn http_answer_too_large<C: StreamableHttpClient>(
    _: &rmcp::transport::StreamableHttpClientTransport<C>,
) -> AnswerTooLarge {
    |error| {
        let ServiceError::TransportSend(error) = error else {
            return None;
        };
        match error.error.downcast_ref::<StreamableHttpError<C::Error>>() {
            Some(StreamableHttpError::ResponseBodyTooLarge { max_size }) => Some(*max_size),
            _ => None,
        }
    }
}

/// The last lines a stdio server wrote to its standard error.
#[derive(Default)]
struct StderrTail {
    lines: Mutex<VecDeque<String>>,
}

impl StderrTail {
    /// Reads the server's standard error to its end, whatever it holds:
    /// bytes that are not UTF-8 are replaced, lines are cut to a few
    /// hundred bytes, and reading never stops early (a full pipe would
    /// stall the server).
    async fn follow(self: Arc<Self>, server: Arc<str>, mut output: tokio::process::ChildStderr) {
        let mut chunk = [0u8; 4096];
        let mut line = Vec::new();
        loop {
            let read = match output.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(read) => read,
            };
            for &byte in &chunk[..read] {
                if byte == b'\n' {
                    self.keep(&server, &line);
                    line.clear();
                } else if line.len() < STDERR_LINE_BYTES * 4 {
                    line.push(byte);
                }
            }
        }
        if !line.is_empty() {
            self.keep(&server, &line);
        }
    }

    fn keep(&self, server: &str, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        let line = quote(line.trim_end_matches('\r'), STDERR_LINE_BYTES);
        tracing::debug!(target: "crew_runtime::mcp", server = %server, "{line}");
        if let Ok(mut kept) = self.lines.lock() {
            if kept.len() == STDERR_LINES {
                kept.pop_front();
            }
            kept.push_back(line);
        }
    }

    fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .map(|kept| kept.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// A connected MCP server and its tools.
///
/// Cloning is cheap and shares the session. See the [module
/// documentation](self) for names, capabilities, results and lifetime.
///
/// The session itself is not reachable: there is no method that calls a
/// tool or sends a request, so the only way to run an MCP tool is an
/// agent's call inside a crew, through the hooks.
///
/// ```compile_fail,E0599
/// # async fn run(server: crew_runtime::mcp::McpServer) {
/// server.call_tool("write_file", Default::default()).await; // no such method
/// # }
/// ```
///
/// ```compile_fail,E0599
/// # fn run(server: crew_runtime::mcp::McpServer) {
/// let _peer = server.peer(); // no such method
/// # }
/// ```
///
/// ```no_run
/// use std::time::Duration;
/// use crew_runtime::mcp::McpServer;
///
/// # async fn run() -> Result<(), crew_runtime::mcp::McpError> {
/// let search = McpServer::http("search", "http://127.0.0.1:8931/mcp")
///     .prefix("search")
///     .only(["web_search"])
///     .call_timeout(Duration::from_secs(20))
///     .connect()
///     .await?;
/// assert_eq!(search.tools()[0].name(), "search_web_search");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct McpServer {
    session: Arc<Session>,
    tools: Vec<Tool>,
}

impl McpServer {
    /// A server started as a child process, spoken to over its standard
    /// input and output. Set the program's arguments, environment and
    /// working directory on `command`. The process gets a process group
    /// of its own (on Unix) and is stopped when the session closes; its
    /// standard error is logged (target `crew_runtime::mcp`, level debug)
    /// and its last lines are quoted in connection errors.
    pub fn stdio(
        name: impl Into<String>,
        command: impl Into<tokio::process::Command>,
    ) -> McpServerBuilder {
        McpServerBuilder::new(name, Connection::Stdio(Box::new(command.into())))
    }

    /// A server reached over streamable HTTP at `url`. Only `http://` for
    /// now: an `https://` URL fails [`connect`](McpServerBuilder::connect)
    /// with [`McpError::InvalidConfig`] saying so.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> McpServerBuilder {
        McpServerBuilder::new(name, Connection::Http(url.into()))
    }

    /// A server spoken to over any pair of byte streams (newline-delimited
    /// JSON-RPC, as over stdio): an in-process server on a
    /// `tokio::io::duplex`, a socket.
    pub fn io<R, W>(name: impl Into<String>, reader: R, writer: W) -> McpServerBuilder
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        McpServerBuilder::new(name, Connection::Io(Box::new(reader), Box::new(writer)))
    }

    /// The name this server was given.
    pub fn name(&self) -> &str {
        &self.session.name
    }

    /// The server's tools, as crew tools.
    pub fn tools(&self) -> Vec<Tool> {
        self.tools.clone()
    }

    /// One of the server's tools, by its crew name (normalized, prefixed).
    pub fn tool(&self, name: &str) -> Option<Tool> {
        let name = normalize_tool_name(name);
        self.tools.iter().find(|t| t.name() == name).cloned()
    }

    /// The process id of a stdio server.
    pub fn process_id(&self) -> Option<u32> {
        self.session.process_id
    }

    /// The last lines a stdio server wrote to its standard error (control
    /// characters escaped).
    pub fn stderr_tail(&self) -> Vec<String> {
        self.session.stderr.lines()
    }

    /// Closes the session now, for the server value and every tool: a
    /// stdio server's input is closed, then the process is asked to stop
    /// and killed if it does not. Calls made afterwards fail with a message
    /// saying the server is gone. Waits at most `grace` for the session to
    /// wind down.
    pub async fn shutdown(&self, grace: Duration) {
        let service = self.session.service.lock().await.take();
        if let Some(mut service) = service {
            let _ = service.close_with_timeout(grace).await;
        }
    }
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.session.name)
            .field("process_id", &self.session.process_id)
            .field(
                "tools",
                &self.tools.iter().map(Tool::name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn object_schemas_pass_and_others_say_why() {
        assert!(check_schema(&json!({"type": "object", "properties": {}})).is_ok());
        assert!(check_schema(&json!({"type": "object"})).is_ok());
        let refused = [
            json!({"type": "string"}),
            json!({}),
            json!({"type": ["object", "null"]}),
            json!({"type": "object", "properties": []}),
        ];
        for schema in refused {
            assert!(check_schema(&schema).is_err(), "{schema}");
        }
    }

    #[test]
    fn quoted_text_is_escaped_and_cut() {
        assert_eq!(quote("a\u{1b}[2Jb", 100), r"a\x1b[2Jb");
        assert_eq!(quote("ééé", 3), "é…");
    }
}
