//! Child processes of the workspace's examples, for the tests that run
//! them (`crash_matrix`, `parked_kickoffs`): spawned with their output read
//! as it comes, and killed past a limit. Included with
//! `#[path = "children.rs"] mod children;`.

use std::io::Read as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long one child process may run.
pub(crate) const CHILD_LIMIT: Duration = Duration::from_secs(60);

/// The example program, built next to this test's executable.
pub(crate) fn example() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's executable");
    // target/<profile>/deps/crash_matrix-<hash> → target/<profile>
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/<profile>/deps");
    let program = profile.join("examples").join("durable_refunds");
    assert!(
        program.is_file(),
        "{} is missing: build the examples first \
         (`cargo build -p crew-examples --example durable_refunds --features crash-points`, \
         or run this test through `cargo test --workspace`, which builds them)",
        program.display()
    );
    program
}

/// How a child ended, and what it said.
#[derive(Debug)]
pub(crate) struct Ran {
    pub(crate) what: String,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    /// Killed by SIGKILL at a crash point.
    pub(crate) killed: bool,
    /// Killed by us, past [`CHILD_LIMIT`].
    pub(crate) timed_out: bool,
    pub(crate) code: Option<i32>,
}

impl Ran {
    pub(crate) fn lines(&self) -> impl Iterator<Item = &str> {
        self.stdout.lines()
    }
}

/// A child running, its output read as it comes.
pub(crate) struct Running {
    what: String,
    child: Child,
    stdout: std::thread::JoinHandle<String>,
    stderr: std::thread::JoinHandle<String>,
}

pub(crate) fn spawn(program: &Path, args: &[String]) -> Running {
    let mut child = Command::new(program)
        .args(args)
        .env_remove("CREW_CRASH_AT")
        .env_remove("CREW_JOURNAL_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{} does not start: {error}", program.display()));
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = read(Box::new(child.stdout.take().expect("piped")));
    let stderr = read(Box::new(child.stderr.take().expect("piped")));
    Running {
        what: args.join(" "),
        child,
        stdout,
        stderr,
    }
}

impl Running {
    /// Waits for the child, killing it after [`CHILD_LIMIT`] (then
    /// `timed_out`, which fails the scenario).
    pub(crate) fn wait(mut self) -> Result<Ran, String> {
        let began = Instant::now();
        let mut timed_out = false;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if began.elapsed() < CHILD_LIMIT => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(None) => {
                    timed_out = true;
                    let _ = self.child.kill();
                }
                Err(error) => return Err(format!("waiting for `{}`: {error}", self.what)),
            }
        };
        Ok(Ran {
            what: self.what,
            stdout: self.stdout.join().unwrap_or_default(),
            stderr: self.stderr.join().unwrap_or_default(),
            killed: !timed_out && status.signal() == Some(SIGKILL),
            timed_out,
            code: status.code(),
        })
    }
}

/// SIGKILL's number (9 on every unix this runs on).
pub(crate) const SIGKILL: i32 = 9;
