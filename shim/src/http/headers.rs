//! `Host` and `Origin`, judged before anything else reads them (against DNS rebinding and
//! cross-origin requests): one of each at most, the host one this endpoint serves (the request
//! target's authority too, when it has one), the origin an allowed one. And CORS for the
//! allowed origins, so a browser client can use the endpoint.

use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};

/// Why a request's Host or Origin is refused: its status and text.
pub type Refusal = (StatusCode, String);

/// The request headers a browser client sends, allowed in a preflight.
const ALLOW_HEADERS: &str =
    "Authorization, Content-Type, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID";
/// What a browser client may read of a reply.
const EXPOSE_HEADERS: &str = "Mcp-Session-Id, WWW-Authenticate";
/// How long a browser may keep a preflight's answer (seconds).
const MAX_AGE: &str = "600";

/// The checked host (as sent, without port), or why the request is refused. `hosts`: the
/// allowed host names.
pub fn host<B>(req: &Request<B>, hosts: &[String]) -> Result<String, Refusal> {
    let bad = |why: &str| (StatusCode::BAD_REQUEST, why.to_string());
    let mut values = req.headers().get_all(header::HOST).iter();
    let value = values.next();
    if values.next().is_some() {
        return Err(bad("more than one Host header"));
    }
    let sent = match value {
        Some(v) => v.to_str().map_err(|_| bad("the Host header is not text"))?,
        None => match req.uri().authority() {
            Some(a) => a.as_str(),
            None => return Err(bad("no Host header")),
        },
    };
    let (name, port) = split_host(sent).ok_or_else(|| bad("the Host header is not a host"))?;
    // An absolute-form target names the host too: it must be the same one.
    if let Some(authority) = req.uri().authority() {
        let same = split_host(authority.as_str())
            .is_some_and(|(n, p)| n.eq_ignore_ascii_case(&name) && p == port);
        if !same {
            return Err(bad("the request target names another host than Host"));
        }
    }
    if !hosts.iter().any(|h| h.eq_ignore_ascii_case(&name)) {
        return Err((
            StatusCode::FORBIDDEN,
            "Forbidden: this Host is not one the endpoint serves (add it to [http] \
             allowed_hosts, or set url)"
                .into(),
        ));
    }
    Ok(sent.to_string())
}

/// `name` and port of a Host value, if it is one: letters, digits, `.`, `-`, `_`, or an IPv6
/// address in brackets; a port of digits. Nothing else, so a checked host can be written into
/// a header or a URL.
fn split_host(value: &str) -> Option<(String, Option<u16>)> {
    let (name, port) = match value.strip_prefix('[') {
        Some(rest) => {
            let (v6, after) = rest.split_once(']')?;
            if v6.is_empty()
                || !v6
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
            {
                return None;
            }
            let port = match after {
                "" => None,
                a => Some(a.strip_prefix(':')?),
            };
            (v6, port)
        }
        None => match value.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (value, None),
        },
    };
    let name_ok = !name.is_empty()
        && (value.starts_with('[')
            || name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_'));
    if !name_ok {
        return None;
    }
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((name.to_ascii_lowercase(), port))
}

/// The request's origin when it is an allowed one; `None` when it sends none; a refusal when
/// it sends two, or one not in `allowed` (every present one is refused when `allowed` is
/// empty).
pub fn origin(headers: &HeaderMap, allowed: &[String]) -> Result<Option<HeaderValue>, Refusal> {
    let mut values = headers.get_all(header::ORIGIN).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err((
            StatusCode::BAD_REQUEST,
            "more than one Origin header".into(),
        ));
    }
    let ok = value
        .to_str()
        .ok()
        .and_then(Origin::parse)
        .is_some_and(|o| allowed.iter().any(|a| o.allowed_by(a)));
    match ok {
        true => Ok(Some(value.clone())),
        false => Err((
            StatusCode::FORBIDDEN,
            "Forbidden: Origin header is not allowed ([http] allowed_origins)".into(),
        )),
    }
}

/// A browser origin: scheme, host, port (the scheme's default when absent).
#[derive(Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl Origin {
    fn parse(text: &str) -> Option<Origin> {
        let uri = http::Uri::try_from(text.trim()).ok()?;
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let authority = uri.authority()?;
        let host = authority
            .host()
            .trim_matches(['[', ']'])
            .to_ascii_lowercase();
        let port = authority.port_u16().or(match scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        });
        Some(Origin { scheme, host, port })
    }

    /// As rmcp judges it: an entry without a port, or with `:*`, allows any port.
    fn allowed_by(&self, entry: &str) -> bool {
        let entry = entry.trim();
        let (base, any_port) = match entry.strip_suffix(":*") {
            Some(b) => (b, true),
            None => (entry, false),
        };
        let Ok(uri) = http::Uri::try_from(base) else {
            return false;
        };
        let Some(a) = uri.authority() else {
            return false;
        };
        let Some(mut allowed) = Origin::parse(base) else {
            return false;
        };
        if any_port || a.port_u16().is_none() {
            allowed.port = self.port;
        }
        allowed == *self
    }
}

/// Whether `req` is a CORS preflight (OPTIONS naming the method it asks for).
pub fn is_preflight<B>(req: &Request<B>) -> bool {
    req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// Makes `reply` the answer to a preflight from allowed origin `origin`.
pub fn preflight<B>(reply: &mut Response<B>, origin: HeaderValue) {
    *reply.status_mut() = StatusCode::NO_CONTENT;
    let h = reply.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(ALLOW_HEADERS),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static(MAX_AGE),
    );
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
}

/// The CORS headers of a reply to allowed origin `origin`.
pub fn allow<B>(reply: &mut Response<B>, origin: HeaderValue) {
    let h = reply.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSE_HEADERS),
    );
    h.append(header::VARY, HeaderValue::from_static("Origin"));
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn req(hosts: &[&str], target: &str) -> Request<()> {
        let mut b = Request::builder().uri(target);
        for h in hosts {
            b = b.header(header::HOST, *h);
        }
        b.body(()).unwrap()
    }

    fn allowed() -> Vec<String> {
        vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
    }

    #[test]
    fn one_good_host_is_accepted_and_anything_else_refused() {
        let ok = host(&req(&["127.0.0.1:8765"], "/mcp"), &allowed()).unwrap();
        assert_eq!(ok, "127.0.0.1:8765");
        assert!(host(&req(&["[::1]:80"], "/mcp"), &allowed()).is_ok());
        let status = |h: &[&str], t: &str| host(&req(h, t), &allowed()).unwrap_err().0;
        assert_eq!(status(&["localhost", "evil.example"], "/mcp"), 400);
        assert_eq!(status(&["evil.example"], "/mcp"), 403);
        assert_eq!(status(&["localhost\"x"], "/mcp"), 400);
        assert_eq!(status(&["localhost:80:80"], "/mcp"), 400);
        assert_eq!(status(&["localhost"], "http://evil.example/mcp"), 400);
        assert!(host(&req(&["localhost"], "http://LOCALHOST/mcp"), &allowed()).is_ok());
    }

    #[test]
    fn origins_are_judged_as_rmcp_does() {
        let allowed = vec!["https://app.example:443".to_string(), "http://x:*".into()];
        let judge = |o: &[&str]| {
            let mut h = HeaderMap::new();
            for v in o {
                h.append(header::ORIGIN, HeaderValue::from_str(v).unwrap());
            }
            origin(&h, &allowed).map(|o| o.is_some()).map_err(|e| e.0)
        };
        assert_eq!(judge(&[]), Ok(false));
        assert_eq!(judge(&["https://app.example"]), Ok(true));
        assert_eq!(judge(&["http://x:9"]), Ok(true));
        assert_eq!(judge(&["https://app.example:8443"]).unwrap_err(), 403);
        assert_eq!(judge(&["https://evil.example"]).unwrap_err(), 403);
        let two = judge(&["https://app.example", "https://evil.example"]);
        assert_eq!(two.unwrap_err(), 400);
    }
}
