"""Shared fixtures: the test plugin packages installed for real with pip, and a CLI runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fuzzing import load_profile

load_profile()  # before any test module builds its hypothesis settings

PLUGINS = Path(__file__).parent / "plugins"
ITBENCH = [sys.executable, "-m", "itbench.cli"]

#: A toy scenario whose corrupted key is drawn per trial from four candidates.
PICK = """\
domain: toy
id: toy/pick
title: One corrupted key, drawn per trial
goal: One value of the registry is invalid. Name its key and repair it.
task_types: [localization, mitigation]
time_limit: 30
values: {north: 1, south: 2, east: 3, west: 4}
ground_truth: {key: null, expected: 0}
candidates: [north, south, east, west]
"""


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site directory with the toy and broken plugin distributions installed by pip."""
    site = tmp_path_factory.mktemp("plugin-site")
    return pip_install_into(site, PLUGINS / "itbench-toy", PLUGINS / "itbench-broken")


def pip_install_into(site: Path, *distributions: Path) -> Path:
    """Install local distributions (no dependencies, no network) into the directory ``site``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(site),
            *map(str, distributions),
        ],
        check=True,
    )
    return site


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> object:
        return json.loads(self.stdout)


CliFn = Callable[..., Result]


def _env(site: Path, extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITBENCH_")}
    inherited = os.environ.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join([str(site), *([inherited] if inherited else [])])
    env["COLUMNS"] = "200"
    for key, value in (extra or {}).items():
        # A test's PYTHONPATH goes first; the plugin site and the inherited path stay on it.
        env[key] = f"{value}{os.pathsep}{env[key]}" if key == "PYTHONPATH" else value
    return env


@pytest.fixture
def itbench(plugin_site: Path, tmp_path: Path) -> CliFn:
    """Run the real ``itbench`` CLI in a subprocess with the test plugins installed."""

    def run(
        *args: str, env: dict[str, str] | None = None, timeout: float = 120, cwd: Path | None = None
    ) -> Result:
        proc = subprocess.run(
            [*ITBENCH, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_env(plugin_site, env),
            cwd=cwd or tmp_path,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return run


def results(run: Path) -> list[dict[str, Any]]:
    """The lines of a run's ``results.jsonl``."""
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def trial_records(run: Path) -> dict[str, Path]:
    """Each trial directory of a run, by the trial id its harness-only ``trial.json`` names."""
    out: dict[str, Path] = {}
    for record in sorted((run / "trials").glob("*/trial.json")):
        data = json.loads(record.read_text())
        assert data["handle"] == record.parent.name, record
        out[data["trial_id"]] = record.parent
    return out


def trial_dir(run: Path, trial_id: str) -> Path:
    """The directory of trial ``trial_id``: by the handle of its result, else by its record.

    When the trial has a result, its handle and the directory's ``trial.json`` must agree.
    """
    records = trial_records(run)
    rows = (
        [r for r in results(run) if r["trial_id"] == trial_id]
        if (run / "results.jsonl").exists()
        else []
    )
    if rows:
        [row] = rows
        path = run / "trials" / row["handle"]
        assert records.get(trial_id) == path, (trial_id, row["handle"], records)
        return path
    assert trial_id in records, (trial_id, sorted(records))
    return records[trial_id]


def workspace_of(run: Path, trial_id: str) -> Path:
    """The workspace of trial ``trial_id`` (named by the same handle as its directory)."""
    return run / "workspaces" / trial_dir(run, trial_id).name


@pytest.fixture
def toy_bench(plugin_site: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """An in-process Bench with only the toy plugin (entry points not autoloaded)."""
    monkeypatch.syspath_prepend(str(plugin_site))
    from itbench.bench import Bench

    return Bench(plugins=["itbench_toy.plugin"], autoload=False)


def processes_pointing_into(root: Path) -> list[int]:
    """Processes (other than this one) whose command line names a path under ``root``."""
    mark = str(root).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if mark in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def start_slow_toy_run(
    plugin_site: Path, tmp_path: Path, *executor: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], Path]:
    """Start ``itbench evaluate`` of eight slow toy trials with detached daemons, 2 workers.

    Returns the process (stderr piped) and its run directory ``tmp_path/r``.
    """
    args = ["evaluate", "--agent", "toy/slow", "-s", "toy/[hr]*", "--trials", "2"]
    args += ["--option", "harness_server=detached", "--option", "setup_delay=0.5"]
    args += [*executor, "--workers", "2", "--out", "r"]
    full = _env(plugin_site, {"ITBENCH_STATE_DIR": str(tmp_path / "state"), **(env or {})})
    proc = subprocess.Popen(
        [*ITBENCH, *args],
        cwd=tmp_path,
        env=full,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, tmp_path / "r"


def trials_in_flight(run: Path) -> list[Path]:
    """Trial directories of ``run`` past setup (their task was handed over)."""
    trials = run / "trials"
    return [d for d in trials.iterdir() if (d / "task.json").exists()] if trials.is_dir() else []


def check_run_after_a_lost_worker(run: Path, trials: int = 8) -> None:
    """Every trial recorded once (passed, or an error naming the twice-lost worker), and
    nothing the lost attempt left (its daemon, its directory) remains."""
    rows = results(run)
    ids = [r["trial_id"] for r in rows]
    assert len(ids) == trials and len(set(ids)) == trials
    statuses = {r["status"] for r in rows}
    assert statuses <= {"passed", "error"} and "passed" in statuses
    errors = [r["error"] for r in rows if r["status"] == "error"]
    assert all("worker lost twice" in (e or "") for e in errors), errors
    assert processes_pointing_into(run) == []
    assert {d.name for d in (run / "trials").iterdir()} == {r["handle"] for r in rows}
