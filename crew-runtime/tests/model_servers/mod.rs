//! Servers on 127.0.0.1 for the tests of the model clients (OpenAI-compatible
//! and Anthropic): a well-behaved HTTP server that plays a list of replies,
//! and a raw one that writes whatever bytes a test scripts (broken status
//! lines, drips, streams that stop in the middle or never end); and what
//! both tests share beside them (a sink that keeps deltas, a tool, a call).
//!
//! Every wait here is bounded by `SERVER_PATIENCE`, so a client that never
//! connects, or never hangs up, cannot hang a test.

// Each test crate that includes this module uses a part of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crew_runtime::llm::{DeltaSink, ToolCallRequest, ToolDefinition};
use serde_json::{Value, json};

/// The longest any server waits for anything.
pub(crate) const SERVER_PATIENCE: Duration = Duration::from_secs(10);
/// How often a waiting server looks whether the test is over.
const POLL: Duration = Duration::from_millis(10);
/// How long a raw server's write may block: only a client that has stopped
/// reading (its test is over) makes it block at all.
const WRITE_PATIENCE: Duration = Duration::from_secs(1);

/// What the HTTP server answers to one request.
pub(crate) enum Reply {
    /// A status and a JSON body.
    Status(u16, String),
    /// A status, headers and a body (no content type unless one is given).
    WithHeaders(u16, Vec<(&'static str, String)>, String),
    /// Nothing, until the test is over.
    Silence,
}

/// One request as a server saw it.
#[derive(Debug)]
pub(crate) struct Received {
    pub(crate) method: String,
    pub(crate) url: String,
    /// Names in lower case, in the order they came.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Received {
    /// The first value of the header `name`.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.header_values(name).into_iter().next()
    }

    /// Every value of the header `name`.
    pub(crate) fn header_values(&self, name: &str) -> Vec<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .filter(|(field, _)| *field == name)
            .map(|(_, value)| value.as_str())
            .collect()
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("the client sent JSON")
    }
}

/// An HTTP server on an ephemeral port that answers a fixed list of
/// requests, one reply each, then stops.
pub(crate) struct TestServer {
    pub(crate) base_url: String,
    pub(crate) port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Received>>>,
}

impl TestServer {
    pub(crate) fn start(replies: Vec<Reply>) -> TestServer {
        let server = tiny_http::Server::http("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = server.server_addr().to_ip().expect("an IP listener").port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut received = Vec::new();
            for reply in replies {
                let Some(mut request) = next_request(&server, &stopped) else {
                    break;
                };
                let mut body = String::new();
                request
                    .as_reader()
                    .read_to_string(&mut body)
                    .expect("read the request body");
                received.push(Received {
                    method: request.method().to_string(),
                    url: request.url().to_owned(),
                    headers: request
                        .headers()
                        .iter()
                        .map(|h| {
                            (
                                h.field.as_str().as_str().to_ascii_lowercase(),
                                h.value.as_str().to_owned(),
                            )
                        })
                        .collect(),
                    body,
                });
                let (status, headers, body) = match reply {
                    Reply::Status(status, body) => (
                        status,
                        vec![("Content-Type", "application/json".to_owned())],
                        body,
                    ),
                    Reply::WithHeaders(status, headers, body) => (status, headers, body),
                    Reply::Silence => {
                        // Hold the request unanswered until the test ends or
                        // the patience runs out.
                        wait_until(&stopped, SERVER_PATIENCE);
                        continue;
                    }
                };
                let mut response = tiny_http::Response::from_string(body).with_status_code(status);
                for (name, value) in headers {
                    response = response.with_header(
                        tiny_http::Header::from_bytes(name, value).expect("a valid header"),
                    );
                }
                // The client may have gone already; that is its test's business.
                let _ = request.respond(response);
            }
            received
        });
        TestServer {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            port,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the server and returns the requests it received.
    pub(crate) fn finish(mut self) -> Vec<Received> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .expect("finished once")
            .join()
            .expect("the server thread ended normally")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // A test that failed before `finish` must not leave a thread waiting.
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn next_request(server: &tiny_http::Server, stop: &AtomicBool) -> Option<tiny_http::Request> {
    let start = Instant::now();
    while start.elapsed() < SERVER_PATIENCE && !stop.load(Ordering::Relaxed) {
        if let Ok(Some(request)) = server.recv_timeout(POLL) {
            return Some(request);
        }
    }
    None
}

fn wait_until(stop: &AtomicBool, patience: Duration) {
    let start = Instant::now();
    while start.elapsed() < patience && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(POLL);
    }
}

/// What a raw server does on one connection, once it has read the request.
pub(crate) type Script = Box<dyn FnOnce(&mut Connection) + Send>;

/// One connection of a raw server, as its script sees it.
pub(crate) struct Connection {
    stream: TcpStream,
    stop: Arc<AtomicBool>,
}

impl Connection {
    /// Writes `bytes`; whether the client is still there to read them (and
    /// the test still running).
    pub(crate) fn write(&mut self, bytes: &[u8]) -> bool {
        !self.stop.load(Ordering::Relaxed)
            && self
                .stream
                .write_all(bytes)
                .and_then(|()| self.stream.flush())
                .is_ok()
    }

    /// Writes `piece` every `every` until the client hangs up, the test
    /// ends, or the patience runs out.
    pub(crate) fn drip(&mut self, piece: &[u8], every: Duration) {
        let start = Instant::now();
        while start.elapsed() < SERVER_PATIENCE && self.write(piece) {
            std::thread::sleep(every);
        }
    }
}

/// A server that answers each connection with the bytes its script writes.
pub(crate) struct RawServer {
    pub(crate) base_url: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<String>>>,
}

impl RawServer {
    /// One script per connection, in order.
    pub(crate) fn start(scripts: Vec<Script>) -> RawServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("a local address").port();
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut requests = Vec::new();
            for script in scripts {
                let Some(mut stream) = accept(&listener, &stopped) else {
                    break;
                };
                requests.push(read_request(&mut stream));
                script(&mut Connection {
                    stream,
                    stop: stopped.clone(),
                });
            }
            requests
        });
        RawServer {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the server and returns the requests it received, raw.
    pub(crate) fn finish(mut self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .expect("finished once")
            .join()
            .expect("the server thread ended normally")
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn accept(listener: &TcpListener, stop: &AtomicBool) -> Option<TcpStream> {
    let start = Instant::now();
    while start.elapsed() < SERVER_PATIENCE && !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).ok()?;
                stream.set_read_timeout(Some(SERVER_PATIENCE)).ok()?;
                stream.set_write_timeout(Some(WRITE_PATIENCE)).ok()?;
                return Some(stream);
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
    None
}

/// Reads the head and the body (by its length) of one request.
fn read_request(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = find(&bytes, b"\r\n\r\n") {
            break end + 4;
        }
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&bytes).into_owned(),
            Ok(n) => bytes.extend_from_slice(&buffer[..n]),
        }
    };
    let head = String::from_utf8_lossy(&bytes[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0);
    while bytes.len() < head_end + length {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => bytes.extend_from_slice(&buffer[..n]),
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The head of a streamed answer that ends when the connection closes.
pub(crate) const STREAM_HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";

/// One server-sent event carrying `data`.
pub(crate) fn event(data: &Value) -> String {
    format!("data: {data}\n\n")
}

/// A sink that keeps every delta, in order.
#[derive(Default)]
pub(crate) struct Collect(Mutex<Vec<String>>);

impl DeltaSink for Collect {
    fn delta(&self, text: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(text.to_owned());
    }
}

impl Collect {
    pub(crate) fn deltas(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

pub(crate) fn script(f: impl FnOnce(&mut Connection) + Send + 'static) -> Script {
    Box::new(f)
}

pub(crate) fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let port = listener.local_addr().expect("a local address").port();
    drop(listener);
    port
}

pub(crate) fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        name: "get_weather".to_owned(),
        description: "Current weather of a city".to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        }),
    }
}

pub(crate) fn call(id: &str, name: &str, arguments: &str) -> ToolCallRequest {
    ToolCallRequest {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
    }
}
