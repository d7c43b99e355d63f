//! The guide's management functions, acting on the global registry.
//!
//! Each is a thin call of the [`HookRegistry`] method of the same name on
//! [`global_registry`]; registries created with `HookRegistry::new` have
//! the same methods.

use crate::context::ToolCallHookContext;
use crate::explain::Explanation;
use crate::hook::{HookHandle, HookId, HookInfo, HookOptions};
use crate::outcome::{HookReturn, LegacyBeforeReturn, PostHookReturn};
use crate::point::InterceptionPoint;
use crate::registry::{RegisterError, global_registry};

/// Registers a hook at `point` on the global registry. See
/// [`HookRegistry::register_hook`](crate::HookRegistry::register_hook).
pub fn register_hook<F, R>(point: InterceptionPoint, hook: F) -> Result<HookId, RegisterError>
where
    F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
    R: HookReturn,
{
    global_registry().register_hook(point, hook)
}

/// Registers a hook with options on the global registry.
pub fn register_hook_with<F, R>(
    point: InterceptionPoint,
    options: HookOptions,
    hook: F,
) -> Result<HookId, RegisterError>
where
    F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
    R: HookReturn,
{
    global_registry().register_hook_with(point, options, hook)
}

/// Removes global hooks named by a [`HookId`] or the hook function itself.
pub fn unregister_hook<M>(point: InterceptionPoint, handle: impl HookHandle<M>) -> bool {
    global_registry().unregister_hook(point, handle)
}

/// Lists the global hooks at `point`, in order.
pub fn get_hooks(point: InterceptionPoint) -> Vec<HookInfo> {
    global_registry().get_hooks(point)
}

/// Removes every global hook at `point`; returns how many.
pub fn clear_hooks(point: InterceptionPoint) -> usize {
    global_registry().clear_hooks(point)
}

/// Removes every global hook; returns how many.
pub fn clear_all_hooks() -> usize {
    global_registry().clear_all_hooks()
}

/// Puts back the link-time hooks removed from the global registry.
pub fn restore_static_hooks() -> usize {
    global_registry().restore_static_hooks()
}

/// Explains which global hooks a call would meet.
pub fn explain(tool: &str, role: Option<&str>) -> Explanation {
    global_registry().explain(tool, role)
}

/// Legacy: registers a global before hook.
pub fn register_before_tool_call_hook<F, R>(hook: F) -> HookId
where
    F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
    R: LegacyBeforeReturn + HookReturn,
{
    global_registry().register_before_tool_call_hook(hook)
}

/// Legacy: registers a global after hook.
pub fn register_after_tool_call_hook<F, R>(hook: F) -> HookId
where
    F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
    R: PostHookReturn + HookReturn,
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

/// Legacy: clears both global chains; returns `(before, after)` counts.
pub fn clear_all_tool_call_hooks() -> (usize, usize) {
    global_registry().clear_all_tool_call_hooks()
}
