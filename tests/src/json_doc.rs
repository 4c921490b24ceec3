//! docs/json.md, read as the tests check it: the fields of a process, and where each appears.

use std::collections::BTreeSet;
use std::path::Path;

/// The fields of the table "A process": (name, in `--json`, in MCP).
pub fn fields() -> Vec<(String, bool, bool)> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/json.md");
    let text = std::fs::read_to_string(&doc).expect("docs/json.md");
    text.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let name = cells[1].trim_matches('`').to_string();
            (
                name,
                cells[3].starts_with("yes"),
                cells[4].starts_with("yes"),
            )
        })
        .collect()
}

/// The names documented for `--json` (`cli`) or for MCP.
pub fn names(cli: bool) -> BTreeSet<String> {
    fields()
        .into_iter()
        .filter(|(_, c, m)| if cli { *c } else { *m })
        .map(|(n, _, _)| n)
        .collect()
}

/// The documented states.
pub const STATES: [&str; 10] = [
    "running",
    "waiting_input",
    "awaiting_approval",
    "denied",
    "exited",
    "signaled",
    "timed_out",
    "killed",
    "failed_to_start",
    "lost",
];

/// The first ```json block of the page (the `--json` example), parsed.
pub fn example() -> serde_json::Value {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/json.md");
    let text = std::fs::read_to_string(doc).expect("docs/json.md");
    let start = text.find("```json\n").expect("an example") + 8;
    let end = start + text[start..].find("```").expect("its end");
    serde_json::from_str(&text[start..end]).expect("the example is JSON")
}

/// Panics naming the keys of `object` that the page does not document among `known`.
pub fn assert_documented(object: &serde_json::Value, known: &BTreeSet<String>, what: &str) {
    let keys: Vec<&String> = object
        .as_object()
        .unwrap_or_else(|| panic!("{what}: not an object: {object}"))
        .keys()
        .filter(|k| !known.contains(*k))
        .collect();
    assert!(
        keys.is_empty(),
        "{what}: undocumented in docs/json.md: {keys:?} in {object}"
    );
    if let Some(state) = object.get("state").and_then(|s| s.as_str()) {
        assert!(
            STATES.contains(&state),
            "{what}: state {state:?} is not documented"
        );
    }
    if let Some(signal) = object.get("signal").and_then(|s| s.as_str()) {
        assert!(signal.starts_with("SIG"), "{what}: signal {signal:?}");
    }
}
