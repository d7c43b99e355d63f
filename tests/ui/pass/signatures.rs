//! Every accepted hook signature compiles, and each one is registered.

use hooks_core::{
    HookAborted, HookStyle, InterceptionPoint, POST_TOOL_CALL, PRE_TOOL_CALL, ToolCallHookContext,
    get_hooks,
};
use hooks_macros::{after_tool_call, before_tool_call, on};

// PRE, `#[on]`: `()` or `Result<(), HookAborted>`, `&mut` or `&`.
#[on(PRE_TOOL_CALL, tools = ["ui_probe_pass"])]
fn pre_unit(_ctx: &mut ToolCallHookContext) {}

#[on(PRE_TOOL_CALL, tools = ["ui_probe_pass"])]
fn pre_explicit_unit(_ctx: &ToolCallHookContext) -> () {}

#[on(PRE_TOOL_CALL, tools = ["ui_probe_pass"])]
fn pre_result(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    ctx.tool_input.remove("secret");
    Ok(())
}

#[on(InterceptionPoint::PRE_TOOL_CALL, tools = ["ui_probe_pass"])]
fn pre_by_full_point_path(_ctx: &hooks_core::ToolCallHookContext) -> Result<(), HookAborted> {
    Ok(())
}

#[on(hooks_core::PRE_TOOL_CALL, tools = ["ui_probe_pass"])]
fn pre_with_lifetime<'a>(_ctx: &'a mut ToolCallHookContext) {}

// Legacy before: `Option<bool>`, `bool` or `()`.
#[before_tool_call(tools = ["ui_probe_pass"])]
fn before_option(_ctx: &mut ToolCallHookContext) -> Option<bool> {
    None
}

#[before_tool_call(tools = ["ui_probe_pass"])]
fn before_bool(_ctx: &ToolCallHookContext) -> bool {
    true
}

#[before_tool_call(tools = ["ui_probe_pass"])]
fn before_unit(_ctx: &mut ToolCallHookContext) {}

// POST, both styles: `Option<String>`, `()` or
// `Result<Option<String>, HookAborted>`.
#[on(POST_TOOL_CALL, tools = ["ui_probe_pass"])]
fn post_option(ctx: &mut ToolCallHookContext) -> Option<String> {
    ctx.tool_result.clone()
}

#[on(InterceptionPoint::POST_TOOL_CALL, tools = ["ui_probe_pass"])]
fn post_unit(_ctx: &ToolCallHookContext) {}

#[on(POST_TOOL_CALL, tools = ["ui_probe_pass"])]
fn post_result(_ctx: &mut ToolCallHookContext) -> Result<Option<String>, HookAborted> {
    Err(HookAborted::with_reason("stop"))
}

#[after_tool_call(tools = ["ui_probe_pass"])]
fn after_option(_ctx: &ToolCallHookContext) -> Option<String> {
    None
}

#[after_tool_call(tools = ["ui_probe_pass"])]
fn after_unit(_ctx: &mut ToolCallHookContext) {}

#[after_tool_call(tools = ["ui_probe_pass"])]
fn after_result(_ctx: &ToolCallHookContext) -> Result<Option<String>, HookAborted> {
    Ok(None)
}

// A hook is still an ordinary function.
#[on(PRE_TOOL_CALL, tools = ["ui_probe_pass"])]
pub fn callable_directly(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    Err(HookAborted::new(format!("{} refused", ctx.tool_name()), "policy"))
}

fn names(point: impl Into<InterceptionPoint>, style: HookStyle) -> Vec<String> {
    let mut names: Vec<String> = get_hooks(point)
        .into_iter()
        .filter(|hook| hook.style == style)
        .map(|hook| hook.name)
        .collect();
    names.sort();
    names
}

fn main() {
    assert_eq!(
        names(PRE_TOOL_CALL, HookStyle::On),
        [
            "callable_directly",
            "pre_by_full_point_path",
            "pre_explicit_unit",
            "pre_result",
            "pre_unit",
            "pre_with_lifetime",
        ]
    );
    assert_eq!(
        names(PRE_TOOL_CALL, HookStyle::BeforeToolCall),
        ["before_bool", "before_option", "before_unit"]
    );
    assert_eq!(
        names(POST_TOOL_CALL, HookStyle::On),
        ["post_option", "post_result", "post_unit"]
    );
    assert_eq!(
        names(POST_TOOL_CALL, HookStyle::AfterToolCall),
        ["after_option", "after_result", "after_unit"]
    );

    let mut ctx = ToolCallHookContext::new("ui_probe_pass", Default::default());
    let refused = callable_directly(&mut ctx).unwrap_err();
    assert_eq!(refused.reason, "ui_probe_pass refused");
}
