//! Serving a [`DemoServer`] over stdio, any byte stream, or streamable HTTP.

use rmcp::{
    ServiceExt,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::session::local::LocalSessionManager,
    },
};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpListener,
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;

use crate::{DemoServer, Error};

/// Serves `server` on the process's standard input and output until the
/// client closes its end.
///
/// Nothing but MCP messages is written to standard output.
///
/// # Errors
///
/// [`Error::Initialize`] if the client does not complete initialization,
/// [`Error::Task`] if the service task ends abnormally.
pub async fn serve_stdio(server: DemoServer) -> Result<(), Error> {
    let (stdin, stdout) = rmcp::transport::stdio();
    serve_io(server, stdin, stdout).await
}

/// Serves `server` on any byte stream pair, newline-delimited JSON-RPC as
/// on stdio, until the client closes its end: an in-process pipe such as
/// [`tokio::io::duplex`], a socket, a child's pipes.
///
/// ```no_run
/// # async fn run() {
/// let server = mcp_demo_server::DemoServer::new(".");
/// let (client_end, server_end) = tokio::io::duplex(64 * 1024);
/// let (reader, writer) = tokio::io::split(server_end);
/// tokio::spawn(mcp_demo_server::serve_io(server.clone(), reader, writer));
/// // ...connect an MCP client to `client_end`, then check `server.calls()`.
/// # drop(client_end);
/// # }
/// ```
///
/// # Errors
///
/// [`Error::Initialize`] if the client does not complete initialization,
/// [`Error::Task`] if the service task ends abnormally.
pub async fn serve_io<R, W>(server: DemoServer, reader: R, writer: W) -> Result<(), Error>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let running = server.serve((reader, writer)).await?;
    running.waiting().await.map_err(Error::Task)?;
    Ok(())
}

/// Serves `server` over streamable HTTP at path `/mcp` of `listener`, on a
/// spawned task, until the returned handle is dropped or shut down.
///
/// Each MCP session gets a clone of `server`, so every session shares its
/// root and call log. Only loopback `Host` headers are accepted (rmcp's
/// default protection against DNS rebinding).
///
/// ```no_run
/// # async fn run() -> Result<(), mcp_demo_server::Error> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await
///     .map_err(|source| mcp_demo_server::Error::Io { context: "bind", source })?;
/// let http = mcp_demo_server::serve_http(mcp_demo_server::DemoServer::new("."), listener).await?;
/// println!("MCP at {}", http.url());
/// http.shutdown().await;
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// [`Error::Io`] if the listener's address cannot be read.
pub async fn serve_http(server: DemoServer, listener: TcpListener) -> Result<HttpServer, Error> {
    let address = listener.local_addr().map_err(|source| Error::Io {
        context: "cannot read the HTTP listener's address",
        source,
    })?;
    let stop = CancellationToken::new();
    let config = StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
    let service: StreamableHttpService<DemoServer, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(server.clone()), Default::default(), config);
    let router = axum::Router::new().nest_service("/mcp", service);
    let task = tokio::spawn({
        let stop = stop.clone();
        async move {
            // An error here means accepting connections failed for good;
            // the handle's owner sees it as a server that stopped answering.
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
        }
    });
    Ok(HttpServer {
        url: format!("http://{address}/mcp"),
        stop,
        task: Some(task),
    })
}

/// A streamable HTTP server started by [`serve_http`]. It stops serving,
/// and ends its MCP sessions, when dropped or [shut down](Self::shutdown).
#[derive(Debug)]
pub struct HttpServer {
    url: String,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// The MCP endpoint, e.g. `http://127.0.0.1:38117/mcp`.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Stops accepting connections, ends every session, and waits for the
    /// open connections to close.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            // The task only ends by finishing or by a panic inside axum;
            // either way the server no longer serves.
            let _ = task.await;
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
