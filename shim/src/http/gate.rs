//! Every HTTP request, before rmcp's streamable HTTP service sees it: the metadata document,
//! the bearer token (401 with `WWW-Authenticate` naming that document), the session's owner (a
//! session is used only with the token that made it), and the bounds — requests in flight,
//! body size, sessions per token — each refusal naming its limit.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::StreamableHttpService;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::auth::Auth;
use super::headers;
use super::settings::Settings;
use crate::CubaExec;
use cuba_protocol::tokens::Refused;

pub type Reply = Response<BoxBody<Bytes, Infallible>>;

/// The path the MCP endpoint is served on.
pub const MCP_PATH: &str = "/mcp";
/// RFC 9728's well-known path (with the resource's path appended, or not).
const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";
const SESSION_HEADER: &str = "mcp-session-id";

pub struct Gate {
    settings: Arc<Settings>,
    mcp: StreamableHttpService<CubaExec, LocalSessionManager>,
    manager: Arc<LocalSessionManager>,
    pub auth: Auth,
    /// Each live session's caller key: kept to refuse it to another token and to count a
    /// token's sessions. Entries of ended sessions go when counted.
    sessions: Mutex<HashMap<Arc<str>, Arc<str>>>,
    in_flight: Arc<Semaphore>,
    /// `Host` names served.
    hosts: Vec<String>,
}

impl Gate {
    pub fn new(
        settings: Arc<Settings>,
        mcp: StreamableHttpService<CubaExec, LocalSessionManager>,
        manager: Arc<LocalSessionManager>,
        auth: Auth,
    ) -> Gate {
        Gate {
            in_flight: Arc::new(Semaphore::new(settings.max_in_flight)),
            hosts: settings.hosts(),
            settings,
            mcp,
            manager,
            auth,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Host and Origin first (nothing reads them before), CORS preflights, then the request.
    pub async fn handle(self: Arc<Self>, req: Request<hyper::body::Incoming>) -> Reply {
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
        let mut reply = self.serve(req, &host).await;
        if let Some(origin) = origin {
            headers::allow(&mut reply, origin);
        }
        reply
    }

    async fn serve(&self, req: Request<hyper::body::Incoming>, host: &str) -> Reply {
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
        // the session, which `max_sessions_per_token` bounds.
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
        let caller = match self.auth.check(authorization).await {
            Ok((c, _)) => c,
            Err(Refused::Unavailable) => {
                let why = Refused::Unavailable.describe().to_string();
                return plain(StatusCode::SERVICE_UNAVAILABLE, why);
            }
            Err(why) => return self.unauthorized(host, why),
        };
        let session: Option<Arc<str>> = req
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(Into::into);
        if let Some(id) = &session {
            let owner = self.lock().get(id).cloned();
            if owner.is_some_and(|o| o != caller.key) {
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
        let opens = session.is_none() && parts.method == Method::POST && is_initialize(&body);
        if opens {
            let open = self.count(&caller.key).await;
            if open >= self.settings.max_sessions_per_token {
                return plain(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!(
                        "this token has {open} open sessions (max_sessions_per_token = {}); end \
                         one (HTTP DELETE) or wait for idle ones to expire",
                        self.settings.max_sessions_per_token
                    ),
                );
            }
        }
        let key = caller.key.clone();
        let deleting = parts.method == Method::DELETE;
        parts.extensions.insert(caller);
        let reply = self
            .mcp
            .handle(Request::from_parts(parts, Full::new(body)))
            .await;
        match (&session, reply.headers().get(SESSION_HEADER)) {
            (None, Some(id)) if opens => {
                if let Ok(id) = id.to_str() {
                    self.lock().insert(id.into(), key);
                }
            }
            (Some(id), _) if deleting && reply.status().is_success() => {
                self.lock().remove(id);
            }
            _ => {}
        }
        let (mut parts, body) = reply.into_parts();
        if deleting && parts.status == StatusCode::ACCEPTED {
            // The session is gone: 204, which clients (the Python SDK) take as done, where
            // they log a 202 as a failure.
            parts.status = StatusCode::NO_CONTENT;
        }
        Response::from_parts(
            parts,
            Permitted {
                body,
                _permit: permit,
            }
            .boxed(),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<str>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Live sessions of caller `key`; entries of sessions that ended (idle, deleted) go.
    async fn count(&self, key: &Arc<str>) -> usize {
        let live = self.manager.sessions.read().await;
        let mut sessions = self.lock();
        sessions.retain(|id, _| live.contains_key(id));
        sessions.values().filter(|k| *k == key).count()
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

/// Whether `body` is an `initialize` request (the one that opens a session). A cheap look
/// first: most bodies do not name it at all.
fn is_initialize(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        method: Option<String>,
    }
    let named = body.windows(12).any(|w| w == b"\"initialize\"");
    named
        && serde_json::from_slice::<Probe>(body)
            .is_ok_and(|p| p.method.as_deref() == Some("initialize"))
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

/// A reply body that holds its request's place among those in flight until it ends.
struct Permitted {
    body: BoxBody<Bytes, Infallible>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Body for Permitted {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_is_told_from_other_requests() {
        assert!(is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#
        ));
        assert!(!is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"initialize"}}"#
        ));
        assert!(!is_initialize(b"not json \"initialize\""));
    }
}
