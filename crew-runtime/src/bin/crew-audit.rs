//! `crew-audit`: checks and reads the audit trail of a crew's store.
//!
//! ```text
//! crew-audit verify STORE-URL [--trail NAME] [--expect COUNT:HASH]
//! crew-audit head STORE-URL [--trail NAME]
//! crew-audit tail STORE-URL [--trail NAME] [-n N]
//! crew-audit export STORE-URL [--trail NAME] --format jsonl
//! ```
//!
//! `verify` exits 0 on an intact trail and 1 naming the first record that
//! was changed, removed, inserted or reordered, or stored at sequence 0 or
//! below, or whose stored text is not the canonical text that was hashed;
//! 1 too for a store that is not there, a store or trail name without
//! records; 2 on a bad command line.
//!
//! Every command opens the store read-only ([`Store::open_read_only`]): it
//! never creates a store nor migrates one, and reads a read-only copy.
//! `head`, `tail` and `export` leave out records stored at sequence 0 or
//! below (no part of a trail), name them on standard error and exit 1.

use std::io::Write;
use std::process::ExitCode;

use crew_runtime::audit::{self, AuditError, Head};
use crew_runtime::store::Store;

const USAGE: &str = "\
crew-audit: check and read the audit trail of a crew's store

USAGE:
  crew-audit verify STORE-URL [--trail NAME] [--expect COUNT:HASH]
  crew-audit head STORE-URL [--trail NAME]
  crew-audit tail STORE-URL [--trail NAME] [-n N]
  crew-audit export STORE-URL [--trail NAME] --format jsonl

  STORE-URL            sqlite://PATH or postgres://USER@HOST/DATABASE,
                       opened read-only: never created, never migrated
  --trail NAME         one trail (default: every trail of the store)
  --expect COUNT:HASH  a head kept elsewhere (what `head` printed): the
                       trail must reach it. Without it, verify cannot see
                       records cut from the end nor a chain rewritten whole.
  -n N                 how many records tail prints (default 20)";

/// A bad command line (exit 2) or a failure of the work (exit 1).
enum Failure {
    Usage(String),
    Failed(String),
}

impl From<AuditError> for Failure {
    fn from(error: AuditError) -> Self {
        Failure::Failed(error.to_string())
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    match run(&arguments).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("crew-audit: {message}\n\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Failure::Failed(message)) => {
            eprintln!("crew-audit: {message}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Default)]
struct Parsed {
    url: Option<String>,
    trail: Option<String>,
    expect: Option<Head>,
    count: Option<usize>,
    format: Option<String>,
}

fn parse(arguments: &[String]) -> Result<Parsed, Failure> {
    let mut parsed = Parsed::default();
    let mut rest = arguments.iter();
    while let Some(argument) = rest.next() {
        let mut value = || {
            rest.next()
                .cloned()
                .ok_or_else(|| Failure::Usage(format!("{argument} needs a value")))
        };
        match argument.as_str() {
            "--trail" => parsed.trail = Some(value()?),
            "--expect" => {
                parsed.expect = Some(
                    value()?
                        .parse()
                        .map_err(|error: AuditError| Failure::Usage(error.to_string()))?,
                )
            }
            "-n" => {
                let count = value()?;
                parsed.count =
                    Some(count.parse().map_err(|_| {
                        Failure::Usage(format!("-n needs a number, not {count:?}"))
                    })?);
            }
            "--format" => parsed.format = Some(value()?),
            other if other.starts_with('-') => {
                return Err(Failure::Usage(format!("unknown option {other}")));
            }
            url if parsed.url.is_none() => parsed.url = Some(url.to_owned()),
            extra => return Err(Failure::Usage(format!("unexpected argument {extra:?}"))),
        }
    }
    Ok(parsed)
}

async fn run(arguments: &[String]) -> Result<(), Failure> {
    let Some((command, rest)) = arguments.split_first() else {
        return Err(Failure::Usage("name a command".into()));
    };
    if matches!(command.as_str(), "help" | "--help" | "-h") {
        println!("{USAGE}");
        return Ok(());
    }
    if !matches!(command.as_str(), "verify" | "head" | "tail" | "export") {
        return Err(Failure::Usage(format!("unknown command {command:?}")));
    }
    let parsed = parse(rest)?;
    if command == "export" {
        match parsed.format.as_deref() {
            Some("jsonl") => {}
            Some(other) => {
                return Err(Failure::Usage(format!(
                    "unknown format {other:?}: use --format jsonl"
                )));
            }
            None => return Err(Failure::Usage("export needs --format jsonl".into())),
        }
    }
    let url = parsed
        .url
        .as_deref()
        .ok_or_else(|| Failure::Usage("name the store: sqlite://PATH or postgres://…".into()))?;
    // Read-only: a mistyped path is refused, never created; nothing is
    // migrated; a read-only copy of a store reads as well as the store.
    let store = Store::open_read_only(url)
        .await
        .map_err(|error| Failure::Failed(error.to_string()))?;
    let trails = match &parsed.trail {
        Some(trail) => vec![trail.clone()],
        None => audit::trails(&store).await?,
    };
    if trails.is_empty() {
        return Err(Failure::Failed(format!(
            "the store at {} holds no audit trail: nothing was recorded to it, or its records and heads were deleted",
            store.url()
        )));
    }
    if parsed.expect.is_some() && parsed.trail.is_none() && trails.len() != 1 {
        return Err(Failure::Usage(format!(
            "--expect needs --trail: the store has {} trails",
            trails.len()
        )));
    }
    if command == "verify" {
        for trail in &trails {
            let verified = audit::verify(&store, trail, parsed.expect.as_ref()).await?;
            println!(
                "trail {trail}: {} records intact, head {}",
                verified.head.count, verified.head
            );
            if !verified.clock_went_back_at.is_empty() {
                println!(
                    "trail {trail}: note: the clock went back at records {:?} (the chain's order is its sequence)",
                    verified.clock_went_back_at
                );
            }
        }
        return Ok(());
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    // Records stored at sequence 0 or below are no part of a trail: never
    // shown as if they were, but named (and the exit status says so).
    let mut outside = Vec::new();
    for trail in &trails {
        let stray = audit::outside_the_chain(&store, trail).await?;
        match audit::require_records(&store, trail).await {
            // A trail of nothing but such records: nothing to show.
            Err(_) if !stray.is_empty() => {}
            Err(error) => return Err(error.into()),
            Ok(()) => show(command, &store, trail, &parsed, &mut out).await?,
        }
        if !stray.is_empty() {
            outside.push(outside_the_chain(trail, &stray));
        }
    }
    out.flush()
        .map_err(|error| Failure::Failed(format!("writing failed: {error}")))?;
    if outside.is_empty() {
        Ok(())
    } else {
        Err(Failure::Failed(outside.join("\ncrew-audit: ")))
    }
}

/// What `head`, `tail` or `export` shows of `trail`.
async fn show(
    command: &str,
    store: &Store,
    trail: &str,
    parsed: &Parsed,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let written = |error: std::io::Error| Failure::Failed(format!("writing failed: {error}"));
    match command {
        "head" => {
            let head = audit::head(store, trail).await?;
            if parsed.trail.is_some() {
                writeln!(out, "{head}").map_err(written)?;
            } else {
                writeln!(out, "{trail} {head}").map_err(written)?;
            }
        }
        "tail" => {
            for record in audit::tail(store, trail, parsed.count.unwrap_or(20)).await? {
                writeln!(
                    out,
                    "{} #{} {} {} {}",
                    record.trail,
                    record.seq,
                    httpdate_ms(record.at),
                    record.kind,
                    record.data
                )
                .map_err(written)?;
            }
        }
        "export" => {
            audit::export(store, trail, out).await?;
        }
        other => return Err(Failure::Usage(format!("unknown command {other:?}"))),
    }
    Ok(())
}

/// Names the records of `trail` stored outside its chain (at `stray`).
fn outside_the_chain(trail: &str, stray: &[i64]) -> String {
    let seqs: Vec<String> = stray.iter().map(i64::to_string).collect();
    // `outside_the_chain` names ten at most.
    let more = if stray.len() >= 10 { ", …" } else { "" };
    format!(
        "trail {trail} holds records stored at sequence {}{more}, outside its chain: no writer puts a record at 0 or below, so they were not shown; `crew-audit verify` refuses the trail",
        seqs.join(", ")
    )
}

/// A record's time, readable.
fn httpdate_ms(at: i64) -> String {
    let time =
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(at).unwrap_or(0));
    httpdate::fmt_http_date(time)
}
