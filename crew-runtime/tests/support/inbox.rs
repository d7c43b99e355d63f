//! `crew-inbox serve` as a child process, for the tests that talk to it
//! over HTTP.

use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};

/// A running `crew-inbox serve`, killed when dropped.
pub(crate) struct ServedInbox {
    pub(crate) child: Child,
    /// Where it serves: `http://127.0.0.1:PORT`.
    pub(crate) origin: String,
}

impl Drop for ServedInbox {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `program` (the `crew-inbox` binary:
/// `env!("CARGO_BIN_EXE_crew-inbox")`) as `serve --store URL` on a free
/// port of 127.0.0.1, with `options`; returns once it says where it
/// serves.
pub(crate) fn serve_inbox(program: &str, url: &str, options: &[&str]) -> ServedInbox {
    let mut child = Command::new(program)
        .args(["serve", "--store", url, "--listen", "127.0.0.1:0"])
        .args(options)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("crew-inbox starts");
    let stderr = child.stderr.take().expect("its standard error");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let origin = loop {
        let line = lines
            .next()
            .expect("crew-inbox says where it serves")
            .expect("a line");
        if let Some(at) = line.find("http://") {
            break line[at..]
                .split_whitespace()
                .next()
                .expect("the origin")
                .to_owned();
        }
    };
    // Keep draining its log so that it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    ServedInbox { child, origin }
}
