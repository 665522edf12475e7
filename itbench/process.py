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
from dataclasses import dataclass
from pathlib import Path
from typing import IO

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

    def start(
        self,
        wait_port: int | None = None,
        timeout: float = 15.0,
        stdin: IO[bytes] | None = None,
        blocked: Sequence[signal.Signals] = (),
    ) -> ManagedProcess:
        """Start the process; optionally wait until it listens on ``wait_port``.

        Args:
            wait_port: Port to wait for.
            timeout: Seconds to wait for it.
            stdin: A file the process reads as its standard input (by default none).
            blocked: Signals the process starts with blocked (kept pending until it takes
                them, instead of their default action during its start).
        """

        def preexec() -> None:
            _die_with_parent()
            if blocked:
                signal.pthread_sigmask(signal.SIG_BLOCK, set(blocked))

        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            try:
                self.proc = subprocess.Popen(
                    self.argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=stdin if stdin is not None else subprocess.DEVNULL,
                    cwd=self.cwd,
                    env=self.env,
                    preexec_fn=preexec,  # no threads touched in the child
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


def boot_id() -> str:
    """This machine's current boot (``/proc/sys/kernel/random/boot_id``), or ``""``."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


@dataclass(frozen=True)
class PidRecord:
    """A recorded process: pid, start time, and the machine (host and boot) it ran on."""

    pid: int
    ticks: int
    boot: str
    host: str

    @property
    def here(self) -> bool:
        """Whether it was recorded on this machine, since its last boot."""
        return self.boot == boot_id()

    @property
    def elsewhere(self) -> bool:
        """Whether it ran on another machine (a record of this host's earlier boot is not)."""
        return self.host != socket.gethostname()

    def running(self) -> bool:
        """Whether that very process still runs (this machine, same pid and start time)."""
        return self.here and start_ticks(self.pid) == self.ticks


def read_pid_record(path: Path) -> PidRecord | None:
    """A pid file's record; ``None`` when it is unreadable or lacks the start time or boot."""
    try:
        words = path.read_text().split()
        return PidRecord(int(words[0]), int(words[1]), words[2], words[3])
    except (OSError, ValueError, IndexError):
        return None


def record_pid(trial_dir: Path, name: str, pid: int) -> None:
    """Remember ``pid`` under ``trial_dir`` for :func:`stop_recorded`.

    The record holds the pid, when the process started, this machine's boot id and host name,
    so that it names that process and no other, ever. A process that has already exited is not recorded.
    """
    d = trial_dir / PID_DIR
    d.mkdir(parents=True, exist_ok=True)
    ticks = start_ticks(pid)
    if ticks is None:
        return
    (d / f"{name}.pid").write_text(f"{pid} {ticks} {boot_id()} {socket.gethostname()}\n")


def recorded_pid(trial_dir: Path, name: str) -> int | None:
    """The pid recorded as ``name`` under ``trial_dir``, if that very process still runs here."""
    record = read_pid_record(trial_dir / PID_DIR / f"{name}.pid")
    return record.pid if record is not None and record.running() else None


def foreign_records(trial_dir: Path) -> list[PidRecord]:
    """Pid records of ``trial_dir`` made on another machine: only it can stop their processes."""
    d = trial_dir / PID_DIR
    out = []
    for path in sorted(d.glob("*.pid")) if d.is_dir() else []:
        record = read_pid_record(path)
        if record is not None and record.elsewhere:
            out.append(record)
    return out


def forget_pid(trial_dir: Path, name: str) -> None:
    """Drop a pid record."""
    with contextlib.suppress(FileNotFoundError):
        (trial_dir / PID_DIR / f"{name}.pid").unlink()


def stop_recorded(trial_dir: Path, timeout: float = 5.0) -> list[int]:
    """Stop every process group recorded under ``trial_dir`` on this machine; returns the pids.

    Only the very process recorded (this machine and boot, same pid, same start time) is
    signalled: a record whose process is gone, whose pid now belongs to a later process, or that
    lacks its start time is dropped without a signal. Records of another machine are kept (see
    :func:`foreign_records`): their processes can only be stopped there.
    """
    stopped: list[int] = []
    d = trial_dir / PID_DIR
    if not d.is_dir():
        return stopped
    for pidfile in sorted(d.glob("*.pid")):
        record = read_pid_record(pidfile)
        if record is not None and record.elsewhere:
            continue
        if record is not None and record.running():
            stop_group(record.pid, timeout)
            stopped.append(record.pid)
        with contextlib.suppress(FileNotFoundError):
            pidfile.unlink()
    return stopped
    for pidfile in sorted(d.glob("*.pid")):
        try:
            words = pidfile.read_text().split()
            pid = int(words[0])
            ticks = int(words[1]) if len(words) > 1 else None
        except (OSError, ValueError, IndexError):
            continue
        # A recorded process that has exited may have left its pid to an unrelated one: only
        # the very process recorded (same pid, same start) is signalled.
        if ticks is not None and start_ticks(pid) == ticks:
            stop_group(pid, timeout)
            stopped.append(pid)
        with contextlib.suppress(FileNotFoundError):
            pidfile.unlink()
    return stopped
