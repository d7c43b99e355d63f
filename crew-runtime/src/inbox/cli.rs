//! The `crew-inbox` command line, as library functions: serves the
//! approval inbox and manages its approvers.
//!
//! ```text
//! crew-inbox serve --store URL [--listen 127.0.0.1:8080] [--public-origin URL] [--secure-cookies]
//!                  [--allowed-host NAME]... [--trusted-proxy ADDRESS]... [--max-password-checks N]
//!                  [--max-connections N]
//! crew-inbox add-approver --store URL NAME [--tools a,b] [--capabilities destructive,open_world] [--no-password]
//! crew-inbox sign-in-token --store URL NAME [--ttl-minutes 15]
//! crew-inbox api-token --store URL NAME
//! crew-inbox set-password --store URL NAME
//! crew-inbox disable --store URL NAME
//! crew-inbox enable --store URL NAME
//! crew-inbox sessions --store URL NAME
//! crew-inbox end-session --store URL NAME (ID-PREFIX | --all)
//! crew-inbox tokens --store URL NAME
//! crew-inbox revoke-token --store URL NAME (ID-PREFIX | --all)
//! ```
//!
//! A password is read from standard input (one line), never from the
//! command line, where other users of the machine could see it. The store
//! is `--store` or else the environment variable `CREW_INBOX_STORE`.
//!
//! Exit status: 0 when the command did its work, 1 when it failed (the
//! store, a name that does not exist, no password on standard input), 2
//! on a bad command line (an unknown command or option, a missing name or
//! store, a value out of range: the parser's usage errors). `--help` (and
//! `help COMMAND`) print the usage on standard output and exit 0.
//!
//! An application ships the command as a binary of its own, built with its
//! own profile and the dependencies it has already built
//! (`src/bin/crew-inbox.rs`):
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     crew_runtime::inbox::cli::main()
//! }
//! ```

use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::net::IpAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::Capability;
use crate::command_line;
use crate::inbox::Inbox;
use crate::store::{ApproverScope, Credential, Store, StoreError, Which};

/// crew-inbox: the approval inbox of a crew's approvals store.
#[derive(Debug, Parser)]
#[command(
    name = "crew-inbox",
    arg_required_else_help = true,
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `crew-inbox --help` says after the commands.
const AFTER_HELP: &str = "\
Passwords are read as one line on standard input, never from the command line.

Sign-in is throttled per account and per client address, in the store
(shared by every replica): 5 failures from one address, or 20 for one
account, within an hour, then each further failure refuses that address
or account for 1 second, doubling up to 15 minutes. A one-time sign-in
token lets a locked-out approver in (only its address's lock holds it).
A connection that takes 10 seconds to send its headers, or sits idle
that long, is closed.

A new password, disable, end-session and revoke-token end access at once,
on every replica: a new password or disable ends all the approver's
sessions (and their open live streams) and revokes all their bearer
tokens; enable lets a disabled approver sign in again (with new sessions
only).

Exit status: 0 when done; 1 when the work failed; 2 on a bad command line.";

/// What `crew-inbox` does.
#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the inbox: approvers sign in and answer the store's questions
    Serve(Box<Serve>),
    /// Add an approver; their password is one line on standard input
    AddApprover(AddApprover),
    /// Print a one-time sign-in token for an approver
    SignInToken {
        #[command(flatten)]
        approver: Approver,
        /// How many minutes the token is valid, from 1 to 43200
        #[arg(long, value_name = "N", default_value_t = 15, value_parser = ttl_minutes)]
        ttl_minutes: u64,
    },
    /// Print a bearer token for an approver's bots (the JSON API)
    ApiToken(Approver),
    /// Set an approver's password (one line on standard input); ends their sessions and tokens
    SetPassword(Approver),
    /// Disable an approver; ends their sessions and tokens
    Disable(Approver),
    /// Let a disabled approver sign in again
    Enable(Approver),
    /// List an approver's open sessions: short id, opened, expires (never the secret)
    Sessions(Approver),
    /// End one session of an approver (by its short id) or all of them
    EndSession(Pick),
    /// List an approver's bearer tokens: short id, issued (never the secret)
    Tokens(Approver),
    /// Revoke one bearer token of an approver (by its short id) or all of them
    RevokeToken(Pick),
    /// Link a Slack user to an approver: their clicks decide as the approver, who gets the questions in their scope
    #[cfg(feature = "channels")]
    LinkSlack {
        #[command(flatten)]
        approver: Approver,
        /// The Slack workspace's id (T…)
        #[arg(value_name = "TEAM-ID")]
        team: String,
        /// The user's id in it (U… or W…)
        #[arg(value_name = "USER-ID")]
        user: String,
    },
    /// Print a signed link deciding one question for one approver (the inbox serves it with --link-keys)
    #[cfg(feature = "channels")]
    Link {
        #[command(flatten)]
        approver: Approver,
        /// The question's id
        #[arg(value_name = "QUESTION-ID")]
        question: String,
        /// The file of link keys (one per line: its id and the key in base64); the first signs
        #[arg(long, value_name = "PATH")]
        link_keys: String,
        /// How many minutes the link is valid (never past the question's deadline), from 1 to 43200
        #[arg(long, value_name = "N", default_value_t = 60, value_parser = ttl_minutes)]
        ttl_minutes: u64,
        /// The inbox's public origin, e.g. https://approvals.example.com
        #[arg(long, value_name = "URL", value_parser = origin)]
        public_origin: String,
    },
    /// Revoke a link key: every link it signed is dead at once, on every replica
    #[cfg(feature = "channels")]
    RevokeKey {
        #[command(flatten)]
        store: StoreOption,
        /// The key's id, as in the file of link keys
        #[arg(value_name = "KEY-ID")]
        key: String,
    },
    /// End every signed link issued to an approver until now
    #[cfg(feature = "channels")]
    EndLinks(Approver),
    /// Let an approver's signed links decide without a sign-in (on), or not (off, the default)
    #[cfg(feature = "channels")]
    OneClickLinks {
        #[command(flatten)]
        approver: Approver,
        /// on or off
        #[arg(value_name = "on|off", value_parser = ["on", "off"])]
        setting: String,
    },
    /// Set the e-mail address an approver gets the questions in their scope at, each with a signed link
    #[cfg(feature = "channels")]
    SetEmail {
        #[command(flatten)]
        approver: Approver,
        /// The address, like alice@example.com
        #[arg(value_name = "ADDRESS", required_unless_present = "none")]
        address: Option<String>,
        /// Remove the approver's address: no more e-mail
        #[arg(long, conflicts_with = "address")]
        none: bool,
    },
    /// Unlink a Slack user: their clicks decide nothing
    #[cfg(feature = "channels")]
    UnlinkSlack {
        #[command(flatten)]
        store: StoreOption,
        /// The Slack workspace's id (T…)
        #[arg(value_name = "TEAM-ID")]
        team: String,
        /// The user's id in it (U… or W…)
        #[arg(value_name = "USER-ID")]
        user: String,
    },
}

/// Where the approvers and questions are.
#[derive(Debug, Args)]
struct StoreOption {
    /// sqlite://PATH or postgres://USER@HOST/DATABASE (default: $CREW_INBOX_STORE)
    #[arg(long, value_name = "URL")]
    store: Option<String>,
}

/// A command about one approver.
#[derive(Debug, Args)]
struct Approver {
    #[command(flatten)]
    store: StoreOption,
    /// The approver's name
    #[arg(value_name = "NAME")]
    name: String,
}

/// One of an approver's sessions or tokens, or all of them.
#[derive(Debug, Args)]
struct Pick {
    #[command(flatten)]
    approver: Approver,
    /// The short id as listed (a prefix of at least 4 characters)
    #[arg(value_name = "ID-PREFIX", required_unless_present = "all")]
    id: Option<String>,
    /// Every session or bearer token of the approver
    #[arg(long, conflicts_with = "id")]
    all: bool,
}

/// `crew-inbox serve`.
#[derive(Debug, Args)]
struct Serve {
    #[command(flatten)]
    store: StoreOption,
    /// Where to serve
    #[arg(long, value_name = "ADDRESS", default_value = "127.0.0.1:8080")]
    listen: String,
    /// The origin approvers' browsers use behind a proxy, e.g. https://approvals.example.com
    #[arg(long, value_name = "URL", value_parser = origin)]
    public_origin: Option<String>,
    /// Mark cookies Secure: set it when served over TLS
    #[arg(long)]
    secure_cookies: bool,
    /// A host (or HOST:PORT) the Host header may name besides loopback; others get 421 (repeatable)
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// A reverse proxy's IP address: only its X-Forwarded-For is believed (repeatable)
    #[arg(long = "trusted-proxy", value_name = "ADDRESS", value_parser = ip_address)]
    trusted_proxies: Vec<IpAddr>,
    /// Password checks at once, about 19 MiB each [default: the number of cores]
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    max_password_checks: Option<usize>,
    /// Connections held open at once [default: 512]
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    max_connections: Option<usize>,
    /// Announce every question to a webhook, signed the Standard Webhooks way (repeatable); its secret is named by --webhook-secret-file
    #[cfg(feature = "channels")]
    #[arg(long = "webhook", value_name = "NAME=URL", value_parser = named)]
    webhooks: Vec<(String, String)>,
    /// The file holding a webhook's signing secret (whsec_…), one per --webhook
    #[cfg(feature = "channels")]
    #[arg(long = "webhook-secret-file", value_name = "NAME=PATH", value_parser = named)]
    webhook_secrets: Vec<(String, String)>,
    /// Send every question to the linked approvers of a Slack workspace by direct message (repeatable); its bot token is named by --slack-token-file
    #[cfg(feature = "channels")]
    #[arg(long = "slack", value_name = "NAME=TEAM-ID", value_parser = named)]
    slacks: Vec<(String, String)>,
    /// The file holding a Slack channel's bot token (xoxb-…), one per --slack
    #[cfg(feature = "channels")]
    #[arg(long = "slack-token-file", value_name = "NAME=PATH", value_parser = named)]
    slack_tokens: Vec<(String, String)>,
    /// Send every question by e-mail, from this sender, to the approvers with an address whose scope covers it, each with a signed link (repeatable; needs --link-keys and --public-origin); its SMTP server is named by --smtp-url-file
    #[cfg(feature = "channels")]
    #[arg(long = "email", value_name = "NAME=FROM", value_parser = named)]
    emails: Vec<(String, String)>,
    /// The file holding an e-mail channel's SMTP server as a URL (smtp://host:port, smtp://user:password@host:587?tls=starttls, smtps://host), one per --email
    #[cfg(feature = "channels")]
    #[arg(long = "smtp-url-file", value_name = "NAME=PATH", value_parser = named)]
    smtp_urls: Vec<(String, String)>,
    /// The file holding the Slack app's signing secret: serves POST /slack/interactions, where its buttons' clicks decide
    #[cfg(feature = "channels")]
    #[arg(long, value_name = "PATH")]
    slack_signing_secret_file: Option<String>,
    /// Slack's Web API base [default: https://slack.com/api/], e.g. an egress proxy
    #[cfg(feature = "channels")]
    #[arg(long, value_name = "URL")]
    slack_api_base: Option<String>,
    /// The file of link keys (one per line: its id and the key in base64): serves signed links at /links/TOKEN
    #[cfg(feature = "channels")]
    #[arg(long, value_name = "PATH")]
    link_keys: Option<String>,
}

/// `--webhook`, `--webhook-secret-file`: `NAME=VALUE`, the name a word of
/// letters, digits, `-` and `_`.
#[cfg(feature = "channels")]
fn named(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| "give NAME=VALUE".to_owned())?;
    let word = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !word || value.is_empty() {
        return Err("give NAME=VALUE, the name of letters, digits, - and _".to_owned());
    }
    Ok((name.to_owned(), value.to_owned()))
}

/// `crew-inbox add-approver`.
#[derive(Debug, Args)]
struct AddApprover {
    #[command(flatten)]
    approver: Approver,
    /// Answer only calls of these tools (comma-separated)
    #[arg(long, value_name = "a,b", value_parser = tool_list)]
    tools: Option<ToolList>,
    /// Answer only calls of tools declaring one of: read_only, destructive, idempotent, open_world
    #[arg(long, value_name = "c,d", value_parser = capability_list)]
    capabilities: Option<CapabilityList>,
    /// No password: the approver signs in with one-time tokens only
    #[arg(long)]
    no_password: bool,
}

/// The tools of `--tools`.
#[derive(Debug, Clone)]
struct ToolList(Vec<String>);

/// The capabilities of `--capabilities`.
#[derive(Debug, Clone)]
struct CapabilityList(Vec<Capability>);

/// Why a command failed (exit 1), or a bad command line (exit 2).
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// A bad command line, rendered by the parser with the usage.
    #[error("{}", .0.render())]
    Usage(Box<clap::Error>),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no open session of {0} has this id (see `crew-inbox sessions {0}`)")]
    NoSuchSession(String),
    #[error("no bearer token of {0} has this id (see `crew-inbox tokens {0}`)")]
    NoSuchToken(String),
    #[error("cannot read the password: {0}")]
    ReadPassword(std::io::Error),
    #[error(
        "no password on standard input (give --no-password for an account that signs in with tokens only)"
    )]
    NoPassword,
    #[error("the password is empty")]
    EmptyPassword,
    #[error("cannot listen on {address}: {error}")]
    Listen {
        address: String,
        error: std::io::Error,
    },
    #[error("the server stopped: {0}")]
    Stopped(std::io::Error),
    #[error("writing failed: {0}")]
    Write(std::io::Error),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error(
        "crew-inbox runs its own async runtime: call it outside one (from a thread of your own, not from async code)"
    )]
    InsideARuntime,
    /// A channel that cannot be set up (its text never holds a secret).
    #[cfg(feature = "channels")]
    #[error("{0}")]
    Channel(String),
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        Failure::Write(error)
    }
}

/// Runs `crew-inbox` with the process's arguments, standard input, output
/// and error, its log (a failing store, …) on standard error: all a
/// binary's `main` needs.
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     crew_runtime::inbox::cli::main()
/// }
/// ```
pub fn main() -> ExitCode {
    // Another subscriber may be set already (by the program); then it logs.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .try_init();
    run(std::env::args_os())
}

/// Runs `crew-inbox` with `args` (the first is the program's name, as in
/// [`std::env::args_os`]) on the process's standard input, output and
/// error. Unlike [`main`], it sets up no log: that is the program's.
///
/// Call it outside an async runtime: it builds its own.
///
/// ```
/// use std::process::ExitCode;
///
/// // A bad command line is exit 2, as in the binary.
/// assert_eq!(crew_runtime::inbox::cli::run(["crew-inbox", "frobnicate"]), ExitCode::from(2));
/// ```
pub fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    run_with(
        args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr(),
    )
}

/// Runs `crew-inbox` with `args` (the first is the program's name),
/// reading a password from `input`, writing what it prints (tokens, lists)
/// to `out` and its messages to `err`: for tests and for programs that
/// embed the command.
///
/// Returns the exit status: 0 when the command did its work, 1 when it
/// failed, 2 on a bad command line. The help goes to `out` with status 0.
/// Call it outside an async runtime: it builds its own.
///
/// ```
/// use std::process::ExitCode;
///
/// let (mut out, mut err) = (Vec::new(), Vec::new());
/// let status = crew_runtime::inbox::cli::run_with(
///     ["crew-inbox", "add-approver", "--help"],
///     &mut std::io::empty(),
///     &mut out,
///     &mut err,
/// );
/// assert_eq!(status, ExitCode::SUCCESS);
/// assert!(String::from_utf8_lossy(&out).contains("--no-password"));
/// ```
pub fn run_with<I, T>(
    args: I,
    input: &mut impl BufRead,
    out: &mut impl Write,
    err: &mut impl Write,
) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => return command_line::parse_failure(&reword(error), out, err),
    };
    let mut streams = Streams { input, out, err };
    match execute(cli.command, &mut streams) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(error)) => command_line::parse_failure(&error, out, err),
        Err(failure) => {
            // Nothing more can be said if standard error is gone.
            let _ = writeln!(err, "crew-inbox: {failure}");
            ExitCode::FAILURE
        }
    }
}

/// The parser's error in the words `crew-inbox` has always used for an
/// unknown command, and what to give for a missing id.
fn reword(error: clap::Error) -> clap::Error {
    command_line::tip_when_missing(
        command_line::reword_unknown_command(error, Cli::command()),
        "ID-PREFIX",
        "give the id (a prefix of at least 4 characters, as listed) or --all",
    )
}

/// Where a command reads and writes.
struct Streams<'a, R, O, E> {
    input: &'a mut R,
    out: &'a mut O,
    err: &'a mut E,
}

/// Runs `command` on a runtime of its own.
fn execute<R: BufRead, O: Write, E: Write>(
    command: Command,
    streams: &mut Streams<'_, R, O, E>,
) -> Result<(), Failure> {
    // `block_on` inside a runtime would panic: say what to do instead.
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Failure::InsideARuntime);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Failure::Runtime)?;
    runtime.block_on(dispatch(command, streams))
}

async fn dispatch<R: BufRead, O: Write, E: Write>(
    command: Command,
    streams: &mut Streams<'_, R, O, E>,
) -> Result<(), Failure> {
    let err = &mut *streams.err;
    let out = &mut *streams.out;
    match command {
        Command::Serve(serve) => run_serve(&serve, err).await,
        Command::AddApprover(add) => add_approver(&add, streams).await,
        Command::SignInToken {
            approver,
            ttl_minutes,
        } => {
            let store = open(&approver.store, "sign-in-token").await?;
            let token = store
                .issue_sign_in_token(&approver.name, Duration::from_secs(ttl_minutes * 60))
                .await?;
            writeln!(out, "{token}")?;
            out.flush()?;
            writeln!(
                err,
                "crew-inbox: a one-time sign-in token for {}, valid for {ttl_minutes} minutes",
                approver.name
            )?;
            Ok(())
        }
        #[cfg(feature = "channels")]
        Command::LinkSlack {
            approver,
            team,
            user,
        } => {
            let store = open(&approver.store, "link-slack").await?;
            let identity = crate::store::SlackIdentity::new(team, user);
            store.link_slack(&approver.name, &identity).await?;
            writeln!(
                err,
                "crew-inbox: the Slack user {identity} decides as {} from now on",
                approver.name
            )?;
            Ok(())
        }
        #[cfg(feature = "channels")]
        Command::Link {
            approver,
            question,
            link_keys,
            ttl_minutes,
            public_origin,
        } => {
            let keys = read_link_keys(&link_keys)?;
            let store = open(&approver.store, "link").await?;
            let Some(question) = store.question(&question).await? else {
                return Err(Failure::Channel(format!(
                    "no question has the id {question}"
                )));
            };
            let expiry = std::time::SystemTime::now() + Duration::from_secs(ttl_minutes * 60);
            let token = keys
                .issue(&question, &approver.name, expiry)
                .map_err(Failure::Channel)?;
            writeln!(out, "{public_origin}/links/{token}")?;
            out.flush()?;
            writeln!(
                err,
                "crew-inbox: a link deciding {} for {}, valid for {ttl_minutes} minutes at most",
                question.id, approver.name
            )?;
            Ok(())
        }
        #[cfg(feature = "channels")]
        Command::RevokeKey { store, key } => {
            open(&store, "revoke-key")
                .await?
                .revoke_link_key(&key)
                .await?;
            writeln!(
                err,
                "crew-inbox: the links signed with the key {key} are dead"
            )?;
            Ok(())
        }
        #[cfg(feature = "channels")]
        Command::EndLinks(approver) => {
            let name = &approver.name;
            open(&approver.store, "end-links")
                .await?
                .end_links(name)
                .await?;
            writeln!(
                err,
                "crew-inbox: the links issued to {name} until now are dead"
            )?;
            Ok(())
        }
        #[cfg(feature = "channels")]
        Command::OneClickLinks { approver, setting } => {
            let name = &approver.name;
            let on = setting == "on";
            open(&approver.store, "one-click-links")
                .await?
                .set_one_click_links(name, on)
                .await?;
            let what = if on {
                "decide without a sign-in"
            } else {
                "ask them to sign in"
            };
            writeln!(err, "crew-inbox: the links of {name} {what}")?;
            Ok(())
        }
        #[cfg(feature = "channels")]
        Command::SetEmail {
            approver,
            address,
            none: _,
        } => {
            let name = &approver.name;
            open(&approver.store, "set-email")
                .await?
                .set_approver_email(name, address.as_deref())
                .await?;
            match address {
                Some(address) => writeln!(
                    err,
                    "crew-inbox: {name} gets the questions in their scope at {address}"
                )?,
                None => writeln!(err, "crew-inbox: {name} gets no more e-mail")?,
            }
            Ok(())
        }
        #[cfg(feature = "channels")]
        Command::UnlinkSlack { store, team, user } => {
            let store = open(&store, "unlink-slack").await?;
            let identity = crate::store::SlackIdentity::new(team, user);
            if store.unlink_slack(&identity).await? {
                writeln!(
                    err,
                    "crew-inbox: the Slack user {identity} decides nothing now"
                )?;
            } else {
                writeln!(err, "crew-inbox: the Slack user {identity} was not linked")?;
            }
            Ok(())
        }
        Command::ApiToken(approver) => {
            let store = open(&approver.store, "api-token").await?;
            let token = store.issue_api_token(&approver.name).await?;
            writeln!(out, "{token}")?;
            out.flush()?;
            writeln!(
                err,
                "crew-inbox: a bearer token for {} (send it as `Authorization: Bearer <token>`)",
                approver.name
            )?;
            Ok(())
        }
        Command::SetPassword(approver) => {
            let name = &approver.name;
            let password = read_password(name, streams.input, err)?;
            let store = open(&approver.store, "set-password").await?;
            store.set_password(name, Some(&password)).await?;
            writeln!(
                err,
                "crew-inbox: the password of {name} is changed; their sessions and bearer tokens are ended"
            )?;
            Ok(())
        }
        Command::Disable(approver) => {
            let name = &approver.name;
            open(&approver.store, "disable")
                .await?
                .disable_approver(name)
                .await?;
            writeln!(
                err,
                "crew-inbox: {name} is disabled; their sessions and bearer tokens are ended"
            )?;
            Ok(())
        }
        Command::Enable(approver) => {
            let name = &approver.name;
            open(&approver.store, "enable")
                .await?
                .enable_approver(name)
                .await?;
            writeln!(err, "crew-inbox: {name} may sign in again")?;
            Ok(())
        }
        Command::Sessions(approver) => {
            let name = &approver.name;
            let listed = open(&approver.store, "sessions")
                .await?
                .sessions(name)
                .await?;
            print_credentials(&listed, out)?;
            writeln!(err, "crew-inbox: {} open sessions of {name}", listed.len())?;
            Ok(())
        }
        Command::Tokens(approver) => {
            let name = &approver.name;
            let listed = open(&approver.store, "tokens")
                .await?
                .api_tokens(name)
                .await?;
            print_credentials(&listed, out)?;
            writeln!(err, "crew-inbox: {} open tokens of {name}", listed.len())?;
            Ok(())
        }
        Command::EndSession(pick) => {
            let name = &pick.approver.name;
            let which = pick.which();
            let store = open(&pick.approver.store, "end-session").await?;
            let ended = store.end_sessions(name, &which).await?;
            if ended == 0 && which != Which::All {
                return Err(Failure::NoSuchSession(name.clone()));
            }
            writeln!(err, "crew-inbox: ended {ended} sessions of {name}")?;
            Ok(())
        }
        Command::RevokeToken(pick) => {
            let name = &pick.approver.name;
            let which = pick.which();
            let store = open(&pick.approver.store, "revoke-token").await?;
            let revoked = store.revoke_api_token(name, &which).await?;
            if revoked == 0 && which != Which::All {
                return Err(Failure::NoSuchToken(name.clone()));
            }
            writeln!(err, "crew-inbox: revoked {revoked} bearer tokens of {name}")?;
            Ok(())
        }
    }
}

impl Pick {
    /// Which sessions or tokens: the parser has made sure of one id or
    /// `--all`.
    fn which(&self) -> Which {
        match (&self.id, self.all) {
            (Some(prefix), false) => Which::Prefix(prefix.clone()),
            _ => Which::All,
        }
    }
}

/// One line per session or token: its short id, when it was opened or
/// issued, and when it expires.
fn print_credentials(listed: &[Credential], out: &mut impl Write) -> Result<(), Failure> {
    for credential in listed {
        let expires = credential
            .expires_at
            .map_or_else(|| "until revoked".to_owned(), crate::inbox::rfc3339);
        writeln!(
            out,
            "{}  created {}  expires {expires}",
            credential.id,
            crate::inbox::rfc3339(credential.created_at)
        )?;
    }
    out.flush()?;
    Ok(())
}

/// Connects to the store of `--store` or `CREW_INBOX_STORE`, for
/// `command`.
async fn open(option: &StoreOption, command: &str) -> Result<Store, Failure> {
    let url = option
        .store
        .clone()
        .or_else(|| std::env::var("CREW_INBOX_STORE").ok())
        .filter(|url| !url.is_empty())
        .ok_or_else(|| {
            Failure::Usage(Box::new(command_line::usage_error(
                &Cli::command(),
                command,
                ErrorKind::MissingRequiredArgument,
                "which store? give --store sqlite://PATH or postgres://… (or set CREW_INBOX_STORE)",
            )))
        })?;
    Ok(Store::connect(&url).await?)
}

async fn run_serve(serve: &Serve, err: &mut impl Write) -> Result<(), Failure> {
    let address = serve.listen.as_str();
    let store = open(&serve.store, "serve").await?;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|error| Failure::Listen {
            address: address.to_owned(),
            error,
        })?;
    let bound = listener
        .local_addr()
        .map_or_else(|_| address.to_owned(), |bound| bound.to_string());
    let mut inbox = Inbox::new(store.clone())
        .secure_cookies(serve.secure_cookies)
        .allowed_hosts(&serve.allowed_hosts)
        .trusted_proxies(serve.trusted_proxies.clone());
    if let Some(checks) = serve.max_password_checks {
        inbox = inbox.max_password_checks(checks);
    }
    if let Some(connections) = serve.max_connections {
        inbox = inbox.max_connections(connections);
    }
    if let Some(origin) = &serve.public_origin {
        inbox = inbox.public_origin(origin.clone());
    }
    #[cfg(feature = "channels")]
    if let Some(path) = &serve.link_keys {
        inbox = inbox.link_keys(read_link_keys(path)?);
    }
    #[cfg(feature = "channels")]
    if let Some(path) = &serve.slack_signing_secret_file {
        let secret = read_secret("the Slack signing secret", path)?;
        inbox = inbox.slack_signing_secret(&secret);
    }
    #[cfg(feature = "channels")]
    if let Some(announcer) = announcer(serve, &store)? {
        announcer.register().await?;
        tokio::spawn(announcer.run(std::future::pending()));
    }
    writeln!(
        err,
        "crew-inbox: serving the approvals of {} on http://{bound}{}",
        store.url(),
        serve
            .public_origin
            .as_ref()
            .map(|origin| format!(" (public origin {origin})"))
            .unwrap_or_default()
    )?;
    // Whoever started the inbox waits for this line to know where it is.
    err.flush()?;
    inbox.serve(listener).await.map_err(Failure::Stopped)
}

/// The announcer of `serve`'s webhooks, if it names any: each with the
/// secret of its `--webhook-secret-file`, linking to the inbox at its
/// public origin.
#[cfg(feature = "channels")]
fn announcer(
    serve: &Serve,
    store: &crate::store::Store,
) -> Result<Option<crate::channels::Announcer>, Failure> {
    use crate::channels::{Announcer, Email, Slack, Webhook};
    if serve.webhooks.is_empty()
        && serve.webhook_secrets.is_empty()
        && serve.slacks.is_empty()
        && serve.slack_tokens.is_empty()
        && serve.emails.is_empty()
        && serve.smtp_urls.is_empty()
    {
        return Ok(None);
    }
    let channel = |error: crate::channels::ChannelError| Failure::Channel(error.to_string());
    let mut announcer = Announcer::new(store.clone());
    for (name, url) in &serve.webhooks {
        let path = secret_of(name, &serve.webhook_secrets, "--webhook-secret-file")?;
        let secret = read_secret(&format!("the secret of the webhook {name}"), path)?;
        let mut webhook = Webhook::new(name, url, &secret).map_err(channel)?;
        if let Some(origin) = &serve.public_origin {
            webhook = webhook.inbox(origin);
        }
        announcer = announcer.channel(webhook);
    }
    for (name, team) in &serve.slacks {
        let path = secret_of(name, &serve.slack_tokens, "--slack-token-file")?;
        let token = read_secret(&format!("the bot token of the Slack channel {name}"), path)?;
        let mut slack = Slack::new(store.clone(), name, team, &token).map_err(channel)?;
        if let Some(base) = &serve.slack_api_base {
            slack = slack.api_base(base).map_err(channel)?;
        }
        if let Some(origin) = &serve.public_origin {
            slack = slack.inbox(origin);
        }
        announcer = announcer.channel(slack);
    }
    for (name, from) in &serve.emails {
        let path = secret_of(name, &serve.smtp_urls, "--smtp-url-file")?;
        let smtp = read_secret(
            &format!("the SMTP server of the e-mail channel {name}"),
            path,
        )?;
        let (Some(keys), Some(origin)) = (&serve.link_keys, &serve.public_origin) else {
            return Err(Failure::Channel(format!(
                "the e-mail channel {name} sends signed links: give --link-keys and --public-origin"
            )));
        };
        let email = Email::new(
            store.clone(),
            name,
            &smtp,
            from,
            origin,
            read_link_keys(keys)?,
        )
        .map_err(channel)?;
        announcer = announcer.channel(email);
    }
    for (option, named, secrets) in [
        (
            "--webhook-secret-file",
            &serve.webhooks,
            &serve.webhook_secrets,
        ),
        ("--slack-token-file", &serve.slacks, &serve.slack_tokens),
        ("--smtp-url-file", &serve.emails, &serve.smtp_urls),
    ] {
        if let Some((name, _)) = secrets
            .iter()
            .find(|(name, _)| !named.iter().any(|(of, _)| of == name))
        {
            return Err(Failure::Channel(format!(
                "{option} names {name}, which no channel of that kind names"
            )));
        }
    }
    Ok(Some(announcer))
}

/// The link keys in the file at `path`.
#[cfg(feature = "channels")]
fn read_link_keys(path: &str) -> Result<crate::inbox::LinkKeys, Failure> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        Failure::Channel(format!("cannot read the link keys from {path}: {error}"))
    })?;
    crate::inbox::LinkKeys::parse(&text)
        .map_err(|error| Failure::Channel(format!("the link keys in {path}: {error}")))
}

/// The path `secrets` (of `option`) gives for channel `name`.
#[cfg(feature = "channels")]
fn secret_of<'a>(
    name: &str,
    secrets: &'a [(String, String)],
    option: &str,
) -> Result<&'a str, Failure> {
    secrets
        .iter()
        .find(|(of, _)| of == name)
        .map(|(_, path)| path.as_str())
        .ok_or_else(|| {
            Failure::Channel(format!(
                "the channel {name} has no secret: give {option} {name}=PATH"
            ))
        })
}

/// The secret in the file at `path`, trimmed; the error names `what` and
/// the path, never the content.
#[cfg(feature = "channels")]
fn read_secret(what: &str, path: &str) -> Result<String, Failure> {
    std::fs::read_to_string(path)
        .map(|secret| secret.trim().to_owned())
        .map_err(|error| Failure::Channel(format!("cannot read {what} from {path}: {error}")))
}

async fn add_approver<R: BufRead, O: Write, E: Write>(
    add: &AddApprover,
    streams: &mut Streams<'_, R, O, E>,
) -> Result<(), Failure> {
    let name = &add.approver.name;
    let mut scope = ApproverScope::everything();
    if let Some(ToolList(tools)) = &add.tools {
        scope = scope.tools(tools.clone());
    }
    if let Some(CapabilityList(capabilities)) = &add.capabilities {
        scope = scope.capabilities(capabilities.clone());
    }
    let password = if add.no_password {
        None
    } else {
        Some(read_password(name, streams.input, streams.err)?)
    };
    let store = open(&add.approver.store, "add-approver").await?;
    let approver = store.add_approver(name, password.as_deref(), scope).await?;
    writeln!(
        streams.err,
        "crew-inbox: added the approver {}, who may answer {}",
        approver.name,
        approver.scope_description()
    )?;
    Ok(())
}

/// One line of `input`, without its line ending.
fn read_password(
    name: &str,
    input: &mut impl BufRead,
    err: &mut impl Write,
) -> Result<String, Failure> {
    writeln!(
        err,
        "crew-inbox: the password of {name}, one line on standard input:"
    )?;
    let mut line = String::new();
    let read = input.read_line(&mut line).map_err(Failure::ReadPassword)?;
    if read == 0 {
        return Err(Failure::NoPassword);
    }
    let password = line.trim_end_matches(['\n', '\r']).to_owned();
    if password.is_empty() {
        return Err(Failure::EmptyPassword);
    }
    Ok(password)
}

/// `--ttl-minutes`: whole minutes, at most 30 days.
fn ttl_minutes(text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .ok()
        .filter(|minutes| (1..=60 * 24 * 30).contains(minutes))
        .ok_or_else(|| "give a whole number of minutes from 1 to 43200".to_owned())
}

/// `--max-password-checks`, `--max-connections`: a count from 1.
fn at_least_one(text: &str) -> Result<usize, String> {
    text.parse::<usize>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| "give a whole number from 1".to_owned())
}

/// `--trusted-proxy`: an IP address, no port, no name.
fn ip_address(text: &str) -> Result<IpAddr, String> {
    text.trim()
        .parse::<IpAddr>()
        .map_err(|_| "give an IP address such as 10.0.0.2 or ::1".to_owned())
}

/// `--public-origin`: `http://` or `https://`, a host and maybe a port,
/// nothing after (an origin with a path would match no browser's
/// `Origin`).
fn origin(origin: &str) -> Result<String, String> {
    let trimmed = origin.trim_end_matches('/');
    let host = trimmed
        .strip_prefix("https://")
        .or_else(|| trimmed.strip_prefix("http://"));
    match host {
        Some(host) if !host.is_empty() && !host.contains(['/', '?', '#', '@', ' ']) => {
            Ok(trimmed.to_owned())
        }
        _ => Err(
            "write it like https://approvals.example.com (a scheme and a host, maybe a port, no path)"
                .to_owned(),
        ),
    }
}

/// Comma-separated names, trimmed, empty ones dropped.
fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `--tools`: at least one tool name.
fn tool_list(text: &str) -> Result<ToolList, String> {
    let tools = list(text);
    if tools.is_empty() {
        return Err("--tools names no tool".to_owned());
    }
    Ok(ToolList(tools))
}

/// `--capabilities`: at least one capability, each known.
fn capability_list(text: &str) -> Result<CapabilityList, String> {
    let names = list(text);
    if names.is_empty() {
        return Err("--capabilities names no capability".to_owned());
    }
    names
        .iter()
        .map(|name| {
            Capability::from_name(name).ok_or_else(|| {
                format!(
                    "unknown capability {name:?}: use read_only, destructive, idempotent or open_world"
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(CapabilityList)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `crew-inbox ARGS` in process with `input` on its standard
    /// input: its status, output and messages.
    fn crew_inbox(args: &[&str], input: &str) -> (ExitCode, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let status = run_with(
            std::iter::once("crew-inbox").chain(args.iter().copied()),
            &mut input.as_bytes(),
            &mut out,
            &mut err,
        );
        (
            status,
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
        )
    }

    #[test]
    fn cli_definition_is_consistent() {
        // clap's own check of the derive: names, groups, conflicts.
        Cli::command().debug_assert();
    }

    #[test]
    fn cli_help_of_every_command_names_its_options() {
        let approver = vec!["--store <URL>", "<NAME>"];
        let pick = vec!["--store <URL>", "<NAME>", "[ID-PREFIX]", "--all"];
        for (command, options) in [
            (
                "serve",
                vec![
                    "--store <URL>",
                    "--listen <ADDRESS>",
                    "--public-origin <URL>",
                    "--secure-cookies",
                    "--allowed-host <NAME>",
                    "--trusted-proxy <ADDRESS>",
                    "--max-password-checks <N>",
                    "--max-connections <N>",
                ],
            ),
            (
                "add-approver",
                vec![
                    "--store <URL>",
                    "<NAME>",
                    "--tools <a,b>",
                    "--capabilities <c,d>",
                    "--no-password",
                ],
            ),
            (
                "sign-in-token",
                vec!["--store <URL>", "<NAME>", "--ttl-minutes <N>"],
            ),
            ("api-token", approver.clone()),
            ("set-password", approver.clone()),
            ("disable", approver.clone()),
            ("enable", approver.clone()),
            ("sessions", approver.clone()),
            ("tokens", approver.clone()),
            ("end-session", pick.clone()),
            ("revoke-token", pick.clone()),
        ] {
            for args in [vec![command, "--help"], vec!["help", command]] {
                let (status, out, err) = crew_inbox(&args, "");
                assert_eq!(status, ExitCode::SUCCESS, "{args:?}: {err}");
                assert!(err.is_empty(), "{args:?}: {err}");
                for option in &options {
                    assert!(out.contains(option), "{args:?} lacks {option}:\n{out}");
                }
            }
            // Listed in the whole command's help too.
            let (_, out, _) = crew_inbox(&["--help"], "");
            assert!(out.contains(command), "--help lacks {command}:\n{out}");
        }
    }

    #[test]
    fn cli_usage_errors_exit_2_and_name_the_mistake() {
        for (args, said) in [
            (vec![], "Usage: crew-inbox <COMMAND>"),
            (vec!["frobnicate"], "unknown command \"frobnicate\""),
            (vec!["add-aprover", "x"], "did you mean `add-approver`?"),
            (vec!["add-approver", "--store", "sqlite://x.db"], "<NAME>"),
            (
                vec!["add-approver", "--store", "sqlite://x.db", "a", "b"],
                "'b'",
            ),
            (
                vec!["add-approver", "--store", "sqlite://x.db", "a", "--bogus"],
                "--bogus",
            ),
            (vec!["add-approver", "--store"], "--store <URL>"),
            (
                vec![
                    "add-approver",
                    "--store=sqlite://x.db",
                    "a",
                    "--tools",
                    " , ",
                ],
                "names no tool",
            ),
            (
                vec![
                    "add-approver",
                    "--store=sqlite://x.db",
                    "a",
                    "--capabilities",
                    "fast",
                ],
                "unknown capability \"fast\"",
            ),
            (
                vec![
                    "sign-in-token",
                    "--store=sqlite://x.db",
                    "a",
                    "--ttl-minutes",
                    "0",
                ],
                "from 1 to 43200",
            ),
            (
                vec![
                    "sign-in-token",
                    "--store=sqlite://x.db",
                    "a",
                    "--ttl-minutes",
                    "43201",
                ],
                "from 1 to 43200",
            ),
            (
                vec!["end-session", "--store=sqlite://x.db", "a"],
                "or --all",
            ),
            (
                vec!["end-session", "--store=sqlite://x.db", "a", "3f9a", "--all"],
                "--all",
            ),
            (
                vec!["revoke-token", "--store=sqlite://x.db", "a"],
                "<ID-PREFIX>",
            ),
            (vec!["serve", "--store=sqlite://x.db", "extra"], "'extra'"),
            (
                vec![
                    "serve",
                    "--store=sqlite://x.db",
                    "--public-origin",
                    "https://a.example/path",
                ],
                "no path",
            ),
            (
                vec![
                    "serve",
                    "--store=sqlite://x.db",
                    "--trusted-proxy",
                    "proxy.local",
                ],
                "IP address",
            ),
            (
                vec!["serve", "--store=sqlite://x.db", "--max-connections", "0"],
                "from 1",
            ),
            (
                vec![
                    "serve",
                    "--store=sqlite://x.db",
                    "--max-password-checks",
                    "many",
                ],
                "from 1",
            ),
            (
                vec!["disable", "--store=sqlite://x.db", "a", "--all"],
                "--all",
            ),
            // A password never comes from the command line.
            (
                vec![
                    "set-password",
                    "--store=sqlite://x.db",
                    "a",
                    "--password",
                    "hunter2",
                ],
                "--password",
            ),
        ] {
            let (status, out, err) = crew_inbox(&args, "");
            assert_eq!(status, ExitCode::from(2), "{args:?}: {err}");
            assert!(out.is_empty(), "{args:?}: {out}");
            assert!(err.contains(said), "{args:?} does not say {said:?}:\n{err}");
        }
    }

    #[test]
    fn cli_inside_an_async_runtime_is_an_error_not_a_panic() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let (status, _, err) = runtime
            .block_on(async { crew_inbox(&["tokens", "--store", "sqlite://x.db", "a"], "") });
        assert_eq!(status, ExitCode::FAILURE);
        assert!(err.contains("outside one"), "{err}");
    }
}
