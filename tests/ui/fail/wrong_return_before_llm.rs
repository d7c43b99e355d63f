//! A legacy `before_llm_call` hook returns `Option<bool>`, `bool` or `()`.

use hooks_core::LlmCallHookContext;
use hooks_macros::before_llm_call;

#[before_llm_call]
fn hook(_ctx: &mut LlmCallHookContext) -> Option<String> {
    None
}

fn main() {}
