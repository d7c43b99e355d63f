//! Who is asking: session cookies, bearer tokens, CSRF tokens and the
//! origin of state changes.

use axum::extract::{FromRequestParts, OriginalUri, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine as _;

use axum::body::Body;
use futures_util::StreamExt as _;

use super::{DRAIN_BODY_BYTES, MAX_BODY_BYTES, State, view};
use crate::store::{Approver, same_secret};

/// The path the inbox is mounted under ("" at the root, "/approvals"
/// under `nest("/approvals", …)`): links and redirects start with it.
#[derive(Debug, Clone)]
pub(crate) struct Base(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for Base {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Base(base_of(parts)))
    }
}

/// The inbox's home page: `/` at the root, the mount path itself when
/// nested (axum routes `/approvals`, not `/approvals/`, to the nested `/`).
pub(crate) fn home(base: &str) -> String {
    if base.is_empty() {
        "/".to_owned()
    } else {
        base.to_owned()
    }
}

fn base_of(parts: &Parts) -> String {
    let inner = parts.uri.path();
    let Some(OriginalUri(original)) = parts.extensions.get::<OriginalUri>() else {
        return String::new();
    };
    let full = original.path();
    let base = full
        .strip_suffix(inner)
        .or_else(|| (inner == "/").then(|| full.trim_end_matches('/')))
        .unwrap_or("");
    base.to_owned()
}

/// The session cookie's name: with `Secure`, the `__Host-` prefix makes
/// browsers refuse the cookie from anywhere but this host over TLS.
pub(crate) fn session_cookie_name(state: &State) -> &'static str {
    if state.secure_cookies {
        "__Host-crew_inbox_session"
    } else {
        "crew_inbox_session"
    }
}

/// The cookie holding the sign-in form's CSRF token (double submit: the
/// form must carry the same value, which another site cannot read).
pub(crate) fn login_cookie_name(state: &State) -> &'static str {
    if state.secure_cookies {
        "__Host-crew_inbox_login"
    } else {
        "crew_inbox_login"
    }
}

/// A `Set-Cookie` value: `HttpOnly; SameSite=Strict; Path=/`, `Secure`
/// when asked; `max_age` zero deletes it.
pub(crate) fn set_cookie(state: &State, name: &str, value: &str, max_age: u64) -> HeaderValue {
    let secure = if state.secure_cookies { "; Secure" } else { "" };
    let text =
        format!("{name}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age={max_age}{secure}");
    // Names are ours and values base64url: always a valid header.
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The value of cookie `name`, from every `Cookie` header.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim_matches('"'))
}

/// A fresh random token (256 bits, base64url).
pub(crate) fn random_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// A signed-in approver, from the session cookie.
#[derive(Debug, Clone)]
pub(crate) struct SignedIn {
    pub(crate) approver: Approver,
    /// The session's CSRF token: every form carries it.
    pub(crate) csrf: String,
    /// The session token (the cookie's value), to end it.
    pub(crate) token: String,
    pub(crate) base: String,
}

impl SignedIn {
    /// Whether a form's CSRF token is this session's.
    pub(crate) fn csrf_matches(&self, sent: Option<&str>) -> bool {
        sent.is_some_and(|sent| same_secret(sent, &self.csrf))
    }
}

/// The signed-in approver, if the session cookie names an open session.
async fn signed_in(parts: &Parts, state: &State) -> Result<Option<SignedIn>, Response> {
    let base = base_of(parts);
    let Some(token) = cookie(&parts.headers, session_cookie_name(state)) else {
        return Ok(None);
    };
    match state.store.session(token).await {
        Ok(Some((approver, csrf))) => Ok(Some(SignedIn {
            approver,
            csrf,
            token: token.to_owned(),
            base,
        })),
        Ok(None) => Ok(None),
        Err(error) => Err(view::store_failed_page(state, &base, &error)),
    }
}

/// A page for a signed-in approver: anyone else is sent to sign in (303).
#[derive(Debug, Clone)]
pub(crate) struct Page(pub(crate) SignedIn);

impl FromRequestParts<State> for Page {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &State) -> Result<Self, Response> {
        match signed_in(parts, state).await? {
            Some(user) => Ok(Page(user)),
            None => Err(Redirect::to(&format!("{}/login", base_of(parts))).into_response()),
        }
    }
}

/// What the page's script fetches (fragments, events): anyone not
/// signed in gets 401, which the script answers by going to sign in.
#[derive(Debug, Clone)]
pub(crate) struct Script(pub(crate) SignedIn);

impl FromRequestParts<State> for Script {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &State) -> Result<Self, Response> {
        match signed_in(parts, state).await? {
            Some(user) => Ok(Script(user)),
            None => Err((
                StatusCode::UNAUTHORIZED,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "not signed in: sign in at /login first",
            )
                .into_response()),
        }
    }
}

/// A bot of the JSON API, from `Authorization: Bearer <token>`; anyone
/// else gets 401 JSON.
#[derive(Debug, Clone)]
pub(crate) struct Bot(pub(crate) Approver);

impl FromRequestParts<State> for Bot {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &State) -> Result<Self, Response> {
        let unauthorized = |message: &str| {
            let mut response = view::api_error(StatusCode::UNAUTHORIZED, message);
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"crew-inbox\""),
            );
            response
        };
        let Some(value) = parts.headers.get(header::AUTHORIZATION) else {
            return Err(unauthorized(
                "this API needs `Authorization: Bearer <token>` (issue one with `crew-inbox api-token`)",
            ));
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|value| value.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        let Some(token) = token.filter(|token| !token.is_empty()) else {
            return Err(unauthorized(
                "the Authorization header must be `Bearer <token>`",
            ));
        };
        match state.store.api_token_approver(token).await {
            Ok(Some(approver)) => Ok(Bot(approver)),
            Ok(None) => Err(unauthorized("the bearer token is unknown or revoked")),
            Err(error) => Err(view::store_failed_api(&error)),
        }
    }
}

/// Which `Host` headers the inbox answers: loopback names always, and
/// the configured names; `None` when any host is taken (a public origin
/// and no allowed hosts).
#[derive(Debug, Clone)]
pub(crate) struct HostCheck(Option<Vec<String>>);

impl HostCheck {
    pub(crate) fn new(public_origin: Option<&str>, allowed: &[String]) -> Self {
        match public_origin {
            Some(_) if allowed.is_empty() => HostCheck(None),
            Some(origin) => {
                let mut hosts = allowed.to_vec();
                if let Some((_, host)) = origin.split_once("://") {
                    hosts.push(host.to_ascii_lowercase());
                }
                HostCheck(Some(hosts))
            }
            None => HostCheck(Some(allowed.to_vec())),
        }
    }

    /// Whether a request naming `host` (`name` or `name:port`) is for us.
    pub(crate) fn allows(&self, host: &str) -> bool {
        let Some(allowed) = &self.0 else {
            return true;
        };
        let host = host.trim().to_ascii_lowercase();
        let Some(name) = host_name(&host) else {
            return false;
        };
        is_loopback_name(name)
            || allowed
                .iter()
                .any(|entry| *entry == host || entry.as_str() == name)
    }
}

/// The name of `host` without its port (`[::1]` keeps its brackets);
/// `None` when the port is not a number.
fn host_name(host: &str) -> Option<&str> {
    let (name, port) = if host.starts_with('[') {
        let end = host.find(']')?;
        let (name, rest) = host.split_at(end + 1);
        (name, rest.strip_prefix(':'))
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    match port {
        Some(port) if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) => None,
        _ if name.is_empty() => None,
        _ => Some(name),
    }
}

/// `localhost`, an address of 127.0.0.0/8, or `[::1]`.
fn is_loopback_name(name: &str) -> bool {
    if name == "localhost" {
        return true;
    }
    if let Some(inside) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        return inside
            .parse::<std::net::Ipv6Addr>()
            .is_ok_and(|address| address.is_loopback());
    }
    name.parse::<std::net::Ipv4Addr>()
        .is_ok_and(|address| address.is_loopback())
}

/// Refuses (421) a request whose `Host` the inbox was not given: with no
/// public origin, the expected `Origin` is built from the `Host`, and a
/// page of another site whose name now points at this machine (DNS
/// rebinding) would pass for the inbox's own.
pub(crate) async fn known_hosts_only(
    axum::extract::State(state): axum::extract::State<State>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()));
    match host {
        Some(host) if state.hosts.allows(&host) => next.run(request).await,
        host => {
            let named =
                host.map_or_else(|| "no host".to_owned(), |host| format!("the host {host:?}"));
            let message = format!(
                "this request names {named}, which is not this inbox's: it answers loopback names (localhost, 127.0.0.1, [::1]) and the names it was given (crew-inbox serve --allowed-host NAME, or --public-origin)"
            );
            let (parts, _) = request.into_parts();
            refuse(&state, &parts, StatusCode::MISDIRECTED_REQUEST, &message)
        }
    }
}

/// The origin state changes must come from.
fn expected_origin(state: &State, headers: &HeaderMap) -> Option<String> {
    if let Some(origin) = &state.public_origin {
        return Some(origin.clone());
    }
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let scheme = if state.secure_cookies {
        "https"
    } else {
        "http"
    };
    Some(format!("{scheme}://{host}"))
}

/// Refuses (403) a state change whose `Origin` is missing or another
/// site's, before anything else of it is read: with the `SameSite`
/// cookie and the CSRF token, a third wall against cross-site forgery.
pub(crate) async fn same_origin_only(
    axum::extract::State(state): axum::extract::State<State>,
    request: Request,
    next: Next,
) -> Response {
    if changes_nothing(request.method()) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let base = base_of(&parts);
    let expected = expected_origin(&state, &parts.headers);
    let sent = parts
        .headers
        .get(header::ORIGIN)
        .and_then(|value| value.to_str().ok());
    let message = match (sent, expected.as_deref()) {
        (Some(sent), Some(expected)) if sent.eq_ignore_ascii_case(expected) => {
            return next.run(Request::from_parts(parts, body)).await;
        }
        (None, _) => "this request carries no Origin header: the inbox takes changes only from its own pages (is something stripping the header?)".to_owned(),
        (Some(sent), Some(expected)) => format!(
            "this request comes from {sent}, not from the inbox ({expected}): it was refused (if the inbox is behind a proxy, start it with its public origin)"
        ),
        (Some(sent), None) => format!(
            "this request comes from {sent}, and the inbox cannot tell its own origin (no Host header): it was refused"
        ),
    };
    view::error_page(&state, &base, StatusCode::FORBIDDEN, &message)
}

/// Reads the body of a state change before anything else, keeping at
/// most [`MAX_BODY_BYTES`]. A larger body is read on to
/// [`DRAIN_BODY_BYTES`] and thrown away, then refused with 413: a client
/// still sending when the server hangs up would see a broken connection
/// instead of the answer saying why.
pub(crate) async fn limit_body(
    axum::extract::State(state): axum::extract::State<State>,
    request: Request,
    next: Next,
) -> Response {
    if changes_nothing(request.method()) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let mut chunks = body.into_data_stream();
    let mut kept: Vec<u8> = Vec::new();
    let mut total = 0usize;
    let read = async {
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            total = total.saturating_add(chunk.len());
            if total <= MAX_BODY_BYTES {
                kept.extend_from_slice(&chunk);
            } else if total > DRAIN_BODY_BYTES {
                break;
            }
        }
        Ok::<(), axum::Error>(())
    };
    match tokio::time::timeout(state.body_timeout, read).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            let message = format!("the request's body could not be read: {error}");
            return refuse(&state, &parts, StatusCode::BAD_REQUEST, &message);
        }
        Err(_) => {
            let message = format!(
                "the request's body did not arrive within {} seconds: send it again",
                state.body_timeout.as_secs_f32()
            );
            let mut response = refuse(&state, &parts, StatusCode::REQUEST_TIMEOUT, &message);
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
    }
    if total > MAX_BODY_BYTES {
        let message = format!(
            "the request is larger than the {MAX_BODY_BYTES} bytes (1 MiB) the inbox takes: shorten the edit"
        );
        let mut response = refuse(&state, &parts, StatusCode::PAYLOAD_TOO_LARGE, &message);
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return response;
    }
    next.run(Request::from_parts(parts, Body::from(kept))).await
}

/// A refusal in the form the caller reads: JSON for the API, a page
/// otherwise.
fn refuse(state: &State, parts: &Parts, status: StatusCode, message: &str) -> Response {
    if parts.uri.path().starts_with("/api/") {
        view::api_error(status, message)
    } else {
        view::error_page(state, &base_of(parts), status, message)
    }
}

/// Headers on every answer: no framing, no sniffing, no referrer to
/// other sites, only
/// the inbox's own script and styles, and pages never cached.
pub(crate) async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Not `no-referrer`: under it browsers send `Origin: null` with a
    // form's POST, which the origin check must refuse.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// Whether a request of `method` changes nothing (a read), so that the
/// guards of state changes let it through.
fn changes_nothing(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_and_given_host_names_are_answered() {
        let default = HostCheck::new(None, &[]);
        for host in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:80",
            "127.8.9.1",
            "[::1]:8080",
            "[::1]",
            "LOCALHOST:1",
        ] {
            assert!(default.allows(host), "{host}");
        }
        for host in [
            "evil.example:8080",
            "evil.example",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "[::2]:80",
            "localhost:80x",
            "10.0.0.1",
            "",
        ] {
            assert!(!default.allows(host), "{host}");
        }
        let given = HostCheck::new(
            None,
            &["approvals.internal".to_owned(), "10.0.0.7:8080".to_owned()],
        );
        assert!(given.allows("approvals.internal:9000"));
        assert!(given.allows("10.0.0.7:8080"));
        assert!(!given.allows("10.0.0.7:8081"));
        assert!(HostCheck::new(Some("https://a.example"), &[]).allows("anything"));
        let both = HostCheck::new(Some("https://a.example"), &["b.example".to_owned()]);
        assert!(both.allows("a.example") && both.allows("b.example") && !both.allows("c.example"));
    }

    #[test]
    fn cookies_are_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; crew_inbox_session=xyz"),
        );
        headers.append(header::COOKIE, HeaderValue::from_static("b=2"));
        assert_eq!(cookie(&headers, "crew_inbox_session"), Some("xyz"));
        assert_eq!(cookie(&headers, "b"), Some("2"));
        assert_eq!(cookie(&headers, "c"), None);
    }
}
