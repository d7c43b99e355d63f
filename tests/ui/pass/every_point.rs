//! Every point accepts its context and each of its return types, for the
//! attributes; the legacy model-call attributes share the model chains.

use hooks_core::{
    ExecutionEndContext, ExecutionStartContext, HookAborted, InputContext, Inputs,
    InterceptionPoint, LlmCallHookContext, OutputContext, StepContext, get_hooks,
};
use hooks_macros::{after_llm_call, before_llm_call, on};

#[on(EXECUTION_START)]
fn start(_ctx: &mut ExecutionStartContext) -> Result<(), HookAborted> {
    Ok(())
}

#[on(INPUT)]
fn input(_ctx: &mut InputContext) -> Option<Inputs> {
    None
}

#[on(PRE_STEP, agents = ["Researcher"])]
fn pre_step(_ctx: &mut StepContext) -> Result<Option<String>, HookAborted> {
    Ok(None)
}

#[on(PRE_MODEL_CALL, agents = ["Researcher"], fail_closed)]
fn pre_model(_ctx: &LlmCallHookContext) {}

#[on(POST_MODEL_CALL)]
fn post_model(_ctx: &mut LlmCallHookContext) -> Option<String> {
    None
}

#[on(POST_STEP, order = -1)]
fn post_step(_ctx: &mut StepContext) -> Option<String> {
    None
}

#[on(OUTPUT)]
fn output(_ctx: &mut OutputContext) -> Result<Option<String>, HookAborted> {
    Ok(None)
}

#[on(EXECUTION_END)]
fn end(_ctx: &ExecutionEndContext) {}

#[before_llm_call(agents = ["Researcher"])]
fn legacy_before(_ctx: &mut LlmCallHookContext) -> Option<bool> {
    None
}

#[after_llm_call]
fn legacy_after(_ctx: &mut LlmCallHookContext) -> Option<String> {
    None
}

fn main() {
    let names = |point: InterceptionPoint| -> Vec<String> {
        get_hooks(point).into_iter().map(|hook| hook.name).collect()
    };
    assert_eq!(names(InterceptionPoint::EXECUTION_START), ["start"]);
    assert_eq!(names(InterceptionPoint::INPUT), ["input"]);
    assert_eq!(names(InterceptionPoint::PRE_STEP), ["pre_step"]);
    assert_eq!(names(InterceptionPoint::PRE_MODEL_CALL), ["pre_model", "legacy_before"]);
    assert_eq!(names(InterceptionPoint::POST_MODEL_CALL), ["post_model", "legacy_after"]);
    assert_eq!(names(InterceptionPoint::POST_STEP), ["post_step"]);
    assert_eq!(names(InterceptionPoint::OUTPUT), ["output"]);
    assert_eq!(names(InterceptionPoint::EXECUTION_END), ["end"]);
}
