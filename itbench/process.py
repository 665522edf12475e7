"""Helpers for environments that start local server processes.

Every process is started in its own session (so its whole group can be signalled), bound to
127.0.0.1 by its caller, and recorded in a pid file under the trial directory, so that
``Domain.recover`` can stop what a killed harness left behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from itbench.errors import InfrastructureError

PID_DIR = "pids"
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    os.setsid()
    # Linux only: the child gets SIGTERM when the thread that started it dies (SIGKILL of the
    # harness included). Harmless where prctl is missing.
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def wait_for_port(
    port: int, timeout: float, host: str = "127.0.0.1", proc: subprocess.Popen[bytes] | None = None
) -> None:
    """Wait until ``host:port`` accepts connections.

    Raises:
        InfrastructureError: the port did not open in time, or ``proc`` exited first.
    """
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if port_open(port, host):
            return
        if proc is not None and proc.poll() is not None:
            raise InfrastructureError(
                f"process exited with {proc.returncode} before port {port} opened"
            )
        time.sleep(0.02)
    raise InfrastructureError(f"port {host}:{port} did not open within {timeout:.1f}s")


class ManagedProcess:
    """A server process owned by one trial.

    Args:
        name: Short name, used for the log and pid files.
        argv: Command line.
        trial_dir: The trial's artifact directory (logs and pid files go there).
        env: Extra environment variables.
        cwd: Working directory.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        trial_dir: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.trial_dir = trial_dir
        self.env = {**os.environ, **(env or {})}
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = trial_dir / "logs" / f"{name}.log"

    def start(self, wait_port: int | None = None, timeout: float = 15.0) -> ManagedProcess:
        """Start the process; optionally wait until it listens on ``wait_port``."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            try:
                self.proc = subprocess.Popen(
                    self.argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=self.cwd,
                    env=self.env,
                    preexec_fn=_die_with_parent,  # noqa: PLW1509 - no threads touched in the child
                )
            except OSError as exc:
                raise InfrastructureError(f"cannot start {self.name}: {exc}") from exc
        record_pid(self.trial_dir, self.name, self.proc.pid)
        if wait_port is not None:
            try:
                wait_for_port(wait_port, timeout, proc=self.proc)
            except InfrastructureError as exc:
                self.stop()
                tail = self.log_tail()
                raise InfrastructureError(f"{self.name}: {exc}; log: {tail}") from None
        return self

    def log_tail(self, lines: int = 5) -> str:
        """Last lines of the process log, for error messages."""
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def alive(self) -> bool:
        """Whether the process is running."""
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the process group: SIGTERM, then SIGKILL after ``timeout``. Idempotent."""
        if self.proc is None:
            return
        stop_group(self.proc.pid, timeout)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=1)
        forget_pid(self.trial_dir, self.name)


def stop_group(pid: int, timeout: float = 5.0) -> None:
    """Send SIGTERM to the process group of ``pid``, then SIGKILL if it lingers."""
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return
    stop_pgid(pgid, timeout, leader=pid)


def stop_pgid(pgid: int, timeout: float = 5.0, leader: int | None = None) -> None:
    """Stop process group ``pgid`` (also after its leader exited): SIGTERM, then SIGKILL."""
    pid = leader if leader is not None else pgid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        # Reap our own child if it is one, so it does not linger as a zombie.
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _points_into(piece: str, roots: Sequence[str]) -> bool:
    return any(piece == r or f"{r}/" in piece for r in roots)


def stop_marked(roots: Sequence[Path], timeout: float = 3.0) -> list[int]:
    """Stop every process that points into one of ``roots``; returns the pids stopped.

    A process points into a root when an argument of its command line or its working
    directory is the root or a path below it. This finds what a process group cannot: programs
    that a tool started in sessions of their own (ansible-runner's ``ansible-playbook``, for
    one). The calling process is never stopped; other members of its group are killed alone.
    """
    marks = [str(r).rstrip("/") for r in roots]
    me, my_group = os.getpid(), os.getpgid(0)
    stopped: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        try:
            pieces = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            with contextlib.suppress(OSError):
                pieces.append(os.readlink(entry / "cwd"))
            if not any(_points_into(p, marks) for p in pieces if p):
                continue
            if os.getpgid(pid) != my_group:
                stop_group(pid, timeout)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue
        stopped.append(pid)
    return stopped


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``None``: no such process).

    With the pid it identifies a process for good: a pid is reused, a (pid, start) pair never.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields follow the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def record_pid(trial_dir: Path, name: str, pid: int) -> None:
    """Remember ``pid`` (and when it started) under ``trial_dir`` for :func:`stop_recorded`."""
    d = trial_dir / PID_DIR
    d.mkdir(parents=True, exist_ok=True)
    ticks = start_ticks(pid)
    (d / f"{name}.pid").write_text(f"{pid} {ticks}" if ticks is not None else str(pid))


def recorded_pid(trial_dir: Path, name: str) -> int | None:
    """The pid recorded as ``name`` under ``trial_dir``, if that very process still runs."""
    try:
        words = (trial_dir / PID_DIR / f"{name}.pid").read_text().split()
        pid = int(words[0])
        ticks = int(words[1]) if len(words) > 1 else None
    except (OSError, ValueError, IndexError):
        return None
    current = start_ticks(pid)
    if current is None or (ticks is not None and current != ticks):
        return None
    return pid


def forget_pid(trial_dir: Path, name: str) -> None:
    """Drop a pid record."""
    with contextlib.suppress(FileNotFoundError):
        (trial_dir / PID_DIR / f"{name}.pid").unlink()


def stop_recorded(trial_dir: Path, timeout: float = 5.0) -> list[int]:
    """Stop every process group recorded under ``trial_dir``; returns the pids signalled.

    A record whose process is gone, or whose pid now belongs to a process started later, is
    dropped without a signal.
    """
    stopped: list[int] = []
    d = trial_dir / PID_DIR
    if not d.is_dir():
        return stopped
    for pidfile in sorted(d.glob("*.pid")):
        try:
            words = pidfile.read_text().split()
            pid = int(words[0])
            ticks = int(words[1]) if len(words) > 1 else None
        except (OSError, ValueError, IndexError):
            continue
        # A recorded process that has exited may have left its pid to an unrelated one.
        if ticks is None or start_ticks(pid) == ticks:
            stop_group(pid, timeout)
            stopped.append(pid)
        with contextlib.suppress(FileNotFoundError):
            pidfile.unlink()
    return stopped
