//! The CrewAI-named hook API, for code ported from CrewAI.
//!
//! CrewAI registers hooks with `register_before_tool_call_hook`, lists them
//! with `get_before_tool_call_hooks`, removes them with
//! `unregister_before_tool_call_hook` and `clear_before_tool_call_hooks`,
//! and has the same four for after hooks and for model calls, plus
//! `clear_all_tool_call_hooks` and `clear_all_llm_call_hooks`. This module
//! holds those names, so that a program ported from CrewAI keeps its calls;
//! new code uses `register_hook(point, …)` and `#[on(point)]`, which reach
//! all ten points and can abort with a reason.
//!
//! The API is written once: the [`HookRegistry`] methods here (`registry.
//! register_before_tool_call_hook(…)`) are the implementation, and each free
//! function is the method called on [`global_registry`]. Both act on the
//! same chains as `#[on(PRE_TOOL_CALL)]` and `register_hook`: a hook
//! registered with one API is listed and removed with the other. A legacy
//! before hook blocks by returning `false` (or `Some(false)`); an after hook
//! replaces the text by returning `Some(text)`.
//!
//! The free functions are also at the crate's root
//! (`hooks_core::register_before_tool_call_hook`), where they always were,
//! and at `crew_runtime::legacy`.
//!
//! ```
//! use hooks_core::legacy::{
//!     clear_all_tool_call_hooks, get_before_tool_call_hooks, register_after_tool_call_hook,
//!     register_before_tool_call_hook,
//! };
//! use hooks_core::{get_hooks, global_registry, ToolCallHookContext, PRE_TOOL_CALL};
//! use hooks_core::runtime::ToolOutput;
//! # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
//!
//! // As in CrewAI: `False` from a before hook blocks the call...
//! register_before_tool_call_hook(|ctx: &mut ToolCallHookContext| ctx.tool_name() != "delete_file");
//! // ...and a string from an after hook replaces the result.
//! register_after_tool_call_hook(|ctx: &mut ToolCallHookContext| {
//!     ctx.tool_result.as_deref().map(|r| r.replace("hunter2", "[REDACTED]"))
//! });
//!
//! let mut ctx = ToolCallHookContext::new("read_file", Default::default());
//! let report = global_registry().run_tool_call(&mut ctx, |_| ToolOutput::text("password: hunter2"))?;
//! assert_eq!(report.observation, "password: [REDACTED]");
//! let mut ctx = ToolCallHookContext::new("delete_file", Default::default());
//! let report = global_registry().run_tool_call(&mut ctx, |_| unreachable!("blocked"))?;
//! assert!(report.blocked.is_some());
//!
//! // One chain per point, whichever API registered the hook.
//! assert_eq!(get_before_tool_call_hooks(), get_hooks(PRE_TOOL_CALL));
//! assert_eq!(clear_all_tool_call_hooks(), (1, 1));
//! # Ok::<(), hooks_core::HookAborted>(())
//! ```

use crate::context::{LlmCallHookContext, ToolCallHookContext};
use crate::hook::{HookHandle, HookId, HookInfo, HookOptions, HookOrigin, HookStyle};
use crate::point::InterceptionPoint;
use crate::point::points::{PostModelCall, PostToolCall, PreModelCall, PreToolCall};
use crate::registry::{HookRegistry, global_registry, legacy_before_entry, unchecked_entry};
use crate::returns::{HookReturn, LegacyBeforeReturn};

/// The legacy methods of [`HookRegistry`] for one pair of points (tool
/// calls, model calls), each with its example; the free functions below
/// call them on the global registry.
macro_rules! legacy_api {
    (
        what: $what:literal,
        context: $ctx:ident,
        before: ($before:ident, $before_id:ident, $before_style:expr,
            $register_before:ident, $register_before_with:ident,
            $unregister_before:ident, $get_before:ident, $clear_before:ident),
        after: ($after:ident, $after_id:ident, $after_style:expr,
            $register_after:ident, $register_after_with:ident,
            $unregister_after:ident, $get_after:ident, $clear_after:ident),
        clear_all: $clear_all:ident,
    ) => {
        #[doc = concat!("Registers a before-", $what, "-call hook (`false` or `Some(false)` blocks the call), on the `", stringify!($before_id), "` chain.")]
        ///
        /// ```
        #[doc = concat!("use hooks_core::{HookRegistry, ", stringify!($ctx), ", ", stringify!($before_id), "};")]
        /// let registry = HookRegistry::new();
        #[doc = concat!("let id = registry.", stringify!($register_before), "(|_: &mut ", stringify!($ctx), "| false);")]
        #[doc = concat!("assert_eq!(registry.get_hooks(", stringify!($before_id), ")[0].id, id);")]
        /// ```
        pub fn $register_before<F, R>(&self, hook: F) -> HookId
        where
            F: Fn(&mut $ctx) -> R + Send + Sync + 'static,
            R: LegacyBeforeReturn<$before>,
        {
            self.$register_before_with(HookOptions::new(), hook)
        }

        #[doc = concat!("Registers a before-", $what, "-call hook with filters or options.")]
        ///
        /// ```
        #[doc = concat!("use hooks_core::{HookOptions, HookRegistry, ", stringify!($ctx), "};")]
        /// let registry = HookRegistry::new();
        #[doc = concat!("registry.", stringify!($register_before_with), "(HookOptions::new().name(\"guard\"), |_: &mut ", stringify!($ctx), "| true);")]
        #[doc = concat!("assert_eq!(registry.", stringify!($get_before), "()[0].name, \"guard\");")]
        /// ```
        pub fn $register_before_with<F, R>(&self, options: HookOptions, hook: F) -> HookId
        where
            F: Fn(&mut $ctx) -> R + Send + Sync + 'static,
            R: LegacyBeforeReturn<$before>,
        {
            self.insert(legacy_before_entry::<$before, F, R>(options, $before_style, hook))
        }

        #[doc = concat!("Registers an after-", $what, "-call hook (`Some(text)` replaces the text), on the `", stringify!($after_id), "` chain.")]
        ///
        /// ```
        #[doc = concat!("use hooks_core::{HookRegistry, ", stringify!($ctx), ", ", stringify!($after_id), "};")]
        /// let registry = HookRegistry::new();
        #[doc = concat!("let id = registry.", stringify!($register_after), "(|_: &mut ", stringify!($ctx), "| None::<String>);")]
        #[doc = concat!("assert_eq!(registry.get_hooks(", stringify!($after_id), ")[0].id, id);")]
        /// ```
        pub fn $register_after<F, R>(&self, hook: F) -> HookId
        where
            F: Fn(&mut $ctx) -> R + Send + Sync + 'static,
            R: HookReturn<$after>,
        {
            self.$register_after_with(HookOptions::new(), hook)
        }

        #[doc = concat!("Registers an after-", $what, "-call hook with filters or options.")]
        ///
        /// ```
        #[doc = concat!("use hooks_core::{HookOptions, HookRegistry, ", stringify!($ctx), "};")]
        /// let registry = HookRegistry::new();
        #[doc = concat!("registry.", stringify!($register_after_with), "(HookOptions::new().name(\"scrub\"), |_: &mut ", stringify!($ctx), "| {});")]
        #[doc = concat!("assert_eq!(registry.", stringify!($get_after), "()[0].name, \"scrub\");")]
        /// ```
        pub fn $register_after_with<F, R>(&self, options: HookOptions, hook: F) -> HookId
        where
            F: Fn(&mut $ctx) -> R + Send + Sync + 'static,
            R: HookReturn<$after>,
        {
            self.insert(unchecked_entry::<$after, F, R>(
                options,
                $after_style,
                HookOrigin::Runtime,
                hook,
            ))
        }

        #[doc = concat!("`unregister_hook(", stringify!($before_id), ", handle)`: removes the hooks named by an id or a function; says whether one was.")]
        ///
        /// ```
        #[doc = concat!("use hooks_core::{HookRegistry, ", stringify!($ctx), "};")]
        /// let registry = HookRegistry::new();
        #[doc = concat!("let id = registry.", stringify!($register_before), "(|_: &mut ", stringify!($ctx), "| true);")]
        #[doc = concat!("assert!(registry.", stringify!($unregister_before), "(id));")]
        #[doc = concat!("assert!(!registry.", stringify!($unregister_before), "(id));")]
        /// ```
        pub fn $unregister_before<M>(&self, handle: impl HookHandle<M>) -> bool {
            self.unregister_hook(InterceptionPoint::$before_id, handle)
        }

        #[doc = concat!("`unregister_hook(", stringify!($after_id), ", handle)`: removes the hooks named by an id or a function; says whether one was.")]
        ///
        /// ```
        #[doc = concat!("use hooks_core::{HookRegistry, ", stringify!($ctx), "};")]
        /// let registry = HookRegistry::new();
        #[doc = concat!("let id = registry.", stringify!($register_after), "(|_: &mut ", stringify!($ctx), "| {});")]
        #[doc = concat!("assert!(registry.", stringify!($unregister_after), "(id));")]
        #[doc = concat!("assert!(!registry.", stringify!($unregister_after), "(id));")]
        /// ```
        pub fn $unregister_after<M>(&self, handle: impl HookHandle<M>) -> bool {
            self.unregister_hook(InterceptionPoint::$after_id, handle)
        }

        #[doc = concat!("`get_hooks(", stringify!($before_id), ")`: the hooks of the chain, of every style, in order.")]
        ///
        /// ```
        #[doc = concat!("use hooks_core::{HookRegistry, ", stringify!($ctx), ", ", stringify!($before_id), "};")]
        /// let registry = HookRegistry::new();
        #[doc = concat!("registry.register_hook(", stringify!($before_id), ", |_: &mut ", stringify!($ctx), "| {})?;")]
        #[doc = concat!("assert_eq!(registry.", stringify!($get_before), "().len(), 1);")]
        /// # Ok::<(), hooks_core::RegisterError>(())
        /// ```
        pub fn $get_before(&self) -> Vec<HookInfo> {
            self.get_hooks(InterceptionPoint::$before_id)
        }

        #[doc = concat!("`get_hooks(", stringify!($after_id), ")`: the hooks of the chain, of every style, in order.")]
        ///
        /// ```
        #[doc = concat!("use hooks_core::{HookRegistry, ", stringify!($ctx), ", ", stringify!($after_id), "};")]
        /// let registry = HookRegistry::new();
        #[doc = concat!("registry.register_hook(", stringify!($after_id), ", |_: &mut ", stringify!($ctx), "| {})?;")]
        #[doc = concat!("assert_eq!(registry.", stringify!($get_after), "().len(), 1);")]
        /// # Ok::<(), hooks_core::RegisterError>(())
        /// ```
        pub fn $get_after(&self) -> Vec<HookInfo> {
            self.get_hooks(InterceptionPoint::$after_id)
        }

        #[doc = concat!("`clear_hooks(", stringify!($before_id), ")`: removes every hook of the chain; returns how many.")]
        ///
        /// ```
        #[doc = concat!("use hooks_core::{HookRegistry, ", stringify!($ctx), ", ", stringify!($before_id), "};")]
        /// let registry = HookRegistry::new();
        #[doc = concat!("registry.", stringify!($register_before), "(|_: &mut ", stringify!($ctx), "| true);")]
        #[doc = concat!("registry.register_hook(", stringify!($before_id), ", |_: &mut ", stringify!($ctx), "| {})?;")]
        #[doc = concat!("assert_eq!(registry.", stringify!($clear_before), "(), 2);")]
        /// # Ok::<(), hooks_core::RegisterError>(())
        /// ```
        pub fn $clear_before(&self) -> usize {
            self.clear_hooks(InterceptionPoint::$before_id)
        }

        #[doc = concat!("`clear_hooks(", stringify!($after_id), ")`: removes every hook of the chain; returns how many.")]
        ///
        /// ```
        #[doc = concat!("use hooks_core::{HookRegistry, ", stringify!($ctx), ", ", stringify!($after_id), "};")]
        /// let registry = HookRegistry::new();
        #[doc = concat!("registry.", stringify!($register_after), "(|_: &mut ", stringify!($ctx), "| {});")]
        #[doc = concat!("registry.register_hook(", stringify!($after_id), ", |_: &mut ", stringify!($ctx), "| {})?;")]
        #[doc = concat!("assert_eq!(registry.", stringify!($clear_after), "(), 2);")]
        /// # Ok::<(), hooks_core::RegisterError>(())
        /// ```
        pub fn $clear_after(&self) -> usize {
            self.clear_hooks(InterceptionPoint::$after_id)
        }

        #[doc = concat!("Clears both ", $what, "-call chains at once; returns `(before, after)` counts.")]
        ///
        /// ```
        #[doc = concat!("use hooks_core::{HookRegistry, ", stringify!($ctx), "};")]
        /// let registry = HookRegistry::new();
        #[doc = concat!("registry.", stringify!($register_before), "(|_: &mut ", stringify!($ctx), "| true);")]
        #[doc = concat!("registry.", stringify!($register_after), "(|_: &mut ", stringify!($ctx), "| {});")]
        #[doc = concat!("registry.", stringify!($register_after), "(|_: &mut ", stringify!($ctx), "| {});")]
        #[doc = concat!("assert_eq!(registry.", stringify!($clear_all), "(), (1, 2));")]
        /// ```
        pub fn $clear_all(&self) -> (usize, usize) {
            self.clear_pair(InterceptionPoint::$before_id, InterceptionPoint::$after_id)
        }
    };
}

/// The legacy names on any registry.
impl HookRegistry {
    legacy_api! {
        what: "tool",
        context: ToolCallHookContext,
        before: (PreToolCall, PRE_TOOL_CALL, HookStyle::BeforeToolCall,
            register_before_tool_call_hook, register_before_tool_call_hook_with,
            unregister_before_tool_call_hook, get_before_tool_call_hooks, clear_before_tool_call_hooks),
        after: (PostToolCall, POST_TOOL_CALL, HookStyle::AfterToolCall,
            register_after_tool_call_hook, register_after_tool_call_hook_with,
            unregister_after_tool_call_hook, get_after_tool_call_hooks, clear_after_tool_call_hooks),
        clear_all: clear_all_tool_call_hooks,
    }

    legacy_api! {
        what: "model",
        context: LlmCallHookContext,
        before: (PreModelCall, PRE_MODEL_CALL, HookStyle::BeforeLlmCall,
            register_before_llm_call_hook, register_before_llm_call_hook_with,
            unregister_before_llm_call_hook, get_before_llm_call_hooks, clear_before_llm_call_hooks),
        after: (PostModelCall, POST_MODEL_CALL, HookStyle::AfterLlmCall,
            register_after_llm_call_hook, register_after_llm_call_hook_with,
            unregister_after_llm_call_hook, get_after_llm_call_hooks, clear_after_llm_call_hooks),
        clear_all: clear_all_llm_call_hooks,
    }
}

// The same names on the global registry: each function is the method.

/// Registers a global before hook.
///
/// ```
/// use hooks_core::legacy::{register_before_tool_call_hook, unregister_before_tool_call_hook};
/// use hooks_core::{global_registry, ToolCallHookContext, LEGACY_BLOCK_REASON, PRE_TOOL_CALL};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// // `false` blocks the call; `true` (or `None`) lets it run.
/// let id = register_before_tool_call_hook(|ctx: &mut ToolCallHookContext| ctx.tool_name() != "rm");
///
/// let mut ctx = ToolCallHookContext::new("rm", Default::default());
/// let outcome = global_registry().dispatch(PRE_TOOL_CALL, &mut ctx);
/// assert_eq!(outcome.aborted().map(|a| a.reason.as_str()), Some(LEGACY_BLOCK_REASON));
///
/// assert!(unregister_before_tool_call_hook(id));
/// ```
pub fn register_before_tool_call_hook<F, R>(hook: F) -> HookId
where
    F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
    R: LegacyBeforeReturn<PreToolCall>,
{
    global_registry().register_before_tool_call_hook(hook)
}

/// Registers a global after hook.
///
/// ```
/// use hooks_core::legacy::{register_after_tool_call_hook, unregister_after_tool_call_hook};
/// use hooks_core::runtime::ToolOutput;
/// use hooks_core::{global_registry, ToolCallHookContext};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// // `Some(text)` replaces the result the agent sees.
/// let id = register_after_tool_call_hook(|ctx: &mut ToolCallHookContext| {
///     ctx.tool_result.as_deref().map(|r| r.replace("sk-123", "[KEY]"))
/// });
///
/// let mut ctx = ToolCallHookContext::new("env", Default::default());
/// let report = global_registry().run_tool_call(&mut ctx, |_| ToolOutput::text("API_KEY=sk-123"))?;
/// assert_eq!(report.observation, "API_KEY=[KEY]");
///
/// assert!(unregister_after_tool_call_hook(id));
/// # Ok::<(), hooks_core::HookAborted>(())
/// ```
pub fn register_after_tool_call_hook<F, R>(hook: F) -> HookId
where
    F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
    R: HookReturn<PostToolCall>,
{
    global_registry().register_after_tool_call_hook(hook)
}

/// Removes global before hooks named by id or function.
///
/// ```
/// use hooks_core::legacy::{get_before_tool_call_hooks, register_before_tool_call_hook, unregister_before_tool_call_hook};
/// use hooks_core::ToolCallHookContext;
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// fn no_shell(ctx: &mut ToolCallHookContext) -> bool {
///     ctx.tool_name() != "shell"
/// }
/// register_before_tool_call_hook(no_shell);
/// // The function itself names its registrations.
/// assert!(unregister_before_tool_call_hook(no_shell));
/// assert!(get_before_tool_call_hooks().is_empty());
/// ```
pub fn unregister_before_tool_call_hook<M>(handle: impl HookHandle<M>) -> bool {
    global_registry().unregister_before_tool_call_hook(handle)
}

/// Removes global after hooks named by id or function.
///
/// ```
/// use hooks_core::legacy::{get_after_tool_call_hooks, register_after_tool_call_hook, unregister_after_tool_call_hook};
/// use hooks_core::ToolCallHookContext;
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// let id = register_after_tool_call_hook(|ctx: &mut ToolCallHookContext| ctx.tool_result.as_deref().map(str::trim).map(str::to_owned));
/// assert!(unregister_after_tool_call_hook(id));
/// // Already gone.
/// assert!(!unregister_after_tool_call_hook(id));
/// assert!(get_after_tool_call_hooks().is_empty());
/// ```
pub fn unregister_after_tool_call_hook<M>(handle: impl HookHandle<M>) -> bool {
    global_registry().unregister_after_tool_call_hook(handle)
}

/// Lists the global before hooks.
///
/// ```
/// use hooks_core::legacy::{clear_before_tool_call_hooks, get_before_tool_call_hooks, register_before_tool_call_hook};
/// use hooks_core::{HookStyle, ToolCallHookContext, PRE_TOOL_CALL};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// let id = register_before_tool_call_hook(|_: &mut ToolCallHookContext| true);
/// let hooks = get_before_tool_call_hooks();
/// assert_eq!(hooks[0].id, id);
/// assert_eq!((hooks[0].point, hooks[0].style), (PRE_TOOL_CALL.into(), HookStyle::BeforeToolCall));
///
/// clear_before_tool_call_hooks();
/// ```
pub fn get_before_tool_call_hooks() -> Vec<HookInfo> {
    global_registry().get_before_tool_call_hooks()
}

/// Lists the global after hooks.
///
/// ```
/// use hooks_core::legacy::{clear_after_tool_call_hooks, get_after_tool_call_hooks, register_after_tool_call_hook};
/// use hooks_core::{HookStyle, ToolCallHookContext, POST_TOOL_CALL};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// let id = register_after_tool_call_hook(|_: &mut ToolCallHookContext| {});
/// let hooks = get_after_tool_call_hooks();
/// assert_eq!(hooks[0].id, id);
/// assert_eq!((hooks[0].point, hooks[0].style), (POST_TOOL_CALL.into(), HookStyle::AfterToolCall));
///
/// clear_after_tool_call_hooks();
/// ```
pub fn get_after_tool_call_hooks() -> Vec<HookInfo> {
    global_registry().get_after_tool_call_hooks()
}

/// Clears the global before hooks; returns how many.
///
/// ```
/// use hooks_core::legacy::{clear_before_tool_call_hooks, register_before_tool_call_hook};
/// use hooks_core::{get_hooks, register_hook, ToolCallHookContext, PRE_TOOL_CALL};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// register_before_tool_call_hook(|_: &mut ToolCallHookContext| true);
/// register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})?;
/// // One chain per point: `#[on(PRE_TOOL_CALL)]` hooks go too.
/// assert_eq!(clear_before_tool_call_hooks(), 2);
/// assert!(get_hooks(PRE_TOOL_CALL).is_empty());
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub fn clear_before_tool_call_hooks() -> usize {
    global_registry().clear_before_tool_call_hooks()
}

/// Clears the global after hooks; returns how many.
///
/// ```
/// use hooks_core::legacy::{clear_after_tool_call_hooks, get_after_tool_call_hooks, register_after_tool_call_hook};
/// use hooks_core::ToolCallHookContext;
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// register_after_tool_call_hook(|_: &mut ToolCallHookContext| {});
/// assert_eq!(clear_after_tool_call_hooks(), 1);
/// assert!(get_after_tool_call_hooks().is_empty());
/// ```
pub fn clear_after_tool_call_hooks() -> usize {
    global_registry().clear_after_tool_call_hooks()
}

/// Clears both global tool-call chains; returns `(before, after)`
/// counts.
///
/// ```
/// use hooks_core::legacy::{clear_all_tool_call_hooks, register_after_tool_call_hook, register_before_tool_call_hook};
/// use hooks_core::ToolCallHookContext;
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// register_before_tool_call_hook(|_: &mut ToolCallHookContext| true);
/// register_after_tool_call_hook(|_: &mut ToolCallHookContext| {});
/// register_after_tool_call_hook(|_: &mut ToolCallHookContext| {});
/// assert_eq!(clear_all_tool_call_hooks(), (1, 2));
/// assert_eq!(clear_all_tool_call_hooks(), (0, 0));
/// ```
pub fn clear_all_tool_call_hooks() -> (usize, usize) {
    global_registry().clear_all_tool_call_hooks()
}

/// Registers a global `before_llm_call` hook (`false` blocks the
/// model call).
///
/// ```
/// use hooks_core::legacy::register_before_llm_call_hook;
/// use hooks_core::{get_hooks, LlmCallHookContext, PRE_MODEL_CALL};
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

/// Registers a global `after_llm_call` hook (`Some(text)` replaces
/// the answer's text).
///
/// ```
/// use hooks_core::legacy::{register_after_llm_call_hook, unregister_after_llm_call_hook};
/// use hooks_core::{global_registry, LlmCallHookContext, ModelResponse, POST_MODEL_CALL};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// let id = register_after_llm_call_hook(|ctx: &mut LlmCallHookContext| {
///     ctx.response.as_ref().map(|r| r.content.trim().to_owned())
/// });
///
/// let mut ctx = LlmCallHookContext::new(Vec::new());
/// ctx.response = Some(ModelResponse { content: "  Paris  ".into(), tool_calls: Vec::new() });
/// global_registry().dispatch(POST_MODEL_CALL, &mut ctx);
/// assert_eq!(ctx.response.map(|r| r.content).as_deref(), Some("Paris"));
///
/// assert!(unregister_after_llm_call_hook(id));
/// ```
pub fn register_after_llm_call_hook<F, R>(hook: F) -> HookId
where
    F: Fn(&mut LlmCallHookContext) -> R + Send + Sync + 'static,
    R: HookReturn<PostModelCall>,
{
    global_registry().register_after_llm_call_hook(hook)
}

/// Removes global `before_llm_call` hooks named by id or function.
///
/// ```
/// use hooks_core::legacy::{get_before_llm_call_hooks, register_before_llm_call_hook, unregister_before_llm_call_hook};
/// use hooks_core::LlmCallHookContext;
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// fn at_most_ten_turns(ctx: &mut LlmCallHookContext) -> bool {
///     ctx.iterations <= 10
/// }
/// register_before_llm_call_hook(at_most_ten_turns);
/// assert!(unregister_before_llm_call_hook(at_most_ten_turns));
/// assert!(get_before_llm_call_hooks().is_empty());
/// ```
pub fn unregister_before_llm_call_hook<M>(handle: impl HookHandle<M>) -> bool {
    global_registry().unregister_before_llm_call_hook(handle)
}

/// Removes global `after_llm_call` hooks named by id or function.
///
/// ```
/// use hooks_core::legacy::{get_after_llm_call_hooks, register_after_llm_call_hook, unregister_after_llm_call_hook};
/// use hooks_core::LlmCallHookContext;
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// let id = register_after_llm_call_hook(|_: &mut LlmCallHookContext| {});
/// assert!(unregister_after_llm_call_hook(id));
/// assert!(!unregister_after_llm_call_hook(id));
/// assert!(get_after_llm_call_hooks().is_empty());
/// ```
pub fn unregister_after_llm_call_hook<M>(handle: impl HookHandle<M>) -> bool {
    global_registry().unregister_after_llm_call_hook(handle)
}

/// Lists the global `before_llm_call` hooks.
///
/// ```
/// use hooks_core::legacy::{clear_before_llm_call_hooks, get_before_llm_call_hooks, register_before_llm_call_hook};
/// use hooks_core::{HookStyle, LlmCallHookContext};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// let id = register_before_llm_call_hook(|_: &mut LlmCallHookContext| true);
/// let hooks = get_before_llm_call_hooks();
/// assert_eq!((hooks[0].id, hooks[0].style), (id, HookStyle::BeforeLlmCall));
///
/// clear_before_llm_call_hooks();
/// ```
pub fn get_before_llm_call_hooks() -> Vec<HookInfo> {
    global_registry().get_before_llm_call_hooks()
}

/// Lists the global `after_llm_call` hooks.
///
/// ```
/// use hooks_core::legacy::{clear_after_llm_call_hooks, get_after_llm_call_hooks, register_after_llm_call_hook};
/// use hooks_core::{HookStyle, LlmCallHookContext};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// let id = register_after_llm_call_hook(|_: &mut LlmCallHookContext| {});
/// let hooks = get_after_llm_call_hooks();
/// assert_eq!((hooks[0].id, hooks[0].style), (id, HookStyle::AfterLlmCall));
///
/// clear_after_llm_call_hooks();
/// ```
pub fn get_after_llm_call_hooks() -> Vec<HookInfo> {
    global_registry().get_after_llm_call_hooks()
}

/// Clears the global `before_llm_call` hooks; returns how many.
///
/// ```
/// use hooks_core::legacy::{clear_before_llm_call_hooks, get_before_llm_call_hooks, register_before_llm_call_hook};
/// use hooks_core::LlmCallHookContext;
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// register_before_llm_call_hook(|_: &mut LlmCallHookContext| true);
/// register_before_llm_call_hook(|_: &mut LlmCallHookContext| {});
/// assert_eq!(clear_before_llm_call_hooks(), 2);
/// assert!(get_before_llm_call_hooks().is_empty());
/// ```
pub fn clear_before_llm_call_hooks() -> usize {
    global_registry().clear_before_llm_call_hooks()
}

/// Clears the global `after_llm_call` hooks; returns how many.
///
/// ```
/// use hooks_core::legacy::{clear_after_llm_call_hooks, get_after_llm_call_hooks, register_after_llm_call_hook};
/// use hooks_core::LlmCallHookContext;
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// register_after_llm_call_hook(|_: &mut LlmCallHookContext| {});
/// assert_eq!(clear_after_llm_call_hooks(), 1);
/// assert!(get_after_llm_call_hooks().is_empty());
/// ```
pub fn clear_after_llm_call_hooks() -> usize {
    global_registry().clear_after_llm_call_hooks()
}

/// Clears both global model-call chains; returns `(before, after)`
/// counts.
///
/// ```
/// use hooks_core::legacy::{clear_all_llm_call_hooks, register_after_llm_call_hook, register_before_llm_call_hook};
/// use hooks_core::LlmCallHookContext;
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// register_before_llm_call_hook(|_: &mut LlmCallHookContext| true);
/// register_before_llm_call_hook(|_: &mut LlmCallHookContext| true);
/// register_after_llm_call_hook(|_: &mut LlmCallHookContext| {});
/// assert_eq!(clear_all_llm_call_hooks(), (2, 1));
/// ```
pub fn clear_all_llm_call_hooks() -> (usize, usize) {
    global_registry().clear_all_llm_call_hooks()
}
