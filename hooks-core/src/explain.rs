//! `explain`: which hooks would run at a point for a tool and an agent
//! role, and why the others would not.

use std::fmt;

use crate::dispatch::Dispatcher;
use crate::hook::HookInfo;
use crate::name::normalize_tool_name;
use crate::point::InterceptionPoint;
use crate::registry::HookRegistry;

/// Whether a hook would run, and if not, which filter stops it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The hook would run.
    Runs,
    /// Its `tools` filter does not name the tool.
    SkippedByTools,
    /// Its `agents` filter does not name the role.
    SkippedByAgents,
}

/// One hook in an [`Explanation`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExplainedHook {
    /// The hook.
    pub hook: HookInfo,
    /// What would happen to it.
    pub verdict: Verdict,
}

/// The hooks of the points explained, in dispatch order, with a verdict
/// each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The normalized tool name explained (`None` at points without a
    /// tool).
    pub tool_name: Option<String>,
    /// The agent role explained (`None`: a call without an agent).
    pub agent_role: Option<String>,
    /// The points explained, in the order they fire.
    pub points: Vec<InterceptionPoint>,
    /// The hooks, point by point, each in the order they would run.
    pub hooks: Vec<ExplainedHook>,
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
        match &self.tool_name {
            Some(tool) => writeln!(f, "hooks for tool `{tool}` and agent `{role}`:")?,
            None => writeln!(f, "hooks for agent `{role}`:")?,
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
                }
            }
            if !any {
                writeln!(f, "  (no hooks)")?;
            }
        }
        Ok(())
    }
}

impl Dispatcher<'_> {
    /// Lists the hooks a call of `tool` by an agent with `role` would meet
    /// at the two tool-call points, in order (crew-scoped hooks merged in),
    /// with the filter that would skip each skipped one. Stops at nothing:
    /// a hook that blocks at run time still lets `explain` list the hooks
    /// after it.
    pub fn explain(&self, tool: &str, role: Option<&str>) -> Explanation {
        self.explain_points(
            &[
                InterceptionPoint::PRE_TOOL_CALL,
                InterceptionPoint::POST_TOOL_CALL,
            ],
            Some(tool),
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
        self.explain_points(&[point.into()], tool, role)
    }

    fn explain_points(
        &self,
        points: &[InterceptionPoint],
        tool: Option<&str>,
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
                } else {
                    Verdict::Runs
                };
                ExplainedHook { hook, verdict }
            }));
        }
        Explanation {
            tool_name,
            agent_role: role.map(str::to_owned),
            points: points.to_vec(),
            hooks,
        }
    }
}

impl HookRegistry {
    /// Lists the hooks of this registry a call of `tool` by an agent with
    /// `role` would meet (see [`Dispatcher::explain`]).
    pub fn explain(&self, tool: &str, role: Option<&str>) -> Explanation {
        self.dispatcher().explain(tool, role)
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
