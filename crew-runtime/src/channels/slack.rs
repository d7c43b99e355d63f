//! The Slack channel: a direct message to each linked approver whose
//! scope covers the question, with Approve and Deny buttons; updated once
//! the question is answered, expires or is withdrawn.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::{Channel, ChannelError, Delivered, Notice, cut};
use crate::store::{Question, QuestionStatus, Store};

/// The most of an answer of Slack's Web API read.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;
/// Slack's limit on a section's text.
const SECTION_TEXT: usize = 3_000;
/// Slack's limit on a header's text.
const HEADER_TEXT: usize = 150;
/// How long one delivery posts before it records what it sent and leaves
/// the rest to the next (the announcer gives a delivery 30 s).
const ATTEMPT_BUDGET: Duration = Duration::from_secs(15);
/// What a button's `value` holds: the question's id and revision.
const VALUE_SEPARATOR: char = ':';

/// Announces questions in Slack through its Web API with a bot token
/// (`chat:write`): a direct message to each approver linked to a Slack
/// user of the workspace (`crew-inbox link-slack`) whose scope covers the
/// question and who did not ask it, or one message in a shared channel
/// where configured ([`Slack::shared_channel`]). The message (Block Kit,
/// within Slack's limits, every text from the run escaped) shows the
/// tool, agent, task, redacted arguments (cut to fit, with the inbox
/// link), reason and time left, with Approve and Deny buttons carrying
/// the question's id and [revision](crate::store::Question::revision);
/// a click reaches the inbox's Slack endpoint, which checks Slack's
/// signature and decides as the clicking user's approver. Once the
/// question is answered, expires or is withdrawn, each message is updated
/// (`chat.update`) to say so, without buttons.
///
/// Slack's 429 is tried again after its `Retry-After`. The token never
/// shows: not in `Debug`, nor in an error.
///
/// ```
/// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::channels::ChannelError> {
/// use crew_runtime::channels::Slack;
/// let slack = Slack::new(store, "ops-slack", "T024BE7LD", "xoxb-1234-5678-abcdef")?
///     .inbox("https://approvals.example.com");
/// assert!(!format!("{slack:?}").contains("xoxb"));
/// # Ok(())
/// # }
/// ```
pub struct Slack {
    name: String,
    team: String,
    token: String,
    api: reqwest::Url,
    client: reqwest::Client,
    store: Store,
    inbox: Option<String>,
    shared: Option<String>,
}

impl fmt::Debug for Slack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slack")
            .field("name", &self.name)
            .field("team", &self.team)
            .field("api", &self.api.as_str())
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

impl Slack {
    /// A Slack channel named `name` for workspace `team` (its id, `T…`),
    /// posting with the bot token `token` (`xoxb-…`), finding its
    /// recipients in `store`.
    ///
    /// Errors: a token that is not a bot token, a team id that is not
    /// Slack's. The error never holds the token.
    ///
    /// ```
    /// # async fn run(store: crew_runtime::store::Store) {
    /// use crew_runtime::channels::Slack;
    /// assert!(Slack::new(store.clone(), "ops", "T024BE7LD", "xoxb-1-2-abc").is_ok());
    /// let error = Slack::new(store, "ops", "T024BE7LD", "xoxp-user-token").unwrap_err();
    /// assert!(!error.to_string().contains("user-token"));
    /// # }
    /// ```
    pub fn new(store: Store, name: &str, team: &str, token: &str) -> Result<Self, ChannelError> {
        if !token.starts_with("xoxb-") || token.len() < 10 || token.contains(char::is_whitespace) {
            return Err(ChannelError::new(format!(
                "slack {name}: the token is not a bot token (xoxb-…)"
            )));
        }
        if team.is_empty() || !team.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(ChannelError::new(format!(
                "slack {name}: {team:?} is not a workspace id (like T024BE7LD)"
            )));
        }
        let api = reqwest::Url::parse("https://slack.com/api/")
            .map_err(|error| ChannelError::new(format!("slack {name}: {error}")))?;
        let client = super::http_client(Duration::from_secs(10))
            .map_err(|error| ChannelError::new(format!("slack {name}: {error}")))?;
        Ok(Slack {
            name: name.to_owned(),
            team: team.to_owned(),
            token: token.to_owned(),
            api,
            client,
            store,
            inbox: None,
            shared: None,
        })
    }

    /// Calls Slack's Web API at `base` instead of `https://slack.com/api/`
    /// (a proxy, or a stand-in in tests).
    ///
    /// ```
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::channels::ChannelError> {
    /// use crew_runtime::channels::Slack;
    /// let slack = Slack::new(store, "ops", "T024BE7LD", "xoxb-1-2-abc")?.api_base("http://127.0.0.1:9000/api/")?;
    /// # let _ = slack;
    /// # Ok(())
    /// # }
    /// ```
    pub fn api_base(mut self, base: &str) -> Result<Self, ChannelError> {
        let mut base = base.to_owned();
        if !base.ends_with('/') {
            base.push('/');
        }
        self.api = reqwest::Url::parse(&base).map_err(|error| {
            ChannelError::new(format!("slack {}: bad API URL: {error}", self.name))
        })?;
        Ok(self)
    }

    /// Links each message to the question's page in the inbox served at
    /// `origin`.
    ///
    /// ```
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::channels::ChannelError> {
    /// use crew_runtime::channels::Slack;
    /// let slack = Slack::new(store, "ops", "T024BE7LD", "xoxb-1-2-abc")?.inbox("https://approvals.example.com");
    /// # let _ = slack;
    /// # Ok(())
    /// # }
    /// ```
    pub fn inbox(mut self, origin: &str) -> Self {
        self.inbox = Some(origin.trim_end_matches('/').to_owned());
        self
    }

    /// Posts each question once in channel `channel` (its id) instead of
    /// to each approver: anyone there may click, and only a linked
    /// approver's click decides.
    ///
    /// ```
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::channels::ChannelError> {
    /// use crew_runtime::channels::Slack;
    /// let slack = Slack::new(store, "ops", "T024BE7LD", "xoxb-1-2-abc")?.shared_channel("C024BE91L");
    /// # let _ = slack;
    /// # Ok(())
    /// # }
    /// ```
    pub fn shared_channel(mut self, channel: &str) -> Self {
        self.shared = Some(channel.to_owned());
        self
    }

    /// Calls Web API method `method` with `body`: its answer when Slack
    /// says `ok`.
    async fn call(&self, method: &str, body: &Value) -> Result<Value, ChannelError> {
        let url = self
            .api
            .join(method)
            .map_err(|error| ChannelError::new(format!("slack {}: {error}", self.name)))?;
        let response = self
            .client
            .post(url)
            .bearer_auth(&self.token)
            .header("content-type", "application/json; charset=utf-8")
            .body(body.to_string())
            .send()
            .await
            .map_err(|error| {
                ChannelError::new(format!(
                    "slack {}: {method}: {}",
                    self.name,
                    super::request_failed(error)
                ))
            })?;
        let status = response.status();
        if status.as_u16() == 429 {
            let wait = super::asked_wait(response.headers()).unwrap_or(Duration::from_secs(30));
            return Err(ChannelError::new(format!(
                "slack {}: {method}: rate limited (429)",
                self.name
            ))
            .retry_after(wait));
        }
        if !status.is_success() {
            return Err(ChannelError::new(format!(
                "slack {}: {method}: Slack answered {status}",
                self.name
            )));
        }
        // An answer is a few hundred bytes: one past a mebibyte is not
        // Slack's, and is not read whole.
        let bytes = match crate::http_client::read_at_most(response, MAX_ANSWER_BYTES).await {
            Ok(crate::http_client::Body::Whole(bytes)) => bytes,
            Ok(crate::http_client::Body::Cut(_)) => {
                return Err(ChannelError::new(format!(
                    "slack {}: {method}: an answer larger than {MAX_ANSWER_BYTES} bytes",
                    self.name
                )));
            }
            Err(error) => {
                return Err(ChannelError::new(format!(
                    "slack {}: {method}: {}",
                    self.name,
                    super::request_failed(error)
                )));
            }
        };
        let answer: Value = serde_json::from_slice(&bytes).map_err(|error| {
            ChannelError::new(format!(
                "slack {}: {method}: not Slack's JSON: {error}",
                self.name
            ))
        })?;
        if answer["ok"] != json!(true) {
            let why = answer["error"].as_str().unwrap_or("no reason given");
            return Err(ChannelError::new(format!(
                "slack {}: {method}: {}",
                self.name,
                cut(why, 200)
            )));
        }
        Ok(answer)
    }

    /// Where the question goes: the shared channel, or each recipient's
    /// direct message (by the user's id).
    async fn destinations(&self, question: &Question) -> Result<Vec<String>, ChannelError> {
        if let Some(channel) = &self.shared {
            return Ok(vec![channel.clone()]);
        }
        let recipients = self
            .store
            .slack_recipients(question)
            .await
            .map_err(|error| ChannelError::new(format!("slack {}: {error}", self.name)))?;
        Ok(recipients
            .into_iter()
            .filter(|(identity, _)| identity.team == self.team)
            .map(|(identity, _)| identity.user)
            .collect())
    }

    async fn tell(&self, notice: &Notice) -> Result<Delivered, ChannelError> {
        let question = &notice.question;
        // Where each destination's message is: destination → "channel ts".
        let mut posted: BTreeMap<String, String> = notice
            .reference
            .as_deref()
            .and_then(|reference| serde_json::from_str(reference).ok())
            .unwrap_or_default();
        let record =
            |posted: &BTreeMap<String, String>| serde_json::to_string(posted).unwrap_or_default();
        if question.status == QuestionStatus::Pending {
            let message = blocks(question, self.inbox.as_deref(), SystemTime::now());
            // Within the announcer's time for one delivery: what is left
            // goes in the next, after what was sent is recorded.
            let stop_at = std::time::Instant::now() + ATTEMPT_BUDGET;
            for destination in self.destinations(question).await? {
                if posted.contains_key(&destination) {
                    continue;
                }
                if std::time::Instant::now() >= stop_at {
                    return Err(ChannelError::new(format!(
                        "slack {}: more recipients than one attempt sends; the rest next",
                        self.name
                    ))
                    .retry_after(Duration::ZERO)
                    .progress(record(&posted)));
                }
                let body = json!({
                    "channel": destination,
                    "text": fallback(question),
                    "blocks": message,
                    "unfurl_links": false,
                    "unfurl_media": false,
                });
                match self.call("chat.postMessage", &body).await {
                    Ok(answer) => {
                        let place = format!(
                            "{} {}",
                            answer["channel"].as_str().unwrap_or(&destination),
                            answer["ts"].as_str().unwrap_or_default()
                        );
                        posted.insert(destination, place);
                    }
                    Err(error) => return Err(error.progress(record(&posted))),
                }
            }
            return Ok(Delivered::default().with_reference(record(&posted)));
        }
        let closed = closed_blocks(question, self.inbox.as_deref());
        for place in posted.values() {
            let Some((channel, ts)) = place.split_once(' ') else {
                continue;
            };
            let body = json!({
                "channel": channel,
                "ts": ts,
                "text": fallback(question),
                "blocks": closed,
            });
            self.call("chat.update", &body).await?;
        }
        Ok(Delivered::default())
    }
}

impl Channel for Slack {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "slack"
    }

    fn deliver<'a>(&'a self, notice: &'a Notice) -> BoxFuture<'a, Result<Delivered, ChannelError>> {
        Box::pin(self.tell(notice))
    }
}

/// A button's value: the question's id and revision.
pub(crate) fn button_value(question: &Question) -> String {
    format!("{}{VALUE_SEPARATOR}{}", question.id, question.revision())
}

/// The question's id and revision a button's value carries.
pub(crate) fn parse_button_value(value: &str) -> Option<(&str, &str)> {
    let (id, revision) = value.rsplit_once(VALUE_SEPARATOR)?;
    (!id.is_empty() && !revision.is_empty()).then_some((id, revision))
}

/// Text from the run, made inert for Slack's mrkdwn: no mention, link or
/// formatting it could smuggle in (`&`, `<`, `>` escaped as Slack says;
/// backticks and markers shown as they are).
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The notification's plain text (what Slack shows where blocks are not).
fn fallback(question: &Question) -> String {
    cut(
        &format!("Approval asked: {} ({})", question.tool, question.status),
        HEADER_TEXT,
    )
}

/// The message of a pending question.
fn blocks(question: &Question, inbox: Option<&str>, now: SystemTime) -> Value {
    let link = inbox.map(|origin| format!("{origin}/questions/{}", question.id));
    let mut facts = format!("*Tool* `{}`", escape(&question.tool));
    for (label, value) in [
        ("Agent", &question.agent),
        ("Task", &question.task),
        ("Crew", &question.crew),
        ("Asked by", &question.requester),
        ("Reason", &question.reason),
    ] {
        if let Some(value) = value {
            facts.push_str(&format!("\n*{label}* {}", escape(value)));
        }
    }
    let left = question.time_left(now).as_secs();
    facts.push_str(&format!("\n*Time left* {} min", left.div_ceil(60)));
    let arguments = serde_json::to_string_pretty(&question.arguments).unwrap_or_default();
    let arguments = escape(&arguments).replace("```", "'''");
    // Room for the fences and, when cut, the pointer to the inbox.
    let room = SECTION_TEXT - 200;
    let shown = if arguments.chars().count() > room {
        let more = match &link {
            Some(link) => format!("\n(cut: the whole call is in <{link}|the inbox>)"),
            None => "\n(cut: the whole call is in the inbox)".to_owned(),
        };
        format!("```{}```{more}", cut(&arguments, room))
    } else {
        format!("```{arguments}```")
    };
    let mut buttons = vec![
        json!({
            "type": "button",
            "action_id": "approve",
            "style": "primary",
            "text": {"type": "plain_text", "text": "Approve"},
            "value": button_value(question),
        }),
        json!({
            "type": "button",
            "action_id": "deny",
            "style": "danger",
            "text": {"type": "plain_text", "text": "Deny"},
            "value": button_value(question),
        }),
    ];
    if let Some(link) = &link {
        buttons.push(json!({
            "type": "button",
            "action_id": "open",
            "text": {"type": "plain_text", "text": "Open in the inbox"},
            "url": link,
        }));
    }
    json!([
        {"type": "header", "text": {"type": "plain_text", "text": cut(question.prompt.lines().next().unwrap_or("Approve this call?"), HEADER_TEXT)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": cut(&facts, SECTION_TEXT)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": shown}},
        {"type": "actions", "block_id": "crew-approval", "elements": buttons},
    ])
}

/// The message of a question no longer pending: what became of it, no
/// buttons.
fn closed_blocks(question: &Question, inbox: Option<&str>) -> Value {
    let what = match (&question.status, &question.answer) {
        (QuestionStatus::Approved, Some(answer)) => {
            format!("Approved by {}", escape(&answer.approver))
        }
        (QuestionStatus::Denied, Some(answer)) => {
            format!("Denied by {}", escape(&answer.approver))
        }
        (QuestionStatus::Expired, _) => "Expired unanswered: the call was denied".to_owned(),
        (QuestionStatus::Withdrawn, _) => "Withdrawn: nobody waits for it now".to_owned(),
        (QuestionStatus::Abandoned, _) => "Abandoned: its process is gone".to_owned(),
        (status, _) => format!("{status}"),
    };
    let mut text = format!("*{what}*\n*Tool* `{}`", escape(&question.tool));
    if let Some(outcome) = &question.outcome {
        let detail = outcome
            .detail
            .as_deref()
            .map(|detail| format!(": {}", escape(&cut(detail, 500))))
            .unwrap_or_default();
        let became = match outcome.outcome.as_str() {
            "ran" => "The call ran.".to_owned(),
            "failed" => format!("The call failed{detail}"),
            "refused" => format!(
                "The call was refused afterwards by {}{detail}",
                escape(outcome.source.as_deref().unwrap_or("a guard"))
            ),
            "in_doubt" => format!("The call is in doubt{detail}"),
            other => escape(other),
        };
        text.push_str(&format!("\n{became}"));
    }
    if let Some(origin) = inbox {
        text.push_str(&format!(
            "\n<{origin}/questions/{}|See it in the inbox>",
            question.id
        ));
    }
    json!([
        {"type": "section", "text": {"type": "mrkdwn", "text": cut(&text, SECTION_TEXT)}},
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_the_run_cannot_mention_link_or_break_out_of_its_block() {
        let mut question = Question::for_tests("refund");
        question.reason = Some("<!channel> see <https://evil.example|here> & more".into());
        question.arguments = json!({"note": "```<@U123>```", "long": "x".repeat(10_000)});
        question.prompt = "p".repeat(500);
        let blocks = blocks(
            &question,
            Some("https://approvals.example.com"),
            SystemTime::UNIX_EPOCH,
        );
        let text = blocks.to_string();
        assert!(!text.contains("<!channel>"), "{text}");
        assert!(!text.contains("<https://evil"), "{text}");
        assert!(!text.contains("<@U123>"), "{text}");
        assert!(text.contains("&lt;!channel&gt;"), "{text}");
        for block in blocks.as_array().expect("blocks") {
            if let Some(text) = block["text"]["text"].as_str() {
                let limit = if block["type"] == "header" {
                    HEADER_TEXT
                } else {
                    SECTION_TEXT
                };
                assert!(
                    text.chars().count() <= limit,
                    "{} chars",
                    text.chars().count()
                );
            }
        }
        let arguments = blocks[2]["text"]["text"].as_str().expect("the arguments");
        assert_eq!(arguments.matches("```").count(), 2, "{arguments}");
        assert!(arguments.contains(
            "the whole call is in <https://approvals.example.com/questions/q|the inbox>"
        ));
    }

    #[test]
    fn a_buttons_value_names_the_question_and_its_revision() {
        let question = Question::for_tests("refund");
        let value = button_value(&question);
        assert_eq!(
            parse_button_value(&value),
            Some(("q", question.revision().as_str()))
        );
        assert_eq!(parse_button_value("no-separator"), None);
        assert_eq!(parse_button_value(":abc"), None);
    }
}
