//! One throw-away PostgreSQL cluster per test binary, a new database per
//! call.
//!
//! The cluster starts on first use: `initdb` and `pg_ctl start` into a
//! short directory under the system's temporary directory, listening on a
//! Unix socket in that directory only (no port to collide with another
//! binary's cluster) and without `fsync` (nothing here must survive a
//! crash). Statics never drop, so a watchdog process stops the server and
//! removes the directory once the test binary has gone, however it ended.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use sqlx::Connection as _;

/// What PostgreSQL needs that this machine may lack.
const NEEDS: &str = "PostgreSQL";
/// How to get it on Debian and Ubuntu.
const INSTALL: &str = "apt-get install postgresql";
/// Names the directory holding `initdb` and `pg_ctl`, for systems that keep
/// them somewhere other than `/usr/lib/postgresql/<major>/bin` or `PATH`.
const BIN_DIR_VARIABLE: &str = "CREW_POSTGRES_BIN";
/// The longest Unix socket path the kernel takes (`sun_path`, less the NUL).
const MAX_SOCKET_PATH: usize = 107;

/// The binary's cluster, started by the first caller.
static CLUSTER: OnceLock<State> = OnceLock::new();
/// Numbers the databases, so that each call gets a name of its own.
static NEXT_DATABASE: AtomicUsize = AtomicUsize::new(0);

/// What became of the attempt to start the cluster (kept: every test asks).
enum State {
    /// Running; databases are made in it.
    Running(Cluster),
    /// Not installed here (or nobody to run it as): the tests skip.
    Missing(String),
    /// Installed but it would not start: every test fails with the reason.
    Failed(String),
}

/// A running cluster.
struct Cluster {
    /// Holds the data directory, the log and the socket.
    dir: PathBuf,
    /// Where `pg_ctl` is.
    bin: PathBuf,
    /// Whom the server runs as, when not this process's user.
    owner: Option<(u32, u32)>,
    /// The watchdog's standard input. Nothing is ever written to it: the
    /// kernel closes it when this process ends, however it ends, and the
    /// watchdog, reading end of file, stops the server and cleans up.
    _watchdog: ChildStdin,
}

/// The URL of a new, empty database in this test binary's cluster, or
/// `None` (after a loud message) when PostgreSQL is not installed.
///
/// Each call makes a database of its own, so tests running in parallel
/// never see each other's rows. Nothing is kept across calls but the
/// cluster: each `#[tokio::test]` has a runtime of its own, and a pool
/// made on one runtime must not be used on another.
///
/// # Panics
///
/// When the cluster will not start or the database cannot be made, and
/// when PostgreSQL is missing while `CREW_REQUIRE_SERVICES=1`.
pub(crate) async fn postgres_database() -> Option<String> {
    // Starting is blocking process work of about a second, once per binary;
    // the tests that wait for it have nothing else to do meanwhile.
    let cluster = match CLUSTER.get_or_init(start) {
        State::Running(cluster) => cluster,
        State::Missing(why) => {
            super::unavailable(NEEDS, why, INSTALL, super::services_required());
            return None;
        }
        State::Failed(error) => panic!("the tests' PostgreSQL cluster did not start: {error}"),
    };
    let name = database_name(NEXT_DATABASE.fetch_add(1, Ordering::Relaxed));
    let admin = cluster.url("postgres");
    let mut connection = sqlx::PgConnection::connect(&admin)
        .await
        .unwrap_or_else(|error| panic!("connecting to {admin}: {error}"));
    // The simple query protocol: `CREATE DATABASE` is not a statement to
    // prepare. The name is ours (letters, digits, underscores), quoted all
    // the same.
    sqlx::raw_sql(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut connection)
        .await
        .unwrap_or_else(|error| panic!("creating database {name}: {error}"));
    connection
        .close()
        .await
        .unwrap_or_else(|error| panic!("closing the connection to {admin}: {error}"));
    Some(cluster.url(&name))
}

/// Restarts this test binary's cluster (`pg_ctl restart -m fast`: every
/// connection is cut, then the server comes back with the same options),
/// for a test of what outlives a database restart. Blocking: call it off
/// the runtime's threads. Every other test of the binary sees the restart
/// too, so a binary that restarts holds one test.
///
/// # Panics
///
/// When no cluster runs, or the restart fails.
pub(crate) fn restart_postgres() {
    pg_ctl("restart", &["-m", "fast"]);
}

/// Stops this test binary's cluster (`pg_ctl stop -m fast`: every
/// connection is cut), for a test of what a process does while its
/// database is down; [`start_postgres`] brings it back. Blocking, and seen
/// by every test of the binary, as [`restart_postgres`].
///
/// # Panics
///
/// When no cluster runs, or it will not stop.
pub(crate) fn stop_postgres() {
    pg_ctl("stop", &["-m", "fast"]);
}

/// Starts this test binary's cluster again after [`stop_postgres`], with
/// the options it first started with.
///
/// # Panics
///
/// When no cluster was started, or it will not start.
pub(crate) fn start_postgres() {
    let Some(State::Running(cluster)) = CLUSTER.get() else {
        panic!("no PostgreSQL cluster of this test binary runs");
    };
    pg_ctl("start", &["-o", &server_options(&cluster.dir)]);
}

/// Runs `pg_ctl <action>` on this binary's cluster, with `args`, waiting
/// until it is done.
fn pg_ctl(action: &str, args: &[&str]) {
    let Some(State::Running(cluster)) = CLUSTER.get() else {
        panic!("no PostgreSQL cluster of this test binary runs");
    };
    let mut pg_ctl = command_as(cluster.bin.join("pg_ctl"), &cluster.dir, cluster.owner);
    pg_ctl
        .arg("-D")
        .arg(cluster.dir.join("data"))
        .arg("-l")
        .arg(cluster.dir.join("log"))
        .args(args)
        .args(["-w", action]);
    if let Err(error) = run(pg_ctl, &format!("pg_ctl {action}")) {
        panic!("pg_ctl {action} on the tests' PostgreSQL cluster: {error}");
    }
}

/// The server's options: a Unix socket in `dir` only, no `fsync`, and
/// room above the default 100 connections (many tests at once, each with
/// its own pool).
fn server_options(dir: &Path) -> String {
    format!(
        "-c listen_addresses='' -k {} -c fsync=off -c max_connections=300",
        dir.display()
    )
}

/// A database name that says which test made it: `t<n>_<test name>`, cut
/// to PostgreSQL's 63 bytes.
fn database_name(number: usize) -> String {
    let test = super::current_test();
    let mut name = format!("t{number}_");
    name.extend(test.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_lowercase()
        } else {
            '_'
        }
    }));
    name.truncate(63);
    name
}

/// Finds the binaries and whom to run them as, then starts the cluster.
fn start() -> State {
    let Some(bin) = bin_dir() else {
        return State::Missing(format!(
            "no initdb and pg_ctl in /usr/lib/postgresql/<major>/bin, on PATH or in ${BIN_DIR_VARIABLE}"
        ));
    };
    // initdb and the server refuse to run as root.
    let owner = if rustix::process::geteuid().is_root() {
        match system_user("postgres") {
            Some(ids) => Some(ids),
            None => {
                return State::Missing(
                    "the tests run as root and there is no `postgres` system user to run the server as"
                        .to_owned(),
                );
            }
        }
    } else {
        None
    };
    match Cluster::start(&bin, owner) {
        Ok(cluster) => State::Running(cluster),
        Err(error) => State::Failed(error),
    }
}

/// The directory holding `initdb` and `pg_ctl`: `$CREW_POSTGRES_BIN` when
/// set, else the newest `/usr/lib/postgresql/<major>/bin` (Debian keeps
/// them off `PATH`), else the directory on `PATH` that has them.
fn bin_dir() -> Option<PathBuf> {
    let has_both = |dir: &Path| {
        super::is_executable(&dir.join("initdb")) && super::is_executable(&dir.join("pg_ctl"))
    };
    if let Some(dir) = std::env::var_os(BIN_DIR_VARIABLE) {
        let dir = PathBuf::from(dir);
        return has_both(&dir).then_some(dir);
    }
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let major: u32 = entry.file_name().to_str()?.parse().ok()?;
            Some((major, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_both(dir))
        .max_by_key(|(major, _)| *major);
    if let Some((_, dir)) = newest {
        return Some(dir);
    }
    let initdb = super::find_on_path("initdb")?;
    let dir = initdb.parent()?.to_path_buf();
    has_both(&dir).then_some(dir)
}

/// The user and group ids of the system user `name`, from `/etc/passwd`.
fn system_user(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        if fields.next()? != name {
            return None;
        }
        let _password = fields.next()?;
        let uid = fields.next()?.parse().ok()?;
        let gid = fields.next()?.parse().ok()?;
        Some((uid, gid))
    })
}

impl Cluster {
    /// Makes the directory, arms the watchdog, then `initdb` and
    /// `pg_ctl start`, as `owner` when given.
    fn start(bin: &Path, owner: Option<(u32, u32)>) -> Result<Cluster, String> {
        // Under the temporary directory, not the target directory: root's
        // home (where a checkout often is) is closed to the postgres user,
        // and the socket path must stay short.
        let dir = tempfile::Builder::new()
            .prefix("crew-pg-")
            .tempdir_in(std::env::temp_dir())
            .map_err(|error| format!("making a directory for the cluster: {error}"))?
            .keep();
        let shown = dir.display().to_string();
        // The directory goes unquoted into the server's options (`-k` takes
        // a comma-separated list) and the socket path has a length limit.
        if !shown
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
            || shown.len() + "/.s.PGSQL.5432".len() > MAX_SOCKET_PATH
        {
            let _ = std::fs::remove_dir(&dir);
            return Err(format!(
                "the cluster's directory {shown} is too long for a socket path or has characters \
                 other than letters, digits and `/._-`: set TMPDIR to a short plain directory"
            ));
        }
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .map_err(|error| format!("handing {shown} to the postgres user: {error}"))?;
        }

        // Armed before anything is started in the directory, so that even a
        // half-made cluster goes away. It runs as the server's user (pg_ctl
        // refuses root) in a process group of its own (a Ctrl-C at the
        // terminal must not stop it before it has cleaned up).
        let watchdog_script = r#"read _ignored; "$1/pg_ctl" -D "$2/data" -m immediate -w stop >/dev/null 2>&1; rm -rf "$2""#;
        let mut watchdog = command_as("/bin/sh", &dir, owner);
        watchdog
            .arg("-c")
            .arg(watchdog_script)
            .arg("crew-pg-watchdog")
            .arg(bin)
            .arg(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let mut watchdog = watchdog
            .spawn()
            .map_err(|error| format!("starting the cluster's watchdog: {error}"))?;
        let lifeline = watchdog
            .stdin
            .take()
            .ok_or("the watchdog has no standard input")?;
        // Dropping `lifeline` on an error below lets the watchdog clean up
        // at once; the cluster then lives as long as this process does.

        let data = dir.join("data");
        let mut initdb = command_as(bin.join("initdb"), &dir, owner);
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8"])
            .args(["--locale=C.UTF-8", "--no-sync", "--no-instructions"]);
        run(initdb, "initdb")?;

        let log = dir.join("log");
        let mut pg_ctl = command_as(bin.join("pg_ctl"), &dir, owner);
        pg_ctl
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(&log)
            .arg("-w")
            .arg("-o")
            .arg(server_options(&dir))
            .arg("start");
        run(pg_ctl, "pg_ctl start").map_err(|error| {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            format!("{error}\nserver log:\n{log}")
        })?;

        Ok(Cluster {
            dir,
            bin: bin.to_path_buf(),
            owner,
            _watchdog: lifeline,
        })
    }

    /// The URL of database `name`, through the cluster's socket directory.
    fn url(&self, name: &str) -> String {
        format!(
            "postgres://postgres@localhost/{name}?host={}",
            self.dir.display()
        )
    }
}

/// A command run in `dir`, as `owner` when given.
fn command_as(
    program: impl AsRef<std::ffi::OsStr>,
    dir: &Path,
    owner: Option<(u32, u32)>,
) -> Command {
    let mut command = Command::new(program);
    // A working directory the server's user may enter (root's home is not).
    command.current_dir(dir).stdin(Stdio::null());
    if let Some((uid, gid)) = owner {
        command.uid(uid).gid(gid);
    }
    command
}

/// Runs `command` to its end; its output is the error when it fails.
fn run(mut command: Command, what: &str) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|error| format!("running {what}: {error}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}
