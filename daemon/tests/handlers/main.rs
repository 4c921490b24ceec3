//! The daemon's request path, handler by handler, against the real `cubad` of this build: the
//! same tests on Linux and on Windows (cross-built, run under Wine by `scripts/windows-test`),
//! so that what the shared path promises is seen to hold on both. Each test has a daemon of its
//! own ([`fixture::Daemon`]); what an OS answers differently by design (a shell session, an
//! in-place upgrade, a signal Windows has no meaning for) is asserted as that OS's documented
//! answer, never skipped. Command texts are picked per OS in [`os::text`].

#![allow(clippy::unwrap_used)]

mod features;
mod fixture;
mod os;
mod raw;
mod refusals;
mod restart;
mod runs;
mod signals;
mod table;
mod tokens;
