//! The genuine programs' pure parts (a command line and a prompt as shown, what is found) and
//! the check against this test's own process.

#![allow(clippy::unwrap_used)]

use super::shown::MAX_CMDLINE;
use super::*;

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

#[test]
fn a_command_line_names_the_program_and_quotes_what_would_blur() {
    let args = strings(&[
        "/usr/lib/git-core/git-remote-http",
        "origin",
        "http://127.0.0.1:4321/repo",
    ]);
    assert_eq!(
        command_line(&args),
        "git-remote-http origin http://127.0.0.1:4321/repo"
    );
    let args = strings(&["sudo", "-A", "sh", "-c", "echo 'hi' there", ""]);
    assert_eq!(
        command_line(&args),
        r"sudo -A sh -c 'echo '\''hi'\'' there' ''"
    );
}

#[test]
fn a_command_line_is_escaped_and_shortened() {
    let args = strings(&["ssh", "host\u{1b}[2J\nfake line"]);
    assert_eq!(command_line(&args), r"ssh 'host\u{1b}[2J\nfake line'");
    let long = "x".repeat(500);
    let shown = command_line(&strings(&["git", &long]));
    assert_eq!(shown.chars().count(), MAX_CMDLINE + 1);
    assert!(shown.starts_with("git xxx") && shown.ends_with('…'));
    // Cut at a character, never inside one.
    assert_eq!(shortened("ééé", 2), "éé…");
    assert_eq!(shortened("abc", 3), "abc");
}

#[test]
fn a_prompt_keeps_its_lines_but_not_its_escapes() {
    assert_eq!(
        escaped("Host key:\n\tSHA256:x\r\u{7}ok? ", true),
        r"Host key:
	SHA256:x\r\u{7}ok? "
    );
}

#[test]
fn finds_the_helper_beside_the_program_and_the_programs_on_path() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("cubad");
    std::fs::write(&exe, "").unwrap();
    let none = Genuine::find(&exe, Some(OsStr::new("")));
    assert!(none.helper.is_none());
    std::fs::write(dir.path().join("cuba-askpass"), "").unwrap();
    // A `git` in a directory of PATH is taken; a `sudo` that is not setuid root is not.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::write(bin.join("git"), "").unwrap();
    std::fs::write(bin.join("sudo"), "").unwrap();
    let g = Genuine::find(&exe, Some(bin.as_os_str()));
    assert!(g.helper.is_some(), "{g:?}");
    assert!(
        g.programs.iter().any(|k| k.path == bin.join("git")),
        "{g:?}"
    );
    assert!(
        !g.programs.iter().any(|k| k.path == bin.join("sudo")),
        "{g:?}"
    );
    // Listed once however many paths lead to it.
    let mut ids: Vec<(u64, u64)> = g.programs.iter().map(|k| (k.id.dev, k.id.ino)).collect();
    let all = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), all);
}

#[test]
fn the_helper_is_known_by_its_file() {
    let me = std::process::id() as i32;
    let exe = std::env::current_exe().unwrap();
    // No cuba-askpass beside this test's program.
    let none = Genuine::find(&exe, None).helper(Some(me)).unwrap_err();
    assert!(
        none.why.contains("cuba-askpass was not found"),
        "{}",
        none.why
    );
    assert!(Genuine::find(&exe, None).helper(None).is_err());
    // This test's program as the helper (by a link, as an installed one may be): it is.
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&exe, dir.path().join("cuba-askpass")).unwrap();
    let g = Genuine::find(&dir.path().join("cubad"), None);
    match g.helper(Some(me)) {
        Ok(program) => assert_eq!(Path::new(&program), exe),
        // Run with a loader variable naming files this user may write (cargo's own).
        Err(no) => assert!(no.why.contains("was started with LD_"), "{}", no.why),
    }
    // Another program is not.
    let mut other = std::process::Command::new("sleep")
        .arg("5")
        .spawn()
        .unwrap();
    let no = g.helper(Some(other.id() as i32)).unwrap_err();
    assert!(no.why.contains("is not cuba-askpass"), "{}", no.why);
    other.kill().unwrap();
    other.wait().unwrap();
}

#[test]
fn a_helper_run_by_a_program_that_is_not_genuine_is_refused() {
    let g = Genuine::find(&std::env::current_exe().unwrap(), None);
    let me = std::process::id() as i32;
    // This test, run by cargo or a shell: none of the programs that ask for passwords.
    let no = g.check(me, &Ok("cuba-askpass".into())).err().unwrap();
    assert!(
        no.why.contains("is not a genuine sudo, ssh or git"),
        "{}",
        no.why
    );
    assert_ne!(no.pid, me);
    // A helper refused when it connected stays refused.
    let judged = Err(Refusal::new(me, "x", "not the helper"));
    assert_eq!(g.check(me, &judged).err().unwrap().why, "not the helper");
}

#[test]
fn a_file_is_known_by_its_identity_not_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    std::fs::write(&a, "x").unwrap();
    let k = Known::at(&a, "a").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&a, &link).unwrap();
    assert!(k.is(&std::fs::metadata(&link).unwrap()));
    // Another file put at its path: not this one (only root could make it so).
    let b = dir.path().join("b");
    std::fs::write(&b, "y").unwrap();
    std::fs::rename(&b, &a).unwrap();
    let other = std::fs::metadata(&a).unwrap();
    assert_eq!(k.is(&other), k.root_only && root_only(&a));
}

#[test]
fn only_roots_files_in_roots_directories_are_roots_alone() {
    // /tmp is anyone's to write in, so nothing under it is root's alone, existing or not.
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    assert!(!root_only(dir.path()));
    assert!(!root_only(&dir.path().join("not/yet")));
    assert!(!root_only(Path::new("relative/lib")));
    assert!(!root_only(Path::new("")));
    // The system's own directories are, where root owns them (as on any ordinary machine).
    let usr = std::fs::metadata("/usr").unwrap();
    use std::os::unix::fs::MetadataExt;
    if usr.uid() == 0 && usr.mode() & 0o022 == 0 {
        assert!(root_only(Path::new("/usr")));
        assert!(root_only(Path::new("/usr/no-such-dir/lib")));
    }
}
