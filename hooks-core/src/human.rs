//! Where answers to `request_human_input` come from.

use std::collections::VecDeque;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::mpsc;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Why no answer could be had from a person.
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
}

/// A place to get answers from a person: the terminal, a script (in tests),
/// a channel or a callback (a web UI, a chat approval).
pub trait HumanInputSource: Send + Sync {
    /// Shows `prompt` and `default_message` and returns one answer (the
    /// caller trims it).
    fn ask(&self, prompt: &str, default_message: &str) -> Result<String, HumanInputError>;
}

/// Asks on the terminal, pausing the crew's console output meanwhile.
///
/// Standard input that is not a terminal (a pipe, `/dev/null`, a CI job) is
/// refused: an approval must come from a person.
#[derive(Debug, Clone, Default)]
pub struct TerminalInput {
    timeout: Option<Duration>,
}

impl TerminalInput {
    /// A terminal source that waits as long as it takes.
    pub fn new() -> Self {
        TerminalInput::default()
    }

    /// Gives up with [`HumanInputError::TimedOut`] after `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

fn read_stdin_line() -> Result<String, HumanInputError> {
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) => Err(HumanInputError::Closed),
        Ok(_) => Ok(line),
        Err(error) => Err(HumanInputError::Io(error.to_string())),
    }
}

impl HumanInputSource for TerminalInput {
    fn ask(&self, prompt: &str, default_message: &str) -> Result<String, HumanInputError> {
        if !std::io::stdin().is_terminal() {
            return Err(HumanInputError::NotATerminal);
        }
        let _pause = crate::console::pause();
        {
            let mut out = std::io::stdout().lock();
            // A prompt that cannot be shown still gets its answer read.
            let _ = write!(out, "\n{prompt}\n{default_message}\n> ");
            let _ = out.flush();
        }
        match self.timeout {
            None => read_stdin_line(),
            Some(timeout) => {
                // Reading stdin cannot be interrupted; the reader thread
                // stays parked on the terminal until a line arrives.
                let (sender, receiver) = mpsc::channel();
                std::thread::spawn(move || {
                    let _ = sender.send(read_stdin_line());
                });
                receiver
                    .recv_timeout(timeout)
                    .map_err(|_| HumanInputError::TimedOut(timeout))?
            }
        }
    }
}

/// Replays fixed answers in order, then fails with
/// [`HumanInputError::Exhausted`]. Records every prompt it was shown.
#[derive(Debug, Default)]
pub struct ScriptedInput {
    answers: Mutex<VecDeque<Result<String, HumanInputError>>>,
    prompts: Mutex<Vec<(String, String)>>,
}

impl ScriptedInput {
    /// A source that gives these answers, one per question.
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
    pub fn then_fail(self, error: HumanInputError) -> Self {
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(Err(error));
        self
    }

    /// The `(prompt, default_message)` pairs asked so far.
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
pub struct CallbackInput<F>(F);

impl<F> CallbackInput<F>
where
    F: Fn(&str, &str) -> Result<String, HumanInputError> + Send + Sync,
{
    /// A source that calls `ask(prompt, default_message)` for each question.
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
    pub fn reply(self, answer: impl Into<String>) -> bool {
        self.reply.send(answer.into()).is_ok()
    }
}

/// Sends each question over a channel to another thread (a UI loop) and
/// waits for its reply, up to a timeout.
#[derive(Debug)]
pub struct ChannelInput {
    requests: Mutex<mpsc::Sender<HumanInputRequest>>,
    timeout: Duration,
}

impl ChannelInput {
    /// A source and the receiving end of its questions. A question not
    /// answered within `timeout`, or whose request is dropped unanswered,
    /// fails.
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
