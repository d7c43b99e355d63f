//! `async fn` hooks: at every kind of attribute, and as `#[crew_base]`
//! hook methods; each runs in its place in the chain.

use hooks_core::__private::CrewScope;
use hooks_core::{
    HookAborted, HookRegistry, LlmCallHookContext, StepContext, ToolCallHookContext,
};
use hooks_macros::{after_llm_call, after_tool_call, before_tool_call, crew, crew_base, on};

#[on(PRE_TOOL_CALL, tools = ["ui_async_probe"])]
async fn approve(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    std::future::ready(()).await;
    if ctx.tool_input.is_empty() {
        return Err("empty input".into());
    }
    Ok(())
}

#[on(POST_STEP, agents = ["UiAsyncProbe"])]
async fn review(ctx: &mut StepContext) -> Option<String> {
    Some(format!("{} (reviewed)", ctx.payload))
}

#[before_tool_call(tools = ["ui_async_probe"])]
async fn legacy_gate(_ctx: &mut ToolCallHookContext) -> bool {
    true
}

#[after_tool_call(tools = ["ui_async_probe"])]
async fn legacy_after(_ctx: &mut ToolCallHookContext) -> Option<String> {
    None
}

#[after_llm_call(agents = ["UiAsyncProbe"])]
async fn model_after(_ctx: &mut LlmCallHookContext) {}

struct Crew {
    hooks: HookRegistry,
}

impl CrewScope for Crew {
    fn crew_hooks(&self) -> &HookRegistry {
        &self.hooks
    }
}

#[derive(Clone)]
struct AsyncCrew {
    blocked: String,
}

#[crew_base]
impl AsyncCrew {
    #[on(PRE_TOOL_CALL)]
    async fn gate(&self, ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
        std::future::ready(()).await;
        if ctx.tool_name() == self.blocked {
            return Err(HookAborted::with_reason("blocked by the crew"));
        }
        Ok(())
    }

    #[crew]
    fn crew(&self) -> Crew {
        Crew { hooks: HookRegistry::new() }
    }
}

fn main() {
    let crew = AsyncCrew { blocked: "ui_async_probe".into() }.crew();
    assert_eq!(crew.hooks.get_hooks(hooks_core::PRE_TOOL_CALL).len(), 1);
}
