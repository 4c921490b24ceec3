//! TCP ports leased to processes (`SpawnRequest::port`): a lease is the `port` of a record that
//! has not ended, so it ends with its process and travels wherever records do (the journal, an
//! upgrade's hand-over). The choice and the reservation of the record that holds it happen
//! under one gate, so two spawns never get the same port.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, Ipv6Addr, TcpListener};
use std::sync::{Mutex, MutexGuard};

use cuba_protocol::{PortWish, ProtocolError};

use crate::platform::ports;
use crate::state::caller::Caller;
use crate::state::record::Proc;
use crate::state::table::Table;

/// Most ports `auto` tries before it gives up.
const TRIES: usize = 256;
/// Where `auto` looks first: above the ports dev servers are usually told (3000, 8080, …) and
/// below the system's ephemeral range. A port from that range could be taken by an outgoing
/// connection between the choice and the server's bind.
const AUTO_FROM: u16 = 20000;

static GATE: Mutex<()> = Mutex::new(());

/// Held from the choice of a port until the record holding its lease is in the table.
// The guard is only held: dropping the gate opens it.
pub struct Gate(#[allow(dead_code)] MutexGuard<'static, ()>);

/// Takes the gate. A panic while it was held left nothing half done (the table is the state).
pub fn gate() -> Gate {
    Gate(GATE.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The port `wish` gets for `caller`: free on every local address and leased to no running
/// process; an exact port in use is refused, naming who holds it.
pub fn choose(
    _gate: &Gate,
    table: &Table,
    caller: &Caller,
    wish: PortWish,
) -> Result<u16, ProtocolError> {
    let leased: Vec<(u16, std::sync::Arc<Proc>)> = table
        .running()
        .into_iter()
        .filter_map(|p| {
            let port = p.lock().info().port?;
            Some((port, p))
        })
        .collect();
    match wish {
        PortWish::Auto => {
            let usable = |port: u16| free(port) && !leased.iter().any(|(p, _)| *p == port);
            let end = ports::ephemeral_start();
            if let Some(port) = below_ephemeral(end).find(|p| usable(*p)) {
                return Ok(port);
            }
            // No room below it (a system whose range starts low): the kernel's choice.
            for _ in 0..TRIES {
                let port = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))
                    .and_then(|l| l.local_addr())
                    .map(|a| a.port())
                    .map_err(|e| refused(format!("no free TCP port: {e}")))?;
                if usable(port) {
                    return Ok(port);
                }
            }
            Err(refused(format!(
                "no free TCP port: the {TRIES} tried were all taken or leased"
            )))
        }
        PortWish::Exact(0) => Err(ProtocolError::bad_request(
            "port 0 is not a port to lease: ask for \"auto\" or a port from 1 to 65535",
        )),
        PortWish::Exact(port) => {
            if let Some((_, p)) = leased.iter().find(|(p, _)| *p == port) {
                return Err(refused(format!(
                    "port {port} is leased to {}",
                    holder(p, caller)
                )));
            }
            if free(port) {
                return Ok(port);
            }
            if let Some(p) = table
                .running()
                .into_iter()
                .find(|p| super::ports::tree_ports(table, p).contains(&port))
            {
                return Err(refused(format!(
                    "port {port} is in use by {}",
                    holder(&p, caller)
                )));
            }
            let pid = ports::holders(port).into_iter().find_map(|(_, pid)| pid);
            Err(refused(match pid {
                Some(pid) => format!("port {port} is in use by pid {pid}, not one of ours"),
                None => format!("port {port} is in use by a process that is not one of ours"),
            }))
        }
    }
}

/// Up to [`TRIES`] ports between [`AUTO_FROM`] and `end` (the ephemeral range's start), from a
/// point that differs per call: two daemons (or a daemon and its last choice's late binder)
/// rarely try the same one first.
fn below_ephemeral(end: u16) -> impl Iterator<Item = u16> {
    let span = u32::from(end.saturating_sub(AUTO_FROM));
    let start = match span {
        0 => 0,
        span => {
            // Not a secret, only a spread: the clock's nanoseconds and the pid.
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            (now.map_or(0, |d| d.subsec_nanos()) ^ std::process::id().rotate_left(16)) % span
        }
    };
    (0..span.min(TRIES as u32)).map(move |i| AUTO_FROM + ((start + i) % span) as u16)
}

/// Whether nothing listens on `port`, on IPv4 or IPv6 (a server may bind either, or both).
/// One at a time: our own v4 socket would make a dual-stack v6 bind fail. A port below 1024
/// this user may not bind is not said to be taken: the command finds that out itself.
fn free(port: u16) -> bool {
    let taken =
        |r: std::io::Result<TcpListener>| matches!(r, Err(e) if e.kind() == ErrorKind::AddrInUse);
    !taken(TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)))
        && !taken(TcpListener::bind((Ipv6Addr::UNSPECIFIED, port)))
}

/// "process 3 (web) of claude-code": another client's process is named only to its own.
fn holder(p: &Proc, caller: &Caller) -> String {
    let rec = p.lock();
    if rec.tenant != caller.tenant {
        return "another client's process".to_string();
    }
    let info = rec.info();
    let name = info
        .name
        .as_deref()
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    format!("process {}{name} of {}", info.id, info.owner.name)
}

fn refused(message: String) -> ProtocolError {
    ProtocolError::new(
        cuba_protocol::ErrorKind::InvalidState,
        format!("{message}; ask for port \"auto\" for a free one, or stop the holder"),
    )
}

/// `PORT=port` in `env`, in place of any `PORT` given.
pub fn into_env(env: &mut cuba_protocol::Env, port: u16) {
    env.retain(|(k, _)| k != "PORT");
    env.push(("PORT".into(), port.to_string().into()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_looks_below_the_ephemeral_range_and_wraps_within_it() {
        let ports: Vec<u16> = below_ephemeral(32768).collect();
        assert_eq!(ports.len(), TRIES);
        assert!(
            ports.iter().all(|p| (AUTO_FROM..32768).contains(p)),
            "{ports:?}"
        );
        let few: Vec<u16> = below_ephemeral(AUTO_FROM + 3).collect();
        let mut sorted = few.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [AUTO_FROM, AUTO_FROM + 1, AUTO_FROM + 2]);
        assert_eq!(
            below_ephemeral(1024).count(),
            0,
            "no room: the kernel's choice"
        );
    }
}
