//! What policies can see of a crew's tools: the Cedar schema derived from
//! their JSON schemas, and the typing of a call's arguments against it.

use std::collections::{BTreeMap, BTreeSet};

use cedar_policy::{RestrictedExpression, Schema};
use hooks_core::ToolInfo;
use serde_json::{Map, Value, json};

use crate::tool::Tool;

/// The type of one argument as policies see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ArgType {
    Long,
    String,
    Bool,
    Set(Box<ArgType>),
    Record(Fields),
    /// Not in the Cedar schema nor in `context.args`, yet still an
    /// argument of the tool: a call must give it when it is required (a
    /// money amount as a JSON number is no less required for policies
    /// being unable to read it), and a policy that reads it is told why it
    /// cannot.
    Hidden(Hidden),
}

/// Why policies cannot read an argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hidden {
    /// A JSON `number`: Cedar has no floating type (and its `decimal`
    /// extension is not used).
    Number,
    /// An array whose items are JSON numbers.
    Numbers,
    /// A union of types, a reference, or a type JSON schema does not name.
    Other,
}

impl Hidden {
    /// Why a policy that reads `name` is refused, and what to use instead.
    pub(crate) fn reason(self, name: &str) -> String {
        match self {
            Hidden::Number => format!(
                "`{name}` is a JSON number, which policies cannot read: use an integer type"
            ),
            Hidden::Numbers => format!(
                "`{name}` is an array of JSON numbers, which policies cannot read: use an array of integers"
            ),
            Hidden::Other => format!(
                "`{name}` has a JSON type policies cannot read (a union, a reference or no type): \
                 give it one of integer, string, boolean, array or object"
            ),
        }
    }
}

/// The typed arguments of a record: name → (type, required).
pub(crate) type Fields = BTreeMap<String, Field>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) ty: ArgType,
    pub(crate) required: bool,
}

impl ArgType {
    /// The Cedar type; `None` for an argument policies cannot read.
    fn cedar(&self) -> Option<Value> {
        Some(match self {
            ArgType::Long => json!({ "type": "Long" }),
            ArgType::String => json!({ "type": "String" }),
            ArgType::Bool => json!({ "type": "Boolean" }),
            ArgType::Set(element) => json!({ "type": "Set", "element": element.cedar()? }),
            ArgType::Record(fields) => record(fields),
            ArgType::Hidden(_) => return None,
        })
    }

    /// How a message names the type.
    fn described(&self) -> &'static str {
        match self {
            ArgType::Long => "an integer",
            ArgType::String => "a string",
            ArgType::Bool => "a boolean",
            ArgType::Set(_) => "an array",
            ArgType::Record(_) => "an object",
            ArgType::Hidden(Hidden::Number) => "a number",
            ArgType::Hidden(Hidden::Numbers) => "an array of numbers",
            // Never asked: any value fits such an argument.
            ArgType::Hidden(Hidden::Other) => "of its schema's type",
        }
    }
}

/// A Cedar record of the fields policies can read.
fn record(fields: &Fields) -> Value {
    let attributes: Map<String, Value> = fields
        .iter()
        .filter_map(|(name, field)| {
            let mut ty = field.ty.cedar()?;
            if !field.required {
                ty["required"] = Value::Bool(false);
            }
            Some((name.clone(), ty))
        })
        .collect();
    json!({ "type": "Record", "attributes": attributes })
}

/// One tool as policies see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolShape {
    pub(crate) name: String,
    pub(crate) server: String,
    pub(crate) capabilities: Vec<&'static str>,
    pub(crate) args: Fields,
}

impl ToolShape {
    pub(crate) fn of(tool: &Tool) -> ToolShape {
        ToolShape {
            name: tool.name().to_owned(),
            server: tool.mcp_server().unwrap_or("local").to_owned(),
            capabilities: tool
                .annotations()
                .capabilities()
                .iter()
                .map(|capability| capability.name())
                .collect(),
            args: object_fields(tool.args_schema()).unwrap_or_default(),
        }
    }
}

/// The typed properties of an object schema; `None` for a schema that is
/// not an object with properties (a free-form tool: its `args` is an
/// empty record).
pub(crate) fn object_fields(schema: &Value) -> Option<Fields> {
    let properties = schema.get("properties")?.as_object()?;
    let required: BTreeSet<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields = properties
        .iter()
        .map(|(name, property)| {
            let (ty, nullable) = arg_type(property);
            (
                name.clone(),
                Field {
                    ty,
                    required: required.contains(name.as_str()) && !nullable,
                },
            )
        })
        .collect();
    Some(fields)
}

/// The Cedar type of a JSON schema and whether it admits `null`; what
/// policies cannot see (numbers, unions, references) is
/// [`ArgType::Hidden`].
fn arg_type(schema: &Value) -> (ArgType, bool) {
    let hidden = |why| (ArgType::Hidden(why), false);
    let (name, nullable) = match schema.get("type") {
        Some(Value::String(name)) => (name.as_str(), false),
        Some(Value::Array(names)) => {
            let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
            let nullable = names.contains(&"null");
            let mut others = names.into_iter().filter(|name| *name != "null");
            match (others.next(), others.next()) {
                (Some(name), None) => (name, nullable),
                _ => return hidden(Hidden::Other),
            }
        }
        None => {
            let strings = schema
                .get("enum")
                .and_then(Value::as_array)
                .is_some_and(|values| values.iter().all(Value::is_string));
            return if strings {
                (ArgType::String, false)
            } else {
                hidden(Hidden::Other)
            };
        }
        _ => return hidden(Hidden::Other),
    };
    let ty = match name {
        "integer" => ArgType::Long,
        "string" => ArgType::String,
        "boolean" => ArgType::Bool,
        "number" => ArgType::Hidden(Hidden::Number),
        "array" => match schema.get("items").map(arg_type) {
            Some((ArgType::Hidden(Hidden::Number), _)) => ArgType::Hidden(Hidden::Numbers),
            Some((ArgType::Hidden(_), _)) | None => ArgType::Hidden(Hidden::Other),
            Some((element, _)) => ArgType::Set(Box::new(element)),
        },
        "object" => ArgType::Record(object_fields(schema).unwrap_or_default()),
        _ => ArgType::Hidden(Hidden::Other),
    };
    (ty, nullable)
}

/// The Cedar schema of a crew whose tools are `tools`.
pub(crate) fn cedar_schema(tools: &BTreeMap<String, ToolShape>) -> Result<Schema, String> {
    let actions: Map<String, Value> = tools
        .values()
        .map(|tool| {
            let context = json!({
                "type": "Record",
                "attributes": {
                    "args": record(&tool.args),
                    "call_id": { "type": "String" },
                    "task": { "type": "String" },
                    "iteration": { "type": "Long" },
                },
            });
            (
                tool.name.clone(),
                json!({ "appliesTo": {
                    "principalTypes": ["Agent"],
                    "resourceTypes": ["Tool"],
                    "context": context,
                } }),
            )
        })
        .collect();
    let schema = json!({ "": {
        "entityTypes": {
            "Agent": { "shape": { "type": "Record", "attributes": {
                "crew": { "type": "String" },
                "user": { "type": "String", "required": false },
            } } },
            "Tool": { "shape": { "type": "Record", "attributes": {
                "server": { "type": "String" },
                "capabilities": { "type": "Set", "element": { "type": "String" } },
            } } },
        },
        "actions": actions,
    } });
    Schema::from_json_value(schema).map_err(|error| error.to_string())
}

/// Why a call's arguments do not fit its tool's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ArgsMismatch(pub(crate) String);

/// The call's arguments as `context.args`: typed by the tool's schema,
/// arguments it does not name left out, `null` read as absent.
pub(crate) fn typed_args(
    fields: &Fields,
    input: &Map<String, Value>,
) -> Result<RestrictedExpression, ArgsMismatch> {
    typed_record(fields, input, "")
}

fn typed_record(
    fields: &Fields,
    input: &Map<String, Value>,
    path: &str,
) -> Result<RestrictedExpression, ArgsMismatch> {
    let mut values = Vec::with_capacity(fields.len());
    for (name, field) in fields {
        let path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        match input.get(name) {
            None | Some(Value::Null) if field.required => {
                return Err(ArgsMismatch(format!(
                    "the required argument `{path}` is missing"
                )));
            }
            None | Some(Value::Null) => {}
            // Checked, then left out: policies cannot read it.
            Some(value) => match &field.ty {
                ArgType::Hidden(why) => check_hidden(*why, value, &path)?,
                ty => values.push((name.clone(), typed(ty, value, &path)?)),
            },
        }
    }
    RestrictedExpression::new_record(values)
        .map_err(|error| ArgsMismatch(format!("the arguments cannot be read: {error}")))
}

/// Whether `value` is of the JSON type of a hidden argument (anything
/// goes for a type policies know nothing of).
fn check_hidden(why: Hidden, value: &Value, path: &str) -> Result<(), ArgsMismatch> {
    let fits = match why {
        Hidden::Number => value.is_number(),
        Hidden::Numbers => value
            .as_array()
            .is_some_and(|items| items.iter().all(Value::is_number)),
        Hidden::Other => true,
    };
    if fits {
        Ok(())
    } else {
        Err(ArgsMismatch(format!(
            "the argument `{path}` must be {}, not {}",
            ArgType::Hidden(why).described(),
            json_kind(value)
        )))
    }
}

/// `value` as Cedar sees it.
fn typed(ty: &ArgType, value: &Value, path: &str) -> Result<RestrictedExpression, ArgsMismatch> {
    let mismatch = || {
        ArgsMismatch(format!(
            "the argument `{path}` must be {}, not {}",
            ty.described(),
            json_kind(value)
        ))
    };
    Ok(match (ty, value) {
        (ArgType::Long, Value::Number(number)) => {
            RestrictedExpression::new_long(number.as_i64().ok_or_else(mismatch)?)
        }
        (ArgType::String, Value::String(text)) => RestrictedExpression::new_string(text.clone()),
        (ArgType::Bool, Value::Bool(flag)) => RestrictedExpression::new_bool(*flag),
        (ArgType::Set(element), Value::Array(items)) => RestrictedExpression::new_set(
            items
                .iter()
                .enumerate()
                .map(|(index, item)| typed(element, item, &format!("{path}[{index}]")))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        (ArgType::Record(fields), Value::Object(map)) => typed_record(fields, map, path)?,
        _ => return Err(mismatch()),
    })
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "an integer out of range",
        Value::Number(_) => "a fractional number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_schema_types_map_to_cedar_types() {
        let schema = json!({
            "type": "object",
            "properties": {
                "amount": { "type": "integer" },
                "note": { "type": ["string", "null"] },
                "urgent": { "type": "boolean" },
                "tags": { "type": "array", "items": { "type": "string" } },
                "ratio": { "type": "number" },
                "mode": { "enum": ["a", "b"] },
                "to": { "type": "object", "properties": { "name": { "type": "string" } }, "required": ["name"] },
            },
            "required": ["amount", "note"],
        });
        let fields = object_fields(&schema).expect("an object schema");
        assert_eq!(
            fields["amount"],
            Field {
                ty: ArgType::Long,
                required: true
            }
        );
        assert_eq!(
            fields["note"],
            Field {
                ty: ArgType::String,
                required: false
            }
        );
        assert_eq!(fields["tags"].ty, ArgType::Set(Box::new(ArgType::String)));
        assert_eq!(fields["mode"].ty, ArgType::String);
        assert_eq!(
            fields["ratio"].ty,
            ArgType::Hidden(Hidden::Number),
            "a number is an argument policies cannot see"
        );
        let cedar = record(&fields);
        assert!(
            cedar["attributes"].get("ratio").is_none(),
            "a number is not in the Cedar schema: {cedar}"
        );
        let ArgType::Record(to) = &fields["to"].ty else {
            panic!("an object argument is a record");
        };
        assert!(to["name"].required);
    }

    #[test]
    fn arguments_that_do_not_fit_name_the_argument() {
        let fields = object_fields(&json!({
            "type": "object",
            "properties": { "amount": { "type": "integer" }, "to": { "type": "object", "properties": { "id": { "type": "integer" } }, "required": ["id"] } },
            "required": ["amount"],
        }))
        .expect("an object schema");
        let input = |value: Value| value.as_object().cloned().expect("an object");
        let error = typed_args(&fields, &input(json!({ "amount": "400" }))).expect_err("a string");
        assert_eq!(
            error.0,
            "the argument `amount` must be an integer, not a string"
        );
        let error = typed_args(&fields, &input(json!({}))).expect_err("missing");
        assert_eq!(error.0, "the required argument `amount` is missing");
        let error =
            typed_args(&fields, &input(json!({ "amount": 1, "to": {} }))).expect_err("nested");
        assert_eq!(error.0, "the required argument `to.id` is missing");
        let error = typed_args(&fields, &input(json!({ "amount": 1.5 }))).expect_err("fraction");
        assert_eq!(
            error.0,
            "the argument `amount` must be an integer, not a fractional number"
        );
        assert!(typed_args(&fields, &input(json!({ "amount": 3, "extra": [1] }))).is_ok());
    }
}
