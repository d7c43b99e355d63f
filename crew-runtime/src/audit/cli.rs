//! The `crew-audit` command line, as library functions: checks and reads
//! the audit trail of a crew's store.
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
//! records; 2 on a bad command line (an unknown command or option, a
//! missing store URL, a malformed `--expect`: the parser's usage errors).
//! `--help` (and `help COMMAND`) print the usage on standard output and
//! exit 0.
//!
//! Every command opens the store read-only
//! ([`Store::open_read_only`](crate::store::Store::open_read_only)): it
//! never creates a store nor migrates one, and reads a read-only copy.
//! `head`, `tail` and `export` leave out records stored at sequence 0 or
//! below (no part of a trail), name them on standard error and exit 1.
//!
//! An application ships the command as a binary of its own, built with its
//! own profile and the dependencies it has already built
//! (`src/bin/crew-audit.rs`):
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     crew_runtime::audit::cli::main()
//! }
//! ```

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use crate::audit::{self, AuditError, Head};
use crate::command_line;
use crate::store::{Store, StoreError};

/// crew-audit: check and read the audit trail of a crew's store.
#[derive(Debug, Parser)]
#[command(
    name = "crew-audit",
    arg_required_else_help = true,
    after_help = "Exit status: 0 when all is well; 1 when a trail is broken, missing or \
                  empty, or a record lies outside its chain; 2 on a bad command line."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `crew-audit` does.
#[derive(Debug, Subcommand)]
enum Command {
    /// Check each trail's hash chain: exit 0 if intact, 1 naming the first record at fault
    Verify {
        #[command(flatten)]
        target: Target,
        /// A head kept elsewhere (what `head` printed) the trail must reach
        #[arg(long, value_name = "COUNT:HASH")]
        expect: Option<Head>,
        #[command(flatten)]
        format: AnyFormat,
    },
    /// Print each trail's head: COUNT:HASH of its last record
    Head {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        format: AnyFormat,
    },
    /// Print the last records of each trail, one a line
    Tail {
        #[command(flatten)]
        target: Target,
        /// How many records to print
        #[arg(short = 'n', value_name = "N", default_value_t = 20)]
        count: usize,
        #[command(flatten)]
        format: AnyFormat,
    },
    /// Write each trail's records on standard output, one JSON object a line
    Export {
        #[command(flatten)]
        target: Target,
        /// The output format: one JSON object a line
        #[arg(long, value_enum)]
        format: Format,
    },
}

/// The store and the trail a command reads.
#[derive(Debug, Args)]
struct Target {
    /// sqlite://PATH or postgres://USER@HOST/DATABASE, opened read-only: never created, never migrated
    #[arg(value_name = "STORE-URL")]
    url: String,
    /// One trail (default: every trail of the store)
    #[arg(long, value_name = "NAME")]
    trail: Option<String>,
}

/// `--format` where the command has one output only: accepted (and not
/// shown in the help) so that one line of options serves every command,
/// as it always did.
#[derive(Debug, Args)]
struct AnyFormat {
    #[arg(long, value_enum, hide = true)]
    format: Option<Format>,
}

/// The formats of `export`.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    // One JSON object a line, in sequence order. (No doc comment: it
    // would turn `--help` into the long form, an option over many lines.)
    Jsonl,
}

/// Why a command failed (exit 1), or a bad command line (exit 2).
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// A bad command line, rendered by the parser with the usage.
    #[error("{}", .0.render())]
    Usage(Box<clap::Error>),
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "the store at {0} holds no audit trail: nothing was recorded to it, or its records and heads were deleted"
    )]
    NoTrail(String),
    /// Records stored outside their chain, one message per trail.
    #[error("{}", .0.join("\ncrew-audit: "))]
    OutsideTheChain(Vec<String>),
    #[error("writing failed: {0}")]
    Write(std::io::Error),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error(
        "crew-audit runs its own async runtime: call it outside one (from a thread of your own, not from async code)"
    )]
    InsideARuntime,
}

/// Runs `crew-audit` with the process's arguments, standard output and
/// standard error: all a binary's `main` needs.
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     crew_runtime::audit::cli::main()
/// }
/// ```
pub fn main() -> ExitCode {
    run(std::env::args_os())
}

/// Runs `crew-audit` with `args` (the first is the program's name, as in
/// [`std::env::args_os`]), writing to standard output and standard error.
///
/// Call it outside an async runtime: it builds its own.
///
/// ```
/// use std::process::ExitCode;
///
/// // A bad command line is exit 2, as in the binary.
/// assert_eq!(crew_runtime::audit::cli::run(["crew-audit", "frobnicate"]), ExitCode::from(2));
/// ```
pub fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    run_with(args, &mut std::io::stdout().lock(), &mut std::io::stderr())
}

/// Runs `crew-audit` with `args` (the first is the program's name),
/// writing what it prints to `out` and its messages to `err`: for tests
/// and for programs that embed the command.
///
/// Returns the exit status: 0 when all is well, 1 when the work failed
/// (a broken trail, a missing store, …), 2 on a bad command line. The help
/// goes to `out` with status 0. Call it outside an async runtime: it
/// builds its own.
///
/// ```
/// use std::process::ExitCode;
///
/// let (mut out, mut err) = (Vec::new(), Vec::new());
/// let status = crew_runtime::audit::cli::run_with(["crew-audit", "verify", "--help"], &mut out, &mut err);
/// assert_eq!(status, ExitCode::SUCCESS);
/// assert!(String::from_utf8_lossy(&out).contains("--expect <COUNT:HASH>"));
/// ```
pub fn run_with<I, T>(args: I, out: &mut impl Write, err: &mut impl Write) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => return command_line::parse_failure(&reword(error), out, err),
    };
    match execute(cli, out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(error)) => command_line::parse_failure(&error, out, err),
        Err(failure) => {
            // Nothing more can be said if standard error is gone.
            let _ = writeln!(err, "crew-audit: {failure}");
            ExitCode::FAILURE
        }
    }
}

/// The parser's error in the words `crew-audit` has always used for an
/// unknown command and a missing store (scripts and people look for them).
fn reword(error: clap::Error) -> clap::Error {
    command_line::tip_when_missing(
        command_line::reword_unknown_command(error, Cli::command()),
        "STORE-URL",
        "name the store: sqlite://PATH or postgres://USER@HOST/DATABASE",
    )
}

/// Runs the parsed command on a runtime of its own.
fn execute(cli: Cli, out: &mut impl Write) -> Result<(), Failure> {
    // `block_on` inside a runtime would panic: say what to do instead.
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Failure::InsideARuntime);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Failure::Runtime)?;
    runtime.block_on(command(cli.command, out))
}

/// What a command reads: the store, the trail and the options.
struct Request<'a> {
    url: &'a str,
    trail: Option<&'a str>,
    expect: Option<&'a Head>,
}

async fn command(command: Command, out: &mut impl Write) -> Result<(), Failure> {
    let (target, expect) = match &command {
        Command::Verify { target, expect, .. } => (target, expect.as_ref()),
        Command::Head { target, .. }
        | Command::Tail { target, .. }
        | Command::Export { target, .. } => (target, None),
    };
    let request = Request {
        url: &target.url,
        trail: target.trail.as_deref(),
        expect,
    };
    // Read-only: a mistyped path is refused, never created; nothing is
    // migrated; a read-only copy of a store reads as well as the store.
    let store = Store::open_read_only(request.url).await?;
    let trails = match request.trail {
        Some(trail) => vec![trail.to_owned()],
        None => audit::trails(&store).await?,
    };
    if trails.is_empty() {
        return Err(Failure::NoTrail(store.url().to_owned()));
    }
    if request.expect.is_some() && request.trail.is_none() && trails.len() != 1 {
        return Err(Failure::Usage(Box::new(command_line::usage_error(
            &Cli::command(),
            "verify",
            ErrorKind::MissingRequiredArgument,
            format!(
                "--expect needs --trail: the store has {} trails",
                trails.len()
            ),
        ))));
    }
    if let Command::Verify { .. } = command {
        for trail in &trails {
            let verified = audit::verify(&store, trail, request.expect).await?;
            writeln!(
                out,
                "trail {trail}: {} records intact, head {}",
                verified.head.count, verified.head
            )
            .map_err(Failure::Write)?;
            if !verified.clock_went_back_at.is_empty() {
                writeln!(
                    out,
                    "trail {trail}: note: the clock went back at records {:?} (the chain's order is its sequence)",
                    verified.clock_went_back_at
                )
                .map_err(Failure::Write)?;
            }
        }
        return out.flush().map_err(Failure::Write);
    }
    let mut out = std::io::BufWriter::new(out);
    // Records stored at sequence 0 or below are no part of a trail: never
    // shown as if they were, but named (and the exit status says so).
    let mut outside = Vec::new();
    for trail in &trails {
        let stray = audit::outside_the_chain(&store, trail).await?;
        match audit::require_records(&store, trail).await {
            // A trail of nothing but such records: nothing to show.
            Err(_) if !stray.is_empty() => {}
            Err(error) => return Err(error.into()),
            Ok(()) => show(&command, &store, trail, &request, &mut out).await?,
        }
        if !stray.is_empty() {
            outside.push(outside_the_chain(trail, &stray));
        }
    }
    out.flush().map_err(Failure::Write)?;
    if outside.is_empty() {
        Ok(())
    } else {
        Err(Failure::OutsideTheChain(outside))
    }
}

/// What `head`, `tail` or `export` shows of `trail`.
async fn show(
    command: &Command,
    store: &Store,
    trail: &str,
    request: &Request<'_>,
    out: &mut impl Write,
) -> Result<(), Failure> {
    match command {
        Command::Head { .. } => {
            let head = audit::head(store, trail).await?;
            if request.trail.is_some() {
                writeln!(out, "{head}").map_err(Failure::Write)?;
            } else {
                writeln!(out, "{trail} {head}").map_err(Failure::Write)?;
            }
        }
        Command::Tail { count, .. } => {
            for record in audit::tail(store, trail, *count).await? {
                writeln!(
                    out,
                    "{} #{} {} {} {}",
                    record.trail,
                    record.seq,
                    httpdate_ms(record.at),
                    record.kind,
                    record.data
                )
                .map_err(Failure::Write)?;
            }
        }
        Command::Export {
            format: Format::Jsonl,
            ..
        } => {
            audit::export(store, trail, out).await?;
        }
        // Answered before any trail is read.
        Command::Verify { .. } => {}
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `crew-audit ARGS` in process: its status, output and messages.
    fn crew_audit(args: &[&str]) -> (ExitCode, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let status = run_with(
            std::iter::once("crew-audit").chain(args.iter().copied()),
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
        // clap's own check of the derive: names, groups, defaults.
        Cli::command().debug_assert();
    }

    #[test]
    fn cli_help_of_every_command_names_its_options() {
        for (args, options) in [
            (vec!["--help"], vec!["verify", "head", "tail", "export"]),
            (vec!["help"], vec!["verify", "head", "tail", "export"]),
            (
                vec!["verify", "--help"],
                vec!["<STORE-URL>", "--trail <NAME>", "--expect <COUNT:HASH>"],
            ),
            (vec!["help", "verify"], vec!["--expect <COUNT:HASH>"]),
            (
                vec!["head", "--help"],
                vec!["<STORE-URL>", "--trail <NAME>"],
            ),
            (
                vec!["tail", "--help"],
                vec!["<STORE-URL>", "--trail <NAME>", "-n <N>", "[default: 20]"],
            ),
            (
                vec!["export", "--help"],
                vec![
                    "<STORE-URL>",
                    "--trail <NAME>",
                    "--format <FORMAT>",
                    "jsonl",
                ],
            ),
        ] {
            let (status, out, err) = crew_audit(&args);
            assert_eq!(status, ExitCode::SUCCESS, "{args:?}: {err}");
            assert!(err.is_empty(), "{args:?}: {err}");
            for option in options {
                assert!(out.contains(option), "{args:?} lacks {option}:\n{out}");
            }
        }
    }

    #[test]
    fn cli_usage_errors_exit_2_and_name_the_mistake() {
        for (args, said) in [
            (vec![], "Usage: crew-audit <COMMAND>"),
            (
                vec!["frobnicate", "sqlite://x.db"],
                "unknown command \"frobnicate\"",
            ),
            (vec!["verfy", "sqlite://x.db"], "did you mean `verify`?"),
            (vec!["verify"], "name the store"),
            (vec!["verify", "sqlite://x.db", "--bogus"], "--bogus"),
            (vec!["verify", "sqlite://x.db", "--trail"], "--trail <NAME>"),
            (
                vec!["verify", "sqlite://x.db", "--expect", "12"],
                "write it as COUNT:HASH",
            ),
            (vec!["tail", "sqlite://x.db", "-n", "many"], "-n <N>"),
            (vec!["export", "sqlite://x.db"], "--format <FORMAT>"),
            (vec!["export", "sqlite://x.db", "--format", "csv"], "jsonl"),
            (
                vec!["head", "sqlite://x.db", "sqlite://y.db"],
                "sqlite://y.db",
            ),
        ] {
            let (status, out, err) = crew_audit(&args);
            assert_eq!(status, ExitCode::from(2), "{args:?}: {err}");
            assert!(out.is_empty(), "{args:?}: {out}");
            assert!(err.contains(said), "{args:?} does not say {said:?}:\n{err}");
        }
    }

    #[test]
    fn cli_verify_of_a_missing_store_exits_1_and_creates_nothing() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("audti.db");
        let url = format!("sqlite://{}", path.display());
        for command in ["verify", "head", "tail"] {
            let (status, out, err) = crew_audit(&[command, &url]);
            assert_eq!(status, ExitCode::FAILURE, "{command}: {err}");
            assert!(out.is_empty(), "{command}: {out}");
            assert!(
                err.contains("there is no SQLite store at"),
                "{command}: {err}"
            );
        }
        assert!(!path.exists());
    }

    #[test]
    fn cli_inside_an_async_runtime_is_an_error_not_a_panic() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let (status, _, err) = runtime.block_on(async { crew_audit(&["verify", "sqlite://x.db"]) });
        assert_eq!(status, ExitCode::FAILURE);
        assert!(err.contains("outside one"), "{err}");
    }
}
