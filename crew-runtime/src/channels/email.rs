//! The e-mail channel: the question and a signed link, over SMTP, to each
//! approver with an address whose scope covers the question.

use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, SystemTime};

use futures_util::future::BoxFuture;
use lettre::message::header::ContentType;
use lettre::message::{Mailbox, Message};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

use super::{Channel, ChannelError, Delivered, Notice, cut};
use crate::inbox::LinkKeys;
use crate::store::{Question, QuestionStatus, Store};

/// How long the SMTP server has to answer each step.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The most of the arguments a message shows; the inbox shows the rest.
const ARGUMENTS_SHOWN: usize = 4_000;
/// How long one delivery sends before it records whom it sent to and
/// leaves the rest to the next (the announcer gives a delivery 30 s).
const ATTEMPT_BUDGET: Duration = Duration::from_secs(15);

/// Announces questions by e-mail over SMTP: to each approver with an
/// address ([`Store::set_approver_email`], `crew-inbox set-email`) whose
/// scope covers the question and who did not ask it, a plain-text message
/// with the tool, agent, task, redacted arguments (cut to fit), reason and
/// time left, and a [signed link](crate::inbox::LinkKeys) for that
/// approver alone: opening it shows a confirmation page in the inbox,
/// and only the confirmation decides, once, before the question's
/// deadline. An e-mail cannot be taken back: once the question is
/// answered, expires or is withdrawn, nothing more is sent, and its link
/// is dead.
///
/// The SMTP server is given as a URL: `smtp://host:port` (no TLS: a relay
/// on the same machine or network), and with the feature `tls`,
/// `smtp://host:587?tls=starttls` or `smtps://host:465`; a user and a
/// password in the URL sign in (`smtp://user:password@…`, percent-encoded),
/// refused without TLS but to a loopback address. The password never
/// shows: not in `Debug`, nor in an error.
///
/// A failed send is tried again by the [`Announcer`](super::Announcer);
/// the approvers already sent to are not sent to again.
///
/// ```
/// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::channels::ChannelError> {
/// use crew_runtime::channels::Email;
/// use crew_runtime::inbox::LinkKeys;
///
/// let keys = LinkKeys::parse("2026-12 q8vN0o3bHh3XU6mCw0d2kUeUq7SQXnGkd1r5n8E3Z1I=").expect("a key");
/// let email = Email::new(
///     store,
///     "ops-mail",
///     "smtp://approvals:s3cret@127.0.0.1:2525",
///     "Approvals <approvals@example.com>",
///     "https://approvals.example.com",
///     keys,
/// )?;
/// assert!(!format!("{email:?}").contains("s3cret"));
/// # Ok(())
/// # }
/// ```
pub struct Email {
    name: String,
    from: Mailbox,
    server: String,
    transport: AsyncSmtpTransport<Tokio1Executor>,
    store: Store,
    inbox: String,
    keys: LinkKeys,
}

impl fmt::Debug for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Email")
            .field("name", &self.name)
            .field("from", &self.from.to_string())
            .field("server", &self.server)
            .field("inbox", &self.inbox)
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

impl Email {
    /// An e-mail channel named `name`, sending through the SMTP server at
    /// `smtp` (see the type's documentation) from `from` (an address, with
    /// a display name or without), linking to the inbox served at `inbox`
    /// (its public origin) with links signed by `keys`, and finding its
    /// recipients in `store`.
    ///
    /// Errors: a malformed URL or sender, TLS asked for without the
    /// feature `tls`, a password over a connection without TLS to
    /// another machine. The error never holds the password.
    ///
    /// ```
    /// # async fn run(store: crew_runtime::store::Store, keys: crew_runtime::inbox::LinkKeys) {
    /// use crew_runtime::channels::Email;
    /// let error = Email::new(store, "mail", "smtp://me:hunter22@mail.example.com:25", "a@example.com", "https://approvals.example.com", keys)
    ///     .unwrap_err();
    /// assert!(error.to_string().contains("without TLS") && !error.to_string().contains("hunter22"));
    /// # }
    /// ```
    pub fn new(
        store: Store,
        name: &str,
        smtp: &str,
        from: &str,
        inbox: &str,
        keys: LinkKeys,
    ) -> Result<Self, ChannelError> {
        let failed = |why: String| ChannelError::new(format!("email {name}: {why}"));
        let from: Mailbox = from
            .parse()
            .map_err(|error| failed(format!("{from:?} is not a sender address: {error}")))?;
        let (transport, server) = transport(smtp).map_err(failed)?;
        let inbox = inbox.trim_end_matches('/');
        let origin = reqwest::Url::parse(inbox)
            .map_err(|error| failed(format!("bad inbox origin {inbox:?}: {error}")))?;
        if !matches!(origin.scheme(), "http" | "https") {
            return Err(failed(format!(
                "the inbox origin must be http or https, not {}",
                origin.scheme()
            )));
        }
        Ok(Email {
            name: name.to_owned(),
            from,
            server,
            transport,
            store,
            inbox: inbox.to_owned(),
            keys,
        })
    }

    async fn tell(&self, notice: &Notice) -> Result<Delivered, ChannelError> {
        let question = &notice.question;
        if question.status != QuestionStatus::Pending {
            // Sent mail stays as it is; its link died with the question.
            return Ok(Delivered::default());
        }
        // Whom this question was sent to already (their approver names).
        let mut sent: BTreeSet<String> = notice
            .reference
            .as_deref()
            .and_then(|reference| serde_json::from_str(reference).ok())
            .unwrap_or_default();
        let record = |sent: &BTreeSet<String>| serde_json::to_string(sent).unwrap_or_default();
        let recipients = self
            .store
            .email_recipients(question)
            .await
            .map_err(|error| ChannelError::new(format!("email {}: {error}", self.name)))?;
        let mut failures = Vec::new();
        let mut cut_short = false;
        let stop_at = std::time::Instant::now() + ATTEMPT_BUDGET;
        for (address, approver) in recipients {
            if sent.contains(&approver.name) {
                continue;
            }
            if std::time::Instant::now() >= stop_at {
                // Whom this attempt reached is kept; the rest go next.
                cut_short = true;
                break;
            }
            match self.send(question, &address, &approver.name).await {
                Ok(()) => {
                    sent.insert(approver.name);
                }
                Err(why) => failures.push(format!("to {}: {why}", approver.name)),
            }
        }
        if failures.is_empty() && !cut_short {
            return Ok(Delivered::default().with_reference(record(&sent)));
        }
        if failures.is_empty() {
            return Err(ChannelError::new(format!(
                "email {}: more recipients than one attempt sends; the rest next",
                self.name
            ))
            .retry_after(Duration::ZERO)
            .progress(record(&sent)));
        }
        Err(
            ChannelError::new(format!("email {}: {}", self.name, failures.join("; ")))
                .progress(record(&sent)),
        )
    }

    /// Sends `question` to `approver` at `address`, with a link for them.
    async fn send(&self, question: &Question, address: &str, approver: &str) -> Result<(), String> {
        let to: Mailbox = address
            .parse()
            .map_err(|error| format!("{address:?} is not an address: {error}"))?;
        let token = self
            .keys
            .issue(question, approver, question.deadline)
            .map_err(|error| format!("no link: {error}"))?;
        let link = format!("{}/links/{token}", self.inbox);
        let page = format!("{}/questions/{}", self.inbox, question.id);
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject(question))
            .header(ContentType::TEXT_PLAIN)
            .body(body(question, &link, &page, SystemTime::now()))
            .map_err(|error| format!("the message cannot be built: {error}"))?;
        self.transport
            .send(message)
            .await
            .map(drop)
            .map_err(|error| smtp_failed(&error))
    }
}

impl Channel for Email {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "email"
    }

    fn deliver<'a>(&'a self, notice: &'a Notice) -> BoxFuture<'a, Result<Delivered, ChannelError>> {
        Box::pin(self.tell(notice))
    }
}

/// What the SMTP server (or the way to it) said, on one line.
fn smtp_failed(error: &lettre::transport::smtp::Error) -> String {
    let kind = if error.is_permanent() {
        "refused"
    } else if error.is_transient() {
        "refused for now"
    } else if error.is_timeout() {
        "no answer in time"
    } else {
        "failed"
    };
    let text = format!("{kind}: {}", crate::http_client::error_chain(error));
    crate::console::escape_control(&text).into_owned()
}

/// The transport for `url`, and the server as it may be shown (no user,
/// no password).
fn transport(url: &str) -> Result<(AsyncSmtpTransport<Tokio1Executor>, String), String> {
    // Not the URL's text in an error: it may hold the password.
    let parsed =
        reqwest::Url::parse(url).map_err(|error| format!("the SMTP URL is malformed ({error})"))?;
    let host = parsed
        .host_str()
        .filter(|host| !host.is_empty())
        .ok_or("the SMTP URL names no host")?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let tls = match (
        parsed.scheme(),
        parsed.query_pairs().find(|(k, _)| k == "tls"),
    ) {
        ("smtp", None) => Tls::Plain,
        ("smtp", Some((_, mode))) if mode == "starttls" => Tls::Upgrade,
        ("smtps", None) => Tls::Wrapper,
        ("smtp" | "smtps", Some((_, mode))) => {
            return Err(format!(
                "tls={mode} is not a TLS mode here: give smtp://…?tls=starttls or smtps://…"
            ));
        }
        (scheme, _) => {
            return Err(format!(
                "the SMTP URL must be smtp:// or smtps://, not {scheme}://"
            ));
        }
    };
    let credentials = if parsed.username().is_empty() {
        None
    } else {
        let decode = |text: &str| {
            percent_encoding::percent_decode_str(text)
                .decode_utf8()
                .map(|text| text.into_owned())
                .map_err(|_| "the SMTP URL's user or password is not UTF-8".to_owned())
        };
        let user = decode(parsed.username())?;
        let password = decode(parsed.password().unwrap_or_default())?;
        Some(Credentials::new(user, password))
    };
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if credentials.is_some() && tls == Tls::Plain && !loopback {
        return Err(format!(
            "a password would go to {host} without TLS: give smtp://…?tls=starttls or smtps://…"
        ));
    }
    let builder = match tls {
        Tls::Plain => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&host)
            .port(parsed.port().unwrap_or(25)),
        Tls::Upgrade | Tls::Wrapper => tls_builder(&host, tls, parsed.port())?,
    };
    let builder = builder.timeout(Some(TIMEOUT));
    let builder = match credentials {
        Some(credentials) => builder.credentials(credentials),
        None => builder,
    };
    let port = parsed
        .port()
        .map(|port| format!(":{port}"))
        .unwrap_or_default();
    let shown = format!("{}://{host}{port}", parsed.scheme());
    Ok((builder.build(), shown))
}

/// How the connection to the SMTP server is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tls {
    Plain,
    Upgrade,
    Wrapper,
}

#[cfg(feature = "tls")]
fn tls_builder(
    host: &str,
    tls: Tls,
    port: Option<u16>,
) -> Result<lettre::transport::smtp::AsyncSmtpTransportBuilder, String> {
    let builder = match tls {
        Tls::Wrapper => AsyncSmtpTransport::<Tokio1Executor>::relay(host),
        _ => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(host),
    }
    .map_err(|error| format!("TLS to {host}: {error}"))?;
    Ok(match port {
        Some(port) => builder.port(port),
        None => builder,
    })
}

#[cfg(not(feature = "tls"))]
fn tls_builder(
    host: &str,
    _tls: Tls,
    _port: Option<u16>,
) -> Result<lettre::transport::smtp::AsyncSmtpTransportBuilder, String> {
    Err(format!("TLS to {host} needs crew-runtime's feature `tls`"))
}

/// Text from the run on one line, without control characters.
fn line(text: &str) -> String {
    crate::console::escape_control(text).into_owned()
}

/// The subject: what is asked, of which tool.
fn subject(question: &Question) -> String {
    cut(&format!("Approval asked: {}", line(&question.tool)), 120)
}

/// The message's text.
fn body(question: &Question, link: &str, page: &str, now: SystemTime) -> String {
    let mut text = String::from("A call waits for your approval.\n\n");
    let prompt = question.prompt.lines().next().unwrap_or_default();
    if !prompt.trim().is_empty() {
        text.push_str(&format!("{}\n\n", line(prompt)));
    }
    text.push_str(&format!("Tool:      {}\n", line(&question.tool)));
    for (label, value) in [
        ("Agent:    ", &question.agent),
        ("Task:     ", &question.task),
        ("Crew:     ", &question.crew),
        ("Asked by: ", &question.requester),
        ("Reason:   ", &question.reason),
    ] {
        if let Some(value) = value {
            text.push_str(&format!("{label} {}\n", line(value)));
        }
    }
    let left = question.time_left(now).as_secs().div_ceil(60);
    text.push_str(&format!("Time left: {left} min\n\n"));
    text.push_str("Arguments (as the crew shows them, secrets redacted):\n");
    let arguments = serde_json::to_string_pretty(&question.arguments).unwrap_or_default();
    let shown = cut(&arguments, ARGUMENTS_SHOWN);
    for arguments_line in shown.lines() {
        text.push_str(&format!("    {}\n", line(arguments_line)));
    }
    if shown.len() < arguments.len() {
        text.push_str("    (cut: the whole call is in the inbox)\n");
    }
    text.push_str(&format!(
        "\nTo decide, open your link. It asks you to confirm, decides once, \
         for you only, and dies with the question:\n{link}\n\n\
         The question in the inbox:\n{page}\n"
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::transport;

    #[test]
    fn a_password_never_goes_in_the_clear_to_another_machine() {
        let error = transport("smtp://me:hunter22@mail.example.com").expect_err("in the clear");
        assert!(error.contains("without TLS"), "{error}");
        assert!(!error.contains("hunter22"));
        assert!(transport("smtp://me:hunter22@127.0.0.1:2525").is_ok());
        assert!(transport("smtp://mail.example.com").is_ok());
    }

    #[test]
    fn the_server_is_shown_without_its_password() {
        let (_, shown) = transport("smtp://me:hunter22@127.0.0.1:2525").expect("a transport");
        assert_eq!(shown, "smtp://127.0.0.1:2525");
    }

    #[test]
    fn malformed_urls_are_refused_without_their_text() {
        for url in [
            "http://mail.example.com",
            "smtp://",
            "smtp://mail.example.com?tls=maybe",
            "not a url hunter22",
        ] {
            let error = transport(url).expect_err(url);
            assert!(!error.contains("hunter22"), "{error}");
        }
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn tls_needs_the_feature() {
        let error = transport("smtps://mail.example.com").expect_err("no TLS here");
        assert!(error.contains("`tls`"), "{error}");
    }
}
