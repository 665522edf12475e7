"""Control groups of a shop's service instances: memory and CPU limits the kernel enforces.

Each environment gets a group below the harness's own group in the ``memory`` and ``cpu``
controllers, and each service instance a group inside each. An instance starts through
:mod:`itbench_sre.app.limited`, which sets its groups' limits from its configuration
(``memory_limit_mb``, ``cpu_limit`` in cores) and joins them. Over its memory limit the
kernel's OOM killer kills the instance, as a container platform's does, and the group's
``memory.oom_control`` counts the kills; past its CPU quota the kernel throttles it, and
``cpu.stat`` counts the throttled periods. The tools show each instance's limits and counts.

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

from itbench.cgroups import cgroups_problem, parent_dir

#: The controllers an instance is limited by.
CONTROLLERS = ("memory", "cpu")
#: The name of an environment's groups (checked before a recorded name is used).
GROUP_NAME = re.compile(r"itbench-shop-[0-9a-f]{12}")


class InstanceGroups:
    """The groups of one environment, named alike in each controller.

    Args:
        name: The environment's group name (:data:`GROUP_NAME`).
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def dir(self, controller: str) -> Path:
        """The environment's group in ``controller``."""
        return parent_dir(controller) / self.name

    def of(self, instance: str) -> list[Path]:
        """An instance's group in each controller."""
        return [self.dir(c) / instance for c in CONTROLLERS]

    def stats(self, instance: str) -> dict[str, float | int | None] | None:
        """An instance's limits and counts: memory (MiB), OOM kills, CPU quota, throttling."""
        mem, cpu = self.of(instance)
        try:
            limit = int((mem / "memory.limit_in_bytes").read_text())
            usage = int((mem / "memory.usage_in_bytes").read_text())
            oom = _fields((mem / "memory.oom_control").read_text())
            quota = int((cpu / "cpu.cfs_quota_us").read_text())
            period = int((cpu / "cpu.cfs_period_us").read_text())
            stat = _fields((cpu / "cpu.stat").read_text())
        except (OSError, ValueError):
            return None
        return {
            "memory_limit_mb": round(limit / 2**20, 1),
            "memory_usage_mb": round(usage / 2**20, 1),
            "oom_kills": oom.get("oom_kill", 0),
            "cpu_limit": round(quota / period, 3) if quota > 0 else None,
            "cpu_periods": stat.get("nr_periods", 0),
            "cpu_throttled_periods": stat.get("nr_throttled", 0),
        }

    def remove(self, timeout: float = 5.0) -> None:
        """Kill whatever is left in the groups and remove them. Idempotent."""
        end = time.monotonic() + timeout
        for controller in CONTROLLERS:
            try:
                base = self.dir(controller)
            except OSError:
                continue
            if not base.is_dir():
                continue
            for path in [*(p for p in base.iterdir() if p.is_dir()), base]:
                _remove(path, end)


def make(instances: list[str]) -> InstanceGroups | None:
    """An environment's groups with one empty group per instance, or ``None`` where none can be."""
    if cgroups_problem() is not None:
        return None
    groups = InstanceGroups(f"itbench-shop-{secrets.token_hex(6)}")
    try:
        for controller in CONTROLLERS:
            base = groups.dir(controller)
            base.mkdir(mode=0o755)
            if controller == "memory":
                with contextlib.suppress(OSError):  # children count in their parent's usage
                    (base / "memory.use_hierarchy").write_text("1")
            for name in instances:
                (base / name).mkdir(mode=0o755)
    except OSError:
        groups.remove()
        return None
    return groups


def recorded(name: object) -> InstanceGroups | None:
    """The groups of a name read back from the harness's record, if deploy could give it.

    Only a name of :data:`GROUP_NAME`'s shape is accepted: nothing else is ever removed.
    """
    if not isinstance(name, str) or not GROUP_NAME.fullmatch(name):
        return None
    return InstanceGroups(name)


def _fields(text: str) -> dict[str, int]:
    words = text.split()
    return {k: int(v) for k, v in zip(words[::2], words[1::2], strict=False) if v.isdigit()}


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
