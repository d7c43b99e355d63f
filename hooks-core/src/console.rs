//! The live console output of crews, which a human-input prompt pauses.
//!
//! Every line the runtime prints goes through [`print_line`]; a prompt holds
//! [`pause`] while it asks, so output from tool calls on other threads waits
//! instead of scribbling over the question.
//!
//! The terminal belongs to the person at it, not to the model: what a model
//! or a tool wrote reaches it only through [`escape_control`], so an escape
//! sequence in a tool result cannot clear the screen, retitle the window or
//! redraw a prompt, and a bidirectional override cannot make text read
//! differently from what it is.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write;
use std::sync::{Mutex, MutexGuard, PoisonError};

static CONSOLE: Mutex<()> = Mutex::new(());

/// Holds the console paused; output resumes when it is dropped.
///
/// ```
/// let paused: hooks_core::console::ConsolePause = hooks_core::console::pause();
/// // Lines printed by other threads wait here.
/// drop(paused);
/// ```
#[must_use = "the console resumes as soon as the guard is dropped"]
pub struct ConsolePause {
    _guard: MutexGuard<'static, ()>,
}

/// Pauses the live console output until the returned guard is dropped.
///
/// Not reentrant: printing with [`print_line`] while holding the pause on
/// the same thread waits forever. Write to standard output directly
/// instead, escaping what others wrote with [`escape_control`].
///
/// ```
/// use std::io::Write;
/// use hooks_core::console;
///
/// let _paused = console::pause();
/// let mut out = std::io::stdout().lock();
/// let _ = writeln!(out, "{}", console::escape_control("a question"));
/// ```
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
///
/// The line is printed through [`escape_control`]: it is one line on the
/// terminal whatever it holds, and no control character in it reaches the
/// terminal.
///
/// ```
/// // Shows `tool said: \x1b[2J done` instead of clearing the screen.
/// hooks_core::console::print_line("tool said: \u{1b}[2J done");
/// ```
pub fn print_line(line: &str) {
    let line = escape_control(line);
    let _pause = pause();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
}

/// Whether a terminal could act on `c` instead of showing it: the C0
/// controls (line breaks and tabs included), DEL, the C1 controls, the
/// Unicode line and paragraph separators, and the bidirectional embeddings,
/// overrides and isolates (the "Trojan Source" characters).
fn is_terminal_control(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{2028}'..='\u{2029}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// Makes text safe to show on a terminal: every character a terminal could
/// act on instead of showing is replaced by a visible escape, and the rest
/// is kept as it is.
///
/// - C0 controls and DEL: `\t`, `\n`, `\r`, and `\xNN` for the others
///   (`\x1b` for ESC, `\x07` for BEL, `\x7f` for DEL). Line breaks are
///   escaped too: the result is always one line.
/// - C1 controls (U+0080 to U+009F), the line and paragraph separators
///   (U+2028, U+2029) and the bidirectional embeddings, overrides and
///   isolates (U+202A to U+202E, U+2066 to U+2069): `\u{NNNN}` in lower
///   case hexadecimal, `\u{202e}` for RIGHT-TO-LEFT OVERRIDE.
///
/// An escape sequence is defused by escaping its ESC: `\x1b[2J` shows as
/// those six characters and clears nothing. Backslashes are not escaped,
/// so ordinary text (paths, JSON) reads as it was written, and text with
/// nothing to escape is returned borrowed, without allocating. The result
/// holds no character that needs escaping, so escaping it again changes
/// nothing.
///
/// ```
/// use std::borrow::Cow;
/// use hooks_core::console::escape_control;
///
/// assert_eq!(escape_control("\u{1b}]0;title\u{7}"), r"\x1b]0;title\x07");
/// assert_eq!(escape_control("two\nlines"), r"two\nlines");
/// assert_eq!(escape_control("abc\u{202e}fed"), r"abc\u{202e}fed");
/// assert!(matches!(escape_control("plain text, café"), Cow::Borrowed(_)));
/// ```
pub fn escape_control(text: &str) -> Cow<'_, str> {
    let Some(first) = text.find(is_terminal_control) else {
        return Cow::Borrowed(text);
    };
    // Most texts have a few controls at most: room for a handful of escapes.
    let mut escaped = String::with_capacity(text.len() + 16);
    escaped.push_str(&text[..first]);
    for c in text[first..].chars() {
        match c {
            '\t' => escaped.push_str(r"\t"),
            '\n' => escaped.push_str(r"\n"),
            '\r' => escaped.push_str(r"\r"),
            // Writing to a `String` cannot fail.
            '\u{0}'..='\u{1f}' | '\u{7f}' => {
                let _ = write!(escaped, r"\x{:02x}", u32::from(c));
            }
            c if is_terminal_control(c) => {
                let _ = write!(escaped, r"\u{{{:x}}}", u32::from(c));
            }
            c => escaped.push(c),
        }
    }
    Cow::Owned(escaped)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, mpsc};
    use std::time::Duration;

    use super::escape_control;

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

    #[test]
    fn plain_text_is_returned_unchanged_and_borrowed() {
        for text in [
            "",
            "plain ascii, with punctuation: {\"a\": [1, 2]} ~",
            r"C:\Users\me and \x1b written out by hand",
            "café, 東京, emoji 🦀, Arabic مرحبا, Hebrew שלום",
            // Direction marks only nudge neutral characters; they override
            // nothing and are kept.
            "\u{200e}\u{200f}\u{61c}",
            // Just outside the escaped ranges.
            "\u{a0}\u{2027}\u{202f}\u{2065}\u{206a}",
        ] {
            let escaped = escape_control(text);
            assert!(matches!(escaped, Cow::Borrowed(_)), "{text:?} allocated");
            assert_eq!(escaped, text);
        }
    }

    #[test]
    fn every_c0_control_is_escaped() {
        for byte in 0u8..0x20 {
            let c = char::from(byte);
            let expected = match c {
                '\t' => r"\t".to_owned(),
                '\n' => r"\n".to_owned(),
                '\r' => r"\r".to_owned(),
                _ => format!(r"\x{byte:02x}"),
            };
            assert_eq!(escape_control(&format!("a{c}b")), format!("a{expected}b"));
        }
        assert_eq!(escape_control("\u{0}"), r"\x00");
        assert_eq!(escape_control("\u{7}"), r"\x07");
        assert_eq!(escape_control("\u{8}"), r"\x08");
        assert_eq!(escape_control("\u{1b}"), r"\x1b");
    }

    #[test]
    fn line_breaks_are_escaped_so_one_line_stays_one_line() {
        assert_eq!(
            escape_control("line one\r\nline two\rline three\n"),
            r"line one\r\nline two\rline three\n"
        );
        assert_eq!(
            escape_control("a\u{2028}b\u{2029}c"),
            r"a\u{2028}b\u{2029}c"
        );
    }

    #[test]
    fn delete_is_escaped() {
        assert_eq!(escape_control("rm\u{7f}\u{7f}"), r"rm\x7f\x7f");
    }

    #[test]
    fn every_c1_control_is_escaped() {
        for code in 0x80u32..=0x9f {
            let c = char::from_u32(code).expect("a C1 control is a char");
            assert_eq!(
                escape_control(&format!("a{c}b")),
                format!(r"a\u{{{code:x}}}b")
            );
        }
        // CSI and OSC as single C1 characters, as some terminals read them.
        assert_eq!(escape_control("\u{9b}2J"), r"\u{9b}2J");
        assert_eq!(escape_control("\u{9d}0;t\u{9c}"), r"\u{9d}0;t\u{9c}");
    }

    #[test]
    fn escape_sequences_are_defused() {
        assert_eq!(escape_control("\u{1b}[2J"), r"\x1b[2J");
        assert_eq!(escape_control("\u{1b}]0;title\u{7}"), r"\x1b]0;title\x07");
        assert_eq!(
            escape_control("\u{1b}]8;;http://evil.example/\u{1b}\\ok\u{1b}]8;;\u{1b}\\"),
            r"\x1b]8;;http://evil.example/\x1b\ok\x1b]8;;\x1b\"
        );
        assert_eq!(
            escape_control("ok\u{1b}[1A\u{1b}[2Kapproved"),
            r"ok\x1b[1A\x1b[2Kapproved"
        );
    }

    #[test]
    fn bidirectional_overrides_and_isolates_are_escaped() {
        for code in (0x202au32..=0x202e).chain(0x2066..=0x2069) {
            let c = char::from_u32(code).expect("a bidi control is a char");
            assert_eq!(
                escape_control(&format!("a{c}b")),
                format!(r"a\u{{{code:x}}}b")
            );
        }
        assert_eq!(
            escape_control("access = \u{202e}\u{2066}admin\u{2069}\u{2066}"),
            r"access = \u{202e}\u{2066}admin\u{2069}\u{2066}"
        );
    }

    #[test]
    fn escaping_keeps_the_text_around_the_controls_and_is_idempotent() {
        let hostile = "héllo \u{1b}[31mred\u{1b}[0m\t🦀\u{202e}txt.exe\u{85}end";
        let escaped = escape_control(hostile);
        assert_eq!(
            escaped,
            r"héllo \x1b[31mred\x1b[0m\t🦀\u{202e}txt.exe\u{85}end"
        );
        assert!(!escaped.chars().any(super::is_terminal_control));
        let again = escape_control(&escaped);
        assert!(matches!(again, Cow::Borrowed(_)));
        assert_eq!(again, escaped);
    }
}
