//! What each caller (a token, a JWT subject) holds open — requests in flight, connections,
//! standalone streams, sessions — counted against its own bounds, so that no caller can take
//! the places of another; and the cancellation token that ends all of it at once when the
//! caller's token is revoked or expires.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

/// What a caller holds, each with its own bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A request whose reply has not ended (`max_in_flight_per_token`).
    InFlight,
    /// A connection whose latest request was the caller's (`max_connections_per_token`).
    Connection,
    /// A session's standalone stream, `GET` (`max_streams_per_token`).
    Stream,
}

impl Kind {
    fn index(self) -> usize {
        self as usize
    }
}

/// The per-caller bounds, in [`Kind`] order, and the sessions one.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub held: [usize; 3],
    pub sessions: usize,
}

#[derive(Default)]
struct Tenant {
    held: [usize; 3],
    sessions: HashSet<Arc<str>>,
    /// Initializes handed to rmcp whose session is not known yet: counted as sessions.
    reserved: usize,
    /// Cancelled when the caller's token ends: its replies, streams and sessions end with it.
    cancel: CancellationToken,
    /// A JWT subject's: the latest `exp` seen (seconds since the epoch).
    expires: Option<u64>,
}

impl Tenant {
    fn idle(&self) -> bool {
        self.held.iter().all(|n| *n == 0) && self.sessions.is_empty() && self.reserved == 0
    }
}

#[derive(Default)]
struct Inner {
    tenants: HashMap<Arc<str>, Tenant>,
    /// Each live session's caller key.
    owners: HashMap<Arc<str>, Arc<str>>,
}

pub struct Tenants {
    inner: Mutex<Inner>,
    limits: Limits,
}

/// A place held by a caller; given back when dropped.
pub struct Held {
    tenants: Arc<Tenants>,
    key: Arc<str>,
    kind: Kind,
}

impl Held {
    pub fn key(&self) -> &Arc<str> {
        &self.key
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut inner = self.tenants.lock();
        if let Some(t) = inner.tenants.get_mut(&self.key) {
            t.held[self.kind.index()] = t.held[self.kind.index()].saturating_sub(1);
        }
        prune(&mut inner, &self.key);
    }
}

/// A session's place, reserved before the `initialize` goes to rmcp; given back when dropped
/// (after the session it made, if any, is bound).
pub struct Reserved {
    tenants: Arc<Tenants>,
    key: Arc<str>,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        let mut inner = self.tenants.lock();
        if let Some(t) = inner.tenants.get_mut(&self.key) {
            t.reserved = t.reserved.saturating_sub(1);
        }
        prune(&mut inner, &self.key);
    }
}

fn prune(inner: &mut Inner, key: &Arc<str>) {
    if inner.tenants.get(key).is_some_and(Tenant::idle) {
        inner.tenants.remove(key);
    }
}

impl Tenants {
    pub fn new(limits: Limits) -> Arc<Tenants> {
        Arc::new(Tenants {
            inner: Mutex::new(Inner::default()),
            limits,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place of `kind` for `key`, or the bound it is at.
    pub fn take(self: &Arc<Self>, key: &Arc<str>, kind: Kind) -> Result<Held, usize> {
        let limit = self.limits.held[kind.index()];
        let mut inner = self.lock();
        let t = inner.tenants.entry(key.clone()).or_default();
        if t.held[kind.index()] >= limit {
            return Err(limit);
        }
        t.held[kind.index()] += 1;
        Ok(Held {
            tenants: self.clone(),
            key: key.clone(),
            kind,
        })
    }

    /// The token that is cancelled when `key`'s token ends (call while holding a place).
    pub fn cancel(&self, key: &Arc<str>) -> CancellationToken {
        let mut inner = self.lock();
        inner.tenants.entry(key.clone()).or_default().cancel.clone()
    }

    /// The caller key session `id` is bound to.
    pub fn owner(&self, id: &str) -> Option<Arc<str>> {
        self.lock().owners.get(id).cloned()
    }

    /// A session's place for `key`, counted and reserved in one step (`live`: whether a
    /// session still exists; those that ended are forgotten first), or how many it has open.
    pub fn reserve(
        self: &Arc<Self>,
        key: &Arc<str>,
        live: impl Fn(&str) -> bool,
    ) -> Result<Reserved, usize> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let t = inner.tenants.entry(key.clone()).or_default();
        let ended: Vec<Arc<str>> = t.sessions.iter().filter(|s| !live(s)).cloned().collect();
        for id in ended {
            t.sessions.remove(&id);
            inner.owners.remove(&id);
        }
        let open = t.sessions.len() + t.reserved;
        if open >= self.limits.sessions {
            return Err(open);
        }
        t.reserved += 1;
        Ok(Reserved {
            tenants: self.clone(),
            key: key.clone(),
        })
    }

    /// Binds session `id` to `key`. False when that took the caller past its bound (a session
    /// made without a reservation): the caller is to end it.
    pub fn bind(&self, key: &Arc<str>, id: &str, reserved: bool) -> bool {
        let mut inner = self.lock();
        let id: Arc<str> = id.into();
        inner.owners.insert(id.clone(), key.clone());
        let t = inner.tenants.entry(key.clone()).or_default();
        t.sessions.insert(id);
        reserved || t.sessions.len() + t.reserved <= self.limits.sessions
    }

    /// Session `id` ended.
    pub fn forget(&self, id: &str) {
        let mut inner = self.lock();
        if let Some(key) = inner.owners.remove(id) {
            if let Some(t) = inner.tenants.get_mut(&key) {
                t.sessions.remove(id);
            }
            prune(&mut inner, &key);
        }
    }

    /// Sessions that no longer exist (`live` says which do) are forgotten.
    pub fn retain_live(&self, live: impl Fn(&str) -> bool) {
        let mut inner = self.lock();
        let inner = &mut *inner;
        inner.owners.retain(|id, _| live(id));
        for t in inner.tenants.values_mut() {
            t.sessions.retain(|id| live(id));
        }
        inner.tenants.retain(|_, t| !t.idle());
    }

    /// A JWT subject's token expires at `exp`: what it holds ends then, unless a later token
    /// of the same subject comes.
    pub fn note_expiry(&self, key: &Arc<str>, exp: u64) {
        let mut inner = self.lock();
        if let Some(t) = inner.tenants.get_mut(key) {
            t.expires = Some(t.expires.map_or(exp, |e| e.max(exp)));
        }
    }

    /// Every caller holding anything, with its JWT expiry if it has one.
    pub fn open(&self) -> Vec<(Arc<str>, Option<u64>)> {
        let inner = self.lock();
        inner
            .tenants
            .iter()
            .map(|(k, t)| (k.clone(), t.expires))
            .collect()
    }

    /// `key`'s token ended: everything it holds is cancelled, and its sessions are returned,
    /// to be closed. What it makes next (a new JWT of the same subject) starts afresh.
    pub fn end(&self, key: &Arc<str>) -> Vec<Arc<str>> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let Some(t) = inner.tenants.get_mut(key) else {
            return Vec::new();
        };
        std::mem::take(&mut t.cancel).cancel();
        t.expires = None;
        let sessions: Vec<Arc<str>> = t.sessions.drain().collect();
        for id in &sessions {
            inner.owners.remove(id);
        }
        prune(inner, key);
        sessions
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn tenants() -> Arc<Tenants> {
        Tenants::new(Limits {
            held: [2, 1, 1],
            sessions: 2,
        })
    }

    #[test]
    fn each_caller_has_its_own_places() {
        let t = tenants();
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let one = t.take(&a, Kind::InFlight).unwrap();
        let _two = t.take(&a, Kind::InFlight).unwrap();
        assert_eq!(t.take(&a, Kind::InFlight).err(), Some(2));
        // Another caller is not refused for what the first holds.
        let _b = t.take(&b, Kind::InFlight).unwrap();
        drop(one);
        assert!(t.take(&a, Kind::InFlight).is_ok());
    }

    #[test]
    fn sessions_are_reserved_before_they_exist() {
        let t = tenants();
        let a: Arc<str> = "a".into();
        let r1 = t.reserve(&a, |_| true).unwrap();
        let r2 = t.reserve(&a, |_| true).unwrap();
        // Two initializes in flight take both places before either session exists.
        assert_eq!(t.reserve(&a, |_| true).err(), Some(2));
        assert!(t.bind(&a, "s1", true));
        drop(r1);
        drop(r2); // made no session
        assert!(t.reserve(&a, |_| true).is_ok());
        // A session rmcp made without a reservation, past the bound, is refused.
        assert!(t.bind(&a, "s2", false));
        assert!(!t.bind(&a, "s3", false));
        // Ended sessions are forgotten when counted.
        assert!(t.reserve(&a, |id| id == "s1").is_ok());
        assert_eq!(t.owner("s1").as_deref(), Some("a"));
        assert_eq!(t.owner("s2"), None);
    }

    #[test]
    fn ending_a_caller_cancels_what_it_holds_and_starts_afresh() {
        let t = tenants();
        let a: Arc<str> = "a".into();
        let _held = t.take(&a, Kind::Stream).unwrap();
        let cancel = t.cancel(&a);
        t.bind(&a, "s1", false);
        assert_eq!(t.end(&a), vec![Arc::<str>::from("s1")]);
        assert!(cancel.is_cancelled());
        assert!(!t.cancel(&a).is_cancelled());
        assert_eq!(t.owner("s1"), None);
    }

    #[test]
    fn a_jwt_callers_end_is_its_latest_tokens() {
        let t = tenants();
        let a: Arc<str> = "jwt:a".into();
        let _held = t.take(&a, Kind::InFlight).unwrap();
        t.note_expiry(&a, 200);
        // An older token used after a newer one does not bring the end closer.
        t.note_expiry(&a, 100);
        assert_eq!(t.open(), vec![(a.clone(), Some(200))]);
        t.end(&a);
        assert_eq!(t.open(), vec![(a, None)]);
    }
}
