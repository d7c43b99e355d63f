//! The policy integration's side of the crew's extension seam
//! ([`crate::extension`]): the builder's `policies`, the sets attached at
//! a crew's build, and what the crew's run asks of them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use hooks_core::runtime::register_crew_async_hook;
use hooks_core::{HookOptions, HookRegistry, ToolCallHookContext};

use super::{
    Attachment, CrewPolicies, POLICY_HOOK_NAME, Policies, PolicyError, PolicyProblem,
    registered_on, report_once,
};
use crate::check::KnownNames;
use crate::error::{BuildError, IntegrationError};
use crate::extension::{BuildScope, CrewExtension};
use crate::llm::ToolDefinition;
use crate::{Crew, CrewBuilder};

/// The integration's name in its errors: its cargo feature's.
const INTEGRATION: &str = "policy";

impl CrewBuilder {
    /// Gives the crew a policy set: a `PRE_TOOL_CALL` hook of this crew
    /// named [`policies`](crate::policy::POLICY_HOOK_NAME), in the order
    /// it is given among the crew's hooks, that lets each tool call
    /// through, asks a person, or blocks it as the policies decide (see
    /// [`crate::policy`]). The set is checked against the crew's tools at
    /// the build: a policy naming a tool or an argument the crew does not
    /// have, or comparing an argument with the wrong type, fails the
    /// build with [`BuildError::Integration`] (whose
    /// [`downcast_ref`](crate::IntegrationError::downcast_ref) is the
    /// [`PolicyError`]). A reload of the set reaches the crew.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::policy::Policies;
    /// use crew_runtime::prelude::*;
    /// use serde_json::json;
    ///
    /// let search = Tool::dynamic(
    ///     "web_search",
    ///     "Searches the web",
    ///     json!({ "type": "object", "properties": { "query": { "type": "string" } } }),
    ///     |_| Ok::<_, String>(json!("results")),
    /// );
    /// let researcher = Agent::builder("Researcher").tool(search).build();
    /// let build = |text: &str| -> Result<Crew, String> {
    ///     Crew::builder()
    ///         .agent(researcher.clone())
    ///         .task(Task::builder("Research").agent(&researcher).build())
    ///         .global_registry(Arc::new(HookRegistry::new()))
    ///         .policies(Policies::from_text(text).map_err(|e| e.to_string())?)
    ///         .build()
    ///         .map_err(|e| e.to_string())
    /// };
    /// assert!(build(r#"permit(principal, action == Action::"web_search", resource);"#).is_ok());
    /// let error = build(r#"permit(principal, action == Action::"web_serch", resource);"#).unwrap_err();
    /// assert!(error.contains("did you mean `web_search`?"), "{error}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn policies(self, policies: Policies) -> Self {
        self.pending_hook(Box::new(move |scope| {
            let attachment = policies.attach(scope.crew, &scope.tools)?;
            attachment.set_buses(scope.registry, scope.global);
            scope.with_state(|given: &mut GivenSets| given.0.push(Arc::clone(&attachment)));
            let options = HookOptions::new().name(POLICY_HOOK_NAME);
            let hook =
                hooks_core::async_hook::<hooks_core::ToolCallHookContext, _, _>(move |ctx| {
                    let attachment = Arc::clone(&attachment);
                    Box::pin(async move { attachment.check(ctx).await })
                });
            register_crew_async_hook(
                scope.registry,
                hooks_core::PRE_TOOL_CALL,
                scope.crew,
                options,
                hook,
            )?;
            Ok(())
        }))
    }
}

impl Crew {
    /// What the crew's policy sets decide for one concrete call of `tool`
    /// by the agent `role` with `args`: a line per set, naming the policy
    /// that fired (the call's id, task and turn read as empty, empty and
    /// 1). See [`crate::policy`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::policy::Policies;
    /// use crew_runtime::prelude::*;
    ///
    /// let refund = Tool::dynamic(
    ///     "refund",
    ///     "Refunds an order",
    ///     json!({ "type": "object", "properties": { "amount": { "type": "integer" } }, "required": ["amount"] }),
    ///     |_| Ok::<_, String>(json!("refunded")),
    /// );
    /// let support = Agent::builder("Support").tool(refund).build();
    /// let crew = Crew::builder()
    ///     .agent(support.clone())
    ///     .task(Task::builder("Refund").agent(&support).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .policies(Policies::from_text(r#"
    ///         @id("refunds") permit(principal, action == Action::"refund", resource);
    ///         @id("limit") @reason("too much") forbid(principal, action == Action::"refund", resource)
    ///         when { context.args.amount > 400 };
    ///     "#)?)
    ///     .build()?;
    /// assert_eq!(crew.explain_call("refund", "Support", json!({ "amount": 900 })), ["policies: denied by limit (too much)"]);
    /// assert_eq!(crew.explain_call("refund", "Support", json!({ "amount": 9 })), ["policies: allowed by refunds"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn explain_call(&self, tool: &str, role: &str, args: serde_json::Value) -> Vec<String> {
        let args = match args {
            serde_json::Value::Object(args) => args,
            _ => serde_json::Map::new(),
        };
        self.extension::<CrewPolicySets>()
            .map(|sets| {
                sets.attachments
                    .iter()
                    .map(|policies| policies.explain_call(tool, role, self.user(), &args))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl From<PolicyError> for BuildError {
    /// A policy set the crew's build refused, as
    /// [`BuildError::Integration`]: for `?` on
    /// [`Policies::from_text`] in a function that builds a crew.
    ///
    /// ```
    /// use crew_runtime::policy::{Policies, PolicyError};
    /// use crew_runtime::prelude::*;
    ///
    /// let error = BuildError::from(Policies::from_text("").unwrap_err());
    /// let BuildError::Integration(refused) = &error else { panic!("the policies' error") };
    /// assert_eq!(refused.downcast_ref::<PolicyError>(), Some(&PolicyError::Empty));
    /// assert!(error.to_string().starts_with("the crew's policies were refused:\n"));
    /// ```
    fn from(error: PolicyError) -> Self {
        BuildError::Integration(IntegrationError::new(
            INTEGRATION,
            "the crew's policies were refused",
            error,
        ))
    }
}

/// What a crew's build collects of the sets given to it
/// ([`CrewBuilder::policies`]): their attachments, in order.
#[derive(Default)]
struct GivenSets(Vec<Arc<Attachment>>);

/// The tools offered to each role under a crew's policies, with the
/// generations of the policy snapshots they were worked out for.
type OfferedTools = HashMap<String, (Vec<u64>, Arc<[ToolDefinition]>)>;

/// A crew's policy sets, as its run sees them: its extension.
pub(crate) struct CrewPolicySets {
    /// The crew's own sets, in the order given, then those registered on
    /// its global registry.
    attachments: Vec<Arc<Attachment>>,
    /// The global sets' attachments, which tool calls carry to the global
    /// `policies` hooks.
    global: Option<CrewPolicies>,
    /// The tools offered to each role.
    offered: Mutex<OfferedTools>,
}

/// At every crew's build, after its own hooks: attaches the sets
/// registered on the crew's global registry (each checked against the
/// crew's tools, its policies on tools the crew lacks left out for it),
/// and gives the crew its sets, if it has any.
pub(crate) fn at_build(
    scope: &BuildScope<'_>,
) -> Result<Option<Arc<dyn CrewExtension>>, BuildError> {
    let mut attachments = scope
        .take_state::<GivenSets>()
        .map(|given| given.0)
        .unwrap_or_default();
    for set in registered_on(scope.global) {
        let attachment = set.attach_global(scope.crew, &scope.tools)?;
        attachment.set_buses(scope.registry, scope.global);
        attachments.push(attachment);
    }
    if attachments.is_empty() {
        return Ok(None);
    }
    Ok(Some(Arc::new(CrewPolicySets {
        global: CrewPolicies::of(&attachments),
        attachments,
        offered: Mutex::default(),
    })))
}

impl CrewExtension for CrewPolicySets {
    /// The tools the sets registered on the crew's global registry name
    /// that no crew built on it has: a warning each, once per registry,
    /// or in strict mode an error of every kickoff.
    fn check_names(
        &self,
        registry: &HookRegistry,
        known: &KnownNames,
        strict: bool,
    ) -> Result<(), IntegrationError> {
        let problems: Vec<PolicyProblem> = self
            .attachments
            .iter()
            .flat_map(|policies| policies.tools_no_crew_has(&known.tools))
            .collect();
        if problems.is_empty() {
            return Ok(());
        }
        report_once(registry, &problems);
        if strict {
            return Err(IntegrationError::new(
                INTEGRATION,
                "registered policies name tools no crew has",
                PolicyError::Invalid { problems },
            ));
        }
        Ok(())
    }

    fn refuses_again(&self, ctx: &ToolCallHookContext) -> Option<String> {
        self.attachments
            .iter()
            .find_map(|policies| policies.forbids(ctx))
    }

    fn explain(&self, tool: &str, role: Option<&str>, notes: &mut Vec<String>) {
        for policies in &self.attachments {
            notes.push(policies.explain(tool, role));
        }
    }

    /// Under an enforcing set with default deny: not the tools no policy
    /// could ever permit to that agent.
    fn offered_tools(
        &self,
        role: &str,
        offered: &Arc<[ToolDefinition]>,
    ) -> Option<Arc<[ToolDefinition]>> {
        if !self
            .attachments
            .iter()
            .any(|policies| policies.hides_tools())
        {
            return None;
        }
        let generations: Vec<u64> = self.attachments.iter().map(|p| p.generation()).collect();
        let mut cache = self.offered.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((known, tools)) = cache.get(role)
            && *known == generations
        {
            return Some(Arc::clone(tools));
        }
        let offers = |tool: &ToolDefinition| {
            self.attachments
                .iter()
                .all(|policies| policies.offers(&tool.name, role))
        };
        let tools: Arc<[ToolDefinition]> = if offered.iter().all(offers) {
            Arc::clone(offered)
        } else {
            offered.iter().filter(|t| offers(t)).cloned().collect()
        };
        cache.insert(role.to_owned(), (generations, Arc::clone(&tools)));
        Some(tools)
    }

    fn enter_tool_call(&self, ctx: &mut ToolCallHookContext) {
        if let Some(global) = &self.global {
            ctx.extensions.insert(global.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    fn lookup() -> Tool {
        Tool::dynamic(
            "lookup",
            "Looks an order up",
            json!({ "type": "object" }),
            |_| Ok::<_, String>(json!("found")),
        )
    }

    #[test]
    fn a_crew_holds_one_policy_extension_for_its_own_sets_then_the_registered_ones() {
        let registry = Arc::new(HookRegistry::new());
        Policies::from_text(r#"@id("registered") permit(principal, action, resource);"#)
            .expect("parses")
            .register_on(registry.clone())
            .expect("registers");
        let support = Agent::builder("Support").tool(lookup()).build();
        let own = |id: &str| {
            Policies::from_text(&format!(
                r#"@id("{id}") permit(principal, action, resource);"#
            ))
            .expect("parses")
        };
        let crew = Crew::builder()
            .agent(support.clone())
            .task(Task::builder("Handle").agent(&support).build())
            .global_registry(registry)
            .policies(own("first"))
            .policies(own("second"))
            .build()
            .expect("builds");
        assert_eq!(crew.extensions().len(), 1, "one extension for every set");
        let sets = crew
            .extension::<CrewPolicySets>()
            .expect("the policies' extension");
        assert_eq!(sets.attachments.len(), 3);
        let global = sets
            .global
            .as_ref()
            .expect("the registered set rides on tool calls");
        assert_eq!(global.0.len(), 1);
        // The crew's own sets in the order given, then the registered one.
        let notes = crew.explain("lookup", "Support").notes;
        assert_eq!(
            notes,
            [
                "policies: first decide `lookup`",
                "policies: second decide `lookup`",
                "policies: registered decide `lookup`",
            ]
        );
    }

    #[test]
    fn a_crew_without_policy_sets_gets_no_policy_extension() {
        let support = Agent::builder("Support").tool(lookup()).build();
        let crew = Crew::builder()
            .agent(support.clone())
            .task(Task::builder("Handle").agent(&support).build())
            .global_registry(Arc::new(HookRegistry::new()))
            .build()
            .expect("builds");
        assert!(crew.extension::<CrewPolicySets>().is_none());
        assert!(crew.explain_call("lookup", "Support", json!({})).is_empty());
    }
}
