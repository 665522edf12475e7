"""Whether a sandbox can still end by itself: its bubblewrap neither stopped nor traced.

A sandbox is two bubblewrap processes: the one the harness started, which waits, and its
child, the sandbox's pid 1, which reaps the program's processes. When either is stopped (a
``SIGSTOP``, a tracer's attach) the sandbox never exits, whatever the program does, and the
harness would wait out the whole time limit. So whoever waits for a sandbox watches both
(:func:`halted`) and ends it at once when one is stopped or traced, with the reason.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path

#: Seconds between two looks at the sandbox's processes.
WATCH_INTERVAL = 0.05


def _status(pid: int) -> dict[str, str]:
    """The fields of ``/proc/PID/status`` (empty when the process is gone)."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def _children(pid: int) -> list[int]:
    with contextlib.suppress(OSError, ValueError):
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="utf-8")
        return [int(p) for p in text.split()]
    return []


def halted(pid: int) -> str | None:
    """Why the sandbox whose outer bubblewrap is ``pid`` cannot end, or ``None`` while it can.

    Args:
        pid: The process the harness started (bubblewrap).
    """
    for who, process in [
        ("bubblewrap", pid),
        *(("the sandbox's pid 1", c) for c in _children(pid)),
    ]:
        status = _status(process)
        state = status.get("State", "")
        if state[:1] in ("T", "t"):
            return f"{who} (pid {process}) was stopped ({state})"
        tracer = status.get("TracerPid", "0")
        if tracer not in ("", "0"):
            return f"{who} (pid {process}) is traced by pid {tracer}"
    return None


def wait(proc: subprocess.Popen[bytes], timeout: float | None) -> str | None:
    """Wait for ``proc`` (a bubblewrap) to exit, at most ``timeout`` seconds.

    Returns:
        ``None`` when it exited, else why it cannot (see :func:`halted`).

    Raises:
        subprocess.TimeoutExpired: it still runs after ``timeout`` seconds.
    """
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            proc.wait(timeout=WATCH_INTERVAL)
            return None
        except subprocess.TimeoutExpired:
            if end is not None and time.monotonic() >= end:
                raise
        reason = halted(proc.pid)
        if reason is not None:
            return reason
