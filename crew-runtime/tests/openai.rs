//! The OpenAI-compatible client against a real HTTP server on 127.0.0.1:
//! what it sends, how it reads answers, and how every kind of failure is
//! reported. Nothing here leaves the machine.

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use crew_runtime::llm::{
    ChatMessage, Llm, LlmError, LlmRequest, ModelTurn, ToolCallRequest, ToolDefinition,
};
use crew_runtime::openai::{DEFAULT_BASE_URL, MissingEnv, OpenAiCompatible, OpenAiConfig};
use serde_json::{Value, json};

/// How long the test server waits for a request before it gives up, so a
/// client that never connects cannot hang the test.
const SERVER_PATIENCE: Duration = Duration::from_secs(10);

/// What the test server answers to one request.
enum Reply {
    /// A status and a body.
    Status(u16, String),
    /// Nothing, until the test is over.
    Silence,
}

fn ok(body: Value) -> Reply {
    Reply::Status(200, body.to_string())
}

/// One request as the server saw it.
#[derive(Debug)]
struct Received {
    method: String,
    url: String,
    headers: HashMap<String, String>,
    body: String,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("the client sent JSON")
    }
}

/// A server on an ephemeral port of 127.0.0.1 that answers a fixed list of
/// requests, one reply each, then stops.
struct TestServer {
    base_url: String,
    release: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<Vec<Received>>>,
}

impl TestServer {
    fn start(replies: Vec<Reply>) -> TestServer {
        let server = tiny_http::Server::http("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = server.server_addr().to_ip().expect("an IP listener").port();
        let (release, released) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let mut received = Vec::new();
            for reply in replies {
                let Ok(Some(mut request)) = server.recv_timeout(SERVER_PATIENCE) else {
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
                match reply {
                    Reply::Status(status, body) => {
                        let response = tiny_http::Response::from_string(body)
                            .with_status_code(status)
                            .with_header(
                                tiny_http::Header::from_bytes("Content-Type", "application/json")
                                    .expect("a valid header"),
                            );
                        // The client may have gone already; that is its test's business.
                        let _ = request.respond(response);
                    }
                    Reply::Silence => {
                        // Hold the request unanswered until the test ends
                        // (the sender is dropped) or the patience runs out.
                        let _ = released.recv_timeout(SERVER_PATIENCE);
                        drop(request);
                    }
                }
            }
            received
        });
        TestServer {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            release: Some(release),
            thread: Some(thread),
        }
    }

    /// Stops the server and returns the requests it received.
    fn finish(mut self) -> Vec<Received> {
        self.release.take();
        self.thread
            .take()
            .expect("finished once")
            .join()
            .expect("the server thread ended normally")
    }
}

fn weather_tool() -> ToolDefinition {
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

fn call(id: &str, name: &str, arguments: &str) -> ToolCallRequest {
    ToolCallRequest {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
    }
}

fn final_answer_body(text: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop",
        }],
    })
}

fn ask(client: &OpenAiCompatible, messages: &[ChatMessage]) -> Result<ModelTurn, LlmError> {
    client.complete(&LlmRequest {
        messages,
        tools: &[],
    })
}

#[test]
fn request_carries_model_messages_tools_and_bearer_key() {
    let server = TestServer::start(vec![ok(final_answer_body("It is sunny in both."))]);
    let client = OpenAiCompatible::new(format!("{}/", server.base_url), "gpt-4o-mini")
        .api_key("sk-test-123")
        .temperature(0.5);
    let messages = [
        ChatMessage::system("You are a weather agent."),
        ChatMessage::user("Weather in Paris and Oslo?"),
        ChatMessage::assistant_tool_calls(
            "",
            vec![
                call("call_a", "get_weather", r#"{"city":"Paris"}"#),
                call("call_b", "get_weather", r#"{"city":"Oslo"}"#),
            ],
        ),
        ChatMessage::tool("call_a", "sunny, 21 °C"),
        ChatMessage::tool("call_b", "sunny, 12 °C"),
    ];
    let tools = [weather_tool()];

    let turn = client
        .complete(&LlmRequest {
            messages: &messages,
            tools: &tools,
        })
        .expect("an answer");

    assert_eq!(
        turn,
        ModelTurn::FinalAnswer("It is sunny in both.".to_owned())
    );
    let received = server.finish();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.url, "/v1/chat/completions");
    assert_eq!(request.header("Authorization"), Some("Bearer sk-test-123"));
    assert!(
        request
            .header("Content-Type")
            .is_some_and(|v| v.starts_with("application/json")),
        "content type: {:?}",
        request.header("Content-Type")
    );
    assert_eq!(
        request.json(),
        json!({
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "You are a weather agent."},
                {"role": "user", "content": "Weather in Paris and Oslo?"},
                {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [
                        {"id": "call_a", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                        {"id": "call_b", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
                    ],
                },
                {"role": "tool", "content": "sunny, 21 °C", "tool_call_id": "call_a"},
                {"role": "tool", "content": "sunny, 12 °C", "tool_call_id": "call_b"},
            ],
            "tools": [{
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather of a city",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }],
            "temperature": 0.5,
        })
    );
}

#[test]
fn request_without_key_or_tools_omits_them() {
    let server = TestServer::start(vec![ok(final_answer_body("hi"))]);
    let client = OpenAiCompatible::new(&server.base_url, "llama3.1");

    ask(&client, &[ChatMessage::user("hello")]).expect("an answer");

    let received = server.finish();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].header("Authorization"), None);
    assert_eq!(
        received[0].json(),
        json!({
            "model": "llama3.1",
            "messages": [{"role": "user", "content": "hello"}],
        })
    );
}

#[test]
fn parallel_tool_calls_keep_order_and_raw_arguments() {
    let server = TestServer::start(vec![ok(json!({
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                    {"id": "call_2", "type": "function",
                     "function": {"name": "Get Weather", "arguments": "{\"city\": \"Oslo\""}},
                    {"id": "call_3", "type": "function",
                     "function": {"name": "get_weather", "arguments": "[1, 2]"}},
                ],
            },
            "finish_reason": "tool_calls",
        }],
    }))]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini");

    let turn = ask(&client, &[ChatMessage::user("Weather?")]).expect("an answer");

    assert_eq!(
        turn,
        ModelTurn::ToolCalls {
            content: "Let me check.".to_owned(),
            calls: vec![
                call("call_1", "get_weather", "{\"city\": \"Paris\"}"),
                // Invalid JSON and a non-object pass through untouched: the
                // executor tells the model what was wrong.
                call("call_2", "Get Weather", "{\"city\": \"Oslo\""),
                call("call_3", "get_weather", "[1, 2]"),
            ],
        }
    );
    assert_eq!(server.finish().len(), 1);
}

#[test]
fn object_arguments_null_content_and_missing_ids_are_read() {
    // Some servers send the arguments as an object, no content, and no ids.
    let server = TestServer::start(vec![ok(json!({
        "choices": [{
            "message": {
                "role": "assistant",
                "content": null,
                "tool_calls": [
                    {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                    {"function": {"name": "list_cities"}},
                ],
            },
        }],
    }))]);
    let client = OpenAiCompatible::new(&server.base_url, "llama3.1");

    let turn = ask(&client, &[ChatMessage::user("Weather?")]).expect("an answer");

    assert_eq!(
        turn,
        ModelTurn::ToolCalls {
            content: String::new(),
            calls: vec![
                call("call_0", "get_weather", r#"{"city":"Paris"}"#),
                call("call_1", "list_cities", "{}"),
            ],
        }
    );
    server.finish();
}

#[test]
fn message_without_tool_calls_is_the_final_answer() {
    let server = TestServer::start(vec![
        ok(final_answer_body("The answer is 42.")),
        ok(json!({
            "choices": [{"message": {"role": "assistant", "content": "Done.", "tool_calls": []}}],
        })),
    ]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini");

    let first = ask(&client, &[ChatMessage::user("6 times 7?")]).expect("an answer");
    let second = ask(&client, &[ChatMessage::user("Finish.")]).expect("an answer");

    assert_eq!(
        first,
        ModelTurn::FinalAnswer("The answer is 42.".to_owned())
    );
    assert_eq!(second, ModelTurn::FinalAnswer("Done.".to_owned()));
    assert_eq!(server.finish().len(), 2);
}

#[test]
fn http_error_statuses_carry_status_and_server_message() {
    let long_page = format!("<html>{}</html>", "x".repeat(2_000));
    let server = TestServer::start(vec![
        Reply::Status(
            401,
            json!({"error": {
                "message": "Incorrect API key provided: sk-wrong.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }})
            .to_string(),
        ),
        // Ollama's shape.
        Reply::Status(
            500,
            json!({"error": "model runner has crashed"}).to_string(),
        ),
        Reply::Status(502, long_page),
        Reply::Status(404, String::new()),
    ]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini").api_key("sk-wrong");
    let messages = [ChatMessage::user("hello")];

    let unauthorized = ask(&client, &messages);
    let crashed = ask(&client, &messages);
    let bad_gateway = ask(&client, &messages);
    let not_found = ask(&client, &messages);

    assert_eq!(
        unauthorized,
        Err(LlmError::Http {
            status: 401,
            body: "Incorrect API key provided: sk-wrong.".to_owned(),
        })
    );
    assert_eq!(
        crashed,
        Err(LlmError::Http {
            status: 500,
            body: "model runner has crashed".to_owned(),
        })
    );
    match bad_gateway {
        Err(LlmError::Http { status: 502, body }) => {
            assert!(body.starts_with("<html>xxx"), "body: {body}");
            assert!(
                body.chars().count() <= 501,
                "not truncated: {} chars",
                body.len()
            );
        }
        other => panic!("expected HTTP 502, got {other:?}"),
    }
    assert_eq!(
        not_found,
        Err(LlmError::Http {
            status: 404,
            body: "(empty body)".to_owned(),
        })
    );
    assert_eq!(server.finish().len(), 4);
}

#[test]
fn silent_server_gives_a_timeout() {
    let server = TestServer::start(vec![Reply::Silence]);
    let client =
        OpenAiCompatible::new(&server.base_url, "gpt-4o-mini").timeout(Duration::from_millis(300));

    let result = ask(&client, &[ChatMessage::user("hello")]);

    assert_eq!(result, Err(LlmError::Timeout(Duration::from_millis(300))));
    assert_eq!(server.finish().len(), 1, "the request did reach the server");
}

#[test]
fn refused_connection_is_a_transport_error() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let port = listener.local_addr().expect("a local address").port();
    drop(listener);
    let client = OpenAiCompatible::new(format!("http://127.0.0.1:{port}/v1"), "gpt-4o-mini")
        .timeout(Duration::from_secs(5));

    let result = ask(&client, &[ChatMessage::user("hello")]);

    match result {
        Err(LlmError::Transport(reason)) => {
            assert!(
                reason.contains(&format!("127.0.0.1:{port}")),
                "reason: {reason}"
            );
        }
        other => panic!("expected a transport error, got {other:?}"),
    }
}

#[test]
fn unreadable_answers_are_invalid_responses() {
    let server = TestServer::start(vec![
        Reply::Status(200, "{\"choices\": [{\"message\": ".to_owned()),
        ok(json!({"id": "chatcmpl-1", "choices": []})),
        ok(json!({"error": {"message": "context length exceeded"}})),
        ok(json!({"choices": [{"message": {"content": 42}}]})),
        ok(json!({"choices": [{"message": {"content": "x", "tool_calls": "get_weather"}}]})),
        Reply::Status(200, String::new()),
    ]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini");
    let messages = [ChatMessage::user("hello")];

    let reasons: Vec<String> = (0..6)
        .map(|_| match ask(&client, &messages) {
            Err(LlmError::InvalidResponse(reason)) => reason,
            other => panic!("expected an invalid response, got {other:?}"),
        })
        .collect();

    assert!(
        reasons[0].contains(r#"{"choices": [{"message":"#),
        "excerpt: {}",
        reasons[0]
    );
    assert!(reasons[1].contains("no choices"), "reason: {}", reasons[1]);
    assert!(
        reasons[2].contains("context length exceeded"),
        "reason: {}",
        reasons[2]
    );
    assert!(reasons[3].contains("content"), "reason: {}", reasons[3]);
    assert!(reasons[4].contains("tool_calls"), "reason: {}", reasons[4]);
    assert!(reasons[5].contains("empty"), "reason: {}", reasons[5]);
    assert_eq!(server.finish().len(), 6);
}

#[cfg(not(feature = "tls"))]
#[test]
fn https_without_tls_feature_is_a_config_error() {
    // Checked before any connection: this address is never contacted.
    let client = OpenAiCompatible::new(DEFAULT_BASE_URL, "gpt-4o-mini").api_key("sk-test");

    let result = ask(&client, &[ChatMessage::user("hello")]);

    match result {
        Err(LlmError::Config(reason)) => {
            assert!(reason.contains("`tls` feature"), "reason: {reason}");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    assert!(matches!(client.check(), Err(LlmError::Config(_))));
}

#[cfg(feature = "tls")]
#[test]
fn https_with_tls_feature_is_accepted() {
    let client = OpenAiCompatible::new(DEFAULT_BASE_URL, "gpt-4o-mini");

    assert_eq!(client.check(), Ok(()));
}

#[test]
fn base_url_without_http_scheme_is_a_config_error() {
    for base_url in ["localhost:11434/v1", "ftp://example.invalid/v1", ""] {
        let client = OpenAiCompatible::new(base_url, "llama3.1");

        match ask(&client, &[ChatMessage::user("hello")]) {
            Err(LlmError::Config(reason)) => {
                assert!(reason.contains("http://"), "reason: {reason}");
            }
            other => panic!("expected a config error for {base_url:?}, got {other:?}"),
        }
    }
}

#[test]
fn unusable_url_or_key_is_a_config_error() {
    // Both fail while the request is built, before any connection.
    let spaced = OpenAiCompatible::new("http://local host:1/v1", "llama3.1");
    let bad_key =
        OpenAiCompatible::new("http://127.0.0.1:1/v1", "llama3.1").api_key("sk\nInjected: 1");

    for client in [spaced, bad_key] {
        match ask(&client, &[ChatMessage::user("hello")]) {
            Err(LlmError::Config(reason)) => {
                assert!(reason.contains("cannot be used"), "reason: {reason}");
            }
            other => panic!("expected a config error, got {other:?}"),
        }
    }
}

fn lookup(vars: &[(&str, &str)]) -> impl FnMut(&str) -> Option<String> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| vars.get(name).cloned()
}

#[test]
fn from_env_without_model_is_a_config_error_naming_it() {
    let result = OpenAiCompatible::from_lookup(lookup(&[
        ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
        ("OPENAI_API_KEY", "sk-test"),
    ]));

    match result {
        Err(LlmError::Config(reason)) => {
            assert!(reason.contains("OPENAI_MODEL"), "reason: {reason}");
        }
        other => panic!("expected a config error, got {other:?}"),
    }

    // An empty value counts as unset.
    let missing = OpenAiConfig::from_lookup(lookup(&[("OPENAI_MODEL", "  ")]));
    assert_eq!(
        missing,
        Err(MissingEnv {
            variables: vec!["OPENAI_MODEL"]
        })
    );
    let message = missing.err().map(|m| m.to_string()).unwrap_or_default();
    assert!(message.contains("OPENAI_MODEL="), "message: {message}");
}

#[test]
fn from_env_reads_base_url_key_and_model() {
    let local =
        OpenAiConfig::from_lookup(lookup(&[("OPENAI_MODEL", "llama3.1")])).expect("model is set");
    assert_eq!(
        local,
        OpenAiConfig {
            base_url: DEFAULT_BASE_URL.to_owned(),
            model: "llama3.1".to_owned(),
            api_key: None,
        }
    );

    let client = OpenAiCompatible::from_lookup(lookup(&[
        ("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
        ("OPENAI_API_KEY", "sk-secret"),
        ("OPENAI_MODEL", "qwen2.5"),
    ]))
    .expect("a usable configuration");
    assert_eq!(client.name(), "qwen2.5");
    assert_eq!(client.config().base_url, "http://127.0.0.1:8080/v1");
    assert_eq!(client.config().api_key.as_deref(), Some("sk-secret"));
    assert!(
        !format!("{client:?}").contains("sk-secret"),
        "the key must not be printed"
    );
}

#[test]
fn key_from_env_is_sent_to_the_server() {
    let server = TestServer::start(vec![ok(final_answer_body("ok"))]);
    let client = OpenAiCompatible::from_lookup(lookup(&[
        ("OPENAI_BASE_URL", server.base_url.as_str()),
        ("OPENAI_API_KEY", "sk-from-env"),
        ("OPENAI_MODEL", "qwen2.5"),
    ]))
    .expect("a usable configuration");

    let turn = ask(&client, &[ChatMessage::user("hello")]);

    assert_eq!(turn, Ok(ModelTurn::FinalAnswer("ok".to_owned())));
    let received = server.finish();
    assert_eq!(
        received[0].header("Authorization"),
        Some("Bearer sk-from-env")
    );
    assert_eq!(received[0].json()["model"], "qwen2.5");
}
