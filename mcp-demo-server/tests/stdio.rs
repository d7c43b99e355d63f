//! The server binary, as MCP clients see it over stdio.

use std::{future::Future, path::Path, time::Duration};

use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, CallToolResult, ContentBlock, Tool},
    service::RunningService,
    transport::{ConfigureCommandExt, TokioChildProcess},
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

async fn connect(root: &Path) -> RunningService<RoleClient, ()> {
    let command =
        tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-demo-server")).configure(|command| {
            command.arg("--root").arg(root);
        });
    let transport = TokioChildProcess::new(command).expect("the server starts");
    bounded(().serve(transport))
        .await
        .expect("the server initializes")
}

async fn call(
    client: &RunningService<RoleClient, ()>,
    name: &str,
    arguments: Value,
) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
    bounded(client.call_tool(params))
        .await
        .expect("the tool call is answered")
}

fn text(result: &CallToolResult) -> &str {
    match result.content.as_slice() {
        [ContentBlock::Text(text)] => &text.text,
        other => panic!("one text block, not {other:?}"),
    }
}

fn find<'a>(tools: &'a [Tool], name: &str) -> &'a Tool {
    tools
        .iter()
        .find(|tool| tool.name == name)
        .unwrap_or_else(|| panic!("the server lists {name}"))
}

fn annotations(tool: &Tool) -> Value {
    serde_json::to_value(&tool.annotations).expect("annotations serialize")
}

#[tokio::test]
async fn tools_declare_the_reference_names_titles_and_annotations() {
    let root = tempfile::tempdir().expect("a temporary root");
    let client = connect(root.path()).await;
    let tools = bounded(client.list_all_tools())
        .await
        .expect("tools are listed");

    let expected = [
        (
            "read_text_file",
            Some("Read Text File"),
            json!({"readOnlyHint": true, "openWorldHint": false}),
        ),
        (
            "list_directory",
            Some("List Directory"),
            json!({"readOnlyHint": true, "openWorldHint": false}),
        ),
        (
            "write_file",
            Some("Write File"),
            json!({"readOnlyHint": false, "idempotentHint": true, "destructiveHint": true, "openWorldHint": false}),
        ),
        (
            "list_allowed_directories",
            Some("List Allowed Directories"),
            json!({"readOnlyHint": true, "openWorldHint": false}),
        ),
        (
            "echo",
            None,
            json!({"readOnlyHint": true, "openWorldHint": false}),
        ),
        (
            "echo_meta",
            None,
            json!({"readOnlyHint": true, "openWorldHint": false}),
        ),
        ("plain", None, Value::Null),
        (
            "delete_record",
            None,
            json!({"readOnlyHint": false, "destructiveHint": true}),
        ),
        (
            "set_flag",
            None,
            json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}),
        ),
        (
            "web_lookup",
            Some("Web Lookup"),
            json!({"title": "Web Lookup", "readOnlyHint": true, "openWorldHint": true}),
        ),
        ("fail", None, Value::Null),
        ("slow", None, Value::Null),
        ("stats", None, Value::Null),
        ("structured_only", None, Value::Null),
        ("picture", None, Value::Null),
    ];
    assert_eq!(tools.len(), expected.len(), "{tools:#?}");
    for (name, title, expected_annotations) in expected {
        let tool = find(&tools, name);
        assert_eq!(tool.title.as_deref(), title, "{name}");
        assert_eq!(annotations(tool), expected_annotations, "{name}");
        assert!(
            tool.description.as_deref().is_some_and(|d| !d.is_empty()),
            "{name}"
        );
        assert_eq!(
            tool.input_schema.get("type"),
            Some(&json!("object")),
            "{name}"
        );
    }
    let write = &find(&tools, "write_file").input_schema;
    assert_eq!(write["required"], json!(["path", "content"]));

    bounded(client.cancel()).await.expect("the client closes");
}

#[tokio::test]
async fn filesystem_tools_write_read_and_list_inside_the_root() {
    let root = tempfile::tempdir().expect("a temporary root");
    std::fs::create_dir(root.path().join("notes")).expect("a subdirectory");
    let client = connect(root.path()).await;

    let written = call(
        &client,
        "write_file",
        json!({"path": "b.txt", "content": "bee"}),
    )
    .await;
    assert_eq!(written.is_error, Some(false));
    assert_eq!(text(&written), "Successfully wrote to b.txt");
    assert_eq!(
        written.structured_content,
        Some(json!({"content": "Successfully wrote to b.txt"}))
    );
    assert_eq!(
        std::fs::read_to_string(root.path().join("b.txt")).expect("written"),
        "bee"
    );

    std::fs::write(root.path().join("a.txt"), "ay").expect("a file");
    let absolute = root.path().join("a.txt").display().to_string();
    let read = call(&client, "read_text_file", json!({"path": absolute})).await;
    assert_eq!(text(&read), "ay");
    assert_eq!(read.structured_content, Some(json!({"content": "ay"})));

    let listed = call(&client, "list_directory", json!({"path": "."})).await;
    assert_eq!(text(&listed), "[FILE] a.txt\n[FILE] b.txt\n[DIR] notes");

    let allowed = call(&client, "list_allowed_directories", json!({})).await;
    let canonical = root.path().canonicalize().expect("a canonical root");
    assert_eq!(
        text(&allowed),
        format!("Allowed directories:\n{}", canonical.display())
    );

    let missing = call(&client, "read_text_file", json!({"path": "missing.txt"})).await;
    assert_eq!(missing.is_error, Some(true));
    assert!(
        text(&missing).starts_with("Cannot read missing.txt:"),
        "{missing:?}"
    );

    bounded(client.cancel()).await.expect("the client closes");
}

#[tokio::test]
async fn paths_leaving_the_root_are_refused() {
    let root = tempfile::tempdir().expect("a temporary root");
    let outside = tempfile::tempdir().expect("a directory outside the root");
    std::fs::write(outside.path().join("secret.txt"), "secret").expect("a file outside");
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path(), root.path().join("link")).expect("a symbolic link");
    let client = connect(root.path()).await;

    let escape = format!(
        "../{}/secret.txt",
        outside
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a name")
    );
    let elsewhere = outside.path().join("secret.txt").display().to_string();
    let mut attempts = vec![
        ("read_text_file", json!({"path": escape})),
        ("read_text_file", json!({"path": elsewhere})),
        (
            "write_file",
            json!({"path": outside.path().join("new.txt").display().to_string(), "content": "x"}),
        ),
        ("list_directory", json!({"path": ".."})),
    ];
    if cfg!(unix) {
        attempts.push(("read_text_file", json!({"path": "link/secret.txt"})));
        attempts.push((
            "write_file",
            json!({"path": "link/new.txt", "content": "x"}),
        ));
    }
    for (tool, arguments) in attempts {
        let path = arguments["path"].as_str().expect("a path").to_owned();
        let refused = call(&client, tool, arguments).await;
        assert_eq!(refused.is_error, Some(true), "{tool} {path}");
        assert_eq!(
            text(&refused),
            format!("Access denied - path outside allowed directories: {path}")
        );
    }
    assert!(
        !outside.path().join("new.txt").exists(),
        "nothing was written outside"
    );

    bounded(client.cancel()).await.expect("the client closes");
}

#[tokio::test]
async fn fixture_tools_return_every_result_kind() {
    let root = tempfile::tempdir().expect("a temporary root");
    std::fs::write(root.path().join("one.txt"), "1").expect("a file");
    std::fs::create_dir(root.path().join("sub")).expect("a directory, not counted");
    let client = connect(root.path()).await;

    let failed = call(&client, "fail", json!({"message": "it broke"})).await;
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(text(&failed), "it broke");

    let flag = call(&client, "set_flag", json!({"name": "dark", "value": true})).await;
    assert_eq!(text(&flag), "flag dark = true");

    let picture = call(&client, "picture", json!({})).await;
    let [
        ContentBlock::Image(image),
        ContentBlock::Resource(embedded),
        ContentBlock::ResourceLink(link),
    ] = picture.content.as_slice()
    else {
        panic!(
            "an image, an embedded resource and a link, not {:?}",
            picture.content
        );
    };
    assert_eq!(image.mime_type, "image/png");
    assert!(image.data.starts_with("iVBORw0KGgo"), "a base64 PNG");
    assert!(serde_json::to_value(embedded).expect("serializes")["resource"]["text"].is_string());
    assert!(link.uri.starts_with("file:///"));

    let stats = call(&client, "stats", json!({})).await;
    let expected = json!({"files": 1, "calls": 4});
    assert_eq!(stats.structured_content, Some(expected.clone()));
    let stats_text: Value = serde_json::from_str(text(&stats)).expect("the text is the same JSON");
    assert_eq!(stats_text, expected);

    let structured = call(&client, "structured_only", json!({})).await;
    assert!(structured.content.is_empty());
    assert_eq!(structured.structured_content, Some(json!({"answer": 42})));

    let slept = call(&client, "slow", json!({"millis": 5})).await;
    assert_eq!(text(&slept), "slept 5 ms");

    bounded(client.cancel()).await.expect("the client closes");
}
