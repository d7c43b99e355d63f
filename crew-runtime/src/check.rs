//! Crew-build checks: the guide's "hook not executing" troubleshooting, done
//! by the machine. A hook whose filter names no tool or role of the crew
//! would never run for it; that is usually a typo.

use std::collections::BTreeSet;
use std::fmt;

use hooks_core::{HookInfo, HookRegistry, InterceptionPoint};

/// Which filter of a hook names nothing in a crew.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterKind {
    /// The `tools = [...]` filter.
    Tools,
    /// The `agents = [...]` filter.
    Agents,
}

/// A hook whose filter names no tool (or role) of a crew: it will never run
/// for that crew's calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterWarning {
    /// The crew's name.
    pub crew: String,
    /// The hook.
    pub hook: HookInfo,
    /// The filter that names nothing present.
    pub filter: FilterKind,
    /// What the crew has: its tool names or its agents' roles, sorted.
    pub present: Vec<String>,
}

impl fmt::Display for FilterWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, named, has) = match self.filter {
            FilterKind::Tools => ("tools", &self.hook.tools, "tools"),
            FilterKind::Agents => ("agents", &self.hook.agents, "roles"),
        };
        let present = if self.present.is_empty() {
            "none".to_owned()
        } else {
            self.present.join(", ")
        };
        write!(
            f,
            "hook `{}` ({}, {}) has {what} = {named:?}, but crew `{}` has none of them, so it \
             never runs here (the crew's {has}: {present})",
            self.hook.name, self.hook.point, self.hook.origin, self.crew
        )
    }
}

/// The warnings for every hook of `registries` against a crew's tools and
/// roles.
pub(crate) fn check_filters(
    crew: &str,
    registries: &[&HookRegistry],
    tools: &BTreeSet<&str>,
    roles: &BTreeSet<&str>,
) -> Vec<FilterWarning> {
    let mut warnings = Vec::new();
    for registry in registries {
        for point in InterceptionPoint::ALL {
            for hook in registry.get_hooks(point) {
                let tools_absent = !hook.tools.is_empty()
                    && !hook.tools.iter().any(|t| tools.contains(t.as_str()));
                let roles_absent = !hook.agents.is_empty()
                    && !hook.agents.iter().any(|a| roles.contains(a.as_str()));
                let mut warn = |filter, present: &BTreeSet<&str>| {
                    warnings.push(FilterWarning {
                        crew: crew.to_owned(),
                        hook: hook.clone(),
                        filter,
                        present: present.iter().map(|s| (*s).to_owned()).collect(),
                    });
                };
                if tools_absent {
                    warn(FilterKind::Tools, tools);
                }
                if roles_absent {
                    warn(FilterKind::Agents, roles);
                }
            }
        }
    }
    warnings
}
