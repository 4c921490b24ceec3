//! Listening sockets from `proc_pidinfo(PROC_PIDLISTFDS)` (each process's open files) and
//! `proc_pidfdinfo(PROC_PIDFDSOCKETINFO)` (each socket's protocol, state and address).

use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ptr;

use libc::c_int;

use super::sys::{self, SocketFdinfo};

/// The TCP sockets in LISTEN state among `pids`' open files.
pub fn listening(pids: &[i32]) -> Vec<SocketAddr> {
    pids.iter()
        .flat_map(|&pid| {
            socket_fds(pid)
                .into_iter()
                .filter_map(move |fd| listener(pid, fd))
        })
        .collect()
}

/// The fds of `pid` that are sockets (none when it is gone or not ours).
fn socket_fds(pid: i32) -> Vec<i32> {
    let entry = size_of::<libc::proc_fdinfo>();
    // SAFETY: a null buffer asks only for the size needed.
    let need = unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDLISTFDS, 0, ptr::null_mut(), 0) };
    let Ok(need) = usize::try_from(need) else {
        return Vec::new();
    };
    // Room for a few fds opened meanwhile.
    let mut fds = vec![
        libc::proc_fdinfo {
            proc_fd: 0,
            proc_fdtype: 0,
        };
        need / entry + 8
    ];
    let size = c_int::try_from(fds.len() * entry).unwrap_or(c_int::MAX);
    // SAFETY: `fds` has room for `size` bytes, the most the kernel writes.
    let got =
        unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDLISTFDS, 0, fds.as_mut_ptr().cast(), size) };
    fds.truncate(usize::try_from(got).unwrap_or(0) / entry);
    fds.into_iter()
        .filter(|f| f.proc_fdtype == libc::PROX_FDTYPE_SOCKET as u32)
        .map(|f| f.proc_fd)
        .collect()
}

/// The local address of socket `fd` of `pid` when it is TCP and listening.
fn listener(pid: i32, fd: i32) -> Option<SocketAddr> {
    let mut info = SocketFdinfo::zeroed();
    let size = size_of::<SocketFdinfo>() as c_int;
    // SAFETY: `info` has room for `size` bytes, the most the kernel writes.
    let n = unsafe {
        libc::proc_pidfdinfo(
            pid,
            fd,
            sys::PROC_PIDFDSOCKETINFO,
            (&raw mut info).cast(),
            size,
        )
    };
    if n != size || info.psi.soi_kind != sys::SOCKINFO_TCP {
        return None;
    }
    // SAFETY: `soi_kind` says the kernel filled the union's TCP member.
    let tcp = unsafe { info.psi.soi_proto.pri_tcp };
    if tcp.tcpsi_state != sys::TSI_S_LISTEN {
        return None;
    }
    let ini = tcp.tcpsi_ini;
    // The port is in network byte order in the low 16 bits.
    let port = u16::from_be(ini.insi_lport as u16);
    let a = ini.insi_laddr;
    let ip = if ini.insi_vflag & sys::INI_IPV6 != 0 {
        IpAddr::V6(Ipv6Addr::from(a))
    } else {
        IpAddr::V4(Ipv4Addr::new(a[12], a[13], a[14], a[15]))
    };
    Some(SocketAddr::new(ip, port))
}

/// Who listens on a port machine-wide: not looked up here (only a tree's own sockets are), so
/// `cubactl ports N` names no outside holder on macOS.
pub fn holders(_port: u16) -> Vec<(SocketAddr, Option<i32>)> {
    Vec::new()
}
