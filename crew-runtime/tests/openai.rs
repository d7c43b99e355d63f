//! What only the OpenAI-compatible client does, against real HTTP servers
//! on 127.0.0.1: the chat-completions request and answer in detail, its
//! usage fields, its stream's chunks and `[DONE]`, its error bodies, the
//! environment variables, and a key that replaces the base URL's
//! credentials. What every model client does (timeouts, retries, limits,
//! hostile servers, redirects, secrets) is in `model_client_conformance.rs`.
//! Nothing here leaves the machine.

mod model_servers;

use std::collections::HashMap;
use std::time::Duration;

use crew_runtime::llm::{ChatMessage, Llm, LlmError, ModelTurn};
use crew_runtime::openai::{DEFAULT_BASE_URL, MissingEnv, OpenAiCompatible, OpenAiConfig};
use model_servers::{
    Collect, RawServer, Reply, STREAM_HEAD, TestServer, call, event, script, weather_tool,
};
use serde_json::{Value, json};

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
async fn an_answers_cap_is_sent_in_the_field_the_client_was_told() {
    let server = TestServer::start(vec![
        ok(final_answer_body("one")),
        ok(final_answer_body("two")),
    ]);
    let compatible = OpenAiCompatible::new(&server.base_url, "llama3.1").max_tokens(256);
    let openai = OpenAiCompatible::new(&server.base_url, "o4-mini").max_completion_tokens(4_096);
    // What a token budget reserves for the answer.
    assert_eq!(compatible.max_output_tokens(), Some(256));
    assert_eq!(openai.max_output_tokens(), Some(4_096));
    assert_eq!(
        OpenAiCompatible::new(&server.base_url, "llama3.1").max_output_tokens(),
        None
    );
    for client in [&compatible, &openai] {
        ask(client, &[ChatMessage::user("hello")])
            .await
            .expect("an answer");
    }

    let received = server.finish();
    assert_eq!(received.len(), 2);
    assert_eq!(
        received[0].json(),
        json!({
            "model": "llama3.1",
            "messages": [{"role": "user", "content": "hello"}],
            "max_tokens": 256,
        })
    );
    assert_eq!(
        received[1].json(),
        json!({
            "model": "o4-mini",
            "messages": [{"role": "user", "content": "hello"}],
            "max_completion_tokens": 4_096,
        })
    );
}

#[tokio::test]
async fn a_cap_of_zero_tokens_is_a_config_error_and_sends_nothing() {
    let server = TestServer::start(vec![]);
    let client = OpenAiCompatible::new(&server.base_url, "llama3.1").max_tokens(0);
    let error = ask(&client, &[ChatMessage::user("hello")])
        .await
        .expect_err("refused");
    assert!(
        matches!(&error, LlmError::Config(why) if why.contains("max_tokens")),
        "{error:?}"
    );
    assert!(server.finish().is_empty());
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

// ---- streamed answers ------------------------------------------------------

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

// ---- secrets ---------------------------------------------------------------

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
