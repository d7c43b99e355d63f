//! What approvers and bots see: questions as shown, pages rendered from
//! the embedded templates, and errors that say what happened.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use minijinja::Environment;
use serde::Serialize;

use super::State;
use crate::store::{Approver, DecisionError, Question, StoreError};

/// The templates, embedded. Their names end in `.html`, which turns on
/// minijinja's HTML escaping of every value they show.
const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("templates/base.html")),
    ("login.html", include_str!("templates/login.html")),
    ("pending.html", include_str!("templates/pending.html")),
    (
        "pending_list.html",
        include_str!("templates/pending_list.html"),
    ),
    ("history.html", include_str!("templates/history.html")),
    ("question.html", include_str!("templates/question.html")),
    ("error.html", include_str!("templates/error.html")),
    #[cfg(feature = "channels")]
    ("link.html", include_str!("templates/link.html")),
];

/// The template environment. A template that does not parse is a bug of
/// this program (the tests render each): it is logged, and its pages
/// answer 500 with a message rather than bringing the inbox down.
pub(crate) fn templates() -> Environment<'static> {
    let mut environment = Environment::new();
    for &(name, source) in TEMPLATES {
        if let Err(error) = environment.add_template(name, source) {
            tracing::error!(template = name, %error, "an inbox template does not parse");
        }
    }
    environment
}

/// Renders `template` with `context`, or a plain 500 saying what failed.
pub(crate) fn render(
    state: &State,
    status: StatusCode,
    template: &str,
    context: minijinja::Value,
) -> Response {
    let rendered = state
        .templates
        .get_template(template)
        .and_then(|template| template.render(context));
    match rendered {
        Ok(html) => (status, Html(html)).into_response(),
        Err(error) => {
            tracing::error!(template, %error, "rendering an inbox page failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                format!("the inbox could not render the page {template}: {error}"),
            )
                .into_response()
        }
    }
}

/// An error page saying what happened, with the status that says it.
pub(crate) fn error_page(state: &State, base: &str, status: StatusCode, message: &str) -> Response {
    render(
        state,
        status,
        "error.html",
        minijinja::context! {
            base,
            status => status.as_u16(),
            reason => status.canonical_reason().unwrap_or("Error"),
            message,
        },
    )
}

/// The page for a store that failed: the details go to the log only.
pub(crate) fn store_failed_page(state: &State, base: &str, error: &StoreError) -> Response {
    tracing::error!(%error, "the approvals store failed");
    error_page(
        state,
        base,
        StatusCode::SERVICE_UNAVAILABLE,
        "the approvals store failed; try again in a moment (the server's log has the details)",
    )
}

/// A JSON error: `{"error": "…"}`.
pub(crate) fn api_error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

/// The JSON error for a store that failed.
pub(crate) fn store_failed_api(error: &StoreError) -> Response {
    tracing::error!(%error, "the approvals store failed");
    api_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "the approvals store failed; try again in a moment",
    )
}

/// The status of an answer the store did not take.
pub(crate) fn decision_status(error: &DecisionError) -> StatusCode {
    match error {
        DecisionError::UnknownQuestion => StatusCode::NOT_FOUND,
        DecisionError::OwnRequest(_) => StatusCode::FORBIDDEN,
        DecisionError::Closed(_) | DecisionError::Expired | DecisionError::Abandoned => {
            StatusCode::CONFLICT
        }
        DecisionError::EditTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        DecisionError::InvalidEdit(_)
        | DecisionError::EditRefused(_)
        | DecisionError::CommentTooLong(_) => StatusCode::UNPROCESSABLE_ENTITY,
        DecisionError::NoApprover => StatusCode::BAD_REQUEST,
        DecisionError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// The message of an answer the store did not take (a store failure is
/// logged, not shown).
pub(crate) fn decision_message(error: &DecisionError) -> String {
    match error {
        DecisionError::Store(store) => {
            tracing::error!(error = %store, "the approvals store failed");
            "the approvals store failed; try again in a moment".to_owned()
        }
        other => other.to_string(),
    }
}

/// What a question that does not exist, and one outside the approver's
/// scope, are answered with: the same words (and status, 404), so that a
/// refusal tells nothing of questions the approver may not see.
pub(crate) const NO_SUCH_QUESTION: &str = "no question has this id";

/// How much of a question's arguments (pretty JSON) a card of the list
/// and a row of the history show: 4 KiB, the whole on its own page.
pub(crate) const SHOWN_ARGUMENT_BYTES: usize = 4 * 1024;

/// The largest arguments (compact JSON) a listing of the API includes:
/// 64 KiB. Larger ones are left out (`"arguments": null`,
/// `"arguments_cut": true`); `GET /api/approvals/{id}` has the whole.
pub(crate) const API_LISTED_ARGUMENT_BYTES: usize = 64 * 1024;

/// `text` cut to at most `limit` bytes at a character boundary, and
/// whether it was cut.
pub(crate) fn cut(mut text: String, limit: usize) -> (String, bool) {
    if text.len() <= limit {
        return (text, false);
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    (text, true)
}

/// A size in words: "812 bytes", "4.0 KiB", "8.0 MiB".
pub(crate) fn size_words(bytes: usize) -> String {
    // Precision does not matter here: a size shown to a person.
    #[allow(clippy::cast_precision_loss)]
    let size = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else if bytes < 1024 * 1024 {
        format!("{:.1} KiB", size / 1024.0)
    } else {
        format!("{:.1} MiB", size / (1024.0 * 1024.0))
    }
}

/// Why `question` is asked, as a web page or a chat shows it beside the
/// call: the reason the asking hook gave, or else its prompt without the
/// terminal's wording (backticks, "(yes/no)", a last line saying how to
/// answer).
pub(crate) fn reason_of(question: &Question) -> String {
    if let Some(reason) = question.reason.as_deref().map(str::trim)
        && !reason.is_empty()
    {
        return reason.to_owned();
    }
    let mut lines: Vec<String> = question
        .prompt
        .lines()
        .map(|line| {
            line.replace('`', "")
                .replace("(yes/no)", "")
                .trim_end()
                .to_owned()
        })
        .collect();
    // How to answer at a terminal ("yes/no", "Type APPROVE …") was appended
    // as the last line when it was given.
    while lines
        .last()
        .is_some_and(|line| line.trim().is_empty() || line.trim().eq_ignore_ascii_case("yes/no"))
    {
        lines.pop();
    }
    let cleaned = lines.join("\n").trim().to_owned();
    if cleaned.is_empty() {
        "a person must approve this call".to_owned()
    } else {
        cleaned
    }
}

/// A question as the inbox shows it (and as the API returns it).
#[derive(Debug, Serialize)]
pub(crate) struct QuestionView {
    pub(crate) id: String,
    pub(crate) tool: String,
    pub(crate) arguments: serde_json::Value,
    /// Whether `arguments` were left out of a listing for their size.
    pub(crate) arguments_cut: bool,
    pub(crate) capabilities: Vec<&'static str>,
    pub(crate) agent: Option<String>,
    pub(crate) task: Option<String>,
    pub(crate) crew: Option<String>,
    pub(crate) requester: Option<String>,
    /// Why it is asked, in plain words: the asking hook's reason, or its
    /// prompt without the terminal's wording.
    pub(crate) reason: String,
    pub(crate) created_at: String,
    pub(crate) deadline: String,
    pub(crate) seconds_left: u64,
    pub(crate) status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) answer: Option<AnswerView>,
    /// When it was closed without an answer taken (expired, abandoned,
    /// withdrawn).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) closed_at: Option<String>,
    /// Whether the process that asked took the answer: an approval not
    /// taken yet has run nothing.
    pub(crate) taken: bool,
    /// What the call did after the answer, once its process said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) outcome: Option<OutcomeView>,
    /// Where it stands, in words: "approved, then refused by budget: …".
    pub(crate) summary: String,
}

/// What an answered call did afterwards.
#[derive(Debug, Serialize)]
pub(crate) struct OutcomeView {
    /// `ran`, `failed`, `refused` or `in_doubt`.
    pub(crate) outcome: String,
    /// Who refused it.
    pub(crate) source: Option<String>,
    /// Why, the tool's error, or why it is in doubt.
    pub(crate) detail: Option<String>,
    pub(crate) at: String,
    /// The process that held the call, when it named itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) by: Option<String>,
}

/// An answer as shown.
#[derive(Debug, Serialize)]
pub(crate) struct AnswerView {
    pub(crate) approver: String,
    pub(crate) decision: String,
    pub(crate) edited_arguments: Option<serde_json::Value>,
    pub(crate) comment: Option<String>,
    pub(crate) answered_at: String,
}

impl QuestionView {
    pub(crate) fn of(question: &Question, now: SystemTime) -> Self {
        QuestionView {
            id: question.id.clone(),
            tool: question.tool.clone(),
            arguments: question.arguments.clone(),
            arguments_cut: false,
            capabilities: question.capabilities.iter().map(|c| c.name()).collect(),
            agent: question.agent.clone(),
            task: question.task.clone(),
            crew: question.crew.clone(),
            requester: question.requester.clone(),
            reason: reason_of(question),
            created_at: rfc3339(question.created_at),
            deadline: rfc3339(question.deadline),
            seconds_left: question.time_left(now).as_secs(),
            status: question.status.as_str(),
            answer: question.answer.as_ref().map(|answer| AnswerView {
                approver: answer.approver.clone(),
                decision: answer.decision.clone(),
                edited_arguments: answer.edited_arguments.clone(),
                comment: answer.comment.clone(),
                answered_at: rfc3339(answer.answered_at),
            }),
            closed_at: question.closed_at.map(rfc3339),
            taken: question.taken_at.is_some(),
            outcome: question.outcome.as_ref().map(|outcome| OutcomeView {
                outcome: outcome.outcome.clone(),
                source: outcome.source.clone(),
                detail: outcome.detail.clone(),
                at: rfc3339(outcome.at),
                by: outcome.by.clone(),
            }),
            summary: summary(question),
        }
    }
}

/// Where a question stands, in words: what was decided and what became
/// of the call.
pub(crate) fn summary(question: &Question) -> String {
    use crate::store::QuestionStatus;
    let when = |time: Option<SystemTime>| time.map(rfc3339).unwrap_or_default();
    match question.status {
        QuestionStatus::Pending => "waiting for an answer".to_owned(),
        QuestionStatus::Approved => match &question.outcome {
            Some(outcome) => {
                let on = outcome
                    .by
                    .as_deref()
                    .map(|by| format!(" on {by}"))
                    .unwrap_or_default();
                match (outcome.outcome.as_str(), &outcome.source, &outcome.detail) {
                    ("ran", _, _) => format!("approved; the call ran{on}"),
                    ("failed", _, Some(error)) => {
                        format!("approved; the call failed{on}: {error}")
                    }
                    ("refused", Some(source), Some(reason)) => {
                        format!("approved, then refused by {source}{on}: {reason}")
                    }
                    ("in_doubt", _, Some(why)) => {
                        format!("approved; the call was left in doubt{on}: {why}")
                    }
                    (other, _, _) => format!("approved; the call {other}{on}"),
                }
            }
            None if question.taken_at.is_none() => {
                "approved; its process has not taken the answer yet".to_owned()
            }
            None => "approved; the call is running".to_owned(),
        },
        QuestionStatus::Denied => "denied".to_owned(),
        QuestionStatus::Expired => format!("expired at {}", when(question.closed_at)),
        QuestionStatus::Abandoned if question.answer.is_some() => format!(
            "abandoned at {} (its process was gone before it took the answer: nothing ran)",
            when(question.closed_at)
        ),
        QuestionStatus::Abandoned => format!(
            "abandoned at {} (its process was gone)",
            when(question.closed_at)
        ),
        QuestionStatus::Withdrawn => format!(
            "withdrawn at {} (its call stopped waiting)",
            when(question.closed_at)
        ),
    }
}

impl QuestionView {
    /// The question as a listing of the API shows it: arguments larger
    /// than [`API_LISTED_ARGUMENT_BYTES`] left out.
    pub(crate) fn listed(question: &Question, now: SystemTime) -> Self {
        let mut view = QuestionView::of(question, now);
        if view.arguments.to_string().len() > API_LISTED_ARGUMENT_BYTES {
            view.arguments = serde_json::Value::Null;
            view.arguments_cut = true;
        }
        view
    }
}

/// A question as a row of the pages: what the API has, and what the
/// template needs besides (pretty JSON, the time left in words, whether
/// the approver may press the buttons).
#[derive(Debug, Serialize)]
pub(crate) struct Row {
    #[serde(flatten)]
    pub(crate) question: QuestionView,
    /// The arguments as pretty JSON: the first
    /// [`SHOWN_ARGUMENT_BYTES`] on a card, the whole on its own page.
    pub(crate) arguments_pretty: String,
    /// Whether `arguments_pretty` is cut.
    pub(crate) arguments_cut: bool,
    /// The whole arguments' size, in words.
    pub(crate) arguments_size: String,
    pub(crate) edited_pretty: Option<String>,
    pub(crate) edited_cut: bool,
    pub(crate) deadline_ms: i64,
    pub(crate) time_left: String,
    /// Why the approver cannot answer it, when they cannot.
    pub(crate) cannot_answer: Option<String>,
}

impl Row {
    /// A card of the list or a row of the history: its arguments cut to
    /// [`SHOWN_ARGUMENT_BYTES`].
    pub(crate) fn of(question: &Question, approver: &Approver, now: SystemTime) -> Self {
        Row::shown(question, approver, now, SHOWN_ARGUMENT_BYTES)
    }

    /// The question's own page: the whole arguments.
    pub(crate) fn whole(question: &Question, approver: &Approver, now: SystemTime) -> Self {
        Row::shown(question, approver, now, usize::MAX)
    }

    fn shown(question: &Question, approver: &Approver, now: SystemTime, limit: usize) -> Self {
        let cannot_answer = question
            .requester
            .as_deref()
            .filter(|requester| crate::store::same_identity(requester, &approver.name))
            .map(|_| {
                "You asked for this call yourself: another approver must answer it.".to_owned()
            });
        let mut view = QuestionView::of(question, now);
        // The template shows the pretty text, cut: the values themselves
        // need not go into its context.
        view.arguments = serde_json::Value::Null;
        if let Some(answer) = view.answer.as_mut() {
            answer.edited_arguments = None;
        }
        let pretty = |value: &serde_json::Value| {
            serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
        };
        let whole = pretty(&question.arguments);
        let arguments_size = size_words(whole.len());
        let (arguments_pretty, arguments_cut) = cut(whole, limit);
        let (edited_pretty, edited_cut) = match question
            .answer
            .as_ref()
            .and_then(|answer| answer.edited_arguments.as_ref())
        {
            Some(edit) => {
                let (text, was_cut) = cut(pretty(edit), limit);
                (Some(text), was_cut)
            }
            None => (None, false),
        };
        Row {
            arguments_pretty,
            arguments_cut,
            arguments_size,
            edited_pretty,
            edited_cut,
            deadline_ms: crate::store::millis(question.deadline),
            time_left: time_left_words(question.time_left(now)),
            cannot_answer,
            question: view,
        }
    }
}

/// "4 min 05 s", "1 h 02 min", "expired".
pub(crate) fn time_left_words(left: Duration) -> String {
    let seconds = left.as_secs();
    if seconds == 0 {
        return "expired".to_owned();
    }
    let (hours, minutes, seconds) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    if hours > 0 {
        format!("{hours} h {minutes:02} min")
    } else if minutes > 0 {
        format!("{minutes} min {seconds:02} s")
    } else {
        format!("{seconds} s")
    }
}

/// A time as RFC 3339 in UTC, to the second: `2025-01-31T09:05:00Z`
/// (as the inbox and `crew-inbox` show times).
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// let time = UNIX_EPOCH + Duration::from_secs(951_782_400);
/// assert_eq!(crew_runtime::inbox::rfc3339(time), "2000-02-29T00:00:00Z");
/// ```
pub fn rfc3339(time: SystemTime) -> String {
    let seconds = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let days = i64::try_from(seconds / 86_400).unwrap_or(0);
    let of_day = seconds % 86_400;
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60
    )
}

/// A static asset with its type, cached briefly.
pub(crate) fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("max-age=300"),
            ),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_735_689_599)),
            "2024-12-31T23:59:59Z"
        );
    }

    #[test]
    fn time_left_reads_in_words() {
        assert_eq!(time_left_words(Duration::ZERO), "expired");
        assert_eq!(time_left_words(Duration::from_secs(42)), "42 s");
        assert_eq!(time_left_words(Duration::from_secs(299)), "4 min 59 s");
        assert_eq!(time_left_words(Duration::from_secs(3720)), "1 h 02 min");
    }

    #[test]
    fn a_prompt_without_a_reason_loses_the_terminal_wording() {
        let mut question = crate::store::Question::for_tests("refund");
        question.prompt =
            "Refunds above 100 need a person\nAllow `refund` for Support? (yes/no)\nyes/no".into();
        assert_eq!(
            reason_of(&question),
            "Refunds above 100 need a person\nAllow refund for Support?"
        );
        question.reason = Some("Refunds above 100 need a person".into());
        assert_eq!(reason_of(&question), "Refunds above 100 need a person");
    }

    #[test]
    fn an_approved_calls_summary_names_the_process_that_held_it_and_a_call_in_doubt() {
        use crate::store::{CallOutcome, QuestionStatus};
        let mut question = crate::store::Question::for_tests("refund");
        question.status = QuestionStatus::Approved;
        let outcome = |outcome: &str, detail: Option<&str>, by: Option<&str>| {
            let mut kept = CallOutcome::for_tests(outcome);
            kept.detail = detail.map(str::to_owned);
            kept.by = by.map(str::to_owned);
            Some(kept)
        };
        question.outcome = outcome("ran", None, Some("replica-b"));
        assert_eq!(summary(&question), "approved; the call ran on replica-b");
        question.outcome = outcome("ran", None, None);
        assert_eq!(summary(&question), "approved; the call ran");
        question.outcome = outcome("in_doubt", Some("nobody said"), Some("replica-b"));
        assert_eq!(
            summary(&question),
            "approved; the call was left in doubt on replica-b: nobody said"
        );
    }

    #[test]
    fn every_template_parses() {
        let environment = templates();
        for &(name, _) in TEMPLATES {
            assert!(environment.get_template(name).is_ok(), "{name}");
        }
    }
}
