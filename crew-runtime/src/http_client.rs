//! The HTTP side of the model clients (OpenAI-compatible, Anthropic): a
//! reqwest client that follows redirects
//! only within the first request's origin, bodies read up to a limit, and
//! failures told apart (worth a retry or not) and put on one line. The
//! announcements' channels read their answers and word their failures
//! with it too.

use reqwest::redirect::{Action, Attempt, Policy};
use reqwest::{Response, Url};

/// How many redirects within the base URL's origin are followed.
const MAX_REDIRECTS: usize = 5;

/// Why the bytes of a stream stopped coming.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StreamReadError {
    #[error("the stream is larger than {0} bytes")]
    TooLarge(usize),
    #[error("{0}")]
    Transport(reqwest::Error),
}

/// A body read up to a limit.
pub(crate) enum Body {
    Whole(Vec<u8>),
    /// The first bytes of a longer body, as many as the limit.
    Cut(Vec<u8>),
}

/// Reads the body, but no more than `limit` bytes of it.
pub(crate) async fn read_at_most(
    mut response: Response,
    limit: usize,
) -> Result<Body, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok(Body::Cut(body));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Body::Whole(body))
}

/// Whether the request failed before any byte of an answer: no connection
/// could be made, or the server closed or reset it without answering. Such
/// a failure may pass; an answer that came but could not be read would
/// only come again.
pub(crate) fn is_connection_failure(error: &reqwest::Error) -> bool {
    if error.is_connect() {
        return true;
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if cause
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message)
        {
            return true;
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
            if matches!(io.kind(), ConnectionReset | ConnectionAborted | BrokenPipe) {
                return true;
            }
        }
        source = cause.source();
    }
    false
}

/// The error and its causes on one line (`sending failed: connection
/// refused`).
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // Some errors repeat their cause in their own message.
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The HTTP client every request of a client goes through.
pub(crate) fn build_http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .redirect(Policy::custom(same_origin_redirects))
        .user_agent(concat!("crew-runtime/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|error| error_chain(&error.without_url()))
}

/// Why a redirect was not followed.
#[derive(Debug, thiserror::Error)]
enum RedirectRefused {
    #[error(
        "refused a redirect to another origin ({to}): redirects are followed only \
         within {from}, so that the request and its key go nowhere else"
    )]
    OtherOrigin { from: String, to: String },
    #[error("the server redirected the request more than {0} times")]
    TooMany(usize),
}

/// Follows a redirect only to the origin (scheme, host and port) of the
/// first request.
fn same_origin_redirects(attempt: Attempt<'_>) -> Action {
    let first = attempt.previous().first().map(Url::origin);
    let next = attempt.url().origin();
    match first {
        // An origin's serialization has no user, password or path.
        Some(first) if first != next => {
            let refused = RedirectRefused::OtherOrigin {
                from: first.ascii_serialization(),
                to: next.ascii_serialization(),
            };
            attempt.error(refused)
        }
        _ if attempt.previous().len() > MAX_REDIRECTS => {
            attempt.error(RedirectRefused::TooMany(MAX_REDIRECTS))
        }
        _ => attempt.follow(),
    }
}
