//! Checking a policy set against a crew's tools: the names the engine's
//! validator does not know (which `Tool::"…"` and `Action::"…"` ids exist,
//! which arguments a policy reads or tests with `has`), then the engine's
//! own type checks, every problem with its policy, line and column.

use std::collections::{BTreeMap, BTreeSet};

use cedar_policy::{Schema, ValidationMode, Validator};
use miette::Diagnostic;
use serde_json::Value;

use super::PolicyProblem;
use super::parse::{Parsed, ParsedPolicy, first_offset};
use super::schema::{ArgType, Field, ToolShape};
use crate::check::closest;

/// Every problem of `parsed` against the crew's `tools` and `schema`.
pub(crate) fn check(
    parsed: &Parsed,
    tools: &BTreeMap<String, ToolShape>,
    schema: &Schema,
) -> Vec<PolicyProblem> {
    let names: BTreeSet<String> = tools.keys().cloned().collect();
    let mut problems = Vec::new();
    let mut named_wrong = std::collections::HashSet::new();
    for policy in &parsed.policies {
        let before = problems.len();
        check_names(parsed, policy, tools, &names, &mut problems);
        if problems.len() > before {
            named_wrong.insert(policy.engine_id.clone());
        }
    }
    let set = cedar_policy::PolicySet::from_policies(
        parsed
            .policies
            .iter()
            .filter(|policy| !named_wrong.contains(&policy.engine_id))
            .map(|policy| policy.policy.clone()),
    );
    match set {
        Ok(set) => {
            let result = Validator::new(schema.clone()).validate(&set, ValidationMode::Strict);
            for error in result.validation_errors() {
                let id = parsed
                    .policies
                    .iter()
                    .find(|policy| &policy.engine_id == error.policy_id())
                    .map(|policy| policy.id.clone());
                let mut message = error
                    .to_string()
                    .replace(&format!("for policy `{}`, ", error.policy_id()), "");
                if let Some(snippet) =
                    first_span(error).and_then(|(at, len)| parsed.source.get(at..at + len))
                {
                    message = format!("in `{snippet}`: {message}");
                }
                if let Some(help) = error.help() {
                    let help = help
                        .to_string()
                        .replace(&format!("for policy `{}`, ", error.policy_id()), "");
                    message = format!("{message} ({help})");
                }
                problems.push(PolicyProblem::at(
                    &parsed.source,
                    id,
                    first_offset(error),
                    message,
                ));
            }
        }
        Err(error) => problems.push(PolicyProblem::general(error.to_string())),
    }
    problems.sort_by_key(|problem| (problem.line, problem.column));
    problems
}

/// `parsed` without the policies that name a tool (in `Action::` or
/// `Tool::`) the crew lacks: what a set registered for every crew holds
/// for one crew.
pub(crate) fn without_policies_on_unknown_tools(
    parsed: &Parsed,
    tools: &BTreeMap<String, ToolShape>,
) -> Parsed {
    let policies = parsed
        .policies
        .iter()
        .filter(|policy| {
            let mut found = Found::default();
            walk(&policy.json, &mut found);
            found
                .entities
                .iter()
                .all(|(kind, id)| (kind != "Tool" && kind != "Action") || tools.contains_key(id))
        })
        .cloned()
        .collect();
    Parsed {
        source: parsed.source.clone(),
        policies,
    }
}

/// The tools and arguments a policy names, against what the crew has.
fn check_names(
    parsed: &Parsed,
    policy: &ParsedPolicy,
    tools: &BTreeMap<String, ToolShape>,
    names: &BTreeSet<String>,
    problems: &mut Vec<PolicyProblem>,
) {
    let mut found = Found::default();
    walk(&policy.json, &mut found);
    tool_problems(
        parsed,
        policy,
        &found,
        names,
        "no tool of this crew",
        problems,
    );
    // The arguments a policy may read: those of the tools its action
    // scope names (every tool when it names none).
    let scoped: Vec<&ToolShape> = match &found.actions {
        Some(actions) => actions.iter().filter_map(|name| tools.get(name)).collect(),
        None => tools.values().collect(),
    };
    let known_args: BTreeSet<String> = scoped
        .iter()
        .flat_map(|tool| tool.args.keys().cloned())
        .collect();
    for arg in &found.args {
        // An argument the tool has but policies cannot read: say so, not
        // that there is no such argument.
        let hidden = scoped.iter().find_map(|tool| match tool.args.get(arg) {
            Some(Field {
                ty: ArgType::Hidden(why),
                ..
            }) => Some(*why),
            _ => None,
        });
        if let Some(why) = hidden {
            let at = locate_attribute(&policy.text, arg).map(|at| policy.offset + at);
            problems.push(PolicyProblem::at(
                &parsed.source,
                Some(policy.id.clone()),
                at.or(Some(policy.offset)),
                format!("`context.args.{arg}`: {}", why.reason(arg)),
            ));
            continue;
        }
        if known_args.contains(arg) {
            continue;
        }
        let whose = match &found.actions {
            Some(actions) if actions.len() == 1 => format!("`{}`", actions[0]),
            Some(_) => "the tools this policy names".to_owned(),
            None => "any tool of this crew".to_owned(),
        };
        let message = match closest(arg, &known_args) {
            Some(near) => format!(
                "`context.args.{arg}`: {whose} takes no argument `{arg}`; did you mean `{near}`?"
            ),
            None => format!("`context.args.{arg}`: {whose} takes no argument `{arg}`"),
        };
        let at = locate_attribute(&policy.text, arg).map(|at| policy.offset + at);
        problems.push(PolicyProblem::at(
            &parsed.source,
            Some(policy.id.clone()),
            at.or(Some(policy.offset)),
            message,
        ));
    }
}

/// A problem for each tool a policy names (in `Action::` or `Tool::`)
/// that is not among `names`, said as "`who` is named …".
fn tool_problems(
    parsed: &Parsed,
    policy: &ParsedPolicy,
    found: &Found,
    names: &BTreeSet<String>,
    who: &str,
    problems: &mut Vec<PolicyProblem>,
) {
    for (kind, id) in &found.entities {
        if (kind == "Tool" || kind == "Action") && !names.contains(id) {
            let message = match closest(id, names) {
                Some(near) => {
                    format!("{who} is named `{id}` (in `{kind}::\"{id}\"`); did you mean `{near}`?")
                }
                None => format!("{who} is named `{id}` (in `{kind}::\"{id}\"`)"),
            };
            let at = locate(&policy.text, &format!("\"{id}\"")).map(|at| policy.offset + at);
            problems.push(PolicyProblem::at(
                &parsed.source,
                Some(policy.id.clone()),
                at.or(Some(policy.offset)),
                message,
            ));
        }
    }
}

/// The tools a set registered for every crew names that no crew built on
/// its registry has (`known`: their tools).
pub(crate) fn tools_no_crew_has(parsed: &Parsed, known: &BTreeSet<String>) -> Vec<PolicyProblem> {
    let mut problems = Vec::new();
    for policy in &parsed.policies {
        let mut found = Found::default();
        walk(&policy.json, &mut found);
        tool_problems(
            parsed,
            policy,
            &found,
            known,
            "no tool of the crews built on this registry",
            &mut problems,
        );
    }
    problems
}

/// What a policy names.
#[derive(Default)]
struct Found {
    /// `(type, id)` of every entity literal, in order.
    entities: Vec<(String, String)>,
    /// The action ids of the scope, `None` when the scope names none.
    actions: Option<Vec<String>>,
    /// The arguments read (`context.args.x`) or tested (`context.args has x`).
    args: BTreeSet<String>,
}

/// Walks the engine's JSON form of one policy without recursion (its
/// depth is bounded by the parse limits, but the walk needs no stack).
fn walk(policy: &Value, found: &mut Found) {
    if let Some(action) = policy.get("action") {
        let mut actions = Vec::new();
        if let Some(entity) = action.get("entity") {
            actions.extend(entity_id(entity, "Action"));
        }
        if let Some(Value::Array(entities)) = action.get("entities") {
            actions.extend(entities.iter().filter_map(|e| entity_id(e, "Action")));
        }
        if action.get("op").and_then(Value::as_str) != Some("All") {
            found.actions = Some(actions);
        }
    }
    let mut stack: Vec<&Value> = vec![policy];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                if let (Some(Value::String(kind)), Some(Value::String(id))) =
                    (map.get("type"), map.get("id"))
                {
                    found.entities.push((kind.clone(), id.clone()));
                }
                if let Some(Value::Object(entity)) = map.get("__entity")
                    && let (Some(Value::String(kind)), Some(Value::String(id))) =
                        (entity.get("type"), entity.get("id"))
                {
                    found.entities.push((kind.clone(), id.clone()));
                }
                for key in [".", "has"] {
                    if let Some(access) = map.get(key)
                        && is_context_args(access.get("left"))
                        && let Some(Value::String(attr)) = access.get("attr")
                    {
                        found.args.insert(attr.clone());
                    }
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    found.entities.dedup();
}

fn entity_id(entity: &Value, kind: &str) -> Option<String> {
    (entity.get("type").and_then(Value::as_str) == Some(kind))
        .then(|| entity.get("id").and_then(Value::as_str).map(str::to_owned))
        .flatten()
}

/// Whether `value` is the expression `context.args`.
fn is_context_args(value: Option<&Value>) -> bool {
    let Some(access) = value.and_then(|v| v.get(".")) else {
        return false;
    };
    access.get("attr").and_then(Value::as_str) == Some("args")
        && access
            .get("left")
            .and_then(|left| left.get("Var"))
            .and_then(Value::as_str)
            == Some("context")
}

/// The offset and length of a diagnostic's first label (one line at most).
fn first_span(diagnostic: &dyn Diagnostic) -> Option<(usize, usize)> {
    let label = diagnostic.labels()?.next()?;
    (!label.is_empty() && label.len() <= 200).then_some((label.offset(), label.len()))
}

fn locate(text: &str, needle: &str) -> Option<usize> {
    text.find(needle)
}

/// Where a policy's text reads or tests the argument `name`.
fn locate_attribute(text: &str, unescaped: &str) -> Option<usize> {
    let name = unescaped;
    let name = regex::escape(name);
    let pattern = format!(r#"(?:\.\s*|\bhas\s+){name}\b|\[\s*"{name}"\s*\]"#);
    let found = regex::Regex::new(&pattern).ok()?.find(text)?;
    let start = found.start();
    Some(start + found.as_str().find(unescaped).unwrap_or(0))
}
