//! Streaming: the model's answer reaches a listener word by word, as it
//! arrives, and `POST_MODEL_CALL` sees it whole afterwards.
//!
//! `cargo run --example streaming` — offline: the scripted model streams
//! its answer the way a chat-completions server does, one piece at a time.
//! The crew turns each piece into an `Event::LlmStreamChunk` on its event
//! bus; a listener prints the pieces on one line as they come.

use std::error::Error;
use std::io::Write;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crew_runtime::console;
use crew_runtime::prelude::*;
use crew_runtime::{LlmStreamChunkEvent, POST_MODEL_CALL};

/// What the model answers (streamed word by word).
const ANSWER: &str = "Rust needs no garbage collector: every value has one owner, \
                      and its memory is freed the moment that owner goes out of scope.";

/// Something the screen showed, in order (what the test reads).
#[derive(Debug, Clone, PartialEq)]
enum Shown {
    /// A piece of a streamed answer.
    Delta(String),
    /// A whole line.
    Line(String),
}

#[derive(Default)]
struct ScreenState {
    shown: Vec<Shown>,
    /// Whether nothing is printed, only recorded (for the test).
    quiet: bool,
    /// Whether streamed text is on the current line, not yet ended.
    mid_line: bool,
}

/// Standard output, shared by the stream listener and the hooks: streamed
/// pieces go on the current line, whole lines start a new one.
#[derive(Clone, Default)]
struct Screen {
    state: Arc<Mutex<ScreenState>>,
}

impl Screen {
    /// A screen that records what it would show, and prints nothing.
    #[cfg(test)]
    fn quiet() -> Self {
        let screen = Screen::default();
        screen.lock().quiet = true;
        screen
    }

    /// Prints a piece of the answer of the agent `role` where the last one
    /// ended, flushed at once so a person sees it arrive.
    fn delta(&self, role: &str, text: &str) {
        let mut state = self.lock();
        state.shown.push(Shown::Delta(text.to_owned()));
        let start = if state.mid_line {
            String::new()
        } else {
            format!("[{role}] ")
        };
        state.mid_line = !text.ends_with('\n');
        if state.quiet {
            return;
        }
        // The model chose this text: its line breaks are kept, every other
        // control character is shown escaped.
        let text = text
            .split('\n')
            .map(|piece| console::escape_control(piece))
            .collect::<Vec<_>>()
            .join("\n");
        let _console = console::pause();
        let mut out = std::io::stdout().lock();
        // A closed stdout must not stop the run.
        let _ = write!(out, "{}{text}", console::escape_control(&start));
        let _ = out.flush();
    }

    /// Prints a line of its own, ending a streamed line first.
    fn line(&self, line: impl Into<String>) {
        let line = line.into();
        let (end_stream, quiet) = {
            let mut state = self.lock();
            state.shown.push(Shown::Line(line.clone()));
            (std::mem::take(&mut state.mid_line), state.quiet)
        };
        if quiet {
            return;
        }
        if end_stream {
            console::print_line("");
        }
        console::print_line(&line);
    }

    /// Everything shown so far.
    #[cfg(test)]
    fn shown(&self) -> Vec<Shown> {
        self.lock().shown.clone()
    }

    fn lock(&self) -> MutexGuard<'_, ScreenState> {
        // A listener that panicked mid-push leaves at worst a missing piece.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn run(screen: &Screen) -> Result<String, Box<dyn Error>> {
    // The model takes a moment before it starts answering (simulated), as
    // a real one would; the crew gives each model call at most 30 s.
    let model = ScriptedLlm::new()
        .streaming()
        .latency(Duration::from_millis(200))
        .answer(ANSWER);
    let explainer = Agent::builder("Explainer")
        .goal("Explain Rust in plain words")
        .llm(Arc::new(model))
        .build();
    let task = Task::builder("Explain in one sentence why {language} needs no garbage collector")
        .agent(&explainer)
        .build();

    let hook_screen = screen.clone();
    let crew = Crew::builder()
        .agent(explainer)
        .task(task)
        .model_timeout(Duration::from_secs(30))
        // Runs once the answer is complete: it sees the assembled text, and
        // could still replace it, which a listener cannot.
        .hook(POST_MODEL_CALL, move |ctx: &mut LlmCallHookContext| {
            let words = ctx
                .response
                .as_ref()
                .map_or(0, |response| response.content.split_whitespace().count());
            hook_screen.line(format!(
                "POST_MODEL_CALL sees the whole answer: {words} words"
            ));
        })
        .build()?;

    // The listener sees each piece as soon as the model sends it.
    let live = screen.clone();
    crew.events().subscribe(move |event| {
        if let Event::LlmStreamChunk(LlmStreamChunkEvent {
            chunk, agent_role, ..
        }) = event
        {
            live.delta(agent_role.as_deref().unwrap_or("agent"), chunk);
        }
    });

    screen.line("Task: explain why Rust needs no garbage collector. The answer, as it streams:");
    let output = crew.kickoff([("language", "Rust")]).await?;
    screen.line(format!("final output: {}", output.raw));
    Ok(output.raw)
}

#[tokio::main]
async fn main() -> ExitCode {
    // The lines were printed as they came: nothing is left to print.
    match run(&Screen::default()).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", console::escape_control(&error.to_string()));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn deltas_arrive_in_order_before_the_post_model_call_hook() {
        let screen = Screen::quiet();
        let output = run(&screen).await.expect("the example runs");
        let shown = screen.shown();

        let deltas: Vec<&str> = shown
            .iter()
            .filter_map(|shown| match shown {
                Shown::Delta(text) => Some(text.as_str()),
                Shown::Line(_) => None,
            })
            .collect();
        // Word by word, in the order of the answer, adding up to it.
        let words: Vec<&str> = ANSWER.split_inclusive(' ').collect();
        assert!(words.len() > 1);
        assert_eq!(deltas, words);
        assert_eq!(deltas.concat(), ANSWER);
        assert_eq!(output, ANSWER);

        // Every piece came before the hook's line, which saw the whole answer.
        let hook_line = format!(
            "POST_MODEL_CALL sees the whole answer: {} words",
            ANSWER.split_whitespace().count()
        );
        let hook_at = shown
            .iter()
            .position(|s| *s == Shown::Line(hook_line.clone()))
            .unwrap_or_else(|| panic!("missing {hook_line:?} in {shown:#?}"));
        let last_delta = shown
            .iter()
            .rposition(|s| matches!(s, Shown::Delta(_)))
            .expect("some delta");
        assert!(last_delta < hook_at, "{shown:#?}");
        assert_eq!(
            shown.last(),
            Some(&Shown::Line(format!("final output: {ANSWER}")))
        );
    }
}
