"""Crash safety: a run killed at any point resumes to every trial once, nothing left behind."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ITBENCH, CliFn, _env, processes_pointing_into, results

from itbench.process import port_open

#: Slow phases, so kills land in each: setup, the agent's turn, scoring, teardown.
SLOW = [
    "--option",
    "setup_delay=0.4",
    "--option",
    "eval_delay=0.4",
    "--option",
    "teardown_delay=0.4",
    "--option",
    "harness_server=detached",
]
RUN = ["evaluate", "--agent", "toy/slow", "-s", "toy/[hr]*", "--trials", "2", *SLOW, "--out", "r"]
TRIALS = 8


def _trial_dirs(run: Path) -> set[str]:
    trials = run / "trials"
    return {d.name for d in trials.iterdir()} if trials.is_dir() else set()


def _phase(run: Path) -> str:
    """Which phase the newest unfinished trial of ``run`` is in, from its artifacts."""
    trials = run / "trials"
    if not trials.is_dir():
        return "start"
    done = {r["handle"] for r in results(run)} if (run / "results.jsonl").exists() else set()
    open_dirs = [d for d in trials.iterdir() if d.name not in done]
    if not open_dirs:
        return "between trials"
    newest = max(open_dirs, key=lambda d: d.stat().st_mtime)
    names = {p.name for p in newest.iterdir()}
    if "teardown.count" in names:
        return "recording"
    if "evaluation.json" in names:
        return "teardown"
    if "submission.json" in names:
        return "scoring"
    if "task.json" in names:
        return "agent"
    return "setup"


def test_a_run_killed_at_random_points_resumes_to_every_trial_once(
    plugin_site: Path, tmp_path: Path
) -> None:
    env = _env(plugin_site, {"ITBENCH_STATE_DIR": str(tmp_path / "state")})
    run = tmp_path / "r"
    rng = random.Random(16)
    phases = []
    kills = 0
    first = True
    while kills < 10:
        args = RUN if first else ["evaluate", "--resume", "r"]
        proc = subprocess.Popen(
            [*ITBENCH, *args],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        # Wait until this process starts a trial of its own (the CLI loads plugins and a
        # resumed run first cleans up after the last kill), then kill it somewhere in it.
        seen = _trial_dirs(run)
        end = time.monotonic() + 60
        while not (_trial_dirs(run) - seen) and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 5.0))
        if proc.poll() is not None:
            break  # the run finished before this kill
        phases.append(_phase(run))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        kills += 1
        first = False
    assert kills >= 10, f"only {kills} kills landed before the run finished"
    # Kills landed in the phases of a trial, not only between trials.
    assert len(set(phases) & {"setup", "agent", "scoring", "teardown", "recording"}) >= 3, phases
    final = subprocess.run(
        [*ITBENCH, "evaluate", "--resume", "r"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert final.returncode == 0, final.stderr
    rows = results(run)
    ids = [r["trial_id"] for r in rows]
    assert len(ids) == TRIALS and len(set(ids)) == TRIALS  # every trial exactly once
    assert {r["status"] for r in rows} == {"passed"}
    # No environment of a killed attempt is left, and every trial directory has its result.
    assert processes_pointing_into(run) == []
    assert {d.name for d in (run / "trials").iterdir()} == {r["handle"] for r in rows}
    assert not list((tmp_path / "state").glob("active-runs/*.json"))


def _start_and_kill_in_agent_turn(plugin_site: Path, tmp_path: Path, env: dict[str, str]) -> Path:
    """Start a run whose environment has a daemon, kill it during the agent's turn."""
    proc = subprocess.Popen(
        [*ITBENCH, *RUN],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    run = tmp_path / "r"
    end = time.monotonic() + 60
    while time.monotonic() < end and _phase(run) != "agent":
        time.sleep(0.02)
    assert _phase(run) == "agent"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    return run


def _daemon(run: Path) -> tuple[int, int]:
    """The port and pid of the killed trial's daemon (from its task and pid record)."""
    [trial] = [d for d in (run / "trials").iterdir() if (d / "task.json").exists()]
    url = json.loads((trial / "task.json").read_text())["context"]["status_url"]
    pid = int((trial / "pids" / "status.pid").read_text().split()[0])
    return int(url.split(":")[2].split("/")[0]), pid


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("how", ["run-dir", "records"])
def test_cleanup_stops_what_a_killed_run_left(
    itbench: CliFn, plugin_site: Path, tmp_path: Path, how: str
) -> None:
    env_extra = {"ITBENCH_STATE_DIR": str(tmp_path / "state")}
    run = _start_and_kill_in_agent_turn(plugin_site, tmp_path, _env(plugin_site, env_extra))
    port, pid = _daemon(run)
    # The daemon outlived its harness and still serves.
    assert port_open(port) and _alive(pid) and pid in processes_pointing_into(run)
    args = ["cleanup", "r"] if how == "run-dir" else ["cleanup"]
    res = itbench(*args, env=env_extra)
    assert res.returncode == 0, res.stderr
    assert "1 unfinished trial(s) cleaned up" in res.stdout
    assert not _alive(pid) and processes_pointing_into(run) == []
    assert list((run / "trials").iterdir()) == []
    assert not list((tmp_path / "state").glob("active-runs/*.json"))
    # The run is resumable afterwards, from where it was.
    assert itbench("evaluate", "--resume", "r", env=env_extra).returncode == 0
    assert len(results(run)) == TRIALS


def test_a_run_directory_belongs_to_one_process_at_a_time(
    itbench: CliFn, plugin_site: Path, tmp_path: Path
) -> None:
    env = _env(plugin_site, {"ITBENCH_STATE_DIR": str(tmp_path / "state")})
    proc = subprocess.Popen(
        [*ITBENCH, *RUN],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and _phase(tmp_path / "r") in ("start",):
            time.sleep(0.05)
        for args in (["evaluate", "--resume", "r"], ["cleanup", "r"]):
            res = itbench(*args, env={"ITBENCH_STATE_DIR": str(tmp_path / "state")})
            assert res.returncode != 0 and "in use by another itbench process" in res.stderr
        # Cleanup without a directory leaves a run in progress alone.
        res = itbench("cleanup", "--json", env={"ITBENCH_STATE_DIR": str(tmp_path / "state")})
        assert "in use by another itbench process" in res.stdout
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)


def test_two_runs_at_once_never_collide(plugin_site: Path, tmp_path: Path) -> None:
    """Two evaluate processes, two workers each, every trial with a server on its port block."""
    env = _env(plugin_site, {"ITBENCH_STATE_DIR": str(tmp_path / "state")})
    args = [
        "evaluate",
        "--agent",
        "toy/solver",
        "-s",
        "toy/[hr]*",
        "--trials",
        "2",
        "--workers",
        "2",
    ]
    args += ["--option", "harness_server=1", "--option", "setup_delay=0.2"]
    procs = [
        subprocess.Popen(
            [*ITBENCH, *args, "--out", out],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for out in ("a", "b")
    ]
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.stderr.read() if proc.stderr else ""
    for out in ("a", "b"):
        rows = results(tmp_path / out)
        assert len(rows) == TRIALS and {r["status"] for r in rows} == {"passed"}
    handles = {r["handle"] for out in ("a", "b") for r in results(tmp_path / out)}
    assert len(handles) == 2 * TRIALS
