//! The optional OS sandbox (opt-in per daemon, `config::Sandbox`): real confinement, where the
//! command lists are only a seatbelt.
//!
//! - `sandbox = "workspace-write"`: Landlock. The command may write only under the allowed roots
//!   (or, when none are configured, its own cwd), the temp dirs (`/tmp`, the daemon's `$TMPDIR`)
//!   and a few character devices shells need; reading is not restricted.
//! - `network = false`: the command runs in a new, empty network namespace (inside a new user
//!   namespace when the daemon may not create one directly).
//!
//! Everything that allocates (the ruleset, the path descriptors, the id-map lines) is prepared
//! in the daemon before the spawn; the child's hook only makes raw system calls. A
//! daemon whose sandbox the kernel cannot provide refuses to start ([`probe`]).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use landlock::{
    make_bitflags, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};

pub use super::proxy_port::PORT as PROXY_PORT;
use super::{fd_pass, proxy_port, read_masks};
use crate::base::config::Sandbox;
use crate::platform::spawn::Spawn;

/// The newest Landlock write rights we handle, best effort above ABI 1. ABI 9's `ResolveUnix`
/// is left out on purpose: it restricts connecting to sockets, not writing.
const NEWEST: ABI = ABI::V8;

/// Builds, in the daemon, everything the child needs to enter `sandbox`. `roots` are the
/// allowed dirs.
pub fn prepare(sandbox: &Sandbox, roots: &[PathBuf], cwd: &Path) -> Result<Prepared> {
    let writable = sandbox
        .workspace_write
        .then(|| sandbox.writable(roots, cwd));
    let masks = read_masks::cached(sandbox.masks());
    // Every sandbox is a Landlock domain where the kernel has one, for its scopes at least.
    let ruleset = match writable.is_none() && masks.is_none() && landlock_abi() == 0 {
        true => None,
        false => Some(cached_ruleset(writable, masks)?),
    };
    let proxy = match sandbox.proxied() {
        Some(_) => Some(ProxySide::new()?),
        None => None,
    };
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let line = |id: u32| CString::new(format!("{id} {id} 1\n")).unwrap_or_default();
    let new_netns = sandbox.no_network || proxy.is_some();
    Ok(Prepared {
        ruleset,
        no_network: new_netns,
        // Without the privilege for a network namespace, a user namespace is made too, whose
        // id maps the child writes itself: see `Prepared::install`.
        user_ns: new_netns && !super::exec_check::privileged(),
        uid_map: line(uid),
        gid_map: line(gid),
        proxy,
    })
}

/// What a ruleset was made of: the writable paths with their identities (a rule holds an
/// inode: a root made again is another), and the read grants.
#[derive(PartialEq)]
struct Made {
    writable: Option<Vec<(PathBuf, Option<Inode>)>>,
    grants: Option<Arc<read_masks::Grants>>,
}

/// A path's device and inode.
type Inode = (u64, u64);

/// Rulesets kept for reuse (a ruleset is not used up by entering it): the last few, as a few
/// callers' roots alternate.
static RULESETS: std::sync::Mutex<Vec<(Made, Arc<OwnedFd>)>> = std::sync::Mutex::new(Vec::new());
const KEPT: usize = 8;

/// [`ruleset`], made once for the same paths and grants.
fn cached_ruleset(
    writable: Option<Vec<PathBuf>>,
    grants: Option<Arc<read_masks::Grants>>,
) -> Result<Arc<OwnedFd>> {
    use std::os::unix::fs::MetadataExt;
    let ids = |p: &PathBuf| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let made = Made {
        writable: writable
            .as_ref()
            .map(|w| w.iter().map(|p| (p.clone(), ids(p))).collect()),
        grants,
    };
    let mut kept = RULESETS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = kept.iter().position(|(m, _)| {
        m.writable == made.writable
            && match (&m.grants, &made.grants) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
    }) {
        let hit = kept.remove(i);
        let fd = hit.1.clone();
        kept.push(hit);
        return Ok(fd);
    }
    let fd = Arc::new(ruleset(writable.as_deref(), made.grants.as_deref())?);
    if kept.len() >= KEPT {
        kept.remove(0);
    }
    kept.push((made, fd.clone()));
    Ok(fd)
}

/// A Landlock ruleset: write access granted under `writable` only (ABI 1 required, newer
/// rights best effort), reading files refused under the masks (`read_masks`), and the scopes
/// (no signal to, and no abstract Unix socket of, anything outside the sandbox) where the
/// kernel has them; paths that do not exist are skipped.
fn ruleset(writable: Option<&[PathBuf]>, masks: Option<&read_masks::Grants>) -> Result<OwnedFd> {
    let mut base = Ruleset::default();
    if writable.is_some() {
        base = base
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_write(ABI::V1))
            .context("Landlock (ABI 1 or newer) is not available in this kernel")?
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_write(NEWEST))
            .context("cannot set up the Landlock rights")?;
    }
    if masks.is_some() {
        base = base
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(READ)
            .context("Landlock (ABI 1 or newer) is not available in this kernel")?;
    }
    let mut created = base
        .set_compatibility(CompatLevel::BestEffort)
        // No signal to a process outside the sandbox (Linux 6.12, ABI 6): a sandboxed command
        // cannot stop or kill cubad, the person's processes or another command's. No abstract
        // Unix socket outside it either (a desktop's, another agent's).
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .context("cannot set up the Landlock scopes")?
        .create()
        .context("cannot create a Landlock ruleset")?;
    let mut rules: Vec<(&Path, BitFlags<AccessFs>)> = Vec::new();
    for path in writable.unwrap_or_default() {
        rules.push((path, AccessFs::from_write(NEWEST)));
    }
    if let Some(g) = masks {
        rules.push((Path::new("/"), AccessFs::ReadDir.into()));
        rules.extend(g.read.iter().map(|p| (p.as_path(), READ)));
    }
    for (path, access) in rules {
        let fd = match PathFd::new(path) {
            Ok(fd) => fd,
            Err(e) => {
                tracing::debug!("sandbox: {} skipped: {e}", path.display());
                continue;
            }
        };
        // On a non-directory the crate keeps the file rights only (best effort).
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .with_context(|| format!("cannot add {} to the Landlock ruleset", path.display()))?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.context("Landlock is not available in this kernel")
}

/// The read rights a ruleset with masks handles: listing and reading (running is not).
const READ: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadFile | ReadDir});

/// The sandbox of one spawn, ready to be entered by the child. Keep it alive until the spawn
/// has returned: the child uses its ruleset descriptor.
#[derive(Debug)]
pub struct Prepared {
    ruleset: Option<Arc<OwnedFd>>,
    no_network: bool,
    user_ns: bool,
    uid_map: CString,
    gid_map: CString,
    proxy: Option<ProxySide>,
}

impl Prepared {
    /// The command that runs `program` in the sandbox: `program` itself, the confinement is
    /// entered by the hook of [`Prepared::install`].
    pub fn command(&self, program: &str) -> Spawn {
        Spawn::new(program)
    }

    /// Adds the hook that enters the sandbox in the child.
    pub fn install(&mut self, cmd: &mut Spawn) {
        let ruleset: Option<RawFd> = self.ruleset.as_ref().map(|fd| fd.as_raw_fd());
        let no_network = self.no_network;
        // The daemon keeps its memory from other processes (not dumpable), which makes
        // `/proc/self/uid_map` root's in a child that shares that memory: a child that writes
        // its own id maps gets memory of its own (a fork), where it may be dumpable again.
        let own_memory = self.user_ns;
        if own_memory {
            cmd.own_memory();
        }
        let uid_map = self.uid_map.clone();
        let gid_map = self.gid_map.clone();
        if let Some(fd) = ruleset {
            cmd.uses(fd);
        }
        let mut proxy = self.proxy.as_mut().map(|p| {
            cmd.uses(p.child_end());
            (p.child_end(), std::mem::take(&mut p.cmsg))
        });
        // The hook only makes system calls on data prepared before the spawn (no allocation,
        // no locks).
        cmd.hook(Box::new(move || {
            enter(ruleset, (no_network, own_memory), &uid_map, &gid_map)?;
            match proxy.as_mut() {
                Some((socket, cmsg)) => proxy_port::open(*socket, cmsg),
                None => Ok(()),
            }
        }));
    }

    /// After the spawn: the proxy's listening socket, made in the child's namespace.
    pub fn proxy_listener(&mut self) -> io::Result<Option<OwnedFd>> {
        match self.proxy.take() {
            Some(p) => match fd_pass::recv_fd(p.daemon.as_raw_fd())? {
                Some(fd) => Ok(Some(fd)),
                None => Err(io::Error::other("the proxy's socket did not come")),
            },
            None => Ok(None),
        }
    }
}

/// The daemon's and the child's ends of the socket the proxy's listener comes back on.
#[derive(Debug)]
struct ProxySide {
    daemon: OwnedFd,
    child: OwnedFd,
    cmsg: fd_pass::Cmsg,
}

impl ProxySide {
    fn new() -> Result<ProxySide> {
        let (daemon, child) = fd_pass::pair().context("cannot make the proxy's socket pair")?;
        Ok(ProxySide {
            daemon,
            child,
            cmsg: fd_pass::cmsg(),
        })
    }

    fn child_end(&self) -> RawFd {
        self.child.as_raw_fd()
    }
}

/// In the child: the network namespace first (writing the id maps needs `/proc`, which
/// Landlock would then forbid), then Landlock.
fn enter(
    ruleset: Option<RawFd>,
    (no_network, own_memory): (bool, bool),
    uid_map: &CStr,
    gid_map: &CStr,
) -> io::Result<()> {
    if no_network {
        new_netns(uid_map, gid_map, own_memory)?;
    }
    if let Some(fd) = ruleset {
        // SAFETY: plain system calls with integer arguments; `fd` is the ruleset descriptor the
        // parent keeps open until the spawn returns.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// `unshare(CLONE_NEWNET)`; without the privilege for it, a user namespace too, mapping only
/// our own uid and gid (what an unprivileged process may write itself).
fn new_netns(uid_map: &CStr, gid_map: &CStr, own_memory: bool) -> io::Result<()> {
    // SAFETY: unshare takes integer flags.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } == 0 {
        return Ok(());
    }
    let first = io::Error::last_os_error();
    if first.raw_os_error() != Some(libc::EPERM) {
        return Err(first);
    }
    // Only in memory of its own: shared with the daemon, this would make the daemon dumpable.
    // SAFETY: prctl with integer arguments.
    if own_memory && unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    write_file(c"/proc/self/setgroups", c"deny")?;
    write_file(c"/proc/self/uid_map", uid_map)?;
    write_file(c"/proc/self/gid_map", gid_map)
}

/// open + write + close, without allocating.
fn write_file(path: &CStr, text: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated path; the buffer is valid for its length.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let bytes = text.to_bytes();
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let err = io::Error::last_os_error();
        libc::close(fd);
        if n != bytes.len() as isize {
            return Err(err);
        }
    }
    Ok(())
}

/// The Landlock ABI version of this kernel (0: none).
fn landlock_abi() -> i64 {
    const VERSION: libc::c_uint = 1; // LANDLOCK_CREATE_RULESET_VERSION
                                     // SAFETY: the version query takes a null attribute pointer and size 0.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            VERSION,
        )
    };
    v.max(0)
}

/// At start-up, before the daemon serves: runs `shell -c :` once through the sandbox, so a
/// sandbox the kernel cannot provide stops the daemon here with a clear error instead of
/// failing (or being skipped) at every spawn. Call it before the reaper exists (it waits for
/// its own child).
pub fn probe(sandbox: &Sandbox, roots: &[PathBuf], shell: &str, dir: &Path) -> Result<()> {
    if !sandbox.active() {
        return Ok(());
    }
    let what = sandbox.described();
    let abi = landlock_abi();
    if (sandbox.workspace_write || !sandbox.masks().is_empty()) && abi < 1 {
        bail!(
            "{what} needs Landlock, which this kernel does not provide (not built in, or not \
             enabled at boot: add `landlock` to the lsm= boot parameter); unset \
             CUBA_EXEC_SANDBOX / the `sandbox` key (and `deny_read`) to run without confinement"
        );
    }
    let mut prepared = prepare(sandbox, roots, dir)
        .with_context(|| format!("{what}: the kernel cannot provide this sandbox"))?;
    let mut cmd = prepared.command(shell);
    cmd.arg("-c")
        .arg(":")
        .current_dir(Path::new("/"))
        .group(crate::platform::spawn::Group::Own);
    prepared.install(&mut cmd);
    let status = cmd.status().with_context(|| {
        let hint = if sandbox.no_network || sandbox.proxy.is_some() {
            " (network = false or \"proxy\" needs a new network namespace: root, or unprivileged user \
             namespaces enabled)"
        } else {
            ""
        };
        format!(
            "{what}: a test command could not enter the sandbox{hint}; unset it to run \
                 without"
        )
    })?;
    if !status.success() {
        bail!("{what}: the test command `{shell} -c :` failed in the sandbox ({status})");
    }
    if sandbox.proxied().is_some() {
        prepared
            .proxy_listener()
            .with_context(|| format!("{what}: the proxy's port could not be opened"))?;
    }
    tracing::info!(
        landlock_abi = abi,
        writable = ?sandbox.writable(roots, Path::new("<cwd>")),
        no_network = sandbox.no_network,
        proxy = sandbox.proxied().is_some(),
        masks = sandbox.masks().len(),
        "sandbox on"
    );
    Ok(())
}
