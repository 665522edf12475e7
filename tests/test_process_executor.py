"""The process executor: each worker a process; same verdicts, lost workers retried, clean stops."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import (
    ITBENCH,
    CliFn,
    _env,
    check_run_after_a_lost_worker,
    processes_pointing_into,
    results,
    start_slow_toy_run,
    trials_in_flight,
)


def _verdicts(run: Path) -> dict[str, str]:
    return {r["trial_id"]: r["status"] for r in results(run)}


def _children(pid: int) -> list[int]:
    """The driver's worker processes (children of ``pid`` running the worker module;
    its environments are not among them)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if (
                int(stat.rsplit(")", 1)[1].split()[1]) == pid
                and b"itbench.process_executor" in cmdline
            ):
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_processes_give_the_verdicts_of_threads(itbench: CliFn, tmp_path: Path) -> None:
    """A real domain (FinOps's oracle) and the toy plugin's scenarios, two trials each."""
    for select in (
        ["--agent", "oracle", "--tag", "smoke", "--domain", "finops"],
        ["--agent", "toy/solver", "-s", "toy/*"],
        ["--agent", "toy/crasher", "-s", "toy/*"],
    ):
        name = select[1].replace("/", "-")
        common = ["evaluate", *select, "--trials", "2", "--workers", "2"]
        threads = itbench(*common, "--out", f"{name}-threads", timeout=600)
        assert threads.returncode in (0, 1), threads.stderr
        procs = itbench(*common, "--executor", "processes", "--out", f"{name}-procs", timeout=600)
        assert procs.returncode == threads.returncode, procs.stderr
        got = _verdicts(tmp_path / f"{name}-procs")
        assert got == _verdicts(tmp_path / f"{name}-threads") and got, procs.stderr
    assert set(_verdicts(tmp_path / "oracle-procs").values()) == {"passed"}
    assert set(_verdicts(tmp_path / "toy-crasher-procs").values()) == {"failed"}


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_worker_is_retried_and_no_trial_is_lost(
    plugin_site: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    """A worker killed, or stopped on its own (not by the driver), loses only an attempt."""
    proc, run = start_slow_toy_run(plugin_site, tmp_path, "--executor", "processes")
    killed = None
    end = time.monotonic() + 240
    while killed is None and time.monotonic() < end and proc.poll() is None:
        workers = _children(proc.pid)
        if trials_in_flight(run) and workers:
            killed = workers[0]
            os.kill(killed, sig)
        time.sleep(0.05)
    assert killed is not None, "no trial was caught in flight"
    assert proc.wait(timeout=600) in (0, 1), proc.stderr.read() if proc.stderr else ""
    check_run_after_a_lost_worker(run)


def test_sigterm_tears_down_in_flight_trials_and_resume_finishes(
    plugin_site: Path, tmp_path: Path
) -> None:
    env = _env(plugin_site, {"ITBENCH_STATE_DIR": str(tmp_path / "state")})
    proc, run = start_slow_toy_run(plugin_site, tmp_path, "--executor", "processes")
    end = time.monotonic() + 240
    while time.monotonic() < end and proc.poll() is None and not trials_in_flight(run):
        time.sleep(0.05)
    workers = _children(proc.pid)
    assert workers, "no worker process was running"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=180) == 130, proc.stderr.read() if proc.stderr else ""
    # The workers tore their trials down and ended with the run.
    end = time.monotonic() + 10
    while [p for p in workers if _alive(p)] and time.monotonic() < end:
        time.sleep(0.1)
    assert [(p, _cmdline(p)) for p in workers if _alive(p)] == []
    assert processes_pointing_into(run) == []
    done = len(results(run)) if (run / "results.jsonl").exists() else 0
    assert done < 8
    resumed = subprocess.run(
        [*ITBENCH, "evaluate", "--resume", "r"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr
    ids = [r["trial_id"] for r in results(run)]
    assert len(ids) == 8 and len(set(ids)) == 8
    assert processes_pointing_into(run) == []


IN_MEMORY = """
import sys
from pathlib import Path

from itbench import AgentSpec, hookimpl
from itbench.bench import Bench
from itbench.models import RunConfig
from itbench.runner import Runner
from itbench_toy.agents import solver


class InMemory:
    @hookimpl
    def itbench_register_agents(self):
        return [AgentSpec("mem/solver", solver, "registered in memory", domains=["toy"])]


bench = Bench(plugins=["itbench_toy.plugin"], autoload=False)
bench.host.pm.register(InMemory(), name="in-memory")
config = RunConfig(
    agent="mem/solver", scenarios=["toy/registry-*"], executor="processes", workers=2,
    plugins=["itbench_toy.plugin"],
)
outcome = Runner(bench, config, Path(sys.argv[1])).run()
print(len(outcome.results))
"""


def test_an_agent_only_in_the_driver_s_memory_is_an_error_that_says_so(
    plugin_site: Path, tmp_path: Path
) -> None:
    script = tmp_path / "in_memory.py"
    script.write_text(IN_MEMORY, encoding="utf-8")
    env = _env(plugin_site, {"ITBENCH_STATE_DIR": str(tmp_path / "state")})
    out = subprocess.run(
        [ITBENCH[0], str(script), str(tmp_path / "r")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    rows = results(tmp_path / "r")
    assert rows and {r["status"] for r in rows} == {"error"}
    assert all("not registered in the worker process" in r["error"] for r in rows), rows
    assert "Traceback" not in out.stderr
