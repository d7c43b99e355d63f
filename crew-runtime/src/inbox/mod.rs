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
pub mod cli;
#[cfg(feature = "channels")]
mod links;
mod list;
mod pages;
mod serve;
#[cfg(feature = "channels")]
mod slack;
mod throttle;
mod view;

pub use view::rfc3339;

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use tokio::sync::Semaphore;

use crate::store::Store;

#[cfg(feature = "channels")]
pub use links::LinkKeys;
pub use throttle::SignInThrottle;

/// The largest request body taken, in bytes (1 MiB): a larger one is
/// answered 413 before it is read whole.
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How much of a too-large body is read (and thrown away) so that the
/// client hears the 413 rather than a reset connection: 16 MiB. Beyond
/// it the connection is cut.
const DRAIN_BODY_BYTES: usize = 16 * 1024 * 1024;

/// How long a session lasts unless told otherwise: a working day.
const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(8 * 60 * 60);

/// How long a connection may take to send a request's headers, and stay
/// idle between requests, unless told otherwise.
const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request's body may take to arrive unless told otherwise.
const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How many connections [`Inbox::serve`] holds open at once unless told
/// otherwise: half the 1,024 descriptors a process usually gets, leaving
/// the rest to the store's connections and the runtime.
const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// How long a sign-in waits for a free password check before it is
/// answered 503.
const PASSWORD_CHECK_WAIT: Duration = Duration::from_secs(1);

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
    allowed_hosts: Vec<String>,
    trusted_proxies: Vec<IpAddr>,
    max_password_checks: usize,
    throttle: SignInThrottle,
    header_timeout: Duration,
    body_timeout: Duration,
    max_connections: usize,
    session_check: Duration,
    #[cfg(feature = "channels")]
    slack_secret: Option<slack::SigningSecret>,
    #[cfg(feature = "channels")]
    slack_responses: String,
    #[cfg(feature = "channels")]
    link_keys: Option<links::LinkKeys>,
}

impl fmt::Debug for Inbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbox")
            .field("store", &self.store)
            .field("public_origin", &self.public_origin)
            .field("secure_cookies", &self.secure_cookies)
            .field("session_ttl", &self.session_ttl)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("trusted_proxies", &self.trusted_proxies)
            .field("max_password_checks", &self.max_password_checks)
            .field("throttle", &self.throttle)
            .field("header_timeout", &self.header_timeout)
            .field("body_timeout", &self.body_timeout)
            .field("max_connections", &self.max_connections)
            .field("session_check", &self.session_check)
            .finish_non_exhaustive()
    }
}

impl Inbox {
    /// An inbox answering the questions of `store`: sessions of 8 hours,
    /// cookies without `Secure`, requests only for loopback host names
    /// (`localhost`, `127.0.0.1`, `[::1]`), state changes accepted from
    /// the origin the request's `Host` names, as many password checks at
    /// once as the machine has cores, sign-ins throttled as
    /// [`SignInThrottle::default`] says, and the time limits and
    /// connection cap of [`serve`](Inbox::serve).
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
            allowed_hosts: Vec::new(),
            trusted_proxies: Vec::new(),
            max_password_checks: std::thread::available_parallelism().map_or(1, usize::from),
            throttle: SignInThrottle::default(),
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            session_check: DEFAULT_SESSION_CHECK,
            #[cfg(feature = "channels")]
            slack_secret: None,
            #[cfg(feature = "channels")]
            slack_responses: slack::SLACK_RESPONSES.to_owned(),
            #[cfg(feature = "channels")]
            link_keys: None,
        }
    }

    /// Serves signed links, `GET` and `POST /links/{token}`, checked with
    /// `keys` (feature `channels`, SPEC §14). Opening a link shows a
    /// confirmation page and never decides; its form decides, once across
    /// replicas, for the link's own approver (signed in, unless they opted
    /// in to one-click links: [`Store::set_one_click_links`]). A link is
    /// dead once used, at its expiry, when its question changed, when its
    /// approver is disabled or ended their links
    /// ([`Store::end_links`]), and when its key is revoked
    /// ([`Store::revoke_link_key`]) or leaves `keys`; a dead link says
    /// nothing of why.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), Box<dyn std::error::Error>> {
    /// use crew_runtime::inbox::{Inbox, LinkKeys};
    /// let keys = LinkKeys::parse(&std::fs::read_to_string("/run/secrets/link-keys")?)?;
    /// let inbox = Inbox::new(store).link_keys(keys);
    /// # let _ = inbox;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// [`Store::set_one_click_links`]: crate::store::Store::set_one_click_links
    /// [`Store::end_links`]: crate::store::Store::end_links
    /// [`Store::revoke_link_key`]: crate::store::Store::revoke_link_key
    #[cfg(feature = "channels")]
    pub fn link_keys(mut self, keys: LinkKeys) -> Self {
        self.link_keys = Some(keys);
        self
    }

    /// Serves Slack's interactivity endpoint, `POST /slack/interactions`
    /// (the Request URL of the Slack app's Interactivity settings), for
    /// the buttons of [`Slack`](crate::channels::Slack)'s messages:
    /// requests are authenticated by Slack's signature with
    /// `signing_secret` (the app's Signing Secret; it never shows),
    /// timestamped within five minutes of the store's clock, and refused
    /// when replayed (on any replica of the store). The clicking user's
    /// linked approver decides (feature `channels`).
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> std::io::Result<()> {
    /// let secret = std::fs::read_to_string("/run/secrets/slack-signing-secret")?;
    /// let inbox = crew_runtime::inbox::Inbox::new(store).slack_signing_secret(&secret);
    /// # let _ = inbox;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "channels")]
    pub fn slack_signing_secret(mut self, signing_secret: &str) -> Self {
        self.slack_secret = Some(slack::SigningSecret::new(signing_secret));
        self
    }

    /// Where the `response_url` of a Slack click may point: the clicking
    /// user is told what their click did (or why it decided nothing)
    /// through it, and only a URL starting with `base` is called
    /// (default `https://hooks.slack.com/`; an egress proxy, or a
    /// stand-in in tests). Feature `channels`.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) {
    /// let inbox = crew_runtime::inbox::Inbox::new(store)
    ///     .slack_signing_secret("8f742231b10e8888abcd99yyyzzz85a5")
    ///     .slack_response_base("http://slack-egress.internal/");
    /// # let _ = inbox;
    /// # }
    /// ```
    #[cfg(feature = "channels")]
    pub fn slack_response_base(mut self, base: &str) -> Self {
        let mut base = base.to_owned();
        if !base.ends_with('/') {
            base.push('/');
        }
        self.slack_responses = base;
        self
    }

    /// The origin (`scheme://host[:port]`, no path) the approvers' browsers
    /// use: every state change must carry it in its `Origin` header. Set it
    /// whenever the inbox is behind a proxy or on a public name; without
    /// it, the origin is `http://` (or `https://` with
    /// [`secure_cookies`](Inbox::secure_cookies)) followed by the
    /// request's `Host`, which must then be a loopback name or one of the
    /// [`allowed_hosts`](Inbox::allowed_hosts) (a page of another site
    /// whose name was re-pointed at this machine must not sign in).
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

    /// The host names (`approvals.internal`, or with a port,
    /// `approvals.internal:8080`) requests may name in their `Host` header
    /// besides the loopback names (`localhost`, `127.0.0.0/8`, `[::1]`,
    /// with any port): any other is refused 421 on every route, so that a
    /// page of another site whose name was re-pointed at this machine (DNS
    /// rebinding) can neither read nor sign in. With a
    /// [`public_origin`](Inbox::public_origin) and no allowed hosts, the
    /// `Host` is not checked (a proxy may name the inbox as it likes; the
    /// origin check is fixed); with both, the public origin's host is
    /// allowed too.
    ///
    /// ```no_run
    /// # fn run(inbox: crew_runtime::inbox::Inbox) {
    /// let inbox = inbox.allowed_hosts(["approvals.internal", "10.0.0.7:8080"]);
    /// # let _ = inbox;
    /// # }
    /// ```
    pub fn allowed_hosts<I, S>(mut self, hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.allowed_hosts = hosts
            .into_iter()
            .map(|host| host.as_ref().trim().to_ascii_lowercase())
            .filter(|host| !host.is_empty())
            .collect();
        self
    }

    /// The addresses of the reverse proxies in front of the inbox: only
    /// for a connection from one of them is the client's address read from
    /// `X-Forwarded-For` (or `Forwarded: for=`), the nearest address in it
    /// that is not itself a trusted proxy. From anyone else those headers
    /// are ignored (a client could write any address there) and the
    /// connection's own address counts, for the
    /// [sign-in throttle](SignInThrottle).
    ///
    /// ```no_run
    /// # fn run(inbox: crew_runtime::inbox::Inbox) {
    /// let proxy: std::net::IpAddr = "10.0.0.2".parse().expect("an address");
    /// let inbox = inbox.trusted_proxies([proxy]);
    /// # let _ = inbox;
    /// # }
    /// ```
    pub fn trusted_proxies(mut self, proxies: impl IntoIterator<Item = IpAddr>) -> Self {
        self.trusted_proxies = proxies.into_iter().collect();
        self
    }

    /// How many password checks run at once (at least one; as many as the
    /// machine has cores unless set). Each is an argon2 verification that
    /// holds about 19 MiB while it runs: the bound keeps the inbox's memory
    /// bounded whatever the traffic. A sign-in that finds no free check
    /// within a second is answered 503 with `Retry-After`.
    ///
    /// ```no_run
    /// # fn run(inbox: crew_runtime::inbox::Inbox) {
    /// let inbox = inbox.max_password_checks(2);
    /// # let _ = inbox;
    /// # }
    /// ```
    pub fn max_password_checks(mut self, checks: usize) -> Self {
        self.max_password_checks = checks.max(1);
        self
    }

    /// How failed sign-ins are throttled (see [`SignInThrottle`]).
    ///
    /// ```no_run
    /// # fn run(inbox: crew_runtime::inbox::Inbox) {
    /// use crew_runtime::inbox::SignInThrottle;
    /// let inbox = inbox.sign_in_throttle(SignInThrottle::default().failures_per_address(3));
    /// # let _ = inbox;
    /// # }
    /// ```
    pub fn sign_in_throttle(mut self, throttle: SignInThrottle) -> Self {
        self.throttle = throttle;
        self
    }

    /// How long a connection of [`serve`](Inbox::serve) may take to send a
    /// request's headers, and may stay idle between requests, before it is
    /// closed (10 seconds unless set; at least 10 milliseconds).
    ///
    /// ```no_run
    /// # fn run(inbox: crew_runtime::inbox::Inbox) {
    /// let inbox = inbox.header_timeout(std::time::Duration::from_secs(5));
    /// # let _ = inbox;
    /// # }
    /// ```
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout.max(Duration::from_millis(10));
        self
    }

    /// How long the body of a state change may take to arrive before the
    /// request is refused 408 and its connection closed (30 seconds
    /// unless set; at least 10 milliseconds).
    ///
    /// ```no_run
    /// # fn run(inbox: crew_runtime::inbox::Inbox) {
    /// let inbox = inbox.body_timeout(std::time::Duration::from_secs(10));
    /// # let _ = inbox;
    /// # }
    /// ```
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout.max(Duration::from_millis(10));
        self
    }

    /// How many connections [`serve`](Inbox::serve) holds open at once
    /// (512 unless set; at least one): beyond it, new connections wait in
    /// the operating system's queue until one closes, so that slow
    /// clients cannot use up the process's file descriptors.
    ///
    /// ```no_run
    /// # fn run(inbox: crew_runtime::inbox::Inbox) {
    /// let inbox = inbox.max_connections(256);
    /// # let _ = inbox;
    /// # }
    /// ```
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
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
            hosts: auth::HostCheck::new(self.public_origin.as_deref(), &self.allowed_hosts),
            trusted_proxies: self.trusted_proxies.clone(),
            password_checks: Arc::new(Semaphore::new(self.max_password_checks)),
            throttle: self.throttle.clone(),
            body_timeout: self.body_timeout,
            #[cfg(feature = "channels")]
            slack_secret: self.slack_secret.clone(),
            #[cfg(feature = "channels")]
            slack_responses: self.slack_responses.clone(),
            #[cfg(feature = "channels")]
            link_keys: self.link_keys.clone(),
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
            .route("/events", get(pages::events));
        #[cfg(feature = "channels")]
        let browser = if self.link_keys.is_some() {
            browser.route("/links/{token}", get(links::confirm).post(links::decide))
        } else {
            browser
        };
        let browser = browser.route_layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            auth::same_origin_only,
        ));
        // Bearer tokens carry no ambient authority: no CSRF, no Origin.
        let bots = Router::new()
            .route("/api/approvals", get(api::pending))
            .route("/api/approvals/{id}", get(api::question))
            .route("/api/approvals/{id}/decision", post(api::decide));
        // Authenticated by Slack's signature (SPEC §14).
        #[cfg(feature = "channels")]
        let bots = if self.slack_secret.is_some() {
            bots.route("/slack/interactions", post(slack::interaction))
        } else {
            bots
        };
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
            .layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                auth::known_hosts_only,
            ))
            .with_state(shared)
    }

    /// Serves the inbox on `listener` until the process stops: HTTP/1.1,
    /// each connection closed when it takes longer than the
    /// [`header_timeout`](Inbox::header_timeout) to send a request's
    /// headers or stays idle that long between requests, at most
    /// [`max_connections`](Inbox::max_connections) at once, and the
    /// client's address known to the [sign-in throttle](SignInThrottle).
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> std::io::Result<()> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
    /// crew_runtime::inbox::Inbox::new(store).serve(listener).await
    /// # }
    /// ```
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        serve::serve(
            listener,
            self.router(),
            self.header_timeout,
            self.max_connections,
        )
        .await
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
    /// The `Host` names requests may use.
    pub(crate) hosts: auth::HostCheck,
    /// Where `X-Forwarded-For` is believed from.
    pub(crate) trusted_proxies: Vec<IpAddr>,
    /// One permit per password check running.
    pub(crate) password_checks: Arc<Semaphore>,
    pub(crate) throttle: SignInThrottle,
    pub(crate) body_timeout: Duration,
    /// Slack's signing secret: the Slack endpoint is served with one.
    #[cfg(feature = "channels")]
    pub(crate) slack_secret: Option<slack::SigningSecret>,
    /// Where a Slack click's `response_url` may point.
    #[cfg(feature = "channels")]
    pub(crate) slack_responses: String,
    /// The keys of signed links: links are served with them.
    #[cfg(feature = "channels")]
    pub(crate) link_keys: Option<links::LinkKeys>,
}

/// The handlers' state.
pub(crate) type State = Arc<Shared>;
