//! The guide's management functions, acting on the global registry.
//!
//! Each is a thin call of the [`HookRegistry`](crate::HookRegistry) method
//! of the same name on [`global_registry`]; registries created with
//! `HookRegistry::new` have the same methods.

use crate::context::{LlmCallHookContext, ToolCallHookContext};
use crate::explain::Explanation;
use crate::hook::{AsyncHookFn, HookHandle, HookId, HookInfo, HookOptions};
use crate::outcome::{HookReturn, LegacyBeforeReturn};
use crate::point::points::{PostModelCall, PostToolCall, PreModelCall, PreToolCall};
use crate::point::{InterceptionPoint, Point};
use crate::registry::{RegisterError, global_registry};

/// Registers a hook at `point` on the global registry. See
/// [`HookRegistry::register_hook`](crate::HookRegistry::register_hook).
///
/// ```
/// use hooks_core::{register_hook, unregister_hook, StepContext, POST_STEP};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
/// let id = register_hook(POST_STEP, |ctx: &mut StepContext| Some(ctx.payload.trim().to_owned()))?;
/// assert!(unregister_hook(POST_STEP, id));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub fn register_hook<P, F, R>(point: P, hook: F) -> Result<HookId, RegisterError>
where
    P: Point,
    F: Fn(&mut P::Context) -> R + Send + Sync + 'static,
    R: HookReturn<P>,
{
    global_registry().register_hook(point, hook)
}

/// Registers an `async` hook on the global registry (see
/// [`HookRegistry::register_async_hook`](crate::HookRegistry::register_async_hook)).
pub fn register_async_hook<P, F, R>(point: P, hook: F) -> Result<HookId, RegisterError>
where
    P: Point,
    F: for<'c> AsyncHookFn<'c, P::Context, R>,
    R: HookReturn<P> + 'static,
{
    global_registry().register_async_hook(point, hook)
}

/// Registers an `async` hook with options on the global registry.
pub fn register_async_hook_with<P, F, R>(
    point: P,
    options: HookOptions,
    hook: F,
) -> Result<HookId, RegisterError>
where
    P: Point,
    F: for<'c> AsyncHookFn<'c, P::Context, R>,
    R: HookReturn<P> + 'static,
{
    global_registry().register_async_hook_with(point, options, hook)
}

/// Registers a hook with options on the global registry.
pub fn register_hook_with<P, F, R>(
    point: P,
    options: HookOptions,
    hook: F,
) -> Result<HookId, RegisterError>
where
    P: Point,
    F: Fn(&mut P::Context) -> R + Send + Sync + 'static,
    R: HookReturn<P>,
{
    global_registry().register_hook_with(point, options, hook)
}

/// Removes global hooks named by a [`HookId`] or the hook function itself.
pub fn unregister_hook<M>(point: impl Into<InterceptionPoint>, handle: impl HookHandle<M>) -> bool {
    global_registry().unregister_hook(point, handle)
}

/// Lists the global hooks at `point`, in order.
pub fn get_hooks(point: impl Into<InterceptionPoint>) -> Vec<HookInfo> {
    global_registry().get_hooks(point)
}

/// Removes every global hook at `point`; returns how many.
pub fn clear_hooks(point: impl Into<InterceptionPoint>) -> usize {
    global_registry().clear_hooks(point)
}

/// Removes every global hook at all ten points; returns how many.
pub fn clear_all_hooks() -> usize {
    global_registry().clear_all_hooks()
}

/// Puts back the link-time hooks removed from the global registry.
pub fn restore_static_hooks() -> usize {
    global_registry().restore_static_hooks()
}

/// Explains which global hooks a tool call would meet.
pub fn explain(tool: &str, role: Option<&str>) -> Explanation {
    global_registry().explain(tool, role)
}

/// Explains which global hooks would run at `point`.
pub fn explain_point(
    point: impl Into<InterceptionPoint>,
    tool: Option<&str>,
    role: Option<&str>,
) -> Explanation {
    global_registry().explain_point(point, tool, role)
}

/// Legacy: registers a global before hook.
pub fn register_before_tool_call_hook<F, R>(hook: F) -> HookId
where
    F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
    R: LegacyBeforeReturn<PreToolCall>,
{
    global_registry().register_before_tool_call_hook(hook)
}

/// Legacy: registers a global after hook.
pub fn register_after_tool_call_hook<F, R>(hook: F) -> HookId
where
    F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
    R: HookReturn<PostToolCall>,
{
    global_registry().register_after_tool_call_hook(hook)
}

/// Legacy: removes global before hooks named by id or function.
pub fn unregister_before_tool_call_hook<M>(handle: impl HookHandle<M>) -> bool {
    global_registry().unregister_before_tool_call_hook(handle)
}

/// Legacy: removes global after hooks named by id or function.
pub fn unregister_after_tool_call_hook<M>(handle: impl HookHandle<M>) -> bool {
    global_registry().unregister_after_tool_call_hook(handle)
}

/// Legacy: lists the global before hooks.
pub fn get_before_tool_call_hooks() -> Vec<HookInfo> {
    global_registry().get_before_tool_call_hooks()
}

/// Legacy: lists the global after hooks.
pub fn get_after_tool_call_hooks() -> Vec<HookInfo> {
    global_registry().get_after_tool_call_hooks()
}

/// Legacy: clears the global before hooks; returns how many.
pub fn clear_before_tool_call_hooks() -> usize {
    global_registry().clear_before_tool_call_hooks()
}

/// Legacy: clears the global after hooks; returns how many.
pub fn clear_after_tool_call_hooks() -> usize {
    global_registry().clear_after_tool_call_hooks()
}

/// Legacy: clears both global tool-call chains; returns `(before, after)`
/// counts.
pub fn clear_all_tool_call_hooks() -> (usize, usize) {
    global_registry().clear_all_tool_call_hooks()
}

/// Legacy: registers a global `before_llm_call` hook (`false` blocks the
/// model call).
///
/// ```
/// use hooks_core::{register_before_llm_call_hook, get_hooks, LlmCallHookContext, PRE_MODEL_CALL};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
/// let id = register_before_llm_call_hook(|ctx: &mut LlmCallHookContext| ctx.iterations <= 10);
/// // The same chain as #[on(PRE_MODEL_CALL)]:
/// assert!(get_hooks(PRE_MODEL_CALL).iter().any(|h| h.id == id));
/// ```
pub fn register_before_llm_call_hook<F, R>(hook: F) -> HookId
where
    F: Fn(&mut LlmCallHookContext) -> R + Send + Sync + 'static,
    R: LegacyBeforeReturn<PreModelCall>,
{
    global_registry().register_before_llm_call_hook(hook)
}

/// Legacy: registers a global `after_llm_call` hook (`Some(text)` replaces
/// the answer's text).
pub fn register_after_llm_call_hook<F, R>(hook: F) -> HookId
where
    F: Fn(&mut LlmCallHookContext) -> R + Send + Sync + 'static,
    R: HookReturn<PostModelCall>,
{
    global_registry().register_after_llm_call_hook(hook)
}

/// Legacy: removes global `before_llm_call` hooks named by id or function.
pub fn unregister_before_llm_call_hook<M>(handle: impl HookHandle<M>) -> bool {
    global_registry().unregister_before_llm_call_hook(handle)
}

/// Legacy: removes global `after_llm_call` hooks named by id or function.
pub fn unregister_after_llm_call_hook<M>(handle: impl HookHandle<M>) -> bool {
    global_registry().unregister_after_llm_call_hook(handle)
}

/// Legacy: lists the global `before_llm_call` hooks.
pub fn get_before_llm_call_hooks() -> Vec<HookInfo> {
    global_registry().get_before_llm_call_hooks()
}

/// Legacy: lists the global `after_llm_call` hooks.
pub fn get_after_llm_call_hooks() -> Vec<HookInfo> {
    global_registry().get_after_llm_call_hooks()
}

/// Legacy: clears the global `before_llm_call` hooks; returns how many.
pub fn clear_before_llm_call_hooks() -> usize {
    global_registry().clear_before_llm_call_hooks()
}

/// Legacy: clears the global `after_llm_call` hooks; returns how many.
pub fn clear_after_llm_call_hooks() -> usize {
    global_registry().clear_after_llm_call_hooks()
}

/// Legacy: clears both global model-call chains; returns `(before, after)`
/// counts.
pub fn clear_all_llm_call_hooks() -> (usize, usize) {
    global_registry().clear_all_llm_call_hooks()
}
