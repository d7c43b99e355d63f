//! What the HTTP model clients share: one model call's requests, sent
//! again after a failure worth retrying while retries and time are left;
//! a plain or streamed answer read within a size limit; errors that show
//! the base URL without its password. Each client brings its wire format
//! ([`Wire`]): how a request's URL is made, how an answer, a streamed
//! event and an error body read.

use std::time::{Duration, SystemTime};

use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName};
use reqwest::{Response, Url};
use sse_stream::SseByteStream;
use tokio::time::Instant;

use crate::http_client::{Body, StreamReadError, error_chain, is_connection_failure, read_at_most};
use crate::http_retry as retry;
use crate::http_secrets::{Secrets, mask_password};
use crate::llm::{DeltaSink, LlmError, ModelTurn};
use crate::model_options::{ModelOptions, key_header, request_url};
use hooks_core::TokenUsage;

/// The longest wait before a retry, whatever the server asks for.
pub(crate) const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);

/// The most bytes of an error status's body that are read: its message is
/// at the start, and [`LlmError::Http`] keeps only a few hundred characters.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// A model's turn and the tokens the server reported for it.
pub(crate) type Answer = (ModelTurn, Option<TokenUsage>);

/// A provider's wire format, as the shared client reads it.
pub(crate) trait Wire {
    /// Puts a streamed answer's events together.
    type Stream: StreamedTurn;

    /// The turn of a plain JSON answer.
    fn parse_answer(text: &str) -> Result<Answer, LlmError>;

    /// The readable message of an error answer's body.
    fn error_message(body: &str) -> String;
}

/// A streamed answer, put together event by event.
pub(crate) trait StreamedTurn: Default {
    /// Takes one server-sent event (its `event:` name and its data),
    /// sending the text it adds to `sink`; true once the answer is complete.
    fn push_event(
        &mut self,
        event: Option<&str>,
        data: &str,
        sink: Option<&dyn DeltaSink>,
    ) -> Result<bool, LlmError>;

    /// The answer, once the stream said it is complete.
    fn complete_answer(self) -> Answer;

    /// The answer when the stream ended without saying it is complete.
    fn answer_at_end_of_stream(self) -> Result<Answer, LlmError>;
}

/// What a provider adds to the shared options: where its requests go
/// and how its key is sent.
pub(crate) struct Provider {
    /// The base URL when the options name none.
    pub(crate) default_base_url: &'static str,
    /// The timeout when the options name none.
    pub(crate) default_timeout: Duration,
    /// The path joined to the base URL (`chat/completions`, `v1/messages`).
    pub(crate) path: &'static str,
    /// The header that carries the key.
    pub(crate) key_header: HeaderName,
    /// What goes before the key in that header (`Bearer `, or nothing).
    pub(crate) key_prefix: &'static str,
}

impl Provider {
    /// The base URL `options` send requests to.
    pub(crate) fn base_url<'a>(&self, options: &'a ModelOptions) -> &'a str {
        options.base_url.as_deref().unwrap_or(self.default_base_url)
    }

    /// The secrets `options` hold: the key and the base URL's password.
    pub(crate) fn secrets(&self, options: &ModelOptions) -> Secrets {
        Secrets::new(options.api_key.as_deref(), self.base_url(options))
    }

    /// The requests of one call made with `options`, or why none can be
    /// made: the shared knobs checked once for every provider, `headers`
    /// (an API version) added to the key's.
    pub(crate) fn call<'a>(
        &self,
        options: &ModelOptions,
        http: &'a Result<reqwest::Client, String>,
        mut headers: HeaderMap,
    ) -> Result<Call<'a>, LlmError> {
        let base_url = self.base_url(options);
        let url = request_url(base_url, self.path)?;
        options.check_knobs()?;
        let http = http.as_ref().map_err(|reason| {
            LlmError::Config(format!("the HTTP client could not be set up: {reason}"))
        })?;
        if let Some(key) = &options.api_key {
            let value = key_header(&format!("{}{key}", self.key_prefix))?;
            headers.insert(self.key_header.clone(), value);
        }
        Ok(Call {
            http,
            url,
            headers,
            stream: options.stream,
            timeout: options.timeout.unwrap_or(self.default_timeout),
            max_retries: options.max_retries,
            retry_backoff: options.retry_backoff,
            max_response_bytes: options.max_response_bytes,
            shown_base_url: mask_password(base_url.trim().trim_end_matches('/')).into_owned(),
        })
    }
}

/// One model call's requests: where they go, with which headers, within
/// which limits.
pub(crate) struct Call<'a> {
    pub(crate) http: &'a reqwest::Client,
    pub(crate) url: Url,
    /// Headers beyond the content type and `Accept`: the key (marked
    /// sensitive), an API version.
    pub(crate) headers: HeaderMap,
    pub(crate) stream: bool,
    pub(crate) timeout: Duration,
    pub(crate) max_retries: u32,
    pub(crate) retry_backoff: Duration,
    pub(crate) max_response_bytes: usize,
    /// The base URL as errors show it: without its password.
    pub(crate) shown_base_url: String,
}

/// Why the answer to one request was not the turn, and whether another
/// request may do better.
struct Failure {
    error: LlmError,
    retryable: bool,
    /// How long the server asked the client to wait (`Retry-After`).
    asked_wait: Option<Duration>,
}

impl Call<'_> {
    /// Sends `body` until an answer comes, within the call's timeout.
    pub(crate) async fn ask<W: Wire>(
        &self,
        body: &[u8],
        sink: Option<&dyn DeltaSink>,
    ) -> Result<Answer, LlmError> {
        // A timeout too large to be a deadline is no deadline.
        let deadline = Instant::now().checked_add(self.timeout);
        let answer = self.ask_until_answered::<W>(body, deadline, sink);
        match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, answer)
                .await
                .unwrap_or(Err(LlmError::Timeout(self.timeout))),
            None => answer.await,
        }
    }

    /// Sends the request, again after each failure worth retrying while
    /// retries and time are left.
    async fn ask_until_answered<W: Wire>(
        &self,
        body: &[u8],
        deadline: Option<Instant>,
        sink: Option<&dyn DeltaSink>,
    ) -> Result<Answer, LlmError> {
        let mut retries = 0;
        loop {
            let failure = match self.send(body).await {
                Ok(response) if response.status().is_success() => {
                    return self.read_answer::<W>(response, sink).await;
                }
                Ok(response) => self.read_error_status::<W>(response).await,
                Err(error) => Failure {
                    retryable: is_connection_failure(&error),
                    error: self.transport_error(error),
                    asked_wait: None,
                },
            };
            if !failure.retryable || retries >= self.max_retries {
                return Err(failure.error);
            }
            let wait = failure
                .asked_wait
                .unwrap_or_else(|| retry::backoff(self.retry_backoff, retries, MAX_RETRY_WAIT));
            let time_left =
                deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
            // Sleeping into the timeout would only trade the server's answer
            // for a less useful one.
            if wait > MAX_RETRY_WAIT || time_left.is_some_and(|left| wait >= left) {
                tracing::debug!(
                    wait_ms = wait.as_millis(),
                    "not retrying the model request: the wait is longer than allowed or than the time left"
                );
                return Err(failure.error);
            }
            retries += 1;
            tracing::debug!(
                retry = retries,
                wait_ms = wait.as_millis(),
                "retrying the model request"
            );
            tokio::time::sleep(wait).await;
        }
    }

    async fn send(&self, body: &[u8]) -> Result<Response, reqwest::Error> {
        let accept = if self.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let mut request = self
            .http
            .post(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept)
            .body(body.to_vec())
            .build()?;
        for (name, value) in &self.headers {
            // `insert`, not `append`: a key replaces the basic credentials
            // that a user and password in the base URL would give.
            request.headers_mut().insert(name, value.clone());
        }
        self.http.execute(request).await
    }

    async fn read_answer<W: Wire>(
        &self,
        response: Response,
        sink: Option<&dyn DeltaSink>,
    ) -> Result<Answer, LlmError> {
        // A server or gateway that does not stream answers with plain JSON
        // even when asked to stream; that answer is just as good.
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.trim_start().starts_with("application/json"));
        if self.stream && !is_json {
            return self.read_stream::<W>(response, sink).await;
        }
        let too_large = || {
            LlmError::InvalidResponse(format!(
                "the answer is larger than {} bytes, the most this client reads",
                self.max_response_bytes
            ))
        };
        if response
            .content_length()
            .is_some_and(|length| length > self.max_response_bytes as u64)
        {
            return Err(too_large());
        }
        let body = match read_at_most(response, self.max_response_bytes).await {
            Ok(Body::Whole(body)) => body,
            Ok(Body::Cut(_)) => return Err(too_large()),
            Err(error) => return Err(self.transport_error(error)),
        };
        let text = std::str::from_utf8(&body).map_err(|e| {
            LlmError::InvalidResponse(format!("the answer is not UTF-8 text ({e})"))
        })?;
        let (turn, usage) = W::parse_answer(text)?;
        if let Some(sink) = sink {
            let content = match &turn {
                ModelTurn::FinalAnswer(content) | ModelTurn::ToolCalls { content, .. } => content,
            };
            if !content.is_empty() {
                sink.delta(content);
            }
        }
        Ok((turn, usage))
    }

    async fn read_stream<W: Wire>(
        &self,
        response: Response,
        sink: Option<&dyn DeltaSink>,
    ) -> Result<Answer, LlmError> {
        let mut events = std::pin::pin!(events_within(response, self.max_response_bytes));
        let mut turn = W::Stream::default();
        while let Some(event) = events.next().await {
            let event = event.map_err(|error| self.stream_error(error))?;
            let Some(data) = event.data else {
                continue;
            };
            if turn.push_event(event.event.as_deref(), &data, sink)? {
                return Ok(turn.complete_answer());
            }
        }
        turn.answer_at_end_of_stream()
    }

    /// The HTTP error for an answer with an error status, worth retrying
    /// for a rate limit, an overload or another server error.
    async fn read_error_status<W: Wire>(&self, response: Response) -> Failure {
        let status = response.status();
        let asked_wait = retry::retry_after(response.headers(), SystemTime::now());
        let body = match read_at_most(response, MAX_ERROR_BODY_BYTES).await {
            // The message is at the start: a cut body still shows it.
            Ok(Body::Whole(body) | Body::Cut(body)) => {
                W::error_message(&String::from_utf8_lossy(&body))
            }
            Err(error) => format!(
                "(the body could not be read: {})",
                error_chain(&error.without_url())
            ),
        };
        Failure {
            error: LlmError::Http {
                status: status.as_u16(),
                body,
            },
            retryable: retry::is_retryable_status(status),
            asked_wait,
        }
    }

    fn transport_error(&self, error: reqwest::Error) -> LlmError {
        // reqwest quotes the URL it was asked for; the base URL is shown
        // instead, without its password.
        let error = error.without_url();
        if error.is_timeout() {
            return LlmError::Timeout(self.timeout);
        }
        if error.is_builder() {
            return LlmError::Config(format!(
                "the base URL {} or the API key cannot be used in a request: {}",
                self.shown_base_url,
                error_chain(&error)
            ));
        }
        LlmError::Transport(format!("{}: {}", self.shown_base_url, error_chain(&error)))
    }

    fn stream_error(&self, error: sse_stream::Error) -> LlmError {
        match error {
            sse_stream::Error::Body(cause) => match cause.downcast::<StreamReadError>() {
                Ok(cause) => match *cause {
                    StreamReadError::TooLarge(limit) => LlmError::InvalidResponse(format!(
                        "the streamed answer is larger than {limit} bytes, the most this \
                         client reads"
                    )),
                    StreamReadError::Transport(error) => self.transport_error(error),
                },
                Err(cause) => LlmError::Transport(format!(
                    "{}: {}",
                    self.shown_base_url,
                    error_chain(cause.as_ref())
                )),
            },
            other => LlmError::InvalidResponse(format!(
                "the stream could not be read as server-sent events: {other}"
            )),
        }
    }
}

/// A streamed answer's server-sent events, its bytes counted before they
/// are parsed, so that neither the answer nor the parser's buffers can
/// grow past `limit`.
fn events_within(
    response: Response,
    limit: usize,
) -> impl futures_util::Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Send + 'static {
    let bytes = futures_util::stream::try_unfold(
        (response, 0usize),
        move |(mut response, read)| async move {
            match response.chunk().await {
                Ok(Some(chunk)) if read + chunk.len() > limit => {
                    Err(StreamReadError::TooLarge(limit))
                }
                Ok(Some(chunk)) => {
                    let read = read + chunk.len();
                    Ok(Some((chunk, (response, read))))
                }
                Ok(None) => Ok(None),
                Err(error) => Err(StreamReadError::Transport(error)),
            }
        },
    );
    SseByteStream::new(bytes)
}
