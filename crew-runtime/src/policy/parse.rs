//! Reading a policy set: limits checked before the engine's recursive
//! parser sees the text, parsing on a thread with a large stack, and what
//! we keep of each policy.

use std::str::FromStr;

use cedar_policy::{Effect, Policy, PolicyId, PolicySet};
use miette::Diagnostic;
use serde_json::Value;

use super::{PolicyError, PolicyProblem};

/// The longest policy text accepted, in bytes: 1 MiB.
///
/// ```
/// use crew_runtime::policy::{MAX_POLICY_BYTES, Policies};
///
/// let huge = "// padding\n".repeat(MAX_POLICY_BYTES / 8);
/// assert!(Policies::from_text(&huge).is_err());
/// ```
pub const MAX_POLICY_BYTES: usize = 1 << 20;

/// The deepest nesting of brackets in a policy text: 32. Deeper text
/// could overflow the stack of the engine's parser or evaluator.
///
/// ```
/// use crew_runtime::policy::{MAX_POLICY_NESTING, Policies};
///
/// let deep = |levels: usize| {
///     format!("permit(principal, action, resource) when {{ {}true{} }};", "(".repeat(levels), ")".repeat(levels))
/// };
/// // The `when { .. }` braces and the scope's parentheses count too.
/// assert!(Policies::from_text(&deep(MAX_POLICY_NESTING - 2)).is_ok());
/// assert!(Policies::from_text(&deep(MAX_POLICY_NESTING)).is_err());
/// ```
pub const MAX_POLICY_NESTING: usize = 32;

/// The most operator characters in one policy: 512. A longer chain of
/// operators makes an expression deep enough to overflow the stack of
/// the engine's evaluator.
///
/// ```
/// use crew_runtime::policy::{MAX_POLICY_OPERATORS, Policies};
///
/// let chain = format!("permit(principal, action, resource) when {{ {}true }};", "true && ".repeat(MAX_POLICY_OPERATORS));
/// assert!(Policies::from_text(&chain).is_err());
/// ```
pub const MAX_POLICY_OPERATORS: usize = 512;

/// The stack of the thread that parses and validates: the engine's
/// parser recurses per level of the text, deeply in a debug build.
const PARSE_STACK_BYTES: usize = 64 << 20;

/// One policy of a set, as the checks and decisions need it.
#[derive(Debug, Clone)]
pub(crate) struct ParsedPolicy {
    /// `@id`, else the engine's id (`policy0`, …).
    pub(crate) id: String,
    pub(crate) engine_id: PolicyId,
    pub(crate) policy: Policy,
    pub(crate) effect: Effect,
    pub(crate) reason: Option<String>,
    pub(crate) ask: Option<String>,
    /// The policy's place in the text: its byte offset and its text.
    pub(crate) offset: usize,
    pub(crate) text: String,
    /// The policy as the engine's JSON form, for our checks.
    pub(crate) json: Value,
}

/// A parsed policy set, its policies in text order.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    pub(crate) source: String,
    pub(crate) policies: Vec<ParsedPolicy>,
}

/// Parses `text` within the limits, on a thread with a stack large
/// enough for the engine.
pub(crate) fn parse(text: &str) -> Result<Parsed, PolicyError> {
    if text.len() > MAX_POLICY_BYTES {
        return Err(PolicyError::TooLarge {
            bytes: text.len(),
            limit: MAX_POLICY_BYTES,
        });
    }
    check_shape(text)?;
    let source = text.to_owned();
    let parsing = std::thread::Builder::new()
        .name("policy-parse".to_owned())
        .stack_size(PARSE_STACK_BYTES)
        .spawn(move || parse_here(source));
    match parsing {
        Ok(thread) => thread.join().unwrap_or_else(|_| {
            Err(PolicyError::Invalid {
                problems: vec![PolicyProblem::general(
                    "the policy engine failed while reading the text",
                )],
            })
        }),
        Err(error) => Err(PolicyError::Invalid {
            problems: vec![PolicyProblem::general(format!(
                "no thread could be started to read the policies: {error}"
            ))],
        }),
    }
}

/// Runs `work` on a thread with the parser's stack (validation recurses
/// like parsing).
pub(crate) fn on_large_stack<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, PolicyError> {
    std::thread::Builder::new()
        .name("policy-check".to_owned())
        .stack_size(PARSE_STACK_BYTES)
        .spawn(work)
        .map_err(|error| PolicyError::Invalid {
            problems: vec![PolicyProblem::general(format!(
                "no thread could be started to check the policies: {error}"
            ))],
        })?
        .join()
        .map_err(|_| PolicyError::Invalid {
            problems: vec![PolicyProblem::general(
                "the policy engine failed while checking the policies",
            )],
        })
}

fn parse_here(source: String) -> Result<Parsed, PolicyError> {
    let set = PolicySet::from_str(&source).map_err(|errors| PolicyError::Invalid {
        problems: errors
            .iter()
            .map(|error| {
                let offset = first_offset(error);
                PolicyProblem::at(&source, None, offset, error.to_string())
            })
            .collect(),
    })?;
    if set.templates().next().is_some() {
        return Err(PolicyError::Invalid {
            problems: vec![PolicyProblem::general(
                "templates (policies with `?principal` or `?resource`) are not supported",
            )],
        });
    }
    let mut policies: Vec<&Policy> = set.policies().collect();
    // The engine numbers the policies of a text in order: `policy0`, …
    policies.sort_by_key(|policy| engine_position(policy.id()));
    let mut parsed = Vec::with_capacity(policies.len());
    let mut searched_from = 0;
    let mut problems = Vec::new();
    for policy in policies {
        let text = policy.to_cedar().unwrap_or_default();
        let offset = source[searched_from..]
            .find(text.as_str())
            .map_or(searched_from, |at| searched_from + at);
        searched_from = offset + text.len();
        let id = match policy.annotation("id") {
            Some(id) if id.trim().is_empty() => {
                problems.push(PolicyProblem::at(
                    &source,
                    Some(policy.id().to_string()),
                    Some(offset),
                    "`@id` is empty".to_owned(),
                ));
                policy.id().to_string()
            }
            Some(id) => id.to_owned(),
            None => policy.id().to_string(),
        };
        if parsed.iter().any(|other: &ParsedPolicy| other.id == id) {
            problems.push(PolicyProblem::at(
                &source,
                Some(id.clone()),
                Some(offset),
                format!("another policy has the id `{id}`"),
            ));
        }
        let json = policy.to_json().map_err(|error| PolicyError::Invalid {
            problems: vec![PolicyProblem::at(
                &source,
                Some(id.clone()),
                Some(offset),
                error.to_string(),
            )],
        })?;
        parsed.push(ParsedPolicy {
            id,
            engine_id: policy.id().clone(),
            policy: policy.clone(),
            effect: policy.effect(),
            reason: policy.annotation("reason").map(str::to_owned),
            ask: policy.annotation("ask").map(str::to_owned),
            offset,
            text,
            json,
        });
    }
    if !problems.is_empty() {
        return Err(PolicyError::Invalid { problems });
    }
    if parsed.is_empty() {
        return Err(PolicyError::Empty);
    }
    for policy in &parsed {
        if policy.ask.is_some() && policy.effect == Effect::Forbid {
            problems.push(PolicyProblem::at(
                &source,
                Some(policy.id.clone()),
                Some(policy.offset),
                "`@ask` is for permits: a forbid never asks".to_owned(),
            ));
        }
    }
    if !problems.is_empty() {
        return Err(PolicyError::Invalid { problems });
    }
    Ok(Parsed {
        source,
        policies: parsed,
    })
}

fn engine_position(id: &PolicyId) -> usize {
    id.to_string()
        .strip_prefix("policy")
        .and_then(|number| number.parse().ok())
        .unwrap_or(usize::MAX)
}

/// The offset of a diagnostic's first label, if it has one.
pub(crate) fn first_offset(diagnostic: &dyn Diagnostic) -> Option<usize> {
    diagnostic
        .labels()
        .and_then(|mut labels| labels.next())
        .map(|label| label.offset())
}

/// Refuses text the engine could not read without risk: brackets nested
/// deeper than [`MAX_POLICY_NESTING`], or a policy with more than
/// [`MAX_POLICY_OPERATORS`] operator characters. Strings and comments are
/// skipped.
fn check_shape(text: &str) -> Result<(), PolicyError> {
    let mut depth = 0usize;
    let mut operators = 0usize;
    let mut chars = text.char_indices().peekable();
    let refuse = |offset: usize, message: String| PolicyError::Invalid {
        problems: vec![PolicyProblem::at(text, None, Some(offset), message)],
    };
    while let Some((offset, c)) = chars.next() {
        match c {
            '"' => {
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '/' if chars.peek().is_some_and(|(_, next)| *next == '/') => {
                for (_, c) in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_POLICY_NESTING {
                    return Err(refuse(
                        offset,
                        format!("brackets are nested more than {MAX_POLICY_NESTING} deep"),
                    ));
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            ';' if depth == 0 => operators = 0,
            '&' | '|' | '+' | '-' | '*' | '.' | '!' | '<' | '>' | '=' => {
                operators += 1;
                if operators > MAX_POLICY_OPERATORS {
                    return Err(refuse(
                        offset,
                        format!("a policy has more than {MAX_POLICY_OPERATORS} operators"),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_keep_their_ids_annotations_and_places() {
        let text = "@id(\"a\")\n@reason(\"no\")\nforbid(principal, action, resource);\n\
                    permit(principal, action, resource);";
        let parsed = parse(text).expect("two policies");
        let ids: Vec<&str> = parsed.policies.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["a", "policy1"]);
        assert_eq!(parsed.policies[0].reason.as_deref(), Some("no"));
        assert_eq!(
            parsed.policies[1].offset,
            text.find("permit").expect("there")
        );
    }

    #[test]
    fn deep_nesting_is_refused_before_the_engine_reads_it() {
        let text = format!(
            "permit(principal, action, resource) when {{ {}true{} }};",
            "(".repeat(2000),
            ")".repeat(2000)
        );
        let error = parse(&text).expect_err("too deep");
        assert!(
            error.to_string().contains("nested more than 32 deep"),
            "{error}"
        );
        // Inside a string, brackets are text.
        let text = format!(
            "permit(principal, action, resource) when {{ context.task == \"{}\" }};",
            "(".repeat(100)
        );
        assert!(parse(&text).is_ok());
    }

    #[test]
    fn long_operator_chains_are_refused() {
        let text = format!(
            "permit(principal, action, resource) when {{ {}true }};",
            "true && ".repeat(10_000)
        );
        let error = parse(&text).expect_err("too long a chain");
        assert!(
            error.to_string().contains("more than 512 operators"),
            "{error}"
        );
    }
}
