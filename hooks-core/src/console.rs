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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, mpsc};
    use std::time::Duration;

    #[test]
    fn output_waits_while_a_prompt_has_the_console_paused() {
        let paused = super::pause();
        let printed = Arc::new(AtomicBool::new(false));
        let (started, on_start) = mpsc::channel();
        let printer = {
            let printed = Arc::clone(&printed);
            std::thread::spawn(move || {
                let _ = started.send(());
                super::print_line("console test line");
                printed.store(true, Ordering::SeqCst);
            })
        };
        on_start.recv().expect("the printer thread started");
        // Give the printer every chance to get through; it must not while
        // the console is paused.
        std::thread::sleep(Duration::from_millis(50));
        assert!(!printed.load(Ordering::SeqCst), "printed through a pause");
        drop(paused);
        printer.join().expect("printer thread");
        assert!(
            printed.load(Ordering::SeqCst),
            "printing resumed after the pause"
        );
    }
}
