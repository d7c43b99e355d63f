//! The approval inbox: a web service where approvers sign in and answer
//! the questions of a [`Store`] — approve, deny, or approve with edited
//! arguments — live, without reloading.
//!
//! - Pages (server-rendered, no build step): `GET /login`, `POST /login`,
//!   `POST /logout`, `GET /` (the pending calls the approver may answer,
//!   50 a page: `/?after=CURSOR` for the next, each card showing the first
//!   4 KiB of the arguments), `GET /questions/{id}` (one question, its
//!   whole arguments), `GET /history`, and what the page's script uses:
//!   `GET /events` (server-sent events) and `GET /fragments/pending`.
//! - A JSON API for chat bots with `Authorization: Bearer <token>`
//!   ([`Store::issue_api_token`]): `GET /api/approvals?limit=&cursor=`
//!   (50 a page unless `limit` says, at most 200; `next_cursor` for the
//!   next), `GET /api/approvals/{id}`, `POST /api/approvals/{id}/decision`.
//!
//! Nothing leaves an approver's scope: the list, the live stream and the
//! refusals say nothing of a question they may not answer (one outside
//! their scope is answered as a missing one). A live stream ends with its
//! session.
//!
//! Accounts are made with [`Store::add_approver`] (or `crew-inbox
//! add-approver`). Signing in takes a password or a one-time token;
//! the session cookie is `HttpOnly; SameSite=Strict` (and `Secure` with
//! [`Inbox::secure_cookies`]); every form carries a CSRF token and every
//! state change must come from the inbox's own origin. Nobody answers
//! their own request, nor a question outside their
//! [scope](crate::store::ApproverScope).
//!
//! ```no_run
//! use crew_runtime::inbox::Inbox;
//! use crew_runtime::store::Store;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::connect("sqlite:///var/lib/my-agent/approvals.db").await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! Inbox::new(store)
//!     .public_origin("https://approvals.example.com")
//!     .secure_cookies(true)
//!     .serve(listener)
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! [`Store::issue_api_token`]: crate::store::Store::issue_api_token
//! [`Store::add_approver`]: crate::store::Store::add_approver

mod api;
mod auth;
mod list;
mod pages;
mod view;

pub use view::rfc3339;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

use crate::store::Store;

/// The largest request body taken, in bytes (1 MiB): a larger one is
/// answered 413 before it is read whole.
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How much of a too-large body is read (and thrown away) so that the
/// client hears the 413 rather than a reset connection: 16 MiB. Beyond
/// it the connection is cut.
const DRAIN_BODY_BYTES: usize = 16 * 1024 * 1024;

/// How long a session lasts unless told otherwise: a working day.
const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(8 * 60 * 60);

/// How often a live stream checks that its session is still open when
/// nothing changes (it checks on every change too): a session that
/// expires ends its stream within this time.
const DEFAULT_SESSION_CHECK: Duration = Duration::from_secs(10);

/// The approval inbox: build it on a [`Store`], then mount its
/// [`router`](Inbox::router) in your own axum app or [`serve`](Inbox::serve)
/// it alone.
///
/// ```no_run
/// use std::time::Duration;
/// use crew_runtime::inbox::Inbox;
///
/// # async fn run(store: crew_runtime::store::Store) {
/// let inbox = Inbox::new(store)
///     .public_origin("https://ops.example.com")
///     .secure_cookies(true)
///     .session_ttl(Duration::from_secs(4 * 3600));
/// // Under a path of your own app:
/// let app = axum::Router::new().nest("/approvals", inbox.router());
/// # let _ = app;
/// # }
/// ```
#[derive(Clone)]
pub struct Inbox {
    store: Store,
    public_origin: Option<String>,
    secure_cookies: bool,
    session_ttl: Duration,
    session_check: Duration,
}

impl fmt::Debug for Inbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbox")
            .field("store", &self.store)
            .field("public_origin", &self.public_origin)
            .field("secure_cookies", &self.secure_cookies)
            .field("session_ttl", &self.session_ttl)
            .field("session_check", &self.session_check)
            .finish()
    }
}

impl Inbox {
    /// An inbox answering the questions of `store`: sessions of 8 hours,
    /// cookies without `Secure`, and state changes accepted from the
    /// origin the request's `Host` names.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), crew_runtime::store::StoreError> {
    /// let store = crew_runtime::store::Store::connect("sqlite://approvals.db").await?;
    /// let inbox = crew_runtime::inbox::Inbox::new(store);
    /// # let _ = inbox;
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(store: Store) -> Self {
        Inbox {
            store,
            public_origin: None,
            secure_cookies: false,
            session_ttl: DEFAULT_SESSION_TTL,
            session_check: DEFAULT_SESSION_CHECK,
        }
    }

    /// The origin (`scheme://host[:port]`, no path) the approvers' browsers
    /// use: every state change must carry it in its `Origin` header. Set it
    /// whenever the inbox is behind a proxy or on a public name; without
    /// it, the origin is `http://` (or `https://` with
    /// [`secure_cookies`](Inbox::secure_cookies)) followed by the
    /// request's `Host`.
    ///
    /// ```no_run
    /// # fn run(inbox: crew_runtime::inbox::Inbox) {
    /// let inbox = inbox.public_origin("https://approvals.example.com");
    /// # let _ = inbox;
    /// # }
    /// ```
    pub fn public_origin(mut self, origin: impl Into<String>) -> Self {
        let origin = origin.into();
        self.public_origin = Some(origin.trim_end_matches('/').to_owned());
        self
    }

    /// Marks the cookies `Secure` (and names them with the `__Host-`
    /// prefix, which browsers keep from being set by other sites): set it
    /// when the approvers reach the inbox over TLS.
    ///
    /// ```no_run
    /// # fn run(inbox: crew_runtime::inbox::Inbox) {
    /// let inbox = inbox.secure_cookies(true);
    /// # let _ = inbox;
    /// # }
    /// ```
    pub fn secure_cookies(mut self, secure: bool) -> Self {
        self.secure_cookies = secure;
        self
    }

    /// How long a sign-in lasts (8 hours unless set; at least a minute).
    ///
    /// ```no_run
    /// # fn run(inbox: crew_runtime::inbox::Inbox) {
    /// let inbox = inbox.session_ttl(std::time::Duration::from_secs(3600));
    /// # let _ = inbox;
    /// # }
    /// ```
    pub fn session_ttl(mut self, ttl: Duration) -> Self {
        self.session_ttl = ttl.max(Duration::from_secs(60));
        self
    }

    /// How often a live stream (`GET /events`) checks, while nothing
    /// changes, that its session is still open (10 seconds unless set; at
    /// least 10 ms). A stream also checks on every change, and signing
    /// out, ending sessions, disabling an approver or changing their
    /// password announce a change: those end the stream at once, on every
    /// replica; this period bounds how long a stream outlives a session
    /// that merely expired.
    ///
    /// ```no_run
    /// # fn run(inbox: crew_runtime::inbox::Inbox) {
    /// let inbox = inbox.session_check_every(std::time::Duration::from_secs(5));
    /// # let _ = inbox;
    /// # }
    /// ```
    pub fn session_check_every(mut self, period: Duration) -> Self {
        self.session_check = period.max(Duration::from_millis(10));
        self
    }

    /// The inbox's routes, to serve or to mount in an axum app (also
    /// under a path with [`Router::nest`]: links and redirects follow it).
    ///
    /// ```no_run
    /// # fn run(inbox: crew_runtime::inbox::Inbox) {
    /// let app = axum::Router::new()
    ///     .route("/health", axum::routing::get(|| async { "ok" }))
    ///     .nest("/approvals", inbox.router());
    /// # let _ = app;
    /// # }
    /// ```
    pub fn router(&self) -> Router {
        let shared = Arc::new(Shared {
            store: self.store.clone(),
            public_origin: self.public_origin.clone(),
            secure_cookies: self.secure_cookies,
            session_ttl: self.session_ttl,
            session_check: self.session_check,
            templates: view::templates(),
        });
        // Cookie-authenticated routes: every state change must come from
        // the inbox's own origin (checked before anything else is read).
        let browser = Router::new()
            .route("/", get(pages::pending))
            .route("/history", get(pages::history))
            .route("/login", get(pages::login_form).post(pages::login))
            .route("/logout", post(pages::logout))
            .route("/questions/{id}", get(pages::question))
            .route("/questions/{id}/decision", post(pages::decide))
            .route("/fragments/pending", get(pages::pending_fragment))
            .route("/events", get(pages::events))
            .route_layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                auth::same_origin_only,
            ));
        // Bearer tokens carry no ambient authority: no CSRF, no Origin.
        let bots = Router::new()
            .route("/api/approvals", get(api::pending))
            .route("/api/approvals/{id}", get(api::question))
            .route("/api/approvals/{id}/decision", post(api::decide));
        let assets = Router::new()
            .route("/static/inbox.js", get(pages::script))
            .route("/static/inbox.css", get(pages::stylesheet));
        browser
            .merge(bots)
            .merge(assets)
            .layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                auth::limit_body,
            ))
            .layer(axum::middleware::map_response(auth::security_headers))
            .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(shared)
    }

    /// Serves the inbox on `listener` until the process stops.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> std::io::Result<()> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
    /// crew_runtime::inbox::Inbox::new(store).serve(listener).await
    /// # }
    /// ```
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        axum::serve(listener, self.router()).await
    }
}

/// What every handler shares.
pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) public_origin: Option<String>,
    pub(crate) secure_cookies: bool,
    pub(crate) session_ttl: Duration,
    pub(crate) session_check: Duration,
    pub(crate) templates: minijinja::Environment<'static>,
}

/// The handlers' state.
pub(crate) type State = Arc<Shared>;
