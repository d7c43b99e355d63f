//! A policy set compiled for one crew: indexed by tool, so a call is
//! decided by the policies that could apply to its tool only.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::str::FromStr;
use std::sync::Arc;

use cedar_policy::{
    ActionConstraint, Authorizer, Context, Decision, Effect, Entities, Entity, EntityId,
    EntityTypeName, EntityUid, PolicySet, PrincipalConstraint, Request, ResourceConstraint,
    RestrictedExpression,
};
use serde_json::{Map, Value};

use super::parse::{Parsed, ParsedPolicy};
use super::schema::{Fields, ToolShape, typed_args};

/// The policies of one set, compiled for one crew's tools.
#[derive(Debug)]
pub(crate) struct Compiled {
    /// Every policy in text order.
    pub(crate) policies: Vec<ParsedPolicy>,
    /// What a question asked about a call of each tool keeps of the set
    /// (its text, the tool's server), under default deny and default
    /// allow: made once here, shared by every call.
    asked_under: HashMap<String, [Arc<hooks_core::AskedUnder>; 2]>,
    tools: HashMap<String, ToolPolicies>,
    authorizer: Authorizer,
    /// `Agent`, parsed once: the engine's name parser is slow.
    agent_type: EntityTypeName,
}

#[derive(Debug)]
struct ToolPolicies {
    /// The policies whose action scope can name this tool, as one set.
    set: PolicySet,
    /// Their positions in `Compiled::policies`, by engine id.
    positions: HashMap<cedar_policy::PolicyId, usize>,
    action: EntityUid,
    resource: Entity,
    args: Fields,
    /// Who a permit could ever let call the tool: `None` for any agent,
    /// else the roles the permits' scopes name.
    permitted: Option<HashSet<String>>,
}

/// What the policies say about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Permitted (or no forbid, under default allow); `ask` holds the
    /// question and the id of the first `@ask` permit that applied.
    Allow {
        policies: Vec<String>,
        ask: Option<(String, String)>,
    },
    /// Denied: the policy that decided (`None` under default deny, or for
    /// arguments that do not fit) and why.
    Deny {
        policies: Vec<String>,
        source: String,
        reason: String,
    },
}

/// Who makes a call and what it is, as the policies see it.
pub(crate) struct Call<'a> {
    pub(crate) tool: &'a str,
    pub(crate) role: &'a str,
    pub(crate) crew: &'a str,
    pub(crate) user: Option<&'a str>,
    pub(crate) args: &'a Map<String, Value>,
    pub(crate) call_id: &'a str,
    pub(crate) task: &'a str,
    pub(crate) iteration: usize,
}

/// The language a policy set's [`AskedUnder`](hooks_core::AskedUnder) names.
pub(crate) const LANGUAGE: &str = "cedar";

/// What a question about a call of a tool on `server` keeps of the set
/// `source` for the check of an edit: the text, and the facts of the call
/// the question lacks. The model turn is not kept: the check takes the
/// first, and the crew's hooks decide the call with its real turn when it
/// runs.
fn keep_for_questions(
    source: &Arc<str>,
    server: &str,
    default_allow: bool,
) -> hooks_core::AskedUnder {
    hooks_core::AskedUnder::new(
        LANGUAGE,
        Arc::clone(source),
        serde_json::json!({
            "default_allow": default_allow,
            "server": server,
        }),
    )
}

/// The source of a denial no policy decided.
pub(crate) const DEFAULT_DENY_SOURCE: &str = "default-deny";

impl Compiled {
    pub(crate) fn new(
        parsed: &Parsed,
        tools: &BTreeMap<String, ToolShape>,
    ) -> Result<Self, String> {
        let mut compiled = HashMap::with_capacity(tools.len());
        for tool in tools.values() {
            let action = uid("Action", &tool.name)?;
            let mut chosen = Vec::new();
            let mut positions = HashMap::new();
            for (position, policy) in parsed.policies.iter().enumerate() {
                let applies = match policy.policy.action_constraint() {
                    ActionConstraint::Any => true,
                    ActionConstraint::Eq(named) => named == action,
                    ActionConstraint::In(named) => named.contains(&action),
                };
                if applies {
                    positions.insert(policy.engine_id.clone(), position);
                    chosen.push(policy.policy.clone());
                }
            }
            let resource_uid = uid("Tool", &tool.name)?;
            let mut permitted = Some(HashSet::new());
            for policy in &chosen {
                if policy.effect() != Effect::Permit {
                    continue;
                }
                let reaches_tool = match policy.resource_constraint() {
                    ResourceConstraint::Eq(named) => named == resource_uid,
                    _ => true,
                };
                if !reaches_tool {
                    continue;
                }
                match (policy.principal_constraint(), permitted.as_mut()) {
                    (PrincipalConstraint::Eq(named), Some(roles)) => {
                        roles.insert(named.id().unescaped().to_owned());
                    }
                    (PrincipalConstraint::Eq(_), None) => {}
                    _ => permitted = None,
                }
            }
            let set = PolicySet::from_policies(chosen).map_err(|error| error.to_string())?;
            let resource = Entity::new(
                uid("Tool", &tool.name)?,
                HashMap::from([
                    (
                        "server".to_owned(),
                        RestrictedExpression::new_string(tool.server.clone()),
                    ),
                    (
                        "capabilities".to_owned(),
                        RestrictedExpression::new_set(
                            tool.capabilities
                                .iter()
                                .map(|c| RestrictedExpression::new_string((*c).to_owned())),
                        ),
                    ),
                ]),
                HashSet::new(),
            )
            .map_err(|error| error.to_string())?;
            compiled.insert(
                tool.name.clone(),
                ToolPolicies {
                    set,
                    positions,
                    action,
                    resource,
                    args: tool.args.clone(),
                    permitted,
                },
            );
        }
        let source: Arc<str> = Arc::from(parsed.source.as_str());
        let asked_under = tools
            .values()
            .map(|tool| {
                let under = |default_allow| {
                    Arc::new(keep_for_questions(&source, &tool.server, default_allow))
                };
                (tool.name.clone(), [under(false), under(true)])
            })
            .collect();
        Ok(Compiled {
            policies: parsed.policies.clone(),
            asked_under,
            tools: compiled,
            authorizer: Authorizer::new(),
            agent_type: EntityTypeName::from_str("Agent").map_err(|error| error.to_string())?,
        })
    }

    /// What a question about a call of `tool` keeps of the set.
    pub(crate) fn asked_under(
        &self,
        tool: &str,
        default_allow: bool,
    ) -> Option<&Arc<hooks_core::AskedUnder>> {
        self.asked_under
            .get(tool)
            .map(|both| &both[usize::from(default_allow)])
    }

    /// Whether some permit could ever let `role` call `tool`: its scope
    /// names that role (or any agent) and that tool (or any).
    pub(crate) fn could_permit(&self, tool: &str, role: &str) -> bool {
        self.tools
            .get(tool)
            .is_some_and(|entry| match &entry.permitted {
                None => true,
                Some(roles) => roles.contains(role),
            })
    }

    /// The ids of the policies that could decide a call of `tool`, in text
    /// order.
    pub(crate) fn deciding(&self, tool: &str, role: Option<&str>) -> Vec<String> {
        let Some(entry) = self.tools.get(tool) else {
            return Vec::new();
        };
        let principal = role.map(|role| self.agent(role));
        let mut positions: Vec<usize> = entry
            .positions
            .values()
            .copied()
            .filter(|position| {
                let policy = &self.policies[*position].policy;
                match (policy.principal_constraint(), &principal) {
                    (PrincipalConstraint::Eq(named), Some(principal)) => named == *principal,
                    _ => true,
                }
            })
            .collect();
        positions.sort_unstable();
        positions
            .into_iter()
            .map(|position| self.policies[position].id.clone())
            .collect()
    }

    /// Decides one call. `None` for a tool the crew does not have (the
    /// runtime reports it as not found).
    pub(crate) fn decide(&self, call: &Call<'_>, default_allow: bool) -> Option<Verdict> {
        let entry = self.tools.get(call.tool)?;
        let deny = |source: &str, reason: String, policies: Vec<String>| Verdict::Deny {
            policies,
            source: source.to_owned(),
            reason,
        };
        let args = match typed_args(&entry.args, call.args) {
            Ok(args) => args,
            Err(mismatch) => {
                return Some(deny(
                    "arguments",
                    format!("{} ({} does not fit its schema)", mismatch.0, call.tool),
                    Vec::new(),
                ));
            }
        };
        let request = match self.request(entry, call, args) {
            Ok(request) => request,
            Err(reason) => return Some(deny("arguments", reason, Vec::new())),
        };
        let (request, entities) = request;
        let response = self
            .authorizer
            .is_authorized(&request, &entry.set, &entities);
        let diagnostics = response.diagnostics();
        // A policy that errors denies the whole call (the engine would
        // skip it).
        if let Some(error) = diagnostics.errors().next() {
            let cedar_policy::AuthorizationError::PolicyEvaluationError(failed) = error;
            let id = self.named(entry, failed.policy_id());
            return Some(deny(
                &id,
                format!("policy {id} could not be evaluated: {error}"),
                vec![id.clone()],
            ));
        }
        let mut deciding: Vec<usize> = diagnostics
            .reason()
            .filter_map(|id| entry.positions.get(id).copied())
            .collect();
        deciding.sort_unstable();
        let ids: Vec<String> = deciding
            .iter()
            .map(|position| self.policies[*position].id.clone())
            .collect();
        Some(match response.decision() {
            Decision::Deny if deciding.is_empty() && default_allow => Verdict::Allow {
                policies: ids,
                ask: None,
            },
            Decision::Deny => match deciding.first() {
                Some(position) => {
                    let policy = &self.policies[*position];
                    let reason = policy
                        .reason
                        .clone()
                        .unwrap_or_else(|| format!("denied by policy {}", policy.id));
                    deny(&policy.id, reason, ids)
                }
                None => deny(
                    DEFAULT_DENY_SOURCE,
                    format!("no policy permits {}", call.tool),
                    ids,
                ),
            },
            Decision::Allow => {
                let ask = deciding
                    .iter()
                    .map(|position| &self.policies[*position])
                    .find_map(|policy| {
                        policy
                            .ask
                            .as_ref()
                            .map(|why| (why.clone(), policy.id.clone()))
                    });
                Verdict::Allow { policies: ids, ask }
            }
        })
    }

    /// `Agent::"role"`.
    fn agent(&self, role: &str) -> EntityUid {
        EntityUid::from_type_name_and_id(self.agent_type.clone(), EntityId::new(role))
    }

    fn named(&self, entry: &ToolPolicies, id: &cedar_policy::PolicyId) -> String {
        entry
            .positions
            .get(id)
            .map_or_else(|| id.to_string(), |p| self.policies[*p].id.clone())
    }

    fn request(
        &self,
        entry: &ToolPolicies,
        call: &Call<'_>,
        args: RestrictedExpression,
    ) -> Result<(Request, Entities), String> {
        let principal = self.agent(call.role);
        let mut attributes = HashMap::with_capacity(2);
        attributes.insert(
            "crew".to_owned(),
            RestrictedExpression::new_string(call.crew.to_owned()),
        );
        if let Some(user) = call.user {
            attributes.insert(
                "user".to_owned(),
                RestrictedExpression::new_string(user.to_owned()),
            );
        }
        let agent = Entity::new(principal.clone(), attributes, HashSet::new())
            .map_err(|error| error.to_string())?;
        let entities = Entities::from_entities([agent, entry.resource.clone()], None)
            .map_err(|error| error.to_string())?;
        let iteration = i64::try_from(call.iteration).unwrap_or(i64::MAX);
        let context = Context::from_pairs([
            ("args".to_owned(), args),
            (
                "call_id".to_owned(),
                RestrictedExpression::new_string(call.call_id.to_owned()),
            ),
            (
                "task".to_owned(),
                RestrictedExpression::new_string(call.task.to_owned()),
            ),
            (
                "iteration".to_owned(),
                RestrictedExpression::new_long(iteration),
            ),
        ])
        .map_err(|error| error.to_string())?;
        let request = Request::new(
            principal,
            entry.action.clone(),
            entry.resource.uid(),
            context,
            None,
        )
        .map_err(|error| error.to_string())?;
        Ok((request, entities))
    }
}

/// `Type::"id"`.
pub(crate) fn uid(kind: &str, id: &str) -> Result<EntityUid, String> {
    let kind = EntityTypeName::from_str(kind).map_err(|error| error.to_string())?;
    let id = EntityId::from_str(id).map_err(|error| error.to_string())?;
    Ok(EntityUid::from_type_name_and_id(kind, id))
}
