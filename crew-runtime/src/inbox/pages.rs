//! The pages approvers use in a browser.

use std::convert::Infallible;
use std::time::SystemTime;

use axum::Form;
use axum::extract::rejection::FormRejection;
use axum::extract::{Path, Query, State as Extract};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::sync::broadcast::error::RecvError;

use super::auth::{self, Base, Page, Script, SignedIn};
use super::throttle::{self, Client};
use super::view::{self, Row};
use super::{MAX_BODY_BYTES, PASSWORD_CHECK_WAIT, State, list};
use crate::store::{Answer, Decision};

/// How many answered questions the history shows.
const HISTORY_LIMIT: usize = 200;

/// The login form's fields.
#[derive(Debug, Deserialize)]
pub(crate) struct LoginForm {
    csrf: Option<String>,
    name: Option<String>,
    password: Option<String>,
    token: Option<String>,
}

/// A decision from the page: one form per question, whose pressed button
/// names the decision.
#[derive(Debug, Deserialize)]
pub(crate) struct DecisionForm {
    csrf: Option<String>,
    decision: Option<String>,
    arguments: Option<String>,
    comment: Option<String>,
}

/// The form of the sign-out button.
#[derive(Debug, Deserialize)]
pub(crate) struct CsrfForm {
    csrf: Option<String>,
}

/// What the page says after a decision, and which page of the list.
#[derive(Debug, Deserialize)]
pub(crate) struct Notice {
    done: Option<String>,
    /// Where the page starts (a cursor the previous page's link carries).
    after: Option<String>,
}

/// `GET /login`: the sign-in form, with a fresh CSRF token in a cookie
/// and in the form (double submit: another site can read neither).
pub(crate) async fn login_form(
    Extract(state): Extract<State>,
    Base(base): Base,
    headers: HeaderMap,
) -> Response {
    // Someone signed in already has nothing to do here.
    if let Some(token) = auth::cookie(&headers, auth::session_cookie_name(&state))
        && let Ok(Some(_)) = state.store.session(token).await
    {
        return Redirect::to(&auth::home(&base)).into_response();
    }
    login_page(&state, &base, StatusCode::OK, None)
}

/// The sign-in page with a new login CSRF token and, maybe, what went wrong.
fn login_page(state: &State, base: &str, status: StatusCode, error: Option<&str>) -> Response {
    let csrf = match auth::random_token() {
        Ok(csrf) => csrf,
        Err(error) => {
            tracing::error!(%error, "no random bytes for a sign-in form");
            return view::error_page(
                state,
                base,
                StatusCode::SERVICE_UNAVAILABLE,
                "the operating system gave no random bytes: the inbox cannot sign anyone in now",
            );
        }
    };
    let mut response = view::render(
        state,
        status,
        "login.html",
        minijinja::context! { base, csrf => csrf.clone(), error },
    );
    let cookie = auth::set_cookie(state, auth::login_cookie_name(state), &csrf, 3600);
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response
}

/// `POST /login`: a name and password, or a one-time token. Refused
/// (429) while the client's address, or for a password the account, is
/// throttled; answered 503 when no password check is free in time.
pub(crate) async fn login(
    Extract(state): Extract<State>,
    Base(base): Base,
    Client(client): Client,
    headers: HeaderMap,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Response {
    let form = match form {
        Ok(Form(form)) => form,
        Err(rejection) => return form_refused(&state, &base, &rejection),
    };
    let expected = auth::cookie(&headers, auth::login_cookie_name(&state));
    let csrf_ok = match (form.csrf.as_deref(), expected) {
        (Some(sent), Some(expected)) => crate::store::same_secret(sent, expected),
        _ => false,
    };
    if !csrf_ok {
        return view::error_page(
            &state,
            &base,
            StatusCode::FORBIDDEN,
            "the sign-in form is out of date or did not come from this inbox (its CSRF token does not match): open the sign-in page again",
        );
    }
    let token = form.token.as_deref().map(str::trim).unwrap_or_default();
    let name = form.name.as_deref().unwrap_or_default();
    let password = form.password.as_deref().unwrap_or_default();
    if token.is_empty() && (name.is_empty() || password.is_empty()) {
        return login_page(
            &state,
            &base,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("Give your name and password, or a one-time sign-in token."),
        );
    }
    // What the throttle counts: the address, and for a password the
    // account (a one-time token is held back by its address only, so
    // that an approver locked out by someone's guessing can still come in
    // with a token).
    let address_key = client.map(throttle::address_key);
    let account_key = token.is_empty().then(|| throttle::account_key(name));
    let keys: Vec<String> = address_key.iter().chain(&account_key).cloned().collect();
    match state.store.sign_in_locked_until(&keys).await {
        Ok(None) => {}
        Ok(Some(until)) => return throttled(&state, &base, until),
        Err(error) => return view::store_failed_page(&state, &base, &error),
    }
    let signed_in = if token.is_empty() {
        // Each check holds argon2's memory while it runs: at most so many
        // at once, and the rest answered at once rather than queued.
        let permit = tokio::time::timeout(
            PASSWORD_CHECK_WAIT,
            state.password_checks.clone().acquire_owned(),
        )
        .await;
        let Ok(Ok(_permit)) = permit else {
            return busy(&state, &base);
        };
        state.store.check_password(name, password).await
    } else {
        state.store.redeem_sign_in_token(token).await
    };
    let approver = match signed_in {
        Ok(Some(approver)) => approver,
        Ok(None) => {
            let counted = async {
                if let Some(key) = &address_key {
                    let rule = state.throttle.rule(state.throttle.failures_per_address);
                    state.store.record_sign_in_failure(key, rule).await?;
                }
                if let Some(key) = &account_key {
                    let rule = state.throttle.rule(state.throttle.failures_per_account);
                    state.store.record_sign_in_failure(key, rule).await?;
                }
                Ok::<(), crate::store::StoreError>(())
            };
            if let Err(error) = counted.await {
                return view::store_failed_page(&state, &base, &error);
            }
            let message = if token.is_empty() {
                "Wrong name or password."
            } else {
                "This sign-in token is unknown, used already, or expired: ask for a new one."
            };
            return login_page(&state, &base, StatusCode::UNAUTHORIZED, Some(message));
        }
        Err(error) => return view::store_failed_page(&state, &base, &error),
    };
    for key in address_key.iter().chain(&account_key) {
        if let Err(error) = state.store.clear_sign_in_failures(key).await {
            return view::store_failed_page(&state, &base, &error);
        }
    }
    let (session, _csrf) = match state
        .store
        .create_session(&approver.name, state.session_ttl)
        .await
    {
        Ok(opened) => opened,
        Err(error) => return view::store_failed_page(&state, &base, &error),
    };
    let mut response = Redirect::to(&auth::home(&base)).into_response();
    let cookies = response.headers_mut();
    cookies.append(
        header::SET_COOKIE,
        auth::set_cookie(
            &state,
            auth::session_cookie_name(&state),
            &session,
            state.session_ttl.as_secs(),
        ),
    );
    cookies.append(
        header::SET_COOKIE,
        auth::set_cookie(&state, auth::login_cookie_name(&state), "", 0),
    );
    response
}

/// The sign-in page, 429 with `Retry-After`, while the throttle holds
/// the address or account back until `until` (milliseconds).
fn throttled(state: &State, base: &str, until: i64) -> Response {
    let wait_ms = until.saturating_sub(crate::store::now_millis()).max(0);
    let seconds = u64::try_from(wait_ms).unwrap_or(0).div_ceil(1000).max(1);
    let message = format!(
        "Too many failed sign-ins from here or for this account: try again in {seconds} seconds (or sign in with a one-time token)."
    );
    let mut response = login_page(state, base, StatusCode::TOO_MANY_REQUESTS, Some(&message));
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// The sign-in page, 503 with `Retry-After`, when every password check
/// is taken.
fn busy(state: &State, base: &str) -> Response {
    let mut response = login_page(
        state,
        base,
        StatusCode::SERVICE_UNAVAILABLE,
        Some("The inbox is checking too many sign-ins at once: try again in a moment."),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// `POST /logout`: ends the session.
pub(crate) async fn logout(
    Extract(state): Extract<State>,
    Page(user): Page,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let form = match form {
        Ok(Form(form)) => form,
        Err(rejection) => return form_refused(&state, &user.base, &rejection),
    };
    if !user.csrf_matches(form.csrf.as_deref()) {
        return csrf_refused(&state, &user);
    }
    if let Err(error) = state.store.end_session(&user.token).await {
        return view::store_failed_page(&state, &user.base, &error);
    }
    let mut response = Redirect::to(&format!("{}/login", user.base)).into_response();
    response.headers_mut().append(
        header::SET_COOKIE,
        auth::set_cookie(&state, auth::session_cookie_name(&state), "", 0),
    );
    response
}

/// One page of the pending questions `user` may answer (their own
/// requests included, without buttons), after the cursor `after`.
async fn pending_rows(
    state: &State,
    user: &SignedIn,
    after: Option<&str>,
) -> Result<(Vec<Row>, Option<String>, usize), Response> {
    let after = match after.filter(|after| !after.is_empty()) {
        None => None,
        Some(text) => match list::Cursor::parse(text) {
            Some(cursor) => Some(cursor),
            None => {
                return Err(view::error_page(
                    state,
                    &user.base,
                    StatusCode::BAD_REQUEST,
                    "this page's link is malformed: go back to the first page of the list",
                ));
            }
        },
    };
    let page = list::pending_page(
        &state.store,
        &user.approver,
        after.as_ref(),
        list::PAGE_SIZE,
        true,
    )
    .await
    .map_err(|error| view::store_failed_page(state, &user.base, &error))?;
    let now = SystemTime::now();
    let rows = page
        .questions
        .iter()
        .map(|question| Row::of(question, &user.approver, now))
        .collect();
    Ok((rows, page.next.map(|next| next.to_string()), page.total))
}

/// `GET /` (and `/?after=CURSOR`, a later page): the pending calls, live,
/// [`list::PAGE_SIZE`] a page.
pub(crate) async fn pending(
    Extract(state): Extract<State>,
    Page(user): Page,
    Query(notice): Query<Notice>,
) -> Response {
    let (rows, next, total) = match pending_rows(&state, &user, notice.after.as_deref()).await {
        Ok(page) => page,
        Err(response) => return response,
    };
    let later_page = notice.after.is_some();
    let notice = match notice.done.as_deref() {
        Some("approve") => Some("Approved."),
        Some("deny") => Some("Denied."),
        Some("edit") => Some("Approved with your edit."),
        _ => None,
    };
    view::render(
        &state,
        StatusCode::OK,
        "pending.html",
        minijinja::context! {
            home => auth::home(&user.base),
            base => user.base,
            csrf => user.csrf,
            scope => user.approver.scope_description(),
            approver => user.approver.name,
            questions => minijinja::Value::from(minijinja::value::Serde(&rows)),
            now_ms => crate::store::now_millis(),
            total,
            next,
            later_page,
            notice,
        },
    )
}

/// `GET /fragments/pending` (`?after=CURSOR` for a later page): the list
/// alone, which the script swaps in.
pub(crate) async fn pending_fragment(
    Extract(state): Extract<State>,
    Script(user): Script,
    Query(notice): Query<Notice>,
) -> Response {
    let (rows, next, total) = match pending_rows(&state, &user, notice.after.as_deref()).await {
        Ok(page) => page,
        Err(response) => return response,
    };
    view::render(
        &state,
        StatusCode::OK,
        "pending_list.html",
        minijinja::context! {
            home => auth::home(&user.base),
            base => user.base,
            csrf => user.csrf,
            questions => minijinja::Value::from(minijinja::value::Serde(&rows)),
            now_ms => crate::store::now_millis(),
            total,
            next,
            later_page => notice.after.is_some(),
        },
    )
}

/// `GET /questions/{id}`: one question with its whole arguments, and its
/// decision form while it waits. Outside the approver's scope it is
/// missing (404, the words of an unknown id).
pub(crate) async fn question(
    Extract(state): Extract<State>,
    Page(user): Page,
    Path(id): Path<String>,
) -> Response {
    let question = match state.store.question(&id).await {
        Ok(Some(question)) if user.approver.may_answer(&question) => question,
        Ok(_) => {
            return view::error_page(
                &state,
                &user.base,
                StatusCode::NOT_FOUND,
                view::NO_SUCH_QUESTION,
            );
        }
        Err(error) => return view::store_failed_page(&state, &user.base, &error),
    };
    let now = SystemTime::now();
    let open = question.is_open(now);
    let row = Row::whole(&question, &user.approver, now);
    view::render(
        &state,
        StatusCode::OK,
        "question.html",
        minijinja::context! {
            home => auth::home(&user.base),
            base => user.base,
            csrf => user.csrf,
            approver => user.approver.name,
            q => minijinja::Value::from(minijinja::value::Serde(&row)),
            open,
        },
    )
}

/// `GET /history`: what was answered or closed, most recent first.
pub(crate) async fn history(Extract(state): Extract<State>, Page(user): Page) -> Response {
    let closed = match state.store.history(HISTORY_LIMIT).await {
        Ok(closed) => closed,
        Err(error) => return view::store_failed_page(&state, &user.base, &error),
    };
    let now = SystemTime::now();
    let rows: Vec<Row> = closed
        .iter()
        .filter(|question| user.approver.may_answer(question))
        .map(|question| Row::of(question, &user.approver, now))
        .collect();
    view::render(
        &state,
        StatusCode::OK,
        "history.html",
        minijinja::context! {
            base => user.base,
            csrf => user.csrf,
            approver => user.approver.name,
            questions => minijinja::Value::from(minijinja::value::Serde(&rows)),
            limit => HISTORY_LIMIT,
        },
    )
}

/// `POST /questions/{id}/decision`: approve, deny or edit from the page.
pub(crate) async fn decide(
    Extract(state): Extract<State>,
    Page(user): Page,
    Path(id): Path<String>,
    form: Result<Form<DecisionForm>, FormRejection>,
) -> Response {
    let base = user.base.clone();
    let fail = |status: StatusCode, message: &str| view::error_page(&state, &base, status, message);
    let form = match form {
        Ok(Form(form)) => form,
        Err(rejection) => return form_refused(&state, &base, &rejection),
    };
    if !user.csrf_matches(form.csrf.as_deref()) {
        return csrf_refused(&state, &user);
    }
    let decision = match form.decision.as_deref() {
        Some("approve") => Decision::Approve,
        Some("deny") => Decision::Deny,
        Some("edit") => match parse_edit(form.arguments.as_deref().unwrap_or_default()) {
            Ok(edit) => Decision::ApproveWithEdit(edit),
            Err(message) => return fail(StatusCode::UNPROCESSABLE_ENTITY, &message),
        },
        Some(other) => {
            return fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("unknown decision {other:?}: use approve, deny or edit"),
            );
        }
        None => {
            return fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "the form names no decision: press approve, deny or edit",
            );
        }
    };
    let question = match state.store.question(&id).await {
        Ok(Some(question)) => question,
        Ok(None) => return fail(StatusCode::NOT_FOUND, view::NO_SUCH_QUESTION),
        Err(error) => return view::store_failed_page(&state, &base, &error),
    };
    // Outside the scope reads as missing: nothing of it is told.
    if !user.approver.may_answer(&question) {
        return fail(StatusCode::NOT_FOUND, view::NO_SUCH_QUESTION);
    }
    let done = decision.as_str();
    let mut answer = Answer::new(user.approver.name.clone(), decision).via("inbox");
    if let Some(comment) = form.comment.as_deref().map(str::trim)
        && !comment.is_empty()
    {
        answer = answer.with_comment(comment);
    }
    match state.store.decide(&id, answer).await {
        Ok(_) => Redirect::to(&format!("{}?done={done}", auth::home(&base))).into_response(),
        Err(error) => fail(
            view::decision_status(&error),
            &view::decision_message(&error),
        ),
    }
}

/// The edited arguments from the textarea: a JSON object.
pub(crate) fn parse_edit(text: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(edit)) => Ok(edit),
        Ok(_) => Err("the edited arguments must be a JSON object ({ … })".to_owned()),
        Err(error) => Err(format!("the edited arguments are not JSON: {error}")),
    }
}

/// `GET /events`: a server-sent event `change` (its data the id of the
/// question, or `*` for "something changed") whenever a question the
/// approver may answer is asked, answered or closed, and a keep-alive
/// comment in between. Nothing is said of questions outside their scope.
/// The stream ends with its session: it checks the session on every
/// change and every [`session_check_every`](super::Inbox::session_check_every),
/// and when the session is gone it sends `signed-out` and ends.
pub(crate) async fn events(Extract(state): Extract<State>, Script(user): Script) -> Response {
    // Subscribed first: nothing that changes after the snapshot is missed.
    let changes = state.store.changes();
    let in_scope = match in_scope_pending(&state, &user.approver).await {
        Ok(in_scope) => in_scope,
        Err(error) => return view::store_failed_page(&state, &user.base, &error),
    };
    let mut check = tokio::time::interval(state.session_check);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let watch = Watch {
        state,
        token: user.token,
        approver: user.approver,
        changes,
        check,
        in_scope,
        ended: false,
    };
    let stream = futures_util::stream::unfold(watch, |mut watch| async move {
        let event = watch.next().await?;
        Some((Ok::<_, Infallible>(event), watch))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The ids of the pending questions `approver` may answer, in order.
async fn in_scope_pending(
    state: &State,
    approver: &crate::store::Approver,
) -> Result<Vec<String>, crate::store::StoreError> {
    Ok(state
        .store
        .pending_summaries()
        .await?
        .into_iter()
        .filter(|question| approver.may_answer_call(&question.tool, question.capabilities))
        .map(|question| question.id)
        .collect())
}

/// One approver's live stream: what it listens to and what it has said.
struct Watch {
    state: State,
    /// The session token the stream was opened with.
    token: String,
    approver: crate::store::Approver,
    changes: tokio::sync::broadcast::Receiver<String>,
    check: tokio::time::Interval,
    /// The pending questions in scope when last looked at: an unnamed
    /// change ("something changed") is told only if these changed.
    in_scope: Vec<String>,
    ended: bool,
}

impl Watch {
    /// The next event to send, or `None` to end the stream.
    async fn next(&mut self) -> Option<Event> {
        if self.ended {
            return None;
        }
        loop {
            let change = tokio::select! {
                change = self.changes.recv() => Some(change),
                _ = self.check.tick() => None,
            };
            // On every change and every tick: is the session still open?
            match self.state.store.session(&self.token).await {
                Ok(Some((approver, _))) => self.approver = approver,
                Ok(None) => {
                    self.ended = true;
                    return Some(
                        Event::default()
                            .event("signed-out")
                            .data("the session ended: sign in again"),
                    );
                }
                Err(error) => {
                    // Closed rather than open on a doubt; the page
                    // reconnects and is told what is wrong.
                    tracing::error!(%error, "the approvals store failed; a live stream ends");
                    return None;
                }
            }
            let id = match change {
                None => continue,
                Some(Ok(id)) if !id.is_empty() => id,
                // Unknown, or too many to name: tell "something changed"
                // only if the approver's own list changed.
                Some(Ok(_) | Err(RecvError::Lagged(_))) => {
                    match in_scope_pending(&self.state, &self.approver).await {
                        Ok(now) if now != self.in_scope => {
                            self.in_scope = now;
                            return Some(Event::default().event("change").data("*"));
                        }
                        Ok(_) => continue,
                        Err(error) => {
                            tracing::error!(%error, "the approvals store failed; a live stream ends");
                            return None;
                        }
                    }
                }
                Some(Err(RecvError::Closed)) => return None,
            };
            match self.state.store.question_scope(&id).await {
                Ok(Some((tool, capabilities)))
                    if self.approver.may_answer_call(&tool, capabilities) =>
                {
                    return Some(Event::default().event("change").data(id));
                }
                // Outside the scope, or not (or no longer) a question.
                Ok(_) => continue,
                Err(error) => {
                    tracing::error!(%error, "the approvals store failed; a live stream ends");
                    return None;
                }
            }
        }
    }
}

/// `GET /static/inbox.js`: the page's script (no build step, no CDN).
pub(crate) async fn script() -> Response {
    view::asset(
        "text/javascript; charset=utf-8",
        include_str!("static/inbox.js"),
    )
}

/// `GET /static/inbox.css`.
pub(crate) async fn stylesheet() -> Response {
    view::asset("text/css; charset=utf-8", include_str!("static/inbox.css"))
}

/// The page for a form that could not be read: too large (413), of the
/// wrong type, or malformed.
fn form_refused(state: &State, base: &str, rejection: &FormRejection) -> Response {
    let status = rejection.status();
    let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
        format!(
            "the form is larger than the {} bytes the inbox takes: shorten the edit",
            MAX_BODY_BYTES
        )
    } else {
        format!("the form could not be read: {}", rejection.body_text())
    };
    view::error_page(state, base, status, &message)
}

/// The page for a form whose CSRF token is not the session's.
fn csrf_refused(state: &State, user: &SignedIn) -> Response {
    view::error_page(
        state,
        &user.base,
        StatusCode::FORBIDDEN,
        "the form's CSRF token is missing or not this session's: reload the page and try again",
    )
}
