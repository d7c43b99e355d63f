//! The index that finds a tool's filtered hooks: each tool meets exactly
//! the hooks filtered to it, whatever its name's length and however many
//! tools share the index (so that some share a slot).

use std::sync::{Arc, Mutex};

use hooks_core::runtime::ToolOutput;
use hooks_core::{HookOptions, HookRegistry, PRE_TOOL_CALL, ToolCallHookContext};

/// Tool names of every length from 1 to 40 bytes, some sharing long
/// prefixes and suffixes (the parts the index compares in place).
fn names() -> Vec<String> {
    let mut names = Vec::new();
    for len in 1..=40 {
        names.push("t".repeat(len));
        names.push(format!("{}_{len}", "search_web_".repeat(3)));
        names.push(format!("x{}", "y".repeat(len)));
    }
    names
}

#[test]
fn every_tool_meets_exactly_the_hooks_filtered_to_it() -> Result<(), Box<dyn std::error::Error>> {
    let registry = HookRegistry::new();
    let ran: Arc<Mutex<Vec<String>>> = Arc::default();
    for name in names() {
        let (ran, me) = (Arc::clone(&ran), name.clone());
        registry.register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().tools([&name]),
            move |_: &mut ToolCallHookContext| {
                if let Ok(mut ran) = ran.lock() {
                    ran.push(me.clone());
                }
            },
        )?;
    }
    for name in names() {
        ran.lock().map_err(|_| "poisoned")?.clear();
        let mut ctx = ToolCallHookContext::new(&name, Default::default());
        registry.run_tool_call(&mut ctx, |_| ToolOutput::text("ok"))?;
        assert_eq!(
            *ran.lock().map_err(|_| "poisoned")?,
            std::slice::from_ref(&name),
            "{name}"
        );
    }
    // A tool no filter names meets none of them, also one that differs
    // from a filtered name in its last byte only.
    for other in [
        "unknown",
        "tttttttttttttttttttttttttttttttttttttttz",
        "search_web_search_web_search_web__7x",
    ] {
        ran.lock().map_err(|_| "poisoned")?.clear();
        let mut ctx = ToolCallHookContext::new(other, Default::default());
        registry.run_tool_call(&mut ctx, |_| ToolOutput::text("ok"))?;
        assert!(ran.lock().map_err(|_| "poisoned")?.is_empty(), "{other}");
    }
    Ok(())
}
