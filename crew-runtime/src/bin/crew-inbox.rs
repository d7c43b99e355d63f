//! `crew-inbox`: serves the approval inbox and manages its approvers.
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
//! command line, where other users of the machine could see it.

use std::io::BufRead as _;
use std::process::ExitCode;
use std::time::Duration;

use crew_runtime::Capability;
use crew_runtime::inbox::Inbox;
use crew_runtime::store::{ApproverScope, Credential, Store, Which};

const USAGE: &str = "\
crew-inbox: the approval inbox of a crew's approvals store

USAGE:
  crew-inbox serve --store URL [--listen ADDRESS] [--public-origin URL] [--secure-cookies]
                   [--allowed-host NAME]... [--trusted-proxy ADDRESS]...
                   [--max-password-checks N] [--max-connections N]
  crew-inbox add-approver --store URL NAME [--tools a,b] [--capabilities c,d] [--no-password]
  crew-inbox sign-in-token --store URL NAME [--ttl-minutes N]
  crew-inbox api-token --store URL NAME
  crew-inbox set-password --store URL NAME
  crew-inbox disable --store URL NAME
  crew-inbox enable --store URL NAME
  crew-inbox sessions --store URL NAME
  crew-inbox end-session --store URL NAME (ID-PREFIX | --all)
  crew-inbox tokens --store URL NAME
  crew-inbox revoke-token --store URL NAME (ID-PREFIX | --all)

  --store URL          sqlite://PATH or postgres://USER@HOST/DATABASE
                       (or the environment variable CREW_INBOX_STORE)
  --listen ADDRESS     where to serve (default 127.0.0.1:8080)
  --public-origin URL  the origin approvers' browsers use, e.g.
                       https://approvals.example.com (behind a proxy)
  --secure-cookies     mark cookies Secure: set it when served over TLS
  --allowed-host NAME  a host name (or NAME:PORT) requests may name in
                       their Host header besides localhost, 127.0.0.0/8
                       and [::1]; others are refused 421 (repeatable)
  --trusted-proxy ADDRESS
                       the IP address of a reverse proxy in front of the
                       inbox: only from it is X-Forwarded-For (or
                       Forwarded) believed, for the sign-in throttle
                       (repeatable)
  --max-password-checks N
                       password checks running at once, each holding
                       about 19 MiB (default: the number of cores)
  --max-connections N  connections held open at once (default 512)
  --tools a,b          the approver answers only calls of these tools
  --capabilities c,d   only calls of tools declaring one of these:
                       read_only, destructive, idempotent, open_world
  --no-password        no password: the approver signs in with one-time
                       tokens only (otherwise one line is read from stdin)
  --ttl-minutes N      how long a sign-in token is valid (default 15)
  --all                every session or bearer token of the approver

Sign-in is throttled per account and per client address, in the store
(shared by every replica): 5 failures from one address, or 20 for one
account, within an hour, then each further failure refuses that address
or account for 1 second, doubling up to 15 minutes. A one-time sign-in
token lets a locked-out approver in (only its address's lock holds it).
A connection that takes 10 seconds to send its headers, or sits idle
that long, is closed.

sign-in-token and api-token print the token on standard output.

set-password reads the new password as one line on standard input. A new
password, disable, end-session and revoke-token end access at once, on
every replica: a new password or disable ends all the approver's sessions
(and their open live streams) and revokes all their bearer tokens;
enable lets a disabled approver sign in again (with new sessions only).
sessions and tokens list when each was opened or issued (and when a
session expires) with a short id (never the secret) to give end-session
or revoke-token; a prefix of at least 4 characters picks one.";

/// What went wrong, and whether it was the command line (exit 2) or the
/// work (exit 1).
enum Failure {
    Usage(String),
    Failed(String),
}

#[tokio::main]
async fn main() -> ExitCode {
    // Another subscriber may be set already (never here); then it logs.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .try_init();
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    match run(arguments).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("crew-inbox: {message} (see `crew-inbox help`)");
            ExitCode::from(2)
        }
        Err(Failure::Failed(message)) => {
            eprintln!("crew-inbox: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The options and names of a command line.
#[derive(Default)]
struct Parsed {
    store: Option<String>,
    listen: Option<String>,
    public_origin: Option<String>,
    secure_cookies: bool,
    tools: Option<String>,
    capabilities: Option<String>,
    no_password: bool,
    ttl_minutes: Option<String>,
    allowed_hosts: Vec<String>,
    trusted_proxies: Vec<String>,
    max_password_checks: Option<String>,
    max_connections: Option<String>,
    all: bool,
    names: Vec<String>,
}

/// Reads `arguments` (after the command), taking only the options in
/// `allowed`.
fn parse(arguments: &[String], allowed: &[&str]) -> Result<Parsed, Failure> {
    let mut parsed = Parsed::default();
    let mut rest = arguments.iter();
    while let Some(argument) = rest.next() {
        let (option, inline) = match argument.split_once('=') {
            Some((option, value)) if option.starts_with("--") => (option, Some(value.to_owned())),
            _ => (argument.as_str(), None),
        };
        if !option.starts_with("--") {
            parsed.names.push(argument.clone());
            continue;
        }
        if !allowed.contains(&option) {
            return Err(Failure::Usage(format!(
                "unknown option {option} for this command"
            )));
        }
        let mut value = || -> Result<String, Failure> {
            match inline.clone().or_else(|| rest.next().cloned()) {
                Some(value) => Ok(value),
                None => Err(Failure::Usage(format!("{option} needs a value"))),
            }
        };
        match option {
            "--store" => parsed.store = Some(value()?),
            "--listen" => parsed.listen = Some(value()?),
            "--public-origin" => parsed.public_origin = Some(value()?),
            "--tools" => parsed.tools = Some(value()?),
            "--capabilities" => parsed.capabilities = Some(value()?),
            "--ttl-minutes" => parsed.ttl_minutes = Some(value()?),
            "--allowed-host" => parsed.allowed_hosts.push(value()?),
            "--trusted-proxy" => parsed.trusted_proxies.push(value()?),
            "--max-password-checks" => parsed.max_password_checks = Some(value()?),
            "--max-connections" => parsed.max_connections = Some(value()?),
            "--secure-cookies" => parsed.secure_cookies = true,
            "--no-password" => parsed.no_password = true,
            "--all" => parsed.all = true,
            _ => return Err(Failure::Usage(format!("unknown option {option}"))),
        }
    }
    Ok(parsed)
}

impl Parsed {
    /// The store URL, from `--store` or `CREW_INBOX_STORE`.
    fn store_url(&self) -> Result<String, Failure> {
        self.store
            .clone()
            .or_else(|| std::env::var("CREW_INBOX_STORE").ok())
            .filter(|url| !url.is_empty())
            .ok_or_else(|| {
                Failure::Usage(
                    "which store? give --store sqlite://PATH or postgres://… (or set CREW_INBOX_STORE)"
                        .into(),
                )
            })
    }

    /// The one approver name the command takes.
    fn name(&self) -> Result<&str, Failure> {
        match self.names.as_slice() {
            [name] => Ok(name),
            [] => Err(Failure::Usage("give the approver's name".into())),
            more => Err(Failure::Usage(format!(
                "give one approver name, not {} ({})",
                more.len(),
                more.join(" ")
            ))),
        }
    }

    /// The approver's name and which of their sessions or tokens: one
    /// short id prefix, or `--all`.
    fn name_and_which(&self) -> Result<(&str, Which), Failure> {
        match (self.names.as_slice(), self.all) {
            ([name], true) => Ok((name, Which::All)),
            ([name, prefix], false) => Ok((name, Which::Prefix(prefix.clone()))),
            ([_], false) => Err(Failure::Usage(
                "give the id (a prefix of at least 4 characters, as listed) or --all".into(),
            )),
            ([], _) => Err(Failure::Usage("give the approver's name".into())),
            (_, true) => Err(Failure::Usage(
                "give either an id or --all, not both".into(),
            )),
            (more, false) => Err(Failure::Usage(format!(
                "give the approver's name and one id, not {} arguments",
                more.len()
            ))),
        }
    }

    /// Refuses names where the command takes none.
    fn no_names(&self) -> Result<(), Failure> {
        match self.names.first() {
            Some(extra) => Err(Failure::Usage(format!("unexpected argument {extra:?}"))),
            None => Ok(()),
        }
    }
}

async fn run(arguments: Vec<String>) -> Result<(), Failure> {
    let Some((command, rest)) = arguments.split_first() else {
        eprintln!("{USAGE}");
        return Err(Failure::Usage("give a command".into()));
    };
    match command.as_str() {
        "serve" => {
            let parsed = parse(
                rest,
                &[
                    "--store",
                    "--listen",
                    "--public-origin",
                    "--secure-cookies",
                    "--allowed-host",
                    "--trusted-proxy",
                    "--max-password-checks",
                    "--max-connections",
                ],
            )?;
            parsed.no_names()?;
            serve(&parsed).await
        }
        "add-approver" => {
            let parsed = parse(
                rest,
                &["--store", "--tools", "--capabilities", "--no-password"],
            )?;
            add_approver(&parsed).await
        }
        "sign-in-token" => {
            let parsed = parse(rest, &["--store", "--ttl-minutes"])?;
            let minutes = match parsed.ttl_minutes.as_deref() {
                None => 15,
                Some(text) => text
                    .parse::<u64>()
                    .ok()
                    .filter(|minutes| (1..=60 * 24 * 30).contains(minutes))
                    .ok_or_else(|| {
                        Failure::Usage(format!(
                            "--ttl-minutes takes a whole number of minutes from 1 to 43200, not {text:?}"
                        ))
                    })?,
            };
            let store = open(&parsed).await?;
            let token = store
                .issue_sign_in_token(parsed.name()?, Duration::from_secs(minutes * 60))
                .await
                .map_err(|error| Failure::Failed(error.to_string()))?;
            println!("{token}");
            eprintln!(
                "crew-inbox: a one-time sign-in token for {}, valid for {minutes} minutes",
                parsed.name()?
            );
            Ok(())
        }
        "api-token" => {
            let parsed = parse(rest, &["--store"])?;
            let store = open(&parsed).await?;
            let token = store
                .issue_api_token(parsed.name()?)
                .await
                .map_err(|error| Failure::Failed(error.to_string()))?;
            println!("{token}");
            eprintln!(
                "crew-inbox: a bearer token for {} (send it as `Authorization: Bearer <token>`)",
                parsed.name()?
            );
            Ok(())
        }
        "set-password" => {
            let parsed = parse(rest, &["--store"])?;
            let name = parsed.name()?.to_owned();
            let password = read_password(&name)?;
            let store = open(&parsed).await?;
            store
                .set_password(&name, Some(&password))
                .await
                .map_err(failed)?;
            eprintln!(
                "crew-inbox: the password of {name} is changed; their sessions and bearer tokens are ended"
            );
            Ok(())
        }
        "disable" | "enable" => {
            let parsed = parse(rest, &["--store"])?;
            let name = parsed.name()?;
            let store = open(&parsed).await?;
            if command == "disable" {
                store.disable_approver(name).await.map_err(failed)?;
                eprintln!(
                    "crew-inbox: {name} is disabled; their sessions and bearer tokens are ended"
                );
            } else {
                store.enable_approver(name).await.map_err(failed)?;
                eprintln!("crew-inbox: {name} may sign in again");
            }
            Ok(())
        }
        "sessions" | "tokens" => {
            let parsed = parse(rest, &["--store"])?;
            let name = parsed.name()?;
            let store = open(&parsed).await?;
            let listed = if command == "sessions" {
                store.sessions(name).await
            } else {
                store.api_tokens(name).await
            }
            .map_err(failed)?;
            print_credentials(&listed);
            eprintln!("crew-inbox: {} open {command} of {name}", listed.len());
            Ok(())
        }
        "end-session" => {
            let parsed = parse(rest, &["--store", "--all"])?;
            let (name, which) = parsed.name_and_which()?;
            let store = open(&parsed).await?;
            let ended = store.end_sessions(name, &which).await.map_err(failed)?;
            if ended == 0 && which != Which::All {
                return Err(Failure::Failed(format!(
                    "no open session of {name} has this id (see `crew-inbox sessions {name}`)"
                )));
            }
            eprintln!("crew-inbox: ended {ended} sessions of {name}");
            Ok(())
        }
        "revoke-token" => {
            let parsed = parse(rest, &["--store", "--all"])?;
            let (name, which) = parsed.name_and_which()?;
            let store = open(&parsed).await?;
            let revoked = store.revoke_api_token(name, &which).await.map_err(failed)?;
            if revoked == 0 && which != Which::All {
                return Err(Failure::Failed(format!(
                    "no bearer token of {name} has this id (see `crew-inbox tokens {name}`)"
                )));
            }
            eprintln!("crew-inbox: revoked {revoked} bearer tokens of {name}");
            Ok(())
        }
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(Failure::Usage(format!("unknown command {other:?}"))),
    }
}

fn failed(error: crew_runtime::store::StoreError) -> Failure {
    Failure::Failed(error.to_string())
}

/// One line per session or token: its short id, when it was opened or
/// issued, and when it expires.
fn print_credentials(listed: &[Credential]) {
    for credential in listed {
        let expires = credential
            .expires_at
            .map_or_else(|| "until revoked".to_owned(), rfc3339);
        println!(
            "{}  created {}  expires {expires}",
            credential.id,
            rfc3339(credential.created_at)
        );
    }
}

/// A time as RFC 3339 in UTC, to the second.
fn rfc3339(time: std::time::SystemTime) -> String {
    crew_runtime::inbox::rfc3339(time)
}

async fn open(parsed: &Parsed) -> Result<Store, Failure> {
    Store::connect(&parsed.store_url()?)
        .await
        .map_err(|error| Failure::Failed(error.to_string()))
}

async fn serve(parsed: &Parsed) -> Result<(), Failure> {
    let address = parsed.listen.as_deref().unwrap_or("127.0.0.1:8080");
    let origin = parsed
        .public_origin
        .as_deref()
        .map(check_origin)
        .transpose()?;
    let proxies = parsed
        .trusted_proxies
        .iter()
        .map(|text| {
            text.trim().parse::<std::net::IpAddr>().map_err(|_| {
                Failure::Usage(format!(
                    "--trusted-proxy takes an IP address such as 10.0.0.2 or ::1, not {text:?}"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let count = |option: &str, text: Option<&str>| -> Result<Option<usize>, Failure> {
        text.map(|text| {
            text.parse::<usize>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    Failure::Usage(format!(
                        "{option} takes a whole number from 1, not {text:?}"
                    ))
                })
        })
        .transpose()
    };
    let checks = count(
        "--max-password-checks",
        parsed.max_password_checks.as_deref(),
    )?;
    let connections = count("--max-connections", parsed.max_connections.as_deref())?;
    let store = open(parsed).await?;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|error| Failure::Failed(format!("cannot listen on {address}: {error}")))?;
    let bound = listener
        .local_addr()
        .map_or_else(|_| address.to_owned(), |bound| bound.to_string());
    let mut inbox = Inbox::new(store.clone())
        .secure_cookies(parsed.secure_cookies)
        .allowed_hosts(&parsed.allowed_hosts)
        .trusted_proxies(proxies);
    if let Some(checks) = checks {
        inbox = inbox.max_password_checks(checks);
    }
    if let Some(connections) = connections {
        inbox = inbox.max_connections(connections);
    }
    if let Some(origin) = &origin {
        inbox = inbox.public_origin(origin.clone());
    }
    eprintln!(
        "crew-inbox: serving the approvals of {} on http://{bound}{}",
        store.url(),
        origin
            .map(|origin| format!(" (public origin {origin})"))
            .unwrap_or_default()
    );
    inbox
        .serve(listener)
        .await
        .map_err(|error| Failure::Failed(format!("the server stopped: {error}")))
}

/// An origin: `http://` or `https://`, a host and maybe a port, nothing
/// after (an origin with a path would match no browser's `Origin`).
fn check_origin(origin: &str) -> Result<String, Failure> {
    let trimmed = origin.trim_end_matches('/');
    let host = trimmed
        .strip_prefix("https://")
        .or_else(|| trimmed.strip_prefix("http://"));
    match host {
        Some(host) if !host.is_empty() && !host.contains(['/', '?', '#', '@', ' ']) => {
            Ok(trimmed.to_owned())
        }
        _ => Err(Failure::Usage(format!(
            "--public-origin must be like https://approvals.example.com (a scheme and a host, maybe a port, no path), not {origin:?}"
        ))),
    }
}

async fn add_approver(parsed: &Parsed) -> Result<(), Failure> {
    let name = parsed.name()?.to_owned();
    let mut scope = ApproverScope::everything();
    if let Some(tools) = &parsed.tools {
        let tools = list(tools);
        if tools.is_empty() {
            return Err(Failure::Usage("--tools names no tool".into()));
        }
        scope = scope.tools(tools);
    }
    if let Some(capabilities) = &parsed.capabilities {
        let names = list(capabilities);
        if names.is_empty() {
            return Err(Failure::Usage("--capabilities names no capability".into()));
        }
        let capabilities = names
            .iter()
            .map(|name| {
                Capability::from_name(name).ok_or_else(|| {
                    Failure::Usage(format!(
                        "unknown capability {name:?}: use read_only, destructive, idempotent or open_world"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        scope = scope.capabilities(capabilities);
    }
    let password = if parsed.no_password {
        None
    } else {
        Some(read_password(&name)?)
    };
    let store = open(parsed).await?;
    let approver = store
        .add_approver(&name, password.as_deref(), scope)
        .await
        .map_err(|error| Failure::Failed(error.to_string()))?;
    eprintln!(
        "crew-inbox: added the approver {}, who may answer {}",
        approver.name,
        approver.scope_description()
    );
    Ok(())
}

/// Comma-separated names, trimmed, empty ones dropped.
fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// One line of standard input, without its line ending.
fn read_password(name: &str) -> Result<String, Failure> {
    eprintln!("crew-inbox: the password of {name}, one line on standard input:");
    let mut line = String::new();
    let read = std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|error| Failure::Failed(format!("cannot read the password: {error}")))?;
    if read == 0 {
        return Err(Failure::Failed(
            "no password on standard input (give --no-password for an account that signs in with tokens only)".into(),
        ));
    }
    let password = line.trim_end_matches(['\n', '\r']).to_owned();
    if password.is_empty() {
        return Err(Failure::Failed("the password is empty".into()));
    }
    Ok(password)
}
