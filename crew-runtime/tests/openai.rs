//! The OpenAI-compatible client against real HTTP servers on 127.0.0.1:
//! what it sends, how it reads plain and streamed answers, when it retries,
//! which redirects it follows, how every kind of failure (hostile servers
//! included) is reported, and that no secret shows in any of it. Nothing
//! here leaves the machine, and every test ends within a few seconds.

mod model_servers;

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crew_runtime::llm::{ChatMessage, DeltaSink, LlmError, ModelTurn};
use crew_runtime::openai::{DEFAULT_BASE_URL, MissingEnv, OpenAiCompatible, OpenAiConfig};
use model_servers::{
    Collect, RawServer, Reply, STREAM_HEAD, Script, TestServer, call, closed_port, event, script,
    weather_tool,
};
use serde_json::{Value, json};

/// A retry backoff short enough for tests.
const TEST_BACKOFF: Duration = Duration::from_millis(10);
/// The generous bound every test that waits for a timeout must end within.
const GENEROUS: Duration = Duration::from_secs(5);

fn ok(body: Value) -> Reply {
    Reply::Status(200, body.to_string())
}

/// A reply of server-sent events, each a JSON chunk, then `[DONE]`.
fn sse(chunks: &[Value]) -> Reply {
    let mut body: String = chunks.iter().map(event).collect();
    body.push_str("data: [DONE]\n\n");
    Reply::WithHeaders(
        200,
        vec![("Content-Type", "text/event-stream".to_owned())],
        body,
    )
}

fn content_chunk(text: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}],
    })
}

fn stop_chunk() -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
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

async fn ask(client: &OpenAiCompatible, messages: &[ChatMessage]) -> Result<ModelTurn, LlmError> {
    client.complete_streaming(messages, &[], None).await
}

// ---- what is sent, and plain answers ---------------------------------------

#[tokio::test]
async fn request_carries_model_messages_tools_and_bearer_key() {
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
        .complete_streaming(&messages, &tools, None)
        .await
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

#[tokio::test]
async fn request_without_key_or_tools_omits_them() {
    let server = TestServer::start(vec![ok(final_answer_body("hi"))]);
    let client = OpenAiCompatible::new(&server.base_url, "llama3.1");

    ask(&client, &[ChatMessage::user("hello")])
        .await
        .expect("an answer");

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

#[tokio::test]
async fn parallel_tool_calls_keep_order_and_raw_arguments() {
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

    let turn = ask(&client, &[ChatMessage::user("Weather?")])
        .await
        .expect("an answer");

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

#[tokio::test]
async fn object_arguments_null_content_and_missing_ids_are_read() {
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

    let turn = ask(&client, &[ChatMessage::user("Weather?")])
        .await
        .expect("an answer");

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

#[tokio::test]
async fn message_without_tool_calls_is_the_final_answer() {
    let server = TestServer::start(vec![
        ok(final_answer_body("The answer is 42.")),
        ok(json!({
            "choices": [{"message": {"role": "assistant", "content": "Done.", "tool_calls": []}}],
        })),
    ]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini");

    let first = ask(&client, &[ChatMessage::user("6 times 7?")])
        .await
        .expect("an answer");
    let second = ask(&client, &[ChatMessage::user("Finish.")])
        .await
        .expect("an answer");

    assert_eq!(
        first,
        ModelTurn::FinalAnswer("The answer is 42.".to_owned())
    );
    assert_eq!(second, ModelTurn::FinalAnswer("Done.".to_owned()));
    assert_eq!(server.finish().len(), 2);
}

#[tokio::test]
async fn the_usage_a_server_reports_is_read_with_its_own_total() {
    use crew_runtime::TokenUsage;
    use crew_runtime::llm::{Llm, LlmRequest};

    let mut with_usage = final_answer_body("Counted.");
    with_usage["usage"] = json!({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 19});
    let server = TestServer::start(vec![
        ok(with_usage),
        // No total: prompt + completion.
        ok(json!({
            "choices": [{"message": {"role": "assistant", "content": "Partial."}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2},
        })),
        // No usage at all.
        ok(final_answer_body("Uncounted.")),
        // Streamed, with the usage in a chunk of its own before [DONE].
        sse(&[
            content_chunk("Streamed."),
            stop_chunk(),
            json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}),
        ]),
    ]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini");
    let messages = [ChatMessage::user("Count.")];
    let request = LlmRequest::new(&messages, &[]);

    let first = client
        .complete_with_usage(&request)
        .await
        .expect("an answer");
    let second = client
        .complete_with_usage(&request)
        .await
        .expect("an answer");
    let third = client
        .complete_with_usage(&request)
        .await
        .expect("an answer");
    let streamed = client
        .clone()
        .stream(true)
        .complete_with_usage(&request)
        .await
        .expect("an answer");

    assert_eq!(
        first,
        (
            ModelTurn::FinalAnswer("Counted.".into()),
            Some(TokenUsage::new(12, 3, 19))
        )
    );
    assert_eq!(second.1, Some(TokenUsage::new(7, 2, 9)));
    assert_eq!(third.1, None);
    assert_eq!(
        streamed,
        (
            ModelTurn::FinalAnswer("Streamed.".into()),
            Some(TokenUsage::new(5, 1, 6))
        )
    );
    assert_eq!(server.finish().len(), 4);
}

#[tokio::test]
async fn http_error_statuses_carry_status_and_server_message() {
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
    // Server errors are retried by default; here each status is one answer.
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini")
        .api_key("sk-wrong")
        .max_retries(0);
    let messages = [ChatMessage::user("hello")];

    let unauthorized = ask(&client, &messages).await;
    let crashed = ask(&client, &messages).await;
    let bad_gateway = ask(&client, &messages).await;
    let not_found = ask(&client, &messages).await;

    assert_eq!(
        unauthorized,
        Err(LlmError::Http {
            status: 401,
            // The server echoed the key: the error does not.
            body: "Incorrect API key provided: <redacted>.".to_owned(),
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

#[tokio::test]
async fn silent_server_gives_a_timeout() {
    let server = TestServer::start(vec![Reply::Silence]);
    let client =
        OpenAiCompatible::new(&server.base_url, "gpt-4o-mini").timeout(Duration::from_millis(300));

    let result = ask(&client, &[ChatMessage::user("hello")]).await;

    assert_eq!(result, Err(LlmError::Timeout(Duration::from_millis(300))));
    assert_eq!(server.finish().len(), 1, "the request did reach the server");
}

#[tokio::test]
async fn refused_connection_is_a_transport_error() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let port = listener.local_addr().expect("a local address").port();
    drop(listener);
    let client = OpenAiCompatible::new(format!("http://127.0.0.1:{port}/v1"), "gpt-4o-mini")
        .timeout(Duration::from_secs(5))
        .retry_backoff(TEST_BACKOFF);

    let result = ask(&client, &[ChatMessage::user("hello")]).await;

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

#[tokio::test]
async fn unreadable_answers_are_invalid_responses() {
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

    let mut reasons = Vec::new();
    for _ in 0..6 {
        match ask(&client, &messages).await {
            Err(LlmError::InvalidResponse(reason)) => reasons.push(reason),
            other => panic!("expected an invalid response, got {other:?}"),
        }
    }

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
#[tokio::test]
async fn https_without_tls_feature_is_a_config_error() {
    // Checked before any connection: this address is never contacted.
    let client = OpenAiCompatible::new(DEFAULT_BASE_URL, "gpt-4o-mini").api_key("sk-test");

    let result = ask(&client, &[ChatMessage::user("hello")]).await;

    match result {
        Err(LlmError::Config(reason)) => {
            assert!(reason.contains("`tls` feature"), "reason: {reason}");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    assert!(matches!(client.check(), Err(LlmError::Config(_))));
}

#[cfg(feature = "tls")]
#[tokio::test]
async fn https_with_tls_feature_is_accepted() {
    let client = OpenAiCompatible::new(DEFAULT_BASE_URL, "gpt-4o-mini");

    assert_eq!(client.check(), Ok(()));
}

#[cfg(feature = "tls")]
#[tokio::test]
async fn https_to_a_server_without_tls_is_a_transport_error() {
    // A plain HTTP server answers the TLS handshake with plain HTTP.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let port = listener.local_addr().expect("a local address").port();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().ok()?;
        let answer = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        std::io::Write::write_all(&mut stream, answer).ok()
    });
    let client = OpenAiCompatible::new(format!("https://127.0.0.1:{port}/v1"), "gpt-4o-mini")
        .max_retries(0)
        .timeout(GENEROUS);

    match ask(&client, &[ChatMessage::user("hello")]).await {
        Err(LlmError::Transport(reason)) => {
            assert!(
                reason.contains(&format!("127.0.0.1:{port}")),
                "reason: {reason}"
            );
        }
        other => panic!("expected a transport error, got {other:?}"),
    }
    assert_eq!(server.join().ok().flatten(), Some(()));
}

#[tokio::test]
async fn base_url_without_http_scheme_is_a_config_error() {
    for base_url in ["localhost:11434/v1", "ftp://example.invalid/v1", ""] {
        let client = OpenAiCompatible::new(base_url, "llama3.1");

        match ask(&client, &[ChatMessage::user("hello")]).await {
            Err(LlmError::Config(reason)) => {
                assert!(reason.contains("http://"), "reason: {reason}");
            }
            other => panic!("expected a config error for {base_url:?}, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn unusable_url_or_key_is_a_config_error() {
    // Both fail while the request is built, before any connection.
    let spaced = OpenAiCompatible::new("http://local host:1/v1", "llama3.1");
    let bad_key =
        OpenAiCompatible::new("http://127.0.0.1:1/v1", "llama3.1").api_key("sk\nInjected: 1");

    for client in [spaced, bad_key] {
        match ask(&client, &[ChatMessage::user("hello")]).await {
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

#[tokio::test]
async fn from_env_without_model_is_a_config_error_naming_it() {
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

#[tokio::test]
async fn from_env_reads_base_url_key_and_model() {
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
    assert_eq!(client.model(), "qwen2.5");
    assert_eq!(client.config().base_url, "http://127.0.0.1:8080/v1");
    assert_eq!(client.config().api_key.as_deref(), Some("sk-secret"));
    assert!(
        !format!("{client:?}").contains("sk-secret"),
        "the key must not be printed"
    );
}

#[tokio::test]
async fn key_from_env_is_sent_to_the_server() {
    let server = TestServer::start(vec![ok(final_answer_body("ok"))]);
    let client = OpenAiCompatible::from_lookup(lookup(&[
        ("OPENAI_BASE_URL", server.base_url.as_str()),
        ("OPENAI_API_KEY", "sk-from-env"),
        ("OPENAI_MODEL", "qwen2.5"),
    ]))
    .expect("a usable configuration");

    let turn = ask(&client, &[ChatMessage::user("hello")]).await;

    assert_eq!(turn, Ok(ModelTurn::FinalAnswer("ok".to_owned())));
    let received = server.finish();
    assert_eq!(
        received[0].header("Authorization"),
        Some("Bearer sk-from-env")
    );
    assert_eq!(received[0].json()["model"], "qwen2.5");
}

// ---- hostile servers, plain answers ----------------------------------------

#[tokio::test]
async fn oversized_bodies_are_refused() {
    // One says its length up front, one does not (chunked).
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(64 * 1024));
    let server = TestServer::start(vec![Reply::Status(200, big.clone())]);
    let raw = RawServer::start(vec![script(move |stream| {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                    Transfer-Encoding: chunked\r\n\r\n";
        if stream.write(head.as_bytes()) {
            for _ in 0..64 {
                let piece = format!("{:x}\r\n{}\r\n", 4096, "y".repeat(4096));
                if !stream.write(piece.as_bytes()) {
                    break;
                }
            }
        }
    })]);

    for base_url in [&server.base_url, &raw.base_url] {
        let client = OpenAiCompatible::new(base_url, "gpt-4o-mini").max_response_bytes(16 * 1024);

        match ask(&client, &[ChatMessage::user("hello")]).await {
            Err(LlmError::InvalidResponse(reason)) => {
                assert!(
                    reason.contains("larger than 16384 bytes"),
                    "reason: {reason}"
                );
            }
            other => panic!("expected an invalid response, got {other:?}"),
        }
    }
    assert_eq!(server.finish().len(), 1);
    assert_eq!(raw.finish().len(), 1);
}

#[tokio::test]
async fn slow_drip_past_the_timeout_is_a_timeout() {
    let timeout = Duration::from_millis(400);
    let server = RawServer::start(vec![script(|stream| {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                    Content-Length: 100000\r\n\r\n";
        if stream.write(head.as_bytes()) {
            stream.drip(b" ", Duration::from_millis(50));
        }
    })]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini").timeout(timeout);
    let started = Instant::now();

    let result = ask(&client, &[ChatMessage::user("hello")]).await;

    assert_eq!(result, Err(LlmError::Timeout(timeout)));
    assert!(started.elapsed() < GENEROUS, "took {:?}", started.elapsed());
    assert_eq!(server.finish().len(), 1);
}

#[tokio::test]
async fn bad_status_lines_are_transport_errors_and_not_retried() {
    let garbage: Vec<Script> = [
        "HTTP/1.1 two hundred OK\r\n\r\n",
        "SSH-2.0-OpenSSH_9.6\r\n\r\n",
    ]
    .into_iter()
    .map(|line| {
        script(move |stream| {
            let _ = stream.write(line.as_bytes());
        })
    })
    .collect();
    let server = RawServer::start(garbage);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini")
        .timeout(Duration::from_secs(3))
        .retry_backoff(TEST_BACKOFF);

    for _ in 0..2 {
        match ask(&client, &[ChatMessage::user("hello")]).await {
            Err(LlmError::Transport(reason)) => {
                assert!(reason.contains("127.0.0.1"), "reason: {reason}");
            }
            other => panic!("expected a transport error, got {other:?}"),
        }
    }
    // One connection each: an answer that came but cannot be read is not
    // asked again.
    assert_eq!(server.finish().len(), 2);
}

#[tokio::test]
async fn body_cut_short_is_a_transport_error() {
    let server = RawServer::start(vec![script(|stream| {
        let answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                      Content-Length: 500\r\n\r\n{\"choices\": [";
        let _ = stream.write(answer.as_bytes());
    })]);
    let client =
        OpenAiCompatible::new(&server.base_url, "gpt-4o-mini").timeout(Duration::from_secs(3));

    match ask(&client, &[ChatMessage::user("hello")]).await {
        Err(LlmError::Transport(reason)) => {
            assert!(reason.contains("127.0.0.1"), "reason: {reason}");
        }
        other => panic!("expected a transport error, got {other:?}"),
    }
    assert_eq!(server.finish().len(), 1);
}

#[tokio::test]
async fn body_that_is_not_utf8_is_an_invalid_response() {
    let server = RawServer::start(vec![script(|stream| {
        let mut answer =
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\n"
                .to_vec();
        answer.extend_from_slice(&[0xff, 0xfe, 0x7b, 0x7d]);
        let _ = stream.write(&answer);
    })]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini");

    match ask(&client, &[ChatMessage::user("hello")]).await {
        Err(LlmError::InvalidResponse(reason)) => {
            assert!(reason.contains("UTF-8"), "reason: {reason}");
        }
        other => panic!("expected an invalid response, got {other:?}"),
    }
    server.finish();
}

#[tokio::test]
async fn huge_error_body_is_cut_to_its_start() {
    let server = TestServer::start(vec![Reply::Status(400, "e".repeat(1024 * 1024))]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini");

    match ask(&client, &[ChatMessage::user("hello")]).await {
        Err(LlmError::Http { status: 400, body }) => {
            assert!(body.starts_with("eeee"), "body: {body}");
            assert!(body.chars().count() <= 501, "{} chars", body.len());
        }
        other => panic!("expected HTTP 400, got {other:?}"),
    }
    assert_eq!(server.finish().len(), 1);
}

#[tokio::test]
async fn plain_answer_reaches_a_sink_whole() {
    let server = TestServer::start(vec![ok(final_answer_body("All at once."))]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini");
    let sink = Collect::default();

    let turn = client
        .complete_streaming(&[ChatMessage::user("hello")], &[], Some(&sink))
        .await;

    assert_eq!(turn, Ok(ModelTurn::FinalAnswer("All at once.".to_owned())));
    assert_eq!(sink.deltas(), ["All at once."]);
    let received = server.finish();
    assert_eq!(
        received[0].json().get("stream"),
        None,
        "not asked to stream"
    );
}

// ---- streamed answers ------------------------------------------------------

#[tokio::test]
async fn streamed_deltas_reach_the_sink_in_order_and_make_the_answer() {
    let pieces = ["The ", "sky ", "is ", "blue", "."];
    let server = TestServer::start(vec![sse(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
        content_chunk(pieces[0]),
        content_chunk(pieces[1]),
        content_chunk(pieces[2]),
        content_chunk(pieces[3]),
        content_chunk(pieces[4]),
        stop_chunk(),
    ])]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini")
        .api_key("sk-test")
        .stream(true);
    let sink = Collect::default();

    let turn = client
        .complete_streaming(&[ChatMessage::user("Why?")], &[], Some(&sink))
        .await;

    assert_eq!(turn, Ok(ModelTurn::FinalAnswer(pieces.concat())));
    assert_eq!(sink.deltas(), pieces);
    let received = server.finish();
    assert_eq!(received[0].json()["stream"], json!(true));
    assert_eq!(received[0].header("Accept"), Some("text/event-stream"));
    assert_eq!(received[0].header("Authorization"), Some("Bearer sk-test"));
}

#[tokio::test]
async fn deltas_arrive_before_the_stream_ends() {
    // The server holds back the end of the answer until the test has seen
    // the first piece at the sink.
    let (seen, wait_for_seen) = std::sync::mpsc::channel::<()>();
    let server = RawServer::start(vec![script(move |stream| {
        let first = format!("{STREAM_HEAD}{}", event(&content_chunk("Hel")));
        if stream.write(first.as_bytes()) {
            let held_back = wait_for_seen.recv_timeout(Duration::from_secs(3)).is_ok();
            let rest = if held_back {
                "lo"
            } else {
                " (sent without waiting)"
            };
            let rest = format!("{}data: [DONE]\n\n", event(&content_chunk(rest)));
            let _ = stream.write(rest.as_bytes());
        }
    })]);

    struct Signal(Mutex<Option<std::sync::mpsc::Sender<()>>>, Collect);
    impl DeltaSink for Signal {
        fn delta(&self, text: &str) {
            self.1.delta(text);
            if let Some(seen) = self.0.lock().unwrap_or_else(PoisonError::into_inner).take() {
                let _ = seen.send(());
            }
        }
    }
    let sink = Signal(Mutex::new(Some(seen)), Collect::default());
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini")
        .stream(true)
        .timeout(GENEROUS);

    let turn = client
        .complete_streaming(&[ChatMessage::user("hi")], &[], Some(&sink))
        .await;

    assert_eq!(turn, Ok(ModelTurn::FinalAnswer("Hello".to_owned())));
    assert_eq!(sink.1.deltas(), ["Hel", "lo"]);
    server.finish();
}

#[tokio::test]
async fn streamed_tool_calls_make_the_same_turn_as_a_plain_answer() {
    let plain = json!({
        "choices": [{
            "message": {
                "role": "assistant",
                "content": "Checking both.",
                "tool_calls": [
                    {"id": "call_a", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                    {"id": "call_b", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\""}},
                ],
            },
            "finish_reason": "tool_calls",
        }],
    });
    let tool_piece = |index: u64, mut piece: Value| {
        piece["index"] = json!(index);
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]})
    };
    let streamed = vec![
        content_chunk("Checking "),
        content_chunk("both."),
        tool_piece(
            0,
            json!({"id": "call_a", "type": "function",
                             "function": {"name": "get_weather", "arguments": ""}}),
        ),
        tool_piece(0, json!({"function": {"arguments": "{\"city\""}})),
        tool_piece(
            1,
            json!({"id": "call_b", "type": "function",
                             "function": {"name": "get_weather", "arguments": "{\"ci"}}),
        ),
        tool_piece(0, json!({"function": {"arguments": ": \"Paris\"}"}})),
        tool_piece(1, json!({"function": {"arguments": "ty\": \"Oslo\""}})),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ];
    let server = TestServer::start(vec![ok(plain), sse(&streamed)]);
    let tools = [weather_tool()];
    let messages = [ChatMessage::user("Weather in Paris and Oslo?")];
    let plain_client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini");
    let streaming_client = plain_client.clone().stream(true);
    let sink = Collect::default();

    let from_plain = plain_client
        .complete_streaming(&messages, &tools, None)
        .await;
    let from_stream = streaming_client
        .complete_streaming(&messages, &tools, Some(&sink))
        .await;

    assert_eq!(
        from_plain,
        Ok(ModelTurn::ToolCalls {
            content: "Checking both.".to_owned(),
            calls: vec![
                call("call_a", "get_weather", "{\"city\": \"Paris\"}"),
                // Invalid JSON passes through, streamed or not.
                call("call_b", "get_weather", "{\"city\": \"Oslo\""),
            ],
        })
    );
    assert_eq!(from_stream, from_plain);
    assert_eq!(sink.deltas(), ["Checking ", "both."]);
    assert_eq!(server.finish().len(), 2);
}

#[tokio::test]
async fn stream_cut_in_the_middle_of_an_event_is_an_error() {
    // One stream ends with the connection, one is chunked and loses its
    // last chunk: either way the answer is incomplete.
    let server = RawServer::start(vec![
        script(|stream| {
            let cut = format!(
                "{STREAM_HEAD}{}data: {{\"choices\": [{{\"delta\": {{\"content\": \"wor",
                event(&content_chunk("Hello, "))
            );
            let _ = stream.write(cut.as_bytes());
        }),
        script(|stream| {
            let first = event(&content_chunk("Hello, "));
            let cut = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                 Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{first}\r\n",
                first.len()
            );
            let _ = stream.write(cut.as_bytes());
        }),
    ]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini")
        .stream(true)
        .timeout(Duration::from_secs(3));

    for _ in 0..2 {
        let sink = Collect::default();

        let result = client
            .complete_streaming(&[ChatMessage::user("hi")], &[], Some(&sink))
            .await;

        match result {
            Err(LlmError::InvalidResponse(reason)) => {
                assert!(
                    reason.contains("before the answer was complete"),
                    "{reason}"
                );
            }
            Err(LlmError::Transport(reason)) => {
                assert!(reason.contains("127.0.0.1"), "{reason}");
            }
            other => panic!("expected an incomplete stream, got {other:?}"),
        }
        assert_eq!(sink.deltas(), ["Hello, "], "what had arrived was shown");
    }
    assert_eq!(server.finish().len(), 2);
}

#[tokio::test]
async fn stream_ended_after_a_finish_reason_is_complete_without_done() {
    let server = RawServer::start(vec![script(|stream| {
        let answer = format!(
            "{STREAM_HEAD}{}{}",
            event(&content_chunk("Done.")),
            event(&stop_chunk())
        );
        let _ = stream.write(answer.as_bytes());
    })]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini").stream(true);

    let turn = ask(&client, &[ChatMessage::user("hi")]).await;

    assert_eq!(turn, Ok(ModelTurn::FinalAnswer("Done.".to_owned())));
    server.finish();
}

#[tokio::test]
async fn lines_that_are_not_fields_are_skipped_but_unreadable_data_is_an_error() {
    let noisy = format!(
        "garbage line\n: a comment\n\n{}event: ping\nretry: soon\n\n\
         {{\"not\": \"a field\"}}\n\n{}data: [DONE]\n\n",
        event(&content_chunk("Hello")),
        event(&content_chunk(" there")),
    );
    let broken = format!(
        "{}data: this is not JSON\n\n{}data: [DONE]\n\n",
        event(&content_chunk("Hello")),
        event(&content_chunk(" there")),
    );
    let sse_headers = || vec![("Content-Type", "text/event-stream".to_owned())];
    let server = TestServer::start(vec![
        Reply::WithHeaders(200, sse_headers(), noisy),
        Reply::WithHeaders(200, sse_headers(), broken),
    ]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini").stream(true);

    let skipped = ask(&client, &[ChatMessage::user("hi")]).await;
    let reported = ask(&client, &[ChatMessage::user("hi")]).await;

    assert_eq!(
        skipped,
        Ok(ModelTurn::FinalAnswer("Hello there".to_owned()))
    );
    match reported {
        Err(LlmError::InvalidResponse(reason)) => {
            assert!(reason.contains("this is not JSON"), "reason: {reason}");
        }
        other => panic!("expected an invalid response, got {other:?}"),
    }
    assert_eq!(server.finish().len(), 2);
}

#[tokio::test]
async fn stream_that_never_ends_is_a_timeout() {
    let timeout = Duration::from_millis(500);
    let server = RawServer::start(vec![script(|stream| {
        let first = format!("{STREAM_HEAD}{}", event(&content_chunk("Thinking")));
        if stream.write(first.as_bytes()) {
            stream.drip(b": still here\n\n", Duration::from_millis(50));
        }
    })]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini")
        .stream(true)
        .timeout(timeout);
    let sink = Collect::default();
    let started = Instant::now();

    let result = client
        .complete_streaming(&[ChatMessage::user("hi")], &[], Some(&sink))
        .await;

    assert_eq!(result, Err(LlmError::Timeout(timeout)));
    assert!(started.elapsed() < GENEROUS, "took {:?}", started.elapsed());
    assert_eq!(sink.deltas(), ["Thinking"]);
    server.finish();
}

#[tokio::test]
async fn endless_stream_of_text_is_cut_at_the_size_limit() {
    let server = RawServer::start(vec![script(|stream| {
        if stream.write(STREAM_HEAD.as_bytes()) {
            stream.drip(
                event(&content_chunk(&"z".repeat(1000))).as_bytes(),
                Duration::ZERO,
            );
        }
    })]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini")
        .stream(true)
        .max_response_bytes(64 * 1024)
        .timeout(GENEROUS);

    match ask(&client, &[ChatMessage::user("hi")]).await {
        Err(LlmError::InvalidResponse(reason)) => {
            assert!(
                reason.contains("larger than 65536 bytes"),
                "reason: {reason}"
            );
        }
        other => panic!("expected an invalid response, got {other:?}"),
    }
    server.finish();
}

#[tokio::test]
async fn error_in_the_middle_of_a_stream_is_reported() {
    let server = TestServer::start(vec![sse(&[
        content_chunk("Hel"),
        json!({"error": {"message": "The server had an error while processing your request."}}),
    ])]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini").stream(true);

    match ask(&client, &[ChatMessage::user("hi")]).await {
        Err(LlmError::InvalidResponse(reason)) => {
            assert!(
                reason.contains("had an error while processing"),
                "reason: {reason}"
            );
        }
        other => panic!("expected an invalid response, got {other:?}"),
    }
    server.finish();
}

#[tokio::test]
async fn server_that_does_not_stream_is_read_as_a_plain_answer() {
    let server = TestServer::start(vec![ok(final_answer_body("No stream here."))]);
    let client = OpenAiCompatible::new(&server.base_url, "llama3.1").stream(true);
    let sink = Collect::default();

    let turn = client
        .complete_streaming(&[ChatMessage::user("hi")], &[], Some(&sink))
        .await;

    assert_eq!(
        turn,
        Ok(ModelTurn::FinalAnswer("No stream here.".to_owned()))
    );
    assert_eq!(sink.deltas(), ["No stream here."]);
    server.finish();
}

// ---- retries ---------------------------------------------------------------

#[tokio::test]
async fn rate_limit_with_retry_after_zero_is_retried() {
    let server = TestServer::start(vec![
        Reply::WithHeaders(
            429,
            vec![("Retry-After", "0".to_owned())],
            json!({"error": {"message": "Rate limit reached"}}).to_string(),
        ),
        ok(final_answer_body("Second time lucky.")),
    ]);
    // A long backoff that would outlast the timeout: only the server's
    // `Retry-After: 0` makes the retry possible.
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini")
        .retry_backoff(Duration::from_secs(60))
        .timeout(GENEROUS);

    let turn = ask(&client, &[ChatMessage::user("hi")]).await;

    assert_eq!(
        turn,
        Ok(ModelTurn::FinalAnswer("Second time lucky.".to_owned()))
    );
    let received = server.finish();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].body, received[1].body, "the same request again");
}

#[tokio::test]
async fn retry_after_as_a_past_http_date_is_retried_at_once() {
    let server = TestServer::start(vec![
        Reply::WithHeaders(
            503,
            vec![("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT".to_owned())],
            String::new(),
        ),
        ok(final_answer_body("Back.")),
    ]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini")
        .retry_backoff(Duration::from_secs(60))
        .timeout(GENEROUS);

    let turn = ask(&client, &[ChatMessage::user("hi")]).await;

    assert_eq!(turn, Ok(ModelTurn::FinalAnswer("Back.".to_owned())));
    assert_eq!(server.finish().len(), 2);
}

#[tokio::test]
async fn server_errors_are_retried_up_to_max_retries() {
    let unavailable = || Reply::Status(503, json!({"error": "overloaded"}).to_string());
    let server = TestServer::start(vec![
        unavailable(),
        unavailable(),
        unavailable(),
        ok(final_answer_body("too late")),
    ]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini")
        .max_retries(2)
        .retry_backoff(TEST_BACKOFF);

    let result = ask(&client, &[ChatMessage::user("hi")]).await;

    assert_eq!(
        result,
        Err(LlmError::Http {
            status: 503,
            body: "overloaded".to_owned(),
        })
    );
    assert_eq!(server.finish().len(), 3, "one request and two retries");
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = TestServer::start(vec![
        Reply::Status(
            400,
            json!({"error": {"message": "bad request"}}).to_string(),
        ),
        ok(final_answer_body("never asked")),
    ]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini").retry_backoff(TEST_BACKOFF);

    let result = ask(&client, &[ChatMessage::user("hi")]).await;

    assert!(
        matches!(result, Err(LlmError::Http { status: 400, .. })),
        "{result:?}"
    );
    assert_eq!(server.finish().len(), 1);
}

#[tokio::test]
async fn retry_after_longer_than_the_cap_or_the_time_left_is_not_waited_for() {
    let limited = |seconds: &str| {
        Reply::WithHeaders(
            429,
            vec![("Retry-After", seconds.to_owned())],
            json!({"error": {"message": "slow down"}}).to_string(),
        )
    };
    let server = TestServer::start(vec![limited("3"), ok(final_answer_body("never asked"))]);
    let beyond_cap = TestServer::start(vec![limited("3600"), ok(final_answer_body("never asked"))]);
    let short =
        OpenAiCompatible::new(&server.base_url, "gpt-4o-mini").timeout(Duration::from_secs(2));
    let patient = OpenAiCompatible::new(&beyond_cap.base_url, "gpt-4o-mini")
        .timeout(Duration::from_secs(24 * 3600));
    let started = Instant::now();

    let past_the_timeout = ask(&short, &[ChatMessage::user("hi")]).await;
    let past_the_cap = ask(&patient, &[ChatMessage::user("hi")]).await;

    for result in [past_the_timeout, past_the_cap] {
        assert_eq!(
            result,
            Err(LlmError::Http {
                status: 429,
                body: "slow down".to_owned(),
            })
        );
    }
    assert!(started.elapsed() < GENEROUS, "took {:?}", started.elapsed());
    assert_eq!(server.finish().len(), 1);
    assert_eq!(beyond_cap.finish().len(), 1);
}

#[tokio::test]
async fn failed_connections_are_retried() {
    // Nothing listens at first; the server comes up while the client waits
    // to retry.
    let port = closed_port();
    let opened = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        let server = tiny_http::Server::http(("127.0.0.1", port)).ok()?;
        let request = server.recv_timeout(Duration::from_secs(4)).ok()??;
        let body = final_answer_body("Up now.").to_string();
        request.respond(tiny_http::Response::from_string(body)).ok()
    });
    let client = OpenAiCompatible::new(format!("http://127.0.0.1:{port}/v1"), "gpt-4o-mini")
        .max_retries(6)
        .retry_backoff(Duration::from_millis(50))
        .timeout(GENEROUS);

    let turn = ask(&client, &[ChatMessage::user("hi")]).await;

    assert_eq!(turn, Ok(ModelTurn::FinalAnswer("Up now.".to_owned())));
    assert_eq!(opened.join().ok().flatten(), Some(()));
}

#[tokio::test]
async fn connection_closed_before_any_answer_is_retried() {
    let server = RawServer::start(vec![
        // Reads the request, then hangs up without a byte.
        script(|_| {}),
        script(|stream| {
            let body = final_answer_body("Second connection.").to_string();
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write(answer.as_bytes());
        }),
    ]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini")
        .retry_backoff(TEST_BACKOFF)
        .timeout(GENEROUS);

    let turn = ask(&client, &[ChatMessage::user("hi")]).await;

    assert_eq!(
        turn,
        Ok(ModelTurn::FinalAnswer("Second connection.".to_owned()))
    );
    assert_eq!(server.finish().len(), 2);
}

// ---- redirects -------------------------------------------------------------

#[tokio::test]
async fn redirect_to_another_origin_is_refused() {
    let elsewhere = TestServer::start(vec![ok(final_answer_body("stolen"))]);
    let redirect = |status: u16| {
        Reply::WithHeaders(
            status,
            vec![(
                "Location",
                format!(
                    "http://thief:hunter22@127.0.0.1:{}/v1/chat/completions",
                    elsewhere.port
                ),
            )],
            String::new(),
        )
    };
    let server = TestServer::start(vec![redirect(307), redirect(302)]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini")
        .api_key("sk-must-stay-home")
        .retry_backoff(TEST_BACKOFF);

    for _ in 0..2 {
        match ask(&client, &[ChatMessage::user("hi")]).await {
            Err(LlmError::Transport(reason)) => {
                assert!(reason.contains("another origin"), "reason: {reason}");
                assert!(
                    reason.contains(&format!("127.0.0.1:{}", elsewhere.port)),
                    "reason: {reason}"
                );
                assert!(!reason.contains("hunter22"), "reason: {reason}");
            }
            other => panic!("expected a refused redirect, got {other:?}"),
        }
    }
    assert_eq!(server.finish().len(), 2);
    assert_eq!(elsewhere.finish().len(), 0, "the other origin saw nothing");
}

#[tokio::test]
async fn same_origin_redirect_is_followed() {
    let server = TestServer::start(vec![
        Reply::WithHeaders(
            308,
            vec![("Location", "/v2/chat/completions".to_owned())],
            String::new(),
        ),
        ok(final_answer_body("Moved, and found.")),
    ]);
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini").api_key("sk-test");

    let turn = ask(&client, &[ChatMessage::user("hi")]).await;

    assert_eq!(
        turn,
        Ok(ModelTurn::FinalAnswer("Moved, and found.".to_owned()))
    );
    let received = server.finish();
    assert_eq!(received.len(), 2);
    assert_eq!(received[1].method, "POST");
    assert_eq!(received[1].url, "/v2/chat/completions");
    assert_eq!(received[1].body, received[0].body);
    assert_eq!(received[1].header("Authorization"), Some("Bearer sk-test"));
}

#[tokio::test]
async fn endless_same_origin_redirects_are_cut_off() {
    let again = || {
        Reply::WithHeaders(
            307,
            vec![("Location", "/v1/chat/completions".to_owned())],
            String::new(),
        )
    };
    let server = TestServer::start((0..10).map(|_| again()).collect());
    let client = OpenAiCompatible::new(&server.base_url, "gpt-4o-mini");

    match ask(&client, &[ChatMessage::user("hi")]).await {
        Err(LlmError::Transport(reason)) => {
            assert!(reason.contains("more than 5 times"), "reason: {reason}");
        }
        other => panic!("expected too many redirects, got {other:?}"),
    }
    assert_eq!(server.finish().len(), 6, "the request and five redirects");
}

// ---- secrets ---------------------------------------------------------------

const KEY: &str = "sk-very-secret-key-42";
const PASSWORD: &str = "pa55-word-xyz";

fn assert_no_secret(what: &str, text: &str) {
    for secret in [KEY, PASSWORD] {
        assert!(!text.contains(secret), "{what} shows a secret: {text}");
    }
}

#[tokio::test]
async fn secrets_never_appear_in_errors_or_debug_output() {
    let echo = format!("key {KEY}, password {PASSWORD}");
    let elsewhere = TestServer::start(vec![]);
    let server = TestServer::start(vec![
        Reply::Status(401, json!({"error": {"message": echo}}).to_string()),
        Reply::Status(200, format!("not JSON: {echo}")),
        sse(&[json!({"error": {"message": echo}})]),
        Reply::WithHeaders(
            307,
            vec![(
                "Location",
                format!("http://u:{PASSWORD}@127.0.0.1:{}/v1", elsewhere.port),
            )],
            String::new(),
        ),
        Reply::Silence,
    ]);
    let with_secrets = |base_url: &str| {
        let base_url = base_url.replace("http://", &format!("http://user:{PASSWORD}@"));
        OpenAiCompatible::new(base_url, "gpt-4o-mini")
            .api_key(KEY)
            .max_retries(0)
            .timeout(Duration::from_millis(500))
    };
    let client = with_secrets(&server.base_url);
    let messages = [ChatMessage::user("hi")];

    let mut errors = vec![
        ask(&client, &messages).await,
        ask(&client, &messages).await,
        ask(&client.clone().stream(true), &messages).await,
        ask(&client, &messages).await,
        ask(&client, &messages).await,
        ask(
            &with_secrets(&format!("http://127.0.0.1:{}/v1", closed_port())),
            &messages,
        )
        .await,
        ask(&with_secrets("ftp://127.0.0.1/v1"), &messages).await,
        ask(&with_secrets("http://bad host/v1"), &messages).await,
        ask(
            &with_secrets("http://127.0.0.1:1/v1").api_key(format!("{KEY}\n")),
            &messages,
        )
        .await,
    ];
    if cfg!(not(feature = "tls")) {
        errors.push(ask(&with_secrets("https://127.0.0.1/v1"), &messages).await);
    }

    let kinds: Vec<&str> = errors
        .iter()
        .map(|result| match result {
            Err(LlmError::Http { .. }) => "http",
            Err(LlmError::InvalidResponse(_)) => "invalid",
            Err(LlmError::Transport(_)) => "transport",
            Err(LlmError::Timeout(_)) => "timeout",
            Err(LlmError::Config(_)) => "config",
            other => panic!("expected an error, got {other:?}"),
        })
        .collect();
    assert_eq!(
        kinds[..9],
        [
            "http",
            "invalid",
            "invalid",
            "transport",
            "timeout",
            "transport",
            "config",
            "config",
            "config"
        ]
    );
    for error in &errors {
        let error = error.as_ref().expect_err("an error");
        assert_no_secret("an error's text", &error.to_string());
        assert_no_secret("an error's Debug", &format!("{error:?}"));
    }
    assert_no_secret("the client's Debug", &format!("{client:?}"));
    assert_no_secret("the config's Debug", &format!("{:?}", client.config()));
    assert_eq!(server.finish().len(), 5);
    assert_eq!(elsewhere.finish().len(), 0);
}

#[tokio::test]
async fn key_replaces_credentials_of_the_base_url() {
    let server = TestServer::start(vec![
        ok(final_answer_body("with key")),
        ok(final_answer_body("without key")),
    ]);
    let base_url = server.base_url.replace("http://", "http://user:pw@");
    let with_key = OpenAiCompatible::new(&base_url, "gpt-4o-mini").api_key("sk-test");
    let without_key = OpenAiCompatible::new(&base_url, "gpt-4o-mini");

    ask(&with_key, &[ChatMessage::user("hi")])
        .await
        .expect("an answer");
    ask(&without_key, &[ChatMessage::user("hi")])
        .await
        .expect("an answer");

    let received = server.finish();
    assert_eq!(
        received[0].header_values("Authorization"),
        ["Bearer sk-test"]
    );
    // base64("user:pw")
    assert_eq!(
        received[1].header_values("Authorization"),
        ["Basic dXNlcjpwdw=="]
    );
}

#[test]
fn complete_streaming_is_a_send_future() {
    fn assert_send<T: Send>(_: &T) {}
    let client = OpenAiCompatible::new("http://127.0.0.1:1/v1", "gpt-4o-mini");
    let sink = Collect::default();
    let messages = [ChatMessage::user("hi")];

    let answer = client.complete_streaming(&messages, &[], Some(&sink));

    // A future that is not `Send` would not compile here; one that is can be
    // spawned on a multi-threaded runtime.
    assert_send(&answer);
}
