"""Start a service instance inside its control groups, limited as its configuration says.

``python -S limited.py CONFIG GROUP... -- COMMAND...`` sets each group's limit from the
configuration while the group holds no process (a ``memory`` group: ``memory_limit_mb``; a
``cpu`` group: a CFS quota of ``cpu_limit`` cores; a ``pids`` group: ``max_threads`` processes and
threads), moves itself into the groups and then
becomes ``COMMAND``: whatever the instance does from its first instruction on counts. Over its
memory limit the kernel's OOM killer kills it, past its quota the kernel throttles it and at its
task limit a new thread is refused, as a container platform's would. The groups outlive the
instance, so their counters (OOM kills, throttled periods, refused tasks) add up over every
start.

Standard library only, and run without ``site``: it must start in a few milliseconds.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

#: What an instance whose configuration sets no limit may use.
DEFAULT_MB = 1024
DEFAULT_CORES = 2.0
#: The most a configuration may ask for (more is taken as this much).
DEFAULT_THREADS = 4096
MAX_MB = 2048
MAX_CORES = 64.0
MAX_THREADS = 4096
#: Length of one CFS period, in microseconds: a second, the longest the kernel allows, so that
#: the smallest quota it takes (a millisecond) is a thousandth of a core.
PERIOD_US = 1_000_000


def _number(config: dict[str, Any], key: str, default: float) -> float:
    value = config.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        return default
    return float(value)


def limits(path: Path) -> tuple[int, int, int]:
    """A configuration's memory limit (bytes), CPU quota (µs a period) and thread limit."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    if not isinstance(config, dict):
        config = {}
    memory = int(min(MAX_MB, _number(config, "memory_limit_mb", DEFAULT_MB)) * 2**20)
    cores = min(MAX_CORES, _number(config, "cpu_limit", DEFAULT_CORES))
    quota = max(1000, int(cores * PERIOD_US))
    threads = max(1, int(min(MAX_THREADS, _number(config, "max_threads", DEFAULT_THREADS))))
    return memory, quota, threads


def fields(text: str) -> dict[str, int]:
    """The counters of a control group's ``name value`` file (``cpu.stat``, ``pids.events``)."""
    words = text.split()
    return {k: int(v) for k, v in zip(words[::2], words[1::2], strict=False) if v.isdigit()}


def _write(path: Path, value: int) -> None:
    path.write_text(str(value))


def _limit_memory(group: Path, limit: int) -> None:
    swap = group / "memory.memsw.limit_in_bytes"
    # The memory-and-swap limit may never be below the memory limit: order the writes so.
    names = ["memory.limit_in_bytes", swap.name]
    if limit > int((group / names[0]).read_text()):
        names.reverse()
    for name in names:
        if name == swap.name and not swap.exists():
            continue
        try:
            _write(group / name, limit)
        except OSError:
            # Pages an earlier start left charged that the kernel could not reclaim: the group
            # holds no process now, so they may be dropped.
            _write(group / "memory.force_empty", 0)
            _write(group / name, limit)


def main(argv: list[str]) -> None:
    """Limit, join, exec (see the module docstring)."""
    if "--" not in argv:
        raise SystemExit("usage: limited.py CONFIG GROUP... -- COMMAND...")
    cut = argv.index("--")
    (config, *groups), command = argv[:cut], argv[cut + 1 :]
    if not command:
        raise SystemExit("usage: limited.py CONFIG GROUP... -- COMMAND...")
    memory, quota, threads = limits(Path(config))
    for group in map(Path, groups):
        if (group / "memory.limit_in_bytes").exists():
            _limit_memory(group, memory)
            # The service reads its own figures from here (and leaves the limit to the kernel).
            os.environ["SHOP_MEMORY_GROUP"] = str(group)
        elif (group / "cpu.cfs_quota_us").exists():
            _write(group / "cpu.cfs_period_us", PERIOD_US)
            _write(group / "cpu.cfs_quota_us", quota)
            os.environ["SHOP_CPU_GROUP"] = str(group)
        elif (group / "pids.max").exists():
            _write(group / "pids.max", threads)
        _write(group / "cgroup.procs", os.getpid())
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
