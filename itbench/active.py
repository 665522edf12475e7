"""Runs in progress: the lock that gives a run directory to one process, and their registry.

- A running ``itbench evaluate`` holds ``run.lock`` in its run directory (``flock``, released by
  the kernel when the process dies, however it dies), so two processes never run, resume or
  clean up one run directory at once.
- It also leaves a record in the user's state directory (``$ITBENCH_STATE_DIR``, else
  ``$XDG_STATE_HOME/itbench``, else ``~/.local/state/itbench``; mode 0700) naming its run
  directory; the record goes when the run ends. A record whose run directory's lock is free
  belongs to a run that was killed: ``itbench cleanup`` finds what it left from there.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from itbench.errors import RunDirError

LOCK = "run.lock"
RECORDS = "active-runs"


def state_dir() -> Path:
    """The user's itbench state directory (made, mode 0700)."""
    base = os.environ.get("ITBENCH_STATE_DIR")
    if base:
        path = Path(base)
    else:
        xdg = os.environ.get("XDG_STATE_HOME")
        path = (Path(xdg) if xdg else Path.home() / ".local" / "state") / "itbench"
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


class RunLock:
    """The exclusive hold of a run directory by this process."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK
        self._fh: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock, or fail at once.

        Raises:
            RunDirError: another process holds the run directory.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fh = os.fdopen(fd, "r+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = fh.read().strip() or "?"
            fh.close()
            raise RunDirError(
                f"{self.path.parent}: in use by another itbench process (pid {holder})"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        """Give the lock back. Idempotent."""
        if self._fh is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fh, fcntl.LOCK_UN)
                self._fh.close()
            self._fh = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass
class Record:
    """A run that was in progress: its record file and run directory."""

    path: Path
    run_dir: Path
    run_id: str


def register(run_dir: Path, run_id: str) -> Path:
    """Record a run in progress; returns the record to :func:`unregister` when it ends."""
    records = state_dir() / RECORDS
    records.mkdir(mode=0o700, exist_ok=True)
    path = records / f"{run_id}.json"
    data = {"run_dir": str(run_dir.resolve()), "run_id": run_id, "pid": os.getpid()}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.chmod(tmp, 0o600)
    tmp.replace(path)
    return path


def unregister(record: Path) -> None:
    """Drop a run's record."""
    with contextlib.suppress(FileNotFoundError):
        record.unlink()


def records() -> list[Record]:
    """Every recorded run, well-formed records only."""
    root = state_dir() / RECORDS
    out = []
    for path in sorted(root.glob("*.json")) if root.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            out.append(Record(path, Path(str(data["run_dir"])), str(data["run_id"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out
