//! Any server that speaks `POST {base_url}/chat/completions` with `tools`
//! will do: OpenAI, Ollama, vLLM, llama.cpp, LM Studio.
//!
//! The client is async (on tokio) and asks for one turn at a time:
//!
//! ```
//! use std::time::Duration;
//! use crew_runtime::llm::{ChatMessage, LlmError, ModelTurn};
//! use crew_runtime::openai::OpenAiCompatible;
//!
//! // A local Ollama server needs no key; OpenAI needs one (and the `tls`
//! // feature for its https endpoint).
//! let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1")
//!     .timeout(Duration::from_secs(120))
//!     .temperature(0.0);
//!
//! async fn ask(llm: &OpenAiCompatible) -> Result<ModelTurn, LlmError> {
//!     llm.complete_streaming(&[ChatMessage::user("Hello!")], &[], None).await
//! }
//! # let _ = (llm, ask);
//! ```
//!
//! Or with the options every model client shares ([`ModelOptions`]), so
//! that a service configures this client and the Anthropic one the same
//! way:
//!
//! ```
//! use crew_runtime::ModelOptions;
//! use crew_runtime::openai::OpenAiCompatible;
//!
//! let options = ModelOptions::new("llama3.1").base_url("http://localhost:11434/v1").max_retries(3);
//! let llm = OpenAiCompatible::with_options(options);
//! assert_eq!(llm.check(), Ok(()));
//! ```
//!
//! From the environment, the way the examples do it:
//!
//! ```
//! use crew_runtime::openai::OpenAiConfig;
//!
//! match OpenAiConfig::from_env() {
//!     Ok(config) => println!("using {} at {}", config.model, config.base_url),
//!     Err(missing) => println!("{missing}"),
//! }
//! ```
//!
//! # Streaming
//!
//! With [`OpenAiCompatible::stream`] on, the server sends the answer as
//! server-sent events and each piece of its text reaches a [`DeltaSink`] as
//! it arrives; the pieces of tool calls are put back together, so the turn
//! is the same one a plain answer would give. Lines of the stream that are
//! not SSE fields are skipped, as the SSE specification says; a `data:`
//! payload that is not a chunk of the answer fails the turn with
//! [`LlmError::InvalidResponse`], and so does a stream that ends before
//! `[DONE]` (unless the server had already said why the answer stopped).
//!
//! # Failures
//!
//! - The whole call, retries included, takes at most the client's timeout
//!   (from connecting to the last byte, to the end of the stream when
//!   streaming): [`LlmError::Timeout`] after that.
//! - HTTP 429 and 5xx answers, and connections that fail before any byte
//!   of an answer, are tried again ([`OpenAiCompatible::max_retries`])
//!   after a wait that doubles each time
//!   ([`OpenAiCompatible::retry_backoff`]), or the wait the server asks for
//!   in `Retry-After`. When that wait is longer than [`MAX_RETRY_WAIT`] or
//!   than the time left, the client gives up with the server's answer
//!   instead of sleeping.
//! - Redirects are followed only within the base URL's origin (scheme,
//!   host and port): the request and its key go nowhere else.
//! - An answer larger than [`DEFAULT_MAX_RESPONSE_BYTES`] (see
//!   [`OpenAiCompatible::max_response_bytes`]) is refused.
//! - The API key and a password in the base URL (`http://user:password@…`)
//!   never appear in an error or in `Debug` output, even when the server
//!   quotes them back.
//!
//! The tool-call arguments are handed on exactly as the server sent them,
//! even when they are not valid JSON: the executor checks them and tells the
//! model what was wrong, which a client that dropped them could not do.
//!
//! `https` base URLs need the crate feature `tls`; without it the client
//! refuses them with [`LlmError::Config`] before opening any connection.
//!
//! [`OpenAiCompatible::stream`]: crate::openai::OpenAiCompatible::stream
//! [`OpenAiCompatible::max_retries`]: crate::openai::OpenAiCompatible::max_retries
//! [`OpenAiCompatible::retry_backoff`]: crate::openai::OpenAiCompatible::retry_backoff
//! [`OpenAiCompatible::max_response_bytes`]: crate::openai::OpenAiCompatible::max_response_bytes
//! [`MAX_RETRY_WAIT`]: crate::openai::MAX_RETRY_WAIT
//! [`DEFAULT_MAX_RESPONSE_BYTES`]: crate::openai::DEFAULT_MAX_RESPONSE_BYTES
//! [`DeltaSink`]: crate::llm::DeltaSink
//! [`LlmError::InvalidResponse`]: crate::llm::LlmError::InvalidResponse
//! [`LlmError::Timeout`]: crate::llm::LlmError::Timeout
//! [`LlmError::Config`]: crate::llm::LlmError::Config
//! [`ModelOptions`]: crate::ModelOptions

mod stream;
mod wire;

use std::fmt;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderMap};

use crate::http_client::build_http_client;
use crate::http_model::{Answer, Call, Provider, StreamedTurn, Wire};
use crate::http_secrets::mask_password;
use crate::llm::{ChatMessage, DeltaSink, Llm, LlmError, LlmRequest, ModelTurn, ToolDefinition};
use crate::model_options::{self, ModelOptions};
use hooks_core::TokenUsage;
use stream::{Progress, TurnAssembler};
use wire::{CapField, error_message, parse_response, wire_request};

/// The environment variable naming the server's base URL.
///
/// ```
/// use crew_runtime::openai::{BASE_URL_VAR, DEFAULT_BASE_URL};
///
/// let base_url = std::env::var(BASE_URL_VAR).unwrap_or_else(|_| DEFAULT_BASE_URL.to_owned());
/// # let _ = base_url;
/// ```
pub const BASE_URL_VAR: &str = "OPENAI_BASE_URL";
/// The environment variable holding the API key (optional for local servers).
///
/// ```
/// use crew_runtime::openai::{API_KEY_VAR, OpenAiConfig};
///
/// let config = OpenAiConfig::from_lookup(|name| match name {
///     API_KEY_VAR => Some("sk-test".to_owned()),
///     _ => Some("gpt-4o-mini".to_owned()),
/// });
/// assert_eq!(config.map(|c| c.api_key), Ok(Some("sk-test".to_owned())));
/// ```
pub const API_KEY_VAR: &str = "OPENAI_API_KEY";
/// The environment variable naming the model (required).
///
/// ```
/// use crew_runtime::openai::{MODEL_VAR, OpenAiConfig};
///
/// let missing = OpenAiConfig::from_lookup(|_| None).err().map(|m| m.variables);
/// assert_eq!(missing, Some(vec![MODEL_VAR]));
/// ```
pub const MODEL_VAR: &str = "OPENAI_MODEL";
/// The base URL used when `OPENAI_BASE_URL` is not set.
///
/// ```
/// use crew_runtime::openai::{DEFAULT_BASE_URL, MODEL_VAR, OpenAiConfig};
///
/// let config = OpenAiConfig::from_lookup(|name| (name == MODEL_VAR).then(|| "gpt-4o".to_owned()));
/// assert_eq!(config.map(|c| c.base_url), Ok(DEFAULT_BASE_URL.to_owned()));
/// ```
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// How long one call may take, from connecting to the last byte of the
/// answer and retries included, unless [`OpenAiCompatible::timeout`] says
/// otherwise.
///
/// ```
/// use crew_runtime::openai::{DEFAULT_TIMEOUT, OpenAiCompatible};
///
/// // Twice the default, for a slow local model.
/// let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1")
///     .timeout(DEFAULT_TIMEOUT * 2);
/// # let _ = llm;
/// ```
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How many times a request that failed for a reason worth retrying is
/// tried again, unless [`OpenAiCompatible::max_retries`] says otherwise.
///
/// ```
/// use crew_runtime::openai::{DEFAULT_MAX_RETRIES, OpenAiCompatible};
///
/// let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1")
///     .max_retries(DEFAULT_MAX_RETRIES + 3);
/// # let _ = llm;
/// ```
pub const DEFAULT_MAX_RETRIES: u32 = model_options::DEFAULT_MAX_RETRIES;
/// The wait before the first retry, doubled for each further one, unless
/// [`OpenAiCompatible::retry_backoff`] says otherwise.
///
/// ```
/// use crew_runtime::openai::{DEFAULT_RETRY_BACKOFF, OpenAiCompatible};
///
/// let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1")
///     .retry_backoff(DEFAULT_RETRY_BACKOFF / 5);
/// # let _ = llm;
/// ```
pub const DEFAULT_RETRY_BACKOFF: Duration = model_options::DEFAULT_RETRY_BACKOFF;
/// The longest the client waits before a retry: a server that asks for more
/// (`Retry-After`) gets its error reported instead, and the doubling waits
/// stop growing there.
///
/// ```
/// use std::time::Duration;
/// use crew_runtime::openai::MAX_RETRY_WAIT;
///
/// assert!(MAX_RETRY_WAIT >= Duration::from_secs(1));
/// ```
pub const MAX_RETRY_WAIT: Duration = crate::http_model::MAX_RETRY_WAIT;
/// The most bytes of an answer (a plain body, or a whole stream) the client
/// reads, unless [`OpenAiCompatible::max_response_bytes`] says otherwise.
///
/// ```
/// use crew_runtime::openai::{DEFAULT_MAX_RESPONSE_BYTES, OpenAiCompatible};
///
/// let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1")
///     .max_response_bytes(DEFAULT_MAX_RESPONSE_BYTES * 4);
/// # let _ = llm;
/// ```
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = model_options::DEFAULT_MAX_RESPONSE_BYTES;

/// Where the model lives and which one to ask, as read from the
/// environment.
///
/// Its `Debug` output shows neither the key nor a password in the base URL:
///
/// ```
/// use crew_runtime::openai::OpenAiConfig;
///
/// let config = OpenAiConfig {
///     base_url: "http://me:hunter22@localhost:8080/v1".to_owned(),
///     model: "llama3.1".to_owned(),
///     api_key: Some("sk-secret".to_owned()),
/// };
/// let shown = format!("{config:?}");
/// assert!(!shown.contains("hunter22") && !shown.contains("sk-secret"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct OpenAiConfig {
    /// The server's base URL, up to and including the API version
    /// (`https://api.openai.com/v1`, `http://localhost:11434/v1`).
    pub base_url: String,
    /// The model name the server knows (`gpt-4o-mini`, `llama3.1`).
    pub model: String,
    /// The bearer token, if the server wants one.
    pub api_key: Option<String>,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key and the URL's password are secrets: never print them, only
        // whether there is a key.
        f.debug_struct("OpenAiConfig")
            .field("base_url", &mask_password(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The required environment variables that are not set, with a message that
/// says how to set them.
///
/// ```
/// use crew_runtime::openai::{MissingEnv, OpenAiConfig};
///
/// let missing = OpenAiConfig::from_lookup(|_| None);
/// assert_eq!(missing, Err(MissingEnv { variables: vec!["OPENAI_MODEL"] }));
/// let message = missing.err().map(|m| m.to_string()).unwrap_or_default();
/// assert!(message.contains("OPENAI_MODEL=gpt-4o-mini"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "set {} to use an OpenAI-compatible model server \
     (e.g. `{MODEL_VAR}=gpt-4o-mini`); {BASE_URL_VAR} defaults to {DEFAULT_BASE_URL} \
     (e.g. `{BASE_URL_VAR}=http://localhost:11434/v1` for Ollama) and {API_KEY_VAR} \
     is optional for local servers",
    .variables.join(" and ")
)]
pub struct MissingEnv {
    /// The names of the missing variables.
    pub variables: Vec<&'static str>,
}

impl OpenAiConfig {
    /// Reads `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `OPENAI_MODEL` from the
    /// process environment. Empty values count as unset.
    ///
    /// ```
    /// use crew_runtime::openai::OpenAiConfig;
    ///
    /// if let Ok(config) = OpenAiConfig::from_env() {
    ///     println!("{} at {}", config.model, config.base_url);
    /// }
    /// ```
    pub fn from_env() -> Result<OpenAiConfig, MissingEnv> {
        OpenAiConfig::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`OpenAiConfig::from_env`], reading variables through `lookup`
    /// (a map in tests, the process environment in programs).
    ///
    /// ```
    /// use crew_runtime::openai::{DEFAULT_BASE_URL, OpenAiConfig};
    ///
    /// let config = OpenAiConfig::from_lookup(|name| {
    ///     (name == "OPENAI_MODEL").then(|| "gpt-4o-mini".to_owned())
    /// });
    /// assert_eq!(config.map(|c| c.base_url), Ok(DEFAULT_BASE_URL.to_owned()));
    /// ```
    pub fn from_lookup(
        mut lookup: impl FnMut(&str) -> Option<String>,
    ) -> Result<OpenAiConfig, MissingEnv> {
        let mut read = |name: &str| {
            lookup(name)
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
        };
        let base_url = read(BASE_URL_VAR).unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let api_key = read(API_KEY_VAR);
        let Some(model) = read(MODEL_VAR) else {
            return Err(MissingEnv {
                variables: vec![MODEL_VAR],
            });
        };
        Ok(OpenAiConfig {
            base_url,
            model,
            api_key,
        })
    }
}

/// A chat model behind an OpenAI-compatible `/chat/completions` endpoint,
/// asked with native tool calling.
///
/// Cloning is cheap and the clones share their connections.
///
/// ```
/// use std::time::Duration;
/// use crew_runtime::openai::OpenAiCompatible;
///
/// let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1")
///     .stream(true)
///     .max_retries(3)
///     .timeout(Duration::from_secs(90));
/// assert_eq!(llm.model(), "llama3.1");
/// ```
#[derive(Clone)]
pub struct OpenAiCompatible {
    /// The options' model, base URL (the default one when they name none)
    /// and key, as [`OpenAiCompatible::config`] shows them.
    config: OpenAiConfig,
    options: ModelOptions,
    /// The answer's cap and the field that carries it, if set.
    cap: Option<(u32, CapField)>,
    /// The HTTP client, or why it could not be set up (reported by
    /// [`OpenAiCompatible::check`] and by every call, so that building a
    /// client stays infallible).
    http: Result<reqwest::Client, String>,
}

impl fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("config", &self.config)
            .field("options", &self.options)
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

impl OpenAiCompatible {
    /// A client for `model` at `base_url` (up to and including the API
    /// version, e.g. `http://localhost:11434/v1`), without a key, with a
    /// timeout of [`DEFAULT_TIMEOUT`], the server's default temperature, and
    /// no streaming.
    ///
    /// ```
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1");
    /// assert_eq!(llm.check(), Ok(()));
    /// ```
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiCompatible::with_config(OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
        })
    }

    /// A client for an already read configuration.
    ///
    /// ```
    /// use crew_runtime::openai::{OpenAiCompatible, OpenAiConfig};
    ///
    /// let config = OpenAiConfig {
    ///     base_url: "http://localhost:8000/v1".to_owned(),
    ///     model: "qwen2.5".to_owned(),
    ///     api_key: Some("token".to_owned()),
    /// };
    /// let llm = OpenAiCompatible::with_config(config.clone());
    /// assert_eq!(llm.config(), &config);
    /// ```
    pub fn with_config(config: OpenAiConfig) -> Self {
        let mut options = ModelOptions::new(config.model).base_url(config.base_url);
        options.api_key = config.api_key;
        OpenAiCompatible::with_options(options)
    }

    /// A client configured by the options both model clients share (the
    /// base URL [`DEFAULT_BASE_URL`] and the timeout [`DEFAULT_TIMEOUT`]
    /// when they name none).
    ///
    /// ```
    /// use std::time::Duration;
    /// use crew_runtime::ModelOptions;
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let options = ModelOptions::new("llama3.1")
    ///     .base_url("http://localhost:11434/v1")
    ///     .timeout(Duration::from_secs(30));
    /// let llm = OpenAiCompatible::with_options(options.clone());
    /// assert_eq!(llm.model_options(), &options);
    /// ```
    pub fn with_options(options: ModelOptions) -> Self {
        OpenAiCompatible {
            config: config_of(&options),
            options,
            cap: None,
            http: build_http_client(),
        }
    }

    /// Replaces every shared option at once (model, base URL, key, timeout,
    /// retries, limits, streaming, temperature) with `options`, the way
    /// the other model clients take them.
    ///
    /// ```
    /// use crew_runtime::ModelOptions;
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let options = ModelOptions::new("qwen2.5").base_url("http://localhost:8000/v1").max_retries(0);
    /// let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1").options(options);
    /// assert_eq!(llm.model(), "qwen2.5");
    /// assert_eq!(llm.config().base_url, "http://localhost:8000/v1");
    /// ```
    pub fn options(mut self, options: ModelOptions) -> Self {
        self.config = config_of(&options);
        self.options = options;
        self
    }

    /// The shared options this client uses.
    ///
    /// ```
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1").max_retries(5);
    /// assert_eq!(llm.model_options().max_retries, 5);
    /// ```
    pub fn model_options(&self) -> &ModelOptions {
        &self.options
    }

    /// The client with one shared option changed.
    fn change(self, change: impl FnOnce(ModelOptions) -> ModelOptions) -> Self {
        let options = change(self.options.clone());
        self.options(options)
    }

    /// A client configured from `OPENAI_BASE_URL`, `OPENAI_API_KEY` and
    /// `OPENAI_MODEL` (see [`OpenAiConfig::from_env`]).
    ///
    /// Fails with [`LlmError::Config`] naming `OPENAI_MODEL` when it is not
    /// set, or when the base URL cannot be used (see
    /// [`OpenAiCompatible::check`]).
    ///
    /// ```
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// match OpenAiCompatible::from_env() {
    ///     Ok(llm) => println!("asking {}", llm.model()),
    ///     Err(error) => println!("{error}"),
    /// }
    /// ```
    pub fn from_env() -> Result<Self, LlmError> {
        OpenAiCompatible::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`OpenAiCompatible::from_env`], reading variables through
    /// `lookup`.
    ///
    /// ```
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let llm = OpenAiCompatible::from_lookup(|name| match name {
    ///     "OPENAI_BASE_URL" => Some("http://localhost:11434/v1".to_owned()),
    ///     "OPENAI_MODEL" => Some("llama3.1".to_owned()),
    ///     _ => None,
    /// });
    /// assert_eq!(llm.map(|llm| llm.model().to_owned()), Ok("llama3.1".to_owned()));
    /// ```
    pub fn from_lookup(lookup: impl FnMut(&str) -> Option<String>) -> Result<Self, LlmError> {
        let config = OpenAiConfig::from_lookup(lookup)
            .map_err(|missing| LlmError::Config(missing.to_string()))?;
        let client = OpenAiCompatible::with_config(config);
        client.check()?;
        Ok(client)
    }

    /// Sends `key` as `Authorization: Bearer <key>` with every request (in
    /// place of any user and password in the base URL).
    ///
    /// ```
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let llm = OpenAiCompatible::new("http://localhost:8000/v1", "qwen2.5").api_key("token");
    /// assert!(!format!("{llm:?}").contains("token"));
    /// ```
    pub fn api_key(self, key: impl Into<String>) -> Self {
        self.change(|options| options.api_key(key))
    }

    /// Gives up on a call after `timeout` (connecting, sending, reading the
    /// whole answer or stream, and the waits between retries), with
    /// [`LlmError::Timeout`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1")
    ///     .timeout(Duration::from_secs(300));
    /// # let _ = llm;
    /// ```
    pub fn timeout(self, timeout: Duration) -> Self {
        self.change(|options| options.timeout(timeout))
    }

    /// Sends this sampling temperature (the server's default otherwise).
    ///
    /// ```
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let deterministic = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1")
    ///     .temperature(0.0);
    /// # let _ = deterministic;
    /// ```
    pub fn temperature(self, temperature: f32) -> Self {
        self.change(|options| options.temperature(temperature))
    }

    /// Caps each answer at `tokens`, sent as `max_tokens` (the field every
    /// OpenAI-compatible server reads). A token or money budget needs a
    /// cap to bound a call (feature `budget`); OpenAI's reasoning
    /// models take only [`max_completion_tokens`](Self::max_completion_tokens).
    /// Unset by default: the server's own limit applies, and nothing
    /// bounds an answer. A cap of 0 fails every call with
    /// [`LlmError::Config`].
    ///
    /// ```
    /// use crew_runtime::llm::Llm;
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1").max_tokens(1_024);
    /// assert_eq!(llm.max_output_tokens(), Some(1_024));
    /// ```
    pub fn max_tokens(mut self, tokens: u32) -> Self {
        self.cap = Some((tokens, CapField::MaxTokens));
        self
    }

    /// Caps each answer at `tokens`, sent as `max_completion_tokens`:
    /// OpenAI's own field, which counts reasoning tokens too and is the
    /// only one its reasoning models take. As [`max_tokens`](Self::max_tokens)
    /// otherwise.
    ///
    /// ```
    /// use crew_runtime::llm::Llm;
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let llm = OpenAiCompatible::new("https://api.openai.com/v1", "o4-mini")
    ///     .max_completion_tokens(4_096);
    /// assert_eq!(llm.max_output_tokens(), Some(4_096));
    /// ```
    pub fn max_completion_tokens(mut self, tokens: u32) -> Self {
        self.cap = Some((tokens, CapField::MaxCompletionTokens));
        self
    }

    /// Asks for streamed answers (`"stream": true`), whose text reaches the
    /// [`DeltaSink`] given to [`OpenAiCompatible::complete_streaming`] as it
    /// arrives. Off by default.
    ///
    /// ```
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1").stream(true);
    /// # let _ = llm;
    /// ```
    pub fn stream(self, on: bool) -> Self {
        self.change(|options| options.stream(on))
    }

    /// Tries a request again at most `retries` times after a rate limit
    /// (HTTP 429), a server error (5xx) or a connection that could not be
    /// made; 0 turns retries off. [`DEFAULT_MAX_RETRIES`] otherwise.
    ///
    /// ```
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let no_retries = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1")
    ///     .max_retries(0);
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
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let patient = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1")
    ///     .retry_backoff(Duration::from_secs(2));
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
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let small = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1")
    ///     .max_response_bytes(1024 * 1024);
    /// # let _ = small;
    /// ```
    pub fn max_response_bytes(self, bytes: usize) -> Self {
        self.change(|options| options.max_response_bytes(bytes))
    }

    /// The configuration this client uses.
    ///
    /// ```
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1");
    /// assert_eq!(llm.config().base_url, "http://localhost:11434/v1");
    /// ```
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The model name the server is asked for, a short name for logs.
    ///
    /// ```
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1");
    /// assert_eq!(llm.model(), "llama3.1");
    /// ```
    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// Checks, without any network call, that a request can be made: the
    /// base URL is a valid `http://` or `https://` URL (`https://` only with
    /// the `tls` feature), a model is named, the timeout and the answer size
    /// limit are not 0, and the key can be sent in an HTTP header (the
    /// checks of [`ModelOptions::check`], with the same texts).
    ///
    /// ```
    /// use crew_runtime::llm::LlmError;
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// let llm = OpenAiCompatible::new("localhost:11434/v1", "llama3.1");
    /// assert!(matches!(llm.check(), Err(LlmError::Config(_))));
    /// ```
    pub fn check(&self) -> Result<(), LlmError> {
        let secrets = PROVIDER.secrets(&self.options);
        self.call()
            .map(drop)
            .map_err(|error| secrets.scrub_error(error))
    }

    /// Asks the model for its next turn: the conversation so far and the
    /// tools it may call.
    ///
    /// When streaming is on ([`OpenAiCompatible::stream`]), each piece of
    /// the answer's text reaches `sink` as it arrives; otherwise `sink` gets
    /// the whole text at once when the answer is in. Either way the turn is
    /// the same, tool calls included.
    ///
    /// ```
    /// use std::sync::{Mutex, PoisonError};
    /// use crew_runtime::llm::{ChatMessage, DeltaSink, LlmError, ModelTurn};
    /// use crew_runtime::openai::OpenAiCompatible;
    ///
    /// struct Console;
    ///
    /// impl DeltaSink for Console {
    ///     fn delta(&self, text: &str) {
    ///         print!("{text}");
    ///     }
    /// }
    ///
    /// async fn ask(llm: &OpenAiCompatible) -> Result<ModelTurn, LlmError> {
    ///     let messages = [
    ///         ChatMessage::system("You answer in one sentence."),
    ///         ChatMessage::user("Why is the sky blue?"),
    ///     ];
    ///     llm.complete_streaming(&messages, &[], Some(&Console)).await
    /// }
    ///
    /// let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1").stream(true);
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
    ) -> Result<Answer, LlmError> {
        // The one exit of every error: whatever it quotes (a server's body
        // included), the key and the URL's password do not leave.
        let secrets = PROVIDER.secrets(&self.options);
        self.ask(messages, tools, sink)
            .await
            .map_err(|error| secrets.scrub_error(error))
    }
}

/// The client as a crew's model: streamed text goes to the crew's
/// listeners when [`OpenAiCompatible::stream`] is on.
#[async_trait::async_trait]
impl Llm for OpenAiCompatible {
    fn name(&self) -> &str {
        self.model()
    }

    fn max_output_tokens(&self) -> Option<u64> {
        self.cap.map(|(tokens, _)| u64::from(tokens))
    }

    async fn complete(&self, request: &LlmRequest<'_>) -> Result<ModelTurn, LlmError> {
        self.complete_streaming(request.messages, request.tools, request.stream)
            .await
    }

    /// Reads the response's `usage` (in a stream, the chunk that carries
    /// it, when the server sends one).
    async fn complete_with_usage(
        &self,
        request: &LlmRequest<'_>,
    ) -> Result<(ModelTurn, Option<TokenUsage>), LlmError> {
        self.complete_counted(request.messages, request.tools, request.stream)
            .await
    }
}

/// The chat-completions wire format.
struct ChatCompletions;

impl Wire for ChatCompletions {
    type Stream = TurnAssembler;

    fn parse_answer(text: &str) -> Result<Answer, LlmError> {
        parse_response(text)
    }

    fn error_message(body: &str) -> String {
        error_message(body)
    }
}

impl OpenAiCompatible {
    async fn ask(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolDefinition],
        sink: Option<&dyn DeltaSink>,
    ) -> Result<Answer, LlmError> {
        let call = self.call()?;
        let request = wire_request(
            &self.options.model,
            self.options.temperature,
            self.cap,
            self.options.stream,
            messages,
            tools,
        );
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
        call.ask::<ChatCompletions>(&body, sink).await
    }

    /// The URL, headers and limits of a call's requests, or why none can be
    /// made.
    fn call(&self) -> Result<Call<'_>, LlmError> {
        let call = PROVIDER.call(&self.options, &self.http, HeaderMap::new())?;
        if let Some((0, _)) = self.cap {
            return Err(LlmError::Config(
                "the answer's cap (max_tokens) is 0: the server needs room for at least one token"
                    .to_owned(),
            ));
        }
        Ok(call)
    }
}

/// How the chat-completions requests are sent.
const PROVIDER: Provider = Provider {
    default_base_url: DEFAULT_BASE_URL,
    default_timeout: DEFAULT_TIMEOUT,
    path: "chat/completions",
    key_header: AUTHORIZATION,
    key_prefix: "Bearer ",
};

/// The configuration `options` make, as [`OpenAiCompatible::config`] shows
/// it.
fn config_of(options: &ModelOptions) -> OpenAiConfig {
    OpenAiConfig {
        base_url: PROVIDER.base_url(options).to_owned(),
        model: options.model.clone(),
        api_key: options.api_key.clone(),
    }
}

impl StreamedTurn for TurnAssembler {
    fn push_event(
        &mut self,
        _event: Option<&str>,
        data: &str,
        sink: Option<&dyn DeltaSink>,
    ) -> Result<bool, LlmError> {
        Ok(self.push(data, sink)? == Progress::Done)
    }

    fn complete_answer(self) -> Answer {
        let usage = self.usage;
        (self.finish(), usage)
    }

    fn answer_at_end_of_stream(self) -> Result<Answer, LlmError> {
        let usage = self.usage;
        Ok((self.finish_at_end_of_stream()?, usage))
    }
}
