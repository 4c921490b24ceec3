//! Scripts that reach a shell some other way than `-c`: on its stdin (a here-document, a
//! here-string, a pipe from `echo`/`printf`/`cat` of a literal), or as a file that is a process
//! substitution or `/dev/stdin`. What such a script is, when it is exactly known before run time.

use brush_parser::ast::{
    Command, CommandPrefixOrSuffixItem, CompoundList, IoFileRedirectKind, IoFileRedirectTarget,
    IoRedirect, Pipeline, SimpleCommand,
};

pub use super::words::Script;
use super::words::{analyse_with, ansi_c, Arg, Consts};

/// What a shell reading its input gets when nothing says (the daemon's stdin pipe, a terminal).
pub const INHERITED: Script = Script::Unseen("the shell reads commands from its input, unseen");

/// The stdin a redirect gives a command, if it is a redirect of fd 0.
pub fn redirected_stdin(r: &IoRedirect, consts: &Consts) -> Option<Script> {
    redirected(r, consts).and_then(|(fd, s)| (fd == 0).then_some(s))
}

/// The descriptor an input redirect gives a command, and what reading it gives
/// (`3<<EOF … EOF` for `sh /dev/fd/3`).
pub fn redirected(r: &IoRedirect, consts: &Consts) -> Option<(i32, Script)> {
    let fd = match r {
        IoRedirect::HereDocument(fd, _) | IoRedirect::HereString(fd, _) => fd.unwrap_or(0),
        IoRedirect::File(fd, _, _) => fd.unwrap_or(0),
        IoRedirect::OutputAndError(..) => return None,
    };
    let script = match r {
        IoRedirect::HereDocument(_, doc) => {
            let body = &doc.doc.value;
            Some(
                match doc.requires_expansion && body.contains(['$', '`', '\\']) {
                    true => {
                        Script::Unseen("a here-document with expansions, known only at run time")
                    }
                    false => Script::Text(body.clone()),
                },
            )
        }
        IoRedirect::HereString(_, w) => Some(match static_value(&w.value, consts) {
            Some(v) => Script::Text(format!("{v}\n")),
            None => Script::Unseen("a here-string built at run time"),
        }),
        IoRedirect::File(_, IoFileRedirectKind::Read, target) => Some(match target {
            IoFileRedirectTarget::ProcessSubstitution(_, s) => list_output(&s.list, consts),
            IoFileRedirectTarget::Filename(w)
                if static_value(&w.value, consts).as_deref() == Some("/dev/null") =>
            {
                Script::Text(String::new())
            }
            _ => Script::Unseen("the shell reads a file, unseen"),
        }),
        IoRedirect::File(_, IoFileRedirectKind::DuplicateInput, _) => {
            Some(Script::Unseen("the shell reads another descriptor, unseen"))
        }
        _ => None,
    }?;
    Some((fd, script))
}

/// What a process substitution's (or a subshell's) commands write: known for one pipeline whose
/// last command is a literal producer.
pub fn list_output(list: &CompoundList, consts: &Consts) -> Script {
    match list.0.as_slice() {
        [item] if item.0.additional.is_empty() => pipeline_output(&item.0.first, None, consts),
        _ => Script::Unseen("the script is the output of several commands, unseen"),
    }
}

/// What `p` writes, given what its first command reads.
pub fn pipeline_output(p: &Pipeline, stdin: Option<&Script>, consts: &Consts) -> Script {
    let mut input = stdin.cloned();
    for c in &p.seq {
        input = Some(output(c, input.as_ref(), consts));
    }
    input.unwrap_or(Script::Unseen("an empty pipeline"))
}

/// What command `c` writes to stdout, given its stdin: `echo` / `printf` of literals, `cat` of
/// its input; anything else is unseen.
pub fn output(c: &Command, stdin: Option<&Script>, consts: &Consts) -> Script {
    const UNSEEN: Script = Script::Unseen("the script is a program's output, unseen");
    let Command::Simple(s) = c else {
        return UNSEEN;
    };
    let Some((args, stdin_here)) = words(s, consts) else {
        return UNSEEN;
    };
    let stdin = stdin_here.as_ref().or(stdin);
    let Some(name) = args.first().and_then(|a| a.command_name()) else {
        return UNSEEN;
    };
    let values: Option<Vec<&str>> = args[1..].iter().map(|a| a.value.as_deref()).collect();
    let Some(values) = values else {
        return Script::Unseen("the script is built at run time");
    };
    match name.as_str() {
        "echo" => echo(&values),
        "printf" => printf(&values),
        "cat" if values.is_empty() || values == ["-"] => stdin
            .cloned()
            .unwrap_or(Script::Unseen("cat copies its input, unseen")),
        _ => UNSEEN,
    }
}

/// The words of `s` analysed (no nested text is followed here: the walker does that), and the
/// stdin its own redirects give it. `None` when there are assignments only.
fn words(s: &SimpleCommand, consts: &Consts) -> Option<(Vec<Arg>, Option<Script>)> {
    let mut args = Vec::new();
    let mut stdin = None;
    let mut scratch = Vec::new();
    let items = s.prefix.iter().flat_map(|p| &p.0);
    let suffix = s.suffix.iter().flat_map(|p| &p.0);
    for item in items.clone() {
        if let CommandPrefixOrSuffixItem::IoRedirect(r) = item {
            stdin = redirected_stdin(r, consts).or(stdin);
        }
    }
    args.push(analyse_with(&s.word_or_name.as_ref()?.value, &mut scratch, consts).ok()?);
    for item in suffix {
        match item {
            CommandPrefixOrSuffixItem::Word(w)
            | CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
                args.push(analyse_with(&w.value, &mut scratch, consts).ok()?);
            }
            CommandPrefixOrSuffixItem::IoRedirect(r) => {
                stdin = redirected_stdin(r, consts).or(stdin)
            }
            // A process substitution's path is only known at run time.
            CommandPrefixOrSuffixItem::ProcessSubstitution(..) => return None,
        }
    }
    Some((args, stdin))
}

fn static_value(raw: &str, consts: &Consts) -> Option<String> {
    analyse_with(raw, &mut Vec::new(), consts).ok()?.value
}

/// `echo` of literal words. Shells differ on backslashes and on options (dash's echo decodes
/// `\n`, bash's does not, `-e` turns it on): a word with a backslash makes it unseen.
fn echo(values: &[&str]) -> Script {
    let mut newline = true;
    let mut words = values;
    while let Some((first, rest)) = words.split_first() {
        match *first {
            "-n" => newline = false,
            "-e" | "-E" => {}
            _ => break,
        }
        words = rest;
    }
    if words.iter().any(|w| w.contains('\\')) {
        return Script::Unseen("echo's escapes differ between shells");
    }
    let mut text = words.join(" ");
    if newline {
        text.push('\n');
    }
    Script::Text(text)
}

/// `printf FORMAT ARGS…` with only `%s` and `%%` conversions: the format applied to the
/// arguments as printf does (again while arguments are left), its escapes decoded.
fn printf(values: &[&str]) -> Script {
    let Some((format, args)) = values.split_first() else {
        return Script::Unseen("printf without a format");
    };
    let format = ansi_c(format);
    let mut rest = format.as_str();
    let mut literal = String::new();
    let mut out_pieces: Vec<(String, bool)> = Vec::new();
    while let Some(i) = rest.find('%') {
        literal.push_str(&rest[..i]);
        match rest.as_bytes().get(i + 1) {
            Some(b'%') => literal.push('%'),
            Some(b's') => {
                out_pieces.push((std::mem::take(&mut literal), false));
                out_pieces.push((String::new(), true));
            }
            _ => return Script::Unseen("printf with conversions other than %s"),
        }
        rest = &rest[i + 2..];
    }
    literal.push_str(rest);
    out_pieces.push((literal, false));
    let slots = out_pieces.iter().filter(|(_, slot)| *slot).count();
    let mut text = String::new();
    let mut next = 0;
    loop {
        for (lit, slot) in &out_pieces {
            match slot {
                true => {
                    text.push_str(args.get(next).copied().unwrap_or(""));
                    next += 1;
                }
                false => text.push_str(lit),
            }
        }
        if slots == 0 || next >= args.len() {
            break;
        }
    }
    Script::Text(text)
}

/// The descriptor a path names in its reader (`/dev/stdin`, `/dev/fd/3`, `/proc/self/fd/3`).
pub fn fd_path(v: &str) -> Option<i32> {
    if v == "/dev/stdin" || v == "-" {
        return Some(0);
    }
    let n = v
        .strip_prefix("/dev/fd/")
        .or_else(|| v.strip_prefix("/proc/self/fd/"))?;
    n.parse().ok()
}
