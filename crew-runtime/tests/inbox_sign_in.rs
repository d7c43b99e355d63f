//! The inbox's sign-in under attack (SPEC §11 "Under attack"): password
//! checks bounded in number and so in memory, guessing throttled per
//! account and per client address (through the store, shared by
//! replicas), forwarded addresses believed only from a trusted proxy,
//! slow and half-sent connections cut, and requests for host names the
//! inbox was not given refused.
//!
//! Everything runs on 127.0.0.1; the addresses 127.0.0.2–127.0.1.255
//! stand for distinct clients (all of 127.0.0.0/8 is loopback on Linux).

mod support;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use crew_runtime::inbox::{Inbox, SignInThrottle};
use crew_runtime::store::{ApproverScope, Store};
use reqwest::StatusCode;
use reqwest::header::{COOKIE, HOST, ORIGIN, SET_COOKIE};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const PASSWORD: &str = "correct horse battery";

/// A client whose connections come from `from` (a loopback address).
fn client_from(from: Ipv4Addr) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(120))
        .local_address(IpAddr::V4(from))
        .build()
        .expect("an HTTP client")
}

/// The `n`-th stand-in client address: 127.0.1.n (n < 256) and so on.
fn address(n: u16) -> Ipv4Addr {
    let [high, low] = (256 + n).to_be_bytes();
    Ipv4Addr::new(127, 0, high, low)
}

/// A fresh SQLite store with the approver `alice`.
async fn sqlite_store() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("inbox.db").display());
    let store = Store::connect(&url).await.expect("the store opens");
    store
        .add_approver("alice", Some(PASSWORD), ApproverScope::everything())
        .await
        .expect("alice is added");
    (store, dir)
}

/// Serves `inbox` on a port of its own; returns its origin.
async fn serve(inbox: Inbox) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let origin = format!("http://{}", listener.local_addr().expect("its address"));
    tokio::spawn(inbox.serve(listener));
    origin
}

/// The login form's CSRF cookie and token, fetched by `client`.
async fn login_form(client: &reqwest::Client, origin: &str) -> (String, String) {
    let form = client
        .get(format!("{origin}/login"))
        .send()
        .await
        .expect("the login page");
    assert_eq!(form.status(), StatusCode::OK);
    let cookie = form
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(|value| value.strip_prefix("crew_inbox_login="))
        .and_then(|rest| rest.split(';').next())
        .expect("a login cookie")
        .to_owned();
    let html = form.text().await.expect("its text");
    let pattern = regex::Regex::new(r#"name="csrf" value="([^"]+)""#).expect("a pattern");
    let csrf = pattern
        .captures(&html)
        .and_then(|captures| captures.get(1))
        .expect("a CSRF token")
        .as_str()
        .to_owned();
    (cookie, csrf)
}

/// Signs in as `name` with `password` from `client`, with `headers`
/// besides; returns the status (303 signed in, 401 wrong, 429 throttled).
async fn sign_in(
    client: &reqwest::Client,
    origin: &str,
    name: &str,
    password: &str,
    headers: &[(&str, &str)],
) -> StatusCode {
    let (cookie, csrf) = login_form(client, origin).await;
    let mut request = client
        .post(format!("{origin}/login"))
        .header(ORIGIN, origin)
        .header(COOKIE, format!("crew_inbox_login={cookie}"))
        .form(&[
            ("csrf", csrf.as_str()),
            ("name", name),
            ("password", password),
        ]);
    for (header, value) in headers {
        request = request.header(*header, *value);
    }
    request.send().await.expect("an answer").status()
}

/// A line of `/proc/PID/status` in KiB (`VmHWM`, `VmRSS`).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// The peak memory of the inbox process stays within its bound while 200
/// wrong sign-ins (from 200 addresses, for 200 names: nothing throttled)
/// arrive at once: at most two argon2 checks (about 19 MiB each) run at a
/// time, the rest are answered 503. Unbounded, each would hold its 19 MiB
/// at once: some 3.8 GiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_wrong_sign_ins_keep_the_inbox_memory_bounded() {
    /// What the process may grow by during the attack: 512 MiB. Two
    /// checks of 19 MiB on two threads, the allocator keeping what they
    /// freed, and 200 connections, their pages and the store's
    /// connections (measured: 120 to 260 MiB); unbounded, the same 200
    /// took the process to 3.9 GiB.
    const GROWTH_BOUND_KIB: u64 = 512 * 1024;
    let (store, dir) = sqlite_store().await;
    let url = store.url().to_owned();
    let process = support::serve_inbox(
        env!("CARGO_BIN_EXE_crew-inbox"),
        &url,
        &["--max-password-checks", "2"],
    );
    let (pid, origin) = (process.child.id(), process.origin.clone());
    // Every client fetches its form first, so that only the password
    // checks run at once.
    let mut forms = Vec::new();
    for n in 0..200u16 {
        let client = client_from(address(n));
        let (cookie, csrf) = login_form(&client, &origin).await;
        forms.push((client, cookie, csrf, format!("guesser-{n}")));
    }
    // One real sign-in, so that the baseline has run argon2 once.
    assert_eq!(
        sign_in(&client_from(address(500)), &origin, "alice", PASSWORD, &[]).await,
        StatusCode::SEE_OTHER
    );
    let baseline = status_kib(pid, "VmHWM");
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(forms.len()));
    let attacks: Vec<_> = forms
        .into_iter()
        .map(|(client, cookie, csrf, name)| {
            let origin = origin.clone();
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                client
                    .post(format!("{origin}/login"))
                    .header(ORIGIN, &origin)
                    .header(COOKIE, format!("crew_inbox_login={cookie}"))
                    .form(&[
                        ("csrf", csrf.as_str()),
                        ("name", name.as_str()),
                        ("password", "wrong password"),
                    ])
                    .send()
                    .await
                    .map(|response| response.status())
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for attack in attacks {
        statuses.push(attack.await.expect("the task").expect("an answer"));
    }
    let peak = status_kib(pid, "VmHWM");
    let refused = statuses
        .iter()
        .filter(|status| **status == StatusCode::UNAUTHORIZED)
        .count();
    let busy = statuses
        .iter()
        .filter(|status| **status == StatusCode::SERVICE_UNAVAILABLE)
        .count();
    eprintln!(
        "crew-inbox peak resident memory: {baseline} KiB before, {peak} KiB after 200 concurrent wrong sign-ins ({refused} answered 401, {busy} 503)"
    );
    assert_eq!(refused + busy, 200, "{statuses:?}");
    assert!(refused >= 1, "some passwords were checked: {statuses:?}");
    assert!(
        peak <= baseline + GROWTH_BOUND_KIB,
        "the inbox grew from {baseline} KiB to {peak} KiB, beyond {GROWTH_BOUND_KIB} KiB more"
    );
    drop(process);
    drop(dir);
}

/// 200 wrong passwords in a row from one address: the address's five are
/// checked, then each attempt is refused (429, `Retry-After`) without a
/// password being checked, and the right password is refused too while
/// that lasts (the first lock made ten minutes long, so that it lasts
/// through the test however slow the machine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_guesses_in_a_row_are_throttled_and_the_right_password_is_refused() {
    let (store, _dir) = sqlite_store().await;
    let throttle = SignInThrottle::default().first_lockout(Duration::from_secs(600));
    let origin = serve(Inbox::new(store).sign_in_throttle(throttle)).await;
    let client = client_from(Ipv4Addr::LOCALHOST);
    let mut statuses = Vec::new();
    for n in 0..200 {
        let password = format!("guess number {n}");
        statuses.push(sign_in(&client, &origin, "alice", &password, &[]).await);
    }
    let checked = statuses
        .iter()
        .take_while(|s| **s == StatusCode::UNAUTHORIZED)
        .count();
    assert_eq!(
        checked, 6,
        "five free failures, the sixth locks: {statuses:?}"
    );
    assert!(
        statuses[6..]
            .iter()
            .all(|s| *s == StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
    assert_eq!(
        sign_in(&client, &origin, "alice", PASSWORD, &[]).await,
        StatusCode::TOO_MANY_REQUESTS,
        "the right password is refused while the guessing is throttled"
    );
}

/// An account guessed at from several addresses is locked for everyone:
/// the right password is refused while the lock lasts (made short here),
/// and accepted once it is over. Each address failed once only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_guessed_from_many_addresses_is_locked_then_opens_again() {
    let (store, _dir) = sqlite_store().await;
    let throttle = SignInThrottle::default()
        .failures_per_account(3)
        .first_lockout(Duration::from_secs(3))
        .max_lockout(Duration::from_secs(3));
    let origin = serve(Inbox::new(store).sign_in_throttle(throttle)).await;
    for n in 0..4 {
        let status = sign_in(&client_from(address(n)), &origin, "Alice ", "wrong!!!", &[]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "guess {n}");
    }
    let approver = client_from(address(100));
    assert_eq!(
        sign_in(&approver, &origin, "alice", PASSWORD, &[]).await,
        StatusCode::TOO_MANY_REQUESTS,
        "refused while the account is locked (a guess at `Alice ` counts for `alice`)"
    );
    let mut accepted = false;
    for _ in 0..300 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        match sign_in(&approver, &origin, "alice", PASSWORD, &[]).await {
            StatusCode::SEE_OTHER => {
                accepted = true;
                break;
            }
            status => assert_eq!(status, StatusCode::TOO_MANY_REQUESTS),
        }
    }
    assert!(
        accepted,
        "the right password is accepted once the lock is over"
    );
}

/// `X-Forwarded-For` from a client that is no trusted proxy changes
/// nothing: the guesses still count for the connection's address. From a
/// trusted proxy the header names the client, so the same guesses from
/// three forwarded addresses lock none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoofed_forwarded_for_is_ignored_without_a_trusted_proxy() {
    let throttle = SignInThrottle::default()
        .failures_per_address(2)
        .first_lockout(Duration::from_secs(600));
    let spoofed = [
        "198.51.100.1",
        "198.51.100.2",
        "198.51.100.3",
        "198.51.100.4",
    ];
    let client = client_from(Ipv4Addr::LOCALHOST);

    let (store, _dir) = sqlite_store().await;
    let untrusting = serve(Inbox::new(store).sign_in_throttle(throttle.clone())).await;
    for (n, forwarded) in spoofed[..3].iter().enumerate() {
        let status = sign_in(
            &client,
            &untrusting,
            &format!("nobody{n}"),
            "wrong!!!",
            &[("x-forwarded-for", forwarded)],
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let status = sign_in(
        &client,
        &untrusting,
        "alice",
        PASSWORD,
        &[("x-forwarded-for", spoofed[3])],
    )
    .await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "the real address is locked"
    );

    let (store, _dir) = sqlite_store().await;
    let behind_proxy = Inbox::new(store)
        .sign_in_throttle(throttle)
        .trusted_proxies([IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    let trusting = serve(behind_proxy).await;
    for (n, forwarded) in spoofed[..3].iter().enumerate() {
        let status = sign_in(
            &client,
            &trusting,
            &format!("nobody{n}"),
            "wrong!!!",
            &[("x-forwarded-for", forwarded)],
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let status = sign_in(
        &client,
        &trusting,
        "alice",
        PASSWORD,
        &[("x-forwarded-for", spoofed[3])],
    )
    .await;
    assert_eq!(
        status,
        StatusCode::SEE_OTHER,
        "each forwarded client counts apart"
    );
}

/// Two inboxes on two connections to one PostgreSQL share the throttle:
/// guesses at one lock the account at the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_postgres_share_the_sign_in_throttle() {
    let Some(url) = support::postgres_database().await else {
        return;
    };
    let first = Store::connect(&url).await.expect("the store opens");
    first
        .add_approver("alice", Some(PASSWORD), ApproverScope::everything())
        .await
        .expect("alice is added");
    let second = Store::connect(&url).await.expect("the store opens again");
    let throttle = SignInThrottle::default()
        .failures_per_account(2)
        .first_lockout(Duration::from_secs(600));
    let one = serve(Inbox::new(first).sign_in_throttle(throttle.clone())).await;
    let two = serve(Inbox::new(second).sign_in_throttle(throttle)).await;
    for n in 0..3 {
        let status = sign_in(&client_from(address(n)), &one, "alice", "wrong!!!", &[]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(
        sign_in(&client_from(address(50)), &two, "alice", PASSWORD, &[]).await,
        StatusCode::TOO_MANY_REQUESTS,
        "the other replica refuses the locked account"
    );
}

/// Reads from `stream` until the server closes it; whether it did within
/// `patience` (a bound on the test, not a timing claim).
async fn closed_by_server(stream: &mut TcpStream, patience: Duration) -> bool {
    let mut buffer = [0u8; 1024];
    let read_to_end = async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(patience, read_to_end).await.is_ok()
}

/// 300 connections that sent half a request and 50 that sent nothing
/// neither keep a real request from its answer nor stay open: the server
/// closes them once the header timeout (1 s here) has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_requests_do_not_block_a_real_one_and_are_closed_by_the_server() {
    let (store, _dir) = sqlite_store().await;
    let inbox = Inbox::new(store).header_timeout(Duration::from_secs(1));
    let origin = serve(inbox).await;
    let authority = origin.trim_start_matches("http://").to_owned();
    let mut slow = Vec::new();
    for n in 0..350 {
        let mut stream = TcpStream::connect(&authority).await.expect("a connection");
        if n < 300 {
            let half = format!("GET /login HTTP/1.1\r\nHost: {authority}\r\nX-Slow: ");
            stream.write_all(half.as_bytes()).await.expect("half sent");
        }
        slow.push(stream);
    }
    let real = client_from(Ipv4Addr::LOCALHOST)
        .get(format!("{origin}/login"))
        .send()
        .await
        .expect("the real request is answered");
    assert_eq!(real.status(), StatusCode::OK);
    for (n, stream) in slow.iter_mut().enumerate() {
        assert!(
            closed_by_server(stream, Duration::from_secs(60)).await,
            "slow connection {n} is still open"
        );
    }
}

/// A state change whose body stops half-way is refused 408 once the body
/// timeout (500 ms here) has passed, instead of holding its connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stops_half_way_is_refused_408() {
    let (store, _dir) = sqlite_store().await;
    let inbox = Inbox::new(store).body_timeout(Duration::from_millis(500));
    let origin = serve(inbox).await;
    let authority = origin.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&authority).await.expect("a connection");
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: {authority}\r\nOrigin: {origin}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nname=al"
    );
    stream.write_all(head.as_bytes()).await.expect("sent");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut answer)).await;
    assert!(
        read.is_ok(),
        "the server answered and closed the connection"
    );
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
}

/// A page of another site whose name points at the inbox's address (DNS
/// rebinding) sends `Host: evil.example:PORT` and a matching `Origin`: it
/// is refused 421 on every route, while loopback names and the names the
/// inbox was given work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_is_refused_and_loopback_and_given_names_work() {
    let (store, _dir) = sqlite_store().await;
    let origin = serve(Inbox::new(store.clone()).allowed_hosts(["approvals.test"])).await;
    let port = origin.rsplit(':').next().expect("a port").to_owned();
    let client = client_from(Ipv4Addr::LOCALHOST);
    let evil = format!("evil.example:{port}");
    for path in ["/login", "/", "/static/inbox.js", "/api/approvals"] {
        let answer = client
            .get(format!("{origin}{path}"))
            .header(HOST, &evil)
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), StatusCode::MISDIRECTED_REQUEST, "{path}");
    }
    // The whole sign-in, as the rebinding page would do it.
    let (cookie, csrf) = login_form(&client, &origin).await;
    let answer = client
        .post(format!("{origin}/login"))
        .header(HOST, &evil)
        .header(ORIGIN, format!("http://{evil}"))
        .header(COOKIE, format!("crew_inbox_login={cookie}"))
        .form(&[
            ("csrf", csrf.as_str()),
            ("name", "alice"),
            ("password", PASSWORD),
        ])
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status(), StatusCode::MISDIRECTED_REQUEST);
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        format!("approvals.test:{port}"),
    ] {
        let (cookie, csrf) = login_form(&client, &origin).await;
        let answer = client
            .post(format!("{origin}/login"))
            .header(HOST, &host)
            .header(ORIGIN, format!("http://{host}"))
            .header(COOKIE, format!("crew_inbox_login={cookie}"))
            .form(&[
                ("csrf", csrf.as_str()),
                ("name", "alice"),
                ("password", PASSWORD),
            ])
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), StatusCode::SEE_OTHER, "{host}");
    }
}
