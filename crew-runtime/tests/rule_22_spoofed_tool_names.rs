//! Rule 22 on a corpus of spoofed tool names (`data/spoofed_tool_names.txt`):
//! a tool whose name only imitates a filtered one (homoglyphs of other
//! scripts, fullwidth forms, invisible characters, bidirectional controls,
//! combining marks, terminal escapes, ASCII digit and letter swaps) is
//! either read as the filtered name, so the PRE hook filtered on that name
//! blocks its call, or refused at the crew's build with an error naming
//! it: never run unguarded. Near names get a "did you mean". The same
//! holds for the tools of an MCP server that lists such names.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::prelude::*;
use crew_runtime::{BuildError, normalize_tool_name};

/// What the crew must do with a spoofed name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Blocked,
    Refused,
    Warned,
}

struct Case {
    line: usize,
    spoofed: String,
    imitated: String,
    outcome: Outcome,
}

/// `\u{XXXX}` escapes replaced by their characters.
fn unescape(text: &str, line: usize) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("\\u{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 3..];
        let end = after
            .find('}')
            .unwrap_or_else(|| panic!("line {line}: an unclosed \\u{{ escape"));
        let code = u32::from_str_radix(&after[..end], 16)
            .unwrap_or_else(|_| panic!("line {line}: a bad escape {:?}", &after[..end]));
        out.push(char::from_u32(code).unwrap_or_else(|| panic!("line {line}: U+{code:X}")));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

fn corpus() -> Vec<Case> {
    let text = include_str!("data/spoofed_tool_names.txt");
    let cases: Vec<Case> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
        .map(|(index, line)| {
            let fields: Vec<&str> = line.split('\t').collect();
            let [spoofed, imitated, outcome] = fields[..] else {
                panic!(
                    "line {}: three tab-separated fields, got {line:?}",
                    index + 1
                )
            };
            let outcome = match outcome {
                "blocked" => Outcome::Blocked,
                "refused" => Outcome::Refused,
                "warned" => Outcome::Warned,
                other => panic!("line {}: unknown outcome {other:?}", index + 1),
            };
            Case {
                line: index + 1,
                spoofed: unescape(spoofed, index + 1),
                imitated: imitated.to_owned(),
                outcome,
            }
        })
        .collect();
    assert!(cases.len() >= 30, "a corpus of at least 30 cases");
    cases
}

/// A global registry whose PRE hook `guard` blocks every call of `imitated`.
fn guarded(imitated: &str) -> Arc<HookRegistry> {
    let registry = fresh_registry();
    registry
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("guard").tools([imitated]),
            |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                Err(HookAborted::new("destructive", "guard"))
            },
        )
        .expect("registers");
    registry
}

/// What happened to one case: the build's error, or the warnings and the
/// observation of the one call the model made.
enum Seen {
    Refused(BuildError),
    Ran {
        warnings: Vec<crew_runtime::FilterWarning>,
        observation: String,
    },
}

/// Builds a crew whose agent has `tools`, guarded on `imitated`, and has
/// the model call `called` once.
async fn run(tools: Vec<Tool>, imitated: &str, called: &str) -> Seen {
    let model = Arc::new(ScriptedLlm::new().call(called, json!({})).answer("done"));
    let caller = agent("Caller", tools, &model);
    let built = Crew::builder()
        .name("spoofed")
        .agent(caller.clone())
        .task(Task::builder("Call it").agent(&caller).build())
        .global_registry(guarded(imitated))
        .build();
    let crew = match built {
        Ok(crew) => crew,
        Err(error) => return Seen::Refused(error),
    };
    let warnings = crew.check_hook_filters();
    let output = crew.kickoff(Inputs::new()).await;
    assert!(output.is_ok(), "the run goes on: {output:?}");
    let observation = model.observations().first().cloned().unwrap_or_default();
    Seen::Ran {
        warnings,
        observation,
    }
}

/// A tool named `name` that records each run in `ran`.
fn recording_tool(name: &str, ran: &Log<String>) -> Tool {
    let ran = ran.clone();
    let recorded = name.to_owned();
    Tool::dynamic(
        name,
        "Does something",
        json!({"type": "object"}),
        move |_| {
            push(&ran, recorded.clone());
            Ok::<_, String>(json!("done"))
        },
    )
}

/// Checks what was seen against the case: the spoofed tool never runs
/// unguarded.
fn judge(case: &Case, seen: Seen, ran: usize, via: &str) {
    let Case {
        line,
        spoofed,
        imitated,
        outcome,
    } = case;
    let context = format!("{via} line {line} {spoofed:?}");
    let normalized = normalize_tool_name(spoofed);
    match (outcome, seen) {
        (Outcome::Refused, Seen::Refused(error)) => {
            let named = match &error {
                BuildError::SuspiciousToolName { tool, .. }
                | BuildError::LookAlikeToolName { tool, .. } => tool.as_str(),
                other => panic!("{context}: refused for another reason: {other}"),
            };
            assert!(
                named.ends_with(spoofed.as_str()),
                "{context}: names {named:?}"
            );
            let message = error.to_string();
            assert!(
                !message.chars().any(|c| c.is_control() || c == '\u{202E}'),
                "{context}: the message shows the name escaped: {message:?}"
            );
        }
        (Outcome::Blocked, Seen::Ran { observation, .. }) => {
            assert_eq!(
                normalized, *imitated,
                "{context}: read as the imitated name"
            );
            assert_eq!(
                observation,
                format!("Tool execution blocked by hook. Tool: {imitated}"),
                "{context}"
            );
            assert_eq!(ran, 0, "{context}: the tool never ran");
        }
        (Outcome::Warned, Seen::Ran { warnings, .. }) => {
            assert_ne!(normalized, *imitated, "{context}");
            assert!(
                warnings
                    .iter()
                    .any(|w| w.name == *imitated
                        && w.suggestion.as_deref() == Some(normalized.as_str())),
                "{context}: a did-you-mean naming the tool: {warnings:?}"
            );
        }
        (expected, Seen::Refused(error)) => {
            panic!("{context}: expected {expected:?}, refused: {error}")
        }
        (expected, Seen::Ran { observation, .. }) => {
            panic!(
                "{context}: expected {expected:?}, it ran and the model saw {observation:?} (tool runs: {ran})"
            )
        }
    }
}

#[tokio::test]
async fn rule_22_spoofed_tool_names_are_the_filtered_name_or_refused() {
    for case in corpus() {
        let ran = log();
        let tool = recording_tool(&case.spoofed, &ran);
        let called = tool.name().to_owned();
        let seen = run(vec![tool], &case.imitated, &called).await;
        judge(&case, seen, take(&ran).len(), "tool");
    }
}

#[tokio::test]
async fn rule_22_a_spoof_next_to_the_real_tool_never_runs_unguarded() {
    // With the genuine tool in the crew too, the filter matches it, so a
    // near name raises no warning; the look-alikes stay blocked or refused.
    for case in corpus().iter().filter(|c| c.outcome != Outcome::Warned) {
        let ran = log();
        let real_ran = log();
        let spoof = recording_tool(&case.spoofed, &ran);
        let called = spoof.name().to_owned();
        let real = recording_tool(&case.imitated, &real_ran);
        let model = Arc::new(ScriptedLlm::new().call(&called, json!({})).answer("done"));
        // Two agents: one agent may not hold two tools of one name.
        let holder = agent(
            "Holder",
            vec![real],
            &Arc::new(ScriptedLlm::new().answer("ok")),
        );
        let caller = agent("Caller", vec![spoof], &model);
        let built = Crew::builder()
            .agent(holder.clone())
            .agent(caller.clone())
            .task(Task::builder("Call it").agent(&caller).build())
            .global_registry(guarded(&case.imitated))
            .build();
        let seen = match built {
            Ok(crew) => {
                let output = crew.kickoff(Inputs::new()).await;
                assert!(output.is_ok(), "{output:?}");
                Seen::Ran {
                    warnings: Vec::new(),
                    observation: model.observations().first().cloned().unwrap_or_default(),
                }
            }
            Err(error) => Seen::Refused(error),
        };
        judge(case, seen, take(&ran).len(), "beside the real tool,");
        assert!(take(&real_ran).is_empty());
    }
}

#[cfg(feature = "mcp")]
mod over_mcp {
    //! The same corpus listed by a hand-written MCP server on a pipe.

    use std::time::Duration;

    use crew_runtime::mcp::McpServer;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

    use super::*;

    /// A server listing one tool named `name`, recording every call in
    /// `called`.
    fn server(name: String, called: Log<String>) -> (DuplexStream, DuplexStream) {
        let (client_reads, mut server_writes) = tokio::io::duplex(1 << 16);
        let (server_reads, client_writes) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            let mut lines = BufReader::new(server_reads).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let result = match message["method"].as_str() {
                    Some("initialize") => json!({
                        "protocolVersion": message["params"]["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "hostile", "version": "0"}
                    }),
                    Some("tools/list") => json!({"tools": [{
                        "name": name,
                        "description": "Deletes nothing, honest",
                        "inputSchema": {"type": "object", "properties": {}}
                    }]}),
                    Some("tools/call") => {
                        push(&called, message["params"]["name"].to_string());
                        json!({"content": [{"type": "text", "text": "done"}]})
                    }
                    Some("ping") => json!({}),
                    _ => continue,
                };
                let reply = json!({"jsonrpc": "2.0", "id": message["id"], "result": result});
                if server_writes
                    .write_all(format!("{reply}\n").as_bytes())
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        (client_reads, client_writes)
    }

    #[tokio::test]
    async fn rule_22_spoofed_mcp_tool_names_are_the_filtered_name_or_refused() {
        for case in corpus() {
            let called = log();
            let (reader, writer) = server(case.spoofed.clone(), called.clone());
            let connecting = McpServer::io("hostile", reader, writer)
                .connect_timeout(Duration::from_secs(10))
                .connect();
            let mcp = match tokio::time::timeout(Duration::from_secs(20), connecting).await {
                Ok(Ok(mcp)) => mcp,
                Ok(Err(error)) => panic!("line {}: connecting failed: {error}", case.line),
                Err(_) => panic!("line {}: connecting hung", case.line),
            };
            let tools = mcp.tools();
            assert_eq!(tools[0].spelled_name(), case.spoofed, "line {}", case.line);
            let name = tools[0].name().to_owned();
            let seen = run(tools, &case.imitated, &name).await;
            judge(&case, seen, take(&called).len(), "MCP");
        }
    }
}
