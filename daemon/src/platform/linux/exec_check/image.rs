//! What the kernel makes of a file it is asked to run, read as the kernel reads it: a `#!`
//! line (`binfmt_script`: the first 256 bytes, the name ended by a space, a tab or a NUL, the
//! optional argument the rest of the line), or an ELF image (its type and the interpreter its
//! `PT_INTERP` names, which the kernel maps without another exec).

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Bytes of a file the kernel looks at to choose a handler (`BINPRM_BUF_SIZE`).
pub const HEAD: usize = 256;
/// Bytes read first: the `#!` head, and an ELF image's program headers and interpreter path
/// where they lie within (where a linker puts them).
pub const FIRST_READ: usize = 1024;
/// Program headers read at most.
const MAX_PHDRS: usize = 64;
/// Longest interpreter path an ELF may name that is read.
const MAX_INTERP: usize = 4096;

/// A `#!` line: the interpreter the kernel runs and its optional argument.
#[derive(Debug, PartialEq, Eq)]
pub struct Shebang {
    pub name: Vec<u8>,
    pub arg: Option<Vec<u8>>,
}

fn spacetab(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// The `#!` line of a file whose first bytes are `head` (fewer than 256 when the file is
/// shorter), exactly as `load_script` reads it; `None` when the kernel would not run it as a
/// script (no `#!`, or no interpreter name).
pub fn shebang(head: &[u8]) -> Option<Shebang> {
    let mut buf = [0u8; HEAD];
    let n = head.len().min(HEAD);
    buf[..n].copy_from_slice(&head[..n]);
    if &buf[..2] != b"#!" {
        return None;
    }
    let buf_end = HEAD - 1;
    // Indexes into `buf`, inclusive ranges as the kernel's helpers take them.
    let next_non_spacetab = |first: usize, last: usize| (first..=last).find(|&i| !spacetab(buf[i]));
    let next_terminator =
        |first: usize, last: usize| (first..=last).find(|&i| spacetab(buf[i]) || buf[i] == 0);
    let mut i_end = match buf.iter().position(|&b| b == b'\n') {
        Some(i) => i,
        None => {
            let first = next_non_spacetab(2, buf_end)?;
            // No later space, tab or NUL: the kernel takes the name to be cut off.
            next_terminator(first, buf_end)?;
            buf_end
        }
    };
    while i_end > 2 && spacetab(buf[i_end - 1]) {
        i_end -= 1;
    }
    let i_name = next_non_spacetab(2, i_end)?;
    if i_name == i_end {
        return None;
    }
    let i_sep = next_terminator(i_name, i_end);
    let i_arg = match i_sep {
        Some(sep) if buf[sep] != 0 => next_non_spacetab(sep, i_end),
        _ => None,
    };
    // The kernel writes NULs at i_end (and at i_sep when there is an argument): each string
    // then ends at the first NUL.
    buf[i_end] = 0;
    if let (Some(sep), Some(_)) = (i_sep, i_arg) {
        buf[sep] = 0;
    }
    let c_string = |from: usize| {
        let end = buf[from..]
            .iter()
            .position(|&b| b == 0)
            .map_or(HEAD, |e| from + e);
        buf[from..end].to_vec()
    };
    Some(Shebang {
        name: c_string(i_name),
        arg: i_arg.map(c_string),
    })
}

/// An ELF image, as far as the exec checks need it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Elf {
    /// The interpreter its `PT_INTERP` names (the dynamic loader, usually).
    pub interp: Option<Vec<u8>>,
    /// Position-independent (`ET_DYN`) with no interpreter: the dynamic loader itself, or a
    /// program built like it, which may map and run another program without an exec.
    pub loader_like: bool,
}

struct Reader<'a> {
    file: &'a File,
    /// What was read of the file already, from its start.
    head: &'a [u8],
    little: bool,
    wide: bool,
}

impl Reader<'_> {
    fn bytes(&self, at: u64, len: usize) -> Option<Vec<u8>> {
        let end = (at as usize).checked_add(len)?;
        if end <= self.head.len() {
            return Some(self.head[at as usize..end].to_vec());
        }
        let mut buf = vec![0u8; len];
        let mut done = 0;
        while done < len {
            match self.file.read_at(&mut buf[done..], at + done as u64) {
                Ok(0) => return None,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        Some(buf)
    }

    fn num(&self, b: &[u8], at: usize, width: usize) -> u64 {
        let mut v = 0u64;
        for i in 0..width {
            let byte = u64::from(b[at + i]);
            v |= match self.little {
                true => byte << (8 * i),
                false => byte << (8 * (width - 1 - i)),
            };
        }
        v
    }

    /// A word of the image's class: 8 bytes wide, 4 narrow.
    fn word(&self, b: &[u8], wide_at: usize, narrow_at: usize) -> u64 {
        match self.wide {
            true => self.num(b, wide_at, 8),
            false => self.num(b, narrow_at, 4),
        }
    }
}

/// The ELF facts of `file` whose first bytes are `head`; `None` when it is not ELF.
pub fn elf(file: &File, head: &[u8]) -> Option<Elf> {
    if head.len() < 52 || &head[..4] != b"\x7fELF" {
        return None;
    }
    let r = Reader {
        file,
        head,
        little: head[5] == 1,
        wide: head[4] == 2,
    };
    if r.wide && head.len() < 64 {
        return None;
    }
    let e_type = r.num(head, 16, 2);
    let phoff = r.word(head, 32, 28);
    let (entsize, count) = match r.wide {
        true => (r.num(head, 54, 2) as usize, r.num(head, 56, 2) as usize),
        false => (r.num(head, 42, 2) as usize, r.num(head, 44, 2) as usize),
    };
    let min = if r.wide { 56 } else { 32 };
    if entsize < min || count == 0 {
        return Some(Elf::default());
    }
    let table = r.bytes(phoff, entsize * count.min(MAX_PHDRS))?;
    let mut out = Elf::default();
    for ph in table.chunks_exact(entsize) {
        const PT_INTERP: u64 = 3;
        if r.num(ph, 0, 4) != PT_INTERP {
            continue;
        }
        let offset = r.word(ph, 8, 4);
        let size = (r.word(ph, 32, 16) as usize).min(MAX_INTERP);
        let mut name = r.bytes(offset, size)?;
        if let Some(end) = name.iter().position(|&b| b == 0) {
            name.truncate(end);
        }
        out.interp = Some(name);
    }
    const ET_DYN: u64 = 3;
    out.loader_like = e_type == ET_DYN && out.interp.is_none();
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn sb(text: &[u8]) -> Option<(String, Option<String>)> {
        shebang(text).map(|s| {
            let t = |b: Vec<u8>| String::from_utf8(b).unwrap();
            (t(s.name), s.arg.map(t))
        })
    }

    #[test]
    fn a_shebang_line_is_read_as_the_kernel_reads_it() {
        let s = |n: &str, a: Option<&str>| Some((n.to_string(), a.map(str::to_string)));
        assert_eq!(sb(b"#!/bin/sh\necho"), s("/bin/sh", None));
        assert_eq!(sb(b"#! \t/bin/sh -e  \n"), s("/bin/sh", Some("-e")));
        assert_eq!(
            sb(b"#!/usr/bin/env python3 -u\n"),
            s("/usr/bin/env", Some("python3 -u"))
        );
        // A NUL ends the name for the kernel; what follows is no argument.
        assert_eq!(sb(b"#!/bin/true\0/bin/rm\n"), s("/bin/true", None));
        // ... but inside the argument it only ends the argument.
        assert_eq!(sb(b"#!/bin/sh -x\0y\n"), s("/bin/sh", Some("-x")));
        assert_eq!(sb(b"#!/bin/sh\t-x\n"), s("/bin/sh", Some("-x")));
        assert_eq!(sb(b"#!   \n"), None);
        assert_eq!(sb(b"#!\n"), None);
        assert_eq!(sb(b"no"), None);
        assert_eq!(
            sb(b"#!/bin/sh"),
            s("/bin/sh", None),
            "a short file ends in NULs"
        );
        // No newline in 256 bytes: the name must end before the buffer does.
        let mut long = b"#!/bin/sh ".to_vec();
        long.extend(std::iter::repeat_n(b'a', 300));
        assert_eq!(sb(&long), s("/bin/sh", Some(&"a".repeat(245))));
        let mut cut = b"#!".to_vec();
        cut.extend(std::iter::repeat_n(b'a', 300));
        assert_eq!(sb(&cut), None, "an interpreter name cut off is no script");
    }

    #[test]
    fn an_elf_names_its_interpreter_and_the_loader_names_none() {
        let read = |path: &str| {
            let f = File::open(path).unwrap();
            let mut head = vec![0u8; HEAD];
            let n = f.read_at(&mut head, 0).unwrap();
            head.truncate(n);
            elf(&f, &head).unwrap()
        };
        let sh = read("/bin/sh");
        assert!(
            sh.interp.as_deref().is_some_and(|i| i.starts_with(b"/lib")),
            "{sh:?}"
        );
        assert!(!sh.loader_like);
        let ld = sh.interp.map(|i| String::from_utf8(i).unwrap()).unwrap();
        let loader = read(&ld);
        assert!(loader.loader_like && loader.interp.is_none(), "{loader:?}");
        assert!(elf(&File::open("/bin/sh").unwrap(), b"#!/bin/sh\n").is_none());
    }
}
