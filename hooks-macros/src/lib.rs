//! Attributes that register hooks at the ten interception points.
//!
//! Use them through `crew-runtime` (or `hooks-core`), which re-export them;
//! this crate only parses, checks and emits data for the engine:
//!
//! - `#[on(PRE_TOOL_CALL | POST_TOOL_CALL, tools = [...], agents = [...], capabilities = [...], order = N, fail_closed, timeout_ms = N, crate = path)]`
//! - `#[before_tool_call(...)]` / `#[after_tool_call(...)]`: the legacy
//!   styles, with the same optional arguments but no point;
//! - `#[crew_base]` on an impl block, with `#[agent]`, `#[task]` and `#[crew]`
//!   methods and hook methods taking `&self`.
//!
//! On a free function a hook attribute leaves the function unchanged and
//! adds a record to `hooks-core`'s link-time list, so the hook is in the
//! global registry without any start-up call. Filters are checked and
//! normalized at compile time; the signature is checked by rustc against
//! the engine's traits, with errors on the user's own tokens.

mod crew_base;
mod emit;
mod errors;
mod parse;
mod paths;
mod validate;

use proc_macro::TokenStream;

use crate::parse::HookKind;

/// Registers a free function as a hook at an interception point:
/// `#[on(PRE_TOOL_CALL)]` or `#[on(POST_TOOL_CALL, tools = ["web_search"])]`.
///
/// The points: `EXECUTION_START`, `INPUT`, `PRE_STEP`, `PRE_MODEL_CALL`,
/// `POST_MODEL_CALL`, `PRE_TOOL_CALL`, `POST_TOOL_CALL`, `POST_STEP`,
/// `OUTPUT`, `EXECUTION_END`, each with its own context type.
///
/// Arguments after the point: `tools = ["..."]` (tool-call points only;
/// normalized like tool names), `agents = ["..."]` (step, model-call and
/// tool-call points; exact roles), `capabilities = [destructive, ...]`
/// (tool-call points only; bare names `read_only`, `destructive`,
/// `idempotent`, `open_world`: the hook runs for a call whose tool has any
/// of them, never for a call without a tool), `order = N` (link-time hooks run
/// sorted by it, default 0), `unchecked_filters` (filters that name tools
/// or roles of crews the program builds later: left out of the crews'
/// filter check), `fail_closed` (a panic blocks the call or
/// withholds the result), `timeout_ms = N` (an `async fn` hook's own time
/// limit, in milliseconds, instead of its crew's hook timeout; past it the
/// hook counts as panicked), `crate = path` (where `hooks_core` is).
#[proc_macro_attribute]
pub fn on(args: TokenStream, item: TokenStream) -> TokenStream {
    emit::hook_attribute(HookKind::On, args.into(), item.into()).into()
}

/// Registers a legacy before hook: it runs at `PRE_TOOL_CALL` and returns
/// `Option<bool>`, `bool` or `()`, where `false` blocks the call.
#[proc_macro_attribute]
pub fn before_tool_call(args: TokenStream, item: TokenStream) -> TokenStream {
    emit::hook_attribute(HookKind::BeforeToolCall, args.into(), item.into()).into()
}

/// Registers a legacy after hook: it runs at `POST_TOOL_CALL` and returns
/// `Option<String>` (a replacement result), `()` or
/// `Result<Option<String>, HookAborted>`.
#[proc_macro_attribute]
pub fn after_tool_call(args: TokenStream, item: TokenStream) -> TokenStream {
    emit::hook_attribute(HookKind::AfterToolCall, args.into(), item.into()).into()
}

/// Registers a legacy `before_llm_call` hook: it runs at `PRE_MODEL_CALL`
/// with `&mut LlmCallHookContext` and returns `Option<bool>`, `bool` or
/// `()`, where `false` blocks the model call (which ends the run).
#[proc_macro_attribute]
pub fn before_llm_call(args: TokenStream, item: TokenStream) -> TokenStream {
    emit::hook_attribute(HookKind::BeforeLlmCall, args.into(), item.into()).into()
}

/// Registers a legacy `after_llm_call` hook: it runs at `POST_MODEL_CALL`
/// and returns `Option<String>` (replacing the answer's text), `()` or
/// `Result<Option<String>, HookAborted>`.
#[proc_macro_attribute]
pub fn after_llm_call(args: TokenStream, item: TokenStream) -> TokenStream {
    emit::hook_attribute(HookKind::AfterLlmCall, args.into(), item.into()).into()
}

/// Makes an impl block a crew definition: collects its `#[agent]` and
/// `#[task]` methods into `agents()` and `tasks()` (naming each task that
/// has no name after its method), and attaches its hook
/// methods (taking `&self`) to every crew its `#[crew]` method builds.
#[proc_macro_attribute]
pub fn crew_base(args: TokenStream, item: TokenStream) -> TokenStream {
    crew_base::expand(args.into(), item.into()).into()
}

/// Marks an agent method (`fn researcher(&self) -> Agent`) of a
/// `#[crew_base]` impl.
#[proc_macro_attribute]
pub fn agent(args: TokenStream, item: TokenStream) -> TokenStream {
    crew_base::marker("agent", args.into(), item.into()).into()
}

/// Marks a task method (`fn research(&self) -> Task`, or `-> Result<Task, _>`)
/// of a `#[crew_base]` impl. The task `tasks()` lists is named after the
/// method (`research`) unless it was given a name.
#[proc_macro_attribute]
pub fn task(args: TokenStream, item: TokenStream) -> TokenStream {
    crew_base::marker("task", args.into(), item.into()).into()
}

/// Marks the method that builds the crew (`fn crew(&self) -> Crew`) of a
/// `#[crew_base]` impl.
#[proc_macro_attribute]
pub fn crew(args: TokenStream, item: TokenStream) -> TokenStream {
    crew_base::marker("crew", args.into(), item.into()).into()
}
