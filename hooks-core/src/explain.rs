//! `explain`: which hooks would run for a tool and an agent role, and why
//! the others would not.

use std::fmt;

use crate::dispatch::Dispatcher;
use crate::hook::{HookEntry, HookInfo};
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

/// The hooks of both points, in dispatch order, with a verdict each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The normalized tool name explained.
    pub tool_name: String,
    /// The agent role explained (`None`: a call without an agent).
    pub agent_role: Option<String>,
    /// PRE hooks then POST hooks, each in the order they would run.
    pub hooks: Vec<ExplainedHook>,
}

impl Explanation {
    /// The names of the hooks that would run at `point`, in order.
    pub fn running(&self, point: InterceptionPoint) -> Vec<&str> {
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
        writeln!(f, "hooks for tool `{}` and agent `{role}`:", self.tool_name)?;
        for point in InterceptionPoint::ALL {
            writeln!(f, "{point}")?;
            let mut any = false;
            for explained in self.hooks.iter().filter(|h| h.hook.point == point) {
                any = true;
                let hook = &explained.hook;
                match explained.verdict {
                    Verdict::Runs => writeln!(f, "  runs     {} ({})", hook.name, hook.origin)?,
                    Verdict::SkippedByTools => writeln!(
                        f,
                        "  skipped  {}: tools = {:?} does not include `{}`",
                        hook.name, hook.tools, self.tool_name
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

fn verdict(entry: &HookEntry, tool: &str, role: Option<&str>) -> Verdict {
    if !entry.tool_matches(tool) {
        Verdict::SkippedByTools
    } else if !entry.agent_matches(role) {
        Verdict::SkippedByAgents
    } else {
        Verdict::Runs
    }
}

impl Dispatcher<'_> {
    /// Lists the hooks a call of `tool` by an agent with `role` would meet,
    /// in order (crew-scoped hooks merged in), with the filter that would
    /// skip each skipped one. Stops at nothing: a hook that blocks at run
    /// time still lets `explain` list the hooks after it.
    pub fn explain(&self, tool: &str, role: Option<&str>) -> Explanation {
        let tool_name = normalize_tool_name(tool);
        let global = self.global().snapshot_full();
        let scoped = self.scoped().map(HookRegistry::snapshot_full);
        let mut hooks = Vec::new();
        for point in InterceptionPoint::ALL {
            let mut entries: Vec<&HookEntry> = global.chains[point.index()]
                .entries
                .iter()
                .map(|e| &**e)
                .collect();
            if let Some(scoped) = &scoped {
                entries.extend(scoped.chains[point.index()].entries.iter().map(|e| &**e));
            }
            entries.sort_by_key(|e| e.rank);
            hooks.extend(entries.into_iter().map(|entry| ExplainedHook {
                hook: entry.info.clone(),
                verdict: verdict(entry, &tool_name, role),
            }));
        }
        Explanation {
            tool_name,
            agent_role: role.map(str::to_owned),
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
}
