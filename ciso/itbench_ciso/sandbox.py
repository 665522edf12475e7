"""Run an agent's evidence program (collector, playbook) in a namespace sandbox (bubblewrap).

A submitted collector or playbook is code of the agent that the harness runs, during the
agent's turn (through a tool) and when judging. It runs as an unprivileged uid of its own, in
new user, PID, network, IPC, UTS and cgroup namespaces, with no capability at all (in no user
namespace: bubblewrap itself runs as that uid, never as root), no way to make further user
namespaces, and the seccomp filter of :mod:`itbench.seccomp` (no tracing or other reach into
another process, no file handles: ``open_by_handle_at`` would open any inode of a filesystem
the sandbox shows a part of). Its root is empty but for:

- ``/usr`` and the interpreter's own tree read-only, with the harness's virtual environment
  (boto3, Ansible) minus every ``itbench`` package, and a few files of ``/etc``;
- its run directory, writable, at :data:`RUN` (nothing else is writable but a private
  ``/tmp``);
- the host trees it must read (Linux family), read-only, at the paths the inventory names;
  they are fresh copies given to the run's uid, so reading them needs no capability;
- the port bridge (:mod:`itbench.netbridge`) when it may reach TCP ports of ``127.0.0.1``
  (the cloud family's AWS endpoint): nothing else of the network.

It sees no file of the harness (repository, check library, catalog, run and trial
directories, ground truth) and no process outside its PID namespace; its environment holds
only what the caller passes. When it exits or is stopped, the PID namespace ends and every
process it started goes with it.

An unprivileged bubblewrap can bind only paths its uid can traverse, and the run directory
lies in the trial directory (mode 0700), the interpreter perhaps under ``/root``. So, when the
harness runs as root, the child first enters a mount namespace of its own, still as root,
binds every such directory onto a mount point in a private, traversable directory, and only
then drops to the run's uid and starts bubblewrap on those mount points (as
:mod:`itbench.sandbox` does for agents). Those mounts exist in that child's namespace alone and
end with it. As another user, bubblewrap runs as that user, who owns the directories already.

Where bubblewrap is missing or not permitted, :func:`sandbox_problem` says why and
:class:`Jail` runs the program unconfined (callers report ``sandboxed: false``).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import importlib.util
import os
import resource
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import IO, Any

from itbench import seccomp

#: The run directory as the confined program sees it.
RUN = "/job"
#: Helper programs (port bridge, playbook runner) inside the sandbox.
OPT = "/opt/runner"
#: The port bridge's socket directory inside the sandbox.
BRIDGE = "/run/bridge"
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
    "ssl",
    "ca-certificates",
)
#: Range of the uids confined programs run as (one drawn per run; no account needs to exist).
UID_RANGE = (400_000, 499_999)
#: Largest file a confined program may write (its captured output included), in bytes.
FILE_LIMIT = 64 * 1024 * 1024
#: Processes a confined program's uid may have at once.
PROCESS_LIMIT = 512
#: Size of the private /dev/shm (Python multiprocessing, Ansible forks), in bytes.
SHM_SIZE = 64 * 1024 * 1024
#: Size of the sandbox's other memory-backed directories (its private /tmp), in bytes.
TMP_SIZE = 256 * 1024 * 1024
#: Size of the read-only skeletons holding mount points under /tmp, in bytes.
SKELETON_SIZE = 1024 * 1024
_CLONE_NEWNS = 0x00020000
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18


@cache
def _libc() -> ctypes.CDLL:
    """The C library with the calls of :meth:`Jail.preexec` resolved.

    Resolved before any fork: the child of a threaded harness must not load libraries.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    for name in ("unshare", "mount"):
        getattr(libc, name)
    return libc


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The filter bubblewrap installs (``--seccomp``), shared with the agents' sandbox.

    See :mod:`itbench.seccomp`: it refuses tracing and every other call that reads or changes
    another process, file handles and foreign system call entry points. ``None`` off the
    machines it knows.
    """
    return seccomp.program(machine)


@cache
def sandbox_problem() -> str | None:
    """Why confined runs are not possible here, or ``None`` when they are."""
    if os.environ.get("ITBENCH_CISO_NO_SANDBOX"):
        return "disabled by ITBENCH_CISO_NO_SANDBOX"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    jail = Jail(Path(tempfile.mkdtemp(prefix="itbench-jail-probe-")), confine=True)
    try:
        with jail.running():
            probe = jail.run_command(["/bin/true"], env={}, timeout=20)
    except OSError as exc:
        return f"cannot start bubblewrap: {exc}"
    finally:
        jail.close()
        shutil.rmtree(jail.run_dir, ignore_errors=True)
    if probe.returncode != 0:
        return f"bubblewrap cannot build a sandbox here: {probe.stderr.strip()[-300:]}"
    return None


@cache
def _hidden_packages() -> tuple[Path, ...]:
    """Directories of the harness's own packages (every ``itbench*`` distribution)."""
    names: set[str] = set()
    for dist in importlib.metadata.distributions():
        if not str(dist.metadata["Name"] or "").lower().startswith("itbench"):
            continue
        top = dist.read_text("top_level.txt") or ""
        names.update(n.strip() for n in top.splitlines() if n.strip())
    names.update({"itbench", "itbench_ciso", "itbench_sre", "itbench_finops"})
    out: list[Path] = []
    for name in sorted(names):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        if spec.submodule_search_locations:
            out += [Path(loc).resolve() for loc in spec.submodule_search_locations]
        elif spec.origin and spec.origin.endswith(".py"):
            out.append(Path(spec.origin).resolve())
    return tuple(out)


class SandboxUnavailable(OSError):
    """The sandbox cannot be built without showing the harness's files."""


def _python_trees() -> list[Path]:
    """The directories the interpreter needs: the virtual environment and its base install.

    Raises:
        SandboxUnavailable: one of them would show the harness's sources (an interpreter
            installed at ``/``, a virtual environment holding the repository).
    """
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    exe = Path(sys.executable)
    if exe.is_symlink():
        candidates.append(str(exe.resolve().parent.parent))
    trees: list[Path] = []
    for prefix in candidates:
        p = Path(prefix).resolve()
        if p.is_relative_to("/usr") or p in trees:
            continue
        if len(p.parts) < 2:
            raise SandboxUnavailable(f"the interpreter is installed at {p}")
        for hidden in _hidden_packages():
            installed = {"site-packages", "dist-packages"} & set(hidden.parts)
            if hidden.is_relative_to(p) and not installed:
                raise SandboxUnavailable(f"{p} holds the harness's sources ({hidden})")
        trees.append(p)
    return trees


class Jail:
    """The sandbox of one run of an agent's evidence program.

    Args:
        run_dir: The run's directory (writable; the program's working directory).
        confine: Whether to confine (``False``: run as the harness, for debugging).
        ports: TCP ports of 127.0.0.1 the program may reach (the port bridge carries them).
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        confine: bool | None = None,
        ports: Sequence[int] = (),
    ) -> None:
        self.run_dir = run_dir
        self.confined = (sandbox_problem() is None) if confine is None else confine
        self.ports = tuple(sorted(set(ports)))
        # As root, the child drops to a uid of its own before bubblewrap starts; as another
        # user, bubblewrap runs as that user, in a user namespace either way.
        self.privileged = os.geteuid() == 0
        self.uid = secrets.SystemRandom().randint(*UID_RANGE) if self.privileged else os.getuid()
        self._mounts: list[tuple[Path, str]] = []
        self._owned: list[Path] = []
        self._files: dict[str, str] = {}
        self._fds: list[int] = []
        self._private: Path | None = None
        #: Host directory -> the mount point the child binds it on before dropping to the uid.
        self._stage: dict[Path, Path] = {}
        self._relay: Any = None

    # --- what the program sees ---------------------------------------------------------------

    @property
    def run(self) -> str:
        """The run directory's path as the program sees it."""
        return RUN if self.confined else str(self.run_dir.resolve())

    def inside(self, path: Path) -> str:
        """Where ``path`` (inside the run directory) appears to the program."""
        rel = path.resolve().relative_to(self.run_dir.resolve())
        return str(Path(self.run) / rel) if str(rel) != "." else self.run

    def mount(self, source: Path, inside: str, *, own: bool = False) -> str:
        """Show the directory ``source`` read-only at ``inside``; the path the program uses.

        Args:
            source: The directory.
            inside: Where the program sees it.
            own: Give the tree to the run's uid first (a fresh copy made for this run only),
                so that the program reads it as its owner, whatever the modes of its files.
        """
        if not self.confined:
            return str(source.resolve())
        self._mounts.append((source, inside))
        if own:
            self._owned.append(source)
        return inside

    def helper(self, name: str, content: str) -> str:
        """A read-only helper file (a program of the harness) and its path for the program."""
        if not self.confined:
            path = self.run_dir / f".{name}"
            path.write_text(content, encoding="utf-8")
            return str(path.resolve())
        self._files[f"{OPT}/{name}"] = content
        return f"{OPT}/{name}"

    def _own(self, tree: Path) -> None:
        os.chown(tree, self.uid, self.uid, follow_symlinks=False)
        for entry in tree.rglob("*"):
            with contextlib.suppress(OSError):
                os.chown(entry, self.uid, self.uid, follow_symlinks=False)

    # --- running -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def running(self) -> Iterator[Jail]:
        """Prepare the sandbox (ownership, mount points, port bridge) for the runs inside."""
        try:
            if self.confined:
                if self.privileged:
                    for tree in (self.run_dir, *self._owned):
                        self._own(tree)
                    self.run_dir.chmod(0o700)
                self._private = Path(tempfile.mkdtemp(prefix="itbench-jail-", dir="/tmp"))
                os.chmod(self._private, 0o711)
                (self._private / "mnt").mkdir(mode=0o711)
                if self.ports:
                    from itbench import netbridge

                    sock_dir = self._private / "bridge"
                    sock_dir.mkdir(mode=0o711)
                    self._relay = netbridge.Relay(str(sock_dir / "bridge.sock"), self.ports)
            yield self
        finally:
            self.close()

    def _fd(self, path: Path | str, flags: int = os.O_RDONLY) -> int:
        fd = os.open(path, flags | os.O_CLOEXEC)
        self._fds.append(fd)
        return fd

    def _data(self, name: str, content: str | bytes) -> int:
        assert self._private is not None
        path = self._private / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return self._fd(path)

    def _staged(self, source: Path) -> str:
        """The path bubblewrap binds ``source`` from (as root: its private mount point)."""
        if not self.privileged:
            return str(source)
        assert self._private is not None
        source = source.resolve()
        if source not in self._stage:
            point = self._private / "mnt" / str(len(self._stage))
            point.mkdir(mode=0o700)
            os.chown(point, self.uid, self.uid)
            self._stage[source] = point
        return str(self._stage[source])

    def preexec(self) -> None:
        """In the child, before bubblewrap: stage the binds as root, limit, become the uid.

        Runs between fork and exec (system calls only): as root, a private mount namespace,
        every staged directory bound onto its mount point, then no groups and the run's uid
        and gid; in every case the file size and process limits.
        """
        if self.privileged:
            libc = _libc()
            if libc.unshare(_CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
            if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
                raise OSError(ctypes.get_errno(), "cannot make / private")
            for src, point in self._stage.items():
                if libc.mount(str(src).encode(), str(point).encode(), None, _MS_BIND, None) != 0:
                    raise OSError(ctypes.get_errno(), f"cannot bind {src}")
        resource.setrlimit(resource.RLIMIT_NPROC, (PROCESS_LIMIT, PROCESS_LIMIT))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
        if self.privileged:
            os.setgroups([])
            os.setresgid(self.uid, self.uid, self.uid)
            os.setresuid(self.uid, self.uid, self.uid)

    def argv(self, command: Sequence[str]) -> list[str]:
        """The command line that runs ``command`` confined (unchanged when not confined)."""
        if not self.confined:
            return list(command)
        if self._private is None:
            raise RuntimeError("Jail.argv outside Jail.running()")
        bwrap = shutil.which("bwrap") or "bwrap"
        out = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"]
        out += ["--new-session", "--hostname", "runner", "--cap-drop", "ALL"]
        program = seccomp_program()
        if program is not None:
            out += ["--seccomp", str(self._data("seccomp.bpf", program))]
        # The private /tmp first: a tree under the harness's /tmp (a virtual environment)
        # is bound into it, not hidden by it.
        out += ["--proc", "/proc", "--dev", "/dev"]
        out += ["--perms", "1777", "--size", str(TMP_SIZE), "--tmpfs", "/tmp"]
        out += ["--perms", "1777", "--size", str(SHM_SIZE), "--tmpfs", "/dev/shm"]
        trees = _python_trees()
        dests = [str(t) for t in trees] + [inside for _, inside in self._mounts]
        dests += [RUN, BRIDGE, *self._files, f"{OPT}/netbridge.py", "/etc/passwd"]
        # Mount points under /tmp (a virtual environment, the hosts at the workspace's path)
        # get a skeleton of their own, read-only once built, like the root's.
        under_tmp = [Path(d).parts for d in dests if Path(d).is_relative_to("/tmp")]
        skeletons = sorted({str(Path(*parts[:3])) for parts in under_tmp if len(parts) > 3})
        for top in skeletons:
            out += ["--perms", "0755", "--size", str(SKELETON_SIZE), "--tmpfs", top]
        # Mount points' parents, traversable by the run's uid.
        made: set[str] = {"/", "/tmp", "/dev", "/proc", *skeletons}
        for dest in dests:
            for parent in reversed(Path(dest).parents):
                if str(parent) not in made:
                    made.add(str(parent))
                    out += ["--perms", "0755", "--dir", str(parent)]
        out += ["--ro-bind", "/usr", "/usr"]
        if not any(t.is_relative_to("/usr/local") for t in trees):
            out += ["--tmpfs", "/usr/local"]
        for link in ("bin", "lib", "lib64", "sbin"):
            target = Path("/") / link
            if target.is_symlink():
                out += ["--symlink", os.readlink(target), f"/{link}"]
            elif target.is_dir():
                out += ["--ro-bind", str(target), f"/{link}"]
        for name in ETC:
            if (Path("/etc") / name).exists():
                out += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        passwd = f"root:x:0:0::/:/usr/sbin/nologin\nrunner:x:{self.uid}:{self.uid}::{RUN}:/bin/sh\n"
        group = f"root:x:0:\nrunner:x:{self.uid}:\n"
        for name, text in (
            ("passwd", passwd),
            ("group", group),
            ("hosts", "127.0.0.1 localhost\n"),
        ):
            out += [
                "--perms",
                "0444",
                "--ro-bind-data",
                str(self._data(name, text)),
                f"/etc/{name}",
            ]
        for t in trees:
            out += ["--ro-bind", self._staged(t), str(t)]
        for hidden in _hidden_packages():  # a non-editable install lives in site-packages
            if any(hidden.is_relative_to(t) for t in trees):
                if hidden.is_dir():
                    out += ["--tmpfs", str(hidden)]
                else:
                    out += ["--ro-bind", "/dev/null", str(hidden)]
        for i, (dest, content) in enumerate(sorted(self._files.items())):
            out += [
                "--perms",
                "0444",
                "--ro-bind-data",
                str(self._data(f"file-{i}", content)),
                dest,
            ]
        for source, inside in self._mounts:
            out += ["--ro-bind", self._staged(source), inside]
        out += ["--bind", self._staged(self.run_dir), RUN]
        bridge: list[str] = []
        if self._relay is not None:
            from itbench import netbridge

            code = Path(netbridge.__file__).read_text(encoding="utf-8")
            out += [
                "--perms",
                "0444",
                "--ro-bind-data",
                str(self._data("netbridge.py", code)),
                f"{OPT}/netbridge.py",
            ]
            out += ["--bind", self._staged(self._private / "bridge"), BRIDGE]
            ports = ",".join(str(p) for p in self.ports)
            bridge = [sys.executable, "-I", f"{OPT}/netbridge.py", f"{BRIDGE}/bridge.sock", ports]
            bridge += ["--"]
        for top in skeletons:
            out += ["--remount-ro", top]
        out += ["--remount-ro", "/", "--chdir", RUN]
        # The options from a descriptor: the jail's pid 1 is bubblewrap, whose command line
        # (/proc/1/cmdline) would show every host path it binds.
        options = "".join(f"{o}\0" for o in out[1:])
        return [out[0], "--args", str(self._data("args", options)), "--", *bridge, *command]

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """The whole environment of a program given ``env``: a minimal base, then ``env``."""
        base: dict[str, str] = {
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": self.run,
            "TMPDIR": "/tmp" if self.confined else self.run,
            "USER": "runner",
            "LOGNAME": "runner",
        }
        return {**base, **env}

    def popen(
        self,
        command: Sequence[str],
        env: dict[str, str],
        stdout: int | IO[Any] | None = None,
        stderr: int | IO[Any] | None = None,
        stdin: int | IO[Any] | None = subprocess.DEVNULL,
    ) -> subprocess.Popen[bytes]:
        """Start ``command`` in the sandbox with exactly :meth:`environment` of ``env``.

        The process leads a session of its own (stop it with its process group).
        """
        argv = self.argv(command)
        kwargs: dict[str, Any] = {}
        if self.confined:
            _libc()
            kwargs = {"pass_fds": tuple(self._fds), "preexec_fn": self.preexec}
        return subprocess.Popen(  # the agent's program, confined
            argv,
            cwd="/" if self.confined else self.run_dir,
            env=self.environment(env),
            stdout=stdout,
            stderr=stderr,
            stdin=stdin,
            start_new_session=True,
            umask=0o022,  # the directories bubblewrap creates for mount points must be traversable
            **kwargs,
        )

    def run_command(
        self, command: Sequence[str], env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` to its end (a probe); output captured as text."""
        proc = self.popen(command, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        return subprocess.CompletedProcess(
            proc.args, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
        )

    def close(self) -> None:
        """Stop the port bridge, close descriptors and remove private files. Idempotent."""
        if self._relay is not None:
            self._relay.stop()
            self._relay = None
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()
        self._stage.clear()
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None


def read_back(root: Path, relative: str, limit: int) -> bytes:
    """Read a file a confined program wrote under ``root``, never following a symbolic link.

    The program owns its run directory: any component of ``relative`` may be a link it made
    to a harness file. Every component is opened without following links.

    Raises:
        OSError: a component is a link or missing, the file is not a regular file, or it is
            larger than ``limit`` bytes.
    """
    parts = [p for p in Path(relative).parts if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        raise OSError(f"not a path inside the run directory: {relative}")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            nxt = os.open(
                part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
            os.close(fd)
            fd = nxt
        leaf = os.open(
            parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd
        )
    finally:
        os.close(fd)
    with os.fdopen(leaf, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{relative} is not a regular file")
        if info.st_size > limit:
            raise OSError(f"{relative} is larger than {limit} bytes")
        return fh.read(limit + 1)[:limit]
