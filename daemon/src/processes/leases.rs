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

/// Most ports the kernel is asked for before `auto` gives up (each one it hands out is free;
/// only a leased one is asked again).
const TRIES: usize = 64;

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
            for _ in 0..TRIES {
                let port = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))
                    .and_then(|l| l.local_addr())
                    .map(|a| a.port())
                    .map_err(|e| refused(format!("no free TCP port: {e}")))?;
                if free(port) && !leased.iter().any(|(p, _)| *p == port) {
                    return Ok(port);
                }
            }
            Err(refused(format!(
                "no free TCP port: the {TRIES} the system offered were all leased"
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
