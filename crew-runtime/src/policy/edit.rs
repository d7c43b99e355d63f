//! An approver's edit, checked by the policy set its question was asked
//! under, in the process that takes the answer (SPEC §14, "Edits stay
//! safe"): the call rebuilt from the question, with the edited arguments,
//! decided as the crew's attachment would decide it.

use std::collections::BTreeMap;
use std::sync::Arc;

use hooks_core::{Capabilities, Capability};
use serde_json::{Map, Value};

use super::engine::{Call, LANGUAGE, Verdict};
use super::schema::{ToolShape, cedar_schema, object_fields};

/// A question's call as the policies see it: what [`refusal`] decides.
pub(crate) struct AskedCall<'a> {
    pub(crate) tool: &'a str,
    pub(crate) capabilities: Capabilities,
    pub(crate) schema: Option<&'a Value>,
    pub(crate) role: Option<&'a str>,
    pub(crate) crew: Option<&'a str>,
    pub(crate) user: Option<&'a str>,
    pub(crate) call_id: Option<&'a str>,
    pub(crate) task: Option<&'a str>,
}

/// Why the policy set `text` (in `language`, with the question's
/// `context`) refuses `call` with the arguments `edit`, if it does.
/// A set that cannot be read refuses: an edit nobody could check is not
/// taken.
pub(crate) fn refusal(
    language: &str,
    text: &str,
    context: &Value,
    call: &AskedCall<'_>,
    edit: &Map<String, Value>,
) -> Option<String> {
    if language != LANGUAGE {
        return Some(format!(
            "the question was asked under {language:?} rules, which this program cannot check"
        ));
    }
    let parsed = match super::parse::parse(text) {
        Ok(parsed) => Arc::new(parsed),
        Err(error) => return Some(format!("its policy set cannot be read: {error}")),
    };
    let server = context["server"].as_str().unwrap_or("local");
    let shape = ToolShape {
        name: call.tool.to_owned(),
        server: server.to_owned(),
        capabilities: Capability::ALL
            .into_iter()
            .filter(|capability| call.capabilities.contains(*capability))
            .map(Capability::name)
            .collect(),
        args: call.schema.and_then(object_fields).unwrap_or_default(),
    };
    let tools = BTreeMap::from([(shape.name.clone(), shape)]);
    let schema = match cedar_schema(&tools) {
        Ok(schema) => schema,
        Err(error) => return Some(format!("the tool's schema cannot be used: {error}")),
    };
    // As a global set does: policies naming other tools are left out.
    let compiled = match super::compile(&parsed, &tools, &schema, true) {
        Ok(compiled) => compiled,
        Err(error) => return Some(format!("its policy set cannot be used: {error}")),
    };
    let decided = Call {
        tool: call.tool,
        role: call.role.unwrap_or_default(),
        crew: call.crew.unwrap_or_default(),
        user: call.user,
        args: edit,
        call_id: call.call_id.unwrap_or_default(),
        task: call.task.unwrap_or_default(),
        iteration: 1,
    };
    let default_allow = context["default_allow"].as_bool().unwrap_or(false);
    match compiled.decide(&decided, default_allow) {
        Some(Verdict::Deny { source, reason, .. }) => Some(format!("{reason} (policy:{source})")),
        Some(Verdict::Allow { .. }) => None,
        None => Some(format!(
            "its policy set does not know the tool {}",
            call.tool
        )),
    }
}
