//! The binary's command line.

use std::{process::Stdio, time::Duration};

use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::Command,
};

/// Every wait is bounded, so that a broken binary fails the test instead of
/// hanging it.
const LIMIT: Duration = Duration::from_secs(20);

#[tokio::test]
async fn bad_flags_print_the_usage_and_exit_with_status_2() {
    for arguments in [
        &["--frobnicate"][..],
        &["--misbehave", "rude"],
        &["--http", "not-an-address"],
        &["--root"],
    ] {
        let output = tokio::time::timeout(
            LIMIT,
            Command::new(env!("CARGO_BIN_EXE_mcp-demo-server"))
                .args(arguments)
                .stdin(Stdio::null())
                .output(),
        )
        .await
        .expect("the binary exits in time")
        .expect("the binary runs");
        assert_eq!(output.status.code(), Some(2), "{arguments:?}");
        assert!(output.stdout.is_empty(), "{arguments:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("usage: mcp-demo-server"), "{stderr}");
    }
}

#[tokio::test]
async fn http_prints_the_url_it_listens_on() {
    let root = tempfile::tempdir().expect("a temporary root");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-demo-server"))
        .arg("--root")
        .arg(root.path())
        .args(["--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the binary starts");
    let stderr = child.stderr.take().expect("piped stderr");
    let line = tokio::time::timeout(LIMIT, BufReader::new(stderr).lines().next_line())
        .await
        .expect("the binary says where it listens in time")
        .expect("stderr is readable")
        .expect("a line");
    let url = line
        .strip_prefix("listening on ")
        .expect("the listening line");
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    let port: u16 = url["http://127.0.0.1:".len()..url.len() - "/mcp".len()]
        .parse()
        .expect("a port");
    assert_ne!(port, 0, "the port actually bound");
    tokio::time::timeout(LIMIT, tokio::net::TcpStream::connect(("127.0.0.1", port)))
        .await
        .expect("connects in time")
        .expect("something listens there");
    child.kill().await.expect("the binary is stopped");
}
