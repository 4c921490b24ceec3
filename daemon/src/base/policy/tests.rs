//! The bypass corpus: each line is shell text and the exact decision the policy must reach
//! (the rule, and the sub-command that tripped it), under the default blocklist or an
//! allowlist.
#![allow(clippy::unwrap_used)]

use super::*;

/// `None`: allowed. `Some((rule, offending))`: refused.
pub(super) type Expect = Option<(&'static str, &'static str)>;

pub(super) const fn block(offending: &'static str) -> Expect {
    Some(("blocklist", offending))
}

/// Under the default blocklist.
pub(super) const BLOCKLIST_CORPUS: &[(&str, Expect)] = &[
    ("rm -rf /", block("rm -rf /")),
    ("/bin/rm x", block("/bin/rm x")),
    ("./rm x", block("./rm x")),
    ("r''m x", block("r''m x")),
    ("\\rm x", block("\\rm x")),
    ("\"rm\" x", block("\"rm\" x")),
    ("echo ok; rm x", block("rm x")),
    ("true && rm x", block("rm x")),
    ("false || rm x", block("rm x")),
    ("ls | xargs rm", block("rm")),
    ("ls | xargs -I{} -n 1 rm {}", block("rm {}")),
    ("$(rm x)", block("rm x")),
    ("`rm x`", block("rm x")),
    ("echo \"$(rm x)\"", block("rm x")),
    ("(rm x)", block("rm x")),
    ("{ rm x; }", block("rm x")),
    ("sudo rm x", block("rm x")),
    ("sudo -u root -- rm x", block("rm x")),
    ("doas rm x", block("rm x")),
    ("env FOO=1 rm x", block("rm x")),
    ("env -i -u HOME FOO=1 /usr/bin/rm x", block("/usr/bin/rm x")),
    ("env -S 'rm x'", block("rm x")),
    ("nice -n 5 rm x", block("rm x")),
    ("timeout 5 rm x", block("rm x")),
    ("timeout -s KILL 5 rm x", block("rm x")),
    ("nohup rm x &", block("rm x")),
    ("time rm x", block("rm x")),
    ("command rm x", block("rm x")),
    ("exec rm x", block("rm x")),
    ("builtin eval 'rm x'", block("rm x")),
    ("busybox rm x", block("rm x")),
    ("find . -name '*.o' -exec rm {} \\;", block("rm {}")),
    ("find . -execdir chmod 600 {} +", block("chmod 600 {}")),
    ("sh -c 'rm x'", block("rm x")),
    ("bash -c \"echo; rm x\"", block("rm x")),
    ("bash -ec 'rm x'", block("rm x")),
    ("sh -c \"sh -c 'rm x'\"", block("rm x")),
    ("dash -c 'zsh -c \"sudo rm x\"'", block("rm x")),
    ("if true; then rm x; fi", block("rm x")),
    ("if false; then :; elif rm x; then :; fi", block("rm x")),
    ("while rm x; do :; done", block("rm x")),
    ("for f in a; do rm $f; done", block("rm $f")),
    ("case a in a) rm x;; esac", block("rm x")),
    ("f() { rm x; }; f", block("rm x")),
    ("cat <(rm x)", block("rm x")),
    ("echo hi > >(rm x)", block("rm x")),
    ("x=$(rm x)", block("rm x")),
    ("echo \"${X:-$(rm x)}\"", block("rm x")),
    ("echo $(( $(rm x) + 1 ))", block("rm x")),
    ("cat <<EOF\n$(rm x)\nEOF", block("rm x")),
    ("echo > $(rm x)", block("rm x")),
    ("[[ -n $(rm x) ]]", block("rm x")),
    ("coproc rm x", block("rm x")),
    ("alias x='rm -rf'", block("rm -rf")),
    ("trap 'rm x' EXIT", block("rm x")),
    ("eval rm x", block("rm x")),
    ("su -c 'rm x' root", block("rm x")),
    ("mkfs.ext4 /dev/sda", block("mkfs.ext4 /dev/sda")),
    ("dd if=/dev/zero of=x", block("dd if=/dev/zero of=x")),
    ("systemctl stop sshd", block("systemctl stop sshd")),
    ("exec -a foo rm x", block("rm x")),
    ("nice -5 rm x", block("rm x")),
    ("sudo -E rm x", block("rm x")),
    ("$'rm' x", block("$'rm' x")),
    // ANSI-C quoting, decoded as bash decodes it.
    ("$'\\x72m' x", block("$'\\x72m' x")),
    ("$'\\x72\\x6d' x", block("$'\\x72\\x6d' x")),
    ("$'\\162\\155' x", block("$'\\162\\155' x")),
    ("$'\\u0072m' x", block("$'\\u0072m' x")),
    ("$'\\U00000072m' x", block("$'\\U00000072m' x")),
    ("r$'\\x6d' x", block("r$'\\x6d' x")),
    ("$'\\x72'\"m\" x", block("$'\\x72'\"m\" x")),
    ("sudo $'\\x72m' x", block("$'\\x72m' x")),
    ("find . -exec $'\\162m' {} +", block("$'\\162m' {}")),
    ("ls | xargs $'\\x72m'", block("$'\\x72m'")),
    ("sh -c $'\\x72m x'", block("rm x")),
    ("$\"rm\" x", block("$\"rm\" x")),
    // Escapes that make another name are that name, not the blocked one.
    ("$'\\x72m\\x31' x", None),
    ("$'rm\\0' x", block("$'rm\\0' x")),
    ("r\\\nm x", block("rm x")),
    ("X=1 rm x", block("rm x")),
    ("FOO=$(rm x) ls", block("rm x")),
    ("ls & rm x", block("rm x")),
    ("! rm x", block("rm x")),
    ("xargs -0 -P4 sh -c 'rm \"$@\"' _", block("rm \"$@\"")),
    // Names as arguments are not commands.
    ("echo rm", None),
    ("ls -la", None),
    ("grep -r 'rm -rf' .", None),
    ("command -v rm", None),
    ("cat <<'EOF'\n$(rm x)\nEOF", None),
    ("git commit -m \"$(date)\"", None),
    // Not resolvable before run time: reported, not refused without an allowlist.
    ("$cmd x", None),
    ("/bin/r? x", None),
    ("sh script.sh", None),
    // Text that does not parse is never run.
    ("echo 'unterminated", Some(("parse", "echo 'unterminated"))),
    ("if then fi", Some(("parse", "if then fi"))),
    ("sh -c 'echo (('", Some(("parse", "sh -c 'echo (('"))),
];

/// Under `CUBA_EXEC_ALLOWED_COMMANDS=ls,echo,git,sh,cat,xargs` (and the default blocklist).
const ALLOWLIST_CORPUS: &[(&str, Expect)] = &[
    ("ls -la", None),
    ("echo a | xargs echo", None),
    ("sh -c 'ls; git status'", None),
    ("/usr/bin/git log | cat", None),
    ("curl example.com", Some(("allowlist", "curl example.com"))),
    ("ls; curl x", Some(("allowlist", "curl x"))),
    ("echo $(whoami)", Some(("allowlist", "whoami"))),
    ("ls | xargs", None),
    (
        "ls | xargs python3 -c 1",
        Some(("allowlist", "python3 -c 1")),
    ),
    ("sh -c 'python3 x.py'", Some(("allowlist", "python3 x.py"))),
    ("$cmd x", Some(("unresolved", "$cmd x"))),
    ("$(echo ls) x", Some(("unresolved", "$(echo ls) x"))),
    ("eval ls", Some(("unresolved", "eval ls"))),
    ("source ./env.sh", Some(("unresolved", "source ./env.sh"))),
    (". ./env.sh", Some(("unresolved", ". ./env.sh"))),
    ("sh script.sh", Some(("unresolved", "sh script.sh"))),
    // A literal piped into a shell is that script; anything else is unseen.
    ("echo ls | sh", None),
    ("cat f | sh", Some(("unresolved", "sh"))),
    ("sh -c \"$X\"", Some(("unresolved", "sh -c \"$X\""))),
    ("/bin/l? x", Some(("unresolved", "/bin/l? x"))),
    ("ls && rm x", Some(("blocklist", "rm x"))),
];

pub(super) fn allow_list(names: &str) -> Policy {
    Policy {
        allowed: Some(name_list(names)),
        ..Policy::default()
    }
}

fn run(policy: &Policy, corpus: &[(&str, Expect)]) {
    let mut wrong = Vec::new();
    for (text, expect) in corpus {
        let d = policy.check(text);
        let got = d.rule.as_deref().zip(d.offending.as_deref());
        if got != *expect || d.allowed != expect.is_none() {
            wrong.push(format!(
                "{text:?}: expected {expect:?}, got {got:?} ({d:?})"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn blocklist_corpus() {
    assert!(BLOCKLIST_CORPUS.len() >= 40);
    run(&Policy::default(), BLOCKLIST_CORPUS);
}

#[test]
fn allowlist_corpus() {
    run(&allow_list("ls,echo,git,sh,cat,xargs"), ALLOWLIST_CORPUS);
}

#[test]
fn a_refusal_names_the_sub_commands_it_saw() {
    let d = Policy::default().check("echo ok && sudo rm -rf / | cat");
    assert_eq!(d.commands, ["echo ok", "sudo rm -rf /", "rm -rf /", "cat"]);
    assert!(
        d.message.contains("`rm` is on the blocklist"),
        "{}",
        d.message
    );
    let d = Policy::default().check("$cmd x");
    assert_eq!(d.commands, ["?($cmd x)"]);
    assert!(d.allowed && d.message.contains("could not be resolved"));
}

#[test]
fn an_empty_blocklist_allows_everything_that_parses() {
    let open = Policy {
        blocked: name_list(""),
        ..Policy::default()
    };
    assert!(open.check("rm -rf /tmp/x").allowed);
    assert!(!open.check("echo (").allowed);
}

#[test]
fn working_directories_must_lie_inside_a_root() {
    let root = tempfile::tempdir().unwrap();
    let inside = root.path().join("a");
    std::fs::create_dir(&inside).unwrap();
    let p = Policy {
        dirs: vec![root.path().to_path_buf()],
        ..Policy::default()
    };
    assert!(p.check_dir(&inside).is_ok());
    assert!(p.check_dir(&inside.join("..")).is_ok());
    let out = p.check_dir(&inside.join("../..")).unwrap_err();
    assert_eq!(out.rule.as_deref(), Some("allowed_dirs"));
    // A symlink inside the root that points out of it does not count as inside.
    #[cfg(unix)]
    {
        let link = root.path().join("out");
        std::os::unix::fs::symlink("/", &link).unwrap();
        assert!(p.check_dir(&link).is_err());
        assert!(p.check_spawn(None, "ls", &link).rule.as_deref() == Some("allowed_dirs"));
    }
}

#[test]
fn a_custom_shell_is_held_to_the_lists() {
    let p = allow_list("ls");
    let d = p.check_spawn(Some("/usr/bin/python3"), "print(1)", Path::new("/"));
    assert_eq!(d.rule.as_deref(), Some("unresolved"));
    assert!(
        p.check_spawn(Some("/bin/bash"), "ls", Path::new("/"))
            .allowed
    );
    let d = Policy::default().check_spawn(Some("/bin/rm"), "x", Path::new("/"));
    assert_eq!(d.rule.as_deref(), Some("blocklist"));
}

#[test]
fn deep_nesting_is_reported_not_followed() {
    // `sh -c "sh -c \"...\""` by command substitution: each level adds a few bytes only.
    let mut text = "ls".to_string();
    for _ in 0..40 {
        text = format!("eval $({text})");
    }
    let d = allow_list("ls,eval").check(&text);
    assert_eq!(d.rule.as_deref(), Some("unresolved"));
    assert!(d.commands.iter().any(|c| c.starts_with("?(")));
}

#[test]
fn hostile_text_is_refused_without_harm() {
    // Deep nesting would exhaust a thread's stack inside the parser: refused before it.
    for opener in ["(", "$(echo ", "{ "] {
        let t = format!("{}ls", opener.repeat(5000));
        let d = Policy::default().check(&t);
        assert_eq!(d.rule.as_deref(), Some("parse"), "{opener:?}");
    }
    let t = format!("{}ls{}", "$(echo ".repeat(40), ")".repeat(40));
    assert!(Policy::default().check(&t).allowed);
    // Long flat text is fine.
    let t = vec!["ls"; 5000].join(" && ");
    assert!(Policy::default().check(&t).allowed);
}

#[test]
fn a_directory_list_splits_as_path_does_on_each_os() {
    let paths = |list: &[&str]| list.iter().map(PathBuf::from).collect::<Vec<_>>();
    assert_eq!(split_dirs("/a:/b, /c", ':'), paths(&["/a", "/b", "/c"]));
    // Windows' separator is `;`: each drive letter has its `:`.
    assert_eq!(
        split_dirs(r"C:\work;D:\x,E:\y", ';'),
        paths(&[r"C:\work", r"D:\x", r"E:\y"])
    );
}
