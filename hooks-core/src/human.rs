//! Where answers to `request_human_input` come from.

use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Why no answer could be had from a person.
///
/// Every one of them makes `request_human_input` an error, and `?` in a
/// `PRE_TOOL_CALL` hook turns that error into a block.
///
/// ```
/// use hooks_core::{HookAborted, HumanInputError};
///
/// let error = HumanInputError::SourceFailed("the chat service is down".into());
/// assert_eq!(error.to_string(), "the answer source failed: the chat service is down");
/// let block = HookAborted::from(error);
/// assert_eq!(block.source, "human-input");
/// assert_eq!(
///     block.reason,
///     "no human approval: the answer source failed: the chat service is down"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HumanInputError {
    /// The input was closed before a line came (end of file).
    #[error("human input is closed: no answer can be read")]
    Closed,
    /// Standard input is not a terminal, so no person can be asked.
    #[error("standard input is not a terminal: no person can be asked")]
    NotATerminal,
    /// No answer came in time.
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    /// A scripted source ran out of answers.
    #[error("the scripted answers are used up")]
    Exhausted,
    /// Reading the answer failed.
    #[error("reading the answer failed: {0}")]
    Io(String),
    /// The source itself failed: it panicked, or a source of your own
    /// reports a failure of its kind (a web UI that cannot be reached).
    #[error("the answer source failed: {0}")]
    SourceFailed(String),
}

/// A place to get answers from a person: the terminal, a script (in tests),
/// a channel or a callback (a web UI, a chat approval).
///
/// A source is free to fail in any way: `request_human_input` turns an
/// error, a timeout, a closed input and a panic of the source alike into an
/// error, so a gate written with `?` refuses. The texts it is given may hold
/// what a model or a tool wrote: a source that shows them on a terminal
/// escapes them with [`console::escape_control`](crate::console::escape_control)
/// (as [`TerminalInput`] does), and one that shows them in a web page
/// escapes them for HTML.
///
/// ```
/// use hooks_core::{HumanInputError, HumanInputSource};
///
/// /// Approves nothing, without asking anyone.
/// struct Nobody;
///
/// impl HumanInputSource for Nobody {
///     fn ask(&self, _prompt: &str, _default_message: &str) -> Result<String, HumanInputError> {
///         Err(HumanInputError::SourceFailed("nobody is on call".into()))
///     }
/// }
/// assert!(Nobody.ask("Deploy?", "yes/no").is_err());
/// ```
pub trait HumanInputSource: Send + Sync {
    /// Shows `prompt` and `default_message` and returns one answer (the
    /// caller trims it).
    fn ask(&self, prompt: &str, default_message: &str) -> Result<String, HumanInputError>;
}

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
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use hooks_core::{HumanInputSource, TerminalInput};
///
/// // Give up (and so refuse) after five minutes without an answer.
/// let source: Arc<dyn HumanInputSource> =
///     Arc::new(TerminalInput::new().with_timeout(Duration::from_secs(300)));
/// # let _ = source;
/// ```
#[derive(Debug, Clone, Default)]
pub struct TerminalInput {
    timeout: Option<Duration>,
}

impl TerminalInput {
    /// A terminal source that waits as long as it takes.
    ///
    /// ```
    /// let source = hooks_core::TerminalInput::new();
    /// # let _ = source;
    /// ```
    pub fn new() -> Self {
        TerminalInput::default()
    }

    /// Gives up with [`HumanInputError::TimedOut`] after `timeout`.
    ///
    /// A line the person types after a question gave up is not taken as
    /// the answer to the next question.
    ///
    /// ```
    /// use std::time::Duration;
    /// let source = hooks_core::TerminalInput::new().with_timeout(Duration::from_secs(60));
    /// # let _ = source;
    /// ```
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
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

/// The one thread that reads answers from standard input.
///
/// Reading a terminal cannot be interrupted, so a question that gives up
/// leaves its read behind. Were each question to start a reader of its
/// own, two readers would then split the next answer between them, and the
/// bytes one of them got could spell an approval nobody typed. A single
/// reader, asked for one line at a time, hands every line to exactly one
/// question, and a line read for a question that gave up is thrown away.
struct StdinReader {
    /// Asks the reader for one more line.
    wanted: mpsc::Sender<()>,
    /// The lines it read, in order.
    lines: mpsc::Receiver<Result<String, HumanInputError>>,
    /// A line was asked for and not taken: the reader is reading it, or it
    /// waits in `lines`.
    pending: bool,
    /// The reader thread is still there to read.
    alive: bool,
}

static STDIN_READER: Mutex<Option<StdinReader>> = Mutex::new(None);

impl StdinReader {
    fn spawn() -> Result<Self, HumanInputError> {
        let (wanted, requests) = mpsc::channel::<()>();
        let (sender, lines) = mpsc::channel();
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

    /// Waits for the next line, reading one unless a read is under way.
    fn next_line(&mut self, timeout: Option<Duration>) -> Result<String, HumanInputError> {
        if !self.pending {
            if self.wanted.send(()).is_err() {
                self.alive = false;
                return Err(HumanInputError::Io("the terminal reader stopped".into()));
            }
            self.pending = true;
        }
        let line = match timeout {
            None => self.lines.recv().map_err(|_| None),
            Some(timeout) => self
                .lines
                .recv_timeout(timeout)
                .map_err(|error| match error {
                    mpsc::RecvTimeoutError::Timeout => Some(HumanInputError::TimedOut(timeout)),
                    mpsc::RecvTimeoutError::Disconnected => None,
                }),
        };
        match line {
            Ok(line) => {
                self.pending = false;
                line
            }
            Err(Some(timed_out)) => Err(timed_out),
            Err(None) => {
                self.alive = false;
                Err(HumanInputError::Io("the terminal reader stopped".into()))
            }
        }
    }
}

impl HumanInputSource for TerminalInput {
    fn ask(&self, prompt: &str, default_message: &str) -> Result<String, HumanInputError> {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Err(HumanInputError::NotATerminal);
        }
        let _pause = crate::console::pause();
        // The state is a flag and two channel ends, each changed in one
        // step: a poisoned lock still guards a consistent reader.
        let mut slot = STDIN_READER.lock().unwrap_or_else(PoisonError::into_inner);
        let reader = match &mut *slot {
            Some(reader) => reader,
            empty => empty.insert(StdinReader::spawn()?),
        };
        reader.discard_stale();
        QUESTIONS_SHOWN.fetch_add(1, Ordering::SeqCst);
        drop_typed_ahead(&stdin)?;
        {
            let mut out = std::io::stdout().lock();
            let shown = out
                .write_all(framed_question(prompt, default_message).as_bytes())
                .and_then(|()| out.flush());
            // A person who cannot see the question cannot approve it.
            if let Err(error) = shown {
                return Err(HumanInputError::Io(format!(
                    "could not show the question: {error}"
                )));
            }
        }
        let answer = reader.next_line(self.timeout);
        if !reader.alive {
            // The next question starts a new reader.
            *slot = None;
        }
        answer
    }
}

/// Replays fixed answers in order, then fails with
/// [`HumanInputError::Exhausted`]. Records every prompt it was shown.
///
/// ```
/// use hooks_core::{HumanInputError, HumanInputSource, ScriptedInput};
///
/// let script = ScriptedInput::new(["yes"]);
/// assert_eq!(script.ask("Send?", "yes/no"), Ok("yes".to_owned()));
/// assert_eq!(script.ask("Buy?", "yes/no"), Err(HumanInputError::Exhausted));
/// ```
#[derive(Debug, Default)]
pub struct ScriptedInput {
    answers: Mutex<VecDeque<Result<String, HumanInputError>>>,
    prompts: Mutex<Vec<(String, String)>>,
}

impl ScriptedInput {
    /// A source that gives these answers, one per question.
    ///
    /// ```
    /// use hooks_core::{HumanInputSource, ScriptedInput};
    /// let script = ScriptedInput::new(["no", "yes"]);
    /// assert_eq!(script.ask("first?", "").as_deref(), Ok("no"));
    /// assert_eq!(script.ask("second?", "").as_deref(), Ok("yes"));
    /// ```
    pub fn new<I, S>(answers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ScriptedInput {
            answers: Mutex::new(answers.into_iter().map(|a| Ok(a.into())).collect()),
            prompts: Mutex::new(Vec::new()),
        }
    }

    /// Queues a failure as the next answer.
    ///
    /// ```
    /// use hooks_core::{HumanInputError, HumanInputSource, ScriptedInput};
    /// let script = ScriptedInput::new(["yes"]).then_fail(HumanInputError::Closed);
    /// assert!(script.ask("first?", "").is_ok());
    /// assert_eq!(script.ask("second?", ""), Err(HumanInputError::Closed));
    /// ```
    pub fn then_fail(self, error: HumanInputError) -> Self {
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(Err(error));
        self
    }

    /// The `(prompt, default_message)` pairs asked so far.
    ///
    /// ```
    /// use hooks_core::{HumanInputSource, ScriptedInput};
    /// let script = ScriptedInput::new(["yes"]);
    /// let _ = script.ask("Send?", "yes/no");
    /// assert_eq!(script.prompts(), [("Send?".to_owned(), "yes/no".to_owned())]);
    /// ```
    pub fn prompts(&self) -> Vec<(String, String)> {
        self.prompts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl HumanInputSource for ScriptedInput {
    fn ask(&self, prompt: &str, default_message: &str) -> Result<String, HumanInputError> {
        self.prompts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((prompt.to_owned(), default_message.to_owned()));
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
            .unwrap_or(Err(HumanInputError::Exhausted))
    }
}

/// Asks through a function: a web UI, a chat message, a policy service.
///
/// ```
/// use hooks_core::{CallbackInput, HumanInputSource};
///
/// // A policy that approves only e-mails to the company's own domain.
/// let policy = CallbackInput::new(|prompt: &str, _message: &str| {
///     Ok(if prompt.contains("@example.com") { "yes" } else { "no" }.to_owned())
/// });
/// assert_eq!(policy.ask("Send to team@example.com?", "").as_deref(), Ok("yes"));
/// ```
pub struct CallbackInput<F>(F);

impl<F> CallbackInput<F>
where
    F: Fn(&str, &str) -> Result<String, HumanInputError> + Send + Sync,
{
    /// A source that calls `ask(prompt, default_message)` for each question.
    ///
    /// ```
    /// use hooks_core::{CallbackInput, HumanInputError, HumanInputSource};
    /// let nobody = CallbackInput::new(|_: &str, _: &str| Err(HumanInputError::Closed));
    /// assert!(nobody.ask("Send?", "").is_err());
    /// ```
    pub fn new(ask: F) -> Self {
        CallbackInput(ask)
    }
}

impl<F> HumanInputSource for CallbackInput<F>
where
    F: Fn(&str, &str) -> Result<String, HumanInputError> + Send + Sync,
{
    fn ask(&self, prompt: &str, default_message: &str) -> Result<String, HumanInputError> {
        (self.0)(prompt, default_message)
    }
}

/// One question sent through a [`ChannelInput`]; answer it with
/// [`reply`](Self::reply).
///
/// ```
/// use std::time::Duration;
/// use hooks_core::{ChannelInput, HumanInputSource};
///
/// let (source, questions) = ChannelInput::new(Duration::from_secs(30));
/// let ui = std::thread::spawn(move || {
///     let question = questions.recv().expect("a question");
///     assert_eq!(question.prompt, "Send?");
///     question.reply("yes")
/// });
/// assert_eq!(source.ask("Send?", "yes/no").as_deref(), Ok("yes"));
/// assert!(ui.join().expect("the UI thread"));
/// ```
#[derive(Debug)]
pub struct HumanInputRequest {
    /// The question.
    pub prompt: String,
    /// The explanation shown with it.
    pub default_message: String,
    reply: mpsc::Sender<String>,
}

impl HumanInputRequest {
    /// Sends the answer back to the waiting hook. Returns `false` if the
    /// hook stopped waiting (it timed out).
    ///
    /// ```
    /// use std::time::Duration;
    /// use hooks_core::{ChannelInput, HumanInputSource};
    ///
    /// let (source, questions) = ChannelInput::new(Duration::from_millis(1));
    /// assert!(source.ask("Send?", "").is_err(), "nobody answered in time");
    /// let late = questions.recv().expect("the question was sent");
    /// assert!(!late.reply("yes"), "nobody waits for it any more");
    /// ```
    pub fn reply(self, answer: impl Into<String>) -> bool {
        self.reply.send(answer.into()).is_ok()
    }
}

/// Sends each question over a channel to another thread (a UI loop) and
/// waits for its reply, up to a timeout.
///
/// ```
/// use std::time::Duration;
/// use hooks_core::{ChannelInput, HumanInputError, HumanInputSource};
///
/// let (source, questions) = ChannelInput::new(Duration::from_secs(30));
/// drop(questions); // the UI is gone
/// assert_eq!(source.ask("Send?", ""), Err(HumanInputError::Closed));
/// ```
#[derive(Debug)]
pub struct ChannelInput {
    requests: Mutex<mpsc::Sender<HumanInputRequest>>,
    timeout: Duration,
}

impl ChannelInput {
    /// A source and the receiving end of its questions. A question not
    /// answered within `timeout`, or whose request is dropped unanswered,
    /// fails.
    ///
    /// ```
    /// use std::time::Duration;
    /// use hooks_core::ChannelInput;
    ///
    /// let (source, questions) = ChannelInput::new(Duration::from_secs(300));
    /// # let _ = (source, questions);
    /// ```
    pub fn new(timeout: Duration) -> (Self, mpsc::Receiver<HumanInputRequest>) {
        let (sender, receiver) = mpsc::channel();
        (
            ChannelInput {
                requests: Mutex::new(sender),
                timeout,
            },
            receiver,
        )
    }
}

impl HumanInputSource for ChannelInput {
    fn ask(&self, prompt: &str, default_message: &str) -> Result<String, HumanInputError> {
        let (reply, answer) = mpsc::channel();
        let request = HumanInputRequest {
            prompt: prompt.to_owned(),
            default_message: default_message.to_owned(),
            reply,
        };
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(request)
            .map_err(|_| HumanInputError::Closed)?;
        answer
            .recv_timeout(self.timeout)
            .map_err(|error| match error {
                mpsc::RecvTimeoutError::Timeout => HumanInputError::TimedOut(self.timeout),
                mpsc::RecvTimeoutError::Disconnected => HumanInputError::Closed,
            })
    }
}

impl From<HumanInputError> for crate::HookAborted {
    fn from(error: HumanInputError) -> Self {
        crate::HookAborted::new(format!("no human approval: {error}"), "human-input")
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
