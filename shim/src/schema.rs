//! The JSON schemas of the tools' arguments and replies, trimmed to what a model or client can
//! use: tools/list carries every tool's schemas to every session, which pays for each byte.

use std::sync::Arc;

use rmcp::handler::server::common::{schema_for_input, schema_for_type};
use rmcp::handler::server::tool::schema_for_output;
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde_json::Value;

/// The input schema of `T` without what only a validator could use (`$schema`, integer
/// formats).
pub fn input_schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    let mut schema = match schema_for_input::<T>() {
        Ok(s) => s.as_ref().clone(),
        Err(_) => schema_for_type::<T>().as_ref().clone(),
    };
    schema.remove("$schema");
    let mut value = Value::Object(schema);
    no_format(&mut value);
    match value {
        Value::Object(o) => Arc::new(o),
        // `no_format` keeps an object an object.
        _ => schema_for_type::<T>(),
    }
}

fn no_format(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.remove("format");
            for (key, child) in o.iter_mut() {
                match (key.as_str(), child) {
                    // Maps of names to schemas: a field may be called "format".
                    ("properties" | "$defs", Value::Object(map)) => {
                        map.values_mut().for_each(no_format)
                    }
                    (_, child) => no_format(child),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(no_format),
        _ => {}
    }
}

/// The output schema of `T` for a tool: the reply's shape and its descriptions. Integer formats
/// and bounds, `$schema`, and `null` for fields that are left out rather than written as null
/// (`skip_serializing_if`) are removed.
pub fn output_schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    let mut schema = schema_for_output::<T>().as_ref().clone();
    schema.remove("$schema");
    let mut value = Value::Object(schema);
    trim(&mut value);
    match value {
        Value::Object(o) => Arc::new(o),
        // `trim` keeps an object an object.
        _ => schema_for_output::<T>(),
    }
}

fn trim(v: &mut Value) {
    match v {
        Value::Object(o) => {
            for key in ["format", "minimum", "maximum"] {
                o.remove(key);
            }
            let required: Vec<String> = match o.get("required") {
                Some(Value::Array(r)) => r
                    .iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect(),
                _ => Vec::new(),
            };
            for (key, child) in o.iter_mut() {
                match (key.as_str(), child) {
                    // Maps of names to schemas: the names are not keywords.
                    ("properties" | "$defs", Value::Object(map)) => {
                        for (name, schema) in map.iter_mut() {
                            if key == "properties" && !required.contains(name) {
                                not_null(schema);
                            }
                            trim(schema);
                        }
                    }
                    (_, child) => trim(child),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(trim),
        _ => {}
    }
}

/// `{"type": ["string", "null"]}` → `{"type": "string"}`; `{"anyOf": [X, {"type": "null"}]}` → X.
fn not_null(prop: &mut Value) {
    let Value::Object(o) = prop else { return };
    if let Some(Value::Array(types)) = o.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            o.insert("type".into(), only);
        }
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
    use serde::Serialize;

    use super::*;
    use crate::reply::TtyReply;

    #[derive(Serialize, JsonSchema)]
    struct Sample {
        /// Kept.
        format: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        left_out: Option<TtyReply>,
        maybe: Option<i32>,
    }

    #[test]
    fn output_schemas_keep_shape_and_drop_validator_noise() {
        let schema = Value::Object(output_schema::<Sample>().as_ref().clone());
        assert_eq!(schema.get("$schema"), None);
        let props = &schema["properties"];
        // A field named like a keyword stays; its integer format goes.
        assert_eq!(
            props["format"],
            serde_json::json!({ "description": "Kept.", "type": "integer" })
        );
        // Left out rather than null: no null in its type, the object inline.
        assert_eq!(props["left_out"]["type"], "object");
        assert_eq!(
            props["left_out"]["required"],
            serde_json::json!(["cols", "rows"])
        );
        // Written as null when empty: null stays.
        assert_eq!(
            props["maybe"]["type"],
            serde_json::json!(["integer", "null"])
        );
    }
}
