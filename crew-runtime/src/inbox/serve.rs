//! Serving the inbox alone: an accept loop that holds at most so many
//! connections, cuts those that are slow to send their headers or sit
//! idle, and tells the handlers each connection's peer address.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt as _;

/// How long the loop rests after an accept that failed for want of
/// resources (descriptors, memory), rather than spinning on it.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `router` on `listener` until the process stops.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    header_timeout: Duration,
    max_connections: usize,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    loop {
        // At the cap, stop accepting: new connections wait in the
        // kernel's queue instead of taking descriptors.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return Err(std::io::Error::other("the connection slots were closed"));
        };
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) if gone_before_accepted(&error) => continue,
            Err(error) => {
                tracing::warn!(%error, "the inbox cannot accept a connection now");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request
                .extensions_mut()
                .insert(ConnectInfo::<SocketAddr>(peer));
            router.clone().oneshot(request)
        });
        let connection = http.serve_connection(TokioIo::new(stream), service);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, %peer, "an inbox connection ended");
            }
            drop(slot);
        });
    }
}

/// Whether an accept failed for that one connection only (the client
/// went away before it was accepted): the next one may go through.
fn gone_before_accepted(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionRefused
    )
}
