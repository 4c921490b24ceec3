//! Every HTTP request, before rmcp's streamable HTTP service sees it: Host and Origin (and
//! CORS), the metadata document, the bearer token (401 with `WWW-Authenticate` naming that
//! document), the session's owner (every session is bound to the token that made it), and the
//! bounds — requests in flight, body size, and per token: sessions, requests in flight,
//! connections, streams — each refusal naming its limit. A token that is revoked or expires
//! loses what it has open (see [`Gate::watch`]).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::StreamableHttpService;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::auth::{Auth, JWT_PREFIX};
use super::guarded::{is_wait, opens_session, request_id, Call, Guarded, Places};
use super::headers;
use super::settings::Settings;
use super::tenants::{Held, Kind, Limits, Tenants};
use crate::CubaExec;
use cuba_protocol::tokens::Refused;

pub type Reply = Response<BoxBody<Bytes, Infallible>>;

/// The path the MCP endpoint is served on.
pub const MCP_PATH: &str = "/mcp";
/// RFC 9728's well-known path (with the resource's path appended, or not).
const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";
const SESSION_HEADER: &str = "mcp-session-id";
/// How often the tokens of callers holding anything open are asked about again: a revoked
/// or expired token's streams, sessions and calls end within this (and the daemon's answer).
pub const REVOKE_CHECK: Duration = Duration::from_secs(2);

pub struct Gate {
    settings: Arc<Settings>,
    mcp: StreamableHttpService<CubaExec, LocalSessionManager>,
    manager: Arc<LocalSessionManager>,
    pub auth: Auth,
    /// What each caller holds open, and its sessions.
    tenants: Arc<Tenants>,
    in_flight: Arc<Semaphore>,
    /// `Host` names served.
    hosts: Vec<String>,
}

/// One connection: the caller it is counted against, the one of its latest request.
#[derive(Default)]
pub struct Conn {
    owner: Mutex<Option<Held>>,
}

impl Conn {
    /// Counts this connection against `key` (from now on), or the bound that refuses it.
    fn claim(&self, tenants: &Arc<Tenants>, key: &Arc<str>) -> Result<(), usize> {
        let mut owner = self.owner.lock().unwrap_or_else(|e| e.into_inner());
        if owner.as_ref().is_some_and(|h| h.key() == key) {
            return Ok(());
        }
        *owner = Some(tenants.take(key, Kind::Connection)?);
        Ok(())
    }
}

impl Gate {
    pub fn new(
        settings: Arc<Settings>,
        mcp: StreamableHttpService<CubaExec, LocalSessionManager>,
        manager: Arc<LocalSessionManager>,
        auth: Auth,
    ) -> Gate {
        let tenants = Tenants::new(Limits {
            held: [
                settings.max_in_flight_per_token,
                settings.max_connections_per_token,
                settings.max_streams_per_token,
            ],
            sessions: settings.max_sessions_per_token,
        });
        Gate {
            in_flight: Arc::new(Semaphore::new(settings.max_in_flight)),
            hosts: settings.hosts(),
            settings,
            mcp,
            manager,
            auth,
            tenants,
        }
    }

    /// Host and Origin first (nothing reads them before), CORS preflights, then the request.
    pub async fn handle(
        self: Arc<Self>,
        req: Request<hyper::body::Incoming>,
        conn: &Conn,
    ) -> Reply {
        let host = match headers::host(&req, &self.hosts) {
            Ok(h) => h,
            Err((status, why)) => return plain(status, why),
        };
        let origin = match headers::origin(req.headers(), &self.settings.allowed_origins) {
            Ok(o) => o,
            Err((status, why)) => return plain(status, why),
        };
        if headers::is_preflight(&req) {
            let Some(origin) = origin else {
                let why = "a CORS preflight needs an Origin header".to_string();
                return plain(StatusCode::BAD_REQUEST, why);
            };
            let mut reply = Response::new(Full::new(Bytes::new()).boxed());
            headers::preflight(&mut reply, origin);
            return reply;
        }
        let mut reply = self.serve(req, &host, conn).await;
        if let Some(origin) = origin {
            headers::allow(&mut reply, origin);
        }
        reply
    }

    async fn serve(&self, req: Request<hyper::body::Incoming>, host: &str, conn: &Conn) -> Reply {
        let path = req.uri().path();
        if path == METADATA_PATH || path.strip_prefix(METADATA_PATH) == Some(MCP_PATH) {
            return self.metadata(host);
        }
        if path != MCP_PATH {
            return plain(
                StatusCode::NOT_FOUND,
                format!("no such path: the MCP endpoint is {MCP_PATH}"),
            );
        }
        // Held until the reply's body ends: a streamed reply (a long `wait`) is in flight. A
        // session's standalone stream (GET) is not a request in flight: it lasts as long as
        // the session; `max_streams_per_token` bounds those.
        let permit = match req.method() == Method::GET {
            true => None,
            false => match self.in_flight.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => {
                    return plain(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!(
                            "too many requests in flight (max_in_flight = {}); retry shortly",
                            self.settings.max_in_flight
                        ),
                    )
                }
            },
        };
        let authorization = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        let (caller, expires) = match self.auth.check(authorization).await {
            Ok(c) => c,
            Err(Refused::Unavailable) => {
                let why = Refused::Unavailable.describe().to_string();
                return plain(StatusCode::SERVICE_UNAVAILABLE, why);
            }
            Err(why) => return self.unauthorized(host, why),
        };
        let key = caller.key.clone();
        if let Err(limit) = conn.claim(&self.tenants, &key) {
            let why = refused(Kind::Connection, limit);
            let mut reply = plain(StatusCode::TOO_MANY_REQUESTS, why);
            reply
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return reply;
        }
        let kind = match req.method() == Method::GET {
            true => Kind::Stream,
            false => Kind::InFlight,
        };
        let held = match self.tenants.take(&key, kind) {
            Ok(h) => h,
            Err(limit) => return plain(StatusCode::TOO_MANY_REQUESTS, refused(kind, limit)),
        };
        if let Some(exp) = expires {
            self.tenants.note_expiry(&key, exp);
        }
        let ended = self.tenants.cancel(&key);
        let session: Option<Arc<str>> = req
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(Into::into);
        if let Some(id) = &session {
            if self.tenants.owner(id).is_some_and(|o| o != key) {
                // As for an unknown session: whether it exists is not told to another token.
                return plain(StatusCode::NOT_FOUND, "Not Found: Session not found".into());
            }
        }
        let (mut parts, body) = req.into_parts();
        // The body has the head's time limit again: a client trickling it in holds a place.
        let limit = self.settings.header_timeout;
        let read =
            tokio::time::timeout(limit, Limited::new(body, self.settings.max_body).collect());
        let body = match read.await {
            Err(_) => {
                return plain(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "request body not received within header_timeout = {} s",
                        limit.as_secs()
                    ),
                )
            }
            Ok(Ok(b)) => b.to_bytes(),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                return plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the request body is over max_body = {} bytes",
                        self.settings.max_body
                    ),
                )
            }
            Ok(Err(e)) => {
                return plain(
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the body: {e}"),
                )
            }
        };
        // Parsed once, decoded as rmcp decodes it: what the gate judges is what rmcp sees.
        let posted = parts.method == Method::POST;
        let doc: Option<Value> = posted.then(|| serde_json::from_slice(&body).ok()).flatten();
        let opens = session.is_none() && doc.as_ref().is_some_and(opens_session);
        let reserved = match opens {
            false => None,
            true => match self.reserve(&key).await {
                Ok(r) => Some(r),
                Err(open) => return plain(StatusCode::TOO_MANY_REQUESTS, self.full(open)),
            },
        };
        // A request of a session: if its client goes before its reply ends, the call goes on
        // holding its places until it ends; a `wait`, which nobody reads then, is cancelled.
        let call = match (&session, doc.as_ref().and_then(request_id)) {
            (Some(s), Some(id)) => Some(Call {
                manager: self.manager.clone(),
                session: s.clone(),
                id,
                cancel: doc.as_ref().is_some_and(is_wait),
            }),
            _ => None,
        };
        let deleting = parts.method == Method::DELETE;
        parts.extensions.insert(caller);
        let reply = self
            .mcp
            .handle(Request::from_parts(parts, Full::new(body)))
            .await;
        let made = reply
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok());
        match (&session, made) {
            // Every new session is its caller's, whatever the gate thought of the body.
            (None, Some(id)) if !self.tenants.bind(&key, id, reserved.is_some()) => {
                let id: Arc<str> = id.into();
                let _ = self.manager.close_session(&id).await;
                self.tenants.forget(&id);
                let open = self.settings.max_sessions_per_token;
                return plain(StatusCode::TOO_MANY_REQUESTS, self.full(open));
            }
            (Some(id), _) if deleting && reply.status().is_success() => self.tenants.forget(id),
            _ => {}
        }
        drop(reserved);
        let (mut parts, body) = reply.into_parts();
        if deleting && parts.status == StatusCode::ACCEPTED {
            // The session is gone: 204, which clients (the Python SDK) take as done, where
            // they log a 202 as a failure.
            parts.status = StatusCode::NO_CONTENT;
        }
        Response::from_parts(
            parts,
            Guarded {
                body,
                ended: Box::pin(ended.cancelled_owned()),
                done: false,
                call,
                places: Some(Places {
                    _permit: permit,
                    _held: held,
                }),
            }
            .boxed(),
        )
    }

    /// What refuses an initialize at the sessions bound.
    fn full(&self, open: usize) -> String {
        format!(
            "this token has {open} open sessions (max_sessions_per_token = {}); end one (HTTP \
             DELETE) or wait for idle ones to expire",
            self.settings.max_sessions_per_token
        )
    }

    /// A session's place for `key`, counted against the sessions that still exist.
    async fn reserve(&self, key: &Arc<str>) -> Result<super::tenants::Reserved, usize> {
        let live = self.manager.sessions.read().await;
        self.tenants.reserve(key, |id| live.contains_key(id))
    }

    /// Until `stop`: every [`REVOKE_CHECK`], the callers holding anything open are checked
    /// again — a token asked of the daemon, a JWT's expiry compared — and those whose token
    /// ended lose their streams, sessions and running calls.
    pub async fn watch(self: Arc<Self>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(REVOKE_CHECK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.cancelled() => return,
            }
            {
                let live = self.manager.sessions.read().await;
                self.tenants.retain_live(|id| live.contains_key(id));
            }
            let now = cuba_protocol::now_ms() / 1000;
            for (key, expires) in self.tenants.open() {
                let ended = match expires {
                    Some(e) => now >= e,
                    None if key.starts_with(JWT_PREFIX) => false,
                    None => self.auth.still_valid(&key).await == Some(false),
                };
                if ended {
                    let sessions = self.tenants.end(&key);
                    tracing::info!(
                        sessions = sessions.len(),
                        "a token was revoked or expired: its streams, sessions and calls end"
                    );
                    for id in sessions {
                        let _ = self.manager.close_session(&id).await;
                    }
                }
            }
        }
    }

    /// The resource's URL: `url` from the settings, else the one this request was sent to
    /// (its Host checked).
    fn resource(&self, host: &str) -> String {
        match &self.settings.url {
            Some(url) => url.clone(),
            None => format!("{}://{host}{MCP_PATH}", self.settings.scheme()),
        }
    }

    /// RFC 9728: what this resource is and who issues its tokens.
    fn metadata(&self, host: &str) -> Reply {
        let mut doc = serde_json::json!({
            "resource": self.resource(host),
            "resource_name": "cuba-exec",
            "bearer_methods_supported": ["header"],
        });
        if let Some(issuer) = self.auth.issuer() {
            doc["authorization_servers"] = serde_json::json!([issuer]);
        }
        let mut reply = Response::new(Full::new(Bytes::from(doc.to_string())).boxed());
        reply.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        reply
    }

    /// 401 with `WWW-Authenticate: Bearer` naming the metadata document (RFC 9728 §5.1).
    fn unauthorized(&self, host: &str, why: Refused) -> Reply {
        let resource = self.resource(host);
        let base = resource.strip_suffix(MCP_PATH).unwrap_or(&resource);
        let mut challenge = format!("Bearer resource_metadata=\"{base}{METADATA_PATH}\"");
        if why != Refused::Missing {
            challenge.push_str(&format!(
                ", error=\"invalid_token\", error_description=\"{}\"",
                why.describe()
            ));
        }
        let mut reply = plain(StatusCode::UNAUTHORIZED, why.describe().to_string());
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            reply.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        reply
    }
}

/// The refusal at a caller's bound of `kind`.
fn refused(kind: Kind, limit: usize) -> String {
    match kind {
        Kind::InFlight => format!(
            "this token has {limit} requests in flight (max_in_flight_per_token = {limit}); \
             wait for one to end, or cancel one"
        ),
        Kind::Stream => format!(
            "this token has {limit} standalone streams open (GET; max_streams_per_token = \
             {limit}); close one"
        ),
        Kind::Connection => format!(
            "this token has {limit} connections open (max_connections_per_token = {limit}); \
             close idle ones, or send more requests on each (keep-alive)"
        ),
    }
}

/// A text reply with `status`.
pub fn plain(status: StatusCode, text: String) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(text)).boxed());
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    reply
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn initialize_is_judged_on_the_decoded_body() {
        let doc = |t: &str| serde_json::from_str::<Value>(t).unwrap();
        let opens = |t: &str| opens_session(&doc(t));
        assert!(opens(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#
        ));
        assert!(opens(
            r#"{"jsonrpc":"2.0","id":1,"method":"\u0069nitialize"}"#
        ));
        assert!(opens(
            r#"[{"jsonrpc":"2.0","method":"x"},{"id":2,"method":"initialize"}]"#
        ));
        assert!(!opens(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"initialize"}}"#
        ));
        assert_eq!(
            request_id(&doc(r#"{"jsonrpc":"2.0","id":"a","method":"tools/call"}"#)),
            Some(Value::from("a"))
        );
        assert_eq!(request_id(&doc(r#"{"jsonrpc":"2.0","method":"n"}"#)), None);
        assert!(is_wait(&doc(
            r#"{"id":1,"method":"tools/call","params":{"name":"wait","arguments":{}}}"#
        )));
        assert!(!is_wait(&doc(
            r#"{"id":1,"method":"tools/call","params":{"name":"run","arguments":{}}}"#
        )));
    }
}
