"""Memory control groups of a shop's service instances: limits the kernel enforces.

Each environment gets a group below the harness's own memory group, and each service instance
a group inside it. An instance starts through :mod:`itbench_sre.app.limits`, which sets its
group's limit to the configuration's ``memory_limit_mb`` and joins it: over the limit the
kernel's OOM killer kills the instance, as a container platform's does, and the group's
``memory.oom_control`` counts the kills. The tools show each instance's limit, usage and kills.

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

#: The name of an environment's group (checked before a recorded path is removed).
GROUP_NAME = re.compile(r"itbench-shop-[0-9a-f]{12}")


def make(instances: list[str]) -> Path | None:
    """An environment's group with one empty group per instance, or ``None`` where none can be."""
    if cgroups_problem() is not None:
        return None
    try:
        base = parent_dir("memory")
    except OSError:
        return None
    group = base / f"itbench-shop-{secrets.token_hex(6)}"
    group.mkdir(mode=0o755)
    with contextlib.suppress(OSError):  # children count in their parent's usage
        (group / "memory.use_hierarchy").write_text("1")
    for name in instances:
        (group / name).mkdir(mode=0o755)
    return group


def recorded(path: str | None) -> Path | None:
    """A group path read back from the harness's record, if it has the shape deploy gives.

    That is a direct child of the harness's memory group named as :func:`make` names it.
    """
    if not path:
        return None
    try:
        base = parent_dir("memory")
    except OSError:
        return None
    p = Path(path)
    return p if p.parent == base and GROUP_NAME.fullmatch(p.name) else None


def stats(group: Path | None, instance: str) -> dict[str, float | int] | None:
    """An instance's memory limit and usage (MiB) and its OOM kills so far."""
    if group is None:
        return None
    path = group / instance
    try:
        limit = int((path / "memory.limit_in_bytes").read_text())
        usage = int((path / "memory.usage_in_bytes").read_text())
        control = (path / "memory.oom_control").read_text().split()
    except (OSError, ValueError):
        return None
    fields = dict(zip(control[::2], control[1::2], strict=False))
    return {
        "limit_mb": round(limit / 2**20, 1),
        "usage_mb": round(usage / 2**20, 1),
        "oom_kills": int(fields.get("oom_kill", 0)),
    }


def remove(group: Path | None, timeout: float = 5.0) -> None:
    """Kill whatever is left in the groups and remove them. Idempotent."""
    if group is None or not group.is_dir():
        return
    children = [p for p in group.iterdir() if p.is_dir()]
    end = time.monotonic() + timeout
    for path in [*children, group]:
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
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > end:
                    break  # left for the next recovery
                time.sleep(0.02)
