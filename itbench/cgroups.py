"""Control groups (v1: ``memory``, ``pids``, ``cpu``) that bound one sandbox's processes.

Each sandbox gets a group of its own in each controller, made below the harness's own group
(so whatever bounds the harness bounds the sandbox too), with the limits of :class:`Limits`.
The sandbox's first process joins them between fork and exec, as root, before it drops its
privileges; whatever it starts stays in them. Over the memory limit the kernel's OOM killer
kills a process of the group (the largest), never the harness; past the pids limit ``fork``
fails; the CPU limit is a CFS quota. Memory-backed files the sandbox writes (its workspace,
``/tmp``, ``/dev/shm``) are charged to its memory group. After the run every process left in
the groups is killed and the groups are removed; the trial directory notes them meanwhile, so
that the recovery of a killed harness's trials removes them too.

Where the controllers are not mounted as v1 hierarchies, or the harness may not make groups
(not root, read-only), :func:`cgroups_problem` says why and sandboxes run without them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

#: The controllers a sandbox is bounded by.
CONTROLLERS = ("memory", "pids", "cpu")
#: Where cgroup v1 hierarchies are mounted.
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: Length of one CFS period, in microseconds.
CPU_PERIOD = 100_000
#: The trial directory's note of its sandbox's groups (removed with them).
RECORD_FILE = "cgroups.txt"


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use.

    Attributes:
        memory: Bytes of memory (its processes and its memory-backed files together).
        pids: Processes and threads at once.
        cpus: CPUs' worth of time per period (1.5: one and a half CPUs).
    """

    memory: int
    pids: int
    cpus: float


@cache
def cgroups_problem() -> str | None:
    """Why sandboxes cannot get control groups here, or ``None`` when they can."""
    if os.geteuid() != 0:
        return "the harness does not run as root"
    for name in CONTROLLERS:
        try:
            base = parent_dir(name)
        except OSError as exc:
            return str(exc)
        if not os.access(base, os.W_OK):
            return f"{base} is not writable"
    return None


def parent_dir(controller: str) -> Path:
    """The harness's own group of ``controller``, where sandboxes' groups are made.

    Raises:
        OSError: the controller is not mounted as a v1 hierarchy, or the group is not there.
    """
    for line in Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            base = CGROUP_ROOT / names / path.lstrip("/")
            if not (CGROUP_ROOT / names / "cgroup.procs").is_file() or not base.is_dir():
                raise OSError(f"the cgroup v1 controller {controller} is not mounted at {base}")
            return base
    raise OSError(f"no cgroup v1 controller {controller} (cgroup v2 alone is not supported)")


class Cgroups:
    """The control groups of one sandbox.

    Args:
        limits: What the sandbox may use.
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.name = f"itbench-{secrets.token_hex(6)}"
        self.dirs: list[Path] = []
        #: ``cgroup.procs`` of each group, opened before the fork (see :meth:`join`).
        self._procs: list[int] = []

    def create(self) -> None:
        """Make the groups and set their limits.

        Raises:
            OSError: a group cannot be made or limited (the groups made are removed).
        """
        try:
            for controller in CONTROLLERS:
                path = parent_dir(controller) / self.name
                path.mkdir(mode=0o755)
                self.dirs.append(path)
                if controller == "memory":
                    _write(path / "memory.limit_in_bytes", self.limits.memory)
                    swap = path / "memory.memsw.limit_in_bytes"
                    if swap.exists():  # no swap beyond the limit either
                        _write(swap, self.limits.memory)
                elif controller == "pids":
                    _write(path / "pids.max", self.limits.pids)
                else:
                    _write(path / "cpu.cfs_period_us", CPU_PERIOD)
                    _write(path / "cpu.cfs_quota_us", max(1000, int(self.limits.cpus * CPU_PERIOD)))
                self._procs.append(os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
        except OSError:
            self.remove()
            raise

    def join(self) -> None:
        """Move the calling process into every group (between fork and exec: system calls only).

        Raises:
            OSError: the kernel refused the move.
        """
        pid = str(os.getpid()).encode()
        for fd in self._procs:
            os.write(fd, pid)

    def oom_kills(self) -> int:
        """How many processes the OOM killer killed in the memory group."""
        for path in self.dirs:
            control = path / "memory.oom_control"
            with contextlib.suppress(OSError, ValueError):
                for line in control.read_text(encoding="utf-8").splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        return 0

    def pids_refused(self) -> int:
        """How many forks the pids limit refused."""
        for path in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                return int((path / "pids.events").read_text(encoding="utf-8").split()[-1])
        return 0

    def members(self) -> set[int]:
        """The processes in any of the groups."""
        out: set[int] = set()
        for path in self.dirs:
            with contextlib.suppress(OSError):
                out.update(int(p) for p in (path / "cgroup.procs").read_text().split())
        return out

    def remove(self, timeout: float = 5.0) -> None:
        """Kill every process left in the groups and remove them. Idempotent.

        Raises:
            OSError: a group still holds processes after ``timeout`` seconds.
        """
        for fd in self._procs:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._procs.clear()
        end = time.monotonic() + timeout
        while self.members():
            for pid in self.members():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > end:
                raise OSError(f"processes {sorted(self.members())} outlived their sandbox")
            time.sleep(0.01)
        for path in list(self.dirs):
            for _ in range(100):  # a group is busy for a moment after its last process left
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
            else:
                path.rmdir()
            self.dirs.remove(path)


def record(groups: Cgroups, trial_dir: Path) -> None:
    """Note the groups in the trial directory, for :func:`remove_recorded` after a crash."""
    lines = "".join(f"{d}\n" for d in groups.dirs)
    (trial_dir / RECORD_FILE).write_text(lines, encoding="utf-8")


def remove_recorded(trial_dir: Path) -> None:
    """Remove the groups a killed harness left (as :func:`record` noted them), and the note."""
    note = trial_dir / RECORD_FILE
    try:
        lines = note.read_text(encoding="utf-8").splitlines()
    except OSError:
        return
    groups = Cgroups(Limits(0, 0, 0))
    for line in lines:
        path = Path(line)
        if path.is_relative_to(CGROUP_ROOT) and path.name.startswith("itbench-"):
            groups.dirs.append(path)
    with contextlib.suppress(OSError):
        groups.remove()
    note.unlink()


def _write(path: Path, value: int) -> None:
    path.write_text(str(value), encoding="utf-8")
