//! `setup --sandbox`: writes the sandbox preset into the settings file (`config.toml`), the one
//! a person can leave on — writes confined to the workspace, secrets masked, the network only
//! through the daemon's proxy to the package registries, any other host asked about. The file
//! is edited with toml_edit, so every other setting and comment stays; a key already set is
//! left as the person wrote it and said so.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Result};
use toml_edit::{value, Array, DocumentMut, Item, Table};

use super::files;

/// The package registries (and the hosts their downloads come from) a build reaches.
pub const REGISTRIES: [&str; 16] = [
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "pypi.org",
    "files.pythonhosted.org",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "proxy.golang.org",
    "sum.golang.org",
    "rubygems.org",
    "repo.maven.apache.org",
    "repo1.maven.org",
    "plugins.gradle.org",
    "github.com",
    "codeload.github.com",
    "objects.githubusercontent.com",
];

/// What the preset sets at the top level, and what it means, for the report.
const KEYS: [(&str, &str, &str); 2] = [
    (
        "sandbox",
        "workspace-write",
        "writes only in the workspace and temp dirs; credentials, histories and cuba-exec's own files masked",
    ),
    (
        "network",
        "proxy",
        "no route out but the daemon's proxy",
    ),
];

/// Writes (or with `remove`, takes out) the preset in `file`; `dry_run` prints it only.
pub fn run(file: &Path, remove: bool, dry_run: bool) -> Result<ExitCode> {
    let original = files::read(file)?;
    let mut doc: DocumentMut = match &original {
        Some(text) => text.parse().map_err(|e| {
            anyhow::anyhow!("{} does not parse, left as it is: {e}", file.display())
        })?,
        None => DocumentMut::new(),
    };
    let said = match remove {
        false => put(&mut doc),
        true => take(&mut doc),
    };
    for line in &said {
        outln!("{line}")?;
    }
    let text = doc.to_string();
    if original.as_deref() == Some(text.as_str()) {
        outln!("{}: nothing to change", file.display())?;
        return Ok(ExitCode::SUCCESS);
    }
    if dry_run {
        outln!("\n{} would read:\n{text}", file.display())?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if let Some(text) = &original {
        let backup = files::backup(file, text)?;
        outln!("saved the old file as {}", backup.display())?;
    }
    files::replace(file, &text, original.as_deref())?;
    outln!(
        "wrote {}\nIt applies from the daemon's next start: `cubactl daemon restart` (running \
         commands keep going). `cubactl daemon status` then shows the sandbox.",
        file.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Sets each key the file does not have; one line per key.
fn put(doc: &mut DocumentMut) -> Vec<String> {
    let mut said = Vec::new();
    for (key, val, means) in KEYS {
        match doc.get(key) {
            Some(have) => said.push(format!(
                "kept      {key} = {} (yours; the preset has {val:?})",
                have.to_string().trim()
            )),
            None => {
                doc[key] = value(val);
                said.push(format!("set       {key} = {val:?}: {means}"));
            }
        }
    }
    match doc.get("proxy") {
        Some(_) => said.push("kept      [proxy] (yours)".into()),
        None => {
            let mut proxy = Table::new();
            let mut allow = Array::new();
            for host in REGISTRIES {
                allow.push(host);
            }
            allow.set_trailing_comma(true);
            proxy["allow"] = value(allow);
            proxy["unknown"] = value("ask");
            doc["proxy"] = Item::Table(proxy);
            said.push(format!(
                "set       [proxy] allow = the {} package registry hosts, unknown = \"ask\": \
                 another host is asked about (cubactl approve / your client's form)",
                REGISTRIES.len()
            ));
        }
    }
    said
}

/// Takes out each key that still holds the preset's value; one line per key.
fn take(doc: &mut DocumentMut) -> Vec<String> {
    let mut said = Vec::new();
    for (key, val, _) in KEYS {
        if doc.get(key).and_then(Item::as_str) == Some(val) {
            doc.remove(key);
            said.push(format!("removed   {key}"));
        }
    }
    let ours = doc
        .get("proxy")
        .and_then(Item::as_table)
        .and_then(|t| t.get("allow"))
        .and_then(Item::as_array)
        .is_some_and(|a| a.iter().filter_map(|v| v.as_str()).eq(REGISTRIES));
    if ours {
        doc.remove("proxy");
        said.push("removed   [proxy]".into());
    }
    said
}

/// The settings file this cubactl's daemon reads.
pub fn settings_file() -> Result<std::path::PathBuf> {
    match cuba_protocol::paths::config_file(&|k| std::env::var(k).ok()) {
        Some((file, _)) => Ok(file),
        None => bail!("no settings file here: set CUBA_EXEC_CONFIG or HOME"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_preset_keeps_what_is_there_and_comes_out_again() {
        let mut doc: DocumentMut = "# mine\nmax_procs = 5\nnetwork = false\n".parse().unwrap();
        let said = put(&mut doc);
        let text = doc.to_string();
        assert!(
            text.starts_with("# mine\nmax_procs = 5\nnetwork = false\n"),
            "{text}"
        );
        assert!(text.contains("sandbox = \"workspace-write\""), "{text}");
        assert!(
            text.contains("[proxy]") && text.contains("\"pypi.org\""),
            "{text}"
        );
        assert!(
            said.iter().any(|l| l.starts_with("kept      network")),
            "{said:?}"
        );
        let again = doc.to_string();
        put(&mut doc);
        assert_eq!(doc.to_string(), again, "a second run changes nothing");
        take(&mut doc);
        assert_eq!(doc.to_string(), "# mine\nmax_procs = 5\nnetwork = false\n");
    }
}
