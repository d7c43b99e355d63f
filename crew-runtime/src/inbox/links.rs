//! Signed links (SPEC §14): a link that decides one question, at one
//! revision, for one approver, before its expiry, once.
//!
//! A token is `KEY-ID.PAYLOAD.MAC`: the payload (base64url JSON) names the
//! question, its revision, the approver, the expiry and the issue time
//! (ms since the Unix epoch) and a random nonce; the MAC is HMAC-SHA256 of
//! `crew-link-v1.KEY-ID.PAYLOAD` with the key `KEY-ID` names.

use std::fmt;
use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::store::{Question, millis};

/// The shortest key taken: 256 bits.
const MIN_KEY_BYTES: usize = 32;

/// The keys links are signed and checked with: the first signs, every one
/// checks (a new key first, the previous one kept while its links may
/// still be open: a rotation with an overlap). They live outside the
/// store (a file the replicas share); a key is revoked at once with
/// [`Store::revoke_link_key`](crate::store::Store::revoke_link_key). They
/// never show.
///
/// ```
/// use crew_runtime::inbox::LinkKeys;
///
/// // One key per line: its id, then the key in base64 (32 bytes or more).
/// let keys = LinkKeys::parse("2026-12 q8vN0o3bHh3XU6mCw0d2kUeUq7SQXnGkd1r5n8E3Z1I=\n")?;
/// assert_eq!(keys.signing_key_id(), "2026-12");
/// assert!(!format!("{keys:?}").contains("q8vN0"));
/// # Ok::<(), String>(())
/// ```
#[derive(Clone)]
pub struct LinkKeys {
    keys: Vec<(String, Vec<u8>)>,
}

impl fmt::Debug for LinkKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinkKeys")
            .field(
                "ids",
                &self.keys.iter().map(|(id, _)| id).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// What a link's token says, once its signature checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Claims {
    /// The question's id.
    pub(crate) q: String,
    /// Its revision.
    pub(crate) r: String,
    /// The approver the link was sent to.
    pub(crate) a: String,
    /// Its expiry (ms).
    pub(crate) e: i64,
    /// When it was issued (ms).
    pub(crate) i: i64,
    /// A nonce: two links are two tokens.
    pub(crate) n: String,
}

impl LinkKeys {
    /// The keys in `text`: one per line, its id (letters, digits, `-`,
    /// `_`) and the key in base64 (at least 32 bytes), separated by
    /// spaces; blank lines and lines starting with `#` are skipped. The
    /// first key signs.
    ///
    /// Errors (never holding a key): no key, a malformed line, a short
    /// key, an id given twice.
    ///
    /// ```
    /// use crew_runtime::inbox::LinkKeys;
    /// let error = LinkKeys::parse("old c2hvcnQ=").unwrap_err();
    /// assert!(error.contains("at least 32 bytes") && !error.contains("c2hvcnQ"));
    /// ```
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut keys: Vec<(String, Vec<u8>)> = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut parts = line.split_whitespace();
            let (Some(id), Some(key), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(format!(
                    "line {}: give a key id and the key in base64, separated by a space",
                    number + 1
                ));
            };
            if !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(format!(
                    "line {}: a key id is letters, digits, - and _",
                    number + 1
                ));
            }
            let key = STANDARD
                .decode(key)
                .map_err(|_| format!("line {}: the key {id} is not base64", number + 1))?;
            if key.len() < MIN_KEY_BYTES {
                return Err(format!(
                    "line {}: the key {id} has {} bytes; at least 32 bytes are needed",
                    number + 1,
                    key.len()
                ));
            }
            if keys.iter().any(|(known, _)| known == id) {
                return Err(format!(
                    "line {}: the key id {id} is given twice",
                    number + 1
                ));
            }
            keys.push((id.to_owned(), key));
        }
        if keys.is_empty() {
            return Err("no key: give one per line, its id and the key in base64".to_owned());
        }
        Ok(LinkKeys { keys })
    }

    /// The id of the key that signs.
    ///
    /// ```
    /// # let keys = crew_runtime::inbox::LinkKeys::parse("k1 q8vN0o3bHh3XU6mCw0d2kUeUq7SQXnGkd1r5n8E3Z1I=").unwrap();
    /// assert_eq!(keys.signing_key_id(), "k1");
    /// ```
    pub fn signing_key_id(&self) -> &str {
        self.keys.first().map_or("", |(id, _)| id.as_str())
    }

    /// A link token deciding `question` at its current revision, for
    /// `approver`, until `expiry` or the question's deadline, whichever
    /// comes first. Put it in the inbox's URL: `{origin}/links/{token}`.
    ///
    /// ```no_run
    /// # fn run(keys: crew_runtime::inbox::LinkKeys, question: crew_runtime::store::Question) -> Result<(), String> {
    /// use std::time::{Duration, SystemTime};
    /// let token = keys.issue(&question, "alice", SystemTime::now() + Duration::from_secs(3600))?;
    /// let link = format!("https://approvals.example.com/links/{token}");
    /// # let _ = link;
    /// # Ok(())
    /// # }
    /// ```
    pub fn issue(
        &self,
        question: &Question,
        approver: &str,
        expiry: SystemTime,
    ) -> Result<String, String> {
        let mut nonce = [0_u8; 16];
        getrandom::fill(&mut nonce).map_err(|error| format!("no random bytes: {error}"))?;
        let claims = Claims {
            q: question.id.clone(),
            r: question.revision(),
            a: approver.to_owned(),
            e: millis(expiry.min(question.deadline)),
            i: millis(SystemTime::now()),
            n: URL_SAFE_NO_PAD.encode(nonce),
        };
        self.sign(&claims)
    }

    /// The token of `claims`, signed with the first key.
    pub(crate) fn sign(&self, claims: &Claims) -> Result<String, String> {
        let (id, key) = self.keys.first().ok_or("no key")?;
        let payload = serde_json::to_vec(claims).map_err(|error| error.to_string())?;
        let payload = URL_SAFE_NO_PAD.encode(payload);
        let mac = URL_SAFE_NO_PAD.encode(mac(key, id, &payload)?.finalize().into_bytes());
        Ok(format!("{id}.{payload}.{mac}"))
    }

    /// What `token` says, when it is signed with one of these keys: the
    /// key's id and the claims. `None` for anything else.
    pub(crate) fn check(&self, token: &str) -> Option<(String, Claims)> {
        let mut parts = token.split('.');
        let (Some(id), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let (_, key) = self.keys.iter().find(|(known, _)| known == id)?;
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        // Constant time.
        mac(key, id, payload).ok()?.verify_slice(&signature).ok()?;
        let claims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
        Some((id.to_owned(), claims))
    }
}

fn mac(key: &[u8], id: &str, payload: &str) -> Result<Hmac<Sha256>, String> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).map_err(|error| error.to_string())?;
    mac.update(b"crew-link-v1.");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(payload.as_bytes());
    Ok(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &str = "new q8vN0o3bHh3XU6mCw0d2kUeUq7SQXnGkd1r5n8E3Z1I=\n\
                        old 9dS8c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seS0xMjM0NTY=\n";

    fn claims() -> Claims {
        Claims {
            q: "q1".into(),
            r: "0123456789abcdef".into(),
            a: "alice".into(),
            e: 2_000,
            i: 1_000,
            n: "nonce".into(),
        }
    }

    #[test]
    fn a_token_checks_with_its_key_and_any_change_to_it_fails() {
        let keys = LinkKeys::parse(KEYS).expect("keys");
        let token = keys.sign(&claims()).expect("signed");
        assert_eq!(keys.check(&token), Some(("new".to_owned(), claims())));
        // Each field of the payload changed, one at a time, signed by
        // nobody: refused.
        let (id, rest) = token.split_once('.').expect("an id");
        let (payload, signature) = rest.split_once('.').expect("a payload");
        let decoded: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("base64"))
                .expect("JSON");
        for field in ["q", "r", "a", "e", "i", "n"] {
            let mut changed = decoded.clone();
            changed[field] = match &decoded[field] {
                serde_json::Value::Number(n) => serde_json::json!(n.as_i64().unwrap_or(0) + 1),
                _ => serde_json::json!("other"),
            };
            let forged = URL_SAFE_NO_PAD.encode(changed.to_string());
            assert_eq!(
                keys.check(&format!("{id}.{forged}.{signature}")),
                None,
                "{field}"
            );
        }
        // Another key's id; a cut signature; extra parts.
        assert_eq!(keys.check(&format!("old.{payload}.{signature}")), None);
        assert_eq!(
            keys.check(&format!("{id}.{payload}.{}", &signature[1..])),
            None
        );
        assert_eq!(keys.check(&format!("{token}.x")), None);
        assert_eq!(keys.check("garbage"), None);
    }

    #[test]
    fn a_rotated_key_checks_until_it_leaves_the_file() {
        let before =
            LinkKeys::parse("old 9dS8c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seS0xMjM0NTY=").expect("keys");
        let token = before.sign(&claims()).expect("signed");
        let overlap = LinkKeys::parse(KEYS).expect("keys");
        assert!(overlap.check(&token).is_some(), "the old key still checks");
        let after =
            LinkKeys::parse("new q8vN0o3bHh3XU6mCw0d2kUeUq7SQXnGkd1r5n8E3Z1I=").expect("keys");
        assert_eq!(after.check(&token), None, "rotated out");
    }

    #[test]
    fn malformed_key_files_are_refused_without_showing_a_key() {
        for (text, says) in [
            ("", "no key"),
            ("k1", "give a key id"),
            ("k1 c2hvcnQ=", "at least 32 bytes"),
            ("k 1 x", "give a key id"),
            (
                "k!1 q8vN0o3bHh3XU6mCw0d2kUeUq7SQXnGkd1r5n8E3Z1I=",
                "letters, digits",
            ),
            ("k1 not*base64", "not base64"),
        ] {
            let error = LinkKeys::parse(text).expect_err(text);
            assert!(error.contains(says), "{text}: {error}");
            assert!(
                !error.contains("c2hvcnQ") && !error.contains("q8vN0"),
                "{error}"
            );
        }
        let twice = "k1 q8vN0o3bHh3XU6mCw0d2kUeUq7SQXnGkd1r5n8E3Z1I=\nk1 q8vN0o3bHh3XU6mCw0d2kUeUq7SQXnGkd1r5n8E3Z1I=";
        assert!(LinkKeys::parse(twice).expect_err("twice").contains("twice"));
    }
}

/// What every dead link shows: never which check failed.
const DEAD: &str = "This link cannot decide anything: it may have been used, have expired, or no longer be valid. Open the inbox to see the question.";

/// A live link: what it decides, for whom, and how.
struct Live {
    claims: Claims,
    question: Question,
    approver: crate::store::Approver,
    one_click: bool,
}

/// Whether link `token` may decide now, on the store's clock: signed with
/// a key of the inbox not revoked, before its expiry (dead exactly at
/// it), for an enabled approver who did not end their links since it was
/// issued, about a pending question at its revision and in the
/// approver's scope, and not used.
async fn live(state: &super::State, token: &str) -> Result<Option<Live>, crate::store::StoreError> {
    let Some(keys) = &state.link_keys else {
        return Ok(None);
    };
    let Some((key_id, claims)) = keys.check(token) else {
        return Ok(None);
    };
    let store = &state.store;
    if store.link_key_revoked(&key_id).await? || store.now() >= claims.e {
        return Ok(None);
    }
    let Some(settings) = store.link_settings(&claims.a).await? else {
        return Ok(None);
    };
    if claims.i < settings.valid_after {
        return Ok(None);
    }
    let Some(approver) = store.approver(&claims.a).await? else {
        return Ok(None);
    };
    let Some(question) = store.question(&claims.q).await? else {
        return Ok(None);
    };
    if question.revision() != claims.r
        || !approver.may_answer(&question)
        || store.link_used(token).await?
    {
        return Ok(None);
    }
    Ok(Some(Live {
        claims,
        question,
        approver,
        one_click: settings.one_click,
    }))
}

/// The signed-in approver and their session's CSRF token, if any.
async fn signed_in(
    state: &super::State,
    headers: &axum::http::HeaderMap,
) -> Result<Option<(String, String)>, crate::store::StoreError> {
    let Some(session) = super::auth::cookie(headers, super::auth::session_cookie_name(state))
    else {
        return Ok(None);
    };
    Ok(state
        .store
        .session(session)
        .await?
        .map(|(approver, csrf)| (approver.name, csrf)))
}

fn page(
    state: &super::State,
    status: axum::http::StatusCode,
    context: minijinja::Value,
) -> axum::response::Response {
    super::view::render(state, status, "link.html", context)
}

/// The live link `token`, and who is signed in; else the page to answer.
async fn opened(
    state: &super::State,
    base: &str,
    token: &str,
    headers: &axum::http::HeaderMap,
) -> Result<(Live, Option<(String, String)>), axum::response::Response> {
    let failed =
        |error: crate::store::StoreError| super::view::store_failed_page(state, base, &error);
    let live = match live(state, token).await {
        Ok(Some(live)) => live,
        Ok(None) => return Err(dead(state, base)),
        Err(error) => return Err(failed(error)),
    };
    let session = signed_in(state, headers).await.map_err(failed)?;
    Ok((live, session))
}

fn dead(state: &super::State, base: &str) -> axum::response::Response {
    super::view::error_page(state, base, axum::http::StatusCode::NOT_FOUND, DEAD)
}

/// `GET /links/{token}`: the confirmation page; never decides (mail
/// scanners and chat unfurlers open links).
pub(crate) async fn confirm(
    axum::extract::State(state): axum::extract::State<super::State>,
    super::auth::Base(base): super::auth::Base,
    axum::extract::Path(token): axum::extract::Path<String>,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    use axum::http::StatusCode;
    let (live, session) = match opened(&state, &base, &token, &headers).await {
        Ok(opened) => opened,
        Err(page) => return page,
    };
    let csrf = match (&session, live.one_click) {
        (Some((name, csrf)), _) if *name == live.claims.a => csrf.clone(),
        // Another approver signed in: refused, as any dead link.
        (Some(_), _) => return dead(&state, &base),
        (None, true) => String::new(),
        (None, false) => {
            return page(
                &state,
                StatusCode::UNAUTHORIZED,
                minijinja::context! { base, sign_in => true, for_approver => live.claims.a },
            );
        }
    };
    let question = live.question;
    page(
        &state,
        StatusCode::OK,
        minijinja::context! {
            base,
            id => question.id,
            tool => question.tool,
            reason => question.reason,
            agent => question.agent,
            task => question.task,
            requester => question.requester,
            arguments => serde_json::to_string_pretty(&question.arguments).unwrap_or_default(),
            for_approver => live.claims.a,
            token,
            csrf,
            approver => session.map(|(name, _)| name),
        },
    )
}

/// `POST /links/{token}`'s form.
#[derive(Debug, Deserialize)]
pub(crate) struct LinkForm {
    decision: String,
    #[serde(default)]
    csrf: Option<String>,
}

/// `POST /links/{token}`: decides, once across replicas; for the
/// approver signed in as the link's (with the session's CSRF token), or
/// for anyone holding the link of an approver who opted in to one-click
/// links.
pub(crate) async fn decide(
    axum::extract::State(state): axum::extract::State<super::State>,
    super::auth::Base(base): super::auth::Base,
    axum::extract::Path(token): axum::extract::Path<String>,
    headers: axum::http::HeaderMap,
    form: Result<axum::Form<LinkForm>, axum::extract::rejection::FormRejection>,
) -> axum::response::Response {
    use crate::store::{Answer, Decision};
    use axum::http::StatusCode;
    let Ok(axum::Form(form)) = form else {
        return super::view::error_page(
            &state,
            &base,
            StatusCode::UNPROCESSABLE_ENTITY,
            "The form must say approve or deny.",
        );
    };
    let decision = match form.decision.as_str() {
        "approve" => Decision::Approve,
        "deny" => Decision::Deny,
        _ => {
            return super::view::error_page(
                &state,
                &base,
                StatusCode::UNPROCESSABLE_ENTITY,
                "The form must say approve or deny.",
            );
        }
    };
    let (live, session) = match opened(&state, &base, &token, &headers).await {
        Ok(opened) => opened,
        Err(page) => return page,
    };
    let allowed = match &session {
        Some((name, csrf)) => {
            *name == live.claims.a
                && form
                    .csrf
                    .as_deref()
                    .is_some_and(|sent| crate::store::same_secret(sent, csrf))
        }
        None => live.one_click,
    };
    if !allowed {
        return dead(&state, &base);
    }
    match state.store.use_link(&token, &live.question.id).await {
        Ok(true) => {}
        Ok(false) => return dead(&state, &base),
        Err(error) => return super::view::store_failed_page(&state, &base, &error),
    }
    let answer = Answer::new(live.approver.name.clone(), decision).via("link");
    match state.store.decide(&live.question.id, answer).await {
        Ok(question) => page(
            &state,
            StatusCode::OK,
            minijinja::context! {
                base,
                id => question.id,
                tool => question.tool,
                done => format!("{} as {}.", question.status, live.approver.name),
                approver => session.map(|(name, _)| name),
            },
        ),
        Err(error) => super::view::error_page(
            &state,
            &base,
            super::view::decision_status(&error),
            &super::view::decision_message(&error),
        ),
    }
}
