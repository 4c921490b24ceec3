//! Which destinations a sandboxed tree may reach: host patterns (with an optional port) in three
//! lists — deny, allow, read-only — and what a host no pattern names gets.
//!
//! Hosts are compared in one normal form (lower case, no trailing dot, IPv6 without brackets
//! and in its canonical text), so `Example.COM.` and `example.com` are one host and `[0::1]` is
//! `::1`. A numeric host that is not a plain dotted quad (`127.1`, `0x7f000001`, `2130706433`)
//! is refused outright: the resolver would read it as an address, and a rule about
//! `127.0.0.1` must not be walked around by spelling it differently.

use std::net::{Ipv4Addr, Ipv6Addr};

/// What a host no rule names gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unknown {
    Deny,
    Ask,
    Allow,
}

/// The rules' answer for one destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `exact`: the rule that allows it names this host exactly (no wildcard), which is what
    /// lets it reach a loopback or link-local address.
    Allow { exact: bool },
    /// The reason, short, naming the rule.
    Deny(String),
    /// No rule names the host and [`Unknown::Ask`] says to ask the person.
    Ask,
}

/// The methods a read-only host accepts: those that change nothing by convention.
const READ_ONLY_METHODS: [&str; 3] = ["GET", "HEAD", "OPTIONS"];

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPat {
    /// `*`: every host.
    Any,
    Exact(String),
    /// `*.example.com`, kept as `.example.com`: any subdomain, not the apex.
    Under(String),
}

/// One rule as written, and what it matches.
#[derive(Debug, Clone)]
struct Pattern {
    text: String,
    host: HostPat,
    port: Option<u16>,
}

impl Pattern {
    fn parse(text: &str) -> Result<Pattern, String> {
        let t = text.trim();
        let bad = |why: &str| format!("bad host pattern \"{t}\": {why}");
        if t.is_empty() {
            return Err(bad("empty"));
        }
        let (host, port) = split_host_port(t).map_err(bad)?;
        let port = port.map(parse_port).transpose().map_err(bad)?;
        let host = if host == "*" {
            HostPat::Any
        } else if let Some(rest) = host.strip_prefix("*.") {
            if rest.contains('*') {
                return Err(bad("`*` in the middle"));
            }
            let under = normalise(rest).map_err(bad)?;
            if under.parse::<std::net::IpAddr>().is_ok() {
                return Err(bad("`*.` before an IP address"));
            }
            HostPat::Under(format!(".{under}"))
        } else if host.contains('*') {
            return Err(bad("`*` in the middle (only `*` or a leading `*.`)"));
        } else {
            HostPat::Exact(normalise(host).map_err(bad)?)
        };
        Ok(Pattern {
            text: t.to_string(),
            host,
            port,
        })
    }

    fn matches(&self, host: &str, port: u16) -> bool {
        self.port.is_none_or(|p| p == port)
            && match &self.host {
                HostPat::Any => true,
                HostPat::Exact(h) => h == host,
                HostPat::Under(suffix) => host.ends_with(suffix.as_str()),
            }
    }
}

/// The allow, deny and read-only lists, and what other hosts get.
#[derive(Debug, Clone)]
pub struct Rules {
    allow: Vec<Pattern>,
    deny: Vec<Pattern>,
    read_only: Vec<Pattern>,
    unknown: Unknown,
}

impl Rules {
    /// Patterns: `host`, `host:port`, `*.example.com` (any subdomain, not the apex),
    /// `*.example.com:443`, `*` (every host; `*:443` every host on that port), an IPv4/IPv6
    /// literal (`[::1]:8080` with a port). Hosts compare case-insensitively, a trailing dot
    /// ignored. A bad pattern is an error naming it and why.
    pub fn new(
        allow: &[String],
        deny: &[String],
        read_only: &[String],
        unknown: Unknown,
    ) -> Result<Rules, String> {
        let list = |texts: &[String]| -> Result<Vec<Pattern>, String> {
            texts.iter().map(|t| Pattern::parse(t)).collect()
        };
        Ok(Rules {
            allow: list(allow)?,
            deny: list(deny)?,
            read_only: list(read_only)?,
            unknown,
        })
    }

    /// Deny wins over everything; then allow; then read-only (only GET, HEAD and OPTIONS, and
    /// only where the method is seen: `method` None — a tunnel — is refused); then `unknown`.
    pub fn decide(&self, host: &str, port: u16, method: Option<&str>) -> Verdict {
        let host = match normalise(host) {
            Ok(h) => h,
            Err(why) => return Verdict::Deny(format!("bad host: {why}")),
        };
        let matching = |list| matching(list, &host, port);
        if let Some(p) = matching(&self.deny).first() {
            return Verdict::Deny(format!("denied by \"{}\"", p.text));
        }
        let allowed = matching(&self.allow);
        if !allowed.is_empty() {
            return Verdict::Allow {
                exact: any_exact(&allowed),
            };
        }
        let read_only = matching(&self.read_only);
        if let Some(first) = read_only.first() {
            return match method {
                Some(m) if READ_ONLY_METHODS.contains(&m) => Verdict::Allow {
                    exact: any_exact(&read_only),
                },
                Some(m) => Verdict::Deny(format!(
                    "\"{}\" is read-only: {m} is not GET, HEAD or OPTIONS",
                    first.text
                )),
                None => Verdict::Deny(format!(
                    "\"{}\" is read-only, and the methods inside a tunnel cannot be seen",
                    first.text
                )),
            };
        }
        match self.unknown {
            Unknown::Deny => Verdict::Deny("no rule allows this host".to_string()),
            Unknown::Ask => Verdict::Ask,
            Unknown::Allow => Verdict::Allow { exact: false },
        }
    }
}

/// The patterns of `list` that match.
fn matching<'p>(list: &'p [Pattern], host: &str, port: u16) -> Vec<&'p Pattern> {
    list.iter().filter(|p| p.matches(host, port)).collect()
}

/// Whether one of `found` names the host exactly.
fn any_exact(found: &[&Pattern]) -> bool {
    found.iter().any(|p| matches!(p.host, HostPat::Exact(_)))
}

/// Splits `host`, `host:port`, `[v6]`, `[v6]:port` or a bare IPv6 address; the host keeps its
/// brackets (`normalise` takes them off).
pub(super) fn split_host_port(s: &str) -> Result<(&str, Option<&str>), &'static str> {
    if s.starts_with('[') {
        let Some(close) = s.find(']') else {
            return Err("`[` without `]`");
        };
        let (host, rest) = s.split_at(close + 1);
        return match rest {
            "" => Ok((host, None)),
            _ => match rest.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err("text after `]`"),
            },
        };
    }
    if s.parse::<Ipv6Addr>().is_ok() {
        return Ok((s, None));
    }
    match s.rsplit_once(':') {
        Some((host, _)) if host.contains(':') => {
            Err("an IPv6 address with a port goes in brackets: [::1]:8080")
        }
        Some((host, port)) => Ok((host, Some(port))),
        None => Ok((s, None)),
    }
}

/// A port 1-65535 in decimal digits.
pub(super) fn parse_port(s: &str) -> Result<u16, &'static str> {
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err("bad port");
    }
    match s.parse::<u32>() {
        Ok(p @ 1..=65535) => u16::try_from(p).map_err(|_| "bad port"),
        _ => Err("port out of range 1-65535"),
    }
}

/// The one form a host is compared and connected in (see the module doc), or why it is no host.
pub(super) fn normalise(host: &str) -> Result<String, &'static str> {
    if let Some(inner) = host.strip_prefix('[') {
        return match inner.strip_suffix(']').map(str::parse::<Ipv6Addr>) {
            Some(Ok(a)) => Ok(a.to_string()),
            _ => Err("not an IPv6 address in brackets"),
        };
    }
    if let Ok(a) = host.parse::<Ipv6Addr>() {
        return Ok(a.to_string());
    }
    let h = host.strip_suffix('.').unwrap_or(host);
    if h.is_empty() {
        return Err("empty host");
    }
    if h.len() > 253 {
        return Err("host name too long");
    }
    let h = h.to_ascii_lowercase();
    for label in h.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err("empty or overlong label in host name");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err("a host name has letters, digits, `-`, `_` and dots only");
        }
    }
    // No top-level domain is numeric, so a numeric last label means an address.
    let last = h.rsplit('.').next().unwrap_or("");
    if last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x") {
        return match h.parse::<Ipv4Addr>() {
            Ok(a) => Ok(a.to_string()),
            Err(_) => Err("a numeric host must be a dotted-quad IPv4 address"),
        };
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn rules(allow: &[&str], deny: &[&str], read_only: &[&str], unknown: Unknown) -> Rules {
        let s = |l: &[&str]| l.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        Rules::new(&s(allow), &s(deny), &s(read_only), unknown).unwrap()
    }

    fn allows(r: &Rules, host: &str, port: u16) -> bool {
        matches!(r.decide(host, port, None), Verdict::Allow { .. })
    }

    #[test]
    fn patterns_parse_or_say_why() {
        let good = "example.com example.com:443 *.example.com *.example.com:443 * *:443 \
                    127.0.0.1 [::1]:8080 ::1 [::1] Example.COM. my_host-1.internal";
        for p in good.split_whitespace() {
            assert!(Pattern::parse(p).is_ok(), "{p}");
        }
        let bad = [
            ("", "empty"),
            ("  ", "empty"),
            ("example.com:0", "port"),
            ("example.com:65536", "port"),
            ("example.com:x", "port"),
            ("example.com:", "port"),
            ("ex*ample.com", "middle"),
            ("*.ex*.com", "middle"),
            ("a.*.com", "middle"),
            ("a..b", "label"),
            ("[::1", "]"),
            ("[::1]x", "after"),
            ("[example.com]", "IPv6"),
            ("fe80::1%eth0", "brackets"),
            ("[fe80::1%eth0]", "IPv6"),
            ("127.1", "dotted-quad"),
            ("0x7f000001", "dotted-quad"),
            ("2130706433", "dotted-quad"),
            ("*.1.2.3.4", "IP address"),
            ("exa mple.com", "letters"),
            ("1:2:3:4:5:6:7:8:9", "brackets"),
        ];
        for (p, why) in bad {
            let e = Rules::new(&[p.to_string()], &[], &[], Unknown::Deny).unwrap_err();
            assert!(
                e.contains(&format!("\"{}\"", p.trim())) && e.contains(why),
                "{p}: {e}"
            );
        }
    }

    #[test]
    fn wildcards_take_subdomains_not_the_apex_and_case_and_a_final_dot_do_not_count() {
        let r = rules(&["*.Example.com", "Plain.org."], &[], &[], Unknown::Deny);
        assert!(allows(&r, "a.example.com", 443));
        assert!(allows(&r, "A.B.EXAMPLE.COM.", 80));
        assert!(!allows(&r, "example.com", 443));
        assert!(!allows(&r, "badexample.com", 443));
        assert!(allows(&r, "plain.org", 1));
        assert!(allows(&r, "PLAIN.ORG.", 1));
        assert!(!allows(&r, "a.plain.org", 1));
        // A host that is no host is refused, whatever the rules.
        let all = rules(&["*"], &[], &[], Unknown::Allow);
        assert!(
            matches!(all.decide("127.1", 80, None), Verdict::Deny(w) if w.contains("bad host"))
        );
        assert!(matches!(all.decide("a b", 80, None), Verdict::Deny(_)));
    }

    #[test]
    fn ports_and_address_literals_match_as_written() {
        let r = rules(
            &[
                "example.com:443",
                "*.example.org:8443",
                "*:22",
                "[0::1]:8080",
                "10.0.0.1",
            ],
            &[],
            &[],
            Unknown::Deny,
        );
        assert!(allows(&r, "example.com", 443));
        assert!(!allows(&r, "example.com", 80));
        assert!(allows(&r, "x.example.org", 8443));
        assert!(!allows(&r, "x.example.org", 443));
        assert!(allows(&r, "anything.net", 22));
        assert!(allows(&r, "::1", 8080));
        assert!(allows(&r, "[::1]", 8080));
        assert!(!allows(&r, "::1", 8081));
        assert!(allows(&r, "10.0.0.1", 1234));
        assert!(!allows(&r, "10.0.0.2", 1234));
    }

    #[test]
    fn deny_wins_then_allow_then_read_only_then_unknown() {
        let r = rules(
            &["*", "both.com"],
            &["both.com", "*.bad.com"],
            &["ro.com", "both.com"],
            Unknown::Deny,
        );
        assert_eq!(
            r.decide("both.com", 443, Some("GET")),
            Verdict::Deny("denied by \"both.com\"".into())
        );
        assert_eq!(
            r.decide("x.bad.com", 443, None),
            Verdict::Deny("denied by \"*.bad.com\"".into())
        );
        // Allowed by `*` beats read-only.
        assert_eq!(
            r.decide("ro.com", 443, None),
            Verdict::Allow { exact: false }
        );
        for (unknown, verdict) in [
            (
                Unknown::Deny,
                Verdict::Deny("no rule allows this host".into()),
            ),
            (Unknown::Ask, Verdict::Ask),
            (Unknown::Allow, Verdict::Allow { exact: false }),
        ] {
            let r = rules(&["a.com"], &["b.com"], &["c.com"], unknown);
            assert_eq!(r.decide("other.com", 443, None), verdict);
            assert!(matches!(r.decide("b.com", 443, None), Verdict::Deny(_)));
            assert_eq!(r.decide("a.com", 443, None), Verdict::Allow { exact: true });
        }
    }

    #[test]
    fn read_only_allows_get_head_options_and_never_a_tunnel() {
        let r = rules(&[], &[], &["ro.com", "*.ro.org"], Unknown::Allow);
        for m in ["GET", "HEAD", "OPTIONS"] {
            assert_eq!(
                r.decide("ro.com", 80, Some(m)),
                Verdict::Allow { exact: true }
            );
            assert_eq!(
                r.decide("a.ro.org", 80, Some(m)),
                Verdict::Allow { exact: false }
            );
        }
        for m in ["POST", "PUT", "DELETE", "PATCH", "get"] {
            let Verdict::Deny(why) = r.decide("ro.com", 80, Some(m)) else {
                panic!("{m}")
            };
            assert!(
                why.contains("\"ro.com\" is read-only") && why.contains(m),
                "{why}"
            );
        }
        let Verdict::Deny(why) = r.decide("ro.com", 443, None) else {
            panic!("a tunnel")
        };
        assert!(why.contains("cannot be seen"), "{why}");
    }

    #[test]
    fn exact_only_when_a_rule_names_the_host() {
        let r = rules(
            &["*", "*.example.com", "api.example.com"],
            &[],
            &[],
            Unknown::Deny,
        );
        assert_eq!(
            r.decide("api.example.com", 443, None),
            Verdict::Allow { exact: true }
        );
        assert_eq!(
            r.decide("www.example.com", 443, None),
            Verdict::Allow { exact: false }
        );
        assert_eq!(
            r.decide("localhost", 443, None),
            Verdict::Allow { exact: false }
        );
    }
}
