//! The crate's error type.

use rmcp::service::ServerInitializeError;

/// What can go wrong while serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The client did not complete MCP initialization (it closed the
    /// connection first, or sent something else than `initialize`).
    #[error("MCP initialization with the client failed: {0}")]
    Initialize(#[source] Box<ServerInitializeError>),
    /// The task running the MCP service panicked or was cancelled.
    #[error("the MCP service task ended abnormally: {0}")]
    Task(#[source] tokio::task::JoinError),
    /// Reading from or writing to the transport, or binding it, failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl From<ServerInitializeError> for Error {
    fn from(error: ServerInitializeError) -> Self {
        Self::Initialize(Box::new(error))
    }
}
