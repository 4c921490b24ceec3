//! The `[http]` table of config.toml, and the address `serve --http` names, checked before
//! anything listens: an address off this machine needs TLS or `behind_proxy = true`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// The address when neither the command line nor the file names one.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8765";

/// Requests the daemon takes at once on one connection (its `MAX_IN_FLIGHT`): a caller's calls
/// all go over one.
const DAEMON_IN_FLIGHT: usize = 256;
/// A caller's requests in flight at most: a call (a `wait` with progress) may have two
/// requests at the daemon, and the daemon's bound must never be what refuses it.
pub const MAX_IN_FLIGHT_PER_TOKEN: usize = DAEMON_IN_FLIGHT / 2 - 8;

#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    /// The URL clients use (`https://box.example:8443/mcp`): the resource in the metadata
    /// document, and its host is accepted in `Host`. None: derived from each request.
    pub url: Option<String>,
    /// Certificate chain and private key (PEM), read again when either file changes.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// A proxy in front terminates TLS: a plain listener off loopback is then allowed.
    pub behind_proxy: bool,
    /// `Host` values accepted besides loopback names and the URL's host.
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted; any other `Origin` is refused (none: every present one is).
    pub allowed_origins: Vec<String>,
    pub max_body: usize,
    pub header_timeout: Duration,
    pub max_sessions_per_token: usize,
    pub max_in_flight: usize,
    pub max_connections: usize,
    /// Per caller (a token, a JWT subject): no caller can take the places of another.
    pub max_in_flight_per_token: usize,
    pub max_connections_per_token: usize,
    pub max_streams_per_token: usize,
    pub session_idle: Duration,
    pub jwt: Option<Jwt>,
}

/// `[http.jwt]`: bearer tokens issued by an OAuth authorization server, checked with its keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Jwt {
    /// The `iss` the tokens must carry; also named in the metadata document.
    pub issuer: String,
    /// The `aud` they must carry (RFC 8707: this server's URL); default: `url`.
    pub audience: Option<String>,
    /// The issuer's keys: a JWKS file, or an `http(s)://` URL read at start and on an unknown
    /// key id.
    pub jwks: String,
    /// The claim that names the caller (owner of its processes); default `sub`.
    #[serde(default = "sub")]
    pub owner_claim: String,
    /// Scope of every caller it admits, as a token's (`cubactl token create --hosts …`).
    pub hosts: Option<Vec<String>>,
    pub allow: Option<Vec<String>>,
    pub roots: Option<Vec<String>>,
}

/// The scope a token or an issuer's config gives: it narrows the policy, never widens it.
#[derive(Debug, Default, Clone)]
pub struct Scope {
    pub hosts: Option<Vec<String>>,
    pub allow: Option<Vec<String>>,
    pub roots: Option<Vec<String>>,
}

fn sub() -> String {
    "sub".into()
}

#[derive(Deserialize, Default)]
struct File {
    http: Option<Table>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Table {
    listen: Option<String>,
    url: Option<String>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    #[serde(default)]
    behind_proxy: bool,
    #[serde(default)]
    allowed_hosts: Vec<String>,
    #[serde(default)]
    allowed_origins: Vec<String>,
    max_body: Option<toml::Value>,
    header_timeout: Option<toml::Value>,
    max_sessions_per_token: Option<usize>,
    max_in_flight: Option<usize>,
    max_connections: Option<usize>,
    max_in_flight_per_token: Option<usize>,
    max_connections_per_token: Option<usize>,
    max_streams_per_token: Option<usize>,
    session_idle: Option<toml::Value>,
    jwt: Option<Jwt>,
}

impl Settings {
    /// The settings from config.toml (found through `lookup`), with `listen` from the command
    /// line when it names one. Errors name the key and what to do.
    pub fn load(
        lookup: &impl Fn(&str) -> Option<String>,
        listen: Option<&str>,
    ) -> Result<Settings, String> {
        let mut table = Table::default();
        if let Some((path, _)) = cuba_protocol::paths::config_file(lookup) {
            if let Ok(text) = std::fs::read_to_string(&path) {
                let file: File = toml::from_str(&text)
                    .map_err(|e| format!("config file {}: {e}", path.display()))?;
                table = file.http.unwrap_or_default();
            }
        }
        let listen_text = listen
            .map(str::to_string)
            .or(table.listen.clone())
            .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let listen = parse_listen(&listen_text)?;
        let tls = match (table.tls_cert, table.tls_key) {
            (Some(c), Some(k)) => Some((c, k)),
            (None, None) => None,
            _ => return Err("[http] needs both tls_cert and tls_key, or neither".into()),
        };
        let settings = Settings {
            listen,
            url: table.url,
            tls,
            behind_proxy: table.behind_proxy,
            allowed_hosts: table.allowed_hosts,
            allowed_origins: table.allowed_origins,
            max_body: size(table.max_body, "max_body", 4 << 20)?,
            header_timeout: duration(table.header_timeout, "header_timeout", 10)?,
            max_sessions_per_token: table.max_sessions_per_token.unwrap_or(64).max(1),
            max_in_flight: table.max_in_flight.unwrap_or(512).max(1),
            max_connections: table.max_connections.unwrap_or(1024).max(1),
            max_in_flight_per_token: table.max_in_flight_per_token.unwrap_or(100).max(1),
            max_connections_per_token: table.max_connections_per_token.unwrap_or(256).max(1),
            max_streams_per_token: table.max_streams_per_token.unwrap_or(64).max(1),
            session_idle: duration(table.session_idle, "session_idle", 30 * 60)?,
            jwt: table.jwt,
        };
        settings.check()?;
        Ok(settings)
    }

    /// Loopback only, unless TLS is on or a proxy is said to terminate it; a caller's calls
    /// within what its one daemon connection takes.
    fn check(&self) -> Result<(), String> {
        if self.max_in_flight_per_token > MAX_IN_FLIGHT_PER_TOKEN {
            return Err(format!(
                "[http] max_in_flight_per_token = {}: at most {MAX_IN_FLIGHT_PER_TOKEN}. A \
                 token's calls share one connection to the daemon, which takes {} requests at \
                 once, and a call may have two there",
                self.max_in_flight_per_token, DAEMON_IN_FLIGHT
            ));
        }
        if !self.listen.ip().is_loopback() && self.tls.is_none() && !self.behind_proxy {
            return Err(format!(
                "refusing to serve plain HTTP on {}, off this machine: bearer tokens would cross \
                 the network in clear. Set [http] tls_cert and tls_key in config.toml, or \
                 behind_proxy = true when a proxy in front terminates TLS; or listen on \
                 127.0.0.1",
                self.listen
            ));
        }
        Ok(())
    }

    /// The scheme clients use.
    pub fn scheme(&self) -> &'static str {
        match self.tls.is_some() {
            true => "https",
            false => "http",
        }
    }

    /// `Host` values accepted: loopback names, the URL's host, the listen address when it is
    /// a specific one, and `allowed_hosts`.
    pub fn hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        if let Some(host) = self.url.as_deref().and_then(url_host) {
            hosts.push(host);
        }
        if !self.listen.ip().is_unspecified() {
            hosts.push(self.listen.ip().to_string());
        }
        hosts.extend(self.allowed_hosts.iter().cloned());
        hosts
    }
}

fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    // A port alone, or `localhost:PORT`.
    let port = text.strip_prefix("localhost:").unwrap_or(text);
    match port.parse::<u16>() {
        Ok(p) => Ok(SocketAddr::new(IpAddr::from([127, 0, 0, 1]), p)),
        Err(_) => Err(format!(
            "{text:?} is not an address to listen on (e.g. 127.0.0.1:8765, [::1]:8765, 8765)"
        )),
    }
}

/// The host of `url` (`https://box.example:8443/mcp` → `box.example`).
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => authority.split(':').next()?,
    };
    (!host.is_empty()).then(|| host.to_string())
}

fn size(value: Option<toml::Value>, key: &str, default: usize) -> Result<usize, String> {
    let n = match value {
        None => return Ok(default),
        Some(toml::Value::Integer(n)) => {
            u64::try_from(n).map_err(|_| format!("{key}: negative"))?
        }
        Some(toml::Value::String(s)) => {
            cuba_protocol::hosts::size(&s).map_err(|e| format!("[http] {key}: {e}"))?
        }
        Some(other) => return Err(format!("[http] {key}: {other} is not a size")),
    };
    usize::try_from(n).map_err(|_| format!("[http] {key}: too large"))
}

/// Seconds, or `30s`, `10m`, `2h`.
fn duration(value: Option<toml::Value>, key: &str, default: u64) -> Result<Duration, String> {
    let bad =
        |v: &dyn std::fmt::Display| format!("[http] {key}: {v} is not a duration (30s, 10m, 2h)");
    let secs = match value {
        None => default,
        Some(toml::Value::Integer(n)) => u64::try_from(n).map_err(|_| bad(&n))?,
        Some(toml::Value::String(s)) => {
            let t = s.trim();
            let (digits, scale) = match t.char_indices().last() {
                Some((i, 's')) => (&t[..i], 1),
                Some((i, 'm')) => (&t[..i], 60),
                Some((i, 'h')) => (&t[..i], 3600),
                _ => (t, 1),
            };
            digits
                .trim()
                .parse::<u64>()
                .ok()
                .and_then(|n| n.checked_mul(scale))
                .ok_or_else(|| bad(&s))?
        }
        Some(other) => return Err(bad(&other)),
    };
    Ok(Duration::from_secs(secs.max(1)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn with(text: &str, listen: Option<&str>) -> Result<Settings, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        let p = path.to_string_lossy().into_owned();
        Settings::load(&|k| (k == "CUBA_EXEC_CONFIG").then(|| p.clone()), listen)
    }

    #[test]
    fn defaults_are_loopback_and_bounded() {
        let s = with("", None).unwrap();
        assert_eq!(s.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(s.max_body, 4 << 20);
        assert_eq!(s.header_timeout, Duration::from_secs(10));
        // Per caller, strictly below the endpoint's own bounds and the daemon's.
        assert!(s.max_in_flight_per_token < s.max_in_flight);
        assert!(s.max_in_flight_per_token * 2 < DAEMON_IN_FLIGHT);
        assert!(s.max_connections_per_token < s.max_connections);
        assert!(s.max_streams_per_token < s.max_connections_per_token);
        assert_eq!(with("", Some("9000")).unwrap().listen.port(), 9000);
    }

    #[test]
    fn off_loopback_needs_tls_or_a_proxy() {
        let e = with("", Some("0.0.0.0:8765")).unwrap_err();
        assert!(e.contains("tls_cert") && e.contains("behind_proxy"), "{e}");
        assert!(with("[http]\nbehind_proxy = true\n", Some("0.0.0.0:8765")).is_ok());
        let tls = "[http]\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"\n";
        assert!(with(tls, Some("0.0.0.0:8765")).is_ok());
        assert!(with("[http]\ntls_cert = \"c.pem\"\n", None).is_err());
    }

    #[test]
    fn keys_are_checked_and_read() {
        let s = with(
            "[http]\nurl = \"https://box.example:8443/mcp\"\nmax_body = \"1M\"\n\
             header_timeout = \"2s\"\nsession_idle = \"5m\"\nallowed_hosts = [\"other\"]\n",
            None,
        )
        .unwrap();
        assert_eq!(s.max_body, 1 << 20);
        assert_eq!(s.header_timeout, Duration::from_secs(2));
        assert_eq!(s.session_idle, Duration::from_secs(300));
        assert!(s.hosts().contains(&"box.example".to_string()));
        assert!(s.hosts().contains(&"other".to_string()));
        let e = with("[http]\nmax_in_flight_per_token = 200\n", None).unwrap_err();
        assert!(
            e.contains("max_in_flight_per_token = 200: at most 120"),
            "{e}"
        );
        let e = with("[http]\nlisten_on = 1\n", None).unwrap_err();
        assert!(e.contains("listen_on"), "{e}");
    }
}
