"""The namespace sandbox external agents run in (bubblewrap).

An agent program runs as an unprivileged uid of its own, in new user, PID, network, IPC, UTS
and cgroup namespaces, on an empty root that holds only:

- ``/usr`` read-only (``/usr/local`` hidden), with the usual ``/bin``, ``/lib``... links, and a
  few files of ``/etc`` (loader cache, alternatives, certificates, a generated ``passwd``);
- its workspace, writable, at the same absolute path as on the host;
- its own program's directory, read-only (``agent_dir``);
- a private ``/tmp``, its own ``/proc`` and a minimal ``/dev``;
- ``/opt/itbench``: the tool client (``itbench tool ...``), the port bridge and the MCP stdio
  launcher (``mcpbridge.py``), files of the standard library alone.

It sees no file of the harness (repository, installed packages, catalog, run directory, other
trials) and no process outside its PID namespace. Its network namespace has a loopback
interface only; :mod:`itbench.netbridge` forwards the tool server's port and the ports of the
public endpoints in the task context, nothing else. When the program exits, or is stopped, the
PID namespace ends and every process in it, daemons included, goes with it, with the
listeners they opened. Its uid may run :data:`PROCESS_LIMIT` processes and write files of
:data:`FILE_LIMIT` bytes at most; its ``/tmp`` and ``/dev/shm`` hold :data:`TMP_SIZE` bytes each,
and the rest of the root is read-only. The seccomp filter of :mod:`itbench.seccomp` refuses
tracing and every other call that reads or changes another process.

With :class:`~itbench.bounds.Bounds` (the ``command`` agent always passes them), the sandbox is
bounded: its processes run in control groups of their own (:mod:`itbench.cgroups`: memory,
processes, CPU), joined before bubblewrap starts, and its workspace is a size-limited tmpfs
(:mod:`itbench.workspace_fs`), copied back into the run directory, capped, when the sandbox is
closed. Where that is not possible, :attr:`Sandbox.unbounded` says why and the sandbox runs
without those bounds.

Nothing inside names a host path, ``/proc/self/mountinfo`` included: the workspace and the
private directory whose parts bubblewrap binds are file systems of their own (their mount
roots are ``/``), and the other binds are at their own paths (``/usr``, the agent's
directory).

bubblewrap runs unprivileged, as the agent's uid, so it can bind only paths that uid can reach;
a workspace under a private directory (``/root/...``, a 0700 temporary directory) is not one.
So the harness's child first enters a mount namespace of its own, still as root, binds the
workspace and the agent's directory onto mount points in a private, traversable directory, and
only then drops to the agent's uid and starts bubblewrap. Those mounts exist in that child's
namespace alone and end with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import resource
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from itbench import mcpbridge, netbridge, seccomp, toolclient
from itbench.bounds import Bounds, bounds_problem
from itbench.cgroups import RECORD_FILE, Cgroups, record
from itbench.workspace_fs import (
    PRIVATE_PREFIX,
    BoundedWorkspace,
    Kept,
    mount_fs,
    note_mounts,
    unmount_fs,
)

log = logging.getLogger("itbench.sandbox")

#: Where the harness's helper programs appear inside the sandbox.
OPT = "/opt/itbench"
#: The Unix socket directory of the port bridge inside the sandbox.
RUN = "/run/itbench"
#: Variables an agent program gets besides the ``ITBENCH_*`` ones the harness sets.
PATH = f"{OPT}/bin:/usr/bin:/bin"
#: Files of /etc a program commonly needs; those that exist are bound read-only.
ETC = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "protocols",
    "services",
    "mime.types",
    "ssl/certs",
    "ca-certificates",
    "ca-certificates.conf",
)
#: Range of the uids agents run as (one drawn per trial; no account needs to exist).
UID_RANGE = (200_000, 299_999)
#: Processes an agent's uid may have at once (a fork bomb stops there).
PROCESS_LIMIT = 1024
#: Largest file an agent may write, in bytes.
FILE_LIMIT = 1024 * 1024 * 1024
#: Size of the agent's private /tmp (memory-backed), in bytes.
TMP_SIZE = 256 * 1024 * 1024
#: Size of the other memory-backed directories of the sandbox (its root, /usr/local).
SMALL_TMPFS = 1024 * 1024
#: Size of the memory-backed directory holding what bubblewrap binds (sockets, helper files).
PRIVATE_SIZE = 16 * 1024 * 1024
_WRAPPER = f'#!/bin/sh\nexec /usr/bin/python3 {OPT}/toolclient.py "$@"\n'
_CLONE_NEWNS = 0x00020000
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_MS_NOSUID, _MS_NODEV = 2, 4


class SandboxError(Exception):
    """The sandbox cannot be built as asked (no bubblewrap, an agent dir exposing the harness)."""


def bwrap_path() -> str | None:
    """The bubblewrap program, or ``None`` when it is not installed."""
    return shutil.which("bwrap")


#: System directories already in the sandbox: a program there is not the agent's own.
SYSTEM_DIRS = (Path("/usr"), Path("/bin"), Path("/sbin"), Path("/lib"), Path("/lib64"))


def agent_dir_for(argv: Sequence[str]) -> Path | None:
    """The directory of the command's first argument that is a file of its own.

    ``python3 /opt/agents/a.py`` gives ``/opt/agents``; the system's programs
    (``/usr/bin/python3``) are in the sandbox already and do not count.
    """
    for arg in argv:
        path = Path(arg)
        if not (path.is_absolute() or "/" in arg):
            continue
        with contextlib.suppress(OSError):
            if path.is_file():
                resolved = path.resolve()
                if not any(resolved.is_relative_to(d) for d in SYSTEM_DIRS):
                    return resolved.parent
    return None


def check_agent_dir(agent_dir: Path, protected: Iterable[Path]) -> None:
    """Refuse an agent directory that holds, or lies inside, a harness path.

    Raises:
        SandboxError: ``agent_dir`` is ``/``, or contains or is inside a protected path.
    """
    agent_dir = agent_dir.resolve()
    if agent_dir == Path("/"):
        raise SandboxError("the agent's directory cannot be /")
    for p in protected:
        p = p.resolve()
        if p == agent_dir or p.is_relative_to(agent_dir) or agent_dir.is_relative_to(p):
            raise SandboxError(
                f"the agent's directory {agent_dir} overlaps {p}, which the agent must not see; "
                "keep the agent program in a directory of its own (--option agent_dir=DIR)"
            )


@dataclass
class Sandbox:
    """The sandbox of one agent program.

    Args:
        workspace: The agent's writable directory, bound at the same path (when the path is a
            link, at the link's path: the agent sees the path its task names).
        ports: TCP ports of 127.0.0.1 the agent may reach.
        agent_dir: The agent program's directory, bound read-only at the same path.
        env: The ``ITBENCH_*`` variables (and any other allowed) for the program.
        files: Extra read-only files by their path inside the sandbox (under ``/opt``), with
            their content (a probe program, for one).
        bounds: Memory, processes, CPU and workspace bounds (``None``: none).
        trial_dir: Where the list of workspace files not kept goes.
        watch: The relay's watcher of each new connection to a port (see
            :class:`itbench.netbridge.Relay`); None watches nothing.
    """

    workspace: Path
    ports: Sequence[int]
    agent_dir: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    bounds: Bounds | None = None
    trial_dir: Path | None = None
    uid: int = field(default_factory=lambda: secrets.SystemRandom().randint(*UID_RANGE))
    watch: Callable[[int], Any] | None = None

    def __post_init__(self) -> None:
        self.mount_at = self.workspace
        self.workspace = Path(os.path.realpath(self.workspace))
        self._fds: list[int] = []
        self.relay: netbridge.Relay | None = None
        self.cgroups: Cgroups | None = None
        self.bounded_workspace: BoundedWorkspace | None = None
        #: Why the sandbox runs without its bounds (``None``: bounded, or no bounds asked).
        self.unbounded: str | None = None
        #: What the copy back kept of the workspace (after :meth:`close`).
        self.kept: Kept | None = None
        self._private = Path(tempfile.mkdtemp(prefix=PRIVATE_PREFIX, dir="/tmp"))
        self._private_mounted = False
        try:
            self._make_private()
        except BaseException:
            self.close()
            raise

    def _make_private(self) -> None:
        """The private directory: sockets, helper files and mount points bubblewrap binds."""
        if os.geteuid() == 0:
            # A file system of its own: what bubblewrap binds from it shows no host path.
            with contextlib.suppress(OSError):
                flags = _MS_NOSUID | _MS_NODEV
                mount_fs("itbench", self._private, "tmpfs", flags, f"size={PRIVATE_SIZE},mode=0711")
                self._private_mounted = True
                self._note_mounts()
        os.chmod(self._private, 0o711)
        # At the same path as inside: its mount root names nothing but where it is bound.
        self._sock_dir = self._private / RUN.lstrip("/")
        self._sock_dir.parent.mkdir(mode=0o711)
        self._sock_dir.mkdir(mode=0o711)
        mnt = self._private / "mnt"
        mnt.mkdir(mode=0o711)
        #: Host path -> mount point where the child binds it before dropping privileges.
        self._stage = {self.workspace: mnt / "workspace"}
        if self.agent_dir is not None:
            self._stage[self.agent_dir] = mnt / "agent"
        for point in self._stage.values():
            point.mkdir(mode=0o700)
            os.chown(point, self.uid, self.uid)

    def preexec(self) -> None:
        """In the child, before bubblewrap: stage the binds as root, then become the agent.

        Runs between fork and exec (so it uses only system calls): a private mount namespace,
        the workspace and agent directory bound onto their mount points, the control groups
        joined, then no groups and the agent's uid and gid.
        """
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(_CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
        if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
            raise OSError(ctypes.get_errno(), "cannot make / private")
        for src, point in self._stage.items():
            if libc.mount(str(src).encode(), str(point).encode(), None, _MS_BIND, None) != 0:
                raise OSError(ctypes.get_errno(), f"cannot bind {src}")
        if self.cgroups is not None:
            self.cgroups.join()
        resource.setrlimit(resource.RLIMIT_NPROC, (PROCESS_LIMIT, PROCESS_LIMIT))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
        os.setgroups([])
        os.setresgid(self.uid, self.uid, self.uid)
        os.setresuid(self.uid, self.uid, self.uid)

    def _fd(self, path: Path | str, flags: int = os.O_RDONLY) -> int:
        fd = os.open(path, flags | os.O_CLOEXEC)
        self._fds.append(fd)
        return fd

    def _data(self, name: str, content: str | bytes) -> int:
        path = self._private / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return self._fd(path)

    def prepare(self) -> None:
        """Give the workspace to the agent's uid, apply the bounds, start the port relay."""
        os.chown(self.workspace, self.uid, self.uid)
        for entry in self.workspace.rglob("*"):
            with contextlib.suppress(OSError):
                os.chown(entry, self.uid, self.uid, follow_symlinks=False)
        self.workspace.chmod(0o700)
        if self.bounds is not None:
            self._bind_bounds(self.bounds)
        self.relay = netbridge.Relay(str(self._sock_dir / "bridge.sock"), self.ports, self.watch)

    def _bind_bounds(self, bounds: Bounds) -> None:
        """Make the control groups and mount the bounded workspace (or say why not)."""
        self.unbounded = bounds_problem()
        if self.unbounded is not None:
            return
        try:
            cgroups = Cgroups(bounds.limits)
            cgroups.create()
            self.cgroups = cgroups
            if self.trial_dir is not None:
                record(cgroups, self.trial_dir)
            stage = self._private / "workspace"
            stage.mkdir(mode=0o700)
            workspace = BoundedWorkspace(self.workspace, stage, bounds.workspace, self.uid)
            workspace.mount()
            self.bounded_workspace = workspace
            self._note_mounts()
        except OSError as exc:
            self.unbounded = f"sandboxed agents run unbounded: {exc}"
            self._release_bounds()

    def limits_reached(self) -> list[str]:
        """The bounds the sandbox's processes ran into (the OOM killer, refused forks)."""
        if self.cgroups is None:
            return []
        out = []
        limits = self.cgroups.limits
        if kills := self.cgroups.oom_kills():
            out.append(
                f"the sandbox's memory limit ({limits.memory} bytes) was reached: "
                f"the kernel killed {kills} process(es)"
            )
        if refused := self.cgroups.pids_refused():
            out.append(f"the sandbox's process limit ({limits.pids}) refused {refused} fork(s)")
        return out

    def argv(self, command: Sequence[str]) -> list[str]:
        """The bubblewrap command line that runs ``command`` in this sandbox.

        Raises:
            SandboxError: bubblewrap is not installed.
        """
        bwrap = bwrap_path()
        if bwrap is None:
            raise SandboxError(
                "bubblewrap (bwrap) is not installed: install it (Debian: bubblewrap), "
                "or run with --sandbox none for debugging (results are labelled unsandboxed)"
            )
        out = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"]
        out.append("--new-session")
        out += ["--hostname", "sandbox", "--cap-drop", "ALL"]
        program = seccomp.program()
        if program is not None:
            out += ["--seccomp", str(self._data("seccomp.bpf", program))]
        out += ["--size", str(SMALL_TMPFS), "--tmpfs", "/"]
        out += ["--ro-bind", "/usr", "/usr", "--size", str(SMALL_TMPFS), "--tmpfs", "/usr/local"]
        for link in ("bin", "lib", "lib64", "sbin"):
            target = Path("/") / link
            if target.is_symlink():
                out += ["--symlink", os.readlink(target), f"/{link}"]
            elif target.is_dir():
                out += ["--ro-bind", str(target), f"/{link}"]
        for name in ETC:
            if (Path("/etc") / name).exists():
                out += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        home = str(self.mount_at)
        passwd = f"root:x:0:0::/:/usr/sbin/nologin\nagent:x:{self.uid}:{self.uid}::{home}:/bin/sh\n"
        out += ["--ro-bind-data", str(self._data("passwd", passwd)), "/etc/passwd"]
        group = f"root:x:0:\nagent:x:{self.uid}:\n"
        out += ["--ro-bind-data", str(self._data("group", group)), "/etc/group"]
        out += ["--ro-bind-data", str(self._data("hosts", "127.0.0.1 localhost\n")), "/etc/hosts"]
        out += ["--proc", "/proc", "--dev", "/dev", "--size", str(TMP_SIZE), "--tmpfs", "/tmp"]
        out += ["--size", str(TMP_SIZE), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
        out += ["--dir", "/run"]
        client = Path(toolclient.__file__).read_text(encoding="utf-8")
        bridge = Path(netbridge.__file__).read_text(encoding="utf-8")
        launcher = Path(mcpbridge.__file__).read_text(encoding="utf-8")
        out += ["--ro-bind-data", str(self._data("toolclient.py", client)), f"{OPT}/toolclient.py"]
        out += ["--ro-bind-data", str(self._data("netbridge.py", bridge)), f"{OPT}/netbridge.py"]
        out += ["--ro-bind-data", str(self._data("mcpbridge.py", launcher)), f"{OPT}/mcpbridge.py"]
        for i, (dest, content) in enumerate(sorted(self.files.items())):
            out += ["--ro-bind-data", str(self._data(f"file-{i}", content)), dest]
        wrapper = str(self._data("itbench", _WRAPPER))
        out += ["--perms", "0555", "--file", wrapper, f"{OPT}/bin/itbench"]
        out += ["--bind", str(self._sock_dir), RUN]
        if self.agent_dir is not None:
            out += ["--ro-bind", str(self._stage[self.agent_dir]), str(self.agent_dir)]
        out += ["--bind", str(self._stage[self.workspace]), str(self.mount_at)]
        out += ["--remount-ro", "/", "--chdir", str(self.mount_at)]
        ports = ",".join(str(p) for p in sorted(set(self.ports)))
        relay = [
            "/usr/bin/python3",
            "-I",
            "-S",
            f"{OPT}/netbridge.py",
            f"{RUN}/bridge.sock",
            ports,
        ]
        return [bwrap, *self._options_fd(out[1:]), "--", *relay, "--", *command]

    def _options_fd(self, options: Sequence[str]) -> list[str]:
        """Bubblewrap's ``options`` read from a descriptor (``--args FD``), not its command line.

        The sandbox's pid 1 is bubblewrap: its ``/proc/1/cmdline`` would show every host path
        it binds.
        """
        return ["--args", str(self._data("args", "".join(f"{o}\0" for o in options)))]

    def environment(self) -> dict[str, str]:
        """The program's whole environment: nothing of the harness's own."""
        return {
            "PATH": PATH,
            "HOME": str(self.mount_at),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            **self.env,
        }

    @property
    def pass_fds(self) -> tuple[int, ...]:
        """Descriptors bubblewrap must inherit."""
        return tuple(self._fds)

    def close(self) -> None:
        """Stop the relay and every process left, copy the workspace back, release the rest.

        Idempotent. The workspace's copy back is capped (see :mod:`itbench.workspace_fs`);
        :attr:`kept` says what it kept.
        """
        if self.relay is not None:
            self.relay.stop()
            self.relay = None
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()
        try:
            if self.bounded_workspace is not None and self.cgroups is not None:
                # Nothing may write while the workspace is copied.
                with contextlib.suppress(OSError):
                    self.cgroups.remove()
                self.kept = self.bounded_workspace.restore(self.trial_dir)
        finally:
            self._release_bounds()
            if self._private_mounted:
                with contextlib.suppress(OSError):
                    unmount_fs(self._private)
                self._private_mounted = False
            shutil.rmtree(self._private, ignore_errors=True)
            self._note_mounts()

    def _note_mounts(self) -> None:
        """Note in the trial directory what is mounted, for the recovery of a killed harness."""
        if self.trial_dir is None:
            return
        points = [self.bounded_workspace.stage] if self.bounded_workspace is not None else []
        points += [self._private] if self._private_mounted else []
        note_mounts(self.trial_dir, points)

    def _release_bounds(self) -> None:
        """Unmount the workspace's file system and remove the control groups."""
        workspace, self.bounded_workspace = self.bounded_workspace, None
        if workspace is not None:
            workspace.unmount()
        cgroups, self.cgroups = self.cgroups, None
        if cgroups is not None:
            try:
                cgroups.remove()
            except OSError as exc:
                log.warning("the sandbox's control groups are left: %s", exc)
            else:
                if self.trial_dir is not None:
                    (self.trial_dir / RECORD_FILE).unlink(missing_ok=True)
