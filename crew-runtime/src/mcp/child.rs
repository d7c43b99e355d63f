//! A stdio server's process, owned here rather than by rmcp's
//! `TokioChildProcess`, so that its standard output is read through
//! [`BoundedLines`]. Stopping it follows MCP's stdio shutdown, as rmcp's
//! does: close its input, wait, `SIGTERM` (on Unix), wait, kill.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use process_wrap::tokio::ChildWrapper;
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use super::bounded::{BoundedLines, MessageLimit};

/// How long each step of stopping the server waits for it to exit.
const EXIT_WAIT: Duration = Duration::from_secs(3);

/// A server process and the MCP transport over its standard input and
/// output.
pub(super) struct ChildTransport {
    child: ChildGuard,
    transport: AsyncRwTransport<RoleClient, BoundedLines<ChildStdout>, ChildStdin>,
}

impl ChildTransport {
    /// Takes over a spawned process whose standard input and output are
    /// piped; returns it with the process's standard error, if piped.
    pub(super) fn new(
        mut child: Box<dyn ChildWrapper>,
        limit: Arc<MessageLimit>,
    ) -> io::Result<(Self, Option<ChildStderr>)> {
        let input = child.stdin().take();
        let output = child.stdout().take();
        let error_output = child.stderr().take();
        // Dropping the guard stops the process if the pipes are missing.
        let child = ChildGuard(Some(child));
        let (Some(input), Some(output)) = (input, output) else {
            return Err(io::Error::other(
                "its standard input and output were not piped",
            ));
        };
        // The reader bounds each line; rmcp's own bound would skip a long
        // line rather than end the session.
        let transport = AsyncRwTransport::new_client(BoundedLines::new(output, limit), input)
            .with_max_line_length(usize::MAX);
        Ok((ChildTransport { child, transport }, error_output))
    }

    /// The process id, while it runs.
    pub(super) fn id(&self) -> Option<u32> {
        self.child.0.as_ref().and_then(|child| child.id())
    }

    async fn shut_down(&mut self) -> io::Result<()> {
        let Some(child) = self.child.0.as_mut() else {
            return Ok(());
        };
        // The process stays in its guard until it is known to be gone, so
        // that a shutdown cut short still kills it.
        self.transport.close().await?;
        if exited(child).await? {
            self.child.0 = None;
            return Ok(());
        }
        #[cfg(unix)]
        match child.signal(libc::SIGTERM) {
            Ok(()) => {
                if exited(child).await? {
                    self.child.0 = None;
                    return Ok(());
                }
            }
            Err(error) => tracing::debug!(
                target: "crew_runtime::mcp",
                "could not send SIGTERM to an MCP server: {error}"
            ),
        }
        Box::into_pin(child.kill()).await?;
        self.child.0 = None;
        Ok(())
    }
}

/// Whether the process exited within [`EXIT_WAIT`].
async fn exited(child: &mut Box<dyn ChildWrapper>) -> io::Result<bool> {
    match tokio::time::timeout(EXIT_WAIT, child.wait()).await {
        Ok(status) => status.map(|_| true),
        Err(_) => Ok(false),
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shut_down()
    }
}

/// Kills the process (its whole group, on Unix) when dropped.
struct ChildGuard(Option<Box<dyn ChildWrapper>>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        // Killed at once, so that a runtime shutting down cannot leave the
        // group running; waiting then reaps its processes.
        if let Err(error) = child.start_kill() {
            tracing::debug!(
                target: "crew_runtime::mcp",
                "could not stop an MCP server: {error}"
            );
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = child.wait().await;
            });
        }
    }
}
