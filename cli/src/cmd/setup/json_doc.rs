//! A JSON config file edited without disturbing the rest of it: the top-level keys and the keys
//! of the one object we change keep their order, and every value we do not touch is written
//! back byte for byte.
//!
//! Why not `serde_json::Value`: its maps sort their keys unless serde_json's `preserve_order`
//! feature is on, and cargo would turn that feature on for every crate built with this one,
//! changing their output. Instead the file is read into ordered maps of raw values
//! (`RawValue`); only the container we edit (`mcpServers` …) is split one level deeper.

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::ser::PrettyFormatter;
use serde_json::value::RawValue;
use serde_json::Value;

type RawMap = IndexMap<String, Box<RawValue>>;

#[derive(Serialize)]
#[serde(untagged)]
enum Node {
    /// Untouched: its original text.
    Raw(Box<RawValue>),
    /// The container being edited.
    Map(IndexMap<String, Node>),
    /// A value we wrote.
    Value(Value),
}

pub struct JsonDoc {
    top: IndexMap<String, Node>,
    /// One level of the file's indentation, so untouched multi-line values still line up.
    indent: String,
    newline_at_end: bool,
}

impl JsonDoc {
    /// A document for a file that does not exist yet, starting with `keys`.
    pub fn new(keys: Vec<(String, Value)>) -> JsonDoc {
        JsonDoc {
            top: keys.into_iter().map(|(k, v)| (k, Node::Value(v))).collect(),
            indent: "  ".into(),
            newline_at_end: true,
        }
    }

    /// Parses a whole file. An empty file counts as `{}` (`touch mcp.json` is common); anything
    /// but an object is an error.
    pub fn parse(text: &str) -> Result<JsonDoc, String> {
        if text.trim().is_empty() {
            return Ok(JsonDoc::new(Vec::new()));
        }
        // Syntax first, so a broken file gets serde_json's line and column.
        let raw: Box<RawValue> = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let top: RawMap = serde_json::from_str(raw.get())
            .map_err(|_| "the top level is not a JSON object".to_string())?;
        Ok(JsonDoc {
            top: top.into_iter().map(|(k, v)| (k, Node::Raw(v))).collect(),
            indent: detect_indent(text),
            newline_at_end: text.ends_with('\n'),
        })
    }

    /// Our entry `container.name`, if there is one.
    pub fn entry(&self, container: &str, name: &str) -> Result<Option<Value>, String> {
        let found = match self.top.get(container) {
            None => return Ok(None),
            Some(Node::Raw(raw)) => match split(container, raw)? {
                Some(map) => map.get(name).map(|v| parse_raw(v)).transpose()?,
                None => None,
            },
            Some(Node::Map(map)) => map.get(name).map(to_value),
            Some(Node::Value(v)) => v.get(name).cloned(),
        };
        Ok(found)
    }

    /// Sets `container.name` to `entry` (keys in the given order), keeping its place if it
    /// exists and adding it last otherwise.
    pub fn set(
        &mut self,
        container: &str,
        name: &str,
        entry: &[(String, Value)],
    ) -> Result<(), String> {
        let map: IndexMap<String, Node> = entry
            .iter()
            .map(|(k, v)| (k.clone(), Node::Value(v.clone())))
            .collect();
        self.container(container)?
            .insert(name.into(), Node::Map(map));
        Ok(())
    }

    /// Takes `container.name` out; false if it was not there. Other entries keep their order.
    pub fn remove(&mut self, container: &str, name: &str) -> Result<bool, String> {
        if !self.top.contains_key(container) {
            return Ok(false);
        }
        Ok(self.container(container)?.shift_remove(name).is_some())
    }

    /// The file's new text.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let formatter = PrettyFormatter::with_indent(self.indent.as_bytes());
        let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
        self.top
            .serialize(&mut ser)
            .expect("string keys and already-valid JSON always serialise into memory");
        let mut text = String::from_utf8(out).expect("serde_json writes UTF-8");
        if self.newline_at_end {
            text.push('\n');
        }
        text
    }

    /// The container as an editable map, created (last) when missing; `null` counts as empty.
    fn container(&mut self, container: &str) -> Result<&mut IndexMap<String, Node>, String> {
        let node = self
            .top
            .entry(container.into())
            .or_insert_with(|| Node::Map(IndexMap::new()));
        let map: Option<IndexMap<String, Node>> = match node {
            Node::Map(_) => None,
            Node::Raw(raw) => Some(
                split(container, raw)?
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, Node::Raw(v)))
                    .collect(),
            ),
            Node::Value(Value::Object(m)) => Some(
                std::mem::take(m)
                    .into_iter()
                    .map(|(k, v)| (k, Node::Value(v)))
                    .collect(),
            ),
            Node::Value(Value::Null) => Some(IndexMap::new()),
            Node::Value(_) => return Err(format!("\"{container}\" is not a JSON object")),
        };
        if let Some(map) = map {
            *node = Node::Map(map);
        }
        match node {
            Node::Map(map) => Ok(map),
            _ => unreachable!("the container was just made a map"),
        }
    }
}

/// A raw container's entries; `None` for `null`.
fn split(container: &str, raw: &RawValue) -> Result<Option<RawMap>, String> {
    if raw.get().trim() == "null" {
        return Ok(None);
    }
    serde_json::from_str(raw.get())
        .map(Some)
        .map_err(|_| format!("\"{container}\" is not a JSON object"))
}

fn parse_raw(raw: &RawValue) -> Result<Value, String> {
    serde_json::from_str(raw.get()).map_err(|e| e.to_string())
}

fn to_value(node: &Node) -> Value {
    serde_json::to_value(node).expect("a parsed or built JSON node converts to a Value")
}

/// The indentation of the first key line (one level inside the top object), else two spaces.
fn detect_indent(text: &str) -> String {
    text.lines()
        .skip(1)
        .find_map(|line| {
            let key = line.trim_start_matches([' ', '\t']);
            let ws = &line[..line.len() - key.len()];
            (key.starts_with('"') && !ws.is_empty()).then(|| ws.to_string())
        })
        .unwrap_or_else(|| "  ".into())
}

/// `"name": { … }` pretty-printed, for a person to paste into a file we would not rewrite.
pub fn fragment(name: &str, entry: &[(String, Value)]) -> String {
    let mut doc = JsonDoc::new(Vec::new());
    doc.newline_at_end = false;
    doc.top.insert(
        name.into(),
        Node::Map(
            entry
                .iter()
                .map(|(k, v)| (k.clone(), Node::Value(v.clone())))
                .collect(),
        ),
    );
    let text = doc.render();
    // Drop the outer braces and one level of indentation.
    let inner: Vec<&str> = text.lines().collect();
    inner[1..inner.len().saturating_sub(1)]
        .iter()
        .map(|l| l.strip_prefix("  ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untouched_values_and_order_survive() {
        let text = "{\n  \"z\": 1.50,\n  \"mcpServers\": {\n    \"b\": {\"x\": [1,2]},\n    \"a\": {}\n  },\n  \"a\": \"\\u00e9\"\n}\n";
        let mut doc = JsonDoc::parse(text).expect("valid");
        doc.set(
            "mcpServers",
            "cuba-exec",
            &[("command".into(), Value::from("/x"))],
        )
        .expect("object");
        let want = "{\n  \"z\": 1.50,\n  \"mcpServers\": {\n    \"b\": {\"x\": [1,2]},\n    \"a\": {},\n    \"cuba-exec\": {\n      \"command\": \"/x\"\n    }\n  },\n  \"a\": \"\\u00e9\"\n}\n";
        assert_eq!(doc.render(), want);
        assert!(doc.remove("mcpServers", "cuba-exec").expect("object"));
        assert_eq!(
            doc.render(),
            "{\n  \"z\": 1.50,\n  \"mcpServers\": {\n    \"b\": {\"x\": [1,2]},\n    \"a\": {}\n  },\n  \"a\": \"\\u00e9\"\n}\n"
        );
    }

    #[test]
    fn tabs_are_kept() {
        let text = "{\n\t\"servers\": {\n\t\t\"x\": {\n\t\t\t\"command\": \"y\"\n\t\t}\n\t}\n}";
        let mut doc = JsonDoc::parse(text).expect("valid");
        doc.set("servers", "cuba-exec", &[]).expect("object");
        assert_eq!(
            doc.render(),
            "{\n\t\"servers\": {\n\t\t\"x\": {\n\t\t\t\"command\": \"y\"\n\t\t},\n\t\t\"cuba-exec\": {}\n\t}\n}"
        );
    }

    #[test]
    fn not_an_object_is_refused() {
        assert!(JsonDoc::parse("[1]").is_err());
        let mut doc = JsonDoc::parse("{\"mcpServers\": 3}").expect("valid");
        assert!(doc.set("mcpServers", "cuba-exec", &[]).is_err());
        assert!(JsonDoc::parse("{\"a\": }").is_err());
    }
}
