//! The source layout holds: within every directory of every crate's `src/`, the files and
//! folders (its "rooms") refer to each other in one direction only (no import circle), and no
//! source file is longer than a reader can hold (code before `#[cfg(test)]`). A reference is a
//! `crate::` path naming a room of the top level, `crate::dir::` naming a room of `dir/`, or a
//! `super::` path from a file directly inside the directory.
//!
//! The daemon's top level is also a house of ordered floors ([`DAEMON_FLOORS`]), one per
//! purpose: each room on one floor, and a room refers only to rooms on floors below its own; a
//! new room is placed by hand, and the house may not grow past [`MAX_FLOORS`]. Inside a floor,
//! its rooms refer to each other in one direction, as everywhere.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Longest source file, in lines of code before its tests.
const MAX_LINES: usize = 450;
const CRATES: [&str; 4] = ["protocol", "daemon", "shim", "cli"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A file's code before its tests, with line comments blanked (lines kept).
fn code(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap();
    let body = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    body.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The first path segment after each `prefix` in `body`, with one level of `{a, b::c}`
/// expanded.
fn segments_after(body: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(is_ident) {
            continue;
        }
        if let Some(inner) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = inner
                .char_indices()
                .find(|(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map_or(inner.len(), |(i, _)| i);
            let mut depth = 0;
            let mut part = String::new();
            for c in inner[..end].chars().chain([',']) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        let seg: String =
                            part.trim().chars().take_while(|c| is_ident(*c)).collect();
                        out.push(seg);
                        part.clear();
                        continue;
                    }
                    _ => {}
                }
                part.push(c);
            }
        } else {
            out.push(rest.chars().take_while(|c| is_ident(*c)).collect());
        }
    }
    out
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The rooms of directory `dir` (module path `module`, e.g. `"handlers::"` or `""`) and the
/// rooms each refers to.
fn arrows(dir: &Path, module: &str) -> BTreeMap<String, BTreeSet<String>> {
    // A room is a file, a folder, or both (`x.rs` beside `x/`): all their files.
    let mut rooms: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            rooms.entry(name).or_default().extend(rust_files(&path));
        } else if let Some(stem) = name.strip_suffix(".rs") {
            if !["mod", "lib", "main"].contains(&stem) {
                rooms.entry(stem.to_string()).or_default().push(path);
            }
        }
    }
    let mut edges = BTreeMap::new();
    for (room, files) in &rooms {
        let mut refs = BTreeSet::new();
        for file in files {
            let body = code(file);
            refs.extend(segments_after(&body, &format!("crate::{module}")));
            // `super::` from a file directly inside the directory names one of its rooms.
            if !module.is_empty() && file.parent() == Some(dir) {
                refs.extend(segments_after(&body, "super::"));
            }
        }
        let targets = refs
            .into_iter()
            .filter(|r| r != room && rooms.contains_key(r))
            .collect();
        edges.insert(room.clone(), targets);
    }
    edges
}

/// Rooms that reach themselves through others.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&str> = edges[from].iter().map(String::as_str).collect();
        while let Some(r) = todo.pop() {
            if seen.insert(r.to_string()) {
                todo.extend(edges.get(r).into_iter().flatten().map(String::as_str));
            }
        }
        seen
    };
    edges
        .keys()
        .filter(|room| reach(room).contains(*room))
        .cloned()
        .collect()
}

fn directories(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(directories(&path));
        }
    }
    out
}

#[test]
fn no_import_circle_in_any_crate() {
    let mut found = Vec::new();
    for krate in CRATES {
        let src = workspace().join(krate).join("src");
        for dir in directories(&src) {
            let rel = dir.strip_prefix(&src).unwrap();
            let module: String = rel
                .components()
                .map(|c| format!("{}::", c.as_os_str().to_string_lossy()))
                .collect();
            let edges = arrows(&dir, &module);
            let inside = circles(&edges);
            if !inside.is_empty() {
                found.push(format!(
                    "{krate}/src/{}: {}",
                    rel.display(),
                    inside.join(" <-> ")
                ));
            }
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn no_source_file_is_too_long() {
    let mut long = Vec::new();
    for krate in CRATES {
        for file in rust_files(&workspace().join(krate).join("src")) {
            let lines = code(&file).lines().count();
            if lines > MAX_LINES {
                long.push(format!("{} ({lines} lines)", file.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The rooms of `daemon/src`, by floor from the ground up: one floor per purpose, each using
/// only those below it.
const DAEMON_FLOORS: &[(&str, &[&str])] = &[
    ("settings and leaves", &["base"]),
    ("the OS", &["platform"]),
    ("a process's parts", &["parts"]),
    ("what the daemon keeps", &["state"]),
    ("running processes", &["processes"]),
    ("serving clients", &["serving"]),
    ("the program", &["main_unix", "main_windows"]),
];
/// The most floors the daemon's house may have.
const MAX_FLOORS: usize = 8;

#[test]
fn the_daemon_is_a_house_of_ordered_floors() {
    assert!(
        DAEMON_FLOORS.len() <= MAX_FLOORS,
        "{} floors; at most {MAX_FLOORS}",
        DAEMON_FLOORS.len()
    );
    let floor_of: BTreeMap<&str, usize> = DAEMON_FLOORS
        .iter()
        .enumerate()
        .flat_map(|(i, (_, rooms))| rooms.iter().map(move |r| (*r, i)))
        .collect();
    let edges = arrows(&workspace().join("daemon").join("src"), "");
    let mut wrong = Vec::new();
    for (room, refs) in &edges {
        let Some(&floor) = floor_of.get(room.as_str()) else {
            wrong.push(format!("{room} is on no floor: place it in DAEMON_FLOORS"));
            continue;
        };
        for r in refs {
            let to = floor_of.get(r.as_str()).copied().unwrap_or(usize::MAX);
            if to >= floor {
                wrong.push(format!(
                    "{room} ({}) refers to {r} ({}), not below it",
                    DAEMON_FLOORS[floor].0,
                    DAEMON_FLOORS.get(to).map_or("no floor", |f| f.0)
                ));
            }
        }
    }
    for room in floor_of.keys() {
        if !edges.contains_key(*room) {
            wrong.push(format!("{room} is on a floor but not in daemon/src"));
        }
    }
    assert!(
        wrong.is_empty(),
        "the floors do not hold:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_checker_sees_a_circle_and_paths_in_braces() {
    let refs = segments_after(
        "use crate::{a::X, b, c::{d, e}};\nlet x = my_crate::z;",
        "crate::",
    );
    assert_eq!(refs, ["a", "b", "c"]);
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(circles(&edges), ["a", "b", "c"]);
}

/// Every room of a floor of `daemon/src`, as ARCHITECTURE.md's map must name it: `x/` or `x.rs`.
fn daemon_rooms() -> Vec<String> {
    let src = workspace().join("daemon").join("src");
    let mut rooms = Vec::new();
    for (_, floor) in DAEMON_FLOORS {
        for group in floor.iter() {
            let dir = src.join(group);
            if !dir.is_dir() {
                continue;
            }
            rooms.push(format!("{group}/"));
            if *group == "platform" {
                continue;
            }
            for entry in fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                // `x/` beside `x.rs` is that room's: the map names `x.rs`.
                let beside = dir.join(format!("{name}.rs"));
                match path.is_dir() {
                    true if beside.exists() => {}
                    true => rooms.push(format!("{name}/")),
                    false if name != "mod.rs" => rooms.push(name),
                    false => {}
                }
            }
        }
    }
    rooms
}

#[test]
fn the_architecture_map_names_every_room_and_no_other() {
    let text = fs::read_to_string(workspace().join("ARCHITECTURE.md")).unwrap();
    let start = text.find("## The daemon's layers").unwrap();
    let rest = &text[start..];
    let open = rest.find("```\n").unwrap() + 4;
    let map = &rest[open..open + rest[open..].find("```").unwrap()];
    let rooms = daemon_rooms();
    let missing: Vec<&String> = rooms.iter().filter(|r| !map.contains(r.as_str())).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's map lacks {missing:?}"
    );
    // And nothing it names is gone: each `x.rs` or `x/` of the map is there.
    let named: BTreeSet<String> = map
        .split(|c: char| !(is_ident(c) || c == '.' || c == '/'))
        .filter(|w| w.ends_with(".rs") || (w.ends_with('/') && w.len() > 1 && !w.contains("::")))
        .map(|w| w.trim_start_matches('/').to_string())
        .collect();
    // (a file inside a room may be named too: it must be there)
    let src = workspace().join("daemon").join("src");
    let mut there: BTreeSet<String> = rust_files(&src)
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    there.extend(
        directories(&src)
            .iter()
            .map(|d| format!("{}/", d.file_name().unwrap().to_string_lossy())),
    );
    let gone: Vec<&String> = named.iter().filter(|w| !there.contains(*w)).collect();
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md's map names what is not there: {gone:?}"
    );
}
