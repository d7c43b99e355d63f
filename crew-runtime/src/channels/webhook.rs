//! The webhook channel: a JSON POST signed the Standard Webhooks way.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::{Channel, ChannelError, Delivered, Notice};
use crate::store::QuestionStatus;

/// Announces questions to a URL, for bots and paging tools: a JSON POST
/// signed the [Standard Webhooks](https://www.standardwebhooks.com/) way
/// (`webhook-id`, `webhook-timestamp`, `webhook-signature`), with the
/// secret given as `whsec_` and base64. The receiver answers a question
/// through the inbox's JSON API with a bearer token bound to an approver
/// account, whose scopes and requester rule apply.
///
/// The body is `{"type", "timestamp", "data"}`: `type` is
/// `approval.requested` for a new question and `approval.updated` when it
/// was answered, expired or withdrawn; `data` holds the question (id,
/// status, tool, redacted arguments, agent, task, crew, requester, prompt,
/// reason, deadline in ms since the Unix epoch), its page in the inbox
/// (`inbox`, with [`Webhook::inbox`]) and, once answered, who decided
/// (`decided_by`, `decision`) and, once the approved call ran, failed or
/// was refused, what became of it (`outcome`). A message's id is the
/// question's id and what it tells (its status, then what became of the
/// call): a retried message keeps it, so a receiver can drop repeats.
/// A 2xx answer is a delivery; a 429 or 503 with `Retry-After` is tried
/// again then; anything else is tried again with the announcer's backoff.
///
/// The secret never shows: not in `Debug`, nor in an error.
///
/// ```
/// use crew_runtime::channels::Webhook;
///
/// let pager = Webhook::new("pager", "http://pager.internal/hooks", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
/// assert!(!format!("{pager:?}").contains("MfKQ9r8"));
/// # Ok::<(), crew_runtime::channels::ChannelError>(())
/// ```
pub struct Webhook {
    name: String,
    url: reqwest::Url,
    signer: standardwebhooks::Webhook,
    client: reqwest::Client,
    /// The inbox's public origin, for each question's link.
    inbox: Option<String>,
}

impl fmt::Debug for Webhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhook")
            .field("name", &self.name)
            .field("url", &self.url.as_str())
            .finish_non_exhaustive()
    }
}

/// How long a receiver has to answer, unless told otherwise.
const TIMEOUT: Duration = Duration::from_secs(10);

impl Webhook {
    /// A webhook named `name` posting to `url` (http, or https with the
    /// feature `tls`), signed with `secret` (`whsec_` and base64, as
    /// Standard Webhooks gives them; at least 24 bytes once decoded).
    ///
    /// Errors: a malformed URL, a secret that is not base64 or too short.
    /// The error never holds the secret.
    ///
    /// ```
    /// use crew_runtime::channels::Webhook;
    /// assert!(Webhook::new("pager", "http://pager.internal/hooks", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_ok());
    /// let error = Webhook::new("pager", "http://pager.internal/hooks", "whsec_not*base64").unwrap_err();
    /// assert!(!error.to_string().contains("not*base64"));
    /// ```
    pub fn new(name: &str, url: &str, secret: &str) -> Result<Self, ChannelError> {
        let url = reqwest::Url::parse(url)
            .map_err(|error| ChannelError::new(format!("webhook {name}: bad URL: {error}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ChannelError::new(format!(
                "webhook {name}: the URL must be http or https, not {}",
                url.scheme()
            )));
        }
        let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
        let key = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded)
            .map_err(|_| {
                ChannelError::new(format!(
                    "webhook {name}: the secret is not `whsec_` followed by base64"
                ))
            })?;
        if key.len() < 24 {
            return Err(ChannelError::new(format!(
                "webhook {name}: the secret is {} bytes; at least 24 are needed",
                key.len()
            )));
        }
        let signer = standardwebhooks::Webhook::from_bytes(key)
            .map_err(|_| ChannelError::new(format!("webhook {name}: the secret is refused")))?;
        let client = super::http_client(TIMEOUT)
            .map_err(|error| ChannelError::new(format!("webhook {name}: {error}")))?;
        Ok(Webhook {
            name: name.to_owned(),
            url,
            signer,
            client,
            inbox: None,
        })
    }

    /// Links each question to its page in the inbox served at `origin`
    /// (`data.inbox`: `{origin}/questions/{id}`).
    ///
    /// ```
    /// use crew_runtime::channels::Webhook;
    /// let pager = Webhook::new("pager", "http://pager.internal/hooks", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?
    ///     .inbox("https://approvals.example.com");
    /// # let _ = pager;
    /// # Ok::<(), crew_runtime::channels::ChannelError>(())
    /// ```
    pub fn inbox(mut self, origin: &str) -> Self {
        self.inbox = Some(origin.trim_end_matches('/').to_owned());
        self
    }

    /// Gives a receiver `timeout` to answer (10 s unless set).
    ///
    /// ```
    /// use std::time::Duration;
    /// use crew_runtime::channels::Webhook;
    /// let pager = Webhook::new("pager", "http://pager.internal/hooks", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?
    ///     .timeout(Duration::from_secs(3))?;
    /// # let _ = pager;
    /// # Ok::<(), crew_runtime::channels::ChannelError>(())
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Result<Self, ChannelError> {
        self.client = super::http_client(timeout)
            .map_err(|error| ChannelError::new(format!("webhook {}: {error}", self.name)))?;
        Ok(self)
    }

    async fn post(&self, notice: &Notice) -> Result<Delivered, ChannelError> {
        let question = &notice.question;
        let kind = if notice.told.is_none() && question.status == QuestionStatus::Pending {
            "approval.requested"
        } else {
            "approval.updated"
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let timestamp = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        let at = time::OffsetDateTime::from_unix_timestamp(timestamp)
            .ok()
            .and_then(|at| {
                at.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_default();
        let body = json!({
            "type": kind,
            "timestamp": at,
            "data": data(notice, self.inbox.as_deref()),
        });
        let body = serde_json::to_vec(&body)
            .map_err(|error| ChannelError::new(format!("webhook {}: {error}", self.name)))?;
        let id = format!(
            "{}.{}",
            question.id,
            crate::store::told_state(question).replace('/', ".")
        );
        let signature = self
            .signer
            .sign(&id, timestamp, &body)
            .map_err(|_| ChannelError::new(format!("webhook {}: signing failed", self.name)))?;
        let response = self
            .client
            .post(self.url.clone())
            .header("content-type", "application/json")
            .header(standardwebhooks::HEADER_WEBHOOK_ID, &id)
            .header(
                standardwebhooks::HEADER_WEBHOOK_TIMESTAMP,
                timestamp.to_string(),
            )
            .header(standardwebhooks::HEADER_WEBHOOK_SIGNATURE, signature)
            .body(body)
            .send()
            .await
            .map_err(|error| {
                ChannelError::new(format!(
                    "webhook {}: {}",
                    self.name,
                    super::request_failed(error)
                ))
            })?;
        let status = response.status();
        if status.is_success() {
            return Ok(Delivered::default());
        }
        let mut error = ChannelError::new(format!(
            "webhook {}: the receiver answered {status}",
            self.name
        ));
        if matches!(status.as_u16(), 429 | 503)
            && let Some(wait) = super::asked_wait(response.headers())
        {
            error = error.retry_after(wait);
        }
        Err(error)
    }
}

impl Channel for Webhook {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "webhook"
    }

    fn deliver<'a>(&'a self, notice: &'a Notice) -> BoxFuture<'a, Result<Delivered, ChannelError>> {
        Box::pin(self.post(notice))
    }
}

/// The question as a webhook's `data`, linked to the inbox at `inbox`.
fn data(notice: &Notice, inbox: Option<&str>) -> Value {
    let question = &notice.question;
    let millis = |time: SystemTime| {
        time.duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis())
    };
    let mut data = json!({
        "question": question.id,
        "status": question.status.as_str(),
        "tool": question.tool,
        "arguments": question.arguments,
        "agent": question.agent,
        "task": question.task,
        "crew": question.crew,
        "requester": question.requester,
        "prompt": question.prompt,
        "reason": question.reason,
        "deadline": millis(question.deadline),
    });
    if let Value::Object(map) = &mut data {
        if let Some(answer) = &question.answer {
            map.insert("decided_by".into(), json!(answer.approver));
            map.insert("decision".into(), json!(answer.decision));
        }
        if let Some(outcome) = &question.outcome {
            map.insert(
                "outcome".into(),
                json!({
                    "outcome": outcome.outcome,
                    "source": outcome.source,
                    "detail": outcome.detail,
                }),
            );
        }
        if let Some(origin) = inbox {
            map.insert(
                "inbox".into(),
                json!(format!("{origin}/questions/{}", question.id)),
            );
        }
    }
    data
}
