"""Start a service instance inside its memory control group, limited as its configuration says.

``python -S limits.py GROUP CONFIG -- COMMAND...`` sets the group's limit to the configuration's
``memory_limit_mb`` while the group is empty, moves itself into the group and then becomes
``COMMAND``: everything the instance allocates from its first instruction on counts, and over the
limit the kernel's OOM killer kills it, as a container platform's would. The group outlives the
instance, so its ``memory.oom_control`` counts the kills of every start.

Standard library only, and run without ``site``: it must start in a few milliseconds.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

#: What an instance whose configuration sets no limit may use.
DEFAULT_MB = 1024


def limit_bytes(config: Path) -> int:
    """The memory limit a configuration sets, in bytes (the default when it sets none)."""
    try:
        value = json.loads(config.read_text(encoding="utf-8")).get("memory_limit_mb")
    except (OSError, ValueError, AttributeError):
        value = None
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        value = DEFAULT_MB
    return int(value * 2**20)


def _set_limit(group: Path, limit: int) -> None:
    swap = group / "memory.memsw.limit_in_bytes"
    # The memory-and-swap limit may never be below the memory limit: order the writes so.
    current = int((group / "memory.limit_in_bytes").read_text())
    names = ["memory.limit_in_bytes", swap.name]
    if limit > current:
        names.reverse()
    for name in names:
        if name == swap.name and not swap.exists():
            continue
        try:
            (group / name).write_text(str(limit))
        except OSError:
            # Pages an earlier start left charged and the kernel could not reclaim: the group
            # holds no process now, so they may be dropped.
            (group / "memory.force_empty").write_text("0")
            (group / name).write_text(str(limit))


def main(argv: list[str]) -> None:
    """Limit, join, exec (see the module docstring)."""
    group, config, sep, *command = argv
    if sep != "--" or not command:
        raise SystemExit("usage: limits.py GROUP CONFIG -- COMMAND...")
    path = Path(group)
    _set_limit(path, limit_bytes(Path(config)))
    (path / "cgroup.procs").write_text(str(os.getpid()))
    # The service reads its group's figures (and leaves the limit to the kernel).
    os.environ["SHOP_MEMORY_GROUP"] = str(path)
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
