//! Codex's config.toml, edited with toml_edit so comments, formatting and the other tables
//! survive: our entry is `[mcp_servers.cuba-exec]` with `[mcp_servers.cuba-exec.env]`.

use serde_json::Value;
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table};

const SERVERS: &str = "mcp_servers";

pub fn parse(text: &str) -> Result<DocumentMut, String> {
    text.parse::<DocumentMut>()
        .map_err(|e| e.to_string().trim_end().to_string())
}

/// `[mcp_servers.NAME]` as JSON (for comparing and reporting), if there is one.
pub fn entry(doc: &DocumentMut, name: &str) -> Result<Option<Value>, String> {
    match doc.get(SERVERS) {
        None => Ok(None),
        Some(item) => {
            let servers = item.as_table_like().ok_or_else(not_a_table)?;
            Ok(servers.get(name).map(item_json))
        }
    }
}

/// Sets `[mcp_servers.NAME]` to `entry`: values as keys, objects as sub-tables
/// (`[mcp_servers.NAME.env]`). An existing table is refilled in place, so its position and the
/// comment above its header stay.
pub fn set(doc: &mut DocumentMut, name: &str, entry: &[(String, Value)]) -> Result<(), String> {
    let root = doc.as_table_mut();
    if !root.contains_key(SERVERS) {
        let mut servers = Table::new();
        // No bare `[mcp_servers]` header: just `[mcp_servers.cuba-exec]`.
        servers.set_implicit(true);
        root.insert(SERVERS, Item::Table(servers));
    }
    let servers = root
        .get_mut(SERVERS)
        .and_then(Item::as_table_mut)
        .ok_or_else(not_a_table)?;
    match servers.get_mut(name) {
        Some(Item::Table(table)) if !table.is_dotted() => {
            table.clear();
            fill(table, entry);
        }
        _ => {
            let mut table = Table::new();
            fill(&mut table, entry);
            servers.insert(name, Item::Table(table));
        }
    }
    Ok(())
}

/// Takes `[mcp_servers.NAME]` out; false if it was not there.
pub fn remove(doc: &mut DocumentMut, name: &str) -> Result<bool, String> {
    match doc.get_mut(SERVERS) {
        None => Ok(false),
        Some(item) => {
            let servers = item.as_table_like_mut().ok_or_else(not_a_table)?;
            Ok(servers.remove(name).is_some())
        }
    }
}

/// The entry alone, as a TOML snippet to show.
pub fn snippet(name: &str, entry: &[(String, Value)]) -> String {
    let mut doc = DocumentMut::new();
    set(&mut doc, name, entry).expect("a new document has no mcp_servers to conflict with");
    doc.to_string()
}

fn not_a_table() -> String {
    format!("`{SERVERS}` is not a table; change it to [{SERVERS}.NAME] tables by hand")
}

fn fill(table: &mut Table, entry: &[(String, Value)]) {
    for (key, value) in entry {
        match value {
            Value::Object(map) => {
                let mut sub = Table::new();
                for (k, v) in map {
                    if let Some(v) = toml_value(v) {
                        sub.insert(k, Item::Value(v));
                    }
                }
                table.insert(key, Item::Table(sub));
            }
            v => {
                if let Some(v) = toml_value(v) {
                    table.insert(key, Item::Value(v));
                }
            }
        }
    }
}

/// TOML has no null: a null is left out.
fn toml_value(v: &Value) -> Option<toml_edit::Value> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64()?.into(),
        },
        Value::String(s) => s.as_str().into(),
        Value::Array(items) => {
            toml_edit::Value::Array(items.iter().filter_map(toml_value).collect::<Array>())
        }
        Value::Object(map) => {
            let mut t = InlineTable::new();
            for (k, v) in map {
                if let Some(v) = toml_value(v) {
                    t.insert(k, v);
                }
            }
            toml_edit::Value::InlineTable(t)
        }
    })
}

fn item_json(item: &Item) -> Value {
    match item {
        Item::None => Value::Null,
        Item::Value(v) => value_json(v),
        Item::Table(t) => table_json(t),
        Item::ArrayOfTables(a) => Value::Array(a.iter().map(table_json).collect()),
    }
}

fn table_json(t: &Table) -> Value {
    Value::Object(
        t.iter()
            .map(|(k, v)| (k.to_string(), item_json(v)))
            .collect(),
    )
}

fn value_json(v: &toml_edit::Value) -> Value {
    match v {
        toml_edit::Value::String(s) => Value::from(s.value().as_str()),
        toml_edit::Value::Integer(i) => Value::from(*i.value()),
        toml_edit::Value::Float(f) => Value::from(*f.value()),
        toml_edit::Value::Boolean(b) => Value::from(*b.value()),
        toml_edit::Value::Datetime(d) => Value::from(d.value().to_string()),
        toml_edit::Value::Array(a) => a.iter().map(value_json).collect(),
        toml_edit::Value::InlineTable(t) => t
            .iter()
            .map(|(k, v)| (k.to_string(), value_json(v)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Vec<(String, Value)> {
        vec![
            ("command".into(), json!("/bin/cuba-exec")),
            ("args".into(), json!([])),
            ("env".into(), json!({"A": "1"})),
        ]
    }

    #[test]
    fn new_entry_and_back() {
        let mut doc = parse("").expect("empty is valid");
        set(&mut doc, "cuba-exec", &sample()).expect("no conflict");
        assert_eq!(
            doc.to_string(),
            "[mcp_servers.cuba-exec]\ncommand = \"/bin/cuba-exec\"\nargs = []\n\n[mcp_servers.cuba-exec.env]\nA = \"1\"\n"
        );
        let as_json = entry(&doc, "cuba-exec").expect("table").expect("present");
        assert_eq!(
            as_json,
            json!({"command": "/bin/cuba-exec", "args": [], "env": {"A": "1"}})
        );
        assert!(remove(&mut doc, "cuba-exec").expect("table"));
        assert_eq!(doc.to_string(), "");
    }

    #[test]
    fn replaced_in_place() {
        let text = "model = \"o3\"\n\n# ours\n[mcp_servers.cuba-exec]\ncommand = \"/old\"\n\n[mcp_servers.cuba-exec.env]\nB = \"2\"\n\n# theirs\n[mcp_servers.other]\ncommand = \"x\"\n";
        let mut doc = parse(text).expect("valid");
        set(&mut doc, "cuba-exec", &sample()).expect("table");
        assert_eq!(
            doc.to_string(),
            "model = \"o3\"\n\n# ours\n[mcp_servers.cuba-exec]\ncommand = \"/bin/cuba-exec\"\nargs = []\n\n[mcp_servers.cuba-exec.env]\nA = \"1\"\n\n# theirs\n[mcp_servers.other]\ncommand = \"x\"\n"
        );
    }
}
