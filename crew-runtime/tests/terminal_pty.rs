//! The terminal is not the model's (SPEC §8), checked on a real
//! pseudo-terminal: a crew runs in a child process whose standard input and
//! output are a pty, a tool result and the model's text carry escape
//! sequences and a bidirectional override, and the test reads what the
//! terminal was sent and types as a person would.
//!
//! - Everything the model or a tool wrote reaches the terminal escaped: no
//!   raw ESC, BEL or U+202E, on the verbose console or in the question.
//! - The question stands apart under its `approval requested` header.
//! - A line typed before the question appeared does not answer it; a line
//!   typed after it does.
//! - A question that timed out does not keep the answer meant for the next,
//!   nor, on a terminal in raw mode, a key pressed before the next was shown.
//!
//! Each wait is bounded; a child still running at the end is killed. Where
//! no pseudo-terminal can be opened the tests say so and check nothing
//! else; on Linux and macOS one always can.

mod common;

#[cfg(unix)]
use std::sync::Arc;
#[cfg(unix)]
use std::time::Duration;

#[cfg(unix)]
use common::*;
#[cfg(unix)]
use crew_runtime::DEFAULT_HUMAN_INPUT_TIMEOUT;
use crew_runtime::TerminalInput;
#[cfg(unix)]
#[cfg(unix)]
use crew_runtime::guards::ApprovalGate;
use crew_runtime::prelude::*;

/// What a tool and the model write to take over the terminal: clear the
/// screen, retitle the window, and reverse the text that follows.
#[cfg(unix)]
const HOSTILE: &str = "\u{1b}[2J\u{1b}]0;pwned\u{7}\u{202e}gnp.exe";
/// The same text as the terminal must show it.
#[cfg(unix)]
const HOSTILE_SHOWN: &str = r"\x1b[2J\x1b]0;pwned\x07\u{202e}gnp.exe";
#[cfg(unix)]
const HEADER: &str = "┌── approval requested ──";
#[cfg(unix)]
const ANSWER_MARKER: &str = "└─> ";

#[cfg(unix)]
mod pty {
    //! A pseudo-terminal running one test of this binary as a child.

    use std::fs::File;
    use std::io::{Read, Write};
    use std::process::{Child, Command, ExitStatus, Stdio};
    use std::sync::{Arc, Condvar, Mutex, PoisonError};
    use std::time::{Duration, Instant};

    use rustix::fs::{Mode, OFlags};
    use rustix::io::{FdFlags, fcntl_setfd};
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};

    /// How long any one thing may take before the test gives up (and
    /// fails): generous, for a loaded machine. Nothing is timed.
    const PATIENCE: Duration = Duration::from_secs(60);

    #[derive(Default)]
    struct Screen {
        bytes: Vec<u8>,
        closed: bool,
    }

    /// Everything the child sent to the terminal, as it arrives.
    #[derive(Default)]
    struct Output {
        screen: Mutex<Screen>,
        changed: Condvar,
    }

    /// A child running under a pseudo-terminal; killed if still running
    /// when dropped.
    pub(crate) struct Terminal {
        keyboard: File,
        output: Arc<Output>,
        child: Child,
    }

    impl Terminal {
        /// Opens a pseudo-terminal, types `typed_ahead` into it, and only
        /// then runs the test `test` of this binary in a child with `env`
        /// set, its standard input, output and error on the terminal.
        /// `Err` says why no pseudo-terminal could be had.
        pub(crate) fn run_child(
            test: &str,
            env: &[(&str, &str)],
            typed_ahead: &str,
        ) -> Result<Terminal, String> {
            let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY)
                .map_err(|error| format!("cannot open a pseudo-terminal: {error}"))?;
            // Children of tests running at the same time must not inherit it.
            fcntl_setfd(&master, FdFlags::CLOEXEC)
                .map_err(|error| format!("cannot set close-on-exec: {error}"))?;
            grantpt(&master).map_err(|error| format!("grantpt: {error}"))?;
            unlockpt(&master).map_err(|error| format!("unlockpt: {error}"))?;
            let name = ptsname(&master, Vec::new()).map_err(|error| format!("ptsname: {error}"))?;
            let terminal = rustix::fs::open(
                name.as_c_str(),
                OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|error| format!("cannot open the terminal side of the pty: {error}"))?;

            let mut keyboard = File::from(master);
            // Typed before the child even starts: it waits in the terminal.
            keyboard
                .write_all(typed_ahead.as_bytes())
                .expect("types ahead");
            let screen = keyboard.try_clone().expect("the pty can be read");

            let exe = std::env::current_exe().expect("the test binary knows its path");
            let child = {
                let mut command = Command::new(exe);
                command
                    .args([test, "--exact", "--nocapture", "--test-threads=1"])
                    .args(["--color", "never"])
                    .envs(env.iter().copied())
                    .env_remove("RUST_LOG")
                    .stdin(Stdio::from(terminal.try_clone().expect("dup")))
                    .stdout(Stdio::from(terminal.try_clone().expect("dup")))
                    .stderr(Stdio::from(terminal));
                // `command` drops here with this process's copies of the
                // terminal side: once the child is gone, reading the pty
                // ends.
                command.spawn().expect("the test binary runs again")
            };

            let output = Arc::new(Output::default());
            let reader = Arc::clone(&output);
            std::thread::spawn(move || read_screen(screen, &reader));
            Ok(Terminal {
                keyboard,
                output,
                child,
            })
        }

        /// Types `text` on the terminal's keyboard.
        pub(crate) fn type_text(&mut self, text: &str) {
            self.keyboard.write_all(text.as_bytes()).expect("types");
        }

        /// What the terminal was sent so far, with the terminal's `\r\n`
        /// line ends as `\n`.
        pub(crate) fn text(&self) -> String {
            let screen = self
                .output
                .screen
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            String::from_utf8_lossy(&screen.bytes).replace("\r\n", "\n")
        }

        /// The raw bytes the terminal was sent so far.
        pub(crate) fn bytes(&self) -> Vec<u8> {
            self.output
                .screen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .bytes
                .clone()
        }

        /// Waits until `needle` was shown `times` times; fails the test with
        /// what was shown if it is not within the patience.
        pub(crate) fn wait_for(&self, needle: &str, times: usize) {
            let deadline = Instant::now() + PATIENCE;
            let mut screen = self
                .output
                .screen
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            loop {
                let text = String::from_utf8_lossy(&screen.bytes).replace("\r\n", "\n");
                if text.matches(needle).count() >= times {
                    return;
                }
                let now = Instant::now();
                assert!(
                    !screen.closed && now < deadline,
                    "{needle:?} was not shown {times} time(s); the terminal shows:\n{text}"
                );
                screen = self
                    .output
                    .changed
                    .wait_timeout(screen, deadline - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }

        /// Waits for the child to close the terminal and exit.
        pub(crate) fn wait_for_exit(&mut self) -> ExitStatus {
            let deadline = Instant::now() + PATIENCE;
            {
                let mut screen = self
                    .output
                    .screen
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                while !screen.closed {
                    let now = Instant::now();
                    if now >= deadline {
                        let text = String::from_utf8_lossy(&screen.bytes).replace("\r\n", "\n");
                        panic!("the child did not finish; the terminal shows:\n{text}");
                    }
                    screen = self
                        .output
                        .changed
                        .wait_timeout(screen, deadline - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
            self.child.wait().expect("the child is waited for")
        }
    }

    impl Drop for Terminal {
        fn drop(&mut self) {
            if let Ok(None) = self.child.try_wait() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }

    /// Copies what the child writes to the terminal into `output`, until
    /// the terminal side is closed (Linux reports that as an error).
    fn read_screen(mut screen: File, output: &Output) {
        let mut buffer = [0u8; 4096];
        loop {
            let read = screen.read(&mut buffer);
            let mut shown = output.screen.lock().unwrap_or_else(PoisonError::into_inner);
            match read {
                Ok(n) if n > 0 => shown.bytes.extend_from_slice(&buffer[..n]),
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                _ => {
                    shown.closed = true;
                    output.changed.notify_all();
                    return;
                }
            }
            output.changed.notify_all();
        }
    }
}

/// Fails the test if a character a terminal acts on reached it raw. Only
/// the terminal's own line ends (`\r\n`) may be there.
#[cfg(unix)]
fn assert_no_raw_controls(bytes: &[u8], shown: &str) {
    let text = String::from_utf8_lossy(bytes).replace("\r\n", "\n");
    let raw: Vec<char> = text
        .chars()
        .filter(|&c| {
            c != '\n'
                && (c.is_control()
                    || ('\u{202a}'..='\u{202e}').contains(&c)
                    || ('\u{2066}'..='\u{2069}').contains(&c))
        })
        .collect();
    assert!(
        raw.is_empty(),
        "raw control characters {raw:?} reached the terminal:\n{shown}"
    );
}

#[cfg(unix)]
const ESCAPING_CHILD: &str = "TERMINAL_PTY_ESCAPING_CHILD";

#[test]
fn the_terminal_shows_model_text_escaped_and_takes_only_answers_typed_after_the_question() {
    #[cfg(unix)]
    {
        if is_child(ESCAPING_CHILD) {
            return escaping_child();
        }
        let test =
            "the_terminal_shows_model_text_escaped_and_takes_only_answers_typed_after_the_question";
        // `y` typed before any question: were it taken, the first e-mail
        // would be approved (and the `n` below would refuse the second).
        let mut terminal = match pty::Terminal::run_child(test, &[(ESCAPING_CHILD, "1")], "y\n") {
            Ok(terminal) => terminal,
            Err(reason) => {
                println!("skipped: {reason}");
                return;
            }
        };
        terminal.wait_for(HEADER, 1);
        terminal.wait_for(ANSWER_MARKER, 1);
        terminal.type_text("n\n");
        terminal.wait_for(HEADER, 2);
        terminal.wait_for(ANSWER_MARKER, 2);
        terminal.type_text("y\n");
        let status = terminal.wait_for_exit();
        let shown = terminal.text();
        assert!(status.success(), "the child failed ({status}):\n{shown}");

        // Only the e-mail approved after its question was sent.
        assert!(shown.contains("\nSENT=bob@example.com\n"), "{shown}");
        assert!(
            shown.contains(
                "[Assistant]   blocked by approval-gate: refused by a person (answered \"n\")"
            ),
            "{shown}"
        );
        // The questions, apart from the agent's output and escaped.
        let first_question = format!(
            "\n{HEADER}\n│ Send an e-mail to alice@example.com about {HOSTILE_SHOWN}?\n\
             │ Answer y or yes to approve; anything else refuses the call.\n{ANSWER_MARKER}n\n"
        );
        assert!(shown.contains(&first_question), "{shown}");
        assert!(
            shown.contains(&format!(
                "\n{HEADER}\n│ Send an e-mail to bob@example.com about weekly notes?\n"
            )),
            "{shown}"
        );
        // The tool's result and the model's answer, escaped on the verbose
        // console.
        assert!(
            shown.contains(&format!(
                "[Assistant] ← web_search: results {HOSTILE_SHOWN}\n"
            )),
            "{shown}"
        );
        assert!(
            shown.contains(&format!("[Assistant] final answer: done {HOSTILE_SHOWN}\n")),
            "{shown}"
        );
        assert_no_raw_controls(&terminal.bytes(), &shown);
    }
    #[cfg(not(unix))]
    println!("skipped: pseudo-terminals are only opened on Unix");
}

/// The child: a verbose crew whose `web_search` returns [`HOSTILE`] text,
/// whose model puts it in an e-mail subject and its final answer, and whose
/// e-mails are gated by the ready-made gate asking on the terminal.
#[cfg(unix)]
fn escaping_child() {
    let sent = log::<String>();
    let sink = sent.clone();
    let send = Tool::dynamic(
        "send_email",
        "Sends an e-mail",
        json!({"type": "object", "properties": {"to": {"type": "string"}}}),
        move |args| {
            let to = args["to"].as_str().unwrap_or("").to_owned();
            push(&sink, to.clone());
            Ok::<_, String>(json!(format!("sent to {to}")))
        },
    );
    let search = Tool::dynamic(
        "web_search",
        "Searches the web",
        json!({"type": "object"}),
        |_| Ok::<_, String>(json!(format!("results {HOSTILE}"))),
    );
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "release notes"}))
            .call(
                "send_email",
                json!({"to": "alice@example.com", "subject": HOSTILE}),
            )
            .call(
                "send_email",
                json!({"to": "bob@example.com", "subject": "weekly notes"}),
            )
            .answer(format!("done {HOSTILE}")),
    );
    let assistant = agent("Assistant", vec![search, send], &llm);
    // The question shows the subject raw: the terminal must escape it.
    let gate = ApprovalGate::for_tools(["send_email"]).prompt(|ctx| {
        format!(
            "Send an e-mail to {} about {}?",
            ctx.tool_input["to"].as_str().unwrap_or_default(),
            ctx.tool_input["subject"].as_str().unwrap_or_default()
        )
    });
    let crew = Crew::builder()
        .name("mailroom")
        .agent(assistant.clone())
        .task(Task::builder("Email the team").agent(&assistant).build())
        .global_registry(fresh_registry())
        .verbose(true)
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            gate.pre_hook(),
        )
        .build()
        .expect("builds");
    // No human-input source is set: the crew asks on the terminal.
    crew.kickoff_blocking(()).expect("runs");
    println!("SENT={}", take(&sent).join(","));
}

#[cfg(unix)]
const TIMEOUT_CHILD: &str = "TERMINAL_PTY_TIMEOUT_CHILD";

#[test]
fn a_question_that_timed_out_does_not_keep_the_next_answer() {
    #[cfg(unix)]
    {
        if is_child(TIMEOUT_CHILD) {
            return timeout_child();
        }
        let test = "a_question_that_timed_out_does_not_keep_the_next_answer";
        let mut terminal = match pty::Terminal::run_child(test, &[(TIMEOUT_CHILD, "1")], "") {
            Ok(terminal) => terminal,
            Err(reason) => {
                println!("skipped: {reason}");
                return;
            }
        };
        // The first question goes unanswered until it gives up; the read
        // it started is still waiting on the terminal when the second
        // question comes.
        terminal.wait_for("FIRST_SENT=", 1);
        terminal.wait_for(HEADER, 2);
        terminal.wait_for(ANSWER_MARKER, 2);
        terminal.type_text("y\n");
        let status = terminal.wait_for_exit();
        let shown = terminal.text();
        assert!(status.success(), "the child failed ({status}):\n{shown}");
        assert!(shown.contains("\nFIRST_SENT=\n"), "{shown}");
        assert!(
            shown.contains("no human approval: no answer within 200ms"),
            "{shown}"
        );
        assert!(shown.contains("\nSECOND_SENT=bob@example.com\n"), "{shown}");
        assert_no_raw_controls(&terminal.bytes(), &shown);
    }
    #[cfg(not(unix))]
    println!("skipped: pseudo-terminals are only opened on Unix");
}

/// The child: one crew whose terminal question times out (the crew's
/// human-input timeout), then one that waits for its answer.
#[cfg(unix)]
fn timeout_child() {
    for (label, to, timeout) in [
        ("FIRST", "alice@example.com", Duration::from_millis(200)),
        ("SECOND", "bob@example.com", DEFAULT_HUMAN_INPUT_TIMEOUT),
    ] {
        let sent = log::<String>();
        let sink = sent.clone();
        let send = Tool::dynamic(
            "send_email",
            "Sends an e-mail",
            json!({"type": "object", "properties": {"to": {"type": "string"}}}),
            move |args| {
                let to = args["to"].as_str().unwrap_or("").to_owned();
                push(&sink, to.clone());
                Ok::<_, String>(json!(format!("sent to {to}")))
            },
        );
        let llm = Arc::new(
            ScriptedLlm::new()
                .call("send_email", json!({ "to": to }))
                .answer("done"),
        );
        let assistant = agent("Assistant", vec![send], &llm);
        let crew = Crew::builder()
            .agent(assistant.clone())
            .task(Task::builder("Email the team").agent(&assistant).build())
            .global_registry(fresh_registry())
            .verbose(true)
            .human_input(Arc::new(TerminalInput::new()))
            .human_input_timeout(timeout)
            .async_hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("approval-gate"),
                ApprovalGate::for_tools(["send_email"]).pre_hook(),
            )
            .build()
            .expect("builds");
        crew.kickoff_blocking(()).expect("runs");
        println!("{label}_SENT={}", take(&sent).join(","));
    }
}

#[cfg(unix)]
const RAW_MODE_CHILD: &str = "TERMINAL_PTY_RAW_MODE_CHILD";
/// The file whose existence tells the raw-mode child to go on.
#[cfg(unix)]
const GO_FILE: &str = "TERMINAL_PTY_GO_FILE";

#[test]
fn in_raw_mode_a_key_pressed_between_questions_does_not_answer_the_next() {
    #[cfg(unix)]
    {
        if is_child(RAW_MODE_CHILD) {
            return raw_mode_child();
        }
        let test = "in_raw_mode_a_key_pressed_between_questions_does_not_answer_the_next";
        let go = std::env::temp_dir().join(format!("terminal-pty-go-{}", std::process::id()));
        let _ = std::fs::remove_file(&go);
        let go_path = go.to_string_lossy().into_owned();
        let mut terminal =
            match pty::Terminal::run_child(test, &[(RAW_MODE_CHILD, "1"), (GO_FILE, &go_path)], "")
            {
                Ok(terminal) => terminal,
                Err(reason) => {
                    println!("skipped: {reason}");
                    return;
                }
            };
        // The first question gave up; the read it started still waits on
        // the terminal. A `y` pressed now, before the next question, reaches
        // that read (or waits in the terminal): either way it must not count.
        terminal.wait_for("FIRST_SENT=", 1);
        terminal.type_text("y");
        std::fs::write(&go, b"go").expect("the go file is written");
        terminal.wait_for(HEADER, 2);
        terminal.wait_for(ANSWER_MARKER, 2);
        // Enter alone (a carriage return in raw mode): an empty answer.
        terminal.type_text("\r");
        terminal.wait_for(HEADER, 3);
        terminal.wait_for(ANSWER_MARKER, 3);
        terminal.type_text("y\r");
        let status = terminal.wait_for_exit();
        let _ = std::fs::remove_file(&go);
        let shown = terminal.text();
        assert!(status.success(), "the child failed ({status}):\n{shown}");
        assert!(shown.contains("\nFIRST_SENT=\n"), "{shown}");
        assert!(
            shown.contains("refused by a person (answered \"\")"),
            "{shown}"
        );
        assert!(shown.contains("\nSECOND_SENT=\n"), "{shown}");
        assert!(
            shown.contains("\nTHIRD_SENT=carol@example.com\n"),
            "{shown}"
        );
    }
    #[cfg(not(unix))]
    println!("skipped: pseudo-terminals are only opened on Unix");
}

/// The child: the terminal in raw mode (as a full-screen program leaves
/// it), then three crews: one whose question times out, two that wait.
#[cfg(unix)]
fn raw_mode_child() {
    use std::path::PathBuf;
    use std::time::Instant;

    use rustix::termios::{OptionalActions, tcgetattr, tcsetattr};

    let stdin = std::io::stdin();
    let mut termios = tcgetattr(&stdin).expect("standard input is a terminal");
    termios.make_raw();
    tcsetattr(&stdin, OptionalActions::Now, &termios).expect("raw mode");
    let go = PathBuf::from(std::env::var_os(GO_FILE).expect("the go file is named"));

    for (label, to, timeout) in [
        ("FIRST", "alice@example.com", Duration::from_millis(200)),
        ("SECOND", "bob@example.com", DEFAULT_HUMAN_INPUT_TIMEOUT),
        ("THIRD", "carol@example.com", DEFAULT_HUMAN_INPUT_TIMEOUT),
    ] {
        let sent = log::<String>();
        let sink = sent.clone();
        let send = Tool::dynamic(
            "send_email",
            "Sends an e-mail",
            json!({"type": "object", "properties": {"to": {"type": "string"}}}),
            move |args| {
                let to = args["to"].as_str().unwrap_or("").to_owned();
                push(&sink, to.clone());
                Ok::<_, String>(json!(format!("sent to {to}")))
            },
        );
        let llm = Arc::new(
            ScriptedLlm::new()
                .call("send_email", json!({ "to": to }))
                .answer("done"),
        );
        let assistant = agent("Assistant", vec![send], &llm);
        let crew = Crew::builder()
            .agent(assistant.clone())
            .task(Task::builder("Email the team").agent(&assistant).build())
            .global_registry(fresh_registry())
            .verbose(true)
            .human_input(Arc::new(TerminalInput::new()))
            .human_input_timeout(timeout)
            .async_hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("approval-gate"),
                ApprovalGate::for_tools(["send_email"]).pre_hook(),
            )
            .build()
            .expect("builds");
        crew.kickoff_blocking(()).expect("runs");
        println!("{label}_SENT={}", take(&sent).join(","));
        if label == "FIRST" {
            // Wait (bounded) until the key between the questions was pressed.
            let deadline = Instant::now() + Duration::from_secs(60);
            while !go.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}
