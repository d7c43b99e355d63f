//! `explain`: which hooks would run at a point for a tool and an agent
//! role, and why the others would not.
//!
//! A `capabilities = [...]` filter reads the tool itself, not its name.
//! [`explain`](Dispatcher::explain) knows only the name, so it says of a
//! capability-filtered hook that it [depends on the tool's
//! capabilities](Verdict::DependsOnCapabilities);
//! [`explain_with_capabilities`](Dispatcher::explain_with_capabilities)
//! is told them (or that the call has no tool) and decides.

use std::fmt;

use crate::capability::Capabilities;
use crate::dispatch::Dispatcher;
use crate::hook::HookInfo;
use crate::name::normalize_tool_name;
use crate::point::InterceptionPoint;
use crate::registry::HookRegistry;

/// Whether a hook would run, and if not, which filter stops it.
///
/// ```
/// use hooks_core::{HookOptions, HookRegistry, ToolCallHookContext, Verdict, PRE_TOOL_CALL};
///
/// let registry = HookRegistry::new();
/// let noop = |_: &mut ToolCallHookContext| {};
/// registry.register_hook_with(PRE_TOOL_CALL, HookOptions::new().name("all"), noop)?;
/// registry.register_hook_with(PRE_TOOL_CALL, HookOptions::new().name("mail").tools(["send_email"]), noop)?;
/// registry.register_hook_with(PRE_TOOL_CALL, HookOptions::new().name("ops").agents(["Operator"]), noop)?;
///
/// for explained in registry.explain("web_search", Some("Researcher")).hooks {
///     let why = match explained.verdict {
///         Verdict::Runs => "runs",
///         Verdict::SkippedByTools => "not this tool",
///         Verdict::SkippedByAgents => "not this agent",
///         Verdict::SkippedByCapabilities | Verdict::DependsOnCapabilities => "depends on the tool",
///     };
///     println!("{}: {why}", explained.hook.name);
/// }
/// let verdicts: Vec<Verdict> = registry.explain("web_search", Some("Researcher")).hooks.into_iter().map(|h| h.verdict).collect();
/// assert_eq!(verdicts, [Verdict::Runs, Verdict::SkippedByTools, Verdict::SkippedByAgents]);
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The hook would run.
    Runs,
    /// Its `tools` filter does not name the tool.
    SkippedByTools,
    /// Its `agents` filter does not name the role.
    SkippedByAgents,
    /// Its `capabilities` filter shares no capability with the tool's, or
    /// the call has no tool.
    SkippedByCapabilities,
    /// Its `tools` and `agents` filters let it run, and its `capabilities`
    /// filter decides: the tool was explained by name only (see
    /// [`Dispatcher::explain_with_capabilities`]).
    DependsOnCapabilities,
}

/// One hook in an [`Explanation`].
///
/// ```
/// use hooks_core::{HookOptions, HookRegistry, ToolCallHookContext, Verdict, POST_TOOL_CALL};
///
/// let registry = HookRegistry::new();
/// registry.register_hook_with(
///     POST_TOOL_CALL,
///     HookOptions::new().name("redact-db").tools(["query_db"]),
///     |_: &mut ToolCallHookContext| {},
/// )?;
/// let explained = &registry.explain("query_db", None).hooks[0];
/// assert_eq!(explained.hook.name, "redact-db");
/// assert_eq!(explained.verdict, Verdict::Runs);
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExplainedHook {
    /// The hook.
    pub hook: HookInfo,
    /// What would happen to it.
    pub verdict: Verdict,
}

/// The hooks of the points explained, in dispatch order, with a verdict
/// each.
///
/// ```
/// use hooks_core::{HookOptions, HookRegistry, InterceptionPoint, ToolCallHookContext, PRE_TOOL_CALL};
///
/// let registry = HookRegistry::new();
/// registry.register_hook_with(
///     PRE_TOOL_CALL,
///     HookOptions::new().name("no-deletes").tools(["delete_file"]),
///     |_: &mut ToolCallHookContext| {},
/// )?;
/// let explanation = registry.explain("DeleteFile", Some("Cleaner"));
/// assert_eq!(explanation.tool_name.as_deref(), Some("delete_file"));
/// assert_eq!(explanation.points, [InterceptionPoint::PRE_TOOL_CALL, InterceptionPoint::POST_TOOL_CALL]);
/// assert_eq!(explanation.running(PRE_TOOL_CALL), ["no-deletes"]);
/// // Printed, it reads as a report.
/// assert!(explanation.to_string().contains("runs     no-deletes"));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The normalized tool name explained (`None` at points without a
    /// tool).
    pub tool_name: Option<String>,
    /// The agent role explained (`None`: a call without an agent).
    pub agent_role: Option<String>,
    /// What was known of the tool's capabilities.
    pub tool_capabilities: ToolCapabilities,
    /// The points explained, in the order they fire.
    pub points: Vec<InterceptionPoint>,
    /// The hooks, point by point, each in the order they would run.
    pub hooks: Vec<ExplainedHook>,
    /// What hooks that decide by data say of the call: a crew's policy
    /// set lists the policies that could decide it.
    pub notes: Vec<String>,
}

/// What an [`Explanation`] knew of the capabilities of the call's tool.
///
/// ```
/// use hooks_core::{HookRegistry, ToolAnnotations, ToolCapabilities};
///
/// let registry = HookRegistry::new();
/// let reader = ToolAnnotations::new().read_only(true).capabilities();
///
/// let explained = [
///     registry.explain("read_file", None),
///     registry.explain_with_capabilities("read_file", Some(reader), None),
///     registry.explain_with_capabilities("reed_file", None, None),
/// ];
/// let known: Vec<&str> = explained
///     .iter()
///     .map(|e| match e.tool_capabilities {
///         ToolCapabilities::Unknown => "name only",
///         ToolCapabilities::Known(_) => "known",
///         ToolCapabilities::NoTool => "no such tool",
///     })
///     .collect();
/// assert_eq!(known, ["name only", "known", "no such tool"]);
/// assert_eq!(ToolCapabilities::of(Some(reader)), ToolCapabilities::Known(reader));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolCapabilities {
    /// Only the tool's name was given: a capability-filtered hook
    /// [depends on them](Verdict::DependsOnCapabilities).
    #[default]
    Unknown,
    /// The tool has these capabilities.
    Known(Capabilities),
    /// The call has no tool (the model named a tool the agent does not
    /// have): no capability filter admits it.
    NoTool,
}

impl ToolCapabilities {
    /// The capabilities of a call's tool, as a filter reads them (`None`:
    /// no tool).
    pub fn of(capabilities: Option<Capabilities>) -> Self {
        capabilities.map_or(ToolCapabilities::NoTool, ToolCapabilities::Known)
    }
}

impl Explanation {
    /// The names of the hooks that would run at `point`, in order.
    pub fn running(&self, point: impl Into<InterceptionPoint>) -> Vec<&str> {
        let point = point.into();
        self.hooks
            .iter()
            .filter(|h| h.hook.point == point && h.verdict == Verdict::Runs)
            .map(|h| h.hook.name.as_str())
            .collect()
    }
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let role = self.agent_role.as_deref().unwrap_or("<no agent>");
        match (&self.tool_name, self.tool_capabilities) {
            (Some(tool), ToolCapabilities::Known(capabilities)) => writeln!(
                f,
                "hooks for tool `{tool}` ({}) and agent `{role}`:",
                describe(capabilities)
            )?,
            (Some(tool), ToolCapabilities::NoTool) => writeln!(
                f,
                "hooks for tool `{tool}` (no such tool) and agent `{role}`:"
            )?,
            (Some(tool), ToolCapabilities::Unknown) => {
                writeln!(f, "hooks for tool `{tool}` and agent `{role}`:")?
            }
            (None, _) => writeln!(f, "hooks for agent `{role}`:")?,
        }
        for point in &self.points {
            writeln!(f, "{point}")?;
            let mut any = false;
            for explained in self.hooks.iter().filter(|h| h.hook.point == *point) {
                any = true;
                let hook = &explained.hook;
                match explained.verdict {
                    Verdict::Runs => writeln!(f, "  runs     {} ({})", hook.name, hook.origin)?,
                    Verdict::SkippedByTools => writeln!(
                        f,
                        "  skipped  {}: tools = {:?} does not include `{}`",
                        hook.name,
                        hook.tools,
                        self.tool_name.as_deref().unwrap_or("")
                    )?,
                    Verdict::SkippedByAgents => writeln!(
                        f,
                        "  skipped  {}: agents = {:?} does not include `{role}`",
                        hook.name, hook.agents
                    )?,
                    Verdict::SkippedByCapabilities => match self.tool_capabilities {
                        ToolCapabilities::Known(capabilities) => writeln!(
                            f,
                            "  skipped  {}: capabilities = [{}] shares none with the tool's ({})",
                            hook.name,
                            hook.capabilities,
                            describe(capabilities)
                        )?,
                        _ => writeln!(
                            f,
                            "  skipped  {}: capabilities = [{}] never matches a call without a tool",
                            hook.name, hook.capabilities
                        )?,
                    },
                    Verdict::DependsOnCapabilities => writeln!(
                        f,
                        "  depends  {} ({}): runs if the tool has any of capabilities = [{}]",
                        hook.name, hook.origin, hook.capabilities
                    )?,
                }
            }
            if !any {
                writeln!(f, "  (no hooks)")?;
            }
        }
        for note in &self.notes {
            writeln!(f, "{note}")?;
        }
        Ok(())
    }
}

/// A set of capabilities as the explanation shows it.
fn describe(capabilities: Capabilities) -> String {
    if capabilities.is_empty() {
        "no capabilities".to_owned()
    } else {
        capabilities.to_string()
    }
}

impl Dispatcher<'_> {
    /// Lists the hooks a call of `tool` by an agent with `role` would meet
    /// at the two tool-call points, in order (crew-scoped hooks merged in),
    /// with the filter that would skip each skipped one. Stops at nothing:
    /// a hook that blocks at run time still lets `explain` list the hooks
    /// after it.
    ///
    /// Only the tool's name is known here: a hook with a `capabilities`
    /// filter that the other filters let through is
    /// [`Verdict::DependsOnCapabilities`]. To decide it, use
    /// [`explain_with_capabilities`](Self::explain_with_capabilities).
    pub fn explain(&self, tool: &str, role: Option<&str>) -> Explanation {
        self.explain_points(&TOOL_POINTS, Some(tool), ToolCapabilities::Unknown, role)
    }

    /// Like [`explain`](Self::explain), for a tool with these
    /// capabilities (`Some`, as the tool's
    /// [`ToolAnnotations::capabilities`](crate::ToolAnnotations::capabilities)
    /// reads them) or for a call without a tool (`None`: the model named a
    /// tool the agent does not have), so that capability filters are
    /// decided too.
    pub fn explain_with_capabilities(
        &self,
        tool: &str,
        capabilities: Option<Capabilities>,
        role: Option<&str>,
    ) -> Explanation {
        self.explain_points(
            &TOOL_POINTS,
            Some(tool),
            ToolCapabilities::of(capabilities),
            role,
        )
    }

    /// Like [`explain`](Self::explain), at any point: `tool` is only used
    /// at the tool-call points, `role` at the points that have an agent.
    pub fn explain_point(
        &self,
        point: impl Into<InterceptionPoint>,
        tool: Option<&str>,
        role: Option<&str>,
    ) -> Explanation {
        self.explain_points(&[point.into()], tool, ToolCapabilities::Unknown, role)
    }

    fn explain_points(
        &self,
        points: &[InterceptionPoint],
        tool: Option<&str>,
        capabilities: ToolCapabilities,
        role: Option<&str>,
    ) -> Explanation {
        let tool_name = tool
            .filter(|_| points.iter().any(|p| p.accepts_tool_filter()))
            .map(normalize_tool_name);
        let global = self.global().snapshot_full();
        let scoped = self.scoped().map(HookRegistry::snapshot_full);
        let mut hooks = Vec::new();
        for point in points {
            let tool = tool_name.as_deref().filter(|_| point.accepts_tool_filter());
            let role = role.filter(|_| point.accepts_agent_filter());
            let mut verdicts = global.erased(*point).verdicts(tool, role);
            if let Some(scoped) = &scoped {
                verdicts.extend(scoped.erased(*point).verdicts(tool, role));
            }
            verdicts.sort_by_key(|(rank, ..)| *rank);
            hooks.extend(verdicts.into_iter().map(|(_, hook, tool_ok, role_ok)| {
                let verdict = if !tool_ok {
                    Verdict::SkippedByTools
                } else if !role_ok {
                    Verdict::SkippedByAgents
                } else if hook.capabilities.is_empty() {
                    Verdict::Runs
                } else {
                    match capabilities {
                        ToolCapabilities::Unknown => Verdict::DependsOnCapabilities,
                        ToolCapabilities::Known(have) if hook.admits_capabilities(Some(have)) => {
                            Verdict::Runs
                        }
                        ToolCapabilities::NoTool if hook.admits_capabilities(None) => Verdict::Runs,
                        _ => Verdict::SkippedByCapabilities,
                    }
                };
                ExplainedHook { hook, verdict }
            }));
        }
        Explanation {
            tool_capabilities: if tool_name.is_some() {
                capabilities
            } else {
                ToolCapabilities::Unknown
            },
            tool_name,
            agent_role: role.map(str::to_owned),
            points: points.to_vec(),
            hooks,
            notes: Vec::new(),
        }
    }
}

/// The points of a tool call, in the order they fire.
const TOOL_POINTS: [InterceptionPoint; 2] = [
    InterceptionPoint::PRE_TOOL_CALL,
    InterceptionPoint::POST_TOOL_CALL,
];

impl HookRegistry {
    /// Lists the hooks of this registry a call of `tool` by an agent with
    /// `role` would meet (see [`Dispatcher::explain`]).
    pub fn explain(&self, tool: &str, role: Option<&str>) -> Explanation {
        self.dispatcher().explain(tool, role)
    }

    /// Lists the hooks of this registry a call of `tool`, a tool with
    /// `capabilities` (`None`: no such tool), would meet (see
    /// [`Dispatcher::explain_with_capabilities`]).
    ///
    /// ```
    /// use hooks_core::{
    ///     Capability, HookOptions, HookRegistry, ToolAnnotations, ToolCallHookContext, Verdict,
    ///     PRE_TOOL_CALL,
    /// };
    ///
    /// let registry = HookRegistry::new();
    /// registry.register_hook_with(
    ///     PRE_TOOL_CALL,
    ///     HookOptions::new().name("destructive-guard").capabilities([Capability::Destructive]),
    ///     |_: &mut ToolCallHookContext| {},
    /// )?;
    ///
    /// // By name only, it depends on the tool.
    /// let by_name = registry.explain("read_file", None);
    /// assert_eq!(by_name.hooks[0].verdict, Verdict::DependsOnCapabilities);
    ///
    /// let reader = ToolAnnotations::new().read_only(true).open_world(false).capabilities();
    /// let explained = registry.explain_with_capabilities("read_file", Some(reader), None);
    /// assert_eq!(explained.hooks[0].verdict, Verdict::SkippedByCapabilities);
    /// assert!(explained.to_string().contains(
    ///     "skipped  destructive-guard: capabilities = [destructive] shares none with the tool's (read_only, idempotent)"
    /// ));
    ///
    /// let unknown = ToolAnnotations::new().capabilities();
    /// let explained = registry.explain_with_capabilities("run_shell", Some(unknown), None);
    /// assert_eq!(explained.running(PRE_TOOL_CALL), ["destructive-guard"]);
    /// # Ok::<(), hooks_core::RegisterError>(())
    /// ```
    pub fn explain_with_capabilities(
        &self,
        tool: &str,
        capabilities: Option<Capabilities>,
        role: Option<&str>,
    ) -> Explanation {
        self.dispatcher()
            .explain_with_capabilities(tool, capabilities, role)
    }

    /// Lists the hooks of this registry at `point` (see
    /// [`Dispatcher::explain_point`]).
    ///
    /// ```
    /// use hooks_core::{HookOptions, HookRegistry, LlmCallHookContext, PRE_MODEL_CALL};
    /// let registry = HookRegistry::new();
    /// registry.register_hook_with(
    ///     PRE_MODEL_CALL,
    ///     HookOptions::new().name("writer-guard").agents(["Writer"]),
    ///     |_: &mut LlmCallHookContext| {},
    /// )?;
    /// let explained = registry.explain_point(PRE_MODEL_CALL, None, Some("Researcher"));
    /// assert!(explained.running(PRE_MODEL_CALL).is_empty());
    /// assert!(explained.to_string().contains("skipped  writer-guard"));
    /// # Ok::<(), hooks_core::RegisterError>(())
    /// ```
    pub fn explain_point(
        &self,
        point: impl Into<InterceptionPoint>,
        tool: Option<&str>,
        role: Option<&str>,
    ) -> Explanation {
        self.dispatcher().explain_point(point, tool, role)
    }
}
