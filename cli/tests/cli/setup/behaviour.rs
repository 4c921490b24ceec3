//! `cubactl setup` across runs and on bad input: idempotence, backups, refusing what does not
//! parse, dry runs, removal, discovery, usage errors, permissions and symlinks.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use super::{assert_ok, files_under, Home, CLAUDE, CODEX, CURSOR};

#[test]
fn second_run_is_unchanged_and_writes_no_backup() {
    let h = Home::new();
    let clients = [
        "--client",
        "claude-code",
        "--client",
        "codex",
        "--client",
        "cursor",
    ];
    assert_ok(&h.setup(&clients));
    let before: Vec<String> = [CLAUDE, CODEX, CURSOR].iter().map(|r| h.read(r)).collect();
    let run = h.setup(&clients);
    assert_ok(&run);
    assert_eq!(run.out.matches("unchanged").count(), 3, "{}", run.out);
    assert!(!run.out.contains("Restart"), "nothing changed: {}", run.out);
    for (rel, text) in [CLAUDE, CODEX, CURSOR].iter().zip(before) {
        assert_eq!(h.read(rel), text);
        assert!(h.backups(rel).is_empty(), "{rel}: {:?}", h.backups(rel));
    }
}

#[test]
fn an_updated_entry_is_backed_up_once() {
    let h = Home::new();
    assert_ok(&h.setup(&["--client", "cursor"]));
    let first = h.read(CURSOR);
    let run = h.setup_with(&h.root.join("bin2"), &["--client", "cursor"]);
    assert_ok(&run);
    assert!(run.out.contains("updated"), "{}", run.out);
    let arrow = format!("command: {} → {}", h.exe("bin"), h.exe("bin2"));
    assert!(run.out.contains(&arrow), "{}", run.out);
    assert_eq!(
        h.json(CURSOR)["mcpServers"]["cuba-exec"]["command"],
        h.exe("bin2")
    );
    let backups = h.backups(CURSOR);
    assert_eq!(backups.len(), 1);
    assert_eq!(fs::read_to_string(&backups[0]).expect("backup"), first);

    // The same again: nothing to back up.
    assert_ok(&h.setup_with(&h.root.join("bin2"), &["--client", "cursor"]));
    assert_eq!(h.backups(CURSOR).len(), 1);
    // Back to the first: the earlier backup is kept, the next goes to `.1`.
    let second = h.read(CURSOR);
    assert_ok(&h.setup(&["--client", "cursor"]));
    let backups = h.backups(CURSOR);
    assert_eq!(backups.len(), 2);
    assert!(
        backups[1].to_string_lossy().ends_with(".bak-cubactl.1"),
        "{backups:?}"
    );
    assert_eq!(fs::read_to_string(&backups[0]).expect("backup"), first);
    assert_eq!(fs::read_to_string(&backups[1]).expect("backup"), second);
}

#[test]
fn a_file_that_does_not_parse_is_left_alone() {
    let h = Home::new();
    let broken = "{ \"mcpServers\": { \"x\": 1 }\n";
    h.write(CURSOR, broken);
    h.write(CODEX, "[mcp_servers\ncommand = 1\n");
    let run = h.setup(&["--client", "cursor", "--client", "codex"]);
    assert_eq!(run.code, 1, "{}", run.out);
    assert!(run.out.contains("failed"), "{}", run.out);
    let cursor = h.path(CURSOR).display().to_string();
    assert!(
        run.err.contains(&format!("{cursor} is not valid JSON")),
        "{}",
        run.err
    );
    assert!(
        run.err.contains("line 2"),
        "serde_json's position: {}",
        run.err
    );
    assert!(run.err.contains("is not valid TOML"), "{}", run.err);
    assert_eq!(h.read(CURSOR), broken);
    assert!(h.backups(CURSOR).is_empty());
    assert!(h.backups(CODEX).is_empty());
}

#[test]
fn dry_run_writes_nothing() {
    let h = Home::new();
    let run = h.setup(&["--dry-run", "--client", "claude-code", "--client", "codex"]);
    assert_ok(&run);
    assert_eq!(run.out.matches("would write").count(), 2, "{}", run.out);
    assert!(run.out.contains("[mcp_servers.cuba-exec]"), "{}", run.out);
    assert!(
        run.out
            .contains(&format!("\"command\": \"{}\"", h.exe("bin"))),
        "{}",
        run.out
    );
    assert!(
        files_under(&h.home()).is_empty(),
        "{:?}",
        files_under(&h.home())
    );

    h.write(CURSOR, "{}\n");
    let run = h.setup(&["--dry-run", "--client", "cursor"]);
    assert_ok(&run);
    assert_eq!(h.read(CURSOR), "{}\n");
    assert!(h.backups(CURSOR).is_empty());
}

#[test]
fn remove_takes_out_only_our_entry() {
    let h = Home::new();
    h.write(
        CURSOR,
        "{\n  \"mcpServers\": {\n    \"other\": {\n      \"command\": \"x\"\n    }\n  },\n  \"keep\": 1\n}\n",
    );
    assert_ok(&h.setup(&["--client", "cursor"]));
    assert!(h.json(CURSOR)["mcpServers"].get("cuba-exec").is_some());
    let run = h.setup(&["--client", "cursor", "--remove"]);
    assert_ok(&run);
    assert!(run.out.contains("removed"), "{}", run.out);
    assert_eq!(
        h.json(CURSOR),
        json!({"mcpServers": {"other": {"command": "x"}}, "keep": 1})
    );
    let run = h.setup(&["--client", "cursor", "--remove"]);
    assert_ok(&run);
    assert!(run.out.contains("unchanged"), "{}", run.out);
    assert!(run.out.contains("no cuba-exec entry"), "{}", run.out);
    // Nothing to remove from a file that is not there, and it is not created.
    assert_ok(&h.setup(&["--client", "windsurf", "--remove"]));
    assert!(!h.path(".codeium").exists());
}

#[test]
fn discovery_sets_up_only_the_clients_present() {
    let h = Home::new();
    fs::create_dir_all(h.path(".cursor")).expect("mkdir");
    fs::create_dir_all(h.path(".codex")).expect("mkdir");
    h.executable(&h.root.join("path/gemini"));
    let run = h.setup(&[]);
    assert_ok(&run);
    assert!(
        run.out
            .contains("found      cursor          ~/.cursor/ exists"),
        "{}",
        run.out
    );
    assert!(
        run.out
            .contains("found      gemini          `gemini` is on PATH"),
        "{}",
        run.out
    );
    assert!(
        run.out
            .contains("not found  claude-code     no ~/.claude.json or ~/.claude/"),
        "{}",
        run.out
    );
    assert!(run.out.contains("not found  zed"), "{}", run.out);
    let mut written: Vec<String> = files_under(&h.home())
        .iter()
        .map(|p| {
            p.strip_prefix(h.home())
                .expect("under home")
                .display()
                .to_string()
        })
        .collect();
    written.sort();
    assert_eq!(written, [CODEX, CURSOR, ".gemini/settings.json"]);
}

#[test]
fn no_client_found_is_an_error() {
    let h = Home::new();
    let run = h.setup(&[]);
    assert_eq!(run.code, 1);
    assert!(run.err.contains("no coding client found"), "{}", run.err);
}

#[test]
fn bad_usage_exits_2() {
    let h = Home::new();
    for args in [
        &["--client", "cursor", "--env", "1A=x"][..],
        &["--client", "cursor", "--env", "NO_EQUALS"],
        &["--client", "cursor", "--env", "A-B=x"],
        &["--client", "cursor", "--remove", "--env", "A=1"],
    ] {
        let run = h.setup(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.err);
    }
    let run = h.setup(&["--client", "emacs"]);
    assert_eq!(run.code, 2);
    assert!(
        run.err.contains("claude-code") && run.err.contains("zed"),
        "{}",
        run.err
    );
    assert!(files_under(&h.home()).is_empty());
}

#[test]
fn a_missing_cuba_exec_is_named() {
    let h = Home::new();
    let run = h.setup_with(&h.root.join("path"), &["--client", "cursor"]);
    assert_eq!(run.code, 1);
    let missing = format!("{}/path/cuba-exec does not exist", h.root.display());
    assert!(run.err.contains(&missing), "{}", run.err);
    assert!(!h.path(".cursor").exists());
}

#[test]
fn mode_kept_and_symlink_followed() {
    let h = Home::new();
    h.write(CURSOR, "{}");
    fs::set_permissions(h.path(CURSOR), fs::Permissions::from_mode(0o644)).expect("chmod");
    assert_ok(&h.setup(&["--client", "cursor"]));
    assert_eq!(h.mode(CURSOR), 0o644);
    assert!(h.json(CURSOR)["mcpServers"].get("cuba-exec").is_some());

    h.write("dotfiles/claude.json", "{\"a\": 1}");
    std::os::unix::fs::symlink(h.path("dotfiles/claude.json"), h.path(CLAUDE)).expect("symlink");
    assert_ok(&h.setup(&["--client", "claude-code"]));
    let link = fs::symlink_metadata(h.path(CLAUDE)).expect("lstat");
    assert!(link.file_type().is_symlink(), "the link stays a link");
    assert_eq!(h.json("dotfiles/claude.json")["a"], 1);
    assert!(h.json("dotfiles/claude.json")["mcpServers"]
        .get("cuba-exec")
        .is_some());
    assert_eq!(h.backups("dotfiles/claude.json").len(), 1);
}

#[test]
fn each_client_set_up_is_told_how_to_see_it_work() {
    let h = Home::new();
    let run = h.setup(&["--dry-run", "--client", "claude-code", "--client", "codex"]);
    assert_ok(&run);
    assert!(!run.out.contains("To see that it works"), "{}", run.out);
    for _ in 0..2 {
        // Written, then unchanged: both runs end with the check for each client.
        let run = h.setup(&["--client", "claude-code", "--client", "codex"]);
        assert_ok(&run);
        let (_, tail) = run
            .out
            .split_once("To see that it works:")
            .unwrap_or_else(|| panic!("no checks: {}", run.out));
        assert!(
            tail.contains("claude-code") && tail.contains("`claude mcp list`"),
            "{tail}"
        );
        assert!(tail.contains("codex") && tail.contains("/mcp"), "{tail}");
        assert!(!tail.contains("cursor"), "{tail}");
    }
    let run = h.setup(&["--remove", "--client", "claude-code"]);
    assert_ok(&run);
    assert!(!run.out.contains("To see that it works"), "{}", run.out);
}

#[test]
fn a_directory_that_may_vanish_is_named() {
    let h = Home::new();
    // A cargo target directory, a uv cache (CACHEDIR.TAG above the programs) and npx's cache.
    for (dir, tag) in [
        ("target/release", Some("target")),
        ("uv/archive-v0/x/bin", Some("uv")),
        (".npm/_npx/1a2b/node_modules/@cuba-exec/linux-x64/bin", None),
    ] {
        let bin = h.root.join(dir);
        fs::create_dir_all(&bin).expect("mkdir");
        h.executable(&bin.join("cuba-exec"));
        if let Some(tag) = tag {
            fs::write(
                h.root.join(tag).join("CACHEDIR.TAG"),
                "Signature: 8a477f597d28d172789f06886806bc55\n",
            )
            .expect("tag");
        }
        let run = h.setup_with(&bin, &["--dry-run", "--client", "cursor"]);
        assert_ok(&run);
        assert!(
            run.err.contains("note:") && run.err.contains("docs/install.md"),
            "{dir}: {}",
            run.err
        );
    }
    let run = h.setup(&["--dry-run", "--client", "cursor"]);
    assert_ok(&run);
    assert!(!run.err.contains("note:"), "{}", run.err);
}
