"""The Ray executor on a real local Ray cluster: same verdicts as local, lost workers retried."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import (
    CliFn,
    _env,
    check_run_after_a_lost_worker,
    results,
    start_slow_toy_run,
    trials_in_flight,
)

pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'itbench[ray]')")

RAY = [str(Path(sys.executable).with_name("ray"))]
#: Ray clusters use token authentication; drivers that join one say so and hold its token
#: (Ray's own variables: a token of the test session, so no token file needs to exist).
AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def cluster(plugin_site: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local Ray cluster of two CPUs (head node only), its address; stopped afterwards.

    Started with the test plugins on its workers' path, as every node of a cluster needs the
    same itbench, plugins and catalog installed.
    """
    port = _free_port()
    tmp = tmp_path_factory.mktemp("ray")
    env = _env(plugin_site, {"RAY_TMPDIR": str(tmp), **AUTH})
    start = [*RAY, "start", "--head", "--num-cpus", "2", "--port", str(port)]
    start += ["--include-dashboard", "false", "--node-ip-address", "127.0.0.1"]
    start += ["--object-store-memory", str(128 * 2**20), "--disable-usage-stats"]
    subprocess.run(start, env=env, check=True, capture_output=True, timeout=180)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([*RAY, "stop", "--force"], env=env, capture_output=True, timeout=120)


def _verdicts(run: Path) -> dict[str, str]:
    return {r["trial_id"]: r["status"] for r in results(run)}


def test_ray_gives_the_verdicts_of_the_local_executor(
    itbench: CliFn, tmp_path: Path, cluster: str
) -> None:
    """One scenario of each domain, two trials each, deterministic agents, on both executors.

    ``noop`` fails everywhere; ``oracle`` passes the CISO and FinOps scenarios (SRE's oracle
    verdict depends on the workload meeting its SLO on a loaded machine, so it stays out).
    """
    runs = {
        "noop": ["--agent", "noop", "--tag", "smoke"],
        "oracle": ["--agent", "oracle", "--tag", "smoke", "--domain", "ciso", "--domain", "finops"],
    }
    for name, select in runs.items():
        common = ["evaluate", *select, "--trials", "2", "--workers", "2"]
        local = itbench(*common, "--out", f"{name}-local", timeout=900, env=AUTH)
        assert local.returncode == 0, local.stderr
        ray = itbench(
            *common,
            *("--executor", "ray", "--address", cluster, "--out", f"{name}-ray"),
            timeout=900,
            env=AUTH,
        )
        assert ray.returncode == 0, ray.stderr
        assert _verdicts(tmp_path / f"{name}-ray") == _verdicts(tmp_path / f"{name}-local"), [
            (r["trial_id"], r["error"])
            for run in ("ray", "local")
            for r in results(tmp_path / f"{name}-{run}")
            if r["error"]
        ]
    noop = results(tmp_path / "noop-ray")
    assert {r["domain"] for r in noop} == {"sre", "ciso", "finops"} and len(noop) == 6
    assert {r["status"] for r in noop} == {"failed"}
    oracle = results(tmp_path / "oracle-ray")
    assert len(oracle) == 4 and {r["status"] for r in oracle} == {"passed"}


def _worker_pids() -> list[int]:
    """Ray worker processes running a trial task (their title names the task's function)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"ray::_run_remote" in cmdline:
                pids.append(int(entry.name))
    return pids


def test_a_lost_worker_is_retried_and_no_trial_is_lost(
    plugin_site: Path, tmp_path: Path, cluster: str
) -> None:
    proc, run = start_slow_toy_run(
        plugin_site, tmp_path, "--executor", "ray", "--address", cluster, env=AUTH
    )
    killed = None
    end = time.monotonic() + 240
    while killed is None and time.monotonic() < end and proc.poll() is None:
        # Kill a worker in the middle of a trial: its environment's daemon is up.
        busy = trials_in_flight(run)
        workers = _worker_pids()
        if busy and workers:
            killed = workers[0]
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.05)
    assert killed is not None, "no trial was caught in flight"
    assert proc.wait(timeout=600) in (0, 1), proc.stderr.read() if proc.stderr else ""
    check_run_after_a_lost_worker(run)
