//! `unchecked_filters` on an attribute: a link-time hook whose filter names
//! a tool of a crew the program builds later is left out of the crews'
//! filter check, while a checked hook with the same filter is reported.

use std::sync::Arc;

use crew_runtime::get_hooks;
use crew_runtime::prelude::*;

#[on(PRE_TOOL_CALL, tools = ["deploy_to_production"], unchecked_filters)]
fn deploy_gate(_ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    Err("deploys need a change ticket".into())
}

#[on(PRE_TOOL_CALL, tools = ["web_serch"])]
fn checked_typo(_ctx: &mut ToolCallHookContext) {}

#[test]
fn an_unchecked_attribute_hook_is_left_out_of_the_filter_check() {
    let hooks = get_hooks(PRE_TOOL_CALL);
    let gate = hooks
        .iter()
        .find(|hook| hook.name == "deploy_gate")
        .expect("listed");
    assert!(gate.unchecked_filters);
    let typo = hooks
        .iter()
        .find(|hook| hook.name == "checked_typo")
        .expect("listed");
    assert!(!typo.unchecked_filters);

    let search = Tool::dynamic("web_search", "Searches", json!({"type": "object"}), |_| {
        Ok::<_, String>(json!("results"))
    });
    let llm = Arc::new(ScriptedLlm::new().answer("done"));
    let researcher = Agent::builder("Researcher").tool(search).llm(llm).build();
    let crew = Crew::builder()
        .agent(researcher.clone())
        .task(Task::builder("Research").agent(&researcher).build())
        .build()
        .expect("builds");
    let flagged: Vec<String> = crew
        .check_hook_filters()
        .into_iter()
        .map(|warning| warning.name)
        .collect();
    assert_eq!(flagged, ["web_serch"], "only the checked typo is reported");
}
