//! Constants of a shell text, where they are exactly known: `a=rm; $a x` runs `rm`. A variable
//! is known from its one top-level assignment of a literal on, if the text names it nowhere else
//! except to read it; anything less stays unresolved (a name is never guessed).

use brush_parser::ast::{
    AssignmentValue, Command, CommandPrefixOrSuffixItem, CompoundListItem, SeparatorOperator,
};

use super::words::{analyse_with, Consts};

/// `NAME=literal` alone, run in this shell (not in the background, a pipeline or an `&&`
/// chain): the variable and its value.
pub fn constant(item: &CompoundListItem) -> Option<(String, String)> {
    if !matches!(item.1, SeparatorOperator::Sequence) || !item.0.additional.is_empty() {
        return None;
    }
    let p = &item.0.first;
    let [Command::Simple(s)] = p.seq.as_slice() else {
        return None;
    };
    if p.bang || s.word_or_name.is_some() || s.suffix.is_some() {
        return None;
    }
    let [CommandPrefixOrSuffixItem::AssignmentWord(a, _)] = s.prefix.as_ref()?.0.as_slice() else {
        return None;
    };
    let (brush_parser::ast::AssignmentName::VariableName(name), AssignmentValue::Scalar(w)) =
        (&a.name, &a.value)
    else {
        return None;
    };
    if a.append {
        return None;
    }
    let v = analyse_with(&w.value, &mut Vec::new(), &Consts::new()).ok()?;
    Some((name.clone(), v.value.filter(|_| !v.pattern)?))
}

/// Whether `name` appears in `text` only once other than in `$name` / `${name}`: its one
/// assignment. Anything else (`read name`, `for name`, `export name`, `name+=`, `${name:=…}`,
/// a word `name`) may change it; IFS assigned anywhere changes how every value splits.
pub fn exact(text: &str, name: &str) -> bool {
    if name == "IFS" || text.contains("IFS") {
        return false;
    }
    let bytes = text.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut others = 0;
    let mut from = 0;
    while let Some(i) = text[from..].find(name).map(|i| i + from) {
        let end = i + name.len();
        from = end;
        if (i > 0 && ident(bytes[i - 1])) || bytes.get(end).copied().is_some_and(ident) {
            continue;
        }
        let read = (i > 0 && bytes[i - 1] == b'$')
            || (i > 1 && &bytes[i - 2..i] == b"${" && bytes.get(end) == Some(&b'}'));
        if !read {
            others += 1;
        }
    }
    others == 1
}
