//! `capabilities = [...]` applies only at the tool-call points: nothing
//! else has a tool.

use hooks_core::{LlmCallHookContext, StepContext};
use hooks_macros::{before_llm_call, on};

#[on(POST_STEP, capabilities = [destructive])]
fn step_hook(_ctx: &mut StepContext) {}

#[before_llm_call(capabilities = [open_world])]
fn model_hook(_ctx: &LlmCallHookContext) -> bool {
    true
}

fn main() {}
