//! A throw-away Redis for the budget tests: `redis-server` on a Unix
//! socket in a directory of its own (no port to collide), without
//! persistence, stopped when dropped. Each test that needs one starts its
//! own: it starts in milliseconds, and a test that restarts it disturbs
//! no other.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{find_on_path, unavailable};

const NEEDS: &str = "Redis (redis-server)";
const INSTALL: &str = "apt-get install redis-server";

/// A running Redis: its socket's URL, and what stops it.
pub(crate) struct RedisServer {
    dir: tempfile::TempDir,
    binary: PathBuf,
    /// Whether it keeps its data across a restart (an append-only file
    /// written at every command).
    persistent: bool,
}

impl RedisServer {
    /// A new server, or `None` (after a loud message, or a panic under
    /// `CREW_REQUIRE_SERVICES=1`) where `redis-server` is not installed.
    pub(crate) fn start() -> Option<RedisServer> {
        RedisServer::started(false)
    }

    /// A new server that keeps its data across [`restart`](Self::restart)
    /// and [`stop`](Self::stop) then [`run`](Self::run), as a Redis run
    /// with persistence does.
    pub(crate) fn start_persistent() -> Option<RedisServer> {
        RedisServer::started(true)
    }

    fn started(persistent: bool) -> Option<RedisServer> {
        let Some(binary) = find_on_path("redis-server") else {
            unavailable(
                NEEDS,
                "redis-server is not on PATH",
                INSTALL,
                super::services_required(),
            );
            return None;
        };
        // A short path: a Unix socket's must fit 107 bytes.
        let dir = tempfile::Builder::new()
            .prefix("crew-redis-")
            .tempdir_in("/tmp")
            .expect("a directory for Redis");
        let server = RedisServer {
            dir,
            binary,
            persistent,
        };
        server.run();
        Some(server)
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("r.sock")
    }

    fn pid_file(&self) -> PathBuf {
        self.dir.path().join("r.pid")
    }

    /// The URL a client connects with.
    pub(crate) fn url(&self) -> String {
        format!("redis+unix://{}", self.socket().display())
    }

    /// Starts the server and waits for its socket.
    pub(crate) fn run(&self) {
        let dir = self.dir.path();
        let status = Command::new(&self.binary)
            .args(["--port", "0", "--unixsocket"])
            .arg(self.socket())
            .args(["--unixsocketperm", "700", "--daemonize", "yes", "--dir"])
            .arg(dir)
            .args(["--save", ""])
            .args(if self.persistent {
                ["--appendonly", "yes", "--appendfsync", "always"]
            } else {
                ["--appendonly", "no", "--appendfsync", "everysec"]
            })
            .arg("--pidfile")
            .arg(self.pid_file())
            .arg("--logfile")
            .arg(dir.join("log"))
            .status()
            .expect("redis-server runs");
        assert!(status.success(), "redis-server did not start: {status}");
        let started = Instant::now();
        while !(self.socket().exists() && self.pid_file().exists()) {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not open its socket"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the server (SIGTERM, as a restart would) and waits until it
    /// is gone.
    pub(crate) fn stop(&self) {
        let Ok(pid) = std::fs::read_to_string(self.pid_file()) else {
            return;
        };
        let _ = Command::new("kill").arg(pid.trim()).status();
        let started = Instant::now();
        while self.pid_file().exists() || self.socket().exists() {
            if started.elapsed() > Duration::from_secs(10) {
                let _ = Command::new("kill").args(["-9", pid.trim()]).status();
                let _ = std::fs::remove_file(self.pid_file());
                let _ = std::fs::remove_file(self.socket());
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the server and starts it again: without persistence, it
    /// comes back empty, as a Redis restarted without its data does; with
    /// it, as it was.
    pub(crate) fn restart(&self) {
        self.stop();
        self.run();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
