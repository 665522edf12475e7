"""How much a sandboxed agent may use: memory, processes, CPU and its workspace.

Each bound has a default here and a command-agent option (``--option agent_memory=2G``; sizes
in bytes, or with a K, M or G suffix). The run's options record every bound (the defaults are
filled in), and each trial's result records those it applied (``bounds``) or carries the label
``unbounded`` when it could apply none: where the harness may not make control groups or mount
file systems (see :func:`bounds_problem`) the run warns once and goes on without them.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from itbench.cgroups import Limits, cgroups_problem
from itbench.options import OptionSpec
from itbench.workspace_fs import Bound, mount_fs, unmount_fs

log = logging.getLogger("itbench.bounds")

#: Bytes of memory a sandbox may use (its processes and memory-backed files, the workspace
#: included); over it the kernel kills its largest process.
MEMORY_LIMIT = 2 * 1024**3
#: Processes and threads a sandbox may have at once (a fork bomb stops there).
PIDS_LIMIT = 512
#: CPUs' worth of time a sandbox may use.
CPU_LIMIT = 2.0
#: Bytes the workspace holds during the turn (a memory-backed file system).
WORKSPACE_SIZE = 512 * 1024**2
#: Files, directories and links the workspace holds during the turn.
WORKSPACE_FILES = 65_536
#: Bytes of the workspace's files the run directory keeps after the turn (smallest first).
WORKSPACE_KEEP = 64 * 1024**2
#: Option name -> (default, whether it is a size in bytes).
OPTIONS: dict[str, tuple[int | float, bool]] = {
    "agent_memory": (MEMORY_LIMIT, True),
    "agent_pids": (PIDS_LIMIT, False),
    "agent_cpus": (CPU_LIMIT, False),
    "agent_workspace_size": (WORKSPACE_SIZE, True),
    "agent_workspace_files": (WORKSPACE_FILES, False),
    "agent_workspace_keep": (WORKSPACE_KEEP, True),
}
_SIZE = re.compile(r"(\d+)\s*([KMG]?)i?B?", re.IGNORECASE)


def _number(name: str, value: Any, size: bool) -> int | float:
    """The value of option ``name``: a positive number (a size may have a K, M or G suffix).

    Raises:
        ValueError: not one (the message names the option).
    """
    if isinstance(value, str) and size and (m := _SIZE.fullmatch(value.strip())):
        value = int(m[1]) * 1024 ** " KMG".index((m[2] or " ").upper())
    if name == "agent_cpus" and type(value) in (int, float) and 0.01 <= value <= 4096:
        return float(value)
    if name != "agent_cpus" and type(value) is int and value > 0:
        return int(value)
    kind = "a size in bytes (or with K, M, G)" if size else "a positive number"
    if name == "agent_cpus":
        kind = "a number of CPUs from 0.01 to 4096"
    raise ValueError(f"option {name}: {value!r} is not {kind}")


#: What each bound limits, for listings.
_HELP = {
    "agent_memory": "the sandbox's memory in bytes (or with K, M, G)",
    "agent_pids": "the sandbox's processes and threads at once",
    "agent_cpus": "the CPUs' worth of time the sandbox may use",
    "agent_workspace_size": "bytes the workspace holds during the turn",
    "agent_workspace_files": "files the workspace holds during the turn",
    "agent_workspace_keep": "bytes of the workspace the run directory keeps",
}


def option_specs() -> list[OptionSpec]:
    """The sandbox bounds as declared options (each value checked as the sandbox reads it)."""

    def checker(name: str, size: bool) -> Callable[[Any], int | float]:
        return lambda value: _number(name, value, size)

    return [
        OptionSpec(name, name, f"sandbox: {_HELP[name]}", check=checker(name, size), flag=False)
        for name, (_, size) in OPTIONS.items()
    ]


@dataclass(frozen=True)
class Bounds:
    """Every bound of one sandbox."""

    limits: Limits
    workspace: Bound

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> Bounds:
        """The bounds the options set (defaults for the others).

        Raises:
            ValueError: an option's value is wrong (the message names it).
        """
        v = {k: _number(k, options.get(k, d), size) for k, (d, size) in OPTIONS.items()}
        if v["agent_workspace_size"] >= v["agent_memory"]:
            # Its pages count as memory: a full workspace would be an OOM kill, not ENOSPC.
            raise ValueError(
                f"option agent_workspace_size: {v['agent_workspace_size']} bytes must be less "
                f"than agent_memory ({v['agent_memory']} bytes), which counts its pages"
            )
        return cls(
            Limits(int(v["agent_memory"]), int(v["agent_pids"]), float(v["agent_cpus"])),
            Bound(
                int(v["agent_workspace_size"]),
                int(v["agent_workspace_files"]),
                int(v["agent_workspace_keep"]),
            ),
        )

    def record(self) -> dict[str, int | float]:
        """The bounds under their option names (as results record them)."""
        limits, ws = asdict(self.limits), asdict(self.workspace)
        return {
            "agent_memory": limits["memory"],
            "agent_pids": limits["pids"],
            "agent_cpus": limits["cpus"],
            "agent_workspace_size": ws["size"],
            "agent_workspace_files": ws["files"],
            "agent_workspace_keep": ws["keep"],
        }


def defaults(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with every bound checked and the missing ones set to their defaults.

    Raises:
        ValueError: an option's value is wrong (the message names it).
    """
    return {**options, **Bounds.from_options(options).record()}


@cache
def mount_problem() -> str | None:
    """Why the harness cannot mount a workspace's file system, or ``None`` when it can."""
    if os.geteuid() != 0:
        return "the harness does not run as root"
    point = Path(tempfile.mkdtemp(prefix="itbench-mount-probe-"))
    try:
        mount_fs("itbench", point, "tmpfs", 0, "size=4k")
        unmount_fs(point)
    except OSError as exc:
        return str(exc)
    finally:
        point.rmdir()
    return None


def bounds_problem() -> str | None:
    """Why sandboxes run unbounded here (no control groups, no mounts), or ``None``."""
    problem = cgroups_problem() or mount_problem()
    return f"sandboxed agents run unbounded: {problem}" if problem else None


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(reason: str) -> None:
    """Log ``reason`` as a warning, once per process."""
    with _warned_lock:
        if reason in _warned:
            return
        _warned.add(reason)
    log.warning("%s", reason)
