//! Walks a parsed shell program and collects every simple command it can run: in lists,
//! pipelines, compound commands, function bodies, substitutions, redirections, and through
//! wrappers and `sh -c` strings, recursively.

use brush_parser::ast::{
    Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, CompoundListItem,
    ExtendedTestExpr, IoFileRedirectTarget, IoRedirect, Pipeline, SimpleCommand, Word,
};
use brush_parser::{Parser, ParserOptions};

use super::consts::{constant, exact};
use super::script::{self, Script};
pub use super::seen::{Collected, Seen};
use super::words::{analyse_with, bracket_depth, Arg, Consts, MAX_BRACKETS};
use super::wrappers::{inner, Inner};

/// Texts nested deeper than this (`sh -c "sh -c '...'"`, eval of eval) are not followed; the
/// command is reported unresolved instead.
const MAX_DEPTH: usize = 16;

/// How many nested texts a decision lists (they are followed all the same).
const MAX_TEXTS: usize = 64;

/// Collects the simple commands of `text`. A syntax error anywhere (also inside a `sh -c`
/// string or a substitution) is an error carrying the parser's message. Each call parses:
/// the policy asks `parsed::collect`, which keeps what recent texts gave.
pub(super) fn collect_now(text: &str) -> Collected {
    let depth = bracket_depth(text);
    if depth > MAX_BRACKETS {
        return Err(format!(
            "brackets nested {depth} deep, more than the {MAX_BRACKETS} the policy reads"
        ));
    }
    // The parser is third-party code run on untrusted text: a panic in it is a refusal, not
    // a lost request.
    let run = std::panic::AssertUnwindSafe(|| {
        let mut w = Walker::default();
        w.program(text, 0).map(|()| (w.seen, w.texts))
    });
    std::panic::catch_unwind(run).unwrap_or_else(|_| Err("the shell parser failed".into()))
}

#[derive(Default)]
struct Walker {
    seen: Vec<Seen>,
    /// What the commands being walked read on stdin, when known (a pipe from a literal, a
    /// here-document of the compound command around them); `None`: their own stdin, unseen.
    stdin: Option<Script>,
    /// The nested texts followed (`policy check` shows them).
    texts: Vec<String>,
    /// The current text's variables known exactly by now (`a=rm; $a x`).
    consts: Consts,
    /// Descriptors other than stdin the command being walked reads, and what they give
    /// (`sh /dev/fd/3 3<<EOF`); inherited by what it runs.
    fds: Vec<(i32, Script)>,
}

type Res = Result<(), String>;

impl Walker {
    fn program(&mut self, text: &str, depth: usize) -> Res {
        if depth > MAX_DEPTH {
            self.unresolved(text, "nested too deeply to follow");
            return Ok(());
        }
        if depth > 0 && self.texts.len() < MAX_TEXTS {
            self.texts.push(text.to_string());
        }
        let mut parser = Parser::new(text.as_bytes(), &ParserOptions::default());
        let program = parser.parse_program().map_err(|e| e.to_string())?;
        // A nested text is another shell or another turn: it starts knowing nothing.
        let outer = std::mem::take(&mut self.consts);
        let walked = program.complete_commands.iter().try_for_each(|cc| {
            for item in &cc.0 {
                self.list_item(item, depth)?;
                // Known from here on: a top-level assignment of a literal, the only place
                // the text names that variable other than to read it.
                if let Some((name, value)) = constant(item).filter(|(n, _)| exact(text, n)) {
                    self.consts.insert(name, value);
                }
            }
            Ok(())
        });
        self.consts = outer;
        walked
    }

    fn unresolved(&mut self, text: &str, why: &'static str) {
        self.seen.push(Seen {
            name: None,
            text: text.to_string(),
            unresolved: Some(why),
            args: Vec::new(),
        });
    }

    fn list(&mut self, list: &CompoundList, depth: usize) -> Res {
        list.0
            .iter()
            .try_for_each(|item| self.list_item(item, depth))
    }

    fn list_item(&mut self, item: &CompoundListItem, depth: usize) -> Res {
        self.pipeline(&item.0.first, depth)?;
        for next in &item.0.additional {
            let (brush_parser::ast::AndOr::And(p) | brush_parser::ast::AndOr::Or(p)) = next;
            self.pipeline(p, depth)?;
        }
        Ok(())
    }

    fn pipeline(&mut self, p: &Pipeline, depth: usize) -> Res {
        let outer = self.stdin.clone();
        let mut input = outer.clone();
        for c in &p.seq {
            self.stdin = input.clone();
            self.command(c, depth)?;
            // The next command reads what this one writes.
            input = Some(script::output(c, input.as_ref(), &self.consts));
        }
        self.stdin = outer;
        Ok(())
    }

    fn command(&mut self, c: &Command, depth: usize) -> Res {
        match c {
            Command::Simple(s) => self.simple(s, depth),
            Command::Compound(cc, redirects) => {
                // `{ sh; } <<EOF`: the body reads what the compound command's redirect gives.
                let outer = self.stdin.clone();
                let given = redirects
                    .iter()
                    .flat_map(|r| &r.0)
                    .find_map(|r| script::redirected_stdin(r, &self.consts));
                if given.is_some() {
                    self.stdin = given;
                }
                self.compound(cc, depth)?;
                self.stdin = outer;
                for r in redirects.iter().flat_map(|r| &r.0) {
                    self.redirect(r, depth)?;
                }
                Ok(())
            }
            Command::Function(f) => {
                self.compound(&f.body.0, depth)?;
                for r in f.body.1.iter().flat_map(|r| &r.0) {
                    self.redirect(r, depth)?;
                }
                Ok(())
            }
            Command::ExtendedTest(t, redirects) => {
                self.test_expr(&t.expr, depth)?;
                for r in redirects.iter().flat_map(|r| &r.0) {
                    self.redirect(r, depth)?;
                }
                Ok(())
            }
        }
    }

    fn compound(&mut self, c: &CompoundCommand, depth: usize) -> Res {
        match c {
            CompoundCommand::Arithmetic(a) => self.text_word(&a.expr.value, depth),
            CompoundCommand::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.text_word(&e.value, depth)?;
                }
                self.list(&f.body.list, depth)
            }
            CompoundCommand::BraceGroup(g) => self.list(&g.list, depth),
            CompoundCommand::Subshell(s) => self.list(&s.list, depth),
            CompoundCommand::ForClause(f) => {
                for w in f.values.iter().flatten() {
                    self.word(w, depth)?;
                }
                self.list(&f.body.list, depth)
            }
            CompoundCommand::CaseClause(c) => {
                self.word(&c.value, depth)?;
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(p, depth)?;
                    }
                    if let Some(body) = &item.cmd {
                        self.list(body, depth)?;
                    }
                }
                Ok(())
            }
            CompoundCommand::IfClause(i) => {
                self.list(&i.condition, depth)?;
                self.list(&i.then, depth)?;
                for e in i.elses.iter().flatten() {
                    if let Some(cond) = &e.condition {
                        self.list(cond, depth)?;
                    }
                    self.list(&e.body, depth)?;
                }
                Ok(())
            }
            CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
                self.list(&w.0, depth)?;
                self.list(&w.1.list, depth)
            }
            CompoundCommand::Coprocess(c) => self.command(&c.body, depth),
        }
    }

    fn test_expr(&mut self, e: &ExtendedTestExpr, depth: usize) -> Res {
        match e {
            ExtendedTestExpr::And(a, b) | ExtendedTestExpr::Or(a, b) => {
                self.test_expr(a, depth)?;
                self.test_expr(b, depth)
            }
            ExtendedTestExpr::Not(a) | ExtendedTestExpr::Parenthesized(a) => {
                self.test_expr(a, depth)
            }
            ExtendedTestExpr::UnaryTest(_, w) => self.word(w, depth),
            ExtendedTestExpr::BinaryTest(_, a, b) => {
                self.word(a, depth)?;
                self.word(b, depth)
            }
        }
    }

    fn redirect(&mut self, r: &IoRedirect, depth: usize) -> Res {
        match r {
            IoRedirect::File(_, _, target) => match target {
                IoFileRedirectTarget::Filename(w) | IoFileRedirectTarget::Duplicate(w) => {
                    self.word(w, depth)
                }
                IoFileRedirectTarget::Fd(_) => Ok(()),
                IoFileRedirectTarget::ProcessSubstitution(_, s) => self.list(&s.list, depth),
            },
            IoRedirect::HereDocument(_, doc) => {
                if !doc.requires_expansion {
                    return Ok(());
                }
                let pieces = brush_parser::word::parse_heredoc(&doc.doc.value, &Default::default())
                    .map_err(|e| e.to_string())?;
                // Read the here-document's expansions the way a word's are read.
                for p in pieces {
                    if let brush_parser::word::WordPiece::CommandSubstitution(t)
                    | brush_parser::word::WordPiece::BackquotedCommandSubstitution(t) = &p.piece
                    {
                        self.program(t, depth + 1)?;
                    } else if let Some(src) = doc.doc.value.get(p.start_index..p.end_index) {
                        self.text_word(src, depth)?;
                    }
                }
                Ok(())
            }
            IoRedirect::HereString(_, w) | IoRedirect::OutputAndError(w, _) => self.word(w, depth),
        }
    }

    /// A word outside command position: only the commands inside it matter.
    fn word(&mut self, w: &Word, depth: usize) -> Res {
        self.text_word(&w.value, depth)
    }

    fn text_word(&mut self, raw: &str, depth: usize) -> Res {
        self.arg(raw, depth).map(|_| ())
    }

    fn arg(&mut self, raw: &str, depth: usize) -> Result<Arg, String> {
        let mut nested = Vec::new();
        let arg = analyse_with(raw, &mut nested, &self.consts)?;
        for text in nested {
            self.program(&text, depth + 1)?;
        }
        Ok(arg)
    }

    fn simple(&mut self, c: &SimpleCommand, depth: usize) -> Res {
        let mut args = Vec::new();
        // Its own redirect of stdin wins over what the pipeline gives it.
        let redirects = c
            .prefix
            .iter()
            .flat_map(|p| &p.0)
            .chain(c.suffix.iter().flat_map(|s| &s.0));
        let given: Vec<(i32, Script)> = redirects
            .filter_map(|item| match item {
                CommandPrefixOrSuffixItem::IoRedirect(r) => script::redirected(r, &self.consts),
                _ => None,
            })
            .collect();
        let own = given
            .iter()
            .rev()
            .find(|(fd, _)| *fd == 0)
            .map(|(_, s)| s.clone());
        let stdin = own.or_else(|| self.stdin.clone());
        let mut fds = self.fds.clone();
        fds.extend(given.into_iter().filter(|(fd, _)| *fd != 0));
        let outer_fds = std::mem::replace(&mut self.fds, fds);
        for item in c.prefix.iter().flat_map(|p| &p.0) {
            match item {
                // `FOO=1 cmd`: the assignment is not an argument.
                CommandPrefixOrSuffixItem::AssignmentWord(_, w) => self.word(w, depth)?,
                _ => self.item(item, &mut args, depth)?,
            }
        }
        if let Some(w) = &c.word_or_name {
            args.push(self.arg(&w.value, depth)?);
        }
        for item in c.suffix.iter().flat_map(|s| &s.0) {
            self.item(item, &mut args, depth)?;
        }
        let walked = self.invocation(&args, stdin.as_ref(), depth);
        self.fds = outer_fds;
        walked
    }

    fn item(&mut self, item: &CommandPrefixOrSuffixItem, args: &mut Vec<Arg>, depth: usize) -> Res {
        match item {
            CommandPrefixOrSuffixItem::Word(w) => args.push(self.arg(&w.value, depth)?),
            CommandPrefixOrSuffixItem::IoRedirect(r) => self.redirect(r, depth)?,
            // `env FOO=1 cmd`: after the name, an assignment is an argument.
            CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
                args.push(self.arg(&w.value, depth)?)
            }
            CommandPrefixOrSuffixItem::ProcessSubstitution(_, s) => {
                self.list(&s.list, depth)?;
                // As an argument it is a path: to what its commands write (`source <(…)`).
                args.push(Arg {
                    raw: "<(…)".to_string(),
                    value: Some("/dev/fd/63".to_string()),
                    pattern: false,
                    script: Some(script::list_output(&s.list, &self.consts)),
                });
            }
        }
        Ok(())
    }

    /// A command given as words, reading `stdin`: record it, then whatever it runs in turn.
    fn invocation(&mut self, args: &[Arg], stdin: Option<&Script>, depth: usize) -> Res {
        let Some(first) = args.first() else {
            return Ok(());
        };
        let text = args_text(args);
        let Some(name) = first.command_name() else {
            self.unresolved(&text, "its name is only known at run time");
            return Ok(());
        };
        let unresolved = match name.as_str() {
            "eval" => Some("eval runs text as commands"),
            // Without a file it does nothing; a file is read below, or reported unseen.
            _ => None,
        };
        let me = self.seen.len();
        let values = args[1..]
            .iter()
            .map(|a| a.value.clone().filter(|_| !a.pattern))
            .collect();
        self.seen.push(Seen {
            name: Some(name.clone()),
            text,
            unresolved,
            args: values,
        });
        let sourcing = matches!(name.as_str(), "source" | ".");
        for inner in inner(&name, &args[1..]) {
            match inner {
                Inner::Slice(words) => self.invocation(words, stdin, depth)?,
                Inner::Args(words) => self.invocation(&words, stdin, depth)?,
                Inner::Text(t) => {
                    // `sh -c 'cat | sh' <<< TEXT`: the text's commands read this one's stdin.
                    let outer = std::mem::replace(&mut self.stdin, stdin.cloned());
                    let walked = self.program(&t, depth + 1);
                    self.stdin = outer;
                    walked?
                }
                Inner::Unresolved(why) => self.unresolved(&args_text(args), why),
                Inner::Stdin => self.script(stdin.unwrap_or(&script::INHERITED), args, depth)?,
                Inner::File(file) => match (&file.script, file.value.as_deref()) {
                    (Some(s), _) => self.script(s, args, depth)?,
                    (None, Some(v)) if script::fd_path(v) == Some(0) => {
                        self.script(stdin.unwrap_or(&script::INHERITED), args, depth)?
                    }
                    (None, Some(v)) if script::fd_path(v).is_some() => {
                        let fd = script::fd_path(v);
                        let given = self.fds.iter().rev().find(|(n, _)| Some(*n) == fd);
                        let s = given.map_or(
                            Script::Unseen("the shell reads a descriptor, unseen"),
                            |(_, s)| s.clone(),
                        );
                        self.script(&s, args, depth)?
                    }
                    // `source FILE` is itself the unseen part (as `eval $x` is).
                    _ if sourcing => {
                        if let Some(seen) = self.seen.get_mut(me) {
                            seen.unresolved = Some("it runs the commands of a file, unseen");
                        }
                    }
                    _ => self.unresolved(&args_text(args), "the shell runs a script file, unseen"),
                },
            }
        }
        Ok(())
    }

    /// A script a shell (or `source`) runs: walked as shell text when it is known.
    fn script(&mut self, s: &Script, args: &[Arg], depth: usize) -> Res {
        // The text parses or it is refused, like any text the daemon is given.
        let s = s.clone();
        match s {
            Script::Text(t) => self.program(&t, depth + 1),
            Script::Unseen(why) => {
                self.unresolved(&args_text(args), why);
                Ok(())
            }
        }
    }
}

fn args_text(args: &[Arg]) -> String {
    args.iter()
        .map(|a| a.raw.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}
