//! A small MCP server for the workspace's tests and examples.
//!
//! [`DemoServer`] offers two kinds of tools:
//!
//! - **Filesystem tools** confined to one root directory, with the names,
//!   arguments, titles, annotations and result texts of the reference MCP
//!   filesystem server (`@modelcontextprotocol/server-filesystem`):
//!   `read_text_file`, `list_directory`, `write_file` and
//!   `list_allowed_directories`. A crew scripted against one works against
//!   the other.
//! - **Fixture tools** covering every annotation and result kind: `echo`,
//!   `plain` (no annotations), `delete_record` (destructive), `set_flag`
//!   (idempotent), `web_lookup` (open world), `fail` (a tool error), `slow`,
//!   `stats` (structured content and text), `structured_only` (structured
//!   content alone), `picture` (an image, an embedded resource and a
//!   resource link) and `echo_meta` (the request's `_meta`, as JSON).
//!
//! It is served over stdio ([`serve_stdio`]), any byte stream
//! ([`serve_io`], e.g. an in-process [`tokio::io::duplex`]) or streamable
//! HTTP ([`serve_http`]). Clones share a call log ([`DemoServer::calls`]),
//! so an in-process test can check what the server really received.
//! [`serve_misbehaving_stdio`] plays hostile servers instead, for the
//! tests of MCP clients.
//!
//! # Running it
//!
//! ```text
//! mcp-demo-server [--root DIR] [--http ADDR] [--misbehave MODE]
//! ```
//!
//! By default it serves stdio with the current directory as root;
//! `--http 127.0.0.1:0` serves streamable HTTP instead and prints
//! `listening on <url>` to standard error. `--misbehave` takes one of
//! `garbage`, `silent`, `bad-schema`, `colliding`, `exit-on-call`,
//! `paginated` (see [`Misbehavior`]).
//!
//! # In a test
//!
//! ```no_run
//! # async fn run() -> Result<(), mcp_demo_server::Error> {
//! use mcp_demo_server::{DemoServer, serve_io};
//!
//! let server = DemoServer::new(std::env::temp_dir());
//! let (client_end, server_end) = tokio::io::duplex(64 * 1024);
//! let (reader, writer) = tokio::io::split(server_end);
//! let serving = tokio::spawn(serve_io(server.clone(), reader, writer));
//! // ...an MCP client speaks on `client_end`, then closes it...
//! # drop(client_end);
//! serving.await.map_err(mcp_demo_server::Error::Task)??;
//! assert!(server.calls().iter().all(|(name, _)| name != "write_file"));
//! # Ok(())
//! # }
//! ```

mod confine;
mod error;
mod misbehave;
mod serve;
mod server;
mod tools;

#[doc(inline)]
pub use error::Error;
#[doc(inline)]
pub use misbehave::{Misbehavior, serve_misbehaving_stdio};
#[doc(inline)]
pub use serve::{HttpServer, serve_http, serve_io, serve_stdio};
#[doc(inline)]
pub use server::DemoServer;
