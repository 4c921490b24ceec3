//! Host groups: one call aimed at several hosts, named by a list (`a,b`), a pattern (`web*`,
//! `*` for every host) or both (`local,web*`), and how many of them are reached at once.

use super::{Hosts, LOCAL};

/// Hosts of a group reached at once unless `host_parallel` says otherwise.
pub const DEFAULT_PARALLEL: usize = 8;
/// The most hosts one call may name: each is a connection and a reply section.
pub const MAX_GROUP: usize = 256;

/// Whether `host` names a group rather than one host.
pub fn is_group(host: &str) -> bool {
    host.contains([',', '*', '?'])
}

/// `*` any run of characters, `?` one; everything else itself.
fn matches(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.split_first(), name.split_first()) {
        (None, None) => true,
        (Some((b'*', rest)), _) => {
            matches(rest, name) || name.split_first().is_some_and(|(_, n)| matches(pattern, n))
        }
        (Some((b'?', rest)), Some((_, n))) => matches(rest, n),
        (Some((p, rest)), Some((c, n))) => p == c && matches(rest, n),
        _ => false,
    }
}

impl Hosts {
    /// The hosts `group` names, each once, in the order named (a pattern's in name order):
    /// items separated by commas, each a host name or a pattern with `*` and `?` (this machine,
    /// `local`, is matched too). A pattern reaches only the hosts policy allows; a name that
    /// is unknown or not allowed, or a pattern that matches none, is an error saying so.
    pub fn group(&self, group: &str) -> Result<Vec<String>, String> {
        let mut out: Vec<String> = Vec::new();
        let push = |name: &str, out: &mut Vec<String>| {
            if !out.iter().any(|n| n == name) {
                out.push(name.to_string());
            }
        };
        for item in group.split(',').map(str::trim) {
            if item.is_empty() {
                return Err(format!(
                    "host group {group:?} has an empty item; name hosts separated by commas \
                     (`a,b`) or a pattern (`web*`)"
                ));
            }
            if !item.contains(['*', '?']) {
                if item != LOCAL {
                    self.get(item)?;
                }
                push(item, &mut out);
                continue;
            }
            let before = out.len();
            let names = std::iter::once(LOCAL).chain(self.specs.keys().map(String::as_str));
            for name in names.filter(|n| self.allowed(n)) {
                if matches(item.as_bytes(), name.as_bytes()) {
                    push(name, &mut out);
                }
            }
            if out.len() == before && !out.iter().any(|n| matches(item.as_bytes(), n.as_bytes())) {
                let known: Vec<&str> = self.specs.keys().map(String::as_str).collect();
                return Err(format!(
                    "no host matches {item:?} (configured: {}; `{LOCAL}` is this machine)",
                    match known.is_empty() {
                        true => "none".to_string(),
                        false => known.join(", "),
                    }
                ));
            }
        }
        if out.len() > MAX_GROUP {
            return Err(format!(
                "host group {group:?} names {} hosts; one call reaches at most {MAX_GROUP}",
                out.len()
            ));
        }
        Ok(out)
    }

    /// How many hosts of a group are reached at once: `host_parallel` in the settings or
    /// `CUBA_EXEC_HOST_PARALLEL`, else [`DEFAULT_PARALLEL`].
    pub fn parallel(&self) -> usize {
        self.parallel.unwrap_or(DEFAULT_PARALLEL).max(1)
    }

    /// Sets how many hosts of a group are reached at once.
    pub fn set_parallel(&mut self, n: usize) {
        self.parallel = Some(n.max(1));
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_match_as_shells_do() {
        assert!(matches(b"web*", b"web1"));
        assert!(matches(b"web*", b"web"));
        assert!(!matches(b"web*", b"db1"));
        assert!(matches(b"*", b"local"));
        assert!(matches(b"w?b-*-2", b"web-eu-2"));
        assert!(!matches(b"w?b", b"wb"));
        assert!(matches(b"*a*b*", b"xxaxxbxx"));
    }
}
