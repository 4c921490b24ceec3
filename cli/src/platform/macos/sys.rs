//! C layouts the `libc` crate does not provide for macOS: `struct kinfo_proc` (sys/sysctl.h,
//! sys/proc.h) and `struct socket_fdinfo` (sys/proc_info.h), 64-bit only (every macOS target
//! is). Pointers are `u64`: only their size matters here. The sizes are checked against the
//! headers' at compile time, so a wrong field cannot go unnoticed.

// The structs mirror the headers field for field; most fields are there only for their size.
#![allow(dead_code)]

use std::mem::size_of;

use libc::c_char;

/// `p_stat` of a process that exited and was not yet reaped (sys/proc.h).
pub const SZOMB: c_char = 5;
/// `proc_pidfdinfo` flavour that fills a [`SocketFdinfo`].
pub const PROC_PIDFDSOCKETINFO: libc::c_int = 3;
/// `soi_kind` of a TCP socket: `soi_proto` holds a [`TcpSockinfo`].
pub const SOCKINFO_TCP: i32 = 2;
/// `tcpsi_state` of a listening socket.
pub const TSI_S_LISTEN: i32 = 1;
/// `insi_vflag` bit: the socket's addresses are IPv6.
pub const INI_IPV6: u8 = 0x2;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct KinfoProc {
    pub kp_proc: ExternProc,
    pub kp_eproc: Eproc,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ExternProc {
    p_un: [u64; 2],
    p_vmspace: u64,
    p_sigacts: u64,
    p_flag: i32,
    pub p_stat: c_char,
    pub p_pid: i32,
    p_oppid: i32,
    p_dupfd: i32,
    user_stack: u64,
    exit_thread: u64,
    p_debugger: i32,
    sigwait: i32,
    p_estcpu: u32,
    p_cpticks: i32,
    p_pctcpu: u32,
    p_wchan: u64,
    p_wmesg: u64,
    p_swtime: u32,
    p_slptime: u32,
    p_realtimer: [u64; 4],
    p_rtime: [u64; 2],
    p_uticks: u64,
    p_sticks: u64,
    p_iticks: u64,
    p_traceflag: i32,
    p_tracep: u64,
    p_siglist: i32,
    p_textvp: u64,
    p_holdcnt: i32,
    p_sigmask: u32,
    p_sigignore: u32,
    p_sigcatch: u32,
    p_priority: u8,
    p_usrpri: u8,
    p_nice: i8,
    p_comm: [c_char; 17],
    p_pgrp: u64,
    p_addr: u64,
    p_xstat: u16,
    p_acflag: u16,
    p_ru: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Eproc {
    e_paddr: u64,
    e_sess: u64,
    e_pcred: [u64; 13],
    e_ucred: Ucred,
    e_vm: Vmspace,
    pub e_ppid: i32,
    e_pgid: i32,
    e_jobc: i16,
    e_tdev: i32,
    e_tpgid: i32,
    e_tsess: u64,
    e_wmesg: [c_char; 8],
    e_xsize: i32,
    e_xrssize: i16,
    e_xccount: i16,
    e_xswrss: i16,
    e_flag: i32,
    e_login: [c_char; 12],
    e_spare: [i32; 4],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Ucred {
    cr_ref: i32,
    cr_uid: u32,
    cr_ngroups: i16,
    cr_groups: [u32; 16],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Vmspace {
    vm_refcnt: i32,
    vm_shm: u64,
    vm_sizes: [i32; 5],
    vm_addrs: [u64; 3],
}

impl KinfoProc {
    pub fn zeroed() -> KinfoProc {
        // SAFETY: only integers and arrays of them: all zero bits is a valid value.
        unsafe { std::mem::zeroed() }
    }
}

#[repr(C)]
pub struct SocketFdinfo {
    pfi: [u64; 3],
    pub psi: SocketInfo,
}

#[repr(C)]
pub struct SocketInfo {
    soi_stat: [u64; 17],
    soi_so: u64,
    soi_pcb: u64,
    soi_type: i32,
    soi_protocol: i32,
    soi_family: i32,
    soi_shorts: [i16; 8],
    soi_oobmark: u32,
    soi_rcv: [u32; 6],
    soi_snd: [u32; 6],
    pub soi_kind: i32,
    rfu_1: u32,
    pub soi_proto: SoiProto,
}

/// The protocol part of a socket's info; which member is valid says `soi_kind`. The largest
/// member (`un_sockinfo`, 526 bytes) sets the size.
#[repr(C)]
pub union SoiProto {
    pub pri_tcp: TcpSockinfo,
    size: [u64; 66],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct TcpSockinfo {
    pub tcpsi_ini: InSockinfo,
    pub tcpsi_state: i32,
    tcpsi_timer: [i32; 4],
    tcpsi_mss: i32,
    tcpsi_flags: u32,
    rfu_1: u32,
    tcpsi_tp: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct InSockinfo {
    insi_fport: i32,
    /// The local port, in network byte order.
    pub insi_lport: i32,
    insi_gencnt: u64,
    insi_flags: u32,
    insi_flow: u32,
    pub insi_vflag: u8,
    insi_ip_ttl: u8,
    rfu_1: u32,
    insi_faddr: [u8; 16],
    /// `in4in6_addr` (IPv4 in the last 4 bytes) or `in6_addr`, by `insi_vflag`.
    pub insi_laddr: [u8; 16],
    insi_v4: u8,
    insi_v6: [u32; 3],
}

impl SocketFdinfo {
    pub fn zeroed() -> SocketFdinfo {
        // SAFETY: only integers, arrays of them and a union of such: all zero bits is valid.
        unsafe { std::mem::zeroed() }
    }
}

/// `mach_timebase_info_data_t`: Mach time units × numer / denom = nanoseconds.
#[repr(C)]
#[derive(Default)]
pub struct MachTimebaseInfo {
    pub numer: u32,
    pub denom: u32,
}

extern "C" {
    // In libSystem; `libc` has it only as deprecated.
    pub fn mach_timebase_info(info: *mut MachTimebaseInfo) -> libc::c_int;
}

// The headers' sizes (as `sizeof` reports them on macOS).
const _: () = assert!(size_of::<ExternProc>() == 296);
const _: () = assert!(size_of::<Eproc>() == 352);
const _: () = assert!(size_of::<KinfoProc>() == 648);
const _: () = assert!(size_of::<InSockinfo>() == 80);
const _: () = assert!(size_of::<TcpSockinfo>() == 120);
const _: () = assert!(size_of::<SocketInfo>() == 768);
const _: () = assert!(size_of::<SocketFdinfo>() == 792);
