//! The JSON API for chat bots: bearer tokens, no cookies (and therefore
//! no CSRF token and no Origin check: nothing is sent on a bot's behalf
//! by a browser).

use std::time::SystemTime;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State as Extract};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::auth::Bot;
use super::view::{self, QuestionView};
use super::{MAX_BODY_BYTES, State, list};
use crate::store::{Answer, Decision};

/// `POST /api/approvals/{id}/decision`'s body. Nothing else is taken: a
/// body naming a tool, say, is refused rather than read as an edit of
/// the arguments alone (an edit never changes which tool is called).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecisionBody {
    decision: String,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    comment: Option<String>,
}

/// `GET /api/approvals`'s query.
#[derive(Debug, Deserialize)]
pub(crate) struct ListQuery {
    limit: Option<String>,
    cursor: Option<String>,
}

/// `GET /api/approvals?limit=N&cursor=C`: `{"approvals": [...],
/// "next_cursor": "…" | null}`, the pending questions the bot's approver
/// may answer (not their own requests), oldest first, [`list::API_DEFAULT_LIMIT`]
/// at a time unless `limit` says (at most [`list::API_MAX_LIMIT`]); the
/// next page is asked with `cursor` set to `next_cursor`. Arguments over
/// 64 KiB are left out of the listing (`"arguments_cut": true`):
/// `GET /api/approvals/{id}` has them.
pub(crate) async fn pending(
    Extract(state): Extract<State>,
    Bot(approver): Bot,
    Query(query): Query<ListQuery>,
) -> Response {
    let limit = match query.limit.as_deref() {
        None => list::API_DEFAULT_LIMIT,
        Some(text) => match text.parse::<usize>() {
            Ok(limit) if (1..=list::API_MAX_LIMIT).contains(&limit) => limit,
            _ => {
                return view::api_error(
                    StatusCode::BAD_REQUEST,
                    &format!(
                        "limit must be a whole number from 1 to {}, not {text:?}",
                        list::API_MAX_LIMIT
                    ),
                );
            }
        },
    };
    let cursor = match query.cursor.as_deref().filter(|cursor| !cursor.is_empty()) {
        None => None,
        Some(text) => match list::Cursor::parse(text) {
            Some(cursor) => Some(cursor),
            None => {
                return view::api_error(
                    StatusCode::BAD_REQUEST,
                    "cursor is malformed: give the next_cursor of the previous page, or none for the first",
                );
            }
        },
    };
    let page =
        match list::pending_page(&state.store, &approver, cursor.as_ref(), limit, false).await {
            Ok(page) => page,
            Err(error) => return view::store_failed_api(&error),
        };
    let now = SystemTime::now();
    let approvals: Vec<QuestionView> = page
        .questions
        .iter()
        .map(|question| QuestionView::listed(question, now))
        .collect();
    Json(serde_json::json!({
        "approvals": approvals,
        "next_cursor": page.next.map(|next| next.to_string()),
    }))
    .into_response()
}

/// `GET /api/approvals/{id}`: one question, whole, in whatever state:
/// its answer, and what became of the call (`outcome`: ran, failed, or
/// refused afterwards and by whom; `summary` in words). Outside the bot's
/// scope it is missing (404).
pub(crate) async fn question(
    Extract(state): Extract<State>,
    Bot(approver): Bot,
    Path(id): Path<String>,
) -> Response {
    match state.store.question(&id).await {
        Ok(Some(question)) if approver.may_answer(&question) => {
            Json(QuestionView::of(&question, SystemTime::now())).into_response()
        }
        Ok(_) => view::api_error(StatusCode::NOT_FOUND, view::NO_SUCH_QUESTION),
        Err(error) => view::store_failed_api(&error),
    }
}

/// `POST /api/approvals/{id}/decision`: `{"decision": "approve" | "deny"
/// | "edit", "arguments": {…} (for an edit), "comment": "…"}`; answers
/// the question as recorded.
pub(crate) async fn decide(
    Extract(state): Extract<State>,
    Bot(approver): Bot,
    Path(id): Path<String>,
    body: Result<Json<DecisionBody>, JsonRejection>,
) -> Response {
    let body = match body {
        Ok(Json(body)) => body,
        Err(rejection) => {
            let status = rejection.status();
            let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
                format!("the body is larger than the {MAX_BODY_BYTES} bytes the inbox takes")
            } else {
                format!(
                    "the body must be JSON like {{\"decision\": \"approve\"}}: {}",
                    rejection.body_text()
                )
            };
            return view::api_error(status, &message);
        }
    };
    let decision = match body.decision.as_str() {
        "approve" => Decision::Approve,
        "deny" => Decision::Deny,
        "edit" => match body.arguments {
            Some(Value::Object(edit)) => Decision::ApproveWithEdit(edit),
            Some(_) => {
                return view::api_error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "\"arguments\" of an edit must be a JSON object",
                );
            }
            None => {
                return view::api_error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "an edit needs \"arguments\": the JSON object to run the call with",
                );
            }
        },
        other => {
            return view::api_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("unknown decision {other:?}: use \"approve\", \"deny\" or \"edit\""),
            );
        }
    };
    let question = match state.store.question(&id).await {
        Ok(Some(question)) => question,
        Ok(None) => return view::api_error(StatusCode::NOT_FOUND, view::NO_SUCH_QUESTION),
        Err(error) => return view::store_failed_api(&error),
    };
    // Outside the scope reads as missing: nothing of it is told.
    if !approver.may_answer(&question) {
        return view::api_error(StatusCode::NOT_FOUND, view::NO_SUCH_QUESTION);
    }
    let mut answer = Answer::new(approver.name.clone(), decision).via("api");
    if let Some(comment) = body.comment.as_deref().map(str::trim)
        && !comment.is_empty()
    {
        answer = answer.with_comment(comment);
    }
    match state.store.decide(&id, answer).await {
        Ok(question) => Json(QuestionView::of(&question, SystemTime::now())).into_response(),
        Err(error) => view::api_error(
            view::decision_status(&error),
            &view::decision_message(&error),
        ),
    }
}
