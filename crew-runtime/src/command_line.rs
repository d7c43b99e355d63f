//! What the command lines of `crew-audit` (`audit::cli`) and `crew-inbox`
//! (`inbox::cli`) share: where the parser's help and usage errors go,
//! their exit status, and the words for an unknown command.

use std::io::Write;
use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// The exit status of a bad command line: clap's own, and what both
/// commands have always returned.
pub(crate) const USAGE_ERROR: u8 = 2;

/// Prints what the parser said where it belongs (the help on `out`, a
/// usage error on `err`) and gives its exit status: 0 for the help, 2 for
/// a usage error.
pub(crate) fn parse_failure(
    error: &clap::Error,
    out: &mut impl Write,
    err: &mut impl Write,
) -> ExitCode {
    let text = error.render().to_string();
    let written = if error.use_stderr() {
        err.write_all(text.as_bytes()).and_then(|()| err.flush())
    } else {
        out.write_all(text.as_bytes()).and_then(|()| out.flush())
    };
    match (error.exit_code(), written) {
        (0, Ok(())) => ExitCode::SUCCESS,
        // The help could not be written (a closed pipe): not a success.
        (0, Err(_)) => ExitCode::FAILURE,
        _ => ExitCode::from(USAGE_ERROR),
    }
}

/// The parser's error for an unknown command, in the words both commands
/// have always used (`unknown command "x"`, which scripts look for), with
/// the closest command and the list of them; any other error as it is.
pub(crate) fn reword_unknown_command(
    error: clap::Error,
    mut command: clap::Command,
) -> clap::Error {
    if error.kind() != ErrorKind::InvalidSubcommand {
        return error;
    }
    let Some(ContextValue::String(name)) = error.get(ContextKind::InvalidSubcommand) else {
        return error;
    };
    let tip = match error.get(ContextKind::SuggestedSubcommand) {
        Some(ContextValue::String(similar)) => format!(" (did you mean `{similar}`?)"),
        Some(ContextValue::Strings(similar)) if !similar.is_empty() => {
            format!(" (did you mean `{}`?)", similar.join("` or `"))
        }
        _ => String::new(),
    };
    let commands: Vec<&str> = command
        .get_subcommands()
        .map(clap::Command::get_name)
        .filter(|name| *name != "help")
        .collect();
    let message = format!(
        "unknown command {name:?}{tip}: the commands are {}",
        commands.join(", ")
    );
    command.error(ErrorKind::InvalidSubcommand, message)
}

/// The parser's error with `tip` added when it is a missing required
/// argument whose name holds `argument` (the parser's message and the
/// command's usage stay); any other error as it is.
pub(crate) fn tip_when_missing(mut error: clap::Error, argument: &str, tip: &str) -> clap::Error {
    let missing = error.kind() == ErrorKind::MissingRequiredArgument
        && matches!(
            error.get(ContextKind::InvalidArg),
            Some(ContextValue::Strings(missing)) if missing.iter().any(|arg| arg.contains(argument))
        );
    if missing {
        error.insert(
            ContextKind::Suggested,
            ContextValue::StyledStrs(vec![tip.to_owned().into()]),
        );
    }
    error
}

/// A usage error found after parsing, shown with the usage of subcommand
/// `name` of `command` (the whole command's when it has no such one).
pub(crate) fn usage_error(
    command: &clap::Command,
    name: &str,
    kind: ErrorKind,
    message: impl std::fmt::Display,
) -> clap::Error {
    let mut subcommand = match command.find_subcommand(name) {
        Some(subcommand) => subcommand
            .clone()
            .bin_name(format!("{} {name}", command.get_name())),
        None => command.clone(),
    };
    subcommand.error(kind, message)
}
