//! MCP tools under the hooks: an analyst works on a folder through an MCP
//! filesystem server, while a guard keeps writes in `drafts/` and a person
//! approves every tool that may destroy data.
//!
//! `cargo run --example mcp_filesystem` — offline: the server is this
//! workspace's own MCP server (`mcp-demo-server`), started as a child
//! process over stdio (the example runs itself with `--serve`), on a
//! temporary folder.
//!
//! `cargo run --example mcp_filesystem -- --npm` — the same crew against
//! the reference server from npm, `@modelcontextprotocol/server-filesystem`,
//! once `interop/install.sh` has installed it (Node.js and npm needed).
//!
//! The server's tool annotations reach the hooks: `write_file` says it is
//! destructive, the read and list tools that they only read. The approval
//! is asked by capability (`ApprovalGate::for_capabilities`), not by tool
//! name, so a destructive tool the server adds tomorrow is gated too.
//! Answers come from a script (approve the first write, refuse the second)
//! unless `--interactive` asks you on the terminal.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use crew_runtime::guards::ApprovalGate;
use crew_runtime::mcp::{McpServer, McpServerBuilder};
use crew_runtime::prelude::*;
use crew_runtime::{HumanInputSource, ScriptedInput, TerminalInput, transcript::Transcript};

/// Which MCP server the crew talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    /// This workspace's server, run as a child process of this example.
    Workspace,
    /// The reference server from npm, installed by `interop/install.sh`.
    Npm,
}

/// The reference server's entry point, where `interop/install.sh` puts it.
fn npm_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../interop/mcp-filesystem/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
}

/// The command that starts `server` on `root`.
fn command(server: Server, root: &Path) -> Result<tokio::process::Command, Box<dyn Error>> {
    let mut command = match server {
        Server::Workspace => {
            let mut command = tokio::process::Command::new(std::env::current_exe()?);
            command.arg("--serve");
            command
        }
        Server::Npm => {
            let script = npm_server();
            if !script.is_file() {
                return Err(format!(
                    "the npm server is not installed at {}: run interop/install.sh first",
                    script.display()
                )
                .into());
            }
            let mut command = tokio::process::Command::new("node");
            command.arg(script);
            command
        }
    };
    command.arg(root).current_dir(root);
    Ok(command)
}

/// Keeps `write_file` inside the folder `allowed` of `root` (paths are
/// relative to `root`, the servers' working directory): a guard by path,
/// before any person is asked.
fn keep_writes_in(
    root: PathBuf,
    allowed: &'static str,
) -> impl Fn(&mut ToolCallHookContext) -> Result<(), HookAborted> {
    move |ctx| {
        let target = ctx
            .tool_input
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let climbs = Path::new(target)
            .components()
            .any(|part| matches!(part, std::path::Component::ParentDir));
        if !climbs && root.join(target).starts_with(root.join(allowed)) {
            Ok(())
        } else {
            Err(HookAborted::new(
                format!("{target} is outside {allowed}/"),
                "write-guard",
            ))
        }
    }
}

/// Runs the analyst on a fresh folder, against the server `connect` makes
/// for that folder, with answers from `input`; returns the transcript and
/// what the folder holds afterwards.
async fn run(
    connect: impl FnOnce(&Path) -> Result<McpServerBuilder, Box<dyn Error>>,
    input: Arc<dyn HumanInputSource>,
    transcript: Transcript,
) -> Result<Vec<String>, Box<dyn Error>> {
    let folder = Folder::new()?;
    let root = folder.path().to_path_buf();
    std::fs::create_dir(root.join("drafts"))?;
    std::fs::write(root.join("q3.txt"), "Revenue rose 4% in the third quarter.")?;

    let files = connect(&root)?.connect().await?;
    for tool in ["list_directory", "read_text_file", "write_file"] {
        let tool = files
            .tool(tool)
            .ok_or(format!("the server has no {tool}"))?;
        let capabilities = tool.annotations().capabilities();
        transcript.line(format!("server tool {}: {capabilities}", tool.name()));
    }

    // Paths relative to the folder, the server's working directory.
    let model = ScriptedLlm::new()
        .call("list_directory", json!({ "path": "." }))
        .call("read_text_file", json!({ "path": "q3.txt" }))
        .call(
            "write_file",
            json!({ "path": "q3.txt", "content": "Revenue fell." }),
        )
        .call(
            "write_file",
            json!({ "path": "drafts/summary.txt", "content": "Up 4% in Q3." }),
        )
        .call(
            "write_file",
            json!({ "path": "drafts/draft2.txt", "content": "Maybe." }),
        )
        .answer("The summary is in drafts/summary.txt.");
    let analyst = Agent::builder("Analyst")
        .goal("Summarize the quarter")
        .llm(transcript.model("Analyst", Arc::new(model)))
        .tools(files.tools())
        .build();
    let crew = Crew::builder()
        .agent(analyst.clone())
        .task(
            Task::builder("Summarize q3.txt into drafts/")
                .agent(&analyst)
                .build(),
        )
        .global_registry(Arc::new(HookRegistry::new()))
        .human_input(input)
        .hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("write-guard").tools(["write_file"]),
            keep_writes_in(root.clone(), "drafts"),
        )
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_capabilities([Capability::Destructive]).pre_hook(),
        )
        .build()?;
    transcript.attach(&crew);
    crew.kickoff(()).await?;

    let mut held: Vec<String> = walk(&root)?
        .into_iter()
        .map(|(name, text)| format!("folder holds {name}: {text:?}"))
        .collect();
    held.sort();
    for line in held {
        transcript.line(line);
    }
    Ok(transcript.lines())
}

/// Every file under `root`, with its text, by path relative to `root`.
fn walk(root: &Path) -> std::io::Result<Vec<(String, String)>> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let name = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                found.push((name, std::fs::read_to_string(&path)?));
            }
        }
    }
    Ok(found)
}

/// A temporary folder, removed when dropped.
struct Folder(PathBuf);

impl Folder {
    fn new() -> std::io::Result<Folder> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "mcp-filesystem-example-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path)?;
        // The servers see the folder by its real path.
        Ok(Folder(path.canonicalize()?))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Run as the workspace's MCP server, on the folder given.
    if args.first().map(String::as_str) == Some("--serve") {
        let root = args
            .get(1)
            .map_or_else(|| PathBuf::from("."), PathBuf::from);
        return match mcp_demo_server::serve_stdio(mcp_demo_server::DemoServer::new(root)).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("mcp server: {error}");
                ExitCode::FAILURE
            }
        };
    }
    let server = if args.iter().any(|a| a == "--npm") {
        Server::Npm
    } else {
        Server::Workspace
    };
    let input: Arc<dyn HumanInputSource> = if args.iter().any(|a| a == "--interactive") {
        println!("You will be asked to approve each destructive call: type y or yes to approve.");
        Arc::new(TerminalInput::new())
    } else {
        Arc::new(ScriptedInput::new(["yes", "no"]))
    };
    println!("MCP server: {server:?}");
    let connect = |root: &Path| Ok(McpServer::stdio("filesystem", command(server, root)?));
    match run(connect, input, Transcript::new()).await {
        Ok(lines) => {
            // Lines hold text the model and the tools chose: the console
            // escapes control characters.
            for line in lines {
                crew_runtime::console::print_line(&line);
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!(
                "error: {}",
                crew_runtime::console::escape_control(&error.to_string())
            );
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example against the workspace's server. In a test the current
    /// executable is the test harness, which cannot serve: the server runs
    /// in this process instead, on a pipe, speaking the same protocol.
    fn lines() -> Vec<String> {
        let connect = |root: &Path| {
            let (client, server) = tokio::io::duplex(1 << 16);
            let (reads, writes) = tokio::io::split(server);
            let demo = mcp_demo_server::DemoServer::new(root);
            tokio::spawn(mcp_demo_server::serve_io(demo, reads, writes));
            let (reads, writes) = tokio::io::split(client);
            Ok(McpServer::io("filesystem", reads, writes))
        };
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        runtime
            .block_on(run(
                connect,
                Arc::new(ScriptedInput::new(["yes", "no"])),
                Transcript::new(),
            ))
            .expect("the example runs")
    }

    #[test]
    fn the_guard_keeps_writes_in_drafts_and_a_person_approves_the_destructive_ones() {
        let lines = lines();
        assert_lines_in_order(
            &lines,
            &[
                // What the server declares, as hooks read it.
                "server tool list_directory: read_only, idempotent",
                "server tool read_text_file: read_only, idempotent",
                "server tool write_file: destructive, idempotent",
                // Reading tools run without a question.
                "    PRE_TOOL_CALL  let the call through (1 hook ran)",
                "[Analyst] agent saw: [DIR] drafts",
                "[Analyst]   [FILE] q3.txt",
                "[Analyst] agent saw: Revenue rose 4% in the third quarter.",
                // The guard stops a write outside drafts/ before anyone is asked.
                "    PRE_TOOL_CALL  blocked the call: q3.txt is outside drafts/ [source: write-guard] (1 hook ran)",
                "[Analyst] agent saw: Tool execution blocked by hook. Tool: write_file",
                // Approved: the server writes.
                "    PRE_TOOL_CALL  let the call through (2 hooks ran)",
                "[Analyst] agent saw: Successfully wrote to drafts/summary.txt",
                // Refused: it does not.
                "    PRE_TOOL_CALL  blocked the call: refused by a person (answered \"no\") [source: approval-gate] (2 hooks ran)",
                "[Analyst] agent saw: Tool execution blocked by hook. Tool: write_file",
                // The folder afterwards, read from the disk.
                "folder holds drafts/summary.txt: \"Up 4% in Q3.\"",
                "folder holds q3.txt: \"Revenue rose 4% in the third quarter.\"",
            ],
        );
        assert!(
            !lines.iter().any(|l| l.contains("draft2.txt:")),
            "{lines:#?}"
        );
    }

    /// Panics unless the `expected` lines appear among `lines` in this
    /// order (others may stand between them), showing them all.
    #[track_caller]
    fn assert_lines_in_order(lines: &[String], expected: &[&str]) {
        let mut rest = lines.iter();
        for wanted in expected {
            assert!(
                rest.any(|line| line == wanted),
                "missing (in order) {wanted:?} in {lines:#?}"
            );
        }
    }
}
