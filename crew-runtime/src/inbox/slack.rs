//! Slack's interactivity endpoint (SPEC §14): the one route not behind a
//! sign-in. Slack's signature authenticates the request instead; the
//! clicking user's linked approver decides, with their status, scopes and
//! requester rule.

use std::fmt;

use axum::body::Bytes;
use axum::extract::State as Extract;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use super::State;
use crate::channels::parse_button_value;
use crate::store::{Answer, Decision, DecisionError, SlackIdentity, StoreError};

/// How far a request's timestamp may be from the store's clock: Slack's
/// five minutes.
const WINDOW_SECS: i64 = 5 * 60;

/// How long Slack has to take a message to its `response_url`.
const RESPONSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where Slack's response URLs are: the only place a click's
/// `response_url` is called.
pub(crate) const SLACK_RESPONSES: &str = "https://hooks.slack.com/";

/// How long accepted signatures are kept against replays: longer than the
/// window, so that no signature still within it is forgotten.
const REPLAY_MEMORY_MS: i64 = 2 * WINDOW_SECS * 1_000;

/// Slack's signing secret, which only this endpoint reads; it never shows.
#[derive(Clone)]
pub(crate) struct SigningSecret(Vec<u8>);

impl SigningSecret {
    pub(crate) fn new(secret: &str) -> Self {
        SigningSecret(secret.trim().as_bytes().to_vec())
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningSecret(***)")
    }
}

/// The answer to an authenticated request, with what the clicking user
/// is told (also sent to them through the click's `response_url`); every
/// refusal is a 200 with `"decided": false`, so that Slack does not retry
/// it, but those of an unauthenticated request: 401, told nothing of why.
fn told(decided: bool, text: &str) -> Response {
    (
        StatusCode::OK,
        axum::Json(json!({
            "response_type": "ephemeral",
            "replace_original": false,
            "decided": decided,
            "text": text,
        })),
    )
        .into_response()
}

fn unauthenticated(why: &str) -> Response {
    tracing::warn!(target: "crew_runtime::inbox", why, "a request to the Slack endpoint was refused");
    (StatusCode::UNAUTHORIZED, "not a request from Slack").into_response()
}

/// Whether `headers` carry Slack's signature of `body` with `secret`,
/// timestamped within the window of `now` (seconds since the Unix epoch):
/// the signature (hex) when they do, why not otherwise.
fn verify(
    secret: &SigningSecret,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<String, &'static str> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let timestamp = header("x-slack-request-timestamp").ok_or("no timestamp")?;
    let at: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| "a malformed timestamp")?;
    if (now - at).abs() > WINDOW_SECS {
        return Err("a stale timestamp");
    }
    let signature = header("x-slack-signature").ok_or("no signature")?;
    let hex_part = signature
        .strip_prefix("v0=")
        .ok_or("a signature of another version")?;
    let claimed = hex::decode(hex_part).map_err(|_| "a malformed signature")?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&secret.0).map_err(|_| "no secret")?;
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    // Constant time.
    mac.verify_slice(&claimed)
        .map_err(|_| "a wrong signature")?;
    Ok(hex_part.to_ascii_lowercase())
}

/// `POST /slack/interactions`: a click on a question's Approve or Deny
/// button, as Slack sends it (a form with a JSON `payload`).
pub(crate) async fn interaction(
    Extract(state): Extract<State>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(secret) = &state.slack_secret else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let now = state.store.now_secs();
    let signature = match verify(secret, &headers, &body, now) {
        Ok(signature) => signature,
        Err(why) => return unauthenticated(why),
    };
    match state
        .store
        .first_slack_request(&signature, REPLAY_MEMORY_MS)
        .await
    {
        Ok(true) => {}
        Ok(false) => return unauthenticated("a replayed request"),
        Err(error) => return super::view::store_failed_api(&error),
    }
    let payload = form_urlencoded::parse(&body)
        .find(|(name, _)| name == "payload")
        .and_then(|(_, payload)| serde_json::from_str::<Value>(&payload).ok());
    let Some(payload) = payload else {
        return told(false, "This request carries no interaction.");
    };
    match click(&state, &payload).await {
        Ok((decided, text)) => {
            tell_by_response_url(&state.slack_responses, &payload, &text);
            told(decided, &text)
        }
        Err(error) => super::view::store_failed_api(&error),
    }
}

/// Decides what an authenticated click asks, if its user may: whether it
/// decided, and what to tell them.
async fn click(state: &State, payload: &Value) -> Result<(bool, String), StoreError> {
    let refusal = |text: &str| Ok((false, text.to_owned()));
    let team = payload["team"]["id"]
        .as_str()
        .or_else(|| payload["user"]["team_id"].as_str());
    let (Some(team), Some(user)) = (team, payload["user"]["id"].as_str()) else {
        return refusal("This request names no Slack user.");
    };
    let identity = SlackIdentity::new(team, user);
    let action = &payload["actions"][0];
    let decision = match action["action_id"].as_str() {
        Some("approve") => Decision::Approve,
        Some("deny") => Decision::Deny,
        // The inbox link, or anything else: nothing to decide.
        _ => return refusal("Nothing to decide."),
    };
    let Some((id, revision)) = action["value"].as_str().and_then(parse_button_value) else {
        return refusal("This button names no question.");
    };
    let approver = match state.store.slack_approver(&identity).await {
        Ok(Some(approver)) => approver,
        Ok(None) => {
            refused(state, id, &identity, "an unlinked Slack user").await;
            return refusal(
                "Your Slack account is not linked to an approver of this inbox, so it decides nothing: ask an administrator to run `crew-inbox link-slack`.",
            );
        }
        Err(error) => return Err(error),
    };
    let question = match state.store.question(id).await {
        Ok(Some(question)) if approver.may_answer(&question) => question,
        Ok(_) => {
            refused(
                state,
                id,
                &identity,
                "a question outside the approver's scope",
            )
            .await;
            return refusal("There is no such question for you.");
        }
        Err(error) => return Err(error),
    };
    if question.revision() != revision {
        refused(state, id, &identity, "a button of an earlier revision").await;
        return refusal(
            "This question changed since this message was sent: nothing was decided. Open it in the inbox.",
        );
    }
    let answer = Answer::new(approver.name.clone(), decision).via("slack");
    match state.store.decide(id, answer).await {
        Ok(question) => Ok((true, format!("{} as {}.", question.status, approver.name))),
        Err(DecisionError::OwnRequest(_)) => {
            refused(state, id, &identity, "the requester's own Slack account").await;
            refusal("You asked for this call: someone else must decide it.")
        }
        Err(DecisionError::Store(error)) => Err(error),
        Err(error) => refusal(&super::view::decision_message(&error)),
    }
}

/// Tells the clicking user `text` through the interaction's
/// `response_url` (Slack shows no answer to a button's request): a
/// message only they see. Only a URL under `base` (Slack's own,
/// `https://hooks.slack.com/`) is called, off the request's path; a
/// failure is a trace line.
fn tell_by_response_url(base: &str, payload: &Value, text: &str) {
    let Some(url) = payload["response_url"].as_str() else {
        return;
    };
    if !url.starts_with(base) {
        tracing::warn!(target: "crew_runtime::inbox", base, "a Slack response URL outside Slack's was not called");
        return;
    }
    let (url, body) = (
        url.to_owned(),
        json!({"response_type": "ephemeral", "replace_original": false, "text": text}).to_string(),
    );
    tokio::spawn(async move {
        let sent = match crate::channels::http_client(RESPONSE_TIMEOUT) {
            Ok(client) => client
                .post(url)
                .header("content-type", "application/json; charset=utf-8")
                .body(body)
                .send()
                .await
                .map_err(crate::channels::request_failed)
                .and_then(|response| match response.status() {
                    status if status.is_success() => Ok(()),
                    status => Err(format!("Slack answered {status}")),
                }),
            Err(error) => Err(error),
        };
        if let Err(error) = sent {
            tracing::warn!(target: "crew_runtime::inbox", %error, "telling a Slack user through the response URL failed");
        }
    });
}

/// A refused click of an authenticated Slack user, on the log (and on the
/// question's audit trail, when it has one).
async fn refused(state: &State, question: &str, identity: &SlackIdentity, why: &str) {
    tracing::warn!(target: "crew_runtime::inbox", question, slack_user = %identity, why, "a Slack click was refused");
    #[cfg(feature = "audit")]
    state
        .store
        .record_slack_refusal(question, identity, why)
        .await;
    #[cfg(not(feature = "audit"))]
    let _ = state;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(secret: &str, timestamp: &str, body: &[u8]) -> HeaderMap {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("a key");
        mac.update(format!("v0:{timestamp}:").as_bytes());
        mac.update(body);
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-slack-signature",
            format!("v0={}", hex::encode(mac.finalize().into_bytes()))
                .parse()
                .expect("a header"),
        );
        headers.insert(
            "x-slack-request-timestamp",
            timestamp.parse().expect("a header"),
        );
        headers
    }

    #[test]
    fn slacks_signature_is_checked_with_its_five_minute_window() {
        let secret = SigningSecret::new("8f742231b10e8888abcd99yyyzzz85a5");
        let body = b"payload=%7B%7D";
        let now = 1_700_000_000;
        let headers = signed("8f742231b10e8888abcd99yyyzzz85a5", "1700000000", body);
        assert!(verify(&secret, &headers, body, now).is_ok());
        // Exactly at the window's edge, and one second past it.
        assert!(verify(&secret, &headers, body, now + WINDOW_SECS).is_ok());
        assert_eq!(
            verify(&secret, &headers, body, now + WINDOW_SECS + 1),
            Err("a stale timestamp")
        );
        assert_eq!(
            verify(&secret, &headers, b"payload=%7B%22x%22%7D", now),
            Err("a wrong signature")
        );
        let other = signed("another secret", "1700000000", body);
        assert_eq!(verify(&secret, &other, body, now), Err("a wrong signature"));
        assert_eq!(
            verify(&secret, &HeaderMap::new(), body, now),
            Err("no timestamp")
        );
        assert!(!format!("{secret:?}").contains("8f74"));
    }
}
