//! A client for Anthropic's Messages API (`POST {base_url}/v1/messages`),
//! with native tool calling, streamed or not.
//!
//! A crew whose agent thinks with Claude:
//!
//! ```no_run
//! use std::sync::Arc;
//! use crew_runtime::anthropic::Anthropic;
//! use crew_runtime::prelude::*;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // ANTHROPIC_API_KEY and ANTHROPIC_MODEL (e.g. claude-sonnet-4-5); the
//! // https endpoint needs the `tls` feature.
//! let model = Anthropic::from_env()?.max_tokens(2048).stream(true);
//! let writer = Agent::builder("Writer")
//!     .goal("Explain things in one paragraph")
//!     .llm(Arc::new(model))
//!     .build();
//! let task = Task::builder("Explain {topic} to a newcomer.")
//!     .agent(&writer)
//!     .build();
//! let crew = Crew::builder().agent(writer).task(task).build()?;
//!
//! let output = crew.kickoff_blocking([("topic", "tool-call hooks")])?;
//! println!("{output}");
//! # Ok(())
//! # }
//! ```
//!
//! Or asked directly, one turn at a time:
//!
//! ```
//! use crew_runtime::anthropic::Anthropic;
//! use crew_runtime::llm::{ChatMessage, LlmError, ModelTurn};
//!
//! let llm = Anthropic::new("claude-sonnet-4-5").api_key("sk-ant-…").max_tokens(1024);
//!
//! async fn ask(llm: &Anthropic) -> Result<ModelTurn, LlmError> {
//!     llm.complete_streaming(&[ChatMessage::user("Hello!")], &[], None).await
//! }
//! # let _ = (llm, ask);
//! ```
//!
//! The knobs it shares with the OpenAI-compatible client (model, base URL,
//! key, timeout, retries, limits, streaming, temperature) can be given
//! whole, as [`ModelOptions`](crate::ModelOptions):
//!
//! ```
//! use crew_runtime::ModelOptions;
//! use crew_runtime::anthropic::Anthropic;
//!
//! let options = ModelOptions::new("claude-sonnet-4-5").base_url("http://localhost:8080");
//! let llm = Anthropic::with_options(options).max_tokens(1024);
//! assert_eq!(llm.check(), Ok(()));
//! ```
//!
//! # The conversation on the wire
//!
//! The system messages of the conversation go, joined, in the request's
//! `system` field. The others become alternating `user` and `assistant`
//! turns: an assistant message's tool calls are `tool_use` blocks after its
//! text, a tool's result is a `tool_result` block of a user turn, and
//! neighbouring messages of the same role are one turn (the results of one
//! round of parallel calls are one user turn, in order). Tools are sent as
//! `{name, description, input_schema}`.
//!
//! The answer's `text` blocks make the turn's text and its `tool_use`
//! blocks its calls, in order; other blocks (thinking, server tools) are
//! not part of the turn. A tool's input is handed on as the server sent it
//! (in a stream, as its `input_json_delta` pieces make it, valid JSON or
//! not): the executor checks it and tells the model what was wrong, which a
//! client that dropped it could not do. When such a call goes back to the
//! API as part of the conversation, its input is sent as an empty object
//! (the API takes nothing else there); the call's result says what was
//! wrong.
//!
//! The tokens the answer used are reported with it (see
//! [`Llm::complete_with_usage`]): every input token (those read from or
//! written to the prompt cache included) as the prompt, the output tokens
//! as the completion, and their sum as the total.
//!
//! # Streaming
//!
//! With [`Anthropic::stream`] on, the server sends the answer as
//! server-sent events and each piece of its text reaches a [`DeltaSink`] as
//! it arrives; the pieces of tool inputs are put back together, so the turn
//! is the same one a plain answer would give. Lines of the stream that are
//! not SSE fields and events of kinds this client does not know (`ping`,
//! kinds added later) are skipped; an event that is not JSON or an `error`
//! event fails the turn with [`LlmError::InvalidResponse`], and so does a
//! stream that ends before `message_stop` (unless the server had already
//! said why the answer stopped, in `message_delta`).
//!
//! # Failures
//!
//! - The whole call, retries included, takes at most the client's timeout
//!   (from connecting to the last byte, to the end of the stream when
//!   streaming): [`LlmError::Timeout`] after that.
//! - HTTP 429 (rate limited), 529 (overloaded) and other 5xx answers, and
//!   connections that fail before any byte of an answer, are tried again
//!   ([`Anthropic::max_retries`]) after a wait that doubles each time
//!   ([`Anthropic::retry_backoff`]), or the wait the server asks for in
//!   `Retry-After`. When that wait is longer than [`MAX_RETRY_WAIT`] or than
//!   the time left, the client gives up with the server's answer instead of
//!   sleeping. Other error statuses (400 `invalid_request_error`, 401, …)
//!   are not retried; [`LlmError::Http`] carries the API's error type and
//!   message.
//! - Redirects are followed only within the base URL's origin (scheme,
//!   host and port): the request and its key go nowhere else.
//! - An answer larger than [`DEFAULT_MAX_RESPONSE_BYTES`] (see
//!   [`Anthropic::max_response_bytes`]) is refused.
//! - The API key and a password in the base URL (`http://user:password@…`)
//!   never appear in an error or in `Debug` output, even when the server
//!   quotes them back.
//!
//! `https` base URLs (the default one included) need the crate feature
//! `tls`; without it the client refuses them with [`LlmError::Config`]
//! before opening any connection.
//!
//! [`Anthropic::stream`]: crate::anthropic::Anthropic::stream
//! [`Anthropic::max_retries`]: crate::anthropic::Anthropic::max_retries
//! [`Anthropic::retry_backoff`]: crate::anthropic::Anthropic::retry_backoff
//! [`Anthropic::max_response_bytes`]: crate::anthropic::Anthropic::max_response_bytes
//! [`MAX_RETRY_WAIT`]: crate::anthropic::MAX_RETRY_WAIT
//! [`DEFAULT_MAX_RESPONSE_BYTES`]: crate::anthropic::DEFAULT_MAX_RESPONSE_BYTES
//! [`Llm::complete_with_usage`]: crate::llm::Llm::complete_with_usage
//! [`DeltaSink`]: crate::llm::DeltaSink
//! [`LlmError::InvalidResponse`]: crate::llm::LlmError::InvalidResponse
//! [`LlmError::Timeout`]: crate::llm::LlmError::Timeout
//! [`LlmError::Http`]: crate::llm::LlmError::Http
//! [`LlmError::Config`]: crate::llm::LlmError::Config

mod stream;
mod wire;

use std::fmt;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::http_client::build_http_client;
use crate::http_model::{Answer, Call, Provider, StreamedTurn, Wire};
use crate::http_secrets::{Secrets, mask_password};
use crate::llm::{ChatMessage, DeltaSink, Llm, LlmError, LlmRequest, ModelTurn, ToolDefinition};
use crate::model_options::{self, ModelOptions};
use hooks_core::TokenUsage;
use stream::{Progress, TurnAssembler};
use wire::{RequestOptions, error_message, parse_response, wire_request};

/// The environment variable naming the server's base URL (without `/v1`).
///
/// ```
/// use crew_runtime::anthropic::{BASE_URL_VAR, DEFAULT_BASE_URL};
///
/// let base_url = std::env::var(BASE_URL_VAR).unwrap_or_else(|_| DEFAULT_BASE_URL.to_owned());
/// # let _ = base_url;
/// ```
pub const BASE_URL_VAR: &str = "ANTHROPIC_BASE_URL";
/// The environment variable holding the API key, sent as `x-api-key`
/// (required when the base URL is Anthropic's own).
///
/// ```
/// use crew_runtime::anthropic::{API_KEY_VAR, Anthropic, MODEL_VAR};
///
/// let llm = Anthropic::from_lookup(|name| match name {
///     MODEL_VAR => Some("claude-sonnet-4-5".to_owned()),
///     API_KEY_VAR => Some("sk-ant-test".to_owned()),
///     _ => None,
/// });
/// # #[cfg(feature = "tls")]
/// assert!(llm.is_ok());
/// ```
pub const API_KEY_VAR: &str = "ANTHROPIC_API_KEY";
/// The environment variable naming the model (required).
///
/// ```
/// use crew_runtime::anthropic::{Anthropic, MODEL_VAR};
///
/// let missing = Anthropic::from_lookup(|_| None).err().map(|e| e.to_string());
/// assert!(missing.is_some_and(|message| message.contains(MODEL_VAR)));
/// ```
pub const MODEL_VAR: &str = "ANTHROPIC_MODEL";
/// Anthropic's API, the base URL unless [`Anthropic::base_url`] or
/// `ANTHROPIC_BASE_URL` says otherwise.
///
/// ```
/// use crew_runtime::anthropic::{Anthropic, DEFAULT_BASE_URL};
///
/// assert_eq!(Anthropic::new("claude-sonnet-4-5").base_url_text(), DEFAULT_BASE_URL);
/// ```
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The version of the API the client speaks, sent as `anthropic-version`.
///
/// ```
/// assert_eq!(crew_runtime::anthropic::API_VERSION, "2023-06-01");
/// ```
pub const API_VERSION: &str = "2023-06-01";
/// The most tokens an answer may have (the API's required `max_tokens`),
/// unless [`Anthropic::max_tokens`] says otherwise.
///
/// ```
/// use crew_runtime::anthropic::{Anthropic, DEFAULT_MAX_TOKENS};
///
/// let llm = Anthropic::new("claude-sonnet-4-5").max_tokens(DEFAULT_MAX_TOKENS * 2);
/// # let _ = llm;
/// ```
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// How long one call may take, from connecting to the last byte of the
/// answer and retries included, unless [`Anthropic::timeout`] says
/// otherwise.
///
/// ```
/// use crew_runtime::anthropic::{Anthropic, DEFAULT_TIMEOUT};
///
/// let llm = Anthropic::new("claude-sonnet-4-5").timeout(DEFAULT_TIMEOUT * 2);
/// # let _ = llm;
/// ```
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// How many times a request that failed for a reason worth retrying is
/// tried again, unless [`Anthropic::max_retries`] says otherwise.
///
/// ```
/// use crew_runtime::anthropic::{Anthropic, DEFAULT_MAX_RETRIES};
///
/// let llm = Anthropic::new("claude-sonnet-4-5").max_retries(DEFAULT_MAX_RETRIES + 3);
/// # let _ = llm;
/// ```
pub const DEFAULT_MAX_RETRIES: u32 = model_options::DEFAULT_MAX_RETRIES;
/// The wait before the first retry, doubled for each further one, unless
/// [`Anthropic::retry_backoff`] says otherwise.
///
/// ```
/// use crew_runtime::anthropic::{Anthropic, DEFAULT_RETRY_BACKOFF};
///
/// let llm = Anthropic::new("claude-sonnet-4-5").retry_backoff(DEFAULT_RETRY_BACKOFF / 5);
/// # let _ = llm;
/// ```
pub const DEFAULT_RETRY_BACKOFF: Duration = model_options::DEFAULT_RETRY_BACKOFF;
/// The longest the client waits before a retry: a server that asks for more
/// (`Retry-After`) gets its error reported instead, and the doubling waits
/// stop growing there.
///
/// ```
/// use std::time::Duration;
/// use crew_runtime::anthropic::MAX_RETRY_WAIT;
///
/// assert!(MAX_RETRY_WAIT >= Duration::from_secs(1));
/// ```
pub const MAX_RETRY_WAIT: Duration = crate::http_model::MAX_RETRY_WAIT;
/// The most bytes of an answer (a plain body, or a whole stream) the client
/// reads, unless [`Anthropic::max_response_bytes`] says otherwise.
///
/// ```
/// use crew_runtime::anthropic::{Anthropic, DEFAULT_MAX_RESPONSE_BYTES};
///
/// let llm = Anthropic::new("claude-sonnet-4-5").max_response_bytes(DEFAULT_MAX_RESPONSE_BYTES * 4);
/// # let _ = llm;
/// ```
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = model_options::DEFAULT_MAX_RESPONSE_BYTES;

const API_KEY_HEADER: HeaderName = HeaderName::from_static("x-api-key");
const VERSION_HEADER: HeaderName = HeaderName::from_static("anthropic-version");

/// A Claude model behind Anthropic's Messages API, asked with native tool
/// calling.
///
/// Building one reads nothing from the environment (see
/// [`Anthropic::from_env`] for that) and never fails: a client that cannot
/// make requests says why in [`Anthropic::check`] and in every call.
/// Cloning is cheap and the clones share their connections. Its `Debug`
/// output shows neither the key nor a password in the base URL.
///
/// ```
/// use std::time::Duration;
/// use crew_runtime::anthropic::Anthropic;
///
/// let llm = Anthropic::new("claude-sonnet-4-5")
///     .api_key("sk-ant-secret")
///     .base_url("http://localhost:8080")
///     .max_tokens(2048)
///     .stream(true)
///     .max_retries(3)
///     .timeout(Duration::from_secs(90));
/// assert_eq!(llm.model(), "claude-sonnet-4-5");
/// assert!(!format!("{llm:?}").contains("sk-ant-secret"));
/// ```
#[derive(Clone)]
pub struct Anthropic {
    options: ModelOptions,
    max_tokens: u32,
    /// The HTTP client, or why it could not be set up (reported by
    /// [`Anthropic::check`] and by every call, so that building a client
    /// stays infallible).
    http: Result<reqwest::Client, String>,
}

impl fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key and the URL's password are secrets: never print them, only
        // whether there is a key.
        // The options' Debug shows neither the key nor the URL's password.
        f.debug_struct("Anthropic")
            .field("options", &self.options)
            .field("max_tokens", &self.max_tokens)
            .finish_non_exhaustive()
    }
}

impl Anthropic {
    /// A client for `model` at [`DEFAULT_BASE_URL`], without a key, with
    /// answers of at most [`DEFAULT_MAX_TOKENS`] tokens, a timeout of
    /// [`DEFAULT_TIMEOUT`], the API's default temperature, and no streaming.
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let llm = Anthropic::new("claude-sonnet-4-5").base_url("http://localhost:8080");
    /// assert_eq!(llm.check(), Ok(()));
    /// ```
    pub fn new(model: impl Into<String>) -> Self {
        Anthropic::with_options(ModelOptions::new(model))
    }

    /// A client configured by the options both model clients share (the
    /// base URL [`DEFAULT_BASE_URL`] and the timeout [`DEFAULT_TIMEOUT`]
    /// when they name none), with answers of at most
    /// [`DEFAULT_MAX_TOKENS`] tokens.
    ///
    /// ```
    /// use std::time::Duration;
    /// use crew_runtime::ModelOptions;
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let options = ModelOptions::new("claude-sonnet-4-5")
    ///     .base_url("http://localhost:8080")
    ///     .timeout(Duration::from_secs(30));
    /// let llm = Anthropic::with_options(options.clone());
    /// assert_eq!(llm.model_options(), &options);
    /// ```
    pub fn with_options(options: ModelOptions) -> Self {
        Anthropic {
            options,
            max_tokens: DEFAULT_MAX_TOKENS,
            http: build_http_client(),
        }
    }

    /// Replaces every shared option at once (model, base URL, key, timeout,
    /// retries, limits, streaming, temperature) with `options`, the way
    /// the other model clients take them; `max_tokens` stays as it is.
    ///
    /// ```
    /// use crew_runtime::ModelOptions;
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let options = ModelOptions::new("claude-haiku-4-5").base_url("http://localhost:8080");
    /// let llm = Anthropic::new("claude-sonnet-4-5").max_tokens(256).options(options);
    /// assert_eq!(llm.model(), "claude-haiku-4-5");
    /// assert_eq!(llm.base_url_text(), "http://localhost:8080");
    /// ```
    pub fn options(mut self, options: ModelOptions) -> Self {
        self.options = options;
        self
    }

    /// The shared options this client uses.
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let llm = Anthropic::new("claude-sonnet-4-5").max_retries(5);
    /// assert_eq!(llm.model_options().max_retries, 5);
    /// ```
    pub fn model_options(&self) -> &ModelOptions {
        &self.options
    }

    /// The client with one shared option changed.
    fn change(mut self, change: impl FnOnce(ModelOptions) -> ModelOptions) -> Self {
        self.options = change(self.options);
        self
    }

    /// A client configured from `ANTHROPIC_MODEL`, `ANTHROPIC_API_KEY` and
    /// `ANTHROPIC_BASE_URL` (default [`DEFAULT_BASE_URL`]). Empty values
    /// count as unset.
    ///
    /// Fails with [`LlmError::Config`] naming the variables to set when the
    /// model is not named, or the key is not set for Anthropic's own API (a
    /// gateway named by `ANTHROPIC_BASE_URL` may need none), or when the base
    /// URL cannot be used (see [`Anthropic::check`]).
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// match Anthropic::from_env() {
    ///     Ok(llm) => println!("asking {}", llm.model()),
    ///     Err(error) => println!("{error}"),
    /// }
    /// ```
    pub fn from_env() -> Result<Self, LlmError> {
        Anthropic::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`Anthropic::from_env`], reading variables through `lookup` (a
    /// map in tests, the process environment in programs).
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let llm = Anthropic::from_lookup(|name| match name {
    ///     "ANTHROPIC_BASE_URL" => Some("http://localhost:8080".to_owned()),
    ///     "ANTHROPIC_MODEL" => Some("claude-sonnet-4-5".to_owned()),
    ///     _ => None,
    /// });
    /// assert_eq!(llm.map(|llm| llm.model().to_owned()), Ok("claude-sonnet-4-5".to_owned()));
    /// ```
    pub fn from_lookup(mut lookup: impl FnMut(&str) -> Option<String>) -> Result<Self, LlmError> {
        let mut read = |name: &str| {
            lookup(name)
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
        };
        let base_url = read(BASE_URL_VAR);
        let api_key = read(API_KEY_VAR);
        let model = read(MODEL_VAR);
        let mut missing = Vec::new();
        if model.is_none() {
            missing.push(MODEL_VAR);
        }
        if api_key.is_none() && base_url.is_none() {
            missing.push(API_KEY_VAR);
        }
        let Some(model) = model.filter(|_| missing.is_empty()) else {
            return Err(LlmError::Config(format!(
                "set {} to use Anthropic's Messages API (e.g. \
                 `{MODEL_VAR}=claude-sonnet-4-5 {API_KEY_VAR}=sk-ant-…`); \
                 {BASE_URL_VAR} defaults to {DEFAULT_BASE_URL}, and {API_KEY_VAR} may stay \
                 unset when {BASE_URL_VAR} names a gateway that needs no key",
                missing.join(" and ")
            )));
        };
        let mut client = Anthropic::new(model);
        if let Some(base_url) = base_url {
            client = client.base_url(base_url);
        }
        if let Some(key) = api_key {
            client = client.api_key(key);
        }
        client.check()?;
        Ok(client)
    }

    /// Sends `key` as `x-api-key` with every request.
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let llm = Anthropic::new("claude-sonnet-4-5").api_key("sk-ant-secret");
    /// assert!(!format!("{llm:?}").contains("sk-ant-secret"));
    /// ```
    pub fn api_key(self, key: impl Into<String>) -> Self {
        self.change(|options| options.api_key(key))
    }

    /// Sends requests to `base_url` (without `/v1`: the client adds
    /// `/v1/messages`) instead of [`DEFAULT_BASE_URL`]: a gateway, a proxy,
    /// a local test server.
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let llm = Anthropic::new("claude-sonnet-4-5").base_url("http://localhost:8080/");
    /// assert_eq!(llm.base_url_text(), "http://localhost:8080/");
    /// ```
    pub fn base_url(self, base_url: impl Into<String>) -> Self {
        self.change(|options| options.base_url(base_url))
    }

    /// Lets an answer have at most `tokens` tokens (the API's required
    /// `max_tokens`); [`DEFAULT_MAX_TOKENS`] otherwise. An answer cut there
    /// is handed on as it is (a warning is logged).
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let brief = Anthropic::new("claude-sonnet-4-5").max_tokens(256);
    /// # let _ = brief;
    /// ```
    pub fn max_tokens(mut self, tokens: u32) -> Self {
        self.max_tokens = tokens;
        self
    }

    /// Sends this sampling temperature (the API's default otherwise).
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let steady = Anthropic::new("claude-sonnet-4-5").temperature(0.0);
    /// # let _ = steady;
    /// ```
    pub fn temperature(self, temperature: f32) -> Self {
        self.change(|options| options.temperature(temperature))
    }

    /// Asks for streamed answers (`"stream": true`), whose text reaches the
    /// [`DeltaSink`] given to [`Anthropic::complete_streaming`] (or a
    /// crew's listeners) as it arrives. Off by default.
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let llm = Anthropic::new("claude-sonnet-4-5").stream(true);
    /// # let _ = llm;
    /// ```
    pub fn stream(self, on: bool) -> Self {
        self.change(|options| options.stream(on))
    }

    /// Gives up on a call after `timeout` (connecting, sending, reading the
    /// whole answer or stream, and the waits between retries), with
    /// [`LlmError::Timeout`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let llm = Anthropic::new("claude-sonnet-4-5").timeout(Duration::from_secs(300));
    /// # let _ = llm;
    /// ```
    pub fn timeout(self, timeout: Duration) -> Self {
        self.change(|options| options.timeout(timeout))
    }

    /// Tries a request again at most `retries` times after a rate limit
    /// (HTTP 429), an overload (529) or another server error (5xx), or a
    /// connection that could not be made; 0 turns retries off.
    /// [`DEFAULT_MAX_RETRIES`] otherwise.
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let no_retries = Anthropic::new("claude-sonnet-4-5").max_retries(0);
    /// # let _ = no_retries;
    /// ```
    pub fn max_retries(self, retries: u32) -> Self {
        self.change(|options| options.max_retries(retries))
    }

    /// Waits `backoff` before the first retry, twice as long before the
    /// second, and so on up to [`MAX_RETRY_WAIT`], when the server does not
    /// say how long to wait (`Retry-After`). [`DEFAULT_RETRY_BACKOFF`]
    /// otherwise.
    ///
    /// ```
    /// use std::time::Duration;
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let patient = Anthropic::new("claude-sonnet-4-5").retry_backoff(Duration::from_secs(2));
    /// # let _ = patient;
    /// ```
    pub fn retry_backoff(self, backoff: Duration) -> Self {
        self.change(|options| options.retry_backoff(backoff))
    }

    /// Refuses an answer (a plain body, or everything a stream sends) larger
    /// than `bytes`, with [`LlmError::InvalidResponse`].
    /// [`DEFAULT_MAX_RESPONSE_BYTES`] otherwise.
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let small = Anthropic::new("claude-sonnet-4-5").max_response_bytes(1024 * 1024);
    /// # let _ = small;
    /// ```
    pub fn max_response_bytes(self, bytes: usize) -> Self {
        self.change(|options| options.max_response_bytes(bytes))
    }

    /// The model name the API is asked for, a short name for logs.
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// assert_eq!(Anthropic::new("claude-sonnet-4-5").model(), "claude-sonnet-4-5");
    /// ```
    pub fn model(&self) -> &str {
        &self.options.model
    }

    /// The base URL, with any password in it replaced by `***`.
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    ///
    /// let llm = Anthropic::new("claude-sonnet-4-5").base_url("http://me:hunter22@localhost:8080");
    /// assert_eq!(llm.base_url_text(), "http://me:***@localhost:8080");
    /// ```
    pub fn base_url_text(&self) -> String {
        mask_password(PROVIDER.base_url(&self.options)).into_owned()
    }

    /// Checks, without any network call, that a request can be made: the
    /// base URL is a valid `http://` or `https://` URL (`https://` only with
    /// the `tls` feature), a model is named, the timeout and the answer size
    /// limit are not 0, the key can be sent in an HTTP header (the checks
    /// of [`ModelOptions::check`](crate::ModelOptions::check), with the
    /// same texts), and `max_tokens` is not 0.
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    /// use crew_runtime::llm::LlmError;
    ///
    /// let llm = Anthropic::new("claude-sonnet-4-5").base_url("localhost:8080");
    /// assert!(matches!(llm.check(), Err(LlmError::Config(_))));
    /// ```
    pub fn check(&self) -> Result<(), LlmError> {
        self.call()
            .map(drop)
            .map_err(|error| self.secrets().scrub_error(error))
    }

    /// Asks the model for its next turn: the conversation so far and the
    /// tools it may call.
    ///
    /// When streaming is on ([`Anthropic::stream`]), each piece of the
    /// answer's text reaches `sink` as it arrives; otherwise `sink` gets the
    /// whole text at once when the answer is in. Either way the turn is the
    /// same, tool calls included.
    ///
    /// ```
    /// use crew_runtime::anthropic::Anthropic;
    /// use crew_runtime::llm::{ChatMessage, DeltaSink, LlmError, ModelTurn};
    ///
    /// struct Console;
    ///
    /// impl DeltaSink for Console {
    ///     fn delta(&self, text: &str) {
    ///         print!("{text}");
    ///     }
    /// }
    ///
    /// async fn ask(llm: &Anthropic) -> Result<ModelTurn, LlmError> {
    ///     let messages = [
    ///         ChatMessage::system("You answer in one sentence."),
    ///         ChatMessage::user("Why is the sky blue?"),
    ///     ];
    ///     llm.complete_streaming(&messages, &[], Some(&Console)).await
    /// }
    ///
    /// let llm = Anthropic::new("claude-sonnet-4-5").stream(true);
    /// # let _ = (llm, ask);
    /// ```
    pub async fn complete_streaming(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolDefinition],
        sink: Option<&dyn DeltaSink>,
    ) -> Result<ModelTurn, LlmError> {
        Ok(self.complete_counted(messages, tools, sink).await?.0)
    }

    /// [`complete_streaming`](Self::complete_streaming), with the tokens the
    /// server reported.
    async fn complete_counted(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolDefinition],
        sink: Option<&dyn DeltaSink>,
    ) -> Result<(ModelTurn, Option<TokenUsage>), LlmError> {
        // The one exit of every error: whatever it quotes (a server's body
        // included), the key and the URL's password do not leave.
        self.ask(messages, tools, sink)
            .await
            .map_err(|error| self.secrets().scrub_error(error))
    }

    fn secrets(&self) -> Secrets {
        PROVIDER.secrets(&self.options)
    }
}

/// The client as a crew's model: streamed text goes to the crew's
/// listeners when [`Anthropic::stream`] is on.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::anthropic::Anthropic;
/// use crew_runtime::llm::Llm;
///
/// let model: Arc<dyn Llm> = Arc::new(Anthropic::new("claude-sonnet-4-5"));
/// assert_eq!(model.name(), "claude-sonnet-4-5");
/// ```
#[async_trait::async_trait]
impl Llm for Anthropic {
    fn name(&self) -> &str {
        self.model()
    }

    fn max_output_tokens(&self) -> Option<u64> {
        Some(u64::from(self.max_tokens))
    }

    async fn complete(&self, request: &LlmRequest<'_>) -> Result<ModelTurn, LlmError> {
        self.complete_streaming(request.messages, request.tools, request.stream)
            .await
    }

    /// Reads the answer's `usage` (in a stream, `message_start`'s counts
    /// updated by `message_delta`'s).
    async fn complete_with_usage(
        &self,
        request: &LlmRequest<'_>,
    ) -> Result<(ModelTurn, Option<TokenUsage>), LlmError> {
        self.complete_counted(request.messages, request.tools, request.stream)
            .await
    }
}

/// The Messages API's wire format.
struct Messages;

impl Wire for Messages {
    type Stream = TurnAssembler;

    fn parse_answer(text: &str) -> Result<Answer, LlmError> {
        parse_response(text)
    }

    fn error_message(body: &str) -> String {
        error_message(body)
    }
}

impl StreamedTurn for TurnAssembler {
    fn push_event(
        &mut self,
        event: Option<&str>,
        data: &str,
        sink: Option<&dyn DeltaSink>,
    ) -> Result<bool, LlmError> {
        Ok(self.push(event, data, sink)? == Progress::Done)
    }

    fn complete_answer(self) -> Answer {
        let usage = self.usage();
        (self.finish(), usage)
    }

    fn answer_at_end_of_stream(self) -> Result<Answer, LlmError> {
        let usage = self.usage();
        Ok((self.finish_at_end_of_stream()?, usage))
    }
}

impl Anthropic {
    async fn ask(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolDefinition],
        sink: Option<&dyn DeltaSink>,
    ) -> Result<Answer, LlmError> {
        let call = self.call()?;
        let options = RequestOptions {
            model: &self.options.model,
            max_tokens: self.max_tokens,
            temperature: self.options.temperature,
            stream: self.options.stream,
        };
        let request = wire_request(options, messages, tools);
        // Only strings and JSON values go in, so encoding cannot fail in
        // practice; if it ever did, the request itself is what is wrong.
        let body = serde_json::to_vec(&request)
            .map_err(|e| LlmError::Config(format!("the request could not be encoded: {e}")))?;
        tracing::debug!(
            model = %self.options.model,
            messages = messages.len(),
            tools = tools.len(),
            stream = self.options.stream,
            "asking the model"
        );
        call.ask::<Messages>(&body, sink).await
    }

    /// The URL, headers and limits of a call's requests, or why none can be
    /// made.
    fn call(&self) -> Result<Call<'_>, LlmError> {
        let mut headers = HeaderMap::new();
        headers.insert(VERSION_HEADER, HeaderValue::from_static(API_VERSION));
        let call = PROVIDER.call(&self.options, &self.http, headers)?;
        if self.max_tokens == 0 {
            return Err(LlmError::Config(
                "max_tokens is 0: the API needs room for at least one token".to_owned(),
            ));
        }
        Ok(call)
    }
}

/// How the Messages requests are sent.
const PROVIDER: Provider = Provider {
    default_base_url: DEFAULT_BASE_URL,
    default_timeout: DEFAULT_TIMEOUT,
    path: "v1/messages",
    key_header: API_KEY_HEADER,
    key_prefix: "",
};
