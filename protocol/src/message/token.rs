//! Request tokens: a client-made name for one spawn-like request (`Spawn`, `Run`, `Ensure`, a
//! stdin write), so that a retry after a lost connection is recognised by the daemon and answered
//! with the first attempt's result instead of being carried out again.

use std::fmt;
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// 16 random bytes, shown as 32 hex digits. Made once per request by the client and sent again,
/// unchanged, with every retry of that request.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestToken(pub [u8; 16]);

impl RequestToken {
    /// A fresh token: 16 bytes from the OS random source, read once per process, with a
    /// per-process counter added to their second half. Unique within the process, random
    /// across processes, and no file opened per request.
    pub fn fresh() -> RequestToken {
        static BASE: OnceLock<[u8; 16]> = OnceLock::new();
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let base = BASE.get_or_init(|| {
            let mut bytes = [0u8; 16];
            // /dev/urandom exists on every Unix we build for and never blocks once seeded.
            let read =
                std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
            if read.is_err() {
                // No device (a sandbox without /dev): std's per-process random hash keys, the
                // pid and the clock are still unique enough for one client's requests.
                bytes = fallback();
            }
            bytes
        });
        let mut bytes = *base;
        let (_, low) = bytes.split_at_mut(8);
        let mut half = [0u8; 8];
        half.copy_from_slice(low);
        let n = u64::from_le_bytes(half).wrapping_add(COUNTER.fetch_add(1, Ordering::Relaxed));
        low.copy_from_slice(&n.to_le_bytes());
        RequestToken(bytes)
    }
}

fn fallback() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut out = [0u8; 16];
    for half in out.chunks_mut(8) {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_u32(std::process::id());
        h.write_u64(crate::now_ms());
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}

impl fmt::Display for RequestToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_tokens_differ_and_show_as_32_hex_digits() {
        let (a, b) = (RequestToken::fresh(), RequestToken::fresh());
        assert_ne!(a, b);
        let shown = a.to_string();
        assert_eq!(shown.len(), 32);
        assert!(shown.chars().all(|c| c.is_ascii_hexdigit()), "{shown}");
        assert_ne!(fallback(), fallback());
    }
}
