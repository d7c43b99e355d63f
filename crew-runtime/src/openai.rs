//! Any server that speaks `POST {base_url}/chat/completions` with `tools`
//! will do.
//!
//! ```
//! use std::time::Duration;
//! use crew_runtime::openai::OpenAiCompatible;
//!
//! // A local Ollama server needs no key; OpenAI needs one (and the `tls`
//! // feature for its https endpoint).
//! let llm = OpenAiCompatible::new("http://localhost:11434/v1", "llama3.1")
//!     .timeout(Duration::from_secs(120))
//!     .temperature(0.0);
//! # let _ = llm;
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
//! The tool-call arguments are handed on exactly as the server sent them,
//! even when they are not valid JSON: the executor checks them and tells the
//! model what was wrong, which a client that dropped them could not do.
//!
//! `https` base URLs need the crate feature `tls`; without it the client
//! refuses them with [`LlmError::Config`](crate::llm::LlmError::Config)
//! before opening any connection.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::llm::{ChatMessage, Llm, LlmError, LlmRequest, ModelTurn, Role, ToolCallRequest};

/// The environment variable naming the server's base URL.
pub const BASE_URL_VAR: &str = "OPENAI_BASE_URL";
/// The environment variable holding the API key (optional for local servers).
pub const API_KEY_VAR: &str = "OPENAI_API_KEY";
/// The environment variable naming the model (required).
pub const MODEL_VAR: &str = "OPENAI_MODEL";
/// The base URL used when `OPENAI_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// How long one request may take, from connecting to the last byte of the
/// answer, unless [`OpenAiCompatible::timeout`] says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How much of an error body [`LlmError::Http`] keeps.
const ERROR_BODY_CHARS: usize = 500;
/// How much of an unreadable answer [`LlmError::InvalidResponse`] quotes.
const EXCERPT_CHARS: usize = 200;

/// Where the model lives and which one to ask, as read from the
/// environment.
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
        // The key is a secret: never print it, only whether there is one.
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The required environment variables that are not set, with a message that
/// says how to set them.
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
    pub fn from_env() -> Result<OpenAiConfig, MissingEnv> {
        OpenAiConfig::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`OpenAiConfig::from_env`], reading variables through `lookup`
    /// (a map in tests, the process environment in programs).
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
#[derive(Clone)]
pub struct OpenAiCompatible {
    config: OpenAiConfig,
    timeout: Duration,
    temperature: Option<f32>,
    agent: ureq::Agent,
}

impl fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("config", &self.config)
            .field("timeout", &self.timeout)
            .field("temperature", &self.temperature)
            .finish_non_exhaustive()
    }
}

impl OpenAiCompatible {
    /// A client for `model` at `base_url` (up to and including the API
    /// version, e.g. `http://localhost:11434/v1`), without a key, with a
    /// timeout of [`DEFAULT_TIMEOUT`] and the server's default temperature.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiCompatible::with_config(OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
        })
    }

    /// A client for an already read configuration.
    pub fn with_config(config: OpenAiConfig) -> Self {
        OpenAiCompatible {
            config,
            timeout: DEFAULT_TIMEOUT,
            temperature: None,
            agent: build_agent(DEFAULT_TIMEOUT),
        }
    }

    /// A client configured from `OPENAI_BASE_URL`, `OPENAI_API_KEY` and
    /// `OPENAI_MODEL` (see [`OpenAiConfig::from_env`]).
    ///
    /// Fails with [`LlmError::Config`] naming `OPENAI_MODEL` when it is not
    /// set, or when the base URL cannot be used (see
    /// [`OpenAiCompatible::check`]).
    pub fn from_env() -> Result<Self, LlmError> {
        OpenAiCompatible::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`OpenAiCompatible::from_env`], reading variables through
    /// `lookup`.
    pub fn from_lookup(lookup: impl FnMut(&str) -> Option<String>) -> Result<Self, LlmError> {
        let config = OpenAiConfig::from_lookup(lookup)
            .map_err(|missing| LlmError::Config(missing.to_string()))?;
        let client = OpenAiCompatible::with_config(config);
        client.check()?;
        Ok(client)
    }

    /// Sends `key` as `Authorization: Bearer <key>` with every request.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.config.api_key = Some(key.into());
        self
    }

    /// Gives up on a request after `timeout` (connecting, sending and reading
    /// the whole answer), with [`LlmError::Timeout`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.agent = build_agent(timeout);
        self
    }

    /// Sends this sampling temperature (the server's default otherwise).
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// The configuration this client uses.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// Checks, without any network call, that the base URL can be used:
    /// `http://` or `https://`, and `https://` only with the `tls` feature.
    pub fn check(&self) -> Result<(), LlmError> {
        self.endpoint().map(drop)
    }

    /// The chat-completions URL, or why the base URL cannot be used.
    fn endpoint(&self) -> Result<String, LlmError> {
        let base = self.config.base_url.trim().trim_end_matches('/');
        let scheme = base
            .split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("http") => {}
            Some("https") if cfg!(feature = "tls") => {}
            Some("https") => {
                return Err(LlmError::Config(format!(
                    "the base URL {base} uses https, which needs the `tls` feature of \
                     crew-runtime (`crew-runtime = {{ version = \"…\", features = [\"tls\"] }}`); \
                     or use an http:// URL of a local server"
                )));
            }
            _ => {
                return Err(LlmError::Config(format!(
                    "the base URL {base:?} must start with http:// or https:// \
                     (e.g. http://localhost:11434/v1)"
                )));
            }
        }
        if self.config.model.trim().is_empty() {
            return Err(LlmError::Config(format!(
                "no model name is set (set {MODEL_VAR} or pass one to OpenAiCompatible::new)"
            )));
        }
        Ok(format!("{base}/chat/completions"))
    }
}

impl Llm for OpenAiCompatible {
    fn name(&self) -> &str {
        &self.config.model
    }

    fn complete(&self, request: &LlmRequest<'_>) -> Result<ModelTurn, LlmError> {
        let url = self.endpoint()?;
        let body = wire_request(&self.config.model, self.temperature, request);
        // Only strings and JSON values go in, so encoding cannot fail in
        // practice; if it ever did, the request itself is what is wrong.
        let body = serde_json::to_vec(&body)
            .map_err(|e| LlmError::Config(format!("the request could not be encoded: {e}")))?;
        tracing::debug!(
            model = %self.config.model,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "asking the model"
        );

        let mut post = self
            .agent
            .post(&url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json");
        if let Some(key) = &self.config.api_key {
            post = post.header("Authorization", format!("Bearer {key}"));
        }
        let mut response = post.send(&body[..]).map_err(|e| self.transport_error(e))?;

        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string();
        if status >= 400 {
            let body = match text {
                Ok(text) => error_message(&text),
                Err(e) => format!("(the body could not be read: {e})"),
            };
            return Err(LlmError::Http { status, body });
        }
        let text = text.map_err(|e| self.transport_error(e))?;
        parse_response(&text)
    }
}

impl OpenAiCompatible {
    fn transport_error(&self, error: ureq::Error) -> LlmError {
        match error {
            ureq::Error::Timeout(_) => LlmError::Timeout(self.timeout),
            ureq::Error::Io(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
                ) =>
            {
                LlmError::Timeout(self.timeout)
            }
            // The request could not even be built: a URL or key that is
            // not valid in HTTP.
            error @ (ureq::Error::BadUri(_) | ureq::Error::Http(_)) => LlmError::Config(format!(
                "the base URL {:?} or the API key cannot be used in a request: {error}",
                self.config.base_url
            )),
            ureq::Error::BodyExceedsLimit(limit) => {
                LlmError::InvalidResponse(format!("the answer is larger than {limit} bytes"))
            }
            other => LlmError::Transport(format!("{}: {other}", self.config.base_url)),
        }
    }
}

fn build_agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        // Error statuses are answers too: their bodies say what went wrong.
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .new_agent()
}

// ---- the wire format -------------------------------------------------------

#[derive(Serialize)]
struct ChatCompletionRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    /// `null` only for an assistant turn that has tool calls and no text,
    /// as the API itself sends such turns.
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

fn wire_request<'a>(
    model: &'a str,
    temperature: Option<f32>,
    request: &LlmRequest<'a>,
) -> ChatCompletionRequest<'a> {
    ChatCompletionRequest {
        model,
        messages: request.messages.iter().map(wire_message).collect(),
        tools: request
            .tools
            .iter()
            .map(|tool| WireTool {
                kind: "function",
                function: WireFunction {
                    name: &tool.name,
                    description: &tool.description,
                    parameters: &tool.parameters,
                },
            })
            .collect(),
        temperature,
    }
}

fn wire_message(message: &ChatMessage) -> WireMessage<'_> {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let content = if message.content.is_empty() && !message.tool_calls.is_empty() {
        None
    } else {
        Some(message.content.as_str())
    };
    WireMessage {
        role,
        content,
        tool_calls: message
            .tool_calls
            .iter()
            .map(|call| WireToolCall {
                id: &call.id,
                kind: "function",
                function: WireFunctionCall {
                    name: &call.name,
                    arguments: &call.arguments,
                },
            })
            .collect(),
        tool_call_id: message.tool_call_id.as_deref(),
    }
}

// Servers differ in what they leave out, so every field that some server
// omits has a default; only a shape that cannot be read fails.

#[derive(Deserialize)]
struct ChatCompletionResponse {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    message: ResponseMessage,
}

#[derive(Deserialize)]
struct ResponseMessage {
    /// A string, `null`, or (some servers) a list of `{type, text}` parts.
    #[serde(default)]
    content: Value,
    #[serde(default)]
    tool_calls: Option<Vec<ResponseToolCall>>,
}

#[derive(Deserialize)]
struct ResponseToolCall {
    #[serde(default)]
    id: Option<String>,
    function: ResponseFunction,
}

#[derive(Deserialize)]
struct ResponseFunction {
    #[serde(default)]
    name: String,
    /// A string of JSON text per the API; some servers send the object
    /// itself.
    #[serde(default)]
    arguments: Value,
}

fn parse_response(text: &str) -> Result<ModelTurn, LlmError> {
    if text.trim().is_empty() {
        return Err(LlmError::InvalidResponse("the body is empty".to_owned()));
    }
    let response: ChatCompletionResponse = serde_json::from_str(text).map_err(|e| {
        LlmError::InvalidResponse(format!("not a chat completion ({e}): {}", excerpt(text)))
    })?;
    let Some(choice) = response.choices.into_iter().next() else {
        let reason = match response.error.as_ref().and_then(error_text) {
            Some(message) => format!("the server reported an error: {message}"),
            None => format!("no choices in {}", excerpt(text)),
        };
        return Err(LlmError::InvalidResponse(reason));
    };
    let content = content_text(&choice.message.content)?;
    let calls: Vec<ToolCallRequest> = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(index, call)| ToolCallRequest {
            // A call without an id still needs one its observation can
            // answer; its position is unique within the turn.
            id: call
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| format!("call_{index}")),
            name: call.function.name,
            arguments: arguments_text(call.function.arguments),
        })
        .collect();
    if calls.is_empty() {
        Ok(ModelTurn::FinalAnswer(content))
    } else {
        Ok(ModelTurn::ToolCalls { content, calls })
    }
}

fn content_text(content: &Value) -> Result<String, LlmError> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => Ok(parts
            .iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(text.as_str()),
                part => part.get("text").and_then(Value::as_str),
            })
            .collect()),
        other => Err(LlmError::InvalidResponse(format!(
            "the message content is neither text nor a list of parts: {}",
            excerpt(&other.to_string())
        ))),
    }
}

/// The arguments as the model produced them: the string itself when the
/// server sent a string (valid JSON or not), the JSON text of anything else,
/// and an empty object when there were none (a call of a tool without
/// parameters).
fn arguments_text(arguments: Value) -> String {
    match arguments {
        Value::String(text) => text,
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    }
}

/// The message of an error body (`{"error": {"message": …}}` from OpenAI,
/// vLLM and llama.cpp, `{"error": "…"}` from Ollama), or the body itself,
/// truncated.
fn error_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|value| {
            value.get("error").and_then(error_text).or_else(|| {
                value
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
        })
        .map(|message| truncate(&message, ERROR_BODY_CHARS))
        .unwrap_or_else(|| match body.trim() {
            "" => "(empty body)".to_owned(),
            body => truncate(body, ERROR_BODY_CHARS),
        })
}

fn error_text(error: &Value) -> Option<String> {
    match error {
        Value::String(message) => Some(message.clone()),
        Value::Object(fields) => fields
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    }
}

/// The start of `text` on one line, for an error message.
fn excerpt(text: &str) -> String {
    let line: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    truncate(&line, EXCERPT_CHARS)
}

fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}
