//! `cuba-exec serve --http`: the MCP streamable HTTP transport (both protocol eras: 2026-07-28
//! stateless requests and the sessions of 2025-06-18 / 2025-11-25), for clients that cannot
//! launch a process. rmcp's tower service speaks MCP; in front of it:
//!
//! - `settings.rs`: the `[http]` table; loopback unless TLS or `behind_proxy`.
//! - `auth.rs` / `jwt.rs`: who calls — a token of `tokens.toml`, or an issuer's JWT — and
//!   the [`Caller`] it is: its own daemon connections, owner name and narrowing.
//! - `headers.rs`: Host, Origin and CORS, judged first.
//! - `gate.rs`: the metadata document, 401s, session ownership and the bounds.
//! - `tenants.rs`: what each caller holds open, against its own bounds.
//! - `tls.rs`: the certificate, read again when its files change.
//! - `log.rs`: the log file, rotated.
//!
//! Each connection is one task; a request head begun and not finished within `header_timeout`
//! gets a 408 and the connection is closed (an idle kept-alive one is closed quietly).

mod auth;
mod gate;
mod guarded;
mod headers;
mod jwt;
pub mod log;
pub mod settings;
mod status;
mod tenants;
mod tls;

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::RoleServer;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use auth::Caller;
use gate::Gate;
use settings::Settings;

use crate::CubaExec;

/// The HTTP caller of `ctx`, if it came over HTTP.
pub fn caller(ctx: &RequestContext<RoleServer>) -> Option<&Caller> {
    ctx.extensions
        .get::<http::request::Parts>()?
        .extensions
        .get::<Arc<Caller>>()
        .map(|c| &**c)
}

/// Serves until SIGINT or SIGTERM. Errors are what stopped it from starting.
pub async fn serve(settings: Settings) -> Result<(), String> {
    raise_open_files();
    let settings = Arc::new(settings);
    let tls = match &settings.tls {
        Some((cert, key)) => Some(Arc::new(tls::Tls::load(cert, key)?)),
        None => None,
    };
    let listener = TcpListener::bind(settings.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", settings.listen))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;

    let base = CubaExec::new(cuba_protocol::paths::socket_path());
    let auth = auth::Auth::new(&settings, base.link.clone())?;
    let shutdown = CancellationToken::new();
    let mut sessions =
        rmcp::transport::streamable_http_server::session::local::SessionConfig::default();
    sessions.keep_alive = Some(settings.session_idle);
    let mut manager = LocalSessionManager::default();
    manager.session_config = sessions;
    let manager = Arc::new(manager);
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(settings.hosts())
        .with_allowed_origins(settings.allowed_origins.clone())
        .enforce_origin_validation()
        .with_max_request_body_bytes(settings.max_body)
        .with_cancellation_token(shutdown.clone());
    let factory = base.clone();
    let mcp = StreamableHttpService::new(move || Ok(factory.clone()), manager.clone(), config);
    let gate = Arc::new(Gate::new(settings.clone(), mcp, manager, auth));
    tokio::spawn(gate.clone().watch(shutdown.clone()));

    let url = format!("{}://{local}{}", settings.scheme(), gate::MCP_PATH);
    let _status = status::Written::new(&url, settings.url.as_deref());
    eprintln!("cuba-exec: serving MCP on {url} (`cubactl token create NAME` makes a token)");
    let connections = Arc::new(Semaphore::new(settings.max_connections));
    let stop = stop_signal();
    tokio::pin!(stop);
    loop {
        // At the connection bound, new ones wait in the listen queue.
        let permit = tokio::select! {
            p = connections.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = &mut stop => break,
        };
        let (stream, _) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, a connection reset before accept: keep serving.
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let gate = gate.clone();
        let tls = tls.clone();
        let timeout = settings.header_timeout;
        tokio::spawn(async move {
            let _permit = permit;
            let _ = stream.set_nodelay(true);
            match tls {
                None => connection(stream, gate, timeout).await,
                Some(tls) => {
                    let acceptor = tls.acceptor();
                    match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
                        Ok(Ok(s)) => connection(s, gate, timeout).await,
                        Ok(Err(e)) => tracing::debug!("TLS handshake: {e}"),
                        Err(_) => tracing::debug!("TLS handshake not done within header_timeout"),
                    }
                }
            }
        });
    }
    shutdown.cancel();
    eprintln!("cuba-exec: stopped serving on {url}");
    Ok(())
}

/// One connection's requests. A client that began a request head and does not finish it
/// within `timeout` (a slow-loris) gets a 408 saying so, and the connection ends; one that
/// sent nothing since its last reply (an idle kept-alive connection) is just closed: a 408
/// written then would meet the client's next request as its answer.
async fn connection<S>(stream: S, gate: Arc<Gate>, timeout: std::time::Duration)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut stream = Watched {
        inner: stream,
        begun: Arc::new(AtomicBool::new(false)),
    };
    let begun = stream.begun.clone();
    let conn = Arc::new(gate::Conn::default());
    let service = hyper::service::service_fn(move |req| {
        let gate = gate.clone();
        let conn = conn.clone();
        async move { Ok::<_, Infallible>(gate.handle(req, &conn).await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(timeout)
        .serve_connection(TokioIo::new(&mut stream), service)
        .await;
    if let Err(e) = served {
        if e.is_timeout() && begun.load(Ordering::Relaxed) {
            let text = format!(
                "request headers not received within header_timeout = {} s\n",
                timeout.as_secs()
            );
            let reply = format!(
                "HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; charset=utf-8\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
            let _ = tokio::time::timeout(timeout, async {
                let _ = stream.write_all(reply.as_bytes()).await;
                let _ = stream.shutdown().await;
            })
            .await;
        } else {
            tracing::debug!("connection: {e}");
        }
    }
}

/// A connection's stream that knows whether the client has sent bytes since the last reply
/// was written (a request head begun).
struct Watched<S> {
    inner: S,
    begun: Arc<AtomicBool>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.begun.store(true, Ordering::Relaxed);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.begun.store(false, Ordering::Relaxed);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.begun.store(false, Ordering::Relaxed);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// SIGINT or SIGTERM (Ctrl-C on Windows).
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            _ => std::future::pending::<()>().await,
        }
    }
    #[cfg(not(unix))]
    {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Each connection is a descriptor: the soft limit (often 1024) is raised to the hard one.
fn raise_open_files() {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `limit` is a valid rlimit for the kernel to fill, then to read.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0
                && limit.rlim_cur < limit.rlim_max
            {
                limit.rlim_cur = limit.rlim_max.min(65536).max(limit.rlim_cur);
                libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            }
        }
    }
}
