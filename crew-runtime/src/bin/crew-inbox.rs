//! `crew-inbox`: serves the approval inbox and manages its approvers.
//!
//! The command line lives in the library ([`crew_runtime::inbox::cli`]),
//! so that an application can ship it as a binary of its own, built with
//! its own profile; run `crew-inbox --help` for its commands.

fn main() -> std::process::ExitCode {
    crew_runtime::inbox::cli::main()
}
