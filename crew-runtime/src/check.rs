//! Hook-filter checks: the guide's "hook not executing" troubleshooting,
//! done by the machine. A filter entry that names no tool or role a hook
//! could ever meet is usually a typo, and the hook silently never runs.
//!
//! What is checked against what:
//! - a crew's own hooks, against that crew's tools and roles, when it is
//!   built (and when `#[crew_base]` attaches its hook methods);
//! - the hooks of a global registry, against the tools and roles of every
//!   crew built on that registry so far, at each crew's first kickoff. A
//!   program usually builds all its crews before running any, so a filter
//!   naming a tool of the second crew is not reported by the first one's
//!   build (the false alarm a per-crew check gives).
//!
//! What is reported: an entry naming nothing known when the whole filter
//! names nothing known (the hook never runs), or when the entry is a near
//! miss of a known name (a typo next to correct entries). An entry of a
//! filter that matches elsewhere and resembles nothing (`tools =
//! ["delete_file", "drop_table"]` in a program with only `delete_file`) is
//! taken as deliberate. Each report carries a "did you mean" when a known
//! name is close. A global hook's entry is reported once per registry,
//! hook and name, on `stderr` unless a `tracing` subscriber takes the
//! warning.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::sync::{Mutex, PoisonError};

use hooks_core::{HookId, HookInfo, HookOrigin, HookRegistry, InterceptionPoint, ToolNameSkeleton};

/// Which filter of a hook names something absent.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::{PRE_STEP, StepContext};
/// use crew_runtime::FilterKind;
///
/// let writer = Agent::builder("Writer").build();
/// let crew = Crew::builder()
///     .agent(writer.clone())
///     .task(Task::builder("Write").agent(&writer).build())
///     // A role the crew does not have: the hook would never run.
///     .hook_with(PRE_STEP, HookOptions::new().name("review").agents(["Editor"]), |_: &mut StepContext| {})
///     .global_registry(Arc::new(HookRegistry::new()))
///     .build()?;
/// let warnings = crew.check_hook_filters();
/// assert_eq!(warnings[0].filter, FilterKind::Agents);
/// assert_eq!(warnings[0].name, "Editor");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterKind {
    /// The `tools = [...]` filter.
    Tools,
    /// The `agents = [...]` filter.
    Agents,
}

/// What a hook's filter entries were checked against.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::FilterScope;
///
/// let search = Tool::dynamic("web_search", "Searches", json!({"type": "object"}), |_| {
///     Ok::<_, String>(json!("results"))
/// });
/// let researcher = Agent::builder("Researcher").tool(search).build();
/// let crew = Crew::builder()
///     .agent(researcher.clone())
///     .task(Task::builder("Research").agent(&researcher).build())
///     // A hook of this crew only, filtering on a tool it does not have.
///     .hook_with(PRE_TOOL_CALL, HookOptions::new().name("mail-guard").tools(["send_email"]), |_: &mut ToolCallHookContext| {})
///     .global_registry(Arc::new(HookRegistry::new()))
///     .build()?;
/// let warnings = crew.check_hook_filters();
/// assert_eq!(warnings[0].scope, FilterScope::Crew);
/// assert_eq!(warnings[0].present, ["web_search"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterScope {
    /// A hook of the global registry: checked against every crew built on
    /// that registry so far.
    AllCrews,
    /// A hook of one crew: checked against that crew.
    Crew,
}

/// A hook filter entry that names no tool (or role) the hook can meet: the
/// hook never runs for that name.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::{FilterKind, FilterScope};
///
/// let hooks = Arc::new(HookRegistry::new());
/// hooks.register_hook_with(
///     PRE_TOOL_CALL,
///     HookOptions::new().name("audit").tools(["web_serch"]),
///     |_: &mut ToolCallHookContext| {},
/// )?;
/// let search = Tool::dynamic("web_search", "Searches", json!({"type": "object"}), |_| {
///     Ok::<_, String>(json!("results"))
/// });
/// let researcher = Agent::builder("Researcher").tool(search).build();
/// let crew = Crew::builder()
///     .agent(researcher.clone())
///     .task(Task::builder("Research").agent(&researcher).build())
///     .global_registry(hooks)
///     .build()?;
///
/// let warnings = crew.check_hook_filters();
/// assert_eq!(warnings[0].filter, FilterKind::Tools);
/// assert_eq!(warnings[0].scope, FilterScope::AllCrews);
/// assert_eq!(warnings[0].name, "web_serch");
/// assert_eq!(warnings[0].suggestion.as_deref(), Some("web_search"));
/// assert!(warnings[0].to_string().contains("did you mean `web_search`?"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterWarning {
    /// The crew whose check found it.
    pub crew: String,
    /// The hook.
    pub hook: HookInfo,
    /// The filter the entry belongs to.
    pub filter: FilterKind,
    /// The entry that names nothing known (a normalized tool name, or a
    /// role).
    pub name: String,
    /// The closest known name, when one is close enough to be what was
    /// meant.
    pub suggestion: Option<String>,
    /// What the entry was checked against.
    pub scope: FilterScope,
    /// The known tool names (or roles), sorted.
    pub present: Vec<String>,
}

/// How many known names a warning lists before it says how many more.
const LISTED_NAMES: usize = 12;

impl fmt::Display for FilterWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, names) = match self.filter {
            FilterKind::Tools => ("tool", "tools"),
            FilterKind::Agents => ("role", "roles"),
        };
        write!(
            f,
            "hook `{}` ({}, {}) filters on {what} `{}`, which ",
            self.hook.name, self.hook.point, self.hook.origin, self.name
        )?;
        match self.scope {
            FilterScope::AllCrews => f.write_str("no crew built so far has")?,
            FilterScope::Crew => write!(f, "crew `{}` does not have", self.crew)?,
        }
        f.write_str(", so the hook never runs for it")?;
        if let Some(suggestion) = &self.suggestion {
            write!(f, "; did you mean `{suggestion}`?")?;
        }
        match self.scope {
            FilterScope::AllCrews => write!(f, " (the crews' {names}: ")?,
            FilterScope::Crew => write!(f, " (the crew's {names}: ")?,
        }
        if self.present.is_empty() {
            f.write_str("none")?;
        }
        for (position, name) in self.present.iter().take(LISTED_NAMES).enumerate() {
            if position > 0 {
                f.write_str(", ")?;
            }
            f.write_str(name)?;
        }
        if self.present.len() > LISTED_NAMES {
            write!(f, " and {} more", self.present.len() - LISTED_NAMES)?;
        }
        f.write_str(")")?;
        let runtime_hook = !matches!(self.hook.origin, HookOrigin::LinkTime { .. });
        if self.scope == FilterScope::AllCrews && runtime_hook {
            f.write_str(
                ". If a crew built later has it, register the hook with \
                 HookOptions::new().unchecked_filters()",
            )?;
        }
        Ok(())
    }
}

/// The tool names and roles hooks can meet.
#[derive(Debug, Clone, Default)]
pub(crate) struct KnownNames {
    pub(crate) tools: BTreeSet<String>,
    pub(crate) roles: BTreeSet<String>,
}

/// The warnings for the filters of every hook of `registry` (a crew's
/// check, `crew` naming it) against `known`.
pub(crate) fn check_filters(
    crew: &str,
    registry: &HookRegistry,
    scope: FilterScope,
    known: &KnownNames,
) -> Vec<FilterWarning> {
    let mut warnings = Vec::new();
    for point in InterceptionPoint::ALL {
        for hook in registry.get_hooks(point) {
            if hook.unchecked_filters {
                continue;
            }
            for (filter, entries, present) in [
                (FilterKind::Tools, &hook.tools, &known.tools),
                (FilterKind::Agents, &hook.agents, &known.roles),
            ] {
                let filter_matches = entries.iter().any(|e| present.contains(e));
                for entry in entries.iter().filter(|e| !present.contains(*e)) {
                    let suggestion = closest(entry, present);
                    // An odd name in a filter that matches elsewhere is
                    // deliberate unless it looks like a typo of a known name.
                    if filter_matches && suggestion.is_none() {
                        continue;
                    }
                    warnings.push(FilterWarning {
                        crew: crew.to_owned(),
                        hook: hook.clone(),
                        filter,
                        name: entry.clone(),
                        suggestion,
                        scope,
                        present: present.iter().cloned().collect(),
                    });
                }
            }
        }
    }
    warnings
}

/// The known name closest to `entry`, if it is close enough to be what
/// was meant: one that looks like it (the same UTS #39 skeleton,
/// `de1ete_file` for `delete_file`), or one at most a third of the longer
/// name's characters edited (at least one: two edits from names of six
/// characters, `x_delete_file` or `delete_files` for `delete_file`),
/// letter case aside (roles match case-sensitively, so `researcher` for
/// `Researcher` is a typo too).
pub(crate) fn closest(entry: &str, known: &BTreeSet<String>) -> Option<String> {
    let entry_folded = entry.to_lowercase();
    let entry_skeleton = ToolNameSkeleton::of(entry);
    known
        .iter()
        .map(|name| {
            let distance = if ToolNameSkeleton::of(name).looks_like(&entry_skeleton) {
                0
            } else {
                strsim::damerau_levenshtein(&entry_folded, &name.to_lowercase())
            };
            (distance, name)
        })
        .filter(|(distance, name)| {
            let longer = entry.chars().count().max(name.chars().count());
            *distance <= (longer / 3).max(1)
        })
        // The first of the closest, in sorted order: deterministic.
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name.clone())
}

/// The line and column (from 1, in characters) of byte `offset` of
/// `source` (an offset past the end counts as the end): where a policy or
/// budgets file's parser stopped.
#[cfg_attr(
    not(any(feature = "policy", feature = "budget")),
    allow(dead_code, reason = "read by the policy and budgets loaders")
)]
pub(crate) fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(source.len());
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |at| at + 1);
    (line, before[start..].chars().count() + 1)
}

/// What the crews built on one global registry have, and which of its
/// hooks' entries were already reported. Kept on the registry itself (its
/// extensions), so it goes with the registry.
#[derive(Default)]
struct BuiltOn {
    known: KnownNames,
    reported: HashSet<(HookId, FilterKind, String)>,
}

/// Runs `f` on the record of `registry`, creating it if needed.
fn with_record<T>(registry: &HookRegistry, f: impl FnOnce(&mut BuiltOn) -> T) -> T {
    let record = registry
        .extensions()
        .get_or_insert_with(Mutex::<BuiltOn>::default);
    // The record is only ever extended in one step: a panic elsewhere
    // cannot leave it half-written, so a poisoned lock is taken over.
    let mut record = record.lock().unwrap_or_else(PoisonError::into_inner);
    f(&mut record)
}

/// Records a built crew's tool names and roles under its global registry.
pub(crate) fn record_crew(registry: &HookRegistry, crew: &KnownNames) {
    with_record(registry, |record| {
        record.known.tools.extend(crew.tools.iter().cloned());
        record.known.roles.extend(crew.roles.iter().cloned());
    });
}

/// The tool names and roles of every crew built on `registry` so far.
pub(crate) fn known_on(registry: &HookRegistry) -> KnownNames {
    with_record(registry, |record| record.known.clone())
}

/// The warnings of `warnings` not reported before for `registry`, now
/// marked reported.
pub(crate) fn first_reports(
    registry: &HookRegistry,
    warnings: &[FilterWarning],
) -> Vec<FilterWarning> {
    with_record(registry, |record| {
        warnings
            .iter()
            .filter(|w| {
                record
                    .reported
                    .insert((w.hook.id, w.filter, w.name.clone()))
            })
            .cloned()
            .collect()
    })
}

/// Reports each warning as a `tracing` warning, and on `stderr` when no
/// `tracing` subscriber takes it: a misspelled filter must be seen also in
/// a program that installs no subscriber.
pub(crate) fn report(warnings: &[FilterWarning]) {
    for warning in warnings {
        if !tracing::enabled!(target: "crew_runtime::crew", tracing::Level::WARN) {
            print_warning(&format!("warning: {warning}"));
        }
        tracing::warn!(target: "crew_runtime::crew", crew = %warning.crew, "{warning}");
    }
}

/// One line on `stderr`, held while a human-input prompt has the console
/// paused (as crew output on stdout is). A closed `stderr` is ignored: a
/// warning must never stop a run.
fn print_warning(line: &str) {
    crate::console::eprint_line(line);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_one_letter_typo_suggests_the_known_name() {
        let known = names(&["fetch_page", "web_search"]);
        assert_eq!(closest("web_serch", &known).as_deref(), Some("web_search"));
        assert_eq!(closest("fetch_pgae", &known).as_deref(), Some("fetch_page"));
    }

    #[test]
    fn a_role_in_the_wrong_case_suggests_the_role() {
        let known = names(&["Researcher", "Writer"]);
        assert_eq!(closest("researcher", &known).as_deref(), Some("Researcher"));
        assert_eq!(closest("Reseacher", &known).as_deref(), Some("Researcher"));
    }

    #[test]
    fn an_unrelated_name_suggests_nothing() {
        let known = names(&["read_file", "web_search"]);
        assert_eq!(closest("write_file", &known), None);
        assert_eq!(closest("drop_table", &known), None);
        assert_eq!(closest("rm", &names(&["ls"])), None);
        assert_eq!(closest("anything", &BTreeSet::new()), None);
    }
}
