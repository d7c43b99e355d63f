//! The bound on one message from a server over a byte stream (stdio, a
//! pipe, a socket).
//!
//! rmcp's line transport drops a line longer than its own limit and goes on
//! reading, so the request that line answered is never answered and waits
//! for its timeout. The reader here stops the stream instead, at the first
//! line past the limit: rmcp then ends the session, and the calls waiting
//! on it learn why at once through [`MessageLimit::exceeded`].

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::watch;

/// The most bytes one message from a server may hold, and whether the
/// server went past it. Shared by the reader that enforces it and the
/// session whose calls report it.
#[derive(Debug)]
pub(super) struct MessageLimit {
    bytes: usize,
    exceeded: watch::Sender<bool>,
}

impl MessageLimit {
    pub(super) fn new(bytes: usize) -> Self {
        MessageLimit {
            bytes,
            exceeded: watch::Sender::new(false),
        }
    }

    /// The limit, in bytes.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether the server sent a message past the limit (which closed the
    /// session).
    pub(super) fn was_exceeded(&self) -> bool {
        *self.exceeded.borrow()
    }

    /// Resolves once the server sends a message past the limit; never, if
    /// it does not.
    pub(super) async fn exceeded(&self) {
        let mut seen = self.exceeded.subscribe();
        // The sender lives as long as `self`, so waiting only ends when
        // the limit is exceeded.
        if seen.wait_for(|exceeded| *exceeded).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// What the server did, for an error message: "a message larger than
    /// 16 MiB".
    pub(super) fn breach(&self) -> String {
        format!("a message larger than {}", size(self.bytes))
    }

    fn exceed(&self) {
        self.exceeded.send_replace(true);
    }

    fn error(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the MCP server sent {}", self.breach()),
        )
    }
}

/// A byte count as a person reads it: `16 MiB`, `64 KiB`, `1000 bytes`.
pub(super) fn size(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else if bytes == 1 {
        "1 byte".to_owned()
    } else {
        format!("{bytes} bytes")
    }
}

/// Newline-delimited messages read from `inner`, none longer than the
/// limit (its line end not counted). Every complete line before the one
/// past the limit is delivered; the read that reaches past it fails, and
/// so does every read after it, so the transport above closes instead of
/// buffering or skipping the line.
pub(super) struct BoundedLines<R> {
    inner: R,
    limit: std::sync::Arc<MessageLimit>,
    /// Bytes of the line being read so far.
    line: usize,
    /// Set once a line went past the limit.
    stopped: bool,
}

impl<R> BoundedLines<R> {
    pub(super) fn new(inner: R, limit: std::sync::Arc<MessageLimit>) -> Self {
        BoundedLines {
            inner,
            limit,
            line: 0,
            stopped: false,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.stopped {
            return Poll::Ready(Err(this.limit.error()));
        }
        let start = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        // Where, in what was just read, the line past the limit starts.
        let over = {
            let fresh = &buf.filled()[start..];
            let mut line = this.line;
            let mut at = 0;
            let mut over = None;
            for segment in fresh.split_inclusive(|&byte| byte == b'\n') {
                let ended = segment.last() == Some(&b'\n');
                line = line.saturating_add(segment.len() - usize::from(ended));
                if line > this.limit.bytes {
                    over = Some(at);
                    break;
                }
                at += segment.len();
                if ended {
                    line = 0;
                }
            }
            this.line = line;
            over
        };
        let Some(at) = over else {
            return Poll::Ready(Ok(()));
        };
        this.stopped = true;
        this.limit.exceed();
        // The whole lines before it still count; the next read fails.
        buf.set_filled(start + at);
        if at == 0 {
            Poll::Ready(Err(this.limit.error()))
        } else {
            Poll::Ready(Ok(()))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::io::AsyncReadExt;

    use super::*;

    async fn read_all(input: &[u8], limit: usize) -> (Vec<u8>, Option<io::Error>, bool) {
        let limit = Arc::new(MessageLimit::new(limit));
        // Two bytes a read: lines arrive in pieces, as from a pipe.
        let (mut writer, reader) = tokio::io::duplex(2);
        let input = input.to_vec();
        let feeding = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = writer.write_all(&input).await;
        });
        let mut lines = BoundedLines::new(reader, Arc::clone(&limit));
        let mut read = Vec::new();
        let mut chunk = [0u8; 7];
        let error = loop {
            match lines.read(&mut chunk).await {
                Ok(0) => break None,
                Ok(n) => read.extend_from_slice(&chunk[..n]),
                Err(error) => break Some(error),
            }
        };
        feeding.abort();
        (read, error, limit.was_exceeded())
    }

    #[tokio::test]
    async fn lines_within_the_limit_pass_whole() {
        let (read, error, exceeded) = read_all(b"12345\n1234\r\n\n123", 5).await;
        assert_eq!(read, b"12345\n1234\r\n\n123");
        assert!(error.is_none());
        assert!(!exceeded);
    }

    #[tokio::test]
    async fn a_line_past_the_limit_stops_the_stream_after_the_lines_before_it() {
        let (read, error, exceeded) = read_all(b"12345\n123456\n12\n", 5).await;
        assert!(read.starts_with(b"12345\n"), "{read:?}");
        assert!(read.len() <= b"12345\n12345".len(), "{read:?}");
        let error = error.expect("the stream stops");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert_eq!(
            error.to_string(),
            "the MCP server sent a message larger than 5 bytes"
        );
        assert!(exceeded);
    }

    #[tokio::test]
    async fn a_line_without_an_end_stops_at_the_limit() {
        let endless = vec![b'x'; 1000];
        let (read, error, exceeded) = read_all(&endless, 64).await;
        assert!(read.len() <= 64, "{} bytes", read.len());
        assert!(error.is_some());
        assert!(exceeded);
    }

    #[test]
    fn sizes_read_as_a_person_writes_them() {
        assert_eq!(size(16 * 1024 * 1024), "16 MiB");
        assert_eq!(size(64 * 1024), "64 KiB");
        assert_eq!(size(1000), "1000 bytes");
        assert_eq!(size(1), "1 byte");
        assert_eq!(size(0), "0 bytes");
    }
}
