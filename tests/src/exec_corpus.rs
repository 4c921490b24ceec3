//! The exec-check corpus: ways to reach a blocked program (`rm`, on the default blocklist) that
//! no parser can see, each with a marker file of its own. The end-to-end tests run it through
//! the protocol and `cubactl` (`tests/tests/e2e/exec_checks.rs`), the MCP tests through the
//! `cuba-exec` binary (`shim/tests/mcp/mcp_exec_corpus.rs`). A case passes only if its marker
//! survives, the reply names `rm` (a `BLOCKED` line, or the parse-time refusal), and the audit
//! log has the decision.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A program that runs its arguments: the open-ended kind no wrapper list names.
const WRAPPER: &str = "#!/bin/sh\nexec \"$@\"\n";
/// A program that runs its arguments from a thread of its own.
const THREADED: &str = "import os, sys, threading, time\n\
t = threading.Thread(target=time.sleep, args=(5,), daemon=True)\n\
t.start()\n\
os.execvp(sys.argv[1], sys.argv[1:])\n";

/// Each case: a name and the command, with `{M}` the marker's path and `{D}` the case's
/// directory.
pub const CASES: [(&str, &str); 27] = [
    ("wrapper written for the test", "{D}/runargs rm {M}"),
    ("wrapper of a wrapper", "{D}/runargs {D}/runargs rm {M}"),
    (
        "positional parameters of sh -c",
        "sh -c '\"$0\" \"$1\"' rm {M}",
    ),
    (
        "shell input on fd 3",
        "printf 'rm {M}\\n' > {D}/in; sh /dev/fd/3 3< {D}/in",
    ),
    ("brace expansion", "bash -c '{rm,{M}}'"),
    ("an array", "bash -c 'a=(rm {M}); \"${a[@]}\"'"),
    (
        "a script written, then run",
        "printf 'rm {M}\\n' > {D}/s.sh; sh {D}/s.sh",
    ),
    (
        "a name found at run time",
        "x=$(printf r; printf m); $x {M}",
    ),
    (
        "an interpreter calling a shell",
        "python3 -c 'import os; os.system(\"rm {M}\")'",
    ),
    (
        "an interpreter's own exec",
        "perl -e 'exec \"rm\", \"{M}\"'",
    ),
    (
        "a copied blocked binary",
        "cp /usr/bin/rm {D}/del; {D}/del {M}",
    ),
    (
        "a link to a blocked binary",
        "ln -s /usr/bin/rm {D}/zap; {D}/zap {M}",
    ),
    ("a #! script whose interpreter is blocked", "{D}/k {M}"),
    (
        "an exec from a multi-threaded program",
        "python3 {D}/threaded.py rm {M}",
    ),
    ("find -exec", "find {M} -exec {D}/runargs rm {} ';'"),
    ("xargs", "echo {M} | xargs {D}/runargs rm"),
    (
        "make",
        "printf 'all:\\n\\trm {M}\\n' > {D}/Makefile; make -s -C {D}",
    ),
    (
        "the dynamic loader, which maps a program without an exec",
        "for l in /lib64/ld-linux*.so.* /lib/ld-linux*.so.* /lib/ld-musl*; do \
         [ -e \"$l\" ] && exec \"$l\" /usr/bin/rm {M}; done",
    ),
    (
        "a renamed copy of the dynamic loader",
        "for l in /lib64/ld-linux*.so.* /lib/ld-linux*.so.* /lib/ld-musl*; do \
         [ -e \"$l\" ] && cp \"$l\" {D}/myld && exec {D}/myld /usr/bin/rm {M}; done",
    ),
    (
        "a #! line naming a copy of the loader, given its program by the caller",
        "{D}/ldscript /usr/bin/rm {M}",
    ),
    (
        "the caller's own /dev/fd/N",
        "exec 3< /usr/bin/rm; /dev/fd/3 {M}",
    ),
    (
        "the caller's own /proc/self/fd/N",
        "exec 3< /usr/bin/rm; /proc/self/fd/3 {M}",
    ),
    (
        "the caller's own /dev/stdin",
        "/dev/stdin {M} < /usr/bin/rm",
    ),
    (
        "a copy in a memfd",
        "python3 -c 'import os; f = os.memfd_create(\"x\"); \
         os.write(f, open(\"/usr/bin/rm\", \"rb\").read()); os.execve(f, [\"rm\", \"{M}\"], {})'",
    ),
    (
        "a copy deleted while open",
        "python3 -c 'import os, shutil; shutil.copy(\"/usr/bin/rm\", \"{D}/gone\"); \
         f = os.open(\"{D}/gone\", os.O_RDONLY); os.unlink(\"{D}/gone\"); \
         os.execv(\"/proc/self/fd/%d\" % f, [\"rm\", \"{M}\"])'",
    ),
    ("a #! line whose name a NUL ends", "{D}/nulk {M}"),
    ("#! lines five deep", "{D}/chain1 {M}"),
];

/// Cases of a multi-call binary (Debian's `busybox`, which `.ci/run` installs): its tools run
/// without an exec of their own.
pub const BUSYBOX: [(&str, &str); 2] = [
    ("a multi-call binary's tool", "busybox rm {M}"),
    (
        "a multi-call binary called by its tool's name",
        "bash -c 'exec -a rm busybox {M}'",
    ),
];

/// Every case this machine can run: the busybox ones where it has busybox (a skip otherwise,
/// which fails under CI).
pub fn cases() -> Vec<(&'static str, &'static str)> {
    let mut all = CASES.to_vec();
    if on_path("busybox") {
        all.extend(BUSYBOX);
    } else {
        crate::machine::skip("exec corpus: busybox cases", "busybox is not installed");
    }
    all
}

pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// One case, ready to run: its directory (the command's cwd), marker and command.
#[derive(Debug)]
pub struct Case {
    pub name: &'static str,
    pub dir: PathBuf,
    pub marker: PathBuf,
    /// The `#!` script naming rm, which must survive too.
    pub script: PathBuf,
    pub command: String,
}

impl Case {
    /// Makes the case's directory under `root`, with its helpers and marker.
    pub fn prepare(root: &Path, (name, text): (&'static str, &str)) -> Case {
        let dir = root.join(name.replace([' ', '#', '!', '-', ',', '\''], "_"));
        std::fs::create_dir_all(&dir).expect("case dir");
        let exe = |path: &Path, text: &str| {
            std::fs::write(path, text).expect("helper");
            std::fs::set_permissions(path, PermissionsExt::from_mode(0o755)).expect("chmod");
        };
        exe(&dir.join("runargs"), WRAPPER);
        exe(&dir.join("threaded.py"), THREADED);
        // A script whose `#!` names rm (written here: `chmod` is blocked too). The kernel would
        // run `rm {D}/k {M}`.
        let script = dir.join("k");
        exe(&script, "#!/usr/bin/rm\n");
        // The kernel ends the name at the NUL and runs rm; a reader that splits at spaces
        // only sees a path with a NUL in it.
        exe(&dir.join("nulk"), "#!/usr/bin/rm\0 -f\n");
        // Five interpreters, the last rm: as deep as the kernel follows.
        for i in 1..5 {
            let next = dir.join(format!("chain{}", i + 1));
            exe(
                &dir.join(format!("chain{i}")),
                &format!("#!{}\n", next.display()),
            );
        }
        exe(&dir.join("chain5"), "#!/usr/bin/rm\n");
        // A copy of the loader as an interpreter: its `--argv0` takes the script, and the
        // program it runs is the caller's first argument.
        let loader = ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
            .into_iter()
            .find(|l| Path::new(l).exists())
            .unwrap_or("/lib64/ld-linux-x86-64.so.2");
        let interp = dir.join("interp");
        if std::fs::copy(loader, &interp).is_ok() {
            std::fs::set_permissions(&interp, PermissionsExt::from_mode(0o755)).expect("chmod");
        }
        exe(
            &dir.join("ldscript"),
            &format!("#!{} --argv0\n", interp.display()),
        );
        let marker = dir.join("marker");
        std::fs::write(&marker, "keep").expect("marker");
        let command = text
            .replace("{M}", &marker.display().to_string())
            .replace("{D}", &dir.display().to_string());
        Case {
            name,
            dir,
            marker,
            script,
            command,
        }
    }

    /// Both files are still there.
    pub fn intact(&self) -> bool {
        self.marker.exists() && self.script.exists()
    }

    /// Whether `said` (a reply, `cubactl`'s output) names the refusal of `rm`: an exec refused
    /// (`BLOCKED: /usr/bin/rm …`, or a message naming `` `rm` ``), or the parse-time refusal
    /// naming rm or (under `unresolved = "refuse"`) the part it could not resolve.
    pub fn named(said: &str) -> bool {
        said.contains("BLOCKED: /usr/bin/rm")
            || said.contains("`rm`")
            || said.contains("cannot be checked")
            || said.contains("rule blocklist")
    }

    /// The audit log in `state_dir` has the decision on this case's command: an `exec` line
    /// naming a program, or a spawn refused before it ran.
    pub fn audited(&self, state_dir: &Path) -> bool {
        let audit = std::fs::read_to_string(state_dir.join("audit.jsonl")).unwrap_or_default();
        audit
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|l| l["command"] == self.command.as_str())
            .any(|l| {
                let exec =
                    l["event"] == "exec" && l["program"].as_str().is_some_and(|p| !p.is_empty());
                let refused = l["event"] == "spawn" && l["decision"] == "refused";
                exec || refused
            })
    }
}
