//! Programs that run another command: what they run, given their arguments. `sudo rm x` runs
//! `rm x`; `sh -c TEXT` runs TEXT; `find . -exec rm {} ;` runs `rm {}`.

use super::words::Arg;

/// What a wrapper runs.
#[derive(Debug)]
pub enum Inner<'a> {
    /// A command given as words (`sudo rm x` → `rm x`).
    Args(Vec<Arg>),
    /// Shell text (`sh -c TEXT`, `eval TEXT`, `env -S TEXT`, an alias body, a trap action).
    Text(String),
    /// It runs commands that cannot be seen before run time (a script file, stdin).
    Unresolved(&'static str),
    /// Borrowed words (the common case, kept apart to avoid copies).
    Slice(&'a [Arg]),
    /// A shell reading its script from its stdin.
    Stdin,
    /// A shell (or `source`) running the script file this word names.
    File(&'a Arg),
}

/// How a wrapper's options look: which take a separate value, how many positional arguments
/// precede the command, and whether `NAME=value` words may precede it.
struct Spec {
    with_value: &'static [&'static str],
    positional: usize,
    assignments: bool,
}

const fn spec(with_value: &'static [&'static str], positional: usize, assignments: bool) -> Spec {
    Spec {
        with_value,
        positional,
        assignments,
    }
}

fn wrapper(name: &str) -> Option<Spec> {
    Some(match name {
        "env" => spec(&["-u", "-C", "--unset", "--chdir"], 0, true),
        "sudo" => spec(
            &[
                "-u",
                "-g",
                "-C",
                "-D",
                "-h",
                "-p",
                "-r",
                "-t",
                "-U",
                "-T",
                "-R",
                "--user",
                "--group",
                "--chdir",
                "--host",
                "--prompt",
                "--role",
                "--type",
                "--other-user",
                "--close-from",
                "--command-timeout",
                "--chroot",
            ],
            0,
            true,
        ),
        "doas" => spec(&["-u", "-C"], 0, false),
        "nice" => spec(&["-n", "--adjustment"], 0, false),
        "nohup" | "builtin" | "busybox" | "setsid" => spec(&[], 0, false),
        "timeout" => spec(&["-s", "-k", "--signal", "--kill-after"], 1, false),
        "time" => spec(&["-f", "-o", "--format", "--output"], 0, false),
        "xargs" => spec(
            &[
                "-I",
                "-n",
                "-P",
                "-L",
                "-s",
                "-E",
                "-d",
                "-a",
                "--max-args",
                "--max-procs",
                "--max-lines",
                "--max-chars",
                "--delimiter",
                "--arg-file",
            ],
            0,
            false,
        ),
        "command" => spec(&[], 0, false),
        "exec" => spec(&["-a"], 0, false),
        "stdbuf" => spec(&["-i", "-o", "-e"], 0, false),
        "ionice" => spec(&["-c", "-n", "--class", "--classdata"], 0, false),
        "chroot" => spec(&[], 1, false),
        _ => return None,
    })
}

/// Shells whose `-c` string is shell text.
fn is_shell(name: &str) -> bool {
    matches!(
        name,
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "mksh" | "ash" | "yash" | "posh"
    )
}

/// What `name rest...` runs besides itself (several things for `find` with many `-exec`s).
pub fn inner<'a>(name: &str, rest: &'a [Arg]) -> Vec<Inner<'a>> {
    if is_shell(name) {
        return vec![shell(rest)];
    }
    match name {
        "source" | "." => return rest.first().map(Inner::File).into_iter().collect(),
        "find" => return find(rest),
        "eval" => return vec![joined(rest, "eval's text is built at run time")],
        "alias" => return alias(rest),
        "trap" => return trap(rest),
        "su" | "runuser" => return su(rest),
        "command" if rest.iter().any(is_query_option) => return Vec::new(),
        _ => {}
    }
    let Some(spec) = wrapper(name) else {
        return Vec::new();
    };
    if name == "env" {
        if let Some(text) = env_split_string(rest) {
            return vec![text];
        }
    }
    let cmd = skip_options(rest, &spec);
    if name == "xargs" && cmd.is_empty() {
        return vec![Inner::Args(vec![Arg::literal("echo")])];
    }
    if cmd.is_empty() {
        return Vec::new();
    }
    vec![Inner::Slice(cmd)]
}

/// `command -v NAME` / `-V` only look a name up.
fn is_query_option(a: &Arg) -> bool {
    a.value
        .as_deref()
        .is_some_and(|v| v.starts_with('-') && v.contains(['v', 'V']))
}

fn is_assignment(v: &str) -> bool {
    v.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The words after the wrapper's options (and its positional arguments). A word whose value is
/// only known at run time ends the options: it is then taken as the command, which makes the
/// command unresolved rather than missed.
fn skip_options<'a>(rest: &'a [Arg], spec: &Spec) -> &'a [Arg] {
    let mut i = 0;
    while let Some(arg) = rest.get(i) {
        let Some(v) = arg.value.as_deref() else { break };
        if v == "--" {
            i += 1;
            break;
        }
        if spec.assignments && is_assignment(v) {
            i += 1;
        } else if v.starts_with('-') && v.len() > 1 {
            i += if spec.with_value.contains(&v) { 2 } else { 1 };
        } else {
            break;
        }
    }
    rest.get(i + spec.positional..).unwrap_or(&[])
}

/// `env -S 'rm x'` / `--split-string=...`.
fn env_split_string(rest: &[Arg]) -> Option<Inner<'static>> {
    for (i, a) in rest.iter().enumerate() {
        let v = a.value.as_deref()?;
        if let Some(text) = v.strip_prefix("--split-string=") {
            return Some(Inner::Text(text.to_string()));
        }
        if v == "-S" || v == "--split-string" {
            return Some(match rest.get(i + 1).and_then(|a| a.value.clone()) {
                Some(text) => Inner::Text(text),
                None => Inner::Unresolved("env -S text is built at run time"),
            });
        }
        if !v.starts_with('-') && !is_assignment(v) {
            return None;
        }
    }
    None
}

/// `sh [options] -c TEXT`, `sh FILE`, or `sh` reading stdin (also with `-s`).
fn shell(rest: &[Arg]) -> Inner<'_> {
    let mut c = false;
    let mut s = false;
    let mut i = 0;
    while let Some(arg) = rest.get(i) {
        let Some(v) = arg.value.as_deref() else {
            return Inner::Unresolved("the shell's arguments are built at run time");
        };
        if v == "-" {
            // `sh -`: the script is stdin.
            s = true;
            i += 1;
            break;
        }
        if v == "--" {
            i += 1;
            break;
        }
        if let Some(long) = v.strip_prefix("--") {
            i += if matches!(long, "rcfile" | "init-file") {
                2
            } else {
                1
            };
        } else if v.starts_with(['-', '+']) && v.len() > 1 {
            if v.starts_with('-') && v.contains('c') {
                c = true;
            }
            if v.starts_with('-') && v.contains('s') && !v.starts_with("-o") {
                s = true;
            }
            i += if matches!(&v[1..], "o" | "O") { 2 } else { 1 };
        } else {
            break;
        }
    }
    match (c, rest.get(i)) {
        (true, Some(arg)) => match &arg.value {
            Some(text) => Inner::Text(text.clone()),
            None => Inner::Unresolved("the shell's -c text is built at run time"),
        },
        (true, None) => Inner::Args(Vec::new()),
        _ if s => Inner::Stdin,
        (false, Some(arg)) => Inner::File(arg),
        (false, None) => Inner::Stdin,
    }
}

/// Each `-exec CMD ... ;` / `-execdir` / `-ok` / `-okdir` of a `find`.
fn find(rest: &[Arg]) -> Vec<Inner<'_>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let is_exec = rest[i]
            .value
            .as_deref()
            .is_some_and(|v| matches!(v, "-exec" | "-execdir" | "-ok" | "-okdir"));
        i += 1;
        if !is_exec {
            continue;
        }
        let start = i;
        while i < rest.len() && !matches!(rest[i].value.as_deref(), Some(";" | "+")) {
            i += 1;
        }
        out.push(Inner::Slice(&rest[start..i]));
    }
    out
}

/// `eval a b` runs the text `a b`.
fn joined(rest: &[Arg], why: &'static str) -> Inner<'static> {
    let parts: Option<Vec<&str>> = rest.iter().map(|a| a.value.as_deref()).collect();
    match parts {
        Some(parts) => Inner::Text(parts.join(" ")),
        None => Inner::Unresolved(why),
    }
}

/// `alias x='rm -rf'`: the body is command text a later `x` runs (POSIX shells expand aliases
/// even when not interactive).
fn alias(rest: &[Arg]) -> Vec<Inner<'static>> {
    rest.iter()
        .map(|a| match a.value.as_deref().map(|v| v.split_once('=')) {
            Some(Some((_, body))) => Inner::Text(body.to_string()),
            Some(None) => Inner::Args(Vec::new()),
            None => Inner::Unresolved("an alias built at run time"),
        })
        .collect()
}

/// `trap 'rm x' EXIT`: the action is shell text.
fn trap(rest: &[Arg]) -> Vec<Inner<'static>> {
    let action = rest
        .iter()
        .find(|a| !a.value.as_deref().is_some_and(|v| v.starts_with('-')));
    match action {
        Some(a) => match &a.value {
            Some(text) => vec![Inner::Text(text.clone())],
            None => vec![Inner::Unresolved("a trap action built at run time")],
        },
        None => Vec::new(),
    }
}

/// `su -c TEXT` / `--command=TEXT`.
fn su(rest: &[Arg]) -> Vec<Inner<'static>> {
    for (i, a) in rest.iter().enumerate() {
        match a.value.as_deref() {
            Some("-c" | "--command") => {
                return vec![match rest.get(i + 1).and_then(|a| a.value.clone()) {
                    Some(text) => Inner::Text(text),
                    None => Inner::Unresolved("su's -c text is built at run time"),
                }]
            }
            Some(v) if v.starts_with("--command=") => {
                return vec![Inner::Text(v["--command=".len()..].to_string())]
            }
            _ => {}
        }
    }
    Vec::new()
}
