"""Run an agent's evidence program (collector, playbook) in a namespace sandbox (bubblewrap).

A submitted collector or playbook is code of the agent that the harness runs, during the
agent's turn (through a tool) and when judging. It runs as an unprivileged uid of its own, in
new user, PID, network, IPC, UTS and cgroup namespaces, on an empty root holding only:

- ``/usr`` and the interpreter's own tree read-only, with the harness's virtual environment
  (boto3, Ansible) minus every ``itbench`` package, and a few files of ``/etc``;
- its run directory, writable, at :data:`RUN` (nothing else is writable but a private
  ``/tmp``);
- the host trees it must read (Linux family), read-only, at the paths the inventory names;
- the port bridge (:mod:`itbench.netbridge`) when it may reach TCP ports of ``127.0.0.1``
  (the cloud family's AWS endpoint): nothing else of the network.

It sees no file of the harness (repository, check library, catalog, run and trial
directories, ground truth) and no process outside its PID namespace; its environment holds
only what the caller passes. When it exits or is stopped, the PID namespace ends and every
process it started goes with it. Every bind is made from a descriptor the harness opened, so
the unprivileged sandbox needs no access to the host paths themselves.

Where bubblewrap is missing or not permitted, :func:`sandbox_problem` says why and
:class:`Jail` runs the program unconfined (callers report ``sandboxed: false``).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
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
        read_owned: Whether the program may read every file it is shown whatever its mode,
            as a root audit reads ``/etc/shadow`` with mode 0000 (``CAP_DAC_READ_SEARCH``;
            in a user namespace, for the harness user's own files).
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        confine: bool | None = None,
        ports: Sequence[int] = (),
        read_owned: bool = False,
    ) -> None:
        self.run_dir = run_dir
        self.confined = (sandbox_problem() is None) if confine is None else confine
        self.ports = tuple(sorted(set(ports)))
        self.read_owned = read_owned
        # As root, bubblewrap builds the sandbox and the program drops to a uid of its own; as
        # another user, a user namespace keeps the program at that user's uid.
        self.privileged = os.geteuid() == 0
        self.uid = secrets.SystemRandom().randint(*UID_RANGE) if self.privileged else os.getuid()
        self._mounts: list[tuple[Path, str]] = []
        self._files: dict[str, str] = {}
        self._fds: list[int] = []
        self._private: Path | None = None
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

    def mount(self, source: Path, inside: str) -> str:
        """Show the directory ``source`` read-only at ``inside``; the path the program uses."""
        if not self.confined:
            return str(source.resolve())
        self._mounts.append((source, inside))
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
        os.chown(tree, self.uid, self.uid)
        for entry in tree.rglob("*"):
            with contextlib.suppress(OSError):
                os.chown(entry, self.uid, self.uid, follow_symlinks=False)

    # --- running -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def running(self) -> Iterator[Jail]:
        """Prepare the sandbox (run directory ownership, port bridge) for the runs inside."""
        try:
            if self.confined:
                if self.privileged:
                    self._own(self.run_dir)
                    self.run_dir.chmod(0o755)  # bubblewrap enters it before the uid changes
                self._private = Path(tempfile.mkdtemp(prefix="itbench-jail-"))
                os.chmod(self._private, 0o711)
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

    def _data(self, name: str, text: str) -> int:
        assert self._private is not None
        path = self._private / name
        path.write_text(text, encoding="utf-8")
        return self._fd(path)

    def argv(self, command: Sequence[str]) -> list[str]:
        """The command line that runs ``command`` confined (unchanged when not confined)."""
        if not self.confined:
            return list(command)
        if self._private is None:
            raise RuntimeError("Jail.argv outside Jail.running()")
        bwrap = shutil.which("bwrap") or "bwrap"
        tree = os.O_PATH | os.O_DIRECTORY
        out: list[str] = []
        prlimit = shutil.which("prlimit")
        if prlimit is not None:  # files it writes (output included) and processes it forks
            out += [prlimit, f"--fsize={FILE_LIMIT}", f"--nproc={PROCESS_LIMIT}", "--"]
        out += [bwrap, "--die-with-parent", "--new-session", "--hostname", "runner"]
        keep = ["CAP_DAC_READ_SEARCH"] if self.read_owned else []
        if self.privileged:
            out += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
            out += ["--unshare-cgroup-try", "--cap-drop", "ALL"]
            for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", *keep):
                out += ["--cap-add", cap]
        else:
            out += ["--unshare-all", "--cap-drop", "ALL"]
            for cap in keep:
                out += ["--cap-add", cap]
        trees = _python_trees()
        # Mount points' parents, traversable by the run's uid (bubblewrap makes them 0700).
        dests = [str(t) for t in trees] + [inside for _, inside in self._mounts]
        dests += [RUN, BRIDGE, *self._files, f"{OPT}/netbridge.py", "/etc/passwd"]
        made: set[str] = {"/"}
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
        out += [
            "--perms",
            "0444",
            "--ro-bind-data",
            str(self._data("passwd", passwd)),
            "/etc/passwd",
        ]
        group = f"root:x:0:\nrunner:x:{self.uid}:\n"
        out += ["--perms", "0444", "--ro-bind-data", str(self._data("group", group)), "/etc/group"]
        out += [
            "--perms",
            "0444",
            "--ro-bind-data",
            str(self._data("hosts", "127.0.0.1 localhost\n")),
            "/etc/hosts",
        ]
        for t in trees:
            out += ["--ro-bind-fd", str(self._fd(t, tree)), str(t)]
        for hidden in _hidden_packages():  # a non-editable install lives in site-packages
            if any(hidden.is_relative_to(t) for t in trees):
                if hidden.is_dir():
                    out += ["--tmpfs", str(hidden)]
                else:
                    out += ["--ro-bind", "/dev/null", str(hidden)]
        out += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
        out += ["--perms", "1777", "--size", str(SHM_SIZE), "--tmpfs", "/dev/shm"]
        for i, (dest, content) in enumerate(sorted(self._files.items())):
            out += [
                "--perms",
                "0444",
                "--ro-bind-data",
                str(self._data(f"file-{i}", content)),
                dest,
            ]
        for source, inside in self._mounts:
            out += ["--ro-bind-fd", str(self._fd(source, tree)), inside]
        out += ["--bind-fd", str(self._fd(self.run_dir, tree)), RUN, "--chdir", RUN]
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
            out += ["--bind-fd", str(self._fd(self._private / "bridge", tree)), BRIDGE]
            ports = ",".join(str(p) for p in self.ports)
            bridge = [sys.executable, "-I", f"{OPT}/netbridge.py", f"{BRIDGE}/bridge.sock", ports]
            bridge += ["--"]
        out += ["--", *(self._drop() if self.privileged else [])]
        return out + bridge + list(command)

    def _drop(self) -> list[str]:
        """The command that makes the program the run's unprivileged uid (privileged mode)."""
        caps = "-all,+dac_read_search" if self.read_owned else "-all"
        out = [shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={self.uid}"]
        out += [f"--regid={self.uid}", "--clear-groups", f"--inh-caps={caps}"]
        if self.read_owned:
            out += ["--ambient-caps=+dac_read_search"]
        return [*out, f"--bounding-set={caps}", "--no-new-privs", "--"]

    def popen(
        self,
        command: Sequence[str],
        env: dict[str, str],
        stdout: int | IO[Any] | None = None,
        stderr: int | IO[Any] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``command`` in the sandbox with exactly ``env`` as its environment.

        The process leads a session of its own (stop it with its process group).
        """
        argv = self.argv(command)
        base: dict[str, str] = {
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": self.run,
            "TMPDIR": "/tmp" if self.confined else self.run,
            "USER": "runner",
            "LOGNAME": "runner",
        }
        kwargs: dict[str, Any] = {"pass_fds": tuple(self._fds)} if self.confined else {}
        return subprocess.Popen(  # noqa: S603 - the agent's program, confined
            argv,
            cwd="/" if self.confined else self.run_dir,
            env={**base, **env},
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
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
