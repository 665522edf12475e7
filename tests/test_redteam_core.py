"""Red-team findings against reports, leaderboards, cleanup and the Ray executor.

Each test states what should hold and fails on the code it was written against; see the review
report for the reasoning, severity and recommended fix of each.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ITBENCH, CliFn, _env, results

from itbench.errors import RunDirError
from itbench.models import RunConfig, TrialStatus
from itbench.runner import Runner


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private itbench state directory (records of runs in progress)."""
    path = tmp_path / "state"
    monkeypatch.setenv("ITBENCH_STATE_DIR", str(path))
    return path


def _run(toy_bench: Any, out: Path, agent: str, scenarios: list[str], **kw: Any) -> Path:
    config = RunConfig(agent=agent, scenarios=scenarios, **kw)
    Runner(toy_bench, config, out).run()
    return out


def _board(toy_bench: Any, board: Path) -> tuple[str, dict[str, Any], list[str]]:
    from itbench.report.leaderboard import build

    files, refused = build(board, toy_bench.catalog.scenarios)
    return files[board / "overall.md"], json.loads(files[board / "overall.json"]), refused


# --- leaderboard ----------------------------------------------------------------------------


def test_leaderboard_labels_agent_and_model_come_from_the_hashed_files(
    toy_bench: Any, tmp_path: Path, state: Path
) -> None:
    """F1: summary.json is not hashed, yet the board takes agent, model and labels from it.

    Editing only summary.json turns the oracle's reference run into "acme/agent-x", sandboxed,
    without a note; every hash still matches, so nothing is refused.
    """
    from itbench.report.leaderboard import add_run

    run = _run(toy_bench, tmp_path / "r", "oracle", ["toy/*"])
    board = tmp_path / "board"
    entry = add_run(run, board, "oracle", "0.1.0", toy_bench, provenance=False)
    summary = json.loads((entry / "summary.json").read_text())
    summary.update(labels=[], agent="acme/agent-x", model="acme-7b")
    (entry / "summary.json").write_text(json.dumps(summary))
    _, data, refused = _board(toy_bench, board)
    if refused:
        return  # refusing the edited entry is a fix too
    [row] = data["rows"]
    assert row["agent"] == "oracle", row
    assert "reference" in row["notes"] and row["sandboxed"] is False, row


def test_leaderboard_marks_a_run_whose_planned_trials_are_missing(
    toy_bench: Any, tmp_path: Path, state: Path
) -> None:
    """F2a: lines deleted from results.jsonl before `leaderboard add` go unnoticed.

    The oracle whose writes kill the harness server is invalid on the three registry
    scenarios and passes the healthy one. Dropping the three invalid lines leaves a 1.000 entry
    without the "invalid trials" note and with nothing saying 3 of 4 planned trials are gone.
    """
    from itbench.report.leaderboard import add_run

    run = _run(toy_bench, tmp_path / "r", "oracle", ["toy/*"], options={"tamper": "server"})
    path = run / "results.jsonl"
    lines = path.read_text().splitlines()
    assert sorted(json.loads(x)["status"] for x in lines) == ["invalid"] * 3 + ["passed"]
    path.write_text("".join(x + "\n" for x in lines if json.loads(x)["status"] == "passed"))
    try:
        add_run(run, tmp_path / "board", "cherry", "0.1.0", toy_bench, provenance=False)
    except RunDirError as exc:
        assert "field 'chain'" in str(exc), exc  # lines removed: off the results chain
        return
    _, data, refused = _board(toy_bench, tmp_path / "board")
    if refused:
        return
    [row] = data["rows"]
    assert row["pass_rate"] < 1.0 or any("missing" in n or "incomplete" in n for n in row["notes"])


def test_leaderboard_shows_infrastructure_errors(
    toy_bench: Any, tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F2b: errors are excluded from the pass rate and invisible in the Markdown board.

    Three of four trials end in an infrastructure error; the board's Markdown row reads
    "trials 4, pass rate 1.000" with no errors column and no note.
    """
    from itbench.errors import InfrastructureError
    from itbench.report.leaderboard import add_run

    domain = toy_bench.domains["toy"]
    original = domain.create_environment

    def flaky(spec: Any, ctx: Any) -> Any:
        if spec.id.startswith("toy/registry"):
            raise InfrastructureError("setup broke")
        return original(spec, ctx)

    monkeypatch.setattr(domain, "create_environment", flaky)
    run = _run(toy_bench, tmp_path / "r", "oracle", ["toy/*"])
    assert sorted(r["status"] for r in results(run)) == ["error"] * 3 + ["passed"]
    add_run(run, tmp_path / "board", "flaky", "0.1.0", toy_bench, provenance=False)
    md, data, _ = _board(toy_bench, tmp_path / "board")
    [row] = data["rows"]
    header = next(line for line in md.splitlines() if line.startswith("| agent"))
    assert "errors" in header or "scored" in header or any("error" in n for n in row["notes"]), md


def test_leaderboard_rows_of_one_agent_kind_keep_their_labels_apart(
    toy_bench: Any, tmp_path: Path, state: Path
) -> None:
    """Two labelled runs of one agent are two rows named by their labels, never merged."""
    from itbench.report.leaderboard import add_run

    board = tmp_path / "board"
    a = _run(toy_bench, tmp_path / "a", "toy/solver", ["toy/*"], label="solver-v1")
    b = _run(toy_bench, tmp_path / "b", "toy/solver", ["toy/*"], label="solver-v2")
    add_run(a, board, "a", "0.1.0", toy_bench, provenance=False)
    add_run(b, board, "b", "0.1.0", toy_bench, provenance=False)
    md, data, refused = _board(toy_bench, board)
    assert refused == []
    assert sorted(r["label"] for r in data["rows"]) == ["solver-v1", "solver-v2"]
    assert "| solver-v1 (toy/solver) |" in md and "| solver-v2 (toy/solver) |" in md, md


def test_leaderboard_markdown_cannot_be_broken_by_a_model_name(
    toy_bench: Any, tmp_path: Path, state: Path
) -> None:
    """F3: `--option llm_model=...` reaches the Markdown board unescaped (newlines, raw HTML).

    An honest pipeline (evaluate, leaderboard add, leaderboard) with a model named
    "gpt\\n\\n<!--" ends the table and opens an HTML comment that hides every lower row.
    """
    from itbench.report.leaderboard import add_run

    board = tmp_path / "board"
    a = _run(toy_bench, tmp_path / "a", "oracle", ["toy/*"], options={"llm_model": "gpt\n\n<!--"})
    b = _run(toy_bench, tmp_path / "b", "toy/solver", ["toy/*"])
    add_run(a, board, "a", "0.1.0", toy_bench, provenance=False)
    add_run(b, board, "b", "0.1.0", toy_bench, provenance=False)
    md, _, _ = _board(toy_bench, board)
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| agent"))
    table = lines[start : start + 4]
    assert all(line.startswith("|") and line.endswith("|") for line in table), md
    assert "<!--" not in md, md


def test_leaderboard_does_not_call_the_in_process_oracle_sandboxed(
    toy_bench: Any, tmp_path: Path, state: Path
) -> None:
    """F4: `sandboxed` is "not labelled unsandboxed", so the in-process oracle reads "yes"."""
    from itbench.report.leaderboard import add_run

    run = _run(toy_bench, tmp_path / "r", "oracle", ["toy/healthy"])
    add_run(run, tmp_path / "board", "oracle", "0.1.0", toy_bench, provenance=False)
    _, data, _ = _board(toy_bench, tmp_path / "board")
    assert data["rows"][0]["sandboxed"] is False


def test_leaderboard_writes_only_inside_its_directory(
    toy_bench: Any, tmp_path: Path, state: Path
) -> None:
    """F0: a result's `domain` names a board file: "../../README" or "/abs/path" escape.

    `leaderboard add` accepts a run whose results say `"domain": "../../README"`; building the
    board then writes README.md (and README.json) two levels above the leaderboard directory,
    and an absolute domain writes wherever the maintainer can write.
    """
    from itbench.report.leaderboard import add_run, build

    run = _run(toy_bench, tmp_path / "r", "toy/solver", ["toy/registry-*"])
    path = run / "results.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows[0]["domain"] = "../../README"
    rows[1]["domain"] = str(tmp_path / "elsewhere" / "x")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    board = tmp_path / "repo" / "leaderboards"
    try:
        add_run(run, board, "evil", "0.1.0", toy_bench, provenance=False)
    except RunDirError:
        return  # refusing such a run at `add` is a fix too
    files, refused = build(board, toy_bench.catalog.scenarios)
    outside = [p for p in files if p.resolve().parent != board.resolve()]
    assert outside == [] or refused, outside


# --- reports --------------------------------------------------------------------------------


def test_report_refuses_the_same_run_twice(toy_bench: Any, tmp_path: Path, state: Path) -> None:
    """F5: the same run given twice (or a copy of it) is merged: pass^3 from one trial each."""
    from itbench.report import build, frames

    run = _run(toy_bench, tmp_path / "r", "toy/solver", ["toy/registry-*"])
    try:
        report = build(frames([run, run, run]), k=3)
    except RunDirError:
        return
    row = report.summary.iloc[0]
    assert row["trials"] == 3 and math.isnan(row["pass^3"]), row.to_dict()


def test_pass_at_k_does_not_silently_drop_problems_with_errors(
    toy_bench: Any, tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F6: pass@k averages only problems with >= k scored trials, and says not how many.

    toy/healthy: 3 passes. toy/registry-alpha-1: one invalid trial (a failure) and two
    infrastructure errors. pass@3 covers only the healthy problem and reads 1.000 while the failing
    problem has left it; nothing in the summary tells.
    """
    from itbench.errors import InfrastructureError
    from itbench.report import build, frames
    from itbench.report.tables import summarize

    domain = toy_bench.domains["toy"]
    original = domain.create_environment
    calls = {"n": 0}

    def flaky(spec: Any, ctx: Any) -> Any:
        if spec.id == "toy/registry-alpha-1":
            calls["n"] += 1
            if calls["n"] > 1:
                raise InfrastructureError("setup broke")
        return original(spec, ctx)

    monkeypatch.setattr(domain, "create_environment", flaky)
    run = _run(
        toy_bench,
        tmp_path / "r",
        "oracle",
        ["toy/healthy", "toy/registry-alpha-1"],
        trials=3,
        options={"tamper": "fingerprint"},  # the oracle's one alpha trial is invalid: a failure
    )
    report = build(frames([run]), k=3)
    # toy/healthy is a control, scored apart in the report: summarize both problems together.
    row = summarize(report.frames.trials, k=3).iloc[0].to_dict()
    assert (row["errors"], row["invalid"], row["problems"], row["passed"]) == (2, 1, 2, 3), row
    coverage = [k for k in row if k.startswith("pass@3") and k != "pass@3"]
    assert math.isnan(row["pass@3"]) or coverage, row


def test_html_report_survives_dollar_signs_in_names(
    toy_bench: Any, tmp_path: Path, state: Path
) -> None:
    """F7: matplotlib parses "$...$" in agent names, facets and domains as mathtext."""
    from itbench.report.dataset import frames_of
    from itbench.report.html import page
    from itbench.report.tables import build
    from itbench.store import RunStore

    run = _run(toy_bench, tmp_path / "r", "toy/solver", ["toy/registry-*"])
    store = RunStore(run)
    manifest = store.read_manifest()
    results = store.results(manifest)
    # Tables name a run by its label (by default its agent): a label of "$...$".
    labelled = manifest.config.model_copy(update={"label": "team$x^$"})
    report = build(frames_of([(manifest.model_copy(update={"config": labelled}), results)]))
    assert "team$x^$" in page(report)


# --- cleanup and pid records ----------------------------------------------------------------


EXTRA = """domain: toy
id: toy/extra
title: Extra
goal: One value of the registry is invalid. Name its key and repair it.
task_types: [localization, mitigation]
complexity: low
time_limit: 30
values: {alpha: 1, beta: 2}
ground_truth: {key: alpha, expected: 1}
"""


def test_cleanup_uses_the_runs_own_catalog_and_plugins(
    itbench: CliFn, plugin_site: Path, tmp_path: Path
) -> None:
    """F8: `itbench cleanup` loads the catalog of its own command line, not the run's.

    A run with `--scenario-path` is killed during the agent's turn, its daemon alive. Cleanup
    without the same flag finds no domain for the trial, skips `Domain.recover`, deletes the
    trial directory (with the daemon's pid record) and says "1 unfinished trial(s) cleaned up".
    """
    extra = tmp_path / "extra" / "toy"
    extra.mkdir(parents=True)
    (extra / "extra.yaml").write_text(EXTRA)
    env = _env(plugin_site, {"ITBENCH_STATE_DIR": str(tmp_path / "state")})
    args = ["evaluate", "--agent", "toy/slow", "-s", "toy/extra", "--scenario-path", "extra"]
    args += ["--option", "harness_server=detached", "--out", "r"]
    proc = subprocess.Popen([*ITBENCH, *args], cwd=tmp_path, env=env, stderr=subprocess.DEVNULL)
    run = tmp_path / "r"
    end = time.monotonic() + 90
    while time.monotonic() < end and not list(run.glob("trials/*/task.json")):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    [pidfile] = list(run.glob("trials/*/pids/status.pid"))
    pid = int(pidfile.read_text().split()[0])
    try:
        assert _alive(pid)
        res = itbench("cleanup", "r", env={"ITBENCH_STATE_DIR": str(tmp_path / "state")})
        assert res.returncode == 0, res.stderr
        time.sleep(0.5)
        assert not _alive(pid), "cleanup reported success and left the daemon running"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_pid_record_without_start_time_is_never_signalled(tmp_path: Path) -> None:
    """F10: a record holding only a pid is signalled whatever process now has that pid.

    Such records are what the previous release wrote, and what `record_pid` still writes for
    a process that has already exited; once the pid is reused, cleanup kills a stranger.
    """
    from itbench.process import record_pid, stop_recorded

    trial = tmp_path / "trial"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    record_pid(trial, "gone", gone.pid)
    record = trial / "pids" / "gone.pid"
    # A process that already exited is not recorded at all (or with its start time).
    written = record.read_text().split() if record.exists() else ["", "", "", ""]
    stranger = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        # The stranger now holds the pid a start-time-less record names (pid reuse).
        (trial / "pids" / "gone.pid").write_text(str(stranger.pid))
        stop_recorded(trial, timeout=1)
        time.sleep(0.2)
        assert stranger.poll() is None, "an unrelated process was killed"
        assert len(written) >= 2, "record_pid wrote a record without a start time"
    finally:
        stranger.kill()
        stranger.wait()


# --- runner and Ray executor ----------------------------------------------------------------


def test_a_teardown_failure_does_not_turn_invalid_into_error(
    toy_bench: Any, tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F11: teardown errors overwrite the verdict: tampering + a broken teardown = `error`.

    `error` is excluded from every score, `invalid` counts as a failure; an agent that can make
    teardown raise (its domain's teardown tripping on what the agent left) hides its tampering.
    """
    from itbench_toy.domain import ToyEnvironment

    original = ToyEnvironment.teardown

    def brittle(self: Any) -> None:
        original(self)
        if self.limit != 1000:  # the agent tampered: teardown trips on what it left
            raise RuntimeError("cannot restore the registry")

    monkeypatch.setattr(ToyEnvironment, "teardown", brittle)
    out = _run(
        toy_bench,
        tmp_path / "r",
        "oracle",
        ["toy/registry-alpha-1"],
        options={"tamper": "fingerprint"},
    )
    [row] = results(out)
    assert row["status"] == TrialStatus.invalid.value, row["error"]


class _FakeRay:
    """Just enough of Ray for ``RayExecutor._collect``."""

    def __init__(self, exc: BaseException) -> None:
        import ray

        self.exceptions = ray.exceptions
        self._exc = exc

    def get(self, ref: Any) -> Any:
        raise self._exc


@pytest.mark.parametrize("kind", ["OutOfMemoryError", "LocalRayletDiedError"])
def test_a_worker_killed_by_ray_is_recovered(kind: str) -> None:
    """F9: only four Ray errors count as a lost worker; the rest skip recovery.

    Ray's memory monitor kills a worker with OutOfMemoryError (an agent that eats memory can
    trigger it): the trial is recorded as `error` at once, nothing it left is stopped or
    removed, and `itbench cleanup` never looks at it again (it has a result).
    """
    pytest.importorskip("ray")
    import ray

    from itbench.cluster import RayExecutor

    cls = getattr(ray.exceptions, kind)
    exc = (
        cls("Task was killed due to the node running low on memory.")
        if kind == "OutOfMemoryError"
        else cls()
    )
    recovered: list[str] = []
    recorded: list[Any] = []

    class Job:
        options: dict[str, Any] = {}

        def recover(self, trial: Any) -> None:
            recovered.append(trial)

        def error_result(self, trial: Any, reason: str) -> str:
            return f"error: {reason}"

    RayExecutor()._collect(
        _FakeRay(exc), object(), "t", 0, Job(), recorded.append, lambda *a: recorded.append(a)
    )
    assert recovered == ["t"], recorded


# --- a new user's path ----------------------------------------------------------------------


@pytest.fixture
def toy_run(itbench: CliFn, tmp_path: Path) -> Path:
    res = itbench("evaluate", "--agent", "toy/solver", "-s", "toy/healthy", "--out", "r")
    assert res.returncode == 0, res.stderr
    return tmp_path / "r"


@pytest.mark.parametrize(
    "damage",
    ["manifest-not-utf8", "manifest-is-a-dir", "results-is-a-dir"],
)
@pytest.mark.parametrize("command", ["report", "cleanup", "resume", "leaderboard-add"])
def test_damaged_run_directories_give_an_error_not_a_traceback(
    itbench: CliFn, toy_run: Path, damage: str, command: str
) -> None:
    """F12: unreadable files of a run directory end in a Python traceback."""
    name = "manifest.json" if damage.startswith("manifest") else "results.jsonl"
    path = toy_run / name
    path.unlink()
    if damage.endswith("not-utf8"):
        path.write_bytes(b"\xff\xfe{}\n")
    else:
        path.mkdir()
    args = {
        "report": ["report", "r"],
        "cleanup": ["cleanup", "r"],
        "resume": ["evaluate", "--resume", "r"],
        "leaderboard-add": ["leaderboard", "add", "r", "--name", "x", "--dir", "b"],
    }[command]
    res = itbench(*args)
    assert res.returncode != 0
    assert "Traceback" not in res.stderr and name in res.stderr, res.stderr


def test_leaderboard_errors_name_the_file_and_the_field(
    itbench: CliFn, toy_run: Path, tmp_path: Path
) -> None:
    """F12: a bad summary.json says only "1 validation error for RunSummary"; a missing
    --dir is a traceback; `--name` takes a newline."""
    assert itbench("leaderboard", "add", "r", "--name", "a", "--dir", "b").returncode == 0
    summary = tmp_path / "b" / "runs" / "a" / "summary.json"
    data = json.loads(summary.read_text())
    data["trials"] = "many"
    summary.write_text(json.dumps(data))
    res = itbench("leaderboard", "--dir", "b")
    assert res.returncode == 1 and "trials" in res.stderr, res.stderr
    res = itbench("leaderboard", "--dir", "missing")
    assert "Traceback" not in res.stderr and "missing" in res.stderr, res.stderr
    res = itbench("leaderboard", "add", "r", "--name", "two\nlines", "--dir", "b")
    assert res.returncode == 2, res.stdout


def test_compare_keeps_the_labels(itbench: CliFn, tmp_path: Path) -> None:
    """F13: compare names neither agent nor label: oracle [reference] vs an agent reads as two
    plain runs."""
    for agent, out in (("oracle", "o"), ("toy/solver", "s")):
        assert (
            itbench("evaluate", "--agent", agent, "-s", "toy/healthy", "--out", out).returncode == 0
        )
    res = itbench("compare", "o", "s")
    assert res.returncode == 0, res.stderr
    assert "[reference]" in res.stdout and "[unsandboxed]" in res.stdout, res.stdout
