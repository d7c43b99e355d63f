//! The guide's management functions, acting on the global registry.
//!
//! Each is a thin call of the [`HookRegistry`](crate::HookRegistry) method
//! of the same name on [`global_registry`]; registries created with
//! `HookRegistry::new` have the same methods.

use crate::explain::Explanation;
use crate::hook::{AsyncHookFn, HookHandle, HookId, HookInfo, HookOptions};
use crate::point::{InterceptionPoint, Point};
use crate::registry::{RegisterError, global_registry};
use crate::returns::HookReturn;

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
///
/// ```
/// use hooks_core::{global_registry, register_async_hook, unregister_hook, ToolCallHookContext, PRE_TOOL_CALL};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// async fn stamp(ctx: &mut ToolCallHookContext) {
///     // Await an approval, a permit, a lookup... then edit the arguments.
///     ctx.tool_input.insert("checked".into(), true.into());
/// }
/// register_async_hook(PRE_TOOL_CALL, stamp)?;
///
/// // Every crew runs the global hooks; a synchronous dispatch waits for it.
/// let mut ctx = ToolCallHookContext::new("search", Default::default());
/// global_registry().dispatch(PRE_TOOL_CALL, &mut ctx);
/// assert_eq!(ctx.tool_input["checked"], true);
///
/// assert!(unregister_hook(PRE_TOOL_CALL, stamp));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub fn register_async_hook<P, F, R>(point: P, hook: F) -> Result<HookId, RegisterError>
where
    P: Point,
    F: for<'c> AsyncHookFn<'c, P::Context, R>,
    R: HookReturn<P> + 'static,
{
    global_registry().register_async_hook(point, hook)
}

/// Registers an `async` hook with options on the global registry.
///
/// ```
/// use hooks_core::{get_hooks, register_async_hook_with, unregister_hook, FailureMode, HookAborted, HookOptions, ToolCallHookContext, PRE_TOOL_CALL};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// async fn ask_the_bank(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
///     match ctx.tool_input.get("amount").and_then(|a| a.as_u64()) {
///         Some(amount) if amount > 1_000 => Err("the bank refused".into()),
///         _ => Ok(()),
///     }
/// }
/// let id = register_async_hook_with(
///     PRE_TOOL_CALL,
///     HookOptions::new().name("bank-check").tools(["transfer"]).fail_closed(),
///     ask_the_bank,
/// )?;
/// let hook = &get_hooks(PRE_TOOL_CALL)[0];
/// assert_eq!((hook.name.as_str(), hook.failure), ("bank-check", FailureMode::FailClosed));
/// assert_eq!(hook.tools, ["transfer"]);
///
/// assert!(unregister_hook(PRE_TOOL_CALL, id));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
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
///
/// ```
/// use hooks_core::{get_hooks, register_hook_with, unregister_hook, HookOptions, RegisterError, ToolCallHookContext, POST_STEP, PRE_TOOL_CALL};
/// use hooks_core::StepContext;
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// // Runs for the `shell` tool only, whatever the spelling the model uses.
/// let id = register_hook_with(
///     PRE_TOOL_CALL,
///     HookOptions::new().name("shell-audit").tools(["Shell"]),
///     |ctx: &mut ToolCallHookContext| eprintln!("shell: {:?}", ctx.tool_input),
/// )?;
/// assert_eq!(get_hooks(PRE_TOOL_CALL)[0].tools, ["shell"]);
///
/// // A filter that cannot apply at a point is refused.
/// let refused = register_hook_with(POST_STEP, HookOptions::new().tools(["shell"]), |_: &mut StepContext| {});
/// assert!(matches!(refused, Err(RegisterError::FilterDoesNotApply { filter: "tools", .. })));
///
/// assert!(unregister_hook(PRE_TOOL_CALL, id));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
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
///
/// ```
/// use hooks_core::{get_hooks, register_hook, unregister_hook, ToolCallHookContext, PRE_TOOL_CALL};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// fn log_call(ctx: &mut ToolCallHookContext) {
///     eprintln!("calling {}", ctx.tool_name());
/// }
/// let id = register_hook(PRE_TOOL_CALL, log_call)?;
/// register_hook(PRE_TOOL_CALL, log_call)?;
///
/// // By id: that registration only.
/// assert!(unregister_hook(PRE_TOOL_CALL, id));
/// assert_eq!(get_hooks(PRE_TOOL_CALL).len(), 1);
/// // By function: every registration of it at the point.
/// assert!(unregister_hook(PRE_TOOL_CALL, log_call));
/// assert!(!unregister_hook(PRE_TOOL_CALL, log_call));
/// assert!(get_hooks(PRE_TOOL_CALL).is_empty());
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub fn unregister_hook<M>(point: impl Into<InterceptionPoint>, handle: impl HookHandle<M>) -> bool {
    global_registry().unregister_hook(point, handle)
}

/// Lists the global hooks at `point`, in order.
///
/// ```
/// use hooks_core::{get_hooks, register_hook_with, unregister_hook, HookOptions, HookOrigin, ToolCallHookContext, PRE_TOOL_CALL};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// let first = register_hook_with(PRE_TOOL_CALL, HookOptions::new().name("first"), |_: &mut ToolCallHookContext| {})?;
/// let second = register_hook_with(PRE_TOOL_CALL, HookOptions::new().name("second"), |_: &mut ToolCallHookContext| {})?;
///
/// // In the order they run.
/// let hooks = get_hooks(PRE_TOOL_CALL);
/// let names: Vec<_> = hooks.iter().map(|h| h.name.as_str()).collect();
/// assert_eq!(names, ["first", "second"]);
/// assert_eq!(hooks[0].origin, HookOrigin::Runtime);
///
/// unregister_hook(PRE_TOOL_CALL, first);
/// unregister_hook(PRE_TOOL_CALL, second);
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub fn get_hooks(point: impl Into<InterceptionPoint>) -> Vec<HookInfo> {
    global_registry().get_hooks(point)
}

/// Removes every global hook at `point`; returns how many.
///
/// ```
/// use hooks_core::{clear_hooks, get_hooks, register_hook, StepContext, ToolCallHookContext, POST_STEP, PRE_TOOL_CALL};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})?;
/// register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})?;
/// register_hook(POST_STEP, |_: &mut StepContext| {})?;
///
/// assert_eq!(clear_hooks(PRE_TOOL_CALL), 2);
/// assert!(get_hooks(PRE_TOOL_CALL).is_empty());
/// // Other points keep their hooks.
/// assert_eq!(get_hooks(POST_STEP).len(), 1);
///
/// clear_hooks(POST_STEP);
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub fn clear_hooks(point: impl Into<InterceptionPoint>) -> usize {
    global_registry().clear_hooks(point)
}

/// Removes every global hook at all ten points; returns how many.
///
/// ```
/// use hooks_core::{clear_all_hooks, get_hooks, register_hook, InterceptionPoint, OutputContext, StepContext, OUTPUT, PRE_STEP};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// register_hook(PRE_STEP, |_: &mut StepContext| {})?;
/// register_hook(OUTPUT, |_: &mut OutputContext| {})?;
///
/// // Start over: no global hook at any point.
/// assert_eq!(clear_all_hooks(), 2);
/// assert!(InterceptionPoint::ALL.iter().all(|point| get_hooks(*point).is_empty()));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub fn clear_all_hooks() -> usize {
    global_registry().clear_all_hooks()
}

/// Puts back the link-time hooks removed from the global registry.
///
/// ```
/// use hooks_core::{clear_all_hooks, get_hooks, register_hook, restore_static_hooks, HookRegistry, ToolCallHookContext, PRE_TOOL_CALL};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// // Clearing removes the `#[on]` hooks of the program too...
/// clear_all_hooks();
/// register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})?;
///
/// // ...this puts them back, and leaves hooks registered at run time alone.
/// let restored = restore_static_hooks();
/// assert_eq!(restored > 0, HookRegistry::program_has_static_hooks());
/// assert_eq!(get_hooks(PRE_TOOL_CALL).len(), restored + 1);
///
/// clear_all_hooks();
/// restore_static_hooks();
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub fn restore_static_hooks() -> usize {
    global_registry().restore_static_hooks()
}

/// Explains which global hooks a tool call would meet.
///
/// ```
/// use hooks_core::{explain, register_hook_with, unregister_hook, HookOptions, ToolCallHookContext, Verdict, PRE_TOOL_CALL};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// let id = register_hook_with(
///     PRE_TOOL_CALL,
///     HookOptions::new().name("no-deletes").tools(["delete_file"]),
///     |_: &mut ToolCallHookContext| {},
/// )?;
///
/// // Why did (or didn't) a hook run for this tool?
/// let explanation = explain("Delete File", Some("Cleaner"));
/// assert_eq!(explanation.tool_name.as_deref(), Some("delete_file"));
/// assert_eq!(explanation.running(PRE_TOOL_CALL), ["no-deletes"]);
/// assert_eq!(explain("read_file", None).hooks[0].verdict, Verdict::SkippedByTools);
/// println!("{explanation}");
///
/// unregister_hook(PRE_TOOL_CALL, id);
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub fn explain(tool: &str, role: Option<&str>) -> Explanation {
    global_registry().explain(tool, role)
}

/// Explains which global hooks would run at `point`.
///
/// ```
/// use hooks_core::{explain_point, register_hook_with, unregister_hook, HookOptions, StepContext, Verdict, PRE_STEP};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// let id = register_hook_with(
///     PRE_STEP,
///     HookOptions::new().name("writer-context").agents(["Writer"]),
///     |_: &mut StepContext| {},
/// )?;
///
/// let for_writer = explain_point(PRE_STEP, None, Some("Writer"));
/// assert_eq!(for_writer.running(PRE_STEP), ["writer-context"]);
/// let for_researcher = explain_point(PRE_STEP, None, Some("Researcher"));
/// assert_eq!(for_researcher.hooks[0].verdict, Verdict::SkippedByAgents);
///
/// unregister_hook(PRE_STEP, id);
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub fn explain_point(
    point: impl Into<InterceptionPoint>,
    tool: Option<&str>,
    role: Option<&str>,
) -> Explanation {
    global_registry().explain_point(point, tool, role)
}
