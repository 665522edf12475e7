"""Stopping what a trial started, also programs that left its process group."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from itbench.process import stop_marked

SLEEP = "import sys, time; time.sleep(60)"


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


def test_stop_marked_stops_processes_in_other_sessions_that_point_into_a_root(
    tmp_path: Path,
) -> None:
    root, sibling = tmp_path / "run-1", tmp_path / "run-10"
    root.mkdir()
    sibling.mkdir()
    by_arg = subprocess.Popen(
        [sys.executable, "-c", SLEEP, str(root / "inventory.yml")], start_new_session=True
    )
    by_cwd = subprocess.Popen([sys.executable, "-c", SLEEP], cwd=root, start_new_session=True)
    other = subprocess.Popen(
        [sys.executable, "-c", SLEEP, str(sibling / "inventory.yml")], start_new_session=True
    )
    try:
        time.sleep(0.3)
        stopped = stop_marked([root])
        assert set(stopped) == {by_arg.pid, by_cwd.pid}
        for proc in (by_arg, by_cwd):
            proc.wait(timeout=10)
        assert _alive(other)
    finally:
        for proc in (by_arg, by_cwd, other):
            proc.kill()
            proc.wait()
