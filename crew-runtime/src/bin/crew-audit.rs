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
//! was changed, removed, inserted or reordered; 2 on a bad command line.

use std::io::Write as _;
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

  STORE-URL            sqlite://PATH or postgres://USER@HOST/DATABASE
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
    let store = Store::connect(url)
        .await
        .map_err(|error| Failure::Failed(error.to_string()))?;
    let trails = match &parsed.trail {
        Some(trail) => vec![trail.clone()],
        None => audit::trails(&store).await?,
    };
    if parsed.expect.is_some() && parsed.trail.is_none() && trails.len() != 1 {
        return Err(Failure::Usage(format!(
            "--expect needs --trail: the store has {} trails",
            trails.len()
        )));
    }
    match command.as_str() {
        "verify" => {
            if trails.is_empty() {
                println!("no audit records in {}", store.url());
                return match &parsed.expect {
                    Some(expect) if expect.count > 0 => Err(Failure::Failed(format!(
                        "the store has no records, the expected head is {expect}: records were cut"
                    ))),
                    _ => Ok(()),
                };
            }
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
            Ok(())
        }
        "head" => {
            for trail in &trails {
                let head = audit::head(&store, trail).await?;
                if parsed.trail.is_some() {
                    println!("{head}");
                } else {
                    println!("{trail} {head}");
                }
            }
            Ok(())
        }
        "tail" => {
            for trail in &trails {
                for record in audit::tail(&store, trail, parsed.count.unwrap_or(20)).await? {
                    println!(
                        "{} #{} {} {} {}",
                        record.trail,
                        record.seq,
                        httpdate_ms(record.at),
                        record.kind,
                        record.data
                    );
                }
            }
            Ok(())
        }
        "export" => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            for trail in &trails {
                audit::export(&store, trail, &mut out)
                    .await
                    .map_err(|error| Failure::Failed(error.to_string()))?;
            }
            out.flush()
                .map_err(|error| Failure::Failed(format!("writing failed: {error}")))?;
            Ok(())
        }
        other => Err(Failure::Usage(format!("unknown command {other:?}"))),
    }
}

/// A record's time, readable.
fn httpdate_ms(at: i64) -> String {
    let time =
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(at).unwrap_or(0));
    httpdate::fmt_http_date(time)
}
