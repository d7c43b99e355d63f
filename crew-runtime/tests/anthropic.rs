//! What only the Anthropic Messages API client does, against real HTTP
//! servers on 127.0.0.1 that speak the API's wire format: the request (system
//! prompt, merged tool results, headers) and answer in detail, cached token
//! counts, the stream's named events and tool-input pieces, 529 and the
//! API's error bodies, `max_tokens`, the environment variables. What every
//! model client does (timeouts, retries, limits, hostile servers, redirects,
//! secrets) is in `model_client_conformance.rs`. Nothing here leaves the
//! machine.

// The servers of the model clients' tests: plain HTTP, they speak whatever
// bodies a test gives them.
mod model_servers;

use std::collections::HashMap;
use std::time::Duration;

use crew_runtime::TokenUsage;
use crew_runtime::anthropic::{API_VERSION, Anthropic};
use crew_runtime::llm::{
    ChatMessage, DeltaSink, Llm, LlmError, LlmRequest, ModelTurn, ToolDefinition,
};
use model_servers::{
    Collect, RawServer, Reply, STREAM_HEAD, TestServer, call, event, script, weather_tool,
};
use serde_json::{Value, json};

/// A retry backoff short enough for tests.
const TEST_BACKOFF: Duration = Duration::from_millis(10);
/// A timeout no test that ends normally comes near.
const GENEROUS: Duration = Duration::from_secs(5);

// ---- helpers ---------------------------------------------------------------

/// The base URL of a test server, without the servers' `/v1` (the client
/// adds `/v1/messages`).
fn base(server: &TestServer) -> String {
    server.base_url.trim_end_matches("/v1").to_owned()
}

fn raw_base(server: &RawServer) -> String {
    server.base_url.trim_end_matches("/v1").to_owned()
}

fn client(base_url: &str) -> Anthropic {
    Anthropic::new("claude-test")
        .base_url(base_url)
        .api_key("sk-ant-test-key")
        .retry_backoff(TEST_BACKOFF)
        .timeout(GENEROUS)
}

fn ok(body: Value) -> Reply {
    Reply::Status(200, body.to_string())
}

/// A Messages API answer with these content blocks.
fn message(content: Value, stop_reason: &str, usage: Value) -> Value {
    json!({
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": usage,
    })
}

fn text_message(text: &str) -> Value {
    message(
        json!([{"type": "text", "text": text}]),
        "end_turn",
        json!({"input_tokens": 10, "output_tokens": 3}),
    )
}

/// An error body as the API sends it.
fn api_error(kind: &str, text: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": text}}).to_string()
}

/// Server-sent events, each with its `event:` name, as the API sends them.
fn sse_text(events: &[Value]) -> String {
    events
        .iter()
        .map(|data| {
            let name = data["type"].as_str().unwrap_or("unknown");
            format!("event: {name}\ndata: {data}\n\n")
        })
        .collect()
}

fn sse(events: &[Value]) -> Reply {
    Reply::WithHeaders(
        200,
        vec![("Content-Type", "text/event-stream".to_owned())],
        sse_text(events),
    )
}

fn message_start(input_tokens: u64) -> Value {
    json!({"type": "message_start", "message": {
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                  "cache_read_input_tokens": 4},
    }})
}

fn text_start(index: u64) -> Value {
    json!({"type": "content_block_start", "index": index,
           "content_block": {"type": "text", "text": ""}})
}

fn text_delta(index: u64, text: &str) -> Value {
    json!({"type": "content_block_delta", "index": index,
           "delta": {"type": "text_delta", "text": text}})
}

fn tool_start(index: u64, id: &str, name: &str) -> Value {
    json!({"type": "content_block_start", "index": index,
           "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})
}

fn json_delta(index: u64, piece: &str) -> Value {
    json!({"type": "content_block_delta", "index": index,
           "delta": {"type": "input_json_delta", "partial_json": piece}})
}

fn block_stop(index: u64) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn message_delta(stop_reason: &str, output_tokens: u64) -> Value {
    json!({"type": "message_delta",
           "delta": {"stop_reason": stop_reason, "stop_sequence": null},
           "usage": {"output_tokens": output_tokens}})
}

fn message_stop() -> Value {
    json!({"type": "message_stop"})
}

/// A whole streamed text answer in these pieces.
fn text_stream(pieces: &[&str]) -> Vec<Value> {
    let mut events = vec![message_start(20), text_start(0), json!({"type": "ping"})];
    events.extend(pieces.iter().map(|piece| text_delta(0, piece)));
    events.extend([block_stop(0), message_delta("end_turn", 9), message_stop()]);
    events
}

async fn ask(client: &Anthropic, messages: &[ChatMessage]) -> Result<ModelTurn, LlmError> {
    client.complete_streaming(messages, &[], None).await
}

/// The turn and the usage, as the runtime asks for them.
async fn ask_counted(
    client: &Anthropic,
    messages: &[ChatMessage],
    tools: &[ToolDefinition],
    sink: Option<&dyn DeltaSink>,
) -> Result<(ModelTurn, Option<TokenUsage>), LlmError> {
    let request = LlmRequest {
        messages,
        tools,
        stream: sink,
    };
    client.complete_with_usage(&request).await
}

fn reason(result: Result<ModelTurn, LlmError>) -> String {
    match result {
        Err(LlmError::InvalidResponse(reason)) => reason,
        other => panic!("expected an invalid response, got {other:?}"),
    }
}

// ---- what is sent, and plain answers ---------------------------------------

#[tokio::test]
async fn plain_answer_with_headers_body_and_usage() {
    let server = TestServer::start(vec![ok(message(
        json!([{"type": "text", "text": "Hello "}, {"type": "text", "text": "there."}]),
        "end_turn",
        json!({"input_tokens": 12, "output_tokens": 5,
               "cache_creation_input_tokens": 2, "cache_read_input_tokens": 3}),
    ))]);
    let client = client(&format!("{}/", base(&server)));

    let answer = ask_counted(&client, &[ChatMessage::user("Hi")], &[], None).await;

    assert_eq!(
        answer,
        Ok((
            ModelTurn::FinalAnswer("Hello there.".to_owned()),
            // Every input token, cached ones included, is the prompt.
            Some(TokenUsage::new(17, 5, 22)),
        ))
    );
    let received = server.finish();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.url, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some("sk-ant-test-key"));
    assert_eq!(request.header("anthropic-version"), Some(API_VERSION));
    assert_eq!(request.header("authorization"), None);
    assert!(
        request
            .header("content-type")
            .is_some_and(|v| v.starts_with("application/json")),
        "content type: {:?}",
        request.header("content-type")
    );
    assert_eq!(
        request.json(),
        json!({
            "model": "claude-test",
            "max_tokens": 4096,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        })
    );
}

#[tokio::test]
async fn tool_call_and_the_follow_up_with_merged_results_and_system() {
    let server = TestServer::start(vec![
        ok(message(
            json!([
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "toolu_a", "name": "get_weather",
                 "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_b", "name": "get_weather",
                 "input": {"city": "Oslo"}},
            ]),
            "tool_use",
            json!({"input_tokens": 30, "output_tokens": 20}),
        )),
        ok(text_message("Sunny in both.")),
    ]);
    let client = client(&base(&server)).max_tokens(512).temperature(0.5);
    let tools = [weather_tool()];
    let mut messages = vec![
        ChatMessage::system("You are a weather agent."),
        ChatMessage::user("Weather in Paris and Oslo?"),
    ];

    let first = client
        .complete_streaming(&messages, &tools, None)
        .await
        .expect("a tool call");
    let ModelTurn::ToolCalls { content, calls } = first else {
        panic!("expected tool calls, got {first:?}");
    };
    assert_eq!(content, "Checking both.");
    assert_eq!(
        calls,
        [
            call("toolu_a", "get_weather", r#"{"city":"Paris"}"#),
            call("toolu_b", "get_weather", r#"{"city":"Oslo"}"#),
        ]
    );
    messages.push(ChatMessage::assistant_tool_calls(content, calls));
    messages.push(ChatMessage::tool("toolu_a", "sunny, 21 °C"));
    messages.push(ChatMessage::tool("toolu_b", "sunny, 12 °C"));
    messages.push(ChatMessage::system("Answer in one sentence."));
    let second = client.complete_streaming(&messages, &tools, None).await;

    assert_eq!(
        second,
        Ok(ModelTurn::FinalAnswer("Sunny in both.".to_owned()))
    );
    let received = server.finish();
    assert_eq!(received.len(), 2);
    assert_eq!(
        received[1].json(),
        json!({
            "model": "claude-test",
            "max_tokens": 512,
            "temperature": 0.5,
            "system": "You are a weather agent.\n\nAnswer in one sentence.",
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "Weather in Paris and Oslo?"},
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Checking both."},
                    {"type": "tool_use", "id": "toolu_a", "name": "get_weather",
                     "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "get_weather",
                     "input": {"city": "Oslo"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sunny, 21 °C"},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "sunny, 12 °C"},
                ]},
            ],
            "tools": [{
                "name": "get_weather",
                "description": "Current weather of a city",
                "input_schema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            }],
        })
    );
}

#[tokio::test]
async fn parallel_tool_calls_keep_their_order_and_odd_inputs() {
    let server = TestServer::start(vec![ok(message(
        json!([
            {"type": "tool_use", "id": "toolu_3", "name": "third", "input": {"n": 3}},
            {"type": "tool_use", "id": "toolu_1", "name": "first", "input": {}},
            {"type": "thinking", "thinking": "not part of the turn"},
            {"type": "tool_use", "id": "toolu_2", "name": "second", "input": "{\"cut\": "},
            {"type": "tool_use", "name": "no_id"},
        ]),
        "tool_use",
        json!({"input_tokens": 1, "output_tokens": 1}),
    ))]);

    let turn = ask(&client(&base(&server)), &[ChatMessage::user("go")]).await;

    assert_eq!(
        turn,
        Ok(ModelTurn::ToolCalls {
            content: String::new(),
            calls: vec![
                call("toolu_3", "third", r#"{"n":3}"#),
                call("toolu_1", "first", "{}"),
                // Input that is not JSON is handed on for the executor to
                // refuse, as the chat-completions client does.
                call("toolu_2", "second", r#"{"cut": "#),
                call("toolu_3", "no_id", "{}"),
            ],
        })
    );
    assert_eq!(server.finish().len(), 1);
}

// ---- streaming -------------------------------------------------------------

#[tokio::test]
async fn streamed_tool_use_is_put_together_from_its_json_pieces() {
    let events = vec![
        message_start(50),
        text_start(0),
        text_delta(0, "Let me check."),
        block_stop(0),
        tool_start(1, "toolu_a", "get_weather"),
        json_delta(1, ""),
        json_delta(1, "{\"ci"),
        json_delta(1, "ty\": \"Pa"),
        json!({"type": "ping"}),
        json_delta(1, "ris\"}"),
        block_stop(1),
        tool_start(2, "toolu_b", "get_weather"),
        json_delta(2, "{\"city\": \"Oslo\"}"),
        block_stop(2),
        tool_start(3, "toolu_c", "list_cities"),
        block_stop(3),
        message_delta("tool_use", 40),
        message_stop(),
    ];
    let server = TestServer::start(vec![sse(&events)]);
    let client = client(&base(&server)).stream(true);
    let sink = Collect::default();

    let answer = ask_counted(
        &client,
        &[ChatMessage::user("go")],
        &[weather_tool()],
        Some(&sink),
    )
    .await;

    assert_eq!(
        answer,
        Ok((
            ModelTurn::ToolCalls {
                content: "Let me check.".to_owned(),
                calls: vec![
                    call("toolu_a", "get_weather", r#"{"city": "Paris"}"#),
                    call("toolu_b", "get_weather", r#"{"city": "Oslo"}"#),
                    call("toolu_c", "list_cities", "{}"),
                ],
            },
            Some(TokenUsage::new(54, 40, 94)),
        ))
    );
    assert_eq!(sink.deltas(), ["Let me check."]);
}

#[tokio::test]
async fn events_without_event_lines_are_read_by_their_type() {
    // Only `data:` lines: the type inside each payload is enough.
    let body: String = text_stream(&["A", "B"]).iter().map(event).collect();
    let server = TestServer::start(vec![Reply::WithHeaders(
        200,
        vec![("Content-Type", "text/event-stream".to_owned())],
        body,
    )]);

    let turn = ask(
        &client(&base(&server)).stream(true),
        &[ChatMessage::user("hi")],
    )
    .await;

    assert_eq!(turn, Ok(ModelTurn::FinalAnswer("AB".to_owned())));
}

#[tokio::test]
async fn error_event_in_the_middle_of_a_stream_is_reported() {
    let events = [
        message_start(5),
        text_start(0),
        text_delta(0, "Part"),
        json!({"type": "error",
               "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        text_delta(0, " never read"),
    ];
    let server = TestServer::start(vec![sse(&events)]);
    let sink = Collect::default();

    let turn = client(&base(&server))
        .stream(true)
        .complete_streaming(&[ChatMessage::user("hi")], &[], Some(&sink))
        .await;

    let reason = reason(turn);
    assert!(
        reason.contains("middle of the stream") && reason.contains("overloaded_error: Overloaded"),
        "reason: {reason}"
    );
    assert_eq!(sink.deltas(), ["Part"]);
    assert_eq!(
        server.finish().len(),
        1,
        "a stream that failed is not retried"
    );
}

#[tokio::test]
async fn stream_cut_before_its_end_is_an_error_unless_it_had_stopped() {
    let cut: Vec<Value> = text_stream(&["Half an ans"])[..4].to_vec();
    let stopped: Vec<Value> = {
        let mut events = text_stream(&["Whole"]);
        events.pop();
        events
    };
    let server = RawServer::start(vec![
        script(move |connection| {
            connection.write(format!("{STREAM_HEAD}{}", sse_text(&cut)).as_bytes());
        }),
        script(move |connection| {
            connection.write(format!("{STREAM_HEAD}{}", sse_text(&stopped)).as_bytes());
        }),
        script(|connection| {
            // Cut in the middle of an event's JSON.
            connection.write(
                format!("{STREAM_HEAD}event: message_start\ndata: {{\"type\": \"mess").as_bytes(),
            );
        }),
    ]);
    let client = client(&raw_base(&server)).stream(true).max_retries(0);

    let cut_short = ask(&client, &[ChatMessage::user("hi")]).await;
    let without_stop = ask(&client, &[ChatMessage::user("hi")]).await;
    let cut_in_an_event = ask(&client, &[ChatMessage::user("hi")]).await;

    let cut_short = reason(cut_short);
    assert!(
        cut_short.contains("ended before the answer was complete")
            && cut_short.contains("11 characters"),
        "reason: {cut_short}"
    );
    assert_eq!(without_stop, Ok(ModelTurn::FinalAnswer("Whole".to_owned())));
    let cut_in_an_event = reason(cut_in_an_event);
    assert!(
        cut_in_an_event.contains("ended before"),
        "reason: {cut_in_an_event}"
    );
    assert_eq!(server.finish().len(), 3);
}

#[tokio::test]
async fn unreadable_stream_events_are_invalid_responses() {
    let server = TestServer::start(vec![
        Reply::WithHeaders(
            200,
            vec![("Content-Type", "text/event-stream".to_owned())],
            format!(
                "{}: a comment line, skipped\ngarbage that is no field\n\n\
                 event: content_block_delta\ndata: <html>not json</html>\n\n",
                sse_text(&[message_start(1)])
            ),
        ),
        sse(&[
            message_start(1),
            json_delta(7, "{}"),
            message_delta("end_turn", 1),
            message_stop(),
        ]),
    ]);
    let client = client(&base(&server)).stream(true);

    let not_json = reason(ask(&client, &[ChatMessage::user("hi")]).await);
    let stray_piece = reason(ask(&client, &[ChatMessage::user("hi")]).await);

    assert!(
        not_json.contains("not JSON") && not_json.contains("<html>not json</html>"),
        "reason: {not_json}"
    );
    assert!(
        stray_piece.contains("content block 7"),
        "reason: {stray_piece}"
    );
}

// ---- errors and retries ----------------------------------------------------

#[tokio::test]
async fn overloaded_529_is_retried_up_to_max_retries() {
    let overloaded = || Reply::Status(529, api_error("overloaded_error", "Overloaded"));
    let recovers = TestServer::start(vec![overloaded(), overloaded(), ok(text_message("back"))]);
    let stays = TestServer::start(vec![overloaded(), overloaded(), overloaded()]);

    let recovered = ask(
        &client(&base(&recovers)).max_retries(2),
        &[ChatMessage::user("hi")],
    )
    .await;
    let gave_up = ask(
        &client(&base(&stays)).max_retries(1),
        &[ChatMessage::user("hi")],
    )
    .await;

    assert_eq!(recovered, Ok(ModelTurn::FinalAnswer("back".to_owned())));
    assert_eq!(recovers.finish().len(), 3);
    assert_eq!(
        gave_up,
        Err(LlmError::Http {
            status: 529,
            body: "overloaded_error: Overloaded".to_owned(),
        })
    );
    assert_eq!(stays.finish().len(), 2, "the request and one retry");
}

#[tokio::test]
async fn invalid_request_is_not_retried_and_carries_the_api_message() {
    let server = TestServer::start(vec![
        Reply::Status(
            400,
            json!({
                "type": "error",
                "error": {"type": "invalid_request_error",
                          "message": "messages: roles must alternate"},
                "request_id": "req_011",
            })
            .to_string(),
        ),
        ok(text_message("never asked")),
    ]);

    let result = ask(
        &client(&base(&server)).max_retries(3),
        &[ChatMessage::user("hi")],
    )
    .await;

    assert_eq!(
        result,
        Err(LlmError::Http {
            status: 400,
            body: "invalid_request_error: messages: roles must alternate (request req_011)"
                .to_owned(),
        })
    );
    assert_eq!(server.finish().len(), 1);
}

#[tokio::test]
async fn malformed_bodies_are_invalid_responses() {
    let server = TestServer::start(vec![
        Reply::Status(200, "{\"content\": [".to_owned()),
        Reply::Status(200, api_error("api_error", "Internal trouble")),
        Reply::Status(200, String::new()),
        ok(json!({"id": "msg_01", "type": "message"})),
        ok(json!({"content": [{"type": "text", "text": ["not", "text"]}]})),
        ok(json!({"content": [{"type": "tool_use", "id": "t", "name": {"no": 1}}]})),
    ]);
    let client = client(&base(&server));

    let mut reasons = Vec::new();
    for _ in 0..6 {
        reasons.push(reason(ask(&client, &[ChatMessage::user("hi")]).await));
    }

    assert!(
        reasons[0].contains("not a Messages API answer"),
        "{}",
        reasons[0]
    );
    assert!(
        reasons[1].contains("api_error: Internal trouble"),
        "{}",
        reasons[1]
    );
    assert!(reasons[2].contains("empty"), "{}", reasons[2]);
    assert!(reasons[3].contains("no content"), "{}", reasons[3]);
    assert!(
        reasons[4].contains("text block without text"),
        "{}",
        reasons[4]
    );
    assert!(
        reasons[5].contains("name of a tool_use block"),
        "{}",
        reasons[5]
    );
    assert_eq!(server.finish().len(), 6, "none of them retried");
}

// ---- configuration ---------------------------------------------------------

/// The checks of the options both clients share are in the conformance
/// suite; `max_tokens` is the Messages API's own.
#[tokio::test]
async fn zero_max_tokens_is_a_config_error() {
    let client = Anthropic::new("claude-test")
        .base_url("http://127.0.0.1:1")
        .max_tokens(0);

    match ask(&client, &[ChatMessage::user("hello")]).await {
        Err(LlmError::Config(reason)) => {
            assert!(reason.contains("max_tokens is 0"), "reason: {reason}");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    assert!(matches!(client.check(), Err(LlmError::Config(_))));
}

fn lookup(vars: &[(&str, &str)]) -> impl FnMut(&str) -> Option<String> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| vars.get(name).cloned()
}

#[tokio::test]
async fn from_env_names_what_is_missing() {
    let nothing = Anthropic::from_lookup(lookup(&[]));
    let no_key = Anthropic::from_lookup(lookup(&[("ANTHROPIC_MODEL", "claude-test")]));
    let gateway = Anthropic::from_lookup(lookup(&[
        ("ANTHROPIC_MODEL", "  "),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:1"),
    ]));

    match nothing {
        Err(LlmError::Config(reason)) => assert!(
            reason.contains("ANTHROPIC_MODEL and ANTHROPIC_API_KEY"),
            "reason: {reason}"
        ),
        other => panic!("expected a config error, got {other:?}"),
    }
    match no_key {
        Err(LlmError::Config(reason)) => {
            assert!(
                reason.starts_with("set ANTHROPIC_API_KEY to use"),
                "reason: {reason}"
            );
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    match gateway {
        Err(LlmError::Config(reason)) => assert!(
            reason.contains("set ANTHROPIC_MODEL to use"),
            "an empty value is unset, and a gateway needs no key: {reason}"
        ),
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[tokio::test]
async fn from_env_reads_base_url_key_and_model() {
    let server = TestServer::start(vec![ok(text_message("from env"))]);
    let client = Anthropic::from_lookup(lookup(&[
        ("ANTHROPIC_BASE_URL", &base(&server)),
        ("ANTHROPIC_API_KEY", "sk-ant-env"),
        ("ANTHROPIC_MODEL", "claude-env"),
    ]))
    .expect("a configured client");

    let turn = ask(&client, &[ChatMessage::user("hi")]).await;

    assert_eq!(turn, Ok(ModelTurn::FinalAnswer("from env".to_owned())));
    assert_eq!(client.name(), "claude-env");
    let received = server.finish();
    assert_eq!(received[0].header_values("x-api-key"), ["sk-ant-env"]);
    assert_eq!(received[0].json()["model"], "claude-env");
}
