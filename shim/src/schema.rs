//! The JSON schemas of the tools' arguments and replies, trimmed to what a model or client can
//! use: tools/list carries every tool's schemas to every session, which pays for each byte.

use std::sync::Arc;

use rmcp::handler::server::common::{schema_for_input, schema_for_type};
use rmcp::handler::server::tool::schema_for_output;
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde_json::Value;

/// The input schema of `T` without what only a validator could use (`$schema`, integer
/// formats and bounds) and without `null` in the types of optional arguments: an argument that
/// is not required may be left out, which says the same in fewer bytes.
pub fn input_schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    let mut schema = match schema_for_input::<T>() {
        Ok(s) => s.as_ref().clone(),
        Err(_) => schema_for_type::<T>().as_ref().clone(),
    };
    schema.remove("$schema");
    // Unknown arguments are refused all the same, with an error naming the known ones.
    schema.remove("additionalProperties");
    let mut value = Value::Object(schema);
    trim(&mut value, Keep::Descriptions);
    object(value, schema_for_type::<T>)
}

/// The output schema of `T` for a tool: the fields every reply carries, with their types, and
/// nothing else. The optional fields (present only when they say something) and what each
/// field means are in docs/tools.md: tools/list carries every schema to every session, and a
/// client validates what is declared, so the declaration is exact about what it names and
/// leaves the rest open (JSON Schema allows further properties).
pub fn output_schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    let mut schema = schema_for_output::<T>().as_ref().clone();
    schema.remove("$schema");
    let mut value = Value::Object(schema);
    inline_defs(&mut value);
    trim(&mut value, Keep::Required);
    object(value, schema_for_output::<T>)
}

fn object(value: Value, otherwise: impl FnOnce() -> Arc<JsonObject>) -> Arc<JsonObject> {
    match value {
        Value::Object(o) => Arc::new(o),
        // The trimming keeps an object an object.
        _ => otherwise(),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Keep {
    /// Every property, with its description (what the model reads to call a tool).
    Descriptions,
    /// Only required properties, without descriptions.
    Required,
}

fn trim(v: &mut Value, keep: Keep) {
    match v {
        Value::Object(o) => {
            for key in ["format", "minimum", "maximum", "minItems", "maxItems"] {
                o.remove(key);
            }
            if keep == Keep::Required {
                o.remove("description");
            }
            let required: Vec<String> = match o.get("required") {
                Some(Value::Array(r)) => r
                    .iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect(),
                _ => Vec::new(),
            };
            if keep == Keep::Required {
                if let Some(Value::Object(props)) = o.get_mut("properties") {
                    props.retain(|name, _| required.contains(name));
                }
            }
            for (key, child) in o.iter_mut() {
                match (key.as_str(), child) {
                    // Maps of names to schemas: the names are not keywords.
                    ("properties" | "$defs", Value::Object(map)) => {
                        for (name, schema) in map.iter_mut() {
                            if key == "properties" && !required.contains(name) {
                                not_null(schema);
                            }
                            trim(schema, keep);
                        }
                    }
                    (_, child) => trim(child, keep),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|c| trim(c, keep)),
        _ => {}
    }
}

/// Replaces every `{"$ref": "#/$defs/X"}` with the schema of X and drops `$defs` (a tool's
/// schema uses each definition once or twice; inline it is smaller than by reference).
fn inline_defs(v: &mut Value) {
    let defs = match v {
        Value::Object(o) => match o.remove("$defs") {
            Some(Value::Object(d)) => d,
            _ => return,
        },
        _ => return,
    };
    fn walk(v: &mut Value, defs: &serde_json::Map<String, Value>, depth: usize) {
        if let Value::Object(o) = v {
            let target = o
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/$defs/"))
                .and_then(|name| defs.get(name));
            if let (Some(def), true) = (target, depth < 8) {
                *v = def.clone();
                return walk(v, defs, depth + 1);
            }
        }
        match v {
            Value::Object(o) => o.values_mut().for_each(|c| walk(c, defs, depth)),
            Value::Array(a) => a.iter_mut().for_each(|c| walk(c, defs, depth)),
            _ => {}
        }
    }
    walk(v, &defs, 0);
}

/// `{"type": ["string", "null"]}` → `{"type": "string"}`; `{"anyOf": [X, {"type": "null"}]}` → X;
/// `null` leaves an `enum` too, and a `"default": null` goes.
fn not_null(prop: &mut Value) {
    let Value::Object(o) = prop else { return };
    // An argument left out is absent: a `null` default says nothing more.
    if o.get("default").is_some_and(Value::is_null) {
        o.remove("default");
    }
    if let Some(Value::Array(types)) = o.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            o.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = o.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    let null = serde_json::json!({ "type": "null" });
    if let Some(Value::Array(any)) = o.get("anyOf") {
        if any.len() == 2 && any.contains(&null) {
            let other = any.iter().find(|x| **x != null).cloned();
            if let Some(Value::Object(other)) = other {
                o.remove("anyOf");
                o.extend(other);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::reply::TtyReply;

    #[derive(Serialize, JsonSchema)]
    struct Sample {
        /// Dropped: docs/tools.md says what a field means.
        format: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        left_out: Option<TtyReply>,
        maybe: Option<i32>,
        rows: Vec<Row>,
    }

    #[derive(Serialize, JsonSchema)]
    struct Row {
        id: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Args {
        /// Kept: the model reads it.
        id: u64,
        limit: Option<u32>,
        view: Option<Choice>,
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    #[schemars(inline)]
    enum Choice {
        Text,
        Screen,
    }

    #[test]
    fn output_schemas_name_the_fields_every_reply_has_with_their_types_only() {
        let schema = Value::Object(output_schema::<Sample>().as_ref().clone());
        assert_eq!(
            schema,
            serde_json::json!({
                "type": "object",
                "properties": {
                    // A field named like a keyword stays; its integer format goes.
                    "format": { "type": "integer" },
                    // Written as null when empty: required, and null stays.
                    "maybe": { "type": ["integer", "null"] },
                    // A definition is inlined, trimmed the same way.
                    "rows": { "type": "array", "items": {
                        "type": "object",
                        "properties": { "id": { "type": "integer" } },
                        "required": ["id"],
                    } },
                },
                "required": ["format", "maybe", "rows"],
            })
        );
    }

    #[test]
    fn input_schemas_keep_descriptions_and_drop_null_from_optional_arguments() {
        let schema = Value::Object(input_schema::<Args>().as_ref().clone());
        let props = &schema["properties"];
        assert_eq!(
            props["id"],
            serde_json::json!({ "description": "Kept: the model reads it.", "type": "integer" })
        );
        assert_eq!(props["limit"], serde_json::json!({ "type": "integer" }));
        assert_eq!(
            props["view"],
            serde_json::json!({ "type": "string", "enum": ["text", "screen"] })
        );
        assert_eq!(schema["required"], serde_json::json!(["id"]));
    }
}
