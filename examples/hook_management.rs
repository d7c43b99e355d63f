//! Hook management: register, list, explain, unregister, clear and restore
//! hooks at run time, with the new API and the legacy one.
//!
//! `cargo run --example hook_management`
//!
//! Every management function acts on one chain per point, whatever
//! registered the hook: an attribute at link time, `register_hook`, or a
//! legacy `register_before_tool_call_hook`. So either API lists and removes
//! what the other registered, link-time hooks included, and
//! `restore_static_hooks` puts the link-time ones back.

use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;

use crew_runtime::prelude::*;
use crew_runtime::schemars::JsonSchema;
use crew_runtime::serde::Deserialize;
use crew_runtime::transcript::{describe_hook, note};
use crew_runtime::{
    HookInfo, OUTPUT, OutputContext, clear_all_hooks, clear_hooks, get_hooks,
    legacy::{
        clear_all_tool_call_hooks, clear_before_tool_call_hooks, get_after_tool_call_hooks,
        get_before_tool_call_hooks, register_after_tool_call_hook, register_before_tool_call_hook,
        unregister_after_tool_call_hook, unregister_before_tool_call_hook,
    },
    register_hook, register_hook_with,
    transcript::Transcript,
    unregister_hook,
};
use crew_runtime::{explain, restore_static_hooks};

/// Link time: in the chain before `main` starts.
#[on(PRE_TOOL_CALL)]
fn audit_calls(ctx: &ToolCallHookContext) {
    note(ctx, format!("audit_calls saw {}", ctx.tool_name()));
}

/// Link time, legacy style.
#[after_tool_call]
fn stamp_result(ctx: &ToolCallHookContext) -> Option<String> {
    ctx.tool_result
        .as_deref()
        .map(|result| format!("{result} [checked]"))
}

/// Registered at run time, then removed by naming the function itself.
fn block_shell(_ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    Err(HookAborted::new("shell access is disabled", "ops-policy"))
}

/// Registered with the legacy API, then removed by function with it too.
fn append_footer(ctx: &mut ToolCallHookContext) -> Option<String> {
    ctx.tool_result
        .as_deref()
        .map(|result| format!("{result} (via ops)"))
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "crew_runtime::serde")]
#[schemars(crate = "crew_runtime::schemars")]
struct ShellArgs {
    /// The command line.
    command: String,
}

/// Runs a one-call crew on the global registry as it is now.
fn kickoff(transcript: &Transcript) -> Result<(), Box<dyn Error>> {
    let run_shell = Tool::typed("run_shell", "Runs a shell command", |args: ShellArgs| {
        Ok::<_, String>(format!("ran `{}`", args.command))
    });
    let model = ScriptedLlm::new()
        .call("run_shell", json!({"command": "df -h"}))
        .answer("Disk usage checked.");
    let operator = Agent::builder("Operator")
        .tool(run_shell)
        .llm(transcript.model("Operator", Arc::new(model)))
        .build();
    let task = Task::builder("Check disk usage").agent(&operator).build();
    let crew = Crew::builder().agent(operator).task(task).build()?;
    transcript.attach(&crew);
    crew.kickoff_blocking(())?;
    Ok(())
}

/// Lists both chains, one hook a line.
fn list(transcript: &Transcript, call: &str, hooks: &[HookInfo]) {
    transcript.line(format!("{call} -> {} hook(s)", hooks.len()));
    for hook in hooks {
        transcript.line(format!("    {}", describe_hook(hook)));
    }
}

fn run() -> Result<Vec<String>, Box<dyn Error>> {
    let t = Transcript::new();

    t.line("== 1. link-time hooks (attributes; nothing was called at start-up)");
    list(&t, "get_hooks(PRE_TOOL_CALL)", &get_hooks(PRE_TOOL_CALL));
    list(&t, "get_hooks(POST_TOOL_CALL)", &get_hooks(POST_TOOL_CALL));

    t.line("== 2. register at run time");
    // A closure that captures nothing; named after its type in listings.
    let closure_id = register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
        note(ctx, format!("closure hook saw {}", ctx.tool_name()));
    })?;
    t.line(format!(
        "register_hook(PRE_TOOL_CALL, closure) -> {closure_id}"
    ));
    let options = HookOptions::new().name("no-shell").tools(["run_shell"]);
    let shell_id = register_hook_with(PRE_TOOL_CALL, options, block_shell)?;
    t.line(format!(
        "register_hook_with(PRE_TOOL_CALL, tools=[run_shell], block_shell) -> {shell_id}"
    ));
    let legacy_id = register_before_tool_call_hook(|ctx: &mut ToolCallHookContext| {
        note(ctx, "legacy before hook: no objection");
        None::<bool>
    });
    t.line(format!(
        "register_before_tool_call_hook(closure) -> {legacy_id}"
    ));
    let footer_id = register_after_tool_call_hook(append_footer);
    t.line(format!(
        "register_after_tool_call_hook(append_footer) -> {footer_id}"
    ));
    // A return type that does not fit the point does not compile
    // (`register_hook(PRE_TOOL_CALL, append_footer)` is refused by rustc);
    // a filter the point does not take is refused at registration.
    let misfit = register_hook_with(
        OUTPUT,
        HookOptions::new().tools(["web_search"]),
        |_: &mut OutputContext| {},
    );
    t.line(format!(
        "register_hook_with(OUTPUT, tools = [web_search]) -> {}",
        match misfit {
            Ok(id) => format!("{id}"),
            Err(error) => format!("refused: {error}"),
        }
    ));

    t.line("== 3. list and explain: both APIs see the same chains");
    list(&t, "get_hooks(PRE_TOOL_CALL)", &get_hooks(PRE_TOOL_CALL));
    list(
        &t,
        "get_before_tool_call_hooks()",
        &get_before_tool_call_hooks(),
    );
    list(
        &t,
        "get_after_tool_call_hooks()",
        &get_after_tool_call_hooks(),
    );
    t.line("explain(run_shell, Operator):");
    for line in explain("run_shell", Some("Operator"))
        .to_string()
        .lines()
        .skip(1)
    {
        t.line(format!("    {line}"));
    }

    t.line("== 4. a crew run with these hooks");
    kickoff(&t)?;

    t.line("== 5. unregister, by id or by function, with either API");
    let removed = unregister_hook(PRE_TOOL_CALL, closure_id);
    t.line(format!(
        "unregister_hook(PRE_TOOL_CALL, {closure_id}) -> {removed}"
    ));
    let removed = unregister_hook(PRE_TOOL_CALL, block_shell);
    t.line(format!(
        "unregister_hook(PRE_TOOL_CALL, block_shell) -> {removed}"
    ));
    let removed = unregister_before_tool_call_hook(legacy_id);
    t.line(format!(
        "unregister_before_tool_call_hook({legacy_id}) -> {removed}"
    ));
    let removed = unregister_after_tool_call_hook(append_footer);
    t.line(format!(
        "unregister_after_tool_call_hook(append_footer) -> {removed}"
    ));
    let removed = unregister_after_tool_call_hook(append_footer);
    t.line(format!(
        "unregister_after_tool_call_hook(append_footer) again -> {removed}"
    ));
    // Link-time hooks are removed like any other.
    let removed = unregister_hook(PRE_TOOL_CALL, audit_calls);
    t.line(format!(
        "unregister_hook(PRE_TOOL_CALL, audit_calls) -> {removed}"
    ));
    list(&t, "get_hooks(PRE_TOOL_CALL)", &get_hooks(PRE_TOOL_CALL));

    t.line("== 6. the same crew run now");
    kickoff(&t)?;

    t.line("== 7. clear");
    let cleared = clear_hooks(POST_TOOL_CALL);
    t.line(format!("clear_hooks(POST_TOOL_CALL) -> {cleared}"));
    register_before_tool_call_hook(|_: &mut ToolCallHookContext| true);
    register_after_tool_call_hook(|_: &mut ToolCallHookContext| None::<String>);
    t.line("registered one before and one after hook");
    let cleared = clear_before_tool_call_hooks();
    t.line(format!("clear_before_tool_call_hooks() -> {cleared}"));
    let (before, after) = clear_all_tool_call_hooks();
    t.line(format!(
        "clear_all_tool_call_hooks() -> ({before}, {after})"
    ));

    t.line("== 8. restore the link-time hooks");
    let restored = restore_static_hooks();
    t.line(format!("restore_static_hooks() -> {restored}"));
    list(&t, "get_hooks(PRE_TOOL_CALL)", &get_hooks(PRE_TOOL_CALL));
    list(&t, "get_hooks(POST_TOOL_CALL)", &get_hooks(POST_TOOL_CALL));
    // Between tests: clear everything, then start again from the program's
    // own hooks (the test fixture does both for you).
    let cleared = clear_all_hooks();
    t.line(format!("clear_all_hooks() -> {cleared}"));
    let restored = restore_static_hooks();
    t.line(format!("restore_static_hooks() -> {restored}"));
    Ok(t.lines())
}

fn main() -> ExitCode {
    match run() {
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
    use crew_runtime::testing::GlobalHooksFixture;

    #[test]
    fn every_step_acts_on_the_same_chains() {
        // The run changes the global registry; the fixture puts it back.
        let _fixture = GlobalHooksFixture::new();
        let lines = super::run().expect("the example runs");
        let in_order = [
            "get_hooks(PRE_TOOL_CALL) -> 1 hook(s)",
            "    audit_calls #[on] (link time)",
            "get_hooks(POST_TOOL_CALL) -> 1 hook(s)",
            "    stamp_result #[after_tool_call] (link time)",
            "== 3. list and explain: both APIs see the same chains",
            "get_hooks(PRE_TOOL_CALL) -> 4 hook(s)",
            "    no-shell #[on] tools=[\"run_shell\"] (run time)",
            "get_before_tool_call_hooks() -> 4 hook(s)",
            "get_after_tool_call_hooks() -> 2 hook(s)",
            "    append_footer #[after_tool_call] (run time)",
            "== 4. a crew run with these hooks",
            "    audit_calls saw run_shell",
            "    closure hook saw run_shell",
            "    PRE_TOOL_CALL  blocked the call: shell access is disabled [source: ops-policy] (3 hooks ran)",
            "[Operator] agent saw: Tool execution blocked by hook. Tool: run_shell [checked] (via ops)",
            "unregister_hook(PRE_TOOL_CALL, block_shell) -> true",
            "unregister_after_tool_call_hook(append_footer) -> true",
            "unregister_after_tool_call_hook(append_footer) again -> false",
            "unregister_hook(PRE_TOOL_CALL, audit_calls) -> true",
            "get_hooks(PRE_TOOL_CALL) -> 0 hook(s)",
            "== 6. the same crew run now",
            "    tool run_shell runs with {\"command\":\"df -h\"}",
            "[Operator] agent saw: ran `df -h` [checked]",
            "clear_hooks(POST_TOOL_CALL) -> 1",
            "clear_before_tool_call_hooks() -> 1",
            "clear_all_tool_call_hooks() -> (0, 1)",
            "restore_static_hooks() -> 2",
            "get_hooks(PRE_TOOL_CALL) -> 1 hook(s)",
            "    audit_calls #[on] (link time)",
            "clear_all_hooks() -> 2",
            "restore_static_hooks() -> 2",
        ];
        assert_lines_in_order(&lines, &in_order);
        let refused = lines.iter().any(|l| {
            l.starts_with("register_hook_with(OUTPUT, tools = [web_search]) -> refused: ")
        });
        assert!(refused, "{lines:#?}");
        let true_removals = lines
            .iter()
            .filter(|l| l.starts_with("unregister_") && l.ends_with("-> true"))
            .count();
        assert_eq!(true_removals, 5, "{lines:#?}");
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
