//! [`GitServer`]: a stand-in git server on 127.0.0.1 for the password tests. It asks for HTTP
//! Basic credentials (`401`) on a request that has none, records the `Authorization` header of
//! git's retry and answers it `404`, so the genuine `git` asks its askpass helper for a username
//! and a password, sends them here, and ends.

use std::path::Path;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The most bytes of a request head read.
const MAX_HEAD: usize = 64 * 1024;

/// A running stand-in server; stopped when dropped.
pub struct GitServer {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl GitServer {
    pub async fn start() -> GitServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("cannot listen on 127.0.0.1");
        let port = listener
            .local_addr()
            .expect("the listener's address")
            .port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(serve(listener, seen.clone()));
        GitServer { port, seen, task }
    }

    /// The repository's URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/repo", self.port)
    }

    /// Where git says the credentials are for (`Username for '…':`).
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every `Authorization` header received, in order.
    pub fn authorizations(&self) -> Vec<String> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A shell command that clones from this server into `into` with the genuine `git`, away
    /// from every credential helper and setting of the machine's or a user's (`home` is its
    /// HOME), and says `git STATUS` when it ends. Without cargo's `LD_LIBRARY_PATH`, which
    /// names the user's own directories where the tests run as a user (a git started with it
    /// gets no password).
    pub fn clone_command(&self, home: &Path, into: &Path) -> String {
        format!(
            "unset LD_LIBRARY_PATH; HOME='{}' GIT_CONFIG_NOSYSTEM=1 git -c credential.helper= \
             clone {} '{}'; echo \"git $?\"",
            home.display(),
            self.url(),
            into.display()
        )
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `Basic` credentials as an `Authorization` header carries them.
pub fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", base64(format!("{user}:{password}").as_bytes()))
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ABC[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

async fn serve(listener: TcpListener, seen: Arc<Mutex<Vec<String>>>) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(answer(stream, seen.clone()));
    }
}

/// Answers one request (and closes): `401` without credentials, `404` with them.
async fn answer(mut stream: TcpStream, seen: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let auth = text.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("authorization")
            .then(|| value.trim().to_string())
    });
    let reply = match auth {
        None => {
            "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"x\"\r\n\
                 Content-Length: 0\r\nConnection: close\r\n\r\n"
        }
        Some(a) => {
            seen.lock().unwrap_or_else(|e| e.into_inner()).push(a);
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        }
    };
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_as_rfc_4648_gives_it() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(basic("x", "x"), "Basic eDp4");
    }
}
