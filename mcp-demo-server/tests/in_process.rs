//! The library's serving functions, with clients in the test's own process.

use std::{future::Future, time::Duration};

use mcp_demo_server::{DemoServer, serve_http, serve_io};
use rmcp::{
    ServiceExt,
    model::{CallToolRequestParams, ContentBlock},
    transport::StreamableHttpClientTransport,
};
use serde_json::{Value, json};

/// Every wait is bounded, so that a broken server fails the test instead of
/// hanging it.
const LIMIT: Duration = Duration::from_secs(20);

async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, future)
        .await
        .expect("the server answers in time")
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

#[tokio::test]
async fn the_call_log_records_what_the_server_received_over_a_pipe() {
    let root = tempfile::tempdir().expect("a temporary root");
    let server = DemoServer::new(root.path());
    let (client_end, server_end) = tokio::io::duplex(64 * 1024);
    let (reader, writer) = tokio::io::split(server_end);
    let serving = tokio::spawn(serve_io(server.clone(), reader, writer));

    let client = bounded(().serve(client_end))
        .await
        .expect("the server initializes");
    bounded(client.call_tool(call("echo", json!({"text": "hello"}))))
        .await
        .expect("echo answers");
    bounded(client.call_tool(call("delete_record", json!({"id": "7"}))))
        .await
        .expect("delete_record answers");
    bounded(client.cancel()).await.expect("the client closes");
    bounded(serving)
        .await
        .expect("the serving task does not panic")
        .expect("serving ends cleanly when the client closes");

    assert_eq!(
        server.calls(),
        vec![
            ("echo".to_owned(), json!({"text": "hello"})),
            ("delete_record".to_owned(), json!({"id": "7"})),
        ]
    );
    assert_eq!(server.call_count(), 2);
}

#[tokio::test]
async fn streamable_http_serves_until_shut_down() {
    let root = tempfile::tempdir().expect("a temporary root");
    let server = DemoServer::new(root.path());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let http = serve_http(server.clone(), listener)
        .await
        .expect("the server starts");
    let url = http.url();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );

    let client = bounded(().serve(StreamableHttpClientTransport::from_uri(url.clone())))
        .await
        .expect("the server initializes over HTTP");
    let echoed = bounded(client.call_tool(call("echo", json!({"text": "over http"}))))
        .await
        .expect("echo answers");
    assert!(
        matches!(echoed.content.as_slice(), [ContentBlock::Text(text)] if text.text == "over http"),
        "{echoed:?}"
    );
    assert_eq!(
        server.calls(),
        vec![("echo".to_owned(), json!({"text": "over http"}))]
    );
    bounded(client.cancel()).await.expect("the client closes");

    bounded(http.shutdown()).await;
    let after = bounded(().serve(StreamableHttpClientTransport::from_uri(url))).await;
    assert!(after.is_err(), "nothing serves after shutdown");
}
