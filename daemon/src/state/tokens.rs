//! The request-token registry: which spawn-like request (`Spawn`, `Run`, `Ensure`, a stdin
//! write) a client-made token named, and what its first attempt produced, so that a retry after a
//! lost connection is answered with that instead of being carried out again.
//!
//! A token is claimed atomically: the first attempt reserves it (in flight), a retry arriving
//! meanwhile waits for that attempt (bounded), a later one finds its result. A first attempt that
//! fails (refused, invalid) leaves nothing behind, so its retry is judged afresh. Entries are
//! bounded ([`CAPACITY`], oldest out first) and leave with their record when it is pruned.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use cuba_protocol::{ProtocolError, RequestToken, SpawnRequest, StdinRequest};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// Most tokens remembered; beyond it the oldest finished ones are forgotten.
pub const CAPACITY: usize = 65_536;
/// How long a retry waits for its first attempt, still in flight, before it is refused.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(30);

/// A token and a digest of the request it first came with (to refuse the same token on another
/// request).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub token: RequestToken,
    pub digest: u64,
}

impl Stamp {
    /// The stamp of a spawn-like request: its command, where and how it runs, how much input.
    pub fn of_spawn(req: &SpawnRequest) -> Option<Stamp> {
        let mut h = Fnv::default();
        h.part(b"spawn").part(req.command.as_bytes());
        let cwd = req.cwd.as_ref().map(|c| c.as_encoded_bytes());
        h.opt(cwd).opt(req.name.as_deref().map(str::as_bytes));
        h.opt(req.session.as_deref().map(str::as_bytes));
        h.opt(req.shell.as_deref().map(str::as_bytes));
        // Its length only: input can be megabytes, and the command names the request well.
        let stdin = req.stdin.as_ref().map(|b| (b.len() as u64).to_le_bytes());
        h.opt(stdin.as_ref().map(|b| &b[..]));
        Some(Stamp {
            token: req.token?,
            digest: h.0,
        })
    }

    /// The stamp of a stdin write: the process and the bytes.
    pub fn of_stdin(req: &StdinRequest) -> Option<Stamp> {
        let mut h = Fnv::default();
        h.part(b"stdin").part(&req.id.to_le_bytes()).part(&req.data);
        h.part(&[u8::from(req.eof)]);
        Some(Stamp {
            token: req.token?,
            digest: h.0,
        })
    }
}

/// FNV-1a: stable across builds and Rust versions (the digest is journalled and handed over),
/// unlike std's hasher; a wrong guess costs only a refused retry.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn part(&mut self, bytes: &[u8]) -> &mut Fnv {
        // The length first, so ("ab", "c") and ("a", "bc") differ.
        for b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        self
    }

    fn opt(&mut self, bytes: Option<&[u8]>) -> &mut Fnv {
        match bytes {
            Some(b) => self.part(&[1]).part(b),
            None => self.part(&[0]),
        }
    }
}

/// What a token's first attempt produced.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    /// `Spawn`, `Run`, `Ensure`: record `id` (`existing`: an `Ensure` found it running).
    Record { id: u64, existing: bool },
    /// A stdin write to process `id` was queued.
    Written { id: u64 },
}

impl Done {
    fn id(self) -> u64 {
        match self {
            Done::Record { id, .. } | Done::Written { id } => id,
        }
    }
}

/// A remembered token as plain data, for an in-place upgrade's hand-over.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exported {
    pub stamp: Stamp,
    pub done: Done,
}

enum Slot {
    InFlight(watch::Receiver<Option<Done>>),
    Done(Done),
}

struct Entry {
    digest: u64,
    slot: Slot,
    /// Insertion order, to evict the oldest.
    seq: u64,
}

#[derive(Default)]
struct Inner {
    map: HashMap<RequestToken, Entry>,
    /// `(seq, token)` oldest first; may hold entries already gone (skipped when met).
    order: VecDeque<(u64, RequestToken)>,
    seq: u64,
}

impl Inner {
    fn insert(&mut self, token: RequestToken, digest: u64, slot: Slot, cap: usize) {
        self.seq += 1;
        let seq = self.seq;
        self.map.insert(token, Entry { digest, slot, seq });
        self.order.push_back((seq, token));
        while self.map.len() > cap {
            let Some((seq, old)) = self.order.pop_front() else {
                break;
            };
            let evict = self.map.get(&old).is_some_and(|e| e.seq == seq);
            if evict {
                self.map.remove(&old);
            }
        }
        if self.order.len() > 2 * cap + 16 {
            let map = &self.map;
            self.order
                .retain(|(seq, t)| map.get(t).is_some_and(|e| e.seq == *seq));
        }
    }
}

pub struct Tokens {
    /// std Mutex: held for one map access, never across an await.
    inner: Mutex<Inner>,
    cap: usize,
}

/// What [`Tokens::claim`] found.
pub enum Claim<'a> {
    /// The first attempt: carry the request out, then [`Pending::finish`].
    First(Pending<'a>),
    /// A retry: answer with what the first attempt produced.
    Again(Done),
}

/// A claimed token whose request is being carried out. Dropped unfinished (the request failed),
/// it is forgotten and a waiting retry claims it anew.
pub struct Pending<'a> {
    tokens: &'a Tokens,
    token: RequestToken,
    tx: watch::Sender<Option<Done>>,
    finished: bool,
}

impl Pending<'_> {
    pub fn finish(mut self, done: Done) {
        self.finished = true;
        if let Some(e) = self.tokens.lock().map.get_mut(&self.token) {
            e.slot = Slot::Done(done);
        }
        self.tx.send_replace(Some(done));
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let mut inner = self.tokens.lock();
            if let Some(Entry {
                slot: Slot::InFlight(_),
                ..
            }) = inner.map.get(&self.token)
            {
                inner.map.remove(&self.token);
            }
        }
    }
}

impl Default for Tokens {
    fn default() -> Tokens {
        Tokens::new(CAPACITY)
    }
}

impl Tokens {
    pub fn new(cap: usize) -> Tokens {
        Tokens {
            inner: Mutex::default(),
            cap: cap.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Claims `stamp`'s token: the first attempt, or the first attempt's result (waiting for
    /// it while it is in flight). The same token on another request is `BAD_REQUEST`.
    pub async fn claim(&self, stamp: Stamp) -> Result<Claim<'_>, ProtocolError> {
        let deadline = tokio::time::Instant::now() + IN_FLIGHT_WAIT;
        loop {
            let mut waiting = {
                let mut inner = self.lock();
                match inner.map.get(&stamp.token) {
                    Some(e) if e.digest != stamp.digest => return Err(mismatch(stamp.token)),
                    Some(Entry {
                        slot: Slot::Done(done),
                        ..
                    }) => return Ok(Claim::Again(*done)),
                    Some(Entry {
                        slot: Slot::InFlight(rx),
                        ..
                    }) => rx.clone(),
                    None => {
                        let (tx, rx) = watch::channel(None);
                        inner.insert(stamp.token, stamp.digest, Slot::InFlight(rx), self.cap);
                        return Ok(Claim::First(Pending {
                            tokens: self,
                            token: stamp.token,
                            tx,
                            finished: false,
                        }));
                    }
                }
            };
            let outcome = tokio::time::timeout_at(deadline, waiting.wait_for(Option::is_some))
                .await
                .map(|r| r.map(|done| *done));
            match outcome {
                Ok(Ok(Some(done))) => return Ok(Claim::Again(done)),
                Ok(Ok(None)) => continue,
                // The first attempt failed and left nothing: claim it again.
                Ok(Err(_)) => continue,
                Err(_) => {
                    return Err(ProtocolError::invalid_state(format!(
                        "the first request with token {} is still being carried out; try again",
                        stamp.token
                    )))
                }
            }
        }
    }

    /// Remembers `done` for `stamp` without a claim (records restored from the journal).
    pub fn remember(&self, stamp: Stamp, done: Done) {
        let mut inner = self.lock();
        if !inner.map.contains_key(&stamp.token) {
            inner.insert(stamp.token, stamp.digest, Slot::Done(done), self.cap);
        }
    }

    /// Forgets the tokens of records `ids` (pruned).
    pub fn forget(&self, ids: &HashSet<u64>) {
        self.lock().map.retain(|_, e| match e.slot {
            Slot::Done(done) => !ids.contains(&done.id()),
            Slot::InFlight(_) => true,
        });
    }

    /// Every finished entry, oldest first, as plain data: what an in-place upgrade (Unix) hands
    /// over.
    #[cfg(any(unix, test))]
    pub fn export(&self) -> Vec<Exported> {
        let inner = self.lock();
        let mut out: Vec<(u64, Exported)> = inner
            .map
            .iter()
            .filter_map(|(token, e)| match e.slot {
                Slot::Done(done) => {
                    let stamp = Stamp {
                        token: *token,
                        digest: e.digest,
                    };
                    Some((e.seq, Exported { stamp, done }))
                }
                Slot::InFlight(_) => None,
            })
            .collect();
        out.sort_unstable_by_key(|(seq, _)| *seq);
        out.into_iter().map(|(_, e)| e).collect()
    }

    /// Takes over exported entries (tokens already known keep what they have).
    pub fn import(&self, entries: impl IntoIterator<Item = Exported>) {
        for e in entries {
            self.remember(e.stamp, e.done);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().map.len()
    }
}

fn mismatch(token: RequestToken) -> ProtocolError {
    ProtocolError::bad_request(format!(
        "request token {token} was already used for a different request (another command, \
         cwd or input); make a fresh token for each request and reuse it only to retry that one"
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use super::*;
    use std::future::Future;
    use std::task::Poll;

    fn stamp(byte: u8, command: &str) -> Stamp {
        let req = SpawnRequest {
            command: command.into(),
            token: Some(RequestToken([byte; 16])),
            ..SpawnRequest::default()
        };
        Stamp::of_spawn(&req).unwrap()
    }

    const STARTED: Done = Done::Record {
        id: 7,
        existing: false,
    };

    #[tokio::test]
    async fn a_retry_gets_the_first_result_and_another_request_is_refused() {
        let t = Tokens::default();
        let Claim::First(p) = t.claim(stamp(1, "echo a")).await.unwrap() else {
            panic!("first attempt")
        };
        p.finish(STARTED);
        assert!(matches!(t.claim(stamp(1, "echo a")).await, Ok(Claim::Again(d)) if d == STARTED));
        let e = t.claim(stamp(1, "echo b")).await.err().unwrap();
        assert!(e.message.contains("different request"), "{}", e.message);
        assert!(Stamp::of_spawn(&SpawnRequest::default()).is_none());
    }

    #[tokio::test]
    async fn a_retry_waits_for_the_attempt_in_flight_and_a_failed_attempt_leaves_nothing() {
        let t = Arc::new(Tokens::default());
        let Claim::First(p) = t.claim(stamp(2, "x")).await.unwrap() else {
            panic!("first attempt")
        };
        // Polled once, the retry is parked on the attempt in flight (not answered, not refused);
        // finishing that attempt answers it.
        let mut waiter = std::pin::pin!(t.claim(stamp(2, "x")));
        let first = std::future::poll_fn(|cx| Poll::Ready(waiter.as_mut().poll(cx))).await;
        assert!(first.is_pending(), "the retry did not wait");
        // Time passing is no answer: a moment later it still waits (is not refused).
        tokio::time::sleep(Duration::from_millis(50)).await;
        let later = std::future::poll_fn(|cx| Poll::Ready(waiter.as_mut().poll(cx))).await;
        assert!(
            later.is_pending(),
            "the retry gave up on the attempt in flight"
        );
        p.finish(STARTED);
        assert!(matches!(waiter.await, Ok(Claim::Again(d)) if d == STARTED));
        // Failed (dropped unfinished): the retry is a first attempt again.
        let Claim::First(p) = t.claim(stamp(3, "y")).await.unwrap() else {
            panic!("first attempt")
        };
        drop(p);
        assert!(matches!(t.claim(stamp(3, "y")).await, Ok(Claim::First(_))));
    }

    #[tokio::test]
    async fn bounded_oldest_out_and_forgotten_with_the_record() {
        let t = Tokens::new(4);
        for b in 0..10u8 {
            let done = Done::Record {
                id: u64::from(b),
                existing: false,
            };
            t.remember(stamp(b, "c"), done);
        }
        assert_eq!(t.len(), 4);
        assert!(matches!(t.claim(stamp(9, "c")).await, Ok(Claim::Again(_))));
        assert!(matches!(t.claim(stamp(0, "c")).await, Ok(Claim::First(_))));
        t.forget(&HashSet::from([9]));
        assert!(matches!(t.claim(stamp(9, "c")).await, Ok(Claim::First(_))));
    }

    #[tokio::test]
    async fn export_and_import_carry_the_entries_oldest_first() {
        let a = Tokens::default();
        a.remember(stamp(1, "a"), STARTED);
        let written = Done::Written { id: 3 };
        a.remember(stamp(2, "b"), written);
        let exported = a.export();
        assert_eq!(
            exported.iter().map(|e| e.done).collect::<Vec<_>>(),
            [STARTED, written]
        );
        // Plain data: survives a serialisation.
        let json = serde_json::to_string(&exported).unwrap();
        let b = Tokens::default();
        b.import(serde_json::from_str::<Vec<Exported>>(&json).unwrap());
        assert!(matches!(b.claim(stamp(2, "b")).await, Ok(Claim::Again(d)) if d == written));
        assert!(b.claim(stamp(2, "other")).await.is_err());
    }
}
