//! The live console output of crews, which a human-input prompt pauses.
//!
//! Every line the runtime prints goes through [`print_line`]; a prompt holds
//! [`pause`] while it asks, so output from tool calls on other threads waits
//! instead of scribbling over the question.

use std::io::Write;
use std::sync::{Mutex, MutexGuard, PoisonError};

static CONSOLE: Mutex<()> = Mutex::new(());

/// Holds the console paused; output resumes when it is dropped.
#[must_use = "the console resumes as soon as the guard is dropped"]
pub struct ConsolePause {
    _guard: MutexGuard<'static, ()>,
}

/// Pauses the live console output until the returned guard is dropped.
pub fn pause() -> ConsolePause {
    ConsolePause {
        // The guarded value is `()`: a panic while paused leaves nothing
        // inconsistent, so a poisoned lock is simply taken over.
        _guard: CONSOLE.lock().unwrap_or_else(PoisonError::into_inner),
    }
}

/// Prints one line to standard output, waiting while a prompt has the
/// console paused. A closed or broken stdout is ignored: losing console
/// output must never stop a run.
pub fn print_line(line: &str) {
    let _pause = pause();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
}
