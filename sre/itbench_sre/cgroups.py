"""Control groups of a shop's service instances: memory, CPU and task limits the kernel enforces.

Each environment gets a group below the harness's own group in the ``memory``, ``cpu`` and
``pids`` controllers, and each service instance a group inside each. An instance starts through
:mod:`itbench_sre.app.limited`, which sets its groups' limits from its configuration
(``memory_limit_mb``, ``cpu_limit`` in cores, ``max_threads``) and joins them. Over its memory
limit the kernel's OOM killer kills the instance, as a container platform's does, and the
group's ``memory.oom_control`` counts the kills; past its CPU quota the kernel throttles it, and
``cpu.stat`` counts the throttled periods; at its task limit the kernel refuses new threads, and
``pids.events`` counts the refusals. The tools show each instance's limits and counts.

Where the harness may not make groups (:func:`itbench.cgroups.cgroups_problem`), instances run
without them and each service watches its own resident memory instead.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import time
from pathlib import Path

from itbench_sre.app.limited import fields

from itbench import cgroups as host

#: The controllers an instance is limited by.
CONTROLLERS = ("memory", "cpu", "pids")
#: What one environment's instances may use together, whatever their configurations say:
#: an agent that raises every limit still cannot take the machine from other trials.
ENV_MEMORY = 4 * 2**30
ENV_THREADS = 4096
#: A memory limit at least this large is the kernel's "none".
NO_LIMIT = 2**60
#: The name of an environment's groups (checked before a recorded name is used).
GROUP_NAME = re.compile(r"itbench-shop-[0-9a-f]{12}")


class InstanceGroups:
    """The groups of one environment, one per controller.

    Args:
        dirs: The environment's group in each controller of :data:`CONTROLLERS`.
    """

    def __init__(self, dirs: dict[str, Path]) -> None:
        self.dirs = dirs

    def dir(self, controller: str) -> Path:
        """The environment's group in ``controller``."""
        return self.dirs[controller]

    def record(self) -> dict[str, str]:
        """The groups' paths, for the harness's record (:func:`recorded` reads them back)."""
        return {c: str(d) for c, d in self.dirs.items()}

    def of(self, instance: str) -> list[Path]:
        """An instance's group in each controller."""
        return [self.dir(c) / instance for c in CONTROLLERS]

    def stats(self, instance: str) -> dict[str, float | int | None] | None:
        """An instance's limits and counts (memory, CPU, threads) as its groups keep them."""
        mem, cpu, pids = self.of(instance)
        try:
            limit = int((mem / "memory.limit_in_bytes").read_text())
            usage = int((mem / "memory.usage_in_bytes").read_text())
            oom = fields((mem / "memory.oom_control").read_text())
            quota = int((cpu / "cpu.cfs_quota_us").read_text())
            period = int((cpu / "cpu.cfs_period_us").read_text())
            stat = fields((cpu / "cpu.stat").read_text())
            tasks = int((pids / "pids.current").read_text())
            most = (pids / "pids.max").read_text().strip()
            refused = fields((pids / "pids.events").read_text()).get("max", 0)
        except (OSError, ValueError):
            return None
        if limit >= NO_LIMIT:  # an instance that never started: its group is not set up yet
            return None
        return {
            "memory_limit_mb": round(limit / 2**20, 1),
            "memory_usage_mb": round(usage / 2**20, 1),
            "oom_kills": oom.get("oom_kill", 0),
            "cpu_limit": round(quota / period, 3) if quota > 0 else None,
            "cpu_periods": stat.get("nr_periods", 0),
            "cpu_throttled_periods": stat.get("nr_throttled", 0),
            "threads": tasks,
            "max_threads": int(most) if most.isdigit() else None,
            "threads_refused": refused,
        }

    def remove(self, timeout: float = 5.0) -> None:
        """Kill whatever is left in the groups and remove them. Idempotent."""
        end = time.monotonic() + timeout
        for base in self.dirs.values():
            if not base.is_dir():
                continue
            for path in [*(p for p in base.iterdir() if p.is_dir()), base]:
                _remove(path, end)


def make(instances: list[str]) -> InstanceGroups | None:
    """An environment's groups with one empty group per instance, or ``None`` where none can be."""
    if host.cgroups_problem() is not None:
        return None
    name = f"itbench-shop-{secrets.token_hex(6)}"
    try:
        groups = InstanceGroups({c: host.parent_dir(c) / name for c in CONTROLLERS})
    except OSError:
        return None
    try:
        for controller in CONTROLLERS:
            base = groups.dir(controller)
            base.mkdir(mode=0o755)
            if controller == "memory":
                # Children count in their parent's usage, which is bounded.
                (base / "memory.use_hierarchy").write_text("1")
                (base / "memory.limit_in_bytes").write_text(str(ENV_MEMORY))
                swap = base / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    swap.write_text(str(ENV_MEMORY))
            elif controller == "pids":
                (base / "pids.max").write_text(str(ENV_THREADS))
            for name in instances:
                (base / name).mkdir(mode=0o755)
    except OSError:
        groups.remove()
        return None
    return groups


def recorded(record: object) -> InstanceGroups | None:
    """The groups read back from the harness's record, if deploy could have made them.

    Each must be a group of its controller's hierarchy named as :func:`make` names them
    (:data:`GROUP_NAME`): nothing else is ever removed. The harness recovering them may run
    in another group than the one that made them, so the paths are recorded whole.
    """
    if not isinstance(record, dict) or set(record) != set(CONTROLLERS):
        return None
    dirs = {}
    for controller, value in record.items():
        path = Path(value) if isinstance(value, str) else None
        if (
            path is None
            or not path.is_absolute()
            or ".." in path.parts
            or not GROUP_NAME.fullmatch(path.name)
            or not _in_hierarchy(path, controller)
        ):
            return None
        dirs[controller] = path
    return InstanceGroups(dirs)


def _in_hierarchy(path: Path, controller: str) -> bool:
    """Whether ``path`` lies in the hierarchy a controller is mounted as (``cpu,cpuacct``)."""
    if not path.is_relative_to(host.CGROUP_ROOT):
        return False
    mount = path.relative_to(host.CGROUP_ROOT).parts[:1]
    return bool(mount) and controller in mount[0].split(",")


def _remove(path: Path, end: float) -> None:
    while True:
        try:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > end:
                return  # left for the next recovery
            time.sleep(0.02)
