//! A headless Chromium per call, driven through WebDriver.
//!
//! Each [`Browser`] has a `chromedriver` of its own on a free local port,
//! in a process group of its own that the browser's processes join, with
//! a temporary directory of its own. A small watchdog shell kills the
//! group and removes the directory when the `Browser` drops, or when the
//! test binary ends however it ends.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;

/// What the browser tests need that this machine may lack.
const NEEDS: &str = "Chromium and chromedriver";
/// How to get them on Debian (apt pairs the driver with the browser).
const INSTALL: &str = "apt-get install chromium chromium-driver";
/// The names a Chromium or Chrome binary goes by on `PATH`.
const BROWSERS: [&str; 4] = [
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
];
/// How long chromedriver may take to be ready (a cold machine is slow).
const DRIVER_START: Duration = Duration::from_secs(30);
/// The driver's output, in its scratch directory.
const LOG: &str = "chromedriver.log";

/// Signs `name` in with `password` on the sign-in page of the inbox at
/// `origin`, as a person types it.
pub(crate) async fn sign_in(client: &Client, origin: &str, name: &str, password: &str) {
    use fantoccini::Locator;
    client
        .goto(&format!("{origin}/login"))
        .await
        .expect("the sign-in page");
    client
        .find(Locator::Id("login-name"))
        .await
        .expect("a name field")
        .send_keys(name)
        .await
        .expect("types the name");
    client
        .find(Locator::Id("login-password"))
        .await
        .expect("a password field")
        .send_keys(password)
        .await
        .expect("types the password");
    client
        .find(Locator::Id("login-submit"))
        .await
        .expect("a sign-in button")
        .click()
        .await
        .expect("submits");
}

/// A WebDriver session in a headless Chromium, with the driver behind it.
pub(crate) struct Browser {
    /// The session. Declared first: it drops before the driver is killed.
    client: Client,
    /// The driver's process group.
    driver: Driver,
}

/// A headless Chromium with a WebDriver session, or `None` (after a loud
/// message) when Chromium or chromedriver is not installed.
///
/// # Panics
///
/// When the driver or the browser will not start, and when either is
/// missing while `CREW_REQUIRE_SERVICES=1`.
pub(crate) async fn browser() -> Option<Browser> {
    let Some(chromedriver) = super::find_on_path("chromedriver") else {
        super::unavailable(
            NEEDS,
            "no `chromedriver` on PATH",
            INSTALL,
            super::services_required(),
        );
        return None;
    };
    if !BROWSERS
        .iter()
        .any(|name| super::find_on_path(name).is_some())
    {
        let why = format!("none of {} on PATH", BROWSERS.join(", "));
        super::unavailable(NEEDS, &why, INSTALL, super::services_required());
        return None;
    }
    match Browser::start(&chromedriver).await {
        Ok(browser) => Some(browser),
        Err(error) => panic!("the tests' headless Chromium did not start: {error}"),
    }
}

impl Browser {
    /// Starts a driver on a free port and opens a session on it.
    async fn start(chromedriver: &Path) -> Result<Browser, String> {
        let driver = Driver::start(chromedriver).await?;
        // `--no-sandbox`: Chromium refuses to start as root without it
        // (CI runs as root). A fixed window, so that screenshots of the
        // same page compare.
        let options = serde_json::json!({
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"]
        });
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("goog:chromeOptions".to_owned(), options);
        // Plain HTTP to a local port: no TLS stack to build.
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{}", driver.port))
            .await
            .map_err(|error| {
                format!(
                    "opening a WebDriver session: {}{}",
                    super::error_chain(&error),
                    driver.log()
                )
            })?;
        Ok(Browser { client, driver })
    }

    /// The WebDriver client, to navigate, find, type and click.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Saves a screenshot of the current page as
    /// `<target>/test-screenshots/<name>.png` (outside the tracked files,
    /// wherever the target directory is) and returns its path.
    ///
    /// # Panics
    ///
    /// When the browser cannot take it or the file cannot be written.
    pub(crate) async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self
            .client
            .screenshot()
            .await
            .unwrap_or_else(|error| panic!("taking screenshot {name}: {error}"));
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|error| panic!("making {}: {error}", dir.display()));
        let file: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!("{file}.png"));
        std::fs::write(&path, png)
            .unwrap_or_else(|error| panic!("writing {}: {error}", path.display()));
        path
    }
}

/// `<target>/test-screenshots`: Cargo gives integration tests
/// `<target>/tmp`, whatever `CARGO_TARGET_DIR` says.
fn screenshot_dir() -> PathBuf {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR"));
    scratch.parent().unwrap_or(scratch).join("test-screenshots")
}

/// A chromedriver in a process group of its own, with its watchdog.
struct Driver {
    /// The driver, leader of the group the browser's processes join.
    process: Child,
    /// A shell that kills the group and removes `scratch` once its
    /// standard input closes.
    watchdog: Child,
    /// The watchdog's standard input: dropped by [`Driver`]'s `drop`, or
    /// closed by the kernel when this process ends however it ends.
    lifeline: Option<ChildStdin>,
    /// The driver's port on 127.0.0.1.
    port: u16,
    /// The driver's and the browser's temporary directory (`TMPDIR`): a
    /// killed browser leaves its profile and sockets behind, all in here.
    scratch: PathBuf,
}

impl Driver {
    /// Starts chromedriver and waits until it is ready for a session,
    /// on another port when the one it was given was taken meanwhile.
    async fn start(chromedriver: &Path) -> Result<Driver, String> {
        let mut failures = Vec::new();
        for _ in 0..3 {
            let mut driver = Driver::spawn(chromedriver)?;
            match driver.wait_until_ready().await {
                Ok(()) => return Ok(driver),
                Err(error) => failures.push(error),
            }
        }
        Err(failures.join("\n"))
    }

    /// Starts `chromedriver --port=<a free port>` in a new process group,
    /// and its watchdog.
    fn spawn(chromedriver: &Path) -> Result<Driver, String> {
        // Free now; a process taking it before the driver does shows as a
        // driver that exits at once, and the caller tries another.
        let port = std::net::TcpListener::bind(("127.0.0.1", 0))
            .and_then(|listener| listener.local_addr())
            .map_err(|error| format!("finding a free port: {error}"))?
            .port();
        let scratch = tempfile::Builder::new()
            .prefix("crew-chrome-")
            .tempdir()
            .map_err(|error| format!("making the browser's temporary directory: {error}"))?
            .keep();
        let log = |scratch: &Path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(scratch.join(LOG))
                .map_err(|error| format!("opening the driver's log: {error}"))
        };
        let (stdout, stderr) = match (log(&scratch), log(&scratch)) {
            (Ok(stdout), Ok(stderr)) => (stdout, stderr),
            (Err(error), _) | (_, Err(error)) => {
                let _ = std::fs::remove_dir_all(&scratch);
                return Err(error);
            }
        };
        let mut process = match Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .env("TMPDIR", &scratch)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0)
            .spawn()
        {
            Ok(process) => process,
            Err(error) => {
                let _ = std::fs::remove_dir_all(&scratch);
                return Err(format!("starting {}: {error}", chromedriver.display()));
            }
        };
        // In a process group of its own too: a Ctrl-C at the terminal must
        // not stop it before it has cleaned up.
        let script = r#"read _ignored; kill -s KILL -- "-$1"; rm -rf "$2""#;
        let watchdog = Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .arg("crew-chrome-watchdog")
            .arg(process.id().to_string())
            .arg(&scratch)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
        let mut watchdog = match watchdog {
            Ok(watchdog) => watchdog,
            Err(error) => {
                let _ = process.kill();
                let _ = process.wait();
                let _ = std::fs::remove_dir_all(&scratch);
                return Err(format!("starting the browser's watchdog: {error}"));
            }
        };
        let lifeline = watchdog.stdin.take();
        Ok(Driver {
            process,
            watchdog,
            lifeline,
            port,
            scratch,
        })
    }

    /// Waits until the driver answers `GET /status` with `"ready":true`:
    /// an open port alone could be another program's, or a socket
    /// connected to itself.
    async fn wait_until_ready(&mut self) -> Result<(), String> {
        let started = Instant::now();
        loop {
            if self.status_is_ready() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.process.try_wait() {
                return Err(format!("chromedriver exited ({status}){}", self.log()));
            }
            if started.elapsed() > DRIVER_START {
                return Err(format!(
                    "chromedriver was not ready on port {} within {DRIVER_START:?}{}",
                    self.port,
                    self.log()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether the driver says it is ready for a new session.
    fn status_is_ready(&self) -> bool {
        use std::io::{Read as _, Write as _};
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        // A driver that accepted but never answers must not hang the test.
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let request = "GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        if stream.write_all(request.as_bytes()).is_err() {
            return false;
        }
        // Read until the answer says so: chromedriver keeps the connection
        // open after its answer, `Connection: close` notwithstanding.
        let mut answer = Vec::new();
        let mut chunk = [0; 1024];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return false,
                Ok(read) => answer.extend_from_slice(&chunk[..read]),
            }
            let text = String::from_utf8_lossy(&answer);
            if !text.starts_with("HTTP/1.1 200") && text.len() >= "HTTP/1.1 200".len() {
                return false;
            }
            if text.contains("\"ready\":true") {
                return true;
            }
        }
    }

    /// The driver's output so far, as the tail of an error message.
    fn log(&self) -> String {
        match std::fs::read_to_string(self.scratch.join(LOG)) {
            Ok(text) if !text.trim().is_empty() => format!("\nchromedriver said:\n{text}"),
            _ => String::new(),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // End of file on the watchdog's input: it kills the group and
        // removes the scratch directory. Waiting for it makes that done by
        // the time the test goes on; the driver, our child, stays a zombie
        // until reaped, so its group id cannot be reused meanwhile.
        drop(self.lifeline.take());
        let _ = self.watchdog.wait();
        let _ = self.process.wait();
    }
}
