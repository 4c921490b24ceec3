//! The documents say what the code does: every `CUBA_EXEC_*` variable a program reads is in the
//! settings documents (docs/config.md, and the policy table of docs/security.md), and every
//! one docs/config.md names is read by a program.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `CUBA_EXEC_*` names in `text`: `CUBA_EXEC_` and the capitals and `_` after it (a name
/// ending in `_`, as in `CUBA_EXEC_RLIMIT_*`, is a family).
fn names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("CUBA_EXEC_") {
        let tail = &rest[i + "CUBA_EXEC_".len()..];
        let len = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        if len > 0 {
            out.insert(format!("CUBA_EXEC_{}", &tail[..len]));
        }
        rest = &tail[len..];
    }
    out
}

/// What the programs read: the names in string literals of their sources.
fn read_by_the_code() -> BTreeSet<String> {
    let mut files = Vec::new();
    for krate in ["protocol", "daemon", "shim", "cli"] {
        rust_files(&workspace().join(krate).join("src"), &mut files);
    }
    let mut out = BTreeSet::new();
    for f in files {
        let text = fs::read_to_string(&f).unwrap();
        for lit in text.split('"').skip(1).step_by(2) {
            if lit.starts_with("CUBA_EXEC_") && names(lit).len() == 1 && !lit.contains(' ') {
                out.extend(names(lit).into_iter().filter(|n| !n.ends_with('_')));
            }
        }
    }
    out
}

#[test]
fn every_setting_the_code_reads_is_documented_and_no_other() {
    let code = read_by_the_code();
    assert!(code.len() > 40, "the scan found too few: {code:?}");
    let config = fs::read_to_string(workspace().join("docs/config.md")).unwrap();
    let security = fs::read_to_string(workspace().join("docs/security.md")).unwrap();
    let documented: BTreeSet<String> = names(&config).union(&names(&security)).cloned().collect();
    let undocumented: Vec<&String> = code.iter().filter(|n| !documented.contains(*n)).collect();
    assert!(
        undocumented.is_empty(),
        "read by the code, in neither docs/config.md nor docs/security.md: {undocumented:?}"
    );
    let stale: Vec<String> = names(&config)
        .into_iter()
        .filter(|n| match n.ends_with('_') {
            true => !code.iter().any(|c| c.starts_with(n.as_str())),
            false => !code.contains(n),
        })
        .collect();
    assert!(
        stale.is_empty(),
        "docs/config.md names what no program reads: {stale:?}"
    );
}
