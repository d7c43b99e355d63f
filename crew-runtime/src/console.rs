//! The live console output of crews, which a human-input prompt pauses.
//!
//! Every line the runtime prints goes through [`print_line`] (standard
//! output) or [`eprint_line`] (standard error); a question to a person
//! holds [`pause`] while it is on the terminal, so output from other calls
//! waits instead of scribbling over the question. Waiting never blocks:
//! a line printed while the console is paused is held, in order, and
//! printed when the last pause ends, so a task printing on a runtime worker
//! never waits for a person (on a single-threaded runtime it could not
//! wait at all without stopping the very task that waits for the answer).
//!
//! The terminal belongs to the person at it, not to the model: what a model
//! or a tool wrote reaches it only through [`escape_control`], so an escape
//! sequence in a tool result cannot clear the screen, retitle the window or
//! redraw a prompt, and a bidirectional override cannot make text read
//! differently from what it is.
//!
//! ```
//! use crew_runtime::console;
//!
//! // A tool result that tries to clear the screen is shown, not obeyed.
//! assert_eq!(console::escape_control("done\u{1b}[2J"), r"done\x1b[2J");
//!
//! let question = console::pause();
//! console::print_line("a crew's progress line"); // held while the person reads
//! drop(question); // printed now, in order
//! ```

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::Write;
use std::sync::{Mutex, PoisonError};

/// The most lines held while the console is paused; later ones are counted
/// and dropped (a person takes minutes to answer, a verbose crew may print
/// a lot meanwhile).
const MAX_HELD_LINES: usize = 10_000;

/// Where a held line goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Out,
    Err,
}

/// The console's state: how many pauses are held, and the lines printed
/// meanwhile.
struct Console {
    pauses: usize,
    held: VecDeque<(Stream, String)>,
    dropped: usize,
}

static CONSOLE: Mutex<Console> = Mutex::new(Console {
    pauses: 0,
    held: VecDeque::new(),
    dropped: 0,
});

/// The console, whatever a panic left: its state is a counter and a queue
/// of lines, each changed in one step, so a poisoned lock still guards a
/// consistent state.
fn console() -> std::sync::MutexGuard<'static, Console> {
    CONSOLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Holds the console paused; output resumes (and the lines held meanwhile
/// are printed) when the last pause is dropped.
///
/// The guard is `Send`: an `async` question to a person holds it across
/// its `.await`s, whichever thread resumes it.
///
/// ```
/// let paused: crew_runtime::console::ConsolePause = crew_runtime::console::pause();
/// // Lines printed meanwhile, by any thread, are held.
/// drop(paused);
/// ```
#[must_use = "the console resumes as soon as the guard is dropped"]
#[derive(Debug)]
pub struct ConsolePause {
    _private: (),
}

/// Pauses the live console output until the returned guard is dropped.
///
/// Pauses nest (two questions, a question and a warning): output resumes
/// when the last one ends. Printing with [`print_line`] while paused, on
/// this thread or any other, never waits: the line is held and printed
/// after the pause. To show a question while the console is paused, write
/// to standard output directly, escaping what others wrote with
/// [`escape_control`].
///
/// ```
/// use std::io::Write;
/// use crew_runtime::console;
///
/// let _paused = console::pause();
/// let mut out = std::io::stdout().lock();
/// let _ = writeln!(out, "{}", console::escape_control("a question"));
/// ```
pub fn pause() -> ConsolePause {
    console().pauses += 1;
    ConsolePause { _private: () }
}

impl Drop for ConsolePause {
    fn drop(&mut self) {
        let mut console = console();
        console.pauses = console.pauses.saturating_sub(1);
        if console.pauses > 0 {
            return;
        }
        // Printed under the lock, so a line printed meanwhile by another
        // thread comes after the held ones.
        let held = std::mem::take(&mut console.held);
        let dropped = std::mem::take(&mut console.dropped);
        for (stream, line) in held {
            write_line(stream, &line);
        }
        if dropped > 0 {
            write_line(
                Stream::Out,
                &format!("({dropped} more lines printed while a question was shown were dropped)"),
            );
        }
    }
}

/// Writes one line; a closed or broken stream is ignored: losing console
/// output must never stop a run.
fn write_line(stream: Stream, line: &str) {
    let _ = match stream {
        Stream::Out => writeln!(std::io::stdout().lock(), "{line}"),
        Stream::Err => writeln!(std::io::stderr().lock(), "{line}"),
    };
}

/// Prints `line`, or holds it while the console is paused.
fn print_to(stream: Stream, line: &str) {
    let line = escape_control(line);
    let mut console = console();
    if console.pauses == 0 {
        write_line(stream, &line);
    } else if console.held.len() < MAX_HELD_LINES {
        console.held.push_back((stream, line.into_owned()));
    } else {
        console.dropped += 1;
    }
}

/// Prints one line to standard output; while a question has the console
/// paused, the line is held and printed after it (this never waits). A
/// closed or broken stdout is ignored: losing console output must never
/// stop a run.
///
/// The line is printed through [`escape_control`]: it is one line on the
/// terminal whatever it holds, and no control character in it reaches the
/// terminal.
///
/// ```
/// // Shows `tool said: \x1b[2J done` instead of clearing the screen.
/// crew_runtime::console::print_line("tool said: \u{1b}[2J done");
/// ```
pub fn print_line(line: &str) {
    print_to(Stream::Out, line);
}

/// [`print_line`] on standard error: escaped, and held while a question
/// has the console paused.
///
/// ```
/// crew_runtime::console::eprint_line("warning: the filter names no tool");
/// ```
pub fn eprint_line(line: &str) {
    print_to(Stream::Err, line);
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
/// use crew_runtime::console::escape_control;
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

    use super::escape_control;

    /// The tests that pause the console, one at a time: a pause held by
    /// one would hold the lines of the other.
    static PAUSING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        PAUSING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `line` waits among the held lines.
    fn is_held(line: &str) -> bool {
        super::console()
            .held
            .iter()
            .any(|(stream, held)| *stream == super::Stream::Out && held == line)
    }

    #[test]
    fn output_printed_while_a_question_is_shown_is_held_until_it_ends() {
        let _serial = one_at_a_time();
        let paused = super::pause();
        // From another thread, as a concurrent tool call would print: it
        // returns at once, the line held.
        std::thread::spawn(|| super::print_line("console test line \u{1b}[2J"))
            .join()
            .expect("printing never waits for the pause");
        assert!(is_held(r"console test line \x1b[2J"), "held, escaped");
        drop(paused);
        assert!(
            !is_held(r"console test line \x1b[2J"),
            "printed after the pause"
        );
    }

    #[test]
    fn pauses_nest_and_output_resumes_after_the_last() {
        let _serial = one_at_a_time();
        let outer = super::pause();
        let inner = super::pause();
        super::print_line("nested pause line");
        drop(inner);
        assert!(is_held("nested pause line"), "one pause is still held");
        drop(outer);
        assert!(!is_held("nested pause line"));
    }

    #[test]
    fn the_pause_guard_can_be_held_across_an_await() {
        fn is_send<T: Send>(_: &T) {}
        let paused = super::pause();
        is_send(&paused);
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

/// The verbose console: a listener that prints a crew's progress from its
/// events, one line each — a task starting, a turn asking for tool calls,
/// each call's arguments and observation, a call a hook blocked (by whom
/// and why), a result a `POST_TOOL_CALL` hook replaced, a call that
/// failed or was refused, a failed model call, the model's final answer.
///
/// `CrewBuilder::verbose(true)` (or `AgentBuilder::verbose(true)` for one
/// agent) attaches one to the crew's bus; attach one yourself to any other
/// bus (the global registry's, say). It prints what the events carry, so
/// what it prints went through the crew's redaction like every event, and
/// through [`print_line`]: one line each, no control character reaching the
/// terminal, held while a question to a person has the console paused.
///
/// ```
/// use crew_runtime::console::VerboseConsole;
/// use crew_runtime::events::ToolUsageStartedEvent;
/// use crew_runtime::Event;
/// use serde_json::json;
///
/// let console = VerboseConsole::new().agents(["Clerk"]);
/// let started = Event::ToolUsageStarted(ToolUsageStartedEvent {
///     meta: Default::default(),
///     tool_name: "lookup".into(),
///     tool_input: json!({"order": 7}),
///     agent_role: Some("Clerk".into()),
///     task: None,
///     crew: None,
/// });
/// assert_eq!(console.line(&started).as_deref(), Some("[Clerk] → lookup {\"order\":7}"));
///
/// // Another agent's call is not this console's.
/// let mut other = started.clone();
/// if let Event::ToolUsageStarted(e) = &mut other { e.agent_role = Some("Writer".into()); }
/// assert_eq!(console.line(&other), None);
///
/// // On a bus: `console.attach(crew.events())`.
/// let bus = crew_runtime::EventBus::new();
/// let id = VerboseConsole::new().attach(&bus);
/// assert!(bus.unsubscribe(id));
/// ```
#[derive(Debug, Clone, Default)]
pub struct VerboseConsole {
    /// The agents whose work it prints; `None` for every agent.
    agents: Option<Vec<String>>,
}

/// How much of a task's description, a call's arguments or observation
/// and a final answer a line shows.
const TASK_CHARS: usize = 200;
const CALL_CHARS: usize = 300;
const ANSWER_CHARS: usize = 500;

impl VerboseConsole {
    /// A console for every agent's work.
    ///
    /// ```
    /// let console = crew_runtime::console::VerboseConsole::new();
    /// # let _ = console;
    /// ```
    pub fn new() -> VerboseConsole {
        VerboseConsole::default()
    }

    /// Prints only the work of the agents with these roles.
    ///
    /// ```
    /// let console = crew_runtime::console::VerboseConsole::new().agents(["Clerk", "Writer"]);
    /// # let _ = console;
    /// ```
    pub fn agents<I, S>(mut self, roles: I) -> VerboseConsole
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.agents = Some(roles.into_iter().map(Into::into).collect());
        self
    }

    /// Subscribes the console to `bus`; it prints with [`print_line`]
    /// from then on. Unsubscribe with the id to stop it.
    ///
    /// ```
    /// let bus = crew_runtime::EventBus::new();
    /// let id = crew_runtime::console::VerboseConsole::new().attach(&bus);
    /// assert!(bus.has_listeners());
    /// bus.unsubscribe(id);
    /// ```
    pub fn attach(self, bus: &crate::EventBus) -> crate::events::ListenerId {
        bus.subscribe(move |event| {
            if let Some(line) = self.line(event) {
                print_line(&line);
            }
        })
    }

    /// The line the console prints for `event`, if any (see the type's
    /// example).
    pub fn line(&self, event: &hooks_core::Event) -> Option<String> {
        use hooks_core::Event;
        let line = match event {
            Event::TaskStarted(e) => {
                if !self.follows(Some(&e.agent_role)) {
                    return None;
                }
                // An agent's own kickoff has no crew: its role names it.
                let who = if e.crew.is_empty() {
                    &e.agent_role
                } else {
                    &e.crew
                };
                return Some(format!(
                    "[{who}] task {}/{} for {}: {}",
                    e.task_index,
                    e.task_count,
                    e.agent_role,
                    excerpt(&e.task_name, TASK_CHARS)
                ));
            }
            Event::LlmCallCompleted(e) if e.tool_calls.is_empty() => {
                self.said_by(Some(&e.agent_role))?;
                format!("final answer: {}", excerpt(&e.response, ANSWER_CHARS))
            }
            Event::LlmCallCompleted(e) => {
                self.said_by(Some(&e.agent_role))?;
                format!(
                    "{}asks for {} tool call(s)",
                    turn(e.iteration),
                    e.tool_calls.len()
                )
            }
            Event::LlmCallFailed(e) => {
                self.said_by(Some(&e.agent_role))?;
                let failed = format!("{}the model call failed ({})", turn(e.iteration), e.error);
                match e.retry {
                    Some(retry) => format!("{failed}; retrying ({retry} of {})", e.max_retries),
                    None => failed,
                }
            }
            Event::ToolUsageStarted(e) => {
                self.said_by(e.agent_role.as_deref())?;
                let input = serde_json::to_string(&e.tool_input).unwrap_or_default();
                format!("→ {} {}", e.tool_name, excerpt(&input, CALL_CHARS))
            }
            Event::HookDispatched(e)
                if e.point == hooks_core::InterceptionPoint::from(hooks_core::PRE_TOOL_CALL) =>
            {
                self.said_by(e.agent_role.as_deref())?;
                let (Some(source), Some(reason)) = (&e.abort_source, &e.abort_reason) else {
                    return None;
                };
                format!("  blocked by {source}: {reason}")
            }
            Event::HookDispatched(e)
                if e.point == hooks_core::InterceptionPoint::from(hooks_core::POST_TOOL_CALL)
                    && e.outcome == "modified" =>
            {
                self.said_by(e.agent_role.as_deref())?;
                "  result replaced by a POST_TOOL_CALL hook".to_owned()
            }
            Event::ToolUsageFinished(e) => {
                self.said_by(e.agent_role.as_deref())?;
                format!("← {}: {}", e.tool_name, excerpt(&e.result, CALL_CHARS))
            }
            Event::ToolUsageError(e) => {
                self.said_by(e.agent_role.as_deref())?;
                format!("✗ {}: {}", e.tool_name, excerpt(&e.error, CALL_CHARS))
            }
            Event::ToolUsageAbandoned(e) => {
                self.said_by(e.agent_role.as_deref())?;
                format!(
                    "✗ {}: left behind (the kickoff was dropped or the tool ran past its timeout)",
                    e.tool_name
                )
            }
            _ => return None,
        };
        let role = match event {
            Event::LlmCallCompleted(e) => e.agent_role.as_str(),
            Event::LlmCallFailed(e) => &e.agent_role,
            Event::ToolUsageStarted(e) => e.agent_role.as_deref().unwrap_or_default(),
            Event::ToolUsageFinished(e) => e.agent_role.as_deref().unwrap_or_default(),
            Event::ToolUsageError(e) => e.agent_role.as_deref().unwrap_or_default(),
            Event::ToolUsageAbandoned(e) => e.agent_role.as_deref().unwrap_or_default(),
            Event::HookDispatched(e) => e.agent_role.as_deref().unwrap_or_default(),
            _ => "",
        };
        Some(format!("[{role}] {line}"))
    }

    /// Whether the console prints the work of the agent `role` (an event
    /// that names no agent is printed by a console for every agent).
    fn follows(&self, role: Option<&str>) -> bool {
        match (&self.agents, role) {
            (None, _) => true,
            (Some(agents), Some(role)) => agents.iter().any(|agent| agent == role),
            (Some(_), None) => false,
        }
    }

    /// `Some(())` when the console prints `role`'s work (for `?`).
    fn said_by(&self, role: Option<&str>) -> Option<()> {
        self.follows(role).then_some(())
    }
}

/// The turn a model call is for, as a line's opening words.
fn turn(iteration: Option<usize>) -> String {
    match iteration {
        Some(turn) => format!("turn {turn}: "),
        None => String::new(),
    }
}

/// At most `limit` characters of `text`, with `…` where it was cut.
pub(crate) fn excerpt(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
