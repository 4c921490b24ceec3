//! Processes from `sysctl(KERN_PROC_ALL)` (parent, state), `proc_pidinfo(PROC_PIDTASKINFO)`
//! (CPU time, resident memory) and `sysctl(KERN_PROCARGS2)` (environment).

use std::collections::HashMap;
use std::mem::size_of;
use std::ptr;

use libc::{c_int, c_void};

use super::sys::{self, KinfoProc};
use cuba_protocol::procargs as layout;

use crate::platform::ProcStat;

/// Every process the kernel lists.
pub fn all() -> HashMap<i32, ProcStat> {
    let scale = timebase();
    kinfo_all()
        .iter()
        .map(|k| (k.kp_proc.p_pid, to_stat(k, scale)))
        .collect()
}

pub fn stat(pid: i32) -> Option<ProcStat> {
    let mut k = KinfoProc::zeroed();
    let mut len = size_of::<KinfoProc>();
    let mut mib = [libc::CTL_KERN, libc::KERN_PROC, libc::KERN_PROC_PID, pid];
    // SAFETY: `k` has room for `len` bytes; the kernel writes at most that and sets `len`.
    let r = unsafe { sysctl(&mut mib, (&raw mut k).cast(), &mut len) };
    // A pid that does not exist gives success with nothing written.
    if r != 0 || len < size_of::<KinfoProc>() {
        return None;
    }
    Some(to_stat(&k, timebase()))
}

/// Processes whose environment has an entry starting with `needle` followed by an id, by id.
/// Only our own processes' arguments are readable; the others are skipped.
pub fn marked(needle: &str) -> HashMap<u64, Vec<i32>> {
    let mut out: HashMap<u64, Vec<i32>> = HashMap::new();
    let mut buf = vec![0u8; arg_max()];
    for k in kinfo_all() {
        let pid = k.kp_proc.p_pid;
        let Some(len) = procargs(pid, &mut buf) else {
            continue;
        };
        let id = layout::env_entries(&buf[..len])
            .into_iter()
            .filter_map(|var| std::str::from_utf8(var).ok()?.strip_prefix(needle))
            .find_map(|id| id.parse().ok());
        if let Some(id) = id {
            out.entry(id).or_default().push(pid);
        }
    }
    out
}

fn to_stat(k: &KinfoProc, scale: (u64, u64)) -> ProcStat {
    let pid = k.kp_proc.p_pid;
    // SAFETY: `proc_taskinfo` is all integers: zero bits are a valid value.
    let mut ti: libc::proc_taskinfo = unsafe { std::mem::zeroed() };
    let size = size_of::<libc::proc_taskinfo>() as c_int;
    // SAFETY: `ti` has room for `size` bytes, which is all the kernel writes.
    let n =
        unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDTASKINFO, 0, (&raw mut ti).cast(), size) };
    // A zombie has no task, and another user's process refuses: no CPU or memory for them.
    let (cpu, rss) = if n == size {
        let ticks = ti.pti_total_user.saturating_add(ti.pti_total_system);
        (
            ticks.saturating_mul(scale.0) / scale.1,
            ti.pti_resident_size,
        )
    } else {
        (0, 0)
    };
    ProcStat {
        ppid: k.kp_eproc.e_ppid,
        zombie: k.kp_proc.p_stat == sys::SZOMB,
        cpu_ns: cpu,
        rss_bytes: rss,
    }
}

/// Every process's `kinfo_proc`. The list can grow between asking its size and reading it,
/// so there is room for more, and a read that finds too little room is retried.
fn kinfo_all() -> Vec<KinfoProc> {
    let mut mib = [libc::CTL_KERN, libc::KERN_PROC, libc::KERN_PROC_ALL, 0];
    for _ in 0..5 {
        let mut len = 0;
        // SAFETY: a null buffer asks only for the size, written to `len`.
        if unsafe { sysctl(&mut mib[..3], ptr::null_mut(), &mut len) } != 0 {
            return Vec::new();
        }
        let mut procs = vec![KinfoProc::zeroed(); len / size_of::<KinfoProc>() + 32];
        let mut len = procs.len() * size_of::<KinfoProc>();
        // SAFETY: `procs` has room for `len` bytes; the kernel writes at most that, sets `len`.
        let r = unsafe { sysctl(&mut mib[..3], procs.as_mut_ptr().cast(), &mut len) };
        if r == 0 {
            procs.truncate(len / size_of::<KinfoProc>());
            return procs;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOMEM) {
            break;
        }
    }
    Vec::new()
}

/// Reads `pid`'s `KERN_PROCARGS2` into `buf`; the length read.
fn procargs(pid: i32, buf: &mut [u8]) -> Option<usize> {
    let mut mib = [libc::CTL_KERN, libc::KERN_PROCARGS2, pid];
    let mut len = buf.len();
    // SAFETY: `buf` has room for `len` bytes; the kernel writes at most that and sets `len`.
    let r = unsafe { sysctl(&mut mib, buf.as_mut_ptr().cast(), &mut len) };
    (r == 0).then_some(len)
}

/// The most bytes of arguments and environment a process can have (`KERN_ARGMAX`), the size
/// `KERN_PROCARGS2` needs.
fn arg_max() -> usize {
    let mut mib = [libc::CTL_KERN, libc::KERN_ARGMAX];
    let mut max: c_int = 0;
    let mut len = size_of::<c_int>();
    // SAFETY: `max` has room for `len` bytes.
    let r = unsafe { sysctl(&mut mib, (&raw mut max).cast(), &mut len) };
    match usize::try_from(max) {
        Ok(n) if r == 0 && n > 0 => n,
        _ => 1 << 20,
    }
}

/// `sysctl(2)` read-only. Unsafe: `buf` must have room for `*len` bytes (or be null).
unsafe fn sysctl(mib: &mut [c_int], buf: *mut c_void, len: &mut usize) -> c_int {
    // SAFETY: the caller vouches for `buf`; `mib` is valid for its length; nothing is written.
    unsafe {
        libc::sysctl(
            mib.as_mut_ptr(),
            mib.len() as libc::c_uint,
            buf,
            len,
            ptr::null_mut(),
            0,
        )
    }
}

/// Mach time to nanoseconds, as `(numer, denom)`: task CPU times are in Mach time units,
/// which are nanoseconds on Intel but not on Apple silicon.
fn timebase() -> (u64, u64) {
    let mut tb = sys::MachTimebaseInfo::default();
    // SAFETY: fills the struct it is given.
    let r = unsafe { sys::mach_timebase_info(&mut tb) };
    if r == 0 && tb.denom != 0 {
        (u64::from(tb.numer), u64::from(tb.denom))
    } else {
        (1, 1)
    }
}
