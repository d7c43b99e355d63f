//! The terminal as a source of answers: [`TerminalInput`], the crew's
//! default person.
//!
//! The engine asks only the source it is given; a crew built without one
//! asks the terminal through this source, pausing the live
//! [`console`](crate::console) while a question is shown.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use hooks_core::{HumanInputError, HumanInputRequest, HumanInputSource};
use tokio::sync::mpsc;

/// Asks on the terminal, pausing the crew's console output meanwhile.
///
/// Standard input that is not a terminal (a pipe, `/dev/null`, a CI job) is
/// refused: an approval must come from a person.
///
/// The terminal shows the question apart from everything agents print: a
/// framed block under an `approval requested` header, each line of the
/// prompt and of the default message on its own framed line, and every
/// control character in them escaped (see
/// [`console::escape_control`](crate::console::escape_control)), so text a
/// model or a tool chose cannot clear the screen, redraw the question or
/// fake the frame. Input typed before the question appeared is dropped (on
/// Unix; elsewhere nothing can drop it): an answer is only what the person
/// typed after seeing the question.
///
/// One question is on the terminal at a time: the others wait their turn
/// (without blocking a runtime thread). One thread reads the terminal for
/// every question; the question awaits its line. A question that gave up
/// (its timeout, see `request_human_input`) leaves no reader of its own
/// behind, and a line typed for it after it gave up is not taken as the
/// answer to the next one.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::{HumanInputSource, TerminalInput};
///
/// let source: Arc<dyn HumanInputSource> = Arc::new(TerminalInput::new());
/// # let _ = source;
/// ```
#[derive(Debug, Clone, Default)]
pub struct TerminalInput {
    _private: (),
}

impl TerminalInput {
    /// The terminal source.
    ///
    /// ```
    /// let source = crew_runtime::TerminalInput::new();
    /// # let _ = source;
    /// ```
    pub fn new() -> Self {
        TerminalInput::default()
    }
}

/// The header line above every question on the terminal.
const QUESTION_HEADER: &str = "┌── approval requested ──";
/// Begins each line of the question.
const QUESTION_LINE: &str = "│ ";
/// Where the answer is typed.
const ANSWER_MARKER: &str = "└─> ";

/// The question as the terminal shows it: framed, one framed line per line
/// of the texts, every control character escaped. The texts' own line
/// breaks (`\n`, `\r\n`) start new framed lines; nothing else in them can
/// move the cursor.
fn framed_question(prompt: &str, default_message: &str) -> String {
    let mut question = format!("\n{QUESTION_HEADER}\n");
    for line in prompt.lines().chain(default_message.lines()) {
        question.push_str(QUESTION_LINE);
        question.push_str(&crate::console::escape_control(line));
        question.push('\n');
    }
    question.push_str(ANSWER_MARKER);
    question
}

/// The longest answer kept; the rest of a longer line is read and dropped.
const MAX_ANSWER_BYTES: usize = 4096;

/// Counts the questions shown on the terminal, so that a read left behind
/// by a question that gave up forgets what it had read of a line when the
/// next question is shown (on a terminal in raw mode, where bytes arrive
/// before the line is complete).
static QUESTIONS_SHOWN: AtomicU64 = AtomicU64::new(0);

/// Drops whatever was typed on the terminal and not read yet, so that
/// nothing typed before the question can answer it.
#[cfg(unix)]
fn drop_typed_ahead(stdin: &std::io::Stdin) -> Result<(), HumanInputError> {
    use rustix::termios::{QueueSelector, tcflush};
    use std::os::fd::AsFd;
    loop {
        match tcflush(stdin.as_fd(), QueueSelector::IFlush) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            // Asking anyway could take a line typed for something else as
            // the answer: refuse instead.
            Err(error) => {
                return Err(HumanInputError::Io(format!(
                    "could not drop the input typed before the question: {error}"
                )));
            }
        }
    }
}

#[cfg(not(unix))]
fn drop_typed_ahead(_stdin: &std::io::Stdin) -> Result<(), HumanInputError> {
    Ok(())
}

/// Reads one line from standard input, without the line break.
///
/// On Unix it reads the terminal one byte at a time, past the standard
/// library's buffer: nothing after the line break is taken from the
/// terminal, so a second line typed with the answer stays in the terminal,
/// where the next question drops it, instead of waiting in a buffer to
/// answer that question.
#[cfg(unix)]
fn read_answer_line() -> Result<String, HumanInputError> {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    let mut question = QUESTIONS_SHOWN.load(Ordering::SeqCst);
    loop {
        let read = rustix::io::read(stdin.as_fd(), &mut byte);
        let shown = QUESTIONS_SHOWN.load(Ordering::SeqCst);
        if shown != question {
            // Typed before the question now shown: not part of its answer.
            line.clear();
            question = shown;
        }
        match read {
            Ok(0) if line.is_empty() => return Err(HumanInputError::Closed),
            Ok(0) => break,
            // A terminal in raw mode sends a carriage return for Enter.
            Ok(_) if byte[0] == b'\n' || byte[0] == b'\r' => break,
            Ok(_) => {
                if line.len() < MAX_ANSWER_BYTES {
                    line.push(byte[0]);
                }
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(error) => return Err(HumanInputError::Io(error.to_string())),
        }
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

#[cfg(not(unix))]
fn read_answer_line() -> Result<String, HumanInputError> {
    use std::io::BufRead;
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) => Err(HumanInputError::Closed),
        Ok(_) => {
            if line.len() > MAX_ANSWER_BYTES {
                let end = (0..=MAX_ANSWER_BYTES)
                    .rev()
                    .find(|&at| line.is_char_boundary(at))
                    .unwrap_or(0);
                line.truncate(end);
            }
            Ok(line)
        }
        Err(error) => Err(HumanInputError::Io(error.to_string())),
    }
}

/// The one thread that reads answers from standard input, and what the
/// questions know of it.
///
/// Reading a terminal cannot be interrupted, so a question that gives up
/// leaves its read behind. Were each question to start a reader of its
/// own, two readers would then split the next answer between them, and the
/// bytes one of them got could spell an approval nobody typed. A single
/// reader, asked for one line at a time, hands every line to exactly one
/// question, and a line read for a question that gave up is thrown away.
/// The reader is a plain thread (it blocks on the terminal); the questions
/// await its lines on a tokio channel.
struct StdinReader {
    /// Asks the reader for one more line.
    wanted: std::sync::mpsc::Sender<()>,
    /// The lines it read, in order.
    lines: mpsc::UnboundedReceiver<Result<String, HumanInputError>>,
    /// A line was asked for and not taken: the reader is reading it, or it
    /// waits in `lines`.
    pending: bool,
    /// The reader thread is still there to read.
    alive: bool,
}

/// The terminal's reader, shared by every question. The lock is held for
/// the whole question: one question on the terminal at a time.
static TERMINAL: tokio::sync::Mutex<Option<StdinReader>> = tokio::sync::Mutex::const_new(None);

impl StdinReader {
    fn spawn() -> Result<Self, HumanInputError> {
        let (wanted, requests) = std::sync::mpsc::channel::<()>();
        let (sender, lines) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("human-input-reader".into())
            .spawn(move || {
                // Ends when the reader is dropped (a request channel closed)
                // or nobody takes lines any more.
                while requests.recv().is_ok() {
                    if sender.send(read_answer_line()).is_err() {
                        return;
                    }
                }
            })
            .map_err(|error| {
                HumanInputError::Io(format!("could not start reading the terminal: {error}"))
            })?;
        Ok(StdinReader {
            wanted,
            lines,
            pending: false,
            alive: true,
        })
    }

    /// Throws away a line read for a question that gave up: it was typed
    /// before the question being asked now.
    fn discard_stale(&mut self) {
        if self.pending && self.lines.try_recv().is_ok() {
            self.pending = false;
        }
    }

    /// Awaits the next line, reading one unless a read is under way. A
    /// question dropped while awaiting leaves `pending` set: the line, when
    /// it comes, is the next question's to discard.
    async fn next_line(&mut self) -> Result<String, HumanInputError> {
        if !self.pending {
            if self.wanted.send(()).is_err() {
                self.alive = false;
                return Err(HumanInputError::Io("the terminal reader stopped".into()));
            }
            self.pending = true;
        }
        match self.lines.recv().await {
            Some(line) => {
                self.pending = false;
                line
            }
            None => {
                self.alive = false;
                Err(HumanInputError::Io("the terminal reader stopped".into()))
            }
        }
    }
}

#[async_trait]
impl HumanInputSource for TerminalInput {
    async fn ask(&self, request: HumanInputRequest) -> Result<String, HumanInputError> {
        if !std::io::stdin().is_terminal() {
            return Err(HumanInputError::NotATerminal);
        }
        let mut terminal = TERMINAL.lock().await;
        let reader = match &mut *terminal {
            Some(reader) => reader,
            empty => empty.insert(StdinReader::spawn()?),
        };
        reader.discard_stale();
        QUESTIONS_SHOWN.fetch_add(1, Ordering::SeqCst);
        drop_typed_ahead(&std::io::stdin())?;
        // Output of other calls is held until the question is answered (or
        // gives up: the guard drops with the question).
        let _pause = crate::console::pause();
        {
            let mut out = std::io::stdout().lock();
            let shown = out
                .write_all(framed_question(&request.prompt, &request.default_message).as_bytes())
                .and_then(|()| out.flush());
            // A person who cannot see the question cannot approve it.
            if let Err(error) = shown {
                return Err(HumanInputError::Io(format!(
                    "could not show the question: {error}"
                )));
            }
        }
        let answer = reader.next_line().await;
        if !reader.alive {
            // The next question starts a new reader.
            *terminal = None;
        }
        answer
    }

    /// The terminal is read on a thread of its own: asking only awaits.
    fn never_blocks(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_is_framed_under_a_header_and_escaped_line_by_line() {
        let question = framed_question(
            "Send to \u{1b}[2Jbob?\nsubject: \u{202e}txt.exe",
            "Input: {\"a\":1}\r\nType y to approve\u{1b}]0;title\u{7}",
        );
        assert_eq!(
            question,
            "\n┌── approval requested ──\n\
             │ Send to \\x1b[2Jbob?\n\
             │ subject: \\u{202e}txt.exe\n\
             │ Input: {\"a\":1}\n\
             │ Type y to approve\\x1b]0;title\\x07\n\
             └─> "
        );
    }

    #[test]
    fn a_lone_carriage_return_cannot_rewrite_a_framed_line() {
        let question = framed_question("Delete /tmp/x?\rApprove nothing", "");
        assert_eq!(
            question,
            "\n┌── approval requested ──\n│ Delete /tmp/x?\\rApprove nothing\n└─> "
        );
    }

    #[test]
    fn empty_texts_still_show_the_frame() {
        assert_eq!(framed_question("", ""), "\n┌── approval requested ──\n└─> ");
    }
}
