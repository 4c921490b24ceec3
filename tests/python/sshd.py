"""A real OpenSSH `sshd` on 127.0.0.1 for the host tests, and the client config that reaches it.

The product reaches another machine as `ssh -F <config> ALIAS cubactl bridge`; with this server
the tests run those very `ssh` invocations instead of a stand-in. Nothing of the machine's own
SSH setup is used: host key, client key, `authorized_keys`, `known_hosts` and both config files
live in a short temp dir, and the server listens on a free loopback port only.

Clean-up has to chase processes: each connection is served by an sshd child that calls
`setsid`, and every remote command runs in a session of its own too, so killing sshd's process
group reaches neither. `cleanup()` kills the listener's children and its group, then every
process whose `SSH_CONNECTION` names this server's port, until a scan finds none.
"""

from __future__ import annotations

import getpass
import os
import pwd
import queue
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from conftest import _environ, _kill9, _pid_alive, _pids

# Where Debian's `openssh-server` installs the server.
SSHD = "/usr/sbin/sshd"
# How long a starting sshd may take to say it listens (a busy 2-core machine can be slow).
START_TIMEOUT = 30.0
# Starts tried when the free port was taken between our probe and sshd's bind.
BIND_ATTEMPTS = 5
# What `AcceptEnv` lets through: a `SetEnv` of another name would be dropped silently.
ACCEPTED_ENV = ("CUBA_EXEC_", "CUBA_TEST_")
# One step of a helper command (ssh-keygen).
STEP = 20.0


def free_port() -> int:
    """A port of 127.0.0.1 nobody listened on a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def user_name() -> str:
    """The user running the tests: the one sshd logs in, as the client key is theirs."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return getpass.getuser()


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-N", "", "-t", "ed25519", "-C", "cuba-tests", "-f", str(path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=True,
        timeout=STEP,
    )
    # ssh and sshd refuse a private key others may read; ssh-keygen's mode, made explicit.
    path.chmod(0o600)


def _privsep_dir() -> None:
    """As root, sshd will not start without /run/sshd, which only its service unit makes."""
    run = Path("/run/sshd")
    if os.geteuid() != 0 or run.is_dir():
        return
    try:
        run.mkdir(mode=0o755)
        run.chmod(0o755)
    except FileExistsError:
        pass  # Another test's server made it meanwhile.


class SshServer:
    """A running `sshd` owned by one test, with a client config of `Host` aliases for it."""

    def __init__(self) -> None:
        assert Path(SSHD).is_file(), f"sshd not found at {SSHD}: install openssh-server"
        self.dir = Path(tempfile.mkdtemp(prefix="cs-", dir="/tmp"))
        self.config = self.dir / "ssh_config"
        self.log_path = self.dir / "sshd.log"
        self.user = user_name()
        self._hosts: dict[str, str] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._drain: threading.Thread | None = None
        self.port = 0
        _keygen(self.dir / "host_key")
        _keygen(self.dir / "client_key")
        shutil.copy(self.dir / "client_key.pub", self.dir / "authorized_keys")
        self.config.write_text("")
        _privsep_dir()
        for _ in range(BIND_ATTEMPTS):
            port = free_port()
            self._write_server_files(port)
            if self._launch(port):
                self.port = port
                return
        self.cleanup()
        raise AssertionError(f"sshd found no free port in {BIND_ATTEMPTS} starts; log:\n{self.log()}")

    def log(self) -> str:
        """Everything sshd has logged so far, for failure messages."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _write_server_files(self, port: int) -> None:
        key = " ".join((self.dir / "host_key.pub").read_text().split()[:2])
        (self.dir / "known_hosts").write_text(f"[127.0.0.1]:{port} {key}\n")
        d = self.dir
        (d / "sshd_config").write_text(
            "ListenAddress 127.0.0.1\n"
            f"Port {port}\n"
            f"HostKey {d / 'host_key'}\n"
            f"AuthorizedKeysFile {d / 'authorized_keys'}\n"
            f"PidFile {d / 'sshd.pid'}\n"
            "StrictModes no\n"
            "UsePAM no\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\n"
            "AcceptEnv CUBA_EXEC_* CUBA_TEST_*\n"
            "PermitUserEnvironment no\n"
            "PrintMotd no\n"
            "PrintLastLog no\n"
            "LogLevel VERBOSE\n"
            "MaxStartups 100\n"
            "MaxSessions 100\n"
        )

    def _launch(self, port: int) -> bool:
        """Starts sshd on `port` and waits for its "Server listening" line; False when the port
        was taken since `free_port`, an AssertionError with the log for any other failure."""
        proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.dir / "sshd_config")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert proc.stderr is not None
        lines: queue.Queue[str | None] = queue.Queue()
        drain = threading.Thread(target=self._drain_stderr, args=(proc.stderr, lines), daemon=True)
        drain.start()
        ready = f"Server listening on 127.0.0.1 port {port}."
        deadline = time.monotonic() + START_TIMEOUT
        port_taken = False
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self._kill_group(proc)
                raise AssertionError(
                    f"sshd did not listen on port {port} within {START_TIMEOUT} s; log:\n{self.log()}"
                ) from None
            if line == ready:
                self._proc, self._drain = proc, drain
                return True
            if line is None:
                # Its stderr closed: sshd has exited.
                status = self._kill_group(proc)
                drain.join(timeout=5)
                if port_taken:
                    return False
                raise AssertionError(f"sshd exited at start-up on port {port} ({status}); log:\n{self.log()}")
            port_taken |= "Address already in use" in line

    def _drain_stderr(self, stderr: IO[bytes], lines: queue.Queue[str | None]) -> None:
        """Appends sshd's stderr to the log as long as sshd (or a per-connection child) writes
        it, so that sshd never blocks on a full pipe; each line also goes to `lines`."""
        with stderr, open(self.log_path, "a", encoding="utf-8") as log:
            for raw in stderr:
                # sshd ends its stderr lines with "\r\n".
                line = raw.decode(errors="replace").rstrip("\r\n")
                log.write(line + "\n")
                log.flush()
                lines.put(line)
        lines.put(None)

    @staticmethod
    def _kill_group(proc: subprocess.Popen[bytes]) -> int | None:
        """SIGKILLs sshd's process group (sshd and what it forked without `setsid`), reaped."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None

    def _host_lines(self, port: int) -> list[str]:
        """A `Host` block's lines for 127.0.0.1:`port`, nothing from the user's own setup (no
        agent keys, no known hosts, no prompts, no shared connections)."""
        return [
            "HostName 127.0.0.1",
            f"Port {port}",
            f"User {self.user}",
            f"IdentityFile {self.dir / 'client_key'}",
            "IdentitiesOnly yes",
            f"UserKnownHostsFile {self.dir / 'known_hosts'}",
            "GlobalKnownHostsFile /dev/null",
            "StrictHostKeyChecking yes",
            "BatchMode yes",
            "LogLevel ERROR",
            "ControlMaster no",
        ]

    def add_host(self, alias: str, set_env: dict[str, str]) -> None:
        """Adds `alias`: this server, as the current user with the client key, and `set_env`
        sent as `SetEnv` (only names sshd accepts; values without spaces or quotes, as the
        config holds them unquoted)."""
        lines = self._host_lines(self.port)
        for name, value in set_env.items():
            assert name.startswith(ACCEPTED_ENV) and re.fullmatch(r"\w+", name), (
                f"SetEnv {name}: sshd accepts only CUBA_EXEC_* and CUBA_TEST_* names"
            )
            assert value and not re.search(r"[\s\"'\\]", value), f"SetEnv {name}={value!r}: a plain value"
        if set_env:
            lines.append("SetEnv " + " ".join(f"{k}={v}" for k, v in set_env.items()))
        self._put_host(alias, lines)

    def add_unreachable_host(self, alias: str) -> None:
        """Adds `alias` at a closed port: `ssh` fails at once with "Connection refused", and
        `ConnectTimeout` bounds it should the port drop packets instead."""
        self._put_host(alias, self._host_lines(free_port()) + ["ConnectTimeout 3"])

    def _put_host(self, alias: str, lines: list[str]) -> None:
        assert alias and not re.search(r"[\s*?!,]", alias), f"{alias!r} is no plain host alias"
        self._hosts[alias] = f"Host {alias}\n" + "".join(f"    {line}\n" for line in lines)
        # Renamed into place: an `ssh` reading the config meanwhile sees all of one version.
        new = self.dir / "ssh_config.new"
        new.write_text("\n".join(self._hosts.values()))
        new.rename(self.config)

    def session_processes(self) -> list[int]:
        """Live processes of this server's sessions (their `SSH_CONNECTION` names its port)."""
        if not self.port:
            return []
        marker = f" 127.0.0.1 {self.port}".encode()
        return [
            p
            for p in _pids()
            if any(kv.startswith(b"SSH_CONNECTION=") and kv.endswith(marker) for kv in _environ(p))
            and _pid_alive(p)
        ]

    def cleanup(self) -> None:
        """SIGKILLs sshd, its connections and everything its sessions started; removes the dir."""
        if self._proc is not None:
            listener = self._proc.pid
            # Found while they are still the listener's children.
            connections = [p for p in _pids() if _parent(p) == listener]
            self._kill_group(self._proc)
            for p in connections:
                _kill9(p)
        # Processes fork while they are killed: repeat until a scan finds none.
        deadline = time.monotonic() + 10
        while (left := self.session_processes()) and time.monotonic() < deadline:
            for p in left:
                _kill9(p)
            time.sleep(0.005)
        if self._drain is not None:
            self._drain.join(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rfind(")") + 1 :].split()[1])
