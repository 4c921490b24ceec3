//! The Seatbelt profile (SBPL, what `sandbox-exec -p` takes) for a sandboxed command on macOS.
//! Pure text, so it is tested on every OS; only macOS runs it.

use std::fmt::Write;
use std::path::PathBuf;

/// Devices a shell writes to, besides the allowed paths: the terminals (`/dev/ttys*`,
/// `/dev/tty`), `/dev/fd/N` and the sinks.
const DEVICES: &str = "    (literal \"/dev/null\")\n    (literal \"/dev/zero\")\n    \
                       (literal \"/dev/dtracehelper\")\n    (regex #\"^/dev/tty\")\n    \
                       (regex #\"^/dev/fd/\")\n";

/// A profile that allows everything the sandbox does not restrict: with `writable`, writes only
/// under those paths (already resolved: Seatbelt matches real paths, `/private/tmp`, not
/// `/tmp`) and to the devices; with `network` false, no network but Unix sockets (a command
/// may still reach the daemon's socket, as a Linux network namespace leaves path sockets
/// reachable); `masks` may not be read (Seatbelt subtracts, so each is one rule; a rule later
/// in the profile wins).
pub fn profile(writable: Option<&[PathBuf]>, network: bool, masks: &[PathBuf]) -> String {
    let mut p = String::from("(version 1)\n(allow default)\n");
    if !masks.is_empty() {
        p.push_str("(deny file-read*\n");
        for path in masks {
            let _ = writeln!(p, "    (subpath {})", quote(&path.to_string_lossy()));
        }
        p.push_str(")\n");
    }
    if let Some(paths) = writable {
        p.push_str("(deny file-write*)\n(allow file-write*\n");
        for path in paths {
            let _ = writeln!(p, "    (subpath {})", quote(&path.to_string_lossy()));
        }
        p.push_str(DEVICES);
        p.push_str(")\n");
    }
    if !network {
        p.push_str("(deny network*)\n(allow network* (local unix-socket) (remote unix-socket))\n");
    }
    p
}

/// An SBPL string literal: `"` and `\` escaped, so no path can end the string early.
pub fn quote(text: &str) -> String {
    let mut q = String::with_capacity(text.len() + 2);
    q.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_subpaths_and_quotes_are_escaped() {
        let roots = [PathBuf::from("/Users/a/work"), PathBuf::from("/odd/\"x\\y")];
        let p = profile(Some(&roots), true, &[]);
        assert!(p.starts_with("(version 1)\n(allow default)\n(deny file-write*)"));
        assert!(p.contains("(subpath \"/Users/a/work\")"), "{p}");
        assert!(p.contains(r#"(subpath "/odd/\"x\\y")"#), "{p}");
        assert!(p.contains("(literal \"/dev/null\")"));
        assert!(!p.contains("network"), "{p}");
        assert_eq!(p.matches('(').count(), p.matches(')').count());
    }

    #[test]
    fn network_rule_only_when_the_network_is_off() {
        let p = profile(None, false, &[]);
        assert!(p.contains("(deny network*)"), "{p}");
        assert!(p.contains("(remote unix-socket)"), "{p}");
        assert!(!p.contains("file-write"), "{p}");
        assert!(!profile(None, true, &[]).contains("network"));
        assert_eq!(quote("plain"), "\"plain\"");
    }

    #[test]
    fn masks_deny_reading_beneath_each() {
        let masks = [
            PathBuf::from("/Users/a/.ssh"),
            PathBuf::from("/Users/a/.netrc"),
        ];
        let p = profile(None, true, &masks);
        assert!(
            p.contains("(deny file-read*\n    (subpath \"/Users/a/.ssh\")"),
            "{p}"
        );
        assert!(p.contains("(subpath \"/Users/a/.netrc\")"), "{p}");
        assert!(!profile(None, true, &[]).contains("file-read"));
    }
}
