//! One conformance suite for the HTTP model clients: every case is written
//! once, generic over a provider's wire format ([`Provider`]), and
//! `conformance!` runs it against each client (`openai::…`,
//! `anthropic::…`). Each client is configured the same way, through the
//! shared `ModelOptions`, and talks to servers on 127.0.0.1 that speak its
//! provider's format. What only one provider does stays in
//! `tests/openai.rs` and `tests/anthropic.rs`.

mod model_servers;

use std::fmt::Debug;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crew_runtime::llm::{
    ChatMessage, DeltaSink, Llm, LlmError, LlmRequest, ModelTurn, ToolDefinition,
};
use crew_runtime::{ModelOptions, TokenUsage};
use model_servers::{
    Collect, RawServer, Reply, STREAM_HEAD, Script, TestServer, call, closed_port, event, script,
    weather_tool,
};
use serde_json::{Value, json};

/// A retry backoff short enough for tests.
const TEST_BACKOFF: Duration = Duration::from_millis(10);
/// A timeout no test that ends normally comes near.
const GENEROUS: Duration = Duration::from_secs(5);

/// A provider's client and wire format, as the cases need them.
trait Provider: 'static {
    type Client: Llm + Clone + Debug + 'static;

    /// The path of every request.
    const PATH: &'static str;
    /// The header that carries the key.
    const KEY_HEADER: &'static str;
    /// An SSE piece that keeps a stream open without adding to the answer.
    const KEEP_ALIVE: &'static [u8];

    /// The client these options make.
    fn client(options: ModelOptions) -> Self::Client;
    /// The base URL of a test server (whose `base_url` ends in `/v1`).
    fn base_url(server: &str) -> String;
    /// The value of `KEY_HEADER` for `key`.
    fn key_value(key: &str) -> String;
    /// The client's `complete_streaming`, whose future must be `Send`.
    fn complete_streaming<'a>(
        client: &'a Self::Client,
        messages: &'a [ChatMessage],
        tools: &'a [ToolDefinition],
        sink: Option<&'a dyn DeltaSink>,
    ) -> impl Future<Output = Result<ModelTurn, LlmError>> + Send + 'a;
    /// What else of the client is shown (its config, its base URL).
    fn shown(client: &Self::Client) -> String;

    /// A plain answer of `text`, with the usage [`Provider::plain_usage`].
    fn text_body(text: &str) -> Value;
    fn plain_usage() -> TokenUsage;
    /// A plain answer of `text` and one call of `name` with `arguments`.
    fn tool_call_body(text: &str, id: &str, name: &str, arguments: &Value) -> Value;
    /// An error body carrying `message`.
    fn error_body(message: &str) -> String;
    /// `message` as the client reports an error body's.
    fn shown_error(message: &str) -> String;

    /// The events before the first piece of text.
    fn stream_head() -> String;
    /// The event that adds `text` to the answer.
    fn text_event(text: &str) -> String;
    /// The events that end a text answer, with the usage
    /// [`Provider::stream_usage`].
    fn stream_end() -> String;
    fn stream_usage() -> TokenUsage;
    /// A streamed answer of `text` and one call of `name`, its arguments in
    /// `pieces`.
    fn tool_call_stream(text: &str, id: &str, name: &str, pieces: &[&str]) -> String;
    /// A stream that reports an error carrying `message`.
    fn stream_error(message: &str) -> String;
}

struct OpenAi;

impl Provider for OpenAi {
    type Client = crew_runtime::openai::OpenAiCompatible;

    const PATH: &'static str = "/v1/chat/completions";
    const KEY_HEADER: &'static str = "authorization";
    const KEEP_ALIVE: &'static [u8] = b": still here\n\n";

    fn client(options: ModelOptions) -> Self::Client {
        crew_runtime::openai::OpenAiCompatible::with_options(options)
    }

    fn base_url(server: &str) -> String {
        server.to_owned()
    }

    fn key_value(key: &str) -> String {
        format!("Bearer {key}")
    }

    fn complete_streaming<'a>(
        client: &'a Self::Client,
        messages: &'a [ChatMessage],
        tools: &'a [ToolDefinition],
        sink: Option<&'a dyn DeltaSink>,
    ) -> impl Future<Output = Result<ModelTurn, LlmError>> + Send + 'a {
        client.complete_streaming(messages, tools, sink)
    }

    fn shown(client: &Self::Client) -> String {
        format!("{:?}", client.config())
    }

    fn text_body(text: &str) -> Value {
        json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
        })
    }

    fn plain_usage() -> TokenUsage {
        TokenUsage::new(10, 3, 13)
    }

    fn tool_call_body(text: &str, id: &str, name: &str, arguments: &Value) -> Value {
        json!({"choices": [{
            "message": {
                "role": "assistant",
                "content": text,
                "tool_calls": [{"id": id, "type": "function",
                                "function": {"name": name, "arguments": arguments.to_string()}}],
            },
            "finish_reason": "tool_calls",
        }]})
    }

    fn error_body(message: &str) -> String {
        json!({"error": {"message": message, "type": "invalid_request_error"}}).to_string()
    }

    fn shown_error(message: &str) -> String {
        message.to_owned()
    }

    fn stream_head() -> String {
        event(&json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}))
    }

    fn text_event(text: &str) -> String {
        event(&json!({
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}],
        }))
    }

    fn stream_end() -> String {
        let stop = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
        let usage = json!({"choices": [],
                           "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}});
        format!("{}{}data: [DONE]\n\n", event(&stop), event(&usage))
    }

    fn stream_usage() -> TokenUsage {
        TokenUsage::new(5, 1, 6)
    }

    fn tool_call_stream(text: &str, id: &str, name: &str, pieces: &[&str]) -> String {
        let tool_piece = |piece: Value| {
            event(&json!({"choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]}))
        };
        let mut body = OpenAi::text_event(text);
        body.push_str(&tool_piece(json!({
            "index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": ""},
        })));
        for piece in pieces {
            body.push_str(&tool_piece(
                json!({"index": 0, "function": {"arguments": piece}}),
            ));
        }
        let finish = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
        body.push_str(&event(&finish));
        body.push_str("data: [DONE]\n\n");
        body
    }

    fn stream_error(message: &str) -> String {
        format!(
            "{}{}data: [DONE]\n\n",
            OpenAi::text_event("Hel"),
            event(&json!({"error": {"message": message}}))
        )
    }
}

struct Anthropic;

/// Server-sent events, each with its `event:` name, as the API sends them.
fn named_events(events: &[Value]) -> String {
    events
        .iter()
        .map(|data| {
            let name = data["type"].as_str().unwrap_or("unknown");
            format!("event: {name}\ndata: {data}\n\n")
        })
        .collect()
}

fn anthropic_message(content: Value, stop_reason: &str) -> Value {
    json!({
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 3},
    })
}

fn anthropic_message_start() -> Value {
    json!({"type": "message_start", "message": {
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 4},
    }})
}

fn anthropic_message_end(stop_reason: &str) -> [Value; 2] {
    [
        json!({"type": "message_delta",
               "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": 9}}),
        json!({"type": "message_stop"}),
    ]
}

impl Provider for Anthropic {
    type Client = crew_runtime::anthropic::Anthropic;

    const PATH: &'static str = "/v1/messages";
    const KEY_HEADER: &'static str = "x-api-key";
    const KEEP_ALIVE: &'static [u8] = b"event: ping\ndata: {\"type\": \"ping\"}\n\n";

    fn client(options: ModelOptions) -> Self::Client {
        crew_runtime::anthropic::Anthropic::with_options(options)
    }

    fn base_url(server: &str) -> String {
        // The client adds `/v1/messages`.
        server.trim_end_matches("/v1").to_owned()
    }

    fn key_value(key: &str) -> String {
        key.to_owned()
    }

    fn complete_streaming<'a>(
        client: &'a Self::Client,
        messages: &'a [ChatMessage],
        tools: &'a [ToolDefinition],
        sink: Option<&'a dyn DeltaSink>,
    ) -> impl Future<Output = Result<ModelTurn, LlmError>> + Send + 'a {
        client.complete_streaming(messages, tools, sink)
    }

    fn shown(client: &Self::Client) -> String {
        client.base_url_text()
    }

    fn text_body(text: &str) -> Value {
        anthropic_message(json!([{"type": "text", "text": text}]), "end_turn")
    }

    fn plain_usage() -> TokenUsage {
        TokenUsage::new(10, 3, 13)
    }

    fn tool_call_body(text: &str, id: &str, name: &str, arguments: &Value) -> Value {
        anthropic_message(
            json!([
                {"type": "text", "text": text},
                {"type": "tool_use", "id": id, "name": name, "input": arguments},
            ]),
            "tool_use",
        )
    }

    fn error_body(message: &str) -> String {
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
            .to_string()
    }

    fn shown_error(message: &str) -> String {
        format!("invalid_request_error: {message}")
    }

    fn stream_head() -> String {
        named_events(&[
            anthropic_message_start(),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
            json!({"type": "ping"}),
        ])
    }

    fn text_event(text: &str) -> String {
        named_events(&[json!({"type": "content_block_delta", "index": 0,
                              "delta": {"type": "text_delta", "text": text}})])
    }

    fn stream_end() -> String {
        let [delta, stop] = anthropic_message_end("end_turn");
        named_events(&[
            json!({"type": "content_block_stop", "index": 0}),
            delta,
            stop,
        ])
    }

    fn stream_usage() -> TokenUsage {
        // message_start's 5 input + 4 cache-read tokens; message_delta's 9
        // output tokens replace message_start's 1.
        TokenUsage::new(9, 9, 18)
    }

    fn tool_call_stream(text: &str, id: &str, name: &str, pieces: &[&str]) -> String {
        let mut body = Anthropic::stream_head();
        body.push_str(&Anthropic::text_event(text));
        let [delta, stop] = anthropic_message_end("tool_use");
        let mut events = vec![
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1,
                   "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ];
        events.extend(pieces.iter().map(|piece| {
            json!({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "input_json_delta", "partial_json": piece}})
        }));
        events.extend([
            json!({"type": "content_block_stop", "index": 1}),
            delta,
            stop,
        ]);
        body.push_str(&named_events(&events));
        body
    }

    fn stream_error(message: &str) -> String {
        format!(
            "{}{}{}",
            Anthropic::stream_head(),
            Anthropic::text_event("Hel"),
            named_events(&[json!({"type": "error",
                                  "error": {"type": "api_error", "message": message}})])
        )
    }
}

// ---- what the cases share --------------------------------------------------

fn ok(body: Value) -> Reply {
    Reply::Status(200, body.to_string())
}

fn sse(body: String) -> Reply {
    Reply::WithHeaders(
        200,
        vec![("Content-Type", "text/event-stream".to_owned())],
        body,
    )
}

/// A streamed text answer in these pieces.
fn text_stream<P: Provider>(pieces: &[&str]) -> String {
    let mut body = P::stream_head();
    for piece in pieces {
        body.push_str(&P::text_event(piece));
    }
    body.push_str(&P::stream_end());
    body
}

/// Options for a test server: a short backoff, a generous timeout.
fn options<P: Provider>(server_base_url: &str) -> ModelOptions {
    ModelOptions::new("conformance-model")
        .base_url(P::base_url(server_base_url))
        .retry_backoff(TEST_BACKOFF)
        .timeout(GENEROUS)
}

fn client<P: Provider>(server_base_url: &str) -> P::Client {
    P::client(options::<P>(server_base_url))
}

async fn ask<P: Provider>(client: &P::Client) -> Result<ModelTurn, LlmError> {
    P::complete_streaming(client, &[ChatMessage::user("hi")], &[], None).await
}

async fn ask_counted<P: Provider>(
    client: &P::Client,
    tools: &[ToolDefinition],
    sink: Option<&dyn DeltaSink>,
) -> Result<(ModelTurn, Option<TokenUsage>), LlmError> {
    let messages = [ChatMessage::user("hi")];
    let request = LlmRequest {
        messages: &messages,
        tools,
        stream: sink,
    };
    client.complete_with_usage(&request).await
}

fn invalid(result: Result<ModelTurn, LlmError>) -> String {
    match result {
        Err(LlmError::InvalidResponse(reason)) => reason,
        other => panic!("expected an invalid response, got {other:?}"),
    }
}

fn transport(result: Result<ModelTurn, LlmError>) -> String {
    match result {
        Err(LlmError::Transport(reason)) => reason,
        other => panic!("expected a transport error, got {other:?}"),
    }
}

fn plain_head(content_length: usize) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
         Content-Length: {content_length}\r\n\r\n"
    )
}

// ---- the cases, once --------------------------------------------------------

mod cases {
    use super::*;

    pub(super) async fn plain_answer_is_the_final_answer_and_reaches_a_sink_whole<P: Provider>() {
        let server = TestServer::start(vec![ok(P::text_body("All at once."))]);
        let sink = Collect::default();

        let answer = ask_counted::<P>(&client::<P>(&server.base_url), &[], Some(&sink)).await;

        assert_eq!(
            answer,
            Ok((
                ModelTurn::FinalAnswer("All at once.".to_owned()),
                Some(P::plain_usage())
            ))
        );
        assert_eq!(sink.deltas(), ["All at once."]);
        assert_eq!(server.finish().len(), 1);
    }

    pub(super) async fn model_base_url_and_key_are_used_as_set<P: Provider>() {
        let server = TestServer::start(vec![
            ok(P::text_body("plain")),
            sse(text_stream::<P>(&["streamed"])),
        ]);
        let options = options::<P>(&server.base_url)
            .model("model-as-set")
            .api_key("sk-as-set");
        let plain = P::client(options.clone());
        let streaming = P::client(options.stream(true));

        let plain_turn = ask::<P>(&plain).await;
        let streamed_turn = ask::<P>(&streaming).await;

        assert_eq!(plain_turn, Ok(ModelTurn::FinalAnswer("plain".to_owned())));
        assert_eq!(
            streamed_turn,
            Ok(ModelTurn::FinalAnswer("streamed".to_owned()))
        );
        assert_eq!(plain.name(), "model-as-set");
        let received = server.finish();
        assert_eq!(received.len(), 2);
        for (request, accept) in received
            .iter()
            .zip(["application/json", "text/event-stream"])
        {
            assert_eq!(request.method, "POST");
            assert_eq!(request.url, P::PATH);
            assert_eq!(request.json()["model"], "model-as-set");
            assert_eq!(
                request.header_values(P::KEY_HEADER),
                [P::key_value("sk-as-set")]
            );
            assert_eq!(request.header("accept"), Some(accept));
            assert!(
                request
                    .header("content-type")
                    .is_some_and(|v| v.starts_with("application/json")),
                "content type: {:?}",
                request.header("content-type")
            );
        }
        assert_eq!(
            received[0].json().get("stream"),
            None,
            "not asked to stream"
        );
        assert_eq!(received[1].json()["stream"], json!(true));
    }

    pub(super) async fn tool_call_with_arguments_is_the_same_streamed_or_not<P: Provider>() {
        let arguments = json!({"city": "Paris"});
        let text = arguments.to_string();
        let (first, rest) = text.split_at(5);
        let server = TestServer::start(vec![
            ok(P::tool_call_body(
                "Checking.",
                "call_a",
                "get_weather",
                &arguments,
            )),
            sse(P::tool_call_stream(
                "Checking.",
                "call_a",
                "get_weather",
                &["", first, rest],
            )),
        ]);
        let plain = client::<P>(&server.base_url);
        let streaming = P::client(options::<P>(&server.base_url).stream(true));
        let tools = [weather_tool()];
        let sink = Collect::default();

        let from_plain = ask_counted::<P>(&plain, &tools, None).await;
        let from_stream = ask_counted::<P>(&streaming, &tools, Some(&sink)).await;

        let expected = ModelTurn::ToolCalls {
            content: "Checking.".to_owned(),
            calls: vec![call("call_a", "get_weather", &text)],
        };
        assert_eq!(from_plain.map(|answer| answer.0), Ok(expected.clone()));
        assert_eq!(from_stream.map(|answer| answer.0), Ok(expected));
        assert_eq!(sink.deltas(), ["Checking."]);
        let offered = server.finish()[0].json()["tools"][0].clone();
        // `{name, …}` (Anthropic) or `{type, function: {name, …}}` (OpenAI).
        let name = offered["name"]
            .as_str()
            .or(offered["function"]["name"].as_str());
        assert_eq!(name, Some("get_weather"), "the tool was offered: {offered}");
    }

    pub(super) async fn streamed_text_reaches_the_sink_in_order_with_usage<P: Provider>() {
        let pieces = ["The ", "sky ", "is ", "blue", "."];
        let server = TestServer::start(vec![sse(text_stream::<P>(&pieces))]);
        let client = P::client(options::<P>(&server.base_url).stream(true));
        let sink = Collect::default();

        let answer = ask_counted::<P>(&client, &[], Some(&sink)).await;

        assert_eq!(
            answer,
            Ok((
                ModelTurn::FinalAnswer(pieces.concat()),
                Some(P::stream_usage())
            ))
        );
        assert_eq!(sink.deltas(), pieces);
        assert_eq!(server.finish().len(), 1);
    }

    pub(super) async fn deltas_arrive_before_the_stream_ends<P: Provider>() {
        // The server holds back the end of the answer until the test has
        // seen the first piece at the sink.
        let (seen, wait_for_seen) = std::sync::mpsc::channel::<()>();
        let server = RawServer::start(vec![script(move |connection| {
            let first = format!("{STREAM_HEAD}{}{}", P::stream_head(), P::text_event("Hel"));
            if connection.write(first.as_bytes()) {
                let held_back = wait_for_seen.recv_timeout(Duration::from_secs(3)).is_ok();
                let rest = if held_back {
                    "lo"
                } else {
                    " (sent without waiting)"
                };
                let rest = format!("{}{}", P::text_event(rest), P::stream_end());
                connection.write(rest.as_bytes());
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
        let client = P::client(options::<P>(&server.base_url).stream(true));

        let turn =
            P::complete_streaming(&client, &[ChatMessage::user("hi")], &[], Some(&sink)).await;

        assert_eq!(turn, Ok(ModelTurn::FinalAnswer("Hello".to_owned())));
        assert_eq!(sink.1.deltas(), ["Hel", "lo"]);
        server.finish();
    }

    pub(super) async fn server_that_does_not_stream_is_read_as_a_plain_answer<P: Provider>() {
        let server = TestServer::start(vec![ok(P::text_body("No stream here."))]);
        let client = P::client(options::<P>(&server.base_url).stream(true));
        let sink = Collect::default();

        let turn =
            P::complete_streaming(&client, &[ChatMessage::user("hi")], &[], Some(&sink)).await;

        assert_eq!(
            turn,
            Ok(ModelTurn::FinalAnswer("No stream here.".to_owned()))
        );
        assert_eq!(sink.deltas(), ["No stream here."]);
        server.finish();
    }

    pub(super) async fn silent_server_gives_a_timeout<P: Provider>() {
        let server = TestServer::start(vec![Reply::Silence]);
        let timeout = Duration::from_millis(300);
        let client = P::client(options::<P>(&server.base_url).timeout(timeout));

        let result = ask::<P>(&client).await;

        assert_eq!(result, Err(LlmError::Timeout(timeout)));
        assert_eq!(server.finish().len(), 1, "the request did reach the server");
    }

    pub(super) async fn slow_drip_past_the_timeout_is_a_timeout<P: Provider>() {
        let timeout = Duration::from_millis(400);
        let server = RawServer::start(vec![script(|connection| {
            if connection.write(plain_head(100_000).as_bytes()) {
                connection.drip(b" ", Duration::from_millis(50));
            }
        })]);
        let client = P::client(options::<P>(&server.base_url).timeout(timeout));

        let result = ask::<P>(&client).await;

        assert_eq!(result, Err(LlmError::Timeout(timeout)));
        assert_eq!(server.finish().len(), 1);
    }

    pub(super) async fn stream_that_never_ends_is_a_timeout<P: Provider>() {
        let timeout = Duration::from_millis(500);
        let server = RawServer::start(vec![script(|connection| {
            let first = format!(
                "{STREAM_HEAD}{}{}",
                P::stream_head(),
                P::text_event("Thinking")
            );
            if connection.write(first.as_bytes()) {
                connection.drip(P::KEEP_ALIVE, Duration::from_millis(20));
            }
        })]);
        let client = P::client(options::<P>(&server.base_url).stream(true).timeout(timeout));
        let sink = Collect::default();

        let result =
            P::complete_streaming(&client, &[ChatMessage::user("hi")], &[], Some(&sink)).await;

        assert_eq!(result, Err(LlmError::Timeout(timeout)));
        assert_eq!(sink.deltas(), ["Thinking"]);
        server.finish();
    }

    pub(super) async fn rate_limit_with_retry_after_zero_is_retried<P: Provider>() {
        let server = TestServer::start(vec![
            Reply::WithHeaders(
                429,
                vec![
                    ("Content-Type", "application/json".to_owned()),
                    ("Retry-After", "0".to_owned()),
                ],
                P::error_body("Rate limit reached"),
            ),
            ok(P::text_body("Second time lucky.")),
        ]);
        // A backoff far beyond the timeout: only the server's own wait
        // (0 s) lets the retry happen within it.
        let client =
            P::client(options::<P>(&server.base_url).retry_backoff(Duration::from_secs(3600)));

        let turn = ask::<P>(&client).await;

        assert_eq!(
            turn,
            Ok(ModelTurn::FinalAnswer("Second time lucky.".to_owned()))
        );
        let received = server.finish();
        assert_eq!(received.len(), 2);
        assert_eq!(received[0].body, received[1].body, "the same request again");
    }

    pub(super) async fn retry_after_as_a_past_http_date_is_retried_at_once<P: Provider>() {
        let server = TestServer::start(vec![
            Reply::WithHeaders(
                503,
                vec![("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT".to_owned())],
                String::new(),
            ),
            ok(P::text_body("Back.")),
        ]);
        let client =
            P::client(options::<P>(&server.base_url).retry_backoff(Duration::from_secs(60)));

        let turn = ask::<P>(&client).await;

        assert_eq!(turn, Ok(ModelTurn::FinalAnswer("Back.".to_owned())));
        assert_eq!(server.finish().len(), 2);
    }

    pub(super) async fn rate_limits_and_server_errors_are_retried_up_to_max_retries<P: Provider>() {
        let recovers = TestServer::start(vec![
            Reply::Status(429, P::error_body("slow down")),
            Reply::Status(500, P::error_body("crashed")),
            ok(P::text_body("back")),
        ]);
        let stays = TestServer::start(vec![
            Reply::Status(503, P::error_body("overloaded")),
            Reply::Status(503, P::error_body("overloaded")),
            Reply::Status(503, P::error_body("overloaded")),
            ok(P::text_body("too late")),
        ]);

        let recovered = ask::<P>(&P::client(options::<P>(&recovers.base_url).max_retries(2))).await;
        let gave_up = ask::<P>(&P::client(options::<P>(&stays.base_url).max_retries(2))).await;

        assert_eq!(recovered, Ok(ModelTurn::FinalAnswer("back".to_owned())));
        assert_eq!(recovers.finish().len(), 3);
        assert_eq!(
            gave_up,
            Err(LlmError::Http {
                status: 503,
                body: P::shown_error("overloaded"),
            })
        );
        assert_eq!(stays.finish().len(), 3, "one request and two retries");
    }

    pub(super) async fn backoff_longer_than_the_time_left_gives_the_server_error_at_once<
        P: Provider,
    >() {
        // No Retry-After: the client's own backoff decides (capped at
        // MAX_RETRY_WAIT, 30 s), and sleeping past the timeout (5 s) would
        // only trade the server's answer for a timeout.
        let server = TestServer::start(vec![
            Reply::Status(503, P::error_body("busy")),
            ok(P::text_body("never asked")),
        ]);
        let client =
            P::client(options::<P>(&server.base_url).retry_backoff(Duration::from_secs(3600)));

        let result = ask::<P>(&client).await;

        assert_eq!(
            result,
            Err(LlmError::Http {
                status: 503,
                body: P::shown_error("busy"),
            })
        );
        assert_eq!(server.finish().len(), 1);
    }

    pub(super) async fn client_errors_400_and_401_are_not_retried<P: Provider>() {
        let server = TestServer::start(vec![
            Reply::Status(400, P::error_body("bad request")),
            Reply::Status(401, P::error_body("bad key")),
            ok(P::text_body("never asked")),
        ]);
        let client = P::client(options::<P>(&server.base_url).max_retries(3));

        let bad_request = ask::<P>(&client).await;
        let unauthorized = ask::<P>(&client).await;

        assert_eq!(
            bad_request,
            Err(LlmError::Http {
                status: 400,
                body: P::shown_error("bad request"),
            })
        );
        assert_eq!(
            unauthorized,
            Err(LlmError::Http {
                status: 401,
                body: P::shown_error("bad key"),
            })
        );
        assert_eq!(server.finish().len(), 2, "one request each");
    }

    pub(super) async fn retry_after_longer_than_the_cap_or_the_time_left_is_not_waited_for<
        P: Provider,
    >() {
        let limited = |seconds: &str| {
            Reply::WithHeaders(
                429,
                vec![("Retry-After", seconds.to_owned())],
                P::error_body("slow down"),
            )
        };
        let server = TestServer::start(vec![limited("3"), ok(P::text_body("never asked"))]);
        let beyond_cap = TestServer::start(vec![limited("3600"), ok(P::text_body("never asked"))]);
        let short = P::client(options::<P>(&server.base_url).timeout(Duration::from_secs(2)));
        let patient =
            P::client(options::<P>(&beyond_cap.base_url).timeout(Duration::from_secs(24 * 3600)));

        let past_the_timeout = ask::<P>(&short).await;
        let past_the_cap = ask::<P>(&patient).await;

        for result in [past_the_timeout, past_the_cap] {
            assert_eq!(
                result,
                Err(LlmError::Http {
                    status: 429,
                    body: P::shown_error("slow down"),
                })
            );
        }
        assert_eq!(server.finish().len(), 1);
        assert_eq!(beyond_cap.finish().len(), 1);
    }

    pub(super) async fn refused_connection_is_a_transport_error<P: Provider>() {
        let base = format!("http://127.0.0.1:{}/v1", closed_port());
        let client = P::client(options::<P>(&base).max_retries(1));

        let reason = transport(ask::<P>(&client).await);

        assert!(reason.contains("127.0.0.1"), "reason: {reason}");
    }

    pub(super) async fn failed_connections_are_retried<P: Provider>() {
        // Nothing listens at first; the server comes up while the client
        // waits to retry.
        let port = closed_port();
        let opened = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            let server = tiny_http::Server::http(("127.0.0.1", port)).ok()?;
            let request = server.recv_timeout(Duration::from_secs(4)).ok()??;
            let body = P::text_body("Up now.").to_string();
            request.respond(tiny_http::Response::from_string(body)).ok()
        });
        let base = format!("http://127.0.0.1:{port}/v1");
        let client = P::client(
            options::<P>(&base)
                .max_retries(6)
                .retry_backoff(Duration::from_millis(50)),
        );

        let turn = ask::<P>(&client).await;

        assert_eq!(turn, Ok(ModelTurn::FinalAnswer("Up now.".to_owned())));
        assert_eq!(opened.join().ok().flatten(), Some(()));
    }

    pub(super) async fn connection_closed_before_any_answer_is_retried<P: Provider>() {
        let server = RawServer::start(vec![
            // Reads the request, then hangs up without a byte.
            script(|_| {}),
            script(|connection| {
                let body = P::text_body("Second connection.").to_string();
                let answer = format!("{}{body}", plain_head(body.len()));
                connection.write(answer.as_bytes());
            }),
        ]);

        let turn = ask::<P>(&client::<P>(&server.base_url)).await;

        assert_eq!(
            turn,
            Ok(ModelTurn::FinalAnswer("Second connection.".to_owned()))
        );
        assert_eq!(server.finish().len(), 2);
    }

    pub(super) async fn answer_over_the_byte_limit_is_refused_plain_chunked_and_streamed<
        P: Provider,
    >() {
        // One says its length up front, one does not (chunked), one streams.
        let server = TestServer::start(vec![
            ok(P::text_body(&"x".repeat(64 * 1024))),
            sse(text_stream::<P>(&["y".repeat(4096).as_str(); 8])),
        ]);
        let raw = RawServer::start(vec![script(|connection| {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                        Transfer-Encoding: chunked\r\n\r\n";
            if connection.write(head.as_bytes()) {
                for _ in 0..64 {
                    let piece = format!("{:x}\r\n{}\r\n", 4096, "y".repeat(4096));
                    if !connection.write(piece.as_bytes()) {
                        break;
                    }
                }
            }
        })]);
        let limited = |base: &str| options::<P>(base).max_response_bytes(16 * 1024);

        let plain = invalid(ask::<P>(&P::client(limited(&server.base_url))).await);
        let streamed = invalid(ask::<P>(&P::client(limited(&server.base_url).stream(true))).await);
        let chunked = invalid(ask::<P>(&P::client(limited(&raw.base_url))).await);

        for reason in [plain, streamed, chunked] {
            assert!(
                reason.contains("larger than 16384 bytes"),
                "reason: {reason}"
            );
        }
        assert_eq!(server.finish().len(), 2, "none of them retried");
        assert_eq!(raw.finish().len(), 1);
    }

    pub(super) async fn endless_stream_of_text_is_cut_at_the_size_limit<P: Provider>() {
        let server = RawServer::start(vec![script(|connection| {
            let head = format!("{STREAM_HEAD}{}", P::stream_head());
            if connection.write(head.as_bytes()) {
                connection.drip(P::text_event(&"z".repeat(1000)).as_bytes(), Duration::ZERO);
            }
        })]);
        let client = P::client(
            options::<P>(&server.base_url)
                .stream(true)
                .max_response_bytes(64 * 1024),
        );

        let reason = invalid(ask::<P>(&client).await);

        assert!(
            reason.contains("larger than 65536 bytes"),
            "reason: {reason}"
        );
        server.finish();
    }

    pub(super) async fn malformed_or_hostile_json_is_refused_without_a_panic<P: Provider>() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let bodies = [
            "{\"content\": [".to_owned(),
            String::new(),
            "null".to_owned(),
            "[1, 2, 3]".to_owned(),
            "{\"choices\": 7, \"content\": 7}".to_owned(),
            deep,
            format!("{{\"a\": \"{}", "\\u0000".repeat(1000)),
        ];
        let count = bodies.len();
        let server = TestServer::start(bodies.into_iter().map(|b| Reply::Status(200, b)).collect());
        let client = P::client(options::<P>(&server.base_url).max_retries(3));

        for _ in 0..count {
            invalid(ask::<P>(&client).await);
        }

        assert_eq!(server.finish().len(), count, "none of them retried");
    }

    pub(super) async fn body_that_is_not_utf8_is_an_invalid_response<P: Provider>() {
        let server = RawServer::start(vec![script(|connection| {
            let mut answer = plain_head(4).into_bytes();
            answer.extend_from_slice(&[0xff, 0xfe, 0x7b, 0x7d]);
            connection.write(&answer);
        })]);

        let reason = invalid(ask::<P>(&client::<P>(&server.base_url)).await);

        assert!(reason.contains("UTF-8"), "reason: {reason}");
        server.finish();
    }

    pub(super) async fn bad_status_lines_and_cut_bodies_are_transport_errors_not_retried<
        P: Provider,
    >() {
        let scripts: Vec<Script> = [
            "HTTP/1.1 two hundred OK\r\n\r\n".to_owned(),
            "SSH-2.0-OpenSSH_9.6\r\n\r\n".to_owned(),
            format!("{}{{\"content\": [", plain_head(500)),
        ]
        .into_iter()
        .map(|answer| {
            script(move |connection| {
                connection.write(answer.as_bytes());
            })
        })
        .collect();
        let server = RawServer::start(scripts);
        let client = P::client(options::<P>(&server.base_url).timeout(Duration::from_secs(3)));

        for _ in 0..3 {
            let reason = transport(ask::<P>(&client).await);
            assert!(reason.contains("127.0.0.1"), "reason: {reason}");
        }
        // One connection each: an answer that came but cannot be read is
        // not asked again.
        assert_eq!(server.finish().len(), 3);
    }

    pub(super) async fn huge_error_body_is_cut_to_its_start<P: Provider>() {
        let server = TestServer::start(vec![Reply::Status(400, "e".repeat(1024 * 1024))]);

        match ask::<P>(&client::<P>(&server.base_url)).await {
            Err(LlmError::Http { status: 400, body }) => {
                assert!(body.starts_with("eeee"), "body: {body}");
                assert!(body.chars().count() <= 501, "{} chars", body.len());
            }
            other => panic!("expected HTTP 400, got {other:?}"),
        }
        assert_eq!(server.finish().len(), 1);
    }

    pub(super) async fn redirect_to_another_origin_is_refused<P: Provider>() {
        let elsewhere = TestServer::start(vec![ok(P::text_body("stolen"))]);
        let redirect = |status: u16| {
            Reply::WithHeaders(
                status,
                vec![(
                    "Location",
                    format!(
                        "http://thief:hunter22@127.0.0.1:{}{}",
                        elsewhere.port,
                        P::PATH
                    ),
                )],
                String::new(),
            )
        };
        let server = TestServer::start(vec![redirect(307), redirect(302)]);
        let client = P::client(options::<P>(&server.base_url).api_key("sk-must-stay-home"));

        for _ in 0..2 {
            let reason = transport(ask::<P>(&client).await);
            assert!(reason.contains("another origin"), "reason: {reason}");
            assert!(
                reason.contains(&format!("127.0.0.1:{}", elsewhere.port)),
                "reason: {reason}"
            );
            assert!(!reason.contains("hunter22"), "reason: {reason}");
        }
        assert_eq!(server.finish().len(), 2);
        assert_eq!(elsewhere.finish().len(), 0, "the other origin saw nothing");
    }

    pub(super) async fn same_origin_redirect_is_followed_with_the_key<P: Provider>() {
        let server = TestServer::start(vec![
            Reply::WithHeaders(
                308,
                vec![("Location", "/v2/moved?to=here".to_owned())],
                String::new(),
            ),
            ok(P::text_body("Moved, and found.")),
        ]);
        let client = P::client(options::<P>(&server.base_url).api_key("sk-test"));

        let turn = ask::<P>(&client).await;

        assert_eq!(
            turn,
            Ok(ModelTurn::FinalAnswer("Moved, and found.".to_owned()))
        );
        let received = server.finish();
        assert_eq!(received.len(), 2);
        assert_eq!(received[1].method, "POST");
        assert_eq!(received[1].url, "/v2/moved?to=here");
        assert_eq!(received[1].body, received[0].body);
        assert_eq!(
            received[1].header_values(P::KEY_HEADER),
            [P::key_value("sk-test")]
        );
    }

    pub(super) async fn endless_same_origin_redirects_are_cut_off<P: Provider>() {
        let again =
            || Reply::WithHeaders(307, vec![("Location", P::PATH.to_owned())], String::new());
        let server = TestServer::start((0..10).map(|_| again()).collect());

        let reason = transport(ask::<P>(&client::<P>(&server.base_url)).await);

        assert!(reason.contains("more than 5 times"), "reason: {reason}");
        assert_eq!(server.finish().len(), 6, "the request and five redirects");
    }

    pub(super) async fn the_key_and_password_never_appear_in_errors_or_debug_output<P: Provider>() {
        const KEY: &str = "sk-very-secret-key-42";
        const PASSWORD: &str = "pa55-word-xyz";
        let assert_no_secret = |what: &str, text: &str| {
            for secret in [KEY, PASSWORD] {
                assert!(!text.contains(secret), "{what} shows a secret: {text}");
            }
        };
        let echo = format!("key {KEY}, password {PASSWORD}");
        let elsewhere = TestServer::start(vec![]);
        let server = TestServer::start(vec![
            Reply::Status(401, P::error_body(&echo)),
            Reply::Status(200, format!("not JSON: {echo}")),
            sse(P::stream_error(&echo)),
            Reply::WithHeaders(
                307,
                vec![(
                    "Location",
                    format!(
                        "http://u:{PASSWORD}@127.0.0.1:{}{}",
                        elsewhere.port,
                        P::PATH
                    ),
                )],
                String::new(),
            ),
            Reply::Silence,
        ]);
        let with_secrets = |base_url: &str| {
            let base_url = base_url.replace("http://", &format!("http://user:{PASSWORD}@"));
            options::<P>(&base_url)
                .api_key(KEY)
                .max_retries(0)
                .timeout(Duration::from_millis(500))
        };
        let client = P::client(with_secrets(&server.base_url));

        let mut errors = vec![
            ask::<P>(&client).await,
            ask::<P>(&client).await,
            ask::<P>(&P::client(with_secrets(&server.base_url).stream(true))).await,
            ask::<P>(&client).await,
            ask::<P>(&client).await,
            ask::<P>(&P::client(with_secrets(&format!(
                "http://127.0.0.1:{}/v1",
                closed_port()
            ))))
            .await,
            ask::<P>(&P::client(with_secrets("ftp://127.0.0.1/v1"))).await,
            ask::<P>(&P::client(with_secrets("http://bad host/v1"))).await,
            ask::<P>(&P::client(
                with_secrets("http://127.0.0.1:1/v1").api_key(format!("{KEY}\n")),
            ))
            .await,
        ];
        if cfg!(not(feature = "tls")) {
            errors.push(ask::<P>(&P::client(with_secrets("https://127.0.0.1/v1"))).await);
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
        // The server did quote the secrets: they were scrubbed, not absent.
        assert!(
            matches!(&errors[0], Err(LlmError::Http { body, .. }) if body.contains("<redacted>")),
            "{:?}",
            errors[0]
        );
        for error in &errors {
            let error = error.as_ref().expect_err("an error");
            assert_no_secret("an error's text", &error.to_string());
            assert_no_secret("an error's Debug", &format!("{error:?}"));
        }
        assert_no_secret("the client's Debug", &format!("{client:?}"));
        assert_no_secret(
            "the options' Debug",
            &format!("{:?}", with_secrets("http://h")),
        );
        assert_no_secret("what the client shows", &P::shown(&client));
        assert_eq!(server.finish().len(), 5);
        assert_eq!(elsewhere.finish().len(), 0);
    }

    pub(super) async fn unusable_options_are_config_errors_before_any_request<P: Provider>() {
        let port = closed_port();
        let good =
            ModelOptions::new("conformance-model").base_url(format!("http://127.0.0.1:{port}/v1"));
        let bad = [
            (
                good.clone().base_url("localhost:8080"),
                "must start with http://",
            ),
            (
                good.clone().base_url("ftp://127.0.0.1"),
                "must start with http://",
            ),
            (
                good.clone().base_url("http://bad host"),
                "cannot be used in a request",
            ),
            (good.clone().model(" "), "no model name"),
            (good.clone().timeout(Duration::ZERO), "the timeout is 0"),
            (
                good.clone().max_response_bytes(0),
                "max_response_bytes is 0",
            ),
            (
                good.clone().api_key("sk\nInjected: 1"),
                "API key cannot be used",
            ),
        ];

        for (options, expected) in bad {
            let client = P::client(options.clone());
            let checked = options.check().map_err(|e| LlmError::Config(e.to_string()));
            match ask::<P>(&client).await {
                Err(LlmError::Config(reason)) => {
                    assert!(reason.contains(expected), "reason: {reason}");
                    assert_eq!(
                        checked,
                        Err(LlmError::Config(reason)),
                        "the options' own check"
                    );
                }
                other => panic!("expected a config error for {options:?}, got {other:?}"),
            }
        }
    }

    #[cfg(feature = "tls")]
    pub(super) async fn https_base_url_is_accepted_only_with_the_tls_feature<P: Provider>() {
        let client = P::client(ModelOptions::new("m").base_url("https://127.0.0.1:1/v1"));

        // A Config error would come before any connection; port 1 refuses.
        let reason = transport(ask::<P>(&client).await);

        assert!(reason.contains("127.0.0.1"), "reason: {reason}");
    }

    #[cfg(not(feature = "tls"))]
    pub(super) async fn https_base_url_is_accepted_only_with_the_tls_feature<P: Provider>() {
        let client = P::client(ModelOptions::new("m").base_url("https://127.0.0.1:1/v1"));

        match ask::<P>(&client).await {
            Err(LlmError::Config(reason)) => {
                assert!(reason.contains("`tls` feature"), "reason: {reason}");
            }
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[cfg(feature = "tls")]
    pub(super) async fn https_to_a_server_without_tls_is_a_transport_error<P: Provider>() {
        use std::net::TcpListener;

        // A plain HTTP server answers the TLS handshake with plain HTTP.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("a local address").port();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().ok()?;
            let answer = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
            std::io::Write::write_all(&mut stream, answer).ok()
        });
        let base = format!("https://127.0.0.1:{port}/v1");
        let client = P::client(options::<P>(&base).max_retries(0));

        let reason = transport(ask::<P>(&client).await);

        assert!(
            reason.contains(&format!("127.0.0.1:{port}")),
            "reason: {reason}"
        );
        assert_eq!(server.join().ok().flatten(), Some(()));
    }

    pub(super) async fn complete_streaming_is_a_send_future<P: Provider>() {
        fn assert_send<T: Send>(_: &T) {}
        let client = P::client(ModelOptions::new("m").base_url("http://127.0.0.1:1/v1"));
        let sink = Collect::default();
        let messages = [ChatMessage::user("hi")];

        let answer = P::complete_streaming(&client, &messages, &[], Some(&sink));

        // A future that is not `Send` would not compile here (the trait
        // asks for one); one that is can be spawned on a multi-threaded
        // runtime.
        assert_send(&answer);
    }
}

/// Runs every case against one provider, each test named after its case
/// in a module named after the provider (`openai::silent_server_gives_a_timeout`).
macro_rules! conformance {
    ($provider:ident, $wire:ty) => {
        mod $provider {
            use super::*;

            conformance!(@cases $wire;
                plain_answer_is_the_final_answer_and_reaches_a_sink_whole,
                model_base_url_and_key_are_used_as_set,
                tool_call_with_arguments_is_the_same_streamed_or_not,
                streamed_text_reaches_the_sink_in_order_with_usage,
                deltas_arrive_before_the_stream_ends,
                server_that_does_not_stream_is_read_as_a_plain_answer,
                silent_server_gives_a_timeout,
                slow_drip_past_the_timeout_is_a_timeout,
                stream_that_never_ends_is_a_timeout,
                rate_limit_with_retry_after_zero_is_retried,
                retry_after_as_a_past_http_date_is_retried_at_once,
                rate_limits_and_server_errors_are_retried_up_to_max_retries,
                backoff_longer_than_the_time_left_gives_the_server_error_at_once,
                client_errors_400_and_401_are_not_retried,
                retry_after_longer_than_the_cap_or_the_time_left_is_not_waited_for,
                refused_connection_is_a_transport_error,
                failed_connections_are_retried,
                connection_closed_before_any_answer_is_retried,
                answer_over_the_byte_limit_is_refused_plain_chunked_and_streamed,
                endless_stream_of_text_is_cut_at_the_size_limit,
                malformed_or_hostile_json_is_refused_without_a_panic,
                body_that_is_not_utf8_is_an_invalid_response,
                bad_status_lines_and_cut_bodies_are_transport_errors_not_retried,
                huge_error_body_is_cut_to_its_start,
                redirect_to_another_origin_is_refused,
                same_origin_redirect_is_followed_with_the_key,
                endless_same_origin_redirects_are_cut_off,
                the_key_and_password_never_appear_in_errors_or_debug_output,
                unusable_options_are_config_errors_before_any_request,
                https_base_url_is_accepted_only_with_the_tls_feature,
                #[cfg(feature = "tls")]
                https_to_a_server_without_tls_is_a_transport_error,
                complete_streaming_is_a_send_future,
            );
        }
    };
    (@cases $wire:ty; $($(#[$attribute:meta])* $case:ident),* $(,)?) => {
        $(
            $(#[$attribute])*
            #[tokio::test]
            async fn $case() {
                cases::$case::<$wire>().await;
            }
        )*
    };
}

conformance!(openai, OpenAi);
conformance!(anthropic, Anthropic);

/// The shared knobs are checked once: both clients refuse the same bad
/// options with the same text.
#[tokio::test]
async fn both_clients_refuse_bad_shared_options_with_the_same_text() {
    let good = ModelOptions::new("m").base_url("http://127.0.0.1:1/v1");
    let bad = [
        good.clone().base_url("localhost:8080"),
        good.clone().base_url("http://bad host"),
        good.clone().model(""),
        good.clone().timeout(Duration::ZERO),
        good.clone().max_response_bytes(0),
        good.clone().api_key("sk\n"),
    ];

    for options in bad {
        let openai = ask::<OpenAi>(&OpenAi::client(options.clone())).await;
        let anthropic = ask::<Anthropic>(&Anthropic::client(options.clone())).await;

        assert!(matches!(openai, Err(LlmError::Config(_))), "{openai:?}");
        assert_eq!(openai, anthropic, "{options:?}");
    }
}
