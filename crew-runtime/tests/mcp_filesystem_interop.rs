//! SPEC §9 against a server this workspace did not write: the reference
//! MCP filesystem server from npm (`@modelcontextprotocol/server-filesystem`,
//! pinned in `interop/mcp-filesystem`), on a temporary directory.
//!
//! A crew reads and lists files through it while a guard blocks a write
//! outside an allowed folder and an approval gates `write_file`.
//!
//! Needs the server installed (`interop/install.sh`, Node.js and npm), so
//! it is ignored by `cargo test`; CI runs it with
//! `cargo test -p crew-runtime --test mcp_filesystem_interop -- --ignored`.
#![cfg(feature = "mcp")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crew_runtime::guards::ApprovalGate;
use crew_runtime::mcp::McpServer;
use crew_runtime::prelude::*;
use crew_runtime::{HumanInputSource, ScriptedInput};

const BOUND: Duration = Duration::from_secs(60);

/// The installed server's entry point.
fn reference_server() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../interop/mcp-filesystem/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        path.is_file(),
        "the reference MCP server is not installed at {}: run interop/install.sh",
        path.display()
    );
    path
}

/// Lets `write_file` write only inside `allowed`.
fn write_guard(allowed: PathBuf) -> impl Fn(&mut ToolCallHookContext) -> Result<(), HookAborted> {
    move |ctx| {
        let target = ctx
            .tool_input
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if Path::new(target).starts_with(&allowed) && !target.contains("..") {
            Ok(())
        } else {
            Err(HookAborted::new(
                format!("writes go to {} only", allowed.display()),
                "write-guard",
            ))
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the npm reference server: run interop/install.sh"]
async fn spec9_interop_a_crew_reads_lists_and_writes_through_the_reference_server() {
    let server_js = reference_server();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().canonicalize().expect("a real path");
    let drafts = root.join("drafts");
    std::fs::create_dir(&drafts).expect("drafts");
    std::fs::write(root.join("brief.txt"), "Quarterly numbers are up 4%.").expect("brief");

    let mut command = tokio::process::Command::new("node");
    command.arg(&server_js).arg(&root).current_dir(&root);
    let files = tokio::time::timeout(BOUND, McpServer::stdio("filesystem", command).connect())
        .await
        .expect("connects in time")
        .expect("the reference server connects");

    // The server's own annotations: read tools are read-only, write_file
    // is destructive.
    let read = files.tool("read_text_file").expect("read_text_file");
    assert!(read.annotations().is_read_only());
    let write = files.tool("write_file").expect("write_file");
    assert!(write.annotations().is_destructive());
    assert_eq!(write.annotations().title.as_deref(), Some("Write File"));

    let at = |name: &str| root.join(name).display().to_string();
    let model = Arc::new(
        ScriptedLlm::new()
            .call("list_directory", json!({"path": at(".")}))
            .call("read_text_file", json!({"path": at("brief.txt")}))
            .call(
                "write_file",
                json!({"path": at("outside.txt"), "content": "x"}),
            )
            .call(
                "write_file",
                json!({"path": at("drafts/summary.txt"), "content": "Up 4%."}),
            )
            .call(
                "write_file",
                json!({"path": at("drafts/refused.txt"), "content": "no"}),
            )
            .answer("Summary written to drafts/summary.txt."),
    );
    let answers = Arc::new(ScriptedInput::new(["yes", "no"]));
    let analyst = Agent::builder("Analyst")
        .llm(Arc::clone(&model) as Arc<dyn Llm>)
        .tools(files.tools())
        .build();
    let crew = Crew::builder()
        .agent(analyst.clone())
        .task(Task::builder("Summarize the brief").agent(&analyst).build())
        .global_registry(Arc::new(HookRegistry::new()))
        .human_input(Arc::clone(&answers) as Arc<dyn HumanInputSource>)
        .hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("write-guard").tools(["write_file"]),
            write_guard(drafts.clone()),
        )
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_tools(["write_file"]).pre_hook(),
        )
        .build()
        .expect("the crew builds");
    let output = tokio::time::timeout(BOUND, crew.kickoff(Inputs::new()))
        .await
        .expect("ends in time")
        .expect("the run succeeds");
    assert_eq!(output.raw, "Summary written to drafts/summary.txt.");

    let seen = model.observations();
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert_eq!(seen[0], "[FILE] brief.txt\n[DIR] drafts");
    assert_eq!(seen[1], "Quarterly numbers are up 4%.");
    let blocked = "Tool execution blocked by hook. Tool: write_file";
    assert_eq!(seen[2], blocked);
    assert_eq!(
        seen[3],
        format!("Successfully wrote to {}", at("drafts/summary.txt"))
    );
    assert_eq!(seen[4], blocked);

    // What the directory holds: the approved write only.
    assert!(!root.join("outside.txt").exists());
    assert!(!drafts.join("refused.txt").exists());
    assert_eq!(
        std::fs::read_to_string(drafts.join("summary.txt")).expect("written"),
        "Up 4%."
    );
    // The guard ran first: only the two writes inside drafts were asked about.
    let asked = answers.requests();
    assert_eq!(asked.len(), 2);
    assert!(
        asked
            .iter()
            .all(|r| r.tool_name.as_deref() == Some("write_file"))
    );
}
