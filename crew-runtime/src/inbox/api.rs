//! The JSON API for chat bots: bearer tokens, no cookies (and therefore
//! no CSRF token and no Origin check: nothing is sent on a bot's behalf
//! by a browser).

use std::time::SystemTime;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State as Extract};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::auth::Bot;
use super::view::{self, QuestionView};
use super::{MAX_BODY_BYTES, State};
use crate::store::{Answer, Decision};

/// `POST /api/approvals/{id}/decision`'s body.
#[derive(Debug, Deserialize)]
pub(crate) struct DecisionBody {
    decision: String,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    comment: Option<String>,
}

/// `GET /api/approvals`: `{"approvals": [...]}`, the pending questions
/// the bot's approver may answer (not their own requests), oldest first.
pub(crate) async fn pending(Extract(state): Extract<State>, Bot(approver): Bot) -> Response {
    let pending = match state.store.pending().await {
        Ok(pending) => pending,
        Err(error) => return view::store_failed_api(&error),
    };
    let now = SystemTime::now();
    let approvals: Vec<QuestionView> = pending
        .iter()
        .filter(|question| approver.may_answer(question))
        .filter(|question| {
            !question
                .requester
                .as_deref()
                .is_some_and(|requester| crate::store::same_identity(requester, &approver.name))
        })
        .map(|question| QuestionView::of(question, now))
        .collect();
    Json(serde_json::json!({ "approvals": approvals })).into_response()
}

/// `GET /api/approvals/{id}`: one question the bot's approver may
/// answer, in whatever state: its answer, and what became of the call
/// (`outcome`: ran, failed, or refused afterwards and by whom; `summary`
/// in words). A question outside the approver's scope reads as missing.
pub(crate) async fn question(
    Extract(state): Extract<State>,
    Bot(approver): Bot,
    Path(id): Path<String>,
) -> Response {
    match state.store.question(&id).await {
        Ok(Some(question)) if approver.may_answer(&question) => {
            Json(QuestionView::of(&question, SystemTime::now())).into_response()
        }
        Ok(_) => view::api_error(StatusCode::NOT_FOUND, "no question has this id"),
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
        Ok(None) => return view::api_error(StatusCode::NOT_FOUND, "no question has this id"),
        Err(error) => return view::store_failed_api(&error),
    };
    if !approver.may_answer(&question) {
        return view::api_error(
            StatusCode::FORBIDDEN,
            &view::out_of_scope(&approver, &question),
        );
    }
    let mut answer = Answer::new(approver.name.clone(), decision);
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
