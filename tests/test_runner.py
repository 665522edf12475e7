"""The trial lifecycle, run for real on the toy domain through the CLI and in process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import PICK, CliFn, results, trial_dir, workspace_of

from itbench import Agent, AgentContext, AgentSpec, Deadline, Submission, TaskView, Toolbox
from itbench.bench import Bench
from itbench.models import RunConfig, TrialStatus
from itbench.plan import plan_trials, trial_seed
from itbench.runner import Runner
from itbench.testing import run_scenarios


def test_oracle_passes_noop_fails_and_artifacts_are_written(itbench: CliFn, tmp_path: Path) -> None:
    res = itbench("evaluate", "--agent", "oracle", "-s", "toy/[hr]*", "--trials", "2", "--out", "o")
    assert res.returncode == 0, res.stderr
    assert "results" in res.stdout and "8 passed" in res.stdout
    rows = results(tmp_path / "o")
    assert len(rows) == 8 and {r["status"] for r in rows} == {"passed"}
    assert all(r["schema_version"] == "1.0" for r in rows)
    trial = trial_dir(tmp_path / "o", "toy.registry-alpha-1__oracle__0")
    assert {"trial.json", "task.json", "tools.jsonl", "submission.json", "evaluation.json"} <= {
        p.name for p in trial.iterdir()
    }
    # Trial directories and workspaces are named by random handles, never by the trial.
    handles = {r["handle"] for r in rows}
    assert len(handles) == 8 and {p.name for p in (tmp_path / "o" / "trials").iterdir()} == handles
    assert {p.name for p in (tmp_path / "o" / "workspaces").iterdir()} == handles
    assert not any("toy" in h or "oracle" in h for h in handles)
    assert all(r["labels"] == ["reference"] for r in rows)
    assert (trial / "teardown.count").read_text() == "1"
    noop = itbench("evaluate", "--agent", "noop", "-s", "toy/[hr]*", "--out", "n", "--json")
    assert noop.returncode == 0
    assert {r["status"] for r in noop.json()["results"]} == {"failed"}  # type: ignore[index]


def test_task_view_never_contains_ground_truth(itbench: CliFn, tmp_path: Path) -> None:
    itbench("evaluate", "--agent", "oracle", "-s", "toy/registry-gamma-3", "--out", "o")
    trial = trial_dir(tmp_path / "o", "toy.registry-gamma-3__oracle__0")
    task = json.loads((trial / "task.json").read_text())
    text = json.dumps(task)
    assert "ground_truth" not in text and "expected" not in text
    assert "registry-gamma" not in text and "Corrupted registry key" not in text
    assert task["handle"] == trial.name and "trial_id" not in task and "scenario_id" not in task
    assert (
        task["goal"].startswith("One value") and task["tools"][0]["parameters"]["type"] == "object"
    )
    # The agent's path to its workspace names only the handle, never the run directory.
    seen = Path(task["workspace"])
    assert seen.name == trial.name and str(tmp_path) not in str(seen)
    assert "trials" not in seen.parts  # outside the harness-private artifacts
    assert workspace_of(tmp_path / "o", "toy.registry-gamma-3__oracle__0").is_dir()
    assert not seen.is_symlink()  # the alias is gone with its trial


def test_manifest_records_config_versions_git_seeds_and_host(
    itbench: CliFn, tmp_path: Path
) -> None:
    itbench(
        "evaluate",
        "--agent",
        "oracle",
        "-s",
        "toy/healthy",
        "--trials",
        "3",
        "--seed",
        "7",
        "--out",
        "o",
    )
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert manifest["config"]["seed"] == 7 and manifest["config"]["trials"] == 3
    assert manifest["packages"]["itbench-toy"] == "0.3.0" and "python" in manifest["packages"]
    assert "git_revision" in manifest and manifest["host"]["cpus"] >= 1
    assert manifest["seeds"]["toy.healthy__oracle__2"] == trial_seed(7, "toy/healthy", "oracle", 2)
    assert len(set(manifest["seeds"].values())) == 3
    assert {r["seed"] for r in results(tmp_path / "o")} == set(manifest["seeds"].values())


def test_agent_hang_is_a_timeout_and_teardown_still_runs(itbench: CliFn, tmp_path: Path) -> None:
    res = itbench(
        "evaluate", "--agent", "toy/sleeper", "-s", "toy/healthy", "--timeout", "0.5", "--out", "t"
    )
    assert res.returncode == 0, res.stderr  # a timeout is the agent's failure, not infrastructure
    [row] = results(tmp_path / "t")
    assert row["status"] == "timeout" and "time limit of 0.5s" in row["error"]
    assert 0.4 < row["timings"]["agent"] < 5
    trial = trial_dir(tmp_path / "t", "toy.healthy__toy_sleeper__0")
    assert (trial / "teardown.count").read_text() == "1"


def test_agent_exception_is_a_failure_not_an_error(itbench: CliFn, tmp_path: Path) -> None:
    res = itbench("evaluate", "--agent", "toy/crasher", "-s", "toy/healthy", "--out", "c")
    assert res.returncode == 0
    [row] = results(tmp_path / "c")
    assert row["status"] == "failed" and "agent raised RuntimeError: agent bug" in row["error"]
    trial = trial_dir(tmp_path / "c", "toy.healthy__toy_crasher__0")
    assert "Traceback" in (trial / "agent-error.txt").read_text()


def test_setup_failure_is_an_error_exit_1_and_teardown_runs(itbench: CliFn, tmp_path: Path) -> None:
    res = itbench(
        "evaluate",
        "--agent",
        "oracle",
        "-s",
        "toy/healthy",
        "--option",
        "fail_setup=1",
        "--out",
        "e",
    )
    assert res.returncode == 1
    [row] = results(tmp_path / "e")
    assert row["status"] == "error" and "setup failed on purpose" in row["error"]
    trial = trial_dir(tmp_path / "e", "toy.healthy__oracle__0")
    assert (trial / "teardown.count").read_text() == "1"


def test_usage_errors_exit_2(itbench: CliFn) -> None:
    assert itbench("evaluate", "--agent", "nobody", "-s", "toy/*", "--out", "u").returncode == 2
    res = itbench("evaluate", "--agent", "oracle", "-s", "nothing/*", "--out", "u2")
    assert res.returncode == 2 and "no scenario matches" in res.stderr
    assert itbench("evaluate", "--agent", "oracle", "--trials", "0").returncode == 2
    assert itbench("evaluate", "--agent", "oracle", "--option", "novalue").returncode == 2
    assert itbench("evaluate", "--resume", "missing-dir").returncode == 2


def test_reusing_a_run_directory_without_resume_is_refused(itbench: CliFn) -> None:
    assert (
        itbench("evaluate", "--agent", "oracle", "-s", "toy/healthy", "--out", "r").returncode == 0
    )
    res = itbench("evaluate", "--agent", "oracle", "-s", "toy/healthy", "--out", "r")
    assert res.returncode == 2 and "--resume" in res.stderr


def test_parallel_workers_get_disjoint_port_blocks(toy_bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    seen: list[tuple[int, int]] = []
    domain = toy_bench.domains["toy"]
    original = domain.create_environment

    def spy(spec, ctx):  # type: ignore[no-untyped-def]
        seen.append((ctx.port_base, ctx.port_count))
        return original(spec, ctx)

    domain.create_environment = spy
    config = RunConfig(
        agent="oracle", scenarios=["toy/*"], trials=3, workers=3, options={"setup_delay": 0.2}
    )
    outcome = Runner(toy_bench, config, tmp_path / "w").run()
    assert len(outcome.results) == 12 and all(
        r.status is TrialStatus.passed for r in outcome.results
    )
    assert all(count == 2 for _, count in seen)
    assert len({r.trial_id for r in outcome.results}) == 12
    # With three trials in flight at once, at least three distinct blocks were handed out.
    assert len({base for base, _ in seen}) >= 3


def test_plan_is_stable_and_ids_are_file_system_safe(toy_bench) -> None:  # type: ignore[no-untyped-def]
    specs = toy_bench.catalog.select(["toy/*"])
    config = RunConfig(agent="vendor/model:x", trials=2)
    a, b = plan_trials(specs, config), plan_trials(specs, config)
    assert [t.trial_id for t in a] == [t.trial_id for t in b]
    assert all("/" not in t.trial_id and ":" not in t.trial_id for t in a)
    assert [t.seed for t in a] == [t.seed for t in b]


def test_targets_are_drawn_per_trial_recorded_and_given_to_the_oracle(
    itbench: CliFn, tmp_path: Path
) -> None:
    (tmp_path / "cat" / "toy").mkdir(parents=True)
    (tmp_path / "cat" / "toy" / "pick.yaml").write_text(PICK)
    run = ("evaluate", "--agent", "oracle", "-s", "toy/pick", "--scenario-path", "cat")
    res = itbench(*run, "--trials", "8", "--out", "o")
    assert res.returncode == 0, res.stderr
    rows = results(tmp_path / "o")
    assert {r["status"] for r in rows} == {"passed"}  # the oracle got the drawn spec
    drawn = [r["drawn"]["key"] for r in rows]
    assert set(drawn) <= {"north", "south", "east", "west"} and len(set(drawn)) > 1
    assert all(r["facets"] == {"fault": "corrupted-key", "control": "no"} for r in rows)
    for r in rows:  # what was drawn never reaches the agent
        task = (tmp_path / "o" / "trials" / r["handle"] / "task.json").read_text()
        assert r["drawn"]["key"] not in task
    # The draw comes from the run's secret: the public seed alone does not decide it.
    itbench(*run, "--trials", "8", "--out", "p")
    assert [r["drawn"]["key"] for r in results(tmp_path / "p")] != drawn
    listed = itbench("list", "toy/pick", "--scenario-path", "cat", "--json").json()
    assert listed[0]["facets"] == {"fault": "corrupted-key"}  # type: ignore[index]
    healthy = itbench("list", "toy/healthy", "--json").json()
    assert healthy[0]["facets"] == {"fault": "none"}  # type: ignore[index]


def test_one_deadline_reaches_the_task_view_the_toolbox_and_the_agent(
    toy_bench: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner computes the turn's end once: the task view shows it (with ``--timeout``'s
    limit), the toolbox refuses calls after it and the agent's context holds the same one."""
    seen: list[tuple[Any, Any, Any]] = []

    class Watcher(Agent):
        def __init__(self, ctx: AgentContext) -> None:
            super().__init__()
            self.ctx = ctx

        def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
            seen.append((self.ctx.deadline, task, toolbox.deadline))
            return None

    monkeypatch.setattr(
        toy_bench, "agents", {**toy_bench.agents, "watcher": AgentSpec("watcher", Watcher, "")}
    )
    run_scenarios("watcher", ["toy/healthy"], tmp_path / "run", bench=toy_bench, timeout=7.5)
    [(deadline, task, box_deadline)] = seen
    assert isinstance(deadline, Deadline) and box_deadline is deadline
    assert deadline.seconds == 7.5 and task.time_limit == 7.5
    assert task.deadline == deadline.when and deadline.remaining() < 7.5
