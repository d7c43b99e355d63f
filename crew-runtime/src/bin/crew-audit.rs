//! `crew-audit`: checks and reads the audit trail of a crew's store.
//!
//! The command line lives in the library ([`crew_runtime::audit::cli`]),
//! so that an application can ship it as a binary of its own, built with
//! its own profile; run `crew-audit --help` for its commands.

fn main() -> std::process::ExitCode {
    crew_runtime::audit::cli::main()
}
