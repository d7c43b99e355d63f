//! The knobs every HTTP model client shares — model, base URL, key,
//! timeout, retries, backoff, the size limit of an answer, streaming and
//! temperature — as one value, so a service configures either provider the
//! same way and the checks of those knobs are written once.
//!
//! ```
//! use std::time::Duration;
//! use crew_runtime::ModelOptions;
//! # #[cfg(all(feature = "openai", feature = "anthropic"))]
//! use crew_runtime::{anthropic::Anthropic, openai::OpenAiCompatible};
//!
//! let options = ModelOptions::new("my-model")
//!     .base_url("http://localhost:8080/v1")
//!     .timeout(Duration::from_secs(90))
//!     .max_retries(3)
//!     .max_response_bytes(1024 * 1024);
//! # #[cfg(all(feature = "openai", feature = "anthropic"))]
//! # {
//! let openai = OpenAiCompatible::with_options(options.clone());
//! let anthropic = Anthropic::new("claude-sonnet-4-5").options(options);
//! assert_eq!(openai.model(), anthropic.model());
//! # }
//! ```

use std::fmt;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::HeaderValue;

use crate::http_secrets::mask_password;
use crate::llm::LlmError;

/// How many times a request that failed for a reason worth retrying is
/// tried again, unless [`ModelOptions::max_retries`] says otherwise.
///
/// ```
/// use crew_runtime::ModelOptions;
/// use crew_runtime::model_options::DEFAULT_MAX_RETRIES;
///
/// assert_eq!(ModelOptions::new("m").max_retries, DEFAULT_MAX_RETRIES);
/// ```
pub const DEFAULT_MAX_RETRIES: u32 = 2;

/// The wait before the first retry, doubled for each further one, unless
/// [`ModelOptions::retry_backoff`] says otherwise.
///
/// ```
/// use crew_runtime::ModelOptions;
/// use crew_runtime::model_options::DEFAULT_RETRY_BACKOFF;
///
/// assert_eq!(ModelOptions::new("m").retry_backoff, DEFAULT_RETRY_BACKOFF);
/// ```
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_millis(500);

/// The most bytes of an answer (a plain body, or a whole stream) a client
/// reads, unless [`ModelOptions::max_response_bytes`] says otherwise.
///
/// ```
/// use crew_runtime::ModelOptions;
/// use crew_runtime::model_options::DEFAULT_MAX_RESPONSE_BYTES;
///
/// assert_eq!(ModelOptions::new("m").max_response_bytes, DEFAULT_MAX_RESPONSE_BYTES);
/// ```
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// What an HTTP model client needs to know that does not depend on its
/// provider: which model, where, with which key, and within which limits.
///
/// Build one with [`ModelOptions::new`] and its methods, then hand it whole
/// to a client (`OpenAiCompatible::with_options`, `Anthropic::options`, …).
/// The fields left unset — the base URL and the timeout — take the
/// client's own default. Its `Debug` output shows neither the key nor a
/// password in the base URL.
///
/// ```
/// use std::time::Duration;
/// use crew_runtime::ModelOptions;
///
/// let options = ModelOptions::new("llama3.1")
///     .base_url("http://me:hunter22@localhost:11434/v1")
///     .api_key("sk-secret")
///     .timeout(Duration::from_secs(30))
///     .retry_backoff(Duration::from_millis(200))
///     .stream(true)
///     .temperature(0.0);
/// assert_eq!(options.check(), Ok(()));
/// let shown = format!("{options:?}");
/// assert!(!shown.contains("hunter22") && !shown.contains("sk-secret"));
/// ```
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct ModelOptions {
    /// The model name the server knows (`gpt-4o-mini`, `claude-sonnet-4-5`).
    pub model: String,
    /// Where the requests go (up to the API version for an OpenAI-compatible
    /// server, without `/v1` for Anthropic's API); the client's default
    /// when `None`.
    pub base_url: Option<String>,
    /// The key the client sends in its provider's header, if any.
    pub api_key: Option<String>,
    /// How long one call may take, from connecting to the last byte of the
    /// answer, retries and their waits included; the client's default when
    /// `None`.
    pub timeout: Option<Duration>,
    /// How many times a request is tried again after a rate limit (429), a
    /// server error (5xx) or a connection that could not be made.
    pub max_retries: u32,
    /// The wait before the first retry (doubled for each further one) when
    /// the server does not say how long to wait (`Retry-After`).
    pub retry_backoff: Duration,
    /// The most bytes of an answer (a plain body or a whole stream) read.
    pub max_response_bytes: usize,
    /// Whether answers are asked for as server-sent events.
    pub stream: bool,
    /// The sampling temperature sent; the server's default when `None`.
    pub temperature: Option<f32>,
}

impl fmt::Debug for ModelOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key and the URL's password are secrets: never print them, only
        // whether there is a key.
        f.debug_struct("ModelOptions")
            .field("model", &self.model)
            .field(
                "base_url",
                &self.base_url.as_deref().map(|url| mask_password(url)),
            )
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_backoff", &self.retry_backoff)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("stream", &self.stream)
            .field("temperature", &self.temperature)
            .finish()
    }
}

/// Why a client's options cannot make a request: the same text whichever
/// provider the options are for.
///
/// ```
/// use std::time::Duration;
/// use crew_runtime::{ModelOptions, ModelOptionsError};
///
/// let zero = ModelOptions::new("llama3.1").timeout(Duration::ZERO);
/// assert_eq!(zero.check(), Err(ModelOptionsError::ZeroTimeout));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelOptionsError {
    /// The base URL is not an `http://` or `https://` URL.
    #[error(
        "the base URL {base_url:?} must start with http:// or https:// \
         (e.g. http://localhost:8080/v1)"
    )]
    NotHttp {
        /// The base URL, without its password.
        base_url: String,
    },
    /// The base URL is `https://` and the crate was built without `tls`.
    #[error(
        "the base URL {base_url} uses https, which needs the `tls` feature of crew-runtime \
         beside the client's own (`features = [\"openai\", \"tls\"]` or \
         `[\"anthropic\", \"tls\"]`); or use an http:// URL of a local server or gateway"
    )]
    HttpsWithoutTls {
        /// The base URL, without its password.
        base_url: String,
    },
    /// The base URL, with the client's path, is not a URL.
    #[error("the base URL {base_url} cannot be used in a request: {reason}")]
    UnusableBaseUrl {
        /// The base URL, without its password.
        base_url: String,
        /// What the URL parser found wrong.
        reason: String,
    },
    /// The model name is empty.
    #[error(
        "no model name is set: pass one to ModelOptions::new or to the client's constructor, \
         or set OPENAI_MODEL / ANTHROPIC_MODEL for a client read from the environment"
    )]
    NoModel,
    /// The timeout is zero: every call would time out at once.
    #[error(
        "the timeout is 0, so every call would time out before it starts: \
         give it a few seconds at least (e.g. `.timeout(Duration::from_secs(60))`)"
    )]
    ZeroTimeout,
    /// The answer size limit is zero: every answer would be refused.
    #[error(
        "max_response_bytes is 0, so every answer would be refused: \
         allow some bytes (the default is {DEFAULT_MAX_RESPONSE_BYTES})"
    )]
    ZeroResponseLimit,
    /// The key has characters an HTTP header cannot carry.
    #[error(
        "the API key cannot be used in a request: it has characters an HTTP header cannot \
         carry (a line break, or text that is not ASCII)"
    )]
    UnusableKey,
}

impl From<ModelOptionsError> for LlmError {
    fn from(error: ModelOptionsError) -> LlmError {
        LlmError::Config(error.to_string())
    }
}

impl ModelOptions {
    /// Options for `model`, with the client's default base URL and timeout,
    /// no key, [`DEFAULT_MAX_RETRIES`] retries after
    /// [`DEFAULT_RETRY_BACKOFF`], answers up to
    /// [`DEFAULT_MAX_RESPONSE_BYTES`], the server's default temperature, and
    /// no streaming.
    ///
    /// ```
    /// use crew_runtime::ModelOptions;
    ///
    /// let options = ModelOptions::new("gpt-4o-mini");
    /// assert_eq!((options.base_url, options.timeout), (None, None));
    /// ```
    pub fn new(model: impl Into<String>) -> Self {
        ModelOptions {
            model: model.into(),
            base_url: None,
            api_key: None,
            timeout: None,
            max_retries: DEFAULT_MAX_RETRIES,
            retry_backoff: DEFAULT_RETRY_BACKOFF,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            stream: false,
            temperature: None,
        }
    }

    /// Asks for `model` instead.
    ///
    /// ```
    /// use crew_runtime::ModelOptions;
    ///
    /// assert_eq!(ModelOptions::new("a").model("b").model, "b");
    /// ```
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Sends requests to `base_url` instead of the client's default.
    ///
    /// ```
    /// use crew_runtime::ModelOptions;
    ///
    /// let options = ModelOptions::new("llama3.1").base_url("http://localhost:11434/v1");
    /// assert_eq!(options.base_url.as_deref(), Some("http://localhost:11434/v1"));
    /// ```
    pub fn base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = Some(base_url.into());
        self
    }

    /// Sends `key` with every request, in the provider's header
    /// (`Authorization: Bearer …`, `x-api-key`).
    ///
    /// ```
    /// use crew_runtime::ModelOptions;
    ///
    /// let options = ModelOptions::new("gpt-4o-mini").api_key("sk-secret");
    /// assert!(!format!("{options:?}").contains("sk-secret"));
    /// ```
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Gives up on a call after `timeout` (connecting, sending, reading the
    /// whole answer or stream, and the waits between retries).
    ///
    /// ```
    /// use std::time::Duration;
    /// use crew_runtime::ModelOptions;
    ///
    /// let options = ModelOptions::new("m").timeout(Duration::from_secs(5));
    /// assert_eq!(options.timeout, Some(Duration::from_secs(5)));
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Tries a request again at most `retries` times; 0 turns retries off.
    ///
    /// ```
    /// use crew_runtime::ModelOptions;
    ///
    /// assert_eq!(ModelOptions::new("m").max_retries(0).max_retries, 0);
    /// ```
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// Waits `backoff` before the first retry, twice as long before the
    /// second, and so on (up to the clients' `MAX_RETRY_WAIT`), when the
    /// server does not say how long to wait.
    ///
    /// ```
    /// use std::time::Duration;
    /// use crew_runtime::ModelOptions;
    ///
    /// let options = ModelOptions::new("m").retry_backoff(Duration::from_secs(1));
    /// assert_eq!(options.retry_backoff, Duration::from_secs(1));
    /// ```
    pub fn retry_backoff(mut self, backoff: Duration) -> Self {
        self.retry_backoff = backoff;
        self
    }

    /// Refuses an answer (a plain body, or everything a stream sends) larger
    /// than `bytes`.
    ///
    /// ```
    /// use crew_runtime::ModelOptions;
    ///
    /// assert_eq!(ModelOptions::new("m").max_response_bytes(4096).max_response_bytes, 4096);
    /// ```
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// Asks for streamed answers (server-sent events), or not.
    ///
    /// ```
    /// use crew_runtime::ModelOptions;
    ///
    /// assert!(ModelOptions::new("m").stream(true).stream);
    /// ```
    pub fn stream(mut self, on: bool) -> Self {
        self.stream = on;
        self
    }

    /// Sends this sampling temperature.
    ///
    /// ```
    /// use crew_runtime::ModelOptions;
    ///
    /// assert_eq!(ModelOptions::new("m").temperature(0.0).temperature, Some(0.0));
    /// ```
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Checks, without any network call, what these options alone say: the
    /// base URL (when one is set) is an `http://` or `https://` URL
    /// (`https://` only with the `tls` feature), a model is named, the
    /// timeout and the size limit are not 0, and the key can be sent in an
    /// HTTP header. A client checks the same, with its default base URL.
    ///
    /// ```
    /// use crew_runtime::{ModelOptions, ModelOptionsError};
    ///
    /// let options = ModelOptions::new("m").base_url("localhost:8080");
    /// assert!(matches!(options.check(), Err(ModelOptionsError::NotHttp { .. })));
    /// ```
    pub fn check(&self) -> Result<(), ModelOptionsError> {
        if let Some(base_url) = &self.base_url {
            request_url(base_url, "")?;
        }
        self.check_knobs()
    }

    /// Everything but the base URL.
    pub(crate) fn check_knobs(&self) -> Result<(), ModelOptionsError> {
        if self.model.trim().is_empty() {
            return Err(ModelOptionsError::NoModel);
        }
        if self.timeout == Some(Duration::ZERO) {
            return Err(ModelOptionsError::ZeroTimeout);
        }
        if self.max_response_bytes == 0 {
            return Err(ModelOptionsError::ZeroResponseLimit);
        }
        if let Some(key) = &self.api_key {
            key_header(key)?;
        }
        Ok(())
    }
}

/// The URL of a request to `path` under `base_url`, or why the base URL
/// cannot be used.
pub(crate) fn request_url(base_url: &str, path: &str) -> Result<Url, ModelOptionsError> {
    let base = base_url.trim().trim_end_matches('/');
    let shown = mask_password(base).into_owned();
    let scheme = base
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("http") => {}
        Some("https") if cfg!(feature = "tls") => {}
        Some("https") => return Err(ModelOptionsError::HttpsWithoutTls { base_url: shown }),
        _ => return Err(ModelOptionsError::NotHttp { base_url: shown }),
    }
    Url::parse(&format!("{base}/{path}")).map_err(|e| ModelOptionsError::UnusableBaseUrl {
        base_url: shown,
        reason: e.to_string(),
    })
}

/// A header value that carries an API key: marked sensitive, so that no
/// debug output shows it; an error when a header cannot carry it.
pub(crate) fn key_header(text: &str) -> Result<HeaderValue, ModelOptionsError> {
    let mut value = HeaderValue::from_str(text).map_err(|_| ModelOptionsError::UnusableKey)?;
    value.set_sensitive(true);
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_knobs_are_checked_with_one_text_each() {
        let cases = [
            (ModelOptions::new(" "), ModelOptionsError::NoModel),
            (
                ModelOptions::new("m").timeout(Duration::ZERO),
                ModelOptionsError::ZeroTimeout,
            ),
            (
                ModelOptions::new("m").max_response_bytes(0),
                ModelOptionsError::ZeroResponseLimit,
            ),
            (
                ModelOptions::new("m").api_key("sk\nInjected: 1"),
                ModelOptionsError::UnusableKey,
            ),
            (
                ModelOptions::new("m").base_url("ftp://u:pw@host"),
                ModelOptionsError::NotHttp {
                    base_url: "ftp://u:***@host".to_owned(),
                },
            ),
        ];

        for (options, expected) in cases {
            assert_eq!(options.check(), Err(expected), "{options:?}");
        }
        assert_eq!(ModelOptions::new("m").check(), Ok(()));
    }

    #[test]
    fn the_key_header_is_marked_sensitive() {
        let value = key_header("Bearer sk-secret");

        assert!(value.is_ok_and(|value| value.is_sensitive()));
    }
}
