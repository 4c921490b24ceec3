#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::platform::exec_check::{target, Run};

fn exec_of(path: &Path) -> Exec {
    let t = target(path);
    Exec {
        pid: std::process::id() as i32,
        path: path.display().to_string(),
        target: t,
        ..Exec::default()
    }
}

fn rules(blocked: &[&str]) -> ExecRules {
    let policy = Policy {
        blocked: blocked.iter().map(|s| s.to_string()).collect(),
        ..Policy::default()
    };
    ExecRules::new(&Effective::daemon(&policy), false)
}

#[test]
fn a_blocked_program_is_known_by_name_link_identity_and_copy() {
    let dir = tempfile::tempdir().unwrap();
    let r = rules(&["rm"]);
    let rm = Path::new("/usr/bin/rm");
    assert_eq!(r.refusal(&exec_of(rm)).map(|x| x.rule), Some("blocklist"));
    // A link with another name: the file it names is rm.
    let link = dir.path().join("zap");
    std::os::unix::fs::symlink(rm, &link).unwrap();
    assert!(r.refusal(&exec_of(&link)).is_some());
    // A copy: same size and content.
    let copy = dir.path().join("del");
    std::fs::copy(rm, &copy).unwrap();
    let refusal = r.refusal(&exec_of(&copy)).unwrap();
    assert!(
        refusal.message.contains("a copy of `rm`"),
        "{}",
        refusal.message
    );
    // A copy changed by a byte is another program.
    let mut bytes = std::fs::read(rm).unwrap();
    bytes.push(0);
    let other = dir.path().join("other");
    std::fs::write(&other, bytes).unwrap();
    assert!(r.refusal(&exec_of(&other)).is_none());
    // What is not blocked goes on; a path that names no file is left to the kernel.
    assert!(r.refusal(&exec_of(Path::new("/usr/bin/true"))).is_none());
    assert!(r.refusal(&exec_of(&dir.path().join("nothing"))).is_none());
}

#[test]
fn the_interpreter_of_a_script_is_checked_too() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("k");
    std::fs::write(&script, "#!/usr/bin/rm -f\n").unwrap();
    std::fs::set_permissions(&script, PermissionsExt::from_mode(0o755)).unwrap();
    let mut e = exec_of(&script);
    e.interpreters
        .push(target(Path::new("/usr/bin/rm")).unwrap());
    let refusal = rules(&["rm"]).refusal(&e).unwrap();
    assert!(
        refusal.message.contains("the interpreter of"),
        "{}",
        refusal.message
    );
}

#[test]
fn setuid_programs_are_refused_only_without_privileges() {
    let su = Path::new("/usr/bin/su");
    // Debian's su is setuid root; a machine without it has nothing to test here.
    let Some(t) = target(su).filter(|t| t.mode & libc::S_ISUID != 0) else {
        cuba_tests::machine::skip("setuid su", "no setuid /usr/bin/su on this machine");
        return;
    };
    drop(t);
    let policy = Effective::daemon(&Policy::default());
    let r = ExecRules::new(&policy, true);
    let refusal = r.refusal(&exec_of(su)).unwrap();
    assert_eq!((refusal.rule, refusal.errno), ("privileges", libc::EPERM));
    assert!(refusal.message.contains("exec_checks"));
    assert!(ExecRules::new(&policy, false)
        .refusal(&exec_of(su))
        .is_none());
}

#[test]
fn what_a_loader_or_a_multi_call_binary_is_told_to_run_is_checked() {
    let r = rules(&["rm"]);
    // `ld.so /usr/bin/rm …`: the loader maps rm without an exec of its own.
    let mut e = exec_of(Path::new("/usr/bin/env"));
    e.runs.push(Run {
        target: target(Path::new("/usr/bin/rm")).unwrap(),
        argv: vec!["/usr/bin/rm".into()],
    });
    let refusal = r.refusal(&e).unwrap();
    assert!(
        refusal.message.contains("(given to env to run)"),
        "{}",
        refusal.message
    );
    // One whose arguments could not all be read runs what is not known.
    let mut e = exec_of(Path::new("/usr/bin/env"));
    e.runs_unknown = true;
    assert_eq!(r.refusal(&e).map(|x| x.rule), Some("unreadable"));
    // `busybox rm …`, or a copy of it called `rm` by its argv[0], or any name.
    let Some(bb) = target(Path::new("/bin/busybox")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("bb");
    std::fs::copy("/bin/busybox", &copy).unwrap();
    for (path, argv) in [
        ("/bin/busybox", ["busybox", "rm"]),
        ("/bin/busybox", ["rm", "-f"]),
        (copy.to_str().unwrap(), ["bb", "rm"]),
    ] {
        let mut e = exec_of(Path::new(path));
        assert!(r.wants_argv(e.target.as_ref().unwrap()), "{path}");
        e.argv = Some(argv.iter().map(|a| a.to_string()).collect());
        let refusal = r.refusal(&e).unwrap();
        assert!(
            refusal.message.contains("`rm` (run by "),
            "{}",
            refusal.message
        );
    }
    let mut e = exec_of(Path::new("/bin/busybox"));
    e.argv = Some(vec!["busybox".into(), "ls".into()]);
    assert!(r.refusal(&e).is_none());
    drop(bb);
}

#[test]
fn a_file_the_daemon_cannot_read_is_refused() {
    let mut e = exec_of(Path::new("/usr/bin/true"));
    if let Some(t) = e.target.as_mut() {
        t.readable = false;
    }
    let r = rules(&["rm"]);
    assert_eq!(r.refusal(&e).map(|x| x.rule), Some("unreadable"));
    // The size of a blocked program: the blocklist's refusal, as it could be a copy.
    let mut e = exec_of(Path::new("/usr/bin/rm"));
    let size = e.target.as_ref().unwrap().size;
    let dir = tempfile::tempdir().unwrap();
    let same = dir.path().join("same-size");
    std::fs::write(&same, vec![0u8; size as usize]).unwrap();
    e = exec_of(&same);
    if let Some(t) = e.target.as_mut() {
        t.readable = false;
    }
    let refusal = r.refusal(&e).unwrap();
    assert!(
        refusal.rule == "blocklist" && refusal.message.contains("cannot be told from a copy"),
        "{refusal:?}"
    );
}

#[test]
fn an_allowlist_asks_once_whether_the_caller_is_a_shell() {
    let policy = Policy {
        allowed: Some(["ls".to_string()].into_iter().collect()),
        ..Policy::default()
    };
    let r = ExecRules::new(&Effective::daemon(&policy), false);
    // This test binary is not a shell: what it runs is not held to the allowlist.
    let e = exec_of(Path::new("/usr/bin/true"));
    assert!(r.refusal(&e).is_none());
    assert_eq!(e.shell_caller.get(), Some(false));
    // Known to be a shell (a check after an exec carries what the check found).
    e.shell_caller.set(Some(true));
    assert_eq!(r.refusal(&e).map(|x| x.rule), Some("allowlist"));
}

#[test]
fn an_exec_that_matches_an_ask_pattern_is_asked_about_by_its_arguments() {
    let policy = Policy {
        ask: crate::base::policy::AskRules {
            commands: vec!["git push".into(), "true *".into()],
            ..Default::default()
        },
        ..Policy::default()
    };
    let r = ExecRules::new(&Effective::daemon(&policy), false);
    let t = |p: &str| target(Path::new(p)).unwrap();
    assert!(r.wants_argv(&t("/usr/bin/true")) && !r.wants_argv(&t("/usr/bin/env")));
    let mut e = exec_of(Path::new("/usr/bin/true"));
    // Without its arguments read, nothing to match beyond the name.
    assert!(matches!(r.decide(&e), Verdict::Allow));
    e.argv = Some(vec!["true".into(), "x".into()]);
    match r.decide(&e) {
        Verdict::Ask(rule) => assert_eq!(rule, "ask_commands: true *"),
        other => panic!("{other:?}"),
    }
    // A refusal wins over an ask.
    let policy = Policy {
        blocked: ["true".to_string()].into_iter().collect(),
        ..policy
    };
    let r = ExecRules::new(&Effective::daemon(&policy), false);
    assert!(matches!(r.decide(&e), Verdict::Refuse(_)));
}
